//! Chunk bodies straight from local chunk files: a byte range of a file is mapped
//! into memory (never read by the server, so no page of it is resident on its
//! account), and the connection's writer, [`Connection`], sends a mapped range with
//! `sendfile(2)` from the file instead of copying it out of memory (Linux; elsewhere
//! the mapping is written out like any other bytes, one copy).
//!
//! Every mapping made by [`map`] is listed, with its file and offset, in a registry
//! that the writer looks the slices it is given up in: hyper hands bodies to the
//! connection as plain byte slices, so the address is all that tells a mapped range
//! apart. A slice the registry does not know is written from memory, so the bytes
//! sent are the same either way. On Linux the server never reads a mapping itself,
//! so a chunk file cut short behind its back ends the answer early (the kernel sends
//! what the file holds) rather than faulting; elsewhere, reading a mapping past the
//! file's new end would raise `SIGBUS`, and chunk files are never rewritten.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A mapped range: where it starts in its file.
#[derive(Debug)]
struct Region {
    len: usize,
    file: Arc<File>,
    offset: u64,
}

/// The live mappings of [`map`], by start address.
static REGIONS: Mutex<BTreeMap<usize, Region>> = Mutex::new(BTreeMap::new());

fn regions() -> MutexGuard<'static, BTreeMap<usize, Region>> {
    // The map stays consistent whatever a panicking holder did (one insert or remove).
    REGIONS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A mapping listed in [`REGIONS`] while it lives.
struct Mapped {
    map: memmap2::Mmap,
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // Unlisted before `map` is unmapped (fields drop after this).
        regions().remove(&(self.map.as_ptr() as usize));
    }
}

/// Bytes `offset..offset + len` of `file` as mapped [`Bytes`]: sent with
/// `sendfile(2)` by a [`Connection`], read from the page cache otherwise. `file`
/// must hold the range (checked by the caller) and must not change while mapped:
/// chunk objects are written once, under fresh ids, and never rewritten.
///
/// # Errors
/// The mapping's failure (out of address space, a file that cannot be mapped).
pub(super) fn map(file: &Arc<File>, offset: u64, len: usize) -> io::Result<Bytes> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: a read-only mapping of a range inside the file (the caller
    // checked its length). Chunk objects are never written after they are created,
    // so the bytes seen through the mapping do not change under the `&[u8]` handed
    // out; the server itself never touches them when the writer is a `Connection`
    // on Linux (the kernel sends from the file).
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(offset)
            .len(len)
            .map(&**file)?
    };
    regions().insert(
        map.as_ptr() as usize,
        Region {
            len,
            file: Arc::clone(file),
            offset,
        },
    );
    Ok(Bytes::from_owner(Mapped { map }))
}

/// The file, offset and length (to the end of its region) of a slice starting
/// inside a mapping of [`map`].
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn lookup(regions: &BTreeMap<usize, Region>, slice: &[u8]) -> Option<(Arc<File>, u64, usize)> {
    let at = slice.as_ptr() as usize;
    let (&start, region) = regions.range(..=at).next_back()?;
    let into = at - start;
    (into < region.len).then(|| {
        (
            Arc::clone(&region.file),
            region.offset + into as u64,
            (region.len - into).min(slice.len()),
        )
    })
}

/// A client connection: reads and writes go to the socket, except mapped ranges of
/// chunk files ([`map`]), which the kernel sends from the file (`sendfile(2)`, on
/// Linux).
#[derive(Debug)]
pub(super) struct Connection {
    stream: TcpStream,
}

impl Connection {
    pub(super) fn new(stream: TcpStream) -> Self {
        Connection { stream }
    }

    /// Runs the non-blocking write `write` once the socket can take bytes, again
    /// whenever it would block; the count written.
    #[cfg(target_os = "linux")]
    fn poll_write_with(
        &self,
        cx: &mut Context<'_>,
        mut write: impl FnMut() -> rustix::io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            std::task::ready!(self.stream.poll_write_ready(cx))?;
            match self.stream.try_io(tokio::io::Interest::WRITABLE, || {
                write().map_err(io::Error::from)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return Poll::Ready(other),
            }
        }
    }

    /// Sends `len` bytes of `file` from `offset` (`sendfile(2)`).
    #[cfg(target_os = "linux")]
    fn poll_sendfile(
        &self,
        cx: &mut Context<'_>,
        file: &File,
        offset: u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        self.poll_write_with(cx, || {
            let mut at = offset;
            rustix::fs::sendfile(&self.stream, file, Some(&mut at), len)
        })
    }

    /// Writes `bufs` with `MSG_MORE`: the kernel holds a partial packet for the
    /// bytes that follow instead of sending it at once (`TCP_NODELAY` is on).
    #[cfg(target_os = "linux")]
    fn poll_send_more(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        use rustix::net::{sendmsg, SendAncillaryBuffer, SendFlags};
        self.poll_write_with(cx, || {
            sendmsg(
                &self.stream,
                bufs,
                &mut SendAncillaryBuffer::default(),
                SendFlags::MORE | SendFlags::NOSIGNAL,
            )
        })
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        #[cfg(target_os = "linux")]
        {
            // The slices before the first mapped one go out from memory, in one
            // write flagged as followed by more (the response head then leaves in
            // the same packets as the start of the body); a mapped one first goes
            // out from its file.
            let found = {
                let regions = regions();
                if regions.is_empty() {
                    None
                } else {
                    bufs.iter()
                        .enumerate()
                        .filter(|(_, b)| !b.is_empty())
                        .find_map(|(i, b)| lookup(&regions, b).map(|r| (i, r)))
                }
            };
            match found {
                Some((0, (file, offset, len))) => {
                    return self.poll_sendfile(cx, &file, offset, len);
                }
                Some((i, _)) => return self.poll_send_more(cx, &bufs[..i]),
                None => {}
            }
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn mapped_ranges_are_found_by_address_while_they_live() {
        let mut tmp = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        tmp.write_all(&data).unwrap();
        let file = Arc::new(tmp);
        // An offset that is not page-aligned.
        let bytes = map(&file, 5000, 60_000).unwrap();
        assert!(bytes[..] == data[5000..65_000]);
        let part = bytes.slice(1000..3000);
        let (found, offset, len) = lookup(&regions(), &part).unwrap();
        assert!(Arc::ptr_eq(&found, &file));
        assert_eq!((offset, len), (6000, 2000));
        // To the end of the region, not past it.
        let tail = bytes.slice(59_000..);
        assert_eq!(
            lookup(&regions(), &tail).map(|r| (r.1, r.2)),
            Some((64_000, 1000))
        );
        let other = vec![0u8; 16];
        assert!(lookup(&regions(), &other).is_none());
        let at = bytes.as_ptr() as usize;
        drop((bytes, part, tail));
        assert!(!regions().contains_key(&at), "unlisted when unmapped");
        assert!(map(&file, 0, 0).unwrap().is_empty());
    }
}
