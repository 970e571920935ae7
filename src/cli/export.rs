//! `floe export`: a ref's tree written as a plain Zarr v3 filesystem store by
//! [`floe::ops::export_zarr`]. Virtual chunks are read only under `--allow-virtual`
//! prefixes.

use std::io::Write;
use std::path::Path;

use super::args::{RefArgs, VirtualArgs};
use super::target::{open_repo_reading, selector};
use super::{progress, CliResult};

/// Exports the snapshot `at` of the repository at `location` to `dest`.
///
/// # Errors
/// [`super::CliError::Usage`] when `dest` exists and is not empty or cannot be created;
/// unauthorized virtual chunks; repository, storage and file system errors. A failed
/// export removes what it wrote.
pub(super) async fn export(
    out: &mut impl Write,
    location: &str,
    dest: &Path,
    at: &RefArgs,
    virtual_reads: &VirtualArgs,
) -> CliResult<()> {
    let repo = open_repo_reading(location, virtual_reads).await?;
    let session = repo.readonly_session(&selector(&repo, at).await?).await?;
    let bar = progress::bar(0, "chunks");
    let report = progress::follow(&bar);
    let summary = floe::ops::export_zarr(&session, dest, Some(&report)).await?;
    bar.finish_and_clear();
    writeln!(
        out,
        "Exported {} node(s) ({} array(s), {} chunk(s)) of snapshot {} to {}",
        summary.nodes,
        summary.arrays,
        summary.chunks,
        session.snapshot_id(),
        dest.display()
    )?;
    Ok(())
}
