//! [`SessionChunks`]: a session's chunk port for one array (the Zarr layer's
//! [`ChunkPort`]), opened by [`SessionStore`](crate::session::SessionStore) through
//! [`Store::chunk_port`](crate::zarr::store::Store::chunk_port).
//!
//! The array's node (id, shape, manifest refs) is resolved once, when the port is
//! opened; chunks are addressed by index, no key is built or parsed on the way.
//! [`ChunkPort::prepare`] fetches every manifest holding chunks of a region, so that
//! the transfer step ([`ChunkPort::read_into`], [`ChunkPort::write_now`]) finds each
//! chunk's ref without I/O and moves native chunks as local files where the storage
//! has them ([`crate::storage::Storage::local_files`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::assets::LocalChunks;
use crate::error::Error;
use crate::format::manifest::{ChunkPayload, Manifest};
use crate::format::snapshot::NodeSnapshot;
use crate::format::{ChunkId, ManifestId, NodePath};
use crate::zarr::store::{
    ByteRange, ChunkKeys, ChunkPort, ReadInto, ReadNow, StoreError, WriteNow,
};
use crate::zarr::subset::ArraySubset;

use crate::session::{index_in_bounds, native_payload, payload_len, Session};

/// Manifests fetched at once by [`ChunkPort::prepare`].
const PREPARE_CONCURRENCY: usize = 16;

/// The chunk port of one array of a session (see the module documentation).
#[derive(Debug)]
pub struct SessionChunks {
    session: Session,
    path: NodePath,
    /// The array node when the port was opened; `None` when there is no array at
    /// `path` (its chunks read as missing, writes fail).
    node: Option<NodeSnapshot>,
    /// How the array names its chunks as store keys, for error messages.
    keys: ChunkKeys,
    /// Native chunk objects as local files, if the storage has them.
    local: Option<LocalChunks>,
    /// Manifests fetched by [`ChunkPort::prepare`].
    manifests: Mutex<HashMap<ManifestId, Arc<Manifest>>>,
}

impl SessionChunks {
    /// The port of the array at `path` of `session` (nothing is read).
    pub(in crate::session) fn open(session: Session, path: NodePath, keys: ChunkKeys) -> Self {
        let node = session.get_node(&path).ok().filter(|n| n.array().is_some());
        let local = session.inner.ctx.assets.local_chunks();
        SessionChunks {
            session,
            path,
            node,
            keys,
            local,
            manifests: Mutex::default(),
        }
    }

    fn backend(&self, chunk: &[u64], e: Error) -> StoreError {
        StoreError::Repository {
            key: self.keys.key(chunk),
            source: Box::new(e),
        }
    }

    /// The array node when `chunk` is within its grid.
    fn node_for(&self, chunk: &[u64]) -> Option<&NodeSnapshot> {
        self.node
            .as_ref()
            .filter(|n| n.array().is_some_and(|a| index_in_bounds(&a.shape, chunk)))
    }

    /// The node for a write of `chunk`: the session must be writable and the chunk
    /// within an existing array's grid.
    fn node_to_write(&self, chunk: &[u64]) -> Result<&NodeSnapshot, StoreError> {
        if !self.session.is_writable() {
            return Err(StoreError::ReadOnly {
                key: self.keys.key(chunk),
            });
        }
        let Some(node) = self.node.as_ref() else {
            return Err(StoreError::InvalidKey {
                key: self.keys.key(chunk),
                reason: "not a zarr.json key or a chunk key of an existing array".into(),
            });
        };
        match self.node_for(chunk) {
            Some(n) => Ok(n),
            None => Err(self.backend(
                chunk,
                Error::InvalidChunkIndex {
                    path: node.path.clone(),
                    index: chunk.to_vec(),
                },
            )),
        }
    }

    /// The chunk's ref when it is known without I/O: `Some(None)` for a chunk never
    /// written, `None` when its manifest is neither prepared nor cached.
    fn known_ref(&self, node: &NodeSnapshot, chunk: &[u64]) -> Option<Option<ChunkPayload>> {
        let mref = {
            let state = self.session.read();
            if let Some(change) = state.changes.chunk(&node.id, chunk) {
                return Some(change.map(|p| p.to_payload()));
            }
            if state.changes.is_new(&node.id) {
                return Some(None);
            }
            match node
                .array()
                .and_then(|a| a.manifests.iter().find(|m| m.contains(chunk)))
            {
                None => return Some(None),
                Some(m) => m.object_id,
            }
        };
        let prepared = self
            .manifests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&mref)
            .cloned();
        let manifest = prepared.or_else(|| self.session.inner.ctx.assets.cached_manifest(&mref))?;
        manifest.check_rank(&node.id, chunk.len()).ok()?;
        Some(manifest.get(&node.id, chunk).cloned())
    }
}

#[async_trait]
impl ChunkPort for SessionChunks {
    fn key(&self, chunk: &[u64]) -> String {
        self.keys.key(chunk)
    }

    async fn prepare(&self, chunks: &ArraySubset) -> Result<(), StoreError> {
        let Some(node) = self.node.as_ref() else {
            return Ok(());
        };
        let (Some(array), Ok(base)) = (node.array(), self.session.snapshot()) else {
            return Ok(());
        };
        if self.session.read().changes.is_new(&node.id) {
            return Ok(());
        }
        let touched: Vec<(ManifestId, Option<u64>)> = array
            .manifests
            .iter()
            .filter(|mref| {
                mref.extents.len() == chunks.ndim()
                    && mref
                        .extents
                        .iter()
                        .zip(chunks.start.iter().zip(&chunks.shape))
                        .all(|(r, (&s, &n))| {
                            u64::from(r.start) < s.saturating_add(n) && s < u64::from(r.end)
                        })
            })
            .map(|mref| {
                let size = base.manifest_info(&mref.object_id).map(|i| i.size_bytes);
                (mref.object_id, size)
            })
            .collect();
        // Every manifest of the region at once: one round trip, not one per manifest.
        let assets = &self.session.inner.ctx.assets;
        let fetched: Vec<(ManifestId, Arc<Manifest>)> = futures::stream::iter(touched)
            .map(|(id, size)| async move {
                let m = assets.fetch_manifest(&id, size).await?;
                Ok::<_, Error>((id, m))
            })
            .buffer_unordered(PREPARE_CONCURRENCY)
            .try_collect()
            .await
            .map_err(|e| self.backend(&chunks.start, e))?;
        self.manifests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(fetched);
        Ok(())
    }

    async fn get(&self, chunk: &[u64]) -> Result<Option<Bytes>, StoreError> {
        let Some(node) = self.node_for(chunk) else {
            return Ok(None);
        };
        let read = async {
            let Some(payload) = self.session.chunk_ref_of(node, chunk).await? else {
                return Ok(None);
            };
            let whole = 0..payload_len(&payload);
            let mut parts = self
                .session
                .read_payload(&self.path, chunk, &payload, std::slice::from_ref(&whole))
                .await?;
            Ok(Some(parts.pop().unwrap_or_default()))
        };
        read.await.map_err(|e| self.backend(chunk, e))
    }

    async fn get_ranges(
        &self,
        chunk: &[u64],
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let Some(node) = self.node_for(chunk) else {
            return Ok(None);
        };
        let payload = match self.session.chunk_ref_of(node, chunk).await {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.backend(chunk, e)),
        };
        let size = payload_len(&payload);
        let key = self.keys.key(chunk);
        let ranges = ranges
            .iter()
            .map(|r| r.to_range(&key, size))
            .collect::<Result<Vec<_>, _>>()?;
        // One call: nearby ranges (a shard's inner chunks) share a request.
        self.session
            .read_payload(&self.path, chunk, &payload, &ranges)
            .await
            .map(Some)
            .map_err(|e| self.backend(chunk, e))
    }

    /// Through [`Session::get_chunks`]: virtual chunks of one file (and chunks
    /// sharing a native chunk object) at nearby offsets are read with one request.
    fn get_many<'a>(
        &'a self,
        chunks: Vec<Vec<u64>>,
        concurrency: usize,
    ) -> BoxStream<'a, (usize, Result<Option<Bytes>, StoreError>)> {
        let mut ready = Vec::new();
        let mut wanted = Vec::new();
        let mut positions = Vec::new();
        for (i, chunk) in chunks.into_iter().enumerate() {
            if self.node_for(&chunk).is_some() {
                wanted.push((self.path.clone(), chunk));
                positions.push(i);
            } else {
                ready.push((i, Ok(None)));
            }
        }
        let keys: Vec<Vec<u64>> = wanted.iter().map(|(_, c)| c.clone()).collect();
        let read = self
            .session
            .get_chunks(wanted, concurrency)
            .map(move |(j, r)| {
                let i = positions.get(j).copied().unwrap_or(j);
                let r = match r {
                    Ok(b) => Ok(b),
                    Err(Error::InvalidChunkIndex { .. }) => Ok(None),
                    Err(e) => Err(self.backend(keys.get(j).map_or(&[][..], Vec::as_slice), e)),
                };
                (i, r)
            });
        futures::stream::iter(ready).chain(read).boxed()
    }

    async fn set(&self, chunk: &[u64], bytes: Bytes) -> Result<(), StoreError> {
        let node = self.node_to_write(chunk)?;
        self.session
            .set_chunk_of(&self.path, node, chunk, bytes)
            .await
            .map_err(|e| self.backend(chunk, e))
    }

    async fn erase(&self, chunk: &[u64]) -> Result<(), StoreError> {
        if !self.session.is_writable() {
            return Err(StoreError::ReadOnly {
                key: self.keys.key(chunk),
            });
        }
        let Some(node) = self.node_for(chunk) else {
            return Ok(());
        };
        match self.session.record_chunk(&self.path, node, chunk, None) {
            Ok(()) | Err(Error::NodeNotFound { .. }) => Ok(()),
            Err(e) => Err(self.backend(chunk, e)),
        }
    }

    /// Inline chunks, chunks in a pack not written yet, and native chunks on local
    /// files whose ref is known without I/O (uncommitted, or in a manifest prepared
    /// or cached) and exactly `dest.len()` bytes long; [`ReadInto::Elsewhere`] for
    /// the others.
    fn read_into(&self, chunk: &[u64], dest: &mut [u8]) -> Result<ReadInto, StoreError> {
        let Some(node) = self.node_for(chunk) else {
            return Ok(ReadInto::Missing);
        };
        let Some(known) = self.known_ref(node, chunk) else {
            return Ok(ReadInto::Elsewhere);
        };
        match known {
            None => Ok(ReadInto::Missing),
            Some(ChunkPayload::Inline(bytes)) if bytes.len() == dest.len() => {
                dest.copy_from_slice(&bytes);
                Ok(ReadInto::Read)
            }
            Some(ChunkPayload::Native(r)) if r.length == dest.len() as u64 => {
                if self.session.packs().read_into(&r.id, r.offset, dest) {
                    return Ok(ReadInto::Read);
                }
                let Some(local) = &self.local else {
                    return Ok(ReadInto::Elsewhere);
                };
                local.read_into(&r.id, r.offset, dest).map_err(|e| {
                    let e = crate::session::chunks::reads::native_read_error(&self.path, chunk, e);
                    self.backend(chunk, e)
                })?;
                Ok(ReadInto::Read)
            }
            Some(_) => Ok(ReadInto::Elsewhere),
        }
    }

    /// Inline chunks, chunks in a pack not written yet, and native chunks on local
    /// files (into a recycled buffer); [`ReadNow::Elsewhere`] for the others, for
    /// refs not prepared and for refs of more than `max_len` bytes.
    fn read_now(&self, chunk: &[u64], max_len: usize) -> Result<ReadNow, StoreError> {
        let Some(node) = self.node_for(chunk) else {
            return Ok(ReadNow::Missing);
        };
        let Some(known) = self.known_ref(node, chunk) else {
            return Ok(ReadNow::Elsewhere);
        };
        match known {
            None => Ok(ReadNow::Missing),
            Some(ChunkPayload::Inline(bytes)) if bytes.len() <= max_len => Ok(ReadNow::Read(bytes)),
            Some(ChunkPayload::Native(r)) => {
                let in_pack = usize::try_from(r.length)
                    .ok()
                    .filter(|&n| n <= max_len)
                    .and(r.offset.checked_add(r.length))
                    .and_then(|end| {
                        self.session
                            .packs()
                            .read(&r.id, std::slice::from_ref(&(r.offset..end)))
                    });
                if let Some(read) = in_pack.and_then(|mut parts| parts.pop()) {
                    return Ok(ReadNow::Read(read));
                }
                let (Some(local), Some(len)) = (
                    &self.local,
                    usize::try_from(r.length).ok().filter(|&n| n <= max_len),
                ) else {
                    return Ok(ReadNow::Elsewhere);
                };
                let read = local.read_owned(&r.id, r.offset, len).map_err(|e| {
                    let e = crate::session::chunks::reads::native_read_error(&self.path, chunk, e);
                    self.backend(chunk, e)
                })?;
                Ok(ReadNow::Read(read))
            }
            Some(_) => Ok(ReadNow::Elsewhere),
        }
    }

    /// Inline chunks (recorded, nothing written) and native chunks on local files
    /// with quick writes ([`ChunkPort::write_now_borrowed`]); [`WriteNow::Elsewhere`]
    /// for the others.
    fn write_now(&self, chunk: &[u64], bytes: Bytes) -> Result<WriteNow, StoreError> {
        if !self.session.is_inline(&bytes) {
            return Ok(if self.write_now_borrowed(chunk, &bytes)? {
                WriteNow::Written
            } else {
                WriteNow::Elsewhere(bytes)
            });
        }
        let node = self.node_to_write(chunk)?;
        self.session
            .record_chunk(&self.path, node, chunk, Some(ChunkPayload::Inline(bytes)))
            .map_err(|e| self.backend(chunk, e))?;
        Ok(WriteNow::Written)
    }

    /// Native chunks on local files with quick writes, written from the borrowed
    /// bytes (or appended to the session's open pack, when packed); `false` for
    /// inline chunks (their ref holds the bytes) and on other storage. The array is
    /// checked writable first, as every write here is.
    fn write_now_borrowed(&self, chunk: &[u64], bytes: &[u8]) -> Result<bool, StoreError> {
        let node = self.node_to_write(chunk)?;
        if self.session.is_inline(bytes) {
            return Ok(false);
        }
        let Some(local) = self.local.as_ref().filter(|l| l.quick_writes()) else {
            return Ok(false);
        };
        let packs = self.session.packs();
        if packs.takes(bytes.len()) {
            // Into the open pack; a pack this chunk filled is written now.
            let appended = packs.append(bytes);
            if let Some(full) = appended.full {
                packs
                    .write_local(local, &full)
                    .map_err(|e| self.backend(chunk, e.into()))?;
            }
            self.session
                .record_chunk(&self.path, node, chunk, Some(appended.payload))
                .map_err(|e| self.backend(chunk, e))?;
            return Ok(true);
        }
        let id = ChunkId::random();
        local
            .write(&id, bytes)
            .map_err(|e| self.backend(chunk, e.into()))?;
        self.session
            .record_chunk(
                &self.path,
                node,
                chunk,
                Some(native_payload(id, bytes.len() as u64)),
            )
            .map_err(|e| self.backend(chunk, e))?;
        Ok(true)
    }
}
