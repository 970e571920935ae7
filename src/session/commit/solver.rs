//! Conflict solvers: what a rebase does with the conflicts it finds.
//!
//! [`ConflictDetector`] (the default) resolves nothing: any conflict fails the
//! rebase. [`BasicConflictSolver`] resolves the two kinds Icechunk's
//! `BasicConflictSolver` resolves, with the same options and defaults: chunks both
//! sides wrote ([`Conflict::ChunksChangedByBoth`]) by keeping ours or theirs, and a
//! node this session deleted that the other side changed
//! ([`Conflict::DeletedNodeWasChanged`]) by deleting it anyway, unless told to fail.
//! Any other conflict is unsolvable, and then every conflict found is reported.

use std::fmt::Debug;

use crate::error::Conflict;
use crate::format::snapshot::NodeKind;

use crate::session::change_set::ChangeSet;

/// Resolves the conflicts of a rebase.
pub trait ConflictSolver: Debug + Send + Sync {
    /// Given every conflict found re-applying `changes` on the branch tip, returns the
    /// changes to apply instead.
    ///
    /// # Errors
    /// The conflicts to report when they cannot all be resolved.
    fn solve(
        &self,
        conflicts: Vec<Conflict>,
        changes: ChangeSet,
    ) -> Result<ChangeSet, Vec<Conflict>>;
}

/// Resolves nothing: every conflict fails the rebase (Icechunk's `ConflictDetector`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConflictDetector;

impl ConflictSolver for ConflictDetector {
    fn solve(
        &self,
        conflicts: Vec<Conflict>,
        changes: ChangeSet,
    ) -> Result<ChangeSet, Vec<Conflict>> {
        if conflicts.is_empty() {
            Ok(changes)
        } else {
            Err(conflicts)
        }
    }
}

/// Which side's version of a chunk both sides wrote wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionSelection {
    /// Neither: the conflict fails the rebase.
    Fail,
    /// This session's chunk.
    UseOurs,
    /// The chunk already committed on the branch.
    UseTheirs,
}

/// Resolves chunk conflicts by [`VersionSelection`] and deletions of changed nodes
/// by deleting them, like Icechunk's `BasicConflictSolver` (same defaults:
/// [`VersionSelection::UseOurs`], deletions win).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BasicConflictSolver {
    /// What to do with chunks both sides wrote.
    pub on_chunk_conflict: VersionSelection,
    /// Fail instead of deleting an array the other side changed.
    pub fail_on_delete_of_updated_array: bool,
    /// Fail instead of deleting a group the other side changed.
    pub fail_on_delete_of_updated_group: bool,
}

impl Default for BasicConflictSolver {
    fn default() -> Self {
        BasicConflictSolver {
            on_chunk_conflict: VersionSelection::UseOurs,
            fail_on_delete_of_updated_array: false,
            fail_on_delete_of_updated_group: false,
        }
    }
}

impl BasicConflictSolver {
    /// This solver with chunk conflicts resolved by `selection`.
    pub fn on_chunk_conflict(mut self, selection: VersionSelection) -> Self {
        self.on_chunk_conflict = selection;
        self
    }

    /// This solver failing (`true`) or deleting anyway on a deleted-but-updated array.
    pub fn fail_on_delete_of_updated_array(mut self, fail: bool) -> Self {
        self.fail_on_delete_of_updated_array = fail;
        self
    }

    /// This solver failing (`true`) or deleting anyway on a deleted-but-updated group.
    pub fn fail_on_delete_of_updated_group(mut self, fail: bool) -> Self {
        self.fail_on_delete_of_updated_group = fail;
        self
    }

    fn solvable(&self, conflict: &Conflict) -> bool {
        match conflict {
            Conflict::ChunksChangedByBoth { .. } => {
                self.on_chunk_conflict != VersionSelection::Fail
            }
            Conflict::DeletedNodeWasChanged { kind, .. } => match kind {
                NodeKind::Array => !self.fail_on_delete_of_updated_array,
                NodeKind::Group => !self.fail_on_delete_of_updated_group,
            },
            _ => false,
        }
    }
}

impl ConflictSolver for BasicConflictSolver {
    fn solve(
        &self,
        conflicts: Vec<Conflict>,
        mut changes: ChangeSet,
    ) -> Result<ChangeSet, Vec<Conflict>> {
        if !conflicts.iter().all(|c| self.solvable(c)) {
            return Err(conflicts);
        }
        for conflict in conflicts {
            if let Conflict::ChunksChangedByBoth { node, chunks, .. } = conflict {
                if self.on_chunk_conflict == VersionSelection::UseTheirs {
                    changes.drop_chunk_changes(&node, &chunks);
                }
            }
            // A deleted-but-changed node stays deleted: our deletion applies as it is.
        }
        Ok(changes)
    }
}
