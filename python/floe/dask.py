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


#: Forks merged per merge task when ``split_every`` is not given: the fan-in over all
#: axes of the block grid that hold more than one block. Dask's own default (16 as
#: ``16 ** (1 / ndim)`` per axis) merges 4 at a time along the one axis a typical
#: dataset variable is chunked on, which at stop 39 made 1,024 blocks 1,000 merge
#: tasks and 600 transfers; 16 measured fastest of 4, 8, 16 and 32 there
#: (``benches/compare_pipeline.py``, Dask row).
MERGE_FAN_IN = 16


def _default_split_every(arr: Any) -> dict[int, int]:
    """``split_every`` per axis for merging the forks of ``arr``'s blocks: a product
    of about ``MERGE_FAN_IN`` over the axes with more than one block."""
    multi = [axis for axis, n in enumerate(arr.numblocks) if n > 1]
    per_axis = max(2, round(MERGE_FAN_IN ** (1 / max(1, len(multi)))))
    return {axis: per_axis for axis in range(arr.ndim)}


def _write_block(block: np.ndarray, target: Any, offset: tuple[int, ...],
                 block_info: Any = None) -> np.ndarray:
    """``store_dask``'s blockwise step: writes ``block`` into ``target`` (a zarr array
    on a fork's store) at its place in the source plus ``offset`` (elements per axis),
    and returns the fork it wrote into as a one-element object array per block (so
    Dask fuses the source's task, the write and the fork's hand-over into one task)."""
    location = block_info[0]["array-location"]
    selection = tuple(slice(o + start, o + stop) for o, (start, stop) in zip(offset, location))
    target[selection] = block
    out = np.empty((1,) * block.ndim, dtype=object)
    out.flat[0] = extract_session(target)
    return out


def _fork_in_block(block: Any, axis: Any = None, keepdims: Any = None,
                   computing_meta: bool = False) -> Any:
    """Reduction ``chunk`` step over ``_write_block``'s output: the fork it holds."""
    if computing_meta:
        return _placeholder()
    return block.flat[0]


def _merge_tree(arr: Any, chunk: Any, split_every: Any) -> Any:
    """A tree reduction over ``arr``'s blocks: ``chunk`` per block, then
    ``_merge_forks`` on ``split_every`` results at a time (about ``MERGE_FAN_IN``
    when ``None``)."""
    return da.reduction(
        arr,
        chunk=chunk,
        aggregate=_merge_forks,
        combine=_merge_forks,
        split_every=_default_split_every(arr) if split_every is None else split_every,
        concatenate=False,
        keepdims=False,
        dtype=object,
        meta=_placeholder(),
        name="floe-merge-forks",
    )


def _without_aliases(graph: dict, keep: set) -> dict:
    """``graph`` (key -> task) with its ``Alias`` tasks (a key that only names another
    task's result) left out, the tasks that used them pointed at their targets; aliases
    whose key is in ``keep`` (the result's keys) stay."""
    from dask._task_spec import Alias

    targets = {k: t.target for k, t in graph.items() if isinstance(t, Alias) and k not in keep}
    for k in list(targets):
        seen = {k}
        while targets[k] in targets and targets[k] not in seen:  # chains of aliases
            seen.add(targets[k])
            targets[k] = targets[targets[k]]
        if targets[k] not in graph or targets[k] in targets:
            del targets[k]  # a target outside the graph, or a cycle: left as it is
    if not targets:
        return graph
    lean = {}
    for k, t in graph.items():
        if k in targets:
            continue
        lean[k] = t.substitute(targets) if t.dependencies & targets.keys() else t
    return lean


def _lean(reductions: list[Any]) -> list[Any] | None:
    """The merge trees, optimized as ``dask.compute`` would and without the ``Alias``
    tasks Dask's linear fusion leaves under the old keys of every fused task (the
    block's source, its write and the hand-over of its fork are one task; its old key
    is one more task for the scheduler). Those were 1,024 of the 2,120 tasks of a
    1,024-block write, and dropping them took the Dask row of
    ``benches/compare_pipeline.py`` from 10.0 s to 7.2 s on 2 cores (stop 42).
    ``None`` when this Dask's graphs are not the task-spec graphs this was written
    for: the caller computes the trees as they are."""
    try:
        optimized = dask.optimize(*reductions)
        out = []
        for tree in optimized:
            if not isinstance(tree, da.Array):
                return None
            graph = dict(tree.__dask_graph__())
            keep = set(dask.core.flatten(tree.__dask_keys__()))
            out.append(da.Array(_without_aliases(graph, keep), tree.name, tree.chunks,
                                dtype=tree.dtype))
        return out
    except (ImportError, AttributeError, TypeError):
        return None


def _computed_merge(reductions: list[Any]) -> ForkSession:
    """Computes the merge trees (on the current scheduler: a distributed ``Client``'s
    cluster, or Dask's threads) and merges their roots into one fork."""
    lean = _lean(reductions)
    if lean is None:
        computed = dask.compute(*reductions)
    else:
        computed = dask.compute(*lean, optimize_graph=False)
    return merge_sessions(*(np.asarray(r, dtype=object).ravel().tolist() for r in computed))


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
    ``split_every`` forks per task (as Dask's reductions take it: an ``int`` spread
    over the axes, or a ``dict`` per axis; ``None``: about ``MERGE_FAN_IN`` along the
    axes with more than one block); computes it and
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
    return _computed_merge([_merge_tree(arr, _fork_of_block, split_every) for arr in arrays])


def store_dask(*, sources: list[Any], targets: list[Any],
               regions: list[tuple[slice, ...]] | None = None,
               split_every: int | None = None, **store_kwargs: Any) -> ForkSession:
    """``dask.array.store`` for floe: writes each of ``sources`` (Dask arrays) into
    the zarr array of ``targets`` at the same position (optionally at ``regions``),
    eagerly, and returns the fork all the write tasks' forks merged into (see
    ``session_merge_reduction``; ``split_every`` forks per merge task). The targets
    must be opened on a fork's store (``session.fork().store``); merge the result
    into the session with ``session.merge(fork)``, then commit.

    Each block is one task that computes it, writes it and hands its fork to the
    merge tree (``dask.array.store(..., return_stored=True, load_stored=False)``
    followed by ``session_merge_reduction`` takes two tasks per block, and 2.3x the
    merge tasks by default), without a lock. ``store_kwargs`` are accepted for
    ``dask.array.store``'s signature and unused; ``compute``, ``return_stored``,
    ``load_stored`` and ``lock`` are set here and must not be given (``TypeError``).
    ``regions``: one tuple of step-1 slices for every target, or a list with one per
    target (``None``: the whole target). Raises ``TypeError`` for a source that is
    not a Dask array, ``ValueError`` for dask older than 2025.2.0, different numbers
    of sources, targets and regions or a stepped region, ``floe.ConflictError`` when
    two blocks wrote the same chunk.
    """
    _check_dask_version()
    fixed = {"compute", "return_stored", "load_stored", "lock"} & set(store_kwargs)
    if fixed:
        raise TypeError(f"store_dask sets {sorted(fixed)} itself")
    if len(sources) != len(targets):
        raise ValueError(f"Different number of sources [{len(sources)}] and targets "
                         f"[{len(targets)}]")
    if regions is None or isinstance(regions, tuple):
        regions = [regions] * len(sources)
    if len(regions) != len(sources):
        raise ValueError(f"Different number of sources [{len(sources)}] and regions "
                         f"[{len(regions)}]")
    trees = []
    for source, target, region in zip(sources, targets, regions):
        if not isinstance(source, da.Array):
            raise TypeError(f"Expected a dask array, received {type(source)!r}")
        region = tuple(region or ())
        if any(r.step not in (None, 1) for r in region):
            raise ValueError(f"store_dask writes regions of step-1 slices, got {region!r}")
        offset = tuple(r.start or 0 for r in region) + (0,) * (source.ndim - len(region))
        forks = da.map_blocks(
            _write_block, source, target=target, offset=offset,
            chunks=tuple((1,) * n for n in source.numblocks), dtype=object,
            meta=np.empty((0,) * source.ndim, dtype=object), token="floe-write",
        )
        trees.append(_merge_tree(forks, _fork_in_block, split_every))
    return _computed_merge(trees)
