//! Version selection: [`VersionSelector`] (branch, tag, snapshot id, time on a
//! branch), resolving it to a snapshot id or a snapshot, and resolving a reference
//! string.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::assets::ParentWalk;
use crate::error::{Error, Result};
use crate::format::snapshot::Snapshot;
use crate::format::{SnapshotId, SpecVersion};
use crate::refs::{self};

use super::Repository;

/// Which snapshot to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionSelector {
    /// The tip of a branch.
    Branch(String),
    /// A tag.
    Tag(String),
    /// A snapshot id.
    Snapshot(SnapshotId),
    /// The newest snapshot of a branch committed at or before a time (time travel).
    AsOf {
        /// The branch.
        branch: String,
        /// The time.
        time: DateTime<Utc>,
    },
}

impl Repository {
    /// The snapshot a selector names. A snapshot id is checked to exist, and a time
    /// looked up, by reading commit facts only, never node tables
    /// (`AssetManager::fetch_snapshot_header`).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::TagNotFound`], [`Error::TagDeleted`],
    /// [`Error::SnapshotNotFound`], [`Error::NoSnapshotAtTime`]; storage and format errors.
    pub async fn resolve(&self, selector: &VersionSelector) -> Result<SnapshotId> {
        match selector {
            VersionSelector::Branch(b) => self.lookup_branch(b).await,
            VersionSelector::Tag(t) => self.lookup_tag(t).await,
            VersionSelector::Snapshot(id) => {
                // Spec 2: the `repo` object lists every snapshot of the repository
                // (commits and flushes), so a listed id needs no read of its file, and
                // an unlisted one is not found even while its file remains (an expired
                // snapshot before garbage collection), as in Icechunk 2.3.0.
                if self.inner.spec == SpecVersion::V2 {
                    if !self.repo_info().await?.snapshots.contains_key(id) {
                        return Err(Error::SnapshotNotFound { id: *id });
                    }
                } else {
                    self.inner.assets.fetch_snapshot_header(id).await?;
                }
                Ok(*id)
            }
            VersionSelector::AsOf { branch, time } => {
                let tip = self.lookup_branch(branch).await?;
                let mut walk = ParentWalk::headers(&self.inner.assets, tip);
                while let Some(snap) = walk.next().await? {
                    if snap.flushed_at_time() <= *time {
                        return Ok(snap.id);
                    }
                }
                Err(Error::NoSnapshotAtTime {
                    branch: branch.clone(),
                    time: *time,
                })
            }
        }
    }

    /// Resolves a reference string: a branch name, else a tag name, else a snapshot id.
    ///
    /// # Errors
    /// [`Error::TagDeleted`] for a deleted tag's name; [`Error::RefNotFound`] when
    /// nothing matches; storage and format errors.
    pub async fn resolve_ref(&self, reference: &str) -> Result<VersionSelector> {
        if refs::validate_ref_name("branch", reference).is_ok() {
            match self.lookup_branch(reference).await {
                Ok(_) => return Ok(VersionSelector::Branch(reference.to_string())),
                Err(Error::BranchNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            match self.lookup_tag(reference).await {
                Ok(_) => return Ok(VersionSelector::Tag(reference.to_string())),
                Err(Error::TagNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if let Ok(id) = reference.parse::<SnapshotId>() {
            match self.inner.assets.fetch_snapshot_header(&id).await {
                Ok(_) => return Ok(VersionSelector::Snapshot(id)),
                Err(Error::SnapshotNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::RefNotFound {
            reference: reference.to_string(),
        })
    }

    /// The snapshot `selector` names, read whole. A branch or tag is resolved by
    /// reading its ref anew (spec 2: re-validating the `repo` object, as every lookup
    /// is; spec 1: the branch's ref file); while that request is out, the snapshot
    /// the ref named when this handle last looked ([`Repository::cached_guess`]) is
    /// fetched beside it, and used when the ref still names it (the common case: one
    /// round trip instead of two). When the ref moved, the speculative read is dropped
    /// (its snapshot stays in the cache) and the new tip is read.
    ///
    /// # Errors
    /// As [`Repository::resolve`] and [`crate::assets::AssetManager::fetch_snapshot`].
    pub(super) async fn resolve_snapshot(
        &self,
        selector: &VersionSelector,
    ) -> Result<Arc<Snapshot>> {
        let assets = &self.inner.assets;
        let guess = self.cached_guess(selector);
        let Some(guess) = guess else {
            let id = self.resolve(selector).await?;
            return assets.fetch_snapshot(&id).await;
        };
        let (id, speculative) =
            futures::join!(self.resolve(selector), assets.fetch_snapshot(&guess));
        let id = id?;
        if id == guess {
            speculative
        } else {
            assets.fetch_snapshot(&id).await
        }
    }

    /// The snapshot `selector` named when this handle last looked (spec 2: in the
    /// cached `repo` object; spec 1: the branch's ref as last read or written), a
    /// guess to fetch while the current ref is read.
    pub(super) fn cached_guess(&self, selector: &VersionSelector) -> Option<SnapshotId> {
        let assets = &self.inner.assets;
        match (self.inner.spec, selector) {
            (SpecVersion::V1, VersionSelector::Branch(name)) => self.inner.refs.branch_hint(name),
            (SpecVersion::V2, VersionSelector::Branch(name)) => {
                assets.cached_repo_object()?.1.branches.get(name).copied()
            }
            (SpecVersion::V2, VersionSelector::Tag(name)) => {
                assets.cached_repo_object()?.1.tags.get(name).copied()
            }
            _ => None,
        }
    }
}
