//! `verify` (issue 47, item 1): each seeded problem is found with its place (ref,
//! snapshot, array, chunk index, key), in one pass and in several; a healthy
//! repository, spec 1 and 2, and repositories written by Icechunk 2.3.0 have none.

use crate::common;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use floe::format::SpecVersion;
use floe::lifecycle::{verify, Problem, ProblemKind, VerifyOptions, VerifyReport};
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::{OpenOptions, Repository, SnapshotId};

/// A chunk of 1 KiB holding `v` (stored as is: the array has the bytes codec only).
fn chunk(v: u8) -> Bytes {
    Bytes::from(vec![v; 1024])
}

/// The snapshots of [`healthy`].
pub(crate) struct Built {
    pub c1: SnapshotId,
    pub c2: SnapshotId,
    pub side: SnapshotId,
}

/// `main`: init ← c1 (chunks 0..4 of `/a` hold 10..13) ← c2 (chunk 0 holds 50); tag
/// `v1` at c1; branch `side` off c1 with one commit (chunk 0 holds 60).
pub(crate) async fn healthy(dir: &Path, spec: SpecVersion) -> Built {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create_with(storage, None, spec, OpenOptions::default())
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4096], &[1024], "uint8"))
        .unwrap();
    for i in 0..4u8 {
        s.set_chunk(&p("/a"), &[u64::from(i)], chunk(10 + i))
            .await
            .unwrap();
    }
    let c1 = s.commit("c1").await.unwrap();
    repo.create_tag("v1", c1).await.unwrap();
    s.set_chunk(&p("/a"), &[0], chunk(50)).await.unwrap();
    let c2 = s.commit("c2").await.unwrap();
    repo.create_branch("side", c1).await.unwrap();
    let side = repo.writable_session("side").await.unwrap();
    side.set_chunk(&p("/a"), &[0], chunk(60)).await.unwrap();
    let side = side.commit("on side").await.unwrap();
    Built { c1, c2, side }
}

/// The chunk file under `dir/chunks/` whose bytes are all `v`.
fn chunk_file(dir: &Path, v: u8) -> PathBuf {
    std::fs::read_dir(dir.join("chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|f| std::fs::read(f).unwrap().first() == Some(&v))
        .unwrap_or_else(|| panic!("no chunk file of {v}"))
}

/// `chunks/<name>` of a chunk file.
fn key_of(file: &Path) -> String {
    format!("chunks/{}", file.file_name().unwrap().to_str().unwrap())
}

async fn run(dir: &Path, options: VerifyOptions) -> VerifyReport {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    verify(storage, None, options, None).await.unwrap()
}

/// The one problem of `kind` in `report`.
fn only(report: &VerifyReport, kind: ProblemKind) -> &Problem {
    let found: Vec<&Problem> = report.problems.iter().filter(|p| p.kind == kind).collect();
    assert_eq!(found.len(), 1, "{kind:?} in {:#?}", report.problems);
    found[0]
}

async fn healthy_has_no_problem(spec: SpecVersion) {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path(), spec).await;
    // Three objects no ref names (what an abandoned session leaves) are no problem,
    // whatever room the check has for chunk ids.
    for _ in 0..3 {
        let id = floe::format::ChunkId::random();
        std::fs::write(dir.path().join(format!("chunks/{id}")), b"garbage").unwrap();
    }
    for options in [
        VerifyOptions::default(),
        VerifyOptions::default().max_chunk_ids_in_memory(6),
        VerifyOptions::default()
            .read_chunks(true)
            .max_chunk_ids_in_memory(1),
    ] {
        let report = run(dir.path(), options).await;
        assert!(report.is_ok(), "{:#?}", report.problems);
        assert_eq!(report.refs, 3);
        // initial, c1, c2, side
        assert_eq!(report.snapshots, 4);
        assert_eq!(report.transaction_logs, 3);
        assert_eq!(report.manifests, 3);
        // 4 + 4 + 4 refs, 6 distinct chunk objects
        assert_eq!(report.native_refs, 12);
        assert_eq!(report.chunk_objects, 6);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_spec1_has_no_problem() {
    healthy_has_no_problem(SpecVersion::V1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_spec2_has_no_problem() {
    healthy_has_no_problem(SpecVersion::V2).await;
}

/// Seeds a deleted, a truncated and a zero-length chunk, a corrupt manifest and a
/// dangling ref, and checks each is found where it is.
async fn finds_seeded_problems(spec: SpecVersion) {
    let dir = tempfile::tempdir().unwrap();
    let built = healthy(dir.path(), spec).await;
    let d = dir.path();
    // Chunk 1 (value 11) is referenced by c1 and c2: deleted.
    let deleted = chunk_file(d, 11);
    std::fs::remove_file(&deleted).unwrap();
    // Chunk 2: truncated; chunk 3: zero bytes.
    let truncated = chunk_file(d, 12);
    std::fs::write(&truncated, [12u8; 100]).unwrap();
    let zero = chunk_file(d, 13);
    std::fs::write(&zero, b"").unwrap();
    // The manifest of the side branch's commit: corrupt.
    let repo = Repository::open(Arc::new(LocalStorage::new(d).unwrap()))
        .await
        .unwrap();
    let side_snap = repo.assets().fetch_snapshot(&built.side).await.unwrap();
    let manifest = side_snap.manifest_files[0].id;
    std::fs::write(
        d.join(format!("manifests/{manifest}")),
        b"not a manifest at all, but long enough to have a header of 39 bytes",
    )
    .unwrap();
    // A branch whose snapshot is gone.
    repo.create_branch("dangling", built.c2).await.unwrap();
    let s = repo.writable_session("dangling").await.unwrap();
    s.set_chunk(&p("/a"), &[0], chunk(70)).await.unwrap();
    let gone = s.commit("then deleted").await.unwrap();
    std::fs::remove_file(d.join(format!("snapshots/{gone}"))).unwrap();
    drop(repo);

    for options in [
        VerifyOptions::default(),
        VerifyOptions::default().max_chunk_ids_in_memory(1),
    ] {
        let report = run(d, options).await;
        assert!(!report.is_ok());
        let missing = only(&report, ProblemKind::MissingChunk);
        assert_eq!(missing.key.as_deref(), Some(key_of(&deleted).as_str()));
        assert_eq!(missing.array.as_deref(), Some("/a"));
        assert_eq!(missing.chunk, Some(vec![1]));
        assert!(
            [Some(built.c1), Some(built.c2)].contains(&missing.snapshot),
            "{missing:?}"
        );
        assert!(missing.ref_name.is_some(), "{missing:?}");
        let short = only(&report, ProblemKind::TruncatedChunk);
        assert_eq!(short.key.as_deref(), Some(key_of(&truncated).as_str()));
        assert_eq!(short.chunk, Some(vec![2]));
        assert_eq!(short.array.as_deref(), Some("/a"));
        let empty = only(&report, ProblemKind::ZeroLengthChunk);
        assert_eq!(empty.key.as_deref(), Some(key_of(&zero).as_str()));
        assert_eq!(empty.chunk, Some(vec![3]));
        let corrupt = only(&report, ProblemKind::CorruptManifest);
        assert_eq!(
            corrupt.key.as_deref(),
            Some(format!("manifests/{manifest}").as_str())
        );
        assert_eq!(corrupt.snapshot, Some(built.side));
        assert_eq!(corrupt.ref_name.as_deref(), Some("branch:side"));
        let dangling = only(&report, ProblemKind::DanglingRef);
        assert_eq!(dangling.ref_name.as_deref(), Some("branch:dangling"));
        assert_eq!(dangling.snapshot, Some(gone));
        assert_eq!(
            dangling.key.as_deref(),
            Some(format!("snapshots/{gone}").as_str())
        );
        let expected = if spec == SpecVersion::V2 { 6 } else { 5 };
        // Spec 2: the repo object also lists the deleted snapshot's file... and
        // still names it, which is no separate problem; the transaction log of the
        // deleted snapshot is not reached.
        assert!(
            report.problems.len() >= 5 && report.problems.len() <= expected,
            "{:#?}",
            report.problems
        );
    }
    // Reading chunks also reports the truncated one as unreadable.
    let report = run(d, VerifyOptions::default().read_chunks(true)).await;
    let unreadable: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.kind == ProblemKind::UnreadableChunk)
        .collect();
    assert!(
        unreadable
            .iter()
            .any(|p| p.key.as_deref() == Some(key_of(&truncated).as_str())),
        "{unreadable:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_seeded_problems_spec1() {
    finds_seeded_problems(SpecVersion::V1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_seeded_problems_spec2() {
    finds_seeded_problems(SpecVersion::V2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_missing_transaction_log_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let built = healthy(dir.path(), SpecVersion::V1).await;
    let d = dir.path();
    std::fs::remove_file(d.join(format!("transactions/{}", built.c2))).unwrap();
    // c1 is in the history of main, v1 and side.
    std::fs::remove_file(d.join(format!("snapshots/{}", built.c1))).unwrap();
    let report = run(d, VerifyOptions::default()).await;
    let log = only(&report, ProblemKind::MissingTransactionLog);
    assert_eq!(log.snapshot, Some(built.c2));
    let kinds: Vec<_> = report.problems.iter().map(|p| p.kind).collect();
    // main and side reach c1 through their parents; v1 names it.
    assert!(kinds.contains(&ProblemKind::MissingSnapshot), "{kinds:?}");
    let dangling = only(&report, ProblemKind::DanglingRef);
    assert_eq!(dangling.ref_name.as_deref(), Some("tag:v1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn problems_beyond_the_cap_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path(), SpecVersion::V2).await;
    for v in [10u8, 11, 12] {
        std::fs::remove_file(chunk_file(dir.path(), v)).unwrap();
    }
    let report = run(dir.path(), VerifyOptions::default().max_problems(1)).await;
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems_omitted, 2);
    assert_eq!(report.problem_count(), 3);
}

/// A virtual chunk whose object changed after its ETag was recorded is found with
/// `check_virtual`, and only then; one whose object is gone too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_changed_virtual_object() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let source = data.join("source.bin");
    let other = data.join("other.bin");
    std::fs::write(&source, vec![7u8; 256]).unwrap();
    std::fs::write(&other, vec![8u8; 256]).unwrap();
    let prefix = format!("file://{}/", data.display());
    // The ETag the local store reports now.
    let store = object_store::local::LocalFileSystem::new();
    let head = object_store::ObjectStoreExt::head(
        &store,
        &object_store::path::Path::from_absolute_path(&source).unwrap(),
    )
    .await
    .unwrap();
    let etag = head.e_tag.unwrap();
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: prefix.clone(),
        store: ContainerStore::LocalFileSystem(format!("{}/", data.display())),
    });
    let repo_dir = dir.path().join("repo");
    let open = OpenOptions::default().virtual_access(VirtualAccess::prefixes([&prefix]).unwrap());
    let repo = Repository::create_with(
        Arc::new(LocalStorage::new(&repo_dir).unwrap()),
        Some(config),
        SpecVersion::V2,
        open.clone(),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/v"), array_def("/v", &[2], &[1], "uint8"))
        .unwrap();
    let vref = |file: &Path, checksum| {
        Some(ChunkPayload::Virtual(VirtualChunkRef {
            location: format!("file://{}", file.display()),
            offset: 0,
            length: 16,
            checksum,
        }))
    };
    s.set_chunk_ref(&p("/v"), &[0], vref(&source, Some(Checksum::ETag(etag))))
        .unwrap();
    s.set_chunk_ref(&p("/v"), &[1], vref(&other, None)).unwrap();
    s.commit("virtual").await.unwrap();
    let healthy = repo
        .verify(true, VerifyOptions::default(), None)
        .await
        .unwrap();
    assert!(healthy.is_ok(), "{:#?}", healthy.problems);
    assert_eq!(healthy.virtual_refs, 2);
    assert_eq!(healthy.virtual_objects, 2);

    // The source is rewritten (its ETag changes), the other one deleted.
    std::fs::write(&source, vec![9u8; 300]).unwrap();
    common::touch_future(&source);
    std::fs::remove_file(&other).unwrap();
    let unchecked = repo
        .verify(false, VerifyOptions::default(), None)
        .await
        .unwrap();
    assert!(unchecked.is_ok(), "{:#?}", unchecked.problems);
    assert_eq!(unchecked.virtual_objects, 0);
    let report = repo
        .verify(true, VerifyOptions::default(), None)
        .await
        .unwrap();
    let changed = only(&report, ProblemKind::ChangedVirtualObject);
    assert_eq!(
        changed.key.as_deref(),
        Some(format!("file://{}", source.display()).as_str())
    );
    assert_eq!(changed.array.as_deref(), Some("/v"));
    assert_eq!(changed.chunk, Some(vec![0]));
    let missing = only(&report, ProblemKind::MissingVirtualObject);
    assert_eq!(missing.chunk, Some(vec![1]));
    assert_eq!(report.problems.len(), 2);

    // Without authorization the objects cannot be checked, which is reported.
    let unauthorized = Repository::open(Arc::new(LocalStorage::new(&repo_dir).unwrap()))
        .await
        .unwrap();
    let report = unauthorized
        .verify(true, VerifyOptions::default(), None)
        .await
        .unwrap();
    assert_eq!(report.problems.len(), 2);
    assert!(report
        .problems
        .iter()
        .all(|p| p.kind == ProblemKind::UncheckedVirtualObject));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_repo_object_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path(), SpecVersion::V2).await;
    std::fs::write(
        dir.path().join("repo"),
        b"garbage garbage garbage garbage garbage!",
    )
    .unwrap();
    let report = run(dir.path(), VerifyOptions::default()).await;
    let p = only(&report, ProblemKind::UnreadableRepoObject);
    assert_eq!(p.key.as_deref(), Some("repo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_repository_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let err = verify(storage, None, VerifyOptions::default(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, floe::Error::RepositoryNotFound { .. }),
        "{err:?}"
    );
}

/// Repositories Icechunk 2.3.0 wrote (spec 1 and 2, with inline, native and
/// virtual chunks of both checksum kinds, split manifests, deleted refs) have no
/// problem, virtual objects included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk_repositories_have_no_problem() {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    for spec in [1u8, 2] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        crate::icechunk_interop::run_py_spec(&py, &["write", out.to_str().unwrap()], spec);
        let prefix = crate::icechunk_interop::file_prefix(&out.join("data"));
        let open =
            OpenOptions::default().virtual_access(VirtualAccess::prefixes([&prefix]).unwrap());
        let repo = Repository::open_with(
            Arc::new(LocalStorage::new(&out.join("repo")).unwrap()),
            open,
        )
        .await
        .unwrap();
        let report = repo
            .verify(true, VerifyOptions::default().read_chunks(true), None)
            .await
            .unwrap();
        assert!(report.is_ok(), "spec {spec}: {:#?}", report.problems);
        assert!(report.snapshots >= 5, "{report:?}");
        assert!(report.native_refs > 0 && report.inline_refs > 0 && report.virtual_refs > 0);
        assert!(report.virtual_objects > 0, "{report:?}");
    }
}

/// `floe verify`: a summary and exit 0 on a healthy repository; each problem, with
/// its place, and exit 1 on a damaged one; `--json` gives the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reports_problems_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path(), SpecVersion::V2).await;
    let floe = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(args)
            .output()
            .unwrap()
    };
    let repo = dir.path().to_str().unwrap();
    let ok = floe(&["verify", repo]);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{text}");
    assert!(text.contains("No problem found"), "{text}");
    assert!(text.contains("Checked 3 ref(s), 4 snapshot(s)"), "{text}");

    let deleted = chunk_file(dir.path(), 11);
    std::fs::remove_file(&deleted).unwrap();
    let bad = floe(&["verify", repo]);
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("missing_chunk: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("array /a, chunk [1]"), "{line}");
    assert!(line.contains(&key_of(&deleted)), "{line}");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("verify found 1 problem(s)"), "{stderr}");

    let json = floe(&["verify", repo, "--json", "--read-chunks"]);
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["snapshots"], 4);
    let kinds: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"missing_chunk"), "{kinds:?}");
    assert!(kinds.contains(&"unreadable_chunk"), "{kinds:?}");
    let missing = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "missing_chunk")
        .unwrap();
    assert_eq!(missing["array"], "/a");
    assert_eq!(missing["chunk"], serde_json::json!([1]));
    assert_eq!(missing["key"], key_of(&deleted));
}

/// Spec 2: a snapshot the `repo` object lists, no ref reaches (a branch was reset
/// away from it) and whose file is gone is reported as a mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_snapshot_without_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let built = healthy(dir.path(), SpecVersion::V2).await;
    let repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
        .await
        .unwrap();
    repo.reset_branch("side", built.c1, Some(built.side))
        .await
        .unwrap();
    assert!(run(dir.path(), VerifyOptions::default()).await.is_ok());
    std::fs::remove_file(dir.path().join(format!("snapshots/{}", built.side))).unwrap();
    let report = run(dir.path(), VerifyOptions::default()).await;
    let p = only(&report, ProblemKind::RepoObjectMismatch);
    assert_eq!(p.snapshot, Some(built.side));
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
}

/// After expiry and garbage collection (spec 1 and 2) the repository verifies: what
/// they leave behind is consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_collected_repository_has_no_problem() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path(), spec).await;
        let repo = Repository::open(Arc::new(LocalStorage::new(dir.path()).unwrap()))
            .await
            .unwrap();
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/a"), &[3], chunk(99)).await.unwrap();
        s.commit("c3").await.unwrap();
        let now = chrono::Utc::now();
        let expired = repo
            .expire_snapshots(now, floe::lifecycle::ExpireOptions::default())
            .await
            .unwrap();
        assert!(!expired.expired.is_empty());
        let report = run(dir.path(), VerifyOptions::default()).await;
        assert!(
            report.is_ok(),
            "{spec} after expire: {:#?}",
            report.problems
        );
        repo.garbage_collect(
            now,
            floe::lifecycle::GcOptions::default().allow_recent_cutoff(true),
            None,
        )
        .await
        .unwrap();
        let report = run(dir.path(), VerifyOptions::default()).await;
        assert!(report.is_ok(), "{spec} after gc: {:#?}", report.problems);
    }
}
