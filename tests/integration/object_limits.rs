//! Everything floe writes, floe reads back: large and very compressible objects (an
//! attribute, a commit message, commit and repository metadata, inline chunks) commit
//! and read back on both spec versions, while objects past the format's limit
//! (`format::limits`) are refused before the commit point with a typed error that
//! leaves the branch as it was. A repository whose spec-2 `repo` object was damaged
//! is repaired with floe's own `repair`; a spec-1 branch whose tip snapshot cannot be
//! read is reset without reading it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{array_json, group_json, p};
use bytes::Bytes;
use floe::format::config::RepositoryConfig;
use floe::format::limits::{MAX_METADATA_DEPTH, MAX_OBJECT_BYTES};
use floe::format::{FormatError, SpecVersion};
use floe::lifecycle::{repair_repo_object, RepairOutcome};
use floe::storage::{new_in_memory_storage, Storage};
use floe::zarr::store::Store;
use floe::{Error, OpenOptions, Repository, VersionSelector};
use proptest::prelude::*;

const SPECS: [SpecVersion; 2] = [SpecVersion::V1, SpecVersion::V2];

async fn create(
    storage: &Arc<dyn Storage>,
    spec: SpecVersion,
    config: Option<RepositoryConfig>,
) -> Repository {
    Repository::create_with(Arc::clone(storage), config, spec, OpenOptions::default())
        .await
        .unwrap()
}

/// A new handle on `storage`: nothing cached, every object decoded again.
async fn reopen(storage: &Arc<dyn Storage>) -> Repository {
    Repository::open(Arc::clone(storage)).await.unwrap()
}

/// A string of `n` NUL characters whose pages are not touched until read (calloc).
fn untouched_string(n: usize) -> String {
    String::from_utf8(vec![0u8; n]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_compressible_attribute_commits_and_reads_back() {
    for spec in SPECS {
        let storage = new_in_memory_storage();
        let repo = create(&storage, spec, None).await;
        let session = repo.writable_session("main").await.unwrap();
        // 40 MiB of one letter: ~10,000:1 under zstd, past the old 1000:1 bound.
        let big = "a".repeat(40 << 20);
        session
            .store()
            .set("zarr.json", group_json(serde_json::json!({ "big": big })))
            .await
            .unwrap();
        session.commit("big attribute").await.unwrap();

        let again = reopen(&storage).await;
        let s = again
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        let node = s.get_node(&p("/")).unwrap();
        let meta: serde_json::Value = serde_json::from_slice(&node.user_data).unwrap();
        assert_eq!(
            meta["attributes"]["big"].as_str().map(str::len),
            Some(40 << 20),
            "spec {spec}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_message_and_large_metadata_commit_and_read_back() {
    for spec in SPECS {
        let storage = new_in_memory_storage();
        let repo = create(&storage, spec, None).await;
        let session = repo.writable_session("main").await.unwrap();
        session
            .store()
            .set("zarr.json", group_json(serde_json::json!({})))
            .await
            .unwrap();
        let message = "m".repeat(24 << 20);
        let metadata =
            BTreeMap::from([("note".to_string(), serde_json::json!("n".repeat(24 << 20)))]);
        let id = session
            .commit_with(&message, metadata, Default::default())
            .await
            .unwrap();
        if spec == SpecVersion::V2 {
            let meta =
                BTreeMap::from([("repo".to_string(), serde_json::json!("r".repeat(24 << 20)))]);
            repo.set_metadata(meta).await.unwrap();
        }

        let again = reopen(&storage).await;
        let history = again.ancestry(id).await.unwrap();
        assert_eq!(history[0].message.len(), 24 << 20, "spec {spec}");
        assert_eq!(
            history[0].metadata["note"].as_str().map(str::len),
            Some(24 << 20)
        );
        if spec == SpecVersion::V2 {
            let meta = again.get_metadata().await.unwrap();
            assert_eq!(meta["repo"].as_str().map(str::len), Some(24 << 20));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_inline_chunks_commit_and_read_back() {
    for spec in SPECS {
        let storage = new_in_memory_storage();
        let mut config = RepositoryConfig::default();
        config.set_inline_chunk_threshold_bytes(Some(u16::MAX));
        let repo = create(&storage, spec, Some(config)).await;
        let session = repo.writable_session("main").await.unwrap();
        let store = session.store();
        store
            .set("zarr.json", group_json(serde_json::json!({})))
            .await
            .unwrap();
        // 400 inline chunks of 60,000 bytes: a ~23 MiB manifest of repeated bytes.
        let chunk = 60_000u64;
        let n = 400u64;
        store
            .set(
                "a/zarr.json",
                array_json(&[n * chunk], &[chunk], "uint8", serde_json::json!(0)),
            )
            .await
            .unwrap();
        for i in 0..n {
            store
                .set(&format!("a/c/{i}"), Bytes::from(vec![7u8; 60_000]))
                .await
                .unwrap();
        }
        session.commit("inline").await.unwrap();

        let again = reopen(&storage).await;
        let s = again
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        for i in [0, n / 2, n - 1] {
            let got = s.store().get(&format!("a/c/{i}")).await.unwrap().unwrap();
            assert_eq!(got.len(), 60_000, "spec {spec}");
            assert!(got.iter().all(|&b| b == 7));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_past_the_limit_are_refused_before_the_commit_point() {
    for spec in SPECS {
        let storage = new_in_memory_storage();
        let repo = create(&storage, spec, None).await;
        let session = repo.writable_session("main").await.unwrap();
        session
            .store()
            .set("zarr.json", group_json(serde_json::json!({"x": 1})))
            .await
            .unwrap();
        let first = session.commit("first").await.unwrap();

        session
            .store()
            .set("zarr.json", group_json(serde_json::json!({"x": 2})))
            .await
            .unwrap();
        // Past the limit: a message of 2 GiB (its pages are never touched).
        let message = untouched_string(usize::try_from(MAX_OBJECT_BYTES).unwrap() + 1);
        let refused = session.commit(&message).await;
        assert!(
            matches!(
                refused,
                Err(Error::Format(FormatError::ObjectTooLarge { what: "snapshot", limit, .. }))
                    if limit == MAX_OBJECT_BYTES
            ),
            "spec {spec}: {refused:?}"
        );
        drop(message);

        // Too deep: metadata nested past the limit.
        let mut deep = serde_json::json!(0);
        for _ in 0..MAX_METADATA_DEPTH {
            deep = serde_json::json!([deep]);
        }
        let refused = session
            .commit_with(
                "deep",
                BTreeMap::from([("d".to_string(), deep)]),
                Default::default(),
            )
            .await;
        assert!(
            matches!(
                refused,
                Err(Error::Format(FormatError::MetadataTooDeep { depth, limit: MAX_METADATA_DEPTH, .. }))
                    if depth == MAX_METADATA_DEPTH + 1
            ),
            "spec {spec}: {refused:?}"
        );

        // Nothing moved, and the branch reads; a commit within the limits lands.
        let again = reopen(&storage).await;
        assert_eq!(again.lookup_branch("main").await.unwrap(), first);
        let second = session.commit("within limits").await.unwrap();
        assert_eq!(
            reopen(&storage).await.lookup_branch("main").await.unwrap(),
            second
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repository_metadata_past_the_limits_is_refused_and_the_repository_reads() {
    let storage = new_in_memory_storage();
    let repo = create(&storage, SpecVersion::V2, None).await;
    let mut deep = serde_json::json!("leaf");
    for _ in 0..MAX_METADATA_DEPTH {
        deep = serde_json::json!({ "k": deep });
    }
    let refused = repo
        .set_metadata(BTreeMap::from([("d".to_string(), deep)]))
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::Format(FormatError::MetadataTooDeep {
                what: "repository",
                ..
            }))
        ),
        "{refused:?}"
    );
    assert!(reopen(&storage)
        .await
        .get_metadata()
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_spec2_repo_object_is_repaired_from_its_newest_copy() {
    let storage = new_in_memory_storage();
    let repo = create(&storage, SpecVersion::V2, None).await;
    let session = repo.writable_session("main").await.unwrap();
    session
        .store()
        .set("zarr.json", group_json(serde_json::json!({"v": 1})))
        .await
        .unwrap();
    let first = session.commit("first").await.unwrap();
    repo.create_tag("v1", first).await.unwrap();

    assert_eq!(
        repair_repo_object(storage.as_ref(), false).await.unwrap(),
        RepairOutcome::Healthy
    );

    // A bad write: the object is replaced by bytes no reader accepts.
    let good = storage.get("repo").await.unwrap().bytes;
    let mut bad = good.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    bad.truncate(bad.len() - 7);
    storage.put("repo", Bytes::from(bad.clone())).await.unwrap();
    assert!(matches!(
        Repository::open(Arc::clone(&storage)).await,
        Err(Error::Format(_))
    ));

    let dry = repair_repo_object(storage.as_ref(), true).await.unwrap();
    assert!(matches!(dry, RepairOutcome::WouldRestore { .. }), "{dry:?}");
    assert_eq!(storage.get("repo").await.unwrap().bytes, Bytes::from(bad));

    let done = repair_repo_object(storage.as_ref(), false).await.unwrap();
    let RepairOutcome::Restored {
        damaged_saved_as, ..
    } = done
    else {
        panic!("{done:?}");
    };
    assert!(storage
        .get(&format!("overwritten/{damaged_saved_as}"))
        .await
        .is_ok());
    // The newest copy is the object the tag creation replaced: the commit is there,
    // the tag (the damaged update's predecessor) too, since the bad write replaced
    // the object after it.
    let again = reopen(&storage).await;
    assert_eq!(again.lookup_branch("main").await.unwrap(), first);
    let s = again
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(s.get_node(&p("/")).is_ok());
    // And the repository takes commits again.
    let w = again.writable_session("main").await.unwrap();
    w.store()
        .set("zarr.json", group_json(serde_json::json!({"v": 2})))
        .await
        .unwrap();
    w.commit("after repair").await.unwrap();
}

/// `repair` orders the copies by their ops logs, not by the writers' clocks: the last
/// update before the damage came from a writer whose clock was a day behind, so the
/// copy it saved (the newest state that reads) has the oldest time in its name. The
/// repair restores that state, with every commit but the damaged update's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_restores_the_newest_state_by_ops_log_when_a_clock_was_behind() {
    let storage = new_in_memory_storage();
    let repo = create(&storage, SpecVersion::V2, None).await;
    let mut tips = Vec::new();
    for v in 0..4 {
        let session = repo.writable_session("main").await.unwrap();
        session
            .store()
            .set("zarr.json", group_json(serde_json::json!({ "v": v })))
            .await
            .unwrap();
        tips.push(session.commit(&format!("commit {v}")).await.unwrap());
        // Copies saved in the same millisecond would sort by their random part;
        // the setup below needs names in the order of the updates.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    // The copies, newest name first; the first is the state before the last commit.
    let copies = |s: &Arc<dyn Storage>| {
        let s = Arc::clone(s);
        async move {
            let mut keys: Vec<String> = s
                .list("overwritten/")
                .await
                .unwrap()
                .into_iter()
                .map(|i| i.key)
                .filter(|k| k.starts_with("overwritten/repo."))
                .collect();
            keys.sort();
            keys
        }
    };
    let before = copies(&storage).await;
    // The writer of the last commit had a clock a day behind: the copy it saved
    // carries a time older than every other copy's.
    let newest_state = before[0].clone();
    let day_ago_ms = (chrono::Utc::now() - chrono::Duration::days(1)).timestamp_millis() as u64;
    let renamed = format!(
        "overwritten/{}",
        floe::format::keys::repo_backup_name(day_ago_ms)
    );
    let bytes = storage.get(&newest_state).await.unwrap().bytes;
    storage.put(&renamed, bytes).await.unwrap();
    storage.delete(&newest_state).await.unwrap();
    assert_eq!(copies(&storage).await.last(), Some(&renamed));

    // The last update's object is damaged.
    storage
        .put("repo", Bytes::from_static(b"damaged by a faulty client"))
        .await
        .unwrap();
    let done = repair_repo_object(storage.as_ref(), false).await.unwrap();
    let RepairOutcome::Restored { from, .. } = done else {
        panic!("{done:?}");
    };
    assert_eq!(format!("overwritten/{from}"), renamed);
    // The state before the damaged update: main at the commit before the last one,
    // not two before (the copy with the newest name).
    let again = reopen(&storage).await;
    assert_eq!(again.lookup_branch("main").await.unwrap(), tips[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_without_a_readable_copy_is_a_typed_error() {
    let storage = new_in_memory_storage();
    create(&storage, SpecVersion::V2, None).await;
    storage
        .put("repo", Bytes::from_static(b"not a repo object"))
        .await
        .unwrap();
    let r = repair_repo_object(storage.as_ref(), false).await;
    assert!(
        matches!(r, Err(Error::NoReadableRepoBackup { .. })),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec1_branch_whose_tip_cannot_be_read_is_reset_without_reading_it() {
    let storage = new_in_memory_storage();
    let repo = create(&storage, SpecVersion::V1, None).await;
    let session = repo.writable_session("main").await.unwrap();
    session
        .store()
        .set("zarr.json", group_json(serde_json::json!({"v": 1})))
        .await
        .unwrap();
    let first = session.commit("first").await.unwrap();
    session
        .store()
        .set("zarr.json", group_json(serde_json::json!({"v": 2})))
        .await
        .unwrap();
    let second = session.commit("second").await.unwrap();
    // The tip's snapshot file is damaged.
    storage
        .put(
            &format!("snapshots/{second}"),
            Bytes::from_static(b"damaged"),
        )
        .await
        .unwrap();
    let again = reopen(&storage).await;
    assert!(matches!(
        again
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await,
        Err(Error::Format(_))
    ));
    again
        .reset_branch("main", first, Some(second))
        .await
        .unwrap();
    let s = again
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(s.get_node(&p("/")).is_ok());
}

/// `n` letters repeating a period of `distinct` letters starting at `byte` (1: the
/// most compressible).
fn content(n: usize, byte: u8, distinct: u8) -> String {
    let period: Vec<u8> = (0..distinct)
        .map(|i| b'a' + byte.wrapping_add(i) % 26)
        .collect();
    let bytes: Vec<u8> = period.iter().copied().cycle().take(n).collect();
    String::from_utf8(bytes).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, failure_persistence: None, ..ProptestConfig::default() })]

    /// Snapshots (an attribute, the message, commit metadata), manifests (inline
    /// refs), transaction logs and `repo` objects (metadata, messages) around the
    /// sizes and ratios the reader used to refuse, on both spec versions, encode and
    /// decode to what went in.
    #[test]
    fn every_object_kind_round_trips_around_the_old_bounds(
        mib in 17usize..=24, byte in any::<u8>(), distinct in prop_oneof![Just(1u8), Just(2u8), 3u8..40], v2 in any::<bool>()
    ) {
        use floe::format::manifest::{ChunkPayload, Manifest};
        use floe::format::snapshot::{NodeData, NodeSnapshot, Snapshot};
        use floe::format::transaction_log::TransactionLog;
        use floe::format::{ManifestId, NodeId, SnapshotId};

        let spec = if v2 { SpecVersion::V2 } else { SpecVersion::V1 };
        let text = content(mib << 20, byte, distinct);

        // Snapshot: an attribute, the message and metadata.
        let mut snap = Snapshot::initial(spec);
        snap.id = SnapshotId::random();
        snap.message = text.clone();
        snap.metadata.insert("m".into(), serde_json::json!(text.clone()));
        snap.nodes.insert(p("/"), NodeSnapshot {
            id: NodeId::random(),
            path: p("/"),
            user_data: group_json(serde_json::json!({ "t": text.clone() })),
            node_data: NodeData::Group,
        });
        let back = Snapshot::decode(&snap.encode().unwrap()).unwrap();
        prop_assert_eq!(&back.message, &snap.message);
        prop_assert_eq!(&back.metadata, &snap.metadata);
        prop_assert_eq!(&back.nodes[&p("/")].user_data, &snap.nodes[&p("/")].user_data);

        // Manifest: inline refs of the same bytes.
        let node = NodeId::random();
        let chunk = Bytes::from(text.as_bytes()[..60_000].to_vec());
        let refs = (0..((mib << 20) / 60_000) as u64)
            .map(|i| (vec![i], ChunkPayload::Inline(chunk.clone())))
            .collect();
        let manifest = Manifest { id: ManifestId::random(), arrays: BTreeMap::from([(node, refs)]) };
        let back = Manifest::decode(&manifest.encode().unwrap()).unwrap();
        prop_assert_eq!(back, manifest);

        // Transaction log: many chunk indices (regular, so very compressible).
        let mut log = TransactionLog::new(SnapshotId::random());
        let chunks = log.updated_chunks.entry(node).or_default();
        for i in 0..(mib as u64) * 4_000 {
            chunks.insert(vec![i % 1000, i / 1000]);
        }
        let back = TransactionLog::decode(&log.encode_as(spec).unwrap()).unwrap();
        prop_assert_eq!(back.updated_chunks, log.updated_chunks);

        // The `repo` object (spec 2): repository metadata, through a repository.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let meta = BTreeMap::from([("r".to_string(), serde_json::json!(text))]);
        let back = rt.block_on(async {
            let storage = new_in_memory_storage();
            let repo = create(&storage, SpecVersion::V2, None).await;
            repo.set_metadata(meta.clone()).await.unwrap();
            reopen(&storage).await.get_metadata().await.unwrap()
        });
        prop_assert_eq!(back, meta);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_repair_restores_a_damaged_repo_object_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(floe::storage::LocalStorage::new(dir.path()).unwrap());
    let repo = create(&storage, SpecVersion::V2, None).await;
    let session = repo.writable_session("main").await.unwrap();
    session
        .store()
        .set("zarr.json", group_json(serde_json::json!({})))
        .await
        .unwrap();
    let first = session.commit("first").await.unwrap();
    // The newest copy under overwritten/ is the object before the last update: tag
    // one, so that the copy holds the commit.
    repo.create_tag("v1", first).await.unwrap();
    std::fs::write(dir.path().join("repo"), b"\x1b[31mdamaged").unwrap();

    let floe = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(args)
            .output()
            .unwrap()
    };
    let path = dir.path().to_str().unwrap();
    let log = floe(&["log", path]);
    assert!(!log.status.success());
    let dry = floe(&["repair", path, "--dry-run", "--json"]);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(v["state"], "would_restore");
    let done = floe(&["repair", path]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let text = String::from_utf8(done.stdout).unwrap();
    assert!(
        text.contains("Restored the copy overwritten/repo."),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "{text}");
    let log = floe(&["log", path]);
    assert!(
        log.status.success(),
        "{}",
        String::from_utf8_lossy(&log.stderr)
    );
    assert!(String::from_utf8_lossy(&log.stdout).contains("first"));
    let again = floe(&["repair", path, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["state"], "healthy");
}
