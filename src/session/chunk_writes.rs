//! Chunk bytes into a session: inline in the manifest when small, otherwise written
//! now as a new native chunk object, then recorded as the chunk's ref.

use bytes::Bytes;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::manifest::{ChunkPayload, NativeChunkRef};
use crate::format::snapshot::NodeSnapshot;
use crate::format::{ChunkId, NodePath};

use super::Session;

impl Session {
    /// Stores the encoded bytes of a chunk: inline in the manifest when at most
    /// `inline_chunk_threshold_bytes` long, otherwise as a new native chunk object
    /// written now.
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

    /// [`Session::set_chunk`] for an array node already resolved (and `index`
    /// already checked against its shape), in a writable session.
    pub(super) async fn set_chunk_of(
        &self,
        path: &NodePath,
        node: &NodeSnapshot,
        index: &[u64],
        bytes: Bytes,
    ) -> Result<()> {
        let payload = if self.is_inline(&bytes) {
            ChunkPayload::Inline(bytes)
        } else {
            let id = ChunkId::random();
            let length = bytes.len() as u64;
            self.inner.ctx.assets.write_chunk(&id, bytes).await?;
            native_payload(id, length)
        };
        self.record_chunk(path, node, index, Some(payload))
    }

    /// Whether `bytes` are kept inline in the manifest rather than written as a
    /// native chunk object (at most `inline_chunk_threshold_bytes` long).
    pub(super) fn is_inline(&self, bytes: &[u8]) -> bool {
        (bytes.len() as u64) <= self.inner.ctx.inline_threshold_bytes
    }
}

/// The ref of a native chunk object `id` written whole (`length` bytes).
pub(super) fn native_payload(id: ChunkId, length: u64) -> ChunkPayload {
    ChunkPayload::Native(NativeChunkRef {
        id,
        offset: 0,
        length,
    })
}
