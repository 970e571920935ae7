//! The chunk port: the one way an [`Array`](crate::zarr::Array) moves chunk bytes to
//! and from its store, addressed by chunk index (`[1, 0]`), never by key.
//!
//! A port is opened for one array ([`open_chunk_port`]) and serves its chunks:
//! whole (`get`, `set`, `erase`), by byte ranges (`get_ranges`, for shards) and many
//! at once (`get_many`, which a store may serve with fewer requests). Its work comes
//! in two steps:
//!
//! - the async step, [`ChunkPort::prepare`]: everything the chunks of a region need
//!   that may wait on I/O (a repository session resolves the array's chunk refs by
//!   fetching every manifest the region touches);
//! - the transfer step, [`ChunkPort::read_into`] and [`ChunkPort::write_now`]:
//!   plain blocking calls that move bytes on the compute thread that decodes or
//!   encodes them (local files read into the caller's buffer; a chunk written by the
//!   thread that encoded it). A transfer that this port cannot make here (object
//!   storage, a manifest not prepared, a virtual chunk) says so with
//!   [`ReadInto::Elsewhere`] / [`WriteNow::Elsewhere`], and the caller takes the
//!   async route; a transfer that fails is a typed [`StoreError`], never a silent
//!   decline.
//!
//! Plain stores (memory, a directory) get [`KeyedChunks`], which builds each key
//! once from the array's chunk key encoding and calls the [`Store`]; a repository
//! session's store opens its own port through [`Store::chunk_port`] (node, shape and
//! manifests resolved once, no key parsing).

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

use super::{ByteRange, Store, StoreError};
use crate::zarr::chunk_key_encoding::ChunkKeyEncoding;
use crate::zarr::subset::ArraySubset;

/// What [`ChunkPort::read_into`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadInto {
    /// `dest` holds the chunk's stored bytes.
    Read,
    /// The chunk is not stored (it reads as the fill value); `dest` is untouched.
    Missing,
    /// This port cannot read the chunk on this thread (no local file, the ref not
    /// prepared, a virtual or differently sized chunk): read it with
    /// [`ChunkPort::get`]. `dest` is untouched.
    Elsewhere,
}

/// What [`ChunkPort::read_now`] found.
#[derive(Debug)]
pub enum ReadNow {
    /// The chunk's stored bytes.
    Read(Bytes),
    /// The chunk is not stored (it reads as the fill value).
    Missing,
    /// This port cannot read the chunk on this thread (no local file, the ref not
    /// prepared, a virtual chunk, more than the bytes allowed): read it with
    /// [`ChunkPort::get`].
    Elsewhere,
}

/// What [`ChunkPort::write_now`] did.
#[derive(Debug)]
pub enum WriteNow {
    /// The chunk is stored.
    Written,
    /// This port cannot write here (object storage, a synced disk, a plain store):
    /// the bytes, to be written with [`ChunkPort::set`].
    Elsewhere(Bytes),
}

/// The chunks of one array, addressed by chunk index (see the module documentation).
/// All methods are safe to call concurrently; `read_into` and `write_now` block and
/// belong on compute or blocking threads, never on the async executor.
#[async_trait]
pub trait ChunkPort: Send + Sync + Debug {
    /// The store key of chunk `chunk` (for error messages and key-value callers).
    fn key(&self, chunk: &[u64]) -> String;

    /// The async step for the chunks in `chunks` (a box of chunk indices: start and
    /// shape in chunks): fetches what the transfer step needs. The default does
    /// nothing.
    ///
    /// # Errors
    /// Store errors (a manifest that cannot be read).
    async fn prepare(&self, chunks: &ArraySubset) -> Result<(), StoreError> {
        let _ = chunks;
        Ok(())
    }

    /// The stored bytes of a chunk, `None` when it is not stored.
    ///
    /// # Errors
    /// Store errors naming the chunk's key.
    async fn get(&self, chunk: &[u64]) -> Result<Option<Bytes>, StoreError>;

    /// Byte ranges of a chunk's stored bytes, one `Bytes` per range, in order;
    /// `None` when it is not stored.
    ///
    /// # Errors
    /// [`StoreError::InvalidRange`]; store errors.
    async fn get_ranges(
        &self,
        chunk: &[u64],
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError>;

    /// The stored bytes of many chunks, as a stream of `(position in chunks,
    /// outcome)` in completion order, at most `concurrency` requests in flight. The
    /// default reads each with [`ChunkPort::get`].
    fn get_many<'a>(
        &'a self,
        chunks: Vec<Vec<u64>>,
        concurrency: usize,
    ) -> BoxStream<'a, (usize, Result<Option<Bytes>, StoreError>)> {
        futures::stream::iter(chunks.into_iter().enumerate())
            .map(move |(i, chunk)| async move { (i, self.get(&chunk).await) })
            .buffer_unordered(concurrency.max(1))
            .boxed()
    }

    /// Stores a chunk's encoded bytes.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`]; store errors.
    async fn set(&self, chunk: &[u64], bytes: Bytes) -> Result<(), StoreError>;

    /// Removes a chunk (it then reads as the fill value); removing an absent chunk
    /// is not an error.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`]; store errors.
    async fn erase(&self, chunk: &[u64]) -> Result<(), StoreError>;

    /// The transfer step of a read: the chunk's stored bytes straight into `dest`,
    /// when they are exactly `dest.len()` bytes and this port reads them on the
    /// calling thread. The default is [`ReadInto::Elsewhere`].
    ///
    /// # Errors
    /// A read that was attempted and failed (a missing or short chunk file).
    fn read_into(&self, chunk: &[u64], dest: &mut [u8]) -> Result<ReadInto, StoreError> {
        let _ = (chunk, dest);
        Ok(ReadInto::Elsewhere)
    }

    /// The transfer step of a read of a whole chunk of unknown stored size: its
    /// stored bytes, read on the calling thread (into a recycled buffer), when this
    /// port reads them that way and they are at most `max_len` bytes (a bound on
    /// what a manifest or a file may make it allocate). The default is
    /// [`ReadNow::Elsewhere`].
    ///
    /// # Errors
    /// A read that was attempted and failed (a missing or short chunk file).
    fn read_now(&self, chunk: &[u64], max_len: usize) -> Result<ReadNow, StoreError> {
        let _ = (chunk, max_len);
        Ok(ReadNow::Elsewhere)
    }

    /// The transfer step of a write: stores the chunk from the calling thread
    /// where this port writes that way (local disks). The default hands the bytes
    /// back ([`WriteNow::Elsewhere`]).
    ///
    /// # Errors
    /// A write that was attempted and failed, or refused (read-only, no such array).
    fn write_now(&self, chunk: &[u64], bytes: Bytes) -> Result<WriteNow, StoreError> {
        let _ = chunk;
        Ok(WriteNow::Elsewhere(bytes))
    }

    /// [`ChunkPort::write_now`] from borrowed bytes: stores the chunk from the
    /// calling thread without taking ownership of `bytes`, where this port writes
    /// that way and keeps nothing of them (native chunk files on local disks).
    /// Returns whether it stored the chunk; `false` (the default) leaves it to the
    /// caller, which copies the bytes and writes them the usual way.
    ///
    /// # Errors
    /// A write that was attempted and failed, or refused (read-only, no such array).
    fn write_now_borrowed(&self, chunk: &[u64], bytes: &[u8]) -> Result<bool, StoreError> {
        let _ = (chunk, bytes);
        Ok(false)
    }
}

/// How an array names its chunks in a key-value store: the array's key prefix
/// (`""` for the root, else `a/b/`) and its chunk key encoding.
#[derive(Clone, Debug)]
pub struct ChunkKeys {
    /// The array's key prefix: empty for the root array, else its path and `/`.
    pub prefix: String,
    /// The array's chunk key encoding.
    pub encoding: Arc<dyn ChunkKeyEncoding>,
}

impl ChunkKeys {
    /// The array path in store form (`a/b`, `""` for the root).
    pub fn path(&self) -> &str {
        self.prefix.strip_suffix('/').unwrap_or(&self.prefix)
    }

    /// The store key of chunk `chunk`.
    pub fn key(&self, chunk: &[u64]) -> String {
        let mut key = String::with_capacity(self.prefix.len() + 4 + 4 * chunk.len());
        key.push_str(&self.prefix);
        key.push_str(&self.encoding.encode(chunk));
        key
    }
}

/// The chunk port of the array named by `keys` in `store`: the store's own
/// ([`Store::chunk_port`]) or, for plain stores, a [`KeyedChunks`].
pub fn open_chunk_port(store: &Arc<dyn Store>, keys: ChunkKeys) -> Arc<dyn ChunkPort> {
    match store.chunk_port(&keys) {
        Some(port) => port,
        None => Arc::new(KeyedChunks::new(Arc::clone(store), keys)),
    }
}

/// The chunk port of a plain key-value store: each chunk's key built from the
/// array's chunk key encoding, then the [`Store`] called. Built with
/// [`KeyedChunks::new`] it has no transfer step ([`ReadInto::Elsewhere`],
/// [`WriteNow::Elsewhere`]); the memory and filesystem stores add theirs.
#[derive(Debug)]
pub struct KeyedChunks {
    store: Arc<dyn Store>,
    keys: ChunkKeys,
    transfer: Option<Arc<dyn KeyTransfer>>,
}

impl KeyedChunks {
    /// The port of the array named by `keys` in `store`.
    pub fn new(store: Arc<dyn Store>, keys: ChunkKeys) -> Self {
        KeyedChunks {
            store,
            keys,
            transfer: None,
        }
    }

    /// The port of the array named by `keys` in `store`, whose transfer step is
    /// `transfer`'s.
    pub(super) fn with_transfer(
        store: Arc<dyn Store>,
        keys: ChunkKeys,
        transfer: Arc<dyn KeyTransfer>,
    ) -> Self {
        KeyedChunks {
            store,
            keys,
            transfer: Some(transfer),
        }
    }
}

/// The transfer step of a plain store that reads or writes a key on the calling
/// thread (memory, local files); as [`ChunkPort::read_into`] and
/// [`ChunkPort::write_now`], by key.
pub(super) trait KeyTransfer: Send + Sync + Debug {
    /// As [`ChunkPort::read_into`].
    fn read_into(&self, key: &str, dest: &mut [u8]) -> Result<ReadInto, StoreError>;

    /// As [`ChunkPort::read_now`].
    fn read_now(&self, key: &str, max_len: usize) -> Result<ReadNow, StoreError>;

    /// As [`ChunkPort::write_now`].
    fn write_now(&self, key: &str, bytes: Bytes) -> Result<WriteNow, StoreError> {
        let _ = key;
        Ok(WriteNow::Elsewhere(bytes))
    }
}

#[async_trait]
impl ChunkPort for KeyedChunks {
    fn key(&self, chunk: &[u64]) -> String {
        self.keys.key(chunk)
    }

    async fn get(&self, chunk: &[u64]) -> Result<Option<Bytes>, StoreError> {
        self.store.get(&self.keys.key(chunk)).await
    }

    async fn get_ranges(
        &self,
        chunk: &[u64],
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.store
            .get_partial_values(&self.keys.key(chunk), ranges)
            .await
    }

    fn get_many<'a>(
        &'a self,
        chunks: Vec<Vec<u64>>,
        concurrency: usize,
    ) -> BoxStream<'a, (usize, Result<Option<Bytes>, StoreError>)> {
        let keys = chunks.iter().map(|c| self.keys.key(c)).collect();
        self.store.get_many(keys, concurrency)
    }

    async fn set(&self, chunk: &[u64], bytes: Bytes) -> Result<(), StoreError> {
        self.store.set(&self.keys.key(chunk), bytes).await
    }

    async fn erase(&self, chunk: &[u64]) -> Result<(), StoreError> {
        self.store.erase(&self.keys.key(chunk)).await
    }

    fn read_into(&self, chunk: &[u64], dest: &mut [u8]) -> Result<ReadInto, StoreError> {
        match &self.transfer {
            Some(t) => t.read_into(&self.keys.key(chunk), dest),
            None => Ok(ReadInto::Elsewhere),
        }
    }

    fn read_now(&self, chunk: &[u64], max_len: usize) -> Result<ReadNow, StoreError> {
        match &self.transfer {
            Some(t) => t.read_now(&self.keys.key(chunk), max_len),
            None => Ok(ReadNow::Elsewhere),
        }
    }

    fn write_now(&self, chunk: &[u64], bytes: Bytes) -> Result<WriteNow, StoreError> {
        match &self.transfer {
            Some(t) => t.write_now(&self.keys.key(chunk), bytes),
            None => Ok(WriteNow::Elsewhere(bytes)),
        }
    }
}
