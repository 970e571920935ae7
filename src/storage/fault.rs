//! Fault injection for tests: a [`Storage`] wrapper that fails, delays, or loses the
//! response of any chosen call, to prove that what the engine promises survives
//! storage failures (a commit that returned `Ok` is never lost, one that returned an
//! error landed completely or not at all).
//!
//! [`Storage::get_ranges`] keeps the trait's default: it plans the coalesced requests
//! and issues each as a [`Storage::get_range`] of this wrapper, so a plan sees one
//! [`Call::GetRange`] per request actually made (tests count requests this way).
//!
//! Available with the `testing` cargo feature.

use std::fmt::{Debug, Display};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    LocalFiles, ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes,
    WriteOutcome,
};

/// Which [`Storage`] method a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Call {
    /// [`Storage::get`]
    Get,
    /// [`Storage::get_range`]
    GetRange,
    /// [`Storage::head`]
    Head,
    /// [`Storage::put`]
    Put,
    /// [`Storage::put_if_absent`]
    PutIfAbsent,
    /// [`Storage::put_if_match`]
    PutIfMatch,
    /// [`Storage::delete`]
    Delete,
    /// [`Storage::list`]
    List,
}

impl Call {
    /// Whether the call writes or deletes.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Call::Put | Call::PutIfAbsent | Call::PutIfMatch | Call::Delete
        )
    }
}

/// What happens to one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The call goes through.
    None,
    /// The call fails with a backend error before reaching the storage.
    FailBefore,
    /// The call reaches the storage (a write is done), then fails with a backend
    /// error: a lost response.
    FailAfter,
    /// The call goes through after this delay.
    Delay(Duration),
    /// A conditional write ([`Storage::put_if_absent`], [`Storage::put_if_match`])
    /// reaches the storage and is done, then reports
    /// [`WriteOutcome::PreconditionFailed`]: what a client sees when the response to
    /// its write was lost and its automatic retry of the same request found the
    /// object already changed (by that first write). Other calls go through.
    LandThenRefuse,
}

/// Decides the fault of each call from its method and key.
pub type FaultPlan = Box<dyn FnMut(Call, &str) -> Fault + Send>;

/// A [`Storage`] that applies a [`FaultPlan`] to every call of an inner storage.
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    plan: Arc<Mutex<FaultPlan>>,
    ranged_listing: Option<bool>,
}

impl FaultyStorage {
    /// Wraps `inner`; `plan` is asked about every call.
    pub fn new(inner: Arc<dyn Storage>, plan: FaultPlan) -> Self {
        FaultyStorage {
            inner,
            plan: Arc::new(Mutex::new(plan)),
            ranged_listing: None,
        }
    }

    /// Reports `yes` from [`Storage::ranged_listing`] whatever the inner storage
    /// reports, so that callers' ranged-listing paths (one listing per key range)
    /// run over any backend; what listings return is still the inner storage's.
    pub fn with_ranged_listing(mut self, yes: bool) -> Self {
        self.ranged_listing = Some(yes);
        self
    }

    /// Replaces the plan.
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.plan.lock().unwrap_or_else(|p| p.into_inner()) = plan;
    }

    fn fault(&self, call: Call, key: &str) -> Fault {
        (self.plan.lock().unwrap_or_else(|p| p.into_inner()))(call, key)
    }

    fn injected(call: Call, key: &str) -> StorageError {
        StorageError::Backend {
            key: key.to_string(),
            source: Box::new(object_store::Error::Generic {
                store: "fault injection",
                source: format!("injected failure of {call:?}").into(),
            }),
        }
    }

    /// Runs `op` under the plan's fault for (`call`, `key`).
    async fn run<T, F>(&self, call: Call, key: &str, op: F) -> StorageResult<T>
    where
        F: std::future::Future<Output = StorageResult<T>>,
    {
        Self::apply(self.fault(call, key), call, key, op).await
    }

    /// Runs `op` under `fault`.
    async fn apply<T, F>(fault: Fault, call: Call, key: &str, op: F) -> StorageResult<T>
    where
        F: std::future::Future<Output = StorageResult<T>>,
    {
        match fault {
            Fault::None | Fault::LandThenRefuse => op.await,
            Fault::FailBefore => Err(Self::injected(call, key)),
            Fault::FailAfter => {
                op.await?;
                Err(Self::injected(call, key))
            }
            Fault::Delay(d) => {
                tokio::time::sleep(d).await;
                op.await
            }
        }
    }

    /// Runs the conditional write `op` under the plan's fault for (`call`, `key`).
    async fn run_conditional<F>(&self, call: Call, key: &str, op: F) -> StorageResult<WriteOutcome>
    where
        F: std::future::Future<Output = StorageResult<WriteOutcome>>,
    {
        match self.fault(call, key) {
            Fault::LandThenRefuse => {
                op.await?;
                Ok(WriteOutcome::PreconditionFailed)
            }
            fault => Self::apply(fault, call, key, op).await,
        }
    }
}

impl Debug for FaultyStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyStorage({})", self.inner)
    }
}

impl Display for FaultyStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl Storage for FaultyStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.run(Call::Get, key, self.inner.get(key)).await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        self.run(Call::GetRange, key, self.inner.get_range(key, range))
            .await
    }

    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        self.run(Call::Head, key, self.inner.head(key)).await
    }

    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.run(Call::Put, key, self.inner.put(key, bytes)).await
    }

    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        self.run_conditional(Call::PutIfAbsent, key, self.inner.put_if_absent(key, bytes))
            .await
    }

    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.run_conditional(
            Call::PutIfMatch,
            key,
            self.inner.put_if_match(key, bytes, expected),
        )
        .await
    }

    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.run_conditional(Call::Delete, key, self.inner.delete_if_match(key, expected))
            .await
    }

    async fn delete(&self, key: &str) -> StorageResult<()> {
        self.run(Call::Delete, key, self.inner.delete(key)).await
    }

    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        self.run(Call::List, prefix, self.inner.list(prefix)).await
    }

    fn ranged_listing(&self) -> bool {
        self.ranged_listing
            .unwrap_or_else(|| self.inner.ranged_listing())
    }

    fn max_concurrent_requests(&self) -> Option<usize> {
        self.inner.max_concurrent_requests()
    }

    /// The inner storage's local files under the same plan: a blocking read is a
    /// [`Call::Get`] or [`Call::GetRange`], a blocking write a [`Call::Put`], and
    /// a delay sleeps the calling thread.
    fn local_files(&self) -> Option<Arc<dyn LocalFiles>> {
        let inner = self.inner.local_files()?;
        Some(Arc::new(FaultyFiles {
            inner,
            plan: Arc::clone(&self.plan),
        }))
    }

    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

/// [`FaultyStorage`]'s blocking capability: the inner storage's, under the plan.
struct FaultyFiles {
    inner: Arc<dyn LocalFiles>,
    plan: Arc<Mutex<FaultPlan>>,
}

impl Debug for FaultyFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyFiles({:?})", self.inner)
    }
}

impl FaultyFiles {
    /// Runs `op` under the plan's fault for (`call`, `key`), blocking.
    fn run<T>(
        &self,
        call: Call,
        key: &str,
        op: impl FnOnce() -> StorageResult<T>,
    ) -> StorageResult<T> {
        let fault = (self.plan.lock().unwrap_or_else(|p| p.into_inner()))(call, key);
        match fault {
            Fault::None | Fault::LandThenRefuse => op(),
            Fault::FailBefore => Err(FaultyStorage::injected(call, key)),
            Fault::FailAfter => {
                op()?;
                Err(FaultyStorage::injected(call, key))
            }
            Fault::Delay(d) => {
                std::thread::sleep(d);
                op()
            }
        }
    }
}

impl LocalFiles for FaultyFiles {
    fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        self.run(Call::Get, key, || self.inner.get(key))
    }

    fn get_range_into(&self, key: &str, start: u64, dest: &mut [u8]) -> StorageResult<()> {
        self.run(Call::GetRange, key, || {
            self.inner.get_range_into(key, start, dest)
        })
    }

    fn get_range_owned(&self, key: &str, start: u64, len: usize) -> StorageResult<Bytes> {
        self.run(Call::GetRange, key, || {
            self.inner.get_range_owned(key, start, len)
        })
    }

    fn put_fresh(&self, key: &str, bytes: &[u8]) -> StorageResult<()> {
        self.run(Call::Put, key, || self.inner.put_fresh(key, bytes))
    }

    fn quick_writes(&self) -> bool {
        self.inner.quick_writes()
    }
}
