//! Retention policies, `maintain` and squash (issue 47, items 3 and 4): which
//! commits each rule keeps on a history with a tag and a fork, re-parenting onto
//! the nearest kept ancestor, stored policies, dry runs, typed refusals, garbage
//! collection afterwards, the CLI, and Icechunk 2.3.0 reading the result. (Beside
//! live writers in several OS processes: `tests/maintenance_live.rs`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use floe::format::repo_info::UpdateKind;
use floe::format::SpecVersion;
use floe::lifecycle::{GcOptions, RetentionPolicy, RetentionRule};
use floe::storage::LocalStorage;
use floe::{Error, Repository, SnapshotId, VersionSelector};

use crate::common::{self, array_def, p};

/// One 1 KiB chunk of value `v` (a native chunk object).
fn chunk(v: u8) -> Bytes {
    Bytes::from(vec![v; 1024])
}

async fn create(dir: &Path, spec: SpecVersion) -> Repository {
    Repository::create_with(
        Arc::new(LocalStorage::new(dir).unwrap()),
        None,
        spec,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap()
}

async fn open(dir: &Path) -> Repository {
    Repository::open(Arc::new(LocalStorage::new(dir).unwrap()))
        .await
        .unwrap()
}

/// The commits of [`history`].
struct History {
    /// `main`'s commits c1..c6, oldest first.
    c: Vec<SnapshotId>,
    /// `dev`'s commits d1, d2 (forked from c3).
    d: Vec<SnapshotId>,
}

/// `main`: init ← c1 ← … ← c6, commit `i` writing chunk `(i - 1) % 4` of `/a` with
/// value `i`; tag `v1` at c2; branch `dev` from c3 with d1, d2 (values 21, 22 in
/// chunk 3).
async fn history(repo: &Repository) -> History {
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4096], &[1024], "uint8"))
        .unwrap();
    let mut c = Vec::new();
    for i in 1..=6u8 {
        let s = if i == 1 {
            s.clone()
        } else {
            repo.writable_session("main").await.unwrap()
        };
        s.set_chunk(&p("/a"), &[u64::from((i - 1) % 4)], chunk(i))
            .await
            .unwrap();
        c.push(s.commit(&format!("c{i}")).await.unwrap());
    }
    repo.create_tag("v1", c[1]).await.unwrap();
    repo.create_branch("dev", c[2]).await.unwrap();
    let mut d = Vec::new();
    for v in [21u8, 22] {
        let s = repo.writable_session("dev").await.unwrap();
        s.set_chunk(&p("/a"), &[3], chunk(v)).await.unwrap();
        d.push(s.commit(&format!("d{v}")).await.unwrap());
    }
    History { c, d }
}

async fn ancestry(repo: &Repository, tip: SnapshotId) -> Vec<SnapshotId> {
    repo.ancestry(tip)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect()
}

async fn branch_history(repo: &Repository, branch: &str) -> Vec<SnapshotId> {
    ancestry(repo, repo.lookup_branch(branch).await.unwrap()).await
}

/// The value of each chunk of `/a` at `at` (0 where none is written), each chunk
/// checked to hold one value throughout.
async fn values(repo: &Repository, at: VersionSelector) -> Vec<u8> {
    let s = repo.readonly_session(&at).await.unwrap();
    let mut out = Vec::new();
    for i in 0..4u64 {
        match s.get_chunk(&p("/a"), &[i], None).await.unwrap() {
            Some(b) => {
                assert!(b.iter().all(|x| *x == b[0]), "chunk {i} mixed");
                out.push(b[0]);
            }
            None => out.push(0),
        }
    }
    out
}

/// Every ref's values: `main`, `dev`, tag `v1`.
async fn all_values(repo: &Repository) -> Vec<Vec<u8>> {
    vec![
        values(repo, VersionSelector::Branch("main".into())).await,
        values(repo, VersionSelector::Branch("dev".into())).await,
        values(repo, VersionSelector::Tag("v1".into())).await,
    ]
}

fn keep_last(n: u64) -> RetentionPolicy {
    RetentionPolicy::default().default_rule(RetentionRule::default().keep_last(n))
}

async fn collect(repo: &Repository) -> floe::lifecycle::GcSummary {
    repo.garbage_collect(
        Utc::now(),
        GcOptions::default().allow_recent_cutoff(true),
        None,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn keep_last_keeps_each_branchs_last_commits_tags_and_fork_points_reparented() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V2).await;
    let h = history(&repo).await;
    let (c, d) = (&h.c, &h.d);
    let before = all_values(&repo).await;
    let init = *branch_history(&repo, "main").await.last().unwrap();

    // A dry run says what would go and writes nothing.
    let dry = repo
        .apply_retention(Some(&keep_last(2)), true)
        .await
        .unwrap();
    let want: BTreeSet<SnapshotId> = [c[0], c[2], c[3]].into();
    assert_eq!(dry.expired, want);
    assert_eq!(branch_history(&repo, "main").await.len(), 7);

    let done = repo
        .apply_retention(Some(&keep_last(2)), false)
        .await
        .unwrap();
    assert_eq!(done.expired, want);
    // c5 and d1 lost their parents (c4, c3): onto the nearest kept ancestor, the
    // tagged c2, which lost c1 and now follows the initial commit.
    let edited: BTreeSet<SnapshotId> = [c[4], d[0], c[1]].into();
    assert_eq!(done.edited, edited);
    assert_eq!(
        branch_history(&repo, "main").await,
        [c[5], c[4], c[1], init]
    );
    assert_eq!(branch_history(&repo, "dev").await, [d[1], d[0], c[1], init]);
    assert_eq!(ancestry(&repo, c[1]).await, [c[1], init]);
    assert!(matches!(
        repo.ops_log().await.unwrap()[0].kind,
        UpdateKind::ExpirationRan
    ));
    // The diff over the re-parented step still lists every chunk c3..c5 changed.
    let diff = repo.diff(c[1], c[4]).await.unwrap();
    let chunks: BTreeSet<Vec<u64>> = diff.updated_chunks[&p("/a")]
        .iter()
        .map(|i| i.to_vec())
        .collect();
    assert_eq!(chunks, [vec![0], vec![2], vec![3]].into());

    // Applying it again releases nothing more.
    let again = repo
        .apply_retention(Some(&keep_last(2)), false)
        .await
        .unwrap();
    assert!(again.expired.is_empty(), "{:?}", again.expired);

    let summary = collect(&repo).await;
    assert_eq!(summary.snapshots_deleted, 3);
    let repo = open(dir.path()).await;
    assert_eq!(all_values(&repo).await, before);
}

#[tokio::test]
async fn keep_within_keeps_the_commits_of_the_last_moments() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V2).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4096], &[1024], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[0], chunk(1)).await.unwrap();
    let c1 = s.commit("c1").await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[1], chunk(2)).await.unwrap();
    let c2 = s.commit("c2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[2], chunk(3)).await.unwrap();
    let c3 = s.commit("c3").await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/a"), &[3], chunk(4)).await.unwrap();
    let c4 = s.commit("c4").await.unwrap();
    let init = *branch_history(&repo, "main").await.last().unwrap();

    let within = |secs| {
        RetentionPolicy::default()
            .default_rule(RetentionRule::default().keep_within(Duration::from_secs(secs)))
    };
    // Everything is younger than a minute.
    let none = repo
        .apply_retention(Some(&within(60)), false)
        .await
        .unwrap();
    assert!(none.expired.is_empty());
    let done = repo.apply_retention(Some(&within(2)), false).await.unwrap();
    assert_eq!(done.expired, [c1, c2].into());
    assert_eq!(branch_history(&repo, "main").await, [c4, c3, init]);
    assert_eq!(
        values(&repo, VersionSelector::Branch("main".into())).await,
        [1, 2, 3, 4]
    );
    // With a count too: a commit either rule keeps stays.
    let both = RetentionPolicy::default().default_rule(
        RetentionRule::default()
            .keep_last(1)
            .keep_within(Duration::from_secs(60)),
    );
    assert!(repo
        .apply_retention(Some(&both), false)
        .await
        .unwrap()
        .expired
        .is_empty());
}

#[tokio::test]
async fn a_stored_policy_round_trips_and_maintain_applies_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V2).await;
    let h = history(&repo).await;
    let (c, d) = (&h.c, &h.d);
    let init = *branch_history(&repo, "main").await.last().unwrap();
    repo.update_metadata(BTreeMap::from([("owner".to_string(), "lab".into())]))
        .await
        .unwrap();
    assert_eq!(repo.retention_policy().await.unwrap(), None);
    // Nothing stored: maintain leaves histories alone.
    let cut = Some(Utc::now() - chrono::Duration::hours(2));
    let idle = repo.maintain(cut, false).await.unwrap();
    assert_eq!(idle.retention, None);
    assert_eq!(branch_history(&repo, "main").await.len(), 7);

    let policy = keep_last(1).branch("dev", RetentionRule::default().keep_last(3));
    repo.set_retention_policy(Some(&policy)).await.unwrap();
    let repo = open(dir.path()).await;
    assert_eq!(repo.retention_policy().await.unwrap(), Some(policy));
    let metadata = repo.get_metadata().await.unwrap();
    assert_eq!(metadata["owner"], "lab");
    assert!(metadata.contains_key(floe::lifecycle::RETENTION_METADATA_KEY));

    // Dry run first, then the real thing.
    let dry = repo.maintain(cut, true).await.unwrap();
    assert_eq!(branch_history(&repo, "main").await.len(), 7);
    let done = repo.maintain(cut, false).await.unwrap();
    assert_eq!(dry.retention, done.retention);
    let released = done.retention.unwrap().expired;
    // dev keeps d2, d1 and its fork point c3, which main's last commit now follows.
    assert_eq!(released, [c[0], c[3], c[4]].into());
    assert_eq!(
        branch_history(&repo, "main").await,
        [c[5], c[2], c[1], init]
    );
    assert_eq!(
        branch_history(&repo, "dev").await,
        [d[1], d[0], c[2], c[1], init]
    );

    // Invalid policies are refused; clearing removes only the policy.
    let empty = RetentionPolicy::default().default_rule(RetentionRule::default());
    assert!(matches!(
        repo.set_retention_policy(Some(&empty)).await,
        Err(Error::InvalidRetentionPolicy { .. })
    ));
    assert!(matches!(
        repo.apply_retention(Some(&keep_last(0)), false).await,
        Err(Error::InvalidRetentionPolicy { .. })
    ));
    repo.set_retention_policy(None).await.unwrap();
    assert_eq!(repo.retention_policy().await.unwrap(), None);
    assert_eq!(repo.get_metadata().await.unwrap()["owner"], "lab");
    // A stored value that is not a policy is reported, not applied.
    repo.update_metadata(BTreeMap::from([(
        floe::lifecycle::RETENTION_METADATA_KEY.to_string(),
        serde_json::json!({"default": {"keep_lst": 1}}),
    )]))
    .await
    .unwrap();
    assert!(matches!(
        repo.maintain(cut, false).await,
        Err(Error::InvalidRetentionPolicy { .. })
    ));
}

#[tokio::test]
async fn retention_is_refused_on_spec1() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V1).await;
    history(&repo).await;
    assert!(matches!(
        repo.apply_retention(Some(&keep_last(2)), false).await,
        Err(Error::UnsupportedOnSpecVersion { .. })
    ));
    assert!(matches!(
        repo.set_retention_policy(Some(&keep_last(2))).await,
        Err(Error::UnsupportedOnSpecVersion { .. })
    ));
    // maintain on spec 1 is garbage collection alone.
    let done = repo
        .maintain(Some(Utc::now() - chrono::Duration::hours(2)), false)
        .await
        .unwrap();
    assert_eq!(done.retention, None);
}

#[tokio::test]
async fn squash_makes_a_range_one_step_and_gc_deletes_what_only_it_reached() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V2).await;
    let h = history(&repo).await;
    let (c, d) = (&h.c, &h.d);
    let before = all_values(&repo).await;
    let init = *branch_history(&repo, "main").await.last().unwrap();

    let dry = repo.squash("main", c[0], None, true).await.unwrap();
    assert_eq!(dry.squashed, c[1..5]);
    assert_eq!(branch_history(&repo, "main").await.len(), 7);

    let done = repo.squash("main", c[0], None, false).await.unwrap();
    assert_eq!((done.from, done.to), (c[0], c[5]));
    assert_eq!(done.squashed, c[1..5]);
    // c2 (tag v1) and c3 (dev's fork point) are still reached; c4 and c5 are not.
    assert_eq!(done.removed, [c[3], c[4]]);
    assert_eq!(branch_history(&repo, "main").await, [c[5], c[0], init]);
    assert_eq!(
        branch_history(&repo, "dev").await,
        [d[1], d[0], c[2], c[1], c[0], init]
    );
    assert_eq!(repo.lookup_branch("main").await.unwrap(), c[5]);
    let diff = repo.diff(c[0], c[5]).await.unwrap();
    assert_eq!(
        diff.updated_chunks[&p("/a")].len(),
        4,
        "c2..c6 wrote chunks 1, 2, 3, 0"
    );
    assert!(matches!(
        repo.ops_log().await.unwrap()[0].kind,
        UpdateKind::ExpirationRan
    ));
    // Nothing left between c1 and c6.
    assert!(repo
        .squash("main", c[0], None, false)
        .await
        .unwrap()
        .squashed
        .is_empty());

    // Ranges that are not a stretch of the branch are refused.
    for (from, to) in [(c[5], Some(c[0])), (c[0], Some(d[0])), (d[0], None)] {
        assert!(
            matches!(
                repo.squash("main", from, to, false).await,
                Err(Error::InvalidSquashRange { .. })
            ),
            "{from} {to:?}"
        );
    }
    assert!(matches!(
        repo.squash("nope", c[0], None, false).await,
        Err(Error::BranchNotFound { .. })
    ));

    let summary = collect(&repo).await;
    assert_eq!(summary.snapshots_deleted, 2);
    let repo = open(dir.path()).await;
    assert_eq!(all_values(&repo).await, before);
}

#[tokio::test]
async fn squash_a_stretch_in_the_middle_on_both_specs() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let repo = create(dir.path(), spec).await;
        let h = history(&repo).await;
        let c = &h.c;
        let init = *branch_history(&repo, "main").await.last().unwrap();
        let at_c5 = values(&repo, VersionSelector::Snapshot(c[4])).await;
        let done = repo.squash("main", c[1], Some(c[4]), false).await.unwrap();
        assert_eq!(done.squashed, c[2..4], "{spec:?}");
        let repo = open(dir.path()).await;
        assert_eq!(
            branch_history(&repo, "main").await,
            [c[5], c[4], c[1], c[0], init],
            "{spec:?}"
        );
        assert_eq!(values(&repo, VersionSelector::Snapshot(c[4])).await, at_c5);
        // A commit on the branch after the squash lands on the same tip.
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/a"), &[1], chunk(99)).await.unwrap();
        let next = s.commit("after the squash").await.unwrap();
        assert_eq!(branch_history(&repo, "main").await[..2], [next, c[5]]);
    }
}

/// Icechunk 2.3.0 on a repository floe thinned and squashed: the same histories
/// and values.
#[tokio::test]
async fn icechunk_reads_retained_and_squashed_histories() {
    let Some(py) = common::require(common::python312(), "Python 3.12 with icechunk 2.x") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V2).await;
    let h = history(&repo).await;
    repo.apply_retention(Some(&keep_last(2)), false)
        .await
        .unwrap();
    repo.squash("dev", h.c[1], None, false).await.unwrap();
    collect(&repo).await;
    let repo = open(dir.path()).await;
    const SCRIPT: &str = r#"
import json, sys
import icechunk, zarr
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))
out = {}
for kind, name in [("branch", "main"), ("branch", "dev"), ("tag", "v1")]:
    out[name] = [s.id for s in repo.ancestry(**{kind: name})]
    session = repo.readonly_session(**{kind: name})
    a = zarr.open_array(session.store, path="a", mode="r")[:]
    out[name + "_values"] = [int(a[i * 1024]) for i in range(4)]
print(json.dumps(out))
"#;
    let out = common::python_stdout(&py, SCRIPT, &[dir.path().to_str().unwrap()]);
    let seen: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids = |v: Vec<SnapshotId>| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(
        seen["main"],
        serde_json::json!(ids(branch_history(&repo, "main").await))
    );
    assert_eq!(
        seen["dev"],
        serde_json::json!(ids(branch_history(&repo, "dev").await))
    );
    assert_eq!(
        seen["v1"],
        serde_json::json!(ids(ancestry(&repo, h.c[1]).await))
    );
    assert_eq!(seen["dev"].as_array().unwrap().len(), 3, "{seen}");
    let values_now = all_values(&repo).await;
    for (name, v) in ["main", "dev", "v1"].iter().zip(values_now) {
        assert_eq!(
            seen[format!("{name}_values")],
            serde_json::json!(v),
            "{name}"
        );
    }
}

fn floe(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(args)
        .env_remove("FLOE_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_sets_policies_maintains_expires_by_count_and_squashes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = create(dir.path(), SpecVersion::V2).await;
    let h = history(&repo).await;
    let c = &h.c;
    let path = dir.path().to_str().unwrap();

    let (ok, out, _) = floe(&["retention", path]);
    assert!(ok);
    assert!(out.contains("No retention policy"), "{out}");
    let (ok, _, err) = floe(&["retention", path, "--keep-last", "0"]);
    assert!(!ok);
    assert!(err.contains("at least 1"), "{err}");
    let (ok, out, err) = floe(&["retention", path, "--keep-last", "3", "--keep-within", "1w"]);
    assert!(ok, "{err}");
    assert!(out.contains("the last 3 commit(s)"), "{out}");
    let (ok, out, _) = floe(&[
        "retention",
        path,
        "--branch",
        "dev",
        "--keep-last",
        "1",
        "--json",
    ]);
    assert!(ok);
    let policy: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        policy,
        serde_json::json!({"default": {"keep_last": 3, "keep_within_seconds": 604_800},
                           "branches": {"dev": {"keep_last": 1}}})
    );
    // Everything is younger than a week, so only dev's rule (its last commit)
    // releases: d1.
    let (ok, out, err) = floe(&["maintain", path, "--gc-older-than", "2h", "--json"]);
    assert!(ok, "{err}");
    let summary: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        summary["retention"]["expired"],
        serde_json::json!([h.d[0].to_string()])
    );
    assert_eq!(summary["gc"]["snapshots_deleted"], 0);
    let (ok, _, _) = floe(&["retention", path, "--clear"]);
    assert!(ok);
    assert_eq!(
        open(dir.path()).await.retention_policy().await.unwrap(),
        None
    );

    // expire by count, dry run then real.
    let (ok, out, err) = floe(&[
        "expire",
        path,
        "--keep-last",
        "2",
        "--branch",
        "main",
        "--dry-run",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("would release snapshot"), "{out}");
    assert_eq!(
        branch_history(&open(dir.path()).await, "main").await.len(),
        7
    );
    let (ok, _, err) = floe(&["expire", path, "--older-than", "1d", "--keep-last", "2"]);
    assert!(!ok);
    assert!(err.contains("cannot be used with"), "{err}");

    // squash by snapshot id and by tag.
    let (ok, out, err) = floe(&["squash", path, "main", "--from", "v1", "--json"]);
    assert!(ok, "{err}");
    let done: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(done["from"], c[1].to_string());
    assert_eq!(done["squashed"].as_array().unwrap().len(), 3);
    let (ok, _, err) = floe(&["squash", path, "main", "--from", &c[5].to_string()]);
    assert!(!ok);
    assert!(err.contains("not an ancestor"), "{err}");
}
