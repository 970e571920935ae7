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

/// A ready-to-run engine call of a binding method: built, from owned and already
/// checked arguments, by the one function that handles the method's arguments; the
/// blocking method runs it with [`block_on`], its `*_async` twin hands it to
/// `pyo3_async_runtimes::tokio::future_into_py`.
pub(crate) trait Call<T>:
    std::future::Future<Output = PyResult<T>> + Send + 'static
{
}

impl<T, F> Call<T> for F where F: std::future::Future<Output = PyResult<T>> + Send + 'static {}
