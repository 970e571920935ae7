//! Nearby byte ranges of one object are read with one request (Icechunk issue #1316):
//! several ranges of one storage object, the inner chunks of a shard a region needs,
//! and virtual chunks of one file that one region read needs. Requests are counted
//! (a counting storage wrapper for repository objects, a local HTTP server for
//! virtual chunks); ranges farther apart than the coalescing gap are not merged, and a
//! coalesced read never reads from a location the reader did not authorize.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::common::http::{content, not_found, server, Server};
use bytes::Bytes;
use floe::error::VirtualChunkError;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::format::NodePath;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, Storage, StorageError};
use floe::virtual_refs::VirtualAccess;
use floe::zarr::{
    Array, ArrayBuilder, ArraySubset, ByteRange, DataType, Store, StoreError, ZarrError,
};
use floe::{Error, OpenOptions, Repository, Session, VersionSelector};
use futures::StreamExt;
use serde_json::json;

const MIB: u64 = 1 << 20;

/// Counts the reads of each kind a wrapped storage receives, by key prefix.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<HashMap<(Call, String), usize>>>);

impl Counter {
    /// A storage over `inner` counting its calls here.
    fn wrap(&self, inner: Arc<dyn Storage>) -> Arc<dyn Storage> {
        let counts = Arc::clone(&self.0);
        Arc::new(FaultyStorage::new(
            inner,
            Box::new(move |call, key| {
                let prefix = key.split('/').next().unwrap_or("").to_string();
                *counts.lock().unwrap().entry((call, prefix)).or_default() += 1;
                Fault::None
            }),
        ))
    }

    /// Ranged reads of keys under `prefix/` (or of `prefix`) since the last reset.
    fn ranged(&self, prefix: &str) -> usize {
        let c = self.0.lock().unwrap();
        c.get(&(Call::GetRange, prefix.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Whole-object reads of keys under `prefix/`.
    fn whole(&self, prefix: &str) -> usize {
        let c = self.0.lock().unwrap();
        c.get(&(Call::Get, prefix.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn reset(&self) {
        self.0.lock().unwrap().clear();
    }
}

fn pattern(len: u64) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

// --- Storage::get_ranges -----------------------------------------------------------

#[tokio::test]
async fn get_ranges_merges_nearby_ranges_and_only_those() {
    let counter = Counter::default();
    let s = counter.wrap(new_in_memory_storage());
    let size = 17 * MIB + 100;
    let object = pattern(size);
    s.put("obj", object.clone()).await.unwrap();
    let check = |ranges: &[std::ops::Range<u64>], got: &[Bytes]| {
        assert_eq!(got.len(), ranges.len());
        for (r, g) in ranges.iter().zip(got) {
            assert!(g[..] == object[r.start as usize..r.end as usize], "{r:?}");
        }
    };
    // 16 adjacent 1 KiB ranges, in any order: one request.
    let mut adjacent: Vec<_> = (0..16u64).map(|i| i * 1024..(i + 1) * 1024).collect();
    adjacent.reverse();
    counter.reset();
    check(&adjacent, &s.get_ranges("obj", &adjacent).await.unwrap());
    assert_eq!(counter.ranged("obj"), 1, "16 adjacent ranges");
    // A gap of exactly 1 MiB is merged; one byte more is not.
    for (gap, requests) in [(MIB, 1), (MIB + 1, 2)] {
        let ranges = [0..10, 10 + gap..20 + gap];
        counter.reset();
        check(&ranges, &s.get_ranges("obj", &ranges).await.unwrap());
        assert_eq!(counter.ranged("obj"), requests, "gap of {gap} bytes");
    }
    // Far apart: three requests for three clusters.
    let ranges = [
        0..10,
        20..30,
        4 * MIB..4 * MIB + 10,
        9 * MIB..9 * MIB + 1,
        40..50,
    ];
    counter.reset();
    check(&ranges, &s.get_ranges("obj", &ranges).await.unwrap());
    assert_eq!(counter.ranged("obj"), 3, "three clusters");
    // One request spans at most 16 MiB: 8 + 8 MiB fit, the next MiB does not.
    let ranges = [0..8 * MIB, 8 * MIB..16 * MIB, 16 * MIB..17 * MIB];
    counter.reset();
    check(&ranges, &s.get_ranges("obj", &ranges).await.unwrap());
    assert_eq!(counter.ranged("obj"), 2, "span cap");
    // Past the end: the typed short read names the caller's range, not the request.
    counter.reset();
    match s.get_ranges("obj", &[0..10, size - 5..size + 5]).await {
        Err(StorageError::ShortRead {
            requested, size: n, ..
        }) => assert_eq!((requested, n), (size - 5..size + 5, size)),
        other => panic!("expected a short read, got {other:?}"),
    }
}

// --- Sharding ------------------------------------------------------------------------

/// A repository on counted in-memory storage.
async fn counted_repo(counter: &Counter) -> (Repository, Arc<dyn Storage>) {
    let storage = counter.wrap(new_in_memory_storage());
    let repo = Repository::create(Arc::clone(&storage), None)
        .await
        .unwrap();
    (repo, storage)
}

fn sharding(inner: &[u64]) -> serde_json::Value {
    json!({"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        "index_location": "end"
    }})
}

async fn reader(repo: &Repository) -> Arc<dyn Store> {
    let s = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    Arc::new(s.store())
}

#[tokio::test]
async fn sixteen_inner_chunks_of_a_shard_take_two_requests() {
    let counter = Counter::default();
    let (repo, _) = counted_repo(&counter).await;
    let s = repo.writable_session("main").await.unwrap();
    // One 64x64 shard of 8x8 inner chunks of 8x8 u32 (256 bytes each).
    let a = ArrayBuilder::new(vec![64, 64], vec![64, 64], DataType::UInt32)
        .codecs(vec![sharding(&[8, 8])])
        .create(Arc::new(s.store()), "a")
        .await
        .unwrap();
    let vals: Vec<u32> = (0..64 * 64).collect();
    a.write_region(&ArraySubset::full(&[64, 64]), &vals)
        .await
        .unwrap();
    s.commit("shard").await.unwrap();

    let a = Array::open(reader(&repo).await, "a").await.unwrap();
    counter.reset();
    // Rows 8..40, columns 16..48: inner chunks (1..5, 2..6), 16 of the 64, in four
    // runs of four separated by four inner chunks (1 KiB): well within the gap.
    let region = ArraySubset::new(vec![8, 16], vec![32, 32]);
    let got: Vec<u32> = a.read_region(&region).await.unwrap();
    let want: Vec<u32> = (8..40u32)
        .flat_map(|r| (16..48u32).map(move |c| r * 64 + c))
        .collect();
    assert_eq!(got, want);
    // The index, then the 16 inner chunks in one request (17 before coalescing).
    assert_eq!(counter.ranged("chunks"), 2, "ranged reads of the shard");
    assert_eq!(counter.whole("chunks"), 0, "no whole-shard read");
}

#[tokio::test]
async fn inner_chunks_farther_apart_than_the_gap_are_not_merged() {
    // Inner chunks of one row of N bytes; a shard of 2x2 of them. Column 0 needs
    // inner chunks (0,0) and (1,0), stored 2N bytes apart, so N bytes lie between.
    for (n, requests) in [(512 * 1024u64, 2), (1536 * 1024, 3)] {
        let counter = Counter::default();
        let (repo, _) = counted_repo(&counter).await;
        let s = repo.writable_session("main").await.unwrap();
        let a = ArrayBuilder::new(vec![2, 2 * n], vec![2, 2 * n], DataType::UInt8)
            .codecs(vec![sharding(&[1, n])])
            .create(Arc::new(s.store()), "a")
            .await
            .unwrap();
        let vals: Vec<u8> = (0..4 * n).map(|i| (i % 251) as u8 | 1).collect();
        a.write_region(&ArraySubset::full(&[2, 2 * n]), &vals)
            .await
            .unwrap();
        s.commit("shard").await.unwrap();
        let a = Array::open(reader(&repo).await, "a").await.unwrap();
        counter.reset();
        let got: Vec<u8> = a
            .read_region(&ArraySubset::new(vec![0, 0], vec![2, n]))
            .await
            .unwrap();
        let want: Vec<u8> = [0, 2 * n]
            .iter()
            .flat_map(|&row| vals[row as usize..(row + n) as usize].to_vec())
            .collect();
        assert!(got == want, "values of column 0 (N = {n})");
        assert_eq!(
            counter.ranged("chunks"),
            requests,
            "index + inner chunks with {n} bytes between them"
        );
    }
}

#[tokio::test]
async fn partial_values_of_a_native_chunk_are_one_request() {
    let counter = Counter::default();
    let (repo, _) = counted_repo(&counter).await;
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    ArrayBuilder::new(vec![4096], vec![4096], DataType::UInt8)
        .create(Arc::new(store.clone()), "a")
        .await
        .unwrap();
    let chunk = pattern(4096);
    store.set("a/c/0", chunk.clone()).await.unwrap();
    // Packed on object storage (4 KiB): written, so the ranges are read from it.
    s.flush_packs().await.unwrap();
    counter.reset();
    let ranges: Vec<ByteRange> = (0..16u64)
        .map(|i| ByteRange::FromStart {
            offset: i * 200,
            length: Some(100),
        })
        .chain([ByteRange::Suffix(10)])
        .collect();
    let parts = store
        .get_partial_values("a/c/0", &ranges)
        .await
        .unwrap()
        .unwrap();
    for (i, part) in parts.iter().take(16).enumerate() {
        assert_eq!(part[..], chunk[i * 200..i * 200 + 100]);
    }
    assert_eq!(parts[16][..], chunk[4086..]);
    assert_eq!(counter.ranged("chunks"), 1, "17 ranges of one chunk");
}

// --- Virtual chunks --------------------------------------------------------------------

/// A repository whose virtual chunk containers cover `prefixes` (HTTP(S) URLs or
/// local directories as `file://` URLs), with a uint8 array `/v` of `n` chunks of
/// `len` bytes, each chunk `i` pointing at `locations[i]`; opened by a reader who
/// authorizes `authorized`.
async fn virtual_repo(
    prefixes: &[String],
    n: u64,
    len: u64,
    locations: impl Fn(u64) -> (String, u64),
    authorized: &[String],
) -> (Repository, Session) {
    let mut config = RepositoryConfig::default();
    for prefix in prefixes {
        let store = match prefix.strip_prefix("file://") {
            Some(path) => ContainerStore::LocalFileSystem(path.to_string()),
            None => ContainerStore::Http,
        };
        config.set_virtual_chunk_container(VirtualChunkContainer {
            name: None,
            url_prefix: prefix.clone(),
            store,
        });
    }
    let storage = new_in_memory_storage();
    let repo = Repository::create(Arc::clone(&storage), Some(config))
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    ArrayBuilder::new(vec![n * len], vec![len], DataType::UInt8)
        .codecs(vec![json!({"name": "bytes"})])
        .create(Arc::new(s.store()), "v")
        .await
        .unwrap();
    for i in 0..n {
        let (location, offset) = locations(i);
        s.set_chunk_ref(
            &NodePath::new("/v").unwrap(),
            &[i],
            Some(ChunkPayload::Virtual(VirtualChunkRef {
                location,
                offset,
                length: len,
                checksum: None,
            })),
        )
        .unwrap();
    }
    s.commit("virtual").await.unwrap();
    let opts = OpenOptions::default().virtual_access(VirtualAccess::prefixes(authorized).unwrap());
    let repo = Repository::open_with(storage, opts).await.unwrap();
    let session = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    (repo, session)
}

/// A server holding `/data/file.nc` (`body`) and `/other/file.nc` (the same bytes).
async fn file_server(body: Bytes) -> Server {
    server(Arc::new(move |m, path, r| match path {
        "/data/file.nc" | "/other/file.nc" => content(m, &body, r),
        _ => not_found(),
    }))
    .await
}

#[tokio::test]
async fn sixteen_adjacent_virtual_chunks_take_one_request() {
    let body = pattern(64 * 1024);
    let srv = file_server(body.clone()).await;
    let base = format!("http://{}", srv.addr);
    let url = format!("{base}/data/file.nc");
    // Chunks of 1,000 bytes, back to back from byte 96 (as in a NetCDF file).
    let (_repo, session) = virtual_repo(
        &[format!("{base}/")],
        16,
        1000,
        |i| (url.clone(), 96 + i * 1000),
        &[format!("{base}/data/")],
    )
    .await;
    let a = Array::open(Arc::new(session.store()), "v").await.unwrap();
    srv.clear();
    let got: Vec<u8> = a.read_all().await.unwrap();
    assert!(
        got[..] == body[96..96 + 16_000],
        "the bytes of the 16 chunks"
    );
    let gets = srv.gets();
    assert_eq!(gets.len(), 1, "one request for 16 chunks: {gets:?}");
    assert_eq!(gets[0].range, Some((96, 96 + 16_000 - 1)));
    // A region inside: chunks 3..=12.
    srv.clear();
    let got: Vec<u8> = a
        .read_region(&ArraySubset::new(vec![3500], vec![9000]))
        .await
        .unwrap();
    assert!(got[..] == body[96 + 3500..96 + 12_500]);
    assert_eq!(srv.gets().len(), 1, "one request for chunks 3..=12");
}

#[tokio::test]
async fn virtual_chunks_farther_apart_than_the_gap_are_separate_requests() {
    let body = pattern(4 * MIB);
    let srv = file_server(body.clone()).await;
    let base = format!("http://{}", srv.addr);
    let url = format!("{base}/data/file.nc");
    // Chunks 0..8 from byte 0, chunks 8..16 from 3 MiB: two clusters 3 MiB apart.
    let offset = |i: u64| {
        if i < 8 {
            i * 512
        } else {
            3 * MIB + (i - 8) * 512
        }
    };
    let (_repo, session) = virtual_repo(
        &[format!("{base}/")],
        16,
        512,
        |i| (url.clone(), offset(i)),
        &[format!("{base}/data/")],
    )
    .await;
    let a = Array::open(Arc::new(session.store()), "v").await.unwrap();
    srv.clear();
    let got: Vec<u8> = a.read_all().await.unwrap();
    for i in 0..16u64 {
        let o = offset(i) as usize;
        assert!(
            got[i as usize * 512..][..512] == body[o..o + 512],
            "chunk {i}"
        );
    }
    let mut ranges: Vec<_> = srv.gets().into_iter().map(|h| h.range).collect();
    ranges.sort();
    assert_eq!(
        ranges,
        vec![
            Some((0, 8 * 512 - 1)),
            Some((3 * MIB as usize, 3 * MIB as usize + 8 * 512 - 1))
        ],
        "one request per cluster"
    );
}

#[tokio::test]
async fn partial_values_of_a_virtual_chunk_are_one_request() {
    let body = pattern(8192);
    let srv = file_server(body.clone()).await;
    let base = format!("http://{}", srv.addr);
    let url = format!("{base}/data/file.nc");
    let (_repo, session) = virtual_repo(
        &[format!("{base}/")],
        1,
        4096,
        |_| (url.clone(), 1000),
        &[format!("{base}/data/")],
    )
    .await;
    let store = session.store();
    srv.clear();
    let ranges: Vec<ByteRange> = (0..8u64)
        .map(|i| ByteRange::FromStart {
            offset: i * 500,
            length: Some(100),
        })
        .collect();
    let parts = store
        .get_partial_values("v/c/0", &ranges)
        .await
        .unwrap()
        .unwrap();
    for (i, part) in parts.iter().enumerate() {
        let o = 1000 + i * 500;
        assert_eq!(part[..], body[o..o + 100]);
    }
    assert_eq!(srv.gets().len(), 1, "8 ranges of one virtual chunk");
}

/// The virtual chunk error behind a failed Zarr read.
fn virtual_error(e: &ZarrError) -> &VirtualChunkError {
    match e {
        ZarrError::Store(e @ StoreError::Repository { .. }) => match e.repository_error() {
            Some(Error::VirtualChunk { source, .. }) => source,
            other => panic!("expected a virtual chunk error, got {other:?}"),
        },
        other => panic!("expected a repository store error, got {other:?}"),
    }
}

#[tokio::test]
async fn coalesced_reads_never_reach_an_unauthorized_location() {
    // Chunks 0..8 in the authorized file, chunks 8..16 at the adjacent offsets of a
    // file the repository has a container for but the reader did not authorize.
    let body = pattern(64 * 1024);
    let srv = file_server(body.clone()).await;
    let base = format!("http://{}", srv.addr);
    let good = format!("{base}/data/file.nc");
    let bad = format!("{base}/other/file.nc");
    let (_repo, session) = virtual_repo(
        &[format!("{base}/")],
        16,
        100,
        |i| (if i < 8 { good.clone() } else { bad.clone() }, i * 100),
        &[format!("{base}/data/")],
    )
    .await;
    let a = Array::open(Arc::new(session.store()), "v").await.unwrap();
    srv.clear();
    let e = a.read_all::<u8>().await.unwrap_err();
    assert!(
        matches!(virtual_error(&e), VirtualChunkError::Unauthorized { url, .. } if *url == bad),
        "{e:?}"
    );
    assert!(
        srv.hits().iter().all(|h| h.path == "/data/file.nc"),
        "only the authorized file is read: {:?}",
        srv.hits()
    );
    // Chunk by chunk: the authorized ones read, the others refused, nothing merged
    // across the two files.
    srv.clear();
    let chunks = (0..16u64)
        .map(|i| (NodePath::new("/v").unwrap(), vec![i]))
        .collect();
    let outcomes: Vec<_> = session.get_chunks(chunks, 8).collect().await;
    assert_eq!(outcomes.len(), 16);
    for (i, outcome) in outcomes {
        if i < 8 {
            let got = outcome.unwrap().unwrap();
            assert_eq!(got[..], body[i * 100..(i + 1) * 100], "chunk {i}");
        } else {
            match outcome {
                Err(Error::VirtualChunk {
                    source: VirtualChunkError::Unauthorized { .. },
                    index,
                    ..
                }) => assert_eq!(index, vec![i as u64]),
                other => panic!("chunk {i}: expected Unauthorized, got {other:?}"),
            }
        }
    }
    let gets = srv.gets();
    assert_eq!(gets.len(), 1, "one request for chunks 0..8: {gets:?}");
    assert_eq!(gets[0].path, "/data/file.nc");
    assert_eq!(gets[0].range, Some((0, 799)));
}

#[tokio::test]
async fn coalesced_local_reads_stay_inside_the_authorized_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let body = pattern(4096);
    std::fs::write(data.join("file.nc"), &body).unwrap();
    std::fs::write(root.join("secret.nc"), vec![b'S'; 4096]).unwrap();
    let good = format!("file://{}/file.nc", data.display());
    // The same file name through `..`: outside the authorized directory.
    let escape = format!("file://{}/../secret.nc", data.display());
    let (_repo, session) = virtual_repo(
        &[format!("file://{}/", root.display())],
        16,
        64,
        |i| {
            (
                if i % 2 == 0 {
                    good.clone()
                } else {
                    escape.clone()
                },
                i * 64,
            )
        },
        &[format!("file://{}/", data.display())],
    )
    .await;
    let chunks = (0..16u64)
        .map(|i| (NodePath::new("/v").unwrap(), vec![i]))
        .collect();
    let outcomes: Vec<_> = session.get_chunks(chunks, 4).collect().await;
    assert_eq!(outcomes.len(), 16);
    for (i, outcome) in outcomes {
        if i % 2 == 0 {
            assert_eq!(outcome.unwrap().unwrap()[..], body[i * 64..(i + 1) * 64]);
        } else {
            assert!(
                matches!(
                    outcome,
                    Err(Error::VirtualChunk {
                        source: VirtualChunkError::Unauthorized { .. },
                        ..
                    })
                ),
                "chunk {i}: {outcome:?}"
            );
        }
    }
    // Through the Zarr API the whole read fails with the typed error.
    let a = Array::open(Arc::new(session.store()), "v").await.unwrap();
    let e = a.read_all::<u8>().await.unwrap_err();
    assert!(
        matches!(virtual_error(&e), VirtualChunkError::Unauthorized { .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_failed_merged_request_reports_each_chunk_on_its_own() {
    // Chunk 3 runs past the end of the file: its neighbours, read with it in one
    // request, still read; chunk 3 alone is a short read.
    let body = pattern(1000);
    let srv = file_server(body.clone()).await;
    let base = format!("http://{}", srv.addr);
    let url = format!("{base}/data/file.nc");
    let (_repo, session) = virtual_repo(
        &[format!("{base}/")],
        4,
        300,
        |i| (url.clone(), i * 300),
        &[format!("{base}/data/")],
    )
    .await;
    let chunks = (0..4u64)
        .map(|i| (NodePath::new("/v").unwrap(), vec![i]))
        .collect();
    let outcomes: Vec<_> = session.get_chunks(chunks, 4).collect().await;
    for (i, outcome) in outcomes {
        if i < 3 {
            assert_eq!(outcome.unwrap().unwrap()[..], body[i * 300..(i + 1) * 300]);
        } else {
            match outcome {
                Err(Error::VirtualChunk {
                    source: VirtualChunkError::ShortRead { offset, end, .. },
                    ..
                }) => assert_eq!((offset, end), (900, 1200)),
                other => panic!("chunk 3: expected a short read, got {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn many_small_virtual_chunks_scale_with_the_span_not_the_count() {
    // 4,096 chunks of 1 KiB back to back (4 MiB): one window of 1,024 chunks is one
    // request, so 4 requests instead of 4,096.
    let n = 4096u64;
    let body = pattern(n * 1024);
    let srv = file_server(body.clone()).await;
    let base = format!("http://{}", srv.addr);
    let url = format!("{base}/data/file.nc");
    let (_repo, session) = virtual_repo(
        &[format!("{base}/")],
        n,
        1024,
        |i| (url.clone(), i * 1024),
        &[format!("{base}/data/")],
    )
    .await;
    let a = Array::open(Arc::new(session.store()), "v").await.unwrap();
    srv.clear();
    let got: Vec<u8> = a.read_all().await.unwrap();
    assert!(got[..] == body[..]);
    let count = srv.gets().len();
    assert!(count <= 4, "{count} requests for {n} adjacent chunks");
}
