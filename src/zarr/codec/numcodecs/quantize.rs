//! `numcodecs.quantize`: numcodecs' `Quantize` filter, `array -> array`, lossy.
//! Encoding keeps `digits` decimal digits after the point by rounding (half to
//! even) to a multiple of `2^-bits`, where `bits = ceil(log2(10^-e))` and `e` is
//! `log10(10^-digits)` rounded away from zero, then casts to `astype`; decoding
//! casts back to `dtype`. Configuration: `digits` (an integer), `dtype`, `astype`
//! (default `dtype`); float types only.

use serde_json::{Map, Value};

use super::numeric::{self, Values};
use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.quantize";

/// The `numcodecs.quantize` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeCodec {
    config: Map<String, Value>,
    scale: f64,
    dtype: DataType,
    astype: DataType,
}

impl QuantizeCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "digits", "dtype", "astype"])?;
        let digits = cfg
            .i64("digits")?
            .ok_or_else(|| cfg.err("`digits` is required"))?;
        let dtype =
            super::dtype_param(cfg, "dtype")?.ok_or_else(|| cfg.err("`dtype` is required"))?;
        let astype = super::dtype_param(cfg, "astype")?.unwrap_or_else(|| dtype.clone());
        if !numeric::is_float(&dtype) || !numeric::is_float(&astype) {
            return Err(cfg.err("only float data types are supported"));
        }
        let precision = 10f64.powf(-(digits as f64));
        let e = precision.log10();
        let e = if e < 0.0 { e.floor() } else { e.ceil() };
        let bits = 10f64.powf(-e).log2().ceil();
        Ok(QuantizeCodec {
            config: super::config_without_id(cfg),
            scale: 2f64.powf(bits),
            dtype,
            astype,
        })
    }
}

impl ArrayToArrayCodec for QuantizeCodec {
    fn to_json(&self) -> Value {
        super::codec_json(NAME, &self.config)
    }

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        super::expect_dtype(NAME, decoded, &self.dtype)?;
        Ok(super::repr_as(decoded, &self.astype))
    }

    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &self.dtype)?;
        let dt = &self.dtype;
        let Values::Float(v) = numeric::read(NAME, dt, super::fixed(NAME, &data)?)? else {
            return Err(CodecError::unsupported(NAME, "a non-float array"));
        };
        let r = |x: f64| numeric::round_float(x, dt);
        let s = r(self.scale);
        let q = Values::Float(
            v.into_iter()
                .map(|x| r(r(s * x).round_ties_even() / s))
                .collect(),
        );
        let out = numeric::cast(q, &self.astype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.astype)))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &self.dtype)?;
        let v = numeric::read(NAME, &self.astype, super::fixed(NAME, &data)?)?;
        super::expect_len(NAME, v.len(), decoded)?;
        let out = numeric::cast(v, &self.dtype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.dtype)))
    }
}
