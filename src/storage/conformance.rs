//! The [`Storage`] contract as a reusable conformance suite: what the repository
//! engine relies on from every backend. Run [`storage_contract`] against a new
//! backend's empty storage from a test; floe runs it against the memory, local
//! filesystem and S3 backends (`tests/integration/storage_conformance.rs`), where multi-process
//! compare-and-swap races are also checked.
//!
//! Available with the `testing` cargo feature.

// A test suite: it reports a violation by panicking.
#![allow(
    clippy::missing_panics_doc,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};

use super::{
    open_storage, parse_storage_url, ObjectInfo, ObjectVersion, Storage, StorageError,
    StorageLocation, WriteOutcome,
};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
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

/// The keys listed under `prefix`, in listing order.
///
/// # Panics
/// When listing fails.
pub async fn keys(s: &dyn Storage, prefix: &str) -> Vec<String> {
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
    if let Some(files) = s.local_files() {
        let e = files.get(key).unwrap_err();
        assert!(
            is_not_found(&e, key),
            "{s}: get_blocking of a missing key: {e:?}"
        );
    }
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
    // Blocking on the test's executor is harmless here.
    if let Some(files) = s.local_files() {
        let blocking = files.get(key).unwrap();
        assert_eq!(
            blocking.bytes, got.bytes,
            "{s}: get_blocking reads what get does"
        );
        assert_eq!(
            blocking.version, got.version,
            "{s}: get_blocking reports get's version"
        );
    }

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

async fn put_fresh_writes_new_objects(s: &dyn Storage) {
    // Into a prefix (directory) that does not exist yet, many at once, as chunks are.
    let keys_and_bytes: Vec<(String, Bytes)> = (0..24)
        .map(|i| {
            let bytes = Bytes::from(vec![u8::try_from(i).unwrap_or(0); 1000 + 37 * i]);
            (format!("fresh/deep/dir/obj{i:02}"), bytes)
        })
        .collect();
    futures::stream::iter(keys_and_bytes.iter())
        .map(|(key, bytes)| s.put_fresh(key, bytes.clone()))
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await
        .unwrap_or_else(|e| panic!("{s}: put_fresh: {e}"));
    for (key, bytes) in &keys_and_bytes {
        assert_eq!(&content(s, key).await, bytes, "{s}: get after put_fresh");
        assert_eq!(
            s.head(key).await.unwrap().size,
            bytes.len() as u64,
            "{s}: head size after put_fresh"
        );
    }
    let want: Vec<String> = keys_and_bytes.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        keys(s, "fresh/").await,
        want,
        "{s}: exactly the fresh objects are listed (no temporary files)"
    );
    s.put_fresh("fresh/empty", Bytes::new()).await.unwrap();
    assert!(
        content(s, "fresh/empty").await.is_empty(),
        "{s}: empty fresh object"
    );
    put_fresh_blocking_writes_new_objects(s).await;
}

/// Where the backend has [`Storage::local_files`]: objects written by it from
/// several threads at once into a new prefix read back whole and are listed exactly.
async fn put_fresh_blocking_writes_new_objects(s: &dyn Storage) {
    let keys_and_bytes: Vec<(String, Bytes)> = (0..16)
        .map(|i| {
            let bytes = Bytes::from(vec![u8::try_from(i + 100).unwrap_or(0); 700 + 51 * i]);
            (format!("fresh-blocking/a/b/obj{i:02}"), bytes)
        })
        .collect();
    // Blocking on the test's executor is harmless here.
    let Some(files) = s.local_files() else {
        return;
    };
    let files = files.as_ref();
    files
        .put_fresh(&keys_and_bytes[0].0, &keys_and_bytes[0].1)
        .unwrap_or_else(|e| panic!("{s}: put_fresh_blocking: {e}"));
    std::thread::scope(|scope| {
        for part in keys_and_bytes[1..].chunks(4) {
            scope.spawn(move || {
                for (key, bytes) in part {
                    match files.put_fresh(key, bytes) {
                        Ok(()) => {}
                        other => panic!("{s}: put_fresh_blocking of {key}: {other:?}"),
                    }
                }
            });
        }
    });
    for (key, bytes) in &keys_and_bytes {
        assert_eq!(
            &content(s, key).await,
            bytes,
            "{s}: get after put_fresh_blocking"
        );
    }
    let want: Vec<String> = keys_and_bytes.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        keys(s, "fresh-blocking/").await,
        want,
        "{s}: exactly the objects put_fresh_blocking wrote are listed"
    );
}

/// Where the backend has [`Storage::local_files`] (on a 10-byte object
/// `key` holding `0123456789`): what `get_range` reads, into the caller's buffer;
/// the same typed errors.
fn ranged_reads_into(s: &dyn Storage, key: &str) {
    let mut probe = [0u8; 3];
    // Blocking on the test's executor is harmless here.
    let Some(files) = s.local_files() else {
        return;
    };
    files
        .get_range_into(key, 2, &mut probe)
        .unwrap_or_else(|e| panic!("{s}: get_range_into: {e}"));
    for (start, len, want) in [
        (0u64, 3usize, "012"),
        (2, 3, "234"),
        (0, 10, "0123456789"),
        (10, 0, ""),
    ] {
        let mut dest = vec![b'#'; len];
        match files.get_range_into(key, start, &mut dest) {
            Ok(()) => assert_eq!(dest, want.as_bytes(), "{s}: into at {start}+{len}"),
            other => panic!("{s}: get_range_into_blocking at {start}+{len}: {other:?}"),
        }
        match files.get_range_owned(key, start, len) {
            Ok(got) => assert_eq!(got, want.as_bytes(), "{s}: owned at {start}+{len}"),
            other => panic!("{s}: get_range_owned at {start}+{len}: {other:?}"),
        }
    }
    for (start, requested) in [(8u64, 8..12u64), (u64::MAX - 1, u64::MAX - 1..u64::MAX)] {
        match files.get_range_owned(key, start, 4) {
            Err(StorageError::ShortRead {
                key: k,
                requested: r,
                size,
            }) => assert_eq!((k.as_str(), r, size), (key, requested, 10), "{s}"),
            other => panic!("{s}: owned past the end at {start}: {other:?}"),
        }
    }
    match files.get_range_owned("range/missing", 0, 4) {
        Err(StorageError::NotFound { key }) => assert_eq!(key, "range/missing"),
        other => panic!("{s}: owned of a missing key: {other:?}"),
    }
    let mut dest = [0u8; 4];
    match files.get_range_into(key, 8, &mut dest) {
        Err(StorageError::ShortRead {
            key: k,
            requested,
            size,
        }) => assert_eq!((k.as_str(), requested, size), (key, 8..12, 10), "{s}"),
        other => panic!("{s}: into past the end: {other:?}"),
    }
    match files.get_range_into("range/missing", 0, &mut dest) {
        Err(StorageError::NotFound { key }) => assert_eq!(key, "range/missing"),
        other => panic!("{s}: into a missing key: {other:?}"),
    }
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
    ranged_reads_into(s, key);
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

async fn ranged_reads_of_many_ranges(s: &dyn Storage) {
    let key = "ranges/obj";
    s.put(key, b("0123456789")).await.unwrap();
    // Any order, overlapping, repeated, empty, whole.
    let ranges = [8..10, 0..3, 2..5, 5..5, 0..10, 2..5, 10..10, 9..10];
    let got = s
        .get_ranges(key, &ranges)
        .await
        .unwrap_or_else(|e| panic!("{s}: get_ranges {ranges:?}: {e}"));
    let want = ["89", "012", "234", "", "0123456789", "234", "", "9"];
    assert_eq!(got.len(), ranges.len(), "{s}: one part per range");
    for ((r, g), w) in ranges.iter().zip(&got).zip(want) {
        assert_eq!(*g, b(w), "{s}: get_ranges part {r:?}");
    }
    assert!(
        s.get_ranges(key, &[]).await.unwrap().is_empty(),
        "{s}: no ranges, no parts"
    );
    assert!(
        matches!(
            s.get_ranges("ranges/missing", &[0..2, 4..6]).await,
            Err(StorageError::NotFound { key: k }) if k == "ranges/missing"
        ),
        "{s}: get_ranges of a missing key"
    );
    // Past the end: the first range (in the caller's order) past it is named.
    for (ranges, bad) in [
        (vec![0..3, 8..20, 30..40], 8..20),
        (vec![12..12, 0..2], 12..12),
        (vec![0..2, 12..12], 12..12),
        (vec![3..4, 10..11], 10..11),
    ] {
        match s.get_ranges(key, &ranges).await {
            Err(StorageError::ShortRead {
                key: k,
                requested,
                size,
            }) => assert_eq!(
                (k.as_str(), requested, size),
                (key, bad, 10),
                "{s}: get_ranges {ranges:?}"
            ),
            other => panic!("{s}: get_ranges {ranges:?} of a 10-byte object: {other:?}"),
        }
    }
    #[allow(clippy::reversed_empty_ranges)]
    let inverted = vec![0..2, 7..2, 9..1];
    match s.get_ranges(key, &inverted).await {
        Err(StorageError::InvalidRange { key: k, requested }) => assert_eq!(
            (k.as_str(), requested.start, requested.end),
            (key, 7, 2),
            "{s}: inverted range"
        ),
        other => panic!("{s}: get_ranges with 7..2: {other:?}"),
    }
    // Ranges farther apart than the coalescing gap, and ranges past the span cap,
    // come back whole and in order too.
    let big_key = "ranges/big";
    let size = (3u64 << 20) + 5;
    let big: Bytes = (0..size)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    s.put(big_key, big.clone()).await.unwrap();
    let far = [
        size - 5..size,
        0..10,
        (2 << 20)..(2 << 20) + 10,
        100..(3 << 20),
        20..30,
    ];
    let got = s
        .get_ranges(big_key, &far)
        .await
        .unwrap_or_else(|e| panic!("{s}: get_ranges far apart: {e}"));
    for (r, g) in far.iter().zip(&got) {
        assert!(
            g[..] == big[r.start as usize..r.end as usize],
            "{s}: get_ranges far apart, part {r:?}"
        );
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

    // Bulk deletes: present and absent keys, more than one bulk request.
    let many: Vec<String> = (0..1100).map(|i| format!("delete/many/{i:04}")).collect();
    for k in many.iter().step_by(3) {
        s.put(k, b("m")).await.unwrap();
    }
    s.delete_many(&many).await.unwrap();
    assert!(
        keys(s, "delete/many/").await.is_empty(),
        "{s}: delete_many left objects"
    );
    s.delete_many(&many).await.unwrap();
    s.delete_many(&[]).await.unwrap();
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
        "list/A",
        "list/AB",
        "list/0x",
        "list/@z",
        "list/`z",
        "list/%41",
        "list/\u{e9}a",
        "list/\u{e9}",
        "list/\u{ea}",
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
        "list/A",
        "list/0",
        "list/a",
        "list/aB",
        "list/a_",
        "list/%",
        "list/\u{e9}",
        "list/@",
    ] {
        assert_eq!(
            keys(s, prefix).await,
            expect(prefix),
            "{s}: list `{prefix}`"
        );
        // The streaming listing holds the same objects, in any order.
        let mut streamed: Vec<String> =
            futures::TryStreamExt::try_collect::<Vec<_>>(s.list_stream(prefix))
                .await
                .unwrap()
                .into_iter()
                .map(|i| i.key)
                .collect();
        streamed.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
        assert_eq!(streamed, expect(prefix), "{s}: list_stream `{prefix}`");
        // Listing all but the skipped keys lists the others, with their facts.
        let skip = |k: &str| k.len().is_multiple_of(2);
        let mut kept: Vec<ObjectInfo> =
            futures::TryStreamExt::try_collect::<Vec<_>>(s.list_stream_except(prefix, &skip))
                .await
                .unwrap();
        kept.sort_by(|x, y| x.key.as_bytes().cmp(y.key.as_bytes()));
        let want: Vec<String> = expect(prefix).into_iter().filter(|k| !skip(k)).collect();
        let got: Vec<String> = kept.iter().map(|i| i.key.clone()).collect();
        assert_eq!(got, want, "{s}: list_stream_except `{prefix}`");
        for info in kept {
            let head = s.head(&info.key).await.unwrap();
            assert_eq!(
                (info.size, info.version),
                (head.size, head.version),
                "{s}: list_stream_except's facts of {}",
                info.key
            );
        }
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

/// Runs the whole [`Storage`] contract against `s`, which must be empty (a fresh
/// prefix of a bucket or directory): reads and typed errors, ranged reads (one range
/// and many ranges of one object),
/// create-if-absent and compare-and-swap (each with exactly one winner among 16
/// racing tasks), idempotent deletes, listing by raw key prefix in key-byte order,
/// long listings, unusual keys, and reopening from the root URL.
///
/// # Panics
/// On the first behaviour that breaks the contract, naming the backend, the
/// operation and the key.
pub async fn storage_contract(s: Arc<dyn Storage>) {
    let started = Instant::now();
    missing_objects_are_not_found(s.as_ref()).await;
    put_get_head(s.as_ref()).await;
    put_fresh_writes_new_objects(s.as_ref()).await;
    ranged_reads(s.as_ref()).await;
    ranged_reads_of_many_ranges(s.as_ref()).await;
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
