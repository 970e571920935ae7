//! Making commits: the commit loop (`commit_loop`: commit with rebase-and-retry, amend,
//! rewrite manifests), `Session::flush` (`detached`: a snapshot no branch points to),
//! the flush that writes a change set as manifests, a transaction
//! log and a snapshot (`flush`), whether a refused attempt landed (`landing`), rebase
//! (`rebase`), conflict detection (`conflict`) and solvers (`solver`).
//!
//! The commit point itself, the compare-and-swap of the branch ref, is
//! [`crate::refs::RefStore`]'s (`src/refs/store.rs`); the commit loop calls it once per
//! attempt.

pub(crate) mod commit_loop;
pub(crate) mod conflict;
pub(crate) mod detached;
pub(crate) mod flush;
pub(crate) mod landing;
pub(crate) mod rebase;
pub(crate) mod solver;
