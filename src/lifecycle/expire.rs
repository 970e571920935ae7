//! Snapshot expiry. Spec 2 (`expire_repo_info`) only edits the `repo` object's
//! parent links, as Icechunk's `expire_v2`. Spec 1 follows Icechunk design document
//! 007, "basic expiration":
//!
//! For every ref — live tags first, then branches, each in name order — the ancestry
//! from the ref's snapshot down to the initial snapshot is walked. Snapshots flushed
//! before the cut-off are *expired*; the oldest snapshot that is not expired is
//! rewritten in place (same id, same content) with the initial snapshot as its parent,
//! so the expired snapshots drop out of that ref's history. Nothing is deleted: the
//! expired snapshots, their manifests and chunks stay until [`super::gc`] finds them
//! unreachable and older than its own cut-off. An expired snapshot may still be
//! reachable from another ref.
//!
//! A ref whose own snapshot is expired is an *expired ref*: with the options it is
//! deleted (tags get a tombstone; `main` is never deleted). A branch is deleted only
//! if its ref file still has the version that was judged (a conditional delete,
//! [`crate::storage::Storage::delete_if_match`]): a commit that lands on it meanwhile
//! keeps it (reported in [`ExpireResult::kept_moved_branches`]). Icechunk 2.3.0
//! deletes the ref unconditionally, which loses such a commit.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::repo_info::{RepoInfo, SnapshotSummary};
use crate::format::SnapshotId;
use crate::refs;
use crate::storage::Storage;

/// What [`crate::Repository::expire_snapshots`] does with refs whose own snapshot
/// is expired. Both default to keeping them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExpireOptions {
    /// Delete branches (other than `main`) whose tip is expired.
    pub delete_expired_branches: bool,
    /// Delete tags whose snapshot is expired (a tombstone is written, as by
    /// [`crate::Repository::delete_tag`]).
    pub delete_expired_tags: bool,
    /// Write nothing: the [`ExpireResult`] says what the expiry would do (which
    /// snapshots would leave the histories, which would be rewritten, which refs
    /// would be deleted), judged on the repository as it is now.
    pub dry_run: bool,
}

impl ExpireOptions {
    /// Options that delete expired branches (`yes`) or keep them.
    pub fn delete_expired_branches(mut self, yes: bool) -> Self {
        self.delete_expired_branches = yes;
        self
    }

    /// Options that delete expired tags (`yes`) or keep them.
    pub fn delete_expired_tags(mut self, yes: bool) -> Self {
        self.delete_expired_tags = yes;
        self
    }

    /// Options that only report what the expiry would do (`yes`), writing nothing.
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }
}

/// What an expiry did (with [`ExpireOptions::dry_run`], what it would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExpireResult {
    /// Snapshots that dropped out of some ref's history (Icechunk's
    /// `released_snapshots`, what its `expire_snapshots` returns). Some may still be
    /// reachable from other refs.
    pub expired: BTreeSet<SnapshotId>,
    /// Snapshots rewritten with the initial snapshot as their new parent.
    pub edited: BTreeSet<SnapshotId>,
    /// Branches deleted because their tip was expired.
    pub deleted_branches: Vec<String>,
    /// Tags deleted because their snapshot was expired.
    pub deleted_tags: Vec<String>,
    /// Branches judged expired that were kept because a writer moved (or deleted)
    /// them before the deletion: every branch deletion is conditional on the ref
    /// version that was judged (spec 1: a conditional delete of the ref file; spec 2:
    /// the compare-and-swap of the `repo` object, where a moved branch is judged
    /// again and so never lands here).
    pub kept_moved_branches: Vec<String>,
}

/// The outcome of expiring one ref's history.
struct RefExpiry {
    /// Snapshots that left the history (empty when nothing was edited).
    released: HashSet<SnapshotId>,
    /// The snapshot rewritten, if any.
    edited: Option<SnapshotId>,
    /// Whether the ref's own snapshot is older than the cut-off.
    ref_is_expired: bool,
}

/// Expires the history of the ref at snapshot `tip` (with `dry_run`, says what it
/// would release and rewrite, writing nothing).
async fn expire_ref(
    assets: &AssetManager,
    tip: SnapshotId,
    older_than: DateTime<Utc>,
    dry_run: bool,
) -> Result<RefExpiry> {
    // One pass down the ancestry: `editable` ends at the oldest snapshot that is not
    // expired, `root` at the oldest expired one (normally the initial snapshot).
    let mut editable = tip;
    let mut root = tip;
    let mut released = HashSet::new();
    let mut ref_is_expired = false;
    let mut walk = ParentWalk::new(assets, tip);
    while let Some(snap) = walk.next().await? {
        let id = snap.id;
        let expired = snap.flushed_at_time() < older_than;
        if id == tip {
            ref_is_expired = expired;
        }
        if expired {
            released.insert(id);
            root = id;
        } else {
            editable = id;
        }
    }
    released.remove(&root);
    let nothing = RefExpiry {
        released: HashSet::new(),
        edited: None,
        ref_is_expired,
    };
    let editable_snap = assets.fetch_snapshot(&editable).await?;
    if editable == root || editable_snap.parent_id == Some(root) || root == tip {
        return Ok(nothing);
    }
    let root_snap = assets.fetch_snapshot(&root).await?;
    if root_snap.parent_id.is_some() || editable_snap.parent_id.is_none() {
        // Flush times out of order along the chain: re-parenting onto a snapshot that
        // has a parent could make a loop, so this history is left as it is.
        tracing::warn!(
            "not expiring the history of {tip}: snapshot {root} is expired but has a parent \
             that is not"
        );
        return Ok(nothing);
    }
    if !dry_run {
        let mut adopted = (*editable_snap).clone();
        adopted.parent_id = Some(root);
        assets.write_snapshot(std::sync::Arc::new(adopted)).await?;
    }
    Ok(RefExpiry {
        released,
        edited: Some(editable),
        ref_is_expired,
    })
}

/// Expires, in every ref's history, the snapshots flushed before `older_than`.
///
/// # Errors
/// [`crate::Error::AncestryLoop`] for a corrupt history;
/// [`crate::Error::SnapshotNotFound`]; storage and format errors. Refs already processed stay processed.
pub(crate) async fn expire_snapshots(
    assets: &AssetManager,
    storage: &dyn Storage,
    older_than: DateTime<Utc>,
    options: ExpireOptions,
) -> Result<ExpireResult> {
    let listing = refs::list_refs(storage).await?;
    let mut result = ExpireResult::default();
    let tags = listing.tags.iter().map(|t| (true, t));
    let branches = listing.branches.iter().map(|b| (false, b));
    for (is_tag, name) in tags.chain(branches) {
        // The version judged: a branch is deleted only if it still has it.
        let read = if is_tag {
            refs::fetch_tag(storage, name).await.map(|id| (id, None))
        } else {
            refs::fetch_branch(storage, name).await
        };
        let (tip, version) = match read {
            Ok(r) => r,
            // Deleted since the listing: nothing to expire.
            Err(
                Error::BranchNotFound { .. } | Error::TagNotFound { .. } | Error::TagDeleted { .. },
            ) => continue,
            Err(e) => return Err(e),
        };
        let done = expire_ref(assets, tip, older_than, options.dry_run).await?;
        result.expired.extend(done.released);
        result.edited.extend(done.edited);
        if !done.ref_is_expired {
            continue;
        }
        if is_tag && options.delete_expired_tags {
            if !options.dry_run {
                refs::delete_tag(storage, name).await?;
            }
            result.deleted_tags.push(name.clone());
        } else if !is_tag && options.delete_expired_branches && name != "main" {
            let deleted = match &version {
                Some(_) if options.dry_run => true,
                Some(v) => refs::delete_branch_if_unmoved(storage, name, v).await?,
                None => {
                    tracing::warn!(
                        "not deleting expired branch {name}: the storage reports no version \
                         to delete it conditionally"
                    );
                    false
                }
            };
            if deleted {
                result.deleted_branches.push(name.clone());
            } else {
                tracing::info!("kept expired branch {name}: it moved since it was judged");
                result.kept_moved_branches.push(name.clone());
            }
        }
    }
    Ok(result)
}

/// Spec 2: the ids from `from`'s parent back through `info` until `boundary` holds
/// (exclusive), and the pruned transaction-log list `from` gets when it is
/// re-parented over them: oldest first, each collapsed ancestor's own pruned list
/// before its id, then `from`'s own list (as Icechunk's `reparent_and_prune`).
/// Returns the boundary ancestor (`None` when none holds) and the list.
pub(crate) fn reparent_and_prune(
    info: &RepoInfo,
    from: &SnapshotSummary,
    boundary: impl Fn(&SnapshotSummary) -> bool,
) -> (Option<SnapshotId>, Vec<SnapshotId>) {
    let mut collapsed: Vec<&SnapshotSummary> = Vec::new();
    let mut new_parent = None;
    let mut seen = HashSet::from([from.id]);
    let mut next = from.parent_id;
    while let Some(id) = next {
        let Some(s) = info.snapshots.get(&id) else {
            break;
        };
        if !seen.insert(id) {
            break;
        }
        if boundary(s) {
            new_parent = Some(id);
            break;
        }
        collapsed.push(s);
        next = s.parent_id;
    }
    let mut pruned = Vec::new();
    for s in collapsed.into_iter().rev() {
        pruned.extend(s.pruned_ancestor_tx_logs.iter().flatten().copied());
        pruned.push(s.id);
    }
    pruned.extend(from.pruned_ancestor_tx_logs.iter().flatten().copied());
    (new_parent, pruned)
}

/// Spec 2: removes the `released` snapshots from `info` (a copy of `original`) and
/// re-parents every kept snapshot whose parent was released: its transaction logs
/// span its ancestors up to the first for which `boundary` holds
/// ([`reparent_and_prune`]), and its new parent is `new_parent(snapshot, that
/// ancestor)`. Returns the re-parented snapshots.
pub(crate) fn release_snapshots(
    info: &mut RepoInfo,
    original: &RepoInfo,
    released: &HashSet<SnapshotId>,
    boundary: impl Fn(&SnapshotSummary) -> bool,
    new_parent: impl Fn(&SnapshotSummary, Option<SnapshotId>) -> SnapshotId,
) -> BTreeSet<SnapshotId> {
    let mut edited = BTreeSet::new();
    for s in original.snapshots.values() {
        if released.contains(&s.id) {
            info.snapshots.remove(&s.id);
            continue;
        }
        if !s.parent_id.is_some_and(|p| released.contains(&p)) {
            continue;
        }
        let (found, pruned) = reparent_and_prune(original, s, &boundary);
        if let Some(kept) = info.snapshots.get_mut(&s.id) {
            kept.parent_id = Some(new_parent(s, found));
            kept.pruned_ancestor_tx_logs = (!pruned.is_empty()).then_some(pruned);
        }
        edited.insert(s.id);
    }
    edited
}

/// Spec 2: expiry as one change of the `repo` object (Icechunk's `expire_v2`):
/// snapshots flushed before `older_than` (microseconds) that have a parent are
/// expired; those not protected as ref tips (`main`'s always, other branches' and
/// tags' unless the options delete them) are removed from the object, and every
/// kept snapshot whose parent was removed is re-parented to the root of its ref's
/// history (the initial snapshot when none), recording the transaction logs it now
/// spans in `pruned_ancestor_tx_logs` (spec 2.1). No snapshot file changes.
pub(crate) fn expire_repo_info(
    info: &mut RepoInfo,
    older_than: u64,
    options: ExpireOptions,
) -> ExpireResult {
    let original = info.clone();
    // Each ref tree's root and the non-root snapshots in it.
    let mut tree_of: HashMap<SnapshotId, SnapshotId> = HashMap::new();
    for tip in original.tags.values().chain(original.branches.values()) {
        let Ok(history) = original.ancestry(*tip) else {
            continue;
        };
        let root = history
            .iter()
            .find(|s| s.parent_id.is_none())
            .map_or(SnapshotId::INITIAL, |s| s.id);
        for s in history.iter().filter(|s| s.parent_id.is_some()) {
            tree_of.entry(s.id).or_insert(root);
        }
    }
    let tag_tips: HashSet<SnapshotId> = original.tags.values().copied().collect();
    let branch_tips: HashSet<SnapshotId> = original.branches.values().copied().collect();
    let main_tip = original.branches.get("main").copied();
    let expired: HashSet<SnapshotId> = original
        .snapshots
        .values()
        .filter(|s| s.flushed_at < older_than && s.parent_id.is_some())
        .map(|s| s.id)
        .collect();
    let released: HashSet<SnapshotId> = expired
        .iter()
        .copied()
        .filter(|id| {
            let protected_tag = !options.delete_expired_tags && tag_tips.contains(id);
            let protected_branch = (!options.delete_expired_branches || Some(*id) == main_tip)
                && branch_tips.contains(id);
            !(protected_tag || protected_branch)
        })
        .collect();
    let mut result = ExpireResult {
        expired: released.iter().copied().collect(),
        ..ExpireResult::default()
    };
    result.edited = release_snapshots(
        info,
        &original,
        &released,
        |a| a.parent_id.is_none(),
        |s, _| tree_of.get(&s.id).copied().unwrap_or(SnapshotId::INITIAL),
    );
    if options.delete_expired_tags {
        for (name, id) in &original.tags {
            if expired.contains(id) {
                info.tags.remove(name);
                info.deleted_tags.insert(name.clone());
                result.deleted_tags.push(name.clone());
            }
        }
    }
    if options.delete_expired_branches {
        for (name, id) in &original.branches {
            if name != "main" && expired.contains(id) {
                info.branches.remove(name);
                result.deleted_branches.push(name.clone());
            }
        }
    }
    result
}

/// Spec 2: [`expire_repo_info`] applied to the `repo` object with compare-and-swap
/// (`ExpirationRan` in the ops log), retried on the newest object while other
/// writers win.
///
/// # Errors
/// [`crate::Error::RepositoryReadOnly`]; storage and format errors.
pub(crate) async fn expire_snapshots_v2(
    assets: &AssetManager,
    older_than: DateTime<Utc>,
    options: ExpireOptions,
) -> Result<ExpireResult> {
    let cut = u64::try_from(older_than.timestamp_micros()).unwrap_or(0);
    // A dry run changes nothing, so it needs no online repository either.
    crate::refs::repo_object::update(assets, options.dry_run, |info| {
        let result = expire_repo_info(info, cut, options);
        Ok(if options.dry_run {
            crate::refs::repo_object::Change::Skip(result)
        } else {
            crate::refs::repo_object::Change::Write(
                crate::format::repo_info::UpdateKind::ExpirationRan,
                result,
            )
        })
    })
    .await
}
