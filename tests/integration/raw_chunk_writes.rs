//! Uncompressed chunks written by the Array API from the caller's buffer: on a
//! local disk each whole chunk is written to its chunk file straight from the input
//! (`ChunkPort::write_now_borrowed`), elsewhere copied once; either way the
//! repository holds the same array, all-fill chunks are erased and a partial edge
//! chunk is written as usual.

use crate::common;
use std::sync::Arc;

use crate::common::fixture::local;
use floe::storage::fault::{Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, Storage};
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, Store};
use floe::{Repository, VersionSelector};

const ROWS: u64 = 100;
const COLS: u64 = 1024;

/// Rows 0..100 of 1024 float32; chunk 1 (rows 32..64) all fill value.
fn values() -> Vec<f32> {
    let mut v: Vec<f32> = (0..ROWS * COLS).map(|i| (i % 977) as f32 + 0.5).collect();
    v[(32 * COLS) as usize..(64 * COLS) as usize].fill(0.0);
    v
}

/// Writes the array (chunks of 32 rows: 128 KiB, so the compute pool encodes
/// them) to `storage`, commits, and returns the array as a fresh handle reads it.
async fn write_and_read(storage: Arc<dyn Storage>) -> Vec<f32> {
    let repo = common::create_spec1(Arc::clone(&storage), None).await;
    let session = repo.writable_session("main").await.unwrap();
    let store: Arc<dyn Store> = Arc::new(session.store());
    let array = ArrayBuilder::new(vec![ROWS, COLS], vec![32, COLS], DataType::Float32)
        .codecs(vec![
            serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}}),
        ])
        .create(store, "raw")
        .await
        .unwrap();
    array
        .write_region(&ArraySubset::full(&[ROWS, COLS]), &values())
        .await
        .unwrap();
    session.commit("raw").await.unwrap();
    let fresh = Repository::open(storage).await.unwrap();
    let s = fresh
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    Array::open(Arc::new(s.store()), "raw")
        .await
        .unwrap()
        .read_all()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_chunks_written_from_the_input_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let on_disk = write_and_read(local(&dir)).await;
    assert!(on_disk == values(), "local disk: reads back as written");
    // Chunks 0, 2 and 3 (the partial edge, rows 96..100) have files; chunk 1 was
    // all fill value and is erased.
    let files = std::fs::read_dir(dir.path().join("chunks"))
        .unwrap()
        .count();
    assert_eq!(files, 3);
    let object_like: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(|_, _| Fault::None),
    ));
    let elsewhere = write_and_read(object_like).await;
    assert!(
        elsewhere == values(),
        "object-like storage: reads back as written"
    );
}
