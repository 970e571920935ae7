"""Writing Dask arrays into a floe session from many workers, as Icechunk's
``icechunk.dask``: ``store_dask`` (``dask.array.store`` for floe stores) and
``session_merge_reduction`` (merges the forks the write tasks hand back, in a tree on
the workers).

Write into arrays opened on a fork's store (``session.fork().store``): every task
writes its blocks into its own copy of the fork (the copies travel pickled to
processes and machines, or are one shared object under the threaded scheduler), the
copies are merged pairwise up a tree of tasks (``split_every`` at a time), and the
caller gets one ``ForkSession`` to ``session.merge(...)`` and commit.

Dask blocks must not share a storage chunk of the target (a shard, for a sharded
array): a block writes whole chunks into its copy of the fork, and merging forks
that wrote the same chunk raises no error but keeps the chunk of the fork merged
last (Icechunk 2.3.0's semantics), so the other blocks' elements of that chunk would
be lost without a word. ``store_dask`` therefore refuses such a source before
anything is computed or written, whatever the scheduler (threads, processes or a
distributed cluster): ``ValueError`` naming the axis (and dimension name), the block
boundary, the chunk length and a rechunk that aligns the blocks (and likewise two
sources that would write one chunk of the same array).
``session_merge_reduction`` cannot check this (the writes already happened when it
runs): code that writes forks itself must keep the chunks they write disjoint. Needs
dask >= 2025.2.0, as Icechunk.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def _fork_of_block(
    block: Any, axis: Any = None, keepdims: Any = None, computing_meta: bool = False
) -> Any:
    """Reduction ``chunk`` step: the fork the block's write task wrote into."""
    if computing_meta:
        return _placeholder()
    return extract_session(block)


def _merge_forks(
    forks: Any, axis: Any = None, keepdims: Any = None, computing_meta: bool = False
) -> Any:
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


def _write_block(
    block: np.ndarray, target: Any, offset: tuple[int, ...], block_info: Any = None
) -> np.ndarray:
    """``store_dask``'s blockwise step: writes ``block`` into ``target`` (a zarr array
    on a fork's store) at its place in the source plus ``offset`` (elements per axis),
    and returns the fork it wrote into as a one-element object array per block (so
    Dask fuses the source's task, the write and the fork's hand-over into one task)."""
    location = block_info[0]["array-location"]
    selection = tuple(
        slice(o + start, o + stop) for o, (start, stop) in zip(offset, location, strict=False)
    )
    target[selection] = block
    out = np.empty((1,) * block.ndim, dtype=object)
    out.flat[0] = extract_session(target)
    return out


def _fork_in_block(
    block: Any, axis: Any = None, keepdims: Any = None, computing_meta: bool = False
) -> Any:
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
            out.append(
                da.Array(_without_aliases(graph, keep), tree.name, tree.chunks, dtype=tree.dtype)
            )
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


def _storage_grid(target: Any) -> list[Any]:
    """Per axis of ``target`` (a zarr array): the length of its storage chunks (of its
    shards when sharded), or, for an axis of a rectilinear grid, the tuple of its
    chunks' lengths. ``TypeError`` for a target without a chunk grid."""
    try:
        shards = getattr(target, "shards", None)
        return [int(n) for n in (shards if shards is not None else target.chunks)]
    except NotImplementedError:
        # zarr >= 3.4's rectilinear grids: no single chunk length
        sizes = getattr(target, "write_chunk_sizes", None)
        if sizes is None:
            raise
        lengths: list[int | tuple[int, ...]] = []
        for axis_sizes in sizes:
            axis_sizes = tuple(int(n) for n in axis_sizes)
            if not axis_sizes:  # an empty axis: no boundary to check
                lengths.append(1)
            elif len(set(axis_sizes[:-1])) <= 1 and axis_sizes[-1] <= axis_sizes[0]:
                lengths.append(axis_sizes[0])  # regular after all
            else:
                lengths.append(axis_sizes)
        return lengths
    except AttributeError:
        raise TypeError(
            f"store_dask writes into zarr arrays, got {type(target).__name__!r}"
        ) from None


def _sharded(target: Any) -> bool:
    """Whether ``target``'s storage chunks are shards (zarr raises
    ``NotImplementedError`` for the shard shape of a rectilinear sharded array)."""
    try:
        return getattr(target, "shards", None) is not None
    except NotImplementedError:
        return True


def _on_boundary(position: int, grid: Any) -> bool:
    """Whether ``position`` (elements along an axis) starts a storage chunk of an axis
    of ``grid`` (a chunk length, or a rectilinear axis's chunk lengths)."""
    if isinstance(grid, int):
        return position % grid == 0
    edge = 0
    for n in grid:
        if edge >= position:
            break
        edge += n
    return edge == position


def _aligned_axis(start: int, sizes: tuple[int, ...], grid: Any) -> tuple[int, ...]:
    """Block lengths for ``sum(sizes)`` elements written from ``start`` along an axis
    of ``grid`` whose internal boundaries all fall on chunk boundaries: a first block
    up to the next chunk boundary when ``start`` is inside a chunk, then blocks of
    about the current typical block length (a whole number of chunks)."""
    total = sum(sizes)
    typical = max(sizes) if sizes else 0
    out: list[int] = []
    pos = start
    end = start + total
    if isinstance(grid, int):
        step = max(1, round(typical / grid)) * grid
        head = -start % grid
        if head:
            out.append(min(head, total))
            pos += out[-1]
        while pos < end:
            out.append(min(step, end - pos))
            pos += out[-1]
        return tuple(out)
    # rectilinear: whole chunks, joined while they stay within the typical length
    edges = [0]
    for n in grid:
        edges.append(edges[-1] + n)
    cuts = [e for e in edges if start < e < end]
    block_start = start
    for i, cut in enumerate(cuts):
        nxt = cuts[i + 1] if i + 1 < len(cuts) else end
        if nxt - block_start > typical and cut > block_start:
            out.append(cut - block_start)
            block_start = cut
    out.append(end - block_start)
    return tuple(n for n in out if n)


def _tuple_expr(lengths: tuple[int, ...]) -> str:
    """``lengths`` as a short Python expression: runs of one value as ``(n,) * k``."""
    runs: list[list[int]] = []
    for n in lengths:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return " + ".join(f"({n},)" if k == 1 else f"({n},) * {k}" for n, k in runs)


def _aligned_chunks(
    source: Any, target: Any, offset: tuple[int, ...] | None = None
) -> tuple[tuple[int, ...], ...]:
    """Dask chunks for ``source`` written into ``target`` at ``offset`` (elements per
    axis, ``None``: the origin) such that no two blocks share a storage chunk (a
    shard, when sharded) of ``target``: along each axis a first block up to the
    next chunk boundary when the offset is inside a chunk, then blocks of a whole
    number of chunks close to the source's block length. Axes already aligned keep
    their chunks. ``source.rechunk(_aligned_chunks(source, target, offset))`` is what
    ``store_dask`` accepts."""
    offset = tuple(offset or ()) + (0,) * (source.ndim - len(tuple(offset or ())))
    grid = _storage_grid(target)
    return tuple(
        sizes if _misaligned(o, sizes, g) is None else _aligned_axis(o, sizes, g)
        for o, sizes, g in zip(offset, source.chunks, grid, strict=False)
    )


def _misaligned(start: int, sizes: tuple[int, ...], grid: Any) -> int | None:
    """The first boundary between two non-empty blocks of lengths ``sizes`` written
    from ``start`` that is not a chunk boundary of ``grid``; ``None`` when all are."""
    nonempty = [n for n in sizes if n]
    pos = start
    for n in nonempty[:-1]:
        pos += n
        if not _on_boundary(pos, grid):
            return pos
    return None


def _check_blocks_aligned(
    source: Any, target: Any, offset: tuple[int, ...] | None = None, *, what: str = "the source"
) -> None:
    """Raises ``ValueError`` when two blocks of ``source`` (a Dask array) written into
    ``target`` (a zarr array) at ``offset`` would share a storage chunk (a shard,
    when sharded): the message names the first such axis (and its dimension name),
    the boundary in the target's coordinates, the chunk length and the aligned
    chunking (``_aligned_chunks``) to rechunk to. Nothing is computed."""
    offset = tuple(offset or ()) + (0,) * (source.ndim - len(tuple(offset or ())))
    grid = _storage_grid(target)
    if len(grid) != source.ndim:
        raise ValueError(f"store_dask: {what} has {source.ndim} dimensions, its target {len(grid)}")
    bad = [
        (axis, _misaligned(o, sizes, g))
        for axis, (o, sizes, g) in enumerate(zip(offset, source.chunks, grid, strict=False))
    ]
    bad = [(axis, pos) for axis, pos in bad if pos is not None]
    if not bad:
        return
    axis, pos = bad[0]
    g = grid[axis]
    names = getattr(getattr(target, "metadata", None), "dimension_names", None)
    dim = f" (dimension {names[axis]!r})" if names and names[axis] is not None else ""
    kind = "shard" if _sharded(target) else "chunk"
    if isinstance(g, int):
        where = (
            f"element {pos} of the target along axis {axis}{dim}, inside a {kind} "
            f"of {g} elements ({kind}s start at multiples of {g})"
        )
    else:
        where = (
            f"element {pos} of the target along axis {axis}{dim}, inside a {kind} "
            f"of its rectilinear grid (chunk lengths {g!r})"
        )
    fix = {a: _aligned_axis(offset[a], source.chunks[a], grid[a]) for a, _ in bad}
    rechunk = ", ".join(f"{a}: {_tuple_expr(c)}" for a, c in fix.items())
    path = getattr(target, "path", None)
    name = f" {path!r}" if path else ""
    if isinstance(g, int):
        rule = f"at a multiple of {g} in the target"
    else:
        rule = "on a chunk boundary of the target"
    if any(offset):
        rule += f" (the source starts at element {list(offset)} of the target)"
    raise ValueError(
        f"store_dask: the Dask blocks of {what} would share a {kind} of the target"
        f"{name}: a block boundary falls at {where}. Blocks writing one {kind} each "
        f"write it into their own fork and the merge keeps only one of them, so "
        f"nothing was written. Rechunk the source so that every boundary between its "
        f"blocks falls {rule}, e.g. source.rechunk({{{rechunk}}})"
    )


def _chunk_index(position: int, grid: Any) -> int:
    """The index of the storage chunk of an axis of ``grid`` holding element
    ``position``."""
    if isinstance(grid, int):
        return position // grid
    edge = 0
    for index, n in enumerate(grid):
        edge += n
        if position < edge:
            return index
    return len(grid)


def _check_sources_disjoint(
    sources: list[Any], targets: list[Any], offsets: list[tuple[int, ...]]
) -> None:
    """Raises ``ValueError`` when two sources write a storage chunk (shard) of the
    same array (two targets of one path): the forks of their blocks would merge into
    one of the writes of that chunk."""
    boxes: dict[str, list[tuple[int, list[tuple[int, int]]]]] = {}
    for index, (source, target, offset) in enumerate(zip(sources, targets, offsets, strict=True)):
        if any(n == 0 for n in source.shape):
            continue
        grid = _storage_grid(target)
        box = [
            (_chunk_index(o, g), _chunk_index(o + n - 1, g))
            for o, n, g in zip(offset, source.shape, grid, strict=False)
        ]
        path = str(getattr(target, "path", ""))
        for other, other_box in boxes.get(path, []):
            if all(a <= d and c <= b for (a, b), (c, d) in zip(box, other_box, strict=False)):
                common = [max(a, c) for (a, _), (c, _) in zip(box, other_box, strict=False)]
                raise ValueError(
                    f"store_dask: sources {other} and {index} both write storage chunk "
                    f"{common} of the target {path!r} (their regions start at "
                    f"{list(offsets[other])} and {list(offset)}): the merge would keep "
                    f"only one source's write of it, so nothing was written. Write each "
                    f"chunk from one source only (regions that meet on chunk boundaries)."
                )
        boxes.setdefault(path, []).append((index, box))


def _check_dask_version() -> None:
    from packaging.version import Version

    if Version(dask.__version__) < Version(MIN_DASK_VERSION):
        raise ValueError(
            f"writing to floe with Dask needs dask>={MIN_DASK_VERSION}, found {dask.__version__}"
        )


def session_merge_reduction(
    arrays: Any, *, split_every: int | None = None, **_ignored: Any
) -> ForkSession:
    """Merges the forks behind the blocks of ``arrays`` (Dask arrays whose blocks are
    zarr arrays on fork stores, as ``dask.array.store(..., return_stored=True,
    load_stored=False)`` returns them) with a tree reduction on the Dask workers,
    ``split_every`` forks per task (as Dask's reductions take it: an ``int`` spread
    over the axes, or a ``dict`` per axis; ``None``: about ``MERGE_FAN_IN`` along the
    axes with more than one block); computes it and
    returns the one merged ``ForkSession``. Other keywords are accepted and ignored
    (Icechunk passes ``dask.array.store``'s through).

    The forks are merged as ``Session.merge`` merges them: a chunk that several
    blocks wrote holds the write of the fork merged last (as Icechunk 2.3.0), the
    other writes of that chunk are dropped without an error. The writes happened
    before this runs, so nothing here can refuse them: write blocks that never share
    a storage chunk (a shard, for a sharded array), or use ``store_dask``, which
    checks before it writes. Raises ``TypeError("Expected a dask array ...")`` for
    anything but Dask arrays, ``floe.ConflictError`` when the forks made conflicting
    changes to nodes (such as the same array's metadata).

    ```python
    import dask.array as da
    from floe.dask import session_merge_reduction

    fork = session.fork()
    target = zarr.open_array(fork.store, path="temperature")
    source = da.ones((4, 10), chunks=(1, 10), dtype="f4")  # one block per chunk
    stored = da.store(
        source, target, lock=False, compute=False, return_stored=True, load_stored=False
    )
    session.merge(session_merge_reduction(stored))
    session.commit("ones, written by Dask")
    ```
    """
    if not isinstance(arrays, (list, tuple)):
        arrays = [arrays]
    for arr in arrays:
        if not isinstance(arr, da.Array):
            raise TypeError(f"Expected a dask array, received {type(arr)!r}")
    return _computed_merge([_merge_tree(arr, _fork_of_block, split_every) for arr in arrays])


def store_dask(
    *,
    sources: list[Any],
    targets: list[Any],
    regions: list[tuple[slice, ...]] | tuple[slice, ...] | None = None,
    split_every: int | None = None,
    **store_kwargs: Any,
) -> ForkSession:
    """``dask.array.store`` for floe: writes each of ``sources`` (Dask arrays) into
    the zarr array of ``targets`` at the same position (optionally at ``regions``),
    eagerly, and returns the fork all the write tasks' forks merged into (see
    ``session_merge_reduction``; ``split_every`` forks per merge task). The targets
    must be opened on a fork's store (``session.fork().store``); merge the result
    into the session with ``session.merge(fork)``, then commit (Icechunk's
    ``icechunk.dask.store_dask``).

    ```python
    import dask.array as da
    from floe.dask import store_dask

    source = da.random.random((1000, 1000), chunks=(100, 1000))  # blocks on chunks
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(1000, 1000), chunks=(100, 1000),
                      dtype="f8")
    fork = session.fork()
    target = zarr.open_array(fork.store, path="x")
    session.merge(store_dask(sources=[source], targets=[target]))
    session.commit("write x with Dask")
    ```

    Each block is one task that computes it, writes it and hands its fork to the
    merge tree (``dask.array.store(..., return_stored=True, load_stored=False)``
    followed by ``session_merge_reduction`` takes two tasks per block, and 2.3x the
    merge tasks by default), without a lock. ``store_kwargs`` are accepted for
    ``dask.array.store``'s signature and unused; ``compute``, ``return_stored``,
    ``load_stored`` and ``lock`` are set here and must not be given (``TypeError``).
    ``regions``: one tuple of step-1 slices for every target, or a list with one per
    target (``None``: the whole target).

    Every boundary between two blocks of a source must fall on a boundary between
    storage chunks of its target (shards, for a sharded array): along each axis, the
    source's block boundaries plus the region's start must be multiples of the chunk
    length (the last block may end anywhere). Blocks sharing a chunk would each write
    the whole chunk into their own fork, and the merge keeps only the fork merged
    last, losing the others' elements; so a misaligned source is refused before
    anything is computed or written, under every scheduler, with a ``ValueError``
    that names the axis (and the target's dimension name), the boundary, the chunk
    length and a ``rechunk`` that aligns it. This holds even when a caller turned
    its own check off (``to_floe(..., safe_chunks=False)``). For the same reason two
    sources must not write the same chunk of one array (``ValueError`` too).

    Raises ``TypeError`` for a source that is not a Dask array or a target without a
    chunk grid, ``ValueError`` for dask older than 2025.2.0, different numbers of
    sources, targets and regions, a stepped region, blocks that would share a chunk,
    or sources that would write one chunk of the same array; ``floe.ConflictError``
    when forks made conflicting changes to nodes (such as the same array's metadata).
    """
    _check_dask_version()
    fixed = {"compute", "return_stored", "load_stored", "lock"} & set(store_kwargs)
    if fixed:
        raise TypeError(f"store_dask sets {sorted(fixed)} itself")
    if len(sources) != len(targets):
        raise ValueError(
            f"Different number of sources [{len(sources)}] and targets [{len(targets)}]"
        )
    per_source: Sequence[tuple[slice, ...] | None] = (
        [regions] * len(sources) if regions is None or isinstance(regions, tuple) else regions
    )
    if len(per_source) != len(sources):
        raise ValueError(
            f"Different number of sources [{len(sources)}] and regions [{len(per_source)}]"
        )
    offsets = []
    for index, (source, target, given) in enumerate(zip(sources, targets, per_source, strict=True)):
        if not isinstance(source, da.Array):
            raise TypeError(f"Expected a dask array, received {type(source)!r}")
        region = tuple(given or ())
        if any(r.step not in (None, 1) for r in region):
            raise ValueError(f"store_dask writes regions of step-1 slices, got {region!r}")
        offset = tuple(r.start or 0 for r in region) + (0,) * (source.ndim - len(region))
        _check_blocks_aligned(source, target, offset, what=f"source {index}")
        offsets.append(offset)
    _check_sources_disjoint(sources, targets, offsets)
    # Every source checked before any is computed: a refusal writes nothing.
    trees = []
    for source, target, offset in zip(sources, targets, offsets, strict=True):
        forks = da.map_blocks(
            _write_block,
            source,
            target=target,
            offset=offset,
            chunks=tuple((1,) * n for n in source.numblocks),
            dtype=object,
            meta=np.empty((0,) * source.ndim, dtype=object),
            token="floe-write",
        )
        trees.append(_merge_tree(forks, _fork_in_block, split_every))
    return _computed_merge(trees)
