//! Writing a session's tree as a plain Zarr v3 filesystem store (Zarr v3 spec,
//! "Stores": the filesystem store layout): every node's `zarr.json` as stored, and
//! every chunk's encoded bytes under the array's own chunk key encoding.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::StreamExt;
use serde_json::Value;

use super::{OpsError, OpsResult, Progress, CONCURRENCY};
use crate::format::NodePath;
use crate::session::Session;
use crate::zarr::chunk_key_encoding::{chunk_key_encoding_from_json, ChunkKeyEncoding};
use crate::zarr::node::{metadata_key, node_prefix};
use crate::zarr::{FilesystemStore, Store, ZarrError};

/// What [`export_zarr`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportSummary {
    /// Nodes (groups and arrays) written.
    pub nodes: usize,
    /// Arrays among them.
    pub arrays: usize,
    /// Chunks written.
    pub chunks: usize,
}

/// One chunk to copy: source array, grid index, destination key.
struct ChunkJob {
    path: NodePath,
    index: Vec<u64>,
    key: String,
}

/// Checks that `dest` does not exist or is an empty directory; returns whether it
/// exists.
fn check_dest(dest: &Path) -> OpsResult<bool> {
    if !dest.exists() {
        return Ok(false);
    }
    let empty = dest.is_dir()
        && std::fs::read_dir(dest)
            .map_err(|source| OpsError::Io {
                action: "read",
                path: dest.to_path_buf(),
                source,
            })?
            .next()
            .is_none();
    if !empty {
        return Err(OpsError::DestinationNotEmpty {
            path: dest.to_path_buf(),
        });
    }
    Ok(true)
}

/// Removes what a failed export wrote (`dest` itself when the export created it).
fn clean_up(dest: &Path, existed: bool) {
    if existed {
        if let Ok(entries) = std::fs::read_dir(dest) {
            for e in entries.flatten() {
                let p = e.path();
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    } else {
        let _ = std::fs::remove_dir_all(dest);
    }
}

/// The chunk key encoding of an array's `zarr.json` (default `/` when it has none).
fn key_encoding(path: &NodePath, meta: &Value) -> OpsResult<Box<dyn ChunkKeyEncoding>> {
    match meta.get("chunk_key_encoding") {
        None => chunk_key_encoding_from_json(&serde_json::json!({"name": "default"})),
        Some(enc) => chunk_key_encoding_from_json(enc),
    }
    .map_err(|e| OpsError::Zarr(ZarrError::from(e).at_path(path.key_prefix())))
}

/// Writes every node and chunk of `session` (its snapshot plus any uncommitted
/// changes) into `dest` as a plain Zarr v3 filesystem store. `dest` must not exist or
/// must be an empty directory. Virtual chunks are read through the session, so only
/// those under the prefixes the repository was opened with are readable.
///
/// A failed export removes what it wrote (and `dest` itself when the export created
/// it); chunks already being copied when the failure happened are awaited first, so
/// nothing is written after this returns.
///
/// # Errors
/// [`OpsError::DestinationNotEmpty`]; [`OpsError::Io`] when `dest` cannot be read or
/// created; [`OpsError::Floe`] for chunk reads (storage errors, unauthorized or
/// changed virtual chunks); [`OpsError::Store`] for writes into `dest`;
/// [`OpsError::Zarr`] for an array whose chunk key encoding is invalid.
pub async fn export_zarr(
    session: &Session,
    dest: &Path,
    progress: Option<Progress<'_>>,
) -> OpsResult<ExportSummary> {
    let existed = check_dest(dest)?;
    std::fs::create_dir_all(dest).map_err(|source| OpsError::Io {
        action: "create",
        path: dest.to_path_buf(),
        source,
    })?;
    let result = write_all(session, dest, progress).await;
    if result.is_err() {
        clean_up(dest, existed);
    }
    result
}

/// Writes every node and chunk of `session` to a new store at `dest`.
async fn write_all(
    session: &Session,
    dest: &Path,
    progress: Option<Progress<'_>>,
) -> OpsResult<ExportSummary> {
    let store = FilesystemStore::new(dest)?;
    let nodes = session.list_nodes()?;
    let mut jobs = Vec::new();
    let mut summary = ExportSummary {
        nodes: nodes.len(),
        ..ExportSummary::default()
    };
    for node in &nodes {
        let rel = node.path.key_prefix();
        store
            .set(&metadata_key(rel), node.user_data.clone())
            .await?;
        if node.array().is_none() {
            continue;
        }
        summary.arrays += 1;
        let meta: Value = serde_json::from_slice(&node.user_data).unwrap_or(Value::Null);
        let enc = key_encoding(&node.path, &meta)?;
        let prefix = node_prefix(rel);
        for index in session.list_chunks(&node.path).await? {
            jobs.push(ChunkJob {
                path: node.path.clone(),
                key: format!("{prefix}{}", enc.encode(&index)),
                index,
            });
        }
    }
    summary.chunks = jobs.len();
    let total = jobs.len() as u64;
    let done = AtomicU64::new(0);
    // After a failure no new chunk is started, but the ones under way are awaited, so
    // nothing is written into `dest` after this returns (and its clean-up).
    let failed = AtomicBool::new(false);
    let results: Vec<OpsResult<()>> = futures::stream::iter(jobs)
        .map(|job| {
            let (store, failed, done) = (&store, &failed, &done);
            async move {
                if failed.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let result = async {
                    if let Some(bytes) = session.get_chunk(&job.path, &job.index, None).await? {
                        store.set(&job.key, bytes).await?;
                    }
                    Ok::<(), OpsError>(())
                }
                .await;
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(report) = progress {
                    report(n, total);
                }
                result
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<OpsResult<()>>()?;
    Ok(summary)
}
