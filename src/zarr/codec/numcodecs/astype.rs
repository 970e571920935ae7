//! `numcodecs.astype`: numcodecs' `AsType` filter, `array -> array`: the chunk cast
//! from `decode_dtype` (the array's data type) to `encode_dtype` with NumPy's
//! `astype` rules (integers wrap, floats truncate toward zero into integers and
//! round to nearest into narrower floats), and back when decoding. Booleans,
//! integers and floats.

use serde_json::{Map, Value};

use super::numeric;
use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.astype";

/// The `numcodecs.astype` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct AsTypeCodec {
    config: Map<String, Value>,
    encode_dtype: DataType,
    decode_dtype: DataType,
}

impl AsTypeCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "encode_dtype", "decode_dtype"])?;
        let encode_dtype = super::dtype_param(cfg, "encode_dtype")?
            .ok_or_else(|| cfg.err("`encode_dtype` is required"))?;
        let decode_dtype = super::dtype_param(cfg, "decode_dtype")?
            .ok_or_else(|| cfg.err("`decode_dtype` is required"))?;
        Ok(AsTypeCodec {
            config: super::config_without_id(cfg),
            encode_dtype,
            decode_dtype,
        })
    }
}

impl ArrayToArrayCodec for AsTypeCodec {
    fn to_json(&self) -> Value {
        super::codec_json(NAME, &self.config)
    }

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        super::expect_dtype(NAME, decoded, &self.decode_dtype)?;
        Ok(super::repr_as(decoded, &self.encode_dtype))
    }

    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &self.decode_dtype)?;
        let v = numeric::read(NAME, &self.decode_dtype, super::fixed(NAME, &data)?)?;
        let out = numeric::cast(v, &self.encode_dtype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.encode_dtype)))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &self.decode_dtype)?;
        let v = numeric::read(NAME, &self.encode_dtype, super::fixed(NAME, &data)?)?;
        super::expect_len(NAME, v.len(), decoded)?;
        let out = numeric::cast(v, &self.decode_dtype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.decode_dtype)))
    }
}
