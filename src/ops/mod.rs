//! Whole-repository operations for library users, the same ones the `floe` CLI runs:
//! copying a Zarr v3/v2 store into a session ([`import_zarr`]), writing a session's
//! tree out as a plain Zarr v3 filesystem store ([`export_zarr`]), and importing a
//! kerchunk reference set as virtual chunk refs ([`import_kerchunk`]; the streaming
//! reader of reference sets is [`kerchunk`]).
//!
//! None of them commits: they change a writable session (import) or read one (export),
//! and the caller commits, so an import can be combined with other changes into one
//! snapshot.

pub mod kerchunk;
mod zarr_export;
mod zarr_import;

pub use kerchunk::import::{
    import_kerchunk, import_kerchunk_with, ImportSummary as KerchunkImportSummary,
};
pub use kerchunk::limits::KerchunkLimits;
pub use zarr_export::{export_zarr, ExportSummary};
pub use zarr_import::{import_zarr, ZarrImportSummary};

/// Progress callback of the operations: called with (items done, items in all), where
/// an item is a chunk (Zarr import and export) or a reference (kerchunk import).
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Chunks copied concurrently by the import and export operations.
const CONCURRENCY: usize = 16;

/// Errors of the operations in [`crate::ops`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// A repository or session operation failed.
    #[error(transparent)]
    Floe(#[from] crate::Error),
    /// The Zarr layer (metadata of the source, chunk key encodings) failed.
    #[error(transparent)]
    Zarr(#[from] crate::zarr::ZarrError),
    /// Reading the source store or writing the destination store failed.
    #[error(transparent)]
    Store(#[from] crate::zarr::StoreError),
    /// The source's root is an array, which cannot replace a repository's root group.
    #[error("the source's root is an array, which cannot replace the repository's root group")]
    RootIsArray,
    /// A node already exists in the session where the import would create one.
    #[error("a node already exists at `{path}`")]
    NodeExists {
        /// The node's path in the repository.
        path: crate::NodePath,
    },
    /// The export destination exists and is not an empty directory.
    #[error("destination `{}` exists and is not an empty directory", path.display())]
    DestinationNotEmpty {
        /// The destination directory.
        path: std::path::PathBuf,
    },
    /// A local file system operation on the export destination failed.
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        /// What was attempted (`read`, `create`).
        action: &'static str,
        /// The path it was attempted on.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Result of the operations in [`crate::ops`].
pub type OpsResult<T> = Result<T, OpsError>;
