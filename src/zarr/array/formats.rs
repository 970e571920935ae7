//! A region of an array as portable values: raw little-endian bytes of the data type
//! in C order, or JSON. `floe cat`'s `raw` and `json` formats, and the form tests and
//! other programs compare values in, whatever the array's codecs and byte order. An
//! extension trait beside the array type, which itself reads decoded elements
//! ([`ArrayBytes`](crate::zarr::ArrayBytes)).

use async_trait::async_trait;
use serde_json::Value;

use crate::zarr::{Array, ArraySubset, DataType, ZarrError, ZarrResult};

/// Reads a region of an array as little-endian bytes or as JSON (`floe cat`'s `raw`
/// and `json` formats).
#[async_trait]
pub trait RegionFormats {
    /// Reads `region` as raw little-endian bytes of the data type in C order (the
    /// CLI's raw output): `n * element size` bytes; complex numbers as (re, im),
    /// `fixed_length_utf32` as UTF-32LE code units, raw types verbatim.
    ///
    /// # Errors
    /// [`ZarrError::InvalidValue`] for the variable-length `string` data type;
    /// otherwise as [`Array::read_region_bytes`].
    async fn read_region_le_bytes(&self, region: &ArraySubset) -> ZarrResult<Vec<u8>>;

    /// Reads `region` as JSON: nested lists following `region.shape` (a scalar for
    /// 0-d regions). Numbers for integers and finite floats, `"NaN"`, `"Infinity"`,
    /// `"-Infinity"` for non-finite floats, `[re, im]` for complex, booleans, strings
    /// for string types, byte lists (`r<N>`) or base64 strings (`raw_bytes`,
    /// `null_terminated_bytes`).
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when the region has more elements than one JSON value
    /// can hold in memory; otherwise as [`Array::read_region_bytes`].
    async fn read_region_json(&self, region: &ArraySubset) -> ZarrResult<Value>;
}

#[async_trait]
impl RegionFormats for Array {
    async fn read_region_le_bytes(&self, region: &ArraySubset) -> ZarrResult<Vec<u8>> {
        if *self.data_type() == DataType::String {
            return Err(ZarrError::InvalidValue {
                data_type: self.data_type().name(),
                reason: "variable-length strings have no raw byte representation".into(),
            });
        }
        let data = self.read_region_bytes(region).await?;
        data.into_le_bytes(self.data_type())
    }

    async fn read_region_json(&self, region: &ArraySubset) -> ZarrResult<Value> {
        let fits = region
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(std::mem::size_of::<Value>()))
            .is_some_and(|b| b <= isize::MAX as usize);
        if !fits {
            return Err(ZarrError::TooLarge {
                path: self.path().to_string(),
                reason: format!(
                    "region of shape {:?} has too many elements for one JSON value",
                    region.shape
                ),
            });
        }
        let data = self.read_region_bytes(region).await?;
        Ok(data.to_json(self.data_type(), &region.shape))
    }
}
