//! Maintenance beside live writers: `expire` and `gc` run while several OS processes
//! commit, on the local filesystem and on the S3 test server, spec 1 and spec 2; no
//! commit that reported success is lost and every ref reads all its data. Plus one
//! deterministic test of each race (a commit landing between expiry's judgement of
//! a branch and its deletion; a writer opened before expiry rewrote the history; a
//! `gc` cut-off inside the safety window).
//!
//! This test binary has its own `main` (`harness = false`): run without arguments it
//! is the parent and runs every scenario; run with `--worker ...` it is one of the
//! child processes the parent spawns.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use common::{array_def, p};
use floe::format::SpecVersion;
use floe::lifecycle::{ExpireOptions, GcOptions, RetentionPolicy, RetentionRule};
use floe::session::CommitOptions;
use floe::storage::{
    create_storage, ObjectInfo, ObjectVersion, Storage, StorageResult, VersionedBytes, WriteOutcome,
};
use floe::{Error, OpenOptions, Repository, SnapshotId, VersionSelector};

/// Writer processes of a live scenario.
const WORKERS: usize = 4;
/// Commits each writer makes to `main`.
const COMMITS: usize = 8;
/// Size of `/data`: each writer's `main` commits, then one chunk per writer for
/// its commit to its own old branch.
const CHUNKS: u64 = (WORKERS * COMMITS + WORKERS) as u64;

fn storage(url: &str) -> Arc<dyn Storage> {
    create_storage(url, None).expect("open storage")
}

async fn create(url: &str, spec: SpecVersion) -> Repository {
    Repository::create_with(storage(url), None, spec, OpenOptions::default())
        .await
        .unwrap()
}

fn value(index: u64) -> Bytes {
    // Larger than the inline threshold, so every commit writes a native chunk.
    Bytes::from(vec![(index % 251) as u8 + 1; 600])
}

fn old_branch(worker: usize) -> String {
    format!("old{worker}")
}

/// Blocks until `go` exists, so that all workers start together.
fn wait_for(go: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !go.exists() {
        assert!(Instant::now() < deadline, "go signal never came");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A writer: opens a session on its old branch (whose tip is expired) before the
/// start signal, commits one chunk there after it, then commits `COMMITS` chunks to
/// `main`. Each outcome is a line of `out`: `ok BRANCH SNAPSHOT INDEX` or
/// `gone BRANCH` (the commit was refused because expiry deleted the branch first).
async fn worker(url: &str, w: usize, out: &Path, go: &Path) -> i32 {
    let repo = Repository::open(storage(url)).await.expect("open");
    let branch = old_branch(w);
    let old = repo.writable_session(&branch).await.expect("old session");
    wait_for(go);
    let mut lines = Vec::new();
    let index = (WORKERS * COMMITS + w) as u64;
    old.set_chunk(&p("/data"), &[index], value(index))
        .await
        .expect("set chunk");
    match old.commit(&format!("worker {w} on {branch}")).await {
        Ok(id) => lines.push(format!("ok {branch} {id} {index}")),
        Err(Error::BranchNotFound { .. }) => lines.push(format!("gone {branch}")),
        Err(e) => {
            eprintln!("worker {w}: commit to {branch} failed: {e}");
            return 1;
        }
    }
    let opts = CommitOptions::default().max_attempts(10_000);
    for seq in 0..COMMITS {
        let index = (w * COMMITS + seq) as u64;
        // A session whose base commit retention or squash removed from `main`'s
        // history cannot be rebased (a conflict naming that base, nothing written):
        // the writer starts again from the tip, as a user's program does.
        let mut restarts = 0;
        loop {
            let s = repo.writable_session("main").await.expect("session");
            s.set_chunk(&p("/data"), &[index], value(index))
                .await
                .expect("set chunk");
            match s
                .commit_with(
                    &format!("worker {w} commit {seq}"),
                    BTreeMap::new(),
                    opts.clone(),
                )
                .await
            {
                Ok(id) => {
                    lines.push(format!("ok main {id} {index}"));
                    break;
                }
                Err(Error::Conflict(c))
                    if restarts < 100
                        && !c.conflicts.is_empty()
                        && c.conflicts.iter().all(|c| {
                            matches!(c, floe::error::Conflict::BaseNotAncestor { .. })
                        }) =>
                {
                    restarts += 1;
                }
                Err(e) => {
                    eprintln!("worker {w} commit {seq} failed: {e}");
                    return 1;
                }
            }
        }
    }
    std::fs::write(out, lines.join("\n")).expect("write outcomes");
    0
}

/// Checks that every successful commit in `outcomes` is on its branch and the
/// branch reads its chunk, that every branch reported gone is gone, and that `main`
/// reads every chunk the writers committed to it.
async fn verify(url: &str, outcomes: &[String], histories_kept: bool) {
    let repo = Repository::open(storage(url)).await.unwrap();
    let branches: BTreeSet<String> = repo.list_branches().await.unwrap().into_iter().collect();
    let mut main_chunks = 0;
    for line in outcomes {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["ok", branch, id, index] => {
                let id: SnapshotId = id.parse().unwrap();
                let index: u64 = index.parse().unwrap();
                assert!(
                    branches.contains(*branch),
                    "branch {branch} holding committed {id} is gone"
                );
                let tip = repo.lookup_branch(branch).await.unwrap();
                let history = repo.ancestry(tip).await.unwrap();
                assert!(
                    !histories_kept || history.iter().any(|s| s.id == id),
                    "commit {id} that reported success is not on {branch}"
                );
                let r = repo
                    .readonly_session(&VersionSelector::Branch((*branch).to_string()))
                    .await
                    .unwrap();
                let got = r.get_chunk(&p("/data"), &[index], None).await.unwrap();
                assert_eq!(got, Some(value(index)), "{branch} chunk {index}");
                if *branch == "main" {
                    main_chunks += 1;
                }
            }
            ["gone", branch] => {
                assert!(!branches.contains(*branch), "{branch} was reported gone");
            }
            other => panic!("bad outcome line {other:?}"),
        }
    }
    assert_eq!(
        main_chunks,
        WORKERS * COMMITS,
        "every writer's main commits"
    );
    // Every chunk of every branch tip reads (gc deleted nothing still referenced).
    for branch in &branches {
        let r = repo
            .readonly_session(&VersionSelector::Branch(branch.clone()))
            .await
            .unwrap();
        for index in r.list_chunks(&p("/data")).await.unwrap() {
            let got = r.get_chunk(&p("/data"), &index, None).await.unwrap();
            assert!(got.is_some(), "{branch} chunk {index:?} unreadable");
        }
    }
}

/// What the maintenance process of a live scenario runs, round after round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Maintenance {
    /// `expire` (deleting expired branches and tags), then `gc`.
    Expire,
    /// Retention keeping the last 3 commits of every branch, a squash of `main`
    /// from the first commit to its tip, then `gc`.
    RetentionSquash,
}

/// One round of `maintenance` on the repository at `url`.
async fn maintain(url: &str, maintenance: Maintenance, cut_off: DateTime<Utc>, first: SnapshotId) {
    let maint = Repository::open(storage(url)).await.unwrap();
    match maintenance {
        Maintenance::Expire => {
            let expire = ExpireOptions::default()
                .delete_expired_branches(true)
                .delete_expired_tags(true);
            maint.expire_snapshots(cut_off, expire).await.unwrap();
        }
        Maintenance::RetentionSquash => {
            let policy =
                RetentionPolicy::default().default_rule(RetentionRule::default().keep_last(3));
            maint.apply_retention(Some(&policy), false).await.unwrap();
            maint.squash("main", first, None, false).await.unwrap();
        }
    }
    // A cut-off older than every writer's session is safe; it is younger than the
    // safety window only because the test cannot wait an hour.
    let gc = GcOptions::default().allow_recent_cutoff(true);
    maint.garbage_collect(cut_off, gc, None).await.unwrap();
}

/// The live scenario: `WORKERS` writer processes commit to `main` and to their own
/// branch whose tip is expired, while this process runs `maintenance` until they
/// are done, and once more after. With `Expire`, expired branches and the tag are
/// deleted; with `RetentionSquash`, refs stay and every commit's data reads at its
/// branch's tip, while `main`'s history ends as its tip, the tagged first commit and
/// the initial one.
async fn live(url: &str, spec: SpecVersion, maintenance: Maintenance) {
    let repo = create(url, spec).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[CHUNKS], &[1], "uint8"))
        .unwrap();
    let first = s.commit("create array").await.unwrap();
    // Garbage for gc: chunk 0 overwritten a few times, each version expired.
    for round in 0..3u8 {
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/data"), &[0], Bytes::from(vec![round; 600]))
            .await
            .unwrap();
        s.commit(&format!("setup {round}")).await.unwrap();
    }
    for w in 0..WORKERS {
        repo.create_branch(&old_branch(w), first).await.unwrap();
    }
    repo.create_tag("old-tag", first).await.unwrap();
    // S3 stamps modification times in whole seconds: keep the setup's objects
    // clearly before the cut-off and the writers' clearly after.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let cut_off = Utc::now();
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let outs: Vec<PathBuf> = (0..WORKERS)
        .map(|w| dir.path().join(format!("out.{w}")))
        .collect();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<std::process::Child> = (0..WORKERS)
        .map(|w| {
            Command::new(&exe)
                .args(["--worker", url, &w.to_string()])
                .arg(&outs[w])
                .arg(&go)
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    // Every worker opens its session before the start signal.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    std::fs::write(&go, b"go").unwrap();

    let mut codes = vec![None; WORKERS];
    let mut rounds = 0;
    loop {
        maintain(url, maintenance, cut_off, first).await;
        rounds += 1;
        for (c, child) in codes.iter_mut().zip(children.iter_mut()) {
            if c.is_none() {
                *c = child.try_wait().unwrap().map(|s| s.code().unwrap_or(-1));
            }
        }
        if codes.iter().all(Option::is_some) {
            break;
        }
    }
    // Once more after the writers are done.
    maintain(url, maintenance, cut_off, first).await;
    assert!(
        codes.iter().all(|c| *c == Some(0)),
        "worker exit codes {codes:?}"
    );
    assert!(rounds >= 1);
    let outcomes: Vec<String> = outs
        .iter()
        .flat_map(|o| {
            std::fs::read_to_string(o)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    verify(url, &outcomes, maintenance == Maintenance::Expire).await;
    let repo = Repository::open(storage(url)).await.unwrap();
    match maintenance {
        // The expired tag went.
        Maintenance::Expire => assert!(repo.list_tags().await.unwrap().is_empty()),
        Maintenance::RetentionSquash => {
            assert_eq!(repo.lookup_tag("old-tag").await.unwrap(), first);
            let tip = repo.lookup_branch("main").await.unwrap();
            let history: Vec<SnapshotId> = repo
                .ancestry(tip)
                .await
                .unwrap()
                .iter()
                .map(|s| s.id)
                .collect();
            assert_eq!(history.len(), 3, "{history:?}");
            assert_eq!(history[..2], [tip, first]);
            for w in 0..WORKERS {
                let tip = repo.lookup_branch(&old_branch(w)).await.unwrap();
                assert_ne!(tip, first, "worker {w}'s commit on its branch");
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Deterministic races.
// ---------------------------------------------------------------------------------

type Hook = Box<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// A storage that runs `hook` once, just before the first deletion (conditional or
/// not) of `key` or write of `key` reaches the inner storage.
struct RaceStorage {
    inner: Arc<dyn Storage>,
    key: String,
    hook: Mutex<Option<Hook>>,
}

impl RaceStorage {
    async fn fire(&self, key: &str) {
        if key != self.key {
            return;
        }
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook().await;
        }
    }
}

impl std::fmt::Debug for RaceStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RaceStorage({})", self.inner)
    }
}

impl std::fmt::Display for RaceStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait::async_trait]
impl Storage for RaceStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> StorageResult<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.inner.put(key, bytes).await
    }
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        self.inner.put_if_absent(key, bytes).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.fire(key).await;
        self.inner.put_if_match(key, bytes, expected).await
    }
    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.fire(key).await;
        self.inner.delete_if_match(key, expected).await
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        self.fire(key).await;
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

/// Sleeps past the clock's resolution and returns a time between what came before
/// and what comes after.
async fn a_moment() -> DateTime<Utc> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t = Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    t
}

/// Expiry judges branch `old` expired; a commit lands on it just before the
/// deletion reaches the storage. The branch must be kept with that commit (on
/// spec 1 the deletion was unconditional, and the commit that returned `Ok` was on
/// no ref afterwards).
async fn expire_race(url: &str, spec: SpecVersion) {
    let inner = storage(url);
    let writer = Repository::create_with(Arc::clone(&inner), None, spec, OpenOptions::default())
        .await
        .unwrap();
    let s = writer.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[4], &[1], "uint8"))
        .unwrap();
    let first = s.commit("array").await.unwrap();
    writer.create_branch("old", first).await.unwrap();
    let cut_off = a_moment().await;
    // The writer's session is open on the expired tip before expiry runs.
    let session = writer.writable_session("old").await.unwrap();
    session
        .set_chunk(&p("/data"), &[1], value(1))
        .await
        .unwrap();
    let landed: Arc<Mutex<Option<SnapshotId>>> = Arc::default();
    let hook: Hook = {
        let landed = Arc::clone(&landed);
        Box::new(move || {
            let (session, landed) = (session.clone(), Arc::clone(&landed));
            Box::pin(async move {
                let id = session.commit("lands between judge and delete").await;
                *landed.lock().unwrap() = Some(id.expect("the racing commit"));
            })
        })
    };
    let key = match spec {
        SpecVersion::V1 => "refs/branch.old/ref.json",
        _ => "repo",
    };
    let racing: Arc<dyn Storage> = Arc::new(RaceStorage {
        inner: Arc::clone(&inner),
        key: key.to_string(),
        hook: Mutex::new(Some(hook)),
    });
    let maint = Repository::open(racing).await.unwrap();
    let result = maint
        .expire_snapshots(
            cut_off,
            ExpireOptions::default().delete_expired_branches(true),
        )
        .await
        .unwrap();
    let landed = landed.lock().unwrap().expect("the hook ran");
    let after = Repository::open(Arc::clone(&inner)).await.unwrap();
    assert_eq!(
        after.lookup_branch("old").await.ok(),
        Some(landed),
        "the commit that returned Ok is on its branch"
    );
    assert!(!result.deleted_branches.contains(&"old".to_string()));
    if spec == SpecVersion::V1 {
        assert_eq!(result.kept_moved_branches, vec!["old".to_string()]);
    }
    let r = after
        .readonly_session(&VersionSelector::Branch("old".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/data"), &[1], None).await.unwrap(),
        Some(value(1))
    );
    // Nothing left for gc to take from it.
    after
        .garbage_collect(
            Utc::now(),
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    let r = after
        .readonly_session(&VersionSelector::Branch("old".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/data"), &[1], None).await.unwrap(),
        Some(value(1))
    );
}

/// A writer opens a session on `main`'s tip; another writer commits; expiry (with
/// a cut-off older than the first writer's session, as the README asks) rewrites
/// the history. The first writer then commits, rebasing over the other's commit;
/// a conflicting write is still reported as a conflict.
async fn writer_before_expiry(url: &str, spec: SpecVersion) {
    let repo = create(url, spec).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[4], &[1], "uint8"))
        .unwrap();
    s.commit("array").await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/data"), &[0], value(0)).await.unwrap();
    let base = s.commit("base").await.unwrap();
    let cut_off = a_moment().await;
    let a = repo.writable_session("main").await.unwrap();
    let conflicting = repo.writable_session("main").await.unwrap();
    let b = repo.writable_session("main").await.unwrap();
    b.set_chunk(&p("/data"), &[2], value(2)).await.unwrap();
    let b_id = b.commit("other writer").await.unwrap();
    let result = repo
        .expire_snapshots(cut_off, ExpireOptions::default())
        .await
        .unwrap();
    assert!(result.expired.contains(&base) || spec == SpecVersion::V2);
    a.set_chunk(&p("/data"), &[3], value(3)).await.unwrap();
    let a_id = a.commit("opened before expiry").await;
    let a_id = match a_id {
        Ok(id) => id,
        Err(e) => panic!("the writer opened before expiry must commit: {e}"),
    };
    let tip = repo.lookup_branch("main").await.unwrap();
    assert_eq!(tip, a_id);
    let history: Vec<SnapshotId> = repo
        .ancestry(tip)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert!(history.contains(&b_id), "{history:?}");
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for i in [0u64, 2, 3] {
        assert_eq!(
            r.get_chunk(&p("/data"), &[i], None).await.unwrap(),
            Some(value(i))
        );
    }
    // The same chunk the other writer wrote: a conflict, not a silent overwrite.
    conflicting
        .set_chunk(&p("/data"), &[2], value(9))
        .await
        .unwrap();
    let r = conflicting.commit("conflicts").await;
    assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
}

/// `gc` refuses a cut-off of now or later (and anything within the safety window)
/// unless told otherwise; a commit in flight keeps its chunks.
async fn gc_window(url: &str, spec: SpecVersion) {
    let repo = create(url, spec).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[4], &[1], "uint8"))
        .unwrap();
    s.commit("array").await.unwrap();
    // A commit in flight: its chunk is written, its ref not yet moved.
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/data"), &[1], value(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let window = i64::try_from(floe::lifecycle::GC_SAFETY_WINDOW_SECS).unwrap();
    let now = Utc::now();
    for cut_off in [
        now,
        now + chrono::Duration::hours(1),
        now - chrono::Duration::seconds(window - 60),
    ] {
        let r = repo
            .garbage_collect(cut_off, GcOptions::default(), None)
            .await;
        assert!(
            matches!(r, Err(Error::GcCutoffTooRecent { window_seconds, .. }) if window_seconds == floe::lifecycle::GC_SAFETY_WINDOW_SECS),
            "{r:?}"
        );
        let r = repo
            .garbage_collect(cut_off, GcOptions::default().dry_run(true), None)
            .await;
        assert!(matches!(r, Err(Error::GcCutoffTooRecent { .. })), "{r:?}");
    }
    // Older than the window: accepted.
    repo.garbage_collect(
        now - chrono::Duration::seconds(window + 60),
        GcOptions::default(),
        None,
    )
    .await
    .unwrap();
    s.commit("in flight").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/data"), &[1], None).await.unwrap(),
        Some(value(1)),
        "the in-flight commit kept its chunk"
    );
    // The override: accepted, and it collects.
    repo.garbage_collect(now, GcOptions::default().allow_recent_cutoff(true), None)
        .await
        .unwrap();
    // The CLI refuses too, naming the window, and takes the override flag.
    if !url.starts_with("s3://") {
        let floe = env!("CARGO_BIN_EXE_floe");
        let time = Utc::now().to_rfc3339();
        let out = Command::new(floe)
            .args(["gc", url, "--older-than", &time])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("3600 s safety window"), "{err}");
        let out = Command::new(floe)
            .args(["gc", url, "--older-than", &time, "--allow-recent-cutoff"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `Storage::delete_if_match` deletes at the given version only, and expiry with
/// no writer about deletes an expired branch (so the conditional delete is real on
/// every backend, not only refused).
async fn conditional_delete(url: &str, spec: SpecVersion) {
    let mut stores = vec![storage(url)];
    if !url.starts_with("s3://") {
        stores.push(floe::storage::new_in_memory_storage());
    }
    for st in stores {
        let key = "refs/branch.x/ref.json";
        let WriteOutcome::Written(_) = st
            .put_if_absent(key, Bytes::from_static(b"{}"))
            .await
            .unwrap()
        else {
            panic!("fresh key");
        };
        let v1 = st.get(key).await.unwrap().version.expect("a version");
        let WriteOutcome::Written(_) = st
            .put_if_match(key, Bytes::from_static(b"{ }"), &v1)
            .await
            .unwrap()
        else {
            panic!("swap from the current version");
        };
        let v2 = st.get(key).await.unwrap().version.expect("a version");
        assert_eq!(
            st.delete_if_match(key, &v1).await.unwrap(),
            WriteOutcome::PreconditionFailed,
            "{st}: a stale version deletes nothing"
        );
        assert!(st.get(key).await.is_ok(), "{st}: still there");
        assert!(matches!(
            st.delete_if_match(key, &v2).await.unwrap(),
            WriteOutcome::Written(_)
        ));
        assert!(matches!(
            st.get(key).await,
            Err(floe::storage::StorageError::NotFound { .. })
        ));
        assert_eq!(
            st.delete_if_match(key, &v2).await.unwrap(),
            WriteOutcome::PreconditionFailed,
            "{st}: a missing object fails the precondition"
        );
    }
    let repo = create(&format!("{url}-repo"), spec).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/data"), array_def("/data", &[4], &[1], "uint8"))
        .unwrap();
    let first = s.commit("array").await.unwrap();
    repo.create_branch("old", first).await.unwrap();
    let cut_off = a_moment().await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/data"), &[0], value(0)).await.unwrap();
    s.commit("newer").await.unwrap();
    let result = repo
        .expire_snapshots(
            cut_off,
            ExpireOptions::default().delete_expired_branches(true),
        )
        .await
        .unwrap();
    assert_eq!(result.deleted_branches, vec!["old".to_string()]);
    assert!(result.kept_moved_branches.is_empty());
    assert_eq!(
        repo.list_branches().await.unwrap(),
        vec!["main".to_string()]
    );
}

#[derive(Clone, Copy)]
enum Scenario {
    Live,
    LiveRetention,
    ExpireRace,
    WriterBeforeExpiry,
    GcWindow,
    ConditionalDelete,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if args.get(1).map(String::as_str) == Some("--worker") {
        let code = rt.block_on(worker(
            &args[2],
            args[3].parse().unwrap(),
            Path::new(&args[4]),
            Path::new(&args[5]),
        ));
        std::process::exit(code);
    }
    // Test-name filters, as libtest takes them (flags are ignored).
    let filters: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with('-')).collect();
    let tmp = tempfile::tempdir().unwrap();
    let local = |name: &str| Some(tmp.path().join(name).display().to_string());
    let mut scenarios: Vec<(String, Option<String>, Scenario, SpecVersion)> = Vec::new();
    for (spec, tag) in [(SpecVersion::V1, "spec1"), (SpecVersion::V2, "spec2")] {
        for (scenario, name) in [
            (Scenario::Live, "live_expire_gc_4_processes"),
            (
                Scenario::ExpireRace,
                "expire_keeps_branch_moved_after_judging",
            ),
            (
                Scenario::WriterBeforeExpiry,
                "writer_opened_before_expiry_commits",
            ),
            (Scenario::GcWindow, "gc_refuses_cutoff_in_safety_window"),
            (Scenario::ConditionalDelete, "expire_deletes_unmoved_branch"),
        ] {
            let l = format!("{tag}_local_{name}");
            scenarios.push((l.clone(), local(&l), scenario, spec));
            let s = format!("{tag}_s3_{name}");
            scenarios.push((s.clone(), common::s3_url(&s), scenario, spec));
        }
    }
    // Retention needs spec 2.
    let name = "live_retention_squash_gc_4_processes";
    let l = format!("spec2_local_{name}");
    scenarios.push((
        l.clone(),
        local(&l),
        Scenario::LiveRetention,
        SpecVersion::V2,
    ));
    let s3 = format!("spec2_s3_{name}");
    scenarios.push((
        s3.clone(),
        common::s3_url(&s3),
        Scenario::LiveRetention,
        SpecVersion::V2,
    ));
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
                    Scenario::Live => live(&url, spec, Maintenance::Expire).await,
                    Scenario::LiveRetention => live(&url, spec, Maintenance::RetentionSquash).await,
                    Scenario::ExpireRace => expire_race(&url, spec).await,
                    Scenario::WriterBeforeExpiry => writer_before_expiry(&url, spec).await,
                    Scenario::GcWindow => gc_window(&url, spec).await,
                    Scenario::ConditionalDelete => conditional_delete(&url, spec).await,
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
    println!("\nmaintenance_live: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
