//! The Zarr v3 abstract store interface and its implementations.
//!
//! Implements the abstract store operations of the Zarr v3 core specification,
//! section "Abstract store interface" (`../shared/specs/zarr/v3/core/index.rst`):
//! `get`, `get_partial_values`, `set`, `erase`, `list`, `list_prefix`, `list_dir`.
//!
//! A store knows nothing of arrays or codecs: keys are `/`-separated strings without a
//! leading `/` (e.g. `zarr.json`, `temp/zarr.json`, `temp/c/0/1`), values are bytes.
//! Implementations: [`memory::MemoryStore`], [`filesystem::FilesystemStore`]; the
//! view of a repository session, [`SessionStore`](crate::session::SessionStore),
//! lives with sessions (`session/store.rs`), above this layer.

pub mod chunks;
#[cfg(feature = "testing")]
pub mod conformance;
pub mod filesystem;
pub mod memory;

pub use chunks::{open_chunk_port, ChunkKeys, ChunkPort, KeyedChunks, ReadInto, ReadNow, WriteNow};
pub use filesystem::FilesystemStore;
pub use memory::MemoryStore;

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

/// A byte range within a stored value, as in the core spec's `get_partial_values`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteRange {
    /// `length` bytes starting at byte `offset`.
    FromStart {
        /// Start, in bytes from the beginning of the value.
        offset: u64,
        /// Length in bytes; `None` means up to the end of the value.
        length: Option<u64>,
    },
    /// The last `n` bytes of the value.
    Suffix(u64),
}

impl ByteRange {
    /// Resolves the range against a value of `size` bytes into `start..end`.
    ///
    /// # Errors
    /// [`StoreError::InvalidRange`] when the range does not lie within `size` bytes.
    pub fn to_range(&self, key: &str, size: u64) -> Result<std::ops::Range<u64>, StoreError> {
        let (start, end) = match *self {
            ByteRange::FromStart { offset, length } => {
                let end = match length {
                    Some(len) => offset.checked_add(len),
                    None => Some(size),
                };
                (offset, end)
            }
            ByteRange::Suffix(n) => (size.saturating_sub(n), Some(size)),
        };
        match end {
            Some(end) if start <= end && end <= size => Ok(start..end),
            _ => Err(StoreError::InvalidRange {
                key: key.to_string(),
                range: *self,
                size,
            }),
        }
    }
}

/// The result of [`Store::list_dir`]: the keys directly under a prefix, and the
/// child prefixes (each ending in `/`) that have keys further down.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListDirResult {
    /// Full keys directly under the prefix, sorted.
    pub keys: Vec<String>,
    /// Full child prefixes ending in `/`, sorted.
    pub prefixes: Vec<String>,
}

/// Errors of store operations. Every variant names the key involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A byte range that does not lie within the stored value.
    #[error("byte range {range:?} is outside the {size} bytes stored at key `{key}`")]
    InvalidRange {
        /// The key read.
        key: String,
        /// The requested range.
        range: ByteRange,
        /// The size of the stored value, in bytes.
        size: u64,
    },
    /// A key that is not valid for this store (empty segment, `..`, leading `/`, ...).
    #[error("invalid store key `{key}`: {reason}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The store is read-only and a write was attempted.
    #[error("store is read-only: cannot write key `{key}`")]
    ReadOnly {
        /// The key whose write was refused.
        key: String,
    },
    /// An I/O failure of the filesystem store.
    #[error("I/O error at key `{key}`: {source}")]
    Io {
        /// The key involved.
        key: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A repository or session operation behind a
    /// [`SessionStore`](crate::session::SessionStore) failed (a
    /// read-only session, a conflict, a missing node, storage...). The store layer
    /// does not know the repository's error type: `source` is a [`crate::Error`],
    /// reached with [`StoreError::repository_error`] (defined beside the session
    /// store, which makes these errors) or a downcast.
    #[error("repository error at key `{key}`: {source}")]
    Repository {
        /// The key involved.
        key: String,
        /// The repository's error (a [`crate::Error`]).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A failure of another backend behind a store, carrying its error.
    #[error("store backend error at key `{key}`: {source}")]
    Backend {
        /// The key involved.
        key: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// The Zarr v3 abstract store (core spec, "Abstract store interface").
///
/// Keys are `/`-separated, relative to the store root, with no leading `/`.
/// All methods are safe to call concurrently from many tasks.
#[async_trait]
pub trait Store: Send + Sync + Debug {
    /// The value stored at `key`, or `None` when there is none.
    ///
    /// # Errors
    /// [`StoreError`] on backend failures; a missing key is `Ok(None)`, not an error.
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError>;

    /// Parts of the value at `key`, one `Bytes` per requested range, in order;
    /// `None` when the key is absent.
    ///
    /// # Errors
    /// [`StoreError::InvalidRange`] for a range outside the value; backend failures.
    async fn get_partial_values(
        &self,
        key: &str,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError>;

    /// The values at many `keys`, as a stream of `(position in keys, value)` in
    /// completion order (`None`: no value at that key). One key's failure is that
    /// item's error; the others are still read. The default reads each key with
    /// [`Store::get`], at most `concurrency` at once; stores that know several values
    /// lie close together in one object (a repository session's virtual chunks of
    /// one file) override it to read them with fewer requests, with at most
    /// `concurrency` requests in flight.
    fn get_many<'a>(
        &'a self,
        keys: Vec<String>,
        concurrency: usize,
    ) -> BoxStream<'a, (usize, Result<Option<Bytes>, StoreError>)> {
        futures::stream::iter(keys.into_iter().enumerate())
            .map(move |(i, key)| async move { (i, self.get(&key).await) })
            .buffer_unordered(concurrency.max(1))
            .boxed()
    }

    /// Stores `value` at `key`, replacing any previous value.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`] on read-only stores; backend failures.
    async fn set(&self, key: &str, value: Bytes) -> Result<(), StoreError>;

    /// Removes `key`; removing an absent key is not an error.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`] on read-only stores; backend failures.
    async fn erase(&self, key: &str) -> Result<(), StoreError>;

    /// Removes every key that starts with `prefix`.
    ///
    /// # Errors
    /// As [`Store::erase`].
    async fn erase_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        for key in self.list_prefix(prefix).await? {
            self.erase(&key).await?;
        }
        Ok(())
    }

    /// Every key in the store, sorted.
    ///
    /// # Errors
    /// Backend failures.
    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.list_prefix("").await
    }

    /// Every key that starts with `prefix`, sorted.
    ///
    /// # Errors
    /// Backend failures.
    async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// The keys and child prefixes directly under `prefix` (which is empty or ends in `/`).
    ///
    /// # Errors
    /// Backend failures.
    async fn list_dir(&self, prefix: &str) -> Result<ListDirResult, StoreError>;

    /// The size in bytes of the value stored at `key` (as stored, so after the codecs
    /// for a chunk), or `None` when there is none: the abstract store's `getsize`.
    /// The default reads the value; backends that know sizes without reading override it.
    ///
    /// # Errors
    /// Backend failures.
    async fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        Ok(self.get(key).await?.map(|v| v.len() as u64))
    }

    /// The store's own chunk port for the array whose chunks `keys` names, or
    /// `None` (the default) for a plain key-value store, whose arrays then use a
    /// [`KeyedChunks`] over this store. Callers use [`open_chunk_port`]. A
    /// repository session's store answers with a port that reads and writes the
    /// array's chunk refs by index, without building or parsing keys.
    fn chunk_port(&self, keys: &ChunkKeys) -> Option<std::sync::Arc<dyn ChunkPort>> {
        let _ = keys;
        None
    }

    /// Whether [`Store::set`] and [`Store::erase`] are allowed.
    fn is_writable(&self) -> bool {
        true
    }
}
