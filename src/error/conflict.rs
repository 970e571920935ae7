//! Commit conflicts: why a change set cannot be re-applied on a branch tip that moved
//! (defined here, at the bottom of the crate, so that [`super::Error`] depends on no
//! layer above it; detection lives in `session::commit::conflict`).

use std::fmt;

use crate::format::snapshot::NodeKind;
use crate::format::{ChunkIndices, NodeId, NodePath, SnapshotId};

/// One reason a change set cannot be re-applied on a branch tip.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// Both sides created a node at this path.
    NewNodeAtExistingPath {
        /// The path.
        path: NodePath,
    },
    /// Both sides changed this node's `zarr.json`.
    NodeMetadataChangedByBoth {
        /// The path.
        path: NodePath,
    },
    /// Both sides wrote or deleted these chunks of this array. A
    /// [`BasicConflictSolver`](crate::session::BasicConflictSolver) can resolve it by
    /// keeping either side's chunks.
    ChunksChangedByBoth {
        /// The array.
        path: NodePath,
        /// The array's node id.
        node: NodeId,
        /// The chunk indices written by both, sorted.
        chunks: Vec<ChunkIndices>,
    },
    /// One side changed this array's `zarr.json` (shape, codecs...) while the other
    /// wrote chunks to it.
    ChunksWrittenWhileArrayChanged {
        /// The array.
        path: NodePath,
    },
    /// The other side deleted a node this session changed.
    ChangedNodeWasDeleted {
        /// The path.
        path: NodePath,
    },
    /// This session deleted a node the other side changed (its metadata, or for an
    /// array its chunks). A [`BasicConflictSolver`](crate::session::BasicConflictSolver)
    /// can resolve it by deleting the node anyway.
    DeletedNodeWasChanged {
        /// The path.
        path: NodePath,
        /// The node's id.
        node: NodeId,
        /// Group or array.
        kind: NodeKind,
    },
    /// The session's base snapshot is no longer an ancestor of the branch tip (the
    /// branch was reset).
    BaseNotAncestor {
        /// The session's base snapshot.
        base: SnapshotId,
    },
    /// Spec 2: moves are never rebased (Icechunk's `MoveOperationCannotBeRebased`):
    /// a rearrange session whose branch moved, or a session whose branch moved by a
    /// commit that moved nodes.
    MovesCannotBeRebased {
        /// The commit on the other side.
        snapshot: SnapshotId,
    },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::NewNodeAtExistingPath { path } => {
                write!(f, "{path}: both sides created a node here")
            }
            Conflict::NodeMetadataChangedByBoth { path } => {
                write!(f, "{path}: both sides changed the node's metadata")
            }
            Conflict::ChunksChangedByBoth { path, chunks, .. } => {
                write!(f, "{path}: both sides changed chunks {chunks:?}")
            }
            Conflict::ChunksWrittenWhileArrayChanged { path } => write!(
                f,
                "{path}: chunks were written while the array's metadata changed"
            ),
            Conflict::ChangedNodeWasDeleted { path } => {
                write!(f, "{path}: changed here but deleted by the other commit")
            }
            Conflict::DeletedNodeWasChanged { path, kind, .. } => {
                write!(
                    f,
                    "{path}: {kind} deleted here but changed by the other commit"
                )
            }
            Conflict::BaseNotAncestor { base } => write!(
                f,
                "the session's base snapshot {base} is no longer an ancestor of the branch"
            ),
            Conflict::MovesCannotBeRebased { snapshot } => write!(
                f,
                "moves cannot be rebased (the other side is commit {snapshot})"
            ),
        }
    }
}

/// A commit that cannot land: its branch moved and the changes overlap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConflictError {
    /// The branch committed to.
    pub branch: String,
    /// The snapshot the session started from.
    pub base: SnapshotId,
    /// The branch tip that won.
    pub winning_snapshot: SnapshotId,
    /// Every conflict found (empty when rebasing was not allowed).
    pub conflicts: Vec<Conflict>,
}

impl fmt::Display for ConflictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "commit conflict on branch `{}`: it moved from {} to {}",
            self.branch, self.base, self.winning_snapshot
        )?;
        if self.conflicts.is_empty() {
            write!(f, " (rebase not attempted)")?;
        }
        for c in &self.conflicts {
            write!(f, "; {c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConflictError {}

/// `c1; c2; ...` for error messages.
pub(super) fn list(conflicts: &[Conflict]) -> String {
    conflicts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
