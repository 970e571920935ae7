//! Chunk bytes into a session: inline in the manifest when small, appended to the
//! session's open pack when at most the packing threshold (`packs`), otherwise
//! written now as a new native chunk object; then recorded as the chunk's ref.

use bytes::Bytes;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::manifest::{ChunkPayload, NativeChunkRef};
use crate::format::snapshot::NodeSnapshot;
use crate::format::{ChunkId, NodePath};

use crate::session::Session;

impl Session {
    /// Stores the encoded bytes of a chunk: inline in the manifest when at most
    /// `inline_chunk_threshold_bytes` long, appended to the session's open pack
    /// when at most `chunk_packing.threshold_bytes` and packing is on (written at
    /// the latest by the commit; read from memory until then), otherwise as a new
    /// native chunk object written now.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::NodeNotFound`], [`Error::NotAnArray`],
    /// [`Error::InvalidChunkIndex`]; storage errors writing the chunk.
    pub async fn set_chunk(&self, path: &NodePath, index: &[u64], bytes: Bytes) -> Result<()> {
        self.load().await?;
        self.check_writable()?;
        let node = self.array_node(path, index)?;
        self.set_chunk_of(path, &node, index, bytes).await
    }

    /// Stores the encoded bytes of a chunk only when the chunk has no ref yet (Zarr's
    /// `set_if_not_exists`; Icechunk checks and writes under its session's lock):
    /// returns whether it stored them. The committed ref is checked before the bytes
    /// are written, and this session's own changes again under the lock that records
    /// the ref, so of concurrent calls for one chunk exactly one stores (a loser's
    /// chunk object, if it wrote one, is garbage).
    ///
    /// # Errors
    /// As [`Session::set_chunk`]; storage and format errors reading the chunk's
    /// manifest.
    pub async fn set_chunk_if_absent(
        &self,
        path: &NodePath,
        index: &[u64],
        bytes: Bytes,
    ) -> Result<bool> {
        self.load().await?;
        self.check_writable()?;
        let node = self.array_node(path, index)?;
        if self.chunk_ref_of(&node, index).await?.is_some() {
            return Ok(false);
        }
        let payload = self.payload_of(bytes).await?;
        self.record_chunk_checked(path, &node, index, Some(payload), true)
    }

    /// The first half of [`Session::set_chunk`]: checks the chunk index against the
    /// array and stores `bytes` (inline, in the open pack, or as a new native chunk
    /// object written now), returning the ref to record with
    /// [`Session::set_chunk_ref`] in this session (a ref into a pack names bytes
    /// this session writes by its commit, or [`Session::flush_packs`]). Nothing
    /// changes in the session; a native chunk object whose ref is never recorded is
    /// removed by garbage collection.
    ///
    /// # Errors
    /// As [`Session::set_chunk`].
    pub async fn prepare_chunk(
        &self,
        path: &NodePath,
        index: &[u64],
        bytes: Bytes,
    ) -> Result<ChunkPayload> {
        self.load().await?;
        self.check_writable()?;
        self.array_node(path, index)?;
        self.payload_of(bytes).await
    }

    /// [`Session::set_chunk`] for an array node already resolved (and `index`
    /// already checked against its shape), in a writable session.
    pub(in crate::session) async fn set_chunk_of(
        &self,
        path: &NodePath,
        node: &NodeSnapshot,
        index: &[u64],
        bytes: Bytes,
    ) -> Result<()> {
        let payload = self.payload_of(bytes).await?;
        self.record_chunk(path, node, index, Some(payload))
    }

    /// The ref of a chunk's bytes: inline when small, a place in this session's
    /// open pack when at most the packing threshold (`chunk_packing`, see
    /// `packs.rs`), else a native chunk object written now.
    async fn payload_of(&self, bytes: Bytes) -> Result<ChunkPayload> {
        Ok(if self.is_inline(&bytes) {
            ChunkPayload::Inline(bytes)
        } else if let Some(packed) = self.packed_payload(&bytes).await? {
            packed
        } else {
            let id = ChunkId::random();
            let length = bytes.len() as u64;
            self.inner.ctx.assets.write_chunk(&id, bytes).await?;
            native_payload(id, length)
        })
    }

    /// Whether `bytes` are kept inline in the manifest rather than written as a
    /// native chunk object (at most `inline_chunk_threshold_bytes` long).
    pub(in crate::session) fn is_inline(&self, bytes: &[u8]) -> bool {
        (bytes.len() as u64) <= self.inner.ctx.inline_threshold_bytes
    }
}

/// The ref of a native chunk object `id` written whole (`length` bytes).
pub(in crate::session) fn native_payload(id: ChunkId, length: u64) -> ChunkPayload {
    ChunkPayload::Native(NativeChunkRef {
        id,
        offset: 0,
        length,
    })
}
