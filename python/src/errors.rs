//! floe's errors as Python exceptions: `FloeError` (Icechunk's `IcechunkError`) for
//! every failure, with subclasses named as Icechunk 2.3.0's exception tree names them
//! for the failures a caller acts on:
//!
//! - `ConflictError`: a commit, rebase or merge that conflicts;
//! - `ReadOnlyError`: a write through a read-only session or store (also a session
//!   that committed: it is read-only afterwards, as in Icechunk);
//! - `InvalidInputError` (also a `ValueError`): a key no Zarr hierarchy has, and other
//!   invalid arguments;
//! - `SessionStateError`: an operation the session's state forbids (committing a
//!   fork, committing twice, committing nothing).

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(floe, FloeError, PyException, "A floe operation failed.");
create_exception!(
    floe,
    ConflictError,
    FloeError,
    "A commit, rebase or merge conflicts with changes made meanwhile."
);

/// The exception classes defined at module initialisation (by `type(...)`, since
/// `InvalidInputError` has two bases), by name.
const READ_ONLY: &str = "ReadOnlyError";
const INVALID_INPUT: &str = "InvalidInputError";
const SESSION_STATE: &str = "SessionStateError";

/// An exception of the class `name` of module `floe._floe` with `message`; a
/// `FloeError` should the class be missing.
pub(crate) fn error_of_class(py: Python<'_>, name: &str, message: String) -> PyErr {
    let class = py
        .import("floe._floe")
        .and_then(|m| m.getattr(name))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(class) => PyErr::from_type(class, (message,)),
        Err(_) => FloeError::new_err(message),
    }
}

/// A `ReadOnlyError` with `message`.
pub(crate) fn read_only_error(py: Python<'_>, message: String) -> PyErr {
    error_of_class(py, READ_ONLY, message)
}

/// A `SessionStateError` with `message`.
pub(crate) fn session_state_error(py: Python<'_>, message: String) -> PyErr {
    error_of_class(py, SESSION_STATE, message)
}

/// The Python class of a floe error, by name (`None`: `FloeError`).
fn class_of(e: &floe::Error) -> Option<&'static str> {
    match e {
        floe::Error::ReadOnlySession | floe::Error::RepositoryReadOnly { .. } => Some(READ_ONLY),
        floe::Error::ForkCannotCommit | floe::Error::NoChangesToCommit => Some(SESSION_STATE),
        floe::Error::InvalidRefName { .. } => Some(INVALID_INPUT),
        _ => None,
    }
}

/// A floe error as the Python exception it raises.
pub(crate) fn to_py(e: floe::Error) -> PyErr {
    match e {
        floe::Error::Conflict(_) | floe::Error::MergeConflict { .. } => {
            ConflictError::new_err(e.to_string())
        }
        other => match class_of(&other) {
            Some(name) => Python::attach(|py| error_of_class(py, name, other.to_string())),
            None => FloeError::new_err(other.to_string()),
        },
    }
}

/// A store error as the Python exception it raises: `ReadOnlyError` for writes to a
/// read-only store, `InvalidInputError` for invalid keys, the class of the repository
/// error behind it otherwise (as Icechunk's store keeps its errors' types).
pub(crate) fn store_to_py(e: floe::zarr::store::StoreError) -> PyErr {
    use floe::zarr::store::StoreError as S;
    let class = match &e {
        S::ReadOnly { .. } => Some(READ_ONLY),
        S::InvalidKey { .. } => Some(INVALID_INPUT),
        S::Repository { .. } => match e.repository_error() {
            Some(floe::Error::Conflict(_) | floe::Error::MergeConflict { .. }) => {
                return ConflictError::new_err(e.to_string())
            }
            Some(other) => class_of(other),
            None => None,
        },
        _ => None,
    };
    match class {
        Some(name) => Python::attach(|py| error_of_class(py, name, e.to_string())),
        None => FloeError::new_err(e.to_string()),
    }
}

/// Converts floe results.
pub(crate) trait IntoPyResult<T> {
    /// The result with floe's error as a Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, floe::Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

impl<T> IntoPyResult<T> for Result<T, floe::storage::StorageError> {
    fn py(self) -> PyResult<T> {
        self.map_err(|e| to_py(e.into()))
    }
}

/// Defines exception class `name` with `bases` and `doc` in module `m` (shown as
/// `floe.<name>`, the name users import it by).
fn define(
    m: &Bound<'_, PyModule>,
    name: &str,
    bases: Bound<'_, PyTuple>,
    doc: &str,
) -> PyResult<()> {
    let py = m.py();
    let namespace = PyDict::new(py);
    namespace.set_item("__doc__", doc)?;
    namespace.set_item("__module__", "floe")?;
    let class = py
        .import("builtins")?
        .getattr("type")?
        .call1((name, bases, namespace))?;
    m.add(name, class)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = py.get_type::<FloeError>();
    m.add("FloeError", &base)?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    define(
        m,
        READ_ONLY,
        PyTuple::new(py, [base.clone()])?,
        "A write through a read-only session, store or repository (Icechunk's \
         `ReadOnlyError`); a session is read-only once it committed.",
    )?;
    define(
        m,
        INVALID_INPUT,
        PyTuple::new(py, [base.clone(), py.get_type::<PyValueError>()])?,
        "An invalid argument or key (Icechunk's `InvalidInputError`); also a \
         `ValueError`.",
    )?;
    define(
        m,
        SESSION_STATE,
        PyTuple::new(py, [base])?,
        "An operation the session's state forbids (Icechunk's `SessionStateError`): \
         committing a fork, committing a session that already committed, committing \
         no changes.",
    )?;
    Ok(())
}
