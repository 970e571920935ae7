//! Per-thread zstd contexts, shared by the Icechunk file envelope
//! ([`crate::format::envelope`]) and the Zarr `zstd` codec: creating a context
//! allocates (and faults in) megabytes of tables, more than compressing a small
//! snapshot or a 1 MiB chunk costs, so each thread keeps one of each and reuses it.

use std::cell::RefCell;
use std::io;

use zstd::bulk::{Compressor, Decompressor};

thread_local! {
    /// This thread's compression context, with the level and checksum flag it is set to.
    static COMPRESSOR: RefCell<Option<(i32, bool, Compressor<'static>)>> =
        const { RefCell::new(None) };
    /// This thread's decompression context.
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's compression context set to `level` and `checksum`
/// (RFC 8878 content checksum); frames it makes are byte for byte those of a new
/// context with the same settings.
///
/// # Errors
/// zstd's, creating or configuring the context, or `f`'s.
pub(crate) fn with_compressor<R>(
    level: i32,
    checksum: bool,
    f: impl FnOnce(&mut Compressor<'static>) -> io::Result<R>,
) -> io::Result<R> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (set_level, set_checksum, c) = match slot.as_mut() {
            Some(s) => s,
            // A new context writes no checksum until told to.
            None => slot.insert((level, false, Compressor::new(level)?)),
        };
        if *set_level != level {
            c.set_compression_level(level)?;
            *set_level = level;
        }
        if *set_checksum != checksum {
            c.include_checksum(checksum)?;
            *set_checksum = checksum;
        }
        f(c)
    })
}

/// Runs `f` with this thread's decompression context.
///
/// # Errors
/// zstd's, creating the context, or `f`'s.
pub(crate) fn with_decompressor<R>(
    f: impl FnOnce(&mut Decompressor<'static>) -> io::Result<R>,
) -> io::Result<R> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let d = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(Decompressor::new()?),
        };
        f(d)
    })
}
