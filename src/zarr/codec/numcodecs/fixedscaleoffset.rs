//! `numcodecs.fixedscaleoffset`: numcodecs' `FixedScaleOffset` filter,
//! `array -> array`. Encoding computes `round((x - offset) * scale)` (round half to
//! even) and casts it to `astype`; decoding computes `y / scale + offset` and casts
//! it to `dtype`. Arithmetic follows NumPy 2: in the float type of a float array
//! (`offset` and `scale` rounded to it), in the integer type itself when the array
//! is an integer one and `offset` and `scale` are both JSON integers (wrapping), in
//! float64 otherwise; decoding divides in `astype`'s float type, or in float64 when
//! `astype` is an integer type. Configuration: `offset`, `scale` (numbers), `dtype`
//! and `astype` (default `dtype`).

use serde_json::{Map, Number, Value};

use super::numeric::{self, Values};
use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.fixedscaleoffset";

/// The `numcodecs.fixedscaleoffset` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct FixedScaleOffsetCodec {
    config: Map<String, Value>,
    offset: Number,
    scale: Number,
    dtype: DataType,
    astype: DataType,
}

impl FixedScaleOffsetCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "offset", "scale", "dtype", "astype"])?;
        let num = |key: &str| match cfg.get(key) {
            Some(Value::Number(n)) => Ok(n.clone()),
            _ => Err(cfg.err(format!("`{key}` must be a number"))),
        };
        let (offset, scale) = (num("offset")?, num("scale")?);
        let dtype =
            super::dtype_param(cfg, "dtype")?.ok_or_else(|| cfg.err("`dtype` is required"))?;
        let astype = super::dtype_param(cfg, "astype")?.unwrap_or_else(|| dtype.clone());
        Ok(FixedScaleOffsetCodec {
            config: super::config_without_id(cfg),
            offset,
            scale,
            dtype,
            astype,
        })
    }

    fn offset_f(&self) -> f64 {
        self.offset.as_f64().unwrap_or(0.0)
    }

    fn scale_f(&self) -> f64 {
        self.scale.as_f64().unwrap_or(1.0)
    }
}

/// A JSON integer as `i128` (`None` for floats).
fn json_int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

impl ArrayToArrayCodec for FixedScaleOffsetCodec {
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
        let enc = match numeric::read(NAME, dt, super::fixed(NAME, &data)?)? {
            Values::Int(v) => match (json_int(&self.offset), json_int(&self.scale)) {
                (Some(o), Some(s)) => Values::Int(
                    v.into_iter()
                        .map(|x| {
                            numeric::wrap_int(numeric::wrap_int(x - o, dt).wrapping_mul(s), dt)
                        })
                        .collect(),
                ),
                _ => {
                    let (o, s) = (self.offset_f(), self.scale_f());
                    Values::Float(
                        v.into_iter()
                            .map(|x| ((x as f64 - o) * s).round_ties_even())
                            .collect(),
                    )
                }
            },
            Values::Float(v) => {
                let r = |x: f64| numeric::round_float(x, dt);
                let (o, s) = (r(self.offset_f()), r(self.scale_f()));
                Values::Float(
                    v.into_iter()
                        .map(|x| r(r(x - o) * s).round_ties_even())
                        .collect(),
                )
            }
        };
        let out = numeric::cast(enc, &self.astype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.astype)))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &self.dtype)?;
        let enc = numeric::read(NAME, &self.astype, super::fixed(NAME, &data)?)?;
        super::expect_len(NAME, enc.len(), decoded)?;
        let dec = match enc {
            Values::Int(v) => {
                let (o, s) = (self.offset_f(), self.scale_f());
                Values::Float(v.into_iter().map(|y| y as f64 / s + o).collect())
            }
            Values::Float(v) => {
                let r = |x: f64| numeric::round_float(x, &self.astype);
                let (o, s) = (r(self.offset_f()), r(self.scale_f()));
                Values::Float(v.into_iter().map(|y| r(r(y / s) + o)).collect())
            }
        };
        let out = numeric::cast(dec, &self.dtype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.dtype)))
    }
}
