//! Behaviour of the Zarr array/group API on the memory and filesystem stores.

use std::sync::Arc;

use bytes::Bytes;
use floe::zarr::store::conformance::{store_conformance, zarr_store_conformance};
use floe::zarr::RegionFormats;
use floe::zarr::{
    delete_node, list_children, open_node, walk, Array, ArrayBuilder, ArrayBytes, ArrayOptions,
    ArraySubset, ChunkKeyEncodingKind, DataType, FilesystemStore, Group, MemoryStore, Node,
    NodeMetadata, Separator, Store, ZarrError,
};
use half::f16;
use ndarray::{s, ArrayD, IxDyn};
use num_complex::Complex;
use serde_json::{json, Map, Value};

fn mem() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[tokio::test]
async fn stores_conform() {
    store_conformance(&MemoryStore::new()).await;
    zarr_store_conformance(&MemoryStore::new()).await;
    let dir = tempfile::tempdir().unwrap();
    store_conformance(&FilesystemStore::new(dir.path()).unwrap()).await;
    let dir2 = tempfile::tempdir().unwrap();
    zarr_store_conformance(&FilesystemStore::new(dir2.path()).unwrap()).await;
}

#[tokio::test]
async fn create_write_read_with_fill_and_edges() {
    let store = mem();
    let a = ArrayBuilder::new(vec![5, 7], vec![2, 3], DataType::Int32)
        .fill_value(json!(-1))
        .create(store.clone(), "g/a")
        .await
        .unwrap();
    // parent group was created
    assert!(matches!(
        open_node(store.clone(), "g").await.unwrap(),
        Node::Group(_)
    ));
    // unwritten array reads as fill
    let all: Vec<i32> = a.read_all().await.unwrap();
    assert_eq!(all, vec![-1; 35]);
    assert_eq!(store.list_prefix("g/a/c").await.unwrap().len(), 0);
    // write a region crossing chunk borders and the array edge
    let region = ArraySubset::new(vec![1, 2], vec![4, 5]);
    let vals: Vec<i32> = (0..20).collect();
    a.write_region(&region, &vals).await.unwrap();
    let got = a
        .read_region_ndarray::<i32>(&ArraySubset::full(a.shape()))
        .await
        .unwrap();
    let mut model = ArrayD::<i32>::from_elem(IxDyn(&[5, 7]), -1);
    model
        .slice_mut(s![1..5, 2..7])
        .assign(&ArrayD::from_shape_vec(IxDyn(&[4, 5]), vals).unwrap());
    assert_eq!(got, model);
    // re-open and read a sub-region
    let b = Array::open(store.clone(), "/g/a/").await.unwrap();
    let sub: Vec<i32> = b
        .read_region(&ArraySubset::from_ranges(&[2..4, 1..4]))
        .await
        .unwrap();
    assert_eq!(
        sub,
        model
            .slice(s![2..4, 1..4])
            .iter()
            .copied()
            .collect::<Vec<_>>()
    );
    // chunk keys follow the default encoding
    let keys = store.list_prefix("g/a/").await.unwrap();
    assert!(keys.contains(&"g/a/c/0/0".to_string()), "{keys:?}");
    assert!(keys.contains(&"g/a/c/2/2".to_string()), "{keys:?}");
    assert!(!keys.contains(&"g/a/c/0/0".replace("0/0", "0/0/0")));
}

#[tokio::test]
async fn fill_chunks_are_erased_unless_configured() {
    let store = mem();
    let a = ArrayBuilder::new(vec![4], vec![2], DataType::Float32)
        .fill_value(json!("NaN"))
        .create(store.clone(), "a")
        .await
        .unwrap();
    a.write_region(
        &ArraySubset::new(vec![0], vec![4]),
        &[1.0f32, 2.0, 3.0, 4.0],
    )
    .await
    .unwrap();
    assert_eq!(store.list_prefix("a/c/").await.unwrap().len(), 2);
    a.write_region(&ArraySubset::new(vec![0], vec![2]), &[f32::NAN, f32::NAN])
        .await
        .unwrap();
    assert_eq!(store.list_prefix("a/c/").await.unwrap(), vec!["a/c/1"]);
    let v: Vec<f32> = a.read_all().await.unwrap();
    assert!(v[0].is_nan() && v[1].is_nan());
    assert_eq!(&v[2..], &[3.0, 4.0]);
    let keep = a
        .clone()
        .with_options(ArrayOptions::default().write_empty_chunks(true));
    keep.write_region(&ArraySubset::new(vec![0], vec![2]), &[f32::NAN, f32::NAN])
        .await
        .unwrap();
    assert_eq!(store.list_prefix("a/c/").await.unwrap().len(), 2);
}

#[tokio::test]
async fn element_type_is_checked() {
    let store = mem();
    let a = ArrayBuilder::new(vec![4], vec![2], DataType::UInt16)
        .create(store, "a")
        .await
        .unwrap();
    let err = a.read_all::<i16>().await.unwrap_err();
    assert!(
        matches!(err, ZarrError::ElementType { ref path, .. } if path == "a"),
        "{err}"
    );
    let err = a
        .write_region(&ArraySubset::new(vec![0], vec![2]), &[1.0f32, 2.0])
        .await
        .unwrap_err();
    assert!(matches!(err, ZarrError::ElementType { .. }));
    let err = a
        .write_region(&ArraySubset::new(vec![0], vec![2]), &[1u16])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ZarrError::DataLength {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{err}"
    );
    let err = a
        .read_region::<u16>(&ArraySubset::new(vec![3], vec![2]))
        .await
        .unwrap_err();
    assert!(matches!(err, ZarrError::InvalidRegion { .. }), "{err}");
    let err = a
        .read_region::<u16>(&ArraySubset::new(vec![0, 0], vec![1, 1]))
        .await
        .unwrap_err();
    assert!(matches!(err, ZarrError::InvalidRegion { .. }), "{err}");
}

#[tokio::test]
async fn corrupt_chunk_error_names_path_and_key() {
    let store = mem();
    let a = ArrayBuilder::new(vec![4], vec![2], DataType::Int64)
        .codecs(vec![
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "crc32c"}),
        ])
        .create(store.clone(), "grp/arr")
        .await
        .unwrap();
    a.write_region(&ArraySubset::new(vec![0], vec![4]), &[1i64, 2, 3, 4])
        .await
        .unwrap();
    let mut bad = store.get("grp/arr/c/1").await.unwrap().unwrap().to_vec();
    bad[0] ^= 0xff;
    store.set("grp/arr/c/1", Bytes::from(bad)).await.unwrap();
    let err = a.read_all::<i64>().await.unwrap_err();
    match &err {
        ZarrError::Chunk { path, key, .. } => {
            assert_eq!(path, "grp/arr");
            assert_eq!(key, "grp/arr/c/1");
        }
        other => panic!("unexpected {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("grp/arr/c/1") && msg.contains("crc32c"),
        "{msg}"
    );
    // a truncated chunk under the bytes codec is a typed error too
    store
        .set("grp/arr/c/0", Bytes::from_static(b"abc"))
        .await
        .unwrap();
    let err = a
        .read_region::<i64>(&ArraySubset::new(vec![0], vec![1]))
        .await
        .unwrap_err();
    assert!(matches!(err, ZarrError::Chunk { .. }), "{err:?}");
}

#[tokio::test]
async fn all_element_types_roundtrip() {
    let store = mem();
    macro_rules! rt {
        ($dt:expr, $vals:expr, $t:ty) => {{
            let vals: Vec<$t> = $vals;
            let name = format!("{}", $dt.name());
            let a = ArrayBuilder::new(vec![vals.len() as u64], vec![2], $dt)
                .create(store.clone(), &name)
                .await
                .unwrap();
            a.write_region(&ArraySubset::full(a.shape()), &vals)
                .await
                .unwrap();
            let back: Vec<$t> = Array::open(store.clone(), &name)
                .await
                .unwrap()
                .read_all()
                .await
                .unwrap();
            assert_eq!(back, vals, "{name}");
        }};
    }
    rt!(DataType::Bool, vec![true, false, true], bool);
    rt!(DataType::Int8, vec![-128, 0, 127], i8);
    rt!(DataType::Int16, vec![-300, 0, 300], i16);
    rt!(DataType::Int32, vec![i32::MIN, 0, i32::MAX], i32);
    rt!(DataType::Int64, vec![i64::MIN, 0, i64::MAX], i64);
    rt!(DataType::UInt8, vec![0, 1, 255], u8);
    rt!(DataType::UInt16, vec![0, 1, 65535], u16);
    rt!(DataType::UInt32, vec![0, 1, u32::MAX], u32);
    rt!(DataType::UInt64, vec![0, 1, u64::MAX], u64);
    rt!(
        DataType::Float16,
        vec![f16::from_f32(1.5), f16::from_f32(-2.0), f16::ZERO],
        f16
    );
    rt!(DataType::Float32, vec![1.5, -2.0, 1e30], f32);
    rt!(DataType::Float64, vec![1.5, -2.0, 1e300], f64);
    rt!(
        DataType::Complex64,
        vec![
            Complex::new(1.0, -1.0),
            Complex::new(0.5, 2.0),
            Complex::new(0.0, 0.0)
        ],
        Complex<f32>
    );
    rt!(
        DataType::Complex128,
        vec![
            Complex::new(1.0, -1.0),
            Complex::new(0.5, 2.0),
            Complex::new(0.0, 0.0)
        ],
        Complex<f64>
    );
    rt!(
        DataType::String,
        vec!["a".to_string(), "".to_string(), "日本".to_string()],
        String
    );
    rt!(
        DataType::FixedLengthUtf32 { length_bytes: 8 },
        vec!["ab".to_string(), "".to_string(), "é".to_string()],
        String
    );
    rt!(
        DataType::RawBits { bytes: 2 },
        vec![vec![1u8, 2], vec![0, 0], vec![255, 3]],
        Vec<u8>
    );
    rt!(
        DataType::RawBytes { length_bytes: 3 },
        vec![[1u8, 2, 3], [0, 0, 0], [9, 9, 9]],
        [u8; 3]
    );
}

#[tokio::test]
async fn raw_and_json_output() {
    let store = mem();
    let a = ArrayBuilder::new(vec![2, 2], vec![1, 2], DataType::Float32)
        .fill_value(json!("NaN"))
        .codecs(vec![
            json!({"name": "bytes", "configuration": {"endian": "big"}}),
        ])
        .create(store.clone(), "f")
        .await
        .unwrap();
    a.write_region(
        &ArraySubset::new(vec![0, 0], vec![1, 2]),
        &[1.0f32, f32::INFINITY],
    )
    .await
    .unwrap();
    let full = ArraySubset::full(a.shape());
    let raw = a.read_region_le_bytes(&full).await.unwrap();
    let mut expected = Vec::new();
    for v in [1.0f32, f32::INFINITY, f32::NAN, f32::NAN] {
        expected.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(raw, expected);
    // the stored chunk is big-endian
    assert_eq!(
        store.get("f/c/0/0").await.unwrap().unwrap().as_ref(),
        &[0x3f, 0x80, 0, 0, 0x7f, 0x80, 0, 0]
    );
    assert_eq!(
        a.read_region_json(&full).await.unwrap(),
        json!([[1.0, "Infinity"], ["NaN", "NaN"]])
    );
    let s = ArrayBuilder::new(vec![2], vec![2], DataType::String)
        .create(store.clone(), "s")
        .await
        .unwrap();
    s.write_region(
        &ArraySubset::full(&[2]),
        &["x".to_string(), "yé".to_string()],
    )
    .await
    .unwrap();
    assert_eq!(
        s.read_region_json(&ArraySubset::full(&[2])).await.unwrap(),
        json!(["x", "yé"])
    );
    let err = s
        .read_region_le_bytes(&ArraySubset::full(&[2]))
        .await
        .unwrap_err();
    assert!(matches!(err, ZarrError::InvalidValue { .. }), "{err:?}");
    let c = ArrayBuilder::new(vec![], vec![], DataType::Complex64)
        .fill_value(json!([1.0, "-Infinity"]))
        .create(store.clone(), "c")
        .await
        .unwrap();
    assert_eq!(
        c.read_region_json(&ArraySubset::full(&[])).await.unwrap(),
        json!([1.0, "-Infinity"])
    );
    // untyped write path
    let bytes: Vec<u8> = [5.0f32, 6.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
    a.write_region_bytes(
        &ArraySubset::new(vec![1, 0], vec![1, 2]),
        ArrayBytes::Fixed(bytes),
    )
    .await
    .unwrap();
    assert_eq!(
        a.read_region_json(&full).await.unwrap(),
        json!([[1.0, "Infinity"], [5.0, 6.0]])
    );
}

#[tokio::test]
async fn scalar_arrays_use_c_and_0_keys() {
    let store = mem();
    let a = ArrayBuilder::new(vec![], vec![], DataType::Int16)
        .fill_value(json!(7))
        .create(store.clone(), "s")
        .await
        .unwrap();
    assert_eq!(a.read_all::<i16>().await.unwrap(), vec![7]);
    a.write_region(&ArraySubset::full(&[]), &[42i16])
        .await
        .unwrap();
    assert!(store.get("s/c").await.unwrap().is_some());
    assert_eq!(a.read_all::<i16>().await.unwrap(), vec![42]);
    let b = ArrayBuilder::new(vec![], vec![], DataType::Int16)
        .chunk_key_encoding(ChunkKeyEncodingKind::V2(Separator::Dot))
        .create(store.clone(), "v")
        .await
        .unwrap();
    b.write_region(&ArraySubset::full(&[]), &[1i16])
        .await
        .unwrap();
    assert!(store.get("v/0").await.unwrap().is_some());
    let nd = b
        .read_region_ndarray::<i16>(&ArraySubset::full(&[]))
        .await
        .unwrap();
    assert_eq!(nd.ndim(), 0);
    assert_eq!(nd[IxDyn(&[])], 1);
}

#[tokio::test]
async fn chunk_key_encodings() {
    let store = mem();
    for (enc, key) in [
        (ChunkKeyEncodingKind::Default(Separator::Dot), "d/c.1.0"),
        (ChunkKeyEncodingKind::V2(Separator::Dot), "d/1.0"),
        (ChunkKeyEncodingKind::V2(Separator::Slash), "d/1/0"),
    ] {
        let a = ArrayBuilder::new(vec![4, 4], vec![2, 2], DataType::UInt8)
            .chunk_key_encoding(enc)
            .overwrite(true)
            .create(store.clone(), "d")
            .await
            .unwrap();
        a.write_region(&ArraySubset::new(vec![2, 0], vec![1, 1]), &[9u8])
            .await
            .unwrap();
        assert!(store.get(key).await.unwrap().is_some(), "{key}");
        assert_eq!(a.chunk_key(&[1, 0]).unwrap(), key);
        let b = Array::open(store.clone(), "d").await.unwrap();
        assert_eq!(
            b.read_region::<u8>(&ArraySubset::new(vec![2, 0], vec![1, 1]))
                .await
                .unwrap(),
            vec![9]
        );
    }
}

#[tokio::test]
async fn whole_chunk_api() {
    let store = mem();
    let a = ArrayBuilder::new(vec![3, 3], vec![2, 2], DataType::UInt32)
        .create(store.clone(), "a")
        .await
        .unwrap();
    assert_eq!(a.chunk_grid_shape(), vec![2, 2]);
    a.write_chunk(&[1, 1], &[1u32, 2, 3, 4]).await.unwrap();
    assert_eq!(
        a.read_chunk::<u32>(&[1, 1]).await.unwrap(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(a.read_chunk::<u32>(&[0, 0]).await.unwrap(), vec![0; 4]);
    assert!(a.read_chunk_bytes(&[0, 0]).await.unwrap().is_none());
    assert_eq!(a.read_all::<u32>().await.unwrap()[8], 1);
    let err = a.read_chunk::<u32>(&[2, 0]).await.unwrap_err();
    assert!(matches!(err, ZarrError::InvalidRegion { .. }), "{err:?}");
    let err = a.write_chunk(&[0, 0], &[1u32]).await.unwrap_err();
    assert!(matches!(err, ZarrError::DataLength { .. }), "{err:?}");
    let enc = a.read_encoded_chunk(&[1, 1]).await.unwrap().unwrap();
    a.write_encoded_chunk(&[0, 0], enc).await.unwrap();
    assert_eq!(
        a.read_chunk::<u32>(&[0, 0]).await.unwrap(),
        vec![1, 2, 3, 4]
    );
    a.erase_chunk(&[1, 1]).await.unwrap();
    assert!(a.read_chunk_bytes(&[1, 1]).await.unwrap().is_none());
}

#[tokio::test]
async fn resize_erases_and_trims() {
    let store = mem();
    let mut a = ArrayBuilder::new(vec![6, 6], vec![2, 2], DataType::Int16)
        .fill_value(json!(-1))
        .create(store.clone(), "r")
        .await
        .unwrap();
    let vals: Vec<i16> = (0..36).collect();
    a.write_region(&ArraySubset::full(&[6, 6]), &vals)
        .await
        .unwrap();
    assert_eq!(store.list_prefix("r/c/").await.unwrap().len(), 9);
    a.resize(vec![3, 6]).await.unwrap();
    assert_eq!(a.shape(), &[3, 6]);
    // rows of chunks 2 (rows 4..6) are gone; chunk row 1 (rows 2..4) is trimmed
    let keys = store.list_prefix("r/c/").await.unwrap();
    assert_eq!(keys.len(), 6, "{keys:?}");
    let reopened = Array::open(store.clone(), "r").await.unwrap();
    assert_eq!(reopened.shape(), &[3, 6]);
    let v: Vec<i16> = reopened.read_all().await.unwrap();
    assert_eq!(v, (0..18).collect::<Vec<i16>>());
    // growing again shows the fill value where data was cut off
    a.resize(vec![6, 6]).await.unwrap();
    let v: Vec<i16> = a.read_all().await.unwrap();
    assert_eq!(&v[..18], &(0..18).collect::<Vec<i16>>()[..]);
    assert!(v[18..].iter().all(|&x| x == -1), "{v:?}");
    let err = a.resize(vec![6]).await.unwrap_err();
    assert!(matches!(err, ZarrError::InvalidRegion { .. }), "{err:?}");
}

#[tokio::test]
async fn attributes_and_metadata_roundtrip() {
    let store = mem();
    let mut a = ArrayBuilder::new(vec![4], vec![2], DataType::Float64)
        .dimension_names(vec![Some("x".into())])
        .attributes(attrs(json!({"a": 1, "b": {"c": [1, 2]}})))
        .create(store.clone(), "m")
        .await
        .unwrap();
    a.update_attributes(attrs(json!({"a": null, "d": "new"})))
        .await
        .unwrap();
    let b = Array::open(store.clone(), "m").await.unwrap();
    assert_eq!(
        Value::Object(b.attributes().clone()),
        json!({"b": {"c": [1, 2]}, "d": "new"})
    );
    assert_eq!(b.dimension_names(), Some(&[Some("x".to_string())][..]));
    // zarr.json is a faithful v3 document
    let doc: Value =
        serde_json::from_slice(&store.get("m/zarr.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(doc["zarr_format"], 3);
    assert_eq!(doc["node_type"], "array");
    assert_eq!(doc["fill_value"], 0.0);
    assert_eq!(doc["storage_transformers"], json!([]));
    // unknown must_understand=false members survive updates
    let mut doc2 = doc.clone();
    doc2["vendor"] = json!({"must_understand": false, "v": 1});
    store
        .set(
            "m/zarr.json",
            Bytes::from(serde_json::to_vec(&doc2).unwrap()),
        )
        .await
        .unwrap();
    let mut c = Array::open(store.clone(), "m").await.unwrap();
    c.set_attributes(Map::new()).await.unwrap();
    let doc3: Value =
        serde_json::from_slice(&store.get("m/zarr.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(doc3["vendor"], json!({"must_understand": false, "v": 1}));
    // a non-empty storage transformer list is refused with a typed error
    let mut bad = doc.clone();
    bad["storage_transformers"] = json!([{"name": "chunk-manifest-json"}]);
    store
        .set(
            "m/zarr.json",
            Bytes::from(serde_json::to_vec(&bad).unwrap()),
        )
        .await
        .unwrap();
    let err = Array::open(store.clone(), "m").await.unwrap_err();
    assert!(
        matches!(err, ZarrError::UnsupportedExtension { ref path, .. } if path == "m"),
        "{err}"
    );
}

#[tokio::test]
async fn hierarchy_walk_and_delete() {
    let store = mem();
    let root = Group::create(store.clone(), "", attrs(json!({"root": true})))
        .await
        .unwrap();
    let g = root.create_group("g1", Map::new()).await.unwrap();
    g.create_array("a", ArrayBuilder::new(vec![2], vec![1], DataType::Int8))
        .await
        .unwrap();
    let arr = root
        .create_array("b", ArrayBuilder::new(vec![2], vec![1], DataType::Int8))
        .await
        .unwrap();
    arr.write_region(&ArraySubset::full(&[2]), &[1i8, 2])
        .await
        .unwrap();
    ArrayBuilder::new(vec![1], vec![1], DataType::Int8)
        .create(store.clone(), "g1/sub/deep")
        .await
        .unwrap();
    let children = root.children().await.unwrap();
    let names: Vec<&str> = children.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, vec!["b", "g1"]);
    let all = walk(store.as_ref(), "").await.unwrap();
    let paths: Vec<(&str, &str)> = all
        .iter()
        .map(|(p, m)| (p.as_str(), m.node_type()))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("", "group"),
            ("b", "array"),
            ("g1", "group"),
            ("g1/a", "array"),
            ("g1/sub", "group"),
            ("g1/sub/deep", "array")
        ]
    );
    // arrays' chunk directories are not children
    assert!(list_children(store.as_ref(), "b").await.unwrap().is_empty());
    assert!(matches!(
        Group::create(store.clone(), "g1", Map::new()).await,
        Err(ZarrError::NodeExists { .. })
    ));
    assert!(matches!(
        Array::open(store.clone(), "g1").await,
        Err(ZarrError::WrongNodeType { .. })
    ));
    assert!(matches!(
        Array::open(store.clone(), "nope").await,
        Err(ZarrError::NodeNotFound { .. })
    ));
    assert!(matches!(
        ArrayBuilder::new(vec![1], vec![1], DataType::Int8)
            .create(store.clone(), "b/x")
            .await,
        Err(ZarrError::WrongNodeType { .. })
    ));
    delete_node(store.as_ref(), "g1").await.unwrap();
    assert!(store.list_prefix("g1/").await.unwrap().is_empty());
    assert!(store.get("b/c/0").await.unwrap().is_some());
    assert!(matches!(
        delete_node(store.as_ref(), "g1").await,
        Err(ZarrError::NodeNotFound { .. })
    ));
    let mut r = Group::open(store.clone(), "").await.unwrap();
    r.update_attributes(attrs(json!({"x": 1}))).await.unwrap();
    match open_node(store.clone(), "").await.unwrap() {
        Node::Group(g) => assert_eq!(
            Value::Object(g.attributes().clone()),
            json!({"root": true, "x": 1})
        ),
        Node::Array(_) => panic!("root is a group"),
    }
    let meta = walk(store.as_ref(), "b").await.unwrap();
    assert!(matches!(meta[0].1, NodeMetadata::Array(_)));
}

#[tokio::test]
async fn sharded_partial_reads_fetch_only_needed_inner_chunks() {
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug)]
    struct Counting {
        inner: MemoryStore,
        gets: AtomicU64,
        partial_bytes: AtomicU64,
    }
    #[async_trait::async_trait]
    impl Store for Counting {
        async fn get(&self, key: &str) -> Result<Option<Bytes>, floe::zarr::StoreError> {
            if key.contains("/c/") {
                self.gets.fetch_add(1, Ordering::SeqCst);
            }
            self.inner.get(key).await
        }
        async fn get_partial_values(
            &self,
            key: &str,
            ranges: &[floe::zarr::ByteRange],
        ) -> Result<Option<Vec<Bytes>>, floe::zarr::StoreError> {
            let r = self.inner.get_partial_values(key, ranges).await?;
            if let Some(parts) = &r {
                let n: u64 = parts.iter().map(|p| p.len() as u64).sum();
                self.partial_bytes.fetch_add(n, Ordering::SeqCst);
            }
            Ok(r)
        }
        async fn set(&self, key: &str, value: Bytes) -> Result<(), floe::zarr::StoreError> {
            self.inner.set(key, value).await
        }
        async fn erase(&self, key: &str) -> Result<(), floe::zarr::StoreError> {
            self.inner.erase(key).await
        }
        async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, floe::zarr::StoreError> {
            self.inner.list_prefix(prefix).await
        }
        async fn list_dir(
            &self,
            prefix: &str,
        ) -> Result<floe::zarr::ListDirResult, floe::zarr::StoreError> {
            self.inner.list_dir(prefix).await
        }
    }
    let counting = Arc::new(Counting {
        inner: MemoryStore::new(),
        gets: AtomicU64::new(0),
        partial_bytes: AtomicU64::new(0),
    });
    let store: Arc<dyn Store> = counting.clone();
    let a = ArrayBuilder::new(vec![64, 64], vec![64, 64], DataType::UInt32)
        .codecs(vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [8, 8],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end"
        }})])
        .create(store.clone(), "sh")
        .await
        .unwrap();
    let vals: Vec<u32> = (0..64 * 64).collect();
    a.write_region(&ArraySubset::full(&[64, 64]), &vals)
        .await
        .unwrap();
    let shard_len = counting.inner.get("sh/c/0/0").await.unwrap().unwrap().len() as u64;
    assert_eq!(shard_len, 64 * 64 * 4 + 64 * 16 + 4);
    counting.gets.store(0, Ordering::SeqCst);
    // A 3x3 region inside inner chunk (1, 2)
    let region = ArraySubset::new(vec![9, 17], vec![3, 3]);
    let got: Vec<u32> = a.read_region(&region).await.unwrap();
    let expected: Vec<u32> = (9..12)
        .flat_map(|r| (17..20).map(move |c| r * 64 + c))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(
        counting.gets.load(Ordering::SeqCst),
        0,
        "no whole-shard read"
    );
    // index (64*16+4) + one inner chunk (8*8*4)
    assert_eq!(
        counting.partial_bytes.load(Ordering::SeqCst),
        64 * 16 + 4 + 256
    );
}

#[tokio::test]
async fn filesystem_store_array_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(FilesystemStore::new(dir.path()).unwrap());
    let a = ArrayBuilder::new(vec![10, 10], vec![4, 4], DataType::Float64)
        .create(store.clone(), "data/x")
        .await
        .unwrap();
    let vals: Vec<f64> = (0..100).map(|v| v as f64 * 0.5).collect();
    a.write_region(&ArraySubset::full(&[10, 10]), &vals)
        .await
        .unwrap();
    assert!(dir.path().join("data/x/zarr.json").is_file());
    assert!(dir.path().join("data/x/c/2/2").is_file());
    assert!(dir.path().join("data/zarr.json").is_file());
    let b = Array::open(store, "data/x").await.unwrap();
    assert_eq!(b.read_all::<f64>().await.unwrap(), vals);
}

/// Reads into the caller's buffer: the same values as `read_region` (missing chunks
/// at the fill value, overwriting whatever the buffer held), one buffer reused
/// across reads, and typed errors for a buffer of the wrong length or element type.
#[tokio::test]
async fn read_region_into_reuses_the_callers_buffer() {
    let store = mem();
    let a = ArrayBuilder::new(vec![6, 5], vec![4, 2], DataType::Int32)
        .fill_value(json!(-1))
        .codecs(vec![
            json!({"name": "bytes", "configuration": {"endian": "big"}}),
            json!({"name": "zstd", "configuration": {"level": 5, "checksum": true}}),
        ])
        .create(store.clone(), "a")
        .await
        .unwrap();
    let values: Vec<i32> = (0..12).collect();
    a.write_region(&ArraySubset::new(vec![0, 0], vec![4, 3]), &values)
        .await
        .unwrap();
    let mut buf = vec![7i32; 6];
    for region in [
        ArraySubset::new(vec![1, 1], vec![2, 3]),
        ArraySubset::new(vec![3, 2], vec![3, 2]),
    ] {
        a.read_region_into(&region, &mut buf).await.unwrap();
        let want: Vec<i32> = a.read_region(&region).await.unwrap();
        assert_eq!(buf, want, "region {region:?}");
    }
    assert!(buf.contains(&-1), "missing chunks read as the fill value");
    match a
        .read_region_into(&ArraySubset::new(vec![0, 0], vec![2, 2]), &mut buf)
        .await
    {
        Err(ZarrError::InvalidRegion { .. }) => {}
        other => panic!("a buffer of the wrong length must be InvalidRegion, got {other:?}"),
    }
    let mut floats = vec![0f32; 6];
    match a
        .read_region_into(&ArraySubset::new(vec![0, 0], vec![2, 3]), &mut floats)
        .await
    {
        Err(ZarrError::ElementType { .. }) => {}
        other => panic!("a buffer of another element type must be ElementType, got {other:?}"),
    }
}

#[tokio::test]
async fn byte_regions_read_into_and_write_from_the_callers_buffer() {
    let store = mem();
    // A fill value whose bytes differ (0x01020304 little-endian is 04 03 02 01).
    let a = ArrayBuilder::new(vec![6, 5], vec![4, 2], DataType::UInt32)
        .fill_value(json!(0x0102_0304))
        .codecs(vec![
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}}),
        ])
        .create(store.clone(), "a")
        .await
        .unwrap();
    let values: Vec<u32> = (0..12).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let written = ArraySubset::new(vec![1, 1], vec![4, 3]);
    a.write_region_from_bytes(&written, &bytes).await.unwrap();
    let want: Vec<u32> = a
        .read_region(&ArraySubset::new(vec![0, 0], vec![6, 5]))
        .await
        .unwrap();
    let mut out = vec![0xAAu8; 6 * 5 * 4];
    a.read_region_into_bytes(&ArraySubset::new(vec![0, 0], vec![6, 5]), &mut out)
        .await
        .unwrap();
    let got: Vec<u32> = out
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        got[0], 0x0102_0304,
        "unwritten elements read as the fill value"
    );
    assert_eq!(got[6], 0, "element (1, 1) is the first written");
    match a
        .read_region_into_bytes(&ArraySubset::new(vec![0, 0], vec![2, 2]), &mut out)
        .await
    {
        Err(ZarrError::InvalidRegion { .. }) => {}
        other => panic!("a buffer of the wrong size must be InvalidRegion, got {other:?}"),
    }
    match a.write_region_from_bytes(&written, &bytes[..8]).await {
        Err(ZarrError::DataLength { .. }) => {}
        other => panic!("short data must be DataLength, got {other:?}"),
    }
}

/// Array writes and reads that encode, decode or read chunks straight from and into
/// the caller's buffers work from a `LocalSet` driven by a multi-thread runtime's
/// `block_on`, where tokio forbids `block_in_place`, and from tasks on its workers.
#[test]
fn direct_chunk_paths_work_in_local_sets_and_worker_tasks() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let values: Vec<f32> = (0..64 * 1024).map(|i| (i % 1000) as f32).collect();
    let roundtrip = |codecs: Vec<Value>, name: &'static str, values: Vec<f32>| async move {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let a = ArrayBuilder::new(vec![64, 1024], vec![32, 1024], DataType::Float32)
            .codecs(codecs)
            .create(store, name)
            .await
            .unwrap();
        a.write_region(&ArraySubset::full(&[64, 1024]), &values)
            .await
            .unwrap();
        let back: Vec<f32> = a.read_all().await.unwrap();
        assert!(back == values, "{name} reads back as written");
    };
    let raw = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    let zstd = vec![
        json!({"name": "bytes", "configuration": {"endian": "little"}}),
        json!({"name": "zstd", "configuration": {"level": 1}}),
    ];
    let local = tokio::task::LocalSet::new();
    rt.block_on(local.run_until(async {
        roundtrip(raw.clone(), "raw", values.clone()).await;
        roundtrip(zstd.clone(), "zstd", values.clone()).await;
        let (r, z, v) = (raw.clone(), zstd.clone(), values.clone());
        tokio::task::spawn_local(async move {
            roundtrip(r, "raw", v.clone()).await;
            roundtrip(z, "zstd", v).await;
        })
        .await
        .unwrap();
    }));
    rt.block_on(async {
        tokio::spawn(async move {
            roundtrip(raw, "raw", values.clone()).await;
            roundtrip(zstd, "zstd", values).await;
        })
        .await
        .unwrap();
    });
}
