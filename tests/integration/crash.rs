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
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| {
                    let mut w = l.strip_prefix("COMMITTED ")?.split(' ');
                    let id: SnapshotId = w.next()?.parse().ok()?;
                    let index: u32 = w.next()?.parse().ok()?;
                    let value: u8 = w.next()?.parse().ok()?;
                    Some((id, index, value))
                })
                .collect::<Vec<_>>()
        });
        let delay = rand::rng().random_range(150..600);
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
