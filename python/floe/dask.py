"""Writing Dask arrays into a floe session from many workers, as Icechunk's
``icechunk.dask``: ``store_dask`` (``dask.array.store`` for floe stores) and
``session_merge_reduction`` (merges the forks the write tasks hand back, in a tree on
the workers).

Write into arrays opened on a fork's store (``session.fork().store``): every task
writes its blocks into its own copy of the fork (the copies travel pickled to
processes and machines, or are one shared object under the threaded scheduler), the
copies are merged pairwise up a tree of tasks (``split_every`` at a time), and the
caller gets one ``ForkSession`` to ``session.merge(...)`` and commit. Blocks that write
the same Zarr chunk conflict: the merge raises ``floe.ConflictError`` (Dask chunks
must not share a Zarr chunk). Needs dask >= 2025.2.0, as Icechunk.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np

from floe.distributed import extract_session, merge_sessions
from floe.session import ForkSession

__all__ = ["session_merge_reduction", "store_dask"]

#: The oldest Dask whose ``store(..., return_stored=True, load_stored=False)`` hands
#: back the written targets (Icechunk's requirement too).
MIN_DASK_VERSION = "2025.2.0"


def _placeholder() -> np.ndarray:
    """What the reduction steps return while Dask computes their output type."""
    return np.array([object()], dtype=object)


def _fork_of_block(block: Any, axis: Any = None, keepdims: Any = None,
                   computing_meta: bool = False) -> Any:
    """Reduction ``chunk`` step: the fork the block's write task wrote into."""
    if computing_meta:
        return _placeholder()
    return extract_session(block)


def _merge_forks(forks: Any, axis: Any = None, keepdims: Any = None,
                 computing_meta: bool = False) -> Any:
    """Reduction ``combine``/``aggregate`` step: the forks (nested lists) merged into
    one."""
    if computing_meta:
        return _placeholder()
    return merge_sessions(forks)


def _check_dask_version() -> None:
    from packaging.version import Version

    if Version(dask.__version__) < Version(MIN_DASK_VERSION):
        raise ValueError(
            f"writing to floe with Dask needs dask>={MIN_DASK_VERSION}, found {dask.__version__}"
        )


def session_merge_reduction(arrays: Any, *, split_every: int | None = None,
                            **_ignored: Any) -> ForkSession:
    """Merges the forks behind the blocks of ``arrays`` (Dask arrays whose blocks are
    zarr arrays on fork stores, as ``dask.array.store(..., return_stored=True,
    load_stored=False)`` returns them) with a tree reduction on the Dask workers,
    ``split_every`` forks per task (Dask's default when ``None``); computes it and
    returns the one merged ``ForkSession``. Other keywords are accepted and ignored
    (Icechunk passes ``dask.array.store``'s through).

    Raises ``TypeError("Expected a dask array ...")`` for anything but Dask arrays,
    ``floe.ConflictError`` when two blocks wrote the same chunk.
    """
    if not isinstance(arrays, (list, tuple)):
        arrays = [arrays]
    for arr in arrays:
        if not isinstance(arr, da.Array):
            raise TypeError(f"Expected a dask array, received {type(arr)!r}")
    reductions = [
        da.reduction(
            arr,
            chunk=_fork_of_block,
            aggregate=_merge_forks,
            combine=_merge_forks,
            split_every=split_every,
            concatenate=False,
            keepdims=False,
            dtype=object,
            meta=_placeholder(),
            name="floe-merge-forks",
        )
        for arr in arrays
    ]
    computed = dask.compute(*reductions)
    return merge_sessions(*(np.asarray(r, dtype=object).ravel().tolist() for r in computed))


def store_dask(*, sources: list[Any], targets: list[Any],
               regions: list[tuple[slice, ...]] | None = None,
               split_every: int | None = None, **store_kwargs: Any) -> ForkSession:
    """``dask.array.store`` for floe: writes each of ``sources`` (Dask arrays) into
    the zarr array of ``targets`` at the same position (optionally at ``regions``),
    eagerly, and returns the fork all the write tasks' forks merged into (see
    ``session_merge_reduction``; ``split_every`` forks per merge task). The targets
    must be opened on a fork's store (``session.fork().store``); merge the result
    into the session with ``session.merge(fork)``, then commit.

    ``store_kwargs`` go to ``dask.array.store``; ``compute``, ``return_stored``,
    ``load_stored`` and ``lock`` are set here and must not be given. Raises
    ``ValueError`` for dask older than 2025.2.0, ``floe.ConflictError`` when two
    blocks wrote the same chunk.
    """
    _check_dask_version()
    fixed = {"compute", "return_stored", "load_stored", "lock"} & set(store_kwargs)
    if fixed:
        raise TypeError(f"store_dask sets {sorted(fixed)} itself")
    stored = da.store(
        sources=sources,
        targets=targets,
        regions=regions,
        compute=False,
        return_stored=True,
        load_stored=False,
        lock=False,
        **store_kwargs,
    )
    return session_merge_reduction(stored, split_every=split_every)
