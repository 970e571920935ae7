//! [`Repository`]: create and open repositories, read and update their configuration,
//! manage branches and tags, walk ancestry, resolve branch / tag / snapshot id / time
//! to a snapshot, and start sessions.
//!
//! Spec: Icechunk specification, "Initialize New Repository", "Reference Files",
//! "Read from Repository", "Create New Tag".

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::assets::{AssetManager, CacheSizes, ParentWalk};
use crate::error::{Error, Result};
use crate::format::config::{
    ManifestPreloadCondition, RepositoryConfig, VirtualChunkContainer, CONFIG_KEY,
};
use crate::format::keys;
use crate::format::repo_info::{
    Availability, FeatureFlag, RepoInfo, RepoStatus, RepoUpdate, SnapshotSummary, UpdateKind,
};
use crate::format::snapshot::{micros_to_time, Snapshot, SnapshotHeader, SnapshotNodes};
use crate::format::transaction_log::TransactionLog;
use crate::format::{SnapshotId, SpecVersion};
use crate::refs::{self, repo_object, RefStore};
use crate::session::context::SessionContext;
use crate::session::{Diff, Session};
use crate::storage::{ObjectVersion, S3Options, Storage, StorageError, WriteOutcome};
use crate::virtual_refs::{VirtualAccess, VirtualChunkResolver};

/// Which snapshot to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionSelector {
    /// The tip of a branch.
    Branch(String),
    /// A tag.
    Tag(String),
    /// A snapshot id.
    Snapshot(SnapshotId),
    /// The newest snapshot of a branch committed at or before a time (time travel).
    AsOf {
        /// The branch.
        branch: String,
        /// The time.
        time: DateTime<Utc>,
    },
}

/// One commit of an ancestry listing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SnapshotInfo {
    /// The snapshot id.
    pub id: SnapshotId,
    /// Its parent, `None` for the initial snapshot.
    pub parent_id: Option<SnapshotId>,
    /// Commit time.
    pub flushed_at: DateTime<Utc>,
    /// Commit message.
    pub message: String,
    /// Commit metadata.
    pub metadata: BTreeMap<String, serde_json::Value>,
}

impl OpenOptions {
    /// These options authorizing virtual chunk reads under `access`.
    pub fn virtual_access(mut self, access: VirtualAccess) -> Self {
        self.virtual_access = access;
        self
    }

    /// These options with credentials for S3 virtual chunk containers (`None`: read
    /// `AWS_*` variables).
    pub fn virtual_s3_credentials(mut self, credentials: Option<S3Options>) -> Self {
        self.virtual_s3_credentials = credentials;
        self
    }

    /// These options with the reader's own virtual chunk containers (those of the
    /// configuration the reader passes when opening): they replace the repository's
    /// containers of the same URL prefix, and their store settings (an S3 endpoint) are
    /// trusted (see [`crate::virtual_refs::VirtualChunkResolver::with_reader_containers`]).
    pub fn virtual_containers(mut self, containers: Vec<VirtualChunkContainer>) -> Self {
        self.virtual_containers = containers;
        self
    }

    /// These options with the reader's credentials by URL prefix (Icechunk's
    /// `containers_credentials`; see
    /// [`crate::virtual_refs::VirtualChunkResolver::with_credentials`]). Authorizing
    /// is separate: [`OpenOptions::virtual_access`].
    pub fn virtual_credentials(
        mut self,
        credentials: Vec<(String, crate::virtual_refs::ContainerCredentials)>,
    ) -> Self {
        self.virtual_credentials = credentials;
        self
    }

    /// These options with `deadline` as the read deadline of virtual chunk reads: the
    /// longest one request (with its retries) may take before failing with
    /// [`crate::error::VirtualChunkError::DeadlineExceeded`]. Default
    /// [`crate::virtual_refs::fetch::DEFAULT_READ_DEADLINE`] (60 seconds).
    pub fn virtual_read_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.virtual_read_deadline = Some(deadline);
        self
    }
}

impl From<&SnapshotSummary> for SnapshotInfo {
    fn from(s: &SnapshotSummary) -> Self {
        SnapshotInfo {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: micros_to_time(s.flushed_at),
            message: s.message.clone(),
            metadata: s.metadata.clone(),
        }
    }
}

impl From<&Snapshot> for SnapshotInfo {
    fn from(s: &Snapshot) -> Self {
        SnapshotInfo {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: s.flushed_at_time(),
            message: s.message.clone(),
            metadata: s.metadata.clone(),
        }
    }
}

impl From<&SnapshotHeader> for SnapshotInfo {
    fn from(s: &SnapshotHeader) -> Self {
        SnapshotInfo {
            id: s.id,
            parent_id: s.parent_id,
            flushed_at: s.flushed_at_time(),
            message: s.message.clone(),
            metadata: s.metadata.clone(),
        }
    }
}

/// What a caller allows when opening a repository.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Virtual chunk URL prefixes the caller trusts this repository to read
    /// (nothing by default).
    pub virtual_access: VirtualAccess,
    /// Credentials for S3 virtual chunk containers; `None` reads `AWS_*` variables.
    pub virtual_s3_credentials: Option<S3Options>,
    /// The reader's own virtual chunk containers ([`OpenOptions::virtual_containers`]).
    pub virtual_containers: Vec<VirtualChunkContainer>,
    /// The reader's credentials by URL prefix ([`OpenOptions::virtual_credentials`]).
    pub virtual_credentials: Vec<(String, crate::virtual_refs::ContainerCredentials)>,
    /// Read deadline of one virtual chunk request with its retries; `None`:
    /// [`crate::virtual_refs::fetch::DEFAULT_READ_DEADLINE`] (60 seconds).
    pub virtual_read_deadline: Option<std::time::Duration>,
}

impl OpenOptions {
    /// The virtual chunk resolver of a repository whose config lists `containers`.
    fn resolver(&self, containers: Vec<VirtualChunkContainer>) -> VirtualChunkResolver {
        let resolver = VirtualChunkResolver::new(
            containers,
            self.virtual_access.clone(),
            self.virtual_s3_credentials.clone(),
        )
        .with_reader_containers(self.virtual_containers.clone())
        .with_credentials(self.virtual_credentials.clone());
        match self.virtual_read_deadline {
            Some(d) => resolver.with_read_deadline(d),
            None => resolver,
        }
    }
}

/// The cache sizes a configuration's `caching` asks for (unset fields: floe's
/// defaults).
fn cache_sizes(config: &RepositoryConfig) -> CacheSizes {
    let c = config.caching();
    CacheSizes {
        snapshot_nodes: c.num_snapshot_nodes,
        chunk_refs: c.num_chunk_refs,
        transaction_changes: c.num_transaction_changes,
    }
}

#[derive(Debug)]
struct ConfigState {
    config: RepositoryConfig,
    version: Option<ObjectVersion>,
    resolver: Arc<VirtualChunkResolver>,
}

#[derive(Debug)]
struct Inner {
    spec: SpecVersion,
    storage: Arc<dyn Storage>,
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
    /// The spec version of new repositories when none is asked for
    /// ([`Repository::create`], [`Repository::open_or_create`], `floe init`, the
    /// Python `Repository.create`): spec 2, as Icechunk 2.x creates. Icechunk 1.x
    /// opens only spec 1: ask for [`SpecVersion::V1`] with
    /// [`Repository::create_with`].
    pub const DEFAULT_SPEC_VERSION: SpecVersion = SpecVersion::V2;

    fn build(
        spec: SpecVersion,
        storage: Arc<dyn Storage>,
        assets: Arc<AssetManager>,
        config: RepositoryConfig,
        version: Option<ObjectVersion>,
        options: OpenOptions,
    ) -> Result<Self> {
        let resolver = Arc::new(options.resolver(config.virtual_chunk_containers()?));
        assets.set_compression_level(config.compression_level());
        Ok(Repository {
            inner: Arc::new(Inner {
                spec,
                refs: RefStore::new(Arc::clone(&assets)),
                assets,
                storage,
                options,
                config: RwLock::new(ConfigState {
                    config,
                    version,
                    resolver,
                }),
            }),
        })
    }

    /// Whether a repository exists in `storage`: a spec-2 `repo` object, or a spec-1
    /// `main` branch.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn exists(storage: &dyn Storage) -> Result<bool> {
        Ok(Self::spec_version_of(storage).await?.is_some())
    }

    /// The spec version of the repository in `storage`, `None` when there is none.
    /// As Icechunk decides it: a `repo` object means spec 2 (even beside spec-1 refs,
    /// an unfinished upgrade); else a `main` branch ref means spec 1.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn spec_version_of(storage: &dyn Storage) -> Result<Option<SpecVersion>> {
        refs::spec_version_of(storage).await
    }

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

    /// Creates a repository of Icechunk spec version 2, the default of floe and of
    /// Icechunk 2.x (Icechunk 1.x cannot open it): writes the initial snapshot
    /// `1CECHNKREP0F1RSTCMT0` and its transaction log, then the `repo` object holding
    /// branch `main` and the configuration (create-if-not-exists, so of two
    /// concurrent creates exactly one succeeds). For a spec-1 repository (one that
    /// Icechunk 1.x also opens) use [`Repository::create_with`] with
    /// [`SpecVersion::V1`].
    ///
    /// # Errors
    /// As [`Repository::create_with`].
    pub async fn create(
        storage: Arc<dyn Storage>,
        config: Option<RepositoryConfig>,
    ) -> Result<Self> {
        Self::create_with(
            storage,
            config,
            Self::DEFAULT_SPEC_VERSION,
            OpenOptions::default(),
        )
        .await
    }

    /// Creates a repository of Icechunk spec version `spec`, with open options
    /// (virtual chunk authorization). Spec 1 writes the initial snapshot, then
    /// `config.yaml` (when not default) and the `main` ref; spec 2 (what Icechunk
    /// 2.x creates by default; Icechunk 1.x cannot open it) writes the initial
    /// snapshot and its empty transaction log, then the `repo` object holding
    /// `main`, the configuration and a `RepoInitialized` ops-log entry. The last
    /// write is create-if-not-exists, so of two concurrent creates exactly one
    /// succeeds.
    ///
    /// # Errors
    /// [`Error::RepositoryExists`] (of either spec version); format errors for a
    /// configuration that cannot be encoded; storage errors.
    pub async fn create_with(
        storage: Arc<dyn Storage>,
        config: Option<RepositoryConfig>,
        spec: SpecVersion,
        options: OpenOptions,
    ) -> Result<Self> {
        tracing::debug!(location = %storage.root_url(), spec = spec as u8, "Creating Repository");
        let exists = || Error::RepositoryExists {
            location: storage.root_url(),
        };
        let config = config.unwrap_or_default();
        let assets = Arc::new(AssetManager::with_cache_sizes(
            Arc::clone(&storage),
            spec,
            cache_sizes(&config),
        ));
        let initial = Arc::new(Snapshot::initial(spec));
        // The check for an existing repository and the initial snapshot's writes go
        // out together (one round trip): those writes only create objects, so
        // beside an existing repository they change nothing.
        let log = Arc::new(TransactionLog::new(initial.id));
        let (present, snapshot_write, log_write) = futures::try_join!(
            Self::exists(storage.as_ref()),
            assets.write_snapshot_if_absent(Arc::clone(&initial)),
            async {
                match spec {
                    SpecVersion::V1 => Ok(WriteOutcome::PreconditionFailed),
                    SpecVersion::V2 => {
                        assets
                            .write_transaction_log_if_absent(Arc::clone(&log))
                            .await
                    }
                }
            }
        )?;
        if present {
            // What this call created (nothing was there) is removed again, best
            // effort and only in the version it wrote, so an existing repository
            // keeps exactly its objects (even one a racing creation replaced).
            let created = [
                (keys::snapshot(&initial.id), snapshot_write),
                (keys::transaction_log(&initial.id), log_write),
            ];
            for (key, outcome) in created {
                if let WriteOutcome::Written(Some(version)) = outcome {
                    if let Err(e) = storage.delete_if_match(&key, &version).await {
                        tracing::debug!("{key} left beside an existing repository: {e}");
                    }
                }
            }
            return Err(exists());
        }
        if snapshot_write == WriteOutcome::PreconditionFailed {
            // Left by a creation that did not finish: nothing references it.
            assets.write_snapshot(Arc::clone(&initial)).await?;
        }
        let mut version = None;
        match spec {
            SpecVersion::V1 => {
                if !config.is_default() {
                    version = storage
                        .put(CONFIG_KEY, Bytes::from(config.to_yaml()?))
                        .await?;
                }
                match refs::create_branch(storage.as_ref(), "main", initial.id).await {
                    Ok(()) => {}
                    Err(Error::BranchExists { .. }) => return Err(exists()),
                    Err(e) => return Err(e),
                }
            }
            SpecVersion::V2 => {
                let info = RepoInfo::initial(
                    SnapshotSummary::from(initial.as_ref()),
                    config.clone(),
                    initial.flushed_at,
                )?;
                let bytes = info.encode()?;
                match storage
                    .put_if_absent(keys::SPEC2_REPO, bytes.into())
                    .await?
                {
                    WriteOutcome::Written(_) => assets.learn_parents(&info),
                    WriteOutcome::PreconditionFailed => return Err(exists()),
                }
            }
        }
        Self::build(spec, storage, assets, config, version, options)
    }

    /// Opens an existing repository with default options (no virtual chunk access).
    ///
    /// # Errors
    /// As [`Repository::open_with`].
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Self> {
        Self::open_with(storage, OpenOptions::default()).await
    }

    /// Opens an existing repository.
    ///
    /// Spec-1 and spec-2 repositories open, each read and written in its own
    /// format (see [`Repository::spec_version_of`]).
    ///
    /// # Errors
    /// [`Error::RepositoryNotFound`]; [`Error::Format`] for a corrupt `config.yaml` or
    /// `repo` object; storage errors.
    pub async fn open_with(storage: Arc<dyn Storage>, options: OpenOptions) -> Result<Self> {
        Self::open_configured(storage, options, None).await
    }

    /// Opens an existing repository with `overrides` merged over its stored
    /// configuration ([`RepositoryConfig::merge`], as Icechunk's `Repository.open`
    /// with a `config`): the repository works with the merged configuration (its
    /// caches, compression, manifest layout and preloading), and
    /// [`Repository::config`] returns it; nothing is written until
    /// [`Repository::save_config`].
    ///
    /// # Errors
    /// As [`Repository::open_with`].
    pub async fn open_configured(
        storage: Arc<dyn Storage>,
        options: OpenOptions,
        overrides: Option<RepositoryConfig>,
    ) -> Result<Self> {
        // One round trip: the `repo` object (spec 2) is read whole rather than probed,
        // and the spec-1 markers (`config.yaml`, the `main` ref) beside it.
        fn found<T>(r: std::result::Result<T, StorageError>) -> Result<Option<T>> {
            match r {
                Ok(v) => Ok(Some(v)),
                Err(StorageError::NotFound { .. }) => Ok(None),
                Err(e) => Err(Error::from(e)),
            }
        }
        let merged = |stored: RepositoryConfig| match &overrides {
            Some(o) => stored.merge(o),
            None => stored,
        };
        let main_ref = keys::branch("main");
        let (repo, config, main) = futures::join!(
            storage.get(keys::SPEC2_REPO),
            storage.get(CONFIG_KEY),
            storage.head(&main_ref)
        );
        if let Some(repo) = found(repo)? {
            let spec = SpecVersion::V2;
            // Decoded first, then handed to the manager sized by its configuration,
            // which keeps the object and the parent links it holds.
            let probe = AssetManager::for_spec(Arc::clone(&storage), spec);
            let (bytes, info, version) = probe.admit_repo_object(repo).await?;
            let config = merged(info.config.clone());
            let assets = Arc::new(AssetManager::with_cache_sizes(
                Arc::clone(&storage),
                spec,
                cache_sizes(&config),
            ));
            assets.learn_parents(&info);
            if let Some(v) = &version {
                assets.remember_repo_object(v.clone(), bytes, info);
            }
            return Self::build(spec, storage, assets, config, version, options);
        }
        if found(main)?.is_none() {
            return Err(Error::RepositoryNotFound {
                location: storage.root_url(),
            });
        }
        let spec = SpecVersion::V1;
        let (config, version) = match found(config)? {
            Some(v) => (RepositoryConfig::parse(&v.bytes)?, v.version),
            None => (RepositoryConfig::default(), None),
        };
        let config = merged(config);
        let assets = Arc::new(AssetManager::with_cache_sizes(
            Arc::clone(&storage),
            spec,
            cache_sizes(&config),
        ));
        Self::build(spec, storage, assets, config, version, options)
    }

    /// The stored configuration of the repository in `storage` (Icechunk's
    /// `Repository.fetch_config`): `config.yaml` in spec 1, the `repo` object's in
    /// spec 2; `None` when the repository stores none (a default configuration).
    ///
    /// # Errors
    /// [`Error::RepositoryNotFound`]; [`Error::Format`] for a corrupt configuration;
    /// storage errors.
    pub async fn fetch_config(storage: Arc<dyn Storage>) -> Result<Option<RepositoryConfig>> {
        let repo = Self::open(storage).await?;
        let (stored, version) = {
            let state = repo.config_state();
            (state.config.clone(), state.version.clone())
        };
        let absent = match repo.spec_version() {
            SpecVersion::V1 => version.is_none() && stored.is_default(),
            SpecVersion::V2 => stored.is_default(),
        };
        Ok((!absent).then_some(stored))
    }

    /// This repository with `overrides` merged over its current configuration (as
    /// Icechunk's `Repository.reopen`): shares its storage and caches; nothing is
    /// written until [`Repository::save_config`].
    ///
    /// # Errors
    /// [`Error::Format`] for malformed virtual chunk containers.
    pub fn reopen(&self, overrides: Option<&RepositoryConfig>) -> Result<Self> {
        self.reopen_with(overrides, self.inner.options.clone())
    }

    /// The options this repository was opened with (virtual chunk access,
    /// credentials, the reader's own containers).
    pub fn open_options(&self) -> &OpenOptions {
        &self.inner.options
    }

    /// [`Repository::reopen`] with `options` in place of the ones it was opened
    /// with (Icechunk's `Repository.reopen(config, authorize_virtual_chunk_access)`).
    ///
    /// # Errors
    /// As [`Repository::reopen`].
    pub fn reopen_with(
        &self,
        overrides: Option<&RepositoryConfig>,
        options: OpenOptions,
    ) -> Result<Self> {
        let (config, version) = {
            let state = self.config_state();
            let config = match overrides {
                Some(o) => state.config.merge(o),
                None => state.config.clone(),
            };
            (config, state.version.clone())
        };
        Self::build(
            self.inner.spec,
            Arc::clone(&self.inner.storage),
            Arc::clone(&self.inner.assets),
            config,
            version,
            options,
        )
    }

    /// Opens the repository (of either spec version), creating one of spec version
    /// 2 (the default, as [`Repository::create`]) when none exists.
    ///
    /// # Errors
    /// As [`Repository::open_with`] and [`Repository::create`].
    pub async fn open_or_create(storage: Arc<dyn Storage>, options: OpenOptions) -> Result<Self> {
        match Self::open_with(Arc::clone(&storage), options.clone()).await {
            Err(Error::RepositoryNotFound { .. }) => {
                match Self::create_with(
                    Arc::clone(&storage),
                    None,
                    Self::DEFAULT_SPEC_VERSION,
                    options.clone(),
                )
                .await
                {
                    Err(Error::RepositoryExists { .. }) => Self::open_with(storage, options).await,
                    other => other,
                }
            }
            other => other,
        }
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

    /// The configuration as last read or saved.
    pub fn config(&self) -> RepositoryConfig {
        self.config_state().config.clone()
    }

    /// The virtual chunk resolver (containers from the config, authorization from the
    /// open options).
    pub fn virtual_resolver(&self) -> Arc<VirtualChunkResolver> {
        Arc::clone(&self.config_state().resolver)
    }

    /// Writes a new `config.yaml` (keys floe does not know are kept as given). When the
    /// file was read with a version, the write is conditional on it.
    ///
    /// # Errors
    /// [`Error::ConfigChanged`] when another writer wrote the file since it was read;
    /// [`Error::Format`]; storage errors.
    pub async fn save_config(&self, config: RepositoryConfig) -> Result<()> {
        let resolver = Arc::new(
            self.inner
                .options
                .resolver(config.virtual_chunk_containers()?),
        );
        let version = match self.inner.spec {
            SpecVersion::V1 => self.save_config_file(&config).await?,
            SpecVersion::V2 => {
                repo_object::update(&self.inner.assets, false, |info| {
                    info.set_config(config.clone())?;
                    Ok(repo_object::Change::Write(UpdateKind::ConfigChanged, ()))
                })
                .await?;
                None
            }
        };
        self.inner
            .assets
            .set_compression_level(config.compression_level());
        let mut state = self.write_config_state();
        state.config = config;
        state.version = version;
        state.resolver = resolver;
        Ok(())
    }

    /// Spec 1: writes `config.yaml`, conditional on the version read; returns the new
    /// version.
    async fn save_config_file(&self, config: &RepositoryConfig) -> Result<Option<ObjectVersion>> {
        let yaml = Bytes::from(config.to_yaml()?);
        let old_version = self.config_state().version.clone();
        let storage = &self.inner.storage;
        let outcome = match old_version {
            Some(v) => storage.put_if_match(CONFIG_KEY, yaml, &v).await?,
            None => storage.put_if_absent(CONFIG_KEY, yaml).await?,
        };
        match outcome {
            WriteOutcome::Written(nv) => Ok(nv),
            WriteOutcome::PreconditionFailed => Err(Error::ConfigChanged),
        }
    }

    /// Branch names, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_branches(&self) -> Result<Vec<String>> {
        Ok(self.inner.refs.list().await?.branches)
    }

    /// Live tag names, sorted (deleted tags are absent).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_tags(&self) -> Result<Vec<String>> {
        Ok(self.inner.refs.list().await?.tags)
    }

    /// Deleted tag names, sorted (their names cannot be used again).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_deleted_tags(&self) -> Result<Vec<String>> {
        Ok(self.inner.refs.list().await?.deleted_tags)
    }

    /// The snapshot branch `name` points to.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; storage and format errors.
    pub async fn lookup_branch(&self, name: &str) -> Result<SnapshotId> {
        Ok(self.inner.refs.branch(name).await?.snapshot)
    }

    /// The snapshot tag `name` points to.
    ///
    /// # Errors
    /// [`Error::TagNotFound`], [`Error::TagDeleted`]; storage and format errors.
    pub async fn lookup_tag(&self, name: &str) -> Result<SnapshotId> {
        self.inner.refs.tag(name).await
    }

    /// Creates branch `name` at `snapshot`.
    ///
    /// # Errors
    /// [`Error::BranchExists`], [`Error::SnapshotNotFound`],
    /// [`Error::InvalidRefName`], [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn create_branch(&self, name: &str, snapshot: SnapshotId) -> Result<()> {
        self.inner.refs.create_branch(name, snapshot).await
    }

    /// Deletes branch `name` (not `main`).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::CannotDeleteMain`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn delete_branch(&self, name: &str) -> Result<()> {
        self.inner.refs.delete_branch(name).await
    }

    /// Moves branch `name` to `to` with compare-and-swap: fails if the branch moved
    /// from where it was read (or from `expected`, when given).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::SnapshotNotFound`], [`Error::BranchMoved`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn reset_branch(
        &self,
        name: &str,
        to: SnapshotId,
        expected: Option<SnapshotId>,
    ) -> Result<()> {
        self.inner.refs.reset_branch(name, to, expected).await
    }

    /// Creates tag `name` at `snapshot`. Tags never move.
    ///
    /// # Errors
    /// [`Error::TagExists`], [`Error::TagDeleted`] (a deleted tag's name can never be
    /// reused), [`Error::SnapshotNotFound`], [`Error::InvalidRefName`],
    /// [`Error::FeatureDisabled`], [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn create_tag(&self, name: &str, snapshot: SnapshotId) -> Result<()> {
        self.inner.refs.create_tag(name, snapshot).await
    }

    /// Deletes tag `name` (spec 1: by writing its tombstone; spec 2: by moving it to
    /// the `repo` object's deleted tags).
    ///
    /// # Errors
    /// [`Error::TagNotFound`], [`Error::TagDeleted`], [`Error::FeatureDisabled`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn delete_tag(&self, name: &str) -> Result<()> {
        self.inner.refs.delete_tag(name).await
    }

    /// Spec 2: the ops log, newest first: the `repo` object's entries, then those of
    /// the `overwritten/` copies it chains to (`repo_before_updates`).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors
    /// (a missing or corrupt copy in the chain).
    pub async fn ops_log(&self) -> Result<Vec<RepoUpdate>> {
        self.require_spec("ops_log", SpecVersion::V2)?;
        let info = self.repo_info().await?;
        let mut out = info.latest_updates.clone();
        let mut next = info.repo_before_updates.clone();
        let mut seen = std::collections::HashSet::new();
        while let Some(name) = next {
            if !seen.insert(name.clone()) {
                return Err(Error::Format(crate::format::FormatError::InvalidData {
                    what: "repo",
                    reason: format!("the ops log chain loops at `{name}`"),
                }));
            }
            let older = self.inner.assets.fetch_repo_backup(&name).await?;
            out.extend(older.latest_updates);
            next = older.repo_before_updates;
        }
        Ok(out)
    }

    /// Spec 2: the decoded `repo` object (branches, tags, deleted tags, every
    /// snapshot's summary, metadata, the latest ops-log entries, feature flags), as
    /// read now; what Icechunk's `inspect_repo_info` shows.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1 (no `repo` object); storage and
    /// format errors.
    pub async fn inspect_repo_info(&self) -> Result<Arc<RepoInfo>> {
        self.require_spec("inspect_repo_info", SpecVersion::V2)?;
        self.repo_info().await
    }

    /// Spec 2: the repository metadata (JSON values by name).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn get_metadata(&self) -> Result<BTreeMap<String, serde_json::Value>> {
        self.require_spec("get_metadata", SpecVersion::V2)?;
        Ok(self.repo_info().await?.metadata.clone())
    }

    /// Spec 2: replaces the repository metadata (`MetadataChanged` in the ops log).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::RepositoryReadOnly`];
    /// storage and format errors.
    pub async fn set_metadata(&self, metadata: BTreeMap<String, serde_json::Value>) -> Result<()> {
        self.require_spec("set_metadata", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, false, |info| {
            info.metadata = metadata.clone();
            Ok(repo_object::Change::Write(UpdateKind::MetadataChanged, ()))
        })
        .await
    }

    /// Spec 2: sets the given metadata keys, keeping the others; returns the
    /// metadata after the change.
    ///
    /// # Errors
    /// As [`Repository::set_metadata`].
    pub async fn update_metadata(
        &self,
        changes: BTreeMap<String, serde_json::Value>,
    ) -> Result<BTreeMap<String, serde_json::Value>> {
        self.require_spec("update_metadata", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, false, |info| {
            info.metadata.extend(changes.clone());
            Ok(repo_object::Change::Write(
                UpdateKind::MetadataChanged,
                info.metadata.clone(),
            ))
        })
        .await
    }

    /// Spec 2: whether the repository accepts writes, since when and why.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn status(&self) -> Result<RepoStatus> {
        self.require_spec("status", SpecVersion::V2)?;
        Ok(self.repo_info().await?.status.clone())
    }

    /// Spec 2: sets the repository status (`RepoStatusChanged` in the ops log). A
    /// read-only repository refuses every other change until it is set online again.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn set_status(
        &self,
        availability: Availability,
        reason: Option<String>,
    ) -> Result<()> {
        self.require_spec("set_status", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, true, |info| {
            let status = RepoStatus {
                availability,
                set_at: crate::format::snapshot::now_micros(),
                reason: reason.clone(),
            };
            info.status = status.clone();
            Ok(repo_object::Change::Write(
                UpdateKind::RepoStatusChanged { status },
                (),
            ))
        })
        .await
    }

    /// Spec 2: every feature flag with its explicit setting (`None` = default) and
    /// whether it is on.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; storage and format errors.
    pub async fn feature_flags(&self) -> Result<Vec<(FeatureFlag, Option<bool>, bool)>> {
        self.require_spec("feature_flags", SpecVersion::V2)?;
        let info = self.repo_info().await?;
        Ok(FeatureFlag::ALL
            .into_iter()
            .map(|f| {
                (
                    f,
                    info.feature_flag_setting(f),
                    info.feature_flag_enabled(f),
                )
            })
            .collect())
    }

    /// Spec 2: turns `flag` on or off, or back to its default with `None`
    /// (`FeatureFlagChanged` in the ops log).
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::RepositoryReadOnly`];
    /// storage and format errors.
    pub async fn set_feature_flag(&self, flag: FeatureFlag, value: Option<bool>) -> Result<()> {
        self.require_spec("set_feature_flag", SpecVersion::V2)?;
        repo_object::update(&self.inner.assets, false, |info| {
            info.set_feature_flag(flag, value);
            Ok(repo_object::Change::Write(
                UpdateKind::FeatureFlagChanged {
                    id: flag.id(),
                    new_value: value.unwrap_or(true),
                    is_set: value.is_some(),
                },
                (),
            ))
        })
        .await
    }

    /// The snapshot a selector names. A snapshot id is checked to exist, and a time
    /// looked up, by reading commit facts only, never node tables
    /// (`AssetManager::fetch_snapshot_header`).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::TagNotFound`], [`Error::TagDeleted`],
    /// [`Error::SnapshotNotFound`], [`Error::NoSnapshotAtTime`]; storage and format errors.
    pub async fn resolve(&self, selector: &VersionSelector) -> Result<SnapshotId> {
        match selector {
            VersionSelector::Branch(b) => self.lookup_branch(b).await,
            VersionSelector::Tag(t) => self.lookup_tag(t).await,
            VersionSelector::Snapshot(id) => {
                // Spec 2: the `repo` object lists every snapshot of the repository
                // (commits and flushes), so a listed id needs no read of its file, and
                // an unlisted one is not found even while its file remains (an expired
                // snapshot before garbage collection), as in Icechunk 2.3.0.
                if self.inner.spec == SpecVersion::V2 {
                    if !self.repo_info().await?.snapshots.contains_key(id) {
                        return Err(Error::SnapshotNotFound { id: *id });
                    }
                } else {
                    self.inner.assets.fetch_snapshot_header(id).await?;
                }
                Ok(*id)
            }
            VersionSelector::AsOf { branch, time } => {
                let tip = self.lookup_branch(branch).await?;
                let mut walk = ParentWalk::headers(&self.inner.assets, tip);
                while let Some(snap) = walk.next().await? {
                    if snap.flushed_at_time() <= *time {
                        return Ok(snap.id);
                    }
                }
                Err(Error::NoSnapshotAtTime {
                    branch: branch.clone(),
                    time: *time,
                })
            }
        }
    }

    /// Resolves a reference string: a branch name, else a tag name, else a snapshot id.
    ///
    /// # Errors
    /// [`Error::TagDeleted`] for a deleted tag's name; [`Error::RefNotFound`] when
    /// nothing matches; storage and format errors.
    pub async fn resolve_ref(&self, reference: &str) -> Result<VersionSelector> {
        if refs::validate_ref_name("branch", reference).is_ok() {
            match self.lookup_branch(reference).await {
                Ok(_) => return Ok(VersionSelector::Branch(reference.to_string())),
                Err(Error::BranchNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            match self.lookup_tag(reference).await {
                Ok(_) => return Ok(VersionSelector::Tag(reference.to_string())),
                Err(Error::TagNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if let Ok(id) = reference.parse::<SnapshotId>() {
            match self.inner.assets.fetch_snapshot_header(&id).await {
                Ok(_) => return Ok(VersionSelector::Snapshot(id)),
                Err(Error::SnapshotNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::RefNotFound {
            reference: reference.to_string(),
        })
    }

    /// The commits from `snapshot` back to the initial snapshot, newest first: the
    /// whole [`Repository::ancestry_stream`], collected.
    ///
    /// # Errors
    /// [`Error::AncestryLoop`] for a corrupt history; [`Error::SnapshotNotFound`];
    /// storage and format errors.
    pub async fn ancestry(&self, snapshot: SnapshotId) -> Result<Vec<SnapshotInfo>> {
        use futures::TryStreamExt;
        self.ancestry_stream(VersionSelector::Snapshot(snapshot))
            .try_collect()
            .await
    }

    /// The commits from the snapshot `start` selects (a branch tip, a tag, a snapshot
    /// id, a time on a branch) back to the initial snapshot, newest first, as a
    /// stream: `.take(n)` reads only the newest `n`. On spec 2 the `repo` object
    /// holds every commit's summary and parent, so the stream reads one object; on
    /// spec 1 it reads one snapshot file per item, each only when the stream is
    /// polled for it, and only its commit facts, not its node table
    /// (`AssetManager::fetch_snapshot_header`).
    ///
    /// # Errors
    /// Items are errors for: a selector that names nothing ([`Error::BranchNotFound`],
    /// [`Error::TagNotFound`], [`Error::SnapshotNotFound`]), [`Error::AncestryLoop`] for a corrupt history,
    /// storage and format errors. The stream ends after its first error.
    pub fn ancestry_stream(
        &self,
        start: VersionSelector,
    ) -> impl futures::Stream<Item = Result<SnapshotInfo>> + Send + '_ {
        enum Walk<'a> {
            Start(VersionSelector),
            Summaries(std::vec::IntoIter<SnapshotInfo>),
            Files(ParentWalk<'a, SnapshotHeader>),
        }
        futures::stream::try_unfold(Walk::Start(start), move |mut walk| async move {
            loop {
                walk = match walk {
                    Walk::Start(selector) => {
                        // Spec 2, a snapshot the `repo` object lists: its summaries
                        // answer, from one read of the object.
                        let (snapshot, validated) = match &selector {
                            VersionSelector::Snapshot(id) if self.inner.spec == SpecVersion::V2 => {
                                (*id, false)
                            }
                            // Spec 2: a branch or tag lookup read or re-validated the
                            // `repo` object during this call, so its summaries answer
                            // without another request.
                            VersionSelector::Branch(_) | VersionSelector::Tag(_) => {
                                (self.resolve(&selector).await?, true)
                            }
                            _ => (self.resolve(&selector).await?, false),
                        };
                        let listed = match (validated, self.inner.assets.cached_repo_object()) {
                            (true, Some((_, info, _))) if self.inner.spec == SpecVersion::V2 => {
                                summaries_in(&info, snapshot)?
                            }
                            _ => self.summary_ancestry(snapshot).await?,
                        };
                        match listed {
                            Some(list) => Walk::Summaries(list.into_iter()),
                            None => {
                                // Not listed (or spec 1): the snapshot file must exist.
                                self.resolve(&VersionSelector::Snapshot(snapshot)).await?;
                                Walk::Files(ParentWalk::headers(&self.inner.assets, snapshot))
                            }
                        }
                    }
                    Walk::Summaries(mut list) => {
                        return Ok(list.next().map(|info| (info, Walk::Summaries(list))));
                    }
                    Walk::Files(mut files) => {
                        let snap = files.next().await?;
                        return Ok(
                            snap.map(|s| (SnapshotInfo::from(s.as_ref()), Walk::Files(files)))
                        );
                    }
                };
            }
        })
    }

    /// Spec 2: the ancestry of `snapshot` from the `repo` object's summaries, when it
    /// lists the snapshot (`None` otherwise, and on spec 1: walk the files).
    async fn summary_ancestry(&self, snapshot: SnapshotId) -> Result<Option<Vec<SnapshotInfo>>> {
        if self.inner.spec != SpecVersion::V2 {
            return Ok(None);
        }
        let info = self.repo_info().await?;
        summaries_in(&info, snapshot)
    }

    /// Expires, in the history of every branch and tag, the snapshots flushed before
    /// `older_than`, as Icechunk's `expire_snapshots` does (see
    /// [`crate::lifecycle::expire`]): on spec 1 the oldest snapshot of each history
    /// that is not expired is rewritten with the initial snapshot as its parent; on
    /// spec 2 only the `repo` object's parent links change. Nothing is
    /// deleted until [`Repository::garbage_collect`] runs. Refs whose own snapshot is
    /// expired are deleted when `options` say so (`main` never is), each only if it
    /// still points where it was judged (compare-and-swap): a branch a writer moved
    /// meanwhile is kept (`ExpireResult::kept_moved_branches`).
    ///
    /// # Errors
    /// [`Error::AncestryLoop`] for a corrupt history; [`Error::SnapshotNotFound`];
    /// storage and format errors.
    pub async fn expire_snapshots(
        &self,
        older_than: DateTime<Utc>,
        options: crate::lifecycle::ExpireOptions,
    ) -> Result<crate::lifecycle::ExpireResult> {
        if self.inner.spec == SpecVersion::V2 {
            return crate::lifecycle::expire::expire_snapshots_v2(
                &self.inner.assets,
                older_than,
                options,
            )
            .await;
        }
        crate::lifecycle::expire::expire_snapshots(
            &self.inner.assets,
            self.inner.storage.as_ref(),
            older_than,
            options,
        )
        .await
    }

    /// Deletes the snapshots, transaction logs, manifests and native chunks that no
    /// branch or tag reaches and that were last modified before
    /// `delete_object_older_than` (see [`crate::lifecycle::gc`] for the rules and why
    /// the cut-off keeps in-flight commits safe). Returns counts and bytes deleted, or
    /// that would be deleted when `options.dry_run` is set.
    ///
    /// A cut-off newer than [`crate::lifecycle::GC_SAFETY_WINDOW_SECS`] (1 hour)
    /// before now is refused unless `options.allow_recent_cutoff` is set.
    ///
    /// # Errors
    /// [`Error::RepositoryReadOnly`] when the spec-2 repository's status does not
    /// accept writes; [`Error::GcCutoffTooRecent`] (nothing is read or deleted);
    /// [`Error::AncestryLoop`]; [`Error::SnapshotNotFound`] and format errors for
    /// objects the refs reach (then nothing is deleted); storage errors.
    pub async fn garbage_collect(
        &self,
        delete_object_older_than: DateTime<Utc>,
        options: crate::lifecycle::GcOptions,
        progress: Option<crate::lifecycle::gc::GcProgress<'_>>,
    ) -> Result<crate::lifecycle::GcSummary> {
        // As Icechunk 2.3.0: a repository whose status is read-only is not collected.
        if self.inner.spec == SpecVersion::V2 {
            crate::refs::repo_object::check_online(&*self.repo_info().await?)?;
        }
        crate::lifecycle::gc::garbage_collect(
            &self.inner.assets,
            self.inner.storage.as_ref(),
            delete_object_older_than,
            options,
            progress,
        )
        .await
    }

    /// How many bytes the chunks reachable from any branch or tag take, by kind
    /// (native, virtual, inline), each chunk counted once (Icechunk's
    /// `chunk_storage_stats`; see [`crate::lifecycle::stats`]).
    ///
    /// # Errors
    /// Storage and format errors reading refs, snapshots and manifests.
    pub async fn chunk_storage_stats(&self) -> Result<crate::lifecycle::ChunkStorageStats> {
        crate::lifecycle::stats::chunk_storage_stats(
            &self.inner.assets,
            self.inner.storage.as_ref(),
        )
        .await
    }

    /// Snapshot `id`, decoded (for inspection: Icechunk's `inspect_snapshot`).
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub async fn fetch_snapshot(
        &self,
        id: &SnapshotId,
    ) -> Result<Arc<crate::format::snapshot::Snapshot>> {
        self.inner.assets.fetch_snapshot(id).await
    }

    /// The transaction log of snapshot `id`, decoded.
    ///
    /// # Errors
    /// Storage errors (`NotFound` when missing) and format errors.
    pub async fn fetch_transaction_log(
        &self,
        id: &SnapshotId,
    ) -> Result<Arc<crate::format::transaction_log::TransactionLog>> {
        self.inner.assets.fetch_transaction_log(id).await
    }

    /// Manifest `id`, decoded.
    ///
    /// # Errors
    /// Storage errors (`NotFound` when missing) and format errors.
    pub async fn fetch_manifest(
        &self,
        id: &crate::format::ManifestId,
    ) -> Result<Arc<crate::format::manifest::Manifest>> {
        self.inner.assets.fetch_manifest(id, None).await
    }

    /// The node table of snapshot `id`, to list its nodes one at a time
    /// ([`SnapshotNodes::under`]) holding the file's flatbuffer but not a decoded
    /// tree (what `floe ls` does; a read-only session decodes the whole tree).
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub async fn snapshot_nodes(&self, id: &SnapshotId) -> Result<SnapshotNodes> {
        self.inner.assets.fetch_snapshot_nodes(id).await
    }

    /// A read-only session at the selected snapshot.
    ///
    /// # Errors
    /// As [`Repository::resolve`].
    pub async fn readonly_session(&self, selector: &VersionSelector) -> Result<Session> {
        let snap = self.resolve_snapshot(selector).await?;
        self.preload_manifests(&snap);
        Ok(Session::read_only(self.session_context(), snap))
    }

    /// The snapshot `selector` names, read whole. On spec 2 a branch or tag is
    /// resolved by re-validating the `repo` object (as every lookup is); while that
    /// request is out, the snapshot the object as last read names is fetched beside
    /// it, and used when the re-validated object still names it (the common case: one
    /// round trip instead of two). When the ref moved, the speculative read is dropped
    /// (its snapshot stays in the cache) and the new tip is read.
    ///
    /// # Errors
    /// As [`Repository::resolve`] and [`crate::assets::AssetManager::fetch_snapshot`].
    async fn resolve_snapshot(&self, selector: &VersionSelector) -> Result<Arc<Snapshot>> {
        let assets = &self.inner.assets;
        let guess = match (self.inner.spec, selector, assets.cached_repo_object()) {
            (SpecVersion::V2, VersionSelector::Branch(name), Some((_, info, _))) => {
                info.branches.get(name).copied()
            }
            (SpecVersion::V2, VersionSelector::Tag(name), Some((_, info, _))) => {
                info.tags.get(name).copied()
            }
            _ => None,
        };
        let Some(guess) = guess else {
            let id = self.resolve(selector).await?;
            return assets.fetch_snapshot(&id).await;
        };
        let (id, speculative) =
            futures::join!(self.resolve(selector), assets.fetch_snapshot(&guess));
        let id = id?;
        if id == guess {
            speculative
        } else {
            assets.fetch_snapshot(&id).await
        }
    }

    /// Spec 2: a rearrange session on the tip of `branch`, which only moves and
    /// renames nodes ([`Session::move_node`]); its commit records the moves.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::RepositoryReadOnly`]
    /// when the repository's status does not accept writes; [`Error::FeatureDisabled`]
    /// when the repository turns `move_node` off; [`Error::BranchNotFound`]; storage
    /// and format errors.
    pub async fn rearrange_session(&self, branch: &str) -> Result<Session> {
        self.require_spec("rearrange_session", SpecVersion::V2)?;
        let info = self.repo_info().await?;
        crate::refs::repo_object::check_online(&info)?;
        crate::refs::check_flag(&info, "move_node", FeatureFlag::MoveNode)?;
        let id = self.lookup_branch(branch).await?;
        let snap = self.inner.assets.fetch_snapshot(&id).await?;
        Ok(Session::rearrange(
            self.session_context(),
            snap,
            branch.to_string(),
        ))
    }

    /// A writable session on the tip of `branch`.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; [`Error::RepositoryReadOnly`] when the spec-2
    /// repository's status does not accept writes (as Icechunk 2.3.0); storage and
    /// format errors.
    pub async fn writable_session(&self, branch: &str) -> Result<Session> {
        let snap = self
            .resolve_snapshot(&VersionSelector::Branch(branch.to_string()))
            .await?;
        self.check_online().await?;
        self.preload_manifests(&snap);
        Ok(Session::on_branch(
            self.session_context(),
            snap,
            branch.to_string(),
        ))
    }

    /// The fork serialized in `bytes` by [`Session::to_fork_bytes`], on this
    /// repository: how a worker resumes a fork sent to it, with storage and
    /// credentials from its own environment.
    ///
    /// # Errors
    /// [`Error::InvalidFork`] for bytes that are not a fork of this version;
    /// [`Error::SnapshotNotFound`] when the fork's base snapshot is not in this
    /// repository; storage and format errors.
    pub async fn fork_from_bytes(&self, bytes: &[u8]) -> Result<Session> {
        Session::from_fork_bytes(self.session_context(), bytes).await
    }

    /// Starts fetching, in the background, the manifests of `snap` that the
    /// configuration's `manifest.preload` selects (Icechunk's preloading when a
    /// session opens): arrays in path order, at most `max_arrays_to_scan` of them,
    /// each manifest whose chunk refs fit in what is left of `max_total_refs` and
    /// that `preload_if` accepts. Failures are only logged: a preload is a hint.
    fn preload_manifests(&self, snap: &Arc<Snapshot>) {
        let preload = self.config_state().config.manifest().preload();
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
        if picked.is_empty() {
            return;
        }
        let assets = Arc::clone(&self.inner.assets);
        tokio::spawn(async move {
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

    /// What a new session uses of this repository: its caches (and through them its
    /// storage and refs), current configuration and virtual chunk resolver.
    fn session_context(&self) -> Arc<SessionContext> {
        let state = self.config_state();
        Arc::new(SessionContext::new(
            Arc::clone(&self.inner.assets),
            state.config.clone(),
            Arc::clone(&state.resolver),
        ))
    }

    /// What changed from snapshot `from` to snapshot `to`. When `from` is an ancestor
    /// of `to`, from the transaction logs of the commits in between (what was done);
    /// otherwise by comparing the two snapshots' trees and chunk refs.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub async fn diff(&self, from: SnapshotId, to: SnapshotId) -> Result<Diff> {
        let mut chain = Vec::new();
        let mut walk = ParentWalk::headers(&self.inner.assets, to);
        while let Some(snap) = walk.next().await? {
            if snap.id == from {
                break;
            }
            if snap.parent_id.is_none() {
                let from_snap = self.inner.assets.fetch_snapshot(&from).await?;
                let to_snap = self.inner.assets.fetch_snapshot(&to).await?;
                return crate::session::diff::structural_diff(
                    &self.inner.assets,
                    &from_snap,
                    &to_snap,
                )
                .await;
            }
            chain.push(snap);
        }
        // Spec 2.1: a commit re-parented by expiry spans the logs of the ancestors
        // it was re-parented over (`pruned_ancestor_tx_logs`, oldest first).
        let info = match self.inner.spec {
            SpecVersion::V2 => Some(self.repo_info().await?),
            SpecVersion::V1 => None,
        };
        let mut logs = Vec::new();
        for snap in chain.into_iter().rev() {
            let pruned = info
                .as_ref()
                .and_then(|i| i.snapshots.get(&snap.id))
                .and_then(|s| s.pruned_ancestor_tx_logs.clone())
                .unwrap_or_default();
            for id in pruned.iter().chain(std::iter::once(&snap.id)) {
                let log = match self.inner.assets.fetch_transaction_log(id).await {
                    Ok(log) => log,
                    // A pruned log already collected: what it said is lost, as in
                    // Icechunk (which warns and goes on).
                    Err(Error::Storage(StorageError::NotFound { .. })) if *id != snap.id => {
                        tracing::warn!("transaction log of expired snapshot {id} is gone");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                logs.push(log);
            }
        }
        let from_snap = self.inner.assets.fetch_snapshot(&from).await?;
        let to_snap = self.inner.assets.fetch_snapshot(&to).await?;
        Ok(Diff::from_transaction_logs(
            logs.iter().map(AsRef::as_ref),
            &from_snap,
            &to_snap,
        ))
    }
}

/// Spec 2: the ancestry of `snapshot` from the summaries of `repo` object `info`,
/// when it lists the snapshot (`None` otherwise).
///
/// # Errors
/// [`Error::AncestryLoop`] for a corrupt history.
fn summaries_in(info: &RepoInfo, snapshot: SnapshotId) -> Result<Option<Vec<SnapshotInfo>>> {
    if !info.snapshots.contains_key(&snapshot) {
        return Ok(None);
    }
    info.ancestry(snapshot)
        .map(|list| Some(list.into_iter().map(SnapshotInfo::from).collect()))
        .map_err(|id| Error::AncestryLoop { snapshot: id })
}
