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


def _mark_computed(block, directory):
    """A source's block step that leaves a file in ``directory`` when computed (in
    whichever process computes it)."""
    import uuid

    (directory / uuid.uuid4().hex).touch()
    return block


def _refused_source(tmp_path, values, chunks):
    """``values`` as a Dask array of ``chunks`` whose computation leaves a mark in
    ``tmp_path / "computed"``."""
    marks = tmp_path / "computed"
    marks.mkdir(exist_ok=True)
    source = da.map_blocks(_mark_computed, da.from_array(values, chunks=chunks),
                           directory=marks, dtype=values.dtype,
                           meta=np.empty((0,) * values.ndim, dtype=values.dtype))
    return source, marks


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_blocks_sharing_a_chunk_are_refused_before_anything_is_written(tmp_path, scheduler):
    # Blocks of 5 elements into chunks of 10: two blocks per chunk, each of which
    # would write the whole chunk into its own fork, and the merge would keep one.
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(20,), chunks=(10,), dtype="i4",
                      fill_value=0, dimension_names=("time",))
    session.commit("array")
    session = repo.writable_session("main")
    fork = session.fork()
    target = zarr.open_array(fork.store, path="x", mode="r+")
    source, marks = _refused_source(tmp_path, np.arange(20, dtype="i4"), 5)
    with dask.config.set(scheduler=scheduler):
        with pytest.raises(ValueError, match=r"axis 0 \(dimension 'time'\)") as refused:
            store_dask(sources=[source], targets=[target])
    message = str(refused.value)
    assert "element 5 " in message and "chunk of 10 elements" in message, message
    assert "source.rechunk({0: (10,) * 2})" in message, message
    # Nothing computed, nothing written.
    assert list(marks.iterdir()) == []
    assert not fork.has_uncommitted_changes and not session.has_uncommitted_changes
    np.testing.assert_array_equal(zarr.open_array(session.store, path="x")[...], 0)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_blocks_must_not_share_a_shard_or_straddle_a_region_offset(tmp_path, scheduler):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="s", shape=(40, 6), chunks=(5, 6),
                      shards=(10, 6), dtype="f8", fill_value=0.0,
                      dimension_names=("t", "x"))
    for name in ("q", "r"):
        zarr.create_array(session.store, name=name, shape=(40, 30), chunks=(10, 10),
                          dtype="f8", fill_value=0.0)
    session.commit("arrays")
    fork = repo.writable_session("main").fork()
    shards = zarr.open_array(fork.store, path="s", mode="r+")
    plain = [zarr.open_array(fork.store, path=name, mode="r+") for name in ("q", "r")]
    # Blocks of 5 rows match the inner chunks but share shards of 10.
    source, marks = _refused_source(tmp_path, np.ones((40, 6)), (5, 6))
    with dask.config.set(scheduler=scheduler):
        with pytest.raises(ValueError, match=r"axis 0 \(dimension 't'\).*shard of 10 "):
            store_dask(sources=[source], targets=[shards])
        # Blocks of 10 columns written from column 5: boundaries at 15 and 25. The
        # second source is refused before the first is computed.
        ok, _ = _refused_source(tmp_path, np.ones((40, 30)), (10, 10))
        moved, _ = _refused_source(tmp_path, np.ones((40, 25)), (10, 10))
        with pytest.raises(ValueError, match=r"source 1 .*axis 1, inside a chunk of 10") as refused:
            store_dask(sources=[ok, moved], targets=plain,
                       regions=[None, (slice(0, 40), slice(5, 30))])
    message = str(refused.value)
    assert "element 15 " in message and "starts at element [0, 5]" in message, message
    assert "source.rechunk({1: (5,) + (10,) * 2})" in message, message
    assert list(marks.iterdir()) == []
    assert not fork.has_uncommitted_changes


def test_sources_writing_one_chunk_of_a_target_are_refused(tmp_path):
    # Each source aligned on its own, but both write chunk 1 of "x" (elements 10-19):
    # their forks would merge into one of the two writes of it.
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(40,), chunks=(10,), dtype="i4",
                      fill_value=0)
    session.commit("array")
    session = repo.writable_session("main")
    fork = session.fork()
    first, second = (zarr.open_array(fork.store, path="x", mode="r+") for _ in range(2))
    sources = [da.arange(15, chunks=10, dtype="i4"),
               da.from_array(np.arange(25, dtype="i4"), chunks=((5, 10, 10),))]
    with pytest.raises(ValueError, match=r"sources 0 and 1 both write .*'x'"):
        store_dask(sources=sources, targets=[first, second],
                   regions=[(slice(0, 15),), (slice(15, 40),)])
    assert not fork.has_uncommitted_changes
    # Regions meeting on a chunk boundary are fine.
    sources = [da.arange(20, chunks=10, dtype="i4"), da.arange(20, chunks=10, dtype="i4") + 20]
    session.merge(store_dask(sources=sources, targets=[first, second],
                             regions=[(slice(0, 20),), (slice(20, 40),)]))
    np.testing.assert_array_equal(zarr.open_array(session.store, path="x")[...], np.arange(40))


def test_aligned_blocks_with_a_region_offset_write_every_element(tmp_path):
    # A region starting inside a chunk: the first block ends on the chunk boundary
    # (as the refusal's rechunk suggests), every later boundary is on one too.
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(40, 30), chunks=(10, 10), dtype="f8",
                      fill_value=-1.0)
    session.commit("array")
    session = repo.writable_session("main")
    fork = session.fork()
    target = zarr.open_array(fork.store, path="x", mode="r+")
    values = np.random.default_rng(2).random((33, 25))
    source = da.from_array(values, chunks=((3, 10, 20), (5, 10, 10)))
    with dask.config.set(scheduler="processes"):
        merged = store_dask(sources=[source], targets=[target],
                            regions=[(slice(7, 40), slice(5, 30))])
    session.merge(merged)
    sid = session.commit("offset")
    back = zarr.open_array(repo.readonly_session(snapshot_id=sid).store, path="x")[...]
    expected = np.full((40, 30), -1.0)
    expected[7:, 5:] = values
    np.testing.assert_array_equal(back, expected)


def test_the_suggested_rechunk_is_accepted_and_writes_every_element(tmp_path):
    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(50,), chunks=(10,), dtype="i8",
                      fill_value=-1)
    fork = session.fork()
    target = zarr.open_array(fork.store, path="x", mode="r+")
    source = da.arange(47, chunks=8, dtype="i8")
    region = [(slice(3, 50),)]
    with pytest.raises(ValueError, match="element 11 ") as refused:
        store_dask(sources=[source], targets=[target], regions=region)
    suggested = str(refused.value).split("source.rechunk(")[1][:-1]
    assert suggested == "{0: (7,) + (10,) * 4}", suggested
    with dask.config.set(scheduler="processes"):
        session.merge(store_dask(sources=[source.rechunk(eval(suggested))], targets=[target],
                                 regions=region))
    np.testing.assert_array_equal(zarr.open_array(session.store, path="x")[...],
                                  [-1] * 3 + list(range(47)))


class _RectilinearTarget:
    """What zarr >= 3.4 shows of an unsharded array with a rectilinear grid along its
    first axis: no single chunk shape, the chunks' lengths per axis."""

    path = "r"
    shards = None
    metadata = type("Metadata", (), {"dimension_names": ("t", None)})()
    write_chunk_sizes = ((10, 5, 15), (4,))

    @property
    def chunks(self):
        raise NotImplementedError("rectilinear")


def test_blocks_are_checked_against_rectilinear_grids():
    from floe.dask import _aligned_chunks, _check_blocks_aligned

    target = _RectilinearTarget()
    # Boundaries at 10 and 15 (chunk boundaries), then 20 (inside the chunk 15-30).
    source = da.zeros((30, 4), chunks=((10, 5, 5, 10), 4))
    with pytest.raises(ValueError, match=r"element 20 .*axis 0 \(dimension 't'\), inside a "
                                         r"chunk of its rectilinear grid") as refused:
        _check_blocks_aligned(source, target)
    assert "source.rechunk({0: (10,) + (5,) + (15,)})" in str(refused.value)
    _check_blocks_aligned(da.zeros((30, 4), chunks=((15, 15), 4)), target)
    # From element 12: boundaries must fall at 15 (3 in) or at the end.
    assert _aligned_chunks(da.zeros((18, 4), chunks=(6, 4)), target, (12, 0)) == \
        ((3, 15), (4,))
    with pytest.raises(ValueError, match="element 18 "):
        _check_blocks_aligned(da.zeros((18, 4), chunks=(6, 4)), target, (12, 0))


def test_forks_that_wrote_one_chunk_merge_to_the_fork_merged_last(tmp_path):
    # The documented semantics (Icechunk 2.3.0's): merging forks that wrote the same
    # chunk raises nothing and keeps the chunk of the fork merged last, whole; the
    # other fork's elements of it are gone. store_dask refuses to get there.
    for order in ("ab", "ba"):
        repo = _repo(tmp_path / order)
        session = repo.writable_session("main")
        zarr.create_array(session.store, name="x", shape=(20,), chunks=(10,), dtype="i4",
                          fill_value=0)
        fork = session.fork()
        forks = {"a": pickle.loads(pickle.dumps(fork)), "b": pickle.loads(pickle.dumps(fork))}
        zarr.open_array(forks["a"].store, path="x", mode="r+")[0:5] = 1
        zarr.open_array(forks["b"].store, path="x", mode="r+")[5:10] = 2
        session.merge(*(forks[k] for k in order))
        back = zarr.open_array(session.store, path="x", mode="r")[...]
        last = {"a": [1] * 5 + [0] * 15, "b": [0] * 5 + [2] * 5 + [0] * 10}[order[-1]]
        assert back.tolist() == last, (order, back)


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


def _chunk_keys(store, prefix):
    import asyncio

    async def keys():
        return sorted([k async for k in store.list_prefix(prefix)])

    return [k for k in asyncio.run(keys()) if "/c/" in k]


def test_to_floe_refuses_dask_chunks_sharing_a_zarr_chunk_even_without_safe_chunks(tmp_path):
    xr = pytest.importorskip("xarray") if os.environ.get("CI") != "true" else __import__("xarray")
    from floe.xarray import to_floe

    repo = _repo(tmp_path)
    ds = xr.Dataset({"v": (("t",), da.arange(20, chunks=5, dtype="f8"))})
    encoding = {"v": {"chunks": (10,)}}
    # xarray's own check (safe_chunks=True) refuses first.
    with pytest.raises(ValueError, match="overlap multiple Dask chunks"):
        to_floe(ds, repo.writable_session("main"), mode="w", encoding=encoding)
    # Without it, store_dask still refuses, before any block is written.
    session = repo.writable_session("main")
    with dask.config.set(scheduler="processes"):
        with pytest.raises(ValueError, match=r"axis 0 \(dimension 't'\).*chunk of 10 "):
            to_floe(ds, session, mode="w", encoding=encoding, safe_chunks=False)
    assert _chunk_keys(session.store, "v") == []


def test_to_floe_align_chunks_aligns_on_shards_from_the_region_offset(tmp_path):
    xr = pytest.importorskip("xarray") if os.environ.get("CI") != "true" else __import__("xarray")
    from floe.xarray import to_floe

    repo = _repo(tmp_path)
    session = repo.writable_session("main")
    template = xr.Dataset({"v": (("t",), np.full(30, -1.0))})
    template.to_zarr(session.store, mode="w", consolidated=False, zarr_format=3,
                     encoding={"v": {"chunks": (5,), "shards": (10,)}})
    session.commit("template")
    session = repo.writable_session("main")
    # 17 elements in blocks of 5 from element 3: boundaries at 8, 13, 18 would share
    # shards of 10 (and chunks of 5); aligned, they become blocks of 7 and 10.
    part = xr.Dataset({"v": (("t",), da.arange(17, chunks=5, dtype="f8"))})
    with dask.config.set(scheduler="processes"):
        to_floe(part, session, region={"t": slice(3, 20)}, align_chunks=True)
    session.commit("aligned")
    back = zarr.open_array(repo.readonly_session("main").store, path="v")[...]
    np.testing.assert_array_equal(back, [-1.0] * 3 + list(range(17)) + [-1.0] * 10)


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
