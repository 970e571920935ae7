//! Cloning a repository between storages (`floe clone`): a full-history backup, a
//! local copy of a cloud repository, a move between buckets. Icechunk 2.3.0 has no
//! such operation (icechunk#1034).
//!
//! Objects are copied byte for byte (chunks are never decoded), at most
//! [`CloneOptions::concurrency`] at once:
//!
//! - **Full history** (no refs given): every object under `chunks/`, `manifests/`,
//!   `transactions/`, `snapshots/` and (spec 2) `overwritten/`, reachable or not.
//! - **Selected refs**: only what the given branches and tags reach, as garbage
//!   collection judges reachability ([`super::gc`]): their snapshots' histories,
//!   the transaction logs of those snapshots, the manifests they list and the native
//!   chunks those reference (found in passes over the chunk id space, so memory
//!   holds at most [`CloneOptions::max_chunk_ids_in_memory`] ids). Branch `main` is
//!   always included: a repository needs it. On spec 2 the clone's `repo` object
//!   lists only those refs and snapshots (the ops log and the saved copies under
//!   `overwritten/` are copied as they are).
//!
//! Virtual chunk refs are copied as refs: the objects they point to are not copied.
//!
//! **Resumable.** Snapshots, manifests, transaction logs and chunks are immutable, so
//! an object already at the destination with the source's size is skipped; the refs
//! (spec 1: `config.yaml`, then the tag and branch files) or the `repo` object
//! (spec 2) are written last. A clone killed at any point therefore leaves either no
//! repository at the destination or a complete one, and running it again finishes
//! the copy. In a full-history clone, where the destination lists key ranges
//! cheaply (S3), what it holds is learnt from listings of 1/32 of the id space at a
//! time; elsewhere (a local disk), and for selected refs, by one `HEAD` per object.
//!
//! **Never over another repository.** A destination that already holds a
//! repository is refused unless every snapshot its refs name is in the source (an
//! earlier clone of the same source, which the run brings up to date).
//!
//! At the end the clone is verified ([`mod@super::verify`]) unless
//! [`CloneOptions::verify`] is off.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::manifest::ChunkPayload;
use crate::format::repo_info::RepoInfo;
use crate::format::snapshot::ManifestFileInfo;
use crate::format::{ChunkId, SnapshotId, SpecVersion};
use crate::refs;
use crate::storage::{Storage, StorageError};

use super::verify::{VerifyOptions, VerifyReport};

/// Options of [`clone_repository`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloneOptions {
    /// Objects copied at once (default 32; object storage also bounds its own
    /// requests, [`crate::storage::Storage::max_concurrent_requests`]).
    pub concurrency: usize,
    /// Listings in flight at once (default 8).
    pub list_concurrency: usize,
    /// Most chunk ids held in memory at once when copying selected refs (default
    /// 4 Mi, about 160 MiB).
    pub max_chunk_ids_in_memory: u64,
    /// Verify the clone at the end (default on).
    pub verify: bool,
}

impl Default for CloneOptions {
    fn default() -> Self {
        CloneOptions {
            concurrency: 32,
            list_concurrency: 8,
            max_chunk_ids_in_memory: 4 << 20,
            verify: true,
        }
    }
}

impl CloneOptions {
    /// Options verifying (`yes`, the default) the clone at the end, or not.
    pub fn verify(mut self, yes: bool) -> Self {
        self.verify = yes;
        self
    }

    /// Options copying at most `n` objects at once (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Options holding at most `n` chunk ids in memory at once (at least 1).
    pub fn max_chunk_ids_in_memory(mut self, n: u64) -> Self {
        self.max_chunk_ids_in_memory = n.max(1);
        self
    }
}

/// What [`clone_repository`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct CloneReport {
    /// Objects copied (refs and the `repo` object included).
    pub objects_copied: u64,
    /// Bytes of the objects copied.
    pub bytes_copied: u64,
    /// Objects already at the destination (an earlier, interrupted clone), skipped.
    pub objects_skipped: u64,
    /// The branches and tags of the clone (`branch:NAME`, `tag:NAME`).
    pub refs: Vec<String>,
    /// The verification of the clone ([`CloneOptions::verify`]).
    pub verify: Option<VerifyReport>,
}

/// Progress callback of [`clone_repository`]: (objects done, phase name).
pub type CloneProgress<'a> = &'a (dyn Fn(u64, &str) + Sync);

/// The 32 first characters of object ids (Crockford base32).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Copies the repository in `src` to `dst` (see the module docs): its full history
/// when `refs` is empty, else only what those branches and tags reach (each a
/// `branch:NAME`, a `tag:NAME`, or a bare name, looked up as a branch, then a tag).
///
/// # Example
/// ```
/// use floe::lifecycle::clone::{clone_repository, CloneOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), floe::Error> {
/// let src = floe::storage::new_in_memory_storage();
/// floe::Repository::create(src.clone(), None).await?;
/// let dst = floe::storage::new_in_memory_storage();
/// let report = clone_repository(src, dst.clone(), &[], CloneOptions::default(), None).await?;
/// assert!(report.verify.is_some_and(|v| v.is_ok()));
/// let clone = floe::Repository::open(dst).await?;
/// assert_eq!(clone.list_branches().await?, ["main"]);
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`Error::RepositoryNotFound`] when `src` holds no repository;
/// [`Error::BranchNotFound`] / [`Error::TagNotFound`] / [`Error::RefNotFound`] for a
/// ref not in `src`; [`Error::SnapshotNotFound`] and format errors when the source
/// is damaged where the selected refs reach (run `floe verify` on it); storage
/// errors (the clone can be run again to resume).
pub async fn clone_repository(
    src: Arc<dyn Storage>,
    dst: Arc<dyn Storage>,
    refs: &[String],
    options: CloneOptions,
    progress: Option<CloneProgress<'_>>,
) -> Result<CloneReport> {
    let Some(spec) = refs::spec_version_of(src.as_ref()).await? else {
        return Err(Error::RepositoryNotFound {
            location: src.root_url(),
        });
    };
    let assets = AssetManager::for_spec(Arc::clone(&src), spec);
    check_destination(src.as_ref(), &dst, spec).await?;
    let copier = Copier {
        src: src.as_ref(),
        dst: dst.as_ref(),
        options,
        progress,
        copied: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
    };
    let selection = select_refs(&assets, src.as_ref(), spec, refs).await?;
    match &selection {
        None => {
            for dir in [
                keys::CHUNKS,
                keys::MANIFESTS,
                keys::TRANSACTIONS,
                keys::SNAPSHOTS,
            ] {
                copier.copy_listed(dir).await?;
            }
            if spec == SpecVersion::V2 {
                copier.copy_listed(keys::OVERWRITTEN).await?;
            }
        }
        Some(selected) => copier.copy_reachable(&assets, selected).await?,
    }
    let ref_names = copier.write_refs(&assets, spec, selection.as_ref()).await?;
    let mut report = CloneReport {
        objects_copied: copier.copied.load(Ordering::Relaxed),
        bytes_copied: copier.bytes.load(Ordering::Relaxed),
        objects_skipped: copier.skipped.load(Ordering::Relaxed),
        refs: ref_names,
        verify: None,
    };
    if options.verify {
        let verified = super::verify::verify(dst, None, VerifyOptions::default(), progress).await?;
        report.verify = Some(verified);
    }
    Ok(report)
}

/// Refuses a destination that holds another repository: one of another spec
/// version, or one whose refs name a snapshot the source lacks (its commits would
/// be lost when the clone writes the source's refs over them). An empty
/// destination, a clone killed before its refs were written, and an earlier clone
/// of this source (refs behind the source's) pass.
///
/// # Errors
/// [`Error::CloneDestinationInUse`]; storage and format errors reading the
/// destination's refs.
async fn check_destination(
    src: &dyn Storage,
    dst: &Arc<dyn Storage>,
    spec: SpecVersion,
) -> Result<()> {
    let Some(dst_spec) = refs::spec_version_of(dst.as_ref()).await? else {
        return Ok(());
    };
    let in_use = |reason: String| Error::CloneDestinationInUse {
        location: dst.root_url(),
        reason,
    };
    if dst_spec != spec {
        return Err(in_use(format!(
            "it holds a spec-{dst_spec} repository and the source is spec {spec}"
        )));
    }
    let dst_assets = AssetManager::for_spec(Arc::clone(dst), dst_spec);
    let (tips, _) = super::gc::roots(&dst_assets, dst.as_ref()).await?;
    for tip in tips {
        match src.head(&keys::snapshot(&tip)).await {
            Ok(_) => {}
            Err(crate::storage::StorageError::NotFound { .. }) => {
                return Err(in_use(format!(
                    "its refs name snapshot {tip}, which the source does not hold: it is \
                     another repository, or has commits the source lacks"
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The refs to copy: (`branch:NAME` / `tag:NAME`, snapshot), `main` first.
struct Selected {
    refs: Vec<(String, SnapshotId)>,
}

/// The selected refs, or `None` for the full history.
async fn select_refs(
    assets: &AssetManager,
    storage: &dyn Storage,
    spec: SpecVersion,
    wanted: &[String],
) -> Result<Option<Selected>> {
    if wanted.is_empty() {
        return Ok(None);
    }
    let info = if spec == SpecVersion::V2 {
        Some(assets.fetch_repo_info().await?.0)
    } else {
        None
    };
    let branch = |name: String| {
        let info = info.clone();
        async move {
            match &info {
                Some(i) => i
                    .branches
                    .get(&name)
                    .copied()
                    .ok_or(Error::BranchNotFound { name }),
                None => refs::fetch_branch(storage, &name).await.map(|b| b.0),
            }
        }
    };
    let tag = |name: String| {
        let info = info.clone();
        async move {
            match &info {
                Some(i) => i
                    .tags
                    .get(&name)
                    .copied()
                    .ok_or(Error::TagNotFound { name }),
                None => refs::fetch_tag(storage, &name).await,
            }
        }
    };
    let mut out: Vec<(String, SnapshotId)> =
        vec![("branch:main".to_string(), branch("main".into()).await?)];
    for w in wanted {
        let (label, id) = if let Some(name) = w.strip_prefix("branch:") {
            (format!("branch:{name}"), branch(name.to_string()).await?)
        } else if let Some(name) = w.strip_prefix("tag:") {
            (format!("tag:{name}"), tag(name.to_string()).await?)
        } else {
            match branch(w.clone()).await {
                Ok(id) => (format!("branch:{w}"), id),
                Err(Error::BranchNotFound { .. }) => match tag(w.clone()).await {
                    Ok(id) => (format!("tag:{w}"), id),
                    Err(Error::TagNotFound { .. }) => {
                        return Err(Error::RefNotFound {
                            reference: w.clone(),
                        })
                    }
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            }
        };
        if !out.iter().any(|(l, _)| *l == label) {
            out.push((label, id));
        }
    }
    Ok(Some(Selected { refs: out }))
}

/// The copying state: source, destination, counters.
struct Copier<'a> {
    src: &'a dyn Storage,
    dst: &'a dyn Storage,
    options: CloneOptions,
    progress: Option<CloneProgress<'a>>,
    copied: AtomicU64,
    bytes: AtomicU64,
    skipped: AtomicU64,
}

impl Copier<'_> {
    fn tick(&self, phase: &str) {
        if let Some(report) = self.progress {
            let done = self.copied.load(Ordering::Relaxed) + self.skipped.load(Ordering::Relaxed);
            report(done, phase);
        }
    }

    /// Copies `key` (of `size` bytes at the source, when known) unless the
    /// destination has it with that size (`present`: the destination's listing of
    /// the range, when it lists ranges; else a `HEAD`). `missing_ok`: a key missing
    /// at the source is skipped (a transaction log Icechunk did not write).
    async fn copy(
        &self,
        key: &str,
        size: Option<u64>,
        present: Option<&HashMap<String, u64>>,
        missing_ok: bool,
    ) -> Result<()> {
        let there = match present {
            Some(listed) => listed.get(key).copied(),
            None => match self.dst.head(key).await {
                Ok(o) => Some(o.size),
                Err(StorageError::NotFound { .. }) => None,
                Err(e) => return Err(e.into()),
            },
        };
        if let Some(there) = there {
            let same = match size {
                Some(s) => s == there,
                None => match self.src.head(key).await {
                    Ok(o) => o.size == there,
                    Err(StorageError::NotFound { .. }) if missing_ok => true,
                    Err(e) => return Err(e.into()),
                },
            };
            if same {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        }
        let bytes = match self.src.get(key).await {
            Ok(v) => v.bytes,
            Err(StorageError::NotFound { .. }) if missing_ok => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let n = bytes.len() as u64;
        self.dst.put(key, bytes).await?;
        self.copied.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// The listings covering `dir` on `storage`: 32 ranges where it lists ranges
    /// cheaply, else the whole directory.
    fn ranges(storage: &dyn Storage, dir: &str) -> Vec<String> {
        if storage.ranged_listing() {
            ALPHABET
                .iter()
                .map(|c| format!("{dir}{}", char::from(*c)))
                .collect()
        } else {
            vec![dir.to_string()]
        }
    }

    /// What the destination holds under `prefix` (key → size), when it lists
    /// ranges cheaply; `None` otherwise (each key is then looked up by `HEAD`).
    async fn present(&self, prefix: &str) -> Result<Option<HashMap<String, u64>>> {
        if !self.dst.ranged_listing() {
            return Ok(None);
        }
        let listed = self
            .dst
            .list_stream(prefix)
            .map_ok(|o| (o.key, o.size))
            .try_collect::<HashMap<_, _>>()
            .await?;
        Ok(Some(listed))
    }

    /// Copies every object under `dir` of the source, range by range.
    async fn copy_listed(&self, dir: &str) -> Result<()> {
        // Object ids start with one of 32 characters; `overwritten/` holds `repo.*`.
        let ranges = if self.dst.ranged_listing() && dir != keys::OVERWRITTEN {
            Self::ranges(self.dst, dir)
        } else {
            vec![dir.to_string()]
        };
        for range in ranges {
            let present = self.present(&range).await?;
            let present = present.as_ref();
            self.src
                .list_stream(&range)
                .map_err(Error::from)
                .map_ok(|o| async move {
                    self.copy(&o.key, Some(o.size), present, false).await?;
                    self.tick(dir);
                    Ok::<(), Error>(())
                })
                .try_buffer_unordered(self.options.concurrency.max(1))
                .try_collect::<()>()
                .await?;
        }
        Ok(())
    }

    /// Copies `keys` (under `dir`) of the source, skipping those missing at the source
    /// when `missing_ok`.
    async fn copy_keys(&self, dir: &str, keys: Vec<String>, missing_ok: bool) -> Result<()> {
        futures::stream::iter(keys)
            .map(|key| async move {
                self.copy(&key, None, None, missing_ok).await?;
                self.tick(dir);
                Ok::<(), Error>(())
            })
            .buffer_unordered(self.options.concurrency.max(1))
            .try_collect::<()>()
            .await
    }

    /// Copies what the selected refs reach: chunks, manifests, transaction logs,
    /// snapshots, in that order.
    async fn copy_reachable(&self, assets: &AssetManager, selected: &Selected) -> Result<()> {
        let mut snapshots: HashSet<SnapshotId> = HashSet::new();
        let mut tx_logs: HashSet<SnapshotId> = HashSet::new();
        let mut manifests: Vec<ManifestFileInfo> = Vec::new();
        let mut manifest_ids = HashSet::new();
        let info = if assets.spec_version() == SpecVersion::V2 {
            Some(assets.fetch_repo_info().await?.0)
        } else {
            None
        };
        for (_, root) in &selected.refs {
            if snapshots.contains(root) {
                continue;
            }
            let mut walk = ParentWalk::new(assets, *root);
            while let Some(snap) = walk.next().await? {
                if !snapshots.insert(snap.id) {
                    break;
                }
                tx_logs.insert(snap.id);
                if let Some(pruned) = info
                    .as_ref()
                    .and_then(|i| i.snapshots.get(&snap.id))
                    .and_then(|s| s.pruned_ancestor_tx_logs.as_ref())
                {
                    tx_logs.extend(pruned.iter().copied());
                }
                for m in &snap.manifest_files {
                    if manifest_ids.insert(m.id) {
                        manifests.push(*m);
                    }
                }
            }
        }
        // Passes planned from the largest manifest and refined when one finds more
        // ids than the budget, as verify plans them.
        let budget = self.options.max_chunk_ids_in_memory.max(1);
        let largest = manifests
            .iter()
            .map(|m| u64::from(m.num_chunk_refs))
            .max()
            .unwrap_or(0);
        let mut planned = largest.div_ceil(budget).max(1);
        let mut done: Vec<String> = Vec::new();
        'plan: loop {
            let passes: Vec<Vec<String>> =
                super::gc::chunk_passes(planned.saturating_mul(budget), budget)
                    .into_iter()
                    .map(|pass| {
                        pass.into_iter()
                            .filter(|p| !done.iter().any(|d| p.starts_with(d.as_str())))
                            .collect::<Vec<_>>()
                    })
                    .filter(|pass| !pass.is_empty())
                    .collect();
            let finest = passes.iter().all(|p| p.len() == 1 && p[0].len() == 2);
            for pass in passes {
                let in_pass = &super::gc::PassFilter::new(&pass);
                let mut ids: HashSet<ChunkId> = HashSet::new();
                let mut fetched = futures::stream::iter(manifests.iter().copied())
                    .map(|m| async move {
                        assets
                            .fetch_manifest_uncached(&m.id, Some(m.size_bytes))
                            .await
                    })
                    .buffer_unordered(self.options.list_concurrency.max(1));
                while let Some(manifest) = fetched.try_next().await? {
                    for payload in manifest.arrays.values().flat_map(|c| c.values()) {
                        if let ChunkPayload::Native(r) = payload {
                            if in_pass.contains(&r.id) {
                                ids.insert(r.id);
                            }
                        }
                    }
                    if !finest && ids.len() as u64 > budget {
                        planned = planned.saturating_mul(2);
                        continue 'plan;
                    }
                }
                drop(fetched);
                let keys: Vec<String> = ids.iter().map(keys::chunk).collect();
                drop(ids);
                self.copy_keys(keys::CHUNKS, keys, false).await?;
                done.extend(pass);
            }
            break;
        }
        let manifest_keys = manifests.iter().map(|m| keys::manifest(&m.id)).collect();
        self.copy_keys(keys::MANIFESTS, manifest_keys, false)
            .await?;
        let log_keys = tx_logs.iter().map(keys::transaction_log).collect();
        self.copy_keys(keys::TRANSACTIONS, log_keys, true).await?;
        let snapshot_keys = snapshots.iter().map(keys::snapshot).collect();
        self.copy_keys(keys::SNAPSHOTS, snapshot_keys, false)
            .await?;
        if info.is_some() {
            self.copy_listed(keys::OVERWRITTEN).await?;
        }
        Ok(())
    }

    /// Writes the refs last: spec 1 `config.yaml` and the ref files (tags and
    /// tombstones, then branches), spec 2 the `repo` object. Returns the refs of the
    /// clone.
    async fn write_refs(
        &self,
        assets: &AssetManager,
        spec: SpecVersion,
        selection: Option<&Selected>,
    ) -> Result<Vec<String>> {
        if spec == SpecVersion::V2 {
            let (bytes, info, _) = assets.fetch_repo_object().await?;
            let bytes = match selection {
                None => bytes,
                Some(selected) => {
                    let trimmed = trim_repo_info(&info, assets, selected).await?;
                    let encoded = crate::assets::blocking(move || trimmed.encode()).await?;
                    bytes::Bytes::from(encoded)
                }
            };
            let info = RepoInfo::decode(&bytes)?;
            let n = bytes.len() as u64;
            self.dst.put(keys::SPEC2_REPO, bytes).await?;
            self.copied.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(n, Ordering::Relaxed);
            let mut names: Vec<String> = info
                .branches
                .keys()
                .map(|b| format!("branch:{b}"))
                .collect();
            names.extend(info.tags.keys().map(|t| format!("tag:{t}")));
            return Ok(names);
        }
        match self.src.get(keys::CONFIG).await {
            Ok(v) => {
                let n = v.bytes.len() as u64;
                self.dst.put(keys::CONFIG, v.bytes).await?;
                self.copied.fetch_add(1, Ordering::Relaxed);
                self.bytes.fetch_add(n, Ordering::Relaxed);
            }
            Err(StorageError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let mut ref_keys: Vec<String> = match selection {
            None => self
                .src
                .list(keys::REFS)
                .await?
                .into_iter()
                .map(|o| o.key)
                .collect(),
            Some(selected) => selected
                .refs
                .iter()
                .filter_map(|(label, _)| {
                    if let Some(b) = label.strip_prefix("branch:") {
                        Some(keys::branch(b))
                    } else {
                        label.strip_prefix("tag:").map(keys::tag)
                    }
                })
                .collect(),
        };
        // Tags first, then branches, `main` last: a reader of a half-written clone
        // sees no repository until `main` is there.
        let main = keys::branch("main");
        ref_keys.sort_by_key(|k| (*k == main, k.contains(keys::BRANCH_DIR)));
        let listing_before = refs::list_refs(self.src).await?;
        for key in &ref_keys {
            let v = self.src.get(key).await?;
            let n = v.bytes.len() as u64;
            self.dst.put(key, v.bytes).await?;
            self.copied.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(n, Ordering::Relaxed);
        }
        let mut names = Vec::new();
        for b in &listing_before.branches {
            if ref_keys.contains(&keys::branch(b)) {
                names.push(format!("branch:{b}"));
            }
        }
        for t in &listing_before.tags {
            if ref_keys.contains(&keys::tag(t)) {
                names.push(format!("tag:{t}"));
            }
        }
        Ok(names)
    }
}

/// Spec 2: the source's `repo` object with only the selected refs and the snapshots
/// they reach.
async fn trim_repo_info(
    info: &RepoInfo,
    assets: &AssetManager,
    selected: &Selected,
) -> Result<RepoInfo> {
    let mut keep: HashSet<SnapshotId> = HashSet::new();
    for (_, root) in &selected.refs {
        let mut walk = ParentWalk::headers(assets, *root);
        while let Some(snap) = walk.next().await? {
            if !keep.insert(snap.id) {
                break;
            }
        }
    }
    let mut trimmed = info.clone();
    trimmed.branches.retain(|name, _| {
        selected
            .refs
            .iter()
            .any(|(l, _)| l.strip_prefix("branch:") == Some(name.as_str()))
    });
    trimmed.tags.retain(|name, _| {
        selected
            .refs
            .iter()
            .any(|(l, _)| l.strip_prefix("tag:") == Some(name.as_str()))
    });
    trimmed.snapshots.retain(|id, _| keep.contains(id));
    Ok(trimmed)
}
