"""FloeStore: a zarr-python 3 store over a floe session.

Every method awaits the native store's coroutines, which run on floe's tokio runtime
without holding the GIL. The methods that change the session (``set``,
``set_if_not_exists``, ``delete``, ``delete_dir``, ``clear``) are not cut short by a
cancellation of the awaiting task: they wait for the native call to end, then raise
``CancelledError``, so a cancelled write has taken effect or never started by the
time its cancellation returns, and never lands later over a newer write. ``set``
records its value only after its bytes are written and only when not cancelled
meanwhile, so this holds even where zarr's pipeline stops waiting for a cancelled
chunk write.

Every method checks its arguments' types first, as Icechunk's store does, and raises
``TypeError`` before it reads, writes or deletes anything: values must be zarr
``Buffer`` instances, keys and prefixes ``str``, prototypes ``BufferPrototype``, byte
ranges ``None`` or one of zarr's byte requests with non-negative ``int`` fields (a
negative one is a ``ValueError``).
"""

from __future__ import annotations

import asyncio
import builtins
import datetime
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
from floe._settle import run_to_end

#: Key endings of metadata documents (Zarr v3's, and v2's, which floe stores never
#: hold): their gets are answered from the session's memory, without a round trip.
_METADATA_NAMES = ("zarr.json", ".zgroup", ".zattrs", ".zarray", ".zmetadata")


def _type_error(method: str, name: str, expected: str, value: object) -> TypeError:
    return TypeError(
        f"FloeStore.{method}(): `{name}` must be {expected}. "
        f"Got an instance of {type(value)} instead."
    )


def _check_str(method: str, name: str, value: object) -> None:
    """Keys and prefixes are ``str`` (not bytes, paths or None)."""
    if not isinstance(value, str):
        raise _type_error(method, name, "a str", value)


def _check_buffer(method: str, value: object) -> None:
    """Values are zarr ``Buffer`` instances: anything else (an ``int`` has a
    ``to_bytes()`` too) would store bytes no array can read."""
    if not isinstance(value, Buffer):
        raise _type_error(method, "value", "a Buffer instance", value)


def _check_prototype(method: str, prototype: object) -> None:
    if not isinstance(prototype, BufferPrototype):
        raise _type_error(method, "prototype", "a BufferPrototype", prototype)


def _offset(method: str, name: str, value: object) -> int:
    """A byte offset or count: an ``int`` (not a ``bool``), not negative."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise _type_error(method, name, "an int", value)
    if value < 0:
        raise ValueError(f"FloeStore.{method}(): `{name}` must not be negative, got {value}")
    return value


def _range(method: str, byte_range: object) -> tuple[int, int, int]:
    """A zarr byte request as the native store's (kind, a, b)."""
    if byte_range is None:
        return (0, 0, 0)
    if isinstance(byte_range, RangeByteRequest):
        start = _offset(method, "byte_range.start", byte_range.start)
        end = _offset(method, "byte_range.end", byte_range.end)
        return (1, start, end)
    if isinstance(byte_range, OffsetByteRequest):
        return (2, _offset(method, "byte_range.offset", byte_range.offset), 0)
    if isinstance(byte_range, SuffixByteRequest):
        return (3, _offset(method, "byte_range.suffix", byte_range.suffix), 0)
    # Icechunk's wording first ("Unexpected byte_range, got ..."), then floe's.
    raise TypeError(
        f"Unexpected byte_range, got {byte_range!r}: FloeStore.{method}(): `byte_range` "
        "must be None, a RangeByteRequest, an OffsetByteRequest or a SuffixByteRequest. "
        f"Got an instance of {type(byte_range)} instead."
    )


def _pairs(method: str, name: str, items: object, n: int) -> list[tuple]:
    """``items`` as a list of ``n``-tuples (lists accepted), checked before any is
    used."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise _type_error(method, name, f"an iterable of {n}-tuples", items)
    out = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != n:
            raise _type_error(method, f"each item of {name}", f"a {n}-tuple", item)
        out.append(tuple(item))
    return out


class FloeStore(Store):
    """The zarr-python store view of a floe session (``Session.store``), Icechunk's
    ``IcechunkStore`` (``floe.IcechunkStore`` is this class). Do not build one: take
    ``session.store``. Keys are Zarr v3 keys (``zarr.json``, ``t/c/0/1``); values
    are bytes; byte ranges are offsets in bytes.

    ```python
    import asyncio

    session = repo.writable_session("main")
    store = session.store
    root = zarr.open_group(store, mode="a")
    root.create_array("t", shape=(100, 100), chunks=(10, 100), dtype="f4")
    session.commit("add t")

    async def keys():
        return sorted([k async for k in store.list()])

    print(asyncio.run(keys()))  # ['t/zarr.json', 'temperature/c/0/0', ...]
    ```

    Writes go to the session (a read-only session's store raises ``ReadOnlyError``
    on ``set``/``delete``); nothing is visible to others until ``session.commit``.
    Consolidated metadata is not written or needed (as Icechunk: open groups with
    ``consolidated=False`` / ``use_consolidated=False``). Pickles with its session
    (read-only sessions and forks only).
    """

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
        # Open from the start, as Icechunk's store: it views a session that exists,
        # so there is nothing for zarr's `open()` to do.
        self._is_open = True

    @property
    def session(self):
        """The ``Session`` (or ``ForkSession``) this store views (Icechunk's
        ``IcechunkStore.session``); ``floe.distributed.extract_session`` reads it."""
        return self._session

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

    def _fields(self) -> list[tuple[str, object]]:
        fields: list[tuple[str, object]] = [("read_only", self.read_only)]
        if self._session is not None:
            fields.append(("snapshot_id", self._session.snapshot_id))
            fields.append(("branch", self._session.branch))
        return fields

    def __repr__(self) -> str:
        from floe._display import qualified, text_block

        return text_block(qualified("IcechunkStore"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        from floe._display import html_block, qualified

        return html_block(qualified("IcechunkStore"), self._fields())

    @property
    def _store(self):
        """The native store (Icechunk's name for it): its coroutines take raw
        bytes, for callers that bypass zarr's checks."""
        return self._native

    def _check_writable(self) -> None:
        """Refuses writes through a read-only store, or a store of a session that is
        read-only (also once it committed), with ``ReadOnlyError`` as Icechunk (zarr's
        stores raise ``ValueError``)."""
        if self.read_only or not self._native.writable:
            raise ReadOnlyError("cannot write to read-only store")

    def with_read_only(self, read_only: bool = False) -> FloeStore:
        """A copy of this store over the same session, read-only unless
        ``read_only=False`` (Icechunk's ``IcechunkStore.with_read_only``, the method
        zarr calls for ``mode="r"``). The copy starts closed, as Icechunk's; zarr opens
        it on first use. Writes through a read-only copy raise ``ReadOnlyError``.

        ```python
        read_only = store.with_read_only(True)
        assert read_only.read_only and not store.read_only
        print(zarr.open_array(read_only, path="temperature", mode="r")[0, :3])  # [0. 1. 2.]
        ```

        :raises ValueError: ``read_only=False`` on the store of a read-only session.
        """
        if not read_only and not self._native.writable:
            raise ValueError("a read-only session cannot give a writable store")
        store = FloeStore(self._native, session=self._session, read_only=read_only)
        # As Icechunk's `with_read_only`: the copy starts closed (zarr opens it on
        # first use), unlike the store a session hands out.
        store._is_open = False
        return store

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """The bytes stored at ``key`` (a Zarr v3 key: ``zarr.json``,
        ``temperature/c/0/0``), or ``None`` when nothing is stored there, as a buffer
        of ``prototype`` (Icechunk's ``IcechunkStore.get``; awaitable). A chunk comes
        back encoded (compressed), as stored: a native chunk from the repository's
        storage, a virtual one from its container, an inline one from the manifest.
        ``byte_range`` reads part of the value: ``RangeByteRequest(start, end)``
        (``end`` exclusive), ``OffsetByteRequest(offset)`` (from ``offset`` to the
        end) or ``SuffixByteRequest(n)`` (the last ``n`` bytes), all in bytes.
        The whole-key gets of one event-loop turn are read together.

        ```python
        import asyncio
        from zarr.abc.store import RangeByteRequest
        from zarr.core.buffer import default_buffer_prototype

        async def read():
            proto = default_buffer_prototype()
            meta = await store.get("temperature/zarr.json", proto)
            first = await store.get("temperature/c/0/0", proto, RangeByteRequest(0, 4))
            missing = await store.get("missing/zarr.json", proto)
            return meta.to_bytes(), len(first), missing

        meta, n, missing = asyncio.run(read())
        print(n, missing)  # 4 None
        ```

        :raises InvalidInputError: a key no Zarr hierarchy has (also ``ValueError``).
        :raises TypeError: ``prototype`` or ``byte_range`` of the wrong type.
        :raises ValueError: a negative offset or length in ``byte_range``.
        :raises StorageError: the storage (or a virtual chunk's container) failed.
        """
        _check_str("get", "key", key)
        _check_prototype("get", prototype)
        if byte_range is None:
            if key.endswith(_METADATA_NAMES):
                # Metadata documents are in the session's memory: no round trip.
                known, data = self._native._get_now(key)
                if known:
                    return None if data is None else prototype.buffer.from_bytes(data)
            # Whole keys: the gets of one event-loop turn are read together, through
            # floe's coalesced chunk reads (floe._batched_reads).
            data = await self._get_batcher().get(key)
        else:
            data = await self._native.get(key, *_range("get", byte_range))
        return None if data is None else prototype.buffer.from_bytes(data)

    def _get_batcher(self):
        """This store's ``GetBatcher`` (made on first use)."""
        batcher = self.__dict__.get("_batcher")
        if batcher is None:
            from floe._batched_reads import GetBatcher

            batcher = self._batcher = GetBatcher(self._native, self._partial_values_concurrency())
        return batcher

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        """The values (or byte ranges, see ``get``) of several keys, in the order of
        ``key_ranges`` (pairs ``(key, byte_range or None)``), ``None`` for an absent
        key; awaitable (Icechunk's ``IcechunkStore.get_partial_values``). The reads run
        concurrently, at most the session configuration's
        ``get_partial_values_concurrency`` (default 10) requests at a time.

        ```python
        import asyncio
        from zarr.abc.store import SuffixByteRequest
        from zarr.core.buffer import default_buffer_prototype

        values = asyncio.run(store.get_partial_values(
            default_buffer_prototype(),
            [("temperature/c/0/0", None), ("temperature/c/1/0", SuffixByteRequest(8))],
        ))
        print([len(v) for v in values][1])  # 8
        ```

        :raises TypeError: ``key_ranges`` not pairs, or a byte range of the wrong type.
        :raises InvalidInputError: a key no Zarr hierarchy has.
        """
        _check_prototype("get_partial_values", prototype)
        requests = []
        for key, byte_range in _pairs("get_partial_values", "key_ranges", key_ranges, 2):
            _check_str("get_partial_values", "key", key)
            requests.append((key, _range("get_partial_values", byte_range)))

        # Whole keys in one engine call (coalesced chunk reads, at most the
        # configuration's `get_partial_values_concurrency` requests in flight, default
        # 10 as Icechunk); ranges of keys concurrently, as many at once.
        whole = [i for i, (_, r) in enumerate(requests) if r[0] == 0]
        out: list[Buffer | None] = [None] * len(requests)
        if len(whole) > 1:
            values = await self._native.get_many(
                [requests[i][0] for i in whole], self._partial_values_concurrency()
            )
            for i, v in zip(whole, values, strict=True):
                if isinstance(v, BaseException):
                    raise v
                out[i] = None if v is None else prototype.buffer.from_bytes(v)
            whole_set = set(whole)
            requests_left = [(i, k, r) for i, (k, r) in enumerate(requests) if i not in whole_set]
        else:
            requests_left = [(i, k, r) for i, (k, r) in enumerate(requests)]
        limit = asyncio.Semaphore(self._partial_values_concurrency())

        async def one(key: str, kind_a_b: tuple[int, int, int]) -> Buffer | None:
            async with limit:
                data = await self._native.get(key, *kind_a_b)
            return None if data is None else prototype.buffer.from_bytes(data)

        parts = await asyncio.gather(*(one(k, r) for _, k, r in requests_left))
        for (i, _, _), v in zip(requests_left, parts, strict=True):
            out[i] = v
        return out

    def _partial_values_concurrency(self) -> int:
        """The session configuration's ``get_partial_values_concurrency`` (10 when
        unset), read once per store."""
        cached = getattr(self, "_gpv_concurrency", None)
        if cached is None:
            configured = (
                self._session.config.get_partial_values_concurrency
                if self._session is not None
                else None
            )
            cached = max(1, configured or 10)
            self._gpv_concurrency = cached
        return cached

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is in the store. As Icechunk, a key no Zarr hierarchy has
        (neither a ``zarr.json`` key nor a chunk key, such as ``"foo"``) raises
        ``InvalidInputError`` instead of answering ``False``.

        ```python
        import asyncio

        print(asyncio.run(store.exists("temperature/zarr.json")))  # True
        print(asyncio.run(store.exists("missing/zarr.json")))  # False: no such node
        ```
        """
        _check_str("exists", "key", key)
        return await self._native.exists(key)

    async def set(self, key: str, value: Buffer) -> None:
        """Stores ``value`` at ``key`` in two steps: the chunk's bytes are written (an
        awaitable, run to its end even if this task is cancelled), then recorded in
        the session with no await in between. A ``set`` cancelled while its bytes are
        written raises ``CancelledError`` and records nothing, so no write lands
        after its cancellation, even when zarr's pipeline stopped waiting for it (its
        chunk object, unreferenced, goes at the next garbage collection).

        ```python
        import asyncio
        from zarr.core.buffer import default_buffer_prototype

        chunk = asyncio.run(store.get("temperature/c/0/0", default_buffer_prototype()))
        asyncio.run(store.set("temperature/c/1/0", chunk))  # row 1 now holds row 0's bytes
        print(zarr.open_array(store, path="temperature")[1, :3])  # [0. 1. 2.]
        ```
        """
        _check_str("set", "key", key)
        _check_buffer("set", value)
        self._check_writable()
        data = value.to_bytes()
        if key.endswith("zarr.json") and self._native._set_now(key, data):
            # A metadata document: recorded at once, nothing to write.
            return
        prepared = await run_to_end(self._native._prepare_set(key, data))
        self._native._finish_set(prepared)

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        """Stores ``value`` at ``key`` unless something is stored there: one atomic
        step in the session (as Icechunk's), so of concurrent calls for one key
        exactly one stores. Raises ``ReadOnlyError`` on a read-only store.

        ```python
        import asyncio
        from zarr.core.buffer import default_buffer_prototype

        chunk = asyncio.run(store.get("temperature/c/0/0", default_buffer_prototype()))
        asyncio.run(store.set_if_not_exists("temperature/c/0/0", chunk))  # exists: no change
        ```
        """
        _check_str("set_if_not_exists", "key", key)
        _check_buffer("set_if_not_exists", value)
        self._check_writable()
        await run_to_end(self._native.set_if_not_exists(key, value.to_bytes()))

    async def set_partial_values(
        self, key_start_values: Iterable[tuple[str, int, bytes | bytearray | memoryview]]
    ) -> None:
        """Not supported (``supports_partial_writes`` is false; zarr 3 no longer
        writes partially), as in Icechunk: the arguments are checked (``TypeError``),
        then a read-only store raises ``ReadOnlyError`` and a writable one
        ``NotImplementedError``.

        ```python
        import asyncio

        try:
            asyncio.run(store.set_partial_values([("temperature/c/0/0", 0, b"abc")]))
        except NotImplementedError:
            print("partial writes are not supported")
        ```
        """
        method = "set_partial_values"
        for key, start, value in _pairs(method, "key_start_values", key_start_values, 3):
            _check_str(method, "key", key)
            _offset(method, "start", start)
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise _type_error(method, "value", "bytes, bytearray or memoryview", value)
        self._check_writable()
        raise NotImplementedError("FloeStore does not support partial writes")

    async def delete(self, key: str) -> None:
        """Removes ``key``. The session's snapshot is loaded first (an awaitable, run
        to its end), then the key is removed with no await in between: a ``delete``
        cancelled while loading removes nothing, and none lands after its
        cancellation (zarr deletes chunks that end up all fill value this way).

        ```python
        import asyncio

        asyncio.run(store.delete("temperature/c/3/0"))  # row 3 reads as the fill value
        print(zarr.open_array(store, path="temperature")[3, :3])  # [0. 0. 0.]
        ```

        :raises ReadOnlyError: a read-only store or session.
        :raises InvalidInputError: a key no Zarr hierarchy has.
        """
        _check_str("delete", "key", key)
        self._check_writable()
        await run_to_end(self._native._load())
        self._native._delete_loaded(key)

    async def delete_dir(self, prefix: str) -> None:
        """Deletes every key under ``prefix`` (a group or an array and all it holds,
        ``""`` for everything), in the session; awaitable (Icechunk's
        ``IcechunkStore.delete_dir``). Nothing is deleted from storage until the
        deletion is committed and garbage collection runs.

        ```python
        import asyncio

        asyncio.run(store.delete_dir("temperature"))
        print(session.status().deleted_arrays)  # {'/temperature'}
        ```

        :raises ReadOnlyError: a read-only store or session.
        """
        _check_str("delete_dir", "prefix", prefix)
        self._check_writable()
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        await run_to_end(self._native.delete_prefix(prefix))

    async def getsize(self, key: str) -> int:
        """The stored size of ``key`` in bytes (a chunk's compressed size, read from its
        ref without fetching the chunk). Raises ``InvalidInputError`` (a ``FloeError``
        and ``ValueError``, as Icechunk) for a key no Zarr hierarchy has, and
        ``FileNotFoundError`` for a well-formed key that is absent.

        ```python
        import asyncio

        print(asyncio.run(store.getsize("temperature/c/0/0")))  # the compressed size, in bytes
        ```
        """
        _check_str("getsize", "key", key)
        size = await self._native.getsize(key)
        if size is None:
            # `exists` validates the key as Icechunk does (InvalidInputError).
            await self._native.exists(key)
            raise FileNotFoundError(key)
        return size

    async def getsize_prefix(self, prefix: str) -> int:
        """The total stored size in bytes of every key under ``prefix``.

        ```python
        import asyncio

        print(asyncio.run(store.getsize_prefix("temperature")))  # metadata and chunks, in bytes
        ```
        """
        _check_str("getsize_prefix", "prefix", prefix)
        return await self._native.getsize_prefix(prefix)

    async def is_empty(self, prefix: str) -> bool:
        """Whether no key starts with ``prefix`` (after adding a trailing ``/``).

        ```python
        import asyncio

        print(asyncio.run(store.is_empty("temperature")))  # False
        print(asyncio.run(store.is_empty("nothing-here")))  # True
        ```
        """
        _check_str("is_empty", "prefix", prefix)
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        keys, prefixes = await self._native.list_dir(prefix)
        return not keys and not prefixes

    async def clear(self) -> None:
        """Deletes every group, array and chunk in the session (history is untouched;
        the deletions are uncommitted changes like any other).

        ```python
        import asyncio

        asyncio.run(store.clear())
        print(session.status().deleted_arrays)  # {'/temperature'}
        session.discard_changes()  # or commit them
        ```

        :raises ReadOnlyError: a read-only store or session.
        """
        self._check_writable()
        await run_to_end(self._native.delete_prefix(""))

    async def list(self) -> AsyncIterator[str]:
        """Every key of the store (``list_prefix("/")``)."""
        for k in await self._native.list_prefix(""):
            yield k

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The keys under ``prefix``, relative to the store root, matching whole path
        segments as Icechunk: ``"0"`` and ``"0/"`` list ``0/...`` but not ``00/...``;
        ``""`` and ``"/"`` list the whole store (the root ``zarr.json`` included).
        A plain method returning the iterator, so a wrong type raises at the call.

        ```python
        import asyncio

        async def keys(prefix):
            return sorted([key async for key in store.list_prefix(prefix)])

        print(asyncio.run(keys("temperature"))[-1])  # temperature/zarr.json
        ```
        """
        _check_str("list_prefix", "prefix", prefix)
        return self._list_prefix(prefix)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.strip("/")
        for k in await self._native.list_prefix(f"{prefix}/" if prefix else ""):
            yield k

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The names directly under ``prefix`` (one level, no trailing ``/``): keys
        such as ``zarr.json`` and child prefixes such as ``c`` or an array's name, for
        ``async for`` (Icechunk's ``IcechunkStore.list_dir``). Uncommitted changes of the
        session are included.

        ```python
        import asyncio

        async def names(prefix):
            return sorted([name async for name in store.list_dir(prefix)])

        print(asyncio.run(names("")))  # ['temperature', 'zarr.json']
        print(asyncio.run(names("temperature")))  # ['c', 'zarr.json']
        ```
        """
        _check_str("list_dir", "prefix", prefix)
        return self._list_dir(prefix)

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        keys, prefixes = await self._native.list_dir(prefix)
        for k in keys:
            yield k[len(prefix) :]
        for p in prefixes:
            yield p[len(prefix) :].rstrip("/")

    # -- virtual chunk refs (Icechunk's API; see floe.virtual) --------------------

    def _virtual_session(self):
        """The session behind this store, refusing writes as ``set`` does."""
        self._check_writable()
        if self._session is None:
            raise ValueError("this store has no session to write virtual refs to")
        return self._session

    async def array_chunk_iterator(
        self, array_path: str, batch_size: int = 100_000
    ) -> AsyncIterator[tuple]:
        """The chunk refs of the array at ``array_path``, in batches of at most
        ``batch_size`` chunks, sorted by chunk index (Icechunk 2.3.0's
        ``IcechunkStore.array_chunk_iterator``, which VirtualiZarr reads). Each batch
        is ``(coords, kinds, paths, offsets, lengths, inlined)``, row ``i`` of every
        column describing one chunk: ``coords`` a ``uint32`` array of shape
        ``(n, ndim)`` (chunk grid indices), ``kinds`` ``uint8`` ``ChunkType``
        numbers (native 1, virtual 2, inline 3), ``paths`` a list of the chunk id
        (native), the URL (virtual) or ``""`` (inline), ``offsets`` and ``lengths``
        ``uint64`` in bytes (inline: 0 and the size of its bytes), and ``inlined``
        the bytes of the batch's inline rows by row index. Chunks never written do
        not appear. Reads manifests, never chunk bytes. Raises
        ``NodeNotFoundError`` for a missing array, ``ValueError`` for
        ``batch_size < 1``.

        ```python
        import asyncio

        async def batches():
            return [batch async for batch in store.array_chunk_iterator("temperature")]

        (coords, kinds, paths, offsets, lengths, inlined) = asyncio.run(batches())[0]
        print(coords.shape, kinds)  # (4, 2) [3 3 3 3]: four inline chunks
        ```
        """
        import numpy as np

        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self._session is None:
            raise TypeError("this store has no session to read chunk refs from")
        path = array_path if array_path.startswith("/") else "/" + array_path
        coords, kinds, paths, offsets, lengths, inlined = await asyncio.to_thread(
            self._session._native._chunk_refs, path
        )
        ndim = len(coords[0]) if coords else 0
        kinds = np.frombuffer(kinds, dtype=np.uint8)  # one byte per chunk
        inline_rows = dict(inlined)
        for start in range(0, len(kinds), batch_size):
            end = min(start + batch_size, len(kinds))
            yield (
                np.array(coords[start:end], dtype=np.uint32).reshape(end - start, ndim),
                kinds[start:end].copy(),
                paths[start:end],
                np.array(offsets[start:end], dtype=np.uint64),
                np.array(lengths[start:end], dtype=np.uint64),
                {row - start: inline_rows[row] for row in range(start, end) if row in inline_rows},
            )

    def set_virtual_ref(
        self,
        key: str,
        location: str,
        *,
        offset: int,
        length: int,
        checksum: str | datetime.datetime | None = None,
        validate_container: bool = True,
    ) -> None:
        """Makes chunk ``key`` (a chunk key of an existing array, ``"temp/c/0/1"``)
        be bytes ``offset..offset+length`` (bytes) of the object at URL ``location``
        (``file:///...``, ``s3://...``, ``https://...``, kept verbatim), as Icechunk.

        ``checksum``: the object's ETag (``str``) or a last-modified ``datetime``;
        reads of the chunk fail with ``FloeError`` once the object no longer matches.
        ``validate_container``: raise ``InvalidInputError`` when no virtual chunk
        container of the repository covers ``location``. Raises ``ReadOnlyError`` on
        a read-only store, ``FloeError`` when the array does not exist or the index is
        outside its chunk grid.

        ```python
        import os

        data = os.path.abspath("data.bin")  # a file holding raw little-endian float32
        np.arange(20, dtype="<f4").tofile(data)
        folder = os.path.dirname(data)
        config = floe.RepositoryConfig.default()
        config.set_virtual_chunk_container(
            floe.VirtualChunkContainer(f"file://{folder}/", floe.local_filesystem_store(folder))
        )
        repo = repo.reopen(
            config,
            authorize_virtual_chunk_access={
                f"file://{folder}/": floe.Credentials.LocalFileSystemAccess()
            },
        )
        session = repo.writable_session("main")
        raw = zarr.create_array(
            session.store, name="raw", shape=(20,), chunks=(10,), dtype="<f4", compressors=None
        )

        session.store.set_virtual_ref("raw/c/0", f"file://{data}", offset=0, length=40)  # bytes
        print(raw[:3])  # [0. 1. 2.]: read from data.bin
        ```
        """
        _check_str("set_virtual_ref", "key", key)
        _check_str("set_virtual_ref", "location", location)
        from floe import virtual

        virtual.set_virtual_ref(
            self._virtual_session(), key, location, offset, length, checksum, validate_container
        )

    async def set_virtual_ref_async(self, key: str, location: str, **kwargs) -> None:
        """``set_virtual_ref`` as an awaitable coroutine (it does no I/O)."""
        self.set_virtual_ref(key, location, **kwargs)

    # ``builtins.list`` in the annotations below: in this class ``list`` is the method.
    def set_virtual_refs(
        self, array_path: str, chunks: builtins.list, *, validate_containers: bool = True
    ) -> builtins.list[tuple[int, ...]] | None:
        """Stores many virtual refs (``floe.VirtualChunkSpec``: chunk index,
        location, offset and length in bytes, optional checksum) of the array at
        ``array_path`` at once. With ``validate_containers``, refs whose location no
        container covers are skipped and their chunk indices returned; ``None`` when
        every ref was stored (Icechunk's return value). An index outside the chunk
        grid raises ``FloeError`` and stores nothing.

        ```python
        import os

        data = os.path.abspath("data.bin")  # a file holding raw little-endian float32
        np.arange(20, dtype="<f4").tofile(data)
        folder = os.path.dirname(data)
        config = floe.RepositoryConfig.default()
        config.set_virtual_chunk_container(
            floe.VirtualChunkContainer(f"file://{folder}/", floe.local_filesystem_store(folder))
        )
        repo = repo.reopen(
            config,
            authorize_virtual_chunk_access={
                f"file://{folder}/": floe.Credentials.LocalFileSystemAccess()
            },
        )
        session = repo.writable_session("main")
        raw = zarr.create_array(
            session.store, name="raw", shape=(20,), chunks=(10,), dtype="<f4", compressors=None
        )

        skipped = session.store.set_virtual_refs("raw", [
            floe.VirtualChunkSpec(index=[0], location=f"file://{data}", offset=0, length=40),
            floe.VirtualChunkSpec(index=[1], location=f"file://{data}", offset=40, length=40),
        ])
        print(skipped, raw[9:11])  # None [ 9. 10.]
        ```
        """
        _check_str("set_virtual_refs", "array_path", array_path)
        from floe import virtual

        return virtual.set_virtual_refs(
            self._virtual_session(), array_path, chunks, validate_containers
        )

    async def set_virtual_refs_async(
        self, array_path: str, chunks: builtins.list, *, validate_containers: bool = True
    ) -> builtins.list[tuple[int, ...]] | None:
        """``set_virtual_refs`` as an awaitable coroutine (it does no I/O)."""
        return self.set_virtual_refs(array_path, chunks, validate_containers=validate_containers)

    def set_virtual_refs_arr(
        self,
        array_path: str,
        chunk_grid_shape: tuple[int, ...],
        locations: builtins.list[str],
        offsets,
        lengths,
        *,
        validate_containers: bool = True,
        arr_offset: tuple[int, ...] | None = None,
        checksum: str | datetime.datetime | None = None,
    ) -> builtins.list[tuple[int, ...]] | None:
        """The vectorized ``set_virtual_refs``: ref ``i`` is chunk ``i`` of a chunk
        grid of shape ``chunk_grid_shape`` in C order (shifted by ``arr_offset``),
        bytes ``offsets[i]..offsets[i]+lengths[i]`` of ``locations[i]`` (an empty
        location is no ref). ``offsets`` and ``lengths`` are 1-D integer arrays (numpy
        ``uint64``; passed as one buffer each, no Python object per ref); one
        ``checksum`` covers every ref. Returns the skipped indices as
        ``set_virtual_refs``. Raises ``ValueError`` when the lengths differ from the
        grid's size.

        ```python
        import os

        data = os.path.abspath("data.bin")  # a file holding raw little-endian float32
        np.arange(20, dtype="<f4").tofile(data)
        folder = os.path.dirname(data)
        config = floe.RepositoryConfig.default()
        config.set_virtual_chunk_container(
            floe.VirtualChunkContainer(f"file://{folder}/", floe.local_filesystem_store(folder))
        )
        repo = repo.reopen(
            config,
            authorize_virtual_chunk_access={
                f"file://{folder}/": floe.Credentials.LocalFileSystemAccess()
            },
        )
        session = repo.writable_session("main")
        raw = zarr.create_array(
            session.store, name="raw", shape=(20,), chunks=(10,), dtype="<f4", compressors=None
        )

        session.store.set_virtual_refs_arr(
            "raw",
            (2,),  # the chunk grid's shape
            [f"file://{data}"] * 2,
            np.array([0, 40], dtype="uint64"),  # offsets, bytes
            np.array([40, 40], dtype="uint64"),  # lengths, bytes
        )
        print(raw[-2:])  # [18. 19.]
        ```
        """
        _check_str("set_virtual_refs_arr", "array_path", array_path)
        from floe import virtual

        return virtual.set_virtual_refs_arr(
            self._virtual_session(),
            array_path,
            tuple(chunk_grid_shape),
            locations,
            offsets,
            lengths,
            validate_containers,
            arr_offset,
            checksum,
        )


def _store_of(session, read_only: bool) -> FloeStore:
    """Unpickles a store: the store of its (unpickled) session."""
    return session.store.with_read_only(read_only)


#: Icechunk's name for the store of a session.
IcechunkStore = FloeStore
