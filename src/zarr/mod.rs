//! Zarr v3: metadata, data types, codecs, chunk grids, chunk key encodings, stores and
//! the array API (`../shared/specs/zarr/v3/`).
//!
//! Data flows one way: arrays and groups talk only to the [`Store`] trait; codecs
//! know nothing of stores.
//!
//! ```no_run
//! # async fn f() -> floe::zarr::ZarrResult<()> {
//! use std::sync::Arc;
//! use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, MemoryStore, Store};
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//! let a = ArrayBuilder::new(vec![4, 4], vec![2, 2], DataType::Int32)
//!     .create(store.clone(), "a")
//!     .await?;
//! a.write_region(&ArraySubset::new(vec![1, 1], vec![2, 2]), &[1, 2, 3, 4]).await?;
//! let a = Array::open(store, "a").await?;
//! let v: Vec<i32> = a.read_region(&ArraySubset::full(a.shape())).await?;
//! # Ok(()) }
//! ```

pub mod array;
pub mod array_bytes;
pub mod chunk_grid;
pub mod chunk_key_encoding;
pub mod codec;
pub mod data_type;
pub mod element;
pub mod error;
pub mod group;
pub mod metadata;
pub mod node;
pub mod store;
pub mod subset;

pub use array::{Array, ArrayBuilder, ArrayOptions, RegionFormats};
pub use array_bytes::ArrayBytes;
pub use chunk_grid::{
    ChunkGrid, ChunkGridMetadata, RectilinearChunkGrid, RectilinearDimension, RegularChunkGrid,
};
pub use chunk_key_encoding::{ChunkKeyEncoding, Separator};
pub use codec::{ChunkRepr, Codec, CodecChain};
pub use data_type::{DataType, FillValue};
pub use element::Element;
pub use error::{CodecError, ZarrError, ZarrResult};
pub use group::Group;
pub use group::{open_node, Node};
pub use metadata::v1::{translate_v1_array, translate_v1_array_bytes};
pub use metadata::v2::{translate_v2_array, translate_v2_array_bytes, translate_v2_group};
pub use metadata::{ArrayMetadata, ChunkKeyEncodingKind, GroupMetadata, NodeMetadata};
pub use node::{delete_node, list_children, read_node_metadata, walk, ZarrFormat};
pub use store::{ByteRange, FilesystemStore, ListDirResult, MemoryStore, Store, StoreError};
pub use subset::ArraySubset;
