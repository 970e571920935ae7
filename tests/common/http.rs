//! A tiny HTTP/1.1 server on 127.0.0.1 for virtual chunk tests and benches: one
//! request per connection, answered by a responder function; records every request
//! (method, path, byte range) and can delay each answer (a latency model). Stops when
//! dropped.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request the server received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The request path.
    pub path: String,
    /// The `Range: bytes=a-b` header, inclusive bounds, when there was one.
    pub range: Option<(usize, usize)>,
    /// The `Authorization` header, when there was one (S3 signatures name the
    /// access key id in it).
    pub authorization: Option<String>,
}

/// A running server; see the module documentation.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Every request received, in arrival order.
    pub hits: Arc<Mutex<Vec<Hit>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// The requests received so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The `GET` requests received so far.
    pub fn gets(&self) -> Vec<Hit> {
        self.hits()
            .into_iter()
            .filter(|h| h.method == "GET")
            .collect()
    }

    /// Forgets the requests received so far.
    pub fn clear(&self) {
        self.hits.lock().unwrap().clear();
    }
}

/// Answers a request: `(method, path, range)` to the raw HTTP response.
pub type Responder = dyn Fn(&str, &str, Option<(usize, usize)>) -> Vec<u8> + Send + Sync;

/// Starts a server answering with `respond`, after `delay` per request.
pub async fn server_with_delay(respond: Arc<Responder>, delay: Duration) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(Mutex::new(Vec::new()));
    let task_hits = Arc::clone(&hits);
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let respond = Arc::clone(&respond);
            let hits = Arc::clone(&task_hits);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                // Bounded: 16 KiB of headers, 5 seconds.
                let read_head = async {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16384 {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return false,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    true
                };
                if !matches!(
                    tokio::time::timeout(Duration::from_secs(5), read_head).await,
                    Ok(true)
                ) {
                    return;
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let mut first = head.lines().next().unwrap_or("").split(' ');
                let method = first.next().unwrap_or("").to_string();
                let path = first.next().unwrap_or("").to_string();
                let range = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    if !k.eq_ignore_ascii_case("range") {
                        return None;
                    }
                    let (a, b) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
                    Some((a.parse().ok()?, b.parse().ok()?))
                });
                let authorization = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("authorization")
                        .then(|| v.trim().to_string())
                });
                hits.lock().unwrap().push(Hit {
                    method: method.clone(),
                    path: path.clone(),
                    range,
                    authorization,
                });
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let resp = respond(&method, &path, range);
                let _ = sock.write_all(&resp).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Server { addr, hits, task }
}

/// Starts a server answering with `respond` at once.
pub async fn server(respond: Arc<Responder>) -> Server {
    server_with_delay(respond, Duration::ZERO).await
}

/// A 206 (or 200 for HEAD) answer with `body`'s requested range; a 416 for a range
/// starting past the end.
pub fn content(method: &str, body: &[u8], range: Option<(usize, usize)>) -> Vec<u8> {
    if method == "HEAD" {
        return format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
    }
    let (a, b) = range.unwrap_or((0, body.len().saturating_sub(1)));
    if a >= body.len() {
        return format!(
            "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{}\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
    }
    let b = b.min(body.len() - 1);
    let mut out = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len(),
        b + 1 - a
    )
    .into_bytes();
    out.extend_from_slice(&body[a..=b]);
    out
}

/// A 302 to `location`.
pub fn redirect(location: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    )
    .into_bytes()
}

/// A 404.
pub fn not_found() -> Vec<u8> {
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
}
