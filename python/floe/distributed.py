"""Helpers for writing one session from many processes (Dask, distributed, any
framework that ships Python objects to workers), as Icechunk's
``icechunk.distributed``: ``extract_session`` takes the session out of a zarr array a
task wrote, ``merge_sessions`` merges forks into one fork.

The pattern: a coordinator opens a writable session, writes metadata, forks it
(``Session.fork()`` gives a picklable ``ForkSession``), sends the fork to the workers,
each writes its part into its copy, the copies come back and are merged
(``merge_sessions`` on workers, in a tree, then ``session.merge(fork)``), and the
coordinator commits once.

Forks must write disjoint chunks: a chunk that several forks wrote holds, after the
merge, the write of the fork merged last (Icechunk 2.3.0's semantics), without an
error; the other forks' writes of that chunk are lost. Split the work along chunk
boundaries (shard boundaries, for a sharded array); ``floe.dask.store_dask`` refuses
Dask blocks that would share one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from floe.session import ForkSession, Session

__all__ = ["extract_session", "merge_sessions"]


def _flatten(items: Iterable[Any]) -> Iterator[Any]:
    """The leaves of nested lists and tuples (Dask hands reductions nested lists)."""
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flatten(item)
        else:
            yield item


def extract_session(zarray: Any, axis: Any = None, keepdims: Any = None) -> Session:
    """The session of the floe store a zarr array (or group) was opened on:
    ``zarray.store.session``. ``axis`` and ``keepdims`` are ignored (they are there so
    the function can be a Dask reduction's ``chunk`` step). Raises ``TypeError`` when
    the array is not on a floe store.

    ```python
    from floe.distributed import extract_session

    fork = session.fork()
    array = zarr.open_array(fork.store, path="temperature")
    array[0] = 0.5  # in a worker, usually
    session.merge(extract_session(array))
    ```
    """
    session = getattr(zarray.store, "session", None)
    if not isinstance(session, Session):
        raise TypeError(
            f"extract_session needs a zarr array on a floe store, got a store of type "
            f"{type(zarray.store).__name__!r}"
        )
    return session


def merge_sessions(
    *sessions: ForkSession | list[ForkSession] | list[list[ForkSession]],
) -> ForkSession:
    """Merges forks (given as arguments or nested lists of them) into the first one,
    and returns it (Icechunk's ``merge_sessions``). The same fork object given more
    than once is merged once.

    ```python
    from floe.distributed import merge_sessions

    forks = [session.fork() for _ in range(3)]
    for row, fork in enumerate(forks):  # each fork written by its own worker
        zarr.open_array(fork.store, path="temperature")[row] = -1.0
    session.merge(merge_sessions(*forks))
    session.commit("three workers")
    ```

    A chunk that several forks wrote is not a conflict: it holds the chunk of the
    fork merged last (in argument order, nested lists flattened), as in Icechunk
    2.3.0, and the other forks' writes of that chunk are dropped. Forks that must
    all keep their writes have to write disjoint chunks (disjoint shards, for a
    sharded array).

    Raises ``TypeError`` when one of them is not a ``ForkSession`` (merge forks into a
    writable session with ``Session.merge(*forks)`` instead), ``ValueError`` when
    there is none, ``floe.ConflictError`` when forks made conflicting
    changes to nodes, such as the same array's metadata (nothing is merged then).
    """
    forks = list(_flatten(sessions))
    if not forks:
        raise ValueError("merge_sessions needs at least one ForkSession")
    for s in forks:
        if not isinstance(s, ForkSession):
            raise TypeError(
                "merge_sessions only merges ForkSession objects; "
                f"Received {type(s).__name__!r} instead. Merge forks into a writable "
                "session with Session.merge(*forks)."
            )
    first, *rest = forks
    if rest:
        first.merge(*rest)
    return first
