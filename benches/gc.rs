//! Garbage collection at scale (a plain benchmark binary: `cargo bench --bench gc`).
//!
//! Builds on local storage a repository with `FLOE_GC_BENCH_CHUNKS` native chunk
//! objects (default 1,000,000) written by `FLOE_GC_BENCH_SNAPSHOTS` commits (default
//! 1,000) into an array of half as many chunks:
//! the first half of the commits write new chunks, the second half overwrite them.
//! Expiring every commit but the last leaves about half the chunk objects
//! unreachable. A second process (this binary again) then times `verify` (issue 47:
//! against the listing floor, one listing of `chunks/`; once in one pass and once
//! in two), then a dry run and a real collection,
//! and prints their peak resident memory (VmHWM, reset before each run). The
//! repository is built under `target/gc-bench-*`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use chrono::Utc;
use floe::format::NodePath;
use floe::lifecycle::{ExpireOptions, GcOptions, VerifyOptions};
use floe::session::array_definition;
use floe::storage::LocalStorage;
use floe::Repository;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak resident memory since the last reset, in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn build(dir: &Path, objects: u64, snapshots: u64) -> chrono::DateTime<Utc> {
    // Every chunk of the array is written twice: once new, once overwritten.
    let chunks = (objects / 2).max(1);
    let repo = Repository::create(Arc::new(LocalStorage::new(dir).unwrap()), None)
        .await
        .unwrap();
    let path = NodePath::new("/data").unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [chunks], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes"}], "attributes": {}
    });
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(
        &path,
        array_definition(&path, Bytes::from(meta.to_string())).unwrap(),
    )
    .unwrap();
    s.commit("array").await.unwrap();
    let half = (snapshots / 2).max(1);
    let per_commit = chunks.div_ceil(half);
    let payload = Bytes::from(vec![7u8; 600]); // above the inline threshold
    let mut cut_off = Utc::now();
    for k in 0..snapshots {
        if k == snapshots - 1 {
            // Everything before the last commit expires: what it overwrote is garbage.
            cut_off = Utc::now();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let start = (k % half) * per_commit;
        let end = (start + per_commit).min(chunks);
        let writes = (start..end).map(|i| {
            let s = &s;
            let path = &path;
            let payload = payload.clone();
            async move { s.set_chunk(path, &[i], payload).await }
        });
        futures::future::try_join_all(writes).await.unwrap();
        s.commit(&format!("commit {k}")).await.unwrap();
    }
    cut_off
}

fn main() {
    if std::env::args().any(|a| a == "--collect") {
        return collect();
    }
    let chunks = env("FLOE_GC_BENCH_CHUNKS", 1_000_000);
    let snapshots = env("FLOE_GC_BENCH_SNAPSHOTS", 1_000).max(2);
    let dir = fixture_dir(chunks, snapshots);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let t = Instant::now();
        let cut_off = build(&dir, chunks, snapshots).await;
        println!(
            "built {chunks} chunks in {snapshots} commits in {:.0} s",
            t.elapsed().as_secs_f64()
        );
        std::fs::write(dir.join("floe-bench-cut-off"), cut_off.to_rfc3339()).unwrap();
    });
    // Collect in a fresh process, so its peak memory is the collection's.
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--collect")
        .status()
        .unwrap();
    assert!(status.success());
}

fn fixture_dir(chunks: u64, snapshots: u64) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(format!("gc-bench-{chunks}-{snapshots}"))
}

fn collect() {
    let chunks = env("FLOE_GC_BENCH_CHUNKS", 1_000_000);
    let snapshots = env("FLOE_GC_BENCH_SNAPSHOTS", 1_000).max(2);
    let dir = fixture_dir(chunks, snapshots);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let marker = dir.join("floe-bench-cut-off");
        let cut_off: chrono::DateTime<Utc> = std::fs::read_to_string(&marker)
            .unwrap()
            .parse()
            .unwrap();
        let repo = Repository::open(Arc::new(LocalStorage::new(&dir).unwrap()))
            .await
            .unwrap();
        // The listing floor of verify: one listing of chunks/.
        reset_peak();
        let t = Instant::now();
        let listed = repo.storage().list("chunks/").await.unwrap().len();
        println!(
            "listing chunks/: {listed} objects in {:.2} s; peak RSS {:.0} MiB",
            t.elapsed().as_secs_f64(),
            peak_mib()
        );
        // Passes are planned on the chunk refs (an upper bound of the distinct ids):
        // a budget of half of them makes two passes.
        let mut refs = 0;
        for two_passes in [false, true] {
            let budget = two_passes.then_some(refs / 2 + 1);
            let mut options = VerifyOptions::default();
            if let Some(n) = budget {
                options = options.max_chunk_ids_in_memory(n);
            }
            reset_peak();
            let t = Instant::now();
            let report = repo.verify(false, options, None).await.unwrap();
            assert!(report.is_ok(), "{:?}", report.problems);
            refs = report.native_refs;
            println!(
                "verify{}: {} snapshots, {} manifests, {} native refs in {} chunk objects in {:.2} s; peak RSS {:.0} MiB",
                budget.map(|n| format!(" (at most {n} chunk ids in memory)")).unwrap_or_default(),
                report.snapshots,
                report.manifests,
                report.native_refs,
                report.chunk_objects,
                t.elapsed().as_secs_f64(),
                peak_mib()
            );
        }
        let t = Instant::now();
        let expired = repo
            .expire_snapshots(cut_off, ExpireOptions::default())
            .await
            .unwrap();
        println!(
            "expire: {} snapshots in {:.2} s",
            expired.expired.len(),
            t.elapsed().as_secs_f64()
        );
        for dry in [true, false] {
            reset_peak();
            let t = Instant::now();
            let summary = repo
                .garbage_collect(cut_off, GcOptions::default().allow_recent_cutoff(true).dry_run(dry), None)
                .await
                .unwrap();
            println!(
                "gc{}: {} chunks, {} manifests, {} snapshots, {} transaction logs, {:.0} MiB in {:.1} s; peak RSS {:.0} MiB",
                if dry { " (dry run)" } else { "" },
                summary.chunks_deleted,
                summary.manifests_deleted,
                summary.snapshots_deleted,
                summary.transaction_logs_deleted,
                summary.bytes_deleted as f64 / (1 << 20) as f64,
                t.elapsed().as_secs_f64(),
                peak_mib()
            );
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}
