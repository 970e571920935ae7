//! Python bindings of floe (module `floe._floe`; the `floe` Python package wraps it).
//!
//! Names and semantics follow Icechunk's Python API so that users switch by changing
//! an import: `Repository`, `Session`, storage constructors, `FloeError` and
//! `ConflictError`. Blocking calls release the GIL and run on one shared tokio
//! runtime (the one `pyo3-async-runtimes` drives awaitables with), so Python threads
//! and zarr's async pipeline overlap I/O.
//!
//! This root only declares the modules and registers them; no module names it
//! (`tests/bindings_module_graph.rs` checks that the modules import each other
//! without cycles).

mod aio;
mod borrowed_buffer;
mod completions;
mod config;
mod convert;
mod credentials;
mod errors;
mod logs;
mod pipeline;
mod repository;
mod runtime;
mod session;
mod storage;
mod virtual_chunks;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _floe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The version of the engine this extension was built from (Cargo's package
    // version); `floe.__version__` exposes it.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    logs::register(m)?;
    config::register(m)?;
    credentials::register(m)?;
    storage::register(m)?;
    repository::register(m)?;
    session::register(m)?;
    aio::register(m)?;
    virtual_chunks::register(m)?;
    pipeline::register(m)?;
    completions::register(m)?;
    Ok(())
}
