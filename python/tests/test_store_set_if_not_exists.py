"""``store.set_if_not_exists`` is one atomic step in the session, as Icechunk's: of
concurrent calls for one key exactly one stores, an existing node or chunk (also one
committed earlier) is never overwritten, and a read-only store raises
``ReadOnlyError`` whether or not the key exists."""

import asyncio

import numpy as np
import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer

import floe

PROTO = default_buffer_prototype()


def _array(session):
    return zarr.create_array(session.store, name="a", shape=(4096,), chunks=(1024,),
                             dtype="u1", compressors=None, fill_value=0)


def test_concurrent_calls_for_one_chunk_store_exactly_once():
    repo = floe.Repository.create(floe.in_memory_storage())
    session = repo.writable_session("main")
    _array(session)
    native = session.store._native

    async def race():
        return await asyncio.gather(*[
            native.set_if_not_exists("a/c/0", bytes([i]) * 1024) for i in range(8)])

    won = asyncio.run(race())
    assert won.count(True) == 1
    winner = won.index(True)
    got = asyncio.run(session.store.get("a/c/0", PROTO)).to_bytes()
    assert got == bytes([winner]) * 1024


def test_existing_nodes_and_chunks_are_kept():
    repo = floe.Repository.create(floe.in_memory_storage())
    session = repo.writable_session("main")
    arr = _array(session)
    arr[0:1024] = 7
    before = asyncio.run(session.store.get("a/zarr.json", PROTO)).to_bytes()
    group = Buffer.from_bytes(b'{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    asyncio.run(session.store.set_if_not_exists("a/zarr.json", group))
    # Not even parsed when the node exists (zarr's own store tests write any bytes).
    asyncio.run(session.store.set_if_not_exists("a/zarr.json", Buffer.from_bytes(b"1111")))
    assert asyncio.run(session.store.get("a/zarr.json", PROTO)).to_bytes() == before
    asyncio.run(session.store.set_if_not_exists("a/c/0", Buffer.from_bytes(b"\x09" * 1024)))
    session.commit("one chunk")

    # A chunk committed earlier counts as present; a missing one is stored.
    s = repo.writable_session("main")
    asyncio.run(s.store.set_if_not_exists("a/c/0", Buffer.from_bytes(b"\x01" * 1024)))
    asyncio.run(s.store.set_if_not_exists("a/c/1", Buffer.from_bytes(b"\x02" * 1024)))
    asyncio.run(s.store.set_if_not_exists("g/zarr.json", group))
    data = zarr.open_array(s.store, path="a", mode="r")[...]
    np.testing.assert_array_equal(data[:1024], 7)
    np.testing.assert_array_equal(data[1024:2048], 2)
    assert isinstance(zarr.open_group(s.store, path="g", mode="r"), zarr.Group)


def test_a_read_only_store_refuses_whether_or_not_the_key_exists():
    repo = floe.Repository.create(floe.in_memory_storage())
    session = repo.writable_session("main")
    _array(session)[...] = 1
    session.commit("data")
    ro = repo.readonly_session(branch="main").store
    for key in ["a/c/0", "a/c/9", "b/zarr.json"]:
        with pytest.raises(floe.ReadOnlyError):
            asyncio.run(ro.set_if_not_exists(key, Buffer.from_bytes(b"x")))
