//! `Storage::local_files`, the one blocking capability of a storage (issue 28): the
//! local backend offers it, object and in-memory storage do not, and every wrapper
//! forwards it under its own rules: the conditional-write guard as it is, a read-only
//! storage refusing its writes, fault injection under its plan.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{
    new_in_memory_storage, CheckedConditionalWrites, Durability, LocalStorage, LocalStorageOptions,
    ReadOnlyStorage, Storage, StorageError,
};

fn local(dir: &std::path::Path) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir).unwrap())
}

/// Local storage has the capability (quick writes unless synced); in-memory storage
/// has none, and neither has a wrapper over it.
#[tokio::test]
async fn local_storage_offers_local_files_and_memory_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let storage = local(dir.path());
    let files = storage
        .local_files()
        .expect("local storage has local files");
    assert!(files.quick_writes());
    files.put_fresh("chunks/abc", b"0123456789").unwrap();
    let mut dest = [0u8; 4];
    files.get_range_into("chunks/abc", 3, &mut dest).unwrap();
    assert_eq!(&dest, b"3456");
    assert_eq!(
        storage.get("chunks/abc").await.unwrap().bytes,
        Bytes::from_static(b"0123456789")
    );
    assert_eq!(files.get("chunks/abc").unwrap().bytes, &b"0123456789"[..]);

    let synced = LocalStorage::with_options(
        &dir.path().join("synced"),
        LocalStorageOptions::default().durability(Durability::Synced),
    )
    .unwrap();
    assert!(!synced.local_files().unwrap().quick_writes());

    let memory = new_in_memory_storage();
    assert!(memory.local_files().is_none());
    assert!(ReadOnlyStorage::new(Arc::clone(&memory))
        .local_files()
        .is_none());
    assert!(CheckedConditionalWrites::new(memory)
        .local_files()
        .is_none());
}

/// Wrappers forward the capability: the guard as is, a read-only storage reading
/// through and refusing writes with the read-only error.
#[tokio::test]
async fn wrappers_forward_local_files_with_their_rules() {
    let dir = tempfile::tempdir().unwrap();
    let inner = local(dir.path());
    inner
        .put("chunks/x", Bytes::from_static(b"abcdef"))
        .await
        .unwrap();

    let guarded = CheckedConditionalWrites::new(Arc::clone(&inner));
    let files = guarded
        .local_files()
        .expect("the guard forwards local files");
    let mut dest = [0u8; 2];
    files.get_range_into("chunks/x", 1, &mut dest).unwrap();
    assert_eq!(&dest, b"bc");

    let read_only = ReadOnlyStorage::new(Arc::clone(&inner));
    let files = read_only
        .local_files()
        .expect("a read-only wrapper forwards local files");
    assert_eq!(files.get("chunks/x").unwrap().bytes, &b"abcdef"[..]);
    match files.put_fresh("chunks/y", b"new") {
        Err(StorageError::ReadOnly { key, .. }) => assert_eq!(key, "chunks/y"),
        other => panic!("a read-only wrapper must refuse writes: {other:?}"),
    }
    assert!(matches!(
        inner.get("chunks/y").await,
        Err(StorageError::NotFound { .. })
    ));
}

/// Fault injection applies its plan to blocking calls too: a blocking read is a
/// `Get` or `GetRange`, a blocking write a `Put`; a failure is a backend error
/// naming the key, a delay sleeps the calling thread.
#[tokio::test]
async fn fault_injection_applies_its_plan_to_local_files() {
    let dir = tempfile::tempdir().unwrap();
    let inner = local(dir.path());
    inner
        .put("chunks/x", Bytes::from_static(b"abcdef"))
        .await
        .unwrap();
    let faulty = FaultyStorage::new(
        Arc::clone(&inner),
        Box::new(|call, key| match (call, key) {
            (Call::GetRange, "chunks/x") => Fault::FailBefore,
            (Call::Put, "chunks/slow") => Fault::Delay(Duration::from_millis(50)),
            (Call::Put, "chunks/lost") => Fault::FailAfter,
            _ => Fault::None,
        }),
    );
    let files = faulty
        .local_files()
        .expect("fault injection forwards local files");
    let mut dest = [0u8; 2];
    match files.get_range_into("chunks/x", 0, &mut dest) {
        Err(StorageError::Backend { key, .. }) => assert_eq!(key, "chunks/x"),
        other => panic!("an injected ranged read failure: {other:?}"),
    }
    assert_eq!(files.get("chunks/x").unwrap().bytes, &b"abcdef"[..]);
    let start = Instant::now();
    files.put_fresh("chunks/slow", b"s").unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(50),
        "the delay sleeps"
    );
    match files.put_fresh("chunks/lost", b"l") {
        Err(StorageError::Backend { key, .. }) => assert_eq!(key, "chunks/lost"),
        other => panic!("an injected lost response: {other:?}"),
    }
    // The write landed before its response was lost.
    assert_eq!(
        inner.get("chunks/lost").await.unwrap().bytes,
        Bytes::from_static(b"l")
    );
}

/// A local storage at a missing directory creates nothing until the first write:
/// reads find nothing, listings are empty, and the first write creates the
/// directories on the way (Icechunk's `local_filesystem_storage` behaves so).
#[tokio::test]
async fn a_missing_root_appears_with_the_first_write() {
    use floe::storage::LocalStorage;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("not").join("yet");
    let storage = LocalStorage::new(&root).unwrap();
    assert!(
        !dir.path().join("not").exists(),
        "nothing created at construction"
    );
    assert!(matches!(
        storage.get("refs/branch.main/ref.json").await,
        Err(floe::storage::StorageError::NotFound { .. })
    ));
    let listed = storage.list("").await.unwrap();
    assert!(listed.is_empty());
    assert!(!root.exists(), "reads and listings create nothing");
    storage
        .put("snapshots/ABC", bytes::Bytes::from_static(b"x"))
        .await
        .unwrap();
    assert!(root.join("snapshots").join("ABC").is_file());
    assert_eq!(
        storage.get("snapshots/ABC").await.unwrap().bytes,
        bytes::Bytes::from_static(b"x")
    );
}
