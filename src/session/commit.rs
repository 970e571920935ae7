//! Turning a change set into a new snapshot (flush), and the commit point: the
//! compare-and-swap of the branch ref.
//!
//! Spec: Icechunk specification, "Write New Snapshot" and "Creating and Updating
//! Branches": write chunks (done as they are set), manifests, the transaction log, the
//! snapshot, then conditionally update `refs/branch.<name>/ref.json`.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use itertools::{Either, EitherOrBoth, Itertools};

use crate::assets::AssetManager;
use crate::error::Result;
use crate::format::envelope::FileType;
use crate::format::manifest::{ChunkPayloadRef, Manifest};
use crate::format::snapshot::{
    now_micros, DimensionShape, ManifestFileInfo, ManifestRef, NodeData, NodeSnapshot, Snapshot,
};
use crate::format::transaction_log::TransactionLog;
use crate::format::{ManifestId, NodeId, NodePath, SnapshotId};

use super::change_set::ChangeSet;
use super::manifest_split::{write_array_manifests, ArrayManifests, SplitLayout};

/// How many arrays' manifests are merged, encoded and written at once (bounds the
/// memory of a wide commit and its requests in flight).
const MANIFEST_WRITE_CONCURRENCY: usize = 32;

/// Above this many chunk changes, a commit encodes its transaction log straight from
/// the change set (no `TransactionLog` copy of every chunk index, and none kept in
/// the asset cache).
const LOG_COPY_MAX_CHUNKS: usize = 65_536;

/// Whether chunk `index` lies inside the chunk grid of `shape` and every coordinate
/// fits an Icechunk file ([`crate::format::MAX_CHUNK_COORDINATE`]).
pub fn index_in_bounds(shape: &[DimensionShape], index: &[u64]) -> bool {
    index.len() == shape.len()
        && index
            .iter()
            .zip(shape)
            .all(|(&i, d)| i < d.num_chunks() && i <= crate::format::MAX_CHUNK_COORDINATE)
}

/// The node tree of `base` with `changes` applied (manifests not yet updated).
pub(crate) fn apply_node_changes(
    base: &Snapshot,
    changes: &ChangeSet,
) -> BTreeMap<NodePath, NodeSnapshot> {
    let mut nodes: BTreeMap<NodePath, NodeSnapshot> = base
        .nodes
        .values()
        .filter_map(|n| changes.apply(n))
        .map(|n| (n.path.clone(), n))
        .collect();
    for (path, (id, new)) in changes.new_nodes() {
        nodes.insert(path.clone(), new.snapshot(*id, path));
    }
    nodes
}

/// The manifests of `base` holding refs of array `node` (none for a new array).
///
/// # Errors
/// Storage and format errors fetching them; [`crate::format::FormatError::InvalidData`]
/// when a manifest holds chunk indices of another rank than the array's.
pub(crate) async fn committed_manifests(
    assets: &AssetManager,
    base: &Snapshot,
    node: &NodeSnapshot,
) -> Result<Vec<Arc<Manifest>>> {
    let mut out = Vec::new();
    let Some(old) = base.nodes.get(&node.path).filter(|n| n.id == node.id) else {
        return Ok(out);
    };
    if let Some(a) = old.array() {
        for mref in &a.manifests {
            let size = base.manifest_info(&mref.object_id).map(|i| i.size_bytes);
            let manifest = assets.fetch_manifest(&mref.object_id, size).await?;
            manifest.check_rank(&node.id, a.shape.len())?;
            out.push(manifest);
        }
    }
    Ok(out)
}

/// The refs of array `node` after `changes`: the committed refs of `manifests`
/// (merged in index order) overlaid with the change set's writes and deletions,
/// sorted by chunk index, without copying any of them.
pub(crate) fn merged_refs<'a>(
    manifests: &'a [Arc<Manifest>],
    changes: &'a ChangeSet,
    node: &NodeId,
) -> impl Iterator<Item = (&'a [u64], ChunkPayloadRef<'a>)> + 'a {
    merged_refs_from(manifests, changes, node, &[])
}

/// [`merged_refs`] from the first chunk index at or after `start` (the empty index
/// is before all others).
pub(crate) fn merged_refs_from<'a>(
    manifests: &'a [Arc<Manifest>],
    changes: &'a ChangeSet,
    node: &NodeId,
    start: &'a [u64],
) -> impl Iterator<Item = (&'a [u64], ChunkPayloadRef<'a>)> + 'a {
    let from = (Bound::Included(start), Bound::Unbounded);
    let changed = changes
        .array_chunks(node)
        .into_iter()
        .flat_map(move |c| c.iter_from(start));
    let mut committed_arrays = manifests
        .iter()
        .filter_map(|m| m.arrays.get(node))
        .peekable();
    if committed_arrays.peek().is_none() {
        // A new array, or one whose refs were all dropped: only the change set's
        // refs (the common case of a large commit), without a merge per ref.
        return Either::Left(changed.filter_map(|(k, v)| v.map(|v| (k, v))));
    }
    let committed = committed_arrays
        .map(move |refs| refs.range::<[u64], _>(from))
        .kmerge_by(|a, b| a.0 < b.0)
        .map(|(k, v)| (k.as_slice(), ChunkPayloadRef::from(v)));
    Either::Right(
        committed
            .merge_join_by(changed, |a, b| a.0.cmp(b.0))
            .filter_map(|entry| match entry {
                EitherOrBoth::Left(kv) => Some(kv),
                EitherOrBoth::Right((k, v)) | EitherOrBoth::Both(_, (k, v)) => v.map(|v| (k, v)),
            }),
    )
}

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
}

/// Builds and writes the new snapshot `new_id` for `changes` on top of `base`: writes
/// one new manifest per array whose chunks changed (or whose shape shrank), reuses
/// every other manifest as it is, then writes the transaction log and the snapshot.
/// Nothing is visible until the branch moves ([`crate::refs::RefStore::commit`], the
/// commit point).
///
/// # Errors
/// Storage and format errors.
pub(crate) async fn flush(
    assets: &AssetManager,
    base: &Snapshot,
    changes: &Arc<ChangeSet>,
    new_id: SnapshotId,
    message: &str,
    metadata: BTreeMap<String, serde_json::Value>,
    method: CommitMethod<'_>,
) -> Result<Arc<Snapshot>> {
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
                .any(|(before, after)| after.num_chunks() < before.num_chunks());
            o.shape != a.shape
                && (shrunk || SplitLayout::for_shape(&o.shape) != SplitLayout::for_shape(&a.shape))
        });
        if chunk_changes || rewrite_all {
            rewrite.push((path.clone(), rewrite_all));
        }
    }

    // A large log of a new commit is encoded from the change set's chunk indices;
    // an amend merges the replaced commit's log, so it is built in full.
    let stream_chunks = changes.num_chunk_changes() > LOG_COPY_MAX_CHUNKS
        && !matches!(method, CommitMethod::Amend(_));
    let own_log = |id| {
        if stream_chunks {
            changes.transaction_log_of_nodes(id)
        } else {
            changes.transaction_log(id)
        }
    };
    let (parent_id, log) = match method {
        CommitMethod::NewCommit => (Some(base.id), own_log(new_id)),
        CommitMethod::Amend(previous) => (base.parent_id, previous.then(&own_log(new_id), new_id)),
        CommitMethod::Moves(moves) => {
            let mut log = own_log(new_id);
            log.moved_nodes = moves;
            (Some(base.id), log)
        }
    };
    let write_log = async {
        if !stream_chunks {
            return assets.write_transaction_log(Arc::new(log)).await;
        }
        let changes = Arc::clone(changes);
        let (spec, level) = (
            assets.spec_version(),
            assets.compression_level(FileType::TransactionLog),
        );
        let bytes = crate::assets::blocking(move || {
            let chunks = changes.updated_chunks().map(|(id, c)| (id, c.keys()));
            log.encode_with_chunks(spec, level, chunks, changes.num_chunk_changes())
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
    let manifests = futures::stream::iter(jobs.into_iter().map(
        |(path, node, rewrite_all)| async move {
            let old: Vec<ManifestRef> = base
                .nodes
                .get(&path)
                .filter(|o| o.id == node.id)
                .and_then(NodeSnapshot::array)
                .map(|a| a.manifests.clone())
                .unwrap_or_default();
            let shape = node.array().map(|a| a.shape.clone()).unwrap_or_default();
            let written =
                write_array_manifests(assets, base, node.id, &old, &shape, changes, rewrite_all)
                    .await?;
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
        for (path, new) in new_manifests {
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
        assets.write_snapshot(Arc::clone(&snapshot)).await?;
        Ok::<_, crate::error::Error>(snapshot)
    };
    let ((), snapshot) = futures::try_join!(write_log, tree)?;
    Ok(snapshot)
}
