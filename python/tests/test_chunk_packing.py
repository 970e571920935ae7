"""Chunk packing (``RepositoryConfig.chunk_packing``): small chunks written several to
one chunk object. The configuration's values, defaults, merging and round trip through
a repository; packing off by default for local repositories and on when enabled
(counted as chunk objects on disk); the session reads its packed chunks before the
commit; forks pickle with their packs written; Icechunk 2.x reads a packed
repository; ``Repository.compact`` rewrites chunks stored one object each into packs
in one commit, and ``discard_changes`` drops the open pack."""

import datetime
import os
import pickle
import time

import numpy as np
import pytest
import zarr

import floe
from floe import ChunkPackingConfig, ChunkPackingMode, RepositoryConfig
from oracle import run_icechunk


def _chunk_files(path) -> int:
    chunks = os.path.join(path, "chunks")
    return len(os.listdir(chunks)) if os.path.isdir(chunks) else 0


def _packing(mode=ChunkPackingMode.Enabled, **kw) -> RepositoryConfig:
    return RepositoryConfig(chunk_packing=ChunkPackingConfig(mode=mode, **kw))


def test_config_values_defaults_and_merge():
    c = ChunkPackingConfig()
    assert (c.mode, c.threshold_bytes, c.target_size_bytes) == (None, None, None)
    assert ChunkPackingMode() is ChunkPackingMode.Auto
    text = str(c)
    assert "threshold_bytes: 65536 (default)" in text
    assert "target_size_bytes: 8388608 (default)" in text
    c.mode = "disabled"
    assert c.mode is ChunkPackingMode.Disabled
    with pytest.raises(TypeError, match="mode must be a ChunkPackingMode"):
        c.mode = 3
    with pytest.raises(ValueError, match="threshold_bytes must be in"):
        ChunkPackingConfig(threshold_bytes=-1)
    base = _packing(threshold_bytes=1000)
    over = RepositoryConfig(chunk_packing=ChunkPackingConfig(target_size_bytes=5000))
    merged = base.merge(over)
    assert merged.chunk_packing == ChunkPackingConfig(
        mode=ChunkPackingMode.Enabled, threshold_bytes=1000, target_size_bytes=5000
    )
    assert pickle.loads(pickle.dumps(merged)) == merged


def test_config_is_stored_and_read_back(tmp_path):
    path = str(tmp_path / "repo")
    config = _packing(threshold_bytes=2048, target_size_bytes=1 << 20)
    floe.Repository.create(floe.local_filesystem_storage(path), config)
    stored = floe.Repository.fetch_config(floe.local_filesystem_storage(path))
    assert stored.chunk_packing == config.chunk_packing


def _write(path, config, n=50):
    repo = floe.Repository.create(floe.local_filesystem_storage(path), config)
    session = repo.writable_session("main")
    a = zarr.create_array(
        session.store,
        name="a",
        shape=(n * 1024,),
        chunks=(1024,),
        dtype="u1",
        compressors=None,
        fill_value=0,
    )
    values = (np.arange(n * 1024) % 251).astype("u1")
    a[:] = values
    return repo, session, values


def test_local_repositories_pack_only_when_enabled(tmp_path):
    off = str(tmp_path / "off")
    _, session, _ = _write(off, None)
    session.commit("one object per chunk")
    assert _chunk_files(off) == 50

    on = str(tmp_path / "on")
    repo, session, values = _write(on, _packing())
    # Read-your-writes before the commit: served from the open pack.
    a = zarr.open_array(session.store, path="a", mode="r")
    np.testing.assert_array_equal(a[:], values)
    assert _chunk_files(on) == 0
    session.commit("packed")
    assert _chunk_files(on) == 1
    reader = repo.readonly_session("main")
    np.testing.assert_array_equal(zarr.open_array(reader.store, path="a", mode="r")[:], values)


def test_small_packs_are_written_as_they_fill(tmp_path):
    path = str(tmp_path / "repo")
    # 1 KiB chunks, 10 KiB packs: 5 packs for 50 chunks.
    _, session, values = _write(path, _packing(target_size_bytes=10 * 1024))
    session.commit("packs of ten")
    assert _chunk_files(path) == 5


def test_forks_pickle_with_their_packs_written(tmp_path):
    path = str(tmp_path / "repo")
    repo, session, values = _write(path, _packing())
    session.commit("base")
    session = repo.writable_session("main")
    fork = session.fork()
    a = zarr.open_array(fork.store, path="a", mode="r+")
    a[:1024] = 7
    sent = pickle.loads(pickle.dumps(fork))
    session.merge(sent)
    session.commit("merged")
    got = zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")[:]
    assert (got[:1024] == 7).all()
    np.testing.assert_array_equal(got[1024:], values[1024:])


def test_icechunk_reads_a_packed_repository(tmp_path):
    py312 = os.environ.get("FLOE_PYTHON312") or "/opt/floe-py/py312/bin/python"
    if not os.path.exists(py312):
        if os.environ.get("CI") == "true":
            pytest.fail("a Python with icechunk 2.x is required under CI")
        pytest.skip("no Python with icechunk 2.x")
    path = str(tmp_path / "repo")
    _, session, values = _write(path, _packing())
    session.commit("packed")
    assert _chunk_files(path) == 1
    code = (
        "import sys, icechunk, zarr\n"
        "repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))\n"
        "a = zarr.open_array(repo.readonly_session('main').store, path='a', mode='r')\n"
        "print(bytes(a[:]).hex())\n"
    )
    out = run_icechunk([py312, "-c", code, path])
    assert out.stdout.strip() == values.tobytes().hex()


def test_flush_packs_writes_the_open_pack(tmp_path):
    path = str(tmp_path / "repo")
    _, session, values = _write(path, _packing())
    assert _chunk_files(path) == 0
    session.flush_packs()
    assert _chunk_files(path) == 1
    session.flush_packs()  # nothing left to write
    assert _chunk_files(path) == 1
    session.commit("already written")
    assert _chunk_files(path) == 1


def test_compact_rewrites_single_chunk_objects_into_packs(tmp_path):
    path = str(tmp_path / "repo")
    # Packing off (a local repository), 10 KiB packs when compacting.
    config = _packing(ChunkPackingMode.Disabled, target_size_bytes=10 * 1024)
    repo, session, values = _write(path, config)
    b = zarr.create_array(
        session.store, name="g/b", shape=(8 * 1024,), chunks=(1024,), dtype="u1",
        compressors=None, fill_value=0,
    )
    b[:] = 3
    base = session.commit("one object per chunk")
    assert _chunk_files(path) == 58
    # Only /g/b (a group stands for the arrays below it): 8 chunks, one pack.
    first = repo.compact("main", paths=["/g"], message="pack /g")
    assert first != base
    assert repo.lookup_branch("main") == first
    log = list(repo.ancestry(branch="main"))
    assert [s.id for s in log[:2]] == [first, base]
    assert log[0].message == "pack /g"
    assert _chunk_files(path) == 59
    # Everything else: the 50 chunks of /a into 5 packs, default message.
    second = repo.compact("main")
    assert repo.lookup_branch("main") == second
    assert next(iter(repo.ancestry(branch="main"))).message == "compact: 50 chunks into 5 packs"
    reader = repo.readonly_session("main")
    np.testing.assert_array_equal(zarr.open_array(reader.store, path="a", mode="r")[:], values)
    assert (zarr.open_array(reader.store, path="g/b", mode="r")[:] == 3).all()
    # Nothing left to do: no commit, the tip comes back.
    assert repo.compact("main") == second
    assert repo.lookup_branch("main") == second
    with pytest.raises(floe.NodeNotFoundError):
        repo.compact("main", paths=["/nope"])
    with pytest.raises(floe.RefNotFoundError):
        repo.compact("nope")
    # After expiry and garbage collection only the packs are left.
    time.sleep(0.05)
    now = datetime.datetime.now(datetime.UTC)
    repo.expire_snapshots(now)
    repo.garbage_collect(now, allow_recent_cutoff=True)
    assert _chunk_files(path) == 6
    reader = repo.readonly_session("main")
    np.testing.assert_array_equal(zarr.open_array(reader.store, path="a", mode="r")[:], values)


def test_discard_changes_drops_the_open_pack(tmp_path):
    path = str(tmp_path / "repo")
    repo, session, values = _write(path, _packing())
    session.commit("base")
    session = repo.writable_session("main")
    a = zarr.open_array(session.store, path="a", mode="r+")
    a[:1024] = 7
    session.discard_changes()
    session.flush_packs()
    assert _chunk_files(path) == 1
    a = zarr.open_array(session.store, path="a", mode="r+")
    a[1024:2048] = 8
    session.commit("after a discard")
    assert _chunk_files(path) == 2
    got = zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")[:]
    np.testing.assert_array_equal(got[:1024], values[:1024])
    assert (got[1024:2048] == 8).all()
