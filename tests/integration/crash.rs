//! Crash points: writer processes are killed with SIGKILL at random moments of their
//! commits, over and over, on local storage and on the S3 test server. After each kill
//! the repository opens, every branch and tag resolves to a readable snapshot, and
//! every commit the writer reported as done is in `main`'s history with its values
//! unchanged.
//!
//! With chunk packing on, a writer sets every chunk in each commit, several to a
//! pack: killed while a pack is being written or before its commit, nothing
//! committed is lost and no ref points into a pack that is not complete.
//!
//! `floe compact` killed at random moments leaves the branch at its commit or at
//! the compaction's, with the same values either way; `floe verify` finds nothing
//! wrong, and a last run completes.
//!
//! `FLOE_CRASH_ROUNDS` sets the number of kills per storage (default 10).

use crate::common;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::config::{ChunkPackingConfig, ChunkPackingMode, RepositoryConfig};
use floe::storage::{create_storage, open_storage};
use floe::{Repository, SnapshotId, VersionSelector};
use rand::Rng;

const CHILD_ENV: &str = "FLOE_CRASH_WRITER_URL";
/// The repository of the packing writer ([`crash_packed_writer_child`]).
const PACKED_CHILD_ENV: &str = "FLOE_CRASH_PACKED_WRITER_URL";
/// Chunks of the test array (each 1 KiB, so stored as native chunk objects).
const CHUNKS: u32 = 16;

fn chunk(v: u8) -> Bytes {
    Bytes::from(vec![v; 1024])
}

/// The writer: commits one chunk (and every third time a tag) per commit, forever,
/// printing `COMMITTED <snapshot> <index> <value>` after each commit returns.
#[test]
fn crash_writer_child() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return; // not a child: nothing to do
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let repo = Repository::open(open_storage(&url, None).unwrap())
            .await
            .unwrap();
        let session = repo.writable_session("main").await.unwrap();
        let mut rng = rand::rng();
        let mut out = std::io::stdout().lock();
        for n in 0u64.. {
            let index = rng.random_range(0..CHUNKS);
            let value = rng.random_range(1..=255u8);
            session
                .set_chunk(&p("/a"), &[index.into()], chunk(value))
                .await
                .unwrap();
            let id = session.commit(&format!("write {n}")).await.unwrap();
            if n % 3 == 0 {
                let _ = repo.create_tag(&format!("t{id}"), id).await;
            }
            writeln!(out, "COMMITTED {id} {index} {value}").unwrap();
            out.flush().unwrap();
        }
    });
}

/// The packing writer: sets every chunk to one value per commit (packed four to a
/// pack, so packs are written during the writes and by the commit), printing
/// `COMMITTED <snapshot> <index> <value>` for each chunk after each commit returns.
#[test]
fn crash_packed_writer_child() {
    let Ok(url) = std::env::var(PACKED_CHILD_ENV) else {
        return; // not a child: nothing to do
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let repo = Repository::open(open_storage(&url, None).unwrap())
            .await
            .unwrap();
        let session = repo.writable_session("main").await.unwrap();
        let mut rng = rand::rng();
        let mut out = std::io::stdout().lock();
        for n in 0u64.. {
            let value = rng.random_range(1..=255u8);
            for index in 0..CHUNKS {
                session
                    .set_chunk(&p("/a"), &[index.into()], chunk(value))
                    .await
                    .unwrap();
            }
            let id = session.commit(&format!("write {n}")).await.unwrap();
            for index in 0..CHUNKS {
                writeln!(out, "COMMITTED {id} {index} {value}").unwrap();
            }
            out.flush().unwrap();
        }
    });
}

/// The configuration of the packing writer's repositories: packing on, packs of
/// four chunks.
fn packed_config() -> RepositoryConfig {
    let mut c = RepositoryConfig::default();
    c.set_chunk_packing(Some(&ChunkPackingConfig {
        mode: Some(ChunkPackingMode::Enabled),
        threshold_bytes: None,
        target_size_bytes: Some(4 * 1024),
    }))
    .unwrap();
    c
}

/// Runs writer processes on `url` and kills each at a random moment.
async fn kill_writers(url: &str) {
    kill_writers_of(url, "crash::crash_writer_child", CHILD_ENV, None).await;
}

/// Runs writer processes on `url` (the test `child_test`, given the url in `env`) and
/// kills each at a random moment; the repository is created with `config`.
async fn kill_writers_of(url: &str, child_test: &str, env: &str, config: Option<RepositoryConfig>) {
    let repo = Repository::create(create_storage(url, None).unwrap(), config)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(
        &p("/a"),
        array_def("/a", &[1024 * u64::from(CHUNKS)], &[1024], "uint8"),
    )
    .unwrap();
    s.commit("array").await.unwrap();
    let rounds: usize = std::env::var("FLOE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut committed: Vec<(SnapshotId, u32, u8)> = Vec::new();
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .env(env, url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
        let reader = std::thread::spawn(move || {
            let mut first = Some(first_tx);
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| {
                    let mut w = l.strip_prefix("COMMITTED ")?.split(' ');
                    let id: SnapshotId = w.next()?.parse().ok()?;
                    let index: u32 = w.next()?.parse().ok()?;
                    let value: u8 = w.next()?.parse().ok()?;
                    if let Some(tx) = first.take() {
                        let _ = tx.send(());
                    }
                    Some((id, index, value))
                })
                .collect::<Vec<_>>()
        });
        // The kill lands at a random moment of the commits after the writer's
        // first (however long a loaded machine takes to start it).
        let started = tokio::time::timeout(Duration::from_secs(60), first_rx).await;
        assert!(
            matches!(started, Ok(Ok(()))),
            "round {round}: the writer did not commit within 60 s"
        );
        let delay = rand::rng().random_range(0..450);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        committed.extend(reader.join().unwrap());
        check(url, &committed, round).await;
    }
    assert!(
        committed.len() >= rounds,
        "the writers committed only {} times in {rounds} rounds",
        committed.len()
    );
}

/// The invariants after a kill.
async fn check(url: &str, committed: &[(SnapshotId, u32, u8)], round: usize) {
    let repo = Repository::open(open_storage(url, None).unwrap())
        .await
        .unwrap_or_else(|e| panic!("round {round}: the repository does not open: {e}"));
    let tip = repo.lookup_branch("main").await.unwrap();
    let history = common::history(&repo, tip).await;
    for (id, index, value) in committed {
        assert!(history.contains(id), "round {round}: commit {id} was lost");
        let s = repo
            .readonly_session(&VersionSelector::Snapshot(*id))
            .await
            .unwrap();
        let got = s
            .get_chunk(&p("/a"), &[u64::from(*index)], None)
            .await
            .unwrap();
        assert_eq!(
            got,
            Some(chunk(*value)),
            "round {round}: commit {id} changed"
        );
    }
    let mut refs = vec![tip];
    for t in repo.list_tags().await.unwrap() {
        refs.push(repo.lookup_tag(&t).await.unwrap());
    }
    for id in refs {
        let s = repo
            .readonly_session(&VersionSelector::Snapshot(id))
            .await
            .unwrap_or_else(|e| panic!("round {round}: snapshot {id} is unreadable: {e}"));
        for i in 0..CHUNKS {
            s.get_chunk(&p("/a"), &[i.into()], None)
                .await
                .unwrap_or_else(|e| panic!("round {round}: {id} chunk {i}: {e}"));
        }
    }
}

#[tokio::test]
async fn killed_writers_leave_local_repositories_consistent() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(PACKED_CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("repo").display());
    kill_writers(&url).await;
}

#[tokio::test]
async fn killed_writers_leave_s3_repositories_consistent() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(PACKED_CHILD_ENV).is_ok() {
        return;
    }
    let Some(url) = common::s3_url("crash") else {
        return;
    };
    kill_writers(&url).await;
}

#[tokio::test]
async fn killed_packing_writers_leave_local_repositories_consistent() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(PACKED_CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("repo").display());
    kill_writers_of(
        &url,
        "crash::crash_packed_writer_child",
        PACKED_CHILD_ENV,
        Some(packed_config()),
    )
    .await;
}

/// Chunks of the array `floe compact` is killed on (1 KiB each, one object each),
/// packed four to a pack.
const COMPACT_CHUNKS: u64 = 256;

fn compact_chunk(i: u64) -> Bytes {
    Bytes::from(vec![(i % 251) as u8 + 1; 1024])
}

/// `/a` of `main` reads as written, at `base` or at its compaction (`None`: at
/// any commit); `floe verify` finds no problem. Returns the tip.
async fn check_compacted(
    dir: &std::path::Path,
    base: Option<SnapshotId>,
    round: usize,
) -> SnapshotId {
    let repo = Repository::open(std::sync::Arc::new(
        floe::storage::LocalStorage::new(dir).unwrap(),
    ))
    .await
    .unwrap_or_else(|e| panic!("round {round}: the repository does not open: {e}"));
    let tip = repo.lookup_branch("main").await.unwrap();
    if let Some(base) = base {
        let history = common::history(&repo, tip).await;
        assert!(
            tip == base || history.get(1) == Some(&base),
            "round {round}: main is at {tip}, neither {base} nor its compaction"
        );
    }
    let s = repo
        .readonly_session(&VersionSelector::Snapshot(tip))
        .await
        .unwrap();
    for i in 0..COMPACT_CHUNKS {
        assert_eq!(
            s.get_chunk(&p("/a"), &[i], None).await.unwrap(),
            Some(compact_chunk(i)),
            "round {round}: chunk {i}"
        );
    }
    let verified = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["verify", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "round {round}: floe verify: {}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
    tip
}

#[tokio::test]
async fn killed_compactions_leave_local_repositories_consistent() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(PACKED_CHILD_ENV).is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let path = dir.to_str().unwrap().to_string();
    let mut config = RepositoryConfig::default();
    config
        .set_chunk_packing(Some(&ChunkPackingConfig {
            mode: Some(ChunkPackingMode::Disabled),
            threshold_bytes: None,
            target_size_bytes: Some(4 * 1024),
        }))
        .unwrap();
    let repo = Repository::create(
        create_storage(&format!("file://{path}"), None).unwrap(),
        Some(config),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(
        &p("/a"),
        array_def("/a", &[1024 * COMPACT_CHUNKS], &[1024], "uint8"),
    )
    .unwrap();
    for i in 0..COMPACT_CHUNKS {
        s.set_chunk(&p("/a"), &[i], compact_chunk(i)).await.unwrap();
    }
    let base = s.commit("small chunks").await.unwrap();
    let compact = || {
        Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["compact", &path, "main"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // How long a whole run takes here; kills land within that time.
    let started = std::time::Instant::now();
    assert!(compact().wait().unwrap().success());
    let mut whole = started.elapsed().as_millis().max(20) as u64;
    assert_ne!(check_compacted(&dir, Some(base), 0).await, base);
    repo.reset_branch("main", base, None).await.unwrap();

    let rounds: usize = std::env::var("FLOE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut interrupted = 0;
    // Rounds killed after writing a pack.
    let mut with_garbage = 0;
    let chunk_files = || std::fs::read_dir(dir.join("chunks")).unwrap().count();
    let mut files_before = chunk_files();
    for round in 1..=rounds {
        let mut child = compact();
        let delay = rand::rng().random_range(0..whole);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        if child.try_wait().unwrap().is_some() {
            // Quicker than measured (CI runs tests side by side, so the measure may
            // have been taken on a loaded machine): later kills land sooner.
            whole = delay.max(20);
        } else {
            child.kill().unwrap(); // SIGKILL
        }
        child.wait().unwrap();
        if check_compacted(&dir, Some(base), round).await == base {
            interrupted += 1;
            if chunk_files() > files_before {
                with_garbage += 1;
            }
        } else {
            // It finished before the kill: start again from the base.
            repo.reset_branch("main", base, None).await.unwrap();
        }
        files_before = chunk_files();
    }
    eprintln!(
        "{interrupted} of {rounds} compactions killed before their commit, {with_garbage} \
         of them after writing packs (a run: {whole} ms)"
    );
    assert!(interrupted > 0, "no kill landed before a commit");
    // A last run completes, and garbage collection leaves only its packs.
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["compact", &path, "main", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["chunks"], COMPACT_CHUNKS, "{summary}");
    assert_eq!(summary["packs"], COMPACT_CHUNKS / 4, "{summary}");
    check_compacted(&dir, Some(base), rounds + 1).await;
    common::expire_and_collect(&repo).await;
    assert_eq!(chunk_files() as u64, COMPACT_CHUNKS / 4);
    check_compacted(&dir, None, rounds + 2).await;
}
