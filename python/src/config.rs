//! The bridge between the Python configuration classes (`floe.config`, plain Python
//! objects with Icechunk's names) and the engine's `RepositoryConfig`.
//!
//! A Python `RepositoryConfig` crosses the boundary in serde's plain form (a JSON
//! text: enums as `{variant: value}` maps or `"variant"` strings), produced by its
//! `_to_plain()` method and read back by `RepositoryConfig._from_plain(...)`. The
//! engine parses it (`floe::format::config::RepositoryConfig::from_plain`), so the
//! format and its checks live in Rust only; Python holds the values and displays them.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// An engine configuration taken from, or given to, Python.
#[derive(Clone, Debug)]
pub(crate) struct RepositoryConfig {
    pub(crate) inner: floe::format::config::RepositoryConfig,
}

/// The plain form of `obj` (a `floe.config.RepositoryConfig`, or anything with a
/// `_to_plain()` method returning JSON-serializable values) as JSON.
fn plain_of(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let plain = obj.call_method0("_to_plain").map_err(|_| {
        PyValueError::new_err(format!(
            "expected a RepositoryConfig, got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))
    })?;
    let text: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (plain,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The engine configuration of a Python one.
///
/// # Errors
/// `ValueError` when `obj` is no configuration or holds values the format refuses.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<floe::format::config::RepositoryConfig> {
    let plain = plain_of(obj)?;
    floe::format::config::RepositoryConfig::from_plain(&plain)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A new Python `floe.config.RepositoryConfig` holding `config`.
///
/// # Errors
/// `ValueError` when the configuration has no JSON form.
pub(crate) fn to_py<'py>(
    py: Python<'py>,
    config: &floe::format::config::RepositoryConfig,
) -> PyResult<Bound<'py, PyAny>> {
    let plain = config
        .to_plain()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let text = serde_json::to_string(&plain).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let value = py.import("json")?.call_method1("loads", (text,))?;
    py.import("floe.config")?
        .getattr("RepositoryConfig")?
        .call_method1("_from_plain", (value,))
}

impl<'a, 'py> FromPyObject<'a, 'py> for RepositoryConfig {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(RepositoryConfig {
            inner: from_py(&obj)?,
        })
    }
}

impl<'py> IntoPyObject<'py> for RepositoryConfig {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        to_py(py, &self.inner)
    }
}

/// `base` with `other` over it, both in plain form (Icechunk's
/// `RepositoryConfig.merge`, see `floe::format::config::RepositoryConfig::merge`).
/// Raises `ValueError` when either holds values the format refuses.
#[pyfunction]
fn _merge_configs<'py>(
    py: Python<'py>,
    base: &Bound<'py, PyAny>,
    other: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let merged = from_py(base)?.merge(&from_py(other)?);
    to_py(py, &merged)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_merge_configs, m)?)?;
    Ok(())
}
