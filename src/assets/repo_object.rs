//! Spec 2: the `repo` object as an [`AssetManager`] reads and caches it, and the
//! parent links of snapshots it supplies.

#[allow(clippy::wildcard_imports)]
use super::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::format::keys;
use crate::format::repo_info::RepoInfo;
use crate::format::SnapshotId;
use crate::storage::ObjectVersion;

/// A `repo` object read: its bytes, decoded form and version.
pub(super) type RepoRead = (Bytes, Arc<RepoInfo>, Option<ObjectVersion>);

/// A `repo` object as stored and decoded, at one version.
#[derive(Clone, Debug)]
pub(super) struct RepoObject {
    version: ObjectVersion,
    bytes: Bytes,
    info: Arc<RepoInfo>,
}

impl AssetManager {
    /// Fetches and decodes the spec-2 `repo` object (never cached: it is the one
    /// mutable object), with its version for compare-and-swap, and learns its parent
    /// links.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when there is none); [`Error::Format`] when
    /// corrupt.
    pub async fn fetch_repo_info(&self) -> Result<(Arc<RepoInfo>, Option<ObjectVersion>)> {
        let (_, info, version) = self.fetch_repo_object().await?;
        Ok((info, version))
    }

    /// [`AssetManager::fetch_repo_info`], with the object's bytes as stored (what
    /// an update saves under `overwritten/`).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_repo_info`].
    pub async fn fetch_repo_object(&self) -> Result<(Bytes, Arc<RepoInfo>, Option<ObjectVersion>)> {
        let generation = self.repo_generation.load(Ordering::Acquire);
        self.repo_reads
            .run(generation, || self.fetch_repo_object_once())
            .await
    }

    /// [`AssetManager::fetch_repo_object`], for the caller running the shared read.
    pub(super) async fn fetch_repo_object_once(&self) -> Result<RepoRead> {
        let cached = self
            .repo_cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(c) = cached {
            // A `head` is cheaper than a fetch and a decode; the version says whether
            // the object changed.
            let head = self.storage.head(keys::SPEC2_REPO).await?;
            if head.version.as_ref() == Some(&c.version) {
                return Ok((c.bytes, c.info, Some(c.version)));
            }
        }
        self.refetch_repo_object().await
    }

    /// The `repo` object read with one GET, not re-validating the cache first: when
    /// the caller knows the cached object is stale (a compare-and-swap on it was
    /// refused).
    ///
    /// # Errors
    /// As [`AssetManager::fetch_repo_info`].
    pub(crate) async fn refetch_repo_object(
        &self,
    ) -> Result<(Bytes, Arc<RepoInfo>, Option<ObjectVersion>)> {
        let v = self.storage.get(keys::SPEC2_REPO).await?;
        self.admit_repo_object(v).await
    }

    /// Decodes a `repo` object read from storage, learns its parent links and keeps
    /// it (with its version) for later fetches.
    ///
    /// # Errors
    /// [`Error::Format`] when it does not decode.
    pub(crate) async fn admit_repo_object(
        &self,
        v: crate::storage::VersionedBytes,
    ) -> Result<(Bytes, Arc<RepoInfo>, Option<ObjectVersion>)> {
        let bytes = v.bytes.clone();
        let info = Arc::new(blocking(move || RepoInfo::decode(&bytes)).await?);
        self.learn_parents(&info);
        if let Some(version) = &v.version {
            self.remember_repo_object(version.clone(), v.bytes.clone(), Arc::clone(&info));
        }
        Ok((v.bytes, info, v.version))
    }

    /// The `repo` object as this manager last read or wrote it, without asking the
    /// storage (`None` before the first read). Possibly stale: only for updates,
    /// whose compare-and-swap refuses a stale object.
    pub(crate) fn cached_repo_object(&self) -> Option<(Bytes, Arc<RepoInfo>, ObjectVersion)> {
        self.repo_cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| (c.bytes.clone(), Arc::clone(&c.info), c.version.clone()))
    }

    /// Keeps a `repo` object read or written at `version` for later fetches.
    pub(crate) fn remember_repo_object(
        &self,
        version: ObjectVersion,
        bytes: Bytes,
        info: Arc<RepoInfo>,
    ) {
        *self.repo_cache.write().unwrap_or_else(|p| p.into_inner()) = Some(RepoObject {
            version,
            bytes,
            info,
        });
        self.repo_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Spec 2: the `repo` object copy named `name` under `overwritten/` (what the
    /// ops log's `repo_before_updates` names; never cached).
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound` when it is gone); [`Error::Format`] when
    /// corrupt.
    pub async fn fetch_repo_backup(&self, name: &str) -> Result<RepoInfo> {
        let bytes = self.storage.get(&keys::overwritten(name)).await?.bytes;
        blocking(move || RepoInfo::decode(&bytes)).await
    }

    /// Remembers the parent links of a `repo` object read or written. A snapshot
    /// whose link changed (expiry, retention or squash re-parented it, here or in
    /// another process) leaves the snapshot caches, which hold the parent it was
    /// read with: walks through this handle then follow the new link.
    pub(crate) fn learn_parents(&self, info: &RepoInfo) {
        let mut moved = Vec::new();
        {
            let mut parents = self.parents.write().unwrap_or_else(|p| p.into_inner());
            for s in info.snapshots.values() {
                if let Some(old) = parents.insert(s.id, s.parent_id) {
                    if old != s.parent_id {
                        moved.push(s.id);
                    }
                }
            }
        }
        for id in moved {
            self.snapshots.remove(&id);
            self.headers.remove(&id);
        }
    }

    /// Spec 2: the snapshots after `base` up to `tip`, oldest first, followed
    /// through the parent links of the `repo` objects read so far, without reading
    /// any snapshot; `None` when a link on the way is unknown or the chain ends
    /// without passing `base` (the caller then walks the snapshots).
    pub(crate) fn chain_by_known_parents(
        &self,
        base: SnapshotId,
        tip: SnapshotId,
    ) -> Option<Vec<SnapshotId>> {
        let parents = self.parents.read().unwrap_or_else(|p| p.into_inner());
        let mut chain = Vec::new();
        let mut at = tip;
        while at != base {
            // A loop in hostile links ends the walk instead of spinning.
            if chain.len() > parents.len() {
                return None;
            }
            chain.push(at);
            at = (*parents.get(&at)?)?;
        }
        chain.reverse();
        Some(chain)
    }

    /// Spec 2: `start` and up to `max - 1` of its ancestors, newest first, as the
    /// parent links of the `repo` objects read so far name them (what a walk fetches
    /// ahead); shorter where a link is unknown or the chain ends. A loop in hostile
    /// links repeats ids within the `max`; the walk reports it when it gets there.
    pub(super) fn ancestors_by_known_parents(
        &self,
        start: SnapshotId,
        max: usize,
    ) -> Vec<SnapshotId> {
        let parents = self.parents.read().unwrap_or_else(|p| p.into_inner());
        std::iter::successors(Some(start), |at| parents.get(at).copied().flatten())
            .take(max.max(1))
            .collect()
    }

    /// The parent link of snapshot `id` in the `repo` object (`Some(None)` for a
    /// snapshot without parent), read again when the last one read did not list it;
    /// `None` when the object does not list it.
    pub(super) async fn spec2_parent(&self, id: &SnapshotId) -> Result<Option<Option<SnapshotId>>> {
        let known = |s: &Self| {
            s.parents
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(id)
                .copied()
        };
        if let Some(parent) = known(self) {
            return Ok(Some(parent));
        }
        self.fetch_repo_info().await?;
        Ok(known(self))
    }
}
