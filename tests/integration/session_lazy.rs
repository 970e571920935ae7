//! Writable sessions opened without their snapshot
//! (`Repository::writable_session_lazy`, Icechunk 2.3.0's behaviour): opening one
//! reads only the branch, the snapshot is read on first use, and a missing tip
//! snapshot is the error of that first use, naming the object.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::common::{array_json, group_json, p, write_small_array, write_u8_array};
use bytes::Bytes;
use floe::format::SpecVersion;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, StorageError};
use floe::zarr::{Array, ArrayMetadata, ArraySubset, Store, StoreError};
use floe::{Error, OpenOptions, Repository};

async fn repo(spec: SpecVersion) -> (Repository, Arc<dyn floe::storage::Storage>) {
    let storage = new_in_memory_storage();
    let repo = Repository::create_with(Arc::clone(&storage), None, spec, OpenOptions::default())
        .await
        .unwrap();
    (repo, storage)
}

/// The key `snapshots/{id}` the error names, when `e` is the storage's not-found.
fn missing_key(e: &Error) -> Option<&str> {
    match e {
        Error::Storage(StorageError::NotFound { key }) => Some(key),
        _ => None,
    }
}

#[tokio::test]
async fn a_missing_tip_snapshot_fails_the_first_use_not_the_open() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let (repo, storage) = repo(spec).await;
        let tip = repo.lookup_branch("main").await.unwrap();
        let key = format!("snapshots/{tip}");
        storage.delete(&key).await.unwrap();
        let repo = Repository::open(Arc::clone(&storage)).await.unwrap();

        // The eager session reports the missing snapshot when it opens.
        match repo.writable_session("main").await {
            Err(Error::SnapshotNotFound { id }) => assert_eq!(id, tip),
            other => panic!("spec {spec}: expected SnapshotNotFound, got {other:?}"),
        }

        let session = repo.writable_session_lazy("main").await.unwrap();
        assert_eq!(session.snapshot_id(), tip);
        assert_eq!(session.branch(), Some("main"));
        assert!(!session.has_uncommitted_changes());
        // Synchronous node methods need the snapshot read first.
        assert!(matches!(
            session.get_node(&p("/")),
            Err(Error::SessionNotLoaded)
        ));
        assert!(matches!(session.list_nodes(), Err(Error::SessionNotLoaded)));
        assert!(matches!(
            session.add_group(&p("/g"), group_json(serde_json::json!({}))),
            Err(Error::SessionNotLoaded)
        ));

        // The first store call reads the snapshot and reports the missing object.
        let store = session.store();
        let e = store
            .set("zarr.json", group_json(serde_json::json!({})))
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Repository { .. }), "{e:?}");
        assert_eq!(
            e.repository_error().and_then(missing_key),
            Some(key.as_str()),
            "spec {spec}"
        );
        let e = session.load().await.unwrap_err();
        assert_eq!(missing_key(&e), Some(key.as_str()));
        // The commit reads it too.
        let e = session.commit("x").await.unwrap_err();
        assert_eq!(missing_key(&e), Some(key.as_str()));
        // A batch read reports it on its first key and nothing is lost quietly.
        let got: Vec<_> = store
            .get_many(vec!["zarr.json".into(), "a/c/0".into()], 4)
            .collect()
            .await;
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|(_, r)| r.is_err()));
        assert!(!session.has_uncommitted_changes());
    }
}

#[tokio::test]
async fn a_lazy_session_reads_writes_and_commits_like_an_eager_one() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let (repo, _storage) = repo(spec).await;
        let eager = repo.writable_session("main").await.unwrap();
        write_small_array(&eager.store(), 7, Bytes::from(vec![1u8, 2, 3, 4])).await;
        let first = eager.commit("first").await.unwrap();

        // The Array API before the snapshot is read: the chunk port cannot know the
        // array yet, so chunks go through the store's keys, which read it.
        let session = repo.writable_session_lazy("main").await.unwrap();
        assert_eq!(session.snapshot_id(), first);
        let meta_json: serde_json::Value =
            serde_json::from_slice(&array_json(&[8], &[4], "uint8", serde_json::json!(7))).unwrap();
        let meta = ArrayMetadata::from_json(&meta_json).unwrap();
        let store: Arc<dyn Store> = Arc::new(session.store());
        let array = Array::from_metadata(
            Arc::clone(&store),
            "a",
            meta,
            floe::zarr::node::ZarrFormat::V3,
        )
        .unwrap();
        let all = ArraySubset::new(vec![0], vec![8]);
        let values: Vec<u8> = array.read_region(&all).await.unwrap();
        assert_eq!(values, [1, 2, 3, 4, 7, 7, 7, 7], "spec {spec}");
        // Now read: the node methods answer.
        assert_eq!(session.list_nodes().unwrap().len(), 2);
        assert!(session.get_node(&p("/a")).unwrap().array().is_some());

        array
            .write_region(&ArraySubset::new(vec![4], vec![4]), &[9u8, 9, 9, 9])
            .await
            .unwrap();
        let second = session.commit("second").await.unwrap();
        assert_ne!(second, first);
        let check = repo
            .readonly_session(&floe::VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        let a = Array::open(Arc::new(check.store()), "a").await.unwrap();
        let values: Vec<u8> = a.read_region(&all).await.unwrap();
        assert_eq!(values, [1, 2, 3, 4, 9, 9, 9, 9]);
    }
}

#[tokio::test]
async fn concurrent_first_uses_share_one_snapshot_read() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let (repo, storage) = repo(spec).await;
        let tip = repo.lookup_branch("main").await.unwrap();
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&reads);
        let key = format!("snapshots/{tip}");
        let watched: Arc<dyn floe::storage::Storage> = Arc::new(FaultyStorage::new(
            storage,
            Box::new(move |call, k| {
                if k == key && matches!(call, Call::Get | Call::GetRange) {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                Fault::Delay(Duration::from_millis(20))
            }),
        ));
        let repo = Repository::open(watched).await.unwrap();
        let session = repo.writable_session_lazy("main").await.unwrap();
        let store = session.store();
        let results = futures::future::join_all((0..8).map(|i| {
            let store = store.clone();
            async move { store.exists(&format!("g{i}/zarr.json")).await }
        }))
        .await;
        assert!(results.into_iter().all(|r| matches!(r, Ok(false))));
        assert!(matches!(
            session.get_node(&p("/x")),
            Err(Error::NodeNotFound { .. })
        ));
        assert_eq!(reads.load(Ordering::SeqCst), 1, "spec {spec}");
    }
}

/// `SessionStore::get_now` and `set_metadata_now` answer metadata keys without I/O:
/// on a lazy session whose snapshot is in the repository's cache (loading it from
/// there, `Session::load_now`), never for chunk keys, and not when the snapshot must
/// be read (then the awaited `get` reads it, and they answer afterwards).
#[tokio::test]
async fn metadata_keys_are_answered_at_once_from_a_cached_snapshot() {
    let (repo, storage) = repo(SpecVersion::V1).await;
    let session = repo.writable_session("main").await.unwrap();
    let store = session.store();
    write_u8_array(&store, 8, 0).await;
    store.set("a/c/0", Bytes::from(vec![1u8; 4])).await.unwrap();
    session.commit("tree").await.unwrap();

    // Committed by this handle: the tip snapshot is cached.
    let lazy = repo.writable_session_lazy("main").await.unwrap();
    let store = lazy.store();
    match store.get_now("a/zarr.json") {
        Some(Ok(Some(doc))) => {
            assert_eq!(doc, array_json(&[8], &[4], "uint8", serde_json::json!(0)))
        }
        other => panic!("expected the document at once, got {other:?}"),
    }
    assert!(matches!(store.get_now("nope/zarr.json"), Some(Ok(None))));
    assert!(store.get_now("a/c/0").is_none(), "a chunk key needs I/O");
    assert!(matches!(
        store.get_now("a//zarr.json"),
        Some(Err(StoreError::InvalidKey { .. }))
    ));
    assert!(store.set_metadata_now("a/c/0", Bytes::new()).is_none());
    assert!(matches!(
        store.set_metadata_now("g/zarr.json", group_json(serde_json::json!({}))),
        Some(Ok(()))
    ));
    assert!(lazy.get_node(&p("/g")).unwrap().is_group());

    // Another handle has nothing cached: the snapshot must be read first.
    let cold = Repository::open(Arc::clone(&storage)).await.unwrap();
    let lazy = cold.writable_session_lazy("main").await.unwrap();
    let store = lazy.store();
    assert!(store.get_now("zarr.json").is_none());
    assert!(store
        .set_metadata_now("g/zarr.json", group_json(serde_json::json!({})))
        .is_none());
    assert!(matches!(
        lazy.get_node(&p("/")),
        Err(Error::SessionNotLoaded)
    ));
    assert_eq!(
        store.get("zarr.json").await.unwrap(),
        Some(group_json(serde_json::json!({})))
    );
    assert!(matches!(store.get_now("zarr.json"), Some(Ok(Some(_)))));

    // A read-only session answers gets and refuses metadata writes.
    let ro = repo
        .readonly_session(&floe::VersionSelector::Branch("main".into()))
        .await
        .unwrap()
        .store();
    assert!(matches!(
        ro.set_metadata_now("g/zarr.json", group_json(serde_json::json!({}))),
        Some(Err(StoreError::ReadOnly { .. }))
    ));
}
