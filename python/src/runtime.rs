//! The one tokio runtime of the bindings (the one `pyo3-async-runtimes` drives
//! awaitables with) and how the blocking API waits on it.

use pyo3::prelude::*;

/// Runs `fut` to completion on the shared runtime without holding the GIL.
pub(crate) fn block_on<F>(py: Python<'_>, fut: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    py.detach(|| pyo3_async_runtimes::tokio::get_runtime().block_on(fut))
}
