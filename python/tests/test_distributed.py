"""``floe.distributed`` and forks on a ``dask.distributed`` cluster of worker
processes: forks travel pickled to the workers and back, merge there in a tree
(``merge_sessions``), and the coordinator commits once."""

import os
import pickle

import numpy as np
import pytest
import zarr

import floe
from floe.distributed import extract_session, merge_sessions

if os.environ.get("CI") == "true":
    import distributed  # noqa: F401  (CI must have it: fail, never skip)
else:
    pytest.importorskip("distributed")

import dask.array as da
import distributed


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _repo(tmp_path):
    return floe.Repository.create(floe.local_filesystem_storage(str(tmp_path / "r")))


def _write_one(fork, index):
    """A worker task: writes chunk ``index`` of array ``x`` into its copy of the fork
    and sends the copy back."""
    zarr.open_array(fork.store, path="x", mode="r+")[index] = index * 10
    return fork


def test_store_dask_on_a_cluster_of_processes(tmp_path, client):
    from floe.dask import store_dask

    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    values = np.random.default_rng(1).random((40, 30))
    zarr.create_array(session.store, name="x", shape=values.shape, chunks=(10, 10),
                      dtype="f8", fill_value=0.0)
    fork = session.fork()
    merged = store_dask(sources=[da.from_array(values, chunks=(10, 10))],
                        targets=[zarr.open_array(fork.store, path="x", mode="r+")],
                        split_every=3)
    session.merge(merged)
    sid = session.commit("from the cluster")
    back = zarr.open_array(repo.readonly_session(snapshot_id=sid).store, path="x", mode="r")
    np.testing.assert_array_equal(back[...], values)


def test_forks_sent_to_workers_merge_there_and_commit_once(tmp_path, client):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(8,), chunks=(1,), dtype="i4",
                      fill_value=-1)
    fork = session.fork()
    copies = client.gather(client.map(_write_one, [fork] * 8, range(8), pure=False))
    assert all(type(c) is floe.ForkSession for c in copies)
    # Merged into one fork on a worker, then into the session here.
    one = client.submit(merge_sessions, copies[:4]).result()
    two = client.submit(merge_sessions, *copies[4:]).result()
    session.merge(merge_sessions([one], [[two]]))
    sid = session.commit("eight workers")
    assert [h.id for h in repo.ancestry(branch="main")][0] == sid
    back = zarr.open_array(repo.readonly_session("main").store, path="x", mode="r")
    np.testing.assert_array_equal(back[...], np.arange(8) * 10)


def test_merge_sessions_takes_only_forks(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    fork = session.fork()
    with pytest.raises(TypeError, match="Received 'Session'"):
        merge_sessions(session, fork)
    with pytest.raises(ValueError):
        merge_sessions()
    assert merge_sessions(fork) is fork
    # One fork object given many times (Dask's threaded scheduler) is merged once.
    zarr.create_array(fork.store, name="y", shape=(2,), chunks=(1,), dtype="i4")
    assert merge_sessions(fork, [fork, fork]) is fork
    session.merge(fork, fork)
    assert "/y" in session.status().new_arrays


def test_forks_writing_one_chunk_keep_the_last_merged(tmp_path):
    # As Icechunk 2.3.0: the fork merged last wins a chunk several forks wrote.
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(4,), chunks=(2,), dtype="i4",
                      fill_value=0)
    fork = session.fork()
    a, b = pickle.loads(pickle.dumps(fork)), pickle.loads(pickle.dumps(fork))
    zarr.open_array(a.store, path="x", mode="r+")[0] = 1
    zarr.open_array(b.store, path="x", mode="r+")[1] = 2  # the same chunk
    merged = merge_sessions(a, b)
    assert zarr.open_array(merged.store, path="x", mode="r")[...].tolist() == [0, 2, 0, 0]


def test_conflicting_forks_fail_the_merge_and_change_nothing(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(4,), chunks=(2,), dtype="i4",
                      fill_value=0)
    fork = session.fork()
    a, b = pickle.loads(pickle.dumps(fork)), pickle.loads(pickle.dumps(fork))
    zarr.open_array(a.store, path="x", mode="r+").attrs["by"] = "a"
    zarr.open_array(b.store, path="x", mode="r+").attrs["by"] = "b"  # the same node
    with pytest.raises(floe.ConflictError):
        merge_sessions(a, b)
    assert zarr.open_array(a.store, path="x", mode="r").attrs["by"] == "a"


def test_extract_session_gives_the_store_session(tmp_path):
    repo = _repo(tmp_path)
    fork = repo.writable_session("main").fork()
    arr = zarr.create_array(fork.store, name="x", shape=(2,), chunks=(1,), dtype="i4")
    assert extract_session(arr) is fork
    with pytest.raises(TypeError):
        extract_session(zarr.create_array(zarr.storage.MemoryStore(), shape=(2,), dtype="i4"))
