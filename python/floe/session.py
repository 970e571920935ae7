"""``Session``: a read-only or writable view of one version of a repository, as
Icechunk's ``icechunk.session``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from enum import Enum, IntEnum

from floe._display import html_block, qualified, text_block
from floe._floe import Session as _NativeSession
from floe.config import RepositoryConfig
from floe.diff import Diff
from floe.store import FloeStore

__all__ = ["ChunkType", "ForkSession", "Session", "SessionMode"]


class SessionMode(Enum):
    """What a session may do (Icechunk's ``SessionMode``): ``readonly`` (also a
    session once it committed), ``writable`` (a session on a branch, or a fork)
    or ``rearrange`` (spec 2: only moves nodes)."""

    readonly = "readonly"
    writable = "writable"
    rearrange = "rearrange"

    def __repr__(self) -> str:
        return f"SessionMode.{self.name}"

    __str__ = __repr__


class ChunkType(IntEnum):
    """How one chunk is stored (Icechunk's ``ChunkType``): ``uninitialized`` (never
    written: it reads as the fill value), ``native`` (an object in the
    repository's ``chunks/``), ``virtual`` (a byte range of an external object) or
    ``inline`` (its bytes are in the manifest). Its members are Icechunk's numbers
    (0 to 3, the ``kinds`` of ``FloeStore.array_chunk_iterator``) and compare equal
    to them."""

    uninitialized = 0
    native = 1
    virtual = 2
    inline = 3

    def __repr__(self) -> str:
        return f"ChunkType.{self.name}"

    __str__ = __repr__


class Session:
    """A session on a repository (Icechunk's ``Session``): read-only at one
    version, writable on a branch, a fork, or a rearrange session (spec 2, moves
    only). ``store`` is its zarr-python store. Get one from
    ``Repository.writable_session``, ``readonly_session`` or ``rearrange_session``.

    ```python
    session = repo.writable_session("main")
    group = zarr.open_group(session.store)
    group.create_array("t", shape=(365, 180, 360), chunks=(1, 180, 360), dtype="f4")
    print(session.status().new_arrays)  # {'/t'}
    snapshot_id = session.commit("add t")
    ```

    Changes stay in the session (in memory; chunk bytes are written to storage as
    they are set) until ``commit``; other sessions see nothing before then. As in
    Icechunk, a session that committed (or amended) is read-only from then on, at
    the snapshot it wrote; so are the stores it gave out before. Open a new writable
    session for the next commit.
    """

    def __init__(self, native: _NativeSession):
        self._native = native

    @property
    def store(self) -> FloeStore:
        """The zarr-python store over this session (a ``FloeStore``, alias
        ``IcechunkStore``; read-only for a read-only session). Pass it to
        ``zarr.open_group``, ``zarr.create_array``, ``xarray.open_zarr(...,
        consolidated=False)`` or ``to_icechunk``.

        ```python
        group = zarr.open_group(repo.readonly_session("main").store, mode="r")
        print(group["temperature"][0, :3])  # [0. 1. 2.]
        # xarray: xarray.open_zarr(session.store, consolidated=False)
        ```
        """
        return FloeStore(self._native._native_store(), session=self)

    @property
    def config(self) -> RepositoryConfig:
        """The repository configuration the session works with (a copy)."""
        return self._native.config

    @property
    def snapshot_id(self) -> str:
        """The snapshot the session reads: its base, or the snapshot it committed."""
        return self._native.snapshot_id

    @property
    def branch(self) -> str | None:
        """The branch of a writable session; ``None`` for read-only sessions, forks and
        sessions that committed (as Icechunk)."""
        return self._native.branch

    @property
    def read_only(self) -> bool:
        """Whether the session refuses writes (read-only and rearrange sessions, and a
        session once it committed)."""
        return self._native.read_only

    @property
    def has_uncommitted_changes(self) -> bool:
        """Whether the session holds changes not yet committed."""
        return self._native.has_uncommitted_changes

    def status(self) -> Diff:
        """The uncommitted changes of this session as a ``Diff`` (new, deleted and
        updated groups and arrays; chunk indices written per array), as Icechunk's
        ``Session.status``.

        ```python
        zarr.open_array(session.store, path="temperature")[:2] = 0.0  # rows 0 and 1
        d = session.status()
        if not d.is_empty():
            print(d.updated_chunks)  # {'/temperature': [[0, 0], [1, 0]]}
        ```
        """
        return Diff(self._native.status())

    def discard_changes(self) -> None:
        """Forgets the uncommitted changes; the session reads its base snapshot again
        and can write anew (as Icechunk). Chunk bytes already written stay in
        storage until ``garbage_collect``.

        ```python
        session.discard_changes()
        assert not session.has_uncommitted_changes
        ```
        """
        self._native.discard_changes()

    def flush_packs(self) -> None:
        """Writes the chunk packs of this session not written yet (floe's chunk
        packing, ``RepositoryConfig.chunk_packing``): small chunks wait in an open
        pack, in memory, until it holds ``target_size_bytes`` or the session commits.
        Commits, merges and pickled forks write them themselves; call this to bound
        what a crash of this process loses before the commit. A no-op when packing is
        off or nothing is waiting. Raises the storage error when a write fails (the
        packs stay in memory and are written by the next call or commit).

        ```python
        zarr.open_array(session.store, path="temperature")[0, :] = 1.0
        session.flush_packs()
        session.commit("written")
        ```
        """
        self._native.flush_packs()

    def commit(
        self,
        message: str,
        metadata: dict | None = None,
        *,
        allow_empty: bool = False,
        rebase_with=None,
        rebase_tries: int = 100,
    ) -> str:
        """Commits the changes as a new snapshot at the tip of the session's branch
        and returns its id (20 characters); the session is read-only afterwards (as
        Icechunk).

        ```python
        session = repo.writable_session("main")
        zarr.open_group(session.store).attrs["source"] = "ERA5"
        snapshot_id = session.commit("record the source", {"author": "me"})

        # Several writers on one branch: rebase instead of failing.
        other = repo.writable_session("main")  # opened before the commit below lands
        zarr.open_array(other.store, path="temperature")[3] = 0.0
        third = repo.writable_session("main")
        zarr.open_array(third.store, path="temperature")[2] = 1.0
        third.commit("row 2")
        other.commit("row 3", rebase_with=floe.ConflictDetector())  # rebases, commits
        ```

        ``metadata`` (JSON-serializable dict) is stored with the snapshot, over the
        repository's default commit metadata. When the branch moved, rebases with
        ``rebase_with`` (a ``ConflictDetector`` or ``BasicConflictSolver``) at most
        ``rebase_tries`` times; a commit that rebased records
        ``{"__icechunk": {"rebase_attempts": n}}`` in its metadata. Without
        ``rebase_with`` no rebase is tried, as in Icechunk: a moved branch raises
        ``ConflictError`` (kind ``commit-conflict``, with ``expected_parent`` and
        ``actual_parent``).

        :raises ConflictError: the branch moved and no ``rebase_with`` was given
            (kind ``commit-conflict``), or it kept moving for ``rebase_tries`` tries.
        :raises RebaseFailedError: a ``ConflictError`` the solver cannot resolve
            (``.conflicts`` lists them by path).
        :raises SessionStateError: a fork, a read-only session, a session that
            already committed, or no changes (kind ``no-changes-to-commit``) unless
            ``allow_empty``.
        :raises TypeError: ``metadata`` is not JSON-serializable.
        """
        return self._native.commit(
            message,
            metadata,
            allow_empty=allow_empty,
            rebase_with=rebase_with,
            rebase_tries=rebase_tries,
        )

    def amend(
        self, message: str, *, metadata: dict | None = None, allow_empty: bool = False
    ) -> str:
        """Spec 2: replaces the branch tip with a snapshot holding its content plus
        these changes (same parent); returns its id. The session is read-only
        afterwards, as Icechunk's ``Session.amend``.

        ```python
        session = repo.writable_session("main")
        session.amend("better message", allow_empty=True)
        ```

        :raises ConflictError: the branch moved meanwhile.
        :raises SessionStateError: no changes (unless ``allow_empty``: to change
            only the message), or the branch's tip is the initial snapshot.
        :raises FormatError: a spec-1 repository (upgrade it first).
        """
        return self._native.amend(message, metadata, allow_empty=allow_empty)

    def flush(self, message: str, *, metadata: dict | None = None) -> str:
        """Writes the changes as a snapshot whose parent is the session's base
        without moving any branch, and returns its id (``reset_branch`` or
        ``create_tag`` can then point to it), as Icechunk's ``Session.flush``. The
        session is read-only afterwards.

        ```python
        session = repo.writable_session("main")
        zarr.open_group(session.store).attrs["draft"] = True
        snapshot_id = session.flush("a draft, on no branch")
        repo.create_branch("draft", snapshot_id)
        ```
        """
        return self._native.flush(message, metadata)

    @property
    def mode(self) -> SessionMode:
        """The session's ``SessionMode`` (``readonly`` once it committed)."""
        return SessionMode(self._native.mode)

    def chunk_type(self, array_path: str, chunk_coordinates: Iterable[int]) -> ChunkType:
        """How chunk ``chunk_coordinates`` (grid indices) of the array at
        ``array_path`` (``/a/b``) is stored; reads its ref, never its bytes. Raises
        ``NodeNotFoundError`` for a missing array, ``InvalidInputError`` for a path
        without a leading ``/`` or an index outside the grid.

        ```python
        print(session.chunk_type("/temperature", [0, 0]))  # ChunkType.inline: 40 bytes, inlined
        print(session.chunk_type("/temperature", (3, 0)) == floe.ChunkType.inline)  # True
        ```
        """
        return ChunkType[self._native.chunk_type(array_path, list(chunk_coordinates))]

    def get_node_id(self, path: str) -> str:
        """The id of the group or array at ``path``; it stays when the node moves.

        ```python
        node_id = session.get_node_id("/temperature")
        print(node_id)  # a short base32 id, the same after a move
        ```
        """
        return self._native.get_node_id(path)

    def shift_array(self, array_path: str, chunk_offset: Iterable[int]) -> None:
        """Moves every chunk of the array at ``array_path`` by ``chunk_offset``
        chunks along each dimension (negative: towards 0): chunks moved off the grid
        are dropped and the positions left behind read as the fill value. Chunk refs
        move; no chunk bytes are read or copied. Resize the array first (zarr) to
        keep chunks that would leave the grid.

        Raises ``InvalidInputError`` naming the grid, staging nothing, when the
        array's ``zarr.json`` declares no ``regular`` chunk grid (a ``rectilinear``
        one: its chunks differ in shape by position, so moving them would corrupt
        the array; Icechunk 2.3.0 refuses it too).

        ```python
        session.shift_array("/temperature", [1, 0])  # row i moves to row i + 1
        print(zarr.open_array(session.store, path="temperature")[1, :3])  # [0. 1. 2.]
        ```
        """
        self._native.shift_array(array_path, list(chunk_offset))

    def reindex_array(
        self,
        array_path: str,
        forward: Callable[[Iterable[int]], Iterable[int] | None],
        backward: Callable[[Iterable[int]], Iterable[int] | None] | None = None,
    ) -> None:
        """Moves each chunk of the array at ``array_path`` from index ``i`` to
        ``forward(i)`` (dropped when it returns ``None``). Without ``backward``,
        positions nothing moved into keep their old chunk; with ``backward`` (the
        inverse map) they get the chunk at ``backward(i)`` or read as the fill value.
        Chunk refs move, bytes are not copied; an exception in a map stages
        nothing and propagates. A non-``regular`` (``rectilinear``) chunk grid is
        refused as by ``shift_array``.

        ```python
        def reverse(index):  # chunk grid indices, here (row, 0)
            return [3 - index[0], index[1]]

        session.reindex_array("/temperature", reverse, reverse)  # rows in reverse order
        print(zarr.open_array(session.store, path="temperature")[0, :3])  # [30. 31. 32.]
        ```
        """
        self._native.reindex_array(array_path, forward, backward)

    def rebase(self, solver=None) -> None:
        """Moves the session's base to its branch's current tip, keeping its changes
        as ``solver`` resolves their conflicts, as Icechunk's ``Session.rebase``.
        ``commit(rebase_with=...)`` does this for you when the branch moved.

        ```python
        zarr.open_array(session.store, path="temperature")[0] = 1.0
        other = repo.writable_session("main")
        zarr.open_array(other.store, path="temperature")[1] = 2.0
        other.commit("row 1")  # the branch moves past this session's base
        try:
            session.commit("row 0")
        except floe.ConflictError:
            session.rebase(floe.BasicConflictSolver())
            session.commit("row 0")
        ```

        :param solver: a ``ConflictDetector`` (fails on any real conflict) or a
            ``BasicConflictSolver`` (picks a side per conflict); ``None`` raises on
            any conflict.
        :raises RebaseFailedError: conflicts the solver leaves (``.conflicts``).
        :raises SessionStateError: a read-only session or a fork.
        """
        self._native.rebase(solver)

    def fork(self) -> ForkSession:
        """A fork of this writable session (a ``ForkSession``, as Icechunk's
        ``Session.fork``): write in it (in another process or machine once pickled),
        then ``merge`` it back. Forks cannot commit. This is how Dask and
        ``multiprocessing`` workers write one commit together.

        ```python
        import pickle

        fork = session.fork()
        worker_copy = pickle.loads(pickle.dumps(fork))  # what a worker receives
        zarr.open_array(worker_copy.store, path="temperature")[2] = 0.0
        session.merge(worker_copy)  # the copy comes back
        session.commit("written by a worker")
        ```

        With a process pool:

        ```python
        # not run: starts worker processes, which import `write` from your module
        import concurrent.futures
        import multiprocessing

        def write(fork, i):  # each call writes its own chunk
            zarr.open_array(fork.store, path="temperature")[i] = i
            return fork

        session = repo.writable_session("main")
        spawn = multiprocessing.get_context("spawn")  # not "fork": see below
        with concurrent.futures.ProcessPoolExecutor(4, mp_context=spawn) as pool:
            forks = list(pool.map(write, [session.fork()] * 4, range(4)))
        session.merge(*forks)
        session.commit("four writers")
        ```

        Worker processes must be started with ``spawn`` or ``forkserver`` (Dask's
        and ``distributed``'s defaults): a process ``fork``-ed
        from one that already used floe inherits its I/O runtime in a broken state
        and can hang.

        :raises SessionStateError: a read-only session (pickle it directly
            instead), as Icechunk.
        """
        return ForkSession(self._native.fork())

    def merge(self, *forks: Session) -> None:
        """Merges the changes of ``forks`` (from ``fork()``, possibly pickled and
        written elsewhere) into this session, all or nothing, as Icechunk's
        ``Session.merge``. A fork given twice, or this session itself, is merged
        once. Commit afterwards to make the merged changes one snapshot.

        Forks should write disjoint chunks. A chunk written by several forks (or by
        this session and a fork) is not an error: it takes the write of the fork
        merged last, in argument order and then call order, as in Icechunk 2.3.0;
        the other writes of that chunk are lost.

        ```python
        fork_a, fork_b = session.fork(), session.fork()
        zarr.open_array(fork_a.store, path="temperature")[0] = 1.0  # chunk (0, 0)
        zarr.open_array(fork_b.store, path="temperature")[1] = 2.0  # chunk (1, 0)
        session.merge(fork_a, fork_b)
        session.commit("two writers")
        ```

        :raises ConflictError: (kind ``MERGE_FAILED``) changes that cannot be merged:
            changes of the forks that contradict each other or this session's
            changes made since the forks were made, found as ``rebase`` finds them
            except for chunks (two different new arrays or groups at one path, two
            metadata updates of one array, chunks written to an array the other side
            deleted), or a branch reset that left the forks' snapshot out of this
            session's history.
        :raises SessionStateError: (kind ``MERGE_NOT_ALLOWED``) an argument that is
            not a fork, or a fork merged already.
        :raises ReadOnlyError: this session is read-only.
        :raises TypeError: an argument is not a session.
        """
        self._native.merge(*[f._native for f in self._forks_to_merge(forks)])

    def move(self, from_path: str, to_path: str) -> None:
        """Rearrange sessions (spec 2): moves the group or array at ``from_path``,
        and everything under it, to ``to_path`` (absolute paths, ``/a/b``), as
        Icechunk's ``Session.move``. See ``Repository.rearrange_session``.

        :raises NodeNotFoundError: nothing at ``from_path``.
        :raises AlreadyExistsError: something at ``to_path`` already.
        :raises SessionStateError: not a rearrange session.

        ```python
        session = repo.rearrange_session("main")
        session.move("/temperature", "/t2m")
        session.commit("rename temperature to t2m")
        ```
        """
        self._native.move(from_path, to_path)

    def all_virtual_chunk_locations(self) -> list[str]:
        """The location URL of every virtual chunk ref in the session (uncommitted
        changes included), one entry per ref, as Icechunk.

        ```python
        print(session.all_virtual_chunk_locations())  # []: no virtual chunks here
        ```
        """
        from floe._floe import _all_virtual_chunk_locations

        return _all_virtual_chunk_locations(self._native)

    def __reduce__(self):
        # Read-only sessions and forks pickle (storage URL and snapshot id, or the
        # fork's changes; no credentials); a writable session refuses: fork it.
        return (Session, (self._native,))

    def _fields(self) -> list[tuple[str, object]]:
        fields: list[tuple[str, object]] = [
            ("read_only", self.read_only),
            ("snapshot_id", self.snapshot_id),
        ]
        if not self.read_only:
            fields.append(("branch", self.branch))
            fields.append(("has_uncommitted_changes", self.has_uncommitted_changes))
        return fields

    def __repr__(self) -> str:
        return text_block(qualified("session.Session"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("session.Session"), self._fields())

    # -- async twins (Icechunk's *_async API) -----------------------------------------
    #
    # commit/amend/rebase/merge/move await native coroutines on floe's tokio runtime
    # (the event loop is never blocked); the methods marked "thread" have no native
    # coroutine yet and run their blocking twin with ``asyncio.to_thread``.

    async def commit_async(
        self,
        message: str,
        metadata: dict | None = None,
        *,
        allow_empty: bool = False,
        rebase_with=None,
        rebase_tries: int = 100,
    ) -> str:
        """Awaitable ``commit``: the new snapshot id; the session is read-only
        afterwards. Raises as ``commit`` (``SessionStateError`` before any I/O on a
        fork, a read-only session or one that committed; ``ConflictError`` for
        conflicts the solver leaves)."""
        return await self._native.commit_async(
            message,
            metadata,
            allow_empty=allow_empty,
            rebase_with=rebase_with,
            rebase_tries=rebase_tries,
        )

    async def amend_async(
        self, message: str, metadata: dict | None = None, *, allow_empty: bool = False
    ) -> str:
        """Awaitable ``amend``: replaces the branch tip (same parent); returns the new
        snapshot id. ``ConflictError`` when the branch moved meanwhile."""
        return await self._native.amend_async(message, metadata, allow_empty=allow_empty)

    async def rebase_async(self, solver=None) -> None:
        """Awaitable ``rebase``: moves the session's base to its branch tip, keeping
        its changes as ``solver`` resolves conflicts (default: ``ConflictError``)."""
        await self._native.rebase_async(solver)

    async def merge_async(self, *forks: Session) -> None:
        """Awaitable ``merge``: merges the changes of ``forks`` (all or nothing); a
        chunk several forks wrote takes the write of the fork merged last, and
        ``ConflictError`` reports node changes that cannot merge. A fork given twice,
        or this session itself, is merged once (as Icechunk, where merging the same
        changes again changes nothing)."""
        await self._native.merge_async(*[f._native for f in self._forks_to_merge(forks)])

    def _forks_to_merge(self, forks) -> list[Session]:
        """``forks`` without this session and without repeats of one object (Dask's
        threaded scheduler hands one fork object back once per task)."""
        seen = {id(self._native)}
        out = []
        for f in forks:
            if not isinstance(f, Session):
                raise TypeError(f"merge takes forks (ForkSession), got {type(f).__name__!r}")
            if id(f._native) not in seen:
                seen.add(id(f._native))
                out.append(f)
        return out

    async def move_async(self, from_path: str, to_path: str) -> None:
        """Awaitable ``move`` (spec 2, rearrange sessions)."""
        await self._native.move_async(from_path, to_path)

    async def chunk_coordinates(
        self, array_path: str, batch_size: int = 1000
    ) -> AsyncIterator[tuple[int, ...]]:
        """The coordinates (tuples of chunk indices) of every initialized chunk of the
        array at ``array_path`` (a chunk with a ref, committed or not), for ``async
        for``, in index order (Icechunk's ``Session.chunk_coordinates``). One native
        coroutine reads them all; ``batch_size`` is accepted for Icechunk's signature
        and does not change the result. Raises ``FloeError`` for a path that is no
        array.

        ```python
        import asyncio

        async def written():
            return [c async for c in session.chunk_coordinates("/temperature")]

        print(asyncio.run(written()))  # [(0, 0), (1, 0), (2, 0), (3, 0)]
        ```
        """
        for coords in await self._native._chunk_coordinates_async(array_path):
            yield tuple(coords)

    async def flush_async(self, *args, **kwargs) -> str:
        """Awaitable ``flush``, same arguments (thread)."""
        return await asyncio.to_thread(self.flush, *args, **kwargs)

    async def get_node_id_async(self, path: str) -> str:
        """Awaitable ``get_node_id`` (thread)."""
        return await asyncio.to_thread(self.get_node_id, path)

    async def chunk_type_async(self, array_path: str, chunk_coordinates) -> object:
        """Awaitable ``chunk_type`` (thread)."""
        return await asyncio.to_thread(self.chunk_type, array_path, chunk_coordinates)

    async def all_virtual_chunk_locations_async(self) -> list[str]:
        """Awaitable ``all_virtual_chunk_locations`` (thread)."""
        return await asyncio.to_thread(self.all_virtual_chunk_locations)


class ForkSession(Session):
    """What ``Session.fork()`` returns (Icechunk's ``ForkSession``): a writable session
    that is on no branch and cannot commit. It pickles (as its storage URL and its
    changes: chunk refs, inline chunks, node changes; no credentials, not in-memory
    storage), so it can be written in other processes or machines; bring the copies
    back with ``session.merge(*forks)`` (or ``floe.distributed.merge_sessions`` to
    merge forks into one fork first). A fork can be forked again, and forks merge
    into forks.

    ```python
    from floe.distributed import merge_sessions

    forks = [session.fork() for _ in range(2)]
    for row, fork in enumerate(forks):  # each in its own worker, usually
        zarr.open_array(fork.store, path="temperature")[row] = -1.0
    session.merge(merge_sessions(*forks))
    session.commit("two workers")
    ```
    """

    def __reduce__(self):
        return (ForkSession, (self._native,))

    def fork(self) -> ForkSession:
        """A fork of this fork (its changes so far included), to hand on to another
        worker; merge both back into the session (or one into the other).

        ```python
        fork = session.fork()
        zarr.open_array(fork.store, path="temperature")[0] = 1.0
        sub = fork.fork()  # holds the write of row 0
        zarr.open_array(sub.store, path="temperature")[1] = 2.0
        session.merge(sub)
        session.commit("rows 0 and 1")
        ```
        """
        return ForkSession(self._native.fork())

    def __repr__(self) -> str:
        return text_block(qualified("session.ForkSession"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("session.ForkSession"), self._fields())
