//! Blocking primitives on local file paths, the one implementation of atomic
//! writes and whole and ranged reads of local files: [`LocalStorage`] uses them on
//! the paths `object_store` gives its keys, and the Zarr `FilesystemStore`
//! (`zarr::store::filesystem`) on the paths the Zarr file system store spec gives its
//! keys. Call them on a blocking or compute thread, never on the async executor.
//!
//! [`LocalStorage`]: super::LocalStorage

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::Path as FsPath;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::StorageError;

/// The whole file at `path` (into a recycled buffer when it is chunk-sized, so no
/// fresh pages are faulted in; it returns to the pool when the last clone of the
/// bytes is dropped) and the metadata of the file read; a directory is `NotFound`.
pub(crate) fn read_whole(path: &FsPath) -> std::io::Result<(Bytes, std::fs::Metadata)> {
    use std::io::Read;
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    let mut bytes = crate::buffer_pool::take(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok((crate::buffer_pool::bytes_of(bytes), meta))
}

/// Writes `bytes` to a new temporary file beside `target` and renames it over `target`.
///
/// Versions here are `object_store` etags, `inode-mtime(µs)-size`. The inode of the
/// replaced file is free again after the rename and the next temporary file usually
/// gets it, and some file systems keep mtimes in whole seconds: two swaps within one
/// second would bring a superseded version back and let a stale compare-and-swap
/// through. So the new file's mtime is set strictly later (at microsecond precision)
/// than the one it replaces, `previous`, in the file system's own granularity: along
/// the compare-and-swap history of an object, no version repeats.
pub(crate) fn write_and_rename(
    target: &FsPath,
    bytes: &[u8],
    previous: Option<SystemTime>,
    synced: bool,
) -> std::io::Result<()> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = target.with_file_name(format!(".{name}.floe-tmp-{:016x}", rand::random::<u64>()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if let Some(previous) = previous {
            set_mtime_after(&f, previous)?;
        }
        if synced {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, target)?;
        if synced {
            sync_parent(target)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Why a read of [`read_ranges`] or [`read_exact_at`] failed, before the key is known.
pub(crate) enum ReadAtError {
    NotFound,
    Short { requested: Range<u64>, size: u64 },
    Io(std::io::Error),
}

impl ReadAtError {
    /// The storage error for object `key`.
    pub(crate) fn at(self, key: &str) -> StorageError {
        match self {
            ReadAtError::NotFound => StorageError::NotFound {
                key: key.to_string(),
            },
            ReadAtError::Short { requested, size } => StorageError::ShortRead {
                key: key.to_string(),
                requested,
                size,
            },
            ReadAtError::Io(source) => StorageError::Io {
                key: key.to_string(),
                source,
            },
        }
    }
}

/// Opens the file at `path` for reading; a missing one is `NotFound`.
pub(crate) fn open_object(path: &FsPath) -> Result<File, ReadAtError> {
    File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadAtError::NotFound,
        _ => ReadAtError::Io(e),
    })
}

/// Reads `ranges` (checked: none inverted) of the file at `path`, coalesced as
/// [`crate::storage::coalesce::plan`] does, into recycled buffers; a range past the end is a short
/// read naming the first such range in the caller's order.
pub(crate) fn read_ranges(path: &FsPath, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, ReadAtError> {
    let mut file = open_object(path)?;
    let size = object_size(&file)?;
    read_ranges_from(&mut file, size, ranges)
}

/// The size in bytes of the open `file`; a directory is `NotFound` (no object).
fn object_size(file: &File) -> Result<u64, ReadAtError> {
    let meta = file.metadata().map_err(ReadAtError::Io)?;
    if !meta.is_file() {
        return Err(ReadAtError::NotFound);
    }
    Ok(meta.len())
}

/// Whether `ranges` all end within a file of `size` bytes: else a short read naming
/// the first that does not, in the caller's order.
fn check_within(size: u64, ranges: &[Range<u64>]) -> Result<(), ReadAtError> {
    match ranges.iter().find(|r| r.end > size) {
        Some(past) => Err(ReadAtError::Short {
            requested: past.clone(),
            size,
        }),
        None => Ok(()),
    }
}

/// [`read_ranges`] of a file already open, of `size` bytes (as its metadata said
/// when it was opened).
pub(crate) fn read_ranges_from(
    file: &mut File,
    size: u64,
    ranges: &[Range<u64>],
) -> Result<Vec<Bytes>, ReadAtError> {
    use std::io::{Read, Seek, SeekFrom};
    check_within(size, ranges)?;
    let mut out = vec![Bytes::new(); ranges.len()];
    for span in crate::storage::coalesce::plan(ranges, crate::storage::CoalesceOptions::default()) {
        if span.range.is_empty() {
            continue;
        }
        let len = usize::try_from(span.range.end - span.range.start)
            .map_err(|e| ReadAtError::Io(std::io::Error::other(e)))?;
        let mut buf = crate::buffer_pool::take(len);
        file.seek(SeekFrom::Start(span.range.start))
            .map_err(ReadAtError::Io)?;
        // `read_to_end` reads into the buffer's spare capacity without zeroing it.
        (&mut *file)
            .take(len as u64)
            .read_to_end(&mut buf)
            .map_err(ReadAtError::Io)?;
        if buf.len() != len {
            // Shortened since its size was read.
            let size = span.range.start.saturating_add(buf.len() as u64);
            return Err(ReadAtError::Short {
                requested: span.range,
                size,
            });
        }
        let bytes = crate::buffer_pool::bytes_of(buf);
        for &i in &span.members {
            let part = crate::storage::coalesce::slice(&bytes, span.range.start, &ranges[i]);
            out[i] = part.unwrap_or_default();
        }
    }
    Ok(out)
}

/// [`read_ranges`] done only if it cannot wait on the disk: the path resolved from
/// the kernel's lookup cache alone (`openat2` with `RESOLVE_CACHED`) and every byte
/// read from the page cache (`preadv2` with `RWF_NOWAIT`). `None` when the read
/// would wait (a file not read lately: the caller then reads it on the blocking
/// pool, where many such reads wait at once), or on kernels without these calls
/// (before Linux 5.12) and other systems, where the caller reads on the pool too.
/// For reads of a few kilobytes, which take less time from the page cache than two
/// thread switches.
#[cfg(target_os = "linux")]
pub(crate) fn read_ranges_cached(
    path: &FsPath,
    ranges: &[Range<u64>],
) -> Option<Result<Vec<Bytes>, ReadAtError>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
    use rustix::io::{Errno, ReadWriteFlags};
    let fd = match rustix::fs::openat2(
        CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::CACHED,
    ) {
        Ok(fd) => fd,
        // A missing file whose absence the lookup cache holds.
        Err(Errno::NOENT | Errno::NOTDIR) => return Some(Err(ReadAtError::NotFound)),
        Err(_) => return None,
    };
    let file = File::from(fd);
    if let Err(e) = object_size(&file).and_then(|size| check_within(size, ranges)) {
        return Some(Err(e));
    }
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let len = usize::try_from(r.end - r.start).ok()?;
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let mut slices = [std::io::IoSliceMut::new(&mut buf[done..])];
            match rustix::io::preadv2(
                &file,
                &mut slices,
                r.start + done as u64,
                ReadWriteFlags::NOWAIT,
            ) {
                Ok(0) => {
                    // Shortened since its size was read.
                    return Some(Err(ReadAtError::Short {
                        requested: r.clone(),
                        size: r.start + done as u64,
                    }));
                }
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                // Not all in the page cache (`AGAIN`), or no `RWF_NOWAIT` here.
                Err(_) => return None,
            }
        }
        out.push(Bytes::from(buf));
    }
    Some(Ok(out))
}

/// [`read_ranges`] from the page cache only: not on this system (`None`).
#[cfg(not(target_os = "linux"))]
pub(crate) fn read_ranges_cached(
    _path: &FsPath,
    _ranges: &[Range<u64>],
) -> Option<Result<Vec<Bytes>, ReadAtError>> {
    None
}

/// Reads `dest.len()` bytes of the file at `path` from byte `start` into `dest`.
pub(crate) fn read_exact_at(path: &FsPath, start: u64, dest: &mut [u8]) -> Result<(), ReadAtError> {
    read_exact_from(&open_object(path)?, start, dest)
}

/// [`read_exact_at`] of a file already open.
pub(crate) fn read_exact_from(file: &File, start: u64, dest: &mut [u8]) -> Result<(), ReadAtError> {
    use std::os::unix::fs::FileExt;
    let end = start.checked_add(dest.len() as u64);
    let short = |file: &File| {
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        ReadAtError::Short {
            requested: start..end.unwrap_or(u64::MAX),
            size,
        }
    };
    if end.is_none() {
        return Err(short(file));
    }
    match file.read_exact_at(dest, start) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(short(file)),
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => Err(ReadAtError::NotFound),
        Err(e) => Err(ReadAtError::Io(e)),
    }
}

/// Fsyncs the directory holding `path`, making a rename or link into it durable.
pub(crate) fn sync_parent(path: &FsPath) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// Microseconds since the epoch, the precision of `object_store`'s local etags.
pub(crate) fn micros(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros()
}

/// Sets the mtime of `f` to now, or to the earliest time after `previous` that the
/// file system keeps as later than `previous` when now is not.
pub(crate) fn set_mtime_after(f: &File, previous: SystemTime) -> std::io::Result<()> {
    let now = SystemTime::now();
    for step in [
        Duration::from_micros(1),
        Duration::from_millis(1),
        Duration::from_secs(1),
        Duration::from_secs(2),
    ] {
        f.set_modified(now.max(previous + step))?;
        if micros(f.metadata()?.modified()?) > micros(previous) {
            return Ok(());
        }
    }
    Err(std::io::Error::other(
        "cannot give the new version a later mtime than the one it replaces",
    ))
}
