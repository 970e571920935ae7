//! Repository engine benchmarks: the cost of a commit that changes one chunk, in
//! repositories with few and with many untouched arrays (it should not grow with the
//! repository), an attribute-only commit on local disk in each durability mode (the
//! fixed cost of a commit), and reading a snapshot with many nodes.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use floe::format::NodePath;
use floe::storage::new_in_memory_storage;
use floe::{Repository, VersionSelector};

fn array_json(n: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":[{n}],"data_type":"uint8",
        "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[1]}}}},
        "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
        "fill_value":0,"codecs":[{{"name":"bytes"}}],"attributes":{{}}}}"#
    ))
}

async fn repo_with_arrays(arrays: usize, chunks_each: u32) -> Repository {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    use floe::zarr::store::Store;
    for a in 0..arrays {
        store
            .set(
                &format!("a{a}/zarr.json"),
                array_json(u64::from(chunks_each)),
            )
            .await
            .unwrap();
        for c in 0..chunks_each {
            store
                .set(&format!("a{a}/c/{c}"), Bytes::from(vec![1u8; 8]))
                .await
                .unwrap();
        }
    }
    s.commit("setup").await.unwrap();
    repo
}

fn commit_one_chunk(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("commit_one_chunk");
    group.sample_size(20);
    for arrays in [10usize, 1000] {
        let repo = rt.block_on(repo_with_arrays(arrays, 100));
        let path = NodePath::new("/a0").unwrap();
        group.bench_with_input(BenchmarkId::from_parameter(arrays), &arrays, |b, _| {
            b.to_async(&rt).iter(|| async {
                let s = repo.writable_session("main").await.unwrap();
                s.set_chunk(&path, &[0], Bytes::from_static(&[7; 8]))
                    .await
                    .unwrap();
                black_box(s.commit("one chunk").await.unwrap())
            })
        });
    }
    group.finish();
}

/// The fixed cost of a commit: only a group's attributes change, on local disk, with
/// [`Durability::Process`] (no fsync) and [`Durability::Synced`].
fn commit_attributes_local(c: &mut Criterion) {
    use floe::storage::{Durability, LocalStorage, LocalStorageOptions};
    use floe::zarr::store::Store;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("commit_attributes_local");
    group.sample_size(50);
    for (name, durability) in [
        ("process", Durability::Process),
        ("synced", Durability::Synced),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = LocalStorageOptions::default().durability(durability);
        let storage = std::sync::Arc::new(LocalStorage::with_options(dir.path(), options).unwrap());
        let repo = rt.block_on(Repository::create(storage, None)).unwrap();
        let mut n = 0u64;
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| {
                n += 1;
                let repo = &repo;
                async move {
                    let s = repo.writable_session("main").await.unwrap();
                    let json = format!(
                        r#"{{"zarr_format":3,"node_type":"group","attributes":{{"n":{n}}}}}"#
                    );
                    s.store().set("zarr.json", Bytes::from(json)).await.unwrap();
                    black_box(s.commit("attributes").await.unwrap())
                }
            })
        });
    }
    group.finish();
}

fn open_session(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let repo = rt.block_on(repo_with_arrays(1000, 1));
    let mut group = c.benchmark_group("readonly_session_1000_nodes");
    group.sample_size(20);
    group.bench_function("cold", |b| {
        b.to_async(&rt).iter(|| async {
            // A fresh Repository has empty caches: fetch and decode the snapshot.
            let r = Repository::open(std::sync::Arc::clone(repo.storage()))
                .await
                .unwrap();
            black_box(
                r.readonly_session(&VersionSelector::Branch("main".into()))
                    .await
                    .unwrap(),
            )
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    commit_one_chunk,
    commit_attributes_local,
    open_session
);
criterion_main!(benches);
