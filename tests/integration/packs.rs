//! Chunk packing (`chunk_packing`): small chunks of a session written several to one
//! chunk object, refs at offsets in it. Requests are counted (a counting storage
//! wrapper over the in-memory store): a thousand 4 KiB chunks cost a request or a
//! few to write and to read back. Packs not written yet read from memory
//! (read-your-writes before the commit); a pack whose write fails fails the commit
//! and is written by the next one; expiry and garbage collection keep a pack while
//! any ref points into it (floe's and Icechunk 2.3.0's); forks write their packs
//! before they travel or merge; `verify` checks a ref's range against its pack; Icechunk
//! 2.3.0 reads packed repositories of spec 1 and spec 2.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{self, p};
use bytes::Bytes;
use floe::format::config::{ChunkPackingConfig, ChunkPackingMode, RepositoryConfig};
use floe::format::manifest::ChunkPayload;
use floe::format::{ChunkId, SpecVersion};
use floe::lifecycle::verify::{verify, ProblemKind, VerifyOptions};
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, LocalStorage, Storage, StorageError};
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType};
use floe::{Error, OpenOptions, Repository, Session, VersionSelector};
use futures::StreamExt;
use serde_json::json;

/// Chunks of the arrays written here, and their length in bytes (uncompressed u8).
const N: u64 = 1000;
const LEN: u64 = 4096;

/// Counts the calls a wrapped storage receives, by method and key prefix.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<HashMap<(Call, String), usize>>>);

impl Counter {
    fn wrap(&self, inner: Arc<dyn Storage>) -> Arc<dyn Storage> {
        self.wrap_failing(inner, Arc::new(AtomicBool::new(false)))
    }

    /// A counting storage over `inner` whose chunk writes fail while `fail` is set.
    fn wrap_failing(&self, inner: Arc<dyn Storage>, fail: Arc<AtomicBool>) -> Arc<dyn Storage> {
        let counts = Arc::clone(&self.0);
        Arc::new(FaultyStorage::new(
            inner,
            Box::new(move |call, key| {
                let prefix = key.split('/').next().unwrap_or("").to_string();
                let chunk_write = call == Call::Put && prefix == "chunks";
                *counts.lock().unwrap().entry((call, prefix)).or_default() += 1;
                if chunk_write && fail.load(Ordering::SeqCst) {
                    Fault::FailBefore
                } else {
                    Fault::None
                }
            }),
        ))
    }

    fn count(&self, call: Call, prefix: &str) -> usize {
        let c = self.0.lock().unwrap();
        c.get(&(call, prefix.to_string())).copied().unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.0.lock().unwrap().values().sum()
    }

    fn reset(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// The bytes of chunk `i` of the arrays here (each chunk distinct).
fn values(n: u64) -> Vec<u8> {
    (0..n * LEN)
        .map(|i| ((i / LEN) * 7 + i % 251) as u8)
        .collect()
}

fn chunk_of(vals: &[u8], i: u64) -> Bytes {
    Bytes::copy_from_slice(&vals[(i * LEN) as usize..((i + 1) * LEN) as usize])
}

/// A configuration with packing in `mode` and packs of `target` bytes.
fn packing(mode: ChunkPackingMode, target: Option<u32>) -> RepositoryConfig {
    let mut c = RepositoryConfig::default();
    c.set_chunk_packing(Some(&ChunkPackingConfig {
        mode: Some(mode),
        threshold_bytes: None,
        target_size_bytes: target,
    }))
    .unwrap();
    c
}

/// Creates the u8 array `/a` of `n` chunks of `LEN` bytes, uncompressed.
async fn create_array(s: &Session, n: u64) -> Array {
    ArrayBuilder::new(vec![n * LEN], vec![LEN], DataType::UInt8)
        .codecs(vec![
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
        ])
        .create(Arc::new(s.store()), "a")
        .await
        .unwrap()
}

/// The native ref of chunk `i` of `/a`.
async fn native(s: &Session, i: u64) -> (ChunkId, u64, u64) {
    match s.get_chunk_ref(&p("/a"), &[i]).await.unwrap() {
        Some(ChunkPayload::Native(n)) => (n.id, n.offset, n.length),
        other => panic!("chunk {i}: a native ref expected, found {other:?}"),
    }
}

/// Chunk objects of a storage, by key.
async fn chunk_objects(storage: &Arc<dyn Storage>) -> BTreeSet<String> {
    storage
        .list("chunks/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect()
}

/// Writes 1,000 chunks of 4 KiB through the Array API and commits; then reads them
/// back from a new repository handle. `target` sets the pack size; returns the chunk
/// objects written.
async fn thousand_chunks(target: Option<u32>, packs: usize) {
    let counter = Counter::default();
    let memory = new_in_memory_storage();
    let config = target.map(|t| packing(ChunkPackingMode::Auto, Some(t)));
    let repo = Repository::create_with(
        counter.wrap(Arc::clone(&memory)),
        config,
        SpecVersion::V2,
        OpenOptions::default(),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let a = create_array(&s, N).await;
    let vals = values(N);
    counter.reset();
    a.write_region(&ArraySubset::full(&[N * LEN]), &vals)
        .await
        .unwrap();
    // Only packs that filled up were written, one request each.
    let written_early = counter.count(Call::Put, "chunks");
    assert_eq!(written_early, packs - 1, "packs written before the commit");
    assert_eq!(counter.total(), written_early);

    // Read-your-writes before the commit, from the open pack: no chunk reads.
    let got: Vec<u8> = a.read_region(&ArraySubset::full(&[N * LEN])).await.unwrap();
    assert!(got == vals, "the session reads its own packed writes");
    assert_eq!(
        s.get_chunk(&p("/a"), &[N - 1], Some(10..20)).await.unwrap(),
        Some(chunk_of(&vals, N - 1).slice(10..20))
    );
    let wanted: Vec<_> = (0..N).map(|i| (p("/a"), vec![i])).collect();
    let mut many = s.get_chunks(wanted, 8);
    let mut seen = 0;
    while let Some((pos, r)) = many.next().await {
        assert_eq!(r.unwrap(), Some(chunk_of(&vals, pos as u64)), "chunk {pos}");
        seen += 1;
    }
    drop(many);
    assert_eq!(seen, N);
    // Chunks of the open pack read from memory; those of each pack already written
    // with one request per batched read (the region read and `get_chunks`).
    assert_eq!(
        counter.count(Call::GetRange, "chunks"),
        2 * written_early,
        "chunk reads"
    );
    assert_eq!(counter.count(Call::Get, "chunks"), 0);
    let (pack0, offset, length) = native(&s, 1).await;
    assert_eq!((offset, length), (LEN, LEN));
    assert_eq!(native(&s, 0).await.0, pack0);

    counter.reset();
    s.commit("a thousand small chunks").await.unwrap();
    let commit_requests = counter.total();
    eprintln!("commit of {N} chunks in {packs} pack(s): {commit_requests} requests");
    assert_eq!(counter.count(Call::Put, "chunks"), 1, "the last pack");
    assert!(
        commit_requests <= 12,
        "a commit of packed chunks takes {commit_requests} requests"
    );
    let objects = chunk_objects(&memory).await;
    assert_eq!(objects.len(), packs, "{objects:?}");

    // Read back with fresh caches: one ranged read per pack.
    let fresh = Repository::open(counter.wrap(Arc::clone(&memory)))
        .await
        .unwrap();
    counter.reset();
    let r = fresh
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let a = Array::open(Arc::new(r.store()), "a").await.unwrap();
    let got: Vec<u8> = a.read_region(&ArraySubset::full(&[N * LEN])).await.unwrap();
    assert!(got == vals, "packed chunks read back");
    assert_eq!(counter.count(Call::GetRange, "chunks"), packs);
    assert_eq!(counter.count(Call::Get, "chunks"), 0);
    let reads = counter.total();
    eprintln!("reading {N} chunks in {packs} pack(s) with fresh caches: {reads} requests");
    assert!(
        reads <= 12,
        "reading a thousand packed chunks takes {reads} requests"
    );
}

#[tokio::test]
async fn thousand_small_chunks_take_few_requests() {
    // Defaults: 4 MB of chunks fit one 8 MiB pack.
    thousand_chunks(None, 1).await;
}

#[tokio::test]
async fn full_packs_are_written_as_they_fill() {
    // 1 MiB packs: 256 chunks each, three full ones and the rest at the commit.
    thousand_chunks(Some(1 << 20), 4).await;
}

#[tokio::test]
async fn chunks_above_the_threshold_or_inline_are_not_packed() {
    let memory = new_in_memory_storage();
    let repo = Repository::create(Arc::clone(&memory), None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    create_array(&s, 4).await;
    s.set_chunk(&p("/a"), &[0], Bytes::from(vec![1u8; 100]))
        .await
        .unwrap();
    s.set_chunk(&p("/a"), &[1], Bytes::from(vec![2u8; 70_000]))
        .await
        .unwrap();
    s.set_chunk(&p("/a"), &[2], Bytes::from(vec![3u8; 65_536]))
        .await
        .unwrap();
    assert!(matches!(
        s.get_chunk_ref(&p("/a"), &[0]).await.unwrap(),
        Some(ChunkPayload::Inline(_))
    ));
    // Above 64 KiB: its own object, written now.
    let (big, offset, _) = native(&s, 1).await;
    assert_eq!(offset, 0);
    assert_eq!(
        chunk_objects(&memory).await,
        BTreeSet::from([format!("chunks/{big}")])
    );
    // At most 64 KiB: packed, written by the commit.
    let (pack, _, len) = native(&s, 2).await;
    assert_eq!(len, 65_536);
    s.commit("mixed").await.unwrap();
    assert_eq!(
        chunk_objects(&memory).await,
        BTreeSet::from([format!("chunks/{big}"), format!("chunks/{pack}")])
    );
}

#[tokio::test]
async fn packing_is_off_for_local_files_unless_enabled() {
    for (config, objects) in [
        (None, 8),
        (Some(packing(ChunkPackingMode::Enabled, None)), 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
        let repo =
            Repository::create_with(storage, config, SpecVersion::V2, OpenOptions::default())
                .await
                .unwrap();
        let s = repo.writable_session("main").await.unwrap();
        let a = create_array(&s, 8).await;
        let vals = values(8);
        // The Array API writes local files from compute threads (the quick path).
        a.write_region(&ArraySubset::full(&[8 * LEN]), &vals)
            .await
            .unwrap();
        let got: Vec<u8> = a.read_region(&ArraySubset::full(&[8 * LEN])).await.unwrap();
        assert!(got == vals);
        s.commit("local").await.unwrap();
        let files = std::fs::read_dir(dir.path().join("chunks"))
            .unwrap()
            .count();
        assert_eq!(files, objects);
        let r = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        let a = Array::open(Arc::new(r.store()), "a").await.unwrap();
        let got: Vec<u8> = a.read_region(&ArraySubset::full(&[8 * LEN])).await.unwrap();
        assert!(got == vals);
    }
}

#[tokio::test]
async fn a_failed_pack_write_fails_the_commit_and_the_next_one_writes_it() {
    let counter = Counter::default();
    let fail = Arc::new(AtomicBool::new(true));
    let memory = new_in_memory_storage();
    let repo = Repository::create(
        counter.wrap_failing(Arc::clone(&memory), Arc::clone(&fail)),
        None,
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let a = create_array(&s, 16).await;
    let vals = values(16);
    a.write_region(&ArraySubset::full(&[16 * LEN]), &vals)
        .await
        .unwrap();
    let err = s.commit("fails").await.unwrap_err();
    assert!(
        matches!(&err, Error::Storage(StorageError::Backend { key, .. }) if key.starts_with("chunks/")),
        "{err:?}"
    );
    assert!(chunk_objects(&memory).await.is_empty());
    assert_eq!(repo.lookup_branch("main").await.unwrap(), s.snapshot_id());
    // Still readable from memory, and written by the next try.
    let got: Vec<u8> = a
        .read_region(&ArraySubset::full(&[16 * LEN]))
        .await
        .unwrap();
    assert!(got == vals);
    assert!(matches!(
        s.flush_packs().await,
        Err(Error::Storage(StorageError::Backend { .. }))
    ));
    fail.store(false, Ordering::SeqCst);
    // An explicit flush writes the pack; the commit then writes no chunk.
    s.flush_packs().await.unwrap();
    let (pack, _, _) = native(&s, 3).await;
    assert_eq!(
        chunk_objects(&memory).await,
        BTreeSet::from([format!("chunks/{pack}")])
    );
    counter.reset();
    s.commit("retried").await.unwrap();
    assert_eq!(counter.count(Call::Put, "chunks"), 0);
    assert_eq!(
        chunk_objects(&memory).await,
        BTreeSet::from([format!("chunks/{pack}")])
    );
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let a = Array::open(Arc::new(r.store()), "a").await.unwrap();
    let got: Vec<u8> = a
        .read_region(&ArraySubset::full(&[16 * LEN]))
        .await
        .unwrap();
    assert!(got == vals);
}

#[tokio::test]
async fn a_pack_that_fills_during_a_failed_write_fails_that_write_only() {
    // Packs of two chunks: the second write of each pair writes the pack.
    let fail = Arc::new(AtomicBool::new(true));
    let memory = new_in_memory_storage();
    let repo = Repository::create_with(
        Counter::default().wrap_failing(Arc::clone(&memory), Arc::clone(&fail)),
        Some(packing(ChunkPackingMode::Auto, Some(2 * LEN as u32))),
        SpecVersion::V2,
        OpenOptions::default(),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    create_array(&s, 4).await;
    let vals = values(4);
    s.set_chunk(&p("/a"), &[0], chunk_of(&vals, 0))
        .await
        .unwrap();
    let err = s
        .set_chunk(&p("/a"), &[1], chunk_of(&vals, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Storage(StorageError::Backend { .. })),
        "{err:?}"
    );
    // The failed write recorded nothing; the chunk before it is still there.
    assert_eq!(s.get_chunk(&p("/a"), &[1], None).await.unwrap(), None);
    assert_eq!(
        s.get_chunk(&p("/a"), &[0], None).await.unwrap(),
        Some(chunk_of(&vals, 0))
    );
    fail.store(false, Ordering::SeqCst);
    s.set_chunk(&p("/a"), &[1], chunk_of(&vals, 1))
        .await
        .unwrap();
    s.commit("after a failure").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for i in 0..2 {
        assert_eq!(
            r.get_chunk(&p("/a"), &[i], None).await.unwrap(),
            Some(chunk_of(&vals, i))
        );
    }
}

/// A packed local repository: `/a` with 10 chunks in one pack.
async fn packed_local(dir: &Path, spec: SpecVersion) -> Repository {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    Repository::create_with(
        storage,
        Some(packing(ChunkPackingMode::Enabled, None)),
        spec,
        OpenOptions::default(),
    )
    .await
    .unwrap()
}

/// Writes chunks `range` of `/a` (values shifted by `shift`) and commits.
async fn write_chunks(repo: &Repository, range: std::ops::Range<u64>, shift: u8) -> ChunkId {
    let s = repo.writable_session("main").await.unwrap();
    if s.get_node(&p("/a")).is_err() {
        create_array(&s, 10).await;
    }
    for i in range.clone() {
        let b: Vec<u8> = chunk_of(&values(10), i)
            .iter()
            .map(|v| v.wrapping_add(shift))
            .collect();
        s.set_chunk(&p("/a"), &[i], Bytes::from(b)).await.unwrap();
    }
    let pack = native(&s, range.start).await.0;
    s.commit(&format!("chunks {range:?}")).await.unwrap();
    pack
}

/// What `/a` holds on main: chunk `i` shifted by `shifts[i]`.
async fn check_main(repo: &Repository, shifts: &[u8]) {
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for (i, shift) in shifts.iter().enumerate() {
        let want: Vec<u8> = chunk_of(&values(10), i as u64)
            .iter()
            .map(|v| v.wrapping_add(*shift))
            .collect();
        assert_eq!(
            r.get_chunk(&p("/a"), &[i as u64], None).await.unwrap(),
            Some(Bytes::from(want)),
            "chunk {i}"
        );
    }
}

#[tokio::test]
async fn expiry_and_gc_keep_a_pack_while_any_ref_points_into_it() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let repo = packed_local(dir.path(), spec).await;
        let p1 = write_chunks(&repo, 0..10, 0).await;
        let p2 = write_chunks(&repo, 0..9, 1).await;
        assert_ne!(p1, p2);
        common::expire_and_collect(&repo).await;
        // Chunk 9 still points into the first pack.
        assert_eq!(
            common::chunk_files(dir.path()),
            BTreeSet::from([p1.to_string(), p2.to_string()]),
            "spec {spec}"
        );
        check_main(&repo, &[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]).await;
        let p3 = write_chunks(&repo, 9..10, 2).await;
        common::expire_and_collect(&repo).await;
        assert_eq!(
            common::chunk_files(dir.path()),
            BTreeSet::from([p2.to_string(), p3.to_string()]),
            "spec {spec}: no ref points into the first pack"
        );
        check_main(&repo, &[1, 1, 1, 1, 1, 1, 1, 1, 1, 2]).await;
    }
}

#[tokio::test]
async fn forks_write_their_packs_before_they_travel() {
    let memory = new_in_memory_storage();
    let repo = Repository::create(Arc::clone(&memory), None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    create_array(&s, 10).await;
    let vals = values(10);
    // The forking session's own packed chunk: written with the fork's base.
    s.set_chunk(&p("/a"), &[0], chunk_of(&vals, 0))
        .await
        .unwrap();
    let fork = s.fork().await.unwrap();
    assert_eq!(chunk_objects(&memory).await.len(), 1);
    for i in 1..5 {
        fork.set_chunk(&p("/a"), &[i], chunk_of(&vals, i))
            .await
            .unwrap();
    }
    // Serializing writes the fork's packs first.
    assert_eq!(chunk_objects(&memory).await.len(), 1);
    let bytes = fork.to_fork_bytes().await.unwrap();
    assert_eq!(chunk_objects(&memory).await.len(), 2);
    // A worker writes more, in a fork of its own process, and sends it back.
    let worker = repo.fork_from_bytes(&bytes).await.unwrap();
    for i in 5..8 {
        worker
            .set_chunk(&p("/a"), &[i], chunk_of(&vals, i))
            .await
            .unwrap();
    }
    let back = repo
        .fork_from_bytes(&worker.to_fork_bytes().await.unwrap())
        .await
        .unwrap();
    assert_eq!(chunk_objects(&memory).await.len(), 3);
    // A fork of this process merged as it is: the merge writes its packs.
    let local = s.fork().await.unwrap();
    for i in 8..10 {
        local
            .set_chunk(&p("/a"), &[i], chunk_of(&vals, i))
            .await
            .unwrap();
    }
    s.merge([back, local]).await.unwrap();
    s.commit("forks").await.unwrap();
    let fresh = Repository::open(Arc::clone(&memory)).await.unwrap();
    let r = fresh
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    for i in 0..10 {
        assert_eq!(
            r.get_chunk(&p("/a"), &[i], None).await.unwrap(),
            Some(chunk_of(&vals, i)),
            "chunk {i}"
        );
    }
}

#[tokio::test]
async fn verify_checks_refs_against_their_pack() {
    let dir = tempfile::tempdir().unwrap();
    let repo = packed_local(dir.path(), SpecVersion::V2).await;
    let pack = write_chunks(&repo, 0..10, 0).await;
    let run = || async {
        let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
        verify(storage, None, VerifyOptions::default(), None)
            .await
            .unwrap()
    };
    let report = run().await;
    assert!(report.is_ok(), "{:#?}", report.problems);
    // Cut the pack after chunk 6: the refs of chunks 7, 8 and 9 point past its end.
    let file = dir.path().join("chunks").join(pack.to_string());
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..(7 * LEN) as usize]).unwrap();
    let report = run().await;
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let short = &report.problems[0];
    assert_eq!(short.kind, ProblemKind::TruncatedChunk);
    assert_eq!(
        short.key.as_deref(),
        Some(format!("chunks/{pack}").as_str())
    );
    assert!(
        short
            .message
            .contains("holds 28672 bytes; a ref needs 40960"),
        "{short:?}"
    );
    // Named at a ref past the end (chunks 0 to 6 lie within what is left).
    let chunk = short.chunk.clone().unwrap();
    assert!(chunk[0] >= 7, "{short:?}");
    assert_eq!(short.array.as_deref(), Some("/a"));
}

// --- Icechunk 2.3.0 -----------------------------------------------------------------

/// Runs `code` in the Python 3.12 interpreter with icechunk 2.x, with `args`;
/// returns its stdout, panicking with its output unless it exits 0. `None` when the
/// interpreter is missing (a failure under `CI=true`).
fn icechunk(code: &str, args: &[&str]) -> Option<String> {
    let py = common::require(common::python312(), "python 3.12 with icechunk 2.x")?;
    Some(common::python_stdout(&py, code, args))
}

/// Prints icechunk's version, and the bytes of `/a` on main as hex.
const READ_A: &str = r#"
import sys, icechunk, zarr
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))
a = zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")
print(icechunk.__version__)
print(bytes(a[:]).hex())
"#;

/// Expires every snapshot before now and collects garbage, as Icechunk does.
const COLLECT: &str = r#"
import sys, datetime, icechunk
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))
now = datetime.datetime.now(datetime.timezone.utc)
repo.expire_snapshots(now)
print(repo.garbage_collect(now))
"#;

#[tokio::test]
async fn icechunk_reads_packed_repositories() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let repo = packed_local(dir.path(), spec).await;
        let s = repo.writable_session("main").await.unwrap();
        let a = create_array(&s, 10).await;
        let vals = values(10);
        a.write_region(&ArraySubset::full(&[10 * LEN]), &vals)
            .await
            .unwrap();
        s.commit("packed").await.unwrap();
        assert_eq!(common::chunk_files(dir.path()).len(), 1);
        let path = dir.path().to_str().unwrap();
        let Some(out) = icechunk(READ_A, &[path]) else {
            return;
        };
        let mut lines = out.lines();
        assert!(lines.next().unwrap().starts_with("2."), "{out}");
        let hex: String = vals.iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            lines.next() == Some(hex.as_str()),
            "spec {spec}: icechunk reads other values"
        );
    }
}

#[tokio::test]
async fn icechunk_gc_keeps_a_pack_while_any_ref_points_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let repo = packed_local(dir.path(), SpecVersion::V2).await;
    let p1 = write_chunks(&repo, 0..10, 0).await;
    let p2 = write_chunks(&repo, 0..9, 1).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let Some(_) = icechunk(COLLECT, &[&path]) else {
        return;
    };
    assert_eq!(
        common::chunk_files(dir.path()),
        BTreeSet::from([p1.to_string(), p2.to_string()])
    );
    let repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
        .await
        .unwrap();
    check_main(&repo, &[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]).await;
    let p3 = write_chunks(&repo, 9..10, 2).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    icechunk(COLLECT, &[&path]).unwrap();
    assert_eq!(
        common::chunk_files(dir.path()),
        BTreeSet::from([p2.to_string(), p3.to_string()])
    );
    let repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
        .await
        .unwrap();
    check_main(&repo, &[1, 1, 1, 1, 1, 1, 1, 1, 1, 2]).await;
    let out = icechunk(READ_A, &[&path]).unwrap();
    let want: Vec<u8> = (0..10u64)
        .flat_map(|i| {
            let shift = if i == 9 { 2 } else { 1 };
            chunk_of(&values(10), i)
                .iter()
                .map(move |v| v.wrapping_add(shift))
                .collect::<Vec<_>>()
        })
        .collect();
    let hex: String = want.iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        out.lines().nth(1) == Some(hex.as_str()),
        "icechunk reads other values"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_during_commits_never_reference_unwritten_packs() {
    // Packs of eight chunks; eight writers and a committer at once: every commit
    // takes some chunks whose packs are still open or being written.
    let memory = new_in_memory_storage();
    let repo = Repository::create_with(
        Arc::clone(&memory),
        Some(packing(ChunkPackingMode::Auto, Some(8 * LEN as u32))),
        SpecVersion::V2,
        OpenOptions::default(),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let n = 400;
    create_array(&s, n).await;
    s.commit("array").await.unwrap();
    let vals = values(n);
    let writers: Vec<_> = (0..8u64)
        .map(|w| {
            let s = s.clone();
            let vals = vals.clone();
            tokio::spawn(async move {
                for i in (w..n).step_by(8) {
                    s.set_chunk(&p("/a"), &[i], chunk_of(&vals, i))
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            })
        })
        .collect();
    let mut commits = Vec::new();
    while !writers.iter().all(tokio::task::JoinHandle::is_finished) {
        match s.commit("while writing").await {
            Ok(id) => commits.push(id),
            Err(Error::NoChangesToCommit) => {}
            Err(e) => panic!("{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for w in writers {
        w.await.unwrap();
    }
    if s.has_uncommitted_changes() {
        commits.push(s.commit("the rest").await.unwrap());
    }
    eprintln!("{} commits while writing", commits.len());
    assert!(commits.len() >= 2, "{} commits", commits.len());
    // Every commit reads back whole, from storage only: each of its refs points into
    // a pack that was complete before the commit.
    let fresh = Repository::open(Arc::clone(&memory)).await.unwrap();
    for id in &commits {
        let r = fresh
            .readonly_session(&VersionSelector::Snapshot(*id))
            .await
            .unwrap();
        let wanted: Vec<_> = (0..n).map(|i| (p("/a"), vec![i])).collect();
        let mut many = r.get_chunks(wanted, 8);
        while let Some((pos, got)) = many.next().await {
            if let Some(bytes) = got.unwrap() {
                assert_eq!(bytes, chunk_of(&vals, pos as u64), "{id} chunk {pos}");
            }
        }
    }
    let report = verify(Arc::clone(&memory), None, VerifyOptions::default(), None)
        .await
        .unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
    let r = fresh
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let a = Array::open(Arc::new(r.store()), "a").await.unwrap();
    let got: Vec<u8> = a.read_region(&ArraySubset::full(&[n * LEN])).await.unwrap();
    assert!(got == vals);
}

#[tokio::test]
async fn discarded_changes_drop_their_open_pack() {
    let memory = new_in_memory_storage();
    let repo = Repository::create(Arc::clone(&memory), None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    create_array(&s, 4).await;
    s.commit("array").await.unwrap();
    let vals = values(4);
    s.set_chunk(&p("/a"), &[0], chunk_of(&vals, 0))
        .await
        .unwrap();
    let (discarded, _, _) = native(&s, 0).await;
    s.discard_changes();
    assert!(!s.has_uncommitted_changes());
    assert_eq!(s.get_chunk(&p("/a"), &[0], None).await.unwrap(), None);
    // The next chunk opens a new pack: the discarded one is never written.
    s.set_chunk(&p("/a"), &[1], chunk_of(&vals, 1))
        .await
        .unwrap();
    let (kept, offset, _) = native(&s, 1).await;
    assert_ne!(kept, discarded, "a chunk went to the discarded pack");
    assert_eq!(offset, 0);
    s.commit("after a discard").await.unwrap();
    assert_eq!(
        chunk_objects(&memory).await,
        BTreeSet::from([format!("chunks/{kept}")])
    );
    // Discarding with nothing but a packed chunk pending writes no object either.
    s.set_chunk(&p("/a"), &[2], chunk_of(&vals, 2))
        .await
        .unwrap();
    s.discard_changes();
    s.flush_packs().await.unwrap();
    assert_eq!(chunk_objects(&memory).await.len(), 1);
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/a"), &[1], None).await.unwrap(),
        Some(chunk_of(&vals, 1))
    );
    assert_eq!(r.get_chunk(&p("/a"), &[0], None).await.unwrap(), None);
}

#[tokio::test]
async fn icechunk_reads_compacted_repositories() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap().to_string();
        // Local files: packing is off, each chunk is an object of its own.
        let repo = Repository::create_with(
            Arc::new(LocalStorage::new(dir.path()).unwrap()),
            None,
            spec,
            OpenOptions::default(),
        )
        .await
        .unwrap();
        let s = repo.writable_session("main").await.unwrap();
        let a = create_array(&s, 10).await;
        let vals = values(10);
        a.write_region(&ArraySubset::full(&[10 * LEN]), &vals)
            .await
            .unwrap();
        s.commit("one object per chunk").await.unwrap();
        assert_eq!(common::chunk_files(dir.path()).len(), 10);
        let done = repo
            .compact("main", &floe::repository::CompactOptions::default())
            .await
            .unwrap();
        assert_eq!((done.chunks, done.packs), (10, 1), "spec {spec}");
        let hex: String = vals.iter().map(|b| format!("{b:02x}")).collect();
        let Some(out) = icechunk(READ_A, &[&path]) else {
            return;
        };
        assert!(
            out.lines().nth(1) == Some(hex.as_str()),
            "spec {spec}: icechunk reads other values"
        );
        if spec == SpecVersion::V2 {
            // Icechunk's expiry and garbage collection keep the pack, delete the rest.
            tokio::time::sleep(Duration::from_millis(20)).await;
            icechunk(COLLECT, &[&path]).unwrap();
            assert_eq!(common::chunk_files(dir.path()).len(), 1);
            let out = icechunk(READ_A, &[&path]).unwrap();
            assert!(
                out.lines().nth(1) == Some(hex.as_str()),
                "icechunk reads other values after its garbage collection"
            );
        }
    }
}
