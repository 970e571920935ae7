//! Encoding the `repo` object (spec 2): the inverse of [`RepoInfo::decode`].
//!
//! Layout as Icechunk 2.x writes it (`../shared/docs/icechunk-format-notes.md` §2.5):
//! snapshots sorted by id bytes, refs sorted by name and pointing at snapshot indexes,
//! parent links as absolute indexes (`-1` for none), metadata values as FlexBuffers,
//! `pruned_ancestor_tx_logs` absent when empty (spec 2.0 byte layout), the config as
//! the FlexBuffers blob it was read as (or encoded from a changed config).

use std::collections::{BTreeMap, HashMap};

use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

use super::{Availability, RepoInfo, RepoStatus, RepoUpdate, UpdateKind};
use crate::format::envelope::{self, FileType};
use crate::format::fb::{self, gen};
use crate::format::limits;
use crate::format::metadata_value::encode_metadata_value;
use crate::format::{FormatError, SnapshotId, SpecVersion};

type Items<'a> =
    WIPOffset<flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<gen::MetadataItem<'a>>>>;

fn invalid(reason: String) -> FormatError {
    FormatError::InvalidData {
        what: "repo",
        reason,
    }
}

/// Metadata values packed as FlexBuffers, in name order, each checked against
/// [`limits::MAX_METADATA_DEPTH`].
type Packed<'m> = Vec<(&'m str, Vec<u8>)>;

/// Packs `metadata` (of the `what` part of the object).
fn pack_metadata<'m>(
    what: &'static str,
    metadata: &'m BTreeMap<String, serde_json::Value>,
) -> Result<Packed<'m>, FormatError> {
    metadata
        .iter()
        .map(|(name, value)| {
            limits::check_metadata_depth(what, name, value)?;
            let encoded = encode_metadata_value(SpecVersion::V2, value)
                .map_err(|e| invalid(format!("metadata `{name}`: {e}")))?;
            Ok((name.as_str(), encoded))
        })
        .collect()
}

/// FlexBuffers metadata items, sorted by name.
fn metadata_items<'a>(b: &mut FlatBufferBuilder<'a>, packed: &Packed<'_>) -> Items<'a> {
    let mut items = Vec::with_capacity(packed.len());
    for (name, encoded) in packed {
        let name = b.create_shared_string(name);
        let value = b.create_vector(encoded);
        items.push(gen::MetadataItem::create(
            b,
            &gen::MetadataItemArgs {
                name: Some(name),
                value: Some(value),
            },
        ));
    }
    b.create_vector(&items)
}

/// Adds packed metadata to `budget`.
fn budget_metadata(budget: &mut limits::SizeBudget, packed: &Packed<'_>) {
    for (name, encoded) in packed {
        budget.add(name.len() + encoded.len(), 64);
    }
}

/// The text an ops-log entry holds (a ref name or a status reason), in bytes.
fn update_text_len(kind: &UpdateKind) -> usize {
    match kind {
        UpdateKind::TagCreated { name }
        | UpdateKind::TagDeleted { name, .. }
        | UpdateKind::BranchCreated { name }
        | UpdateKind::BranchDeleted { name, .. }
        | UpdateKind::BranchReset { name, .. } => name.len(),
        UpdateKind::NewCommit { branch, .. } | UpdateKind::CommitAmended { branch, .. } => {
            branch.len()
        }
        UpdateKind::RepoStatusChanged { status } => status.reason.as_ref().map_or(0, String::len),
        UpdateKind::RepoInitialized
        | UpdateKind::RepoMigrated { .. }
        | UpdateKind::ConfigChanged
        | UpdateKind::MetadataChanged
        | UpdateKind::NewDetachedSnapshot { .. }
        | UpdateKind::GcRan
        | UpdateKind::ExpirationRan
        | UpdateKind::FeatureFlagChanged { .. } => 0,
    }
}

fn status<'a>(b: &mut FlatBufferBuilder<'a>, s: &RepoStatus) -> WIPOffset<gen::RepoStatus<'a>> {
    let reason = s.reason.as_deref().map(|r| b.create_string(r));
    gen::RepoStatus::create(
        b,
        &gen::RepoStatusArgs {
            availability: match s.availability {
                Availability::Online => gen::RepoAvailability::Online,
                Availability::ReadOnly => gen::RepoAvailability::ReadOnly,
                Availability::Offline => gen::RepoAvailability::Offline,
            },
            set_at: s.set_at,
            limited_availability_reason: reason,
        },
    )
}

/// The union tag and payload of one ops-log entry.
fn update_payload<'a>(
    b: &mut FlatBufferBuilder<'a>,
    kind: &UpdateKind,
) -> (gen::UpdateType, WIPOffset<UnionWIPOffset>) {
    use gen::UpdateType as T;
    match kind {
        UpdateKind::RepoInitialized => (
            T::RepoInitializedUpdate,
            gen::RepoInitializedUpdate::create(b, &gen::RepoInitializedUpdateArgs {})
                .as_union_value(),
        ),
        UpdateKind::RepoMigrated {
            from_version,
            to_version,
        } => (
            T::RepoMigratedUpdate,
            gen::RepoMigratedUpdate::create(
                b,
                &gen::RepoMigratedUpdateArgs {
                    from_version: *from_version,
                    to_version: *to_version,
                },
            )
            .as_union_value(),
        ),
        UpdateKind::ConfigChanged => (
            T::ConfigChangedUpdate,
            gen::ConfigChangedUpdate::create(b, &gen::ConfigChangedUpdateArgs {}).as_union_value(),
        ),
        UpdateKind::MetadataChanged => (
            T::MetadataChangedUpdate,
            gen::MetadataChangedUpdate::create(b, &gen::MetadataChangedUpdateArgs {})
                .as_union_value(),
        ),
        UpdateKind::TagCreated { name } => {
            let name = b.create_string(name);
            (
                T::TagCreatedUpdate,
                gen::TagCreatedUpdate::create(b, &gen::TagCreatedUpdateArgs { name: Some(name) })
                    .as_union_value(),
            )
        }
        UpdateKind::TagDeleted {
            name,
            previous_snap_id,
        } => {
            let name = b.create_string(name);
            let prev = fb::fb12(previous_snap_id);
            (
                T::TagDeletedUpdate,
                gen::TagDeletedUpdate::create(
                    b,
                    &gen::TagDeletedUpdateArgs {
                        name: Some(name),
                        previous_snap_id: Some(&prev),
                    },
                )
                .as_union_value(),
            )
        }
        UpdateKind::BranchCreated { name } => {
            let name = b.create_string(name);
            (
                T::BranchCreatedUpdate,
                gen::BranchCreatedUpdate::create(
                    b,
                    &gen::BranchCreatedUpdateArgs { name: Some(name) },
                )
                .as_union_value(),
            )
        }
        UpdateKind::BranchDeleted {
            name,
            previous_snap_id,
        } => {
            let name = b.create_string(name);
            let prev = fb::fb12(previous_snap_id);
            (
                T::BranchDeletedUpdate,
                gen::BranchDeletedUpdate::create(
                    b,
                    &gen::BranchDeletedUpdateArgs {
                        name: Some(name),
                        previous_snap_id: Some(&prev),
                    },
                )
                .as_union_value(),
            )
        }
        UpdateKind::BranchReset {
            name,
            previous_snap_id,
        } => {
            let name = b.create_string(name);
            let prev = fb::fb12(previous_snap_id);
            (
                T::BranchResetUpdate,
                gen::BranchResetUpdate::create(
                    b,
                    &gen::BranchResetUpdateArgs {
                        name: Some(name),
                        previous_snap_id: Some(&prev),
                    },
                )
                .as_union_value(),
            )
        }
        UpdateKind::NewCommit {
            branch,
            new_snap_id,
        } => {
            let branch = b.create_string(branch);
            let new = fb::fb12(new_snap_id);
            (
                T::NewCommitUpdate,
                gen::NewCommitUpdate::create(
                    b,
                    &gen::NewCommitUpdateArgs {
                        branch: Some(branch),
                        new_snap_id: Some(&new),
                    },
                )
                .as_union_value(),
            )
        }
        UpdateKind::CommitAmended {
            branch,
            previous_snap_id,
            new_snap_id,
        } => {
            let branch = b.create_string(branch);
            let prev = fb::fb12(previous_snap_id);
            let new = fb::fb12(new_snap_id);
            (
                T::CommitAmendedUpdate,
                gen::CommitAmendedUpdate::create(
                    b,
                    &gen::CommitAmendedUpdateArgs {
                        branch: Some(branch),
                        previous_snap_id: Some(&prev),
                        new_snap_id: Some(&new),
                    },
                )
                .as_union_value(),
            )
        }
        UpdateKind::NewDetachedSnapshot { new_snap_id } => {
            let new = fb::fb12(new_snap_id);
            (
                T::NewDetachedSnapshotUpdate,
                gen::NewDetachedSnapshotUpdate::create(
                    b,
                    &gen::NewDetachedSnapshotUpdateArgs {
                        new_snap_id: Some(&new),
                    },
                )
                .as_union_value(),
            )
        }
        UpdateKind::GcRan => (
            T::GCRanUpdate,
            gen::GCRanUpdate::create(b, &gen::GCRanUpdateArgs {}).as_union_value(),
        ),
        UpdateKind::ExpirationRan => (
            T::ExpirationRanUpdate,
            gen::ExpirationRanUpdate::create(b, &gen::ExpirationRanUpdateArgs {}).as_union_value(),
        ),
        UpdateKind::FeatureFlagChanged {
            id,
            new_value,
            is_set,
        } => (
            T::FeatureFlagChangedUpdate,
            gen::FeatureFlagChangedUpdate::create(
                b,
                &gen::FeatureFlagChangedUpdateArgs {
                    id: *id,
                    new_value: *new_value,
                    is_set: *is_set,
                },
            )
            .as_union_value(),
        ),
        UpdateKind::RepoStatusChanged { status: s } => {
            let s = status(b, s);
            (
                T::RepoStatusChangedUpdate,
                gen::RepoStatusChangedUpdate::create(
                    b,
                    &gen::RepoStatusChangedUpdateArgs { status: Some(s) },
                )
                .as_union_value(),
            )
        }
    }
}

type Lookup<'l> = dyn Fn(&SnapshotId, &dyn Fn() -> String) -> Result<u32, FormatError> + 'l;

/// Refs sorted by name, each pointing at its snapshot's index.
fn refs<'a>(
    b: &mut FlatBufferBuilder<'a>,
    list: &BTreeMap<String, SnapshotId>,
    kind: &str,
    lookup: &Lookup<'_>,
) -> Result<Vec<WIPOffset<gen::Ref<'a>>>, FormatError> {
    list.iter()
        .map(|(name, id)| {
            let snapshot_index = lookup(id, &|| format!("{kind} `{name}`"))?;
            let name = b.create_string(name);
            Ok(gen::Ref::create(
                b,
                &gen::RefArgs {
                    name: Some(name),
                    snapshot_index,
                },
            ))
        })
        .collect()
}

/// A sorted, deduplicated flag list; absent when empty.
fn flags<'a>(
    b: &mut FlatBufferBuilder<'a>,
    v: &[u16],
) -> Option<WIPOffset<flatbuffers::Vector<'a, u16>>> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    (!v.is_empty()).then(|| b.create_vector(&v))
}

fn update<'a>(b: &mut FlatBufferBuilder<'a>, u: &RepoUpdate) -> WIPOffset<gen::Update<'a>> {
    let (update_type_type, payload) = update_payload(b, &u.kind);
    let backup_path = u.backup_path.as_deref().map(|p| b.create_string(p));
    gen::Update::create(
        b,
        &gen::UpdateArgs {
            update_type_type,
            update_type: Some(payload),
            updated_at: u.updated_at,
            backup_path,
        },
    )
}

impl RepoInfo {
    testing_pub! {
        /// Encodes into a full `repo` file (envelope with spec version 2 and file type 6,
        /// zstd at the level of its own config's `compression.level`, flatbuffer `Repo`).
        ///
        /// # Errors
        /// [`FormatError::InvalidData`] when a ref or parent link names a snapshot the
        /// object does not list, there is no `main` branch or no ops-log entry, there are
        /// more than `i32::MAX` snapshots, or a metadata value cannot be encoded;
        /// [`FormatError::Compression`].
        fn encode(&self) -> Result<Vec<u8>, FormatError> {
            if !self.branches.contains_key("main") {
                return Err(invalid("there is no `main` branch".into()));
            }
            if self.latest_updates.is_empty() {
                return Err(invalid("the ops log is empty".into()));
            }
            let index: HashMap<SnapshotId, u32> = self
                .snapshots
                .keys()
                .enumerate()
                .map(|(i, id)| {
                    u32::try_from(i)
                        .ok()
                        .filter(|&i| i32::try_from(i).is_ok())
                        .map(|i| (*id, i))
                        .ok_or_else(|| invalid("more than 2^31 - 1 snapshots".into()))
                })
                .collect::<Result<_, _>>()?;
            let lookup = |id: &SnapshotId, what: &dyn Fn() -> String| {
                index
                    .get(id)
                    .copied()
                    .ok_or_else(|| invalid(format!("{} names unknown snapshot {id}", what())))
            };
            let snapshot_metadata = self
                .snapshots
                .values()
                .map(|s| pack_metadata("snapshot", &s.metadata))
                .collect::<Result<Vec<_>, _>>()?;
            let repo_metadata = pack_metadata("repository", &self.metadata)?;
            let mut budget = limits::SizeBudget::new("repo object", 4096);
            for (name, _) in self.tags.iter().chain(&self.branches) {
                budget.add(name.len(), 48);
            }
            for name in &self.deleted_tags {
                budget.add(name.len(), 16);
            }
            for (s, packed) in self.snapshots.values().zip(&snapshot_metadata) {
                let pruned = s.pruned_ancestor_tx_logs.as_ref().map_or(0, Vec::len);
                budget.add(s.message.len(), 96 + 12 * pruned as u64);
                budget_metadata(&mut budget, packed);
            }
            budget_metadata(&mut budget, &repo_metadata);
            for u in &self.latest_updates {
                let backup = u.backup_path.as_ref().map_or(0, String::len);
                budget.add(update_text_len(&u.kind) + backup, 128);
            }
            let reason = self.status.reason.as_ref().map_or(0, String::len);
            let config = self.config_bytes.as_ref().map_or(0, |c| c.len());
            budget.add(reason + config, 64);
            budget.add(
                0,
                16 * (self.enabled_feature_flags.len() + self.disabled_feature_flags.len()) as u64,
            );
            budget.check()?;
            let mut b = FlatBufferBuilder::with_capacity(4096 + self.snapshots.len() * 96);
            let tags = refs(&mut b, &self.tags, "tag", &lookup)?;
            let tags = b.create_vector(&tags);
            let branches = refs(&mut b, &self.branches, "branch", &lookup)?;
            let branches = b.create_vector(&branches);
            let deleted: Vec<_> = self
                .deleted_tags
                .iter()
                .map(|t| b.create_string(t))
                .collect();
            let deleted_tags = b.create_vector(&deleted);

            let mut infos = Vec::with_capacity(self.snapshots.len());
            for (s, packed) in self.snapshots.values().zip(&snapshot_metadata) {
                let parent_offset = match &s.parent_id {
                    None => -1,
                    Some(p) => {
                        let i = lookup(p, &|| format!("the parent link of {}", s.id))?;
                        i32::try_from(i).map_err(|_| invalid("snapshot index overflow".into()))?
                    }
                };
                let message = b.create_string(&s.message);
                let metadata = metadata_items(&mut b, packed);
                let pruned = s
                    .pruned_ancestor_tx_logs
                    .as_ref()
                    .filter(|v| !v.is_empty())
                    .map(|v| {
                        let ids: Vec<gen::ObjectId12> = v.iter().map(fb::fb12).collect();
                        b.create_vector(&ids)
                    });
                let id = fb::fb12(&s.id);
                infos.push(gen::SnapshotInfo::create(
                    &mut b,
                    &gen::SnapshotInfoArgs {
                        id: Some(&id),
                        parent_offset,
                        flushed_at: s.flushed_at,
                        message: Some(message),
                        metadata: Some(metadata),
                        pruned_ancestor_tx_logs: pruned,
                    },
                ));
            }
            let snapshots = b.create_vector(&infos);
            let repo_status = status(&mut b, &self.status);
            let metadata = metadata_items(&mut b, &repo_metadata);
            let enabled_feature_flags = flags(&mut b, &self.enabled_feature_flags);
            let disabled_feature_flags = flags(&mut b, &self.disabled_feature_flags);
            let updates: Vec<_> = self
                .latest_updates
                .iter()
                .map(|u| update(&mut b, u))
                .collect();
            let latest_updates = b.create_vector(&updates);
            let repo_before_updates = self
                .repo_before_updates
                .as_deref()
                .map(|s| b.create_string(s));
            let config = self.config_bytes.as_deref().map(|c| b.create_vector(c));
            let root = gen::Repo::create(
                &mut b,
                &gen::RepoArgs {
                    spec_version: 2,
                    tags: Some(tags),
                    branches: Some(branches),
                    deleted_tags: Some(deleted_tags),
                    snapshots: Some(snapshots),
                    status: Some(repo_status),
                    metadata: Some(metadata),
                    latest_updates: Some(latest_updates),
                    repo_before_updates,
                    config,
                    enabled_feature_flags,
                    disabled_feature_flags,
                    extra: None,
                },
            );
            b.finish(root, Some(fb::IDENTIFIER));
            // The object carries the config, so its own `compression.level` applies.
            envelope::seal_at(
                FileType::RepoInfo,
                SpecVersion::V2,
                self.config.compression_level_for(FileType::RepoInfo),
                b.finished_data(),
            )
        }
    }
}
