"""Snapshots and their differences, as Icechunk's ``icechunk.snapshots``:
``SnapshotInfo`` (one commit of a history) and ``Diff``."""

from floe._floe import SnapshotInfo
from floe.diff import Diff

__all__ = ["Diff", "SnapshotInfo"]
