//! The `gzip` codec (`../shared/specs/zarr/v3/codecs/gzip`): gzip (RFC 1952)
//! compression via `flate2`.

use std::io::{Read, Write};

use serde_json::{json, Value};

use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

/// The `gzip` codec with a compression `level` in `0..=9`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GzipCodec {
    level: u32,
    name: &'static str,
}

impl GzipCodec {
    /// A gzip codec.
    ///
    /// # Errors
    /// [`crate::zarr::ZarrError::InvalidCodec`] when `level > 9`.
    pub fn new(level: u32) -> ZarrResult<Self> {
        Self::with_name("gzip", level)
    }

    pub(crate) fn with_name(name: &'static str, level: u32) -> ZarrResult<Self> {
        if level > 9 {
            let m = serde_json::Map::new();
            return Err(Config::new(name, &m).err(format!("level {level} is not in 0..=9")));
        }
        Ok(GzipCodec { level, name })
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["level"])?;
        let level = cfg
            .u64("level")?
            .ok_or_else(|| cfg.err("`level` is required"))?;
        Self::with_name("gzip", u32::try_from(level).unwrap_or(u32::MAX))
    }
}

/// gzip-compresses `data` at `level`.
pub(crate) fn gzip_compress(name: &str, data: &[u8], level: u32) -> Result<Vec<u8>, CodecError> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 2 + 64),
        flate2::Compression::new(level),
    );
    enc.write_all(data)
        .and_then(|_| enc.finish())
        .map_err(|e| CodecError::EncodeFailed {
            codec: name.to_string(),
            reason: e.to_string(),
        })
}

/// Decompresses one or more gzip members.
pub(crate) fn gzip_decompress(name: &str, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(data.len() * 2);
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .map_err(|e| CodecError::invalid(name, e.to_string()))?;
    Ok(out)
}

/// Decompresses one or more gzip members into at most `limit` bytes.
///
/// # Errors
/// [`CodecError::InvalidData`] for corrupt input or more than `limit` bytes.
pub(crate) fn gzip_decompress_bounded(
    name: &str,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    let dec = flate2::read::MultiGzDecoder::new(data);
    crate::zarr::codec::bounded::read_bounded(name, dec, limit, data.len() * 2)
}

impl BytesToBytesCodec for GzipCodec {
    fn to_json(&self) -> Value {
        json!({"name": self.name, "configuration": {"level": self.level}})
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        gzip_compress(self.name, &bytes, self.level)
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        gzip_compress(self.name, bytes, self.level)
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        gzip_decompress(self.name, &bytes).map(Into::into)
    }

    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        gzip_decompress_bounded(self.name, &bytes, limit).map(Into::into)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_python_bytes() {
        let c = GzipCodec::new(5).unwrap();
        let data = b"hello hello hello hello".to_vec();
        let enc = c.encode(data.clone()).unwrap();
        assert_eq!(&enc[..2], &[0x1f, 0x8b]);
        assert_eq!(c.decode(enc.into()).unwrap(), data);
        // Python: gzip.compress(b'abc', mtime=0)
        let py = hex_bytes("1f8b08000000000002034b4c4a0600c241243503000000");
        assert_eq!(c.decode(py.into()).unwrap(), b"abc".to_vec());
        assert_err!(
            c.decode(b"not gzip".to_vec().into()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        assert_err!(
            GzipCodec::new(10),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }

    pub(crate) fn hex_bytes(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
