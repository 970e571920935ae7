//! The numcodecs 32-bit checksum codecs: `numcodecs.crc32` (zlib's CRC-32),
//! `numcodecs.adler32` (zlib's Adler-32) and `numcodecs.fletcher32` (HDF5's
//! Fletcher-32 over big-endian 16-bit words, an odd last byte as the high byte of a
//! final word). Encoding adds the checksum as a 4-byte little-endian integer: before
//! the data for `crc32` and `adler32` (their `location` option, `"start"` by
//! default, may say `"end"`), after it for `fletcher32` and `numcodecs.crc32c`
//! (CRC-32C, `location` `"end"` by default: then the same bytes as the v3 `crc32c`
//! codec). Decoding checks the checksum and strips it.

use serde_json::{Map, Value};

use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

/// Which checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum32 {
    /// zlib's CRC-32 (`numcodecs.crc32`).
    Crc32,
    /// zlib's Adler-32 (`numcodecs.adler32`).
    Adler32,
    /// HDF5's Fletcher-32 (`numcodecs.fletcher32`).
    Fletcher32,
    /// CRC-32C (Castagnoli; `numcodecs.crc32c`, at the end by default).
    Crc32c,
}

impl Checksum32 {
    fn name(self) -> &'static str {
        match self {
            Checksum32::Crc32 => "numcodecs.crc32",
            Checksum32::Adler32 => "numcodecs.adler32",
            Checksum32::Fletcher32 => "numcodecs.fletcher32",
            Checksum32::Crc32c => "numcodecs.crc32c",
        }
    }

    /// The checksum of `data`.
    pub fn compute(self, data: &[u8]) -> u32 {
        match self {
            Checksum32::Crc32 => crc32fast::hash(data),
            Checksum32::Adler32 => adler32(data),
            Checksum32::Fletcher32 => fletcher32(data),
            Checksum32::Crc32c => crc32c::crc32c(data),
        }
    }
}

/// zlib's Adler-32 (RFC 1950) of `data`, starting from 1.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // 5552 bytes is the longest run whose sums cannot overflow 32 bits.
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// HDF5's Fletcher-32 of `data`: 16-bit big-endian words, sums folded (not reduced
/// modulo 65535) every 360 words.
fn fletcher32(data: &[u8]) -> u32 {
    let fold = |x: u32| (x & 0xffff) + (x >> 16);
    let (mut s1, mut s2) = (0u32, 0u32);
    let words = data.chunks_exact(2);
    let odd = words.remainder().first().copied();
    let pairs: Vec<&[u8]> = words.collect();
    for block in pairs.chunks(360) {
        for w in block {
            s1 += (u32::from(w[0]) << 8) | u32::from(w[1]);
            s2 += s1;
        }
        s1 = fold(s1);
        s2 = fold(s2);
    }
    if let Some(x) = odd {
        s1 += u32::from(x) << 8;
        s2 += s1;
        s1 = fold(s1);
        s2 = fold(s2);
    }
    s1 = fold(s1);
    s2 = fold(s2);
    (s2 << 16) | s1
}

/// A numcodecs 32-bit checksum codec.
#[derive(Clone, Debug, PartialEq)]
pub struct Checksum32Codec {
    config: Map<String, Value>,
    kind: Checksum32,
    at_start: bool,
}

impl Checksum32Codec {
    /// The codec `kind` with its numcodecs default location.
    pub fn new(kind: Checksum32) -> Self {
        Checksum32Codec {
            config: Map::new(),
            kind,
            at_start: matches!(kind, Checksum32::Crc32 | Checksum32::Adler32),
        }
    }

    pub(crate) fn from_config(cfg: &Config, kind: Checksum32) -> ZarrResult<Self> {
        let mut c = Self::new(kind);
        if kind == Checksum32::Fletcher32 {
            cfg.only(&["id"])?;
        } else {
            cfg.only(&["id", "location"])?;
            c.at_start = match cfg.str("location")? {
                None | Some("start") => true,
                Some("end") => false,
                Some(other) => {
                    return Err(cfg.err(format!("location {other:?} is not \"start\" or \"end\"")))
                }
            };
        }
        c.config = super::config_without_id(cfg);
        Ok(c)
    }
}

impl BytesToBytesCodec for Checksum32Codec {
    fn to_json(&self) -> Value {
        super::codec_json(self.kind.name(), &self.config)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        self.encode_slice(&bytes)
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        let sum = self.kind.compute(bytes).to_le_bytes();
        let mut out = Vec::with_capacity(bytes.len() + 4);
        if self.at_start {
            out.extend_from_slice(&sum);
            out.extend_from_slice(bytes);
        } else {
            out.extend_from_slice(bytes);
            out.extend_from_slice(&sum);
        }
        Ok(out)
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        let name = self.kind.name();
        if bytes.len() < 4 {
            return Err(CodecError::invalid(
                name,
                "shorter than its 4-byte checksum",
            ));
        }
        let (sum, payload) = if self.at_start {
            (bytes.slice(..4), bytes.slice(4..))
        } else {
            (
                bytes.slice(bytes.len() - 4..),
                bytes.slice(..bytes.len() - 4),
            )
        };
        let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
        let computed = self.kind.compute(&payload);
        if stored != computed {
            return Err(CodecError::invalid(
                name,
                format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"),
            ));
        }
        Ok(payload)
    }

    fn encoded_size(&self, decoded_size: u64) -> Option<u64> {
        Some(decoded_size + 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::gzip::tests::hex_bytes;

    #[test]
    fn numcodecs_checksum_bytes() {
        let data = b"hello world!".to_vec();
        // numcodecs 0.15: Fletcher32/Adler32/CRC32/CRC32(location="end") of b"hello world!"
        let cases = [
            (
                Checksum32::Fletcher32,
                None,
                "68656c6c6f20776f726c6421ef9148fc",
            ),
            (
                Checksum32::Adler32,
                None,
                "7e04891e68656c6c6f20776f726c6421",
            ),
            (Checksum32::Crc32, None, "6dc2b40368656c6c6f20776f726c6421"),
            (
                Checksum32::Crc32,
                Some("end"),
                "68656c6c6f20776f726c64216dc2b403",
            ),
        ];
        for (kind, loc, hex) in cases {
            let mut m = Map::new();
            if let Some(l) = loc {
                m.insert("location".into(), l.into());
            }
            let c = Checksum32Codec::from_config(&Config::new(kind.name(), &m), kind).unwrap();
            let enc = c.encode(data.clone()).unwrap();
            assert_eq!(enc, hex_bytes(hex), "{kind:?}");
            assert_eq!(c.decode(enc.clone().into()).unwrap(), data);
            let mut bad = enc;
            bad[5] ^= 1;
            assert_err!(c.decode(bad.into()), CodecError::InvalidData { .. });
            assert_err!(c.decode(vec![1, 2].into()), CodecError::InvalidData { .. });
        }
        // An odd length: numcodecs Fletcher32 of b"abcde".
        let f = Checksum32Codec::new(Checksum32::Fletcher32);
        assert_eq!(
            f.encode(b"abcde".to_vec()).unwrap(),
            hex_bytes("6162636465c729f04f")
        );
        let m: Map<String, Value> = serde_json::from_str(r#"{"location": "middle"}"#).unwrap();
        assert_err!(
            Checksum32Codec::from_config(&Config::new("numcodecs.crc32", &m), Checksum32::Crc32),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }
}
