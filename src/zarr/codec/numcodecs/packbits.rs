//! `numcodecs.packbits`: numcodecs' `PackBits` filter, `array -> array`, for
//! boolean arrays: the chunk's `n` booleans (flattened in C order) become
//! `1 + ceil(n / 8)` bytes (a one-dimensional `uint8` chunk), the first holding the
//! number of padding bits in the last byte, the rest the booleans eight to a byte,
//! the first in the most significant bit (NumPy's `packbits`). No configuration.

use serde_json::{Map, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.packbits";

/// The `numcodecs.packbits` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct PackBitsCodec {
    config: Map<String, Value>,
}

impl PackBitsCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id"])?;
        Ok(PackBitsCodec {
            config: super::config_without_id(cfg),
        })
    }
}

impl ArrayToArrayCodec for PackBitsCodec {
    fn to_json(&self) -> Value {
        super::codec_json(NAME, &self.config)
    }

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        super::expect_dtype(NAME, decoded, &DataType::Bool)?;
        Ok(ChunkRepr {
            shape: vec![1 + decoded.num_elements().div_ceil(8)],
            data_type: DataType::UInt8,
            fill_value: DataType::UInt8.default_fill_value(),
        })
    }

    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &DataType::Bool)?;
        let bits = super::fixed(NAME, &data)?;
        let mut out = Vec::with_capacity(1 + bits.len().div_ceil(8));
        out.push(((8 - bits.len() % 8) % 8) as u8);
        for group in bits.chunks(8) {
            let byte = group
                .iter()
                .enumerate()
                .fold(0u8, |acc, (i, &b)| acc | (u8::from(b != 0) << (7 - i)));
            out.push(byte);
        }
        Ok(ArrayBytes::Fixed(out))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &DataType::Bool)?;
        let enc = super::fixed(NAME, &data)?;
        let n = usize::try_from(decoded.num_elements()).unwrap_or(usize::MAX);
        let expected_pad = (8 - n % 8) % 8;
        match enc.split_first() {
            Some((&pad, packed))
                if packed.len() == n.div_ceil(8) && usize::from(pad) == expected_pad =>
            {
                Ok(ArrayBytes::Fixed(
                    (0..n).map(|i| (packed[i / 8] >> (7 - i % 8)) & 1).collect(),
                ))
            }
            _ => Err(CodecError::invalid(
                NAME,
                format!(
                    "{} bytes do not pack {n} booleans (1 + {} bytes, {expected_pad} padding bits)",
                    enc.len(),
                    n.div_ceil(8)
                ),
            )),
        }
    }
}
