//! How the codec pipeline's Rust calls tell the asyncio event loop that awaits them
//! that they ended, without a Python call from a Rust thread.
//!
//! `pyo3_async_runtimes::tokio::future_into_py` ends each call by moving to tokio's
//! blocking pool, taking the GIL there and calling `loop.call_soon_threadsafe`; a
//! call of ~30 us of Rust work cost ~150 us more in thread switches on the 2-core VM
//! (an empty region read: 153 us). Here a call that ends puts its outcome in a queue
//! and writes one byte to a socket the loop watches (`loop.add_reader`); the loop's
//! callback ([`Completions::take`], under the GIL on the loop's thread) drains the
//! queue and resolves the futures. Buffers a call borrowed are released there too,
//! so no Rust thread ever takes the GIL for a pipeline call.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use floe::zarr::ZarrError;
use pyo3::prelude::*;

use crate::borrowed_buffer::BorrowedBuffer;
use crate::errors::zarr_to_py;

/// One call that ended: its token, its outcome and the buffer it borrowed.
struct Ended {
    token: u64,
    outcome: Result<(), Failure>,
    buffer: Option<BorrowedBuffer>,
}

/// Why a call failed.
enum Failure {
    /// The array's error.
    Zarr(ZarrError),
    /// The task ended without an outcome (it panicked, or the runtime shut down).
    Lost,
}

/// The queue of ended calls and the socket that wakes the loop.
struct Shared {
    ended: Mutex<Vec<Ended>>,
    wake: UnixStream,
}

impl Shared {
    fn push(&self, ended: Ended) {
        if let Ok(mut queue) = self.ended.lock() {
            queue.push(ended);
        }
        // Queued before the byte is written, so the loop's drain that sees the byte
        // sees the call. A full socket already holds a wake-up: nothing is lost.
        let _ = (&self.wake).write(&[1]);
    }
}

/// Completions of pipeline calls for one event loop: `fileno()` is watched with
/// `loop.add_reader`, whose callback calls `take()`.
#[pyclass(module = "floe._floe", frozen)]
pub(crate) struct Completions {
    shared: Arc<Shared>,
    reader: UnixStream,
}

/// A call in flight: reports its outcome once, or [`Failure::Lost`] when dropped
/// without one (a panic in the task, or a runtime shutting down).
pub(crate) struct Pending {
    shared: Arc<Shared>,
    token: u64,
    buffer: Option<BorrowedBuffer>,
    reported: bool,
}

impl Pending {
    /// The borrowed buffer, for the call's duration.
    pub(crate) fn buffer(&mut self) -> &mut BorrowedBuffer {
        self.buffer
            .as_mut()
            .expect("a pending call keeps its buffer until it reports")
    }

    /// Reports the call's outcome to the loop.
    pub(crate) fn finish(mut self, outcome: Result<(), ZarrError>) {
        self.reported = true;
        self.shared.push(Ended {
            token: self.token,
            outcome: outcome.map_err(Failure::Zarr),
            buffer: self.buffer.take(),
        });
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.reported {
            self.shared.push(Ended {
                token: self.token,
                outcome: Err(Failure::Lost),
                buffer: self.buffer.take(),
            });
        }
    }
}

impl Completions {
    /// A call with `token` that keeps `buffer` exported until the loop takes its
    /// outcome.
    pub(crate) fn start(&self, token: u64, buffer: BorrowedBuffer) -> Pending {
        Pending {
            shared: Arc::clone(&self.shared),
            token,
            buffer: Some(buffer),
            reported: false,
        }
    }
}

#[pymethods]
impl Completions {
    /// A new queue and its socket pair (non-blocking).
    ///
    /// Raises `OSError` when the socket pair cannot be made.
    #[new]
    fn new() -> PyResult<Self> {
        let (reader, wake) = UnixStream::pair()?;
        reader.set_nonblocking(true)?;
        wake.set_nonblocking(true)?;
        Ok(Completions {
            shared: Arc::new(Shared {
                ended: Mutex::new(Vec::new()),
                wake,
            }),
            reader,
        })
    }

    /// The file descriptor the event loop watches for readability.
    fn fileno(&self) -> i32 {
        self.reader.as_raw_fd()
    }

    /// Drains the socket and returns the calls that ended since the last call, as
    /// `(token, exception or None)` pairs, releasing the buffers they borrowed.
    ///
    /// Holding the GIL (`_py`) is what lets the buffers be released here.
    fn take(&self, _py: Python<'_>) -> Vec<(u64, Option<PyErr>)> {
        let mut sink = [0u8; 512];
        loop {
            match (&self.reader).read(&mut sink) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let ended = self
            .shared
            .ended
            .lock()
            .map(|mut queue| std::mem::take(&mut *queue))
            .unwrap_or_default();
        ended
            .into_iter()
            .map(|e| {
                drop(e.buffer);
                let error = match e.outcome {
                    Ok(()) => None,
                    Err(Failure::Zarr(err)) => Some(zarr_to_py(err)),
                    Err(Failure::Lost) => Some(pyo3::exceptions::PyRuntimeError::new_err(
                        "the pipeline call ended without an outcome (its task panicked)",
                    )),
                };
                (e.token, error)
            })
            .collect()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Completions>()?;
    Ok(())
}
