//! `floe cat`: an array's values (or a region of them) as text, JSON or raw bytes.
//!
//! JSON and raw output are streamed in slabs along the first dimension (aligned to
//! chunk boundaries), so memory stays bounded for any array size.

use std::io::Write;
use std::sync::Arc;

use super::args::{CatFormat, RefArgs};
use super::region::parse_region;
use super::target::open_source;
use super::{text, CliError, CliResult};
use crate::format::NodePath;
use crate::zarr::{Array, ArraySubset, DataType, Store, ZarrError};

/// Largest number of elements read at once for JSON and raw output (at least one
/// row of chunks is always read).
const SLAB_ELEMENTS: u64 = 1 << 22;

/// What to print: the array, the region and the format.
pub struct CatRequest<'a> {
    /// Array path (`/a/b` or `a/b`).
    pub array: &'a str,
    /// `--region`, if given.
    pub region: Option<&'a str>,
    /// Output format.
    pub format: CatFormat,
}

/// Prints an array of the repository (or plain Zarr store) at `location`.
///
/// # Errors
/// Repository, ref and store errors; a missing array or a group; a bad region;
/// virtual chunks outside the `allow_virtual` prefixes; `raw` output of strings.
pub async fn cat(
    out: &mut impl Write,
    location: &str,
    at: &RefArgs,
    allow_virtual: &[String],
    request: &CatRequest<'_>,
) -> CliResult<()> {
    let source = open_source(location, at, allow_virtual).await?;
    let array = open_array(source.store(), request.array).await?;
    print_array(out, &array, request.region, request.format).await
}

/// Opens the array at `path`, with errors naming the absolute path.
///
/// # Errors
/// [`crate::Error::NodeNotFound`], [`crate::Error::NotAnArray`]; metadata and store
/// errors.
pub async fn open_array(store: Arc<dyn Store>, path: &str) -> CliResult<Array> {
    let node = NodePath::new(path).map_err(crate::Error::from)?;
    match Array::open(store, node.key_prefix()).await {
        Ok(a) => Ok(a),
        Err(ZarrError::NodeNotFound { .. }) => {
            Err(crate::Error::NodeNotFound { path: node }.into())
        }
        Err(ZarrError::WrongNodeType { .. }) => Err(crate::Error::NotAnArray { path: node }.into()),
        Err(e) => Err(e.into()),
    }
}

/// Prints `region` (default: all) of `array` in `format`.
///
/// # Errors
/// A bad region (naming the array); read errors; `raw` output of `string` arrays.
pub async fn print_array(
    out: &mut impl Write,
    array: &Array,
    region: Option<&str>,
    format: CatFormat,
) -> CliResult<()> {
    let name = format!("/{}", array.path());
    let subset = parse_region(region, array.shape(), &name)?;
    match format {
        CatFormat::Text => text::print(out, array, &subset, region.is_some()).await,
        CatFormat::Raw => {
            if *array.data_type() == DataType::String {
                return Err(CliError::Usage(format!(
                    "array `{name}` holds variable-length strings, which have no raw byte \
                     form: use --format json or text"
                )));
            }
            for slab in slabs(array, &subset) {
                out.write_all(&array.read_region_le_bytes(&slab).await?)?;
            }
            Ok(())
        }
        CatFormat::Json => {
            if subset.ndim() == 0 || subset.shape[0] == 0 {
                serde_json::to_writer(&mut *out, &array.read_region_json(&subset).await?)
                    .map_err(std::io::Error::from)?;
            } else {
                out.write_all(b"[")?;
                let mut first = true;
                for slab in slabs(array, &subset) {
                    let v = array.read_region_json(&slab).await?;
                    for item in v.as_array().into_iter().flatten() {
                        if !first {
                            out.write_all(b",")?;
                        }
                        first = false;
                        serde_json::to_writer(&mut *out, item).map_err(std::io::Error::from)?;
                    }
                }
                out.write_all(b"]")?;
            }
            out.write_all(b"\n")?;
            Ok(())
        }
    }
}

/// Splits `region` along its first dimension into slabs that end on chunk boundaries
/// and hold about [`SLAB_ELEMENTS`] elements (the whole region for 0-d arrays).
fn slabs(array: &Array, region: &ArraySubset) -> Vec<ArraySubset> {
    if region.ndim() == 0 || region.num_elements() == 0 {
        return vec![region.clone()];
    }
    let row: u64 = region.shape[1..].iter().product::<u64>().max(1);
    let chunk0 = array.chunk_shape()[0].max(1);
    let per_chunk_row = chunk0.saturating_mul(row).max(1);
    let height = chunk0.saturating_mul((SLAB_ELEMENTS / per_chunk_row).max(1));
    let (start, end) = (region.start[0], region.start[0] + region.shape[0]);
    let mut out = Vec::new();
    let mut s = start;
    while s < end {
        let e = ((s / height + 1) * height).min(end);
        let mut slab = region.clone();
        slab.start[0] = s;
        slab.shape[0] = e - s;
        out.push(slab);
        s = e;
    }
    out
}
