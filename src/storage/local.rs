//! [`LocalStorage`]: a repository on the local filesystem, safe for concurrent writers
//! in several OS processes.
//!
//! Reads, plain writes, create-if-not-exists (a hard link, atomic on POSIX filesystems)
//! and listing go through `object_store`'s `LocalFileSystem`. It cannot compare-and-swap,
//! so [`Storage::put_if_match`] here takes an advisory lock (`flock`) on the directory
//! that holds the object, checks the version, and renames a fully written temporary file
//! over the object while holding it. Locks are released when their process dies and no
//! lock file is ever created, so other readers of the repository (Icechunk) never see one.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use object_store::local::LocalFileSystem;

use super::object::ObjectStorage;
use super::{
    ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes, WriteOutcome,
};

/// Storage rooted at a directory of the local filesystem.
#[derive(Debug, Clone)]
pub struct LocalStorage {
    root: PathBuf,
    inner: ObjectStorage,
}

impl LocalStorage {
    /// Opens (creating it if needed) the directory `root` as storage.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the directory cannot be created or resolved;
    /// [`StorageError::InvalidLocation`] when object_store rejects the path.
    pub fn new(root: &FsPath) -> StorageResult<Self> {
        std::fs::create_dir_all(root).map_err(|source| StorageError::Io {
            key: root.display().to_string(),
            source,
        })?;
        let root = root.canonicalize().map_err(|source| StorageError::Io {
            key: root.display().to_string(),
            source,
        })?;
        let fs =
            LocalFileSystem::new_with_prefix(&root).map_err(|e| StorageError::InvalidLocation {
                location: root.display().to_string(),
                reason: e.to_string(),
            })?;
        let url = format!("file://{}", root.display());
        Ok(LocalStorage {
            inner: ObjectStorage::new(Arc::new(fs), "", url),
            root,
        })
    }

    /// The root directory.
    pub fn root(&self) -> &FsPath {
        &self.root
    }

    fn fs_path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// Takes an exclusive advisory lock on the directory holding `key`; `None` when the
    /// directory does not exist. The lock is held until the returned file is dropped.
    async fn lock_parent(&self, key: &str) -> StorageResult<Option<File>> {
        let dir = self
            .fs_path(key)
            .parent()
            .map(FsPath::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        let key_owned = key.to_string();
        tokio::task::spawn_blocking(move || -> StorageResult<Option<File>> {
            let dir_file = match File::open(&dir) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => {
                    return Err(StorageError::Io {
                        key: key_owned,
                        source,
                    })
                }
            };
            dir_file.lock().map_err(|source| StorageError::Io {
                key: key_owned.clone(),
                source,
            })?;
            Ok(Some(dir_file))
        })
        .await
        .map_err(|e| StorageError::Io {
            key: key.to_string(),
            source: std::io::Error::other(e),
        })?
    }

    async fn current_version(&self, key: &str) -> StorageResult<Option<ObjectVersion>> {
        match self.inner.head(key).await {
            Ok(info) => Ok(info.version),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
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
fn write_and_rename(
    target: &FsPath,
    bytes: &[u8],
    previous: Option<SystemTime>,
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
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Microseconds since the epoch, the precision of `object_store`'s local etags.
fn micros(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros()
}

/// Sets the mtime of `f` to now, or to the earliest time after `previous` that the
/// file system keeps as later than `previous` when now is not.
fn set_mtime_after(f: &File, previous: SystemTime) -> std::io::Result<()> {
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

impl fmt::Display for LocalStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl Storage for LocalStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.inner.get(key).await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        self.inner.get_range(key, range).await
    }

    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.inner.head(key).await
    }

    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.inner.put(key, bytes).await
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
        let Some(lock) = self.lock_parent(key).await? else {
            return Ok(WriteOutcome::PreconditionFailed);
        };
        if self.current_version(key).await?.as_ref() != Some(expected) {
            drop(lock);
            return Ok(WriteOutcome::PreconditionFailed);
        }
        let target = self.fs_path(key);
        let key_owned = key.to_string();
        tokio::task::spawn_blocking(move || {
            let previous = std::fs::metadata(&target).and_then(|m| m.modified()).ok();
            write_and_rename(&target, &bytes, previous)
        })
        .await
        .map_err(|e| StorageError::Io {
            key: key_owned.clone(),
            source: std::io::Error::other(e),
        })?
        .map_err(|source| StorageError::Io {
            key: key_owned,
            source,
        })?;
        let version = self.current_version(key).await?;
        drop(lock);
        Ok(WriteOutcome::Written(version))
    }

    async fn delete(&self, key: &str) -> StorageResult<()> {
        // Serialized with compare-and-swap on the same directory, so a delete never
        // interleaves with the check and rename of a concurrent update.
        let lock = self.lock_parent(key).await?;
        let res = self.inner.delete(key).await;
        drop(lock);
        res
    }

    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        let mut all = match self.inner.list(prefix).await {
            Ok(v) => v,
            Err(StorageError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        // Temporary files of in-flight writes are not objects.
        all.retain(|i| {
            let name = i.key.rsplit('/').next().unwrap_or("");
            let temporary = name.starts_with('.') && name.contains(".floe-tmp-");
            !temporary && !name.contains('#')
        });
        Ok(all)
    }

    fn list_stream<'a>(
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
                    Ok(i) => {
                        let name = i.key.rsplit('/').next().unwrap_or("");
                        let temporary = name.starts_with('.') && name.contains(".floe-tmp-");
                        !temporary && !name.contains('#')
                    }
                };
                futures::future::ready(keep)
            })
            .boxed()
    }

    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}
