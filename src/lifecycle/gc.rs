//! Garbage collection on spec-1 repositories, with Icechunk's semantics: objects
//! that no branch or tag reaches and that are older than a cut-off are deleted.
//!
//! 1. Every live branch and tag is a root; every snapshot in their ancestries is
//!    *retained*, with the manifests those snapshots list and the native chunks those
//!    manifests reference. Virtual chunk refs point outside the repository and are
//!    never touched.
//! 2. Objects are listed under `snapshots/`, `transactions/`, `manifests/` and
//!    `chunks/` — in that order, so a reader never finds a snapshot whose manifests
//!    are gone — and one is deleted when it is not retained (a transaction log is
//!    retained with its snapshot) **and** was last modified before the cut-off.
//!
//! The cut-off is what makes collection safe beside live writers: a commit in flight
//! writes its chunks, manifests and snapshot before it moves a ref, so they are not
//! reachable yet while collection runs, but they are newer than any cut-off chosen in
//! the past. Choose a cut-off older than the longest-running writer's session (Icechunk
//! recommends days). Objects whose keys are not Icechunk object ids are never deleted.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::manifest::ChunkPayload;
use crate::format::snapshot::ManifestFileInfo;
use crate::format::{ChunkId, ManifestId, SnapshotId};
use crate::refs;
use crate::storage::{ObjectInfo, Storage};

/// Options of [`crate::Repository::garbage_collect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcOptions {
    /// Report what would be deleted without deleting anything.
    pub dry_run: bool,
    /// Manifests fetched at once while finding retained chunks.
    pub manifest_concurrency: usize,
    /// Deletes in flight at once.
    pub delete_concurrency: usize,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            dry_run: false,
            manifest_concurrency: 8,
            delete_concurrency: 32,
        }
    }
}

impl GcOptions {
    /// Options for a dry run (`yes`) or a real one.
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }
}

/// What a collection deleted (or, in a dry run, would delete). The field names are
/// those of Icechunk's `GCSummary`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
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
}

/// Progress callback of a collection: (objects examined, phase name).
pub type GcProgress<'a> = &'a (dyn Fn(u64, &str) + Sync);

/// Whether an object id (the part of its key after the prefix) is retained.
type KeepFn<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// What the roots reach.
#[derive(Default)]
struct Retained {
    snapshots: HashSet<SnapshotId>,
    manifests: HashSet<ManifestId>,
    chunks: HashSet<ChunkId>,
}

/// Walks every root's ancestry (stopping where an earlier root's walk already went)
/// and collects retained snapshots and the manifests they list.
async fn retained_snapshots(
    assets: &AssetManager,
    storage: &dyn Storage,
) -> Result<(HashSet<SnapshotId>, Vec<ManifestFileInfo>)> {
    let listing = refs::list_refs(storage).await?;
    let mut roots = Vec::new();
    for tag in &listing.tags {
        roots.push(refs::fetch_tag(storage, tag).await?);
    }
    for branch in &listing.branches {
        roots.push(refs::fetch_branch(storage, branch).await?.0);
    }
    let mut snapshots = HashSet::new();
    let mut manifests: Vec<ManifestFileInfo> = Vec::new();
    let mut manifest_ids = HashSet::new();
    for root in roots {
        if snapshots.contains(&root) {
            continue;
        }
        let mut walk = ParentWalk::new(assets, root);
        while let Some(snap) = walk.next().await? {
            if !snapshots.insert(snap.id) {
                break;
            }
            for info in &snap.manifest_files {
                if manifest_ids.insert(info.id) {
                    manifests.push(*info);
                }
            }
        }
    }
    Ok((snapshots, manifests))
}

/// Everything the roots reach: snapshots, manifests, and the native chunks of those
/// manifests (fetched `concurrency` at a time).
async fn find_retained(
    assets: &AssetManager,
    storage: &dyn Storage,
    concurrency: usize,
) -> Result<Retained> {
    let (snapshots, manifests) = retained_snapshots(assets, storage).await?;
    let mut retained = Retained {
        snapshots,
        manifests: manifests.iter().map(|m| m.id).collect(),
        chunks: HashSet::new(),
    };
    let mut chunk_lists = futures::stream::iter(manifests)
        .map(|info| async move {
            let manifest = assets
                .fetch_manifest(&info.id, Some(info.size_bytes))
                .await?;
            let ids: Vec<ChunkId> = manifest
                .arrays
                .values()
                .flat_map(|refs| refs.values())
                .filter_map(|payload| match payload {
                    ChunkPayload::Native(r) => Some(r.id),
                    _ => None,
                })
                .collect();
            Ok::<_, Error>(ids)
        })
        .buffer_unordered(concurrency.max(1));
    while let Some(ids) = chunk_lists.try_next().await? {
        retained.chunks.extend(ids);
    }
    Ok(retained)
}

/// Deletes (or counts, in a dry run) the objects under `prefix` whose id `keep` does
/// not retain and that were modified before `cut_off`; returns (objects, bytes).
async fn sweep(
    storage: &dyn Storage,
    prefix: &str,
    keep: KeepFn<'_>,
    cut_off: DateTime<Utc>,
    options: GcOptions,
    progress: Option<GcProgress<'_>>,
) -> Result<(u64, u64)> {
    let listed = storage.list(prefix).await?;
    let doomed: Vec<ObjectInfo> = listed
        .into_iter()
        .filter(|o| o.last_modified < cut_off)
        .filter(|o| o.key.strip_prefix(prefix).is_some_and(|id| !keep(id)))
        .collect();
    let count = doomed.len() as u64;
    let bytes = doomed.iter().fold(0u64, |b, o| b.saturating_add(o.size));
    if options.dry_run {
        return Ok((count, bytes));
    }
    let done = AtomicU64::new(0);
    futures::stream::iter(doomed)
        .map(|o| {
            let done = &done;
            async move {
                storage.delete(&o.key).await?;
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(report) = progress {
                    report(n, prefix);
                }
                Ok::<(), Error>(())
            }
        })
        .buffer_unordered(options.delete_concurrency.max(1))
        .try_collect::<()>()
        .await?;
    Ok((count, bytes))
}

/// Whether `id` parses as an object id that `set` does not contain. Keys that are
/// not object ids are kept: they are not Icechunk's.
fn unretained<T: std::str::FromStr + Eq + std::hash::Hash>(set: &HashSet<T>, id: &str) -> bool {
    id.parse::<T>().is_ok_and(|id| !set.contains(&id))
}

/// Deletes the objects no branch or tag reaches that were modified before `cut_off`.
///
/// # Errors
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
    let retained = find_retained(assets, storage, options.manifest_concurrency).await?;
    let keep_snapshot = |id: &str| !unretained(&retained.snapshots, id);
    let keep_manifest = |id: &str| !unretained(&retained.manifests, id);
    let keep_chunk = |id: &str| !unretained(&retained.chunks, id);
    // Snapshots first and chunks last: a reader never finds a snapshot whose
    // manifests or chunks are gone.
    let phases: [(&str, KeepFn<'_>); 4] = [
        (keys::SNAPSHOTS, &keep_snapshot),
        (keys::TRANSACTIONS, &keep_snapshot),
        (keys::MANIFESTS, &keep_manifest),
        (keys::CHUNKS, &keep_chunk),
    ];
    let mut deleted = [0u64; 4];
    let mut summary = GcSummary::default();
    for (count, (prefix, keep)) in deleted.iter_mut().zip(phases) {
        let (n, bytes) = sweep(storage, prefix, keep, cut_off, options, progress).await?;
        *count = n;
        summary.bytes_deleted = summary.bytes_deleted.saturating_add(bytes);
    }
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
