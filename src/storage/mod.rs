//! Object storage for repositories: one small async trait, [`Storage`], with three
//! backends built on `object_store`: the local filesystem (the default), memory, and
//! S3-compatible servers.
//!
//! Storage knows nothing of Icechunk or Zarr: it stores bytes under `/`-separated keys
//! relative to a repository root, and offers the operations the Icechunk specification
//! requires of a storage system (section "Storage Operations"): in-place write,
//! write-if-not-exists, conditional update (compare-and-swap on a version token),
//! seekable (ranged) reads, deletes and lexicographically sorted listing.

pub mod cloud;
pub mod coalesce;
#[cfg(feature = "testing")]
pub mod conformance;
pub mod credential_env;
#[cfg(feature = "testing")]
pub mod fault;
pub(crate) mod files;
mod guard;
mod latency;
mod limit;
mod local;
mod memory;
mod object;
mod read_only;
mod s3;
pub(crate) mod tls;
mod url;

use std::fmt::{Debug, Display};
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};

pub use cloud::{
    new_azure_storage, new_gcs_storage, new_http_storage, new_s3_storage_with, AzureCredentials,
    ClientSettings, GcsCredentials, S3Extras,
};
pub use coalesce::CoalesceOptions;
pub use guard::{CheckedConditionalWrites, PROBE_PREFIX};
pub use latency::LatencyStorage;
pub use limit::{LimitedStorage, RequestLimit};
pub use local::{Durability, LocalStorage, LocalStorageOptions};
pub use memory::new_in_memory_storage;
pub use object::{ObjectStorage, SplitReads};
pub use read_only::ReadOnlyStorage;
pub use s3::{new_s3_storage, S3Options};
pub use url::{parse_storage_url, StorageLocation};

/// An opaque version token of a stored object (an etag), used for compare-and-swap.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectVersion(pub String);

/// Facts about one stored object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Key relative to the storage root, `/`-separated.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time.
    pub last_modified: DateTime<Utc>,
    /// The version token, when the backend reports one.
    pub version: Option<ObjectVersion>,
}

/// The bytes of an object together with the version they were read at.
#[derive(Clone, Debug)]
pub struct VersionedBytes {
    /// The object's bytes.
    pub bytes: Bytes,
    /// The version token of what was read, when the backend reports one.
    pub version: Option<ObjectVersion>,
}

/// The outcome of a conditional write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The object was written; carries its new version when the backend reports one.
    Written(Option<ObjectVersion>),
    /// The precondition did not hold (object already exists, or its version moved);
    /// nothing was written.
    PreconditionFailed,
}

/// Errors of storage operations. Every variant names the key involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// No object is stored at the key.
    #[error("object not found: `{key}`")]
    NotFound {
        /// The missing key.
        key: String,
    },
    /// A ranged read asked for bytes past the end of the object.
    #[error("short read of `{key}`: asked for bytes {requested:?}, object has {size} bytes")]
    ShortRead {
        /// The key read.
        key: String,
        /// The requested byte range.
        requested: Range<u64>,
        /// The object's actual size in bytes.
        size: u64,
    },
    /// A ranged read whose start is past its end (a caller's arithmetic error; never
    /// answered with empty bytes).
    #[error("invalid byte range {requested:?} for `{key}`: start is past end")]
    InvalidRange {
        /// The key read.
        key: String,
        /// The requested byte range.
        requested: Range<u64>,
    },
    /// A storage URL or option that cannot be used.
    #[error("invalid storage location `{location}`: {reason}")]
    InvalidLocation {
        /// The URL or path given.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A failure reported by the backend (network, permissions, server error...).
    #[error("storage backend error at `{key}`: {source}")]
    Backend {
        /// The key involved (empty for whole-store operations).
        key: String,
        /// The backend's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// A local filesystem failure outside object_store (locking, renames).
    #[error("local storage I/O error at `{key}`: {source}")]
    Io {
        /// The key involved.
        key: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A write to a storage that only reads (an HTTP server); nothing was sent.
    #[error("storage `{location}` is read-only: cannot write `{key}`")]
    ReadOnly {
        /// The key of the refused write.
        key: String,
        /// The storage's root URL.
        location: String,
    },
    /// The server does not enforce the preconditions of conditional writes
    /// (create-if-not-exists, compare-and-swap), so a commit could silently overwrite
    /// another: conditional writes are refused (see [`CheckedConditionalWrites`]).
    #[error(
        "storage `{location}` cannot be written safely: {reason}; floe refuses \
         repository writes on a server without atomic conditional writes"
    )]
    UnsafeConditionalWrites {
        /// The storage's root URL.
        location: String,
        /// What the server's check found.
        reason: String,
    },
    /// The backend cannot do this operation (e.g. a conditional delete on a store
    /// without one); nothing was changed.
    #[error("storage at `{key}` does not support {operation}")]
    Unsupported {
        /// The key involved.
        key: String,
        /// The operation, in words.
        operation: &'static str,
    },
}

/// Result of storage operations.
pub type StorageResult<T> = Result<T, StorageError>;

/// Blocking access to a storage whose objects are files on a local disk, the
/// capability [`Storage::local_files`] offers: a read or write is then a quick
/// system call, made on the calling thread without a hop to the blocking pool.
/// Call these only on a blocking or compute thread, never on the async executor.
///
/// Who uses it: the walk along a spec-1 snapshot chain (one thread hop per batch
/// of snapshots instead of one per snapshot), and a session's chunk transfers
/// (an uncompressed chunk read straight into the caller's output; a chunk encoded
/// on the compute pool written by the thread that encoded it).
pub trait LocalFiles: Send + Sync + Debug {
    /// [`Storage::get`] as a blocking call.
    ///
    /// # Errors
    /// As [`Storage::get`].
    fn get(&self, key: &str) -> StorageResult<VersionedBytes>;

    /// Reads `dest.len()` bytes of an object, from byte `start`, straight into
    /// `dest`.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] when absent; [`StorageError::ShortRead`] when the
    /// object ends before `start + dest.len()` (`dest` is then partly written).
    fn get_range_into(&self, key: &str, start: u64, dest: &mut [u8]) -> StorageResult<()>;

    /// Reads `len` bytes of an object, from byte `start`, into a buffer recycled
    /// from floe's buffer pool. The default zeroes the buffer, then reads with
    /// [`LocalFiles::get_range_into`]; local files read into it without zeroing it.
    ///
    /// # Errors
    /// As [`LocalFiles::get_range_into`].
    fn get_range_owned(&self, key: &str, start: u64, len: usize) -> StorageResult<Bytes> {
        let mut buf = crate::buffer_pool::take(len);
        buf.resize(len, 0);
        self.get_range_into(key, start, &mut buf)?;
        Ok(crate::buffer_pool::bytes_of(buf))
    }

    /// The object's file, open for reading, for a caller that hands it to the
    /// operating system (`floe serve` maps chunk files and sends them with
    /// `sendfile(2)`); `None`, the default, when this storage's objects are not plain
    /// files.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] when absent; [`StorageError::Io`] when the file
    /// cannot be opened.
    fn open(&self, key: &str) -> StorageResult<Option<std::fs::File>> {
        let _ = key;
        Ok(None)
    }

    /// [`Storage::put_fresh`] as a blocking call (a new object under a key nothing
    /// else writes or reads yet, written in place).
    ///
    /// # Errors
    /// As [`Storage::put_fresh`].
    fn put_fresh(&self, key: &str, bytes: &[u8]) -> StorageResult<()>;

    /// Whether [`LocalFiles::put_fresh`] is a quick call, fit for a compute thread
    /// (`false` when every write waits for the disk, as with synced durability).
    fn quick_writes(&self) -> bool {
        true
    }
}

/// Byte storage under a repository root.
///
/// Keys are `/`-separated paths relative to the root, with no leading `/`
/// (e.g. `refs/branch.main/ref.json`). Every method is safe to call concurrently from
/// many tasks and, for [`Storage::put_if_absent`] and [`Storage::put_if_match`], from
/// many OS processes: exactly one of several racing conditional writes succeeds.
#[async_trait]
pub trait Storage: Send + Sync + Debug + Display {
    /// Reads a whole object and the version it was read at.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] when absent; [`StorageError::Backend`] otherwise.
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes>;

    /// Reads bytes `range` (`start..end`, in bytes) of an object.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] when absent (also for an empty range);
    /// [`StorageError::ShortRead`] when the object is shorter than `range.end` (also
    /// for an empty range starting past the end); [`StorageError::InvalidRange`] when
    /// `range.start > range.end`; [`StorageError::Backend`] otherwise.
    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes>;

    /// Reads several byte ranges (`start..end`, in bytes) of one object: one `Bytes`
    /// per range, in the order of `ranges` (which may overlap and come in any order).
    /// Ranges whose gap is at most [`CoalesceOptions::max_gap`] are read by one
    /// request spanning at most [`CoalesceOptions::max_span`] bytes (the defaults;
    /// see [`coalesce`]), at most [`coalesce::DEFAULT_CONCURRENCY`] requests at once.
    /// No range: no request, an empty result. The default plans the requests and
    /// reads each with [`Storage::get_range`]; object_store-backed storages hand each
    /// planned request to `ObjectStore::get_ranges`.
    ///
    /// # Errors
    /// [`StorageError::InvalidRange`] for the first inverted range, before any read;
    /// [`StorageError::NotFound`] when absent; [`StorageError::ShortRead`] naming the
    /// first range (in the order of `ranges`) past the object's end;
    /// [`StorageError::Backend`] otherwise. One failing range fails the whole call.
    async fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> StorageResult<Vec<Bytes>> {
        check_ranges(key, ranges)?;
        coalesce::read_coalesced(
            ranges,
            CoalesceOptions::default(),
            coalesce::DEFAULT_CONCURRENCY,
            |span| self.get_range(key, span),
            |range, available| StorageError::ShortRead {
                key: key.to_string(),
                requested: range,
                size: available,
            },
        )
        .await
        .map_err(|e| short_read_of_member(e, ranges))
    }

    /// Size, modification time and version of an object.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] when absent; [`StorageError::Backend`] otherwise.
    async fn head(&self, key: &str) -> StorageResult<ObjectInfo>;

    /// Writes an object unconditionally, replacing any previous one.
    ///
    /// # Errors
    /// [`StorageError::Backend`] / [`StorageError::Io`].
    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>>;

    /// Writes a new object under a key no other writer uses and nothing reads before
    /// this call returns, such as a chunk named by a fresh random id, which becomes
    /// reachable only once a later write (a commit) refers to it.
    ///
    /// Such an object needs no atomic replacement, so a backend may write it in place
    /// (the local filesystem does: no temporary file and rename). A call that fails
    /// or is interrupted may then leave a partial object under `key`; nothing refers
    /// to it, and garbage collection removes it like any other unreferenced object.
    /// The default is [`Storage::put`].
    ///
    /// # Errors
    /// As [`Storage::put`].
    async fn put_fresh(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        self.put(key, bytes).await.map(|_| ())
    }

    /// Writes an object only if no object exists at `key` (create-if-not-exists).
    ///
    /// # Errors
    /// [`StorageError::Backend`] / [`StorageError::Io`]; an existing object is
    /// `Ok(WriteOutcome::PreconditionFailed)`, not an error.
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome>;

    /// Replaces an object only if its current version is `expected`
    /// (compare-and-swap). A missing object fails the precondition.
    ///
    /// # Errors
    /// [`StorageError::Backend`] / [`StorageError::Io`]; a version mismatch is
    /// `Ok(WriteOutcome::PreconditionFailed)`, not an error.
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome>;

    /// Deletes an object only if its current version is `expected` (a conditional
    /// delete: S3's `DeleteObject` with `If-Match: <etag>`; on the local filesystem
    /// checked under the same directory lock as [`Storage::put_if_match`]). A missing
    /// object fails the precondition. Maintenance deletes refs this way, so a ref
    /// moved by a writer after it was judged is never deleted.
    ///
    /// The default implementation supports no conditional delete and fails with
    /// [`StorageError::Unsupported`]; it never deletes unconditionally.
    ///
    /// # Errors
    /// [`StorageError::Unsupported`] where the backend cannot delete conditionally;
    /// [`StorageError::Backend`] / [`StorageError::Io`]; a version mismatch is
    /// `Ok(WriteOutcome::PreconditionFailed)`, not an error.
    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        let _ = expected;
        Err(StorageError::Unsupported {
            key: key.to_string(),
            operation: "conditional delete",
        })
    }

    /// Deletes an object; deleting an absent object is not an error.
    ///
    /// # Errors
    /// [`StorageError::Backend`] / [`StorageError::Io`].
    async fn delete(&self, key: &str) -> StorageResult<()>;

    /// Deletes many objects, in bulk requests where the backend has them (S3's
    /// `DeleteObjects`, 1,000 keys a request); absent objects are not an error. Every
    /// key is tried even when some fail.
    ///
    /// # Errors
    /// The first failure, after trying every key.
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        let mut first = None;
        for key in keys {
            if let Err(e) = self.delete(key).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Every object whose key starts with `prefix`, sorted by key bytes.
    ///
    /// # Errors
    /// [`StorageError::Backend`].
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>>;

    /// Every object whose key starts with `prefix`, as a stream in no particular
    /// order that holds only what is in flight: for listings too large for memory
    /// (garbage collection of large repositories). The default collects
    /// [`Storage::list`]; object_store-backed storages stream page by page.
    ///
    /// # Errors
    /// Items are [`StorageError::Backend`] / [`StorageError::Io`] errors.
    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::{StreamExt, TryStreamExt};
        futures::stream::once(self.list(prefix))
            .map_ok(|all| futures::stream::iter(all.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    /// [`Storage::list_stream`] without the objects whose key `skip` accepts. The
    /// default filters the listing; a storage whose listing costs a call per object
    /// for its metadata (a local directory: one `stat` each) reads the keys first
    /// and looks only at the objects not skipped, so that a garbage collection never
    /// touches the objects it retains.
    ///
    /// # Errors
    /// As [`Storage::list_stream`].
    fn list_stream_except<'a>(
        &'a self,
        prefix: &'a str,
        skip: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::{StreamExt, TryStreamExt};
        self.list_stream(prefix)
            .try_filter(move |o| futures::future::ready(!skip(&o.key)))
            .boxed()
    }

    /// Whether [`Storage::list_stream`] of a prefix that ends inside a key segment
    /// (`chunks/A`) costs in proportion to the objects it returns, as a ranged
    /// listing does (S3's `start-after` over keys listed in byte order), rather than
    /// to the whole enclosing directory (a local directory walk). Callers split a
    /// large listing into concurrent listings of narrower prefixes only when it does:
    /// elsewhere each of them would walk the whole directory again.
    fn ranged_listing(&self) -> bool {
        false
    }

    /// The most requests this storage keeps in flight at once (its one concurrency
    /// setting), when it bounds them: object storage does (S3:
    /// [`S3Options::max_concurrent_requests`], default
    /// [`DEFAULT_MAX_CONCURRENT_REQUESTS`]); every request past the bound waits for
    /// one to end, so the Array API, the store API's bulk reads, manifest fetches and
    /// writes, listings and garbage collection's deletes together never have more in
    /// flight, nor more response bodies being received. `None`: no bound (local disks
    /// and memory).
    fn max_concurrent_requests(&self) -> Option<usize> {
        None
    }

    /// The one blocking capability of a storage: plain blocking calls on objects
    /// that are files on a local disk ([`LocalFiles`]), or `None` (the default:
    /// object stores). Wrappers forward it explicitly, applying their own rules to
    /// it (a read-only wrapper refuses its writes, fault injection applies its plan
    /// to it), never dropping it silently.
    fn local_files(&self) -> Option<Arc<dyn LocalFiles>> {
        None
    }

    /// The URL of the storage root (`file:///...`, `memory://`, `s3://bucket/prefix`).
    fn root_url(&self) -> String;
}

/// The default bound on requests in flight on object storage
/// ([`Storage::max_concurrent_requests`]): 64, chosen by measurement on the S3 test
/// server one 20 ms round trip away (`benches/s3_latency.py`; see the README,
/// "On object storage").
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 64;

/// Refuses the first inverted range of `ranges` (`start > end`) with
/// [`StorageError::InvalidRange`].
///
/// # Errors
/// As described.
pub(crate) fn check_ranges(key: &str, ranges: &[Range<u64>]) -> StorageResult<()> {
    match ranges.iter().find(|r| r.start > r.end) {
        Some(r) => Err(StorageError::InvalidRange {
            key: key.to_string(),
            requested: r.clone(),
        }),
        None => Ok(()),
    }
}

/// A short read of a merged request, reported as the short read of the first range
/// of `ranges` (the caller's order) that ends past the object's size; other errors
/// as they are.
pub(crate) fn short_read_of_member(e: StorageError, ranges: &[Range<u64>]) -> StorageError {
    match e {
        StorageError::ShortRead {
            key,
            requested,
            size,
        } => {
            let requested = ranges
                .iter()
                .find(|r| r.end > size)
                .cloned()
                .unwrap_or(requested);
            StorageError::ShortRead {
                key,
                requested,
                size,
            }
        }
        other => other,
    }
}

/// Opens the storage a repository URL or path points at, for reading or writing an
/// existing repository: a local directory must exist.
///
/// Accepted forms: a filesystem path or `file://` URL (local filesystem), `memory://`
/// (a new empty in-memory store), `s3://bucket/prefix` (an S3-compatible server
/// configured by `s3`, or by the standard `AWS_*` environment variables when `None`),
/// `gs://bucket/prefix` (Google Cloud Storage, configured by the environment) and
/// `az://container/prefix` (Azure Blob Storage, account and credentials from the
/// `AZURE_*` environment variables).
///
/// # Errors
/// [`StorageError::InvalidLocation`] for an unparseable URL or an unknown scheme;
/// [`StorageError::NotFound`] for a local directory that does not exist.
pub fn open_storage(location: &str, s3: Option<S3Options>) -> StorageResult<Arc<dyn Storage>> {
    if let StorageLocation::Local(path) = parse_storage_url(location)? {
        if !path.is_dir() {
            return Err(StorageError::NotFound {
                key: path.display().to_string(),
            });
        }
    }
    create_storage(location, s3)
}

/// Like [`open_storage`], but creates a missing local directory (for new repositories).
///
/// # Errors
/// [`StorageError::InvalidLocation`]; [`StorageError::Io`] when the directory cannot be
/// created.
pub fn create_storage(location: &str, s3: Option<S3Options>) -> StorageResult<Arc<dyn Storage>> {
    match parse_storage_url(location)? {
        StorageLocation::Local(path) => Ok(Arc::new(LocalStorage::new(&path)?)),
        StorageLocation::Memory => Ok(new_in_memory_storage()),
        StorageLocation::S3 { bucket, prefix } => {
            let opts = match s3 {
                Some(o) => o,
                None => S3Options::from_env(),
            };
            new_s3_storage(&bucket, &prefix, opts)
        }
        StorageLocation::Gcs { bucket, prefix } => new_gcs_storage(
            &bucket,
            &prefix,
            GcsCredentials::FromEnv,
            &[],
            &ClientSettings::default(),
        ),
        StorageLocation::Azure { container, prefix } => {
            let account = std::env::var("AZURE_STORAGE_ACCOUNT_NAME")
                .or_else(|_| std::env::var("AZURE_STORAGE_ACCOUNT"))
                .unwrap_or_default();
            new_azure_storage(
                &account,
                &container,
                &prefix,
                AzureCredentials::FromEnv,
                &[],
                &ClientSettings::default(),
            )
        }
    }
}
