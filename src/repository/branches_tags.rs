//! Branches and tags of a repository: listing, looking up, creating, moving and
//! deleting them (through [`RefStore`](crate::refs::RefStore), spec 1 or 2).

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::SnapshotId;

use super::Repository;

impl Repository {
    /// Branch names, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_branches(&self) -> Result<Vec<String>> {
        Ok(self.inner.refs.list().await?.branches)
    }

    /// Live tag names, sorted (deleted tags are absent).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_tags(&self) -> Result<Vec<String>> {
        Ok(self.inner.refs.list().await?.tags)
    }

    /// Deleted tag names, sorted (their names cannot be used again).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_deleted_tags(&self) -> Result<Vec<String>> {
        Ok(self.inner.refs.list().await?.deleted_tags)
    }

    /// The snapshot branch `name` points to.
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; storage and format errors.
    pub async fn lookup_branch(&self, name: &str) -> Result<SnapshotId> {
        Ok(self.inner.refs.branch(name).await?.snapshot)
    }

    /// The snapshot tag `name` points to.
    ///
    /// # Errors
    /// [`Error::TagNotFound`], [`Error::TagDeleted`]; storage and format errors.
    pub async fn lookup_tag(&self, name: &str) -> Result<SnapshotId> {
        self.inner.refs.tag(name).await
    }

    /// Creates branch `name` at `snapshot`.
    ///
    /// # Errors
    /// [`Error::BranchExists`], [`Error::SnapshotNotFound`],
    /// [`Error::InvalidRefName`], [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn create_branch(&self, name: &str, snapshot: SnapshotId) -> Result<()> {
        self.inner.refs.create_branch(name, snapshot).await
    }

    /// Deletes branch `name` (not `main`).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::CannotDeleteMain`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn delete_branch(&self, name: &str) -> Result<()> {
        self.inner.refs.delete_branch(name).await
    }

    /// Moves branch `name` to `to` with compare-and-swap: fails if the branch moved
    /// from where it was read (or from `expected`, when given).
    ///
    /// # Errors
    /// [`Error::BranchNotFound`], [`Error::SnapshotNotFound`], [`Error::BranchMoved`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn reset_branch(
        &self,
        name: &str,
        to: SnapshotId,
        expected: Option<SnapshotId>,
    ) -> Result<()> {
        self.inner.refs.reset_branch(name, to, expected).await
    }

    /// Creates tag `name` at `snapshot`. Tags never move.
    ///
    /// # Errors
    /// [`Error::TagExists`], [`Error::TagDeleted`] (a deleted tag's name can never be
    /// reused), [`Error::SnapshotNotFound`], [`Error::InvalidRefName`],
    /// [`Error::FeatureDisabled`], [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn create_tag(&self, name: &str, snapshot: SnapshotId) -> Result<()> {
        self.inner.refs.create_tag(name, snapshot).await
    }

    /// Deletes tag `name` (spec 1: by writing its tombstone; spec 2: by moving it to
    /// the `repo` object's deleted tags).
    ///
    /// # Errors
    /// [`Error::TagNotFound`], [`Error::TagDeleted`], [`Error::FeatureDisabled`],
    /// [`Error::RepositoryReadOnly`]; storage errors.
    pub async fn delete_tag(&self, name: &str) -> Result<()> {
        self.inner.refs.delete_tag(name).await
    }
}
