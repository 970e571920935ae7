//! A conformance suite for [`Store`] implementations.
//!
//! [`store_conformance`] exercises every operation of the core spec's abstract store
//! interface ("Abstract store interface": `get`, `get_partial_values`, `set`,
//! `erase`, `erase_prefix`, `list`, `list_prefix`, `list_dir`) and panics with a
//! descriptive message on the first violation. [`zarr_store_conformance`] runs the
//! same operations with valid Zarr keys only (node metadata and chunk keys of
//! existing arrays), for stores that refuse anything else, such as
//! [`SessionStore`](crate::session::SessionStore); `tests/integration/session_store.rs` runs it on a
//! repository session, `tests/integration/zarr_api.rs` on the memory and filesystem stores.
//!
//! Available with the `testing` cargo feature.

// A test suite: it reports a violation by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use futures::future::join_all;
use futures::StreamExt;

use std::sync::Arc;

use super::{ByteRange, ChunkKeys, ReadInto, Store, StoreError, WriteNow};
use crate::zarr::chunk_key_encoding::{DefaultChunkKeyEncoding, Separator};

fn b(s: &str) -> Bytes {
    Bytes::from(s.as_bytes().to_vec())
}

/// Runs the conformance suite against `store`, which must be empty and writable.
/// Leaves the store empty when it passes.
///
/// # Panics
/// On the first behaviour that does not conform, naming the operation and key.
pub async fn store_conformance(store: &dyn Store) {
    assert!(store.is_writable(), "conformance needs a writable store");
    assert_eq!(
        store.list().await.expect("list"),
        Vec::<String>::new(),
        "conformance needs an empty store"
    );
    get_set_erase(store).await;
    partial_values(store).await;
    listing(store).await;
    erase_prefix(store).await;
    concurrency(store).await;
    assert!(
        store.list().await.expect("list").is_empty(),
        "store not empty after the suite"
    );
}

async fn get_set_erase(store: &dyn Store) {
    assert_eq!(
        store.get("missing").await.expect("get missing"),
        None,
        "get of a missing key"
    );
    store
        .set("zarr.json", b("{}"))
        .await
        .expect("set zarr.json");
    assert_eq!(
        store.get("zarr.json").await.expect("get").as_deref(),
        Some(&b"{}"[..])
    );
    // overwrite
    store
        .set("zarr.json", b("{\"a\":1}"))
        .await
        .expect("overwrite");
    assert_eq!(
        store.get("zarr.json").await.expect("get").as_deref(),
        Some(&b"{\"a\":1}"[..]),
        "overwrite must replace the value"
    );
    // empty and binary values, deep keys, dotted names
    store
        .set("a/b/c/empty", Bytes::new())
        .await
        .expect("set empty value");
    assert_eq!(
        store
            .get("a/b/c/empty")
            .await
            .expect("get empty")
            .map(|v| v.len()),
        Some(0),
        "an empty value is present, not missing"
    );
    let binary: Bytes = (0..=255u8).collect::<Vec<u8>>().into();
    store
        .set("x/.zarray", binary.clone())
        .await
        .expect("set binary");
    assert_eq!(
        store.get("x/.zarray").await.expect("get").as_ref(),
        Some(&binary)
    );
    let big: Bytes = (0..(1usize << 20) + 7)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    store.set("x/c/0/0", big.clone()).await.expect("set 1 MiB");
    assert_eq!(
        store.get("x/c/0/0").await.expect("get 1 MiB").as_ref(),
        Some(&big)
    );
    for (key, len) in [
        ("x/c/0/0", big.len()),
        ("a/b/c/empty", 0),
        ("x/.zarray", 256),
    ] {
        assert_eq!(
            store.size(key).await.expect("size"),
            Some(len as u64),
            "size of `{key}`"
        );
    }
    assert_eq!(store.size("missing").await.expect("size"), None);
    assert_eq!(
        store.size("a/b").await.expect("size"),
        None,
        "a prefix has no size"
    );
    // a key that is a prefix of other keys is not a value
    assert_eq!(
        store.get("a/b").await.expect("get prefix"),
        None,
        "a prefix is not a key"
    );
    // erase
    store.erase("zarr.json").await.expect("erase");
    assert_eq!(
        store.get("zarr.json").await.expect("get erased"),
        None,
        "erased key still present"
    );
    store
        .erase("zarr.json")
        .await
        .expect("erasing a missing key is not an error");
    store.erase("a/b/c/empty").await.expect("erase");
    store.erase("x/.zarray").await.expect("erase");
    store.erase("x/c/0/0").await.expect("erase");
    assert!(
        store.list().await.expect("list").is_empty(),
        "keys left after erase"
    );
}

async fn partial_values(store: &dyn Store) {
    let value = b("0123456789");
    store.set("p/v", value.clone()).await.expect("set");
    let ranges = [
        ByteRange::FromStart {
            offset: 0,
            length: Some(3),
        },
        ByteRange::FromStart {
            offset: 7,
            length: None,
        },
        ByteRange::FromStart {
            offset: 4,
            length: Some(0),
        },
        ByteRange::Suffix(2),
        ByteRange::Suffix(10),
        ByteRange::FromStart {
            offset: 10,
            length: None,
        },
        ByteRange::FromStart {
            offset: 2,
            length: Some(8),
        },
    ];
    let parts = store
        .get_partial_values("p/v", &ranges)
        .await
        .expect("get_partial_values")
        .expect("value present");
    let expected: [&[u8]; 7] = [b"012", b"789", b"", b"89", b"0123456789", b"", b"23456789"];
    assert_eq!(parts.len(), expected.len(), "one part per range");
    for (i, (got, want)) in parts.iter().zip(expected).enumerate() {
        assert_eq!(got.as_ref(), want, "range {i} ({:?})", ranges[i]);
    }
    assert_eq!(
        store
            .get_partial_values("p/missing", &ranges[..1])
            .await
            .expect("partial of missing"),
        None,
        "partial read of a missing key"
    );
    for bad in [
        ByteRange::FromStart {
            offset: 8,
            length: Some(3),
        },
        ByteRange::FromStart {
            offset: 11,
            length: None,
        },
        ByteRange::FromStart {
            offset: u64::MAX,
            length: Some(2),
        },
    ] {
        match store.get_partial_values("p/v", &[bad]).await {
            Err(StoreError::InvalidRange { .. }) => {}
            other => panic!("range {bad:?} outside the value must be InvalidRange, got {other:?}"),
        }
    }
    // Suffix longer than the value is clamped to the whole value.
    let parts = store
        .get_partial_values("p/v", &[ByteRange::Suffix(100)])
        .await
        .expect("suffix")
        .expect("present");
    assert_eq!(
        parts[0].as_ref(),
        b"0123456789",
        "oversized suffix returns the value"
    );
    let none = store
        .get_partial_values("p/v", &[])
        .await
        .expect("no ranges")
        .expect("present");
    assert!(none.is_empty(), "no ranges, no parts");
    store.erase("p/v").await.expect("erase");
}

async fn listing(store: &dyn Store) {
    let keys = [
        "zarr.json",
        "a/zarr.json",
        "a/c/0/0",
        "a/c/0/1",
        "a/c/1/0",
        "a/b/zarr.json",
        "ab/zarr.json",
        "a.x",
    ];
    for k in keys {
        store.set(k, b(k)).await.expect("set");
    }
    let mut sorted: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
    sorted.sort();
    assert_eq!(
        store.list().await.expect("list"),
        sorted,
        "list must be sorted and complete"
    );
    assert_eq!(
        store.list_prefix("a/").await.expect("list_prefix"),
        vec![
            "a/b/zarr.json",
            "a/c/0/0",
            "a/c/0/1",
            "a/c/1/0",
            "a/zarr.json"
        ],
        "list_prefix(a/)"
    );
    assert_eq!(
        store.list_prefix("a/c/0/").await.expect("list_prefix"),
        vec!["a/c/0/0", "a/c/0/1"],
        "list_prefix(a/c/0/)"
    );
    assert!(store
        .list_prefix("nothing/")
        .await
        .expect("list_prefix")
        .is_empty());
    let root = store.list_dir("").await.expect("list_dir root");
    assert_eq!(root.keys, vec!["a.x", "zarr.json"], "list_dir('') keys");
    assert_eq!(root.prefixes, vec!["a/", "ab/"], "list_dir('') prefixes");
    let a = store.list_dir("a/").await.expect("list_dir a/");
    assert_eq!(
        a.keys,
        vec!["a/zarr.json"],
        "list_dir(a/) keys are full keys"
    );
    assert_eq!(
        a.prefixes,
        vec!["a/b/", "a/c/"],
        "list_dir(a/) prefixes are full prefixes"
    );
    let c = store.list_dir("a/c/").await.expect("list_dir a/c/");
    assert!(c.keys.is_empty());
    assert_eq!(c.prefixes, vec!["a/c/0/", "a/c/1/"]);
    let missing = store.list_dir("zzz/").await.expect("list_dir missing");
    assert!(missing.keys.is_empty() && missing.prefixes.is_empty());
    for k in keys {
        store.erase(k).await.expect("erase");
    }
    // After erasing, no stale prefixes remain.
    let root = store.list_dir("").await.expect("list_dir root");
    assert!(
        root.keys.is_empty() && root.prefixes.is_empty(),
        "list_dir after erasing everything: {root:?}"
    );
}

async fn erase_prefix(store: &dyn Store) {
    for k in [
        "arr/zarr.json",
        "arr/c/0",
        "arr/c/1",
        "arr2/zarr.json",
        "arrx",
        "other/k",
    ] {
        store.set(k, b(k)).await.expect("set");
    }
    store.erase_prefix("arr/").await.expect("erase_prefix");
    assert_eq!(
        store.list().await.expect("list"),
        vec!["arr2/zarr.json", "arrx", "other/k"],
        "erase_prefix(arr/) must not touch arr2/ or arrx"
    );
    store
        .erase_prefix("arr/")
        .await
        .expect("erase_prefix of nothing");
    store.erase_prefix("").await.expect("erase_prefix('')");
    assert!(
        store.list().await.expect("list").is_empty(),
        "erase_prefix('') erases all"
    );
}

async fn concurrency(store: &dyn Store) {
    let n = 64usize;
    let sets = (0..n).map(|i| {
        let key = format!("conc/c/{}/{}", i % 8, i);
        async move {
            store
                .set(&key, Bytes::from(vec![(i % 256) as u8; 1000 + i]))
                .await
                .map(|_| key)
        }
    });
    let keys: Vec<String> = join_all(sets)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("concurrent sets");
    let gets = keys.iter().map(|k| store.get(k));
    for (i, v) in join_all(gets).await.into_iter().enumerate() {
        let v = v.expect("concurrent get").expect("value present");
        assert_eq!(v.len(), 1000 + i, "value {i} has the right length");
        assert!(
            v.iter().all(|&x| x == (i % 256) as u8),
            "value {i} is intact"
        );
    }
    // Concurrent overwrites of one key: the final value is one of the written ones.
    let writes = (0..16u8).map(|i| store.set("conc/same", Bytes::from(vec![i; 4096])));
    for r in join_all(writes).await {
        r.expect("concurrent overwrite");
    }
    let v = store.get("conc/same").await.expect("get").expect("present");
    assert_eq!(v.len(), 4096);
    assert!(
        v.iter().all(|&x| x == v[0]),
        "a value must never be a mix of writes"
    );
    // Concurrent erase and set in sibling keys.
    let ops = (0..n).map(|i| {
        let key = keys[i].clone();
        async move {
            if i % 2 == 0 {
                store.erase(&key).await
            } else {
                store.set(&key, Bytes::from_static(b"new")).await
            }
        }
    });
    for r in join_all(ops).await {
        r.expect("concurrent erase/set");
    }
    for (i, k) in keys.iter().enumerate() {
        let v = store.get(k).await.expect("get");
        if i % 2 == 0 {
            assert_eq!(v, None, "{k} erased");
        } else {
            assert_eq!(v.as_deref(), Some(&b"new"[..]), "{k} rewritten");
        }
    }
    store.erase_prefix("conc/").await.expect("erase_prefix");
}

/// The conformance suite restricted to valid Zarr hierarchies: every key is a node's
/// `zarr.json` (valid v3 group or array metadata) or a chunk key of an existing array
/// under the default chunk key encoding. Stores that accept only such keys (a
/// repository session store) run this one; generic stores run it too. `store` must
/// be empty and writable, and is left empty.
///
/// # Panics
/// On the first behaviour that does not conform, naming the operation and key.
pub async fn zarr_store_conformance(store: &dyn Store) {
    assert!(store.is_writable(), "conformance needs a writable store");
    assert!(
        store.list().await.expect("list").is_empty(),
        "conformance needs an empty store"
    );
    let group = b(r#"{"zarr_format":3,"node_type":"group","attributes":{"k":1}}"#);
    let array = b(concat!(
        r#"{"zarr_format":3,"node_type":"array","shape":[4,4],"data_type":"uint8","#,
        r#""chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,2]}},"#,
        r#""chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"#,
        r#""fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{}}"#
    ));
    // Metadata round trips byte for byte; chunks too, small and large.
    store
        .set("zarr.json", group.clone())
        .await
        .expect("set root");
    store
        .set("g/zarr.json", group.clone())
        .await
        .expect("set group");
    store
        .set("g/a/zarr.json", array.clone())
        .await
        .expect("set array");
    assert_eq!(
        store.get("g/a/zarr.json").await.expect("get"),
        Some(array.clone())
    );
    assert_eq!(store.get("g/zarr.json").await.expect("get"), Some(group));
    let big = Bytes::from(
        (0..1u32 << 20)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>(),
    );
    store
        .set("g/a/c/0/0", b("0123456789"))
        .await
        .expect("set chunk");
    store
        .set("g/a/c/1/1", big.clone())
        .await
        .expect("set 1 MiB chunk");
    assert_eq!(
        store.get("g/a/c/1/1").await.expect("get"),
        Some(big.clone())
    );
    assert_eq!(store.get("g/a/c/0/1").await.expect("get missing"), None);
    // Sizes are those of the stored bytes, for chunks and metadata alike.
    assert_eq!(
        store.size("g/a/c/1/1").await.expect("size"),
        Some(big.len() as u64)
    );
    assert_eq!(store.size("g/a/c/0/0").await.expect("size"), Some(10));
    assert_eq!(store.size("g/a/c/0/1").await.expect("size"), None);
    assert_eq!(
        store.size("g/a/zarr.json").await.expect("size"),
        Some(array.len() as u64)
    );
    assert_eq!(store.get("g/b/zarr.json").await.expect("get missing"), None);
    // Partial reads of a chunk.
    let ranges = [
        ByteRange::FromStart {
            offset: 0,
            length: Some(3),
        },
        ByteRange::FromStart {
            offset: 7,
            length: None,
        },
        ByteRange::Suffix(2),
    ];
    let parts = store
        .get_partial_values("g/a/c/0/0", &ranges)
        .await
        .expect("partial")
        .expect("present");
    let want: [&[u8]; 3] = [b"012", b"789", b"89"];
    for (got, want) in parts.iter().zip(want) {
        assert_eq!(got.as_ref(), want);
    }
    assert_eq!(
        store
            .get_partial_values("g/a/c/0/1", &ranges)
            .await
            .expect("partial of missing"),
        None
    );
    match store
        .get_partial_values(
            "g/a/c/0/0",
            &[ByteRange::FromStart {
                offset: 8,
                length: Some(3),
            }],
        )
        .await
    {
        Err(StoreError::InvalidRange { .. }) => {}
        other => panic!("a range outside the chunk must be InvalidRange, got {other:?}"),
    }
    // The store's own chunk port, if it has one: by index, it reads what the keys
    // hold, and its transfer step (run on a thread that is not the executor's)
    // reads and writes what `get` and `set` do.
    let keys = ChunkKeys {
        prefix: "g/a/".into(),
        encoding: Arc::new(DefaultChunkKeyEncoding {
            separator: Separator::Slash,
        }),
    };
    if let Some(port) = store.chunk_port(&keys) {
        assert_eq!(port.key(&[1, 0]), "g/a/c/1/0");
        assert_eq!(
            port.get(&[1, 1]).await.expect("port get"),
            Some(big.clone()),
            "the port reads what the key holds"
        );
        assert_eq!(
            port.get(&[0, 1])
                .await
                .expect("port get of a missing chunk"),
            None
        );
        let reversed = Bytes::from(big.iter().rev().copied().collect::<Vec<u8>>());
        let written = std::thread::scope(|scope| {
            scope
                .spawn(|| port.write_now(&[1, 0], reversed.clone()))
                .join()
                .expect("write_now thread")
        });
        let after = store.get("g/a/c/1/0").await.expect("get");
        match written.expect("write_now of a chunk") {
            WriteNow::Written => {
                assert_eq!(after, Some(reversed.clone()), "get after write_now");
                assert_eq!(
                    store.size("g/a/c/1/0").await.expect("size"),
                    Some(reversed.len() as u64)
                );
                port.erase(&[1, 0]).await.expect("port erase");
                assert_eq!(store.get("g/a/c/1/0").await.expect("get"), None);
            }
            WriteNow::Elsewhere(bytes) => {
                assert_eq!(bytes, reversed, "a declined write hands the bytes back");
                assert_eq!(after, None, "a declined write wrote nothing");
            }
        }
        let (whole, short, missing, whole_bytes, missing_bytes) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let mut whole = vec![0u8; big.len()];
                    let mut short = vec![0u8; big.len() - 1];
                    let mut missing = vec![7u8; 4];
                    (
                        port.read_into(&[1, 1], &mut whole).expect("read_into"),
                        port.read_into(&[1, 1], &mut short)
                            .expect("read_into short"),
                        port.read_into(&[0, 1], &mut missing)
                            .expect("read_into missing"),
                        whole,
                        missing,
                    )
                })
                .join()
                .expect("read_into thread")
        });
        if whole == ReadInto::Read {
            assert_eq!(whole_bytes, big.as_ref(), "read_into reads the value");
        }
        assert_ne!(whole, ReadInto::Missing, "read_into of a stored chunk");
        assert_eq!(
            short,
            ReadInto::Elsewhere,
            "read_into into a buffer of another length"
        );
        assert_ne!(missing, ReadInto::Read, "read_into of a missing chunk");
        assert_eq!(
            missing_bytes, [7u8; 4],
            "a chunk not read leaves the buffer as it was"
        );
    }
    // Many keys at once: each value at its position, missing ones as `None`.
    let keys = [
        "g/a/c/1/1",
        "g/a/c/0/1",
        "g/a/zarr.json",
        "g/a/c/0/0",
        "g/b/zarr.json",
        "g/a/c/1/1",
    ];
    let mut many: Vec<(usize, Option<Bytes>)> = store
        .get_many(keys.iter().map(|k| k.to_string()).collect(), 2)
        .map(|(i, r)| {
            (
                i,
                r.unwrap_or_else(|e| panic!("get_many `{}`: {e}", keys[i])),
            )
        })
        .collect()
        .await;
    many.sort_by_key(|(i, _)| *i);
    let want = [
        Some(big.clone()),
        None,
        Some(array.clone()),
        Some(b("0123456789")),
        None,
        Some(big.clone()),
    ];
    assert_eq!(
        many.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..keys.len()).collect::<Vec<_>>(),
        "get_many answers every key once"
    );
    for ((i, got), want) in many.into_iter().zip(want) {
        assert_eq!(got, want, "get_many `{}`", keys[i]);
    }
    assert_eq!(
        store.get_many(Vec::new(), 4).count().await,
        0,
        "get_many of no keys"
    );
    // Listing.
    let all = store.list().await.expect("list");
    assert_eq!(
        all,
        [
            "g/a/c/0/0",
            "g/a/c/1/1",
            "g/a/zarr.json",
            "g/zarr.json",
            "zarr.json"
        ]
    );
    assert_eq!(
        store.list_prefix("g/a/").await.expect("list_prefix"),
        ["g/a/c/0/0", "g/a/c/1/1", "g/a/zarr.json"]
    );
    let root = store.list_dir("").await.expect("list_dir root");
    assert_eq!(
        (root.keys, root.prefixes),
        (vec!["zarr.json".to_string()], vec!["g/".to_string()])
    );
    let grid = store.list_dir("g/a/c/").await.expect("list_dir grid");
    assert_eq!(
        (grid.keys, grid.prefixes),
        (vec![], vec!["g/a/c/0/".to_string(), "g/a/c/1/".to_string()])
    );
    // Concurrent writes of one chunk: one of them wins, whole.
    let writes = (0..16u8).map(|i| store.set("g/a/c/1/0", Bytes::from(vec![i; 4096])));
    for r in join_all(writes).await {
        r.expect("concurrent set");
    }
    let got = store.get("g/a/c/1/0").await.expect("get").expect("present");
    assert!(
        got.len() == 4096 && got.iter().all(|&x| x == got[0]),
        "a torn write"
    );
    // Erasing a chunk, a missing key, then everything.
    store.erase("g/a/c/0/0").await.expect("erase chunk");
    assert_eq!(store.get("g/a/c/0/0").await.expect("get"), None);
    store
        .erase("g/a/c/0/0")
        .await
        .expect("erasing a missing key is not an error");
    // Erasing by prefix: the chunks under a prefix inside an array, then an array
    // whole (not its sibling `g/ab`, whose keys share the text `g/a`), then a group
    // with all it holds.
    store
        .set("g/ab/zarr.json", array.clone())
        .await
        .expect("set sibling array");
    store
        .set("g/ab/c/0/0", b("sibling"))
        .await
        .expect("set sibling chunk");
    store
        .erase_prefix("g/a/c/1/")
        .await
        .expect("erase_prefix of chunks");
    assert_eq!(
        store.list().await.expect("list"),
        [
            "g/a/zarr.json",
            "g/ab/c/0/0",
            "g/ab/zarr.json",
            "g/zarr.json",
            "zarr.json"
        ]
    );
    store
        .erase_prefix("g/a/")
        .await
        .expect("erase_prefix of an array");
    assert_eq!(
        store.list().await.expect("list"),
        ["g/ab/c/0/0", "g/ab/zarr.json", "g/zarr.json", "zarr.json"]
    );
    store.erase_prefix("g/").await.expect("erase_prefix");
    assert_eq!(store.list().await.expect("list"), ["zarr.json"]);
    // What was erased stays erased when a node comes back at the same path.
    store
        .set("g/zarr.json", b(r#"{"zarr_format":3,"node_type":"group"}"#))
        .await
        .expect("set group again");
    store
        .set("g/ab/zarr.json", array.clone())
        .await
        .expect("set array again");
    assert_eq!(store.get("g/ab/c/0/0").await.expect("get"), None);
    assert_eq!(
        store.list().await.expect("list"),
        ["g/ab/zarr.json", "g/zarr.json", "zarr.json"]
    );
    store
        .erase_prefix("")
        .await
        .expect("erase_prefix of everything");
    assert!(store.list().await.expect("list").is_empty(), "left empty");
}
