//! `clone` (issue 47, item 2): a clone, full or of selected refs, between local
//! storage and the S3 test server both ways, equals its source (refs, logs, trees,
//! values); a clone killed with SIGKILL at random moments completes when run again,
//! and a half-written destination is never a repository that fails verification.

use crate::common;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::SpecVersion;
use floe::lifecycle::{clone_repository, CloneOptions, VerifyOptions};
use floe::storage::{create_storage, LocalStorage, Storage};
use floe::{Error, Repository, VersionSelector};
use rand::Rng;

/// Every branch and tag: its log (ids, parents, messages), tree (node paths) and the
/// bytes of every chunk of `/a`.
async fn facts(repo: &Repository) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut selectors = Vec::new();
    for b in repo.list_branches().await.unwrap() {
        selectors.push((format!("branch:{b}"), VersionSelector::Branch(b)));
    }
    for t in repo.list_tags().await.unwrap() {
        selectors.push((format!("tag:{t}"), VersionSelector::Tag(t)));
    }
    for (name, selector) in selectors {
        let tip = repo.resolve(&selector).await.unwrap();
        let log: Vec<String> = repo
            .ancestry(tip)
            .await
            .unwrap()
            .iter()
            .map(|s| format!("{} {:?} {}", s.id, s.parent_id, s.message))
            .collect();
        let session = repo.readonly_session(&selector).await.unwrap();
        let tree: Vec<String> = session
            .list_nodes()
            .unwrap()
            .iter()
            .map(|n| n.path.to_string())
            .collect();
        let mut values = Vec::new();
        for i in 0..8u64 {
            let c = session.get_chunk(&p("/a"), &[i], None).await.unwrap();
            values.push(c.map(|b| format!("{}x{}", b.len(), b.first().copied().unwrap_or(0))));
        }
        out.insert(name, format!("{log:?}\n{tree:?}\n{values:?}"));
    }
    out
}

/// A repository of spec `spec` on `storage`: `main` with `commits` commits writing
/// 1 KiB chunks of `/a` (8 chunks), tag `v1` at the first commit, branch `side` off
/// it with one commit of its own, and a deleted tag.
async fn build(storage: Arc<dyn Storage>, spec: SpecVersion, commits: u32) -> Repository {
    let repo = Repository::create_with(storage, None, spec, floe::OpenOptions::default())
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[8192], &[1024], "uint8"))
        .unwrap();
    let mut first = None;
    for n in 0..commits {
        for i in 0..8u64 {
            let v = (n as u8).wrapping_mul(8).wrapping_add(i as u8).max(1);
            s.set_chunk(&p("/a"), &[i], Bytes::from(vec![v; 1024]))
                .await
                .unwrap();
        }
        let id = s.commit(&format!("commit {n}")).await.unwrap();
        first.get_or_insert(id);
    }
    let first = first.unwrap();
    repo.create_tag("v1", first).await.unwrap();
    repo.create_tag("gone", first).await.unwrap();
    repo.delete_tag("gone").await.unwrap();
    repo.create_branch("side", first).await.unwrap();
    let side = repo.writable_session("side").await.unwrap();
    side.set_chunk(&p("/a"), &[0], Bytes::from(vec![200u8; 1024]))
        .await
        .unwrap();
    side.commit("on side").await.unwrap();
    repo
}

async fn clone_and_compare(
    src: Arc<dyn Storage>,
    dst: Arc<dyn Storage>,
    spec: SpecVersion,
) -> floe::lifecycle::CloneReport {
    let repo = build(Arc::clone(&src), spec, 3).await;
    let report = clone_repository(
        Arc::clone(&src),
        Arc::clone(&dst),
        &[],
        CloneOptions::default(),
        None,
    )
    .await
    .unwrap();
    let verified = report.verify.as_ref().unwrap();
    assert!(verified.is_ok(), "{:#?}", verified.problems);
    assert_eq!(report.objects_skipped, 0);
    let clone = Repository::open(Arc::clone(&dst)).await.unwrap();
    assert_eq!(clone.spec_version(), spec);
    assert_eq!(facts(&clone).await, facts(&repo).await);
    assert_eq!(
        clone.list_tags().await.unwrap(),
        repo.list_tags().await.unwrap()
    );
    // Again: everything is there already, only the refs are written.
    let again = clone_repository(src, dst, &[], CloneOptions::default(), None)
        .await
        .unwrap();
    assert_eq!(
        again.objects_skipped,
        report.objects_copied - again.objects_copied
    );
    // Spec 1: config.yaml and the ref files (a tombstone among them); spec 2: `repo`.
    assert!(again.objects_copied <= 5, "{again:?}");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_to_local_equals_source() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let src = Arc::new(LocalStorage::new(&dir.path().join("src")).unwrap());
        let dst = Arc::new(LocalStorage::new(&dir.path().join("dst")).unwrap());
        clone_and_compare(src, dst, spec).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_to_s3_and_back_equals_source() {
    let Some(url) = common::s3_url("clone") else {
        return;
    };
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let local = Arc::new(LocalStorage::new(&dir.path().join("src")).unwrap());
        let s3 = create_storage(&format!("{url}-{spec}"), None).unwrap();
        clone_and_compare(local, Arc::clone(&s3), spec).await;
        // And back, from S3 to a new local directory.
        let back: Arc<dyn Storage> = Arc::new(LocalStorage::new(&dir.path().join("back")).unwrap());
        let report = clone_repository(
            Arc::clone(&s3),
            Arc::clone(&back),
            &[],
            CloneOptions::default(),
            None,
        )
        .await
        .unwrap();
        assert!(report.verify.unwrap().is_ok());
        let from_s3 = Repository::open(s3).await.unwrap();
        let back = Repository::open(back).await.unwrap();
        assert_eq!(facts(&back).await, facts(&from_s3).await);
    }
}

/// With `--ref v1`: main and v1 come along, `side` and its objects do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_refs_only() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let src: Arc<dyn Storage> = Arc::new(LocalStorage::new(&dir.path().join("src")).unwrap());
        let dst: Arc<dyn Storage> = Arc::new(LocalStorage::new(&dir.path().join("dst")).unwrap());
        let repo = build(Arc::clone(&src), spec, 2).await;
        let report = clone_repository(
            Arc::clone(&src),
            Arc::clone(&dst),
            &["tag:v1".to_string()],
            CloneOptions::default().max_chunk_ids_in_memory(3),
            None,
        )
        .await
        .unwrap();
        assert!(report.verify.as_ref().unwrap().is_ok(), "{report:?}");
        assert_eq!(report.refs, ["branch:main", "tag:v1"]);
        let clone = Repository::open(Arc::clone(&dst)).await.unwrap();
        assert_eq!(clone.list_branches().await.unwrap(), ["main"]);
        assert_eq!(clone.list_tags().await.unwrap(), ["v1"]);
        let mut want = facts(&repo).await;
        want.retain(|k, _| k == "branch:main" || k == "tag:v1");
        assert_eq!(facts(&clone).await, want);
        // The side branch's chunk (200) was not copied.
        let side_chunk = std::fs::read_dir(dir.path().join("dst/chunks"))
            .unwrap()
            .any(|e| std::fs::read(e.unwrap().path()).unwrap().first() == Some(&200));
        assert!(!side_chunk);
        // A ref the source lacks.
        let err = clone_repository(
            Arc::clone(&src),
            Arc::clone(&dst),
            &["nope".to_string()],
            CloneOptions::default(),
            None,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::RefNotFound { .. }), "{err:?}");
        let err = clone_repository(
            src,
            dst,
            &["branch:nope".to_string()],
            CloneOptions::default(),
            None,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::BranchNotFound { .. }), "{err:?}");
    }
}

/// The clone of an empty source is an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_source_repository() {
    let dir = tempfile::tempdir().unwrap();
    let src = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let dst = floe::storage::new_in_memory_storage();
    let err = clone_repository(src, dst, &[], CloneOptions::default(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RepositoryNotFound { .. }), "{err:?}");
}

/// `floe clone` killed with SIGKILL at random moments, again and again: after each
/// kill the destination is either no repository yet or one that verifies; the last
/// run completes, and the clone equals the source.
async fn killed_clone_resumes(src_url: &str, dst_url: &str, spec: SpecVersion) {
    let src = create_storage(src_url, None).unwrap();
    let repo = build(Arc::clone(&src), spec, 40).await;
    let floe = |dst: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["clone", src_url, dst, "--concurrency", "4"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // How long a whole clone takes here: kills land anywhere in it.
    let scratch = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let first = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["clone", src_url, path(scratch.path())])
        .output()
        .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let mut whole = started.elapsed().as_millis().max(4) as u64;
    let mut rng = rand::rng();
    let mut kills = 0;
    // Each clone is killed at a random point of its first two thirds, as long as
    // the clone is measured to take. A clone that finishes first (the machine got
    // quicker than when it was measured: CI runs tests side by side) gives the new
    // measure, and the next runs start over at a fresh destination, so that kills
    // keep landing in a copy in progress, not in the re-run of a finished one.
    let base = dst_url;
    let mut dst_url = base.to_string();
    let mut fresh = 0;
    for _ in 0..40 {
        if kills >= 6 {
            break;
        }
        let started = std::time::Instant::now();
        let mut child = floe(&dst_url);
        let at = rng.random_range(1..(whole * 2 / 3).max(2));
        tokio::time::sleep(Duration::from_millis(at)).await;
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
            child.wait().unwrap();
        } else {
            whole = whole.min(started.elapsed().as_millis().max(4) as u64);
        }
        let dst = create_storage(&dst_url, None).unwrap();
        match floe::lifecycle::verify(dst, None, VerifyOptions::default(), None).await {
            Err(Error::RepositoryNotFound { .. }) => {}
            Ok(report) => {
                assert!(report.is_ok(), "after a kill: {:#?}", report.problems);
                if kills < 6 {
                    fresh += 1;
                    dst_url = format!("{base}-{fresh}");
                }
            }
            Err(e) => panic!("after a kill: {e:?}"),
        }
    }
    assert!(
        kills > 0,
        "no run was killed: the clone is too quick to test"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["clone", src_url, &dst_url, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verify"]["ok"], true, "{v}");
    let clone = Repository::open(create_storage(&dst_url, None).unwrap())
        .await
        .unwrap();
    assert_eq!(facts(&clone).await, facts(&repo).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_clone_resumes_local() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let dst = dir.path().join("dst");
        std::fs::create_dir_all(&src).unwrap();
        killed_clone_resumes(path(&src), path(&dst), spec).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_clone_resumes_local_to_s3() {
    let Some(url) = common::s3_url("clone-kill") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    killed_clone_resumes(path(&src), &url, SpecVersion::V2).await;
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The futures of verify and clone are `Send` (the Python bindings and servers
/// run them on a multi-threaded runtime).
#[allow(dead_code)]
fn futures_are_send(repo: &Repository, storage: Arc<dyn Storage>) {
    fn send<T: Send>(_: T) {}
    send(repo.verify(true, VerifyOptions::default(), None));
    send(clone_repository(
        Arc::clone(&storage),
        storage,
        &[],
        CloneOptions::default(),
        None,
    ));
}

/// Icechunk 2.3.0 opens the clone of a repository it wrote (spec 1 and 2: inline,
/// native and virtual chunks, split manifests, deleted refs) and reads in it exactly
/// what it wrote, full history and with `--ref`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk_opens_the_clone() {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    for spec in [1u8, 2] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        crate::icechunk_interop::run_py_spec(&py, &["write", out.to_str().unwrap()], spec);
        let src: Arc<dyn Storage> = Arc::new(LocalStorage::new(&out.join("repo")).unwrap());
        let clone_dir = dir.path().join("clone");
        let dst: Arc<dyn Storage> = Arc::new(LocalStorage::new(&clone_dir).unwrap());
        let report = clone_repository(src, dst, &[], CloneOptions::default(), None)
            .await
            .unwrap();
        assert!(report.verify.unwrap().is_ok());
        let prefix = crate::icechunk_interop::file_prefix(&out.join("data"));
        crate::icechunk_interop::run_py_spec(
            &py,
            &[
                "verify",
                clone_dir.to_str().unwrap(),
                out.join("expected.json").to_str().unwrap(),
                &prefix,
            ],
            spec,
        );
    }
}

/// Icechunk 2.3.0 opens a clone of selected refs, whose spec-2 `repo` object floe
/// rewrote: the refs, each history and the tree of `main` are those of the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk_opens_a_clone_of_selected_refs() {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let script = r#"
import sys, icechunk as ic, zarr
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
branches, tags = sorted(repo.list_branches()), sorted(repo.list_tags())
print("refs", branches, tags)
for b in branches:
    print("branch", b, [s.id for s in repo.ancestry(branch=b)])
for t in tags:
    print("tag", t, [s.id for s in repo.ancestry(tag=t)])
g = zarr.open_group(repo.readonly_session("main").store, mode="r")
print("tree", sorted(name for name, _ in g.members(max_depth=None)))
"#;
    let ic_read = |repo: &Path| common::python_stdout(&py, script, &[repo.to_str().unwrap()]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    crate::icechunk_interop::run_py_spec(&py, &["write", out.to_str().unwrap()], 2);
    let src_dir = out.join("repo");
    let src: Arc<dyn Storage> = Arc::new(LocalStorage::new(&src_dir).unwrap());
    let source = Repository::open(Arc::clone(&src)).await.unwrap();
    let tag = source.list_tags().await.unwrap().remove(0);
    let clone_dir = dir.path().join("clone");
    let dst: Arc<dyn Storage> = Arc::new(LocalStorage::new(&clone_dir).unwrap());
    let report = clone_repository(
        src,
        dst,
        std::slice::from_ref(&tag),
        CloneOptions::default(),
        None,
    )
    .await
    .unwrap();
    assert!(report.verify.unwrap().is_ok());
    assert_eq!(
        report.refs,
        ["branch:main".to_string(), format!("tag:{tag}")]
    );
    let got = ic_read(&clone_dir);
    let want: Vec<String> = ic_read(&src_dir)
        .lines()
        .filter(|l| {
            l.starts_with("branch main ")
                || l.starts_with(&format!("tag {tag} "))
                || l.starts_with("tree ")
        })
        .map(str::to_string)
        .collect();
    let mut lines = got.lines();
    assert_eq!(
        lines.next(),
        Some(format!("refs ['main'] ['{tag}']").as_str()),
        "{got}"
    );
    assert_eq!(lines.map(str::to_string).collect::<Vec<_>>(), want);
}

/// A destination that holds another repository is refused before anything is
/// copied, and keeps its refs; an earlier clone of the same source is brought up
/// to date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_repository_at_the_destination_is_refused() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let storage = |name: &str| -> Arc<dyn Storage> {
            Arc::new(LocalStorage::new(&dir.path().join(name)).unwrap())
        };
        let a = build(storage("a"), spec, 2).await;
        let other = build(storage("other"), spec, 3).await;
        let before = facts(&other).await;
        let refused = clone_repository(
            storage("a"),
            storage("other"),
            &[],
            CloneOptions::default(),
            None,
        )
        .await;
        assert!(
            matches!(refused, Err(Error::CloneDestinationInUse { .. })),
            "{spec:?}: {refused:?}"
        );
        let other = Repository::open(storage("other")).await.unwrap();
        assert_eq!(
            facts(&other).await,
            before,
            "{spec:?}: the destination changed"
        );

        // A clone, then a commit at the source, then the clone again: updated.
        clone_repository(
            storage("a"),
            storage("copy"),
            &[],
            CloneOptions::default(),
            None,
        )
        .await
        .unwrap();
        let s = a.writable_session("main").await.unwrap();
        s.set_chunk(&p("/a"), &[0], Bytes::from(vec![77u8; 1024]))
            .await
            .unwrap();
        s.commit("after the first clone").await.unwrap();
        clone_repository(
            storage("a"),
            storage("copy"),
            &[],
            CloneOptions::default(),
            None,
        )
        .await
        .unwrap();
        let a = Repository::open(storage("a")).await.unwrap();
        let copy = Repository::open(storage("copy")).await.unwrap();
        assert_eq!(facts(&copy).await, facts(&a).await, "{spec:?}");
        // The other way round, the copy is ahead of nothing it lacks: refused.
        let refused = clone_repository(
            storage("other"),
            storage("copy"),
            &[],
            CloneOptions::default(),
            None,
        )
        .await;
        assert!(matches!(refused, Err(Error::CloneDestinationInUse { .. })));
        // Another spec version is refused too.
        let other_spec = if spec == SpecVersion::V1 {
            SpecVersion::V2
        } else {
            SpecVersion::V1
        };
        build(storage("b"), other_spec, 1).await;
        assert!(matches!(
            clone_repository(
                storage("a"),
                storage("b"),
                &[],
                CloneOptions::default(),
                None
            )
            .await,
            Err(Error::CloneDestinationInUse { .. })
        ));
    }
}
