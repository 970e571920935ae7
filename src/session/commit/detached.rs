//! Detached snapshots: a session's changes written as a snapshot no branch points
//! to (Icechunk's `Session.flush`).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::format::SnapshotId;
use crate::session::commit::flush::{flush, CommitMethod, FlushRequest};
use crate::session::Session;

impl Session {
    /// Writes the session's changes as a snapshot whose parent is the session's base,
    /// without moving any branch (Icechunk's `Session.flush`); returns its id. Spec 2
    /// lists it in the `repo` object (a detached snapshot), so
    /// [`crate::Repository::reset_branch`] and tags can point to it. The session
    /// continues from that snapshot.
    ///
    /// # Errors
    /// [`crate::Error::ReadOnlySession`], [`crate::Error::ForkCannotCommit`]; storage and format
    /// errors.
    pub async fn flush(
        &self,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
    ) -> Result<SnapshotId> {
        self.load().await?;
        self.commit_branch()?;
        self.commit_guarded(|base, changes| async move {
            let ctx = &self.inner.ctx;
            let snapshot = flush(FlushRequest {
                assets: &ctx.assets,
                layouts: &ctx.manifest_layouts,
                packs: self.packs(),
                base: &base,
                changes: &changes,
                new_id: SnapshotId::random(),
                message,
                metadata,
                method: CommitMethod::NewCommit,
            })
            .await?;
            ctx.refs.record_detached(&snapshot).await?;
            Ok(snapshot)
        })
        .await
    }
}
