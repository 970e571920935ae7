//! History benchmarks on the local filesystem:
//! - the ancestry of a 10,000-commit branch on a spec-2 repository, from a cold
//!   repository handle (open + one `repo` fetch + the walk) and from an open one
//!   (goal: well under 100 ms);
//! - the ancestry of a 2,001-commit branch on a spec-1 repository (one snapshot file
//!   per commit) from a fresh handle with the page cache warm (goal: 60 ms), and the
//!   newest 10 commits of it.
//!
//! The `repo` object is built directly (10,000 chained snapshot summaries with
//! messages and metadata, as Icechunk writes them) rather than by 10,000 commits:
//! the ancestry reads nothing else.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use floe::format::repo_info::{RepoInfo, RepoUpdate, SnapshotSummary, UpdateKind};
use floe::format::{SnapshotId, SpecVersion};
use floe::storage::{LocalStorage, Storage};
use floe::{OpenOptions, Repository};

const COMMITS: usize = 10_000;

/// A spec-2 repository whose `main` has `COMMITS` commits on top of the initial one.
async fn deep_repo(dir: &std::path::Path) -> SnapshotId {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    Repository::create_with(
        Arc::clone(&storage),
        None,
        SpecVersion::V2,
        OpenOptions::default(),
    )
    .await
    .unwrap();
    let mut info = RepoInfo::decode(&storage.get("repo").await.unwrap().bytes).unwrap();
    let mut parent = SnapshotId::INITIAL;
    let mut time = info.snapshots[&parent].flushed_at;
    for i in 0..COMMITS {
        let id = SnapshotId::random();
        time += 1_000_000;
        info.snapshots.insert(
            id,
            SnapshotSummary {
                id,
                parent_id: Some(parent),
                flushed_at: time,
                message: format!("commit {i}: appended one day of model output"),
                metadata: BTreeMap::from([("author".to_string(), serde_json::json!("bench"))]),
                pruned_ancestor_tx_logs: None,
            },
        );
        info.latest_updates.insert(
            0,
            RepoUpdate {
                kind: UpdateKind::NewCommit {
                    branch: "main".into(),
                    new_snap_id: id,
                },
                updated_at: time,
                backup_path: Some(format!("repo.{i}")),
            },
        );
        parent = id;
    }
    info.latest_updates.truncate(1000);
    info.latest_updates[0].backup_path = None;
    info.branches.insert("main".into(), parent);
    storage
        .put("repo", Bytes::from(info.encode().unwrap()))
        .await
        .unwrap();
    parent
}

fn ancestry_spec2(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tip = rt.block_on(deep_repo(dir.path()));
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let mut group = c.benchmark_group("ancestry_spec2_10k_commits");
    group.sample_size(20);
    group.bench_function("cold_open_and_ancestry", |b| {
        b.iter(|| {
            rt.block_on(async {
                let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
                let tip = repo.lookup_branch("main").await.unwrap();
                let history = repo.ancestry(tip).await.unwrap();
                assert_eq!(history.len(), COMMITS + 1);
                black_box(history);
            })
        })
    });
    let repo = rt.block_on(Repository::open(Arc::clone(&storage))).unwrap();
    group.bench_function("ancestry_open_repository", |b| {
        b.iter(|| {
            rt.block_on(async {
                let history = repo.ancestry(tip).await.unwrap();
                black_box(history.len());
            })
        })
    });
    group.finish();
}

const SPEC1_COMMITS: usize = 2_000;

/// A spec-1 repository whose `main` has `SPEC1_COMMITS` real commits (each changes the
/// root group's attributes) on top of the initial one.
async fn deep_spec1_repo(dir: &std::path::Path) {
    use floe::format::NodePath;
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create_with(storage, None, SpecVersion::V1, OpenOptions::default())
        .await
        .unwrap();
    let root = NodePath::new("/").unwrap();
    for i in 0..SPEC1_COMMITS {
        let s = repo.writable_session("main").await.unwrap();
        let json = Bytes::from(format!(
            r#"{{"zarr_format":3,"node_type":"group","attributes":{{"day":{i}}}}}"#
        ));
        if i == 0 {
            s.add_group(&root, json).unwrap();
        } else {
            s.update_group(&root, json).unwrap();
        }
        s.commit(&format!("commit {i}: appended one day of model output"))
            .await
            .unwrap();
    }
}

fn ancestry_spec1(c: &mut Criterion) {
    use floe::VersionSelector;
    use futures::{StreamExt, TryStreamExt};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(deep_spec1_repo(dir.path()));
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let mut group = c.benchmark_group("ancestry_spec1_2001_commits");
    group.sample_size(20);
    group.bench_function("fresh_handle_whole_history", |b| {
        b.iter(|| {
            rt.block_on(async {
                let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
                let tip = repo.lookup_branch("main").await.unwrap();
                let history = repo.ancestry(tip).await.unwrap();
                assert_eq!(history.len(), SPEC1_COMMITS + 1);
                black_box(history);
            })
        })
    });
    group.bench_function("fresh_handle_newest_10", |b| {
        b.iter(|| {
            rt.block_on(async {
                let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
                let newest: Vec<_> = repo
                    .ancestry_stream(VersionSelector::Branch("main".into()))
                    .take(10)
                    .try_collect()
                    .await
                    .unwrap();
                assert_eq!(newest.len(), 10);
                black_box(newest);
            })
        })
    });
    group.finish();
}

criterion_group!(benches, ancestry_spec2, ancestry_spec1);
criterion_main!(benches);
