//! The library operations in `floe::ops`: a Zarr hierarchy imported from a memory
//! store into a session, committed, exported to a directory and read back; and the
//! typed refusals (node exists, array at the root, non-empty destination).

use std::sync::Arc;

use floe::ops::{export_zarr, import_zarr, OpsError};
use floe::storage::new_in_memory_storage;
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, FilesystemStore, MemoryStore, Store};
use floe::{NodePath, Repository, VersionSelector};

async fn source() -> Arc<dyn Store> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let a = ArrayBuilder::new(vec![6, 4], vec![4, 3], DataType::Int32)
        .fill_value(serde_json::json!(-1))
        .create(Arc::clone(&store), "g/a")
        .await
        .unwrap();
    let vals: Vec<i32> = (0..24).collect();
    a.write_region(&ArraySubset::from_ranges(&[0..6, 0..4]), &vals)
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn import_commit_export_round_trip() {
    let src = source().await;
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let dest = NodePath::new("/imported").unwrap();
    let reported = std::sync::Mutex::new(Vec::new());
    let progress = |done: u64, total: u64| reported.lock().unwrap().push((done, total));
    let summary = import_zarr(&session, src.as_ref(), &dest, Some(&progress))
        .await
        .unwrap();
    assert_eq!((summary.groups, summary.arrays, summary.chunks), (2, 1, 4));
    assert_eq!(reported.lock().unwrap().len(), 4);
    assert!(reported.lock().unwrap().iter().all(|&(_, t)| t == 4));
    session.commit("import").await.unwrap();

    // A second import to the same place is refused before anything is written.
    let again = repo.writable_session("main").await.unwrap();
    let err = import_zarr(&again, src.as_ref(), &dest, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OpsError::NodeExists { path } if *path == "/imported"),
        "{err}"
    );
    assert!(!again.has_uncommitted_changes());
    // An array cannot become the repository's root.
    let arr_only: Arc<dyn Store> = Arc::new(MemoryStore::new());
    ArrayBuilder::new(vec![2], vec![2], DataType::UInt8)
        .create(Arc::clone(&arr_only), "")
        .await
        .unwrap();
    let err = import_zarr(&again, arr_only.as_ref(), &NodePath::root(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, OpsError::RootIsArray), "{err}");

    // Export the committed tree and read the values through the plain store.
    let reader = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let summary = export_zarr(&reader, &out, None).await.unwrap();
    assert_eq!((summary.nodes, summary.arrays, summary.chunks), (4, 1, 4));
    let exported: Arc<dyn Store> = Arc::new(FilesystemStore::new(&out).unwrap());
    let a = Array::open(exported, "imported/g/a").await.unwrap();
    let got: Vec<i32> = a.read_all().await.unwrap();
    assert_eq!(got, (0..24).collect::<Vec<i32>>());

    // A non-empty destination is refused and left as it was.
    let err = export_zarr(&reader, &out, None).await.unwrap_err();
    assert!(
        matches!(&err, OpsError::DestinationNotEmpty { path } if path == &out),
        "{err}"
    );
    assert!(out.join("zarr.json").is_file());
}
