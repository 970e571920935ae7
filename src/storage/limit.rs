//! [`LimitedStorage`]: a storage wrapper that keeps at most a set number of requests
//! in flight, the repository configuration's `max_concurrent_requests` (Icechunk
//! 2.3.0 bounds the requests of a repository's asset manager the same way, default
//! 256). A request past the bound waits for one to end. The bound can change while
//! requests run ([`RequestLimit::set`]): requests that start afterwards count
//! against the new bound, those in flight finish under the old one.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{
    LocalFiles, ObjectInfo, ObjectVersion, Storage, StorageResult, VersionedBytes, WriteOutcome,
};

/// The bound of a [`LimitedStorage`], shared with whoever may change it (the
/// repository, when its configuration changes).
#[derive(Debug)]
pub struct RequestLimit {
    /// The current bound and the semaphore enforcing it.
    current: RwLock<(usize, Arc<Semaphore>)>,
}

impl RequestLimit {
    /// A bound of `max` requests in flight (at least 1).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        RequestLimit {
            current: RwLock::new((max, Arc::new(Semaphore::new(max)))),
        }
    }

    /// The current bound.
    pub fn get(&self) -> usize {
        self.current.read().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Changes the bound to `max` (at least 1) for requests that start from now on.
    pub fn set(&self, max: usize) {
        let max = max.max(1);
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.0 != max {
            *current = (max, Arc::new(Semaphore::new(max)));
        }
    }

    /// Waits for a free place; the request holds the permit until it ends.
    async fn acquire(&self) -> OwnedSemaphorePermit {
        let semaphore = Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()).1);
        // Never closed: the semaphore lives as long as this `Arc`.
        match semaphore.acquire_owned().await {
            Ok(permit) => permit,
            Err(_) => unreachable!("the request semaphore is never closed"),
        }
    }
}

/// Forwards every request to `inner` once fewer than the [`RequestLimit`]'s bound
/// are in flight. A listing stream holds one place until it ends. Blocking local-file
/// access ([`Storage::local_files`]) is forwarded unbounded: those calls run on the
/// compute threads, which bound them.
#[derive(Debug)]
pub struct LimitedStorage {
    inner: Arc<dyn Storage>,
    limit: Arc<RequestLimit>,
}

impl LimitedStorage {
    /// Wraps `inner` under `limit`.
    pub fn new(inner: Arc<dyn Storage>, limit: Arc<RequestLimit>) -> Self {
        LimitedStorage { inner, limit }
    }
}

impl fmt::Display for LimitedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl Storage for LimitedStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        let _permit = self.limit.acquire().await;
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        let _permit = self.limit.acquire().await;
        self.inner.get_range(key, range).await
    }
    async fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> StorageResult<Vec<Bytes>> {
        let _permit = self.limit.acquire().await;
        self.inner.get_ranges(key, ranges).await
    }
    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        let _permit = self.limit.acquire().await;
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        let _permit = self.limit.acquire().await;
        self.inner.put(key, bytes).await
    }
    async fn put_fresh(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        let _permit = self.limit.acquire().await;
        self.inner.put_fresh(key, bytes).await
    }
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        let _permit = self.limit.acquire().await;
        self.inner.put_if_absent(key, bytes).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        version: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        let _permit = self.limit.acquire().await;
        self.inner.put_if_match(key, bytes, version).await
    }
    async fn delete_if_match(
        &self,
        key: &str,
        version: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        let _permit = self.limit.acquire().await;
        self.inner.delete_if_match(key, version).await
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        let _permit = self.limit.acquire().await;
        self.inner.delete(key).await
    }
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        let _permit = self.limit.acquire().await;
        self.inner.delete_many(keys).await
    }
    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        let _permit = self.limit.acquire().await;
        self.inner.list(prefix).await
    }
    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        futures::stream::once(self.limit.acquire())
            .map(move |permit| {
                // The place is held until the listing ends.
                self.inner.list_stream(prefix).map(move |item| {
                    let _held = &permit;
                    item
                })
            })
            .flatten()
            .boxed()
    }
    fn list_stream_except<'a>(
        &'a self,
        prefix: &'a str,
        skip: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        futures::stream::once(self.limit.acquire())
            .map(move |permit| {
                // The place is held until the listing ends.
                self.inner
                    .list_stream_except(prefix, skip)
                    .map(move |item| {
                        let _held = &permit;
                        item
                    })
            })
            .flatten()
            .boxed()
    }
    fn ranged_listing(&self) -> bool {
        self.inner.ranged_listing()
    }
    /// The smaller of the inner storage's bound and this one.
    fn max_concurrent_requests(&self) -> Option<usize> {
        let mine = self.limit.get();
        Some(
            self.inner
                .max_concurrent_requests()
                .map_or(mine, |i| i.min(mine)),
        )
    }
    fn local_files(&self) -> Option<Arc<dyn LocalFiles>> {
        self.inner.local_files()
    }
    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fault::{Fault, FaultyStorage};
    use crate::storage::new_in_memory_storage;
    use std::time::Duration;

    /// Runs `n` puts (or gets) at once through `s`, each request taking 20 ms on a
    /// paused clock; returns the time they took in all.
    async fn run(s: &Arc<LimitedStorage>, n: usize, write: bool) -> Duration {
        let t = tokio::time::Instant::now();
        let calls = (0..n).map(|i| {
            let s = Arc::clone(s);
            async move {
                let key = format!("k{i}");
                if write {
                    s.put(&key, Bytes::from_static(b"x")).await.map(|_| ())
                } else {
                    s.get(&key)
                        .await
                        .map(|v| assert_eq!(v.bytes.as_ref(), b"x"))
                }
            }
        });
        for r in futures::future::join_all(calls).await {
            r.unwrap();
        }
        t.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_the_bound_is_in_flight_and_the_bound_can_change() {
        let inner: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
            new_in_memory_storage(),
            Box::new(|_, _| Fault::Delay(Duration::from_millis(20))),
        ));
        let limit = Arc::new(RequestLimit::new(4));
        let s = Arc::new(LimitedStorage::new(inner, Arc::clone(&limit)));
        assert_eq!(s.max_concurrent_requests(), Some(4));
        // 16 requests of 20 ms, 4 at a time: 4 rounds.
        assert_eq!(run(&s, 16, true).await, Duration::from_millis(80));
        limit.set(16);
        assert_eq!((limit.get(), s.max_concurrent_requests()), (16, Some(16)));
        assert_eq!(run(&s, 16, false).await, Duration::from_millis(20));
        limit.set(0);
        assert_eq!(limit.get(), 1);
        assert_eq!(run(&s, 3, false).await, Duration::from_millis(60));
    }
}
