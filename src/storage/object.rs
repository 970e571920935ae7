//! [`ObjectStorage`]: the [`Storage`] trait over any `object_store` backend whose
//! conditional puts are atomic (memory, S3-compatible servers).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};

use super::coalesce::{self, CoalesceOptions};
use super::{
    ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes, WriteOutcome,
};

/// Attempts at one [`Storage::delete_many`] whose bulk request fails (a dropped
/// connection, a server error) before its error is returned.
const BULK_DELETE_ATTEMPTS: u32 = 4;

/// A [`Storage`] on an `object_store` backend, rooted at a key prefix.
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
    /// Whether the backend lists keys in byte order and starts a listing after a
    /// given key cheaply (S3's `ListObjectsV2` with `start-after`).
    ranged_listing: bool,
    /// Whether planned requests go to the backend's own `ObjectStore::get_ranges`
    /// (see [`ObjectStorage::with_vectored_ranges`]).
    vectored_ranges: bool,
    /// How [`Storage::delete_if_match`] is done (`object_store` 0.14 has no
    /// conditional delete).
    conditional_delete: ConditionalDelete,
    /// The bound on requests in flight, when `store` is wrapped in a
    /// `LimitStore` ([`ObjectStorage::with_max_concurrent_requests`]).
    max_requests: Option<usize>,
    /// Whether version tokens are the backend's object versions (GCS generations)
    /// rather than etags (see [`ObjectStorage::with_generation_versions`]).
    generation_versions: bool,
    /// Whether etags are quoted where the backend lists them bare (see
    /// [`ObjectStorage::with_quoted_etags`]).
    quoted_etags: bool,
    /// How a large ranged read is split into concurrent requests (see
    /// [`ObjectStorage::with_split_reads`]).
    split: SplitReads,
}

/// How [`ObjectStorage`] splits a ranged read of many bytes into concurrent requests
/// of nearly equal size (Icechunk's storage `concurrency` settings): about
/// `ideal_request_bytes` each, at most `max_requests_per_object` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitReads {
    /// The size of one request a read aims at, in bytes (Icechunk's
    /// `ideal_concurrent_request_size`, default 12 MiB).
    pub ideal_request_bytes: u64,
    /// The most requests one read is split into (Icechunk's
    /// `max_concurrent_requests_for_object`, default 18; 1: never split).
    pub max_requests_per_object: u16,
}

impl Default for SplitReads {
    fn default() -> Self {
        SplitReads {
            ideal_request_bytes: 12 * 1024 * 1024,
            max_requests_per_object: 18,
        }
    }
}

impl SplitReads {
    /// Every read is one request: for backends with no network to fill (local disks,
    /// memory), where a split only adds a copy.
    pub const NEVER: SplitReads = SplitReads {
        ideal_request_bytes: u64::MAX,
        max_requests_per_object: 1,
    };

    /// How many requests a read of `range` takes: `ceil(len / ideal)`, at least 1
    /// and at most `max_requests_per_object`.
    pub fn num_parts(&self, range: &Range<u64>) -> u64 {
        range
            .end
            .saturating_sub(range.start)
            .div_ceil(self.ideal_request_bytes.max(1))
            .clamp(1, u64::from(self.max_requests_per_object.max(1)))
    }

    /// The parts of `range`: [`SplitReads::num_parts`] requests, sizes differing by
    /// at most one byte, in order.
    pub fn parts(&self, range: &Range<u64>) -> Vec<Range<u64>> {
        let len = range.end.saturating_sub(range.start);
        let n = self.num_parts(range);
        let (small, big) = (len / n, len % n);
        let mut at = range.start;
        (0..n)
            .map(|i| {
                let size = small + u64::from(i < big);
                let part = at..at + size;
                at += size;
                part
            })
            .collect()
    }
}

/// How an [`ObjectStorage`] deletes an object only at a given version.
#[derive(Debug, Clone, Default)]
enum ConditionalDelete {
    /// It cannot: [`StorageError::Unsupported`].
    #[default]
    Unsupported,
    /// The store lives in this process (memory): conditional writes and conditional
    /// deletes are serialized by one lock, so the check and the removal are atomic.
    Serialized(Arc<tokio::sync::Mutex<()>>),
    /// S3: a `DeleteObject` request with `If-Match: <etag>`, signed (SigV4 headers)
    /// with the store's own credentials.
    Signed {
        s3: Arc<object_store::aws::AmazonS3>,
        region: String,
        /// Built by the first conditional delete: building an HTTP client takes a
        /// few milliseconds (its TLS roots), which opening a repository to read one
        /// chunk should not pay for a delete it never makes.
        client: std::sync::OnceLock<reqwest::Client>,
    },
}

impl ObjectStorage {
    /// One bulk delete of `paths`: the paths not confirmed deleted (all of a batch
    /// whose request failed) and the first error. Missing objects count as deleted.
    async fn delete_batch(&self, paths: Vec<Path>) -> (Vec<Path>, Option<StorageError>) {
        use futures::StreamExt;
        let mut pending: std::collections::BTreeSet<Path> = paths.iter().cloned().collect();
        let input = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
        let mut results = self.store.delete_stream(input);
        let mut first = None;
        while let Some(r) = results.next().await {
            match r {
                Ok(path) => {
                    pending.remove(&path);
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    first.get_or_insert(map_err("", e));
                }
            }
        }
        if first.is_none() {
            // Missing objects are not named in their error: nothing is left to do.
            pending.clear();
        }
        (pending.into_iter().collect(), first)
    }
    /// Wraps `store`; every key is placed under `prefix` (no leading or trailing `/`,
    /// may be empty). `url` is what [`Storage::root_url`] reports.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, url: String) -> Self {
        ObjectStorage {
            store,
            prefix: prefix.trim_matches('/').to_string(),
            url,
            ranged_listing: false,
            vectored_ranges: false,
            conditional_delete: ConditionalDelete::Unsupported,
            max_requests: None,
            generation_versions: false,
            quoted_etags: false,
            split: SplitReads::default(),
        }
    }

    /// Bounds the requests in flight on this storage to `n` (at least 1): every
    /// request of every caller takes one of `n` permits (object_store's
    /// `LimitStore`) and keeps it until its response body is read (a listing keeps
    /// one while it pages), so the storage's memory for bodies in flight and its
    /// connections are bounded by `n` too. The store's HTTP client, and with it its
    /// connection pool, stays the one the storage was built with.
    pub fn with_max_concurrent_requests(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.store = Arc::new(object_store::limit::LimitStore::new(
            Arc::clone(&self.store),
            n,
        ));
        self.max_requests = Some(n);
        self
    }

    /// One ranged GET of `range` (see [`Storage::get_range`]).
    async fn get_range_once(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        if range.start > range.end {
            return Err(StorageError::InvalidRange {
                key: key.to_string(),
                requested: range,
            });
        }
        if range.start == range.end {
            // Nothing to read, but the object must exist and reach the start: an
            // empty read past the end is a short read, never empty bytes.
            let size = self.head(key).await?.size;
            if range.start > size {
                return Err(StorageError::ShortRead {
                    key: key.to_string(),
                    requested: range,
                    size,
                });
            }
            return Ok(Bytes::new());
        }
        let opts = GetOptions::new().with_range(Some(GetRange::Bounded(range.clone())));
        let res = match self.store.get_opts(&self.path(key), opts).await {
            Ok(res) => res,
            Err(e @ object_store::Error::NotFound { .. }) => return Err(map_err(key, e)),
            Err(e) => {
                // A range starting past the end is an error on most backends: report
                // it as the short read it is.
                if let Ok(meta) = self.store.head(&self.path(key)).await {
                    if meta.size < range.end {
                        return Err(StorageError::ShortRead {
                            key: key.to_string(),
                            requested: range,
                            size: meta.size,
                        });
                    }
                }
                return Err(map_err(key, e));
            }
        };
        let size = res.meta.size;
        let bytes = res.bytes().await.map_err(|e| map_err(key, e))?;
        if (bytes.len() as u64) < range.end - range.start {
            return Err(StorageError::ShortRead {
                key: key.to_string(),
                requested: range,
                size,
            });
        }
        Ok(bytes)
    }

    /// Splits ranged reads larger than `split.ideal_request_bytes` into concurrent
    /// requests (default: [`SplitReads::default`], Icechunk's 12 MiB and 18), joined
    /// into one buffer: a large chunk arrives at several connections' rate.
    pub fn with_split_reads(mut self, split: SplitReads) -> Self {
        self.split = split;
        self
    }

    /// Declares that the backend's conditional updates match an object version
    /// (Google Cloud Storage: `x-goog-if-generation-match: <generation>`) rather than
    /// an etag: version tokens are then the objects' generations.
    pub fn with_generation_versions(mut self, yes: bool) -> Self {
        self.generation_versions = yes;
        self
    }

    /// Declares that the backend lists etags without the quotes its other answers
    /// have (Azure Blob Storage): version tokens are then always quoted, so a
    /// listed version equals the one a read reports.
    pub fn with_quoted_etags(mut self, yes: bool) -> Self {
        self.quoted_etags = yes;
        self
    }

    /// The version token of an object, from its etag and its backend version.
    fn token(&self, e_tag: Option<String>, version: Option<String>) -> Option<ObjectVersion> {
        if self.generation_versions {
            return version.map(ObjectVersion);
        }
        e_tag.map(|t| {
            if self.quoted_etags && !t.starts_with('"') && !t.starts_with("W/") {
                ObjectVersion(format!("\"{t}\""))
            } else {
                ObjectVersion(t)
            }
        })
    }

    /// Declares that the store lives in this process (memory): conditional writes and
    /// [`Storage::delete_if_match`] then take one lock, which makes the conditional
    /// delete atomic against them.
    pub fn with_serialized_conditional_writes(mut self) -> Self {
        self.conditional_delete =
            ConditionalDelete::Serialized(Arc::new(tokio::sync::Mutex::new(())));
        self
    }

    /// Declares that this storage is the S3 store `s3` (in `region`):
    /// [`Storage::delete_if_match`] then sends `DeleteObject` with
    /// `If-Match: <etag>` (S3 conditional deletes), signed with its credentials.
    pub fn with_s3_conditional_delete(
        mut self,
        s3: Arc<object_store::aws::AmazonS3>,
        region: String,
    ) -> Self {
        self.conditional_delete = ConditionalDelete::Signed {
            s3,
            region,
            client: std::sync::OnceLock::new(),
        };
        self
    }

    /// The lock conditional writes take, for stores in this process.
    async fn conditional_lock(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.conditional_delete {
            ConditionalDelete::Serialized(m) => Some(m.lock().await),
            _ => None,
        }
    }

    /// Declares that the backend's own `ObjectStore::get_ranges` reads several ranges
    /// of one object and handles each range reaching past the object's end (fails,
    /// or answers it short, which is checked here): the local filesystem (one open
    /// file, gaps skipped) and memory. Each planned request of [`Storage::get_ranges`]
    /// then hands it its ranges. Otherwise (the default, and S3) each planned request
    /// is one ranged GET of its whole span, checked and sliced here: object_store's
    /// generic `get_ranges` (0.14) slices a short response unchecked and panics when
    /// a range starts past the bytes that came back.
    pub fn with_vectored_ranges(mut self, yes: bool) -> Self {
        self.vectored_ranges = yes;
        self
    }

    /// Declares that the backend lists keys in byte order and starts a listing
    /// after a given key without reading the keys before it (S3's `ListObjectsV2`
    /// with `start-after`): prefix listings then read only the keys they return
    /// (see [`Storage::ranged_listing`]).
    pub fn with_ranged_listing(mut self, yes: bool) -> Self {
        self.ranged_listing = yes;
        self
    }

    /// The underlying object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub(super) fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{}", self.prefix, key))
        }
    }

    /// The key of a listed object: object_store percent-encodes characters it does
    /// not allow in a path segment (non-ASCII, `%`, `#`, ...) when a key is written,
    /// so each segment is decoded back to the key that was written.
    fn key_of(&self, path: &Path) -> String {
        let decoded: Vec<String> = path
            .parts()
            .map(|part| {
                percent_encoding::percent_decode_str(part.as_ref())
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let full = decoded.join("/");
        if self.prefix.is_empty() {
            full.to_string()
        } else {
            full.strip_prefix(&self.prefix)
                .map(|s| s.trim_start_matches('/').to_string())
                .unwrap_or_else(|| full.to_string())
        }
    }

    pub(super) fn info(&self, meta: object_store::ObjectMeta) -> ObjectInfo {
        ObjectInfo {
            key: self.key_of(&meta.location),
            size: meta.size,
            last_modified: meta.last_modified,
            version: self.token(meta.e_tag, meta.version),
        }
    }
}

impl ObjectStorage {
    /// Reads the ranges of one planned request (`span.members` of `ranges`): its
    /// non-empty ranges with one ranged GET of their span, or with one
    /// `ObjectStore::get_ranges` call on backends that check ranges themselves
    /// ([`ObjectStorage::with_vectored_ranges`]); its empty ones checked to lie within
    /// the object. One `Bytes` per member, in member order.
    async fn read_span(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        span: &coalesce::Span,
    ) -> StorageResult<Vec<Bytes>> {
        let members: Vec<&Range<u64>> = span.members.iter().map(|&i| &ranges[i]).collect();
        let wanted: Vec<Range<u64>> = members
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| (*r).clone())
            .collect();
        let reach = wanted.iter().map(|r| r.end).max().unwrap_or(0);
        // Empty ranges past every non-empty one: the object must reach them.
        if let Some(p) = members
            .iter()
            .filter(|r| r.is_empty() && r.start > reach)
            .map(|r| r.start)
            .max()
        {
            self.get_range(key, p..p).await?;
        }
        if wanted.is_empty() {
            return Ok(vec![Bytes::new(); members.len()]);
        }
        if !self.vectored_ranges {
            // One ranged GET of the span (`get_range` checks its length), sliced here.
            let start = wanted.iter().map(|r| r.start).min().unwrap_or(0);
            let bytes = self.get_range(key, start..reach).await?;
            return members
                .iter()
                .map(|r| {
                    if r.is_empty() {
                        return Ok(Bytes::new());
                    }
                    coalesce::slice(&bytes, start, r).ok_or_else(|| StorageError::ShortRead {
                        key: key.to_string(),
                        requested: (*r).clone(),
                        size: start.saturating_add(bytes.len() as u64),
                    })
                })
                .collect();
        }
        let path = self.path(key);
        let got = match self.store.get_ranges(&path, &wanted).await {
            Ok(got) => got,
            Err(e @ object_store::Error::NotFound { .. }) => return Err(map_err(key, e)),
            Err(e) => return Err(self.short_or(key, &wanted, map_err(key, e)).await),
        };
        let whole = got.len() == wanted.len()
            && got
                .iter()
                .zip(&wanted)
                .all(|(b, r)| b.len() as u64 == r.end - r.start);
        if !whole {
            let e = StorageError::Backend {
                key: key.to_string(),
                source: Box::new(object_store::Error::Generic {
                    store: "floe",
                    source: "a ranged read returned fewer bytes than asked".into(),
                }),
            };
            return Err(self.short_or(key, &wanted, e).await);
        }
        let mut got = got.into_iter();
        Ok(members
            .iter()
            .map(|r| {
                if r.is_empty() {
                    Bytes::new()
                } else {
                    got.next().unwrap_or_default()
                }
            })
            .collect())
    }

    /// The [`StorageError::ShortRead`] of the first of `ranges` past the object's end
    /// when there is one (a read past the end fails, or comes back short, on most
    /// backends), else `other`.
    async fn short_or(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        other: StorageError,
    ) -> StorageError {
        if let Ok(meta) = self.store.head(&self.path(key)).await {
            if let Some(r) = ranges.iter().find(|r| r.end > meta.size) {
                return StorageError::ShortRead {
                    key: key.to_string(),
                    requested: r.clone(),
                    size: meta.size,
                };
            }
        }
        other
    }
}

/// A key just below every key that starts with `encoded` (a backend path ending
/// inside a segment): its last character decremented, when that gives a plain
/// character, followed by `~`, so that the keys starting with the decremented
/// character (in ASCII, as object ids are) sort below it too and are not listed
/// again; else the last character dropped. `None` when no such key shortens the
/// listing.
fn listing_offset(encoded: &str) -> Option<Path> {
    let last = encoded.chars().last()?;
    let stem = &encoded[..encoded.len() - last.len_utf8()];
    let below = u8::try_from(last)
        .ok()
        .and_then(|b| b.checked_sub(1))
        .filter(|b| b.is_ascii_graphic() && *b != b'/' && *b != b'.');
    let candidate = match below {
        Some(b) => format!("{stem}{}~", char::from(b)),
        None if !stem.ends_with('/') && !stem.is_empty() => stem.to_string(),
        None => return None,
    };
    Path::parse(candidate).ok()
}

/// Maps an object_store error to a [`StorageError`] naming `key`.
pub(super) fn map_err(key: &str, e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { .. } => StorageError::NotFound {
            key: key.to_string(),
        },
        other => StorageError::Backend {
            key: key.to_string(),
            source: Box::new(other),
        },
    }
}

/// Where [`signed_delete_if_match`] sends its request.
struct SignedTarget<'a> {
    s3: &'a object_store::aws::AmazonS3,
    region: &'a str,
    client: &'a reqwest::Client,
}

/// S3's conditional delete: `DeleteObject` with `If-Match: <etag>`, signed with
/// SigV4 headers. 204 (or 200) is deleted; 412 (version moved), 404 (gone) and 409
/// (a concurrent write won) fail the precondition.
async fn signed_delete_if_match(
    target: &SignedTarget<'_>,
    path: &Path,
    key: &str,
    expected: &ObjectVersion,
) -> StorageResult<WriteOutcome> {
    use object_store::signer::{Method, Signer};
    let backend = |reason: String| StorageError::Backend {
        key: key.to_string(),
        source: Box::new(object_store::Error::Generic {
            store: "S3",
            source: reason.into(),
        }),
    };
    // The object's URL as the store addresses it (endpoint, path or virtual-hosted
    // style, key encoding), without the presigning query.
    let mut url = target
        .s3
        .signed_url(Method::DELETE, path, std::time::Duration::from_secs(60))
        .await
        .map_err(|e| map_err(key, e))?;
    url.set_query(None);
    let credential = target
        .s3
        .credentials()
        .get_credential()
        .await
        .map_err(|e| map_err(key, e))?;
    let mut request: object_store::client::HttpRequest = http::Request::builder()
        .method(Method::DELETE)
        .uri(url.as_str())
        .header("if-match", expected.0.as_str())
        .body(object_store::client::HttpRequestBody::empty())
        .map_err(|e| backend(format!("conditional delete request: {e}")))?;
    object_store::aws::AwsAuthorizer::new(&credential, "s3", target.region)
        .try_authorize(&mut request, None)
        .map_err(|e| map_err(key, e))?;
    let response = target
        .client
        .delete(url.as_str())
        .headers(request.headers().clone())
        .send()
        .await
        .map_err(|e| backend(format!("conditional delete failed: {e}")))?;
    match response.status().as_u16() {
        200 | 204 => Ok(WriteOutcome::Written(None)),
        404 | 409 | 412 => Ok(WriteOutcome::PreconditionFailed),
        status => {
            let body = response.text().await.unwrap_or_default();
            Err(backend(format!(
                "conditional delete answered HTTP {status}: {body}"
            )))
        }
    }
}

impl fmt::Display for ObjectStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

#[async_trait]
impl Storage for ObjectStorage {
    fn max_concurrent_requests(&self) -> Option<usize> {
        self.max_requests
    }

    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        let res = self
            .store
            .get(&self.path(key))
            .await
            .map_err(|e| map_err(key, e))?;
        let version = self.token(res.meta.e_tag.clone(), res.meta.version.clone());
        let bytes = res.bytes().await.map_err(|e| map_err(key, e))?;
        Ok(VersionedBytes { bytes, version })
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        // Most reads are one request: no list of parts is made for them.
        if self.split.num_parts(&range) < 2 {
            return self.get_range_once(key, range).await;
        }
        let read = futures::future::try_join_all(
            self.split
                .parts(&range)
                .into_iter()
                .map(|part| self.get_range_once(key, part)),
        )
        .await
        .map_err(|e| match e {
            // A short part is a short read of the whole range.
            StorageError::ShortRead { key, size, .. } => StorageError::ShortRead {
                key,
                requested: range.clone(),
                size,
            },
            other => other,
        })?;
        let mut out = bytes::BytesMut::with_capacity(read.iter().map(Bytes::len).sum());
        for part in read {
            out.extend_from_slice(&part);
        }
        Ok(out.freeze())
    }

    async fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> StorageResult<Vec<Bytes>> {
        use futures::StreamExt;
        super::check_ranges(key, ranges)?;
        let spans = coalesce::plan(ranges, CoalesceOptions::default());
        let read = futures::stream::iter(spans.clone())
            .map(|span| async move { self.read_span(key, ranges, &span).await })
            .buffered(coalesce::DEFAULT_CONCURRENCY)
            .try_collect::<Vec<Vec<Bytes>>>()
            .await
            .map_err(|e| super::short_read_of_member(e, ranges))?;
        let mut out = vec![Bytes::new(); ranges.len()];
        for (span, parts) in spans.iter().zip(read) {
            for (&i, bytes) in span.members.iter().zip(parts) {
                out[i] = bytes;
            }
        }
        Ok(out)
    }

    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        let meta = self
            .store
            .head(&self.path(key))
            .await
            .map_err(|e| map_err(key, e))?;
        Ok(self.info(meta))
    }

    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        let res = self
            .store
            .put(&self.path(key), PutPayload::from_bytes(bytes))
            .await
            .map_err(|e| map_err(key, e))?;
        Ok(self.token(res.e_tag, res.version))
    }

    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        let _serialized = self.conditional_lock().await;
        let opts = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(&self.path(key), PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(res) => Ok(WriteOutcome::Written(self.token(res.e_tag, res.version))),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(WriteOutcome::PreconditionFailed),
            Err(e) => Err(map_err(key, e)),
        }
    }

    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        let _serialized = self.conditional_lock().await;
        let opts = PutOptions::from(PutMode::Update(UpdateVersion {
            e_tag: Some(expected.0.clone()),
            version: self.generation_versions.then(|| expected.0.clone()),
        }));
        match self
            .store
            .put_opts(&self.path(key), PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(res) => Ok(WriteOutcome::Written(self.token(res.e_tag, res.version))),
            Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::NotFound { .. })
            | Err(object_store::Error::AlreadyExists { .. }) => {
                Ok(WriteOutcome::PreconditionFailed)
            }
            Err(e) => Err(map_err(key, e)),
        }
    }

    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        match &self.conditional_delete {
            ConditionalDelete::Unsupported => Err(StorageError::Unsupported {
                key: key.to_string(),
                operation: "conditional delete",
            }),
            ConditionalDelete::Serialized(lock) => {
                let _serialized = lock.lock().await;
                let current = match self.store.head(&self.path(key)).await {
                    Ok(meta) => self.token(meta.e_tag, meta.version),
                    Err(object_store::Error::NotFound { .. }) => {
                        return Ok(WriteOutcome::PreconditionFailed)
                    }
                    Err(e) => return Err(map_err(key, e)),
                };
                if current.as_ref() != Some(expected) {
                    return Ok(WriteOutcome::PreconditionFailed);
                }
                match self.store.delete(&self.path(key)).await {
                    Ok(()) => Ok(WriteOutcome::Written(None)),
                    Err(object_store::Error::NotFound { .. }) => {
                        Ok(WriteOutcome::PreconditionFailed)
                    }
                    Err(e) => Err(map_err(key, e)),
                }
            }
            ConditionalDelete::Signed { s3, region, client } => {
                let client = client.get_or_init(|| {
                    super::tls::install_crypto_provider();
                    reqwest::Client::new()
                });
                let target = SignedTarget { s3, region, client };
                signed_delete_if_match(&target, &self.path(key), key, expected).await
            }
        }
    }

    async fn delete(&self, key: &str) -> StorageResult<()> {
        match self.store.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(map_err(key, e)),
        }
    }

    /// Bulk deletes (Azure's batch and S3's multi-object delete are `POST`s, which
    /// the client does not retry when a connection drops mid-request) are retried
    /// here, up to `BULK_DELETE_ATTEMPTS` (4) times with jittered back-off, for the
    /// keys not yet confirmed deleted: deleting is idempotent.
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        let mut remaining: Vec<Path> = keys.iter().map(|k| self.path(k)).collect();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let (failed, error) = self.delete_batch(remaining).await;
            match error {
                None => return Ok(()),
                Some(e) if attempt >= BULK_DELETE_ATTEMPTS => return Err(e),
                Some(e) => {
                    tracing::debug!(attempt, error = %e, "retrying a bulk delete");
                    let ceiling = 50u64 << attempt;
                    let wait = rand::random_range(ceiling / 2..=ceiling);
                    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                    remaining = failed;
                }
            }
        }
    }

    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        let mut out: Vec<ObjectInfo> = self.list_stream(prefix).try_collect().await?;
        out.sort_by(|a, b| a.key.as_bytes().cmp(b.key.as_bytes()));
        Ok(out)
    }

    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        // object_store lists whole path segments; list the enclosing directory and
        // filter by the raw key prefix.
        let dir = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let dir_path = if dir.is_empty() && self.prefix.is_empty() {
            None
        } else {
            Some(self.path(dir))
        };
        let partial = prefix
            .get(dir.len()..)
            .unwrap_or("")
            .trim_start_matches('/');
        let listing = if self.ranged_listing && !partial.is_empty() {
            // Keys in byte order: start just before the first key with the prefix and
            // stop after the last one. Both bounds are compared in the backend's
            // (percent-encoded) key space, where the listing is ordered.
            let encoded = self.path(prefix).to_string();
            let offset = listing_offset(&encoded);
            let stream = match offset {
                Some(offset) => self.store.list_with_offset(dir_path.as_ref(), &offset),
                None => self.store.list(dir_path.as_ref()),
            };
            stream
                .try_take_while(move |m| {
                    let loc = m.location.as_ref();
                    let before_or_in = loc.starts_with(encoded.as_str()) || loc < encoded.as_str();
                    futures::future::ready(Ok(before_or_in))
                })
                .boxed()
        } else {
            self.store.list(dir_path.as_ref())
        };
        listing
            .map_err(move |e| map_err(prefix, e))
            .map_ok(move |m| self.info(m))
            .try_filter(move |i| futures::future::ready(i.key.starts_with(prefix)))
            .boxed()
    }

    fn ranged_listing(&self) -> bool {
        self.ranged_listing
    }

    fn root_url(&self) -> String {
        self.url.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    #[test]
    fn listing_offsets_skip_the_keys_of_the_character_before() {
        let at = |p: &str| listing_offset(p).map(|o| o.to_string());
        assert_eq!(at("repo/chunks/1").as_deref(), Some("repo/chunks/0~"));
        // Every id starting with the character before sorts below the offset, and
        // the offset below every key with the prefix.
        let offset = at("repo/chunks/1").unwrap();
        for below in [
            "repo/chunks/0",
            "repo/chunks/0ZZZZZZZZZZZZZZZZZZZ",
            "repo/chunks/00",
        ] {
            assert!(below < offset.as_str(), "{below}");
        }
        assert!(offset.as_str() < "repo/chunks/1");
        assert_eq!(at("repo/chunks/B").as_deref(), Some("repo/chunks/A~"));
        // No plain character below: the prefix's stem.
        assert_eq!(at("repo/chunks/a0").as_deref(), Some("repo/chunks/a"));
    }

    #[test]
    fn large_reads_split_into_nearly_equal_parts() {
        let split = SplitReads {
            ideal_request_bytes: 10,
            max_requests_per_object: 3,
        };
        assert_eq!(split.parts(&(0..10)), vec![0..10]);
        assert_eq!(split.parts(&(5..26)), vec![5..12, 12..19, 19..26]);
        // More than `max` ideal parts: `max` larger ones.
        assert_eq!(split.parts(&(0..100)), vec![0..34, 34..67, 67..100]);
        assert_eq!(split.parts(&(7..7)), vec![7..7]);
        let one = SplitReads {
            ideal_request_bytes: 1,
            max_requests_per_object: 1,
        };
        assert_eq!(one.parts(&(0..1000)), vec![0..1000]);
        assert_eq!(SplitReads::NEVER.parts(&(0..u64::MAX / 2)).len(), 1);
        let d = SplitReads::default();
        assert_eq!(d.parts(&(0..12 * 1024 * 1024)).len(), 1);
        assert_eq!(d.parts(&(0..(12 * 1024 * 1024 + 1))).len(), 2);
    }

    #[tokio::test]
    async fn a_split_read_returns_the_same_bytes_and_reports_short_reads_whole() {
        let storage = ObjectStorage::new(Arc::new(InMemory::new()), "p", "memory://".into())
            .with_split_reads(SplitReads {
                ideal_request_bytes: 7,
                max_requests_per_object: 4,
            });
        let data: Vec<u8> = (0..100u8).collect();
        storage.put("k", Bytes::from(data.clone())).await.unwrap();
        for range in [0..100, 3..40, 90..100, 50..50] {
            let got = storage.get_range("k", range.clone()).await.unwrap();
            let (s, e) = (range.start as usize, range.end as usize);
            assert_eq!(got.as_ref(), &data[s..e], "{range:?}");
        }
        match storage.get_range("k", 80..130).await {
            Err(StorageError::ShortRead {
                requested, size, ..
            }) => assert_eq!((requested, size), (80..130, 100)),
            other => panic!("expected a short read, got {other:?}"),
        }
    }

    /// An in-memory store whose bulk deletes drop the connection: each of the first
    /// `failures` calls deletes the first `done` paths, then fails the rest of the
    /// batch the way a reset connection does (one error naming no path).
    #[derive(Debug)]
    struct DroppingDeletes {
        inner: InMemory,
        failures: std::sync::atomic::AtomicU32,
        done: usize,
    }

    impl fmt::Display for DroppingDeletes {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "DroppingDeletes")
        }
    }

    #[async_trait]
    impl ObjectStore for DroppingDeletes {
        async fn put_opts(
            &self,
            location: &Path,
            payload: object_store::PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
            use futures::StreamExt;
            use std::sync::atomic::Ordering;
            let fail = self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let inner = self.inner.clone();
            let done = self.done;
            futures::stream::once(async move {
                let paths: Vec<Path> = locations.try_collect().await?;
                let keep = if fail {
                    done.min(paths.len())
                } else {
                    paths.len()
                };
                let mut out = Vec::new();
                for p in &paths[..keep] {
                    out.push(match inner.delete(p).await {
                        Ok(()) => Ok(p.clone()),
                        Err(e) => Err(e),
                    });
                }
                if fail {
                    out.push(Err(object_store::Error::Generic {
                        store: "DroppingDeletes",
                        source: "connection reset by peer".into(),
                    }));
                }
                Ok::<_, object_store::Error>(futures::stream::iter(out))
            })
            .map(|r| match r {
                Ok(s) => s.boxed(),
                Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
            })
            .flatten()
            .boxed()
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    async fn dropping_deletes(failures: u32, keys: &[String]) -> ObjectStorage {
        let store = Arc::new(DroppingDeletes {
            inner: InMemory::new(),
            failures: failures.into(),
            done: 2,
        });
        let storage = ObjectStorage::new(store, "p", "memory://".into());
        for k in keys {
            storage.put(k, Bytes::from_static(b"x")).await.unwrap();
        }
        storage
    }

    #[tokio::test]
    async fn a_bulk_delete_whose_connection_drops_is_retried_until_every_key_is_gone() {
        let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
        let storage = dropping_deletes(BULK_DELETE_ATTEMPTS - 1, &keys).await;
        storage.delete_many(&keys).await.unwrap();
        assert!(storage.list("").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_bulk_delete_failing_every_attempt_returns_the_backend_error() {
        let keys: Vec<String> = (0..9).map(|i| format!("k{i}")).collect();
        let storage = dropping_deletes(BULK_DELETE_ATTEMPTS, &keys).await;
        match storage.delete_many(&keys).await {
            Err(StorageError::Backend { .. }) => {}
            other => panic!("expected a backend error, got {other:?}"),
        }
        // Each attempt deleted two of the keys it was given, and only keys not yet
        // deleted were sent again.
        let left = storage.list("").await.unwrap().len() as u32;
        assert_eq!(left, 9 - 2 * BULK_DELETE_ATTEMPTS);
    }
}
