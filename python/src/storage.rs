//! Storage constructors, as Icechunk's: local filesystem, in memory, S3.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::errors::IntoPyResult;

/// Where a repository lives.
#[pyclass(module = "floe._floe", frozen)]
#[derive(Clone)]
pub(crate) struct Storage {
    pub(crate) inner: Arc<dyn floe::storage::Storage>,
}

/// The URL a storage is re-created from in another process; `None` for in-memory
/// storage, which lives in one process only.
pub(crate) fn portable_url(storage: &dyn floe::storage::Storage) -> Option<String> {
    let url = storage.root_url();
    (!url.starts_with("memory://")).then_some(url)
}

/// Re-creates a storage from its URL (credentials from the environment): how
/// pickled storages, sessions and forks come back in a worker.
#[pyfunction]
pub(crate) fn storage_from_url(url: &str) -> PyResult<Storage> {
    Ok(Storage {
        inner: floe::storage::create_storage(url, None).py()?,
    })
}

#[pymethods]
impl Storage {
    fn __repr__(&self) -> String {
        format!("<floe.Storage {}>", self.inner.root_url())
    }

    /// The storage's root URL.
    #[getter]
    fn url(&self) -> String {
        self.inner.root_url()
    }

    /// Pickles as its URL (no credentials: the receiver reads its own environment).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let url = portable_url(slf.get().inner.as_ref()).ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err("in-memory storage cannot be pickled")
        })?;
        let f = slf.py().import("floe._floe")?.getattr("storage_from_url")?;
        Ok((f, (url,)))
    }
}

/// A repository in the local directory `path` (created when missing), with
/// cross-process compare-and-swap.
#[pyfunction]
fn local_filesystem_storage(path: &str) -> PyResult<Storage> {
    let inner = floe::storage::LocalStorage::new(std::path::Path::new(path)).py()?;
    Ok(Storage {
        inner: Arc::new(inner),
    })
}

/// A repository in this process's memory.
#[pyfunction]
fn in_memory_storage() -> Storage {
    Storage {
        inner: floe::storage::new_in_memory_storage(),
    }
}

/// A repository under `prefix` of an S3 (or S3-compatible) bucket. Credentials and
/// unset options come from the `AWS_*` environment variables when `from_env` (the
/// default) is true.
#[pyfunction]
#[pyo3(signature = (*, bucket, prefix=None, region=None, endpoint_url=None, allow_http=false, from_env=true))]
fn s3_storage(
    bucket: &str,
    prefix: Option<&str>,
    region: Option<String>,
    endpoint_url: Option<String>,
    allow_http: bool,
    from_env: bool,
) -> PyResult<Storage> {
    let mut opts = if from_env {
        floe::storage::S3Options::from_env()
    } else {
        floe::storage::S3Options::default()
    };
    if region.is_some() {
        opts.region = region;
    }
    if endpoint_url.is_some() {
        opts.endpoint = endpoint_url;
    }
    opts.allow_http |= allow_http;
    let inner = floe::storage::new_s3_storage(bucket, prefix.unwrap_or(""), opts).py()?;
    Ok(Storage { inner })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Storage>()?;
    m.add_function(wrap_pyfunction!(local_filesystem_storage, m)?)?;
    m.add_function(wrap_pyfunction!(in_memory_storage, m)?)?;
    m.add_function(wrap_pyfunction!(s3_storage, m)?)?;
    m.add_function(wrap_pyfunction!(storage_from_url, m)?)?;
    Ok(())
}
