//! Native chunk objects: written, read (with the optional byte cache) and, where
//! the storage's objects are local files, read and written with blocking calls.

#[allow(clippy::wildcard_imports)]
use super::*;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::format::keys;
use crate::format::ChunkId;
use crate::storage::{StorageError, StorageResult};

impl AssetManager {
    /// Writes a native chunk object. Its id is new and random and nothing refers to it
    /// until a commit does, so it goes through [`Storage::put_fresh`] (in place on
    /// local disks, where a rename per chunk was a tenth of a bulk write's CPU).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_chunk(&self, id: &ChunkId, bytes: Bytes) -> Result<()> {
        self.storage.put_fresh(&keys::chunk(id), bytes).await?;
        Ok(())
    }

    /// Native chunk objects as local files ([`Storage::local_files`]), for a
    /// session's transfer step; `None` on object storage.
    pub fn local_chunks(&self) -> Option<LocalChunks> {
        self.storage
            .local_files()
            .map(|files| LocalChunks { files })
    }

    /// Reads bytes `range` of native chunk object `id`.
    ///
    /// # Errors
    /// Storage errors: `NotFound` for a missing object, `ShortRead` when it is shorter
    /// than the range.
    pub async fn fetch_chunk(
        &self,
        id: &ChunkId,
        range: std::ops::Range<u64>,
    ) -> std::result::Result<Bytes, StorageError> {
        let mut read = self
            .fetch_chunk_ranges(id, std::slice::from_ref(&range))
            .await?;
        Ok(read.pop().unwrap_or_default())
    }

    /// Reads byte ranges of native chunk object `id`, one `Bytes` per range, nearby
    /// ranges with one request ([`crate::storage::Storage::get_ranges`]).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_chunk`], naming the first range past the end.
    pub async fn fetch_chunk_ranges(
        &self,
        id: &ChunkId,
        ranges: &[std::ops::Range<u64>],
    ) -> std::result::Result<Vec<Bytes>, StorageError> {
        let Some(cache) = &self.chunk_cache else {
            return self.storage.get_ranges(&keys::chunk(id), ranges).await;
        };
        // With a chunk cache (`caching.num_bytes_chunks`, as Icechunk's): ranges read
        // before come from it, the others are read (with one request when near) and
        // kept.
        let mut out: Vec<Option<Bytes>> = ranges
            .iter()
            .map(|r| cache.get(&(*id, r.start, r.end)))
            .collect();
        let missing: Vec<std::ops::Range<u64>> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, hit)| hit.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        if !missing.is_empty() {
            let mut read = self
                .storage
                .get_ranges(&keys::chunk(id), &missing)
                .await?
                .into_iter();
            for (r, slot) in ranges.iter().zip(out.iter_mut()) {
                if slot.is_none() {
                    let bytes = read.next().unwrap_or_default();
                    cache.insert((*id, r.start, r.end), bytes.clone());
                    *slot = Some(bytes);
                }
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// Native chunk objects read and written with plain blocking calls, where the
/// storage's objects are local files ([`AssetManager::local_chunks`]). Only on a
/// blocking or compute thread.
#[derive(Clone, Debug)]
pub struct LocalChunks {
    files: Arc<dyn crate::storage::LocalFiles>,
}

impl LocalChunks {
    /// Reads `dest.len()` bytes of chunk object `id` from byte `offset` into `dest`.
    ///
    /// # Errors
    /// [`StorageError::NotFound`], [`StorageError::ShortRead`] and I/O errors.
    pub fn read_into(&self, id: &ChunkId, offset: u64, dest: &mut [u8]) -> StorageResult<()> {
        self.files.get_range_into(&keys::chunk(id), offset, dest)
    }

    /// Reads `len` bytes of chunk object `id` from byte `offset` into a recycled
    /// buffer ([`crate::storage::LocalFiles::get_range_owned`]).
    ///
    /// # Errors
    /// [`StorageError::NotFound`], [`StorageError::ShortRead`] and I/O errors.
    pub fn read_owned(&self, id: &ChunkId, offset: u64, len: usize) -> StorageResult<Bytes> {
        self.files.get_range_owned(&keys::chunk(id), offset, len)
    }

    /// Writes the new chunk object `id` (as [`AssetManager::write_chunk`]).
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&self, id: &ChunkId, bytes: &[u8]) -> StorageResult<()> {
        self.files.put_fresh(&keys::chunk(id), bytes)
    }

    /// Whether a write is quick enough for a compute thread
    /// ([`crate::storage::LocalFiles::quick_writes`]).
    pub fn quick_writes(&self) -> bool {
        self.files.quick_writes()
    }
}
