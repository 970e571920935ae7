//! The caches of an [`AssetManager`]: weights, sizes, single-flight reads.

#[allow(clippy::wildcard_imports)]
use super::*;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use quick_cache::sync::Cache;

use crate::error::Result;
use crate::format::manifest::Manifest;
use crate::format::snapshot::{ManifestFileInfo, Snapshot, SnapshotHeader};
use crate::format::transaction_log::TransactionLog;
use crate::format::{ChunkId, SnapshotId};

/// Single flight: concurrent requests for one object share one read. The first caller
/// for a key runs the read; callers arriving while it is in flight wait for its
/// result instead of sending their own request (32 chunk reads of one array fetch its
/// manifest once). The value is not kept once the read ends (the caches do that).
/// When the read fails, each waiting caller tries in turn (errors are not shared).
#[derive(Debug)]
pub(super) struct SingleFlight<K, V> {
    inflight: std::sync::Mutex<HashMap<K, Arc<tokio::sync::OnceCell<V>>>>,
}

impl<K, V> Default for SingleFlight<K, V> {
    fn default() -> Self {
        SingleFlight {
            inflight: std::sync::Mutex::new(HashMap::new()),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> SingleFlight<K, V> {
    /// The result of `read` for `key`, run once for all concurrent callers.
    ///
    /// # Errors
    /// What `read` returns (each caller whose shared read failed runs its own).
    pub(super) async fn run<F, Fut>(&self, key: K, read: F) -> Result<V>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<V>>,
    {
        let cell = {
            let mut map = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(map.entry(key.clone()).or_default())
        };
        let out = cell.get_or_try_init(read).await.cloned();
        let mut map = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            map.remove(&key);
        }
        out
    }
}

/// The weight of a cached [`SnapshotHeader`]: about its size in bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct HeaderWeight;

impl quick_cache::Weighter<SnapshotId, Arc<SnapshotHeader>> for HeaderWeight {
    fn weight(&self, _: &SnapshotId, h: &Arc<SnapshotHeader>) -> u64 {
        u64::try_from(header_bytes(h)).unwrap_or(u64::MAX)
    }
}

/// About the bytes a [`SnapshotHeader`] holds in memory.
pub(super) fn header_bytes(h: &SnapshotHeader) -> usize {
    let files = h.manifest_files.len() * std::mem::size_of::<ManifestFileInfo>();
    // Metadata: its names and a guess for each value.
    let metadata: usize = h.metadata.keys().map(|k| k.len() + 64).sum();
    256 + h.message.len() + files + metadata
}

/// The cache sizes of an [`AssetManager`] (the repository configuration's `caching`,
/// Icechunk's `CachingConfig`): `None` keeps floe's default, a count of objects
/// (512 snapshots, 256 manifests, 512 transaction logs); `Some(n)` bounds the cache
/// by content instead, as Icechunk does: snapshot nodes, manifest chunk refs,
/// transaction-log changes (0 caches none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheSizes {
    /// Nodes of the cached snapshots.
    pub snapshot_nodes: Option<u64>,
    /// Chunk refs of the cached manifests.
    pub chunk_refs: Option<u64>,
    /// Changes of the cached transaction logs.
    pub transaction_changes: Option<u64>,
    /// Bytes of native chunk data kept from reads through the storage (Icechunk's
    /// `num_bytes_chunks`; 0, its default, keeps none).
    pub chunk_bytes: u64,
}

/// Weighs cached chunk bytes by their length.
#[derive(Clone, Copy, Debug)]
pub(super) struct ByteWeight;

impl quick_cache::Weighter<(ChunkId, u64, u64), Bytes> for ByteWeight {
    fn weight(&self, _: &(ChunkId, u64, u64), v: &Bytes) -> u64 {
        (v.len() as u64).max(1)
    }
}

/// The kinds of cached object [`AssetManager::warn_if_cache_small`] checks.
#[derive(Clone, Copy, Debug)]
pub(super) enum CachedKind {
    Manifest,
    Snapshot,
}

/// The weight of a cached object: 1 (a count of objects) or, with `by_size`, its
/// size in the unit of [`CacheSizes`] (at least 1).
#[derive(Clone, Copy, Debug)]
pub(super) struct SizeWeight {
    by_size: bool,
}

/// The size of a cached object in the unit [`CacheSizes`] bounds it by.
pub(super) trait CacheSize {
    fn cache_size(&self) -> usize;
}

impl CacheSize for Snapshot {
    fn cache_size(&self) -> usize {
        self.nodes.len()
    }
}

impl CacheSize for Manifest {
    fn cache_size(&self) -> usize {
        self.num_chunk_refs()
    }
}

impl CacheSize for TransactionLog {
    fn cache_size(&self) -> usize {
        self.len()
    }
}

impl<K, V: CacheSize> quick_cache::Weighter<K, Arc<V>> for SizeWeight {
    fn weight(&self, _: &K, v: &Arc<V>) -> u64 {
        if self.by_size {
            u64::try_from(v.cache_size()).unwrap_or(u64::MAX).max(1)
        } else {
            1
        }
    }
}

/// A cache of `default` objects, or of `size` units of content when set.
pub(super) fn sized_cache<K: Eq + std::hash::Hash, V: CacheSize>(
    default: usize,
    size: Option<u64>,
) -> Cache<K, Arc<V>, SizeWeight> {
    match size {
        None => Cache::with_weighter(default, default as u64, SizeWeight { by_size: false }),
        Some(units) => Cache::with_weighter(
            usize::try_from(units.min(4096)).unwrap_or(4096).max(1),
            units,
            SizeWeight { by_size: true },
        ),
    }
}

/// How many bytes of [`SnapshotHeader`]s an [`AssetManager`] keeps (16 MiB: tens of
/// thousands of commits of a long history).
pub(super) const HEADER_CACHE_BYTES: u64 = 16 << 20;

impl AssetManager {
    /// Logs a warning (`tracing`, level WARN), at most once per manager and kind,
    /// when an object of `weight` units (a manifest's chunk refs or a snapshot's
    /// nodes) goes into or comes from storage while the configured `caching` bounds
    /// its cache so tightly that the cache can barely hold it: more than half the
    /// chunk-ref capacity for a manifest, more than a fifth of the node capacity for
    /// a snapshot (Icechunk 2.3.0's thresholds and wording, so its users recognise
    /// the advice). Caches sized by object count (no `caching` set) never warn.
    pub(super) fn warn_if_cache_small(&self, kind: CachedKind, weight: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let (capacity, divisor, warned) = match kind {
            CachedKind::Manifest => (self.sizes.chunk_refs, 2, &self.manifest_cache_warned),
            CachedKind::Snapshot => (self.sizes.snapshot_nodes, 5, &self.snapshot_cache_warned),
        };
        let Some(capacity) = capacity else { return };
        if weight <= capacity / divisor || warned.swap(true, Relaxed) {
            return;
        }
        match kind {
            CachedKind::Manifest => tracing::warn!(
                "A manifest with {weight} chunk references is being loaded into the cache \
                 that can only keep {capacity} references. Consider increasing the size of \
                 the manifest cache using the num_chunk_refs field in CachingConfig"
            ),
            CachedKind::Snapshot => tracing::warn!(
                "A snapshot with {weight} nodes is being loaded into the cache that can \
                 only keep {capacity} nodes. Consider increasing the size of the snapshot \
                 cache using the num_snapshot_nodes field in CachingConfig"
            ),
        }
    }
}
