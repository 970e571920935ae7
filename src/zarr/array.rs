//! Zarr arrays: creation, opening, region and chunk I/O, resizing, attributes.
//!
//! An [`Array`] talks only to the [`Store`] trait. Chunks of a region are fetched
//! concurrently (bounded by [`ArrayOptions::concurrency`]) and encoded/decoded on
//! tokio's blocking thread pool (small chunks inline). Missing chunks read as the
//! fill value; a chunk written entirely equal to the fill value is erased instead of
//! stored unless [`ArrayOptions::write_empty_chunks`] is set. Partial chunk writes
//! read, modify and write the chunk. Every chunk error names the array path and the
//! chunk key.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use serde_json::{Map, Value};

use crate::zarr::array_bytes::{ArrayBytes, ElemsMut, ElemsRef};
use crate::zarr::chunk_grid::{ChunkGrid, RegularChunkGrid};
use crate::zarr::chunk_key_encoding::{ChunkKeyEncoding, Separator};
use crate::zarr::codec::{run_blocking, ByteSource, ChunkRepr, CodecChain};
use crate::zarr::data_type::{DataType, FillValue};
use crate::zarr::element::Element;
use crate::zarr::error::{CodecError, ZarrError, ZarrResult};
use crate::zarr::group::ensure_parent_groups;
use crate::zarr::metadata::{ArrayMetadata, ChunkKeyEncodingKind, NodeMetadata};
use crate::zarr::node::{
    metadata_key, node_exists, node_prefix, normalize_path, read_node_metadata, ZarrFormat,
};
use crate::zarr::store::{ByteRange, Store};
use crate::zarr::subset::{indices_in, ArraySubset};

/// Runtime options of an [`Array`] (not stored in metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayOptions {
    /// Store chunks that are entirely the fill value (default `false`: such chunks
    /// are erased, like zarr-python's `write_empty_chunks=False`).
    pub write_empty_chunks: bool,
    /// Maximum number of chunks read or written concurrently (default 32).
    pub concurrency: usize,
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
    keys: Box<dyn ChunkKeyEncoding>,
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
            keys: meta.chunk_key_encoding.encoding(),
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

/// A [`ByteSource`] reading one store key.
struct StoreSource {
    store: Arc<dyn Store>,
    key: String,
}

#[async_trait]
impl ByteSource for StoreSource {
    async fn get(&self) -> Result<Option<Bytes>, CodecError> {
        Ok(self.store.get(&self.key).await?)
    }

    async fn get_ranges(&self, ranges: &[ByteRange]) -> Result<Option<Vec<Bytes>>, CodecError> {
        Ok(self.store.get_partial_values(&self.key, ranges).await?)
    }
}

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

    /// The node path (`""` for the root).
    pub fn path(&self) -> &str {
        &self.path
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
            Err(ZarrError::ElementType {
                path: self.path.clone(),
                element: T::RUST_TYPE,
                data_type: self.metadata.data_type.to_string(),
            })
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

    // ----------------------------------------------------------------- chunks

    /// Reads and decodes a whole chunk (shape [`Array::chunk_shape`], including any
    /// overhang past the array edge); `None` when the chunk is not stored.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] for an index outside the grid;
    /// [`ZarrError::Chunk`] / [`ZarrError::ChunkSize`] for undecodable chunks;
    /// store errors.
    pub async fn read_chunk_bytes(&self, chunk: &[u64]) -> ZarrResult<Option<ArrayBytes>> {
        self.check_chunk_index(chunk)?;
        self.fetch_chunk(chunk).await
    }

    async fn fetch_chunk(&self, chunk: &[u64]) -> ZarrResult<Option<ArrayBytes>> {
        let key = self.key_of(chunk);
        let Some(bytes) = self.store.get(&key).await? else {
            return Ok(None);
        };
        // Only a stored chunk needs decoding into a whole-chunk buffer.
        let chunk_len = self.chunk_len()?;
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = bytes.len().max(chunk_len.saturating_mul(elem));
        let decoded = run_blocking(size, move || chain.decode(bytes, &repr))
            .await
            .map_err(|e| chunk_err(&self.path, &key, e))?;
        self.check_decoded(&key, &decoded, self.derived.repr.num_elements())?;
        Ok(Some(decoded))
    }

    fn check_decoded(&self, key: &str, data: &ArrayBytes, n: u64) -> ZarrResult<()> {
        data.check_len(&self.metadata.data_type, n)
            .map_err(|got| ZarrError::ChunkSize {
                path: self.path.clone(),
                key: key.to_string(),
                expected: n,
                got,
            })
    }

    /// Reads a whole chunk as elements of `T` (C order, chunk shape), the fill value
    /// when it is not stored.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] when `T` does not match the data type; otherwise as
    /// [`Array::read_chunk_bytes`].
    pub async fn read_chunk<T: Element>(&self, chunk: &[u64]) -> ZarrResult<Vec<T>> {
        self.check_element::<T>()?;
        let data = match self.read_chunk_bytes(chunk).await? {
            Some(d) => d,
            None => self.fill_bytes(self.chunk_len()? as u64)?,
        };
        T::from_array_bytes(data, &self.metadata.data_type)
    }

    /// Encodes and stores a whole chunk (`data` has the chunk shape, C order); a
    /// chunk equal to the fill value is erased unless `write_empty_chunks`.
    ///
    /// # Errors
    /// [`ZarrError::DataLength`] for the wrong number of elements;
    /// [`ZarrError::Chunk`] on encoding failures; store errors.
    pub async fn write_chunk_bytes(&self, chunk: &[u64], data: ArrayBytes) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_chunk_index(chunk)?;
        let n = self.derived.repr.num_elements();
        data.check_len(&self.metadata.data_type, n)
            .map_err(|got| ZarrError::DataLength {
                path: self.path.clone(),
                expected: n,
                got,
            })?;
        let key = self.key_of(chunk);
        self.store_chunk(key, data).await
    }

    /// [`Array::write_chunk_bytes`] from elements of `T`.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`], [`ZarrError::InvalidValue`]; otherwise as
    /// [`Array::write_chunk_bytes`].
    pub async fn write_chunk<T: Element>(&self, chunk: &[u64], data: &[T]) -> ZarrResult<()> {
        self.check_element::<T>()?;
        let bytes = T::to_array_bytes(data, &self.metadata.data_type)?;
        self.write_chunk_bytes(chunk, bytes).await
    }

    /// Removes a stored chunk (it then reads as the fill value).
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] for an index outside the grid; store errors.
    pub async fn erase_chunk(&self, chunk: &[u64]) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_chunk_index(chunk)?;
        self.store.erase(&self.key_of(chunk)).await?;
        Ok(())
    }

    /// The encoded bytes of a chunk as stored, `None` when absent.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`]; store errors.
    pub async fn read_encoded_chunk(&self, chunk: &[u64]) -> ZarrResult<Option<Bytes>> {
        self.check_chunk_index(chunk)?;
        Ok(self.store.get(&self.key_of(chunk)).await?)
    }

    /// Stores already-encoded chunk bytes verbatim (no validation of the encoding).
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`]; store errors.
    pub async fn write_encoded_chunk(&self, chunk: &[u64], bytes: Bytes) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_chunk_index(chunk)?;
        self.store.set(&self.key_of(chunk), bytes).await?;
        Ok(())
    }

    /// `n` elements of the fill value.
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when `n` elements cannot be held in one buffer.
    fn fill_bytes(&self, n: u64) -> ZarrResult<ArrayBytes> {
        let len = buffer_len(n, &self.metadata.data_type).ok_or_else(|| {
            self.too_large(format!(
                "{n} elements of {} do not fit in memory",
                self.metadata.data_type
            ))
        })?;
        ArrayBytes::new_fill(len, &self.metadata.data_type, &self.derived.repr.fill_value).map_err(
            |e| match e {
                ZarrError::TooLarge { reason, .. } => self.too_large(reason),
                e => e,
            },
        )
    }

    fn too_large(&self, reason: String) -> ZarrError {
        ZarrError::TooLarge {
            path: self.path.clone(),
            reason,
        }
    }

    /// Elements of one chunk, checked to fit in memory.
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when a chunk of the chunk shape cannot be held.
    fn chunk_len(&self) -> ZarrResult<usize> {
        self.derived.chunk_len.ok_or_else(|| {
            self.too_large(format!(
                "a chunk of shape {:?} and data type {} does not fit in memory",
                self.metadata.chunk_shape, self.metadata.data_type
            ))
        })
    }

    /// Elements of `region` (already checked to be within the array), checked to fit
    /// in one buffer.
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when the element count overflows `u64` or the region
    /// does not fit in memory.
    fn region_len(&self, region: &ArraySubset) -> ZarrResult<usize> {
        region
            .checked_num_elements()
            .and_then(|n| buffer_len(n, &self.metadata.data_type))
            .ok_or_else(|| {
                self.too_large(format!(
                    "region of shape {:?} ({} elements of {}) does not fit in memory",
                    region.shape,
                    region
                        .checked_num_elements()
                        .map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                    self.metadata.data_type
                ))
            })
    }

    /// Encodes `data` (a whole chunk) and stores it, or erases the key when it is
    /// all fill value and empty chunks are not written.
    async fn store_chunk(&self, key: String, data: ArrayBytes) -> ZarrResult<()> {
        let chunk_len = self.chunk_len()?;
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let write_empty = self.options.write_empty_chunks;
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = chunk_len.saturating_mul(elem);
        let encoded = run_blocking(size, move || encode_chunk(&chain, &repr, write_empty, data))
            .await
            .map_err(|e| chunk_err(&self.path, &key, e))?;
        self.put_encoded(&key, encoded).await
    }

    /// Stores encoded chunk bytes, or erases the key for `None`.
    async fn put_encoded(&self, key: &str, encoded: Option<Vec<u8>>) -> ZarrResult<()> {
        match encoded {
            Some(bytes) => self.store.set(key, Bytes::from(bytes)).await?,
            None => self.store.erase(key).await?,
        }
        Ok(())
    }

    // ----------------------------------------------------------------- regions

    /// Reads `region` as decoded elements (C order, native-endian for fixed-size
    /// types). Missing chunks read as the fill value; chunks are fetched and decoded
    /// concurrently; with sharding only the needed inner chunks are read.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] when the region is not within the array;
    /// [`ZarrError::Chunk`] / [`ZarrError::ChunkSize`] naming the chunk key for
    /// undecodable chunks; store errors.
    pub async fn read_region_bytes(&self, region: &ArraySubset) -> ZarrResult<ArrayBytes> {
        self.check_region(region)?;
        let n = self.region_len(region)? as u64;
        if n == 0 {
            return self.fill_bytes(0);
        }
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        // Fast path: the region is exactly one whole chunk.
        if chunks.num_elements() == 1 && grid.chunk_region(&chunks.start) == *region {
            return match self.fetch_chunk(&chunks.start).await? {
                Some(d) => Ok(d),
                None => self.fill_bytes(n),
            };
        }
        let mut out = self.fill_bytes(n)?;
        self.read_into(region, out.as_view_mut()).await?;
        Ok(out)
    }

    /// Reads `region` into `out` (C order, shape `region.shape`, already holding the
    /// fill value): chunks are fetched and decoded concurrently and copied in as they
    /// arrive; missing chunks are skipped.
    async fn read_into(&self, region: &ArraySubset, mut out: ElemsMut<'_>) -> ZarrResult<()> {
        let chunks = self.derived.grid.chunks_intersecting(region);
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let mut results = futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .map(|idx| self.read_chunk_part(idx, region))
            .buffer_unordered(self.options.concurrency.max(1));
        while let Some(r) = results.next().await {
            let Some(part) = r? else {
                continue;
            };
            out.copy_from(
                &region.shape,
                &part.inter.relative_to(&region.start).start,
                part.data.as_view(),
                &part.data_shape,
                &part.data_start,
                &part.inter.shape,
                elem,
            );
        }
        Ok(())
    }

    /// Reads the part of chunk `idx` inside `region`, `None` when the chunk is
    /// missing. The data is the whole decoded chunk when the chain cannot decode
    /// partially (the caller copies the intersection out of it, saving a copy), else
    /// just the intersection.
    async fn read_chunk_part(
        &self,
        idx: Vec<u64>,
        region: &ArraySubset,
    ) -> ZarrResult<Option<ChunkPart>> {
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let Some(inter) = chunk_region.intersect(region) else {
            return Ok(None);
        };
        let local = inter.relative_to(&chunk_region.start);
        let repr = &self.derived.repr;
        if local.is_full(&repr.shape) || !self.derived.chain.supports_partial_decode() {
            return Ok(self.fetch_chunk(&idx).await?.map(|data| ChunkPart {
                inter,
                data,
                data_shape: repr.shape.clone(),
                data_start: local.start,
            }));
        }
        let key = self.key_of(&idx);
        let source = StoreSource {
            store: Arc::clone(&self.store),
            key: key.clone(),
        };
        let part = self
            .derived
            .chain
            .partial_decode(&source, repr, &local)
            .await
            .map_err(|e| chunk_err(&self.path, &key, e))?;
        match part {
            None => Ok(None),
            Some(data) => {
                self.check_decoded(&key, &data, local.num_elements())?;
                Ok(Some(ChunkPart {
                    data_start: vec![0; inter.ndim()],
                    data_shape: inter.shape.clone(),
                    inter,
                    data,
                }))
            }
        }
    }

    /// Reads `region` as elements of `T` in C order.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] when `T` does not match the data type; otherwise
    /// as [`Array::read_region_bytes`].
    pub async fn read_region<T: Element>(&self, region: &ArraySubset) -> ZarrResult<Vec<T>> {
        self.check_element::<T>()?;
        self.check_region(region)?;
        let dt = &self.metadata.data_type;
        let n = self.region_len(region)?;
        if n > 1 && dt.fixed_size().is_some() && T::as_fixed_bytes(&[]).is_some() {
            // Decode straight into the caller's vector (no conversion copy).
            if let Some(fill) = T::from_array_bytes(self.fill_bytes(1)?, dt)?.pop() {
                let mut out = crate::zarr::array_bytes::try_filled_vec(n, fill)
                    .ok_or_else(|| self.too_large(format!("cannot allocate {n} elements")))?;
                if let Some(bytes) = T::as_fixed_bytes_mut(&mut out) {
                    self.read_into(region, ElemsMut::Fixed(bytes)).await?;
                    return Ok(out);
                }
            }
        }
        let data = self.read_region_bytes(region).await?;
        T::from_array_bytes(data, dt)
    }

    /// Reads `region` as an `ndarray` of shape `region.shape`.
    ///
    /// # Errors
    /// As [`Array::read_region`].
    pub async fn read_region_ndarray<T: Element>(
        &self,
        region: &ArraySubset,
    ) -> ZarrResult<ArrayD<T>> {
        let v = self.read_region::<T>(region).await?;
        let shape: Vec<usize> = region.shape.iter().map(|&x| x as usize).collect();
        ArrayD::from_shape_vec(IxDyn(&shape), v).map_err(|e| self.region_err(e.to_string()))
    }

    /// Reads the whole array as elements of `T`.
    ///
    /// # Errors
    /// As [`Array::read_region`].
    pub async fn read_all<T: Element>(&self) -> ZarrResult<Vec<T>> {
        self.read_region(&ArraySubset::full(&self.metadata.shape))
            .await
    }

    /// Reads `region` as raw little-endian bytes of the data type in C order (the
    /// CLI's raw output): `n * element size` bytes; complex numbers as (re, im),
    /// `fixed_length_utf32` as UTF-32LE code units, raw types verbatim.
    ///
    /// # Errors
    /// [`ZarrError::InvalidValue`] for the variable-length `string` data type;
    /// otherwise as [`Array::read_region_bytes`].
    pub async fn read_region_le_bytes(&self, region: &ArraySubset) -> ZarrResult<Vec<u8>> {
        if self.metadata.data_type == DataType::String {
            return Err(ZarrError::InvalidValue {
                data_type: self.metadata.data_type.name(),
                reason: "variable-length strings have no raw byte representation".into(),
            });
        }
        let data = self.read_region_bytes(region).await?;
        data.into_le_bytes(&self.metadata.data_type)
    }

    /// Reads `region` as JSON: nested lists following `region.shape` (a scalar for
    /// 0-d regions). Numbers for integers and finite floats, `"NaN"`,
    /// `"Infinity"`, `"-Infinity"` for non-finite floats, `[re, im]` for complex,
    /// booleans, strings for string types, byte lists (`r<N>`) or base64 strings
    /// (`raw_bytes`, `null_terminated_bytes`).
    ///
    /// # Errors
    /// As [`Array::read_region_bytes`].
    pub async fn read_region_json(&self, region: &ArraySubset) -> ZarrResult<Value> {
        self.check_region(region)?;
        let n = self.region_len(region)?;
        if n.checked_mul(std::mem::size_of::<Value>())
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(self.too_large(format!(
                "region of shape {:?} has too many elements for one JSON value",
                region.shape
            )));
        }
        let data = self.read_region_bytes(region).await?;
        Ok(data.to_json(&self.metadata.data_type, &region.shape))
    }

    /// Writes decoded elements (C order, shape `region.shape`) into `region`.
    /// Chunks fully covered (within the array bounds) are written without reading;
    /// partially covered chunks are read, modified and written back. Chunks that end
    /// up all fill value are erased unless `write_empty_chunks`.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`], [`ZarrError::DataLength`] (wrong element count or
    /// representation), [`ZarrError::ReadOnly`]; chunk errors naming the key; store
    /// errors.
    pub async fn write_region_bytes(
        &self,
        region: &ArraySubset,
        data: ArrayBytes,
    ) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_region(region)?;
        self.region_len(region)?;
        self.check_data_len(region, data.as_view())?;
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        if chunks.num_elements() == 1 && grid.chunk_region(&chunks.start) == *region {
            let key = self.key_of(&chunks.start);
            return self.store_chunk(key, data).await;
        }
        self.write_from(region, data.as_view()).await
    }

    fn check_data_len(&self, region: &ArraySubset, data: ElemsRef<'_>) -> ZarrResult<()> {
        let n = region.num_elements();
        data.check_len(&self.metadata.data_type, n)
            .map_err(|got| ZarrError::DataLength {
                path: self.path.clone(),
                expected: n,
                got,
            })
    }

    /// Writes borrowed elements (already checked) chunk by chunk: the part of the
    /// input for each chunk is copied out as the chunk's turn comes, so at most
    /// `concurrency` chunk buffers exist at once.
    async fn write_from(&self, region: &ArraySubset, data: ElemsRef<'_>) -> ZarrResult<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        let dt = &self.metadata.data_type;
        futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .filter_map(|idx| {
                let part = grid.chunk_region(&idx).intersect(region).map(|inter| {
                    let local = inter.relative_to(&region.start);
                    let part = data.extract(dt, &region.shape, &local);
                    (idx, inter, part)
                });
                std::future::ready(part)
            })
            .map(|(idx, inter, part)| self.write_chunk_part(idx, inter, part))
            .buffer_unordered(self.options.concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Writes `part` (the input restricted to `inter`, array coordinates) into chunk
    /// `idx`, reading the chunk first unless `part` covers all its in-bounds elements.
    async fn write_chunk_part(
        &self,
        idx: Vec<u64>,
        inter: ArraySubset,
        part: ArrayBytes,
    ) -> ZarrResult<()> {
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let key = self.key_of(&idx);
        if inter == chunk_region {
            return self.store_chunk(key, part).await;
        }
        let covers_in_bounds = inter == self.chunk_region(&idx);
        if !covers_in_bounds && self.derived.chain.supports_partial_encode() {
            return self.write_chunk_part_in_place(idx, inter, part).await;
        }
        // Covers every in-bounds element: start from the fill value, no read needed.
        let existing = if covers_in_bounds {
            None
        } else {
            self.fetch_chunk(&idx).await?
        };
        let chunk_len = self.chunk_len()?;
        let repr = self.derived.repr.clone();
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = chunk_len.saturating_mul(elem);
        let chain = Arc::clone(&self.derived.chain);
        let write_empty = self.options.write_empty_chunks;
        let encoded = run_blocking(size, move || {
            let mut chunk = match existing {
                Some(c) => c,
                None => ArrayBytes::new_fill(chunk_len, &repr.data_type, &repr.fill_value)
                    .map_err(|e| CodecError::unsupported("array", e.to_string()))?,
            };
            chunk.copy_from(
                &repr.shape,
                &inter.relative_to(&chunk_region.start).start,
                &part,
                &inter.shape,
                &vec![0; inter.ndim()],
                &inter.shape,
                elem,
            );
            encode_chunk(&chain, &repr, write_empty, chunk)
        })
        .await
        .map_err(|e| chunk_err(&self.path, &key, e))?;
        self.put_encoded(&key, encoded).await
    }

    /// Partial write into a chunk whose codec can re-encode in place (a shard: only
    /// the inner chunks that `inter` touches are decoded and re-encoded).
    async fn write_chunk_part_in_place(
        &self,
        idx: Vec<u64>,
        inter: ArraySubset,
        part: ArrayBytes,
    ) -> ZarrResult<()> {
        let key = self.key_of(&idx);
        let existing = self.store.get(&key).await?;
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let local = inter.relative_to(&chunk_region.start);
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let size = existing.as_ref().map_or(0, |b| b.len());
        let (bytes, all_fill) = run_blocking(size, move || {
            chain.partial_encode(existing, &repr, &local, &part)
        })
        .await
        .map_err(|e| chunk_err(&self.path, &key, e))?;
        let encoded = (!all_fill || self.options.write_empty_chunks).then_some(bytes);
        self.put_encoded(&key, encoded).await
    }

    /// Writes elements of `T` (C order, shape `region.shape`) into `region`.
    /// Plain numeric element types are read from `data` in place (no intermediate
    /// copy of the whole input).
    ///
    /// # Errors
    /// [`ZarrError::ElementType`], [`ZarrError::InvalidValue`]; otherwise as
    /// [`Array::write_region_bytes`].
    pub async fn write_region<T: Element>(
        &self,
        region: &ArraySubset,
        data: &[T],
    ) -> ZarrResult<()> {
        self.check_element::<T>()?;
        let dt = &self.metadata.data_type;
        match T::as_fixed_bytes(data) {
            Some(bytes) if dt.fixed_size().is_some() => {
                self.check_writable()?;
                self.check_region(region)?;
                self.region_len(region)?;
                let view = ElemsRef::Fixed(bytes);
                self.check_data_len(region, view)?;
                self.write_from(region, view).await
            }
            _ => {
                let owned = T::to_array_bytes(data, dt)?;
                self.write_region_bytes(region, owned).await
            }
        }
    }

    /// Writes an `ndarray` (any memory layout) with its origin at `start`.
    ///
    /// # Errors
    /// As [`Array::write_region`]; [`ZarrError::InvalidRegion`] when `start` and the
    /// array's dimensionality differ.
    pub async fn write_region_ndarray<T, S, D>(
        &self,
        start: &[u64],
        data: &ArrayBase<S, D>,
    ) -> ZarrResult<()>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        if start.len() != data.ndim() {
            return Err(self.region_err(format!(
                "start {start:?} and data of {} dimensions differ",
                data.ndim()
            )));
        }
        let region = ArraySubset::new(
            start.to_vec(),
            data.shape().iter().map(|&x| x as u64).collect(),
        );
        match data.as_slice() {
            Some(s) => self.write_region(&region, s).await,
            None => {
                let v: Vec<T> = data.iter().cloned().collect();
                self.write_region(&region, &v).await
            }
        }
    }

    // ----------------------------------------------------------------- metadata

    async fn store_metadata(&self) -> ZarrResult<()> {
        if self.format == ZarrFormat::V2 {
            return Err(ZarrError::InvalidMetadata {
                path: self.path.clone(),
                reason: "metadata of Zarr v2 arrays cannot be modified".into(),
            });
        }
        self.check_writable()?;
        self.store
            .set(
                &metadata_key(&self.path),
                Bytes::from(self.metadata.to_bytes()),
            )
            .await?;
        Ok(())
    }

    /// Replaces the user attributes and writes the metadata.
    ///
    /// # Errors
    /// [`ZarrError::ReadOnly`]; [`ZarrError::InvalidMetadata`] for Zarr v2 arrays;
    /// store errors.
    pub async fn set_attributes(&mut self, attributes: Map<String, Value>) -> ZarrResult<()> {
        let old = std::mem::replace(&mut self.metadata.attributes, attributes);
        if let Err(e) = self.store_metadata().await {
            self.metadata.attributes = old;
            return Err(e);
        }
        Ok(())
    }

    /// Merges `attributes` into the user attributes (keys with `null` values are
    /// removed) and writes the metadata.
    ///
    /// # Errors
    /// As [`Array::set_attributes`].
    pub async fn update_attributes(&mut self, attributes: Map<String, Value>) -> ZarrResult<()> {
        let merged = crate::zarr::node::merge_attributes(&self.metadata.attributes, attributes);
        self.set_attributes(merged).await
    }

    /// Changes the shape and writes the metadata. When shrinking, chunks now fully
    /// outside the shape are erased, and stored chunks that straddle the new edge have
    /// their out-of-bounds elements reset to the fill value (so growing again later
    /// shows the fill value there, as the regular grid spec recommends).
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] for a different dimensionality;
    /// [`ZarrError::ReadOnly`]; chunk and store errors.
    pub async fn resize(&mut self, new_shape: Vec<u64>) -> ZarrResult<()> {
        self.check_writable()?;
        if self.format == ZarrFormat::V2 {
            return Err(ZarrError::InvalidMetadata {
                path: self.path.clone(),
                reason: "metadata of Zarr v2 arrays cannot be modified".into(),
            });
        }
        if new_shape.len() != self.ndim() {
            return Err(self.region_err(format!(
                "new shape {new_shape:?} does not have {} dimensions",
                self.ndim()
            )));
        }
        let shrinks = new_shape
            .iter()
            .zip(&self.metadata.shape)
            .any(|(n, o)| n < o);
        if shrinks {
            let prefix = node_prefix(&self.path);
            let keys = self.store.list_prefix(&prefix).await?;
            let new_full = ArraySubset::full(&new_shape);
            let mut erase = Vec::new();
            let mut trim = Vec::new();
            for key in keys {
                let Some(idx) = self.derived.keys.decode(&key[prefix.len()..], self.ndim()) else {
                    continue;
                };
                let r = self.derived.grid.chunk_region(&idx);
                match r.intersect(&new_full) {
                    None => erase.push(key),
                    Some(inside) => {
                        let old_in = self.chunk_region(&idx);
                        if inside != old_in {
                            trim.push((idx, inside));
                        }
                    }
                }
            }
            let this = &*self;
            futures::stream::iter(erase)
                .map(|k| async move { this.store.erase(&k).await })
                .buffer_unordered(self.options.concurrency.max(1))
                .try_collect::<Vec<()>>()
                .await?;
            futures::stream::iter(trim)
                .map(|(idx, inside)| this.trim_chunk(idx, inside))
                .buffer_unordered(self.options.concurrency.max(1))
                .try_collect::<Vec<()>>()
                .await?;
        }
        let old = std::mem::replace(&mut self.metadata.shape, new_shape);
        if let Err(e) = self.store_metadata().await {
            self.metadata.shape = old;
            return Err(e);
        }
        Ok(())
    }

    /// Resets the elements of chunk `idx` outside `inside` (array coordinates) to the
    /// fill value.
    async fn trim_chunk(&self, idx: Vec<u64>, inside: ArraySubset) -> ZarrResult<()> {
        let Some(existing) = self.fetch_chunk(&idx).await? else {
            return Ok(());
        };
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let local = inside.relative_to(&chunk_region.start);
        let kept = existing.extract(&self.metadata.data_type, &self.derived.repr.shape, &local);
        let mut fresh = self.fill_bytes(self.chunk_len()? as u64)?;
        fresh.copy_from(
            &self.derived.repr.shape,
            &local.start,
            &kept,
            &local.shape,
            &vec![0; local.ndim()],
            &local.shape,
            self.metadata.data_type.fixed_size().unwrap_or(0),
        );
        self.store_chunk(self.key_of(&idx), fresh).await
    }

    /// Deletes the array (its metadata and all chunks).
    ///
    /// # Errors
    /// [`ZarrError::ReadOnly`]; store errors.
    pub async fn delete(self) -> ZarrResult<()> {
        self.check_writable()?;
        self.store.erase_prefix(&node_prefix(&self.path)).await?;
        Ok(())
    }
}

/// Builds the metadata of a new array and creates it in a store.
///
/// ```no_run
/// # async fn f(store: std::sync::Arc<dyn floe::zarr::Store>) -> floe::zarr::ZarrResult<()> {
/// use floe::zarr::{ArrayBuilder, ArraySubset, DataType};
/// let array = ArrayBuilder::new(vec![100, 100], vec![10, 10], DataType::Float32)
///     .fill_value(serde_json::json!("NaN"))
///     .dimension_names(vec![Some("y".into()), Some("x".into())])
///     .create(store, "group/temperature")
///     .await?;
/// array.write_region(&ArraySubset::new(vec![0, 0], vec![2, 2]), &[1.0f32, 2.0, 3.0, 4.0]).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ArrayBuilder {
    shape: Vec<u64>,
    chunk_shape: Vec<u64>,
    data_type: DataType,
    fill_value: Option<Value>,
    codecs: Option<Vec<Value>>,
    chunk_key_encoding: ChunkKeyEncodingKind,
    dimension_names: Option<Vec<Option<String>>>,
    attributes: Map<String, Value>,
    overwrite: bool,
    options: ArrayOptions,
}

impl ArrayBuilder {
    /// An array of `shape` elements in chunks of `chunk_shape` (regular grid), with
    /// the data type's default fill value, default chunk key encoding (`/`) and
    /// default codecs (`bytes` little-endian + `zstd` level 0, or `vlen-utf8` +
    /// `zstd` for strings — as zarr-python).
    pub fn new(shape: Vec<u64>, chunk_shape: Vec<u64>, data_type: DataType) -> Self {
        ArrayBuilder {
            shape,
            chunk_shape,
            data_type,
            fill_value: None,
            codecs: None,
            chunk_key_encoding: ChunkKeyEncodingKind::Default(Separator::Slash),
            dimension_names: None,
            attributes: Map::new(),
            overwrite: false,
            options: ArrayOptions::default(),
        }
    }

    /// The fill value in its JSON form (`0`, `"NaN"`, `[1, 0]`, `"0x7fc00000"`, ...).
    pub fn fill_value(mut self, fill: Value) -> Self {
        self.fill_value = Some(fill);
        self
    }

    /// The fill value as an element of `T` (must match the data type at build time).
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] / [`ZarrError::InvalidValue`].
    pub fn fill_value_of<T: Element>(mut self, value: T) -> ZarrResult<Self> {
        if !T::matches(&self.data_type) {
            return Err(ZarrError::ElementType {
                path: String::new(),
                element: T::RUST_TYPE,
                data_type: self.data_type.to_string(),
            });
        }
        let fill = match T::to_array_bytes(&[value], &self.data_type)? {
            ArrayBytes::Fixed(b) => FillValue::Bytes(b),
            ArrayBytes::Strings(mut s) => FillValue::String(s.pop().unwrap_or_default()),
        };
        self.fill_value = Some(self.data_type.fill_value_to_json(&fill)?);
        Ok(self)
    }

    /// The `codecs` list in its JSON form (see [`crate::zarr::codec`]).
    pub fn codecs(mut self, codecs: Vec<Value>) -> Self {
        self.codecs = Some(codecs);
        self
    }

    /// The chunk key encoding.
    pub fn chunk_key_encoding(mut self, encoding: ChunkKeyEncodingKind) -> Self {
        self.chunk_key_encoding = encoding;
        self
    }

    /// Dimension names (one per dimension; `None` for unnamed).
    pub fn dimension_names(mut self, names: Vec<Option<String>>) -> Self {
        self.dimension_names = Some(names);
        self
    }

    /// User attributes.
    pub fn attributes(mut self, attributes: Map<String, Value>) -> Self {
        self.attributes = attributes;
        self
    }

    /// Replace an existing node at the path (erasing everything under it) instead of
    /// failing.
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Runtime options of the created array.
    pub fn options(mut self, options: ArrayOptions) -> Self {
        self.options = options;
        self
    }

    /// The default codecs for a data type.
    pub fn default_codecs(data_type: &DataType) -> Vec<Value> {
        let zstd =
            serde_json::json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}});
        let first = if *data_type == DataType::String {
            serde_json::json!({"name": "vlen-utf8", "configuration": {}})
        } else {
            serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}})
        };
        vec![first, zstd]
    }

    /// The validated metadata document.
    ///
    /// # Errors
    /// Any metadata error ([`ArrayMetadata::from_json`]): bad fill value, codecs that
    /// cannot encode the data type, dimension mismatches, zero chunk lengths.
    pub fn build_metadata(&self) -> ZarrResult<ArrayMetadata> {
        let fill = match &self.fill_value {
            Some(f) => f.clone(),
            None => self
                .data_type
                .fill_value_to_json(&self.data_type.default_fill_value())?,
        };
        let codecs = self
            .codecs
            .clone()
            .unwrap_or_else(|| Self::default_codecs(&self.data_type));
        let mut doc = serde_json::json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": self.shape,
            "data_type": self.data_type.to_json(),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}},
            "chunk_key_encoding": self.chunk_key_encoding.encoding().to_json(),
            "fill_value": fill,
            "codecs": codecs,
            "attributes": self.attributes,
        });
        if let Some(names) = &self.dimension_names {
            doc["dimension_names"] = serde_json::json!(names);
        }
        ArrayMetadata::from_json(&doc)
    }

    /// Creates the array at `path`: writes its `zarr.json` (and group metadata for
    /// missing parent groups).
    ///
    /// # Errors
    /// [`ZarrError::NodeExists`] when a node exists at `path` and `overwrite` is off;
    /// [`ZarrError::WrongNodeType`] when a parent is an array; metadata errors (see
    /// [`ArrayBuilder::build_metadata`]); [`ZarrError::ReadOnly`]; store errors.
    pub async fn create(self, store: Arc<dyn Store>, path: &str) -> ZarrResult<Array> {
        let path = normalize_path(path)?;
        let metadata = self.build_metadata().map_err(|e| e.at_path(&path))?;
        if !store.is_writable() {
            return Err(ZarrError::ReadOnly { path });
        }
        if node_exists(store.as_ref(), &path).await? {
            if !self.overwrite {
                return Err(ZarrError::NodeExists { path });
            }
            store.erase_prefix(&node_prefix(&path)).await?;
        }
        ensure_parent_groups(store.as_ref(), &path).await?;
        store
            .set(&metadata_key(&path), Bytes::from(metadata.to_bytes()))
            .await?;
        Ok(
            Array::from_metadata(store, &path, metadata, ZarrFormat::V3)?
                .with_options(self.options),
        )
    }
}
