//! Squash: a stretch of a branch's history replaced by one commit with the same
//! final tree.
//!
//! `squash(branch, from, to)` takes the commits after `from` up to `to` (the
//! branch tip unless given) and makes `to` the child of `from`: the commits in
//! between leave the branch's history. `to` keeps its id, tree, message and
//! metadata, so the branch does not move and nothing a reader opened by id changes;
//! only the history between `from` and `to` becomes one step. It is a targeted
//! expiry:
//!
//! - **Spec 2**: one compare-and-swap of the `repo` object, recorded as
//!   `ExpirationRan` in the ops log (the ops-log kind Icechunk uses for history
//!   rewritten without new snapshots, so Icechunk 2.3.0 reads it). `to` gets
//!   `from` as parent and the squashed commits' transaction logs in
//!   `pruned_ancestor_tx_logs` (spec 2.1), so diffs from `from` to `to` stay
//!   complete. Squashed commits that no other ref or snapshot still reaches leave
//!   the object; garbage collection then deletes their files and whatever only
//!   they reached.
//! - **Spec 1**: `to`'s snapshot file is rewritten in place with `from` as parent
//!   (as spec-1 expiry rewrites a history's oldest kept snapshot, Icechunk design
//!   document 007); the squashed snapshots stay until garbage collection.
//!
//! Concurrent writers: the branch does not move, so a commit racing the squash
//! lands on `to` (its parent) before or after it and is never lost; in spec 2 the
//! squash is judged again on the newest `repo` object when a commit wins the swap.

use std::collections::HashSet;

use super::expire::reparent_and_prune;
use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::repo_info::{RepoInfo, UpdateKind};
use crate::format::{SnapshotId, SpecVersion};
use crate::refs::repo_object::{self, Change};

/// What a squash did (with `dry_run`, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SquashResult {
    /// The branch.
    pub branch: String,
    /// The commit the squashed one now follows.
    pub from: SnapshotId,
    /// The commit that now holds the squashed range (its id is unchanged).
    pub to: SnapshotId,
    /// The commits that left the branch's history, oldest first.
    pub squashed: Vec<SnapshotId>,
    /// Spec 2: the squashed commits that left the `repo` object (no other ref or
    /// snapshot reaches them); spec 1: empty.
    pub removed: Vec<SnapshotId>,
    /// Whether nothing was written.
    pub dry_run: bool,
}

/// The ids strictly between `from` and `to` in `history` (newest first, as an
/// ancestry walk from the tip gives it), oldest first.
///
/// # Errors
/// [`Error::InvalidSquashRange`] when `to` is not in `history` or `from` is not
/// below it.
fn range_between(
    branch: &str,
    history: &[SnapshotId],
    from: SnapshotId,
    to: SnapshotId,
) -> Result<Vec<SnapshotId>> {
    let invalid = |reason: String| Error::InvalidSquashRange {
        branch: branch.to_string(),
        reason,
    };
    let at_to = history
        .iter()
        .position(|id| *id == to)
        .ok_or_else(|| invalid(format!("{to} is not in the branch's history")))?;
    let below = &history[at_to + 1..];
    let at_from = below
        .iter()
        .position(|id| *id == from)
        .ok_or_else(|| invalid(format!("{from} is not an ancestor of {to} on the branch")))?;
    Ok(below[..at_from].iter().rev().copied().collect())
}

/// Spec 2: the squash applied to `info` (see the module docs); `Skip` when there is
/// nothing between `from` and `to`.
fn squash_repo_info(
    info: &mut RepoInfo,
    branch: &str,
    from: SnapshotId,
    to: Option<SnapshotId>,
) -> Result<SquashResult> {
    let tip = *info
        .branches
        .get(branch)
        .ok_or_else(|| Error::BranchNotFound {
            name: branch.to_string(),
        })?;
    let to = to.unwrap_or(tip);
    let history: Vec<SnapshotId> = info
        .ancestry(tip)
        .map_err(|id| Error::AncestryLoop { snapshot: id })?
        .iter()
        .map(|s| s.id)
        .collect();
    let squashed = range_between(branch, &history, from, to)?;
    let mut result = SquashResult {
        branch: branch.to_string(),
        from,
        to,
        squashed,
        removed: Vec::new(),
        dry_run: false,
    };
    if result.squashed.is_empty() {
        return Ok(result);
    }
    let original = info.clone();
    let Some(to_summary) = original.snapshots.get(&to) else {
        return Ok(result);
    };
    let (_, pruned) = reparent_and_prune(&original, to_summary, |a| a.id == from);
    if let Some(entry) = info.snapshots.get_mut(&to) {
        entry.parent_id = Some(from);
        entry.pruned_ancestor_tx_logs = (!pruned.is_empty()).then_some(pruned);
    }
    // What still reaches a squashed commit: any ref, or any snapshot outside the
    // range (another branch forked inside it, a fork's detached starting point).
    let range: HashSet<SnapshotId> = result.squashed.iter().copied().collect();
    let mut reached = HashSet::new();
    let starts = info
        .branches
        .values()
        .chain(info.tags.values())
        .copied()
        .chain(
            info.snapshots
                .keys()
                .copied()
                .filter(|id| !range.contains(id)),
        )
        .collect::<Vec<_>>();
    for start in starts {
        if let Ok(history) = info.ancestry(start) {
            for s in history {
                if !reached.insert(s.id) {
                    break;
                }
            }
        }
    }
    for id in &result.squashed {
        if !reached.contains(id) {
            info.snapshots.remove(id);
            result.removed.push(*id);
        }
    }
    Ok(result)
}

/// Squashes the commits of `branch` after `from` up to `to` (the tip when `None`)
/// into `to` (see the module docs). With `dry_run`, says what it would do and
/// writes nothing.
///
/// # Errors
/// [`Error::BranchNotFound`]; [`Error::InvalidSquashRange`]; [`Error::AncestryLoop`];
/// [`Error::RepositoryReadOnly`] (spec 2); storage and format errors.
pub(crate) async fn squash(
    assets: &AssetManager,
    spec: SpecVersion,
    branch: &str,
    from: SnapshotId,
    to: Option<SnapshotId>,
    dry_run: bool,
) -> Result<SquashResult> {
    if spec == SpecVersion::V2 {
        return repo_object::update(assets, dry_run, |info| {
            let mut result = squash_repo_info(info, branch, from, to)?;
            result.dry_run = dry_run;
            Ok(if dry_run || result.squashed.is_empty() {
                Change::Skip(result)
            } else {
                Change::Write(UpdateKind::ExpirationRan, result)
            })
        })
        .await;
    }
    let (tip, _) = crate::refs::fetch_branch(assets.storage().as_ref(), branch).await?;
    let to = to.unwrap_or(tip);
    let mut history = Vec::new();
    let mut walk = ParentWalk::new(assets, tip);
    while let Some(snap) = walk.next().await? {
        let done = snap.id == from;
        history.push(snap.id);
        if done {
            break;
        }
    }
    let squashed = range_between(branch, &history, from, to)?;
    if !dry_run && !squashed.is_empty() {
        let mut adopted = (*assets.fetch_snapshot(&to).await?).clone();
        adopted.parent_id = Some(from);
        assets.write_snapshot(std::sync::Arc::new(adopted)).await?;
    }
    Ok(SquashResult {
        branch: branch.to_string(),
        from,
        to,
        squashed,
        removed: Vec::new(),
        dry_run,
    })
}
