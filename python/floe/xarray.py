"""Writing xarray Datasets backed by Dask arrays into a floe session, from many
processes, with one commit: ``to_floe``, also named ``to_icechunk`` as in Icechunk.

The session writes the metadata (and any variable that is not a Dask array) itself,
then forks once. Every Dask block is written by a task into its own copy of that
fork (a fork pickles as its storage URL and changes, no credentials) and returns the
fork; the session merges them all. Blocks that write the same Zarr chunk conflict:
the merge raises ``floe.ConflictError`` and nothing is merged. The caller commits.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import zarr


def _write_block(block, fork, path, offsets, block_info=None):
    location = block_info[0]["array-location"]
    selection = tuple(slice(o + a, o + b) for o, (a, b) in zip(offsets, location))
    zarr.open_array(store=fork.store, path=path, mode="r+")[selection] = block
    out = np.empty((1,) * block.ndim, dtype=object)
    out[(0,) * block.ndim] = fork
    return out


def to_floe(
    ds,
    session,
    *,
    mode: str | None = None,
    region: Mapping[Hashable, slice] | str | None = None,
    append_dim: Hashable | None = None,
    encoding: Mapping | None = None,
    **to_zarr_kwargs,
) -> None:
    """Writes ``ds`` into ``session`` (a writable floe session): metadata and
    in-memory variables directly, Dask-backed variables through forks on the Dask
    workers, merged back into ``session``. Commit the session afterwards.

    ``mode``, ``region``, ``append_dim``, ``encoding`` and any other keyword (such as
    ``safe_chunks``) mean what they mean for ``xarray.Dataset.to_zarr``. Raises ``floe.ConflictError`` when blocks wrote the
    same chunk (Dask chunks must not share a Zarr chunk).
    """
    import dask
    import dask.array as da

    if session.read_only:
        raise ValueError("to_floe needs a writable session")
    if isinstance(region, str):
        raise NotImplementedError("region='auto' is not supported: give the slices")
    store = session.store
    # Where each variable starts along each dimension in the stored array.
    start = {}
    if append_dim is not None:
        existing = zarr.open_group(store=store, mode="r")
        for name, var in ds.variables.items():
            if append_dim in var.dims and str(name) in existing:
                axis = var.dims.index(append_dim)
                start[name] = {append_dim: existing[str(name)].shape[axis]}
    elif isinstance(region, Mapping):
        for name, var in ds.variables.items():
            start[name] = {d: (region[d].start or 0) for d in var.dims if d in region}

    # Metadata and in-memory data through the session; Dask writes are dropped here.
    ds.to_zarr(
        store,
        mode=mode,
        region=region,
        append_dim=append_dim,
        encoding=encoding,
        compute=False,
        consolidated=False,
        zarr_format=3,
        **to_zarr_kwargs,
    )
    lazy = {n: v for n, v in ds.variables.items() if isinstance(v.data, da.Array)}
    if not lazy:
        return
    fork = session.fork()
    pieces = []
    for name, var in lazy.items():
        arr = var.data
        offsets = [start.get(name, {}).get(d, 0) for d in var.dims]
        pieces.append(
            da.map_blocks(
                _write_block,
                arr,
                fork=fork,
                path=str(name),
                offsets=offsets,
                dtype=object,
                chunks=tuple((1,) * len(c) for c in arr.chunks),
                meta=np.empty((0,) * arr.ndim, dtype=object),
            )
        )
    results = dask.compute(*pieces)
    forks = [f for r in results for f in np.asarray(r, dtype=object).ravel()]
    session.merge(*forks)


#: Icechunk's name for ``to_floe`` (``icechunk.xarray.to_icechunk``).
to_icechunk = to_floe
