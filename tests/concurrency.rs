//! Multi-process concurrency: several OS processes commit to one branch, race to
//! create one tag, or write forks of one session that are merged and committed once,
//! on the local filesystem and on the S3 test server.
//!
//! This test binary has its own `main` (`harness = false`): run without arguments it
//! is the parent and runs every scenario; run with `--worker ...` it is one of the
//! child processes the parent spawns.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{array_def, p};
use floe::format::SpecVersion;
use floe::session::CommitOptions;
use floe::storage::{create_storage, Storage};
use floe::{Error, Repository, SnapshotId, VersionSelector};

const PROCESSES: usize = 8;
const COMMITS_PER_PROCESS: usize = 25;
/// Exit status of a tag-race worker that lost (the tag existed).
const LOST: i32 = 3;

fn storage(url: &str) -> Arc<dyn Storage> {
    create_storage(url, None).expect("open storage")
}

async fn create(url: &str, spec: SpecVersion) -> Repository {
    Repository::create_with(storage(url), None, spec, floe::OpenOptions::default())
        .await
        .unwrap()
}

/// Blocks until `go` exists, so that all workers start together.
fn wait_for(go: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !go.exists() {
        assert!(Instant::now() < deadline, "go signal never came");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn chunk_value(worker: usize, seq: usize) -> Bytes {
    // Larger than the inline threshold, so every commit writes a native chunk too.
    Bytes::from(vec![(worker * COMMITS_PER_PROCESS + seq) as u8; 600])
}

async fn commit_worker(url: &str, worker: usize, go: &Path) -> i32 {
    let repo = Repository::open(storage(url)).await.expect("open");
    wait_for(go);
    let opts = CommitOptions::default().max_attempts(10_000);
    for seq in 0..COMMITS_PER_PROCESS {
        let s = repo.writable_session("main").await.expect("session");
        let index = (worker * COMMITS_PER_PROCESS + seq) as u64;
        s.set_chunk(&p("/data"), &[index], chunk_value(worker, seq))
            .await
            .expect("set chunk");
        let meta = BTreeMap::from([
            ("worker".to_string(), serde_json::json!(worker)),
            ("seq".to_string(), serde_json::json!(seq)),
        ]);
        if let Err(e) = s
            .commit_with(&format!("worker {worker} commit {seq}"), meta, opts.clone())
            .await
        {
            eprintln!("worker {worker} commit {seq} failed: {e}");
            return 1;
        }
    }
    0
}

async fn tag_worker(url: &str, snapshot: &str, go: &Path) -> i32 {
    let repo = Repository::open(storage(url)).await.expect("open");
    let id: SnapshotId = snapshot.parse().expect("snapshot id");
    wait_for(go);
    match repo.create_tag("race", id).await {
        Ok(()) => 0,
        Err(Error::TagExists { .. }) => LOST,
        Err(e) => {
            eprintln!("tag worker error: {e}");
            1
        }
    }
}

/// Chunks each fork worker writes.
const CHUNKS_PER_FORK: usize = 50;

fn fork_value(worker: usize, i: usize) -> Bytes {
    Bytes::from(vec![(worker * 7 + i) as u8; 300])
}

/// A fork worker: resumes the fork in `fork_in` from its own handle on `url`, writes
/// its region of `/data` and of the uncommitted `/fresh`, and returns the fork in
/// `fork_out`.
async fn fork_worker(url: &str, worker: usize, fork_in: &Path, fork_out: &Path) -> i32 {
    let repo = Repository::open(storage(url)).await.expect("open");
    let bytes = std::fs::read(fork_in).expect("read fork");
    let fork = repo.fork_from_bytes(&bytes).await.expect("resume fork");
    for i in 0..CHUNKS_PER_FORK {
        let index = (worker * CHUNKS_PER_FORK + i) as u64;
        fork.set_chunk(&p("/data"), &[index], fork_value(worker, i))
            .await
            .expect("set chunk");
    }
    fork.set_chunk(&p("/fresh"), &[worker as u64], fork_value(worker, 99))
        .await
        .expect("set chunk of the new array");
    std::fs::write(fork_out, fork.to_fork_bytes().await.expect("serialize")).expect("write fork");
    0
}

fn spawn_workers(args: Vec<Vec<String>>) -> (PathBuf, Vec<std::process::Child>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let exe = std::env::current_exe().unwrap();
    let children = args
        .into_iter()
        .map(|a| {
            Command::new(&exe)
                .arg("--worker")
                .args(a)
                .arg(&go)
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    (go, children, dir)
}

fn release_and_wait(go: &Path, children: Vec<std::process::Child>) -> Vec<i32> {
    // Give every worker time to open the repository before the start signal.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(go, b"go").unwrap();
    children
        .into_iter()
        .map(|mut c| c.wait().unwrap().code().unwrap_or(-1))
        .collect()
}

async fn commit_race(url: &str, spec: SpecVersion) {
    let repo = create(url, spec).await;
    let n = (PROCESSES * COMMITS_PER_PROCESS) as u64;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[n], &[1], "uint8"))
        .unwrap();
    let setup = s.commit("create array").await.unwrap();

    let args = (0..PROCESSES)
        .map(|w| vec!["commit".to_string(), url.to_string(), w.to_string()])
        .collect();
    let (go, children, _dir) = spawn_workers(args);
    let codes = release_and_wait(&go, children);
    assert!(codes.iter().all(|&c| c == 0), "worker exit codes {codes:?}");

    // The repository opens cleanly and main holds exactly the 200 new commits.
    let repo = Repository::open(storage(url)).await.unwrap();
    let tip = repo.lookup_branch("main").await.unwrap();
    let log = repo.ancestry(tip).await.unwrap();
    assert_eq!(
        log.len(),
        PROCESSES * COMMITS_PER_PROCESS + 2,
        "200 commits + setup + initial"
    );
    assert_eq!(log[log.len() - 2].id, setup);
    let mut seen = BTreeSet::new();
    for info in &log[..log.len() - 2] {
        let w = info.metadata["worker"].as_u64().unwrap() as usize;
        let q = info.metadata["seq"].as_u64().unwrap() as usize;
        assert_eq!(info.message, format!("worker {w} commit {q}"));
        assert!(seen.insert((w, q)), "commit ({w}, {q}) appears twice");
    }
    assert_eq!(
        seen.len(),
        PROCESSES * COMMITS_PER_PROCESS,
        "every process's commits are present"
    );
    // Each worker's commits are in its own order.
    for w in 0..PROCESSES {
        let seqs: Vec<usize> = log
            .iter()
            .rev()
            .filter(|i| i.metadata.get("worker").and_then(|v| v.as_u64()) == Some(w as u64))
            .map(|i| i.metadata["seq"].as_u64().unwrap() as usize)
            .collect();
        assert_eq!(seqs, (0..COMMITS_PER_PROCESS).collect::<Vec<_>>());
    }
    // Spec 2: every `overwritten/` copy of the `repo` object is one a landed update
    // names in the ops log; the copies of updates that lost a race were removed.
    if spec == SpecVersion::V2 {
        let named: BTreeSet<String> = repo
            .ops_log()
            .await
            .unwrap()
            .into_iter()
            .filter_map(|u| u.backup_path)
            .collect();
        let stored: BTreeSet<String> = storage(url)
            .list("overwritten/")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key.trim_start_matches("overwritten/").to_string())
            .collect();
        assert!(
            named.len() > PROCESSES * COMMITS_PER_PROCESS,
            "{}",
            named.len()
        );
        assert_eq!(stored, named, "orphaned copies of the repo object");
    }
    // Every chunk is readable with the value its commit wrote.
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        r.list_chunks(&p("/data")).await.unwrap().len(),
        PROCESSES * COMMITS_PER_PROCESS
    );
    for w in 0..PROCESSES {
        for q in 0..COMMITS_PER_PROCESS {
            let idx = (w * COMMITS_PER_PROCESS + q) as u64;
            let got = r.get_chunk(&p("/data"), &[idx], None).await.unwrap();
            assert_eq!(got, Some(chunk_value(w, q)), "chunk {idx}");
        }
    }
}

async fn fork_merge(url: &str, spec: SpecVersion) {
    let repo = create(url, spec).await;
    let n = (PROCESSES * CHUNKS_PER_FORK) as u64;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[n], &[1], "uint8"))
        .unwrap();
    let setup = s.commit("create array").await.unwrap();
    // Not committed: the forks see it and write to it.
    s.add_array(
        &p("/fresh"),
        array_def("/fresh", &[PROCESSES as u64], &[1], "uint8"),
    )
    .unwrap();
    let fork = s.fork().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fork_in = dir.path().join("fork.in");
    std::fs::write(&fork_in, fork.to_fork_bytes().await.unwrap()).unwrap();
    let outs: Vec<PathBuf> = (0..PROCESSES)
        .map(|w| dir.path().join(format!("fork.{w}.out")))
        .collect();
    let args = (0..PROCESSES)
        .map(|w| {
            vec![
                "fork".to_string(),
                url.to_string(),
                w.to_string(),
                fork_in.display().to_string(),
                outs[w].display().to_string(),
            ]
        })
        .collect();
    let (go, children, _dir) = spawn_workers(args);
    let codes = release_and_wait(&go, children);
    assert!(codes.iter().all(|&c| c == 0), "worker exit codes {codes:?}");

    let mut forks = Vec::new();
    for out in &outs {
        let bytes = std::fs::read(out).unwrap();
        forks.push(repo.fork_from_bytes(&bytes).await.unwrap());
    }
    s.merge(forks).await.unwrap();
    // A result delivered twice is refused, not applied twice.
    let again = repo
        .fork_from_bytes(&std::fs::read(&outs[0]).unwrap())
        .await
        .unwrap();
    assert!(matches!(
        s.merge([again]).await,
        Err(Error::ForkAlreadyMerged { .. })
    ));
    let id = s.commit("merged forks").await.unwrap();

    let repo = Repository::open(storage(url)).await.unwrap();
    let log = repo
        .ancestry(repo.lookup_branch("main").await.unwrap())
        .await
        .unwrap();
    assert_eq!(log.len(), 3, "one commit for all the workers");
    assert_eq!((log[0].id, log[1].id), (id, setup));
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for w in 0..PROCESSES {
        for i in 0..CHUNKS_PER_FORK {
            let index = (w * CHUNKS_PER_FORK + i) as u64;
            let got = r.get_chunk(&p("/data"), &[index], None).await.unwrap();
            assert_eq!(got, Some(fork_value(w, i)), "chunk {index}");
        }
        let got = r.get_chunk(&p("/fresh"), &[w as u64], None).await.unwrap();
        assert_eq!(got, Some(fork_value(w, 99)), "new array chunk {w}");
    }
}

async fn tag_race(url: &str, spec: SpecVersion) {
    let repo = create(url, spec).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(
        &p("/t"),
        array_def("/t", &[PROCESSES as u64], &[1], "uint8"),
    )
    .unwrap();
    let mut snaps = Vec::new();
    for w in 0..PROCESSES {
        s.set_chunk(&p("/t"), &[w as u64], Bytes::from(vec![w as u8]))
            .await
            .unwrap();
        snaps.push(s.commit(&format!("c{w}")).await.unwrap());
    }
    let args = snaps
        .iter()
        .map(|id| vec!["tag".to_string(), url.to_string(), id.to_string()])
        .collect();
    let (go, children, _dir) = spawn_workers(args);
    let codes = release_and_wait(&go, children);
    let winners: Vec<usize> = codes
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == 0)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one process creates the tag: {codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|&&c| c == LOST).count(),
        PROCESSES - 1,
        "{codes:?}"
    );
    let repo = Repository::open(storage(url)).await.unwrap();
    assert_eq!(repo.list_tags().await.unwrap(), vec!["race"]);
    assert_eq!(
        repo.lookup_tag("race").await.unwrap(),
        snaps[winners[0]],
        "the tag never moved"
    );
}

/// The multi-process scenarios.
#[derive(Clone, Copy)]
enum Scenario {
    Commit,
    Tag,
    Fork,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if args.get(1).map(String::as_str) == Some("--worker") {
        let go = PathBuf::from(args.last().unwrap());
        let code = rt.block_on(async {
            match args[2].as_str() {
                "commit" => commit_worker(&args[3], args[4].parse().unwrap(), &go).await,
                "tag" => tag_worker(&args[3], &args[4], &go).await,
                "fork" => {
                    fork_worker(
                        &args[3],
                        args[4].parse().unwrap(),
                        Path::new(&args[5]),
                        Path::new(&args[6]),
                    )
                    .await
                }
                other => panic!("unknown worker {other}"),
            }
        });
        std::process::exit(code);
    }
    // Test-name filters, as libtest takes them (flags are ignored).
    let filters: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with('-')).collect();
    let tmp = tempfile::tempdir().unwrap();
    let local = |name: &str| Some(tmp.path().join(name).display().to_string());
    let (v1, v2) = (SpecVersion::V1, SpecVersion::V2);
    let scenarios: Vec<(&str, Option<String>, Scenario, SpecVersion)> = vec![
        (
            "local_commit_race_8_processes_x_25_commits",
            local("commit-race"),
            Scenario::Commit,
            v1,
        ),
        (
            "local_tag_race_8_processes",
            local("tag-race"),
            Scenario::Tag,
            v1,
        ),
        (
            "local_fork_merge_8_processes",
            local("fork-merge"),
            Scenario::Fork,
            v1,
        ),
        (
            "s3_commit_race_8_processes_x_25_commits",
            common::s3_url("commit-race"),
            Scenario::Commit,
            v1,
        ),
        (
            "s3_tag_race_8_processes",
            common::s3_url("tag-race"),
            Scenario::Tag,
            v1,
        ),
        (
            "s3_fork_merge_8_processes",
            common::s3_url("fork-merge"),
            Scenario::Fork,
            v1,
        ),
        (
            "spec2_local_commit_race_8_processes_x_25_commits",
            local("commit-race-2"),
            Scenario::Commit,
            v2,
        ),
        (
            "spec2_local_tag_race_8_processes",
            local("tag-race-2"),
            Scenario::Tag,
            v2,
        ),
        (
            "spec2_local_fork_merge_8_processes",
            local("fork-merge-2"),
            Scenario::Fork,
            v2,
        ),
        (
            "spec2_s3_commit_race_8_processes_x_25_commits",
            common::s3_url("commit-race-2"),
            Scenario::Commit,
            v2,
        ),
        (
            "spec2_s3_tag_race_8_processes",
            common::s3_url("tag-race-2"),
            Scenario::Tag,
            v2,
        ),
    ];
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (name, url, scenario, spec) in scenarios {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let Some(url) = url else {
            println!("test {name} ... skipped");
            skipped += 1;
            continue;
        };
        let started = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async {
                match scenario {
                    Scenario::Commit => commit_race(&url, spec).await,
                    Scenario::Tag => tag_race(&url, spec).await,
                    Scenario::Fork => fork_merge(&url, spec).await,
                }
            })
        }));
        match result {
            Ok(()) => {
                println!(
                    "test {name} ... ok ({:.1}s)",
                    started.elapsed().as_secs_f64()
                );
                passed += 1;
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    println!("\nconcurrency: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
