//! Spec 1: the snapshot each branch ref named when a repository handle last read or
//! wrote it. A guess to fetch while the ref is read again (the two requests overlap),
//! never trusted without that read. Spec 2 needs none: the cached `repo` object holds
//! every ref.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::format::SnapshotId;

/// Branch name → the snapshot its ref named when last read or written, shared by a
/// repository handle and its sessions.
#[derive(Debug, Default)]
pub(crate) struct BranchHints {
    by_branch: RwLock<HashMap<String, SnapshotId>>,
}

impl BranchHints {
    /// Records that branch `name` named snapshot `id` when its ref was read or
    /// written.
    pub(crate) fn hint(&self, name: &str, id: SnapshotId) {
        self.by_branch
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), id);
    }

    /// The snapshot branch `name` named when its ref was last read or written;
    /// possibly stale.
    pub(crate) fn get(&self, name: &str) -> Option<SnapshotId> {
        self.by_branch
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied()
    }
}
