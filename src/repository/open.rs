//! Creating and opening repositories: [`OpenOptions`], [`Repository::create_with`]
//! (spec 1 or 2), [`Repository::open_configured`] (which spec a repository is, its
//! stored configuration merged with the caller's), [`Repository::open_or_create`].

use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::assets::{AssetManager, CacheSizes};
use crate::error::{Error, Result};
use crate::format::config::{RepositoryConfig, VirtualChunkContainer, CONFIG_KEY};
use crate::format::keys;
use crate::format::repo_info::{RepoInfo, SnapshotSummary};
use crate::format::snapshot::Snapshot;
use crate::format::transaction_log::TransactionLog;
use crate::format::SpecVersion;
use crate::refs::{self, RefStore};
use crate::storage::{
    LimitedStorage, ObjectVersion, RequestLimit, S3Options, Storage, StorageError, WriteOutcome,
};
use crate::virtual_refs::{VirtualAccess, VirtualChunkResolver};

use super::{ConfigState, Inner, Repository};

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

impl OpenOptions {
    /// The virtual chunk resolver of a repository whose config lists `containers`.
    pub(super) fn resolver(&self, containers: Vec<VirtualChunkContainer>) -> VirtualChunkResolver {
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

/// `storage` under the bound of `config`'s `max_concurrent_requests` (Icechunk's
/// bound on a repository's requests, default 256), and that bound.
fn limited(
    storage: Arc<dyn Storage>,
    config: &RepositoryConfig,
) -> (Arc<dyn Storage>, Arc<RequestLimit>) {
    let limit = Arc::new(RequestLimit::new(usize::from(
        config.max_concurrent_requests(),
    )));
    let storage: Arc<dyn Storage> = Arc::new(LimitedStorage::new(storage, Arc::clone(&limit)));
    (storage, limit)
}

/// What `config` sets of a handle's object reads and writes from now on (when it
/// opens and when its configuration is saved): the compression level of the files
/// it writes, the retries of spec-2 `repo` updates and the bound on requests in
/// flight. The cache sizes are fixed when the [`AssetManager`] is made.
pub(super) fn apply_config(assets: &AssetManager, limit: &RequestLimit, config: &RepositoryConfig) {
    assets.set_compression_level(config.compression_level());
    assets.set_repo_update_retries(config.repo_update_retries());
    limit.set(usize::from(config.max_concurrent_requests()));
}

/// The cache sizes a configuration's `caching` asks for (unset fields: floe's
/// defaults).
fn cache_sizes(config: &RepositoryConfig) -> CacheSizes {
    let c = config.caching();
    CacheSizes {
        snapshot_nodes: c.num_snapshot_nodes,
        chunk_refs: c.num_chunk_refs,
        transaction_changes: c.num_transaction_changes,
        chunk_bytes: c.num_bytes_chunks(),
    }
}

impl Repository {
    /// The spec version of new repositories when none is asked for
    /// ([`Repository::create`], [`Repository::open_or_create`], `floe init`, the
    /// Python `Repository.create`): spec 2, as Icechunk 2.x creates. Icechunk 1.x
    /// opens only spec 1: ask for [`SpecVersion::V1`] with
    /// [`Repository::create_with`].
    pub const DEFAULT_SPEC_VERSION: SpecVersion = SpecVersion::V2;

    /// A handle over `storage`, which [`limited`] wrapped under `limit`.
    pub(super) fn build(
        spec: SpecVersion,
        (storage, limit): (Arc<dyn Storage>, Arc<RequestLimit>),
        assets: Arc<AssetManager>,
        config: RepositoryConfig,
        version: Option<ObjectVersion>,
        options: OpenOptions,
    ) -> Result<Self> {
        let resolver = Arc::new(options.resolver(config.virtual_chunk_containers()?));
        apply_config(&assets, &limit, &config);
        Ok(Repository {
            inner: Arc::new(Inner {
                spec,
                refs: RefStore::new(Arc::clone(&assets)),
                assets,
                storage,
                limit,
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
        let config = config.unwrap_or_default();
        let (storage, limit) = limited(storage, &config);
        let exists = || Error::RepositoryExists {
            location: storage.root_url(),
        };
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
        Self::build(spec, (storage, limit), assets, config, version, options)
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
        // The `main` ref is read whole (a few bytes, the same round trip as a HEAD):
        // the snapshot it names is fetched beside the first session's own read of
        // the ref.
        let (repo, config, main) = futures::join!(
            storage.get(keys::SPEC2_REPO),
            storage.get(CONFIG_KEY),
            storage.get(&main_ref)
        );
        if let Some(repo) = found(repo)? {
            let spec = SpecVersion::V2;
            // Decoded first, then handed to the manager sized by its configuration,
            // which keeps the object and the parent links it holds.
            let probe = AssetManager::for_spec(Arc::clone(&storage), spec);
            let (bytes, info, version) = probe.admit_repo_object(repo).await?;
            let config = merged(info.config.clone());
            let (storage, limit) = limited(storage, &config);
            let assets = Arc::new(AssetManager::with_cache_sizes(
                Arc::clone(&storage),
                spec,
                cache_sizes(&config),
            ));
            assets.learn_parents(&info);
            if let Some(v) = &version {
                assets.remember_repo_object(v.clone(), bytes, info);
            }
            return Self::build(spec, (storage, limit), assets, config, version, options);
        }
        let Some(main) = found(main)? else {
            return Err(Error::RepositoryNotFound {
                location: storage.root_url(),
            });
        };
        let spec = SpecVersion::V1;
        let (config, version) = match found(config)? {
            Some(v) => (RepositoryConfig::parse(&v.bytes)?, v.version),
            None => (RepositoryConfig::default(), None),
        };
        let config = merged(config);
        let (storage, limit) = limited(storage, &config);
        let assets = Arc::new(AssetManager::with_cache_sizes(
            Arc::clone(&storage),
            spec,
            cache_sizes(&config),
        ));
        let repo = Self::build(spec, (storage, limit), assets, config, version, options)?;
        // A corrupt ref is reported by the reads that need it, not by the open.
        if let Ok(main) = crate::format::refs::RefData::parse(&main_ref, &main.bytes) {
            repo.inner.refs.hint_branch("main", main.snapshot);
        }
        Ok(repo)
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
}
