//! [`SessionContext`]: what a session uses of its repository, built by the
//! repository when it starts a session. Sessions hold this, not the repository, so
//! the session module depends on nothing above it.

use std::sync::Arc;

use crate::assets::AssetManager;
use crate::format::config::{ManifestPreloadCondition, RepositoryConfig};
use crate::format::snapshot::Snapshot;
use crate::refs::RefStore;
use crate::virtual_refs::VirtualChunkResolver;

use super::chunks::packs::PackSettings;
use super::manifest_split::ManifestLayouts;

/// The refs, object cache, configuration and virtual chunk resolver of the
/// repository a session belongs to, as they were when the session started.
#[derive(Debug)]
pub(crate) struct SessionContext {
    /// The repository's object fetcher and caches (shared with the repository).
    pub(crate) assets: Arc<AssetManager>,
    /// The repository's branches and tags, and the commit point.
    pub(crate) refs: RefStore,
    /// The configuration when the session started.
    pub(crate) config: RepositoryConfig,
    /// Reads virtual chunks under the prefixes the repository was opened with.
    pub(crate) virtual_resolver: Arc<VirtualChunkResolver>,
    /// Chunks of at most this many bytes are stored inline in manifests.
    pub(crate) inline_threshold_bytes: u64,
    /// How commits cut arrays' chunk refs into manifests (the configuration's
    /// `manifest.splitting`).
    pub(crate) manifest_layouts: ManifestLayouts,
    /// How sessions pack small chunks (`None`: they do not); from the
    /// configuration's `chunk_packing` and whether the storage's objects are local
    /// files.
    pub(crate) packing: Option<PackSettings>,
}

impl SessionContext {
    /// A context over these parts.
    pub(crate) fn new(
        assets: Arc<AssetManager>,
        refs: RefStore,
        config: RepositoryConfig,
        virtual_resolver: Arc<VirtualChunkResolver>,
    ) -> Self {
        let inline_threshold_bytes = config.inline_chunk_threshold_bytes();
        let manifest_layouts = ManifestLayouts::new(&config);
        let packing = PackSettings::of(
            &config.chunk_packing(),
            inline_threshold_bytes,
            assets.local_chunks().is_some(),
        );
        SessionContext {
            packing,
            manifest_layouts,
            refs,
            assets,
            config,
            virtual_resolver,
            inline_threshold_bytes,
        }
    }

    /// Starts fetching, in the background, the manifests of `snap` that the
    /// configuration's `manifest.preload` selects (Icechunk's preloading when a
    /// session opens): arrays in path order, at most `max_arrays_to_scan` of them,
    /// each manifest whose chunk refs fit in what is left of `max_total_refs` and
    /// that `preload_if` accepts. Failures are only logged: a preload is a hint.
    pub(crate) fn preload_manifests(&self, snap: &Arc<Snapshot>) {
        let preload = self.config.manifest().preload();
        let condition = preload.preload_if();
        let budget = preload.max_total_refs();
        if budget == 0 || condition == ManifestPreloadCondition::False {
            return;
        }
        let max_arrays = usize::try_from(preload.max_arrays_to_scan()).unwrap_or(usize::MAX);
        let mut picked: Vec<(crate::format::ManifestId, u64)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut refs: u32 = 0;
        for (path, array) in snap
            .nodes
            .iter()
            .filter_map(|(p, n)| Some((p, n.array()?)))
            .take(max_arrays)
        {
            for m in &array.manifests {
                let Some(info) = snap.manifest_info(&m.object_id) else {
                    continue;
                };
                if seen.contains(&m.object_id) {
                    continue;
                }
                let total = refs.saturating_add(info.num_chunk_refs);
                if total <= budget && condition.matches(path, info.num_chunk_refs) {
                    seen.insert(m.object_id);
                    refs = total;
                    picked.push((m.object_id, info.size_bytes));
                }
            }
        }
        // Outside a runtime (a synchronous `Session::load_now`) there is nowhere to
        // preload on: manifests are then read when first needed.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if picked.is_empty() {
            return;
        }
        let assets = Arc::clone(&self.assets);
        runtime.spawn(async move {
            let fetches = picked.iter().map(|(id, size)| {
                let assets = &assets;
                async move {
                    if let Err(e) = assets.fetch_manifest(id, Some(*size)).await {
                        tracing::debug!(manifest = %id, error = %e, "preloading a manifest failed");
                    }
                }
            });
            futures::future::join_all(fetches).await;
        });
    }
}
