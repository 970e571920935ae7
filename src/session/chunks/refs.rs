//! Chunk refs of an array: looking one up (uncommitted change, else the manifest
//! that holds it), setting and deleting refs (one, or many under one lock), and
//! listing them.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::manifest::{ChunkPayload, ChunkPayloadRef};
use crate::format::snapshot::NodeSnapshot;
use crate::format::{ChunkIndices, NodePath};

use crate::session::overlay::{self, index_in_bounds};
use crate::session::Session;

impl Session {
    pub(in crate::session) fn array_node(
        &self,
        path: &NodePath,
        index: &[u64],
    ) -> Result<NodeSnapshot> {
        let node = self.get_node(path)?;
        let Some(a) = node.array() else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        if !index_in_bounds(&a.shape, index) {
            return Err(Error::InvalidChunkIndex {
                path: path.clone(),
                index: index.to_vec(),
            });
        }
        Ok(node)
    }

    /// The chunk ref of the array at `path` at chunk `index`; `None` when the chunk
    /// was never written (it reads as the fill value).
    ///
    /// # Errors
    /// [`Error::NodeNotFound`], [`Error::NotAnArray`], [`Error::InvalidChunkIndex`];
    /// storage and format errors reading manifests.
    pub async fn get_chunk_ref(
        &self,
        path: &NodePath,
        index: &[u64],
    ) -> Result<Option<ChunkPayload>> {
        self.load().await?;
        let node = self.array_node(path, index)?;
        self.chunk_ref_of(&node, index).await
    }

    /// [`Session::get_chunk_ref`] for an array node already resolved (and `index`
    /// already checked against its shape).
    pub(in crate::session) async fn chunk_ref_of(
        &self,
        node: &NodeSnapshot,
        index: &[u64],
    ) -> Result<Option<ChunkPayload>> {
        let base = {
            let state = self.read();
            if let Some(change) = state.changes.chunk(&node.id, index) {
                return Ok(change.map(|p| p.to_payload()));
            }
            if state.changes.is_new(&node.id) {
                return Ok(None);
            }
            Arc::clone(&state.base)
        };
        let Some(mref) = node
            .array()
            .and_then(|a| a.manifests.iter().find(|m| m.contains(index)))
        else {
            return Ok(None);
        };
        let size = base.manifest_info(&mref.object_id).map(|i| i.size_bytes);
        let manifest = self
            .inner
            .ctx
            .assets
            .fetch_manifest(&mref.object_id, size)
            .await?;
        manifest.check_rank(&node.id, index.len())?;
        Ok(manifest.get(&node.id, index).cloned())
    }

    /// Sets a chunk ref directly (e.g. a virtual ref), or deletes the chunk with `None`.
    ///
    /// # Errors
    /// As [`Session::set_chunk`].
    pub fn set_chunk_ref(
        &self,
        path: &NodePath,
        index: &[u64],
        payload: Option<ChunkPayload>,
    ) -> Result<()> {
        self.check_writable()?;
        let node = self.array_node(path, index)?;
        self.record_chunk(path, &node, index, payload)
    }

    /// Sets (or with `None`, deletes) many chunk refs of the array at `path` under one
    /// lock: the fast path for importers writing millions of refs.
    ///
    /// # Errors
    /// As [`Session::set_chunk_ref`]; on an out-of-grid index nothing is recorded.
    pub fn set_chunk_refs(
        &self,
        path: &NodePath,
        refs: impl IntoIterator<Item = (ChunkIndices, Option<ChunkPayload>)>,
    ) -> Result<()> {
        self.check_writable()?;
        let mut state = self.write();
        let node = Self::node_in(&state, path)
            .ok_or_else(|| Error::NodeNotFound { path: path.clone() })?;
        let Some(shape) = node.array().map(|a| a.shape.clone()) else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        let refs: Vec<_> = refs.into_iter().collect();
        if let Some((bad, _)) = refs.iter().find(|(idx, _)| !index_in_bounds(&shape, idx)) {
            return Err(Error::InvalidChunkIndex {
                path: path.clone(),
                index: bad.clone(),
            });
        }
        state.change(move |c| {
            for (idx, payload) in refs {
                c.set_chunk(node.id, idx, payload);
            }
        });
        Ok(())
    }

    pub(in crate::session) fn record_chunk(
        &self,
        path: &NodePath,
        node: &NodeSnapshot,
        index: &[u64],
        payload: Option<ChunkPayload>,
    ) -> Result<()> {
        self.record_chunk_checked(path, node, index, payload, false)
            .map(|_| ())
    }

    /// [`Session::record_chunk`]; with `if_absent`, only when the change set holds
    /// no ref for the chunk (checked under the same lock): returns whether it
    /// recorded.
    pub(in crate::session) fn record_chunk_checked(
        &self,
        path: &NodePath,
        node: &NodeSnapshot,
        index: &[u64],
        payload: Option<ChunkPayload>,
        if_absent: bool,
    ) -> Result<bool> {
        let mut state = self.write();
        // The node may have been deleted or replaced while the chunk was written.
        match Self::node_in(&state, path) {
            Some(n) if n.id == node.id => {}
            _ => return Err(Error::NodeNotFound { path: path.clone() }),
        }
        if if_absent && matches!(state.changes.chunk(&node.id, index), Some(Some(_))) {
            return Ok(false);
        }
        let (id, index) = (node.id, index.to_vec());
        state.change(move |c| c.set_chunk(id, index, payload));
        Ok(true)
    }

    /// Indices of every chunk of the array at `path` that has a ref, sorted.
    ///
    /// # Errors
    /// [`Error::NodeNotFound`], [`Error::NotAnArray`]; storage and format errors.
    pub async fn list_chunks(&self, path: &NodePath) -> Result<Vec<ChunkIndices>> {
        self.collect_refs(path, |idx, _| idx.to_vec()).await
    }

    /// Every chunk ref of the array at `path`, sorted by index.
    ///
    /// # Errors
    /// As [`Session::list_chunks`].
    pub async fn chunk_refs(&self, path: &NodePath) -> Result<Vec<(ChunkIndices, ChunkPayload)>> {
        self.collect_refs(path, |idx, p| (idx.to_vec(), p.to_payload()))
            .await
    }

    async fn collect_refs<T>(
        &self,
        path: &NodePath,
        f: impl Fn(&[u64], ChunkPayloadRef<'_>) -> T,
    ) -> Result<Vec<T>> {
        self.load().await?;
        let node = self.get_node(path)?;
        let Some(a) = node.array() else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        let (base, changes) = {
            let state = self.read();
            (Arc::clone(&state.base), Arc::clone(&state.changes))
        };
        let manifests = overlay::committed_manifests(&self.inner.ctx.assets, &base, &node).await?;
        Ok(overlay::merged_refs(&manifests, &changes, &node.id)
            .filter(|(idx, _)| index_in_bounds(&a.shape, idx))
            .map(|(idx, p)| f(idx, p))
            .collect())
    }
}
