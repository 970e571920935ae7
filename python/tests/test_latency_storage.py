"""``LatencyStorage`` (Icechunk 2.3.0's ``icechunk.testing.LatencyStorage``): a
storage wrapper that waits before each request it forwards, adjustable at run time,
reachable as ``floe._floe.LatencyStorage`` and ``icechunk._icechunk_python`` under
the Icechunk names."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest
import zarr

import floe
from floe._floe import LatencyStorage


def test_defaults_repr_and_setters():
    s = LatencyStorage(floe.in_memory_storage())
    assert isinstance(s, floe.Storage)
    assert (s.write_latency_ms, s.read_latency_ms) == (0, 0)
    s.write_latency_ms = 7
    s.read_latency_ms = 3
    assert (s.write_latency_ms, s.read_latency_ms) == (7, 3)
    assert repr(s) == "LatencyStorage(write_latency_ms=7, read_latency_ms=3)"
    with pytest.raises(OverflowError):
        s.write_latency_ms = -1
    with pytest.raises(TypeError):
        LatencyStorage(floe.in_memory_storage(), 5)  # the latencies are keyword-only


def test_not_picklable():
    with pytest.raises(TypeError):
        pickle.dumps(LatencyStorage(floe.in_memory_storage(), write_latency_ms=1))


def test_repository_works_through_it_and_requests_wait(tmp_path):
    storage = LatencyStorage(floe.local_filesystem_storage(str(tmp_path / "repo")))
    repo = floe.Repository.create(storage)
    session = repo.writable_session("main")
    root = zarr.group(session.store)
    a = root.create_array("a", shape=(4,), chunks=(2,), dtype="i4")
    a[:] = np.arange(4)
    session.commit("one")

    # A commit writes several objects (chunks, manifest, snapshot, ref): each waits.
    storage.write_latency_ms = 60
    session = repo.writable_session("main")
    zarr.open_array(session.store, path="a")[:] = np.arange(4) * 2
    t = time.monotonic()
    session.commit("two")
    assert time.monotonic() - t >= 0.12

    storage.write_latency_ms = 0
    storage.read_latency_ms = 50
    t = time.monotonic()
    reopened = floe.Repository.open(storage)
    data = zarr.open_array(reopened.readonly_session("main").store, path="a", mode="r")[:]
    assert time.monotonic() - t >= 0.1
    np.testing.assert_array_equal(data, np.arange(4) * 2)


def test_icechunk_name():
    floe.install_as_icechunk()
    import icechunk._icechunk_python as native

    assert native.LatencyStorage is LatencyStorage
