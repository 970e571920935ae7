//! Forks and merges (cooperative writers, one commit): serialized forks written
//! independently come back and merge; every kind of overlap is a typed conflict and
//! nothing is merged then; a fork's changes merge once. The multi-process version
//! (worker processes on local storage and the S3 test server) is in
//! `tests/concurrency.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{array_def, group_json, history, p};
use bytes::Bytes;
use floe::error::Conflict;
use floe::format::snapshot::NodeKind;
use floe::storage::new_in_memory_storage;
use floe::{Error, Repository, Session, VersionSelector};

async fn repo_with_array() -> (Repository, Session) {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s.add_array(&p("/a"), array_def("/a", &[8], &[1], "uint8"))
        .unwrap();
    s.commit("setup").await.unwrap();
    (repo, s)
}

fn v(x: u8) -> Bytes {
    // Above the default inline threshold: a native chunk written when set.
    Bytes::from(vec![x; 600])
}

/// A fork sent away as bytes and resumed on another handle of the repository.
async fn travel(repo: &Repository, fork: &Session) -> Session {
    let bytes = fork.to_fork_bytes().await.unwrap();
    repo.fork_from_bytes(&bytes).await.unwrap()
}

async fn chunk(s: &Session, path: &str, i: u32) -> Option<Bytes> {
    s.get_chunk(&p(path), &[i.into()], None).await.unwrap()
}

#[tokio::test]
async fn disjoint_forks_merge_into_one_commit() {
    let (repo, s) = repo_with_array().await;
    let before = history(&repo, repo.lookup_branch("main").await.unwrap()).await;
    // Uncommitted changes before forking travel with the forks: a new array, a chunk.
    s.add_array(&p("/fresh"), array_def("/fresh", &[4], &[1], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[0], v(100)).await.unwrap();
    let fork = s.fork().await.unwrap();
    assert!(fork.is_fork() && fork.is_writable() && fork.branch().is_none());

    let reopened = Repository::open(repo.storage().clone()).await.unwrap();
    let w1 = travel(&reopened, &fork).await;
    let w2 = travel(&reopened, &fork).await;
    // Each worker sees the parent's uncommitted state.
    assert_eq!(chunk(&w1, "/a", 0).await, Some(v(100)));
    assert!(w2.get_node(&p("/fresh")).is_ok());
    w1.set_chunk(&p("/a"), &[1], v(1)).await.unwrap();
    w1.set_chunk(&p("/fresh"), &[0], v(10)).await.unwrap();
    // A worker overwrites a chunk the parent wrote before forking: not a conflict.
    w1.set_chunk(&p("/a"), &[0], v(101)).await.unwrap();
    w2.set_chunk(&p("/a"), &[2], v(2)).await.unwrap();
    w2.set_chunk(&p("/fresh"), &[1], v(11)).await.unwrap();
    // One worker creates an array and writes it.
    w2.add_array(&p("/made"), array_def("/made", &[2], &[1], "uint8"))
        .unwrap();
    w2.set_chunk(&p("/made"), &[1], v(7)).await.unwrap();
    assert_ne!(
        w1.fork_id(),
        w2.fork_id(),
        "copies of one fork are distinct"
    );

    let back1 = travel(&repo, &w1).await;
    let back2 = travel(&repo, &w2).await;
    assert_eq!(
        back1.fork_id(),
        w1.fork_id(),
        "the id travels with the changes"
    );
    s.merge([back1, back2]).await.unwrap();
    let id = s.commit("one commit from two workers").await.unwrap();

    let after = history(&repo, repo.lookup_branch("main").await.unwrap()).await;
    assert_eq!(after.len(), before.len() + 1, "exactly one new commit");
    assert_eq!(after[0], id);
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(chunk(&r, "/a", 0).await, Some(v(101)));
    assert_eq!(chunk(&r, "/a", 1).await, Some(v(1)));
    assert_eq!(chunk(&r, "/a", 2).await, Some(v(2)));
    assert_eq!(chunk(&r, "/fresh", 0).await, Some(v(10)));
    assert_eq!(chunk(&r, "/fresh", 1).await, Some(v(11)));
    assert_eq!(chunk(&r, "/made", 1).await, Some(v(7)));
    assert_eq!(chunk(&r, "/made", 0).await, None);
}

#[tokio::test]
async fn a_fork_merges_once() {
    let (repo, s) = repo_with_array().await;
    let fork = s.fork().await.unwrap();
    fork.set_chunk(&p("/a"), &[3], v(3)).await.unwrap();
    let bytes = fork.to_fork_bytes().await.unwrap();
    s.merge([repo.fork_from_bytes(&bytes).await.unwrap()])
        .await
        .unwrap();
    // The same result delivered again (a retried task): refused, by id.
    let again = s.merge([repo.fork_from_bytes(&bytes).await.unwrap()]).await;
    assert!(
        matches!(&again, Err(Error::ForkAlreadyMerged { fork: id }) if Some(id.clone()) == fork.fork_id().map(|f| f.to_string())),
        "{again:?}"
    );
    // Also twice in one call.
    let f2 = s.fork().await.unwrap();
    f2.set_chunk(&p("/a"), &[4], v(4)).await.unwrap();
    let twice = s.merge([f2.clone(), f2.clone()]).await;
    assert!(
        matches!(twice, Err(Error::ForkAlreadyMerged { .. })),
        "{twice:?}"
    );
    // A fork with no change merges any number of times (there is nothing to apply).
    let idle = s.fork().await.unwrap();
    s.merge([idle.clone()]).await.unwrap();
    s.merge([idle]).await.unwrap();
    s.commit("merged").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(chunk(&r, "/a", 3).await, Some(v(3)));
    assert_eq!(
        chunk(&r, "/a", 4).await,
        None,
        "the refused merge left nothing"
    );
}

/// Merges `forks` expecting a conflict; checks the session's changes are unchanged.
async fn expect_conflicts(s: &Session, forks: Vec<Session>) -> Vec<Conflict> {
    let before = s.change_set();
    let err = s.merge(forks).await.unwrap_err();
    assert_eq!(s.change_set(), before, "a failed merge changes nothing");
    match err {
        Error::MergeConflict { conflicts } => conflicts,
        other => panic!("expected a merge conflict, got {other}"),
    }
}

#[tokio::test]
async fn overlapping_chunk_writes_take_the_last_fork_other_overlaps_conflict() {
    let (_repo, s) = repo_with_array().await;
    let a_id = s.get_node(&p("/a")).unwrap().id;

    // Two forks write the same chunk: as in Icechunk 2.3.0, the fork merged last wins.
    let f1 = s.fork().await.unwrap();
    let f2 = s.fork().await.unwrap();
    f1.set_chunk(&p("/a"), &[5], v(1)).await.unwrap();
    f1.set_chunk(&p("/a"), &[6], v(1)).await.unwrap();
    f2.set_chunk(&p("/a"), &[5], v(2)).await.unwrap();
    s.merge(vec![f1.clone(), f2.clone()]).await.unwrap();
    assert_eq!(chunk(&s, "/a", 5).await, Some(v(2)));
    assert_eq!(chunk(&s, "/a", 6).await, Some(v(1)));
    s.discard_changes();
    // The other order: the other fork wins.
    let f1 = s.fork().await.unwrap();
    let f2 = s.fork().await.unwrap();
    f1.set_chunk(&p("/a"), &[5], v(1)).await.unwrap();
    f2.set_chunk(&p("/a"), &[5], v(2)).await.unwrap();
    s.merge(vec![f2, f1]).await.unwrap();
    assert_eq!(chunk(&s, "/a", 5).await, Some(v(1)));
    s.discard_changes();

    // The session itself writes a chunk after forking that the fork also writes:
    // the fork's write wins.
    let f3 = s.fork().await.unwrap();
    f3.set_chunk(&p("/a"), &[7], v(3)).await.unwrap();
    s.set_chunk(&p("/a"), &[7], v(4)).await.unwrap();
    s.merge(vec![f3]).await.unwrap();
    assert_eq!(chunk(&s, "/a", 7).await, Some(v(3)));
    s.discard_changes();

    // Two forks change the same array's metadata.
    let f4 = s.fork().await.unwrap();
    let f5 = s.fork().await.unwrap();
    f4.update_array(&p("/a"), array_def("/a", &[9], &[1], "uint8"))
        .unwrap();
    f5.update_array(&p("/a"), array_def("/a", &[10], &[1], "uint8"))
        .unwrap();
    let c = expect_conflicts(&s, vec![f4.clone(), f5]).await;
    assert_eq!(
        c,
        vec![Conflict::NodeMetadataChangedByBoth { path: p("/a") }]
    );

    // One fork deletes the array another wrote (both orders).
    let f6 = s.fork().await.unwrap();
    let f7 = s.fork().await.unwrap();
    f6.delete_node(&p("/a")).unwrap();
    f7.set_chunk(&p("/a"), &[0], v(9)).await.unwrap();
    let c = expect_conflicts(&s, vec![f6.clone(), f7.clone()]).await;
    assert_eq!(c, vec![Conflict::ChangedNodeWasDeleted { path: p("/a") }]);
    let c = expect_conflicts(&s, vec![f7, f6]).await;
    assert!(
        matches!(&c[..], [Conflict::DeletedNodeWasChanged { path, .. }] if *path == p("/a")),
        "{c:?}"
    );

    // Two forks create a node at one path.
    let f8 = s.fork().await.unwrap();
    let f9 = s.fork().await.unwrap();
    f8.add_array(&p("/n"), array_def("/n", &[2], &[1], "uint8"))
        .unwrap();
    f9.add_array(&p("/n"), array_def("/n", &[3], &[1], "uint8"))
        .unwrap();
    let c = expect_conflicts(&s, vec![f8, f9]).await;
    assert_eq!(c, vec![Conflict::NewNodeAtExistingPath { path: p("/n") }]);

    // Every conflict of one merge is listed, over all the forks.
    let g1 = s.fork().await.unwrap();
    let g2 = s.fork().await.unwrap();
    let g3 = s.fork().await.unwrap();
    g1.set_chunk(&p("/a"), &[5], v(1)).await.unwrap();
    g2.set_chunk(&p("/a"), &[5], v(2)).await.unwrap();
    g1.add_group(&p("/m"), group_json(serde_json::json!({"by": 1})))
        .unwrap();
    g3.add_group(&p("/m"), group_json(serde_json::json!({"by": 3})))
        .unwrap();
    let g4 = s.fork().await.unwrap();
    g4.delete_node(&p("/a")).unwrap();
    let c = expect_conflicts(&s, vec![g1, g2, g3, g4]).await;
    assert_eq!(
        c,
        vec![
            Conflict::NewNodeAtExistingPath { path: p("/m") },
            Conflict::DeletedNodeWasChanged {
                path: p("/a"),
                node: a_id,
                kind: NodeKind::Array
            }
        ]
    );
}

#[tokio::test]
async fn merge_after_the_session_committed() {
    let (repo, s) = repo_with_array().await;
    let fork = s.fork().await.unwrap();
    fork.set_chunk(&p("/a"), &[1], v(1)).await.unwrap();
    fork.set_chunk(&p("/a"), &[2], v(1)).await.unwrap();
    // The session commits a disjoint change and one the fork overlaps.
    s.set_chunk(&p("/a"), &[0], v(5)).await.unwrap();
    s.commit("meanwhile").await.unwrap();
    s.merge([fork.clone()]).await.unwrap();
    s.commit("fork").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(chunk(&r, "/a", 0).await, Some(v(5)));
    assert_eq!(chunk(&r, "/a", 1).await, Some(v(1)));

    let late = s.fork().await.unwrap();
    late.set_chunk(&p("/a"), &[3], v(7)).await.unwrap();
    s.set_chunk(&p("/a"), &[3], v(8)).await.unwrap();
    s.commit("overlapping").await.unwrap();
    let c = expect_conflicts(&s, vec![late]).await;
    assert!(
        matches!(&c[..], [Conflict::ChunksChangedByBoth { chunks, .. }] if *chunks == vec![vec![3]]),
        "{c:?}"
    );
}

#[tokio::test]
async fn forks_refuse_what_they_cannot_do() {
    let (repo, s) = repo_with_array().await;
    // A session on a branch does not serialize; a fork does not commit or rebase.
    assert!(matches!(s.to_fork_bytes().await, Err(Error::NotAFork)));
    let fork = s.fork().await.unwrap();
    fork.set_chunk(&p("/a"), &[0], v(1)).await.unwrap();
    assert!(matches!(
        fork.commit("no").await,
        Err(Error::ForkCannotCommit)
    ));
    assert!(matches!(fork.rebase().await, Err(Error::ForkCannotCommit)));
    assert!(matches!(s.merge([s.clone()]).await, Err(Error::NotAFork)));
    // Read-only sessions neither fork nor merge.
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(matches!(r.fork().await, Err(Error::ReadOnlySession)));
    assert!(matches!(
        r.merge([fork.clone()]).await,
        Err(Error::ReadOnlySession)
    ));
    // Bytes that are not a fork, or cut short.
    let bytes = fork.to_fork_bytes().await.unwrap();
    for bad in [&b"not a fork"[..], &bytes[..bytes.len() / 2], &bytes[..10]] {
        let err = repo.fork_from_bytes(bad).await;
        assert!(matches!(err, Err(Error::InvalidFork { .. })), "{err:?}");
    }
    // A fork of another repository's snapshot.
    let (other, os) = repo_with_array().await;
    os.set_chunk(&p("/a"), &[0], v(1)).await.unwrap();
    let foreign = os.fork().await.unwrap().to_fork_bytes().await.unwrap();
    drop(other);
    assert!(matches!(
        repo.fork_from_bytes(&foreign).await,
        Err(Error::SnapshotNotFound { .. })
    ));
}

#[tokio::test]
async fn fork_bytes_carry_refs_and_no_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let storage = floe::storage::create_storage(&dir.path().display().to_string(), None).unwrap();
    let repo = Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[1], "uint8"))
        .unwrap();
    s.commit("setup").await.unwrap();
    let fork = s.fork().await.unwrap();
    fork.set_chunk(&p("/a"), &[0], Bytes::from(vec![7u8; 100_000]))
        .await
        .unwrap();
    let bytes = fork.to_fork_bytes().await.unwrap();
    // The chunk was written to storage when set: the fork carries its ref only.
    assert!(bytes.len() < 200, "{} bytes", bytes.len());
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains(&dir.path().display().to_string()));
    let back = repo.fork_from_bytes(&bytes).await.unwrap();
    assert_eq!(back.change_set(), fork.change_set());
    let meta = BTreeMap::new();
    s.merge([back]).await.unwrap();
    s.commit_with("merged", meta, Default::default())
        .await
        .unwrap();
}

/// Icechunk's `merge_sessions`: copies of one fork merge into one of them (on a
/// worker), then into the session. The session's uncommitted changes before forking
/// (an array created, then its metadata updated, as xarray's `to_zarr` does) are in
/// the copies' base, so chunks the copies write into that array do not conflict
/// with them.
#[tokio::test]
async fn copies_of_a_fork_merge_into_one_copy_then_into_the_session() {
    let (repo, s) = repo_with_array().await;
    s.add_array(&p("/fresh"), array_def("/fresh", &[4], &[1], "uint8"))
        .unwrap();
    s.update_array(&p("/fresh"), array_def("/fresh", &[4], &[1], "uint8"))
        .unwrap();
    s.update_array(&p("/a"), array_def("/a", &[8], &[1], "uint8"))
        .unwrap();
    let fork = s.fork().await.unwrap();
    let (w1, w2, w3) = (
        travel(&repo, &fork).await,
        travel(&repo, &fork).await,
        travel(&repo, &fork).await,
    );
    w1.set_chunk(&p("/fresh"), &[0], v(10)).await.unwrap();
    w2.set_chunk(&p("/fresh"), &[1], v(11)).await.unwrap();
    w3.set_chunk(&p("/a"), &[3], v(3)).await.unwrap();
    // Merged into the first copy, as merge_sessions does, then sent back.
    w1.merge(vec![travel(&repo, &w2).await, travel(&repo, &w3).await])
        .await
        .unwrap();
    s.merge(vec![travel(&repo, &w1).await]).await.unwrap();
    s.commit("merged copies").await.unwrap();
    let main = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(chunk(&main, "/fresh", 0).await, Some(v(10)));
    assert_eq!(chunk(&main, "/fresh", 1).await, Some(v(11)));
    assert_eq!(chunk(&main, "/a", 3).await, Some(v(3)));

    // Copies writing one chunk merged into a copy: the merged copy's write wins.
    let s = repo.writable_session("main").await.unwrap();
    let fork = s.fork().await.unwrap();
    let (w1, w2) = (travel(&repo, &fork).await, travel(&repo, &fork).await);
    w1.set_chunk(&p("/a"), &[5], v(1)).await.unwrap();
    w2.set_chunk(&p("/a"), &[5], v(2)).await.unwrap();
    w1.merge(vec![w2]).await.unwrap();
    assert_eq!(chunk(&w1, "/a", 5).await, Some(v(2)));
}

/// A byte-for-byte copy of `storage`'s objects in a new in-memory storage.
async fn byte_copy(storage: &Arc<dyn floe::storage::Storage>) -> Arc<dyn floe::storage::Storage> {
    let copy = new_in_memory_storage();
    for info in storage.list("").await.unwrap() {
        let bytes = storage.get(&info.key).await.unwrap().bytes;
        copy.put(&info.key, bytes).await.unwrap();
    }
    copy
}

/// A fork taken and written in a byte-for-byte copy of the repository (same snapshot
/// ids) refers to chunk objects that exist only in the copy: merging it into the
/// original is refused with `InvalidFork` and nothing is merged, so no commit can
/// point at a missing chunk. The same fork merges into the copy it came from.
#[tokio::test]
async fn a_fork_written_in_a_copy_of_the_repository_is_refused() {
    let (repo, s) = repo_with_array().await;
    let copy = byte_copy(repo.storage()).await;
    let copy_repo = Repository::open(Arc::clone(&copy)).await.unwrap();
    let there = copy_repo.writable_session("main").await.unwrap();
    let fork = there.fork().await.unwrap();
    // A native chunk (written to the copy's storage when set) and an inline one.
    fork.set_chunk(&p("/a"), &[0], v(5)).await.unwrap();
    fork.set_chunk(&p("/a"), &[1], Bytes::from_static(b"x"))
        .await
        .unwrap();
    let bytes = fork.to_fork_bytes().await.unwrap();

    let arrived = repo.fork_from_bytes(&bytes).await.unwrap();
    let e = s.merge([arrived]).await.unwrap_err();
    match &e {
        Error::InvalidFork { reason } => assert!(
            reason.contains("does not exist in this repository"),
            "{reason}"
        ),
        other => panic!("expected InvalidFork, got {other:?}"),
    }
    assert!(!s.has_uncommitted_changes(), "something was merged");
    // Merged into forks it is not checked yet; the session that commits refuses it.
    let local_fork = s.fork().await.unwrap();
    local_fork
        .merge([repo.fork_from_bytes(&bytes).await.unwrap()])
        .await
        .unwrap();
    let e = s.merge([local_fork]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidFork { .. }), "{e:?}");
    assert!(!s.has_uncommitted_changes(), "something was merged");

    // In the repository it was written in, it merges and commits.
    there
        .merge([copy_repo.fork_from_bytes(&bytes).await.unwrap()])
        .await
        .unwrap();
    there.commit("merged where it was written").await.unwrap();
    assert_eq!(chunk(&there, "/a", 0).await, Some(v(5)));
}

/// Fork bytes carry a checksum: every single-byte change and every truncation is
/// refused with `InvalidFork` before anything is decoded or merged.
#[tokio::test]
async fn damaged_fork_bytes_are_refused() {
    let (repo, s) = repo_with_array().await;
    let fork = s.fork().await.unwrap();
    fork.set_chunk(&p("/a"), &[0], v(9)).await.unwrap();
    fork.set_chunk(&p("/a"), &[1], Bytes::from_static(b"inline"))
        .await
        .unwrap();
    let bytes = fork.to_fork_bytes().await.unwrap();
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[i] ^= flip;
            let r = repo.fork_from_bytes(&bad).await;
            assert!(
                matches!(r, Err(Error::InvalidFork { .. })),
                "byte {i} ^ {flip:#04x} was accepted"
            );
        }
    }
    for len in 0..bytes.len() {
        let r = repo.fork_from_bytes(&bytes[..len]).await;
        assert!(
            matches!(r, Err(Error::InvalidFork { .. })),
            "truncated to {len} bytes was accepted"
        );
    }
    // The intact bytes still merge.
    s.merge([repo.fork_from_bytes(&bytes).await.unwrap()])
        .await
        .unwrap();
    assert_eq!(chunk(&s, "/a", 0).await, Some(v(9)));
}
