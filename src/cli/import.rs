//! `floe import zarr` (copy a plain Zarr v3/v2/v1 filesystem store into a repository)
//! and `floe import kerchunk` (virtual import of a kerchunk reference set), each as
//! one commit on a branch, rebased and retried when the branch moved meanwhile. The
//! work is done by [`floe::ops`]; this module opens what the arguments name, draws
//! progress, commits and reports.

use std::io::Write;
use std::path::Path;

use super::args::ImportTarget;
use super::target::open_repo;
use super::{plain_store, progress, CliError, CliResult};
use floe::error::Error;
use floe::format::NodePath;
use floe::ops::OpsError;
use floe::repository::Repository;
use floe::session::Session;

impl ImportTarget {
    fn dest(&self) -> CliResult<NodePath> {
        Ok(NodePath::new(self.path.as_deref().unwrap_or("/")).map_err(Error::from)?)
    }

    async fn session(&self) -> CliResult<Session> {
        Ok(self.open().await?.1)
    }

    async fn open(&self) -> CliResult<(Repository, Session)> {
        let repo = open_repo(&self.repo, &[]).await?;
        let session = repo.writable_session(&self.branch).await?;
        Ok((repo, session))
    }
}

/// Copies the plain Zarr store at `src` into the repository as one commit.
///
/// # Errors
/// [`CliError::Usage`] when `src` is not a Zarr store, its root is an array imported
/// at the repository root, or a node already exists where one would be imported;
/// metadata errors of the source; repository, storage and commit errors.
pub(super) async fn import_zarr(
    out: &mut impl Write,
    src: &Path,
    target: &ImportTarget,
) -> CliResult<()> {
    let store = plain_store::open(src)?;
    let dest = target.dest()?;
    let session = target.session().await?;
    let bar = progress::bar(0, "chunks");
    let report = progress::follow(&bar);
    let summary = floe::ops::import_zarr(&session, store.as_ref(), &dest, Some(&report))
        .await
        .map_err(|e| match e {
            OpsError::RootIsArray => CliError::Usage(format!(
                "the root of `{}` is an array, which cannot replace the repository's \
                 root group: import it with --path NAME",
                src.display()
            )),
            OpsError::NodeExists { path } => CliError::Usage(format!(
                "a node already exists at `{path}` on branch `{}`: import under another --path",
                target.branch
            )),
            other => other.into(),
        })?;
    bar.finish_and_clear();

    let id = session.commit(&target.message).await?;
    writeln!(
        out,
        "Imported {} group(s), {} array(s) and {} chunk(s) from {} into {dest}",
        summary.groups,
        summary.arrays,
        summary.chunks,
        src.display()
    )?;
    writeln!(out, "Committed snapshot {id} to branch {}", target.branch)?;
    Ok(())
}

/// Imports the kerchunk reference file `refs` as virtual chunk refs, as one commit.
///
/// # Errors
/// [`CliError::Usage`] when `refs` is not a readable file; kerchunk parse errors;
/// missing sources; repository, storage and commit errors; a reference set past
/// `limits` (generated references, template budget).
pub(super) async fn import_kerchunk(
    out: &mut impl Write,
    refs: &Path,
    target: &ImportTarget,
    limits: &floe::ops::KerchunkLimits,
) -> CliResult<()> {
    if !refs.is_file() {
        return Err(CliError::Usage(format!(
            "`{}` does not exist or is not a file",
            refs.display()
        )));
    }
    let dest = target.dest()?;
    let (repo, session) = target.open().await?;
    let bar = progress::bar(0, "references");
    let report = progress::follow(&bar);
    let summary =
        floe::ops::import_kerchunk_with(&repo, &session, refs, &dest, Some(&report), limits)
            .await?;
    bar.finish_and_clear();
    let id = session.commit(&target.message).await?;
    writeln!(
        out,
        "Imported {} group(s), {} array(s), {} virtual and {} inline chunk(s) from {} into {dest}",
        summary.groups,
        summary.arrays,
        summary.virtual_chunks,
        summary.inline_chunks,
        refs.display()
    )?;
    for prefix in &summary.containers_added {
        writeln!(
            out,
            "Added virtual chunk container {prefix} (readers pass --allow-virtual {prefix})"
        )?;
    }
    writeln!(out, "Committed snapshot {id} to branch {}", target.branch)?;
    Ok(())
}
