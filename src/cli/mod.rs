//! The `floe` command-line interface: clap definitions, dispatch, and one-line errors
//! on stderr with a non-zero exit status.
//!
//! Other tools drive this interface, so command names, arguments and output forms are
//! stable: see each subcommand's help and the README.
//!
//! Modules, one job each: `args` (clap), `commands` (dispatch), `history` (info,
//! log, diff), `refs` (branches and tags), `ls`, `cat` and `text` (values),
//! `region` (`--region`), `import`, `export`, `serve`, `lifecycle` (expire, gc), `demo`,
//! `plain_store` (plain Zarr directories), `target` (what REPO points at),
//! `progress`, `output`.

mod args;
mod cat;
mod commands;
mod demo;
mod export;
mod history;
mod import;
mod lifecycle;
mod ls;
mod output;
mod plain_store;
mod progress;
mod refs;
mod region;
mod repair;
mod retention;
mod serve;
mod target;
mod text;

use std::process::ExitCode;

pub(crate) use args::Cli;

use floe::virtual_refs::VirtualChunkError;

/// Errors of CLI commands: the library's, plus usage problems found after parsing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// A repository or session operation failed.
    #[error(transparent)]
    Floe(#[from] floe::Error),
    /// A storage location could not be opened.
    #[error(transparent)]
    Storage(#[from] floe::storage::StorageError),
    /// A Zarr store operation failed.
    #[error(transparent)]
    Store(#[from] floe::zarr::store::StoreError),
    /// The Zarr layer (metadata, arrays, codecs) failed.
    #[error(transparent)]
    Zarr(#[from] floe::zarr::ZarrError),
    /// Bad arguments or input (region syntax, time format, not a Zarr store, ...).
    #[error("{0}")]
    Usage(String),
    /// Writing output failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A check ran and failed (`floe verify` found problems): the output says what,
    /// and the exit status is non-zero.
    #[error("{0}")]
    Check(String),
}

impl From<floe::ops::OpsError> for CliError {
    fn from(e: floe::ops::OpsError) -> Self {
        use floe::ops::OpsError;
        match e {
            OpsError::Floe(e) => CliError::Floe(e),
            OpsError::Zarr(e) => CliError::Zarr(e),
            OpsError::Store(e) => CliError::Store(e),
            other => CliError::Usage(other.to_string()),
        }
    }
}

/// Result of CLI commands.
pub(crate) type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// The one-line message printed on stderr. A virtual chunk read refused for want
    /// of authorization names the `--allow-virtual` prefix that allows it.
    pub(crate) fn message(&self) -> String {
        let msg = match unauthorized_virtual(self) {
            Some((array, url, prefix)) => format!(
                "{}reading virtual chunks from `{url}` is not authorized: pass \
                 `--allow-virtual {prefix}` to read them",
                array.map(|a| format!("array `{a}`: ")).unwrap_or_default()
            ),
            None => match untrusted_container(self) {
                Some(prefix) => {
                    format!("{self} (with floe's CLI: `--virtual-container {prefix}=ENDPOINT`)")
                }
                None => self.to_string(),
            },
        };
        // One line, and no control character from the repository reaches the
        // terminal.
        output::escape_controls(&msg.replace(['\n', '\r'], " ")).into_owned()
    }
}

/// The container prefix of a virtual chunk read refused because the repository
/// named its endpoint ([`VirtualChunkError::UntrustedEndpoint`]) in the error's
/// source chain.
fn untrusted_container(err: &CliError) -> Option<String> {
    let first: &(dyn std::error::Error + 'static) = match err {
        CliError::Floe(e) => e,
        CliError::Storage(e) => e,
        CliError::Store(e) => e,
        CliError::Zarr(e) => e,
        CliError::Usage(_) | CliError::Io(_) | CliError::Check(_) => return None,
    };
    let mut cur = Some(first);
    while let Some(e) = cur {
        let floe_error = e
            .downcast_ref::<floe::Error>()
            .or_else(|| e.downcast_ref::<Box<floe::Error>>().map(|b| &**b));
        let virtual_error = match floe_error {
            Some(floe::Error::VirtualChunk { source, .. }) => Some(source),
            _ => e.downcast_ref::<VirtualChunkError>(),
        };
        if let Some(VirtualChunkError::UntrustedEndpoint { container, .. }) = virtual_error {
            return Some(container.clone());
        }
        cur = e.source();
    }
    None
}

/// Finds an unauthorized virtual chunk read in the error's source chain: (array path,
/// URL, container prefix).
fn unauthorized_virtual(err: &CliError) -> Option<(Option<String>, String, String)> {
    let first: &(dyn std::error::Error + 'static) = match err {
        CliError::Floe(e) => e,
        CliError::Storage(e) => e,
        CliError::Store(e) => e,
        CliError::Zarr(e) => e,
        CliError::Usage(_) | CliError::Io(_) | CliError::Check(_) => return None,
    };
    let mut array = None;
    let mut cur = Some(first);
    while let Some(e) = cur {
        // Stores carry repository errors boxed (`StoreError::Repository`).
        let floe_error = e
            .downcast_ref::<floe::Error>()
            .or_else(|| e.downcast_ref::<Box<floe::Error>>().map(|b| &**b));
        if let Some(floe::Error::VirtualChunk { path, source, .. }) = floe_error {
            array = Some(path.to_string());
            if let VirtualChunkError::Unauthorized { url, container } = source {
                return Some((array, url.clone(), container.clone()));
            }
        }
        if let Some(VirtualChunkError::Unauthorized { url, container }) =
            e.downcast_ref::<VirtualChunkError>()
        {
            return Some((array, url.clone(), container.clone()));
        }
        cur = e.source();
    }
    None
}

/// Runs the CLI with the process arguments; returns the exit status.
pub(crate) fn main() -> ExitCode {
    let cli = parse_args();
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("floe: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`floe cat ... | head`) is not an error worth a message.
        Err(CliError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            // One clear line on stderr.
            eprintln!("floe: error: {}", e.message());
            ExitCode::FAILURE
        }
    }
}

/// Parses the process arguments (exiting with clap's message on an error). An unknown
/// subcommand a couple of keystrokes from a known one (`lg`, `lgo` → `log`) gets
/// clap's "a similar subcommand exists" tip, which clap's own measure misses for
/// short names.
fn parse_args() -> Cli {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::{CommandFactory, FromArgMatches};
    let mut cmd = Cli::command();
    let mut err = match cmd.try_get_matches_from_mut(std::env::args_os()) {
        Ok(matches) => match Cli::from_arg_matches(&matches) {
            Ok(cli) => return cli,
            Err(e) => e,
        },
        Err(e) => e,
    };
    if err.kind() == ErrorKind::InvalidSubcommand
        && err.get(ContextKind::SuggestedSubcommand).is_none()
    {
        if let Some(ContextValue::String(typed)) = err.get(ContextKind::InvalidSubcommand) {
            let names = cmd.get_subcommands().map(|c| c.get_name().to_string());
            if let Some(best) = closest_name(typed, names) {
                err.insert(ContextKind::SuggestedSubcommand, ContextValue::String(best));
            }
        }
    }
    err.exit()
}

/// The name among `names` closest to `typed` by edits (insertions, deletions,
/// substitutions, swaps of neighbours), when at most 2 away and fewer than
/// `typed`'s length.
fn closest_name(typed: &str, names: impl Iterator<Item = String>) -> Option<String> {
    names
        .map(|n| (strsim::osa_distance(typed, &n), n))
        .filter(|(d, _)| *d <= 2 && *d < typed.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colors only on a terminal: a log piped or saved holds no escape sequences.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}
