//! Virtual chunk reads from hostile HTTP servers (floe issue 27, class 3): reads are
//! bounded in memory and in time, and what cannot succeed is not retried.
//!
//! Each test runs a raw HTTP/1.1 server on 127.0.0.1 (a tokio task that stops with
//! the test) that misbehaves in one way:
//!
//! - `overlong`: answers a 16-byte range request with `206`, the right
//!   `Content-Range`, and a body announced as 10 GiB (sent until the client hangs up,
//!   at most 256 MiB): floe must stop after the range with a typed error.
//! - `drip`: sends its response headers one byte per second: floe must give up at the
//!   configured read deadline.
//! - `status`: answers every request with a fixed status (`404`, `403`): floe must not
//!   repeat the request.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{array_def, p};
use floe::error::VirtualChunkError;
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::session::Session;
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::{Error, OpenOptions, Repository};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the server misbehaves.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// `206` for the asked range with a 10 GiB body, sent until the client hangs up
    /// (at most [`OVERLONG_CAP`] bytes).
    Overlong,
    /// The same with a chunked (unannounced, endless) body (refused for want of a
    /// `Content-Length`).
    OverlongChunked,
    /// Response headers one byte per second.
    Drip,
    /// This status, with an empty body, for every request.
    Status(u16),
}

/// Most body bytes the overlong server sends (so that a client that reads everything
/// fails the test instead of exhausting the machine).
const OVERLONG_CAP: u64 = 256 << 20;

/// A running server: requests received, body bytes sent.
struct RawServer {
    addr: std::net::SocketAddr,
    requests: Arc<AtomicUsize>,
    sent: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn raw_server(behaviour: Behaviour) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let (r, s) = (Arc::clone(&requests), Arc::clone(&sent));
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (r, s) = (Arc::clone(&r), Arc::clone(&s));
            tokio::spawn(async move {
                let _ = serve(sock, behaviour, &r, &s).await;
            });
        }
    });
    RawServer {
        addr,
        requests,
        sent,
        task,
    }
}

/// Answers the requests of one connection.
async fn serve(
    mut sock: TcpStream,
    behaviour: Behaviour,
    requests: &AtomicUsize,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if sock.read(&mut byte).await? == 0 {
                return Ok(());
            }
            head.push(byte[0]);
        }
        requests.fetch_add(1, Ordering::SeqCst);
        let head = String::from_utf8_lossy(&head).to_string();
        let range = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            let (a, b) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
            k.eq_ignore_ascii_case("range")
                .then(|| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))?
        });
        let (a, b) = range.unwrap_or((0, 15));
        match behaviour {
            Behaviour::Overlong | Behaviour::OverlongChunked => {
                let framing = match behaviour {
                    Behaviour::Overlong => format!("Content-Length: {}", 10u64 << 30),
                    _ => "Transfer-Encoding: chunked".to_string(),
                };
                let header = format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{}\r\n\
                     {framing}\r\nConnection: close\r\n\r\n",
                    1u64 << 40
                );
                sock.write_all(header.as_bytes()).await?;
                let block = vec![7u8; 64 << 10];
                let chunked = matches!(behaviour, Behaviour::OverlongChunked);
                while sent.load(Ordering::SeqCst) < OVERLONG_CAP {
                    if chunked {
                        sock.write_all(format!("{:x}\r\n", block.len()).as_bytes())
                            .await?;
                    }
                    sock.write_all(&block).await?;
                    if chunked {
                        sock.write_all(b"\r\n").await?;
                    }
                    sent.fetch_add(block.len() as u64, Ordering::SeqCst);
                }
                return Ok(());
            }
            Behaviour::Drip => {
                let answer = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-15/16\r\n\
                               Content-Length: 16\r\n\r\n0123456789abcdef";
                for b in answer {
                    sock.write_all(std::slice::from_ref(b)).await?;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            Behaviour::Status(code) => {
                let answer = format!(
                    "HTTP/1.1 {code} Refused\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
                );
                sock.write_all(answer.as_bytes()).await?;
            }
        }
    }
}

/// A repository whose array `/v` (64 `uint8`, chunks of 16) has its 4 chunks in
/// `http://<server>/data/src.bin` (chunk `i` at bytes `16 i .. 16 i + 16`), opened
/// authorizing `http://<server>/data/`, with read deadline `deadline` when given.
/// Returns the directory (kept alive) and a session holding the refs.
async fn repo_over(server: &RawServer, deadline: Option<Duration>) -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let base = format!("http://{}", server.addr);
    let mut config = RepositoryConfig::default();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: None,
        url_prefix: format!("{base}/"),
        store: ContainerStore::Http,
    });
    let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
    Repository::create(storage.clone(), Some(config))
        .await
        .unwrap();
    let access = VirtualAccess::prefixes(&[format!("{base}/data/")]).unwrap();
    let mut opts = OpenOptions::default().virtual_access(access);
    if let Some(d) = deadline {
        opts = opts.virtual_read_deadline(d);
    }
    let repo = Repository::open_with(storage, opts).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/v"), array_def("/v", &[64], &[16], "uint8"))
        .unwrap();
    for i in 0..4u64 {
        s.set_chunk_ref(
            &p("/v"),
            &[i],
            Some(ChunkPayload::Virtual(VirtualChunkRef {
                location: format!("{base}/data/src.bin"),
                offset: 16 * i,
                length: 16,
                checksum: None,
            })),
        )
        .unwrap();
    }
    (dir, s)
}

/// The virtual chunk error of reading chunk 0, with the time it took; bounded by
/// `limit` so that a client that hangs fails the test.
async fn read_chunk0(s: &Session, limit: Duration) -> (VirtualChunkError, Duration) {
    let start = Instant::now();
    let res = tokio::time::timeout(limit, s.get_chunk(&p("/v"), &[0], None))
        .await
        .unwrap_or_else(|_| panic!("the read still runs after {limit:?}"));
    match res {
        Err(Error::VirtualChunk { source, .. }) => (source, start.elapsed()),
        other => panic!("expected a virtual chunk error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_206_body_stops_after_the_range() {
    for behaviour in [Behaviour::Overlong, Behaviour::OverlongChunked] {
        let server = raw_server(behaviour).await;
        let (_dir, s) = repo_over(&server, None).await;
        let (err, took) = read_chunk0(&s, Duration::from_secs(60)).await;
        let expected = match behaviour {
            Behaviour::Overlong => matches!(
                err,
                VirtualChunkError::OverlongResponse {
                    offset: 0,
                    end: 16,
                    ..
                }
            ),
            // object_store refuses a response without Content-Length before its body.
            _ => matches!(err, VirtualChunkError::Backend { .. }),
        };
        assert!(expected, "{behaviour:?}: got {err:?}");
        assert!(
            took < Duration::from_secs(10),
            "{behaviour:?}: took {took:?}"
        );
        // The client hung up after the range: the server got no further than what
        // the socket buffers hold (a client reading everything would take 256 MiB).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let sent = server.sent.load(Ordering::SeqCst);
        assert!(
            sent < 64 << 20,
            "{behaviour:?}: the server could send {sent} bytes for a 16-byte range"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dripping_headers_fail_at_the_read_deadline() {
    let server = raw_server(Behaviour::Drip).await;
    let deadline = Duration::from_secs(2);
    let (_dir, s) = repo_over(&server, Some(deadline)).await;
    let (err, took) = read_chunk0(&s, Duration::from_secs(30)).await;
    assert!(
        matches!(err, VirtualChunkError::DeadlineExceeded { deadline: d, .. } if d == deadline),
        "expected DeadlineExceeded, got {err:?}"
    );
    assert!(
        took >= deadline && took < deadline + Duration::from_secs(2),
        "the read took {took:?} with a {deadline:?} deadline"
    );
}

#[test]
fn the_default_read_deadline_is_a_minute() {
    assert_eq!(
        floe::virtual_refs::fetch::DEFAULT_READ_DEADLINE,
        Duration::from_secs(60)
    );
    let r = floe::virtual_refs::VirtualChunkResolver::new(vec![], VirtualAccess::default(), None);
    assert_eq!(r.read_deadline(), Duration::from_secs(60));
}

/// Reads the 4 chunks of `/v` (one merged request) from a server answering
/// `status`; returns the errors and the number of requests the server received.
async fn read_all_from_status(status: u16) -> (Vec<VirtualChunkError>, usize) {
    let server = raw_server(Behaviour::Status(status)).await;
    let (_dir, s) = repo_over(&server, None).await;
    let chunks = (0..4u64).map(|i| (p("/v"), vec![i])).collect();
    let outcomes: Vec<_> = tokio::time::timeout(
        Duration::from_secs(60),
        s.get_chunks(chunks, 4).collect::<Vec<_>>(),
    )
    .await
    .expect("the reads still run after 60 s");
    let errors = outcomes
        .into_iter()
        .map(|(_, r)| match r {
            Err(Error::VirtualChunk { source, .. }) => source,
            other => panic!("expected a virtual chunk error, got {other:?}"),
        })
        .collect();
    (errors, server.requests.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_is_not_retried() {
    let (errors, requests) = read_all_from_status(404).await;
    assert_eq!(errors.len(), 4);
    for e in &errors {
        assert!(
            matches!(e, VirtualChunkError::SourceMissing { .. }),
            "expected SourceMissing, got {e:?}"
        );
    }
    assert_eq!(requests, 1, "one merged request, never repeated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_is_not_retried() {
    let (errors, requests) = read_all_from_status(403).await;
    assert_eq!(errors.len(), 4);
    for e in &errors {
        assert!(
            matches!(e, VirtualChunkError::AccessDenied { .. }),
            "expected AccessDenied, got {e:?}"
        );
    }
    assert_eq!(requests, 1, "one merged request, no HEAD, never repeated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_chunk_403_is_one_request() {
    let server = raw_server(Behaviour::Status(403)).await;
    let (_dir, s) = repo_over(&server, None).await;
    let (err, _) = read_chunk0(&s, Duration::from_secs(60)).await;
    assert!(
        matches!(err, VirtualChunkError::AccessDenied { .. }),
        "expected AccessDenied, got {err:?}"
    );
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        1,
        "no HEAD after a 403"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_virtual_read_deadline_bounds_a_dripping_server() {
    let server = raw_server(Behaviour::Drip).await;
    let (dir, s) = repo_over(&server, None).await;
    s.commit("virtual refs").await.unwrap();
    let repo = dir.path().to_str().unwrap().to_string();
    let prefix = format!("http://{}/data/", server.addr);
    let start = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["cat", &repo, "/v", "--region", "0:4"])
            .args(["--allow-virtual", &prefix, "--virtual-read-deadline", "2"])
            .env_remove("FLOE_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("within the 2-second deadline"), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // A bad value is a usage error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["cat", dir.path().to_str().unwrap(), "/v"])
        .args(["--virtual-read-deadline", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a positive number of seconds"));
}
