//! Zarr v1 stores (`../shared/specs/zarr/v1/v1.0.rst`): one array per store, `meta`
//! and `attrs` keys, chunks at `i.j`.
//!
//! No maintained v1 writer runs on current Python, so these tests write the fixtures
//! per the spec themselves: every data type v1 allows that v3 holds (booleans,
//! integers, floats, complex, `S`, `U` and `V` strings), both orders,
//! the four compressors (blosc with its `cname`/`clevel`/`shuffle` options, zlib,
//! bz2, none), NaN and infinite fill values (bare `NaN` / `-Infinity`, as Python's
//! `json` wrote them), missing chunks and partial edge chunks. floe must read what
//! the fixtures hold, and what zarr-python 2.18 reads after `migrate_1to2` on a copy
//! (`tests/python/numcodecs_interop.py migrate-v1`, interpreter `FLOE_PYZARR2`).
//! Imported into a repository (`floe::ops::import_zarr` and `floe import zarr`) the
//! arrays read the same through floe and through Icechunk 2.x (`FLOE_PYTHON312`).
//! Bad stores fail with typed errors naming the key.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use floe::format::NodePath;
use floe::ops::import_zarr;
use floe::storage::LocalStorage;
use floe::zarr::codec::{codec_from_json, Codec};
use floe::zarr::metadata::v2::parse_v2_dtype;
use floe::zarr::{
    Array, ArraySubset, CodecError, FilesystemStore, RegionFormats, Store, ZarrError,
};
use floe::Repository;
use serde_json::{json, Value};

use crate::common;
use crate::numcodecs::run_py;

const SHAPE: [usize; 2] = [7, 9];
const CHUNKS: [usize; 2] = [3, 4];

/// One fixture: name, dtype, compression, options, order, fill value (JSON text as
/// Python wrote it), missing chunk.
struct Case {
    name: &'static str,
    dtype: &'static str,
    compression: &'static str,
    opts: Value,
    order: char,
    fill: &'static str,
    missing: Option<[usize; 2]>,
}

fn case(
    name: &'static str,
    dtype: &'static str,
    compression: &'static str,
    opts: Value,
    order: char,
    fill: &'static str,
    missing: Option<[usize; 2]>,
) -> Case {
    Case {
        name,
        dtype,
        compression,
        opts,
        order,
        fill,
        missing,
    }
}

fn cases() -> Vec<Case> {
    let blosc = |cname: &str, clevel: u32, shuffle: u32| json!({"cname": cname, "clevel": clevel, "shuffle": shuffle});
    vec![
        case(
            "i4_zlib_c",
            "<i4",
            "zlib",
            json!(1),
            'C',
            "42",
            Some([1, 1]),
        ),
        case("i4_zlib_f", "<i4", "zlib", json!(5), 'F', "0", None),
        case(
            "f8_blosc_lz4_nan",
            "<f8",
            "blosc",
            blosc("lz4", 5, 1),
            'C',
            "NaN",
            Some([0, 2]),
        ),
        case(
            "f4_blosc_zstd_f",
            "<f4",
            "blosc",
            blosc("zstd", 3, 2),
            'F',
            "NaN",
            Some([2, 0]),
        ),
        case(
            "f4_none_neginf",
            "<f4",
            "none",
            Value::Null,
            'C',
            "-Infinity",
            Some([1, 0]),
        ),
        case("u2_big_bz2", ">u2", "bz2", json!(9), 'C', "7", Some([0, 0])),
        case(
            "i8_none_f",
            "<i8",
            "none",
            Value::Null,
            'F',
            "-1",
            Some([2, 2]),
        ),
        case(
            "b1_blosc",
            "|b1",
            "blosc",
            blosc("blosclz", 9, 0),
            'C',
            "true",
            Some([1, 2]),
        ),
        case("i1_zlib", "|i1", "zlib", json!(9), 'C', "-5", None),
        case(
            "u1_none_f",
            "|u1",
            "none",
            Value::Null,
            'F',
            "255",
            Some([0, 1]),
        ),
        case(
            "i2_big_blosc",
            ">i2",
            "blosc",
            blosc("zlib", 1, 1),
            'C',
            "0",
            None,
        ),
        case("u4_bz2_f", "<u4", "bz2", json!(1), 'F', "3", Some([1, 1])),
        case("u8_zlib", "<u8", "zlib", json!(3), 'C', "0", None),
        case(
            "f2_none",
            "<f2",
            "none",
            Value::Null,
            'C',
            "NaN",
            Some([2, 1]),
        ),
        case(
            "f8_big_bz2_f",
            ">f8",
            "bz2",
            json!(2),
            'F',
            "1.5",
            Some([0, 2]),
        ),
        case("c8_zlib", "<c8", "zlib", json!(1), 'C', "0", None),
        case(
            "c16_blosc_f",
            "<c16",
            "blosc",
            blosc("lz4hc", 4, 1),
            'F',
            "0",
            Some([1, 1]),
        ),
        case("s4_none", "|S4", "none", Value::Null, 'C', "null", None),
        case("u3_zlib_f", "<U3", "zlib", json!(1), 'F', "null", None),
        case("v3_bz2", "|V3", "bz2", json!(4), 'C', "null", None),
    ]
}

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
}

/// The little-endian bytes of one element of `dtype` made from `x`.
fn element_le(dtype: &str, x: u64) -> Vec<u8> {
    let f = (x % 200_000) as f64 / 100.0 - 1000.0;
    match &dtype[1..] {
        "b1" => vec![(x & 1) as u8],
        "i1" | "u1" => vec![x as u8],
        "i2" | "u2" => (x as u16).to_le_bytes().to_vec(),
        "i4" | "u4" => (x as u32).to_le_bytes().to_vec(),
        "i8" | "u8" => x.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes().to_vec(),
        "f2" => half::f16::from_f64(f).to_le_bytes().to_vec(),
        "f4" => (f as f32).to_le_bytes().to_vec(),
        "f8" => f.to_le_bytes().to_vec(),
        "c8" => [(f as f32).to_le_bytes(), (-f as f32 / 3.0).to_le_bytes()].concat(),
        "c16" => [f.to_le_bytes(), (f * 7.0).to_le_bytes()].concat(),
        "S4" => {
            let n = (x % 5) as usize;
            (0..4)
                .map(|i| {
                    if i < n {
                        b'a' + ((x >> (5 * i)) % 26) as u8
                    } else {
                        0
                    }
                })
                .collect()
        }
        "V3" => x.to_le_bytes()[..3].to_vec(),
        "U3" => {
            let s = ['é', 'z', '€', 'q', '1'];
            (0..3)
                .flat_map(|i| (s[((x >> (3 * i)) % 5) as usize] as u32).to_le_bytes())
                .collect()
        }
        other => panic!("no values for {other}"),
    }
}

/// `le` stored in `dtype`'s byte order (components of complex numbers swap alone).
fn stored(dtype: &str, le: &[u8]) -> Vec<u8> {
    if !dtype.starts_with('>') {
        return le.to_vec();
    }
    let part = match &dtype[1..] {
        "c8" => 4,
        "c16" => 8,
        _ => le.len(),
    };
    le.chunks(part)
        .flat_map(|c| c.iter().rev().copied().collect::<Vec<u8>>())
        .collect()
}

/// The little-endian bytes of `case`'s fill value.
fn fill_le(case: &Case) -> Vec<u8> {
    let size = parse_v2_dtype(case.dtype).unwrap().0.fixed_size().unwrap();
    let f: Option<f64> = match case.fill {
        "NaN" => Some(f64::NAN),
        "-Infinity" => Some(f64::NEG_INFINITY),
        "null" => return vec![0; size],
        "true" => return vec![1],
        t => Some(t.parse().unwrap()),
    };
    let f = f.unwrap();
    match &case.dtype[1..] {
        "f2" => half::f16::from_f64(f).to_le_bytes().to_vec(),
        "f4" => (f as f32).to_le_bytes().to_vec(),
        "f8" => f.to_le_bytes().to_vec(),
        "c8" => [(f as f32).to_le_bytes(), 0f32.to_le_bytes()].concat(),
        "c16" => [f.to_le_bytes(), 0f64.to_le_bytes()].concat(),
        _ => (f as i64).to_le_bytes()[..size].to_vec(),
    }
}

/// Compresses a chunk as the v1 `compression` names it (blosc through floe's codec,
/// zlib and bz2 through flate2 and bzip2 directly).
fn compress(case: &Case, raw: Vec<u8>) -> Vec<u8> {
    match case.compression {
        "none" => raw,
        "zlib" => {
            let level = case.opts.as_u64().unwrap() as u32;
            let mut e =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        }
        "bz2" => {
            let level = case.opts.as_u64().unwrap() as u32;
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(level));
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        }
        "blosc" => {
            let dt = parse_v2_dtype(case.dtype).unwrap().0;
            let mut config = case.opts.clone();
            config["blocksize"] = json!(0);
            let j = json!({"name": "numcodecs.blosc", "configuration": config});
            let Some(Codec::BytesToBytes(c)) = codec_from_json(&j, &dt).unwrap() else {
                panic!("blosc is bytes -> bytes")
            };
            c.encode(raw).unwrap()
        }
        other => panic!("{other}"),
    }
}

/// Writes `case` as a v1 store at `dir`; returns the array's little-endian C-order
/// bytes (the fill value where a chunk is missing).
fn write_v1(dir: &Path, case: &Case, seed: u64) -> Vec<u8> {
    std::fs::create_dir_all(dir).unwrap();
    let meta = format!(
        r#"{{
    "chunks": [{}, {}],
    "compression": "{}",
    "compression_opts": {},
    "dtype": "{}",
    "fill_value": {},
    "order": "{}",
    "shape": [{}, {}],
    "zarr_format": 1
}}"#,
        CHUNKS[0],
        CHUNKS[1],
        case.compression,
        case.opts,
        case.dtype,
        case.fill,
        case.order,
        SHAPE[0],
        SHAPE[1]
    );
    std::fs::write(dir.join("meta"), meta).unwrap();
    let attrs =
        json!({"name": case.name, "seed": seed, "list": [1, 2.5, "x"], "nested": {"a": null}});
    std::fs::write(
        dir.join("attrs"),
        serde_json::to_vec_pretty(&attrs).unwrap(),
    )
    .unwrap();

    let mut r = Lcg(seed);
    let values: Vec<Vec<u8>> = (0..SHAPE[0] * SHAPE[1])
        .map(|_| element_le(case.dtype, r.next()))
        .collect();
    let size = values[0].len();
    let mut expected = Vec::new();
    let fill = fill_le(case);
    for i in 0..SHAPE[0] {
        for j in 0..SHAPE[1] {
            let chunk = [i / CHUNKS[0], j / CHUNKS[1]];
            if case.missing == Some(chunk) {
                expected.extend_from_slice(&fill);
            } else {
                expected.extend_from_slice(&values[i * SHAPE[1] + j]);
            }
        }
    }
    for ci in 0..SHAPE[0].div_ceil(CHUNKS[0]) {
        for cj in 0..SHAPE[1].div_ceil(CHUNKS[1]) {
            if case.missing == Some([ci, cj]) {
                continue;
            }
            let mut raw = vec![0u8; CHUNKS[0] * CHUNKS[1] * size];
            for a in 0..CHUNKS[0] {
                for b in 0..CHUNKS[1] {
                    let (i, j) = (ci * CHUNKS[0] + a, cj * CHUNKS[1] + b);
                    if i >= SHAPE[0] || j >= SHAPE[1] {
                        continue; // outside the array: undefined, left zero
                    }
                    let pos = match case.order {
                        'C' => a * CHUNKS[1] + b,
                        _ => b * CHUNKS[0] + a,
                    };
                    raw[pos * size..(pos + 1) * size]
                        .copy_from_slice(&stored(case.dtype, &values[i * SHAPE[1] + j]));
                }
            }
            std::fs::write(dir.join(format!("{ci}.{cj}")), compress(case, raw)).unwrap();
        }
    }
    expected
}

fn store_at(dir: &Path) -> Arc<dyn Store> {
    Arc::new(FilesystemStore::open_read_only(dir).unwrap())
}

async fn read_le(store: Arc<dyn Store>, path: &str) -> Result<Vec<u8>, ZarrError> {
    let a = Array::open(store, path).await?;
    a.read_region_le_bytes(&ArraySubset::full(&[SHAPE[0] as u64, SHAPE[1] as u64]))
        .await
}

/// Writes every fixture under `root`; returns (name, expected bytes).
fn write_all(root: &Path) -> Vec<(String, Vec<u8>)> {
    cases()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                c.name.to_string(),
                write_v1(&root.join(c.name), c, 7 + i as u64),
            )
        })
        .collect()
}

#[tokio::test]
async fn v1_stores_read_as_written_and_as_zarr2_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1");
    let fixtures = write_all(&v1);
    // floe reads what the fixtures hold, attributes included.
    for (name, want) in &fixtures {
        let store = store_at(&v1.join(name));
        let got = read_le(store.clone(), "")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(got == *want, "{name}: values differ from the fixture");
        let a = Array::open(store, "").await.unwrap();
        assert_eq!(a.attributes()["name"], json!(name));
        assert_eq!(a.attributes()["list"], json!([1, 2.5, "x"]));
        assert_eq!(a.zarr_format(), floe::zarr::ZarrFormat::V1);
    }
    let f = Array::open(store_at(&v1.join("i4_zlib_f")), "")
        .await
        .unwrap();
    assert_eq!(f.metadata().codecs[0]["name"], "transpose");
    assert_eq!(f.metadata().codecs[2]["name"], "numcodecs.zlib");

    // zarr-python 2.18 reads the same after migrate_1to2 on a copy.
    let Some(py2) = common::require(common::pyzarr2(), "FLOE_PYZARR2 (zarr-python 2.18)") else {
        return;
    };
    let out = dir.path().join("zarr2");
    let mut args = vec!["migrate-v1".to_string(), out.to_str().unwrap().to_string()];
    args.extend(
        fixtures
            .iter()
            .map(|(n, _)| v1.join(n).to_str().unwrap().to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_py(&py2, &args);
    let manifest: Vec<Value> =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest.len(), fixtures.len());
    for (e, (name, _)) in manifest.iter().zip(&fixtures) {
        let zarr2 = std::fs::read(out.join(e["expected"].as_str().unwrap())).unwrap();
        let store = store_at(&v1.join(name));
        let floe = read_le(store.clone(), "").await.unwrap();
        assert!(
            floe == zarr2,
            "{name}: floe and zarr 2.18 read different values"
        );
        let a = Array::open(store, "").await.unwrap();
        assert_eq!(
            Value::Object(a.attributes().clone()),
            e["attributes"],
            "{name}"
        );
    }
}

#[tokio::test]
async fn v1_import_reads_back_through_floe_and_icechunk() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1");
    let fixtures = write_all(&v1);
    let repo_dir = dir.path().join("repo");
    std::fs::create_dir_all(&repo_dir).unwrap();
    let repo = Repository::create(Arc::new(LocalStorage::new(&repo_dir).unwrap()), None)
        .await
        .unwrap();
    let session = repo.writable_session("main").await.unwrap();
    for (name, _) in &fixtures {
        let dest = NodePath::new(&format!("/{name}")).unwrap();
        let summary = import_zarr(&session, store_at(&v1.join(name)).as_ref(), &dest, None)
            .await
            .unwrap();
        assert_eq!(summary.arrays, 1, "{name}");
    }
    session.commit("import v1 stores").await.unwrap();
    let store = common::main_store(&repo_dir, &[]).await;
    for (name, want) in &fixtures {
        let got = read_le(store.clone(), name).await.unwrap();
        assert!(got == *want, "{name}: imported values differ");
        let a = Array::open(store.clone(), name).await.unwrap();
        assert_eq!(a.attributes()["name"], json!(name));
    }
    // Imported codecs: blosc stays blosc, zlib and bz2 become numcodecs codecs, F
    // order a transpose.
    let b = Array::open(store.clone(), "u4_bz2_f").await.unwrap();
    let names: Vec<&str> = b
        .metadata()
        .codecs
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["transpose", "bytes", "numcodecs.bz2"]);

    // Icechunk 2.x reads the imported arrays as zarr 2.18 reads the v1 originals.
    let Some(py2) = common::require(common::pyzarr2(), "FLOE_PYZARR2 (zarr-python 2.18)") else {
        return;
    };
    let Some(py312) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let out = dir.path().join("zarr2");
    let mut args = vec!["migrate-v1".to_string(), out.to_str().unwrap().to_string()];
    args.extend(
        fixtures
            .iter()
            .map(|(n, _)| v1.join(n).to_str().unwrap().to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_py(&py2, &args);
    let got = run_py(
        &py312,
        &[
            "verify-icechunk",
            repo_dir.to_str().unwrap(),
            "",
            out.to_str().unwrap(),
        ],
    );
    assert!(got.contains(&format!("ok {}", fixtures.len())), "{got}");
}

fn floe(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(args)
        .env_remove("FLOE_LOG")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn v1_cli_ls_cat_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("spec_example");
    let c = case(
        "spec_example",
        "<i4",
        "zlib",
        json!(1),
        'C',
        "42",
        Some([1, 1]),
    );
    let want = write_v1(&v1, &c, 1);
    let want: Vec<i32> = want
        .chunks(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let v1s = v1.to_str().unwrap();

    let (ok, out, err) = floe(&["ls", v1s, "--json"]);
    assert!(ok, "{err}");
    let node: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(node["path"], "/");
    assert_eq!(node["metadata"]["shape"], json!([7, 9]));
    assert_eq!(node["metadata"]["attributes"]["name"], "spec_example");

    let (ok, out, err) = floe(&["cat", v1s, "/", "--format", "json", "--region", "3:5,4:6"]);
    assert!(ok, "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    let at = |i: usize, j: usize| json!(want[i * 9 + j]);
    assert_eq!(got, json!([[at(3, 4), at(3, 5)], [at(4, 4), at(4, 5)]]));
    // The missing chunk (1, 1) reads as the fill value.
    assert_eq!(got[0][0], json!(42));

    let repo = dir.path().join("repo");
    let repos = repo.to_str().unwrap();
    assert!(floe(&["init", repos]).0);
    let (ok, _, err) = floe(&["import", "zarr", v1s, repos, "-m", "v1"]);
    assert!(!ok && err.contains("--path"), "{err}");
    let (ok, _, err) = floe(&["import", "zarr", v1s, repos, "--path", "/old", "-m", "v1"]);
    assert!(ok, "{err}");
    let (ok, out, err) = floe(&["cat", repos, "/old", "--format", "json"]);
    assert!(ok, "{err}");
    let all: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(all[6][8], json!(want[6 * 9 + 8]));
    assert_eq!(all[4][5], json!(42));
}

/// Writes a v1 `<i4` store of shape [3, 4] (one chunk) with `meta` text `meta` and
/// chunk `0.0` bytes `chunk`.
fn bad_store(dir: &Path, meta: &str, chunk: Option<Vec<u8>>) -> Arc<dyn Store> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("meta"), meta).unwrap();
    std::fs::write(dir.join("attrs"), "{}").unwrap();
    if let Some(c) = chunk {
        std::fs::write(dir.join("0.0"), c).unwrap();
    }
    store_at(dir)
}

/// Reads the whole array at the root of `store`.
async fn read_whole(store: Arc<dyn Store>) -> Result<Vec<u8>, ZarrError> {
    let a = Array::open(store, "").await?;
    a.read_region_le_bytes(&ArraySubset::full(a.shape())).await
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(9));
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn v1_bad_stores_fail_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let meta = |compression: &str, format: u32| {
        format!(
            r#"{{"chunks": [3, 4], "compression": "{compression}", "compression_opts": 1,
                "dtype": "<i4", "fill_value": 0, "order": "C", "shape": [3, 4],
                "zarr_format": {format}}}"#
        )
    };
    let open = |store: Arc<dyn Store>| async move { Array::open(store, "").await };

    // `zarr_format` other than 1.
    let err = open(bad_store(&dir.path().join("f2"), &meta("zlib", 2), None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ZarrError::InvalidMetadata { reason, .. } if reason.contains("`meta`") && reason.contains("not 1")),
        "{err}"
    );
    // An unknown compressor.
    let err = open(bad_store(&dir.path().join("lzf"), &meta("lzf", 1), None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ZarrError::UnsupportedExtension { name, .. } if name == "lzf"),
        "{err}"
    );
    // A chunk that decompresses to the wrong size.
    let short = bad_store(
        &dir.path().join("short"),
        &meta("zlib", 1),
        Some(zlib(&[0; 40])),
    );
    let err = read_whole(short).await.unwrap_err();
    assert!(
        matches!(&err, ZarrError::Chunk { key, source: CodecError::InvalidData { .. }, .. } if key == "0.0"),
        "{err}"
    );
    // A decompression bomb: 64 MiB of zeros in a chunk of 48 bytes fails without
    // inflating it.
    let bomb = bad_store(
        &dir.path().join("bomb"),
        &meta("zlib", 1),
        Some(zlib(&vec![0; 64 << 20])),
    );
    let err = read_whole(bomb).await.unwrap_err();
    assert!(
        matches!(&err, ZarrError::Chunk { key, source: CodecError::InvalidData { reason, .. }, .. }
            if key == "0.0" && reason.contains("more than 48 bytes")),
        "{err}"
    );
    // A truncated chunk.
    let mut cut = zlib(&[1; 48]);
    cut.truncate(cut.len() / 2);
    let err = read_whole(bad_store(
        &dir.path().join("cut"),
        &meta("zlib", 1),
        Some(cut),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ZarrError::Chunk { key, source: CodecError::InvalidData { .. }, .. } if key == "0.0"),
        "{err}"
    );
    // A `meta` key that is not v1 metadata at all (not JSON, or JSON without
    // `zarr_format`) is some other file: no node there, and a walk of a hierarchy
    // holding such a file is not disturbed.
    for (name, text) in [("junk", "{not json"), ("other", r#"{"title": "notes"}"#)] {
        let err = open(bad_store(&dir.path().join(name), text, None))
            .await
            .unwrap_err();
        assert!(matches!(&err, ZarrError::NodeNotFound { .. }), "{err}");
    }
    // Metadata of a v1 array that is malformed: a typed error naming `meta`.
    let err = open(bad_store(
        &dir.path().join("noshape"),
        r#"{"zarr_format": 1, "chunks": [2]}"#,
        None,
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ZarrError::InvalidMetadata { reason, .. } if reason.contains("`meta`") && reason.contains("`shape`")),
        "{err}"
    );
}
