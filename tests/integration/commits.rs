//! Commits: nodes and chunks written and read back (inline and native chunks,
//! chunk coordinates), empty commits, deleting subtrees, and unreadable native chunks.

use std::collections::BTreeMap;

use crate::common::fixture::{keys, Fixture};
use crate::common::{array_def, group_json, p};
use bytes::Bytes;
use floe::format::manifest::ChunkPayload;
use floe::format::SnapshotId;
use floe::session::CommitOptions;
use floe::{Error, VersionSelector};

/// One chunk-index convention: sessions take the `u64` grid coordinates Zarr arrays
/// use, and refuse (typed) a coordinate Icechunk files cannot store (above
/// `u32::MAX`), however large the chunk grid; a manifest holding one fails to encode.
#[tokio::test]
async fn chunk_coordinates_are_u64_and_bounded_by_the_format() {
    use floe::format::manifest::Manifest;
    use floe::format::{FormatError, ManifestId, NodeId, MAX_CHUNK_COORDINATE};
    let Fixture {
        repo,
        session: s,
        dir: _dir,
        ..
    } = Fixture::local().await;
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
    let Fixture {
        repo,
        session: s,
        dir: _dir,
        ..
    } = Fixture::local().await;
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
        .unwrap()
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
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await;
    assert!(matches!(
        s.commit("nothing").await,
        Err(Error::NoChangesToCommit)
    ));
    let opts = CommitOptions::default().allow_empty(true);
    let id = s.commit_with("empty", BTreeMap::new(), opts).await.unwrap();
    assert_eq!(repo.lookup_branch("main").await.unwrap(), id);
}

#[tokio::test]
async fn deleting_a_group_deletes_its_subtree() {
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await;
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
        .unwrap()
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
    let Fixture {
        repo,
        session: s,
        storage,
        dir: _dir,
    } = Fixture::local().await.with_u8_array("/a", 2);
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

/// Icechunk's diff of `from..to` (argv 2, 3) of the repository at argv 1, one line per
/// field: new arrays, updated arrays, arrays with updated chunks and their counts;
/// then `/new`'s chunk (0, 7) as hex.
const ICECHUNK_DIFF: &str = r#"
import sys, icechunk, zarr
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))
d = repo.diff(from_snapshot_id=sys.argv[2], to_snapshot_id=sys.argv[3])
print(sorted(d.new_arrays))
print(sorted(d.updated_arrays))
print(sorted((k, len(v)) for k, v in d.updated_chunks.items()))
a = zarr.open_array(repo.readonly_session(snapshot_id=sys.argv[3]).store, path="new", mode="r")
print(bytes(a[0:1, 7:8]).hex())
"#;

/// A commit whose transaction log would pass the format's 2 GiB limit folds its
/// largest arrays: their chunk lists are left out of the log and an existing one is
/// recorded as updated, so the commit lands with every chunk in its snapshot and a
/// concurrent writer to a folded array gets a conflict, not a silent overwrite.
/// Runs itself in a child process whose budget is lowered to 1 MB (32-byte entries
/// for 2-D chunks: 31,250 of them), for the streamed log (> 65,536 changes) and for
/// one built in memory.
#[tokio::test]
async fn oversized_transaction_logs_fold_their_largest_arrays() {
    use floe::error::Conflict;
    use std::collections::BTreeSet;
    const BUDGET: &str = "FLOE_TESTING_CHUNK_LIST_BUDGET";
    if std::env::var_os(BUDGET).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "commits::oversized_transaction_logs_fold_their_largest_arrays",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(BUDGET, "1000000")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let Fixture {
        repo,
        session: s,
        dir,
        ..
    } = Fixture::local().await;
    s.add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    for name in ["/big", "/small"] {
        s.add_array(&p(name), array_def(name, &[1000, 1000], &[1, 1], "uint8"))
            .unwrap();
    }
    let base = s.commit("arrays").await.unwrap();
    #[allow(clippy::cast_possible_truncation)]
    let value = |i: u64| (i % 251) as u8;
    let grid = |n: u64| {
        (0..n).map(move |i| {
            let payload = ChunkPayload::Inline(Bytes::from(vec![value(i)]));
            (vec![i / 1000, i % 1000], Some(payload))
        })
    };
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(
        &p("/new"),
        array_def("/new", &[1000, 1000], &[1, 1], "uint8"),
    )
    .unwrap();
    s.set_chunk_refs(&p("/big"), grid(70_000)).unwrap();
    s.set_chunk_refs(&p("/new"), grid(40_000)).unwrap();
    s.set_chunk_refs(&p("/small"), grid(10)).unwrap();
    // Two writers from `base`, racing the big commit.
    let on_big = repo.writable_session("main").await.unwrap();
    let on_small = repo.writable_session("main").await.unwrap();
    for (w, path) in [(&on_big, "/big"), (&on_small, "/small")] {
        w.set_chunk(&p(path), &[999, 999], Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    let big = s.commit("110,010 chunks").await.unwrap();

    let d = repo.diff(base, big).await.unwrap();
    assert_eq!(d.new_arrays, BTreeSet::from([p("/new")]));
    assert_eq!(d.updated_arrays, BTreeSet::from([p("/big")]));
    assert_eq!(
        d.updated_chunks
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect::<Vec<_>>(),
        vec![(p("/small"), 10)]
    );
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(big))
        .await
        .unwrap();
    for (path, n) in [("/big", 70_000), ("/new", 40_000), ("/small", 10)] {
        assert_eq!(r.list_chunks(&p(path)).await.unwrap().len(), n, "{path}");
    }
    assert_eq!(
        r.get_chunk(&p("/big"), &[69, 999], None).await.unwrap(),
        Some(Bytes::from(vec![value(69_999)]))
    );

    // The folded array conflicts with the writer to it; the other writer rebases.
    let err = on_big.commit("one chunk of big").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.conflicts == vec![Conflict::ChunksWrittenWhileArrayChanged { path: p("/big") }]),
        "{err}"
    );
    let landed = on_small.commit("one chunk of small").await.unwrap();
    assert_eq!(repo.ancestry(landed).await.unwrap()[1].id, big);

    // A log built in memory (40,000 changes) folds the same way.
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk_refs(&p("/small"), grid(40_000)).unwrap();
    let again = s.commit("40,000 chunks").await.unwrap();
    let d = repo.diff(landed, again).await.unwrap();
    assert_eq!(d.updated_arrays, BTreeSet::from([p("/small")]));
    assert!(d.updated_chunks.is_empty(), "{:?}", d.updated_chunks.keys());

    // Icechunk 2.3.0 reads the folded log and the chunks.
    let Some(py) =
        crate::common::require(crate::common::python312(), "python 3.12 with icechunk 2.x")
    else {
        return;
    };
    let root = dir.as_ref().unwrap().path().to_str().unwrap().to_owned();
    let stdout = crate::common::python_stdout(
        &py,
        ICECHUNK_DIFF,
        &[&root, &base.to_string(), &big.to_string()],
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "['/new']",
            "['/big']",
            "[('/small', 10)]",
            &format!("{:02x}", value(7)),
        ],
        "{stdout}"
    );
}
