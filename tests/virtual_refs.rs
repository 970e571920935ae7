//! Virtual chunk refs at the session level: containers from config.yaml, the caller's
//! authorization, URL normalization, checksums, missing sources and short reads.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{array_def, p};
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
