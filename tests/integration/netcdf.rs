//! Real files end to end: netCDF4-python writes a NetCDF4 file, kerchunk makes
//! references to it, floe imports them and reads every variable with raw values
//! identical to what netCDF4-python reads with auto mask/scale off.

use crate::common;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::common::p;
use base64::Engine;
use floe::ops::import_kerchunk;
use floe::storage::LocalStorage;
use floe::zarr::RegionFormats;
use floe::zarr::{Array, ArraySubset, Store};
use floe::Repository;
use serde_json::Value;

/// Runs the fixture script; returns the expected values by variable path.
fn make_fixture(dir: &Path, url_prefix: Option<&str>) -> Option<BTreeMap<String, Value>> {
    let python = common::require(
        common::python(),
        "Python with netCDF4 and kerchunk (FLOE_PYTHON)",
    )?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/netcdf_kerchunk.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(dir);
    if let Some(prefix) = url_prefix {
        cmd.arg(prefix);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "fixture script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: BTreeMap<String, Value> =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    assert_eq!(expected.len(), 8, "variables: {:?}", expected.keys());
    Some(expected)
}

/// Creates a repository at `repo_dir` and imports the references at `refs` into a
/// writable session on `main` (not committed); checks the eight variables arrived.
async fn import_refs(
    repo_dir: &Path,
    refs: &Path,
) -> (Repository, floe::Session, floe::ops::KerchunkImportSummary) {
    let repo = Repository::create(Arc::new(LocalStorage::new(repo_dir).unwrap()), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let summary = import_kerchunk(&repo, &s, refs, &p("/"), None)
        .await
        .unwrap();
    assert_eq!(summary.arrays, 8);
    (repo, s, summary)
}

/// Reads every expected variable from `store` and compares raw little-endian bytes.
async fn check_values(store: Arc<dyn Store>, expected: &BTreeMap<String, Value>) {
    for (path, facts) in expected {
        let array = Array::open(Arc::clone(&store), path)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let shape: Vec<u64> = facts["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(array.shape(), &shape[..], "{path} shape");
        let got = array
            .read_region_le_bytes(&ArraySubset::full(array.shape()))
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let want = base64::engine::general_purpose::STANDARD
            .decode(facts["raw_b64"].as_str().unwrap())
            .unwrap();
        assert_eq!(got, want, "{path}: raw values differ");
    }
}

#[tokio::test]
async fn netcdf4_via_kerchunk_reads_identical_raw_values() {
    let dir = tempfile::tempdir().unwrap();
    let Some(expected) = make_fixture(dir.path(), None) else {
        return;
    };
    let repo_dir = dir.path().join("repo");
    let (repo, s, summary) = import_refs(&repo_dir, &dir.path().join("refs.json")).await;
    assert!(summary.virtual_chunks >= 18, "{summary:?}");
    let id = s.commit("import sample.nc").await.unwrap();
    assert_eq!(repo.ancestry(id).await.unwrap().len(), 2, "one snapshot");

    let data_prefix = format!("file://{}/", dir.path().join("data").display());
    let store = common::main_store(&repo_dir, std::slice::from_ref(&data_prefix)).await;
    check_values(Arc::clone(&store), &expected).await;
    // Metadata carried over: attributes, dimension names, subgroup attributes.
    let temp = Array::open(Arc::clone(&store), "temperature")
        .await
        .unwrap();
    assert_eq!(temp.attributes()["units"], "K");
    assert_eq!(
        temp.dimension_names().unwrap(),
        &[
            Some("time".to_string()),
            Some("lat".to_string()),
            Some("lon".to_string())
        ]
    );
    let counts = Array::open(Arc::clone(&store), "counts").await.unwrap();
    assert_eq!(counts.attributes()["scale_factor"], 0.5);
    let sub: Value =
        serde_json::from_slice(&store.get("forecast/zarr.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(sub["attributes"]["source"], "model");

    // Unauthorized: reading a virtual chunk fails and names the prefix.
    let store = common::main_store(&repo_dir, &[]).await;
    let temp = Array::open(Arc::clone(&store), "temperature")
        .await
        .unwrap();
    let err = temp.read_all::<f32>().await.unwrap_err().to_string();
    assert!(
        err.contains("not authorized") && err.contains("sample.nc"),
        "{err}"
    );

    // Modifying the source after import makes reads fail with the checksum error.
    let nc = dir.path().join("data/sample.nc");
    common::touch_future(&nc);
    let store = common::main_store(&repo_dir, &[data_prefix]).await;
    let temp = Array::open(Arc::clone(&store), "temperature")
        .await
        .unwrap();
    let err = temp.read_all::<f32>().await.unwrap_err().to_string();
    assert!(
        err.contains("checksum mismatch") && err.contains("sample.nc"),
        "{err}"
    );
}

#[tokio::test]
async fn netcdf4_on_s3_with_authorized_prefixes() {
    let Some(base) = common::s3_url("netcdf") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{base}/data/");
    let Some(expected) = make_fixture(dir.path(), Some(&prefix)) else {
        return;
    };
    // Upload the NetCDF file to the S3 test server.
    let bytes = std::fs::read(dir.path().join("data/sample.nc")).unwrap();
    let data = floe::storage::create_storage(&format!("{base}/data"), None).unwrap();
    data.put("sample.nc", bytes::Bytes::from(bytes))
        .await
        .unwrap();
    // Refs point to s3://; the file on disk is removed so nothing can read it locally.
    std::fs::remove_file(dir.path().join("data/sample.nc")).unwrap();

    let repo_dir = dir.path().join("repo");
    let (_repo, s, summary) = import_refs(&repo_dir, &dir.path().join("refs.json")).await;
    let bucket = base.trim_start_matches("s3://").split('/').next().unwrap();
    assert_eq!(summary.containers_added, vec![format!("s3://{bucket}/")]);
    s.commit("import from s3").await.unwrap();

    check_values(
        common::main_store(&repo_dir, std::slice::from_ref(&prefix)).await,
        &expected,
    )
    .await;

    // Refs outside the authorized prefixes are refused.
    let store = common::main_store(&repo_dir, &[format!("{base}/elsewhere/")]).await;
    let temp = Array::open(Arc::clone(&store), "temperature")
        .await
        .unwrap();
    let err = temp.read_all::<f32>().await.unwrap_err().to_string();
    assert!(
        err.contains("not authorized") && err.contains("s3://"),
        "{err}"
    );

    // Replacing the object on the server changes its etag: reads fail.
    let mut changed = std::fs::read(dir.path().join("expected.json")).unwrap();
    changed.extend_from_slice(b"changed");
    data.put("sample.nc", bytes::Bytes::from(changed))
        .await
        .unwrap();
    let store = common::main_store(&repo_dir, &[prefix]).await;
    let temp = Array::open(Arc::clone(&store), "temperature")
        .await
        .unwrap();
    let err = temp.read_all::<f32>().await.unwrap_err().to_string();
    assert!(err.contains("checksum mismatch"), "{err}");
}

/// Runs the `floe` binary; returns stdout, panicking with stderr on failure.
fn floe(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "floe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn netcdf4_via_kerchunk_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let Some(expected) = make_fixture(dir.path(), None) else {
        return;
    };
    let repo = dir.path().join("repo").display().to_string();
    let refs = dir.path().join("refs.json").display().to_string();
    floe(&["init", &repo]);
    floe(&["import", "kerchunk", &refs, &repo, "-m", "import sample.nc"]);
    let log = String::from_utf8(floe(&["log", &repo, "--json"])).unwrap();
    assert_eq!(
        log.lines().count(),
        2,
        "one commit on top of the initial snapshot"
    );
    let prefix = format!("file://{}/", dir.path().join("data").display());
    for (path, facts) in &expected {
        let raw = floe(&[
            "cat",
            &repo,
            path,
            "--format",
            "raw",
            "--allow-virtual",
            &prefix,
        ]);
        let want = base64::engine::general_purpose::STANDARD
            .decode(facts["raw_b64"].as_str().unwrap())
            .unwrap();
        assert_eq!(raw, want, "{path}: raw values differ");
    }
    // Without --allow-virtual, reading a virtual chunk fails with one line naming it.
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["cat", &repo, "temperature"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("--allow-virtual"), "{err}");
}
