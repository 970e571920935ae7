"""FloeStore: a zarr-python 3 store over a floe session.

Every method awaits the native store's coroutines, which run on floe's tokio runtime
without holding the GIL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype

from floe._floe import ReadOnlyError


def _range(byte_range: ByteRequest | None) -> tuple[int, int, int]:
    if byte_range is None:
        return (0, 0, 0)
    if isinstance(byte_range, RangeByteRequest):
        return (1, byte_range.start, byte_range.end)
    if isinstance(byte_range, OffsetByteRequest):
        return (2, byte_range.offset, 0)
    if isinstance(byte_range, SuffixByteRequest):
        return (3, byte_range.suffix, 0)
    raise TypeError(f"unsupported byte range {byte_range!r}")


class FloeStore(Store):
    """The zarr-python store view of a floe session (``Session.store``)."""

    supports_writes = True
    supports_deletes = True
    supports_partial_writes = False
    supports_listing = True
    #: As Icechunk: a floe session lists its nodes from the snapshot, so consolidated
    #: metadata would only duplicate it (and go stale); zarr does not write it here.
    supports_consolidated_metadata = False

    def __init__(self, native, *, session=None, read_only: bool | None = None):
        if read_only is None:
            read_only = not native.writable
        super().__init__(read_only=read_only)
        self._native = native
        self._session = session

    def __reduce__(self):
        if self._session is None:
            raise TypeError("this store has no session to pickle")
        return (_store_of, (self._session, self.read_only))

    def __eq__(self, other: object) -> bool:
        # Two stores are equal when they view the same session the same way.
        if not isinstance(other, FloeStore) or other.read_only != self.read_only:
            return False
        if self._session is not None and other._session is not None:
            return self._session._native is other._session._native
        return other._native is self._native

    def __hash__(self) -> int:
        return id(self._session._native if self._session is not None else self._native)

    def __repr__(self) -> str:
        return f"<FloeStore read_only={self.read_only}>"

    def _check_writable(self) -> None:
        """Refuses writes through a read-only store, or a store of a session that is
        read-only (also once it committed), with ``ReadOnlyError`` as Icechunk (zarr's
        stores raise ``ValueError``)."""
        if self.read_only or not self._native.writable:
            raise ReadOnlyError("cannot write to read-only store")

    def with_read_only(self, read_only: bool = False) -> "FloeStore":
        if not read_only and not self._native.writable:
            raise ValueError("a read-only session cannot give a writable store")
        return FloeStore(self._native, session=self._session, read_only=read_only)

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        data = await self._native.get(key, *_range(byte_range))
        return None if data is None else prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # Concurrently: each get runs on floe's runtime, so the requests overlap.
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is in the store. As Icechunk, a key no Zarr hierarchy has
        (neither a ``zarr.json`` key nor a chunk key, such as ``"foo"``) raises
        ``InvalidInputError`` instead of answering ``False``."""
        return await self._native.exists(key)

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        await self._native.set(key, value.to_bytes())

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        if not await self.exists(key):
            await self.set(key, value)

    async def delete(self, key: str) -> None:
        self._check_writable()
        await self._native.delete(key)

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        await self._native.delete_prefix(prefix)

    async def getsize(self, key: str) -> int:
        """The stored size of ``key`` in bytes (a chunk's compressed size, read from its
        ref without fetching the chunk). Raises ``FileNotFoundError`` when absent."""
        size = await self._native.getsize(key)
        if size is None:
            raise FileNotFoundError(key)
        return size

    async def getsize_prefix(self, prefix: str) -> int:
        """The total stored size in bytes of every key under ``prefix``."""
        return await self._native.getsize_prefix(prefix)

    async def is_empty(self, prefix: str) -> bool:
        """Whether no key starts with ``prefix`` (after adding a trailing ``/``)."""
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        keys, prefixes = await self._native.list_dir(prefix)
        return not keys and not prefixes

    async def clear(self) -> None:
        """Deletes every group, array and chunk in the session (history is untouched;
        the deletions are uncommitted changes like any other)."""
        self._check_writable()
        await self._native.delete_prefix("")

    async def list(self) -> AsyncIterator[str]:
        """Every key of the store (``list_prefix("/")``)."""
        for k in await self._native.list_prefix(""):
            yield k

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The keys under ``prefix``, relative to the store root, matching whole path
        segments as Icechunk: ``"0"`` and ``"0/"`` list ``0/...`` but not ``00/...``;
        ``""`` and ``"/"`` list the whole store (the root ``zarr.json`` included)."""
        prefix = prefix.strip("/")
        for k in await self._native.list_prefix(f"{prefix}/" if prefix else ""):
            yield k

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        keys, prefixes = await self._native.list_dir(prefix)
        for k in keys:
            yield k[len(prefix):]
        for p in prefixes:
            yield p[len(prefix):].rstrip("/")


def _store_of(session, read_only: bool) -> FloeStore:
    """Unpickles a store: the store of its (unpickled) session."""
    return session.store.with_read_only(read_only)


#: Icechunk's name for the store of a session.
IcechunkStore = FloeStore
