//! Zarr v3 data types and fill values.
//!
//! Core data types: data types spec (`../shared/specs/zarr/v3/data-types/index.rst`),
//! section "Core data types"; fill values: section "Permitted fill values".
//! Extension data types as registered in `zarr-extensions` and written by
//! zarr-python 3: `string` (variable-length UTF-8), `fixed_length_utf32`,
//! `raw_bytes` and `null_terminated_bytes` (numpy `V<n>` / `S<n>`).
//!
//! In memory (the "decoded representation" of the core spec, section "Codecs") every
//! fixed-size element is held as its native-endian bytes; `string` elements are Rust
//! `String`s. See [`crate::zarr::ArrayBytes`].

use base64::Engine as _;
use half::f16;
use serde_json::{Map, Value};

use crate::zarr::error::{ZarrError, ZarrResult};

/// A Zarr data type (the `data_type` extension point of the core spec).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `bool`: one byte, `0` or `1`.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint8`.
    UInt8,
    /// `uint16`.
    UInt16,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// `float16` (IEEE 754 half precision).
    Float16,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `complex64`: two `float32` (real, imaginary).
    Complex64,
    /// `complex128`: two `float64` (real, imaginary).
    Complex128,
    /// `r<N>` of the core spec: raw bits, `N = 8 * bytes`; fill value is an array of
    /// `bytes` integers in `0..=255`.
    RawBits {
        /// Element size in bytes (`N / 8`).
        bytes: usize,
    },
    /// zarr-python's `raw_bytes` (numpy `V<n>`): `{"name": "raw_bytes",
    /// "configuration": {"length_bytes": n}}`; fill value is a base64 string.
    RawBytes {
        /// Element size in bytes.
        length_bytes: usize,
    },
    /// zarr-python's `null_terminated_bytes` (numpy `S<n>`): fixed-size byte strings,
    /// trailing NUL bytes are padding; fill value is a base64 string.
    NullTerminatedBytes {
        /// Element size in bytes.
        length_bytes: usize,
    },
    /// `string`: variable-length UTF-8 strings (zarr-extensions `string`), encoded with
    /// the `vlen-utf8` codec; fill value is a JSON string.
    String,
    /// `fixed_length_utf32` (zarr-extensions): strings of at most `length_bytes / 4`
    /// Unicode code points stored as UTF-32 code units, NUL-padded; fill value is a
    /// JSON string.
    FixedLengthUtf32 {
        /// Element size in bytes (a multiple of 4).
        length_bytes: usize,
    },
}

/// A fill value, decoded for its data type.
///
/// For fixed-size data types this is the element's native-endian bytes (exactly
/// [`DataType::fixed_size`] bytes); for [`DataType::String`] it is the string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FillValue {
    /// Native-endian bytes of one element.
    Bytes(Vec<u8>),
    /// The fill string of a `string` array.
    String(String),
}

impl FillValue {
    /// The native-endian element bytes (`&[]` for a string fill value).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            FillValue::Bytes(b) => b,
            FillValue::String(_) => &[],
        }
    }
}

const NAN_F16: u16 = 0x7e00;
const NAN_F32: u32 = 0x7fc0_0000;
const NAN_F64: u64 = 0x7ff8_0000_0000_0000;

fn dt_error(json: &Value, reason: impl Into<String>) -> ZarrError {
    ZarrError::InvalidDataType {
        data_type: json.to_string(),
        reason: reason.into(),
    }
}

fn length_bytes(json: &Value, config: Option<&Map<String, Value>>) -> ZarrResult<usize> {
    let config = config.ok_or_else(|| dt_error(json, "missing configuration"))?;
    for key in config.keys() {
        if key != "length_bytes" {
            return Err(dt_error(json, format!("unknown configuration key `{key}`")));
        }
    }
    config
        .get("length_bytes")
        .and_then(Value::as_u64)
        .map(|n| n as usize)
        .ok_or_else(|| {
            dt_error(
                json,
                "configuration.length_bytes must be a non-negative integer",
            )
        })
}

impl DataType {
    /// Parses the `data_type` member of array metadata: a short-hand name
    /// (`"float32"`, `"r16"`, `"string"`) or an extension object
    /// `{"name": ..., "configuration": {...}}` (core spec, "Extension definition").
    ///
    /// # Errors
    /// [`ZarrError::InvalidDataType`] for malformed JSON (bad `r<N>`, bad
    /// configuration); [`ZarrError::UnsupportedExtension`] (with an empty path) for an
    /// unknown data type name.
    pub fn from_json(json: &Value) -> ZarrResult<DataType> {
        let (name, config) = match json {
            Value::String(s) => (s.as_str(), None),
            Value::Object(obj) => {
                let name = obj
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| dt_error(json, "missing string member `name`"))?;
                let config = match obj.get("configuration") {
                    None => None,
                    Some(Value::Object(c)) => Some(c),
                    Some(_) => return Err(dt_error(json, "`configuration` must be an object")),
                };
                for key in obj.keys() {
                    if key != "name" && key != "configuration" {
                        return Err(dt_error(json, format!("unknown member `{key}`")));
                    }
                }
                (name, config)
            }
            _ => return Err(dt_error(json, "must be a string or an object")),
        };
        let simple = match name {
            "bool" => Some(DataType::Bool),
            "int8" => Some(DataType::Int8),
            "int16" => Some(DataType::Int16),
            "int32" => Some(DataType::Int32),
            "int64" => Some(DataType::Int64),
            "uint8" => Some(DataType::UInt8),
            "uint16" => Some(DataType::UInt16),
            "uint32" => Some(DataType::UInt32),
            "uint64" => Some(DataType::UInt64),
            "float16" => Some(DataType::Float16),
            "float32" => Some(DataType::Float32),
            "float64" => Some(DataType::Float64),
            "complex64" => Some(DataType::Complex64),
            "complex128" => Some(DataType::Complex128),
            "string" => Some(DataType::String),
            _ => None,
        };
        if let Some(dt) = simple {
            if config.is_some_and(|c| !c.is_empty()) {
                return Err(dt_error(json, format!("`{name}` takes no configuration")));
            }
            return Ok(dt);
        }
        match name {
            "raw_bytes" => {
                let n = length_bytes(json, config)?;
                if n == 0 {
                    return Err(dt_error(json, "length_bytes must be at least 1"));
                }
                Ok(DataType::RawBytes { length_bytes: n })
            }
            "null_terminated_bytes" => {
                let n = length_bytes(json, config)?;
                Ok(DataType::NullTerminatedBytes { length_bytes: n })
            }
            "fixed_length_utf32" => {
                let n = length_bytes(json, config)?;
                if n % 4 != 0 {
                    return Err(dt_error(json, "length_bytes must be a multiple of 4"));
                }
                Ok(DataType::FixedLengthUtf32 { length_bytes: n })
            }
            _ if name.starts_with('r') && name.len() > 1 => {
                let bits: usize = name[1..].parse().map_err(|_| {
                    dt_error(json, "raw data type must be `r<N>` with an integer N")
                })?;
                if bits == 0 || !bits.is_multiple_of(8) {
                    return Err(dt_error(
                        json,
                        "raw data type bits must be a positive multiple of 8",
                    ));
                }
                if config.is_some_and(|c| !c.is_empty()) {
                    return Err(dt_error(json, "`r<N>` takes no configuration"));
                }
                Ok(DataType::RawBits { bytes: bits / 8 })
            }
            _ => Err(ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "data type".to_string(),
                name: name.to_string(),
            }),
        }
    }

    /// The JSON form written to `zarr.json` (short-hand name for core types and
    /// `string`, an extension object otherwise), as zarr-python writes it.
    pub fn to_json(&self) -> Value {
        let with_len = |name: &str, n: usize| serde_json::json!({"name": name, "configuration": {"length_bytes": n}});
        match self {
            DataType::RawBits { bytes } => Value::String(format!("r{}", bytes * 8)),
            DataType::RawBytes { length_bytes } => with_len("raw_bytes", *length_bytes),
            DataType::NullTerminatedBytes { length_bytes } => {
                with_len("null_terminated_bytes", *length_bytes)
            }
            DataType::FixedLengthUtf32 { length_bytes } => {
                with_len("fixed_length_utf32", *length_bytes)
            }
            other => Value::String(other.name()),
        }
    }

    /// The data type's name (`float32`, `r24`, `fixed_length_utf32`, ...).
    pub fn name(&self) -> String {
        match self {
            DataType::Bool => "bool",
            DataType::Int8 => "int8",
            DataType::Int16 => "int16",
            DataType::Int32 => "int32",
            DataType::Int64 => "int64",
            DataType::UInt8 => "uint8",
            DataType::UInt16 => "uint16",
            DataType::UInt32 => "uint32",
            DataType::UInt64 => "uint64",
            DataType::Float16 => "float16",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
            DataType::Complex64 => "complex64",
            DataType::Complex128 => "complex128",
            DataType::RawBits { bytes } => return format!("r{}", bytes * 8),
            DataType::RawBytes { .. } => "raw_bytes",
            DataType::NullTerminatedBytes { .. } => "null_terminated_bytes",
            DataType::String => "string",
            DataType::FixedLengthUtf32 { .. } => "fixed_length_utf32",
        }
        .to_string()
    }

    /// Size of one element in bytes, or `None` for the variable-length `string`.
    pub fn fixed_size(&self) -> Option<usize> {
        Some(match self {
            DataType::Bool | DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 | DataType::Float16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::UInt64 | DataType::Float64 | DataType::Complex64 => 8,
            DataType::Complex128 => 16,
            DataType::RawBits { bytes } => *bytes,
            DataType::RawBytes { length_bytes }
            | DataType::NullTerminatedBytes { length_bytes }
            | DataType::FixedLengthUtf32 { length_bytes } => *length_bytes,
            DataType::String => return None,
        })
    }

    /// Size in bytes of the units that are byte-swapped between little and big endian
    /// (bytes codec spec): the element size for numbers, the component size for
    /// complex numbers, 4 for UTF-32 code units, 1 (no swapping) for bool, 8-bit
    /// integers and raw bytes, 0 for `string`.
    pub fn endian_unit(&self) -> usize {
        match self {
            DataType::Complex64 => 4,
            DataType::Complex128 => 8,
            DataType::FixedLengthUtf32 { .. } => 4,
            DataType::RawBits { .. }
            | DataType::RawBytes { .. }
            | DataType::NullTerminatedBytes { .. } => 1,
            DataType::String => 0,
            other => other.fixed_size().unwrap_or(1),
        }
    }

    /// Whether elements are multi-byte numbers whose byte order matters (so the
    /// `bytes` codec needs its `endian` configuration).
    pub fn needs_endian(&self) -> bool {
        self.endian_unit() > 1
    }

    /// The default fill value: zero / `false` / empty string / all-zero bytes.
    pub fn default_fill_value(&self) -> FillValue {
        match self {
            DataType::String => FillValue::String(String::new()),
            other => FillValue::Bytes(vec![0; other.fixed_size().unwrap_or(0)]),
        }
    }

    /// Parses a JSON fill value for this data type (data types spec, "Permitted fill
    /// values", plus the extension data types' rules).
    ///
    /// Accepted forms: booleans for `bool`; integral numbers within range for
    /// integers; numbers, `"NaN"`, `"Infinity"`, `"-Infinity"` and `"0x…"` hex bit
    /// patterns for floats; two-element arrays of float forms for complex; arrays of
    /// byte integers (or a base64 string) for raw types; strings for string types.
    ///
    /// # Errors
    /// [`ZarrError::InvalidFillValue`] when the value is not permitted.
    pub fn fill_value_from_json(&self, json: &Value) -> ZarrResult<FillValue> {
        let err = |reason: &str| ZarrError::InvalidFillValue {
            value: json.to_string(),
            data_type: self.name(),
            reason: reason.to_string(),
        };
        macro_rules! int {
            ($t:ty) => {{
                let v: Option<$t> = match json {
                    Value::Number(n) if n.is_i64() => {
                        n.as_i64().and_then(|x| <$t>::try_from(x).ok())
                    }
                    Value::Number(n) if n.is_u64() => {
                        n.as_u64().and_then(|x| <$t>::try_from(x).ok())
                    }
                    Value::Number(_) => {
                        return Err(err("integer fill value must have no fraction or exponent"))
                    }
                    _ => return Err(err("must be a JSON integer")),
                };
                let v = v.ok_or_else(|| err("out of range for the data type"))?;
                FillValue::Bytes(v.to_ne_bytes().to_vec())
            }};
        }
        Ok(match self {
            DataType::Bool => match json {
                Value::Bool(b) => FillValue::Bytes(vec![u8::from(*b)]),
                _ => return Err(err("must be true or false")),
            },
            DataType::Int8 => int!(i8),
            DataType::Int16 => int!(i16),
            DataType::Int32 => int!(i32),
            DataType::Int64 => int!(i64),
            DataType::UInt8 => int!(u8),
            DataType::UInt16 => int!(u16),
            DataType::UInt32 => int!(u32),
            DataType::UInt64 => int!(u64),
            DataType::Float16 => {
                FillValue::Bytes(parse_float_bits(json, 2).map_err(|r| err(&r))?.to_vec())
            }
            DataType::Float32 => {
                FillValue::Bytes(parse_float_bits(json, 4).map_err(|r| err(&r))?.to_vec())
            }
            DataType::Float64 => {
                FillValue::Bytes(parse_float_bits(json, 8).map_err(|r| err(&r))?.to_vec())
            }
            DataType::Complex64 | DataType::Complex128 => {
                let part = if *self == DataType::Complex64 { 4 } else { 8 };
                let arr = json
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| err("must be a two-element array [real, imaginary]"))?;
                let mut out = parse_float_bits(&arr[0], part)
                    .map_err(|r| err(&r))?
                    .to_vec();
                out.extend_from_slice(&parse_float_bits(&arr[1], part).map_err(|r| err(&r))?);
                FillValue::Bytes(out)
            }
            DataType::RawBits { bytes }
            | DataType::RawBytes {
                length_bytes: bytes,
            } => {
                let v = parse_byte_fill(json).map_err(|r| err(&r))?;
                if v.len() != *bytes {
                    return Err(err(&format!("must have exactly {bytes} bytes")));
                }
                FillValue::Bytes(v)
            }
            DataType::NullTerminatedBytes { length_bytes } => {
                let mut v = parse_byte_fill(json).map_err(|r| err(&r))?;
                if v.len() > *length_bytes {
                    return Err(err(&format!("must have at most {length_bytes} bytes")));
                }
                v.resize(*length_bytes, 0);
                FillValue::Bytes(v)
            }
            DataType::String => match json {
                Value::String(s) => FillValue::String(s.clone()),
                _ => return Err(err("must be a JSON string")),
            },
            DataType::FixedLengthUtf32 { length_bytes } => match json {
                Value::String(s) => {
                    FillValue::Bytes(encode_utf32(s, *length_bytes).map_err(|r| err(&r))?)
                }
                _ => return Err(err("must be a JSON string")),
            },
        })
    }

    /// The JSON form of a fill value, as zarr-python writes it: numbers; `"NaN"`,
    /// `"Infinity"`, `"-Infinity"`; a `"0x…"` hex string for NaNs other than the
    /// canonical one; `[re, im]` for complex; a byte array for `r<N>`; base64 for
    /// `raw_bytes`/`null_terminated_bytes`; strings for string types.
    ///
    /// # Errors
    /// [`ZarrError::InvalidFillValue`] when `fill` does not have this data type's size.
    pub fn fill_value_to_json(&self, fill: &FillValue) -> ZarrResult<Value> {
        let bytes = match (self, fill) {
            (DataType::String, FillValue::String(s)) => return Ok(Value::String(s.clone())),
            (DataType::String, FillValue::Bytes(_)) => None,
            (_, FillValue::Bytes(b)) if Some(b.len()) == self.fixed_size() => Some(b.as_slice()),
            _ => None,
        };
        let b = bytes.ok_or_else(|| ZarrError::InvalidFillValue {
            value: format!("{fill:?}"),
            data_type: self.name(),
            reason: "fill value does not match the data type's size".to_string(),
        })?;
        Ok(element_to_json(self, b))
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataType::RawBytes { length_bytes }
            | DataType::NullTerminatedBytes { length_bytes }
            | DataType::FixedLengthUtf32 { length_bytes } => {
                write!(f, "{}[{} bytes]", self.name(), length_bytes)
            }
            _ => f.write_str(&self.name()),
        }
    }
}

/// Converts one fixed-size element (native-endian bytes) to JSON, using the fill
/// value conventions: floats that are not finite become `"NaN"`, `"Infinity"`,
/// `"-Infinity"` (or `"0x…"` for non-canonical NaNs), complex numbers `[re, im]`.
///
/// `bytes` must have the data type's fixed size; `string` has no fixed-size
/// representation and yields `null`.
pub fn element_to_json(dt: &DataType, b: &[u8]) -> Value {
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    match dt {
        DataType::Bool => Value::Bool(b[0] != 0),
        DataType::Int8 => Value::from(i8::from_ne_bytes(arr(b))),
        DataType::Int16 => Value::from(i16::from_ne_bytes(arr(b))),
        DataType::Int32 => Value::from(i32::from_ne_bytes(arr(b))),
        DataType::Int64 => Value::from(i64::from_ne_bytes(arr(b))),
        DataType::UInt8 => Value::from(b[0]),
        DataType::UInt16 => Value::from(u16::from_ne_bytes(arr(b))),
        DataType::UInt32 => Value::from(u32::from_ne_bytes(arr(b))),
        DataType::UInt64 => Value::from(u64::from_ne_bytes(arr(b))),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => float_to_json(b),
        DataType::Complex64 => Value::Array(vec![float_to_json(&b[..4]), float_to_json(&b[4..8])]),
        DataType::Complex128 => {
            Value::Array(vec![float_to_json(&b[..8]), float_to_json(&b[8..16])])
        }
        DataType::RawBits { .. } => Value::Array(b.iter().map(|&x| Value::from(x)).collect()),
        DataType::RawBytes { .. } | DataType::NullTerminatedBytes { .. } => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        DataType::FixedLengthUtf32 { .. } => match decode_utf32(b) {
            Ok(s) => Value::String(s),
            Err(_) => Value::Null,
        },
        DataType::String => Value::Null,
    }
}

/// JSON for a float given as native-endian bytes of 2, 4 or 8 bytes.
fn float_to_json(b: &[u8]) -> Value {
    let (v, canonical_nan, bits, width): (f64, bool, u64, usize) = match b.len() {
        2 => {
            let bits = u16::from_ne_bytes([b[0], b[1]]);
            (
                f16::from_bits(bits).to_f64(),
                bits == NAN_F16,
                bits as u64,
                4,
            )
        }
        4 => {
            let bits = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            (f32::from_bits(bits) as f64, bits == NAN_F32, bits as u64, 8)
        }
        _ => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[..8]);
            let bits = u64::from_ne_bytes(a);
            (f64::from_bits(bits), bits == NAN_F64, bits, 16)
        }
    };
    if v.is_nan() {
        if canonical_nan {
            Value::String("NaN".into())
        } else {
            Value::String(format!("0x{bits:0width$x}"))
        }
    } else if v == f64::INFINITY {
        Value::String("Infinity".into())
    } else if v == f64::NEG_INFINITY {
        Value::String("-Infinity".into())
    } else {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

/// Parses a float fill value form into `size` native-endian bytes.
fn parse_float_bits(json: &Value, size: usize) -> Result<Vec<u8>, String> {
    let from_f64 = |v: f64| -> Vec<u8> {
        match size {
            2 => f16::from_f64(v).to_bits().to_ne_bytes().to_vec(),
            4 => (v as f32).to_ne_bytes().to_vec(),
            _ => v.to_ne_bytes().to_vec(),
        }
    };
    match json {
        Value::Number(n) => n
            .as_f64()
            .map(from_f64)
            .ok_or_else(|| "not a representable number".to_string()),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(match size {
                2 => NAN_F16.to_ne_bytes().to_vec(),
                4 => NAN_F32.to_ne_bytes().to_vec(),
                _ => NAN_F64.to_ne_bytes().to_vec(),
            }),
            "Infinity" => Ok(from_f64(f64::INFINITY)),
            "-Infinity" => Ok(from_f64(f64::NEG_INFINITY)),
            hex if hex.starts_with("0x") || hex.starts_with("0X") => {
                let digits = &hex[2..];
                if digits.is_empty() || digits.len() > size * 2 {
                    return Err(format!(
                        "hex fill value must have 1 to {} hex digits",
                        size * 2
                    ));
                }
                let bits = u64::from_str_radix(digits, 16)
                    .map_err(|_| "invalid hex digits".to_string())?;
                Ok(match size {
                    2 => (bits as u16).to_ne_bytes().to_vec(),
                    4 => (bits as u32).to_ne_bytes().to_vec(),
                    _ => bits.to_ne_bytes().to_vec(),
                })
            }
            _ => Err("string must be \"NaN\", \"Infinity\", \"-Infinity\" or \"0x…\"".into()),
        },
        _ => Err("must be a number or a string".into()),
    }
}

/// Parses a byte fill value: an array of integers in `0..=255`, or a base64 string.
fn parse_byte_fill(json: &Value) -> Result<Vec<u8>, String> {
    match json {
        Value::Array(items) => items
            .iter()
            .map(|x| {
                x.as_u64()
                    .and_then(|v| u8::try_from(v).ok())
                    .ok_or_else(|| "byte values must be integers in [0, 255]".to_string())
            })
            .collect(),
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("invalid base64: {e}")),
        _ => Err("must be an array of byte values or a base64 string".into()),
    }
}

/// Encodes `s` as NUL-padded native-endian UTF-32 code units of `length_bytes` bytes.
///
/// # Errors
/// A message when `s` has more than `length_bytes / 4` code points.
pub(crate) fn encode_utf32(s: &str, length_bytes: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(length_bytes);
    for c in s.chars() {
        out.extend_from_slice(&(c as u32).to_ne_bytes());
    }
    if out.len() > length_bytes {
        return Err(format!(
            "string {s:?} has {} code points, more than the {} that fit",
            out.len() / 4,
            length_bytes / 4
        ));
    }
    out.resize(length_bytes, 0);
    Ok(out)
}

/// Decodes NUL-padded native-endian UTF-32 code units (trailing NULs removed, as
/// numpy does).
///
/// # Errors
/// A message when a code unit is not a Unicode scalar value.
pub(crate) fn decode_utf32(b: &[u8]) -> Result<String, String> {
    let mut units: Vec<u32> = b
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    while units.last() == Some(&0) {
        units.pop();
    }
    units
        .into_iter()
        .map(|u| char::from_u32(u).ok_or_else(|| format!("invalid UTF-32 code unit {u:#x}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_core_names_roundtrip() {
        for name in [
            "bool",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "float16",
            "float32",
            "float64",
            "complex64",
            "complex128",
            "string",
            "r8",
            "r24",
        ] {
            let dt = DataType::from_json(&json!(name)).unwrap();
            assert_eq!(dt.to_json(), json!(name));
        }
        assert_eq!(
            DataType::from_json(&json!({"name": "int32"})).unwrap(),
            DataType::Int32
        );
        assert_eq!(
            DataType::from_json(&json!("r24")).unwrap().fixed_size(),
            Some(3)
        );
    }

    #[test]
    fn parse_extension_types() {
        let j = json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}});
        let dt = DataType::from_json(&j).unwrap();
        assert_eq!(dt, DataType::FixedLengthUtf32 { length_bytes: 20 });
        assert_eq!(dt.to_json(), j);
        let j = json!({"name": "raw_bytes", "configuration": {"length_bytes": 3}});
        assert_eq!(
            DataType::from_json(&j).unwrap(),
            DataType::RawBytes { length_bytes: 3 }
        );
        assert_err!(
            DataType::from_json(
                &json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}})
            ),
            crate::zarr::ZarrError::InvalidDataType { .. }
        );
    }

    #[test]
    fn bad_data_types() {
        assert!(matches!(
            DataType::from_json(&json!("float128")),
            Err(ZarrError::UnsupportedExtension { .. })
        ));
        for bad in [
            json!("r7"),
            json!("r0"),
            json!("rx"),
            json!(3),
            json!({"nam": "x"}),
        ] {
            assert!(
                matches!(
                    DataType::from_json(&bad),
                    Err(ZarrError::InvalidDataType { .. })
                ),
                "{bad}"
            );
        }
        assert_err!(
            DataType::from_json(&json!({"name": "int8", "configuration": {"a": 1}})),
            crate::zarr::ZarrError::InvalidDataType { .. }
        );
    }

    fn fv(dt: &DataType, j: Value) -> Vec<u8> {
        dt.fill_value_from_json(&j).unwrap().as_bytes().to_vec()
    }

    #[test]
    fn float_fill_forms() {
        let f32dt = DataType::Float32;
        assert_eq!(fv(&f32dt, json!(1.5)), 1.5f32.to_ne_bytes());
        assert_eq!(fv(&f32dt, json!(-2)), (-2f32).to_ne_bytes());
        assert_eq!(fv(&f32dt, json!("NaN")), 0x7fc0_0000u32.to_ne_bytes());
        assert_eq!(
            fv(&f32dt, json!("0x7fc00000")),
            0x7fc0_0000u32.to_ne_bytes()
        );
        assert_eq!(
            fv(&f32dt, json!("0x7fc00001")),
            0x7fc0_0001u32.to_ne_bytes()
        );
        assert_eq!(fv(&f32dt, json!("Infinity")), f32::INFINITY.to_ne_bytes());
        assert_eq!(
            fv(&f32dt, json!("-Infinity")),
            f32::NEG_INFINITY.to_ne_bytes()
        );
        let f64dt = DataType::Float64;
        assert_eq!(
            fv(&f64dt, json!("NaN")),
            0x7ff8_0000_0000_0000u64.to_ne_bytes()
        );
        assert_eq!(fv(&f64dt, json!(0.1)), 0.1f64.to_ne_bytes());
        let f16dt = DataType::Float16;
        assert_eq!(fv(&f16dt, json!("NaN")), 0x7e00u16.to_ne_bytes());
        assert_eq!(fv(&f16dt, json!(1.0)), 0x3c00u16.to_ne_bytes());
        assert_eq!(fv(&f16dt, json!("0x3c00")), 0x3c00u16.to_ne_bytes());
        // round trip to JSON
        for (dt, j) in [
            (&f32dt, json!("NaN")),
            (&f32dt, json!("Infinity")),
            (&f32dt, json!("-Infinity")),
            (&f32dt, json!("0x7fc00001")),
            (&f32dt, json!(1.5)),
            (&f64dt, json!("NaN")),
            (&f64dt, json!(-0.25)),
            (&f16dt, json!("NaN")),
            (&f16dt, json!(2.0)),
        ] {
            let parsed = dt.fill_value_from_json(&j).unwrap();
            assert_eq!(dt.fill_value_to_json(&parsed).unwrap(), j);
        }
        for bad in [
            json!("nan"),
            json!("0x"),
            json!("0x123456789"),
            json!(null),
            json!(true),
            json!([1]),
        ] {
            assert!(matches!(
                f32dt.fill_value_from_json(&bad),
                Err(ZarrError::InvalidFillValue { .. })
            ));
        }
    }

    #[test]
    fn int_bool_fill_forms() {
        assert_eq!(fv(&DataType::Int8, json!(-128)), [0x80]);
        assert_eq!(
            fv(&DataType::UInt64, json!(u64::MAX)),
            u64::MAX.to_ne_bytes()
        );
        assert_eq!(
            fv(&DataType::Int64, json!(i64::MIN)),
            i64::MIN.to_ne_bytes()
        );
        assert_eq!(fv(&DataType::Bool, json!(true)), [1]);
        assert_eq!(fv(&DataType::Bool, json!(false)), [0]);
        for (dt, bad) in [
            (DataType::Int8, json!(128)),
            (DataType::UInt8, json!(-1)),
            (DataType::Int32, json!(1.5)),
            (DataType::Int32, json!(1.0)),
            (DataType::Int32, json!("1")),
            (DataType::Bool, json!(1)),
            (DataType::UInt16, json!(null)),
        ] {
            assert!(
                matches!(
                    dt.fill_value_from_json(&bad),
                    Err(ZarrError::InvalidFillValue { .. })
                ),
                "{dt} {bad}"
            );
        }
        let dt = DataType::Int16;
        let f = dt.fill_value_from_json(&json!(-300)).unwrap();
        assert_eq!(dt.fill_value_to_json(&f).unwrap(), json!(-300));
    }

    #[test]
    fn complex_raw_string_fill_forms() {
        let c = DataType::Complex64;
        let mut expected = 1f32.to_ne_bytes().to_vec();
        expected.extend_from_slice(&0x7fc0_0000u32.to_ne_bytes());
        assert_eq!(fv(&c, json!([1.0, "NaN"])), expected);
        let f = c.fill_value_from_json(&json!(["-Infinity", 2.5])).unwrap();
        assert_eq!(c.fill_value_to_json(&f).unwrap(), json!(["-Infinity", 2.5]));
        assert_err!(
            c.fill_value_from_json(&json!([1.0])),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );
        assert_err!(
            c.fill_value_from_json(&json!(1.0)),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );

        let r = DataType::RawBits { bytes: 2 };
        assert_eq!(fv(&r, json!([1, 255])), [1, 255]);
        assert_eq!(
            r.fill_value_to_json(&FillValue::Bytes(vec![1, 255]))
                .unwrap(),
            json!([1, 255])
        );
        assert_err!(
            r.fill_value_from_json(&json!([1, 256])),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );
        assert_err!(
            r.fill_value_from_json(&json!([1, 2, 3])),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );

        let rb = DataType::RawBytes { length_bytes: 3 };
        assert_eq!(fv(&rb, json!("AAAA")), [0, 0, 0]);
        assert_eq!(
            rb.fill_value_to_json(&FillValue::Bytes(vec![0, 0, 0]))
                .unwrap(),
            json!("AAAA")
        );

        let s = DataType::String;
        assert_eq!(
            s.fill_value_from_json(&json!("ab")).unwrap(),
            FillValue::String("ab".into())
        );
        assert_err!(
            s.fill_value_from_json(&json!(1)),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );
        let u = DataType::FixedLengthUtf32 { length_bytes: 8 };
        let f = u.fill_value_from_json(&json!("é")).unwrap();
        assert_eq!(f.as_bytes().len(), 8);
        assert_eq!(u.fill_value_to_json(&f).unwrap(), json!("é"));
        assert_err!(
            u.fill_value_from_json(&json!("abc")),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );
    }
}
