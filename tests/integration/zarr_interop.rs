//! Interoperability with zarr-python 3 (`tests/python/zarr_interop.py`).
//!
//! - zarr-python writes a matrix of v3 arrays (every data type × codec chain, sharded,
//!   big-endian, transposed, NaN fill, partial edge chunks, never-written chunks,
//!   strings, fixed_length_utf32, raw bytes); floe reads identical values.
//! - floe writes the same kind of matrix; zarr-python reads and verifies it.
//! - zarr-python writes Zarr v2 arrays (zlib/gzip/zstd/blosc, shuffle filter, F
//!   order, `/` separator, strings); floe reads identical values.
//!
//! The interpreter comes from `FLOE_PYTHON`, defaulting to
//! `/opt/floe-py/py311/bin/python` when that file exists. Without one the tests are
//! skipped, except under `CI=true`, where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use floe::zarr::RegionFormats;
use floe::zarr::{
    walk, Array, ArrayBuilder, ArraySubset, ChunkKeyEncodingKind, DataType, Element,
    FilesystemStore, Group, NodeMetadata, Separator, Store,
};
use half::f16;
use num_complex::Complex;
use serde_json::{json, Value};

const DEFAULT_PYTHON: &str = "/opt/floe-py/py311/bin/python";

fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("FLOE_PYTHON")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from(DEFAULT_PYTHON)).filter(|p| p.exists()));
    match candidate {
        Some(p) => Some(p),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "zarr-python interop tests need a Python with zarr 3: set FLOE_PYTHON \
             (or install it at {DEFAULT_PYTHON}); CI=true makes this a failure"
        ),
        None => {
            eprintln!("skipping zarr-python interop test: no FLOE_PYTHON and no {DEFAULT_PYTHON}");
            None
        }
    }
}

fn run_script(py: &Path, mode: &str, dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/zarr_interop.py");
    let out = Command::new(py)
        .arg(&script)
        .arg(mode)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "zarr_interop.py {mode} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

fn manifest(dir: &Path) -> Vec<Value> {
    let text = std::fs::read(dir.join("manifest.json")).expect("manifest.json");
    serde_json::from_slice::<Value>(&text)
        .expect("manifest JSON")
        .as_array()
        .cloned()
        .expect("manifest list")
}

/// Reads the whole array typed as `T` and re-encodes it little-endian, so the
/// typed path ([`Element`]) is checked against zarr-python's bytes too.
async fn typed_le<T: Element>(a: &Array, to_le: fn(&T) -> Vec<u8>) -> Vec<u8> {
    let v: Vec<T> = a.read_all().await.expect("typed read");
    v.iter().flat_map(to_le).collect()
}

async fn typed_check(a: &Array) -> Option<Vec<u8>> {
    Some(match a.data_type() {
        DataType::Bool => typed_le::<bool>(a, |v| vec![u8::from(*v)]).await,
        DataType::Int8 => typed_le::<i8>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Int16 => typed_le::<i16>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Int32 => typed_le::<i32>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Int64 => typed_le::<i64>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::UInt8 => typed_le::<u8>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::UInt16 => typed_le::<u16>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::UInt32 => typed_le::<u32>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::UInt64 => typed_le::<u64>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Float16 => typed_le::<f16>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Float32 => typed_le::<f32>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Float64 => typed_le::<f64>(a, |v| v.to_le_bytes().to_vec()).await,
        DataType::Complex64 => {
            typed_le::<Complex<f32>>(a, |v| [v.re.to_le_bytes(), v.im.to_le_bytes()].concat()).await
        }
        DataType::Complex128 => {
            typed_le::<Complex<f64>>(a, |v| [v.re.to_le_bytes(), v.im.to_le_bytes()].concat()).await
        }
        _ => return None,
    })
}

/// Opens every array of the manifest with floe and compares it with the expected
/// values dumped by zarr-python. Returns the number of arrays checked.
async fn check_python_output(dir: &Path) -> usize {
    let store: Arc<dyn Store> =
        Arc::new(FilesystemStore::open_read_only(dir.join("store.zarr")).unwrap());
    let entries = manifest(dir);
    let mut failures = Vec::new();
    for e in &entries {
        let path = e["path"].as_str().unwrap();
        let result: Result<(), String> = async {
            let a = Array::open(store.clone(), path)
                .await
                .map_err(|e| e.to_string())?;
            let shape: Vec<u64> = serde_json::from_value(e["shape"].clone()).unwrap();
            if a.shape() != shape.as_slice() {
                return Err(format!("shape {:?} != {shape:?}", a.shape()));
            }
            let full = ArraySubset::full(&shape);
            let expected_path = dir.join(e["expected"].as_str().unwrap());
            if e["kind"] == "strings" {
                let expected: Vec<String> =
                    serde_json::from_slice(&std::fs::read(&expected_path).unwrap()).unwrap();
                let got: Vec<String> = a.read_region(&full).await.map_err(|e| e.to_string())?;
                if got != expected {
                    return Err(format!("strings {got:?} != {expected:?}"));
                }
                let json = a.read_region_json(&full).await.map_err(|e| e.to_string())?;
                if json.to_string().matches('"').count() < expected.len() * 2 {
                    return Err(format!("JSON output lacks strings: {json}"));
                }
            } else {
                let expected = std::fs::read(&expected_path).unwrap();
                let got = a
                    .read_region_le_bytes(&full)
                    .await
                    .map_err(|e| e.to_string())?;
                if got != expected {
                    return Err(format!(
                        "raw bytes differ (first 16: {:?} vs {:?})",
                        &got[..got.len().min(16)],
                        &expected[..expected.len().min(16)]
                    ));
                }
                if let Some(typed) = typed_check(&a).await {
                    if typed != expected {
                        return Err("typed read differs from raw bytes".into());
                    }
                }
                // A sub-region crossing chunks reads the same bytes as the full read.
                if shape.len() == 2 && shape[0] > 3 && shape[1] > 4 {
                    let sub = ArraySubset::new(vec![1, 2], vec![3, 3]);
                    let part = a
                        .read_region_le_bytes(&sub)
                        .await
                        .map_err(|e| e.to_string())?;
                    let es = expected.len() / (shape[0] * shape[1]) as usize;
                    let mut want = Vec::new();
                    for r in 1..4 {
                        let start = (r * shape[1] as usize + 2) * es;
                        want.extend_from_slice(&expected[start..start + 3 * es]);
                    }
                    if part != want {
                        return Err("sub-region read differs".into());
                    }
                }
            }
            if let Some(names) = e.get("dimension_names") {
                let got: Vec<Option<String>> =
                    a.dimension_names().map(|d| d.to_vec()).unwrap_or_default();
                let want: Vec<Option<String>> = serde_json::from_value(names.clone()).unwrap();
                if got != want {
                    return Err(format!("dimension names {got:?} != {want:?}"));
                }
            }
            if let Some(attrs) = e.get("attributes") {
                if &Value::Object(a.attributes().clone()) != attrs {
                    return Err(format!("attributes {:?} != {attrs}", a.attributes()));
                }
            }
            Ok(())
        }
        .await;
        if let Err(msg) = result {
            failures.push(format!("{path} ({}): {msg}", e["dtype"]));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} arrays written by zarr-python read wrongly:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
    entries.len()
}

#[tokio::test]
async fn zarr_python_v3_arrays_read_by_floe() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    run_script(&py, "write-v3", dir.path());
    let n = check_python_output(dir.path()).await;
    assert!(n > 200, "expected the full matrix, got {n} arrays");
    // The hierarchy is walkable: every array of the manifest is found.
    let store: Arc<dyn Store> =
        Arc::new(FilesystemStore::open_read_only(dir.path().join("store.zarr")).unwrap());
    let nodes = walk(store.as_ref(), "").await.unwrap();
    let arrays = nodes
        .iter()
        .filter(|(_, m)| matches!(m, NodeMetadata::Array(_)))
        .count();
    assert_eq!(arrays, n);
    let root = Group::open(store, "").await.unwrap();
    assert_eq!(root.attributes()["title"], "interop");
}

#[tokio::test]
async fn zarr_python_v2_arrays_read_by_floe() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    run_script(&py, "write-v2", dir.path());
    let n = check_python_output(dir.path()).await;
    assert!(n > 150, "expected the full v2 matrix, got {n} arrays");
    let store: Arc<dyn Store> =
        Arc::new(FilesystemStore::open_read_only(dir.path().join("store.zarr")).unwrap());
    let root = Group::open(store.clone(), "").await.unwrap();
    assert_eq!(root.zarr_format(), floe::zarr::ZarrFormat::V2);
    assert_eq!(root.attributes()["title"], "v2");
    let nodes = walk(store.as_ref(), "").await.unwrap();
    assert_eq!(
        nodes
            .iter()
            .filter(|(_, m)| matches!(m, NodeMetadata::Array(_)))
            .count(),
        n
    );
    // F order became a transpose codec; slash separator the v2 encoding with '/'.
    let f = Array::open(store.clone(), "f4/forder_zlib").await.unwrap();
    assert_eq!(f.metadata().codecs[0]["name"], "transpose");
    let s = Array::open(store.clone(), "f4/slash_sep").await.unwrap();
    assert_eq!(
        s.metadata().chunk_key_encoding,
        ChunkKeyEncodingKind::V2(Separator::Slash)
    );
    assert!(dir.path().join("store.zarr/f4/slash_sep/0/0").is_file());
}

// ------------------------------------------------------------- floe writes

/// A deterministic value stream.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn f64(&mut self) -> f64 {
        (self.next() % 2_000_001) as f64 / 1000.0 - 1000.0
    }
}

struct Case {
    codecs: Vec<Value>,
    chunks: Vec<u64>,
    encoding: ChunkKeyEncodingKind,
}

fn chains(itemsize: usize) -> Vec<(&'static str, Case)> {
    let b_le = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let b_be = json!({"name": "bytes", "configuration": {"endian": "big"}});
    let index =
        json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]);
    let blosc = |cname: &str, shuffle: &str| json!({"name": "blosc", "configuration": {"cname": cname, "clevel": 5, "shuffle": shuffle, "typesize": itemsize, "blocksize": 0}});
    let c = |codecs: Vec<Value>| Case {
        codecs,
        chunks: vec![2, 3],
        encoding: ChunkKeyEncodingKind::Default(Separator::Slash),
    };
    vec![
        ("bytes_le", c(vec![b_le.clone()])),
        ("bytes_be", c(vec![b_be.clone()])),
        (
            "transpose_zstd",
            c(vec![
                json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
                b_le.clone(),
                json!({"name": "zstd", "configuration": {"level": 3, "checksum": true}}),
            ]),
        ),
        (
            "gzip",
            c(vec![
                b_le.clone(),
                json!({"name": "gzip", "configuration": {"level": 5}}),
            ]),
        ),
        (
            "blosc_lz4_shuffle",
            c(vec![b_le.clone(), blosc("lz4", "shuffle")]),
        ),
        (
            "blosc_zstd_bitshuffle",
            c(vec![b_le.clone(), blosc("zstd", "bitshuffle")]),
        ),
        (
            "blosc_blosclz_noshuffle",
            c(vec![b_le.clone(), blosc("blosclz", "noshuffle")]),
        ),
        (
            "blosc_lz4hc",
            c(vec![b_le.clone(), blosc("lz4hc", "shuffle")]),
        ),
        (
            "blosc_zlib",
            c(vec![b_le.clone(), blosc("zlib", "shuffle")]),
        ),
        ("crc32c", c(vec![b_le.clone(), json!({"name": "crc32c"})])),
        (
            "sharded",
            Case {
                codecs: vec![json!({"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [2, 3],
                    "codecs": [b_le.clone(), {"name": "gzip", "configuration": {"level": 1}}],
                    "index_codecs": index, "index_location": "end"}})],
                chunks: vec![4, 6],
                encoding: ChunkKeyEncodingKind::Default(Separator::Slash),
            },
        ),
        (
            "sharded_start",
            Case {
                codecs: vec![json!({"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [2, 3],
                    "codecs": [b_be.clone(), {"name": "zstd", "configuration": {"level": 1, "checksum": false}}],
                    "index_codecs": index, "index_location": "start"}})],
                chunks: vec![4, 6],
                encoding: ChunkKeyEncodingKind::Default(Separator::Slash),
            },
        ),
        (
            "nested_sharding",
            Case {
                codecs: vec![json!({"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [4, 6],
                    "codecs": [{"name": "sharding_indexed", "configuration": {
                        "chunk_shape": [2, 3], "codecs": [b_le.clone()],
                        "index_codecs": index, "index_location": "end"}}],
                    "index_codecs": index, "index_location": "end"}})],
                chunks: vec![8, 12],
                encoding: ChunkKeyEncodingKind::Default(Separator::Slash),
            },
        ),
        (
            "numcodecs_shuffle_zlib",
            c(vec![
                b_le.clone(),
                json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": itemsize}}),
                json!({"name": "numcodecs.zlib", "configuration": {"level": 1}}),
            ]),
        ),
        (
            "v2_keys",
            Case {
                codecs: vec![b_le.clone()],
                chunks: vec![2, 3],
                encoding: ChunkKeyEncodingKind::V2(Separator::Dot),
            },
        ),
        (
            "default_dot_keys",
            Case {
                codecs: vec![
                    b_le.clone(),
                    json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}}),
                ],
                chunks: vec![2, 3],
                encoding: ChunkKeyEncodingKind::Default(Separator::Dot),
            },
        ),
    ]
}

/// Writes one array: fill everywhere, values in rows 0..5 × cols 0..7 (so some
/// chunks are never written) plus a partial write into row 6; returns the model.
async fn write_numeric<T: Element + Copy>(
    store: &Arc<dyn Store>,
    path: &str,
    dt: DataType,
    fill: (Value, T),
    case: &Case,
    gen: &mut dyn FnMut(usize) -> T,
) -> Vec<T> {
    let shape = [7u64, 10];
    let a = ArrayBuilder::new(shape.to_vec(), case.chunks.clone(), dt)
        .fill_value(fill.0)
        .codecs(case.codecs.clone())
        .chunk_key_encoding(case.encoding)
        .create(store.clone(), path)
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut model = vec![fill.1; 70];
    let vals: Vec<T> = (0..35).map(&mut *gen).collect();
    a.write_region(&ArraySubset::new(vec![0, 0], vec![5, 7]), &vals)
        .await
        .unwrap();
    for r in 0..5 {
        for c in 0..7 {
            model[r * 10 + c] = vals[r * 7 + c];
        }
    }
    let extra: Vec<T> = (100..102).map(&mut *gen).collect();
    a.write_region(&ArraySubset::new(vec![6, 1], vec![1, 2]), &extra)
        .await
        .unwrap();
    model[61] = extra[0];
    model[62] = extra[1];
    model
}

fn record(
    entries: &mut Vec<Value>,
    dir: &Path,
    path: &str,
    dtype: &str,
    shape: Vec<u64>,
    bytes: Vec<u8>,
    extra: Value,
) {
    let file = format!("expected/{}.bin", path.replace('/', "__"));
    std::fs::write(dir.join(&file), bytes).unwrap();
    let mut e =
        json!({"path": path, "dtype": dtype, "shape": shape, "kind": "raw", "expected": file});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            e[k] = v;
        }
    }
    entries.push(e);
}

#[tokio::test]
async fn floe_v3_arrays_read_by_zarr_python() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("expected")).unwrap();
    let store: Arc<dyn Store> =
        Arc::new(FilesystemStore::new(dir.path().join("store.zarr")).unwrap());
    Group::create(store.clone(), "", Default::default())
        .await
        .unwrap();
    let mut entries = Vec::new();

    macro_rules! numeric {
        ($name:expr, $dt:expr, $t:ty, $fill:expr, $gen:expr, $le:expr) => {{
            let itemsize = $dt.fixed_size().unwrap();
            for (cname, case) in chains(itemsize) {
                let path = format!("{}/{}", $name, cname);
                let mut rng = Lcg(path.len() as u64 * 7919 + itemsize as u64);
                let mut g = |i: usize| -> $t { $gen(&mut rng, i) };
                let model: Vec<$t> = write_numeric(&store, &path, $dt, $fill, &case, &mut g).await;
                let le: fn(&$t) -> Vec<u8> = $le;
                record(
                    &mut entries,
                    dir.path(),
                    &path,
                    $name,
                    vec![7, 10],
                    model.iter().flat_map(le).collect(),
                    Value::Null,
                );
            }
        }};
    }
    numeric!(
        "bool",
        DataType::Bool,
        bool,
        (json!(true), true),
        |r: &mut Lcg, _| r.next().is_multiple_of(2),
        |v| vec![u8::from(*v)]
    );
    numeric!(
        "int8",
        DataType::Int8,
        i8,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() as i8,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "int16",
        DataType::Int16,
        i16,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() as i16,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "int32",
        DataType::Int32,
        i32,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() as i32,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "int64",
        DataType::Int64,
        i64,
        (json!(3), 3),
        |r: &mut Lcg, _| (r.next() << 11) as i64,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "uint8",
        DataType::UInt8,
        u8,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() as u8,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "uint16",
        DataType::UInt16,
        u16,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() as u16,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "uint32",
        DataType::UInt32,
        u32,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() as u32,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "uint64",
        DataType::UInt64,
        u64,
        (json!(3), 3),
        |r: &mut Lcg, _| r.next() << 11,
        |v| v.to_le_bytes().to_vec()
    );
    let special = |r: &mut Lcg, i: usize| match i {
        1 => f64::NAN,
        2 => f64::INFINITY,
        3 => f64::NEG_INFINITY,
        _ => r.f64(),
    };
    numeric!(
        "float16",
        DataType::Float16,
        f16,
        (json!("NaN"), f16::NAN),
        |r: &mut Lcg, i| f16::from_f64(special(r, i)),
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "float32",
        DataType::Float32,
        f32,
        (json!("NaN"), f32::NAN),
        |r: &mut Lcg, i| special(r, i) as f32,
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "float64",
        DataType::Float64,
        f64,
        (json!("NaN"), f64::NAN),
        |r: &mut Lcg, i| special(r, i),
        |v| v.to_le_bytes().to_vec()
    );
    numeric!(
        "complex64",
        DataType::Complex64,
        Complex<f32>,
        (json!(["NaN", 1.0]), Complex::new(f32::NAN, 1.0)),
        |r: &mut Lcg, i| Complex::new(special(r, i) as f32, r.f64() as f32),
        |v| [v.re.to_le_bytes(), v.im.to_le_bytes()].concat()
    );
    numeric!(
        "complex128",
        DataType::Complex128,
        Complex<f64>,
        (json!(["NaN", 1.0]), Complex::new(f64::NAN, 1.0)),
        |r: &mut Lcg, i| Complex::new(special(r, i), r.f64()),
        |v| [v.re.to_le_bytes(), v.im.to_le_bytes()].concat()
    );

    // 0-d, 3-d transposed, dimension names and attributes
    let s = ArrayBuilder::new(vec![], vec![], DataType::Int32)
        .fill_value(json!(7))
        .create(store.clone(), "special/scalar")
        .await
        .unwrap();
    s.write_region(&ArraySubset::full(&[]), &[42i32])
        .await
        .unwrap();
    record(
        &mut entries,
        dir.path(),
        "special/scalar",
        "int32",
        vec![],
        42i32.to_le_bytes().to_vec(),
        Value::Null,
    );
    let t = ArrayBuilder::new(vec![5, 6, 7], vec![2, 3, 4], DataType::Int32)
        .codecs(vec![
            json!({"name": "transpose", "configuration": {"order": [2, 0, 1]}}),
            json!({"name": "bytes", "configuration": {"endian": "big"}}),
        ])
        .dimension_names(vec![Some("z".into()), None, Some("x".into())])
        .attributes(
            json!({"units": "m", "n": [1, 2]})
                .as_object()
                .cloned()
                .unwrap(),
        )
        .create(store.clone(), "special/transpose3d")
        .await
        .unwrap();
    let vals: Vec<i32> = (0..210).collect();
    t.write_region(&ArraySubset::full(&[5, 6, 7]), &vals)
        .await
        .unwrap();
    record(
        &mut entries,
        dir.path(),
        "special/transpose3d",
        "int32",
        vec![5, 6, 7],
        vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
        json!({"dimension_names": ["z", null, "x"], "attributes": {"units": "m", "n": [1, 2]}}),
    );

    // strings (vlen-utf8 and fixed_length_utf32) and raw bytes
    let strs: Vec<String> = ["", "a", "héllo", "日本語", "end!"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (name, codecs) in [
        ("strings/vlen", None),
        (
            "strings/vlen_gzip",
            Some(vec![
                json!({"name": "vlen-utf8", "configuration": {}}),
                json!({"name": "gzip", "configuration": {"level": 1}}),
            ]),
        ),
    ] {
        let mut b = ArrayBuilder::new(vec![7], vec![3], DataType::String).fill_value(json!("fill"));
        if let Some(c) = codecs {
            b = b.codecs(c);
        }
        let a = b.create(store.clone(), name).await.unwrap();
        a.write_region(&ArraySubset::new(vec![0], vec![5]), &strs)
            .await
            .unwrap();
        let mut expected = strs.clone();
        expected.extend(["fill".to_string(), "fill".to_string()]);
        let file = format!("expected/{}.json", name.replace('/', "__"));
        std::fs::write(
            dir.path().join(&file),
            serde_json::to_vec(&expected).unwrap(),
        )
        .unwrap();
        entries.push(json!({"path": name, "dtype": "object", "shape": [7], "kind": "strings", "expected": file}));
    }
    let u = ArrayBuilder::new(
        vec![7],
        vec![3],
        DataType::FixedLengthUtf32 { length_bytes: 20 },
    )
    .fill_value(json!(""))
    .codecs(vec![
        json!({"name": "bytes", "configuration": {"endian": "little"}}),
    ])
    .create(store.clone(), "strings/utf32")
    .await
    .unwrap();
    u.write_region(&ArraySubset::new(vec![0], vec![5]), &strs)
        .await
        .unwrap();
    let mut ub = Vec::new();
    for i in 0..7 {
        let s = strs.get(i).map(String::as_str).unwrap_or("");
        let mut units: Vec<u8> = s.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
        units.resize(20, 0);
        ub.extend(units);
    }
    record(
        &mut entries,
        dir.path(),
        "strings/utf32",
        "<U5",
        vec![7],
        ub,
        Value::Null,
    );
    let r = ArrayBuilder::new(vec![4], vec![3], DataType::RawBytes { length_bytes: 3 })
        .codecs(vec![json!({"name": "bytes"})])
        .create(store.clone(), "raw/v3")
        .await
        .unwrap();
    r.write_region(
        &ArraySubset::new(vec![0], vec![2]),
        &[[1u8, 2, 3], [255, 0, 7]],
    )
    .await
    .unwrap();
    record(
        &mut entries,
        dir.path(),
        "raw/v3",
        "|V3",
        vec![4],
        vec![1, 2, 3, 255, 0, 7, 0, 0, 0, 0, 0, 0],
        Value::Null,
    );

    let n = entries.len();
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_vec_pretty(&entries).unwrap(),
    )
    .unwrap();
    let out = run_script(&py, "verify", dir.path());
    eprintln!("zarr-python verify: {}", out.trim());
    assert!(out.contains(&format!("{n} passed, 0 failed")), "{out}");
}
