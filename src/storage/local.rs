//! [`LocalStorage`]: a repository on the local filesystem, safe for concurrent writers
//! in several OS processes.
//!
//! Reads, plain writes, create-if-not-exists (a hard link, atomic on POSIX filesystems)
//! and listing go through `object_store`'s `LocalFileSystem`. It cannot compare-and-swap,
//! so [`Storage::put_if_match`] here takes an advisory lock (`flock`) on the directory
//! that holds the object, checks the version, and renames a fully written temporary file
//! over the object while holding it. Locks are released when their process dies and no
//! lock file is ever created, so other readers of the repository (Icechunk) never see one.
//!
//! # Durability
//! Every object appears whole or not at all (written aside, then renamed or linked
//! into place), so a process that dies mid-write never leaves a torn object. The one
//! exception is [`Storage::put_fresh`], for objects under new random ids that nothing
//! reads or refers to until it returns: they are written in place, and a torn one
//! is unreferenced (garbage collection removes it). Whether
//! a write also survives an operating-system crash or power loss is
//! [`Durability`], chosen in [`LocalStorageOptions`]:
//! - [`Durability::Process`] (the default, and what object stores and Icechunk's own
//!   local storage give): nothing is fsynced. A committed snapshot survives the
//!   writer's crash; after a power loss recent commits may be lost, and a ref may
//!   point at a snapshot whose bytes never reached the disk.
//! - [`Durability::Synced`]: each object's file and its directory entry are fsynced
//!   before the write returns. A commit writes chunks, manifests, transaction log and
//!   snapshot before it moves the branch ref, so a ref on disk never points at bytes
//!   that are not. It costs one or two fsyncs per object written.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::local::LocalFileSystem;

use super::files::{self, micros, read_exact_at, read_ranges, sync_parent, write_and_rename};
use super::object::ObjectStorage;
use super::{
    LocalFiles, ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes,
    WriteOutcome,
};
/// What a completed write of [`LocalStorage`] survives (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Survives the writer's process crash; no fsync (object-store semantics).
    #[default]
    Process,
    /// Survives an operating-system crash or power loss: file and directory fsynced
    /// before each write returns.
    Synced,
}

/// Options of [`LocalStorage::with_options`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalStorageOptions {
    /// What a completed write survives; [`Durability::Process`] by default.
    pub durability: Durability,
}

impl LocalStorageOptions {
    /// These options with `durability`.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}

/// Storage rooted at a directory of the local filesystem.
#[derive(Debug, Clone)]
pub struct LocalStorage {
    root: PathBuf,
    fs: Arc<LocalFileSystem>,
    inner: ObjectStorage,
    options: LocalStorageOptions,
}

impl LocalStorage {
    /// Opens the directory `root` as storage. A missing `root` is not created here:
    /// it appears with the first write (so opening a repository at a mistyped path
    /// leaves nothing on disk, as Icechunk's `local_filesystem_storage`), and until
    /// then reads find nothing and listings are empty.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the directory cannot be created or resolved;
    /// [`StorageError::InvalidLocation`] when object_store rejects the path.
    pub fn new(root: &FsPath) -> StorageResult<Self> {
        Self::with_options(root, LocalStorageOptions::default())
    }

    /// As [`LocalStorage::new`], with `options` (durability).
    ///
    /// # Errors
    /// As [`LocalStorage::new`].
    pub fn with_options(root: &FsPath, options: LocalStorageOptions) -> StorageResult<Self> {
        // Resolving the path (symlinks included) needs it to exist: the directories
        // missing now are made for that and removed again at once (only while still
        // empty); writes create them for good (object_store's and floe's own writes
        // create missing parent directories).
        let missing: Vec<PathBuf> = root
            .ancestors()
            .take_while(|dir| !dir.as_os_str().is_empty() && !dir.exists())
            .map(FsPath::to_path_buf)
            .collect();
        std::fs::create_dir_all(root).map_err(|source| StorageError::Io {
            key: root.display().to_string(),
            source,
        })?;
        let resolved = root.canonicalize().map(|canonical| {
            let fs = LocalFileSystem::new_with_prefix(&canonical);
            (canonical, fs)
        });
        for dir in &missing {
            let _ = std::fs::remove_dir(dir);
        }
        let (root, fs) = resolved.map_err(|source| StorageError::Io {
            key: root.display().to_string(),
            source,
        })?;
        let fs = fs
            .map_err(|e| StorageError::InvalidLocation {
                location: root.display().to_string(),
                reason: e.to_string(),
            })?
            // object_store's own fsync of written files and their directories.
            .with_fsync(options.durability == Durability::Synced);
        let fs = Arc::new(fs);
        let url = format!("file://{}", root.display());
        Ok(LocalStorage {
            // LocalFileSystem's `get_ranges` reads every range from one open file
            // and fails on a range past the end.
            inner: ObjectStorage::new(Arc::clone(&fs) as _, "", url)
                .with_vectored_ranges(true)
                .with_split_reads(super::SplitReads::NEVER),
            fs,
            root,
            options,
        })
    }

    /// The root directory.
    pub fn root(&self) -> &FsPath {
        &self.root
    }

    /// The options this storage was opened with.
    pub fn options(&self) -> LocalStorageOptions {
        self.options
    }

    fn synced(&self) -> bool {
        self.options.durability == Durability::Synced
    }

    /// The file of `key`, as `object_store` names it (it percent-encodes some
    /// characters).
    fn fs_path(&self, key: &str) -> StorageResult<PathBuf> {
        self.fs
            .path_to_filesystem(&object_store::path::Path::from(key))
            .map_err(|e| StorageError::InvalidLocation {
                location: key.to_string(),
                reason: e.to_string(),
            })
    }

    /// The streaming listing of object_store's local file system, without the
    /// temporary files of in-flight writes; a missing directory lists nothing.
    fn object_store_listing<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        self.inner
            .list_stream(prefix)
            .filter(|r| {
                let keep = match r {
                    // A directory that does not exist lists nothing.
                    Err(StorageError::NotFound { .. }) => false,
                    Err(_) => true,
                    Ok(i) => is_object_name(i.key.rsplit('/').next().unwrap_or("")),
                };
                futures::future::ready(keep)
            })
            .boxed()
    }

    /// The listing entries of `keys`, each file's metadata read (in blocking calls of
    /// [`STAT_RUN`] files); a key whose file is gone meanwhile is left out.
    fn infos(
        &self,
        keys: Vec<String>,
    ) -> futures::stream::BoxStream<'_, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        let runs: Vec<Vec<String>> = keys.chunks(STAT_RUN).map(<[String]>::to_vec).collect();
        futures::stream::iter(runs)
            .map(move |run| {
                let paths: StorageResult<Vec<(String, PathBuf)>> = run
                    .into_iter()
                    .map(|k| self.fs_path(&k).map(|p| (k, p)))
                    .collect();
                async move {
                    let paths = paths?;
                    blocking("", move || {
                        let mut out = Vec::with_capacity(paths.len());
                        for (key, path) in paths {
                            match std::fs::metadata(&path) {
                                Ok(meta) if meta.is_file() => out.push(ObjectInfo {
                                    key,
                                    size: meta.len(),
                                    last_modified: meta
                                        .modified()
                                        .map(chrono::DateTime::<chrono::Utc>::from)
                                        .unwrap_or_default(),
                                    version: Some(local_version(&meta)),
                                }),
                                Ok(_) => {}
                                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                                Err(source) => return Err(StorageError::Io { key, source }),
                            }
                        }
                        Ok(out)
                    })
                    .await
                }
            })
            .buffer_unordered(4)
            .map(|run: StorageResult<Vec<ObjectInfo>>| match run {
                Ok(infos) => futures::stream::iter(infos.into_iter().map(Ok)).boxed(),
                Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
            })
            .flatten()
            .boxed()
    }

    /// Takes an exclusive advisory lock on the directory holding `key`; `None` when the
    /// directory does not exist. The lock is held until the returned file is dropped.
    async fn lock_parent(&self, key: &str) -> StorageResult<Option<File>> {
        let dir = self
            .fs_path(key)?
            .parent()
            .map(FsPath::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        blocking_io(key, move || {
            let dir_file = match File::open(&dir) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            dir_file.lock()?;
            Ok(Some(dir_file))
        })
        .await
    }
}

/// Files one blocking call of [`Storage::delete_many`] removes.
const DELETE_RUN: usize = 64;
/// Blocking calls of one [`Storage::delete_many`] at once.
const DELETE_CALLS: usize = 16;

/// Removes `files` (key, path) of directory `dir` under a shared lock of the
/// directory (deletes exclude the compare-and-swap of an update there, which takes
/// it exclusively, not each other), every one even when some fail; absent files
/// (and an absent directory) are not errors.
///
/// # Errors
/// The first failure, as [`StorageError::Io`] naming its key.
fn remove_files(dir: &FsPath, files: &[(String, PathBuf)]) -> StorageResult<()> {
    let io = |key: &str, source| StorageError::Io {
        key: key.to_string(),
        source,
    };
    let first_key = files.first().map_or("", |(k, _)| k.as_str());
    let lock = match File::open(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(first_key, e)),
    };
    lock.lock_shared().map_err(|e| io(first_key, e))?;
    let mut first = None;
    for (key, path) in files {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                first.get_or_insert(io(key, e));
            }
        }
    }
    drop(lock);
    first.map_or(Ok(()), Err)
}

/// Reads of at most this many bytes in all (bytes) from one file are made on the
/// calling task's thread instead of the blocking pool ([`Storage::get_ranges`]).
const INLINE_READ_BYTES: u64 = 64 * 1024;

/// Runs file-system work `f` for `key` on the blocking pool; its I/O errors (and a
/// failed task) are [`StorageError::Io`] naming `key`.
async fn blocking_io<T: Send + 'static>(
    key: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> StorageResult<T> {
    let owned = key.to_string();
    blocking(key, move || {
        f().map_err(|source| StorageError::Io { key: owned, source })
    })
    .await
}

/// Runs `f` on the blocking pool; a failed task is [`StorageError::Io`] naming
/// `key`.
async fn blocking<T: Send + 'static>(
    key: &str,
    f: impl FnOnce() -> StorageResult<T> + Send + 'static,
) -> StorageResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StorageError::Io {
            key: key.to_string(),
            source: std::io::Error::other(e),
        })?
}

/// Whether a file of this name is an object: temporary files of in-flight writes
/// (`.NAME.floe-tmp-…`) and names with `#` are not.
fn is_object_name(name: &str) -> bool {
    let temporary = name.starts_with('.') && name.contains(".floe-tmp-");
    !temporary && !name.contains('#')
}

/// Writes `bytes` to `target` in place, creating its directory when missing
/// ([`Storage::put_fresh`]); with `synced`, the file and its directory are fsynced.
fn write_in_place(target: &FsPath, bytes: &[u8], synced: bool) -> std::io::Result<()> {
    let mut file = match File::create(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = target.parent().ok_or(e)?;
            std::fs::create_dir_all(dir)?;
            if synced {
                sync_parent(dir)?;
            }
            File::create(target)?
        }
        other => other?,
    };
    let written = file.write_all(bytes).and_then(|()| {
        if synced {
            file.sync_all()?;
            sync_parent(target)?;
        }
        Ok(())
    });
    if written.is_err() {
        // Best effort: a partial object left here is unreferenced either way.
        drop(file);
        let _ = std::fs::remove_file(target);
    }
    written
}

/// Files whose metadata one blocking call of [`LocalStorage::infos`] reads.
const STAT_RUN: usize = 256;

/// The keys of the files below directory `dir` (whose key prefix is `prefix`,
/// ending in `/`), from the directory entries alone (no `stat` per file where the
/// file system reports entry types): `None` when a name is not one `object_store`
/// writes as is (the general listing decodes it). Temporary files of in-flight
/// writes are left out, as from [`LocalStorage::list`]. A missing directory, or a
/// file where the directory would be, holds nothing.
fn plain_keys(dir: &FsPath, prefix: &str) -> std::io::Result<Option<Vec<String>>> {
    let mut keys = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), prefix.to_string())];
    while let Some((dir, prefix)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            // A prefix naming a file, or nothing, lists nothing.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                return Ok(None);
            };
            if !is_object_name(&name) {
                continue;
            }
            let plain = name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !plain || name.starts_with('.') {
                return Ok(None);
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push((entry.path(), format!("{prefix}{name}/")));
            } else if kind.is_file() {
                keys.push(format!("{prefix}{name}"));
            }
        }
    }
    Ok(Some(keys))
}

/// The version of a local object as `object_store`'s `LocalFileSystem` reports it
/// (its etag: inode, mtime in microseconds and size, in hex, quoted), read from the
/// file's metadata without a round trip through `object_store`.
fn local_version(meta: &std::fs::Metadata) -> ObjectVersion {
    use std::os::unix::fs::MetadataExt;
    let mtime = meta.modified().map(micros).unwrap_or_default();
    ObjectVersion(format!("\"{:x}-{mtime:x}-{:x}\"", meta.ino(), meta.len()))
}

/// The compare-and-swap of one object: under an exclusive lock on its directory,
/// replaces `target` with `bytes` when its current version is `expected`, and returns
/// the new version; `None` (nothing written) when the version differs or the object
/// or its directory is missing.
fn swap_if_version(
    target: &FsPath,
    bytes: &[u8],
    expected: &ObjectVersion,
    synced: bool,
) -> std::io::Result<Option<ObjectVersion>> {
    let Some(dir) = target.parent() else {
        return Ok(None);
    };
    let lock = match File::open(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    lock.lock()?;
    let current = match std::fs::metadata(target) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if &local_version(&current) != expected {
        return Ok(None);
    }
    write_and_rename(target, bytes, current.modified().ok(), synced)?;
    let version = local_version(&std::fs::metadata(target)?);
    drop(lock);
    Ok(Some(version))
}

/// The conditional delete of one object: under an exclusive lock on its directory,
/// removes `target` when its current version is `expected`; `false` (nothing
/// removed) when the version differs or the object or its directory is missing.
fn delete_if_version(target: &FsPath, expected: &ObjectVersion) -> std::io::Result<bool> {
    let Some(dir) = target.parent() else {
        return Ok(false);
    };
    let lock = match File::open(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    lock.lock()?;
    let current = match std::fs::metadata(target) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if &local_version(&current) != expected {
        return Ok(false);
    }
    match std::fs::remove_file(target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    drop(lock);
    Ok(true)
}

/// `result`, with an I/O error of kind `NotFound` as [`StorageError::NotFound`].
fn not_found_of_io<T>(result: StorageResult<T>) -> StorageResult<T> {
    match result {
        Err(StorageError::Io { key, source }) if source.kind() == std::io::ErrorKind::NotFound => {
            Err(StorageError::NotFound { key })
        }
        other => other,
    }
}

/// The whole file at `path` and its version; a directory is `NotFound`.
fn read_versioned(path: &FsPath) -> std::io::Result<VersionedBytes> {
    let (bytes, meta) = files::read_whole(path)?;
    Ok(VersionedBytes {
        bytes,
        version: Some(local_version(&meta)),
    })
}

impl fmt::Display for LocalStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl Storage for LocalStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        // One blocking call that opens, stats and reads the file (object_store's takes
        // two hops and several more syscalls; whole-object reads of small snapshots
        // and refs dominate history walks). The version comes from the same open file
        // as the bytes, so they always agree.
        let path = self.fs_path(key)?;
        not_found_of_io(blocking_io(key, move || read_versioned(&path)).await)
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        let mut parts = self.get_ranges(key, std::slice::from_ref(&range)).await?;
        Ok(parts.pop().unwrap_or_default())
    }

    async fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> StorageResult<Vec<Bytes>> {
        // One blocking call: open the file once, read each coalesced span into a
        // recycled buffer (no zero fill, no fresh pages to fault in), slice the
        // parts out of it. object_store zero-fills a new buffer per read.
        super::check_ranges(key, ranges)?;
        let path = self.fs_path(key)?;
        let total = ranges
            .iter()
            .fold(0u64, |n, r| n.saturating_add(r.end.saturating_sub(r.start)));
        if total <= INLINE_READ_BYTES {
            // A few kilobytes (a shard's index, one inner chunk) take less time to
            // read from the page cache than the two thread switches of the blocking
            // pool; a read that would wait on the disk goes to the pool, so that
            // many of them (a scan of manifests) wait at once instead of in turn
            // on this task's thread.
            if let Some(read) = files::read_ranges_cached(&path, ranges) {
                return read.map_err(|e| e.at(key));
            }
        }
        let ranges = ranges.to_vec();
        let owned_key = key.to_string();
        blocking_io(key, move || {
            Ok(read_ranges(&path, &ranges).map_err(|e| e.at(&owned_key)))
        })
        .await?
    }

    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.inner.head(key).await
    }

    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.inner.put(key, bytes).await
    }

    async fn put_fresh(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        // Written in place in one blocking call: create (and its directory when
        // missing), write, close. No temporary file, rename or stat.
        let path = self.fs_path(key)?;
        let synced = self.synced();
        if synced {
            return blocking_io(key, move || write_in_place(&path, &bytes, true)).await;
        }
        // Unsynced, the write is a copy into the page cache plus the file system's
        // bookkeeping: CPU work, done on the compute pool, one file at a time per
        // core. Dozens of blocking threads creating files in one directory spin on
        // its lock (256 chunk files of 1 MiB: ~80 ms here against ~95 ms from the
        // blocking pool, and against ~90 ms for plain `std::fs` writes 10 at a time).
        let io = |source| StorageError::Io {
            key: key.to_string(),
            source,
        };
        crate::compute::spawn(move || write_in_place(&path, &bytes, false))
            .await
            .map_err(|panic| io(std::io::Error::other(panic)))?
            .map_err(io)
    }

    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        self.inner.put_if_absent(key, bytes).await
    }

    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        // Lock, check, write, rename and read the new version in one blocking call:
        // the compare-and-swap is the commit point, and every hop to the thread pool
        // adds to the fixed cost of a commit.
        let target = self.fs_path(key)?;
        let expected = expected.clone();
        let synced = self.synced();
        let swapped = blocking_io(key, move || {
            swap_if_version(&target, &bytes, &expected, synced)
        })
        .await?;
        Ok(match swapped {
            Some(version) => WriteOutcome::Written(Some(version)),
            None => WriteOutcome::PreconditionFailed,
        })
    }

    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        // Under the directory lock compare-and-swap takes, so no update lands
        // between the check and the removal.
        let target = self.fs_path(key)?;
        let expected = expected.clone();
        let deleted = blocking_io(key, move || delete_if_version(&target, &expected)).await?;
        Ok(if deleted {
            WriteOutcome::Written(None)
        } else {
            WriteOutcome::PreconditionFailed
        })
    }

    async fn delete(&self, key: &str) -> StorageResult<()> {
        // Serialized with compare-and-swap on the same directory, so a delete never
        // interleaves with the check and rename of a concurrent update.
        let lock = self.lock_parent(key).await?;
        let res = self.inner.delete(key).await;
        drop(lock);
        res
    }

    /// The keys of each directory are removed in runs of 64, each by one blocking
    /// call that takes the directory's lock once, 16 calls at a time
    /// ([`Storage::delete`] takes the lock, and two thread hops, for each key).
    /// Absent files are not an error.
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        use futures::StreamExt;
        let mut first = None;
        let mut by_dir: std::collections::BTreeMap<PathBuf, Vec<(String, PathBuf)>> =
            std::collections::BTreeMap::new();
        for key in keys {
            match self.fs_path(key) {
                Ok(path) => {
                    let dir = path
                        .parent()
                        .map_or_else(|| self.root.clone(), FsPath::to_path_buf);
                    by_dir.entry(dir).or_default().push((key.clone(), path));
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        // Runs of files removed by concurrent blocking calls: on a cold cache each
        // `unlink` waits for the disk to read the inode, and only concurrency hides
        // that.
        let runs: Vec<(PathBuf, Vec<(String, PathBuf)>)> = by_dir
            .into_iter()
            .flat_map(|(dir, files)| {
                files
                    .chunks(DELETE_RUN)
                    .map(|run| (dir.clone(), run.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut removals = futures::stream::iter(runs)
            .map(|(dir, files)| blocking("", move || remove_files(&dir, &files)))
            .buffer_unordered(DELETE_CALLS);
        while let Some(removed) = removals.next().await {
            if let Err(e) = removed {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// [`LocalStorage::list_stream`], sorted.
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        use futures::TryStreamExt;
        let mut all: Vec<ObjectInfo> = self.list_stream(prefix).try_collect().await?;
        all.sort_unstable_by(|a, b| a.key.as_bytes().cmp(b.key.as_bytes()));
        Ok(all)
    }

    /// Every file under `prefix` from directory entries, with one `stat` each
    /// (object_store's walk takes three), where the names allow it.
    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        const NOTHING: &(dyn Fn(&str) -> bool + Sync) = &|_| false;
        self.list_stream_except(prefix, NOTHING)
    }

    fn list_stream_except<'a>(
        &'a self,
        prefix: &'a str,
        skip: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::{StreamExt, TryStreamExt};
        let keys = async move {
            let Some(path) = prefix
                .strip_suffix('/')
                .and_then(|dir| self.fs_path(dir).ok())
            else {
                return Ok(None);
            };
            let owned = prefix.to_string();
            blocking_io(prefix, move || plain_keys(&path, &owned)).await
        };
        futures::stream::once(keys)
            .map(
                move |found: StorageResult<Option<Vec<String>>>| match found {
                    // A prefix inside a key segment, or names object_store would have
                    // to decode: the general listing, filtered.
                    Ok(None) => self
                        .object_store_listing(prefix)
                        .try_filter(move |o| futures::future::ready(!skip(&o.key)))
                        .boxed(),
                    Ok(Some(keys)) => {
                        let wanted: Vec<String> = keys.into_iter().filter(|k| !skip(k)).collect();
                        self.infos(wanted)
                    }
                    Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
                },
            )
            .flatten()
            .boxed()
    }

    fn local_files(&self) -> Option<Arc<dyn LocalFiles>> {
        Some(Arc::new(LocalFileAccess {
            fs: Arc::clone(&self.fs),
            synced: self.synced(),
        }))
    }

    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compare-and-swap computes versions itself: they must be the very etags
    /// `object_store` reports from `get` and `head`, or every swap would fail.
    #[tokio::test]
    async fn local_versions_are_object_store_etags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = LocalStorage::new(dir.path()).expect("storage");
        let first = storage
            .put("refs/r.json", Bytes::from_static(b"one"))
            .await
            .expect("put");
        let meta = std::fs::metadata(dir.path().join("refs/r.json")).expect("metadata");
        let head = storage.head("refs/r.json").await.expect("head").version;
        assert_eq!(head, Some(local_version(&meta)));
        assert_eq!(first, head);
        let got = storage.get("refs/r.json").await.expect("get");
        let outcome = storage
            .put_if_match(
                "refs/r.json",
                Bytes::from_static(b"two"),
                &got.version.expect("version"),
            )
            .await
            .expect("swap");
        let WriteOutcome::Written(Some(new)) = outcome else {
            panic!("the swap from the current version must land: {outcome:?}");
        };
        assert_eq!(
            storage.head("refs/r.json").await.expect("head").version,
            Some(new)
        );
    }

    /// A small ranged read is made on the calling thread only from the page cache:
    /// a file just written reads there; once its pages are dropped the cached read
    /// declines (so the storage reads it on the blocking pool) and the storage still
    /// returns the same bytes; a missing file, a range past the end and a directory
    /// keep their typed errors on both paths.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn small_reads_wait_on_the_disk_only_on_the_blocking_pool() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = LocalStorage::new(dir.path()).expect("storage");
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        storage
            .put("manifests/m", Bytes::from(bytes.clone()))
            .await
            .expect("put");
        let path = dir.path().join("manifests/m");
        let ranges = [10..20, 100..4096];
        let Some(Ok(parts)) = files::read_ranges_cached(&path, &ranges) else {
            panic!("a file just written reads from the page cache");
        };
        assert_eq!(parts[0], bytes[10..20]);
        assert_eq!(parts[1], bytes[100..]);

        // Its pages dropped (written back first): the cached read declines.
        // The kernel may keep a page it is still busy with (a loaded machine): ask
        // again, up to 50 times, before judging.
        let file = std::fs::File::open(&path).expect("open");
        file.sync_all().expect("sync");
        // On tmpfs the page cache is the file itself: nothing is dropped.
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        let on_tmpfs = rustix::fs::statfs(&path).expect("statfs").f_type as i64 == TMPFS_MAGIC;
        let mut declined = false;
        for _ in 0..50 {
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
            declined = files::read_ranges_cached(&path, &ranges).is_none();
            if declined || on_tmpfs {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(
            declined, !on_tmpfs,
            "a file out of the page cache must be read on the blocking pool"
        );
        let part = storage
            .get_range("manifests/m", 100..4096)
            .await
            .expect("read");
        assert_eq!(part, bytes[100..]);

        // Typed errors, whichever path reads.
        match storage.get_range("manifests/m", 4000..4100).await {
            Err(StorageError::ShortRead { size, .. }) => assert_eq!(size, 4096),
            other => panic!("a range past the end must be ShortRead, got {other:?}"),
        }
        match storage.get_range("manifests/none", 0..10).await {
            Err(StorageError::NotFound { key }) => assert_eq!(key, "manifests/none"),
            other => panic!("a missing file must be NotFound, got {other:?}"),
        }
        match storage.get_range("manifests", 0..10).await {
            Err(StorageError::NotFound { .. }) => {}
            other => panic!("a directory must be NotFound, got {other:?}"),
        }
    }
}

/// The blocking capability of [`LocalStorage`] ([`Storage::local_files`]): the same
/// files, read and written with plain system calls on the calling thread.
#[derive(Debug)]
struct LocalFileAccess {
    fs: Arc<LocalFileSystem>,
    synced: bool,
}

impl LocalFileAccess {
    fn fs_path(&self, key: &str) -> StorageResult<PathBuf> {
        self.fs
            .path_to_filesystem(&object_store::path::Path::from(key))
            .map_err(|e| StorageError::InvalidLocation {
                location: key.to_string(),
                reason: e.to_string(),
            })
    }
}

impl LocalFiles for LocalFileAccess {
    fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        let read = self.fs_path(key).and_then(|path| {
            read_versioned(&path).map_err(|source| StorageError::Io {
                key: key.to_string(),
                source,
            })
        });
        not_found_of_io(read)
    }

    fn get_range_into(&self, key: &str, start: u64, dest: &mut [u8]) -> StorageResult<()> {
        self.fs_path(key)
            .and_then(|path| read_exact_at(&path, start, dest).map_err(|e| e.at(key)))
    }

    fn get_range_owned(&self, key: &str, start: u64, len: usize) -> StorageResult<Bytes> {
        // An `end` that would overflow is past any file's end: a short read.
        let range = start..start.saturating_add(len as u64);
        let path = self.fs_path(key)?;
        let mut read = read_ranges(&path, std::slice::from_ref(&range)).map_err(|e| e.at(key))?;
        Ok(read.pop().unwrap_or_default())
    }

    fn open(&self, key: &str) -> StorageResult<Option<File>> {
        let path = self.fs_path(key)?;
        let file = files::open_object(&path).map_err(|e| e.at(key))?;
        // A directory opens too: it is no object.
        match file.metadata() {
            Ok(meta) if meta.is_file() => Ok(Some(file)),
            Ok(_) => Err(StorageError::NotFound {
                key: key.to_string(),
            }),
            Err(source) => Err(StorageError::Io {
                key: key.to_string(),
                source,
            }),
        }
    }

    fn put_fresh(&self, key: &str, bytes: &[u8]) -> StorageResult<()> {
        self.fs_path(key).and_then(|path| {
            write_in_place(&path, bytes, self.synced).map_err(|source| StorageError::Io {
                key: key.to_string(),
                source,
            })
        })
    }

    /// A synced write waits for the disk: not work for a compute thread.
    fn quick_writes(&self) -> bool {
        !self.synced
    }
}
