//! Storage conformance: every backend (memory, local filesystem, S3) honours the
//! [`Storage`] contract the repository engine relies on: reads and typed errors,
//! ranged reads, conditional writes (create-if-absent and compare-and-swap) that have
//! exactly one winner among racing tasks and racing OS processes, idempotent deletes,
//! and listing by raw key prefix in key-byte order.
//!
//! The S3 tests run against the server named by `FLOE_TEST_S3_BUCKET` and the `AWS_*`
//! variables (.ci/run starts one); they are skipped when it is absent, except in CI
//! (`CI=true`), where that is a failure.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::Utc;
use floe::storage::conformance::{keys, storage_contract};
use floe::storage::{
    create_storage, new_in_memory_storage, open_storage, parse_storage_url, Durability,
    LocalStorage, LocalStorageOptions, ObjectStorage, ObjectVersion, S3Options, Storage,
    StorageLocation, WriteOutcome,
};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn local(dir: &Path) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_storage_conformance() {
    storage_contract(new_in_memory_storage()).await;
}

/// The ranged-listing path (start after a key, stop after the prefix) on a backend
/// that lists in key order, without an S3 server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ranged_listing_conformance() {
    let store = Arc::new(object_store::memory::InMemory::new());
    let s = ObjectStorage::new(store, "root", "memory://".to_string()).with_ranged_listing(true);
    assert!(s.ranged_listing());
    storage_contract(Arc::new(s)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("root").display());
    storage_contract(create_storage(&url, None).unwrap()).await;
}

/// The synced mode (fsync of every object and its directory) keeps the whole contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_conformance_synced() {
    let dir = tempfile::tempdir().unwrap();
    let options = LocalStorageOptions::default().durability(Durability::Synced);
    let storage = LocalStorage::with_options(&dir.path().join("root"), options).unwrap();
    assert_eq!(storage.options().durability, Durability::Synced);
    assert_eq!(
        LocalStorage::new(dir.path()).unwrap().options().durability,
        Durability::Process,
        "the default is object-store durability"
    );
    storage_contract(Arc::new(storage)).await;
}

/// Local versions are `object_store` etags, `inode-mtime-size`. Inodes are reused as
/// soon as they are freed and some file systems keep whole-second mtimes (ext4 with
/// 128-byte inodes, FAT, HFS+), so without care a superseded version comes back after
/// two swaps and lets a stale compare-and-swap through. .ci/run mounts such a file
/// system at `FLOE_TEST_COARSE_MTIME_DIR` when it can (root, loop devices).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_conformance_on_a_whole_second_mtime_filesystem() {
    let Some(dir) = std::env::var_os("FLOE_TEST_COARSE_MTIME_DIR") else {
        eprintln!("SKIPPED: FLOE_TEST_COARSE_MTIME_DIR is not set (.ci/run mounts one)");
        return;
    };
    let root = tempfile::tempdir_in(dir).unwrap();
    // The file system must really drop sub-second mtimes, or this test proves nothing.
    let probe = root.path().join("probe");
    let f = std::fs::File::create(&probe).unwrap();
    let t = std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
    f.set_modified(t).unwrap();
    drop(f);
    let kept = std::fs::metadata(&probe).unwrap().modified().unwrap();
    assert_eq!(
        kept,
        std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        "FLOE_TEST_COARSE_MTIME_DIR keeps sub-second mtimes"
    );
    std::fs::remove_file(&probe).unwrap();
    let url = root.path().join("root").display().to_string();
    storage_contract(create_storage(&url, None).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_lists_no_temporary_files_nor_missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let s = local(&dir.path().join("root"));
    assert!(
        keys(s.as_ref(), "").await.is_empty(),
        "an empty root lists nothing"
    );
    assert!(keys(s.as_ref(), "no/such/dir/").await.is_empty());
    s.put("a/obj", b("x")).await.unwrap();
    // What an interrupted compare-and-swap or object_store upload leaves behind.
    std::fs::write(
        dir.path().join("root/a/.obj.floe-tmp-0123456789abcdef"),
        b"t",
    )
    .unwrap();
    std::fs::write(dir.path().join("root/a/obj#1"), b"t").unwrap();
    assert_eq!(keys(s.as_ref(), "").await, vec!["a/obj".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_storage_conformance() {
    let Some(url) = common::s3_url("conformance") else {
        return;
    };
    storage_contract(create_storage(&url, None).unwrap()).await;
}

/// Virtual chunk checksums read with `If-Match` / `If-Unmodified-Since`: the S3
/// server must refuse reads whose precondition does not hold.
#[tokio::test]
async fn s3_server_honours_read_preconditions() {
    use object_store::{GetOptions, ObjectStore, ObjectStoreExt, PutPayload};
    let Some(bucket) = common::s3_bucket() else {
        return;
    };
    let url = common::s3_url("read-preconditions").unwrap();
    let StorageLocation::S3 { prefix, .. } = parse_storage_url(&url).unwrap() else {
        panic!("{url} is not an S3 URL");
    };
    let store = S3Options::from_env().build(&bucket).unwrap();
    let path = object_store::path::Path::from(format!("{prefix}/obj"));
    let put = store
        .put(&path, PutPayload::from_static(b"0123456789"))
        .await
        .unwrap();
    let etag = put.e_tag.expect("S3 PUT returns an etag");

    let ok = store
        .get_opts(&path, GetOptions::new().with_if_match(Some(etag.clone())))
        .await
        .unwrap();
    assert_eq!(ok.bytes().await.unwrap(), Bytes::from_static(b"0123456789"));
    let e = store
        .get_opts(&path, GetOptions::new().with_if_match(Some("\"0000\"")))
        .await
        .unwrap_err();
    assert!(
        matches!(e, object_store::Error::Precondition { .. }),
        "If-Match: {e:?}"
    );

    let past = Utc::now() - chrono::Duration::hours(1);
    let future = Utc::now() + chrono::Duration::hours(1);
    let e = store
        .get_opts(
            &path,
            GetOptions::new().with_if_unmodified_since(Some(past)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, object_store::Error::Precondition { .. }),
        "If-Unmodified-Since: {e:?}"
    );
    store
        .get_opts(
            &path,
            GetOptions::new().with_if_unmodified_since(Some(future)),
        )
        .await
        .unwrap();

    let ranged = store
        .get_opts(
            &path,
            GetOptions::new()
                .with_if_match(Some(etag))
                .with_range(Some(2..5u64)),
        )
        .await
        .unwrap();
    assert_eq!(ranged.bytes().await.unwrap(), Bytes::from_static(b"234"));
}

// ---------------------------------------------------------------------------------
// Compare-and-swap races between OS processes. The test re-runs its own executable as
// PROCESSES children (`--exact <test>`, marked by CHILD_ENV); all wait for a go file,
// then race `put_if_match` on one key with the same expected version, round after
// round. Exactly one process may win each round.
// ---------------------------------------------------------------------------------

const PROCESSES: usize = 8;
const ROUNDS: usize = 10;
const CAS_KEY: &str = "refs/branch.main/ref.json";
const CHILD_ENV: &str = "FLOE_CONFORMANCE_CAS_CHILD";
const SYNC_ENV: &str = "FLOE_CONFORMANCE_CAS_SYNC";
const URL_ENV: &str = "FLOE_CONFORMANCE_CAS_URL";
const WAIT: Duration = Duration::from_secs(120);

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + WAIT;
    while !path.exists() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes a file so that it appears whole (rename of a complete temporary file).
fn publish(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The child process's side: `Some` when this process is a CAS race child.
fn cas_child() -> bool {
    let Ok(index) = std::env::var(CHILD_ENV) else {
        return false;
    };
    let sync = PathBuf::from(std::env::var(SYNC_ENV).unwrap());
    let url = std::env::var(URL_ENV).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let storage = open_storage(&url, None).unwrap();
    // Warm up (connections, directory handles) before declaring readiness.
    rt.block_on(storage.head(CAS_KEY)).unwrap();
    publish(&sync.join(format!("ready-{index}")), "ready");
    for round in 0..ROUNDS {
        wait_for(&sync.join(format!("go-{round}")), "the go signal");
        let expected = std::fs::read_to_string(sync.join(format!("version-{round}"))).unwrap();
        let body = b(&format!("process {index} round {round}"));
        let result =
            match rt.block_on(storage.put_if_match(CAS_KEY, body, &ObjectVersion(expected))) {
                Ok(WriteOutcome::Written(_)) => "won".to_string(),
                Ok(WriteOutcome::PreconditionFailed) => "lost".to_string(),
                Err(e) => format!("error: {e}"),
            };
        publish(&sync.join(format!("result-{round}-{index}")), &result);
    }
    true
}

/// Waits up to [`WAIT`] for `child` to publish `path`: `false` when the time
/// runs out or the child exits without having published it.
///
/// The file is looked for once more after the child is seen to have exited: a
/// child publishes its last result and exits between the parent's two checks,
/// which an earlier version of this loop took for a child that gave up.
fn await_child_file(path: &Path, child: &mut Child) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        if path.exists() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return path.exists();
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Kills the children still running when the parent gives up (a failed assertion).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn cas_race_between_processes(test_name: &str, url: &str) {
    let sync_dir = tempfile::tempdir().unwrap();
    let sync = sync_dir.path();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let storage = create_storage(url, None).unwrap();
    rt.block_on(storage.put(CAS_KEY, b("initial"))).unwrap();

    let exe = std::env::current_exe().unwrap();
    let mut children = Children(Vec::new());
    for i in 0..PROCESSES {
        let log = std::fs::File::create(sync.join(format!("child-{i}.log"))).unwrap();
        let child = Command::new(&exe)
            .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, i.to_string())
            .env(SYNC_ENV, sync)
            .env(URL_ENV, url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        children.0.push(child);
    }
    let logs = || {
        (0..PROCESSES)
            .map(|i| {
                std::fs::read_to_string(sync.join(format!("child-{i}.log"))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for i in 0..PROCESSES {
        if !await_child_file(&sync.join(format!("ready-{i}")), &mut children.0[i]) {
            panic!("child {i} never got ready; logs:\n{}", logs());
        }
    }

    let mut losers = 0;
    for round in 0..ROUNDS {
        let v = rt
            .block_on(storage.put(CAS_KEY, b(&format!("initial {round}"))))
            .unwrap()
            .unwrap();
        publish(&sync.join(format!("version-{round}")), &v.0);
        publish(&sync.join(format!("go-{round}")), "go");
        let mut results = Vec::new();
        for i in 0..PROCESSES {
            let path = sync.join(format!("result-{round}-{i}"));
            if !await_child_file(&path, &mut children.0[i]) {
                panic!(
                    "child {i} gave no result in round {round}; logs:\n{}",
                    logs()
                );
            }
            results.push(std::fs::read_to_string(&path).unwrap());
        }
        let winners: Vec<usize> = (0..PROCESSES).filter(|&i| results[i] == "won").collect();
        assert!(
            results.iter().all(|r| r == "won" || r == "lost"),
            "{url}: round {round}: {results:?}"
        );
        assert_eq!(
            winners.len(),
            1,
            "{url}: round {round}: results {results:?}"
        );
        losers += PROCESSES - 1;
        let stored = rt.block_on(storage.get(CAS_KEY)).unwrap().bytes;
        assert_eq!(
            stored,
            b(&format!("process {} round {round}", winners[0])),
            "{url}: round {round}"
        );
    }
    for (i, c) in children.0.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        assert!(
            status.success(),
            "child {i} failed: {status}; logs:\n{}",
            logs()
        );
    }
    eprintln!(
        "{url}: {ROUNDS} rounds x {PROCESSES} processes: one winner each round, {losers} refused"
    );
}

#[test]
fn local_put_if_match_race_8_processes() {
    if cas_child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("root").display().to_string();
    cas_race_between_processes(
        "storage_conformance::local_put_if_match_race_8_processes",
        &url,
    );
}

#[test]
fn s3_put_if_match_race_8_processes() {
    if cas_child() {
        return;
    }
    let Some(url) = common::s3_url("cas-processes") else {
        return;
    };
    cas_race_between_processes(
        "storage_conformance::s3_put_if_match_race_8_processes",
        &url,
    );
}
