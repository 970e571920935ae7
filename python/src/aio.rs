//! Icechunk's `*_async` API as native coroutines: every method here returns a Python
//! awaitable (`pyo3_async_runtimes::tokio::future_into_py`) whose work runs on floe's
//! shared tokio runtime, so awaiting it never blocks the asyncio event loop (the
//! blocking twins in `repository.rs` / `session.rs` run the same engine calls with
//! [`crate::runtime::block_on`]). Cancelling the awaitable (`asyncio.Task.cancel`) drops the
//! engine future.
//!
//! The methods are added to the native `Repository` and `Session` classes with a
//! second `#[pymethods]` block (pyo3's `multiple-pymethods`), so the blocking API and
//! its twins stay in separate files. Errors are raised when the awaitable is awaited,
//! with the classes of the blocking twins (`FloeError`, `ConflictError`,
//! `ReadOnlyError`, `SessionStateError`, ...); argument errors (`ValueError` for a bad
//! snapshot id or spec version, `SessionStateError` on a session that committed) are
//! raised by the call itself, before any awaitable exists, as the blocking twins raise
//! them before any I/O.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::exceptions::{PyStopAsyncIteration, PyValueError};
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;

use crate::config::RepositoryConfig;
use crate::convert::{json_to_py, py_to_metadata, selector, snapshot_id_arg, spec};
use crate::errors::{to_py, IntoPyResult};
use crate::repository::{info, open_or_create, Repository, SnapshotInfo};
use crate::session::{solver, Session};
use crate::storage::Storage;

/// A JSON-serializable engine value as a Python object (taking the GIL inside a
/// future).
fn to_python<T: serde::Serialize>(value: &T) -> PyResult<Py<PyAny>> {
    let v = serde_json::to_value(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Python::attach(|py| json_to_py(py, &v))
}

#[pymethods]
impl Repository {
    /// Awaitable of `Repository.create`: creates a repository of spec version
    /// `spec_version` (1 or 2; 2 when `None`) with `config` (defaults when `None`).
    /// Raises `ValueError` for another spec version (at the call), `FloeError` when a
    /// repository exists there (when awaited).
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, spec_version=None, authorize_virtual_chunk_access=None))]
    fn create_async<'py>(
        py: Python<'py>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        spec_version: Option<u8>,
        authorize_virtual_chunk_access: Option<crate::virtual_chunks::Authorization>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spec = spec(spec_version)?;
        let st = Arc::clone(&storage.inner);
        let config = config.map(|c| c.inner);
        let options = crate::virtual_chunks::open_options(
            py,
            authorize_virtual_chunk_access,
            config.as_ref(),
        )?;
        future_into_py(py, async move {
            let inner = floe::Repository::create_with(st, config, spec, options)
                .await
                .py()?;
            Ok(Repository::new(inner))
        })
    }

    /// Awaitable of `Repository.open` (with `config` merged over the stored
    /// configuration); raises `FloeError` when there is no repository in `storage`.
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, authorize_virtual_chunk_access=None))]
    fn open_async<'py>(
        py: Python<'py>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        authorize_virtual_chunk_access: Option<crate::virtual_chunks::Authorization>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let st = Arc::clone(&storage.inner);
        let overrides = config.map(|c| c.inner);
        let options = crate::virtual_chunks::open_options(
            py,
            authorize_virtual_chunk_access,
            overrides.as_ref(),
        )?;
        future_into_py(py, async move {
            let inner = floe::Repository::open_configured(st, options, overrides)
                .await
                .py()?;
            Ok(Repository::new(inner))
        })
    }

    /// Awaitable of `Repository.open_or_create`: opens the repository in `storage`
    /// (with `config` merged over its stored one), creating one of spec version
    /// `create_version` (2 when `None`) when there is none. Raises `ValueError` for
    /// another spec version (at the call).
    #[staticmethod]
    #[pyo3(signature = (storage, config=None, create_version=None, authorize_virtual_chunk_access=None))]
    fn open_or_create_async<'py>(
        py: Python<'py>,
        storage: &Storage,
        config: Option<RepositoryConfig>,
        create_version: Option<u8>,
        authorize_virtual_chunk_access: Option<crate::virtual_chunks::Authorization>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spec = spec(create_version)?;
        let st = Arc::clone(&storage.inner);
        let config = config.map(|c| c.inner);
        let options = crate::virtual_chunks::open_options(
            py,
            authorize_virtual_chunk_access,
            config.as_ref(),
        )?;
        future_into_py(py, async move {
            let inner = open_or_create(st, spec, config, options).await.py()?;
            Ok(Repository::new(inner))
        })
    }

    /// Awaitable of `Repository.exists`: whether a repository (either spec) is in
    /// `storage`.
    #[staticmethod]
    fn exists_async<'py>(py: Python<'py>, storage: &Storage) -> PyResult<Bound<'py, PyAny>> {
        let st = Arc::clone(&storage.inner);
        future_into_py(py, async move {
            floe::Repository::exists(st.as_ref()).await.py()
        })
    }

    /// Awaitable of `fetch_spec_version`.
    #[staticmethod]
    fn fetch_spec_version_async<'py>(
        py: Python<'py>,
        storage: &Storage,
    ) -> PyResult<Bound<'py, PyAny>> {
        let st = Arc::clone(&storage.inner);
        future_into_py(py, async move {
            let v = floe::Repository::spec_version_of(st.as_ref()).await.py()?;
            Ok(v.map(|v| v as u8))
        })
    }

    /// Awaitable of `save_config`: stores `config` (the current configuration when
    /// `None`); raises `FloeError` when another writer changed it since it was read.
    #[pyo3(signature = (config=None))]
    fn save_config_async<'py>(
        &self,
        py: Python<'py>,
        config: Option<RepositoryConfig>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let config = config.map_or_else(|| self.inner.config(), |c| c.inner);
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.save_config(config).await.py() })
    }

    /// Awaitable of `list_branches`: the branch names (a list; the Python wrapper
    /// makes it a set, as Icechunk).
    fn list_branches_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.list_branches().await.py() })
    }

    /// Awaitable of `lookup_branch`: the snapshot id `branch` points to.
    fn lookup_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move {
            Ok(repo.lookup_branch(&branch).await.py()?.to_string())
        })
    }

    /// Awaitable of `create_branch`.
    fn create_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
        snapshot_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = snapshot_id_arg(snapshot_id)?;
        let repo = self.inner.clone();
        future_into_py(
            py,
            async move { repo.create_branch(&branch, id).await.py() },
        )
    }

    /// Awaitable of `delete_branch`.
    fn delete_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.delete_branch(&branch).await.py() })
    }

    /// Awaitable of `reset_branch`: moves `branch` to `snapshot_id`, only if it is
    /// still at `from_snapshot_id` when that is given (the error of `reset_branch`
    /// otherwise).
    #[pyo3(signature = (branch, snapshot_id, *, from_snapshot_id=None))]
    fn reset_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
        snapshot_id: &str,
        from_snapshot_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let to = snapshot_id_arg(snapshot_id)?;
        let from = from_snapshot_id.map(snapshot_id_arg).transpose()?;
        let repo = self.inner.clone();
        future_into_py(py, async move {
            repo.reset_branch(&branch, to, from).await.py()
        })
    }

    /// Awaitable of `list_tags` (a list; the wrapper makes it a set).
    fn list_tags_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.list_tags().await.py() })
    }

    /// Awaitable of `lookup_tag`.
    fn lookup_tag_async<'py>(&self, py: Python<'py>, tag: String) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move {
            Ok(repo.lookup_tag(&tag).await.py()?.to_string())
        })
    }

    /// Awaitable of `create_tag`.
    fn create_tag_async<'py>(
        &self,
        py: Python<'py>,
        tag: String,
        snapshot_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = snapshot_id_arg(snapshot_id)?;
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.create_tag(&tag, id).await.py() })
    }

    /// Awaitable of `delete_tag`.
    fn delete_tag_async<'py>(&self, py: Python<'py>, tag: String) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.delete_tag(&tag).await.py() })
    }

    /// Awaitable of `get_metadata` (spec 2).
    fn get_metadata_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let repo = self.inner.clone();
        future_into_py(py, async move {
            let m = repo.get_metadata().await.py()?;
            to_python(&m)
        })
    }

    /// Awaitable of `set_metadata` (spec 2).
    fn set_metadata_async<'py>(
        &self,
        py: Python<'py>,
        metadata: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = py_to_metadata(Some(metadata))?;
        let repo = self.inner.clone();
        future_into_py(py, async move { repo.set_metadata(m).await.py() })
    }

    /// Awaitable of `update_metadata` (spec 2): the metadata after the update.
    fn update_metadata_async<'py>(
        &self,
        py: Python<'py>,
        metadata: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = py_to_metadata(Some(metadata))?;
        let repo = self.inner.clone();
        future_into_py(py, async move {
            let after = repo.update_metadata(m).await.py()?;
            to_python(&after)
        })
    }

    /// Awaitable of the native `diff`: what changed between two snapshots, as a dict
    /// of sorted path lists.
    #[pyo3(signature = (*, from_snapshot_id, to_snapshot_id))]
    fn diff_async<'py>(
        &self,
        py: Python<'py>,
        from_snapshot_id: &str,
        to_snapshot_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (from, to) = (
            snapshot_id_arg(from_snapshot_id)?,
            snapshot_id_arg(to_snapshot_id)?,
        );
        let repo = self.inner.clone();
        future_into_py(py, async move {
            let d = repo.diff(from, to).await.py()?;
            to_python(&d)
        })
    }

    /// Awaitable of `writable_session`.
    fn writable_session_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (repo, defaults) = (self.inner.clone(), self.defaults());
        future_into_py(py, async move {
            let s = repo.writable_session_lazy(&branch).await.py()?;
            Ok(Session::new(s, repo).with_default_metadata(defaults))
        })
    }

    /// Awaitable of `readonly_session`: at a branch (optionally as of a time), a tag
    /// or a snapshot id; exactly one (`ValueError` at the call otherwise).
    #[pyo3(signature = (branch=None, *, tag=None, snapshot_id=None, as_of=None))]
    fn readonly_session_async<'py>(
        &self,
        py: Python<'py>,
        branch: Option<String>,
        tag: Option<String>,
        snapshot_id: Option<&str>,
        as_of: Option<DateTime<Utc>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let selector = selector(branch, tag, snapshot_id, as_of)?;
        let (repo, defaults) = (self.inner.clone(), self.defaults());
        future_into_py(py, async move {
            let s = repo.readonly_session(&selector).await.py()?;
            Ok(Session::new(s, repo).with_default_metadata(defaults))
        })
    }

    /// Awaitable of `rearrange_session` (spec 2).
    fn rearrange_session_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (repo, defaults) = (self.inner.clone(), self.defaults());
        future_into_py(py, async move {
            let s = repo.rearrange_session(&branch).await.py()?;
            Ok(Session::new(s, repo).with_default_metadata(defaults))
        })
    }

    /// Awaitable of `expire_snapshots`: the expired snapshot ids (a list; the wrapper
    /// makes it a set).
    #[pyo3(signature = (older_than, *, delete_expired_branches=false, delete_expired_tags=false))]
    fn expire_snapshots_async<'py>(
        &self,
        py: Python<'py>,
        older_than: DateTime<Utc>,
        delete_expired_branches: bool,
        delete_expired_tags: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = floe::lifecycle::ExpireOptions::default()
            .delete_expired_branches(delete_expired_branches)
            .delete_expired_tags(delete_expired_tags);
        let repo = self.inner.clone();
        future_into_py(py, async move {
            let r = repo.expire_snapshots(older_than, opts).await.py()?;
            Ok(r.expired
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>())
        })
    }

    /// Awaitable of `garbage_collect`: the summary as a dict (Icechunk's `GCSummary`
    /// fields). A cut-off within the last hour raises `FloeError` unless
    /// `allow_recent_cutoff=True`.
    #[pyo3(signature = (delete_object_older_than, *, dry_run=false, allow_recent_cutoff=false))]
    fn garbage_collect_async<'py>(
        &self,
        py: Python<'py>,
        delete_object_older_than: DateTime<Utc>,
        dry_run: bool,
        allow_recent_cutoff: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = floe::lifecycle::GcOptions::default()
            .dry_run(dry_run)
            .allow_recent_cutoff(allow_recent_cutoff);
        let repo = self.inner.clone();
        future_into_py(py, async move {
            let s = repo
                .garbage_collect(delete_object_older_than, opts, None)
                .await
                .py()?;
            to_python(&s)
        })
    }

    /// The history of a branch, tag or snapshot, newest first, as an asynchronous
    /// iterator (`async for`): commits are read in batches as iteration reaches them
    /// (see [`AsyncAncestry`]). Raises `ValueError` (at the call) unless exactly one
    /// of `branch`, `tag`, `snapshot_id` is given.
    #[pyo3(signature = (*, branch=None, tag=None, snapshot_id=None))]
    fn async_ancestry(
        &self,
        branch: Option<String>,
        tag: Option<String>,
        snapshot_id: Option<&str>,
    ) -> PyResult<AsyncAncestry> {
        Ok(AsyncAncestry {
            state: Arc::new(tokio::sync::Mutex::new(AncestryState {
                repo: self.inner.clone(),
                next: Some(selector(branch, tag, snapshot_id, None)?),
                buffered: VecDeque::new(),
                seen: HashSet::new(),
                batch: AncestryState::FIRST_BATCH,
                failed: None,
            })),
        })
    }
}

/// The paging state of an [`AsyncAncestry`].
struct AncestryState {
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

impl AncestryState {
    /// Commits in the first batch; each next batch is twice as large, up to
    /// `MAX_BATCH`.
    const FIRST_BATCH: usize = 16;
    const MAX_BATCH: usize = 1024;

    /// The next commit, `None` at the end; reads the next batch when the buffer is
    /// empty.
    async fn next(&mut self) -> Result<Option<floe::SnapshotInfo>, floe::Error> {
        use futures::StreamExt;
        loop {
            if let Some(s) = self.buffered.pop_front() {
                if !self.seen.insert(s.id) {
                    self.next = None;
                    self.buffered.clear();
                    self.failed = None;
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

/// An asynchronous iterator over the commits of a history, newest first (Icechunk's
/// `Repository.async_ancestry`): `__anext__` returns an awaitable that reads the next
/// batch on floe's runtime when the buffered commits run out (16 commits, then twice
/// as many each time, up to 1,024). Errors (an unknown branch, tag or snapshot, a
/// looping history, storage errors) are raised by the `__anext__` that reaches them.
#[pyclass(module = "floe._floe")]
pub(crate) struct AsyncAncestry {
    state: Arc<tokio::sync::Mutex<AncestryState>>,
}

#[pymethods]
impl AsyncAncestry {
    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = Arc::clone(&self.state);
        future_into_py(py, async move {
            let next = state.lock().await.next().await.py()?;
            match next {
                Some(s) => Python::attach(|py| info(py, &s)),
                None => Err::<SnapshotInfo, _>(PyStopAsyncIteration::new_err(())),
            }
        })
    }

    /// Stops the iteration: later `__anext__` calls end it (Icechunk's
    /// `AsyncCloseableIterator.aclose`).
    fn aclose<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = Arc::clone(&self.state);
        future_into_py(py, async move {
            let mut s = state.lock().await;
            s.next = None;
            s.buffered.clear();
            s.failed = None;
            Ok(())
        })
    }
}

#[pymethods]
impl Session {
    /// Awaitable of `commit`: commits the changes and returns the new snapshot id;
    /// the session is read-only afterwards. Rebases over concurrent commits with
    /// `rebase_with` (default: any conflict raises `ConflictError`), at most
    /// `rebase_tries` times. `SessionStateError` (at the call) on a fork, a read-only
    /// session or a session that committed; when awaited, `SessionStateError` for no
    /// changes (unless `allow_empty`) and `ConflictError` for conflicts the solver
    /// leaves.
    #[pyo3(signature = (message, metadata=None, *, allow_empty=false, rebase_with=None, rebase_tries=100))]
    fn commit_async<'py>(
        &self,
        py: Python<'py>,
        message: String,
        metadata: Option<&Bound<'py, PyAny>>,
        allow_empty: bool,
        rebase_with: Option<&Bound<'py, PyAny>>,
        rebase_tries: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (metadata, opts) =
            self.prepare_commit(py, metadata, allow_empty, rebase_with, rebase_tries)?;
        let (session, committed) = (self.inner.clone(), Arc::clone(&self.committed));
        future_into_py(py, async move {
            let id = session.commit_with(&message, metadata, opts).await.py()?;
            committed.store(true, Ordering::Release);
            Ok(id.to_string())
        })
    }

    /// Awaitable of `amend`: replaces the branch tip with a snapshot holding its
    /// content plus these changes; returns its id. Raises at the call as `amend`
    /// does (spec 1, no changes without `allow_empty`); `ConflictError` (when
    /// awaited) when the branch moved meanwhile.
    #[pyo3(signature = (message, metadata=None, *, allow_empty=false))]
    fn amend_async<'py>(
        &self,
        py: Python<'py>,
        message: String,
        metadata: Option<&Bound<'py, PyAny>>,
        allow_empty: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let metadata = self.prepare_amend(py, metadata, allow_empty)?;
        let (session, committed) = (self.inner.clone(), Arc::clone(&self.committed));
        future_into_py(py, async move {
            let id = session.amend(&message, metadata).await.py()?;
            committed.store(true, Ordering::Release);
            Ok(id.to_string())
        })
    }

    /// Awaitable of `rebase`: moves the session's base to its branch tip, keeping
    /// its changes as `solver` resolves their conflicts (default: any conflict raises
    /// `ConflictError`).
    #[pyo3(signature = (solver=None))]
    fn rebase_async<'py>(
        &self,
        py: Python<'py>,
        solver: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_not_committed(py, "rebase")?;
        let solver = self::solver(solver)?;
        let session = self.inner.clone();
        future_into_py(py, async move {
            session.rebase_with(solver.as_ref()).await.py()
        })
    }

    /// Awaitable of `merge`: merges the changes of `forks` into this session, all or
    /// nothing; `ConflictError` (when awaited) when two of them, or one of them and
    /// this session since it forked, changed the same chunk or node.
    #[pyo3(signature = (*forks))]
    fn merge_async<'py>(
        &self,
        py: Python<'py>,
        forks: Vec<PyRef<'py, Session>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_not_committed(py, "merge")?;
        let forks: Vec<floe::Session> = forks.iter().map(|f| f.inner.clone()).collect();
        let session = self.inner.clone();
        future_into_py(py, async move { session.merge(forks).await.py() })
    }

    /// Awaitable of the coordinates (lists of chunk indices, sorted) of every chunk
    /// of the array at `array_path` that has a ref, committed or not (Icechunk's
    /// `Session.chunk_coordinates` reads them; it yields them as tuples). Invalid
    /// paths raise at the call; `FloeError` (when awaited) for a path that is no
    /// array.
    fn _chunk_coordinates_async<'py>(
        &self,
        py: Python<'py>,
        array_path: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let path = floe::NodePath::new(array_path).map_err(|e| to_py(e.into()))?;
        let session = self.inner.clone();
        future_into_py(py, async move { session.list_chunks(&path).await.py() })
    }

    /// Awaitable of `move` (spec 2, rearrange sessions): moves node `from_path` and
    /// everything under it to `to_path`. Invalid paths raise at the call.
    fn move_async<'py>(
        &self,
        py: Python<'py>,
        from_path: &str,
        to_path: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_not_committed(py, "move")?;
        let from = floe::NodePath::new(from_path).map_err(|e| to_py(e.into()))?;
        let to = floe::NodePath::new(to_path).map_err(|e| to_py(e.into()))?;
        let session = self.inner.clone();
        future_into_py(py, async move { session.move_node(&from, &to).py() })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AsyncAncestry>()?;
    Ok(())
}
