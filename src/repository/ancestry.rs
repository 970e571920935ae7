//! Ancestry: [`SnapshotInfo`], one commit of a listing, and the walk from a snapshot
//! back to the initial one (from the `repo` object's summaries on spec 2, from
//! snapshot files on spec 1).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::assets::ParentWalk;
use crate::error::{Error, Result};
use crate::format::repo_info::{RepoInfo, SnapshotSummary};
use crate::format::snapshot::{micros_to_time, Snapshot, SnapshotHeader};
use crate::format::{SnapshotId, SpecVersion};

use super::{Repository, VersionSelector};

/// One commit of an ancestry listing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SnapshotInfo {
    /// The snapshot id.
    pub id: SnapshotId,
    /// Its parent, `None` for the initial snapshot.
    pub parent_id: Option<SnapshotId>,
    /// Commit time.
    pub flushed_at: DateTime<Utc>,
    /// Commit message.
    pub message: String,
    /// Commit metadata.
    pub metadata: BTreeMap<String, serde_json::Value>,
}

impl From<&SnapshotSummary> for SnapshotInfo {
    fn from(s: &SnapshotSummary) -> Self {
        SnapshotInfo {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: micros_to_time(s.flushed_at),
            message: s.message.clone(),
            metadata: s.metadata.clone(),
        }
    }
}

impl From<&Snapshot> for SnapshotInfo {
    fn from(s: &Snapshot) -> Self {
        SnapshotInfo {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: s.flushed_at_time(),
            message: s.message.clone(),
            metadata: s.metadata.clone(),
        }
    }
}

impl From<&SnapshotHeader> for SnapshotInfo {
    fn from(s: &SnapshotHeader) -> Self {
        SnapshotInfo {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: s.flushed_at_time(),
            message: s.message.clone(),
            metadata: s.metadata.clone(),
        }
    }
}

impl Repository {
    /// The commits from `snapshot` back to the initial snapshot, newest first: the
    /// whole [`Repository::ancestry_stream`], collected.
    ///
    /// # Errors
    /// [`Error::AncestryLoop`] for a corrupt history; [`Error::SnapshotNotFound`];
    /// storage and format errors.
    pub async fn ancestry(&self, snapshot: SnapshotId) -> Result<Vec<SnapshotInfo>> {
        use futures::TryStreamExt;
        self.ancestry_stream(VersionSelector::Snapshot(snapshot))
            .try_collect()
            .await
    }

    /// The commits from the snapshot `start` selects (a branch tip, a tag, a snapshot
    /// id, a time on a branch) back to the initial snapshot, newest first, as a
    /// stream: `.take(n)` reads only the newest `n`. On spec 2 the `repo` object
    /// holds every commit's summary and parent, so the stream reads one object; on
    /// spec 1 it reads one snapshot file per item, each only when the stream is
    /// polled for it, and only its commit facts, not its node table
    /// (`AssetManager::fetch_snapshot_header`).
    ///
    /// # Errors
    /// Items are errors for: a selector that names nothing ([`Error::BranchNotFound`],
    /// [`Error::TagNotFound`], [`Error::SnapshotNotFound`]), [`Error::AncestryLoop`] for a corrupt history,
    /// storage and format errors. The stream ends after its first error.
    pub fn ancestry_stream(
        &self,
        start: VersionSelector,
    ) -> impl futures::Stream<Item = Result<SnapshotInfo>> + Send + '_ {
        enum Walk<'a> {
            Start(VersionSelector),
            Summaries(std::vec::IntoIter<SnapshotInfo>),
            Files(ParentWalk<'a, SnapshotHeader>),
        }
        futures::stream::try_unfold(Walk::Start(start), move |mut walk| async move {
            loop {
                walk = match walk {
                    Walk::Start(selector) => {
                        // Spec 2, a snapshot the `repo` object lists: its summaries
                        // answer, from one read of the object.
                        let (snapshot, validated) = match &selector {
                            // A snapshot id is checked below: by the `repo` object
                            // (spec 2) or the walk's first read (spec 1).
                            VersionSelector::Snapshot(id) => (*id, false),
                            // Spec 2: a branch or tag lookup read or re-validated the
                            // `repo` object during this call, so its summaries answer
                            // without another request.
                            VersionSelector::Branch(_) | VersionSelector::Tag(_) => {
                                (self.resolve(&selector).await?, true)
                            }
                            _ => (self.resolve(&selector).await?, false),
                        };
                        let listed = match (validated, self.inner.assets.cached_repo_object()) {
                            (true, Some((_, info, _))) if self.inner.spec == SpecVersion::V2 => {
                                summaries_in(&info, snapshot)?
                            }
                            _ => self.summary_ancestry(snapshot).await?,
                        };
                        match listed {
                            Some(list) => Walk::Summaries(list.into_iter()),
                            None => {
                                // Spec 2, not listed: not found (as `resolve` says).
                                // Spec 1: the walk's first read is the check (a
                                // missing file is `SnapshotNotFound`), and on object
                                // storage its listing of `snapshots/` goes beside it.
                                if self.inner.spec == SpecVersion::V2 {
                                    self.resolve(&VersionSelector::Snapshot(snapshot)).await?;
                                }
                                Walk::Files(ParentWalk::headers(&self.inner.assets, snapshot))
                            }
                        }
                    }
                    Walk::Summaries(mut list) => {
                        return Ok(list.next().map(|info| (info, Walk::Summaries(list))));
                    }
                    Walk::Files(mut files) => {
                        let snap = files.next().await?;
                        return Ok(
                            snap.map(|s| (SnapshotInfo::from(s.as_ref()), Walk::Files(files)))
                        );
                    }
                };
            }
        })
    }

    /// Spec 2: the ancestry of `snapshot` from the `repo` object's summaries, when it
    /// lists the snapshot (`None` otherwise, and on spec 1: walk the files).
    async fn summary_ancestry(&self, snapshot: SnapshotId) -> Result<Option<Vec<SnapshotInfo>>> {
        if self.inner.spec != SpecVersion::V2 {
            return Ok(None);
        }
        let info = self.repo_info().await?;
        summaries_in(&info, snapshot)
    }
}

/// Spec 2: the ancestry of `snapshot` from the summaries of `repo` object `info`,
/// when it lists the snapshot (`None` otherwise).
///
/// # Errors
/// [`Error::AncestryLoop`] for a corrupt history.
fn summaries_in(info: &RepoInfo, snapshot: SnapshotId) -> Result<Option<Vec<SnapshotInfo>>> {
    if !info.snapshots.contains_key(&snapshot) {
        return Ok(None);
    }
    info.ancestry(snapshot)
        .map(|list| Some(list.into_iter().map(SnapshotInfo::from).collect()))
        .map_err(|id| Error::AncestryLoop { snapshot: id })
}
