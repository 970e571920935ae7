//! floe: transactional, versioned Zarr v3 repositories in the Icechunk spec-1 format.

pub mod storage;
pub mod zarr;
