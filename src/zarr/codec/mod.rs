//! Codecs (the `codecs` extension point of the core spec, section "Codecs").
//!
//! There is one trait per codec kind — [`ArrayToArrayCodec`], [`ArrayToBytesCodec`],
//! [`BytesToBytesCodec`] — and [`CodecChain`] applies an ordered list of them
//! (core spec, "Encoding procedure" / "Decoding procedure"). Codecs know nothing of
//! stores: partial decoding reads through the small [`ByteSource`] trait, which the
//! array layer implements over a store key.
//!
//! Implemented codecs (one module each): `bytes`, `transpose`, `gzip`, `blosc`,
//! `crc32c`, `zstd`, `sharding_indexed`, `vlen-utf8`, and the numcodecs codecs
//! `numcodecs.zlib`, `numcodecs.gzip`, `numcodecs.zstd`, `numcodecs.blosc`,
//! `numcodecs.shuffle`, `numcodecs.crc32c`.

pub mod blosc;
pub mod bytes;
pub mod crc32c;
pub mod gzip;
pub mod numcodecs;
pub mod sharding;
pub mod transpose;
pub mod vlen_utf8;
pub mod zstd;

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::data_type::{DataType, FillValue};
use crate::zarr::error::{CodecError, ZarrError, ZarrResult};
use crate::zarr::store::ByteRange;
use crate::zarr::subset::ArraySubset;

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

    /// Decodes bytes.
    ///
    /// # Errors
    /// [`CodecError::InvalidData`] for corrupt input.
    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError>;

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

/// Name and configuration of a codec's JSON (short-hand names allowed).
///
/// # Errors
/// [`ZarrError::InvalidCodec`] for malformed JSON.
pub(crate) fn name_and_config(json: &Value) -> ZarrResult<(String, Map<String, Value>, bool)> {
    let bad = |reason: &str| ZarrError::InvalidCodec {
        codec: json.to_string(),
        reason: reason.to_string(),
    };
    match json {
        Value::String(s) => Ok((s.clone(), Map::new(), true)),
        Value::Object(o) => {
            let name = o
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("missing string member `name`"))?;
            let config = match o.get("configuration") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(c)) => c.clone(),
                Some(_) => return Err(bad("`configuration` must be an object")),
            };
            let must_understand = match o.get("must_understand") {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(bad("`must_understand` must be a boolean")),
            };
            if let Some(k) = o
                .keys()
                .find(|k| !matches!(k.as_str(), "name" | "configuration" | "must_understand"))
            {
                return Err(bad(&format!("unknown member `{k}`")));
            }
            Ok((name.to_string(), config, must_understand))
        }
        _ => Err(bad("a codec must be an object or a name")),
    }
}

/// Helpers for reading codec configurations with typed errors.
pub(crate) struct Config<'a> {
    pub name: &'a str,
    pub map: &'a Map<String, Value>,
}

impl<'a> Config<'a> {
    pub(crate) fn new(name: &'a str, map: &'a Map<String, Value>) -> Self {
        Config { name, map }
    }

    pub(crate) fn err(&self, reason: impl Into<String>) -> ZarrError {
        ZarrError::InvalidCodec {
            codec: self.name.to_string(),
            reason: reason.into(),
        }
    }

    /// Fails on configuration keys not in `allowed`.
    pub(crate) fn only(&self, allowed: &[&str]) -> ZarrResult<()> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self.err(format!("unknown configuration key `{k}`"))),
            None => Ok(()),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn i64(&self, key: &str) -> ZarrResult<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be an integer"))),
        }
    }

    pub(crate) fn u64(&self, key: &str) -> ZarrResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be a non-negative integer"))),
        }
    }

    pub(crate) fn str(&self, key: &str) -> ZarrResult<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be a string"))),
        }
    }

    pub(crate) fn bool(&self, key: &str) -> ZarrResult<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be a boolean"))),
        }
    }
}

/// Builds one codec from its metadata JSON, for chunks of data type `dt`.
/// Returns `Ok(None)` for an unknown codec marked `"must_understand": false` (which
/// the core spec allows implementations to ignore).
///
/// # Errors
/// [`ZarrError::UnsupportedExtension`] (empty path) for unknown codecs;
/// [`ZarrError::InvalidCodec`] for malformed configurations.
pub fn codec_from_json(json: &Value, dt: &DataType) -> ZarrResult<Option<Codec>> {
    let (name, map, must_understand) = name_and_config(json)?;
    let cfg = Config::new(&name, &map);
    let codec = match name.as_str() {
        "bytes" => Codec::ArrayToBytes(Arc::new(bytes::BytesCodec::from_config(&cfg)?)),
        "vlen-utf8" => Codec::ArrayToBytes(Arc::new(vlen_utf8::VlenUtf8Codec::from_config(&cfg)?)),
        "sharding_indexed" => {
            Codec::ArrayToBytes(Arc::new(sharding::ShardingCodec::from_config(&cfg, dt)?))
        }
        "transpose" => Codec::ArrayToArray(Arc::new(transpose::TransposeCodec::from_config(&cfg)?)),
        "gzip" => Codec::BytesToBytes(Arc::new(gzip::GzipCodec::from_config(&cfg)?)),
        "zstd" => Codec::BytesToBytes(Arc::new(zstd::ZstdCodec::from_config(&cfg)?)),
        "blosc" => Codec::BytesToBytes(Arc::new(blosc::BloscCodec::from_config(&cfg, dt)?)),
        "crc32c" => Codec::BytesToBytes(Arc::new(crc32c::Crc32cCodec::from_config(&cfg)?)),
        n if n.starts_with("numcodecs.") => match numcodecs::from_config(&cfg, dt)? {
            Some(c) => c,
            None if !must_understand => return Ok(None),
            None => {
                return Err(ZarrError::UnsupportedExtension {
                    path: String::new(),
                    kind: "codec".into(),
                    name,
                })
            }
        },
        _ if !must_understand => return Ok(None),
        _ => {
            return Err(ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "codec".into(),
                name,
            })
        }
    };
    Ok(Some(codec))
}

/// Runs CPU-bound work on tokio's blocking pool when `size` (bytes of work) is large
/// and a runtime is available; inline otherwise.
pub(crate) async fn run_blocking<T, F>(size: usize, f: F) -> Result<T, CodecError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CodecError> + Send + 'static,
{
    const INLINE_LIMIT: usize = 64 * 1024;
    if size <= INLINE_LIMIT || tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CodecError::Task(e.to_string()))?
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
        let mut bytes = bytes;
        for c in self.bytes_to_bytes.iter().rev() {
            bytes = c.decode(bytes)?;
        }
        let mut reprs = Vec::with_capacity(self.array_to_array.len() + 1);
        let mut r = repr.clone();
        for c in &self.array_to_array {
            let next = c.encoded_repr(&r)?;
            reprs.push(r);
            r = next;
        }
        let mut data = self.array_to_bytes.decode(bytes, &r)?;
        for (c, r) in self.array_to_array.iter().zip(reprs).rev() {
            data = c.decode(data, &r)?;
        }
        Ok(data)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repr(dt: DataType, shape: Vec<u64>) -> ChunkRepr {
        let fill_value = dt.default_fill_value();
        ChunkRepr {
            shape,
            data_type: dt,
            fill_value,
        }
    }

    #[test]
    fn chain_order_rules() {
        let r = repr(DataType::Int32, vec![4]);
        let ok = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "gzip", "configuration": {"level": 1}}),
        ];
        assert!(CodecChain::from_json(&ok, &r).is_ok());
        let bad = [
            json!({"name": "gzip", "configuration": {"level": 1}}),
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
        ];
        assert!(matches!(
            CodecChain::from_json(&bad, &r),
            Err(ZarrError::InvalidCodec { .. })
        ));
        let two = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
        ];
        assert_err!(
            CodecChain::from_json(&two, &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        assert_err!(
            CodecChain::from_json(&[], &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let no_endian = [json!({"name": "bytes"})];
        assert_err!(
            CodecChain::from_json(&no_endian, &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        assert!(CodecChain::from_json(&no_endian, &repr(DataType::UInt8, vec![4])).is_ok());
        let unknown = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "fancy"}),
        ];
        assert!(matches!(
            CodecChain::from_json(&unknown, &r),
            Err(ZarrError::UnsupportedExtension { .. })
        ));
        let ignorable = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "fancy", "must_understand": false}),
        ];
        assert_eq!(
            CodecChain::from_json(&ignorable, &r)
                .unwrap()
                .to_json()
                .len(),
            1
        );
        let wrong_type = [json!({"name": "vlen-utf8"})];
        assert_err!(
            CodecChain::from_json(&wrong_type, &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }

    #[test]
    fn chain_roundtrip_transpose_bytes_gzip() {
        let r = repr(DataType::UInt16, vec![2, 3]);
        let codecs = [
            json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
            json!({"name": "bytes", "configuration": {"endian": "big"}}),
            json!({"name": "gzip", "configuration": {"level": 5}}),
        ];
        let chain = CodecChain::from_json(&codecs, &r).unwrap();
        assert_eq!(chain.to_json(), codecs.to_vec());
        let data: Vec<u8> = (0u16..6).flat_map(|v| v.to_ne_bytes()).collect();
        let enc = chain.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap();
        // Without gzip: transposed, big-endian.
        let plain = CodecChain::from_json(&codecs[..2], &r).unwrap();
        let enc_plain = plain.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap();
        assert_eq!(enc_plain, vec![0, 0, 0, 3, 0, 1, 0, 4, 0, 2, 0, 5]);
        let dec = chain.decode(enc.into(), &r).unwrap();
        assert_eq!(dec, ArrayBytes::Fixed(data));
    }
}
