//! `/zarr/{branch,tag,snapshot}/{name}/{key}`: one plain Zarr v3 store per version.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};

use super::file_body;
use super::http::{decode_path, etag, none_match, parse_range, Failure, RangeAnswer};
use super::versions::Version;
use super::AppState;
use crate::format::keys;
use crate::format::manifest::{ChunkPayload, NativeChunkRef};
use crate::format::{NodePath, SnapshotId};
use crate::repository::VersionSelector;
use crate::storage::{LocalFiles, StorageError};
use crate::virtual_refs::normalize_url;
use crate::zarr::store::{ByteRange, Store};

/// Cache-Control of snapshot URLs: a snapshot never changes.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Cache-Control of branch and tag URLs: revalidated on every use (the ETag makes
/// that a 304 while the ref has not moved).
const REVALIDATE: &str = "no-cache";

/// Answers a GET or HEAD of a Zarr key of a version.
pub(crate) async fn serve_key(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    match answer(&state, &method, &uri, &headers).await {
        Ok(r) => r,
        Err(f) => f.into_response(),
    }
}

async fn answer(
    state: &AppState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Response, Failure> {
    let segments = decode_path(uri.path())?;
    // ["zarr", kind, name, key...]
    let (kind, name, key) = match segments.as_slice() {
        [_, kind, name, key @ ..] if !key.is_empty() => (kind.as_str(), name.as_str(), key),
        _ => {
            return Err(Failure::not_found(
                "expected /zarr/{branch,tag,snapshot}/NAME/KEY",
            ))
        }
    };
    let key = key.join("/");
    if key.is_empty() {
        return Err(Failure::not_found(
            "no key: the store's root is `zarr.json`",
        ));
    }
    if key.ends_with('/') {
        return Err(Failure::not_found(format!("no value at `{key}`")));
    }
    let (id, cache_control) = match kind {
        "branch" => (
            state
                .versions
                .resolve(&VersionSelector::Branch(name.to_string()))
                .await?,
            REVALIDATE,
        ),
        "tag" => (
            state
                .versions
                .resolve(&VersionSelector::Tag(name.to_string()))
                .await?,
            REVALIDATE,
        ),
        "snapshot" => (
            name.parse::<SnapshotId>()
                .map_err(|_| Failure::bad_request(format!("`{name}` is not a snapshot id")))?,
            IMMUTABLE,
        ),
        other => {
            return Err(Failure::not_found(format!(
                "`{other}`: versions are /zarr/branch/NAME, /zarr/tag/NAME, /zarr/snapshot/ID"
            )))
        }
    };
    let version = state.versions.snapshot(id).await?;
    let tag = etag(&id.to_string(), &key);
    let mut base = HeaderMap::new();
    base.insert(header::ETAG, tag.clone());
    base.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    base.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
        base.insert("x-floe-snapshot", v);
    }
    if none_match(headers, &tag) {
        return Ok((StatusCode::NOT_MODIFIED, base).into_response());
    }
    let value = read_value(state, &version, &key).await?;
    let len = value.len();
    let range = parse_range(headers, len);
    let head = *method == Method::HEAD;
    let (status, start, end) = match range {
        RangeAnswer::Whole => (StatusCode::OK, 0, len),
        RangeAnswer::Part { start, end } => (StatusCode::PARTIAL_CONTENT, start, end),
        RangeAnswer::Unsatisfiable => {
            base.insert(
                header::CONTENT_RANGE,
                header_value(&format!("bytes */{len}")),
            );
            let mut r = Failure::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                format!("the range does not fit the {len} bytes of `{key}`"),
            )
            .into_response();
            r.headers_mut().extend(base);
            return Ok(r);
        }
    };
    if status == StatusCode::PARTIAL_CONTENT {
        base.insert(
            header::CONTENT_RANGE,
            header_value(&format!("bytes {start}-{}/{len}", end - 1)),
        );
    }
    base.insert(
        header::CONTENT_LENGTH,
        header_value(&(end - start).to_string()),
    );
    base.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if key == "zarr.json" || key.ends_with("/zarr.json") {
            "application/json"
        } else {
            "application/octet-stream"
        }),
    );
    if head {
        return Ok((status, base, Body::empty()).into_response());
    }
    Ok((status, base, value.body(key, start, end).await?).into_response())
}

fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Largest piece of a chunk read (or mapped) at once: a longer body is streamed in
/// pieces of this size, each read when the client has taken the one before
/// (hyper's backpressure), so a connection holds at most one piece, in bytes.
const PIECE: u64 = 1 << 20;

/// A value found at a key: metadata bytes already built, a chunk in a local file to
/// map and send from the file, or a chunk to read.
enum Value {
    Bytes(Bytes),
    /// A native chunk of a repository on local disk: bytes `offset..offset + len` of
    /// its object's file (checked to hold them).
    File {
        file: Arc<std::fs::File>,
        offset: u64,
        len: u64,
    },
    Chunk {
        version: Arc<Version>,
        len: u64,
        /// Turns for reads from storage, shared by all requests.
        reads: Arc<tokio::sync::Semaphore>,
    },
}

impl Value {
    fn len(&self) -> u64 {
        match self {
            Value::Bytes(b) => b.len() as u64,
            Value::File { len, .. } | Value::Chunk { len, .. } => *len,
        }
    }

    /// The body of bytes `start..end`: read at once up to [`PIECE`] bytes, streamed
    /// in pieces beyond (a failure after the first piece ends the body early, which
    /// the client sees as a short read against `Content-Length`).
    async fn body(self, key: String, start: u64, end: u64) -> Result<Body, Failure> {
        if end - start <= PIECE || matches!(self, Value::Bytes(_)) {
            return Ok(Body::from(self.read(&key, start, end).await?));
        }
        // The first piece is read before answering, so a missing or unreadable
        // chunk is still a 404 or a 5xx rather than a cut body.
        let first = self.read(&key, start, start + PIECE).await?;
        let rest = futures::stream::try_unfold(
            (self, key, start + PIECE),
            move |(value, key, at)| async move {
                if at >= end {
                    return Ok(None);
                }
                let to = end.min(at + PIECE);
                let piece = value
                    .read(&key, at, to)
                    .await
                    .map_err(|f| std::io::Error::other(f.message))?;
                Ok::<_, std::io::Error>(Some((piece, (value, key, to))))
            },
        );
        let stream = futures::stream::once(async move { Ok(first) }).chain(rest);
        Ok(Body::from_stream(stream))
    }

    /// Bytes `start..end` of the value.
    async fn read(&self, key: &str, start: u64, end: u64) -> Result<Bytes, Failure> {
        match self {
            Value::Bytes(b) => {
                let (s, e) = (
                    usize::try_from(start).unwrap_or(usize::MAX),
                    usize::try_from(end).unwrap_or(usize::MAX),
                );
                Ok(b.get(s..e).map(|_| b.slice(s..e)).unwrap_or_default())
            }
            // No read and no turn: mapping reads nothing and holds no memory.
            Value::File { file, offset, .. } => {
                let len = usize::try_from(end - start).unwrap_or(usize::MAX);
                file_body::map(file, offset + start, len).map_err(|e| {
                    tracing::error!(target: "floe::serve", %key, error = %e, "mapping failed");
                    Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
                })
            }
            Value::Chunk {
                version,
                len,
                reads,
            } => {
                // A turn for the read; closed only if the server is gone.
                let _turn = reads
                    .acquire()
                    .await
                    .map_err(|_| Failure::new(StatusCode::SERVICE_UNAVAILABLE, "shutting down"))?;
                if start == 0 && end == *len {
                    return version
                        .store
                        .get(key)
                        .await?
                        .ok_or_else(|| Failure::not_found(format!("no chunk at `{key}`")));
                }
                let parts = version
                    .store
                    .get_partial_values(
                        key,
                        &[ByteRange::FromStart {
                            offset: start,
                            length: Some(end - start),
                        }],
                    )
                    .await?
                    .ok_or_else(|| Failure::not_found(format!("no chunk at `{key}`")))?;
                Ok(parts.into_iter().next().unwrap_or_default())
            }
        }
    }
}

/// What `key` holds in `version`: a node's `zarr.json` (a group's with its
/// consolidated metadata), or a chunk (404 when never written, 403 when virtual and
/// outside the authorized containers).
async fn read_value(state: &AppState, version: &Arc<Version>, key: &str) -> Result<Value, Failure> {
    let missing = || Failure::not_found(format!("no value at `{key}`"));
    let meta_path = if key == "zarr.json" {
        Some(NodePath::root())
    } else {
        key.strip_suffix("/zarr.json")
            .and_then(|p| NodePath::new(p).ok())
    };
    if let Some(path) = meta_path {
        if let Ok(node) = version.session.get_node(&path) {
            if node.is_group() {
                return Ok(Value::Bytes(
                    version.group_document(&path, &node.user_data)?,
                ));
            }
            return Ok(Value::Bytes(node.user_data));
        }
    }
    let Some((path, index)) = version.store.chunk_of_key(key)? else {
        return Err(missing());
    };
    let payload = match version.session.get_chunk_ref(&path, &index).await {
        Ok(Some(p)) => p,
        Ok(None) | Err(crate::Error::InvalidChunkIndex { .. }) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    let len = match &payload {
        ChunkPayload::Inline(b) => b.len() as u64,
        ChunkPayload::Native(n) => {
            if let Some(files) = state.repo.storage().local_files() {
                if let Some((file, offset, len)) = open_native(&*files, n)? {
                    return Ok(Value::File { file, offset, len });
                }
            }
            n.length
        }
        ChunkPayload::Virtual(v) => {
            let allowed = normalize_url(&v.location)
                .map(|u| state.virtual_access.allows(&u))
                .unwrap_or(false);
            if !allowed {
                return Err(Failure::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "`{key}` is a virtual chunk in `{}`, which this server is not \
                         authorized to read: start `floe serve` with \
                         `--virtual-container PREFIX` for its container",
                        v.location
                    ),
                ));
            }
            v.length
        }
    };
    Ok(Value::Chunk {
        version: Arc::clone(version),
        len,
        reads: Arc::clone(&state.reads),
    })
}

/// The open file of native chunk `chunk`, checked to hold its bytes; `None` when
/// the storage does not hand out its files.
///
/// Called on the executor's thread, as [`crate::storage::LocalStorage`] makes its
/// small reads: opening a file and reading its size are two quick system calls,
/// quicker than the two thread switches of a hop to the blocking pool (which would
/// also keep a blocking thread per request in flight).
///
/// # Errors
/// A 5xx [`Failure`] when the object is missing, shorter than the chunk reference
/// says, or cannot be opened.
fn open_native(
    files: &dyn LocalFiles,
    chunk: &NativeChunkRef,
) -> Result<Option<(Arc<std::fs::File>, u64, u64)>, Failure> {
    let key = keys::chunk(&chunk.id);
    let (offset, len) = (chunk.offset, chunk.length);
    let open = || {
        let Some(file) = files.open(&key)? else {
            return Ok(None);
        };
        let size = file
            .metadata()
            .map_err(|source| StorageError::Io {
                key: key.clone(),
                source,
            })?
            .len();
        let end = offset.saturating_add(len);
        if size < end {
            return Err(StorageError::ShortRead {
                key: key.clone(),
                requested: offset..end,
                size,
            });
        }
        Ok(Some((Arc::new(file), offset, len)))
    };
    open().map_err(|e| Failure::from(crate::Error::from(e)))
}
