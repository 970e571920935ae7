//! Snapshots: whole, as headers (commit facts only) or as node tables; read, cached
//! and written by an [`AssetManager`].

#[allow(clippy::wildcard_imports)]
use super::*;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::envelope::FileType;
use crate::format::keys;
use crate::format::snapshot::{Snapshot, SnapshotHeader, SnapshotNodes};
use crate::format::{FormatError, SnapshotId, SpecVersion};
use crate::storage::{StorageError, WriteOutcome};

impl AssetManager {
    /// Snapshot `id` when it is in the cache, without fetching it.
    pub fn cached_snapshot(&self, id: &SnapshotId) -> Option<Arc<Snapshot>> {
        self.snapshots.get(id)
    }

    /// Fetches and decodes snapshot `id`.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; [`Error::Format`] for a corrupt file; storage errors.
    pub async fn fetch_snapshot(&self, id: &SnapshotId) -> Result<Arc<Snapshot>> {
        if let Some(s) = self.snapshots.get(id) {
            return Ok(s);
        }
        self.snapshot_reads
            .run(*id, || async {
                if let Some(s) = self.snapshots.get(id) {
                    return Ok(s);
                }
                let bytes = self.snapshot_bytes(id).await?;
                let snap = decode_object(bytes, Snapshot::decode).await?;
                self.admit_snapshot(id, snap).await
            })
            .await
    }

    /// Snapshot `snap`, decoded from file `snapshots/{id}`, completed and cached:
    /// spec 2's parent link from the `repo` object, after a check that the file holds
    /// the snapshot its name says.
    ///
    /// # Errors
    /// [`Error::Format`] when the file holds another snapshot; reading the `repo`
    /// object's.
    pub(super) async fn admit_snapshot(
        &self,
        id: &SnapshotId,
        mut snap: Snapshot,
    ) -> Result<Arc<Snapshot>> {
        snap.parent_id = self
            .completed_parent(id, snap.spec_version, snap.parent_id)
            .await?;
        check_holds(id, &snap.id)?;
        self.warn_if_cache_small(CachedKind::Snapshot, snap.nodes.len() as u64);
        let snap = Arc::new(snap);
        self.snapshots.insert(*id, Arc::clone(&snap));
        Ok(snap)
    }

    /// The parent link of snapshot `id`, whose file (of spec version `file_spec`)
    /// says `in_file`. In a spec-2 repository the `repo` object's parent links are
    /// the truth, also for spec-1 files kept by an upgrade (expiry re-parents in
    /// `repo` only).
    ///
    /// # Errors
    /// Reading the `repo` object's.
    pub(super) async fn completed_parent(
        &self,
        id: &SnapshotId,
        file_spec: SpecVersion,
        in_file: Option<SnapshotId>,
    ) -> Result<Option<SnapshotId>> {
        if self.spec == SpecVersion::V2 || file_spec == SpecVersion::V2 {
            match self.spec2_parent(id).await? {
                Some(parent) => return Ok(parent),
                None if file_spec == SpecVersion::V2 => return Ok(None),
                None => {}
            }
        }
        Ok(in_file)
    }

    /// The commit facts of snapshot `id` (id, parent, flush time, message, metadata,
    /// manifest files) without its node table: from the cached snapshot when there
    /// is one, else from a cache of these facts, else read from its file without
    /// decoding the node table ([`SnapshotHeader::decode`]; on a snapshot of a
    /// million nodes, megabytes instead of the half gigabyte the whole snapshot
    /// takes). Spec 2's parent link comes from the `repo` object, as for
    /// [`AssetManager::fetch_snapshot`].
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; [`Error::Format`] for a corrupt file or one
    /// holding another snapshot; storage errors.
    pub async fn fetch_snapshot_header(&self, id: &SnapshotId) -> Result<Arc<SnapshotHeader>> {
        if let Some(h) = self.cached_header(id) {
            return Ok(h);
        }
        self.header_reads
            .run(*id, || async {
                if let Some(h) = self.cached_header(id) {
                    return Ok(h);
                }
                let bytes = self.snapshot_bytes(id).await?;
                let header = decode_object(bytes, SnapshotHeader::decode).await?;
                self.admit_header(id, header).await
            })
            .await
    }

    /// The commit facts of snapshot `id` from the caches, if there.
    pub(super) fn cached_header(&self, id: &SnapshotId) -> Option<Arc<SnapshotHeader>> {
        if let Some(h) = self.headers.get(id) {
            return Some(h);
        }
        let header = Arc::new(self.snapshots.get(id)?.header());
        self.headers.insert(*id, Arc::clone(&header));
        Some(header)
    }

    /// [`AssetManager::admit_snapshot`] for commit facts.
    pub(super) async fn admit_header(
        &self,
        id: &SnapshotId,
        mut header: SnapshotHeader,
    ) -> Result<Arc<SnapshotHeader>> {
        header.parent_id = self
            .completed_parent(id, header.spec_version, header.parent_id)
            .await?;
        check_holds(id, &header.id)?;
        let header = Arc::new(header);
        self.headers.insert(*id, Arc::clone(&header));
        Ok(header)
    }

    /// The node table of snapshot `id`, to read one node at a time
    /// ([`SnapshotNodes::under`]): what listing the nodes of a large snapshot holds
    /// instead of the decoded tree. Read from the file (never cached); verified and
    /// checked to hold snapshot `id`.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; [`Error::Format`] for a corrupt file or one
    /// holding another snapshot; storage errors.
    pub async fn fetch_snapshot_nodes(&self, id: &SnapshotId) -> Result<SnapshotNodes> {
        let bytes = self.snapshot_bytes(id).await?;
        let nodes = decode_object(bytes, SnapshotNodes::decode).await?;
        check_holds(id, &nodes.id())?;
        Ok(nodes)
    }

    /// The bytes of file `snapshots/{id}`.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage errors.
    pub(super) async fn snapshot_bytes(&self, id: &SnapshotId) -> Result<Bytes> {
        match self.storage.get(&keys::snapshot(id)).await {
            Ok(v) => Ok(v.bytes),
            Err(StorageError::NotFound { .. }) => Err(Error::SnapshotNotFound { id: *id }),
            Err(e) => Err(e.into()),
        }
    }

    /// Encodes and writes a snapshot (create-if-not-exists: ids are random, so an
    /// existing object means a bug or a corrupt repository, reported as an error).
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_snapshot(&self, snapshot: Arc<Snapshot>) -> Result<()> {
        let bytes = self.encode_snapshot(&snapshot).await?;
        self.storage
            .put(&keys::snapshot(&snapshot.id), bytes)
            .await?;
        self.remember_written_snapshot(snapshot);
        Ok(())
    }

    /// `snapshot` encoded at the configured compression level (large ones on the
    /// compute pool).
    pub(super) async fn encode_snapshot(&self, snapshot: &Arc<Snapshot>) -> Result<Bytes> {
        let s = Arc::clone(snapshot);
        let light = s.nodes.len() <= INLINE_NODES_MAX;
        let level = self.compression_level(FileType::Snapshot);
        Ok(Bytes::from(
            maybe_blocking(light, move || s.encode_at(level)).await?,
        ))
    }

    /// Caches a snapshot just written under its id.
    pub(super) fn remember_written_snapshot(&self, snapshot: Arc<Snapshot>) {
        // An expiry rewrites a snapshot under its id with another parent.
        self.headers.remove(&snapshot.id);
        self.warn_if_cache_small(CachedKind::Snapshot, snapshot.nodes.len() as u64);
        self.snapshots.insert(snapshot.id, snapshot);
    }

    /// Writes `snapshot` only where no object has its key yet, for a repository's
    /// initial snapshot, whose id is fixed: a creation that races with, or runs
    /// beside, the check for an existing repository must never replace another
    /// repository's root. `PreconditionFailed` when an object is there already
    /// (nothing written, nothing cached); `Written` carries the new object's version.
    ///
    /// # Errors
    /// Encoding and storage errors.
    pub async fn write_snapshot_if_absent(&self, snapshot: Arc<Snapshot>) -> Result<WriteOutcome> {
        let bytes = self.encode_snapshot(&snapshot).await?;
        let key = keys::snapshot(&snapshot.id);
        let outcome = self.storage.put_if_absent(&key, bytes).await?;
        if matches!(outcome, WriteOutcome::Written(_)) {
            self.remember_written_snapshot(snapshot);
        }
        Ok(outcome)
    }
}

/// Checks that file `snapshots/{id}` holds snapshot `id` (`held` is the id inside).
///
/// # Errors
/// [`Error::Format`] when it holds another.
pub(super) fn check_holds(id: &SnapshotId, held: &SnapshotId) -> Result<()> {
    if held == id {
        Ok(())
    } else {
        Err(Error::Format(FormatError::InvalidData {
            what: "snapshot",
            reason: format!("file snapshots/{id} holds snapshot {held}"),
        }))
    }
}
