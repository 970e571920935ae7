//! [`ObjectStorage`]: the [`Storage`] trait over any `object_store` backend whose
//! conditional puts are atomic (memory, S3-compatible servers).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};

use super::{
    ObjectInfo, ObjectVersion, Storage, StorageError, StorageResult, VersionedBytes, WriteOutcome,
};

/// A [`Storage`] on an `object_store` backend, rooted at a key prefix.
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
}

impl ObjectStorage {
    /// Wraps `store`; every key is placed under `prefix` (no leading or trailing `/`,
    /// may be empty). `url` is what [`Storage::root_url`] reports.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, url: String) -> Self {
        ObjectStorage {
            store,
            prefix: prefix.trim_matches('/').to_string(),
            url,
        }
    }

    /// The underlying object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub(super) fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{}", self.prefix, key))
        }
    }

    /// The key of a listed object: object_store percent-encodes characters it does
    /// not allow in a path segment (non-ASCII, `%`, `#`, ...) when a key is written,
    /// so each segment is decoded back to the key that was written.
    fn key_of(&self, path: &Path) -> String {
        let decoded: Vec<String> = path
            .parts()
            .map(|part| {
                percent_encoding::percent_decode_str(part.as_ref())
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let full = decoded.join("/");
        if self.prefix.is_empty() {
            full.to_string()
        } else {
            full.strip_prefix(&self.prefix)
                .map(|s| s.trim_start_matches('/').to_string())
                .unwrap_or_else(|| full.to_string())
        }
    }

    pub(super) fn info(&self, meta: object_store::ObjectMeta) -> ObjectInfo {
        ObjectInfo {
            key: self.key_of(&meta.location),
            size: meta.size,
            last_modified: meta.last_modified,
            version: meta.e_tag.map(ObjectVersion),
        }
    }
}

/// Maps an object_store error to a [`StorageError`] naming `key`.
pub(super) fn map_err(key: &str, e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { .. } => StorageError::NotFound {
            key: key.to_string(),
        },
        other => StorageError::Backend {
            key: key.to_string(),
            source: Box::new(other),
        },
    }
}

impl fmt::Display for ObjectStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

#[async_trait]
impl Storage for ObjectStorage {
    async fn get(&self, key: &str) -> StorageResult<VersionedBytes> {
        let res = self
            .store
            .get(&self.path(key))
            .await
            .map_err(|e| map_err(key, e))?;
        let version = res.meta.e_tag.clone().map(ObjectVersion);
        let bytes = res.bytes().await.map_err(|e| map_err(key, e))?;
        Ok(VersionedBytes { bytes, version })
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> StorageResult<Bytes> {
        if range.start > range.end {
            return Err(StorageError::InvalidRange {
                key: key.to_string(),
                requested: range,
            });
        }
        if range.start == range.end {
            // Nothing to read, but the object must exist and reach the start: an
            // empty read past the end is a short read, never empty bytes.
            let size = self.head(key).await?.size;
            if range.start > size {
                return Err(StorageError::ShortRead {
                    key: key.to_string(),
                    requested: range,
                    size,
                });
            }
            return Ok(Bytes::new());
        }
        let opts = GetOptions::new().with_range(Some(GetRange::Bounded(range.clone())));
        let res = match self.store.get_opts(&self.path(key), opts).await {
            Ok(res) => res,
            Err(e @ object_store::Error::NotFound { .. }) => return Err(map_err(key, e)),
            Err(e) => {
                // A range starting past the end is an error on most backends: report
                // it as the short read it is.
                if let Ok(meta) = self.store.head(&self.path(key)).await {
                    if meta.size < range.end {
                        return Err(StorageError::ShortRead {
                            key: key.to_string(),
                            requested: range,
                            size: meta.size,
                        });
                    }
                }
                return Err(map_err(key, e));
            }
        };
        let size = res.meta.size;
        let bytes = res.bytes().await.map_err(|e| map_err(key, e))?;
        if (bytes.len() as u64) < range.end - range.start {
            return Err(StorageError::ShortRead {
                key: key.to_string(),
                requested: range,
                size,
            });
        }
        Ok(bytes)
    }

    async fn head(&self, key: &str) -> StorageResult<ObjectInfo> {
        let meta = self
            .store
            .head(&self.path(key))
            .await
            .map_err(|e| map_err(key, e))?;
        Ok(self.info(meta))
    }

    async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<Option<ObjectVersion>> {
        let res = self
            .store
            .put(&self.path(key), PutPayload::from_bytes(bytes))
            .await
            .map_err(|e| map_err(key, e))?;
        Ok(res.e_tag.map(ObjectVersion))
    }

    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> StorageResult<WriteOutcome> {
        let opts = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(&self.path(key), PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(res) => Ok(WriteOutcome::Written(res.e_tag.map(ObjectVersion))),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(WriteOutcome::PreconditionFailed),
            Err(e) => Err(map_err(key, e)),
        }
    }

    async fn put_if_match(
        &self,
        key: &str,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> StorageResult<WriteOutcome> {
        let opts = PutOptions::from(PutMode::Update(UpdateVersion {
            e_tag: Some(expected.0.clone()),
            version: None,
        }));
        match self
            .store
            .put_opts(&self.path(key), PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(res) => Ok(WriteOutcome::Written(res.e_tag.map(ObjectVersion))),
            Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::NotFound { .. })
            | Err(object_store::Error::AlreadyExists { .. }) => {
                Ok(WriteOutcome::PreconditionFailed)
            }
            Err(e) => Err(map_err(key, e)),
        }
    }

    async fn delete(&self, key: &str) -> StorageResult<()> {
        match self.store.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(map_err(key, e)),
        }
    }

    async fn delete_many(&self, keys: &[String]) -> StorageResult<()> {
        use futures::StreamExt;
        let paths: Vec<Path> = keys.iter().map(|k| self.path(k)).collect();
        let paths = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
        let mut results = self.store.delete_stream(paths);
        let mut first = None;
        while let Some(r) = results.next().await {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    first.get_or_insert(map_err("", e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    async fn list(&self, prefix: &str) -> StorageResult<Vec<ObjectInfo>> {
        let mut out: Vec<ObjectInfo> = self.list_stream(prefix).try_collect().await?;
        out.sort_by(|a, b| a.key.as_bytes().cmp(b.key.as_bytes()));
        Ok(out)
    }

    fn list_stream<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::stream::BoxStream<'a, StorageResult<ObjectInfo>> {
        use futures::StreamExt;
        // object_store lists whole path segments; list the enclosing directory and
        // filter by the raw key prefix.
        let dir = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let dir_path = if dir.is_empty() && self.prefix.is_empty() {
            None
        } else {
            Some(self.path(dir))
        };
        self.store
            .list(dir_path.as_ref())
            .map_err(move |e| map_err(prefix, e))
            .map_ok(move |m| self.info(m))
            .try_filter(move |i| futures::future::ready(i.key.starts_with(prefix)))
            .boxed()
    }

    fn root_url(&self) -> String {
        self.url.clone()
    }
}
