//! Conflict detection: which changes of a change set ("ours") overlap changes made
//! elsewhere ("theirs") since both started from the same snapshot.
//!
//! The same rules serve a rebase (theirs: the commits that landed on the branch,
//! read from their transaction logs) and a merge of forks (theirs: what the session
//! and the forks merged before changed since the fork was made). Two sides conflict
//! when they changed the same chunk, the same node's metadata, or when one changed a
//! node the other deleted; see [`Conflict`] for every case. A rebase judges as
//! Icechunk's `ConflictDetector` does, with one difference: the same group created
//! on both sides (same path, same `zarr.json`) is merged, not a conflict. A merge of
//! forks is symmetric, so it also counts metadata changed on one side while chunks
//! were written on the other (whichever side merges first), which a rebase, like
//! Icechunk's, only counts when this side wrote the chunks.

use std::collections::{BTreeSet, HashMap};

use crate::error::Conflict;
use crate::format::snapshot::{NodeKind, NodeSnapshot};
use crate::format::{ChunkIndices, NodeId, NodePath};

use crate::session::change_set::{ChangeSet, NewNode};

/// What the other side did, asked node by node.
pub(crate) trait TheirChanges {
    /// Whether they changed node `id`'s metadata (`zarr.json`).
    fn changed_metadata(&self, id: &NodeId) -> bool;
    /// Whether node `id` no longer exists on their side.
    fn deleted(&self, id: &NodeId) -> bool;
    /// Whether they wrote or deleted chunk `index` of array `id`.
    fn changed_chunk(&self, id: &NodeId, index: &[u64]) -> bool;
    /// Whether they wrote or deleted any chunk of array `id`.
    fn changed_any_chunk(&self, id: &NodeId) -> bool;
}

/// Either side's changes count (e.g. commits on the branch, then the session's own).
pub(crate) struct Either<'a>(
    pub(crate) &'a dyn TheirChanges,
    pub(crate) &'a dyn TheirChanges,
);

impl TheirChanges for Either<'_> {
    fn changed_metadata(&self, id: &NodeId) -> bool {
        self.0.changed_metadata(id) || self.1.changed_metadata(id)
    }
    fn deleted(&self, id: &NodeId) -> bool {
        self.0.deleted(id) || self.1.deleted(id)
    }
    fn changed_chunk(&self, id: &NodeId, index: &[u64]) -> bool {
        self.0.changed_chunk(id, index) || self.1.changed_chunk(id, index)
    }
    fn changed_any_chunk(&self, id: &NodeId) -> bool {
        self.0.changed_any_chunk(id) || self.1.changed_any_chunk(id)
    }
}

/// The tree on their side, for checks by path.
pub(crate) struct TheirTree<'a> {
    /// Their nodes by path.
    pub(crate) nodes: &'a std::collections::BTreeMap<NodePath, NodeSnapshot>,
}

/// The outcome of [`detect`].
#[derive(Debug, Default)]
pub(crate) struct Detected {
    /// Every conflict, in a stable order (new nodes, metadata, chunks, deletions).
    pub(crate) conflicts: Vec<Conflict>,
    /// New groups both sides created identically: ours is dropped, theirs kept.
    pub(crate) same_new_groups: Vec<NodePath>,
}

/// How strictly [`detect`] judges metadata changes against chunk writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rules {
    /// As Icechunk's rebase: our metadata change beside their chunk writes is fine.
    Rebase,
    /// Symmetric: our metadata change beside their chunk writes is a conflict too.
    Merge,
}

/// Finds every conflict between `ours` and `theirs`; `path_of` names committed nodes.
pub(crate) fn detect(
    ours: &ChangeSet,
    theirs: &dyn TheirChanges,
    their_tree: &TheirTree<'_>,
    path_of: &dyn Fn(&NodeId) -> NodePath,
    rules: Rules,
) -> Detected {
    let mut out = Detected::default();
    let deleted_paths: BTreeSet<&NodePath> = ours.deleted_nodes().map(|(_, p, _)| p).collect();
    for (path, (_, new)) in ours.new_nodes() {
        // A node deleted and created again at the same path is judged by its deletion.
        let existing = their_tree
            .nodes
            .get(path)
            .filter(|_| !deleted_paths.contains(path));
        match (existing, new) {
            (Some(e), NewNode::Group(ud)) if e.is_group() && e.user_data == *ud => {
                out.same_new_groups.push(path.clone());
            }
            (Some(_), _) => out
                .conflicts
                .push(Conflict::NewNodeAtExistingPath { path: path.clone() }),
            (None, _) => {
                let under_array = path
                    .parent()
                    .and_then(|p| their_tree.nodes.get(&p))
                    .is_some_and(|p| !p.is_group());
                if under_array {
                    out.conflicts
                        .push(Conflict::NewNodeAtExistingPath { path: path.clone() });
                }
            }
        }
    }
    let mut ours_meta: BTreeSet<NodeId> = ours.updated_group_ids().copied().collect();
    ours_meta.extend(ours.updated_array_ids().copied());
    for id in &ours_meta {
        let path = path_of(id);
        if theirs.deleted(id) {
            out.conflicts.push(Conflict::ChangedNodeWasDeleted { path });
        } else if theirs.changed_metadata(id) {
            out.conflicts
                .push(Conflict::NodeMetadataChangedByBoth { path });
        } else if rules == Rules::Merge && theirs.changed_any_chunk(id) {
            out.conflicts
                .push(Conflict::ChunksWrittenWhileArrayChanged { path });
        }
    }
    // As Icechunk's detector: an array whose metadata and chunks both sides changed
    // reports each conflict (metadata above, then chunks written while the other
    // side changed the metadata, then the chunks both wrote).
    for id in ours.arrays_with_chunk_changes() {
        if ours.is_new(id) {
            continue;
        }
        let path = path_of(id);
        if theirs.deleted(id) {
            if !ours_meta.contains(id) {
                out.conflicts.push(Conflict::ChangedNodeWasDeleted { path });
            }
            continue;
        }
        if theirs.changed_metadata(id) {
            out.conflicts
                .push(Conflict::ChunksWrittenWhileArrayChanged { path: path.clone() });
        }
        let both: Vec<ChunkIndices> = ours
            .array_chunks(id)
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|k| theirs.changed_chunk(id, k))
            .map(<[u64]>::to_vec)
            .collect();
        if !both.is_empty() {
            out.conflicts.push(Conflict::ChunksChangedByBoth {
                path,
                node: *id,
                chunks: both,
            });
        }
    }
    for (id, path, is_group) in ours.deleted_nodes() {
        // Deleted on both sides is no conflict (as in Icechunk).
        if theirs.deleted(id) {
            continue;
        }
        let kind = if is_group {
            NodeKind::Group
        } else {
            NodeKind::Array
        };
        let changed = theirs.changed_metadata(id)
            || (kind == NodeKind::Array && theirs.changed_any_chunk(id));
        if changed {
            out.conflicts.push(Conflict::DeletedNodeWasChanged {
                path: path.clone(),
                node: *id,
                kind,
            });
        }
    }
    out
}

/// Paths of committed nodes by id, for naming them in conflicts.
pub(crate) fn paths_by_id<'a>(
    nodes: impl IntoIterator<Item = &'a NodeSnapshot>,
) -> HashMap<NodeId, NodePath> {
    nodes.into_iter().map(|n| (n.id, n.path.clone())).collect()
}
