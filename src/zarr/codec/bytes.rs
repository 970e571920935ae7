//! The `bytes` codec (`../shared/specs/zarr/v3/codecs/bytes`): encodes fixed-size
//! elements in C order with the configured endianness.

use serde_json::{json, Value};

use crate::zarr::array_bytes::{swap_endian, ArrayBytes};
use crate::zarr::codec::{check_data, ArrayToBytesCodec, ChunkRepr, Config};
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "bytes";

/// Byte order of multi-byte elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl Endian {
    /// The byte order of this machine.
    pub fn native() -> Endian {
        if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Endian::Little => "little",
            Endian::Big => "big",
        }
    }
}

/// The `bytes` codec. `endian` is required for multi-byte data types and may be
/// absent for single-byte ones (bytes codec spec, "Configuration parameters").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BytesCodec {
    endian: Option<Endian>,
}

impl BytesCodec {
    /// A `bytes` codec with the given endianness (`None` only for 1-byte types).
    pub fn new(endian: Option<Endian>) -> Self {
        BytesCodec { endian }
    }

    /// A little-endian `bytes` codec.
    pub fn little() -> Self {
        BytesCodec::new(Some(Endian::Little))
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["endian"])?;
        let endian = match cfg.str("endian")? {
            None => None,
            Some("little") => Some(Endian::Little),
            Some("big") => Some(Endian::Big),
            Some(other) => {
                return Err(cfg.err(format!(
                    "endian must be \"little\" or \"big\", not {other:?}"
                )))
            }
        };
        Ok(BytesCodec { endian })
    }

    fn needs_swap(&self, repr: &ChunkRepr) -> bool {
        repr.data_type.needs_endian() && self.endian.is_some_and(|e| e != Endian::native())
    }
}

impl ArrayToBytesCodec for BytesCodec {
    fn to_json(&self) -> Value {
        match self.endian {
            Some(e) => json!({"name": NAME, "configuration": {"endian": e.as_str()}}),
            None => json!({"name": NAME}),
        }
    }

    fn validate(&self, repr: &ChunkRepr) -> Result<(), CodecError> {
        if repr.data_type.fixed_size().is_none() {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "data type {} has no fixed size (use vlen-utf8)",
                    repr.data_type
                ),
            ));
        }
        if repr.data_type.needs_endian() && self.endian.is_none() {
            return Err(CodecError::unsupported(
                NAME,
                format!("`endian` is required for data type {}", repr.data_type),
            ));
        }
        Ok(())
    }

    fn keeps_native_bytes(&self, repr: &ChunkRepr) -> bool {
        self.validate(repr).is_ok() && !self.needs_swap(repr)
    }

    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.validate(repr)?;
        check_data(NAME, &data, repr)?;
        match data {
            ArrayBytes::Fixed(mut b) => {
                if self.needs_swap(repr) {
                    swap_endian(&mut b, repr.data_type.endian_unit());
                }
                Ok(b)
            }
            ArrayBytes::Strings(_) => Err(CodecError::unsupported(NAME, "string data")),
        }
    }

    fn decode(&self, bytes: ::bytes::Bytes, repr: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        self.validate(repr)?;
        let expected = repr.size_bytes().unwrap_or(0);
        if bytes.len() as u64 != expected {
            return Err(CodecError::invalid(
                NAME,
                format!("expected {expected} bytes, got {}", bytes.len()),
            ));
        }
        // Taken over without a copy when the bytes own their whole buffer; copied
        // into a recycled buffer otherwise.
        let mut b = match bytes.try_into_mut() {
            Ok(owned) => Vec::from(owned),
            Err(shared) => crate::buffer_pool::copy_of(&shared),
        };
        if self.needs_swap(repr) {
            swap_endian(&mut b, repr.data_type.endian_unit());
        }
        Ok(ArrayBytes::Fixed(b))
    }

    fn encoded_size(&self, repr: &ChunkRepr) -> Option<u64> {
        repr.size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::data_type::DataType;

    fn repr(dt: DataType, n: u64) -> ChunkRepr {
        ChunkRepr {
            shape: vec![n],
            fill_value: dt.default_fill_value(),
            data_type: dt,
        }
    }

    #[test]
    fn known_bytes() {
        // numpy: np.array([1, 256], dtype='>i2').tobytes() == b'\x00\x01\x01\x00'
        let r = repr(DataType::Int16, 2);
        let data: Vec<u8> = [1i16, 256].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let big = BytesCodec::new(Some(Endian::Big));
        assert_eq!(
            big.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap(),
            vec![0, 1, 1, 0]
        );
        let little = BytesCodec::little();
        assert_eq!(
            little.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap(),
            vec![1, 0, 0, 1]
        );
        assert_eq!(
            big.decode(vec![0, 1, 1, 0].into(), &r).unwrap(),
            ArrayBytes::Fixed(data)
        );
        // complex64 swaps each component separately
        let c = repr(DataType::Complex64, 1);
        let v: Vec<u8> = [1f32, 2f32].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let enc = big.encode(ArrayBytes::Fixed(v), &c).unwrap();
        assert_eq!(enc, vec![0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]);
    }

    #[test]
    fn errors() {
        let r = repr(DataType::Int32, 2);
        assert_err!(
            BytesCodec::little().decode(vec![0u8; 7].into(), &r),
            crate::zarr::CodecError::InvalidData { .. }
        );
        assert_err!(
            BytesCodec::new(None).validate(&r),
            crate::zarr::CodecError::Unsupported { .. }
        );
        assert!(BytesCodec::new(None)
            .validate(&repr(DataType::Bool, 2))
            .is_ok());
        assert_err!(
            BytesCodec::little().validate(&repr(DataType::String, 2)),
            crate::zarr::CodecError::Unsupported { .. }
        );
        assert_err!(
            BytesCodec::little().encode(ArrayBytes::Fixed(vec![0; 4]), &r),
            crate::zarr::CodecError::InvalidData { .. }
        );
    }
}
