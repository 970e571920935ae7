//! Starting sessions: read-only, writable, rearrange (spec 2), a fork from its
//! bytes; the context a session uses of its repository and the manifests preloaded
//! when one opens.

use std::sync::Arc;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::repo_info::FeatureFlag;
use crate::format::{SnapshotId, SpecVersion};
use crate::session::context::SessionContext;
use crate::session::Session;

use super::{Repository, VersionSelector};

impl Repository {
    /// A read-only session at the selected snapshot.
    ///
    /// # Errors
    /// As [`Repository::resolve`].
    pub async fn readonly_session(&self, selector: &VersionSelector) -> Result<Session> {
        let snap = self.resolve_snapshot(selector).await?;
        let ctx = self.session_context();
        ctx.preload_manifests(&snap);
        Ok(Session::read_only(ctx, snap))
    }

    /// Spec 2: a rearrange session on the tip of `branch`, which only moves and
    /// renames nodes ([`Session::move_node`]); its commit records the moves.
    ///
    /// # Errors
    /// [`Error::UnsupportedOnSpecVersion`] on spec 1; [`Error::RepositoryReadOnly`]
    /// when the repository's status does not accept writes; [`Error::FeatureDisabled`]
    /// when the repository turns `move_node` off; [`Error::BranchNotFound`]; storage
    /// and format errors.
    pub async fn rearrange_session(&self, branch: &str) -> Result<Session> {
        self.require_spec("rearrange_session", SpecVersion::V2)?;
        let info = self.repo_info().await?;
        crate::refs::repo_object::check_online(&info)?;
        crate::refs::check_flag(&info, "move_node", FeatureFlag::MoveNode)?;
        let id = self.lookup_branch(branch).await?;
        let snap = self.inner.assets.fetch_snapshot(&id).await?;
        Ok(Session::rearrange(
            self.session_context(),
            snap,
            branch.to_string(),
        ))
    }

    /// A writable session on the tip of `branch`.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; [`Error::RepositoryReadOnly`] when the spec-2
    /// repository's status does not accept writes (as Icechunk 2.3.0); storage and
    /// format errors.
    pub async fn writable_session(&self, branch: &str) -> Result<Session> {
        let snap = self
            .resolve_snapshot(&VersionSelector::Branch(branch.to_string()))
            .await?;
        self.check_online().await?;
        let ctx = self.session_context();
        ctx.preload_manifests(&snap);
        Ok(Session::on_branch(ctx, snap, branch.to_string()))
    }

    /// A writable session on the tip of `branch` that reads its snapshot on first use
    /// rather than now, as Icechunk 2.3.0 opens sessions: a missing or unreadable
    /// tip snapshot is an error of the first read or write, not of this call. The
    /// snapshot's fetch starts in the background now, so the first use usually finds
    /// it read. Call [`Session::load`] before the session's synchronous node methods.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; [`Error::RepositoryReadOnly`] as
    /// [`Repository::writable_session`]; storage and format errors reading the ref.
    pub async fn writable_session_lazy(&self, branch: &str) -> Result<Session> {
        let selector = VersionSelector::Branch(branch.to_string());
        // Spec 2: the tip in the cached `repo` object is fetched while the current one
        // is read, so the snapshot costs no round trip of its own when the guess holds.
        let guess = self.cached_guess(&selector);
        if let Some(guess) = guess {
            self.prefetch_snapshot(guess);
        }
        let id = self.resolve(&selector).await?;
        self.check_online().await?;
        if guess != Some(id) {
            self.prefetch_snapshot(id);
        }
        Ok(Session::on_branch_lazy(
            self.session_context(),
            id,
            self.inner.spec,
            branch.to_string(),
        ))
    }

    /// The fork serialized in `bytes` by [`Session::to_fork_bytes`], on this
    /// repository: how a worker resumes a fork sent to it, with storage and
    /// credentials from its own environment.
    ///
    /// # Errors
    /// [`Error::InvalidFork`] for bytes that are not a fork of this version;
    /// [`Error::SnapshotNotFound`] when the fork's base snapshot is not in this
    /// repository; storage and format errors.
    pub async fn fork_from_bytes(&self, bytes: &[u8]) -> Result<Session> {
        Session::from_fork_bytes(self.session_context(), bytes).await
    }

    /// Starts reading snapshot `id` into the cache in the background; a read in
    /// flight or cached is shared (so a session's own read joins it). Failures are
    /// only logged: the session's own read reports them.
    fn prefetch_snapshot(&self, id: SnapshotId) {
        let assets = Arc::clone(&self.inner.assets);
        tokio::spawn(async move {
            if let Err(e) = assets.fetch_snapshot(&id).await {
                tracing::debug!(snapshot = %id, error = %e, "prefetching a snapshot failed");
            }
        });
    }

    /// What a new session uses of this repository: its caches (and through them its
    /// storage and refs), current configuration and virtual chunk resolver.
    fn session_context(&self) -> Arc<SessionContext> {
        let state = self.config_state();
        Arc::new(SessionContext::new(
            Arc::clone(&self.inner.assets),
            self.inner.refs.clone(),
            state.config.clone(),
            Arc::clone(&state.resolver),
        ))
    }
}
