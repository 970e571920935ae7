//! `Session` and the native half of the Zarr store (`floe.FloeStore` in Python wraps
//! `SessionStore` and turns these coroutines into zarr-python's `Store` methods).

use bytes::Bytes;
use floe::zarr::store::{ByteRange, Store};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::convert::{json_to_py, py_to_metadata};
use crate::errors::{read_only_error, session_state_error, store_to_py, to_py, IntoPyResult};
use crate::runtime::{block_on, Call};
use std::collections::BTreeMap;

/// A node path argument (`/a/b`); `InvalidInputError` (kind `invalid-path`) when
/// it is not absolute or not normal.
pub(crate) fn node_path(path: &str) -> PyResult<floe::NodePath> {
    if !path.starts_with('/') {
        return Err(crate::errors::invalid_input(
            crate::errors::Kind::InvalidPath,
            format!("invalid node path `{path}`: path must start with a `/` character"),
        ));
    }
    floe::NodePath::new(path).map_err(|e| to_py(e.into()))
}

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
pub(crate) fn solver(
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
    pub(crate) committed: Arc<AtomicBool>,
    /// The repository's default commit metadata when the session was opened
    /// (`Repository.set_default_commit_metadata`): every commit, amend and flush
    /// records it, under the metadata given to the call.
    pub(crate) defaults: BTreeMap<String, serde_json::Value>,
}

impl Session {
    pub(crate) fn new(inner: floe::Session, repo: floe::Repository) -> Self {
        Session {
            inner,
            repo,
            committed: Arc::new(AtomicBool::new(false)),
            defaults: BTreeMap::new(),
        }
    }

    /// The session, recording `defaults` in every commit (the metadata given to a
    /// commit wins over them, key by key).
    pub(crate) fn with_default_metadata(
        mut self,
        defaults: BTreeMap<String, serde_json::Value>,
    ) -> Self {
        self.defaults = defaults;
        self
    }

    /// The defaults with `given` on top.
    fn metadata(
        &self,
        given: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<BTreeMap<String, serde_json::Value>> {
        let mut out = self.defaults.clone();
        out.extend(py_to_metadata(given)?);
        Ok(out)
    }

    /// The commit of `commit` and `commit_async`: `SessionStateError` (here) for a
    /// session that committed, a fork or a read-only session; the metadata is the
    /// defaults under `given`. As Icechunk: without `rebase_with` a commit whose
    /// branch moved fails with `ConflictError` (no rebase is tried); with it, at most
    /// `rebase_tries` rebases. The session is read-only once the commit succeeded.
    pub(crate) fn commit_call(
        &self,
        py: Python<'_>,
        message: String,
        given: Option<&Bound<'_, PyAny>>,
        allow_empty: bool,
        rebase_with: Option<&Bound<'_, PyAny>>,
        rebase_tries: u32,
    ) -> PyResult<impl Call<String>> {
        self.check_not_committed(py, "commit")?;
        if self.inner.branch().is_none() {
            return Err(session_state_error(
                py,
                "commits are not allowed on read-only sessions or forks: merge forks \
                 into the session they were forked from, and commit that"
                    .to_string(),
            ));
        }
        let metadata = self.metadata(given)?;
        let mut opts = floe::CommitOptions::default()
            .allow_empty(allow_empty)
            .rebase(rebase_with.is_some_and(|r| !r.is_none()))
            .max_attempts(rebase_tries);
        opts.solver = solver(rebase_with)?;
        let (session, committed) = (self.inner.clone(), Arc::clone(&self.committed));
        Ok(async move {
            let id = session.commit_with(&message, metadata, opts).await.py()?;
            committed.store(true, Ordering::Release);
            Ok(id.to_string())
        })
    }

    /// The amend of `amend` and `amend_async`: refused (here) on a session that
    /// committed and on spec 1 (as Icechunk), and without changes unless
    /// `allow_empty` (`SessionStateError`). The session is read-only once the amend
    /// succeeded.
    pub(crate) fn amend_call(
        &self,
        py: Python<'_>,
        message: String,
        given: Option<&Bound<'_, PyAny>>,
        allow_empty: bool,
    ) -> PyResult<impl Call<String>> {
        self.check_not_committed(py, "amend")?;
        self.require_spec2("amend")?;
        if !allow_empty && !self.inner.has_uncommitted_changes() && self.inner.branch().is_some() {
            return Err(to_py(floe::Error::NoChangesToCommit));
        }
        let metadata = self.metadata(given)?;
        let (session, committed) = (self.inner.clone(), Arc::clone(&self.committed));
        Ok(async move {
            let id = session.amend(&message, metadata).await.py()?;
            committed.store(true, Ordering::Release);
            Ok(id.to_string())
        })
    }

    /// The rebase of `rebase` and `rebase_async`.
    pub(crate) fn rebase_call(
        &self,
        py: Python<'_>,
        solver: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl Call<()>> {
        self.check_not_committed(py, "rebase")?;
        let solver = self::solver(solver)?;
        let session = self.inner.clone();
        Ok(async move { session.rebase_with(solver.as_ref()).await.py() })
    }

    /// The merge of `merge` and `merge_async`.
    pub(crate) fn merge_call(
        &self,
        py: Python<'_>,
        forks: Vec<PyRef<'_, Session>>,
    ) -> PyResult<impl Call<()>> {
        self.check_not_committed(py, "merge")?;
        let forks: Vec<floe::Session> = forks.iter().map(|f| f.inner.clone()).collect();
        let session = self.inner.clone();
        Ok(async move { session.merge(forks).await.py() })
    }

    /// The move of `move` and `move_async` (no I/O: the blocking method runs it
    /// without releasing the GIL, as before).
    pub(crate) fn move_call(
        &self,
        py: Python<'_>,
        from_path: &str,
        to_path: &str,
    ) -> PyResult<impl Call<()>> {
        self.check_not_committed(py, "move")?;
        let from = floe::NodePath::new(from_path).map_err(|e| to_py(e.into()))?;
        let to = floe::NodePath::new(to_path).map_err(|e| to_py(e.into()))?;
        let session = self.inner.clone();
        Ok(async move { session.move_node(&from, &to).py() })
    }

    /// Refuses `what` on a spec-1 repository, as Icechunk does (amend needs spec 2).
    fn require_spec2(&self, what: &str) -> PyResult<()> {
        if self.repo.spec_version() == floe::format::SpecVersion::V1 {
            return Err(to_py(floe::Error::UnsupportedOnSpecVersion {
                operation: if what == "amend" { "amend" } else { "flush" },
                spec_version: floe::format::SpecVersion::V1,
            }));
        }
        Ok(())
    }

    /// The engine session with its snapshot read: sessions open without it (as
    /// Icechunk's), so a missing snapshot is the error of the first call needing it.
    pub(crate) fn loaded(&self, py: Python<'_>) -> PyResult<&floe::Session> {
        block_on(py, self.inner.load()).py()?;
        Ok(&self.inner)
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

/// Re-opens a pickled read-only session: the repository in `storage` (a `Storage`,
/// or a URL read with credentials from the environment), at `snapshot_id`.
#[pyfunction]
fn _open_readonly(
    py: Python<'_>,
    storage: &Bound<'_, PyAny>,
    snapshot_id: &str,
) -> PyResult<Session> {
    let storage = crate::storage::Storage::from_pickled(storage)?.inner;
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

/// Re-opens a pickled fork: the repository in `storage` (a `Storage`, or a URL),
/// the fork from its bytes.
#[pyfunction]
fn _open_fork(py: Python<'_>, storage: &Bound<'_, PyAny>, fork: Vec<u8>) -> PyResult<Session> {
    let storage = crate::storage::Storage::from_pickled(storage)?.inner;
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
    /// Read-only sessions pickle as (storage, snapshot id), forks as (storage, their
    /// changes); the storage pickles with its credentials objects (see
    /// `floe.credentials`). A writable session on a branch
    /// refuses with `ValueError` (as Icechunk): fork it and send the fork.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = slf.py();
        let this = slf.get();
        let module = py.import("floe._floe")?;
        let url = crate::storage::Storage::portable(py, this.repo.storage())?.ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(
                "a session on in-memory storage cannot be pickled",
            )
        })?;
        if this.inner.is_fork() {
            // Packs of small chunks the fork holds are written first: the bytes
            // carry refs into them.
            let bytes = block_on(py, this.inner.to_fork_bytes()).py()?;
            let args = (url, PyBytes::new(py, &bytes))
                .into_pyobject(py)?
                .into_any();
            return Ok((module.getattr("_open_fork")?, args));
        }
        if this.inner.branch().is_some() && !this.has_committed() {
            // `ValueError`, as Icechunk: pickling a writable session needs an opt-in.
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a writable session cannot be pickled: call session.fork() and send the \
                 fork; merge it back with session.merge(fork). To read in workers, send \
                 a read-only session (Repository.readonly_session)",
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

    /// Whether the session is read-only: a read-only session, or a session that
    /// committed. A rearrange session is not (it changes the hierarchy by moves), as
    /// in Icechunk, though its store refuses chunk and metadata writes.
    #[getter]
    fn read_only(&self) -> bool {
        (!self.inner.is_writable() && !self.inner.is_rearrange()) || self.has_committed()
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

    /// Writes the session's chunk packs not written yet (see `Session::flush_packs`).
    fn flush_packs(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, self.inner.flush_packs()).py()
    }

    /// The uncommitted changes, as a dict of sorted path lists.
    fn status(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.loaded(py)?.status())
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
        message: String,
        metadata: Option<&Bound<'_, PyAny>>,
        allow_empty: bool,
        rebase_with: Option<&Bound<'_, PyAny>>,
        rebase_tries: u32,
    ) -> PyResult<String> {
        let call = self.commit_call(
            py,
            message,
            metadata,
            allow_empty,
            rebase_with,
            rebase_tries,
        )?;
        block_on(py, call)
    }

    /// Spec 2: replaces the branch tip with a snapshot holding its content plus
    /// these changes (same parent); returns its id. As Icechunk: refused on spec 1
    /// (`FormatError`, "upgrade"), and without changes unless `allow_empty`
    /// (`SessionStateError`).
    #[pyo3(signature = (message, metadata=None, *, allow_empty=false))]
    fn amend(
        &self,
        py: Python<'_>,
        message: String,
        metadata: Option<&Bound<'_, PyAny>>,
        allow_empty: bool,
    ) -> PyResult<String> {
        block_on(py, self.amend_call(py, message, metadata, allow_empty)?)
    }

    /// Rewrites every array's manifests in the configured splitting layout and
    /// commits (the engine of Icechunk's `Repository.rewrite_manifests`); with
    /// `amend` the commit replaces the branch tip (spec 2 only: `FormatError` on
    /// spec 1). The session is read-only afterwards. Returns the new snapshot id.
    #[pyo3(signature = (message, metadata=None, *, amend=false))]
    fn _rewrite_manifests(
        &self,
        py: Python<'_>,
        message: &str,
        metadata: Option<&Bound<'_, PyAny>>,
        amend: bool,
    ) -> PyResult<String> {
        self.check_not_committed(py, "commit")?;
        if amend {
            self.require_spec2("amend")?;
        }
        let metadata = self.metadata(metadata)?;
        let id = block_on(py, self.inner.rewrite_manifests(message, metadata, amend)).py()?;
        self.committed.store(true, Ordering::Release);
        Ok(id.to_string())
    }

    /// Writes the changes as a snapshot no branch points to (Icechunk's `flush`);
    /// returns its id, which `reset_branch` or `create_tag` can then name. The
    /// session is read-only afterwards.
    #[pyo3(signature = (message, metadata=None))]
    fn flush(
        &self,
        py: Python<'_>,
        message: &str,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        self.check_not_committed(py, "flush")?;
        if self.inner.is_fork() {
            // Icechunk 2.3.0's `CannotFlushForkSession`: a fork's snapshot is not in
            // the repository, so nothing can be flushed on top of it.
            return Err(session_state_error(
                py,
                "cannot flush a forked session: merge the fork back into the base session \
                 and flush that instead"
                    .to_string(),
            ));
        }
        if self.inner.branch().is_none() || self.inner.is_rearrange() {
            return Err(session_state_error(
                py,
                "commits are not allowed on read-only or forked sessions: only a writable \
                 session on a branch can flush"
                    .to_string(),
            ));
        }
        let metadata = self.metadata(metadata)?;
        let id = block_on(py, self.inner.flush(message, metadata)).py()?;
        self.committed.store(true, Ordering::Release);
        Ok(id.to_string())
    }

    /// Icechunk's `SessionMode` name of the session: `readonly` (also once it
    /// committed), `writable` (a branch session or a fork) or `rearrange`.
    #[getter]
    fn mode(&self) -> &'static str {
        if self.inner.is_rearrange() {
            "rearrange"
        } else if self.has_committed() || !self.inner.is_writable() {
            "readonly"
        } else {
            "writable"
        }
    }

    /// Icechunk's `ChunkType` name of chunk `chunk_coordinates` of the array at
    /// `array_path`: `uninitialized` (never written: reads as the fill value),
    /// `inline`, `native` or `virtual`. Reads the chunk's ref, never its bytes.
    fn chunk_type(
        &self,
        py: Python<'_>,
        array_path: &str,
        chunk_coordinates: Vec<u64>,
    ) -> PyResult<&'static str> {
        use floe::format::manifest::ChunkPayload as P;
        let path = node_path(array_path)?;
        let payload = block_on(py, self.inner.get_chunk_ref(&path, &chunk_coordinates)).py()?;
        Ok(match payload {
            None => "uninitialized",
            Some(P::Inline(_)) => "inline",
            Some(P::Native(_)) => "native",
            Some(P::Virtual(_)) => "virtual",
        })
    }

    /// Every chunk ref of the array at `array_path`, sorted by chunk index, as
    /// columns: `(coords, kinds, paths, offsets, lengths, inlined)`: `coords` one
    /// list of chunk grid indices per chunk, `kinds` Icechunk's `ChunkType` numbers
    /// (native 1, virtual 2, inline 3) as `bytes`, one byte per chunk, `paths` the chunk id (native), URL (virtual)
    /// or `""` (inline), `offsets` and `lengths` in bytes (inline: 0 and the size of
    /// the bytes), and `inlined` the bytes of inline chunks by row. Reads manifests,
    /// never chunk bytes. Raises `NodeNotFoundError` / `InvalidInputError` (not an
    /// array).
    #[allow(clippy::type_complexity)]
    fn _chunk_refs(
        &self,
        py: Python<'_>,
        array_path: &str,
    ) -> PyResult<(
        Vec<Vec<u64>>,
        Vec<u8>,
        Vec<String>,
        Vec<u64>,
        Vec<u64>,
        Vec<(usize, Py<PyBytes>)>,
    )> {
        use floe::format::manifest::ChunkPayload as P;
        let path = node_path(array_path)?;
        let refs = block_on(py, self.inner.chunk_refs(&path)).py()?;
        let n = refs.len();
        let (mut coords, mut kinds, mut paths) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut offsets, mut lengths, mut inlined) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::new());
        for (row, (idx, payload)) in refs.into_iter().enumerate() {
            coords.push(idx);
            match payload {
                P::Native(r) => {
                    kinds.push(1);
                    paths.push(r.id.to_string());
                    offsets.push(r.offset);
                    lengths.push(r.length);
                }
                P::Virtual(v) => {
                    kinds.push(2);
                    paths.push(v.location);
                    offsets.push(v.offset);
                    lengths.push(v.length);
                }
                P::Inline(b) => {
                    kinds.push(3);
                    paths.push(String::new());
                    offsets.push(0);
                    lengths.push(b.len() as u64);
                    inlined.push((row, PyBytes::new(py, &b).unbind()));
                }
            }
        }
        Ok((coords, kinds, paths, offsets, lengths, inlined))
    }

    /// The id of the node at `path` (13 Crockford base32 characters); stays the
    /// same when the node moves.
    fn get_node_id(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        let path = node_path(path)?;
        Ok(self.loaded(py)?.get_node(&path).py()?.id.to_string())
    }

    /// Moves every chunk of the array by `chunk_offset` chunks (per dimension);
    /// chunks moved off the grid are dropped, vacated positions read as the fill
    /// value. Refs move; no chunk bytes are copied.
    fn shift_array(
        &self,
        py: Python<'_>,
        array_path: &str,
        chunk_offset: Vec<i64>,
    ) -> PyResult<()> {
        self.check_not_committed(py, "shift_array")?;
        let path = node_path(array_path)?;
        block_on(py, self.inner.shift_array(&path, &chunk_offset)).py()
    }

    /// Moves each chunk at index `i` to `forward(i)` (dropped when it returns
    /// `None`); with `backward`, vacated positions get the chunk at `backward(i)` or
    /// are cleared. The maps get the index as a list of ints and return an iterable
    /// of ints or `None`; an exception in one stages nothing and propagates.
    #[pyo3(signature = (array_path, forward, backward=None))]
    fn reindex_array(
        &self,
        py: Python<'_>,
        array_path: &str,
        forward: Py<PyAny>,
        backward: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        self.check_not_committed(py, "reindex_array")?;
        let path = node_path(array_path)?;
        let failed: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
        let call = |f: &Py<PyAny>, index: &[u64]| -> floe::Result<Option<Vec<u64>>> {
            let out = Python::attach(|py| -> PyResult<Option<Vec<u64>>> {
                let value = f.call1(py, (index.to_vec(),))?;
                if value.is_none(py) {
                    return Ok(None);
                }
                let list = py.import("builtins")?.getattr("list")?.call1((value,))?;
                Ok(Some(list.extract()?))
            });
            out.map_err(|e| {
                if let Ok(mut slot) = failed.lock() {
                    slot.get_or_insert(e);
                }
                floe::Error::InvalidConfig {
                    reason: "a chunk index map raised an exception".to_string(),
                }
            })
        };
        let fwd = |i: &[u64]| call(&forward, i);
        let bwd = backward.as_ref().map(|b| move |i: &[u64]| call(b, i));
        let result = block_on(py, async {
            match &bwd {
                Some(b) => self.inner.reindex_array(&path, &fwd, Some(b)).await,
                None => self.inner.reindex_array(&path, &fwd, None).await,
            }
        });
        if let Some(e) = failed.lock().ok().and_then(|mut slot| slot.take()) {
            return Err(e);
        }
        result.py()
    }

    /// Moves the session's base to its branch tip, keeping its changes as `solver`
    /// resolves their conflicts (default: any conflict raises `ConflictError`).
    #[pyo3(signature = (solver=None))]
    fn rebase(&self, py: Python<'_>, solver: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        block_on(py, self.rebase_call(py, solver)?)
    }

    /// A fork to write elsewhere and merge back.
    fn fork(&self, py: Python<'_>) -> PyResult<Session> {
        if self.has_committed() || !self.inner.is_writable() {
            let why = if self.has_committed() {
                ": the session committed and is read-only; open a new writable session"
            } else {
                ""
            };
            return Err(crate::errors::error(
                crate::errors::Class::SessionState,
                crate::errors::Kind::CannotForkReadOnlySession,
                format!("cannot fork a read-only session{why}"),
            ));
        }
        let fork = block_on(py, self.inner.fork()).py()?;
        Ok(Session::new(fork, self.repo.clone()).with_default_metadata(self.defaults.clone()))
    }

    /// Merges forks' changes into this session.
    #[pyo3(signature = (*forks))]
    fn merge(&self, py: Python<'_>, forks: Vec<PyRef<'_, Session>>) -> PyResult<()> {
        block_on(py, self.merge_call(py, forks)?)
    }

    /// Spec 2, rearrange sessions: moves node `from_path` to `to_path`.
    #[pyo3(name = "move")]
    fn move_node(&self, py: Python<'_>, from_path: &str, to_path: &str) -> PyResult<()> {
        futures::executor::block_on(self.move_call(py, from_path, to_path)?)
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

/// A value `NativeStore._prepare_set` stored, for `NativeStore._finish_set` to record
/// (once).
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct PreparedSet {
    inner: std::sync::Mutex<Option<floe::session::PreparedSet>>,
}

/// The Zarr store view of a session; its methods return awaitables.
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct NativeStore {
    pub(crate) inner: floe::SessionStore,
    writable: bool,
    /// Set once the session committed: the store is read-only from then on.
    pub(crate) committed: Arc<AtomicBool>,
}

impl NativeStore {
    /// Refuses writes once the session committed (Icechunk's `ReadOnlyError`).
    /// `set` (`if_absent` false: the awaitable gives `None`) or `set_if_not_exists`
    /// (whether it stored). The Python bytes object backs the value: no copy into
    /// Rust.
    fn store_value<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: pyo3::pybacked::PyBackedBytes,
        if_absent: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_writable(py, &key)?;
        let store = self.inner.clone();
        let value = Bytes::from_owner(value);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            if if_absent {
                store.set_if_not_exists(&key, value).await.map(Some)
            } else {
                store.set(&key, value).await.map(|()| None)
            }
            .map_err(store_err)
        })
    }

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

    /// The value at `key` (or a range of it), `None` when absent. The range is
    /// `(kind, a, b)`: kind 0 the whole value (the default, so `get(key)` works as
    /// Icechunk's native store), 1 bytes `a..b`, 2 from offset `a`, 3 the last `a`.
    #[pyo3(signature = (key, kind=0, a=0, b=0))]
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

    /// `get` of `key` answered at once, without I/O (`SessionStore::get_now`):
    /// `(True, value or None)` for a metadata key or a key that names nothing, once
    /// the session's snapshot is loaded; `(False, None)` when the key needs I/O (a
    /// chunk key) and `get` must be awaited. Raises `InvalidInputError` for a key
    /// no Zarr hierarchy has.
    fn _get_now(&self, py: Python<'_>, key: &str) -> PyResult<(bool, Option<Py<PyBytes>>)> {
        match self.inner.get_now(key) {
            None => Ok((false, None)),
            Some(r) => Ok((true, to_bytes(py, r.map_err(store_err)?))),
        }
    }

    /// `set` of a `zarr.json` key done at once (`SessionStore::set_metadata_now`:
    /// the document is recorded, nothing is written): `True` when done, `False` for
    /// other keys (then `_prepare_set` + `_finish_set`). Raises `ReadOnlyError` on
    /// a read-only or committed session and the store's errors.
    fn _set_now(
        &self,
        py: Python<'_>,
        key: &str,
        value: pyo3::pybacked::PyBackedBytes,
    ) -> PyResult<bool> {
        self.check_writable(py, key)?;
        match self.inner.set_metadata_now(key, Bytes::from_owner(value)) {
            None => Ok(false),
            Some(r) => r.map(|()| true).map_err(store_err),
        }
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

    /// The first half of `set` (`FloeStore.set` awaits it, then calls `_finish_set`):
    /// checks `key` and stores a chunk's bytes (inline, or as a native chunk object
    /// written now) without changing the session; the awaitable gives the
    /// `PreparedSet`. A caller cancelled meanwhile never records it, so no write lands
    /// after its cancellation (an unrecorded chunk object is garbage).
    fn _prepare_set<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: pyo3::pybacked::PyBackedBytes,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_writable(py, &key)?;
        let store = self.inner.clone();
        let value = Bytes::from_owner(value);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let prepared = store.prepare_set(&key, value).await.map_err(store_err)?;
            Ok(PreparedSet {
                inner: std::sync::Mutex::new(Some(prepared)),
            })
        })
    }

    /// The second half of `set`: records what `_prepare_set` prepared (once). No
    /// I/O. Raises `ReadOnlyError` once the session committed, `ValueError` for a
    /// `PreparedSet` already recorded, and the store's errors.
    fn _finish_set(&self, py: Python<'_>, prepared: &PreparedSet) -> PyResult<()> {
        let taken = prepared
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyValueError::new_err("this prepared set was already recorded"))?;
        self.check_writable(py, taken.key())?;
        self.inner.finish_set(taken).map_err(store_err)
    }

    /// Stores `value` at `key`.
    fn set<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: pyo3::pybacked::PyBackedBytes,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.store_value(py, key, value, false)
    }

    /// Stores `value` at `key` only when nothing is there, atomically within the
    /// session (`SessionStore::set_if_not_exists`); the awaitable returns whether
    /// it stored.
    fn set_if_not_exists<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: pyo3::pybacked::PyBackedBytes,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.store_value(py, key, value, true)
    }

    /// Loads the session's snapshot (what every key operation needs first; a no-op
    /// once loaded), for `_delete_loaded`.
    fn _load<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            store.load().await.map_err(store_err)
        })
    }

    /// Removes `key` from a loaded session (`_load`): no I/O, so `FloeStore.delete`
    /// does it after its awaits, where a cancellation cannot leave it to land later.
    fn _delete_loaded(&self, py: Python<'_>, key: &str) -> PyResult<()> {
        self.check_writable(py, key)?;
        self.inner.erase_loaded(key).map_err(store_err)
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
    m.add_class::<PreparedSet>()?;
    m.add_class::<VersionSelection>()?;
    m.add_class::<ConflictDetector>()?;
    m.add_class::<BasicConflictSolver>()?;
    m.add_function(wrap_pyfunction!(_open_readonly, m)?)?;
    m.add_function(wrap_pyfunction!(_open_fork, m)?)?;
    Ok(())
}
