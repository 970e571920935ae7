//! Manifests read, cached and written by an [`AssetManager`].

#[allow(clippy::wildcard_imports)]
use super::*;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::manifest::Manifest;
use crate::format::snapshot::ManifestFileInfo;
use crate::format::{FormatError, ManifestId};

impl AssetManager {
    /// Fetches and decodes manifest `info.id`, reading bytes `[0, size_bytes)` when the
    /// size is known.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when missing); [`Error::Format`] when corrupt.
    pub async fn fetch_manifest(
        &self,
        id: &ManifestId,
        size_bytes: Option<u64>,
    ) -> Result<Arc<Manifest>> {
        if let Some(m) = self.manifests.get(id) {
            return Ok(m);
        }
        self.manifest_reads
            .run(*id, || async {
                if let Some(m) = self.manifests.get(id) {
                    return Ok(m);
                }
                let manifest = Arc::new(self.load_manifest(id, size_bytes).await?);
                self.warn_if_cache_small(CachedKind::Manifest, manifest.num_chunk_refs() as u64);
                self.manifests.insert(*id, Arc::clone(&manifest));
                Ok(manifest)
            })
            .await
    }

    /// Fetches and decodes manifest `id` without keeping it in the cache (for walks
    /// over every manifest, such as garbage collection, whose memory must stay
    /// bounded).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_manifest`].
    pub async fn fetch_manifest_uncached(
        &self,
        id: &ManifestId,
        size_bytes: Option<u64>,
    ) -> Result<Manifest> {
        if let Some(m) = self.manifests.get(id) {
            return Ok(Manifest::clone(&m));
        }
        self.load_manifest(id, size_bytes).await
    }

    /// Reads and decodes manifest `id` from storage, checking the id it holds.
    pub(super) async fn load_manifest(
        &self,
        id: &ManifestId,
        size_bytes: Option<u64>,
    ) -> Result<Manifest> {
        let key = keys::manifest(id);
        let bytes = match size_bytes {
            Some(size) if size > 0 => self.storage.get_range(&key, 0..size).await?,
            _ => self.storage.get(&key).await?.bytes,
        };
        let manifest = decode_object(bytes, Manifest::decode).await?;
        if manifest.id != *id {
            return Err(Error::Format(FormatError::InvalidData {
                what: "manifest",
                reason: format!("file manifests/{id} holds manifest {}", manifest.id),
            }));
        }
        Ok(manifest)
    }

    /// A manifest already in the cache, without fetching it.
    pub fn cached_manifest(&self, id: &ManifestId) -> Option<Arc<Manifest>> {
        self.manifests.get(id)
    }

    /// Writes an encoded manifest file (see `format::manifest::ManifestWriter`);
    /// returns its file info. The manifest is not cached: it is decoded when first
    /// read, so large manifests do not stay in memory after a commit.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_manifest_bytes(
        &self,
        id: ManifestId,
        bytes: Vec<u8>,
        num_chunk_refs: u64,
    ) -> Result<ManifestFileInfo> {
        let info = ManifestFileInfo {
            id,
            size_bytes: bytes.len() as u64,
            num_chunk_refs: u32::try_from(num_chunk_refs).unwrap_or(u32::MAX),
        };
        // Not cached now, but read back through the cache later.
        self.warn_if_cache_small(CachedKind::Manifest, num_chunk_refs);
        self.storage
            .put(&keys::manifest(&id), Bytes::from(bytes))
            .await?;
        Ok(info)
    }
}
