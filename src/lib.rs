//! floe: transactional, versioned Zarr v3 repositories in the Icechunk spec-1 format.

pub mod assets;
pub mod error;
pub mod format;
pub mod repository;
pub mod session;
pub mod storage;
pub mod virtual_refs;
pub mod zarr;

pub use error::{Error, Result};
pub use format::{NodePath, SnapshotId};
pub use repository::{OpenOptions, Repository, SnapshotInfo, VersionSelector};
pub use session::{CommitOptions, Session, SessionStore};
