//! Storage conformance: every backend (memory, local filesystem, S3) honours the
//! [`Storage`] contract the repository engine relies on: reads and typed errors,
//! ranged reads, conditional writes (create-if-absent and compare-and-swap) that have
//! exactly one winner among racing tasks and racing OS processes, idempotent deletes,
//! and listing by raw key prefix in key-byte order.
//!
//! The S3 tests run against the server named by `FLOE_TEST_S3_BUCKET` and the `AWS_*`
//! variables (.ci/run starts one); they are skipped when it is absent, except in CI
//! (`CI=true`), where that is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::Utc;
use floe::storage::{
    create_storage, new_in_memory_storage, open_storage, parse_storage_url, LocalStorage,
    ObjectVersion, S3Options, Storage, StorageError, StorageLocation, WriteOutcome,
};
use futures::{StreamExt, TryStreamExt};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn local(dir: &Path) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir).unwrap())
}

async fn content(s: &dyn Storage, key: &str) -> Bytes {
    s.get(key)
        .await
        .unwrap_or_else(|e| panic!("{s}: get `{key}`: {e}"))
        .bytes
}

async fn version(s: &dyn Storage, key: &str) -> ObjectVersion {
    s.head(key)
        .await
        .unwrap_or_else(|e| panic!("{s}: head `{key}`: {e}"))
        .version
        .unwrap_or_else(|| panic!("{s}: `{key}` has no version"))
}

fn written(s: &dyn Storage, what: &str, outcome: WriteOutcome) -> ObjectVersion {
    match outcome {
        WriteOutcome::Written(Some(v)) => v,
        other => panic!("{s}: {what}: expected Written(Some(version)), got {other:?}"),
    }
}

async fn keys(s: &dyn Storage, prefix: &str) -> Vec<String> {
    s.list(prefix)
        .await
        .unwrap_or_else(|e| panic!("{s}: list `{prefix}`: {e}"))
        .into_iter()
        .map(|i| i.key)
        .collect()
}

fn is_not_found(e: &StorageError, key: &str) -> bool {
    matches!(e, StorageError::NotFound { key: k } if k == key)
}

// ---------------------------------------------------------------------------------
// The contract, one check per function; `storage_contract` runs them all.
// ---------------------------------------------------------------------------------

async fn missing_objects_are_not_found(s: &dyn Storage) {
    let key = "get/missing/key";
    let e = s.get(key).await.unwrap_err();
    assert!(is_not_found(&e, key), "{s}: get of a missing key: {e:?}");
    assert!(
        e.to_string().contains(key),
        "{s}: the error names the key: {e}"
    );
    let e = s.head(key).await.unwrap_err();
    assert!(is_not_found(&e, key), "{s}: head of a missing key: {e:?}");
    let e = s.get_range(key, 0..4).await.unwrap_err();
    assert!(
        is_not_found(&e, key),
        "{s}: get_range of a missing key: {e:?}"
    );
}

async fn put_get_head(s: &dyn Storage) {
    let key = "get/obj";
    let before = Utc::now() - chrono::Duration::minutes(10);
    let v1 = s.put(key, b("0123456789")).await.unwrap();
    let got = s.get(key).await.unwrap();
    assert_eq!(got.bytes, b("0123456789"), "{s}: get after put");
    assert!(got.version.is_some(), "{s}: get reports a version");
    assert_eq!(v1, got.version, "{s}: put and get report the same version");

    let info = s.head(key).await.unwrap();
    assert_eq!(info.key, key, "{s}: head key");
    assert_eq!(info.size, 10, "{s}: head size");
    assert_eq!(
        info.version, got.version,
        "{s}: head and get report the same version"
    );
    let after = Utc::now() + chrono::Duration::minutes(10);
    assert!(
        info.last_modified > before && info.last_modified < after,
        "{s}: last_modified {} is not about now",
        info.last_modified
    );

    // An unconditional put replaces the object and moves its version.
    let v2 = s.put(key, b("abcdefghijklmnop")).await.unwrap();
    assert_eq!(
        content(s, key).await,
        b("abcdefghijklmnop"),
        "{s}: overwrite"
    );
    assert_ne!(v1, v2, "{s}: overwriting moves the version");
    assert_eq!(
        s.head(key).await.unwrap().size,
        16,
        "{s}: size after overwrite"
    );

    // Empty objects exist.
    s.put("get/empty", Bytes::new()).await.unwrap();
    assert!(
        content(s, "get/empty").await.is_empty(),
        "{s}: empty object"
    );
    assert_eq!(
        s.head("get/empty").await.unwrap().size,
        0,
        "{s}: empty size"
    );
}

async fn ranged_reads(s: &dyn Storage) {
    let key = "range/obj";
    s.put(key, b("0123456789")).await.unwrap();
    for (range, want) in [
        (0..3, "012"),
        (2..5, "234"),
        (9..10, "9"),
        (0..10, "0123456789"),
        (5..5, ""),
    ] {
        let got = s.get_range(key, range.clone()).await;
        assert_eq!(
            got.unwrap_or_else(|e| panic!("{s}: get_range {range:?}: {e}")),
            b(want),
            "{s}: get_range {range:?}"
        );
    }
    // Past the end: a typed short read naming the key, the request and the size.
    for range in [8..20, 10..12, 15..20] {
        match s.get_range(key, range.clone()).await {
            Err(StorageError::ShortRead {
                key: k,
                requested,
                size,
            }) => {
                assert_eq!(k, key, "{s}: short read key");
                assert_eq!(requested, range, "{s}: short read range");
                assert_eq!(size, 10, "{s}: short read size");
            }
            other => panic!("{s}: get_range {range:?} of a 10-byte object: {other:?}"),
        }
    }
    // Empty ranges: empty bytes up to the end, a short read past it, never empty
    // bytes for an object that does not reach the start or does not exist.
    assert_eq!(
        s.get_range(key, 10..10).await.unwrap(),
        b(""),
        "{s}: 10..10"
    );
    match s.get_range(key, 12..12).await {
        Err(StorageError::ShortRead {
            requested, size, ..
        }) => assert_eq!((requested, size), (12..12, 10), "{s}: 12..12"),
        other => panic!("{s}: get_range 12..12 of a 10-byte object: {other:?}"),
    }
    assert!(
        matches!(
            s.get_range("range/missing", 0..0).await,
            Err(StorageError::NotFound { .. })
        ),
        "{s}: empty range of a missing key"
    );
    // An inverted range (e.g. an offset+length that wrapped) is an error.
    #[allow(clippy::reversed_empty_ranges)]
    let inverted = 7..2;
    match s.get_range(key, inverted).await {
        Err(StorageError::InvalidRange { key: k, requested }) => {
            assert_eq!(
                (k.as_str(), requested.start, requested.end),
                (key, 7, 2),
                "{s}: inverted range"
            );
        }
        other => panic!("{s}: get_range 7..2: {other:?}"),
    }
}

async fn put_if_absent_creates_once(s: &dyn Storage) {
    let key = "absent/obj";
    let v = written(
        s,
        "first put_if_absent",
        s.put_if_absent(key, b("first")).await.unwrap(),
    );
    assert_eq!(
        version(s, key).await,
        v,
        "{s}: reported version is the stored one"
    );
    assert_eq!(
        s.put_if_absent(key, b("second")).await.unwrap(),
        WriteOutcome::PreconditionFailed,
        "{s}: second put_if_absent"
    );
    assert_eq!(content(s, key).await, b("first"), "{s}: content unchanged");
    assert_eq!(version(s, key).await, v, "{s}: version unchanged");
}

async fn put_if_match_compares_and_swaps(s: &dyn Storage) {
    let key = "cas/obj";
    let v0 = s
        .put(key, b("v0"))
        .await
        .unwrap()
        .expect("put reports a version");
    let v1 = written(
        s,
        "put_if_match",
        s.put_if_match(key, b("v1"), &v0).await.unwrap(),
    );
    assert_ne!(v0, v1, "{s}: a swap moves the version");
    assert_eq!(content(s, key).await, b("v1"), "{s}: swapped content");
    assert_eq!(
        version(s, key).await,
        v1,
        "{s}: reported version is the stored one"
    );

    // A stale version fails and changes nothing.
    assert_eq!(
        s.put_if_match(key, b("stale"), &v0).await.unwrap(),
        WriteOutcome::PreconditionFailed,
        "{s}: put_if_match with a stale version"
    );
    assert_eq!(content(s, key).await, b("v1"), "{s}: content unchanged");
    assert_eq!(version(s, key).await, v1, "{s}: version unchanged");

    // A version that never existed fails too.
    let bogus = ObjectVersion("\"not-a-version\"".into());
    assert_eq!(
        s.put_if_match(key, b("bogus"), &bogus).await.unwrap(),
        WriteOutcome::PreconditionFailed,
        "{s}: put_if_match with a made-up version"
    );

    // On a missing key (even in a missing directory) the precondition fails and
    // nothing is created.
    for missing in ["cas/missing", "cas/no/such/dir/obj"] {
        assert_eq!(
            s.put_if_match(missing, b("x"), &v1).await.unwrap(),
            WriteOutcome::PreconditionFailed,
            "{s}: put_if_match on missing `{missing}`"
        );
        let e = s.head(missing).await.unwrap_err();
        assert!(
            is_not_found(&e, missing),
            "{s}: `{missing}` was created: {e:?}"
        );
    }

    // Chains of swaps with bodies of one size: every superseded version stays stale.
    let key = "cas/chain";
    for round in 0..30 {
        let a = s
            .put(key, b(&format!("A{round:04}")))
            .await
            .unwrap()
            .unwrap();
        let bv = written(
            s,
            "swap 1",
            s.put_if_match(key, b(&format!("B{round:04}")), &a)
                .await
                .unwrap(),
        );
        let cv = written(
            s,
            "swap 2",
            s.put_if_match(key, b(&format!("C{round:04}")), &bv)
                .await
                .unwrap(),
        );
        for stale in [&a, &bv] {
            assert_eq!(
                s.put_if_match(key, b(&format!("D{round:04}")), stale)
                    .await
                    .unwrap(),
                WriteOutcome::PreconditionFailed,
                "{s}: round {round}: superseded version {stale:?} matched (current {cv:?})"
            );
        }
        assert_eq!(
            content(s, key).await,
            b(&format!("C{round:04}")),
            "{s}: round {round}"
        );
    }
}

async fn deletes_are_idempotent(s: &dyn Storage) {
    let key = "delete/obj";
    let v = s.put(key, b("x")).await.unwrap().unwrap();
    s.delete(key).await.unwrap();
    assert!(
        is_not_found(&s.get(key).await.unwrap_err(), key),
        "{s}: get after delete"
    );
    assert!(
        is_not_found(&s.head(key).await.unwrap_err(), key),
        "{s}: head after delete"
    );
    assert!(
        keys(s, "delete/").await.is_empty(),
        "{s}: listed after delete"
    );
    s.delete(key).await.unwrap();
    s.delete("delete/never/existed").await.unwrap();
    assert_eq!(
        s.put_if_match(key, b("y"), &v).await.unwrap(),
        WriteOutcome::PreconditionFailed,
        "{s}: put_if_match with the version of a deleted object"
    );
    written(
        s,
        "put_if_absent after delete",
        s.put_if_absent(key, b("z")).await.unwrap(),
    );
    assert_eq!(content(s, key).await, b("z"), "{s}: recreated");
}

async fn listing_filters_by_raw_prefix_in_key_order(s: &dyn Storage) {
    // Byte order: '-' (2d) < '/' (2f) < '0' (30) < 'B' (42) < '_' (5f) < 'a' (61).
    let names = [
        "list/refs/branch.main/ref.json",
        "list/refs/branch.main2/ref.json",
        "list/refs/branch.m/ref.json",
        "list/refs/tag.x/ref.json",
        "list/refs/tag.x/ref.json.deleted",
        "list/a-b",
        "list/a/b",
        "list/a/c/d/e",
        "list/a0",
        "list/aB",
        "list/a_b",
        "list/aa",
        "list/snapshots/0123456789ABCDEFGHJK",
        "list/manifests/ZZZZ",
    ];
    for (i, n) in names.iter().enumerate() {
        s.put(n, Bytes::from(vec![b'x'; i + 1])).await.unwrap();
    }
    let sorted = |mut v: Vec<&str>| {
        v.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let expect = |prefix: &str| {
        sorted(
            names
                .iter()
                .copied()
                .filter(|n| n.starts_with(prefix))
                .collect(),
        )
    };
    for prefix in [
        "list/",
        "list/refs/",
        "list/refs/branch.",
        "list/refs/branch.main",
        "list/refs/branch.main/",
        "list/refs/tag.",
        "list/refs/tag.x/ref.json",
        "list/a",
        "list/a/",
        "list/a/c/d/e",
        "list/snapshots/",
        "list/nothing",
        "list/nothing/",
        "list/refs/branch.main/ref.json/",
    ] {
        assert_eq!(
            keys(s, prefix).await,
            expect(prefix),
            "{s}: list `{prefix}`"
        );
    }
    assert!(!keys(s, "list/refs/branch.")
        .await
        .iter()
        .any(|k| k.contains("tag.")));

    // Listed facts agree with head.
    for info in s.list("list/").await.unwrap() {
        let head = s.head(&info.key).await.unwrap();
        assert_eq!(info.size, head.size, "{s}: listed size of {}", info.key);
        assert_eq!(
            info.version, head.version,
            "{s}: listed version of {}",
            info.key
        );
    }

    // The whole store, from the root, is sorted and includes these keys.
    let all = keys(s, "").await;
    let mut again = all.clone();
    again.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
    assert_eq!(all, again, "{s}: list of the root is sorted");
    for n in names {
        assert!(
            all.iter().any(|k| k == n),
            "{s}: `{n}` missing from the root listing"
        );
    }
}

async fn long_listings_are_complete(s: &dyn Storage) {
    // More than one page of S3's ListObjectsV2 (1000 keys).
    let n = 1050;
    futures::stream::iter(0..n)
        .map(|i| async move { s.put(&format!("many/k{i:05}"), b("x")).await })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let got = keys(s, "many/").await;
    let want: Vec<String> = (0..n).map(|i| format!("many/k{i:05}")).collect();
    assert_eq!(got.len(), n, "{s}: listed {} of {n} keys", got.len());
    assert_eq!(got, want, "{s}: long listing");
    assert_eq!(
        keys(s, "many/k0104").await.len(),
        10,
        "{s}: prefix inside a long listing"
    );
}

async fn deep_and_unusual_keys(s: &dyn Storage) {
    for key in [
        "deep/1/2/3/4/5/6/obj",
        "deep/chunks/0A1B2C3D4E5F6G7H8J9K",
        "deep/x.json",
        "deep/with=equals,comma+plus",
        "deep/a b",
    ] {
        written(s, key, s.put_if_absent(key, b(key)).await.unwrap());
        assert_eq!(content(s, key).await, b(key), "{s}: `{key}`");
        let v = version(s, key).await;
        written(s, key, s.put_if_match(key, b("2"), &v).await.unwrap());
        assert_eq!(
            keys(s, key).await,
            vec![key.to_string()],
            "{s}: list `{key}`"
        );
        s.delete(key).await.unwrap();
        assert!(
            is_not_found(&s.head(key).await.unwrap_err(), key),
            "{s}: `{key}` deleted"
        );
    }
}

async fn root_url_reopens_the_same_storage(s: &Arc<dyn Storage>) {
    let url = s.root_url();
    assert_eq!(url, s.to_string(), "{s}: Display is the root URL");
    match parse_storage_url(&url).unwrap() {
        StorageLocation::Memory => assert_eq!(url, "memory://"),
        _ => {
            let again = open_storage(&url, None).unwrap();
            assert_eq!(again.root_url(), url, "{s}: reopened root URL");
            s.put("url/probe", b("seen")).await.unwrap();
            assert_eq!(
                content(again.as_ref(), "url/probe").await,
                b("seen"),
                "{s}: reopened"
            );
        }
    }
}

const TASKS: usize = 16;

async fn racing_put_if_absent_has_one_winner(s: &Arc<dyn Storage>) {
    for round in 0..5 {
        let key = format!("race/absent/{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
        let handles: Vec<_> = (0..TASKS)
            .map(|t| {
                let (s, key, barrier) = (s.clone(), key.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    s.put_if_absent(&key, b(&format!("task {t}")))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut winners = Vec::new();
        for (t, h) in handles.into_iter().enumerate() {
            if let WriteOutcome::Written(_) = h.await.unwrap() {
                winners.push(t);
            }
        }
        assert_eq!(winners.len(), 1, "{s}: round {round}: winners {winners:?}");
        assert_eq!(
            content(s.as_ref(), &key).await,
            b(&format!("task {}", winners[0]))
        );
    }
}

async fn racing_put_if_match_has_one_winner(s: &Arc<dyn Storage>) {
    let key = "race/cas/obj";
    for round in 0..5 {
        let v = s
            .put(key, b(&format!("initial {round}")))
            .await
            .unwrap()
            .unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
        let handles: Vec<_> = (0..TASKS)
            .map(|t| {
                let (s, v, barrier) = (s.clone(), v.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    s.put_if_match(key, b(&format!("task {t} round {round}")), &v)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut winners = Vec::new();
        for (t, h) in handles.into_iter().enumerate() {
            if let WriteOutcome::Written(nv) = h.await.unwrap() {
                winners.push((t, nv));
            }
        }
        assert_eq!(winners.len(), 1, "{s}: round {round}: winners {winners:?}");
        let (w, nv) = &winners[0];
        assert_eq!(
            content(s.as_ref(), key).await,
            b(&format!("task {w} round {round}"))
        );
        assert_eq!(
            Some(version(s.as_ref(), key).await),
            *nv,
            "{s}: winner's version"
        );
    }
}

/// Read-increment-swap loops from many tasks: the counter equals the number of
/// successful swaps (no lost update).
async fn racing_increments_lose_no_update(s: &Arc<dyn Storage>) {
    let key = "race/counter";
    s.put(key, b("0")).await.unwrap();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut wins = 0u64;
                for attempt in 0..15 {
                    let cur = s.get(key).await.unwrap();
                    let text = String::from_utf8(cur.bytes.to_vec()).unwrap();
                    let n: u64 = text.split(':').next().unwrap().parse().unwrap();
                    let next = b(&format!("{}:task {t}:attempt {attempt}", n + 1));
                    if let WriteOutcome::Written(_) = s
                        .put_if_match(key, next, cur.version.as_ref().unwrap())
                        .await
                        .unwrap()
                    {
                        wins += 1;
                    }
                }
                wins
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    let text = String::from_utf8(content(s.as_ref(), key).await.to_vec()).unwrap();
    let n: u64 = text.split(':').next().unwrap().parse().unwrap();
    assert_eq!(n, total, "{s}: counter {n} after {total} successful swaps");
    assert!(total >= 15, "{s}: only {total} successful swaps");
}

/// Runs the whole [`Storage`] contract against one (empty) storage.
async fn storage_contract(s: Arc<dyn Storage>) {
    let started = Instant::now();
    missing_objects_are_not_found(s.as_ref()).await;
    put_get_head(s.as_ref()).await;
    ranged_reads(s.as_ref()).await;
    put_if_absent_creates_once(s.as_ref()).await;
    put_if_match_compares_and_swaps(s.as_ref()).await;
    deletes_are_idempotent(s.as_ref()).await;
    listing_filters_by_raw_prefix_in_key_order(s.as_ref()).await;
    long_listings_are_complete(s.as_ref()).await;
    deep_and_unusual_keys(s.as_ref()).await;
    root_url_reopens_the_same_storage(&s).await;
    racing_put_if_absent_has_one_winner(&s).await;
    racing_put_if_match_has_one_winner(&s).await;
    racing_increments_lose_no_update(&s).await;
    eprintln!(
        "{s}: storage contract holds ({:.1}s)",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_storage_conformance() {
    storage_contract(new_in_memory_storage()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("root").display());
    storage_contract(create_storage(&url, None).unwrap()).await;
}

/// Local versions are `object_store` etags, `inode-mtime-size`. Inodes are reused as
/// soon as they are freed and some file systems keep whole-second mtimes (ext4 with
/// 128-byte inodes, FAT, HFS+), so without care a superseded version comes back after
/// two swaps and lets a stale compare-and-swap through. .ci/run mounts such a file
/// system at `FLOE_TEST_COARSE_MTIME_DIR` when it can (root, loop devices).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_conformance_on_a_whole_second_mtime_filesystem() {
    let Some(dir) = std::env::var_os("FLOE_TEST_COARSE_MTIME_DIR") else {
        eprintln!("SKIPPED: FLOE_TEST_COARSE_MTIME_DIR is not set (.ci/run mounts one)");
        return;
    };
    let root = tempfile::tempdir_in(dir).unwrap();
    // The file system must really drop sub-second mtimes, or this test proves nothing.
    let probe = root.path().join("probe");
    let f = std::fs::File::create(&probe).unwrap();
    let t = std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
    f.set_modified(t).unwrap();
    drop(f);
    let kept = std::fs::metadata(&probe).unwrap().modified().unwrap();
    assert_eq!(
        kept,
        std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        "FLOE_TEST_COARSE_MTIME_DIR keeps sub-second mtimes"
    );
    std::fs::remove_file(&probe).unwrap();
    let url = root.path().join("root").display().to_string();
    storage_contract(create_storage(&url, None).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_storage_lists_no_temporary_files_nor_missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let s = local(&dir.path().join("root"));
    assert!(
        keys(s.as_ref(), "").await.is_empty(),
        "an empty root lists nothing"
    );
    assert!(keys(s.as_ref(), "no/such/dir/").await.is_empty());
    s.put("a/obj", b("x")).await.unwrap();
    // What an interrupted compare-and-swap or object_store upload leaves behind.
    std::fs::write(
        dir.path().join("root/a/.obj.floe-tmp-0123456789abcdef"),
        b"t",
    )
    .unwrap();
    std::fs::write(dir.path().join("root/a/obj#1"), b"t").unwrap();
    assert_eq!(keys(s.as_ref(), "").await, vec!["a/obj".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_storage_conformance() {
    let Some(url) = common::s3_url("conformance") else {
        return;
    };
    storage_contract(create_storage(&url, None).unwrap()).await;
}

/// Virtual chunk checksums read with `If-Match` / `If-Unmodified-Since`: the S3
/// server must refuse reads whose precondition does not hold.
#[tokio::test]
async fn s3_server_honours_read_preconditions() {
    use object_store::{GetOptions, ObjectStore, ObjectStoreExt, PutPayload};
    let Some(bucket) = common::s3_bucket() else {
        return;
    };
    let url = common::s3_url("read-preconditions").unwrap();
    let StorageLocation::S3 { prefix, .. } = parse_storage_url(&url).unwrap() else {
        panic!("{url} is not an S3 URL");
    };
    let store = S3Options::from_env().build(&bucket).unwrap();
    let path = object_store::path::Path::from(format!("{prefix}/obj"));
    let put = store
        .put(&path, PutPayload::from_static(b"0123456789"))
        .await
        .unwrap();
    let etag = put.e_tag.expect("S3 PUT returns an etag");

    let ok = store
        .get_opts(&path, GetOptions::new().with_if_match(Some(etag.clone())))
        .await
        .unwrap();
    assert_eq!(ok.bytes().await.unwrap(), Bytes::from_static(b"0123456789"));
    let e = store
        .get_opts(&path, GetOptions::new().with_if_match(Some("\"0000\"")))
        .await
        .unwrap_err();
    assert!(
        matches!(e, object_store::Error::Precondition { .. }),
        "If-Match: {e:?}"
    );

    let past = Utc::now() - chrono::Duration::hours(1);
    let future = Utc::now() + chrono::Duration::hours(1);
    let e = store
        .get_opts(
            &path,
            GetOptions::new().with_if_unmodified_since(Some(past)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, object_store::Error::Precondition { .. }),
        "If-Unmodified-Since: {e:?}"
    );
    store
        .get_opts(
            &path,
            GetOptions::new().with_if_unmodified_since(Some(future)),
        )
        .await
        .unwrap();

    let ranged = store
        .get_opts(
            &path,
            GetOptions::new()
                .with_if_match(Some(etag))
                .with_range(Some(2..5u64)),
        )
        .await
        .unwrap();
    assert_eq!(ranged.bytes().await.unwrap(), Bytes::from_static(b"234"));
}

// ---------------------------------------------------------------------------------
// Compare-and-swap races between OS processes. The test re-runs its own executable as
// PROCESSES children (`--exact <test>`, marked by CHILD_ENV); all wait for a go file,
// then race `put_if_match` on one key with the same expected version, round after
// round. Exactly one process may win each round.
// ---------------------------------------------------------------------------------

const PROCESSES: usize = 8;
const ROUNDS: usize = 10;
const CAS_KEY: &str = "refs/branch.main/ref.json";
const CHILD_ENV: &str = "FLOE_CONFORMANCE_CAS_CHILD";
const SYNC_ENV: &str = "FLOE_CONFORMANCE_CAS_SYNC";
const URL_ENV: &str = "FLOE_CONFORMANCE_CAS_URL";
const WAIT: Duration = Duration::from_secs(120);

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + WAIT;
    while !path.exists() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes a file so that it appears whole (rename of a complete temporary file).
fn publish(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The child process's side: `Some` when this process is a CAS race child.
fn cas_child() -> bool {
    let Ok(index) = std::env::var(CHILD_ENV) else {
        return false;
    };
    let sync = PathBuf::from(std::env::var(SYNC_ENV).unwrap());
    let url = std::env::var(URL_ENV).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let storage = open_storage(&url, None).unwrap();
    // Warm up (connections, directory handles) before declaring readiness.
    rt.block_on(storage.head(CAS_KEY)).unwrap();
    publish(&sync.join(format!("ready-{index}")), "ready");
    for round in 0..ROUNDS {
        wait_for(&sync.join(format!("go-{round}")), "the go signal");
        let expected = std::fs::read_to_string(sync.join(format!("version-{round}"))).unwrap();
        let body = b(&format!("process {index} round {round}"));
        let result =
            match rt.block_on(storage.put_if_match(CAS_KEY, body, &ObjectVersion(expected))) {
                Ok(WriteOutcome::Written(_)) => "won".to_string(),
                Ok(WriteOutcome::PreconditionFailed) => "lost".to_string(),
                Err(e) => format!("error: {e}"),
            };
        publish(&sync.join(format!("result-{round}-{index}")), &result);
    }
    true
}

/// Kills the children still running when the parent gives up (a failed assertion).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn cas_race_between_processes(test_name: &str, url: &str) {
    let sync_dir = tempfile::tempdir().unwrap();
    let sync = sync_dir.path();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let storage = create_storage(url, None).unwrap();
    rt.block_on(storage.put(CAS_KEY, b("initial"))).unwrap();

    let exe = std::env::current_exe().unwrap();
    let mut children = Children(Vec::new());
    for i in 0..PROCESSES {
        let log = std::fs::File::create(sync.join(format!("child-{i}.log"))).unwrap();
        let child = Command::new(&exe)
            .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, i.to_string())
            .env(SYNC_ENV, sync)
            .env(URL_ENV, url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        children.0.push(child);
    }
    let logs = || {
        (0..PROCESSES)
            .map(|i| {
                std::fs::read_to_string(sync.join(format!("child-{i}.log"))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for i in 0..PROCESSES {
        let deadline = Instant::now() + WAIT;
        while !sync.join(format!("ready-{i}")).exists() {
            if Instant::now() > deadline || children.0[i].try_wait().unwrap().is_some() {
                panic!("child {i} never got ready; logs:\n{}", logs());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    let mut losers = 0;
    for round in 0..ROUNDS {
        let v = rt
            .block_on(storage.put(CAS_KEY, b(&format!("initial {round}"))))
            .unwrap()
            .unwrap();
        publish(&sync.join(format!("version-{round}")), &v.0);
        publish(&sync.join(format!("go-{round}")), "go");
        let mut results = Vec::new();
        for i in 0..PROCESSES {
            let path = sync.join(format!("result-{round}-{i}"));
            let deadline = Instant::now() + WAIT;
            while !path.exists() {
                if Instant::now() > deadline || children.0[i].try_wait().unwrap().is_some() {
                    panic!(
                        "child {i} gave no result in round {round}; logs:\n{}",
                        logs()
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            results.push(std::fs::read_to_string(&path).unwrap());
        }
        let winners: Vec<usize> = (0..PROCESSES).filter(|&i| results[i] == "won").collect();
        assert!(
            results.iter().all(|r| r == "won" || r == "lost"),
            "{url}: round {round}: {results:?}"
        );
        assert_eq!(
            winners.len(),
            1,
            "{url}: round {round}: results {results:?}"
        );
        losers += PROCESSES - 1;
        let stored = rt.block_on(storage.get(CAS_KEY)).unwrap().bytes;
        assert_eq!(
            stored,
            b(&format!("process {} round {round}", winners[0])),
            "{url}: round {round}"
        );
    }
    for (i, c) in children.0.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        assert!(
            status.success(),
            "child {i} failed: {status}; logs:\n{}",
            logs()
        );
    }
    eprintln!(
        "{url}: {ROUNDS} rounds x {PROCESSES} processes: one winner each round, {losers} refused"
    );
}

#[test]
fn local_put_if_match_race_8_processes() {
    if cas_child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("root").display().to_string();
    cas_race_between_processes("local_put_if_match_race_8_processes", &url);
}

#[test]
fn s3_put_if_match_race_8_processes() {
    if cas_child() {
        return;
    }
    let Some(url) = common::s3_url("cas-processes") else {
        return;
    };
    cas_race_between_processes("s3_put_if_match_race_8_processes", &url);
}
