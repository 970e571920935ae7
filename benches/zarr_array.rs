//! Array write/read throughput on each store.
//!
//! - a float32 array of `FLOE_BENCH_MIB` MiB (default 256) in 1 MiB chunks,
//!   uncompressed (`bytes`) and `zstd`;
//! - 10,000 chunks of 4 KiB;
//! - the store API: `FLOE_BENCH_MIB` encoded 1 MiB chunks `set` into a fresh store
//!   (10 in flight; the first writes of a store, where directories are created), and
//!   read back with `get`.
//!
//! To benchmark another store, add one line to [`stores`].

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, FilesystemStore, MemoryStore, Store};
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

/// A store under test; `_guard` keeps temporary directories alive.
struct BenchStore {
    store: Arc<dyn Store>,
    _guard: Option<tempfile::TempDir>,
}

fn memory() -> BenchStore {
    BenchStore {
        store: Arc::new(MemoryStore::new()),
        _guard: None,
    }
}

fn filesystem() -> BenchStore {
    let dir = tempfile::tempdir().expect("tempdir");
    BenchStore {
        store: Arc::new(FilesystemStore::new(dir.path()).expect("fs store")),
        _guard: Some(dir),
    }
}

/// A writable session of a new repository on the local filesystem: writes become
/// native (or inline) chunk refs in the change set, reads go through the session.
fn repository() -> BenchStore {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = rt.block_on(async {
        let storage = Arc::new(floe::storage::LocalStorage::new(dir.path()).expect("storage"));
        let repo = floe::Repository::create(storage, None)
            .await
            .expect("repository");
        repo.writable_session("main")
            .await
            .expect("session")
            .store()
    });
    BenchStore {
        store: Arc::new(store),
        _guard: Some(dir),
    }
}

/// Makes a fresh store for one benchmark.
type MakeStore = fn() -> BenchStore;

/// The stores benchmarked: one line per store.
fn stores() -> Vec<(&'static str, MakeStore)> {
    vec![
        ("memory", memory),
        ("filesystem", filesystem),
        ("repository", repository),
    ]
}

fn codecs(name: &str) -> Vec<Value> {
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    match name {
        "zstd" => vec![
            bytes,
            json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}}),
        ],
        _ => vec![bytes],
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn big_arrays(c: &mut Criterion) {
    let mib: u64 = std::env::var("FLOE_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // Square-ish 2-d array of `mib` MiB in 512x512 float32 chunks (1 MiB each).
    let chunks_per_side = (mib as f64).sqrt().ceil() as u64;
    let rows_of_chunks = mib.div_ceil(chunks_per_side);
    let shape = vec![rows_of_chunks * 512, chunks_per_side * 512];
    let n = (shape[0] * shape[1]) as usize;
    // A smooth signal plus pseudo-random low-order noise: compressible, but not
    // trivially periodic.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<f32> = (0..n)
        .map(|i| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32;
            (i as f32 * 1e-4).sin() * 100.0 + noise
        })
        .collect();
    let full = ArraySubset::full(&shape);
    let rt = runtime();
    let mut group = c.benchmark_group(format!("f32_{}MiB_1MiB_chunks", (n * 4) >> 20));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Bytes((n * 4) as u64));
    for (store_name, make) in stores() {
        for codec in ["uncompressed", "zstd"] {
            let bs = make();
            let array: Array = rt.block_on(async {
                ArrayBuilder::new(shape.clone(), vec![512, 512], DataType::Float32)
                    .codecs(codecs(codec))
                    .create(bs.store.clone(), "bench")
                    .await
                    .expect("create")
            });
            let id = format!("{store_name}/{codec}");
            group.bench_function(BenchmarkId::new("write", &id), |b| {
                b.to_async(&rt)
                    .iter(|| async { array.write_region(&full, &data).await.expect("write") })
            });
            group.bench_function(BenchmarkId::new("read", &id), |b| {
                b.to_async(&rt).iter(|| async {
                    let v: Vec<f32> = array.read_region(&full).await.expect("read");
                    black_box(v)
                })
            });
        }
        // Chunks of whole rows (`[n / 1024 / 256 ... , 1024]` in 256 x 1024 chunks):
        // each chunk is one run of the caller's buffer, so zstd reads it in place
        // (no extraction copy) and each chunk is written by the thread that
        // compressed it.
        let bs = make();
        let rows = vec![(n as u64) / 1024, 1024];
        let array: Array = rt.block_on(async {
            ArrayBuilder::new(rows.clone(), vec![256, 1024], DataType::Float32)
                .codecs(codecs("zstd"))
                .create(bs.store.clone(), "rows")
                .await
                .expect("create")
        });
        let all_rows = ArraySubset::full(&rows);
        let id = format!("{store_name}/zstd_row_chunks");
        group.bench_function(BenchmarkId::new("write", &id), |b| {
            b.to_async(&rt)
                .iter(|| async { array.write_region(&all_rows, &data).await.expect("write") })
        });
    }
    group.finish();
}

fn small_chunks(c: &mut Criterion) {
    // 10,000 chunks of 1024 float32 (4 KiB each).
    let shape = vec![100 * 32, 100 * 32];
    let n = (shape[0] * shape[1]) as usize;
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let full = ArraySubset::full(&shape);
    let rt = runtime();
    let mut group = c.benchmark_group("f32_10000_chunks_of_4KiB");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(10_000));
    for (store_name, make) in stores() {
        let bs = make();
        let array: Array = rt.block_on(async {
            ArrayBuilder::new(shape.clone(), vec![32, 32], DataType::Float32)
                .codecs(codecs("uncompressed"))
                .create(bs.store.clone(), "small")
                .await
                .expect("create")
        });
        group.bench_function(BenchmarkId::new("write", store_name), |b| {
            b.to_async(&rt)
                .iter(|| async { array.write_region(&full, &data).await.expect("write") })
        });
        group.bench_function(BenchmarkId::new("read", store_name), |b| {
            b.to_async(&rt).iter(|| async {
                let v: Vec<f32> = array.read_region(&full).await.expect("read");
                black_box(v)
            })
        });
    }
    group.finish();
}

/// Store-API requests in flight.
const IN_FLIGHT: usize = 10;

/// `bs` with a `[mib * 256, 1024]` float32 array `raw` in chunks of `256 x 1024`
/// (1 MiB, `bytes` only); returns its chunk keys.
async fn raw_array(bs: &BenchStore, mib: u64) -> Vec<String> {
    let array = ArrayBuilder::new(vec![mib * 256, 1024], vec![256, 1024], DataType::Float32)
        .codecs(codecs("uncompressed"))
        .create(bs.store.clone(), "raw")
        .await
        .expect("create");
    (0..mib)
        .map(|i| array.chunk_key(&[i, 0]).expect("chunk key"))
        .collect()
}

async fn set_all(store: &Arc<dyn Store>, keys: &[String], chunks: &[bytes::Bytes]) {
    futures::stream::iter(
        keys.iter()
            .zip(chunks)
            .map(|(k, v)| store.set(k, v.clone())),
    )
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<()>>()
    .await
    .expect("set");
}

fn store_api(c: &mut Criterion) {
    let mib: u64 = std::env::var("FLOE_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let chunks: Vec<bytes::Bytes> = (0..mib)
        .map(|_| {
            let v: Vec<u8> = (0..1 << 20)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            bytes::Bytes::from(v)
        })
        .collect();
    let rt = runtime();
    let mut group = c.benchmark_group(format!("store_api_{mib}_chunks_of_1MiB"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Bytes(mib << 20));
    for (store_name, make) in stores() {
        group.bench_function(BenchmarkId::new("set_into_fresh_store", store_name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let bs = make();
                    let keys = rt.block_on(raw_array(&bs, mib));
                    let t = std::time::Instant::now();
                    rt.block_on(set_all(&bs.store, &keys, &chunks));
                    total += t.elapsed();
                }
                total
            })
        });
        let bs = make();
        let keys = rt.block_on(async {
            let keys = raw_array(&bs, mib).await;
            set_all(&bs.store, &keys, &chunks).await;
            keys
        });
        group.bench_function(BenchmarkId::new("get", store_name), |b| {
            b.to_async(&rt).iter(|| async {
                let got: Vec<Option<bytes::Bytes>> =
                    futures::stream::iter(keys.iter().map(|k| bs.store.get(k)))
                        .buffered(IN_FLIGHT)
                        .try_collect()
                        .await
                        .expect("get");
                black_box(got)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, big_arrays, small_chunks, store_api);
criterion_main!(benches);
