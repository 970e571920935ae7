//! The codec traits, one per codec kind (core spec, "Codecs"), the chunk
//! representation they work on, and [`ByteSource`], through which partial decoding
//! reads without knowing stores.

use super::*;

/// The decoded representation a codec works on (core spec, "Codecs"): the shape,
/// data type and fill value of the chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkRepr {
    /// Chunk shape in elements.
    pub shape: Vec<u64>,
    /// Element data type.
    pub data_type: DataType,
    /// Fill value (used by sharding for empty inner chunks).
    pub fill_value: FillValue,
}

impl ChunkRepr {
    /// Number of elements (1 for 0-d), saturating at `u64::MAX` (arrays check that
    /// a chunk fits in memory before any codec sees it).
    pub fn num_elements(&self) -> u64 {
        crate::zarr::subset::saturating_product(&self.shape)
    }

    /// Size in bytes of the decoded chunk, `None` for variable-length data types;
    /// saturating at `u64::MAX` like [`ChunkRepr::num_elements`].
    pub fn size_bytes(&self) -> Option<u64> {
        self.data_type
            .fixed_size()
            .map(|s| (s as u64).saturating_mul(self.num_elements()))
    }
}

/// A source of encoded bytes that can be read in parts (for partial decoding).
#[async_trait]
pub trait ByteSource: Send + Sync {
    /// The whole value, `None` when absent.
    ///
    /// # Errors
    /// [`CodecError::Source`] on store failures.
    async fn get(&self) -> Result<Option<::bytes::Bytes>, CodecError>;

    /// Parts of the value, one per range; `None` when absent.
    ///
    /// # Errors
    /// [`CodecError::Source`] on store failures or ranges outside the value.
    async fn get_ranges(
        &self,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<::bytes::Bytes>>, CodecError>;
}

/// An in-memory [`ByteSource`].
#[derive(Clone, Debug)]
pub struct BytesSource(pub Option<::bytes::Bytes>);

#[async_trait]
impl ByteSource for BytesSource {
    async fn get(&self) -> Result<Option<::bytes::Bytes>, CodecError> {
        Ok(self.0.clone())
    }

    async fn get_ranges(
        &self,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<::bytes::Bytes>>, CodecError> {
        let Some(b) = &self.0 else { return Ok(None) };
        let mut out = Vec::with_capacity(ranges.len());
        for r in ranges {
            let range = r.to_range("<memory>", b.len() as u64)?;
            out.push(b.slice(range.start as usize..range.end as usize));
        }
        Ok(Some(out))
    }
}

/// An `array -> array` codec (e.g. `transpose`).
pub trait ArrayToArrayCodec: Send + Sync + Debug {
    /// The codec's metadata JSON (`{"name": ..., "configuration": ...}`).
    fn to_json(&self) -> Value;

    /// The encoded representation produced from `decoded`.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] when the codec cannot apply to `decoded`.
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError>;

    /// Encodes `data` (of representation `decoded`).
    ///
    /// # Errors
    /// [`CodecError`] when the data does not match the representation.
    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError>;

    /// Decodes `data` back into representation `decoded`.
    ///
    /// # Errors
    /// [`CodecError`] when the data does not match the representation.
    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError>;
}

/// An `array -> bytes` codec (e.g. `bytes`, `sharding_indexed`, `vlen-utf8`).
#[async_trait]
pub trait ArrayToBytesCodec: Send + Sync + Debug {
    /// The codec's metadata JSON.
    fn to_json(&self) -> Value;

    /// Checks that the codec can encode chunks of representation `repr`.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] otherwise.
    fn validate(&self, repr: &ChunkRepr) -> Result<(), CodecError>;

    /// Encodes a whole chunk.
    ///
    /// # Errors
    /// [`CodecError`] on failures of inner codecs or mismatched data.
    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>, CodecError>;

    /// Decodes a whole chunk.
    ///
    /// # Errors
    /// [`CodecError::InvalidData`] for corrupt or mis-sized input.
    fn decode(&self, bytes: ::bytes::Bytes, repr: &ChunkRepr) -> Result<ArrayBytes, CodecError>;

    /// The encoded size in bytes when it depends only on `repr` (fixed-size
    /// encodings), else `None`.
    fn encoded_size(&self, repr: &ChunkRepr) -> Option<u64>;

    /// Whether encoding a chunk of `repr` leaves its native-endian element bytes
    /// exactly as they are (`bytes` when no byte swap is needed), so that the
    /// `bytes -> bytes` codecs after it can read the caller's buffer directly. The
    /// default is `false`.
    fn keeps_native_bytes(&self, repr: &ChunkRepr) -> bool {
        let _ = repr;
        false
    }

    /// Whether [`ArrayToBytesCodec::encode_borrowed`] encodes a whole chunk of
    /// `repr` from the caller's buffer without copying it into a buffer of its own
    /// first (`sharding_indexed`: each inner chunk is read where it lies). The
    /// default is `false`.
    fn encodes_borrowed(&self, repr: &ChunkRepr) -> bool {
        let _ = repr;
        false
    }

    /// Encodes a whole chunk of `repr` given as native-endian element bytes
    /// borrowed from the caller's buffer. Gives exactly what
    /// [`ArrayToBytesCodec::encode`] gives. The default copies `data` and encodes
    /// the copy.
    ///
    /// # Errors
    /// As [`ArrayToBytesCodec::encode`]; [`CodecError::InvalidData`] when `data` is
    /// not one chunk's bytes.
    fn encode_borrowed(&self, data: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.encode(ArrayBytes::Fixed(crate::buffer_pool::copy_of(data)), repr)
    }

    /// Whether [`ArrayToBytesCodec::decode_into`] writes a whole chunk of `repr`
    /// into the caller's buffer without first decoding it into a buffer of its own
    /// (`sharding_indexed`: each inner chunk goes straight to its place). The
    /// default is `false`.
    fn decodes_into(&self, repr: &ChunkRepr) -> bool {
        let _ = repr;
        false
    }

    /// Decodes a whole chunk of `repr` into `dest`, its native-endian element
    /// bytes (exactly [`ChunkRepr::size_bytes`] long), which need not hold anything
    /// beforehand. Gives exactly what [`ArrayToBytesCodec::decode`] gives. The
    /// default decodes into a new buffer and copies.
    ///
    /// # Errors
    /// As [`ArrayToBytesCodec::decode`]; [`CodecError::InvalidData`] when `dest`
    /// is not one chunk long or the data type has no fixed size (`dest` may then be
    /// partly written).
    fn decode_into(
        &self,
        bytes: ::bytes::Bytes,
        repr: &ChunkRepr,
        dest: &mut [u8],
    ) -> Result<(), CodecError> {
        match self.decode(bytes, repr)? {
            ArrayBytes::Fixed(b) => copy_decoded("codecs", &b, dest),
            ArrayBytes::Strings(_) => Err(CodecError::invalid(
                "codecs",
                "a chunk of variable-size elements does not decode into bytes",
            )),
        }
    }

    /// Decodes only `region` (relative to the chunk) of the chunk in `source`;
    /// `Ok(None)` when the chunk is absent. The default reads and decodes the whole
    /// chunk; `sharding_indexed` reads only the index and the inner chunks needed.
    ///
    /// # Errors
    /// As [`ArrayToBytesCodec::decode`], plus source failures.
    async fn partial_decode(
        &self,
        source: &dyn ByteSource,
        repr: &ChunkRepr,
        region: &ArraySubset,
    ) -> Result<Option<ArrayBytes>, CodecError> {
        let Some(bytes) = source.get().await? else {
            return Ok(None);
        };
        let decoded = self.decode(bytes, repr)?;
        Ok(Some(decoded.extract(&repr.data_type, &repr.shape, region)))
    }

    /// Whether [`ArrayToBytesCodec::partial_decode`] reads less than the whole chunk.
    fn supports_partial_decode(&self) -> bool {
        false
    }

    /// Re-encodes a chunk with `region` (relative to the chunk) replaced by `part`
    /// (shape `region.shape`), given the chunk's current encoding `existing` (`None`
    /// when absent). Returns the new encoding and whether every element is now the
    /// fill value. Only codecs that can do better than decode-modify-encode
    /// (`sharding_indexed`: untouched inner chunks are copied, not re-encoded)
    /// support it; see [`ArrayToBytesCodec::supports_partial_encode`].
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] by default; codec errors otherwise.
    fn partial_encode(
        &self,
        _existing: Option<::bytes::Bytes>,
        _repr: &ChunkRepr,
        _region: &ArraySubset,
        _part: &ArrayBytes,
    ) -> Result<(Vec<u8>, bool), CodecError> {
        Err(CodecError::unsupported("codec", "partial encoding"))
    }

    /// Whether [`ArrayToBytesCodec::partial_encode`] is implemented.
    fn supports_partial_encode(&self) -> bool {
        false
    }
}

/// A `bytes -> bytes` codec (e.g. `gzip`, `zstd`, `blosc`, `crc32c`).
pub trait BytesToBytesCodec: Send + Sync + Debug {
    /// The codec's metadata JSON.
    fn to_json(&self) -> Value;

    /// Encodes bytes.
    ///
    /// # Errors
    /// [`CodecError::EncodeFailed`] when the underlying library fails.
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError>;

    /// Encodes borrowed bytes (a chunk still in the caller's buffer). The default
    /// copies them and calls [`BytesToBytesCodec::encode`]; codecs that read their
    /// input in place (`zstd`) encode straight from the slice.
    ///
    /// # Errors
    /// As [`BytesToBytesCodec::encode`].
    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        self.encode(crate::buffer_pool::copy_of(bytes))
    }

    /// Decodes bytes.
    ///
    /// # Errors
    /// [`CodecError::InvalidData`] for corrupt input.
    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError>;

    /// Decodes bytes that may decode to at most `limit` bytes (the most a chunk of
    /// the array can hold, [`CodecChain`] works it out): a decompressor stops as soon
    /// as its output passes `limit` instead of growing it (a decompression bomb).
    /// The default decodes with [`BytesToBytesCodec::decode`] and checks the length
    /// afterwards; the decompressors (`gzip`, `zstd`, `blosc` and their numcodecs
    /// forms, `numcodecs.zlib`, `bz2`, `lzma`, `lz4`) never hold more than `limit`
    /// bytes.
    ///
    /// # Errors
    /// As [`BytesToBytesCodec::decode`]; [`CodecError::InvalidData`] when the
    /// output would exceed `limit` bytes.
    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        let out = self.decode(bytes)?;
        if out.len() > limit {
            let name = self.to_json();
            let name = name.get("name").and_then(Value::as_str).unwrap_or("codecs");
            return Err(CodecError::invalid(
                name,
                format!("decodes to more than {limit} bytes, the most a chunk of this array holds"),
            ));
        }
        Ok(out)
    }

    /// Decodes `bytes` into `dest`, which must be exactly the decoded length (a
    /// chunk's place in the caller's output). The default decodes into a new
    /// buffer of at most `dest.len()` bytes ([`BytesToBytesCodec::decode_bounded`])
    /// and copies; codecs that can write in place (`zstd`, when the frame states
    /// its size) decompress straight into `dest`.
    ///
    /// # Errors
    /// As [`BytesToBytesCodec::decode`]; [`CodecError::InvalidData`] when the
    /// decoded length is not `dest.len()` (`dest` may then be partly written).
    fn decode_into(&self, bytes: ::bytes::Bytes, dest: &mut [u8]) -> Result<(), CodecError> {
        copy_decoded("codecs", &self.decode_bounded(bytes, dest.len())?, dest)
    }

    /// The encoded size for a decoded size, when it is fixed (e.g. `crc32c`: +4).
    fn encoded_size(&self, _decoded_size: u64) -> Option<u64> {
        None
    }
}

/// One codec of any kind.
#[derive(Clone, Debug)]
pub enum Codec {
    /// An `array -> array` codec.
    ArrayToArray(Arc<dyn ArrayToArrayCodec>),
    /// An `array -> bytes` codec.
    ArrayToBytes(Arc<dyn ArrayToBytesCodec>),
    /// A `bytes -> bytes` codec.
    BytesToBytes(Arc<dyn BytesToBytesCodec>),
}

impl Codec {
    /// The codec's metadata JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Codec::ArrayToArray(c) => c.to_json(),
            Codec::ArrayToBytes(c) => c.to_json(),
            Codec::BytesToBytes(c) => c.to_json(),
        }
    }
}

/// Checks that `data` holds exactly the elements of `repr`.
///
/// # Errors
/// [`CodecError::InvalidData`] naming `codec` otherwise.
pub(crate) fn check_data(
    codec: &str,
    data: &ArrayBytes,
    repr: &ChunkRepr,
) -> Result<(), CodecError> {
    data.check_len(&repr.data_type, repr.num_elements())
        .map_err(|found| {
            CodecError::invalid(
                codec,
                format!(
                    "expected {} elements of {}, got {found}",
                    repr.num_elements(),
                    repr.data_type
                ),
            )
        })
}

/// Copies the decoded bytes of a chunk into `dest`, its place in the caller's
/// output ([`BytesToBytesCodec::decode_into`] when a codec decodes into a buffer of
/// its own).
///
/// # Errors
/// [`CodecError::InvalidData`], naming `codec`, when `decoded` is not exactly
/// `dest.len()` bytes long.
pub(crate) fn copy_decoded(codec: &str, decoded: &[u8], dest: &mut [u8]) -> Result<(), CodecError> {
    if decoded.len() != dest.len() {
        return Err(CodecError::invalid(
            codec,
            format!("decoded {} bytes where {} fit", decoded.len(), dest.len()),
        ));
    }
    dest.copy_from_slice(decoded);
    Ok(())
}
