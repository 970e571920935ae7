//! Spec-2 repositories floe creates and writes: the `repo` object, its backups and ops
//! log, refs, commits, amend, config, repository metadata, status and feature flags,
//! and concurrent writers. Interop with Icechunk 2.3.0 is in `icechunk_interop.rs`.

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{array_def, group_json, p};
use bytes::Bytes;
use floe::format::repo_info::{Availability, FeatureFlag, UpdateKind};
use floe::format::snapshot::Snapshot;
use floe::format::{SnapshotId, SpecVersion};
use floe::storage::{new_in_memory_storage, LocalStorage, Storage};
use floe::{Error, OpenOptions, Repository, VersionSelector};

fn local(dir: &tempfile::TempDir) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir.path()).unwrap())
}

async fn create(storage: Arc<dyn Storage>) -> Repository {
    Repository::create_with(storage, None, SpecVersion::V2, OpenOptions::default())
        .await
        .unwrap()
}

async fn keys(storage: &dyn Storage, prefix: &str) -> Vec<String> {
    storage
        .list(prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect()
}

/// Commits one array with one chunk holding `byte`.
async fn commit_array(repo: &Repository, branch: &str, name: &str, byte: u8) -> SnapshotId {
    let s = repo.writable_session(branch).await.unwrap();
    let path = format!("/{name}");
    s.add_array(&p(&path), array_def(&path, &[4], &[2], "uint8"))
        .unwrap();
    s.set_chunk(&p(&path), &[1], Bytes::from(vec![byte; 2]))
        .await
        .unwrap();
    s.commit(&format!("add {name}")).await.unwrap()
}

#[tokio::test]
async fn a_new_spec2_repository_has_the_spec2_layout() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(local(&dir)).await;
    assert_eq!(repo.spec_version(), SpecVersion::V2);
    let storage = repo.storage();
    let all = keys(storage.as_ref(), "").await;
    assert_eq!(
        all,
        vec![
            "repo".to_string(),
            format!("snapshots/{}", SnapshotId::INITIAL),
            format!("transactions/{}", SnapshotId::INITIAL),
        ],
        "no refs/, no config.yaml"
    );
    let snap = Snapshot::decode(
        &storage
            .get(&format!("snapshots/{}", SnapshotId::INITIAL))
            .await
            .unwrap()
            .bytes,
    )
    .unwrap();
    assert_eq!(snap.spec_version, SpecVersion::V2);
    assert_eq!(
        snap.metadata["__icechunk"],
        serde_json::json!({"is_root": true})
    );
    let log = repo.ops_log().await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].kind, UpdateKind::RepoInitialized);
    // Creating again fails, as for spec 1; so does creating spec 1 over it.
    for spec in [SpecVersion::V2, SpecVersion::V1] {
        assert!(matches!(
            Repository::create_with(Arc::clone(storage), None, spec, OpenOptions::default()).await,
            Err(Error::RepositoryExists { .. })
        ));
    }
    let reopened = Repository::open(Arc::clone(storage)).await.unwrap();
    assert_eq!(reopened.spec_version(), SpecVersion::V2);
    assert_eq!(reopened.list_branches().await.unwrap(), vec!["main"]);
}

#[tokio::test]
async fn commits_refs_and_the_ops_log_on_spec2() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(local(&dir)).await;
    let a = commit_array(&repo, "main", "a", 1).await;
    let b = commit_array(&repo, "main", "b", 2).await;
    repo.create_branch("dev", a).await.unwrap();
    let c = commit_array(&repo, "dev", "c", 3).await;
    repo.create_tag("v1", b).await.unwrap();
    repo.create_tag("gone", a).await.unwrap();
    repo.delete_tag("gone").await.unwrap();
    assert!(matches!(
        repo.create_tag("gone", a).await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.lookup_tag("gone").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.create_branch("dev", a).await,
        Err(Error::BranchExists { .. })
    ));
    assert!(matches!(
        repo.create_branch("x", SnapshotId::random()).await,
        Err(Error::SnapshotNotFound { .. })
    ));
    repo.create_branch("tmp", c).await.unwrap();
    repo.reset_branch("tmp", a, Some(c)).await.unwrap();
    assert!(matches!(
        repo.reset_branch("tmp", b, Some(c)).await,
        Err(Error::BranchMoved { .. })
    ));
    repo.delete_branch("tmp").await.unwrap();
    assert!(matches!(
        repo.delete_branch("main").await,
        Err(Error::CannotDeleteMain)
    ));

    // A fresh handle sees it all, and the history comes from the repo object.
    let repo = Repository::open(repo.storage().clone()).await.unwrap();
    assert_eq!(repo.list_branches().await.unwrap(), vec!["dev", "main"]);
    assert_eq!(repo.list_tags().await.unwrap(), vec!["v1"]);
    assert_eq!(repo.list_deleted_tags().await.unwrap(), vec!["gone"]);
    let history: Vec<SnapshotId> = repo
        .ancestry(c)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(history, vec![c, a, SnapshotId::INITIAL]);
    let r = repo
        .readonly_session(&VersionSelector::Tag("v1".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/b"), &[1], None).await.unwrap(),
        Some(Bytes::from(vec![2u8; 2]))
    );
    assert!(matches!(
        r.get_node(&p("/c")),
        Err(Error::NodeNotFound { .. })
    ));
    // The snapshot files hold no parent; the repo object does.
    let file = Snapshot::decode(
        &repo
            .storage()
            .get(&format!("snapshots/{c}"))
            .await
            .unwrap()
            .bytes,
    )
    .unwrap();
    assert_eq!(file.parent_id, None);
    assert_eq!(file.spec_version, SpecVersion::V2);
    let diff = repo.diff(a, c).await.unwrap();
    assert!(diff.new_arrays.contains(&p("/c")));

    let log = repo.ops_log().await.unwrap();
    let kinds: Vec<&UpdateKind> = log.iter().map(|u| &u.kind).collect();
    assert_eq!(
        kinds,
        vec![
            &UpdateKind::BranchDeleted {
                name: "tmp".into(),
                previous_snap_id: a
            },
            &UpdateKind::BranchReset {
                name: "tmp".into(),
                previous_snap_id: c
            },
            &UpdateKind::BranchCreated { name: "tmp".into() },
            &UpdateKind::TagDeleted {
                name: "gone".into(),
                previous_snap_id: a
            },
            &UpdateKind::TagCreated {
                name: "gone".into()
            },
            &UpdateKind::TagCreated { name: "v1".into() },
            &UpdateKind::NewCommit {
                branch: "dev".into(),
                new_snap_id: c
            },
            &UpdateKind::BranchCreated { name: "dev".into() },
            &UpdateKind::NewCommit {
                branch: "main".into(),
                new_snap_id: b
            },
            &UpdateKind::NewCommit {
                branch: "main".into(),
                new_snap_id: a
            },
            &UpdateKind::RepoInitialized,
        ]
    );
    assert!(log.windows(2).all(|w| w[0].updated_at > w[1].updated_at));
    // Every update saved the object it replaced; each entry but the newest names the
    // copy holding the object right after it.
    let backups = keys(repo.storage().as_ref(), "overwritten/").await;
    assert_eq!(backups.len(), log.len() - 1);
    assert_eq!(log[0].backup_path, None);
    for u in &log[1..] {
        let name = u.backup_path.as_ref().unwrap();
        assert!(backups.contains(&format!("overwritten/{name}")), "{name}");
        assert!(
            name.starts_with("repo.") && name.len() == "repo.".len() + 14 + 1 + 20,
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_ops_log_overflows_into_backups_and_reads_back_whole() {
    let storage = new_in_memory_storage();
    let repo = create(Arc::clone(&storage)).await;
    let mut config = repo.config();
    config.set_num_updates_per_repo_info_file(Some(3));
    repo.save_config(config).await.unwrap();
    for i in 0..7 {
        repo.update_metadata(BTreeMap::from([("i".to_string(), serde_json::json!(i))]))
            .await
            .unwrap();
    }
    let repo = Repository::open(storage).await.unwrap();
    assert_eq!(repo.config().num_updates_per_repo_info_file(), 3);
    let log = repo.ops_log().await.unwrap();
    assert_eq!(log.len(), 9, "initialized, config, 7 metadata changes");
    assert_eq!(log[8].kind, UpdateKind::RepoInitialized);
    assert_eq!(log[7].kind, UpdateKind::ConfigChanged);
    assert!(log.windows(2).all(|w| w[0].updated_at > w[1].updated_at));
    assert_eq!(
        repo.get_metadata().await.unwrap()["i"],
        serde_json::json!(6)
    );
}

#[tokio::test]
async fn metadata_status_and_feature_flags() {
    let storage = new_in_memory_storage();
    let repo = create(storage).await;
    repo.set_metadata(BTreeMap::from([(
        "team".to_string(),
        serde_json::json!("ocean"),
    )]))
    .await
    .unwrap();
    let after = repo
        .update_metadata(BTreeMap::from([(
            "year".to_string(),
            serde_json::json!(2026),
        )]))
        .await
        .unwrap();
    assert_eq!(after.len(), 2);
    assert_eq!(repo.get_metadata().await.unwrap(), after);

    repo.set_feature_flag(FeatureFlag::CreateTag, Some(false))
        .await
        .unwrap();
    assert!(matches!(
        repo.create_tag("t", SnapshotId::INITIAL).await,
        Err(Error::FeatureDisabled {
            flag: "create_tag",
            ..
        })
    ));
    repo.set_feature_flag(FeatureFlag::CreateTag, None)
        .await
        .unwrap();
    repo.create_tag("t", SnapshotId::INITIAL).await.unwrap();
    let flags = repo.feature_flags().await.unwrap();
    assert!(flags
        .iter()
        .all(|(_, setting, on)| setting.is_none() && *on));

    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    repo.set_status(Availability::ReadOnly, Some("maintenance".into()))
        .await
        .unwrap();
    assert_eq!(
        repo.status().await.unwrap().availability,
        Availability::ReadOnly
    );
    assert!(matches!(
        s.commit("blocked").await,
        Err(Error::RepositoryReadOnly {
            availability: Availability::ReadOnly,
            ..
        })
    ));
    assert!(matches!(
        repo.create_branch("b", SnapshotId::INITIAL).await,
        Err(Error::RepositoryReadOnly { .. })
    ));
    repo.set_status(Availability::Online, None).await.unwrap();
    s.commit("now").await.unwrap();
}

#[tokio::test]
async fn spec2_only_operations_are_refused_on_spec1() {
    let repo = common::create_spec1(new_in_memory_storage(), None).await;
    assert!(matches!(
        repo.ops_log().await,
        Err(Error::UnsupportedOnSpecVersion {
            operation: "ops_log",
            spec_version: SpecVersion::V1
        })
    ));
    assert!(matches!(
        repo.set_metadata(BTreeMap::new()).await,
        Err(Error::UnsupportedOnSpecVersion {
            spec_version: SpecVersion::V1,
            ..
        })
    ));
    assert!(matches!(
        repo.status().await,
        Err(Error::UnsupportedOnSpecVersion {
            spec_version: SpecVersion::V1,
            ..
        })
    ));
}

#[tokio::test]
async fn amend_replaces_the_tip_and_is_recorded() {
    let storage = new_in_memory_storage();
    let repo = create(storage).await;
    let a = commit_array(&repo, "main", "a", 1).await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from(vec![5u8; 2]))
        .await
        .unwrap();
    let amended = s.amend("a, amended", BTreeMap::new()).await.unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), amended);
    let history: Vec<SnapshotId> = repo
        .ancestry(amended)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(history, vec![amended, SnapshotId::INITIAL]);
    assert_eq!(
        repo.ops_log().await.unwrap()[0].kind,
        UpdateKind::CommitAmended {
            branch: "main".into(),
            previous_snap_id: a,
            new_snap_id: amended
        }
    );
}

#[tokio::test]
async fn forks_merge_and_commit_on_spec2() {
    let storage = new_in_memory_storage();
    let repo = create(Arc::clone(&storage)).await;
    commit_array(&repo, "main", "a", 1).await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from(vec![4u8; 2]))
        .await
        .unwrap();
    let fork = s.fork().await.unwrap();
    let bytes = {
        fork.set_chunk(&p("/a"), &[1], Bytes::from(vec![8u8; 2]))
            .await
            .unwrap();
        fork.to_fork_bytes().await.unwrap()
    };
    let back = repo.fork_from_bytes(&bytes).await.unwrap();
    s.merge(vec![back]).await.unwrap();
    let id = s.commit("merged").await.unwrap();
    let log = repo.ops_log().await.unwrap();
    assert!(matches!(
        log[1].kind,
        UpdateKind::NewDetachedSnapshot { .. }
    ));
    let r = Repository::open(storage)
        .await
        .unwrap()
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/a"), &[0], None).await.unwrap(),
        Some(Bytes::from(vec![4u8; 2]))
    );
    assert_eq!(
        r.get_chunk(&p("/a"), &[1], None).await.unwrap(),
        Some(Bytes::from(vec![8u8; 2]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_spec2_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(local(&dir)).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[64], &[1], "uint8"))
        .unwrap();
    s.commit("array").await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let repo = Repository::open(local(&dir)).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let branch = if i % 4 == 0 {
                format!("b{i}")
            } else {
                "main".into()
            };
            if i % 4 == 0 {
                repo.create_branch(&branch, SnapshotId::INITIAL)
                    .await
                    .unwrap();
                return;
            }
            let s = repo.writable_session(&branch).await.unwrap();
            s.set_chunk(&p("/a"), &[i], Bytes::from(vec![u8::try_from(i).unwrap()]))
                .await
                .unwrap();
            s.commit(&format!("chunk {i}")).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for i in (0..16u64).filter(|i| i % 4 != 0) {
        assert_eq!(
            r.get_chunk(&p("/a"), &[i], None).await.unwrap(),
            Some(Bytes::from(vec![u8::try_from(i).unwrap()])),
            "chunk {i}"
        );
    }
    assert_eq!(repo.list_branches().await.unwrap().len(), 5);
    let tip = repo.lookup_branch("main").await.unwrap();
    assert_eq!(repo.ancestry(tip).await.unwrap().len(), 12 + 2);
}

/// A spec-1 repository with two branches, a tag, a deleted tag and a configuration.
async fn spec1_repo(storage: Arc<dyn Storage>) -> (Repository, SnapshotId, SnapshotId) {
    let mut config = floe::format::config::RepositoryConfig::default();
    config.set_inline_chunk_threshold_bytes(Some(8));
    let repo = common::create_spec1(storage, Some(config)).await;
    let a = commit_array(&repo, "main", "a", 1).await;
    let b = commit_array(&repo, "main", "b", 2).await;
    repo.create_branch("dev", a).await.unwrap();
    commit_array(&repo, "dev", "c", 3).await;
    repo.create_tag("v1", b).await.unwrap();
    repo.create_tag("gone", a).await.unwrap();
    repo.delete_tag("gone").await.unwrap();
    (repo, a, b)
}

#[tokio::test]
async fn upgrade_folds_refs_and_config_into_the_repo_object() {
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let (v1, _a, b) = spec1_repo(Arc::clone(&storage)).await;
    let main = v1.lookup_branch("main").await.unwrap();
    let dev = v1.lookup_branch("dev").await.unwrap();
    let before = keys(storage.as_ref(), "").await;

    // A dry run changes nothing.
    let dry = floe::lifecycle::upgrade_to_spec2(Arc::clone(&storage), true)
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!((dry.branches, dry.tags, dry.deleted_tags), (2, 1, 1));
    assert_eq!(dry.snapshots, 4, "initial, a, b and dev's c");
    assert_eq!(keys(storage.as_ref(), "").await, before);

    let report = floe::lifecycle::upgrade_to_spec2(Arc::clone(&storage), false)
        .await
        .unwrap();
    assert_eq!(report.snapshots, dry.snapshots);
    assert!(keys(storage.as_ref(), "refs/").await.is_empty());
    assert!(!dir.path().join("config.yaml").exists());
    let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
    assert_eq!(repo.spec_version(), SpecVersion::V2);
    assert_eq!(repo.lookup_branch("main").await.unwrap(), main);
    assert_eq!(repo.lookup_branch("dev").await.unwrap(), dev);
    assert_eq!(repo.lookup_tag("v1").await.unwrap(), b);
    assert!(matches!(
        repo.lookup_tag("gone").await,
        Err(Error::TagDeleted { .. })
    ));
    assert_eq!(repo.config().inline_chunk_threshold_bytes(), 8);
    let log = repo.ops_log().await.unwrap();
    assert_eq!(
        log[0].kind,
        UpdateKind::RepoMigrated {
            from_version: 1,
            to_version: 2
        }
    );
    assert_eq!(log.last().unwrap().kind, UpdateKind::RepoInitialized);
    assert_eq!(log.len(), 1 + 1 + 2 + 1 + 1 + 1 + 2, "{log:#?}");
    assert!(log.windows(2).all(|w| w[0].updated_at > w[1].updated_at));
    // Old files are read by their own version; history is in the repo object.
    let history: Vec<SnapshotId> = repo
        .ancestry(dev)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(history.len(), 3);
    let r = repo
        .readonly_session(&VersionSelector::Tag("v1".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/b"), &[1], None).await.unwrap(),
        Some(Bytes::from(vec![2u8; 2]))
    );
    // The upgraded repository takes commits; a second upgrade is refused.
    commit_array(&repo, "main", "d", 4).await;
    assert!(matches!(
        floe::lifecycle::upgrade_to_spec2(Arc::clone(&storage), false).await,
        Err(Error::UnsupportedOnSpecVersion {
            operation: "upgrade",
            spec_version: SpecVersion::V2
        })
    ));
}

#[tokio::test]
async fn a_failed_upgrade_rolls_back_to_spec1() {
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    let inner = new_in_memory_storage();
    let (_, _, b) = spec1_repo(Arc::clone(&inner)).await;
    // Deleting the second ref file fails: main's ref is gone already.
    let mut deletes = 0;
    let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        Arc::clone(&inner),
        Box::new(move |call, key: &str| {
            if call == Call::Delete && key.starts_with("refs/") {
                deletes += 1;
                if deletes == 2 {
                    return Fault::FailBefore;
                }
            }
            Fault::None
        }),
    ));
    assert!(matches!(
        floe::lifecycle::upgrade_to_spec2(faulty, false).await,
        Err(Error::Storage(_))
    ));
    let repo = Repository::open(inner).await.unwrap();
    assert_eq!(repo.spec_version(), SpecVersion::V1);
    assert_eq!(repo.list_branches().await.unwrap(), vec!["dev", "main"]);
    assert_eq!(repo.lookup_tag("v1").await.unwrap(), b);
    assert!(matches!(
        repo.lookup_tag("gone").await,
        Err(Error::TagDeleted { .. })
    ));
    commit_array(&repo, "main", "after", 9).await;
}

#[tokio::test]
async fn rearrange_sessions_move_nodes_and_record_the_moves() {
    let storage = new_in_memory_storage();
    let repo = create(Arc::clone(&storage)).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s.add_group(&p("/g"), group_json(serde_json::json!({"k": 1})))
        .unwrap();
    s.add_array(&p("/g/a"), array_def("/g/a", &[4], &[2], "uint8"))
        .unwrap();
    s.set_chunk(&p("/g/a"), &[1], Bytes::from(vec![7u8; 2]))
        .await
        .unwrap();
    s.add_group(&p("/h"), group_json(serde_json::json!({})))
        .unwrap();
    let before = s.commit("tree").await.unwrap();
    // A writer that started before the move: it cannot rebase over it.
    let stale = repo.writable_session("main").await.unwrap();
    stale
        .set_chunk(&p("/g/a"), &[0], Bytes::from(vec![1u8; 2]))
        .await
        .unwrap();

    assert!(matches!(
        s.move_node(&p("/g"), &p("/x")),
        Err(Error::NotARearrangeSession)
    ));
    let r = repo.rearrange_session("main").await.unwrap();
    assert!(matches!(
        r.add_group(&p("/new"), group_json(serde_json::json!({}))),
        Err(Error::ReadOnlySession)
    ));
    r.move_node(&p("/g"), &p("/h/moved")).unwrap();
    // The session reads the moved tree at once.
    assert_eq!(
        r.get_chunk(&p("/h/moved/a"), &[1], None).await.unwrap(),
        Some(Bytes::from(vec![7u8; 2]))
    );
    assert!(matches!(
        r.get_node(&p("/g")),
        Err(Error::NodeNotFound { .. })
    ));
    assert_eq!(r.moves().len(), 2, "the group and its array");
    let moved = r.commit("move g under h").await.unwrap();

    let log = repo.assets().fetch_transaction_log(&moved).await.unwrap();
    let pairs: Vec<(&str, &str)> = log
        .moved_nodes
        .iter()
        .map(|m| (m.from.as_str(), m.to.as_str()))
        .collect();
    assert_eq!(pairs, vec![("/g", "/h/moved"), ("/g/a", "/h/moved/a")]);
    let tip = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        tip.get_chunk(&p("/h/moved/a"), &[1], None).await.unwrap(),
        Some(Bytes::from(vec![7u8; 2]))
    );
    let old = repo
        .readonly_session(&VersionSelector::Snapshot(before))
        .await
        .unwrap();
    assert!(
        old.get_node(&p("/g/a")).is_ok(),
        "history keeps the old paths"
    );
    let diff = repo.diff(before, moved).await.unwrap();
    assert_eq!(diff.moved_nodes.get(&p("/h/moved")), Some(&p("/g")));
    assert_eq!(diff.moved_nodes.len(), 2);

    // The stale writer's commit conflicts: moves are never rebased.
    match stale.commit("after the move").await {
        Err(Error::Conflict(c)) => assert!(
            matches!(c.conflicts[..], [floe::error::Conflict::MovesCannotBeRebased { snapshot }] if snapshot == moved),
            "{c:?}"
        ),
        other => panic!("{other:?}"),
    }
    // A rearrange session whose branch moved conflicts too.
    let late = repo.rearrange_session("main").await.unwrap();
    commit_array(&repo, "main", "z", 1).await;
    late.move_node(&p("/h"), &p("/h2")).unwrap();
    assert!(matches!(late.commit("late").await, Err(Error::Conflict(_))));

    // Spec 1 has no moves; a repository may turn them off.
    let v1 = common::create_spec1(new_in_memory_storage(), None).await;
    assert!(matches!(
        v1.rearrange_session("main").await,
        Err(Error::UnsupportedOnSpecVersion { .. })
    ));
    repo.set_feature_flag(FeatureFlag::MoveNode, Some(false))
        .await
        .unwrap();
    assert!(matches!(
        repo.rearrange_session("main").await,
        Err(Error::FeatureDisabled {
            flag: "move_node",
            ..
        })
    ));
}

/// The moved paths a snapshot's transaction log records, as `(from, to)`.
async fn logged_moves(repo: &Repository, id: &SnapshotId) -> Vec<(String, String)> {
    let log = repo.assets().fetch_transaction_log(id).await.unwrap();
    log.moved_nodes
        .iter()
        .map(|m| (m.from.to_string(), m.to.to_string()))
        .collect()
}

#[tokio::test]
async fn rearrange_sessions_amend_and_compose_their_moves() {
    let repo = create(new_in_memory_storage()).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[2], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[1], Bytes::from(vec![7u8; 2]))
        .await
        .unwrap();
    let init = s.commit("init").await.unwrap();
    let parent = repo
        .readonly_session(&VersionSelector::Snapshot(init))
        .await
        .unwrap()
        .snapshot()
        .unwrap()
        .parent_id;

    // A rearrange session with nothing moved has no changes and cannot commit.
    let empty = repo.rearrange_session("main").await.unwrap();
    assert!(!empty.has_uncommitted_changes());
    assert!(matches!(
        empty.commit("nothing").await,
        Err(Error::NoChangesToCommit)
    ));

    // First amend: `/a -> /b` replaces "init" and joins its log.
    let r = repo.rearrange_session("main").await.unwrap();
    r.move_node(&p("/a"), &p("/b")).unwrap();
    assert!(r.has_uncommitted_changes());
    let first = r.amend("moved once", Default::default()).await.unwrap();
    let tip = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(tip.snapshot().unwrap().id, first);
    assert_eq!(
        tip.snapshot().unwrap().parent_id,
        parent,
        "amend keeps init's parent"
    );
    assert_eq!(
        tip.get_chunk(&p("/b"), &[1], None).await.unwrap(),
        Some(Bytes::from(vec![7u8; 2]))
    );
    assert_eq!(
        logged_moves(&repo, &first).await,
        [("/a".into(), "/b".into())]
    );
    let log = repo.assets().fetch_transaction_log(&first).await.unwrap();
    assert_eq!(log.new_arrays.len(), 1, "init's new array stays in the log");

    // Second amend: `/b -> /c` composes to `/a -> /c`.
    let r = repo.rearrange_session("main").await.unwrap();
    r.move_node(&p("/b"), &p("/c")).unwrap();
    let second = r.amend("moved twice", Default::default()).await.unwrap();
    assert_eq!(
        logged_moves(&repo, &second).await,
        [("/a".into(), "/c".into())]
    );

    // Third amend moves it back: nothing is recorded as moved, but it still amends.
    let r = repo.rearrange_session("main").await.unwrap();
    r.move_node(&p("/c"), &p("/a")).unwrap();
    let third = r.amend("back", Default::default()).await.unwrap();
    assert!(logged_moves(&repo, &third).await.is_empty());

    // Moves that cancel out in one session still commit (with no moves logged).
    let r = repo.rearrange_session("main").await.unwrap();
    r.move_node(&p("/a"), &p("/z")).unwrap();
    r.move_node(&p("/z"), &p("/a")).unwrap();
    assert!(r.has_uncommitted_changes());
    let round_trip = r.commit("there and back").await.unwrap();
    assert!(logged_moves(&repo, &round_trip).await.is_empty());

    // A rearrange session on a branch that moved cannot amend.
    let late = repo.rearrange_session("main").await.unwrap();
    commit_array(&repo, "main", "other", 1).await;
    late.move_node(&p("/a"), &p("/y")).unwrap();
    assert!(matches!(
        late.amend("late", Default::default()).await,
        Err(Error::Conflict(_))
    ));
}
