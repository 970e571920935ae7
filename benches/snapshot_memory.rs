//! Peak memory of CLI commands on a snapshot of many nodes (issue 27, class 6:
//! "memory proportional to the work").
//!
//! Builds a spec-1 repository on local disk whose `main` points at one snapshot of
//! `FLOE_MEM_BENCH_NODES` nodes (default 1,000,000: a root group, 1,000 groups of 999
//! small arrays each, every array with the same `zarr.json`), then runs the release
//! `floe` binary on it and reports each command's peak resident set size (the
//! child's `ru_maxrss`, from `wait4`) and wall time:
//! - `log -n 1` (one commit, by branch and by snapshot id),
//! - `tag create`,
//! - `ls` of the whole tree and of one group (output to `/dev/null`).
//!
//! The snapshot is built as a [`Snapshot`] value and written with the asset manager:
//! building it through a session would take minutes. `FLOE_MEM_BENCH_DIR` keeps the
//! repository in (and reuses it from) a directory of your choice.
//!
//! Run: `cargo bench --bench snapshot_memory`; `FLOE_BENCH_BIN` runs another `floe`
//! binary (an older build, to compare).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use floe::assets::AssetManager;
use floe::format::snapshot::{ArrayData, DimensionShape, NodeData, NodeSnapshot, Snapshot};
use floe::format::{NodeId, NodePath, SnapshotId, SpecVersion};
use floe::storage::{LocalStorage, Storage};
use floe::Repository;

const GROUP_JSON: &str = r#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;
const ARRAY_JSON: &str = r#"{"zarr_format":3,"node_type":"array","shape":[10],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[10]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{}}"#;

/// A snapshot of `n` nodes (at least 1) on top of the initial one.
fn big_snapshot(n: usize) -> Snapshot {
    let mut nodes = BTreeMap::new();
    let mut add = |path: String, json: &'static str, data: NodeData| {
        let path = NodePath::new(&path).unwrap();
        nodes.insert(
            path.clone(),
            NodeSnapshot {
                id: NodeId::random(),
                path,
                user_data: Bytes::from_static(json.as_bytes()),
                node_data: data,
            },
        );
    };
    add("/".into(), GROUP_JSON, NodeData::Group);
    let array = NodeData::Array(ArrayData {
        shape: vec![DimensionShape::regular(10, 10)],
        dimension_names: None,
        manifests: Vec::new(),
    });
    let mut made = 1;
    'groups: for g in 0.. {
        if made == n {
            break;
        }
        add(format!("/g{g:04}"), GROUP_JSON, NodeData::Group);
        made += 1;
        for a in 0..999 {
            if made == n {
                break 'groups;
            }
            add(format!("/g{g:04}/a{a:03}"), ARRAY_JSON, array.clone());
            made += 1;
        }
    }
    let mut snap = Snapshot::initial(SpecVersion::V1);
    snap.id = SnapshotId::random();
    snap.parent_id = Some(SnapshotId::INITIAL);
    snap.message = format!("{n} nodes");
    snap.nodes = nodes;
    snap
}

/// Creates the repository at `dir` unless it is there; returns its tip.
async fn build_repo(dir: &Path, n: usize) -> SnapshotId {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    if Repository::exists(storage.as_ref()).await.unwrap() {
        let repo = Repository::open(storage).await.unwrap();
        return repo.lookup_branch("main").await.unwrap();
    }
    let repo = Repository::create_with(
        Arc::clone(&storage),
        None,
        floe::format::SpecVersion::V1,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let snap = Arc::new(big_snapshot(n));
    let id = snap.id;
    AssetManager::new(Arc::clone(&storage))
        .write_snapshot(snap)
        .await
        .unwrap();
    repo.reset_branch("main", id, None).await.unwrap();
    eprintln!(
        "built a snapshot of {n} nodes in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    id
}

/// Runs `floe args` with output to `/dev/null`; returns its peak RSS (bytes) and
/// wall time (seconds).
fn measure(args: &[&str]) -> (u64, f64) {
    let started = Instant::now();
    let bin = std::env::var("FLOE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_floe").into());
    // `wait4` below reaps it (and reports its peak memory, which `wait` does not).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value, and `wait4` writes only to the
    // two pointers given, which live for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "floe {args:?} failed: status {status}"
    );
    // Linux reports ru_maxrss in KiB.
    let rss = u64::try_from(usage.ru_maxrss).unwrap() * 1024;
    (rss, started.elapsed().as_secs_f64())
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let n: usize = std::env::var("FLOE_MEM_BENCH_NODES")
        .ok()
        .map(|v| v.parse().unwrap())
        .unwrap_or(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::var("FLOE_MEM_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| tmp.path().join("repo"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tip = rt.block_on(build_repo(&dir, n));
    let file = dir.join("snapshots").join(tip.to_string());
    let size = std::fs::metadata(&file).unwrap().len();
    println!(
        "snapshot {tip}: {n} nodes, {:.1} MB on disk",
        size as f64 / 1e6
    );
    let repo = dir.to_str().unwrap();
    let tip = tip.to_string();
    let tag = format!("t{}", SnapshotId::random());
    let runs: [(&str, Vec<&str>); 6] = [
        ("log -n 1", vec!["log", repo, "-n", "1"]),
        (
            "log -n 1 --ref <id>",
            vec!["log", repo, "-n", "1", "--ref", &tip],
        ),
        ("tag create", vec!["tag", "create", repo, &tag]),
        ("ls", vec!["ls", repo]),
        ("ls /g0000", vec!["ls", repo, "/g0000"]),
        ("ls --json", vec!["ls", repo, "--json"]),
    ];
    println!("{:<24} {:>12} {:>10}", "command", "peak RSS MB", "time s");
    for (name, args) in &runs {
        let (rss, secs) = measure(args);
        println!("{name:<24} {:>12.1} {secs:>10.2}", rss as f64 / 1e6);
    }
}
