//! [`ReadOnlyStorage`]: a storage that reads and refuses every write, for backends
//! that cannot write (HTTP servers serving a repository as static files: Icechunk's
//! `http_storage`).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    LocalFiles, ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes,
    WriteOutcome,
};

/// Reads through `inner`; every write fails with [`StorageError::ReadOnly`] before
/// any request is sent.
#[derive(Debug)]
pub struct ReadOnlyStorage {
    inner: Arc<dyn Storage>,
}

impl ReadOnlyStorage {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        ReadOnlyStorage { inner }
    }

    fn refuse(&self, key: &str) -> StorageError {
        StorageError::ReadOnly {
            key: key.to_string(),
            location: self.inner.root_url(),
        }
    }
}

impl fmt::Display for ReadOnlyStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl Storage for ReadOnlyStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> StorageResult<Vec<Bytes>> {
        self.inner.get_ranges(key, ranges).await
    }
    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, _bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        Err(self.refuse(key))
    }
    async fn put_fresh(&self, key: &str, _bytes: Bytes) -> StorageResult<()> {
        Err(self.refuse(key))
    }
    async fn put_if_absent(&self, key: &str, _bytes: Bytes) -> StorageResult<WriteOutcome> {
        Err(self.refuse(key))
    }
    async fn put_if_match(
        &self,
        key: &str,
        _bytes: Bytes,
        _expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        Err(self.refuse(key))
    }
    async fn delete_if_match(
        &self,
        key: &str,
        _expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        Err(self.refuse(key))
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        Err(self.refuse(key))
    }
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        match keys.first() {
            Some(k) => Err(self.refuse(k)),
            None => Ok(()),
        }
    }
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        self.inner.list_stream(prefix)
    }
    fn list_stream_except<'a>(
        &'a self,
        prefix: &'a str,
        skip: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        self.inner.list_stream_except(prefix, skip)
    }
    fn ranged_listing(&self) -> bool {
        self.inner.ranged_listing()
    }
    /// The inner storage's local files, reading through and refusing every write.
    fn local_files(&self) -> Option<Arc<dyn LocalFiles>> {
        let inner = self.inner.local_files()?;
        Some(Arc::new(ReadOnlyFiles {
            inner,
            location: self.inner.root_url(),
        }))
    }

    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::new_in_memory_storage;

    #[tokio::test]
    async fn reads_pass_and_every_write_is_refused() {
        let raw = new_in_memory_storage();
        raw.put("a", Bytes::from_static(b"x")).await.unwrap();
        let s = ReadOnlyStorage::new(Arc::clone(&raw));
        assert_eq!(s.get("a").await.unwrap().bytes.as_ref(), b"x");
        let v = s.head("a").await.unwrap().version.unwrap();
        for e in [
            s.put("b", Bytes::new()).await.unwrap_err(),
            s.put_fresh("b", Bytes::new()).await.unwrap_err(),
            s.put_if_absent("b", Bytes::new()).await.unwrap_err(),
            s.put_if_match("a", Bytes::new(), &v).await.unwrap_err(),
            s.delete_if_match("a", &v).await.unwrap_err(),
            s.delete("a").await.unwrap_err(),
            s.delete_many(&["a".into()]).await.unwrap_err(),
        ] {
            assert!(matches!(e, StorageError::ReadOnly { .. }), "{e}");
        }
        assert_eq!(raw.get("a").await.unwrap().bytes.as_ref(), b"x");
    }
}

/// [`ReadOnlyStorage`]'s blocking capability: reads through, refuses writes.
#[derive(Debug)]
struct ReadOnlyFiles {
    inner: Arc<dyn LocalFiles>,
    location: String,
}

impl LocalFiles for ReadOnlyFiles {
    fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.inner.get(key)
    }

    fn get_range_into(&self, key: &str, start: u64, dest: &mut [u8]) -> StorageResult<()> {
        self.inner.get_range_into(key, start, dest)
    }

    fn get_range_owned(&self, key: &str, start: u64, len: usize) -> StorageResult<Bytes> {
        self.inner.get_range_owned(key, start, len)
    }

    fn put_fresh(&self, key: &str, _bytes: &[u8]) -> StorageResult<()> {
        Err(StorageError::ReadOnly {
            key: key.to_string(),
            location: self.location.clone(),
        })
    }
}
