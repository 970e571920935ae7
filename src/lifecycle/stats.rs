//! Chunk storage statistics (Icechunk's `Repository.chunk_storage_stats` and the
//! older `total_chunks_storage`): how many bytes the chunks reachable from the
//! repository's branches and tags take, by kind.
//!
//! Every snapshot in the ancestry of a branch or tag is walked (as garbage
//! collection walks them), every manifest they list is read once, and each chunk is
//! counted once however many refs point to it: a native chunk by its object and byte
//! range, a virtual chunk by its location and byte range, an inline chunk by the
//! manifest ref holding it.

use std::collections::HashSet;

use crate::assets::{AssetManager, ParentWalk};
use crate::error::Result;
use crate::format::manifest::ChunkPayload;
use crate::format::ManifestId;
use crate::storage::Storage;

/// Bytes of reachable chunks, by kind (Icechunk's `ChunkStorageStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChunkStorageStats {
    /// Bytes of chunk objects in the repository's `chunks/` (native chunks).
    pub native_bytes: u64,
    /// Bytes of the external objects' ranges virtual chunks point to.
    pub virtual_bytes: u64,
    /// Bytes of chunks stored inline in manifests.
    pub inlined_bytes: u64,
}

impl ChunkStorageStats {
    /// Native plus inline bytes: what the repository itself stores.
    pub fn non_virtual_bytes(&self) -> u64 {
        self.native_bytes.saturating_add(self.inlined_bytes)
    }

    /// Every kind together.
    pub fn total_bytes(&self) -> u64 {
        self.non_virtual_bytes().saturating_add(self.virtual_bytes)
    }
}

/// The chunk storage statistics of everything a branch or tag reaches.
///
/// # Errors
/// Storage and format errors reading refs, snapshots and manifests.
pub(crate) async fn chunk_storage_stats(
    assets: &AssetManager,
    storage: &dyn Storage,
) -> Result<ChunkStorageStats> {
    let (roots, _) = super::gc::roots(assets, storage).await?;
    let mut seen_snapshots = HashSet::new();
    let mut manifests: Vec<(ManifestId, u64)> = Vec::new();
    let mut seen_manifests = HashSet::new();
    for root in roots {
        if seen_snapshots.contains(&root) {
            continue;
        }
        let mut walk = ParentWalk::new(assets, root);
        while let Some(snap) = walk.next().await? {
            if !seen_snapshots.insert(snap.id) {
                break;
            }
            for info in &snap.manifest_files {
                if seen_manifests.insert(info.id) {
                    manifests.push((info.id, info.size_bytes));
                }
            }
        }
    }
    let mut stats = ChunkStorageStats::default();
    let mut native = HashSet::new();
    let mut virtual_ranges = HashSet::new();
    for (id, size) in manifests {
        let manifest = assets.fetch_manifest_uncached(&id, Some(size)).await?;
        for refs in manifest.arrays.values() {
            for payload in refs.values() {
                match payload {
                    ChunkPayload::Inline(bytes) => {
                        stats.inlined_bytes =
                            stats.inlined_bytes.saturating_add(bytes.len() as u64);
                    }
                    ChunkPayload::Native(r) => {
                        if native.insert((r.id, r.offset, r.length)) {
                            stats.native_bytes = stats.native_bytes.saturating_add(r.length);
                        }
                    }
                    ChunkPayload::Virtual(r) => {
                        if virtual_ranges.insert((r.location.clone(), r.offset, r.length)) {
                            stats.virtual_bytes = stats.virtual_bytes.saturating_add(r.length);
                        }
                    }
                }
            }
        }
    }
    Ok(stats)
}
