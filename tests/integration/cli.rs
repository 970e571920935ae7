//! Integration tests of the `floe` binary: every command, its output forms (JSON parsed
//! and checked), exit statuses, and one-line errors for bad input.
//!
//! Stores to import are written with floe's own Zarr layer (v3) or by hand (v2), so
//! these tests need nothing installed; `zarr_python_import_export` additionally uses
//! zarr-python (`tests/python/cli_interop.py`) and skips without it (fails under
//! `CI=true`).

use crate::common;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use base64::Engine as _;
use floe::zarr::{
    ArrayBuilder, ArraySubset, ChunkKeyEncodingKind, DataType, FilesystemStore, Group, Separator,
    Store,
};
use serde_json::{json, Value};

// ------------------------------------------------------------------ helpers

fn floe_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_floe"));
    c.args(args).env_remove("FLOE_LOG").env_remove("RUST_LOG");
    c
}

fn run(args: &[&str]) -> Output {
    floe_cmd(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run floe: {e}"))
}

/// Runs floe, expects success and an empty stderr (no progress bars when piped);
/// returns stdout.
fn ok(args: &[&str]) -> String {
    String::from_utf8(ok_bytes(args)).expect("utf-8 stdout")
}

fn ok_bytes(args: &[&str]) -> Vec<u8> {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "floe {args:?} failed ({}): {stderr}",
        out.status
    );
    assert!(stderr.is_empty(), "floe {args:?} wrote to stderr: {stderr}");
    out.stdout
}

/// Runs floe, expects failure with exit status 1 and exactly one stderr line
/// `floe: error: ...` containing every string of `expect`; returns that line.
fn fails(args: &[&str], expect: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "floe {args:?} should fail: stdout {} stderr {stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "floe {args:?}: one stderr line expected: {stderr:?}"
    );
    assert!(lines[0].starts_with("floe: error: "), "{stderr}");
    for e in expect {
        assert!(
            lines[0].contains(e),
            "floe {args:?}: `{e}` not in {stderr:?}"
        );
    }
    lines[0].to_string()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn json_value(text: &str) -> Value {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line expected: {text:?}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("bad JSON {text:?}: {e}"))
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn attrs(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// A plain Zarr v3 store written with floe's Zarr layer:
/// - `/` group {"title": "source"}
/// - `/temps` int32 [4, 6] in [2, 3] chunks, `.` separator keys, value 10 * row + col
/// - `/grp` group {"kind": "g"}
/// - `/grp/f` float64 [5] in [2] chunks, gzip: 0.5, 1.5, ...
/// - `/grp/s` strings [3]
/// - `/grp/sh` uint16 [8, 8] sharded (4x4 shards of 2x2 chunks): row * 8 + col
/// - `/grp/sparse` int16 [100] in [10] chunks, fill -1, only chunk 3 written
fn write_v3_store(dir: &Path) {
    rt().block_on(async {
        let store: Arc<dyn Store> = Arc::new(FilesystemStore::new(dir).unwrap());
        Group::create(Arc::clone(&store), "", attrs(json!({"title": "source"})))
            .await
            .unwrap();
        let temps = ArrayBuilder::new(vec![4, 6], vec![2, 3], DataType::Int32)
            .chunk_key_encoding(ChunkKeyEncodingKind::Default(Separator::Dot))
            .dimension_names(vec![Some("y".into()), Some("x".into())])
            .attributes(attrs(json!({"units": "K"})))
            .create(Arc::clone(&store), "temps")
            .await
            .unwrap();
        let v: Vec<i32> = (0..24).map(|i| 10 * (i / 6) + i % 6).collect();
        temps
            .write_region(&ArraySubset::full(&[4, 6]), &v)
            .await
            .unwrap();
        Group::create(Arc::clone(&store), "grp", attrs(json!({"kind": "g"})))
            .await
            .unwrap();
        let f = ArrayBuilder::new(vec![5], vec![2], DataType::Float64)
            .codecs(vec![
                json!({"name": "bytes", "configuration": {"endian": "little"}}),
                json!({"name": "gzip", "configuration": {"level": 1}}),
            ])
            .create(Arc::clone(&store), "grp/f")
            .await
            .unwrap();
        f.write_region(&ArraySubset::full(&[5]), &[0.5, 1.5, 2.5, 3.5, 4.5])
            .await
            .unwrap();
        let strs = ArrayBuilder::new(vec![3], vec![2], DataType::String)
            .create(Arc::clone(&store), "grp/s")
            .await
            .unwrap();
        let sv: Vec<String> = ["a", "bé", "\"q\""].iter().map(|s| s.to_string()).collect();
        strs.write_region(&ArraySubset::full(&[3]), &sv)
            .await
            .unwrap();
        let sh = ArrayBuilder::new(vec![8, 8], vec![4, 4], DataType::UInt16)
            .codecs(vec![json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": [2, 2],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 1, "checksum": false}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}]}})])
            .create(Arc::clone(&store), "grp/sh")
            .await
            .unwrap();
        let shv: Vec<u16> = (0..64).collect();
        sh.write_region(&ArraySubset::full(&[8, 8]), &shv)
            .await
            .unwrap();
        let sparse = ArrayBuilder::new(vec![100], vec![10], DataType::Int16)
            .fill_value(json!(-1))
            .create(Arc::clone(&store), "grp/sparse")
            .await
            .unwrap();
        let sp: Vec<i16> = (30..40).collect();
        sparse
            .write_region(&ArraySubset::new(vec![30], vec![10]), &sp)
            .await
            .unwrap();
    });
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A plain Zarr v2 store written by hand: root group with attributes, `/a` int16
/// [3, 4] in [2, 2] chunks, zlib, `/` dimension separator, value 100 * row + col,
/// chunk (1, 1) never written (fill 7); `/a` has `_ARRAY_DIMENSIONS`.
fn write_v2_store(dir: &Path) {
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    std::fs::write(dir.join(".zattrs"), r#"{"origin": "v2"}"#).unwrap();
    std::fs::write(
        dir.join("a/.zarray"),
        json!({"zarr_format": 2, "shape": [3, 4], "chunks": [2, 2], "dtype": "<i2",
               "compressor": {"id": "zlib", "level": 1}, "filters": null, "fill_value": 7,
               "order": "C", "dimension_separator": "/"})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("a/.zattrs"),
        r#"{"_ARRAY_DIMENSIONS": ["r", "c"], "note": "hand-made"}"#,
    )
    .unwrap();
    for (ci, cj) in [(0u16, 0u16), (0, 1), (1, 0)] {
        let mut vals = Vec::new();
        for r in 0..2 {
            for c in 0..2 {
                vals.extend_from_slice(&(100 * (ci * 2 + r) + cj * 2 + c).to_le_bytes());
            }
        }
        let p = dir.join(format!("a/{ci}/{cj}"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, zlib(&vals)).unwrap();
    }
}

/// Expected values of the v2 `/a` array.
fn v2_values() -> Value {
    json!([[0, 1, 2, 3], [100, 101, 102, 103], [200, 201, 7, 7]])
}

/// A repository with the v3 store imported at the root (commit "import v3").
fn repo_with_v3(dir: &Path) -> (PathBuf, String) {
    let src = dir.join("src.zarr");
    write_v3_store(&src);
    let repo = dir.join("repo");
    ok(&["init", &s(&repo)]);
    let out = ok(&["import", "zarr", &s(&src), &s(&repo), "-m", "import v3"]);
    assert!(out.contains("Committed snapshot"), "{out}");
    (src, s(&repo))
}

// ------------------------------------------------------------------ tests

#[test]
fn init_stores_the_chunk_packing_mode() {
    let dir = tempfile::tempdir().unwrap();
    let repo = s(&dir.path().join("r"));
    ok(&["init", &repo, "--chunk-packing", "enabled"]);
    let info = json_value(&ok(&["info", &repo, "--json"]));
    assert_eq!(info["config"]["chunk_packing"]["mode"], "enabled", "{info}");
    // A usage error (exit status 2), naming the accepted modes.
    let q = s(&dir.path().join("q"));
    let out = run(&["init", &q, "--chunk-packing", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[possible values: auto, enabled, disabled]"),
        "{stderr}"
    );
}

#[test]
fn init_and_info() {
    let dir = tempfile::tempdir().unwrap();
    let repo = s(&dir.path().join("r"));
    let out = ok(&["init", &repo]);
    assert!(
        out.starts_with("Initialized empty floe repository (Icechunk spec 2) at "),
        "{out}"
    );
    fails(&["init", &repo], &["already exists"]);

    let info = json_value(&ok(&["info", &repo, "--json"]));
    // Spec 2 is the default, as in Icechunk 2.x.
    assert_eq!(info["spec_version"], 2);
    let main = info["branches"]["main"].as_str().unwrap();
    assert_eq!(main.len(), 20, "{info}");
    assert_eq!(info["tags"], json!({}));
    assert!(
        info["config"].is_object() || info["config"].is_null(),
        "{info}"
    );
    let text = ok(&["info", &repo]);
    assert!(
        text.contains("Spec version: 2") && text.contains(main),
        "{text}"
    );
    // Text and JSON show the same configuration: nothing stored, defaults in effect.
    assert_eq!(info["config"], json!({}), "{info}");
    let threshold = &info["effective_config"]["inline_chunk_threshold_bytes"];
    assert!(threshold.as_u64().is_some(), "{info}");
    assert!(
        text.contains("(nothing set: every default)")
            && text.contains(&format!("inline_chunk_threshold_bytes: {threshold}")),
        "{text}"
    );

    // An empty repository lists nothing and logs the initial snapshot.
    assert_eq!(ok(&["ls", &repo]), "");
    let log = json_lines(&ok(&["log", &repo, "--json"]));
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["id"], main);
    assert_eq!(log[0]["parent_id"], Value::Null);
}

#[test]
fn missing_repository_and_bad_locations() {
    let dir = tempfile::tempdir().unwrap();
    let missing = s(&dir.path().join("nope"));
    for args in [
        vec!["info", &missing],
        vec!["log", &missing],
        vec!["branch", "list", &missing],
        vec!["tag", "list", &missing],
        vec!["ls", &missing],
        vec!["cat", &missing, "/a"],
        vec!["diff", &missing, "main", "main"],
    ] {
        fails(&args, &["no repository at", "nope"]);
    }
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails(&["log", &s(&empty)], &["no repository"]);
    fails(&["info", "ftp://host/x"], &[]);
    // clap usage errors keep clap's exit status 2.
    let out = run(&["cat"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn import_zarr_then_log_ls_cat() {
    let dir = tempfile::tempdir().unwrap();
    let (_src, repo) = repo_with_v3(dir.path());

    // log: newest first, down to and including the initial snapshot.
    let log = json_lines(&ok(&["log", &repo, "--json"]));
    assert_eq!(log.len(), 2);
    assert_eq!(log[0]["message"], "import v3");
    assert_eq!(log[0]["parent_id"], log[1]["id"]);
    assert_eq!(log[1]["parent_id"], Value::Null);
    for c in &log {
        let t = c["flushed_at"].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert!(c["metadata"].is_object());
        assert!(c["id"].as_str().unwrap().len() == 20);
    }
    let text = ok(&["log", &repo]);
    assert!(text.contains("import v3"), "{text}");
    let newest = json_lines(&ok(&["log", &repo, "--json", "-n", "1"]));
    assert_eq!(newest, log[..1], "log -n 1 prints the newest commit only");

    // ls --json: absolute paths, node types, zarr.json objects.
    let nodes = json_lines(&ok(&["ls", &repo, "--json"]));
    let paths: Vec<&str> = nodes.iter().map(|n| n["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "/",
            "/grp",
            "/grp/f",
            "/grp/s",
            "/grp/sh",
            "/grp/sparse",
            "/temps"
        ]
    );
    let by_path = |p: &str| nodes.iter().find(|n| n["path"] == p).unwrap().clone();
    assert_eq!(by_path("/")["node_type"], "group");
    assert_eq!(by_path("/")["metadata"]["attributes"]["title"], "source");
    let temps = by_path("/temps");
    assert_eq!(temps["node_type"], "array");
    assert_eq!(temps["metadata"]["shape"], json!([4, 6]));
    assert_eq!(temps["metadata"]["data_type"], "int32");
    assert_eq!(temps["metadata"]["attributes"]["units"], "K");
    // Imported arrays use the default `/` chunk key encoding.
    assert_eq!(
        temps["metadata"]["chunk_key_encoding"],
        json!({"name": "default", "configuration": {"separator": "/"}})
    );
    assert_eq!(
        by_path("/grp/sh")["metadata"]["codecs"][0]["name"],
        "sharding_indexed"
    );
    // ls below a path, and its text form.
    let sub = json_lines(&ok(&["ls", &repo, "/grp", "--json"]));
    assert_eq!(sub.len(), 5);
    let text = ok(&["ls", &repo]);
    assert!(
        text.contains("/temps  array  int32  shape [4,6]  chunks [2,3]"),
        "{text}"
    );
    assert!(text.contains("sharding_indexed[bytes+zstd]"), "{text}");
    fails(&["ls", &repo, "/nothing"], &["/nothing", "not found"]);

    // cat: json, raw, text.
    let all: Vec<Vec<i64>> = (0..4)
        .map(|r| (0..6).map(|c| 10 * r + c).collect())
        .collect();
    assert_eq!(
        json_value(&ok(&["cat", &repo, "/temps", "--format", "json"])),
        json!(all)
    );
    let raw = ok_bytes(&["cat", &repo, "temps", "--format", "raw"]);
    let expect: Vec<u8> = all
        .iter()
        .flatten()
        .flat_map(|&v| (v as i32).to_le_bytes())
        .collect();
    assert_eq!(raw, expect);
    let text = ok(&["cat", &repo, "/temps"]);
    assert_eq!(
        text,
        "/temps  int32  shape [4, 6]\n\
         [[ 0  1  2  3  4  5]\n [10 11 12 13 14 15]\n [20 21 22 23 24 25]\n [30 31 32 33 34 35]]\n"
    );
    assert_eq!(
        json_value(&ok(&["cat", &repo, "/grp/f", "--format", "json"])),
        json!([0.5, 1.5, 2.5, 3.5, 4.5])
    );
    let raw = ok_bytes(&["cat", &repo, "/grp/f", "--format", "raw"]);
    assert_eq!(raw.len(), 40);
    assert_eq!(&raw[8..16], &1.5f64.to_le_bytes());
    assert_eq!(
        json_value(&ok(&["cat", &repo, "/grp/s", "--format", "json"])),
        json!(["a", "bé", "\"q\""])
    );
    assert_eq!(
        ok(&["cat", &repo, "/grp/s"]),
        "/grp/s  string  shape [3]\n[\"a\" \"bé\" \"\\\"q\\\"\"]\n"
    );
    fails(
        &["cat", &repo, "/grp/s", "--format", "raw"],
        &["/grp/s", "strings", "--format json"],
    );
    let sh = json_value(&ok(&[
        "cat", &repo, "/grp/sh", "--format", "json", "--region", "3:5,6:",
    ]));
    assert_eq!(sh, json!([[30, 31], [38, 39]]));
    let sparse = json_value(&ok(&["cat", &repo, "/grp/sparse", "--format", "json"]));
    let sv: Vec<i64> = (0..100)
        .map(|i| if (30..40).contains(&i) { i } else { -1 })
        .collect();
    assert_eq!(sparse, json!(sv));
    // Large arrays print summarized text with numpy-style edges.
    let text = ok(&["cat", &repo, "/grp/sparse"]);
    assert!(
        text.starts_with("/grp/sparse  int16  shape [100]"),
        "{text}"
    );
    let text2 = ok(&["cat", &repo, "/grp/sh", "--region", "0:2,:"]);
    assert!(text2.contains("region 0:2,0:8 (shape [2, 8])"), "{text2}");

    fails(&["cat", &repo, "/grp"], &["/grp", "not an array"]);
    fails(&["cat", &repo, "/missing"], &["/missing", "not found"]);
}

#[test]
fn cat_regions() {
    let dir = tempfile::tempdir().unwrap();
    let (_src, repo) = repo_with_v3(dir.path());
    let cat = |region: &str| {
        json_value(&ok(&[
            "cat", &repo, "/temps", "--format", "json", "--region", region,
        ]))
    };
    assert_eq!(cat("0:2,1:3"), json!([[1, 2], [11, 12]]));
    assert_eq!(cat(":,5"), json!([[5], [15], [25], [35]]));
    assert_eq!(cat("3,:2"), json!([[30, 31]]));
    assert_eq!(cat("2:,4:"), json!([[24, 25], [34, 35]]));
    assert_eq!(cat("1:1,:"), json!([]));
    let raw = ok_bytes(&[
        "cat", &repo, "/temps", "--format", "raw", "--region", "1,2:4",
    ]);
    assert_eq!(raw, [12i32.to_le_bytes(), 13i32.to_le_bytes()].concat());
    for (region, what) in [
        ("0:2", "1 dimension(s) given, the array has 2"),
        ("0:5,0:1", "out of bounds"),
        ("4,0", "index 4 is out of bounds"),
        ("x,1", "not an index"),
        ("2:1,1", "past stop"),
        ("0:1:1,1", "steps"),
        ("-1,1", "negative"),
    ] {
        // `--region=-1,1` keeps clap from reading `-1` as an option.
        let arg = format!("--region={region}");
        fails(
            &["cat", &repo, "/temps", &arg],
            &["bad --region", "`/temps`", "[4, 6]", what],
        );
    }
}

#[test]
fn branches_tags_refs_and_as_of() {
    let dir = tempfile::tempdir().unwrap();
    let (_src, repo) = repo_with_v3(dir.path());
    let main_id = json_value(&ok(&["branch", "list", &repo, "--json"]))["main"]
        .as_str()
        .unwrap()
        .to_string();
    let log = json_lines(&ok(&["log", &repo, "--json"]));
    let initial = log[1]["id"].as_str().unwrap().to_string();

    // Branches.
    let out = ok(&["branch", "create", &repo, "dev", "--ref", &initial]);
    assert!(out.contains("Created branch dev"), "{out}");
    let branches = json_value(&ok(&["branch", "list", &repo, "--json"]));
    assert_eq!(branches, json!({"dev": initial, "main": main_id}));
    // Names padded to the longest: the ids line up.
    let listed = ok(&["branch", "list", &repo]);
    assert!(listed.contains(&format!("dev   {initial}")), "{listed}");
    assert!(listed.contains(&format!("main  {main_id}")), "{listed}");
    fails(
        &["branch", "create", &repo, "dev"],
        &["branch `dev` already exists"],
    );
    // `branch reset` has no default target: without `--to` it is a usage error and
    // the branch stays where it is.
    let bare = run(&["branch", "reset", &repo, "dev"]);
    assert_eq!(bare.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&bare.stderr).contains("--to"));
    let dev_of = || json_value(&ok(&["branch", "list", &repo, "--json"]))["dev"].clone();
    assert_eq!(dev_of(), initial);
    // A dry run prints both tips and changes nothing.
    let out = ok(&["branch", "reset", &repo, "dev", "--to", "main", "--dry-run"]);
    assert!(
        out.contains(&format!("was {initial}, now {main_id}")),
        "{out}"
    );
    assert_eq!(dev_of(), initial);
    // The reset prints the old tip, the way back to the commits it leaves.
    let out = ok(&["branch", "reset", &repo, "dev", "--to", "main"]);
    assert_eq!(
        out.trim(),
        format!("Reset branch dev: was {initial}, now {main_id}")
    );
    assert_eq!(dev_of(), main_id);
    // `--ref` is still understood.
    ok(&["branch", "reset", &repo, "dev", "--ref", &initial]);
    assert_eq!(dev_of(), initial);
    ok(&["branch", "reset", &repo, "dev", "--to", "main"]);
    let out = ok(&["branch", "delete", &repo, "dev", "--dry-run"]);
    assert!(out.contains(&format!("at {main_id}")), "{out}");
    assert_eq!(dev_of(), main_id);
    let out = ok(&["branch", "delete", &repo, "dev"]);
    assert_eq!(out.trim(), format!("Deleted branch dev (was {main_id})"));
    fails(
        &["branch", "delete", &repo, "dev"],
        &["branch `dev` not found"],
    );
    fails(&["branch", "delete", &repo, "main"], &["main"]);
    fails(
        &["branch", "reset", &repo, "nope", "--ref", "main"],
        &["nope"],
    );

    // Tags.
    ok(&["tag", "create", &repo, "v1", "--ref", "main"]);
    ok(&["tag", "create", &repo, "v0", "--ref", &initial]);
    assert_eq!(
        json_value(&ok(&["tag", "list", &repo, "--json"])),
        json!({"v0": initial, "v1": main_id})
    );
    fails(
        &["tag", "create", &repo, "v1"],
        &["tag `v1` already exists"],
    );
    assert_eq!(ok(&["ls", &repo, "--ref", "v0"]), "");
    assert_eq!(
        json_lines(&ok(&["log", &repo, "--ref", "v1", "--json"])).len(),
        2
    );
    let out = ok(&["tag", "delete", &repo, "v1", "--dry-run"]);
    assert!(out.contains(&format!("at {main_id}")), "{out}");
    let out = ok(&["tag", "delete", &repo, "v1"]);
    assert_eq!(out.trim(), format!("Deleted tag v1 (was {main_id})"));
    assert_eq!(
        json_value(&ok(&["tag", "list", &repo, "--json"])),
        json!({"v0": initial})
    );
    // A deleted tag can be neither read nor recreated.
    fails(&["log", &repo, "--ref", "v1"], &["v1"]);
    fails(&["cat", &repo, "/temps", "--ref", "v1"], &["v1"]);
    fails(
        &["tag", "create", &repo, "v1", "--ref", "main"],
        &["v1", "deleted"],
    );
    fails(&["tag", "delete", &repo, "v9"], &["tag `v9` not found"]);

    // Unknown refs and snapshot ids.
    fails(
        &["log", &repo, "--ref", "nosuch"],
        &["`nosuch` is not a branch, tag or snapshot id"],
    );
    fails(&["ls", &repo, "--ref", "nosuch"], &["nosuch"]);
    fails(
        &["branch", "create", &repo, "x", "--ref", "nosuch"],
        &["nosuch"],
    );
    let log_by_id = json_lines(&ok(&["log", &repo, "--ref", &main_id, "--json"]));
    assert_eq!(log_by_id[0]["id"], main_id);

    // --as-of: before the import only the initial snapshot; now the import.
    let t0 = log[1]["flushed_at"].as_str().unwrap();
    let before = json_lines(&ok(&["log", &repo, "--as-of", t0, "--json"]));
    assert_eq!(before.len(), 1);
    assert_eq!(ok(&["ls", &repo, "--as-of", t0]), "");
    let now = chrono::Utc::now().to_rfc3339();
    assert_eq!(
        json_lines(&ok(&["log", &repo, "--as-of", &now, "--json"])).len(),
        2
    );
    fails(
        &["log", &repo, "--as-of", "yesterday"],
        &["--as-of", "RFC 3339", "7d"],
    );
    // `now` and times ago are times too.
    assert_eq!(
        json_lines(&ok(&["log", &repo, "--as-of", "now", "--json"])).len(),
        2
    );
    assert_eq!(
        json_lines(&ok(&["log", &repo, "--as-of", "0s", "--json"])).len(),
        2
    );
    fails(&["log", &repo, "--as-of", "1d"], &["main"]);
    for bad in ["7", "d", "7x", "7d-", "99999999999999999w"] {
        fails(&["log", &repo, "--as-of", bad], &["--as-of", bad]);
    }
    // A cut-off inside gc's safety window names the flags to change, not a Rust API.
    let msg = fails(
        &["gc", &repo, "--older-than", "now"],
        &["--older-than", "--allow-recent-cutoff"],
    );
    assert!(!msg.contains("GcOptions"), "{msg}");
    fails(
        &["expire", &repo, "--older-than", "soon"],
        &["--older-than `soon`"],
    );
    ok(&["expire", &repo, "--older-than", "7d"]);
    fails(
        &["log", &repo, "--ref", "v0", "--as-of", &now],
        &["--as-of", "branch"],
    );
    fails(
        &["log", &repo, "--as-of", "2000-01-01T00:00:00Z"],
        &["main", "2000"],
    );
}

#[test]
fn diff_between_refs() {
    let dir = tempfile::tempdir().unwrap();
    let (_src, repo) = repo_with_v3(dir.path());
    let initial = json_lines(&ok(&["log", &repo, "--json"]))[1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&["tag", "create", &repo, "before", "--ref", &initial]);
    let d = json_value(&ok(&["diff", &repo, "before", "main", "--json"]));
    assert_eq!(d["from"], initial);
    let text = serde_json::to_string(&d).unwrap();
    for p in ["/temps", "/grp/sh", "/grp"] {
        assert!(text.contains(p), "{p} missing in {d}");
    }
    let t = ok(&["diff", &repo, "before", "main"]);
    assert!(t.contains("Arrays created") && t.contains("/temps"), "{t}");
    assert!(t.contains("Chunks changed"), "{t}");
    let none = ok(&["diff", &repo, "main", "main"]);
    assert!(none.contains("no changes"), "{none}");

    // A second import changes one array's chunks.
    let src2 = dir.path().join("src2.zarr");
    rt().block_on(async {
        let store: Arc<dyn Store> = Arc::new(FilesystemStore::new(&src2).unwrap());
        Group::create(Arc::clone(&store), "", serde_json::Map::new())
            .await
            .unwrap();
        let a = ArrayBuilder::new(vec![2], vec![1], DataType::UInt8)
            .create(store, "b")
            .await
            .unwrap();
        a.write_region(&ArraySubset::full(&[2]), &[1u8, 2])
            .await
            .unwrap();
    });
    ok(&[
        "import",
        "zarr",
        &s(&src2),
        &repo,
        "--path",
        "/more/x",
        "-m",
        "more",
    ]);
    let d = json_value(&ok(&["diff", &repo, "before", "main", "--json"]));
    let text = serde_json::to_string(&d).unwrap();
    assert!(text.contains("/more/x/b"), "{d}");
    fails(&["diff", &repo, "before", "nosuch"], &["nosuch"]);
}

#[test]
fn plain_stores_v3_and_v2() {
    let dir = tempfile::tempdir().unwrap();
    let v3 = dir.path().join("v3.zarr");
    write_v3_store(&v3);
    let v2 = dir.path().join("v2.zarr");
    write_v2_store(&v2);

    let nodes = json_lines(&ok(&["ls", &s(&v3), "--json"]));
    assert_eq!(nodes.len(), 7);
    assert_eq!(nodes[0]["path"], "/");
    // A plain store keeps its own chunk key encoding; --ref is ignored.
    let temps = nodes.iter().find(|n| n["path"] == "/temps").unwrap();
    assert_eq!(
        temps["metadata"]["chunk_key_encoding"]["configuration"]["separator"],
        "."
    );
    assert_eq!(
        json_value(&ok(&[
            "cat",
            &s(&v3),
            "/temps",
            "--format",
            "json",
            "--region",
            "1,0:2",
            "--ref",
            "whatever"
        ])),
        json!([[10, 11]])
    );

    let nodes = json_lines(&ok(&["ls", &s(&v2), "--json"]));
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["metadata"]["attributes"]["origin"], "v2");
    let a = &nodes[1];
    assert_eq!(a["path"], "/a");
    assert_eq!(a["node_type"], "array");
    assert_eq!(a["metadata"]["zarr_format"], 3);
    assert_eq!(a["metadata"]["dimension_names"], json!(["r", "c"]));
    assert_eq!(
        json_value(&ok(&["cat", &s(&v2), "a", "--format", "json"])),
        v2_values()
    );
    let only_a = json_lines(&ok(&["ls", &s(&v2), "/a", "--json"]));
    assert_eq!(only_a.len(), 1);
    fails(&["ls", &s(&v2), "/zz"], &["/zz"]);
}

#[test]
fn import_v2_and_under_a_path() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("v2.zarr");
    write_v2_store(&v2);
    let repo = s(&dir.path().join("repo"));
    ok(&["init", &repo]);
    let out = ok(&[
        "import",
        "zarr",
        &s(&v2),
        &repo,
        "--path",
        "/data/old",
        "-m",
        "v2 data",
    ]);
    assert!(out.contains("1 array(s) and 3 chunk(s)"), "{out}");
    let nodes = json_lines(&ok(&["ls", &repo, "--json"]));
    let paths: Vec<&str> = nodes.iter().map(|n| n["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/", "/data", "/data/old", "/data/old/a"]);
    let a = &nodes[3]["metadata"];
    assert_eq!(a["zarr_format"], 3);
    assert_eq!(a["chunk_key_encoding"]["name"], "default");
    assert_eq!(a["chunk_key_encoding"]["configuration"]["separator"], "/");
    assert_eq!(a["attributes"], json!({"note": "hand-made"}));
    assert_eq!(nodes[2]["metadata"]["attributes"]["origin"], "v2");
    assert_eq!(
        json_value(&ok(&["cat", &repo, "/data/old/a", "--format", "json"])),
        v2_values()
    );
    // Importing again onto existing nodes is refused and commits nothing.
    fails(
        &[
            "import",
            "zarr",
            &s(&v2),
            &repo,
            "--path",
            "/data/old",
            "-m",
            "again",
        ],
        &["/data/old", "already exists"],
    );
    assert_eq!(json_lines(&ok(&["log", &repo, "--json"])).len(), 2);
    // On another branch.
    ok(&["branch", "create", &repo, "side"]);
    ok(&[
        "import",
        "zarr",
        &s(&v2),
        &repo,
        "--path",
        "/copy",
        "--branch",
        "side",
        "-m",
        "side",
    ]);
    assert_eq!(
        json_value(&ok(&[
            "cat", &repo, "/copy/a", "--ref", "side", "--format", "json"
        ])),
        v2_values()
    );
    fails(&["cat", &repo, "/copy/a"], &["/copy/a", "not found"]);
    fails(
        &[
            "import",
            "zarr",
            &s(&v2),
            &repo,
            "--branch",
            "nobranch",
            "-m",
            "x",
        ],
        &["branch `nobranch` not found"],
    );
}

#[test]
fn import_rebases_when_the_branch_moved() {
    // Two imports of disjoint paths started from the same base both land.
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("v2.zarr");
    write_v2_store(&v2);
    let repo = s(&dir.path().join("repo"));
    ok(&["init", &repo]);
    // The first import creates the root group; concurrent first imports would all
    // create it, which is a conflict.
    ok(&[
        "import",
        "zarr",
        &s(&v2),
        &repo,
        "--path",
        "/first",
        "-m",
        "first",
    ]);
    let children: Vec<_> = (0..4)
        .map(|i| {
            floe_cmd(&[
                "import",
                "zarr",
                &s(&v2),
                &repo,
                "--path",
                &format!("/p{i}"),
                "-m",
                &format!("import {i}"),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(json_lines(&ok(&["log", &repo, "--json"])).len(), 6);
    for i in 0..4 {
        assert_eq!(
            json_value(&ok(&[
                "cat",
                &repo,
                &format!("/p{i}/a"),
                "--format",
                "json"
            ])),
            v2_values()
        );
    }
}

#[test]
fn import_bad_sources() {
    let dir = tempfile::tempdir().unwrap();
    let repo = s(&dir.path().join("repo"));
    ok(&["init", &repo]);
    let not_zarr = dir.path().join("plain-dir");
    std::fs::create_dir(&not_zarr).unwrap();
    std::fs::write(not_zarr.join("readme.txt"), "hello").unwrap();
    fails(
        &["import", "zarr", &s(&not_zarr), &repo, "-m", "x"],
        &["plain-dir", "is not a Zarr store"],
    );
    fails(
        &[
            "import",
            "zarr",
            &s(&dir.path().join("missing")),
            &repo,
            "-m",
            "x",
        ],
        &["missing", "does not exist"],
    );
    let v2 = dir.path().join("v2.zarr");
    write_v2_store(&v2);
    fails(
        &[
            "import",
            "zarr",
            &s(&v2),
            &s(&dir.path().join("norepo")),
            "-m",
            "x",
        ],
        &["no repository"],
    );
    // A store whose root is an array needs --path.
    let arr = dir.path().join("arr.zarr");
    std::fs::create_dir(&arr).unwrap();
    std::fs::copy(v2.join("a/.zarray"), arr.join(".zarray")).unwrap();
    fails(
        &["import", "zarr", &s(&arr), &repo, "-m", "x"],
        &["is an array", "--path"],
    );
    ok(&[
        "import",
        "zarr",
        &s(&arr),
        &repo,
        "--path",
        "/arr",
        "-m",
        "x",
    ]);
    assert_eq!(
        json_value(&ok(&["cat", &repo, "/arr", "--format", "json"])),
        json!([[7, 7, 7, 7], [7, 7, 7, 7], [7, 7, 7, 7]])
    );
    // Corrupt metadata is one clear line.
    let bad = dir.path().join("bad.zarr");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("zarr.json"), "{not json").unwrap();
    fails(&["import", "zarr", &s(&bad), &repo, "-m", "x"], &["JSON"]);
    fails(
        &[
            "import",
            "kerchunk",
            &s(&dir.path().join("no.json")),
            &repo,
            "-m",
            "x",
        ],
        &["no.json", "does not exist"],
    );
}

#[test]
fn export_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (_src, repo) = repo_with_v3(dir.path());
    let dest = dir.path().join("export");
    let out = ok(&["export", &repo, &s(&dest)]);
    assert!(out.contains("Exported 7 node(s)"), "{out}");
    for node in ["", "grp", "grp/f", "grp/s", "grp/sh", "grp/sparse", "temps"] {
        let p = dest.join(node).join("zarr.json");
        assert!(p.is_file(), "{} missing", p.display());
    }
    // Chunks under the array's own (default `/`) encoding; sparse arrays stay sparse.
    assert!(dest.join("temps/c/1/1").is_file());
    assert!(dest.join("grp/sparse/c/3").is_file());
    assert!(!dest.join("grp/sparse/c/4").exists());
    for (array, region) in [
        ("/temps", None),
        ("/grp/f", None),
        ("/grp/s", None),
        ("/grp/sh", Some("1:7,2:5")),
        ("/grp/sparse", None),
    ] {
        let mut a = vec!["cat", &repo, array, "--format", "json"];
        let mut b = vec!["cat", dest.to_str().unwrap(), array, "--format", "json"];
        if let Some(r) = region {
            a.extend(["--region", r]);
            b.extend(["--region", r]);
        }
        assert_eq!(ok(&a), ok(&b), "{array}");
    }
    // DEST must not exist or be empty.
    fails(
        &["export", &repo, &s(&dest)],
        &["export", "not an empty directory"],
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(&["export", &repo, &s(&empty), "--ref", "main"]);
    // An old ref exports its own tree.
    let initial = json_lines(&ok(&["log", &repo, "--json"]))[1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let old = dir.path().join("old");
    let out = ok(&["export", &repo, &s(&old), "--ref", &initial]);
    assert!(out.contains("Exported 0 node(s)"), "{out}");
    fails(
        &[
            "export",
            &repo,
            &s(&dir.path().join("x")),
            "--ref",
            "nosuch",
        ],
        &["nosuch"],
    );
    assert!(!dir.path().join("x").exists());
}

/// A kerchunk reference file with one int32 array `/v` (2 x 3, two chunks in a local
/// data file) and an inline scalar; returns (refs path, data directory URL prefix).
fn kerchunk_fixture(dir: &Path) -> (PathBuf, String) {
    let data_dir = dir.join("sources");
    std::fs::create_dir_all(&data_dir).unwrap();
    let source = data_dir.join("data.bin");
    let mut file = Vec::new();
    let mut refs = serde_json::Map::new();
    refs.insert(".zgroup".into(), json!(r#"{"zarr_format": 2}"#));
    refs.insert(
        "v/.zarray".into(),
        json!(
            json!({"zarr_format": 2, "shape": [2, 6], "chunks": [2, 3], "dtype": "<i4",
            "compressor": null, "filters": null, "fill_value": 0, "order": "C"})
            .to_string()
        ),
    );
    refs.insert(
        "v/.zattrs".into(),
        json!(r#"{"_ARRAY_DIMENSIONS": ["a", "b"]}"#),
    );
    for cj in 0..2 {
        let vals: Vec<u8> = (0..6)
            .map(|i| (i / 3) * 10 + cj * 3 + i % 3)
            .flat_map(|v: i32| v.to_le_bytes())
            .collect();
        let offset = file.len();
        file.extend_from_slice(&vals);
        refs.insert(format!("v/0.{cj}"), json!([s(&source), offset, vals.len()]));
    }
    refs.insert(
        "k/.zarray".into(),
        json!(
            json!({"zarr_format": 2, "shape": [], "chunks": [], "dtype": "<f8",
            "compressor": null, "filters": null, "fill_value": null, "order": "C"})
            .to_string()
        ),
    );
    refs.insert(
        "k/0".into(),
        json!(format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(2.5f64.to_le_bytes())
        )),
    );
    std::fs::write(&source, &file).unwrap();
    let refs_path = dir.join("refs.json");
    let doc = json!({"version": 1, "refs": refs});
    std::fs::write(&refs_path, serde_json::to_vec(&doc).unwrap()).unwrap();
    (refs_path, format!("file://{}/", data_dir.display()))
}

#[test]
fn kerchunk_import_and_virtual_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let (refs, prefix) = kerchunk_fixture(dir.path());
    let repo = s(&dir.path().join("repo"));
    ok(&["init", &repo]);
    let out = ok(&[
        "import",
        "kerchunk",
        &s(&refs),
        &repo,
        "--path",
        "/nc",
        "-m",
        "virtual",
    ]);
    assert!(out.contains("2 virtual and 1 inline chunk(s)"), "{out}");
    assert!(out.contains(&format!("--allow-virtual {prefix}")), "{out}");
    let info = json_value(&ok(&["info", &repo, "--json"]));
    assert!(
        serde_json::to_string(&info["config"])
            .unwrap()
            .contains(&prefix),
        "{info}"
    );

    let expect = json!([[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]]);
    // Without authorization: one line naming the prefix to pass.
    let line = fails(
        &["cat", &repo, "/nc/v", "--format", "json"],
        &[
            "/nc/v",
            "not authorized",
            &format!("--allow-virtual {prefix}"),
        ],
    );
    assert!(line.contains("data.bin"), "{line}");
    // An unrelated prefix does not help.
    fails(
        &[
            "cat",
            &repo,
            "/nc/v",
            "--allow-virtual",
            "file:///elsewhere/",
        ],
        &[&format!("--allow-virtual {prefix}")],
    );
    fails(
        &["cat", &repo, "/nc/v", "--allow-virtual", "not a url"],
        &["--allow-virtual"],
    );
    assert_eq!(
        json_value(&ok(&[
            "cat",
            &repo,
            "/nc/v",
            "--format",
            "json",
            "--allow-virtual",
            &prefix
        ])),
        expect
    );
    assert_eq!(
        json_value(&ok(&[
            "cat",
            &repo,
            "/nc/v",
            "--format",
            "json",
            "--region",
            ":,2:4",
            "--allow-virtual",
            &prefix
        ])),
        json!([[2, 3], [12, 13]])
    );
    // Inline chunks need no authorization; 0-d arrays print scalars.
    assert_eq!(
        json_value(&ok(&["cat", &repo, "/nc/k", "--format", "json"])),
        json!(2.5)
    );
    assert_eq!(
        ok(&["cat", &repo, "/nc/k"]),
        "/nc/k  float64  shape []\n2.5\n"
    );
    // Metadata of virtual arrays is readable without authorization.
    let nodes = json_lines(&ok(&["ls", &repo, "/nc", "--json"]));
    assert_eq!(nodes.len(), 3);

    // Export needs the authorization too, and a refused export leaves nothing behind.
    let dest = dir.path().join("export");
    fails(
        &["export", &repo, &s(&dest)],
        &[&format!("--allow-virtual {prefix}")],
    );
    assert!(!dest.exists());
    ok(&["export", &repo, &s(&dest), "--allow-virtual", &prefix]);
    assert_eq!(
        json_value(&ok(&["cat", &s(&dest), "/nc/v", "--format", "json"])),
        expect
    );
    // Bad reference files are one clear line.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"version\": 1, \"refs\": ").unwrap();
    fails(
        &[
            "import",
            "kerchunk",
            &s(&bad),
            &repo,
            "--path",
            "/bad",
            "-m",
            "x",
        ],
        &["bad.json", "kerchunk"],
    );
    // A reference to a missing source names the chunk and the source.
    let gone = dir.path().join("gone.json");
    let doc = json!({"version": 1, "refs": {
        "g/.zarray": json!({"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<i4",
            "compressor": null, "filters": null, "fill_value": 0, "order": "C"}).to_string(),
        "g/0": [s(&dir.path().join("gone.nc")), 0, 8]}});
    std::fs::write(&gone, doc.to_string()).unwrap();
    fails(
        &[
            "import",
            "kerchunk",
            &s(&gone),
            &repo,
            "--path",
            "/gone",
            "-m",
            "x",
        ],
        &["/gone/g", "gone.nc", "not found"],
    );
    assert_eq!(json_lines(&ok(&["log", &repo, "--json"])).len(), 2);
}

#[test]
fn demo_builds_and_shows_a_repository() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("floe-demo");
    let out = ok(&["demo", &s(&demo)]);
    for part in [
        "$ floe log",
        "$ floe ls",
        "$ floe cat",
        "$ floe diff",
        "Append time step 4 to temperature",
        "sharding_indexed",
        "gzip",
        "blosc",
        "zstd",
        "\"Gdańsk\"",
        "Arrays created",
        "/climate/anomaly",
    ] {
        assert!(
            out.contains(part),
            "`{part}` missing in demo output:\n{out}"
        );
    }
    let repo = s(&demo);
    // The demo repository is of the default spec version, 2.
    assert_eq!(
        json_value(&ok(&["info", &repo, "--json"]))["spec_version"],
        2
    );
    let branches = json_value(&ok(&["branch", "list", &repo, "--json"]));
    assert!(branches.get("experiment").is_some(), "{branches}");
    let tags = json_value(&ok(&["tag", "list", &repo, "--json"]));
    assert!(tags.get("v1.0").is_some(), "{tags}");
    assert_eq!(json_lines(&ok(&["log", &repo, "--json"])).len(), 4);
    assert_eq!(
        json_value(&ok(&[
            "cat",
            &repo,
            "/climate/station_id",
            "--format",
            "json"
        ])),
        json!([1001, 1002, 1003, 1004, 2001, 2002, 2003, 2004])
    );
    let temp = json_value(&ok(&[
        "cat",
        &repo,
        "/climate/temperature",
        "--format",
        "json",
        "--region",
        "4,0,0:2",
    ]));
    assert_eq!(temp, json!([[[271.0, 271.5]]]));
    fails(
        &["demo", &repo],
        &["already holds a repository", "remove it"],
    );
}

#[test]
fn s3_repository() {
    let Some(url) = common::s3_url("cli") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("v2.zarr");
    write_v2_store(&v2);
    ok(&["init", &url]);
    ok(&[
        "import",
        "zarr",
        &s(&v2),
        &url,
        "--path",
        "/a2",
        "-m",
        "to s3",
    ]);
    assert_eq!(json_lines(&ok(&["log", &url, "--json"])).len(), 2);
    assert_eq!(
        json_value(&ok(&["cat", &url, "/a2/a", "--format", "json"])),
        v2_values()
    );
    let dest = dir.path().join("export");
    ok(&["export", &url, &s(&dest)]);
    assert_eq!(
        json_value(&ok(&["cat", &s(&dest), "/a2/a", "--format", "json"])),
        v2_values()
    );
}

#[test]
fn zarr_python_import_export() {
    let Some(py) = common::require(common::python(), "Python with zarr-python 3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/cli_interop.py");
    let py_run = |args: &[&str]| {
        let out = Command::new(&py)
            .arg(&script)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
        assert!(
            out.status.success(),
            "cli_interop.py {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let d = s(dir.path());
    py_run(&["write", &d]);
    let repo = s(&dir.path().join("repo"));
    // Spec 1: the script checks the repository with icechunk 1.x when installed.
    ok(&["init", &repo, "--spec-version", "1"]);
    ok(&[
        "import",
        "zarr",
        &format!("{d}/v3.zarr"),
        &repo,
        "--path",
        "/v3",
        "-m",
        "v3",
    ]);
    ok(&[
        "import",
        "zarr",
        &format!("{d}/v2.zarr"),
        &repo,
        "--path",
        "/v2",
        "-m",
        "v2",
    ]);
    ok(&["export", &repo, &format!("{d}/export")]);
    py_run(&["verify", &d, env!("CARGO_BIN_EXE_floe")]);
}

// ------------------------------------------------------------------ spec 2

#[test]
fn init_spec2_upgrade_and_ops_log() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("v2");
    let v2s = v2.to_str().unwrap();
    assert!(ok(&["init", v2s, "--spec-version", "2"]).contains("Icechunk spec 2"));
    let info: Value = serde_json::from_str(&ok(&["info", v2s, "--json"])).unwrap();
    assert_eq!(info["spec_version"], 2);
    ok(&["branch", "create", v2s, "dev"]);
    let ops = ok(&["ops-log", v2s, "--json"]);
    let kinds: Vec<String> = ops
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, vec!["branch_created", "repo_initialized"]);
    let bad = run(&["init", v2s, "--spec-version", "3"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("1..=2"));

    let v1 = dir.path().join("v1");
    let v1s = v1.to_str().unwrap();
    ok(&["init", v1s, "--spec-version", "1"]);
    fails(&["ops-log", v1s], &["ops_log", "spec-1"]);
    let dry: Value = serde_json::from_str(&ok(&["upgrade", v1s, "--dry-run", "--json"])).unwrap();
    assert_eq!(dry["dry_run"], true);
    assert!(v1.join("refs/branch.main/ref.json").is_file());
    assert!(ok(&["upgrade", v1s]).contains("Upgraded to Icechunk spec 2"));
    assert!(!v1.join("refs/branch.main/ref.json").exists());
    let info: Value = serde_json::from_str(&ok(&["info", v1s, "--json"])).unwrap();
    assert_eq!(info["spec_version"], 2);
    assert!(ok(&["ops-log", v1s])
        .lines()
        .next()
        .unwrap()
        .contains("repo_migrated"));
    fails(&["upgrade", v1s], &["upgrade", "spec-2"]);
}

/// `--virtual-container PREFIX=ENDPOINT` gives the reader's own S3 container (floe
/// issue 31): a repository whose S3 container names an endpoint the reader did not
/// choose is refused (one line naming the option), and with the option the chunk is
/// read from the reader's endpoint, signed with the reader's key, the repository's
/// endpoint never contacted. Both endpoints are local HTTP servers answering S3
/// path-style requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_container_option_trusts_the_readers_endpoint() {
    use common::http::{content, not_found, server};
    use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
    use floe::format::manifest::{ChunkPayload, VirtualChunkRef};

    const DATA: &[u8] = b"0123456789abcdef";
    let evil = server(Arc::new(|m, _, r| content(m, b"SECRET-SECRET-SE", r))).await;
    let good = server(Arc::new(|m, path, r| match path {
        "/bucket/data/x.bin" => content(m, DATA, r),
        _ => not_found(),
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: "s3://bucket/".into(),
        store: ContainerStore::S3 {
            compatible: true,
            region: None,
            endpoint_url: Some(format!("http://{}", evil.addr)),
            anonymous: false,
            allow_http: true,
            force_path_style: true,
        },
    });
    let repo = floe::Repository::create(storage, Some(config))
        .await
        .unwrap();
    let session = repo.writable_session("main").await.unwrap();
    let v = common::p("/v");
    session
        .add_array(&v, common::array_def("/v", &[16], &[16], "uint8"))
        .unwrap();
    session
        .set_chunk_ref(
            &v,
            &[0],
            Some(ChunkPayload::Virtual(VirtualChunkRef {
                location: "s3://bucket/data/x.bin".into(),
                offset: 0,
                length: 16,
                checksum: None,
            })),
        )
        .unwrap();
    session.commit("virtual").await.unwrap();

    let repo_path = s(dir.path());
    let cat = move |extra: Vec<String>| {
        let repo_path = repo_path.clone();
        tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "cat".to_string(),
                repo_path,
                "/v".into(),
                "--format".into(),
                "json".into(),
            ];
            args.extend(extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            floe_cmd(&args)
                .env_remove("AWS_ENDPOINT_URL")
                .env_remove("AWS_ENDPOINT_URL_S3")
                .env_remove("AWS_PROFILE")
                .env_remove("AWS_SESSION_TOKEN")
                .env("AWS_ACCESS_KEY_ID", "READERKEY")
                .env("AWS_SECRET_ACCESS_KEY", "reader-secret")
                .env("AWS_REGION", "us-east-1")
                .output()
                .unwrap()
        })
    };
    // Authorized, but the endpoint is the repository's: refused, nothing sent.
    let out = cat(vec!["--allow-virtual".into(), "s3://bucket/data/".into()])
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--virtual-container s3://bucket/=ENDPOINT")
            && stderr.contains("not contacted"),
        "{stderr}"
    );
    assert!(
        evil.hits().is_empty(),
        "the repository's endpoint was contacted"
    );

    // The reader's own container: authorized and trusted, read from `good`.
    let out = cat(vec![
        "--virtual-container".into(),
        format!("s3://bucket/=http://{}", good.addr),
    ])
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let values: Vec<u8> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(values, DATA);
    let gets = good.gets();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(
        gets[0]
            .authorization
            .as_deref()
            .is_some_and(|a| a.contains("Credential=READERKEY/")),
        "{gets:?}"
    );
    assert!(
        evil.hits().is_empty(),
        "the repository's endpoint was contacted"
    );

    // Malformed values are one usage line.
    for bad in [
        "no-scheme",
        "ftp://h/x/",
        "az://container/",
        "file:///tmp/=x",
    ] {
        let out = cat(vec!["--virtual-container".into(), bad.into()])
            .await
            .unwrap();
        assert!(!out.status.success(), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--virtual-container"), "{bad}: {stderr}");
    }
}

/// `floe --help` lists history and reading first and maintenance last, one line per
/// subcommand; a mistyped subcommand gets a suggestion (also where clap's own measure
/// finds none: `lg`, `lgo`).
#[test]
fn help_order_one_line_summaries_and_typo_suggestions() {
    let help = ok(&["--help"]);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let names: Vec<&str> = commands
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(&names[..4], ["log", "ls", "cat", "diff"], "{help}");
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(
        pos("gc") > pos("import") && pos("repair") > pos("gc"),
        "{names:?}"
    );
    for line in &commands {
        assert!(
            line.chars().count() <= 90,
            "a help line longer than one line: {line}"
        );
    }
    for (typo, want) in [
        ("lg", "'log'"),
        ("lgo", "'log'"),
        ("lsit", "'ls'"),
        ("gcc", "'gc'"),
    ] {
        let out = run(&[typo]);
        assert_eq!(out.status.code(), Some(2), "{typo}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("similar subcommand") && stderr.contains(want),
            "{typo}: {stderr}"
        );
    }
}

#[test]
fn compact_packs_small_chunks() {
    let dir = tempfile::tempdir().unwrap();
    // A plain store with two arrays of 1 KiB chunks (native, one object each: packing
    // is off for local repositories).
    let src = dir.path().join("small.zarr");
    let values: Vec<u8> = (0..20 * 1024u32).map(|i| (i % 251) as u8).collect();
    rt().block_on(async {
        let store: Arc<dyn Store> = Arc::new(FilesystemStore::new(&src).unwrap());
        Group::create(Arc::clone(&store), "", serde_json::Map::new())
            .await
            .unwrap();
        for name in ["x", "y"] {
            let a = ArrayBuilder::new(vec![20 * 1024], vec![1024], DataType::UInt8)
                .codecs(vec![
                    json!({"name": "bytes", "configuration": {"endian": "little"}}),
                ])
                .create(Arc::clone(&store), name)
                .await
                .unwrap();
            a.write_region(&ArraySubset::full(&[20 * 1024]), &values)
                .await
                .unwrap();
        }
    });
    let repo = s(&dir.path().join("repo"));
    ok(&["init", &repo]);
    ok(&["import", "zarr", &s(&src), &repo, "-m", "small chunks"]);
    let chunk_files = || {
        std::fs::read_dir(dir.path().join("repo/chunks"))
            .unwrap()
            .count()
    };
    assert_eq!(chunk_files(), 40);
    let base = ok(&["log", &repo, "--json"]);
    let base = json_lines(&base)[0]["id"].as_str().unwrap().to_string();

    let dry = json_value(&ok(&["compact", &repo, "main", "--dry-run", "--json"]));
    assert_eq!(dry["chunks"], 40, "{dry}");
    assert_eq!(dry["bytes"], 40 * 1024, "{dry}");
    assert_eq!(dry["packs"], 1, "{dry}");
    assert_eq!(dry["snapshot"], Value::Null, "{dry}");
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(chunk_files(), 40);

    let one = json_value(&ok(&["compact", &repo, "main", "--path", "/x", "--json"]));
    assert_eq!(
        (one["arrays"].as_u64(), one["chunks"].as_u64()),
        (Some(1), Some(20)),
        "{one}"
    );
    assert_eq!(one["base"], base.as_str(), "{one}");
    let tip = one["snapshot"].as_str().unwrap().to_string();
    assert_eq!(chunk_files(), 41);
    let text = ok(&["compact", &repo, "main", "-m", "pack the rest"]);
    assert!(
        text.starts_with("Rewrote 20 chunk(s) (20480 bytes) of 2 array(s) into 1 pack(s); 20 chunk(s) left as they are\nCommitted "),
        "{text}"
    );
    let log = json_lines(&ok(&["log", &repo, "--json"]));
    assert_eq!(log[0]["message"], "pack the rest", "{log:?}");
    assert_eq!(log[1]["id"], tip.as_str());
    let nothing = ok(&["compact", &repo, "main"]);
    assert!(
        nothing.starts_with("Nothing to compact on main"),
        "{nothing}"
    );
    fails(&["compact", &repo, "main", "--path", "/nope"], &["/nope"]);
    fails(&["compact", &repo, "nope"], &["nope"]);

    // The values are unchanged.
    rt().block_on(async {
        let r = floe::Repository::open(Arc::new(
            floe::storage::LocalStorage::new(&dir.path().join("repo")).unwrap(),
        ))
        .await
        .unwrap();
        let s = r
            .readonly_session(&floe::VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        for name in ["x", "y"] {
            let a = floe::zarr::Array::open(Arc::new(s.store()), name)
                .await
                .unwrap();
            let got: Vec<u8> = a
                .read_region(&ArraySubset::full(&[20 * 1024]))
                .await
                .unwrap();
            assert!(got == values, "{name}");
        }
    });
}
