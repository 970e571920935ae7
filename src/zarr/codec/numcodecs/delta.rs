//! `numcodecs.delta`: numcodecs' `Delta` filter, `array -> array`. Encoding keeps
//! the chunk's first element and replaces every other one by its difference from
//! the one before (in flattened C order, in `dtype`: integers wrap, floats round),
//! cast to `astype`; decoding is the running sum, cast back to `dtype`.
//! Configuration: `dtype` (the array's data type, a NumPy type string or name) and
//! `astype` (the encoded data type, default `dtype`); booleans, integers and floats.

use serde_json::{Map, Value};

use super::numeric::{self, Values};
use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "numcodecs.delta";

/// The `numcodecs.delta` codec.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaCodec {
    config: Map<String, Value>,
    dtype: DataType,
    astype: DataType,
}

impl DeltaCodec {
    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["id", "dtype", "astype"])?;
        let dtype =
            super::dtype_param(cfg, "dtype")?.ok_or_else(|| cfg.err("`dtype` is required"))?;
        let astype = super::dtype_param(cfg, "astype")?.unwrap_or_else(|| dtype.clone());
        if dtype == DataType::Bool || astype == DataType::Bool {
            return Err(cfg.err("booleans have no differences"));
        }
        Ok(DeltaCodec {
            config: super::config_without_id(cfg),
            dtype,
            astype,
        })
    }
}

impl ArrayToArrayCodec for DeltaCodec {
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
        let diffs = match numeric::read(NAME, dt, super::fixed(NAME, &data)?)? {
            Values::Int(v) => Values::Int(
                (0..v.len())
                    .map(|i| match i {
                        0 => v[0],
                        _ => numeric::wrap_int(v[i] - v[i - 1], dt),
                    })
                    .collect(),
            ),
            Values::Float(v) => Values::Float(
                (0..v.len())
                    .map(|i| match i {
                        0 => v[0],
                        _ => numeric::round_float(v[i] - v[i - 1], dt),
                    })
                    .collect(),
            ),
        };
        let out = numeric::cast(diffs, &self.astype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.astype)))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        super::expect_dtype(NAME, decoded, &self.dtype)?;
        let enc = numeric::read(NAME, &self.astype, super::fixed(NAME, &data)?)?;
        super::expect_len(NAME, enc.len(), decoded)?;
        let sums = match enc {
            Values::Int(v) if numeric::is_int(&self.dtype) => {
                let mut acc = 0i128;
                Values::Int(
                    v.into_iter()
                        .map(|x| {
                            acc = numeric::wrap_int(acc + x, &self.dtype);
                            acc
                        })
                        .collect(),
                )
            }
            Values::Int(v) => {
                let mut acc = 0i64;
                Values::Int(
                    v.into_iter()
                        .map(|x| {
                            acc = acc.wrapping_add(x as i64);
                            i128::from(acc)
                        })
                        .collect(),
                )
            }
            Values::Float(v) => {
                let mut acc = 0.0f64;
                Values::Float(
                    v.into_iter()
                        .map(|x| {
                            acc = numeric::round_float(acc + x, &self.astype);
                            acc
                        })
                        .collect(),
                )
            }
        };
        let out = numeric::cast(sums, &self.dtype);
        Ok(ArrayBytes::Fixed(numeric::write(&out, &self.dtype)))
    }
}
