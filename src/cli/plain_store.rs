//! Plain Zarr v3/v2/v1 filesystem stores (directories, not repositories): detecting,
//! opening read-only and listing them.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::{CliError, CliResult};
use floe::zarr::{walk, FilesystemStore, NodeMetadata, Store, ZarrError};

/// The metadata files that mark the root of a Zarr store.
const ROOT_MARKERS: [&str; 4] = ["zarr.json", ".zgroup", ".zarray", "meta"];

/// Whether `dir` is the root of a Zarr v3, v2 or v1 store (holds `zarr.json`,
/// `.zgroup`, `.zarray` or, for v1, `meta`).
pub(super) fn is_zarr_dir(dir: &Path) -> bool {
    ROOT_MARKERS.iter().any(|f| dir.join(f).is_file())
}

/// Opens the plain store at `dir` read-only.
///
/// # Errors
/// [`CliError::Usage`] when `dir` is missing, not a directory or not a Zarr store.
pub(super) fn open(dir: &Path) -> CliResult<Arc<dyn Store>> {
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "`{}` does not exist or is not a directory",
            dir.display()
        )));
    }
    if !is_zarr_dir(dir) {
        return Err(CliError::Usage(format!(
            "`{}` is not a Zarr store: it has no zarr.json, .zgroup, .zarray or (Zarr v1) meta at its root",
            dir.display()
        )));
    }
    let store = FilesystemStore::open_read_only(dir)?;
    Ok(Arc::new(store))
}

/// One node of a listing: absolute path (`/a/b`), whether it is a group, and its
/// metadata as a v3 `zarr.json` object (v2 and v1 metadata translated).
pub(super) struct ListedNode {
    /// Absolute path, `/` for the root.
    pub(crate) path: String,
    /// Group (`true`) or array.
    pub(crate) is_group: bool,
    /// The v3 metadata document.
    pub(crate) metadata: Value,
}

/// Every node at or below `path` of a plain store, depth-first in path order.
///
/// # Errors
/// [`CliError::Usage`] when no node exists at `path`; metadata and store errors.
pub(super) async fn list(store: &dyn Store, path: &str) -> CliResult<Vec<ListedNode>> {
    let nodes = match walk(store, path).await {
        Ok(n) => n,
        Err(ZarrError::NodeNotFound { .. }) => {
            return Err(CliError::Usage(format!(
                "no Zarr node at `/{}` in this store",
                path.trim_matches('/')
            )))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(nodes
        .into_iter()
        .map(|(p, m)| ListedNode {
            path: format!("/{p}"),
            is_group: matches!(m, NodeMetadata::Group(_)),
            metadata: m.to_json(),
        })
        .collect())
}
