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

/// Levenshtein distance of two short ASCII words.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// One directive in `EnvFilter` syntax: Icechunk's `target:level` becomes
/// `target=level`, and the targets `icechunk` (Icechunk's crate) and its modules
/// name floe's. Prints a warning for a target that looks like a misspelling of
/// `icechunk` or `floe` (it would silently match nothing).
fn directive(d: &str) -> String {
    let d = d.trim();
    let target_end = d.find(['=', '[']).unwrap_or(d.len());
    let (mut target, mut rest) = (d[..target_end].to_string(), d[target_end..].to_string());
    // `target:level` (a single colon, not a `::` path separator).
    if rest.is_empty() {
        if let Some(i) = target.rfind(':') {
            let single = i == 0 || target.as_bytes()[i - 1] != b':';
            if single && i + 1 < target.len() {
                rest = format!("={}", &target[i + 1..]);
                target.truncate(i);
            }
        }
    }
    let first = target.split("::").next().unwrap_or("").to_string();
    let levels = ["trace", "debug", "info", "warn", "error", "off"];
    if first.len() > 4 && !levels.contains(&first.as_str()) {
        for name in ["icechunk", "floe"] {
            let dist = distance(&first, name);
            if first != name && dist > 0 && dist <= 2 {
                eprintln!(
                    "WARNING: log filter target `{first}` matches no module: did you mean `{name}`?"
                );
            }
        }
    }
    if first == "icechunk" {
        target = format!("floe{}", &target["icechunk".len()..]);
    }
    format!("{target}{rest}")
}

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
    let text: Vec<String> = text
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(self::directive)
        .collect();
    EnvFilter::try_new(text.join(",")).unwrap_or_else(|_| EnvFilter::new("off"))
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

#[cfg(test)]
mod tests {
    use super::{directive, distance};

    #[test]
    fn icechunk_targets_and_colon_levels_become_floe_directives() {
        assert_eq!(directive("icechunk:debug"), "floe=debug");
        assert_eq!(
            directive("icechunk::repository:trace"),
            "floe::repository=trace"
        );
        assert_eq!(directive("tokio::io=warn"), "tokio::io=warn");
        assert_eq!(directive("debug"), "debug");
        assert_eq!(distance("icehunk", "icechunk"), 1);
        assert_eq!(distance("chunk", "icechunk"), 3);
    }
}
