"""Store details Icechunk 2.3.0's tests rely on: the native store's ``get(key)`` takes
the range as optional, ``getsize`` of a key no Zarr hierarchy has raises
InvalidInputError (a ValueError), and a byte range of the wrong type says
"Unexpected byte_range"."""

import asyncio

import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype

import floe


def _store():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.create_group(s.store).create_array("a", shape=(4,), chunks=(2,), dtype="i4")
    return s.store


def test_native_get_reads_whole_values_and_ranges():
    store = _store()

    async def check():
        whole = await store._store.get("a/zarr.json")
        assert whole.startswith(b"{") and len(whole) > 10
        assert await store._store.get("a/zarr.json", 1, 0, 5) == whole[:5]
        assert await store._store.get("a/zarr.json", 3, 4) == whole[-4:]
        assert await store._store.get("b/zarr.json") is None

    asyncio.run(check())


def test_getsize_of_an_invalid_key_is_invalid_input():
    store = _store()

    async def check():
        with pytest.raises(floe.InvalidInputError):
            await store.getsize("not-a-real-key")
        with pytest.raises(ValueError):
            await store.getsize("not-a-real-key")
        with pytest.raises(FileNotFoundError):
            await store.getsize("b/zarr.json")

    asyncio.run(check())


def test_a_byte_range_of_the_wrong_type_is_unexpected():
    store = _store()

    async def check():
        with pytest.raises(TypeError, match=r"Unexpected byte_range, got \(0, 2\)"):
            await store.get("a/zarr.json", default_buffer_prototype(), byte_range=(0, 2))

    asyncio.run(check())
