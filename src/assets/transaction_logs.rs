//! Transaction logs read, cached and written by an [`AssetManager`].

#[allow(clippy::wildcard_imports)]
use super::*;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::format::envelope::FileType;
use crate::format::keys;
use crate::format::transaction_log::TransactionLog;
use crate::format::SnapshotId;
use crate::storage::WriteOutcome;

impl AssetManager {
    /// Fetches and decodes the transaction log of snapshot `id`.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when missing, e.g. for the initial snapshot);
    /// [`Error::Format`] when corrupt.
    pub async fn fetch_transaction_log(&self, id: &SnapshotId) -> Result<Arc<TransactionLog>> {
        if let Some(t) = self.transaction_logs.get(id) {
            return Ok(t);
        }
        self.log_reads
            .run(*id, || async {
                if let Some(t) = self.transaction_logs.get(id) {
                    return Ok(t);
                }
                let bytes = self.storage.get(&keys::transaction_log(id)).await?.bytes;
                let log = Arc::new(decode_object(bytes, TransactionLog::decode).await?);
                self.transaction_logs.insert(*id, Arc::clone(&log));
                Ok(log)
            })
            .await
    }

    /// Writes `log` only where no object has its key yet (the initial snapshot's
    /// transaction log), with the outcome of
    /// [`AssetManager::write_snapshot_if_absent`].
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_transaction_log_if_absent(
        &self,
        log: Arc<TransactionLog>,
    ) -> Result<WriteOutcome> {
        let bytes = self.encode_transaction_log(&log).await?;
        let key = keys::transaction_log(&log.id);
        let outcome = self.storage.put_if_absent(&key, bytes).await?;
        if matches!(outcome, WriteOutcome::Written(_)) {
            self.transaction_logs.insert(log.id, log);
        }
        Ok(outcome)
    }

    /// Encodes and writes a transaction log.
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_transaction_log(&self, log: Arc<TransactionLog>) -> Result<()> {
        let bytes = self.encode_transaction_log(&log).await?;
        self.storage
            .put(&keys::transaction_log(&log.id), bytes)
            .await?;
        self.transaction_logs.insert(log.id, log);
        Ok(())
    }

    /// `log` encoded for this spec version at the configured compression level
    /// (large ones on the compute pool).
    pub(super) async fn encode_transaction_log(&self, log: &Arc<TransactionLog>) -> Result<Bytes> {
        let l = Arc::clone(log);
        let spec = self.spec;
        let light = l.len() <= INLINE_NODES_MAX;
        let level = self.compression_level(FileType::TransactionLog);
        Ok(Bytes::from(
            maybe_blocking(light, move || l.encode_at(spec, level)).await?,
        ))
    }

    /// Writes an encoded transaction log (one too large to keep in the cache).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_transaction_log_bytes(&self, id: &SnapshotId, bytes: Vec<u8>) -> Result<()> {
        self.storage
            .put(&keys::transaction_log(id), Bytes::from(bytes))
            .await?;
        Ok(())
    }
}
