//! `numcodecs.bitround`: numcodecs' `BitRound` filter, `array -> array`, lossy:
//! keeps `keepbits` bits of each float's mantissa (of 10, 23 or 52 for float16,
//! float32, float64), rounding the rest half to even on the bit pattern; decoding
//! is the identity. Configuration: `keepbits` (an integer, at most the mantissa's
//! bits).

use serde_json::{Map, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.bitround";

/// The `numcodecs.bitround` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct BitRoundCodec {
    config: Map<String, Value>,
    keepbits: u32,
}

impl BitRoundCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "keepbits"])?;
        let keepbits = cfg
            .u64("keepbits")?
            .ok_or_else(|| cfg.err("`keepbits` is required"))?;
        Ok(BitRoundCodec {
            config: super::config_without_id(cfg),
            keepbits: u32::try_from(keepbits.min(64)).unwrap_or(64),
        })
    }

    fn mantissa_bits(dt: &DataType) -> Option<u32> {
        match dt {
            DataType::Float16 => Some(10),
            DataType::Float32 => Some(23),
            DataType::Float64 => Some(52),
            _ => None,
        }
    }
}

/// Rounds the `maskbits` low bits of the signed integer `b` (the float's bits) half
/// to even, as numcodecs does (wrapping arithmetic).
macro_rules! round_bits {
    ($b:expr, $maskbits:expr, $t:ty) => {{
        let b: $t = $b;
        let mask: $t = (-1 as $t) << $maskbits;
        let half_quantum1: $t = ((1 as $t) << ($maskbits - 1)) - 1;
        b.wrapping_add(((b >> $maskbits) & 1).wrapping_add(half_quantum1)) & mask
    }};
}

impl ArrayToArrayCodec for BitRoundCodec {
    fn to_json(&self) -> Value {
        super::codec_json(NAME, &self.config)
    }

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        let bits = Self::mantissa_bits(&decoded.data_type).ok_or_else(|| {
            CodecError::unsupported(NAME, format!("data type {}", decoded.data_type))
        })?;
        if self.keepbits > bits {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "keepbits {} exceeds the {bits} bits of {}",
                    self.keepbits, decoded.data_type
                ),
            ));
        }
        Ok(decoded.clone())
    }

    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        self.encoded_repr(decoded)?;
        let mut bytes = super::fixed(NAME, &data)?.to_vec();
        let bits = Self::mantissa_bits(&decoded.data_type).unwrap_or(0);
        let maskbits = bits - self.keepbits;
        if maskbits == 0 {
            return Ok(ArrayBytes::Fixed(bytes));
        }
        match decoded.data_type {
            DataType::Float16 => {
                for e in bytes.chunks_exact_mut(2) {
                    let b = i16::from_ne_bytes([e[0], e[1]]);
                    e.copy_from_slice(&round_bits!(b, maskbits, i16).to_ne_bytes());
                }
            }
            DataType::Float32 => {
                for e in bytes.chunks_exact_mut(4) {
                    let b = i32::from_ne_bytes([e[0], e[1], e[2], e[3]]);
                    e.copy_from_slice(&round_bits!(b, maskbits, i32).to_ne_bytes());
                }
            }
            _ => {
                for e in bytes.chunks_exact_mut(8) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(e);
                    let b = i64::from_ne_bytes(a);
                    e.copy_from_slice(&round_bits!(b, maskbits, i64).to_ne_bytes());
                }
            }
        }
        Ok(ArrayBytes::Fixed(bytes))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::fixed(NAME, &data)?;
        crate::zarr::codec::check_data(NAME, &data, decoded)?;
        Ok(data)
    }
}
