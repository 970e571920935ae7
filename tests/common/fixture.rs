//! The setup most repository tests repeat: a new repository (in memory or in a
//! temporary directory), a writable session on `main`, and uncompressed `uint8`
//! arrays of one-element chunks in it.

use std::sync::Arc;

use floe::format::config::RepositoryConfig;
use floe::format::SpecVersion;
use floe::storage::{new_in_memory_storage, LocalStorage, Storage};
use floe::{OpenOptions, Repository, Session};

use super::{array_def, p};

/// A new repository and a writable session on its `main` branch.
///
/// Destructure it keeping `dir` bound (`dir: _dir`) for a local repository: the
/// directory is deleted when the `TempDir` drops.
pub struct Fixture {
    /// The repository.
    pub repo: Repository,
    /// A writable session on `main`.
    pub session: Session,
    /// The repository's storage.
    pub storage: Arc<dyn Storage>,
    /// The local repository's directory (`None` in memory).
    pub dir: Option<tempfile::TempDir>,
}

impl Fixture {
    /// A new repository (of the default spec version, 2) on `storage` with `config`
    /// (the default when `None`).
    pub async fn on(storage: Arc<dyn Storage>, config: Option<RepositoryConfig>) -> Self {
        Self::on_spec(storage, config, Repository::DEFAULT_SPEC_VERSION).await
    }

    /// A new repository of spec version `spec` on `storage` with `config` (the
    /// default when `None`).
    pub async fn on_spec(
        storage: Arc<dyn Storage>,
        config: Option<RepositoryConfig>,
        spec: SpecVersion,
    ) -> Self {
        let repo =
            Repository::create_with(Arc::clone(&storage), config, spec, OpenOptions::default())
                .await
                .unwrap();
        let session = repo.writable_session("main").await.unwrap();
        Fixture {
            repo,
            session,
            storage,
            dir: None,
        }
    }

    /// A new repository in memory.
    pub async fn in_memory() -> Self {
        Self::on(new_in_memory_storage(), None).await
    }

    /// A new repository in a new temporary directory on the local disk.
    pub async fn local() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Self::on(local(&dir), None).await;
        f.dir = Some(dir);
        f
    }

    /// A new spec-1 repository (ref files, `config.yaml`) in a new temporary
    /// directory on the local disk.
    pub async fn local_spec1() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Self::on_spec(local(&dir), None, SpecVersion::V1).await;
        f.dir = Some(dir);
        f
    }

    /// This fixture with an uncompressed `uint8` array of `len` one-element chunks
    /// at `path`, added in the session.
    pub fn with_u8_array(self, path: &str, len: u64) -> Self {
        self.session
            .add_array(&p(path), array_def(path, &[len], &[1], "uint8"))
            .unwrap();
        self
    }
}

/// The local storage of a directory.
pub fn local(dir: &tempfile::TempDir) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir.path()).unwrap())
}

/// Every key in `storage`, in listing order.
pub async fn keys(storage: &dyn Storage) -> Vec<String> {
    storage
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect()
}
