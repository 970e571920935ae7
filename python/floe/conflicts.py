"""Conflict resolution on rebase, as Icechunk's ``icechunk.conflicts``:
``ConflictDetector`` (any conflict fails), ``BasicConflictSolver`` (chunk
double-writes resolved by ``VersionSelection``) and ``ConflictError``."""

from floe._floe import BasicConflictSolver, ConflictDetector, ConflictError, VersionSelection

__all__ = ["BasicConflictSolver", "ConflictDetector", "ConflictError", "VersionSelection"]
