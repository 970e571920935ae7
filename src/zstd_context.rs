//! Per-thread zstd contexts, shared by the Icechunk file envelope
//! ([`crate::format::envelope`]) and the Zarr `zstd` codec: creating a context
//! allocates (and faults in) megabytes of tables, more than compressing a small
//! snapshot or a 1 MiB chunk costs, so each thread keeps one of each and reuses it.
//!
//! Zarr chunks have a context of their own, [`ChunkCompressor`], made with zstd-sys
//! directly: it turns off zstd 1.5.7's block pre-splitter, which no safe binding can
//! set. zarr-python's `ZstdCodec` compresses with numcodecs, whose zstd is 1.5.6 and
//! has no pre-splitter; with it off, floe writes the same chunk bytes as zarr-python
//! (and Icechunk through it) at the same level, a third faster than with it on.

use std::cell::RefCell;
use std::io;
use std::ptr::NonNull;

use zstd::bulk::{Compressor, Decompressor};
use zstd_sys::ZSTD_cParameter;

thread_local! {
    /// This thread's compression context, with the level and checksum flag it is set to.
    static COMPRESSOR: RefCell<Option<(i32, bool, Compressor<'static>)>> =
        const { RefCell::new(None) };
    /// This thread's context for Zarr chunks, with the level and checksum flag it is set to.
    static CHUNK_COMPRESSOR: RefCell<Option<(i32, bool, ChunkCompressor)>> =
        const { RefCell::new(None) };
    /// This thread's decompression context.
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// A compression context whose level and checksum flag can be changed in place.
trait Settable: Sized {
    /// A new context at `level`, writing no checksum.
    fn create(level: i32) -> io::Result<Self>;
    fn set_level(&mut self, level: i32) -> io::Result<()>;
    fn set_checksum(&mut self, checksum: bool) -> io::Result<()>;
}

impl Settable for Compressor<'static> {
    fn create(level: i32) -> io::Result<Self> {
        Compressor::new(level)
    }
    fn set_level(&mut self, level: i32) -> io::Result<()> {
        self.set_compression_level(level)
    }
    fn set_checksum(&mut self, checksum: bool) -> io::Result<()> {
        self.include_checksum(checksum)
    }
}

/// Runs `f` with the context in `cell` (made on first use) set to `level` and
/// `checksum`.
fn with_context<C: Settable, R>(
    cell: &RefCell<Option<(i32, bool, C)>>,
    level: i32,
    checksum: bool,
    f: impl FnOnce(&mut C) -> io::Result<R>,
) -> io::Result<R> {
    let mut slot = cell.borrow_mut();
    let (set_level, set_checksum, c) = match slot.as_mut() {
        Some(s) => s,
        // A new context writes no checksum until told to.
        None => slot.insert((level, false, C::create(level)?)),
    };
    if *set_level != level {
        c.set_level(level)?;
        *set_level = level;
    }
    if *set_checksum != checksum {
        c.set_checksum(checksum)?;
        *set_checksum = checksum;
    }
    f(c)
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
    COMPRESSOR.with(|cell| with_context(cell, level, checksum, f))
}

/// Runs `f` with this thread's Zarr chunk context ([`ChunkCompressor`]) set to
/// `level` and `checksum`.
///
/// # Errors
/// zstd's, creating or configuring the context, or `f`'s.
pub(crate) fn with_chunk_compressor<R>(
    level: i32,
    checksum: bool,
    f: impl FnOnce(&mut ChunkCompressor) -> io::Result<R>,
) -> io::Result<R> {
    CHUNK_COMPRESSOR.with(|cell| with_context(cell, level, checksum, f))
}

/// zstd's `ZSTD_c_blockSplitterLevel` (an experimental parameter of zstd 1.5.7,
/// numbered in the stable enum): 1 is "no splitting".
const BLOCK_SPLITTER_LEVEL: ZSTD_cParameter = ZSTD_cParameter::ZSTD_c_experimentalParam20;

/// A zstd compression context with the block pre-splitter off (see the module's
/// documentation): frames are those of zstd 1.5.6 at the same level, as
/// zarr-python's `ZstdCodec` writes them.
pub(crate) struct ChunkCompressor {
    /// The context, owned: freed on drop.
    ctx: NonNull<zstd_sys::ZSTD_CCtx>,
}

/// `code` as zstd's error, or the count it holds.
fn check(code: usize) -> io::Result<usize> {
    // SAFETY: ZSTD_isError takes any value.
    if unsafe { zstd_sys::ZSTD_isError(code) } == 0 {
        return Ok(code);
    }
    Err(io::Error::other(format!(
        "zstd: {}",
        zstd::zstd_safe::get_error_name(code)
    )))
}

impl ChunkCompressor {
    fn set(&mut self, parameter: ZSTD_cParameter, value: i32) -> io::Result<()> {
        // SAFETY: `ctx` is a live context this value owns.
        check(unsafe { zstd_sys::ZSTD_CCtx_setParameter(self.ctx.as_ptr(), parameter, value) })
            .map(|_| ())
    }

    /// Compresses `source` into one frame that replaces the contents of `out`;
    /// returns its length in bytes. `out` needs a capacity of at least
    /// `compress_bound(source.len())` bytes to be sure to hold it.
    ///
    /// # Errors
    /// zstd's (`out` too small, among others).
    pub(crate) fn compress_to_buffer(
        &mut self,
        source: &[u8],
        out: &mut Vec<u8>,
    ) -> io::Result<usize> {
        out.clear();
        let room = out.spare_capacity_mut();
        // SAFETY: `ctx` is live; zstd writes at most `room.len()` bytes into `room`
        // and reads `source.len()` bytes of `source`.
        let written = check(unsafe {
            zstd_sys::ZSTD_compress2(
                self.ctx.as_ptr(),
                room.as_mut_ptr().cast(),
                room.len(),
                source.as_ptr().cast(),
                source.len(),
            )
        })?;
        // SAFETY: zstd initialised the first `written` bytes (at most `room.len()`).
        unsafe { out.set_len(written) };
        Ok(written)
    }
}

impl Settable for ChunkCompressor {
    fn create(level: i32) -> io::Result<Self> {
        // SAFETY: ZSTD_createCCtx returns a new context, or null when out of memory.
        let ctx = NonNull::new(unsafe { zstd_sys::ZSTD_createCCtx() })
            .ok_or_else(|| io::Error::other("zstd: cannot create a compression context"))?;
        let mut c = ChunkCompressor { ctx };
        c.set(BLOCK_SPLITTER_LEVEL, 1)?;
        c.set_level(level)?;
        Ok(c)
    }
    fn set_level(&mut self, level: i32) -> io::Result<()> {
        self.set(ZSTD_cParameter::ZSTD_c_compressionLevel, level)
    }
    fn set_checksum(&mut self, checksum: bool) -> io::Result<()> {
        self.set(ZSTD_cParameter::ZSTD_c_checksumFlag, i32::from(checksum))
    }
}

impl Drop for ChunkCompressor {
    fn drop(&mut self) {
        // SAFETY: `ctx` is owned by this value and not used after.
        unsafe { zstd_sys::ZSTD_freeCCtx(self.ctx.as_ptr()) };
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 MiB of float32 that zstd compresses a little, as measured data does: the
    /// high bytes repeat, the low ones are noise (a fixed xorshift stream).
    fn floats() -> Vec<u8> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..1 << 18)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = 1.0 + (x % 1000) as f32 / 997.0;
                v.to_le_bytes()
            })
            .collect()
    }

    fn chunk_frame(level: i32, checksum: bool, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
        with_chunk_compressor(level, checksum, |c| c.compress_to_buffer(data, &mut out)).unwrap();
        out
    }

    #[test]
    fn chunk_frames_decode_and_follow_the_settings() {
        let data = floats();
        // The same thread's context, switched between levels and checksum flags:
        // every frame decodes to the input, carries the checksum flag it was asked
        // for (bit 2 of the frame header descriptor) and is what a new context with
        // the same settings makes.
        for (level, checksum) in [(3, false), (1, true), (19, false), (3, true), (3, false)] {
            let frame = chunk_frame(level, checksum, &data);
            assert_eq!(
                zstd::decode_all(frame.as_slice()).unwrap(),
                data,
                "level {level}"
            );
            assert_eq!(
                frame[4] & 0b100 != 0,
                checksum,
                "checksum flag, level {level}"
            );
            let mut fresh = ChunkCompressor::create(level).unwrap();
            fresh.set_checksum(checksum).unwrap();
            let mut again = Vec::with_capacity(frame.capacity());
            fresh.compress_to_buffer(&data, &mut again).unwrap();
            assert_eq!(again, frame, "a new context, level {level}");
        }
    }

    #[test]
    fn chunk_frames_are_not_split_and_a_small_buffer_is_an_error() {
        let data = floats();
        // zstd 1.5.7's default context splits this input's blocks; the chunk
        // context does not, so the two frames differ (and both decode).
        let ours = chunk_frame(3, false, &data);
        let split = zstd::bulk::compress(&data, 3).unwrap();
        assert_ne!(ours, split);
        assert_eq!(zstd::decode_all(split.as_slice()).unwrap(), data);
        let mut small = Vec::with_capacity(16);
        let err = with_chunk_compressor(3, false, |c| c.compress_to_buffer(&data, &mut small))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Other);
        assert!(err.to_string().starts_with("zstd: "), "{err}");
    }
}
