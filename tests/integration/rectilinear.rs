//! Rectilinear chunk grids (zarr-python 3.4, `array.rectilinear_chunks`) in the
//! engine, as Icechunk 2.3.0 stores them: the snapshot records per dimension the
//! array length and every listed chunk (spec 2 `num_chunks`; spec 1 a chunk length
//! back-computed as `ceil(length / chunks)`), chunk indices are checked against that
//! grid, a spec-1 store refuses the grid, and chunks of such arrays cannot be shifted
//! or re-indexed. zarr-python reading and writing them on floe, and Icechunk 2.3.0
//! reading floe's repositories and the reverse, are in
//! `python/tests/test_rectilinear.py`.

use crate::common::fixture::Fixture;
use crate::common::{group_json, p};
use bytes::Bytes;
use floe::format::snapshot::DimensionShape;
use floe::format::SpecVersion;
use floe::session::array_definition;
use floe::zarr::{Array, Store, ZarrError};
use floe::{Error, VersionSelector};
use serde_json::{json, Value};

/// The `zarr.json` of an `int32` array with a rectilinear grid of `chunk_shapes`.
fn rect_json(shape: &[u64], chunk_shapes: Value) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({
            "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "int32",
            "chunk_grid": {"name": "rectilinear",
                           "configuration": {"kind": "inline", "chunk_shapes": chunk_shapes}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "attributes": {}, "storage_transformers": []
        }))
        .unwrap(),
    )
}

/// The chunk bytes of `values` as little-endian `int32`.
fn i32s(values: &[i32]) -> Bytes {
    Bytes::from(
        values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
}

/// The repository error behind a store error.
fn repo_err(e: &floe::zarr::StoreError) -> &Error {
    e.repository_error()
        .unwrap_or_else(|| panic!("not a repository error: {e}"))
}

fn shape_of(s: &floe::Session, path: &str) -> Vec<DimensionShape> {
    s.get_node(&p(path)).unwrap().array().unwrap().shape.clone()
}

#[tokio::test]
async fn spec2_snapshots_record_every_listed_chunk_and_bound_indices_by_them() {
    let f = Fixture::local().await;
    let store = f.session.store();
    store.set("zarr.json", group_json(json!({}))).await.unwrap();
    // chunks=((1, 2), (3, 3, 1)), as zarr 3.4.2 writes it (run-length pair included).
    let meta = rect_json(&[3, 7], json!([[1, 2], [[3, 2], 1]]));
    store.set("a/zarr.json", meta.clone()).await.unwrap();
    store.set("a/c/1/2", i32s(&[13, 20])).await.unwrap();
    store.set("a/c/0/0", i32s(&[0, 1, 2])).await.unwrap();
    for key in ["a/c/2/0", "a/c/0/3"] {
        let e = store.set(key, i32s(&[1])).await.unwrap_err();
        assert!(
            matches!(repo_err(&e), Error::InvalidChunkIndex { .. }),
            "{key}: {e}"
        );
    }
    // A shrunk array keeps zarr's trailing edges: every listed edge is a chunk.
    let shrunk = rect_json(&[2, 4], json!([[1, [2, 2]], [[3, 2], 1, 2]]));
    store.set("b/zarr.json", shrunk).await.unwrap();
    store.set("b/c/2/3", i32s(&[9; 4])).await.unwrap();
    // A bare integer: chunks of that length along the dimension.
    store
        .set("c/zarr.json", rect_json(&[5, 3], json!([[2, 3], 2])))
        .await
        .unwrap();
    let id = f.session.commit("rectilinear").await.unwrap();

    // A fresh handle decodes the snapshot file (not the written one, cached).
    let repo = floe::Repository::open(f.storage.clone()).await.unwrap();
    let snap = repo.fetch_snapshot(&id).await.unwrap();
    let shape = |path: &str| snap.nodes[&p(path)].array().unwrap().shape.clone();
    assert_eq!(
        shape("/a"),
        [DimensionShape::new(3, 2), DimensionShape::new(7, 3)]
    );
    assert_eq!(
        shape("/b"),
        [DimensionShape::new(2, 3), DimensionShape::new(4, 4)]
    );
    assert_eq!(
        shape("/c"),
        [DimensionShape::new(5, 2), DimensionShape::new(3, 2)]
    );
    let ro = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let ro_store = ro.store();
    assert_eq!(ro_store.get("a/zarr.json").await.unwrap(), Some(meta));
    assert_eq!(
        ro_store.get("a/c/1/2").await.unwrap(),
        Some(i32s(&[13, 20]))
    );
    assert_eq!(ro_store.get("b/c/2/3").await.unwrap(), Some(i32s(&[9; 4])));
    let mut keys = ro_store.list_prefix("a/").await.unwrap();
    keys.sort();
    assert_eq!(keys, ["a/c/0/0", "a/c/1/2", "a/zarr.json"]);
    // floe's array API reads regular grids only: it refuses the grid by name rather
    // than computing regions of a grid it does not implement.
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(ro_store);
    assert!(matches!(
        Array::open(store, "a").await,
        Err(ZarrError::UnsupportedExtension { kind, name, .. })
            if kind == "chunk grid" && name == "rectilinear"
    ));
}

#[tokio::test]
async fn malformed_or_hostile_grids_are_refused_without_staging() {
    let f = Fixture::in_memory().await;
    let store = f.session.store();
    for shapes in [
        json!([[1, 1], [7]]),                     // edges short of the length
        json!([[1, 2]]),                          // rank
        json!([[[1, 4_294_967_295u64], 1], [7]]), // more chunks than Icechunk records
        json!([[[u64::MAX, 3]], [7]]),            // edges summing past 2^64
        json!([[0, 3], [7]]),
        json!([[], [7]]),
    ] {
        let e = store
            .set("a/zarr.json", rect_json(&[3, 7], shapes.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(repo_err(&e), Error::InvalidNodeMetadata { .. }),
            "{shapes}: {e}"
        );
    }
    let mut unknown: Value = serde_json::from_slice(&rect_json(&[3], json!([[3]]))).unwrap();
    unknown["chunk_grid"] = json!({"name": "hexagonal", "configuration": {}});
    let e = store
        .set(
            "a/zarr.json",
            Bytes::from(serde_json::to_vec(&unknown).unwrap()),
        )
        .await
        .unwrap_err();
    assert!(matches!(repo_err(&e), Error::InvalidNodeMetadata { .. }));
    assert!(!f.session.has_uncommitted_changes());
}

#[tokio::test]
async fn spec1_stores_refuse_the_grid_and_snapshots_back_compute_chunk_lengths() {
    let f = Fixture::local_spec1().await;
    let store = f.session.store();
    let meta = rect_json(&[3, 7], json!([[1, 2], [[3, 2], 1]]));
    let e = store.set("a/zarr.json", meta.clone()).await.unwrap_err();
    assert!(
        matches!(repo_err(&e), Error::InvalidNodeMetadata { reason, .. }
            if reason.contains("rectilinear") && reason.contains("spec version 1")),
        "{e}"
    );
    assert!(!f.session.has_uncommitted_changes());

    // The session API takes the array as Icechunk's does; a spec-1 snapshot records
    // ceil(length / chunks) as the chunk length, so reading it back gives the chunk
    // counts again when only the last chunk is short: 3 in 2 chunks -> length 2 -> 2
    // chunks; 7 in 3 -> 3 -> 3 ...
    let a = p("/a");
    f.session
        .add_array(&a, array_definition(&a, meta).unwrap())
        .unwrap();
    // ... and other counts when it is not (Icechunk 2.3.0 writes the same):
    // 2 elements in 3 listed chunks -> length 1 -> 2 chunks.
    let b = p("/b");
    let shrunk = rect_json(&[2], json!([[1, [2, 2]]]));
    f.session
        .add_array(&b, array_definition(&b, shrunk).unwrap())
        .unwrap();
    f.session
        .set_chunk(&a, &[1, 2], i32s(&[13, 20]))
        .await
        .unwrap();
    f.session.commit("spec 1").await.unwrap();
    // A fresh handle decodes the snapshot file (not the written one, cached).
    let repo = floe::Repository::open(f.storage.clone()).await.unwrap();
    let ro = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(repo.spec_version(), SpecVersion::V1);
    assert_eq!(
        shape_of(&ro, "/a"),
        [DimensionShape::new(3, 2), DimensionShape::new(7, 3)]
    );
    assert_eq!(shape_of(&ro, "/b"), [DimensionShape::new(2, 2)]);
    assert_eq!(
        ro.get_chunk(&a, &[1, 2], None).await.unwrap(),
        Some(i32s(&[13, 20]))
    );
    // Regular grids: the same back-computation (10 in chunks of 6: 2 chunks, recorded
    // as chunk length 5), the same count read back.
    assert_eq!(DimensionShape::regular(10, 6).spec1_chunk_length(), 5);
    assert_eq!(DimensionShape::regular(10, 6).num_chunks, 2);
}

#[tokio::test]
async fn shift_and_reindex_refuse_rectilinear_arrays_and_stage_nothing() {
    let f = Fixture::in_memory().await;
    let store = f.session.store();
    store.set("zarr.json", group_json(json!({}))).await.unwrap();
    store
        .set("a/zarr.json", rect_json(&[3], json!([[1, 2]])))
        .await
        .unwrap();
    store.set("a/c/0", i32s(&[10])).await.unwrap();
    store.set("a/c/1", i32s(&[20, 30])).await.unwrap();
    f.session.commit("write").await.unwrap();
    let s = f.repo.writable_session("main").await.unwrap();
    let a = p("/a");
    let refused = |e: Error| {
        assert!(
            matches!(&e, Error::UnsupportedChunkGridForReindex { grid, .. } if grid == "rectilinear"),
            "{e}"
        );
        assert!(e.to_string().contains("rectilinear"));
    };
    refused(s.shift_array(&a, &[1]).await.unwrap_err());
    refused(s.shift_array(&a, &[0]).await.unwrap_err());
    let identity = |i: &[u64]| Ok(Some(i.to_vec()));
    refused(s.reindex_array(&a, &identity, None).await.unwrap_err());
    assert!(!s.has_uncommitted_changes());
    assert_eq!(
        s.get_chunk(&a, &[1], None).await.unwrap(),
        Some(i32s(&[20, 30]))
    );
}
