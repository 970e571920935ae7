//! A repository's configuration: reading it ([`Repository::config`],
//! [`Repository::fetch_config`]), merging overrides over it ([`Repository::reopen`])
//! and saving it (`config.yaml` in spec 1, the `repo` object in spec 2).

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::config::{RepositoryConfig, CONFIG_KEY};
use crate::format::repo_info::UpdateKind;
use crate::format::SpecVersion;
use crate::refs::repo_object;
use crate::storage::{ObjectVersion, Storage, WriteOutcome};
use crate::virtual_refs::VirtualChunkResolver;

use super::{OpenOptions, Repository};

impl Repository {
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
            (
                Arc::clone(&self.inner.storage),
                Arc::clone(&self.inner.limit),
            ),
            Arc::clone(&self.inner.assets),
            config,
            version,
            options,
        )
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
        super::open::apply_config(&self.inner.assets, &self.inner.limit, &config);
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
}
