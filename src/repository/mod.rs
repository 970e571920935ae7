//! [`Repository`]: create and open repositories, read and update their configuration,
//! manage branches and tags, walk ancestry, resolve branch / tag / snapshot id / time
//! to a snapshot, and start sessions.
//!
//! Spec: Icechunk specification, "Initialize New Repository", "Reference Files",
//! "Read from Repository", "Create New Tag".
//!
//! This file holds the type, its shared state and the spec checks; the rest is one
//! file per job: `open.rs` (create, open), `config.rs` (configuration),
//! `branches_tags.rs`, `repo_info.rs` (spec 2: metadata, status, feature flags, ops
//! log), `versions.rs` (version selection and resolution), `ancestry.rs`,
//! `maintenance.rs` (expiry, garbage collection, statistics), `compact.rs` (small
//! chunks rewritten into packs), `objects.rs` (format
//! objects by id), `sessions.rs` (starting sessions), `diff.rs`.

mod ancestry;
mod branches_tags;
mod compact;
mod config;
mod diff;
mod maintenance;
mod objects;
mod open;
mod repo_info;
mod retention;
mod sessions;
mod versions;

use std::sync::{Arc, RwLock};

use crate::assets::AssetManager;
use crate::error::{Error, Result};
use crate::format::config::RepositoryConfig;
use crate::format::repo_info::RepoInfo;
use crate::format::SpecVersion;
use crate::refs::RefStore;
use crate::storage::{ObjectVersion, Storage};
use crate::virtual_refs::VirtualChunkResolver;

pub use ancestry::SnapshotInfo;
pub use compact::{CompactOptions, CompactSummary};
pub use open::OpenOptions;
pub use repo_info::{FileHeader, MetadataFile};
pub use retention::MaintainSummary;
pub use versions::VersionSelector;

#[derive(Debug)]
struct ConfigState {
    config: RepositoryConfig,
    version: Option<ObjectVersion>,
    resolver: Arc<VirtualChunkResolver>,
}

#[derive(Debug)]
struct Inner {
    spec: SpecVersion,
    /// The storage under the bound of `limit`.
    storage: Arc<dyn Storage>,
    /// The configuration's `max_concurrent_requests`, applied to `storage`.
    limit: Arc<crate::storage::RequestLimit>,
    assets: Arc<AssetManager>,
    refs: RefStore,
    options: OpenOptions,
    config: RwLock<ConfigState>,
}

/// A repository in the Icechunk format (spec 1 or 2, see [`Repository::spec_version`]). Cheap to
/// clone; clones share caches.
#[derive(Clone, Debug)]
pub struct Repository {
    inner: Arc<Inner>,
}

impl Repository {
    /// The repository's Icechunk spec version.
    pub fn spec_version(&self) -> SpecVersion {
        self.inner.spec
    }

    /// Fails with [`Error::UnsupportedOnSpecVersion`] unless the repository is of
    /// spec version `needed`.
    fn require_spec(&self, operation: &'static str, needed: SpecVersion) -> Result<()> {
        if self.inner.spec == needed {
            Ok(())
        } else {
            Err(Error::UnsupportedOnSpecVersion {
                operation,
                spec_version: self.inner.spec,
            })
        }
    }

    /// Spec 2: fails with [`Error::RepositoryReadOnly`] unless the repository's status
    /// accepts writes, from the `repo` object as last read (a read made during this
    /// call, such as a branch lookup's, costs no request) or read now. Spec 1 has no
    /// status: always `Ok`.
    async fn check_online(&self) -> Result<()> {
        if self.inner.spec != SpecVersion::V2 {
            return Ok(());
        }
        let info = match self.inner.assets.cached_repo_object() {
            Some((_, info, _)) => info,
            None => self.repo_info().await?,
        };
        crate::refs::repo_object::check_online(&info)
    }

    /// Spec 2: the current `repo` object.
    async fn repo_info(&self) -> Result<Arc<RepoInfo>> {
        Ok(self.inner.assets.fetch_repo_info().await?.0)
    }

    fn config_state(&self) -> std::sync::RwLockReadGuard<'_, ConfigState> {
        self.inner.config.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_config_state(&self) -> std::sync::RwLockWriteGuard<'_, ConfigState> {
        self.inner.config.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The storage.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.inner.storage
    }

    /// The object fetcher and cache (public with the `testing` feature).
    #[cfg(feature = "testing")]
    pub fn assets(&self) -> &AssetManager {
        &self.inner.assets
    }
}
