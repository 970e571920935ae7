//! [`CheckedConditionalWrites`]: a storage whose server must prove, once, that it
//! enforces conditional writes before any conditional write goes through.
//!
//! Icechunk's consistency rests on two preconditions (spec, "Storage Operations"):
//! create-if-not-exists (`If-None-Match: *`, GCS `x-goog-if-generation-match: 0`) and
//! compare-and-swap (`If-Match: <etag>`, GCS generation match). A server that ignores
//! them (several emulators do) accepts every write, so two commits racing on a branch
//! both "win" and one is lost without an error. Icechunk offers to write without the
//! preconditions (`unsafe_use_conditional_create/update = False`); floe refuses
//! instead: on such a server every conditional write (repository creation, commits,
//! ref updates) fails with [`StorageError::UnsafeConditionalWrites`], while reads
//! and unconditional writes (chunks) keep working.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes, WriteOutcome,
};

/// The probe's key prefix, under the storage root; the probe object is deleted after.
pub const PROBE_PREFIX: &str = ".floe-conditional-write-check/";

/// A storage that checks, before its first conditional write, that the server
/// enforces preconditions (see the module documentation). The check writes one
/// probe object under [`PROBE_PREFIX`] and deletes it: four requests, once per
/// storage value. Its verdict is kept; a check that fails for another reason (the
/// network) is tried again at the next conditional write.
pub struct CheckedConditionalWrites {
    inner: Arc<dyn Storage>,
    verdict: tokio::sync::OnceCell<Result<(), String>>,
}

impl CheckedConditionalWrites {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        CheckedConditionalWrites {
            inner,
            verdict: tokio::sync::OnceCell::new(),
        }
    }

    /// Runs the check once; `Err` when the server does not enforce preconditions.
    ///
    /// # Errors
    /// [`StorageError::UnsafeConditionalWrites`] naming what the server ignored;
    /// backend errors of the probe's requests.
    pub async fn check(&self) -> StorageResult<()> {
        let verdict = self
            .verdict
            .get_or_try_init(|| probe(self.inner.as_ref()))
            .await?;
        verdict
            .clone()
            .map_err(|reason| StorageError::UnsafeConditionalWrites {
                location: self.inner.root_url(),
                reason,
            })
    }
}

/// A version token that is not `v` and has its shape (a number stays a number:
/// GCS rejects a non-numeric generation).
fn other_version(v: &ObjectVersion) -> ObjectVersion {
    match v.0.parse::<u64>() {
        Ok(n) => ObjectVersion(n.wrapping_add(1).to_string()),
        Err(_) => ObjectVersion("\"floe-probe-mismatch\"".to_string()),
    }
}

/// Writes, overwrites conditionally and deletes one probe object; `Ok(Err(reason))`
/// when a precondition was ignored.
async fn probe(s: &dyn Storage) -> StorageResult<Result<(), String>> {
    let key = format!(
        "{PROBE_PREFIX}{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let verdict = probe_key(s, &key).await;
    let cleanup = s.delete(&key).await;
    let verdict = verdict?;
    cleanup?;
    Ok(verdict)
}

async fn probe_key(s: &dyn Storage, key: &str) -> StorageResult<Result<(), String>> {
    let first = match s.put_if_absent(key, Bytes::from_static(b"1")).await? {
        WriteOutcome::Written(v) => v,
        WriteOutcome::PreconditionFailed => {
            return Ok(Err(
                "a create-if-not-exists of a new key failed its precondition".into(),
            ))
        }
    };
    if s.put_if_absent(key, Bytes::from_static(b"2")).await? != WriteOutcome::PreconditionFailed {
        return Ok(Err(
            "the server accepted a create-if-not-exists (If-None-Match: * / generation \
             match 0) of an existing object"
                .into(),
        ));
    }
    let Some(version) = first else {
        return Ok(Err(
            "the server reports no version (etag or generation) of written objects".into(),
        ));
    };
    let stale = other_version(&version);
    if s.put_if_match(key, Bytes::from_static(b"3"), &stale)
        .await?
        != WriteOutcome::PreconditionFailed
    {
        return Ok(Err(
            "the server accepted a compare-and-swap (If-Match / generation match) with a \
             version the object does not have"
                .into(),
        ));
    }
    match s
        .put_if_match(key, Bytes::from_static(b"4"), &version)
        .await?
    {
        WriteOutcome::Written(_) => {}
        WriteOutcome::PreconditionFailed => {
            return Ok(Err(
                "the server refused a compare-and-swap with the object's own version".into(),
            ))
        }
    }
    if s.get(key).await?.bytes.as_ref() != b"4" {
        return Ok(Err(
            "a refused conditional write changed the object's bytes".into(),
        ));
    }
    Ok(Ok(()))
}

impl fmt::Debug for CheckedConditionalWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedConditionalWrites")
            .field("inner", &self.inner)
            .field("verdict", &self.verdict.get())
            .finish()
    }
}

impl fmt::Display for CheckedConditionalWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl Storage for CheckedConditionalWrites {
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
    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        self.inner.put(key, bytes).await
    }
    async fn put_fresh(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        self.inner.put_fresh(key, bytes).await
    }
    /// Forwarded: the guard checks conditional writes only, which this capability
    /// does not make.
    fn local_files(&self) -> Option<Arc<dyn super::LocalFiles>> {
        self.inner.local_files()
    }
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        self.check().await?;
        self.inner.put_if_absent(key, bytes).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.check().await?;
        self.inner.put_if_match(key, bytes, expected).await
    }
    async fn delete_if_match(
        &self,
        key: &str,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        self.check().await?;
        self.inner.delete_if_match(key, expected).await
    }
    async fn delete(&self, key: &str) -> StorageResult<()> {
        self.inner.delete(key).await
    }
    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        self.inner.delete_many(keys).await
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
    fn root_url(&self) -> String {
        self.inner.root_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::new_in_memory_storage;

    /// A storage that ignores every precondition, as an unsafe emulator does.
    #[derive(Debug)]
    struct Ignoring(Arc<dyn Storage>);

    impl fmt::Display for Ignoring {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("ignoring://")
        }
    }

    #[async_trait]
    impl Storage for Ignoring {
        async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
            self.0.get(key).await
        }
        async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
            self.0.get_range(key, range).await
        }
        async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
            self.0.head(key).await
        }
        async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
            self.0.put(key, bytes).await
        }
        async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
            Ok(WriteOutcome::Written(self.0.put(key, bytes).await?))
        }
        async fn put_if_match(
            &self,
            key: &str,
            bytes: Bytes,
            _expected: &ObjectVersion,
        ) -> StorageResult<WriteOutcome> {
            Ok(WriteOutcome::Written(self.0.put(key, bytes).await?))
        }
        async fn delete(&self, key: &str) -> StorageResult<()> {
            self.0.delete(key).await
        }
        async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
            self.0.list(prefix).await
        }
        fn root_url(&self) -> String {
            "ignoring://".into()
        }
    }

    #[tokio::test]
    async fn a_server_ignoring_preconditions_is_refused_for_conditional_writes() {
        let raw: Arc<dyn Storage> = Arc::new(Ignoring(new_in_memory_storage()));
        let s = CheckedConditionalWrites::new(Arc::clone(&raw));
        let e = s
            .put_if_absent("refs/branch.main/ref.json", Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, StorageError::UnsafeConditionalWrites { reason, .. } if reason.contains("create-if-not-exists")),
            "{e}"
        );
        // Nothing written, the probe removed, unconditional writes still work.
        assert!(raw.list("").await.unwrap().is_empty());
        s.put("chunks/a", Bytes::from_static(b"c")).await.unwrap();
        assert!(matches!(
            s.put_if_match("k", Bytes::new(), &ObjectVersion("v".into()))
                .await,
            Err(StorageError::UnsafeConditionalWrites { .. })
        ));
    }

    #[tokio::test]
    async fn a_server_enforcing_preconditions_passes_once() {
        let raw = new_in_memory_storage();
        let s = CheckedConditionalWrites::new(Arc::clone(&raw));
        assert_eq!(
            s.put_if_absent("a", Bytes::from_static(b"1"))
                .await
                .unwrap(),
            WriteOutcome::Written(s.head("a").await.unwrap().version)
        );
        assert_eq!(
            s.put_if_absent("a", Bytes::from_static(b"2"))
                .await
                .unwrap(),
            WriteOutcome::PreconditionFailed
        );
        assert!(matches!(s.verdict.get(), Some(Ok(()))));
        let keys: Vec<String> = raw
            .list("")
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.key)
            .collect();
        assert_eq!(keys, vec!["a".to_string()], "the probe object is deleted");
    }

    #[test]
    fn a_stale_version_keeps_the_shape_of_the_real_one() {
        assert_eq!(other_version(&ObjectVersion("41".into())).0, "42");
        assert_ne!(other_version(&ObjectVersion("\"e\"".into())).0, "\"e\"");
    }
}
