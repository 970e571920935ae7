//! `Repository` and `SnapshotInfo`, with Icechunk's Python names.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::config::RepositoryConfig;
use crate::convert::{json_to_py, py_to_metadata, selector, snapshot_id_arg, spec, Json};
use crate::errors::IntoPyResult;
use crate::runtime::{block_on, Call};
use crate::session::Session;
use crate::storage::Storage;
use crate::virtual_chunks::{open_options, Authorization};
use floe::format::config::RepositoryConfig as EngineConfig;
use floe::repository::MetadataFile;
use floe::{OpenOptions, SnapshotId};

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

impl SnapshotInfo {
    /// The fields shown by `repr` and `_repr_html_`, as (name, text) pairs.
    fn fields(&self, py: Python<'_>) -> PyResult<Vec<(&'static str, String)>> {
        let written_at = self
            .written_at
            .into_pyobject(py)?
            .repr()?
            .extract::<String>()?;
        Ok(vec![
            ("id", self.id.clone()),
            (
                "parent_id",
                self.parent_id.clone().unwrap_or_else(|| "None".to_string()),
            ),
            ("written_at", written_at),
            ("message", self.message.clone()),
            ("metadata", self.metadata.bind(py).repr()?.extract()?),
        ])
    }

    /// `floe._display.<function>("snapshots.SnapshotInfo", fields)`.
    fn display(&self, py: Python<'_>, function: &str) -> PyResult<String> {
        let display = py.import("floe._display")?;
        let header = display.call_method1("qualified", ("snapshots.SnapshotInfo",))?;
        display
            .call_method1(function, (header, self.fields(py)?))?
            .extract()
    }
}

#[pymethods]
impl SnapshotInfo {
    /// Icechunk's layout: `<icechunk.snapshots.SnapshotInfo>` and one `name: value`
    /// line per field.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "text_block")
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "text_block")
    }

    /// The fields as an HTML block (Jupyter).
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "html_block")
    }

    /// Two infos are equal when every field is.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<SnapshotInfo>() else {
            return Ok(false);
        };
        let o = other.get();
        Ok(self.id == o.id
            && self.parent_id == o.parent_id
            && self.written_at == o.written_at
            && self.message == o.message
            && self.metadata.bind(py).eq(o.metadata.bind(py))?)
    }
}

pub(crate) fn info(py: Python<'_>, s: &floe::SnapshotInfo) -> PyResult<SnapshotInfo> {
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

/// The paging state of a history, newest first, shared by the iterators [`Ancestry`]
/// and `AsyncAncestry` (`aio.rs`): commits are read in batches (16 commits, then
/// twice as many each time, up to 1,024) as iteration reaches them.
pub(crate) struct AncestryPages {
    repo: floe::Repository,
    /// Where the next batch starts; `None` once the initial snapshot was read.
    next: Option<floe::VersionSelector>,
    buffered: VecDeque<floe::SnapshotInfo>,
    /// Every id yielded: a loop across batches is an error, as within one.
    seen: HashSet<floe::SnapshotId>,
    batch: usize,
    /// The error that ended the last batch, raised once the commits before it are
    /// yielded.
    failed: Option<floe::Error>,
}

impl AncestryPages {
    /// Commits in the first batch; each next batch is twice as large, up to
    /// `MAX_BATCH`.
    const FIRST_BATCH: usize = 16;
    const MAX_BATCH: usize = 1024;

    /// The history of `repo` from `start`.
    pub(crate) fn new(repo: floe::Repository, start: floe::VersionSelector) -> Self {
        AncestryPages {
            repo,
            next: Some(start),
            buffered: VecDeque::new(),
            seen: HashSet::new(),
            batch: Self::FIRST_BATCH,
            failed: None,
        }
    }

    /// Ends the iteration: `next` returns `None` from now on.
    pub(crate) fn close(&mut self) {
        self.next = None;
        self.buffered.clear();
        self.failed = None;
    }

    /// The next commit, `None` at the end; reads the next batch when the buffer is
    /// empty. A failed batch is yielded up to the failure, then the error.
    pub(crate) async fn next(&mut self) -> Result<Option<floe::SnapshotInfo>, floe::Error> {
        use futures::StreamExt;
        loop {
            if let Some(s) = self.buffered.pop_front() {
                if !self.seen.insert(s.id) {
                    self.close();
                    return Err(floe::Error::AncestryLoop { snapshot: s.id });
                }
                return Ok(Some(s));
            }
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            let Some(start) = self.next.take() else {
                return Ok(None);
            };
            let n = self.batch;
            let mut batch = Vec::new();
            {
                let mut stream = std::pin::pin!(self.repo.ancestry_stream(start).take(n));
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(s) => batch.push(s),
                        Err(e) => {
                            self.failed = Some(e);
                            break;
                        }
                    }
                }
            }
            self.batch = (n * 2).min(Self::MAX_BATCH);
            // A full batch may have more behind it: continue from its oldest commit's
            // parent.
            if self.failed.is_none() && batch.len() == n {
                self.next = batch
                    .last()
                    .and_then(|s| s.parent_id)
                    .map(floe::VersionSelector::Snapshot);
            }
            self.buffered = batch.into();
        }
    }
}

/// The commits of a history, newest first: a Python iterator that reads them in
/// batches as iteration reaches them (see [`AncestryPages`]), so
/// `next(repo.ancestry(branch="main"))` reads only the newest few snapshots of a long
/// spec-1 history.
#[pyclass(module = "floe._floe")]
pub(crate) struct Ancestry {
    pages: AncestryPages,
}

#[pymethods]
impl Ancestry {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<SnapshotInfo>> {
        let next = block_on(py, self.pages.next()).py()?;
        next.map(|s| info(py, &s)).transpose()
    }
}

/// One feature flag as Python gets it: (id, name, explicit setting, enabled).
type FlagRow = (u16, &'static str, Option<bool>, bool);

/// A floe repository (Icechunk format).
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct Repository {
    pub(crate) inner: floe::Repository,
    /// Metadata every commit of the sessions opened from now on records
    /// (`set_default_commit_metadata`; not stored in the repository).
    defaults: std::sync::Mutex<BTreeMap<String, serde_json::Value>>,
}

impl Repository {
    /// The binding of an opened repository.
    pub(crate) fn new(inner: floe::Repository) -> Self {
        Repository {
            inner,
            defaults: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// The default commit metadata (a copy).
    pub(crate) fn defaults(&self) -> BTreeMap<String, serde_json::Value> {
        self.defaults.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

impl Repository {
    /// Spec 2.1: for a commit re-parented by expiry, the transaction logs of the
    /// pruned ancestors it spans (`pruned_ancestor_tx_logs`, oldest first), split
    /// into those still stored and those gone; `None` for any other snapshot.
    fn pruned_logs(
        &self,
        py: Python<'_>,
        id: &floe::format::SnapshotId,
    ) -> PyResult<Option<(Vec<String>, Vec<String>)>> {
        if self.inner.spec_version() != floe::format::SpecVersion::V2 {
            return Ok(None);
        }
        let repo = self.inner.clone();
        let id = *id;
        block_on(py, async move {
            let info = repo.inspect_repo_info().await?;
            let Some(pruned) = info
                .snapshots
                .get(&id)
                .and_then(|s| s.pruned_ancestor_tx_logs.clone())
                .filter(|p| !p.is_empty())
            else {
                return Ok(None);
            };
            let (mut kept, mut gone) = (Vec::new(), Vec::new());
            for p in pruned {
                match repo.fetch_transaction_log(&p).await {
                    Ok(_) => kept.push(p.to_string()),
                    Err(floe::Error::Storage(floe::storage::StorageError::NotFound { .. })) => {
                        gone.push(p.to_string())
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(Some((kept, gone)))
        })
        .py()
    }
}

/// Opens the repository in `storage` (with `config` merged over its stored one),
/// creating one of spec version `spec` with `config` when there is none (and opening
/// the one a concurrent creator wrote first), with `options` (virtual chunk
/// authorization). The one implementation behind `open_or_create` and
/// `open_or_create_async`.
pub(crate) async fn open_or_create(
    storage: Arc<dyn floe::storage::Storage>,
    spec: floe::format::SpecVersion,
    config: Option<floe::format::config::RepositoryConfig>,
    options: floe::OpenOptions,
) -> Result<floe::Repository, floe::Error> {
    let opened =
        floe::Repository::open_configured(Arc::clone(&storage), options.clone(), config.clone())
            .await;
    match opened {
        Err(floe::Error::RepositoryNotFound { .. }) => {
            match floe::Repository::create_with(
                Arc::clone(&storage),
                config.clone(),
                spec,
                options.clone(),
            )
            .await
            {
                Err(floe::Error::RepositoryExists { .. }) => {
                    floe::Repository::open_configured(storage, options, config).await
                }
                other => other,
            }
        }
        other => other,
    }
}

/// The engine calls of the methods that have an awaitable twin: each function handles
/// the method's arguments (argument errors are raised here, before any I/O) and
/// returns the call that the blocking method runs with `block_on` and its `*_async`
/// twin (`aio.rs`) hands to `future_into_py`.
impl Repository {
    /// A call that opens or creates the repository in `storage`: `config` and the
    /// virtual chunk access are checked here; `f` makes the engine call of them.
    fn opening<Fut>(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        authorize_virtual_chunk_access: Option<Authorization>,
        f: impl FnOnce(Arc<dyn floe::storage::Storage>, Option<EngineConfig>, OpenOptions) -> Fut,
    ) -> PyResult<impl Call<Repository>>
    where
        Fut: std::future::Future<Output = Result<floe::Repository, floe::Error>> + Send + 'static,
    {
        let config = config.map(|c| c.inner);
        let options = open_options(py, authorize_virtual_chunk_access, config.as_ref())?;
        let fut = f(Arc::clone(&storage.inner), config, options);
        Ok(async move { Ok(Repository::new(fut.await.py()?)) })
    }

    pub(crate) fn create_call(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        spec_version: Option<u8>,
        authorize_virtual_chunk_access: Option<Authorization>,
    ) -> PyResult<impl Call<Repository>> {
        let spec = spec(spec_version)?;
        Self::opening(
            py,
            storage,
            config,
            authorize_virtual_chunk_access,
            move |st, c, o| async move { floe::Repository::create_with(st, c, spec, o).await },
        )
    }

    pub(crate) fn open_call(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        authorize_virtual_chunk_access: Option<Authorization>,
    ) -> PyResult<impl Call<Repository>> {
        Self::opening(
            py,
            storage,
            config,
            authorize_virtual_chunk_access,
            |st, c, o| async move { floe::Repository::open_configured(st, o, c).await },
        )
    }

    pub(crate) fn open_or_create_call(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        spec_version: Option<u8>,
        authorize_virtual_chunk_access: Option<Authorization>,
    ) -> PyResult<impl Call<Repository>> {
        let spec = spec(spec_version)?;
        Self::opening(
            py,
            storage,
            config,
            authorize_virtual_chunk_access,
            move |st, c, o| open_or_create(st, spec, c, o),
        )
    }

    pub(crate) fn exists_call(storage: &Storage) -> impl Call<bool> {
        let st = Arc::clone(&storage.inner);
        async move { floe::Repository::exists(st.as_ref()).await.py() }
    }

    pub(crate) fn fetch_spec_version_call(storage: &Storage) -> impl Call<Option<u8>> {
        let st = Arc::clone(&storage.inner);
        async move {
            let v = floe::Repository::spec_version_of(st.as_ref()).await.py()?;
            Ok(v.map(|v| v as u8))
        }
    }

    /// The engine call `f` makes of this repository (a clone), with its errors
    /// mapped to Python's.
    fn engine<T, Fut>(&self, f: impl FnOnce(floe::Repository) -> Fut) -> impl Call<T>
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = Result<T, floe::Error>> + Send + 'static,
    {
        let fut = f(self.inner.clone());
        async move { fut.await.py() }
    }

    pub(crate) fn save_config_call(&self, config: Option<RepositoryConfig>) -> impl Call<()> {
        let config = config.map_or_else(|| self.inner.config(), |c| c.inner);
        self.engine(move |r| async move { r.save_config(config).await })
    }

    pub(crate) fn list_branches_call(&self) -> impl Call<Vec<String>> {
        self.engine(move |r| async move { r.list_branches().await })
    }

    pub(crate) fn lookup_branch_call(&self, branch: String) -> impl Call<String> {
        self.engine(move |r| async move { Ok(r.lookup_branch(&branch).await?.to_string()) })
    }

    pub(crate) fn create_branch_call(
        &self,
        branch: String,
        snapshot_id: &str,
    ) -> PyResult<impl Call<()>> {
        let id = snapshot_id_arg(snapshot_id)?;
        Ok(self.engine(move |r| async move { r.create_branch(&branch, id).await }))
    }

    pub(crate) fn delete_branch_call(&self, branch: String) -> impl Call<()> {
        self.engine(move |r| async move { r.delete_branch(&branch).await })
    }

    pub(crate) fn reset_branch_call(
        &self,
        branch: String,
        snapshot_id: &str,
        from_snapshot_id: Option<&str>,
    ) -> PyResult<impl Call<()>> {
        let to = snapshot_id_arg(snapshot_id)?;
        let from = from_snapshot_id.map(snapshot_id_arg).transpose()?;
        Ok(self.engine(move |r| async move { r.reset_branch(&branch, to, from).await }))
    }

    pub(crate) fn list_tags_call(&self) -> impl Call<Vec<String>> {
        self.engine(move |r| async move { r.list_tags().await })
    }

    pub(crate) fn lookup_tag_call(&self, tag: String) -> impl Call<String> {
        self.engine(move |r| async move { Ok(r.lookup_tag(&tag).await?.to_string()) })
    }

    pub(crate) fn create_tag_call(
        &self,
        tag: String,
        snapshot_id: &str,
    ) -> PyResult<impl Call<()>> {
        let id = snapshot_id_arg(snapshot_id)?;
        Ok(self.engine(move |r| async move { r.create_tag(&tag, id).await }))
    }

    pub(crate) fn delete_tag_call(&self, tag: String) -> impl Call<()> {
        self.engine(move |r| async move { r.delete_tag(&tag).await })
    }

    pub(crate) fn get_metadata_call(&self) -> impl Call<Json> {
        let repo = self.inner.clone();
        async move { Json::of(&repo.get_metadata().await.py()?) }
    }

    pub(crate) fn set_metadata_call(&self, metadata: &Bound<'_, PyAny>) -> PyResult<impl Call<()>> {
        let m = py_to_metadata(Some(metadata))?;
        Ok(self.engine(move |r| async move { r.set_metadata(m).await }))
    }

    pub(crate) fn update_metadata_call(
        &self,
        metadata: &Bound<'_, PyAny>,
    ) -> PyResult<impl Call<Json>> {
        let m = py_to_metadata(Some(metadata))?;
        let repo = self.inner.clone();
        Ok(async move { Json::of(&repo.update_metadata(m).await.py()?) })
    }

    pub(crate) fn diff_call(
        &self,
        from_snapshot_id: &str,
        to_snapshot_id: &str,
    ) -> PyResult<impl Call<Json>> {
        let (from, to) = (
            snapshot_id_arg(from_snapshot_id)?,
            snapshot_id_arg(to_snapshot_id)?,
        );
        let repo = self.inner.clone();
        Ok(async move { Json::of(&repo.diff(from, to).await.py()?) })
    }

    /// The session the engine call `f` opens on this repository (a clone), with the
    /// default commit metadata.
    fn session_call<Fut>(&self, f: impl FnOnce(floe::Repository) -> Fut) -> impl Call<Session>
    where
        Fut: std::future::Future<Output = Result<floe::Session, floe::Error>> + Send + 'static,
    {
        let (repo, defaults) = (self.inner.clone(), self.defaults());
        let fut = f(repo.clone());
        async move { Ok(Session::new(fut.await.py()?, repo).with_default_metadata(defaults)) }
    }

    pub(crate) fn writable_session_call(&self, branch: String) -> impl Call<Session> {
        self.session_call(move |r| async move { r.writable_session_lazy(&branch).await })
    }

    pub(crate) fn readonly_session_call(
        &self,
        branch: Option<String>,
        tag: Option<String>,
        snapshot_id: Option<&str>,
        as_of: Option<DateTime<Utc>>,
    ) -> PyResult<impl Call<Session>> {
        let selector = selector(branch, tag, snapshot_id, as_of)?;
        Ok(self.session_call(move |r| async move { r.readonly_session(&selector).await }))
    }

    pub(crate) fn rearrange_session_call(&self, branch: String) -> impl Call<Session> {
        self.session_call(move |r| async move { r.rearrange_session(&branch).await })
    }

    pub(crate) fn expire_snapshots_call(
        &self,
        older_than: DateTime<Utc>,
        delete_expired_branches: bool,
        delete_expired_tags: bool,
    ) -> impl Call<Vec<String>> {
        let opts = floe::lifecycle::ExpireOptions::default()
            .delete_expired_branches(delete_expired_branches)
            .delete_expired_tags(delete_expired_tags);
        let repo = self.inner.clone();
        async move {
            let r = repo.expire_snapshots(older_than, opts).await.py()?;
            Ok(r.expired.iter().map(ToString::to_string).collect())
        }
    }

    pub(crate) fn apply_retention_call(
        &self,
        policy: Option<String>,
        dry_run: bool,
    ) -> PyResult<impl Call<Json>> {
        let policy = policy.map(|p| retention_policy_arg(&p)).transpose()?;
        let repo = self.inner.clone();
        Ok(async move {
            let r = repo.apply_retention(policy.as_ref(), dry_run).await.py()?;
            Json::of(&expire_result_json(&r))
        })
    }

    pub(crate) fn squash_call(
        &self,
        branch: String,
        from_snapshot_id: &str,
        to_snapshot_id: Option<&str>,
        dry_run: bool,
    ) -> PyResult<impl Call<Json>> {
        let from = snapshot_id_arg(from_snapshot_id)?;
        let to = to_snapshot_id.map(snapshot_id_arg).transpose()?;
        let repo = self.inner.clone();
        Ok(async move {
            let r = repo.squash(&branch, from, to, dry_run).await.py()?;
            let ids = |v: &[SnapshotId]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
            Json::of(&serde_json::json!({
                "branch": r.branch, "from": r.from.to_string(), "to": r.to.to_string(),
                "squashed": ids(&r.squashed), "removed": ids(&r.removed), "dry_run": r.dry_run,
            }))
        })
    }

    pub(crate) fn compact_call(
        &self,
        branch: String,
        paths: Option<Vec<String>>,
        message: Option<String>,
        dry_run: bool,
    ) -> PyResult<impl Call<Json>> {
        let paths = paths
            .unwrap_or_default()
            .iter()
            .map(|p| crate::session::node_path(p))
            .collect::<PyResult<Vec<_>>>()?;
        let mut options = floe::repository::CompactOptions::default()
            .paths(paths)
            .dry_run(dry_run);
        if let Some(m) = message {
            options = options.message(m);
        }
        let repo = self.inner.clone();
        Ok(async move {
            let r = repo.compact(&branch, &options).await.py()?;
            Json::of(&serde_json::json!({
                "branch": r.branch, "base": r.base.to_string(),
                "snapshot": r.snapshot.map(|s| s.to_string()), "arrays": r.arrays,
                "chunks": r.chunks, "bytes": r.bytes, "packs": r.packs,
                "chunks_left": r.chunks_left, "threshold_bytes": r.threshold_bytes,
                "target_size_bytes": r.target_size_bytes, "dry_run": r.dry_run,
            }))
        })
    }

    pub(crate) fn maintain_call(
        &self,
        gc_older_than: Option<DateTime<Utc>>,
        dry_run: bool,
    ) -> impl Call<Json> {
        let repo = self.inner.clone();
        async move {
            let r = repo.maintain(gc_older_than, dry_run).await.py()?;
            Json::of(&serde_json::json!({
                "retention": r.retention.as_ref().map(expire_result_json),
                "gc": serde_json::to_value(r.gc).unwrap_or_default(),
            }))
        }
    }

    pub(crate) fn garbage_collect_call(
        &self,
        delete_object_older_than: DateTime<Utc>,
        opts: floe::lifecycle::GcOptions,
    ) -> impl Call<Json> {
        let repo = self.inner.clone();
        async move {
            let s = repo
                .garbage_collect(delete_object_older_than, opts, None)
                .await
                .py()?;
            Json::of(&s)
        }
    }
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
        authorize_virtual_chunk_access: Option<Authorization>,
    ) -> PyResult<Self> {
        let call = Self::create_call(
            py,
            storage,
            config,
            spec_version,
            authorize_virtual_chunk_access,
        )?;
        block_on(py, call)
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
        block_on(py, self.save_config_call(config))
    }

    /// Opens an existing repository; `config` (when given) is merged over the stored
    /// configuration, as Icechunk's `Repository.open(config=)`.
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, authorize_virtual_chunk_access=None))]
    fn open(
        py: Python<'_>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        authorize_virtual_chunk_access: Option<Authorization>,
    ) -> PyResult<Self> {
        let call = Self::open_call(py, storage, config, authorize_virtual_chunk_access)?;
        block_on(py, call)
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
        authorize_virtual_chunk_access: Option<Authorization>,
    ) -> PyResult<Self> {
        let call = Self::open_or_create_call(
            py,
            storage,
            config,
            spec_version,
            authorize_virtual_chunk_access,
        )?;
        block_on(py, call)
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
    /// written until `save_config`), as Icechunk's `Repository.reopen(config=,
    /// authorize_virtual_chunk_access=)`. The virtual chunk containers of `config`
    /// are the reader's, trusted as `open(config=...)` trusts them, beside those the
    /// repository was opened with; `authorize_virtual_chunk_access`, when given,
    /// replaces the authorization and credentials (kept when `None`).
    ///
    /// Errors: `InvalidInputError` for a prefix that is no URL or absolute path, or
    /// containers that cannot be read.
    #[pyo3(signature = (config=None, authorize_virtual_chunk_access=None))]
    fn reopen(
        &self,
        py: Python<'_>,
        config: Option<RepositoryConfig>,
        authorize_virtual_chunk_access: Option<crate::virtual_chunks::Authorization>,
    ) -> PyResult<Self> {
        let overrides = config.map(|c| c.inner);
        let options = crate::virtual_chunks::reopen_options(
            py,
            self.inner.open_options(),
            authorize_virtual_chunk_access,
            overrides.as_ref(),
        )?;
        let inner = self.inner.reopen_with(overrides.as_ref(), options).py()?;
        Ok(Repository {
            inner,
            defaults: std::sync::Mutex::new(self.defaults()),
        })
    }

    /// Whether a repository exists in `storage`.
    #[staticmethod]
    fn exists(py: Python<'_>, storage: &Storage) -> PyResult<bool> {
        block_on(py, Self::exists_call(storage))
    }

    /// The Icechunk spec version (1 or 2).
    #[getter]
    fn spec_version(&self) -> u8 {
        self.inner.spec_version() as u8
    }

    /// Sets the metadata every commit of sessions opened from now on records (a
    /// commit's own metadata wins key by key); `{}` clears it.
    fn set_default_commit_metadata(&self, metadata: &Bound<'_, PyAny>) -> PyResult<()> {
        let m = py_to_metadata(Some(metadata))?;
        if let Ok(mut d) = self.defaults.lock() {
            *d = m;
        }
        Ok(())
    }

    /// The default commit metadata (a copy).
    fn default_commit_metadata(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        json_to_py(
            py,
            &serde_json::to_value(self.defaults()).unwrap_or_default(),
        )
    }

    /// The commit `snapshot_id` (a `SnapshotInfo`); `SnapshotNotFoundError` when
    /// there is none.
    fn lookup_snapshot(&self, py: Python<'_>, snapshot_id: &str) -> PyResult<SnapshotInfo> {
        let id = snapshot_id_arg(snapshot_id)?;
        let repo = self.inner.clone();
        let first = block_on(py, async move {
            use futures::StreamExt;
            let mut stream =
                std::pin::pin!(repo.ancestry_stream(floe::VersionSelector::Snapshot(id)));
            stream.next().await.transpose()
        })
        .py()?;
        match first {
            Some(s) => info(py, &s),
            None => Err(crate::errors::to_py(floe::Error::SnapshotNotFound { id })),
        }
    }

    /// Spec 2: the ops log, newest first, as dicts (`type` is the snake-case update
    /// type, `updated_at` microseconds since the Unix epoch, `backup_path` the
    /// `overwritten/` copy the entry is in, or `None`).
    fn ops_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let log = block_on(py, self.inner.ops_log()).py()?;
        let v = serde_json::to_value(&log).map_err(|e| PyValueError::new_err(e.to_string()))?;
        json_to_py(py, &v)
    }

    /// Spec 2: every feature flag as (id, name, setting, enabled): `setting` is the
    /// explicit value or `None` (the default, on).
    fn feature_flags(&self, py: Python<'_>) -> PyResult<Vec<FlagRow>> {
        let flags = block_on(py, self.inner.feature_flags()).py()?;
        Ok(flags
            .into_iter()
            .map(|(f, setting, enabled)| (f.id(), f.name(), setting, enabled))
            .collect())
    }

    /// Spec 2: turns flag `name` on or off, or back to its default with `None`.
    /// `InvalidInputError` (kind `invalid-feature-flag`) for an unknown name.
    fn set_feature_flag(&self, py: Python<'_>, name: &str, setting: Option<bool>) -> PyResult<()> {
        let Some(flag) = floe::format::repo_info::FeatureFlag::from_name(name) else {
            return Err(crate::errors::invalid_input(
                crate::errors::Kind::InvalidFeatureFlag,
                format!("unknown feature flag `{name}`"),
            ));
        };
        block_on(py, self.inner.set_feature_flag(flag, setting)).py()
    }

    /// Bytes of the chunks any branch or tag reaches, as (native, virtual, inline),
    /// each chunk counted once.
    fn chunk_storage_stats(&self, py: Python<'_>) -> PyResult<(u64, u64, u64)> {
        let s = block_on(py, self.inner.chunk_storage_stats()).py()?;
        Ok((s.native_bytes, s.virtual_bytes, s.inlined_bytes))
    }

    /// The spec version of the repository in `storage` (1 or 2), `None` when there
    /// is none; reads only its refs.
    #[staticmethod]
    fn fetch_spec_version(py: Python<'_>, storage: &Storage) -> PyResult<Option<u8>> {
        block_on(py, Self::fetch_spec_version_call(storage))
    }

    /// Copies the repository in `source` to `destination` byte for byte, with its
    /// full history or only what `refs` (`NAME`, `branch:NAME`, `tag:NAME`) reach,
    /// resumable, verified at the end unless `verify` is false. Returns the report
    /// as a dict (`objects_copied`, `bytes_copied`, `objects_skipped`, `refs`,
    /// `verify`).
    #[staticmethod]
    #[pyo3(signature = (source, destination, refs, verify))]
    fn _clone(
        py: Python<'_>,
        source: &Storage,
        destination: &Storage,
        refs: Vec<String>,
        verify: bool,
    ) -> PyResult<Json> {
        let (src, dst) = (Arc::clone(&source.inner), Arc::clone(&destination.inner));
        let options = floe::lifecycle::CloneOptions::default().verify(verify);
        block_on(py, async move {
            let report = floe::lifecycle::clone_repository(src, dst, &refs, options, None)
                .await
                .py()?;
            let mut value =
                serde_json::to_value(&report).map_err(|e| PyValueError::new_err(e.to_string()))?;
            if let Some(map) = value.as_object_mut() {
                let ok = report.verify.as_ref().is_none_or(|v| v.is_ok());
                map.insert("ok".into(), serde_json::Value::Bool(ok));
            }
            Json::of(&value)
        })
    }

    /// Upgrades this spec-1 repository to spec 2 in place (Icechunk's
    /// `upgrade_icechunk_repository`); with `dry_run`, checks and changes nothing.
    /// Returns the report as a dict (counts of branches, tags, snapshots, ops-log
    /// entries, removed files). Reopen the repository afterwards.
    #[pyo3(signature = (*, dry_run))]
    fn _upgrade_to_spec2(&self, py: Python<'_>, dry_run: bool) -> PyResult<Py<PyAny>> {
        let st = Arc::clone(self.inner.storage());
        let r = block_on(py, floe::lifecycle::upgrade_to_spec2(st, dry_run)).py()?;
        json_to_py(py, &serde_json::to_value(r).unwrap_or_default())
    }

    /// The content of snapshot `snapshot_id` as a dict, in the shape of Icechunk's
    /// `inspect_snapshot`: `id`, `parent_id`, `flushed_at` (RFC 3339),
    /// `commit_message`, `metadata`, `manifests` (`id`, `size_bytes`,
    /// `num_chunk_refs`) and `nodes` (`id`, `path`, `node_type`; arrays also
    /// `shape` and `manifest_refs` with their extents).
    #[pyo3(signature = (snapshot_id, *, pretty=true))]
    fn inspect_snapshot(
        &self,
        py: Python<'_>,
        snapshot_id: &str,
        pretty: bool,
    ) -> PyResult<Py<PyAny>> {
        let _ = pretty;
        let id = snapshot_id_arg(snapshot_id)?;
        let repo = self.inner.clone();
        let (snap, header) = block_on(py, async move {
            with_header(&repo, repo.fetch_snapshot(&id), MetadataFile::Snapshot(id)).await
        })
        .py()?;
        let nodes: Vec<serde_json::Value> = snap
            .nodes
            .values()
            .map(|n| match n.array() {
                None => serde_json::json!({"id": n.id.to_string(), "path": n.path.to_string(), "node_type": "group"}),
                Some(a) => serde_json::json!({
                    "id": n.id.to_string(),
                    "path": n.path.to_string(),
                    "node_type": "array",
                    "shape": a.shape.iter().map(|d| serde_json::json!({
                        "array_length": d.array_length,
                        "num_chunks": d.num_chunks,
                    })).collect::<Vec<_>>(),
                    "manifest_refs": a.manifests.iter().map(|m| serde_json::json!({
                        "id": m.object_id.to_string(),
                        "extents": m.extents.iter().map(|r| [r.start, r.end]).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                }),
            })
            .collect();
        let v = serde_json::json!({
            "id": snap.id.to_string(),
            "parent_id": snap.parent_id.map(|p| p.to_string()),
            "spec_version": snap.spec_version.to_string(),
            "flushed_at": snap.flushed_at_time().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "commit_message": snap.message,
            "metadata": snap.metadata,
            "manifests": snap.manifest_files.iter().map(|m| serde_json::json!({
                "id": m.id.to_string(),
                "size_bytes": m.size_bytes,
                "num_chunk_refs": m.num_chunk_refs,
            })).collect::<Vec<_>>(),
            "nodes": nodes,
            "header": header,
        });
        json_to_py(py, &v)
    }

    /// Spec 2: what the repository's `repo` object holds, as a dict (Icechunk's
    /// `inspect_repo_info`): `spec_version`, `branches` and `tags` (name → snapshot
    /// id), `deleted_tags`, `snapshots` (id, parent_id, flushed_at as RFC 3339,
    /// message, metadata), `metadata` and `latest_updates` (the ops log kept in the
    /// object, newest first: `update_type` with its `type`, `updated_at`,
    /// `backup_path`). A spec-1 repository has no such object: `FloeError`
    /// (unsupported on spec 1).
    fn inspect_repo_info(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let repo = self.inner.clone();
        let (info, header) = block_on(py, async move {
            with_header(&repo, repo.inspect_repo_info(), MetadataFile::RepoInfo).await
        })
        .py()?;
        let time = |micros: u64| {
            floe::format::snapshot::micros_to_time(micros)
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        };
        let snapshots: Vec<serde_json::Value> = info
            .snapshots
            .values()
            .map(|s| {
                serde_json::json!({
                    "id": s.id.to_string(),
                    "parent_id": s.parent_id.map(|p| p.to_string()),
                    "flushed_at": time(s.flushed_at),
                    "message": s.message,
                    "metadata": s.metadata,
                })
            })
            .collect();
        let mut updates = Vec::with_capacity(info.latest_updates.len());
        for u in &info.latest_updates {
            let mut kind =
                serde_json::to_value(&u.kind).map_err(|e| PyValueError::new_err(e.to_string()))?;
            // Icechunk's names: `tag_created` -> `TagCreatedUpdate`.
            if let Some(t) = kind.get_mut("type") {
                if let Some(name) = t.as_str() {
                    let camel: String = name
                        .split('_')
                        .map(|w| {
                            let mut c = w.chars();
                            c.next()
                                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                                .unwrap_or_default()
                        })
                        .collect();
                    *t = serde_json::Value::String(format!("{camel}Update"));
                }
            }
            updates.push(serde_json::json!({
                "update_type": kind,
                "updated_at": time(u.updated_at),
                "backup_path": u.backup_path,
            }));
        }
        let v = serde_json::json!({
            "spec_version": format!("{}.0", self.inner.spec_version() as u8),
            "branches": info.branches.iter().map(|(k, v)| (k.clone(), v.to_string())).collect::<BTreeMap<_, _>>(),
            "tags": info.tags.iter().map(|(k, v)| (k.clone(), v.to_string())).collect::<BTreeMap<_, _>>(),
            "deleted_tags": info.deleted_tags.iter().collect::<Vec<_>>(),
            "snapshots": snapshots,
            "metadata": info.metadata,
            "latest_updates": updates,
            "header": header,
        });
        json_to_py(py, &v)
    }

    /// The manifest files snapshot `snapshot_id` lists, as (id, size in bytes,
    /// number of chunk refs).
    fn list_manifest_files(
        &self,
        py: Python<'_>,
        snapshot_id: &str,
    ) -> PyResult<Vec<(String, u64, u32)>> {
        let id = snapshot_id_arg(snapshot_id)?;
        let repo = self.inner.clone();
        let snap = block_on(py, async move { repo.fetch_snapshot(&id).await }).py()?;
        Ok(snap
            .manifest_files
            .iter()
            .map(|m| (m.id.to_string(), m.size_bytes, m.num_chunk_refs))
            .collect())
    }

    /// The transaction log of snapshot `snapshot_id` as a dict (Icechunk's
    /// `inspect_transaction_log`): node ids under `new_groups`, `new_arrays`,
    /// `deleted_groups`, `deleted_arrays`, `updated_groups`, `updated_arrays`;
    /// `updated_chunks` as (`node_id`, `chunks`) entries; `moved_nodes` as (`from`,
    /// `to`) entries, as Icechunk 2.3.0 shows them.
    #[pyo3(signature = (snapshot_id, *, pretty=true))]
    fn inspect_transaction_log(
        &self,
        py: Python<'_>,
        snapshot_id: &str,
        pretty: bool,
    ) -> PyResult<Py<PyAny>> {
        let _ = pretty;
        let id = snapshot_id_arg(snapshot_id)?;
        let repo = self.inner.clone();
        let (log, header) = block_on(py, async move {
            with_header(
                &repo,
                repo.fetch_transaction_log(&id),
                MetadataFile::TransactionLog(id),
            )
            .await
        })
        .py()?;
        let ids = |set: &std::collections::BTreeSet<floe::format::NodeId>| {
            set.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        let composite = self.pruned_logs(py, &id)?;
        let mut v = serde_json::json!({
            "id": log.id.to_string(),
            "new_groups": ids(&log.new_groups),
            "new_arrays": ids(&log.new_arrays),
            "deleted_groups": ids(&log.deleted_groups),
            "deleted_arrays": ids(&log.deleted_arrays),
            "updated_groups": ids(&log.updated_groups),
            "updated_arrays": ids(&log.updated_arrays),
            "updated_chunks": log.updated_chunks.iter().map(|(n, c)| serde_json::json!({
                "node_id": n.to_string(),
                "chunks": c,
            })).collect::<Vec<_>>(),
            "moved_nodes": log.moved_nodes.iter().map(|m| serde_json::json!({
                "from": m.from.to_string(),
                "to": m.to.to_string(),
            })).collect::<Vec<_>>(),
            "header": header,
        });
        if let (Some((merged, missing)), Some(obj)) = (composite, v.as_object_mut()) {
            obj.insert(
                "synthetic_composite".into(),
                serde_json::json!({
                    "note": "this snapshot's ancestry was collapsed by expiration: its \
                             commit spans the transaction logs of the pruned ancestors \
                             listed here (the lists above are its own log)",
                    "merged_pruned_ancestor_tx_logs": merged,
                    "missing_tx_logs": missing,
                }),
            );
        }
        json_to_py(py, &v)
    }

    /// Manifest `manifest_id` summarised as a dict (Icechunk's `inspect_manifest`):
    /// `id`, `num_arrays`, `total_chunk_refs` and its split `total_inline`,
    /// `total_native`, `total_virtual`, and per array (`node_id`) the same counts.
    #[pyo3(signature = (manifest_id, *, pretty=true))]
    fn inspect_manifest(
        &self,
        py: Python<'_>,
        manifest_id: &str,
        pretty: bool,
    ) -> PyResult<Py<PyAny>> {
        use floe::format::manifest::ChunkPayload as P;
        let _ = pretty;
        let id: floe::format::ManifestId = manifest_id.parse().map_err(|e| {
            crate::errors::invalid_input(
                crate::errors::Kind::InvalidSnapshotId,
                format!("invalid manifest id: `{manifest_id}` ({e})"),
            )
        })?;
        let repo = self.inner.clone();
        let (m, header) = block_on(py, async move {
            with_header(&repo, repo.fetch_manifest(&id), MetadataFile::Manifest(id)).await
        })
        .py()?;
        let mut totals = [0u64; 3];
        let arrays: Vec<serde_json::Value> = m
            .arrays
            .iter()
            .map(|(node, refs)| {
                let mut counts = [0u64; 3];
                for p in refs.values() {
                    counts[match p {
                        P::Inline(_) => 0,
                        P::Native(_) => 1,
                        P::Virtual(_) => 2,
                    }] += 1;
                }
                for (t, c) in totals.iter_mut().zip(counts) {
                    *t += c;
                }
                serde_json::json!({
                    "node_id": node.to_string(),
                    "num_chunk_refs": refs.len(),
                    "num_inline": counts[0],
                    "num_native": counts[1],
                    "num_virtual": counts[2],
                })
            })
            .collect();
        let v = serde_json::json!({
            "id": m.id.to_string(),
            "num_arrays": m.arrays.len(),
            "total_chunk_refs": m.num_chunk_refs(),
            "total_inline": totals[0],
            "total_native": totals[1],
            "total_virtual": totals[2],
            "arrays": arrays,
            "header": header,
        });
        json_to_py(py, &v)
    }

    /// Spec 2: the repository status as (availability, set_at in microseconds since
    /// the Unix epoch, reason); availability is `online`, `read_only` or `offline`.
    fn get_status(&self, py: Python<'_>) -> PyResult<(&'static str, u64, Option<String>)> {
        use floe::format::repo_info::Availability as A;
        let s = block_on(py, self.inner.status()).py()?;
        let availability = match s.availability {
            A::Online => "online",
            A::ReadOnly => "read_only",
            _ => "offline",
        };
        Ok((availability, s.set_at, s.reason))
    }

    /// Spec 2: sets the repository status (`online` or `read_only`, with an
    /// optional reason); recorded in the ops log. A read-only repository refuses
    /// writable sessions, commits and ref changes until it is online again.
    #[pyo3(signature = (availability, reason=None))]
    fn set_status(
        &self,
        py: Python<'_>,
        availability: &str,
        reason: Option<String>,
    ) -> PyResult<()> {
        use floe::format::repo_info::Availability as A;
        let availability = match availability {
            "online" => A::Online,
            "read_only" => A::ReadOnly,
            other => {
                return Err(crate::errors::invalid_input(
                    crate::errors::Kind::Unknown,
                    format!("unknown repository availability `{other}` (online, read_only)"),
                ))
            }
        };
        block_on(py, self.inner.set_status(availability, reason)).py()
    }

    /// Branch names.
    fn list_branches(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        block_on(py, self.list_branches_call())
    }

    /// The snapshot id branch `branch` points to.
    fn lookup_branch(&self, py: Python<'_>, branch: String) -> PyResult<String> {
        block_on(py, self.lookup_branch_call(branch))
    }

    /// Creates `branch` at `snapshot_id`.
    fn create_branch(&self, py: Python<'_>, branch: String, snapshot_id: &str) -> PyResult<()> {
        block_on(py, self.create_branch_call(branch, snapshot_id)?)
    }

    /// Deletes `branch` (never `main`).
    fn delete_branch(&self, py: Python<'_>, branch: String) -> PyResult<()> {
        block_on(py, self.delete_branch_call(branch))
    }

    /// Moves `branch` to `snapshot_id`, if it is still at `from_snapshot_id` when given.
    #[pyo3(signature = (branch, snapshot_id, *, from_snapshot_id=None))]
    fn reset_branch(
        &self,
        py: Python<'_>,
        branch: String,
        snapshot_id: &str,
        from_snapshot_id: Option<&str>,
    ) -> PyResult<()> {
        block_on(
            py,
            self.reset_branch_call(branch, snapshot_id, from_snapshot_id)?,
        )
    }

    /// Tag names.
    fn list_tags(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        block_on(py, self.list_tags_call())
    }

    /// The snapshot id tag `tag` points to.
    fn lookup_tag(&self, py: Python<'_>, tag: String) -> PyResult<String> {
        block_on(py, self.lookup_tag_call(tag))
    }

    /// Creates `tag` at `snapshot_id`.
    fn create_tag(&self, py: Python<'_>, tag: String, snapshot_id: &str) -> PyResult<()> {
        block_on(py, self.create_tag_call(tag, snapshot_id)?)
    }

    /// Deletes `tag`; its name can never be used again.
    fn delete_tag(&self, py: Python<'_>, tag: String) -> PyResult<()> {
        block_on(py, self.delete_tag_call(tag))
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
        let start = selector(branch, tag, snapshot_id, None)?;
        Ok(Ancestry {
            pages: AncestryPages::new(self.inner.clone(), start),
        })
    }

    /// A session that writes to `branch`.
    fn writable_session(&self, py: Python<'_>, branch: String) -> PyResult<Session> {
        block_on(py, self.writable_session_call(branch))
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
        block_on(
            py,
            self.readonly_session_call(branch, tag, snapshot_id, as_of)?,
        )
    }

    /// Spec 2: a session that only moves nodes, on `branch`.
    fn rearrange_session(&self, py: Python<'_>, branch: String) -> PyResult<Session> {
        block_on(py, self.rearrange_session_call(branch))
    }

    /// What changed between two snapshots, as a dict of sorted path lists.
    #[pyo3(signature = (*, from_snapshot_id, to_snapshot_id))]
    fn diff(&self, py: Python<'_>, from_snapshot_id: &str, to_snapshot_id: &str) -> PyResult<Json> {
        block_on(py, self.diff_call(from_snapshot_id, to_snapshot_id)?)
    }

    /// Spec 2: the repository metadata.
    fn get_metadata(&self, py: Python<'_>) -> PyResult<Json> {
        block_on(py, self.get_metadata_call())
    }

    /// Spec 2: replaces the repository metadata.
    fn set_metadata(&self, py: Python<'_>, metadata: &Bound<'_, PyAny>) -> PyResult<()> {
        block_on(py, self.set_metadata_call(metadata)?)
    }

    /// Spec 2: sets the given metadata keys; returns the metadata after.
    fn update_metadata(&self, py: Python<'_>, metadata: &Bound<'_, PyAny>) -> PyResult<Json> {
        block_on(py, self.update_metadata_call(metadata)?)
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
        let call =
            self.expire_snapshots_call(older_than, delete_expired_branches, delete_expired_tags);
        block_on(py, call)
    }

    /// Spec 2: the stored retention policy as a JSON text (`None` when none).
    fn retention_policy(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let repo = self.inner.clone();
        block_on(py, async move {
            let p = repo.retention_policy().await.py()?;
            Ok(p.map(|p| serde_json::to_string(&p).unwrap_or_default()))
        })
    }

    /// Spec 2: stores the retention policy given as a JSON text (`None` removes it).
    #[pyo3(signature = (policy))]
    fn set_retention_policy(&self, py: Python<'_>, policy: Option<String>) -> PyResult<()> {
        let policy = policy.map(|p| retention_policy_arg(&p)).transpose()?;
        let repo = self.inner.clone();
        block_on(py, async move {
            repo.set_retention_policy(policy.as_ref()).await.py()
        })
    }

    /// Spec 2: applies a retention policy (JSON text, or the stored one when `None`);
    /// returns `{"expired": [...], "edited": [...]}`.
    #[pyo3(signature = (policy=None, *, dry_run=false))]
    fn apply_retention(
        &self,
        py: Python<'_>,
        policy: Option<String>,
        dry_run: bool,
    ) -> PyResult<Json> {
        block_on(py, self.apply_retention_call(policy, dry_run)?)
    }

    /// Squashes the commits of `branch` after `from_snapshot_id` up to
    /// `to_snapshot_id` (the tip when `None`) into the last one.
    #[pyo3(signature = (branch, from_snapshot_id, to_snapshot_id=None, *, dry_run=false))]
    fn squash(
        &self,
        py: Python<'_>,
        branch: String,
        from_snapshot_id: &str,
        to_snapshot_id: Option<&str>,
        dry_run: bool,
    ) -> PyResult<Json> {
        block_on(
            py,
            self.squash_call(branch, from_snapshot_id, to_snapshot_id, dry_run)?,
        )
    }

    /// Rewrites the small native chunks of `branch`'s arrays (or of `paths`) into
    /// packs in one commit; returns the summary (`snapshot` is `None` when nothing
    /// was written).
    #[pyo3(signature = (branch, paths=None, message=None, *, dry_run=false))]
    fn compact(
        &self,
        py: Python<'_>,
        branch: String,
        paths: Option<Vec<String>>,
        message: Option<String>,
        dry_run: bool,
    ) -> PyResult<Json> {
        block_on(py, self.compact_call(branch, paths, message, dry_run)?)
    }

    /// The stored retention policy, then garbage collection; returns
    /// `{"retention": {...} or None, "gc": {...}}`.
    #[pyo3(signature = (*, gc_older_than=None, dry_run=false))]
    fn maintain(
        &self,
        py: Python<'_>,
        gc_older_than: Option<DateTime<Utc>>,
        dry_run: bool,
    ) -> PyResult<Json> {
        block_on(py, self.maintain_call(gc_older_than, dry_run))
    }

    /// Deletes unreachable objects older than `delete_object_older_than`; returns the
    /// summary as a dict (Icechunk's `GCSummary` fields). A cut-off within the last
    /// hour (`floe.lifecycle::GC_SAFETY_WINDOW_SECS`, seconds) raises `FloeError`
    /// unless `allow_recent_cutoff=True` (no writer is active). `full=True` fetches
    /// every retained manifest instead of using floe's collection state. The
    /// concurrency arguments and `max_consecutive_delete_failures` are
    /// [`floe::lifecycle::GcOptions`]'s (`None`: its defaults).
    #[pyo3(signature = (delete_object_older_than, *, dry_run=false, allow_recent_cutoff=false, full=false, manifest_concurrency=None, delete_concurrency=None, max_consecutive_delete_failures=None, list_concurrency=None))]
    #[allow(clippy::too_many_arguments)] // Icechunk's keyword arguments
    fn garbage_collect(
        &self,
        py: Python<'_>,
        delete_object_older_than: DateTime<Utc>,
        dry_run: bool,
        allow_recent_cutoff: bool,
        full: bool,
        manifest_concurrency: Option<usize>,
        delete_concurrency: Option<usize>,
        max_consecutive_delete_failures: Option<u32>,
        list_concurrency: Option<usize>,
    ) -> PyResult<Json> {
        let opts = gc_options(
            dry_run,
            allow_recent_cutoff,
            full,
            [manifest_concurrency, delete_concurrency, list_concurrency],
            max_consecutive_delete_failures,
        );
        block_on(
            py,
            self.garbage_collect_call(delete_object_older_than, opts),
        )
    }

    /// Checks the repository's integrity (`floe verify`): every ref resolves, every
    /// snapshot, transaction log and manifest the refs reach decodes, every native
    /// chunk object exists and holds the bytes its refs ask for (no chunk read unless
    /// `read_chunks`), and with `check_virtual` every virtual chunk's object exists
    /// and matches its checksum (under the repository's authorization). Returns the
    /// report as a dict: the counts, `problems` (dicts with `kind`, `message`, `ref`,
    /// `snapshot`, `array`, `chunk`, `key`), `problems_omitted` and `ok`.
    #[pyo3(signature = (*, read_chunks=false, check_virtual=false))]
    fn verify(&self, py: Python<'_>, read_chunks: bool, check_virtual: bool) -> PyResult<Json> {
        let opts = floe::lifecycle::VerifyOptions::default().read_chunks(read_chunks);
        let repo = self.inner.clone();
        block_on(py, async move {
            let report = repo.verify(check_virtual, opts, None).await.py()?;
            let mut value =
                serde_json::to_value(&report).map_err(|e| PyValueError::new_err(e.to_string()))?;
            if let Some(map) = value.as_object_mut() {
                map.insert("ok".into(), serde_json::Value::Bool(report.is_ok()));
            }
            Json::of(&value)
        })
    }
}

/// A retention policy from its JSON text (as `RetentionPolicy` serializes).
fn retention_policy_arg(text: &str) -> PyResult<floe::lifecycle::RetentionPolicy> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("retention policy: {e}")))?;
    floe::lifecycle::RetentionPolicy::from_json(&value).py()
}

/// An expiry or retention result as `{"expired": [...], "edited": [...]}`.
fn expire_result_json(r: &floe::lifecycle::ExpireResult) -> serde_json::Value {
    let ids = |s: &std::collections::BTreeSet<SnapshotId>| {
        s.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    serde_json::json!({"expired": ids(&r.expired), "edited": ids(&r.edited)})
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Repository>()?;
    m.add_class::<SnapshotInfo>()?;
    m.add_class::<Ancestry>()?;
    Ok(())
}

/// [`floe::lifecycle::GcOptions`] from the Python arguments of `garbage_collect`:
/// `concurrency` is (manifest fetches, delete batches, listings) in flight, each
/// `None` for the default.
pub(crate) fn gc_options(
    dry_run: bool,
    allow_recent_cutoff: bool,
    full: bool,
    concurrency: [Option<usize>; 3],
    max_consecutive_delete_failures: Option<u32>,
) -> floe::lifecycle::GcOptions {
    let [manifests, deletes, listings] = concurrency;
    let mut opts = floe::lifecycle::GcOptions::default()
        .dry_run(dry_run)
        .allow_recent_cutoff(allow_recent_cutoff)
        .incremental(!full);
    if let Some(n) = manifests {
        opts = opts.manifest_concurrency(n);
    }
    if let Some(n) = deletes {
        opts = opts.delete_concurrency(n);
    }
    if let Some(n) = listings {
        opts = opts.list_concurrency(n);
    }
    if let Some(n) = max_consecutive_delete_failures {
        opts = opts.max_consecutive_delete_failures(n);
    }
    opts
}

/// What `fetch` returns with the binary header of `file` (Icechunk's `header` in
/// `inspect_*` results), the header's ranged read made beside the fetch.
///
/// # Errors
/// The fetch's first (the error the `inspect_*` call gives without the header),
/// then [`floe::Repository::file_header`]'s.
async fn with_header<T>(
    repo: &floe::Repository,
    fetch: impl std::future::Future<Output = floe::Result<T>>,
    file: MetadataFile,
) -> floe::Result<(T, floe::repository::FileHeader)> {
    let (object, header) = futures::join!(fetch, repo.file_header(file));
    Ok((object?, header?))
}
