//! The `vlen-utf8` codec (zarr-extensions `codecs/vlen-utf8`, numcodecs `VLenUTF8`):
//! an `array -> bytes` codec for the `string` data type.
//!
//! Format: a little-endian `u32` element count, then per element (C order) a
//! little-endian `u32` byte length followed by the UTF-8 bytes.

use serde_json::{json, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{check_data, ArrayToBytesCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "vlen-utf8";

/// The `vlen-utf8` codec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VlenUtf8Codec;

impl VlenUtf8Codec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&[])?;
        Ok(VlenUtf8Codec)
    }
}

fn read_u32(b: &[u8], pos: usize) -> Result<u32, CodecError> {
    b.get(pos..pos + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| CodecError::invalid(NAME, "truncated input"))
}

impl ArrayToBytesCodec for VlenUtf8Codec {
    fn to_json(&self) -> Value {
        json!({"name": NAME, "configuration": {}})
    }

    fn validate(&self, repr: &ChunkRepr) -> Result<(), CodecError> {
        if repr.data_type != DataType::String {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "only the `string` data type is supported, not {}",
                    repr.data_type
                ),
            ));
        }
        Ok(())
    }

    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.validate(repr)?;
        check_data(NAME, &data, repr)?;
        let ArrayBytes::Strings(v) = data else {
            return Err(CodecError::unsupported(NAME, "fixed-size data"));
        };
        let too_big = || CodecError::unsupported(NAME, "more than 2^32-1 elements or bytes");
        let total: usize = v.iter().map(|s| s.len() + 4).sum::<usize>() + 4;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&u32::try_from(v.len()).map_err(|_| too_big())?.to_le_bytes());
        for s in &v {
            out.extend_from_slice(&u32::try_from(s.len()).map_err(|_| too_big())?.to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Ok(out)
    }

    fn decode(&self, bytes: ::bytes::Bytes, repr: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        self.validate(repr)?;
        let n = read_u32(&bytes, 0)? as u64;
        if n != repr.num_elements() {
            return Err(CodecError::invalid(
                NAME,
                format!(
                    "header says {n} elements, chunk has {}",
                    repr.num_elements()
                ),
            ));
        }
        let mut pos = 4usize;
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let len = read_u32(&bytes, pos)? as usize;
            pos += 4;
            let s = bytes
                .get(pos..pos + len)
                .ok_or_else(|| CodecError::invalid(NAME, "truncated input"))?;
            out.push(
                std::str::from_utf8(s)
                    .map_err(|e| CodecError::invalid(NAME, format!("invalid UTF-8: {e}")))?
                    .to_string(),
            );
            pos += len;
        }
        if pos != bytes.len() {
            return Err(CodecError::invalid(
                NAME,
                "trailing bytes after the last element",
            ));
        }
        Ok(ArrayBytes::Strings(out))
    }

    fn encoded_size(&self, _repr: &ChunkRepr) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::gzip::tests::hex_bytes;

    #[test]
    fn numcodecs_bytes() {
        // numcodecs.VLenUTF8().encode(np.array(['a', 'bcé', ''], dtype=object))
        let py = hex_bytes("030000000100000061040000006263c3a900000000");
        let r = ChunkRepr {
            shape: vec![3],
            data_type: DataType::String,
            fill_value: DataType::String.default_fill_value(),
        };
        let v = ArrayBytes::Strings(vec!["a".into(), "bcé".into(), "".into()]);
        assert_eq!(VlenUtf8Codec.encode(v.clone(), &r).unwrap(), py);
        assert_eq!(VlenUtf8Codec.decode(py.clone().into(), &r).unwrap(), v);
        let mut bad = py.clone();
        bad.truncate(10);
        assert_err!(
            VlenUtf8Codec.decode(bad.into(), &r),
            crate::zarr::CodecError::InvalidData { .. }
        );
        let mut bad = py;
        bad[9] = 0xff; // invalid UTF-8
        assert_err!(
            VlenUtf8Codec.decode(bad.into(), &r),
            crate::zarr::CodecError::InvalidData { .. }
        );
    }
}
