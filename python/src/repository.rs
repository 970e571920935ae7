//! `Repository` and `SnapshotInfo`, with Icechunk's Python names.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::block_on;
use crate::config::RepositoryConfig;
use crate::errors::IntoPyResult;
use crate::session::Session;
use crate::storage::Storage;

/// JSON values (metadata) to Python objects, through the `json` module.
pub(crate) fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(v).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// A Python mapping of JSON-serializable values to floe metadata.
pub(crate) fn py_to_metadata(
    obj: Option<&Bound<'_, PyAny>>,
) -> PyResult<BTreeMap<String, serde_json::Value>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(BTreeMap::new());
    };
    let text: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("metadata: {e}")))
}

fn snapshot_id(text: &str) -> PyResult<floe::SnapshotId> {
    text.parse()
        .map_err(|e| PyValueError::new_err(format!("snapshot id `{text}`: {e}")))
}

/// One commit of a history.
#[pyclass(module = "floe._floe", frozen, get_all)]
pub(crate) struct SnapshotInfo {
    /// The snapshot id.
    id: String,
    /// Its parent's id, `None` for the first snapshot.
    parent_id: Option<String>,
    /// When it was committed (UTC).
    written_at: DateTime<Utc>,
    /// The commit message.
    message: String,
    /// The commit metadata.
    metadata: Py<PyAny>,
}

#[pymethods]
impl SnapshotInfo {
    fn __repr__(&self) -> String {
        format!("SnapshotInfo(id={:?}, message={:?})", self.id, self.message)
    }
}

fn info(py: Python<'_>, s: &floe::SnapshotInfo) -> PyResult<SnapshotInfo> {
    let metadata = PyDict::new(py);
    for (k, v) in &s.metadata {
        metadata.set_item(k, json_to_py(py, v)?)?;
    }
    Ok(SnapshotInfo {
        id: s.id.to_string(),
        parent_id: s.parent_id.map(|p| p.to_string()),
        written_at: s.flushed_at,
        message: s.message.clone(),
        metadata: metadata.into_any().unbind(),
    })
}

/// The commits of a history, newest first: a Python iterator that reads them in
/// batches (16 commits, then twice as many each time, up to 1,024) as iteration
/// reaches them, so `next(repo.ancestry(branch="main"))` reads only the newest few
/// snapshots of a long spec-1 history.
#[pyclass(module = "floe._floe")]
pub(crate) struct Ancestry {
    repo: floe::Repository,
    /// Where the next batch starts; `None` once the initial snapshot was read.
    next: Option<floe::VersionSelector>,
    buffered: std::collections::VecDeque<floe::SnapshotInfo>,
    /// Every id yielded: a loop across batches is an error, as within one.
    seen: std::collections::HashSet<floe::SnapshotId>,
    batch: usize,
    /// The error that ended the last batch, raised once the commits before it are
    /// yielded.
    failed: Option<floe::Error>,
}

impl Ancestry {
    const FIRST_BATCH: usize = 16;
    const MAX_BATCH: usize = 1024;
}

#[pymethods]
impl Ancestry {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<SnapshotInfo>> {
        loop {
            if let Some(s) = self.buffered.pop_front() {
                if !self.seen.insert(s.id) {
                    self.next = None;
                    self.buffered.clear();
                    self.failed = None;
                    return Err(floe::Error::AncestryLoop { snapshot: s.id }).py();
                }
                return info(py, &s).map(Some);
            }
            // A failed batch is yielded up to the failure, then the error.
            if let Some(e) = self.failed.take() {
                return Err(e).py();
            }
            let Some(start) = self.next.take() else {
                return Ok(None);
            };
            let (repo, n) = (self.repo.clone(), self.batch);
            let (batch, failed) = block_on(py, async move {
                use futures::StreamExt;
                let mut stream = std::pin::pin!(repo.ancestry_stream(start).take(n));
                let mut batch = Vec::new();
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(s) => batch.push(s),
                        Err(e) => return (batch, Some(e)),
                    }
                }
                (batch, None)
            });
            self.batch = (n * 2).min(Self::MAX_BATCH);
            // A full batch may have more behind it: continue from its oldest commit's
            // parent.
            if failed.is_none() && batch.len() == n {
                self.next = batch
                    .last()
                    .and_then(|s| s.parent_id)
                    .map(floe::VersionSelector::Snapshot);
            }
            self.failed = failed;
            self.buffered = batch.into();
        }
    }
}

/// A floe repository (Icechunk format).
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct Repository {
    pub(crate) inner: floe::Repository,
}

fn spec(spec_version: Option<u8>) -> PyResult<floe::format::SpecVersion> {
    spec_version.map_or(Ok(floe::Repository::DEFAULT_SPEC_VERSION), |v| {
        floe::format::SpecVersion::from_byte(v).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

#[pymethods]
impl Repository {
    /// Creates a repository of Icechunk spec version `spec_version` (2, the
    /// default as in Icechunk 2.x, when `None`; 1 for a repository Icechunk 1.x
    /// also opens) with `config` (the defaults when `None`). Raises `ValueError`
    /// for any other version.
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, spec_version=None, authorize_virtual_chunk_access=None))]
    fn create(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        spec_version: Option<u8>,
        authorize_virtual_chunk_access: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let spec = spec(spec_version)?;
        let st = Arc::clone(&storage.inner);
        let config = config.map(|c| c.inner);
        let options = crate::virtual_chunks::open_options(py, authorize_virtual_chunk_access)?;
        let inner = block_on(py, async move {
            floe::Repository::create_with(st, config, spec, options).await
        })
        .py()?;
        Ok(Repository { inner })
    }

    /// The configuration as last read or saved (a copy: change it, then
    /// `save_config`).
    #[getter]
    fn config(&self) -> RepositoryConfig {
        RepositoryConfig {
            inner: self.inner.config(),
        }
    }

    /// Stores `config` as the repository's configuration (`config.yaml` on spec 1,
    /// the `repo` object on spec 2); with no argument, stores the current one.
    /// Raises `FloeError` when another writer changed it since it was read.
    #[pyo3(signature = (config=None))]
    fn save_config(&self, py: Python<'_>, config: Option<RepositoryConfig>) -> PyResult<()> {
        let config = config.map_or_else(|| self.inner.config(), |c| c.inner);
        let repo = self.inner.clone();
        block_on(py, async move { repo.save_config(config).await }).py()
    }

    /// Opens an existing repository; `config` (when given) is merged over the stored
    /// configuration, as Icechunk's `Repository.open(config=)`.
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, authorize_virtual_chunk_access=None))]
    fn open(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        authorize_virtual_chunk_access: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let st = Arc::clone(&storage.inner);
        let overrides = config.map(|c| c.inner);
        let options = crate::virtual_chunks::open_options(py, authorize_virtual_chunk_access)?;
        let inner = block_on(
            py,
            floe::Repository::open_configured(st, options, overrides),
        )
        .py()?;
        Ok(Repository { inner })
    }

    /// Opens the repository (with `config` merged over the stored one), creating it
    /// with `config` in spec version `spec_version` (2 when `None`) when there is
    /// none.
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, spec_version=None, authorize_virtual_chunk_access=None))]
    fn open_or_create(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        spec_version: Option<u8>,
        authorize_virtual_chunk_access: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let spec = spec(spec_version)?;
        let st = Arc::clone(&storage.inner);
        let config = config.map(|c| c.inner);
        let options = crate::virtual_chunks::open_options(py, authorize_virtual_chunk_access)?;
        let inner = block_on(py, async move {
            let opened =
                floe::Repository::open_configured(Arc::clone(&st), options.clone(), config.clone())
                    .await;
            match opened {
                Err(floe::Error::RepositoryNotFound { .. }) => match floe::Repository::create_with(
                    Arc::clone(&st),
                    config.clone(),
                    spec,
                    options.clone(),
                )
                .await
                {
                    Err(floe::Error::RepositoryExists { .. }) => {
                        floe::Repository::open_configured(st, options, config).await
                    }
                    other => other,
                },
                other => other,
            }
        })
        .py()?;
        Ok(Repository { inner })
    }

    /// The stored configuration of the repository in `storage`, `None` when it
    /// stores none (Icechunk's `Repository.fetch_config`).
    #[staticmethod]
    fn fetch_config(py: Python<'_>, storage: &Storage) -> PyResult<Option<RepositoryConfig>> {
        let st = Arc::clone(&storage.inner);
        let found = block_on(py, floe::Repository::fetch_config(st)).py()?;
        Ok(found.map(|inner| RepositoryConfig { inner }))
    }

    /// This repository with `config` merged over its configuration (nothing is
    /// written until `save_config`), as Icechunk's `Repository.reopen(config=)`.
    #[pyo3(signature = (config=None))]
    fn reopen(&self, config: Option<RepositoryConfig>) -> PyResult<Self> {
        let overrides = config.map(|c| c.inner);
        let inner = self.inner.reopen(overrides.as_ref()).py()?;
        Ok(Repository { inner })
    }

    /// Whether a repository exists in `storage`.
    #[staticmethod]
    fn exists(py: Python<'_>, storage: &Storage) -> PyResult<bool> {
        let st = Arc::clone(&storage.inner);
        block_on(
            py,
            async move { floe::Repository::exists(st.as_ref()).await },
        )
        .py()
    }

    /// The Icechunk spec version (1 or 2).
    #[getter]
    fn spec_version(&self) -> u8 {
        self.inner.spec_version() as u8
    }

    /// Branch names.
    fn list_branches(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        block_on(py, self.inner.list_branches()).py()
    }

    /// The snapshot id branch `branch` points to.
    fn lookup_branch(&self, py: Python<'_>, branch: &str) -> PyResult<String> {
        Ok(block_on(py, self.inner.lookup_branch(branch))
            .py()?
            .to_string())
    }

    /// Creates `branch` at `snapshot_id`.
    fn create_branch(&self, py: Python<'_>, branch: &str, snapshot_id: &str) -> PyResult<()> {
        let id = snapshot_id_arg(snapshot_id)?;
        block_on(py, self.inner.create_branch(branch, id)).py()
    }

    /// Deletes `branch` (never `main`).
    fn delete_branch(&self, py: Python<'_>, branch: &str) -> PyResult<()> {
        block_on(py, self.inner.delete_branch(branch)).py()
    }

    /// Moves `branch` to `snapshot_id`, if it is still at `from_snapshot_id` when given.
    #[pyo3(signature = (branch, snapshot_id, *, from_snapshot_id=None))]
    fn reset_branch(
        &self,
        py: Python<'_>,
        branch: &str,
        snapshot_id: &str,
        from_snapshot_id: Option<&str>,
    ) -> PyResult<()> {
        let to = snapshot_id_arg(snapshot_id)?;
        let from = from_snapshot_id.map(snapshot_id_arg).transpose()?;
        block_on(py, self.inner.reset_branch(branch, to, from)).py()
    }

    /// Tag names.
    fn list_tags(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        block_on(py, self.inner.list_tags()).py()
    }

    /// The snapshot id tag `tag` points to.
    fn lookup_tag(&self, py: Python<'_>, tag: &str) -> PyResult<String> {
        Ok(block_on(py, self.inner.lookup_tag(tag)).py()?.to_string())
    }

    /// Creates `tag` at `snapshot_id`.
    fn create_tag(&self, py: Python<'_>, tag: &str, snapshot_id: &str) -> PyResult<()> {
        let id = snapshot_id_arg(snapshot_id)?;
        block_on(py, self.inner.create_tag(tag, id)).py()
    }

    /// Deletes `tag`; its name can never be used again.
    fn delete_tag(&self, py: Python<'_>, tag: &str) -> PyResult<()> {
        block_on(py, self.inner.delete_tag(tag)).py()
    }

    /// The history of a branch, tag or snapshot, newest first, as an iterator that
    /// reads commits as iteration reaches them (see [`Ancestry`]).
    ///
    /// Errors (raised by `next`): an unknown branch, tag or snapshot; a looping
    /// history; storage and format errors.
    #[pyo3(signature = (*, branch=None, tag=None, snapshot_id=None))]
    fn ancestry(
        &self,
        branch: Option<String>,
        tag: Option<String>,
        snapshot_id: Option<&str>,
    ) -> PyResult<Ancestry> {
        Ok(Ancestry {
            repo: self.inner.clone(),
            next: Some(selector(branch, tag, snapshot_id, None)?),
            buffered: std::collections::VecDeque::new(),
            seen: std::collections::HashSet::new(),
            batch: Ancestry::FIRST_BATCH,
            failed: None,
        })
    }

    /// A session that writes to `branch`.
    fn writable_session(&self, py: Python<'_>, branch: &str) -> PyResult<Session> {
        let s = block_on(py, self.inner.writable_session(branch)).py()?;
        Ok(Session::new(s, self.inner.clone()))
    }

    /// A read-only session at a branch, tag, snapshot id or a branch as of a time.
    #[pyo3(signature = (branch=None, *, tag=None, snapshot_id=None, as_of=None))]
    fn readonly_session(
        &self,
        py: Python<'_>,
        branch: Option<String>,
        tag: Option<String>,
        snapshot_id: Option<&str>,
        as_of: Option<DateTime<Utc>>,
    ) -> PyResult<Session> {
        let selector = selector(branch, tag, snapshot_id, as_of)?;
        let s = block_on(py, self.inner.readonly_session(&selector)).py()?;
        Ok(Session::new(s, self.inner.clone()))
    }

    /// Spec 2: a session that only moves nodes, on `branch`.
    fn rearrange_session(&self, py: Python<'_>, branch: &str) -> PyResult<Session> {
        let s = block_on(py, self.inner.rearrange_session(branch)).py()?;
        Ok(Session::new(s, self.inner.clone()))
    }

    /// What changed between two snapshots, as a dict of sorted path lists.
    #[pyo3(signature = (*, from_snapshot_id, to_snapshot_id))]
    fn diff(
        &self,
        py: Python<'_>,
        from_snapshot_id: &str,
        to_snapshot_id: &str,
    ) -> PyResult<Py<PyAny>> {
        let (from, to) = (
            snapshot_id_arg(from_snapshot_id)?,
            snapshot_id_arg(to_snapshot_id)?,
        );
        let d = block_on(py, self.inner.diff(from, to)).py()?;
        let v = serde_json::to_value(&d).map_err(|e| PyValueError::new_err(e.to_string()))?;
        json_to_py(py, &v)
    }

    /// Spec 2: the repository metadata.
    fn get_metadata(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let m = block_on(py, self.inner.get_metadata()).py()?;
        json_to_py(py, &serde_json::to_value(m).unwrap_or_default())
    }

    /// Spec 2: replaces the repository metadata.
    fn set_metadata(&self, py: Python<'_>, metadata: &Bound<'_, PyAny>) -> PyResult<()> {
        let m = py_to_metadata(Some(metadata))?;
        block_on(py, self.inner.set_metadata(m)).py()
    }

    /// Spec 2: sets the given metadata keys; returns the metadata after.
    fn update_metadata(&self, py: Python<'_>, metadata: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let m = py_to_metadata(Some(metadata))?;
        let after = block_on(py, self.inner.update_metadata(m)).py()?;
        json_to_py(py, &serde_json::to_value(after).unwrap_or_default())
    }

    /// Expires snapshots older than `older_than`; returns the expired snapshot ids.
    #[pyo3(signature = (older_than, *, delete_expired_branches=false, delete_expired_tags=false))]
    fn expire_snapshots(
        &self,
        py: Python<'_>,
        older_than: DateTime<Utc>,
        delete_expired_branches: bool,
        delete_expired_tags: bool,
    ) -> PyResult<Vec<String>> {
        let opts = floe::lifecycle::ExpireOptions::default()
            .delete_expired_branches(delete_expired_branches)
            .delete_expired_tags(delete_expired_tags);
        let r = block_on(py, self.inner.expire_snapshots(older_than, opts)).py()?;
        Ok(r.expired.iter().map(ToString::to_string).collect())
    }

    /// Deletes unreachable objects older than `delete_object_older_than`; returns the
    /// summary as a dict (Icechunk's `GCSummary` fields). A cut-off within the last
    /// hour (`floe.lifecycle::GC_SAFETY_WINDOW_SECS`, seconds) raises `FloeError`
    /// unless `allow_recent_cutoff=True` (no writer is active).
    #[pyo3(signature = (delete_object_older_than, *, dry_run=false, allow_recent_cutoff=false))]
    fn garbage_collect(
        &self,
        py: Python<'_>,
        delete_object_older_than: DateTime<Utc>,
        dry_run: bool,
        allow_recent_cutoff: bool,
    ) -> PyResult<Py<PyAny>> {
        let opts = floe::lifecycle::GcOptions::default()
            .dry_run(dry_run)
            .allow_recent_cutoff(allow_recent_cutoff);
        let s = block_on(
            py,
            self.inner
                .garbage_collect(delete_object_older_than, opts, None),
        )
        .py()?;
        json_to_py(py, &serde_json::to_value(s).unwrap_or_default())
    }
}

fn snapshot_id_arg(text: &str) -> PyResult<floe::SnapshotId> {
    snapshot_id(text)
}

fn selector(
    branch: Option<String>,
    tag: Option<String>,
    snapshot_id: Option<&str>,
    as_of: Option<DateTime<Utc>>,
) -> PyResult<floe::VersionSelector> {
    use floe::VersionSelector as V;
    Ok(match (branch, tag, snapshot_id, as_of) {
        (Some(b), None, None, None) => V::Branch(b),
        (Some(b), None, None, Some(time)) => V::AsOf { branch: b, time },
        (None, Some(t), None, None) => V::Tag(t),
        (None, None, Some(id), None) => V::Snapshot(snapshot_id_arg(id)?),
        _ => {
            return Err(PyValueError::new_err(
                "give exactly one of branch (optionally with as_of), tag or snapshot_id",
            ))
        }
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Repository>()?;
    m.add_class::<SnapshotInfo>()?;
    m.add_class::<Ancestry>()?;
    Ok(())
}
