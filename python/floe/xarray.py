"""Writing xarray Datasets (and DataArrays) backed by Dask arrays into a floe session
from many processes, with one commit: ``to_floe``, also named ``to_icechunk`` as in
Icechunk's ``icechunk.xarray``.

The session writes the metadata (and every variable that is not a Dask array) itself
through ``Dataset.to_zarr``, then forks once; ``floe.dask.store_dask`` writes every
Dask block into its own copy of that fork on the Dask workers (a fork pickles as its
storage URL and changes, no credentials) and merges the copies in a tree of tasks
(``split_every`` at a time); the session merges the result. The caller commits.

Dask blocks must not share a storage chunk (a shard, when sharded) of the variable
they are written into: merging forks that wrote the same chunk keeps the chunk of the
fork merged last (Icechunk 2.3.0's semantics), which would drop the other blocks'
elements without an error. xarray's own check (``safe_chunks=True``, the default)
refuses such blocks while ``to_floe`` writes the metadata; ``store_dask`` checks
again before any block is computed, and refuses them with ``ValueError`` even with
``safe_chunks=False``. ``align_chunks=True`` rechunks the Dask arrays onto the
storage chunks (shards) instead.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping
from typing import Any, cast

import numpy as np
import zarr

__all__ = ["to_floe", "to_icechunk"]

#: The name ``DataArray.to_zarr`` gives an unnamed DataArray's variable.
_DATAARRAY_VARIABLE = "__xarray_dataarray_variable__"


def _as_dataset(obj):
    import xarray as xr

    if isinstance(obj, xr.Dataset):
        return obj
    if isinstance(obj, xr.DataArray):
        if obj.name is None or obj.name in obj.coords or obj.name in obj.dims:
            ds = obj.to_dataset(name=_DATAARRAY_VARIABLE)
            if obj.name is not None:
                ds.attrs["__xarray_dataarray_name__"] = obj.name
            return ds
        return obj.to_dataset()
    raise TypeError(f"to_floe writes an xarray Dataset or DataArray, got {type(obj).__name__!r}")


def _auto_region(ds, store, group: str | None, region) -> dict:
    """``region`` ("auto", or a mapping with "auto" values) as explicit slices: each
    "auto" dimension's position found by matching its index coordinate against the
    stored one (a dimension without a coordinate is the whole stored extent)."""
    import xarray as xr

    wanted = dict.fromkeys(ds.dims, "auto") if region == "auto" else dict(region)
    stored = xr.open_zarr(store, group=group, consolidated=False, chunks=None)
    out = {}
    for dim, value in wanted.items():
        if value != "auto":
            out[dim] = value
            continue
        if dim not in ds.coords:
            out[dim] = slice(0, ds.sizes[dim])
            continue
        import pandas as pd

        positions = pd.Index(stored[dim].values).get_indexer(ds[dim].values)
        if (positions < 0).any():
            raise KeyError(f"region='auto': values of coordinate {dim!r} are not all stored")
        if len(positions) > 1 and (np.diff(positions) != 1).any():
            raise ValueError(f"region='auto': coordinate {dim!r} maps to a non-contiguous region")
        out[dim] = slice(int(positions[0]), int(positions[-1]) + 1)
    return out


def to_floe(
    obj,
    session,
    *,
    group: str | None = None,
    mode: str | None = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    append_dim: Hashable | None = None,
    region: Mapping[Hashable, Any] | str | None = None,
    encoding: Mapping | None = None,
    chunkmanager_store_kwargs: MutableMapping[Any, Any] | None = None,
    split_every: int | None = None,
    **to_zarr_kwargs,
) -> None:
    """Writes ``obj`` (an xarray ``Dataset`` or ``DataArray``) into ``session`` (a
    writable floe session or a ``ForkSession``) at ``group``: metadata and in-memory
    variables directly, Dask-backed variables through a fork written on the Dask
    workers (``floe.dask.store_dask``; ``split_every`` forks merged per task,
    ``chunkmanager_store_kwargs`` passed to ``dask.array.store``), merged back into
    ``session``. Commit the session afterwards (as Icechunk's ``to_icechunk``;
    ``floe.xarray.to_icechunk`` is the same function).

    ```python
    import numpy as np
    import pandas as pd
    import xarray as xr
    from floe.xarray import to_icechunk

    time = pd.date_range("2024-01-01", periods=20, freq="D")
    ds = xr.Dataset(
        {"t2m": (("time", "x"), np.random.rand(20, 4).astype("f4"))}, coords={"time": time}
    ).chunk({"time": 10})
    session = repo.writable_session("main")
    to_icechunk(ds, session, mode="w")  # Dask blocks written by the workers
    session.commit("initial data")

    later = ds.assign_coords(time=time + pd.Timedelta(days=20))
    session = repo.writable_session("main")
    to_icechunk(later, session, append_dim="time")
    session.commit("append twenty days")

    ds = xr.open_zarr(repo.readonly_session("main").store, consolidated=False)
    ```

    ``mode``, ``region`` (slices, ``"auto"``, or a mapping mixing both),
    ``append_dim``, ``encoding``, ``align_chunks`` and any other keyword mean what
    they mean for ``xarray.Dataset.to_zarr``. ``safe_chunks=True`` (the default) runs
    xarray's check that Dask blocks do not share a chunk (or shard), region edges
    included, while the metadata is written. ``safe_chunks=False`` turns off
    xarray's check only: blocks that would share a storage chunk (shard) are still
    refused by ``store_dask`` (``ValueError``) before any of them is written, because
    merging the forks that wrote them would keep one block's write of the chunk and
    drop the others'. ``align_chunks=True`` rechunks each Dask variable so that its blocks
    start on storage chunk (shard) boundaries of the stored array, region offsets
    included.

    Raises ``ValueError`` for a read-only session, for Dask blocks that would share a
    storage chunk (shard) of their array (from xarray's check, or from
    ``store_dask``'s, which names the dimension and the rechunk that aligns it: no
    Dask block is written then, while the metadata and in-memory variables
    ``to_zarr`` wrote first stay in ``session``, to commit or discard),
    ``KeyError``/``ValueError`` when ``region="auto"`` cannot place the data,
    ``floe.ConflictError`` when ``session`` and the fork made conflicting changes to
    nodes.
    """
    import dask.array as da

    from floe.dask import _aligned_chunks, store_dask

    if session.read_only:
        raise ValueError("to_floe needs a writable session")
    ds = _as_dataset(obj)
    store = session.store
    if region == "auto" or (isinstance(region, Mapping) and "auto" in region.values()):
        region = _auto_region(ds, store, group, region)
    # Where each variable starts along each dimension in the stored array.
    start: dict[Hashable, dict[Hashable, int]] = {}
    if append_dim is not None:
        existing = zarr.open_group(store=store, path=group or "", mode="r")
        for name, var in ds.variables.items():
            if append_dim in var.dims and str(name) in existing:
                axis = var.dims.index(append_dim)
                # A stored variable is an array.
                stored = cast(zarr.Array, existing[str(name)])
                start[name] = {append_dim: stored.shape[axis]}
    elif isinstance(region, Mapping):
        for name, var in ds.variables.items():
            start[name] = {d: (region[d].start or 0) for d in var.dims if d in region}

    if align_chunks:
        to_zarr_kwargs["align_chunks"] = True
    # Metadata and in-memory data through the session; Dask writes are dropped here.
    ds.to_zarr(
        store,
        group=group,
        mode=mode,
        region=region,
        append_dim=append_dim,
        encoding=encoding,
        compute=False,
        consolidated=False,
        zarr_format=3,
        safe_chunks=safe_chunks,
        **to_zarr_kwargs,
    )
    lazy = {n: v for n, v in ds.variables.items() if isinstance(v.data, da.Array)}
    if not lazy:
        return
    fork = session.fork()
    sources, targets, regions = [], [], []
    for name, var in lazy.items():
        path = f"{group.strip('/')}/{name}" if group else str(name)
        target = zarr.open_array(fork.store, path=path, mode="r+")
        data = var.data
        offsets = [start.get(name, {}).get(d, 0) for d in var.dims]
        if align_chunks:
            data = data.rechunk(_aligned_chunks(data, target, tuple(offsets)))
        sources.append(data)
        targets.append(target)
        regions.append(tuple(slice(o, o + n) for o, n in zip(offsets, var.shape, strict=True)))
    merged = store_dask(
        sources=sources,
        targets=targets,
        regions=regions,
        split_every=split_every,
        **(chunkmanager_store_kwargs or {}),
    )
    session.merge(merged)


#: Icechunk's name for ``to_floe`` (``icechunk.xarray.to_icechunk``).
to_icechunk = to_floe
