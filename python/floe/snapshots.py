"""Snapshots and their differences, as Icechunk's ``icechunk.snapshots``:
``SnapshotInfo`` (one commit of a history), ``ManifestFileInfo`` (one manifest a
snapshot lists) and ``Diff``."""

from __future__ import annotations

from floe._display import html_block, qualified, text_block
from floe._floe import SnapshotInfo
from floe.diff import Diff

__all__ = ["Diff", "ManifestFileInfo", "SnapshotInfo"]


class ManifestFileInfo:
    """One manifest file of a snapshot (``Repository.list_manifest_files``): its
    ``id``, ``size_bytes`` and ``num_chunk_refs``."""

    __slots__ = ("id", "size_bytes", "num_chunk_refs")

    def __init__(self, id: str, size_bytes: int, num_chunk_refs: int):
        self.id = id
        self.size_bytes = size_bytes
        self.num_chunk_refs = num_chunk_refs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ManifestFileInfo) and self._fields() == other._fields()

    def _fields(self) -> list[tuple[str, object]]:
        return [
            ("id", self.id),
            ("size_bytes", self.size_bytes),
            ("num_chunk_refs", self.num_chunk_refs),
        ]

    def __repr__(self) -> str:
        return text_block(qualified("snapshots.ManifestFileInfo"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("snapshots.ManifestFileInfo"), self._fields())
