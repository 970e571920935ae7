//! Parsing `--region` strings (`0:10,5:7`) against an array's shape.
//!
//! One item per dimension, separated by commas: `a:b` (elements `a` up to, not
//! including, `b`), `:` (the whole dimension), `:b` and `a:` (open ends), or a single
//! index `i` (the slice `i:i+1`, keeping the dimension). A 0-d array takes the empty
//! region. Every error names the array and its shape.

use std::ops::Range;

use super::{CliError, CliResult};
use floe::zarr::ArraySubset;

/// Parses `text` into a region of an array of `shape` at `array` (named in errors).
/// `None` means the whole array.
///
/// # Errors
/// [`CliError::Usage`] for bad syntax, the wrong number of dimensions, a start past
/// its stop, or a range outside the array.
pub(super) fn parse_region(
    text: Option<&str>,
    shape: &[u64],
    array: &str,
) -> CliResult<ArraySubset> {
    let Some(text) = text else {
        return Ok(ArraySubset::full(shape));
    };
    let bad = |reason: String| {
        CliError::Usage(format!(
            "bad --region `{text}` for array `{array}` of shape {shape:?}: {reason}"
        ))
    };
    let text_trimmed = text.trim();
    let items: Vec<&str> = if text_trimmed.is_empty() {
        Vec::new()
    } else {
        text_trimmed.split(',').map(str::trim).collect()
    };
    if items.len() != shape.len() {
        return Err(bad(format!(
            "{} dimension(s) given, the array has {}",
            items.len(),
            shape.len()
        )));
    }
    let ranges = items
        .iter()
        .zip(shape)
        .enumerate()
        .map(|(dim, (item, &len))| {
            parse_item(item, len).map_err(|r| bad(format!("dimension {dim}: {r}")))
        })
        .collect::<CliResult<Vec<Range<u64>>>>()?;
    Ok(ArraySubset::from_ranges(&ranges))
}

fn parse_index(s: &str) -> Result<u64, String> {
    if s.starts_with('-') {
        return Err(format!("negative index `{s}` (indices count from 0)"));
    }
    s.parse::<u64>()
        .map_err(|_| format!("`{s}` is not an index"))
}

/// One dimension's item against its length.
fn parse_item(item: &str, len: u64) -> Result<Range<u64>, String> {
    if item.is_empty() {
        return Err("empty item (use `:` for the whole dimension)".into());
    }
    let range = match item.split_once(':') {
        None => {
            let i = parse_index(item)?;
            if i >= len {
                return Err(format!("index {i} is out of bounds for length {len}"));
            }
            return Ok(i..i + 1);
        }
        Some((a, b)) => {
            let (a, b) = (a.trim(), b.trim());
            if b.contains(':') {
                return Err(format!("`{item}`: steps are not supported"));
            }
            let start = if a.is_empty() { 0 } else { parse_index(a)? };
            let stop = if b.is_empty() { len } else { parse_index(b)? };
            start..stop
        }
    };
    if range.start > range.end {
        return Err(format!("start {} is past stop {}", range.start, range.end));
    }
    if range.end > len {
        return Err(format!(
            "{}:{} is out of bounds for length {len}",
            range.start, range.end
        ));
    }
    Ok(range)
}

/// Formats a region as `a:b,c:d` (empty for 0-d).
pub(super) fn format_region(region: &ArraySubset) -> String {
    region
        .ranges()
        .iter()
        .map(|r| format!("{}:{}", r.start, r.end))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(text: &str, shape: &[u64]) -> Vec<Range<u64>> {
        parse_region(Some(text), shape, "/a").unwrap().ranges()
    }

    #[test]
    fn forms() {
        assert_eq!(ranges("0:10,5:7", &[20, 8]), vec![0..10, 5..7]);
        assert_eq!(ranges(":,3", &[4, 6]), vec![0..4, 3..4]);
        assert_eq!(ranges(":2, 1:", &[4, 6]), vec![0..2, 1..6]);
        assert_eq!(ranges("2:2", &[4]), vec![2..2]);
        assert_eq!(ranges("", &[]), Vec::<Range<u64>>::new());
        assert_eq!(
            parse_region(None, &[3, 2], "/a").unwrap().ranges(),
            vec![0..3, 0..2]
        );
    }

    #[test]
    fn errors_name_the_array() {
        for (text, shape, what) in [
            ("0:10", &[4u64, 6][..], "1 dimension(s) given"),
            ("0:5,0:2", &[4, 6], "out of bounds"),
            ("4,0", &[4, 6], "index 4 is out of bounds"),
            ("a:b,1", &[4, 6], "not an index"),
            ("3:1,1", &[4, 6], "past stop"),
            ("-1,1", &[4, 6], "negative"),
            ("0:1:2,1", &[4, 6], "steps"),
            (",1", &[4, 6], "empty item"),
        ] {
            let e = parse_region(Some(text), shape, "/grp/a")
                .unwrap_err()
                .to_string();
            assert!(e.contains("`/grp/a`") && e.contains(what), "{text}: {e}");
        }
    }
}
