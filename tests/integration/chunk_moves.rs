//! Moving chunks within an array's grid (Icechunk's `shift_array` and
//! `reindex_array`): refs move, no chunk object is written; maps that fail stage
//! nothing. Also `Session::flush` (a snapshot no branch points to) and the chunk
//! storage statistics of what the refs reach.

use crate::common::fixture::Fixture;
use crate::common::{group_json, p};
use bytes::Bytes;
use floe::format::manifest::ChunkPayload;
use floe::{Error, VersionSelector};

/// A repository whose `main` holds `/a`, a `uint8` array of `len` one-element
/// chunks, with chunk `i` holding byte `i` for each `Some` in `values`.
async fn with_chunks(values: &[Option<u8>]) -> Fixture {
    let f = Fixture::in_memory()
        .await
        .with_u8_array("/a", values.len() as u64);
    f.session
        .add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    for (i, v) in values.iter().enumerate() {
        if let Some(v) = v {
            f.session
                .set_chunk(&p("/a"), &[i as u64], Bytes::from(vec![*v]))
                .await
                .unwrap();
        }
    }
    f.session.commit("chunks").await.unwrap();
    f
}

/// The chunk bytes of `/a` by index (`None`: never written).
async fn contents(s: &floe::Session, len: u64) -> Vec<Option<u8>> {
    let mut out = Vec::new();
    for i in 0..len {
        out.push(
            s.get_chunk(&p("/a"), &[i], None)
                .await
                .unwrap()
                .map(|b| b[0]),
        );
    }
    out
}

#[tokio::test]
async fn shift_moves_refs_and_clears_what_it_leaves() {
    let f = with_chunks(&[Some(0), Some(1), Some(2), Some(3), Some(4)]).await;
    let s = f.repo.writable_session("main").await.unwrap();
    s.shift_array(&p("/a"), &[-2]).await.unwrap();
    assert_eq!(
        contents(&s, 5).await,
        [Some(2), Some(3), Some(4), None, None]
    );
    s.shift_array(&p("/a"), &[3]).await.unwrap();
    assert_eq!(contents(&s, 5).await, [None, None, None, Some(2), Some(3)]);
    s.shift_array(&p("/a"), &[0]).await.unwrap();
    let err = s.shift_array(&p("/a"), &[1, 1]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidChunkIndex { .. }), "{err}");
    let id = s.commit("shifted").await.unwrap();
    let r = f
        .repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    assert_eq!(contents(&r, 5).await, [None, None, None, Some(2), Some(3)]);
}

#[tokio::test]
async fn native_chunk_refs_move_without_copies() {
    let mut config = floe::format::config::RepositoryConfig::default();
    config.set_inline_chunk_threshold_bytes(Some(0));
    let f = Fixture::on(floe::storage::new_in_memory_storage(), Some(config))
        .await
        .with_u8_array("/a", 3);
    f.session
        .add_group(&p("/"), group_json(serde_json::json!({})))
        .unwrap();
    f.session
        .set_chunk(&p("/a"), &[0], Bytes::from_static(b"x"))
        .await
        .unwrap();
    f.session.commit("one native chunk").await.unwrap();
    let before = f.repo.chunk_storage_stats().await.unwrap();
    assert_eq!((before.native_bytes, before.inlined_bytes), (1, 0));
    let s = f.repo.writable_session("main").await.unwrap();
    let original = s.get_chunk_ref(&p("/a"), &[0]).await.unwrap();
    assert!(matches!(original, Some(ChunkPayload::Native(_))));
    s.shift_array(&p("/a"), &[2]).await.unwrap();
    assert_eq!(s.get_chunk_ref(&p("/a"), &[2]).await.unwrap(), original);
    s.commit("moved").await.unwrap();
    assert_eq!(f.repo.chunk_storage_stats().await.unwrap(), before);
}

#[tokio::test]
async fn reindex_forward_keeps_stale_chunks_backward_clears_them() {
    let f = with_chunks(&[Some(1), None, Some(3)]).await;
    let forward = |i: &[u64]| Ok((i[0] + 1 < 3).then(|| vec![i[0] + 1]));
    let backward = |i: &[u64]| Ok(i[0].checked_sub(1).map(|j| vec![j]));
    let s = f.repo.writable_session("main").await.unwrap();
    s.reindex_array(&p("/a"), &forward, None).await.unwrap();
    assert_eq!(contents(&s, 3).await, [Some(1), Some(1), Some(3)]);
    let s = f.repo.writable_session("main").await.unwrap();
    s.reindex_array(&p("/a"), &forward, Some(&backward))
        .await
        .unwrap();
    assert_eq!(contents(&s, 3).await, [None, Some(1), None]);
}

#[tokio::test]
async fn failing_maps_stage_nothing() {
    let f = with_chunks(&[Some(1), Some(2), Some(3)]).await;
    let s = f.repo.writable_session("main").await.unwrap();
    let fails = |i: &[u64]| {
        if i[0] == 2 {
            Err(Error::InvalidConfig {
                reason: "map failed".into(),
            })
        } else {
            Ok(Some(i.to_vec()))
        }
    };
    let err = s.reindex_array(&p("/a"), &fails, None).await.unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    let outside = |i: &[u64]| Ok(Some(vec![i[0] + 10]));
    let err = s.reindex_array(&p("/a"), &outside, None).await.unwrap_err();
    assert!(matches!(err, Error::InvalidChunkIndex { .. }), "{err}");
    assert!(!s.has_uncommitted_changes());
    let r = f
        .repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let err = r.shift_array(&p("/a"), &[1]).await.unwrap_err();
    assert!(matches!(err, Error::ReadOnlySession), "{err}");
}

#[tokio::test]
async fn flush_writes_a_detached_snapshot() {
    let f = with_chunks(&[Some(1)]).await;
    let tip = f.repo.lookup_branch("main").await.unwrap();
    let s = f.repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(&[9]))
        .await
        .unwrap();
    let id = s
        .flush("detached", std::collections::BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(f.repo.lookup_branch("main").await.unwrap(), tip);
    f.repo.reset_branch("main", id, Some(tip)).await.unwrap();
    let r = f
        .repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(contents(&r, 1).await, [Some(9)]);
}
