//! `floe cat`: an array's values (or a region of them) as text, JSON or raw bytes.
//!
//! JSON and raw output are streamed in C order, in blocks split along every dimension
//! (aligned to chunk boundaries where a block spans whole chunks), so memory stays
//! bounded for any array and region shape.

use std::io::Write;
use std::sync::Arc;

use super::args::{CatFormat, RefArgs, VirtualArgs};
use super::region::parse_region;
use super::target::open_source;
use super::{text, CliError, CliResult};
use floe::format::NodePath;
use floe::zarr::data_type::element_to_json;
use floe::zarr::subset::{checked_product, indices_in, saturating_product};
use floe::zarr::RegionFormats;
use floe::zarr::{Array, ArrayBytes, ArraySubset, DataType, Store, ZarrError};
use serde_json::Value;

/// Largest number of elements read at once for JSON and raw output.
const SLAB_ELEMENTS: u64 = 1 << 22;

/// What to print: the array, the region and the format.
pub(super) struct CatRequest<'a> {
    /// Array path (`/a/b` or `a/b`).
    pub(crate) array: &'a str,
    /// `--region`, if given.
    pub(crate) region: Option<&'a str>,
    /// Output format.
    pub(crate) format: CatFormat,
}

/// Prints an array of the repository (or plain Zarr store) at `location`.
///
/// # Errors
/// Repository, ref and store errors; a missing array or a group; a bad region;
/// virtual chunks outside the `virtual_reads` prefixes or past its deadline; `raw`
/// output of strings.
pub(super) async fn cat(
    out: &mut impl Write,
    location: &str,
    at: &RefArgs,
    virtual_reads: &VirtualArgs,
    request: &CatRequest<'_>,
) -> CliResult<()> {
    let source = open_source(location, at, virtual_reads).await?;
    let array = open_array(source.store(), request.array).await?;
    print_array(out, &array, request.region, request.format).await
}

/// Opens the array at `path`, with errors naming the absolute path.
///
/// # Errors
/// [`floe::Error::NodeNotFound`], [`floe::Error::NotAnArray`]; metadata and store
/// errors.
pub(super) async fn open_array(store: Arc<dyn Store>, path: &str) -> CliResult<Array> {
    let node = NodePath::new(path).map_err(floe::Error::from)?;
    match Array::open(store, node.key_prefix()).await {
        Ok(a) => Ok(a),
        Err(ZarrError::NodeNotFound { .. }) => Err(floe::Error::NodeNotFound { path: node }.into()),
        Err(ZarrError::WrongNodeType { .. }) => Err(floe::Error::NotAnArray { path: node }.into()),
        Err(e) => Err(e.into()),
    }
}

/// Prints `region` (default: all) of `array` in `format`.
///
/// JSON and raw output stream the region in C order, in blocks of at most
/// [`SLAB_ELEMENTS`] elements split along every dimension, so memory stays bounded by
/// one block plus the chunks being decoded, whatever the array's shape.
///
/// # Errors
/// A bad region (naming the array); read errors; `raw` output of `string` arrays;
/// [`ZarrError::TooLarge`] when the region's output size (elements times element size)
/// overflows `u64`.
pub(super) async fn print_array(
    out: &mut impl Write,
    array: &Array,
    region: Option<&str>,
    format: CatFormat,
) -> CliResult<()> {
    let name = format!("/{}", array.path());
    let subset = parse_region(region, array.shape(), &name)?;
    let array = &bounded_concurrency(array);
    match format {
        CatFormat::Text => text::print(out, array, &subset, region.is_some()).await,
        CatFormat::Raw => {
            if *array.data_type() == DataType::String {
                return Err(CliError::Usage(format!(
                    "array `{name}` holds variable-length strings, which have no raw byte \
                     form: use --format json or text"
                )));
            }
            check_output_size(array, &subset)?;
            for block in blocks(array, &subset, SLAB_ELEMENTS) {
                out.write_all(&array.read_region_le_bytes(&block).await?)?;
            }
            Ok(())
        }
        CatFormat::Json => {
            check_output_size(array, &subset)?;
            print_json(out, array, &subset).await?;
            out.write_all(b"\n")?;
            Ok(())
        }
    }
}

/// Chunks decoded at once are bounded to about [`INFLIGHT_BYTES`] (at least one).
fn bounded_concurrency(array: &Array) -> Array {
    let elem = array.data_type().fixed_size().unwrap_or(32).max(1) as u64;
    let chunk_bytes = saturating_product(array.chunk_shape()).saturating_mul(elem);
    let limit = usize::try_from(INFLIGHT_BYTES / chunk_bytes.max(1)).unwrap_or(usize::MAX);
    let mut options = array.options().clone();
    options.concurrency = options.concurrency.min(limit).max(1);
    array.clone().with_options(options)
}

/// Bytes of decoded chunks `cat` keeps in flight (when chunks are smaller than this).
const INFLIGHT_BYTES: u64 = 64 << 20;

/// Refuses a region whose output size cannot even be computed: elements times element
/// size (1 for strings and zero-sized elements) must fit in `u64`.
fn check_output_size(array: &Array, region: &ArraySubset) -> CliResult<()> {
    let elem = array.data_type().fixed_size().unwrap_or(1).max(1) as u64;
    // Empty regions print one `[]` per position of the dimensions before the first
    // zero-length one.
    let shown = match region.shape.iter().position(|&n| n == 0) {
        Some(z) => checked_product(&region.shape[..z]),
        None => region.checked_num_elements(),
    };
    if shown.and_then(|n| n.checked_mul(elem)).is_none() {
        return Err(ZarrError::TooLarge {
            path: array.path().to_string(),
            reason: format!(
                "region of shape {:?} is too large to print (its size overflows 64 bits)",
                region.shape
            ),
        }
        .into());
    }
    Ok(())
}

/// Prints `region` as nested JSON lists, element by element in C order.
async fn print_json(out: &mut impl Write, array: &Array, region: &ArraySubset) -> CliResult<()> {
    let dt = array.data_type();
    if let Some(z) = region.shape.iter().position(|&n| n == 0) {
        // No elements: `[]` at the zero-length dimension, nested in the ones before.
        let mut nest = Nester::new(&region.shape[..z]);
        for _ in 0..checked_product(&region.shape[..z]).unwrap_or(0) {
            nest.element(out, b"[]")?;
        }
        return Ok(());
    }
    let mut nest = Nester::new(&region.shape);
    let mut text = Vec::new();
    for block in blocks(array, region, SLAB_ELEMENTS) {
        let data = array.read_region_bytes(&block).await?;
        let n = usize::try_from(block.num_elements()).unwrap_or(usize::MAX);
        for i in 0..n {
            let value = match &data {
                ArrayBytes::Strings(v) => v.get(i).cloned().map(Value::String),
                ArrayBytes::Fixed(b) => match dt.fixed_size() {
                    Some(size) if size > 0 => b
                        .get(i * size..(i + 1) * size)
                        .map(|e| element_to_json(dt, e)),
                    _ => Some(element_to_json(dt, &[])),
                },
            };
            let Some(value) = value else { break };
            text.clear();
            serde_json::to_writer(&mut text, &value).map_err(std::io::Error::from)?;
            nest.element(out, &text)?;
        }
    }
    Ok(())
}

/// Writes the brackets and commas around elements given in C order, for a region of
/// `shape`: `[[a,b],[c,d]]`. Needs no buffer: the bracket structure follows from the
/// position of each element.
struct Nester {
    shape: Vec<u64>,
    index: Vec<u64>,
    first: bool,
}

impl Nester {
    fn new(shape: &[u64]) -> Self {
        Nester {
            shape: shape.to_vec(),
            index: vec![0; shape.len()],
            first: true,
        }
    }

    /// Writes the next element's text with the brackets that open before it and close
    /// after it.
    fn element(&mut self, out: &mut impl Write, text: &[u8]) -> std::io::Result<()> {
        if !self.first {
            out.write_all(b",")?;
        }
        self.first = false;
        let ndim = self.shape.len();
        let opens = self.index.iter().rev().take_while(|&&i| i == 0).count();
        for _ in 0..opens {
            out.write_all(b"[")?;
        }
        out.write_all(text)?;
        let closes = self
            .index
            .iter()
            .zip(&self.shape)
            .rev()
            .take_while(|(i, n)| **i + 1 == **n)
            .count();
        for _ in 0..closes {
            out.write_all(b"]")?;
        }
        // Advance the odometer (last dimension fastest).
        for d in (0..ndim).rev() {
            self.index[d] += 1;
            if self.index[d] < self.shape[d] {
                break;
            }
            self.index[d] = 0;
        }
        Ok(())
    }
}

/// Splits `region` into boxes that tile it in C order, each of at most `max`
/// elements (at least 1): dimensions after some split dimension `d` are kept whole,
/// dimension `d` is cut into runs ending on multiples of a height aligned to the
/// chunk length where possible, and dimensions before `d` are iterated one index at
/// a time. The whole region for 0-d arrays; nothing for empty regions.
fn blocks<'a>(
    array: &Array,
    region: &'a ArraySubset,
    max: u64,
) -> Box<dyn Iterator<Item = ArraySubset> + 'a> {
    let ndim = region.ndim();
    if ndim == 0 {
        return Box::new(std::iter::once(region.clone()));
    }
    if region.shape.contains(&0) {
        return Box::new(std::iter::empty());
    }
    let max = max.max(1);
    // Split dimension: the first whose trailing dimensions fit in `max` elements.
    let d = (0..ndim)
        .find(|&d| saturating_product(&region.shape[d + 1..]) <= max)
        .unwrap_or(ndim - 1);
    let inner = saturating_product(&region.shape[d + 1..]).max(1);
    let rows = (max / inner).max(1);
    let chunk = array.chunk_shape().get(d).copied().unwrap_or(1).max(1);
    // Align runs to chunk boundaries when a run holds at least one chunk length.
    let height = if rows >= chunk {
        rows / chunk * chunk
    } else {
        rows
    };
    let (start, end) = (region.start[d], region.start[d] + region.shape[d]);
    let outer_start = region.start[..d].to_vec();
    let outer_shape = region.shape[..d].to_vec();
    Box::new(
        indices_in(&outer_start, &outer_shape).flat_map(move |outer| {
            let mut s = start;
            std::iter::from_fn(move || {
                if s >= end {
                    return None;
                }
                let next = (s / height)
                    .checked_add(1)
                    .and_then(|k| k.checked_mul(height))
                    .map_or(end, |e| e.min(end));
                let mut block = region.clone();
                for (i, &o) in outer.iter().enumerate() {
                    block.start[i] = o;
                    block.shape[i] = 1;
                }
                block.start[d] = s;
                block.shape[d] = next - s;
                s = next;
                Some(block)
            })
        }),
    )
}
