//! Rust element types of Zarr arrays.
//!
//! [`Element`] maps a Rust type to the data types it can represent and converts
//! between `Vec<T>` and the decoded representation [`ArrayBytes`]. A mismatch between
//! `T` and an array's data type is a typed error ([`ZarrError::ElementType`]), never a
//! reinterpretation of bytes.
//!
//! | Rust type | data types |
//! |---|---|
//! | `bool` | `bool` |
//! | `i8`..`i64`, `u8`..`u64` | `int8`..`int64`, `uint8`..`uint64` |
//! | `half::f16`, `f32`, `f64` | `float16`, `float32`, `float64` |
//! | `Complex<f32>`, `Complex<f64>` | `complex64`, `complex128` |
//! | `String` | `string`, `fixed_length_utf32` |
//! | `Vec<u8>` | `r<N>`, `raw_bytes`, `null_terminated_bytes` (any length) |
//! | `[u8; N]` | `r<8N>`, `raw_bytes`/`null_terminated_bytes` of `N` bytes |

use half::f16;
use num_complex::Complex;

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::data_type::{encode_utf32, DataType};
use crate::zarr::error::{ZarrError, ZarrResult};

/// A Rust type usable as the element type of a Zarr array.
pub trait Element: Sized + Clone + Send + Sync + 'static {
    /// The Rust type's name, for error messages.
    const RUST_TYPE: &'static str;

    /// Whether values of this type can represent data type `dt` exactly.
    fn matches(dt: &DataType) -> bool;

    /// Converts values (C order) into the decoded representation of `dt`.
    ///
    /// # Errors
    /// [`ZarrError::InvalidValue`] when a value does not fit `dt` (e.g. a string that
    /// is too long for `fixed_length_utf32`, a raw value of the wrong length);
    /// callers check [`Element::matches`] first.
    fn to_array_bytes(values: &[Self], dt: &DataType) -> ZarrResult<ArrayBytes>;

    /// Converts the decoded representation of `dt` into values.
    ///
    /// # Errors
    /// [`ZarrError::InvalidValue`] for bytes that are not a valid value (invalid
    /// UTF-32) or a representation that does not match `dt`.
    fn from_array_bytes(bytes: ArrayBytes, dt: &DataType) -> ZarrResult<Vec<Self>>;

    /// The values' memory as native-endian element bytes, when that is exactly the
    /// decoded representation (plain numbers, `[u8; N]`); lets reads and writes skip
    /// a conversion copy. `None` (the default) means "convert".
    fn as_fixed_bytes(_values: &[Self]) -> Option<&[u8]> {
        None
    }

    /// Mutable counterpart of [`Element::as_fixed_bytes`].
    fn as_fixed_bytes_mut(_values: &mut [Self]) -> Option<&mut [u8]> {
        None
    }
}

fn repr_error(dt: &DataType) -> ZarrError {
    ZarrError::InvalidValue {
        data_type: dt.name(),
        reason: "decoded representation does not match the data type".into(),
    }
}

macro_rules! pod_element {
    ($t:ty, $name:expr, $($dt:pat),+) => {
        impl Element for $t {
            const RUST_TYPE: &'static str = $name;
            fn matches(dt: &DataType) -> bool {
                matches!(dt, $($dt)|+)
            }
            fn to_array_bytes(values: &[Self], _dt: &DataType) -> ZarrResult<ArrayBytes> {
                Ok(ArrayBytes::Fixed(bytemuck::cast_slice::<$t, u8>(values).to_vec()))
            }
            fn from_array_bytes(bytes: ArrayBytes, dt: &DataType) -> ZarrResult<Vec<Self>> {
                match bytes {
                    ArrayBytes::Fixed(b) if b.len() % std::mem::size_of::<$t>() == 0 => {
                        Ok(bytemuck::pod_collect_to_vec::<u8, $t>(&b))
                    }
                    _ => Err(repr_error(dt)),
                }
            }
            fn as_fixed_bytes(values: &[Self]) -> Option<&[u8]> {
                Some(bytemuck::cast_slice(values))
            }
            fn as_fixed_bytes_mut(values: &mut [Self]) -> Option<&mut [u8]> {
                Some(bytemuck::cast_slice_mut(values))
            }
        }
    };
}

pod_element!(i8, "i8", DataType::Int8);
pod_element!(i16, "i16", DataType::Int16);
pod_element!(i32, "i32", DataType::Int32);
pod_element!(i64, "i64", DataType::Int64);
pod_element!(u8, "u8", DataType::UInt8);
pod_element!(u16, "u16", DataType::UInt16);
pod_element!(u32, "u32", DataType::UInt32);
pod_element!(u64, "u64", DataType::UInt64);
pod_element!(f16, "half::f16", DataType::Float16);
pod_element!(f32, "f32", DataType::Float32);
pod_element!(f64, "f64", DataType::Float64);
pod_element!(Complex<f32>, "Complex<f32>", DataType::Complex64);
pod_element!(Complex<f64>, "Complex<f64>", DataType::Complex128);

impl Element for bool {
    const RUST_TYPE: &'static str = "bool";
    fn matches(dt: &DataType) -> bool {
        matches!(dt, DataType::Bool)
    }
    fn to_array_bytes(values: &[Self], _dt: &DataType) -> ZarrResult<ArrayBytes> {
        Ok(ArrayBytes::Fixed(
            values.iter().map(|&b| u8::from(b)).collect(),
        ))
    }
    fn from_array_bytes(bytes: ArrayBytes, dt: &DataType) -> ZarrResult<Vec<Self>> {
        match bytes {
            ArrayBytes::Fixed(b) => Ok(b.into_iter().map(|x| x != 0).collect()),
            ArrayBytes::Strings(_) => Err(repr_error(dt)),
        }
    }
}

impl Element for String {
    const RUST_TYPE: &'static str = "String";
    fn matches(dt: &DataType) -> bool {
        matches!(dt, DataType::String | DataType::FixedLengthUtf32 { .. })
    }
    fn to_array_bytes(values: &[Self], dt: &DataType) -> ZarrResult<ArrayBytes> {
        match dt {
            DataType::FixedLengthUtf32 { length_bytes } => {
                let mut out = Vec::with_capacity(values.len() * length_bytes);
                for s in values {
                    let enc = encode_utf32(s, *length_bytes).map_err(|reason| {
                        ZarrError::InvalidValue {
                            data_type: dt.name(),
                            reason,
                        }
                    })?;
                    out.extend_from_slice(&enc);
                }
                Ok(ArrayBytes::Fixed(out))
            }
            _ => Ok(ArrayBytes::Strings(values.to_vec())),
        }
    }
    fn from_array_bytes(bytes: ArrayBytes, dt: &DataType) -> ZarrResult<Vec<Self>> {
        match (bytes, dt) {
            (ArrayBytes::Strings(v), DataType::String) => Ok(v),
            (fixed @ ArrayBytes::Fixed(_), DataType::FixedLengthUtf32 { .. }) => {
                fixed.to_strings(dt)
            }
            _ => Err(repr_error(dt)),
        }
    }
}

fn raw_size(dt: &DataType) -> Option<usize> {
    match dt {
        DataType::RawBits { bytes } => Some(*bytes),
        DataType::RawBytes { length_bytes } | DataType::NullTerminatedBytes { length_bytes } => {
            Some(*length_bytes)
        }
        _ => None,
    }
}

impl Element for Vec<u8> {
    const RUST_TYPE: &'static str = "Vec<u8>";
    fn matches(dt: &DataType) -> bool {
        raw_size(dt).is_some()
    }
    fn to_array_bytes(values: &[Self], dt: &DataType) -> ZarrResult<ArrayBytes> {
        let size = raw_size(dt).ok_or_else(|| repr_error(dt))?;
        let padded = matches!(dt, DataType::NullTerminatedBytes { .. });
        let mut out = Vec::with_capacity(values.len() * size);
        for v in values {
            if v.len() == size || (padded && v.len() < size) {
                out.extend_from_slice(v);
                out.resize(out.len() + size - v.len(), 0);
            } else {
                return Err(ZarrError::InvalidValue {
                    data_type: dt.name(),
                    reason: format!("value has {} bytes, expected {size}", v.len()),
                });
            }
        }
        Ok(ArrayBytes::Fixed(out))
    }
    fn from_array_bytes(bytes: ArrayBytes, dt: &DataType) -> ZarrResult<Vec<Self>> {
        let size = raw_size(dt).ok_or_else(|| repr_error(dt))?;
        let strip = matches!(dt, DataType::NullTerminatedBytes { .. });
        match bytes {
            ArrayBytes::Fixed(b) if size > 0 => Ok(b
                .chunks_exact(size)
                .map(|c| {
                    let mut v = c.to_vec();
                    if strip {
                        while v.last() == Some(&0) {
                            v.pop();
                        }
                    }
                    v
                })
                .collect()),
            ArrayBytes::Fixed(_) => Ok(Vec::new()),
            ArrayBytes::Strings(_) => Err(repr_error(dt)),
        }
    }
}

impl<const N: usize> Element for [u8; N] {
    const RUST_TYPE: &'static str = "[u8; N]";
    fn matches(dt: &DataType) -> bool {
        raw_size(dt) == Some(N)
    }
    fn to_array_bytes(values: &[Self], _dt: &DataType) -> ZarrResult<ArrayBytes> {
        Ok(ArrayBytes::Fixed(values.concat()))
    }
    fn from_array_bytes(bytes: ArrayBytes, dt: &DataType) -> ZarrResult<Vec<Self>> {
        match bytes {
            ArrayBytes::Fixed(b) if N > 0 => Ok(b
                .chunks_exact(N)
                .map(|c| {
                    let mut a = [0u8; N];
                    a.copy_from_slice(c);
                    a
                })
                .collect()),
            ArrayBytes::Fixed(_) => Ok(Vec::new()),
            ArrayBytes::Strings(_) => Err(repr_error(dt)),
        }
    }
    fn as_fixed_bytes(values: &[Self]) -> Option<&[u8]> {
        Some(values.as_flattened())
    }
    fn as_fixed_bytes_mut(values: &mut [Self]) -> Option<&mut [u8]> {
        Some(values.as_flattened_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_roundtrip_and_matching() {
        let v = vec![1.5f32, -2.0, f32::NAN];
        let b = f32::to_array_bytes(&v, &DataType::Float32).unwrap();
        let back = f32::from_array_bytes(b, &DataType::Float32).unwrap();
        assert_eq!(back[..2], v[..2]);
        assert!(back[2].is_nan());
        assert!(f32::matches(&DataType::Float32));
        assert!(!f32::matches(&DataType::Float64));
        assert!(!i32::matches(&DataType::UInt32));
        let c = vec![Complex::new(1.0f64, -1.0)];
        let b = Complex::<f64>::to_array_bytes(&c, &DataType::Complex128).unwrap();
        assert_eq!(
            Complex::<f64>::from_array_bytes(b, &DataType::Complex128).unwrap(),
            c
        );
    }

    #[test]
    fn strings_and_raw() {
        let dt = DataType::FixedLengthUtf32 { length_bytes: 8 };
        let v = vec!["ab".to_string(), "".to_string(), "é".to_string()];
        let b = String::to_array_bytes(&v, &dt).unwrap();
        assert_eq!(b.num_elements(Some(8)), 3);
        assert_eq!(String::from_array_bytes(b, &dt).unwrap(), v);
        assert_err!(
            String::to_array_bytes(&["abc".to_string()], &dt),
            crate::zarr::ZarrError::InvalidValue { .. }
        );

        let raw = DataType::RawBits { bytes: 2 };
        assert_err!(
            Vec::<u8>::to_array_bytes(&[vec![1, 2, 3]], &raw),
            crate::zarr::ZarrError::InvalidValue { .. }
        );
        let b = Vec::<u8>::to_array_bytes(&[vec![1, 2]], &raw).unwrap();
        assert_eq!(<[u8; 2]>::from_array_bytes(b, &raw).unwrap(), vec![[1, 2]]);
        assert!(<[u8; 3]>::matches(&DataType::RawBytes { length_bytes: 3 }));
        let nt = DataType::NullTerminatedBytes { length_bytes: 4 };
        let b = Vec::<u8>::to_array_bytes(&[b"ab".to_vec()], &nt).unwrap();
        assert_eq!(b, ArrayBytes::Fixed(b"ab\0\0".to_vec()));
        assert_eq!(
            Vec::<u8>::from_array_bytes(b, &nt).unwrap(),
            vec![b"ab".to_vec()]
        );
    }
}
