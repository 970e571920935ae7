//! `floe serve` (issue 46): every version of a repository over HTTP as plain Zarr v3,
//! and the JSON API. The server runs in-process on 127.0.0.1:0 ([`floe::serve::Server`])
//! and reqwest reads it; raw requests (traversal forms the URL parser would
//! normalise, slow clients) go through a bare TCP socket; the CLI's own checks
//! (`--public`, SIGTERM) run the binary.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::serve::{ServeOptions, Server, ShutdownHandle};
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::zarr::Store;
use floe::{OpenOptions, Repository, SnapshotId, VersionSelector};
use reqwest::header;
use serde_json::{json, Value};

use crate::common::{array_def, array_json, group_json, p};

struct Fixture {
    dir: tempfile::TempDir,
    repo: Repository,
    /// The first commit (tagged `v1`).
    first: SnapshotId,
}

/// A repository: a root group with attributes, a group `g` holding a 2-D `int32`
/// array `g/t` (4 × 6 in 2 × 3 chunks, chunk (1, 1) never written), and a 1-D
/// `uint8` array `a` (8 in chunks of 4); tagged `v1`, branch `dev` at the same commit.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::create(
        Arc::new(LocalStorage::new(&dir.path().join("repo")).unwrap()),
        None,
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store
        .set(
            "zarr.json",
            group_json(json!({"title": "<script>x</script>"})),
        )
        .await
        .unwrap();
    store
        .set("g/zarr.json", group_json(json!({"kind": "group g"})))
        .await
        .unwrap();
    store
        .set(
            "g/t/zarr.json",
            array_json(&[4, 6], &[2, 3], "int32", json!(-1)),
        )
        .await
        .unwrap();
    for (i, j) in [(0, 0), (0, 1), (1, 0)] {
        let values: Vec<u8> = (0..6i32)
            .flat_map(|k| (k + 10 * i + 100 * j).to_le_bytes())
            .collect();
        store
            .set(&format!("g/t/c/{i}/{j}"), Bytes::from(values))
            .await
            .unwrap();
    }
    store
        .set("a/zarr.json", array_json(&[8], &[4], "uint8", json!(0)))
        .await
        .unwrap();
    store
        .set("a/c/0", Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .unwrap();
    store
        .set("a/c/1", Bytes::from_static(&[5, 6, 7, 8]))
        .await
        .unwrap();
    let first = s.commit("first <b>commit</b>").await.unwrap();
    repo.create_tag("v1", first).await.unwrap();
    repo.create_branch("dev", first).await.unwrap();
    Fixture { dir, repo, first }
}

struct Running {
    addr: SocketAddr,
    handle: ShutdownHandle,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(self) {
        self.handle.shutdown();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server stops")
            .unwrap();
    }
}

async fn start(repo: &Repository, options: ServeOptions) -> Running {
    let options = ServeOptions {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..options
    };
    let server = Server::bind(repo.clone(), options).await.unwrap();
    let addr = server.local_addr();
    let handle = server.shutdown_handle();
    let task = tokio::spawn(async move { server.run().await.unwrap() });
    Running { addr, handle, task }
}

/// JSON bodies (reqwest's `json` feature is off).
trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        serde_json::from_slice(&self.bytes().await.unwrap()).unwrap()
    }
}

fn client() -> reqwest::Client {
    crate::common::http_client()
}

async fn get(url: &str) -> reqwest::Response {
    client().get(url).send().await.unwrap()
}

/// Sends `request` (the request line and headers, raw) on a new connection; returns
/// the status code and the whole answer.
fn raw(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn raw_get(addr: SocketAddr, path: &str) -> u16 {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
    .0
}

/// The stored `zarr.json` of a group, with `consolidated_metadata` removed.
fn without_consolidated(bytes: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(bytes).unwrap();
    v.as_object_mut().unwrap().remove("consolidated_metadata");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_every_version_reads_as_the_session_does() {
    let f = fixture().await;
    let server = start(&f.repo, ServeOptions::default()).await;
    let prefixes = [
        "/zarr/branch/main/".to_string(),
        "/zarr/branch/dev/".to_string(),
        "/zarr/tag/v1/".to_string(),
        format!("/zarr/snapshot/{}/", f.first),
    ];
    let session = f
        .repo
        .readonly_session(&VersionSelector::Snapshot(f.first))
        .await
        .unwrap();
    let store = session.store();
    let keys = store.list().await.unwrap();
    assert!(keys.contains(&"g/t/c/1/0".to_string()), "{keys:?}");
    for prefix in &prefixes {
        for key in &keys {
            let r = get(&server.url(&format!("{prefix}{key}"))).await;
            assert_eq!(r.status(), 200, "{prefix}{key}");
            let expected = store.get(key).await.unwrap().unwrap();
            let len = r.headers()[header::CONTENT_LENGTH]
                .to_str()
                .unwrap()
                .to_string();
            let etag = r.headers()[header::ETAG].to_str().unwrap().to_string();
            assert!(etag.starts_with(&format!("\"{}/", f.first)), "{etag}");
            assert!(!etag.starts_with("W/"));
            let cache = r.headers()[header::CACHE_CONTROL]
                .to_str()
                .unwrap()
                .to_string();
            if prefix.starts_with("/zarr/snapshot/") {
                assert_eq!(cache, "public, max-age=31536000, immutable");
            } else {
                assert_eq!(cache, "no-cache");
            }
            let body = r.bytes().await.unwrap();
            assert_eq!(len, body.len().to_string());
            let is_group = session
                .get_node(&p(&format!("/{}", key.trim_end_matches("zarr.json"))))
                .is_ok_and(|n| n.is_group());
            if key.ends_with("zarr.json") && is_group {
                assert_eq!(without_consolidated(&body), without_consolidated(&expected));
            } else {
                assert_eq!(body, expected, "{prefix}{key}");
            }
        }
        // Never written: 404, so readers use the fill value.
        let r = get(&server.url(&format!("{prefix}g/t/c/1/1"))).await;
        assert_eq!(r.status(), 404);
        // Not a key of any node, and out of the grid.
        for key in ["nothing/zarr.json", "g/t/c/9/9", "a/c/0/0", "g/zarr.json/x"] {
            let r = get(&server.url(&format!("{prefix}{key}"))).await;
            assert_eq!(r.status(), 404, "{prefix}{key}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_carry_zarr_pythons_consolidated_metadata() {
    let f = fixture().await;
    let server = start(&f.repo, ServeOptions::default()).await;
    let root: Value = get(&server.url("/zarr/tag/v1/zarr.json"))
        .await
        .json_value()
        .await;
    assert_eq!(root["attributes"]["title"], "<script>x</script>");
    let cm = &root["consolidated_metadata"];
    assert_eq!(cm["kind"], "inline");
    assert_eq!(cm["must_understand"], false);
    let members = cm["metadata"].as_object().unwrap();
    let names: Vec<&str> = members.keys().map(String::as_str).collect();
    assert_eq!(names, ["a", "g", "g/t"]);
    assert_eq!(members["g/t"]["shape"], json!([4, 6]));
    assert_eq!(members["a"]["node_type"], "array");
    // A child group says it has nothing more to consolidate, as zarr-python writes.
    assert_eq!(
        members["g"]["consolidated_metadata"],
        json!({"kind": "inline", "must_understand": false, "metadata": {}})
    );
    // A group below the root: paths relative to it.
    let g: Value = get(&server.url("/zarr/tag/v1/g/zarr.json"))
        .await
        .json_value()
        .await;
    let members = g["consolidated_metadata"]["metadata"].as_object().unwrap();
    assert_eq!(members.keys().collect::<Vec<_>>(), ["t"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_head_etags_and_revalidation() {
    let f = fixture().await;
    let server = start(&f.repo, ServeOptions::default()).await;
    let url = server.url("/zarr/branch/main/a/c/1");
    let with_range = |r: &'static str| {
        let url = url.clone();
        async move {
            client()
                .get(&url)
                .header(header::RANGE, r)
                .send()
                .await
                .unwrap()
        }
    };
    for (range, status, content_range, body) in [
        ("bytes=1-2", 206, Some("bytes 1-2/4"), &[6u8, 7][..]),
        ("bytes=2-", 206, Some("bytes 2-3/4"), &[7, 8][..]),
        ("bytes=-3", 206, Some("bytes 1-3/4"), &[6, 7, 8][..]),
        ("bytes=-10", 206, Some("bytes 0-3/4"), &[5, 6, 7, 8][..]),
        ("bytes=1-1000", 206, Some("bytes 1-3/4"), &[6, 7, 8][..]),
        // Several ranges: answered whole.
        ("bytes=0-0,2-3", 200, None, &[5, 6, 7, 8][..]),
    ] {
        let r = with_range(range).await;
        assert_eq!(r.status(), status, "{range}");
        assert_eq!(
            r.headers()
                .get(header::CONTENT_RANGE)
                .map(|v| v.to_str().unwrap()),
            content_range,
            "{range}"
        );
        assert_eq!(
            r.headers()[header::CONTENT_LENGTH],
            body.len().to_string().as_str()
        );
        assert_eq!(&r.bytes().await.unwrap()[..], body, "{range}");
    }
    for range in [
        "bytes=4-",
        "bytes=9-12",
        "bytes=3-1",
        "bytes=-0",
        "bytes=99999999999999999999999-",
        "bytes=x-y",
    ] {
        let r = with_range(range).await;
        assert_eq!(r.status(), 416, "{range}");
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes */4", "{range}");
    }
    // Ranges of metadata documents too.
    let r = client()
        .get(server.url("/zarr/branch/main/a/zarr.json"))
        .header(header::RANGE, "bytes=0-0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(&r.bytes().await.unwrap()[..], b"{");

    // HEAD: the headers of GET, no body.
    let r = client().head(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[header::CONTENT_LENGTH], "4");
    assert_eq!(r.headers()[header::ACCEPT_RANGES], "bytes");
    let etag = r.headers()[header::ETAG].clone();
    assert!(r.bytes().await.unwrap().is_empty());
    let r = client()
        .head(server.url("/zarr/branch/main/g/t/c/1/1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // If-None-Match: 304 with the same ETag, on branch and snapshot URLs.
    let r = client()
        .get(&url)
        .header(header::IF_NONE_MATCH, etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert_eq!(r.headers()[header::ETAG], etag);
    assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache");
    let snap_url = server.url(&format!("/zarr/snapshot/{}/a/c/1", f.first));
    let r = get(&snap_url).await;
    assert_eq!(r.headers()[header::ETAG], etag, "same snapshot, same key");
    let r = client()
        .get(&snap_url)
        .header(
            header::IF_NONE_MATCH,
            format!("\"other\", W/{}", etag.to_str().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert_eq!(
        r.headers()[header::CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
    let r = client()
        .get(&snap_url)
        .header(header::IF_NONE_MATCH, "\"other\"")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    server.stop().await;
}

/// A commit made while serving shows at the branch URL (no redirect: the branch is
/// served directly, its ETag moving with the snapshot) and not at the old snapshot
/// URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_while_serving_shows_at_the_branch_not_the_old_snapshot() {
    let f = fixture().await;
    let server = start(&f.repo, ServeOptions::default()).await;
    let branch_url = server.url("/zarr/branch/main/a/c/0");
    let old_url = server.url(&format!("/zarr/snapshot/{}/a/c/0", f.first));
    let r = get(&branch_url).await;
    assert_eq!(r.status(), 200, "served directly, not redirected");
    let old_etag = r.headers()[header::ETAG].clone();
    assert_eq!(
        r.headers()["x-floe-snapshot"].to_str().unwrap(),
        f.first.to_string()
    );
    assert_eq!(&r.bytes().await.unwrap()[..], &[1, 2, 3, 4]);

    let s = f.repo.writable_session("main").await.unwrap();
    s.store()
        .set("a/c/0", Bytes::from_static(&[9, 9, 9, 9]))
        .await
        .unwrap();
    s.store()
        .set("b/zarr.json", array_json(&[2], &[2], "uint8", json!(0)))
        .await
        .unwrap();
    let second = s.commit("second").await.unwrap();

    let r = client()
        .get(&branch_url)
        .header(header::IF_NONE_MATCH, old_etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the old ETag no longer matches");
    assert_ne!(r.headers()[header::ETAG], old_etag);
    assert_eq!(
        r.headers()["x-floe-snapshot"].to_str().unwrap(),
        second.to_string()
    );
    assert_eq!(&r.bytes().await.unwrap()[..], &[9, 9, 9, 9]);
    assert_eq!(
        &get(&old_url).await.bytes().await.unwrap()[..],
        &[1, 2, 3, 4]
    );
    // The new array is in the branch's consolidated metadata, not the tag's.
    let root: Value = get(&server.url("/zarr/branch/main/zarr.json"))
        .await
        .json_value()
        .await;
    assert!(root["consolidated_metadata"]["metadata"]["b"].is_object());
    let root: Value = get(&server.url("/zarr/tag/v1/zarr.json"))
        .await
        .json_value()
        .await;
    assert!(root["consolidated_metadata"]["metadata"]["b"].is_null());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_and_ids_get_400_or_404() {
    let f = fixture().await;
    let server = start(&f.repo, ServeOptions::default()).await;
    let addr = server.addr;
    for path in [
        "/zarr/branch/main/../../../etc/passwd",
        "/zarr/branch/main/a/../zarr.json",
        "/zarr/branch/main/./zarr.json",
        "/zarr/branch/main/%2e%2e/%2e%2e/etc/passwd",
        "/zarr/branch/main/a%2Fzarr.json",
        "/zarr/branch/main/a%2fc%2f0",
        "/zarr/branch/main/a%5Czarr.json",
        "/zarr/branch/main/a%252Fzarr.json",
        "/zarr/branch/main/%252e%252e/zarr.json",
        "/zarr/branch/main//zarr.json",
        "/zarr/branch/main%2F..%2F..%2Fetc/zarr.json",
        "/zarr/branch/%2e%2e/zarr.json",
        "/zarr/branch/main/a%00/zarr.json",
        "/zarr/branch/main/%ff/zarr.json",
        "/api/tree/..%2Fmain",
        "/api/log/%2e%2e",
    ] {
        assert_eq!(raw_get(addr, path), 400, "{path}");
    }
    let unknown = SnapshotId::random();
    for path in [
        "/zarr/branch/nope/zarr.json",
        "/zarr/tag/nope/zarr.json",
        &format!("/zarr/snapshot/{unknown}/zarr.json"),
        &format!("/api/snapshot/{unknown}"),
        &format!("/api/log/main?after={unknown}"),
        "/zarr/branch/main/",
        "/zarr/branch/main",
        "/zarr/other/main/zarr.json",
        "/zarr/branch/main/a/",
        "/etc/passwd",
        "/api/tree/nope",
    ] {
        assert_eq!(raw_get(addr, path), 404, "{path}");
    }
    for path in [
        "/zarr/snapshot/not-an-id/zarr.json",
        "/zarr/snapshot/%3Cscript%3E/zarr.json",
        "/api/snapshot/xyz",
        "/api/log/main?limit=0",
        "/api/log/main?after=bad",
        "/api/diff?from=main",
    ] {
        assert_eq!(raw_get(addr, path), 400, "{path}");
    }
    // Writes are refused.
    let (status, _) = raw(
        addr,
        "PUT /zarr/branch/main/a/c/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
    );
    assert_eq!(status, 405);
    // A huge header is refused, and the server still answers.
    let big = "x".repeat(64 * 1024);
    let (status, _) = raw(
        addr,
        &format!("GET /zarr/branch/main/zarr.json HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\nConnection: close\r\n\r\n"),
    );
    assert!(status == 431 || status == 0 || status == 400, "{status}");
    assert_eq!(raw_get(addr, "/zarr/branch/main/zarr.json"), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_others_served() {
    let f = fixture().await;
    let server = start(
        &f.repo,
        ServeOptions {
            header_read_timeout: Duration::from_millis(500),
            max_connections: 8,
            ..ServeOptions::default()
        },
    )
    .await;
    let addr = server.addr;
    // Eight clients that send one byte and stall hold every connection slot...
    let slow: Vec<_> = (0..8)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"G").unwrap();
            s
        })
        .collect();
    // ...until the header-read timeout cuts them off, and a well-behaved client
    // gets its answer.
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), get(&server.url("/api/refs")))
        .await
        .expect("served after the slow clients were cut off");
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(5));
    for mut s in slow {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        // Closed by the server (maybe after a 408).
        let _ = s.read_to_end(&mut buf);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api() {
    let f = fixture().await;
    let s = f.repo.writable_session("main").await.unwrap();
    s.store()
        .set("a/c/1", Bytes::from_static(&[0, 0, 0, 0]))
        .await
        .unwrap();
    s.store()
        .set("g/t/c/1/1", Bytes::from(vec![0u8; 24]))
        .await
        .unwrap();
    let second = s.commit("second").await.unwrap();
    let server = start(&f.repo, ServeOptions::default()).await;

    let refs: Value = get(&server.url("/api/refs")).await.json_value().await;
    assert_eq!(refs["branches"]["main"], second.to_string());
    assert_eq!(refs["branches"]["dev"], f.first.to_string());
    assert_eq!(refs["tags"]["v1"], f.first.to_string());

    let log: Value = get(&server.url("/api/log/main?limit=1"))
        .await
        .json_value()
        .await;
    assert_eq!(log["commits"].as_array().unwrap().len(), 1);
    assert_eq!(log["commits"][0]["id"], second.to_string());
    assert_eq!(log["commits"][0]["parent_id"], f.first.to_string());
    assert_eq!(log["commits"][0]["message"], "second");
    assert_eq!(log["next"], second.to_string());
    let page2: Value = get(&server.url(&format!("/api/log/main?limit=1&after={second}")))
        .await
        .json_value()
        .await;
    assert_eq!(page2["commits"][0]["id"], f.first.to_string());
    assert_eq!(page2["commits"][0]["message"], "first <b>commit</b>");
    let all: Value = get(&server.url("/api/log/v1")).await.json_value().await;
    assert_eq!(
        all["commits"].as_array().unwrap().len(),
        2,
        "with the initial snapshot"
    );
    assert!(all["next"].is_null());

    let info: Value = get(&server.url(&format!("/api/snapshot/{}", f.first)))
        .await
        .json_value()
        .await;
    assert_eq!(info["id"], f.first.to_string());
    assert_eq!(info["message"], "first <b>commit</b>");
    assert_eq!(info["arrays"], 2);
    assert_eq!(info["nodes"], 4);

    let tree: Value = get(&server.url("/api/tree/v1")).await.json_value().await;
    assert_eq!(tree["snapshot"], f.first.to_string());
    let paths: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/", "/a", "/g", "/g/t"]);
    assert_eq!(tree["nodes"][3]["metadata"]["data_type"], "int32");

    let diff: Value = get(&server.url("/api/diff?from=v1&to=main"))
        .await
        .json_value()
        .await;
    assert_eq!(diff["from"], f.first.to_string());
    assert_eq!(diff["to"], second.to_string());
    let text = diff.to_string();
    assert!(text.contains("/g/t") && text.contains("/a"), "{text}");

    let ops: Value = get(&server.url("/api/ops-log")).await.json_value().await;
    assert!(ops["operations"].as_array().unwrap().len() >= 3, "{ops}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_set_and_cors_only_when_asked() {
    let f = fixture().await;
    let server = start(
        &f.repo,
        ServeOptions {
            token: Some("s3cret".into()),
            cors_origin: Some("http://viewer.example:3000".into()),
            ..ServeOptions::default()
        },
    )
    .await;
    let url = server.url("/zarr/tag/v1/zarr.json");
    let r = get(&url).await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
    let r = client()
        .get(&url)
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client()
        .get(&url)
        .bearer_auth("s3cret")
        .header(header::ORIGIN, "http://viewer.example:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "http://viewer.example:3000"
    );
    let exposed = r.headers()[header::ACCESS_CONTROL_EXPOSE_HEADERS]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in ["content-range", "etag", "x-floe-snapshot"] {
        assert!(exposed.contains(h), "{exposed}");
    }
    // A preflight needs no token.
    let r = client()
        .request(reqwest::Method::OPTIONS, &url)
        .header(header::ORIGIN, "http://viewer.example:3000")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
        .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "range")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    server.stop().await;

    // Without --cors-origin, no CORS header.
    let server = start(&f.repo, ServeOptions::default()).await;
    let r = client()
        .get(server.url("/zarr/tag/v1/zarr.json"))
        .header(header::ORIGIN, "http://viewer.example:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r
        .headers()
        .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
        .is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_chunks_only_under_authorized_containers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let source = data.join("source.bin");
    std::fs::write(&source, (0..64u8).collect::<Vec<_>>()).unwrap();
    let prefix = format!("file://{}/", data.display());
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: prefix.clone(),
        store: ContainerStore::LocalFileSystem(format!("{}/", data.display())),
    });
    let repo_path = dir.path().join("repo");
    let repo = Repository::create(
        Arc::new(LocalStorage::new(&repo_path).unwrap()),
        Some(config),
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/v"), array_def("/v", &[8], &[4], "uint8"))
        .unwrap();
    s.set_chunk_ref(
        &p("/v"),
        &[0],
        Some(ChunkPayload::Virtual(VirtualChunkRef {
            location: format!("file://{}", source.display()),
            offset: 10,
            length: 4,
            checksum: None,
        })),
    )
    .unwrap();
    s.commit("virtual").await.unwrap();

    // Not authorized: 403 with the reason, for GET and HEAD.
    let server = start(&repo, ServeOptions::default()).await;
    let url = server.url("/zarr/branch/main/v/c/0");
    let r = get(&url).await;
    assert_eq!(r.status(), 403);
    let text = r.text().await.unwrap();
    assert!(text.contains("--virtual-container"), "{text}");
    assert_eq!(client().head(&url).send().await.unwrap().status(), 403);
    server.stop().await;

    // Authorized: the repository opened with the container, the server told so.
    let access = VirtualAccess::prefixes([&prefix]).unwrap();
    let repo = Repository::open_with(
        Arc::new(LocalStorage::new(&repo_path).unwrap()),
        OpenOptions::default().virtual_access(access.clone()),
    )
    .await
    .unwrap();
    let server = start(
        &repo,
        ServeOptions {
            virtual_access: access,
            ..ServeOptions::default()
        },
    )
    .await;
    let r = get(&server.url("/zarr/branch/main/v/c/0")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(&r.bytes().await.unwrap()[..], &[10, 11, 12, 13]);
    server.stop().await;
}

/// A child process killed when dropped, so a failing test leaves no server behind
/// (it would also hold the test harness's output pipe open).
struct KillOnDrop(std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl KillOnDrop {
    /// Starts `floe serve` with `command` (stdout piped) and reads the address it
    /// prints on its first line.
    fn serve(command: &mut std::process::Command) -> (KillOnDrop, SocketAddr) {
        let mut child = KillOnDrop(
            command
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .trim_end_matches('/')
            .parse()
            .unwrap();
        (child, addr)
    }

    /// Sends SIGTERM to the child.
    fn terminate(&self) {
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    }

    /// Waits (at most 20 s, else panics with `what`) for the child to exit with
    /// status 0.
    fn exits_cleanly(&mut self, what: &str) {
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn floe_bin() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_floe"));
    c.env_remove("FLOE_LOG").env_remove("RUST_LOG");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_public_addresses_without_public_and_stops_on_sigterm() {
    let f = fixture().await;
    let repo = f.dir.path().join("repo");
    let repo = repo.to_str().unwrap();
    let out = floe_bin()
        .args(["serve", repo, "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--public") && err.contains("loopback"),
        "{err}"
    );
    let token_file = f.dir.path().join("token");
    std::fs::write(&token_file, "").unwrap();
    let out = floe_bin()
        .args(["serve", repo, "--bind", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no token"));

    std::fs::write(&token_file, "tok\n").unwrap();
    let (mut child, addr) = KillOnDrop::serve(
        floe_bin()
            .args(["serve", repo, "--bind", "127.0.0.1:0", "--token-file"])
            .arg(&token_file),
    );
    let base = format!("http://{addr}");
    let r = client()
        .get(format!("{base}/zarr/tag/v1/a/c/0"))
        .bearer_auth("tok")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(&r.bytes().await.unwrap()[..], &[1, 2, 3, 4]);
    // SIGTERM to the child this test started.
    child.terminate();
    child.exits_cleanly("no exit after SIGTERM");
}

/// The history browser: front page, log, a snapshot's tree, a diff with its chunk
/// grid map; every message, name and attribute escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_browser_pages_escape_every_value() {
    let f = fixture().await;
    let s = f.repo.writable_session("main").await.unwrap();
    s.store()
        .set("g/t/c/1/1", Bytes::from(vec![0u8; 24]))
        .await
        .unwrap();
    s.store()
        .set(
            "big/zarr.json",
            array_json(&[100_000, 1000], &[100_000, 1000], "float64", json!(0.0)),
        )
        .await
        .unwrap();
    let second = s
        .commit_with(
            "<script>alert(1)</script> second",
            [("who".to_string(), json!("<img src=x onerror=alert(2)>"))].into(),
            floe::CommitOptions::default(),
        )
        .await
        .unwrap();
    let server = start(&f.repo, ServeOptions::default()).await;
    let html = |path: String| {
        let url = server.url(&path);
        async move {
            let r = get(&url).await;
            assert_eq!(r.status(), 200, "{url}");
            assert!(r.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html"));
            r.text().await.unwrap()
        }
    };
    // minijinja escapes `/` too.
    let slashes = |page: &str| page.replace("&#x2f;", "/");
    let front = html("/".into()).await;
    for text in [
        "main",
        "dev",
        "v1",
        &second.to_string(),
        "first &lt;b&gt;commit",
    ] {
        assert!(front.contains(text), "{text} not in {front}");
    }
    for page in [
        front.clone(),
        html("/log/main".into()).await,
        html(format!("/snapshot/{second}")).await,
        html(format!("/snapshot/{}", f.first)).await,
        html(format!("/diff?from={}&to={second}", f.first)).await,
    ] {
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<b>commit"), "{page}");
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "no external asset"
        );
    }
    let log = slashes(&html("/log/main".into()).await);
    assert!(log.contains("&lt;script&gt;alert(1)&lt;"), "{log}");
    assert!(log.contains("&lt;img src=x"), "{log}");
    let tree = slashes(&html(format!("/snapshot/{}", f.first)).await);
    for text in [
        "/g/t",
        "int32",
        "[4, 6]",
        "[2, 3]",
        "&lt;script&gt;x&lt;",
        "bytes",
    ] {
        assert!(tree.contains(text), "{text} not in {tree}");
    }
    assert!(
        tree.contains(&format!("/preview/{}/g/t", f.first)),
        "{tree}"
    );
    let preview = slashes(&html(format!("/preview/{}/g/t", f.first)).await);
    assert_eq!(preview.matches("<rect").count(), 24, "{preview}");
    for text in [
        "[0, 0] = 0",
        "[0, 3] = 100",
        "[2, 0] = 10",
        "[3, 5] = -1",
        "int32",
    ] {
        assert!(preview.contains(text), "{text} not in {preview}");
    }
    let diff = html(format!("/diff?from={}&to={second}", f.first)).await;
    assert!(diff.contains("<svg"), "{diff}");
    assert_eq!(diff.matches("class=\"on\"").count(), 1, "{diff}");
    assert_eq!(diff.matches("class=\"off\"").count(), 3, "{diff}");
    for (path, status) in [
        ("/snapshot/nope".to_string(), 400),
        (format!("/snapshot/{}", SnapshotId::random()), 404),
        ("/log/nope".to_string(), 404),
        ("/diff?from=main".to_string(), 400),
        (format!("/preview/{}/g", f.first), 404),
        (format!("/preview/{}/nope", f.first), 404),
        ("/preview/nope/g/t".to_string(), 400),
        (format!("/preview/{second}/big"), 413),
    ] {
        assert_eq!(get(&server.url(&path)).await.status(), status, "{path}");
    }
    server.stop().await;
}

/// Many more clients than connection slots: every request is answered (the others
/// wait in the listen backlog; near the limit connections close after one answer),
/// and the server still answers a well-behaved client afterwards.
/// Raises this process's open-file limit to its hard limit (10,000 client sockets
/// need more than the common soft limit of 1,024); the limit reached.
fn raise_open_file_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write or read the one struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// 10,000 connections, each with its request sent before any answer is read, on a
/// server limited to 16 at a time: every one is answered, and a well-behaved client
/// is answered while they are all open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_parallel_clients_all_get_answers() {
    const CLIENTS: usize = 10_000;
    let limit = raise_open_file_limit();
    assert!(
        limit >= CLIENTS as u64 + 512,
        "the open-file limit ({limit}) is too low for {CLIENTS} client sockets"
    );
    let f = fixture().await;
    let server = start(
        &f.repo,
        ServeOptions {
            max_connections: 16,
            ..ServeOptions::default()
        },
    )
    .await;
    let addr = server.addr;
    let started = std::time::Instant::now();
    let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
    let (checked_tx, checked_rx) = std::sync::mpsc::channel::<()>();
    // The bytes of chunk (0, 1) of `g/t`: 100..=105 as little-endian int32.
    let chunk_0_1: Vec<u8> = (100..106i32).flat_map(i32::to_le_bytes).collect();
    let clients = tokio::task::spawn_blocking(move || {
        let conns: Vec<std::net::TcpStream> = (0..CLIENTS)
            .map(|_| {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.write_all(
                    b"GET /zarr/branch/main/g/t/c/0/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                )
                .unwrap();
                s
            })
            .collect();
        let _ = opened_tx.send(());
        // Answers are read only once the well-behaved client has had its own.
        let _ = checked_rx.recv_timeout(Duration::from_secs(60));
        conns
            .into_iter()
            .filter(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let mut out = Vec::new();
                let _ = s.read_to_end(&mut out);
                out.starts_with(b"HTTP/1.1 200 OK") && out.ends_with(&chunk_0_1)
            })
            .count()
    });
    opened_rx.await.unwrap();
    let opened = started.elapsed();
    let polite = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), get(&server.url("/api/refs")))
        .await
        .expect("a well-behaved client is answered while 10,000 connections are open");
    assert_eq!(r.status(), 200);
    let polite = polite.elapsed();
    checked_tx.send(()).unwrap();
    let answered = clients.await.unwrap();
    assert_eq!(answered, CLIENTS);
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "opened in {opened:?}, polite client in {polite:?}, all in {:?}",
        started.elapsed()
    );
    server.stop().await;
}

/// Playwright script: navigates front page → log → commit → diff, and commit →
/// preview; checks texts, escaping (no dialog opens, markup shows as text), and no
/// console error; screenshots into `$FLOE_SERVE_SCREENS` when set.
const BROWSER_CHECK: &str = r#"
import os, sys
from playwright.sync_api import sync_playwright

base, chromium = sys.argv[1], sys.argv[2]
screens = os.environ.get("FLOE_SERVE_SCREENS")
problems = []
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.on("console", lambda m: m.type == "error" and problems.append("console: " + m.text))
    page.on("pageerror", lambda e: problems.append("page error: " + str(e)))
    page.on("dialog", lambda d: (problems.append("dialog: " + d.message), d.dismiss()))
    page.on("requestfailed", lambda r: problems.append("request failed: " + r.url))

    def visit(name, expected):
        page.wait_for_load_state("networkidle")
        text = page.inner_text("body")
        for e in expected:
            if e not in text:
                problems.append(f"{name}: `{e}` not shown")
        if page.locator("script").count():
            problems.append(f"{name}: a script element")
        if screens:
            page.screenshot(path=os.path.join(screens, name + ".png"), full_page=True)
        print("visited", name, page.url)

    page.goto(base + "/")
    visit("front", ["main", "dev", "v1", "<script>alert(1)</script> second", "first <b>commit</b>"])
    page.click("text=the whole log of main")
    visit("log", ["<img src=x onerror=alert(2)>", "Repository initialized"])
    page.click("table tr:nth-child(2) td:nth-child(3) a")
    visit("commit", ["Tree", "/g/t", "int32", "<script>x</script>", "second"])
    commit = page.url
    page.click("text=diff")
    visit("diff", ["Chunks changed", "/g/t: 1 chunk(s)"])
    if page.locator("svg rect.on").count() != 1:
        problems.append("diff: not one changed chunk drawn")
    page.goto(commit)
    page.click("tr:has-text('/g/t') >> text=preview")
    visit("preview", ["Preview of /g/t", "int32"])
    if page.locator("svg rect").count() != 24:
        problems.append("preview: not 24 cells")
    browser.close()
for p_ in problems:
    print("PROBLEM", p_)
sys.exit(1 if problems else 0)
"#;

/// The history browser in headless Chromium (Debian's, driven by the Playwright of
/// the docs venv): both are required under CI=true (`.ci/run` installs them before the
/// tests), skipped otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_browser_in_headless_chromium() {
    let chromium = std::env::var("FLOE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let Some(()) = crate::common::require(
        std::path::Path::new(&chromium).exists().then_some(()),
        "chromium (apt-get install chromium)",
    ) else {
        return;
    };
    let venv = std::env::var("FLOE_VENV_DIR").unwrap_or_else(|_| "/opt/floe-py".into());
    let python = std::path::PathBuf::from(venv).join("pydocs/bin/python");
    let has_playwright = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", "import playwright.sync_api"])
            .status()
            .is_ok_and(|s| s.success());
    let Some(()) =
        crate::common::require(has_playwright.then_some(()), "the docs venv's Playwright")
    else {
        return;
    };
    let f = fixture().await;
    let s = f.repo.writable_session("main").await.unwrap();
    s.store()
        .set("g/t/c/1/1", Bytes::from(vec![0u8; 24]))
        .await
        .unwrap();
    s.commit_with(
        "<script>alert(1)</script> second",
        [("who".to_string(), json!("<img src=x onerror=alert(2)>"))].into(),
        floe::CommitOptions::default(),
    )
    .await
    .unwrap();
    let server = start(&f.repo, ServeOptions::default()).await;
    let base = server.url("");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .args(["-c", BROWSER_CHECK, &base, &chromium])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("visited").count(), 5, "{text}");
    server.stop().await;
}

/// Bytes of the one chunk of `big/c/0` in [`big_chunk_repo`]: 8 MiB, every byte a
/// function of its position, so a piece out of place shows.
fn big_chunk_bytes() -> Vec<u8> {
    (0..8u32 << 20)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// A repository at `dir/repo` whose array `big` holds one chunk of 8 MiB (eight of
/// the server's 1 MiB pieces), committed on `main`.
async fn big_chunk_repo(dir: &std::path::Path) -> Repository {
    let repo = Repository::create(
        Arc::new(LocalStorage::new(&dir.join("repo")).unwrap()),
        None,
    )
    .await
    .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let store = s.store();
    store.set("zarr.json", group_json(json!({}))).await.unwrap();
    store
        .set(
            "big/zarr.json",
            array_json(&[8 << 20], &[8 << 20], "uint8", json!(0)),
        )
        .await
        .unwrap();
    store
        .set("big/c/0", Bytes::from(big_chunk_bytes()))
        .await
        .unwrap();
    s.commit("one big chunk").await.unwrap();
    repo
}

/// A chunk longer than a piece is streamed: whole and ranged reads across piece
/// boundaries equal the stored bytes, with the declared length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_longer_than_a_piece_stream_whole_and_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let repo = big_chunk_repo(dir.path()).await;
    let want = big_chunk_bytes();
    let server = start(&repo, ServeOptions::default()).await;
    let url = server.url("/zarr/branch/main/big/c/0");
    let r = get(&url).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()[header::CONTENT_LENGTH].to_str().unwrap(),
        want.len().to_string()
    );
    assert!(
        r.bytes().await.unwrap()[..] == want[..],
        "whole chunk differs"
    );
    for (range, from, to) in [
        ("bytes=1000000-3500000", 1_000_000, 3_500_001),
        ("bytes=1048576-", 1 << 20, 8 << 20),
        ("bytes=-2097153", (8 << 20) - 2_097_153, 8 << 20),
    ] {
        let r = client()
            .get(&url)
            .header(header::RANGE, range)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 206, "{range}");
        let got = r.bytes().await.unwrap();
        assert_eq!(got.len(), to - from, "{range}");
        assert!(got[..] == want[from..to], "{range}: bytes differ");
    }
    server.stop().await;

    // One read at a time: eight clients at once still get every byte.
    let server = start(
        &repo,
        ServeOptions {
            max_concurrent_reads: 1,
            ..ServeOptions::default()
        },
    )
    .await;
    let url = server.url("/zarr/branch/main/big/c/0");
    let answers = futures::future::join_all((0..8).map(|_| async {
        let r = get(&url).await;
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap()
    }))
    .await;
    for got in answers {
        assert!(got[..] == want[..], "a body differs");
    }
    server.stop().await;
}

/// A chunk whose object file was cut short or removed behind the server's back
/// answers 500 (never a body shorter than its `Content-Length`), and the server
/// goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_file_cut_short_or_removed_answers_500() {
    let dir = tempfile::tempdir().unwrap();
    let repo = big_chunk_repo(dir.path()).await;
    let server = start(&repo, ServeOptions::default()).await;
    let url = server.url("/zarr/branch/main/big/c/0");
    assert_eq!(get(&url).await.status(), 200);
    let files: Vec<_> = std::fs::read_dir(dir.path().join("repo/chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&files[0])
        .unwrap()
        .set_len(1000)
        .unwrap();
    for range in [None, Some("bytes=0-99"), Some("bytes=2000000-")] {
        let mut req = client().get(&url);
        if let Some(range) = range {
            req = req.header(header::RANGE, range);
        }
        assert_eq!(
            req.send().await.unwrap().status(),
            500,
            "cut short, {range:?}"
        );
    }
    std::fs::remove_file(&files[0]).unwrap();
    assert_eq!(get(&url).await.status(), 500, "removed");
    let r = get(&server.url("/zarr/branch/main/zarr.json")).await;
    assert_eq!(r.status(), 200);
    server.stop().await;
}

/// SIGTERM while a client is part-way through a streamed chunk: the server takes no
/// new connection, finishes the answer in flight (every byte, in order) and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_at_sigterm_is_finished() {
    let dir = tempfile::tempdir().unwrap();
    drop(big_chunk_repo(dir.path()).await);
    let want = big_chunk_bytes();
    let repo = dir.path().join("repo");
    let (mut child, addr) = KillOnDrop::serve(floe_bin().args([
        "serve",
        repo.to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ]));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /zarr/branch/main/big/c/0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    // Read the head and a little of the body, then stop reading.
    let mut answer = vec![0u8; 64 << 10];
    let mut got = 0;
    while got < answer.len() {
        let n = s.read(&mut answer[got..]).unwrap();
        assert!(n > 0, "the answer ended early");
        got += n;
    }
    answer.truncate(got);
    child.terminate();
    // The listener closes: a new connection is refused (or reset) from now on.
    let started = std::time::Instant::now();
    loop {
        match std::net::TcpStream::connect(addr) {
            Err(_) => break,
            Ok(mut c) => {
                let _ = c.write_all(b"GET /api/refs HTTP/1.1\r\nHost: x\r\n\r\n");
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut b = [0u8; 16];
                if matches!(c.read(&mut b), Ok(0) | Err(_)) {
                    break;
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still answering new connections after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited with a request in flight"
    );
    // Now the slow client reads the rest.
    s.read_to_end(&mut answer).unwrap();
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&answer[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", want.len())),
        "{head}"
    );
    assert!(answer[head_end..] == want[..], "the body differs");
    child.exits_cleanly("no exit after the last answer");
}
