//! Bulk paths keep many requests in flight on object storage (a storage without the
//! blocking local-file capability): counted as the peak number of chunk writes in
//! flight at once, not timed.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::group_json;
use async_trait::async_trait;
use bytes::Bytes;
use floe::storage::{
    new_in_memory_storage, ObjectInfo, ObjectVersion, Storage, StorageResult, VersionedBytes,
    WriteOutcome,
};
use floe::zarr::store::Store;
use floe::zarr::{Array, ArraySubset};
use floe::Repository;

/// Object storage in miniature: every chunk write takes a while, and the peak
/// number of chunk writes in flight at once is recorded.
#[derive(Debug)]
struct InFlight {
    inner: Arc<dyn Storage>,
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl std::fmt::Display for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "in-flight({})", self.inner)
    }
}

impl InFlight {
    async fn chunk_write<T>(&self, key: &str, op: impl std::future::Future<Output = T>) -> T {
        if !key.starts_with("chunks/") {
            return op.await;
        }
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let out = op.await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

#[async_trait]
impl Storage for InFlight {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.chunk_write(key, self.inner.put(key, bytes)).await
    }
    async fn put_fresh(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        self.chunk_write(key, self.inner.put_fresh(key, bytes))
            .await
    }
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        self.chunk_write(key, self.inner.put_if_absent(key, bytes))
            .await
    }
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.inner.put_if_match(key, bytes, expected).await
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

/// The zarr.json of a float32 array of `n` chunks of `chunk` elements, zstd level 1.
fn zstd_array_json(n: u64, chunk: u64) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [n * chunk], "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0.0,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "zstd", "configuration": {"level": 1, "checksum": false}}],
            "attributes": {},
        }))
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_api_writes_keep_many_chunk_writes_in_flight() {
    let storage = Arc::new(InFlight {
        inner: new_in_memory_storage(),
        now: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
    });
    // One object per chunk (these compress below the packing threshold).
    let mut config = floe::format::config::RepositoryConfig::default();
    config
        .set_chunk_packing(Some(&floe::format::config::ChunkPackingConfig {
            mode: Some(floe::format::config::ChunkPackingMode::Disabled),
            ..Default::default()
        }))
        .unwrap();
    let repo = Repository::create(Arc::clone(&storage) as Arc<dyn Storage>, Some(config))
        .await
        .unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let store = session.store();
    store
        .set("zarr.json", group_json(serde_json::json!({})))
        .await
        .unwrap();
    // 64 chunks of 256 KiB: whole chunks encoded straight from the input.
    let (n, chunk) = (64u64, 65_536u64);
    store
        .set("a/zarr.json", zstd_array_json(n, chunk))
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let array = Array::open(Arc::clone(&store), "a").await.unwrap();
    let values: Vec<f32> = (0..n * chunk).map(|i| (i % 1000) as f32).collect();
    array
        .write_region(&ArraySubset::full(array.shape()), &values)
        .await
        .unwrap();
    let peak = storage.peak.load(Ordering::SeqCst);
    assert!(
        peak >= 8,
        "at most {peak} chunk writes were in flight at once"
    );
    session.commit("bulk").await.unwrap();
    let back: Vec<f32> = array.read_all().await.unwrap();
    assert_eq!(back, values);
}

/// The storage's one concurrency setting bounds its requests in flight: 32 reads at
/// once of an object storage limited to 4 requests, each read one simulated round
/// trip (object_store's `ThrottledStore` on a paused clock), take 8 round trips;
/// without the bound they take one.
#[tokio::test(start_paused = true)]
async fn object_storage_bounds_requests_in_flight() {
    use floe::storage::ObjectStorage;
    use object_store::throttle::{ThrottleConfig, ThrottledStore};
    const RTT: Duration = Duration::from_millis(100);
    let config = ThrottleConfig {
        wait_get_per_call: RTT,
        ..ThrottleConfig::default()
    };
    let store = Arc::new(ThrottledStore::new(
        object_store::memory::InMemory::new(),
        config,
    ));
    let unbounded = ObjectStorage::new(store.clone(), "", "memory://".into());
    assert_eq!(unbounded.max_concurrent_requests(), None);
    for i in 0..32 {
        unbounded
            .put(&format!("k{i}"), Bytes::from(vec![1u8; 8]))
            .await
            .unwrap();
    }
    let bounded = ObjectStorage::new(store, "", "memory://".into()).with_max_concurrent_requests(4);
    assert_eq!(bounded.max_concurrent_requests(), Some(4));
    for (storage, trips) in [(&unbounded, 1), (&bounded, 8)] {
        let start = tokio::time::Instant::now();
        let reads = (0..32).map(|i| async move { storage.get(&format!("k{i}")).await });
        for r in futures::future::join_all(reads).await {
            assert_eq!(r.unwrap().bytes.len(), 8);
        }
        assert_eq!(start.elapsed().as_millis() / RTT.as_millis(), trips);
    }
}

/// S3 storage bounds its requests by default, and by its option.
#[test]
fn s3_storage_has_one_concurrency_setting() {
    use floe::storage::{new_s3_storage, S3Options, DEFAULT_MAX_CONCURRENT_REQUESTS};
    let options = S3Options {
        endpoint: Some("http://127.0.0.1:9".into()),
        allow_http: true,
        force_path_style: true,
        access_key_id: Some("k".into()),
        secret_access_key: Some("s".into()),
        ..S3Options::default()
    };
    let s = new_s3_storage("b", "p", options.clone()).unwrap();
    assert_eq!(
        s.max_concurrent_requests(),
        Some(DEFAULT_MAX_CONCURRENT_REQUESTS)
    );
    let s = new_s3_storage(
        "b",
        "p",
        S3Options {
            max_concurrent_requests: Some(7),
            ..options
        },
    )
    .unwrap();
    assert_eq!(s.max_concurrent_requests(), Some(7));
}
