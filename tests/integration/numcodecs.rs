//! The numcodecs codecs real archives use (`numcodecs.bz2`, `lzma`, `lz4`, `delta`,
//! `fixedscaleoffset`, `quantize`, `bitround`, `packbits`, `astype`, `adler32`,
//! `fletcher32`, `crc32`) against zarr-python (`tests/python/numcodecs_interop.py`):
//!
//! - zarr-python 2.18 writes a v2 array per codec (partial edge chunks, unwritten
//!   chunks, F order, big-endian); floe reads the values zarr 2.18 reads, imports
//!   the store into a repository, reads it back, and Icechunk 2.x reads the import;
//!   a flipped byte in a chunk of a checksum codec is a typed error naming the chunk.
//! - zarr-python 3 writes v3 arrays with `numcodecs.*` codecs; floe reads them.
//! - floe writes v3 arrays with each codec; zarr-python 3 reads them.
//!
//! Interpreters: `FLOE_PYZARR2` (zarr 2.18), `FLOE_PYTHON` (zarr 3),
//! `FLOE_PYTHON312` (icechunk 2.x); missing ones skip the test, except under
//! `CI=true`, where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use floe::format::NodePath;
use floe::ops::import_zarr;
use floe::storage::LocalStorage;
use floe::zarr::{
    Array, ArrayBuilder, ArraySubset, CodecError, DataType, FilesystemStore, RegionFormats, Store,
    ZarrError,
};
use floe::Repository;
use serde_json::{json, Value};

use crate::common;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/numcodecs_interop.py")
}

/// Runs the interop script with `py`, failing the test on a non-zero exit.
pub(crate) fn run_py(py: &Path, args: &[&str]) -> String {
    let out = Command::new(py)
        .arg(script())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.contains("WARN") && !l.contains(".rs:"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "numcodecs_interop.py {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    stdout
}

fn manifest(dir: &Path) -> Vec<Value> {
    let bytes = std::fs::read(dir.join("manifest.json")).expect("manifest.json");
    serde_json::from_slice::<Value>(&bytes)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap()
}

/// Reads every array of `dir`'s manifest from `store` (under `prefix`) with floe
/// and compares values (little-endian bytes) and attributes; returns the number of
/// arrays checked.
pub(crate) async fn check_manifest(store: Arc<dyn Store>, prefix: &str, dir: &Path) -> usize {
    let entries = manifest(dir);
    let mut failures = Vec::new();
    for e in &entries {
        let path = format!("{prefix}{}", e["path"].as_str().unwrap());
        let a = match Array::open(store.clone(), &path).await {
            Ok(a) => a,
            Err(err) => {
                failures.push(format!("{path}: open: {err}"));
                continue;
            }
        };
        let shape: Vec<u64> = serde_json::from_value(e["shape"].clone()).unwrap();
        let want = std::fs::read(dir.join(e["expected"].as_str().unwrap())).unwrap();
        match a.read_region_le_bytes(&ArraySubset::full(&shape)).await {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!(
                "{path}: values differ (first 16 bytes {:?} vs {:?})",
                &got[..got.len().min(16)],
                &want[..want.len().min(16)]
            )),
            Err(err) => failures.push(format!("{path}: read: {err}")),
        }
        if Value::Object(a.attributes().clone()) != e["attributes"] {
            failures.push(format!("{path}: attributes {:?}", a.attributes()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} arrays read wrongly:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
    entries.len()
}

#[tokio::test]
async fn zarr2_numcodecs_arrays_read_imported_and_read_by_icechunk() {
    let Some(py2) = common::require(common::pyzarr2(), "FLOE_PYZARR2 (zarr-python 2.18)") else {
        return;
    };
    let Some(py312) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    run_py(&py2, &["write-v2", dir.path().to_str().unwrap()]);
    let src: Arc<dyn Store> =
        Arc::new(FilesystemStore::open_read_only(dir.path().join("store.zarr")).unwrap());
    let n = check_manifest(src.clone(), "", dir.path()).await;
    assert_eq!(n, 17);
    // Element filters became array -> array codecs before `bytes`.
    let d = Array::open(src.clone(), "delta_astype").await.unwrap();
    assert_eq!(d.metadata().codecs[0]["name"], "numcodecs.delta");
    assert_eq!(d.metadata().codecs[2]["name"], "numcodecs.bz2");

    // Import into a repository, read back through floe, then through Icechunk 2.x.
    let repo_dir = dir.path().join("repo");
    std::fs::create_dir_all(&repo_dir).unwrap();
    let repo = Repository::create(Arc::new(LocalStorage::new(&repo_dir).unwrap()), None)
        .await
        .unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let summary = import_zarr(&session, src.as_ref(), &NodePath::new("/v2").unwrap(), None)
        .await
        .unwrap();
    assert_eq!(summary.arrays, 17);
    session.commit("import numcodecs arrays").await.unwrap();
    let store = common::main_store(&repo_dir, &[]).await;
    check_manifest(store, "v2/", dir.path()).await;
    let out = run_py(
        &py312,
        &[
            "verify-icechunk",
            repo_dir.to_str().unwrap(),
            "v2",
            dir.path().to_str().unwrap(),
        ],
    );
    assert!(out.contains("ok 17"), "{out}");

    // The command line: `floe ls` on the plain store, `floe import zarr` into a new
    // repository, `floe cat` of an imported array (the values floe read above).
    let floe = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(args)
            .env_remove("FLOE_LOG")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "floe {}: {err}", args.join(" "));
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = dir.path().join("store.zarr");
    let plain = plain.to_str().unwrap();
    let listing = floe(&["ls", plain]);
    assert!(listing.contains("numcodecs.lzma"), "{listing}");
    let cli_repo = dir.path().join("cli-repo");
    let cli_repo = cli_repo.to_str().unwrap();
    floe(&["init", cli_repo]);
    let out = floe(&["import", "zarr", plain, cli_repo, "-m", "numcodecs arrays"]);
    assert!(out.contains("17 array(s)"), "{out}");
    for name in ["fixedscaleoffset", "packbits", "lz4"] {
        let cat: Value = serde_json::from_str(&floe(&[
            "cat",
            cli_repo,
            &format!("/{name}"),
            "--format",
            "json",
        ]))
        .unwrap();
        let a = Array::open(src.clone(), name).await.unwrap();
        let direct = a
            .read_region_json(&ArraySubset::full(&[13, 11]))
            .await
            .unwrap();
        assert_eq!(cat, direct, "{name}");
    }

    // A flipped byte in a chunk of each checksum codec: a typed error naming the key.
    for name in ["adler32", "fletcher32", "crc32"] {
        let chunk = dir.path().join(format!("store.zarr/{name}/0.0"));
        let mut bytes = std::fs::read(&chunk).unwrap();
        let i = bytes.len() / 2;
        bytes[i] ^= 0x10;
        std::fs::write(&chunk, bytes).unwrap();
        let a = Array::open(src.clone(), name).await.unwrap();
        let err = a
            .read_region_le_bytes(&ArraySubset::full(&[13, 11]))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ZarrError::Chunk { key, source: CodecError::InvalidData { reason, .. }, .. }
                if key.ends_with("0.0") && reason.contains("checksum")),
            "{name}: {err}"
        );
    }
}

#[tokio::test]
async fn zarr3_numcodecs_arrays_read_by_floe() {
    let Some(py) = common::require(common::python(), "Python with zarr 3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    run_py(&py, &["write-v3", dir.path().to_str().unwrap()]);
    let src: Arc<dyn Store> =
        Arc::new(FilesystemStore::open_read_only(dir.path().join("store.zarr")).unwrap());
    assert_eq!(check_manifest(src, "", dir.path()).await, 13);
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

/// Values for a 13 x 11 array of `dt`: slowly varying for `smooth`, else spread.
fn values(dt: &DataType, smooth: bool, seed: u64) -> Vec<u8> {
    let mut r = Lcg(seed);
    let mut level = 1000i64;
    let mut out = Vec::new();
    for _ in 0..13 * 11 {
        let x = r.next();
        level += (x % 7) as i64 - 3;
        let f = (x % 100_000) as f64 / 100.0 - 500.0;
        match dt {
            DataType::Bool => out.push((x & 1) as u8),
            DataType::Int16 => out.extend_from_slice(&(x as i16).to_le_bytes()),
            DataType::Int32 if smooth => out.extend_from_slice(&(level as i32).to_le_bytes()),
            DataType::Int32 => out.extend_from_slice(&(x as i32).to_le_bytes()),
            DataType::Int64 if smooth => out.extend_from_slice(&level.to_le_bytes()),
            DataType::Int64 => out.extend_from_slice(&(x as i64).to_le_bytes()),
            DataType::UInt32 => out.extend_from_slice(&(x as u32).to_le_bytes()),
            DataType::Float32 => out.extend_from_slice(&(f as f32).to_le_bytes()),
            DataType::Float64 if smooth => {
                let v = 1000.0 + ((x % 1000) as f64 - 500.0) / 10.0;
                out.extend_from_slice(&v.to_le_bytes());
            }
            DataType::Float64 => out.extend_from_slice(&f.to_le_bytes()),
            other => panic!("no values for {other}"),
        }
    }
    out
}

#[tokio::test]
async fn floe_numcodecs_arrays_read_by_zarr_python() {
    let Some(py) = common::require(common::python(), "Python with zarr 3") else {
        return;
    };
    let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let nc = |name: &str, config: Value| json!({"name": format!("numcodecs.{name}"), "configuration": config});
    let cases: Vec<(&str, DataType, bool, Vec<Value>)> = vec![
        (
            "bz2",
            DataType::Int32,
            false,
            vec![le.clone(), nc("bz2", json!({"level": 5}))],
        ),
        (
            "lzma",
            DataType::Float64,
            false,
            vec![le.clone(), nc("lzma", json!({"preset": 1}))],
        ),
        (
            "lz4",
            DataType::Int64,
            false,
            vec![le.clone(), nc("lz4", json!({"acceleration": 1}))],
        ),
        (
            "delta",
            DataType::Int32,
            true,
            vec![
                nc("delta", json!({"dtype": "<i4"})),
                le.clone(),
                nc("zlib", json!({"level": 1})),
            ],
        ),
        (
            "delta_astype",
            DataType::Int64,
            true,
            vec![
                nc("delta", json!({"dtype": "<i8", "astype": "<i2"})),
                le.clone(),
            ],
        ),
        (
            "fixedscaleoffset",
            DataType::Float64,
            true,
            vec![
                nc(
                    "fixedscaleoffset",
                    json!({"offset": 1000, "scale": 10, "dtype": "<f8", "astype": "<u2"}),
                ),
                le.clone(),
                nc("bz2", json!({"level": 1})),
            ],
        ),
        (
            "quantize",
            DataType::Float32,
            false,
            vec![
                nc("quantize", json!({"digits": 2, "dtype": "<f4"})),
                le.clone(),
            ],
        ),
        (
            "bitround",
            DataType::Float32,
            false,
            vec![
                nc("bitround", json!({"keepbits": 7})),
                le.clone(),
                nc("lz4", json!({})),
            ],
        ),
        (
            "packbits",
            DataType::Bool,
            false,
            vec![nc("packbits", json!({})), json!({"name": "bytes"})],
        ),
        (
            "astype",
            DataType::Float64,
            false,
            vec![
                nc(
                    "astype",
                    json!({"encode_dtype": "<f4", "decode_dtype": "<f8"}),
                ),
                le.clone(),
            ],
        ),
        (
            "adler32",
            DataType::Int16,
            false,
            vec![le.clone(), nc("adler32", json!({}))],
        ),
        (
            "fletcher32",
            DataType::UInt32,
            false,
            vec![le.clone(), nc("fletcher32", json!({}))],
        ),
        (
            "crc32",
            DataType::Int32,
            false,
            vec![
                le.clone(),
                nc("lzma", json!({})),
                nc("crc32", json!({"location": "end"})),
            ],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(FilesystemStore::new(dir.path().join("store.zarr")).unwrap());
    std::fs::create_dir_all(dir.path().join("expected")).unwrap();
    let mut manifest = Vec::new();
    for (i, (name, dt, smooth, codecs)) in cases.into_iter().enumerate() {
        let a = ArrayBuilder::new(vec![13, 11], vec![5, 4], dt.clone())
            .codecs(codecs)
            .attributes(json!({"codec": name}).as_object().unwrap().clone())
            .create(store.clone(), name)
            .await
            .unwrap();
        let full = ArraySubset::full(&[13, 11]);
        a.write_region_from_bytes(&full, &values(&dt, smooth, i as u64))
            .await
            .unwrap();
        // What floe reads back (lossy codecs change values) is what zarr must read.
        let got = a.read_region_le_bytes(&full).await.unwrap();
        std::fs::write(dir.path().join(format!("expected/{name}.bin")), got).unwrap();
        manifest.push(
            json!({"path": name, "shape": [13, 11], "expected": format!("expected/{name}.bin"),
                             "attributes": {"codec": name}}),
        );
    }
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let out = run_py(&py, &["verify", dir.path().to_str().unwrap()]);
    assert!(out.contains("ok 13"), "{out}");
}
