//! Corrupt or hostile repositories get a clean, typed error — never a crash, a hang
//! or unbounded memory. Each test crafts the damage with floe's own format layer.

use crate::common;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::storage::LocalStorage;
use floe::{Error, Repository, SnapshotId, VersionSelector};

/// A local spec-1 repository (parents in the snapshot files, which [`reparent`]
/// rewrites) with three commits on `main` (c1 ← c2 ← c3); returns their ids.
async fn three_commits(dir: &std::path::Path) -> (Repository, [SnapshotId; 3]) {
    let repo = common::create_spec1(Arc::new(LocalStorage::new(dir).unwrap()), None).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[1], "uint8"))
        .unwrap();
    let mut ids = Vec::new();
    for v in 0..3u8 {
        s.set_chunk(&p("/a"), &[0], Bytes::from(vec![v]))
            .await
            .unwrap();
        ids.push(s.commit(&format!("c{v}")).await.unwrap());
    }
    (repo, [ids[0], ids[1], ids[2]])
}

/// Rewrites snapshot `id` in place with `parent` as its parent.
async fn reparent(repo: &Repository, id: SnapshotId, parent: SnapshotId) {
    let snap = repo.assets().fetch_snapshot(&id).await.unwrap();
    let mut looped = (*snap).clone();
    looped.parent_id = Some(parent);
    repo.assets()
        .write_snapshot(Arc::new(looped))
        .await
        .unwrap();
}

fn is_loop(e: &Error) -> bool {
    matches!(e, Error::AncestryLoop { .. })
}

#[tokio::test]
async fn looping_ancestry_is_a_typed_error_everywhere() {
    for self_loop in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (_, [c1, c2, c3]) = three_commits(dir.path()).await;
        let writer = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
            .await
            .unwrap();
        // Either c1 names itself, or c1 names its descendant c2 (c2 → c1 → c2 ...).
        reparent(&writer, c1, if self_loop { c1 } else { c2 }).await;
        let repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
            .await
            .unwrap();

        // log
        let err = repo.ancestry(c3).await.unwrap_err();
        assert!(is_loop(&err), "{err}");
        // log --as-of a time before every commit: the walk never finds one.
        let long_ago = chrono::DateTime::<chrono::Utc>::from_timestamp(0, 0).unwrap();
        let err = repo
            .resolve(&VersionSelector::AsOf {
                branch: "main".into(),
                time: long_ago,
            })
            .await
            .unwrap_err();
        assert!(is_loop(&err), "{err}");
        // diff from a snapshot that is not an ancestor (the initial snapshot is cut off
        // by the loop).
        let initial = SnapshotId::random();
        let err = repo.diff(initial, c3).await.unwrap_err();
        assert!(is_loop(&err), "{err}");
        // rebase: a session whose base is not on the looped history.
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/a"), &[1], Bytes::from_static(&[7]))
            .await
            .unwrap();
        let other_repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
            .await
            .unwrap();
        let mover = other_repo.writable_session("main").await.unwrap();
        mover
            .set_chunk(&p("/a"), &[2], Bytes::from_static(&[8]))
            .await
            .unwrap();
        let moved = mover.commit("moves main").await.unwrap();
        // The new tip's parent chain loops before it reaches the session's base.
        reparent(&other_repo, moved, c1).await;
        let err = s.commit("rebases onto a loop").await.unwrap_err();
        assert!(is_loop(&err), "{err}");
        // expiry and garbage collection walk every ref.
        let err = repo
            .expire_snapshots(chrono::Utc::now(), Default::default())
            .await
            .unwrap_err();
        assert!(is_loop(&err), "{err}");
        let err = repo
            .garbage_collect(long_ago, Default::default(), None)
            .await
            .unwrap_err();
        assert!(is_loop(&err), "{err}");
    }
}

#[test]
fn cli_log_of_a_looping_history_fails_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c1 = rt.block_on(async {
        let (repo, [c1, ..]) = three_commits(dir.path()).await;
        reparent(&repo, c1, c1).await;
        c1
    });
    let repo = dir.path().to_str().unwrap();
    for args in [
        vec!["log", repo],
        vec!["log", repo, "--as-of", "1970-01-01T00:00:00Z"],
    ] {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(&args)
            .output()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("loops") && err.contains(&c1.to_string()),
            "{args:?}: {err}"
        );
    }
}

/// Commits a 2-d array with one written chunk; returns the snapshot id.
async fn two_d(repo: &Repository) -> SnapshotId {
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/b"), array_def("/b", &[4, 4], &[2, 2], "uint8"))
        .unwrap();
    s.set_chunk(&p("/b"), &[1, 1], Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .unwrap();
    s.commit("2-d").await.unwrap()
}

/// Rewrites, in place, snapshot `id`'s manifest of the array at `path` (its only
/// manifest) as `edit` changes that array's chunk refs, saved as a new manifest
/// the snapshot then names; returns the rewritten snapshot.
async fn rewrite_manifest(
    repo: &Repository,
    storage: &Arc<dyn floe::storage::Storage>,
    id: SnapshotId,
    path: &str,
    edit: impl FnOnce(
        &mut std::collections::BTreeMap<
            floe::format::ChunkIndices,
            floe::format::manifest::ChunkPayload,
        >,
    ),
) -> floe::format::snapshot::Snapshot {
    use floe::format::snapshot::NodeData;
    use floe::format::ManifestId;

    let snap = repo.assets().fetch_snapshot(&id).await.unwrap();
    let node = snap.nodes.get(&p(path)).unwrap().clone();
    let mref = node.array().unwrap().manifests[0].clone();
    let info = *snap.manifest_info(&mref.object_id).unwrap();
    let manifest = repo
        .assets()
        .fetch_manifest(&mref.object_id, Some(info.size_bytes))
        .await
        .unwrap();
    let mut bad = (*manifest).clone();
    bad.id = ManifestId::random();
    edit(bad.arrays.get_mut(&node.id).unwrap());
    let bytes = bad.encode().unwrap();
    let size = bytes.len() as u64;
    storage
        .put(&format!("manifests/{}", bad.id), Bytes::from(bytes))
        .await
        .unwrap();
    let mut rewired = (*snap).clone();
    rewired.manifest_files = vec![floe::format::snapshot::ManifestFileInfo {
        id: bad.id,
        size_bytes: size,
        ..info
    }];
    if let NodeData::Array(a) = &mut rewired.nodes.get_mut(&p(path)).unwrap().node_data {
        a.manifests[0].object_id = bad.id;
    }
    repo.assets()
        .write_snapshot(Arc::new(rewired.clone()))
        .await
        .unwrap();
    rewired
}

/// A read-only session at snapshot `id` on a fresh handle of `storage` (nothing
/// cached from the handle that rewrote it).
async fn fresh_session(
    storage: &Arc<dyn floe::storage::Storage>,
    id: SnapshotId,
) -> floe::Result<floe::Session> {
    let reader = Repository::open(Arc::clone(storage)).await.unwrap();
    reader
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
}

#[tokio::test]
async fn chunk_refs_of_the_wrong_rank_are_errors_not_fill_values() {
    use floe::format::snapshot::NodeData;

    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn floe::storage::Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let repo = Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    let id = two_d(&repo).await;

    // 1. The manifest holds the chunk at index [1] (rank 1) for a rank-2 array.
    let mut rewired = rewrite_manifest(&repo, &storage, id, "/b", |refs| {
        *refs = std::mem::take(refs)
            .into_iter()
            .map(|(mut idx, payload)| {
                idx.truncate(1);
                (idx, payload)
            })
            .collect();
    })
    .await;
    let s = fresh_session(&storage, id).await.unwrap();
    let err = s.get_chunk(&p("/b"), &[1, 1], None).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Format(floe::format::FormatError::InvalidData {
                what: "manifest",
                ..
            })
        ),
        "{err}"
    );
    let err = s.list_chunks(&p("/b")).await.unwrap_err();
    assert!(matches!(&err, Error::Format(_)), "{err}");

    // 2. The snapshot gives the manifest extents of rank 1.
    if let NodeData::Array(a) = &mut rewired.nodes.get_mut(&p("/b")).unwrap().node_data {
        a.manifests[0].extents = std::iter::once(0..2).collect();
    }
    repo.assets()
        .write_snapshot(Arc::new(rewired))
        .await
        .unwrap();
    let err = fresh_session(&storage, id).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Format(floe::format::FormatError::InvalidData {
                what: "snapshot",
                ..
            })
        ),
        "{err}"
    );
}

/// A native chunk ref whose length disagrees with its chunk object, read through
/// the Array API (whose local reads take a chunk whole on the compute pool, at most
/// twice the decoded size plus 1 MiB, and hand longer refs to the general path): a
/// ref claiming a terabyte, one claiming a byte more than the object holds, and one
/// a byte short are each a typed error naming the chunk, with no allocation of what
/// the ref claims; the other chunks still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_refs_claiming_the_wrong_length_are_typed_errors() {
    use floe::format::manifest::ChunkPayload;
    use floe::zarr::{Array, ArrayBuilder, ArraySubset, CodecError, DataType, Store, ZarrError};

    const N: u64 = 16_384; // elements per chunk: 64 KiB of f32
    let compressed = serde_json::json!([
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
    ]);
    let raw = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    for (codecs, label) in [(compressed, "zstd"), (raw, "uncompressed")] {
        for (delta, what) in [
            (1i64 << 40, "a terabyte more"),
            (1, "one byte more"),
            (-1, "one byte less"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let storage: Arc<dyn floe::storage::Storage> =
                Arc::new(LocalStorage::new(dir.path()).unwrap());
            let repo = Repository::create(Arc::clone(&storage), None)
                .await
                .unwrap();
            let s = repo.writable_session("main").await.unwrap();
            let store: Arc<dyn Store> = Arc::new(s.store());
            let a = ArrayBuilder::new(vec![4 * N], vec![N], DataType::Float32)
                .codecs(serde_json::from_value(codecs.clone()).unwrap())
                .create(store, "a")
                .await
                .unwrap();
            let vals: Vec<f32> = (0..4 * N).map(|i| i as f32 * 0.5).collect();
            a.write_region(&ArraySubset::full(&[4 * N]), &vals)
                .await
                .unwrap();
            let id = s.commit("four chunks").await.unwrap();
            rewrite_manifest(&repo, &storage, id, "/a", |refs| {
                if let Some(ChunkPayload::Native(r)) = refs.get_mut(&vec![2]) {
                    r.length = r.length.checked_add_signed(delta).unwrap();
                } else {
                    panic!("chunk 2 of {label} is not native");
                }
            })
            .await;

            let session = fresh_session(&storage, id).await.unwrap();
            let a = Array::open(Arc::new(session.store()), "a").await.unwrap();
            let err = a
                .read_region::<f32>(&ArraySubset::full(&[4 * N]))
                .await
                .unwrap_err();
            if delta > 0 {
                // More than the object holds: the read is refused before any byte of it.
                let ZarrError::Store(e) = &err else {
                    panic!("{label}, {what}: {err:?}");
                };
                assert!(
                    matches!(
                        e.repository_error(),
                        Some(Error::ChunkUnreadable { index, .. }) if index == &[2]
                    ),
                    "{label}, {what}: {err:?}"
                );
            } else {
                // A byte short: the codec finds the chunk incomplete.
                assert!(
                    matches!(
                        &err,
                        ZarrError::Chunk { key, source: CodecError::InvalidData { .. }, .. }
                            if key == "a/c/2"
                    ),
                    "{label}, {what}: {err:?}"
                );
            }
            // The chunks with honest refs still read, through the same handle.
            let first: Vec<f32> = a
                .read_region(&ArraySubset::new(vec![0], vec![2 * N]))
                .await
                .unwrap();
            assert!(first == vals[..2 * N as usize], "{label}, {what}");
        }
    }
}
