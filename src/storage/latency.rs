//! [`LatencyStorage`]: a storage wrapper that waits a configurable time before each
//! request it forwards, to reproduce the timing of a distant object store on a local
//! one (Icechunk 2.3.0's `LatencyStorage`, exposed to Python as
//! `icechunk.testing.LatencyStorage`).
//!
//! Reads (`get*`, `head`, `list*`) wait the read latency; writes (`put*`, `delete*`)
//! wait the write latency. Both are milliseconds, adjustable at any time from any
//! thread; the new value applies to requests that start after the change. A listing
//! waits once, when it starts, however many objects it returns (as Icechunk's, which
//! waits on the first page only). It offers no blocking local-file access
//! ([`Storage::local_files`] is `None`), so every request takes the waiting path,
//! even over a local directory.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectInfo, ObjectVersion, Storage, StorageResult, VersionedBytes, WriteOutcome};

/// Forwards every operation to `inner` after waiting the read or write latency.
#[derive(Debug)]
pub struct LatencyStorage {
    inner: Arc<dyn Storage>,
    /// Milliseconds to wait before each write.
    write_delay_ms: AtomicU64,
    /// Milliseconds to wait before each read.
    read_delay_ms: AtomicU64,
}

impl LatencyStorage {
    /// Wraps `inner`, waiting `write_delay_ms` milliseconds before each write and
    /// `read_delay_ms` before each read.
    pub fn new(inner: Arc<dyn Storage>, write_delay_ms: u64, read_delay_ms: u64) -> Self {
        LatencyStorage {
            inner,
            write_delay_ms: AtomicU64::new(write_delay_ms),
            read_delay_ms: AtomicU64::new(read_delay_ms),
        }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    /// The current write latency, in milliseconds.
    pub fn write_delay_ms(&self) -> u64 {
        self.write_delay_ms.load(Ordering::Relaxed)
    }

    /// Sets the write latency, in milliseconds, for writes that start from now on.
    pub fn set_write_delay_ms(&self, ms: u64) {
        self.write_delay_ms.store(ms, Ordering::Relaxed);
    }

    /// The current read latency, in milliseconds.
    pub fn read_delay_ms(&self) -> u64 {
        self.read_delay_ms.load(Ordering::Relaxed)
    }

    /// Sets the read latency, in milliseconds, for reads that start from now on.
    pub fn set_read_delay_ms(&self, ms: u64) {
        self.read_delay_ms.store(ms, Ordering::Relaxed);
    }

    async fn wait(ms: u64) {
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    async fn before_read(&self) {
        Self::wait(self.read_delay_ms()).await;
    }

    async fn before_write(&self) {
        Self::wait(self.write_delay_ms()).await;
    }
}

impl fmt::Display for LatencyStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (latency: write {} ms, read {} ms)",
            self.inner,
            self.write_delay_ms(),
            self.read_delay_ms()
        )
    }
}

#[async_trait]
impl Storage for LatencyStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.before_read().await;
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        self.before_read().await;
        self.inner.get_range(key, range).await
    }
    async fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> StorageResult<Vec<Bytes>> {
        self.before_read().await;
        self.inner.get_ranges(key, ranges).await
    }
    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.before_read().await;
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.before_write().await;
        self.inner.put(key, bytes).await
    }
    async fn put_fresh(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        self.before_write().await;
        self.inner.put_fresh(key, bytes).await
    }
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        self.before_write().await;
        self.inner.put_if_absent(key, bytes).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.before_write().await;
        self.inner.put_if_match(key, bytes, expected).await
    }
    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.before_write().await;
        self.inner.delete_if_match(key, expected).await
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        self.before_write().await;
        self.inner.delete(key).await
    }
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        self.before_write().await;
        self.inner.delete_many(keys).await
    }
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        self.before_read().await;
        self.inner.list(prefix).await
    }
    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        let ms = self.read_delay_ms();
        futures::stream::once(Self::wait(ms))
            .map(move |()| self.inner.list_stream(prefix))
            .flatten()
            .boxed()
    }
    fn list_stream_except<'a>(
        &'a self,
        prefix: &'a str,
        skip: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        let ms = self.read_delay_ms();
        futures::stream::once(Self::wait(ms))
            .map(move |()| self.inner.list_stream_except(prefix, skip))
            .flatten()
            .boxed()
    }
    fn ranged_listing(&self) -> bool {
        self.inner.ranged_listing()
    }
    fn max_concurrent_requests(&self) -> Option<usize> {
        self.inner.max_concurrent_requests()
    }
    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::new_in_memory_storage;
    use std::time::Instant;

    #[tokio::test]
    async fn reads_and_writes_wait_their_latency_and_forward() {
        let raw = new_in_memory_storage();
        let s = LatencyStorage::new(Arc::clone(&raw), 0, 0);
        assert_eq!((s.write_delay_ms(), s.read_delay_ms()), (0, 0));
        s.set_write_delay_ms(120);
        s.set_read_delay_ms(60);

        let t = Instant::now();
        s.put("k", Bytes::from_static(b"hello")).await.unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(120),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(raw.get("k").await.unwrap().bytes.as_ref(), b"hello");

        let t = Instant::now();
        assert_eq!(s.get_range("k", 1..3).await.unwrap().as_ref(), b"el");
        let read = t.elapsed();
        assert!(read >= Duration::from_millis(60), "{read:?}");
        assert!(read < Duration::from_millis(120), "{read:?}");

        let t = Instant::now();
        use futures::TryStreamExt;
        let listed: Vec<_> = s.list_stream("").try_collect().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(t.elapsed() >= Duration::from_millis(60));

        s.set_write_delay_ms(0);
        let v = s.head("k").await.unwrap().version.unwrap();
        let t = Instant::now();
        let out = s.put_if_match("k", Bytes::from_static(b"x"), &v).await;
        assert!(matches!(out, Ok(WriteOutcome::Written(_))));
        assert!(t.elapsed() < Duration::from_millis(120));
        assert_eq!(s.root_url(), raw.root_url());
    }

    #[tokio::test]
    async fn errors_pass_through_unchanged() {
        let s = LatencyStorage::new(new_in_memory_storage(), 1, 1);
        let e = s.get("missing").await.unwrap_err();
        assert!(
            matches!(e, crate::storage::StorageError::NotFound { .. }),
            "{e}"
        );
    }
}
