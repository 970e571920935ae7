//! End-to-end workloads through floe's Rust API, for a side-by-side comparison with
//! Icechunk (see `benches/compare_engines.py`, which runs the same workloads
//! through zarr-python on Icechunk 2.3.0 and 1.1.21 and prints the ratios).
//!
//! Not a criterion bench: every workload runs `--runs` times, each time on a fresh
//! spec-1 repository on the local filesystem (in a temporary directory, default
//! options), and the program prints ONE JSON line to stdout,
//! `{"engine":"floe","mib":N,"runs":R,"<workload>_s":median_seconds,...}`.
//!
//! ```text
//! cargo bench --bench workloads -- [--mib 256] [--runs 3] [--workload NAME[,NAME...]]
//!     [--data FILE]
//!     [--scratch DIR]
//! ```
//!
//! Repositories and files go into new directories under `--scratch DIR` (default: a
//! temporary directory), and none is deleted before the program ends: ext4 creates
//! files slowly right after many were deleted, and a run must not pay for the
//! previous one's clean-up. With `--scratch`, the caller removes the directory.
//!
//! Workloads (the same names are used on the Icechunk side):
//!
//! - `attr_commit`: 100 commits that each change only the root group's attributes
//!   (`zarr.json` set through the store API, then commit); the median single commit.
//! - `commit_10k_refs`: an array of 10,000 one-byte chunks, all written; only the
//!   commit is timed.
//! - `write_zstd_commit`: `--mib` MiB of float32 (`[rows, 1024]`, 1 MiB chunks of
//!   `256 x 1024`, `bytes` + `zstd` level 3) written through the Array API, plus the
//!   commit.
//! - `store_write_commit`: the same compressed chunks (encoded before timing) set
//!   through the Zarr store API, 10 sets in flight, plus the commit.
//! - `read_store` / `read_array`: an uncompressed (`bytes` only) `--mib` MiB float32
//!   array, written and committed untimed, read back from a read-only session
//!   through the store API (every chunk key, 10 gets in flight) / through the Array
//!   API (open the array, read it whole).
//! - `read_zstd_array`: the zstd array of `write_zstd_commit`, written and committed
//!   untimed, read whole through the Array API from a read-only session.
//! - `ancestry_2001_cold`: on a branch of 2,001 commits (the root group, then
//!   attribute changes), open the repository fresh (new storage handle, new
//!   `Repository`) and list the whole ancestry of `main`.
//! - `small_write_commit` / `small_read`: 10,000 chunks of 4 KiB (a 1-D float32
//!   array of `0, 1, 2, ...`, uncompressed) written through the Array API plus the
//!   commit / read back whole through the Array API from a read-only session.
//! - `cold_open`: a repository of 1,000 small arrays (one chunk each, one commit);
//!   open it fresh, take a read-only session on `main`, open one array and read its
//!   chunk; the median of 20 such opens.
//! - `concurrent_commits`: 8 writer processes (this executable with `--writer`), each
//!   with its own repository handle, make 10 commits each to `main` at once, each
//!   commit writing its own element of a shared array and rebasing when the branch
//!   moved; timed from the start signal until every writer is done. The JSON line
//!   also reports `concurrent_commits_failed` (commits that returned an error) and
//!   `concurrent_commits_lost` (commits that returned success but are missing from
//!   the history, or whose value is not in the array), summed over the runs.
//! - `ancestry_2001_cold_spec2`: the same on a spec-2 repository (Icechunk 2.x only:
//!   1.x cannot read spec 2).
//! - `write_raw_commit`: the same uncompressed (`bytes` only), plus the commit.
//! - `sharded_write_commit` / `sharded_read` / `sharded_read_inner`: the first 32 MiB
//!   of the data as a sharded array (1 MiB shards of `256 x 1024`, inner chunks of
//!   `1 x 1024` (4 KiB), uncompressed, index `bytes` + `crc32c` at the end, as
//!   zarr-python writes it) written + committed / read whole / one inner chunk read
//!   from each shard (32 reads of one row).
//! - `dataset_write_commit` / `dataset_read_mean`: 4 arrays of `--mib` / 4 MiB each
//!   (random normal float32, 1 MiB chunks, `bytes` + `zstd` level 0, as xarray's
//!   `to_zarr` writes them through zarr-python) written + committed / read whole
//!   and averaged, each array's mean (floe's side of `compare_pipeline.py`'s xarray
//!   rows, without xarray).
//! - `floor_zstd_write` (floe's side only): the floor of `write_zstd_commit`, the
//!   same chunks compressed with zstd level 3 on one thread per core and written
//!   with plain `std::fs`, without a repository.
//! - `floor_write` / `floor_read` (floe's side only): the page-cache floor of the
//!   store-API rows, the same chunk files written (the compressed chunks) and read
//!   back (the uncompressed ones) with plain `std::fs`, 10 at a time, in one
//!   directory, without a repository.
//!
//! The float32 data is random normal from a fixed seed; `--data FILE` reads it from
//! a file of little-endian float32 instead (exactly `--mib` MiB; the comparison
//! script passes the data numpy generated, so both engines see the same bytes).
//! Everything read back is checked against what was written.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe::format::SpecVersion;
use floe::storage::{LocalStorage, Storage};
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, MemoryStore, Store};
use floe::{OpenOptions, Repository, VersionSelector};
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

/// The workloads, in the order they run.
const WORKLOADS: [&str; 22] = [
    "attr_commit",
    "commit_10k_refs",
    "write_zstd_commit",
    "write_raw_commit",
    "store_write_commit",
    "read_store",
    "read_array",
    "read_zstd_array",
    "small_write_commit",
    "small_read",
    "cold_open",
    "concurrent_commits",
    "ancestry_2001_cold",
    "ancestry_2001_cold_spec2",
    "floor_zstd_write",
    "floor_write",
    "floor_read",
    "sharded_write_commit",
    "sharded_read",
    "sharded_read_inner",
    "dataset_write_commit",
    "dataset_read_mean",
];

/// MiB of the sharded array (`sharded_*`), 1 MiB shards of 4 KiB inner chunks; the
/// first rows of the `--mib` data.
const SHARD_MIB: u64 = 32;
/// Variables of the `dataset_*` workloads (each `--mib` / 4 MiB).
const VARIABLES: u64 = 4;

/// Chunks of `small_write_commit` / `small_read`, and elements per chunk (4 KiB).
const SMALL_CHUNKS: u64 = 10_000;
const SMALL_CHUNK_LEN: u64 = 1_024;
/// Arrays in the `cold_open` repository, and opens timed per run.
const COLD_ARRAYS: usize = 1_000;
const COLD_OPENS: usize = 20;
/// Writer processes of `concurrent_commits` and commits each makes.
const WRITERS: usize = 8;
const COMMITS_PER_WRITER: usize = 10;

/// Columns of the 2-D float32 arrays; a chunk is `CHUNK_ROWS x COLS` (1 MiB).
const COLS: u64 = 1024;
const CHUNK_ROWS: u64 = 256;
/// Store-API requests in flight.
const IN_FLIGHT: usize = 10;

/// Command-line arguments.
struct Args {
    mib: u64,
    runs: usize,
    workload: Option<String>,
    data: Option<PathBuf>,
    scratch: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        mib: 256,
        runs: 3,
        workload: None,
        data: None,
        scratch: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match arg.as_str() {
            "--mib" => args.mib = value("--mib").parse().expect("--mib: a whole number"),
            "--runs" => args.runs = value("--runs").parse().expect("--runs: a whole number"),
            "--workload" => args.workload = Some(value("--workload")),
            "--data" => args.data = Some(PathBuf::from(value("--data"))),
            "--scratch" => args.scratch = Some(PathBuf::from(value("--scratch"))),
            // What `cargo bench` passes (`--bench`, filters) is ignored.
            other => eprintln!("workloads: ignoring argument {other:?}"),
        }
    }
    assert!(args.mib > 0, "--mib must be at least 1");
    assert!(args.runs > 0, "--runs must be at least 1");
    if let Some(only) = &args.workload {
        for w in only.split(',') {
            assert!(
                WORKLOADS.contains(&w),
                "unknown workload {w:?}; one of {WORKLOADS:?}"
            );
        }
    }
    args
}

/// The float32 test data: `mib` MiB, shape `[mib * 256, 1024]`.
struct Data {
    shape: Vec<u64>,
    values: Vec<f32>,
}

impl Data {
    fn load(mib: u64, file: Option<&PathBuf>) -> Data {
        let n = usize::try_from(mib * 1024 * 1024 / 4).expect("array fits in memory");
        let values = match file {
            Some(path) => {
                let bytes = std::fs::read(path).expect("read --data file");
                assert_eq!(
                    bytes.len(),
                    n * 4,
                    "--data file must hold exactly --mib MiB"
                );
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            }
            None => normal_f32(n, 0),
        };
        Data {
            shape: vec![mib * 1024 * 1024 / 4 / COLS, COLS],
            values,
        }
    }

    fn chunks(&self) -> u64 {
        self.shape[0] / CHUNK_ROWS
    }

    /// The elements of chunk `[i, 0]` (a chunk spans whole rows, so it is contiguous).
    fn chunk(&self, i: u64) -> &[f32] {
        let len = (CHUNK_ROWS * COLS) as usize;
        let start = i as usize * len;
        &self.values[start..start + len]
    }
}

/// `n` standard-normal float32 values from `seed` (splitmix64 + Box-Muller).
fn normal_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        // Uniform in (0, 1] and [0, 1).
        let u1 = ((next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let u2 = (next() >> 11) as f64 / (1u64 << 53) as f64;
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = std::f64::consts::TAU * u2;
        out.push((r * theta.cos()) as f32);
        out.push((r * theta.sin()) as f32);
    }
    out.truncate(n);
    out
}

fn codecs(zstd: bool) -> Vec<Value> {
    let mut codecs = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    if zstd {
        codecs.push(json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}));
    }
    codecs
}

fn float_array(data: &Data, zstd: bool) -> ArrayBuilder {
    ArrayBuilder::new(
        data.shape.clone(),
        vec![CHUNK_ROWS, COLS],
        DataType::Float32,
    )
    .codecs(codecs(zstd))
}

fn group_json(i: usize) -> Bytes {
    Bytes::from(json!({"zarr_format": 3, "node_type": "group", "attributes": {"i": i}}).to_string())
}

/// A new spec-1 repository on the local filesystem, in a new directory under the
/// scratch directory (see [`scratch_dir`]).
async fn new_repo() -> (PathBuf, Repository) {
    new_repo_of(SpecVersion::V1).await
}

/// A new repository of spec version `spec` on the local filesystem.
async fn new_repo_of(spec: SpecVersion) -> (PathBuf, Repository) {
    let dir = scratch_dir();
    let storage = Arc::new(LocalStorage::new(dir.as_path()).expect("local storage"));
    let repo = Repository::create_with(storage, None, spec, OpenOptions::default())
        .await
        .expect("create repository");
    (dir, repo)
}

async fn main_store(repo: &Repository) -> Arc<dyn Store> {
    let session = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .expect("read-only session");
    Arc::new(session.store())
}

/// Commits the root group with attributes `{"i": 0}`, then `more` commits that each
/// set `{"i": k}`; returns the time of each of the `more` commits (set + commit).
async fn attribute_commits(repo: &Repository, more: usize) -> Vec<Duration> {
    let session = repo.writable_session("main").await.expect("session");
    session
        .store()
        .set("zarr.json", group_json(0))
        .await
        .expect("set root group");
    session.commit("root group").await.expect("commit");
    let mut times = Vec::with_capacity(more);
    for i in 1..=more {
        let session = repo.writable_session("main").await.expect("session");
        let store = session.store();
        let t = Instant::now();
        store
            .set("zarr.json", group_json(i))
            .await
            .expect("set attributes");
        session.commit(&format!("attrs {i}")).await.expect("commit");
        times.push(t.elapsed());
    }
    let meta = main_store(repo)
        .await
        .get("zarr.json")
        .await
        .expect("get zarr.json")
        .expect("root group exists");
    let meta: Value = serde_json::from_slice(&meta).expect("group metadata is JSON");
    assert_eq!(
        meta["attributes"]["i"],
        json!(more),
        "last attributes committed"
    );
    times
}

async fn attr_commit() -> Duration {
    let (_dir, repo) = new_repo().await;
    median(attribute_commits(&repo, 100).await)
}

async fn commit_10k_refs() -> Duration {
    const N: u64 = 10_000;
    let (_dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let array = ArrayBuilder::new(vec![N], vec![1], DataType::UInt8)
        .codecs(codecs(false))
        .create(Arc::new(session.store()), "refs")
        .await
        .expect("create array");
    // Never the fill value 0, so every chunk is stored.
    let values: Vec<u8> = (0..N).map(|i| (i % 255 + 1) as u8).collect();
    array
        .write_region(&ArraySubset::full(&[N]), &values)
        .await
        .expect("write chunks");
    let t = Instant::now();
    session.commit("10k chunks").await.expect("commit");
    let elapsed = t.elapsed();
    let back: Vec<u8> = read_whole(main_store(&repo).await, "refs").await;
    assert!(back == values, "10k chunks read back as written");
    elapsed
}

/// The whole array at `path` in `store`, opened and read through the Array API.
async fn read_whole<T: floe::zarr::Element>(store: Arc<dyn Store>, path: &str) -> Vec<T> {
    Array::open(store, path)
        .await
        .expect("open array")
        .read_all()
        .await
        .expect("read array")
}

async fn check_array(repo: &Repository, path: &str, data: &Data) {
    let back: Vec<f32> = read_whole(main_store(repo).await, path).await;
    assert!(back == data.values, "array {path} reads back as written");
}

/// Creates the float32 array `name` in `store` (zstd-compressed or not) and writes
/// `data` into it whole through the Array API.
async fn write_float_array(data: &Data, zstd: bool, store: Arc<dyn Store>, name: &str) -> Array {
    let array = float_array(data, zstd)
        .create(store, name)
        .await
        .expect("create array");
    array
        .write_region(&ArraySubset::full(&data.shape), &data.values)
        .await
        .expect("write array");
    array
}

/// `data` written through the Array API into a new array (zstd level 3 or
/// uncompressed) plus the commit; the array is checked afterwards, untimed.
async fn write_commit(data: &Data, zstd: bool) -> Duration {
    let name = if zstd { "big" } else { "raw" };
    let (_dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let t = Instant::now();
    write_float_array(data, zstd, Arc::new(session.store()), name).await;
    session.commit(name).await.expect("commit");
    let elapsed = t.elapsed();
    check_array(&repo, name, data).await;
    elapsed
}

/// Which part of the sharded workload is timed.
#[derive(Clone, Copy, PartialEq)]
enum Sharded {
    Write,
    Read,
    ReadInner,
}

/// The first `SHARD_MIB` MiB of `data` as a sharded array (see the module docs),
/// written + committed, then read whole, then one inner chunk read per shard; the
/// part `timed` is timed, and every read is checked.
async fn sharded(data: &Data, timed: Sharded) -> Duration {
    let rows = SHARD_MIB * 1024 * 1024 / 4 / COLS;
    let values = &data.values[..(rows * COLS) as usize];
    let (_dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let t = Instant::now();
    let array = ArrayBuilder::new(vec![rows, COLS], vec![CHUNK_ROWS, COLS], DataType::Float32)
        .codecs(vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1, COLS],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "crc32c"},
            ],
            "index_location": "end",
        }})])
        .create(Arc::new(session.store()), "sharded")
        .await
        .expect("create sharded array");
    array
        .write_region(&ArraySubset::full(&[rows, COLS]), values)
        .await
        .expect("write sharded array");
    session.commit("sharded array").await.expect("commit");
    let write = t.elapsed();
    let store = main_store(&repo).await;
    let t = Instant::now();
    let back: Vec<f32> = read_whole(Arc::clone(&store), "sharded").await;
    let read = t.elapsed();
    assert!(back == values, "sharded array reads back as written");
    let array = Array::open(store, "sharded").await.expect("open array");
    let t = Instant::now();
    for shard in 0..rows / CHUNK_ROWS {
        let row = shard * CHUNK_ROWS + 7;
        let one: Vec<f32> = array
            .read_region(&ArraySubset::new(vec![row, 0], vec![1, COLS]))
            .await
            .expect("read one inner chunk");
        let at = (row * COLS) as usize;
        assert!(one == values[at..at + COLS as usize], "inner chunk {row}");
    }
    let inner = t.elapsed();
    match timed {
        Sharded::Write => write,
        Sharded::Read => read,
        Sharded::ReadInner => inner,
    }
}

/// `VARIABLES` arrays of `mib / VARIABLES` MiB each (see the module docs): written +
/// committed (`mean == false`), or written untimed and then read whole and averaged
/// (`mean == true`).
async fn dataset(mib: u64, mean: bool) -> Duration {
    let per = mib * 1024 * 1024 / 4 / VARIABLES;
    let shape = vec![per / COLS, COLS];
    let variables: Vec<Vec<f32>> = (0..VARIABLES)
        .map(|k| normal_f32(per as usize, 100 + k))
        .collect();
    let (_dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let store: Arc<dyn Store> = Arc::new(session.store());
    let t = Instant::now();
    for (k, values) in variables.iter().enumerate() {
        let array = ArrayBuilder::new(shape.clone(), vec![CHUNK_ROWS, COLS], DataType::Float32)
            .codecs(vec![
                json!({"name": "bytes", "configuration": {"endian": "little"}}),
                json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}}),
            ])
            .create(Arc::clone(&store), &format!("v{k}"))
            .await
            .expect("create variable");
        array
            .write_region(&ArraySubset::full(&shape), values)
            .await
            .expect("write variable");
    }
    session.commit("dataset").await.expect("commit");
    let write = t.elapsed();
    if !mean {
        return write;
    }
    let t = Instant::now();
    let store = main_store(&repo).await;
    let mut means = Vec::new();
    for k in 0..VARIABLES {
        let back: Vec<f32> = read_whole(Arc::clone(&store), &format!("v{k}")).await;
        means.push(back.iter().map(|&v| f64::from(v)).sum::<f64>() / back.len() as f64);
    }
    let elapsed = t.elapsed();
    assert!(
        means.iter().all(|m| m.abs() < 0.01),
        "means of normal data: {means:?}"
    );
    elapsed
}

/// The chunks of `data` encoded (with zstd or not) and their keys, from an
/// in-memory store.
async fn encoded_chunks(data: &Data, zstd: bool) -> Vec<(String, Bytes)> {
    let scratch = write_float_array(data, zstd, Arc::new(MemoryStore::new()), "big").await;
    let mut chunks: Vec<(String, Bytes)> = Vec::new();
    for i in 0..data.chunks() {
        let bytes = scratch
            .read_encoded_chunk(&[i, 0])
            .await
            .expect("read encoded chunk")
            .expect("chunk was stored");
        chunks.push((scratch.chunk_key(&[i, 0]).expect("chunk key"), bytes));
    }
    chunks
}

/// Writes `chunks` as files `dir/c<i>` with `std::fs::write`, `IN_FLIGHT` at a time.
async fn write_files(dir: &std::path::Path, chunks: &[(String, Bytes)]) {
    futures::stream::iter(chunks.iter().enumerate().map(|(i, (_, bytes))| {
        let (path, bytes) = (dir.join(format!("c{i}")), bytes.clone());
        tokio::task::spawn_blocking(move || std::fs::write(path, &bytes))
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<_>>()
    .await
    .expect("join")
    .into_iter()
    .collect::<std::io::Result<Vec<()>>>()
    .expect("write files");
}

/// `store_write_commit`'s floor: its compressed chunks written with plain `std::fs`.
async fn floor_write(data: &Data) -> Duration {
    let chunks = encoded_chunks(data, true).await;
    let dir = scratch_dir();
    let t = Instant::now();
    write_files(dir.as_path(), &chunks).await;
    t.elapsed()
}

/// `read_store`'s floor: the uncompressed chunks, written untimed, read back with
/// plain `std::fs`.
async fn floor_read(data: &Data) -> Duration {
    let chunks = encoded_chunks(data, false).await;
    let dir = scratch_dir();
    write_files(dir.as_path(), &chunks).await;
    let t = Instant::now();
    let back: Vec<(usize, Vec<u8>)> = futures::stream::iter((0..chunks.len()).map(|i| {
        let path = dir.as_path().join(format!("c{i}"));
        tokio::task::spawn_blocking(move || std::fs::read(path).map(|b| (i, b)))
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<_>>()
    .await
    .expect("join")
    .into_iter()
    .collect::<std::io::Result<_>>()
    .expect("read files");
    let elapsed = t.elapsed();
    for (i, bytes) in back {
        assert!(
            bytes[..] == chunks[i].1[..],
            "file {i} reads back as written"
        );
    }
    elapsed
}

async fn store_write_commit(data: &Data) -> Duration {
    let chunks = encoded_chunks(data, true).await;

    let (_dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let store = session.store();
    float_array(data, true)
        .create(Arc::new(session.store()), "big")
        .await
        .expect("create array");
    let t = Instant::now();
    futures::stream::iter(
        chunks
            .iter()
            .map(|(key, bytes)| store.set(key, bytes.clone())),
    )
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<()>>()
    .await
    .expect("set chunks");
    session.commit("store-API chunks").await.expect("commit");
    let elapsed = t.elapsed();
    check_array(&repo, "big", data).await;
    elapsed
}

/// A repository holding `data` uncompressed at `raw`, committed; returns the chunk
/// keys.
async fn uncompressed_repo(data: &Data) -> (PathBuf, Repository, Vec<String>) {
    let (dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let array = write_float_array(data, false, Arc::new(session.store()), "raw").await;
    session.commit("uncompressed array").await.expect("commit");
    let keys = (0..data.chunks())
        .map(|i| array.chunk_key(&[i, 0]).expect("chunk key"))
        .collect();
    (dir, repo, keys)
}

async fn read_store(data: &Data) -> Duration {
    let (_dir, repo, keys) = uncompressed_repo(data).await;
    let store = main_store(&repo).await;
    let t = Instant::now();
    let chunks: Vec<(usize, Option<Bytes>)> =
        futures::stream::iter(keys.iter().enumerate().map(|(i, key)| {
            let store = Arc::clone(&store);
            async move { store.get(key).await.map(|b| (i, b)) }
        }))
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await
        .expect("get chunks");
    let elapsed = t.elapsed();
    assert_eq!(chunks.len(), keys.len());
    for (i, bytes) in chunks {
        let bytes = bytes.expect("every chunk is stored");
        let expected: &[u8] = bytemuck::cast_slice(data.chunk(i as u64));
        assert!(bytes[..] == *expected, "chunk {i} reads back as written");
    }
    elapsed
}

async fn read_array(data: &Data) -> Duration {
    let (_dir, repo, _keys) = uncompressed_repo(data).await;
    let store = main_store(&repo).await;
    let t = Instant::now();
    let back: Vec<f32> = read_whole(store, "raw").await;
    let elapsed = t.elapsed();
    assert!(back == data.values, "array reads back as written");
    elapsed
}

/// The zstd(3) array of `write_zstd_commit`, written and committed untimed, read
/// whole through the Array API from a read-only session.
async fn read_zstd_array(data: &Data) -> Duration {
    let (_dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    write_float_array(data, true, Arc::new(session.store()), "big").await;
    session.commit("zstd array").await.expect("commit");
    let store = main_store(&repo).await;
    let t = Instant::now();
    let back: Vec<f32> = read_whole(store, "big").await;
    let elapsed = t.elapsed();
    assert!(back == data.values, "array reads back as written");
    elapsed
}

/// A repository of spec version `spec` with 2,001 commits on `main`: open it fresh
/// and list the whole ancestry.
async fn ancestry_2001_cold(spec: SpecVersion) -> Duration {
    const COMMITS: usize = 2001;
    let (dir, repo) = new_repo_of(spec).await;
    attribute_commits(&repo, COMMITS - 1).await;
    drop(repo);
    let t = Instant::now();
    let storage: Arc<dyn Storage> =
        Arc::new(LocalStorage::new(dir.as_path()).expect("local storage"));
    let repo = Repository::open(storage).await.expect("open repository");
    let tip = repo.lookup_branch("main").await.expect("main");
    let history = repo.ancestry(tip).await.expect("ancestry");
    let elapsed = t.elapsed();
    // The commits plus the initial snapshot.
    assert_eq!(history.len(), COMMITS + 1, "whole ancestry listed");
    elapsed
}

/// The 1-D float32 array of `small_write_commit`: `0, 1, 2, ...` in 10,000 chunks
/// of 4 KiB, uncompressed.
fn small_values() -> Vec<f32> {
    (0..SMALL_CHUNKS * SMALL_CHUNK_LEN)
        .map(|i| i as f32)
        .collect()
}

/// Writes the small-chunk array `small` into a new writable session on `repo`
/// through the Array API.
async fn write_small(repo: &Repository, values: &[f32]) -> floe::Session {
    let session = repo.writable_session("main").await.expect("session");
    let n = values.len() as u64;
    let array = ArrayBuilder::new(vec![n], vec![SMALL_CHUNK_LEN], DataType::Float32)
        .codecs(codecs(false))
        .create(Arc::new(session.store()), "small")
        .await
        .expect("create array");
    array
        .write_region(&ArraySubset::full(&[n]), values)
        .await
        .expect("write small chunks");
    session
}

async fn small_write_commit() -> Duration {
    let values = small_values();
    let (_dir, repo) = new_repo().await;
    let t = Instant::now();
    let session = write_small(&repo, &values).await;
    session.commit("small chunks").await.expect("commit");
    let elapsed = t.elapsed();
    let back: Vec<f32> = read_whole(main_store(&repo).await, "small").await;
    assert!(back == values, "small chunks read back as written");
    elapsed
}

async fn small_read() -> Duration {
    let values = small_values();
    let (_dir, repo) = new_repo().await;
    write_small(&repo, &values)
        .await
        .commit("small chunks")
        .await
        .expect("commit");
    let store = main_store(&repo).await;
    let t = Instant::now();
    let back: Vec<f32> = read_whole(store, "small").await;
    let elapsed = t.elapsed();
    assert!(back == values, "small chunks read back as written");
    elapsed
}

/// The four values of array `a{i}` in the `cold_open` repository.
fn cold_values(i: usize) -> [f32; 4] {
    let base = (i * 4) as f32;
    [base, base + 1.0, base + 2.0, base + 3.0]
}

async fn cold_open() -> Duration {
    let (dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    let store: Arc<dyn Store> = Arc::new(session.store());
    floe::zarr::Group::create(Arc::clone(&store), "", serde_json::Map::new())
        .await
        .expect("root group");
    for i in 0..COLD_ARRAYS {
        let array = ArrayBuilder::new(vec![4], vec![4], DataType::Float32)
            .codecs(codecs(false))
            .create(Arc::clone(&store), &format!("a{i}"))
            .await
            .expect("create array");
        array
            .write_region(&ArraySubset::full(&[4]), &cold_values(i))
            .await
            .expect("write chunk");
    }
    session.commit("1,000 arrays").await.expect("commit");
    drop(repo);
    let mut times = Vec::with_capacity(COLD_OPENS);
    for k in 0..COLD_OPENS {
        let i = k * COLD_ARRAYS / COLD_OPENS + 7;
        let t = Instant::now();
        let storage: Arc<dyn Storage> =
            Arc::new(LocalStorage::new(dir.as_path()).expect("local storage"));
        let repo = Repository::open(storage).await.expect("open repository");
        let back: Vec<f32> = read_whole(main_store(&repo).await, &format!("a{i}")).await;
        times.push(t.elapsed());
        assert_eq!(back, cold_values(i), "array a{i} reads back as written");
    }
    median(times)
}

/// The value `concurrent_commits` writer `w` writes at its commit `c`: never the
/// fill value 0.
fn writer_value(w: usize, c: usize) -> u8 {
    (w * COMMITS_PER_WRITER + c + 1) as u8
}

/// A `concurrent_commits` writer process: opens the repository at `path`, prints
/// `ready`, waits for a line on stdin, makes its commits, then prints the JSON list
/// of `[w, c]` for the commits that returned success (a failure is reported on
/// stderr).
fn writer_main(path: &str, w: usize) -> ! {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let succeeded = rt.block_on(async {
        let storage: Arc<dyn Storage> =
            Arc::new(LocalStorage::new(std::path::Path::new(path)).expect("local storage"));
        let repo = Repository::open(storage).await.expect("open repository");
        println!("ready");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).expect("start signal");
        let mut succeeded = Vec::new();
        for c in 0..COMMITS_PER_WRITER {
            let session = repo.writable_session("main").await.expect("session");
            let array = Array::open(Arc::new(session.store()), "c")
                .await
                .expect("open array");
            let at = (w * COMMITS_PER_WRITER + c) as u64;
            array
                .write_region(&ArraySubset::new(vec![at], vec![1]), &[writer_value(w, c)])
                .await
                .expect("write element");
            match session.commit(&format!("writer {w} commit {c}")).await {
                Ok(_) => succeeded.push([w, c]),
                Err(e) => eprintln!("writer {w} commit {c} failed: {e}"),
            }
        }
        succeeded
    });
    println!("{}", json!(succeeded));
    std::process::exit(0);
}

/// What became of the `concurrent_commits` commits.
struct Outcome {
    /// Commits whose `commit` call returned an error.
    failed: usize,
    /// Commits that returned success but are missing from the history or whose
    /// value is not in the array.
    lost: usize,
}

async fn concurrent_commits() -> (Duration, Outcome) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let total = WRITERS * COMMITS_PER_WRITER;
    let (dir, repo) = new_repo().await;
    let session = repo.writable_session("main").await.expect("session");
    ArrayBuilder::new(vec![total as u64], vec![1], DataType::UInt8)
        .codecs(codecs(false))
        .create(Arc::new(session.store()), "c")
        .await
        .expect("create array");
    let base = session.commit("shared array").await.expect("commit");
    let exe = std::env::current_exe().expect("this executable");
    let path = dir.as_path().to_str().expect("UTF-8 path").to_string();
    let mut writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut child = Command::new(&exe)
                .args(["--writer", &path, &w.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn writer");
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut line = String::new();
            out.read_line(&mut line).expect("writer ready");
            assert_eq!(line.trim(), "ready", "writer {w} started");
            (child, out)
        })
        .collect();
    let t = Instant::now();
    for (child, _) in &mut writers {
        writeln!(child.stdin.as_mut().expect("stdin"), "go").expect("start writer");
    }
    let mut succeeded: Vec<[usize; 2]> = Vec::new();
    for (mut child, mut out) in writers {
        let mut line = String::new();
        out.read_line(&mut line).expect("writer's report");
        succeeded.extend(serde_json::from_str::<Vec<[usize; 2]>>(&line).expect("JSON report"));
        child.wait().expect("writer exits");
    }
    let elapsed = t.elapsed();
    // What landed: the commits since `base` on main, by message, and the values.
    let tip = repo.lookup_branch("main").await.expect("main");
    let landed: std::collections::HashSet<String> = repo
        .ancestry(tip)
        .await
        .expect("ancestry")
        .into_iter()
        .take_while(|c| c.id != base)
        .map(|c| c.message)
        .collect();
    let back: Vec<u8> = read_whole(main_store(&repo).await, "c").await;
    let lost = succeeded
        .iter()
        .filter(|&&[w, c]| {
            !landed.contains(&format!("writer {w} commit {c}"))
                || back[w * COMMITS_PER_WRITER + c] != writer_value(w, c)
        })
        .count();
    let outcome = Outcome {
        failed: total - succeeded.len(),
        lost,
    };
    (elapsed, outcome)
}

/// `write_zstd_commit`'s floor: the same chunks compressed with zstd level 3 on
/// one thread per core and written as files with plain `std::fs`.
async fn floor_zstd_write(data: &Data) -> Duration {
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = scratch_dir();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut zstd = zstd::bulk::Compressor::new(3).expect("zstd context");
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= data.chunks() {
                        break;
                    }
                    let raw: &[u8] = bytemuck::cast_slice(data.chunk(i));
                    let packed = zstd.compress(raw).expect("compress");
                    std::fs::write(dir.as_path().join(format!("c{i}")), packed).expect("write");
                }
            });
        }
    });
    t.elapsed()
}

/// Where every run's repositories and files go (`--scratch DIR`, or a temporary
/// directory removed when the program ends).
static SCRATCH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// A new, empty directory under the scratch directory. Nothing is deleted until the
/// program ends (or, with `--scratch`, until the caller removes the directory):
/// files created right after many others were deleted are slow on ext4 (see
/// [`settle`]), and a run must not pay for the previous one's clean-up.
fn scratch_dir() -> PathBuf {
    let root = SCRATCH.get().expect("scratch directory set in main");
    tempfile::Builder::new()
        .prefix("run")
        .tempdir_in(root)
        .expect("scratch directory")
        .keep()
}

/// Before each run (the Icechunk side does the same): flushes the previous run's
/// dirty pages, whose writeback would otherwise stall this run's file creations,
/// then drops the kernel's clean caches where allowed (root). ext4 skips the inodes
/// of files deleted within the last minute when it allocates new ones, scanning past
/// each of them while their inode-table blocks are cached: 10,000 file creations
/// right after 10,000 deletions took 0.8-4 s instead of 0.16 s, for whichever engine
/// came next. Dropping the caches ends that scan.
fn settle() {
    let _ = std::process::Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    let n = times.len();
    if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2
    }
}

fn main() {
    // A `concurrent_commits` writer process: `--writer REPO_PATH INDEX`.
    let argv: Vec<String> = std::env::args().collect();
    if let Some(at) = argv.iter().position(|a| a == "--writer") {
        let path = argv.get(at + 1).expect("--writer REPO_PATH INDEX");
        let w = argv
            .get(at + 2)
            .and_then(|w| w.parse().ok())
            .expect("--writer REPO_PATH INDEX");
        writer_main(path, w);
    }
    let args = parse_args();
    // Removed when the program ends, unless the caller gave a directory.
    let own_scratch = match &args.scratch {
        Some(dir) => {
            std::fs::create_dir_all(dir).expect("--scratch directory");
            SCRATCH.set(dir.clone()).expect("set once");
            None
        }
        None => {
            let dir = tempfile::tempdir().expect("temporary directory");
            SCRATCH.set(dir.path().to_path_buf()).expect("set once");
            Some(dir)
        }
    };
    let selected: Vec<&str> = WORKLOADS
        .iter()
        .copied()
        .filter(|w| {
            // A store-API row runs with its page-cache floor.
            args.workload.as_deref().is_none_or(|only| {
                only.split(',').any(|only| {
                    only == *w
                        || (only, *w) == ("store_write_commit", "floor_write")
                        || (only, *w) == ("read_store", "floor_read")
                        || (only, *w) == ("write_zstd_commit", "floor_zstd_write")
                })
            })
        })
        .collect();
    let needs_data = selected.iter().any(|w| {
        matches!(
            *w,
            "write_zstd_commit"
                | "write_raw_commit"
                | "sharded_write_commit"
                | "sharded_read"
                | "sharded_read_inner"
                | "store_write_commit"
                | "read_store"
                | "read_array"
                | "read_zstd_array"
                | "floor_zstd_write"
                | "floor_write"
                | "floor_read"
        )
    });
    let data = if needs_data {
        Data::load(args.mib, args.data.as_ref())
    } else {
        Data {
            shape: vec![0, COLS],
            values: Vec::new(),
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut out = serde_json::Map::new();
    out.insert("engine".into(), json!("floe"));
    out.insert("mib".into(), json!(args.mib));
    out.insert("runs".into(), json!(args.runs));
    for workload in selected {
        let mut times = Vec::with_capacity(args.runs);
        let mut outcomes = Vec::new();
        for run in 0..args.runs {
            settle();
            let t = rt.block_on(async {
                match workload {
                    "attr_commit" => attr_commit().await,
                    "commit_10k_refs" => commit_10k_refs().await,
                    "write_zstd_commit" => write_commit(&data, true).await,
                    "write_raw_commit" => write_commit(&data, false).await,
                    "sharded_write_commit" => sharded(&data, Sharded::Write).await,
                    "sharded_read" => sharded(&data, Sharded::Read).await,
                    "sharded_read_inner" => sharded(&data, Sharded::ReadInner).await,
                    "dataset_write_commit" => dataset(args.mib, false).await,
                    "dataset_read_mean" => dataset(args.mib, true).await,
                    "store_write_commit" => store_write_commit(&data).await,
                    "read_store" => read_store(&data).await,
                    "read_array" => read_array(&data).await,
                    "read_zstd_array" => read_zstd_array(&data).await,
                    "small_write_commit" => small_write_commit().await,
                    "small_read" => small_read().await,
                    "cold_open" => cold_open().await,
                    "concurrent_commits" => {
                        let (t, outcome) = concurrent_commits().await;
                        outcomes.push(outcome);
                        t
                    }
                    "ancestry_2001_cold" => ancestry_2001_cold(SpecVersion::V1).await,
                    "ancestry_2001_cold_spec2" => ancestry_2001_cold(SpecVersion::V2).await,
                    "floor_zstd_write" => floor_zstd_write(&data).await,
                    "floor_write" => floor_write(&data).await,
                    "floor_read" => floor_read(&data).await,
                    other => unreachable!("workload {other}"),
                }
            });
            eprintln!(
                "workloads: {workload} run {}/{}: {:.4} s",
                run + 1,
                args.runs,
                t.as_secs_f64()
            );
            times.push(t);
        }
        out.insert(format!("{workload}_s"), json!(median(times).as_secs_f64()));
        if !outcomes.is_empty() {
            let failed: usize = outcomes.iter().map(|o| o.failed).sum();
            let lost: usize = outcomes.iter().map(|o| o.lost).sum();
            out.insert(format!("{workload}_failed"), json!(failed));
            out.insert(format!("{workload}_lost"), json!(lost));
        }
    }
    println!("{}", Value::Object(out));
    drop(own_scratch);
}
