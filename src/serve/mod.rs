//! `floe serve`: every version of a repository over HTTP, read-only, as plain Zarr v3
//! stores and a JSON API, on the library's public API.
//!
//! URLs:
//!
//! - `/zarr/branch/{name}/{key}`, `/zarr/tag/{name}/{key}`, `/zarr/snapshot/{id}/{key}`:
//!   one plain Zarr v3 store per version; `{key}` is a Zarr store key (`zarr.json`,
//!   `a/b/zarr.json`, chunk keys in the array's chunk key encoding). `GET` and `HEAD`,
//!   single byte ranges (`bytes=a-b`, `a-`, `-n`: 206, or 416 with
//!   `Content-Range: bytes */len`; a request of several ranges is answered 200 with
//!   the whole value), strong `ETag`s (the snapshot id and the key), `If-None-Match`
//!   (304). Snapshot URLs are cached forever (`public, max-age=31536000, immutable`);
//!   branch and tag URLs answer `Cache-Control: no-cache` (revalidate every time,
//!   cheap with the ETag). A branch URL is served directly, not redirected to its
//!   snapshot URL: Zarr clients resolve every key against the store URL they opened,
//!   so a redirect would cost a round trip per key and mix snapshots within one
//!   read. Each group's `zarr.json` carries zarr-python's inline
//!   `consolidated_metadata` of every node below it, so a client opens a whole
//!   hierarchy in one request. A chunk never written answers 404 (readers use the
//!   fill value); a virtual chunk outside the authorized containers answers 403.
//! - `/api/refs`, `/api/log/{ref}?limit=&after=`, `/api/snapshot/{id}`,
//!   `/api/tree/{ref}`, `/api/diff?from=&to=`, `/api/ops-log`: JSON.
//! - `/`, `/log/{ref}`, `/snapshot/{id}`, `/diff?from=&to=`, `/preview/{id}/{array}`:
//!   the history browser, server-rendered HTML with every value escaped and no
//!   external asset.
//!
//! Limits ([`ServeOptions`]): loopback unless [`ServeOptions::public`], an optional
//! bearer token, CORS off unless one origin is given, a bounded number of
//! connections, a header-read timeout (slow clients are cut off), a per-request
//! timeout, bounded request headers; every path segment is checked (no `..`, `.`,
//! empty segments, encoded `/` or `\`, no `%` left after decoding) before routing.
//!
//! Memory: on Linux, chunk bytes of a repository on local disk never enter the
//! process (each requested range of a chunk file is mapped, not read, and the kernel
//! sends it from the file with `sendfile(2)`); chunks read from other storage, and
//! virtual chunks, are read in pieces of at most 1 MiB,
//! [`ServeOptions::max_concurrent_reads`] at once, and a connection holds at most one
//! piece while its client takes it. What grows
//! with clients is hyper's state per connection (about 30 KiB: an 8 KiB read buffer,
//! an 8 KiB write buffer, the request in flight), bounded by
//! [`ServeOptions::max_connections`].
//!
//! Access logs go to `tracing` (one span per request with method, URI and peer, one
//! event per response with status and latency: target `tower_http::trace`, level
//! INFO). [`ShutdownHandle::shutdown`]
//! stops accepting connections and lets requests in flight finish.

mod api;
mod browser;
// `unsafe`: mapping chunk files (memmap2).
#[allow(unsafe_code)]
mod file_body;
mod http;
mod versions;
mod zarr;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;
use tower_http::cors::CorsLayer;
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};

use crate::repository::Repository;
use crate::virtual_refs::VirtualAccess;

use versions::Versions;

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without [`ServeOptions::public`].
    #[error(
        "refusing to listen on {addr}, which is not a loopback address: pass --public to \
         serve the repository to other machines"
    )]
    NotLoopback {
        /// The address refused.
        addr: SocketAddr,
    },
    /// An invalid option (an empty token, a bad CORS origin).
    #[error("{0}")]
    InvalidOption(String),
    /// Binding or accepting failed.
    #[error("cannot listen on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// How the server listens and what it allows.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Address to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// Allow a non-loopback `bind`.
    pub public: bool,
    /// Bearer token every request must carry (`Authorization: Bearer TOKEN`).
    pub token: Option<String>,
    /// The one origin allowed cross-origin requests (CORS); none by default.
    pub cors_origin: Option<String>,
    /// Virtual chunk URL prefixes authorized (the repository must have been opened
    /// with the same authorization, which the session reads enforce); reads of other
    /// virtual chunks answer 403.
    pub virtual_access: VirtualAccess,
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Longest time to receive a request's headers (slow clients are cut off).
    pub header_read_timeout: Duration,
    /// Longest time to answer one request (408 after it).
    pub request_timeout: Duration,
    /// Largest request head (request line and headers), in bytes (431 above it).
    pub max_header_bytes: usize,
    /// Longest wait, at shutdown, for requests in flight.
    pub shutdown_grace: Duration,
    /// Chunk reads from storage at once (each holds up to a 1 MiB piece); further
    /// requests wait for a turn without holding memory or a blocking thread. Native
    /// chunks of a repository on local disk are not read: their files are mapped and
    /// sent by the kernel (`sendfile(2)` on Linux), holding no memory.
    pub max_concurrent_reads: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public: false,
            token: None,
            cors_origin: None,
            virtual_access: VirtualAccess::none(),
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            shutdown_grace: Duration::from_secs(30),
            max_concurrent_reads: 32,
        }
    }
}

/// The client's address, for the access log.
#[derive(Clone, Copy, Debug)]
struct Peer(SocketAddr);

/// Shared state of the request handlers.
#[derive(Debug)]
pub(crate) struct AppState {
    repo: Repository,
    versions: Versions,
    virtual_access: VirtualAccess,
    token: Option<String>,
    /// Turns for chunk reads ([`ServeOptions::max_concurrent_reads`]).
    reads: Arc<Semaphore>,
}

/// Stops a running [`Server`]: no new connections, requests in flight finish.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    /// Asks the server to stop.
    pub fn shutdown(&self) {
        let _ = self.tx.send(true);
    }
}

/// A server bound to its address, not yet accepting connections: [`Server::run`].
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    router: Router,
    options: ServeOptions,
    shutdown_tx: Arc<watch::Sender<bool>>,
    shutdown_rx: watch::Receiver<bool>,
}

impl Server {
    /// Binds `options.bind` to serve `repo`.
    ///
    /// # Errors
    /// [`ServeError::NotLoopback`] for a non-loopback address without
    /// [`ServeOptions::public`]; [`ServeError::InvalidOption`] for an empty token or
    /// a CORS origin that is not an origin; [`ServeError::Io`] when binding fails.
    pub async fn bind(repo: Repository, options: ServeOptions) -> Result<Server, ServeError> {
        if !options.bind.ip().is_loopback() && !options.public {
            return Err(ServeError::NotLoopback { addr: options.bind });
        }
        if options.token.as_deref().is_some_and(str::is_empty) {
            return Err(ServeError::InvalidOption(
                "the bearer token is empty".into(),
            ));
        }
        let cors = match &options.cors_origin {
            Some(origin) => Some(http::cors_layer(origin)?),
            None => None,
        };
        let listener = listen(options.bind).map_err(|source| ServeError::Io {
            addr: options.bind,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Io {
            addr: options.bind,
            source,
        })?;
        let state = Arc::new(AppState {
            versions: Versions::new(repo.clone()),
            repo,
            virtual_access: options.virtual_access.clone(),
            token: options.token.clone(),
            reads: Arc::new(Semaphore::new(options.max_concurrent_reads.max(1))),
        });
        let router = router(state, cors, options.request_timeout);
        let (tx, rx) = watch::channel(false);
        Ok(Server {
            listener,
            addr,
            router,
            options,
            shutdown_tx: Arc::new(tx),
            shutdown_rx: rx,
        })
    }

    /// The address bound (with the port chosen when `bind` gave port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that stops [`Server::run`].
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            tx: Arc::clone(&self.shutdown_tx),
        }
    }

    /// Accepts and serves connections until [`ShutdownHandle::shutdown`], then waits
    /// (at most [`ServeOptions::shutdown_grace`]) for requests in flight.
    ///
    /// # Errors
    /// None so far: failures to accept one connection are logged and skipped.
    pub async fn run(self) -> Result<(), ServeError> {
        let Server {
            listener,
            router,
            options,
            mut shutdown_rx,
            ..
        } = self;
        let limit = Arc::new(Semaphore::new(options.max_connections.max(1)));
        let graceful = GracefulShutdown::new();
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(options.header_read_timeout)
            .max_buf_size(options.max_header_bytes.max(8192))
            // Bodies are handed to the connection as they are (never copied into
            // hyper's buffer): mapped chunk ranges reach `file_body::Connection`,
            // which sends them from their files.
            .writev(true)
            .keep_alive(true);
        // Near the connection limit, new connections close after their first
        // answer: an idle kept-alive connection would hold its slot until the
        // header-read timeout while other clients wait to be accepted.
        let mut closing = builder.clone();
        closing.keep_alive(false);
        let max = options.max_connections.max(1);
        loop {
            if *shutdown_rx.borrow() {
                break;
            }
            let permit = tokio::select! {
                p = Arc::clone(&limit).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown_rx.changed() => break,
            };
            let (stream, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(target: "floe::serve", error = %e, "accept failed");
                        // Out of file descriptors and the like: do not spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = shutdown_rx.changed() => break,
            };
            let _ = stream.set_nodelay(true);
            let service = TowerToHyperService::new(router.clone().map_request(
                move |mut req: axum::extract::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(Peer(peer));
                    req
                },
            ));
            let crowded = limit.available_permits() < max / 4 + 1;
            let conn = if crowded { &closing } else { &builder }
                .serve_connection(TokioIo::new(file_body::Connection::new(stream)), service);
            let conn = graceful.watch(conn);
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(target: "floe::serve", %peer, error = %e, "connection ended");
                }
                drop(permit);
            });
        }
        drop(listener);
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(options.shutdown_grace) => {
                tracing::warn!(target: "floe::serve", "requests still in flight at shutdown");
            }
        }
        Ok(())
    }
}

/// Connections the kernel queues while every slot is taken (capped by the system's
/// `somaxconn`): a burst of clients waits there rather than being dropped.
const LISTEN_BACKLOG: u32 = 4096;

/// A listening socket on `addr` with a [`LISTEN_BACKLOG`] queue.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The routes, with the access log, the path check, the token check, CORS and the
/// request timeout.
fn router(state: Arc<AppState>, cors: Option<CorsLayer>, timeout: Duration) -> Router {
    use axum::middleware::from_fn_with_state;
    use axum::routing::get;
    let app = Router::new()
        .route("/", get(browser::index))
        .route("/log/{reference}", get(browser::log))
        .route("/snapshot/{id}", get(browser::snapshot))
        .route("/diff", get(browser::diff))
        .route("/preview/{id}/{*path}", get(browser::preview))
        .route("/api", get(api::index))
        .route("/zarr/{*rest}", get(zarr::serve_key))
        .route("/api/refs", get(api::refs))
        .route("/api/log/{reference}", get(api::log))
        .route("/api/snapshot/{id}", get(api::snapshot))
        .route("/api/tree/{reference}", get(api::tree))
        .route("/api/diff", get(api::diff))
        .route("/api/ops-log", get(api::ops_log))
        .fallback(http::not_found)
        .layer(from_fn_with_state(Arc::clone(&state), http::check_token))
        .layer(axum::middleware::from_fn(http::check_path))
        .with_state(state);
    let app = match cors {
        Some(cors) => app.layer(cors),
        None => app,
    };
    app.layer(tower_http::timeout::TimeoutLayer::with_status_code(
        ::http::StatusCode::REQUEST_TIMEOUT,
        timeout,
    ))
    .layer(
        TraceLayer::new_for_http()
            .make_span_with(|req: &axum::extract::Request| {
                let peer = req.extensions().get::<Peer>().map(|p| p.0);
                tracing::info_span!(
                    "request",
                    method = %req.method(),
                    uri = %req.uri(),
                    peer = ?peer,
                )
            })
            .on_response(DefaultOnResponse::new().level(tracing::Level::INFO))
            .on_failure(DefaultOnFailure::new().level(tracing::Level::WARN)),
    )
}
