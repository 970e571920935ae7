//! Snapshot expiry and garbage collection: the rules on a scenario whose outcome
//! follows from them, dry runs, the CLI, and Icechunk 2.3.0 as the oracle on copies of
//! the same repository (same expired snapshots, same summary, same objects left).

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{array_def, p};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use floe::format::SpecVersion;
use floe::lifecycle::{ExpireOptions, GcOptions, GcSummary};
use floe::storage::LocalStorage;
use floe::{Repository, SnapshotId, VersionSelector};

/// Chunk bytes of one value, large enough to be stored as a native chunk object.
fn chunk(v: u8) -> Bytes {
    Bytes::from(vec![v; 1024])
}

/// The snapshots of the scenario, oldest first, and the cut-off between c2 and c3.
struct Scenario {
    c1: SnapshotId,
    c2: SnapshotId,
    c3: SnapshotId,
    c4: SnapshotId,
    cut_off: DateTime<Utc>,
}

/// `main`: init ← c1 ← c2 ← c3 ← c4, with the cut-off between c2 and c3; tag `old` and
/// branch `gone` at c1, branch `side` at c2. One array `/a` of four 1 KiB chunks.
async fn scenario(dir: &Path) -> Scenario {
    scenario_spec(dir, SpecVersion::V1).await
}

/// [`scenario`] in a repository of spec version `spec`.
async fn scenario_spec(dir: &Path, spec: SpecVersion) -> Scenario {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create_with(storage, None, spec, floe::OpenOptions::default())
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4096], &[1024], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[0], chunk(1)).await.unwrap();
    let c1 = s.commit("c1").await.unwrap();
    s.set_chunk(&p("/a"), &[0], chunk(2)).await.unwrap();
    s.set_chunk(&p("/a"), &[1], chunk(3)).await.unwrap();
    let c2 = s.commit("c2").await.unwrap();
    repo.create_tag("old", c1).await.unwrap();
    repo.create_branch("gone", c1).await.unwrap();
    repo.create_branch("side", c2).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cut_off = Utc::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.set_chunk(&p("/a"), &[0], chunk(4)).await.unwrap();
    let c3 = s.commit("c3").await.unwrap();
    s.set_chunk(&p("/a"), &[1], chunk(5)).await.unwrap();
    let c4 = s.commit("c4").await.unwrap();
    Scenario {
        c1,
        c2,
        c3,
        c4,
        cut_off,
    }
}

/// Every object key under `dir`, relative and `/`-separated.
fn objects(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy();
                out.insert(rel.replace('\\', "/"));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    // floe's garbage-collection state (`floe/gc-state`) is not an Icechunk object:
    // collections with and without it, and Icechunk's, are compared on the rest.
    out.retain(|k| !k.starts_with("floe/"));
    out
}

/// What a collection deleted: its summary's Icechunk fields (the JSON form), not the
/// counts of manifests it read, which depend on the collection state.
fn deletions(summary: &GcSummary) -> serde_json::Value {
    serde_json::to_value(summary).unwrap()
}

async fn open(dir: &Path) -> Repository {
    Repository::open(Arc::new(LocalStorage::new(dir).unwrap()))
        .await
        .unwrap()
}

async fn ancestry(repo: &Repository, branch: &str) -> Vec<SnapshotId> {
    common::history(repo, repo.lookup_branch(branch).await.unwrap()).await
}

/// Expires before `cut_off`, deleting expired branches and tags.
async fn expire_deleting_refs(
    repo: &Repository,
    cut_off: DateTime<Utc>,
) -> floe::lifecycle::ExpireResult {
    repo.expire_snapshots(
        cut_off,
        ExpireOptions::default()
            .delete_expired_branches(true)
            .delete_expired_tags(true),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn expiry_and_collection_follow_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path()).await;
    let repo = open(dir.path()).await;
    let init = *ancestry(&repo, "main").await.last().unwrap();

    let before = objects(dir.path());
    let expired = expire_deleting_refs(&repo, sc.cut_off).await;
    assert_eq!(expired.expired, BTreeSet::from([sc.c1, sc.c2]));
    // main's oldest live snapshot, and side's tip (whose own history was all expired).
    assert_eq!(expired.edited, BTreeSet::from([sc.c3, sc.c2]));
    assert_eq!(expired.deleted_branches, vec!["gone", "side"]);
    assert_eq!(expired.deleted_tags, vec!["old"]);
    assert_eq!(repo.list_branches().await.unwrap(), vec!["main"]);
    assert!(repo.list_tags().await.unwrap().is_empty());
    // Expiry only edits history: no object but the deleted branches' refs is deleted
    // (a tag tombstone is added).
    let removed: Vec<String> = before.difference(&objects(dir.path())).cloned().collect();
    assert_eq!(
        removed,
        vec!["refs/branch.gone/ref.json", "refs/branch.side/ref.json"]
    );
    let fresh = open(dir.path()).await;
    assert_eq!(ancestry(&fresh, "main").await, vec![sc.c4, sc.c3, init]);
    // The values of the live snapshots are unchanged.
    let main = fresh
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        main.get_chunk(&p("/a"), &[0], None).await.unwrap(),
        Some(chunk(4))
    );
    assert_eq!(
        main.get_chunk(&p("/a"), &[1], None).await.unwrap(),
        Some(chunk(5))
    );

    // A dry run reports what a real run deletes, and deletes nothing.
    let before_gc = objects(dir.path());
    let before_sizes: BTreeMap<String, u64> = before_gc
        .iter()
        .map(|k| {
            (
                k.clone(),
                std::fs::metadata(dir.path().join(k)).unwrap().len(),
            )
        })
        .collect();
    let dry = fresh
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true).dry_run(true),
            None,
        )
        .await
        .unwrap();
    assert_eq!(objects(dir.path()), before_gc);
    let real = fresh
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    assert_eq!(dry, real);
    // c1's snapshot goes (c2's was rewritten by expiry, so it is newer than the
    // cut-off), with both transaction logs, both manifests and the chunks only c1 and
    // c2 reference (values 1 and 2; value 3 is still in c3).
    assert_eq!(
        (
            real.snapshots_deleted,
            real.transaction_logs_deleted,
            real.manifests_deleted,
            real.chunks_deleted,
            real.attributes_deleted
        ),
        (1, 2, 2, 2, 0),
        "{real:?}"
    );
    let gone: BTreeSet<String> = before_gc
        .difference(&objects(dir.path()))
        .cloned()
        .collect();
    assert_eq!(gone.len(), 7, "{gone:?}");
    assert!(gone.contains(&format!("snapshots/{}", sc.c1)));
    assert!(gone.contains(&format!("transactions/{}", sc.c2)));
    assert!(!gone
        .iter()
        .any(|k| k.starts_with("refs/") || k == "config.yaml"));
    let gone_bytes: u64 = gone.iter().map(|k| before_sizes[k]).sum();
    assert_eq!(real.bytes_deleted, gone_bytes);
    // Everything live still reads.
    let again = open(dir.path()).await;
    let main = again
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(
        main.get_chunk(&p("/a"), &[1], None).await.unwrap(),
        Some(chunk(5))
    );
    let c3 = again
        .readonly_session(&VersionSelector::Snapshot(sc.c3))
        .await
        .unwrap();
    assert_eq!(
        c3.get_chunk(&p("/a"), &[1], None).await.unwrap(),
        Some(chunk(3))
    );
    // A second collection finds nothing more.
    let none = again
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    assert_eq!(deletions(&none), deletions(&GcSummary::default()));
}

#[tokio::test]
async fn objects_newer_than_the_cut_off_survive_even_when_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path()).await;
    let repo = open(dir.path()).await;
    // Nothing expired, but everything after c2 is made unreachable by moving main back.
    repo.delete_branch("side").await.unwrap();
    repo.reset_branch("main", sc.c2, None).await.unwrap();
    let summary = repo
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    // c3 and c4 are unreachable but newer than the cut-off: kept, as an in-flight
    // commit's objects would be.
    assert_eq!(deletions(&summary), deletions(&GcSummary::default()));
    let s3 = repo
        .readonly_session(&VersionSelector::Snapshot(sc.c4))
        .await
        .unwrap();
    assert_eq!(
        s3.get_chunk(&p("/a"), &[1], None).await.unwrap(),
        Some(chunk(5))
    );
}

fn floe_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_floe"))
}

#[test]
fn cli_expire_and_gc_print_json() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sc = rt.block_on(scenario(dir.path()));
    let repo = dir.path().to_str().unwrap();
    let time = sc.cut_off.to_rfc3339();
    let run = |args: &[&str]| {
        let out = Command::new(floe_bin()).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let expired = run(&["expire", repo, "--older-than", &time, "--json"]);
    let ids: BTreeSet<String> = expired["expired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, BTreeSet::from([sc.c1.to_string(), sc.c2.to_string()]));
    assert_eq!(expired["deleted_branches"], serde_json::json!([]));
    // Refs were kept, so everything is still reachable: nothing to collect.
    let dry = run(&[
        "gc",
        repo,
        "--older-than",
        &time,
        "--dry-run",
        "--allow-recent-cutoff",
        "--json",
    ]);
    for field in [
        "chunks_deleted",
        "manifests_deleted",
        "snapshots_deleted",
        "transaction_logs_deleted",
        "attributes_deleted",
        "bytes_deleted",
    ] {
        assert_eq!(dry[field], 0, "{field}: {dry}");
    }
    let out = Command::new(floe_bin())
        .args(["gc", repo, "--older-than", "yesterday"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("yesterday"));
}

/// Every object under `dir` with its bytes: a spec-1 expiry rewrites a snapshot in
/// place (same key), a spec-2 one the `repo` object, so keys alone would not show a write.
fn object_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    objects(dir)
        .into_iter()
        .map(|k| {
            let bytes = std::fs::read(dir.join(&k)).unwrap();
            (k, bytes)
        })
        .collect()
}

/// `floe expire --dry-run` names what it would expire, rewrite and delete, writes
/// nothing (every object byte-identical), and says what the real expiry then does.
#[test]
fn cli_expire_dry_run_writes_nothing() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let sc = rt.block_on(scenario_spec(dir.path(), spec));
        let repo = dir.path().to_str().unwrap();
        let time = sc.cut_off.to_rfc3339();
        let run = |extra: &[&str]| {
            let mut args = vec![
                "expire",
                repo,
                "--older-than",
                &time,
                "--delete-expired-branches",
                "--delete-expired-tags",
            ];
            args.extend_from_slice(extra);
            let out = Command::new(floe_bin()).args(&args).output().unwrap();
            assert!(
                out.status.success(),
                "{spec:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let before = object_bytes(dir.path());
        let text = run(&["--dry-run"]);
        assert!(
            text.starts_with("Dry run: would expire 2 snapshot(s)"),
            "{spec:?}: {text}"
        );
        for line in [
            format!("would expire snapshot {}", sc.c1),
            format!("would expire snapshot {}", sc.c2),
            "would delete branch gone".to_string(),
            "would delete branch side".to_string(),
            "would delete tag old".to_string(),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{spec:?}: `{line}` not in {text}"
            );
        }
        let dry: serde_json::Value = serde_json::from_str(&run(&["--dry-run", "--json"])).unwrap();
        assert_eq!(dry["dry_run"], true);
        assert_eq!(
            object_bytes(dir.path()),
            before,
            "{spec:?}: a dry run wrote"
        );
        let repo_now = rt.block_on(open(dir.path()));
        let refs = rt.block_on(repo_now.list_branches()).unwrap();
        for b in ["gone", "side"] {
            assert!(refs.iter().any(|r| r == b), "{spec:?}: {refs:?}");
        }

        // The real expiry does what the dry run said.
        let mut done: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
        assert_eq!(done["dry_run"], false);
        done["dry_run"] = true.into();
        assert_eq!(done, dry, "{spec:?}");
        assert_ne!(object_bytes(dir.path()), before, "{spec:?}");
    }
}

/// Icechunk's report and what it leaves behind, from `lifecycle_oracle.py`.
fn oracle(py: &Path, repo: &Path, expire: DateTime<Utc>, gc: DateTime<Utc>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/lifecycle_oracle.py");
    let out = Command::new(py)
        .arg(script)
        .arg(repo)
        .arg(expire.timestamp_micros().to_string())
        .arg(gc.timestamp_micros().to_string())
        .args(["--delete-expired-branches", "--delete-expired-tags"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lifecycle_oracle.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn icechunk_agrees_on_expiry_and_collection() {
    icechunk_agrees(SpecVersion::V1).await;
}

/// On spec 2 expiry and collection edit the `repo` object: icechunk 2.x and floe
/// leave the same objects (but the `repo` object and its backups) and the same
/// parent links and pruned transaction logs.
#[tokio::test]
async fn icechunk_agrees_on_expiry_and_collection_on_spec2() {
    icechunk_agrees(SpecVersion::V2).await;
}

/// The objects of a repository but the `repo` object and its `overwritten/` copies
/// (their names and ops logs differ between writers).
fn data_objects(dir: &Path) -> BTreeSet<String> {
    objects(dir)
        .into_iter()
        .filter(|k| k != "repo" && !k.starts_with("overwritten/"))
        .collect()
}

async fn icechunk_agrees(spec: SpecVersion) {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    let sc = scenario_spec(&original, spec).await;
    let (ours, theirs) = (dir.path().join("floe"), dir.path().join("icechunk"));
    common::copy_tree(&original, &ours);
    common::copy_tree(&original, &theirs);

    let repo = open(&ours).await;
    let expired = expire_deleting_refs(&repo, sc.cut_off).await;
    let summary = open(&ours)
        .await
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();

    let ice = oracle(&py, &theirs, sc.cut_off, sc.cut_off);
    let ice_expired: BTreeSet<String> = ice["expired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let our_expired: BTreeSet<String> = expired.expired.iter().map(ToString::to_string).collect();
    assert_eq!(our_expired, ice_expired, "expired snapshots");
    let ours_summary = serde_json::to_value(summary).unwrap();
    assert_eq!(ours_summary, ice["gc"], "GC summary");
    assert_eq!(
        data_objects(&ours),
        data_objects(&theirs),
        "objects left behind"
    );
    if spec == SpecVersion::V2 {
        let links = |dir: &Path| {
            let bytes = std::fs::read(dir.join("repo")).unwrap();
            let info = floe::format::repo_info::RepoInfo::decode(&bytes).unwrap();
            let links: BTreeMap<String, (Option<String>, Option<Vec<String>>)> = info
                .snapshots
                .values()
                .map(|s| {
                    (
                        s.id.to_string(),
                        (
                            s.parent_id.map(|p| p.to_string()),
                            s.pruned_ancestor_tx_logs
                                .as_ref()
                                .map(|v| v.iter().map(ToString::to_string).collect()),
                        ),
                    )
                })
                .collect();
            (links, info.branches, info.tags, info.deleted_tags)
        };
        assert_eq!(
            links(&ours),
            links(&theirs),
            "repo objects after expiry and GC"
        );
        assert!(
            links(&ours).0.values().any(|(_, pruned)| pruned.is_some()),
            "the scenario re-parented nothing"
        );
    }

    // Icechunk reads floe's result as floe does: same refs and histories.
    let epoch = DateTime::<Utc>::from_timestamp(0, 0).unwrap();
    let seen = oracle(&py, &ours, epoch, epoch);
    assert_eq!(seen["expired"], serde_json::json!([]));
    let fresh = open(&ours).await;
    let mut ours_ancestry = BTreeMap::new();
    for b in fresh.list_branches().await.unwrap() {
        let ids: Vec<String> = ancestry(&fresh, &b)
            .await
            .iter()
            .map(ToString::to_string)
            .collect();
        ours_ancestry.insert(format!("branch.{b}"), ids);
    }
    assert_eq!(
        serde_json::to_value(&ours_ancestry).unwrap(),
        ice["ancestry"]
    );
    assert_eq!(seen["ancestry"], ice["ancestry"]);
}

/// A spec-1 repository with 200 native chunks in `c1`, 150 of them overwritten in
/// `c2`, and a cut-off after `c2`; returns the cut-off. Spec 1 because its users
/// compare the objects left in copies of it object for object, and on spec 2 each
/// copy's expiry saves `overwritten/repo.<time>.<random>` backups of its own names.
async fn many_chunks(dir: &Path) -> DateTime<Utc> {
    let repo = common::create_spec1(Arc::new(LocalStorage::new(dir).unwrap()), None).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/b"), array_def("/b", &[200], &[1], "uint8"))
        .unwrap();
    for i in 0..200u32 {
        s.set_chunk(&p("/b"), &[i.into()], chunk(i as u8))
            .await
            .unwrap();
    }
    s.commit("c1").await.unwrap();
    for i in 0..150u32 {
        s.set_chunk(&p("/b"), &[i.into()], chunk(200 - i as u8 / 2))
            .await
            .unwrap();
    }
    s.commit("c2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    Utc::now()
}

/// A copy of the repository at `base` in `dir`, opened and expired (deleting
/// expired refs) before `cut_off`.
async fn expired_copy(base: &Path, dir: &Path, cut_off: DateTime<Utc>) -> (PathBuf, Repository) {
    common::copy_tree(base, dir);
    let repo = open(dir).await;
    expire_deleting_refs(&repo, cut_off).await;
    (dir.to_path_buf(), repo)
}

#[tokio::test]
async fn collection_in_passes_deletes_exactly_what_one_pass_deletes() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let cut_off = many_chunks(&base).await;
    let mut results = Vec::new();
    // One pass; 1-character slices of the id space; 2-character slices (ids
    // budgeted one at a time).
    for (name, budget) in [("one", 1u64 << 30), ("some", 20), ("many", 1)] {
        let dir = tmp.path().join(name);
        common::copy_tree(&base, &dir);
        let repo = open(&dir).await;
        expire_deleting_refs(&repo, cut_off).await;
        let options = GcOptions::default()
            .allow_recent_cutoff(true)
            .max_chunk_ids_in_memory(budget);
        let summary = repo.garbage_collect(cut_off, options, None).await.unwrap();
        // Every value still reads after collection.
        let r = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        for i in 0..200u32 {
            let want = if i < 150 {
                chunk(200 - i as u8 / 2)
            } else {
                chunk(i as u8)
            };
            assert_eq!(
                r.get_chunk(&p("/b"), &[i.into()], None).await.unwrap(),
                Some(want)
            );
        }
        results.push((summary, objects(&dir)));
    }
    assert_eq!(results[0].0.chunks_deleted, 150, "{:?}", results[0].0);
    for (summary, objects) in &results[1..] {
        assert_eq!(deletions(summary), deletions(&results[0].0));
        assert_eq!(*objects, results[0].1);
    }
}

/// Where storage lists key ranges cheaply, every object directory is listed as one
/// range per first id character, concurrently: the result is the same as one listing
/// per directory, with and without passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranged_listings_collect_exactly_what_one_listing_collects() {
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let cut_off = many_chunks(&base).await;
    let (plain, repo) = expired_copy(&base, &tmp.path().join("plain"), cut_off).await;
    let want = repo
        .garbage_collect(
            cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    assert_eq!(want.chunks_deleted, 150, "{want:?}");

    for (name, budget) in [("ranged", 1u64 << 30), ("ranged-passes", 20)] {
        let dir = tmp.path().join(name);
        common::copy_tree(&base, &dir);
        let listed: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = listed.clone();
        let storage = Arc::new(
            FaultyStorage::new(
                Arc::new(LocalStorage::new(&dir).unwrap()),
                Box::new(move |call, key| {
                    if call == Call::List {
                        seen.lock().unwrap().push(key.to_string());
                    }
                    Fault::None
                }),
            )
            .with_ranged_listing(true),
        );
        let repo = Repository::open(storage).await.unwrap();
        expire_deleting_refs(&repo, cut_off).await;
        listed.lock().unwrap().clear();
        let options = GcOptions::default()
            .allow_recent_cutoff(true)
            .max_chunk_ids_in_memory(budget)
            .list_concurrency(4);
        let summary = repo.garbage_collect(cut_off, options, None).await.unwrap();
        assert_eq!(deletions(&summary), deletions(&want), "{name}");
        assert_eq!(objects(&dir), objects(&plain), "{name}");
        let listed = listed.lock().unwrap().clone();
        for dir in ["snapshots/", "transactions/", "manifests/", "chunks/"] {
            assert!(
                !listed.iter().any(|k| k == dir),
                "{name}: {dir} listed whole: {listed:?}"
            );
            let ranges = listed.iter().filter(|k| k.starts_with(dir)).count();
            assert!(ranges >= 32, "{name}: {dir} in {ranges} ranges: {listed:?}");
        }
    }
}

/// `inner` whose deletes of keys under `dir` fail (before reaching the storage).
fn failing_deletes(
    inner: Arc<dyn floe::storage::Storage>,
    dir: &'static str,
) -> Arc<floe::storage::fault::FaultyStorage> {
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    let plan = move |call, key: &str| {
        if call == Call::Delete && key.starts_with(dir) {
            Fault::FailBefore
        } else {
            Fault::None
        }
    };
    Arc::new(FaultyStorage::new(inner, Box::new(plan)))
}

/// As Icechunk 2.3.0: a delete batch that fails is counted, not fatal, and the kinds
/// of objects after it are not swept (snapshots, then transaction logs, manifests
/// and chunks), so nothing left lists an object that is gone; the next collection
/// deletes exactly what one collection without failures deletes. Chunk deletes that
/// fail, the last kind, skip nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_deletes_are_counted_and_skip_the_kinds_after_them() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let cut_off = many_chunks(&base).await;
    let (plain, repo) = expired_copy(&base, &tmp.path().join("plain"), cut_off).await;
    let options = GcOptions::default()
        .allow_recent_cutoff(true)
        .delete_attempts(1);
    let want = repo.garbage_collect(cut_off, options, None).await.unwrap();
    assert!(
        want.snapshots_deleted > 0 && want.chunks_deleted == 150,
        "{want:?}"
    );
    assert_eq!(want.objects_failed_to_delete, 0);

    for (dir, skipped) in [
        (
            "snapshots/",
            &["transaction_logs", "manifests", "chunks"][..],
        ),
        ("manifests/", &["chunks"][..]),
        ("chunks/", &[][..]),
    ] {
        let (copy, repo) =
            expired_copy(&base, &tmp.path().join(dir.trim_end_matches('/')), cut_off).await;
        let faulty = failing_deletes(Arc::new(LocalStorage::new(&copy).unwrap()), dir);
        let failing = Repository::open(faulty).await.unwrap();
        let summary = failing
            .garbage_collect(cut_off, options, None)
            .await
            .unwrap();
        assert_eq!(summary.skipped_phases, skipped, "{dir}: {summary:?}");
        assert!(summary.objects_failed_to_delete > 0, "{dir}: {summary:?}");
        assert_eq!(summary.delete_errors.len(), 1, "{dir}: {summary:?}");
        assert!(summary.delete_errors[0].contains(dir), "{dir}: {summary:?}");
        assert_eq!(summary.throttled_batches, 0);
        if skipped.contains(&"chunks") {
            assert_eq!(summary.chunks_deleted, 0, "{dir}: {summary:?}");
            assert_eq!(summary.manifests_deleted, 0, "{dir}: {summary:?}");
        }
        // Nothing the refs reach is gone, and the next collection finishes the job.
        let r = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        for i in 0..200u32 {
            let got = r.get_chunk(&p("/b"), &[i.into()], None).await;
            assert!(matches!(got, Ok(Some(_))), "{dir}: chunk {i}: {got:?}");
        }
        let again = open(&copy)
            .await
            .garbage_collect(cut_off, options, None)
            .await
            .unwrap();
        assert_eq!(again.objects_failed_to_delete, 0, "{dir}: {again:?}");
        assert!(again.skipped_phases.is_empty(), "{dir}: {again:?}");
        assert_eq!(objects(&copy), objects(&plain), "{dir}");
    }
}

/// Delete batches failing in a row stop the collection with `GcDeletesFailing`,
/// naming the directory, after `max_consecutive_delete_failures` of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_failing_in_a_row_stop_the_collection() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let cut_off = many_chunks(&dir).await;
    expire_deleting_refs(&open(&dir).await, cut_off).await;
    let before = objects(&dir);
    let faulty = failing_deletes(Arc::new(LocalStorage::new(&dir).unwrap()), "");
    let repo = Repository::open(faulty).await.unwrap();
    let options = GcOptions::default()
        .allow_recent_cutoff(true)
        .delete_attempts(1)
        .max_consecutive_delete_failures(1);
    let got = repo.garbage_collect(cut_off, options, None).await;
    match got {
        Err(floe::Error::GcDeletesFailing {
            prefix, failures, ..
        }) => {
            assert_eq!(prefix, "snapshots/");
            assert_eq!(failures, 1);
        }
        other => panic!("expected GcDeletesFailing, got {other:?}"),
    }
    // The `repo` object of spec 2 aside (spec 1 here), nothing was deleted.
    assert_eq!(objects(&dir), before);
}

/// `inner` seen as object storage (ranged listings) whose manifest reads each wait
/// `ms` milliseconds first; `seen` is told of every call.
fn slow_manifest_reads(
    inner: Arc<dyn floe::storage::Storage>,
    ms: u64,
    seen: impl Fn(floe::storage::fault::Call, &str) + Send + 'static,
) -> Arc<floe::storage::fault::FaultyStorage> {
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    let plan = move |call, key: &str| {
        seen(call, key);
        if key.starts_with("manifests/") && matches!(call, Call::Get | Call::GetRange) {
            Fault::Delay(Duration::from_millis(ms))
        } else {
            Fault::None
        }
    };
    Arc::new(FaultyStorage::new(inner, Box::new(plan)).with_ranged_listing(true))
}

/// On object storage (ranged listings), a collection lists `chunks/` while it reads
/// the retained manifests, not after: with manifest reads taking 500 ms, the first
/// listing of a `chunks/` range starts well before the first read returns, and the
/// collection deletes what it deleted before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_listing_starts_with_the_manifest_reads() {
    use floe::storage::fault::Call;
    use std::time::Instant;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let cut_off = many_chunks(&dir).await;
    let events: Arc<Mutex<Vec<(Instant, Call, String)>>> = Arc::default();
    let seen = events.clone();
    let storage = slow_manifest_reads(
        Arc::new(LocalStorage::new(&dir).unwrap()),
        500,
        move |call, key| {
            seen.lock()
                .unwrap()
                .push((Instant::now(), call, key.to_string()))
        },
    );
    let repo = Repository::open(storage).await.unwrap();
    expire_deleting_refs(&repo, cut_off).await;
    events.lock().unwrap().clear();
    let options = GcOptions::default().allow_recent_cutoff(true);
    let summary = repo.garbage_collect(cut_off, options, None).await.unwrap();
    assert_eq!(summary.chunks_deleted, 150, "{summary:?}");
    let events = events.lock().unwrap().clone();
    let first_read = events
        .iter()
        .find(|(_, call, key)| key.starts_with("manifests/") && *call != Call::List)
        .map(|(at, ..)| *at)
        .expect("no manifest read");
    let first_listing = events
        .iter()
        .find(|(_, call, key)| *call == Call::List && key.starts_with("chunks/"))
        .map(|(at, ..)| *at)
        .expect("no listing of chunks/");
    let waited = first_listing.saturating_duration_since(first_read);
    assert!(
        waited < Duration::from_millis(400),
        "chunks/ listed {waited:?} after the first manifest read started"
    );
}

/// A storage bounding its requests in flight: the listings of `chunks/` that wait
/// for the manifest reads (holding 3 objects at most) keep their places, and the
/// reads still get theirs, whatever the bound (a collection that gave every place
/// to waiting listings would never finish).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_ahead_leave_places_to_the_manifest_reads() {
    use floe::storage::{LatencyStorage, LimitedStorage, RequestLimit};
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let cut_off = many_chunks(&base).await;
    for places in [1usize, 2, 3, 4, 64] {
        let dir = tmp.path().join(format!("limit-{places}"));
        common::copy_tree(&base, &dir);
        // The reads wait 50 ms before they ask for a place (the listing has taken
        // its places by then); no local-file shortcut around the bound.
        let local = Arc::new(LocalStorage::new(&dir).unwrap());
        let remote = Arc::new(LatencyStorage::new(local, 0, 0));
        let limited = Arc::new(LimitedStorage::new(
            remote,
            Arc::new(RequestLimit::new(places)),
        ));
        let storage = slow_manifest_reads(limited, 50, |_, _| {});
        let repo = Repository::open(storage).await.unwrap();
        expire_deleting_refs(&repo, cut_off).await;
        let options = GcOptions::default()
            .allow_recent_cutoff(true)
            .max_listed_ahead(3);
        let collected = tokio::time::timeout(
            Duration::from_secs(60),
            repo.garbage_collect(cut_off, options, None),
        )
        .await
        .unwrap_or_else(|_| panic!("{places} places: the collection did not finish in 60 s"))
        .unwrap();
        assert_eq!(
            collected.chunks_deleted, 150,
            "{places} places: {collected:?}"
        );
    }
}

/// On spec 2, collection judges snapshot retention by one listing of `snapshots/`
/// and sweeps that same listing: the directory is listed once, and what is deleted
/// is what a collection of a copy through plain storage deletes.
#[tokio::test]
async fn spec2_collection_lists_snapshots_once() {
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    let tmp = tempfile::tempdir().unwrap();
    let (base, plain, counted) = (
        tmp.path().join("base"),
        tmp.path().join("plain"),
        tmp.path().join("counted"),
    );
    let sc = scenario_spec(&base, SpecVersion::V2).await;
    common::copy_tree(&base, &plain);
    common::copy_tree(&base, &counted);
    let repo = open(&plain).await;
    expire_deleting_refs(&repo, sc.cut_off).await;
    let want = repo
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    assert!(want.snapshots_deleted > 0, "{want:?}");

    let listed: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = listed.clone();
    let storage = Arc::new(FaultyStorage::new(
        Arc::new(LocalStorage::new(&counted).unwrap()),
        Box::new(move |call, key| {
            if call == Call::List {
                seen.lock().unwrap().push(key.to_string());
            }
            Fault::None
        }),
    ));
    let repo = Repository::open(storage).await.unwrap();
    expire_deleting_refs(&repo, sc.cut_off).await;
    listed.lock().unwrap().clear();
    let got = repo
        .garbage_collect(
            sc.cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    assert_eq!(got, want);
    // The same objects, but for the names of the ops-log backups (named by the time
    // of each update).
    let without_backup_names = |dir: &Path| -> Vec<String> {
        let mut keys: Vec<String> = objects(dir)
            .into_iter()
            .map(|k| match k.starts_with("overwritten/repo.") {
                true => "overwritten/repo.*".to_string(),
                false => k,
            })
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(without_backup_names(&counted), without_backup_names(&plain));
    let listed = listed.lock().unwrap().clone();
    let snapshot_listings = listed
        .iter()
        .filter(|k| k.starts_with("snapshots/"))
        .count();
    assert_eq!(snapshot_listings, 1, "{listed:?}");
}

#[tokio::test]
async fn collection_retries_transient_delete_failures() {
    use floe::storage::fault::{Call, Fault, FaultyStorage};
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let cut_off = many_chunks(&base).await;
    let clean = tmp.path().join("clean");
    let faulty = tmp.path().join("faulty");
    common::copy_tree(&base, &clean);
    common::copy_tree(&base, &faulty);
    let repo = open(&clean).await;
    expire_deleting_refs(&repo, cut_off).await;
    let want = repo
        .garbage_collect(
            cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();

    // Every object delete fails twice before it goes through.
    let mut failures: BTreeMap<String, u32> = BTreeMap::new();
    let storage = Arc::new(FaultyStorage::new(
        Arc::new(LocalStorage::new(&faulty).unwrap()),
        Box::new(move |call, key| {
            // Expiry deletes refs (not retried); collection deletes objects.
            if call != Call::Delete || key.starts_with("refs/") {
                return Fault::None;
            }
            let n = failures.entry(key.to_string()).or_insert(0);
            *n += 1;
            if *n <= 2 {
                Fault::FailBefore
            } else {
                Fault::None
            }
        }),
    ));
    let repo = Repository::open(storage).await.unwrap();
    expire_deleting_refs(&repo, cut_off).await;
    let got = repo
        .garbage_collect(
            cut_off,
            GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(objects(&faulty), objects(&clean));
}

/// A session whose base snapshot expiry collapsed rebases over exactly the commits
/// made since its base (spec 2.1: the transaction logs of the pruned ancestors).
/// Its handle opened the sessions before those commits, so it knows no parent link
/// past the base; the rest runs on another handle, as another writer would.
/// - a chunk written before the base (by c1 and the base c2) rebases cleanly: the
///   logs before the base are not replayed;
/// - a chunk written by a pruned commit after the base (c3) is a conflict naming it;
/// - so is one written by the kept commit after the cut-off (c4).
#[tokio::test]
async fn a_session_on_an_expired_base_rebases_over_the_pruned_logs() {
    use floe::error::{Conflict, Error};

    let dir = tempfile::tempdir().unwrap();
    let other = Repository::create_with(
        Arc::new(LocalStorage::new(dir.path()).unwrap()),
        None,
        SpecVersion::V2,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap();
    let a = p("/a");
    let s = other.writable_session("main").await.unwrap();
    s.add_array(&a, array_def("/a", &[4096], &[1024], "uint8"))
        .unwrap();
    s.set_chunk(&a, &[0], chunk(1)).await.unwrap();
    s.commit("c1").await.unwrap();
    s.set_chunk(&a, &[0], chunk(2)).await.unwrap();
    s.set_chunk(&a, &[1], chunk(2)).await.unwrap();
    let c2 = s.commit("c2").await.unwrap();

    let mine = open(dir.path()).await;
    let clean = mine.writable_session("main").await.unwrap();
    let clashing = mine.writable_session("main").await.unwrap();
    let late = mine.writable_session("main").await.unwrap();
    clean.set_chunk(&a, &[0], chunk(9)).await.unwrap();
    clashing.set_chunk(&a, &[2], chunk(8)).await.unwrap();
    late.set_chunk(&a, &[3], chunk(8)).await.unwrap();

    s.set_chunk(&a, &[2], chunk(3)).await.unwrap();
    s.commit("c3").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cut_off = Utc::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.set_chunk(&a, &[3], chunk(4)).await.unwrap();
    let c4 = s.commit("c4").await.unwrap();
    let expired = other
        .expire_snapshots(cut_off, ExpireOptions::default())
        .await
        .unwrap();
    assert!(expired.expired.contains(&c2), "{expired:?}");
    let history = ancestry(&other, "main").await;
    assert_eq!(history.len(), 2, "c4 re-parented onto the root");
    assert!(!history.contains(&c2));

    clean.rebase().await.unwrap();
    let landed = clean.commit("clean").await.unwrap();
    let read = other
        .readonly_session(&VersionSelector::Snapshot(landed))
        .await
        .unwrap();
    for (i, v) in [(0u64, 9u8), (1, 2), (2, 3), (3, 4)] {
        let got = read.get_chunk(&a, &[i], None).await.unwrap().unwrap();
        assert_eq!(got, chunk(v), "chunk {i}");
    }
    assert_eq!(&ancestry(&other, "main").await[..2], &[landed, c4]);

    for (session, index) in [(&clashing, 2u64), (&late, 3)] {
        match session.rebase().await {
            Err(Error::Conflict(c)) => match c.conflicts.as_slice() {
                [Conflict::ChunksChangedByBoth { path, chunks, .. }] => {
                    assert_eq!((path, chunks.as_slice()), (&a, &[vec![index]][..]));
                }
                other => panic!("chunk {index}: {other:?}"),
            },
            other => panic!("chunk {index}: {other:?}"),
        }
    }
}

/// Spec 2: expiry and garbage collection through one handle (as a script calls
/// `expire_snapshots` then `garbage_collect`) delete what they delete through
/// fresh handles. The handle's cached snapshots carried their parent links from
/// before the expiry, so the collection walked the expired history and kept it.
#[tokio::test]
async fn spec2_gc_after_expiry_on_the_same_handle_follows_the_new_parent_links() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    let sc = scenario_spec(&original, SpecVersion::V2).await;
    let (same, fresh) = (dir.path().join("same"), dir.path().join("fresh"));
    common::copy_tree(&original, &same);
    common::copy_tree(&original, &fresh);
    let gc = GcOptions::default().allow_recent_cutoff(true);

    let repo = open(&same).await;
    // Read every snapshot of every history first, so the handle caches them.
    for b in repo.list_branches().await.unwrap() {
        for id in ancestry(&repo, &b).await {
            repo.readonly_session(&VersionSelector::Snapshot(id))
                .await
                .unwrap();
        }
    }
    expire_deleting_refs(&repo, sc.cut_off).await;
    let through_one = repo.garbage_collect(sc.cut_off, gc, None).await.unwrap();

    expire_deleting_refs(&open(&fresh).await, sc.cut_off).await;
    let through_fresh = open(&fresh)
        .await
        .garbage_collect(sc.cut_off, gc, None)
        .await
        .unwrap();
    assert!(through_fresh.snapshots_deleted > 0);
    assert_eq!(through_one, through_fresh);
    assert_eq!(data_objects(&same), data_objects(&fresh));
}

/// One round of writes for the incremental collection test: a new array (new
/// manifest) and new values in the others (new chunks and manifests), committed in
/// three commits, the first two then older than the returned cut-off.
async fn churn(repo: &Repository, round: u8) -> DateTime<Utc> {
    let s = repo.writable_session("main").await.unwrap();
    let path = p(&format!("/r{round}"));
    s.add_array(
        &path,
        array_def(&format!("/r{round}"), &[4096], &[1024], "uint8"),
    )
    .unwrap();
    for i in 0..4u64 {
        s.set_chunk(
            &path,
            &[i],
            chunk(round.wrapping_mul(7).wrapping_add(i as u8)),
        )
        .await
        .unwrap();
    }
    s.commit(&format!("round {round}: new array"))
        .await
        .unwrap();
    for step in 0..2u8 {
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&path, &[u64::from(step)], chunk(step + round))
            .await
            .unwrap();
        s.commit(&format!("round {round}: step {step}"))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let cut_off = Utc::now();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/r0"), &[3], chunk(250 - round))
        .await
        .unwrap();
    s.commit(&format!("round {round}: after the cut-off"))
        .await
        .unwrap();
    cut_off
}

/// Incremental collection (floe's state of the manifests read before) deletes
/// exactly what a full one deletes, round after round of commits and expiry, on
/// spec 1 and 2, with Icechunk 2.3.0's own collection run in between (which does not
/// know the state and cannot make it wrong), and fetches only manifests no earlier
/// collection read.
#[tokio::test]
async fn incremental_collection_deletes_what_a_full_collection_deletes() {
    let py = common::require(common::python312(), "Python 3.12 with icechunk 2.x");
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let tmp = tempfile::tempdir().unwrap();
        let ours = tmp.path().join("incremental");
        let storage = Arc::new(LocalStorage::new(&ours).unwrap());
        Repository::create_with(storage, None, spec, floe::OpenOptions::default())
            .await
            .unwrap();
        for round in 0..5u8 {
            let repo = open(&ours).await;
            let cut_off = churn(&repo, round).await;
            expire_deleting_refs(&repo, cut_off).await;
            if round == 2 {
                if let Some(py) = &py {
                    // Icechunk collects first: the state still names manifests it
                    // deleted, which floe must simply not find retained.
                    oracle(
                        py,
                        &ours,
                        DateTime::<Utc>::from_timestamp(0, 0).unwrap(),
                        cut_off,
                    );
                }
            }
            let full_dir = tmp.path().join(format!("full-{round}"));
            common::copy_tree(&ours, &full_dir);
            let options = GcOptions::default().allow_recent_cutoff(true);
            let incremental = open(&ours)
                .await
                .garbage_collect(cut_off, options, None)
                .await
                .unwrap();
            let full = open(&full_dir)
                .await
                .garbage_collect(cut_off, options.incremental(false), None)
                .await
                .unwrap();
            assert_eq!(
                deletions(&incremental),
                deletions(&full),
                "spec {spec} round {round}: summaries"
            );
            // Every round leaves garbage, but round 0's (not old enough) and round
            // 2's (Icechunk collected it first).
            let collected_by_icechunk = round == 2 && py.is_some();
            assert!(
                incremental.chunks_deleted > 0 || round == 0 || collected_by_icechunk,
                "spec {spec} round {round}: {incremental:?}"
            );
            assert_eq!(
                objects(&ours),
                objects(&full_dir),
                "spec {spec} round {round}"
            );
            assert!(ours.join("floe/gc-state").exists());
            let retained = incremental.manifests_read + incremental.manifests_from_state;
            assert_eq!(full.manifests_from_state, 0);
            assert_eq!(full.manifests_read, retained, "spec {spec} round {round}");
            let snapshots = incremental.snapshots_read + incremental.snapshots_from_state;
            assert_eq!(
                (full.snapshots_read, full.snapshots_from_state),
                (snapshots, 0),
                "spec {spec} round {round}"
            );
            if spec == SpecVersion::V1 {
                // A spec-1 walk reads every snapshot for its parent.
                assert_eq!(incremental.snapshots_from_state, 0);
            } else if round >= 1 {
                // Spec 2: only the snapshots committed since the last collection
                // are read (this round's churn commits a few).
                assert!(
                    incremental.snapshots_from_state > 0 && incremental.snapshots_read <= 4,
                    "spec {spec} round {round}: {incremental:?}"
                );
            }
            if round >= 2 {
                // The arrays of earlier rounds did not change: their manifests come
                // from the state; only this round's are fetched.
                assert!(
                    incremental.manifests_from_state >= u64::from(round) - 1
                        && incremental.manifests_read <= 3,
                    "spec {spec} round {round}: {incremental:?}"
                );
            }
            // Every value of main still reads.
            let r = open(&ours)
                .await
                .readonly_session(&VersionSelector::Branch("main".into()))
                .await
                .unwrap();
            for a in 0..=round {
                for i in 0..4u64 {
                    assert!(r
                        .get_chunk(&p(&format!("/r{a}")), &[i], None)
                        .await
                        .unwrap()
                        .is_some());
                }
            }
        }
    }
}

/// A damaged state object is ignored (the collection fetches every manifest, then
/// rewrites the state); a dry run writes no state.
#[tokio::test]
async fn a_damaged_collection_state_is_ignored_and_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let storage = Arc::new(LocalStorage::new(&dir).unwrap());
    Repository::create_with(storage, None, SpecVersion::V1, floe::OpenOptions::default())
        .await
        .unwrap();
    let repo = open(&dir).await;
    let cut_off = churn(&repo, 0).await;
    std::fs::create_dir_all(dir.join("floe")).unwrap();
    std::fs::write(dir.join("floe/gc-state"), b"floe-gc-state\0\x01garbage").unwrap();
    let options = GcOptions::default().allow_recent_cutoff(true);
    let dry = repo
        .garbage_collect(cut_off, options.dry_run(true), None)
        .await
        .unwrap();
    assert_eq!(dry.manifests_from_state, 0);
    assert_eq!(
        std::fs::read(dir.join("floe/gc-state")).unwrap(),
        b"floe-gc-state\0\x01garbage",
        "a dry run writes no state"
    );
    let first = repo.garbage_collect(cut_off, options, None).await.unwrap();
    assert_eq!(first.manifests_from_state, 0);
    assert!(first.manifests_read > 0);
    let state = std::fs::read(dir.join("floe/gc-state")).unwrap();
    let decoded = floe::format::gc_state::GcState::decode(&state).unwrap();
    assert_eq!(decoded.manifests.len() as u64, first.manifests_read);
    let again = repo.garbage_collect(cut_off, options, None).await.unwrap();
    assert_eq!(
        (again.manifests_read, again.manifests_from_state),
        (0, first.manifests_read)
    );
}
