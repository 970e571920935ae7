//! floe's side of `benches/s3_latency.py`: one run of one workload on S3 (the test
//! server behind the request-delaying proxy `benches/latency_proxy.py`), printing one
//! JSON line `{"s": seconds, "requests": n, "connections": c}` (the median over the
//! timed repetitions, and the proxy's counts per repetition).
//!
//! ```text
//! cargo bench --bench s3_latency -- --workload NAME --bucket B --prefix P
//!     --proxy HOST:PORT --direct HOST:PORT --data FILE
//! ```
//!
//! The setup (untimed) talks to the server directly (`--direct`); the timed part goes
//! through the proxy (`--proxy`) on a fresh repository handle, between the proxy's
//! `start` and `stop` marks. Credentials and region come from the `AWS_*`
//! environment. The workloads are described in `benches/s3_latency.py`.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe::format::SpecVersion;
use floe::storage::{new_s3_storage, S3Options, Storage};
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, Store};
use floe::{OpenOptions, Repository, VersionSelector};
use serde_json::{json, Value};

const COLS: u64 = 1024;
const CHUNK_ROWS: u64 = 256;
const SMALL_LEN: u64 = 1024;
const COMMITS: usize = 200;
const ARRAYS: usize = 100;
const ATTR_COMMITS: usize = 5;
/// `commits_8x5`: worker processes, and commits each.
const WORKER_COMMITS: usize = 5;
const WORKERS: usize = 8;

struct Args {
    workload: String,
    bucket: String,
    prefix: String,
    proxy: String,
    direct: String,
    data: String,
    /// `commit_worker`: the worker's number and the wall-clock start (seconds since
    /// the Unix epoch) all workers wait for.
    worker: usize,
    start_at: f64,
}

fn parse_args() -> Args {
    let mut a = Args {
        workload: String::new(),
        bucket: String::new(),
        prefix: String::new(),
        proxy: String::new(),
        direct: String::new(),
        data: String::new(),
        worker: 0,
        start_at: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match arg.as_str() {
            "--workload" => a.workload = value(),
            "--bucket" => a.bucket = value(),
            "--prefix" => a.prefix = value(),
            "--proxy" => a.proxy = value(),
            "--direct" => a.direct = value(),
            "--data" => a.data = value(),
            "--worker" => a.worker = value().parse().expect("--worker N"),
            "--start-at" => a.start_at = value().parse().expect("--start-at SECONDS"),
            other => eprintln!("s3_latency: ignoring argument {other:?}"),
        }
    }
    assert!(!a.workload.is_empty(), "--workload is required");
    a
}

/// Sends `GET /__mark/{what}` to the proxy; returns its JSON answer.
fn mark(proxy: &str, what: &str) -> Value {
    let mut s = std::net::TcpStream::connect(proxy).expect("connect to the proxy");
    write!(
        s,
        "GET /__mark/{what} HTTP/1.1\r\nHost: {proxy}\r\nConnection: close\r\n\r\n"
    )
    .expect("mark");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("mark answer");
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("{}");
    serde_json::from_str(body).expect("mark JSON")
}

fn storage(a: &Args, endpoint: &str) -> Arc<dyn Storage> {
    let opts = S3Options {
        endpoint: Some(format!("http://{endpoint}")),
        allow_http: true,
        force_path_style: true,
        ..S3Options::from_env()
    };
    new_s3_storage(&a.bucket, &a.prefix, opts).expect("S3 storage")
}

async fn fresh(a: &Args) -> Repository {
    Repository::open(storage(a, &a.proxy))
        .await
        .expect("open repository")
}

fn codecs(zstd: bool) -> Vec<Value> {
    let mut c = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    if zstd {
        c.push(json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}));
    }
    c
}

fn group_json(i: usize) -> Bytes {
    Bytes::from(json!({"zarr_format": 3, "node_type": "group", "attributes": {"i": i}}).to_string())
}

async fn main_store(repo: &Repository) -> Arc<dyn Store> {
    let s = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .expect("read-only session");
    Arc::new(s.store())
}

async fn write_big(repo: &Repository, data: &[f32]) {
    let s = repo.writable_session("main").await.expect("session");
    let rows = data.len() as u64 / COLS;
    let array = ArrayBuilder::new(vec![rows, COLS], vec![CHUNK_ROWS, COLS], DataType::Float32)
        .codecs(codecs(true))
        .create(Arc::new(s.store()), "big")
        .await
        .expect("create array");
    array
        .write_region(&ArraySubset::full(&[rows, COLS]), data)
        .await
        .expect("write");
    s.commit("zstd array").await.expect("commit");
}

/// Chunks of the small-chunk workloads: `FLOE_BENCH_SMALL_CHUNKS` (default 1,000).
fn small_chunks() -> u64 {
    std::env::var("FLOE_BENCH_SMALL_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn small_values() -> Vec<f32> {
    (0..small_chunks() * SMALL_LEN).map(|i| i as f32).collect()
}

async fn write_small(repo: &Repository, values: &[f32]) {
    let s = repo.writable_session("main").await.expect("session");
    let n = values.len() as u64;
    let array = ArrayBuilder::new(vec![n], vec![SMALL_LEN], DataType::Float32)
        .codecs(codecs(false))
        .create(Arc::new(s.store()), "small")
        .await
        .expect("create array");
    array
        .write_region(&ArraySubset::full(&[n]), values)
        .await
        .expect("write");
    s.commit("small chunks").await.expect("commit");
}

async fn attrs(repo: &Repository, i: usize) {
    let s = repo.writable_session("main").await.expect("session");
    s.store()
        .set("zarr.json", group_json(i))
        .await
        .expect("set");
    s.commit("attributes").await.expect("commit");
}

/// Requests in flight tried by the floor rows; each row reports its fastest, the
/// rate the link and the server allow.
const FLOOR_IN_FLIGHT: [usize; 4] = [8, 16, 32, 64];

/// The 64 MiB array's chunks (1 MiB of float32 each), encoded as `write_big`
/// encodes them (zstd level 3), for the floor rows.
fn encoded_chunks(data: &[f32]) -> Vec<Bytes> {
    data.chunks((CHUNK_ROWS * COLS) as usize)
        .map(|c| {
            let raw: Vec<u8> = c.iter().flat_map(|v| v.to_le_bytes()).collect();
            Bytes::from(zstd::bulk::compress(&raw, 3).expect("zstd"))
        })
        .collect()
}

/// The chunks PUT under `floor/`, `in_flight` at a time.
async fn put_chunks(s: &dyn Storage, chunks: &[Bytes], in_flight: usize) {
    use futures::StreamExt;
    futures::stream::iter(chunks.iter().enumerate())
        .map(|(i, c)| async move { s.put(&format!("floor/c{i}"), c.clone()).await })
        .buffer_unordered(in_flight)
        .for_each(|r| async {
            r.expect("floor put");
        })
        .await;
}

/// The floor of a bulk write + commit: one sequential GET (the tip snapshot, which a
/// session reads before it writes), the encoded chunks PUT `in_flight` at a time by
/// the same S3 client, then one sequential PUT (the commit point, which must follow
/// every write). No format, no encoding.
async fn floor_write(s: &dyn Storage, chunks: &[Bytes], in_flight: usize) {
    s.get("floor/commit").await.expect("floor get");
    put_chunks(s, chunks, in_flight).await;
    s.put("floor/commit", Bytes::from_static(b"{}"))
        .await
        .expect("floor commit");
}

/// The floor of a bulk read from a fresh handle: three sequential GETs (the format's
/// chain `repo` object -> snapshot -> manifest, each naming the next), then the `n`
/// chunks, `in_flight` at a time. Returns the bytes read.
async fn floor_read(s: &dyn Storage, n: usize, in_flight: usize) -> usize {
    use futures::StreamExt;
    for _ in 0..3 {
        s.get("floor/commit").await.expect("floor get");
    }
    futures::stream::iter(0..n)
        .map(|i| async move { s.get(&format!("floor/c{i}")).await })
        .buffer_unordered(in_flight)
        .fold(
            0,
            |n, r| async move { n + r.expect("floor get").bytes.len() },
        )
        .await
}

/// Runs a floor row once for each of `FLOOR_IN_FLIGHT` on a fresh client (through
/// the proxy) and reports the fastest.
async fn floor_row<F, Fut>(a: &Args, mut once: F) -> Value
where
    F: FnMut(Arc<dyn Storage>, usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut best: Option<Value> = None;
    for in_flight in FLOOR_IN_FLIGHT {
        let mut timer = Timer::new(&a.proxy);
        timer.time(once(storage(a, &a.proxy), in_flight)).await;
        let s = timer.times[0].as_secs_f64();
        if best
            .as_ref()
            .is_none_or(|b| s < b["s"].as_f64().unwrap_or(f64::MAX))
        {
            best = Some(json!({
                "s": s,
                "requests": timer.requests,
                "connections": timer.connections,
                "in_flight": in_flight,
            }));
        }
    }
    best.expect("at least one floor run")
}

struct Timer<'a> {
    proxy: &'a str,
    times: Vec<Duration>,
    requests: f64,
    connections: f64,
}

impl<'a> Timer<'a> {
    /// A timer whose marks go to the proxy at `proxy`, nothing timed yet.
    fn new(proxy: &'a str) -> Self {
        Timer {
            proxy,
            times: Vec::new(),
            requests: 0.0,
            connections: 0.0,
        }
    }

    async fn time<T>(&mut self, f: impl std::future::Future<Output = T>) -> T {
        mark(self.proxy, "start");
        let t = Instant::now();
        let out = f.await;
        self.times.push(t.elapsed());
        let c = mark(self.proxy, "stop");
        self.requests += c["requests"].as_f64().unwrap_or(0.0);
        self.connections += c["connections"].as_f64().unwrap_or(0.0);
        out
    }
}

/// Seconds since the Unix epoch.
fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `commits_8x5`, setup: a repository with one small array per worker.
async fn commits_setup(a: &Args) -> Value {
    let repo = Repository::create_with(
        storage(a, &a.direct),
        None,
        SpecVersion::V2,
        OpenOptions::default(),
    )
    .await
    .expect("create");
    attrs(&repo, 0).await;
    let s = repo.writable_session("main").await.expect("session");
    let store: Arc<dyn Store> = Arc::new(s.store());
    for i in 0..WORKERS {
        ArrayBuilder::new(vec![16], vec![16], DataType::Float32)
            .codecs(codecs(false))
            .create(Arc::clone(&store), &format!("w{i}"))
            .await
            .expect("create array");
    }
    s.commit("one array per worker").await.expect("commit");
    json!({"ok": true})
}

/// `commits_8x5`, one worker: waits for `--start-at`, opens the repository through
/// the proxy and makes `WORKER_COMMITS` commits to main, each writing its own array
/// (the commits of other workers make it rebase); prints when it finished.
async fn commit_worker(a: &Args) -> Value {
    let wait = a.start_at - now_epoch();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    let repo = fresh(a).await;
    for c in 0..WORKER_COMMITS {
        let s = repo.writable_session("main").await.expect("session");
        Array::open(Arc::new(s.store()), &format!("w{}", a.worker))
            .await
            .expect("open array")
            .write_region(&ArraySubset::full(&[16]), &[c as f32; 16])
            .await
            .expect("write");
        s.commit("worker commit").await.expect("commit");
    }
    json!({"end": now_epoch()})
}

async fn run(a: &Args) -> Value {
    match a.workload.as_str() {
        "commits_setup" => return commits_setup(a).await,
        "commit_worker" => return commit_worker(a).await,
        _ => {}
    }
    let mut timer = Timer::new(&a.proxy);
    if a.workload == "create" {
        timer
            .time(async {
                Repository::create_with(
                    storage(a, &a.proxy),
                    None,
                    SpecVersion::V2,
                    OpenOptions::default(),
                )
                .await
                .expect("create")
            })
            .await;
        let branches = fresh(a).await.list_branches().await.expect("branches");
        assert_eq!(branches.len(), 1, "a new repository has main only");
        return json!({
            "s": timer.times[0].as_secs_f64(),
            "requests": timer.requests,
            "connections": timer.connections,
        });
    }
    let spec = if a.workload == "ancestry_200_spec1" {
        SpecVersion::V1
    } else {
        SpecVersion::V2
    };
    let repo = Repository::create_with(storage(a, &a.direct), None, spec, OpenOptions::default())
        .await
        .expect("create");
    attrs(&repo, 0).await;
    let read_data = || -> Vec<f32> {
        std::fs::read(&a.data)
            .expect("--data")
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    match a.workload.as_str() {
        "write_64mib" => {
            let data = read_data();
            let repo = fresh(a).await;
            timer.time(write_big(&repo, &data)).await;
        }
        "read_64mib" => {
            let data = read_data();
            write_big(&repo, &data).await;
            let repo = fresh(a).await;
            let back: Vec<f32> = timer
                .time(async {
                    Array::open(main_store(&repo).await, "big")
                        .await
                        .expect("open array")
                        .read_all()
                        .await
                        .expect("read")
                })
                .await;
            assert!(back == data, "read back as written");
        }
        "ancestry_200" | "ancestry_200_spec1" => {
            for i in 1..COMMITS {
                attrs(&repo, i).await;
            }
            let n = timer
                .time(async {
                    use futures::TryStreamExt;
                    let repo = fresh(a).await;
                    let history: Vec<_> = repo
                        .ancestry_stream(VersionSelector::Branch("main".into()))
                        .try_collect()
                        .await
                        .expect("ancestry");
                    history.len()
                })
                .await;
            assert_eq!(n, COMMITS + 1);
        }
        "open_read_one" => {
            let values = small_values();
            write_small(&repo, &values).await;
            let back: Vec<f32> = timer
                .time(async {
                    let repo = fresh(a).await;
                    let array = Array::open(main_store(&repo).await, "small")
                        .await
                        .expect("open array");
                    array
                        .read_region(&ArraySubset::new(vec![SMALL_LEN * 7], vec![SMALL_LEN]))
                        .await
                        .expect("read one chunk")
                })
                .await;
            assert_eq!(
                back[..],
                values[(SMALL_LEN * 7) as usize..(SMALL_LEN * 8) as usize]
            );
        }
        "attr_commit" => {
            let repo = fresh(a).await;
            for i in 0..ATTR_COMMITS {
                timer.time(attrs(&repo, i + 10)).await;
            }
        }
        "small_write_commit" => {
            let values = small_values();
            let repo = fresh(a).await;
            timer.time(write_small(&repo, &values)).await;
        }
        "small_read" => {
            let values = small_values();
            write_small(&repo, &values).await;
            let repo = fresh(a).await;
            let back: Vec<f32> = timer
                .time(async {
                    Array::open(main_store(&repo).await, "small")
                        .await
                        .expect("open array")
                        .read_all()
                        .await
                        .expect("read")
                })
                .await;
            assert!(back == values);
        }
        "commit_100_arrays" => {
            let s = repo.writable_session("main").await.expect("session");
            let store: Arc<dyn Store> = Arc::new(s.store());
            for i in 0..ARRAYS {
                let array = ArrayBuilder::new(vec![16], vec![16], DataType::Float32)
                    .codecs(codecs(false))
                    .create(Arc::clone(&store), &format!("a{i}"))
                    .await
                    .expect("create array");
                array
                    .write_region(&ArraySubset::full(&[16]), &[i as f32; 16])
                    .await
                    .expect("write");
            }
            s.commit("100 arrays").await.expect("commit");
            let repo = fresh(a).await;
            timer
                .time(async {
                    let s = repo.writable_session("main").await.expect("session");
                    let store: Arc<dyn Store> = Arc::new(s.store());
                    for i in 0..ARRAYS {
                        Array::open(Arc::clone(&store), &format!("a{i}"))
                            .await
                            .expect("open array")
                            .write_region(&ArraySubset::full(&[16]), &[(i + 1) as f32; 16])
                            .await
                            .expect("write");
                    }
                    s.commit("touch 100 arrays").await.expect("commit");
                })
                .await;
        }
        "floor_write_64mib" | "floor_read_64mib" => {
            let chunks = encoded_chunks(&read_data());
            let direct = storage(a, &a.direct);
            put_chunks(direct.as_ref(), &chunks, 16).await;
            direct
                .put("floor/commit", Bytes::from_static(b"{}"))
                .await
                .expect("floor setup");
            let total: usize = chunks.iter().map(Bytes::len).sum();
            let chunks = &chunks;
            return if a.workload == "floor_write_64mib" {
                floor_row(
                    a,
                    |s, n| async move { floor_write(s.as_ref(), chunks, n).await },
                )
                .await
            } else {
                floor_row(a, |s, n| async move {
                    assert_eq!(floor_read(s.as_ref(), chunks.len(), n).await, total);
                })
                .await
            };
        }
        other => panic!("unknown workload {other:?}"),
    }
    let n = timer.times.len() as f64;
    let mut times = timer.times.clone();
    times.sort();
    json!({
        "s": times[times.len() / 2].as_secs_f64(),
        "requests": timer.requests / n,
        "connections": timer.connections / n,
    })
}

fn main() {
    let a = parse_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(run(&a));
    println!("{out}");
}
