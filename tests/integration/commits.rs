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
