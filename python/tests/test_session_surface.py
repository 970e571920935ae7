"""Icechunk's session surface on floe: mode, chunk_type, chunk_coordinates,
get_node_id, flush, amend(allow_empty=), forks of read-only sessions, and the
chunk moves shift_array and reindex_array (refs move, bytes are not copied)."""

import asyncio

import numpy as np
import pytest
import zarr

import floe


def _repo_with_array(data, chunks=(2,), fill_value=-1, config=None):
    repo = floe.Repository.create(floe.in_memory_storage(), config=config)
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="a", shape=(len(data),), chunks=chunks, dtype="i4",
                      fill_value=fill_value)
    arr = zarr.open_array(s.store, path="a")
    for i, v in enumerate(data):
        if v is not None:
            arr[i] = v
    s.commit("data")
    return repo


def test_modes():
    repo = _repo_with_array([1, 2])
    s = repo.writable_session("main")
    assert s.mode == floe.SessionMode.writable
    assert repo.readonly_session("main").mode == floe.SessionMode.readonly
    assert repo.rearrange_session("main").mode == floe.SessionMode.rearrange
    zarr.open_group(s.store).attrs["x"] = 1
    s.commit("c")
    assert s.mode == floe.SessionMode.readonly
    with pytest.raises(floe.SessionStateError, match="cannot fork a read-only session"):
        s.fork()


def test_chunk_type_coordinates_and_node_id():
    config = floe.RepositoryConfig(inline_chunk_threshold_bytes=100)
    repo = _repo_with_array([1, 2, None, None, 5, 6], chunks=(1,), config=config)
    s = repo.writable_session("main")
    assert s.chunk_type("/a", [0]) == floe.ChunkType.inline
    assert s.chunk_type("/a", [2]) == floe.ChunkType.uninitialized
    zarr.create_array(s.store, name="b", shape=(64,), chunks=(64,), dtype="i8",
                      compressors=None)[:] = 1
    assert s.chunk_type("/b", [0]) == floe.ChunkType.native

    async def coords():
        return [c async for c in s.chunk_coordinates("/a")]

    assert asyncio.run(coords()) == [(0,), (1,), (4,), (5,)]
    node = s.get_node_id("/a")
    assert len(node) == 13 and node != s.get_node_id("/")
    with pytest.raises(floe.NodeNotFoundError):
        s.get_node_id("/nope")
    with pytest.raises(floe.InvalidInputError):
        s.chunk_type("a", [0])


def test_flush_writes_a_snapshot_no_branch_points_to():
    repo = _repo_with_array([1, 2])
    tip = repo.lookup_branch("main")
    s = repo.writable_session("main")
    zarr.open_array(s.store, path="a")[:] = [7, 8]
    sid = s.flush("detached")
    assert s.read_only and repo.lookup_branch("main") == tip
    assert repo.lookup_snapshot(sid).parent_id == tip
    repo.reset_branch("main", sid)
    arr = zarr.open_array(repo.readonly_session("main").store, path="a")
    np.testing.assert_equal(arr[:], [7, 8])


def test_a_fork_cannot_flush_and_its_base_flushes_what_it_merged():
    repo = _repo_with_array([1, 2])
    tip = repo.lookup_branch("main")
    s = repo.writable_session("main")
    fork = s.fork()
    zarr.open_array(fork.store, path="a")[:] = [5, 6]
    with pytest.raises(floe.SessionStateError, match="cannot flush a forked session"):
        fork.flush("from the fork")
    s.merge(fork)
    sid = s.flush("merged")
    assert repo.lookup_branch("main") == tip
    arr = zarr.open_array(repo.readonly_session(snapshot_id=sid).store, path="a")
    np.testing.assert_equal(arr[:], [5, 6])


def test_amend_allow_empty():
    repo = _repo_with_array([1, 2])
    s = repo.writable_session("main")
    with pytest.raises(floe.SessionStateError):
        s.amend("nothing")
    sid = s.amend("new message", allow_empty=True)
    assert repo.lookup_snapshot(sid).message == "new message"


def test_shift_moves_chunks_and_clears_vacated_positions():
    repo = _repo_with_array(list(range(10)))
    s = repo.writable_session("main")
    arr = zarr.open_array(s.store, path="a")
    s.shift_array("/a", (-2,))
    np.testing.assert_equal(arr[:], [4, 5, 6, 7, 8, 9, -1, -1, -1, -1])
    s.shift_array("/a", (3,))
    np.testing.assert_equal(arr[:], [-1] * 6 + [4, 5, 6, 7])
    sid = s.commit("shifted")
    arr = zarr.open_array(repo.readonly_session(snapshot_id=sid).store, path="a")
    np.testing.assert_equal(arr[:], [-1] * 6 + [4, 5, 6, 7])


def test_shift_moves_refs_without_new_chunk_objects():
    repo = _repo_with_array(list(range(8)), config=floe.RepositoryConfig(
        inline_chunk_threshold_bytes=0))
    before = repo.chunk_storage_stats().native_bytes
    s = repo.writable_session("main")
    s.shift_array("/a", (1,))
    s.commit("shift")
    # the shifted refs point to the same chunk objects: nothing new was stored
    assert repo.chunk_storage_stats().native_bytes == before


def test_reindex_forward_only_keeps_stale_chunks_and_backward_clears_them():
    repo = _repo_with_array([1, None, 3], chunks=(1,))

    def fwd(i):
        return [i[0] + 1] if i[0] + 1 < 3 else None

    def bwd(i):
        return [i[0] - 1] if i[0] >= 1 else None

    s = repo.writable_session("main")
    s.reindex_array("/a", fwd)
    np.testing.assert_equal(zarr.open_array(s.store, path="a")[:], [1, 1, 3])
    s = repo.writable_session("main")
    s.reindex_array("/a", fwd, bwd)
    np.testing.assert_equal(zarr.open_array(s.store, path="a")[:], [-1, 1, -1])


def test_reindex_errors_stage_nothing():
    repo = _repo_with_array([1, 2, 3], chunks=(1,))
    s = repo.writable_session("main")

    def boom(i):
        if i[0] == 2:
            raise ZeroDivisionError("map failed")
        return [i[0]]

    with pytest.raises(ZeroDivisionError):
        s.reindex_array("/a", boom)
    with pytest.raises(floe.InvalidInputError):
        s.reindex_array("/a", lambda i: [i[0] + 10])
    assert not s.has_uncommitted_changes
