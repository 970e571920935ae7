//! The repository object (`repo`, spec 2 / 2.1): every branch and tag, deleted tags,
//! a summary and parent link of every snapshot, the configuration, status,
//! repository metadata, feature flags and the ops log. It is the only mutable object
//! of a spec-2 repository.
//!
//! Spec: `../shared/docs/icechunk-format-notes.md` §2.5 (table `Repo`) and §1.3
//! (layout); schema `schema/repo.fbs`.

use std::collections::{BTreeMap, BTreeSet};

mod edit;
mod encode;

use super::config::RepositoryConfig;
use super::envelope::{self, FileType};
use super::fb::{self, gen};
use super::metadata_value::decode_metadata_value;
use super::{FormatError, SnapshotId, SpecVersion};

/// The snapshots of `snapshots` from `start` back to the root, newest first,
/// following parent links; stops at a snapshot the map does not hold.
///
/// # Errors
/// The first snapshot seen twice, when the parent links loop.
pub fn ancestry_in(
    snapshots: &BTreeMap<SnapshotId, SnapshotSummary>,
    start: SnapshotId,
) -> Result<Vec<&SnapshotSummary>, SnapshotId> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut next = Some(start);
    while let Some(id) = next {
        let Some(s) = snapshots.get(&id) else {
            break;
        };
        if !seen.insert(id) {
            return Err(id);
        }
        out.push(s);
        next = s.parent_id;
    }
    Ok(out)
}

/// What one snapshot looks like in the `repo` object.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotSummary {
    /// The snapshot id.
    pub id: SnapshotId,
    /// Its parent; `None` for the initial snapshot (or the oldest one left after
    /// expiry).
    pub parent_id: Option<SnapshotId>,
    /// Commit time, in microseconds since the Unix epoch.
    pub flushed_at: u64,
    /// Commit message.
    pub message: String,
    /// Commit metadata: JSON values by name.
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Spec 2.1: transaction logs of expired ancestors, oldest first; `None` when
    /// none were expired.
    pub pruned_ancestor_tx_logs: Option<Vec<SnapshotId>>,
}

impl From<&super::snapshot::Snapshot> for SnapshotSummary {
    /// What the `repo` object records of a snapshot (no pruned ancestor logs).
    fn from(s: &super::snapshot::Snapshot) -> Self {
        SnapshotSummary {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: s.flushed_at,
            message: s.message.clone(),
            metadata: s.metadata.clone(),
            pruned_ancestor_tx_logs: None,
        }
    }
}

/// A feature flag of a spec-2 repository (ids from Icechunk's `feature_flags.rs`);
/// every flag is on unless the `repo` object turns it off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FeatureFlag {
    /// Moving and renaming nodes (rearrange sessions).
    MoveNode,
    /// Creating tags.
    CreateTag,
    /// Deleting tags.
    DeleteTag,
}

impl FeatureFlag {
    /// Every flag, by id.
    pub const ALL: [FeatureFlag; 3] = [
        FeatureFlag::MoveNode,
        FeatureFlag::CreateTag,
        FeatureFlag::DeleteTag,
    ];

    /// The id stored in the `repo` object.
    pub fn id(self) -> u16 {
        match self {
            FeatureFlag::MoveNode => 3,
            FeatureFlag::CreateTag => 4,
            FeatureFlag::DeleteTag => 5,
        }
    }

    /// Icechunk's name for it.
    pub fn name(self) -> &'static str {
        match self {
            FeatureFlag::MoveNode => "move_node",
            FeatureFlag::CreateTag => "create_tag",
            FeatureFlag::DeleteTag => "delete_tag",
        }
    }

    /// The flag named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Whether a repository accepts writes (`RepoStatus.availability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Availability {
    /// Reads and writes.
    Online,
    /// Reads only.
    ReadOnly,
    /// Neither (defined by the format, unused by Icechunk).
    Offline,
}

/// The repository status.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RepoStatus {
    /// Whether writes are accepted.
    pub availability: Availability,
    /// When the status was set, in microseconds since the Unix epoch.
    pub set_at: u64,
    /// Why the repository is not fully available, if said.
    pub reason: Option<String>,
}

/// One operation of the ops log (`UpdateType`), with Icechunk's names.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpdateKind {
    /// The repository was created.
    RepoInitialized,
    /// The repository was migrated between spec versions.
    RepoMigrated {
        /// Spec version before.
        from_version: u8,
        /// Spec version after.
        to_version: u8,
    },
    /// The configuration changed.
    ConfigChanged,
    /// The repository metadata changed.
    MetadataChanged,
    /// A tag was created.
    TagCreated {
        /// The tag.
        name: String,
    },
    /// A tag was deleted.
    TagDeleted {
        /// The tag.
        name: String,
        /// The snapshot it pointed to.
        previous_snap_id: SnapshotId,
    },
    /// A branch was created.
    BranchCreated {
        /// The branch.
        name: String,
    },
    /// A branch was deleted.
    BranchDeleted {
        /// The branch.
        name: String,
        /// The snapshot it pointed to.
        previous_snap_id: SnapshotId,
    },
    /// A branch was reset.
    BranchReset {
        /// The branch.
        name: String,
        /// The snapshot it pointed to before.
        previous_snap_id: SnapshotId,
    },
    /// A commit moved a branch.
    NewCommit {
        /// The branch.
        branch: String,
        /// The new snapshot.
        new_snap_id: SnapshotId,
    },
    /// A commit was amended.
    CommitAmended {
        /// The branch.
        branch: String,
        /// The snapshot replaced.
        previous_snap_id: SnapshotId,
        /// The snapshot replacing it.
        new_snap_id: SnapshotId,
    },
    /// A snapshot was written without moving a branch.
    NewDetachedSnapshot {
        /// The snapshot.
        new_snap_id: SnapshotId,
    },
    /// Garbage collection ran.
    GcRan,
    /// Snapshot expiry ran.
    ExpirationRan,
    /// A feature flag changed.
    FeatureFlagChanged {
        /// The flag id.
        id: u16,
        /// Its new value.
        new_value: bool,
        /// False when the flag went back to its default.
        is_set: bool,
    },
    /// The repository status changed.
    RepoStatusChanged {
        /// The new status.
        status: RepoStatus,
    },
}

/// One ops-log entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RepoUpdate {
    /// What happened.
    #[serde(flatten)]
    pub kind: UpdateKind,
    /// When, in microseconds since the Unix epoch.
    pub updated_at: u64,
    /// The `overwritten/` copy of the `repo` object right after this update, if kept.
    pub backup_path: Option<String>,
}

/// A decoded `repo` object.
#[derive(Clone, Debug, PartialEq)]
pub struct RepoInfo {
    /// Branches and the snapshots they point to.
    pub branches: BTreeMap<String, SnapshotId>,
    /// Tags and the snapshots they point to.
    pub tags: BTreeMap<String, SnapshotId>,
    /// Deleted tags (their names cannot be used again).
    pub deleted_tags: BTreeSet<String>,
    /// Every snapshot the repository knows, keyed by id.
    pub snapshots: BTreeMap<SnapshotId, SnapshotSummary>,
    /// Whether writes are accepted.
    pub status: RepoStatus,
    /// Repository metadata: JSON values by name.
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// The most recent operations, newest first.
    pub latest_updates: Vec<RepoUpdate>,
    /// The `overwritten/` object holding older ops-log entries, if any.
    pub repo_before_updates: Option<String>,
    /// The repository configuration.
    pub config: RepositoryConfig,
    /// The configuration as stored (FlexBuffers), written back unchanged unless the
    /// configuration changes; `None` for the default configuration.
    pub config_bytes: Option<Vec<u8>>,
    /// Feature flags explicitly enabled.
    pub enabled_feature_flags: Vec<u16>,
    /// Feature flags explicitly disabled.
    pub disabled_feature_flags: Vec<u16>,
}

impl RepoInfo {
    /// The snapshots from `start` back to the root, newest first, following parent
    /// links (no snapshot file is read). Stops at a snapshot the object does not
    /// list.
    ///
    /// # Errors
    /// The first snapshot seen twice, when the parent links loop.
    pub fn ancestry(&self, start: SnapshotId) -> Result<Vec<&SnapshotSummary>, SnapshotId> {
        ancestry_in(&self.snapshots, start)
    }

    /// Whether `flag` is on: as explicitly set, else on (every flag Icechunk defines
    /// is on by default).
    pub fn feature_flag_enabled(&self, flag: FeatureFlag) -> bool {
        self.feature_flag_setting(flag).unwrap_or(true)
    }

    /// How `flag` is explicitly set, `None` when it is left at its default.
    pub fn feature_flag_setting(&self, flag: FeatureFlag) -> Option<bool> {
        let id = flag.id();
        if self.enabled_feature_flags.contains(&id) {
            Some(true)
        } else if self.disabled_feature_flags.contains(&id) {
            Some(false)
        } else {
            None
        }
    }

    /// Sets `flag` on or off, or back to its default with `None`.
    pub fn set_feature_flag(&mut self, flag: FeatureFlag, value: Option<bool>) {
        let id = flag.id();
        self.enabled_feature_flags.retain(|&f| f != id);
        self.disabled_feature_flags.retain(|&f| f != id);
        match value {
            Some(true) => self.enabled_feature_flags.push(id),
            Some(false) => self.disabled_feature_flags.push(id),
            None => {}
        }
        self.enabled_feature_flags.sort_unstable();
        self.disabled_feature_flags.sort_unstable();
    }

    /// Decodes a `repo` object.
    ///
    /// # Errors
    /// Envelope errors; [`FormatError::InvalidFlatbuffer`];
    /// [`FormatError::InvalidData`] for a ref or parent link outside the snapshot list,
    /// an unknown status or update type, undecodable metadata;
    /// [`FormatError::InvalidConfig`] for an undecodable configuration.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let (spec, buf) = envelope::open_versioned(FileType::RepoInfo, bytes)?;
        if spec != SpecVersion::V2 {
            return Err(invalid(format!("a repo object of spec version {spec}")));
        }
        let root = fb::verified_root::<gen::Repo>("repo", &buf)?;
        let infos = root.snapshots();
        let id_at = |index: i64, what: &str| -> Result<SnapshotId, FormatError> {
            usize::try_from(index)
                .ok()
                .filter(|&i| i < infos.len())
                .map(|i| fb::id12(infos.get(i).id()))
                .ok_or_else(|| {
                    invalid(format!(
                        "{what} points at snapshot {index} of {}",
                        infos.len()
                    ))
                })
        };
        let refs = |list: flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<gen::Ref<'_>>>,
                    kind: &str|
         -> Result<BTreeMap<String, SnapshotId>, FormatError> {
            list.iter()
                .map(|r| {
                    let id = id_at(
                        i64::from(r.snapshot_index()),
                        &format!("{kind} `{}`", r.name()),
                    )?;
                    Ok((r.name().to_string(), id))
                })
                .collect()
        };
        let mut snapshots = BTreeMap::new();
        for info in infos.iter() {
            let id: SnapshotId = fb::id12(info.id());
            let parent_id = match info.parent_offset() {
                -1 => None,
                offset => Some(id_at(i64::from(offset), &format!("the parent of {id}"))?),
            };
            let summary = SnapshotSummary {
                id,
                parent_id,
                flushed_at: info.flushed_at(),
                message: info.message().to_string(),
                metadata: metadata(info.metadata())?,
                pruned_ancestor_tx_logs: info
                    .pruned_ancestor_tx_logs()
                    .map(|v| v.iter().map(fb::id12).collect()),
            };
            snapshots.insert(id, summary);
        }
        let status = read_status(&root.status())?;
        let latest_updates = root
            .latest_updates()
            .iter()
            .map(|u| read_update(&u))
            .collect::<Result<Vec<_>, FormatError>>()?;
        let config_bytes = root.config().map(|c| c.bytes().to_vec());
        let config = match &config_bytes {
            Some(c) => RepositoryConfig::from_flexbuffer(c)?,
            None => RepositoryConfig::default(),
        };
        Ok(RepoInfo {
            branches: refs(root.branches(), "branch")?,
            tags: refs(root.tags(), "tag")?,
            deleted_tags: root.deleted_tags().iter().map(str::to_string).collect(),
            snapshots,
            status,
            metadata: metadata(root.metadata())?,
            latest_updates,
            repo_before_updates: root.repo_before_updates().map(str::to_string),
            config,
            config_bytes,
            enabled_feature_flags: root
                .enabled_feature_flags()
                .map(|v| v.iter().collect())
                .unwrap_or_default(),
            disabled_feature_flags: root
                .disabled_feature_flags()
                .map(|v| v.iter().collect())
                .unwrap_or_default(),
        })
    }
}

fn invalid(reason: String) -> FormatError {
    FormatError::InvalidData {
        what: "repo",
        reason,
    }
}

/// FlexBuffers-encoded metadata items as a map.
fn metadata(
    items: Option<flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<gen::MetadataItem<'_>>>>,
) -> Result<BTreeMap<String, serde_json::Value>, FormatError> {
    items
        .iter()
        .flatten()
        .map(|item| {
            let value = decode_metadata_value(SpecVersion::V2, item.value().bytes())
                .map_err(|e| invalid(format!("metadata `{}`: {e}", item.name())))?;
            Ok((item.name().to_string(), value))
        })
        .collect()
}

fn read_status(s: &gen::RepoStatus<'_>) -> Result<RepoStatus, FormatError> {
    let availability = match s.availability() {
        gen::RepoAvailability::Online => Availability::Online,
        gen::RepoAvailability::ReadOnly => Availability::ReadOnly,
        gen::RepoAvailability::Offline => Availability::Offline,
        other => return Err(invalid(format!("unknown availability {}", other.0))),
    };
    Ok(RepoStatus {
        availability,
        set_at: s.set_at(),
        reason: s.limited_availability_reason().map(str::to_string),
    })
}

fn read_update(u: &gen::Update<'_>) -> Result<RepoUpdate, FormatError> {
    use gen::UpdateType as T;
    let missing = || {
        invalid(format!(
            "update of type {} has no payload",
            u.update_type_type().0
        ))
    };
    let kind = match u.update_type_type() {
        T::RepoInitializedUpdate => UpdateKind::RepoInitialized,
        T::RepoMigratedUpdate => {
            let m = u
                .update_type_as_repo_migrated_update()
                .ok_or_else(missing)?;
            UpdateKind::RepoMigrated {
                from_version: m.from_version(),
                to_version: m.to_version(),
            }
        }
        T::ConfigChangedUpdate => UpdateKind::ConfigChanged,
        T::MetadataChangedUpdate => UpdateKind::MetadataChanged,
        T::TagCreatedUpdate => {
            let m = u.update_type_as_tag_created_update().ok_or_else(missing)?;
            UpdateKind::TagCreated {
                name: m.name().to_string(),
            }
        }
        T::TagDeletedUpdate => {
            let m = u.update_type_as_tag_deleted_update().ok_or_else(missing)?;
            UpdateKind::TagDeleted {
                name: m.name().to_string(),
                previous_snap_id: fb::id12(m.previous_snap_id()),
            }
        }
        T::BranchCreatedUpdate => {
            let m = u
                .update_type_as_branch_created_update()
                .ok_or_else(missing)?;
            UpdateKind::BranchCreated {
                name: m.name().to_string(),
            }
        }
        T::BranchDeletedUpdate => {
            let m = u
                .update_type_as_branch_deleted_update()
                .ok_or_else(missing)?;
            UpdateKind::BranchDeleted {
                name: m.name().to_string(),
                previous_snap_id: fb::id12(m.previous_snap_id()),
            }
        }
        T::BranchResetUpdate => {
            let m = u.update_type_as_branch_reset_update().ok_or_else(missing)?;
            UpdateKind::BranchReset {
                name: m.name().to_string(),
                previous_snap_id: fb::id12(m.previous_snap_id()),
            }
        }
        T::NewCommitUpdate => {
            let m = u.update_type_as_new_commit_update().ok_or_else(missing)?;
            UpdateKind::NewCommit {
                branch: m.branch().to_string(),
                new_snap_id: fb::id12(m.new_snap_id()),
            }
        }
        T::CommitAmendedUpdate => {
            let m = u
                .update_type_as_commit_amended_update()
                .ok_or_else(missing)?;
            UpdateKind::CommitAmended {
                branch: m.branch().to_string(),
                previous_snap_id: fb::id12(m.previous_snap_id()),
                new_snap_id: fb::id12(m.new_snap_id()),
            }
        }
        T::NewDetachedSnapshotUpdate => {
            let m = u
                .update_type_as_new_detached_snapshot_update()
                .ok_or_else(missing)?;
            UpdateKind::NewDetachedSnapshot {
                new_snap_id: fb::id12(m.new_snap_id()),
            }
        }
        T::GCRanUpdate => UpdateKind::GcRan,
        T::ExpirationRanUpdate => UpdateKind::ExpirationRan,
        T::FeatureFlagChangedUpdate => {
            let m = u
                .update_type_as_feature_flag_changed_update()
                .ok_or_else(missing)?;
            UpdateKind::FeatureFlagChanged {
                id: m.id(),
                new_value: m.new_value(),
                is_set: m.is_set(),
            }
        }
        T::RepoStatusChangedUpdate => {
            let m = u
                .update_type_as_repo_status_changed_update()
                .ok_or_else(missing)?;
            let status = m
                .status()
                .ok_or_else(|| invalid("a status change without a status".into()))?;
            UpdateKind::RepoStatusChanged {
                status: read_status(&status)?,
            }
        }
        other => return Err(invalid(format!("unknown update type {}", other.0))),
    };
    Ok(RepoUpdate {
        kind,
        updated_at: u.updated_at(),
        backup_path: u.backup_path().map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: SnapshotId, parent_id: Option<SnapshotId>) -> SnapshotSummary {
        SnapshotSummary {
            id,
            parent_id,
            flushed_at: 0,
            message: String::new(),
            metadata: BTreeMap::new(),
            pruned_ancestor_tx_logs: None,
        }
    }

    fn info(links: &[(SnapshotId, Option<SnapshotId>)]) -> RepoInfo {
        RepoInfo {
            branches: BTreeMap::new(),
            tags: BTreeMap::new(),
            deleted_tags: BTreeSet::new(),
            snapshots: links.iter().map(|&(id, p)| (id, summary(id, p))).collect(),
            status: RepoStatus {
                availability: Availability::Online,
                set_at: 0,
                reason: None,
            },
            metadata: BTreeMap::new(),
            latest_updates: Vec::new(),
            repo_before_updates: None,
            config: RepositoryConfig::default(),
            config_bytes: None,
            enabled_feature_flags: Vec::new(),
            disabled_feature_flags: Vec::new(),
        }
    }

    #[test]
    fn ancestry_follows_parents_and_reports_a_loop() {
        let (a, b, c) = (
            SnapshotId::random(),
            SnapshotId::random(),
            SnapshotId::random(),
        );
        let chain = info(&[(a, None), (b, Some(a)), (c, Some(b))]);
        let ids: Vec<SnapshotId> = chain.ancestry(c).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![c, b, a]);
        let looped = info(&[(a, Some(c)), (b, Some(a)), (c, Some(b))]);
        assert_eq!(looped.ancestry(c).unwrap_err(), c);
    }
}
