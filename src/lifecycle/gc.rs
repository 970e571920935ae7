//! Garbage collection, with Icechunk's semantics: objects that no branch or tag
//! reaches and that are older than a cut-off are deleted.
//!
//! 1. Every live branch and tag is a root; every snapshot in their ancestries is
//!    *retained*, with the manifests those snapshots list and the native chunks those
//!    manifests reference. Virtual chunk refs point outside the repository and are
//!    never touched.
//! 2. Objects are swept under `snapshots/`, `transactions/`, `manifests/` and
//!    `chunks/`, in that order, so that no object left lists one that is gone; one is
//!    deleted when it is not retained (a transaction log is retained with its
//!    snapshot) **and** was last modified before the cut-off. The listing of
//!    `chunks/` runs beside the other sweeps (on object storage it starts while the
//!    retained manifests are read); only its deletes wait for them.
//! 3. As in Icechunk 2.3.0, a delete batch that fails (after its retries) stops
//!    nothing: its objects are counted in [`GcSummary::objects_failed_to_delete`],
//!    and the kinds after it are not swept ([`GcSummary::skipped_phases`]), so the
//!    next collection deletes them in order. Batches failing in a row
//!    ([`GcOptions::max_consecutive_delete_failures`]) stop the collection with
//!    [`Error::GcDeletesFailing`].
//!
//! On spec 2 the `repo` object lists every snapshot: those whose files are newer than
//! the cut-off are retained too (with the manifests they list), and before any file
//! is deleted the dropped snapshots leave the object in one compare-and-swap
//! (`GCRan` in the ops log), a kept snapshot whose parent is dropped being
//! re-parented to its nearest kept ancestor with the logs it now spans in
//! `pruned_ancestor_tx_logs`; those transaction logs are kept. When a snapshot
//! committed meanwhile sits on a dropped one, or a ref moved onto one, collection
//! starts over (Icechunk's `delete_snapshots_from_repo_info`).
//!
//! The cut-off is what makes collection safe beside live writers: a commit in flight
//! writes its chunks, manifests and snapshot before it moves a ref, so they are not
//! reachable yet while collection runs, but they are newer than any cut-off chosen in
//! the past. Choose a cut-off older than the longest-running writer's session (Icechunk
//! recommends days). A cut-off within [`GC_SAFETY_WINDOW_SECS`] (1 hour) of now is
//! refused unless [`GcOptions::allow_recent_cutoff`] is set (Icechunk 2.3.0 accepts
//! any cut-off). Objects whose keys are not Icechunk object ids are never deleted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use futures::future::Either;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::gc_state::GcState;
use crate::format::keys;
use crate::format::manifest::ChunkPayload;
use crate::format::repo_info::{RepoInfo, UpdateKind};
use crate::format::snapshot::ManifestFileInfo;
use crate::format::SpecVersion;
use crate::format::{ChunkId, ManifestId, SnapshotId};
use crate::refs::{self, repo_object};
use crate::storage::{ObjectInfo, Storage, StorageError};
use std::sync::Arc;

/// Options of [`crate::Repository::garbage_collect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcOptions {
    /// Report what would be deleted without deleting anything.
    pub dry_run: bool,
    /// Manifests (and, on spec 2, retained snapshots) fetched at once while finding
    /// retained chunks. `None` (the default): the storage's own bound on requests in
    /// flight ([`crate::storage::Storage::max_concurrent_requests`]: 64 on S3 unless
    /// configured), or [`GC_MANIFEST_CONCURRENCY`] where it has none (local disks,
    /// where decoding, not waiting, is the cost).
    pub manifest_concurrency: Option<usize>,
    /// Delete batches (of up to 1,000 keys, one bulk request on S3) in flight at
    /// once.
    pub delete_concurrency: usize,
    /// Listings in flight at once. Where the storage lists key ranges cheaply
    /// ([`crate::storage::Storage::ranged_listing`]: S3), each object directory is
    /// listed as 32 ranges, one per first character of the base32 object ids;
    /// elsewhere each directory is one listing.
    pub list_concurrency: usize,
    /// Most retained chunk ids held in memory at once (about 40 bytes each; default
    /// 4 Mi, ~160 MiB). Repositories with more native chunk refs are collected in
    /// several passes, each over a slice of the chunk id space.
    pub max_chunk_ids_in_memory: u64,
    /// Most objects of `chunks/` listed ahead, held in memory (about 150 bytes
    /// each; default 2¹⁸, ~40 MiB) while the retained manifests are still being
    /// read. Only on storages that list key ranges cheaply (object storage); the
    /// listing waits when it has this many, and goes on once the chunk ids are known.
    pub max_listed_ahead: usize,
    /// Attempts at each delete before giving up (transient storage errors are
    /// retried with jittered exponential back-off; default 5).
    pub delete_attempts: u32,
    /// Delete batches failing in a row (each after its `delete_attempts`) that stop
    /// a collection with [`Error::GcDeletesFailing`] (default 50, at least 1), as
    /// Icechunk 2.3.0's `max_consecutive_delete_failures`. A batch that fails alone
    /// stops nothing: its objects are counted in
    /// [`GcSummary::objects_failed_to_delete`] and stay for the next collection.
    pub max_consecutive_delete_failures: u32,
    /// Accept a cut-off inside the safety window ([`GC_SAFETY_WINDOW_SECS`] before
    /// now, or later). Off by default: such a cut-off can delete the chunks and
    /// manifests of a commit that is still being written, which then succeeds and
    /// points at objects that are gone. Turn it on only when no writer is active.
    pub allow_recent_cutoff: bool,
    /// Use and update floe's garbage-collection state ([`keys::GC_STATE`]: the
    /// chunk ids of the manifests the last collection retained, and the manifests
    /// each snapshot it retained lists), so that only manifests, and on spec 2
    /// snapshots, not read by an earlier collection are fetched (default on). Off:
    /// every retained manifest and snapshot is fetched, and the state is left as it
    /// is. A repository with more chunk ids than
    /// [`GcOptions::max_chunk_ids_in_memory`] is collected in passes without the
    /// state of manifests.
    pub incremental: bool,
}

/// The safety window of garbage collection, in seconds (1 hour): a cut-off newer
/// than this long before now is refused unless [`GcOptions::allow_recent_cutoff`]
/// is set. Objects of a commit in flight are written before its ref moves, so they
/// are unreachable while it runs and only their age protects them; the window keeps
/// every object younger than an hour, which covers a writer that opened its session
/// (and wrote its first chunk) up to an hour before `gc` started, plus clock skew
/// between the machine running `gc` and the storage server that stamps
/// modification times (seconds to minutes). Like git's `gc.pruneExpire` it is a
/// floor against mistakes such as a cut-off of "now"; writers whose sessions run
/// longer need an older cut-off (Icechunk recommends days).
pub const GC_SAFETY_WINDOW_SECS: u64 = 3600;

/// Manifests a collection fetches at once from a storage that does not bound its
/// requests itself (see [`GcOptions::manifest_concurrency`]).
pub const GC_MANIFEST_CONCURRENCY: usize = 32;

/// Metadata objects (manifests, snapshots, transaction logs) a maintenance pass
/// fetches at once: `configured` when given, else the storage's own bound on requests
/// in flight ([`Storage::max_concurrent_requests`]: 64 on S3 unless configured), else
/// [`GC_MANIFEST_CONCURRENCY`] (local disks, where decoding, not waiting, is the cost).
/// Garbage collection and `verify` share it.
pub(crate) fn fetch_concurrency(storage: &dyn Storage, configured: Option<usize>) -> usize {
    configured
        .unwrap_or_else(|| {
            storage
                .max_concurrent_requests()
                .unwrap_or(GC_MANIFEST_CONCURRENCY)
        })
        .max(1)
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            dry_run: false,
            manifest_concurrency: None,
            delete_concurrency: 32,
            list_concurrency: 32,
            max_chunk_ids_in_memory: 4 << 20,
            max_listed_ahead: 1 << 18,
            delete_attempts: 5,
            max_consecutive_delete_failures: 50,
            allow_recent_cutoff: false,
            incremental: true,
        }
    }
}

impl GcOptions {
    /// Options for a dry run (`yes`) or a real one.
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Options listing at most `n` key ranges at once (at least 1).
    pub fn list_concurrency(mut self, n: usize) -> Self {
        self.list_concurrency = n.max(1);
        self
    }

    /// Options accepting (`yes`) a cut-off inside the safety window
    /// ([`GC_SAFETY_WINDOW_SECS`]), or refusing it (the default). Only safe when no
    /// writer is active.
    pub fn allow_recent_cutoff(mut self, yes: bool) -> Self {
        self.allow_recent_cutoff = yes;
        self
    }

    /// Options using floe's garbage-collection state (`yes`, the default) or
    /// fetching every retained manifest (see [`GcOptions::incremental`]).
    pub fn incremental(mut self, yes: bool) -> Self {
        self.incremental = yes;
        self
    }

    /// Options holding at most `n` retained chunk ids in memory at once (at least 1).
    pub fn max_chunk_ids_in_memory(mut self, n: u64) -> Self {
        self.max_chunk_ids_in_memory = n.max(1);
        self
    }

    /// Options listing at most `n` objects of `chunks/` ahead of the manifest reads
    /// (0: none; see [`GcOptions::max_listed_ahead`]).
    pub fn max_listed_ahead(mut self, n: usize) -> Self {
        self.max_listed_ahead = n;
        self
    }

    /// Options fetching at most `n` manifests (and spec-2 snapshots) at once (at
    /// least 1; see [`GcOptions::manifest_concurrency`]).
    pub fn manifest_concurrency(mut self, n: usize) -> Self {
        self.manifest_concurrency = Some(n.max(1));
        self
    }

    /// Options trying each delete batch `n` times (at least 1; see
    /// [`GcOptions::delete_attempts`]).
    pub fn delete_attempts(mut self, n: u32) -> Self {
        self.delete_attempts = n.max(1);
        self
    }

    /// Options with at most `n` delete batches in flight (at least 1).
    pub fn delete_concurrency(mut self, n: usize) -> Self {
        self.delete_concurrency = n.max(1);
        self
    }

    /// Options stopping the collection after `n` delete batches fail in a row (at
    /// least 1; see [`GcOptions::max_consecutive_delete_failures`]).
    pub fn max_consecutive_delete_failures(mut self, n: u32) -> Self {
        self.max_consecutive_delete_failures = n.max(1);
        self
    }
}

/// What a collection deleted (or, in a dry run, would delete), and the deletes that
/// failed. The field names are those of Icechunk 2.3.0's `GCSummary`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct GcSummary {
    /// Bytes of all deleted objects.
    pub bytes_deleted: u64,
    /// Native chunk objects deleted.
    pub chunks_deleted: u64,
    /// Manifests deleted.
    pub manifests_deleted: u64,
    /// Snapshots deleted.
    pub snapshots_deleted: u64,
    /// Attribute files deleted (spec 1 has none; always 0, kept for Icechunk's shape).
    pub attributes_deleted: u64,
    /// Transaction logs deleted.
    pub transaction_logs_deleted: u64,
    /// Objects of the delete batches that failed (after their retries): they stay,
    /// garbage for the next collection. A batch reports one error, so all of its
    /// objects are counted, also those the storage deleted before the failure.
    pub objects_failed_to_delete: u64,
    /// Delete requests the storage asked to slow down. Always 0 in floe:
    /// object_store retries throttled requests (HTTP 429 and 503) itself, with
    /// back-off, and does not report them.
    pub throttled_batches: u64,
    /// The first distinct messages of failed delete batches, at most
    /// [`MAX_REPORTED_DELETE_ERRORS`].
    pub delete_errors: Vec<String>,
    /// The kinds of objects not swept because an earlier kind had failed deletes,
    /// in order: any of `"transaction_logs"`, `"manifests"` and `"chunks"`
    /// (snapshots go first, chunks last, so that no remaining object lists one that
    /// is gone). The next collection deletes them.
    pub skipped_phases: Vec<String>,
    /// Retained manifests fetched to find their chunks (not Icechunk's; not in the
    /// JSON form).
    #[serde(skip)]
    pub manifests_read: u64,
    /// Retained manifests whose chunks came from the garbage-collection state
    /// instead ([`GcOptions::incremental`]; not in the JSON form).
    #[serde(skip)]
    pub manifests_from_state: u64,
    /// Retained snapshots fetched to find their manifests (and, on spec 1, their
    /// parents; not Icechunk's; not in the JSON form).
    #[serde(skip)]
    pub snapshots_read: u64,
    /// Retained snapshots whose manifests came from the garbage-collection state
    /// instead (spec 2; not in the JSON form).
    #[serde(skip)]
    pub snapshots_from_state: u64,
}

/// Progress callback of a collection: (objects examined, phase name).
pub type GcProgress<'a> = &'a (dyn Fn(u64, &str) + Sync);

/// Whether an object id (the part of its key after the prefix) is retained.
type KeepFn<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// What the roots reach, but chunks (collected pass by pass, see [`chunk_pass`]).
struct Retained {
    snapshots: HashSet<SnapshotId>,
    manifests: Vec<ManifestFileInfo>,
}

/// The snapshots every ref points to, and (spec 2) the `repo` object they come from.
pub(super) async fn roots(
    assets: &AssetManager,
    storage: &dyn Storage,
) -> Result<(Vec<SnapshotId>, Option<Arc<RepoInfo>>)> {
    if assets.spec_version() == SpecVersion::V2 {
        let (info, _) = assets.fetch_repo_info().await?;
        repo_object::check_online(&info)?;
        let roots = info
            .tags
            .values()
            .chain(info.branches.values())
            .copied()
            .collect();
        return Ok((roots, Some(info)));
    }
    let listing = refs::list_refs(storage).await?;
    let mut roots = Vec::new();
    for tag in &listing.tags {
        roots.push(refs::fetch_tag(storage, tag).await?);
    }
    for branch in &listing.branches {
        roots.push(refs::fetch_branch(storage, branch).await?.0);
    }
    Ok((roots, None))
}

/// What [`retained_snapshots`] found.
struct Walked {
    /// The retained snapshots and their manifests.
    kept: Keeper,
    /// Spec 2: the listing of `snapshots/` retention was judged on, reused by the
    /// sweep (objects written after it are newer than any cut-off and kept anyway).
    snapshot_files: Option<Vec<ObjectInfo>>,
}

/// The retained snapshots and manifests found so far, with the facts to save.
#[derive(Default)]
struct Keeper {
    snapshots: HashSet<SnapshotId>,
    /// The manifests the retained snapshots list, each once.
    manifests: Vec<ManifestFileInfo>,
    manifest_ids: HashSet<ManifestId>,
    /// The manifests of each retained snapshot known (from the state or from its
    /// file), for the next state.
    facts: HashMap<SnapshotId, Vec<ManifestFileInfo>>,
    /// Snapshots fetched, and snapshots whose manifests came from the state.
    read: u64,
    from_state: u64,
}

impl Keeper {
    /// Retains snapshot `id`, which lists `manifests`; false when it was retained
    /// already.
    fn keep(&mut self, id: SnapshotId, manifests: &[ManifestFileInfo]) -> bool {
        if !self.snapshots.insert(id) {
            return false;
        }
        for info in manifests {
            if self.manifest_ids.insert(info.id) {
                self.manifests.push(*info);
            }
        }
        self.facts.insert(id, manifests.to_vec());
        true
    }

    /// Retains a snapshot read from its file.
    fn keep_read(&mut self, snap: &crate::format::snapshot::Snapshot) -> bool {
        self.read += 1;
        self.keep(snap.id, &snap.manifest_files)
    }

    /// Retains snapshot `id` with the manifests the state lists for it; false when
    /// the state does not know it.
    fn keep_known(
        &mut self,
        id: SnapshotId,
        known: &HashMap<SnapshotId, Vec<ManifestFileInfo>>,
    ) -> bool {
        let Some(manifests) = known.get(&id) else {
            return false;
        };
        if self.keep(id, manifests) {
            self.from_state += 1;
        }
        true
    }
}

/// Walks every root's ancestry (stopping where an earlier root's walk already went)
/// and collects retained snapshots and the manifests they list; on spec 2 also the
/// snapshots of the `repo` object whose files are not older than `cut_off`. On
/// spec 2, where the `repo` object holds the parent links, a snapshot whose
/// manifests are in `known` (the garbage-collection state) is not fetched; a spec-1
/// walk reads every snapshot for its parent (spec-1 expiry rewrites parents in
/// place).
async fn retained_snapshots(
    assets: &AssetManager,
    storage: &dyn Storage,
    roots: Vec<SnapshotId>,
    info: Option<&RepoInfo>,
    cut_off: DateTime<Utc>,
    concurrency: usize,
    known: &HashMap<SnapshotId, Vec<ManifestFileInfo>>,
) -> Result<Walked> {
    let mut k = Keeper::default();
    if let Some(ids) = info.and_then(|i| ancestries_in_repo_object(i, &roots)) {
        // Spec 2: the `repo` object holds every parent link, so the retained
        // snapshots are known before any is read; those the state does not know are
        // fetched (for the manifests they list) `concurrency` at a time rather than
        // one by one.
        let unknown: Vec<SnapshotId> = ids
            .into_iter()
            .filter(|id| !k.keep_known(*id, known))
            .collect();
        let mut fetched = futures::stream::iter(unknown)
            .map(|id| async move { assets.fetch_snapshot(&id).await })
            .buffer_unordered(concurrency.max(1));
        while let Some(snap) = fetched.try_next().await? {
            k.keep_read(&snap);
        }
    } else {
        for root in roots {
            if k.snapshots.contains(&root) {
                continue;
            }
            let mut walk = ParentWalk::new(assets, root);
            while let Some(snap) = walk.next().await? {
                if !k.keep_read(&snap) {
                    break;
                }
            }
        }
    }
    let mut snapshot_files = None;
    if let Some(info) = info {
        // Retention by the same clock as deletion: the file's modification time. A
        // snapshot not listed yet cannot be deleted by this run, so it is kept.
        let listed = storage.list(keys::SNAPSHOTS).await?;
        let mut modified = std::collections::HashMap::new();
        for o in &listed {
            if let Some(Ok(id)) = o
                .key
                .strip_prefix(keys::SNAPSHOTS)
                .map(str::parse::<SnapshotId>)
            {
                modified.insert(id, o.last_modified);
            }
        }
        snapshot_files = Some(listed);
        for id in info.snapshots.keys() {
            let recent = modified.get(id).is_none_or(|t| *t >= cut_off);
            if recent && !k.snapshots.contains(id) && !k.keep_known(*id, known) {
                match assets.fetch_snapshot(id).await {
                    Ok(snap) => {
                        k.keep_read(&snap);
                    }
                    Err(Error::SnapshotNotFound { .. }) => {
                        k.snapshots.insert(*id);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(Walked {
        kept: k,
        snapshot_files,
    })
}

/// Spec 2: every snapshot the `roots` reach by the parent links of the `repo` object
/// `info` (each once); `None` when a link leads to a snapshot the object does not
/// list, for the walk through the snapshot files to report.
fn ancestries_in_repo_object(info: &RepoInfo, roots: &[SnapshotId]) -> Option<HashSet<SnapshotId>> {
    let mut seen = HashSet::new();
    for root in roots {
        // A chain that comes back on itself is left to the walk too, which reports
        // the loop.
        let mut chain = HashSet::new();
        let mut next = Some(*root);
        while let Some(id) = next {
            if !chain.insert(id) {
                return None;
            }
            if !seen.insert(id) {
                break;
            }
            next = info.snapshots.get(&id)?.parent_id;
        }
    }
    Some(seen)
}

/// Spec 2: what removing the dropped snapshots from the `repo` object decided.
enum RepoEdit {
    /// Written; the object as written.
    Done(Box<RepoInfo>),
    /// A snapshot committed meanwhile sits on a dropped one, or a ref points at one:
    /// collect again.
    Restart,
}

/// Spec 2: removes `drop` from the `repo` object, re-parenting kept snapshots over
/// dropped ancestors (see the module docs); snapshots committed since collection
/// started are added to `keep`.
async fn drop_from_repo_object(
    assets: &AssetManager,
    keep: &mut HashSet<SnapshotId>,
    drop: &HashSet<SnapshotId>,
) -> Result<RepoEdit> {
    repo_object::update(assets, false, |info| {
        let original = info.clone();
        for s in original.snapshots.values() {
            let parent_dropped = s.parent_id.is_some_and(|p| drop.contains(&p));
            if drop.contains(&s.id) {
                info.snapshots.remove(&s.id);
            } else if !keep.contains(&s.id) && parent_dropped {
                return Ok(repo_object::Change::Skip(RepoEdit::Restart));
            } else {
                keep.insert(s.id);
                if parent_dropped {
                    let (parent, pruned) =
                        super::expire::reparent_and_prune(&original, s, |a| keep.contains(&a.id));
                    if let Some(kept) = info.snapshots.get_mut(&s.id) {
                        kept.parent_id = Some(parent.unwrap_or(SnapshotId::INITIAL));
                        kept.pruned_ancestor_tx_logs = (!pruned.is_empty()).then_some(pruned);
                    }
                }
            }
        }
        let dangling = info
            .tags
            .values()
            .chain(info.branches.values())
            .any(|id| !info.snapshots.contains_key(id));
        if dangling {
            return Ok(repo_object::Change::Skip(RepoEdit::Restart));
        }
        Ok(repo_object::Change::Write(
            UpdateKind::GcRan,
            RepoEdit::Done(Box::new(info.clone())),
        ))
    })
    .await
}

/// The base32 text of chunk ids starts with one of 32 characters (5 bits of the
/// first byte); a pass covers a set of such prefixes of `len` characters.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The id-text prefixes each pass covers: one pass when `refs` (an upper bound of
/// the retained chunk ids) fits in `budget`, else the 32 one-character prefixes (or
/// 1024 two-character ones) grouped into as few passes as the budget allows.
pub(super) fn chunk_passes(refs: u64, budget: u64) -> Vec<Vec<String>> {
    let passes = refs.div_ceil(budget.max(1)).max(1);
    let len = if passes <= 32 { 1 } else { 2 };
    let mut prefixes: Vec<String> = ALPHABET.iter().map(|c| (*c as char).to_string()).collect();
    if len == 2 {
        prefixes = prefixes
            .iter()
            .flat_map(|a| ALPHABET.iter().map(move |c| format!("{a}{}", *c as char)))
            .collect();
    }
    if passes == 1 {
        return vec![prefixes];
    }
    let per_pass = (prefixes.len() as u64).div_ceil(passes.min(prefixes.len() as u64));
    prefixes
        .chunks(usize::try_from(per_pass).unwrap_or(1).max(1))
        .map(<[String]>::to_vec)
        .collect()
}

/// Which chunk ids a pass of [`chunk_passes`] covers, judged from the id's bytes
/// (the first one or two base32 characters are its first 5 or 10 bits) instead of
/// its text: no string is made per chunk ref.
#[derive(Debug)]
pub(super) struct PassFilter {
    /// Characters of the prefixes (1 or 2).
    len: usize,
    /// Whether each 5- or 10-bit prefix value is in the pass.
    covered: Vec<bool>,
}

impl PassFilter {
    /// The filter of a pass (prefixes all of one length, 1 or 2 characters).
    pub(super) fn new(pass: &[String]) -> Self {
        let len = pass.first().map_or(1, String::len).clamp(1, 2);
        let mut covered = vec![false; 1 << (5 * len)];
        let value = |c: u8| ALPHABET.iter().position(|a| *a == c);
        for p in pass {
            let b = p.as_bytes();
            let v = match (
                len,
                b.first().copied().and_then(value),
                b.get(1).copied().and_then(value),
            ) {
                (1, Some(a), _) => Some(a),
                (2, Some(a), Some(c)) => Some((a << 5) | c),
                _ => None,
            };
            if let Some(slot) = v.and_then(|v| covered.get_mut(v)) {
                *slot = true;
            }
        }
        PassFilter { len, covered }
    }

    /// Whether `id` is in the pass.
    pub(super) fn contains(&self, id: &ChunkId) -> bool {
        let b = id.as_bytes();
        let v = if self.len == 1 {
            usize::from(b[0] >> 3)
        } else {
            (usize::from(b[0]) << 2 | usize::from(b[1] >> 6)) & 0x3FF
        };
        self.covered.get(v).copied().unwrap_or(false)
    }
}

/// The retained native chunk ids whose text starts with one of `prefixes`: every
/// retained manifest is fetched (`concurrency` at a time, not cached) and dropped
/// once its ids are taken, so memory holds only this pass's ids.
async fn chunk_pass(
    assets: &AssetManager,
    manifests: &[ManifestFileInfo],
    prefixes: &HashSet<String>,
    prefix_len: usize,
    concurrency: usize,
) -> Result<HashSet<ChunkId>> {
    let mut lists = futures::stream::iter(manifests.iter().copied())
        .map(|info| async move {
            let mut ids = manifest_chunk_ids(assets, &info).await?;
            ids.retain(|id| {
                let text = id.to_string();
                text.get(..prefix_len).is_some_and(|p| prefixes.contains(p))
            });
            Ok::<_, Error>(ids)
        })
        .buffer_unordered(concurrency.max(1));
    let mut out = HashSet::new();
    while let Some(ids) = lists.try_next().await? {
        out.extend(ids);
    }
    Ok(out)
}

/// The native chunk ids manifest `info` references (once per ref), fetched without
/// caching it.
///
/// # Errors
/// Storage and format errors fetching the manifest.
async fn manifest_chunk_ids(
    assets: &AssetManager,
    info: &ManifestFileInfo,
) -> Result<Vec<ChunkId>> {
    let manifest = assets
        .fetch_manifest_uncached(&info.id, Some(info.size_bytes))
        .await?;
    Ok(manifest
        .arrays
        .values()
        .flat_map(|refs| refs.values())
        .filter_map(|payload| match payload {
            ChunkPayload::Native(r) => Some(r.id),
            _ => None,
        })
        .collect())
}

/// The native chunk ids the retained `manifests` reference, taking each manifest's
/// ids from floe's garbage-collection state when it has them and fetching the
/// others (`concurrency` at a time); returns them with the counts of manifests
/// fetched and taken from the state and, with `save` (the retained snapshots'
/// facts), the next state: exactly the retained manifests and those snapshots, for
/// [`save_state`].
///
/// # Errors
/// Storage and format errors fetching a manifest.
async fn retained_chunks_with_state(
    assets: &AssetManager,
    manifests: &[ManifestFileInfo],
    concurrency: usize,
    mut state: GcState,
    save: Option<HashMap<SnapshotId, Vec<ManifestFileInfo>>>,
) -> Result<(HashSet<ChunkId>, u64, u64, Option<GcState>)> {
    let mut known = HashMap::with_capacity(manifests.len());
    let mut missing = Vec::new();
    for info in manifests {
        match state.manifests.remove(&info.id) {
            Some(ids) => {
                known.insert(info.id, ids);
            }
            None => missing.push(*info),
        }
    }
    let from_state = known.len() as u64;
    let read = missing.len() as u64;
    let mut fetched = futures::stream::iter(missing)
        .map(|info| async move {
            let mut ids = manifest_chunk_ids(assets, &info).await?;
            ids.sort_unstable();
            ids.dedup();
            Ok::<_, Error>((info.id, ids))
        })
        .buffer_unordered(concurrency.max(1));
    while let Some((id, ids)) = fetched.try_next().await? {
        known.insert(id, ids);
    }
    let chunks: HashSet<ChunkId> = known.values().flatten().copied().collect();
    let next = save.map(|snapshots| GcState {
        manifests: known,
        snapshots,
    });
    Ok((chunks, read, from_state, next))
}

/// Writes floe's garbage-collection state (encoded on the compute pool). A failed
/// write is logged, not returned: it only costs the next collection its shortcut.
/// The state lists retained objects only, so it may be written while unretained
/// ones are deleted.
async fn save_state(storage: &dyn Storage, state: GcState) {
    let written = match crate::assets::blocking(move || state.encode()).await {
        Ok(bytes) => storage
            .put(keys::GC_STATE, bytes::Bytes::from(bytes))
            .await
            .map(|_| ())
            .map_err(Error::from),
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        tracing::warn!(error = %e, "garbage-collection state not written");
    }
}

/// floe's garbage-collection state as stored; a missing or unreadable one is empty.
async fn load_state(storage: &dyn Storage) -> GcState {
    match storage.get(keys::GC_STATE).await {
        Ok(read) => GcState::decode(&read.bytes).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "ignoring an unreadable garbage-collection state");
            GcState::default()
        }),
        Err(StorageError::NotFound { .. }) => GcState::default(),
        Err(e) => {
            tracing::warn!(error = %e, "garbage-collection state not read");
            GcState::default()
        }
    }
}

/// Keys deleted in one bulk request.
const DELETE_BATCH: usize = 1000;

/// Deletes `keys` in one bulk call, retrying transient failures (of the whole batch:
/// deleting is idempotent) with jittered exponential back-off.
async fn delete_with_retry(storage: &dyn Storage, keys: &[String], attempts: u32) -> Result<()> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        match storage.delete_many(keys).await {
            Ok(()) => return Ok(()),
            Err(e @ (StorageError::Backend { .. } | StorageError::Io { .. }))
                if attempt < attempts.max(1) =>
            {
                let ceiling = 20u64.saturating_mul(1 << attempt.min(10));
                tracing::debug!(attempt, error = %e, "retrying a batch of deletes");
                let wait = rand::random_range(0..=ceiling);
                tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The listings that cover the ids under `dir` starting with one of `id_prefixes`
/// (each `dir` + prefix): one per prefix where the storage lists ranges cheaply, so
/// they run concurrently; else one listing of the whole directory (a local walk
/// would otherwise repeat per prefix), filtered by `keep`.
pub(super) fn listings(storage: &dyn Storage, dir: &str, id_prefixes: &[String]) -> Vec<String> {
    if storage.ranged_listing() && !id_prefixes.is_empty() {
        id_prefixes.iter().map(|p| format!("{dir}{p}")).collect()
    } else {
        vec![dir.to_string()]
    }
}

/// Deletes (or counts, in a dry run) the objects under `dir` (`chunks/`, ...) whose id
/// `keep` does not retain and that were modified before `cut_off`; returns
/// (objects, bytes). `id_prefixes` (one-character base32 prefixes, or empty for all
/// of `dir`) split the listing into ranges listed `list_concurrency` at a time where
/// the storage supports it. Doomed objects stream into delete batches as they are
/// listed, so memory holds one batch per delete in flight, not the whole listing.
#[allow(clippy::too_many_arguments)] // the sweep's inputs, each used once
async fn sweep(
    storage: &dyn Storage,
    dir: &str,
    id_prefixes: &[String],
    keep: KeepFn<'_>,
    cut_off: DateTime<Utc>,
    options: GcOptions,
    progress: Option<GcProgress<'_>>,
    failures: &Failures,
) -> Result<Swept> {
    let prefixes = listings(storage, dir, id_prefixes);
    // Retained objects are skipped by the listing itself: a local directory then
    // reads the metadata of the other files only.
    let skip = |key: &str| key.strip_prefix(dir).is_some_and(keep);
    let listed = listed(storage, &prefixes, &skip, options.list_concurrency);
    delete_unretained(
        storage, dir, listed, keep, cut_off, options, progress, failures,
    )
    .await
}

/// The objects under `prefixes` but those `skip` accepts (by key), listed
/// `concurrency` prefixes at a time.
fn listed<'a>(
    storage: &'a dyn Storage,
    prefixes: &'a [String],
    skip: KeepFn<'a>,
    concurrency: usize,
) -> BoxStream<'a, Result<ObjectInfo>> {
    // The listings are made up front (they start lazily): a closure mapping prefixes
    // to streams would make the future lose `Send` (its lifetimes are not general).
    let streams: Vec<_> = prefixes
        .iter()
        .map(|p| storage.list_stream_except(p, skip))
        .collect();
    futures::stream::iter(streams)
        .flatten_unordered(concurrency.max(1))
        .map_err(Error::from)
        .boxed()
}

/// Listings of `chunks/` made ahead of the manifest reads at once, or `None` when
/// the storage should list only after them: its listing costs less once the
/// retained objects are known (a local directory skips their metadata), or it
/// bounds its requests too tightly. A listing waiting for the reads keeps its
/// request's place (object_store's `LimitStore` holds one per listing), so at most
/// half the places go to listings ahead: the reads always have the rest.
fn listings_ahead(storage: &dyn Storage, options: GcOptions) -> Option<usize> {
    if !storage.ranged_listing() || options.max_listed_ahead == 0 {
        return None;
    }
    let n = match storage.max_concurrent_requests() {
        Some(places) => options.list_concurrency.min(places / 2),
        None => options.list_concurrency,
    };
    (n > 0).then_some(n)
}

/// Runs `work` and meanwhile lists `listing` into memory, at most `ahead` objects
/// ([`GcOptions::max_listed_ahead`]); returns what `work` returned, the objects listed so
/// far and the rest of the listing. So a collection on object storage waits for
/// the listing of `chunks/` and for its manifest reads at the same time.
///
/// # Errors
/// `work`'s, and the listing's.
async fn list_while<T>(
    work: impl std::future::Future<Output = Result<T>>,
    mut listing: BoxStream<'_, Result<ObjectInfo>>,
    ahead: usize,
) -> Result<(T, Vec<ObjectInfo>, BoxStream<'_, Result<ObjectInfo>>)> {
    let mut early = Vec::new();
    let mut work = std::pin::pin!(work);
    let mut listed_all = false;
    while !listed_all && early.len() < ahead {
        match futures::future::select(work.as_mut(), listing.next()).await {
            Either::Left((out, _)) => return Ok((out?, early, listing)),
            Either::Right((Some(object), _)) => early.push(object?),
            Either::Right((None, _)) => listed_all = true,
        }
    }
    Ok((work.await?, early, listing))
}

/// Icechunk 2.3.0's bound on [`GcSummary::delete_errors`].
pub const MAX_REPORTED_DELETE_ERRORS: usize = 10;

/// The delete batches of one collection that failed after their retries.
#[derive(Debug, Default)]
struct Failures {
    /// Objects of the failed batches.
    objects: AtomicU64,
    /// Their first distinct messages, at most [`MAX_REPORTED_DELETE_ERRORS`].
    messages: Mutex<Vec<String>>,
}

impl Failures {
    fn record(&self, objects: u64, message: &str) {
        self.objects.fetch_add(objects, Ordering::Relaxed);
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        if messages.len() < MAX_REPORTED_DELETE_ERRORS && !messages.iter().any(|m| m == message) {
            messages.push(message.to_string());
        }
    }

    /// Writes the failures into `summary`.
    fn report(self, summary: &mut GcSummary) {
        summary.objects_failed_to_delete = self.objects.into_inner();
        summary.delete_errors = self
            .messages
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// What one sweep deleted (or, dry, would delete).
#[derive(Clone, Copy, Debug, Default)]
struct Swept {
    objects: u64,
    bytes: u64,
    /// Delete batches that failed after their retries.
    failed_batches: u64,
}

/// The deleting half of [`sweep`], over objects `listed` under `dir`. A batch whose
/// delete fails after `options.delete_attempts` tries is recorded in `failures` and
/// the sweep goes on, unless `options.max_consecutive_delete_failures` batches
/// failed in a row.
///
/// # Errors
/// The listing's; [`Error::GcDeletesFailing`].
#[allow(clippy::too_many_arguments)] // the sweep's inputs, each used once
async fn delete_unretained(
    storage: &dyn Storage,
    dir: &str,
    listed: impl futures::Stream<Item = Result<ObjectInfo>> + Send,
    keep: KeepFn<'_>,
    cut_off: DateTime<Utc>,
    options: GcOptions,
    progress: Option<GcProgress<'_>>,
    failures: &Failures,
) -> Result<Swept> {
    let listed = listed.try_filter(|o| {
        let doomed =
            o.last_modified < cut_off && o.key.strip_prefix(dir).is_some_and(|id| !keep(id));
        futures::future::ready(doomed)
    });
    let count = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let in_a_row = AtomicU32::new(0);
    let threshold = options.max_consecutive_delete_failures.max(1);
    listed
        .try_chunks(DELETE_BATCH)
        .map_err(|e| e.1)
        .map_ok(|batch| {
            let (count, bytes, failed, in_a_row) = (&count, &bytes, &failed, &in_a_row);
            async move {
                let size = batch.iter().fold(0u64, |b, o| b.saturating_add(o.size));
                if !options.dry_run {
                    let keys: Vec<String> = batch.iter().map(|o| o.key.clone()).collect();
                    if let Err(e) = delete_with_retry(storage, &keys, options.delete_attempts).await
                    {
                        let message = e.to_string();
                        tracing::warn!(dir, batch = keys.len(), error = %message, "delete batch failed");
                        failures.record(keys.len() as u64, &message);
                        failed.fetch_add(1, Ordering::Relaxed);
                        let n = in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
                        if n >= threshold {
                            return Err(Error::GcDeletesFailing {
                                prefix: dir.to_string(),
                                failures: n,
                                last_error: message,
                            });
                        }
                        return Ok(());
                    }
                    in_a_row.store(0, Ordering::Relaxed);
                }
                bytes.fetch_add(size, Ordering::Relaxed);
                let n = count.fetch_add(batch.len() as u64, Ordering::Relaxed) + batch.len() as u64;
                if let Some(report) = progress {
                    report(n, dir);
                }
                Ok::<(), Error>(())
            }
        })
        .try_buffer_unordered(options.delete_concurrency.max(1))
        .try_collect::<()>()
        .await?;
    Ok(Swept {
        objects: count.into_inner(),
        bytes: bytes.into_inner(),
        failed_batches: failed.into_inner(),
    })
}

/// Whether `id` parses as an object id that `set` does not contain. Keys that are
/// not object ids are kept: they are not Icechunk's.
fn unretained<T: std::str::FromStr + Eq + std::hash::Hash>(set: &HashSet<T>, id: &str) -> bool {
    id.parse::<T>().is_ok_and(|id| !set.contains(&id))
}

/// Fails with [`Error::GcCutoffTooRecent`] when `cut_off` is inside the safety
/// window ([`GC_SAFETY_WINDOW_SECS`] before `now`, or later) and `options` do not
/// allow it.
///
/// # Errors
/// [`Error::GcCutoffTooRecent`].
pub(crate) fn check_cut_off(
    cut_off: DateTime<Utc>,
    now: DateTime<Utc>,
    options: &GcOptions,
) -> Result<()> {
    let window = chrono::Duration::seconds(i64::try_from(GC_SAFETY_WINDOW_SECS).unwrap_or(3600));
    let latest_allowed = now - window;
    if cut_off > latest_allowed && !options.allow_recent_cutoff {
        return Err(Error::GcCutoffTooRecent {
            cut_off,
            latest_allowed,
            window_seconds: GC_SAFETY_WINDOW_SECS,
        });
    }
    Ok(())
}

/// Deletes the objects no branch or tag reaches that were modified before `cut_off`.
/// A cut-off inside the safety window is refused unless
/// [`GcOptions::allow_recent_cutoff`] is set (see [`GC_SAFETY_WINDOW_SECS`]).
///
/// # Errors
/// [`Error::GcCutoffTooRecent`] (nothing is read or deleted then);
/// [`Error::AncestryLoop`] for a corrupt history; [`Error::SnapshotNotFound`] and
/// format errors for missing or corrupt objects the roots reach (nothing is deleted
/// then); storage errors (deletes already done stay done).
pub(crate) async fn garbage_collect(
    assets: &AssetManager,
    storage: &dyn Storage,
    cut_off: DateTime<Utc>,
    options: GcOptions,
    progress: Option<GcProgress<'_>>,
) -> Result<GcSummary> {
    check_cut_off(cut_off, Utc::now(), &options)?;
    let manifest_concurrency = fetch_concurrency(storage, options.manifest_concurrency);
    const ATTEMPTS: u32 = 10;
    let mut attempt = 0;
    let mut state = if options.incremental {
        load_state(storage).await
    } else {
        GcState::default()
    };
    let mut summary = GcSummary::default();
    let (retained, tx_logs, mut snapshot_files, mut facts) = loop {
        attempt += 1;
        let (roots, info) = roots(assets, storage).await?;
        let Walked {
            kept:
                Keeper {
                    mut snapshots,
                    manifests,
                    facts,
                    read,
                    from_state,
                    ..
                },
            snapshot_files,
        } = retained_snapshots(
            assets,
            storage,
            roots,
            info.as_deref(),
            cut_off,
            manifest_concurrency,
            &state.snapshots,
        )
        .await?;
        summary.snapshots_read += read;
        summary.snapshots_from_state += from_state;
        let mut tx_logs: HashSet<SnapshotId> = HashSet::new();
        if let Some(info) = &info {
            let drop: HashSet<SnapshotId> = info
                .snapshots
                .keys()
                .filter(|id| !snapshots.contains(id))
                .copied()
                .collect();
            let latest = if options.dry_run || drop.is_empty() {
                Some(info.as_ref().clone())
            } else {
                match drop_from_repo_object(assets, &mut snapshots, &drop).await? {
                    RepoEdit::Done(written) => Some(*written),
                    RepoEdit::Restart if attempt < ATTEMPTS => continue,
                    RepoEdit::Restart => {
                        return Err(Error::RepoObjectContention { attempts: ATTEMPTS })
                    }
                }
            };
            // Logs a kept snapshot spans after re-parenting stay.
            for s in latest.iter().flat_map(|i| i.snapshots.values()) {
                tx_logs.extend(s.pruned_ancestor_tx_logs.iter().flatten().copied());
            }
        }
        tx_logs.extend(snapshots.iter().copied());
        break (
            Retained {
                snapshots,
                manifests,
            },
            tx_logs,
            snapshot_files,
            facts,
        );
    };
    // The next state records the snapshots retained now (re-parenting above changed
    // no snapshot file, and the facts are those of the files).
    facts.retain(|id, _| retained.snapshots.contains(id));
    let mut facts = Some(facts);
    let manifest_ids: HashSet<ManifestId> = retained.manifests.iter().map(|m| m.id).collect();
    let keep_snapshot = |id: &str| !unretained(&retained.snapshots, id);
    let keep_tx_log = |id: &str| !unretained(&tx_logs, id);
    let keep_manifest = |id: &str| !unretained(&manifest_ids, id);
    // Snapshots first and chunks last: no object left lists one that is gone. A
    // kind with failed deletes stops the kinds after it (Icechunk 2.3.0).
    let phases: [(&str, &str, KeepFn<'_>); 3] = [
        (keys::SNAPSHOTS, "snapshots", &keep_snapshot),
        (keys::TRANSACTIONS, "transaction_logs", &keep_tx_log),
        (keys::MANIFESTS, "manifests", &keep_manifest),
    ];
    let all_ids: Vec<String> = ALPHABET
        .iter()
        .map(|c| char::from(*c).to_string())
        .collect();
    let failures = Failures::default();
    // The chunk passes wait for this (whether a metadata kind had failed deletes, or
    // the metadata sweep failed) before they delete anything.
    let (metadata_done, metadata_failed) = futures::channel::oneshot::channel::<bool>();
    let metadata_failed = metadata_failed
        .map(|failed| failed.unwrap_or(true))
        .shared();
    // The snapshots, transaction logs and manifests are swept while the chunks'
    // passes read the manifests and (on object storage) list `chunks/`.
    let metadata = async {
        let mut deleted = [0u64; 3];
        let mut bytes_deleted = 0u64;
        let mut skipped: Vec<String> = Vec::new();
        let mut failed = false;
        for (count, (prefix, name, keep)) in deleted.iter_mut().zip(phases) {
            if failed {
                skipped.push(name.to_string());
                continue;
            }
            let listed = if prefix == keys::SNAPSHOTS {
                snapshot_files.take()
            } else {
                None
            };
            let swept = match listed {
                Some(listed) => {
                    let listed = futures::stream::iter(listed.into_iter().map(Ok));
                    delete_unretained(
                        storage, prefix, listed, keep, cut_off, options, progress, &failures,
                    )
                    .await?
                }
                None => {
                    sweep(
                        storage, prefix, &all_ids, keep, cut_off, options, progress, &failures,
                    )
                    .await?
                }
            };
            *count = swept.objects;
            bytes_deleted = bytes_deleted.saturating_add(swept.bytes);
            failed = swept.failed_batches > 0;
        }
        // The chunk passes may be gone already (their error ends the collection).
        let _ = metadata_done.send(failed);
        Ok::<_, Error>((deleted, bytes_deleted, skipped))
    };
    let chunk_sweep = async {
        // (chunks deleted, bytes, whether the chunks were skipped)
        let mut out = (0u64, 0u64, false);
        let refs: u64 = retained
            .manifests
            .iter()
            .map(|m| u64::from(m.num_chunk_refs))
            .sum();
        let passes = chunk_passes(refs, options.max_chunk_ids_in_memory);
        let with_state = options.incremental && passes.len() == 1;
        for pass in passes {
            let prefix_len = pass.first().map_or(1, String::len);
            let set: HashSet<String> = pass.iter().cloned().collect();
            let retained_ids = async {
                let ids = if with_state {
                    let (chunks, read, from_state, next) = retained_chunks_with_state(
                        assets,
                        &retained.manifests,
                        manifest_concurrency,
                        std::mem::take(&mut state),
                        facts.take().filter(|_| !options.dry_run),
                    )
                    .await?;
                    summary.manifests_read += read;
                    summary.manifests_from_state += from_state;
                    (chunks, next)
                } else {
                    summary.manifests_read += retained.manifests.len() as u64;
                    let chunks = chunk_pass(
                        assets,
                        &retained.manifests,
                        &set,
                        prefix_len,
                        manifest_concurrency,
                    )
                    .await?;
                    (chunks, None)
                };
                Ok((ids, metadata_failed.clone().await))
            };
            // Where a listing costs the same with or without skipping the retained
            // objects (object storage), the pass's listing starts with its manifest
            // reads; a local directory lists once the retained ids are known, to skip
            // reading their files' metadata.
            let prefixes = listings(storage, keys::CHUNKS, &pass);
            let nothing = |_: &str| false;
            let (((chunks, next_state), skip), ahead) = match listings_ahead(storage, options) {
                Some(concurrency) => {
                    let listing = listed(storage, &prefixes, &nothing, concurrency);
                    let (ids, early, rest) =
                        list_while(retained_ids, listing, options.max_listed_ahead).await?;
                    (ids, Some((early, rest)))
                }
                None => (retained_ids.await?, None),
            };
            let keep_chunk = |id: &str| {
                let in_pass = id.get(..prefix_len).is_some_and(|p| set.contains(p));
                !in_pass || !unretained(&chunks, id)
            };
            let swept = async {
                if skip {
                    return Ok(Swept::default());
                }
                let Some((early, rest)) = ahead else {
                    return sweep(
                        storage,
                        keys::CHUNKS,
                        &pass,
                        &keep_chunk,
                        cut_off,
                        options,
                        progress,
                        &failures,
                    )
                    .await;
                };
                let listed = futures::stream::iter(early.into_iter().map(Ok)).chain(rest);
                delete_unretained(
                    storage,
                    keys::CHUNKS,
                    listed,
                    &keep_chunk,
                    cut_off,
                    options,
                    progress,
                    &failures,
                )
                .await
            };
            // The next state is written while the chunks are listed and swept.
            let save = async {
                if let Some(next) = next_state {
                    save_state(storage, next).await;
                }
            };
            let (swept, ()) = futures::join!(swept, save);
            let swept = swept?;
            out.0 += swept.objects;
            out.1 = out.1.saturating_add(swept.bytes);
            out.2 |= skip;
        }
        Ok::<_, Error>(out)
    };
    let (metadata, chunk_sweep) = futures::join!(metadata, chunk_sweep);
    let ([snapshots, transaction_logs, manifests], metadata_bytes, mut skipped) = metadata?;
    let (chunks, chunk_bytes, chunks_skipped) = chunk_sweep?;
    if chunks_skipped {
        skipped.push("chunks".to_string());
    }
    summary.skipped_phases = skipped;
    failures.report(&mut summary);
    summary.bytes_deleted = summary
        .bytes_deleted
        .saturating_add(metadata_bytes)
        .saturating_add(chunk_bytes);
    let deleted = [snapshots, transaction_logs, manifests, chunks];
    [
        summary.snapshots_deleted,
        summary.transaction_logs_deleted,
        summary.manifests_deleted,
        summary.chunks_deleted,
    ] = deleted;
    if !options.dry_run {
        assets.clear_caches();
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(n: usize) -> Vec<Result<ObjectInfo>> {
        (0..n)
            .map(|i| {
                Ok(ObjectInfo {
                    key: format!("chunks/{i}"),
                    size: 1,
                    last_modified: Utc::now(),
                    version: None,
                })
            })
            .collect()
    }

    /// `list_while` holds at most `ahead` objects while the work runs, and the rest
    /// of the listing follows them: every object once, in order.
    #[tokio::test]
    async fn list_while_holds_at_most_ahead_and_loses_nothing() {
        for (n, ahead, slow) in [(10, 3, true), (10, 100, true), (10, 3, false)] {
            let work = async move {
                if slow {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Ok(7)
            };
            let listing = futures::stream::iter(objects(n)).boxed();
            let (out, early, rest) = list_while(work, listing, ahead).await.unwrap();
            assert_eq!(out, 7);
            assert!(early.len() <= ahead);
            if slow {
                assert_eq!(early.len(), n.min(ahead));
            }
            let rest: Vec<ObjectInfo> = rest.try_collect().await.unwrap();
            let keys: Vec<String> = early.into_iter().chain(rest).map(|o| o.key).collect();
            let want: Vec<String> = (0..n).map(|i| format!("chunks/{i}")).collect();
            assert_eq!(keys, want);
        }
    }

    /// A listing error while the work runs is the error of `list_while`.
    #[tokio::test]
    async fn list_while_reports_a_listing_error() {
        let mut items = objects(2);
        items.push(Err(Error::Storage(StorageError::NotFound {
            key: "chunks/".into(),
        })));
        let work = async {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Ok(())
        };
        let listing = futures::stream::iter(items).boxed();
        let got = list_while(work, listing, 100).await;
        assert!(
            matches!(got, Err(Error::Storage(StorageError::NotFound { .. }))),
            "{:?}",
            got.map(|(_, early, _)| early.len())
        );
    }

    /// The filter judges ids as their text does, for passes of one and two
    /// characters.
    #[test]
    fn pass_filter_agrees_with_the_id_text() {
        for passes in [
            chunk_passes(10, 1),
            chunk_passes(100, 3),
            chunk_passes(1 << 20, 1 << 10),
        ] {
            for pass in &passes {
                let filter = PassFilter::new(pass);
                let len = pass[0].len();
                let set: HashSet<&str> = pass.iter().map(String::as_str).collect();
                for _ in 0..2000 {
                    let id = ChunkId::random();
                    let text = id.to_string();
                    assert_eq!(filter.contains(&id), set.contains(&text[..len]), "{text}");
                }
            }
        }
    }
}
