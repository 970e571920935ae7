//! Diffs: which nodes were added, deleted or updated, and which chunks changed, by path.
//! Built from a session's change set, or from the transaction logs of a range of commits.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::format::snapshot::Snapshot;
use crate::format::transaction_log::TransactionLog;
use crate::format::{ChunkIndices, NodeId, NodePath};

use super::change_set::{ChangeSet, NewNode};

/// Changes between two states of a repository, by node path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// Groups created.
    pub new_groups: BTreeSet<NodePath>,
    /// Arrays created.
    pub new_arrays: BTreeSet<NodePath>,
    /// Groups deleted.
    pub deleted_groups: BTreeSet<NodePath>,
    /// Arrays deleted.
    pub deleted_arrays: BTreeSet<NodePath>,
    /// Groups whose `zarr.json` changed.
    pub updated_groups: BTreeSet<NodePath>,
    /// Arrays whose `zarr.json` changed.
    pub updated_arrays: BTreeSet<NodePath>,
    /// Chunks written or deleted, by array path.
    pub updated_chunks: BTreeMap<NodePath, BTreeSet<ChunkIndices>>,
    /// Spec 2: nodes moved, by new path, with the path they had before (every node
    /// under a moved group included). The other fields name nodes by their paths
    /// after the moves.
    pub moved_nodes: BTreeMap<NodePath, NodePath>,
}

fn paths_by_id(s: &Snapshot) -> HashMap<NodeId, &NodePath> {
    s.nodes.values().map(|n| (n.id, &n.path)).collect()
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.new_groups.is_empty()
            && self.new_arrays.is_empty()
            && self.deleted_groups.is_empty()
            && self.deleted_arrays.is_empty()
            && self.updated_groups.is_empty()
            && self.updated_arrays.is_empty()
            && self.updated_chunks.is_empty()
            && self.moved_nodes.is_empty()
    }

    /// The diff of uncommitted `changes` on top of `base`.
    pub fn from_change_set(base: &Snapshot, changes: &ChangeSet) -> Self {
        let mut d = Diff::default();
        let base_paths = paths_by_id(base);
        let mut path_of: HashMap<NodeId, NodePath> = base_paths
            .iter()
            .map(|(id, p)| (*id, (*p).clone()))
            .collect();
        for (path, (id, node)) in changes.new_nodes() {
            path_of.insert(*id, path.clone());
            match node {
                NewNode::Group(_) => d.new_groups.insert(path.clone()),
                NewNode::Array(_) => d.new_arrays.insert(path.clone()),
            };
        }
        for id in changes.updated_group_ids() {
            if let Some(p) = path_of.get(id) {
                d.updated_groups.insert(p.clone());
            }
        }
        for id in changes.updated_array_ids() {
            if let Some(p) = path_of.get(id) {
                d.updated_arrays.insert(p.clone());
            }
        }
        for (_, path, is_group) in changes.deleted_nodes() {
            if is_group {
                d.deleted_groups.insert(path.clone());
            } else {
                d.deleted_arrays.insert(path.clone());
            }
        }
        for id in changes.arrays_with_chunk_changes() {
            if let (Some(p), Some(chunks)) = (path_of.get(id), changes.array_chunks(id)) {
                d.updated_chunks
                    .insert(p.clone(), chunks.keys().map(<[u64]>::to_vec).collect());
            }
        }
        d
    }

    /// The diff recorded by the transaction log of `commit`, whose parent is `parent`
    /// (deleted nodes are named by their path in the parent).
    pub fn from_transaction_log(
        log: &TransactionLog,
        parent: &Snapshot,
        commit: &Snapshot,
    ) -> Self {
        Self::from_transaction_logs([log], parent, commit)
    }

    /// The diff recorded by the transaction logs of the commits from `from` (excluded)
    /// to `to`, as Icechunk computes it: the union of what the logs say, by node id,
    /// each node named by its path in `to`, else in `from` (a node created and
    /// deleted in between is in neither and is left out; a node created then updated
    /// is listed as both). Moves are listed as recorded.
    pub fn from_transaction_logs<'a>(
        logs: impl IntoIterator<Item = &'a TransactionLog>,
        from: &Snapshot,
        to: &Snapshot,
    ) -> Self {
        let mut path_of = paths_by_id(from);
        path_of.extend(paths_by_id(to));
        let name = |set: &BTreeSet<NodeId>, out: &mut BTreeSet<NodePath>| {
            out.extend(
                set.iter()
                    .filter_map(|id| path_of.get(id).map(|p| (*p).clone())),
            );
        };
        let mut d = Diff::default();
        for log in logs {
            name(&log.new_groups, &mut d.new_groups);
            name(&log.new_arrays, &mut d.new_arrays);
            name(&log.deleted_groups, &mut d.deleted_groups);
            name(&log.deleted_arrays, &mut d.deleted_arrays);
            name(&log.updated_groups, &mut d.updated_groups);
            name(&log.updated_arrays, &mut d.updated_arrays);
            for (id, chunks) in &log.updated_chunks {
                if let Some(p) = path_of.get(id) {
                    d.updated_chunks
                        .entry((*p).clone())
                        .or_default()
                        .extend(chunks.iter().cloned());
                }
            }
            for m in &log.moved_nodes {
                d.moved_nodes.insert(m.to.clone(), m.from.clone());
            }
        }
        d
    }
}

/// The diff between two arbitrary snapshots, by comparing their node trees and chunk
/// refs (for snapshots where neither is an ancestor of the other). Nodes replaced by
/// a new node at the same path count as deleted and created.
///
/// # Errors
/// Storage and format errors reading manifests.
pub async fn structural_diff(
    assets: &crate::assets::AssetManager,
    from: &Snapshot,
    to: &Snapshot,
) -> crate::error::Result<Diff> {
    use itertools::{EitherOrBoth, Itertools};

    let mut d = Diff::default();
    let empty = std::sync::Arc::new(ChangeSet::default());
    for entry in from
        .nodes
        .values()
        .merge_join_by(to.nodes.values(), |a, b| a.path.cmp(&b.path))
    {
        let (old, new) = match entry {
            EitherOrBoth::Left(old) => (Some(old), None),
            EitherOrBoth::Right(new) => (None, Some(new)),
            EitherOrBoth::Both(old, new) if old.id != new.id => (Some(old), Some(new)),
            EitherOrBoth::Both(old, new) => {
                let path = new.path.clone();
                if old.user_data != new.user_data {
                    if new.is_group() {
                        d.updated_groups.insert(path.clone());
                    } else {
                        d.updated_arrays.insert(path.clone());
                    }
                }
                let (Some(a), Some(b)) = (old.array(), new.array()) else {
                    continue;
                };
                if a.manifests == b.manifests {
                    continue;
                }
                let before = super::overlay::committed_manifests(assets, from, old).await?;
                let after = super::overlay::committed_manifests(assets, to, new).await?;
                let changed: BTreeSet<ChunkIndices> =
                    super::overlay::merged_refs(&before, &empty, &old.id)
                        .merge_join_by(
                            super::overlay::merged_refs(&after, &empty, &new.id),
                            |x, y| x.0.cmp(y.0),
                        )
                        .filter_map(|e| match e {
                            EitherOrBoth::Both(x, y) if x.1 == y.1 => None,
                            EitherOrBoth::Both(x, _) | EitherOrBoth::Left(x) => Some(x.0.to_vec()),
                            EitherOrBoth::Right(y) => Some(y.0.to_vec()),
                        })
                        .collect();
                if !changed.is_empty() {
                    d.updated_chunks.insert(path, changed);
                }
                continue;
            }
        };
        if let Some(old) = old {
            if old.is_group() {
                d.deleted_groups.insert(old.path.clone());
            } else {
                d.deleted_arrays.insert(old.path.clone());
            }
        }
        if let Some(new) = new {
            if new.is_group() {
                d.new_groups.insert(new.path.clone());
            } else {
                d.new_arrays.insert(new.path.clone());
            }
        }
    }
    Ok(d)
}
