//! [`Repository::diff`]: what changed between two snapshots.

use crate::assets::ParentWalk;
use crate::error::{Error, Result};
use crate::format::{SnapshotId, SpecVersion};
use crate::session::Diff;
use crate::storage::StorageError;

use super::Repository;

impl Repository {
    /// What changed from snapshot `from` to snapshot `to`. When `from` is an ancestor
    /// of `to`, from the transaction logs of the commits in between (what was done);
    /// otherwise by comparing the two snapshots' trees and chunk refs.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub async fn diff(&self, from: SnapshotId, to: SnapshotId) -> Result<Diff> {
        let mut chain = Vec::new();
        let mut walk = ParentWalk::headers(&self.inner.assets, to);
        while let Some(snap) = walk.next().await? {
            if snap.id == from {
                break;
            }
            if snap.parent_id.is_none() {
                let from_snap = self.inner.assets.fetch_snapshot(&from).await?;
                let to_snap = self.inner.assets.fetch_snapshot(&to).await?;
                return crate::session::diff::structural_diff(
                    &self.inner.assets,
                    &from_snap,
                    &to_snap,
                )
                .await;
            }
            chain.push(snap);
        }
        // Spec 2.1: a commit re-parented by expiry spans the logs of the ancestors
        // it was re-parented over (`pruned_ancestor_tx_logs`, oldest first).
        let info = match self.inner.spec {
            SpecVersion::V2 => Some(self.repo_info().await?),
            SpecVersion::V1 => None,
        };
        let mut logs = Vec::new();
        for snap in chain.into_iter().rev() {
            let pruned = info
                .as_ref()
                .and_then(|i| i.snapshots.get(&snap.id))
                .and_then(|s| s.pruned_ancestor_tx_logs.clone())
                .unwrap_or_default();
            for id in pruned.iter().chain(std::iter::once(&snap.id)) {
                let log = match self.inner.assets.fetch_transaction_log(id).await {
                    Ok(log) => log,
                    // A pruned log already collected: what it said is lost, as in
                    // Icechunk (which warns and goes on).
                    Err(Error::Storage(StorageError::NotFound { .. })) if *id != snap.id => {
                        tracing::warn!("transaction log of expired snapshot {id} is gone");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                logs.push(log);
            }
        }
        let from_snap = self.inner.assets.fetch_snapshot(&from).await?;
        let to_snap = self.inner.assets.fetch_snapshot(&to).await?;
        Ok(Diff::from_transaction_logs(
            logs.iter().map(AsRef::as_ref),
            &from_snap,
            &to_snap,
        ))
    }
}
