//! Conversions between Python arguments or values and the engine's types, shared by
//! the blocking API (`repository.rs`, `session.rs`) and its awaitable twins
//! (`aio.rs`): JSON values (metadata) both ways, snapshot ids, version selectors and
//! spec versions. This module names no other module of the bindings but `errors`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::{invalid_input, Kind};

/// An engine result that Python gets as plain data (dicts, lists, ...), converted by
/// [`json_to_py`] when it reaches Python: what the blocking methods return and
/// their awaitables resolve to.
pub(crate) struct Json(serde_json::Value);

impl Json {
    /// `value` as JSON; `ValueError` if it does not serialize.
    pub(crate) fn of<T: serde::Serialize>(value: &T) -> PyResult<Json> {
        serde_json::to_value(value)
            .map(Json)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

impl<'py> IntoPyObject<'py> for Json {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(json_to_py(py, &self.0)?.into_bound(py))
    }
}

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
    let py = obj.py();
    let text: String = match py.import("json")?.call_method1("dumps", (obj,)) {
        Ok(text) => text.extract()?,
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "commit metadata must be JSON-serializable: {}",
                e.value(py)
            )))
        }
        Err(e) => return Err(e),
    };
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("metadata: {e}")))
}

/// A snapshot id argument, read as Icechunk reads one (Crockford aliases and padding
/// bits accepted: `ObjectId::parse_lenient`, so text of the right shape that names no
/// snapshot gives `SnapshotNotFoundError` later, as in Icechunk);
/// `InvalidInputError` (kind `invalid-snapshot-id`) when it is not one.
pub(crate) fn snapshot_id_arg(text: &str) -> PyResult<floe::SnapshotId> {
    floe::SnapshotId::parse_lenient(text).map_err(|e| {
        invalid_input(
            Kind::InvalidSnapshotId,
            format!("invalid snapshot id: `{text}` ({e})"),
        )
    })
}

/// The version a read-only session or an ancestry starts from: exactly one of
/// `branch` (optionally `as_of` a time), `tag` or `snapshot_id` (`ValueError`
/// otherwise).
pub(crate) fn selector(
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

/// A spec version argument (1 or 2; the engine's default when `None`), `ValueError`
/// for another.
pub(crate) fn spec(spec_version: Option<u8>) -> PyResult<floe::format::SpecVersion> {
    spec_version.map_or(Ok(floe::Repository::DEFAULT_SPEC_VERSION), |v| {
        floe::format::SpecVersion::from_byte(v).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}
