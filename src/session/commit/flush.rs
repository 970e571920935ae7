//! Turning a change set into a new snapshot ([`flush`]): manifests, the transaction
//! log and the snapshot written, nothing visible yet. The commit point, the
//! compare-and-swap of the branch ref that makes the snapshot the branch's tip, is not
//! here: it is [`crate::refs::RefStore::commit`] (`src/refs/store.rs`), which the
//! commit loop (`commit_loop.rs`) calls once per attempt.
//!
//! Spec: Icechunk specification, "Write New Snapshot" and "Creating and Updating
//! Branches": write chunks (done as they are set, except packs of small chunks not
//! written yet, written first here), manifests, the transaction log, the
//! snapshot, then conditionally update `refs/branch.<name>/ref.json`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use crate::assets::AssetManager;
use crate::error::Result;
use crate::format::envelope::FileType;
use crate::format::snapshot::{
    now_micros, ManifestFileInfo, ManifestRef, NodeData, NodeSnapshot, Snapshot,
};
use crate::format::transaction_log::{chunk_lists_size, TransactionLog};
use crate::format::{ManifestId, NodeId, NodePath, SnapshotId};

use crate::session::change_set::ChangeSet;
use crate::session::chunks::packs::Packs;
use crate::session::manifest_split::{
    write_array_manifests, write_pending, ArrayManifests, ManifestLayouts, PendingManifest,
};
use crate::session::overlay::apply_node_changes;

/// How many arrays' manifests are merged, encoded and written at once (bounds the
/// memory of a wide commit and its requests in flight).
const MANIFEST_WRITE_CONCURRENCY: usize = 32;

/// Encoded manifests a commit holds back to write beside its snapshot (64 MiB); past
/// this, an array's manifests are written as soon as they are encoded.
const PENDING_MANIFEST_BYTES: usize = 64 << 20;

/// Above this many chunk changes, a commit encodes its transaction log straight from
/// the change set (no `TransactionLog` copy of every chunk index, and none kept in
/// the asset cache).
const LOG_COPY_MAX_CHUNKS: usize = 65_536;

/// Where a new snapshot goes in the history.
#[derive(Clone, Debug)]
pub(crate) enum CommitMethod<'a> {
    /// A child of the base snapshot.
    NewCommit,
    /// A replacement of the base snapshot (the branch tip), given with its transaction
    /// log: the new snapshot's parent is the base's parent, and its transaction log
    /// records the base's changes followed by the new ones.
    Amend(&'a TransactionLog),
    /// A child of the base snapshot that moved these nodes (a rearrange session; the
    /// base is the moved view).
    Moves(Vec<crate::format::transaction_log::MovedNode>),
    /// Every array's manifests rewritten in the current layout (Icechunk's
    /// `rewrite_manifests`): a child of the base, or with `Some(log)` a replacement
    /// of the base as [`CommitMethod::Amend`].
    RewriteManifests(Option<&'a TransactionLog>),
    /// A replacement of the base snapshot's original (the branch tip) by a rearrange
    /// session: as [`CommitMethod::Amend`], the moves composed with the replaced
    /// commit's moves ([`TransactionLog::then`]).
    AmendMoves(
        &'a TransactionLog,
        Vec<crate::format::transaction_log::MovedNode>,
    ),
}

/// What [`flush`] writes: the change set `changes` on top of the snapshot `base`, as
/// the new snapshot `new_id` with its commit message and metadata, through `assets`,
/// each array's manifests cut as `layouts` says, and `method` saying what kind of
/// snapshot it is (a commit, an amend, a rearrange, a manifest rewrite).
pub(crate) struct FlushRequest<'a> {
    /// The repository's object store and caches.
    pub(crate) assets: &'a AssetManager,
    /// How each array's chunk refs are cut into manifests.
    pub(crate) layouts: &'a ManifestLayouts,
    /// The session's chunk packs, written first: `changes` may refer into them.
    pub(crate) packs: &'a Packs,
    /// The snapshot the changes apply to.
    pub(crate) base: &'a Snapshot,
    /// The changes.
    pub(crate) changes: &'a Arc<ChangeSet>,
    /// The new snapshot's id.
    pub(crate) new_id: SnapshotId,
    /// The commit message.
    pub(crate) message: &'a str,
    /// The commit metadata.
    pub(crate) metadata: BTreeMap<String, serde_json::Value>,
    /// What kind of snapshot it is.
    pub(crate) method: CommitMethod<'a>,
}

/// Builds and writes the new snapshot `new_id` for `changes` on top of `base`: writes
/// the session's chunk packs not written yet, then one new manifest per array whose
/// chunks changed (or whose shape shrank), reuses every other manifest as it is, and
/// writes the transaction log, the snapshot and the last manifests of each array at
/// once (one round trip on object storage; up to 64 MiB of encoded manifests are
/// held back for it).
/// Nothing is visible until the branch moves ([`crate::refs::RefStore::commit`], the
/// commit point). Each array's manifests follow the layout `layouts` gives it (the
/// configuration's `manifest.splitting`, or floe's own).
///
/// # Errors
/// Storage and format errors.
pub(crate) async fn flush(request: FlushRequest<'_>) -> Result<Arc<Snapshot>> {
    let FlushRequest {
        assets,
        layouts,
        packs,
        base,
        changes,
        new_id,
        message,
        metadata,
        method,
    } = request;
    // Every pack the changes may refer into is written before anything refers to it
    // durably (the changes were taken before this, so each of their refs points
    // into a pack open or sealed by now).
    packs.flush(assets).await?;
    let mut nodes = apply_node_changes(base, changes);

    // Arrays whose manifests change: those with chunk changes, and those resized so
    // that refs fall outside the new shape or the manifest layout moved.
    let mut rewrite: Vec<(NodePath, bool)> = Vec::new();
    for (path, node) in &nodes {
        let Some(a) = node.array() else { continue };
        let chunk_changes = changes
            .array_chunks(&node.id)
            .is_some_and(|c| !c.is_empty());
        let old = base
            .nodes
            .get(path)
            .filter(|o| o.id == node.id)
            .and_then(NodeSnapshot::array);
        let rewrite_all = old.is_some_and(|o| {
            let shrunk = o
                .shape
                .iter()
                .zip(&a.shape)
                .any(|(before, after)| after.num_chunks < before.num_chunks);
            o.shape != a.shape && (shrunk || layouts.layout(path, o) != layouts.layout(path, a))
        });
        if matches!(method, CommitMethod::RewriteManifests(_)) {
            rewrite.push((path.clone(), true));
        } else if chunk_changes || rewrite_all {
            rewrite.push((path.clone(), rewrite_all));
        }
    }

    // A large log of a new commit is encoded from the change set's chunk indices;
    // an amend merges the replaced commit's log, so it is built in full.
    let stream_chunks = changes.num_chunk_changes() > LOG_COPY_MAX_CHUNKS
        && !matches!(
            method,
            CommitMethod::Amend(_)
                | CommitMethod::RewriteManifests(Some(_))
                | CommitMethod::AmendMoves(..)
        );
    let own_log = |id| {
        if stream_chunks {
            changes.transaction_log_of_nodes(id)
        } else {
            changes.transaction_log(id)
        }
    };
    let (parent_id, log) = match method {
        CommitMethod::NewCommit | CommitMethod::RewriteManifests(None) => {
            (Some(base.id), own_log(new_id))
        }
        CommitMethod::Amend(previous) | CommitMethod::RewriteManifests(Some(previous)) => {
            (base.parent_id, previous.then(&own_log(new_id), new_id))
        }
        CommitMethod::Moves(moves) => {
            let mut log = own_log(new_id);
            log.moved_nodes = moves;
            (Some(base.id), log)
        }
        CommitMethod::AmendMoves(previous, moves) => {
            let mut log = own_log(new_id);
            log.moved_nodes = moves;
            (base.parent_id, previous.then(&log, new_id))
        }
    };
    let write_log = async {
        let mut log = log;
        if !stream_chunks {
            log.fold_own_oversized_chunk_lists();
            return assets.write_transaction_log(Arc::new(log)).await;
        }
        let changes = Arc::clone(changes);
        let (spec, level) = (
            assets.spec_version(),
            assets.compression_level(FileType::TransactionLog),
        );
        let bytes = crate::assets::blocking(move || {
            let sizes: Vec<(NodeId, usize, usize)> = changes
                .updated_chunks()
                .map(|(id, c)| (id, c.len(), c.keys().next().map_or(0, <[u64]>::len)))
                .collect();
            let folded = log.fold_oversized_chunk_lists(sizes.iter().copied());
            let estimated = chunk_lists_size(
                sizes
                    .iter()
                    .filter(|(id, ..)| !folded.contains(id))
                    .map(|&(_, n, ndim)| (n, ndim)),
            );
            let chunks = changes
                .updated_chunks()
                .filter(|(id, _)| !folded.contains(id))
                .map(|(id, c)| (id, c.keys()));
            log.encode_with_chunks(spec, level, chunks, estimated)
        })
        .await?;
        assets.write_transaction_log_bytes(&new_id, bytes).await
    };
    let jobs: Vec<(NodePath, NodeSnapshot, bool)> = rewrite
        .into_iter()
        .filter_map(|(path, all)| {
            let node = nodes.get(&path)?.clone();
            Some((path, node, all))
        })
        .collect();
    let held = std::sync::atomic::AtomicUsize::new(0);
    let held = &held;
    let manifests = futures::stream::iter(jobs.into_iter().map(
        |(path, node, rewrite_all)| async move {
            let old: Vec<ManifestRef> = base
                .nodes
                .get(&path)
                .filter(|o| o.id == node.id)
                .and_then(NodeSnapshot::array)
                .map(|a| a.manifests.clone())
                .unwrap_or_default();
            let Some(array) = node.array() else {
                return Ok((path, ArrayManifests::default()));
            };
            let layout = layouts.layout(&path, array);
            let mut written = write_array_manifests(
                assets,
                base,
                node.id,
                &old,
                &array.shape,
                layout,
                layouts.fetch_concurrency(),
                changes,
                rewrite_all,
            )
            .await?;
            // Held back for the snapshot's round trip while they fit the budget.
            let bytes: usize = written.pending.iter().map(PendingManifest::len).sum();
            let before = held.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
            if before.saturating_add(bytes) > PENDING_MANIFEST_BYTES {
                held.fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
                let now = std::mem::take(&mut written.pending);
                write_pending(assets, now, MANIFEST_WRITE_CONCURRENCY).await?;
            }
            Ok::<_, crate::error::Error>((path, written))
        },
    ))
    .buffer_unordered(MANIFEST_WRITE_CONCURRENCY)
    .try_collect::<Vec<(NodePath, ArrayManifests)>>();

    // The transaction log depends on nothing else: it is written while the manifests
    // and then the snapshot (which names the manifests and their sizes) are.
    let tree = async move {
        let new_manifests = manifests.await?;
        let mut infos: HashMap<ManifestId, ManifestFileInfo> =
            base.manifest_files.iter().map(|i| (i.id, *i)).collect();
        let mut pending = Vec::new();
        for (path, new) in new_manifests {
            pending.extend(new.pending);
            if let Some(NodeData::Array(a)) = nodes.get_mut(&path).map(|n| &mut n.node_data) {
                infos.extend(new.written.iter().map(|i| (i.id, *i)));
                a.manifests = new.refs;
            }
        }
        let mut manifest_files: Vec<ManifestFileInfo> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for node in nodes.values() {
            if let Some(a) = node.array() {
                for m in &a.manifests {
                    if seen.insert(m.object_id) {
                        if let Some(info) = infos.get(&m.object_id) {
                            manifest_files.push(*info);
                        }
                    }
                }
            }
        }
        manifest_files.sort_by_key(|i| i.id);
        let snapshot = Arc::new(Snapshot {
            spec_version: assets.spec_version(),
            id: new_id,
            parent_id,
            flushed_at: now_micros().max(base.flushed_at + 1),
            message: message.to_string(),
            metadata,
            manifest_files,
            nodes,
        });
        // The snapshot and the manifests it names go out together: none is visible
        // before the commit point, which waits for both.
        futures::try_join!(
            assets.write_snapshot(Arc::clone(&snapshot)),
            write_pending(assets, pending, MANIFEST_WRITE_CONCURRENCY)
        )?;
        Ok::<_, crate::error::Error>(snapshot)
    };
    let ((), snapshot) = futures::try_join!(write_log, tree)?;
    Ok(snapshot)
}
