//! Branch and tag names read from storage are checked (floe issue 27, class 5): a
//! hostile `repo` object (spec 2) or hostile ref files (spec 1) may hold names that
//! could never be created (terminal escape sequences, empty, `.`, `..`, `/`, 4 KiB).
//! Listings leave them out (with a warning), acting on one is
//! [`Error::InvalidRefName`], and the CLI never writes control characters from a
//! repository to the terminal.

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::sync::Arc;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::repo_info::RepoInfo;
use floe::format::SpecVersion;
use floe::storage::LocalStorage;
use floe::{Error, OpenOptions, Repository, SnapshotId};

/// Names no branch or tag may have.
fn hostile_names() -> Vec<String> {
    vec![
        "\u{1b}[31mred\u{1b}[0m".to_string(),
        "\u{1b}]0;pwned\u{7}".to_string(),
        "csi\u{9b}2J".to_string(),
        String::new(),
        ".".to_string(),
        "..".to_string(),
        "../x".to_string(),
        "a/b".to_string(),
        "x".repeat(4096),
        "y".repeat(249),
        "line\nbreak".to_string(),
    ]
}

/// A repository of spec `spec` in `dir` with one commit on `main` (message and
/// metadata holding escape sequences) and a valid branch `ok` and tag `v1`; returns
/// the commit.
async fn base_repo(dir: &std::path::Path, spec: SpecVersion) -> SnapshotId {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create_with(storage, None, spec, OpenOptions::default())
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[2], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(&[1, 2]))
        .await
        .unwrap();
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "author\u{1b}[2J".to_string(),
        serde_json::json!("evil\u{1b}[31m\u{9b}1m\u{7f}"),
    );
    let id = s
        .commit_with(
            "title \u{1b}]0;pwned\u{7}\rforged\u{1b}[2J\nsecond \u{9b}31m line",
            metadata,
            Default::default(),
        )
        .await
        .unwrap();
    repo.create_branch("ok", id).await.unwrap();
    repo.create_tag("v1", id).await.unwrap();
    id
}

/// Spec 2: rewrites the `repo` object with every hostile name as a branch, a tag
/// and a deleted tag.
async fn hostile_repo_object(dir: &std::path::Path, id: SnapshotId) {
    let path = dir.join("repo");
    let mut info = RepoInfo::decode(&std::fs::read(&path).unwrap()).unwrap();
    for name in hostile_names() {
        info.branches.insert(name.clone(), id);
        info.tags.insert(name.clone(), id);
        info.deleted_tags.insert(name);
    }
    std::fs::write(&path, info.encode().unwrap()).unwrap();
}

/// Spec 1: writes ref files (a branch and a tag) for the hostile names that storage
/// can list (one path segment of at most 255 bytes, no ASCII control character:
/// object_store refuses to list those, see
/// `spec1_ascii_controls_in_ref_files_are_a_clean_error`), and a tag whose name is
/// too long for a branch directory; returns the names planted as both.
fn hostile_ref_files(dir: &std::path::Path) -> Vec<String> {
    let mut planted = Vec::new();
    for name in hostile_names() {
        if name.contains('/') || name.chars().any(|c| c.is_ascii_control()) {
            continue;
        }
        if plant(dir, "branch.", &name) & plant(dir, "tag.", &name) {
            planted.push(name);
        }
    }
    assert_eq!(planted, vec!["csi\u{9b}2J", "", ".", ".."]);
    assert!(plant(dir, "tag.", &"y".repeat(249)));
    planted
}

/// Writes `refs/<kind><name>/ref.json` pointing where `main` points, if the file
/// system can hold it.
fn plant(dir: &std::path::Path, kind: &str, name: &str) -> bool {
    if kind.len() + name.len() > 255 {
        return false;
    }
    let content = std::fs::read(dir.join("refs/branch.main/ref.json")).unwrap();
    let d = dir.join("refs").join(format!("{kind}{name}"));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("ref.json"), &content).unwrap();
    true
}

async fn open(dir: &std::path::Path) -> Repository {
    Repository::open(Arc::new(LocalStorage::new(dir).unwrap()))
        .await
        .unwrap()
}

fn is_invalid_name(r: Result<impl std::fmt::Debug, Error>) -> bool {
    matches!(r, Err(Error::InvalidRefName { .. }))
}

/// Listings hold only the valid names; every operation on a hostile name is
/// `InvalidRefName` and changes nothing.
async fn check_library(repo: &Repository, names: &[String], id: SnapshotId) {
    assert_eq!(repo.list_branches().await.unwrap(), vec!["main", "ok"]);
    assert_eq!(repo.list_tags().await.unwrap(), vec!["v1"]);
    assert!(repo.list_deleted_tags().await.unwrap().is_empty());
    for name in names {
        assert!(is_invalid_name(repo.lookup_branch(name).await), "{name:?}");
        assert!(is_invalid_name(repo.delete_branch(name).await), "{name:?}");
        assert!(
            is_invalid_name(repo.reset_branch(name, id, None).await),
            "{name:?}"
        );
        assert!(
            is_invalid_name(repo.writable_session(name).await),
            "{name:?}"
        );
        assert!(
            is_invalid_name(repo.create_branch(name, id).await),
            "{name:?}"
        );
        assert!(is_invalid_name(repo.lookup_tag(name).await), "{name:?}");
        assert!(is_invalid_name(repo.delete_tag(name).await), "{name:?}");
        assert!(is_invalid_name(repo.create_tag(name, id).await), "{name:?}");
    }
}

#[tokio::test]
async fn spec2_names_from_the_repo_object_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let id = base_repo(dir.path(), SpecVersion::V2).await;
    hostile_repo_object(dir.path(), id).await;
    let repo = open(dir.path()).await;
    let names = hostile_names();
    check_library(&repo, &names, id).await;
    // Nothing was deleted or moved: the hostile refs are still in the object.
    let (info, _) = repo.assets().fetch_repo_info().await.unwrap();
    for name in &names {
        assert_eq!(info.branches.get(name), Some(&id), "{name:?}");
    }
}

#[tokio::test]
async fn spec1_names_from_ref_files_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let id = base_repo(dir.path(), SpecVersion::V1).await;
    let planted = hostile_ref_files(dir.path());
    let repo = open(dir.path()).await;
    check_library(&repo, &planted, id).await;
    assert!(is_invalid_name(repo.lookup_tag(&"y".repeat(249)).await));
    for name in &planted {
        let f = dir.path().join(format!("refs/branch.{name}/ref.json"));
        assert!(f.exists(), "{name:?} was deleted");
    }
}

#[tokio::test]
async fn names_longer_than_248_bytes_cannot_be_created() {
    let dir = tempfile::tempdir().unwrap();
    let id = base_repo(dir.path(), SpecVersion::V2).await;
    let repo = open(dir.path()).await;
    let longest = "é".repeat(124);
    assert_eq!(longest.len(), 248);
    repo.create_branch(&longest, id).await.unwrap();
    repo.create_tag(&longest, id).await.unwrap();
    let too_long = format!("{longest}x");
    assert!(is_invalid_name(repo.create_branch(&too_long, id).await));
    assert!(is_invalid_name(repo.create_tag(&too_long, id).await));
    assert!(is_invalid_name(
        repo.create_branch(&"x".repeat(4096), id).await
    ));
}

// --- CLI ---------------------------------------------------------------------------

fn floe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(args)
        .env_remove("FLOE_LOG")
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run floe: {e}"))
}

/// Whether `bytes` hold a control character other than line feed and tab (C0, DEL,
/// or a C1 control in UTF-8).
fn has_controls(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
}

/// Runs floe, expecting success; returns stdout, checked free of control characters
/// (on stderr too).
fn ok_clean(args: &[&str]) -> String {
    let out = floe(args);
    assert!(
        out.status.success(),
        "floe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !has_controls(&out.stdout),
        "floe {args:?} stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !has_controls(&out.stderr),
        "floe {args:?} stderr: {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cli_lists_and_prints_no_hostile_names_or_controls() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for spec in [SpecVersion::V2, SpecVersion::V1] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        rt.block_on(async {
            let id = base_repo(dir.path(), spec).await;
            match spec {
                SpecVersion::V1 => {
                    hostile_ref_files(dir.path());
                }
                _ => hostile_repo_object(dir.path(), id).await,
            }
        });
        let info = ok_clean(&["info", d]);
        assert!(
            info.contains("    main  ") && info.contains("    ok  ") && info.contains("    v1  "),
            "{info}"
        );
        for listing in [
            ok_clean(&["branch", "list", d]),
            ok_clean(&["tag", "list", d]),
        ] {
            assert_eq!(
                listing.lines().count(),
                if listing.contains("main") { 2 } else { 1 },
                "{listing}"
            );
            for bad in ["red", "pwned", "csi", "../x", "a/b", "xxxx", "yyyy", "line"] {
                assert!(!listing.contains(bad), "{bad} listed: {listing}");
            }
        }
        let json = ok_clean(&["info", d, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["branches"].as_object().unwrap().len(), 2, "{json}");
        // Commit message and metadata: escaped in text, exact in JSON.
        let log = ok_clean(&["log", d]);
        assert!(
            log.contains("title \\u001b]0;pwned\\u0007\\u000dforged\\u001b[2J"),
            "{log}"
        );
        assert!(log.contains("    second \\u009b31m line"), "{log}");
        let log_json = ok_clean(&["log", d, "--json"]);
        let first: serde_json::Value =
            serde_json::from_str(log_json.lines().next().unwrap()).unwrap();
        assert_eq!(
            first["message"],
            "title \u{1b}]0;pwned\u{7}\rforged\u{1b}[2J\nsecond \u{9b}31m line"
        );
        assert_eq!(
            first["metadata"]["author\u{1b}[2J"],
            "evil\u{1b}[31m\u{9b}1m\u{7f}"
        );
        if spec == SpecVersion::V2 {
            ok_clean(&["ops-log", d]);
        }
        // Acting on a hostile name fails with a clean one-line error.
        for name in ["../x", "\u{1b}[31mred\u{1b}[0m", ".."] {
            let out = floe(&["branch", "delete", d, name]);
            assert!(!out.status.success(), "deleted {name:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!has_controls(&out.stderr), "{stderr:?}");
            let last = stderr.lines().last().unwrap_or_default();
            assert!(
                last.starts_with("floe: error: invalid branch name"),
                "{stderr}"
            );
        }
        let out = floe(&["log", d, "--ref", "\u{1b}[31mred\u{1b}[0m"]);
        assert!(!out.status.success());
        assert!(
            !has_controls(&out.stderr),
            "{:?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn spec1_ascii_controls_in_ref_files_are_a_clean_error() {
    // object_store cannot list a key holding an ASCII control character: listing refs
    // fails with a storage error, printed escaped.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(base_repo(dir.path(), SpecVersion::V1));
    assert!(plant(dir.path(), "branch.", "\u{1b}[31mred\u{1b}[0m"));
    let out = floe(&["branch", "list", d]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!has_controls(&out.stderr), "{stderr:?}");
    assert!(stderr.contains("\\u001b[31mred"), "{stderr}");
}
