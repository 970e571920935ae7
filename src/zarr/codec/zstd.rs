//! The `zstd` codec (zarr-extensions `codecs/zstd`): Zstandard (RFC 8878) frames,
//! with an optional content checksum.

use serde_json::{json, Value};

use crate::zarr::codec::traits::copy_decoded;
use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

/// The `zstd` codec: `level` in `-131072..=22` (0 = library default), `checksum`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdCodec {
    level: i32,
    checksum: bool,
    name: &'static str,
}

impl ZstdCodec {
    /// A zstd codec.
    ///
    /// # Errors
    /// [`crate::zarr::ZarrError::InvalidCodec`] when `level` is out of range.
    pub fn new(level: i32, checksum: bool) -> ZarrResult<Self> {
        Self::with_name("zstd", level, checksum)
    }

    pub(crate) fn with_name(name: &'static str, level: i32, checksum: bool) -> ZarrResult<Self> {
        if !(-131072..=22).contains(&level) {
            let m = serde_json::Map::new();
            return Err(Config::new(name, &m).err(format!("level {level} is not in -131072..=22")));
        }
        Ok(ZstdCodec {
            level,
            checksum,
            name,
        })
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["level", "checksum"])?;
        let level = cfg.i64("level")?.unwrap_or(0);
        let checksum = cfg.bool("checksum")?.unwrap_or(false);
        Self::with_name(
            "zstd",
            i32::try_from(level).map_err(|_| cfg.err("level out of range"))?,
            checksum,
        )
    }
}

pub(crate) fn zstd_compress(
    name: &str,
    data: &[u8],
    level: i32,
    checksum: bool,
) -> Result<Vec<u8>, CodecError> {
    let fail = |e: std::io::Error| CodecError::EncodeFailed {
        codec: name.to_string(),
        reason: e.to_string(),
    };
    let mut out = crate::buffer_pool::take(zstd::zstd_safe::compress_bound(data.len()));
    crate::zstd_context::with_chunk_compressor(level, checksum, |c| {
        c.compress_to_buffer(data, &mut out)
    })
    .map_err(fail)?;
    Ok(out)
}

pub(crate) fn zstd_decompress(name: &str, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    const BULK_LIMIT: u64 = 1 << 32;
    if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(data) {
        if n <= BULK_LIMIT {
            let bulk = crate::zstd_context::with_decompressor(|d| d.decompress(data, n as usize));
            if let Ok(out) = bulk {
                return Ok(out);
            }
        }
    }
    zstd::stream::decode_all(data).map_err(|e| CodecError::invalid(name, e.to_string()))
}

/// Decompresses zstd frames into at most `limit` bytes: a frame that states a larger
/// size fails before anything is allocated, and frames without a size stream into a
/// buffer that stops growing at `limit`.
///
/// # Errors
/// [`CodecError::InvalidData`] for corrupt input or more than `limit` bytes.
pub(crate) fn zstd_decompress_bounded(
    name: &str,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(data) {
        if n > limit as u64 {
            return Err(crate::zarr::codec::bounded::too_large(name, limit));
        }
        let bulk = crate::zstd_context::with_decompressor(|d| d.decompress(data, n as usize));
        if let Ok(out) = bulk {
            return Ok(out);
        }
    }
    let dec = zstd::stream::read::Decoder::new(data)
        .map_err(|e| CodecError::invalid(name, e.to_string()))?;
    crate::zarr::codec::bounded::read_bounded(name, dec, limit, data.len() * 4)
}

impl BytesToBytesCodec for ZstdCodec {
    fn to_json(&self) -> Value {
        json!({"name": self.name, "configuration": {"level": self.level, "checksum": self.checksum}})
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        let out = self.encode_slice(&bytes);
        crate::buffer_pool::give(bytes);
        out
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        zstd_compress(self.name, bytes, self.level, self.checksum)
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        zstd_decompress(self.name, &bytes).map(Into::into)
    }

    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        zstd_decompress_bounded(self.name, &bytes, limit).map(Into::into)
    }

    fn decode_into(&self, bytes: ::bytes::Bytes, dest: &mut [u8]) -> Result<(), CodecError> {
        let stated = zstd::zstd_safe::get_frame_content_size(&bytes);
        if !matches!(stated, Ok(Some(n)) if n == dest.len() as u64) {
            // No stated size (or another one): decode the general way, which checks.
            return copy_decoded(self.name, &self.decode(bytes)?, dest);
        }
        let written =
            crate::zstd_context::with_decompressor(|d| d.decompress_to_buffer(&bytes[..], dest))
                .map_err(|e| CodecError::invalid(self.name, e.to_string()))?;
        if written != dest.len() {
            return Err(CodecError::invalid(
                self.name,
                format!("decoded {written} bytes where {} fit", dest.len()),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::gzip::tests::hex_bytes;

    #[test]
    fn python_bytes_and_roundtrip() {
        // zarr-python: float32 [1, 1] with zstd(level=3, checksum=True)
        let py = hex_bytes("28b52ffd24084100000000803f0000803f32db9161");
        let c = ZstdCodec::new(3, true).unwrap();
        let dec = c.decode(py.into()).unwrap();
        let expected: Vec<u8> = [1f32, 1f32].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(dec, expected);
        let enc = c.encode(expected.clone()).unwrap();
        // checksum flag (bit 2) of the frame header descriptor is set
        assert_eq!(enc[4] & 0x04, 0x04);
        assert_eq!(c.decode(enc.into()).unwrap(), expected);
        let nock = ZstdCodec::new(1, false).unwrap().encode(expected).unwrap();
        assert_eq!(nock[4] & 0x04, 0);
        assert_err!(
            c.decode(b"garbage!".to_vec().into()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        assert_err!(
            ZstdCodec::new(23, false),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }

    /// The per-thread context switches level and checksum as codecs ask (the first use
    /// on a thread asks for a checksum), and gives exactly the bytes a fresh context
    /// gives (no state leaks between chunks).
    #[test]
    fn reused_contexts_match_fresh_ones() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (level, checksum) in [
            (1, true),
            (3, false),
            (1, true),
            (3, false),
            (19, true),
            (-5, false),
        ] {
            let reused = zstd_compress("zstd", &data, level, checksum).unwrap();
            let mut fresh = zstd::bulk::Compressor::new(level).unwrap();
            fresh.include_checksum(checksum).unwrap();
            assert_eq!(
                reused,
                fresh.compress(&data).unwrap(),
                "level {level} checksum {checksum}"
            );
            assert_eq!(zstd_decompress("zstd", &reused).unwrap(), data);
        }
    }
}
