//! `floe import zarr` (copy a plain Zarr v3/v2 filesystem store into a repository)
//! and `floe import kerchunk` (virtual import of a kerchunk reference set), each as
//! one commit on a branch, rebased and retried when the branch moved meanwhile.
//!
//! Icechunk maps only default chunk keys (`c/0/1`) to chunks, so imported arrays get
//! the `default` chunk key encoding with separator `/`; v2 arrays are translated to
//! v3 metadata. Encoded chunks are copied as they are: chunks are stored by grid
//! index, and the (translated) codec chain decodes the source's bytes unchanged.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::args::ImportTarget;
use super::target::open_repo;
use super::{plain_store, progress, CliError, CliResult};
use crate::error::Error;
use crate::format::NodePath;
use crate::session::store::array_definition;
use crate::session::Session;
use crate::zarr::chunk_key_encoding::Separator;
use crate::zarr::node::node_prefix;
use crate::zarr::{walk, ChunkKeyEncodingKind, NodeMetadata};

/// Chunks copied concurrently.
const CONCURRENCY: usize = 16;

impl ImportTarget {
    fn dest(&self) -> CliResult<NodePath> {
        Ok(NodePath::new(self.path.as_deref().unwrap_or("/")).map_err(Error::from)?)
    }

    async fn session(&self) -> CliResult<Session> {
        let repo = open_repo(&self.repo, &[]).await?;
        Ok(repo.writable_session(&self.branch).await?)
    }
}

/// One chunk to copy: source key, destination array, grid index.
struct ChunkJob {
    key: String,
    path: NodePath,
    index: Vec<u32>,
}

/// `dest` joined with a store path relative to the source root (`""` for the root).
fn join(dest: &NodePath, rel: &str) -> CliResult<NodePath> {
    let p = if rel.is_empty() {
        Ok(dest.clone())
    } else if dest.is_root() {
        NodePath::new(rel)
    } else {
        NodePath::new(&format!("{dest}/{rel}"))
    };
    Ok(p.map_err(Error::from)?)
}

/// Creates the missing ancestors of `dest` as groups without attributes.
fn ensure_parents(session: &Session, dest: &NodePath) -> CliResult<()> {
    let mut missing = Vec::new();
    let mut p = dest.parent();
    while let Some(parent) = p {
        match session.get_node(&parent) {
            Ok(n) if n.is_group() => break,
            Ok(_) => return Err(Error::ParentNotGroup { path: dest.clone() }.into()),
            Err(_) => missing.push(parent.clone()),
        }
        p = parent.parent();
    }
    for path in missing.into_iter().rev() {
        let meta = crate::zarr::GroupMetadata::default();
        session.add_group(&path, Bytes::from(meta.to_bytes()))?;
    }
    Ok(())
}

/// Copies the plain Zarr store at `src` into the repository as one commit.
///
/// # Errors
/// [`CliError::Usage`] when `src` is not a Zarr store, its root is an array imported
/// at the repository root, or a node already exists where one would be imported;
/// metadata errors of the source; repository, storage and commit errors.
pub async fn import_zarr(out: &mut impl Write, src: &Path, target: &ImportTarget) -> CliResult<()> {
    let store = plain_store::open(src)?;
    let nodes = walk(store.as_ref(), "").await?;
    let dest = target.dest()?;
    let session = target.session().await?;

    // Check everything before writing anything.
    for (rel, meta) in &nodes {
        let path = join(&dest, rel)?;
        if path.is_root() {
            if matches!(meta, NodeMetadata::Array(_)) {
                return Err(CliError::Usage(format!(
                    "the root of `{}` is an array, which cannot replace the repository's \
                     root group: import it with --path NAME",
                    src.display()
                )));
            }
        } else if session.get_node(&path).is_ok() {
            return Err(CliError::Usage(format!(
                "a node already exists at `{path}` on branch `{}`: import under another --path",
                target.branch
            )));
        }
    }
    ensure_parents(&session, &dest)?;

    let (mut groups, mut arrays) = (0usize, 0usize);
    let mut jobs = Vec::new();
    for (rel, meta) in nodes {
        let path = join(&dest, &rel)?;
        match meta {
            NodeMetadata::Group(mut g) => {
                // Consolidated metadata of the source would be stale in the repository.
                g.extra.remove("consolidated_metadata");
                if path.is_root() && session.get_node(&path).is_ok() {
                    // Keep the repository's root group unless the source's has attributes.
                    if !g.attributes.is_empty() {
                        session.update_group(&path, Bytes::from(g.to_bytes()))?;
                    }
                } else {
                    session.add_group(&path, Bytes::from(g.to_bytes()))?;
                }
                groups += 1;
            }
            NodeMetadata::Array(mut a) => {
                let source_keys = a.chunk_key_encoding.encoding();
                a.chunk_key_encoding = ChunkKeyEncodingKind::Default(Separator::Slash);
                session.add_array(&path, array_definition(&path, Bytes::from(a.to_bytes()))?)?;
                arrays += 1;
                let grid: Vec<u64> = a
                    .shape
                    .iter()
                    .zip(&a.chunk_shape)
                    .map(|(&s, &c)| s.div_ceil(c.max(1)))
                    .collect();
                let prefix = node_prefix(&rel);
                for key in store.list_prefix(&prefix).await? {
                    let Some(idx) = source_keys.decode(&key[prefix.len()..], a.ndim()) else {
                        continue;
                    };
                    if idx.iter().zip(&grid).any(|(i, g)| i >= g)
                        || idx.iter().any(|&i| i > u64::from(u32::MAX))
                    {
                        tracing::warn!("skipping `{key}`: outside the chunk grid of `{path}`");
                        continue;
                    }
                    jobs.push(ChunkJob {
                        key,
                        path: path.clone(),
                        index: idx.into_iter().map(|i| i as u32).collect(),
                    });
                }
            }
        }
    }

    let bar = progress::bar(jobs.len() as u64, "chunks");
    let chunks = jobs.len();
    futures::stream::iter(jobs)
        .map(|job| {
            let (store, session, bar) = (&store, &session, &bar);
            async move {
                if let Some(bytes) = store.get(&job.key).await? {
                    session.set_chunk(&job.path, &job.index, bytes).await?;
                }
                bar.inc(1);
                Ok::<(), CliError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await?;
    bar.finish_and_clear();

    let id = session.commit(&target.message).await?;
    writeln!(
        out,
        "Imported {groups} group(s), {arrays} array(s) and {chunks} chunk(s) from {} into {dest}",
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
pub async fn import_kerchunk(
    out: &mut impl Write,
    refs: &Path,
    target: &ImportTarget,
    limits: &crate::virtual_refs::KerchunkLimits,
) -> CliResult<()> {
    if !refs.is_file() {
        return Err(CliError::Usage(format!(
            "`{}` does not exist or is not a file",
            refs.display()
        )));
    }
    let dest = target.dest()?;
    let session = target.session().await?;
    let bar = progress::bar(0, "references");
    let report = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let summary =
        crate::virtual_refs::import_kerchunk_with(&session, refs, &dest, Some(&report), limits)
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
