//! `numcodecs.lz4`: numcodecs' `LZ4` format — the decoded length as a 4-byte
//! little-endian integer, then one LZ4 block — via `lz4_flex`. The `acceleration`
//! option only trades speed for ratio when numcodecs encodes; floe keeps it in the
//! metadata and always encodes at lz4_flex's one speed.

use serde_json::{Map, Value};

use crate::zarr::codec::bounded::too_large;
use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

/// LZ4 blocks expand at most 255 to 1 (one length byte per 255 literals repeated):
/// a header claiming more is corrupt.
const MAX_RATIO: usize = 255;

/// The `numcodecs.lz4` codec: configuration `acceleration` (an integer, default 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Lz4Codec {
    config: Map<String, Value>,
}

impl Lz4Codec {
    /// An LZ4 codec with numcodecs' default configuration (`acceleration` 1).
    pub fn new() -> Self {
        let mut config = Map::new();
        config.insert("acceleration".into(), 1.into());
        Lz4Codec { config }
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "acceleration"])?;
        cfg.i64("acceleration")?;
        Ok(Lz4Codec {
            config: super::config_without_id(cfg),
        })
    }
}

impl Default for Lz4Codec {
    fn default() -> Self {
        Self::new()
    }
}

impl BytesToBytesCodec for Lz4Codec {
    fn to_json(&self) -> Value {
        super::codec_json("numcodecs.lz4", &self.config)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        self.encode_slice(&bytes)
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        if u32::try_from(bytes.len()).is_err() {
            return Err(CodecError::EncodeFailed {
                codec: "numcodecs.lz4".into(),
                reason: format!("{} bytes do not fit numcodecs' 4-byte header", bytes.len()),
            });
        }
        Ok(lz4_flex::block::compress_prepend_size(bytes))
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        self.decode_bounded(bytes, usize::MAX)
    }

    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        let name = "numcodecs.lz4";
        let Some((head, block)) = bytes.split_first_chunk::<4>() else {
            return Err(CodecError::invalid(name, "shorter than its 4-byte header"));
        };
        let size = u32::from_le_bytes(*head) as usize;
        if size > limit {
            return Err(too_large(name, limit));
        }
        if size > block.len().saturating_mul(MAX_RATIO).saturating_add(16) {
            return Err(CodecError::invalid(
                name,
                format!(
                    "the header claims {size} bytes, more than {} compressed bytes can hold",
                    block.len()
                ),
            ));
        }
        let mut out = vec![0u8; size];
        let n = lz4_flex::block::decompress_into(block, &mut out)
            .map_err(|e| CodecError::invalid(name, e.to_string()))?;
        if n != size {
            return Err(CodecError::invalid(
                name,
                format!("decoded {n} bytes where the header says {size}"),
            ));
        }
        Ok(out.into())
    }
}
