//! The node overlay: a snapshot's nodes and chunk refs with a change set applied,
//! without writing anything. Commits ([`super::commit::flush`]), manifest splitting
//! ([`super::manifest_split`]), forks, diffs and session reads all see a session's
//! state through these functions.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use itertools::{Either, EitherOrBoth, Itertools};

use crate::assets::AssetManager;
use crate::error::Result;
use crate::format::manifest::{ChunkPayloadRef, Manifest};
use crate::format::snapshot::{DimensionShape, NodeSnapshot, Snapshot};
use crate::format::{NodeId, NodePath};

use super::change_set::ChangeSet;

/// Whether chunk `index` lies inside the chunk grid of `shape` and every coordinate
/// fits an Icechunk file ([`crate::format::MAX_CHUNK_COORDINATE`]).
pub(crate) fn index_in_bounds(shape: &[DimensionShape], index: &[u64]) -> bool {
    index.len() == shape.len()
        && index
            .iter()
            .zip(shape)
            .all(|(&i, d)| i < d.num_chunks && i <= crate::format::MAX_CHUNK_COORDINATE)
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
