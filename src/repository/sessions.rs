//! Starting sessions: read-only, writable, rearrange (spec 2), a fork from its
//! bytes; the context a session uses of its repository and the manifests preloaded
//! when one opens.

use std::sync::Arc;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::config::ManifestPreloadCondition;
use crate::format::repo_info::FeatureFlag;
use crate::format::snapshot::Snapshot;
use crate::format::SpecVersion;
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
        self.preload_manifests(&snap);
        Ok(Session::read_only(self.session_context(), snap))
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
        self.preload_manifests(&snap);
        Ok(Session::on_branch(
            self.session_context(),
            snap,
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

    /// Starts fetching, in the background, the manifests of `snap` that the
    /// configuration's `manifest.preload` selects (Icechunk's preloading when a
    /// session opens): arrays in path order, at most `max_arrays_to_scan` of them,
    /// each manifest whose chunk refs fit in what is left of `max_total_refs` and
    /// that `preload_if` accepts. Failures are only logged: a preload is a hint.
    fn preload_manifests(&self, snap: &Arc<Snapshot>) {
        let preload = self.config_state().config.manifest().preload();
        let condition = preload.preload_if();
        let budget = preload.max_total_refs();
        if budget == 0 || condition == ManifestPreloadCondition::False {
            return;
        }
        let max_arrays = usize::try_from(preload.max_arrays_to_scan()).unwrap_or(usize::MAX);
        let mut picked: Vec<(crate::format::ManifestId, u64)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut refs: u32 = 0;
        for (path, array) in snap
            .nodes
            .iter()
            .filter_map(|(p, n)| Some((p, n.array()?)))
            .take(max_arrays)
        {
            for m in &array.manifests {
                let Some(info) = snap.manifest_info(&m.object_id) else {
                    continue;
                };
                if seen.contains(&m.object_id) {
                    continue;
                }
                let total = refs.saturating_add(info.num_chunk_refs);
                if total <= budget && condition.matches(path, info.num_chunk_refs) {
                    seen.insert(m.object_id);
                    refs = total;
                    picked.push((m.object_id, info.size_bytes));
                }
            }
        }
        if picked.is_empty() {
            return;
        }
        let assets = Arc::clone(&self.inner.assets);
        tokio::spawn(async move {
            let fetches = picked.iter().map(|(id, size)| {
                let assets = &assets;
                async move {
                    if let Err(e) = assets.fetch_manifest(id, Some(*size)).await {
                        tracing::debug!(manifest = %id, error = %e, "preloading a manifest failed");
                    }
                }
            });
            futures::future::join_all(fetches).await;
        });
    }

    /// What a new session uses of this repository: its caches (and through them its
    /// storage and refs), current configuration and virtual chunk resolver.
    fn session_context(&self) -> Arc<SessionContext> {
        let state = self.config_state();
        Arc::new(SessionContext::new(
            Arc::clone(&self.inner.assets),
            state.config.clone(),
            Arc::clone(&state.resolver),
        ))
    }
}
