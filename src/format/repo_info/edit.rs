//! Building and changing a `repo` object (spec 2) in memory: the initial object of a
//! new repository and the ops-log bookkeeping every update does.
//!
//! Ops-log rules as Icechunk 2.x applies them (`../shared/docs/icechunk-format-notes.md`
//! §2.5): each update prepends an entry without a backup path; the entry that was on
//! top gets the name of the `overwritten/` copy of the object being replaced (so an
//! entry's backup names the object as it was right after that update); entries are
//! strictly newer than the one below; past `per_file` entries the list is cut at the
//! first entry with a backup path, which becomes `repo_before_updates`.

use std::collections::{BTreeMap, BTreeSet};

use super::{Availability, RepoInfo, RepoStatus, RepoUpdate, SnapshotSummary, UpdateKind};
use crate::format::config::RepositoryConfig;
use crate::format::FormatError;

impl RepoInfo {
    /// The `repo` object of a new repository: branch `main` at `initial`, online, one
    /// `RepoInitialized` entry at `now` (microseconds since the Unix epoch), the
    /// configuration stored only when it is not the default.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when the configuration cannot be encoded.
    pub fn initial(
        initial: SnapshotSummary,
        config: RepositoryConfig,
        now: u64,
    ) -> Result<Self, FormatError> {
        let config_bytes = if config.is_default() {
            None
        } else {
            Some(config.to_flexbuffer()?)
        };
        Ok(RepoInfo {
            branches: BTreeMap::from([("main".to_string(), initial.id)]),
            tags: BTreeMap::new(),
            deleted_tags: BTreeSet::new(),
            snapshots: BTreeMap::from([(initial.id, initial)]),
            status: RepoStatus {
                availability: Availability::Online,
                set_at: now,
                reason: None,
            },
            metadata: BTreeMap::new(),
            latest_updates: vec![RepoUpdate {
                kind: UpdateKind::RepoInitialized,
                updated_at: now,
                backup_path: None,
            }],
            repo_before_updates: None,
            config,
            config_bytes,
            enabled_feature_flags: Vec::new(),
            disabled_feature_flags: Vec::new(),
        })
    }

    /// Replaces the configuration (and its stored bytes).
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when it cannot be encoded.
    pub fn set_config(&mut self, config: RepositoryConfig) -> Result<(), FormatError> {
        self.config_bytes = if config.is_default() {
            None
        } else {
            Some(config.to_flexbuffer()?)
        };
        self.config = config;
        Ok(())
    }

    /// The time of the newest ops-log entry (microseconds), 0 when there is none.
    pub fn last_updated_at(&self) -> u64 {
        self.latest_updates.first().map_or(0, |u| u.updated_at)
    }

    /// Records `kind` on top of the ops log, as the update that replaces the object
    /// saved as `backup_path` (a name under `overwritten/`). The entry's time is
    /// `now`, or just after the newest entry when the clock is behind it, so times
    /// stay strictly increasing. Returns the time used.
    pub fn record(
        &mut self,
        kind: UpdateKind,
        now: u64,
        backup_path: &str,
        per_file: usize,
    ) -> u64 {
        let updated_at = now.max(self.last_updated_at().saturating_add(1));
        if let Some(top) = self.latest_updates.first_mut() {
            top.backup_path = Some(backup_path.to_string());
        }
        let mut all = Vec::with_capacity(self.latest_updates.len() + 1);
        all.push(RepoUpdate {
            kind,
            updated_at,
            backup_path: None,
        });
        let mut rest = std::mem::take(&mut self.latest_updates).into_iter();
        for u in rest.by_ref() {
            if all.len() >= per_file.max(1) {
                if let Some(path) = &u.backup_path {
                    self.repo_before_updates = Some(path.clone());
                    break;
                }
            }
            all.push(u);
        }
        self.latest_updates = all;
        updated_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::SnapshotId;

    fn repo() -> RepoInfo {
        let initial = SnapshotSummary {
            id: SnapshotId::INITIAL,
            parent_id: None,
            flushed_at: 10,
            message: "Repository initialized".into(),
            metadata: BTreeMap::new(),
            pruned_ancestor_tx_logs: None,
        };
        RepoInfo::initial(initial, RepositoryConfig::default(), 10).unwrap()
    }

    #[test]
    fn the_ops_log_links_backups_and_overflows_into_them() {
        let mut r = repo();
        assert_eq!(
            r.record(UpdateKind::GcRan, 5, "b1", 3),
            11,
            "never goes back"
        );
        r.record(UpdateKind::ExpirationRan, 20, "b2", 3);
        let paths: Vec<_> = r
            .latest_updates
            .iter()
            .map(|u| u.backup_path.as_deref())
            .collect();
        assert_eq!(paths, vec![None, Some("b2"), Some("b1")]);
        assert_eq!(r.repo_before_updates, None);
        r.record(UpdateKind::MetadataChanged, 30, "b3", 3);
        assert_eq!(r.latest_updates.len(), 3);
        assert_eq!(r.repo_before_updates.as_deref(), Some("b1"));
        let times: Vec<u64> = r.latest_updates.iter().map(|u| u.updated_at).collect();
        assert_eq!(times, vec![30, 20, 11]);
    }

    #[test]
    fn a_repo_object_round_trips() {
        let mut r = repo();
        let a = SnapshotId::random();
        r.snapshots.insert(
            a,
            SnapshotSummary {
                id: a,
                parent_id: Some(SnapshotId::INITIAL),
                flushed_at: 20,
                message: "first".into(),
                metadata: BTreeMap::from([("k".to_string(), serde_json::json!({"x": [1, 2.5]}))]),
                pruned_ancestor_tx_logs: Some(vec![SnapshotId::random()]),
            },
        );
        r.branches.insert("dev".into(), a);
        r.tags.insert("v1".into(), a);
        r.deleted_tags.insert("old".into());
        r.metadata
            .insert("team".into(), serde_json::Value::String("ocean".into()));
        r.enabled_feature_flags = vec![3];
        r.record(
            UpdateKind::NewCommit {
                branch: "dev".into(),
                new_snap_id: a,
            },
            20,
            "repo.1.X",
            1000,
        );
        let mut config = RepositoryConfig::default();
        config.set_inline_chunk_threshold_bytes(Some(64));
        r.set_config(config).unwrap();
        let back = RepoInfo::decode(&r.encode().unwrap()).unwrap();
        assert_eq!(back, r);
    }

    /// The `repo` object is compressed at its own config's `compression.level`: a
    /// long history is smaller at level 19 than at level 1, and both decode alike.
    #[test]
    fn the_repo_object_is_compressed_at_its_configured_level() {
        let mut r = repo();
        let mut parent = SnapshotId::INITIAL;
        for i in 0..500u64 {
            let id = SnapshotId::random();
            r.snapshots.insert(
                id,
                SnapshotSummary {
                    id,
                    parent_id: Some(parent),
                    flushed_at: 10 + i,
                    message: format!("commit number {i} of a long history"),
                    metadata: BTreeMap::new(),
                    pruned_ancestor_tx_logs: None,
                },
            );
            parent = id;
        }
        r.branches.insert("main".into(), parent);
        let at = |level: u8| {
            let mut r = r.clone();
            let mut config = RepositoryConfig::default();
            config.set_compression_level(Some(level));
            r.set_config(config).unwrap();
            let bytes = r.encode().unwrap();
            assert_eq!(RepoInfo::decode(&bytes).unwrap(), r);
            bytes.len()
        };
        let (fast, small) = (at(1), at(19));
        assert!(
            small < fast,
            "level 19: {small} bytes, level 1: {fast} bytes"
        );
    }

    #[test]
    fn encoding_refuses_dangling_refs() {
        let mut r = repo();
        r.tags.insert("t".into(), SnapshotId::random());
        assert!(matches!(
            r.encode(),
            Err(FormatError::InvalidData { what: "repo", .. })
        ));
        let mut r = repo();
        r.branches.clear();
        assert!(matches!(
            r.encode(),
            Err(FormatError::InvalidData { what: "repo", .. })
        ));
    }
}
