//! Reads of many small pieces of one object, where each request costs latency
//! (Icechunk issue #1316): nearby byte ranges are read with one request.
//!
//! - `shard_225_inner_chunks`: a 120x120 region of one 128x128 u32 shard of 8x8 inner
//!   chunks (225 of its 256 inner chunks, partial decode), from a repository whose
//!   storage answers every read after 5 ms;
//! - `virtual_1024_chunks_of_4KiB`: 1,024 virtual chunks of 4 KiB back to back in one
//!   file, read as one region, from a local HTTP server answering after 5 ms, and from
//!   a local file (no latency: what coalescing costs or saves on a local disk).
//!
//! The latency is `FLOE_BENCH_LATENCY_MS` (default 5).

#[path = "../tests/common/http.rs"]
mod http;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::format::NodePath;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, Storage};
use floe::virtual_refs::VirtualAccess;
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, Store};
use floe::{OpenOptions, Repository, VersionSelector};
use serde_json::json;

fn latency() -> Duration {
    let ms = std::env::var("FLOE_BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    Duration::from_millis(ms)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// In-memory storage whose reads answer after `delay`.
fn slow_storage(delay: Duration) -> Arc<dyn Storage> {
    Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(move |call, _| match call {
            Call::Get | Call::GetRange | Call::Head => Fault::Delay(delay),
            _ => Fault::None,
        }),
    ))
}

fn shard(c: &mut Criterion) {
    let rt = runtime();
    let delay = latency();
    let array = rt.block_on(async {
        let repo = Repository::create(slow_storage(delay), None)
            .await
            .expect("repository");
        let s = repo.writable_session("main").await.expect("session");
        let a = ArrayBuilder::new(vec![128, 128], vec![128, 128], DataType::UInt32)
            .codecs(vec![json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": [8, 8],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end"
            }})])
            .create(Arc::new(s.store()), "a")
            .await
            .expect("create");
        let vals: Vec<u32> = (0..128 * 128).collect();
        a.write_region(&ArraySubset::full(&[128, 128]), &vals)
            .await
            .expect("write");
        s.commit("shard").await.expect("commit");
        let r = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .expect("reader");
        let store: Arc<dyn Store> = Arc::new(r.store());
        Array::open(store, "a").await.expect("open")
    });
    let region = ArraySubset::new(vec![0, 0], vec![120, 120]);
    let mut group = c.benchmark_group("shard_225_inner_chunks");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(225));
    group.bench_function(
        BenchmarkId::new("read", format!("{}ms", delay.as_millis())),
        |b| {
            b.to_async(&rt).iter(|| async {
                let v: Vec<u32> = array.read_region(&region).await.expect("read");
                black_box(v)
            })
        },
    );
    group.finish();
}

/// An array `/v` of `n` uint8 chunks of `len` bytes, chunk `i` at byte `i * len` of
/// `url`, in a repository with a container for `prefix`, read by a reader who
/// authorizes `prefix`.
async fn virtual_array(prefix: &str, url: &str, n: u64, len: u64) -> Array {
    let mut config = RepositoryConfig::default();
    let store = match prefix.strip_prefix("file://") {
        Some(path) => ContainerStore::LocalFileSystem(path.to_string()),
        None => ContainerStore::Http,
    };
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store,
    });
    let storage = new_in_memory_storage();
    let repo = Repository::create(Arc::clone(&storage), Some(config))
        .await
        .expect("repository");
    let s = repo.writable_session("main").await.expect("session");
    ArrayBuilder::new(vec![n * len], vec![len], DataType::UInt8)
        .codecs(vec![json!({"name": "bytes"})])
        .create(Arc::new(s.store()), "v")
        .await
        .expect("create");
    let path = NodePath::new("/v").expect("path");
    for i in 0..n {
        let payload = ChunkPayload::Virtual(VirtualChunkRef {
            location: url.to_string(),
            offset: i * len,
            length: len,
            checksum: None,
        });
        s.set_chunk_ref(&path, &[i], Some(payload))
            .expect("chunk ref");
    }
    s.commit("virtual").await.expect("commit");
    let access = VirtualAccess::prefixes([prefix]).expect("prefix");
    let repo = Repository::open_with(storage, OpenOptions::default().virtual_access(access))
        .await
        .expect("open");
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .expect("reader");
    let store: Arc<dyn Store> = Arc::new(r.store());
    Array::open(store, "v").await.expect("open array")
}

fn virtual_chunks(c: &mut Criterion) {
    const N: u64 = 1024;
    const LEN: u64 = 4096;
    let rt = runtime();
    let delay = latency();
    let body: Vec<u8> = (0..N * LEN).map(|i| (i % 251) as u8).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    std::fs::write(root.join("file.nc"), &body).expect("write file");
    let served = body.clone();
    let (server, http_array, local_array) = rt.block_on(async {
        let server = http::server_with_delay(
            Arc::new(move |m, path, r| match path {
                "/data/file.nc" => http::content(m, &served, r),
                _ => http::not_found(),
            }),
            delay,
        )
        .await;
        let base = format!("http://{}/data/", server.addr);
        let http_array = virtual_array(&base, &format!("{base}file.nc"), N, LEN).await;
        let prefix = format!("file://{}/", root.display());
        let local_array = virtual_array(&prefix, &format!("{prefix}file.nc"), N, LEN).await;
        (server, http_array, local_array)
    });
    let mut group = c.benchmark_group("virtual_1024_chunks_of_4KiB");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes(N * LEN));
    for (name, array) in [
        (format!("http_{}ms", delay.as_millis()), &http_array),
        ("local_file".to_string(), &local_array),
    ] {
        server.clear();
        let v: Vec<u8> = rt.block_on(array.read_all()).expect("read");
        assert!(v == body, "the chunks' bytes");
        eprintln!("{name}: {} HTTP requests per read", server.gets().len());
        group.bench_function(BenchmarkId::new("read", name), |b| {
            b.to_async(&rt).iter(|| async {
                let v: Vec<u8> = array.read_all().await.expect("read");
                black_box(v)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, shard, virtual_chunks);
criterion_main!(benches);
