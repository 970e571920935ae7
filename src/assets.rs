//! Fetching, decoding, caching and writing the repository's immutable objects:
//! snapshots, manifests, transaction logs and native chunks; and, in spec 2, the
//! `repo` object, whose parent links complete the snapshots read.
//!
//! Snapshots, manifests and transaction logs never change once written (Icechunk
//! specification, "Storage Operations"), so decoded copies are cached by id and shared
//! between sessions. Decoding of large objects runs on the compute pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use quick_cache::sync::Cache;

use crate::error::{Error, Result};
use crate::format::config::RepoUpdateRetryConfig;
use crate::format::envelope::FileType;
use crate::format::keys;
use crate::format::manifest::Manifest;
use crate::format::repo_info::RepoInfo;
use crate::format::snapshot::{ManifestFileInfo, Snapshot, SnapshotHeader, SnapshotNodes};
use crate::format::transaction_log::TransactionLog;
use crate::format::{ChunkId, FormatError, ManifestId, SnapshotId, SpecVersion};
use crate::storage::{ObjectVersion, Storage, StorageError, StorageResult, WriteOutcome};

/// Reads and writes format objects through a [`Storage`], with caches.
#[derive(Debug)]
pub struct AssetManager {
    storage: Arc<dyn Storage>,
    /// The spec version of the files this manager writes.
    spec: SpecVersion,
    /// The zstd level it writes them at (the config's `compression.level`; 0 when
    /// the config sets none and each file type has its default).
    level: AtomicI32,
    /// The configuration's `repo_update_retries`, for spec-2 `repo` object updates.
    repo_update_retries: std::sync::Mutex<RepoUpdateRetryConfig>,
    snapshots: Cache<SnapshotId, Arc<Snapshot>, SizeWeight>,
    /// Commit facts of snapshots read without their node table, weighed by
    /// [`HeaderWeight`].
    headers: Cache<SnapshotId, Arc<SnapshotHeader>, HeaderWeight>,
    manifests: Cache<ManifestId, Arc<Manifest>, SizeWeight>,
    transaction_logs: Cache<SnapshotId, Arc<TransactionLog>, SizeWeight>,
    /// Native chunk bytes read, by chunk id and byte range, when the configuration
    /// keeps some (`caching.num_bytes_chunks` > 0).
    chunk_cache: Option<Cache<(ChunkId, u64, u64), Bytes, ByteWeight>>,
    /// Spec 2: parent links from the latest `repo` object read (snapshot files do
    /// not hold them).
    parents: RwLock<HashMap<SnapshotId, Option<SnapshotId>>>,
    /// Spec 1: the snapshot each branch ref named when this manager last read or
    /// wrote it: a guess to fetch while the ref is read again, never trusted
    /// without that read.
    branch_hints: RwLock<HashMap<String, SnapshotId>>,
    /// Spec 2: the latest `repo` object read or written, by version: reused while a
    /// `head` reports the same version, so a decode happens only when it changed.
    repo_cache: RwLock<Option<RepoObject>>,
    /// Reads in flight, shared by concurrent readers of one object.
    snapshot_reads: SingleFlight<SnapshotId, Arc<Snapshot>>,
    header_reads: SingleFlight<SnapshotId, Arc<SnapshotHeader>>,
    manifest_reads: SingleFlight<ManifestId, Arc<Manifest>>,
    log_reads: SingleFlight<SnapshotId, Arc<TransactionLog>>,
    /// Keyed by `repo_generation`: a caller that learned of a newer object (wrote
    /// or read it) never joins a read that started before it did.
    repo_reads: SingleFlight<u64, RepoRead>,
    /// Counts the `repo` objects this manager learned of.
    repo_generation: std::sync::atomic::AtomicU64,
    /// The configured cache sizes, for [`AssetManager::warn_if_cache_small`].
    sizes: CacheSizes,
    /// Whether the small-cache warning was given, for manifests and for snapshots
    /// (each at most once per manager, as Icechunk).
    manifest_cache_warned: std::sync::atomic::AtomicBool,
    snapshot_cache_warned: std::sync::atomic::AtomicBool,
}

/// A `repo` object read: its bytes, decoded form and version.
type RepoRead = (Bytes, Arc<RepoInfo>, Option<ObjectVersion>);

/// Single flight: concurrent requests for one object share one read. The first caller
/// for a key runs the read; callers arriving while it is in flight wait for its
/// result instead of sending their own request (32 chunk reads of one array fetch its
/// manifest once). The value is not kept once the read ends (the caches do that).
/// When the read fails, each waiting caller tries in turn (errors are not shared).
#[derive(Debug)]
struct SingleFlight<K, V> {
    inflight: std::sync::Mutex<HashMap<K, Arc<tokio::sync::OnceCell<V>>>>,
}

impl<K, V> Default for SingleFlight<K, V> {
    fn default() -> Self {
        SingleFlight {
            inflight: std::sync::Mutex::new(HashMap::new()),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> SingleFlight<K, V> {
    /// The result of `read` for `key`, run once for all concurrent callers.
    ///
    /// # Errors
    /// What `read` returns (each caller whose shared read failed runs its own).
    async fn run<F, Fut>(&self, key: K, read: F) -> Result<V>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<V>>,
    {
        let cell = {
            let mut map = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(map.entry(key.clone()).or_default())
        };
        let out = cell.get_or_try_init(read).await.cloned();
        let mut map = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            map.remove(&key);
        }
        out
    }
}

/// A `repo` object as stored and decoded, at one version.
#[derive(Clone, Debug)]
struct RepoObject {
    version: ObjectVersion,
    bytes: Bytes,
    info: Arc<RepoInfo>,
}

/// The weight of a cached [`SnapshotHeader`]: about its size in bytes.
#[derive(Clone, Copy, Debug)]
struct HeaderWeight;

impl quick_cache::Weighter<SnapshotId, Arc<SnapshotHeader>> for HeaderWeight {
    fn weight(&self, _: &SnapshotId, h: &Arc<SnapshotHeader>) -> u64 {
        let files = h.manifest_files.len() * std::mem::size_of::<ManifestFileInfo>();
        // Metadata: its names and a guess for each value.
        let metadata: usize = h.metadata.keys().map(|k| k.len() + 64).sum();
        u64::try_from(256 + h.message.len() + files + metadata).unwrap_or(u64::MAX)
    }
}

/// The cache sizes of an [`AssetManager`] (the repository configuration's `caching`,
/// Icechunk's `CachingConfig`): `None` keeps floe's default, a count of objects
/// (512 snapshots, 256 manifests, 512 transaction logs); `Some(n)` bounds the cache
/// by content instead, as Icechunk does: snapshot nodes, manifest chunk refs,
/// transaction-log changes (0 caches none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheSizes {
    /// Nodes of the cached snapshots.
    pub snapshot_nodes: Option<u64>,
    /// Chunk refs of the cached manifests.
    pub chunk_refs: Option<u64>,
    /// Changes of the cached transaction logs.
    pub transaction_changes: Option<u64>,
    /// Bytes of native chunk data kept from reads through the storage (Icechunk's
    /// `num_bytes_chunks`; 0, its default, keeps none).
    pub chunk_bytes: u64,
}

/// Weighs cached chunk bytes by their length.
#[derive(Clone, Copy, Debug)]
struct ByteWeight;

impl quick_cache::Weighter<(ChunkId, u64, u64), Bytes> for ByteWeight {
    fn weight(&self, _: &(ChunkId, u64, u64), v: &Bytes) -> u64 {
        (v.len() as u64).max(1)
    }
}

/// The kinds of cached object [`AssetManager::warn_if_cache_small`] checks.
#[derive(Clone, Copy, Debug)]
enum CachedKind {
    Manifest,
    Snapshot,
}

/// The weight of a cached object: 1 (a count of objects) or, with `by_size`, its
/// size in the unit of [`CacheSizes`] (at least 1).
#[derive(Clone, Copy, Debug)]
struct SizeWeight {
    by_size: bool,
}

/// The size of a cached object in the unit [`CacheSizes`] bounds it by.
trait CacheSize {
    fn cache_size(&self) -> usize;
}

impl CacheSize for Snapshot {
    fn cache_size(&self) -> usize {
        self.nodes.len()
    }
}

impl CacheSize for Manifest {
    fn cache_size(&self) -> usize {
        self.num_chunk_refs()
    }
}

impl CacheSize for TransactionLog {
    fn cache_size(&self) -> usize {
        self.len()
    }
}

impl<K, V: CacheSize> quick_cache::Weighter<K, Arc<V>> for SizeWeight {
    fn weight(&self, _: &K, v: &Arc<V>) -> u64 {
        if self.by_size {
            u64::try_from(v.cache_size()).unwrap_or(u64::MAX).max(1)
        } else {
            1
        }
    }
}

/// A cache of `default` objects, or of `size` units of content when set.
fn sized_cache<K: Eq + std::hash::Hash, V: CacheSize>(
    default: usize,
    size: Option<u64>,
) -> Cache<K, Arc<V>, SizeWeight> {
    match size {
        None => Cache::with_weighter(default, default as u64, SizeWeight { by_size: false }),
        Some(units) => Cache::with_weighter(
            usize::try_from(units.min(4096)).unwrap_or(4096).max(1),
            units,
            SizeWeight { by_size: true },
        ),
    }
}

/// How many bytes of [`SnapshotHeader`]s an [`AssetManager`] keeps (16 MiB: tens of
/// thousands of commits of a long history).
const HEADER_CACHE_BYTES: u64 = 16 << 20;

/// Objects up to this many bytes are decoded, and snapshots of up to
/// [`INLINE_NODES_MAX`] nodes encoded, on the calling task: a hop to the compute pool
/// costs more than the work (an ancestry walk decodes thousands of small snapshots).
const INLINE_DECODE_MAX: usize = 16 * 1024;

/// See [`INLINE_DECODE_MAX`].
const INLINE_NODES_MAX: usize = 64;

/// Runs `f` on the calling task when `light`, otherwise as [`blocking`] does.
pub(crate) async fn maybe_blocking<T: Send + 'static>(
    light: bool,
    f: impl FnOnce() -> std::result::Result<T, FormatError> + Send + 'static,
) -> Result<T> {
    if light {
        f().map_err(Error::from)
    } else {
        blocking(f).await
    }
}

/// Decodes the object `bytes` with `decode`: on the calling task when they are at most
/// [`INLINE_DECODE_MAX`] bytes, on the compute pool otherwise.
async fn decode_object<T: Send + 'static>(
    bytes: Bytes,
    decode: fn(&[u8]) -> std::result::Result<T, FormatError>,
) -> Result<T> {
    let light = bytes.len() <= INLINE_DECODE_MAX;
    maybe_blocking(light, move || decode(&bytes)).await
}

/// Runs CPU-heavy decoding or encoding on the compute pool, off the async executor.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::result::Result<T, FormatError> + Send + 'static,
) -> Result<T> {
    crate::compute::spawn(f)
        .await
        .map_err(|e| {
            Error::Format(FormatError::InvalidData {
                what: "object",
                reason: format!("encoding or decoding task failed: {e}"),
            })
        })?
        .map_err(Error::from)
}

impl AssetManager {
    /// A manager over `storage` with default cache sizes, writing spec-1 files.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self::for_spec(storage, SpecVersion::V1)
    }

    /// A manager over `storage` with default cache sizes, writing files of spec
    /// version `spec` (the repository's).
    pub fn for_spec(storage: Arc<dyn Storage>, spec: SpecVersion) -> Self {
        Self::with_cache_sizes(storage, spec, CacheSizes::default())
    }

    /// A manager over `storage` writing files of spec version `spec`, with caches of
    /// the given sizes (the repository configuration's `caching`).
    pub fn with_cache_sizes(
        storage: Arc<dyn Storage>,
        spec: SpecVersion,
        sizes: CacheSizes,
    ) -> Self {
        AssetManager {
            storage,
            spec,
            level: AtomicI32::new(0),
            repo_update_retries: std::sync::Mutex::default(),
            branch_hints: RwLock::default(),
            snapshots: sized_cache(512, sizes.snapshot_nodes),
            headers: Cache::with_weighter(16_384, HEADER_CACHE_BYTES, HeaderWeight),
            manifests: sized_cache(256, sizes.chunk_refs),
            transaction_logs: sized_cache(512, sizes.transaction_changes),
            chunk_cache: (sizes.chunk_bytes > 0).then(|| {
                let items = usize::try_from(sizes.chunk_bytes / (64 << 10))
                    .unwrap_or(usize::MAX)
                    .clamp(16, 1 << 20);
                Cache::with_weighter(items, sizes.chunk_bytes, ByteWeight)
            }),
            parents: RwLock::new(HashMap::new()),
            repo_cache: RwLock::new(None),
            snapshot_reads: SingleFlight::default(),
            header_reads: SingleFlight::default(),
            manifest_reads: SingleFlight::default(),
            log_reads: SingleFlight::default(),
            repo_reads: SingleFlight::default(),
            repo_generation: std::sync::atomic::AtomicU64::new(0),
            sizes,
            manifest_cache_warned: std::sync::atomic::AtomicBool::new(false),
            snapshot_cache_warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Logs a warning (`tracing`, level WARN), at most once per manager and kind,
    /// when an object of `weight` units (a manifest's chunk refs or a snapshot's
    /// nodes) goes into or comes from storage while the configured `caching` bounds
    /// its cache so tightly that the cache can barely hold it: more than half the
    /// chunk-ref capacity for a manifest, more than a fifth of the node capacity for
    /// a snapshot (Icechunk 2.3.0's thresholds and wording, so its users recognise
    /// the advice). Caches sized by object count (no `caching` set) never warn.
    fn warn_if_cache_small(&self, kind: CachedKind, weight: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let (capacity, divisor, warned) = match kind {
            CachedKind::Manifest => (self.sizes.chunk_refs, 2, &self.manifest_cache_warned),
            CachedKind::Snapshot => (self.sizes.snapshot_nodes, 5, &self.snapshot_cache_warned),
        };
        let Some(capacity) = capacity else { return };
        if weight <= capacity / divisor || warned.swap(true, Relaxed) {
            return;
        }
        match kind {
            CachedKind::Manifest => tracing::warn!(
                "A manifest with {weight} chunk references is being loaded into the cache \
                 that can only keep {capacity} references. Consider increasing the size of \
                 the manifest cache using the num_chunk_refs field in CachingConfig"
            ),
            CachedKind::Snapshot => tracing::warn!(
                "A snapshot with {weight} nodes is being loaded into the cache that can \
                 only keep {capacity} nodes. Consider increasing the size of the snapshot \
                 cache using the num_snapshot_nodes field in CachingConfig"
            ),
        }
    }

    /// Fetches and decodes the spec-2 `repo` object (never cached: it is the one
    /// mutable object), with its version for compare-and-swap, and learns its parent
    /// links.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when there is none); [`Error::Format`] when
    /// corrupt.
    pub async fn fetch_repo_info(&self) -> Result<(Arc<RepoInfo>, Option<ObjectVersion>)> {
        let (_, info, version) = self.fetch_repo_object().await?;
        Ok((info, version))
    }

    /// [`AssetManager::fetch_repo_info`], with the object's bytes as stored (what
    /// an update saves under `overwritten/`).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_repo_info`].
    pub async fn fetch_repo_object(&self) -> Result<(Bytes, Arc<RepoInfo>, Option<ObjectVersion>)> {
        let generation = self.repo_generation.load(Ordering::Acquire);
        self.repo_reads
            .run(generation, || self.fetch_repo_object_once())
            .await
    }

    /// [`AssetManager::fetch_repo_object`], for the caller running the shared read.
    async fn fetch_repo_object_once(&self) -> Result<RepoRead> {
        let cached = self
            .repo_cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(c) = cached {
            // A `head` is cheaper than a fetch and a decode; the version says whether
            // the object changed.
            let head = self.storage.head(keys::SPEC2_REPO).await?;
            if head.version.as_ref() == Some(&c.version) {
                return Ok((c.bytes, c.info, Some(c.version)));
            }
        }
        self.refetch_repo_object().await
    }

    /// The `repo` object read with one GET, not re-validating the cache first: when
    /// the caller knows the cached object is stale (a compare-and-swap on it was
    /// refused).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_repo_info`].
    pub(crate) async fn refetch_repo_object(
        &self,
    ) -> Result<(Bytes, Arc<RepoInfo>, Option<ObjectVersion>)> {
        let v = self.storage.get(keys::SPEC2_REPO).await?;
        self.admit_repo_object(v).await
    }

    /// Decodes a `repo` object read from storage, learns its parent links and keeps
    /// it (with its version) for later fetches.
    ///
    /// # Errors
    /// [`Error::Format`] when it does not decode.
    pub(crate) async fn admit_repo_object(
        &self,
        v: crate::storage::VersionedBytes,
    ) -> Result<(Bytes, Arc<RepoInfo>, Option<ObjectVersion>)> {
        let bytes = v.bytes.clone();
        let info = Arc::new(blocking(move || RepoInfo::decode(&bytes)).await?);
        self.learn_parents(&info);
        if let Some(version) = &v.version {
            self.remember_repo_object(version.clone(), v.bytes.clone(), Arc::clone(&info));
        }
        Ok((v.bytes, info, v.version))
    }

    /// The `repo` object as this manager last read or wrote it, without asking the
    /// storage (`None` before the first read). Possibly stale: only for updates,
    /// whose compare-and-swap refuses a stale object.
    pub(crate) fn cached_repo_object(&self) -> Option<(Bytes, Arc<RepoInfo>, ObjectVersion)> {
        self.repo_cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| (c.bytes.clone(), Arc::clone(&c.info), c.version.clone()))
    }

    /// Keeps a `repo` object read or written at `version` for later fetches.
    pub(crate) fn remember_repo_object(
        &self,
        version: ObjectVersion,
        bytes: Bytes,
        info: Arc<RepoInfo>,
    ) {
        *self.repo_cache.write().unwrap_or_else(|p| p.into_inner()) = Some(RepoObject {
            version,
            bytes,
            info,
        });
        self.repo_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Spec 2: the `repo` object copy named `name` under `overwritten/` (what the
    /// ops log's `repo_before_updates` names; never cached).
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when it is gone); [`Error::Format`] when
    /// corrupt.
    pub async fn fetch_repo_backup(&self, name: &str) -> Result<RepoInfo> {
        let bytes = self.storage.get(&keys::overwritten(name)).await?.bytes;
        blocking(move || RepoInfo::decode(&bytes)).await
    }

    /// Remembers the parent links of a `repo` object read or written.
    pub(crate) fn learn_parents(&self, info: &RepoInfo) {
        let mut parents = self.parents.write().unwrap_or_else(|p| p.into_inner());
        for s in info.snapshots.values() {
            parents.insert(s.id, s.parent_id);
        }
    }

    /// Spec 2: the snapshots after `base` up to `tip`, oldest first, followed
    /// through the parent links of the `repo` objects read so far, without reading
    /// any snapshot; `None` when a link on the way is unknown or the chain ends
    /// without passing `base` (the caller then walks the snapshots).
    pub(crate) fn chain_by_known_parents(
        &self,
        base: SnapshotId,
        tip: SnapshotId,
    ) -> Option<Vec<SnapshotId>> {
        let parents = self.parents.read().unwrap_or_else(|p| p.into_inner());
        let mut chain = Vec::new();
        let mut at = tip;
        while at != base {
            // A loop in hostile links ends the walk instead of spinning.
            if chain.len() > parents.len() {
                return None;
            }
            chain.push(at);
            at = (*parents.get(&at)?)?;
        }
        chain.reverse();
        Some(chain)
    }

    /// The spec version of the files this manager writes.
    pub fn spec_version(&self) -> SpecVersion {
        self.spec
    }

    /// The zstd level files of type `file_type` are written at: the repository
    /// config's `compression.level`, or that type's default
    /// ([`crate::format::envelope::default_level`]).
    pub fn compression_level(&self, file_type: FileType) -> i32 {
        match self.level.load(Ordering::Relaxed) {
            0 => crate::format::envelope::default_level(file_type),
            level => level,
        }
    }

    /// Writes files at zstd level `level` from now on, or with `None` at each file
    /// type's default (the repository sets it from
    /// its config when it opens and when the config is saved).
    pub fn set_compression_level(&self, level: Option<i32>) {
        self.level.store(level.unwrap_or(0), Ordering::Relaxed);
    }

    /// Spec 1: records that branch `name` named snapshot `id` when its ref was read
    /// or written ([`AssetManager::branch_hint`]).
    pub(crate) fn hint_branch(&self, name: &str, id: SnapshotId) {
        self.branch_hints
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), id);
    }

    /// Spec 1: the snapshot branch `name` named when its ref was last read or
    /// written through this manager; possibly stale, a guess to fetch beside a read
    /// of the ref.
    pub(crate) fn branch_hint(&self, name: &str) -> Option<SnapshotId> {
        self.branch_hints
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied()
    }

    /// How spec-2 `repo` object updates retry from now on (the configuration's
    /// `repo_update_retries`; the repository sets it when it opens and when its
    /// configuration is saved).
    pub fn set_repo_update_retries(&self, retries: RepoUpdateRetryConfig) {
        *self
            .repo_update_retries
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = retries;
    }

    /// The `repo_update_retries` set by [`AssetManager::set_repo_update_retries`].
    pub fn repo_update_retries(&self) -> RepoUpdateRetryConfig {
        *self
            .repo_update_retries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The parent link of snapshot `id` in the `repo` object (`Some(None)` for a
    /// snapshot without parent), read again when the last one read did not list it;
    /// `None` when the object does not list it.
    async fn spec2_parent(&self, id: &SnapshotId) -> Result<Option<Option<SnapshotId>>> {
        let known = |s: &Self| {
            s.parents
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(id)
                .copied()
        };
        if let Some(parent) = known(self) {
            return Ok(Some(parent));
        }
        self.fetch_repo_info().await?;
        Ok(known(self))
    }

    /// Forgets every cached object (after garbage collection deleted some).
    pub fn clear_caches(&self) {
        *self.repo_cache.write().unwrap_or_else(|p| p.into_inner()) = None;
        self.parents
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.snapshots.clear();
        self.headers.clear();
        self.manifests.clear();
        self.transaction_logs.clear();
    }

    /// The storage objects are read from and written to.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Fetches and decodes snapshot `id`.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; [`Error::Format`] for a corrupt file; storage errors.
    pub async fn fetch_snapshot(&self, id: &SnapshotId) -> Result<Arc<Snapshot>> {
        if let Some(s) = self.snapshots.get(id) {
            return Ok(s);
        }
        self.snapshot_reads
            .run(*id, || async {
                if let Some(s) = self.snapshots.get(id) {
                    return Ok(s);
                }
                let bytes = self.snapshot_bytes(id).await?;
                let snap = decode_object(bytes, Snapshot::decode).await?;
                self.admit_snapshot(id, snap).await
            })
            .await
    }

    /// Snapshot `snap`, decoded from file `snapshots/{id}`, completed and cached:
    /// spec 2's parent link from the `repo` object, after a check that the file holds
    /// the snapshot its name says.
    ///
    /// # Errors
    /// [`Error::Format`] when the file holds another snapshot; reading the `repo`
    /// object's.
    async fn admit_snapshot(&self, id: &SnapshotId, mut snap: Snapshot) -> Result<Arc<Snapshot>> {
        snap.parent_id = self
            .completed_parent(id, snap.spec_version, snap.parent_id)
            .await?;
        check_holds(id, &snap.id)?;
        self.warn_if_cache_small(CachedKind::Snapshot, snap.nodes.len() as u64);
        let snap = Arc::new(snap);
        self.snapshots.insert(*id, Arc::clone(&snap));
        Ok(snap)
    }

    /// The parent link of snapshot `id`, whose file (of spec version `file_spec`)
    /// says `in_file`. In a spec-2 repository the `repo` object's parent links are
    /// the truth, also for spec-1 files kept by an upgrade (expiry re-parents in
    /// `repo` only).
    ///
    /// # Errors
    /// Reading the `repo` object's.
    async fn completed_parent(
        &self,
        id: &SnapshotId,
        file_spec: SpecVersion,
        in_file: Option<SnapshotId>,
    ) -> Result<Option<SnapshotId>> {
        if self.spec == SpecVersion::V2 || file_spec == SpecVersion::V2 {
            match self.spec2_parent(id).await? {
                Some(parent) => return Ok(parent),
                None if file_spec == SpecVersion::V2 => return Ok(None),
                None => {}
            }
        }
        Ok(in_file)
    }

    /// The commit facts of snapshot `id` (id, parent, flush time, message, metadata,
    /// manifest files) without its node table: from the cached snapshot when there
    /// is one, else from a cache of these facts, else read from its file without
    /// decoding the node table ([`SnapshotHeader::decode`]; on a snapshot of a
    /// million nodes, megabytes instead of the half gigabyte the whole snapshot
    /// takes). Spec 2's parent link comes from the `repo` object, as for
    /// [`AssetManager::fetch_snapshot`].
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; [`Error::Format`] for a corrupt file or one
    /// holding another snapshot; storage errors.
    pub async fn fetch_snapshot_header(&self, id: &SnapshotId) -> Result<Arc<SnapshotHeader>> {
        if let Some(h) = self.cached_header(id) {
            return Ok(h);
        }
        self.header_reads
            .run(*id, || async {
                if let Some(h) = self.cached_header(id) {
                    return Ok(h);
                }
                let bytes = self.snapshot_bytes(id).await?;
                let header = decode_object(bytes, SnapshotHeader::decode).await?;
                self.admit_header(id, header).await
            })
            .await
    }

    /// The commit facts of snapshot `id` from the caches, if there.
    fn cached_header(&self, id: &SnapshotId) -> Option<Arc<SnapshotHeader>> {
        if let Some(h) = self.headers.get(id) {
            return Some(h);
        }
        let header = Arc::new(self.snapshots.get(id)?.header());
        self.headers.insert(*id, Arc::clone(&header));
        Some(header)
    }

    /// [`AssetManager::admit_snapshot`] for commit facts.
    async fn admit_header(
        &self,
        id: &SnapshotId,
        mut header: SnapshotHeader,
    ) -> Result<Arc<SnapshotHeader>> {
        header.parent_id = self
            .completed_parent(id, header.spec_version, header.parent_id)
            .await?;
        check_holds(id, &header.id)?;
        let header = Arc::new(header);
        self.headers.insert(*id, Arc::clone(&header));
        Ok(header)
    }

    /// The node table of snapshot `id`, to read one node at a time
    /// ([`SnapshotNodes::under`]): what listing the nodes of a large snapshot holds
    /// instead of the decoded tree. Read from the file (never cached); verified and
    /// checked to hold snapshot `id`.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; [`Error::Format`] for a corrupt file or one
    /// holding another snapshot; storage errors.
    pub async fn fetch_snapshot_nodes(&self, id: &SnapshotId) -> Result<SnapshotNodes> {
        let bytes = self.snapshot_bytes(id).await?;
        let nodes = decode_object(bytes, SnapshotNodes::decode).await?;
        check_holds(id, &nodes.id())?;
        Ok(nodes)
    }

    /// The bytes of file `snapshots/{id}`.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage errors.
    async fn snapshot_bytes(&self, id: &SnapshotId) -> Result<Bytes> {
        match self.storage.get(&keys::snapshot(id)).await {
            Ok(v) => Ok(v.bytes),
            Err(StorageError::NotFound { .. }) => Err(Error::SnapshotNotFound { id: *id }),
            Err(e) => Err(e.into()),
        }
    }

    /// Fetches and decodes manifest `info.id`, reading bytes `[0, size_bytes)` when the
    /// size is known.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when missing); [`Error::Format`] when corrupt.
    pub async fn fetch_manifest(
        &self,
        id: &ManifestId,
        size_bytes: Option<u64>,
    ) -> Result<Arc<Manifest>> {
        if let Some(m) = self.manifests.get(id) {
            return Ok(m);
        }
        self.manifest_reads
            .run(*id, || async {
                if let Some(m) = self.manifests.get(id) {
                    return Ok(m);
                }
                let manifest = Arc::new(self.load_manifest(id, size_bytes).await?);
                self.warn_if_cache_small(CachedKind::Manifest, manifest.num_chunk_refs() as u64);
                self.manifests.insert(*id, Arc::clone(&manifest));
                Ok(manifest)
            })
            .await
    }

    /// Fetches and decodes manifest `id` without keeping it in the cache (for walks
    /// over every manifest, such as garbage collection, whose memory must stay
    /// bounded).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_manifest`].
    pub async fn fetch_manifest_uncached(
        &self,
        id: &ManifestId,
        size_bytes: Option<u64>,
    ) -> Result<Manifest> {
        if let Some(m) = self.manifests.get(id) {
            return Ok(Manifest::clone(&m));
        }
        self.load_manifest(id, size_bytes).await
    }

    /// Reads and decodes manifest `id` from storage, checking the id it holds.
    async fn load_manifest(&self, id: &ManifestId, size_bytes: Option<u64>) -> Result<Manifest> {
        let key = keys::manifest(id);
        let bytes = match size_bytes {
            Some(size) if size > 0 => self.storage.get_range(&key, 0..size).await?,
            _ => self.storage.get(&key).await?.bytes,
        };
        let manifest = decode_object(bytes, Manifest::decode).await?;
        if manifest.id != *id {
            return Err(Error::Format(FormatError::InvalidData {
                what: "manifest",
                reason: format!("file manifests/{id} holds manifest {}", manifest.id),
            }));
        }
        Ok(manifest)
    }

    /// Fetches and decodes the transaction log of snapshot `id`.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when missing, e.g. for the initial snapshot);
    /// [`Error::Format`] when corrupt.
    pub async fn fetch_transaction_log(&self, id: &SnapshotId) -> Result<Arc<TransactionLog>> {
        if let Some(t) = self.transaction_logs.get(id) {
            return Ok(t);
        }
        self.log_reads
            .run(*id, || async {
                if let Some(t) = self.transaction_logs.get(id) {
                    return Ok(t);
                }
                let bytes = self.storage.get(&keys::transaction_log(id)).await?.bytes;
                let log = Arc::new(decode_object(bytes, TransactionLog::decode).await?);
                self.transaction_logs.insert(*id, Arc::clone(&log));
                Ok(log)
            })
            .await
    }

    /// Encodes and writes a snapshot (create-if-not-exists: ids are random, so an
    /// existing object means a bug or a corrupt repository, reported as an error).
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_snapshot(&self, snapshot: Arc<Snapshot>) -> Result<()> {
        let bytes = self.encode_snapshot(&snapshot).await?;
        self.storage
            .put(&keys::snapshot(&snapshot.id), bytes)
            .await?;
        self.remember_written_snapshot(snapshot);
        Ok(())
    }

    /// `snapshot` encoded at the configured compression level (large ones on the
    /// compute pool).
    async fn encode_snapshot(&self, snapshot: &Arc<Snapshot>) -> Result<Bytes> {
        let s = Arc::clone(snapshot);
        let light = s.nodes.len() <= INLINE_NODES_MAX;
        let level = self.compression_level(FileType::Snapshot);
        Ok(Bytes::from(
            maybe_blocking(light, move || s.encode_at(level)).await?,
        ))
    }

    /// Caches a snapshot just written under its id.
    fn remember_written_snapshot(&self, snapshot: Arc<Snapshot>) {
        // An expiry rewrites a snapshot under its id with another parent.
        self.headers.remove(&snapshot.id);
        self.warn_if_cache_small(CachedKind::Snapshot, snapshot.nodes.len() as u64);
        self.snapshots.insert(snapshot.id, snapshot);
    }

    /// Writes `snapshot` only where no object has its key yet, for a repository's
    /// initial snapshot, whose id is fixed: a creation that races with, or runs
    /// beside, the check for an existing repository must never replace another
    /// repository's root. `PreconditionFailed` when an object is there already
    /// (nothing written, nothing cached); `Written` carries the new object's version.
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_snapshot_if_absent(&self, snapshot: Arc<Snapshot>) -> Result<WriteOutcome> {
        let bytes = self.encode_snapshot(&snapshot).await?;
        let key = keys::snapshot(&snapshot.id);
        let outcome = self.storage.put_if_absent(&key, bytes).await?;
        if matches!(outcome, WriteOutcome::Written(_)) {
            self.remember_written_snapshot(snapshot);
        }
        Ok(outcome)
    }

    /// Writes `log` only where no object has its key yet (the initial snapshot's
    /// transaction log), with the outcome of
    /// [`AssetManager::write_snapshot_if_absent`].
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_transaction_log_if_absent(
        &self,
        log: Arc<TransactionLog>,
    ) -> Result<WriteOutcome> {
        let bytes = self.encode_transaction_log(&log).await?;
        let key = keys::transaction_log(&log.id);
        let outcome = self.storage.put_if_absent(&key, bytes).await?;
        if matches!(outcome, WriteOutcome::Written(_)) {
            self.transaction_logs.insert(log.id, log);
        }
        Ok(outcome)
    }

    /// Writes an encoded manifest file (see `format::manifest::ManifestWriter`);
    /// returns its file info. The manifest is not cached: it is decoded when first
    /// read, so large manifests do not stay in memory after a commit.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_manifest_bytes(
        &self,
        id: ManifestId,
        bytes: Vec<u8>,
        num_chunk_refs: u64,
    ) -> Result<ManifestFileInfo> {
        let info = ManifestFileInfo {
            id,
            size_bytes: bytes.len() as u64,
            num_chunk_refs: u32::try_from(num_chunk_refs).unwrap_or(u32::MAX),
        };
        // Not cached now, but read back through the cache later.
        self.warn_if_cache_small(CachedKind::Manifest, num_chunk_refs);
        self.storage
            .put(&keys::manifest(&id), Bytes::from(bytes))
            .await?;
        Ok(info)
    }

    /// Encodes and writes a transaction log.
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_transaction_log(&self, log: Arc<TransactionLog>) -> Result<()> {
        let bytes = self.encode_transaction_log(&log).await?;
        self.storage
            .put(&keys::transaction_log(&log.id), bytes)
            .await?;
        self.transaction_logs.insert(log.id, log);
        Ok(())
    }

    /// `log` encoded for this spec version at the configured compression level
    /// (large ones on the compute pool).
    async fn encode_transaction_log(&self, log: &Arc<TransactionLog>) -> Result<Bytes> {
        let l = Arc::clone(log);
        let spec = self.spec;
        let light = l.len() <= INLINE_NODES_MAX;
        let level = self.compression_level(FileType::TransactionLog);
        Ok(Bytes::from(
            maybe_blocking(light, move || l.encode_at(spec, level)).await?,
        ))
    }

    /// Writes an encoded transaction log (one too large to keep in the cache).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_transaction_log_bytes(&self, id: &SnapshotId, bytes: Vec<u8>) -> Result<()> {
        self.storage
            .put(&keys::transaction_log(id), Bytes::from(bytes))
            .await?;
        Ok(())
    }

    /// Writes a native chunk object. Its id is new and random and nothing refers to it
    /// until a commit does, so it goes through [`Storage::put_fresh`] (in place on
    /// local disks, where a rename per chunk was a tenth of a bulk write's CPU).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_chunk(&self, id: &ChunkId, bytes: Bytes) -> Result<()> {
        self.storage.put_fresh(&keys::chunk(id), bytes).await?;
        Ok(())
    }

    /// Native chunk objects as local files ([`Storage::local_files`]), for a
    /// session's transfer step; `None` on object storage.
    pub fn local_chunks(&self) -> Option<LocalChunks> {
        self.storage
            .local_files()
            .map(|files| LocalChunks { files })
    }

    /// A manifest already in the cache, without fetching it.
    pub fn cached_manifest(&self, id: &ManifestId) -> Option<Arc<Manifest>> {
        self.manifests.get(id)
    }

    /// Reads bytes `range` of native chunk object `id`.
    ///
    /// # Errors
    /// Storage errors: `NotFound` for a missing object, `ShortRead` when it is shorter
    /// than the range.
    pub async fn fetch_chunk(
        &self,
        id: &ChunkId,
        range: std::ops::Range<u64>,
    ) -> std::result::Result<Bytes, StorageError> {
        let mut read = self
            .fetch_chunk_ranges(id, std::slice::from_ref(&range))
            .await?;
        Ok(read.pop().unwrap_or_default())
    }

    /// Reads byte ranges of native chunk object `id`, one `Bytes` per range, nearby
    /// ranges with one request ([`crate::storage::Storage::get_ranges`]).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_chunk`], naming the first range past the end.
    pub async fn fetch_chunk_ranges(
        &self,
        id: &ChunkId,
        ranges: &[std::ops::Range<u64>],
    ) -> std::result::Result<Vec<Bytes>, StorageError> {
        let Some(cache) = &self.chunk_cache else {
            return self.storage.get_ranges(&keys::chunk(id), ranges).await;
        };
        // With a chunk cache (`caching.num_bytes_chunks`, as Icechunk's): ranges read
        // before come from it, the others are read (with one request when near) and
        // kept.
        let mut out: Vec<Option<Bytes>> = ranges
            .iter()
            .map(|r| cache.get(&(*id, r.start, r.end)))
            .collect();
        let missing: Vec<std::ops::Range<u64>> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, hit)| hit.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        if !missing.is_empty() {
            let mut read = self
                .storage
                .get_ranges(&keys::chunk(id), &missing)
                .await?
                .into_iter();
            for (r, slot) in ranges.iter().zip(out.iter_mut()) {
                if slot.is_none() {
                    let bytes = read.next().unwrap_or_default();
                    cache.insert((*id, r.start, r.end), bytes.clone());
                    *slot = Some(bytes);
                }
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// Checks that file `snapshots/{id}` holds snapshot `id` (`held` is the id inside).
///
/// # Errors
/// [`Error::Format`] when it holds another.
fn check_holds(id: &SnapshotId, held: &SnapshotId) -> Result<()> {
    if held == id {
        Ok(())
    } else {
        Err(Error::Format(FormatError::InvalidData {
            what: "snapshot",
            reason: format!("file snapshots/{id} holds snapshot {held}"),
        }))
    }
}

/// What a [`ParentWalk`] yields: whole snapshots ([`Snapshot`], for walks that
/// read nodes or rewrite snapshots) or only their commit facts ([`SnapshotHeader`],
/// for ancestry listings and time travel, whose memory then does not grow with the
/// number of nodes).
pub trait WalkItem: Sized + Send + Sync + std::fmt::Debug + 'static + sealed::Sealed {
    /// Decodes a snapshot file.
    ///
    /// # Errors
    /// Format errors.
    #[doc(hidden)]
    fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError>;

    /// The parent link.
    #[doc(hidden)]
    fn parent(&self) -> Option<SnapshotId>;

    /// The cached item for snapshot `id`.
    #[doc(hidden)]
    fn cached(assets: &AssetManager, id: &SnapshotId) -> Option<Arc<Self>>;

    /// Fetches the item for snapshot `id`.
    ///
    /// # Errors
    /// As [`AssetManager::fetch_snapshot`].
    #[doc(hidden)]
    fn fetch<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>>;

    /// Completes and caches an item read ahead.
    ///
    /// # Errors
    /// As [`AssetManager::fetch_snapshot`].
    #[doc(hidden)]
    fn admit<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
        item: Self,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::format::snapshot::Snapshot {}
    impl Sealed for crate::format::snapshot::SnapshotHeader {}
}

impl WalkItem for Snapshot {
    fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        Snapshot::decode(bytes)
    }

    fn parent(&self) -> Option<SnapshotId> {
        self.parent_id
    }

    fn cached(assets: &AssetManager, id: &SnapshotId) -> Option<Arc<Self>> {
        assets.snapshots.get(id)
    }

    fn fetch<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.fetch_snapshot(id))
    }

    fn admit<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
        item: Self,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.admit_snapshot(id, item))
    }
}

impl WalkItem for SnapshotHeader {
    fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        SnapshotHeader::decode(bytes)
    }

    fn parent(&self) -> Option<SnapshotId> {
        self.parent_id
    }

    fn cached(assets: &AssetManager, id: &SnapshotId) -> Option<Arc<Self>> {
        assets.cached_header(id)
    }

    fn fetch<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.fetch_snapshot_header(id))
    }

    fn admit<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
        item: Self,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.admit_header(id, item))
    }
}

/// A walk along a snapshot's parent chain, newest first: the snapshot itself, its
/// parent, and so on to the initial snapshot. Every ancestry walk (log, `--as-of`,
/// diff, rebase, expiry, garbage collection) goes through it, so a corrupt or hostile
/// repository whose parent chain loops ends the walk with [`Error::AncestryLoop`]
/// instead of running forever. Memory grows by one snapshot id (12 bytes) per step.
///
/// [`ParentWalk::new`] yields whole snapshots; [`ParentWalk::headers`] only their
/// commit facts ([`SnapshotHeader`]), read without decoding node tables.
///
/// On spec-1 repositories whose storage reads synchronously
/// ([`Storage::local_files`]: local disks) the walk reads ahead: one blocking task
/// reads and decodes a batch of parents, 1, then 2, 4, ... up to `READ_AHEAD_MAX`
/// snapshots or `READ_AHEAD_BYTES` of files, so the newest `n` cost about `2n`
/// reads at most and a long history one thread hop per batch.
#[derive(Debug)]
pub struct ParentWalk<'a, T: WalkItem = Snapshot> {
    assets: &'a AssetManager,
    next: Option<SnapshotId>,
    seen: std::collections::HashSet<SnapshotId>,
    /// Snapshots read ahead along the chain, next first.
    ahead: std::collections::VecDeque<(SnapshotId, Result<T>)>,
    /// The size of the next read-ahead batch; 0 when the storage has no blocking read
    /// or the repository is not spec 1.
    batch: usize,
    /// Spec 1 on object storage: the walk lists `snapshots/` once and fetches many
    /// snapshots at once (see [`Listed`]).
    listed: Option<Box<Listed<T>>>,
}

/// A spec-1 walk on storage without blocking reads (object storage): `snapshots/`
/// listed once (beside the first snapshot's read), then, whenever the next parent
/// is not at hand, a window of the snapshots listed as no newer than it (newest
/// first, `LISTED_WINDOW_MIN` doubling up to [`READ_AHEAD_MAX`], at most
/// [`READ_AHEAD_BYTES`] of files by their listed sizes) is fetched at once, and the
/// chain is followed through what came back. A history of `n` commits then costs
/// about `log2(n)` round trips plus the listing's pages instead of `n`; a snapshot
/// of another branch may be fetched along and is dropped once the chain is older.
#[derive(Debug)]
struct Listed<T> {
    /// Listed snapshots: modification time and size, by id.
    files: HashMap<SnapshotId, (chrono::DateTime<chrono::Utc>, u64)>,
    /// Snapshots fetched and not yet on the chain.
    pool: HashMap<SnapshotId, Result<T>>,
    /// Ids fetched so far (never fetched twice).
    fetched: std::collections::HashSet<SnapshotId>,
    /// The next window's size.
    window: usize,
}

/// The first window of a [`Listed`] walk.
const LISTED_WINDOW_MIN: usize = 32;

/// The most snapshots one read-ahead batch of a [`ParentWalk`] reads.
const READ_AHEAD_MAX: usize = 256;

/// A read-ahead batch of a [`ParentWalk`] ends once its files add up to this many
/// bytes (4 MiB): snapshots of many nodes are large, and the batch is held in memory.
const READ_AHEAD_BYTES: usize = 4 << 20;

impl<'a> ParentWalk<'a> {
    /// A walk starting at `start`, yielding whole snapshots.
    pub fn new(assets: &'a AssetManager, start: SnapshotId) -> Self {
        Self::starting(assets, start)
    }
}

impl<'a> ParentWalk<'a, SnapshotHeader> {
    /// A walk starting at `start`, yielding commit facts only
    /// ([`AssetManager::fetch_snapshot_header`]).
    pub fn headers(assets: &'a AssetManager, start: SnapshotId) -> Self {
        Self::starting(assets, start)
    }
}

impl<'a, T: WalkItem> ParentWalk<'a, T> {
    fn starting(assets: &'a AssetManager, start: SnapshotId) -> Self {
        ParentWalk {
            assets,
            next: Some(start),
            seen: std::collections::HashSet::new(),
            ahead: std::collections::VecDeque::new(),
            batch: usize::from(assets.spec == SpecVersion::V1),
            listed: None,
        }
    }

    /// The next snapshot along the chain; `None` after the initial snapshot.
    ///
    /// # Errors
    /// [`Error::AncestryLoop`] when a snapshot id repeats; [`Error::SnapshotNotFound`]
    /// for a missing parent; storage and format errors.
    pub async fn next(&mut self) -> Result<Option<Arc<T>>> {
        let Some(id) = self.next.take() else {
            return Ok(None);
        };
        if !self.seen.insert(id) {
            return Err(Error::AncestryLoop { snapshot: id });
        }
        let snap = match self.ahead.pop_front() {
            Some((ahead_id, read)) if ahead_id == id => T::admit(self.assets, &id, read?).await?,
            _ => {
                self.ahead.clear();
                self.fetch(id).await?
            }
        };
        self.next = snap.parent();
        Ok(Some(snap))
    }

    /// Snapshot `id` from the cache, else read ahead from it, else fetched alone.
    async fn fetch(&mut self, id: SnapshotId) -> Result<Arc<T>> {
        if self.listed.is_some() {
            return self.fetch_listed(id).await;
        }
        if self.batch == 0 {
            return T::fetch(self.assets, &id).await;
        }
        if let Some(s) = T::cached(self.assets, &id) {
            return Ok(s);
        }
        let storage = Arc::clone(&self.assets.storage);
        let max = self.batch;
        let read = tokio::task::spawn_blocking(move || read_chain::<T>(storage.as_ref(), id, max))
            .await
            .map_err(|e| {
                Error::Format(FormatError::InvalidData {
                    what: "snapshot",
                    reason: format!("reading ahead along the parent chain failed: {e}"),
                })
            })?;
        let Some(chain) = read else {
            // No blocking reads on this storage (object storage): list the snapshots
            // while the first one is read, then fetch many at once.
            self.batch = 0;
            let (first, listing) = futures::join!(
                T::fetch(self.assets, &id),
                self.assets.storage.list(keys::SNAPSHOTS)
            );
            match listing {
                Ok(listing) => {
                    let files = listing
                        .into_iter()
                        .filter_map(|o| {
                            let name = o.key.strip_prefix(keys::SNAPSHOTS)?;
                            let id = name.parse::<SnapshotId>().ok()?;
                            Some((id, (o.last_modified, o.size)))
                        })
                        .collect();
                    let mut fetched = std::collections::HashSet::new();
                    fetched.insert(id);
                    self.listed = Some(Box::new(Listed {
                        files,
                        pool: HashMap::new(),
                        fetched,
                        window: LISTED_WINDOW_MIN,
                    }));
                }
                Err(e) => tracing::debug!("listing snapshots failed, walking one by one: {e}"),
            }
            return first;
        };
        self.batch = (self.batch * 2).min(READ_AHEAD_MAX);
        self.ahead = chain.into();
        match self.ahead.pop_front() {
            Some((first, read)) if first == id => T::admit(self.assets, &id, read?).await,
            _ => T::fetch(self.assets, &id).await,
        }
    }
}

impl<T: WalkItem> ParentWalk<'_, T> {
    /// [`ParentWalk::fetch`] on a listed walk (see [`Listed`]).
    async fn fetch_listed(&mut self, id: SnapshotId) -> Result<Arc<T>> {
        use futures::StreamExt;
        let assets = self.assets;
        let Some(listed) = self.listed.as_mut() else {
            return T::fetch(assets, &id).await;
        };
        if !listed.pool.contains_key(&id) {
            if let Some(cached) = T::cached(assets, &id) {
                return Ok(cached);
            }
            let Some(&(newest, _)) = listed.files.get(&id) else {
                // Not listed (written after the listing): alone.
                return T::fetch(assets, &id).await;
            };
            // The window: `id`, then the listed snapshots no newer than it and not
            // fetched yet, newest first, within the byte budget.
            let mut candidates: Vec<(chrono::DateTime<chrono::Utc>, SnapshotId, u64)> = listed
                .files
                .iter()
                .filter(|(other, (t, _))| {
                    **other != id && *t <= newest && !listed.fetched.contains(other)
                })
                .map(|(other, (t, size))| (*t, *other, *size))
                .collect();
            candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut window = vec![id];
            let mut bytes = listed.files.get(&id).map_or(0, |f| f.1);
            for (_, other, size) in candidates {
                if window.len() >= listed.window || bytes >= READ_AHEAD_BYTES as u64 {
                    break;
                }
                bytes = bytes.saturating_add(size);
                window.push(other);
            }
            listed.window = (listed.window * 2).min(READ_AHEAD_MAX);
            listed.fetched.extend(window.iter().copied());
            let concurrency = window.len();
            let read: Vec<(SnapshotId, Result<T>)> = futures::stream::iter(window)
                .map(|wanted| async move {
                    let read = match assets.storage.get(&keys::snapshot(&wanted)).await {
                        Ok(v) => decode_object(v.bytes, T::decode).await,
                        Err(StorageError::NotFound { .. }) => {
                            Err(Error::SnapshotNotFound { id: wanted })
                        }
                        Err(e) => Err(e.into()),
                    };
                    (wanted, read)
                })
                .buffer_unordered(concurrency.max(1))
                .collect()
                .await;
            listed.pool.extend(read);
        }
        // The chain through what is at hand.
        let mut next = Some(id);
        while let Some(at) = next {
            let Some(read) = listed.pool.remove(&at) else {
                break;
            };
            next = read.as_ref().ok().and_then(WalkItem::parent);
            self.ahead.push_back((at, read));
        }
        // What is newer than the chain's end is on no later part of it.
        if let Some((end, _)) = self.ahead.back() {
            if let Some(&(oldest, _)) = listed.files.get(end) {
                listed
                    .pool
                    .retain(|other, _| listed.files.get(other).is_some_and(|f| f.0 <= oldest));
            }
        }
        match self.ahead.pop_front() {
            Some((first, read)) if first == id => T::admit(assets, &id, read?).await,
            _ => T::fetch(assets, &id).await,
        }
    }
}

/// Reads and decodes, with [`Storage::local_files`], the chain of snapshots (or
/// their commit facts) from `start` along parent links in the files: up to `max` of
/// them and about [`READ_AHEAD_BYTES`] of files, ending at the initial snapshot or
/// the first error (which is the last item). `None` when the storage has no
/// blocking reads.
fn read_chain<T: WalkItem>(
    storage: &dyn Storage,
    start: SnapshotId,
    max: usize,
) -> Option<Vec<(SnapshotId, Result<T>)>> {
    let files = storage.local_files()?;
    let mut chain = Vec::new();
    let mut bytes_read = 0usize;
    let mut id = start;
    while chain.len() < max && bytes_read < READ_AHEAD_BYTES {
        let read = match files.get(&keys::snapshot(&id)) {
            Ok(v) => {
                bytes_read = bytes_read.saturating_add(v.bytes.len());
                T::decode(&v.bytes).map_err(Error::from)
            }
            Err(StorageError::NotFound { .. }) => Err(Error::SnapshotNotFound { id }),
            Err(e) => Err(e.into()),
        };
        let parent = read.as_ref().ok().and_then(WalkItem::parent);
        chain.push((id, read));
        match parent {
            Some(p) => id = p,
            None => break,
        }
    }
    Some(chain)
}

/// Native chunk objects read and written with plain blocking calls, where the
/// storage's objects are local files ([`AssetManager::local_chunks`]). Only on a
/// blocking or compute thread.
#[derive(Clone, Debug)]
pub struct LocalChunks {
    files: Arc<dyn crate::storage::LocalFiles>,
}

impl LocalChunks {
    /// Reads `dest.len()` bytes of chunk object `id` from byte `offset` into `dest`.
    ///
    /// # Errors
    /// [`StorageError::NotFound`], [`StorageError::ShortRead`] and I/O errors.
    pub fn read_into(&self, id: &ChunkId, offset: u64, dest: &mut [u8]) -> StorageResult<()> {
        self.files.get_range_into(&keys::chunk(id), offset, dest)
    }

    /// Reads `len` bytes of chunk object `id` from byte `offset` into a recycled
    /// buffer ([`crate::storage::LocalFiles::get_range_owned`]).
    ///
    /// # Errors
    /// [`StorageError::NotFound`], [`StorageError::ShortRead`] and I/O errors.
    pub fn read_owned(&self, id: &ChunkId, offset: u64, len: usize) -> StorageResult<Bytes> {
        self.files.get_range_owned(&keys::chunk(id), offset, len)
    }

    /// Writes the new chunk object `id` (as [`AssetManager::write_chunk`]).
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&self, id: &ChunkId, bytes: &[u8]) -> StorageResult<()> {
        self.files.put_fresh(&keys::chunk(id), bytes)
    }

    /// Whether a write is quick enough for a compute thread
    /// ([`crate::storage::LocalFiles::quick_writes`]).
    pub fn quick_writes(&self) -> bool {
        self.files.quick_writes()
    }
}
