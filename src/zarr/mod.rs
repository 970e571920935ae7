//! Zarr v3: metadata, data types, codecs, chunk grids, chunk key encodings, stores and
//! the array API (`../shared/specs/zarr/v3/`).

pub mod store;
