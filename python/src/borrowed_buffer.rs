//! A Python buffer's memory lent to Rust for one region read or write of the codec
//! pipeline, without the GIL and without a copy.
//!
//! This is the crate's only `unsafe` code. zarr-python hands its codec pipeline the
//! output array of a read (which it allocated for that read) and the value of a write
//! (the caller's array, whose owner is blocked until the write returns); zarr's own
//! pipeline decodes into and encodes from views of them asynchronously, and
//! zarrs-python's pipeline lends them to Rust the same way. Before stop 39 floe copied
//! each batch into a Rust buffer while holding the GIL (256 MiB: ~20 ms into memory
//! already touched, ~126 ms into fresh memory on the 2-core VM) and out of it again
//! for reads.

#![allow(unsafe_code)]

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The memory of a C-contiguous Python buffer of exactly `len` bytes, exported for
/// as long as this value lives (the exporter keeps it allocated and in place: numpy
/// refuses to resize an array while it is exported).
pub(crate) struct BorrowedBuffer {
    buf: PyBuffer<u8>,
    len: usize,
    /// Taken with `writable` and checked not read-only.
    writable: bool,
}

impl BorrowedBuffer {
    /// Exports `obj`'s buffer (any object with the buffer protocol; zarr's pipeline
    /// passes `uint8` views of numpy arrays), checked to be C-contiguous, `len` bytes
    /// long and, when `writable`, not read-only.
    ///
    /// # Errors
    /// `TypeError` for an object without the buffer protocol, a non-contiguous or (when
    /// `writable`) read-only buffer; `ValueError` for a buffer of another length.
    pub(crate) fn get(obj: &Bound<'_, PyAny>, len: usize, writable: bool) -> PyResult<Self> {
        let buf = PyBuffer::<u8>::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("the buffer is not C-contiguous"));
        }
        if writable && buf.readonly() {
            return Err(PyTypeError::new_err("the output buffer is read-only"));
        }
        if buf.len_bytes() != len {
            return Err(PyValueError::new_err(format!(
                "the buffer holds {} bytes, the region {len}",
                buf.len_bytes()
            )));
        }
        Ok(Self { buf, len, writable })
    }

    /// The buffer's bytes, for as long as `self` is borrowed.
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `buf` is an export of `len` contiguous bytes (checked in `get`) that
        // stays valid and in place until `buf` is released on drop, which the borrow of
        // `self` outlives. Python code in another thread could write the same memory
        // meanwhile; zarr gives its pipeline buffers no other code uses during the call.
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr().cast::<u8>(), self.len) }
    }

    /// The buffer's bytes, writable, for as long as `self` is borrowed mutably.
    ///
    /// # Panics
    /// When the buffer was not taken `writable` (a bug in the caller).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        assert!(self.writable, "a buffer taken read-only written to");
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `bytes`; the export is writable and `&mut self` makes this the
        // only slice of it in Rust while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.buf.buf_ptr().cast::<u8>(), self.len) }
    }
}
