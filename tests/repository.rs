//! Repository engine: layout of a new repository, commits, branches, tags, time
//! travel, conflicts and rebase, on the local filesystem and in memory.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use common::{array_def, group_json, p};
use floe::format::envelope::{self, FileType};
use floe::format::manifest::ChunkPayload;
use floe::format::snapshot::Snapshot;
use floe::format::SnapshotId;
use floe::session::{CommitOptions, Conflict};
use floe::storage::{new_in_memory_storage, LocalStorage, Storage};
use floe::{Error, Repository, VersionSelector};

fn local(dir: &tempfile::TempDir) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir.path()).unwrap())
}

async fn keys(storage: &dyn Storage) -> Vec<String> {
    storage
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect()
}

#[tokio::test]
async fn new_repository_has_exactly_the_spec_layout() {
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    assert_eq!(
        keys(storage.as_ref()).await,
        vec![
            "refs/branch.main/ref.json",
            "snapshots/1CECHNKREP0F1RSTCMT0"
        ]
    );
    let r = storage
        .get("refs/branch.main/ref.json")
        .await
        .unwrap()
        .bytes;
    assert_eq!(&r[..], br#"{"snapshot":"1CECHNKREP0F1RSTCMT0"}"#);
    let snap = storage
        .get("snapshots/1CECHNKREP0F1RSTCMT0")
        .await
        .unwrap()
        .bytes;
    assert_eq!(&snap[..12], "ICE🧊CHUNK".as_bytes());
    let writer = std::str::from_utf8(&snap[12..36]).unwrap();
    assert_eq!(
        writer.trim_end(),
        format!("floe-{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(writer.len(), 24);
    assert_eq!(snap[36], 1, "spec version");
    assert_eq!(snap[37], 1, "file type snapshot");
    assert_eq!(snap[38], 1, "zstd");
    let payload = envelope::open(FileType::Snapshot, &snap).unwrap();
    assert_eq!(&payload[4..8], b"Ichk");
    let s = Snapshot::decode(&snap).unwrap();
    assert_eq!(s.id, SnapshotId::INITIAL);
    assert_eq!(s.parent_id, None);
    assert_eq!(s.message, "Repository initialized");
    assert!(s.nodes.is_empty() && s.manifest_files.is_empty());
    assert_eq!(
        s.metadata,
        BTreeMap::from([("__root".to_string(), serde_json::json!(true))])
    );
    // A second create fails, the first repository is untouched.
    assert!(matches!(
        Repository::create(Arc::clone(&storage), None).await,
        Err(Error::RepositoryExists { .. })
    ));
    assert_eq!(keys(storage.as_ref()).await.len(), 2);
}

#[tokio::test]
async fn open_missing_repository_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Repository::open(local(&dir)).await,
        Err(Error::RepositoryNotFound { .. })
    ));
}

#[tokio::test]
async fn a_corrupt_repo_object_is_a_typed_format_error() {
    let storage = new_in_memory_storage();
    storage
        .put("repo", Bytes::from_static(b"\x00"))
        .await
        .unwrap();
    let err = Repository::open(Arc::clone(&storage)).await.unwrap_err();
    // A `repo` object marks spec 2, whatever else is there; this one is corrupt.
    assert!(
        matches!(
            err,
            Error::Format(floe::format::FormatError::Truncated { .. })
        ),
        "{err}"
    );
}

/// One chunk-index convention: sessions take the `u64` grid coordinates Zarr arrays
/// use, and refuse (typed) a coordinate Icechunk files cannot store (above
/// `u32::MAX`), however large the chunk grid; a manifest holding one fails to encode.
#[tokio::test]
async fn chunk_coordinates_are_u64_and_bounded_by_the_format() {
    use floe::format::manifest::Manifest;
    use floe::format::{FormatError, ManifestId, NodeId, MAX_CHUNK_COORDINATE};
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::create(local(&dir), None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    // 2^40 chunks along the only dimension.
    s.add_array(&p("/huge"), array_def("/huge", &[1 << 40], &[1], "uint8"))
        .unwrap();
    let last = MAX_CHUNK_COORDINATE;
    s.set_chunk(&p("/huge"), &[last], Bytes::from_static(b"x"))
        .await
        .unwrap();
    for beyond in [last + 1, 1 << 39] {
        let err = s
            .set_chunk(&p("/huge"), &[beyond], Bytes::from_static(b"y"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidChunkIndex { index, .. } if index == &vec![beyond]),
            "{err}"
        );
        let err = s
            .set_chunk_refs(&p("/huge"), [(vec![beyond], None)])
            .unwrap_err();
        assert!(matches!(err, Error::InvalidChunkIndex { .. }), "{err}");
    }
    let id = s.commit("edge").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    assert_eq!(r.list_chunks(&p("/huge")).await.unwrap(), vec![vec![last]]);
    assert_eq!(
        r.get_chunk(&p("/huge"), &[last], None).await.unwrap(),
        Some(Bytes::from_static(b"x"))
    );

    // The format layer refuses to write what it cannot store.
    let mut m = Manifest {
        id: ManifestId::random(),
        arrays: BTreeMap::new(),
    };
    m.arrays.entry(NodeId::random()).or_default().insert(
        vec![last + 1],
        floe::format::manifest::ChunkPayload::Inline(Bytes::from_static(b"z")),
    );
    assert!(matches!(
        m.encode(),
        Err(FormatError::ChunkIndexTooLarge { .. })
    ));
}

#[tokio::test]
async fn commit_and_read_back_nodes_and_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::create(local(&dir), None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({"title": "root"})))
        .unwrap();
    s.add_group(&p("/g"), group_json(serde_json::json!({})))
        .unwrap();
    s.add_array(&p("/g/a"), array_def("/g/a", &[10, 10], &[5, 5], "int32"))
        .unwrap();
    let small = Bytes::from(vec![7u8; 100]);
    let big = Bytes::from(vec![9u8; 4000]);
    s.set_chunk(&p("/g/a"), &[0, 0], small.clone())
        .await
        .unwrap();
    s.set_chunk(&p("/g/a"), &[1, 1], big.clone()).await.unwrap();
    // A writable session reads its own uncommitted changes.
    assert_eq!(
        s.get_chunk(&p("/g/a"), &[1, 1], None).await.unwrap(),
        Some(big.clone())
    );
    assert!(matches!(
        s.set_chunk(&p("/g/a"), &[2, 0], small.clone()).await,
        Err(Error::InvalidChunkIndex { .. })
    ));
    let mut meta = BTreeMap::new();
    meta.insert("author".to_string(), serde_json::json!("me"));
    let id = s
        .commit_with("first", meta.clone(), CommitOptions::default())
        .await
        .unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), id);

    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    assert!(matches!(
        r.get_chunk_ref(&p("/g/a"), &[0, 0]).await.unwrap(),
        Some(ChunkPayload::Inline(_))
    ));
    assert!(matches!(
        r.get_chunk_ref(&p("/g/a"), &[1, 1]).await.unwrap(),
        Some(ChunkPayload::Native(_))
    ));
    assert_eq!(
        r.get_chunk(&p("/g/a"), &[0, 0], None).await.unwrap(),
        Some(small)
    );
    assert_eq!(
        r.get_chunk(&p("/g/a"), &[1, 1], Some(10..20))
            .await
            .unwrap(),
        Some(big.slice(10..20))
    );
    assert_eq!(r.get_chunk(&p("/g/a"), &[0, 1], None).await.unwrap(), None);
    assert_eq!(
        r.list_chunks(&p("/g/a")).await.unwrap(),
        vec![vec![0, 0], vec![1, 1]]
    );
    let paths: Vec<String> = r
        .list_nodes()
        .into_iter()
        .map(|n| n.path.to_string())
        .collect();
    assert_eq!(paths, vec!["/", "/g", "/g/a"]);
    assert!(matches!(
        r.add_group(&p("/x"), group_json(serde_json::json!({}))),
        Err(Error::ReadOnlySession)
    ));

    let log = repo.ancestry(id).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].message, "first");
    assert_eq!(log[0].metadata, meta);
    assert_eq!(log[0].parent_id, Some(SnapshotId::INITIAL));
    assert_eq!(log[1].id, SnapshotId::INITIAL);

    // The transaction log and one manifest per array were written.
    let storage = repo.storage();
    let keys = keys(storage.as_ref()).await;
    assert!(keys.contains(&format!("transactions/{id}")));
    assert_eq!(
        keys.iter().filter(|k| k.starts_with("manifests/")).count(),
        1
    );
    assert_eq!(keys.iter().filter(|k| k.starts_with("chunks/")).count(), 1);
}

#[tokio::test]
async fn empty_commits_are_refused_unless_allowed() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    assert!(matches!(
        s.commit("nothing").await,
        Err(Error::NoChangesToCommit)
    ));
    let opts = CommitOptions::default().allow_empty(true);
    let id = s.commit_with("empty", BTreeMap::new(), opts).await.unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), id);
}

#[tokio::test]
async fn untouched_arrays_reuse_their_manifests() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    for name in ["a", "b"] {
        let path = format!("/{name}");
        s.add_array(&p(&path), array_def(&path, &[4], &[1], "uint8"))
            .unwrap();
        for i in 0..4 {
            s.set_chunk(&p(&path), &[i], Bytes::from(vec![i as u8]))
                .await
                .unwrap();
        }
    }
    let first = s.commit("two arrays").await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\xff"))
        .await
        .unwrap();
    let second = s.commit("touch a").await.unwrap();
    let s1 = repo.assets().fetch_snapshot(&first).await.unwrap();
    let s2 = repo.assets().fetch_snapshot(&second).await.unwrap();
    let m = |s: &Snapshot, path: &str| s.nodes[&p(path)].array().unwrap().manifests.clone();
    assert_eq!(m(&s1, "/b"), m(&s2, "/b"), "b's manifest is reused");
    assert_ne!(m(&s1, "/a"), m(&s2, "/a"), "a gets a new manifest");
    assert_eq!(s2.manifest_files.len(), 2);
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(second))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/a"), &[0], None).await.unwrap().unwrap()[..],
        [0xff]
    );
    assert_eq!(
        r.get_chunk(&p("/b"), &[3], None).await.unwrap().unwrap()[..],
        [3]
    );
}

#[tokio::test]
async fn time_travel_by_snapshot_tag_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::create(local(&dir), None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/x"), array_def("/x", &[3], &[1], "uint8"))
        .unwrap();
    let mut ids = Vec::new();
    let mut times = Vec::new();
    for v in 0..4u8 {
        for i in 0..3 {
            s.set_chunk(&p("/x"), &[i], Bytes::from(vec![v * 10 + i as u8]))
                .await
                .unwrap();
        }
        let id = s.commit(&format!("v{v}")).await.unwrap();
        repo.create_tag(&format!("v{v}"), id).await.unwrap();
        ids.push(id);
        times.push(
            repo.assets()
                .fetch_snapshot(&id)
                .await
                .unwrap()
                .flushed_at_time(),
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Shrink the array and delete a chunk in the newest commit.
    s.update_array(&p("/x"), array_def("/x", &[2], &[1], "uint8"))
        .unwrap();
    s.set_chunk_ref(&p("/x"), &[0], None).unwrap();
    let last = s.commit("shrink").await.unwrap();
    let now = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(now.snapshot_id(), last);
    assert_eq!(now.list_chunks(&p("/x")).await.unwrap(), vec![vec![1]]);

    for (v, id) in ids.iter().enumerate() {
        let expect: Vec<u8> = (0..3).map(|i| v as u8 * 10 + i).collect();
        for sel in [
            VersionSelector::Snapshot(*id),
            VersionSelector::Tag(format!("v{v}")),
            VersionSelector::AsOf {
                branch: "main".into(),
                time: times[v],
            },
        ] {
            let r = repo.readonly_session(&sel).await.unwrap();
            assert_eq!(r.snapshot_id(), *id, "{sel:?}");
            let mut got = Vec::new();
            for i in 0..3 {
                got.push(r.get_chunk(&p("/x"), &[i], None).await.unwrap().unwrap()[0]);
            }
            assert_eq!(got, expect, "{sel:?}");
        }
    }
    // Just before the first commit, main was at the initial snapshot; before that,
    // there is nothing.
    let r = repo
        .readonly_session(&VersionSelector::AsOf {
            branch: "main".into(),
            time: times[0] - chrono::Duration::microseconds(1),
        })
        .await
        .unwrap();
    assert_eq!(r.snapshot_id(), SnapshotId::INITIAL);
    let t0 = repo
        .assets()
        .fetch_snapshot(&SnapshotId::INITIAL)
        .await
        .unwrap()
        .flushed_at_time();
    assert!(matches!(
        repo.readonly_session(&VersionSelector::AsOf {
            branch: "main".into(),
            time: t0 - chrono::Duration::seconds(1)
        })
        .await,
        Err(Error::NoSnapshotAtTime { .. })
    ));
}

#[tokio::test]
async fn branches_create_list_reset_delete() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    let c1 = s.commit("c1").await.unwrap();
    repo.create_branch("dev", SnapshotId::INITIAL)
        .await
        .unwrap();
    assert_eq!(repo.list_branches().await.unwrap(), vec!["dev", "main"]);
    assert!(matches!(
        repo.create_branch("dev", c1).await,
        Err(Error::BranchExists { .. })
    ));
    assert!(matches!(
        repo.create_branch("a/b", c1).await,
        Err(Error::InvalidRefName { .. })
    ));
    assert!(matches!(
        repo.create_branch("x", SnapshotId::random()).await,
        Err(Error::SnapshotNotFound { .. })
    ));
    repo.reset_branch("dev", c1, Some(SnapshotId::INITIAL))
        .await
        .unwrap();
    assert_eq!(repo.lookup_branch("dev").await.unwrap(), c1);
    assert!(matches!(
        repo.reset_branch("dev", SnapshotId::INITIAL, Some(SnapshotId::INITIAL))
            .await,
        Err(Error::BranchMoved { .. })
    ));
    // A writable session on dev commits independently of main.
    let d = repo.writable_session("dev").await.unwrap();
    d.update_group(&p("/"), group_json(serde_json::json!({"on": "dev"})))
        .unwrap();
    let c2 = d.commit("on dev").await.unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), c1);
    assert_eq!(repo.ancestry(c2).await.unwrap().len(), 3);
    repo.delete_branch("dev").await.unwrap();
    assert_eq!(repo.list_branches().await.unwrap(), vec!["main"]);
    assert!(matches!(
        repo.lookup_branch("dev").await,
        Err(Error::BranchNotFound { .. })
    ));
    assert!(matches!(
        repo.delete_branch("main").await,
        Err(Error::CannotDeleteMain)
    ));
}

#[tokio::test]
async fn tags_never_move_and_deleted_names_are_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let repo = Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    repo.create_tag("v1", SnapshotId::INITIAL).await.unwrap();
    assert!(matches!(
        repo.create_tag("v1", SnapshotId::INITIAL).await,
        Err(Error::TagExists { .. })
    ));
    assert_eq!(repo.list_tags().await.unwrap(), vec!["v1"]);
    repo.delete_tag("v1").await.unwrap();
    assert!(storage.head("refs/tag.v1/ref.json.deleted").await.is_ok());
    assert!(
        storage.head("refs/tag.v1/ref.json").await.is_ok(),
        "the ref file stays"
    );
    assert!(repo.list_tags().await.unwrap().is_empty());
    assert!(matches!(
        repo.lookup_tag("v1").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.create_tag("v1", SnapshotId::INITIAL).await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.delete_tag("v1").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.delete_tag("nope").await,
        Err(Error::TagNotFound { .. })
    ));
    assert!(matches!(
        repo.resolve_ref("v1").await,
        Err(Error::TagDeleted { .. })
    ));
    assert!(matches!(
        repo.resolve_ref("nope").await,
        Err(Error::RefNotFound { .. })
    ));
    assert_eq!(
        repo.resolve_ref("1CECHNKREP0F1RSTCMT0").await.unwrap(),
        VersionSelector::Snapshot(SnapshotId::INITIAL)
    );
}

#[tokio::test]
async fn disjoint_changes_rebase_and_overlapping_changes_conflict() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[1], "uint8"))
        .unwrap();
    s.add_array(&p("/b"), array_def("/b", &[4], &[1], "uint8"))
        .unwrap();
    s.commit("arrays").await.unwrap();

    // Different chunks of the same array: both land.
    let s1 = repo.writable_session("main").await.unwrap();
    let s2 = repo.writable_session("main").await.unwrap();
    s1.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    s2.set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x02"))
        .await
        .unwrap();
    let c1 = s1.commit("s1").await.unwrap();
    let c2 = s2.commit("s2").await.unwrap();
    let info = repo.ancestry(c2).await.unwrap();
    assert_eq!(info[1].id, c1, "s2 was rebased onto s1");
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        r.list_chunks(&p("/a")).await.unwrap(),
        vec![vec![0], vec![1]]
    );

    // The same chunk: the second commit fails with a typed conflict.
    let s3 = repo.writable_session("main").await.unwrap();
    let s4 = repo.writable_session("main").await.unwrap();
    s3.set_chunk(&p("/a"), &[2], Bytes::from_static(b"\x03"))
        .await
        .unwrap();
    s4.set_chunk(&p("/a"), &[2], Bytes::from_static(b"\x04"))
        .await
        .unwrap();
    s4.set_chunk(&p("/b"), &[0], Bytes::from_static(b"\x04"))
        .await
        .unwrap();
    let winner = s3.commit("s3").await.unwrap();
    let err = s4.commit("s4").await.unwrap_err();
    let Error::Conflict(c) = &err else {
        panic!("expected a conflict, got {err}")
    };
    assert_eq!(c.winning_snapshot, winner);
    assert_eq!(
        c.conflicts,
        vec![Conflict::ChunksChangedByBoth {
            path: p("/a"),
            node: s4.get_node(&p("/a")).unwrap().id,
            chunks: vec![vec![2]]
        }]
    );
    let msg = err.to_string();
    assert!(
        msg.contains("/a") && msg.contains("[2]") && msg.contains(&winner.to_string()),
        "{msg}"
    );
    // Nothing of s4 is visible.
    assert_eq!(repo.lookup_branch("main").await.unwrap(), winner);

    // Metadata changed by one side, chunks by the other: conflict.
    let s5 = repo.writable_session("main").await.unwrap();
    let s6 = repo.writable_session("main").await.unwrap();
    s5.update_array(&p("/b"), array_def("/b", &[8], &[1], "uint8"))
        .unwrap();
    s6.set_chunk(&p("/b"), &[1], Bytes::from_static(b"\x06"))
        .await
        .unwrap();
    s5.commit("resize b").await.unwrap();
    let err = s6.commit("write b").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::ChunksWrittenWhileArrayChanged { path: p("/b") }]),
        "{err}"
    );

    // Deleted by one side, written by the other: conflict.
    let s7 = repo.writable_session("main").await.unwrap();
    let s8 = repo.writable_session("main").await.unwrap();
    s7.delete_node(&p("/a")).unwrap();
    s8.set_chunk(&p("/a"), &[3], Bytes::from_static(b"\x08"))
        .await
        .unwrap();
    s7.commit("delete a").await.unwrap();
    let err = s8.commit("write a").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::ChangedNodeWasDeleted { path: p("/a") }]),
        "{err}"
    );

    // Without rebase, a moved branch is a conflict even for disjoint changes.
    let s9 = repo.writable_session("main").await.unwrap();
    let s10 = repo.writable_session("main").await.unwrap();
    s9.add_group(&p("/g9"), group_json(serde_json::json!({})))
        .unwrap();
    s10.add_group(&p("/g10"), group_json(serde_json::json!({})))
        .unwrap();
    s9.commit("g9").await.unwrap();
    let no_rebase = CommitOptions::default().rebase(false);
    assert!(matches!(
        s10.commit_with("g10", BTreeMap::new(), no_rebase).await,
        Err(Error::Conflict(_))
    ));
    s10.commit("g10").await.unwrap();
}

#[tokio::test]
async fn deleting_a_group_deletes_its_subtree() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/g"), group_json(serde_json::json!({})))
        .unwrap();
    s.add_group(&p("/g/h"), group_json(serde_json::json!({})))
        .unwrap();
    s.add_array(&p("/g/h/a"), array_def("/g/h/a", &[2], &[1], "uint8"))
        .unwrap();
    s.add_array(&p("/keep"), array_def("/keep", &[2], &[1], "uint8"))
        .unwrap();
    assert!(matches!(
        s.add_array(&p("/keep/x"), array_def("/keep/x", &[2], &[1], "uint8")),
        Err(Error::ParentNotGroup { .. })
    ));
    s.commit("tree").await.unwrap();
    s.delete_node(&p("/g")).unwrap();
    let diff = s.status();
    assert_eq!(
        diff.deleted_groups.iter().cloned().collect::<Vec<_>>(),
        vec!["/g", "/g/h"]
    );
    assert_eq!(
        diff.deleted_arrays.iter().cloned().collect::<Vec<_>>(),
        vec!["/g/h/a"]
    );
    let id = s.commit("delete g").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    let paths: Vec<String> = r
        .list_nodes()
        .into_iter()
        .map(|n| n.path.to_string())
        .collect();
    assert_eq!(paths, vec!["/keep"]);
    let d = repo.diff(SnapshotId::INITIAL, id).await.unwrap();
    assert_eq!(d.new_arrays.into_iter().collect::<Vec<_>>(), vec!["/keep"]);
    assert!(
        d.deleted_groups.is_empty(),
        "created and deleted within the range"
    );
}

#[tokio::test]
async fn missing_or_short_native_chunk_is_an_error_naming_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let repo = Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[2], &[1], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from(vec![1u8; 1000]))
        .await
        .unwrap();
    s.set_chunk(&p("/a"), &[1], Bytes::from(vec![2u8; 1000]))
        .await
        .unwrap();
    let id = s.commit("two chunks").await.unwrap();
    let chunk_keys: Vec<String> = keys(storage.as_ref())
        .await
        .into_iter()
        .filter(|k| k.starts_with("chunks/"))
        .collect();
    assert_eq!(chunk_keys.len(), 2);
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    let Some(ChunkPayload::Native(n0)) = r.get_chunk_ref(&p("/a"), &[0]).await.unwrap() else {
        panic!()
    };
    let Some(ChunkPayload::Native(n1)) = r.get_chunk_ref(&p("/a"), &[1]).await.unwrap() else {
        panic!()
    };
    storage.delete(&format!("chunks/{}", n0.id)).await.unwrap();
    storage
        .put(&format!("chunks/{}", n1.id), Bytes::from(vec![2u8; 10]))
        .await
        .unwrap();
    let e0 = r.get_chunk(&p("/a"), &[0], None).await.unwrap_err();
    assert!(
        matches!(&e0, Error::ChunkUnreadable { index, .. } if index == &vec![0]),
        "{e0}"
    );
    assert!(e0.to_string().contains("/a") && e0.to_string().contains("missing"));
    let e1 = r.get_chunk(&p("/a"), &[1], None).await.unwrap_err();
    assert!(
        matches!(&e1, Error::ChunkUnreadable { index, .. } if index == &vec![1]),
        "{e1}"
    );
}

#[tokio::test]
async fn concurrent_creates_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let storage = local(&dir);
        tasks.push(tokio::spawn(async move {
            Repository::create(storage, None).await.is_ok()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
    Repository::open(local(&dir)).await.unwrap();
}

#[tokio::test]
async fn diff_between_diverged_branches_compares_snapshots() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(serde_json::json!({"v": 1})))
        .unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[1], "uint8"))
        .unwrap();
    for i in 0..3 {
        s.set_chunk(&p("/a"), &[i], Bytes::from(vec![i as u8]))
            .await
            .unwrap();
    }
    let base = s.commit("base").await.unwrap();
    repo.create_branch("dev", base).await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x09"))
        .await
        .unwrap();
    s.add_array(&p("/b"), array_def("/b", &[2], &[1], "uint8"))
        .unwrap();
    let main_tip = s.commit("main work").await.unwrap();
    let d = repo.writable_session("dev").await.unwrap();
    d.set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x07"))
        .await
        .unwrap();
    d.update_group(&p("/"), group_json(serde_json::json!({"v": 2})))
        .unwrap();
    let dev_tip = d.commit("dev work").await.unwrap();

    let diff = repo.diff(main_tip, dev_tip).await.unwrap();
    assert_eq!(diff.deleted_arrays.iter().collect::<Vec<_>>(), ["/b"]);
    assert!(diff.new_arrays.is_empty());
    assert_eq!(diff.updated_groups.iter().collect::<Vec<_>>(), ["/"]);
    assert_eq!(
        diff.updated_chunks
            .get("/a")
            .unwrap()
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec![vec![0], vec![1]]
    );
    // Along the ancestry, the transaction logs give the same kind of answer.
    let along = repo.diff(base, main_tip).await.unwrap();
    assert_eq!(along.new_arrays.iter().collect::<Vec<_>>(), ["/b"]);
    assert_eq!(along.updated_chunks.get("/a").unwrap().len(), 1);
}

#[tokio::test]
async fn identical_new_groups_merge_on_rebase_but_different_ones_conflict() {
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s1 = repo.writable_session("main").await.unwrap();
    let s2 = repo.writable_session("main").await.unwrap();
    let s3 = repo.writable_session("main").await.unwrap();
    // Two writers both create the root group (as two first imports do) plus their own
    // arrays; a third creates the root group with other attributes.
    for (s, name) in [(&s1, "/a"), (&s2, "/b"), (&s3, "/c")] {
        s.add_array(&p(name), array_def(name, &[2], &[1], "uint8"))
            .unwrap();
    }
    s1.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s2.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    s3.add_group(&p("/"), group_json(serde_json::json!({"other": true})))
        .unwrap();
    let c1 = s1.commit("first").await.unwrap();
    let c2 = s2.commit("second").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(c2))
        .await
        .unwrap();
    let nodes = r.list_nodes();
    let paths: Vec<String> = nodes.iter().map(|n| n.path.to_string()).collect();
    assert_eq!(paths, vec!["/", "/a", "/b"]);
    let root_before = repo
        .readonly_session(&VersionSelector::Snapshot(c1))
        .await
        .unwrap();
    assert_eq!(
        nodes[0].id,
        root_before.get_node(&p("/")).unwrap().id,
        "the first root group is kept"
    );
    // The transaction log of the second commit does not claim a new root group.
    let d = repo.diff(c1, c2).await.unwrap();
    assert!(d.new_groups.is_empty(), "{d:?}");
    assert_eq!(d.new_arrays.iter().collect::<Vec<_>>(), ["/b"]);
    let err = s3.commit("third").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::NewNodeAtExistingPath { path: p("/") }]),
        "{err}"
    );
}

#[tokio::test]
async fn large_arrays_are_split_into_manifests_and_commits_rewrite_only_changed_ones() {
    use floe::session::MAX_REFS_PER_MANIFEST;
    let repo = Repository::create(new_in_memory_storage(), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let n = 2 * MAX_REFS_PER_MANIFEST + 10;
    s.add_array(&p("/big"), array_def("/big", &[n], &[1], "uint8"))
        .unwrap();
    s.add_array(&p("/small"), array_def("/small", &[4], &[1], "uint8"))
        .unwrap();
    let refs = (0..n).map(|i| {
        (
            vec![i],
            Some(ChunkPayload::Inline(Bytes::from(vec![(i % 251) as u8]))),
        )
    });
    s.set_chunk_refs(&p("/big"), refs).unwrap();
    s.set_chunk(&p("/small"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    let first = s.commit("big").await.unwrap();
    let snap1 = repo.assets().fetch_snapshot(&first).await.unwrap();
    let m1 = snap1.nodes[&p("/big")].array().unwrap().manifests.clone();
    assert_eq!(m1.len(), 3, "{m1:?}");
    assert!(snap1
        .manifest_files
        .iter()
        .all(|f| u64::from(f.num_chunk_refs) <= MAX_REFS_PER_MANIFEST));

    // One chunk in the middle block: only that block's manifest is rewritten.
    let mid = MAX_REFS_PER_MANIFEST as u32 + 5;
    s.set_chunk(&p("/big"), &[mid.into()], Bytes::from_static(b"\xee"))
        .await
        .unwrap();
    let second = s.commit("one chunk").await.unwrap();
    let snap2 = repo.assets().fetch_snapshot(&second).await.unwrap();
    let m2 = snap2.nodes[&p("/big")].array().unwrap().manifests.clone();
    assert_eq!(m2.len(), 3);
    let kept = m2.iter().filter(|m| m1.contains(m)).count();
    assert_eq!(kept, 2, "two of three manifests are reused");
    assert_eq!(
        snap2.nodes[&p("/small")].array().unwrap().manifests,
        snap1.nodes[&p("/small")].array().unwrap().manifests
    );

    let r = repo
        .readonly_session(&VersionSelector::Snapshot(second))
        .await
        .unwrap();
    for i in [0u32, mid - 1, mid, mid + 1, n as u32 - 1] {
        let want = if i == mid { 0xee } else { (i % 251) as u8 };
        assert_eq!(
            r.get_chunk(&p("/big"), &[i.into()], None)
                .await
                .unwrap()
                .unwrap()[..],
            [want],
            "chunk {i}"
        );
    }
    assert_eq!(r.list_chunks(&p("/big")).await.unwrap().len() as u64, n);

    // Shrinking the array rewrites and drops refs outside the new shape.
    s.update_array(&p("/big"), array_def("/big", &[10], &[1], "uint8"))
        .unwrap();
    let third = s.commit("shrink").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(third))
        .await
        .unwrap();
    assert_eq!(r.list_chunks(&p("/big")).await.unwrap().len(), 10);
    let snap3 = repo.assets().fetch_snapshot(&third).await.unwrap();
    assert_eq!(snap3.nodes[&p("/big")].array().unwrap().manifests.len(), 1);
}

#[tokio::test]
async fn a_lost_config_write_is_its_own_error() {
    let storage = new_in_memory_storage();
    let first = Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    let second = Repository::open(Arc::clone(&storage)).await.unwrap();
    // Neither handle has seen a config.yaml: the first creates it, the second loses.
    first.save_config(first.config()).await.unwrap();
    let err = second.save_config(second.config()).await.unwrap_err();
    assert!(matches!(err, Error::ConfigChanged), "{err}");
    // Both have now seen a version: the first swaps it, the stale second loses again.
    let reopened = Repository::open(Arc::clone(&storage)).await.unwrap();
    first.save_config(first.config()).await.unwrap();
    let err = reopened.save_config(reopened.config()).await.unwrap_err();
    assert!(matches!(err, Error::ConfigChanged), "{err}");
}

/// Branch and tag names Icechunk accepts (anything without `/`) round-trip: create,
/// list, look up, delete; the listing shows them as given, not as stored.
async fn odd_ref_names_round_trip(storage: Arc<dyn Storage>) {
    let repo = Repository::create(storage, None).await.unwrap();
    let tip = repo.lookup_branch("main").await.unwrap();
    let names = [
        "données",
        "release#1",
        "a b",
        "x%41",
        "q?x",
        "emoji🧊",
        "dot.name",
    ];
    for name in names {
        repo.create_branch(name, tip).await.unwrap();
        repo.create_tag(name, tip).await.unwrap();
    }
    let mut expected: Vec<String> = names.iter().map(ToString::to_string).collect();
    expected.sort();
    assert_eq!(repo.list_tags().await.unwrap(), expected);
    expected.push("main".into());
    expected.sort();
    assert_eq!(repo.list_branches().await.unwrap(), expected);
    for name in names {
        assert_eq!(repo.lookup_branch(name).await.unwrap(), tip, "{name}");
        assert_eq!(repo.lookup_tag(name).await.unwrap(), tip, "{name}");
        repo.delete_branch(name).await.unwrap();
        repo.delete_tag(name).await.unwrap();
        let err = repo.create_tag(name, tip).await.unwrap_err();
        assert!(matches!(err, Error::TagDeleted { .. }), "{name}: {err}");
    }
    assert_eq!(repo.list_branches().await.unwrap(), vec!["main"]);
    assert!(repo.list_tags().await.unwrap().is_empty());
    let err = repo.create_branch("with/slash", tip).await.unwrap_err();
    assert!(matches!(err, Error::InvalidRefName { .. }), "{err}");
}

#[tokio::test]
async fn odd_ref_names_round_trip_on_local_storage() {
    let dir = tempfile::tempdir().unwrap();
    odd_ref_names_round_trip(Arc::new(LocalStorage::new(dir.path()).unwrap())).await;
}

#[tokio::test]
async fn odd_ref_names_round_trip_on_s3() {
    let Some(url) = common::s3_url("ref-names") else {
        return;
    };
    odd_ref_names_round_trip(floe::storage::create_storage(&url, None).unwrap()).await;
}

/// A new repository on `storage` whose `main` has `commits` commits after the initial
/// snapshot, `commit {i}` setting the root group's attributes to `{"i": i}`; returns
/// it and the snapshot ids, oldest (the initial snapshot) first.
async fn attribute_history(
    storage: &Arc<dyn Storage>,
    commits: usize,
) -> (Repository, Vec<SnapshotId>) {
    let repo = Repository::create(Arc::clone(storage), None).await.unwrap();
    let mut ids = vec![repo.lookup_branch("main").await.unwrap()];
    for i in 0..commits {
        let s = repo.writable_session("main").await.unwrap();
        let json = group_json(serde_json::json!({ "i": i }));
        if i == 0 {
            s.add_group(&p("/"), json).unwrap();
        } else {
            s.update_group(&p("/"), json).unwrap();
        }
        ids.push(s.commit(&format!("commit {i}")).await.unwrap());
    }
    (repo, ids)
}

/// The messages of the newest `n` commits on `main`, through the ancestry stream.
async fn newest_messages(repo: &Repository, n: usize) -> Vec<String> {
    use futures::{StreamExt, TryStreamExt};
    repo.ancestry_stream(VersionSelector::Branch("main".into()))
        .take(n)
        .map_ok(|i| i.message)
        .try_collect()
        .await
        .unwrap()
}

/// The ancestry is a stream: its newest items need only the newest snapshot files
/// (spec 1), it starts from a branch, a tag or a snapshot id, and a missing older
/// snapshot is an error only for a reader that goes that far.
#[tokio::test]
async fn ancestry_streams_from_branches_tags_and_snapshots() {
    use futures::TryStreamExt;
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let (repo, ids) = attribute_history(&storage, 5).await;
    repo.create_tag("t", ids[3]).await.unwrap();
    let newest_first: Vec<SnapshotId> = ids.iter().rev().copied().collect();
    let all: Vec<_> = repo
        .ancestry_stream(VersionSelector::Branch("main".into()))
        .map_ok(|i| i.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all, newest_first);
    let from_tag: Vec<_> = repo
        .ancestry_stream(VersionSelector::Tag("t".into()))
        .map_ok(|i| i.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(from_tag, newest_first[2..]);

    // Remove the second-oldest snapshot file: the two newest still stream from a
    // fresh handle (no cache), the whole history fails with a typed error.
    storage
        .delete(&floe::format::keys::snapshot(&ids[1]))
        .await
        .unwrap();
    let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
    assert_eq!(newest_messages(&fresh, 2).await, ["commit 4", "commit 3"]);
    match fresh.ancestry(ids[5]).await {
        Err(Error::SnapshotNotFound { id }) => assert_eq!(id, ids[1]),
        other => panic!("a missing ancestor must be SnapshotNotFound, got {other:?}"),
    }
    match fresh
        .ancestry_stream(VersionSelector::Branch("nope".into()))
        .try_collect::<Vec<_>>()
        .await
    {
        Err(Error::BranchNotFound { name }) => assert_eq!(name, "nope"),
        other => panic!("an unknown branch must be BranchNotFound, got {other:?}"),
    }
}

/// On a local disk a spec-1 ancestry reads its snapshots ahead in batches (1, 2, 4,
/// ... files on one blocking thread): a history longer than several batches lists
/// in order, a fresh handle's `take(n)` works, and a missing or corrupt snapshot in
/// the middle of a batch is reported with its typed error, after the snapshots
/// before it.
#[tokio::test]
async fn ancestry_read_ahead_keeps_order_and_typed_errors() {
    use floe::format::FormatError;
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    let (_, ids) = attribute_history(&storage, 140).await;
    let newest_first: Vec<SnapshotId> = ids.iter().rev().copied().collect();
    let fresh = || async { Repository::open(Arc::clone(&storage)).await.unwrap() };
    let all: Vec<_> = fresh()
        .await
        .ancestry(ids[140])
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(all, newest_first);
    assert_eq!(
        newest_messages(&fresh().await, 5).await,
        (135..140)
            .rev()
            .map(|i| format!("commit {i}"))
            .collect::<Vec<_>>()
    );

    // Snapshot 100 (in the batch of 64 that starts at the 64th newest) is missing,
    // then corrupt: the 40 newer snapshots stream first.
    let key = floe::format::keys::snapshot(&ids[100]);
    let saved = storage.get(&key).await.unwrap().bytes;
    storage.delete(&key).await.unwrap();
    let repo = fresh().await;
    let mut stream = std::pin::pin!(repo.ancestry_stream(VersionSelector::Snapshot(ids[140])));
    for expected in newest_first.iter().take(40) {
        assert_eq!(stream.next().await.unwrap().unwrap().id, *expected);
    }
    match stream.next().await {
        Some(Err(Error::SnapshotNotFound { id })) => assert_eq!(id, ids[100]),
        other => panic!("a missing ancestor must be SnapshotNotFound, got {other:?}"),
    }
    let mut corrupt = saved.to_vec();
    corrupt.truncate(20);
    storage.put(&key, Bytes::from(corrupt)).await.unwrap();
    match fresh().await.ancestry(ids[140]).await {
        Err(Error::Format(FormatError::Truncated { .. })) => {}
        other => panic!("a corrupt ancestor must be a format error, got {other:?}"),
    }
    // Restored, the whole history lists again.
    storage.put(&key, saved).await.unwrap();
    assert_eq!(fresh().await.ancestry(ids[140]).await.unwrap().len(), 141);
}

/// The config's `compression.level` is the zstd level commits write their files at:
/// the same commit at level 19 makes a smaller manifest and transaction log than at
/// level 1 (they hold the same bytes), and both read back alike. Without a level,
/// manifests and transaction logs are written at level 1 (`BULK_DEFAULT_LEVEL`).
#[tokio::test]
async fn commits_write_files_at_the_configured_compression_level() {
    use floe::format::config::RepositoryConfig;
    use floe::format::manifest::NativeChunkRef;
    use floe::format::ChunkId;

    async fn sizes(level: Option<u8>) -> (usize, usize, u64) {
        let storage = new_in_memory_storage();
        let mut config = RepositoryConfig::default();
        config.set_compression_level(level);
        let repo = Repository::create(Arc::clone(&storage), Some(config))
            .await
            .unwrap();
        assert_eq!(repo.config().compression_level(), level.map(i32::from));
        let s = repo.writable_session("main").await.unwrap();
        s.add_array(&p("/a"), array_def("/a", &[20_000], &[1], "uint8"))
            .unwrap();
        // The same chunk id everywhere: the files compress well, and differently by
        // level.
        let id = ChunkId::random();
        s.set_chunk_refs(
            &p("/a"),
            (0..20_000u64).map(|i| {
                let r = NativeChunkRef {
                    id,
                    offset: i * 7,
                    length: 7,
                };
                (vec![i], Some(ChunkPayload::Native(r)))
            }),
        )
        .unwrap();
        let snap = s.commit("refs").await.unwrap();
        let r = repo
            .readonly_session(&VersionSelector::Snapshot(snap))
            .await
            .unwrap();
        let back = r.get_chunk_ref(&p("/a"), &[19_999]).await.unwrap();
        let Some(ChunkPayload::Native(n)) = back else {
            panic!("{back:?}")
        };
        let size_of = |prefix: String| {
            let storage = Arc::clone(&storage);
            async move {
                let key = keys(storage.as_ref())
                    .await
                    .into_iter()
                    .find(|k| k.starts_with(&prefix))
                    .unwrap();
                storage.get(&key).await.unwrap().bytes.len()
            }
        };
        (
            size_of("manifests/".into()).await,
            size_of(format!("transactions/{snap}")).await,
            n.offset,
        )
    }
    let (m1, t1, o1) = sizes(Some(1)).await;
    let (m19, t19, o19) = sizes(Some(19)).await;
    assert_eq!((o1, o19), (19_999 * 7, 19_999 * 7));
    assert!(m19 < m1, "manifest: level 19 {m19} bytes, level 1 {m1}");
    assert!(
        t19 < t1,
        "transaction log: level 19 {t19} bytes, level 1 {t1}"
    );
    let (m3, t3, _) = sizes(Some(3)).await;
    let (m, t, _) = sizes(None).await;
    // The files hold random ids (of the manifest, the chunks, the snapshot), whose
    // bytes change the entropy coding by some 30 bytes from run to run; the levels
    // differ by ~370 (transaction log) and ~1,600 (manifest).
    let near = |a: usize, b: usize| a.abs_diff(b) <= 64;
    assert!(m19 < m3 && !near(m3, m1), "level 3: {m3} bytes");
    assert!(!near(t3, t1), "level 3: {t3} bytes");
    assert!(near(m, m1) && near(t, t1), "default: {m}, {t} bytes");
}
