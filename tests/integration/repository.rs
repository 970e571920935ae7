//! Repository creation and opening: the exact layout of a new repository, typed
//! errors opening a missing or corrupt one, and concurrent creation (exactly one wins).

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::fixture::{keys, local};
use bytes::Bytes;
use floe::format::envelope::{self, FileType};
use floe::format::snapshot::Snapshot;
use floe::format::SnapshotId;
use floe::storage::{new_in_memory_storage, Storage};
use floe::{Error, Repository};

/// The spec-1 layout (spec 2's is in tests/integration/spec2.rs).
#[tokio::test]
async fn new_repository_has_exactly_the_spec_layout() {
    let dir = tempfile::tempdir().unwrap();
    let storage = local(&dir);
    common::create_spec1(Arc::clone(&storage), None).await;
    assert_eq!(
        keys(storage.as_ref()).await,
        vec![
            "refs/branch.main/ref.json",
            "snapshots/1CECHNKREP0F1RSTCMT0"
        ]
    );
    let r = storage
        .get("refs/branch.main/ref.json")
        .await
        .unwrap()
        .bytes;
    assert_eq!(&r[..], br#"{"snapshot":"1CECHNKREP0F1RSTCMT0"}"#);
    let snap = storage
        .get("snapshots/1CECHNKREP0F1RSTCMT0")
        .await
        .unwrap()
        .bytes;
    assert_eq!(&snap[..12], "ICE🧊CHUNK".as_bytes());
    let writer = std::str::from_utf8(&snap[12..36]).unwrap();
    assert_eq!(
        writer.trim_end(),
        format!("floe-{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(writer.len(), 24);
    assert_eq!(snap[36], 1, "spec version");
    assert_eq!(snap[37], 1, "file type snapshot");
    assert_eq!(snap[38], 1, "zstd");
    let payload = envelope::open(FileType::Snapshot, &snap).unwrap();
    assert_eq!(&payload[4..8], b"Ichk");
    let s = Snapshot::decode(&snap).unwrap();
    assert_eq!(s.id, SnapshotId::INITIAL);
    assert_eq!(s.parent_id, None);
    assert_eq!(s.message, "Repository initialized");
    assert!(s.nodes.is_empty() && s.manifest_files.is_empty());
    assert_eq!(
        s.metadata,
        BTreeMap::from([("__root".to_string(), serde_json::json!(true))])
    );
    // A second create fails, the first repository is untouched.
    assert!(matches!(
        Repository::create(Arc::clone(&storage), None).await,
        Err(Error::RepositoryExists { .. })
    ));
    assert_eq!(keys(storage.as_ref()).await.len(), 2);
}

#[tokio::test]
async fn open_missing_repository_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Repository::open(local(&dir)).await,
        Err(Error::RepositoryNotFound { .. })
    ));
    // `open_or_create` creates one there, of spec 2 (the default).
    let created = Repository::open_or_create(local(&dir), floe::OpenOptions::default())
        .await
        .unwrap();
    assert_eq!(created.spec_version(), floe::format::SpecVersion::V2);
}

#[tokio::test]
async fn a_corrupt_repo_object_is_a_typed_format_error() {
    let storage = new_in_memory_storage();
    storage
        .put("repo", Bytes::from_static(b"\x00"))
        .await
        .unwrap();
    let err = Repository::open(Arc::clone(&storage)).await.unwrap_err();
    // A `repo` object marks spec 2, whatever else is there; this one is corrupt.
    assert!(
        matches!(
            err,
            Error::Format(floe::format::FormatError::Truncated { .. })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_creates_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let storage = local(&dir);
        tasks.push(tokio::spawn(async move {
            Repository::create(storage, None).await.is_ok()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
    // `create` makes spec 2, as Icechunk 2.x does.
    assert_eq!(
        Repository::open(local(&dir)).await.unwrap().spec_version(),
        floe::format::SpecVersion::V2
    );
}

/// Creation checks for an existing repository while it writes the initial snapshot
/// (one round trip): beside an existing repository of either spec that write changes
/// nothing (every object keeps its bytes), and a root snapshot left by a creation that
/// did not finish is replaced by the new repository's own.
#[tokio::test]
async fn create_beside_existing_repository_changes_no_object() {
    for spec in [floe::format::SpecVersion::V1, floe::format::SpecVersion::V2] {
        let dir = tempfile::tempdir().unwrap();
        let storage = local(&dir);
        Repository::create_with(
            Arc::clone(&storage),
            None,
            spec,
            floe::OpenOptions::default(),
        )
        .await
        .unwrap();
        let before = object_bytes(storage.as_ref()).await;
        for again in [floe::format::SpecVersion::V1, floe::format::SpecVersion::V2] {
            assert!(matches!(
                Repository::create_with(
                    Arc::clone(&storage),
                    None,
                    again,
                    floe::OpenOptions::default()
                )
                .await,
                Err(Error::RepositoryExists { .. })
            ));
        }
        assert_eq!(object_bytes(storage.as_ref()).await, before, "spec {spec}");

        // A leftover root snapshot (garbage bytes) and nothing else: creation succeeds
        // and the repository opens with its own initial snapshot.
        let dir = tempfile::tempdir().unwrap();
        let storage = local(&dir);
        storage
            .put(
                &floe::format::keys::snapshot(&SnapshotId::INITIAL),
                Bytes::from_static(b"not a snapshot"),
            )
            .await
            .unwrap();
        Repository::create_with(
            Arc::clone(&storage),
            None,
            spec,
            floe::OpenOptions::default(),
        )
        .await
        .unwrap();
        let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
        let tip = repo.lookup_branch("main").await.unwrap();
        assert_eq!(tip, SnapshotId::INITIAL);
        assert_eq!(repo.ancestry(tip).await.unwrap().len(), 1, "spec {spec}");
    }
}

async fn object_bytes(storage: &dyn Storage) -> Vec<(String, Bytes)> {
    let mut out = Vec::new();
    for key in keys(storage).await {
        let bytes = storage.get(&key).await.unwrap().bytes;
        out.push((key, bytes));
    }
    out
}
