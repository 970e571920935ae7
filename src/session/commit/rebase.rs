//! Rebase: re-applying a change set made on top of one snapshot on top of a newer
//! branch tip.
//!
//! The commits between the session's base and the tip are read from their
//! transaction logs (oldest first) and merged into one summary of what the other
//! side did; [`crate::session::commit::conflict::detect`] compares the change set with it, and the
//! [`ConflictSolver`] decides what happens with the conflicts found. When the base is
//! not an ancestor of the tip (the branch was reset), the rebase fails with
//! [`Conflict::BaseNotAncestor`].

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Conflict, Error, Result};
use crate::format::snapshot::Snapshot;
use crate::format::transaction_log::TransactionLog;
use crate::format::{ChunkIndices, NodeId, NodePath, SnapshotId, SpecVersion};

use crate::session::change_set::ChangeSet;
use crate::session::commit::conflict::{detect, paths_by_id, Rules, TheirChanges, TheirTree};
use crate::session::commit::solver::ConflictSolver;

/// The commits whose transaction logs say what happened from `base` to `tip`, oldest
/// first: the snapshot ids from `tip` back to (excluding) `base`; `None` when `base`
/// is not an ancestor of `tip`.
///
/// On spec 2 a `base` that expiry collapsed counts as an ancestor when a commit of
/// `tip`'s history was re-parented over it (spec 2.1, `pruned_ancestor_tx_logs`):
/// then the pruned logs after `base` come first, then that commit and the ones after
/// it, each after its own pruned logs. The changes are exactly those made since
/// `base`, so a rebase neither misses a conflict nor reports one the session had
/// already seen. (Icechunk 2.3.0 fails such a rebase with an internal error; its
/// later versions replay every log back to the root.)
///
/// # Errors
/// [`Error::AncestryLoop`]; storage and format errors.
pub(crate) async fn commits_since(
    assets: &AssetManager,
    base: SnapshotId,
    tip: SnapshotId,
) -> Result<Option<Vec<SnapshotId>>> {
    commits_since_base(assets, base, None, tip).await
}

/// [`commits_since`], given the flush time of `base` (microseconds) when the caller
/// holds its snapshot (else it is read, and a `base` no longer stored counts as no
/// ancestor).
///
/// On spec 1 a `base` that expiry cut out of `tip`'s history also counts as an
/// ancestor: expiry rewrote the oldest kept commit of that history (same id, same
/// transaction log) with the initial snapshot as its parent, so the walk from `tip`
/// ends `..., edited, initial` without passing `base`. When `base` is not the
/// initial snapshot and was flushed before `edited`, the commits from `edited` to
/// `tip` are taken as those since `base`. That is exact when the session was opened
/// on the branch tip after the expiry cut-off (what the README asks of cut-offs):
/// every commit after `base` was then flushed after the cut-off and kept, so
/// `edited`'s parent was `base`. Icechunk 2.3.0 replays every log down to the root
/// whenever the base is not found.
///
/// # Errors
/// As [`commits_since`].
pub(crate) async fn commits_since_base(
    assets: &AssetManager,
    base: SnapshotId,
    base_flushed_at: Option<u64>,
    tip: SnapshotId,
) -> Result<Option<Vec<SnapshotId>>> {
    // Spec 2: the `repo` object just read names every parent on the way (no
    // snapshot read, however many commits landed since `base`).
    if assets.spec_version() == SpecVersion::V2 {
        if let Some(chain) = assets.chain_by_known_parents(base, tip) {
            return Ok(Some(chain));
        }
    }
    // Newest first.
    let mut chain = Vec::new();
    let mut walk = ParentWalk::new(assets, tip);
    // The last two snapshots of the walk: the root and the one on it.
    let mut last_two: [Option<Arc<Snapshot>>; 2] = [None, None];
    while let Some(snap) = walk.next().await? {
        if snap.id == base {
            chain.reverse();
            return Ok(Some(chain));
        }
        chain.push(snap.id);
        last_two = [last_two[1].take(), Some(snap)];
    }
    if assets.spec_version() != SpecVersion::V2 {
        let [Some(edited), Some(root)] = last_two else {
            return Ok(None);
        };
        if edited.parent_id != Some(root.id) || root.parent_id.is_some() || base == root.id {
            return Ok(None);
        }
        let base_flushed_at = match base_flushed_at {
            Some(t) => t,
            None => match assets.fetch_snapshot(&base).await {
                Ok(s) if s.parent_id.is_some() => s.flushed_at,
                Ok(_) | Err(Error::SnapshotNotFound { .. }) => return Ok(None),
                Err(Error::Storage(crate::storage::StorageError::NotFound { .. })) => {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            },
        };
        if base_flushed_at >= edited.flushed_at {
            return Ok(None);
        }
        // Everything but the root, oldest first.
        chain.pop();
        chain.reverse();
        return Ok(Some(chain));
    }
    let (info, _) = assets.fetch_repo_info().await?;
    let pruned = |id: &SnapshotId| {
        info.snapshots
            .get(id)
            .and_then(|s| s.pruned_ancestor_tx_logs.as_deref())
            .unwrap_or_default()
    };
    // The newest commit re-parented over `base` (a later expiry merges the pruned
    // lists of the commits it collapses into the one it re-parents).
    let Some((i, at)) = chain
        .iter()
        .enumerate()
        .find_map(|(i, id)| Some((i, pruned(id).iter().position(|p| *p == base)?)))
    else {
        return Ok(None);
    };
    let mut out = pruned(&chain[i])[at + 1..].to_vec();
    out.push(chain[i]);
    for id in chain[..i].iter().rev() {
        out.extend_from_slice(pruned(id));
        out.push(*id);
    }
    Ok(Some(out))
}

/// What a run of commits did, merged from their transaction logs, with the node ids
/// of the tree they left.
#[derive(Debug, Default)]
pub(crate) struct CommitsSummary {
    metadata: BTreeSet<NodeId>,
    deleted: BTreeSet<NodeId>,
    chunks: BTreeMap<NodeId, BTreeSet<ChunkIndices>>,
    /// Node ids of the tree after the commits; `None` to judge deletions by the logs
    /// only.
    alive: Option<HashSet<NodeId>>,
}

impl CommitsSummary {
    /// Adds one commit's transaction log.
    pub(crate) fn add(&mut self, log: &TransactionLog) {
        self.metadata
            .extend(log.updated_arrays.iter().chain(&log.updated_groups));
        self.deleted
            .extend(log.deleted_arrays.iter().chain(&log.deleted_groups));
        for (node, chunks) in &log.updated_chunks {
            self.chunks
                .entry(*node)
                .or_default()
                .extend(chunks.iter().cloned());
        }
    }

    /// Reads the logs of `commits` (snapshot ids) into a summary that judges deletions
    /// by the logs alone.
    ///
    /// # Errors
    /// Storage and format errors.
    pub(crate) async fn read_logs(assets: &AssetManager, commits: &[SnapshotId]) -> Result<Self> {
        let mut summary = CommitsSummary::default();
        for id in commits {
            summary.add(&*assets.fetch_transaction_log(id).await?);
        }
        Ok(summary)
    }

    /// Reads the logs of `commits` (snapshot ids) into a summary whose tree is `tip`'s.
    ///
    /// # Errors
    /// Storage and format errors.
    pub(crate) async fn read(
        assets: &AssetManager,
        commits: &[SnapshotId],
        tip: &Snapshot,
    ) -> Result<Self> {
        let mut summary = CommitsSummary {
            alive: Some(tip.nodes.values().map(|n| n.id).collect()),
            ..CommitsSummary::default()
        };
        for id in commits {
            summary.add(&*assets.fetch_transaction_log(id).await?);
        }
        Ok(summary)
    }
}

impl TheirChanges for CommitsSummary {
    fn changed_metadata(&self, id: &NodeId) -> bool {
        self.metadata.contains(id)
    }
    fn deleted(&self, id: &NodeId) -> bool {
        self.deleted.contains(id) || self.alive.as_ref().is_some_and(|a| !a.contains(id))
    }
    fn changed_chunk(&self, id: &NodeId, index: &[u64]) -> bool {
        self.chunks.get(id).is_some_and(|c| c.contains(index))
    }
    fn changed_any_chunk(&self, id: &NodeId) -> bool {
        self.chunks.get(id).is_some_and(|c| !c.is_empty())
    }
}

/// The result of a successful rebase.
#[derive(Clone, Debug)]
pub(crate) struct Rebased {
    /// The branch tip the changes now apply to.
    pub(crate) tip: Arc<Snapshot>,
    /// The changes to apply: those given as the solver resolved them, less new groups
    /// the other side created identically (same path, same `zarr.json`).
    pub(crate) changes: Arc<ChangeSet>,
}

/// Re-applies `changes` (made on top of `base`) on top of `tip`, resolving conflicts
/// with `solver`.
///
/// # Errors
/// [`Error::Conflict`] listing every conflict when the solver cannot resolve them
/// (or [`Conflict::BaseNotAncestor`]); storage and format errors.
pub(crate) async fn rebase(
    assets: &AssetManager,
    branch: &str,
    base: &Snapshot,
    changes: &Arc<ChangeSet>,
    tip: SnapshotId,
    solver: &dyn ConflictSolver,
) -> Result<Rebased> {
    let conflict = |conflicts| Error::conflict(branch, base.id, tip, conflicts);
    let since = match base.parent_id {
        // The initial snapshot is on every history.
        None => commits_since(assets, base.id, tip).await?,
        Some(_) => commits_since_base(assets, base.id, Some(base.flushed_at), tip).await?,
    };
    let Some(commits) = since else {
        return Err(conflict(vec![Conflict::BaseNotAncestor { base: base.id }]));
    };
    // The transaction logs of the commits since the base and the tip snapshot are
    // fetched all at once (one round trip, however many commits landed meanwhile).
    let (logs, tip_snapshot) = futures::join!(
        futures::future::join_all(commits.iter().map(|id| assets.fetch_transaction_log(id))),
        assets.fetch_snapshot(&tip)
    );
    // A commit that moved nodes changed every path under them: nothing is rebased
    // over it (Icechunk: `MoveOperationCannotBeRebased`).
    for (id, log) in commits.iter().zip(logs) {
        match log {
            Ok(log) if !log.moved_nodes.is_empty() => {
                return Err(conflict(vec![Conflict::MovesCannotBeRebased {
                    snapshot: *id,
                }]));
            }
            Ok(_) | Err(Error::Storage(crate::storage::StorageError::NotFound { .. })) => {}
            Err(e) => return Err(e),
        }
    }
    let tip_snapshot = tip_snapshot?;
    let theirs = CommitsSummary::read(assets, &commits, &tip_snapshot).await?;
    let paths = paths_by_id(base.nodes.values());
    let path_of = |id: &NodeId| paths.get(id).cloned().unwrap_or_else(NodePath::root);
    let found = detect(
        changes,
        &theirs,
        &TheirTree {
            nodes: &tip_snapshot.nodes,
        },
        &path_of,
        Rules::Rebase,
    );
    let mut resolved = if found.conflicts.is_empty() && found.same_new_groups.is_empty() {
        return Ok(Rebased {
            tip: tip_snapshot,
            changes: Arc::clone(changes),
        });
    } else if found.conflicts.is_empty() {
        ChangeSet::clone(changes)
    } else {
        solver
            .solve(found.conflicts, ChangeSet::clone(changes))
            .map_err(conflict)?
    };
    for path in &found.same_new_groups {
        resolved.forget_new_node(path);
    }
    Ok(Rebased {
        tip: tip_snapshot,
        changes: Arc::new(resolved),
    })
}
