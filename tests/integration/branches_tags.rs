//! Branches and tags: create, list, reset and delete branches; tags never move and
//! deleted tag names are never reused; ref names Icechunk accepts round-trip.

use crate::common;
use std::sync::Arc;

use crate::common::fixture::Fixture;
use crate::common::{group_json, p};
use floe::format::SnapshotId;
use floe::storage::{LocalStorage, Storage};
use floe::{Error, Repository, VersionSelector};

#[tokio::test]
async fn branches_create_list_reset_delete() {
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await;
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    let c1 = s.commit("c1").await.unwrap();
    repo.create_branch("dev", SnapshotId::INITIAL)
        .await
        .unwrap();
    assert_eq!(repo.list_branches().await.unwrap(), vec!["dev", "main"]);
    assert!(matches!(
        repo.create_branch("dev", c1).await,
        Err(Error::BranchExists { .. })
    ));
    assert!(matches!(
        repo.create_branch("a/b", c1).await,
        Err(Error::InvalidRefName { .. })
    ));
    assert!(matches!(
        repo.create_branch("x", SnapshotId::random()).await,
        Err(Error::SnapshotNotFound { .. })
    ));
    repo.reset_branch("dev", c1, Some(SnapshotId::INITIAL))
        .await
        .unwrap();
    assert_eq!(repo.lookup_branch("dev").await.unwrap(), c1);
    assert!(matches!(
        repo.reset_branch("dev", SnapshotId::INITIAL, Some(SnapshotId::INITIAL))
            .await,
        Err(Error::BranchMoved { .. })
    ));
    // A writable session on dev commits independently of main.
    let d = repo.writable_session("dev").await.unwrap();
    d.update_group(&p("/"), group_json(serde_json::json!({"on": "dev"})))
        .unwrap();
    let c2 = d.commit("on dev").await.unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), c1);
    assert_eq!(repo.ancestry(c2).await.unwrap().len(), 3);
    repo.delete_branch("dev").await.unwrap();
    assert_eq!(repo.list_branches().await.unwrap(), vec!["main"]);
    assert!(matches!(
        repo.lookup_branch("dev").await,
        Err(Error::BranchNotFound { .. })
    ));
    assert!(matches!(
        repo.delete_branch("main").await,
        Err(Error::CannotDeleteMain)
    ));
}

#[tokio::test]
async fn tags_never_move_and_deleted_names_are_never_reused() {
    let Fixture {
        repo,
        storage,
        dir: _dir,
        ..
    } = Fixture::local_spec1().await;
    repo.create_tag("v1", SnapshotId::INITIAL).await.unwrap();
    assert!(matches!(
        repo.create_tag("v1", SnapshotId::INITIAL).await,
        Err(Error::TagExists { .. })
    ));
    assert_eq!(repo.list_tags().await.unwrap(), vec!["v1"]);
    repo.delete_tag("v1").await.unwrap();
    assert!(storage.head("refs/tag.v1/ref.json.deleted").await.is_ok());
    assert!(
        storage.head("refs/tag.v1/ref.json").await.is_ok(),
        "the ref file stays"
    );
    assert!(repo.list_tags().await.unwrap().is_empty());
    assert!(matches!(
        repo.lookup_tag("v1").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.create_tag("v1", SnapshotId::INITIAL).await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.delete_tag("v1").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.delete_tag("nope").await,
        Err(Error::TagNotFound { .. })
    ));
    assert!(matches!(
        repo.resolve_ref("v1").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.resolve_ref("nope").await,
        Err(Error::RefNotFound { .. })
    ));
    assert_eq!(
        repo.resolve_ref("1CECHNKREP0F1RSTCMT0").await.unwrap(),
        VersionSelector::Snapshot(SnapshotId::INITIAL)
    );
}

/// Branch and tag names Icechunk accepts (anything without `/`) round-trip: create,
/// list, look up, delete; the listing shows them as given, not as stored.
async fn odd_ref_names_round_trip(storage: Arc<dyn Storage>) {
    let repo = Repository::create(storage, None).await.unwrap();
    let tip = repo.lookup_branch("main").await.unwrap();
    let names = [
        "données",
        "release#1",
        "a b",
        "x%41",
        "q?x",
        "emoji🧊",
        "dot.name",
    ];
    for name in names {
        repo.create_branch(name, tip).await.unwrap();
        repo.create_tag(name, tip).await.unwrap();
    }
    let mut expected: Vec<String> = names.iter().map(ToString::to_string).collect();
    expected.sort();
    assert_eq!(repo.list_tags().await.unwrap(), expected);
    expected.push("main".into());
    expected.sort();
    assert_eq!(repo.list_branches().await.unwrap(), expected);
    for name in names {
        assert_eq!(repo.lookup_branch(name).await.unwrap(), tip, "{name}");
        assert_eq!(repo.lookup_tag(name).await.unwrap(), tip, "{name}");
        repo.delete_branch(name).await.unwrap();
        repo.delete_tag(name).await.unwrap();
        let err = repo.create_tag(name, tip).await.unwrap_err();
        assert!(matches!(err, Error::TagDeleted { .. }), "{name}: {err}");
    }
    assert_eq!(repo.list_branches().await.unwrap(), vec!["main"]);
    assert!(repo.list_tags().await.unwrap().is_empty());
    let err = repo.create_branch("with/slash", tip).await.unwrap_err();
    assert!(matches!(err, Error::InvalidRefName { .. }), "{err}");
}

#[tokio::test]
async fn odd_ref_names_round_trip_on_local_storage() {
    let dir = tempfile::tempdir().unwrap();
    odd_ref_names_round_trip(Arc::new(LocalStorage::new(dir.path()).unwrap())).await;
}

#[tokio::test]
async fn odd_ref_names_round_trip_on_s3() {
    let Some(url) = common::s3_url("ref-names") else {
        return;
    };
    odd_ref_names_round_trip(floe::storage::create_storage(&url, None).unwrap()).await;
}

/// Spec 2 resets a branch on the `repo` object as the handle last read it (no
/// re-validating request): when another handle moved the branch meanwhile, a reset
/// that expects the new tip still succeeds (the check is repeated on the object read
/// anew), and one that expects the old tip fails with `BranchMoved` naming the new one.
#[tokio::test]
async fn spec2_reset_branch_on_a_stale_handle() {
    let Fixture {
        repo: a,
        session: s,
        storage,
        ..
    } = Fixture::in_memory().await;
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    let c1 = s.commit("c1").await.unwrap();
    a.create_branch("dev", SnapshotId::INITIAL).await.unwrap();
    let b = Repository::open(Arc::clone(&storage)).await.unwrap();
    b.reset_branch("dev", c1, Some(SnapshotId::INITIAL))
        .await
        .unwrap();
    // `a` still holds the object where dev is at the initial snapshot: expecting c1
    // fails on it, and succeeds on the object read anew.
    a.reset_branch("dev", SnapshotId::INITIAL, Some(c1))
        .await
        .unwrap();
    assert_eq!(b.lookup_branch("dev").await.unwrap(), SnapshotId::INITIAL);
    // Now `b` is stale: expecting c1 there passes its check on the old object, the
    // swap is refused, and the object read anew shows the initial snapshot.
    match b.reset_branch("dev", c1, Some(c1)).await {
        Err(Error::BranchMoved {
            expected, actual, ..
        }) => {
            assert_eq!(expected, c1);
            assert_eq!(actual, SnapshotId::INITIAL);
        }
        other => panic!("expected BranchMoved, got {other:?}"),
    }
}

/// Spec 2 reads the snapshot a branch or tag named when the handle last read the
/// `repo` object beside re-validating it: when another handle moved the branch
/// meanwhile, read-only and writable sessions still start on the new tip.
#[tokio::test]
async fn spec2_sessions_follow_a_branch_moved_by_another_handle() {
    let Fixture {
        repo: a,
        session: s,
        storage,
        ..
    } = Fixture::in_memory().await;
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    let c1 = s.commit("c1").await.unwrap();
    a.create_tag("t", c1).await.unwrap();
    let b = Repository::open(Arc::clone(&storage)).await.unwrap();
    // `a` has read the object where main is at c1; `b` moves main to c2.
    assert_eq!(a.lookup_branch("main").await.unwrap(), c1);
    let s = b.writable_session("main").await.unwrap();
    s.update_group(&p("/"), group_json(serde_json::json!({"x": 2})))
        .unwrap();
    let c2 = s.commit("c2").await.unwrap();
    let ro = a
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(ro.snapshot_id(), c2);
    b.reset_branch("main", c1, Some(c2)).await.unwrap();
    assert_eq!(a.writable_session("main").await.unwrap().snapshot_id(), c1);
    let tagged = a
        .readonly_session(&VersionSelector::Tag("t".into()))
        .await
        .unwrap();
    assert_eq!(tagged.snapshot_id(), c1);
}
