"""A session's store is open from the start and `with_read_only` copies start closed,
as Icechunk's store: zarr opens such a copy on first use."""

import asyncio

import numpy as np
import zarr

import floe


def _repo():
    return floe.Repository.create(floe.in_memory_storage())


def test_a_sessions_store_is_open():
    repo = _repo()
    assert repo.writable_session("main").store._is_open
    assert repo.readonly_session("main").store._is_open


def test_with_read_only_copies_start_closed_and_open_on_first_use():
    session = _repo().writable_session("main")
    store = session.store
    zarr.create_array(store, name="a", shape=(4,), chunks=(2,), dtype="i4")[...] = np.arange(4)
    reader = store.with_read_only(read_only=True)
    writer = store.with_read_only(read_only=False)
    assert not reader._is_open and not writer._is_open
    assert reader.read_only and not writer.read_only
    # zarr opens the copy when it first uses it; the original stays open.
    np.testing.assert_array_equal(zarr.open_array(reader, path="a", mode="r")[...], np.arange(4))
    assert reader._is_open and store._is_open


def test_opening_an_open_store_again_is_refused_as_zarr_does():
    store = _repo().writable_session("main").store
    try:
        asyncio.run(store._open())
    except ValueError as e:
        assert "already open" in str(e)
    else:
        raise AssertionError("opening an open store again did not raise")
