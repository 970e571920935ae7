//! Recycled chunk-sized byte buffers.
//!
//! A bulk write moves every chunk through two large buffers: the chunk's elements
//! copied out of the caller's array, and its encoded bytes. Fresh allocations of a
//! megabyte come from the operating system zeroed and are faulted in page by page
//! as they are written, then handed back when freed: on a 256 MiB zstd write that
//! was ~130,000 page faults, a sixth of the CPU time. Buffers that are done with are
//! kept here (up to [`POOL_BYTES`] in all) and handed out again, already mapped.
//!
//! Encoded chunks leave as [`bytes::Bytes`] made by [`bytes_of`]: their buffer
//! comes back when the last clone is dropped, after the store has written it.

use std::sync::Mutex;

/// Buffers smaller than this (bytes) are not kept: the allocator serves them well.
const MIN_POOLED: usize = 64 * 1024;
/// Buffers larger than this (bytes) are not kept.
const MAX_POOLED: usize = 16 << 20;
/// Total capacity (bytes) the pool keeps.
const POOL_BYTES: usize = 64 << 20;

/// A pool of idle buffers.
struct BufferPool {
    /// Idle buffers and their total capacity in bytes.
    idle: Mutex<(Vec<Vec<u8>>, usize)>,
}

/// The process's pool.
static POOL: BufferPool = BufferPool::new();

impl BufferPool {
    const fn new() -> Self {
        BufferPool {
            idle: Mutex::new((Vec::new(), 0)),
        }
    }

    fn take(&self, capacity: usize) -> Vec<u8> {
        if (MIN_POOLED..=MAX_POOLED).contains(&capacity) {
            if let Ok(mut idle) = self.idle.lock() {
                let (buffers, total) = &mut *idle;
                let fit = buffers
                    .iter()
                    .rposition(|b| b.capacity() >= capacity && b.capacity() / 2 <= capacity);
                if let Some(i) = fit {
                    let buf = buffers.swap_remove(i);
                    *total -= buf.capacity();
                    return buf;
                }
            }
        }
        Vec::with_capacity(capacity)
    }

    fn give(&self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if !(MIN_POOLED..=MAX_POOLED).contains(&cap) {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            let (buffers, total) = &mut *idle;
            if *total + cap <= POOL_BYTES {
                buf.clear();
                *total += cap;
                buffers.push(buf);
            }
        }
    }

    fn bytes_of(&'static self, buf: Vec<u8>) -> bytes::Bytes {
        if (MIN_POOLED..=MAX_POOLED).contains(&buf.capacity()) {
            bytes::Bytes::from_owner(Recycled(buf, self))
        } else {
            bytes::Bytes::from(buf)
        }
    }
}

/// An empty buffer with room for at least `capacity` bytes: a pooled one when one
/// fits (capacity from `capacity` to twice it), a new one otherwise.
pub(crate) fn take(capacity: usize) -> Vec<u8> {
    POOL.take(capacity)
}

/// A copy of `data` in a buffer from [`take`].
pub(crate) fn copy_of(data: &[u8]) -> Vec<u8> {
    let mut buf = take(data.len());
    buf.extend_from_slice(data);
    buf
}

/// `len` zero bytes in a buffer from [`take`].
pub(crate) fn zeroed(len: usize) -> Vec<u8> {
    let mut buf = take(len);
    buf.resize(len, 0);
    buf
}

/// Returns `buf` to the pool (its contents are discarded), unless it is outside the
/// pooled sizes or the pool is full.
pub(crate) fn give(buf: Vec<u8>) {
    POOL.give(buf);
}

/// `buf` as [`bytes::Bytes`] without a copy; the buffer returns to the pool when the
/// last clone of the `Bytes` is dropped.
pub(crate) fn bytes_of(buf: Vec<u8>) -> bytes::Bytes {
    POOL.bytes_of(buf)
}

/// A [`Vec`] that goes back to its pool when dropped.
struct Recycled(Vec<u8>, &'static BufferPool);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        self.1.give(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of the test's own, so tests running in parallel do not share buffers.
    fn pool() -> &'static BufferPool {
        Box::leak(Box::new(BufferPool::new()))
    }

    #[test]
    fn a_given_buffer_is_taken_again_empty_and_mapped() {
        let pool = pool();
        let cap = MIN_POOLED * 3;
        let mut buf = Vec::with_capacity(cap);
        buf.extend_from_slice(&[5u8; 100]);
        let ptr = buf.as_ptr();
        pool.give(buf);
        let again = pool.take(cap - 1);
        assert_eq!(again.as_ptr(), ptr, "the pooled buffer is reused");
        assert!(again.is_empty());
        assert!(again.capacity() >= cap - 1);
    }

    #[test]
    fn much_smaller_and_unpooled_sizes_get_new_buffers() {
        let pool = pool();
        let cap = MIN_POOLED * 7;
        let buf = Vec::<u8>::with_capacity(cap);
        let ptr = buf.as_ptr();
        pool.give(buf);
        // Less than half the pooled capacity: a new buffer.
        let smaller = pool.take(cap / 2 - 1);
        assert_ne!(smaller.as_ptr(), ptr);
        // Below the pooled sizes: not kept.
        pool.give(Vec::with_capacity(100));
        assert_eq!(pool.idle.lock().unwrap().0.len(), 1);
    }

    #[test]
    fn the_pool_keeps_at_most_its_byte_limit() {
        let pool = pool();
        for _ in 0..(POOL_BYTES / MAX_POOLED + 3) {
            pool.give(Vec::with_capacity(MAX_POOLED));
        }
        let (buffers, total) = &*pool.idle.lock().unwrap();
        assert_eq!(*total, POOL_BYTES);
        assert_eq!(buffers.len(), POOL_BYTES / MAX_POOLED);
    }

    #[test]
    fn bytes_from_a_buffer_return_it_when_dropped() {
        let pool = pool();
        let cap = MIN_POOLED * 5;
        let mut buf = pool.take(cap);
        buf.extend_from_slice(b"chunk");
        let ptr = buf.as_ptr();
        let bytes = pool.bytes_of(buf);
        assert_eq!(&bytes[..], b"chunk");
        let clone = bytes.clone();
        drop(bytes);
        assert_eq!(&clone[..], b"chunk", "a clone keeps the buffer alive");
        assert!(pool.idle.lock().unwrap().0.is_empty());
        drop(clone);
        let back = pool.take(cap);
        assert_eq!(back.as_ptr(), ptr, "the buffer came back to the pool");
    }

    #[test]
    fn copies_and_zeroed_buffers_have_the_asked_contents() {
        let data: Vec<u8> = (0..MIN_POOLED * 2).map(|i| i as u8).collect();
        let copy = copy_of(&data);
        assert_eq!(copy, data);
        give(copy);
        let z = zeroed(MIN_POOLED * 2);
        assert_eq!(z.len(), MIN_POOLED * 2);
        assert!(z.iter().all(|&b| b == 0), "a reused buffer is zeroed again");
    }
}
