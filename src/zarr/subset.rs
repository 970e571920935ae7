//! Rectangular regions of N-dimensional arrays and copying between C-order buffers.
//!
//! Regions are half-open boxes `start[d] .. start[d] + shape[d]` in element
//! coordinates. All buffers are C (row-major) order.

use std::ops::Range;

/// A rectangular region of an array: `start` and `shape`, one entry per dimension.
///
/// A 0-dimensional subset (empty `start`/`shape`) has one element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArraySubset {
    /// First element of the region along each dimension.
    pub start: Vec<u64>,
    /// Number of elements along each dimension.
    pub shape: Vec<u64>,
}

impl ArraySubset {
    /// A region from its start and shape.
    ///
    /// # Panics
    /// Never; mismatched lengths are reported when the subset is used
    /// ([`crate::zarr::ZarrError::InvalidRegion`]).
    pub fn new(start: Vec<u64>, shape: Vec<u64>) -> Self {
        ArraySubset { start, shape }
    }

    /// A region from one half-open range per dimension (`end < start` gives an empty
    /// extent).
    pub fn from_ranges(ranges: &[Range<u64>]) -> Self {
        ArraySubset {
            start: ranges.iter().map(|r| r.start).collect(),
            shape: ranges
                .iter()
                .map(|r| r.end.saturating_sub(r.start))
                .collect(),
        }
    }

    /// The whole of an array of shape `shape`.
    pub fn full(shape: &[u64]) -> Self {
        ArraySubset {
            start: vec![0; shape.len()],
            shape: shape.to_vec(),
        }
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// One past the last element along each dimension (saturating at `u64::MAX`,
    /// which only a region not [`ArraySubset::within`] any array can reach).
    pub fn end(&self) -> Vec<u64> {
        self.start
            .iter()
            .zip(&self.shape)
            .map(|(s, n)| s.saturating_add(*n))
            .collect()
    }

    /// The half-open ranges of the region (ends saturate as in [`ArraySubset::end`]).
    pub fn ranges(&self) -> Vec<Range<u64>> {
        self.start
            .iter()
            .zip(&self.shape)
            .map(|(&s, &n)| s..s.saturating_add(n))
            .collect()
    }

    /// Number of elements in the region (1 for 0-d), saturating at `u64::MAX`: use
    /// [`ArraySubset::checked_num_elements`] before sizing anything by it.
    pub fn num_elements(&self) -> u64 {
        saturating_product(&self.shape)
    }

    /// Number of elements in the region (1 for 0-d), `None` when it overflows `u64`.
    pub fn checked_num_elements(&self) -> Option<u64> {
        checked_product(&self.shape)
    }

    /// The intersection with `other` (same dimensionality), or `None` when empty.
    pub fn intersect(&self, other: &ArraySubset) -> Option<ArraySubset> {
        let mut start = Vec::with_capacity(self.ndim());
        let mut shape = Vec::with_capacity(self.ndim());
        for d in 0..self.ndim() {
            let s = self.start[d].max(other.start[d]);
            // Saturating: a chunk at the end of a `[u64::MAX]` array ends past
            // `u64::MAX`; the array (the other operand) bounds the result.
            let e = (self.start[d].saturating_add(self.shape[d]))
                .min(other.start[d].saturating_add(other.shape[d]));
            if e <= s {
                return None;
            }
            start.push(s);
            shape.push(e - s);
        }
        Some(ArraySubset { start, shape })
    }

    /// This region expressed relative to `origin` (element-wise `start - origin`).
    pub fn relative_to(&self, origin: &[u64]) -> ArraySubset {
        ArraySubset {
            start: self
                .start
                .iter()
                .zip(origin)
                .map(|(s, o)| s.saturating_sub(*o))
                .collect(),
            shape: self.shape.clone(),
        }
    }

    /// Whether the region lies within an array of shape `shape` (same dimensionality).
    pub fn within(&self, shape: &[u64]) -> bool {
        self.ndim() == shape.len()
            && self
                .start
                .iter()
                .zip(&self.shape)
                .zip(shape)
                .all(|((s, n), dim)| s.checked_add(*n).is_some_and(|e| e <= *dim))
    }

    /// Whether the region covers all of an array of shape `shape`.
    pub fn is_full(&self, shape: &[u64]) -> bool {
        self.start.iter().all(|&s| s == 0) && self.shape == shape
    }

    /// The elements of this region as one run of a C-order buffer of shape `shape`
    /// (element positions), when they are one: the dimensions before some `k` have
    /// extent 1, those after `k` are whole. `None` otherwise, for an empty region, or
    /// when the region does not fit `shape` or its positions overflow `usize`.
    pub(crate) fn contiguous_in(&self, shape: &[u64]) -> Option<std::ops::Range<usize>> {
        let ndim = shape.len();
        if self.start.len() != ndim || self.shape.len() != ndim || self.shape.contains(&0) {
            return None;
        }
        let k = self
            .shape
            .iter()
            .position(|&n| n != 1)
            .unwrap_or(ndim.saturating_sub(1));
        let trailing_whole = (k + 1..ndim).all(|d| self.start[d] == 0 && self.shape[d] == shape[d]);
        let fits = (0..ndim).all(|d| {
            self.start[d]
                .checked_add(self.shape[d])
                .is_some_and(|end| end <= shape[d])
        });
        if !trailing_whole || !fits {
            return None;
        }
        // C-order position of `start`, then the run's length.
        let mut first: u64 = 0;
        for (&n, &s) in shape.iter().zip(&self.start) {
            first = first.checked_mul(n)?.checked_add(s)?;
        }
        let len = self.checked_num_elements()?;
        let first = usize::try_from(first).ok()?;
        let end = first.checked_add(usize::try_from(len).ok()?)?;
        Some(first..end)
    }
}

/// The product of `v` (1 for an empty slice), `None` when it overflows `u64`.
pub fn checked_product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x))
}

/// The product of `v` (1 for an empty slice), saturating at `u64::MAX` (a zero
/// factor anywhere gives 0).
pub fn saturating_product(v: &[u64]) -> u64 {
    if v.contains(&0) {
        return 0;
    }
    v.iter().fold(1u64, |acc, &x| acc.saturating_mul(x))
}

/// Converts a shape of `u64` to `usize`.
pub(crate) fn to_usize(v: &[u64]) -> Vec<usize> {
    v.iter().map(|&x| x as usize).collect()
}

/// Copies a rectangular region between two C-order buffers of `T`.
///
/// `src` has shape `src_shape` and the region starts at `src_start` in it; `dst` has
/// shape `dst_shape` and the region starts at `dst_start`; the region has shape
/// `region`. For byte buffers of elements of `s` bytes, pass shapes and starts with
/// the last dimension multiplied by `s` (see [`copy_region_bytes`]).
///
/// Contiguous trailing dimensions are merged so a full copy is one `clone_from_slice`.
///
/// # Panics
/// When the region does not fit in either buffer (callers check bounds first).
pub fn copy_region<T: Clone>(
    src: &[T],
    src_shape: &[usize],
    src_start: &[usize],
    dst: &mut [T],
    dst_shape: &[usize],
    dst_start: &[usize],
    region: &[usize],
) {
    let ndim = region.len();
    if region.contains(&0) {
        return;
    }
    if ndim == 0 {
        dst[0] = src[0].clone();
        return;
    }
    // Merge trailing dimensions that are contiguous in both buffers: dimension d can
    // be folded into d-1 when the region spans all of dimension d in src and dst.
    let mut inner = ndim - 1;
    let mut run = region[ndim - 1];
    while inner > 0 && region[inner] == src_shape[inner] && region[inner] == dst_shape[inner] {
        inner -= 1;
        run *= region[inner];
    }
    // Strides (in elements) of both buffers.
    let strides = |shape: &[usize]| {
        let mut s = vec![1usize; ndim];
        for d in (0..ndim - 1).rev() {
            s[d] = s[d + 1] * shape[d + 1];
        }
        s
    };
    let ss = strides(src_shape);
    let ds = strides(dst_shape);
    let base =
        |start: &[usize], st: &[usize]| -> usize { start.iter().zip(st).map(|(a, b)| a * b).sum() };
    let src_base = base(src_start, &ss);
    let dst_base = base(dst_start, &ds);
    // Odometer over dimensions 0..inner.
    let mut idx = vec![0usize; inner];
    loop {
        let so = src_base + idx.iter().zip(&ss).map(|(a, b)| a * b).sum::<usize>();
        let d_o = dst_base + idx.iter().zip(&ds).map(|(a, b)| a * b).sum::<usize>();
        dst[d_o..d_o + run].clone_from_slice(&src[so..so + run]);
        // advance
        let mut d = inner;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < region[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// [`copy_region`] for byte buffers holding elements of `elem_size` bytes.
#[allow(clippy::too_many_arguments)]
pub fn copy_region_bytes(
    src: &[u8],
    src_shape: &[usize],
    src_start: &[usize],
    dst: &mut [u8],
    dst_shape: &[usize],
    dst_start: &[usize],
    region: &[usize],
    elem_size: usize,
) {
    if region.is_empty() {
        dst[..elem_size].copy_from_slice(&src[..elem_size]);
        return;
    }
    let scale = |v: &[usize]| {
        let mut v = v.to_vec();
        if let Some(last) = v.last_mut() {
            *last *= elem_size;
        }
        v
    };
    copy_region(
        src,
        &scale(src_shape),
        &scale(src_start),
        dst,
        &scale(dst_shape),
        &scale(dst_start),
        &scale(region),
    );
}

/// Iterates over all index tuples of a box `start .. start + shape` in C order
/// (one empty tuple for 0-d, none when any extent is 0). Needs no element count, so
/// boxes whose count overflows `u64` iterate correctly (if endlessly).
pub fn indices_in(start: &[u64], shape: &[u64]) -> impl Iterator<Item = Vec<u64>> {
    let start = start.to_vec();
    let shape = shape.to_vec();
    let mut cur: Option<Vec<u64>> = (!shape.contains(&0)).then(|| start.clone());
    std::iter::from_fn(move || {
        let out = cur.take()?;
        let mut next = out.clone();
        // Odometer, last dimension fastest; `None` after the last tuple.
        for d in (0..shape.len()).rev() {
            next[d] = next[d].saturating_add(1);
            if next[d] - start[d] < shape[d] {
                cur = Some(next);
                break;
            }
            next[d] = start[d];
        }
        Some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_runs_are_whole_trailing_dimensions() {
        type Case<'a> = (&'a [u64], &'a [u64], Option<std::ops::Range<usize>>);
        let cases: [Case<'_>; 10] = [
            // Part of one row; whole rows of one plane; whole planes; one element.
            (&[1, 2, 1], &[1, 1, 3], Some(26..29)),
            (&[1, 1, 0], &[1, 2, 5], Some(20..30)),
            (&[2, 0, 0], &[2, 3, 5], Some(30..60)),
            (&[3, 2, 4], &[1, 1, 1], Some(59..60)),
            // Strided, empty, out of bounds, or of another rank.
            (&[0, 0, 1], &[1, 2, 4], None),
            (&[0, 1, 0], &[2, 2, 5], None),
            (&[0, 0, 0], &[1, 0, 5], None),
            (&[3, 0, 0], &[2, 3, 5], None),
            (&[0, 0, u64::MAX], &[1, 1, 2], None),
            (&[0, 0], &[1, 5], None),
        ];
        for (start, extent, want) in cases {
            let region = ArraySubset::new(start.to_vec(), extent.to_vec());
            assert_eq!(region.contiguous_in(&[4, 3, 5]), want, "{region:?}");
        }
        // A 0-d region is its one element.
        assert_eq!(
            ArraySubset::new(vec![], vec![]).contiguous_in(&[]),
            Some(0..1)
        );
    }

    #[test]
    fn intersect_and_bounds() {
        let a = ArraySubset::new(vec![0, 5], vec![10, 10]);
        let b = ArraySubset::from_ranges(&[3..4, 12..20]);
        assert_eq!(
            a.intersect(&b),
            Some(ArraySubset::new(vec![3, 12], vec![1, 3]))
        );
        assert_eq!(
            a.intersect(&ArraySubset::new(vec![10, 5], vec![1, 1])),
            None
        );
        assert!(a.within(&[10, 15]));
        assert!(!a.within(&[10, 14]));
        assert!(!a.within(&[10]));
        assert_eq!(ArraySubset::full(&[]).num_elements(), 1);
    }

    #[test]
    fn copy_region_2d() {
        // src 3x4 with values 0..12, copy [1..3, 1..3] into dst 2x2 at origin
        let src: Vec<u32> = (0..12).collect();
        let mut dst = vec![0u32; 4];
        copy_region(&src, &[3, 4], &[1, 1], &mut dst, &[2, 2], &[0, 0], &[2, 2]);
        assert_eq!(dst, vec![5, 6, 9, 10]);
        // full copy merges dims
        let mut dst = vec![0u32; 12];
        copy_region(&src, &[3, 4], &[0, 0], &mut dst, &[3, 4], &[0, 0], &[3, 4]);
        assert_eq!(dst, src);
        // bytes of u16 elements
        let src16: Vec<u8> = (0u16..6).flat_map(|v| v.to_ne_bytes()).collect();
        let mut dst16 = vec![0u8; 4];
        copy_region_bytes(
            &src16,
            &[2, 3],
            &[1, 1],
            &mut dst16,
            &[1, 2],
            &[0, 0],
            &[1, 2],
            2,
        );
        let got: Vec<u16> = dst16
            .chunks(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(got, vec![4, 5]);
    }

    #[test]
    fn indices_iterate_c_order() {
        let v: Vec<Vec<u64>> = indices_in(&[1, 0], &[2, 2]).collect();
        assert_eq!(v, vec![vec![1, 0], vec![1, 1], vec![2, 0], vec![2, 1]]);
        assert_eq!(indices_in(&[], &[]).count(), 1);
        assert_eq!(indices_in(&[0], &[0]).count(), 0);
        // A box whose element count overflows u64 iterates in C order (the old
        // iterator computed the product first and overflowed).
        let big: Vec<Vec<u64>> = indices_in(&[0, 0], &[u64::MAX, u64::MAX]).take(2).collect();
        assert_eq!(big, vec![vec![0, 0], vec![0, 1]]);
        let end: Vec<Vec<u64>> = indices_in(&[u64::MAX - 1], &[1]).collect();
        assert_eq!(end, vec![vec![u64::MAX - 1]]);
    }

    #[test]
    fn overflowing_counts_and_ends_saturate() {
        let huge = ArraySubset::full(&[1 << 63, 1 << 63]);
        assert_eq!(huge.checked_num_elements(), None);
        assert_eq!(huge.num_elements(), u64::MAX);
        assert_eq!(ArraySubset::full(&[1 << 63, 0]).num_elements(), 0);
        // The last chunk of a [u64::MAX] array in chunks of 10 ends past u64::MAX.
        let chunk = ArraySubset::new(vec![u64::MAX / 10 * 10], vec![10]);
        assert_eq!(chunk.end(), vec![u64::MAX]);
        let inter = chunk.intersect(&ArraySubset::full(&[u64::MAX])).unwrap();
        assert_eq!(inter.start, vec![u64::MAX / 10 * 10]);
        assert_eq!(inter.shape, vec![u64::MAX % 10]);
    }
}
