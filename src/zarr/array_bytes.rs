//! The decoded, in-memory representation of a chunk or region.
//!
//! This is the "array" side of the codec pipeline (core spec, section "Codecs"): a
//! C-order sequence of elements. Fixed-size data types are held as one contiguous
//! buffer of native-endian element bytes (no per-element boxing); `string` elements
//! as Rust strings.

use serde_json::Value;

use crate::zarr::data_type::{decode_utf32, element_to_json, DataType, FillValue};
use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::subset::{copy_region, copy_region_bytes, to_usize, ArraySubset};

/// Decoded elements in C order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArrayBytes {
    /// Native-endian bytes of fixed-size elements (`len = n * element size`).
    Fixed(Vec<u8>),
    /// Variable-length strings (data type `string`).
    Strings(Vec<String>),
}

impl ArrayBytes {
    /// `num_elements` copies of `fill` for data type `dt`.
    ///
    /// # Errors
    /// [`ZarrError::InvalidFillValue`] when `fill` does not match `dt`;
    /// [`ZarrError::TooLarge`] when `num_elements` elements exceed `isize::MAX` bytes
    /// (the buffer could never be allocated).
    pub fn new_fill(num_elements: usize, dt: &DataType, fill: &FillValue) -> ZarrResult<Self> {
        let per = dt.fixed_size().unwrap_or(std::mem::size_of::<String>());
        if num_elements
            .checked_mul(per)
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(ZarrError::TooLarge {
                path: String::new(),
                reason: format!("{num_elements} elements of {dt} do not fit in memory"),
            });
        }
        let too_large = || ZarrError::TooLarge {
            path: String::new(),
            reason: format!("cannot allocate {num_elements} elements of {dt}"),
        };
        match (dt.fixed_size(), fill) {
            (None, FillValue::String(s)) => Ok(ArrayBytes::Strings(
                try_filled_vec(num_elements, s.clone()).ok_or_else(too_large)?,
            )),
            (Some(size), FillValue::Bytes(b)) if b.len() == size => {
                let mut v = try_filled_vec(num_elements * size, 0u8).ok_or_else(too_large)?;
                if b.iter().any(|&x| x != 0) {
                    fill_repeated(&mut v, b);
                }
                Ok(ArrayBytes::Fixed(v))
            }
            _ => Err(ZarrError::InvalidFillValue {
                value: format!("{fill:?}"),
                data_type: dt.name(),
                reason: "fill value does not match the data type".into(),
            }),
        }
    }

    /// Number of elements, given the element size (`None` for strings).
    pub fn num_elements(&self, elem_size: Option<usize>) -> usize {
        match (self, elem_size) {
            (ArrayBytes::Fixed(b), Some(s)) if s > 0 => b.len() / s,
            (ArrayBytes::Fixed(_), _) => 0,
            (ArrayBytes::Strings(v), _) => v.len(),
        }
    }

    /// Checks that this holds `n` elements of data type `dt`; returns the count found.
    ///
    /// # Errors
    /// `Err(found)` with the number of elements found on a mismatch (including a
    /// representation that does not match the data type).
    pub fn check_len(&self, dt: &DataType, n: u64) -> Result<(), u64> {
        self.as_view().check_len(dt, n)
    }

    /// Whether every element equals `fill` (bitwise for fixed-size types).
    pub fn is_fill(&self, fill: &FillValue) -> bool {
        self.as_view().is_fill(fill)
    }

    /// Extracts `region` (relative to this buffer) from a buffer of shape `shape`.
    pub fn extract(&self, dt: &DataType, shape: &[u64], region: &ArraySubset) -> ArrayBytes {
        if region.is_full(shape) {
            return self.clone();
        }
        self.as_view().extract(dt, shape, region)
    }

    /// A borrowed view of the elements.
    pub fn as_view(&self) -> ElemsRef<'_> {
        match self {
            ArrayBytes::Fixed(b) => ElemsRef::Fixed(b),
            ArrayBytes::Strings(v) => ElemsRef::Strings(v),
        }
    }

    /// A mutable borrowed view of the elements.
    pub fn as_view_mut(&mut self) -> ElemsMut<'_> {
        match self {
            ArrayBytes::Fixed(b) => ElemsMut::Fixed(b),
            ArrayBytes::Strings(v) => ElemsMut::Strings(v),
        }
    }

    /// Copies `region_shape` elements from `src` (shape `src_shape`, starting at
    /// `src_start`) into `self` (shape `shape`) at `dst_start`.
    ///
    /// Representations must match (checked by callers); mismatches copy nothing.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_from(
        &mut self,
        shape: &[u64],
        dst_start: &[u64],
        src: &ArrayBytes,
        src_shape: &[u64],
        src_start: &[u64],
        region_shape: &[u64],
        elem_size: usize,
    ) {
        self.as_view_mut().copy_from(
            shape,
            dst_start,
            src.as_view(),
            src_shape,
            src_start,
            region_shape,
            elem_size,
        )
    }

    /// The elements as little-endian bytes in C order (the raw format of the CLI's
    /// `cat --format raw`): fixed-size types byte-swapped per
    /// [`DataType::endian_unit`] on big-endian hosts.
    ///
    /// # Errors
    /// [`ZarrError::InvalidValue`] for `string` data (no fixed-size encoding).
    pub fn into_le_bytes(self, dt: &DataType) -> ZarrResult<Vec<u8>> {
        match self {
            ArrayBytes::Fixed(mut b) => {
                if cfg!(target_endian = "big") {
                    swap_endian(&mut b, dt.endian_unit());
                }
                Ok(b)
            }
            ArrayBytes::Strings(_) => Err(ZarrError::InvalidValue {
                data_type: dt.name(),
                reason: "variable-length strings have no raw byte representation".into(),
            }),
        }
    }

    /// The elements as a JSON value of nested lists following `shape` (a scalar for
    /// 0-d). Element conventions: see [`element_to_json`]; strings are JSON strings.
    pub fn to_json(&self, dt: &DataType, shape: &[u64]) -> Value {
        let flat: Vec<Value> = match self {
            ArrayBytes::Strings(v) => v.iter().map(|s| Value::String(s.clone())).collect(),
            ArrayBytes::Fixed(b) => match dt.fixed_size() {
                Some(s) if s > 0 => b.chunks_exact(s).map(|e| element_to_json(dt, e)).collect(),
                // Zero-sized elements: one per position of `shape` (callers size
                // regions before reading; the count saturates rather than wraps).
                _ => vec![
                    element_to_json(dt, &[]);
                    usize::try_from(crate::zarr::subset::saturating_product(shape))
                        .unwrap_or(usize::MAX)
                ],
            },
        };
        nest(flat, shape)
    }

    /// Elements as strings for the string data types (`string`,
    /// `fixed_length_utf32`).
    ///
    /// # Errors
    /// [`ZarrError::InvalidValue`] for invalid UTF-32 or a non-string data type.
    pub fn to_strings(&self, dt: &DataType) -> ZarrResult<Vec<String>> {
        match (self, dt) {
            (ArrayBytes::Strings(v), _) => Ok(v.clone()),
            (ArrayBytes::Fixed(b), DataType::FixedLengthUtf32 { length_bytes }) => {
                if *length_bytes == 0 {
                    return Ok(Vec::new());
                }
                b.chunks_exact(*length_bytes)
                    .map(|c| {
                        decode_utf32(c).map_err(|reason| ZarrError::InvalidValue {
                            data_type: dt.name(),
                            reason,
                        })
                    })
                    .collect()
            }
            _ => Err(ZarrError::InvalidValue {
                data_type: dt.name(),
                reason: "not a string data type".into(),
            }),
        }
    }
}

/// Borrowed decoded elements (C order): native-endian bytes of fixed-size elements,
/// or strings.
#[derive(Clone, Copy, Debug)]
pub enum ElemsRef<'a> {
    /// Native-endian element bytes.
    Fixed(&'a [u8]),
    /// Strings.
    Strings(&'a [String]),
}

impl ElemsRef<'_> {
    /// Whether every element equals `fill` (bitwise for fixed-size types); a fill
    /// value of the other kind (string against bytes) never matches.
    pub fn is_fill(&self, fill: &FillValue) -> bool {
        match (self, fill) {
            (ElemsRef::Strings(v), FillValue::String(s)) => v.iter().all(|x| x == s),
            (ElemsRef::Fixed(b), FillValue::Bytes(f)) => is_repeated(b, f),
            _ => false,
        }
    }

    /// Checks that this holds `n` elements of data type `dt`.
    ///
    /// # Errors
    /// The number of elements found when it is not `n`.
    pub fn check_len(&self, dt: &DataType, n: u64) -> Result<(), u64> {
        let found = match (self, dt.fixed_size()) {
            (ElemsRef::Fixed(b), Some(s)) if s > 0 => {
                if b.len() % s != 0 {
                    return Err((b.len() / s) as u64);
                }
                (b.len() / s) as u64
            }
            (ElemsRef::Fixed(b), Some(_)) => {
                if b.is_empty() {
                    n
                } else {
                    0
                }
            }
            (ElemsRef::Strings(v), None) => v.len() as u64,
            _ => return Err(0),
        };
        if found == n {
            Ok(())
        } else {
            Err(found)
        }
    }

    /// Copies `region` (relative to a buffer of shape `shape`) into a new buffer.
    pub fn extract(&self, dt: &DataType, shape: &[u64], region: &ArraySubset) -> ArrayBytes {
        let n = region.num_elements() as usize;
        let zeros = vec![0; region.ndim()];
        match self {
            ElemsRef::Fixed(b) => {
                let s = dt.fixed_size().unwrap_or(0);
                if region.is_full(shape) {
                    return ArrayBytes::Fixed(crate::buffer_pool::copy_of(b));
                }
                // Whole rows of a C-order buffer (a chunk of a region that spans its
                // trailing dimensions): one copy, no zero fill first.
                if let Some(run) = region.contiguous_in(shape) {
                    let bytes = run.start.checked_mul(s).zip(run.end.checked_mul(s));
                    if let Some(run) = bytes.and_then(|(a, z)| b.get(a..z)) {
                        return ArrayBytes::Fixed(crate::buffer_pool::copy_of(run));
                    }
                }
                let mut out = crate::buffer_pool::zeroed(n * s);
                if s > 0 {
                    copy_region_bytes(
                        b,
                        &to_usize(shape),
                        &to_usize(&region.start),
                        &mut out,
                        &to_usize(&region.shape),
                        &zeros,
                        &to_usize(&region.shape),
                        s,
                    );
                }
                ArrayBytes::Fixed(out)
            }
            ElemsRef::Strings(v) => {
                if region.is_full(shape) {
                    return ArrayBytes::Strings(v.to_vec());
                }
                let mut out = vec![String::new(); n];
                copy_region(
                    v,
                    &to_usize(shape),
                    &to_usize(&region.start),
                    &mut out,
                    &to_usize(&region.shape),
                    &zeros,
                    &to_usize(&region.shape),
                );
                ArrayBytes::Strings(out)
            }
        }
    }
}

/// Mutable borrowed decoded elements.
#[derive(Debug)]
pub enum ElemsMut<'a> {
    /// Native-endian element bytes.
    Fixed(&'a mut [u8]),
    /// Strings.
    Strings(&'a mut [String]),
}

impl ElemsMut<'_> {
    /// Copies `region_shape` elements from `src` (shape `src_shape`, at `src_start`)
    /// into this buffer (shape `shape`) at `dst_start`. Mismatched representations
    /// copy nothing (callers check them).
    #[allow(clippy::too_many_arguments)]
    pub fn copy_from(
        &mut self,
        shape: &[u64],
        dst_start: &[u64],
        src: ElemsRef<'_>,
        src_shape: &[u64],
        src_start: &[u64],
        region_shape: &[u64],
        elem_size: usize,
    ) {
        match (self, src) {
            (ElemsMut::Fixed(d), ElemsRef::Fixed(s)) if elem_size > 0 => copy_region_bytes(
                s,
                &to_usize(src_shape),
                &to_usize(src_start),
                d,
                &to_usize(shape),
                &to_usize(dst_start),
                &to_usize(region_shape),
                elem_size,
            ),
            (ElemsMut::Strings(d), ElemsRef::Strings(s)) => copy_region(
                s,
                &to_usize(src_shape),
                &to_usize(src_start),
                d,
                &to_usize(shape),
                &to_usize(dst_start),
                &to_usize(region_shape),
            ),
            _ => {}
        }
    }
}

fn nest(flat: Vec<Value>, shape: &[u64]) -> Value {
    if shape.is_empty() {
        return flat.into_iter().next().unwrap_or(Value::Null);
    }
    fn build(it: &mut std::vec::IntoIter<Value>, shape: &[u64]) -> Value {
        if shape.len() == 1 {
            return Value::Array(it.take(shape[0] as usize).collect());
        }
        Value::Array((0..shape[0]).map(|_| build(it, &shape[1..])).collect())
    }
    let mut it = flat.into_iter();
    build(&mut it, shape)
}

/// `n` copies of `value`, `None` when the allocation fails (instead of aborting the
/// process, as `vec![value; n]` does).
pub(crate) fn try_filled_vec<T: Clone>(n: usize, value: T) -> Option<Vec<T>> {
    // Probe that the allocation can be made (an error, not an abort, when it
    // cannot), then let `vec!` build it: for a zero value of a primitive type it asks
    // the allocator for zeroed memory, which the OS hands out lazily instead of
    // writing every byte (large reads overwrite most of the buffer anyway).
    let mut probe: Vec<T> = Vec::new();
    probe.try_reserve_exact(n).ok()?;
    drop(probe);
    Some(vec![value; n])
}

/// Bytes of the pattern block [`fill_repeated`] builds before copying it whole.
const FILL_BLOCK_BYTES: usize = 8192;

/// Fills `out` with `pattern` repeated from its start (an element's fill value: the
/// last repetition is cut short when `out.len()` is not a multiple of its length;
/// an empty pattern leaves `out` as it is). A pattern of one repeated byte is a
/// `memset`; any other is written once, doubled to a block of ~8 KiB and that block
/// copied, so a NaN fill of a 1 MiB chunk is 128 copies, not one per element.
pub(crate) fn fill_repeated(out: &mut [u8], pattern: &[u8]) {
    let Some((&b, rest)) = pattern.split_first() else {
        return;
    };
    if rest.iter().all(|&x| x == b) {
        out.fill(b);
        return;
    }
    let reps = (FILL_BLOCK_BYTES / pattern.len()).max(1);
    let block_len = (reps * pattern.len()).min(out.len());
    let (block, tail) = out.split_at_mut(block_len);
    let first = pattern.len().min(block_len);
    block[..first].copy_from_slice(&pattern[..first]);
    let mut done = first;
    while done < block_len {
        let n = done.min(block_len - done);
        block.copy_within(..n, done);
        done += n;
    }
    // `block_len` is a multiple of the pattern's length whenever `tail` is not empty.
    for part in tail.chunks_mut(block_len.max(1)) {
        part.copy_from_slice(&block[..part.len()]);
    }
}

/// Whether `b` is `f` repeated (an empty `f` matches only an empty `b`).
pub(crate) fn is_repeated(b: &[u8], f: &[u8]) -> bool {
    if f.is_empty() {
        return b.is_empty();
    }
    if !b.len().is_multiple_of(f.len()) {
        return false;
    }
    // Build a pattern block of ~4 KiB and compare block-wise.
    let reps = (8192 / f.len()).max(1);
    let block = f.repeat(reps);
    b.chunks(block.len()).all(|c| c == &block[..c.len()])
}

/// Reverses the byte order of every `unit`-byte unit of `b` in place.
pub(crate) fn swap_endian(b: &mut [u8], unit: usize) {
    if unit > 1 {
        for c in b.chunks_exact_mut(unit) {
            c.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every pattern length, from one byte to longer than the block, over outputs
    /// shorter than the pattern, of a few blocks and not a multiple of the pattern:
    /// the same bytes as the pattern cycled byte by byte.
    #[test]
    fn fill_repeated_equals_the_cycled_pattern() {
        for plen in [0usize, 1, 2, 3, 4, 8, 16, 24, 4097, 9000] {
            let pattern: Vec<u8> = (0..plen).map(|i| (i * 37 % 251) as u8 + 1).collect();
            for len in [0usize, 1, 3, 4, 100, 8191, 8192, 20_000, 65_536 + 12] {
                let mut out = vec![0xEEu8; len];
                fill_repeated(&mut out, &pattern);
                let want: Vec<u8> = if plen == 0 {
                    vec![0xEE; len]
                } else {
                    pattern.iter().copied().cycle().take(len).collect()
                };
                assert_eq!(out, want, "pattern of {plen} bytes into {len}");
            }
        }
        let mut same = vec![0u8; 10];
        fill_repeated(&mut same, &[7, 7, 7, 7]);
        assert_eq!(same, vec![7; 10]);
    }

    #[test]
    fn extracted_regions_hold_their_elements() {
        let shape = [4, 3, 5];
        let r = |start: [u64; 3], ext: [u64; 3]| ArraySubset::new(start.to_vec(), ext.to_vec());
        let data: Vec<u8> = (0..60).collect();
        let view = ElemsRef::Fixed(&data);
        // One contiguous run: whole rows of the last dimension.
        let got = view.extract(&DataType::UInt8, &shape, &r([1, 1, 0], [1, 2, 5]));
        assert_eq!(got, ArrayBytes::Fixed((20..30).collect()));
        // Strided: a partial last dimension.
        let got = view.extract(&DataType::UInt8, &shape, &r([0, 0, 1], [2, 3, 4]));
        let want: Vec<u8> = (0..2u8)
            .flat_map(|i| (0..3u8).flat_map(move |j| (1..5u8).map(move |k| i * 15 + j * 5 + k)))
            .collect();
        assert_eq!(got, ArrayBytes::Fixed(want));
    }

    /// Every region of a 3-d buffer, contiguous (one copy) or strided, extracts
    /// exactly its elements in C order, for 1- and 4-byte elements.
    #[test]
    fn every_region_extracts_its_elements() {
        let shape = [3u64, 4, 5];
        for (dt, size) in [(DataType::UInt8, 1usize), (DataType::Float32, 4)] {
            let data: Vec<u8> = (0..60 * size).map(|i| (i % 251) as u8).collect();
            let view = ElemsRef::Fixed(&data);
            let mut contiguous = 0;
            for start in crate::zarr::subset::indices_in(&[0, 0, 0], &shape) {
                let room: Vec<u64> = shape.iter().zip(&start).map(|(n, s)| n - s).collect();
                for ext in crate::zarr::subset::indices_in(&[1, 1, 1], &room) {
                    let region = ArraySubset::new(start.clone(), ext.clone());
                    contiguous += usize::from(region.contiguous_in(&shape).is_some());
                    let mut want = Vec::new();
                    for at in crate::zarr::subset::indices_in(&start, &ext) {
                        let e = ((at[0] * 4 + at[1]) * 5 + at[2]) as usize * size;
                        want.extend_from_slice(&data[e..e + size]);
                    }
                    let got = view.extract(&dt, &shape, &region);
                    assert_eq!(got, ArrayBytes::Fixed(want), "{region:?}");
                }
            }
            // Runs within one row (15 in a row of 5), two or more whole rows of one
            // plane (6 of 4 rows), two or more whole planes (3 of 3).
            assert_eq!(contiguous, 3 * 4 * 15 + 3 * 6 + 3);
        }
    }

    #[test]
    fn fill_and_is_fill() {
        let dt = DataType::Float32;
        let fill = FillValue::Bytes(f32::NAN.to_ne_bytes().to_vec());
        let a = ArrayBytes::new_fill(5, &dt, &fill).unwrap();
        assert!(a.is_fill(&fill));
        assert!(!a.is_fill(&FillValue::Bytes(0f32.to_ne_bytes().to_vec())));
        let z = ArrayBytes::new_fill(1000, &dt, &dt.default_fill_value()).unwrap();
        assert!(z.is_fill(&dt.default_fill_value()));
        let mut zz = z.clone();
        if let ArrayBytes::Fixed(b) = &mut zz {
            b[3999] = 1;
        }
        assert!(!zz.is_fill(&dt.default_fill_value()));
        assert_err!(
            ArrayBytes::new_fill(2, &DataType::String, &dt.default_fill_value()),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );
        // Sizes that overflow are a typed error, not a capacity-overflow panic.
        let huge = ArrayBytes::new_fill(usize::MAX / 2, &DataType::Float32, &fill);
        assert!(matches!(huge, Err(ZarrError::TooLarge { .. })), "{huge:?}");
    }

    #[test]
    fn json_nesting() {
        let dt = DataType::Int16;
        let b: Vec<u8> = (0i16..6).flat_map(|v| v.to_ne_bytes()).collect();
        let a = ArrayBytes::Fixed(b);
        assert_eq!(a.to_json(&dt, &[2, 3]), json!([[0, 1, 2], [3, 4, 5]]));
        let f = ArrayBytes::Fixed(f64::NAN.to_ne_bytes().to_vec());
        assert_eq!(f.to_json(&DataType::Float64, &[]), json!("NaN"));
        let s = ArrayBytes::Strings(vec!["a".into(), "b".into()]);
        assert_eq!(s.to_json(&DataType::String, &[2]), json!(["a", "b"]));
    }

    #[test]
    fn extract_region() {
        let dt = DataType::UInt8;
        let a = ArrayBytes::Fixed((0u8..12).collect());
        let r = a.extract(&dt, &[3, 4], &ArraySubset::new(vec![1, 2], vec![2, 2]));
        assert_eq!(r, ArrayBytes::Fixed(vec![6, 7, 10, 11]));
    }
}
