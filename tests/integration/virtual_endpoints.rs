//! A hostile repository cannot steer S3 virtual chunk reads (floe issue 31, the two
//! authorization holes the README listed): S3 redirects are never followed, an
//! endpoint (or region) only the repository's configuration names is never
//! contacted, so the reader's credentials only go to the endpoint the reader chose,
//! and per-prefix credentials sign exactly the reads of their prefix.
//!
//! Every test runs two local HTTP servers standing in for S3 endpoints (path-style
//! requests `/<bucket>/<key>`): `good`, the reader's endpoint, and `evil`, the one a
//! hostile repository names. Each records the requests it receives, with their
//! `Authorization` header (a SigV4 signature names the access key id).

use std::sync::Arc;
use std::time::Duration;

use crate::common::http::{content, not_found, server, Server};
use crate::common::{array_def, p};
use bytes::Bytes;
use floe::error::VirtualChunkError;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::storage::{LocalStorage, S3Options};
use floe::virtual_refs::{ContainerCredentials, VirtualAccess, VirtualChunkResolver};
use floe::{Error, OpenOptions, Repository};

const DATA: &[u8] = b"0123456789abcdefGOODDATA--------";
const SECRET: &[u8] = b"SECRET-FROM-ELSEWHERE-----------";

/// `good` serves `DATA` at `/bucket/data/x.bin` and `/other/data/x.bin`, redirects
/// `/bucket/data/to-evil` to the same key on `evil` and `/bucket/data/inside` to
/// `/bucket/data/x.bin` on itself; `evil` serves `SECRET` for everything.
async fn servers() -> (Server, Server) {
    let evil = server(Arc::new(|m, _, r| content(m, SECRET, r))).await;
    let evil_addr = evil.addr;
    let good = server(Arc::new(move |m, path, r| match path {
        "/bucket/data/x.bin" | "/other/data/x.bin" => content(m, DATA, r),
        "/bucket/data/to-evil" => redirect307(&format!("http://{evil_addr}/bucket/data/x.bin")),
        "/bucket/data/inside" => redirect307("/bucket/data/x.bin"),
        _ => not_found(),
    }))
    .await;
    (good, evil)
}

/// A `307 Temporary Redirect` to `location` (what S3 answers for a bucket in another
/// region, and what a hostile endpoint would answer).
fn redirect307(location: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    )
    .into_bytes()
}

/// An S3 container for `prefix` with `endpoint` (plain HTTP, path-style).
fn s3_container(
    prefix: &str,
    endpoint: Option<String>,
    region: Option<&str>,
) -> VirtualChunkContainer {
    VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store: ContainerStore::S3 {
            compatible: true,
            region: region.map(str::to_string),
            endpoint_url: endpoint,
            anonymous: false,
            allow_http: true,
            force_path_style: true,
        },
    }
}

/// The reader's own S3 options: endpoint `endpoint`, the key `READERKEY`, never the
/// environment's.
fn reader_s3(endpoint: &Server) -> S3Options {
    S3Options {
        endpoint: Some(format!("http://{}", endpoint.addr)),
        region: Some("us-east-1".into()),
        access_key_id: Some("READERKEY".into()),
        secret_access_key: Some("reader-secret".into()),
        allow_http: true,
        force_path_style: true,
        ..S3Options::default()
    }
}

fn static_key(id: &str) -> ContainerCredentials {
    ContainerCredentials::S3Static {
        access_key_id: id.into(),
        secret_access_key: format!("{id}-secret"),
        session_token: None,
    }
}

/// Reads bytes 0..16 of `url`, bounded so that a hanging client fails the test.
async fn read16(r: &VirtualChunkResolver, url: &str) -> Result<Bytes, VirtualChunkError> {
    let range = 0..16;
    let read = r.fetch_ranges(url, None, std::slice::from_ref(&range));
    let mut parts = tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the read took more than 30 s")?;
    Ok(parts.pop().unwrap())
}

/// The access key ids of the signed requests `server` received (`None` for an
/// unsigned one), in arrival order.
fn signers(server: &Server) -> Vec<Option<String>> {
    server
        .gets()
        .into_iter()
        .map(|h| {
            h.authorization.map(|a| {
                let start = a.find("Credential=").expect("a SigV4 signature") + 11;
                a[start..].split('/').next().unwrap().to_string()
            })
        })
        .collect()
}

#[tokio::test]
async fn s3_redirects_are_never_followed() {
    let (good, evil) = servers().await;
    let access = VirtualAccess::prefixes(["s3://bucket/data/"]).unwrap();
    let r = VirtualChunkResolver::new(
        vec![s3_container("s3://bucket/", None, None)],
        access,
        Some(reader_s3(&good)),
    );
    assert_eq!(
        read16(&r, "s3://bucket/data/x.bin").await.unwrap(),
        &DATA[..16]
    );
    for key in ["to-evil", "inside"] {
        match read16(&r, &format!("s3://bucket/data/{key}")).await {
            Err(VirtualChunkError::RedirectRefused { location, .. }) => {
                assert!(location.ends_with("/bucket/data/x.bin"), "{location}")
            }
            other => panic!("{key}: expected RedirectRefused, got {other:?}"),
        }
    }
    assert!(evil.hits().is_empty(), "the redirect target was contacted");
    // One request per refused redirect: not retried, not followed.
    assert_eq!(good.gets().len(), 3);
}

#[tokio::test]
async fn a_repository_endpoint_is_not_sent_the_readers_credentials() {
    let (good, evil) = servers().await;
    let evil_endpoint = format!("http://{}", evil.addr);
    let access = VirtualAccess::prefixes(["s3://bucket/data/"]).unwrap();
    // Every kind of credential the reader may hold: its S3 options (or environment),
    // per-prefix static keys, refreshable keys, the environment, anonymous.
    let per_prefix: Vec<Option<ContainerCredentials>> = vec![
        None,
        Some(static_key("PREFIXKEY")),
        Some(ContainerCredentials::S3FromEnv),
        Some(ContainerCredentials::S3Anonymous),
    ];
    for cred in per_prefix {
        let what = format!("{cred:?}");
        let r = VirtualChunkResolver::new(
            vec![s3_container(
                "s3://bucket/",
                Some(evil_endpoint.clone()),
                None,
            )],
            access.clone(),
            Some(reader_s3(&good)),
        )
        .with_credentials(
            cred.into_iter()
                .map(|c| ("s3://bucket/".to_string(), c))
                .collect(),
        );
        match read16(&r, "s3://bucket/data/x.bin").await {
            Err(VirtualChunkError::UntrustedEndpoint {
                endpoint,
                container,
            }) => {
                assert!(endpoint.contains(&evil_endpoint), "{what}: {endpoint}");
                assert_eq!(container, "s3://bucket/");
            }
            other => panic!("{what}: expected UntrustedEndpoint, got {other:?}"),
        }
    }
    // The reader without an endpoint of its own (AWS) is no different.
    let r = VirtualChunkResolver::new(
        vec![s3_container(
            "s3://bucket/",
            Some(evil_endpoint.clone()),
            None,
        )],
        access.clone(),
        Some(S3Options {
            endpoint: None,
            ..reader_s3(&good)
        }),
    );
    assert!(matches!(
        read16(&r, "s3://bucket/data/x.bin").await,
        Err(VirtualChunkError::UntrustedEndpoint { .. })
    ));
    assert!(
        evil.hits().is_empty(),
        "the repository's endpoint was contacted"
    );
    assert!(good.hits().is_empty());
}

#[tokio::test]
async fn a_repository_region_cannot_name_a_host() {
    let (good, evil) = servers().await;
    let access = VirtualAccess::prefixes(["s3://bucket/"]).unwrap();
    for region in [format!("x.{}/", evil.addr), "a.b".into(), "".into()] {
        let r = VirtualChunkResolver::new(
            vec![s3_container("s3://bucket/", None, Some(&region))],
            access.clone(),
            Some(S3Options {
                endpoint: None,
                ..reader_s3(&good)
            }),
        );
        match read16(&r, "s3://bucket/data/x.bin").await {
            Err(VirtualChunkError::UntrustedEndpoint { endpoint, .. }) => {
                assert!(endpoint.contains("region"), "{endpoint}")
            }
            other => panic!("region {region:?}: expected UntrustedEndpoint, got {other:?}"),
        }
    }
    // A plain region from the repository is used with the reader's endpoint.
    let r = VirtualChunkResolver::new(
        vec![s3_container("s3://bucket/", None, Some("eu-west-3"))],
        access,
        Some(reader_s3(&good)),
    );
    assert_eq!(
        read16(&r, "s3://bucket/data/x.bin").await.unwrap(),
        &DATA[..16]
    );
    assert!(evil.hits().is_empty());
    let auth = good.gets()[0].authorization.clone().unwrap();
    assert!(auth.contains("/eu-west-3/s3/"), "{auth}");
}

#[tokio::test]
async fn the_repository_may_name_the_readers_own_endpoint() {
    let (good, evil) = servers().await;
    let access = VirtualAccess::prefixes(["s3://bucket/"]).unwrap();
    // Same endpoint, written differently (trailing slash, upper case host).
    let same = format!("HTTP://{}/", good.addr);
    let r = VirtualChunkResolver::new(
        vec![s3_container("s3://bucket/", Some(same), None)],
        access,
        Some(reader_s3(&good)),
    );
    assert_eq!(
        read16(&r, "s3://bucket/data/x.bin").await.unwrap(),
        &DATA[..16]
    );
    assert_eq!(signers(&good), vec![Some("READERKEY".to_string())]);
    assert!(evil.hits().is_empty());
}

#[tokio::test]
async fn credentials_sign_the_reads_of_their_prefix_only() {
    let (good, evil) = servers().await;
    let access = VirtualAccess::prefixes(["s3://bucket/", "s3://other/"]).unwrap();
    let r = VirtualChunkResolver::new(
        vec![
            s3_container("s3://bucket/", None, None),
            s3_container("s3://other/", None, None),
        ],
        access,
        Some(reader_s3(&good)),
    )
    .with_credentials(vec![
        ("s3://bucket/".into(), static_key("KEYONE")),
        // The longer prefix wins for what it covers.
        ("s3://bucket/data/".into(), static_key("KEYTWO")),
        ("s3://other".into(), ContainerCredentials::S3Anonymous),
    ]);
    for url in [
        "s3://bucket/data/x.bin",
        "s3://other/data/x.bin",
        "s3://bucket/data/x.bin",
    ] {
        assert_eq!(read16(&r, url).await.unwrap(), &DATA[..16], "{url}");
    }
    assert_eq!(
        signers(&good),
        vec![Some("KEYTWO".to_string()), None, Some("KEYTWO".to_string())]
    );
    // Credentials of another store kind are refused before any request.
    let wrong = VirtualChunkResolver::new(
        vec![s3_container("s3://bucket/", None, None)],
        VirtualAccess::prefixes(["s3://bucket/"]).unwrap(),
        Some(reader_s3(&good)),
    )
    .with_credentials(vec![(
        "s3://bucket/".into(),
        ContainerCredentials::HttpAccess,
    )]);
    assert!(matches!(
        read16(&wrong, "s3://bucket/data/x.bin").await,
        Err(VirtualChunkError::InvalidCredentials { .. })
    ));
    assert_eq!(good.gets().len(), 3);
    assert!(evil.hits().is_empty());
}

/// The repository's configuration names `evil` for `s3://bucket/`; the reader opens
/// it giving its own container for that prefix (endpoint `good`): the reader's wins,
/// and reads carry the reader's key to `good` only. Without it, the read is refused.
#[tokio::test]
async fn the_readers_container_wins_over_the_repositorys() {
    let (good, evil) = servers().await;
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(s3_container(
        "s3://bucket/",
        Some(format!("http://{}", evil.addr)),
        None,
    ));
    Repository::create(storage.clone(), Some(config))
        .await
        .unwrap();
    let access = VirtualAccess::prefixes(["s3://bucket/data/"]).unwrap();
    let reader_opts = || {
        OpenOptions::default()
            .virtual_access(access.clone())
            .virtual_s3_credentials(Some(S3Options {
                endpoint: None,
                ..reader_s3(&good)
            }))
    };
    let opened = |opts: OpenOptions| {
        let storage = storage.clone();
        async move {
            let repo = Repository::open_with(storage, opts).await.unwrap();
            let s = repo.writable_session("main").await.unwrap();
            s.add_array(&p("/v"), array_def("/v", &[16], &[16], "uint8"))
                .unwrap();
            s.set_chunk_ref(
                &p("/v"),
                &[0],
                Some(ChunkPayload::Virtual(VirtualChunkRef {
                    location: "s3://bucket/data/x.bin".into(),
                    offset: 0,
                    length: 16,
                    checksum: None,
                })),
            )
            .unwrap();
            s.get_chunk(&p("/v"), &[0], None).await
        }
    };
    match opened(reader_opts()).await {
        Err(Error::VirtualChunk { source, .. }) => {
            assert!(
                matches!(source, VirtualChunkError::UntrustedEndpoint { .. }),
                "{source:?}"
            )
        }
        other => panic!("expected UntrustedEndpoint, got {other:?}"),
    }
    let mine = reader_opts().virtual_containers(vec![s3_container(
        "s3://bucket",
        Some(format!("http://{}", good.addr)),
        None,
    )]);
    let got = opened(mine).await.unwrap();
    assert_eq!(&got.unwrap()[..], &DATA[..16]);
    assert_eq!(signers(&good), vec![Some("READERKEY".to_string())]);
    assert!(
        evil.hits().is_empty(),
        "the repository's endpoint was contacted"
    );
}

/// `vcc://name/path` locations (Icechunk 2.x) read through the container named
/// `name`; the expanded URL is what is authorized, so `..` cannot leave it, and an
/// unknown name is no container.
#[tokio::test]
async fn vcc_locations_expand_to_their_named_container() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("data")).unwrap();
    std::fs::write(root.join("data/x.bin"), DATA).unwrap();
    std::fs::write(root.join("secret.bin"), SECRET).unwrap();
    let prefix = format!("file://{}/data", root.display());
    let container = VirtualChunkContainer {
        name: Some("mydata".into()),
        url_prefix: prefix.clone(),
        store: ContainerStore::LocalFileSystem(root.join("data").display().to_string()),
    };
    let wide = VirtualChunkContainer {
        name: Some("root".into()),
        url_prefix: format!("file://{}/", root.display()),
        store: ContainerStore::LocalFileSystem(root.display().to_string()),
    };
    let access = VirtualAccess::prefixes([format!("{prefix}/")]).unwrap();
    let r = VirtualChunkResolver::new(vec![container, wide], access, None);
    assert_eq!(
        r.expand_location("vcc://mydata/x.bin").unwrap(),
        format!("{prefix}/x.bin")
    );
    assert_eq!(r.expand_location("s3://b/k").unwrap(), "s3://b/k");
    assert_eq!(read16(&r, "vcc://mydata/x.bin").await.unwrap(), &DATA[..16]);
    assert_eq!(
        read16(&r, "vcc://mydata/sub/../x.bin").await.unwrap(),
        &DATA[..16]
    );
    for escape in ["vcc://mydata/../secret.bin", "vcc://root/secret.bin"] {
        assert!(
            matches!(
                read16(&r, escape).await,
                Err(VirtualChunkError::Unauthorized { .. })
            ),
            "{escape}"
        );
    }
    for unknown in ["vcc://nope/x.bin", "vcc://mydata", "vcc:///x.bin"] {
        assert!(
            matches!(
                read16(&r, unknown).await,
                Err(VirtualChunkError::NoContainer { .. })
            ),
            "{unknown}"
        );
    }
}
