//! `numcodecs.lzma`: LZMA compression as numcodecs' `LZMA` (Python's
//! `lzma.compress` / `lzma.decompress`), via liblzma. Configuration: `format` (1 =
//! `.xz` container, the default; 2 = legacy `.lzma` "alone"; 0 = detect, decoding
//! only), `check` (-1 = the format's default, CRC64 for `.xz`; 0 none, 1 CRC32,
//! 4 CRC64, 10 SHA-256), `preset` (0..=9, optionally with the "extreme" flag
//! `0x80000000`; `null` = 6). Raw streams (`format` 3) and custom `filters` are not
//! supported. `.xz` decoding accepts concatenated streams, as Python does.

use std::io::Write;

use liblzma::stream::{Check, LzmaOptions, Stream, CONCATENATED};
use serde_json::{Map, Value};

use crate::zarr::codec::bounded::read_bounded;
use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.lzma";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Auto,
    Xz,
    Alone,
}

/// The `numcodecs.lzma` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct LzmaCodec {
    config: Map<String, Value>,
    format: Format,
    check: i64,
    preset: u32,
}

impl LzmaCodec {
    /// An `.xz` codec at `preset` (0..=9) with the default check, as
    /// `numcodecs.LZMA(preset=preset)`.
    ///
    /// # Errors
    /// [`crate::zarr::ZarrError::InvalidCodec`] when `preset` is out of range.
    pub fn new(preset: u32) -> ZarrResult<Self> {
        let mut m = Map::new();
        m.insert("format".into(), 1.into());
        m.insert("check".into(), (-1).into());
        m.insert("preset".into(), preset.into());
        m.insert("filters".into(), Value::Null);
        Self::from_config(&Config::new(NAME, &m))
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "format", "check", "preset", "filters"])?;
        let format = match cfg.i64("format")?.unwrap_or(1) {
            0 => Format::Auto,
            1 => Format::Xz,
            2 => Format::Alone,
            3 => return Err(cfg.err("raw streams (format 3) are not supported")),
            f => return Err(cfg.err(format!("unknown format {f}"))),
        };
        if cfg.get("filters").is_some() {
            return Err(cfg.err("custom `filters` are not supported"));
        }
        let check = cfg.i64("check")?.unwrap_or(-1);
        let check_ok = match format {
            Format::Xz => matches!(check, -1 | 0 | 1 | 4 | 10),
            Format::Alone | Format::Auto => matches!(check, -1 | 0),
        };
        if !check_ok {
            return Err(cfg.err(format!("check {check} does not suit this format")));
        }
        let preset = cfg.u64("preset")?.unwrap_or(6);
        let level = preset & !u64::from(liblzma::stream::PRESET_EXTREME);
        if level > 9 || preset > u64::from(u32::MAX) {
            return Err(cfg.err(format!(
                "preset {preset} is not 0..=9 (plus the extreme flag)"
            )));
        }
        Ok(LzmaCodec {
            config: super::config_without_id(cfg),
            format,
            check,
            preset: preset as u32,
        })
    }

    fn encoder(&self) -> Result<Stream, CodecError> {
        let fail = |reason: String| CodecError::EncodeFailed {
            codec: NAME.into(),
            reason,
        };
        match self.format {
            Format::Xz => {
                let check = match self.check {
                    0 => Check::None,
                    1 => Check::Crc32,
                    10 => Check::Sha256,
                    _ => Check::Crc64,
                };
                Stream::new_easy_encoder(self.preset, check).map_err(|e| fail(e.to_string()))
            }
            Format::Alone => LzmaOptions::new_preset(self.preset)
                .and_then(|o| Stream::new_lzma_encoder(&o))
                .map_err(|e| fail(e.to_string())),
            Format::Auto => Err(fail("format 0 (detect) only decodes".into())),
        }
    }

    fn decoder(&self) -> Result<Stream, CodecError> {
        let s = match self.format {
            Format::Xz => Stream::new_stream_decoder(u64::MAX, CONCATENATED),
            Format::Alone => Stream::new_lzma_decoder(u64::MAX),
            Format::Auto => Stream::new_auto_decoder(u64::MAX, CONCATENATED),
        };
        s.map_err(|e| CodecError::invalid(NAME, e.to_string()))
    }
}

impl BytesToBytesCodec for LzmaCodec {
    fn to_json(&self) -> Value {
        super::codec_json(NAME, &self.config)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        self.encode_slice(&bytes)
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut enc = liblzma::write::XzEncoder::new_stream(
            Vec::with_capacity(bytes.len() / 2 + 64),
            self.encoder()?,
        );
        enc.write_all(bytes)
            .and_then(|_| enc.finish())
            .map_err(|e| CodecError::EncodeFailed {
                codec: NAME.into(),
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
        let dec = liblzma::read::XzDecoder::new_stream(&bytes[..], self.decoder()?);
        read_bounded(NAME, dec, limit, bytes.len() * 4).map(Into::into)
    }
}
