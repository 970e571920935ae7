//! Virtual chunks in Google Cloud Storage and Azure Blob Storage containers (floe
//! issue 31), on the local emulators CI runs (.ci/cloud_emulators.sh): a file is put
//! in the emulator's bucket or container, virtual refs into it are committed, and
//! the repository, reopened with the prefix authorized and the reader's credentials,
//! reads the values back; unauthorized prefixes, endpoints and settings only the
//! repository names, mismatched credentials and a changed file are typed errors.
//!
//! Azure runs on Azurite directly. gcp-storage-emulator answers ranged `GET`s but no
//! `ETag` or `Last-Modified` header, which object_store's GCS client requires of
//! every response (real GCS always sends both): the GCS test reads through a
//! forwarding proxy that adds those two headers to the emulator's answers and
//! records the requests. Everything else (the bytes, ranges, paths, statuses) is the
//! emulator's.
//!
//! Needs `FLOE_TEST_AZURE_CONTAINER` (with `AZURITE_BLOB_STORAGE_URL` and the
//! `AZURE_STORAGE_*` variables) and `FLOE_TEST_GCS_BUCKET` (with
//! `STORAGE_EMULATOR_HOST`); skipped without them, except in CI (`CI=true`), where
//! that is a failure.

use crate::common;
use std::io::{Read, Write};
use std::sync::Arc;

use crate::common::http::{server, Server};
use crate::common::{array_def, p};
use bytes::Bytes;
use floe::error::VirtualChunkError;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use floe::storage::{AzureCredentials, GcsCredentials, LocalStorage};
use floe::virtual_refs::{ContainerCredentials, VirtualAccess};
use floe::{Error, OpenOptions, Repository, VersionSelector};
use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload};

/// The object put in the emulator: three 8-byte values at offsets 0, 16 and 32.
const FILE: &[u8] = b"value-A-........value-B-........value-C-";
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn unique(test: &str) -> String {
    format!("{test}-{:016x}", rand::random::<u64>())
}

fn virtual_ref(location: &str, offset: u64, checksum: Option<Checksum>) -> ChunkPayload {
    ChunkPayload::Virtual(VirtualChunkRef {
        location: location.to_string(),
        offset,
        length: 8,
        checksum,
    })
}

/// A repository in `dir` whose configuration lists `containers`, with array `/v`
/// (3 chunks of 8 bytes) whose chunks are `refs`, committed.
async fn repository_with_refs(
    dir: &tempfile::TempDir,
    containers: Vec<VirtualChunkContainer>,
    refs: Vec<ChunkPayload>,
) -> Arc<LocalStorage> {
    let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let mut config = RepositoryConfig::default();
    for c in containers {
        config.set_virtual_chunk_container(c);
    }
    let repo = Repository::create(storage.clone(), Some(config))
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/v"), array_def("/v", &[24], &[8], "uint8"))
        .unwrap();
    for (i, r) in refs.into_iter().enumerate() {
        s.set_chunk_ref(&p("/v"), &[i as u64], Some(r)).unwrap();
    }
    s.commit("virtual refs").await.unwrap();
    storage
}

/// Every chunk of `/v` on `main`, read together (the batched, coalescing path).
async fn read_all(repo: &Repository) -> Vec<Result<Option<Bytes>, Error>> {
    let s = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let chunks = (0..3).map(|i| (p("/v"), vec![i])).collect();
    let mut out: Vec<_> = s.get_chunks(chunks, 4).collect().await;
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// The virtual chunk error of a failed read.
fn virtual_error(r: &Result<Option<Bytes>, Error>) -> &VirtualChunkError {
    match r {
        Err(Error::VirtualChunk { source, .. }) => source,
        other => panic!("expected a virtual chunk error, got {other:?}"),
    }
}

fn values(reads: Vec<Result<Option<Bytes>, Error>>) -> Vec<Bytes> {
    reads.into_iter().map(|r| r.unwrap().unwrap()).collect()
}

fn expected() -> Vec<Bytes> {
    [&FILE[0..8], &FILE[16..24], &FILE[32..40]]
        .into_iter()
        .map(Bytes::copy_from_slice)
        .collect()
}

fn azure_container(prefix: &str, opts: &[(&str, &str)]) -> VirtualChunkContainer {
    VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store: ContainerStore::Azure(
            opts.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azure_virtual_chunks_read_back_from_azurite() {
    let Some(container) = common::require(
        env("FLOE_TEST_AZURE_CONTAINER"),
        "FLOE_TEST_AZURE_CONTAINER",
    ) else {
        return;
    };
    let account = env("AZURE_STORAGE_ACCOUNT_NAME").unwrap_or_else(|| "devstoreaccount1".into());
    let dir_name = unique("virtual");
    // The file, put with object_store's own Azure client (the emulator's account).
    let az = object_store::azure::MicrosoftAzureBuilder::from_env()
        .with_container_name(&container)
        .build()
        .unwrap();
    let key = object_store::path::Path::from(format!("{dir_name}/file.bin"));
    az.put(&key, PutPayload::from_static(FILE)).await.unwrap();
    let etag = az.head(&key).await.unwrap().e_tag.unwrap();
    let location = format!("az://{container}/{dir_name}/file.bin");

    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("az://{container}/");
    let storage = repository_with_refs(
        &dir,
        vec![azure_container(
            &prefix,
            &[
                ("account", &account),
                ("azure_storage_use_emulator", "true"),
            ],
        )],
        vec![
            virtual_ref(&location, 0, Some(Checksum::ETag(etag.clone()))),
            virtual_ref(&location, 16, None),
            virtual_ref(&location, 32, None),
        ],
    )
    .await;
    let authorized = format!("az://{container}/{dir_name}/");
    let reader = |credentials: Option<ContainerCredentials>| {
        let mut opts = OpenOptions::default()
            .virtual_access(VirtualAccess::prefixes([authorized.as_str()]).unwrap());
        if let Some(c) = credentials {
            opts = opts.virtual_credentials(vec![(authorized.clone(), c)]);
        }
        opts
    };
    let key_credentials =
        || ContainerCredentials::Azure(AzureCredentials::AccessKey(AZURITE_KEY.into()));

    // Signed with the reader's account key: every value, the first under its ETag.
    let repo = Repository::open_with(storage.clone(), reader(Some(key_credentials())))
        .await
        .unwrap();
    assert_eq!(values(read_all(&repo).await), expected());

    // Anonymous (authorized without a credential): Azurite's container is private.
    let repo = Repository::open_with(storage.clone(), reader(None))
        .await
        .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[1]),
            VirtualChunkError::AccessDenied { .. }
        ),
        "{:?}",
        reads[1]
    );

    // S3 credentials for an Azure container.
    let repo = Repository::open_with(
        storage.clone(),
        reader(Some(ContainerCredentials::S3Anonymous)),
    )
    .await
    .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[0]),
            VirtualChunkError::InvalidCredentials { .. }
        ),
        "{:?}",
        reads[0]
    );

    // Another prefix of the same container is not authorized.
    let repo = Repository::open_with(
        storage.clone(),
        OpenOptions::default()
            .virtual_access(
                VirtualAccess::prefixes([format!("az://{container}/elsewhere/")]).unwrap(),
            )
            .virtual_credentials(vec![(
                format!("az://{container}/elsewhere/"),
                key_credentials(),
            )]),
    )
    .await
    .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[0]),
            VirtualChunkError::Unauthorized { .. }
        ),
        "{:?}",
        reads[0]
    );

    // The file changes: the ETag-pinned chunk fails, the others still read.
    az.put(
        &key,
        PutPayload::from_static(b"VALUE-A-........value-B-........value-C-"),
    )
    .await
    .unwrap();
    let repo = Repository::open_with(storage.clone(), reader(Some(key_credentials())))
        .await
        .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[0]),
            VirtualChunkError::ChecksumMismatch { .. }
        ),
        "{:?}",
        reads[0]
    );
    assert_eq!(
        &reads[2].as_ref().unwrap().as_ref().unwrap()[..],
        &FILE[32..40]
    );
}

/// A repository's Azure container naming an endpoint, or an account with the
/// reader's key, that the reader did not choose is refused before any request; the
/// reader's own container of the same prefix wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azure_settings_only_the_repository_names_are_refused() {
    let Some(container) = common::require(
        env("FLOE_TEST_AZURE_CONTAINER"),
        "FLOE_TEST_AZURE_CONTAINER",
    ) else {
        return;
    };
    let evil = server(Arc::new(|_, _, _| common::http::not_found())).await;
    let location = format!("az://{container}/x/file.bin");
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("az://{container}/");
    let storage = repository_with_refs(
        &dir,
        vec![azure_container(
            &prefix,
            &[
                ("account", "devstoreaccount1"),
                (
                    "azure_storage_endpoint",
                    &format!("http://{}/devstoreaccount1", evil.addr),
                ),
            ],
        )],
        vec![virtual_ref(&location, 0, None)],
    )
    .await;
    let opts = || {
        OpenOptions::default()
            .virtual_access(VirtualAccess::prefixes([prefix.as_str()]).unwrap())
            .virtual_credentials(vec![(
                prefix.clone(),
                ContainerCredentials::Azure(AzureCredentials::AccessKey(AZURITE_KEY.into())),
            )])
    };
    let repo = Repository::open_with(storage.clone(), opts())
        .await
        .unwrap();
    let reads = read_all(&repo).await;
    match virtual_error(&reads[0]) {
        VirtualChunkError::UntrustedEndpoint { endpoint, .. } => {
            assert!(endpoint.contains(&evil.addr.to_string()), "{endpoint}")
        }
        other => panic!("expected UntrustedEndpoint, got {other:?}"),
    }
    assert!(
        evil.hits().is_empty(),
        "the repository's endpoint was contacted"
    );

    // The reader gives the container itself (Azurite, from its environment): read.
    let az = object_store::azure::MicrosoftAzureBuilder::from_env()
        .with_container_name(&container)
        .build()
        .unwrap();
    az.put(
        &object_store::path::Path::from("x/file.bin"),
        PutPayload::from_static(FILE),
    )
    .await
    .unwrap();
    let mine = azure_container(
        &prefix,
        &[
            ("account", "devstoreaccount1"),
            ("azure_storage_use_emulator", "true"),
        ],
    );
    let repo = Repository::open_with(storage.clone(), opts().virtual_containers(vec![mine]))
        .await
        .unwrap();
    let reads = read_all(&repo).await;
    assert_eq!(
        &reads[0].as_ref().unwrap().as_ref().unwrap()[..],
        &FILE[..8]
    );
    assert!(
        evil.hits().is_empty(),
        "the repository's endpoint was contacted"
    );
}

/// A proxy in front of gcp-storage-emulator (`emulator`: `http://host:port`) adding
/// the `ETag` and `Last-Modified` headers the emulator leaves out (see the module
/// documentation), and decoding the percent-encoded object path object_store sends
/// (`/bucket/a%2Fb`, which GCS decodes and the emulator's routes do not); it records
/// every request.
async fn etag_proxy(emulator: &str) -> Server {
    let host = emulator
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    server(Arc::new(move |method, path, range| {
        let path = decoded(path);
        let mut sock = std::net::TcpStream::connect(&host).unwrap();
        let range = range
            .map(|(a, b)| format!("Range: bytes={a}-{b}\r\n"))
            .unwrap_or_default();
        write!(
            sock,
            "{method} {path} HTTP/1.0\r\nHost: {host}\r\n{range}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = Vec::new();
        sock.read_to_end(&mut answer).unwrap();
        let Some(eol) = answer.windows(2).position(|w| w == b"\r\n") else {
            return answer;
        };
        let mut out = answer[..eol + 2].to_vec();
        out.extend_from_slice(
            b"ETag: \"emulator-object\"\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n",
        );
        out.extend_from_slice(&answer[eol + 2..]);
        out
    }))
    .await
}

/// `path` percent-decoded.
fn decoded(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .unwrap()
        .into_owned()
}

fn gcs_container(prefix: &str, opts: &[(&str, &str)]) -> VirtualChunkContainer {
    VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store: ContainerStore::Gcs(
            opts.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcs_virtual_chunks_read_back_from_the_emulator() {
    let Some(bucket) = common::require(env("FLOE_TEST_GCS_BUCKET"), "FLOE_TEST_GCS_BUCKET") else {
        return;
    };
    let emulator = env("STORAGE_EMULATOR_HOST").expect("STORAGE_EMULATOR_HOST");
    let emulator = if emulator.contains("://") {
        emulator
    } else {
        format!("http://{emulator}")
    };
    let dir_name = unique("virtual");
    // The file, put with the emulator's XML API (a plain PUT).
    let put = crate::common::http_client()
        .put(format!("{emulator}/{bucket}/{dir_name}/file.bin"))
        .body(FILE)
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let proxy = etag_proxy(&emulator).await;
    let proxy_url = format!("http://{}", proxy.addr);
    let location = format!("gs://{bucket}/{dir_name}/file.bin");

    // The repository names the proxy as its base URL: not the reader's choice.
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("gs://{bucket}/");
    let storage = repository_with_refs(
        &dir,
        vec![gcs_container(&prefix, &[("google_base_url", &proxy_url)])],
        vec![
            virtual_ref(&location, 0, None),
            virtual_ref(&location, 16, None),
            virtual_ref(&location, 32, None),
        ],
    )
    .await;
    let authorized = format!("gs://{bucket}/{dir_name}/");
    let reader = || {
        OpenOptions::default()
            .virtual_access(VirtualAccess::prefixes([authorized.as_str()]).unwrap())
            .virtual_credentials(vec![(
                authorized.clone(),
                ContainerCredentials::Gcs(GcsCredentials::Anonymous),
            )])
    };
    let repo = Repository::open_with(storage.clone(), reader())
        .await
        .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[0]),
            VirtualChunkError::UntrustedEndpoint { .. }
        ),
        "{:?}",
        reads[0]
    );
    assert!(
        proxy.hits().is_empty(),
        "the repository's base URL was contacted"
    );

    // The reader's own container with that base URL: every value, in one ranged
    // request (the three chunks are 8 bytes apart in one object).
    let mine = gcs_container(&prefix, &[("google_base_url", &proxy_url)]);
    let repo = Repository::open_with(
        storage.clone(),
        reader().virtual_containers(vec![mine.clone()]),
    )
    .await
    .unwrap();
    assert_eq!(values(read_all(&repo).await), expected());
    let gets = proxy.gets();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert_eq!(
        decoded(&gets[0].path),
        format!("/{bucket}/{dir_name}/file.bin")
    );
    assert_eq!(gets[0].range, Some((0, 39)));

    // Another prefix of the bucket is not authorized: nothing is requested.
    proxy.clear();
    let elsewhere = format!("gs://{bucket}/elsewhere/");
    let repo = Repository::open_with(
        storage.clone(),
        OpenOptions::default()
            .virtual_access(VirtualAccess::prefixes([elsewhere.as_str()]).unwrap())
            .virtual_containers(vec![mine.clone()]),
    )
    .await
    .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[0]),
            VirtualChunkError::Unauthorized { .. }
        ),
        "{:?}",
        reads[0]
    );
    // Azure credentials for a GCS container.
    let repo = Repository::open_with(
        storage.clone(),
        OpenOptions::default()
            .virtual_access(VirtualAccess::prefixes([authorized.as_str()]).unwrap())
            .virtual_credentials(vec![(
                authorized.clone(),
                ContainerCredentials::Azure(AzureCredentials::Anonymous),
            )])
            .virtual_containers(vec![mine]),
    )
    .await
    .unwrap();
    let reads = read_all(&repo).await;
    assert!(
        matches!(
            virtual_error(&reads[0]),
            VirtualChunkError::InvalidCredentials { .. }
        ),
        "{:?}",
        reads[0]
    );
    assert!(proxy.hits().is_empty(), "{:?}", proxy.hits());

    // A credential option only the repository names (a service account file on the
    // reader's disk) is refused too.
    let dir2 = tempfile::tempdir().unwrap();
    let storage2 = repository_with_refs(
        &dir2,
        vec![gcs_container(
            &prefix,
            &[("google_service_account", "/root/.config/gcloud/key.json")],
        )],
        vec![virtual_ref(&location, 0, None)],
    )
    .await;
    let repo = Repository::open_with(storage2, reader()).await.unwrap();
    match virtual_error(&read_all(&repo).await[0]) {
        VirtualChunkError::UntrustedEndpoint { endpoint, .. } => {
            assert!(endpoint.contains("google_service_account"), "{endpoint}")
        }
        other => panic!("expected UntrustedEndpoint, got {other:?}"),
    }
}

/// Runs `floe cat REPO /v` reading through the reader's own container `container`
/// (`--virtual-container`, credentials from the environment) in an environment that
/// names no cloud credential, emulator or metadata server, with a home directory
/// holding no gcloud file; the metadata server's fallback address (`GCE_METADATA_IP`)
/// points at `metadata`, a local server that records what reaches it. Returns the
/// output and how long the command took.
fn cat_without_credentials(
    repo: &std::path::Path,
    container: &str,
    metadata: &Server,
) -> (std::process::Output, std::time::Duration) {
    let home = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["cat", &repo.display().to_string(), "/v"])
        .args(["--virtual-container", container])
        .args(["--virtual-read-deadline", "20"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("GCE_METADATA_IP", metadata.addr.to_string())
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// A `gs://` or `az://` container read with credentials from an environment that has
/// none fails at once with an error naming the missing credentials: no wait on a
/// metadata server (Compute Engine's, Azure's managed identity endpoint) the machine
/// does not have, and no request anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_without_credentials_fail_at_once_without_a_metadata_server() {
    let store = server(Arc::new(|_, _, _| common::http::not_found())).await;
    let metadata = server(Arc::new(|_, _, _| common::http::not_found())).await;
    for (prefix, setting) in [
        ("gs://bucket/", format!("http://{}", store.addr)),
        ("az://container/", "account".to_string()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        repository_with_refs(
            &dir,
            vec![],
            vec![virtual_ref(&format!("{prefix}file.bin"), 0, None)],
        )
        .await;
        let container = format!("{prefix}={setting}");
        let (out, took) = tokio::task::block_in_place(|| {
            cat_without_credentials(dir.path(), &container, &metadata)
        });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{prefix}: read without credentials");
        assert!(
            stderr.contains("credentials") && stderr.contains("anonymous"),
            "{prefix}: the error should name the missing credentials: {stderr}"
        );
        assert!(
            took < std::time::Duration::from_secs(10),
            "{prefix}: took {took:?} (a wait on a metadata server?): {stderr}"
        );
        assert!(
            metadata.hits().is_empty() && store.hits().is_empty(),
            "{prefix}: requests were made: metadata {:?}, store {:?}",
            metadata.hits(),
            store.hits()
        );
    }
}
