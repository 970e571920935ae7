//! Icechunk's `*_async` API as native coroutines: every method here returns a Python
//! awaitable (`pyo3_async_runtimes::tokio::future_into_py`) whose work runs on floe's
//! shared tokio runtime, so awaiting it never blocks the asyncio event loop. Each
//! method only forwards its arguments: the `*_call` function of `repository.rs` /
//! `session.rs` handles them and builds the engine call (a [`crate::runtime::Call`]),
//! which the blocking twin runs with [`crate::runtime::block_on`] and the method here
//! awaits. Cancelling the awaitable (`asyncio.Task.cancel`) drops the engine future.
//!
//! The methods are added to the native `Repository` and `Session` classes with a
//! second `#[pymethods]` block (pyo3's `multiple-pymethods`), so the blocking API and
//! its twins stay in separate files. Errors are raised when the awaitable is awaited,
//! with the classes of the blocking twins (`FloeError`, `ConflictError`,
//! `ReadOnlyError`, `SessionStateError`, ...); argument errors (`ValueError` for a bad
//! snapshot id or spec version, `SessionStateError` on a session that committed) are
//! raised by the call itself, before any awaitable exists, as the blocking twins raise
//! them before any I/O.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;

use crate::config::RepositoryConfig;
use crate::convert::selector;
use crate::errors::{to_py, IntoPyResult};
use crate::repository::{info, AncestryPages, Repository, SnapshotInfo};
use crate::session::Session;
use crate::storage::Storage;

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
        let call = Repository::create_call(
            py,
            storage,
            config,
            spec_version,
            authorize_virtual_chunk_access,
        )?;
        future_into_py(py, call)
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
        let call = Repository::open_call(py, storage, config, authorize_virtual_chunk_access)?;
        future_into_py(py, call)
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
        let call = Repository::open_or_create_call(
            py,
            storage,
            config,
            create_version,
            authorize_virtual_chunk_access,
        )?;
        future_into_py(py, call)
    }

    /// Awaitable of `Repository.exists`: whether a repository (either spec) is in
    /// `storage`.
    #[staticmethod]
    fn exists_async<'py>(py: Python<'py>, storage: &Storage) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, Repository::exists_call(storage))
    }

    /// Awaitable of `fetch_spec_version`.
    #[staticmethod]
    fn fetch_spec_version_async<'py>(
        py: Python<'py>,
        storage: &Storage,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, Repository::fetch_spec_version_call(storage))
    }

    /// Awaitable of `save_config`: stores `config` (the current configuration when
    /// `None`); raises `FloeError` when another writer changed it since it was read.
    #[pyo3(signature = (config=None))]
    fn save_config_async<'py>(
        &self,
        py: Python<'py>,
        config: Option<RepositoryConfig>,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.save_config_call(config))
    }

    /// Awaitable of `list_branches`: the branch names (a list; the Python wrapper
    /// makes it a set, as Icechunk).
    fn list_branches_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.list_branches_call())
    }

    /// Awaitable of `lookup_branch`: the snapshot id `branch` points to.
    fn lookup_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.lookup_branch_call(branch))
    }

    /// Awaitable of `create_branch`.
    fn create_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
        snapshot_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.create_branch_call(branch, snapshot_id)?)
    }

    /// Awaitable of `delete_branch`.
    fn delete_branch_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.delete_branch_call(branch))
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
        future_into_py(
            py,
            self.reset_branch_call(branch, snapshot_id, from_snapshot_id)?,
        )
    }

    /// Awaitable of `list_tags` (a list; the wrapper makes it a set).
    fn list_tags_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.list_tags_call())
    }

    /// Awaitable of `lookup_tag`.
    fn lookup_tag_async<'py>(&self, py: Python<'py>, tag: String) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.lookup_tag_call(tag))
    }

    /// Awaitable of `create_tag`.
    fn create_tag_async<'py>(
        &self,
        py: Python<'py>,
        tag: String,
        snapshot_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.create_tag_call(tag, snapshot_id)?)
    }

    /// Awaitable of `delete_tag`.
    fn delete_tag_async<'py>(&self, py: Python<'py>, tag: String) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.delete_tag_call(tag))
    }

    /// Awaitable of `get_metadata` (spec 2).
    fn get_metadata_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.get_metadata_call())
    }

    /// Awaitable of `set_metadata` (spec 2).
    fn set_metadata_async<'py>(
        &self,
        py: Python<'py>,
        metadata: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.set_metadata_call(metadata)?)
    }

    /// Awaitable of `update_metadata` (spec 2): the metadata after the update.
    fn update_metadata_async<'py>(
        &self,
        py: Python<'py>,
        metadata: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.update_metadata_call(metadata)?)
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
        future_into_py(py, self.diff_call(from_snapshot_id, to_snapshot_id)?)
    }

    /// Awaitable of `writable_session`.
    fn writable_session_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.writable_session_call(branch))
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
        let call = self.readonly_session_call(branch, tag, snapshot_id, as_of)?;
        future_into_py(py, call)
    }

    /// Awaitable of `rearrange_session` (spec 2).
    fn rearrange_session_async<'py>(
        &self,
        py: Python<'py>,
        branch: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.rearrange_session_call(branch))
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
        let call =
            self.expire_snapshots_call(older_than, delete_expired_branches, delete_expired_tags);
        future_into_py(py, call)
    }

    /// Awaitable of `garbage_collect`: the summary as a dict (Icechunk's `GCSummary`
    /// fields). A cut-off within the last hour raises `FloeError` unless
    /// `allow_recent_cutoff=True`; `full=True` fetches every retained manifest; the
    /// other arguments as `garbage_collect`'s.
    #[pyo3(signature = (delete_object_older_than, *, dry_run=false, allow_recent_cutoff=false, full=false, manifest_concurrency=None, delete_concurrency=None, max_consecutive_delete_failures=None, list_concurrency=None))]
    #[allow(clippy::too_many_arguments)] // Icechunk's keyword arguments
    fn garbage_collect_async<'py>(
        &self,
        py: Python<'py>,
        delete_object_older_than: DateTime<Utc>,
        dry_run: bool,
        allow_recent_cutoff: bool,
        full: bool,
        manifest_concurrency: Option<usize>,
        delete_concurrency: Option<usize>,
        max_consecutive_delete_failures: Option<u32>,
        list_concurrency: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = crate::repository::gc_options(
            dry_run,
            allow_recent_cutoff,
            full,
            [manifest_concurrency, delete_concurrency, list_concurrency],
            max_consecutive_delete_failures,
        );
        future_into_py(
            py,
            self.garbage_collect_call(delete_object_older_than, opts),
        )
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
        let pages = AncestryPages::new(
            self.inner.clone(),
            selector(branch, tag, snapshot_id, None)?,
        );
        Ok(AsyncAncestry {
            state: Arc::new(tokio::sync::Mutex::new(pages)),
        })
    }
}

/// An asynchronous iterator over the commits of a history, newest first (Icechunk's
/// `Repository.async_ancestry`): `__anext__` returns an awaitable that reads the next
/// batch on floe's runtime when the buffered commits run out (16 commits, then twice
/// as many each time, up to 1,024). Errors (an unknown branch, tag or snapshot, a
/// looping history, storage errors) are raised by the `__anext__` that reaches them.
#[pyclass(module = "floe._floe")]
pub(crate) struct AsyncAncestry {
    state: Arc<tokio::sync::Mutex<AncestryPages>>,
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
            state.lock().await.close();
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
        let call = self.commit_call(
            py,
            message,
            metadata,
            allow_empty,
            rebase_with,
            rebase_tries,
        )?;
        future_into_py(py, call)
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
        future_into_py(py, self.amend_call(py, message, metadata, allow_empty)?)
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
        future_into_py(py, self.rebase_call(py, solver)?)
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
        future_into_py(py, self.merge_call(py, forks)?)
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
        future_into_py(py, self.move_call(py, from_path, to_path)?)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AsyncAncestry>()?;
    Ok(())
}
