"""``FloeStore.array_chunk_iterator`` (Icechunk 2.3.0's columnar chunk-ref batches,
read by VirtualiZarr) and ``ChunkType``'s numbers."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import zarr

import floe
from floe import ChunkType


def _batches(store, path, batch_size):
    async def collect():
        return [b async for b in store.array_chunk_iterator(path, batch_size=batch_size)]

    return asyncio.run(collect())


def test_chunk_type_numbers():
    assert [int(t) for t in ChunkType] == [0, 1, 2, 3]
    assert np.uint8(3) == ChunkType.inline and ChunkType.native == 1
    assert repr(ChunkType.virtual) == "ChunkType.virtual"


def test_batches_of_mixed_refs():
    repo = floe.Repository.create(floe.in_memory_storage(), config=floe.RepositoryConfig(inline_chunk_threshold_bytes=6))
    s = repo.writable_session("main")
    g = zarr.group(s.store)
    small = g.create_array("m", shape=(2, 3), chunks=(1, 1), dtype="i4", compressors=None)
    small[0, 0] = 5  # 4 bytes: inline
    s.store.set_virtual_ref("m/c/1/2", "s3://bucket/f.nc", offset=10, length=40, validate_container=False)
    big = g.create_array("n", shape=(5,), chunks=(1,), dtype="i8", compressors=None)
    big[:] = np.arange(1, 6)  # 8 bytes each, above the threshold: native
    s.commit("refs")
    store = repo.readonly_session("main").store

    (batch,) = _batches(store, "m", 10)
    coords, kinds, paths, offsets, lengths, inlined = batch
    assert coords.dtype == np.uint32 and coords.tolist() == [[0, 0], [1, 2]]
    assert kinds.dtype == np.uint8 and kinds.tolist() == [ChunkType.inline, ChunkType.virtual]
    assert paths == ["", "s3://bucket/f.nc"]
    assert offsets.dtype == np.uint64 and offsets.tolist() == [0, 10]
    assert lengths.tolist() == [4, 40]
    assert inlined == {0: np.int32(5).tobytes()}

    batches = _batches(store, "/n", 2)
    assert [b[0].shape for b in batches] == [(2, 1), (2, 1), (1, 1)]
    assert np.concatenate([b[0] for b in batches]).ravel().tolist() == [0, 1, 2, 3, 4]
    for _, kinds, paths, _, lengths, inlined in batches:
        assert set(kinds.tolist()) == {ChunkType.native}
        assert all(p and "/" not in p for p in paths)
        assert set(lengths.tolist()) == {8} and inlined == {}


def test_empty_array_missing_array_and_bad_batch_size():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.group(s.store).create_array("e", shape=(4,), chunks=(2,), dtype="i4")
    assert _batches(s.store, "e", 3) == []
    with pytest.raises(floe.NodeNotFoundError):
        _batches(s.store, "nope", 3)
    with pytest.raises(ValueError):
        _batches(s.store, "e", 0)
