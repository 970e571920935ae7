"""``floe.dask``: ``store_dask`` writes Dask arrays into a fork from every task and
merges the tasks' forks in a tree (``session_merge_reduction``), under the threaded
and the process schedulers; Icechunk's module names (``icechunk.dask``) after
``install_as_icechunk``."""

import os
import pickle
import sys

import numpy as np
import pytest
import zarr

import floe

if os.environ.get("CI") == "true":
    import dask  # noqa: F401  (CI must have Dask: fail, never skip)
else:
    pytest.importorskip("dask")

import dask
import dask.array as da

from floe.dask import session_merge_reduction, store_dask


def _repo(tmp_path, spec=None):
    return floe.Repository.create(floe.local_filesystem_storage(str(tmp_path / "r")),
                                  spec_version=spec)


@pytest.mark.parametrize("scheduler", ["threads", "processes", "sync"])
@pytest.mark.parametrize("spec", [1, 2])
def test_store_dask_writes_every_block_and_merges_once(tmp_path, scheduler, spec):
    repo = _repo(tmp_path, spec)
    session = repo.writable_session("main")
    values = np.arange(60 * 40, dtype="f8").reshape(60, 40)
    zarr.create_array(session.store, name="x", shape=values.shape, chunks=(10, 10),
                      dtype="f8", fill_value=np.nan)
    fork = session.fork()
    target = zarr.open_array(fork.store, path="x", mode="r+")
    with dask.config.set(scheduler=scheduler):
        merged = store_dask(sources=[da.from_array(values, chunks=(20, 20))], targets=[target],
                            split_every=2)
    assert isinstance(merged, floe.ForkSession)
    # Nothing reached the session until the merge.
    assert np.isnan(zarr.open_array(session.store, path="x", mode="r")[0, 0])
    session.merge(merged)
    sid = session.commit("dask write")
    back = zarr.open_array(repo.readonly_session(snapshot_id=sid).store, path="x", mode="r")
    np.testing.assert_array_equal(back[...], values)
    assert [h.message for h in repo.ancestry(branch="main")][:2] == ["dask write", "Repository initialized"]


def test_store_dask_into_regions_of_two_arrays(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    for name in ("a", "b"):
        zarr.create_array(session.store, name=name, shape=(20,), chunks=(5,), dtype="i4",
                          fill_value=-1)
    session.commit("arrays")
    session = repo.writable_session("main")
    fork = session.fork()
    targets = [zarr.open_array(fork.store, path=n, mode="r+") for n in ("a", "b")]
    sources = [da.arange(10, chunks=5, dtype="i4"), da.arange(5, chunks=5, dtype="i4") + 100]
    with dask.config.set(scheduler="processes"):
        merged = store_dask(sources=sources, targets=targets,
                            regions=[(slice(10, 20),), (slice(0, 5),)])
    session.merge(merged)
    session.commit("regions")
    ro = repo.readonly_session("main").store
    np.testing.assert_array_equal(zarr.open_array(ro, path="a", mode="r")[...],
                                  [-1] * 10 + list(range(10)))
    np.testing.assert_array_equal(zarr.open_array(ro, path="b", mode="r")[...],
                                  [100, 101, 102, 103, 104] + [-1] * 15)


def test_blocks_sharing_a_zarr_chunk_keep_the_last_merged_write(tmp_path):
    # As Icechunk 2.3.0: two forks writing one chunk merge without error, and the
    # chunk holds the write of the fork merged last (each block here wrote half a
    # chunk over the fill value, so the other half reads as fill).
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(20,), chunks=(10,), dtype="i4",
                      fill_value=0)
    fork = session.fork()
    target = zarr.open_array(fork.store, path="x", mode="r+")
    with dask.config.set(scheduler="processes"):
        merged = store_dask(sources=[da.arange(20, chunks=5, dtype="i4")], targets=[target])
    session.merge(merged)
    data = zarr.open_array(session.store, path="x", mode="r")[...]
    for lo in (0, 10):
        first_half = np.r_[np.arange(lo, lo + 5), np.zeros(5)]
        second_half = np.r_[np.zeros(5), np.arange(lo + 5, lo + 10)]
        got = data[lo:lo + 10]
        assert (got == first_half).all() or (got == second_half).all(), got


def test_two_sources_of_one_shape_are_both_written(tmp_path):
    # Two Dask arrays of the same shape and chunks, each written into its own array:
    # the write tasks of one must not stand in for the other's.
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    for name in ("a", "b"):
        zarr.create_array(session.store, name=name, shape=(40,), chunks=(10,), dtype="i4",
                          fill_value=0)
    fork = session.fork()
    targets = [zarr.open_array(fork.store, path=n, mode="r+") for n in ("a", "b")]
    sources = [da.arange(40, chunks=10, dtype="i4"), da.arange(40, chunks=10, dtype="i4") * 2]
    with dask.config.set(scheduler="processes"):
        session.merge(store_dask(sources=sources, targets=targets))
    np.testing.assert_array_equal(zarr.open_array(session.store, path="a")[...], np.arange(40))
    np.testing.assert_array_equal(zarr.open_array(session.store, path="b")[...],
                                  np.arange(40) * 2)


def test_each_block_is_one_task_and_forks_merge_sixteen_at_a_time(tmp_path, monkeypatch):
    # 64 blocks along one axis: in the graph store_dask computes, one fused task per
    # block computes it, writes it and hands over its fork, and the default fan-in
    # merges the forks in 64 / 16 = 4 merge tasks and one aggregate; nothing else.
    import floe.dask as floe_dask

    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(64, 4), chunks=(1, 4), dtype="f4",
                      fill_value=0)
    target = zarr.open_array(session.fork().store, path="x", mode="r+")
    # A source that is not a blockwise layer (as random or loaded data): Dask fuses
    # each of its tasks with the block's write by linear fusion, which is what leaves
    # aliases behind.
    source = da.random.default_rng(5).random((64, 4), chunks=(1, 4), dtype="f4")
    trees = []
    computed_merge = floe_dask._computed_merge

    def capture(reductions):
        trees.extend(reductions)
        return computed_merge(reductions)

    monkeypatch.setattr(floe_dask, "_computed_merge", capture)
    computed = []
    compute = dask.compute

    def spy(*collections, **kwargs):
        computed.append((collections, kwargs))
        return compute(*collections, **kwargs)

    monkeypatch.setattr(dask, "compute", spy)
    merged = store_dask(sources=[source], targets=[target])
    # Dask's own optimization leaves an Alias under the old key of every fused task:
    # one more task each for a distributed scheduler (they show in its task stream).
    (optimized,) = dask.optimize(*trees)
    aliases = [k for k, v in dict(optimized.__dask_graph__()).items()
               if type(v).__name__ == "Alias"]
    assert len(aliases) == 64
    # What store_dask handed to Dask: the lean graph, without them, not optimized
    # again.
    ((handed,), kwargs), = computed
    assert kwargs == {"optimize_graph": False}
    graph = dict(handed.__dask_graph__())
    assert not [k for k, v in graph.items() if type(v).__name__ == "Alias"]
    names = [k[0] if isinstance(k, tuple) else k for k in graph]
    merges = [n for n in names if n.startswith(("floe-merge-forks-partial",
                                                "floe-merge-forks-aggregate"))]
    assert len(merges) == 5, sorted(set(names))
    assert len(graph) == 64 + 5, sorted(set(names))
    session.merge(merged)
    np.testing.assert_array_equal(zarr.open_array(session.store, path="x")[...],
                                  source.compute())


def test_aliases_are_dropped_and_their_users_pointed_at_the_targets():
    from dask._task_spec import Alias, Task, TaskRef

    import floe.dask as floe_dask

    def add(*xs):
        return sum(xs)

    graph = {
        "a": Task("a", add, 1, 2),
        "b": Alias("b", "a"),
        "c": Alias("c", "b"),  # a chain
        "d": Task("d", add, TaskRef("c"), TaskRef("b"), 10),
        "e": Alias("e", "elsewhere"),  # a target outside the graph stays as it is
        "out": Alias("out", "d"),  # a result's key stays
    }
    lean = floe_dask._without_aliases(graph, keep={"out"})
    assert set(lean) == {"a", "d", "e", "out"}
    assert lean["d"].dependencies == {"a"}
    assert lean["a"] is graph["a"] and lean["out"] is graph["out"]
    del lean["e"]
    assert dask.get(lean, "out") == 16
    # Nothing to drop: the same graph back.
    assert floe_dask._without_aliases({"a": graph["a"]}, keep={"a"}) == {"a": graph["a"]}


def test_default_merge_fan_in_is_spread_over_the_axes_with_blocks():
    from floe.dask import MERGE_FAN_IN, _default_split_every

    assert MERGE_FAN_IN == 16
    assert _default_split_every(da.zeros((64, 4), chunks=(1, 4))) == {0: 16, 1: 16}
    assert _default_split_every(da.zeros((8, 8), chunks=(1, 1))) == {0: 4, 1: 4}
    assert _default_split_every(da.zeros((3,), chunks=(3,))) == {0: 16}


def test_store_dask_checks_its_arguments(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    arr = zarr.create_array(session.fork().store, name="x", shape=(4,), chunks=(2,), dtype="i4")
    src = da.arange(4, chunks=2)
    with pytest.raises(ValueError, match="sources .* and targets"):
        store_dask(sources=[src, src], targets=[arr])
    with pytest.raises(ValueError, match="sources .* and regions"):
        store_dask(sources=[src], targets=[arr], regions=[None, None])
    with pytest.raises(ValueError, match="step-1"):
        store_dask(sources=[src], targets=[arr], regions=[(slice(0, 4, 2),)])
    with pytest.raises(TypeError, match="Expected a dask array"):
        store_dask(sources=[np.arange(4)], targets=[arr])


def test_session_merge_reduction_merges_what_dask_array_store_wrote(tmp_path):
    """Icechunk's two-step form: ``dask.array.store(..., return_stored=True,
    load_stored=False)`` into a fork's array, then ``session_merge_reduction`` on what
    it returns (the lean graph: no aliases of fused tasks)."""
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(40, 6), chunks=(4, 6), dtype="f8",
                      fill_value=0.0)
    target = zarr.open_array(session.fork().store, path="x", mode="r+")
    source = da.random.default_rng(3).random((40, 6), chunks=(4, 6))
    stored = da.store(source, target, compute=False, return_stored=True,
                      load_stored=False, lock=False)
    merged = session_merge_reduction(stored, split_every=4)
    assert type(merged) is floe.ForkSession
    session.merge(merged)
    sid = session.commit("stored")
    back = zarr.open_array(repo.readonly_session(snapshot_id=sid).store, path="x")
    np.testing.assert_array_equal(back[...], source.compute())


def test_session_merge_reduction_takes_only_dask_arrays():
    with pytest.raises(TypeError, match="Expected a dask array"):
        session_merge_reduction(np.arange(4), split_every=None)
    with pytest.raises(TypeError, match="Expected a dask array"):
        session_merge_reduction([da.arange(4), [1, 2]], split_every=None)


def test_store_dask_refuses_the_arguments_it_sets(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    arr = zarr.create_array(session.fork().store, name="x", shape=(4,), chunks=(2,), dtype="i4")
    with pytest.raises(TypeError, match="lock"):
        store_dask(sources=[da.arange(4, chunks=2)], targets=[arr], lock=True)


def test_fork_sessions_pickle_as_fork_sessions_and_fork_again(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(4,), chunks=(1,), dtype="i4",
                      fill_value=0)
    fork = session.fork()
    copy = pickle.loads(pickle.dumps(fork))
    assert type(copy) is floe.ForkSession and not copy.read_only and copy.branch is None
    store_copy = pickle.loads(pickle.dumps(fork.store))
    assert type(store_copy.session) is floe.ForkSession
    zarr.open_array(copy.store, path="x", mode="r+")[0] = 1
    inner = pickle.loads(pickle.dumps(copy.fork()))
    assert type(inner) is floe.ForkSession
    zarr.open_array(inner.store, path="x", mode="r+")[1] = 2
    copy.merge(pickle.loads(pickle.dumps(inner)))
    with pytest.raises(floe.SessionStateError):
        copy.commit("forks cannot commit")
    session.merge(copy)
    session.commit("nested forks")
    np.testing.assert_array_equal(
        zarr.open_array(repo.readonly_session("main").store, path="x", mode="r")[...],
        [1, 2, 0, 0])


def test_to_icechunk_and_to_floe_write_dask_datasets(tmp_path):
    xr = pytest.importorskip("xarray") if os.environ.get("CI") != "true" else __import__("xarray")
    from floe.xarray import to_floe, to_icechunk

    assert to_icechunk is to_floe
    repo = _repo(tmp_path)
    values = np.arange(12 * 6, dtype="f4").reshape(12, 6)
    ds = xr.Dataset({"v": (("t", "x"), da.from_array(values, chunks=(4, 3)))})
    with dask.config.set(scheduler="threads"):
        session = repo.writable_session("main")
        to_icechunk(ds, session, encoding={"v": {"chunks": (4, 3)}})
        session.commit("to_icechunk")
    back = xr.open_zarr(repo.readonly_session("main").store, consolidated=False)
    np.testing.assert_array_equal(back["v"].values, values)


def test_install_as_icechunk_registers_dask_and_distributed():
    saved = {k: v for k, v in sys.modules.items() if k == "icechunk" or k.startswith("icechunk.")}
    try:
        floe.install_as_icechunk()
        import icechunk.dask
        import icechunk.distributed

        assert icechunk.dask.store_dask is store_dask
        assert icechunk.dask.session_merge_reduction is session_merge_reduction
        assert icechunk.distributed.merge_sessions is floe.distributed.merge_sessions
        assert icechunk.session.ForkSession is floe.ForkSession
    finally:
        for k in [k for k in sys.modules if k == "icechunk" or k.startswith("icechunk.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_to_icechunk_regions_auto_groups_dataarrays_and_forks(tmp_path):
    xr = pytest.importorskip("xarray") if os.environ.get("CI") != "true" else __import__("xarray")
    from floe.xarray import to_icechunk

    repo = _repo(tmp_path)
    t = np.arange(8)
    full = xr.Dataset({"v": (("t", "x"), np.zeros((8, 3), dtype="f8"))},
                      coords={"t": t, "x": np.arange(3)})
    session = repo.writable_session("main")
    full.to_zarr(session.store, group="g", mode="w", consolidated=False, zarr_format=3,
                 encoding={"v": {"chunks": (2, 3)}})
    session.commit("template")

    # Each fork of one session writes its part at the place region='auto' finds, with
    # a tree merge of split_every=2; the session merges the forks and commits once.
    session = repo.writable_session("main")
    forks = [session.fork() for _ in range(2)]
    with dask.config.set(scheduler="processes"):
        for i, fork in enumerate(forks):
            part = full.isel(t=slice(4 * i, 4 * i + 4)).drop_vars("x")
            part = part.assign(v=part.v + 10 * (i + 1)).chunk(t=2)
            to_icechunk(part, fork, group="g", region="auto", split_every=2)
    session.merge(*forks)
    session.commit("two regions")
    back = xr.open_zarr(repo.readonly_session("main").store, group="g", consolidated=False)
    np.testing.assert_array_equal(back.v.values[:4], 10.0)
    np.testing.assert_array_equal(back.v.values[4:], 20.0)

    with pytest.raises(KeyError):
        missing = full.isel(t=slice(0, 2)).assign_coords(t=[100, 101]).chunk(t=2)
        to_icechunk(missing.drop_vars("x"), repo.writable_session("main"), group="g",
                    region="auto")

    # A named DataArray is written as a one-variable Dataset.
    session = repo.writable_session("main")
    arr = xr.DataArray(da.arange(6, chunks=3, dtype="i4"), dims=("n",), name="counts")
    to_icechunk(arr, session, group="h", mode="w")
    session.commit("dataarray")
    back = xr.open_zarr(repo.readonly_session("main").store, group="h", consolidated=False)
    np.testing.assert_array_equal(back["counts"].values, np.arange(6))
