//! Interoperability with the icechunk Python library, 1.1.x and 2.x, both ways
//! (`tests/python/icechunk_interop.py`). Each side dumps the same "facts" JSON from
//! its own reading of a repository: branches, tags (deleted ones absent), ancestry
//! (ids, parents, messages, metadata, times), and per snapshot the node tree, every
//! zarr.json, chunk kinds (inline / native / virtual), every array's values and the
//! diff its transaction log records, plus config.yaml's virtual chunk containers.
//!
//! - icechunk writes, floe reads: icechunk 1.1.x and 2.x build spec-1 repositories
//!   (nested groups with attributes; many data types and codecs incl. sharding,
//!   big-endian, transpose, blosc, strings, 0-d and empty arrays; inline, native and
//!   virtual chunks incl. both checksum kinds; split manifests; a resize, a node
//!   deletion, a chunk removed by writing fill values, an attributes-only commit; a
//!   second branch, tags, a deleted tag and branch). floe must read exactly what
//!   icechunk reads. Then floe commits into the repository and rewrites its
//!   config.yaml, and the same icechunk must read floe's facts.
//! - floe writes, icechunk reads: floe builds a repository with the same kinds of
//!   content and history (plus a kerchunk import); icechunk 1.1.x and 2.x must read
//!   floe's facts.
//! - Mixed writers: icechunk 2.x commits to a floe repository while a floe session is
//!   open; floe reads icechunk's commit, the stale session rebases over it, floe
//!   commits again, and icechunk 1.1.x and 2.x read it all. The repository stays
//!   spec 1: no `repo` object, every format file with spec version byte 1.
//! - Spec 2 (icechunk 2.x's default): the same write-then-read comparison on a spec-2
//!   repository (with a moved group and compressed virtual locations); floe reads
//!   spec 2, commits to it, and icechunk 2.x reads floe's commit. floe writes spec-2
//!   repositories icechunk 2.x reads, and icechunk 2.x commits to them (mixed
//!   writers on spec 2).
//!
//! Interpreters come from `common::python()` / `common::python312()`; without them the
//! tests are skipped, except under `CI=true`, where they fail. Set `FLOE_INTEROP_KEEP`
//! to keep the work directories.

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use base64::Engine as _;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use floe::format::snapshot::NodeData;
use floe::format::SpecVersion;
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::zarr::RegionFormats;
use floe::zarr::{delete_node, Array, ArrayBuilder, ArraySubset, DataType, Group, Store};
use floe::{CommitOptions, Error, NodePath, OpenOptions, Repository, SnapshotId, VersionSelector};
use serde_json::{json, Map, Value};

/// The mtime given to the virtual chunk source, so last-modified checksums are exact.
const SOURCE_MTIME: u64 = 1_700_000_000;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/icechunk_interop.py")
}

/// Runs the interop script; panics with its output unless it exits 0.
fn run_py(py: &Path, args: &[&str]) -> String {
    run_py_spec(py, args, 1)
}

/// [`run_py`] with icechunk 2.x writing repositories of spec version `spec`.
pub(crate) fn run_py_spec(py: &Path, args: &[&str], spec: u8) -> String {
    let out = Command::new(py)
        .arg(script())
        .args(args)
        .env("FLOE_IC_SPEC_VERSION", spec.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // icechunk warns about local filesystem storage on stderr: keep only the rest.
    let stderr: String = stderr
        .lines()
        .filter(|l| {
            !l.contains("WARN") && !l.trim_start().starts_with("at ") && !l.contains(".rs:")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "{} icechunk_interop.py {} failed ({}):\n{stdout}\n{stderr}",
        py.display(),
        args.join(" "),
        out.status
    );
    stdout
}

/// A fresh temporary directory; kept (and its path printed) when `FLOE_INTEROP_KEEP`
/// is set, to look at the repositories and facts by hand.
fn workdir() -> tempfile::TempDir {
    let keep = std::env::var_os("FLOE_INTEROP_KEEP").is_some();
    let dir = tempfile::Builder::new()
        .prefix("floe-interop-")
        .disable_cleanup(keep)
        .tempdir()
        .unwrap();
    if keep {
        eprintln!("FLOE_INTEROP_KEEP: keeping {}", dir.path().display());
    }
    dir
}

pub(crate) fn file_prefix(dir: &Path) -> String {
    format!("file://{}/", dir.canonicalize().unwrap().display())
}

fn local(path: &Path) -> Arc<LocalStorage> {
    Arc::new(LocalStorage::new(path).unwrap())
}

async fn open_repo(path: &Path, data_prefix: &str) -> Repository {
    let opts =
        OpenOptions::default().virtual_access(VirtualAccess::prefixes([data_prefix]).unwrap());
    Repository::open_with(local(path), opts).await.unwrap()
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------
// The facts floe reads (the same JSON the Python script dumps from icechunk's reading)

fn kind_of(p: &ChunkPayload) -> &'static str {
    match p {
        ChunkPayload::Inline(_) => "inline",
        ChunkPayload::Native(_) => "native",
        ChunkPayload::Virtual(_) => "virtual",
    }
}

async fn session_nodes(session: &floe::Session) -> Map<String, Value> {
    let store: Arc<dyn Store> = Arc::new(session.store());
    let mut nodes = Map::new();
    for node in session.list_nodes().unwrap() {
        let path = node.path.as_str().to_string();
        let zarr_json: Value = serde_json::from_slice(&node.user_data)
            .unwrap_or_else(|e| panic!("{path}: zarr.json is not JSON: {e}"));
        let mut out = Map::new();
        match &node.node_data {
            NodeData::Group => {
                out.insert("node_type".into(), json!("group"));
            }
            NodeData::Array(a) => {
                out.insert("node_type".into(), json!("array"));
                let shape: Vec<u64> = a.shape.iter().map(|d| d.array_length).collect();
                out.insert("shape".into(), json!(shape));
                let mut chunks = Map::new();
                for (idx, payload) in session.chunk_refs(&node.path).await.unwrap() {
                    let key = idx.iter().map(u64::to_string).collect::<Vec<_>>().join("/");
                    chunks.insert(key, json!(kind_of(&payload)));
                }
                out.insert("chunks".into(), Value::Object(chunks));
                let array = Array::open(Arc::clone(&store), &path)
                    .await
                    .unwrap_or_else(|e| panic!("{path}: {e}"));
                assert_eq!(array.shape(), shape.as_slice(), "{path}: zarr.json shape");
                let full = ArraySubset::full(&shape);
                let values = if *array.data_type() == DataType::String {
                    let v: Vec<String> = array
                        .read_region(&full)
                        .await
                        .unwrap_or_else(|e| panic!("{path}: {e}"));
                    json!({ "strings": v })
                } else {
                    let v = array
                        .read_region_le_bytes(&full)
                        .await
                        .unwrap_or_else(|e| panic!("{path}: {e}"));
                    json!({ "le_b64": base64::engine::general_purpose::STANDARD.encode(v) })
                };
                out.insert("values".into(), values);
            }
        }
        out.insert("zarr_json".into(), zarr_json);
        nodes.insert(path, Value::Object(out));
    }
    nodes
}

/// Everything floe reads from a repository, in the Python script's facts format.
async fn floe_facts(repo: &Repository, deleted_branches: &[&str], deleted_tags: &[&str]) -> Value {
    let mut branches = Map::new();
    let mut tags = Map::new();
    let mut refs: Vec<(String, SnapshotId)> = Vec::new();
    for b in repo.list_branches().await.unwrap() {
        let id = repo.lookup_branch(&b).await.unwrap();
        branches.insert(b.clone(), json!(id.to_string()));
        refs.push((format!("branch.{b}"), id));
    }
    for t in repo.list_tags().await.unwrap() {
        let id = repo.lookup_tag(&t).await.unwrap();
        tags.insert(t.clone(), json!(id.to_string()));
        refs.push((format!("tag.{t}"), id));
    }
    for b in deleted_branches {
        assert!(!branches.contains_key(*b), "deleted branch {b} is listed");
        assert!(
            matches!(
                repo.lookup_branch(b).await,
                Err(Error::BranchNotFound { .. })
            ),
            "deleted branch {b} can be looked up"
        );
    }
    for t in deleted_tags {
        assert!(!tags.contains_key(*t), "deleted tag {t} is listed");
        assert!(
            matches!(repo.lookup_tag(t).await, Err(Error::TagDeleted { .. })),
            "deleted tag {t} does not report TagDeleted"
        );
    }
    let mut ancestry = Map::new();
    let mut infos = BTreeMap::new();
    for (name, id) in refs {
        let chain = repo.ancestry(id).await.unwrap();
        ancestry.insert(
            name,
            json!(chain.iter().map(|i| i.id.to_string()).collect::<Vec<_>>()),
        );
        for i in chain {
            infos.insert(i.id.to_string(), i);
        }
    }
    let mut snapshots = Map::new();
    for (id, info) in infos {
        let session = repo
            .readonly_session(&VersionSelector::Snapshot(info.id))
            .await
            .unwrap();
        let mut snap = json!({
            "parent_id": info.parent_id.map(|p| p.to_string()),
            "message": info.message,
            "metadata": info.metadata,
            "written_at_us": info.flushed_at.timestamp_micros(),
            "nodes": session_nodes(&session).await,
        });
        if let Some(parent) = info.parent_id {
            // What the commit's transaction log says.
            let diff = repo.diff(parent, info.id).await.unwrap();
            snap["diff_from_parent"] = serde_json::to_value(&diff).unwrap();
        }
        snapshots.insert(id, snap);
    }
    let mut containers: Vec<String> = repo
        .config()
        .virtual_chunk_containers()
        .unwrap()
        .into_iter()
        .map(|c| c.url_prefix)
        .collect();
    containers.sort();
    let mut db: Vec<&str> = deleted_branches.to_vec();
    db.sort_unstable();
    let mut dt: Vec<&str> = deleted_tags.to_vec();
    dt.sort_unstable();
    json!({
        "branches": branches,
        "tags": tags,
        "deleted_branches": db,
        "deleted_tags": dt,
        "ancestry": ancestry,
        "snapshots": snapshots,
        "virtual_chunk_containers": containers,
    })
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}...", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

fn json_diff(expected: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let keys: std::collections::BTreeSet<&String> = e.keys().chain(g.keys()).collect();
            for k in keys {
                let p = format!("{path}/{k}");
                match (e.get(k), g.get(k)) {
                    (Some(ev), Some(gv)) => json_diff(ev, gv, &p, out),
                    (Some(ev), None) => out.push(format!("{p}: missing (expected {})", short(ev))),
                    (None, Some(gv)) => out.push(format!("{p}: unexpected {}", short(gv))),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(e), Value::Array(g)) if e.len() == g.len() => {
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                json_diff(ev, gv, &format!("{path}[{i}]"), out);
            }
        }
        // Integers must stay integers and floats floats (MessagePack keeps the kind).
        (Value::Number(e), Value::Number(g))
            if e.is_f64() == g.is_f64()
                && (e.as_i64().zip(g.as_i64()).is_some_and(|(a, b)| a == b)
                    || e.as_u64().zip(g.as_u64()).is_some_and(|(a, b)| a == b)
                    || (e.is_f64() && e.as_f64() == g.as_f64())) => {}
        (e, g) if e == g => {}
        (e, g) => out.push(format!("{path}: expected {}, got {}", short(e), short(g))),
    }
}

/// Asserts that floe read what icechunk reported.
fn assert_same_facts(expected: &Value, got: &Value, what: &str) {
    let mut out = Vec::new();
    json_diff(expected, got, "", &mut out);
    let shown: Vec<&String> = out.iter().take(60).collect();
    assert!(
        out.is_empty(),
        "{what}: {} difference(s) between what icechunk reads and what floe reads:\n  {}",
        out.len(),
        shown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

/// Counts (snapshots, array reads) of a facts document, and checks it is not trivial.
fn facts_size(facts: &Value) -> (usize, usize) {
    let snaps = facts["snapshots"].as_object().unwrap();
    let arrays = snaps
        .values()
        .flat_map(|s| s["nodes"].as_object().unwrap().values())
        .filter(|n| n["node_type"] == "array")
        .count();
    (snaps.len(), arrays)
}

/// Asserts the repository at `dir` is spec 1: refs and no `repo` object, and every
/// snapshot, manifest and transaction file has spec version byte 1 and its file type.
/// Every file under `dir` (none when it does not exist).
fn walkdir_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

fn assert_spec1_files(dir: &Path) {
    assert_spec_files(dir, 1);
}

/// Checks the layout of a repository of spec `spec`: spec 1 has refs and no `repo`
/// object, and every format file has version byte 1; spec 2 has a `repo` object, no
/// refs, and format files of version 2 (or, written before an upgrade, 1).
fn assert_spec_files(dir: &Path, spec: u8) {
    if spec == 1 {
        assert!(
            !dir.join("repo").exists(),
            "a spec-2 `repo` object appeared"
        );
        assert!(dir.join("refs/branch.main/ref.json").is_file());
    } else {
        assert!(dir.join("repo").is_file(), "no `repo` object");
        let refs = walkdir_files(&dir.join("refs"));
        assert!(
            refs.is_empty(),
            "ref files in a spec-2 repository: {refs:?}"
        );
        assert!(
            !dir.join("config.yaml").exists(),
            "config.yaml in a spec-2 repository"
        );
    }
    let mut seen_spec = false;
    let mut counted = 0;
    for (sub, file_type) in [("snapshots", 1u8), ("manifests", 2), ("transactions", 4)] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            assert!(bytes.len() > 39, "{}: too short", path.display());
            assert_eq!(
                &bytes[..12],
                "ICE🧊CHUNK".as_bytes(),
                "{}: magic",
                path.display()
            );
            assert!(
                bytes[36] == 1 || (spec == 2 && bytes[36] == 2),
                "{}: spec version byte {}",
                path.display(),
                bytes[36]
            );
            seen_spec |= bytes[36] == spec;
            assert_eq!(bytes[37], file_type, "{}: file type byte", path.display());
            counted += 1;
        }
    }
    assert!(counted > 5, "too few format files in {}", dir.display());
    // Spec 2 may hold only spec-1 files, right after an upgrade.
    assert!(
        seen_spec || spec == 2,
        "no format file of spec {spec} in {}",
        dir.display()
    );
}

// ---------------------------------------------------------------------------------------
// icechunk writes, floe reads

async fn icechunk_writes_floe_reads(py: &Path, spec: u8) {
    let dir = workdir();
    let out = dir.path().join("out");
    run_py_spec(py, &["write", out.to_str().unwrap()], spec);
    let expected = read_json(&out.join("expected.json"));
    let repo_dir = out.join("repo");
    let repo = open_repo(&repo_dir, &file_prefix(&out.join("data"))).await;
    // The container icechunk wrote is in floe's view of config.yaml.
    let containers = repo.config().virtual_chunk_containers().unwrap();
    assert!(
        containers
            .iter()
            .any(|c| matches!(c.store, ContainerStore::LocalFileSystem(_))),
        "{containers:?}"
    );
    let got = floe_facts(&repo, &["doomed"], &["gone"]).await;
    assert_same_facts(
        &expected,
        &got,
        &format!("repository written by {}", py.display()),
    );
    let (snaps, arrays) = facts_size(&expected);
    assert!(
        snaps >= 5 && arrays >= 40,
        "too little was checked: {snaps} snapshots, {arrays} arrays"
    );
    if spec == 1 {
        assert_spec1_files(&repo_dir);
    } else {
        assert_eq!(repo.spec_version(), floe::format::SpecVersion::V2);
        assert!(repo_dir.join("repo").is_file());
    }

    // Each metadata file's header names its writer, Icechunk ("ic-<version>").
    use floe::repository::MetadataFile;
    let tip = repo.lookup_branch("main").await.unwrap();
    let manifest = repo.fetch_snapshot(&tip).await.unwrap().manifest_files[0].id;
    let mut files = vec![
        (MetadataFile::Snapshot(tip), "snapshot"),
        (MetadataFile::TransactionLog(tip), "transaction-log"),
        (MetadataFile::Manifest(manifest), "manifest"),
    ];
    if spec == 2 {
        files.push((MetadataFile::RepoInfo, "repo-info"));
    }
    for (file, kind) in files {
        let header = repo.file_header(file).await.unwrap();
        assert_eq!(header.file_type, kind);
        assert_eq!(header.app_name, "ic", "{header:?}");
        let version = header.app_version.clone().unwrap_or_default();
        assert_eq!(header.written_by, format!("ic-{version}"));
        assert_eq!(header.spec_version, format!("{spec}.0"), "{header:?}");
        assert_eq!(header.compression, "zstd");
    }

    // Time travel over icechunk's commit times: each commit of main is main as of then.
    for info in repo
        .ancestry(repo.lookup_branch("main").await.unwrap())
        .await
        .unwrap()
    {
        let at = VersionSelector::AsOf {
            branch: "main".into(),
            time: info.flushed_at,
        };
        assert_eq!(
            repo.resolve(&at).await.unwrap(),
            info.id,
            "{}",
            info.message
        );
    }

    // icechunk split the manifests of `/many`: floe read an array spread over several.
    let tip = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let many = tip.get_node(&NodePath::new("/many").unwrap()).unwrap();
    let n_manifests = many.array().map_or(0, |a| a.manifests.len());
    assert!(n_manifests >= 3, "/many has {n_manifests} manifests");

    if spec == 2 {
        // The moved group reads at its new path, and the move is in the log.
        let moved = tip.get_node(&NodePath::new("/g1/moved").unwrap()).unwrap();
        assert!(moved.is_group());
        assert!(tip.get_node(&NodePath::new("/g1/g2").unwrap()).is_err());
        let tip_id = repo.lookup_branch("main").await.unwrap();
        let log = repo.assets().fetch_transaction_log(&tip_id).await.unwrap();
        assert!(
            log.moved_nodes
                .iter()
                .any(|m| m.from.as_str() == "/g1/g2" && m.to.as_str() == "/g1/moved"),
            "{:?}",
            log.moved_nodes
        );
        // icechunk compressed virtual chunk locations: some manifest with virtual refs
        // carries a zstd dictionary (its magic number, 0xEC30A437 little-endian), and
        // floe read every location above.
        const ZSTD_DICT_MAGIC: [u8; 4] = [0x37, 0xA4, 0x30, 0xEC];
        let (mut compressed, mut plain) = (0, 0);
        for entry in std::fs::read_dir(repo_dir.join("manifests")).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            let manifest = floe::format::manifest::Manifest::decode(&bytes).unwrap();
            let virtual_refs = manifest
                .arrays
                .values()
                .flat_map(|refs| refs.values())
                .filter(|p| matches!(p, ChunkPayload::Virtual(_)))
                .count();
            if virtual_refs == 0 {
                continue;
            }
            let raw =
                floe::format::envelope::open(floe::format::envelope::FileType::Manifest, &bytes)
                    .unwrap();
            if raw.windows(4).any(|w| w == ZSTD_DICT_MAGIC) {
                compressed += 1;
            } else {
                plain += 1;
            }
        }
        assert!(
            compressed > 0,
            "no manifest with compressed virtual locations ({plain} with plain ones)"
        );
        eprintln!(
            "{} (spec 2): floe read {snaps} snapshots, {arrays} array states as icechunk does \
             ({compressed} manifests with compressed virtual locations)",
            py.display()
        );
    }

    // floe commits into the icechunk-made repository and rewrites its configuration
    // (config.yaml in spec 1, the repo object's in spec 2; keys floe does not know
    // are kept); the same icechunk reads it all back.
    let mut config = repo.config();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: "https://example.com/more/".into(),
        store: ContainerStore::Http,
    });
    repo.save_config(config).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let i32a = Array::open(st.clone(), "g1/i32").await.unwrap();
    i32a.write_region(&ArraySubset::new(vec![4, 0], vec![2, 7]), &[42i32; 14])
        .await
        .unwrap();
    let strs = Array::open(st.clone(), "strs").await.unwrap();
    strs.write_region(&ArraySubset::new(vec![0], vec![1]), &["floe ✓".to_string()])
        .await
        .unwrap();
    let a = ArrayBuilder::new(vec![3, 3], vec![2, 2], DataType::UInt32)
        .fill_value(json!(9))
        .create(st.clone(), "g1/from_floe")
        .await
        .unwrap();
    a.write_region(
        &ArraySubset::new(vec![0, 0], vec![2, 3]),
        &[1u32, 2, 3, 4, 5, 6],
    )
    .await
    .unwrap();
    let many = Array::open(st.clone(), "many").await.unwrap();
    many.write_region(&ArraySubset::new(vec![11, 0], vec![1, 2]), &[77u8, 78])
        .await
        .unwrap();
    delete_node(st.as_ref(), "flags").await.unwrap();
    s.commit_with(
        "floe commit on an icechunk repository",
        BTreeMap::from([
            ("by".to_string(), json!("floe")),
            ("n".to_string(), json!(-3)),
        ]),
        CommitOptions::default(),
    )
    .await
    .unwrap();
    let facts = floe_facts(&repo, &["doomed"], &["gone"]).await;
    let facts_path = out.join("floe.json");
    write_facts(&facts_path, &facts);
    assert_spec_files(&repo_dir, spec);
    let report = run_py(
        py,
        &[
            "verify",
            repo_dir.to_str().unwrap(),
            facts_path.to_str().unwrap(),
            &file_prefix(&out.join("data")),
        ],
    );
    eprintln!(
        "{}: floe read {snaps} snapshots, {arrays} array states as icechunk does; then {report}",
        py.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk1_writes_floe_reads() {
    if let Some(py) = common::require(common::python(), "Python with icechunk 1.1.x (FLOE_PYTHON)")
    {
        icechunk_writes_floe_reads(&py, 1).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk2_writes_floe_reads() {
    if let Some(py) = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    ) {
        icechunk_writes_floe_reads(&py, 1).await;
    }
}

/// Icechunk 2.3.0's default format: a spec-2 repository with the same content and
/// history (plus a moved group, compressed virtual locations, a deleted tag and
/// branch) reads in floe exactly as in icechunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk2_spec2_writes_floe_reads() {
    if let Some(py) = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    ) {
        icechunk_writes_floe_reads(&py, 2).await;
    }
}

// ---------------------------------------------------------------------------------------
// floe writes, icechunk reads

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn le_bytes_codec(endian: &str) -> Value {
    json!({"name": "bytes", "configuration": {"endian": endian}})
}

/// Deterministic pseudo-random values (a tiny LCG; no extra dependencies).
fn pseudo(seed: u64, n: usize) -> Vec<u64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 11
        })
        .collect()
}

struct FloeRepo {
    repo: Repository,
    repo_dir: PathBuf,
    data_prefix: String,
}

/// Builds a repository with floe: the same kinds of content and history as the
/// Python writer.
async fn build_floe_repo(root: &Path, spec: SpecVersion) -> FloeRepo {
    let data_dir = root.join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let src = data_dir.join("source.bin");
    let ints: Vec<u8> = (0..1024i32).flat_map(|i| i.to_le_bytes()).collect();
    std::fs::write(&src, ints).unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(SOURCE_MTIME);
    std::fs::File::options()
        .write(true)
        .open(&src)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let data_prefix = file_prefix(&data_dir);
    let src_url = format!("{data_prefix}source.bin");

    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: data_prefix.clone(),
        store: ContainerStore::LocalFileSystem(
            data_dir.canonicalize().unwrap().display().to_string(),
        ),
    });
    // Containers floe writes but does not use here: icechunk must still parse them.
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: "s3://some-bucket/prefix/".into(),
        store: ContainerStore::S3 {
            compatible: true,
            region: Some("us-east-1".into()),
            endpoint_url: Some("http://127.0.0.1:9".into()),
            anonymous: false,
            allow_http: true,
            force_path_style: true,
        },
    });
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: "https://example.com/data/".into(),
        store: ContainerStore::Http,
    });
    let repo_dir = root.join("repo");
    let storage = local(&repo_dir);
    Repository::create_with(storage.clone(), Some(config), spec, OpenOptions::default())
        .await
        .unwrap();
    let repo = open_repo(&repo_dir, &data_prefix).await;

    // Commit 1: groups with attributes and arrays of many kinds.
    let s = repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    Group::create(
        st.clone(),
        "",
        attrs(json!({"title": "interop", "writer": "floe"})),
    )
    .await
    .unwrap();
    Group::create(st.clone(), "g1", attrs(json!({"k": "v", "n": [1, 2, 3]})))
        .await
        .unwrap();
    Group::create(
        st.clone(),
        "g1/g2",
        attrs(json!({"deep": {"x": 1.5, "y": null}})),
    )
    .await
    .unwrap();
    Group::create(st.clone(), "tmp", attrs(json!({"doomed": true})))
        .await
        .unwrap();
    // Paths whose byte order differs from their component order: `/a-b` < `/a/b`.
    for name in ["a/b", "a-b", "a.b"] {
        let a = ArrayBuilder::new(vec![2], vec![2], DataType::Int8)
            .create(st.clone(), name)
            .await
            .unwrap();
        a.write_region(&ArraySubset::full(&[2]), &[1i8, -1])
            .await
            .unwrap();
    }

    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let i32a = ArrayBuilder::new(vec![10, 7], vec![4, 3], DataType::Int32)
        .fill_value(json!(-1))
        .codecs(vec![le_bytes_codec("little"), zstd.clone()])
        .create(st.clone(), "g1/i32")
        .await
        .unwrap();
    let v: Vec<i32> = pseudo(1, 70).iter().map(|&x| x as i32).collect();
    i32a.write_region(&ArraySubset::full(&[10, 7]), &v)
        .await
        .unwrap();

    let f64a = ArrayBuilder::new(vec![40, 30], vec![16, 16], DataType::Float64)
        .fill_value(json!("NaN"))
        .codecs(vec![le_bytes_codec("little")])
        .dimension_names(vec![Some("y".into()), Some("x".into())])
        .attributes(attrs(json!({"units": "K"})))
        .create(st.clone(), "f64")
        .await
        .unwrap();
    let mut v: Vec<f64> = pseudo(2, 1200)
        .iter()
        .map(|&x| (x % 100_000) as f64 / 7.0 - 5000.0)
        .collect();
    v[1] = f64::INFINITY;
    v[2] = f64::NEG_INFINITY;
    f64a.write_region(&ArraySubset::full(&[40, 30]), &v)
        .await
        .unwrap();

    let be = ArrayBuilder::new(vec![9], vec![4], DataType::Int16)
        .fill_value(json!(7))
        .codecs(vec![
            le_bytes_codec("big"),
            json!({"name": "gzip", "configuration": {"level": 5}}),
        ])
        .create(st.clone(), "g1/i16_be")
        .await
        .unwrap();
    let v: Vec<i16> = pseudo(3, 9).iter().map(|&x| x as i16).collect();
    be.write_region(&ArraySubset::full(&[9]), &v).await.unwrap();

    let sharded = ArrayBuilder::new(vec![20, 24], vec![16, 16], DataType::UInt16)
        .fill_value(json!(0))
        .codecs(vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [8, 8],
            "codecs": [le_bytes_codec("little")],
            "index_codecs": [le_bytes_codec("little"), {"name": "crc32c"}],
            "index_location": "end"}})])
        .create(st.clone(), "g1/g2/u16_sharded")
        .await
        .unwrap();
    let v: Vec<u16> = pseudo(4, 480).iter().map(|&x| x as u16).collect();
    sharded
        .write_region(&ArraySubset::full(&[20, 24]), &v)
        .await
        .unwrap();

    let transposed = ArrayBuilder::new(vec![5, 6], vec![3, 4], DataType::Float32)
        .fill_value(json!(0.5))
        .codecs(vec![
            json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
            le_bytes_codec("little"),
            zstd.clone(),
        ])
        .create(st.clone(), "g1/f32_t")
        .await
        .unwrap();
    let v: Vec<f32> = (0..30).map(|i| i as f32 * 1.25).collect();
    transposed
        .write_region(&ArraySubset::full(&[5, 6]), &v)
        .await
        .unwrap();

    let strs = ArrayBuilder::new(vec![5], vec![2], DataType::String)
        .fill_value(json!(""))
        .create(st.clone(), "strs")
        .await
        .unwrap();
    let v: Vec<String> = ["a", "héllo", "", "🧊 ice", "zz"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    strs.write_region(&ArraySubset::full(&[5]), &v)
        .await
        .unwrap();

    let flags = ArrayBuilder::new(vec![6], vec![4], DataType::Bool)
        .fill_value(json!(false))
        .create(st.clone(), "flags")
        .await
        .unwrap();
    flags
        .write_region(
            &ArraySubset::full(&[6]),
            &[true, false, true, true, false, true],
        )
        .await
        .unwrap();

    let c64 = ArrayBuilder::new(vec![3, 2], vec![2, 2], DataType::Complex64)
        .fill_value(json!([0.0, 0.0]))
        .codecs(vec![
            le_bytes_codec("little"),
            json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 3,
                "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}),
        ])
        .create(st.clone(), "c64")
        .await
        .unwrap();
    let v: Vec<num_complex::Complex<f32>> = (0..6)
        .map(|i| num_complex::Complex::new(i as f32 + 0.5, -(i as f32)))
        .collect();
    c64.write_region(&ArraySubset::full(&[3, 2]), &v)
        .await
        .unwrap();

    let scalar = ArrayBuilder::new(vec![], vec![], DataType::Float32)
        .fill_value(json!(0.0))
        .create(st.clone(), "scalar")
        .await
        .unwrap();
    scalar
        .write_region(&ArraySubset::full(&[]), &[2.5f32])
        .await
        .unwrap();

    // Chunks of exactly the inline threshold (512 bytes) and one byte more.
    for (name, n) in [("b512", 512u64), ("b513", 513)] {
        let a = ArrayBuilder::new(vec![n], vec![n], DataType::UInt8)
            .fill_value(json!(0))
            .codecs(vec![le_bytes_codec("little")])
            .create(st.clone(), name)
            .await
            .unwrap();
        let v: Vec<u8> = (0..n).map(|i| (i % 251) as u8 + 1).collect();
        a.write_region(&ArraySubset::full(&[n]), &v).await.unwrap();
    }

    let gone = ArrayBuilder::new(vec![4], vec![2], DataType::UInt8)
        .fill_value(json!(0))
        .create(st.clone(), "tmp/gone")
        .await
        .unwrap();
    gone.write_region(&ArraySubset::full(&[4]), &[0u8, 1, 2, 3])
        .await
        .unwrap();

    ArrayBuilder::new(vec![12], vec![4], DataType::Int32)
        .fill_value(json!(-5))
        .codecs(vec![le_bytes_codec("little")])
        .create(st.clone(), "virt")
        .await
        .unwrap();
    let virt = NodePath::new("/virt").unwrap();
    let vref = |offset: u64, checksum: Option<Checksum>| {
        Some(ChunkPayload::Virtual(VirtualChunkRef {
            location: src_url.clone(),
            offset,
            length: 16,
            checksum,
        }))
    };
    s.set_chunk_ref(&virt, &[0], vref(0, None)).unwrap();
    s.set_chunk_ref(
        &virt,
        &[1],
        vref(400, Some(Checksum::LastModified(SOURCE_MTIME as u32))),
    )
    .unwrap();
    // Virtual refs made by floe's kerchunk importer, into a file whose mtime is not a
    // whole second: the last-modified checksum must still pass icechunk's check.
    let kc_src = data_dir.join("kerchunk.bin");
    let kc: Vec<u8> = (100..108i32).flat_map(|i| i.to_le_bytes()).collect();
    std::fs::write(&kc_src, kc).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&kc_src)
        .unwrap()
        .set_modified(mtime + std::time::Duration::from_millis(500))
        .unwrap();
    let kc_url = format!("{data_prefix}kerchunk.bin");
    let refs = json!({"version": 1, "refs": {
        ".zgroup": r#"{"zarr_format": 2}"#,
        ".zattrs": r#"{"source": "kerchunk"}"#,
        "k/.zarray": json!({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<i4",
            "compressor": null, "filters": null, "fill_value": 0, "order": "C"}).to_string(),
        "k/0": [kc_url, 0, 16],
        "k/1": [kc_url, 16, 16],
    }});
    let refs_path = root.join("refs.json");
    std::fs::write(&refs_path, refs.to_string()).unwrap();
    floe::ops::import_kerchunk(
        &repo,
        &s,
        &refs_path,
        &NodePath::new("/imported").unwrap(),
        None,
    )
    .await
    .unwrap();
    let mut meta = BTreeMap::new();
    for (k, v) in [
        ("author", json!("floe")),
        ("n", json!(1)),
        ("pi", json!(3.25)),
        ("ok", json!(true)),
        ("none", Value::Null),
        ("list", json!([1, "two", [3.5]])),
        ("nested", json!({"a": {"b": "c"}})),
        ("unicode", json!("ü🧊")),
        ("empty", json!({})),
        ("whole", json!(2.0)),
        ("big", json!(i64::MAX)),
        ("neg", json!(-(1i64 << 40))),
    ] {
        meta.insert(k.to_string(), v);
    }
    // Unnamed dimensions, an empty array, a fill value of -infinity.
    ArrayBuilder::new(vec![0, 3], vec![4, 3], DataType::Float32)
        .fill_value(json!("-Infinity"))
        .dimension_names(vec![Some("t".into()), None])
        .create(st.clone(), "empty")
        .await
        .unwrap();
    // More than ten chunks along a dimension: index order is numeric, not textual.
    let many = ArrayBuilder::new(vec![12, 2], vec![1, 1], DataType::UInt8)
        .fill_value(json!(0))
        .create(st.clone(), "many")
        .await
        .unwrap();
    let v: Vec<u8> = (1..=24).collect();
    many.write_region(&ArraySubset::full(&[12, 2]), &v)
        .await
        .unwrap();
    let first = s
        .commit_with(
            "first: groups and arrays\nsecond line ✓",
            meta,
            CommitOptions::default(),
        )
        .await
        .unwrap();

    // Commit 2: resize, node deletion, a chunk back to fill values, a new virtual ref.
    let s = repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let mut i32a = Array::open(st.clone(), "g1/i32").await.unwrap();
    i32a.resize(vec![6, 7]).await.unwrap();
    i32a.write_region(&ArraySubset::new(vec![0, 0], vec![4, 3]), &[-1i32; 12])
        .await
        .unwrap();
    let mut f64a = Array::open(st.clone(), "f64").await.unwrap();
    f64a.resize(vec![44, 30]).await.unwrap();
    let v: Vec<f64> = (0..120).map(|i| i as f64 * 0.5).collect();
    f64a.write_region(&ArraySubset::new(vec![40, 0], vec![4, 30]), &v)
        .await
        .unwrap();
    delete_node(st.as_ref(), "tmp").await.unwrap();
    // No etag checksum: icechunk 2.3 cannot verify etags of local files at all.
    s.set_chunk_ref(&virt, &[2], vref(1000, None)).unwrap();
    let second = s
        .commit_with(
            "second: resize, delete, fill-value chunk",
            BTreeMap::from([("step".to_string(), json!(2))]),
            CommitOptions::default(),
        )
        .await
        .unwrap();

    // A branch from the second commit, with a commit of its own.
    repo.create_branch("dev", second).await.unwrap();
    let s = repo.writable_session("dev").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let strs = Array::open(st.clone(), "strs").await.unwrap();
    strs.write_region(
        &ArraySubset::new(vec![1], vec![2]),
        &["dev".to_string(), "branch ✓".to_string()],
    )
    .await
    .unwrap();
    let d = ArrayBuilder::new(vec![3], vec![3], DataType::Int64)
        .fill_value(json!(0))
        .create(st.clone(), "dev_only")
        .await
        .unwrap();
    d.write_region(&ArraySubset::full(&[3]), &[-(1i64 << 62), 0, 1 << 62])
        .await
        .unwrap();
    s.commit("dev: strings and a new array").await.unwrap();

    // Commit 3 on main: attributes only.
    let s = repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let mut root = Group::open(st.clone(), "").await.unwrap();
    root.update_attributes(attrs(json!({"edited": "attrs-only"})))
        .await
        .unwrap();
    let mut g1 = Group::open(st.clone(), "g1").await.unwrap();
    g1.update_attributes(attrs(json!({"k": "changed"})))
        .await
        .unwrap();
    let third = s
        .commit_with(
            "third: attributes only",
            BTreeMap::from([("kind".to_string(), json!("attrs"))]),
            CommitOptions::default(),
        )
        .await
        .unwrap();

    // Tags, a deleted tag, a deleted branch.
    repo.create_tag("v1", first).await.unwrap();
    repo.create_tag("v3", third).await.unwrap();
    repo.create_tag("gone", second).await.unwrap();
    repo.delete_tag("gone").await.unwrap();
    repo.create_branch("doomed", first).await.unwrap();
    repo.delete_branch("doomed").await.unwrap();

    FloeRepo {
        repo,
        repo_dir,
        data_prefix,
    }
}

fn write_facts(path: &Path, facts: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(facts).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_writes_icechunk_reads() {
    let py1 = common::require(common::python(), "Python with icechunk 1.1.x (FLOE_PYTHON)");
    let py2 = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    );
    floe_writes_icechunk_reads_spec(SpecVersion::V1, [py1, py2]).await;
}

/// A spec-2 repository floe writes reads in icechunk 2.x as in floe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_writes_spec2_icechunk2_reads() {
    let py2 = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    );
    floe_writes_icechunk_reads_spec(SpecVersion::V2, [None, py2]).await;
}

async fn floe_writes_icechunk_reads_spec(spec: SpecVersion, pythons: [Option<PathBuf>; 2]) {
    if pythons.iter().all(Option::is_none) {
        return;
    }
    let [py1, py2] = pythons;
    let spec_byte = if spec == SpecVersion::V1 { 1 } else { 2 };
    let dir = workdir();
    let f = build_floe_repo(dir.path(), spec).await;
    if spec == SpecVersion::V2 {
        // A rearrange commit: a group moved and renamed, recorded in moved_nodes.
        let r = f.repo.rearrange_session("main").await.unwrap();
        r.move_node(
            &NodePath::new("/g1/g2").unwrap(),
            &NodePath::new("/g2_moved").unwrap(),
        )
        .unwrap();
        let id = r.commit("floe moves g1/g2 to g2_moved").await.unwrap();
        let log = f.repo.assets().fetch_transaction_log(&id).await.unwrap();
        assert!(!log.moved_nodes.is_empty());
    }
    let facts = floe_facts(&f.repo, &["doomed"], &["gone"]).await;
    let (snaps, arrays) = facts_size(&facts);
    assert!(
        snaps >= 5 && arrays >= 50,
        "{snaps} snapshots, {arrays} arrays"
    );
    let facts_path = dir.path().join("expected.json");
    write_facts(&facts_path, &facts);
    assert_spec_files(&f.repo_dir, spec_byte);

    // A repository with the default configuration has no config.yaml at all (spec
    // 2: no config in the repo object).
    let plain_dir = dir.path().join("plain");
    let plain = Repository::create_with(local(&plain_dir), None, spec, OpenOptions::default())
        .await
        .unwrap();
    assert!(!plain_dir.join("config.yaml").exists());
    let s = plain.writable_session("main").await.unwrap();
    let a = ArrayBuilder::new(vec![3], vec![2], DataType::Float64)
        .create(Arc::new(s.store()), "x")
        .await
        .unwrap();
    a.write_region(&ArraySubset::full(&[3]), &[0.5f64, -1.0, 1e300])
        .await
        .unwrap();
    s.commit("plain").await.unwrap();
    let plain_facts = dir.path().join("plain.json");
    write_facts(&plain_facts, &floe_facts(&plain, &[], &[]).await);

    for py in [py1, py2].into_iter().flatten() {
        let out = run_py(
            &py,
            &[
                "verify",
                f.repo_dir.to_str().unwrap(),
                facts_path.to_str().unwrap(),
                &f.data_prefix,
                plain_dir.to_str().unwrap(),
                plain_facts.to_str().unwrap(),
                "-",
            ],
        );
        eprint!("{out}");
    }
}

// ---------------------------------------------------------------------------------------
// Mixed writers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_writers_keep_spec1() {
    mixed_writers(SpecVersion::V1).await;
}

/// Icechunk 2.x and floe commit in turn to a spec-2 repository floe created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_writers_on_spec2() {
    mixed_writers(SpecVersion::V2).await;
}

async fn mixed_writers(spec: SpecVersion) {
    let Some(py2) = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    ) else {
        return;
    };
    let py1 = if spec == SpecVersion::V1 {
        common::require(common::python(), "Python with icechunk 1.1.x (FLOE_PYTHON)")
    } else {
        None
    };
    let spec_byte = if spec == SpecVersion::V1 { 1 } else { 2 };
    let dir = workdir();
    let f = build_floe_repo(dir.path(), spec).await;
    let before = f.repo.lookup_branch("main").await.unwrap();
    // A floe session opened before icechunk commits: it will have to rebase over
    // icechunk's commit, reading icechunk's transaction log to find no conflict.
    let stale = f.repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(stale.store());
    let i32a = Array::open(st.clone(), "g1/i32").await.unwrap();
    i32a.write_region(&ArraySubset::new(vec![4, 3], vec![2, 4]), &[-7i32; 8])
        .await
        .unwrap();
    delete_node(st.as_ref(), "g1/i16_be").await.unwrap();

    // icechunk 2.x commits on top of floe's main; floe reads what icechunk reads.
    let ic_facts_path = dir.path().join("icechunk.json");
    run_py(
        &py2,
        &[
            "mixed-commit",
            f.repo_dir.to_str().unwrap(),
            ic_facts_path.to_str().unwrap(),
            &f.data_prefix,
        ],
    );
    assert_spec_files(&f.repo_dir, spec_byte);
    let ic_facts = read_json(&ic_facts_path);
    let repo = open_repo(&f.repo_dir, &f.data_prefix).await;
    let ic_commit = repo.lookup_branch("main").await.unwrap();
    assert_ne!(ic_commit, before, "icechunk did not move main");
    let info = &repo.ancestry(ic_commit).await.unwrap()[0];
    assert_eq!(info.parent_id, Some(before));
    assert_eq!(info.message, "icechunk commit on a floe repository");
    let got = floe_facts(&repo, &[], &[]).await;
    assert_same_facts(
        &ic_facts,
        &got,
        "after icechunk 2.x committed to a floe repository",
    );

    // The stale floe session commits: rebased onto icechunk's commit.
    let rebased = stale
        .commit("floe commit rebased over icechunk's")
        .await
        .unwrap();
    assert_eq!(
        repo.ancestry(rebased).await.unwrap()[1].id,
        ic_commit,
        "the stale floe session was not rebased onto icechunk's commit"
    );

    // floe commits on top.
    let s = repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let a = Array::open(st.clone(), "from_icechunk").await.unwrap();
    let v: Vec<f32> = a.read_all().await.unwrap();
    assert_eq!(&v[..4], &[0.0, 1.0, 2.0, 3.0]);
    assert_eq!(v[19], -1.0);
    a.write_region(&ArraySubset::new(vec![3, 0], vec![2, 4]), &[9.5f32; 8])
        .await
        .unwrap();
    let strs = Array::open(st.clone(), "strs").await.unwrap();
    strs.write_region(
        &ArraySubset::new(vec![4], vec![1]),
        &["floe again".to_string()],
    )
    .await
    .unwrap();
    let mut root = Group::open(st.clone(), "").await.unwrap();
    root.update_attributes(attrs(json!({"floe_was_here": 2})))
        .await
        .unwrap();
    let floe_commit = s
        .commit_with(
            "floe commit on top of icechunk",
            BTreeMap::from([("by".to_string(), json!("floe"))]),
            CommitOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        repo.ancestry(floe_commit).await.unwrap()[1].id,
        rebased,
        "floe's second commit is a child of its first"
    );
    let facts = floe_facts(&repo, &[], &[]).await;
    let facts_path = dir.path().join("expected.json");
    write_facts(&facts_path, &facts);
    assert_spec_files(&f.repo_dir, spec_byte);
    for py in [py1, Some(py2)].into_iter().flatten() {
        let out = run_py(
            &py,
            &[
                "verify",
                f.repo_dir.to_str().unwrap(),
                facts_path.to_str().unwrap(),
                &f.data_prefix,
            ],
        );
        eprint!("{out}");
    }
    assert_spec_files(&f.repo_dir, spec_byte);
}

// ---------------------------------------------------------------------------------------
// Spec 2

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec2_default_repository_opens_and_is_not_recreated() {
    let Some(py2) = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    ) else {
        return;
    };
    let dir = workdir();
    let repo_dir = dir.path().join("spec2");
    let out = run_py(&py2, &["spec2", repo_dir.to_str().unwrap()]);
    assert!(
        repo_dir.join("repo").is_file(),
        "icechunk wrote no `repo` object: {out}"
    );
    assert!(!repo_dir.join("refs/branch.main/ref.json").exists());
    assert!(Repository::exists(local(&repo_dir).as_ref()).await.unwrap());
    let repo = Repository::open(local(&repo_dir)).await.unwrap();
    assert_eq!(repo.spec_version(), floe::format::SpecVersion::V2);
    let s = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let a = Array::open(st, "a").await.unwrap();
    assert_eq!(a.read_all::<i32>().await.unwrap(), vec![0, 1, 2, 3]);
    let history = repo.ancestry(s.snapshot_id()).await.unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0].message, "a spec-2 commit");
    assert!(matches!(
        Repository::create(local(&repo_dir), None).await,
        Err(Error::RepositoryExists { .. })
    ));
}

/// floe upgrades a spec-1 repository and icechunk 2.x reads it as before; icechunk
/// 2.x upgrades one and floe reads it as before, then commits to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_both_ways() {
    let Some(py2) = common::require(
        common::python312(),
        "Python 3.12 with icechunk 2.x (FLOE_PYTHON312)",
    ) else {
        return;
    };
    // floe upgrades.
    let dir = workdir();
    let f = build_floe_repo(dir.path(), SpecVersion::V1).await;
    let facts = floe_facts(&f.repo, &["doomed"], &["gone"]).await;
    let facts_path = dir.path().join("expected.json");
    write_facts(&facts_path, &facts);
    let report = floe::lifecycle::upgrade_to_spec2(local(&f.repo_dir), false)
        .await
        .unwrap();
    assert!(report.snapshots >= 5, "{report:?}");
    assert_spec_files(&f.repo_dir, 2);
    let upgraded = open_repo(&f.repo_dir, &f.data_prefix).await;
    assert_eq!(upgraded.spec_version(), SpecVersion::V2);
    assert_same_facts(
        &facts,
        &floe_facts(&upgraded, &["doomed"], &["gone"]).await,
        "after floe's upgrade",
    );
    run_py(
        &py2,
        &[
            "verify",
            f.repo_dir.to_str().unwrap(),
            facts_path.to_str().unwrap(),
            &f.data_prefix,
        ],
    );

    // icechunk upgrades; floe reads, commits, and icechunk reads floe's commit.
    let dir = workdir();
    let f = build_floe_repo(dir.path(), SpecVersion::V1).await;
    let facts = floe_facts(&f.repo, &["doomed"], &["gone"]).await;
    let facts_path = dir.path().join("expected.json");
    write_facts(&facts_path, &facts);
    run_py(
        &py2,
        &[
            "upgrade",
            f.repo_dir.to_str().unwrap(),
            facts_path.to_str().unwrap(),
            &f.data_prefix,
        ],
    );
    let repo = open_repo(&f.repo_dir, &f.data_prefix).await;
    assert_eq!(repo.spec_version(), SpecVersion::V2);
    assert!(walkdir_files(&f.repo_dir.join("refs")).is_empty());
    assert_same_facts(
        &facts,
        &floe_facts(&repo, &["doomed"], &["gone"]).await,
        "after icechunk's upgrade",
    );
    let log = repo.ops_log().await.unwrap();
    assert!(
        matches!(
            log[0].kind,
            floe::format::repo_info::UpdateKind::RepoMigrated {
                from_version: 1,
                to_version: 2
            }
        ),
        "{:?}",
        log[0]
    );
    let s = repo.writable_session("main").await.unwrap();
    let st: Arc<dyn Store> = Arc::new(s.store());
    let i32a = Array::open(st.clone(), "g1/i32").await.unwrap();
    i32a.write_region(&ArraySubset::new(vec![0, 0], vec![1, 2]), &[5i32, 6])
        .await
        .unwrap();
    s.commit("floe after icechunk's upgrade").await.unwrap();
    let facts = floe_facts(&repo, &["doomed"], &["gone"]).await;
    write_facts(&facts_path, &facts);
    run_py(
        &py2,
        &[
            "verify",
            f.repo_dir.to_str().unwrap(),
            facts_path.to_str().unwrap(),
            &f.data_prefix,
        ],
    );
    assert_spec_files(&f.repo_dir, 2);
}

#[test]
fn facts_comparison_reports_every_difference() {
    let expected = json!({"a": {"b": [1, 2, {"c": "x"}], "d": 1.5}, "gone": true});
    let got = json!({"a": {"b": [1, 3, {"c": "y"}], "d": 1.5}, "new": null});
    let mut out = Vec::new();
    json_diff(&expected, &got, "", &mut out);
    assert_eq!(
        out,
        vec![
            "/a/b[1]: expected 2, got 3",
            "/a/b[2]/c: expected \"x\", got \"y\"",
            "/gone: missing (expected true)",
            "/new: unexpected null",
        ]
    );
    let mut same = Vec::new();
    json_diff(&expected, &expected.clone(), "", &mut same);
    assert!(same.is_empty());
    let mut nums = Vec::new();
    json_diff(
        &json!([i64::MAX, 2.0, 2, u64::MAX]),
        &json!([i64::MAX - 1, 2, 2.0, u64::MAX]),
        "",
        &mut nums,
    );
    assert_eq!(nums.len(), 3, "{nums:?}");
    let mut lens = Vec::new();
    json_diff(&json!([1, 2]), &json!([1]), "", &mut lens);
    assert_eq!(lens.len(), 1, "{lens:?}");
}
