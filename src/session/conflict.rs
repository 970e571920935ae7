//! Conflict detection and rebase.
//!
//! When a commit finds its branch moved, the session's change set is checked against
//! the transaction log of every commit between the session's base snapshot and the
//! branch tip (oldest first). Changes are disjoint when the two sides wrote different
//! chunks and touched no node in common otherwise; then the change set is re-applied
//! on the tip. Anything else is a [`Conflict`], reported with the paths and chunk
//! indices involved and the id of the winning snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::assets::{AssetManager, ParentWalk};
pub use crate::error::{Conflict, ConflictError};
use crate::error::{Error, Result};
use crate::format::snapshot::Snapshot;
use crate::format::{ChunkIndices, NodeId, NodePath, SnapshotId};

use super::change_set::{ChangeSet, NewNode};

/// Snapshot ids from `tip` back to (excluding) `base`, oldest first; `None` when
/// `base` is not an ancestor of `tip`.
async fn commits_since(
    assets: &AssetManager,
    base: SnapshotId,
    tip: SnapshotId,
) -> Result<Option<Vec<SnapshotId>>> {
    let mut out = Vec::new();
    let mut walk = ParentWalk::new(assets, tip);
    while let Some(snap) = walk.next().await? {
        if snap.id == base {
            out.reverse();
            return Ok(Some(out));
        }
        out.push(snap.id);
    }
    Ok(None)
}

/// The result of a successful rebase check.
#[derive(Clone, Debug)]
pub struct Rebased {
    /// The branch tip the changes now apply to.
    pub tip: Arc<Snapshot>,
    /// The changes to apply: those given, less new groups the other side created
    /// identically (same path, same `zarr.json`), which are merged rather than
    /// reported as conflicts.
    pub changes: Arc<ChangeSet>,
}

/// Checks whether `changes` (made on top of `base`) can be re-applied on top of `tip`.
///
/// # Errors
/// [`Error::Conflict`] listing every conflict; storage and format errors.
pub async fn rebase_check(
    assets: &AssetManager,
    branch: &str,
    base: &Snapshot,
    changes: &Arc<ChangeSet>,
    tip: SnapshotId,
) -> Result<Rebased> {
    let conflict = |conflicts| {
        Error::Conflict(Box::new(ConflictError {
            branch: branch.to_string(),
            base: base.id,
            winning_snapshot: tip,
            conflicts,
        }))
    };
    let Some(commits) = commits_since(assets, base.id, tip).await? else {
        return Err(conflict(vec![Conflict::BaseNotAncestor { base: base.id }]));
    };
    let tip_snapshot = assets.fetch_snapshot(&tip).await?;

    // What the other side did, merged over all its commits.
    let mut their_meta: BTreeSet<NodeId> = BTreeSet::new();
    let mut their_deleted: BTreeSet<NodeId> = BTreeSet::new();
    let mut their_chunks: BTreeMap<NodeId, BTreeSet<ChunkIndices>> = BTreeMap::new();
    for id in &commits {
        let log = assets.fetch_transaction_log(id).await?;
        their_meta.extend(log.updated_arrays.iter().chain(&log.updated_groups));
        their_deleted.extend(log.deleted_arrays.iter().chain(&log.deleted_groups));
        for (node, chunks) in &log.updated_chunks {
            their_chunks
                .entry(*node)
                .or_default()
                .extend(chunks.iter().cloned());
        }
    }
    let tip_ids: BTreeSet<NodeId> = tip_snapshot.nodes.values().map(|n| n.id).collect();
    let base_paths: std::collections::HashMap<NodeId, &NodePath> =
        base.nodes.values().map(|n| (n.id, &n.path)).collect();
    let path_of = |id: &NodeId| -> NodePath {
        base_paths
            .get(id)
            .map_or_else(NodePath::root, |p| (*p).clone())
    };
    let their_touch = |id: &NodeId| their_meta.contains(id) || their_chunks.contains_key(id);

    let mut conflicts = Vec::new();
    let mut merged_groups = Vec::new();
    for (path, (_, new)) in changes.new_nodes() {
        match (tip_snapshot.nodes.get(path), new) {
            // Both sides created the same group: keep theirs.
            (Some(existing), NewNode::Group(ud))
                if existing.is_group() && existing.user_data == *ud =>
            {
                merged_groups.push(path.clone());
            }
            (Some(_), _) => conflicts.push(Conflict::NewNodeAtExistingPath { path: path.clone() }),
            (None, _) => {
                let under_array = path
                    .parent()
                    .and_then(|p| tip_snapshot.nodes.get(&p))
                    .is_some_and(|p| !p.is_group());
                if under_array {
                    conflicts.push(Conflict::NewNodeAtExistingPath { path: path.clone() });
                }
            }
        }
    }
    let mut ours_meta: BTreeSet<NodeId> = changes.updated_group_ids().copied().collect();
    ours_meta.extend(changes.updated_array_ids().copied());
    for id in &ours_meta {
        let path = path_of(id);
        if their_deleted.contains(id) || !tip_ids.contains(id) {
            conflicts.push(Conflict::ChangedNodeWasDeleted { path });
        } else if their_meta.contains(id) {
            conflicts.push(Conflict::NodeMetadataChangedByBoth { path });
        } else if their_chunks.contains_key(id) {
            conflicts.push(Conflict::ChunksWrittenWhileArrayChanged { path });
        }
    }
    for id in changes.arrays_with_chunk_changes() {
        if changes.is_new(id) || ours_meta.contains(id) {
            continue;
        }
        let path = path_of(id);
        if their_deleted.contains(id) || !tip_ids.contains(id) {
            conflicts.push(Conflict::ChangedNodeWasDeleted { path });
            continue;
        }
        if their_meta.contains(id) {
            conflicts.push(Conflict::ChunksWrittenWhileArrayChanged { path });
            continue;
        }
        if let (Some(theirs), Some(ours)) = (their_chunks.get(id), changes.array_chunks(id)) {
            let both: Vec<ChunkIndices> = ours
                .keys()
                .filter(|k| theirs.contains(*k))
                .cloned()
                .collect();
            if !both.is_empty() {
                conflicts.push(Conflict::ChunksChangedByBoth { path, chunks: both });
            }
        }
    }
    for (id, path, _) in changes.deleted_nodes() {
        if their_deleted.contains(id) || !tip_ids.contains(id) || their_touch(id) {
            conflicts.push(Conflict::DeletedNodeWasChanged { path: path.clone() });
        }
    }
    if !conflicts.is_empty() {
        return Err(conflict(conflicts));
    }
    let changes = if merged_groups.is_empty() {
        Arc::clone(changes)
    } else {
        let mut c = ChangeSet::clone(changes);
        for path in &merged_groups {
            c.forget_new_node(path);
        }
        Arc::new(c)
    };
    Ok(Rebased {
        tip: tip_snapshot,
        changes,
    })
}
