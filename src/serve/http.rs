//! HTTP helpers of the server: error answers, the path and token checks, CORS, byte
//! ranges and entity tags.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::{AppState, ServeError};
use crate::error::Error;
use crate::virtual_refs::VirtualChunkError;
use crate::zarr::store::StoreError;

/// An error answer: a status and a one-line reason, sent as `{"error": reason}`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message }).to_string();
        (
            self.status,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            body,
        )
            .into_response()
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::BranchNotFound { .. }
            | Error::TagNotFound { .. }
            | Error::TagDeleted { .. }
            | Error::RefNotFound { .. }
            | Error::SnapshotNotFound { .. }
            | Error::NodeNotFound { .. }
            | Error::NoSnapshotAtTime { .. }
            | Error::UnsupportedOnSpecVersion { .. } => StatusCode::NOT_FOUND,
            Error::InvalidRefName { .. } | Error::InvalidChunkIndex { .. } => {
                StatusCode::BAD_REQUEST
            }
            Error::NotAnArray { .. } | Error::NotAGroup { .. } => StatusCode::NOT_FOUND,
            Error::VirtualChunk { source, .. } => virtual_status(source),
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(target: "floe::serve", error = %e, "request failed");
        }
        Failure::new(status, e.to_string())
    }
}

/// 403 for virtual chunk reads not authorized or from an untrusted endpoint.
fn virtual_status(e: &VirtualChunkError) -> StatusCode {
    match e {
        VirtualChunkError::Unauthorized { .. } | VirtualChunkError::UntrustedEndpoint { .. } => {
            StatusCode::FORBIDDEN
        }
        _ => StatusCode::BAD_GATEWAY,
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::InvalidKey { .. } => Failure::bad_request(e.to_string()),
            StoreError::InvalidRange { .. } => {
                Failure::new(StatusCode::RANGE_NOT_SATISFIABLE, e.to_string())
            }
            StoreError::Repository { key, source } => match source.downcast::<Error>() {
                Ok(e) => Failure::from(*e),
                Err(source) => {
                    tracing::error!(target: "floe::serve", %key, error = %source, "read failed");
                    Failure::new(StatusCode::INTERNAL_SERVER_ERROR, source.to_string())
                }
            },
            other => {
                tracing::error!(target: "floe::serve", error = %other, "read failed");
                Failure::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string())
            }
        }
    }
}

/// The fallback: 404.
pub(crate) async fn not_found() -> Failure {
    Failure::not_found("no such URL: see /zarr/{branch,tag,snapshot}/NAME/KEY and /api/")
}

/// The path segments of a request path, percent-decoded, after checking each one:
/// no `.` or `..`, no empty segment (but a trailing `/`), no `/`, `\`, `%` or control
/// character after decoding (so neither encoded nor double-encoded separators), and
/// valid UTF-8.
///
/// # Errors
/// A 400 [`Failure`] naming the problem.
pub(crate) fn decode_path(path: &str) -> Result<Vec<String>, Failure> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Failure::bad_request("the path must start with `/`"));
    };
    let raw: Vec<&str> = rest.split('/').collect();
    let last = raw.len() - 1;
    let mut out = Vec::with_capacity(raw.len());
    for (i, seg) in raw.iter().enumerate() {
        if seg.is_empty() {
            if i == last {
                out.push(String::new());
                continue;
            }
            return Err(Failure::bad_request("empty path segment (`//`)"));
        }
        let decoded = percent_decode_str(seg)
            .decode_utf8()
            .map_err(|_| Failure::bad_request("a path segment is not UTF-8 once decoded"))?;
        if decoded == "." || decoded == ".." {
            return Err(Failure::bad_request(
                "`.` and `..` segments are not allowed",
            ));
        }
        if decoded
            .chars()
            .any(|c| c == '/' || c == '\\' || c == '%' || c.is_control())
        {
            return Err(Failure::bad_request(
                "a path segment holds an encoded separator, `%` or a control character",
            ));
        }
        out.push(decoded.into_owned());
    }
    Ok(out)
}

/// Middleware: refuses requests whose path [`decode_path`] refuses, and methods other
/// than GET, HEAD and OPTIONS.
pub(crate) async fn check_path(req: Request, next: Next) -> Response {
    if let Err(f) = decode_path(req.uri().path()) {
        return f.into_response();
    }
    if ![Method::GET, Method::HEAD, Method::OPTIONS].contains(req.method()) {
        let mut r =
            Failure::new(StatusCode::METHOD_NOT_ALLOWED, "the server is read-only").into_response();
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, OPTIONS"),
        );
        return r;
    }
    next.run(req).await
}

/// Middleware: with a token set, requests must carry `Authorization: Bearer TOKEN`.
pub(crate) async fn check_token(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            let mut r = Failure::new(StatusCode::UNAUTHORIZED, "a bearer token is required")
                .into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// CORS for one origin: GET, HEAD, OPTIONS, the headers Zarr clients send, and the
/// headers they read.
///
/// # Errors
/// [`ServeError::InvalidOption`] when `origin` is no `scheme://host[:port]`.
pub(crate) fn cors_layer(origin: &str) -> Result<CorsLayer, ServeError> {
    let bad = || {
        ServeError::InvalidOption(format!(
            "--cors-origin `{origin}` is not an origin (scheme://host[:port], or `*`)"
        ))
    };
    let allow = if origin == "*" {
        AllowOrigin::any()
    } else {
        let url = url::Url::parse(origin).map_err(|_| bad())?;
        if url.host().is_none() || url.path() != "/" && !url.path().is_empty() {
            return Err(bad());
        }
        AllowOrigin::exact(HeaderValue::from_str(origin.trim_end_matches('/')).map_err(|_| bad())?)
    };
    Ok(CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::HEAD, Method::OPTIONS])
        .allow_headers([
            header::RANGE,
            header::IF_NONE_MATCH,
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
        ])
        .expose_headers([
            header::CONTENT_RANGE,
            header::CONTENT_LENGTH,
            header::ETAG,
            header::ACCEPT_RANGES,
            http::HeaderName::from_static("x-floe-snapshot"),
        ]))
}

/// What a `Range` header asks of a value of `len` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RangeAnswer {
    /// No range (or one the server answers whole: another unit, several ranges).
    Whole,
    /// Bytes `start..end` (206).
    Part { start: u64, end: u64 },
    /// 416.
    Unsatisfiable,
}

/// Reads the `Range` header against a value of `len` bytes. Several ranges are
/// answered whole (200); a malformed or inverted `bytes` range, one that starts at or
/// past the end, and `-0` are unsatisfiable (416).
pub(crate) fn parse_range(headers: &HeaderMap, len: u64) -> RangeAnswer {
    let Some(value) = headers.get(header::RANGE) else {
        return RangeAnswer::Whole;
    };
    let Ok(value) = value.to_str() else {
        return RangeAnswer::Unsatisfiable;
    };
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        // Another unit: ignored, as RFC 9110 allows.
        return RangeAnswer::Whole;
    };
    if spec.contains(',') {
        return RangeAnswer::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAnswer::Unsatisfiable;
    };
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (a.trim(), b.trim()) {
        ("", n) => match num(n) {
            Some(n) if n > 0 && len > 0 => RangeAnswer::Part {
                start: len.saturating_sub(n),
                end: len,
            },
            _ => RangeAnswer::Unsatisfiable,
        },
        (a, "") => match num(a) {
            Some(a) if a < len => RangeAnswer::Part { start: a, end: len },
            _ => RangeAnswer::Unsatisfiable,
        },
        (a, b) => match (num(a), num(b)) {
            (Some(a), Some(b)) if a <= b && a < len => RangeAnswer::Part {
                start: a,
                end: b.saturating_add(1).min(len),
            },
            _ => RangeAnswer::Unsatisfiable,
        },
    }
}

/// Characters escaped in an entity tag: controls, space, `"`, `%` and non-ASCII.
const ETAG_ESCAPE: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'%').add(b'\\');

/// The strong entity tag of `key` in snapshot `snapshot`.
pub(crate) fn etag(snapshot: &str, key: &str) -> HeaderValue {
    let tag = format!("\"{snapshot}/{}\"", utf8_percent_encode(key, ETAG_ESCAPE));
    HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""))
}

/// Whether `If-None-Match` matches `tag` (weak comparison, `*` matches all).
pub(crate) fn none_match(headers: &HeaderMap, tag: &HeaderValue) -> bool {
    let Some(tag) = tag.to_str().ok() else {
        return false;
    };
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(v: &str, len: u64) -> RangeAnswer {
        let mut h = HeaderMap::new();
        h.insert(header::RANGE, HeaderValue::from_str(v).unwrap());
        parse_range(&h, len)
    }

    #[test]
    fn ranges() {
        use RangeAnswer::*;
        assert_eq!(range("bytes=0-3", 10), Part { start: 0, end: 4 });
        assert_eq!(range("bytes=5-", 10), Part { start: 5, end: 10 });
        assert_eq!(range("bytes=-3", 10), Part { start: 7, end: 10 });
        assert_eq!(range("bytes=-30", 10), Part { start: 0, end: 10 });
        assert_eq!(range("bytes=2-300", 10), Part { start: 2, end: 10 });
        assert_eq!(range("bytes=10-", 10), Unsatisfiable);
        assert_eq!(range("bytes=5-2", 10), Unsatisfiable);
        assert_eq!(range("bytes=-0", 10), Unsatisfiable);
        assert_eq!(range("bytes=99999999999999999999999-", 10), Unsatisfiable);
        assert_eq!(range("bytes=0-1,3-4", 10), Whole);
        assert_eq!(range("items=0-1", 10), Whole);
    }

    #[test]
    fn paths() {
        assert!(decode_path("/zarr/tag/v1/").is_ok());
        assert!(decode_path("/zarr/tag/v1/a/zarr.json").is_ok());
        for bad in [
            "/zarr/../x",
            "/zarr/%2e%2e/x",
            "/zarr/a%2Fb",
            "/zarr/a%5Cb",
            "/zarr/a%252Fb",
            "/zarr//a",
            "/zarr/a%00",
        ] {
            assert!(decode_path(bad).is_err(), "{bad}");
        }
    }
}
