//! Retention policies, squash and `maintain`, delegated to
//! [`crate::lifecycle::retention`] and [`crate::lifecycle::squash`].

use std::collections::BTreeMap;

use chrono::Utc;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::repo_info::UpdateKind;
use crate::format::{SnapshotId, SpecVersion};
use crate::lifecycle::retention::{apply_to_repo_info, RETENTION_METADATA_KEY};
use crate::lifecycle::{
    ExpireResult, GcOptions, GcSummary, RetentionPolicy, SquashResult, GC_SAFETY_WINDOW_SECS,
};
use crate::refs::repo_object::{self, Change};

use super::Repository;

/// What [`Repository::maintain`] did: the stored retention policy applied (when
/// there is one), then garbage collection.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct MaintainSummary {
    /// What the retention policy released; `None` when none is stored.
    pub retention: Option<ExpireResult>,
    /// What garbage collection deleted (or would delete).
    pub gc: GcSummary,
}

impl Repository {
    /// Spec 2: the retention policy stored in the repository, if any (see
    /// [`crate::lifecycle::retention`]).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::InvalidRetentionPolicy`]
    /// when the stored value is not a policy; storage and format errors.
    pub async fn retention_policy(&self) -> Result<Option<RetentionPolicy>> {
        self.require_spec("retention_policy", SpecVersion::V2)?;
        RetentionPolicy::stored_in(&*self.repo_info().await?)
    }

    /// Spec 2: stores `policy` in the repository metadata under
    /// [`RETENTION_METADATA_KEY`] (`MetadataChanged` in the ops log); `None`
    /// removes it. Other metadata keys are kept.
    ///
    /// ```no_run
    /// # async fn f(repo: floe::Repository) -> floe::Result<()> {
    /// use floe::lifecycle::{RetentionPolicy, RetentionRule};
    /// let policy = RetentionPolicy::default().default_rule(RetentionRule::default().keep_last(30));
    /// repo.set_retention_policy(Some(&policy)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::InvalidRetentionPolicy`]
    /// (a rule that keeps nothing beyond the tip); [`Error::RepositoryReadOnly`];
    /// storage and format errors.
    pub async fn set_retention_policy(&self, policy: Option<&RetentionPolicy>) -> Result<()> {
        self.require_spec("set_retention_policy", SpecVersion::V2)?;
        let value = match policy {
            Some(p) => {
                p.validate()?;
                Some(serde_json::to_value(p).map_err(|e| {
                    crate::error::Error::InvalidRetentionPolicy {
                        reason: e.to_string(),
                    }
                })?)
            }
            None => None,
        };
        repo_object::update(&self.inner.assets, false, |info| {
            let mut metadata: BTreeMap<String, serde_json::Value> = info.metadata.clone();
            match &value {
                Some(v) => metadata.insert(RETENTION_METADATA_KEY.to_string(), v.clone()),
                None => metadata.remove(RETENTION_METADATA_KEY),
            };
            if metadata == info.metadata {
                return Ok(Change::Skip(()));
            }
            info.metadata = metadata;
            Ok(Change::Write(UpdateKind::MetadataChanged, ()))
        })
        .await
    }

    /// Spec 2: applies a retention policy (`policy`, or the stored one when `None`)
    /// to every branch's history, as one change of the `repo` object
    /// (`ExpirationRan` in the ops log): the snapshots no rule keeps leave the
    /// histories and kept snapshots are re-parented onto their nearest kept
    /// ancestor (see [`crate::lifecycle::retention`]). Refs are never deleted;
    /// nothing is deleted from storage until [`Repository::garbage_collect`]. With
    /// `dry_run`, says what it would release and writes nothing.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1 (run `floe upgrade` first);
    /// [`Error::InvalidRetentionPolicy`]; [`Error::RepositoryReadOnly`]; storage and
    /// format errors.
    pub async fn apply_retention(
        &self,
        policy: Option<&RetentionPolicy>,
        dry_run: bool,
    ) -> Result<ExpireResult> {
        self.require_spec("apply_retention", SpecVersion::V2)?;
        if let Some(p) = policy {
            p.validate()?;
        }
        let now = u64::try_from(Utc::now().timestamp_micros()).unwrap_or(0);
        repo_object::update(&self.inner.assets, dry_run, |info| {
            let stored;
            let policy = match policy {
                Some(p) => p,
                None => match RetentionPolicy::stored_in(info)? {
                    Some(p) => {
                        stored = p;
                        &stored
                    }
                    None => return Ok(Change::Skip(ExpireResult::default())),
                },
            };
            let result = apply_to_repo_info(info, policy, now);
            Ok(if dry_run || result.expired.is_empty() {
                Change::Skip(result)
            } else {
                Change::Write(UpdateKind::ExpirationRan, result)
            })
        })
        .await
    }

    /// Squashes the commits of `branch` after `from` up to `to` (the tip when
    /// `None`) into `to`: `to` becomes `from`'s child with the same tree, id and
    /// message, and the commits in between leave the branch's history (see
    /// [`crate::lifecycle::squash`]). The branch does not move, so a concurrent
    /// commit is never lost. With `dry_run`, says what it would do.
    ///
    /// ```no_run
    /// # async fn f(repo: floe::Repository, base: floe::SnapshotId) -> floe::Result<()> {
    /// let done = repo.squash("main", base, None, false).await?;
    /// println!("{} commits squashed into {}", done.squashed.len() + 1, done.to);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; [`Error::InvalidSquashRange`] when `to` is not in
    /// the branch's history or `from` is not below it; [`Error::AncestryLoop`];
    /// [`Error::RepositoryReadOnly`]; storage and format errors.
    pub async fn squash(
        &self,
        branch: &str,
        from: SnapshotId,
        to: Option<SnapshotId>,
        dry_run: bool,
    ) -> Result<SquashResult> {
        crate::lifecycle::squash::squash(
            &self.inner.assets,
            self.inner.spec,
            branch,
            from,
            to,
            dry_run,
        )
        .await
    }

    /// The maintenance a scheduler runs: on spec 2 the stored retention policy
    /// (when there is one, [`Repository::apply_retention`]), then garbage
    /// collection of what nothing reaches and is older than `gc_older_than`
    /// (default: the safety window, [`GC_SAFETY_WINDOW_SECS`] before now). With
    /// `dry_run`, both say what they would do.
    ///
    /// # Errors
    /// As [`Repository::apply_retention`] and [`Repository::garbage_collect`].
    pub async fn maintain(
        &self,
        gc_older_than: Option<chrono::DateTime<Utc>>,
        dry_run: bool,
    ) -> Result<MaintainSummary> {
        let retention =
            if self.inner.spec == SpecVersion::V2 && self.retention_policy().await?.is_some() {
                Some(self.apply_retention(None, dry_run).await?)
            } else {
                None
            };
        let window = i64::try_from(GC_SAFETY_WINDOW_SECS).unwrap_or(3600);
        let cut = gc_older_than.unwrap_or_else(|| Utc::now() - chrono::Duration::seconds(window));
        let gc = self
            .garbage_collect(cut, GcOptions::default().dry_run(dry_run), None)
            .await?;
        Ok(MaintainSummary { retention, gc })
    }
}
