//! Ancestry: the history stream from branches, tags and snapshots, its read-ahead on
//! a local disk, and typed errors for missing or corrupt ancestors.

use crate::common;
use std::sync::Arc;

use crate::common::fixture::local;
use crate::common::{group_json, p};
use bytes::Bytes;
use floe::format::SnapshotId;
use floe::storage::Storage;
use floe::{Error, Repository, VersionSelector};

/// A new spec-1 repository (history read from the snapshot files) on `storage`
/// whose `main` has `commits` commits after the initial
/// snapshot, `commit {i}` setting the root group's attributes to `{"i": i}`; returns
/// it and the snapshot ids, oldest (the initial snapshot) first.
async fn attribute_history(
    storage: &Arc<dyn Storage>,
    commits: usize,
) -> (Repository, Vec<SnapshotId>) {
    let repo = common::create_spec1(Arc::clone(storage), None).await;
    let ids = commit_attributes(&repo, commits).await;
    (repo, ids)
}

/// Makes `commits` commits on `repo`'s `main` (new, with no root group), `commit
/// {i}` setting the root group's attributes to `{"i": i}`; returns the snapshot ids,
/// oldest (the one `main` named before) first.
async fn commit_attributes(repo: &Repository, commits: usize) -> Vec<SnapshotId> {
    let mut ids = vec![repo.lookup_branch("main").await.unwrap()];
    for i in 0..commits {
        let s = repo.writable_session("main").await.unwrap();
        let json = group_json(serde_json::json!({ "i": i }));
        if i == 0 {
            s.add_group(&p("/"), json).unwrap();
        } else {
            s.update_group(&p("/"), json).unwrap();
        }
        ids.push(s.commit(&format!("commit {i}")).await.unwrap());
    }
    ids
}

/// The messages of the newest `n` commits on `main`, through the ancestry stream.
async fn newest_messages(repo: &Repository, n: usize) -> Vec<String> {
    use futures::{StreamExt, TryStreamExt};
    repo.ancestry_stream(VersionSelector::Branch("main".into()))
        .take(n)
        .map_ok(|i| i.message)
        .try_collect()
        .await
        .unwrap()
}

/// The ancestry is a stream: its newest items need only the newest snapshot files
/// (spec 1), it starts from a branch, a tag or a snapshot id, and a missing older
/// snapshot is an error only for a reader that goes that far.
#[tokio::test]
async fn ancestry_streams_from_branches_tags_and_snapshots() {
    use futures::TryStreamExt;
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let (repo, ids) = attribute_history(&storage, 5).await;
    repo.create_tag("t", ids[3]).await.unwrap();
    let newest_first: Vec<SnapshotId> = ids.iter().rev().copied().collect();
    let all: Vec<_> = repo
        .ancestry_stream(VersionSelector::Branch("main".into()))
        .map_ok(|i| i.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all, newest_first);
    let from_tag: Vec<_> = repo
        .ancestry_stream(VersionSelector::Tag("t".into()))
        .map_ok(|i| i.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(from_tag, newest_first[2..]);

    // Remove the second-oldest snapshot file: the two newest still stream from a
    // fresh handle (no cache), the whole history fails with a typed error.
    storage
        .delete(&floe::format::keys::snapshot(&ids[1]))
        .await
        .unwrap();
    let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
    assert_eq!(newest_messages(&fresh, 2).await, ["commit 4", "commit 3"]);
    match fresh.ancestry(ids[5]).await {
        Err(Error::SnapshotNotFound { id }) => assert_eq!(id, ids[1]),
        other => panic!("a missing ancestor must be SnapshotNotFound, got {other:?}"),
    }
    match fresh
        .ancestry_stream(VersionSelector::Branch("nope".into()))
        .try_collect::<Vec<_>>()
        .await
    {
        Err(Error::BranchNotFound { name }) => assert_eq!(name, "nope"),
        other => panic!("an unknown branch must be BranchNotFound, got {other:?}"),
    }
}

/// On a local disk a spec-1 ancestry reads its snapshots ahead in batches (1, 2, 4,
/// ... files on one blocking thread): a history longer than several batches lists
/// in order, a fresh handle's `take(n)` works, and a missing or corrupt snapshot in
/// the middle of a batch is reported with its typed error, after the snapshots
/// before it.
#[tokio::test]
async fn ancestry_read_ahead_keeps_order_and_typed_errors() {
    use floe::format::FormatError;
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let (_, ids) = attribute_history(&storage, 140).await;
    let newest_first: Vec<SnapshotId> = ids.iter().rev().copied().collect();
    let fresh = || async { Repository::open(Arc::clone(&storage)).await.unwrap() };
    let all: Vec<_> = fresh()
        .await
        .ancestry(ids[140])
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(all, newest_first);
    assert_eq!(
        newest_messages(&fresh().await, 5).await,
        (135..140)
            .rev()
            .map(|i| format!("commit {i}"))
            .collect::<Vec<_>>()
    );

    // Snapshot 100 (in the batch of 64 that starts at the 64th newest) is missing,
    // then corrupt: the 40 newer snapshots stream first.
    let key = floe::format::keys::snapshot(&ids[100]);
    let saved = storage.get(&key).await.unwrap().bytes;
    storage.delete(&key).await.unwrap();
    let repo = fresh().await;
    let mut stream = std::pin::pin!(repo.ancestry_stream(VersionSelector::Snapshot(ids[140])));
    for expected in newest_first.iter().take(40) {
        assert_eq!(stream.next().await.unwrap().unwrap().id, *expected);
    }
    match stream.next().await {
        Some(Err(Error::SnapshotNotFound { id })) => assert_eq!(id, ids[100]),
        other => panic!("a missing ancestor must be SnapshotNotFound, got {other:?}"),
    }
    let mut corrupt = saved.to_vec();
    corrupt.truncate(20);
    storage.put(&key, Bytes::from(corrupt)).await.unwrap();
    match fresh().await.ancestry(ids[140]).await {
        Err(Error::Format(FormatError::Truncated { .. })) => {}
        other => panic!("a corrupt ancestor must be a format error, got {other:?}"),
    }
    // Restored, the whole history lists again.
    storage.put(&key, saved).await.unwrap();
    assert_eq!(fresh().await.ancestry(ids[140]).await.unwrap().len(), 141);
}

/// The ancestry of a snapshot id that names no snapshot file is `SnapshotNotFound`
/// for that id on spec 1, whether the walk reads ahead from a local disk or lists
/// `snapshots/` on storage without local files (object storage): the walk's first
/// read is the check.
#[tokio::test]
async fn ancestry_of_a_missing_snapshot_is_snapshot_not_found() {
    use floe::storage::fault::{Fault, FaultyStorage};
    use futures::TryStreamExt;
    let dir = tempfile::tempdir().unwrap();
    let object_like: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        floe::storage::new_in_memory_storage(),
        Box::new(|_, _| Fault::None),
    ));
    for storage in [local(&dir), object_like] {
        let (repo, ids) = attribute_history(&storage, 3).await;
        let missing = SnapshotId::random();
        let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
        match fresh.ancestry(missing).await {
            Err(Error::SnapshotNotFound { id }) => assert_eq!(id, missing),
            other => panic!("a missing snapshot must be SnapshotNotFound, got {other:?}"),
        }
        match fresh
            .ancestry_stream(VersionSelector::Snapshot(missing))
            .try_collect::<Vec<_>>()
            .await
        {
            Err(Error::SnapshotNotFound { id }) => assert_eq!(id, missing),
            other => panic!("a missing snapshot must be SnapshotNotFound, got {other:?}"),
        }
        // The history itself still lists whole.
        assert_eq!(repo.ancestry(ids[3]).await.unwrap().len(), 4);
    }
}

/// On spec 2 the `repo` object holds every parent link, so a walk of whole snapshots
/// fetches windows of ancestors together instead of one read after another: the
/// snapshots still come newest first, and a missing snapshot in the middle of a
/// window is `SnapshotNotFound` for it, after every snapshot newer than it.
///
/// Each snapshot read waits 20 ms, so reads one after another start at least 20 ms
/// apart; reads of one window start together.
#[tokio::test]
async fn spec2_walk_fetches_windows_of_ancestors_together() {
    use floe::assets::ParentWalk;
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    let inner = floe::storage::new_in_memory_storage();
    let starts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let recorded = Arc::clone(&starts);
    let storage: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        Arc::clone(&inner),
        Box::new(move |call, key| {
            if call == Call::Get && key.starts_with(floe::format::keys::SNAPSHOTS) {
                recorded.lock().unwrap().push(Instant::now());
                Fault::Delay(Duration::from_millis(20))
            } else {
                Fault::None
            }
        }),
    ));
    let repo = Repository::create(Arc::clone(&inner), None).await.unwrap();
    let ids = commit_attributes(&repo, 100).await;
    let newest_first: Vec<SnapshotId> = ids.iter().rev().copied().collect();

    let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
    let mut walk = ParentWalk::new(fresh.assets(), ids[100]);
    let mut walked = Vec::new();
    while let Some(snap) = walk.next().await.unwrap() {
        walked.push(snap.id);
    }
    assert_eq!(walked, newest_first);
    let mut at = starts.lock().unwrap().clone();
    assert_eq!(at.len(), 101, "each snapshot is read once");
    at.sort();
    let together = at
        .windows(2)
        .filter(|w| w[1] - w[0] < Duration::from_millis(10))
        .count();
    assert!(
        together >= 50,
        "most snapshot reads must start together with another, got {together} of 100"
    );

    // Snapshot 40 (inside a window) is missing: the 60 newer snapshots come first.
    inner
        .delete(&floe::format::keys::snapshot(&ids[40]))
        .await
        .unwrap();
    let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
    let mut walk = ParentWalk::new(fresh.assets(), ids[100]);
    for expected in newest_first.iter().take(60) {
        assert_eq!(walk.next().await.unwrap().unwrap().id, *expected);
    }
    match walk.next().await {
        Err(Error::SnapshotNotFound { id }) => assert_eq!(id, ids[40]),
        other => panic!("a missing ancestor must be SnapshotNotFound, got {other:?}"),
    }
}
