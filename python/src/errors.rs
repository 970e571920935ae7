//! floe's errors as Python exceptions: `FloeError` for every failure, with
//! `ConflictError` (a commit, rebase or merge that conflicts) as a subclass.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(floe, FloeError, PyException, "A floe operation failed.");
create_exception!(
    floe,
    ConflictError,
    FloeError,
    "A commit, rebase or merge conflicts with changes made meanwhile."
);

/// A floe error as the Python exception it raises.
pub(crate) fn to_py(e: floe::Error) -> PyErr {
    match e {
        floe::Error::Conflict(_) | floe::Error::MergeConflict { .. } => {
            ConflictError::new_err(e.to_string())
        }
        other => FloeError::new_err(other.to_string()),
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FloeError", m.py().get_type::<FloeError>())?;
    m.add("ConflictError", m.py().get_type::<ConflictError>())?;
    Ok(())
}
