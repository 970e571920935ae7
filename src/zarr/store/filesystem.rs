//! A [`Store`] on a local directory, per the Zarr v3 file system store spec
//! (`../shared/specs/zarr-v3-filesystem-store.txt`, "Key translation" and "Store
//! API implementation"): key `a/b/c` is the file `<root>/a/b/c`.
//!
//! - Writes are atomic: the value goes to a temporary file in the target directory
//!   which is then renamed over the key's path, so readers see the old or the new
//!   value, never a partial one. (Temporary files carry `.floe-tmp-` in their name
//!   and are never listed.)
//! - The file I/O is the storage layer's (`storage::files`, shared with
//!   [`LocalStorage`](crate::storage::LocalStorage)): atomic writes, whole, ranged
//!   and in-place reads. This store adds the Zarr key translation (a key is its own
//!   relative path; `LocalStorage` names files as `object_store` does, which
//!   percent-encodes some characters), key validation, directory listings and the
//!   pruning of directories an erase leaves empty.
//! - Keys with `..` or `.` segments, empty segments, a leading `/`, backslashes or
//!   NUL are rejected with [`StoreError::InvalidKey`]: no key can reach outside the
//!   root.
//! - Listings are sorted; erasing a key removes directories left empty.
//! - All file system calls run on tokio's blocking thread pool.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::storage::files::{self, ReadAtError};

use super::chunks::KeyTransfer;
use super::{
    ByteRange, ChunkKeys, ChunkPort, KeyedChunks, ListDirResult, ReadInto, ReadNow, Store,
    StoreError, WriteNow,
};

const TMP_MARKER: &str = ".floe-tmp-";

/// A store rooted at a directory of the local file system.
#[derive(Debug, Clone)]
pub struct FilesystemStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    read_only: bool,
}

impl FilesystemStore {
    /// A writable store rooted at `root`, creating the directory if needed.
    ///
    /// # Errors
    /// [`StoreError::Io`] (key `""`) when the directory cannot be created.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|source| StoreError::Io {
            key: String::new(),
            source,
        })?;
        Ok(Self::with(root, false))
    }

    /// A read-only store rooted at an existing directory.
    ///
    /// # Errors
    /// [`StoreError::Io`] (key `""`) when `root` is not a directory.
    pub fn open_read_only(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        if !root.is_dir() {
            return Err(StoreError::Io {
                key: String::new(),
                source: std::io::Error::new(ErrorKind::NotFound, "store root is not a directory"),
            });
        }
        Ok(Self::with(root, true))
    }

    fn with(root: PathBuf, read_only: bool) -> Self {
        FilesystemStore {
            inner: Arc::new(Inner { root, read_only }),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| StoreError::Io {
                key: String::new(),
                source: std::io::Error::other(format!("blocking task failed: {e}")),
            })?
    }

    fn check_writable(&self, key: &str) -> Result<(), StoreError> {
        if self.inner.read_only {
            return Err(StoreError::ReadOnly {
                key: key.to_string(),
            });
        }
        Ok(())
    }
}

fn invalid(key: &str, reason: &str) -> StoreError {
    StoreError::InvalidKey {
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

/// Validates the `/`-separated segments of a key or prefix directory part.
fn check_segments(key: &str, allow_empty: bool) -> Result<(), StoreError> {
    if key.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            Err(invalid(key, "empty key"))
        };
    }
    if key.starts_with('/') {
        return Err(invalid(key, "absolute keys are not allowed"));
    }
    if key.contains('\\') || key.contains('\0') {
        return Err(invalid(key, "backslash and NUL are not allowed"));
    }
    for seg in key.split('/') {
        match seg {
            "" => return Err(invalid(key, "empty path segment")),
            "." | ".." => return Err(invalid(key, "`.` and `..` segments are not allowed")),
            s if s.contains(TMP_MARKER) => {
                return Err(invalid(key, "segment looks like a temporary file"))
            }
            _ => {}
        }
    }
    Ok(())
}

fn io(key: &str, source: std::io::Error) -> StoreError {
    StoreError::Io {
        key: key.to_string(),
        source,
    }
}

/// Whether an error means "no value at this key".
fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::NotFound | ErrorKind::IsADirectory | ErrorKind::NotADirectory
    )
}

/// A failure to open a key's file: `Ok` when the key has no value (the caller
/// answers "absent"), otherwise the store error.
fn read_failure(key: &str, e: ReadAtError) -> Result<(), StoreError> {
    match e {
        ReadAtError::NotFound => Ok(()),
        ReadAtError::Io(e) if is_absent(&e) => Ok(()),
        e => Err(read_error(key, e)),
    }
}

/// The store error of a failed read of `key`'s file (one that shrank while it was
/// read is an I/O error, as a short read of an open file).
fn read_error(key: &str, e: ReadAtError) -> StoreError {
    match e {
        ReadAtError::NotFound => io(key, ErrorKind::NotFound.into()),
        ReadAtError::Short { .. } => io(key, ErrorKind::UnexpectedEof.into()),
        ReadAtError::Io(e) => io(key, e),
    }
}

impl Inner {
    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        check_segments(key, false)?;
        Ok(self.root.join(key))
    }

    /// Directory of a prefix (`""`, `a/`, `a/b`), plus the key-string filter.
    fn prefix_dir(&self, prefix: &str) -> Result<(PathBuf, String), StoreError> {
        let dir_part = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        check_segments(dir_part, true).map_err(|_| invalid(prefix, "invalid prefix"))?;
        let key_dir = if dir_part.is_empty() {
            String::new()
        } else {
            format!("{dir_part}/")
        };
        Ok((self.root.join(dir_part), key_dir))
    }

    /// Removes empty directories from `dir` up to (excluding) the root.
    fn prune(&self, mut dir: PathBuf) {
        while dir.starts_with(&self.root) && dir != self.root {
            if std::fs::remove_dir(&dir).is_err() {
                break;
            }
            if !dir.pop() {
                break;
            }
        }
    }

    fn walk(&self, dir: &Path, key_dir: &str, out: &mut Vec<String>) -> Result<(), StoreError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(io(key_dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io(key_dir, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.contains(TMP_MARKER) {
                continue;
            }
            let path = entry.path();
            let key = format!("{key_dir}{name}");
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => self.walk(&path, &format!("{key}/"), out)?,
                Ok(_) => out.push(key),
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(io(&key, e)),
            }
        }
        Ok(())
    }

    fn has_files(&self, dir: &Path) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|entry| {
            let name = entry.file_name();
            if name.to_string_lossy().contains(TMP_MARKER) {
                return false;
            }
            match std::fs::metadata(entry.path()) {
                Ok(m) if m.is_dir() => self.has_files(&entry.path()),
                Ok(_) => true,
                Err(_) => false,
            }
        })
    }

    /// Writes `value` at `key` atomically (`storage::files::write_and_rename`),
    /// creating its directory when missing.
    fn write_atomic(&self, key: &str, path: &Path, value: &[u8]) -> Result<(), StoreError> {
        let parent = path
            .parent()
            .ok_or_else(|| invalid(key, "key has no parent directory"))?;
        let mut last_err = None;
        // A concurrent erase may prune the directory between create_dir_all and the
        // write; retry a few times.
        for _ in 0..8 {
            if let Err(e) = std::fs::create_dir_all(parent) {
                last_err = Some(e);
                continue;
            }
            match files::write_and_rename(path, value, None, false) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::NotFound => last_err = Some(e),
                Err(e) => return Err(io(key, e)),
            }
        }
        Err(io(
            key,
            last_err.unwrap_or_else(|| std::io::Error::other("write retries exhausted")),
        ))
    }
}

/// The transfer step of a [`FilesystemStore`]'s chunk port: a chunk file of exactly
/// the buffer's length read into it; a chunk written atomically from the calling
/// thread.
#[derive(Debug)]
struct FileTransfer(FilesystemStore);

impl FileTransfer {
    /// The chunk file of `key`, open, and its length in bytes; `None` when there is
    /// no such file (or a directory stands there: the chunk is missing).
    fn open_chunk(&self, key: &str) -> Result<Option<(std::fs::File, u64)>, StoreError> {
        let path = self.0.inner.path(key)?;
        let file = match files::open_object(&path) {
            Ok(f) => f,
            Err(e) => return read_failure(key, e).map(|()| None),
        };
        let meta = file.metadata().map_err(|e| io(key, e))?;
        Ok((!meta.is_dir()).then_some((file, meta.len())))
    }
}

impl KeyTransfer for FileTransfer {
    fn read_into(&self, key: &str, dest: &mut [u8]) -> Result<ReadInto, StoreError> {
        let Some((file, len)) = self.open_chunk(key)? else {
            return Ok(ReadInto::Missing);
        };
        if len != dest.len() as u64 {
            return Ok(ReadInto::Elsewhere);
        }
        files::read_exact_from(&file, 0, dest).map_err(|e| read_error(key, e))?;
        Ok(ReadInto::Read)
    }

    fn read_now(&self, key: &str, max_len: usize) -> Result<ReadNow, StoreError> {
        let Some((mut file, len)) = self.open_chunk(key)? else {
            return Ok(ReadNow::Missing);
        };
        if usize::try_from(len).map_or(true, |n| n > max_len) {
            return Ok(ReadNow::Elsewhere);
        }
        // Into a recycled buffer's spare capacity, without zeroing it first.
        let mut read = files::read_ranges_from(&mut file, len, std::slice::from_ref(&(0..len)))
            .map_err(|e| read_error(key, e))?;
        Ok(ReadNow::Read(read.pop().unwrap_or_default()))
    }

    fn write_now(&self, key: &str, bytes: Bytes) -> Result<WriteNow, StoreError> {
        self.0.check_writable(key)?;
        let path = self.0.inner.path(key)?;
        self.0.inner.write_atomic(key, &path, &bytes)?;
        Ok(WriteNow::Written)
    }
}

#[async_trait]
impl Store for FilesystemStore {
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        let key = key.to_string();
        self.blocking(move |s| {
            let path = s.path(&key)?;
            match files::read_whole(&path) {
                Ok((bytes, _)) => Ok(Some(bytes)),
                Err(e) if is_absent(&e) => Ok(None),
                Err(e) => Err(io(&key, e)),
            }
        })
        .await
    }

    /// Keys built once per array; chunk files read straight into an array's output
    /// and written by the thread that encoded them.
    fn chunk_port(&self, keys: &ChunkKeys) -> Option<Arc<dyn ChunkPort>> {
        Some(Arc::new(KeyedChunks::with_transfer(
            Arc::new(self.clone()),
            keys.clone(),
            Arc::new(FileTransfer(self.clone())),
        )))
    }

    async fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let key = key.to_string();
        self.blocking(move |s| {
            let path = s.path(&key)?;
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => Ok(Some(m.len())),
                Ok(_) => Ok(None),
                Err(e) if is_absent(&e) => Ok(None),
                Err(e) => Err(io(&key, e)),
            }
        })
        .await
    }

    async fn get_partial_values(
        &self,
        key: &str,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let key = key.to_string();
        let ranges = ranges.to_vec();
        self.blocking(move |s| {
            let path = s.path(&key)?;
            let mut f = match files::open_object(&path) {
                Ok(f) => f,
                Err(e) => return read_failure(&key, e).map(|()| None),
            };
            let meta = f.metadata().map_err(|e| io(&key, e))?;
            if meta.is_dir() {
                return Ok(None);
            }
            let size = meta.len();
            let ranges = ranges
                .iter()
                .map(|r| r.to_range(&key, size))
                .collect::<Result<Vec<_>, _>>()?;
            files::read_ranges_from(&mut f, size, &ranges)
                .map(Some)
                .map_err(|e| read_error(&key, e))
        })
        .await
    }

    async fn set(&self, key: &str, value: Bytes) -> Result<(), StoreError> {
        self.check_writable(key)?;
        let key = key.to_string();
        self.blocking(move |s| {
            let path = s.path(&key)?;
            s.write_atomic(&key, &path, &value)
        })
        .await
    }

    async fn erase(&self, key: &str) -> Result<(), StoreError> {
        self.check_writable(key)?;
        let key = key.to_string();
        self.blocking(move |s| {
            let path = s.path(&key)?;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => return Ok(()),
                Err(e) => return Err(io(&key, e)),
            }
            if let Some(parent) = path.parent() {
                s.prune(parent.to_path_buf());
            }
            Ok(())
        })
        .await
    }

    async fn erase_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        self.check_writable(prefix)?;
        if !(prefix.is_empty() || prefix.ends_with('/')) {
            for key in self.list_prefix(prefix).await? {
                self.erase(&key).await?;
            }
            return Ok(());
        }
        let prefix = prefix.to_string();
        self.blocking(move |s| {
            let (dir, _) = s.prefix_dir(&prefix)?;
            if prefix.is_empty() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if is_absent(&e) => return Ok(()),
                    Err(e) => return Err(io("", e)),
                };
                for entry in entries.flatten() {
                    let p = entry.path();
                    let r = if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                    match r {
                        Ok(()) => {}
                        Err(e) if is_absent(&e) => {}
                        Err(e) => return Err(io(&entry.file_name().to_string_lossy(), e)),
                    }
                }
                return Ok(());
            }
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => return Ok(()),
                Err(e) => return Err(io(&prefix, e)),
            }
            if let Some(parent) = dir.parent() {
                s.prune(parent.to_path_buf());
            }
            Ok(())
        })
        .await
    }

    async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let prefix = prefix.to_string();
        self.blocking(move |s| {
            let (dir, key_dir) = s.prefix_dir(&prefix)?;
            let mut keys = Vec::new();
            s.walk(&dir, &key_dir, &mut keys)?;
            keys.retain(|k| k.starts_with(&prefix));
            keys.sort();
            Ok(keys)
        })
        .await
    }

    async fn list_dir(&self, prefix: &str) -> Result<ListDirResult, StoreError> {
        let mut prefix = prefix.to_string();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        self.blocking(move |s| {
            let (dir, key_dir) = s.prefix_dir(&prefix)?;
            let mut out = ListDirResult::default();
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if is_absent(&e) => return Ok(out),
                Err(e) => return Err(io(&prefix, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io(&prefix, e))?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                if name.contains(TMP_MARKER) {
                    continue;
                }
                let path = entry.path();
                match std::fs::metadata(&path) {
                    Ok(m) if m.is_dir() => {
                        if s.has_files(&path) {
                            out.prefixes.push(format!("{key_dir}{name}/"));
                        }
                    }
                    Ok(_) => out.keys.push(format!("{key_dir}{name}")),
                    Err(e) if is_absent(&e) => {}
                    Err(e) => return Err(io(&name, e)),
                }
            }
            out.keys.sort();
            out.prefixes.sort();
            Ok(out)
        })
        .await
    }

    fn is_writable(&self) -> bool {
        !self.inner.read_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn conformance() {
        let dir = tempfile::tempdir().unwrap();
        let store = FilesystemStore::new(dir.path().join("root")).unwrap();
        super::super::conformance::store_conformance(&store).await;
    }

    /// A chunk file read whole on the calling thread: its bytes when at most
    /// `max_len`, declined when longer, missing when absent or a directory.
    #[tokio::test]
    async fn chunk_files_read_now() {
        let dir = tempfile::tempdir().unwrap();
        let store = FilesystemStore::new(dir.path()).unwrap();
        let bytes = Bytes::from((0..5000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        store.set("a/c/0", bytes.clone()).await.unwrap();
        store.set("a/c/1", Bytes::new()).await.unwrap();
        store
            .set("a/c/2/x", Bytes::from_static(b"x"))
            .await
            .unwrap();
        let t = FileTransfer(store);
        for max_len in [5000, 1 << 20] {
            match t.read_now("a/c/0", max_len).unwrap() {
                ReadNow::Read(got) => assert_eq!(got, bytes, "max_len {max_len}"),
                other => panic!("max_len {max_len}: {other:?}"),
            }
        }
        assert!(matches!(
            t.read_now("a/c/0", 4999).unwrap(),
            ReadNow::Elsewhere
        ));
        assert!(matches!(t.read_now("a/c/1", 0).unwrap(), ReadNow::Read(b) if b.is_empty()));
        assert!(matches!(
            t.read_now("a/c/9", 1 << 20).unwrap(),
            ReadNow::Missing
        ));
        assert!(matches!(
            t.read_now("a/c/2", 1 << 20).unwrap(),
            ReadNow::Missing
        ));
    }

    #[tokio::test]
    async fn rejects_escaping_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = FilesystemStore::new(dir.path().join("root")).unwrap();
        for key in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "./a",
            "a/.",
            "",
            "a\\b",
        ] {
            assert!(
                matches!(
                    store.set(key, Bytes::from_static(b"x")).await,
                    Err(StoreError::InvalidKey { .. })
                ),
                "{key:?}"
            );
            assert!(matches!(
                store.get(key).await,
                Err(StoreError::InvalidKey { .. })
            ));
        }
        assert!(!dir.path().join("x").exists());
        assert!(matches!(
            store.list_prefix("../").await,
            Err(StoreError::InvalidKey { .. })
        ));
    }

    #[tokio::test]
    async fn layout_matches_spec_and_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = FilesystemStore::new(dir.path()).unwrap();
        store
            .set("foo/bar", Bytes::from_static(b"v"))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("foo").join("bar")).unwrap(),
            b"v"
        );
        // no temporary files left behind
        let names: Vec<_> = std::fs::read_dir(dir.path().join("foo"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1);
        store.erase("foo/bar").await.unwrap();
        assert!(
            !dir.path().join("foo").exists(),
            "empty directories are pruned"
        );
        store.set("a/b", Bytes::from_static(b"v")).await.unwrap();
        let ro = FilesystemStore::open_read_only(dir.path()).unwrap();
        assert!(!ro.is_writable());
        assert_eq!(ro.get("a/b").await.unwrap().unwrap(), &b"v"[..]);
        assert!(matches!(
            ro.set("a/c", Bytes::new()).await,
            Err(StoreError::ReadOnly { .. })
        ));
        assert!(matches!(
            ro.erase("a/b").await,
            Err(StoreError::ReadOnly { .. })
        ));
        // an empty directory created by another tool is not a prefix
        std::fs::create_dir_all(dir.path().join("empty/sub")).unwrap();
        assert_eq!(
            store.list_dir("").await.unwrap().prefixes,
            vec!["a/".to_string()]
        );
        // reading a directory as a key is "absent"
        assert_eq!(store.get("a").await.unwrap(), None);
    }
}
