"""Virtual chunks, as Icechunk's ``icechunk.virtual``: ``VirtualChunkSpec`` (one ref for
``store.set_virtual_refs``) and ``VirtualChunkContainer`` (a URL prefix and the store
its objects are read through, set with ``RepositoryConfig.set_virtual_chunk_container``).

A virtual ref makes a chunk of a Zarr array *be* bytes ``offset..offset+length`` of
an object outside the repository (a NetCDF4/HDF5 file on local disk, S3 or HTTP),
optionally pinned to the object's ETag or last-modified time. It is read only through
a container of the repository's configuration whose prefix the reader authorized with
``Repository.open(..., authorize_virtual_chunk_access={prefix: None})``; other reads
raise ``FloeError`` naming the prefix to authorize.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from floe._floe import VirtualChunkSpec
from floe._floe import _set_virtual_ref as _native_set_virtual_ref
from floe._floe import _set_virtual_refs as _native_set_virtual_refs
from floe._floe import _set_virtual_refs_arr as _native_set_virtual_refs_arr
from floe.config import VirtualChunkContainer

if TYPE_CHECKING:
    import datetime

__all__ = ["VirtualChunkContainer", "VirtualChunkSpec"]


def _u64_bytes(name: str, values: Any) -> bytes:
    """``values`` (a numpy array or a sequence of ints) as little-endian ``uint64``
    bytes: one buffer, no Python object per ref on the native side. Raises
    ``ValueError`` for negative values or more than one dimension."""
    import numpy as np

    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
        raise ValueError(f"{name} must not be negative")
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype="<u8").tobytes()


def set_virtual_ref(
    session: Any,
    key: str,
    location: str,
    offset: int,
    length: int,
    checksum: str | datetime.datetime | None,
    validate_container: bool,
) -> None:
    """See ``FloeStore.set_virtual_ref``."""
    _native_set_virtual_ref(
        session._native, key, location, offset, length, checksum, validate_container
    )


def set_virtual_refs(
    session: Any, array_path: str, chunks: list[VirtualChunkSpec], validate_containers: bool
) -> list[tuple[int, ...]] | None:
    """See ``FloeStore.set_virtual_refs``."""
    failed = _native_set_virtual_refs(
        session._native, array_path, list(chunks), validate_containers
    )
    return None if failed is None else [tuple(i) for i in failed]


def set_virtual_refs_arr(
    session: Any,
    array_path: str,
    chunk_grid_shape: tuple[int, ...],
    locations: list[str],
    offsets: Any,
    lengths: Any,
    validate_containers: bool,
    arr_offset: tuple[int, ...] | None,
    checksum: str | datetime.datetime | None,
) -> list[tuple[int, ...]] | None:
    """See ``FloeStore.set_virtual_refs_arr``."""
    failed = _native_set_virtual_refs_arr(
        session._native,
        array_path,
        list(chunk_grid_shape),
        list(locations),
        _u64_bytes("offsets", offsets),
        _u64_bytes("lengths", lengths),
        validate_containers,
        None if arr_offset is None else list(arr_offset),
        checksum,
    )
    return None if failed is None else [tuple(i) for i in failed]
