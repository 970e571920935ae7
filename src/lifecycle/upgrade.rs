//! Upgrading a spec-1 repository to spec 2, as Icechunk 2.x's
//! `upgrade_icechunk_repository` (`migrations/mod.rs::migrate_1_to_2`) does.
//!
//! Metadata only: snapshots, manifests, transaction logs and chunks stay as they are
//! (a spec-2 reader decodes each file by its own version byte). Every branch, tag and
//! deleted tag, the summary and parent of every snapshot they reach, and
//! `config.yaml` are folded into a new `repo` object, with an ops log synthesized from
//! the history (`RepoInitialized` at the root's time, a `NewCommit` per commit,
//! `BranchCreated` / `TagCreated` 1 ms after the snapshot they point to, `TagDeleted`
//! 1 ms later, times made strictly increasing by 1 µs steps) topped by
//! `RepoMigrated { 1 → 2 }`. The object is written create-if-not-exists, the
//! refs re-read to check they read as spec 2 and are the same, then the
//! `main` ref is deleted first (so spec-1-only clients fail fast), then the other ref
//! files, then `config.yaml` (best effort). If a step before `config.yaml` fails, the
//! deleted ref files are written back and the `repo` object removed: the repository
//! is spec 1 again. Run it with no other writer on the repository.
//!
//! Spec: `../shared/docs/icechunk-format-notes.md` §1.4 (migration 1→2).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::config::{RepositoryConfig, CONFIG_KEY};
use crate::format::repo_info::{
    ancestry_in, Availability, RepoInfo, RepoStatus, RepoUpdate, SnapshotSummary, UpdateKind,
};
use crate::format::snapshot::now_micros;
use crate::format::{keys, SnapshotId, SpecVersion};
use crate::refs::{self, RefData, RefStore};
use crate::storage::{Storage, StorageError};

/// Synthetic ops-log events come this long after the snapshot they point to
/// (microseconds).
const SYNTHETIC_EVENT_OFFSET: u64 = 1_000;

/// What an upgrade did (or, in a dry run, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpgradeReport {
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// Branches carried over.
    pub branches: usize,
    /// Live tags carried over.
    pub tags: usize,
    /// Deleted tags carried over.
    pub deleted_tags: usize,
    /// Snapshots the refs reach, now listed in the `repo` object.
    pub snapshots: usize,
    /// Entries of the synthesized ops log (with `RepoMigrated`).
    pub ops_log_entries: usize,
    /// Spec-1 files removed (ref files and `config.yaml`).
    pub removed_files: usize,
}

/// The spec-1 refs, read before anything changes.
struct V1Refs {
    branches: BTreeMap<String, SnapshotId>,
    tags: BTreeMap<String, SnapshotId>,
    /// Deleted tags and the snapshot their (kept) ref file names, when readable.
    deleted_tags: BTreeMap<String, Option<SnapshotId>>,
}

async fn read_v1_refs(storage: &dyn Storage) -> Result<V1Refs> {
    let listing = refs::list_refs(storage).await?;
    let mut branches = BTreeMap::new();
    for name in listing.branches {
        let (id, _) = refs::fetch_branch(storage, &name).await?;
        branches.insert(name, id);
    }
    let mut tags = BTreeMap::new();
    for name in listing.tags {
        let id = refs::fetch_tag(storage, &name).await?;
        tags.insert(name, id);
    }
    let mut deleted_tags = BTreeMap::new();
    for name in listing.deleted_tags {
        let key = keys::tag(&name);
        let id = match storage.get(&key).await {
            Ok(v) => RefData::parse(&key, &v.bytes).ok().map(|r| r.snapshot),
            Err(StorageError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        deleted_tags.insert(name, id);
    }
    Ok(V1Refs {
        branches,
        tags,
        deleted_tags,
    })
}

/// Summaries of every snapshot the refs reach, walking each history until it joins
/// one already walked.
async fn reachable_snapshots(
    assets: &AssetManager,
    tips: impl Iterator<Item = SnapshotId>,
) -> Result<BTreeMap<SnapshotId, SnapshotSummary>> {
    let mut out = BTreeMap::new();
    for tip in tips {
        let mut walk = ParentWalk::new(assets, tip);
        while let Some(snap) = walk.next().await? {
            if out.contains_key(&snap.id) {
                break;
            }
            out.insert(snap.id, SnapshotSummary::from(snap.as_ref()));
        }
    }
    Ok(out)
}

/// The ancestry of `tip` in `snapshots`, tip first.
///
/// # Errors
/// [`Error::AncestryLoop`] when the parent links loop.
fn ancestry(
    snapshots: &BTreeMap<SnapshotId, SnapshotSummary>,
    tip: SnapshotId,
) -> Result<Vec<&SnapshotSummary>> {
    ancestry_in(snapshots, tip).map_err(|snapshot| Error::AncestryLoop { snapshot })
}

/// The synthesized ops log, newest first, as Icechunk builds it.
fn synthesize_ops_log(
    refs: &V1Refs,
    snapshots: &BTreeMap<SnapshotId, SnapshotSummary>,
    now: u64,
) -> Result<Vec<RepoUpdate>> {
    let main = match refs.branches.get("main") {
        Some(tip) => ancestry(snapshots, *tip)?,
        None => Vec::new(),
    };
    let root_time = main.last().map_or(0, |s| s.flushed_at);
    let time_of = |id: &SnapshotId| snapshots.get(id).map_or(root_time, |s| s.flushed_at);
    let mut entries: Vec<(UpdateKind, u64)> = vec![(UpdateKind::RepoInitialized, root_time)];
    let mut emitted: BTreeSet<SnapshotId> = main.iter().map(|s| s.id).collect();
    for s in main.iter().rev().skip(1) {
        entries.push((
            UpdateKind::NewCommit {
                branch: "main".into(),
                new_snap_id: s.id,
            },
            s.flushed_at,
        ));
    }
    for (name, tip) in refs.branches.iter().filter(|(n, _)| *n != "main") {
        let history = ancestry(snapshots, *tip)?;
        let tip_time = history.first().map_or(root_time, |s| s.flushed_at);
        entries.push((
            UpdateKind::BranchCreated { name: name.clone() },
            tip_time.saturating_add(SYNTHETIC_EVENT_OFFSET),
        ));
        for s in history.iter().rev() {
            if emitted.insert(s.id) {
                entries.push((
                    UpdateKind::NewCommit {
                        branch: name.clone(),
                        new_snap_id: s.id,
                    },
                    s.flushed_at,
                ));
            }
        }
    }
    for (name, id) in &refs.tags {
        entries.push((
            UpdateKind::TagCreated { name: name.clone() },
            time_of(id).saturating_add(SYNTHETIC_EVENT_OFFSET),
        ));
    }
    for (name, id) in &refs.deleted_tags {
        let Some(id) = id else { continue };
        let time = time_of(id).saturating_add(SYNTHETIC_EVENT_OFFSET);
        entries.push((UpdateKind::TagCreated { name: name.clone() }, time));
        entries.push((
            UpdateKind::TagDeleted {
                name: name.clone(),
                previous_snap_id: *id,
            },
            time.saturating_add(SYNTHETIC_EVENT_OFFSET),
        ));
    }
    entries.sort_by_key(|(_, t)| *t);
    for i in 1..entries.len() {
        if entries[i].1 <= entries[i - 1].1 {
            entries[i].1 = entries[i - 1].1.saturating_add(1);
        }
    }
    let last = entries.last().map_or(0, |(_, t)| *t);
    entries.push((
        UpdateKind::RepoMigrated {
            from_version: 1,
            to_version: 2,
        },
        now.max(last.saturating_add(1)),
    ));
    Ok(entries
        .into_iter()
        .rev()
        .map(|(kind, updated_at)| RepoUpdate {
            kind,
            updated_at,
            backup_path: None,
        })
        .collect())
}

/// Upgrades the spec-1 repository in `storage` to spec 2 (see the module docs); with
/// `dry_run`, reads and builds everything and changes nothing.
///
/// # Errors
/// [`Error::RepositoryNotFound`]; [`Error::UnsupportedOnSpecVersion`] when the
/// repository is already spec 2; [`Error::BranchNotFound`] without `main`;
/// [`Error::RepositoryExists`] when a `repo` object appeared meanwhile (another
/// upgrade); [`Error::AncestryLoop`], [`Error::SnapshotNotFound`] for a corrupt
/// history; format errors (a `config.yaml` that cannot be encoded); storage errors
/// (after which the repository is spec 1 again).
pub async fn upgrade_to_spec2(storage: Arc<dyn Storage>, dry_run: bool) -> Result<UpgradeReport> {
    match refs::spec_version_of(storage.as_ref()).await? {
        None => {
            return Err(Error::RepositoryNotFound {
                location: storage.root_url(),
            })
        }
        Some(SpecVersion::V1) => {}
        Some(spec_version) => {
            return Err(Error::UnsupportedOnSpecVersion {
                operation: "upgrade",
                spec_version,
            })
        }
    }
    let v1 = read_v1_refs(storage.as_ref()).await?;
    if !v1.branches.contains_key("main") {
        return Err(Error::BranchNotFound {
            name: "main".into(),
        });
    }
    let assets = AssetManager::new(Arc::clone(&storage));
    let tips = v1.branches.values().chain(v1.tags.values()).copied();
    let snapshots = reachable_snapshots(&assets, tips).await?;
    let (config, config_bytes) = match storage.get(CONFIG_KEY).await {
        Ok(v) => {
            let config = RepositoryConfig::parse(&v.bytes)?;
            let bytes = config.to_flexbuffer()?;
            (config, Some(bytes))
        }
        Err(StorageError::NotFound { .. }) => (RepositoryConfig::default(), None),
        Err(e) => return Err(e.into()),
    };
    let latest_updates = synthesize_ops_log(&v1, &snapshots, now_micros())?;
    let root_time = latest_updates.last().map_or(0, |u| u.updated_at);
    let mut report = UpgradeReport {
        dry_run,
        branches: v1.branches.len(),
        tags: v1.tags.len(),
        deleted_tags: v1.deleted_tags.len(),
        snapshots: snapshots.len(),
        ops_log_entries: latest_updates.len(),
        removed_files: 0,
    };
    let info = RepoInfo {
        branches: v1.branches.clone(),
        tags: v1.tags.clone(),
        deleted_tags: v1.deleted_tags.keys().cloned().collect(),
        snapshots,
        status: RepoStatus {
            availability: Availability::Online,
            set_at: root_time,
            reason: None,
        },
        metadata: BTreeMap::new(),
        latest_updates,
        repo_before_updates: None,
        config,
        config_bytes,
        enabled_feature_flags: Vec::new(),
        disabled_feature_flags: Vec::new(),
    };
    let encoded = info.encode()?;
    if dry_run {
        return Ok(report);
    }
    match storage
        .put_if_absent(keys::SPEC2_REPO, encoded.into())
        .await?
    {
        crate::storage::WriteOutcome::Written(_) => {}
        crate::storage::WriteOutcome::PreconditionFailed => {
            return Err(Error::RepositoryExists {
                location: storage.root_url(),
            })
        }
    }
    match switch_over(&storage, &v1).await {
        Ok(removed) => report.removed_files = removed,
        Err(e) => {
            roll_back(storage.as_ref(), &v1).await;
            return Err(e);
        }
    }
    // The spec-1 configuration now lives in the repo object (best effort, as in
    // Icechunk: a leftover config.yaml is ignored by spec-2 readers).
    if info.config_bytes.is_some() && storage.delete(CONFIG_KEY).await.is_ok() {
        report.removed_files += 1;
    }
    Ok(report)
}

/// Checks the new object reads back as spec 2 with the same refs, then deletes the
/// spec-1 ref files, `main` first. Returns how many were deleted.
async fn switch_over(storage: &Arc<dyn Storage>, v1: &V1Refs) -> Result<usize> {
    let spec = refs::spec_version_of(storage.as_ref()).await?;
    let assets = AssetManager::for_spec(Arc::clone(storage), SpecVersion::V2);
    let listing = RefStore::new(Arc::new(assets)).list().await?;
    let check = |what: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(Error::Format(crate::format::FormatError::InvalidData {
                what: "repo",
                reason: format!("the upgraded repository does not read back its {what}"),
            }))
        }
    };
    check("spec version", spec == Some(SpecVersion::V2))?;
    check("branches", listing.branches.iter().eq(v1.branches.keys()))?;
    check("tags", listing.tags.iter().eq(v1.tags.keys()))?;
    let mut removed = 0;
    storage.delete(&keys::branch("main")).await?;
    removed += 1;
    let mut rest: Vec<String> = Vec::new();
    for info in storage.list(keys::REFS).await? {
        if info.key != keys::branch("main") {
            rest.push(info.key);
        }
    }
    for key in rest {
        storage.delete(&key).await?;
        removed += 1;
    }
    Ok(removed)
}

/// Puts the spec-1 ref files back (branches, tags, tombstones) and removes the
/// `repo` object. Best effort: called after a failure, it reports nothing.
async fn roll_back(storage: &dyn Storage, v1: &V1Refs) {
    let mut files: HashMap<String, bytes::Bytes> = HashMap::new();
    for (name, id) in &v1.branches {
        files.insert(keys::branch(name), RefData { snapshot: *id }.to_bytes());
    }
    for (name, id) in &v1.tags {
        files.insert(keys::tag(name), RefData { snapshot: *id }.to_bytes());
    }
    for (name, id) in &v1.deleted_tags {
        if let Some(id) = id {
            files.insert(keys::tag(name), RefData { snapshot: *id }.to_bytes());
        }
        files.insert(keys::tag_tombstone(name), bytes::Bytes::new());
    }
    for (key, bytes) in files {
        let _ = storage.put(&key, bytes).await;
    }
    let _ = storage.delete(keys::SPEC2_REPO).await;
}
