//! Wide and deep commits (issue 14's goals, from Icechunk users' reports):
//! - `arrays_5760_one_chunk_each`: one commit that writes one chunk in each of 5,760
//!   arrays of a repository on local disk (goal: ≤ 2 s);
//! - `arrays_64_x_150k_refs_30ms`: one commit of 64 new arrays of 150,000 chunk refs
//!   each (9.6 million refs), on storage that adds 30 ms to every request
//!   (goal: ≤ 1.5 s), at the default zstd levels (1 for manifests and transaction
//!   logs, 3 for the snapshot) and with `compression.level: 3` for every file.
//!
//! Only the commit is timed; each sample commits a freshly prepared session.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use floe::format::config::RepositoryConfig;
use floe::format::manifest::{ChunkPayload, NativeChunkRef};
use floe::format::{ChunkId, NodePath};
use floe::storage::fault::{Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, LocalStorage, Storage};
use floe::zarr::store::Store;
use floe::{Repository, Session};

fn array_json(len: u64, chunk: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":[{len}],"data_type":"uint8",
        "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{chunk}]}}}},
        "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
        "fill_value":0,"codecs":[{{"name":"bytes"}}],"attributes":{{}}}}"#
    ))
}

const WIDE: usize = 5_760;

/// A repository on local disk with `WIDE` committed arrays of 10 chunks, one written.
async fn wide_repo(dir: &std::path::Path) -> Repository {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create(storage, None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store
        .set(
            "zarr.json",
            Bytes::from_static(br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#),
        )
        .await
        .unwrap();
    for a in 0..WIDE {
        store
            .set(&format!("v{a}/zarr.json"), array_json(10, 1))
            .await
            .unwrap();
        store
            .set(&format!("v{a}/c/0"), Bytes::from_static(&[1]))
            .await
            .unwrap();
    }
    s.commit("wide").await.unwrap();
    repo
}

/// A session writing chunk 1 of every array (inline one-byte chunks: the commit's
/// cost is the manifests and snapshot, not chunk uploads).
async fn wide_changes(repo: &Repository, round: u8) -> Session {
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    for a in 0..WIDE {
        store
            .set(&format!("v{a}/c/1"), Bytes::from(vec![round]))
            .await
            .unwrap();
    }
    s
}

const DEEP_ARRAYS: usize = 64;
const DEEP_REFS: u64 = 150_000;

/// A session adding `DEEP_ARRAYS` arrays of `DEEP_REFS` native chunk refs each.
async fn deep_changes(repo: &Repository) -> Session {
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    for a in 0..DEEP_ARRAYS {
        store
            .set(&format!("d{a}/zarr.json"), array_json(DEEP_REFS, 1))
            .await
            .unwrap();
        let path = NodePath::new(&format!("/d{a}")).unwrap();
        s.set_chunk_refs(
            &path,
            (0..DEEP_REFS).map(|i| {
                let payload = ChunkPayload::Native(NativeChunkRef {
                    id: ChunkId::random(),
                    offset: 0,
                    length: 4096,
                });
                (vec![i], Some(payload))
            }),
        )
        .unwrap();
    }
    s
}

fn wide_and_deep(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("wide_and_deep_commits");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));

    let dir = tempfile::tempdir().unwrap();
    let repo = rt.block_on(wide_repo(dir.path()));
    let mut round = 0u8;
    group.bench_function("arrays_5760_one_chunk_each", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round = round.wrapping_add(1);
                let s = rt.block_on(wide_changes(&repo, round));
                let t = Instant::now();
                black_box(rt.block_on(s.commit("one chunk in every array")).unwrap());
                total += t.elapsed();
            }
            total
        })
    });

    // At the default zstd levels and at `compression.level: 3` (Icechunk's level for
    // every file).
    for (name, level) in [
        ("arrays_64_x_150k_refs_30ms", None),
        ("arrays_64_x_150k_refs_30ms_level_3", Some(3)),
    ] {
        let slow: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
            new_in_memory_storage(),
            Box::new(|_, _| Fault::Delay(Duration::from_millis(30))),
        ));
        let mut config = RepositoryConfig::default();
        config.set_compression_level(level);
        let repo = rt.block_on(Repository::create(slow, Some(config))).unwrap();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let s = rt.block_on(deep_changes(&repo));
                    let t = Instant::now();
                    black_box(rt.block_on(s.commit("9.6 million refs")).unwrap());
                    total += t.elapsed();
                    // The next sample adds the same arrays again: start from the
                    // snapshot before them.
                    let tip = rt.block_on(repo.lookup_branch("main")).unwrap();
                    let parent = rt.block_on(repo.ancestry(tip)).unwrap()[1].id;
                    rt.block_on(repo.reset_branch("main", parent, None))
                        .unwrap();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, wide_and_deep);
criterion_main!(benches);
