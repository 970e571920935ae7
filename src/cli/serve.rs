//! `floe serve`: every version of a repository over HTTP ([`floe::serve`]), until
//! ctrl-c or SIGTERM.

use std::io::Write;

use super::args::{ServeArgs, VirtualArgs};
use super::target::open_repo_reading;
use super::{CliError, CliResult};
use floe::serve::{ServeOptions, Server};
use floe::virtual_refs::VirtualAccess;

/// Serves the repository `args.repo` until a signal; prints the URL it listens on.
///
/// # Errors
/// [`CliError::Usage`] for a non-loopback `--bind` without `--public`, an unreadable
/// or empty token file, a bad `--cors-origin` or `--virtual-container`; repository
/// errors; binding errors.
pub(super) async fn serve(out: &mut impl Write, args: &ServeArgs) -> CliResult<()> {
    if !args.bind.ip().is_loopback() && !args.public {
        return Err(CliError::Usage(
            floe::serve::ServeError::NotLoopback { addr: args.bind }.to_string(),
        ));
    }
    let token = match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Usage(format!("--token-file {}: {e}", path.display())))?;
            let token = text.trim().to_string();
            if token.is_empty() {
                return Err(CliError::Usage(format!(
                    "--token-file {}: the file holds no token",
                    path.display()
                )));
            }
            Some(token)
        }
        None => None,
    };
    let virtual_reads = VirtualArgs {
        virtual_containers: args.virtual_containers.clone(),
        ..VirtualArgs::default()
    };
    let repo = open_repo_reading(&args.repo, &virtual_reads).await?;
    let virtual_access =
        VirtualAccess::prefixes(args.virtual_containers.iter().map(|c| &c.url_prefix))
            .map_err(|e| CliError::Usage(format!("--virtual-container: {e}")))?;
    let options = ServeOptions {
        bind: args.bind,
        public: args.public,
        token,
        cors_origin: args.cors_origin.clone(),
        virtual_access,
        max_connections: args.max_connections.max(1),
        request_timeout: args.request_timeout,
        ..ServeOptions::default()
    };
    let server = Server::bind(repo, options)
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    writeln!(
        out,
        "Serving {} at http://{}/ (Zarr: /zarr/branch/main/; ctrl-c to stop)",
        args.repo,
        server.local_addr()
    )?;
    out.flush()?;
    let handle = server.shutdown_handle();
    tokio::spawn(async move {
        shutdown_signal().await;
        handle.shutdown();
    });
    server
        .run()
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(())
}

/// Ctrl-c, or SIGTERM on Unix.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
