//! Storage faults and concurrent use of one session: writes made while a commit is in
//! flight are kept; a commit whose response was lost lands once; and a seeded,
//! model-based run of commits, branch and tag operations and two concurrent writers
//! through random failures, delays and lost responses keeps every promise: a commit
//! that returned `Ok` is never lost, one that failed landed completely or not at all,
//! the repository always opens at a committed state, and no commit is duplicated.
//!
//! `FLOE_FAULT_SEEDS` sets how many seeds the model-based test runs (default 6).

use crate::common;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::SpecVersion;
use floe::lifecycle::GcOptions;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{
    new_in_memory_storage, ObjectInfo, ObjectVersion, Storage, StorageResult, VersionedBytes,
    WriteOutcome,
};
use floe::{CommitOptions, Error, OpenOptions, Repository, Session, SnapshotId, VersionSelector};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BRANCH_REF: &str = "refs/branch.main/ref.json";

async fn repo_with_array(storage: Arc<dyn Storage>) -> (Repository, Session) {
    repo_with_array_of(storage, SpecVersion::V1).await
}

async fn repo_with_array_of(storage: Arc<dyn Storage>, spec: SpecVersion) -> (Repository, Session) {
    let repo = Repository::create_with(storage, None, spec, OpenOptions::default())
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[64], &[1], "uint8"))
        .unwrap();
    s.commit("array").await.unwrap();
    (repo, s)
}

async fn value(s: &Session, i: u32) -> Option<u8> {
    s.get_chunk(&p("/a"), &[i.into()], None)
        .await
        .unwrap()
        .map(|b| b[0])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_while_a_commit_is_in_flight_are_kept() {
    let at_commit_point = Arc::new(tokio::sync::Notify::new());
    let armed = Arc::new(AtomicBool::new(false));
    let (signal, flag) = (Arc::clone(&at_commit_point), Arc::clone(&armed));
    let storage = Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(move |call, key| {
            if call == Call::PutIfMatch && key == BRANCH_REF && flag.swap(false, Ordering::SeqCst) {
                signal.notify_one();
                return Fault::Delay(Duration::from_millis(300));
            }
            Fault::None
        }),
    ));
    let (repo, s) = repo_with_array(storage).await;
    s.set_chunk(&p("/a"), &[1], Bytes::from_static(&[1]))
        .await
        .unwrap();
    armed.store(true, Ordering::SeqCst);
    let committer = s.clone();
    let commit = tokio::spawn(async move { committer.commit("chunk 1").await });
    at_commit_point.notified().await;
    // The commit has taken its changes and waits at the commit point: write more.
    s.set_chunk(&p("/a"), &[2], Bytes::from_static(&[2]))
        .await
        .unwrap();
    let first = commit.await.unwrap().unwrap();

    assert_eq!(s.snapshot_id(), first);
    assert!(s.has_uncommitted_changes(), "the late write was dropped");
    assert_eq!(value(&s, 2).await, Some(2));
    let committed = repo
        .readonly_session(&VersionSelector::Snapshot(first))
        .await
        .unwrap();
    assert_eq!(value(&committed, 1).await, Some(1));
    assert_eq!(value(&committed, 2).await, None);
    let second = s.commit("chunk 2").await.unwrap();
    let latest = repo
        .readonly_session(&VersionSelector::Snapshot(second))
        .await
        .unwrap();
    assert_eq!(
        (value(&latest, 1).await, value(&latest, 2).await),
        (Some(1), Some(2))
    );
    assert!(!s.has_uncommitted_changes());
}

#[tokio::test]
async fn a_commit_whose_response_was_lost_lands_once() {
    let armed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&armed);
    let storage = Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(move |call, key| {
            if call == Call::PutIfMatch && key == BRANCH_REF && flag.swap(false, Ordering::SeqCst) {
                return Fault::FailAfter;
            }
            Fault::None
        }),
    ));
    let (repo, s) = repo_with_array(storage).await;
    let before = repo.lookup_branch("main").await.unwrap();
    s.set_chunk(&p("/a"), &[3], Bytes::from_static(&[3]))
        .await
        .unwrap();
    armed.store(true, Ordering::SeqCst);
    let id = s.commit("lost response").await.unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), id);
    let history = repo.ancestry(id).await.unwrap();
    assert_eq!(history[1].id, before, "one commit, not two");
    assert!(!s.has_uncommitted_changes());
}

/// One operation of the model-based test.
#[derive(Debug)]
enum Op {
    /// Session `0` or `1` writes `value` at chunk `index` (even indices for session 0,
    /// odd for session 1, so their commits always rebase cleanly) and commits.
    Commit {
        session: usize,
        index: u32,
        value: u8,
    },
    CreateTag(String),
    DeleteTag(String),
    CreateBranch(String),
    DeleteBranch(String),
}

fn random_op(rng: &mut StdRng, n: usize) -> Op {
    let name = format!("r{}", rng.random_range(0..4));
    match rng.random_range(0..10) {
        0 => Op::CreateTag(name),
        1 => Op::DeleteTag(name),
        2 => Op::CreateBranch(name),
        3 => Op::DeleteBranch(name),
        _ => {
            let session = rng.random_range(0..2);
            Op::Commit {
                session,
                index: 2 * rng.random_range(0..8) + session as u32,
                value: (n % 250) as u8 + 1,
            }
        }
    }
}

/// What must hold: the values committed on `main`, and the refs that exist.
#[derive(Default)]
struct Model {
    values: BTreeMap<u32, u8>,
    /// Every commit that returned `Ok`, with the values at it.
    commits: Vec<(SnapshotId, BTreeMap<u32, u8>)>,
    tags: BTreeMap<String, SnapshotId>,
    deleted_tags: Vec<String>,
    branches: BTreeMap<String, SnapshotId>,
}

async fn values_at(repo: &Repository, id: SnapshotId) -> BTreeMap<u32, u8> {
    let s = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for i in 0..16 {
        if let Some(v) = value(&s, i).await {
            out.insert(i, v);
        }
    }
    out
}

/// Checks the invariants on the storage without faults.
async fn check(inner: &Arc<dyn Storage>, model: &Model, ctx: &str) {
    let repo = Repository::open(Arc::clone(inner)).await.unwrap();
    let tip = repo.lookup_branch("main").await.unwrap();
    assert_eq!(values_at(&repo, tip).await, model.values, "{ctx}: main");
    let history = common::history(&repo, tip).await;
    let mut messages: Vec<String> = repo
        .ancestry(tip)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.message)
        .collect();
    let n = messages.len();
    messages.sort();
    messages.dedup();
    assert_eq!(messages.len(), n, "{ctx}: a commit was duplicated");
    for (id, values) in &model.commits {
        assert!(history.contains(id), "{ctx}: commit {id} was lost");
        assert_eq!(
            &values_at(&repo, *id).await,
            values,
            "{ctx}: commit {id} changed"
        );
    }
    let mut tags = BTreeMap::new();
    for t in repo.list_tags().await.unwrap() {
        tags.insert(t.clone(), repo.lookup_tag(&t).await.unwrap());
    }
    assert_eq!(tags, model.tags, "{ctx}: tags");
    let mut branches = BTreeMap::new();
    for b in repo.list_branches().await.unwrap() {
        if b != "main" {
            branches.insert(b.clone(), repo.lookup_branch(&b).await.unwrap());
        }
    }
    assert_eq!(branches, model.branches, "{ctx}: branches");
    for id in tags.values().chain(branches.values()) {
        repo.readonly_session(&VersionSelector::Snapshot(*id))
            .await
            .unwrap();
    }
}

/// After an operation failed: the outcome it may have had, read from storage.
async fn settle_ref(inner: &Arc<dyn Storage>, op: &Op, model: &mut Model) {
    let repo = Repository::open(Arc::clone(inner)).await.unwrap();
    match op {
        Op::CreateTag(name) | Op::DeleteTag(name) => match repo.lookup_tag(name).await {
            Ok(id) => {
                model.tags.insert(name.clone(), id);
            }
            Err(Error::TagNotFound { .. }) | Err(Error::TagDeleted { .. }) => {
                if model.tags.remove(name).is_some() {
                    model.deleted_tags.push(name.clone());
                }
            }
            Err(e) => panic!("tag {name}: {e}"),
        },
        Op::CreateBranch(name) | Op::DeleteBranch(name) => match repo.lookup_branch(name).await {
            Ok(id) => {
                model.branches.insert(name.clone(), id);
            }
            Err(Error::BranchNotFound { .. }) => {
                model.branches.remove(name);
            }
            Err(e) => panic!("branch {name}: {e}"),
        },
        Op::Commit { .. } => {}
    }
}

async fn run_model(seed: u64, spec: SpecVersion) {
    let mut rng = StdRng::seed_from_u64(seed);
    let inner = new_in_memory_storage();
    let faults = Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0x5eed)));
    let enabled = Arc::new(AtomicBool::new(false));
    let (f, on) = (Arc::clone(&faults), Arc::clone(&enabled));
    let storage = Arc::new(FaultyStorage::new(
        Arc::clone(&inner),
        Box::new(move |call, _key| {
            if !on.load(Ordering::SeqCst) {
                return Fault::None;
            }
            let mut rng = f.lock().unwrap();
            match rng.random_range(0..100) {
                0..=3 => Fault::FailBefore,
                4..=7 if call.is_write() => Fault::FailAfter,
                8..=9 => Fault::Delay(Duration::from_millis(rng.random_range(0..3))),
                10..=13 if matches!(call, Call::PutIfAbsent | Call::PutIfMatch) => {
                    Fault::LandThenRefuse
                }
                _ => Fault::None,
            }
        }),
    ));
    let (repo, _) = repo_with_array_of(storage.clone() as Arc<dyn Storage>, spec).await;
    let mut sessions = [
        repo.writable_session("main").await.unwrap(),
        repo.writable_session("main").await.unwrap(),
    ];
    let mut model = Model::default();
    enabled.store(true, Ordering::SeqCst);
    for step in 0..40 {
        let op = random_op(&mut rng, step);
        let repo = Repository::open(storage.clone() as Arc<dyn Storage>).await;
        let Ok(repo) = repo else {
            continue; // opening failed under a fault: nothing happened
        };
        let tip = model.commits.last().map(|(id, _)| *id);
        let outcome = match &op {
            Op::Commit {
                session,
                index,
                value,
            } => {
                let s = &sessions[*session];
                let wrote = s
                    .set_chunk(&p("/a"), &[u64::from(*index)], Bytes::from(vec![*value]))
                    .await;
                match wrote {
                    Ok(()) => s.commit(&format!("step {step}")).await.map(Some),
                    Err(e) => Err(e),
                }
            }
            Op::CreateTag(name) => match tip {
                Some(id) => repo.create_tag(name, id).await.map(|()| None),
                None => Ok(None),
            },
            Op::DeleteTag(name) => repo.delete_tag(name).await.map(|()| None),
            Op::CreateBranch(name) => match tip {
                Some(id) => repo.create_branch(name, id).await.map(|()| None),
                None => Ok(None),
            },
            Op::DeleteBranch(name) => repo.delete_branch(name).await.map(|()| None),
        };
        enabled.store(false, Ordering::SeqCst);
        match (&op, outcome) {
            (Op::Commit { index, value, .. }, Ok(Some(id))) => {
                model.values.insert(*index, *value);
                model.commits.push((id, model.values.clone()));
            }
            (
                Op::Commit {
                    index,
                    value,
                    session,
                },
                Err(_),
            ) => {
                // Landed completely or not at all: main holds the new value or the old.
                let fresh = Repository::open(Arc::clone(&inner)).await.unwrap();
                let tip = fresh.lookup_branch("main").await.unwrap();
                let now = values_at(&fresh, tip).await;
                let mut landed = model.values.clone();
                landed.insert(*index, *value);
                if now == landed {
                    model.values = landed;
                    model.commits.push((tip, now));
                } else {
                    assert_eq!(
                        now, model.values,
                        "{spec:?}, seed {seed}, step {step}: partial commit"
                    );
                }
                // Start that writer afresh from the branch tip.
                sessions[*session] = Repository::open(storage.clone() as Arc<dyn Storage>)
                    .await
                    .unwrap()
                    .writable_session("main")
                    .await
                    .unwrap();
            }
            (Op::CreateTag(name), Ok(_)) => {
                if let Some(id) = tip {
                    model.tags.insert(name.clone(), id);
                }
            }
            (Op::DeleteTag(name), Ok(_)) => {
                model.tags.remove(name);
                model.deleted_tags.push(name.clone());
            }
            (Op::CreateBranch(name), Ok(_)) => {
                if let Some(id) = tip {
                    model.branches.insert(name.clone(), id);
                }
            }
            (Op::DeleteBranch(name), Ok(_)) => {
                model.branches.remove(name);
            }
            (_, Err(_)) => settle_ref(&inner, &op, &mut model).await,
            (_, Ok(_)) => {}
        }
        check(
            &inner,
            &model,
            &format!("{spec:?}, seed {seed}, step {step}"),
        )
        .await;
        enabled.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_based_operations_under_faults_keep_their_promises() {
    let seeds: u64 = std::env::var("FLOE_FAULT_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    for seed in 0..seeds {
        for spec in [SpecVersion::V1, SpecVersion::V2] {
            run_model(seed, spec).await;
        }
    }
}

/// What [`HookStorage`] does at an armed compare-and-swap.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Runs the hook, then the write (which the hook's commit makes lose).
    Before,
    /// Does the write, runs the hook, then reports the write refused: a lost
    /// response whose retry found the first try's write, with another commit on
    /// top by the time the writer looks again.
    AfterLanding,
}

type Hook = Box<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// A storage that runs a hook (another writer's commit) at the next compare-and-swap
/// of `key` once armed.
struct HookStorage {
    inner: Arc<dyn Storage>,
    key: &'static str,
    armed: Mutex<Option<At>>,
    hook: Hook,
}

impl std::fmt::Debug for HookStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookStorage({})", self.inner)
    }
}

impl std::fmt::Display for HookStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait::async_trait]
impl Storage for HookStorage {
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
        let at = if key == self.key {
            self.armed.lock().unwrap().take()
        } else {
            None
        };
        match at {
            None => self.inner.put_if_match(key, bytes, expected).await,
            Some(At::Before) => {
                (self.hook)().await;
                self.inner.put_if_match(key, bytes, expected).await
            }
            Some(At::AfterLanding) => {
                let written = self.inner.put_if_match(key, bytes, expected).await?;
                assert!(matches!(written, WriteOutcome::Written(_)));
                (self.hook)().await;
                Ok(WriteOutcome::PreconditionFailed)
            }
        }
    }
    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.inner.delete_if_match(key, expected).await
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

/// The key of the commit point of `spec`.
fn commit_point(spec: SpecVersion) -> &'static str {
    match spec {
        SpecVersion::V1 => BRANCH_REF,
        _ => "repo",
    }
}

/// A repository of `spec` with the array `/a` on `inner`, seen through a
/// [`HookStorage`] whose hook commits chunk 60 = `n` (n counting up) on `main`
/// through its own handle on `inner`.
async fn hooked_repo(spec: SpecVersion) -> (Arc<HookStorage>, Repository, Arc<dyn Storage>) {
    let inner = new_in_memory_storage();
    let other = Repository::create_with(Arc::clone(&inner), None, spec, OpenOptions::default())
        .await
        .unwrap();
    let s = other.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[64], &[1], "uint8"))
        .unwrap();
    s.commit("array").await.unwrap();
    let n = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let hook: Hook = Box::new(move || {
        let (other, n) = (other.clone(), Arc::clone(&n));
        Box::pin(async move {
            let v = n.fetch_add(1, Ordering::SeqCst) + 1;
            let s = other.writable_session("main").await.unwrap();
            s.set_chunk(&p("/a"), &[60], Bytes::from(vec![v]))
                .await
                .unwrap();
            s.commit(&format!("other {v}")).await.unwrap();
        })
    });
    let storage = Arc::new(HookStorage {
        inner: Arc::clone(&inner),
        key: commit_point(spec),
        armed: Mutex::new(None),
        hook,
    });
    let repo = Repository::open(storage.clone() as Arc<dyn Storage>)
        .await
        .unwrap();
    (storage, repo, inner)
}

/// What garbage collection would delete now (a dry run with a cut-off in the
/// future): snapshots, manifests and transaction logs that nothing references.
async fn orphans(repo: &Repository) -> (u64, u64, u64) {
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let s = repo
        .garbage_collect(
            later,
            GcOptions::default().allow_recent_cutoff(true).dry_run(true),
            None,
        )
        .await
        .unwrap();
    (
        s.snapshots_deleted,
        s.manifests_deleted,
        s.transaction_logs_deleted,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_landed_before_its_refused_retry_is_found_under_a_later_commit() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let (storage, repo, _) = hooked_repo(spec).await;
        let before = repo.lookup_branch("main").await.unwrap();
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/a"), &[5], Bytes::from_static(&[5]))
            .await
            .unwrap();
        *storage.armed.lock().unwrap() = Some(At::AfterLanding);
        let id = s.commit("ours").await.unwrap();

        let tip = repo.lookup_branch("main").await.unwrap();
        let history = common::history(&repo, tip).await;
        assert_eq!(
            &history[..3],
            &[tip, id, before],
            "{spec:?}: one commit, under the other"
        );
        let messages: Vec<String> = repo
            .ancestry(tip)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.message)
            .collect();
        assert_eq!(
            messages.iter().filter(|m| *m == "ours").count(),
            1,
            "{spec:?}"
        );
        assert!(!s.has_uncommitted_changes());
        let at = repo
            .readonly_session(&VersionSelector::Snapshot(id))
            .await
            .unwrap();
        assert_eq!(
            value(&at, 5).await,
            Some(5),
            "{spec:?}: the commit was deleted"
        );
        assert_eq!(orphans(&repo).await, (0, 0, 0), "{spec:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_that_lose_the_branch_leave_no_orphaned_snapshot() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let (storage, repo, _) = hooked_repo(spec).await;

        // The branch moved before the commit: its first, speculative flush is unused.
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/a"), &[1], Bytes::from_static(&[1]))
            .await
            .unwrap();
        (storage.hook)().await;
        let refused = s
            .commit_with(
                "no rebase",
                BTreeMap::new(),
                CommitOptions::default().rebase(false),
            )
            .await;
        assert!(
            matches!(refused, Err(Error::Conflict(_))),
            "{spec:?}: {refused:?}"
        );
        assert_eq!(orphans(&repo).await, (0, 0, 0), "{spec:?}: refused");
        let id = s.commit("rebased").await.unwrap();
        assert_eq!(orphans(&repo).await, (0, 0, 0), "{spec:?}: rebased");

        // The branch moves between the flush and the compare-and-swap, which loses.
        s.set_chunk(&p("/a"), &[2], Bytes::from_static(&[2]))
            .await
            .unwrap();
        *storage.armed.lock().unwrap() = Some(At::Before);
        let second = s.commit("lost the swap").await.unwrap();
        let tip = repo.lookup_branch("main").await.unwrap();
        assert_eq!(tip, second);
        let history = common::history(&repo, tip).await;
        assert_eq!(history[2], id, "{spec:?}: rebased onto the other commit");
        assert_eq!(orphans(&repo).await, (0, 0, 0), "{spec:?}: lost swap");
        let at = repo
            .readonly_session(&VersionSelector::Snapshot(second))
            .await
            .unwrap();
        assert_eq!(
            (
                value(&at, 1).await,
                value(&at, 2).await,
                value(&at, 60).await
            ),
            (Some(1), Some(2), Some(2))
        );
    }
}

#[tokio::test]
async fn spec2_updates_whose_response_was_lost_return_their_result_once() {
    for fault in [Fault::LandThenRefuse, Fault::FailAfter] {
        let armed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&armed);
        let storage = Arc::new(FaultyStorage::new(
            new_in_memory_storage(),
            Box::new(move |call, key| {
                if call == Call::PutIfMatch && key == "repo" && flag.swap(false, Ordering::SeqCst) {
                    return fault;
                }
                Fault::None
            }),
        ));
        let repo = Repository::create_with(
            storage.clone() as Arc<dyn Storage>,
            None,
            SpecVersion::V2,
            OpenOptions::default(),
        )
        .await
        .unwrap();
        let tip = repo.lookup_branch("main").await.unwrap();
        let ctx = format!("{fault:?}");
        armed.store(true, Ordering::SeqCst);
        repo.create_branch("b", tip).await.expect(&ctx);
        armed.store(true, Ordering::SeqCst);
        repo.create_tag("t", tip).await.expect(&ctx);
        let s = repo.writable_session("main").await.unwrap();
        s.add_group(&p("/g"), Bytes::new()).unwrap();
        armed.store(true, Ordering::SeqCst);
        let id = s.commit("group").await.expect(&ctx);
        assert_eq!(repo.lookup_branch("main").await.unwrap(), id);
        armed.store(true, Ordering::SeqCst);
        repo.delete_tag("t").await.expect(&ctx);
        armed.store(true, Ordering::SeqCst);
        repo.delete_branch("b").await.expect(&ctx);
        assert!(!armed.load(Ordering::SeqCst), "every fault was used");

        // Each update is in the ops log once, and the stored copies of the repo
        // object are exactly those the log names.
        let log = repo.ops_log().await.unwrap();
        assert_eq!(log.len(), 6, "{ctx}: {log:?}");
        let named: std::collections::BTreeSet<String> =
            log.into_iter().filter_map(|u| u.backup_path).collect();
        let stored: std::collections::BTreeSet<String> = storage
            .list("overwritten/")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key.trim_start_matches("overwritten/").to_string())
            .collect();
        assert_eq!(stored, named, "{ctx}");
    }
}
