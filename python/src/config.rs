//! `RepositoryConfig` and `CompressionConfig`, with Icechunk's Python names: the part
//! of the repository configuration (`config.yaml` on spec 1, the `repo` object on
//! spec 2) that Python users set. Keys floe does not model are kept as read.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// How snapshots, manifests and transaction logs are compressed: zstd at `level`
/// (1-22), or with `None` at each file type's default (3 for snapshots and the `repo`
/// object, as Icechunk; 1 for manifests and transaction logs, where zstd's level 1
/// makes files as small in half the time).
#[pyclass(module = "floe._floe", get_all, set_all, from_py_object)]
#[derive(Clone, Debug)]
pub(crate) struct CompressionConfig {
    /// The zstd level, or `None` for each file type's default.
    level: Option<u8>,
}

#[pymethods]
impl CompressionConfig {
    /// `algorithm` may be `None` or `"zstd"`, the only one the format has.
    #[new]
    #[pyo3(signature = (algorithm=None, level=None))]
    fn new(algorithm: Option<&str>, level: Option<u8>) -> PyResult<Self> {
        match algorithm {
            None | Some("zstd") => Ok(CompressionConfig { level }),
            Some(other) => Err(PyValueError::new_err(format!(
                "compression algorithm `{other}`: only zstd is defined"
            ))),
        }
    }

    /// The default: zstd at each file type's default level.
    #[staticmethod]
    fn default() -> Self {
        CompressionConfig { level: None }
    }

    /// The algorithm, always `"zstd"`.
    #[getter]
    fn algorithm(&self) -> &'static str {
        "zstd"
    }

    fn __repr__(&self) -> String {
        format!(
            "CompressionConfig(algorithm='zstd', level={:?})",
            self.level
        )
    }
}

/// A repository's configuration: pass it to `Repository.create`, read it from
/// `Repository.config`, store a changed one with `Repository.save_config`.
#[pyclass(module = "floe._floe", from_py_object)]
#[derive(Clone, Debug)]
pub(crate) struct RepositoryConfig {
    pub(crate) inner: floe::format::config::RepositoryConfig,
}

#[pymethods]
impl RepositoryConfig {
    /// A configuration with the given settings, the defaults elsewhere.
    #[new]
    #[pyo3(signature = (*, inline_chunk_threshold_bytes=None, compression=None))]
    fn new(
        inline_chunk_threshold_bytes: Option<u16>,
        compression: Option<CompressionConfig>,
    ) -> Self {
        let mut inner = floe::format::config::RepositoryConfig::default();
        inner.set_inline_chunk_threshold_bytes(inline_chunk_threshold_bytes);
        inner.set_compression_level(compression.and_then(|c| c.level));
        RepositoryConfig { inner }
    }

    /// The default configuration.
    #[staticmethod]
    fn default() -> Self {
        RepositoryConfig {
            inner: floe::format::config::RepositoryConfig::default(),
        }
    }

    /// Largest encoded chunk stored inline in a manifest, in bytes (default 512).
    #[getter]
    fn inline_chunk_threshold_bytes(&self) -> u64 {
        self.inner.inline_chunk_threshold_bytes()
    }

    #[setter]
    fn set_inline_chunk_threshold_bytes(&mut self, bytes: Option<u16>) {
        self.inner.set_inline_chunk_threshold_bytes(bytes);
    }

    /// The compression of the repository's metadata files, `None` when the
    /// configuration has no `compression` section (as Icechunk).
    #[getter]
    fn compression(&self) -> Option<CompressionConfig> {
        self.inner
            .raw()
            .get("compression")
            .filter(|c| !c.is_null())?;
        Some(CompressionConfig {
            level: self
                .inner
                .compression_level()
                .and_then(|l| u8::try_from(l).ok()),
        })
    }

    #[setter]
    fn set_compression(&mut self, compression: Option<CompressionConfig>) {
        self.inner
            .set_compression_level(compression.and_then(|c| c.level));
    }

    fn __repr__(&self) -> String {
        format!(
            "RepositoryConfig(inline_chunk_threshold_bytes={}, compression={})",
            self.inline_chunk_threshold_bytes(),
            self.compression()
                .map_or_else(|| "None".to_owned(), |c| c.__repr__())
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CompressionConfig>()?;
    m.add_class::<RepositoryConfig>()?;
    Ok(())
}
