//! Fetching, decoding, caching and writing the repository's immutable objects:
//! snapshots, manifests, transaction logs and native chunks; and, in spec 2, the
//! `repo` object, whose parent links complete the snapshots read.
//!
//! Snapshots, manifests and transaction logs never change once written (Icechunk
//! specification, "Storage Operations"), so decoded copies are cached by id and shared
//! between sessions. Decoding of large objects runs on the compute pool.

mod cache;
mod chunks;
mod manifests;
mod parent_walk;
mod repo_object;
mod snapshots;
mod transaction_logs;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use quick_cache::sync::Cache;

use crate::error::{Error, Result};
use crate::format::config::RepoUpdateRetryConfig;
use crate::format::envelope::FileType;
use crate::format::manifest::Manifest;
use crate::format::snapshot::{Snapshot, SnapshotHeader};
use crate::format::transaction_log::TransactionLog;
use crate::format::{ChunkId, FormatError, ManifestId, SnapshotId, SpecVersion};
use crate::storage::Storage;

pub use cache::CacheSizes;
use cache::{
    sized_cache, ByteWeight, CachedKind, HeaderWeight, SingleFlight, SizeWeight, HEADER_CACHE_BYTES,
};
pub use chunks::LocalChunks;
pub use parent_walk::{ParentWalk, WalkItem};
use repo_object::{RepoObject, RepoRead};

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
}
