//! Zarr arrays: creation, opening, region and chunk I/O, resizing, attributes.
//!
//! An [`Array`] reads and writes its metadata through the [`Store`] trait and moves
//! chunks only through the store's chunk port ([`ChunkPort`], opened once per
//! operation by [`open_chunk_port`]), by chunk index. Chunks of a region are fetched
//! concurrently (bounded by [`ArrayOptions::concurrency`]) and encoded/decoded on
//! tokio's blocking thread pool (small chunks inline). Missing chunks read as the
//! fill value; a chunk written entirely equal to the fill value is erased instead of
//! stored unless [`ArrayOptions::write_empty_chunks`] is set. Partial chunk writes
//! read, modify and write the chunk. Every chunk error names the array path and the
//! chunk key.
//!
//! One job per file: `mod.rs` (the type, accessors, checks), `chunk_io.rs`,
//! `read.rs` (regions), `write.rs` (regions), `update.rs` (attributes, resize,
//! delete), `builder.rs` (creation).

mod builder;
mod chunk_io;
mod formats;
mod read;
mod update;
mod write;

pub use builder::ArrayBuilder;
pub use formats::RegionFormats;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use serde_json::{Map, Value};

use crate::format::NodePath;
use crate::zarr::array_bytes::{ArrayBytes, ElemsMut, ElemsRef};
use crate::zarr::chunk_grid::{ChunkGrid, RegularChunkGrid};
use crate::zarr::chunk_key_encoding::{ChunkKeyEncoding, Separator};
use crate::zarr::codec::{offloads, run_blocking, ByteSource, ChunkRepr, CodecChain};
use crate::zarr::data_type::{DataType, FillValue};
use crate::zarr::element::Element;
use crate::zarr::error::{CodecError, ZarrError, ZarrResult};
use crate::zarr::metadata::{ArrayMetadata, ChunkKeyEncodingKind, NodeMetadata};
use crate::zarr::node::{
    ensure_parent_groups, metadata_key, node_exists, node_prefix, normalize_path,
    read_node_metadata, ZarrFormat,
};
use crate::zarr::store::{
    open_chunk_port, ByteRange, ChunkKeys, ChunkPort, ReadInto, ReadNow, Store, WriteNow,
};
use crate::zarr::subset::{indices_in, ArraySubset};

/// Runtime options of an [`Array`] (not stored in metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArrayOptions {
    /// Store chunks that are entirely the fill value (default `false`: such chunks
    /// are erased, like zarr-python's `write_empty_chunks=False`).
    pub write_empty_chunks: bool,
    /// Maximum number of chunks read or written concurrently (default 32).
    pub concurrency: usize,
}

impl ArrayOptions {
    /// These options storing (`true`) or erasing all-fill-value chunks.
    pub fn write_empty_chunks(mut self, yes: bool) -> Self {
        self.write_empty_chunks = yes;
        self
    }

    /// These options with at most `n` chunks in flight (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
}

impl Default for ArrayOptions {
    fn default() -> Self {
        ArrayOptions {
            write_empty_chunks: false,
            concurrency: 32,
        }
    }
}

/// Derived, immutable state of an array's metadata.
#[derive(Debug)]
struct Derived {
    chain: Arc<CodecChain>,
    repr: ChunkRepr,
    grid: RegularChunkGrid,
    keys: Arc<dyn ChunkKeyEncoding>,
    /// Elements of one chunk, `None` when one chunk cannot be held in memory (its
    /// element count or byte size overflows; such an array opens, but reading or
    /// writing a stored chunk fails with [`ZarrError::TooLarge`]).
    chunk_len: Option<usize>,
}

impl Derived {
    fn new(meta: &ArrayMetadata) -> ZarrResult<Self> {
        let repr = meta.chunk_repr()?;
        let chunk_len = repr
            .shape
            .iter()
            .try_fold(1u64, |acc, &x| acc.checked_mul(x))
            .and_then(|n| buffer_len(n, &meta.data_type));
        Ok(Derived {
            chain: Arc::new(meta.codec_chain()?),
            repr,
            grid: RegularChunkGrid::new(meta.chunk_shape.clone())?,
            keys: Arc::from(meta.chunk_key_encoding.encoding()),
            chunk_len,
        })
    }
}

/// `n` as a `usize` element count when a buffer of `n` elements of `dt` fits in
/// memory (at most `isize::MAX` bytes, counting variable-length strings by their
/// handle size and zero-sized elements as one byte); `None` otherwise.
fn buffer_len(n: u64, dt: &DataType) -> Option<usize> {
    let per = match dt.fixed_size() {
        Some(size) => size.max(1),
        None => std::mem::size_of::<String>(),
    };
    let n = usize::try_from(n).ok()?;
    let bytes = n.checked_mul(per)?;
    (bytes <= isize::MAX as usize).then_some(n)
}

/// A Zarr array in a store.
///
/// Cloning is cheap (metadata plus shared codec state). Methods taking `&mut self`
/// change the metadata and write it back to the store.
#[derive(Clone, Debug)]
pub struct Array {
    store: Arc<dyn Store>,
    path: String,
    metadata: ArrayMetadata,
    derived: Arc<Derived>,
    format: ZarrFormat,
    options: ArrayOptions,
}

/// Decoded data of one chunk for a region read: `data` (shape `data_shape`) holds
/// the intersection `inter` (array coordinates) starting at `data_start`.
struct ChunkPart {
    inter: ArraySubset,
    data: ArrayBytes,
    data_shape: Vec<u64>,
    data_start: Vec<u64>,
}

/// A [`ByteSource`] reading one chunk through a chunk port.
struct PortSource<'a> {
    port: &'a dyn ChunkPort,
    chunk: &'a [u64],
}

#[async_trait]
impl ByteSource for PortSource<'_> {
    async fn get(&self) -> Result<Option<Bytes>, CodecError> {
        Ok(self.port.get(self.chunk).await?)
    }

    async fn get_ranges(&self, ranges: &[ByteRange]) -> Result<Option<Vec<Bytes>>, CodecError> {
        Ok(self.port.get_ranges(self.chunk, ranges).await?)
    }
}

/// Input or output, in bytes, that an array encodes or decodes straight from or into
/// the caller's buffer per call to the compute pool ([`crate::compute::install`]);
/// the calling thread yields between such windows.
const DIRECT_WINDOW_BYTES: usize = 64 << 20;

/// Encodes a whole chunk; `None` when it is all fill value and empty chunks are not
/// written.
fn encode_chunk(
    chain: &CodecChain,
    repr: &ChunkRepr,
    write_empty: bool,
    data: ArrayBytes,
) -> Result<Option<Vec<u8>>, CodecError> {
    if !write_empty && data.is_fill(&repr.fill_value) {
        return Ok(None);
    }
    chain.encode(data, repr).map(Some)
}

fn chunk_err(path: &str, key: &str, source: CodecError) -> ZarrError {
    match source {
        CodecError::Source(e) => ZarrError::Store(e),
        source => ZarrError::Chunk {
            path: path.to_string(),
            key: key.to_string(),
            source,
        },
    }
}

impl Array {
    /// Opens the array at `path`: v3 `zarr.json`, or a v2 `.zarray` (+ `.zattrs`)
    /// translated to v3 metadata (chunks are then read in place with the `v2` chunk
    /// key encoding).
    ///
    /// # Errors
    /// [`ZarrError::NodeNotFound`]; [`ZarrError::WrongNodeType`] for a group;
    /// metadata errors naming the path; store errors.
    pub async fn open(store: Arc<dyn Store>, path: &str) -> ZarrResult<Array> {
        let path = normalize_path(path)?;
        let (meta, format) = read_node_metadata(store.as_ref(), &path).await?;
        match meta {
            NodeMetadata::Array(m) => Array::from_metadata(store, &path, m, format),
            NodeMetadata::Group(_) => Err(ZarrError::WrongNodeType {
                path,
                expected: "array",
                found: "group",
            }),
        }
    }

    /// An array handle from already-read metadata (nothing is read or written).
    ///
    /// # Errors
    /// Metadata errors (invalid codecs or fill value) naming the path.
    pub fn from_metadata(
        store: Arc<dyn Store>,
        path: &str,
        metadata: ArrayMetadata,
        format: ZarrFormat,
    ) -> ZarrResult<Array> {
        let path = normalize_path(path)?;
        let derived = Derived::new(&metadata).map_err(|e| e.at_path(&path))?;
        Ok(Array {
            store,
            path,
            metadata,
            derived: Arc::new(derived),
            format,
            options: ArrayOptions::default(),
        })
    }

    /// Replaces the runtime options.
    pub fn with_options(mut self, options: ArrayOptions) -> Self {
        self.options = options;
        self
    }

    /// The runtime options.
    pub fn options(&self) -> &ArrayOptions {
        &self.options
    }

    /// The node path in store form (`a/b`, `""` for the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The node path as sessions, diffs and conflicts name it (`/a/b`, `/` for the
    /// root).
    pub fn node_path(&self) -> NodePath {
        // `path` was normalised when the array was opened or created.
        NodePath::new(&self.path).unwrap_or_else(|_| NodePath::root())
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The metadata.
    pub fn metadata(&self) -> &ArrayMetadata {
        &self.metadata
    }

    /// Whether the array was read from Zarr v2 metadata.
    pub fn zarr_format(&self) -> ZarrFormat {
        self.format
    }

    /// The shape in elements.
    pub fn shape(&self) -> &[u64] {
        &self.metadata.shape
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.metadata.shape.len()
    }

    /// The chunk shape in elements.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.metadata.chunk_shape
    }

    /// The data type.
    pub fn data_type(&self) -> &DataType {
        &self.metadata.data_type
    }

    /// The fill value.
    pub fn fill_value(&self) -> &FillValue {
        &self.derived.repr.fill_value
    }

    /// The user attributes.
    pub fn attributes(&self) -> &Map<String, Value> {
        &self.metadata.attributes
    }

    /// The dimension names, if any.
    pub fn dimension_names(&self) -> Option<&[Option<String>]> {
        self.metadata.dimension_names.as_deref()
    }

    /// The codec chain.
    pub fn codecs(&self) -> &CodecChain {
        &self.derived.chain
    }

    /// Number of chunks along each dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.derived.grid.grid_shape(&self.metadata.shape)
    }

    /// The store key of chunk `chunk`.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] when `chunk` has the wrong dimensionality.
    pub fn chunk_key(&self, chunk: &[u64]) -> ZarrResult<String> {
        if chunk.len() != self.ndim() {
            return Err(self.region_err(format!(
                "chunk index {chunk:?} does not have {} dimensions",
                self.ndim()
            )));
        }
        Ok(self.key_of(chunk))
    }

    fn key_of(&self, chunk: &[u64]) -> String {
        format!(
            "{}{}",
            node_prefix(&self.path),
            self.derived.keys.encode(chunk)
        )
    }

    /// The region of the array covered by chunk `chunk`, clipped to the array shape.
    pub fn chunk_region(&self, chunk: &[u64]) -> ArraySubset {
        let r = self.derived.grid.chunk_region(chunk);
        let full = ArraySubset::full(&self.metadata.shape);
        r.intersect(&full)
            .unwrap_or_else(|| ArraySubset::new(r.start.clone(), vec![0; r.ndim()]))
    }

    fn region_err(&self, reason: String) -> ZarrError {
        ZarrError::InvalidRegion {
            path: self.path.clone(),
            reason,
        }
    }

    fn check_region(&self, region: &ArraySubset) -> ZarrResult<()> {
        if region.start.len() != region.shape.len() || !region.within(&self.metadata.shape) {
            return Err(self.region_err(format!(
                "region start {:?} shape {:?} is not within the array shape {:?}",
                region.start, region.shape, self.metadata.shape
            )));
        }
        Ok(())
    }

    fn check_element<T: Element>(&self) -> ZarrResult<()> {
        if T::matches(&self.metadata.data_type) {
            Ok(())
        } else {
            Err(self.element_type_err::<T>())
        }
    }

    fn element_type_err<T: Element>(&self) -> ZarrError {
        ZarrError::ElementType {
            path: self.path.clone(),
            element: T::RUST_TYPE,
            data_type: self.metadata.data_type.to_string(),
        }
    }

    fn check_chunk_index(&self, chunk: &[u64]) -> ZarrResult<()> {
        let grid = self.chunk_grid_shape();
        if chunk.len() != grid.len() || chunk.iter().zip(&grid).any(|(i, n)| i >= n) {
            return Err(self.region_err(format!(
                "chunk index {chunk:?} is outside the chunk grid {grid:?}"
            )));
        }
        Ok(())
    }

    fn check_writable(&self) -> ZarrResult<()> {
        if self.store.is_writable() {
            Ok(())
        } else {
            Err(ZarrError::ReadOnly {
                path: self.path.clone(),
            })
        }
    }
}
