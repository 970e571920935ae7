//! The `sharding_indexed` codec (`../shared/specs/zarr/v3/codecs/sharding-indexed`).
//!
//! A shard (one outer chunk, one store value) holds inner chunks encoded with the
//! inner `codecs`, plus an index of `(offset, nbytes)` `u64` pairs — shape
//! `chunks_per_shard + [2]`, encoded with `index_codecs`, placed at the `start` or
//! `end` of the value. Missing inner chunks are `(2^64-1, 2^64-1)` and read as the
//! fill value. Inner chunks equal to the fill value are not written. Sharding can be
//! nested (an inner codec list may itself contain `sharding_indexed`).
//!
//! Partial reads ([`ArrayToBytesCodec::partial_decode`]) fetch the index with one
//! ranged read and then only the inner chunks the region needs, with a single
//! multi-range read.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::zarr::array_bytes::{ArrayBytes, ElemsMut, ElemsRef};
use crate::zarr::chunk_grid::{ChunkGrid, RegularChunkGrid};
use crate::zarr::codec::{
    check_data, codec_from_json, run_blocking, ArrayToBytesCodec, ByteSource, ChunkRepr,
    CodecChain, Config,
};
use crate::zarr::data_type::{DataType, FillValue};
use crate::zarr::error::{CodecError, ZarrError, ZarrResult};
use crate::zarr::store::ByteRange;
use crate::zarr::subset::{indices_in, ArraySubset};

const NAME: &str = "sharding_indexed";
const EMPTY: u64 = u64::MAX;

/// Where the shard index is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexLocation {
    /// At the beginning of the shard.
    Start,
    /// At the end of the shard (the default).
    End,
}

/// The `sharding_indexed` codec.
#[derive(Clone, Debug)]
pub struct ShardingCodec {
    chunk_shape: Vec<u64>,
    inner: Arc<CodecChain>,
    index: Arc<CodecChain>,
    index_location: IndexLocation,
}

impl ShardingCodec {
    /// A sharding codec with inner chunk shape `chunk_shape`, inner codecs `inner`
    /// and index codecs `index` (which must have a fixed encoded size, e.g. `bytes`
    /// little-endian + `crc32c`).
    ///
    /// # Errors
    /// [`ZarrError::InvalidCodec`] for a zero inner chunk length.
    pub fn new(
        chunk_shape: Vec<u64>,
        inner: CodecChain,
        index: CodecChain,
        index_location: IndexLocation,
    ) -> ZarrResult<Self> {
        if chunk_shape.contains(&0) {
            return Err(ZarrError::InvalidCodec {
                codec: NAME.into(),
                reason: format!("inner chunk shape {chunk_shape:?} has a zero length"),
            });
        }
        Ok(ShardingCodec {
            chunk_shape,
            inner: Arc::new(inner),
            index: Arc::new(index),
            index_location,
        })
    }

    /// The inner chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }

    /// The inner codec chain.
    pub fn inner_codecs(&self) -> &CodecChain {
        &self.inner
    }

    pub(crate) fn from_config(cfg: &Config, dt: &DataType) -> ZarrResult<Self> {
        cfg.only(&["chunk_shape", "codecs", "index_codecs", "index_location"])?;
        let chunk_shape = cfg
            .get("chunk_shape")
            .and_then(Value::as_array)
            .ok_or_else(|| cfg.err("`chunk_shape` must be an array of integers"))?
            .iter()
            .map(|v| {
                v.as_u64()
                    .filter(|&x| x > 0)
                    .ok_or_else(|| cfg.err("`chunk_shape` must hold positive integers"))
            })
            .collect::<ZarrResult<Vec<u64>>>()?;
        let list = |key: &str| -> ZarrResult<&Vec<Value>> {
            cfg.get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| cfg.err(format!("`{key}` must be a list of codecs")))
        };
        let inner_repr = ChunkRepr {
            shape: chunk_shape.clone(),
            data_type: dt.clone(),
            fill_value: dt.default_fill_value(),
        };
        let inner = CodecChain::from_json(list("codecs")?, &inner_repr)?;
        let mut index_codecs = Vec::new();
        for c in list("index_codecs")? {
            if let Some(c) = codec_from_json(c, &DataType::UInt64)? {
                index_codecs.push(c);
            }
        }
        let index = CodecChain::new(index_codecs)?;
        let index_location = match cfg.str("index_location")? {
            None | Some("end") => IndexLocation::End,
            Some("start") => IndexLocation::Start,
            Some(other) => {
                return Err(cfg.err(format!(
                    "index_location must be start or end, not {other:?}"
                )))
            }
        };
        let codec = ShardingCodec::new(chunk_shape, inner, index, index_location)?;
        // The index must have a fixed encoded size; check with a 1-chunk index.
        let probe = codec.index_repr(&vec![1; codec.chunk_shape.len()]);
        codec.index.validate(&probe)?;
        if codec.index.encoded_size(&probe).is_none() {
            return Err(cfg.err("index_codecs must produce a fixed-size encoding"));
        }
        Ok(codec)
    }

    fn chunks_per_shard(&self, shard_shape: &[u64]) -> Vec<u64> {
        shard_shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(s, c)| s / c)
            .collect()
    }

    fn index_repr(&self, cps: &[u64]) -> ChunkRepr {
        let mut shape = cps.to_vec();
        shape.push(2);
        ChunkRepr {
            shape,
            data_type: DataType::UInt64,
            fill_value: FillValue::Bytes(EMPTY.to_ne_bytes().to_vec()),
        }
    }

    fn inner_repr(&self, repr: &ChunkRepr) -> ChunkRepr {
        ChunkRepr {
            shape: self.chunk_shape.clone(),
            data_type: repr.data_type.clone(),
            fill_value: repr.fill_value.clone(),
        }
    }

    fn index_size(&self, cps: &[u64]) -> Result<u64, CodecError> {
        // 16 bytes per inner chunk before the index codecs: refuse an index that
        // could never be held (its size must not wrap).
        crate::zarr::subset::checked_product(cps)
            .and_then(|n| n.checked_mul(16))
            .filter(|&b| b <= isize::MAX as u64)
            .ok_or_else(|| {
                CodecError::unsupported(
                    NAME,
                    format!("a shard of {cps:?} inner chunks has an index too large to hold"),
                )
            })?;
        self.index
            .encoded_size(&self.index_repr(cps))
            .ok_or_else(|| CodecError::unsupported(NAME, "index codecs have no fixed size"))
    }

    fn decode_index(&self, bytes: ::bytes::Bytes, cps: &[u64]) -> Result<Vec<u64>, CodecError> {
        let n = crate::zarr::subset::checked_product(cps).and_then(|n| n.checked_mul(16));
        match self.index.decode(bytes, &self.index_repr(cps))? {
            ArrayBytes::Fixed(b) if Some(b.len() as u64) == n => Ok(b
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect()),
            _ => Err(CodecError::invalid(NAME, "shard index has the wrong size")),
        }
    }

    /// The `(offset, nbytes)` of inner chunk `i`, `None` when empty.
    fn entry(index: &[u64], i: usize, len: u64) -> Result<Option<(u64, u64)>, CodecError> {
        let (off, n) = (index[2 * i], index[2 * i + 1]);
        if off == EMPTY && n == EMPTY {
            return Ok(None);
        }
        match off.checked_add(n) {
            Some(end) if end <= len => Ok(Some((off, n))),
            _ => Err(CodecError::invalid(
                NAME,
                format!("inner chunk {i} at offset {off} with {n} bytes lies outside the {len}-byte shard"),
            )),
        }
    }
}

/// Encoded bytes of one inner chunk when assembling a shard.
enum InnerBytes<'a> {
    Owned(Vec<u8>),
    Shared(::bytes::Bytes),
    /// Stored as its elements, still in the caller's buffer.
    Borrowed(&'a [u8]),
}

impl InnerBytes<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            InnerBytes::Owned(v) => v,
            InnerBytes::Shared(b) => b,
            InnerBytes::Borrowed(b) => b,
        }
    }
}

impl ShardingCodec {
    /// Lays out encoded inner chunks (C order; `None` = empty) and their index.
    /// Returns the shard and whether every inner chunk is empty.
    fn assemble(
        &self,
        cps: &[u64],
        inner: Vec<Option<InnerBytes<'_>>>,
    ) -> Result<(Vec<u8>, bool), CodecError> {
        let index_size = self.index_size(cps)? as usize;
        let data_len: usize = inner.iter().flatten().map(|b| b.as_slice().len()).sum();
        let mut out = crate::buffer_pool::take(data_len + index_size);
        if self.index_location == IndexLocation::Start {
            out.resize(index_size, 0);
        }
        let mut index = vec![EMPTY; 2 * inner.len()];
        let mut all_empty = true;
        for (i, chunk) in inner.iter().enumerate() {
            if let Some(chunk) = chunk {
                all_empty = false;
                index[2 * i] = out.len() as u64;
                index[2 * i + 1] = chunk.as_slice().len() as u64;
                out.extend_from_slice(chunk.as_slice());
            }
        }
        let index_bytes: Vec<u8> = index.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let enc_index = self
            .index
            .encode(ArrayBytes::Fixed(index_bytes), &self.index_repr(cps))?;
        if enc_index.len() != index_size {
            return Err(CodecError::unsupported(
                NAME,
                "index encoding has an unexpected size",
            ));
        }
        match self.index_location {
            IndexLocation::Start => out[..index_size].copy_from_slice(&enc_index),
            IndexLocation::End => out.extend_from_slice(&enc_index),
        }
        Ok((out, all_empty))
    }

    /// Puts every inner chunk the shard `bytes` (with its decoded `index`, `cps`
    /// inner chunks per dimension) stores into its place in `out` (the whole shard
    /// of `repr`, C order); empty inner chunks are left as they are.
    ///
    /// # Errors
    /// [`CodecError::InvalidData`] for index entries outside the shard and inner
    /// chunks that do not decode to one inner chunk; the inner chain's errors.
    fn place_inner_chunks(
        &self,
        bytes: &::bytes::Bytes,
        index: &[u64],
        cps: &[u64],
        repr: &ChunkRepr,
        mut out: ElemsMut<'_>,
    ) -> Result<(), CodecError> {
        let inner_repr = self.inner_repr(repr);
        let elem = repr.data_type.fixed_size().unwrap_or(0);
        let zeros = vec![0; cps.len()];
        let mut start = vec![0; cps.len()];
        for (i, idx) in indices_in(&zeros, cps).enumerate() {
            let Some((off, n)) = Self::entry(index, i, bytes.len() as u64)? else {
                continue;
            };
            for ((s, a), b) in start.iter_mut().zip(&idx).zip(&self.chunk_shape) {
                *s = a * b;
            }
            with_inner_elems(
                &self.inner,
                bytes.slice(off as usize..(off + n) as usize),
                &inner_repr,
                |src| {
                    out.copy_from(
                        &repr.shape,
                        &start,
                        src,
                        &self.chunk_shape,
                        &zeros,
                        &self.chunk_shape,
                        elem,
                    );
                },
            )?;
        }
        Ok(())
    }

    /// The region of inner chunk `idx` within the shard (elements).
    fn inner_region(&self, idx: &[u64]) -> ArraySubset {
        ArraySubset::new(
            idx.iter()
                .zip(&self.chunk_shape)
                .map(|(a, b)| a * b)
                .collect(),
            self.chunk_shape.clone(),
        )
    }

    /// Decodes the index of a whole shard value.
    fn read_index(&self, bytes: &::bytes::Bytes, cps: &[u64]) -> Result<Vec<u64>, CodecError> {
        let index_size = self.index_size(cps)? as usize;
        if bytes.len() < index_size {
            return Err(CodecError::invalid(
                NAME,
                format!(
                    "shard has {} bytes, less than its {index_size}-byte index",
                    bytes.len()
                ),
            ));
        }
        let index_bytes = match self.index_location {
            IndexLocation::Start => bytes.slice(..index_size),
            IndexLocation::End => bytes.slice(bytes.len() - index_size..),
        };
        self.decode_index(index_bytes, cps)
    }
}

fn linear(idx: &[u64], shape: &[u64]) -> usize {
    idx.iter().zip(shape).fold(0u64, |acc, (i, s)| acc * s + i) as usize
}

fn fill_for(repr: &ChunkRepr, n: u64) -> Result<ArrayBytes, CodecError> {
    ArrayBytes::new_fill(n as usize, &repr.data_type, &repr.fill_value)
        .map_err(|e| CodecError::unsupported(NAME, e.to_string()))
}

#[async_trait]
impl ArrayToBytesCodec for ShardingCodec {
    fn to_json(&self) -> Value {
        json!({
            "name": NAME,
            "configuration": {
                "chunk_shape": self.chunk_shape,
                "codecs": self.inner.to_json(),
                "index_codecs": self.index.to_json(),
                "index_location": match self.index_location {
                    IndexLocation::Start => "start",
                    IndexLocation::End => "end",
                },
            }
        })
    }

    fn validate(&self, repr: &ChunkRepr) -> Result<(), CodecError> {
        if repr.shape.len() != self.chunk_shape.len() {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "inner chunk shape {:?} does not match the {}-dimensional shard",
                    self.chunk_shape,
                    repr.shape.len()
                ),
            ));
        }
        if repr
            .shape
            .iter()
            .zip(&self.chunk_shape)
            .any(|(s, c)| s % c != 0)
        {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "inner chunk shape {:?} does not evenly divide the shard shape {:?}",
                    self.chunk_shape, repr.shape
                ),
            ));
        }
        self.index_size(&self.chunks_per_shard(&repr.shape))?;
        Ok(())
    }

    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        if let ArrayBytes::Fixed(bytes) = &data {
            // Validates the shard and checks the length itself.
            return self.encode_borrowed(bytes, repr);
        }
        self.validate(repr)?;
        check_data(NAME, &data, repr)?;
        let cps = self.chunks_per_shard(&repr.shape);
        let inner_repr = self.inner_repr(repr);
        let mut inner = Vec::new();
        for idx in indices_in(&vec![0; cps.len()], &cps) {
            let region = self.inner_region(&idx);
            let chunk = data.extract(&repr.data_type, &repr.shape, &region);
            inner.push(if chunk.is_fill(&repr.fill_value) {
                None
            } else {
                Some(InnerBytes::Owned(self.inner.encode(chunk, &inner_repr)?))
            });
        }
        self.assemble(&cps, inner).map(|(bytes, _)| bytes)
    }

    fn encodes_borrowed(&self, repr: &ChunkRepr) -> bool {
        repr.data_type.fixed_size().is_some()
    }

    /// Each inner chunk is read where it lies in `data` when it is one run of it
    /// (inner chunks spanning the shard's trailing dimensions), else copied out;
    /// inner chunks stored as their elements go into the shard straight from there,
    /// the others are encoded from there.
    fn encode_borrowed(&self, data: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.validate(repr)?;
        let elem = repr.data_type.fixed_size().unwrap_or(0);
        if elem == 0 || repr.size_bytes() != Some(data.len() as u64) {
            return Err(CodecError::invalid(
                NAME,
                format!(
                    "expected {} elements of {}, got {} bytes",
                    repr.num_elements(),
                    repr.data_type,
                    data.len()
                ),
            ));
        }
        let cps = self.chunks_per_shard(&repr.shape);
        let inner_repr = self.inner_repr(repr);
        let as_stored = self.inner.stores_native_bytes(&inner_repr);
        let borrowed = self.inner.encodes_borrowed(&inner_repr);
        let mut inner = Vec::new();
        for idx in indices_in(&vec![0; cps.len()], &cps) {
            let region = self.inner_region(&idx);
            let run = region
                .contiguous_in(&repr.shape)
                .and_then(|r| data.get(r.start * elem..r.end * elem));
            let copied = match run {
                Some(_) => None,
                None => {
                    match ElemsRef::Fixed(data).extract(&repr.data_type, &repr.shape, &region) {
                        ArrayBytes::Fixed(b) => Some(b),
                        ArrayBytes::Strings(_) => None,
                    }
                }
            };
            let elems = run.or(copied.as_deref()).unwrap_or_default();
            if ElemsRef::Fixed(elems).is_fill(&repr.fill_value) {
                inner.push(None);
                continue;
            }
            inner.push(Some(if borrowed {
                InnerBytes::Owned(self.inner.encode_borrowed(elems, &inner_repr)?)
            } else {
                match (as_stored, run, copied) {
                    (true, Some(run), _) => InnerBytes::Borrowed(run),
                    (_, _, Some(copied)) => InnerBytes::Owned(
                        self.inner.encode(ArrayBytes::Fixed(copied), &inner_repr)?,
                    ),
                    (_, run, None) => InnerBytes::Owned(self.inner.encode(
                        ArrayBytes::Fixed(crate::buffer_pool::copy_of(run.unwrap_or_default())),
                        &inner_repr,
                    )?),
                }
            }));
        }
        self.assemble(&cps, inner).map(|(bytes, _)| bytes)
    }

    fn supports_partial_encode(&self) -> bool {
        true
    }

    fn partial_encode(
        &self,
        existing: Option<::bytes::Bytes>,
        repr: &ChunkRepr,
        region: &ArraySubset,
        part: &ArrayBytes,
    ) -> Result<(Vec<u8>, bool), CodecError> {
        self.validate(repr)?;
        if !region.within(&repr.shape) {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "region {region:?} is outside the shard shape {:?}",
                    repr.shape
                ),
            ));
        }
        let expected = ChunkRepr {
            shape: region.shape.clone(),
            ..repr.clone()
        };
        check_data(NAME, part, &expected)?;
        let cps = self.chunks_per_shard(&repr.shape);
        let (bytes, index) = match existing {
            Some(bytes) => {
                let index = self.read_index(&bytes, &cps)?;
                (bytes, Some(index))
            }
            None => (::bytes::Bytes::new(), None),
        };
        let inner_repr = self.inner_repr(repr);
        let elem = repr.data_type.fixed_size().unwrap_or(0);
        let zeros = vec![0; cps.len()];
        let mut inner = Vec::new();
        for (i, idx) in indices_in(&zeros, &cps).enumerate() {
            let chunk_region = ArraySubset::new(
                idx.iter()
                    .zip(&self.chunk_shape)
                    .map(|(a, b)| a * b)
                    .collect(),
                self.chunk_shape.clone(),
            );
            let old = match &index {
                Some(index) => Self::entry(index, i, bytes.len() as u64)?
                    .map(|(off, n)| bytes.slice(off as usize..(off + n) as usize)),
                None => None,
            };
            let Some(inter) = chunk_region.intersect(region) else {
                // Untouched: keep the encoded inner chunk as it is.
                inner.push(old.map(InnerBytes::Shared));
                continue;
            };
            let chunk = if inter == chunk_region {
                part.extract(
                    &repr.data_type,
                    &region.shape,
                    &inter.relative_to(&region.start),
                )
            } else {
                let mut chunk = match old {
                    Some(old) => {
                        let d = self.inner.decode(old, &inner_repr)?;
                        check_data(NAME, &d, &inner_repr)?;
                        d
                    }
                    None => fill_for(repr, inner_repr.num_elements())?,
                };
                chunk.copy_from(
                    &self.chunk_shape,
                    &inter.relative_to(&chunk_region.start).start,
                    part,
                    &region.shape,
                    &inter.relative_to(&region.start).start,
                    &inter.shape,
                    elem,
                );
                chunk
            };
            inner.push(if chunk.is_fill(&repr.fill_value) {
                None
            } else {
                Some(InnerBytes::Owned(self.inner.encode(chunk, &inner_repr)?))
            });
        }
        self.assemble(&cps, inner)
    }

    fn decode(&self, bytes: ::bytes::Bytes, repr: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        self.validate(repr)?;
        let cps = self.chunks_per_shard(&repr.shape);
        let index = self.read_index(&bytes, &cps)?;
        let mut out = fill_for(repr, repr.num_elements())?;
        self.place_inner_chunks(&bytes, &index, &cps, repr, out.as_view_mut())?;
        Ok(out)
    }

    fn decodes_into(&self, repr: &ChunkRepr) -> bool {
        repr.data_type.fixed_size().is_some()
    }

    /// Each stored inner chunk is decoded (or, stored as its elements, copied)
    /// straight into its place in `dest`; `dest` gets the fill value first only
    /// when the index lists an empty inner chunk.
    fn decode_into(
        &self,
        bytes: ::bytes::Bytes,
        repr: &ChunkRepr,
        dest: &mut [u8],
    ) -> Result<(), CodecError> {
        self.validate(repr)?;
        if repr.size_bytes() != Some(dest.len() as u64) {
            return Err(CodecError::invalid(
                NAME,
                format!(
                    "{} bytes are not one shard of {} x {}",
                    dest.len(),
                    repr.num_elements(),
                    repr.data_type
                ),
            ));
        }
        let cps = self.chunks_per_shard(&repr.shape);
        let index = self.read_index(&bytes, &cps)?;
        if index
            .chunks_exact(2)
            .any(|e| e[0] == EMPTY && e[1] == EMPTY)
        {
            crate::zarr::array_bytes::fill_repeated(dest, repr.fill_value.as_bytes());
        }
        self.place_inner_chunks(&bytes, &index, &cps, repr, ElemsMut::Fixed(dest))
    }

    fn encoded_size(&self, _repr: &ChunkRepr) -> Option<u64> {
        None
    }

    fn supports_partial_decode(&self) -> bool {
        true
    }

    async fn partial_decode(
        &self,
        source: &dyn ByteSource,
        repr: &ChunkRepr,
        region: &ArraySubset,
    ) -> Result<Option<ArrayBytes>, CodecError> {
        self.validate(repr)?;
        if !region.within(&repr.shape) {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "region {region:?} is outside the shard shape {:?}",
                    repr.shape
                ),
            ));
        }
        let cps = self.chunks_per_shard(&repr.shape);
        let index_size = self.index_size(&cps)?;
        let range = match self.index_location {
            IndexLocation::End => ByteRange::Suffix(index_size),
            IndexLocation::Start => ByteRange::FromStart {
                offset: 0,
                length: Some(index_size),
            },
        };
        let Some(mut parts) = source.get_ranges(&[range]).await? else {
            return Ok(None);
        };
        let index_bytes = parts
            .pop()
            .filter(|b| b.len() as u64 == index_size)
            .ok_or_else(|| CodecError::invalid(NAME, "shard is smaller than its index"))?;
        let index = self.decode_index(index_bytes, &cps)?;
        let grid = RegularChunkGrid::new(self.chunk_shape.clone())
            .map_err(|e| CodecError::unsupported(NAME, e.to_string()))?;
        let wanted = grid.chunks_intersecting(region);
        let mut needed = Vec::new();
        let mut ranges = Vec::new();
        for idx in indices_in(&wanted.start, &wanted.shape) {
            let i = linear(&idx, &cps);
            let (off, n) = (index[2 * i], index[2 * i + 1]);
            if off == EMPTY && n == EMPTY {
                continue;
            }
            if off.checked_add(n).is_none() {
                return Err(CodecError::invalid(NAME, "inner chunk range overflows"));
            }
            ranges.push(ByteRange::FromStart {
                offset: off,
                length: Some(n),
            });
            needed.push(idx);
        }
        let fetched = if ranges.is_empty() {
            Vec::new()
        } else {
            source
                .get_ranges(&ranges)
                .await?
                .ok_or_else(|| CodecError::invalid(NAME, "shard disappeared during the read"))?
        };
        let total: usize = fetched.iter().map(|b| b.len()).sum();
        let inner = Arc::clone(&self.inner);
        let inner_repr = self.inner_repr(repr);
        let chunk_shape = self.chunk_shape.clone();
        let region = region.clone();
        let repr = repr.clone();
        // The work is the inner chunks fetched and the region decoded, not the whole
        // shard: one small inner chunk is decoded in place, without a hop to the
        // compute pool.
        let elem = repr.data_type.fixed_size().unwrap_or(1) as u64;
        let out_bytes =
            usize::try_from(region.num_elements().saturating_mul(elem)).unwrap_or(usize::MAX);
        let work = total.max(out_bytes);
        run_blocking(work, move || {
            let elem = repr.data_type.fixed_size().unwrap_or(0);
            let mut out = fill_for(&repr, region.num_elements())?;
            for (idx, bytes) in needed.into_iter().zip(fetched) {
                let chunk_region = grid.chunk_region(&idx);
                let inter = chunk_region.intersect(&region);
                with_inner_elems(&inner, bytes, &inner_repr, |src| {
                    if let Some(inter) = &inter {
                        out.as_view_mut().copy_from(
                            &region.shape,
                            &inter.relative_to(&region.start).start,
                            src,
                            &chunk_shape,
                            &inter.relative_to(&chunk_region.start).start,
                            &inter.shape,
                            elem,
                        );
                    }
                })?;
            }
            Ok(Some(out))
        })
        .await
    }
}

/// Hands `place` an inner chunk's elements from its stored `bytes`: for an inner
/// chain that stores elements as they are ([`CodecChain::stores_native_bytes`]:
/// `bytes` in native byte order and nothing else) the stored bytes themselves,
/// checked to be one inner chunk long, with no buffer of their own (a shard of
/// 4 KiB inner chunks decodes with one copy per inner chunk instead of two and an
/// allocation); otherwise the chain's decoded chunk.
///
/// # Errors
/// [`CodecError::InvalidData`] for an inner chunk of the wrong length; the inner
/// chain's decoding errors.
fn with_inner_elems(
    inner: &CodecChain,
    bytes: ::bytes::Bytes,
    inner_repr: &ChunkRepr,
    place: impl FnOnce(ElemsRef<'_>),
) -> Result<(), CodecError> {
    if inner.stores_native_bytes(inner_repr) {
        let want = inner_repr.size_bytes();
        if want != Some(bytes.len() as u64) {
            return Err(CodecError::invalid(
                NAME,
                format!(
                    "expected {} elements of {}, got {} bytes",
                    inner_repr.num_elements(),
                    inner_repr.data_type,
                    bytes.len()
                ),
            ));
        }
        place(ElemsRef::Fixed(&bytes));
        return Ok(());
    }
    let decoded = inner.decode(bytes, inner_repr)?;
    check_data(NAME, &decoded, inner_repr)?;
    place(decoded.as_view());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::{BytesSource, Codec};
    use serde_json::json;

    fn sharding_json(location: &str) -> Value {
        json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": location,
        }})
    }

    fn codec(location: &str) -> Arc<dyn ArrayToBytesCodec> {
        match codec_from_json(&sharding_json(location), &DataType::UInt16)
            .unwrap()
            .unwrap()
        {
            Codec::ArrayToBytes(c) => c,
            _ => panic!("not array->bytes"),
        }
    }

    fn repr() -> ChunkRepr {
        ChunkRepr {
            shape: vec![4, 4],
            data_type: DataType::UInt16,
            fill_value: FillValue::Bytes(7u16.to_ne_bytes().to_vec()),
        }
    }

    #[test]
    fn layout_matches_spec() {
        let c = codec("end");
        assert_eq!(c.to_json(), sharding_json("end"));
        // Only the top-left inner chunk differs from the fill value.
        let mut vals = [7u16; 16];
        vals[0] = 1;
        vals[1] = 2;
        vals[4] = 3;
        vals[5] = 4;
        let data = ArrayBytes::Fixed(vals.iter().flat_map(|v| v.to_ne_bytes()).collect());
        let enc = c.encode(data.clone(), &repr()).unwrap();
        // 8 bytes of chunk data + index of 4 chunks * 16 bytes + 4 bytes crc32c
        assert_eq!(enc.len(), 8 + 64 + 4);
        assert_eq!(&enc[..8], &[1, 0, 2, 0, 3, 0, 4, 0]);
        let idx = &enc[8..72];
        assert_eq!(
            &idx[..16],
            &[0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(idx[16..].iter().all(|&b| b == 0xff));
        assert_eq!(&enc[72..], &crc32c::crc32c(idx).to_le_bytes());
        assert_eq!(c.decode(enc.into(), &repr()).unwrap(), data);

        let s = codec("start");
        let enc = s.encode(data.clone(), &repr()).unwrap();
        assert_eq!(u64::from_le_bytes(enc[..8].try_into().unwrap()), 68);
        assert_eq!(s.decode(enc.into(), &repr()).unwrap(), data);
    }

    #[test]
    fn corrupt_shards_are_errors() {
        let c = codec("end");
        let data = ArrayBytes::Fixed((0u16..16).flat_map(|v| v.to_ne_bytes()).collect());
        let enc = c.encode(data, &repr()).unwrap();
        assert_err!(
            c.decode(enc[..10].to_vec().into(), &repr()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        let mut bad = enc.clone();
        let n = bad.len();
        bad[n - 10] ^= 0xff; // index corrupted -> crc mismatch
        assert_err!(
            c.decode(bad.into(), &repr()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        // non-divisible shard shape
        let r = ChunkRepr {
            shape: vec![3, 4],
            ..repr()
        };
        assert_err!(c.validate(&r), crate::zarr::CodecError::Unsupported { .. });
    }

    /// Decoding a shard into a buffer that holds anything beforehand gives what
    /// decoding it gives, and encoding borrowed elements what encoding them gives:
    /// every inner chunk stored, some empty (fill value 7), all empty; inner chunks
    /// stored as their elements or zstd-compressed, of whole rows or not; index at
    /// the start or the end. Buffers of another length and a corrupt index are
    /// errors.
    #[test]
    fn decoding_into_a_buffer_matches_decoding() {
        let zstd_inner = json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "zstd", "configuration": {"level": 1}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end",
        }});
        let Codec::ArrayToBytes(compressed) = codec_from_json(&zstd_inner, &DataType::UInt16)
            .unwrap()
            .unwrap()
        else {
            panic!("not array->bytes");
        };
        let full: Vec<u16> = (0..16).map(|v| v * 5 + 1).collect();
        let mut some_empty = full.clone();
        // Inner chunk (1, 0): rows 2..4, columns 0..2.
        for at in [8, 9, 12, 13] {
            some_empty[at] = 7;
        }
        // Inner chunks of whole rows, each one run of the shard.
        let mut rows_json = sharding_json("end");
        rows_json["configuration"]["chunk_shape"] = json!([1, 4]);
        let Codec::ArrayToBytes(rows) = codec_from_json(&rows_json, &DataType::UInt16)
            .unwrap()
            .unwrap()
        else {
            panic!("not array->bytes");
        };
        let full_bytes: Vec<u8> = full.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            &rows
                .encode(ArrayBytes::Fixed(full_bytes.clone()), &repr())
                .unwrap()[..32],
            &full_bytes[..],
            "inner rows stored in order"
        );
        for c in [codec("end"), codec("start"), compressed, rows] {
            assert!(c.decodes_into(&repr()) && c.encodes_borrowed(&repr()));
            for vals in [&full, &some_empty, &vec![7u16; 16]] {
                let data = ArrayBytes::Fixed(vals.iter().flat_map(|v| v.to_ne_bytes()).collect());
                let enc = ::bytes::Bytes::from(c.encode(data.clone(), &repr()).unwrap());
                let raw = data.as_view();
                let ElemsRef::Fixed(raw) = raw else {
                    panic!("fixed-size elements")
                };
                assert_eq!(c.encode_borrowed(raw, &repr()).unwrap(), enc);
                assert_err!(
                    c.encode_borrowed(&raw[..30], &repr()),
                    crate::zarr::CodecError::InvalidData { .. }
                );
                let mut dest = vec![0xEEu8; 32];
                c.decode_into(enc.clone(), &repr(), &mut dest).unwrap();
                assert_eq!(ArrayBytes::Fixed(dest), data, "{}", c.to_json());
                assert_eq!(c.decode(enc.clone(), &repr()).unwrap(), data);
                let mut short = vec![0u8; 30];
                assert_err!(
                    c.decode_into(enc.clone(), &repr(), &mut short),
                    crate::zarr::CodecError::InvalidData { .. }
                );
            }
        }
        let c = codec("end");
        let mut bad = c
            .encode(
                ArrayBytes::Fixed(full.iter().flat_map(|v| v.to_ne_bytes()).collect()),
                &repr(),
            )
            .unwrap();
        let n = bad.len();
        bad[n - 10] ^= 0xff;
        assert_err!(
            c.decode_into(bad.into(), &repr(), &mut [0u8; 32]),
            crate::zarr::CodecError::InvalidData { .. }
        );
    }

    /// An inner chunk stored as its elements (`bytes`, native order) that is not one
    /// inner chunk long is an error, read whole or partially, as it is when decoded
    /// by a chain that copies (`bytes` + `crc32c`); the chain that copies decodes
    /// the same values as the stored bytes used in place.
    #[test]
    fn inner_chunks_used_in_place_are_checked_and_equal_decoded_ones() {
        // Inner chunk 0 holds 6 bytes where 2 x 2 uint16 take 8; the others are empty.
        let mut index = Vec::new();
        for (off, n) in [
            (0u64, 6u64),
            (u64::MAX, u64::MAX),
            (u64::MAX, u64::MAX),
            (u64::MAX, u64::MAX),
        ] {
            index.extend_from_slice(&off.to_le_bytes());
            index.extend_from_slice(&n.to_le_bytes());
        }
        let mut shard = vec![1u8, 0, 2, 0, 3, 0];
        shard.extend_from_slice(&index);
        shard.extend_from_slice(&crc32c::crc32c(&index).to_le_bytes());
        let c = codec("end");
        assert_err!(
            c.decode(shard.clone().into(), &repr()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        let partial = futures::executor::block_on(c.partial_decode(
            &BytesSource(Some(shard.into())),
            &repr(),
            &ArraySubset::new(vec![0, 0], vec![1, 1]),
        ));
        assert_err!(partial, crate::zarr::CodecError::InvalidData { .. });

        let checked = json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end",
        }});
        let Codec::ArrayToBytes(copying) = codec_from_json(&checked, &DataType::UInt16)
            .unwrap()
            .unwrap()
        else {
            panic!("not array->bytes");
        };
        let data = ArrayBytes::Fixed((0u16..16).flat_map(|v| (v * 3).to_ne_bytes()).collect());
        let in_place = c.encode(data.clone(), &repr()).unwrap();
        let decoded = copying.encode(data.clone(), &repr()).unwrap();
        assert_eq!(c.decode(in_place.into(), &repr()).unwrap(), data);
        assert_eq!(copying.decode(decoded.into(), &repr()).unwrap(), data);
    }

    #[test]
    fn partial_encode_touches_only_needed_inner_chunks() {
        for location in ["end", "start"] {
            let c = codec(location);
            let r = repr();
            let vals: Vec<u16> = (0..16).collect();
            let data = ArrayBytes::Fixed(vals.iter().flat_map(|v| v.to_ne_bytes()).collect());
            let enc: ::bytes::Bytes = c.encode(data, &r).unwrap().into();
            // Overwrite elements (1,1) and (1,2): inner chunks (0,0) and (0,1).
            let region = ArraySubset::new(vec![1, 1], vec![1, 2]);
            let part =
                ArrayBytes::Fixed([100u16, 200].iter().flat_map(|v| v.to_ne_bytes()).collect());
            let (new, all_fill) = c
                .partial_encode(Some(enc.clone()), &r, &region, &part)
                .unwrap();
            assert!(!all_fill);
            let mut expected = vals.clone();
            expected[5] = 100;
            expected[6] = 200;
            let dec = c.decode(new.clone().into(), &r).unwrap();
            assert_eq!(
                dec,
                ArrayBytes::Fixed(expected.iter().flat_map(|v| v.to_ne_bytes()).collect())
            );
            // Inner chunk (1,1) (elements 10, 11, 14, 15) is carried over verbatim.
            let carried: Vec<u8> = [10u16, 11, 14, 15]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            assert!(new.windows(8).any(|w| w == carried.as_slice()));
            // Missing shard: starts from the fill value (7).
            let (fresh, _) = c.partial_encode(None, &r, &region, &part).unwrap();
            let dec = c.decode(fresh.into(), &r).unwrap();
            let mut exp = [7u16; 16];
            exp[5] = 100;
            exp[6] = 200;
            assert_eq!(
                dec,
                ArrayBytes::Fixed(exp.iter().flat_map(|v| v.to_ne_bytes()).collect())
            );
            // Writing the fill value everywhere empties the shard.
            let all = ArraySubset::new(vec![0, 0], vec![4, 4]);
            let fill = ArrayBytes::Fixed(7u16.to_ne_bytes().repeat(16));
            let (_, empty) = c.partial_encode(Some(enc), &r, &all, &fill).unwrap();
            assert!(empty);
        }
    }

    #[tokio::test]
    async fn partial_decode_reads_region() {
        let c = codec("end");
        let vals: Vec<u16> = (0..16).collect();
        let data = ArrayBytes::Fixed(vals.iter().flat_map(|v| v.to_ne_bytes()).collect());
        let enc = c.encode(data, &repr()).unwrap();
        let src = BytesSource(Some(enc.into()));
        let region = ArraySubset::new(vec![1, 1], vec![2, 3]);
        let got = c
            .partial_decode(&src, &repr(), &region)
            .await
            .unwrap()
            .unwrap();
        let expected: Vec<u8> = [5u16, 6, 7, 9, 10, 11]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(got, ArrayBytes::Fixed(expected));
        let missing = BytesSource(None);
        assert!(c
            .partial_decode(&missing, &repr(), &region)
            .await
            .unwrap()
            .is_none());
    }
}
