//! The `crc32c` codec (`../shared/specs/zarr/v3/codecs/crc32c`): appends the CRC32C
//! (RFC 3720) checksum of the input as a little-endian `u32`.

use serde_json::{json, Value};

use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "crc32c";

/// The `crc32c` checksum codec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crc32cCodec;

impl Crc32cCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&[])?;
        Ok(Crc32cCodec)
    }
}

impl BytesToBytesCodec for Crc32cCodec {
    fn to_json(&self) -> Value {
        json!({"name": NAME})
    }

    fn encode(&self, mut bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        let sum = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        Ok(bytes)
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        if bytes.len() < 4 {
            return Err(CodecError::invalid(
                NAME,
                "input shorter than the 4-byte checksum",
            ));
        }
        let n = bytes.len() - 4;
        let stored = u32::from_le_bytes([bytes[n], bytes[n + 1], bytes[n + 2], bytes[n + 3]]);
        let actual = crc32c::crc32c(&bytes[..n]);
        if stored != actual {
            return Err(CodecError::invalid(
                NAME,
                format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
            ));
        }
        Ok(bytes.slice(..n))
    }

    fn encoded_size(&self, decoded_size: u64) -> Option<u64> {
        decoded_size.checked_add(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_checksum() {
        // RFC 3720 test vector: CRC32C("123456789") = 0xe3069283
        let enc = Crc32cCodec.encode(b"123456789".to_vec()).unwrap();
        assert_eq!(&enc[9..], &0xe306_9283u32.to_le_bytes());
        assert_eq!(
            Crc32cCodec.decode(enc.clone().into()).unwrap(),
            &b"123456789"[..]
        );
        let mut bad = enc;
        bad[0] ^= 1;
        assert_err!(
            Crc32cCodec.decode(bad.into()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        assert_err!(
            Crc32cCodec.decode(vec![1u8, 2].into()),
            crate::zarr::CodecError::InvalidData { .. }
        );
        assert_eq!(Crc32cCodec.encoded_size(10), Some(14));
    }
}
