//! Coalescing nearby byte ranges of one object into fewer requests.
//!
//! Reading many small pieces of one object one request each (the inner chunks of a
//! shard, the virtual chunks of one NetCDF/HDF5 file) costs one round trip per piece.
//! [`plan`] merges ranges whose gap is at most [`CoalesceOptions::max_gap`] bytes
//! into one request, as long as the merged request spans at most
//! [`CoalesceOptions::max_span`] bytes; [`read_coalesced`] runs such a plan and slices
//! each range out of the bytes of its request (no copy). The bytes in a gap are read
//! and dropped: a gap of at most 1 MiB (object_store's `OBJECT_STORE_COALESCE_DEFAULT`)
//! costs less than the latency of one more request on object stores.
//!
//! Memory: a merged request holds at most `max_span` bytes (or one range, when that
//! range alone is longer), and [`read_coalesced`] runs at most `concurrency` requests
//! at once. The slices returned share the buffer of their request, which lives as long
//! as any of them.

use std::future::Future;
use std::ops::Range;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

/// Default [`CoalesceOptions::max_gap`]: 1 MiB, object_store's
/// `OBJECT_STORE_COALESCE_DEFAULT`.
pub const DEFAULT_MAX_GAP: u64 = 1 << 20;

/// Default [`CoalesceOptions::max_span`]: 16 MiB.
pub const DEFAULT_MAX_SPAN: u64 = 16 << 20;

/// Default number of merged requests in flight at once for one object, as
/// object_store's `coalesce_ranges`.
pub const DEFAULT_CONCURRENCY: usize = 10;

/// How nearby byte ranges of one object are merged into one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoalesceOptions {
    /// Largest gap, in bytes, between two ranges read by one request (the gap's
    /// bytes are read and dropped). `0` merges only touching or overlapping ranges.
    pub max_gap: u64,
    /// Largest span, in bytes, of one merged request (first byte of its first range
    /// to last byte of its last). A single range longer than this is read alone,
    /// whole; ranges are never split.
    pub max_span: u64,
}

impl Default for CoalesceOptions {
    fn default() -> Self {
        CoalesceOptions {
            max_gap: DEFAULT_MAX_GAP,
            max_span: DEFAULT_MAX_SPAN,
        }
    }
}

impl CoalesceOptions {
    /// Options that never merge: one request per non-empty range.
    pub fn disabled() -> Self {
        CoalesceOptions {
            max_gap: 0,
            max_span: 0,
        }
    }

    /// These options with `max_gap` bytes.
    #[must_use]
    pub fn max_gap(mut self, bytes: u64) -> Self {
        self.max_gap = bytes;
        self
    }

    /// These options with `max_span` bytes.
    #[must_use]
    pub fn max_span(mut self, bytes: u64) -> Self {
        self.max_span = bytes;
        self
    }
}

/// One request of a [`plan`]: the bytes it reads and the ranges it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The bytes read, `start..end` in the object (in bytes).
    pub range: Range<u64>,
    /// Positions, in the planned slice of ranges, of the ranges this request
    /// serves, by increasing start.
    pub members: Vec<usize>,
}

/// Plans the requests that read `ranges` of one object: sorted by start, a range
/// joins the request before it when its gap to that request is at most
/// `opts.max_gap` and the request then spans at most `opts.max_span` bytes.
/// Every range is served by exactly one request, which covers it whole. An inverted
/// range (`start > end`) is planned as the empty range at its start; callers refuse
/// those first.
pub fn plan(ranges: &[Range<u64>], opts: CoalesceOptions) -> Vec<Span> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].start, ranges[i].end));
    let mut spans: Vec<Span> = Vec::new();
    for i in order {
        let r = ranges[i].start..ranges[i].end.max(ranges[i].start);
        if let Some(last) = spans.last_mut() {
            // Sorted by start: `r.start >= last.range.start`, so the span is exact.
            let gap = r.start.saturating_sub(last.range.end);
            let end = last.range.end.max(r.end);
            if gap <= opts.max_gap && end - last.range.start <= opts.max_span {
                last.range.end = end;
                last.members.push(i);
                continue;
            }
        }
        spans.push(Span {
            range: r,
            members: vec![i],
        });
    }
    spans
}

/// The part `range` (object offsets, in bytes) of `bytes`, which were read starting at
/// object offset `at`; `None` when `bytes` do not cover it.
pub fn slice(bytes: &Bytes, at: u64, range: &Range<u64>) -> Option<Bytes> {
    let start = usize::try_from(range.start.checked_sub(at)?).ok()?;
    let end = usize::try_from(range.end.checked_sub(at)?).ok()?;
    (start <= end && end <= bytes.len()).then(|| bytes.slice(start..end))
}

/// Reads `ranges` of one object: plans them with `opts`, calls `fetch` once per
/// planned request (at most `concurrency` at once), and returns one `Bytes` per
/// range, in the order of `ranges`. `fetch(span)` must return the span's bytes, all
/// of them; when it returns fewer, `short(range, available)` makes the error for the
/// first range they do not cover (`available`: the object offset where the bytes
/// read end).
///
/// # Errors
/// The first error of `fetch`, or of `short`.
pub async fn read_coalesced<F, Fut, E>(
    ranges: &[Range<u64>],
    opts: CoalesceOptions,
    concurrency: usize,
    mut fetch: F,
    short: impl Fn(Range<u64>, u64) -> E,
) -> Result<Vec<Bytes>, E>
where
    F: FnMut(Range<u64>) -> Fut,
    Fut: Future<Output = Result<Bytes, E>>,
{
    let spans = plan(ranges, opts);
    let requests: Vec<Range<u64>> = spans.iter().map(|s| s.range.clone()).collect();
    let fetched: Vec<Bytes> = futures::stream::iter(requests)
        .map(&mut fetch)
        .buffered(concurrency.max(1))
        .try_collect()
        .await?;
    let mut out = vec![Bytes::new(); ranges.len()];
    for (span, bytes) in spans.iter().zip(&fetched) {
        for &i in &span.members {
            let r = &ranges[i];
            out[i] = match slice(bytes, span.range.start, r) {
                Some(b) => b,
                None => {
                    let available = span.range.start.saturating_add(bytes.len() as u64);
                    return Err(short(r.clone(), available));
                }
            };
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(ranges: &[Range<u64>], opts: CoalesceOptions) -> Vec<(Range<u64>, Vec<usize>)> {
        plan(ranges, opts)
            .into_iter()
            .map(|s| (s.range, s.members))
            .collect()
    }

    #[test]
    fn nearby_ranges_merge_and_far_ones_do_not() {
        let o = CoalesceOptions::default().max_gap(10).max_span(100);
        // Out of order, touching, overlapping, a gap of exactly 10, then 11.
        let r = [20..30, 0..10, 10..15, 12..18, 40..45, 56..60];
        assert_eq!(
            spans(&r, o),
            vec![(0..45, vec![1, 2, 3, 0, 4]), (56..60, vec![5])]
        );
        // The span cap: 0..60 would exceed 50.
        let o = o.max_span(50);
        assert_eq!(
            spans(&[0..30, 35..60], o),
            vec![(0..30, vec![0]), (35..60, vec![1])]
        );
        // A range longer than the cap is read alone, whole.
        assert_eq!(
            spans(&[0..200, 200..210], o),
            vec![(0..200, vec![0]), (200..210, vec![1])]
        );
        // Disabled: touching ranges stay apart; identical empty ranges share one.
        let d = CoalesceOptions::disabled();
        assert_eq!(
            spans(&[0..4, 4..8, 9..9, 9..9], d),
            vec![(0..4, vec![0]), (4..8, vec![1]), (9..9, vec![2, 3])]
        );
        assert!(plan(&[], o).is_empty());
    }

    #[test]
    fn extreme_offsets_do_not_overflow() {
        let o = CoalesceOptions::default();
        let top = u64::MAX - 10..u64::MAX;
        assert_eq!(
            spans(&[top.clone(), 0..10], o),
            vec![(0..10, vec![1]), (top, vec![0])]
        );
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = 9..3;
        assert_eq!(spans(&[inverted], o), vec![(9..9, vec![0])]);
    }

    #[test]
    fn slices_are_checked() {
        let b = Bytes::from_static(b"0123456789");
        assert_eq!(slice(&b, 100, &(102..105)).unwrap(), &b"234"[..]);
        assert_eq!(slice(&b, 100, &(110..110)).unwrap(), &b""[..]);
        assert!(slice(&b, 100, &(99..101)).is_none());
        assert!(slice(&b, 100, &(105..111)).is_none());
    }

    #[tokio::test]
    async fn reads_return_each_range_in_order() {
        let object: Vec<u8> = (0..=255).collect();
        let object = Bytes::from(object);
        let requests = std::sync::Mutex::new(Vec::new());
        let ranges = [200..210, 0..4, 8..16, 250..256, 3..9];
        let o = CoalesceOptions::default().max_gap(40).max_span(64);
        let got = read_coalesced(
            &ranges,
            o,
            2,
            |span: Range<u64>| {
                requests.lock().unwrap().push(span.clone());
                let b = object.slice(span.start as usize..span.end as usize);
                async move { Ok::<_, String>(b) }
            },
            |r, at| format!("short {r:?} at {at}"),
        )
        .await
        .unwrap();
        for (r, b) in ranges.iter().zip(&got) {
            assert_eq!(b.as_ref(), &object[r.start as usize..r.end as usize]);
        }
        assert_eq!(*requests.lock().unwrap(), vec![0..16, 200..256]);
        // A fetch returning fewer bytes than asked is an error, never a short slice.
        let e = read_coalesced(
            &[0..4, 8..16],
            o,
            1,
            |_| async { Ok::<_, String>(Bytes::from_static(b"0123456789")) },
            |r, at| format!("short {r:?} at {at}"),
        )
        .await
        .unwrap_err();
        assert_eq!(e, "short 8..16 at 10");
    }
}
