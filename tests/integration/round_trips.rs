//! Round trips per operation on object storage, counted, not timed: every storage
//! call takes one simulated round trip (`RTT`) on a paused tokio clock, so the
//! virtual time an operation takes, divided by `RTT`, is the number of sequential
//! round trips on its critical path (concurrent requests share one), whatever the
//! machine's speed. The README's table of round trips per operation is this test's
//! output; a change that adds a sequential request fails it.

use crate::common;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{group_json, write_small_array};
use bytes::Bytes;
use floe::format::SpecVersion;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, Storage};
use floe::zarr::store::Store;
use floe::{OpenOptions, Repository, VersionSelector};

/// One simulated round trip.
const RTT: Duration = Duration::from_millis(100);

/// A latent view of one in-memory storage, recording every call.
#[derive(Clone)]
struct Latent {
    inner: Arc<dyn Storage>,
    calls: Arc<Mutex<Vec<(Call, String)>>>,
}

impl Latent {
    fn new() -> Self {
        Latent {
            inner: new_in_memory_storage(),
            calls: Arc::default(),
        }
    }

    /// A new latent handle (every call recorded and delayed by `RTT`).
    fn storage(&self) -> Arc<dyn Storage> {
        let calls = Arc::clone(&self.calls);
        Arc::new(FaultyStorage::new(
            Arc::clone(&self.inner),
            Box::new(move |call, key| {
                calls.lock().unwrap().push((call, key.to_string()));
                Fault::Delay(RTT)
            }),
        ))
    }

    /// Runs `op`, returning its sequential round trips and its calls.
    async fn measure<T>(
        &self,
        op: impl std::future::Future<Output = T>,
    ) -> (u32, Vec<(Call, String)>, T) {
        self.calls.lock().unwrap().clear();
        let start = tokio::time::Instant::now();
        let out = op.await;
        let elapsed = start.elapsed();
        let trips = u32::try_from(elapsed.as_millis() / RTT.as_millis()).unwrap();
        (trips, std::mem::take(&mut *self.calls.lock().unwrap()), out)
    }
}

/// Round trips of each operation on a repository of `spec`.
async fn table(spec: SpecVersion) -> Vec<(&'static str, u32, usize)> {
    let l = Latent::new();
    let mut rows = Vec::new();
    let mut row = |name: &'static str, (trips, calls, _): (u32, Vec<(Call, String)>, ())| {
        eprintln!(
            "spec {spec} {name}: {trips} round trips, {} calls: {calls:?}",
            calls.len()
        );
        rows.push((name, trips, calls.len()));
    };
    let (t, c, repo) = l
        .measure(Repository::create_with(
            l.storage(),
            None,
            spec,
            OpenOptions::default(),
        ))
        .await;
    let repo = repo.unwrap();
    row("create", (t, c, ()));

    let session = repo.writable_session("main").await.unwrap();
    write_small_array(&session.store(), 0, Bytes::from(vec![1u8; 4])).await;
    let (t, c, first) = l.measure(session.commit("first")).await;
    let first = first.unwrap();
    row("commit (one array, one chunk)", (t, c, ()));

    let session = repo.writable_session("main").await.unwrap();
    session
        .store()
        .set("zarr.json", group_json(serde_json::json!({"x": 1})))
        .await
        .unwrap();
    let (t, c, r) = l.measure(session.commit("attributes")).await;
    r.unwrap();
    row("attribute-only commit", (t, c, ()));

    let (t, c, r) = l.measure(repo.create_branch("dev", first)).await;
    r.unwrap();
    row("create branch", (t, c, ()));
    let (t, c, r) = l.measure(repo.create_tag("v1", first)).await;
    r.unwrap();
    row("create tag", (t, c, ()));
    let tip = repo.lookup_branch("main").await.unwrap();
    let (t, c, r) = l.measure(repo.reset_branch("dev", tip, Some(first))).await;
    r.unwrap();
    row("reset branch", (t, c, ()));
    let (t, c, r) = l.measure(repo.delete_branch("dev")).await;
    r.unwrap();
    row("delete branch", (t, c, ()));

    for i in 0..18 {
        let s = repo.writable_session("main").await.unwrap();
        s.store()
            .set("zarr.json", group_json(serde_json::json!({ "i": i })))
            .await
            .unwrap();
        s.commit("more").await.unwrap();
    }
    let storage = l.storage();
    let (t, c, n) = l
        .measure(async {
            let repo = Repository::open(storage).await.unwrap();
            let tip = repo.lookup_branch("main").await.unwrap();
            repo.ancestry(tip).await.unwrap().len()
        })
        .await;
    assert_eq!(n, 21);
    row("open + ancestry of 21 commits", (t, c, ()));

    let storage = l.storage();
    let (t, c, n) = l
        .measure(async {
            use futures::TryStreamExt;
            let repo = Repository::open(storage).await.unwrap();
            let history: Vec<_> = repo
                .ancestry_stream(VersionSelector::Branch("main".into()))
                .try_collect()
                .await
                .unwrap();
            history.len()
        })
        .await;
    assert_eq!(n, 21);
    row("open + ancestry of branch main, one call", (t, c, ()));

    let storage = l.storage();
    let (t, c, r) = l
        .measure(async {
            let repo = Repository::open(storage).await.unwrap();
            let s = repo
                .readonly_session(&VersionSelector::Branch("main".into()))
                .await
                .unwrap();
            s.store().get("a/c/0").await.unwrap()
        })
        .await;
    assert_eq!(r.as_deref(), Some(&[1u8; 4][..]));
    row("open + read-only session + read one chunk", (t, c, ()));

    // As Python opens writable sessions: the snapshot is read on first use.
    let storage = l.storage();
    let (t, c, r) = l
        .measure(async {
            let repo = Repository::open(storage).await.unwrap();
            let s = repo.writable_session_lazy("main").await.unwrap();
            s.store().get("a/c/0").await.unwrap()
        })
        .await;
    assert_eq!(r.as_deref(), Some(&[1u8; 4][..]));
    row("open + writable session + read one chunk", (t, c, ()));
    rows
}

/// Sequential round trips of each operation: (operation, spec 1, spec 2). The
/// README's table shows the same numbers.
const EXPECTED: &[(&str, u32, u32)] = &[
    ("create", 2, 2),
    ("commit (one array, one chunk)", 2, 2),
    ("attribute-only commit", 2, 2),
    ("create branch", 1, 2),
    ("create tag", 2, 2),
    ("reset branch", 2, 2),
    ("delete branch", 2, 2),
    ("open + ancestry of 21 commits", 4, 3),
    ("open + ancestry of branch main, one call", 4, 2),
    ("open + read-only session + read one chunk", 3, 3),
    ("open + writable session + read one chunk", 3, 3),
];

#[tokio::test(start_paused = true)]
async fn round_trips_per_operation() {
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (i, spec) in [SpecVersion::V1, SpecVersion::V2].into_iter().enumerate() {
        for (name, trips, _) in table(spec).await {
            got.push((spec, name, trips));
        }
        want.extend(
            EXPECTED
                .iter()
                .map(|&(name, v1, v2)| (spec, name, if i == 0 { v1 } else { v2 })),
        );
    }
    assert_eq!(got, want);
}

/// Concurrent reads of the chunks of one array on a fresh handle share one read of
/// its manifest and of the snapshot (single flight): before, each of the 32 reads
/// fetched the manifest itself.
#[tokio::test(start_paused = true)]
async fn concurrent_chunk_reads_fetch_one_manifest() {
    const N: u64 = 32;
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let l = Latent::new();
        let repo = Repository::create_with(l.storage(), None, spec, OpenOptions::default())
            .await
            .unwrap();
        let session = repo.writable_session("main").await.unwrap();
        let store = session.store();
        common::write_u8_array(&store, N * 4, 0).await;
        for i in 0..N {
            store
                .set(&format!("a/c/{i}"), Bytes::from(vec![i as u8; 4]))
                .await
                .unwrap();
        }
        session.commit("chunks").await.unwrap();

        let storage = l.storage();
        let (_, calls, ()) = l
            .measure(async {
                let repo = Repository::open(storage).await.unwrap();
                let s = repo
                    .readonly_session(&VersionSelector::Branch("main".into()))
                    .await
                    .unwrap();
                let store = s.store();
                let reads = (0..N).map(|i| {
                    let store = store.clone();
                    async move { store.get(&format!("a/c/{i}")).await.unwrap() }
                });
                let got = futures::future::join_all(reads).await;
                for (i, v) in got.into_iter().enumerate() {
                    assert_eq!(v.as_deref(), Some(&[i as u8; 4][..]));
                }
            })
            .await;
        let count = |prefix: &str| calls.iter().filter(|(_, k)| k.starts_with(prefix)).count();
        assert_eq!(count("manifests/"), 1, "spec {spec}: {calls:?}");
        assert_eq!(count("snapshots/"), 1, "spec {spec}: {calls:?}");
    }
}

/// The snapshot a handle guesses for a branch (its tip when the handle last looked)
/// is only fetched beside the ref's read, never used when the ref moved since.
#[tokio::test]
async fn a_stale_tip_guess_is_never_used() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let storage = new_in_memory_storage();
        let repo =
            Repository::create_with(Arc::clone(&storage), None, spec, OpenOptions::default())
                .await
                .unwrap();
        let s = repo.writable_session("main").await.unwrap();
        s.store()
            .set("zarr.json", group_json(serde_json::json!({"v": 1})))
            .await
            .unwrap();
        s.commit("v1").await.unwrap();
        // `a` learns of v1 when it opens; `b` then commits v2.
        let a = Repository::open(Arc::clone(&storage)).await.unwrap();
        let b = Repository::open(Arc::clone(&storage)).await.unwrap();
        let s = b.writable_session("main").await.unwrap();
        s.store()
            .set("zarr.json", group_json(serde_json::json!({"v": 2})))
            .await
            .unwrap();
        let v2 = s.commit("v2").await.unwrap();
        let ro = a
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        assert_eq!(ro.snapshot_id(), v2, "spec {spec}");
        let meta = ro.store().get("zarr.json").await.unwrap().unwrap();
        assert!(
            String::from_utf8_lossy(&meta).contains("\"v\":2"),
            "spec {spec}"
        );
        let lazy = a.writable_session_lazy("main").await.unwrap();
        assert_eq!(lazy.snapshot_id(), v2);
        let meta = lazy.store().get("zarr.json").await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&meta).contains("\"v\":2"));
    }
}
