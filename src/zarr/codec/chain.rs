//! [`CodecChain`]: an ordered list of codecs applied to encode and decode chunks
//! (core spec, "Encoding procedure" / "Decoding procedure"), with CPU-heavy work on
//! the blocking thread pool.

use super::*;

/// Runs CPU-bound work on the compute pool (`crate::compute`) when `size` (bytes of
/// work) is large and a runtime is available; inline otherwise.
pub(crate) async fn run_blocking<T, F>(size: usize, f: F) -> Result<T, CodecError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CodecError> + Send + 'static,
{
    if !offloads(size) {
        return f();
    }
    crate::compute::spawn(f).await.map_err(CodecError::Task)?
}

/// Whether [`run_blocking`] runs work of `size` bytes off the async executor (on the
/// compute pool, where blocking calls are allowed): above 64 KiB, with a tokio
/// runtime current. Smaller work, and all work without a runtime, runs in place.
pub(crate) fn offloads(size: usize) -> bool {
    const INLINE_LIMIT: usize = 64 * 1024;
    size > INLINE_LIMIT && tokio::runtime::Handle::try_current().is_ok()
}

/// An ordered codec list: zero or more `array -> array` codecs, exactly one
/// `array -> bytes` codec, zero or more `bytes -> bytes` codecs (core spec, "Codecs").
#[derive(Clone, Debug)]
pub struct CodecChain {
    array_to_array: Vec<Arc<dyn ArrayToArrayCodec>>,
    array_to_bytes: Arc<dyn ArrayToBytesCodec>,
    bytes_to_bytes: Vec<Arc<dyn BytesToBytesCodec>>,
}

impl CodecChain {
    /// Builds a chain from codecs in order.
    ///
    /// # Errors
    /// [`ZarrError::InvalidCodec`] when the kinds are out of order or the chain does not
    /// have exactly one `array -> bytes` codec.
    pub fn new(codecs: Vec<Codec>) -> ZarrResult<Self> {
        let bad = |reason: &str| ZarrError::InvalidCodec {
            codec: "codecs".into(),
            reason: reason.to_string(),
        };
        let mut a2a = Vec::new();
        let mut a2b = None;
        let mut b2b = Vec::new();
        for c in codecs {
            match c {
                Codec::ArrayToArray(c) => {
                    if a2b.is_some() {
                        return Err(bad(
                            "an array -> array codec follows the array -> bytes codec",
                        ));
                    }
                    a2a.push(c);
                }
                Codec::ArrayToBytes(c) => {
                    if a2b.is_some() {
                        return Err(bad("more than one array -> bytes codec"));
                    }
                    a2b = Some(c);
                }
                Codec::BytesToBytes(c) => {
                    if a2b.is_none() {
                        return Err(bad(
                            "a bytes -> bytes codec precedes the array -> bytes codec",
                        ));
                    }
                    b2b.push(c);
                }
            }
        }
        let array_to_bytes = a2b.ok_or_else(|| bad("no array -> bytes codec"))?;
        Ok(CodecChain {
            array_to_array: a2a,
            array_to_bytes,
            bytes_to_bytes: b2b,
        })
    }

    /// Parses the `codecs` metadata list for chunks of representation `repr` and
    /// checks that the chain can encode them.
    ///
    /// # Errors
    /// As [`codec_from_json`] and [`CodecChain::new`]; [`ZarrError::InvalidCodec`] when
    /// the chain cannot encode `repr` (e.g. `bytes` without `endian` for `int32`,
    /// `vlen-utf8` for numbers).
    pub fn from_json(codecs: &[Value], repr: &ChunkRepr) -> ZarrResult<Self> {
        let mut list = Vec::new();
        for c in codecs {
            if let Some(codec) = codec_from_json(c, &repr.data_type)? {
                list.push(codec);
            }
        }
        let chain = CodecChain::new(list)?;
        chain.validate(repr)?;
        Ok(chain)
    }

    /// Checks that the chain can encode chunks of representation `repr`.
    ///
    /// # Errors
    /// [`ZarrError::InvalidCodec`] naming the first codec that cannot.
    pub fn validate(&self, repr: &ChunkRepr) -> ZarrResult<()> {
        let mut r = repr.clone();
        for c in &self.array_to_array {
            r = c.encoded_repr(&r).map_err(|e| ZarrError::InvalidCodec {
                codec: c.to_json().to_string(),
                reason: e.to_string(),
            })?;
        }
        self.array_to_bytes
            .validate(&r)
            .map_err(|e| ZarrError::InvalidCodec {
                codec: self.array_to_bytes.to_json().to_string(),
                reason: e.to_string(),
            })
    }

    /// The `codecs` metadata list.
    pub fn to_json(&self) -> Vec<Value> {
        self.array_to_array
            .iter()
            .map(|c| c.to_json())
            .chain(std::iter::once(self.array_to_bytes.to_json()))
            .chain(self.bytes_to_bytes.iter().map(|c| c.to_json()))
            .collect()
    }

    /// The `array -> bytes` codec.
    pub fn array_to_bytes(&self) -> &Arc<dyn ArrayToBytesCodec> {
        &self.array_to_bytes
    }

    /// Encodes a whole chunk of representation `repr` (core spec, "Encoding
    /// procedure").
    ///
    /// # Errors
    /// [`CodecError`] from any codec.
    pub fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        let mut data = data;
        let mut r = repr.clone();
        for c in &self.array_to_array {
            let next = c.encoded_repr(&r)?;
            data = c.encode(data, &r)?;
            r = next;
        }
        let mut bytes = self.array_to_bytes.encode(data, &r)?;
        for c in &self.bytes_to_bytes {
            bytes = c.encode(bytes)?;
        }
        Ok(bytes)
    }

    /// Whether a stored chunk of `repr` is its decoded elements as they are (no
    /// `array -> array` or `bytes -> bytes` codecs, and `bytes` without a byte
    /// swap), so that it can be read straight into the caller's output.
    pub(crate) fn stores_native_bytes(&self, repr: &ChunkRepr) -> bool {
        self.array_to_array.is_empty()
            && self.bytes_to_bytes.is_empty()
            && self.array_to_bytes.keeps_native_bytes(repr)
    }

    /// Whether the chain compresses the native bytes of `repr` as they are: no
    /// `array -> array` codecs, an `array -> bytes` codec that keeps native bytes as
    /// they are, and at least one `bytes -> bytes` codec, the first of which reads
    /// the caller's bytes or writes the decoded ones in place.
    fn compresses_native(&self, repr: &ChunkRepr) -> bool {
        self.array_to_array.is_empty()
            && !self.bytes_to_bytes.is_empty()
            && self.array_to_bytes.keeps_native_bytes(repr)
    }

    /// Whether [`CodecChain::encode_borrowed`] encodes chunks of `repr` from the
    /// caller's buffer without a copy: no `array -> array` codecs, and either an
    /// `array -> bytes` codec that keeps native bytes as they are followed by at
    /// least one `bytes -> bytes` codec (without one, the encoded chunk would be the
    /// caller's bytes themselves, which must be copied anyway), or an
    /// `array -> bytes` codec that reads borrowed elements itself
    /// ([`ArrayToBytesCodec::encodes_borrowed`]: `sharding_indexed`).
    pub(crate) fn encodes_borrowed(&self, repr: &ChunkRepr) -> bool {
        self.compresses_native(repr)
            || (self.array_to_array.is_empty() && self.array_to_bytes.encodes_borrowed(repr))
    }

    /// Whether [`CodecChain::decode_into`] decodes a whole chunk of `repr` into the
    /// caller's buffer: when [`CodecChain::encodes_borrowed`] holds (the last
    /// compressor writes into it), or without `array -> array` codecs when the
    /// `array -> bytes` codec places what it decodes there itself
    /// ([`ArrayToBytesCodec::decodes_into`]: `sharding_indexed`, after any
    /// `bytes -> bytes` codecs on the whole shard).
    pub(crate) fn decodes_into(&self, repr: &ChunkRepr) -> bool {
        self.compresses_native(repr)
            || (self.array_to_array.is_empty() && self.array_to_bytes.decodes_into(repr))
    }

    /// Encodes a whole chunk of `repr` given as native-endian element bytes borrowed
    /// from the caller's buffer, without copying them first: the first
    /// `bytes -> bytes` codec reads them in place, or the `array -> bytes` codec
    /// does ([`ArrayToBytesCodec::encode_borrowed`]) before the `bytes -> bytes`
    /// codecs run on what it made. Produces exactly what [`CodecChain::encode`]
    /// does. Only for chains where [`CodecChain::encodes_borrowed`] holds.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] for a chain that cannot;
    /// [`CodecError::InvalidData`] when `data` is not one chunk's bytes; codec
    /// failures.
    pub(crate) fn encode_borrowed(
        &self,
        data: &[u8],
        repr: &ChunkRepr,
    ) -> Result<Vec<u8>, CodecError> {
        if !self.compresses_native(repr) && self.encodes_borrowed(repr) {
            let mut bytes = self.array_to_bytes.encode_borrowed(data, repr)?;
            for c in &self.bytes_to_bytes {
                bytes = c.encode(bytes)?;
            }
            return Ok(bytes);
        }
        let (first, rest) = self.borrowed_codecs(repr, data.len())?;
        let mut bytes = first.encode_slice(data)?;
        for c in rest {
            bytes = c.encode(bytes)?;
        }
        Ok(bytes)
    }

    /// The first `bytes -> bytes` codec and the rest, for [`CodecChain::encode_borrowed`]
    /// and [`CodecChain::decode_into`] on `len` bytes of elements of `repr`.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] when [`CodecChain::compresses_native`] does not
    /// hold; [`CodecError::InvalidData`] when `len` bytes are not one chunk.
    #[allow(clippy::type_complexity)]
    fn borrowed_codecs(
        &self,
        repr: &ChunkRepr,
        len: usize,
    ) -> Result<(&Arc<dyn BytesToBytesCodec>, &[Arc<dyn BytesToBytesCodec>]), CodecError> {
        let Some((first, rest)) = self
            .bytes_to_bytes
            .split_first()
            .filter(|_| self.compresses_native(repr))
        else {
            return Err(CodecError::unsupported(
                "codecs",
                "this chain does not encode or decode borrowed bytes",
            ));
        };
        let expected = repr
            .data_type
            .fixed_size()
            .and_then(|s| usize::try_from(repr.num_elements()).ok()?.checked_mul(s));
        if expected != Some(len) {
            return Err(CodecError::invalid(
                "codecs",
                format!(
                    "{len} bytes are not one chunk of {} x {}",
                    repr.num_elements(),
                    repr.data_type
                ),
            ));
        }
        Ok((first, rest))
    }

    /// Decodes a whole stored chunk of `repr` straight into `dest`, its
    /// native-endian element bytes (exactly one chunk long, holding anything
    /// beforehand), for chains where [`CodecChain::decodes_into`] holds: the
    /// `bytes -> bytes` codecs run in reverse and the last of them writes into
    /// `dest` ([`CodecChain::encodes_borrowed`]), or the `array -> bytes` codec
    /// does ([`ArrayToBytesCodec::decode_into`]). Gives exactly what
    /// [`CodecChain::decode`] gives.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] for a chain that cannot; [`CodecError::InvalidData`]
    /// when `dest` is not one chunk long or the chunk does not decode to its length
    /// (`dest` may then be partly written); codec failures.
    pub(crate) fn decode_into(
        &self,
        bytes: ::bytes::Bytes,
        repr: &ChunkRepr,
        dest: &mut [u8],
    ) -> Result<(), CodecError> {
        let limits = self.decode_limits(repr);
        if !self.compresses_native(repr) && self.decodes_into(repr) {
            let mut bytes = bytes;
            for (c, limit) in self.bytes_to_bytes.iter().zip(limits).rev() {
                bytes = c.decode_bounded(bytes, limit)?;
            }
            return self.array_to_bytes.decode_into(bytes, repr, dest);
        }
        let (first, rest) = self.borrowed_codecs(repr, dest.len())?;
        let mut bytes = bytes;
        for (c, limit) in rest.iter().zip(limits.into_iter().skip(1)).rev() {
            bytes = c.decode_bounded(bytes, limit)?;
        }
        first.decode_into(bytes, dest)
    }

    /// Decodes a whole chunk into representation `repr` (core spec, "Decoding
    /// procedure").
    ///
    /// # Errors
    /// [`CodecError`] from any codec (corrupt data, wrong sizes).
    pub fn decode(
        &self,
        bytes: ::bytes::Bytes,
        repr: &ChunkRepr,
    ) -> Result<ArrayBytes, CodecError> {
        let mut reprs = Vec::with_capacity(self.array_to_array.len() + 1);
        let mut r = repr.clone();
        for c in &self.array_to_array {
            let next = c.encoded_repr(&r)?;
            reprs.push(r);
            r = next;
        }
        let mut bytes = bytes;
        let limits = self.decode_limits(&r);
        for (c, limit) in self.bytes_to_bytes.iter().zip(limits).rev() {
            bytes = c.decode_bounded(bytes, limit)?;
        }
        let mut data = self.array_to_bytes.decode(bytes, &r)?;
        for (c, r) in self.array_to_array.iter().zip(reprs).rev() {
            data = c.decode(data, &r)?;
        }
        Ok(data)
    }

    /// The most bytes each `bytes -> bytes` codec may decode to, in chain order, for
    /// chunks whose `array -> bytes` codec sees representation `repr`: the exact
    /// size when the encoded sizes before it are fixed (`bytes`, then `shuffle` or a
    /// checksum), else that fixed size plus half plus 64 KiB (room for any
    /// compressor's worst case expansion), else (variable-size encodings such as
    /// `vlen-utf8` and `sharding_indexed`) no limit. This is what bounds the memory
    /// a decompression bomb can take.
    fn decode_limits(&self, repr: &ChunkRepr) -> Vec<usize> {
        let base = self.array_to_bytes.encoded_size(repr);
        let slack = base.map(|b| b.saturating_add(b / 2).saturating_add(64 << 10));
        let mut size = base;
        self.bytes_to_bytes
            .iter()
            .map(|c| {
                let limit = size
                    .or(slack)
                    .map_or(usize::MAX, |s| usize::try_from(s).unwrap_or(usize::MAX));
                size = size.and_then(|s| c.encoded_size(s));
                limit
            })
            .collect()
    }

    /// The encoded size of a chunk of representation `repr` when fixed (used for shard
    /// indexes: `bytes` + `crc32c`).
    pub fn encoded_size(&self, repr: &ChunkRepr) -> Option<u64> {
        if !self.array_to_array.is_empty() {
            return None;
        }
        let mut size = self.array_to_bytes.encoded_size(repr)?;
        for c in &self.bytes_to_bytes {
            size = c.encoded_size(size)?;
        }
        Some(size)
    }

    /// Whether a partial read of a chunk can fetch less than the whole value (the
    /// chain is a lone `sharding_indexed` codec).
    pub fn supports_partial_decode(&self) -> bool {
        self.array_to_array.is_empty()
            && self.bytes_to_bytes.is_empty()
            && self.array_to_bytes.supports_partial_decode()
    }

    /// Whether a partial chunk write can avoid decoding and re-encoding the whole
    /// chunk (the chain is a lone `sharding_indexed` codec).
    pub fn supports_partial_encode(&self) -> bool {
        self.array_to_array.is_empty()
            && self.bytes_to_bytes.is_empty()
            && self.array_to_bytes.supports_partial_encode()
    }

    /// Re-encodes a chunk with `region` replaced by `part`; see
    /// [`ArrayToBytesCodec::partial_encode`]. Returns the encoding and whether the
    /// chunk is now entirely the fill value.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] unless [`CodecChain::supports_partial_encode`];
    /// codec errors.
    pub fn partial_encode(
        &self,
        existing: Option<::bytes::Bytes>,
        repr: &ChunkRepr,
        region: &ArraySubset,
        part: &ArrayBytes,
    ) -> Result<(Vec<u8>, bool), CodecError> {
        if !self.supports_partial_encode() {
            return Err(CodecError::unsupported("codecs", "partial encoding"));
        }
        self.array_to_bytes
            .partial_encode(existing, repr, region, part)
    }

    /// Decodes `region` (relative to the chunk) of the chunk behind `source`;
    /// `Ok(None)` when the chunk is absent. With a lone `sharding_indexed` codec only
    /// the shard index and the needed inner chunks are read; otherwise the whole
    /// chunk is read and decoded on the blocking thread pool.
    ///
    /// # Errors
    /// [`CodecError`] from codecs or the source.
    pub async fn partial_decode(
        self: &Arc<Self>,
        source: &dyn ByteSource,
        repr: &ChunkRepr,
        region: &ArraySubset,
    ) -> Result<Option<ArrayBytes>, CodecError> {
        if self.supports_partial_decode() {
            return self
                .array_to_bytes
                .partial_decode(source, repr, region)
                .await;
        }
        let Some(bytes) = source.get().await? else {
            return Ok(None);
        };
        let chain = Arc::clone(self);
        let repr = repr.clone();
        let region = region.clone();
        let size = bytes.len().max(repr.size_bytes().unwrap_or(0) as usize);
        run_blocking(size, move || {
            let decoded = chain.decode(bytes, &repr)?;
            Ok(decoded.extract(&repr.data_type, &repr.shape, &region))
        })
        .await
        .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::registry::codec_from_json;
    use crate::zarr::data_type::{DataType, FillValue};

    fn chain(codecs: serde_json::Value) -> CodecChain {
        let codecs = codecs
            .as_array()
            .expect("a list")
            .iter()
            .map(|c| {
                codec_from_json(c, &DataType::UInt32)
                    .expect("codec")
                    .expect("known")
            })
            .collect();
        CodecChain::new(codecs).expect("chain")
    }

    fn repr(n: u64, data_type: DataType) -> ChunkRepr {
        let fill = FillValue::Bytes(vec![0; data_type.fixed_size().unwrap_or(0)]);
        ChunkRepr {
            shape: vec![n],
            data_type,
            fill_value: fill,
        }
    }

    /// Chains that encode and decode borrowed bytes: a compressor that reads and
    /// writes in place (zstd), one that takes the default copy (gzip) followed by a
    /// checksum, and a checksum alone.
    fn borrowing_chains() -> [serde_json::Value; 6] {
        let le = serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}});
        let sharded = |inner: serde_json::Value| {
            serde_json::json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": [256],
                "codecs": inner,
                "index_codecs": [le, {"name": "crc32c"}],
            }})
        };
        [
            serde_json::json!([le, {"name": "zstd", "configuration": {"level": 3, "checksum": true}}]),
            serde_json::json!([le, {"name": "gzip", "configuration": {"level": 5}}, {"name": "crc32c"}]),
            serde_json::json!([le, {"name": "crc32c"}]),
            // Shards of 16 inner chunks: stored as their elements, compressed, and
            // with a checksum over the whole shard.
            serde_json::json!([sharded(serde_json::json!([le]))]),
            serde_json::json!([sharded(serde_json::json!([le, {"name": "zstd"}]))]),
            serde_json::json!([sharded(serde_json::json!([le])), {"name": "crc32c"}]),
        ]
    }

    /// One chunk of 4,096 uint32 (compressible) and its representation.
    fn sample() -> (Vec<u8>, ChunkRepr) {
        let data = (0..4096u32).flat_map(|i| (i % 300).to_le_bytes()).collect();
        (data, repr(4096, DataType::UInt32))
    }

    /// Borrowed encoding gives exactly what encoding an owned copy gives, for
    /// compressors that read in place and for codecs that take the default copy.
    #[test]
    fn borrowed_encoding_matches_owned_encoding() {
        let (data, r) = sample();
        for codecs in borrowing_chains() {
            let c = chain(codecs.clone());
            assert!(c.encodes_borrowed(&r), "{codecs}");
            let owned = c
                .encode(ArrayBytes::Fixed(data.clone()), &r)
                .expect("encode");
            assert_eq!(
                c.encode_borrowed(&data, &r).expect("encode"),
                owned,
                "{codecs}"
            );
        }
    }

    /// Decoding into a borrowed buffer gives exactly what decoding gives; a zstd
    /// frame that does not state its size decodes too; a buffer of another length
    /// is an error.
    #[test]
    fn decoding_into_a_buffer_matches_decoding() {
        let (data, r) = sample();
        for codecs in borrowing_chains() {
            let c = chain(codecs.clone());
            let encoded = ::bytes::Bytes::from(c.encode_borrowed(&data, &r).expect("encode"));
            let mut dest = vec![0u8; data.len()];
            c.decode_into(encoded.clone(), &r, &mut dest)
                .expect("decode");
            assert_eq!(dest, data, "{codecs}");
            let decoded = c.decode(encoded.clone(), &r).expect("decode");
            assert_eq!(decoded, ArrayBytes::Fixed(data.clone()), "{codecs}");
            let mut short = vec![0u8; data.len() - 4];
            assert!(
                matches!(
                    c.decode_into(encoded, &r, &mut short),
                    Err(CodecError::InvalidData { .. })
                ),
                "{codecs}"
            );
        }
        // A streamed zstd frame states no content size.
        let c = chain(
            serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}},
                                         {"name": "zstd", "configuration": {"level": 1}}]),
        );
        let streamed = ::zstd::stream::encode_all(&data[..], 1).expect("stream");
        assert!(
            matches!(
                ::zstd::zstd_safe::get_frame_content_size(&streamed),
                Ok(None)
            ),
            "the frame states no size"
        );
        let mut dest = vec![0u8; data.len()];
        c.decode_into(streamed.into(), &r, &mut dest)
            .expect("decode");
        assert_eq!(dest, data);
    }

    /// Chains that must change or copy the bytes refuse, as does input that is not
    /// one chunk.
    #[test]
    fn borrowed_encoding_refuses_what_it_cannot_do() {
        let r = repr(16, DataType::UInt32);
        let data = vec![1u8; 64];
        let swapped = if cfg!(target_endian = "little") {
            "big"
        } else {
            "little"
        };
        for codecs in [
            serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}]),
            serde_json::json!([{"name": "bytes", "configuration": {"endian": swapped}},
                               {"name": "crc32c"}]),
            serde_json::json!([{"name": "transpose", "configuration": {"order": [0]}},
                               {"name": "bytes", "configuration": {"endian": "little"}},
                               {"name": "crc32c"}]),
        ] {
            let c = chain(codecs.clone());
            assert!(!c.encodes_borrowed(&r), "{codecs}");
            assert!(
                matches!(
                    c.encode_borrowed(&data, &r),
                    Err(CodecError::Unsupported { .. })
                ),
                "{codecs}"
            );
        }
        let c = chain(
            serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}},
                                         {"name": "crc32c"}]),
        );
        assert!(matches!(
            c.encode_borrowed(&data[..60], &r),
            Err(CodecError::InvalidData { .. })
        ));
    }
}
