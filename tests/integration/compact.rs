//! Compaction (`Repository::compact`, `floe compact`; issue 48, item 3): the small
//! native chunks of a branch, written one object each, rewritten into packs in one
//! commit with the same values; after expiry and garbage collection only the packs
//! (and the chunks left alone) remain, and reading every chunk back takes a request
//! per pack. `paths` limits the arrays; a compaction whose commit fails, or that
//! loses the race to another writer, leaves the branch as it was. Icechunk 2.3.0
//! reads compacted repositories in `packs.rs`; kill -9 of `floe compact` is in
//! `crash.rs`; the CLI in `cli.rs`.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{self, array_def, p};
use bytes::Bytes;
use floe::format::config::{ChunkPackingConfig, ChunkPackingMode, RepositoryConfig};
use floe::format::manifest::ChunkPayload;
use floe::format::SpecVersion;
use floe::lifecycle::verify::{verify, VerifyOptions};
use floe::repository::CompactOptions;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{LocalStorage, Storage, StorageError};
use floe::{Error, OpenOptions, Repository, VersionSelector};
use futures::StreamExt;

/// Chunk length of the small arrays, in bytes; packs of 16 of them.
const LEN: u64 = 1024;
const TARGET: u32 = 16 * 1024;

/// The arrays of the test repository: path, chunks, chunk length.
const ARRAYS: &[(&str, u64, u64)] = &[("/a", 64, LEN), ("/g/b", 32, LEN), ("/big", 4, 100_000)];

/// The bytes of chunk `i` of the array numbered `a`.
fn chunk(a: usize, i: u64, len: u64) -> Bytes {
    (0..len)
        .map(|k| (k as usize * 3 + a * 41 + i as usize * 7) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Counts calls by method and key prefix; fails `snapshots/` writes while
/// `fail_snapshots` is set, and delays chunk writes by `delay_chunks`.
#[derive(Clone, Default)]
struct Probe {
    counts: Arc<Mutex<HashMap<(Call, String), usize>>>,
    fail_snapshots: Arc<AtomicBool>,
    delay_chunks: Arc<Mutex<Option<Duration>>>,
}

impl Probe {
    fn wrap(&self, inner: Arc<dyn Storage>) -> Arc<dyn Storage> {
        let probe = self.clone();
        Arc::new(FaultyStorage::new(
            inner,
            Box::new(move |call, key| {
                let prefix = key.split('/').next().unwrap_or("").to_string();
                let put = call == Call::Put;
                *probe
                    .counts
                    .lock()
                    .unwrap()
                    .entry((call, prefix.clone()))
                    .or_default() += 1;
                if put && prefix == "snapshots" && probe.fail_snapshots.load(Ordering::SeqCst) {
                    return Fault::FailBefore;
                }
                match *probe.delay_chunks.lock().unwrap() {
                    Some(d) if put && prefix == "chunks" => Fault::Delay(d),
                    _ => Fault::None,
                }
            }),
        ))
    }

    /// Chunk reads (whole and ranged).
    fn chunk_reads(&self) -> usize {
        let c = self.counts.lock().unwrap();
        [Call::Get, Call::GetRange]
            .iter()
            .map(|call| c.get(&(*call, "chunks".into())).copied().unwrap_or(0))
            .sum()
    }

    fn count(&self, call: Call, prefix: &str) -> usize {
        let c = self.counts.lock().unwrap();
        c.get(&(call, prefix.to_string())).copied().unwrap_or(0)
    }

    fn reset(&self) {
        self.counts.lock().unwrap().clear();
    }
}

/// Packing disabled (chunks one object each) with packs of `TARGET` bytes for
/// compaction.
fn config() -> RepositoryConfig {
    let mut c = RepositoryConfig::default();
    c.set_chunk_packing(Some(&ChunkPackingConfig {
        mode: Some(ChunkPackingMode::Disabled),
        threshold_bytes: None,
        target_size_bytes: Some(TARGET),
    }))
    .unwrap();
    c
}

/// A local repository in `dir` with the arrays of [`ARRAYS`], every chunk written
/// as its own object in one commit, chunk 0 of `/a` inline (100 bytes).
async fn small_chunks_repo(dir: &std::path::Path, spec: SpecVersion) -> Repository {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create_with(storage, Some(config()), spec, OpenOptions::default())
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/g"), common::group_json(serde_json::json!({})))
        .unwrap();
    for (a, (path, n, len)) in ARRAYS.iter().enumerate() {
        s.add_array(&p(path), array_def(path, &[n * len], &[*len], "uint8"))
            .unwrap();
        for i in u64::from(*path == "/a")..*n {
            s.set_chunk(&p(path), &[i], chunk(a, i, *len))
                .await
                .unwrap();
        }
    }
    s.set_chunk(&p("/a"), &[0], Bytes::from(vec![9u8; 100]))
        .await
        .unwrap();
    s.commit("small chunks").await.unwrap();
    repo
}

/// Asserts every chunk of every array of `repo`'s main reads as written.
async fn check_values(repo: &Repository) {
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for (a, (path, n, len)) in ARRAYS.iter().enumerate() {
        for i in 0..*n {
            let want = if (*path, i) == ("/a", 0) {
                Bytes::from(vec![9u8; 100])
            } else {
                chunk(a, i, *len)
            };
            assert_eq!(
                r.get_chunk(&p(path), &[i], None).await.unwrap(),
                Some(want),
                "{path} chunk {i}"
            );
        }
    }
}

/// Reads every chunk of every array with a fresh handle over `probe`; returns the
/// chunk reads it took.
async fn read_all(dir: &std::path::Path, probe: &Probe) -> usize {
    let repo = Repository::open(probe.wrap(Arc::new(LocalStorage::new(dir).unwrap())))
        .await
        .unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    probe.reset();
    let wanted: Vec<_> = ARRAYS
        .iter()
        .flat_map(|(path, n, _)| (0..*n).map(|i| (p(path), vec![i])))
        .collect();
    let count = wanted.len();
    let mut many = r.get_chunks(wanted, 8);
    let mut seen = 0;
    while let Some((_, got)) = many.next().await {
        assert!(got.unwrap().is_some());
        seen += 1;
    }
    assert_eq!(seen, count);
    probe.chunk_reads()
}

#[tokio::test]
async fn compact_packs_small_chunks_in_one_commit_and_gc_deletes_the_old_objects() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let repo = small_chunks_repo(dir.path(), spec).await;
        let base = repo.lookup_branch("main").await.unwrap();
        // 63 + 32 small chunks, 4 large ones; chunk 0 of /a is inline.
        assert_eq!(common::chunk_files(dir.path()).len(), 99, "spec {spec}");
        let probe = Probe::default();
        let reads_before = read_all(dir.path(), &probe).await;
        assert_eq!(reads_before, 99, "spec {spec}: one read per chunk object");

        let dry = repo
            .compact("main", &CompactOptions::default().dry_run(true))
            .await
            .unwrap();
        assert_eq!((dry.chunks, dry.packs, dry.snapshot), (95, 6, None));
        assert!(dry.dry_run);
        assert_eq!(
            common::chunk_files(dir.path()).len(),
            99,
            "a dry run writes nothing"
        );
        assert_eq!(repo.lookup_branch("main").await.unwrap(), base);

        let done = repo
            .compact("main", &CompactOptions::default())
            .await
            .unwrap();
        assert_eq!(done.base, base);
        assert_eq!(done.arrays, 3);
        assert_eq!((done.chunks, done.bytes), (95, 95 * LEN));
        // Packs of 16 KiB: 63 chunks of /a then 32 of /g/b, in that order.
        assert_eq!(done.packs, 6);
        assert_eq!(done.chunks_left, 4, "the large chunks");
        assert_eq!(done.threshold_bytes, 65_536);
        assert_eq!(done.target_size_bytes, u64::from(TARGET));
        let tip = repo.lookup_branch("main").await.unwrap();
        assert_eq!(done.snapshot, Some(tip));
        // One new commit, whose parent is the compacted one.
        let history = common::history(&repo, tip).await;
        assert_eq!(&history[..2], &[tip, base], "spec {spec}");
        assert_eq!(
            repo.fetch_snapshot(&tip).await.unwrap().message,
            "compact: 95 chunks into 6 packs"
        );
        check_values(&repo).await;
        // The refs: small chunks in packs, the rest as they were.
        let s = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        let mut packs = BTreeSet::new();
        for (path, _, len) in ARRAYS {
            for (index, payload) in s.chunk_refs(&p(path)).await.unwrap() {
                match payload {
                    ChunkPayload::Native(n) if *len == LEN => {
                        assert_eq!(n.offset % LEN, 0);
                        packs.insert(n.id);
                    }
                    ChunkPayload::Native(n) => assert_eq!(n.offset, 0),
                    ChunkPayload::Inline(b) => {
                        assert_eq!((*path, index, b.len()), ("/a", vec![0], 100))
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(packs.len(), 6);
        // The old objects stay while the old commit does.
        assert_eq!(common::chunk_files(dir.path()).len(), 99 + 6);
        let report = verify(repo.storage().clone(), None, VerifyOptions::default(), None)
            .await
            .unwrap();
        assert!(report.is_ok(), "{:#?}", report.problems);

        common::expire_and_collect(&repo).await;
        let files = common::chunk_files(dir.path());
        assert_eq!(files.len(), 6 + 4, "spec {spec}: {files:?}");
        for pack in &packs {
            assert!(files.contains(&pack.to_string()));
        }
        check_values(&repo).await;
        let reads_after = read_all(dir.path(), &probe).await;
        assert!(
            reads_after <= 10,
            "spec {spec}: {reads_after} chunk reads after compaction"
        );

        // Compacting again finds nothing to do.
        let again = repo
            .compact("main", &CompactOptions::default())
            .await
            .unwrap();
        assert_eq!((again.chunks, again.packs, again.snapshot), (0, 0, None));
        assert_eq!(again.chunks_left, 99);
        assert_eq!(repo.lookup_branch("main").await.unwrap(), tip);
    }
}

#[tokio::test]
async fn compact_paths_limit_the_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let repo = small_chunks_repo(dir.path(), SpecVersion::V2).await;
    let before = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let a_before = before.chunk_refs(&p("/a")).await.unwrap();
    // A group names the arrays below it.
    let done = repo
        .compact(
            "main",
            &CompactOptions::default()
                .paths([p("/g")])
                .message("pack /g"),
        )
        .await
        .unwrap();
    assert_eq!((done.arrays, done.chunks, done.packs), (1, 32, 2));
    let tip = done.snapshot.unwrap();
    assert_eq!(repo.fetch_snapshot(&tip).await.unwrap().message, "pack /g");
    let after = repo
        .readonly_session(&VersionSelector::Snapshot(tip))
        .await
        .unwrap();
    assert_eq!(after.chunk_refs(&p("/a")).await.unwrap(), a_before);
    let b: BTreeSet<_> = after
        .chunk_refs(&p("/g/b"))
        .await
        .unwrap()
        .into_iter()
        .map(|(_, payload)| match payload {
            ChunkPayload::Native(n) => n.id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(b.len(), 2);
    check_values(&repo).await;
    // An array path, and a path that is not in the tree.
    let done = repo
        .compact("main", &CompactOptions::default().paths([p("/a")]))
        .await
        .unwrap();
    assert_eq!((done.arrays, done.chunks, done.packs), (1, 63, 4));
    check_values(&repo).await;
    let err = repo
        .compact("main", &CompactOptions::default().paths([p("/nope")]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NodeNotFound { path } if path.as_str() == "/nope"),
        "{err:?}"
    );
    let err = repo
        .compact("nope", &CompactOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::BranchNotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn a_compact_whose_commit_fails_leaves_the_branch_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    small_chunks_repo(dir.path(), SpecVersion::V2).await;
    let probe = Probe::default();
    let repo = Repository::open(probe.wrap(Arc::new(LocalStorage::new(dir.path()).unwrap())))
        .await
        .unwrap();
    let base = repo.lookup_branch("main").await.unwrap();
    probe.fail_snapshots.store(true, Ordering::SeqCst);
    let err = repo
        .compact("main", &CompactOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Storage(StorageError::Backend { key, .. }) if key.starts_with("snapshots/")),
        "{err:?}"
    );
    assert_eq!(repo.lookup_branch("main").await.unwrap(), base);
    // The packs were written (garbage now); the branch reads as before.
    assert_eq!(common::chunk_files(dir.path()).len(), 99 + 6);
    check_values(&repo).await;
    // Run again: it completes.
    probe.fail_snapshots.store(false, Ordering::SeqCst);
    let done = repo
        .compact("main", &CompactOptions::default())
        .await
        .unwrap();
    assert_eq!(done.base, base);
    assert_eq!(done.chunks, 95);
    check_values(&repo).await;
    // Garbage collection deletes the packs of the failed run and the old objects.
    common::expire_and_collect(&repo).await;
    assert_eq!(common::chunk_files(dir.path()).len(), 6 + 4);
    check_values(&repo).await;
}

#[tokio::test]
async fn a_compact_that_loses_the_race_to_a_writer_fails_with_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    small_chunks_repo(dir.path(), SpecVersion::V2).await;
    let probe = Probe::default();
    *probe.delay_chunks.lock().unwrap() = Some(Duration::from_millis(300));
    let slow = Repository::open(probe.wrap(Arc::new(LocalStorage::new(dir.path()).unwrap())))
        .await
        .unwrap();
    let compacting =
        tokio::spawn(async move { slow.compact("main", &CompactOptions::default()).await });
    // Once the compaction writes its first pack, its session is taken.
    while probe.count(Call::Put, "chunks") == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[5], Bytes::from(vec![7u8; LEN as usize]))
        .await
        .unwrap();
    let written = s.commit("a writer").await.unwrap();
    let err = compacting.await.unwrap().unwrap_err();
    assert!(matches!(&err, Error::Conflict(_)), "{err:?}");
    assert_eq!(repo.lookup_branch("main").await.unwrap(), written);
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/a"), &[5], None).await.unwrap(),
        Some(Bytes::from(vec![7u8; LEN as usize]))
    );
}
