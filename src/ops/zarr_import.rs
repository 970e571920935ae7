//! Copying a Zarr v3/v2/v1 store into a session.
//!
//! Icechunk maps only default chunk keys (`c/0/1`, spec 1 "chunk references") to
//! chunks, so imported arrays get the `default` chunk key encoding with separator `/`;
//! v2 and v1 arrays are translated to v3 metadata (a v1 store, one array found by
//! its `meta` key, imports as that array). Encoded chunks are copied as they are:
//! chunks are stored by grid index, and the (translated) codec chain decodes the
//! source's bytes unchanged.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::{OpsError, OpsResult, Progress, CONCURRENCY};
use crate::error::Error;
use crate::format::{NodePath, MAX_CHUNK_COORDINATE};
use crate::session::array_definition;
use crate::session::Session;
use crate::zarr::chunk_key_encoding::Separator;
use crate::zarr::node::node_prefix;
use crate::zarr::{walk, ChunkKeyEncodingKind, GroupMetadata, NodeMetadata, Store};

/// What [`import_zarr`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZarrImportSummary {
    /// Groups created (or, for the root, updated).
    pub groups: usize,
    /// Arrays created.
    pub arrays: usize,
    /// Chunks copied.
    pub chunks: usize,
    /// Keys under an array that decode to a chunk index outside its chunk grid (or
    /// above floe's 2^32 chunks per dimension), not copied.
    pub skipped: usize,
}

/// One chunk to copy: source key, destination array, grid index.
struct ChunkJob {
    key: String,
    path: NodePath,
    index: Vec<u64>,
}

/// `dest` joined with a store path relative to the source root (`""` for the root).
fn join(dest: &NodePath, rel: &str) -> OpsResult<NodePath> {
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
fn ensure_parents(session: &Session, dest: &NodePath) -> OpsResult<()> {
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
        let meta = GroupMetadata::default();
        session.add_group(&path, Bytes::from(meta.to_bytes()))?;
    }
    Ok(())
}

/// Copies every group, array and chunk of the Zarr hierarchy in `source` (a v3, v2
/// or v1 store: a filesystem directory, a memory store, another session's store) into
/// `session` under `dest`, creating missing parent groups. Nothing is committed.
///
/// Consolidated metadata of the source is dropped (it would be stale). The
/// repository's root group is kept unless the source's root group has attributes.
/// Everything is checked before anything is written: on an error, the session is
/// unchanged unless the error came from copying chunks.
///
/// # Errors
/// [`OpsError::RootIsArray`] when the source's root is an array and `dest` is the
/// root; [`OpsError::NodeExists`] when a node already exists where one would be
/// imported; [`OpsError::Zarr`] for bad source metadata; [`OpsError::Store`] when
/// reading the source fails; [`OpsError::Floe`] for session errors
/// ([`Error::ReadOnlySession`], [`Error::ParentNotGroup`], storage errors).
pub async fn import_zarr(
    session: &Session,
    source: &dyn Store,
    dest: &NodePath,
    progress: Option<Progress<'_>>,
) -> OpsResult<ZarrImportSummary> {
    let nodes = walk(source, "").await?;
    for (rel, meta) in &nodes {
        let path = join(dest, rel)?;
        if path.is_root() {
            if matches!(meta, NodeMetadata::Array(_)) {
                return Err(OpsError::RootIsArray);
            }
        } else if session.get_node(&path).is_ok() {
            return Err(OpsError::NodeExists { path });
        }
    }
    ensure_parents(session, dest)?;

    let mut summary = ZarrImportSummary::default();
    let mut jobs = Vec::new();
    for (rel, meta) in nodes {
        let path = join(dest, &rel)?;
        match meta {
            NodeMetadata::Group(mut g) => {
                g.extra.remove("consolidated_metadata");
                if path.is_root() && session.get_node(&path).is_ok() {
                    if !g.attributes.is_empty() {
                        session.update_group(&path, Bytes::from(g.to_bytes()))?;
                    }
                } else {
                    session.add_group(&path, Bytes::from(g.to_bytes()))?;
                }
                summary.groups += 1;
            }
            NodeMetadata::Array(mut a) => {
                let source_keys = a.chunk_key_encoding.encoding();
                a.chunk_key_encoding = ChunkKeyEncodingKind::Default(Separator::Slash);
                session.add_array(&path, array_definition(&path, Bytes::from(a.to_bytes()))?)?;
                summary.arrays += 1;
                let grid: Vec<u64> = a
                    .shape
                    .iter()
                    .zip(&a.chunk_shape)
                    .map(|(&s, &c)| s.div_ceil(c.max(1)))
                    .collect();
                let prefix = node_prefix(&rel);
                for key in source.list_prefix(&prefix).await? {
                    let Some(idx) = source_keys.decode(&key[prefix.len()..], a.ndim()) else {
                        continue;
                    };
                    let index: Option<Vec<u64>> = idx
                        .iter()
                        .zip(&grid)
                        .map(|(&i, &g)| (i < g && i <= MAX_CHUNK_COORDINATE).then_some(i))
                        .collect();
                    let Some(index) = index else {
                        tracing::warn!("skipping `{key}`: outside the chunk grid of `{path}`");
                        summary.skipped += 1;
                        continue;
                    };
                    jobs.push(ChunkJob {
                        key,
                        path: path.clone(),
                        index,
                    });
                }
            }
        }
    }

    let total = jobs.len() as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    summary.chunks = jobs.len();
    futures::stream::iter(jobs)
        .map(|job| {
            let done = &done;
            async move {
                if let Some(bytes) = source.get(&job.key).await? {
                    session.set_chunk(&job.path, &job.index, bytes).await?;
                }
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if let Some(report) = progress {
                    report(n, total);
                }
                Ok::<(), OpsError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await?;
    Ok(summary)
}
