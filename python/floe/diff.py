"""Diff: what changed between two snapshots, or in a session (Icechunk's ``Diff``)."""

from __future__ import annotations


class Diff:
    """The changes between two versions (``Repository.diff``) or the uncommitted
    changes of a session (``Session.status``). Paths are node paths (``/a/b``);
    nodes are named by their paths after any moves."""

    __slots__ = (
        "new_groups", "new_arrays", "deleted_groups", "deleted_arrays",
        "updated_groups", "updated_arrays", "updated_chunks", "moved_nodes",
    )

    def __init__(self, raw: dict):
        #: Groups created.
        self.new_groups: set[str] = set(raw.get("new_groups", ()))
        #: Arrays created.
        self.new_arrays: set[str] = set(raw.get("new_arrays", ()))
        #: Groups deleted.
        self.deleted_groups: set[str] = set(raw.get("deleted_groups", ()))
        #: Arrays deleted.
        self.deleted_arrays: set[str] = set(raw.get("deleted_arrays", ()))
        #: Groups whose ``zarr.json`` changed.
        self.updated_groups: set[str] = set(raw.get("updated_groups", ()))
        #: Arrays whose ``zarr.json`` changed.
        self.updated_arrays: set[str] = set(raw.get("updated_arrays", ()))
        #: Chunk grid coordinates written or deleted, by array path.
        self.updated_chunks: dict[str, list[list[int]]] = {
            path: sorted(list(c) for c in coords)
            for path, coords in raw.get("updated_chunks", {}).items()
        }
        #: Spec 2: nodes moved, as ``(from_path, to_path)`` pairs.
        self.moved_nodes: list[tuple[str, str]] = sorted(
            (old, new) for new, old in raw.get("moved_nodes", {}).items()
        )

    def is_empty(self) -> bool:
        """Whether nothing changed."""
        return not any(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Diff) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__
        )

    def __repr__(self) -> str:
        parts = [f"{n}={getattr(self, n)!r}" for n in self.__slots__ if getattr(self, n)]
        return f"Diff({', '.join(parts)})"
