//! Virtual chunk reads stay inside the prefixes the reader authorized (floe issue 9,
//! "Hardening", section 2): a repository's writer cannot make a reader disclose local
//! files or hosts outside them through `..` in plain paths, symbolic links, HTTP
//! redirects, percent-encoding, backslashes, `file://host/`, userinfo, ports or case.
//!
//! Every escape test plants a secret outside the authorized prefix and checks both
//! that the read fails with a typed [`VirtualChunkError`] and that the secret was not
//! returned. The HTTP tests run two tiny HTTP/1.1 servers on 127.0.0.1 (one authorized,
//! one the escape target) that stop with the test.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common::http::{content, not_found, redirect, server, Server};
use crate::common::{array_def, p};
use bytes::Bytes;
use floe::error::VirtualChunkError;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::{Error, OpenOptions, Repository};

const SECRET: &[u8] = b"top secret, never disclose";

/// The bytes of every authorized source: 0, 1, ..., 255, 0, 1, ... (1024 bytes).
fn pattern() -> Vec<u8> {
    (0..1024u32).map(|i| i as u8).collect()
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// A temporary directory:
///
/// ```text
/// root/data/source.bin            the pattern (authorized)
/// root/data/inner_link.bin     -> root/data/source.bin
/// root/data/escape_link.bin    -> root/secret.txt
/// root/data/escape_dir         -> root/outside
/// root/data/dangling.bin       -> root/not-yet
/// root/database/x.bin             the secret (shares the `data` text prefix)
/// root/outside/secret.txt         the secret
/// root/secret.txt                 the secret
/// root/alias                   -> root/data
/// root/repo/                      a repository whose containers are `extra_containers`
///                                 plus one local container for all of `root/`
/// ```
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
    repo: PathBuf,
}

async fn fixture(extra_containers: Vec<VirtualChunkContainer>) -> Fixture {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    // The fixture's own paths are canonical, so that URLs built from them are exact.
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(root.join("database")).unwrap();
    std::fs::create_dir_all(root.join("outside")).unwrap();
    std::fs::write(data.join("source.bin"), pattern()).unwrap();
    std::fs::write(root.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("outside/secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("database/x.bin"), SECRET).unwrap();
    symlink(data.join("source.bin"), data.join("inner_link.bin")).unwrap();
    symlink(root.join("secret.txt"), data.join("escape_link.bin")).unwrap();
    symlink(root.join("outside"), data.join("escape_dir")).unwrap();
    symlink(root.join("not-yet"), data.join("dangling.bin")).unwrap();
    symlink(&data, root.join("alias")).unwrap();
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: format!("{}/", file_url(&root)),
        store: ContainerStore::LocalFileSystem(format!("{}/", root.display())),
    });
    for c in extra_containers {
        config.set_virtual_chunk_container(c);
    }
    let repo = root.join("repo");
    let r = Repository::create(Arc::new(LocalStorage::new(&repo).unwrap()), Some(config))
        .await
        .unwrap();
    let s = r.writable_session("main").await.unwrap();
    s.add_array(&p("/v"), array_def("/v", &[1], &[1], "uint8"))
        .unwrap();
    s.commit("array").await.unwrap();
    Fixture {
        _dir: dir,
        root,
        data,
        repo,
    }
}

/// Opens the fixture's repository authorizing `prefixes`, points chunk 0 of `/v` at
/// `location` (bytes 0..length) and reads it.
async fn read(
    f: &Fixture,
    prefixes: &[String],
    location: &str,
    length: u64,
) -> Result<Bytes, VirtualChunkError> {
    let opts = OpenOptions::default().virtual_access(VirtualAccess::prefixes(prefixes).unwrap());
    let repo = Repository::open_with(Arc::new(LocalStorage::new(&f.repo).unwrap()), opts)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[0],
        Some(ChunkPayload::Virtual(VirtualChunkRef {
            location: location.to_string(),
            offset: 0,
            length,
            checksum: None,
        })),
    )
    .unwrap();
    match s.get_chunk(&p("/v"), &[0], None).await {
        Ok(b) => Ok(b.expect("a virtual ref always yields bytes")),
        Err(Error::VirtualChunk { source, .. }) => Err(source),
        Err(other) => panic!("expected a virtual chunk error, got {other}"),
    }
}

/// The authorized prefix used by most tests: `root/data/`.
fn data_prefix(f: &Fixture) -> Vec<String> {
    vec![format!("{}/", file_url(&f.data))]
}

/// Asserts that a read was refused as unauthorized (and did not return the secret).
fn assert_unauthorized(res: Result<Bytes, VirtualChunkError>, what: &str) {
    match res {
        Err(VirtualChunkError::Unauthorized { .. }) => {}
        Ok(b) => panic!(
            "{what}: read succeeded and disclosed {:?}",
            String::from_utf8_lossy(&b)
        ),
        Err(e) => panic!("{what}: expected Unauthorized, got {e:?}"),
    }
}

/// Asserts that a read was refused as an invalid URL (and did not return the secret).
fn assert_invalid(res: Result<Bytes, VirtualChunkError>, what: &str) {
    match res {
        Err(VirtualChunkError::InvalidUrl { .. }) => {}
        Ok(b) => panic!(
            "{what}: read succeeded and disclosed {:?}",
            String::from_utf8_lossy(&b)
        ),
        Err(e) => panic!("{what}: expected InvalidUrl, got {e:?}"),
    }
}

#[tokio::test]
async fn authorized_local_reads_still_work() {
    let f = fixture(vec![]).await;
    let all = pattern();
    let url = file_url(&f.data.join("source.bin"));
    assert_eq!(
        read(&f, &data_prefix(&f), &url, 16).await.unwrap(),
        &all[..16]
    );
    // The same file as a plain path, and through a symlink that stays inside.
    let plain = f.data.join("source.bin").display().to_string();
    assert_eq!(
        read(&f, &data_prefix(&f), &plain, 8).await.unwrap(),
        &all[..8]
    );
    let inner = file_url(&f.data.join("inner_link.bin"));
    assert_eq!(
        read(&f, &data_prefix(&f), &inner, 8).await.unwrap(),
        &all[..8]
    );
    // `..` that stays inside, and `file://localhost/`.
    let dots = format!("{}/data/../data/source.bin", f.root.display());
    assert_eq!(
        read(&f, &data_prefix(&f), &dots, 4).await.unwrap(),
        &all[..4]
    );
    let localhost = format!("file://localhost{}", f.data.join("source.bin").display());
    assert_eq!(
        read(&f, &data_prefix(&f), &localhost, 4).await.unwrap(),
        &all[..4]
    );
    // A prefix given through a symlink authorizes what it points at.
    let alias = vec![format!("{}/", file_url(&f.root.join("alias")))];
    assert_eq!(read(&f, &alias, &url, 4).await.unwrap(), &all[..4]);
    // A plain-path prefix without a trailing slash.
    let plain_prefix = vec![f.data.display().to_string()];
    assert_eq!(read(&f, &plain_prefix, &url, 4).await.unwrap(), &all[..4]);
    // A missing file under the prefix is reported missing, not unauthorized.
    let missing = file_url(&f.data.join("missing.bin"));
    let e = read(&f, &data_prefix(&f), &missing, 4).await.unwrap_err();
    assert!(
        matches!(e, VirtualChunkError::SourceMissing { .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn plain_path_with_dot_dot_cannot_escape() {
    let f = fixture(vec![]).await;
    // Today's escape: the prefix check saw `<root>/data/../secret.txt`, the read went to
    // `<root>/secret.txt`.
    let url = format!("{}/../secret.txt", f.data.display());
    assert_unauthorized(
        read(&f, &data_prefix(&f), &url, 10).await,
        "plain path with ..",
    );
    let url = format!("{}/./../secret.txt", f.data.display());
    assert_unauthorized(
        read(&f, &data_prefix(&f), &url, 10).await,
        "plain path with ./..",
    );
}

#[tokio::test]
async fn file_url_with_dot_dot_cannot_escape() {
    let f = fixture(vec![]).await;
    for url in [
        format!("{}/../secret.txt", file_url(&f.data)),
        format!("{}/%2e%2e/secret.txt", file_url(&f.data)),
        format!("{}/%2E%2e/secret.txt", file_url(&f.data)),
        format!("{}/.%2E/secret.txt", file_url(&f.data)),
    ] {
        assert_unauthorized(read(&f, &data_prefix(&f), &url, 10).await, &url);
    }
}

#[tokio::test]
async fn symlink_to_a_file_outside_is_refused() {
    let f = fixture(vec![]).await;
    let url = file_url(&f.data.join("escape_link.bin"));
    assert_unauthorized(read(&f, &data_prefix(&f), &url, 10).await, "file symlink");
}

#[tokio::test]
async fn symlinked_directory_outside_is_refused() {
    let f = fixture(vec![]).await;
    let url = file_url(&f.data.join("escape_dir/secret.txt"));
    assert_unauthorized(
        read(&f, &data_prefix(&f), &url, 10).await,
        "directory symlink",
    );
}

#[tokio::test]
async fn dangling_symlink_is_not_followed() {
    let f = fixture(vec![]).await;
    let url = file_url(&f.data.join("dangling.bin"));
    let e = read(&f, &data_prefix(&f), &url, 4).await.unwrap_err();
    assert!(
        matches!(e, VirtualChunkError::SourceMissing { .. }),
        "{e:?}"
    );
    // Once its target exists (outside the prefix), it is refused.
    std::fs::write(f.root.join("not-yet"), SECRET).unwrap();
    assert_unauthorized(
        read(&f, &data_prefix(&f), &url, 10).await,
        "dangling symlink",
    );
}

#[tokio::test]
async fn prefixes_match_on_segment_boundaries() {
    let f = fixture(vec![]).await;
    let url = file_url(&f.root.join("database/x.bin"));
    // `<root>/data` (no trailing slash) does not authorize `<root>/database/`.
    let prefix = vec![file_url(&f.data)];
    assert_unauthorized(read(&f, &prefix, &url, 10).await, "file:// prefix boundary");
    let prefix = vec![f.data.display().to_string()];
    assert_unauthorized(read(&f, &prefix, &url, 10).await, "plain prefix boundary");
}

#[tokio::test]
async fn backslashes_and_encoded_slashes_are_refused() {
    let f = fixture(vec![]).await;
    for url in [
        format!("{}\\..\\secret.txt", f.data.display()),
        format!("{}/..\\secret.txt", file_url(&f.data)),
        format!("{}/..%2fsecret.txt", file_url(&f.data)),
        format!("{}/..%2Fsecret.txt", file_url(&f.data)),
        format!("{}/..%5csecret.txt", file_url(&f.data)),
        format!("{}/x%00", file_url(&f.data)),
    ] {
        let res = read(&f, &data_prefix(&f), &url, 10).await;
        assert_invalid(res, &url);
    }
}

#[tokio::test]
async fn file_urls_naming_a_host_are_refused() {
    let f = fixture(vec![]).await;
    for url in [
        format!("file://otherhost{}", f.root.join("secret.txt").display()),
        format!("file://127.0.0.1{}", f.root.join("secret.txt").display()),
        format!(
            "file://user@localhost{}",
            f.root.join("secret.txt").display()
        ),
    ] {
        assert_invalid(read(&f, &data_prefix(&f), &url, 10).await, &url);
    }
}

#[tokio::test]
async fn path_case_is_significant_and_scheme_case_is_not() {
    let f = fixture(vec![]).await;
    let all = pattern();
    // The scheme is case-insensitive: FILE:// reads the same file.
    let upper_scheme = format!("FILE://{}", f.data.join("source.bin").display());
    assert_eq!(
        read(&f, &data_prefix(&f), &upper_scheme, 4).await.unwrap(),
        &all[..4]
    );
    // Paths are case-sensitive: `<root>/DATA` is another directory.
    std::fs::create_dir_all(f.root.join("DATA")).unwrap();
    std::fs::write(f.root.join("DATA/x.bin"), SECRET).unwrap();
    let url = file_url(&f.root.join("DATA/x.bin"));
    assert_unauthorized(read(&f, &data_prefix(&f), &url, 10).await, "path case");
}

#[tokio::test]
async fn a_prefix_that_does_not_exist_authorizes_nothing() {
    let f = fixture(vec![]).await;
    let prefix = vec![format!("{}/", file_url(&f.root.join("nowhere")))];
    // Even a path under it lexically, made real by a symlink elsewhere.
    let url = file_url(&f.root.join("nowhere/../secret.txt"));
    assert_unauthorized(read(&f, &prefix, &url, 10).await, "missing prefix");
    let url = file_url(&f.data.join("source.bin"));
    assert_unauthorized(read(&f, &prefix, &url, 10).await, "missing prefix");
}

// --- S3: refused before any request is made --------------------------------------

fn s3_container(prefix: &str) -> VirtualChunkContainer {
    VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store: ContainerStore::S3 {
            region: Some("us-east-1".into()),
            // Nothing listens there: a request would be a Backend error, not Unauthorized.
            endpoint_url: Some("http://127.0.0.1:9".into()),
            anonymous: true,
            allow_http: true,
            force_path_style: true,
            compatible: true,
        },
    }
}

#[tokio::test]
async fn s3_dot_segments_are_resolved_before_the_check() {
    let f = fixture(vec![s3_container("s3://bucket/")]).await;
    let prefix = vec!["s3://bucket/data/".to_string()];
    for url in [
        "s3://bucket/data/../secret/x",
        "s3://bucket/data/%2e%2e/secret/x",
        "s3://bucket/data/%2E%2e/secret/x",
        "s3://bucket/data/.%2e/secret/x",
        "s3://bucket/data/./../secret/x",
        "s3://bucket/database/x",
    ] {
        assert_unauthorized(read(&f, &prefix, url, 10).await, url);
    }
    // Bucket names are exact: another bucket is not covered (nor authorized).
    let e = read(&f, &prefix, "s3://Bucket/data/x", 10)
        .await
        .unwrap_err();
    assert!(matches!(e, VirtualChunkError::NoContainer { .. }), "{e:?}");
    for url in [
        "s3://bucket/data/..%2fsecret/x",
        "s3://bucket/data\\..\\secret/x",
        "s3://user@bucket/data/x",
        "s3://bucket/data/x?versionId=1",
    ] {
        assert_invalid(read(&f, &prefix, url, 10).await, url);
    }
}

// --- HTTP ------------------------------------------------------------------------

/// The escape target (answers the secret to everything) and the authorized server:
/// `/data/source.bin` is the pattern, `/data/inside` redirects to it, `/data/to-host`
/// redirects to the escape target, `/data/to-path` to `/private/x` on the same
/// server, `/data/to-file` to a `file://` URL.
async fn http_servers() -> (Server, Server) {
    let evil = server(Arc::new(|m, _, r| {
        let secret: Vec<u8> = SECRET.iter().copied().cycle().take(1024).collect();
        content(m, &secret, r)
    }))
    .await;
    let evil_addr = evil.addr;
    let good = server(Arc::new(move |m, path, r| match path {
        "/data/source.bin" => content(m, &pattern(), r),
        "/data/inside" => redirect("/data/source.bin"),
        "/data/to-host" => redirect(&format!("http://{evil_addr}/data/source.bin")),
        "/data/to-path" => redirect("/private/x"),
        "/data/to-file" => redirect("file:///etc/hostname"),
        "/private/x" => {
            let secret: Vec<u8> = SECRET.iter().copied().cycle().take(1024).collect();
            content(m, &secret, r)
        }
        _ => not_found(),
    }))
    .await;
    (good, evil)
}

fn http_container(prefix: &str) -> VirtualChunkContainer {
    VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store: ContainerStore::Http,
    }
}

/// Runs `fut` with a bound so a hanging client fails the test instead of blocking.
async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("the read took more than 30 s")
}

fn assert_redirect_refused(res: Result<Bytes, VirtualChunkError>, what: &str) {
    match res {
        Err(VirtualChunkError::RedirectRefused { .. }) => {}
        Ok(b) => panic!(
            "{what}: read succeeded and disclosed {:?}",
            String::from_utf8_lossy(&b)
        ),
        Err(e) => panic!("{what}: expected RedirectRefused, got {e:?}"),
    }
}

#[tokio::test]
async fn http_redirect_inside_the_prefix_is_followed() {
    let (good, _evil) = http_servers().await;
    let base = format!("http://{}", good.addr);
    let f = fixture(vec![http_container(&format!("{base}/"))]).await;
    let prefix = vec![format!("{base}/data/")];
    let all = pattern();
    let got = bounded(read(&f, &prefix, &format!("{base}/data/source.bin"), 16)).await;
    assert_eq!(got.unwrap(), &all[..16]);
    let got = bounded(read(&f, &prefix, &format!("{base}/data/inside"), 16)).await;
    assert_eq!(got.unwrap(), &all[..16]);
}

#[tokio::test]
async fn http_redirect_to_another_host_is_refused() {
    let (good, evil) = http_servers().await;
    let base = format!("http://{}", good.addr);
    let f = fixture(vec![http_container(&format!("{base}/"))]).await;
    let prefix = vec![format!("{base}/data/")];
    let res = bounded(read(&f, &prefix, &format!("{base}/data/to-host"), 16)).await;
    assert_redirect_refused(res, "redirect to another host");
    assert!(
        evil.hits.lock().unwrap().is_empty(),
        "the other host was contacted"
    );
}

#[tokio::test]
async fn http_redirect_to_another_path_is_refused() {
    let (good, _evil) = http_servers().await;
    let base = format!("http://{}", good.addr);
    let f = fixture(vec![http_container(&format!("{base}/"))]).await;
    let prefix = vec![format!("{base}/data/")];
    let res = bounded(read(&f, &prefix, &format!("{base}/data/to-path"), 16)).await;
    assert_redirect_refused(res, "redirect to another path");
    assert!(
        !good
            .hits
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.path == "/private/x"),
        "the unauthorized path was requested"
    );
    let res = bounded(read(&f, &prefix, &format!("{base}/data/to-file"), 16)).await;
    assert_redirect_refused(res, "redirect to a file");
}

#[tokio::test]
async fn http_userinfo_ports_and_case() {
    let (good, evil) = http_servers().await;
    let base = format!("http://{}", good.addr);
    let host_port = good.addr.to_string();
    let f = fixture(vec![
        http_container(&format!("{base}/")),
        http_container(&format!("http://{}/", evil.addr)),
    ])
    .await;
    let prefix = vec![format!("{base}/data/")];
    let all = pattern();
    // Scheme and host case do not matter.
    let url = format!("HTTP://{host_port}/data/source.bin");
    assert_eq!(
        bounded(read(&f, &prefix, &url, 4)).await.unwrap(),
        &all[..4]
    );
    // Path case does.
    let url = format!("{base}/DATA/source.bin");
    assert_unauthorized(bounded(read(&f, &prefix, &url, 4)).await, "path case");
    // `http://allowed@evil/` reads from evil: credentials in URLs are refused.
    let url = format!("http://{host_port}@{}/data/source.bin", evil.addr);
    assert_invalid(bounded(read(&f, &prefix, &url, 4)).await, "userinfo trick");
    let url = format!("http://user:pw@{host_port}/data/source.bin");
    assert_invalid(bounded(read(&f, &prefix, &url, 4)).await, "userinfo");
    // Another port of the same host is another origin.
    let url = format!("http://{}/data/source.bin", evil.addr);
    assert_unauthorized(bounded(read(&f, &prefix, &url, 4)).await, "other port");
    // Encoded dot segments are resolved; encoded slashes refused.
    let url = format!("{base}/data/%2e%2E/private/x");
    assert_unauthorized(bounded(read(&f, &prefix, &url, 4)).await, "encoded dots");
    let url = format!("{base}/data/..%2fprivate/x");
    assert_invalid(bounded(read(&f, &prefix, &url, 4)).await, "encoded slash");
    let url = format!("{base}/data\\..\\private/x");
    assert_invalid(bounded(read(&f, &prefix, &url, 4)).await, "backslash");
    assert!(
        evil.hits.lock().unwrap().is_empty(),
        "the other host was contacted"
    );
    assert!(
        !good
            .hits
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.path.starts_with("/private")),
        "the unauthorized path was requested"
    );
}

#[test]
fn default_ports_normalize_to_the_same_prefix() {
    let access = VirtualAccess::prefixes(["http://example.com:80/data/"]).unwrap();
    assert!(access.allows(&floe::virtual_refs::normalize_url("http://EXAMPLE.com/data/x").unwrap()));
    assert!(!access
        .allows(&floe::virtual_refs::normalize_url("http://example.com:8080/data/x").unwrap()));
    assert!(
        !access.allows(&floe::virtual_refs::normalize_url("https://example.com/data/x").unwrap())
    );
}

// --- The CLI ---------------------------------------------------------------------

#[tokio::test]
async fn cli_allow_virtual_does_not_follow_a_symlink_out() {
    let f = fixture(vec![]).await;
    let repo = Repository::open(Arc::new(LocalStorage::new(&f.repo).unwrap()))
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    // `/v` chunk 0 points through the escaping symlink; `/w` chunk 0 at the real file.
    s.add_array(&p("/w"), array_def("/w", &[1], &[1], "uint8"))
        .unwrap();
    let vref = |name: &str| {
        Some(ChunkPayload::Virtual(VirtualChunkRef {
            location: file_url(&f.data.join(name)),
            offset: 0,
            length: 1,
            checksum: None,
        }))
    };
    s.set_chunk_ref(&p("/v"), &[0], vref("escape_link.bin"))
        .unwrap();
    s.set_chunk_ref(&p("/w"), &[0], vref("source.bin")).unwrap();
    s.commit("refs").await.unwrap();
    let cat = |array: &str, prefix: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["cat", &f.repo.display().to_string(), array])
            .args(["--format", "json", "--allow-virtual", prefix])
            .output()
            .unwrap()
    };
    let prefix = format!("{}/", f.data.display());
    let out = cat("/w", &prefix);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[0]");
    let out = cat("/v", &prefix);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not authorized"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("116"),
        "disclosed"
    );
}

#[tokio::test]
async fn a_local_store_behind_a_remote_prefix_is_refused() {
    // The writer declares `http://<host>/` read through the local file system: a reader
    // who authorized that host must not get local files for it.
    let c = VirtualChunkContainer {
        name: None,
        url_prefix: "http://127.0.0.1:1/".into(),
        store: ContainerStore::LocalFileSystem("/".into()),
    };
    let f = fixture(vec![c]).await;
    let prefix = vec!["http://127.0.0.1:1/".to_string()];
    let url = format!("http://127.0.0.1:1{}", f.root.join("secret.txt").display());
    let res = read(&f, &prefix, &url, 10).await;
    match res {
        Err(VirtualChunkError::UnsupportedStore { .. }) => {}
        Ok(b) => panic!(
            "read succeeded and disclosed {:?}",
            String::from_utf8_lossy(&b)
        ),
        Err(e) => panic!("expected UnsupportedStore, got {e:?}"),
    }
}

// --- The key requested is the key checked ------------------------------------------

/// A ref that normalizes to an authorized prefix itself (`PREFIX/x/..` is `PREFIX/`)
/// names no object: object stores drop the trailing `/` and would request the object
/// named like the prefix without its slash, which lies outside it. Every scheme
/// refuses it as an invalid URL before any request.
#[tokio::test]
async fn a_ref_naming_the_authorized_prefix_itself_reads_nothing() {
    let secret: Vec<u8> = SECRET.iter().copied().cycle().take(1024).collect();
    let good = server(Arc::new(move |m, path, r| match path {
        // The object named like the authorized prefix without its slash.
        "/data" => content(m, &secret, r),
        "/data/source.bin" => content(m, &pattern(), r),
        _ => not_found(),
    }))
    .await;
    let base = format!("http://{}", good.addr);
    let f = fixture(vec![
        http_container(&format!("{base}/")),
        s3_container("s3://bucket/"),
        VirtualChunkContainer {
            name: None,
            url_prefix: "gs://bucket/".into(),
            store: ContainerStore::Gcs(vec![]),
        },
        VirtualChunkContainer {
            name: None,
            url_prefix: "az://container/".into(),
            store: ContainerStore::Azure(vec![("account".into(), "account".into())]),
        },
    ])
    .await;
    // The authorized HTTP prefix still reads.
    let http_prefix = vec![format!("{base}/data/")];
    let got = bounded(read(
        &f,
        &http_prefix,
        &format!("{base}/data/source.bin"),
        16,
    ))
    .await;
    assert_eq!(got.unwrap(), &pattern()[..16]);
    good.clear();
    for tail in ["x/..", "x/%2e%2e", "x/.%2E", ".", "", "x/../"] {
        let url = format!("{base}/data/{tail}");
        assert_invalid(bounded(read(&f, &http_prefix, &url, 16)).await, &url);
    }
    assert!(
        good.hits().is_empty(),
        "requests were made: {:?}",
        good.hits()
    );
    for (scheme, bucket) in [("s3", "bucket"), ("gs", "bucket"), ("az", "container")] {
        let prefix = vec![format!("{scheme}://{bucket}/data/")];
        for tail in ["x/..", "x/%2e%2e", "."] {
            let url = format!("{scheme}://{bucket}/data/{tail}");
            assert_invalid(bounded(read(&f, &prefix, &url, 16)).await, &url);
        }
    }
    // A local directory named by a ref is not read either.
    let local = data_prefix(&f);
    for tail in ["escape_dir/..", "."] {
        let url = format!("{}/{tail}", file_url(&f.data));
        assert_invalid(read(&f, &local, &url, 10).await, &url);
    }
}
