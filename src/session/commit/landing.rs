//! What became of a commit attempt whose move of the branch was refused or failed:
//! whether it landed after all, and deleting what it wrote when it cannot.
//!
//! A refused compare-and-swap is not always a lost race. When the response to a
//! write is lost and the client retries it, the retry is refused because the first
//! try already moved the branch, and by the time the committer looks again another
//! writer may have committed on top. So an attempt landed when its snapshot is the
//! branch tip or one of the commits since its parent. One that is not among the
//! commits by which the branch moved on from its parent did not land, and never can (the ref's
//! version it expected is gone), so the
//! snapshot, transaction log and manifests its flush wrote are referenced by nothing
//! and are deleted at once instead of waiting for garbage collection. Chunks stay:
//! the session still holds them for its next attempt.

use std::collections::HashSet;
use std::sync::Arc;

use crate::assets::AssetManager;
use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::snapshot::Snapshot;
use crate::format::SnapshotId;

use crate::refs::{RefStore, RefUpdate};

use crate::session::commit::rebase::commits_since;

/// A snapshot a commit flushed to move its branch to, with the base it was
/// flushed on.
pub(crate) struct Attempt {
    /// The new snapshot (written with its manifests and transaction log).
    pub(crate) snapshot: Arc<Snapshot>,
    /// The snapshot it was flushed on, whose manifests it reuses (its parent, or for
    /// an amend the amended commit).
    pub(crate) base: Arc<Snapshot>,
}

impl Attempt {
    /// Whether the branch, now at `tip`, holds this attempt's commit: the tip is it,
    /// or it is one of the commits since its parent. `Some(false)` only when the
    /// branch moved on from the parent by commits that do not include it; `None` when that
    /// cannot be told (the history cannot be read, or the branch was reset), and then
    /// nothing may be deleted.
    pub(crate) async fn landed(&self, assets: &AssetManager, tip: SnapshotId) -> Option<bool> {
        if tip == self.snapshot.id {
            return Some(true);
        }
        // The base for a new commit; the amended commit's parent for an amend.
        let parent = self.snapshot.parent_id?;
        if tip == parent {
            // The branch was reset to the parent (the attempt may have landed and been
            // tagged or branched from before that): keep it.
            return None;
        }
        match commits_since(assets, parent, tip).await {
            Ok(Some(since)) => Some(since.contains(&self.snapshot.id)),
            // Reset off the parent's line: as above.
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(
                    "cannot tell whether commit {} landed: {e}",
                    self.snapshot.id
                );
                None
            }
        }
    }

    /// Deletes the snapshot, transaction log and new manifests of an attempt that
    /// no ref points at and none can (see the module documentation). Best effort:
    /// what cannot be deleted is left for garbage collection.
    pub(crate) async fn discard(self, assets: &AssetManager) {
        let reused: HashSet<_> = self.base.manifest_files.iter().map(|m| m.id).collect();
        let mut doomed = vec![
            keys::snapshot(&self.snapshot.id),
            keys::transaction_log(&self.snapshot.id),
        ];
        doomed.extend(
            self.snapshot
                .manifest_files
                .iter()
                .filter(|m| !reused.contains(&m.id))
                .map(|m| keys::manifest(&m.id)),
        );
        let storage = assets.storage();
        let deletes = doomed.iter().map(|key| async move {
            if let Err(e) = storage.delete(key).await {
                tracing::debug!("orphaned {key} left for garbage collection: {e}");
            }
        });
        futures::future::join_all(deletes).await;
    }

    /// The outcome of a commit that is not retried (an amend, a commit of moves),
    /// given what its move of `branch` returned: the snapshot when the branch holds
    /// it (also after a lost response or a refused retry); otherwise the error
    /// `refused` makes of the tip the branch moved to, or the storage error.
    ///
    /// # Errors
    /// `refused(tip)`; the error of `update`; storage errors reading the branch.
    pub(crate) async fn settle(
        self,
        assets: &AssetManager,
        refs: &RefStore,
        branch: &str,
        update: Result<RefUpdate>,
        refused: impl FnOnce(crate::format::SnapshotId) -> Error,
    ) -> Result<Arc<Snapshot>> {
        match update {
            Ok(RefUpdate::Moved) => Ok(self.snapshot),
            Ok(RefUpdate::Lost) => {
                let now = refs.branch(branch).await?.snapshot;
                match self.landed(assets, now).await {
                    Some(true) => return Ok(self.snapshot),
                    Some(false) => self.discard(assets).await,
                    None => {}
                }
                Err(refused(now))
            }
            // The response was lost: the branch may have moved to it all the same.
            Err(e) => match refs.branch(branch).await {
                Ok(now) if self.landed(assets, now.snapshot).await == Some(true) => {
                    Ok(self.snapshot)
                }
                _ => Err(e),
            },
        }
    }
}
