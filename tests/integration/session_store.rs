//! The Zarr store view of a session: key mapping (zarr.json to node metadata, chunk
//! keys to chunk refs), listing, partial reads, read-only refusal, and the Zarr array
//! API working through it across commits.

use crate::common;
use std::sync::Arc;

use bytes::Bytes;
use floe::storage::new_in_memory_storage;
use floe::zarr::chunk_key_encoding::{DefaultChunkKeyEncoding, Separator};
use floe::zarr::store::{ChunkKeys, ChunkPort, ReadInto, WriteNow};
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
            StoreError::Repository { .. } => matches!(
                err.repository_error(),
                Some(floe::Error::InvalidChunkIndex { .. })
            ),
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
    // In memory (chunks through `set` only) and on a local disk (chunks also
    // through the chunk port's `write_now`).
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn floe::storage::Storage> =
        Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    for storage in [floe::storage::new_in_memory_storage(), local] {
        let repo = Repository::create(storage, None).await.unwrap();
        let session = repo.writable_session("main").await.unwrap();
        floe::zarr::store::conformance::zarr_store_conformance(&session.store()).await;
        // And what it wrote commits: the session is left with no node.
        assert!(session.list_nodes().unwrap().is_empty());
    }
}

#[tokio::test]
async fn erase_prefix_deletes_committed_nodes_whole_and_chunks_by_prefix() {
    // A committed hierarchy: two arrays of 4 chunks each (the sibling `g/ab` shares
    // the text `g/a` with `g/a`), then erasing by prefix in new sessions.
    let repo = repo().await;
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.set("zarr.json", group_bytes()).await.unwrap();
    store.set("g/zarr.json", group_bytes()).await.unwrap();
    let array = common::array_json(&[4, 4], &[2, 2], "uint8", json!(0));
    for a in ["g/a", "g/ab"] {
        store
            .set(&format!("{a}/zarr.json"), array.clone())
            .await
            .unwrap();
        for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            store
                .set(
                    &format!("{a}/c/{i}/{j}"),
                    Bytes::from(vec![i * 2 + j + 1; 4]),
                )
                .await
                .unwrap();
        }
    }
    s.commit("hierarchy").await.unwrap();

    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.erase_prefix("g/a/c/1/").await.unwrap();
    store.erase_prefix("g/ab/").await.unwrap();
    let kept = [
        "g/a/c/0/0",
        "g/a/c/0/1",
        "g/a/zarr.json",
        "g/zarr.json",
        "zarr.json",
    ];
    assert_eq!(store.list().await.unwrap(), kept);
    let status = s.status();
    assert_eq!(status.deleted_arrays.len(), 1, "{status:?}");
    s.commit("erased").await.unwrap();
    let back = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap()
        .store();
    assert_eq!(back.list().await.unwrap(), kept);
    assert_eq!(
        back.get("g/a/c/0/1").await.unwrap(),
        Some(Bytes::from(vec![2u8; 4]))
    );

    // Everything, as zarr's `open_group(mode="w")` does; a node created again at a
    // deleted path starts without the old chunks.
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.erase_prefix("").await.unwrap();
    assert!(store.list().await.unwrap().is_empty());
    store.set("zarr.json", group_bytes()).await.unwrap();
    store.set("g/zarr.json", group_bytes()).await.unwrap();
    store.set("g/a/zarr.json", array.clone()).await.unwrap();
    assert_eq!(store.get("g/a/c/0/0").await.unwrap(), None);
    s.commit("recreated").await.unwrap();
    let back = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap()
        .store();
    assert_eq!(
        back.list().await.unwrap(),
        ["g/a/zarr.json", "g/zarr.json", "zarr.json"]
    );
}

/// A store over a session's store whose chunk port records which chunks were
/// written by the port's transfer step (`ChunkPort::write_now`, and on which thread)
/// and which with `ChunkPort::set`.
#[derive(Debug)]
struct Recording {
    inner: floe::SessionStore,
    blocking: Arc<std::sync::Mutex<Vec<(String, String)>>>,
    sets: Arc<std::sync::Mutex<Vec<String>>>,
}

#[derive(Debug)]
struct RecordingPort {
    inner: Arc<dyn ChunkPort>,
    blocking: Arc<std::sync::Mutex<Vec<(String, String)>>>,
    sets: Arc<std::sync::Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl ChunkPort for RecordingPort {
    fn key(&self, chunk: &[u64]) -> String {
        self.inner.key(chunk)
    }
    async fn get(&self, chunk: &[u64]) -> Result<Option<Bytes>, StoreError> {
        self.inner.get(chunk).await
    }
    async fn get_ranges(
        &self,
        chunk: &[u64],
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.inner.get_ranges(chunk, ranges).await
    }
    async fn set(&self, chunk: &[u64], bytes: Bytes) -> Result<(), StoreError> {
        self.sets.lock().unwrap().push(self.key(chunk));
        self.inner.set(chunk, bytes).await
    }
    async fn erase(&self, chunk: &[u64]) -> Result<(), StoreError> {
        self.inner.erase(chunk).await
    }
    fn write_now(&self, chunk: &[u64], bytes: Bytes) -> Result<WriteNow, StoreError> {
        let done = self.inner.write_now(chunk, bytes)?;
        if matches!(done, WriteNow::Written) {
            let thread = std::thread::current().name().unwrap_or("").to_string();
            self.blocking
                .lock()
                .unwrap()
                .push((self.key(chunk), thread));
        }
        Ok(done)
    }
}

#[async_trait::async_trait]
impl Store for Recording {
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        self.inner.get(key).await
    }
    async fn get_partial_values(
        &self,
        key: &str,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.inner.get_partial_values(key, ranges).await
    }
    async fn set(&self, key: &str, value: Bytes) -> Result<(), StoreError> {
        if !key.ends_with("zarr.json") {
            self.sets.lock().unwrap().push(key.to_string());
        }
        self.inner.set(key, value).await
    }
    fn chunk_port(&self, keys: &ChunkKeys) -> Option<Arc<dyn ChunkPort>> {
        Some(Arc::new(RecordingPort {
            inner: self.inner.chunk_port(keys)?,
            blocking: Arc::clone(&self.blocking),
            sets: Arc::clone(&self.sets),
        }))
    }
    async fn erase(&self, key: &str) -> Result<(), StoreError> {
        self.inner.erase(key).await
    }
    async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.list_prefix(prefix).await
    }
    async fn list_dir(&self, prefix: &str) -> Result<floe::zarr::ListDirResult, StoreError> {
        self.inner.list_dir(prefix).await
    }
}

/// The chunk port of the array at `prefix` (`"a/"`) of a session store, under the
/// default chunk key encoding.
fn port_of(store: &floe::SessionStore, prefix: &str) -> Arc<dyn ChunkPort> {
    store
        .chunk_port(&ChunkKeys {
            prefix: prefix.to_string(),
            encoding: Arc::new(DefaultChunkKeyEncoding {
                separator: Separator::Slash,
            }),
        })
        .expect("a session store has its own chunk port")
}

/// A store over a read-only session on `main`.
async fn main_store(repo: &Repository) -> Arc<dyn Store> {
    let session = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    Arc::new(session.store())
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// On a local disk, an array's chunks encoded on the compute pool (over 64 KiB) are
/// written by the thread that encoded them (`ChunkPort::write_now`), whole and
/// partial writes alike; small chunks, encoded on the executor, go through `set`;
/// everything commits and reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_chunks_are_written_from_the_encoding_thread_on_local_disks() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    let repo = Repository::create(storage, None).await.unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let recording = Arc::new(Recording {
        inner: session.store(),
        blocking: Default::default(),
        sets: Default::default(),
    });
    let store: Arc<dyn Store> = recording.clone();
    let zstd = vec![
        json!({"name": "bytes", "configuration": {"endian": "little"}}),
        json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}}),
    ];
    // Chunks of 2 x 32,768 float32 (256 KiB), four of them.
    let big = ArrayBuilder::new(vec![8, 32_768], vec![2, 32_768], DataType::Float32)
        .codecs(zstd.clone())
        .create(Arc::clone(&store), "big")
        .await
        .unwrap();
    let mut values: Vec<f32> = (0..8 * 32_768).map(|i| i as f32).collect();
    big.write_region(&ArraySubset::full(&[8, 32_768]), &values)
        .await
        .unwrap();
    // Half of chunk 1 rewritten (read, modify, write) and chunk 3 back to the fill
    // value (erased).
    let half: Vec<f32> = vec![-1.0; 32_768];
    big.write_region(&ArraySubset::new(vec![2, 0], vec![1, 32_768]), &half)
        .await
        .unwrap();
    values[2 * 32_768..3 * 32_768].copy_from_slice(&half);
    big.write_region(
        &ArraySubset::new(vec![6, 0], vec![2, 32_768]),
        &[0.0f32; 65_536],
    )
    .await
    .unwrap();
    values[6 * 32_768..].fill(0.0);
    // Chunks of 1,024 float32 (4 KiB), encoded in place.
    let small = ArrayBuilder::new(vec![4_096], vec![1_024], DataType::Float32)
        .codecs(zstd)
        .create(Arc::clone(&store), "small")
        .await
        .unwrap();
    let small_values: Vec<f32> = (0..4_096).map(|i| i as f32 + 0.5).collect();
    small
        .write_region(&ArraySubset::full(&[4_096]), &small_values)
        .await
        .unwrap();

    let blocking = recording.blocking.lock().unwrap().clone();
    assert_eq!(
        sorted(blocking.iter().map(|(k, _)| k.clone()).collect()),
        [
            "big/c/0/0",
            "big/c/1/0",
            "big/c/1/0",
            "big/c/2/0",
            "big/c/3/0"
        ],
        "every large chunk write, whole or partial, went through write_now"
    );
    for (key, thread) in &blocking {
        assert!(
            thread.starts_with("floe-compute-"),
            "{key} was written on {thread:?}, not on the compute pool that encoded it"
        );
    }
    assert_eq!(
        sorted(recording.sets.lock().unwrap().clone()),
        ["small/c/0", "small/c/1", "small/c/2", "small/c/3"],
        "small chunks went through set"
    );

    session.commit("chunks").await.unwrap();
    let store = main_store(&repo).await;
    let back: Vec<f32> = Array::open(Arc::clone(&store), "big")
        .await
        .unwrap()
        .read_all()
        .await
        .unwrap();
    assert!(back == values, "large chunks read back as written");
    let back: Vec<f32> = Array::open(store.clone(), "small")
        .await
        .unwrap()
        .read_all()
        .await
        .unwrap();
    assert_eq!(back, small_values);
    assert_eq!(
        store.get("big/c/3/0").await.unwrap(),
        None,
        "the all-fill chunk was erased"
    );
}

/// A session's chunk port writes a native chunk from the calling thread only where
/// the storage writes that way (local files), and hands the bytes back (writing and
/// recording nothing) elsewhere; inline chunks need no storage; refusals are typed
/// errors.
#[test]
fn write_now_writes_where_the_storage_can() {
    use floe::format::manifest::ChunkPayload;
    use floe::Error;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let big = Bytes::from(vec![7u8; 10_000]);
    let small = Bytes::from_static(b"tiny");
    let path = common::p("/a");

    // In memory: a native chunk is handed back, an inline one recorded.
    let repo = rt.block_on(repo());
    let session = rt.block_on(async {
        let s = repo.writable_session("main").await.unwrap();
        s.add_array(&path, common::array_def("/a", &[4], &[1], "uint8"))
            .unwrap();
        s
    });
    let port = port_of(&session.store(), "a/");
    match port.write_now(&[0], big.clone()).unwrap() {
        WriteNow::Elsewhere(b) => assert_eq!(b, big),
        WriteNow::Written => panic!("in-memory storage has no local files"),
    }
    assert_eq!(
        rt.block_on(session.get_chunk_ref(&path, &[0])).unwrap(),
        None
    );
    assert!(matches!(
        port.write_now(&[1], small.clone()).unwrap(),
        WriteNow::Written
    ));
    assert!(matches!(
        rt.block_on(session.get_chunk_ref(&path, &[1])).unwrap(),
        Some(ChunkPayload::Inline(b)) if b == small
    ));
    match port.write_now(&[9], small.clone()) {
        Err(e) => assert!(
            matches!(e.repository_error(), Some(Error::InvalidChunkIndex { .. })),
            "out-of-grid index: {e:?}"
        ),
        Ok(other) => panic!("out-of-grid index: {other:?}"),
    }
    let snapshot = rt.block_on(session.commit("inline")).unwrap();
    let readonly = rt
        .block_on(repo.readonly_session(&VersionSelector::Snapshot(snapshot)))
        .unwrap();
    match port_of(&readonly.store(), "a/").write_now(&[2], small) {
        Err(StoreError::ReadOnly { key }) => assert_eq!(key, "a/c/2"),
        other => panic!("read-only session: {other:?}"),
    }

    // On a local disk: the chunk object is written and its native ref recorded.
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    let repo = rt.block_on(Repository::create(storage, None)).unwrap();
    let session = rt.block_on(repo.writable_session("main")).unwrap();
    session
        .add_array(&path, common::array_def("/a", &[4], &[1], "uint8"))
        .unwrap();
    assert!(matches!(
        port_of(&session.store(), "a/")
            .write_now(&[3], big.clone())
            .unwrap(),
        WriteNow::Written
    ));
    match rt.block_on(session.get_chunk_ref(&path, &[3])).unwrap() {
        Some(ChunkPayload::Native(r)) => {
            assert_eq!(r.length, big.len() as u64);
            let file = dir.path().join("chunks").join(r.id.to_string());
            assert_eq!(std::fs::read(file).unwrap(), big);
        }
        other => panic!("expected a native ref, got {other:?}"),
    }
    rt.block_on(session.commit("native")).unwrap();
    let store = rt.block_on(main_store(&repo));
    assert_eq!(rt.block_on(store.get("a/c/3")).unwrap(), Some(big));
}

/// The port of a path with no array reads nothing and refuses writes, by index as
/// the key-value view does by key.
#[tokio::test]
async fn a_port_without_an_array_reads_nothing_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    let repo = Repository::create(storage, None).await.unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let store = session.store();
    store.set("zarr.json", group_bytes()).await.unwrap();
    let port = port_of(&store, "nothing/");
    assert_eq!(port.get(&[0]).await.unwrap(), None);
    let mut dest = [0u8; 4];
    assert_eq!(port.read_into(&[0], &mut dest).unwrap(), ReadInto::Missing);
    match port.write_now(&[0], group_bytes()) {
        Err(StoreError::InvalidKey { key, .. }) => assert_eq!(key, "nothing/c/0"),
        other => panic!("a write without an array: {other:?}"),
    }
    match port.set(&[0], group_bytes()).await {
        Err(StoreError::InvalidKey { key, .. }) => assert_eq!(key, "nothing/c/0"),
        other => panic!("a write without an array: {other:?}"),
    }
    port.erase(&[0]).await.unwrap();
}

/// A session's chunk port reads a chunk straight into a buffer when its ref is
/// known without I/O and its bytes are on a local disk (or inline): uncommitted
/// chunks at once, committed ones once the async step (`prepare`) fetched their
/// manifest; never-written chunks are `Missing`; wrong lengths and chunks on storage
/// without local files are `Elsewhere`.
#[tokio::test]
async fn session_ports_read_chunks_into_buffers_where_they_can() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    let repo = Repository::create(storage, None).await.unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let store = session.store();
    let big = Bytes::from((0..2000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let tiny = Bytes::from_static(b"xyz");
    write_two_chunks(&store, &big, &tiny).await;
    let into = |port: &Arc<dyn ChunkPort>, chunk: u64, len: usize| {
        let mut dest = vec![0u8; len];
        let got = port.read_into(&[chunk], &mut dest).unwrap();
        (got, dest)
    };
    // Uncommitted: native and inline.
    let port = port_of(&store, "a/");
    assert_eq!(into(&port, 0, big.len()), (ReadInto::Read, big.to_vec()));
    assert_eq!(into(&port, 1, 3), (ReadInto::Read, tiny.to_vec()));
    assert_eq!(into(&port, 2, 5), (ReadInto::Missing, vec![0; 5]));
    assert_eq!(
        into(&port, 0, big.len() + 1).0,
        ReadInto::Elsewhere,
        "wrong length"
    );
    session.commit("chunks").await.unwrap();

    // Committed: elsewhere until the async step fetched the manifest, then read.
    let readonly = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let port = port_of(&readonly.store(), "a/");
    assert_eq!(
        into(&port, 0, big.len()).0,
        ReadInto::Elsewhere,
        "manifest not read yet"
    );
    port.prepare(&ArraySubset::new(vec![0], vec![4]))
        .await
        .unwrap();
    assert_eq!(into(&port, 0, big.len()), (ReadInto::Read, big.to_vec()));
    assert_eq!(into(&port, 1, 3), (ReadInto::Read, tiny.to_vec()));
    assert_eq!(into(&port, 3, 1), (ReadInto::Missing, vec![0]));

    // A chunk file gone missing is a typed error, not a decline.
    for entry in std::fs::read_dir(dir.path().join("chunks")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let mut dest = vec![0u8; big.len()];
    match port.read_into(&[0], &mut dest) {
        Err(e) => assert!(
            matches!(
                e.repository_error(),
                Some(floe::Error::ChunkUnreadable { .. })
            ),
            "{e:?}"
        ),
        Ok(other) => panic!("a missing chunk file: {other:?}"),
    }

    // In memory: native chunks are elsewhere, inline ones read.
    let repo = repo_in_memory_with(&big, &tiny).await;
    let session = repo.writable_session("main").await.unwrap();
    let port = port_of(&session.store(), "a/");
    port.prepare(&ArraySubset::new(vec![0], vec![4]))
        .await
        .unwrap();
    assert_eq!(into(&port, 0, big.len()).0, ReadInto::Elsewhere);
    assert_eq!(into(&port, 1, 3), (ReadInto::Read, tiny.to_vec()));
}

/// Writes the root group and array `a` holding `big` at chunk 0 and `tiny` at 1.
async fn write_two_chunks(store: &floe::SessionStore, big: &Bytes, tiny: &Bytes) {
    store.set("zarr.json", group_bytes()).await.unwrap();
    store
        .set(
            "a/zarr.json",
            common::array_json(&[4], &[1], "uint8", json!(0)),
        )
        .await
        .unwrap();
    store.set("a/c/0", big.clone()).await.unwrap();
    store.set("a/c/1", tiny.clone()).await.unwrap();
}

/// An in-memory repository whose array `a` holds `big` at chunk 0 and `tiny` at 1.
async fn repo_in_memory_with(big: &Bytes, tiny: &Bytes) -> Repository {
    let repo = repo().await;
    let session = repo.writable_session("main").await.unwrap();
    write_two_chunks(&session.store(), big, tiny).await;
    session.commit("chunks").await.unwrap();
    repo
}

/// Icechunk's `exists`: present and absent keys answer, keys no Zarr v3 hierarchy has
/// are an invalid-key error (where `size` answers `None`).
#[tokio::test]
async fn exists_raises_for_keys_no_hierarchy_has() {
    let repo = repo().await;
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.set("zarr.json", group_bytes()).await.unwrap();
    store
        .set(
            "arr/zarr.json",
            common::array_json(&[4], &[2], "uint8", json!(0)),
        )
        .await
        .unwrap();
    store
        .set("arr/c/0", Bytes::from_static(b"ab"))
        .await
        .unwrap();
    for (key, expected) in [
        ("zarr.json", true),
        ("arr/zarr.json", true),
        ("arr/c/0", true),
        ("arr/c/1", false),
        ("arr/c", false),
        ("nope/zarr.json", false),
        ("nope/c/0/0", false),
        ("arr/.zarray", false),
    ] {
        assert_eq!(store.exists(key).await.unwrap(), expected, "{key}");
    }
    for bad in ["foo", "arr/c/x", "a//b", ""] {
        let r = store.exists(bad).await;
        assert!(
            matches!(r, Err(StoreError::InvalidKey { .. })),
            "{bad}: {r:?}"
        );
        // `size` keeps answering `None` for keys that are not there.
        if bad == "foo" {
            assert_eq!(store.size(bad).await.unwrap(), None);
        }
    }
}

#[tokio::test]
async fn set_if_not_exists_stores_once_and_never_overwrites() {
    let repo = repo().await;
    let session = repo.writable_session("main").await.unwrap();
    let store = session.store();
    assert!(store
        .set_if_not_exists("zarr.json", group_bytes())
        .await
        .unwrap());
    let first = common_array_json(7);
    assert!(store
        .set_if_not_exists("a/zarr.json", first.clone())
        .await
        .unwrap());
    // An existing node keeps its metadata.
    assert!(!store
        .set_if_not_exists("a/zarr.json", common_array_json(9))
        .await
        .unwrap());
    assert_eq!(store.get("a/zarr.json").await.unwrap(), Some(first.clone()));
    // ... and the value is not even parsed then (zarr's store tests write any bytes).
    assert!(!store
        .set_if_not_exists("a/zarr.json", Bytes::from_static(b"1111"))
        .await
        .unwrap());
    assert_eq!(store.get("a/zarr.json").await.unwrap(), Some(first));
    // Concurrent calls for one chunk: exactly one stores, and its bytes stay.
    let results = futures::future::join_all((0..8u8).map(|i| {
        let store = store.clone();
        async move {
            let won = store
                .set_if_not_exists("a/c/0", Bytes::from(vec![i; 4096]))
                .await
                .unwrap();
            (i, won)
        }
    }))
    .await;
    let winners: Vec<u8> = results
        .iter()
        .filter(|(_, w)| *w)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(
        store.get("a/c/0").await.unwrap(),
        Some(Bytes::from(vec![winners[0]; 4096]))
    );
    // A chunk committed before the session counts as present.
    session.commit("one chunk").await.unwrap();
    let next = repo.writable_session("main").await.unwrap();
    let store = next.store();
    assert!(!store
        .set_if_not_exists("a/c/0", Bytes::from(vec![99u8; 4096]))
        .await
        .unwrap());
    assert!(store
        .set_if_not_exists("a/c/1", Bytes::from(vec![5u8; 4096]))
        .await
        .unwrap());
    // A deleted chunk is absent.
    store.erase("a/c/0").await.unwrap();
    assert!(store
        .set_if_not_exists("a/c/0", Bytes::from(vec![6u8; 4096]))
        .await
        .unwrap());
    assert!(matches!(
        store
            .set_if_not_exists("nope", Bytes::from_static(b"x"))
            .await,
        Err(StoreError::InvalidKey { .. })
    ));
    let ro = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(matches!(
        ro.store()
            .set_if_not_exists("a/c/0", Bytes::from_static(b"x"))
            .await,
        Err(StoreError::ReadOnly { .. })
    ));
}

/// `zarr.json` of a uint8 array of 4 chunks of 4,096 bytes, with fill value `fill`.
fn common_array_json(fill: u8) -> Bytes {
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [16384], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4096]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    });
    Bytes::from(serde_json::to_vec(&meta).unwrap())
}

/// `set` in two halves: `prepare_set` stores a chunk's bytes and changes nothing in
/// the session (a prepared value dropped, as by a cancelled caller, never lands);
/// `finish_set` records it without I/O; a read-only store refuses it. `erase_loaded`
/// removes a key with no I/O once the session is loaded.
#[tokio::test]
async fn a_set_prepared_and_dropped_changes_nothing() {
    let repo = repo().await;
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.set("zarr.json", group_bytes()).await.unwrap();
    store
        .set(
            "a/zarr.json",
            common::array_json(&[4], &[2], "uint8", json!(0)),
        )
        .await
        .unwrap();
    s.commit("array").await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    // Large enough to be written as a native chunk object.
    let big = Bytes::from(vec![7u8; 4096]);
    let dropped = store.prepare_set("a/c/0", big.clone()).await.unwrap();
    assert_eq!(dropped.key(), "a/c/0");
    drop(dropped);
    assert!(
        !s.has_uncommitted_changes(),
        "a prepared set changed the session"
    );
    assert_eq!(store.get("a/c/0").await.unwrap(), None);
    let kept = store.prepare_set("a/c/1", big.clone()).await.unwrap();
    assert!(!s.has_uncommitted_changes());
    store.finish_set(kept).unwrap();
    assert_eq!(store.get("a/c/1").await.unwrap(), Some(big.clone()));
    // Metadata keys too.
    let doc = store.prepare_set("zarr.json", group_bytes()).await.unwrap();
    store.finish_set(doc).unwrap();
    // Bad keys are refused by the first half.
    assert!(matches!(
        store.prepare_set("a/c/9", big.clone()).await,
        Err(StoreError::InvalidKey { .. } | StoreError::Repository { .. })
    ));
    store.load().await.unwrap();
    store.erase_loaded("a/c/1").unwrap();
    assert_eq!(store.get("a/c/1").await.unwrap(), None);
    // A read-only session's store refuses the first half.
    let ro = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(matches!(
        ro.store().prepare_set("a/c/0", big).await,
        Err(StoreError::ReadOnly { .. })
    ));
}
