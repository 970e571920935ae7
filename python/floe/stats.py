"""Chunk storage statistics, as Icechunk's ``icechunk.stats``."""

from __future__ import annotations

from floe._display import html_block, qualified, text_block

__all__ = ["ChunkStorageStats"]


class ChunkStorageStats:
    """Bytes of the chunks reachable from any branch or tag, each chunk counted
    once (``Repository.chunk_storage_stats``): ``native_bytes`` (chunk objects in
    the repository), ``virtual_bytes`` (ranges of external objects) and
    ``inlined_bytes`` (chunks stored in manifests). Stats add up with ``+``.

    ```python
    stats = repo.chunk_storage_stats()
    print(stats.inlined_bytes > 0, stats.virtual_bytes)  # True 0: small chunks are inline
    print(stats.non_virtual_bytes() == stats.native_bytes + stats.inlined_bytes)  # True
    print((stats + stats).total_bytes() == 2 * stats.total_bytes())  # True
    ```
    """

    __slots__ = ("native_bytes", "virtual_bytes", "inlined_bytes")

    def __init__(self, native_bytes: int = 0, virtual_bytes: int = 0, inlined_bytes: int = 0):
        self.native_bytes = native_bytes
        self.virtual_bytes = virtual_bytes
        self.inlined_bytes = inlined_bytes

    def non_virtual_bytes(self) -> int:
        """Native plus inline bytes: what the repository itself stores."""
        return self.native_bytes + self.inlined_bytes

    def total_bytes(self) -> int:
        """Every kind together, in bytes."""
        return self.non_virtual_bytes() + self.virtual_bytes

    def __add__(self, other: ChunkStorageStats) -> ChunkStorageStats:
        if not isinstance(other, ChunkStorageStats):
            return NotImplemented
        return ChunkStorageStats(
            self.native_bytes + other.native_bytes,
            self.virtual_bytes + other.virtual_bytes,
            self.inlined_bytes + other.inlined_bytes,
        )

    def __radd__(self, other: object) -> ChunkStorageStats:
        if other == 0:  # sum() starts from 0
            return self
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChunkStorageStats) and self._fields() == other._fields()

    def _fields(self) -> list[tuple[str, object]]:
        return [
            ("native_bytes", self.native_bytes),
            ("virtual_bytes", self.virtual_bytes),
            ("inlined_bytes", self.inlined_bytes),
        ]

    def __repr__(self) -> str:
        return text_block(qualified("stats.ChunkStorageStats"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("stats.ChunkStorageStats"), self._fields())
