//! Virtual chunk refs at the session level: containers from config.yaml, the caller's
//! authorization, URL normalization, checksums, missing sources and short reads.

use crate::common;
use std::sync::Arc;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::error::VirtualChunkError;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::{Error, OpenOptions, Repository, VersionSelector};

struct Fixture {
    _dir: tempfile::TempDir,
    repo_path: std::path::PathBuf,
    data_dir: std::path::PathBuf,
    source: std::path::PathBuf,
}

fn file_url(p: &std::path::Path) -> String {
    format!("file://{}", p.display())
}

fn vref(
    location: String,
    offset: u64,
    length: u64,
    checksum: Option<Checksum>,
) -> Option<ChunkPayload> {
    Some(ChunkPayload::Virtual(VirtualChunkRef {
        location,
        offset,
        length,
        checksum,
    }))
}

/// A repository with a container for `<tmp>/data/` and an array `/v` whose chunks
/// point into `<tmp>/data/source.bin` (bytes 0..=255 repeated).
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let source = data_dir.join("source.bin");
    let bytes: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
    std::fs::write(&source, &bytes).unwrap();
    std::fs::write(dir.path().join("secret.txt"), b"top secret").unwrap();
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: format!("{}/", file_url(&data_dir)),
        store: ContainerStore::LocalFileSystem(format!("{}/", data_dir.display())),
    });
    let repo_path = dir.path().join("repo");
    let repo = Repository::create(
        Arc::new(LocalStorage::new(&repo_path).unwrap()),
        Some(config),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/v"), array_def("/v", &[8], &[1], "uint8"))
        .unwrap();
    let url = file_url(&source);
    let mtime = std::fs::metadata(&source).unwrap().modified().unwrap();
    // Whole seconds, rounded up as writers do.
    let since_epoch = mtime.duration_since(std::time::UNIX_EPOCH).unwrap();
    let secs = (since_epoch.as_secs() + u64::from(since_epoch.subsec_nanos() > 0)) as u32;
    s.set_chunk_ref(&p("/v"), &[0], vref(url.clone(), 0, 16, None))
        .unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[1],
        vref(url.clone(), 100, 10, Some(Checksum::LastModified(secs))),
    )
    .unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[2],
        vref(file_url(&data_dir.join("missing.bin")), 0, 4, None),
    )
    .unwrap();
    s.set_chunk_ref(&p("/v"), &[3], vref(url.clone(), 1000, 100, None))
        .unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[4],
        vref(
            format!("{}/../secret.txt", file_url(&data_dir)),
            0,
            10,
            None,
        ),
    )
    .unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[5],
        vref("file:///etc/hostname".into(), 0, 1, None),
    )
    .unwrap();
    s.set_chunk_ref(&p("/v"), &[6], vref(url.clone(), 2000, 10, None))
        .unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[7],
        vref(url, 0, 4, Some(Checksum::ETag("\"not-the-etag\"".into()))),
    )
    .unwrap();
    s.commit("virtual refs").await.unwrap();
    Fixture {
        _dir: dir,
        repo_path,
        data_dir,
        source,
    }
}

async fn open(f: &Fixture, prefixes: &[String]) -> floe::Session {
    let opts = OpenOptions::default().virtual_access(VirtualAccess::prefixes(prefixes).unwrap());
    let repo = Repository::open_with(Arc::new(LocalStorage::new(&f.repo_path).unwrap()), opts)
        .await
        .unwrap();
    repo.readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap()
}

fn virtual_err(e: Error) -> VirtualChunkError {
    match e {
        Error::VirtualChunk { source, .. } => source,
        other => panic!("expected a virtual chunk error, got {other}"),
    }
}

#[tokio::test]
async fn authorized_reads_return_the_referenced_bytes() {
    let f = fixture().await;
    let s = open(&f, &[format!("{}/", file_url(&f.data_dir))]).await;
    let all = std::fs::read(&f.source).unwrap();
    assert_eq!(
        s.get_chunk(&p("/v"), &[0], None).await.unwrap().unwrap(),
        Bytes::copy_from_slice(&all[0..16])
    );
    assert_eq!(
        s.get_chunk(&p("/v"), &[1], None).await.unwrap().unwrap(),
        Bytes::copy_from_slice(&all[100..110])
    );
    assert_eq!(
        s.get_chunk(&p("/v"), &[1], Some(2..5))
            .await
            .unwrap()
            .unwrap(),
        Bytes::copy_from_slice(&all[102..105])
    );
}

#[tokio::test]
async fn unauthorized_prefixes_are_refused() {
    let f = fixture().await;
    // Nothing authorized.
    let s = open(&f, &[]).await;
    let e = virtual_err(s.get_chunk(&p("/v"), &[0], None).await.unwrap_err());
    assert!(
        matches!(&e, VirtualChunkError::Unauthorized { url, .. } if url.ends_with("source.bin")),
        "{e}"
    );
    // Authorized: the data dir. `..` cannot escape it, and other files have no container.
    let s = open(&f, &[format!("{}/", file_url(&f.data_dir))]).await;
    let e = virtual_err(s.get_chunk(&p("/v"), &[4], None).await.unwrap_err());
    assert!(
        matches!(&e, VirtualChunkError::NoContainer { url } if url.ends_with("/secret.txt") && !url.contains("..")),
        "{e}"
    );
    let e = virtual_err(s.get_chunk(&p("/v"), &[5], None).await.unwrap_err());
    assert!(matches!(e, VirtualChunkError::NoContainer { .. }), "{e}");
    // Authorizing a prefix without a container does not open it either.
    let s = open(&f, &["file:///etc/".to_string()]).await;
    let e = virtual_err(s.get_chunk(&p("/v"), &[5], None).await.unwrap_err());
    assert!(matches!(e, VirtualChunkError::NoContainer { .. }), "{e}");
}

#[tokio::test]
async fn missing_sources_and_short_reads_are_errors_not_fill_values() {
    let f = fixture().await;
    let s = open(&f, &[format!("{}/", file_url(&f.data_dir))]).await;
    let e = virtual_err(s.get_chunk(&p("/v"), &[2], None).await.unwrap_err());
    assert!(
        matches!(&e, VirtualChunkError::SourceMissing { url } if url.ends_with("missing.bin")),
        "{e}"
    );
    let e = virtual_err(s.get_chunk(&p("/v"), &[3], None).await.unwrap_err());
    assert!(matches!(e, VirtualChunkError::ShortRead { .. }), "{e}");
    let e = virtual_err(s.get_chunk(&p("/v"), &[6], None).await.unwrap_err());
    assert!(matches!(e, VirtualChunkError::ShortRead { .. }), "{e}");
}

#[tokio::test]
async fn checksums_reject_modified_sources() {
    let f = fixture().await;
    let s = open(&f, &[format!("{}/", file_url(&f.data_dir))]).await;
    let e = virtual_err(s.get_chunk(&p("/v"), &[7], None).await.unwrap_err());
    assert!(
        matches!(e, VirtualChunkError::ChecksumMismatch { .. }),
        "{e}"
    );
    // Chunk 1 carries the last-modified time of the source: it reads until the file
    // changes.
    assert!(s.get_chunk(&p("/v"), &[1], None).await.is_ok());
    common::touch_future(&f.source);
    let e = virtual_err(s.get_chunk(&p("/v"), &[1], None).await.unwrap_err());
    assert!(
        matches!(&e, VirtualChunkError::ChecksumMismatch { url } if url.ends_with("source.bin")),
        "{e}"
    );
    assert!(e.to_string().contains("source.bin"));
}

#[tokio::test]
async fn local_etags_match_with_or_without_quotes() {
    // object_store 0.14 (floe, Icechunk 2.x) quotes the etag it derives for local files;
    // 0.13 (Icechunk 1.x) does not, and Icechunk 1.x records it bare in chunk refs.
    use std::os::unix::fs::MetadataExt;
    let f = fixture().await;
    let meta = std::fs::metadata(&f.source).unwrap();
    let micros = meta
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let bare = format!("{:x}-{micros:x}-{:x}", meta.ino(), meta.len());
    let repo = Repository::open_with(
        Arc::new(LocalStorage::new(&f.repo_path).unwrap()),
        OpenOptions::default().virtual_access(
            VirtualAccess::prefixes([format!("{}/", file_url(&f.data_dir))]).unwrap(),
        ),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let url = file_url(&f.source);
    let all = std::fs::read(&f.source).unwrap();
    for (i, etag) in [bare.clone(), format!("\"{bare}\"")]
        .into_iter()
        .enumerate()
    {
        s.set_chunk_ref(
            &p("/v"),
            &[i as u64],
            vref(url.clone(), 8, 4, Some(Checksum::ETag(etag))),
        )
        .unwrap();
        assert_eq!(
            s.get_chunk(&p("/v"), &[i as u64], None)
                .await
                .unwrap()
                .unwrap(),
            &all[8..12]
        );
    }
    s.set_chunk_ref(
        &p("/v"),
        &[2],
        vref(url, 8, 4, Some(Checksum::ETag(format!("{bare}0")))),
    )
    .unwrap();
    let e = virtual_err(s.get_chunk(&p("/v"), &[2], None).await.unwrap_err());
    assert!(
        matches!(e, VirtualChunkError::ChecksumMismatch { .. }),
        "{e}"
    );
}

/// Refs of arrays `/a` (3 x 1500 chunks) and `/b` (2 x 1000) into three shared
/// locations, one of them also with an etag (the same URL with another checksum is
/// another source), in an order that is neither sorted nor grouped by array.
fn shared_location_refs(urls: &[String]) -> Vec<(&'static str, Vec<u64>, Option<ChunkPayload>)> {
    let mut out = Vec::new();
    for (name, rows, cols) in [("/a", 3u64, 1500u64), ("/b", 2, 1000)] {
        for i in 0..rows {
            for j in 0..cols {
                let n = i * cols + j;
                let (url, checksum) = match n % 4 {
                    0 => (&urls[0], None),
                    1 => (&urls[0], Some(Checksum::ETag("\"e1\"".into()))),
                    2 => (&urls[1], Some(Checksum::LastModified(1_700_000_000))),
                    _ => (&urls[2], None),
                };
                out.push((
                    name,
                    vec![i, j],
                    vref(url.clone(), n * 37 % 1000, 1 + n % 23, checksum),
                ));
            }
        }
    }
    let len = out.len();
    // A fixed permutation (7919 is prime and does not divide `len`).
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by_key(|&k| k * 7919 % len);
    order.into_iter().map(|k| out[k].clone()).collect()
}

#[tokio::test]
async fn shared_locations_are_invisible_to_readers_before_and_after_commit() {
    use std::collections::BTreeMap;
    let f = fixture().await;
    let repo = Repository::open(Arc::new(LocalStorage::new(&f.repo_path).unwrap()))
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[3, 1500], &[1, 1], "uint8"))
        .unwrap();
    s.add_array(&p("/b"), array_def("/b", &[2, 1000], &[1, 1], "uint8"))
        .unwrap();
    let urls: Vec<String> = ["one.nc", "two.nc", "three.nc"]
        .iter()
        .map(|n| file_url(&f.data_dir.join("a/long/prefix/of/netcdf/files").join(n)))
        .collect();
    type Model = BTreeMap<(&'static str, Vec<u64>), Option<ChunkPayload>>;
    let mut model: Model = BTreeMap::new();
    // One ref at a time, and in batches.
    for (k, (name, idx, payload)) in shared_location_refs(&urls).into_iter().enumerate() {
        if k % 2 == 0 {
            s.set_chunk_ref(&p(name), &idx, payload.clone()).unwrap();
        } else {
            s.set_chunk_refs(&p(name), [(idx.clone(), payload.clone())])
                .unwrap();
        }
        model.insert((name, idx), payload);
    }
    // Overwrites (with another source, with another checksum) and deletions.
    for j in (0..1500).step_by(7) {
        let payload = match j % 3 {
            0 => None,
            1 => vref(urls[2].clone(), j, 5, Some(Checksum::ETag("\"e1\"".into()))),
            _ => vref(urls[0].clone(), j, 6, None),
        };
        s.set_chunk_ref(&p("/a"), &[1, j], payload.clone()).unwrap();
        model.insert(("/a", vec![1, j]), payload);
    }
    let expect = |model: &Model, name: &str| -> Vec<(Vec<u64>, ChunkPayload)> {
        model
            .iter()
            .filter(|((n, _), _)| *n == name)
            .filter_map(|((_, idx), p)| p.clone().map(|p| (idx.clone(), p)))
            .collect()
    };
    let check = |session: floe::Session, what: &'static str| {
        let (expect_a, expect_b) = (expect(&model, "/a"), expect(&model, "/b"));
        let model = model.clone();
        async move {
            assert_eq!(
                session.chunk_refs(&p("/a")).await.unwrap(),
                expect_a,
                "{what}"
            );
            assert_eq!(
                session.chunk_refs(&p("/b")).await.unwrap(),
                expect_b,
                "{what}"
            );
            for ((name, idx), payload) in model.iter().step_by(13) {
                let got = session.get_chunk_ref(&p(name), idx).await.unwrap();
                assert_eq!(&got, payload, "{what}: {name} {idx:?}");
            }
        }
    };
    check(s.clone(), "uncommitted").await;

    // A fork carries them through its serialized form.
    let bytes = s.fork().await.unwrap().to_fork_bytes().await.unwrap();
    let back = repo.fork_from_bytes(&bytes).await.unwrap();
    check(back.clone(), "fork").await;
    // (Change sets compare by value whatever the interning order: the unit test
    // `change_sets_compare_by_value_whatever_the_interning_order`.)
    let id = s.get_node(&p("/a")).unwrap().id;
    let changes = s.change_set();
    assert_eq!(changes.array_chunks(&id).map(|c| c.len()), Some(4500));

    let first = s.commit("shared locations").await.unwrap();
    let read = |snapshot| {
        let repo = repo.clone();
        async move {
            repo.readonly_session(&VersionSelector::Snapshot(snapshot))
                .await
                .unwrap()
        }
    };
    check(read(first).await, "committed").await;

    // A second commit merges a few changes into the committed manifests.
    for j in (0..1000).step_by(97) {
        let payload = (j % 2 == 0)
            .then(|| vref(urls[1].clone(), j, 9, None))
            .flatten();
        s.set_chunk_ref(&p("/b"), &[0, j], payload.clone()).unwrap();
        model.insert(("/b", vec![0, j]), payload);
    }
    let second = s.commit("a few changes").await.unwrap();
    let (expect_a, expect_b) = (expect(&model, "/a"), expect(&model, "/b"));
    let r = read(second).await;
    assert_eq!(r.chunk_refs(&p("/a")).await.unwrap(), expect_a);
    assert_eq!(r.chunk_refs(&p("/b")).await.unwrap(), expect_b);
}
