//! The `transpose` codec (`../shared/specs/zarr/v3/codecs/transpose`): permutes the
//! dimensions of the chunk array.

use serde_json::{json, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::{check_data, ArrayToArrayCodec, ChunkRepr, Config};
use crate::zarr::error::{CodecError, ZarrResult};

const NAME: &str = "transpose";

/// The `transpose` codec with permutation `order`: the encoded array `B` has
/// `B_shape[i] = A_shape[order[i]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposeCodec {
    order: Vec<usize>,
}

impl TransposeCodec {
    /// A transpose codec.
    ///
    /// # Errors
    /// [`crate::zarr::ZarrError::InvalidCodec`] when `order` is not a permutation of
    /// `0..n`.
    pub fn new(order: Vec<usize>) -> ZarrResult<Self> {
        let map = serde_json::Map::new();
        let cfg = Config::new(NAME, &map);
        let mut seen = vec![false; order.len()];
        for &o in &order {
            if o >= order.len() || seen[o] {
                return Err(cfg.err(format!("order {order:?} is not a permutation")));
            }
            seen[o] = true;
        }
        Ok(TransposeCodec { order })
    }

    /// The permutation.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    pub(crate) fn from_config(cfg: &Config) -> ZarrResult<Self> {
        cfg.only(&["order"])?;
        let order = cfg
            .get("order")
            .and_then(Value::as_array)
            .ok_or_else(|| cfg.err("`order` must be an array of integers"))?
            .iter()
            .map(|v| {
                v.as_u64()
                    .map(|x| x as usize)
                    .ok_or_else(|| cfg.err("`order` must be an array of integers"))
            })
            .collect::<ZarrResult<Vec<usize>>>()?;
        TransposeCodec::new(order)
    }

    fn inverse(&self) -> Vec<usize> {
        let mut inv = vec![0; self.order.len()];
        for (i, &o) in self.order.iter().enumerate() {
            inv[o] = i;
        }
        inv
    }
}

/// Permutes a C-order array of `T` with shape `shape`: output dimension `i` is input
/// dimension `order[i]`.
fn permute<T: Clone>(src: &[T], shape: &[usize], order: &[usize]) -> Vec<T> {
    let n = src.len();
    let ndim = shape.len();
    if ndim <= 1 || n == 0 {
        return src.to_vec();
    }
    let mut in_strides = vec![1usize; ndim];
    for d in (0..ndim - 1).rev() {
        in_strides[d] = in_strides[d + 1] * shape[d + 1];
    }
    let out_shape: Vec<usize> = order.iter().map(|&o| shape[o]).collect();
    let strides: Vec<usize> = order.iter().map(|&o| in_strides[o]).collect();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; ndim];
    let last = ndim - 1;
    let (last_len, last_stride) = (out_shape[last], strides[last]);
    let mut base = 0usize;
    loop {
        let mut off = base;
        for _ in 0..last_len {
            out.push(src[off].clone());
            off += last_stride;
        }
        // advance the outer dimensions
        let mut d = last;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            base += strides[d];
            if idx[d] < out_shape[d] {
                break;
            }
            base -= strides[d] * idx[d];
            idx[d] = 0;
        }
    }
}

fn permute_bytes(src: &[u8], shape: &[usize], order: &[usize], size: usize) -> Vec<u8> {
    macro_rules! typed {
        ($n:literal) => {{
            let s: &[[u8; $n]] = bytemuck::cast_slice(src);
            let out = permute(s, shape, order);
            bytemuck::cast_slice::<[u8; $n], u8>(&out).to_vec()
        }};
    }
    match size {
        1 => permute(src, shape, order),
        2 => typed!(2),
        4 => typed!(4),
        8 => typed!(8),
        16 => typed!(16),
        0 => Vec::new(),
        _ => {
            let elems: Vec<&[u8]> = src.chunks_exact(size).collect();
            permute(&elems, shape, order).concat()
        }
    }
}

fn apply(data: ArrayBytes, shape: &[u64], order: &[usize], size: Option<usize>) -> ArrayBytes {
    let shape: Vec<usize> = shape.iter().map(|&x| x as usize).collect();
    match data {
        ArrayBytes::Fixed(b) => {
            ArrayBytes::Fixed(permute_bytes(&b, &shape, order, size.unwrap_or(0)))
        }
        ArrayBytes::Strings(v) => ArrayBytes::Strings(permute(&v, &shape, order)),
    }
}

impl ArrayToArrayCodec for TransposeCodec {
    fn to_json(&self) -> Value {
        json!({"name": NAME, "configuration": {"order": self.order}})
    }

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        if decoded.shape.len() != self.order.len() {
            return Err(CodecError::unsupported(
                NAME,
                format!(
                    "order {:?} has {} entries but the chunk has {} dimensions",
                    self.order,
                    self.order.len(),
                    decoded.shape.len()
                ),
            ));
        }
        let mut r = decoded.clone();
        r.shape = self.order.iter().map(|&o| decoded.shape[o]).collect();
        Ok(r)
    }

    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        self.encoded_repr(decoded)?;
        check_data(NAME, &data, decoded)?;
        Ok(apply(
            data,
            &decoded.shape,
            &self.order,
            decoded.data_type.fixed_size(),
        ))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes, CodecError> {
        let enc = self.encoded_repr(decoded)?;
        check_data(NAME, &data, &enc)?;
        Ok(apply(
            data,
            &enc.shape,
            &self.inverse(),
            decoded.data_type.fixed_size(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::data_type::DataType;

    #[test]
    fn permute_matches_definition() {
        // A: shape [2,3,4], values 0..24; order [2,0,1] -> B shape [4,2,3],
        // B[i,j,k] = A[j,k,i]
        let a: Vec<u32> = (0..24).collect();
        let b = permute(&a, &[2, 3, 4], &[2, 0, 1]);
        for i in 0..4 {
            for j in 0..2 {
                for k in 0..3 {
                    assert_eq!(b[i * 6 + j * 3 + k], a[j * 12 + k * 4 + i]);
                }
            }
        }
        // 2-d transpose equals numpy .T
        assert_eq!(
            permute(&[0, 1, 2, 3, 4, 5], &[2, 3], &[1, 0]),
            vec![0, 3, 1, 4, 2, 5]
        );
    }

    #[test]
    fn codec_roundtrip_and_errors() {
        let c = TransposeCodec::new(vec![1, 2, 0]).unwrap();
        let r = ChunkRepr {
            shape: vec![2, 3, 5],
            data_type: DataType::Float64,
            fill_value: DataType::Float64.default_fill_value(),
        };
        assert_eq!(c.encoded_repr(&r).unwrap().shape, vec![3, 5, 2]);
        let data: Vec<u8> = (0..30).flat_map(|v| (v as f64).to_ne_bytes()).collect();
        let enc = c.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap();
        assert_ne!(enc, ArrayBytes::Fixed(data.clone()));
        assert_eq!(c.decode(enc, &r).unwrap(), ArrayBytes::Fixed(data));
        assert_err!(
            TransposeCodec::new(vec![0, 0]),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        assert_err!(
            TransposeCodec::new(vec![2, 0]),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let r2 = ChunkRepr {
            shape: vec![2, 3],
            ..r
        };
        assert_err!(
            c.encoded_repr(&r2),
            crate::zarr::CodecError::Unsupported { .. }
        );
    }
}
