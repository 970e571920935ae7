//! The Zarr store view of a session: key mapping (zarr.json to node metadata, chunk
//! keys to chunk refs), listing, partial reads, read-only refusal, and the Zarr array
//! API working through it across commits.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use floe::storage::new_in_memory_storage;
use floe::zarr::{Array, ArrayBuilder, ArraySubset, ByteRange, DataType, Group, Store, StoreError};
use floe::{Repository, VersionSelector};
use serde_json::json;

async fn repo() -> Repository {
    Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap()
}

fn group_bytes() -> Bytes {
    Bytes::from_static(br#"{"zarr_format":3,"node_type":"group","attributes":{"a":1}}"#)
}

#[tokio::test]
async fn keys_map_to_nodes_and_chunks() {
    let repo = repo().await;
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.set("zarr.json", group_bytes()).await.unwrap();
    store.set("g/zarr.json", group_bytes()).await.unwrap();
    store
        .set(
            "g/arr/zarr.json",
            common::array_json(&[4, 4], &[2, 2], "uint8", json!(0)),
        )
        .await
        .unwrap();
    store
        .set("g/arr/c/0/1", Bytes::from_static(b"abcd"))
        .await
        .unwrap();
    store
        .set("g/arr/c/1/1", Bytes::from(vec![5u8; 2000]))
        .await
        .unwrap();
    // Keys that are neither metadata nor chunks of an array are refused.
    for bad in [
        "g/other",
        "g/arr/c/9/9",
        "g/arr/c/0",
        "g/arr/x/0/0",
        "/abs",
        "a//b",
    ] {
        let err = store.set(bad, Bytes::from_static(b"x")).await.unwrap_err();
        let ok = match &err {
            StoreError::InvalidKey { .. } => true,
            StoreError::Repository { source, .. } => {
                matches!(**source, floe::Error::InvalidChunkIndex { .. })
            }
            _ => false,
        };
        assert!(ok, "{bad}: {err}");
    }
    assert_eq!(
        store.get("g/arr/c/0/1").await.unwrap().unwrap(),
        Bytes::from_static(b"abcd")
    );
    assert_eq!(store.get("g/arr/c/0/0").await.unwrap(), None);
    assert_eq!(store.get("g/nope/zarr.json").await.unwrap(), None);
    assert_eq!(
        store.list().await.unwrap(),
        vec![
            "g/arr/c/0/1",
            "g/arr/c/1/1",
            "g/arr/zarr.json",
            "g/zarr.json",
            "zarr.json"
        ]
    );
    assert_eq!(
        store.list_prefix("g/arr/c/").await.unwrap(),
        vec!["g/arr/c/0/1", "g/arr/c/1/1"]
    );
    let root = store.list_dir("").await.unwrap();
    assert_eq!(root.keys, vec!["zarr.json"]);
    assert_eq!(root.prefixes, vec!["g/"]);
    let arr = store.list_dir("g/arr/").await.unwrap();
    assert_eq!(arr.keys, vec!["g/arr/zarr.json"]);
    assert_eq!(arr.prefixes, vec!["g/arr/c/"]);
    // Partial reads of inline and native chunks.
    let ranges = [
        ByteRange::FromStart {
            offset: 1,
            length: Some(2),
        },
        ByteRange::Suffix(1),
    ];
    let parts = store
        .get_partial_values("g/arr/c/0/1", &ranges)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        parts,
        vec![Bytes::from_static(b"bc"), Bytes::from_static(b"d")]
    );
    let parts = store
        .get_partial_values(
            "g/arr/c/1/1",
            &[ByteRange::FromStart {
                offset: 1990,
                length: None,
            }],
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(parts[0].len(), 10);
    assert!(matches!(
        store
            .get_partial_values(
                "g/arr/c/0/1",
                &[ByteRange::FromStart {
                    offset: 3,
                    length: Some(5)
                }]
            )
            .await,
        Err(StoreError::InvalidRange { .. })
    ));
    // Erasing a chunk and a node.
    store.erase("g/arr/c/0/1").await.unwrap();
    assert_eq!(store.get("g/arr/c/0/1").await.unwrap(), None);
    let id = s.commit("tree").await.unwrap();
    store.erase("g/zarr.json").await.unwrap();
    assert_eq!(store.list().await.unwrap(), vec!["zarr.json"]);
    s.commit("delete g").await.unwrap();

    // The older snapshot still has everything; a read-only store refuses writes.
    let old = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap()
        .store();
    assert_eq!(old.list().await.unwrap().len(), 4);
    assert!(!old.is_writable());
    assert!(matches!(
        old.set("zarr.json", group_bytes()).await,
        Err(StoreError::ReadOnly { .. })
    ));
    assert!(matches!(
        old.erase("zarr.json").await,
        Err(StoreError::ReadOnly { .. })
    ));
}

#[tokio::test]
async fn array_api_through_sessions_and_commits() {
    let repo = repo().await;
    let s = repo.writable_session("main").await.unwrap();
    let store: Arc<dyn Store> = Arc::new(s.store());
    Group::create(Arc::clone(&store), "", serde_json::Map::new())
        .await
        .unwrap();
    let codec_sets = vec![
        (
            "plain",
            vec![json!({"name": "bytes", "configuration": {"endian": "little"}})],
        ),
        (
            "zstd",
            vec![
                json!({"name": "bytes", "configuration": {"endian": "big"}}),
                json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}),
            ],
        ),
        (
            "sharded",
            vec![json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": [5, 5],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end"}})],
        ),
    ];
    let values: Vec<f32> = (0..30 * 20).map(|i| i as f32 * 0.5).collect();
    for (name, codecs) in &codec_sets {
        let a = ArrayBuilder::new(vec![30, 20], vec![10, 10], DataType::Float32)
            .codecs(codecs.clone())
            .fill_value(json!("NaN"))
            .create(Arc::clone(&store), name)
            .await
            .unwrap();
        a.write_region(&ArraySubset::full(&[30, 20]), &values)
            .await
            .unwrap();
    }
    let first = s.commit("three arrays").await.unwrap();
    // Overwrite a region of one array in a second commit.
    let a = Array::open(Arc::clone(&store), "sharded").await.unwrap();
    a.write_region(&ArraySubset::new(vec![3, 3], vec![2, 2]), &[-1.0f32; 4])
        .await
        .unwrap();
    let second = s.commit("patch").await.unwrap();

    for (snapshot, patched) in [(first, false), (second, true)] {
        let r = repo
            .readonly_session(&VersionSelector::Snapshot(snapshot))
            .await
            .unwrap();
        let rstore: Arc<dyn Store> = Arc::new(r.store());
        for (name, _) in &codec_sets {
            let a = Array::open(Arc::clone(&rstore), name).await.unwrap();
            let got: Vec<f32> = a.read_all().await.unwrap();
            let mut want = values.clone();
            if patched && *name == "sharded" {
                for (i, j) in [(3, 3), (3, 4), (4, 3), (4, 4)] {
                    want[i * 20 + j] = -1.0;
                }
            }
            assert_eq!(got, want, "{name} at {snapshot}");
            // A region inside one inner chunk of a shard.
            let part: Vec<f32> = a
                .read_region(&ArraySubset::new(vec![12, 13], vec![2, 2]))
                .await
                .unwrap();
            assert_eq!(
                part,
                vec![
                    want[12 * 20 + 13],
                    want[12 * 20 + 14],
                    want[13 * 20 + 13],
                    want[13 * 20 + 14]
                ]
            );
        }
    }
}

#[tokio::test]
async fn session_store_passes_the_zarr_store_conformance_suite() {
    let repo = Repository::create(floe::storage::new_in_memory_storage(), None)
        .await
        .unwrap();
    let session = repo.writable_session("main").await.unwrap();
    floe::zarr::store::conformance::zarr_store_conformance(&session.store()).await;
    // And what it wrote commits: the session is left with no node.
    assert!(session.list_nodes().is_empty());
}
