//! [`SessionContext`]: what a session uses of its repository, built by the
//! repository when it starts a session. Sessions hold this, not the repository, so
//! the session module depends on nothing above it.

use std::sync::Arc;

use crate::assets::AssetManager;
use crate::format::config::RepositoryConfig;
use crate::refs::RefStore;
use crate::virtual_refs::VirtualChunkResolver;

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
}

impl SessionContext {
    /// A context over these parts.
    pub(crate) fn new(
        assets: Arc<AssetManager>,
        config: RepositoryConfig,
        virtual_resolver: Arc<VirtualChunkResolver>,
    ) -> Self {
        let inline_threshold_bytes = config.inline_chunk_threshold_bytes();
        let manifest_layouts = ManifestLayouts::new(&config);
        SessionContext {
            manifest_layouts,
            refs: RefStore::new(Arc::clone(&assets)),
            assets,
            config,
            virtual_resolver,
            inline_threshold_bytes,
        }
    }
}
