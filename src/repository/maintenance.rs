//! Repository maintenance, delegated to [`crate::lifecycle`]: snapshot expiry,
//! garbage collection, chunk storage statistics, integrity checking.

use chrono::{DateTime, Utc};

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::SpecVersion;

use super::Repository;

impl Repository {
    /// Expires, in the history of every branch and tag, the snapshots flushed before
    /// `older_than`, as Icechunk's `expire_snapshots` does (see
    /// [`crate::lifecycle::expire`]): on spec 1 the oldest snapshot of each history
    /// that is not expired is rewritten with the initial snapshot as its parent; on
    /// spec 2 only the `repo` object's parent links change. Nothing is
    /// deleted until [`Repository::garbage_collect`] runs. Refs whose own snapshot is
    /// expired are deleted when `options` say so (`main` never is), each only if it
    /// still points where it was judged (compare-and-swap): a branch a writer moved
    /// meanwhile is kept (`ExpireResult::kept_moved_branches`).
    ///
    /// # Errors
    /// [`Error::AncestryLoop`] for a corrupt history; [`Error::SnapshotNotFound`];
    /// storage and format errors.
    pub async fn expire_snapshots(
        &self,
        older_than: DateTime<Utc>,
        options: crate::lifecycle::ExpireOptions,
    ) -> Result<crate::lifecycle::ExpireResult> {
        if self.inner.spec == SpecVersion::V2 {
            return crate::lifecycle::expire::expire_snapshots_v2(
                &self.inner.assets,
                older_than,
                options,
            )
            .await;
        }
        crate::lifecycle::expire::expire_snapshots(
            &self.inner.assets,
            self.inner.storage.as_ref(),
            older_than,
            options,
        )
        .await
    }

    /// Deletes the snapshots, transaction logs, manifests and native chunks that no
    /// branch or tag reaches and that were last modified before
    /// `delete_object_older_than` (see [`crate::lifecycle::gc`] for the rules and why
    /// the cut-off keeps in-flight commits safe). Returns counts and bytes deleted, or
    /// that would be deleted when `options.dry_run` is set.
    ///
    /// A cut-off newer than [`crate::lifecycle::GC_SAFETY_WINDOW_SECS`] (1 hour)
    /// before now is refused unless `options.allow_recent_cutoff` is set.
    ///
    /// # Errors
    /// [`Error::RepositoryReadOnly`] when the spec-2 repository's status does not
    /// accept writes; [`Error::GcCutoffTooRecent`] (nothing is read or deleted);
    /// [`Error::AncestryLoop`]; [`Error::SnapshotNotFound`] and format errors for
    /// objects the refs reach (then nothing is deleted); storage errors.
    pub async fn garbage_collect(
        &self,
        delete_object_older_than: DateTime<Utc>,
        options: crate::lifecycle::GcOptions,
        progress: Option<crate::lifecycle::gc::GcProgress<'_>>,
    ) -> Result<crate::lifecycle::GcSummary> {
        // As Icechunk 2.3.0: a repository whose status is read-only is not collected.
        if self.inner.spec == SpecVersion::V2 {
            crate::refs::repo_object::check_online(&*self.repo_info().await?)?;
        }
        crate::lifecycle::gc::garbage_collect(
            &self.inner.assets,
            self.inner.storage.as_ref(),
            delete_object_older_than,
            options,
            progress,
        )
        .await
    }

    /// How many bytes the chunks reachable from any branch or tag take, by kind
    /// (native, virtual, inline), each chunk counted once (Icechunk's
    /// `chunk_storage_stats`; see [`crate::lifecycle::stats`]).
    ///
    /// # Errors
    /// Storage and format errors reading refs, snapshots and manifests.
    pub async fn chunk_storage_stats(&self) -> Result<crate::lifecycle::ChunkStorageStats> {
        crate::lifecycle::stats::chunk_storage_stats(
            &self.inner.assets,
            self.inner.storage.as_ref(),
        )
        .await
    }
    /// Checks the integrity of the repository: every ref resolves, every snapshot,
    /// transaction log and manifest the refs reach exists and decodes, every native
    /// chunk ref points to an object of at least its offset + length (sizes from
    /// listings, no chunk bytes read unless `options.read_chunks`), and, when
    /// `check_virtual` is set, every virtual chunk's object exists and matches its
    /// recorded checksum, through this repository's virtual chunk resolver and
    /// authorization. Problems are reported, not raised (see
    /// [`mod@crate::lifecycle::verify`]). Icechunk 2.3.0 has no such check.
    ///
    /// # Example
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), floe::Error> {
    /// let repo = floe::Repository::create(floe::storage::new_in_memory_storage(), None).await?;
    /// let report = repo.verify(false, floe::lifecycle::VerifyOptions::default(), None).await?;
    /// assert!(report.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// Storage errors other than missing objects (network, access), which leave the
    /// repository's state unknown.
    pub async fn verify(
        &self,
        check_virtual: bool,
        options: crate::lifecycle::VerifyOptions,
        progress: Option<crate::lifecycle::verify::VerifyProgress<'_>>,
    ) -> Result<crate::lifecycle::VerifyReport> {
        let resolver = check_virtual.then(|| self.virtual_resolver());
        crate::lifecycle::verify::verify(
            std::sync::Arc::clone(&self.inner.storage),
            resolver.as_deref(),
            options,
            progress,
        )
        .await
    }
}
