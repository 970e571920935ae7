//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bytes::Bytes;
use floe::format::NodePath;
use floe::session::ArrayDefinition;
use floe::zarr::RegionFormats;

/// Whether the tests run in CI (`CI=true`), where missing prerequisites are failures.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Reports a missing prerequisite: panics in CI, otherwise prints a skip note and
/// returns `None`.
pub fn require<T>(what: Option<T>, name: &str) -> Option<T> {
    if what.is_none() {
        if in_ci() {
            panic!("{name} is required when CI=true but is not available");
        }
        eprintln!("SKIPPED: {name} is not available (set it up with .ci/run)");
    }
    what
}

/// Runs the Python `code` (given with `-c`) with `args` in the interpreter `py` and
/// returns its output. Once `code` has run, the process flushes its output and leaves
/// without the interpreter's shutdown: Icechunk 2.3.0's extension sometimes crashes
/// with SIGSEGV at exit after printing correct results. An exception in `code` still
/// ends the process with a non-zero status.
pub fn run_python_code(py: &Path, code: &str, args: &[&str]) -> Output {
    let code = format!(
        "{code}\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_sys.stderr.flush()\n_os._exit(0)\n"
    );
    Command::new(py)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()))
}

/// [`run_python_code`], panicking with the process's status, stdout and stderr
/// unless it exits 0; its stdout.
pub fn python_stdout(py: &Path, code: &str, args: &[&str]) -> String {
    let out = run_python_code(py, code, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{}",
        py.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The Python interpreter with zarr 3 and icechunk 1.x (env `FLOE_PYTHON`, or the
/// default location .ci/run installs to).
pub fn python() -> Option<PathBuf> {
    python_from("FLOE_PYTHON", "py311")
}

/// The Python 3.12 interpreter with icechunk 2.x (env `FLOE_PYTHON312`).
pub fn python312() -> Option<PathBuf> {
    python_from("FLOE_PYTHON312", "py312")
}

/// The Python 3.11 interpreter with zarr-python 2.18 and numcodecs 0.15 (env
/// `FLOE_PYZARR2`): the independent reader and writer of Zarr v1/v2 stores.
pub fn pyzarr2() -> Option<PathBuf> {
    python_from("FLOE_PYZARR2", "pyzarr2")
}

fn python_from(var: &str, venv: &str) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(var) {
        let p = PathBuf::from(p);
        if p.exists() {
            return Some(p);
        }
    }
    let dir = std::env::var("FLOE_VENV_DIR").unwrap_or_else(|_| "/opt/floe-py".into());
    let p = PathBuf::from(dir).join(venv).join("bin/python");
    p.exists().then_some(p)
}

/// The `zarr.json` of a little-endian, uncompressed array (bytes codec only).
pub fn array_json(shape: &[u64], chunks: &[u64], dtype: &str, fill: serde_json::Value) -> Bytes {
    let meta = serde_json::json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    });
    Bytes::from(serde_json::to_vec(&meta).unwrap())
}

/// The `zarr.json` of a group with attributes.
pub fn group_json(attrs: serde_json::Value) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "zarr_format": 3, "node_type": "group", "attributes": attrs
        }))
        .unwrap(),
    )
}

/// The array definition of an uncompressed array.
pub fn array_def(path: &str, shape: &[u64], chunks: &[u64], dtype: &str) -> ArrayDefinition {
    floe::session::array_definition(
        &NodePath::new(path).unwrap(),
        array_json(shape, chunks, dtype, serde_json::json!(0)),
    )
    .unwrap()
}

/// A node path.
pub fn p(s: &str) -> NodePath {
    NodePath::new(s).unwrap()
}

/// The bucket of the S3 test server (`FLOE_TEST_S3_BUCKET`); the endpoint and
/// credentials come from the standard `AWS_*` variables (`AWS_ENDPOINT_URL`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`).
/// Panics when missing and `CI=true`; otherwise `None` (test skipped).
pub fn s3_bucket() -> Option<String> {
    require(
        std::env::var("FLOE_TEST_S3_BUCKET")
            .ok()
            .filter(|b| !b.is_empty()),
        "the S3 test server (FLOE_TEST_S3_BUCKET and AWS_* variables)",
    )
}

/// A fresh, unique `s3://bucket/prefix` URL on the S3 test server.
pub fn s3_url(test: &str) -> Option<String> {
    let bucket = s3_bucket()?;
    Some(format!("s3://{bucket}/{test}-{:016x}", rand_u64()))
}

fn rand_u64() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    t ^ (u64::from(std::process::id()) << 32)
}

/// Moves a file's modification time 10 seconds into the future, as an edit would
/// (without depending on the file system's time granularity).
pub fn touch_future(path: &std::path::Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(later).unwrap();
}

/// The Zarr store of a read-only session on `main` of the local repository at
/// `repo_dir`, with virtual chunk reads authorized under `prefixes`.
pub async fn main_store(
    repo_dir: &std::path::Path,
    prefixes: &[String],
) -> std::sync::Arc<dyn floe::zarr::Store> {
    let opts = floe::OpenOptions::default()
        .virtual_access(floe::virtual_refs::VirtualAccess::prefixes(prefixes).unwrap());
    let storage = std::sync::Arc::new(floe::storage::LocalStorage::new(repo_dir).unwrap());
    let repo = floe::Repository::open_with(storage, opts).await.unwrap();
    let s = repo
        .readonly_session(&floe::VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    std::sync::Arc::new(s.store())
}

/// Reads the whole array at `path` and returns the error it fails with.
pub async fn read_error(store: &std::sync::Arc<dyn floe::zarr::Store>, path: &str) -> String {
    let array = floe::zarr::Array::open(std::sync::Arc::clone(store), path)
        .await
        .unwrap();
    let all = floe::zarr::ArraySubset::full(array.shape());
    array
        .read_region_le_bytes(&all)
        .await
        .unwrap_err()
        .to_string()
}

/// The snapshot ids of `tip`'s history, newest first.
pub async fn history(repo: &floe::Repository, tip: floe::SnapshotId) -> Vec<floe::SnapshotId> {
    repo.ancestry(tip)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect()
}

/// A new spec-1 repository on `storage` with `config` (the default when `None`),
/// for the tests about spec-1 behaviour (ref files, `config.yaml`, Icechunk 1.x):
/// [`floe::Repository::create`] makes spec 2.
pub async fn create_spec1(
    storage: std::sync::Arc<dyn floe::storage::Storage>,
    config: Option<floe::format::config::RepositoryConfig>,
) -> floe::Repository {
    floe::Repository::create_with(
        storage,
        config,
        floe::format::SpecVersion::V1,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap()
}

/// Copies the directory `from` to `to` with `cp -a`, keeping modification times
/// (which garbage collection compares).
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}
pub mod fixture;
pub mod http;

/// Writes, through `store`, a root group and an uncompressed `uint8` array `a` of
/// `len` elements in chunks of 4 with fill value `fill`, no chunk written.
pub async fn write_u8_array(store: &floe::SessionStore, len: u64, fill: u8) {
    use floe::zarr::Store;
    store
        .set("zarr.json", group_json(serde_json::json!({})))
        .await
        .unwrap();
    store
        .set(
            "a/zarr.json",
            array_json(&[len], &[4], "uint8", serde_json::json!(fill)),
        )
        .await
        .unwrap();
}

/// Writes, through `store`, a root group and an uncompressed `uint8` array `a` of 8
/// elements in chunks of 4 with fill value `fill`, whose chunk 0 holds `chunk0`.
pub async fn write_small_array(store: &floe::SessionStore, fill: u8, chunk0: Bytes) {
    use floe::zarr::Store;
    write_u8_array(store, 8, fill).await;
    store.set("a/c/0", chunk0).await.unwrap();
}

/// A reqwest client for tests. reqwest is built without a bundled TLS provider
/// (`rustls-no-provider`), and `Client::new` panics until one is installed: floe
/// installs *ring* when it builds its own clients, so a test that builds a client
/// first (or runs alone) installs it here.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The names of the chunk objects of the local repository at `dir` (its `chunks/`
/// directory; empty when there is none).
pub fn chunk_files(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir.join("chunks"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Expires every snapshot older than now (20 ms from now, so that the last commit
/// is older) and collects garbage with that cut-off.
pub async fn expire_and_collect(repo: &floe::Repository) {
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let now = chrono::Utc::now();
    repo.expire_snapshots(now, floe::lifecycle::ExpireOptions::default())
        .await
        .unwrap();
    repo.garbage_collect(
        now,
        floe::lifecycle::GcOptions::default().allow_recent_cutoff(true),
        None,
    )
    .await
    .unwrap();
}
