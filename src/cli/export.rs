//! `floe export`: a ref's tree written as a plain Zarr v3 filesystem store: every
//! node's `zarr.json` as stored, and every chunk's encoded bytes under the array's own
//! chunk key encoding. Virtual chunks are read only under `--allow-virtual` prefixes.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use serde_json::Value;

use super::args::RefArgs;
use super::target::{open_repo, selector};
use super::{progress, CliError, CliResult};
use crate::format::NodePath;
use crate::session::Session;
use crate::zarr::chunk_key_encoding::{chunk_key_encoding_from_json, ChunkKeyEncoding};
use crate::zarr::node::{metadata_key, node_prefix};
use crate::zarr::{FilesystemStore, Store};

/// Chunks copied concurrently.
const CONCURRENCY: usize = 16;

/// One chunk to copy: source array, grid index, destination key.
struct ChunkJob {
    path: NodePath,
    index: Vec<u32>,
    key: String,
}

/// Checks that `dest` does not exist or is an empty directory; returns whether it
/// exists.
fn check_dest(dest: &Path) -> CliResult<bool> {
    if !dest.exists() {
        return Ok(false);
    }
    let empty = dest.is_dir()
        && std::fs::read_dir(dest)
            .map_err(|e| CliError::Usage(format!("cannot read `{}`: {e}", dest.display())))?
            .next()
            .is_none();
    if !empty {
        return Err(CliError::Usage(format!(
            "destination `{}` exists and is not an empty directory",
            dest.display()
        )));
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
fn key_encoding(path: &NodePath, meta: &Value) -> CliResult<Box<dyn ChunkKeyEncoding>> {
    match meta.get("chunk_key_encoding") {
        None => chunk_key_encoding_from_json(&serde_json::json!({"name": "default"})),
        Some(enc) => chunk_key_encoding_from_json(enc),
    }
    .map_err(|e| CliError::Zarr(e.at_path(path.key_prefix())))
}

/// Exports the snapshot `at` of the repository at `location` to `dest`.
///
/// # Errors
/// [`CliError::Usage`] when `dest` exists and is not empty; unauthorized virtual
/// chunks; repository, storage and file system errors. A failed export removes what it
/// wrote.
pub async fn export(
    out: &mut impl Write,
    location: &str,
    dest: &Path,
    at: &RefArgs,
    allow_virtual: &[String],
) -> CliResult<()> {
    let existed = check_dest(dest)?;
    let repo = open_repo(location, allow_virtual).await?;
    let session = repo.readonly_session(&selector(&repo, at).await?).await?;
    std::fs::create_dir_all(dest)
        .map_err(|e| CliError::Usage(format!("cannot create `{}`: {e}", dest.display())))?;
    match write_all(&session, dest).await {
        Ok((nodes, arrays, chunks)) => {
            writeln!(
                out,
                "Exported {nodes} node(s) ({arrays} array(s), {chunks} chunk(s)) of snapshot {} to {}",
                session.snapshot_id(),
                dest.display()
            )?;
            Ok(())
        }
        Err(e) => {
            clean_up(dest, existed);
            Err(e)
        }
    }
}

/// Writes every node and chunk of `session` to a new store at `dest`; returns the
/// numbers of nodes, arrays and chunks.
async fn write_all(session: &Session, dest: &Path) -> CliResult<(usize, usize, usize)> {
    let store = FilesystemStore::new(dest)?;
    let nodes = session.list_nodes();
    let mut jobs = Vec::new();
    let mut arrays = 0;
    for node in &nodes {
        let rel = node.path.key_prefix();
        store
            .set(&metadata_key(rel), node.user_data.clone())
            .await?;
        if node.array().is_none() {
            continue;
        }
        arrays += 1;
        let meta: Value = serde_json::from_slice(&node.user_data).unwrap_or(Value::Null);
        let enc = key_encoding(&node.path, &meta)?;
        let prefix = node_prefix(rel);
        for index in session.list_chunks(&node.path).await? {
            let idx: Vec<u64> = index.iter().map(|&i| u64::from(i)).collect();
            jobs.push(ChunkJob {
                path: node.path.clone(),
                key: format!("{prefix}{}", enc.encode(&idx)),
                index,
            });
        }
    }
    let chunks = jobs.len();
    let bar = progress::bar(chunks as u64, "chunks");
    // After a failure no new chunk is started, but the ones under way are awaited, so
    // nothing is written into `dest` after this returns (and its clean-up).
    let failed = AtomicBool::new(false);
    let results: Vec<CliResult<()>> = futures::stream::iter(jobs)
        .map(|job| {
            let (store, bar, failed) = (&store, &bar, &failed);
            async move {
                if failed.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let result = async {
                    if let Some(bytes) = session.get_chunk(&job.path, &job.index, None).await? {
                        store.set(&job.key, bytes).await?;
                    }
                    Ok::<(), CliError>(())
                }
                .await;
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                bar.inc(1);
                result
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<CliResult<()>>()?;
    bar.finish_and_clear();
    Ok((nodes.len(), arrays, chunks))
}
