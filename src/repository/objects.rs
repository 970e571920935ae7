//! The repository's format objects by id, decoded, for inspection: snapshots,
//! transaction logs, manifests, node tables.

use std::sync::Arc;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::snapshot::SnapshotNodes;
use crate::format::SnapshotId;

use super::Repository;

impl Repository {
    /// Snapshot `id`, decoded (for inspection: Icechunk's `inspect_snapshot`).
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub async fn fetch_snapshot(
        &self,
        id: &SnapshotId,
    ) -> Result<Arc<crate::format::snapshot::Snapshot>> {
        self.inner.assets.fetch_snapshot(id).await
    }

    /// The transaction log of snapshot `id`, decoded.
    ///
    /// # Errors
    /// Storage errors (`NotFound` when missing) and format errors.
    pub async fn fetch_transaction_log(
        &self,
        id: &SnapshotId,
    ) -> Result<Arc<crate::format::transaction_log::TransactionLog>> {
        self.inner.assets.fetch_transaction_log(id).await
    }

    /// Manifest `id`, decoded.
    ///
    /// # Errors
    /// Storage errors (`NotFound` when missing) and format errors.
    pub async fn fetch_manifest(
        &self,
        id: &crate::format::ManifestId,
    ) -> Result<Arc<crate::format::manifest::Manifest>> {
        self.inner.assets.fetch_manifest(id, None).await
    }

    /// The node table of snapshot `id`, to list its nodes one at a time
    /// ([`SnapshotNodes::under`]) holding the file's flatbuffer but not a decoded
    /// tree (what `floe ls` does; a read-only session decodes the whole tree).
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub async fn snapshot_nodes(&self, id: &SnapshotId) -> Result<SnapshotNodes> {
        self.inner.assets.fetch_snapshot_nodes(id).await
    }
}
