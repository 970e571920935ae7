//! [`RefStore`]: branches, tags and the commit point of a repository of either spec
//! version, as one interface.

use std::sync::Arc;

use super::branch_hints::BranchHints;
use super::ref_files;
use super::repo_object::{self, Change};
use super::RefListing;
use crate::assets::AssetManager;
use crate::error::{Error, Result};
use crate::format::refs::ref_name_problem;
use crate::format::repo_info::{FeatureFlag, RepoInfo, SnapshotSummary, UpdateKind};
use crate::format::snapshot::Snapshot;
use crate::format::{SnapshotId, SpecVersion};
use crate::storage::{ObjectVersion, Storage};

/// Where a branch pointed when read, for the commit point's compare-and-swap.
#[derive(Clone, Debug)]
pub(crate) struct BranchTip {
    /// The snapshot.
    pub(crate) snapshot: SnapshotId,
    /// Spec 1: the version of the ref file (spec 2 checks the tip itself).
    version: Option<ObjectVersion>,
}

/// The outcome of trying to move a branch at the commit point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RefUpdate {
    /// The branch now points at the new snapshot.
    Moved,
    /// Another writer moved the branch first; nothing was changed.
    Lost,
}

/// Branches, tags and the commit point of one repository.
#[derive(Clone, Debug)]
pub(crate) struct RefStore {
    assets: Arc<AssetManager>,
    /// Spec 1: the snapshots branch refs named when last read or written, shared by
    /// every clone of this store (a repository handle and its sessions).
    hints: Arc<BranchHints>,
}

/// Fails with [`Error::FeatureDisabled`] when `info` turns `flag` off.
pub(crate) fn check_flag(
    info: &RepoInfo,
    operation: &'static str,
    flag: FeatureFlag,
) -> Result<()> {
    if info.feature_flag_enabled(flag) {
        Ok(())
    } else {
        Err(Error::FeatureDisabled {
            operation,
            flag: flag.name(),
        })
    }
}

/// A name for a log line: its first 64 characters in `Debug` form (control
/// characters escaped), with its length when longer.
fn shown(name: &str) -> String {
    let head: String = name.chars().take(64).collect();
    if head.len() == name.len() {
        format!("{head:?}")
    } else {
        format!("{head:?}... ({} bytes)", name.len())
    }
}

/// `names` (of refs of `kind`, read from storage) without those that break the naming
/// rules, each left out with a warning (the name escaped and shortened, see
/// [`shown`]).
fn valid_names(kind: &'static str, names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| match ref_name_problem(name) {
            None => true,
            Some(reason) => {
                tracing::warn!(
                    kind,
                    name = %shown(name),
                    reason,
                    "ignoring a ref with an invalid name in the repository"
                );
                false
            }
        })
        .collect()
}

fn known_snapshot(info: &RepoInfo, id: SnapshotId) -> Result<()> {
    if info.snapshots.contains_key(&id) {
        Ok(())
    } else {
        Err(Error::SnapshotNotFound { id })
    }
}

fn branch_of(info: &RepoInfo, name: &str) -> Result<SnapshotId> {
    info.branches
        .get(name)
        .copied()
        .ok_or_else(|| Error::BranchNotFound {
            name: name.to_string(),
        })
}

/// What the `repo` object records of snapshot `s`.
fn summary(s: &Snapshot, pruned_ancestor_tx_logs: Option<Vec<SnapshotId>>) -> SnapshotSummary {
    SnapshotSummary {
        pruned_ancestor_tx_logs,
        ..SnapshotSummary::from(s)
    }
}

impl RefStore {
    /// The refs of the repository `assets` reads and writes, of its spec version.
    pub(crate) fn new(assets: Arc<AssetManager>) -> Self {
        RefStore {
            assets,
            hints: Arc::default(),
        }
    }

    /// Spec 1: records that branch `name` named snapshot `id` when its ref was read
    /// or written ([`RefStore::branch_hint`]).
    pub(crate) fn hint_branch(&self, name: &str, id: SnapshotId) {
        self.hints.hint(name, id);
    }

    /// Spec 1: the snapshot branch `name` named when its ref was last read or
    /// written through this store or a clone of it; possibly stale, a guess to
    /// fetch beside a read of the ref.
    pub(crate) fn branch_hint(&self, name: &str) -> Option<SnapshotId> {
        self.hints.get(name)
    }

    /// The repository's storage.
    fn storage(&self) -> &dyn Storage {
        self.assets.storage().as_ref()
    }

    fn spec(&self) -> SpecVersion {
        self.assets.spec_version()
    }

    /// Spec 2: the current `repo` object.
    async fn repo(&self) -> Result<Arc<RepoInfo>> {
        Ok(self.assets.fetch_repo_info().await?.0)
    }

    /// Branches, live tags and deleted tags, sorted. Names read from storage that
    /// break the naming rules ([`ref_files::validate_ref_name`]: empty, too long,
    /// `.`, `..`, `/`, control characters) are left out, each with a warning.
    ///
    /// # Errors
    /// Storage and format errors.
    pub(crate) async fn list(&self) -> Result<RefListing> {
        let listing = match self.spec() {
            SpecVersion::V1 => ref_files::list_refs(self.storage()).await?,
            SpecVersion::V2 => {
                let info = self.repo().await?;
                RefListing {
                    branches: info.branches.keys().cloned().collect(),
                    tags: info.tags.keys().cloned().collect(),
                    deleted_tags: info.deleted_tags.iter().cloned().collect(),
                }
            }
        };
        Ok(RefListing {
            branches: valid_names("branch", listing.branches),
            tags: valid_names("tag", listing.tags),
            deleted_tags: valid_names("tag", listing.deleted_tags),
        })
    }

    /// Where branch `name` points.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; [`Error::InvalidRefName`]; storage and format errors.
    pub(crate) async fn branch(&self, name: &str) -> Result<BranchTip> {
        ref_files::validate_ref_name("branch", name)?;
        match self.spec() {
            SpecVersion::V1 => {
                let (snapshot, version) = ref_files::fetch_branch(self.storage(), name).await?;
                self.hints.hint(name, snapshot);
                Ok(BranchTip { snapshot, version })
            }
            SpecVersion::V2 => Ok(BranchTip {
                snapshot: branch_of(&*self.repo().await?, name)?,
                version: None,
            }),
        }
    }

    /// Where branch `name` points, read anew: on spec 2 one GET of the `repo`
    /// object, without re-validating the object as last read first (for a caller
    /// that knows it is stale: its compare-and-swap was refused); otherwise as
    /// [`RefStore::branch`].
    ///
    /// # Errors
    /// As [`RefStore::branch`].
    pub(crate) async fn branch_fresh(&self, name: &str) -> Result<BranchTip> {
        if self.spec() == SpecVersion::V2 {
            ref_files::validate_ref_name("branch", name)?;
            let (_, info, _) = self.assets.refetch_repo_object().await?;
            return Ok(BranchTip {
                snapshot: branch_of(&info, name)?,
                version: None,
            });
        }
        self.branch(name).await
    }

    /// Where branch `name` points for a commit about to move it: on spec 2 from the
    /// `repo` object as this handle last read or wrote it, with no request (the
    /// commit's compare-and-swap refuses a stale object, and its next attempt reads
    /// anew); otherwise as [`RefStore::branch`].
    ///
    /// # Errors
    /// As [`RefStore::branch`].
    pub(crate) async fn branch_for_commit(&self, name: &str) -> Result<BranchTip> {
        if self.spec() == SpecVersion::V2 {
            ref_files::validate_ref_name("branch", name)?;
            if let Some((_, info, _)) = self.assets.cached_repo_object() {
                return Ok(BranchTip {
                    snapshot: branch_of(&info, name)?,
                    version: None,
                });
            }
        }
        self.branch(name).await
    }

    /// Spec 2: saves a copy of the `repo` object as last read under `overwritten/`
    /// for a commit's update of it, sent beside the commit's other writes
    /// ([`repo_object::save_copy_ahead`]); `None` on spec 1 (no such copy) or before
    /// the object was read.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) async fn save_copy_ahead(&self) -> Result<Option<repo_object::SavedCopy>> {
        match self.spec() {
            SpecVersion::V1 => Ok(None),
            SpecVersion::V2 => repo_object::save_copy_ahead(&self.assets).await,
        }
    }

    /// Deletes a copy saved by [`RefStore::save_copy_ahead`] that no update will use
    /// (best effort).
    pub(crate) async fn drop_copy(&self, copy: Option<repo_object::SavedCopy>) {
        repo_object::drop_unused_copy(&self.assets, copy).await;
    }

    /// Where tag `name` points.
    ///
    /// # Errors
    /// [`Error::TagNotFound`]; [`Error::TagDeleted`]; [`Error::InvalidRefName`];
    /// storage and format errors.
    pub(crate) async fn tag(&self, name: &str) -> Result<SnapshotId> {
        ref_files::validate_ref_name("tag", name)?;
        match self.spec() {
            SpecVersion::V1 => ref_files::fetch_tag(self.storage(), name).await,
            SpecVersion::V2 => {
                let info = self.repo().await?;
                if let Some(id) = info.tags.get(name) {
                    return Ok(*id);
                }
                Err(if info.deleted_tags.contains(name) {
                    Error::TagDeleted {
                        name: name.to_string(),
                    }
                } else {
                    Error::TagNotFound {
                        name: name.to_string(),
                    }
                })
            }
        }
    }

    /// Creates branch `name` at `snapshot` (which must exist).
    ///
    /// # Errors
    /// [`Error::BranchExists`], [`Error::SnapshotNotFound`], [`Error::InvalidRefName`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub(crate) async fn create_branch(&self, name: &str, snapshot: SnapshotId) -> Result<()> {
        ref_files::validate_ref_name("branch", name)?;
        match self.spec() {
            SpecVersion::V1 => {
                self.assets.fetch_snapshot_header(&snapshot).await?;
                ref_files::create_branch(self.storage(), name, snapshot).await
            }
            SpecVersion::V2 => {
                repo_object::update(&self.assets, false, |info| {
                    if info.branches.contains_key(name) {
                        return Err(Error::BranchExists {
                            name: name.to_string(),
                        });
                    }
                    known_snapshot(info, snapshot)?;
                    info.branches.insert(name.to_string(), snapshot);
                    Ok(Change::Write(
                        UpdateKind::BranchCreated {
                            name: name.to_string(),
                        },
                        (),
                    ))
                })
                .await
            }
        }
    }

    /// Deletes branch `name` (never `main`).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::CannotDeleteMain`], [`Error::InvalidRefName`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub(crate) async fn delete_branch(&self, name: &str) -> Result<()> {
        ref_files::validate_ref_name("branch", name)?;
        match self.spec() {
            SpecVersion::V1 => ref_files::delete_branch(self.storage(), name).await,
            SpecVersion::V2 => {
                if name == "main" {
                    return Err(Error::CannotDeleteMain);
                }
                repo_object::update(&self.assets, false, |info| {
                    let previous_snap_id = branch_of(info, name)?;
                    info.branches.remove(name);
                    Ok(Change::Write(
                        UpdateKind::BranchDeleted {
                            name: name.to_string(),
                            previous_snap_id,
                        },
                        (),
                    ))
                })
                .await
            }
        }
    }

    /// Moves branch `name` to `to` (which must exist) if it still points at
    /// `expected` (or, when `None`, where it pointed when first read).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::SnapshotNotFound`], [`Error::BranchMoved`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub(crate) async fn reset_branch(
        &self,
        name: &str,
        to: SnapshotId,
        expected: Option<SnapshotId>,
    ) -> Result<()> {
        if self.spec() == SpecVersion::V2 {
            return self.reset_branch_v2(name, to, expected).await;
        }
        let tip = self.branch(name).await?;
        let expected_snapshot = expected.unwrap_or(tip.snapshot);
        let moved = |actual| Error::BranchMoved {
            branch: name.to_string(),
            expected: expected_snapshot,
            actual,
        };
        if tip.snapshot != expected_snapshot {
            return Err(moved(tip.snapshot));
        }
        self.assets.fetch_snapshot_header(&to).await?;
        let storage = self.storage();
        if ref_files::update_branch(storage, name, to, tip.version.as_ref()).await? {
            Ok(())
        } else {
            Err(moved(ref_files::fetch_branch(storage, name).await?.0))
        }
    }

    /// Spec 2 [`RefStore::reset_branch`]: one compare-and-swap of the `repo` object
    /// as this handle last read or wrote it, with no re-validating request first (a
    /// stale object is refused by the swap, or re-checked when it fails a check); the
    /// checks (branch exists, `to` is known, the tip is `expected`) run on the object
    /// the swap replaces. Two round trips: the copy under `overwritten/`, the swap.
    async fn reset_branch_v2(
        &self,
        name: &str,
        to: SnapshotId,
        expected: Option<SnapshotId>,
    ) -> Result<()> {
        ref_files::validate_ref_name("branch", name)?;
        repo_object::update(&self.assets, false, |info| {
            let previous_snap_id = branch_of(info, name)?;
            if let Some(expected) = expected {
                if previous_snap_id != expected {
                    return Err(Error::BranchMoved {
                        branch: name.to_string(),
                        expected,
                        actual: previous_snap_id,
                    });
                }
            }
            known_snapshot(info, to)?;
            info.branches.insert(name.to_string(), to);
            Ok(Change::Write(
                UpdateKind::BranchReset {
                    name: name.to_string(),
                    previous_snap_id,
                },
                (),
            ))
        })
        .await
    }

    /// Creates tag `name` at `snapshot` (which must exist). Tags never move.
    ///
    /// # Errors
    /// [`Error::TagExists`], [`Error::TagDeleted`], [`Error::SnapshotNotFound`],
    /// [`Error::InvalidRefName`], [`Error::FeatureDisabled`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub(crate) async fn create_tag(&self, name: &str, snapshot: SnapshotId) -> Result<()> {
        ref_files::validate_ref_name("tag", name)?;
        match self.spec() {
            SpecVersion::V1 => {
                self.assets.fetch_snapshot_header(&snapshot).await?;
                ref_files::create_tag(self.storage(), name, snapshot).await
            }
            SpecVersion::V2 => {
                repo_object::update(&self.assets, false, |info| {
                    check_flag(info, "create_tag", FeatureFlag::CreateTag)?;
                    if info.tags.contains_key(name) {
                        return Err(Error::TagExists {
                            name: name.to_string(),
                        });
                    }
                    if info.deleted_tags.contains(name) {
                        return Err(Error::TagDeleted {
                            name: name.to_string(),
                        });
                    }
                    known_snapshot(info, snapshot)?;
                    info.tags.insert(name.to_string(), snapshot);
                    Ok(Change::Write(
                        UpdateKind::TagCreated {
                            name: name.to_string(),
                        },
                        (),
                    ))
                })
                .await
            }
        }
    }

    /// Deletes tag `name`; its name can never be used again.
    ///
    /// # Errors
    /// [`Error::TagNotFound`], [`Error::TagDeleted`], [`Error::FeatureDisabled`],
    /// [`Error::InvalidRefName`], [`Error::RepositoryReadOnly`]; storage errors.
    pub(crate) async fn delete_tag(&self, name: &str) -> Result<()> {
        ref_files::validate_ref_name("tag", name)?;
        match self.spec() {
            SpecVersion::V1 => ref_files::delete_tag(self.storage(), name).await,
            SpecVersion::V2 => {
                repo_object::update(&self.assets, false, |info| {
                    check_flag(info, "delete_tag", FeatureFlag::DeleteTag)?;
                    let Some(previous_snap_id) = info.tags.remove(name) else {
                        return Err(if info.deleted_tags.contains(name) {
                            Error::TagDeleted {
                                name: name.to_string(),
                            }
                        } else {
                            Error::TagNotFound {
                                name: name.to_string(),
                            }
                        });
                    };
                    info.deleted_tags.insert(name.to_string());
                    Ok(Change::Write(
                        UpdateKind::TagDeleted {
                            name: name.to_string(),
                            previous_snap_id,
                        },
                        (),
                    ))
                })
                .await
            }
        }
    }

    /// The commit point: moves `branch` from `expected` to `snapshot` (already
    /// written) with compare-and-swap. In spec 2 this also adds the snapshot to the
    /// `repo` object with its parent link and records the commit in the ops log
    /// (`CommitAmended` when `amends` names the replaced tip, whose pruned
    /// ancestor logs the new snapshot inherits). Exactly one of several concurrent
    /// callers expecting the same tip succeeds.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`] (spec 2: the branch was deleted);
    /// [`Error::InvalidRefName`]; [`Error::RepositoryReadOnly`]; storage and format
    /// errors.
    pub(crate) async fn commit(
        &self,
        branch: &str,
        expected: &BranchTip,
        snapshot: &Snapshot,
        amends: Option<SnapshotId>,
        ahead: Option<repo_object::SavedCopy>,
    ) -> Result<RefUpdate> {
        ref_files::validate_ref_name("branch", branch)?;
        match self.spec() {
            SpecVersion::V1 => {
                let moved = ref_files::update_branch(
                    self.storage(),
                    branch,
                    snapshot.id,
                    expected.version.as_ref(),
                )
                .await?;
                if moved {
                    self.hints.hint(branch, snapshot.id);
                }
                Ok(if moved {
                    RefUpdate::Moved
                } else {
                    RefUpdate::Lost
                })
            }
            SpecVersion::V2 => {
                repo_object::update_with_copy(&self.assets, false, ahead, |info| {
                    let tip = branch_of(info, branch)?;
                    if tip != expected.snapshot {
                        return Ok(Change::Skip(RefUpdate::Lost));
                    }
                    let pruned = amends
                        .and_then(|old| info.snapshots.get(&old))
                        .and_then(|s| s.pruned_ancestor_tx_logs.clone());
                    info.snapshots
                        .insert(snapshot.id, summary(snapshot, pruned));
                    info.branches.insert(branch.to_string(), snapshot.id);
                    let kind = match amends {
                        None => UpdateKind::NewCommit {
                            branch: branch.to_string(),
                            new_snap_id: snapshot.id,
                        },
                        Some(previous_snap_id) => UpdateKind::CommitAmended {
                            branch: branch.to_string(),
                            previous_snap_id,
                            new_snap_id: snapshot.id,
                        },
                    };
                    Ok(Change::Write(kind, RefUpdate::Moved))
                })
                .await
            }
        }
    }

    /// Records a snapshot written outside any branch (a fork's starting point): spec 2
    /// lists it in the `repo` object (`NewDetachedSnapshot`), so its parent link is
    /// known; spec 1 has nothing to record.
    ///
    /// # Errors
    /// [`Error::RepositoryReadOnly`]; storage and format errors.
    pub(crate) async fn record_detached(&self, snapshot: &Snapshot) -> Result<()> {
        if self.spec() == SpecVersion::V1 {
            return Ok(());
        }
        repo_object::update(&self.assets, false, |info| {
            if info.snapshots.contains_key(&snapshot.id) {
                return Ok(Change::Skip(()));
            }
            info.snapshots.insert(snapshot.id, summary(snapshot, None));
            Ok(Change::Write(
                UpdateKind::NewDetachedSnapshot {
                    new_snap_id: snapshot.id,
                },
                (),
            ))
        })
        .await
    }
}
