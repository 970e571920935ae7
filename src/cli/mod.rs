//! The `floe` command-line interface: clap definitions, dispatch, and one-line errors
//! on stderr with a non-zero exit status.
//!
//! Other tools drive this interface, so command names, arguments and output forms are
//! stable: see each subcommand's help and the README.

mod args;
mod commands;
mod output;
mod target;

use std::process::ExitCode;

use clap::Parser;

pub use args::{Cli, Command};

/// Errors of CLI commands: the library's, plus usage problems found after parsing.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A repository or session operation failed.
    #[error(transparent)]
    Floe(#[from] crate::Error),
    /// A storage location could not be opened.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// The Zarr layer failed.
    #[error(transparent)]
    Zarr(#[from] crate::zarr::store::StoreError),
    /// Bad arguments (region syntax, time format, ...).
    #[error("{0}")]
    Usage(String),
    /// Writing output failed.
    #[error("cannot write output: {0}")]
    Io(#[from] std::io::Error),
}

/// Result of CLI commands.
pub type CliResult<T> = Result<T, CliError>;

/// Runs the CLI with the process arguments; returns the exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Err(e) => {
            // One clear line on stderr.
            let msg = e.to_string().replace('\n', " ");
            eprintln!("floe: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
