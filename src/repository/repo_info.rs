//! Spec 2: what the `repo` object holds besides refs and configuration: the ops log,
//! repository metadata, status (online or read-only) and feature flags.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::repo_info::{
    Availability, FeatureFlag, RepoInfo, RepoStatus, RepoUpdate, UpdateKind,
};
use crate::format::SpecVersion;
use crate::refs::repo_object;

use super::Repository;
use crate::format::envelope::{self, FileType};
use crate::format::{keys, ManifestId, SnapshotId};

/// The binary header of a metadata file ([`Repository::file_header`]), with the
/// fields and names of Icechunk 2.3.0's `header` in its `inspect_*` results.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct FileHeader {
    /// The writer's name as stored, e.g. `ic-2.3.0` or `floe-0.1.0`.
    pub written_by: String,
    /// `written_by` before its first `-` (`ic`, `floe`); all of it without one.
    pub app_name: String,
    /// `written_by` after its first `-`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    /// The spec version byte as Icechunk prints it: `1.0` or `2.0`.
    pub spec_version: String,
    /// `snapshot`, `manifest`, `transaction-log` or `repo-info`.
    pub file_type: &'static str,
    /// The compression of the body: `zstd` (the only one floe reads).
    pub compression: &'static str,
}

/// A metadata file of the repository, for [`Repository::file_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataFile {
    /// `snapshots/<id>`
    Snapshot(SnapshotId),
    /// `manifests/<id>`
    Manifest(ManifestId),
    /// `transactions/<id>` (the transaction log of a snapshot)
    TransactionLog(SnapshotId),
    /// The spec-2 `repo` object.
    RepoInfo,
}

impl Repository {
    /// Spec 2: the ops log, newest first: the `repo` object's entries, then those of
    /// the `overwritten/` copies it chains to (`repo_before_updates`).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors
    /// (a missing or corrupt copy in the chain).
    pub async fn ops_log(&self) -> Result<Vec<RepoUpdate>> {
        self.require_spec("ops_log", SpecVersion::V2)?;
        let info = self.repo_info().await?;
        let mut out = info.latest_updates.clone();
        let mut next = info.repo_before_updates.clone();
        let mut seen = std::collections::HashSet::new();
        while let Some(name) = next {
            if !seen.insert(name.clone()) {
                return Err(Error::Format(crate::format::FormatError::InvalidData {
                    what: "repo",
                    reason: format!("the ops log chain loops at `{name}`"),
                }));
            }
            let older = self.inner.assets.fetch_repo_backup(&name).await?;
            out.extend(older.latest_updates);
            next = older.repo_before_updates;
        }
        Ok(out)
    }

    /// Spec 2: the decoded `repo` object (branches, tags, deleted tags, every
    /// snapshot's summary, metadata, the latest ops-log entries, feature flags), as
    /// read now; what Icechunk's `inspect_repo_info` shows.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1 (no `repo` object); storage and
    /// format errors.
    pub async fn inspect_repo_info(&self) -> Result<Arc<RepoInfo>> {
        self.require_spec("inspect_repo_info", SpecVersion::V2)?;
        self.repo_info().await
    }

    /// The binary header of one metadata file (its first 39 bytes, read alone): the
    /// writer's name (`ic-2.3.0`, `floe-0.1.0`), the spec version, file type and
    /// compression bytes; what Icechunk 2.3.0's `inspect_*` calls show as `header`.
    ///
    /// ```no_run
    /// # async fn f(repo: floe::Repository, id: floe::SnapshotId) -> floe::Result<()> {
    /// use floe::repository::MetadataFile;
    /// let header = repo.file_header(MetadataFile::Snapshot(id)).await?;
    /// println!("written by {}", header.written_by);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] for the `repo` object on spec 1; storage
    /// errors (a missing file: not found); format errors for a header that is not
    /// one of this file type.
    pub async fn file_header(&self, file: MetadataFile) -> Result<FileHeader> {
        let (key, kind) = match file {
            MetadataFile::Snapshot(id) => (keys::snapshot(&id), FileType::Snapshot),
            MetadataFile::Manifest(id) => (keys::manifest(&id), FileType::Manifest),
            MetadataFile::TransactionLog(id) => {
                (keys::transaction_log(&id), FileType::TransactionLog)
            }
            MetadataFile::RepoInfo => {
                self.require_spec("inspect_repo_info", SpecVersion::V2)?;
                (keys::SPEC2_REPO.to_string(), FileType::RepoInfo)
            }
        };
        let len = envelope::HEADER_LEN as u64;
        let bytes = match self.storage().get_range(&key, 0..len).await {
            // Shorter than a header: the format error says so.
            Err(crate::storage::StorageError::ShortRead { .. }) => {
                self.storage().get(&key).await?.bytes
            }
            other => other?,
        };
        let header = envelope::read_header(kind, &bytes)?;
        let (app_name, app_version) = match header.writer.split_once('-') {
            Some((name, version)) => (name.to_string(), Some(version.to_string())),
            None => (header.writer.clone(), None),
        };
        Ok(FileHeader {
            written_by: header.writer,
            app_name,
            app_version,
            spec_version: format!("{}.0", header.spec_version),
            file_type: match kind {
                FileType::Snapshot => "snapshot",
                FileType::Manifest => "manifest",
                FileType::TransactionLog => "transaction-log",
                FileType::RepoInfo => "repo-info",
            },
            compression: "zstd",
        })
    }

    /// Spec 2: the repository metadata (JSON values by name).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn get_metadata(&self) -> Result<BTreeMap<String, serde_json::Value>> {
        self.require_spec("get_metadata", SpecVersion::V2)?;
        Ok(self.repo_info().await?.metadata.clone())
    }

    /// Spec 2: replaces the repository metadata (`MetadataChanged` in the ops log).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::RepositoryReadOnly`];
    /// storage and format errors.
    pub async fn set_metadata(&self, metadata: BTreeMap<String, serde_json::Value>) -> Result<()> {
        self.require_spec("set_metadata", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, false, |info| {
            info.metadata = metadata.clone();
            Ok(repo_object::Change::Write(UpdateKind::MetadataChanged, ()))
        })
        .await
    }

    /// Spec 2: sets the given metadata keys, keeping the others; returns the
    /// metadata after the change.
    ///
    /// # Errors
    /// As [`Repository::set_metadata`].
    pub async fn update_metadata(
        &self,
        changes: BTreeMap<String, serde_json::Value>,
    ) -> Result<BTreeMap<String, serde_json::Value>> {
        self.require_spec("update_metadata", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, false, |info| {
            info.metadata.extend(changes.clone());
            Ok(repo_object::Change::Write(
                UpdateKind::MetadataChanged,
                info.metadata.clone(),
            ))
        })
        .await
    }

    /// Spec 2: whether the repository accepts writes, since when and why.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn status(&self) -> Result<RepoStatus> {
        self.require_spec("status", SpecVersion::V2)?;
        Ok(self.repo_info().await?.status.clone())
    }

    /// Spec 2: sets the repository status (`RepoStatusChanged` in the ops log). A
    /// read-only repository refuses every other change until it is set online again.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn set_status(
        &self,
        availability: Availability,
        reason: Option<String>,
    ) -> Result<()> {
        self.require_spec("set_status", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, true, |info| {
            let status = RepoStatus {
                availability,
                set_at: crate::format::snapshot::now_micros(),
                reason: reason.clone(),
            };
            info.status = status.clone();
            Ok(repo_object::Change::Write(
                UpdateKind::RepoStatusChanged { status },
                (),
            ))
        })
        .await
    }

    /// Spec 2: every feature flag with its explicit setting (`None` = default) and
    /// whether it is on.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn feature_flags(&self) -> Result<Vec<(FeatureFlag, Option<bool>, bool)>> {
        self.require_spec("feature_flags", SpecVersion::V2)?;
        let info = self.repo_info().await?;
        Ok(FeatureFlag::ALL
            .into_iter()
            .map(|f| {
                (
                    f,
                    info.feature_flag_setting(f),
                    info.feature_flag_enabled(f),
                )
            })
            .collect())
    }

    /// Spec 2: turns `flag` on or off, or back to its default with `None`
    /// (`FeatureFlagChanged` in the ops log).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::RepositoryReadOnly`];
    /// storage and format errors.
    pub async fn set_feature_flag(&self, flag: FeatureFlag, value: Option<bool>) -> Result<()> {
        self.require_spec("set_feature_flag", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, false, |info| {
            info.set_feature_flag(flag, value);
            Ok(repo_object::Change::Write(
                UpdateKind::FeatureFlagChanged {
                    id: flag.id(),
                    new_value: value.unwrap_or(true),
                    is_set: value.is_some(),
                },
                (),
            ))
        })
        .await
    }
}
