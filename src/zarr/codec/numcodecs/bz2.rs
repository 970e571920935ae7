//! `numcodecs.bz2`: bzip2 compression (numcodecs `BZ2`, Python's `bz2.compress`
//! at `level`), via the `bzip2` crate's pure-Rust backend. Decoding accepts several
//! concatenated bzip2 streams, as Python's `bz2.decompress` does.

use std::io::Write;

use serde_json::{Map, Value};

use crate::zarr::codec::bounded::read_bounded;
use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

/// The `numcodecs.bz2` codec: configuration `level` in `1..=9` (default 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Bz2Codec {
    config: Map<String, Value>,
    level: u32,
}

impl Bz2Codec {
    /// A bzip2 codec at `level`.
    ///
    /// # Errors
    /// [`crate::zarr::ZarrError::InvalidCodec`] when `level` is not in `1..=9`.
    pub fn new(level: u32) -> ZarrResult<Self> {
        let mut m = Map::new();
        m.insert("level".into(), level.into());
        Self::from_config(&Config::new("numcodecs.bz2", &m))
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "level"])?;
        let level = cfg.i64("level")?.unwrap_or(1);
        if !(1..=9).contains(&level) {
            return Err(cfg.err(format!("level {level} is not in 1..=9")));
        }
        Ok(Bz2Codec {
            config: super::config_without_id(cfg),
            level: level as u32,
        })
    }
}

impl BytesToBytesCodec for Bz2Codec {
    fn to_json(&self) -> Value {
        super::codec_json("numcodecs.bz2", &self.config)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        self.encode_slice(&bytes)
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut enc = bzip2::write::BzEncoder::new(
            Vec::with_capacity(bytes.len() / 2 + 64),
            bzip2::Compression::new(self.level),
        );
        enc.write_all(bytes)
            .and_then(|_| enc.finish())
            .map_err(|e| CodecError::EncodeFailed {
                codec: "numcodecs.bz2".into(),
                reason: e.to_string(),
            })
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        self.decode_bounded(bytes, usize::MAX)
    }

    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        let dec = bzip2::read::MultiBzDecoder::new(&bytes[..]);
        read_bounded("numcodecs.bz2", dec, limit, bytes.len() * 4).map(Into::into)
    }
}
