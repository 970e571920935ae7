//! The native half of floe's zarr-python codec pipeline (`floe.codec_pipeline`).
//!
//! zarr-python hands a codec pipeline a whole batch of chunks per read or write. For
//! an array in a floe session whose basic selection is one box of the array, the
//! Python half turns that batch into the box (`start`, `shape`, in elements) and calls
//! [`PipelineArray::read`] or [`PipelineArray::write`] once: floe's region I/O then
//! resolves the chunk refs, fetches the bytes (batched through the store's `get_many`,
//! which coalesces reads of one object), runs the codecs on floe's compute pool,
//! fills missing chunks with the fill value, read-modify-writes partial chunks, reads
//! only the inner chunks a region needs from shards, and erases all-fill chunks unless
//! `write_empty_chunks`, all without the GIL. Only fixed-size data types go this way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use floe::zarr::store::Store;
use floe::zarr::subset::ArraySubset;
use floe::zarr::{Array, ArrayMetadata, ArrayOptions};
use pyo3::prelude::*;

use crate::borrowed_buffer::BorrowedBuffer;
use crate::completions::Completions;
use crate::errors::{error, read_only_error, zarr_to_py, Class, Kind};
use crate::session::NativeStore;

/// The byte size of `region` of `array` (fixed-size data types).
fn region_bytes(array: &Array, region: &ArraySubset) -> PyResult<usize> {
    let elem = array
        .data_type()
        .fixed_size()
        .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("not a fixed-size data type"))?;
    usize::try_from(region.num_elements())
        .ok()
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("the region is too large"))
}

/// One array of a floe session as the codec pipeline sees it: its metadata as
/// zarr-python holds it, and the session store its chunks live in.
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct PipelineArray {
    array: Array,
    /// Set once the session committed: writes are refused from then on.
    committed: Arc<AtomicBool>,
}

/// The region `start` + `shape` (elements), checked to have one length per dimension.
fn region(array: &Array, start: Vec<u64>, shape: Vec<u64>) -> PyResult<ArraySubset> {
    if start.len() != array.ndim() || shape.len() != array.ndim() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "a region of {} dimensions for an array of {}",
            start.len(),
            array.ndim()
        )));
    }
    Ok(ArraySubset::new(start, shape))
}

#[pymethods]
impl NativeStore {
    /// The pipeline's handle on the array at `path` (no leading `/`; `""` for the
    /// root) whose metadata document is `metadata` (JSON text of `zarr.json` for
    /// `zarr_format` 3, of `.zarray` for 2). Nothing is read.
    ///
    /// Raises `FormatError` when floe does not implement a codec, the data type or
    /// the chunk grid of the array, or when its data type is not fixed-size (strings):
    /// the caller then uses zarr-python's own pipeline.
    fn _pipeline_array(
        &self,
        path: &str,
        metadata: &str,
        zarr_format: u8,
    ) -> PyResult<PipelineArray> {
        let bad = |m: String| error(Class::Format, Kind::InvalidArrayMetadata, m);
        let json: serde_json::Value =
            serde_json::from_str(metadata).map_err(|e| bad(e.to_string()))?;
        let (meta, format) = match zarr_format {
            3 => (
                ArrayMetadata::from_json(&json).map_err(zarr_to_py)?,
                floe::zarr::node::ZarrFormat::V3,
            ),
            2 => (
                floe::zarr::translate_v2_array(&json, None).map_err(zarr_to_py)?,
                floe::zarr::node::ZarrFormat::V2,
            ),
            other => return Err(bad(format!("zarr_format {other}"))),
        };
        if meta.data_type.fixed_size().is_none() {
            return Err(bad(format!(
                "data type {:?} is not fixed-size",
                meta.data_type
            )));
        }
        let store: Arc<dyn Store> = Arc::new(self.inner.clone());
        let array = Array::from_metadata(store, path, meta, format).map_err(zarr_to_py)?;
        Ok(PipelineArray {
            array,
            committed: Arc::clone(&self.committed),
        })
    }
}

#[pymethods]
impl PipelineArray {
    /// Bytes of one element of the array (its fixed size).
    #[getter]
    fn item_size(&self) -> usize {
        self.array.data_type().fixed_size().unwrap_or(0)
    }

    /// Starts reading the region `start` + `shape` (elements) into `out`, a
    /// writable, C-contiguous buffer of exactly the region's byte size (native-endian
    /// elements in C order; zarr's pipeline passes a `uint8` view of its output
    /// array). The chunks are decoded straight into `out`'s memory, which stays
    /// exported (and so cannot be resized) until `completions.take()` returns the
    /// call's `token`; the GIL is not held meanwhile. Missing chunks read as the fill
    /// value. Returns at once; the outcome comes through `completions`: `None`, or
    /// `FormatError` naming the chunk key for a chunk that does not decode, or store
    /// errors as the store raises them.
    ///
    /// Raises `ValueError` for a wrong region or size, `TypeError` for an `out` that
    /// is read-only or not contiguous.
    fn read(
        &self,
        start: Vec<u64>,
        shape: Vec<u64>,
        out: &Bound<'_, PyAny>,
        completions: &Bound<'_, Completions>,
        token: u64,
    ) -> PyResult<()> {
        let region = region(&self.array, start, shape)?;
        let array = self.array.clone();
        let out = BorrowedBuffer::get(out, region_bytes(&array, &region)?, true)?;
        let mut call = completions.get().start(token, out);
        pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
            let outcome = array
                .read_region_into_bytes(&region, call.buffer().bytes_mut())
                .await;
            call.finish(outcome);
        });
        Ok(())
    }

    /// Starts writing `data` (a C-contiguous buffer of exactly the region's byte
    /// size: native-endian elements of the region `start` + `shape` in C order) into
    /// the array. Whole chunks are encoded (and stored, when uncompressed on a local
    /// disk) straight from `data`'s memory, which stays exported until
    /// `completions.take()` returns the call's `token`; partially covered chunks are
    /// read, modified and written back; chunks that end up all fill value are erased
    /// unless `write_empty_chunks`. The GIL is not held meanwhile. Returns at once;
    /// the outcome comes through `completions`: `None`, or `FormatError` naming the
    /// chunk key for an existing chunk that does not decode, or store errors.
    ///
    /// Raises `ReadOnlyError` once the session committed or when it is read-only,
    /// `ValueError` for a wrong region or size, `TypeError` for `data` that is not
    /// contiguous.
    fn write(
        &self,
        start: Vec<u64>,
        shape: Vec<u64>,
        data: &Bound<'_, PyAny>,
        write_empty_chunks: bool,
        completions: &Bound<'_, Completions>,
        token: u64,
    ) -> PyResult<()> {
        if self.committed.load(Ordering::Acquire) {
            return Err(read_only_error(
                data.py(),
                format!(
                    "cannot write array `{}`: the session committed and is read-only",
                    self.array.path()
                ),
            ));
        }
        let region = region(&self.array, start, shape)?;
        let input = BorrowedBuffer::get(data, region_bytes(&self.array, &region)?, false)?;
        let options: ArrayOptions = self
            .array
            .options()
            .clone()
            .write_empty_chunks(write_empty_chunks);
        let array = self.array.clone().with_options(options);
        let mut call = completions.get().start(token, input);
        pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
            let outcome = array
                .write_region_from_bytes(&region, call.buffer().bytes())
                .await;
            call.finish(outcome);
        });
        Ok(())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PipelineArray>()?;
    Ok(())
}
