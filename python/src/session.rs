//! `Session` and the native half of the Zarr store (`floe.FloeStore` in Python wraps
//! `SessionStore` and turns these coroutines into zarr-python's `Store` methods).

use bytes::Bytes;
use floe::zarr::store::{ByteRange, Store};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::block_on;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::errors::{read_only_error, session_state_error, store_to_py, to_py, IntoPyResult};
use crate::repository::{json_to_py, py_to_metadata};

/// Which side wins a chunk both sides wrote (Icechunk's `VersionSelection`).
#[pyclass(module = "floe._floe", eq, eq_int, frozen, from_py_object)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum VersionSelection {
    /// The conflict fails the rebase.
    Fail,
    /// This session's chunk.
    UseOurs,
    /// The chunk already committed.
    UseTheirs,
}

/// Fails on any conflict (Icechunk's `ConflictDetector`).
#[pyclass(module = "floe._floe", frozen)]
#[derive(Clone)]
pub(crate) struct ConflictDetector;

#[pymethods]
impl ConflictDetector {
    #[new]
    fn new() -> Self {
        ConflictDetector
    }
}

/// Resolves chunk double-writes and deletes of updated nodes (Icechunk's
/// `BasicConflictSolver`).
#[pyclass(module = "floe._floe", frozen)]
#[derive(Clone)]
pub(crate) struct BasicConflictSolver {
    inner: floe::session::BasicConflictSolver,
}

#[pymethods]
impl BasicConflictSolver {
    #[new]
    #[pyo3(signature = (*, on_chunk_conflict=VersionSelection::UseOurs, fail_on_delete_of_updated_array=false, fail_on_delete_of_updated_group=false))]
    fn new(
        on_chunk_conflict: VersionSelection,
        fail_on_delete_of_updated_array: bool,
        fail_on_delete_of_updated_group: bool,
    ) -> Self {
        use floe::session::VersionSelection as V;
        let selection = match on_chunk_conflict {
            VersionSelection::Fail => V::Fail,
            VersionSelection::UseOurs => V::UseOurs,
            VersionSelection::UseTheirs => V::UseTheirs,
        };
        BasicConflictSolver {
            inner: floe::session::BasicConflictSolver::default()
                .on_chunk_conflict(selection)
                .fail_on_delete_of_updated_array(fail_on_delete_of_updated_array)
                .fail_on_delete_of_updated_group(fail_on_delete_of_updated_group),
        }
    }
}

/// The solver a Python argument names (`None`: detect and fail).
fn solver(
    obj: Option<&Bound<'_, PyAny>>,
) -> PyResult<std::sync::Arc<dyn floe::session::ConflictSolver>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(std::sync::Arc::new(floe::session::ConflictDetector));
    };
    if let Ok(s) = obj.cast::<BasicConflictSolver>() {
        return Ok(std::sync::Arc::new(s.get().inner));
    }
    if obj.cast::<ConflictDetector>().is_ok() {
        return Ok(std::sync::Arc::new(floe::session::ConflictDetector));
    }
    Err(PyValueError::new_err(
        "rebase_with takes a ConflictDetector or a BasicConflictSolver",
    ))
}

/// A session: read-only, on a branch, a fork, or a rearrange session.
///
/// As in Icechunk, a session that committed (or amended) is read-only afterwards, at
/// the snapshot it wrote, and so are the stores it gave out: writes raise
/// `ReadOnlyError`, another commit `SessionStateError`. (floe's Rust sessions keep
/// writing after a commit; the Python API follows Icechunk.)
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct Session {
    pub(crate) inner: floe::Session,
    pub(crate) repo: floe::Repository,
    /// Set once the session committed: shared with the stores it gave out.
    committed: Arc<AtomicBool>,
}

impl Session {
    pub(crate) fn new(inner: floe::Session, repo: floe::Repository) -> Self {
        Session {
            inner,
            repo,
            committed: Arc::new(AtomicBool::new(false)),
        }
    }

    fn has_committed(&self) -> bool {
        self.committed.load(Ordering::Acquire)
    }

    /// Refuses `what` on a session that committed.
    pub(crate) fn check_not_committed(&self, py: Python<'_>, what: &str) -> PyResult<()> {
        if self.has_committed() {
            return Err(session_state_error(
                py,
                format!(
                    "cannot {what}: the session committed and is read-only; open a new \
                     writable session"
                ),
            ));
        }
        Ok(())
    }
}

/// Re-opens a pickled read-only session: the repository at `url`, at `snapshot_id`.
#[pyfunction]
fn _open_readonly(py: Python<'_>, url: &str, snapshot_id: &str) -> PyResult<Session> {
    let storage = crate::storage::storage_from_url(url)?.inner;
    let id: floe::SnapshotId = snapshot_id
        .parse()
        .map_err(|e| PyValueError::new_err(format!("snapshot id: {e}")))?;
    let (inner, repo) = block_on(py, async move {
        let repo = floe::Repository::open(storage).await?;
        let s = repo
            .readonly_session(&floe::VersionSelector::Snapshot(id))
            .await?;
        Ok::<_, floe::Error>((s, repo))
    })
    .py()?;
    Ok(Session::new(inner, repo))
}

/// Re-opens a pickled fork: the repository at `url`, the fork from its bytes.
#[pyfunction]
fn _open_fork(py: Python<'_>, url: &str, fork: Vec<u8>) -> PyResult<Session> {
    let storage = crate::storage::storage_from_url(url)?.inner;
    let (inner, repo) = block_on(py, async move {
        let repo = floe::Repository::open(storage).await?;
        let s = repo.fork_from_bytes(&fork).await?;
        Ok::<_, floe::Error>((s, repo))
    })
    .py()?;
    Ok(Session::new(inner, repo))
}

#[pymethods]
impl Session {
    /// Read-only sessions pickle as (storage URL, snapshot id), forks as (storage URL,
    /// their changes); no credentials travel. A writable session on a branch
    /// refuses: fork it and send the fork.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = slf.py();
        let this = slf.get();
        let module = py.import("floe._floe")?;
        let url = crate::storage::portable_url(this.repo.storage().as_ref()).ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(
                "a session on in-memory storage cannot be pickled",
            )
        })?;
        if this.inner.is_fork() {
            let bytes = this.inner.to_fork_bytes().py()?;
            let args = (url, PyBytes::new(py, &bytes))
                .into_pyobject(py)?
                .into_any();
            return Ok((module.getattr("_open_fork")?, args));
        }
        if this.inner.branch().is_some() && !this.has_committed() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "a writable session cannot be pickled: call session.fork() and send the \
                 fork; merge it back with session.merge(fork)",
            ));
        }
        let args = (url, this.inner.snapshot_id().to_string())
            .into_pyobject(py)?
            .into_any();
        Ok((module.getattr("_open_readonly")?, args))
    }

    /// The snapshot the session reads (its base).
    #[getter]
    fn snapshot_id(&self) -> String {
        self.inner.snapshot_id().to_string()
    }

    /// The repository configuration the session works with (a copy).
    #[getter]
    fn config(&self) -> crate::config::RepositoryConfig {
        crate::config::RepositoryConfig {
            inner: self.inner.config().clone(),
        }
    }

    /// The branch of a writable session; `None` for read-only sessions, forks, and
    /// sessions that committed (as Icechunk).
    #[getter]
    fn branch(&self) -> Option<String> {
        if self.has_committed() {
            return None;
        }
        self.inner.branch().map(str::to_string)
    }

    /// Whether the session refuses writes: a read-only session, a rearrange session,
    /// or a session that committed.
    #[getter]
    fn read_only(&self) -> bool {
        !self.inner.is_writable() || self.has_committed()
    }

    /// Whether there are uncommitted changes.
    #[getter]
    fn has_uncommitted_changes(&self) -> bool {
        self.inner.has_uncommitted_changes()
    }

    /// Forgets uncommitted changes.
    fn discard_changes(&self) {
        self.inner.discard_changes();
    }

    /// The uncommitted changes, as a dict of sorted path lists.
    fn status(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.inner.status())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        json_to_py(py, &v)
    }

    /// Commits; returns the new snapshot id. Rebases over concurrent commits with
    /// `rebase_with` (default: any conflict raises `ConflictError`), at most
    /// `rebase_tries` times.
    #[pyo3(signature = (message, metadata=None, *, allow_empty=false, rebase_with=None, rebase_tries=100))]
    fn commit(
        &self,
        py: Python<'_>,
        message: &str,
        metadata: Option<&Bound<'_, PyAny>>,
        allow_empty: bool,
        rebase_with: Option<&Bound<'_, PyAny>>,
        rebase_tries: u32,
    ) -> PyResult<String> {
        self.check_not_committed(py, "commit")?;
        if self.inner.branch().is_none() {
            return Err(session_state_error(
                py,
                "commits are not allowed on read-only sessions or forks: merge forks \
                 into the session they were forked from, and commit that"
                    .to_string(),
            ));
        }
        let metadata = py_to_metadata(metadata)?;
        let mut opts = floe::CommitOptions::default()
            .allow_empty(allow_empty)
            .max_attempts(rebase_tries);
        opts.solver = solver(rebase_with)?;
        let id = block_on(py, self.inner.commit_with(message, metadata, opts)).py()?;
        self.committed.store(true, Ordering::Release);
        Ok(id.to_string())
    }

    /// Spec 2 (and spec 1): replaces the branch tip with a snapshot holding its
    /// content plus these changes.
    #[pyo3(signature = (message, metadata=None))]
    fn amend(
        &self,
        py: Python<'_>,
        message: &str,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        self.check_not_committed(py, "amend")?;
        let metadata = py_to_metadata(metadata)?;
        let id = block_on(py, self.inner.amend(message, metadata)).py()?;
        self.committed.store(true, Ordering::Release);
        Ok(id.to_string())
    }

    /// Moves the session's base to its branch tip, keeping its changes as `solver`
    /// resolves their conflicts (default: any conflict raises `ConflictError`).
    #[pyo3(signature = (solver=None))]
    fn rebase(&self, py: Python<'_>, solver: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.check_not_committed(py, "rebase")?;
        let solver = self::solver(solver)?;
        block_on(py, self.inner.rebase_with(solver.as_ref())).py()
    }

    /// A fork to write elsewhere and merge back.
    fn fork(&self, py: Python<'_>) -> PyResult<Session> {
        self.check_not_committed(py, "fork")?;
        let fork = block_on(py, self.inner.fork()).py()?;
        Ok(Session::new(fork, self.repo.clone()))
    }

    /// Merges forks' changes into this session.
    #[pyo3(signature = (*forks))]
    fn merge(&self, py: Python<'_>, forks: Vec<PyRef<'_, Session>>) -> PyResult<()> {
        self.check_not_committed(py, "merge")?;
        let forks: Vec<floe::Session> = forks.iter().map(|f| f.inner.clone()).collect();
        block_on(py, self.inner.merge(forks)).py()
    }

    /// Spec 2, rearrange sessions: moves node `from_path` to `to_path`.
    #[pyo3(name = "move")]
    fn move_node(&self, py: Python<'_>, from_path: &str, to_path: &str) -> PyResult<()> {
        self.check_not_committed(py, "move")?;
        let from = floe::NodePath::new(from_path).map_err(|e| to_py(e.into()))?;
        let to = floe::NodePath::new(to_path).map_err(|e| to_py(e.into()))?;
        self.inner.move_node(&from, &to).py()
    }

    /// The native store over this session (wrapped by `floe.FloeStore`).
    fn _native_store(&self) -> NativeStore {
        NativeStore {
            inner: self.inner.store(),
            writable: self.inner.is_writable(),
            committed: Arc::clone(&self.committed),
        }
    }
}

/// The Zarr store view of a session; its methods return awaitables.
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct NativeStore {
    inner: floe::SessionStore,
    writable: bool,
    /// Set once the session committed: the store is read-only from then on.
    committed: Arc<AtomicBool>,
}

impl NativeStore {
    /// Refuses writes once the session committed (Icechunk's `ReadOnlyError`).
    fn check_writable(&self, py: Python<'_>, key: &str) -> PyResult<()> {
        if self.committed.load(Ordering::Acquire) {
            return Err(read_only_error(
                py,
                format!("cannot write key `{key}`: the session committed and is read-only"),
            ));
        }
        Ok(())
    }
}

fn store_err(e: floe::zarr::store::StoreError) -> PyErr {
    store_to_py(e)
}

/// A zarr byte request as (kind, a, b): 0 whole, 1 `a..b`, 2 from `a`, 3 last `a`.
fn byte_range(kind: u8, a: u64, b: u64) -> PyResult<Option<ByteRange>> {
    Ok(match kind {
        0 => None,
        1 => Some(ByteRange::FromStart {
            offset: a,
            length: Some(
                b.checked_sub(a)
                    .ok_or_else(|| PyValueError::new_err("end < start"))?,
            ),
        }),
        2 => Some(ByteRange::FromStart {
            offset: a,
            length: None,
        }),
        3 => Some(ByteRange::Suffix(a)),
        other => return Err(PyValueError::new_err(format!("byte range kind {other}"))),
    })
}

fn to_bytes(py: Python<'_>, b: Option<Bytes>) -> Option<Py<PyBytes>> {
    b.map(|b| PyBytes::new(py, &b).unbind())
}

#[pymethods]
impl NativeStore {
    /// Whether writes are allowed (not once the session committed).
    #[getter]
    fn writable(&self) -> bool {
        self.writable && !self.committed.load(Ordering::Acquire)
    }

    /// The value at `key` (or a range of it), `None` when absent.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: String,
        kind: u8,
        a: u64,
        b: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        let range = byte_range(kind, a, b)?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let value = match range {
                None => store.get(&key).await.map_err(store_err)?,
                Some(r) => store
                    .get_partial_values(&key, &[r])
                    .await
                    .map_err(store_err)?
                    .and_then(|mut v| v.pop()),
            };
            Ok(Python::attach(|py| to_bytes(py, value)))
        })
    }

    /// Whether `key` exists (a chunk's ref is looked up, its bytes not fetched);
    /// raises `InvalidInputError` for a key no Zarr hierarchy has, as Icechunk.
    fn exists<'py>(&self, py: Python<'py>, key: String) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.exists(&key).await.map_err(store_err)
        })
    }

    /// The stored size of `key` in bytes, `None` when absent; chunk sizes come from
    /// their refs, without fetching.
    fn getsize<'py>(&self, py: Python<'py>, key: String) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.size(&key).await.map_err(store_err)
        })
    }

    /// The total stored size in bytes of every key starting with `prefix`.
    fn getsize_prefix<'py>(&self, py: Python<'py>, prefix: String) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let keys = store.list_prefix(&prefix).await.map_err(store_err)?;
            let mut total = 0u64;
            for key in keys {
                let size = store.size(&key).await.map_err(store_err)?.unwrap_or(0);
                total = total.saturating_add(size);
            }
            Ok(total)
        })
    }

    /// Stores `value` at `key`.
    fn set<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: pyo3::pybacked::PyBackedBytes,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_writable(py, &key)?;
        // The Python bytes object backs the value: no copy into Rust.
        let store = self.inner.clone();
        let value = Bytes::from_owner(value);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.set(&key, value).await.map_err(store_err)
        })
    }

    /// Removes `key`.
    fn delete<'py>(&self, py: Python<'py>, key: String) -> PyResult<Bound<'py, PyAny>> {
        self.check_writable(py, &key)?;
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.erase(&key).await.map_err(store_err)
        })
    }

    /// Removes every key under `prefix`.
    fn delete_prefix<'py>(&self, py: Python<'py>, prefix: String) -> PyResult<Bound<'py, PyAny>> {
        self.check_writable(py, &prefix)?;
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.erase_prefix(&prefix).await.map_err(store_err)
        })
    }

    /// Every key starting with `prefix`, sorted.
    fn list_prefix<'py>(&self, py: Python<'py>, prefix: String) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.list_prefix(&prefix).await.map_err(store_err)
        })
    }

    /// The keys and child prefixes directly under `prefix` (empty or ending in `/`).
    fn list_dir<'py>(&self, py: Python<'py>, prefix: String) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let r = store.list_dir(&prefix).await.map_err(store_err)?;
            Ok((r.keys, r.prefixes))
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Session>()?;
    m.add_class::<NativeStore>()?;
    m.add_class::<VersionSelection>()?;
    m.add_class::<ConflictDetector>()?;
    m.add_class::<BasicConflictSolver>()?;
    m.add_function(wrap_pyfunction!(_open_readonly, m)?)?;
    m.add_function(wrap_pyfunction!(_open_fork, m)?)?;
    Ok(())
}
