//! `floe cat --format text`: a header line, then the values as numpy-like nested
//! brackets with right-aligned columns.
//!
//! Regions of more than [`SUMMARY_THRESHOLD`] elements are summarized the way numpy
//! prints large arrays: along every dimension longer than `2 * EDGE_ITEMS`, only the
//! first and last [`EDGE_ITEMS`] indices are shown, with `...` between them. Only those
//! edges are read, so printing a huge array is fast and needs little memory.

use std::io::Write;
use std::ops::Range;

use base64::Engine as _;
use half::f16;

use super::region::format_region;
use super::CliResult;
use floe::zarr::data_type::element_to_json;
use floe::zarr::{Array, ArrayBytes, ArraySubset, DataType, ZarrError};

/// Regions with more elements than this are summarized.
pub(super) const SUMMARY_THRESHOLD: u64 = 1000;
/// Indices shown at each end of a summarized dimension.
pub(super) const EDGE_ITEMS: u64 = 3;
/// Largest number of cells a text rendering holds (6 per summarized dimension).
const MAX_CELLS: usize = 1 << 20;
/// Line width for wrapping long rows.
const LINE_WIDTH: usize = 75;

/// Prints `region` of `array` as text. `region_given` adds the region to the header.
///
/// # Errors
/// Array read errors.
pub(super) async fn print(
    out: &mut impl Write,
    array: &Array,
    region: &ArraySubset,
    region_given: bool,
) -> CliResult<()> {
    let summarize = region.num_elements() > SUMMARY_THRESHOLD;
    let mut header = format!(
        "/{}  {}  shape {:?}",
        array.path(),
        array.data_type(),
        array.shape()
    );
    if region_given {
        header.push_str(&format!(
            "  region {} (shape {:?})",
            format_region(region),
            region.shape
        ));
    }
    if summarize {
        let count = region
            .checked_num_elements()
            .map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
        header.push_str(&format!(
            "  [{count} elements, summarized: use --region for a part, --format json for all]"
        ));
    }
    writeln!(out, "{header}")?;
    // Segments of each dimension to read, relative to the region start.
    let segments: Vec<Vec<Range<u64>>> = region
        .shape
        .iter()
        .map(|&len| {
            if summarize && len > 2 * EDGE_ITEMS {
                vec![0..EDGE_ITEMS, len - EDGE_ITEMS..len]
            } else {
                std::iter::once(0..len).collect()
            }
        })
        .collect();
    let shape: Vec<usize> = segments
        .iter()
        .map(|s| s.iter().map(|r| (r.end - r.start) as usize).sum())
        .collect();
    let split: Vec<Option<usize>> = segments
        .iter()
        .map(|s| (s.len() == 2).then_some(EDGE_ITEMS as usize))
        .collect();
    // At most 6 shown per dimension (1000 elements unsummarized), but 6^ndim still
    // grows without bound: refuse rather than allocate an unprintable grid.
    let total = shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= MAX_CELLS)
        .ok_or_else(|| ZarrError::TooLarge {
            path: array.path().to_string(),
            reason: format!(
                "the text summary of a region of shape {:?} has too many cells: use \
                 --format json",
                region.shape
            ),
        })?;
    let mut cells = vec![String::new(); total];
    if total > 0 {
        for combo in combinations(&segments) {
            let start: Vec<u64> = combo
                .iter()
                .zip(&region.start)
                .map(|(r, s)| s.saturating_add(r.start))
                .collect();
            let box_shape: Vec<u64> = combo.iter().map(|r| r.end - r.start).collect();
            let data = array
                .read_region_bytes(&ArraySubset::new(start, box_shape.clone()))
                .await?;
            let texts = format_elements(&data, array.data_type());
            // Offsets of this box in the gathered grid.
            let offsets: Vec<usize> = combo
                .iter()
                .zip(&segments)
                .map(|(r, segs)| {
                    if r.start == segs[0].start {
                        0
                    } else {
                        EDGE_ITEMS as usize
                    }
                })
                .collect();
            place(&mut cells, &shape, &offsets, &box_shape, texts);
        }
    }
    // Numbers are right-aligned in columns; strings are not padded (as numpy).
    let strings = matches!(
        array.data_type(),
        DataType::String | DataType::FixedLengthUtf32 { .. }
    );
    let width = if strings {
        0
    } else {
        cells.iter().map(|c| c.chars().count()).max().unwrap_or(0)
    };
    let mut text = String::new();
    if shape.is_empty() {
        text.push_str(cells.first().map(String::as_str).unwrap_or(""));
    } else if total == 0 {
        text.push_str("[]");
    } else {
        let layout = Layout {
            shape: &shape,
            split: &split,
            width,
        };
        layout.render(&cells, 0, &mut text);
    }
    writeln!(out, "{text}")?;
    Ok(())
}

/// Every combination of one segment per dimension (one empty combination for 0-d).
fn combinations(segments: &[Vec<Range<u64>>]) -> Vec<Vec<Range<u64>>> {
    let mut out: Vec<Vec<Range<u64>>> = vec![Vec::new()];
    for segs in segments {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                segs.iter().map(move |s| {
                    let mut p = prefix.clone();
                    p.push(s.clone());
                    p
                })
            })
            .collect();
    }
    out
}

/// Copies a box of cells (C order, `box_shape`) into the grid of `shape` at `offsets`.
fn place(
    cells: &mut [String],
    shape: &[usize],
    offsets: &[usize],
    box_shape: &[u64],
    texts: Vec<String>,
) {
    let ndim = shape.len();
    let mut idx = vec![0usize; ndim];
    for t in texts {
        let mut flat = 0;
        for d in 0..ndim {
            flat = flat * shape[d] + offsets[d] + idx[d];
        }
        cells[flat] = t;
        for d in (0..ndim).rev() {
            idx[d] += 1;
            if (idx[d] as u64) < box_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

struct Layout<'a> {
    shape: &'a [usize],
    /// Where a summarized dimension shows `...` (index of the first trailing item).
    split: &'a [Option<usize>],
    width: usize,
}

impl Layout<'_> {
    fn cell(&self, s: &str) -> String {
        format!("{s:>w$}", w = self.width)
    }

    /// Renders the sub-array at `dim` whose cells are `cells` (C order).
    fn render(&self, cells: &[String], dim: usize, out: &mut String) {
        let n = self.shape[dim];
        let indent = " ".repeat(dim + 1);
        out.push('[');
        if dim + 1 == self.shape.len() {
            let mut line_len = dim + 1;
            for (i, cell) in cells.iter().enumerate().take(n) {
                let mut tokens = Vec::with_capacity(2);
                if self.split[dim] == Some(i) {
                    tokens.push("...".to_string());
                }
                tokens.push(self.cell(cell));
                for tok in tokens {
                    let first = out.ends_with('[');
                    let need = tok.chars().count() + usize::from(!first);
                    if !first && line_len + need + 1 > LINE_WIDTH {
                        out.push('\n');
                        out.push_str(&indent);
                        line_len = indent.len();
                    } else if !first {
                        out.push(' ');
                        line_len += 1;
                    }
                    line_len += tok.chars().count();
                    out.push_str(&tok);
                }
            }
        } else {
            let stride: usize = self.shape[dim + 1..].iter().product();
            let blank_lines = "\n".repeat(self.shape.len() - dim - 1);
            for i in 0..n {
                if i > 0 {
                    out.push_str(&blank_lines);
                    out.push_str(&indent);
                }
                if self.split[dim] == Some(i) {
                    out.push_str("...");
                    out.push_str(&blank_lines);
                    out.push_str(&indent);
                }
                self.render(&cells[i * stride..(i + 1) * stride], dim + 1, out);
            }
        }
        out.push(']');
    }
}

/// Text of every element of `data`.
fn format_elements(data: &ArrayBytes, dt: &DataType) -> Vec<String> {
    match data {
        ArrayBytes::Strings(v) => v.iter().map(|s| quote(s)).collect(),
        ArrayBytes::Fixed(b) => match dt.fixed_size() {
            Some(size) if size > 0 => b
                .chunks_exact(size)
                .map(|e| format_element(dt, e))
                .collect(),
            _ => Vec::new(),
        },
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn float_text(v: f64, shortest: String) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        String::from(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        shortest
    }
}

fn f32_text(v: f32) -> String {
    float_text(f64::from(v), format!("{v:?}"))
}

fn f64_text(v: f64) -> String {
    float_text(v, format!("{v:?}"))
}

fn complex_text(re: String, im: String) -> String {
    if im.starts_with('-') {
        format!("{re}{im}j")
    } else {
        format!("{re}+{im}j")
    }
}

/// Text of one fixed-size element (native-endian bytes).
fn format_element(dt: &DataType, b: &[u8]) -> String {
    let f32_at = |i: usize| f32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let f64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[i..i + 8]);
        f64::from_ne_bytes(a)
    };
    match dt {
        DataType::Float16 => f32_text(f16::from_ne_bytes([b[0], b[1]]).to_f32()),
        DataType::Float32 => f32_text(f32_at(0)),
        DataType::Float64 => f64_text(f64_at(0)),
        DataType::Complex64 => complex_text(f32_text(f32_at(0)), f32_text(f32_at(4))),
        DataType::Complex128 => complex_text(f64_text(f64_at(0)), f64_text(f64_at(8))),
        DataType::RawBits { .. } => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            format!("0x{hex}")
        }
        DataType::NullTerminatedBytes { .. } => {
            let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
            format!("b\"{}\"", b[..end].escape_ascii())
        }
        DataType::RawBytes { .. } => {
            format!(
                "base64:{}",
                base64::engine::general_purpose::STANDARD.encode(b)
            )
        }
        _ => match element_to_json(dt, b) {
            serde_json::Value::String(s) => quote(&s),
            v => v.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(shape: &[usize], split: &[Option<usize>], cells: &[&str]) -> String {
        let cells: Vec<String> = cells.iter().map(|s| s.to_string()).collect();
        let width = cells.iter().map(String::len).max().unwrap_or(0);
        let l = Layout {
            shape,
            split,
            width,
        };
        let mut s = String::new();
        l.render(&cells, 0, &mut s);
        s
    }

    #[test]
    fn nested_brackets() {
        assert_eq!(render(&[3], &[None], &["1", "22", "3"]), "[ 1 22  3]");
        assert_eq!(
            render(&[2, 2], &[None, None], &["0", "1", "10", "11"]),
            "[[ 0  1]\n [10 11]]"
        );
        assert_eq!(
            render(&[2, 1, 2], &[None; 3], &["1", "2", "3", "4"]),
            "[[[1 2]]\n\n [[3 4]]]"
        );
        assert_eq!(
            render(&[6], &[Some(3)], &["0", "1", "2", "7", "8", "9"]),
            "[0 1 2 ... 7 8 9]"
        );
        assert_eq!(
            render(&[6, 1], &[Some(3), None], &["0", "1", "2", "7", "8", "9"]),
            "[[0]\n [1]\n [2]\n ...\n [7]\n [8]\n [9]]"
        );
    }

    #[test]
    fn elements() {
        assert_eq!(
            format_element(&DataType::Float32, &0.1f32.to_ne_bytes()),
            "0.1"
        );
        assert_eq!(
            format_element(&DataType::Float64, &1.0f64.to_ne_bytes()),
            "1.0"
        );
        assert_eq!(
            format_element(&DataType::Float64, &f64::NAN.to_ne_bytes()),
            "nan"
        );
        assert_eq!(
            format_element(&DataType::Int16, &(-7i16).to_ne_bytes()),
            "-7"
        );
        assert_eq!(format_element(&DataType::Bool, &[1]), "true");
        let mut c = 1.5f32.to_ne_bytes().to_vec();
        c.extend((-2.0f32).to_ne_bytes());
        assert_eq!(format_element(&DataType::Complex64, &c), "1.5-2.0j");
    }
}
