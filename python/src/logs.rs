//! floe's logs (the `tracing` events of the engine) on the console, as Icechunk's
//! `initialize_logs` / `set_logs_filter`: off unless a filter is given, by argument
//! or in the environment variable `FLOE_LOG` (or Icechunk's `ICECHUNK_LOG`), with
//! `tracing-subscriber`'s `EnvFilter` syntax (`debug`, `floe=debug,info`; `""` and
//! `"false"` turn logging off). Lines go to stderr, or to stdout when
//! `FLOE_LOG_TO_STDOUT` / `ICECHUNK_LOG_TO_STDOUT` is set when logging starts
//! (at `import floe`).

use std::sync::OnceLock;

use pyo3::prelude::*;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// The reload handle of the installed filter; set once logging started.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The environment variables a filter is read from, in order.
const FILTER_VARS: [&str; 2] = ["FLOE_LOG", "ICECHUNK_LOG"];
/// The environment variables that send logs to stdout.
const STDOUT_VARS: [&str; 2] = ["FLOE_LOG_TO_STDOUT", "ICECHUNK_LOG_TO_STDOUT"];

/// The filter for `directive`, or from the environment when `None`; logging off
/// when neither says anything, or says `""` or `"false"`, or cannot be parsed.
fn filter(directive: Option<&str>) -> EnvFilter {
    let text = match directive {
        Some(d) => d.to_string(),
        None => FILTER_VARS
            .iter()
            .find_map(|v| std::env::var(v).ok())
            .unwrap_or_default(),
    };
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("false") {
        return EnvFilter::new("off");
    }
    EnvFilter::try_new(text).unwrap_or_else(|_| EnvFilter::new("off"))
}

/// Installs the console subscriber with `filter` (once per process); afterwards
/// only swaps the filter.
fn install(filter: EnvFilter) {
    if let Some(handle) = FILTER.get() {
        let _ = handle.reload(filter);
        return;
    }
    let (layer, handle) = reload::Layer::new(filter);
    let to_stdout = STDOUT_VARS.iter().any(|v| std::env::var_os(v).is_some());
    let fmt = tracing_subscriber::fmt::layer().with_ansi(false);
    let installed = if to_stdout {
        tracing_subscriber::registry()
            .with(layer)
            .with(fmt.with_writer(std::io::stdout))
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(layer)
            .with(fmt.with_writer(std::io::stderr))
            .try_init()
    };
    // Another subscriber (installed by the embedding program) wins: keep it.
    if installed.is_ok() {
        let _ = FILTER.set(handle);
    }
}

/// Starts logging with the filter in `FLOE_LOG` / `ICECHUNK_LOG` (off when unset);
/// called by `import floe`.
#[pyfunction]
fn initialize_logs() {
    install(filter(None));
}

/// Sets the log filter (`EnvFilter` directives such as `"debug"` or
/// `"floe=debug,info"`; `""` or `"false"`: off); with `None`, reads it again from
/// `FLOE_LOG` / `ICECHUNK_LOG`.
#[pyfunction]
#[pyo3(signature = (log_filter_directive=None))]
fn set_logs_filter(log_filter_directive: Option<&str>) {
    install(filter(log_filter_directive));
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(initialize_logs, m)?)?;
    m.add_function(wrap_pyfunction!(set_logs_filter, m)?)?;
    Ok(())
}
