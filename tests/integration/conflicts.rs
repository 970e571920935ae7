//! Conflicts, conflict solvers and amend.
//!
//! Every [`Conflict`] variant is produced by a rebase; [`BasicConflictSolver`]
//! resolves chunk conflicts by either side and deletions of changed nodes as
//! Icechunk's does; and Icechunk 2.3.0 runs the same scenarios on copies of the same
//! repository (`tests/python/conflict_oracle.py`) and agrees on which conflicts each
//! solver reports and what the branch holds after each resolved commit.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::common::{array_json, group_json, history, p};
use bytes::Bytes;
use floe::error::Conflict;
use floe::format::snapshot::NodeKind;
use floe::session::{
    BasicConflictSolver, CommitOptions, ConflictDetector, ConflictSolver, VersionSelection,
};
use floe::storage::LocalStorage;
use floe::{Error, Repository, Session, VersionSelector};
use serde_json::{json, Value};

/// A repository with a root group, group `/g` and int32 array `/a` of 4 one-element
/// chunks holding 10, 11, 12, 13.
async fn setup(dir: &Path) -> Repository {
    let repo = Repository::create(Arc::new(LocalStorage::new(dir).unwrap()), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/"), group_json(json!({}))).unwrap();
    s.add_group(&p("/g"), group_json(json!({}))).unwrap();
    s.add_array(&p("/a"), def("/a")).unwrap();
    for i in 0..4u32 {
        s.set_chunk(&p("/a"), &[i.into()], int(10 + i as i32))
            .await
            .unwrap();
    }
    s.commit("setup").await.unwrap();
    repo
}

fn def(path: &str) -> floe::session::ArrayDefinition {
    floe::session::array_definition(&p(path), array_json(&[4], &[1], "int32", json!(0))).unwrap()
}

fn int(v: i32) -> Bytes {
    Bytes::copy_from_slice(&v.to_le_bytes())
}

/// Makes the changes `steps`, as the oracle script spells them.
async fn apply(s: &Session, steps: &Value) {
    for step in steps.as_array().unwrap() {
        let path = p(step[1].as_str().unwrap());
        match step[0].as_str().unwrap() {
            "chunk" => {
                let i = step[2].as_u64().unwrap() as u32;
                let v = step[3].as_i64().unwrap() as i32;
                s.set_chunk(&path, &[i.into()], int(v)).await.unwrap();
            }
            "attr" => {
                let node = s.get_node(&path).unwrap();
                let mut meta: Value = serde_json::from_slice(&node.user_data).unwrap();
                meta["attributes"]["k"] = step[2].clone();
                let bytes = Bytes::from(serde_json::to_vec(&meta).unwrap());
                if node.is_group() {
                    s.update_group(&path, bytes).unwrap();
                } else {
                    let d = floe::session::array_definition(&path, bytes).unwrap();
                    s.update_array(&path, d).unwrap();
                }
            }
            "delete" => s.delete_node(&path).unwrap(),
            "create" => {
                s.add_array(&path, def(path.as_str())).unwrap();
            }
            other => panic!("unknown step {other}"),
        }
    }
}

/// The coarse class of a conflict, shared with the oracle's mapping of Icechunk's
/// conflict types.
fn class(c: &Conflict) -> &'static str {
    match c {
        Conflict::NewNodeAtExistingPath { .. } => "new_node_exists",
        Conflict::NodeMetadataChangedByBoth { .. } => "metadata_both",
        Conflict::ChunksChangedByBoth { .. } => "chunks_both",
        Conflict::ChunksWrittenWhileArrayChanged { .. } => "chunks_vs_metadata",
        Conflict::ChangedNodeWasDeleted { .. } => "changed_deleted",
        Conflict::DeletedNodeWasChanged { .. } => "deleted_changed",
        Conflict::BaseNotAncestor { .. } => "base_not_ancestor",
        _ => "other",
    }
}

fn solver(name: &str) -> Arc<dyn ConflictSolver> {
    let basic = BasicConflictSolver::default();
    match name {
        "detector" => Arc::new(ConflictDetector),
        "ours" => Arc::new(basic.on_chunk_conflict(VersionSelection::UseOurs)),
        "theirs" => Arc::new(basic.on_chunk_conflict(VersionSelection::UseTheirs)),
        "fail_deletes" => Arc::new(
            basic
                .fail_on_delete_of_updated_array(true)
                .fail_on_delete_of_updated_group(true),
        ),
        other => panic!("unknown solver {other}"),
    }
}

/// What the branch holds: `/a`'s values (fill value 0 where unwritten) or null,
/// and whether `/g` and `/n` exist.
async fn outcome(repo: &Repository) -> Value {
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let a = match r.get_node(&p("/a")) {
        Ok(_) => {
            let mut values = Vec::new();
            for i in 0..4u32 {
                let v = r.get_chunk(&p("/a"), &[i.into()], None).await.unwrap();
                values.push(v.map_or(0, |b| i32::from_le_bytes(b[..4].try_into().unwrap())));
            }
            json!(values)
        }
        Err(Error::NodeNotFound { .. }) => Value::Null,
        Err(e) => panic!("{e}"),
    };
    json!({"a": a, "g": r.get_node(&p("/g")).is_ok(), "n": r.get_node(&p("/n")).is_ok()})
}

/// Runs one scenario in floe on a copy of `base`.
async fn run_floe(base: &Path, scenario: &Value, solver_name: &str) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    common::copy_tree(base, &dir);
    let repo = Repository::open(Arc::new(LocalStorage::new(&dir).unwrap()))
        .await
        .unwrap();
    let theirs = repo.writable_session("main").await.unwrap();
    let ours = repo.writable_session("main").await.unwrap();
    apply(&theirs, &scenario["theirs"]).await;
    theirs.commit("theirs").await.unwrap();
    apply(&ours, &scenario["ours"]).await;
    let mut options = CommitOptions::default();
    options.solver = solver(solver_name);
    match ours.commit_with("ours", BTreeMap::new(), options).await {
        Ok(_) => json!({"ok": outcome(&repo).await}),
        Err(Error::Conflict(c)) => {
            let classes: BTreeSet<&str> = c.conflicts.iter().map(class).collect();
            json!({ "conflicts": classes })
        }
        Err(e) => panic!("{e}"),
    }
}

fn scenarios() -> Value {
    json!([
        {"name": "chunks_both", "theirs": [["chunk", "/a", 0, 100]],
         "ours": [["chunk", "/a", 0, 200], ["chunk", "/a", 1, 201]]},
        {"name": "metadata_both", "theirs": [["attr", "/a", 1]], "ours": [["attr", "/a", 2]]},
        {"name": "chunks_after_their_metadata", "theirs": [["attr", "/a", 1]],
         "ours": [["chunk", "/a", 2, 202]]},
        {"name": "metadata_after_their_chunks", "theirs": [["chunk", "/a", 2, 102]],
         "ours": [["attr", "/a", 2]]},
        {"name": "delete_of_updated_array", "theirs": [["chunk", "/a", 0, 100]],
         "ours": [["delete", "/a"]]},
        {"name": "update_of_deleted_array", "theirs": [["delete", "/a"]],
         "ours": [["attr", "/a", 2]]},
        {"name": "chunks_of_deleted_array", "theirs": [["delete", "/a"]],
         "ours": [["chunk", "/a", 0, 200]]},
        {"name": "new_node_both", "theirs": [["create", "/n"]], "ours": [["create", "/n"]]},
        {"name": "deleted_by_both", "theirs": [["delete", "/a"]], "ours": [["delete", "/a"]]},
        {"name": "delete_of_updated_group", "theirs": [["attr", "/g", 1]],
         "ours": [["delete", "/g"]]},
        {"name": "disjoint", "theirs": [["chunk", "/a", 0, 100]],
         "ours": [["chunk", "/a", 1, 201], ["attr", "/g", 3]]}
    ])
}

const SOLVERS: [&str; 4] = ["detector", "ours", "theirs", "fail_deletes"];

async fn floe_outcomes(base: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for sc in scenarios().as_array().unwrap() {
        for name in SOLVERS {
            let key = format!("{}/{name}", sc["name"].as_str().unwrap());
            out.insert(key, run_floe(base, sc, name).await);
        }
    }
    out
}

#[tokio::test]
async fn solvers_resolve_as_specified() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    setup(&base).await;
    let got = floe_outcomes(&base).await;
    let ok = |a: Value, g: bool, n: bool| json!({"ok": {"a": a, "g": g, "n": n}});
    let fail = |classes: &[&str]| json!({ "conflicts": classes });
    let expect = |key: &str, want: Value| assert_eq!(got[key], want, "{key}");
    expect("chunks_both/detector", fail(&["chunks_both"]));
    expect(
        "chunks_both/ours",
        ok(json!([200, 201, 12, 13]), true, false),
    );
    expect(
        "chunks_both/theirs",
        ok(json!([100, 201, 12, 13]), true, false),
    );
    expect("metadata_both/ours", fail(&["metadata_both"]));
    expect(
        "chunks_after_their_metadata/ours",
        fail(&["chunks_vs_metadata"]),
    );
    expect(
        "metadata_after_their_chunks/detector",
        ok(json!([10, 11, 102, 13]), true, false),
    );
    expect(
        "delete_of_updated_array/detector",
        fail(&["deleted_changed"]),
    );
    expect("delete_of_updated_array/ours", ok(Value::Null, true, false));
    expect(
        "delete_of_updated_array/fail_deletes",
        fail(&["deleted_changed"]),
    );
    expect("update_of_deleted_array/theirs", fail(&["changed_deleted"]));
    expect("chunks_of_deleted_array/ours", fail(&["changed_deleted"]));
    expect("new_node_both/ours", fail(&["new_node_exists"]));
    expect("deleted_by_both/detector", ok(Value::Null, true, false));
    expect(
        "delete_of_updated_group/detector",
        fail(&["deleted_changed"]),
    );
    expect(
        "delete_of_updated_group/ours",
        ok(json!([10, 11, 12, 13]), false, false),
    );
    expect(
        "delete_of_updated_group/fail_deletes",
        fail(&["deleted_changed"]),
    );
    expect(
        "disjoint/detector",
        ok(json!([100, 201, 12, 13]), true, false),
    );
}

#[tokio::test]
async fn icechunk_agrees_on_conflicts_and_resolutions() {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    setup(&base).await;
    let spec = tmp.path().join("spec.json");
    let out = tmp.path().join("out.json");
    std::fs::write(
        &spec,
        serde_json::to_vec(&json!({"repo": base, "scenarios": scenarios(), "solvers": SOLVERS}))
            .unwrap(),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/conflict_oracle.py");
    let run = Command::new(py)
        .arg(script)
        .arg(&spec)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "conflict_oracle.py: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let icechunk: BTreeMap<String, Value> =
        serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let floe = floe_outcomes(&base).await;
    let differ: Vec<String> = floe
        .iter()
        .filter(|(k, v)| icechunk.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}: floe {v}, icechunk {}",
                icechunk.get(k).unwrap_or(&Value::Null)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "floe and Icechunk 2.3.0 differ:\n{}",
        differ.join("\n")
    );
    assert_eq!(floe.len(), 44);
}

#[tokio::test]
async fn every_conflict_variant_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = setup(tmp.path()).await;
    let a_id = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap()
        .get_node(&p("/a"))
        .unwrap()
        .id;
    let conflicts = |e: Error| match e {
        Error::Conflict(c) => c.conflicts,
        other => panic!("expected a conflict, got {other}"),
    };
    let pair = || async {
        (
            repo.writable_session("main").await.unwrap(),
            repo.writable_session("main").await.unwrap(),
        )
    };

    // NodeMetadataChangedByBoth.
    let (t, o) = pair().await;
    apply(&t, &json!([["attr", "/a", 1]])).await;
    apply(&o, &json!([["attr", "/a", 2]])).await;
    t.commit("t").await.unwrap();
    let c = conflicts(o.commit("o").await.unwrap_err());
    assert_eq!(
        c,
        vec![Conflict::NodeMetadataChangedByBoth { path: p("/a") }]
    );

    // DeletedNodeWasChanged, for an array and for a group.
    let (t, o) = pair().await;
    apply(&t, &json!([["chunk", "/a", 3, 5], ["attr", "/g", 9]])).await;
    apply(&o, &json!([["delete", "/a"], ["delete", "/g"]])).await;
    t.commit("t").await.unwrap();
    let c = conflicts(o.commit("o").await.unwrap_err());
    let g_id = t.get_node(&p("/g")).unwrap().id;
    assert_eq!(c.len(), 2, "one conflict per deleted node: {c:?}");
    let err = o.rebase().await.unwrap_err();
    let c = conflicts(err);
    assert!(c.contains(&Conflict::DeletedNodeWasChanged {
        path: p("/a"),
        node: a_id,
        kind: NodeKind::Array
    }));
    assert!(c.contains(&Conflict::DeletedNodeWasChanged {
        path: p("/g"),
        node: g_id,
        kind: NodeKind::Group
    }));
    // The basic solver deletes both anyway.
    o.rebase_with(&BasicConflictSolver::default())
        .await
        .unwrap();
    o.commit("o").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(matches!(
        r.get_node(&p("/a")),
        Err(Error::NodeNotFound { .. })
    ));
    assert!(matches!(
        r.get_node(&p("/g")),
        Err(Error::NodeNotFound { .. })
    ));

    // BaseNotAncestor: the branch was reset to a history without the base.
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/x"), group_json(json!({}))).unwrap();
    let base = s.snapshot_id();
    let initial = *history(&repo, base).await.last().unwrap();
    let current = repo.lookup_branch("main").await.unwrap();
    repo.reset_branch("main", initial, Some(current))
        .await
        .unwrap();
    let c = conflicts(s.commit("after reset").await.unwrap_err());
    assert_eq!(c, vec![Conflict::BaseNotAncestor { base }]);
}

#[tokio::test]
async fn amend_replaces_the_tip() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = setup(tmp.path()).await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[0], int(1)).await.unwrap();
    let first = s.commit("first try").await.unwrap();
    let parent = history(&repo, first).await[1];
    s.set_chunk(&p("/a"), &[1], int(2)).await.unwrap();
    let meta = BTreeMap::from([("fixed".to_string(), json!(true))]);
    let amended = s.amend("first, fixed", meta).await.unwrap();
    assert_ne!(amended, first);
    assert_eq!(repo.lookup_branch("main").await.unwrap(), amended);
    let log = repo.ancestry(amended).await.unwrap();
    assert_eq!(
        log[0].parent_id,
        Some(parent),
        "the parent of the replaced commit"
    );
    assert_eq!(log[0].message, "first, fixed");
    assert_eq!(log[0].metadata["fixed"], json!(true));
    assert!(
        !log.iter().any(|i| i.id == first),
        "the replaced commit left the history"
    );
    assert_eq!(
        outcome(&repo).await["a"],
        json!([1, 2, 12, 13]),
        "both commits' changes"
    );
    // The transaction log covers both: the diff from the parent lists both chunks.
    let diff = repo.diff(parent, amended).await.unwrap();
    let text = format!("{diff:?}");
    assert!(text.contains("[0]") && text.contains("[1]"), "{text}");

    // Amend is a compare-and-swap: a moved branch is a conflict, not a loss.
    let other = repo.writable_session("main").await.unwrap();
    other.set_chunk(&p("/a"), &[2], int(3)).await.unwrap();
    let theirs = other.commit("other").await.unwrap();
    s.set_chunk(&p("/a"), &[3], int(4)).await.unwrap();
    let err = s.amend("too late", BTreeMap::new()).await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(c) if c.winning_snapshot == theirs),
        "{err}"
    );
    assert_eq!(repo.lookup_branch("main").await.unwrap(), theirs);
    assert_eq!(outcome(&repo).await["a"], json!([1, 2, 3, 13]));

    // Nothing to amend on a fresh repository; forks and read-only sessions refuse.
    let fresh = Repository::create(floe::storage::new_in_memory_storage(), None)
        .await
        .unwrap();
    let f = fresh.writable_session("main").await.unwrap();
    assert!(matches!(
        f.amend("no", BTreeMap::new()).await,
        Err(Error::NoAmendForInitialCommit)
    ));
    let fork = s.fork().await.unwrap();
    assert!(matches!(
        fork.amend("no", BTreeMap::new()).await,
        Err(Error::ForkCannotCommit)
    ));
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(matches!(
        r.amend("no", BTreeMap::new()).await,
        Err(Error::ReadOnlySession)
    ));
}

#[tokio::test]
async fn icechunk_reads_an_amended_repository() {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let repo = setup(tmp.path()).await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[0], int(1)).await.unwrap();
    s.commit("first try").await.unwrap();
    s.set_chunk(&p("/a"), &[1], int(2)).await.unwrap();
    let amended = s.amend("first, fixed", BTreeMap::new()).await.unwrap();
    let script = r#"
import json, sys, icechunk, zarr
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))
log = [(s.id, s.message) for s in repo.ancestry(branch="main")]
s = repo.readonly_session(branch="main")
a = [int(x) for x in zarr.open_array(s.store, path="a", mode="r")[:]]
print(json.dumps({"log": log, "a": a}))
"#;
    let out = common::python_stdout(&py, script, &[tmp.path().to_str().unwrap()]);
    let got: Value = serde_json::from_str(&out).unwrap();
    let floe_log: Vec<Value> = repo
        .ancestry(amended)
        .await
        .unwrap()
        .into_iter()
        .map(|i| json!([i.id.to_string(), i.message]))
        .collect();
    assert_eq!(
        got["log"],
        json!(floe_log),
        "Icechunk sees the amended history"
    );
    assert_eq!(got["a"], json!([1, 2, 12, 13]));
}
