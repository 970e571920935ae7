//! Element values for the numcodecs `array -> array` codecs (`delta`,
//! `fixedscaleoffset`, `quantize`, `astype`): NumPy data type strings as numcodecs
//! configurations hold them, and NumPy's arithmetic and casting rules on the decoded
//! chunk's native-endian elements.
//!
//! Integers are held as `i128` (every Zarr integer fits) and floats as `f64`;
//! float32 and float16 arithmetic is emulated by rounding each `f64` result to the
//! narrower type, which gives NumPy's correctly rounded results for `+`, `-`, `*`
//! and `/`.

use crate::zarr::data_type::DataType;
use crate::zarr::error::CodecError;

/// The values of a chunk's elements.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Values {
    /// Booleans (as 0 and 1) and integers.
    Int(Vec<i128>),
    /// Floating-point numbers.
    Float(Vec<f64>),
}

/// Parses a NumPy data type as numcodecs configurations hold it: an array-interface
/// type string (`<i4`, `|u1`, `>f8`, `|b1`; the byte order is that of the array's
/// `bytes` codec, as the elements here are native-endian) or a NumPy name (`int16`,
/// `float64`, `bool`, as zarr-python 3 writes for a `dtype` it fills in).
///
/// Only booleans, integers and floats: numcodecs' numeric filters apply to them.
pub(crate) fn parse_numpy_dtype(s: &str) -> Option<DataType> {
    let code = match s {
        "bool" => "b1",
        "int8" => "i1",
        "int16" => "i2",
        "int32" => "i4",
        "int64" => "i8",
        "uint8" => "u1",
        "uint16" => "u2",
        "uint32" => "u4",
        "uint64" => "u8",
        "float16" => "f2",
        "float32" => "f4",
        "float64" => "f8",
        _ => s.strip_prefix(['<', '>', '|', '='])?,
    };
    Some(match code {
        "b1" => DataType::Bool,
        "i1" => DataType::Int8,
        "i2" => DataType::Int16,
        "i4" => DataType::Int32,
        "i8" => DataType::Int64,
        "u1" => DataType::UInt8,
        "u2" => DataType::UInt16,
        "u4" => DataType::UInt32,
        "u8" => DataType::UInt64,
        "f2" => DataType::Float16,
        "f4" => DataType::Float32,
        "f8" => DataType::Float64,
        _ => return None,
    })
}

/// Whether `dt` is a boolean, integer or float type.
pub(crate) fn is_numeric(dt: &DataType) -> bool {
    is_float(dt) || is_int(dt)
}

/// Whether `dt` is a float type.
pub(crate) fn is_float(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    )
}

/// Whether `dt` is a boolean or integer type.
pub(crate) fn is_int(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Bool
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
    )
}

/// Reads the native-endian elements of `dt` in `bytes`.
///
/// # Errors
/// [`CodecError::InvalidData`] naming `codec` when `bytes` is not a whole number of
/// elements; [`CodecError::Unsupported`] for non-numeric types.
pub(crate) fn read(codec: &str, dt: &DataType, bytes: &[u8]) -> Result<Values, CodecError> {
    let size = dt
        .fixed_size()
        .filter(|_| is_numeric(dt))
        .ok_or_else(|| CodecError::unsupported(codec, format!("data type {dt}")))?;
    if !bytes.len().is_multiple_of(size) {
        return Err(CodecError::invalid(
            codec,
            format!("{} bytes are not whole elements of {dt}", bytes.len()),
        ));
    }
    let ints = |f: fn(&[u8]) -> i128| Values::Int(bytes.chunks_exact(size).map(f).collect());
    let floats = |f: fn(&[u8]) -> f64| Values::Float(bytes.chunks_exact(size).map(f).collect());
    Ok(match dt {
        DataType::Bool => ints(|b| i128::from(b[0] != 0)),
        DataType::Int8 => ints(|b| i128::from(b[0] as i8)),
        DataType::UInt8 => ints(|b| i128::from(b[0])),
        DataType::Int16 => ints(|b| i128::from(i16::from_ne_bytes([b[0], b[1]]))),
        DataType::UInt16 => ints(|b| i128::from(u16::from_ne_bytes([b[0], b[1]]))),
        DataType::Int32 => ints(|b| i128::from(i32::from_ne_bytes(arr(b)))),
        DataType::UInt32 => ints(|b| i128::from(u32::from_ne_bytes(arr(b)))),
        DataType::Int64 => ints(|b| i128::from(i64::from_ne_bytes(arr(b)))),
        DataType::UInt64 => ints(|b| i128::from(u64::from_ne_bytes(arr(b)))),
        DataType::Float16 => floats(|b| half::f16::from_ne_bytes([b[0], b[1]]).to_f64()),
        DataType::Float32 => floats(|b| f64::from(f32::from_ne_bytes(arr(b)))),
        DataType::Float64 => floats(|b| f64::from_ne_bytes(arr(b))),
        _ => return Err(CodecError::unsupported(codec, format!("data type {dt}"))),
    })
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Wraps integer `v` into `dt`'s range (NumPy's integer casts: modulo 2^bits);
/// booleans become `v != 0`.
pub(crate) fn wrap_int(v: i128, dt: &DataType) -> i128 {
    match dt {
        DataType::Bool => i128::from(v != 0),
        DataType::Int8 => i128::from(v as i8),
        DataType::UInt8 => i128::from(v as u8),
        DataType::Int16 => i128::from(v as i16),
        DataType::UInt16 => i128::from(v as u16),
        DataType::Int32 => i128::from(v as i32),
        DataType::UInt32 => i128::from(v as u32),
        DataType::Int64 => i128::from(v as i64),
        DataType::UInt64 => i128::from(v as u64),
        _ => v,
    }
}

/// Rounds `v` to `dt`'s float precision (float16 and float32 results of `f64`
/// arithmetic; float64 as is).
pub(crate) fn round_float(v: f64, dt: &DataType) -> f64 {
    match dt {
        DataType::Float16 => half::f16::from_f64(v).to_f64(),
        DataType::Float32 => f64::from(v as f32),
        _ => v,
    }
}

/// A float cast to integer type `dt` as NumPy does for finite values in range
/// (truncation toward zero; booleans: `v != 0`). Out of range values saturate, NaN
/// becomes 0 (NumPy leaves both undefined).
pub(crate) fn float_to_int(v: f64, dt: &DataType) -> i128 {
    match dt {
        DataType::Bool => i128::from(v != 0.0),
        DataType::Int8 => i128::from(v as i8),
        DataType::UInt8 => i128::from(v as u8),
        DataType::Int16 => i128::from(v as i16),
        DataType::UInt16 => i128::from(v as u16),
        DataType::Int32 => i128::from(v as i32),
        DataType::UInt32 => i128::from(v as u32),
        DataType::Int64 => i128::from(v as i64),
        DataType::UInt64 => i128::from(v as u64),
        _ => v as i128,
    }
}

/// `values` cast to `dt` as NumPy's `astype` does (integers wrap, floats truncate
/// toward zero into integers, integers and wider floats round to nearest into
/// floats).
pub(crate) fn cast(values: Values, dt: &DataType) -> Values {
    match (values, is_float(dt)) {
        (Values::Int(v), false) => Values::Int(v.into_iter().map(|x| wrap_int(x, dt)).collect()),
        (Values::Int(v), true) => {
            Values::Float(v.into_iter().map(|x| round_float(x as f64, dt)).collect())
        }
        (Values::Float(v), false) => {
            Values::Int(v.into_iter().map(|x| float_to_int(x, dt)).collect())
        }
        (Values::Float(v), true) => {
            Values::Float(v.into_iter().map(|x| round_float(x, dt)).collect())
        }
    }
}

/// Writes `values` (already in `dt`'s range; see [`cast`]) as native-endian
/// elements of `dt`.
pub(crate) fn write(values: &Values, dt: &DataType) -> Vec<u8> {
    let size = dt.fixed_size().unwrap_or(1);
    let mut out = Vec::with_capacity(size * values.len());
    match values {
        Values::Int(v) => v.iter().for_each(|&x| put_int(&mut out, x, dt)),
        Values::Float(v) => {
            for &x in v {
                match dt {
                    DataType::Float16 => {
                        out.extend_from_slice(&half::f16::from_f64(x).to_ne_bytes())
                    }
                    DataType::Float32 => out.extend_from_slice(&(x as f32).to_ne_bytes()),
                    DataType::Float64 => out.extend_from_slice(&x.to_ne_bytes()),
                    _ => put_int(&mut out, float_to_int(x, dt), dt),
                }
            }
        }
    }
    out
}

/// Appends integer `x` as an element of `dt`.
fn put_int(out: &mut Vec<u8>, x: i128, dt: &DataType) {
    match dt {
        DataType::Bool => out.push(u8::from(x != 0)),
        DataType::Int8 | DataType::UInt8 => out.push(x as u8),
        DataType::Int16 | DataType::UInt16 => out.extend_from_slice(&(x as u16).to_ne_bytes()),
        DataType::Int32 | DataType::UInt32 => out.extend_from_slice(&(x as u32).to_ne_bytes()),
        DataType::Float16 => out.extend_from_slice(&half::f16::from_f64(x as f64).to_ne_bytes()),
        DataType::Float32 => out.extend_from_slice(&(x as f32).to_ne_bytes()),
        DataType::Float64 => out.extend_from_slice(&(x as f64).to_ne_bytes()),
        _ => out.extend_from_slice(&(x as u64).to_ne_bytes()),
    }
}

impl Values {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_casts_and_bytes() {
        assert_eq!(parse_numpy_dtype("<i4"), Some(DataType::Int32));
        assert_eq!(parse_numpy_dtype(">u2"), Some(DataType::UInt16));
        assert_eq!(parse_numpy_dtype("float64"), Some(DataType::Float64));
        assert_eq!(parse_numpy_dtype("|b1"), Some(DataType::Bool));
        assert_eq!(parse_numpy_dtype("i4"), None);
        assert_eq!(parse_numpy_dtype("<U3"), None);
        assert_eq!(parse_numpy_dtype("<c8"), None);
        assert_eq!(wrap_int(300, &DataType::UInt8), 44);
        assert_eq!(wrap_int(-1, &DataType::UInt16), 65535);
        assert_eq!(float_to_int(-2.7, &DataType::Int16), -2);
        assert_eq!(round_float(0.1, &DataType::Float32), f64::from(0.1f32));
        let bytes: Vec<u8> = [1i16, -2, 300]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let v = read("t", &DataType::Int16, &bytes).unwrap();
        assert_eq!(v, Values::Int(vec![1, -2, 300]));
        assert_eq!(write(&v, &DataType::Int16), bytes);
        let c = cast(v, &DataType::Int8);
        assert_eq!(c, Values::Int(vec![1, -2, 44]));
        assert_eq!(
            cast(c, &DataType::Float32),
            Values::Float(vec![1.0, -2.0, 44.0])
        );
        assert_err!(
            read("t", &DataType::Int16, &[1, 2, 3]),
            CodecError::InvalidData { .. }
        );
        assert_err!(
            read("t", &DataType::Complex64, &[0; 8]),
            CodecError::Unsupported { .. }
        );
    }
}
