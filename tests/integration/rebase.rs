//! Rebase on commit: disjoint changes of concurrent sessions rebase, overlapping ones
//! are typed conflicts; identical new groups merge.

use crate::common;
use std::collections::BTreeMap;

use crate::common::fixture::Fixture;
use crate::common::{array_def, group_json, p};
use bytes::Bytes;
use floe::error::Conflict;
use floe::session::CommitOptions;
use floe::{Error, VersionSelector};

#[tokio::test]
async fn disjoint_changes_rebase_and_overlapping_changes_conflict() {
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory()
        .await
        .with_u8_array("/a", 4)
        .with_u8_array("/b", 4);
    s.commit("arrays").await.unwrap();

    // Different chunks of the same array: both land.
    let s1 = repo.writable_session("main").await.unwrap();
    let s2 = repo.writable_session("main").await.unwrap();
    s1.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    s2.set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x02"))
        .await
        .unwrap();
    let c1 = s1.commit("s1").await.unwrap();
    let c2 = s2.commit("s2").await.unwrap();
    let info = repo.ancestry(c2).await.unwrap();
    assert_eq!(info[1].id, c1, "s2 was rebased onto s1");
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        r.list_chunks(&p("/a")).await.unwrap(),
        vec![vec![0], vec![1]]
    );

    // The same chunk: the second commit fails with a typed conflict.
    let s3 = repo.writable_session("main").await.unwrap();
    let s4 = repo.writable_session("main").await.unwrap();
    s3.set_chunk(&p("/a"), &[2], Bytes::from_static(b"\x03"))
        .await
        .unwrap();
    s4.set_chunk(&p("/a"), &[2], Bytes::from_static(b"\x04"))
        .await
        .unwrap();
    s4.set_chunk(&p("/b"), &[0], Bytes::from_static(b"\x04"))
        .await
        .unwrap();
    let winner = s3.commit("s3").await.unwrap();
    let err = s4.commit("s4").await.unwrap_err();
    let Error::Conflict(c) = &err else {
        panic!("expected a conflict, got {err}")
    };
    assert_eq!(c.winning_snapshot, winner);
    assert_eq!(
        c.conflicts,
        vec![Conflict::ChunksChangedByBoth {
            path: p("/a"),
            node: s4.get_node(&p("/a")).unwrap().id,
            chunks: vec![vec![2]]
        }]
    );
    let msg = err.to_string();
    assert!(
        msg.contains("/a") && msg.contains("[2]") && msg.contains(&winner.to_string()),
        "{msg}"
    );
    // Nothing of s4 is visible.
    assert_eq!(repo.lookup_branch("main").await.unwrap(), winner);

    // Metadata changed by one side, chunks by the other: conflict.
    let s5 = repo.writable_session("main").await.unwrap();
    let s6 = repo.writable_session("main").await.unwrap();
    s5.update_array(&p("/b"), array_def("/b", &[8], &[1], "uint8"))
        .unwrap();
    s6.set_chunk(&p("/b"), &[1], Bytes::from_static(b"\x06"))
        .await
        .unwrap();
    s5.commit("resize b").await.unwrap();
    let err = s6.commit("write b").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::ChunksWrittenWhileArrayChanged { path: p("/b") }]),
        "{err}"
    );

    // Deleted by one side, written by the other: conflict.
    let s7 = repo.writable_session("main").await.unwrap();
    let s8 = repo.writable_session("main").await.unwrap();
    s7.delete_node(&p("/a")).unwrap();
    s8.set_chunk(&p("/a"), &[3], Bytes::from_static(b"\x08"))
        .await
        .unwrap();
    s7.commit("delete a").await.unwrap();
    let err = s8.commit("write a").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::ChangedNodeWasDeleted { path: p("/a") }]),
        "{err}"
    );

    // Without rebase, a moved branch is a conflict even for disjoint changes.
    let s9 = repo.writable_session("main").await.unwrap();
    let s10 = repo.writable_session("main").await.unwrap();
    s9.add_group(&p("/g9"), group_json(serde_json::json!({})))
        .unwrap();
    s10.add_group(&p("/g10"), group_json(serde_json::json!({})))
        .unwrap();
    s9.commit("g9").await.unwrap();
    let no_rebase = CommitOptions::default().rebase(false);
    assert!(matches!(
        s10.commit_with("g10", BTreeMap::new(), no_rebase).await,
        Err(Error::Conflict(_))
    ));
    s10.commit("g10").await.unwrap();
}

#[tokio::test]
async fn identical_new_groups_merge_on_rebase_but_different_ones_conflict() {
    let Fixture {
        repo, session: s1, ..
    } = Fixture::in_memory().await;
    let s2 = repo.writable_session("main").await.unwrap();
    let s3 = repo.writable_session("main").await.unwrap();
    // Two writers both create the root group (as two first imports do) plus their own
    // arrays; a third creates the root group with other attributes.
    for (s, name) in [(&s1, "/a"), (&s2, "/b"), (&s3, "/c")] {
        s.add_array(&p(name), array_def(name, &[2], &[1], "uint8"))
            .unwrap();
    }
    s1.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s2.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s3.add_group(&p("/"), group_json(serde_json::json!({"other": true})))
        .unwrap();
    let c1 = s1.commit("first").await.unwrap();
    let c2 = s2.commit("second").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(c2))
        .await
        .unwrap();
    let nodes = r.list_nodes().unwrap();
    let paths: Vec<String> = nodes.iter().map(|n| n.path.to_string()).collect();
    assert_eq!(paths, vec!["/", "/a", "/b"]);
    let root_before = repo
        .readonly_session(&VersionSelector::Snapshot(c1))
        .await
        .unwrap();
    assert_eq!(
        nodes[0].id,
        root_before.get_node(&p("/")).unwrap().id,
        "the first root group is kept"
    );
    // The transaction log of the second commit does not claim a new root group.
    let d = repo.diff(c1, c2).await.unwrap();
    assert!(d.new_groups.is_empty(), "{d:?}");
    assert_eq!(d.new_arrays.iter().collect::<Vec<_>>(), ["/b"]);
    let err = s3.commit("third").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::NewNodeAtExistingPath { path: p("/") }]),
        "{err}"
    );
}

/// A commit that rebased records `{"__icechunk": {"rebase_attempts": n}}` in its
/// metadata, as Icechunk 2.x does, next to the caller's keys; one that did not rebase
/// records nothing.
#[tokio::test]
async fn a_commit_that_rebased_records_its_rebase_attempts() {
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await.with_u8_array("/a", 4);
    s.commit("array").await.unwrap();

    let s1 = repo.writable_session("main").await.unwrap();
    let s2 = repo.writable_session("main").await.unwrap();
    s1.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    s2.set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x02"))
        .await
        .unwrap();
    let c1 = s1
        .commit_with(
            "s1",
            BTreeMap::from([("k".to_string(), serde_json::json!(1))]),
            CommitOptions::default(),
        )
        .await
        .unwrap();
    let c2 = s2
        .commit_with(
            "s2",
            BTreeMap::from([("k".to_string(), serde_json::json!(2))]),
            CommitOptions::default(),
        )
        .await
        .unwrap();
    let info = repo.ancestry(c2).await.unwrap();
    assert_eq!(info[1].id, c1);
    assert_eq!(
        info[0].metadata,
        BTreeMap::from([
            ("k".to_string(), serde_json::json!(2)),
            (
                "__icechunk".to_string(),
                serde_json::json!({"rebase_attempts": 1})
            ),
        ])
    );
    assert_eq!(
        info[1].metadata,
        BTreeMap::from([("k".to_string(), serde_json::json!(1))])
    );
}

/// A session whose base lost a manifest to maintenance (the branch moved on, expiry
/// dropped the base, garbage collection deleted the manifest only the base used)
/// still commits: the commit rebases onto the tip instead of failing on the missing
/// object. Before, its first flush failed with `object not found` (seen in
/// `maintenance_live`'s 4-process run).
#[tokio::test]
async fn commit_rebases_when_the_moved_base_lost_its_manifest() {
    let Fixture {
        repo,
        session: s,
        storage,
        ..
    } = Fixture::in_memory().await.with_u8_array("/a", 4);
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    s.commit("base").await.unwrap();
    let base_manifests: Vec<String> = common::fixture::keys(storage.as_ref())
        .await
        .into_iter()
        .filter(|k| k.starts_with("manifests/"))
        .collect();
    assert_eq!(base_manifests.len(), 1);

    // A second handle (its own caches) opens a session on the base.
    let other = floe::Repository::open(std::sync::Arc::clone(&storage))
        .await
        .unwrap();
    let late = other.writable_session("main").await.unwrap();
    late.set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x02"))
        .await
        .unwrap();

    // The branch moves on with a new manifest for /a; the base's is then deleted.
    let s2 = repo.writable_session("main").await.unwrap();
    s2.set_chunk(&p("/a"), &[2], Bytes::from_static(b"\x03"))
        .await
        .unwrap();
    let moved = s2.commit("moved").await.unwrap();
    for key in &base_manifests {
        floe::storage::Storage::delete(storage.as_ref(), key)
            .await
            .unwrap();
    }

    let committed = late.commit("late").await.unwrap();
    assert_eq!(other.ancestry(committed).await.unwrap()[1].id, moved);
    let r = other
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for (i, want) in [(0u64, 1u8), (1, 2), (2, 3)] {
        let got = r.get_chunk(&p("/a"), &[i], None).await.unwrap();
        assert_eq!(got.as_deref(), Some(&[want][..]), "chunk {i}");
    }
}
