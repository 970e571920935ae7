"""The floe Python package through zarr-python: round trips, time travel, branches,
conflicts, spec 2, and a repository read by the floe CLI and by Icechunk when they
are at hand."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import zarr

import floe
from oracle import run_icechunk


def _icechunk_python():
    """The Python with Icechunk 2.x (`FLOE_PYTHON312`), or None; missing under CI
    (`CI=true`) is a failure, not a skip."""
    py312 = os.environ.get("FLOE_PYTHON312")
    if not py312 and os.environ.get("CI") == "true":
        pytest.fail("FLOE_PYTHON312 (Python with icechunk 2.x) is not set")
    return py312 or None


def test_zarr_round_trip_and_time_travel(tmp_path):
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path / "r")))
    assert repo.spec_version == 2  # the default, as in Icechunk 2.x
    s = repo.writable_session("main")
    root = zarr.create_group(store=s.store, attributes={"title": "py"})
    a = root.create_array("t", shape=(10, 4), chunks=(3, 2), dtype="f4", fill_value=np.nan)
    a[...] = np.arange(40, dtype="f4").reshape(10, 4)
    strs = root.create_array("s", shape=(3,), dtype=str)
    strs[...] = np.array(["a", "bé", ""], dtype=object)
    first = s.commit("first", {"author": "pytest"})
    s = repo.writable_session("main")
    t = zarr.open_array(store=s.store, path="t", mode="r+")
    t[0, :] = -1
    second = s.commit("second")

    old = zarr.open_group(store=repo.readonly_session(snapshot_id=first).store, mode="r")
    np.testing.assert_array_equal(old["t"][0, :], [0, 1, 2, 3])
    new = zarr.open_group(store=repo.readonly_session("main").store, mode="r")
    np.testing.assert_array_equal(new["t"][0, :], [-1, -1, -1, -1])
    assert list(new["s"][...]) == ["a", "bé", ""]
    assert new.attrs["title"] == "py"
    history = list(repo.ancestry(branch="main"))
    assert [h.id for h in history[:2]] == [second, first]
    assert history[1].metadata == {"author": "pytest"}
    assert history[0].parent_id == first
    ro = repo.readonly_session("main")
    assert ro.read_only and ro.store.read_only
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_array(store=ro.store, path="t", mode="r+")


def test_ancestry_reads_commits_as_iteration_reaches_them(tmp_path):
    path = tmp_path / "r"
    # Spec 1: the history is read from the snapshot files, in batches.
    repo = floe.Repository.create(floe.local_filesystem_storage(str(path)), spec_version=1)
    ids = []
    for i in range(40):
        s = repo.writable_session("main")
        zarr.create_group(store=s.store, attributes={"i": i}, overwrite=True)
        ids.append(s.commit(f"commit {i}"))
    newest_first = ids[::-1]
    assert [h.id for h in repo.ancestry(branch="main")][:40] == newest_first
    # The snapshot of commit 5 goes missing: a fresh handle still iterates the 34
    # newer commits (the first batch of 16 and 18 of the next) and only then raises.
    os.remove(path / "snapshots" / ids[5])
    fresh = floe.Repository.open(floe.local_filesystem_storage(str(path)))
    history = fresh.ancestry(snapshot_id=ids[-1])
    assert next(history).id == ids[-1]
    newer = [next(history).id for _ in range(33)]
    assert newer == newest_first[1:34]
    with pytest.raises(floe.FloeError, match=ids[5]):
        next(history)
    with pytest.raises(floe.FloeError, match="nope"):
        next(fresh.ancestry(branch="nope"))


@pytest.mark.parametrize("spec", [1, 2])
def test_repository_config_sets_the_metadata_compression_level(tmp_path, spec):
    config = floe.RepositoryConfig(compression=floe.CompressionConfig(level=19))
    assert config.compression.level == 19
    # As Icechunk: no compression section by default, and no level in one.
    assert floe.RepositoryConfig.default().compression is None
    assert floe.CompressionConfig.default().level is None
    with pytest.raises(ValueError, match="lz4"):
        floe.CompressionConfig(algorithm="lz4")

    def write(name, config):
        path = tmp_path / name
        repo = floe.Repository.create(floe.local_filesystem_storage(str(path)), config,
                                      spec_version=spec)
        s = repo.writable_session("main")
        a = zarr.create_array(s.store, name="a", shape=(3000,), chunks=(1,), dtype="u1",
                              fill_value=0)
        a[...] = 7
        s.commit("3,000 chunks")
        manifests = list((path / "manifests").iterdir())
        assert len(manifests) == 1
        return repo, path, manifests[0].stat().st_size

    repo, path, small = write("19", config)
    _, _, fast = write("1", floe.RepositoryConfig(compression=floe.CompressionConfig(level=1)))
    assert small < fast
    # The level is kept: a fresh handle reads it back, and a saved change applies.
    reopened = floe.Repository.open(floe.local_filesystem_storage(str(path)))
    assert reopened.config.compression.level == 19
    changed = reopened.config
    changed.compression = floe.CompressionConfig(level=2)
    changed.inline_chunk_threshold_bytes = 0
    reopened.save_config(changed)
    again = floe.Repository.open(floe.local_filesystem_storage(str(path)))
    assert again.config.compression.level == 2
    assert again.config.inline_chunk_threshold_bytes == 0
    assert zarr.open_array(again.readonly_session("main").store, path="a")[5] == 7


def test_branches_tags_and_conflicts():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    a[...] = [1, 2, 3, 4]
    base = s.commit("base")
    repo.create_branch("dev", base)
    repo.create_tag("v1", base)
    assert repo.list_branches() == {"dev", "main"}
    assert repo.lookup_tag("v1") == base
    one = repo.writable_session("main")
    two = repo.writable_session("main")
    zarr.open_array(store=one.store, path="a", mode="r+")[0:2] = [9, 9]
    zarr.open_array(store=two.store, path="a", mode="r+")[0:2] = [7, 7]
    one.commit("one")
    with pytest.raises(floe.ConflictError):
        two.commit("two")
    assert issubclass(floe.ConflictError, floe.FloeError)


def test_spec2_metadata_and_moves():
    repo = floe.Repository.create(floe.in_memory_storage(), spec_version=2)
    assert repo.spec_version == 2
    s = repo.writable_session("main")
    root = zarr.create_group(store=s.store)
    g = root.create_group("g")
    g.create_array("x", shape=(2,), dtype="u1", fill_value=3)
    s.commit("tree")
    r = repo.rearrange_session("main")
    r.move("/g", "/h")
    moved = r.commit("move")
    tree = zarr.open_group(store=repo.readonly_session(snapshot_id=moved).store, mode="r")
    np.testing.assert_array_equal(tree["h/x"][...], [3, 3])
    assert repo.update_metadata({"team": "ocean"}) == {"team": "ocean"}
    assert repo.get_metadata() == {"team": "ocean"}


def test_floe_cli_reads_a_python_written_repository(tmp_path):
    cli = os.environ.get("FLOE_BIN") or shutil.which("floe")
    if cli is None:
        if os.environ.get("CI") == "true":
            pytest.fail("FLOE_BIN is not set and no floe on the PATH")
        pytest.skip("no floe CLI")
    path = str(tmp_path / "r")
    repo = floe.Repository.create(floe.local_filesystem_storage(path))
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="v", shape=(3,), dtype="i8", fill_value=0)
    a[...] = [5, 6, 7]
    s.commit("from python")
    out = subprocess.run([cli, "cat", path, "v", "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out) == [5, 6, 7]


def test_icechunk_reads_a_python_written_repository(tmp_path):
    py312 = _icechunk_python()
    if py312 is None:
        pytest.skip("no Python with icechunk 2.x")
    for spec in (1, 2):
        path = str(tmp_path / f"r{spec}")
        repo = floe.Repository.create(floe.local_filesystem_storage(path), spec_version=spec)
        s = repo.writable_session("main")
        root = zarr.create_group(store=s.store, attributes={"spec": spec})
        a = root.create_array("m", shape=(4, 3), chunks=(2, 2), dtype="f8", fill_value=0.0)
        a[...] = np.arange(12, dtype="f8").reshape(4, 3) / 4
        sid = s.commit("python", {"spec": spec})
        script = (
            "import icechunk as ic, zarr, json, sys\n"
            "repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))\n"
            "s = repo.readonly_session('main')\n"
            "g = zarr.open_group(store=s.store, mode='r')\n"
            "print(json.dumps({'spec': int(repo.spec_version), 'snap': s.snapshot_id,"
            " 'attrs': dict(g.attrs), 'm': g['m'][...].tolist()}))\n"
        )
        out = run_icechunk([py312, "-c", script, path]).stdout
        got = json.loads(out.strip().splitlines()[-1])
        assert got == {
            "spec": spec,
            "snap": sid,
            "attrs": {"spec": spec},
            "m": (np.arange(12).reshape(4, 3) / 4).tolist(),
        }


def test_pickling_read_only_sessions_and_forks(tmp_path):
    import pickle

    path = str(tmp_path / "r")
    repo = floe.Repository.create(floe.local_filesystem_storage(path))
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(6,), chunks=(2,), dtype="i2", fill_value=0)
    a[...] = [1, 2, 3, 4, 5, 6]
    sid = s.commit("data")

    ro = repo.readonly_session(snapshot_id=sid)
    back = pickle.loads(pickle.dumps(ro))
    assert back.snapshot_id == sid and back.read_only
    store = pickle.loads(pickle.dumps(ro.store))
    np.testing.assert_array_equal(zarr.open_array(store=store, path="a", mode="r")[...],
                                  [1, 2, 3, 4, 5, 6])

    w = repo.writable_session("main")
    with pytest.raises(ValueError, match="fork"):
        pickle.dumps(w)
    fork = w.fork()
    remote = pickle.loads(pickle.dumps(fork))
    zarr.open_array(store=remote.store, path="a", mode="r+")[0:2] = [-1, -2]
    w.merge(pickle.loads(pickle.dumps(remote)))
    w.commit("merged from a pickled fork")
    final = zarr.open_array(store=repo.readonly_session("main").store, path="a", mode="r")
    np.testing.assert_array_equal(final[...], [-1, -2, 3, 4, 5, 6])
    with pytest.raises(TypeError, match="in-memory"):
        pickle.dumps(floe.in_memory_storage())


def test_xarray_to_zarr_open_zarr_identity():
    xr = pytest.importorskip("xarray") if os.environ.get("CI") != "true" else __import__("xarray")
    repo = floe.Repository.create(floe.in_memory_storage())
    ds = xr.Dataset(
        {
            "temp": (("time", "x"), np.random.default_rng(0).normal(size=(5, 7)).astype("f4")),
            "flag": (("x",), np.arange(7, dtype="u1")),
        },
        coords={"time": np.arange(5), "x": np.linspace(0, 1, 7)},
        attrs={"source": "pytest"},
    )
    s = repo.writable_session("main")
    ds.to_zarr(s.store, consolidated=False, zarr_format=3)
    sid = s.commit("dataset")
    back = xr.open_zarr(repo.readonly_session(snapshot_id=sid).store, consolidated=False)
    xr.testing.assert_identical(ds, back.load())


def _dask():
    if os.environ.get("CI") == "true":
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    else:
        pytest.importorskip("distributed")
    import dask.array as da
    import distributed
    import xarray as xr
    return da, distributed, xr


def test_to_floe_on_a_distributed_cluster(tmp_path):
    da, distributed, xr = _dask()
    from floe.xarray import to_floe

    path = str(tmp_path / "r")
    repo = floe.Repository.create(floe.local_filesystem_storage(path))
    values = np.arange(24 * 10, dtype="f8").reshape(24, 10)
    ds = xr.Dataset(
        {"v": (("t", "x"), da.from_array(values, chunks=(4, 5)))},
        coords={"t": np.arange(24), "x": np.arange(10)},
    )
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        s = repo.writable_session("main")
        to_floe(ds, s, encoding={"v": {"chunks": (4, 5)}})
        first = s.commit("distributed write")
        # Append along t, again from the workers.
        more = xr.Dataset(
            {"v": (("t", "x"), da.from_array(-values[:8], chunks=(4, 5)))},
            coords={"t": np.arange(24, 32), "x": np.arange(10)},
        )
        s = repo.writable_session("main")
        to_floe(more, s, append_dim="t")
        second = s.commit("append")
        # Blocks that share a Zarr chunk would lose writes in the merge (the fork
        # merged last wins each chunk, as in Icechunk 2.3.0): refused before anything
        # is written, even with safe_chunks=False.
        clash = xr.Dataset({"v": (("t", "x"), da.from_array(-values[:8], chunks=(2, 5)))})
        s = repo.writable_session("main")
        with pytest.raises(ValueError, match="dimension 't'"):
            to_floe(clash, s, region={"t": slice(0, 8), "x": slice(0, 10)}, safe_chunks=False)
        assert not s.has_uncommitted_changes
        kept = zarr.open_array(s.store, path="v", mode="r")[:8]
        np.testing.assert_array_equal(kept, values[:8])
    history = [h.id for h in repo.ancestry(branch="main")]
    assert history[:2] == [second, first], "one commit per to_floe"
    back = xr.open_zarr(repo.readonly_session("main").store, consolidated=False)
    np.testing.assert_array_equal(back["v"].values[:24], values)
    np.testing.assert_array_equal(back["v"].values[24:], -values[:8])


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def _codecs():
    from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, TransposeCodec, ZstdCodec

    return {
        "none": dict(compressors=None),
        "zstd": dict(compressors=[ZstdCodec(level=3)]),
        "gzip": dict(compressors=[GzipCodec(level=5)]),
        "blosc": dict(compressors=[BloscCodec(cname="lz4", clevel=3)]),
        "big_endian": dict(serializer=BytesCodec(endian="big"), compressors=None),
        "transpose": dict(filters=[TransposeCodec(order=[1, 0])], compressors=[ZstdCodec(level=1)]),
        "sharded": dict(shards=(4, 6), compressors=[ZstdCodec(level=1)]),
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_data_type_round_trips(dtype):
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    rng = np.random.default_rng(1)
    data = (rng.integers(0, 100, size=(5, 6)) % (2 if dtype == "bool" else 100)).astype(dtype)
    a = zarr.create_array(s.store, name="a", shape=data.shape, chunks=(2, 3), dtype=dtype)
    a[...] = data
    sid = s.commit(dtype)
    back = zarr.open_array(store=repo.readonly_session(snapshot_id=sid).store, path="a", mode="r")
    np.testing.assert_array_equal(back[...], data)
    assert back.dtype == data.dtype


@pytest.mark.parametrize("codec", list(_codecs()))
def test_every_codec_round_trips(codec):
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    data = np.arange(8 * 12, dtype="i4").reshape(8, 12) * 7
    a = zarr.create_array(s.store, name="a", shape=data.shape, chunks=(2, 3), dtype="i4",
                          **_codecs()[codec])
    a[...] = data
    a[1, 1:4] = -1
    data[1, 1:4] = -1
    sid = s.commit(codec)
    back = zarr.open_array(store=repo.readonly_session(snapshot_id=sid).store, path="a", mode="r")
    np.testing.assert_array_equal(back[...], data)
    np.testing.assert_array_equal(back[2:5, 7:11], data[2:5, 7:11])


def test_python_reads_an_icechunk_written_repository(tmp_path):
    py312 = _icechunk_python()
    if py312 is None:
        pytest.skip("no Python with icechunk 2.x")
    for spec in (1, 2):
        path = str(tmp_path / f"ic{spec}")
        script = (
            "import icechunk as ic, zarr, numpy as np, sys\n"
            "repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]),"
            " spec_version=int(sys.argv[2]))\n"
            "s = repo.writable_session('main')\n"
            "g = zarr.create_group(store=s.store, attributes={'by': 'icechunk'})\n"
            "a = g.create_array('w', shape=(6, 4), chunks=(3, 2), dtype='i4', fill_value=-1)\n"
            "a[...] = np.arange(24, dtype='i4').reshape(6, 4)\n"
            "print(s.commit('icechunk commit'))\n"
        )
        out = run_icechunk([py312, "-c", script, path, str(spec)]).stdout
        sid = out.strip().splitlines()[-1]
        repo = floe.Repository.open(floe.local_filesystem_storage(path))
        assert repo.spec_version == spec
        assert repo.lookup_branch("main") == sid
        g = zarr.open_group(store=repo.readonly_session("main").store, mode="r")
        assert g.attrs["by"] == "icechunk"
        np.testing.assert_array_equal(g["w"][...], np.arange(24).reshape(6, 4))
        assert [h.message for h in repo.ancestry(branch="main")][0] == "icechunk commit"


def test_commit_rebases_with_a_solver():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    a[...] = [1, 2, 3, 4]
    s.commit("base")
    ours = repo.writable_session("main")
    theirs = repo.writable_session("main")
    zarr.open_array(store=theirs.store, path="a", mode="r+")[0:2] = [8, 8]
    theirs.commit("theirs")
    zarr.open_array(store=ours.store, path="a", mode="r+")[0:2] = [5, 5]
    solver = floe.BasicConflictSolver(on_chunk_conflict=floe.VersionSelection.UseOurs)
    ours.commit("ours wins", rebase_with=solver)
    got = zarr.open_array(store=repo.readonly_session("main").store, path="a", mode="r")[...]
    np.testing.assert_array_equal(got, [5, 5, 3, 4])
    late = repo.writable_session("main")
    zarr.open_array(store=repo.writable_session("main").store, path="a", mode="r+")
    other = repo.writable_session("main")
    zarr.open_array(store=other.store, path="a", mode="r+")[2:4] = [0, 0]
    other.commit("other")
    zarr.open_array(store=late.store, path="a", mode="r+")[2:4] = [9, 9]
    late.rebase(floe.BasicConflictSolver(on_chunk_conflict=floe.VersionSelection.UseTheirs))
    late.commit("after rebase", allow_empty=True)
    got = zarr.open_array(store=repo.readonly_session("main").store, path="a", mode="r")[...]
    np.testing.assert_array_equal(got, [5, 5, 0, 0])
    # A session is read-only once it committed (as Icechunk): a new one commits next.
    with pytest.raises(ValueError):
        repo.writable_session("main").commit("x", rebase_with="nope", allow_empty=True)


def test_store_equality_and_read_only_views():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    assert s.store == s.store
    assert s.store != repo.writable_session("main").store
    ro = s.store.with_read_only(True)
    assert ro.read_only and ro != s.store
    assert not s.store.read_only
    with pytest.raises(ValueError):
        repo.readonly_session("main").store.with_read_only(False)


def test_s3_storage_round_trip_and_pickled_session():
    import pickle
    import uuid

    bucket = os.environ.get("FLOE_TEST_S3_BUCKET")
    if not bucket:
        if os.environ.get("CI") == "true":
            pytest.fail("the S3 test server (FLOE_TEST_S3_BUCKET, AWS_*) is not set up")
        pytest.skip("no S3 test server")
    prefix = f"python-{uuid.uuid4().hex}"
    storage = floe.s3_storage(bucket=bucket, prefix=prefix)
    assert storage.url == f"s3://{bucket}/{prefix}"
    repo = floe.Repository.create(storage, spec_version=2)
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(5,), chunks=(2,), dtype="f8", fill_value=0.0)
    a[...] = [0.5, 1.5, 2.5, 3.5, 4.5]
    sid = s.commit("on s3")
    again = floe.Repository.open(floe.s3_storage(bucket=bucket, prefix=prefix))
    assert again.spec_version == 2 and again.lookup_branch("main") == sid
    ro = pickle.loads(pickle.dumps(again.readonly_session(snapshot_id=sid)))
    np.testing.assert_array_equal(zarr.open_array(store=ro.store, path="a", mode="r")[...],
                                  [0.5, 1.5, 2.5, 3.5, 4.5])


def _diff_facts(d):
    return {
        "new_groups": sorted(d.new_groups),
        "new_arrays": sorted(d.new_arrays),
        "deleted_groups": sorted(d.deleted_groups),
        "deleted_arrays": sorted(d.deleted_arrays),
        "updated_groups": sorted(d.updated_groups),
        "updated_arrays": sorted(d.updated_arrays),
        "updated_chunks": {k: sorted(map(list, v)) for k, v in d.updated_chunks.items()},
        "moved_nodes": sorted(map(list, d.moved_nodes)),
    }


def test_status_and_diff_are_diff_objects_that_agree_with_icechunk(tmp_path):
    path = str(tmp_path / "r")
    repo = floe.Repository.create(floe.local_filesystem_storage(path), spec_version=2)
    s = repo.writable_session("main")
    assert s.status().is_empty()
    root = zarr.create_group(store=s.store)
    g = root.create_group("g")
    a = g.create_array("x", shape=(4,), chunks=(2,), dtype="i2", fill_value=0)
    a[2:] = [1, 2]
    st = s.status()
    assert isinstance(st, floe.Diff) and not st.is_empty()
    assert st.new_groups == {"/", "/g"} and st.new_arrays == {"/g/x"}
    assert st.updated_chunks == {"/g/x": [[1]]}
    first = s.commit("tree")
    repo.create_tag("v1", first)
    s = repo.writable_session("main")
    zarr.open_array(store=s.store, path="g/x")[0:2] = [7, 7]
    zarr.open_group(store=s.store, path="g").attrs["k"] = 1
    s.commit("edit")
    r = repo.rearrange_session("main")
    r.move("/g", "/h")
    r.commit("move")
    d = repo.diff(from_tag="v1", to_branch="main")
    assert d == repo.diff(from_snapshot_id=first, to_branch="main")
    assert d.moved_nodes == [("/g", "/h"), ("/g/x", "/h/x")]
    assert d.updated_chunks == {"/h/x": [[0]]}
    assert d.updated_groups == {"/h"} and not d.new_arrays
    with pytest.raises(ValueError):
        repo.diff(from_tag="v1", from_branch="main", to_branch="main")

    py312 = _icechunk_python()
    if py312 is None:
        return
    script = (
        "import icechunk as ic, json, sys\n"
        "repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))\n"
        "d = repo.diff(from_tag='v1', to_branch='main')\n"
        "print(json.dumps({n: sorted(getattr(d, n)) for n in ('new_groups', 'new_arrays',"
        " 'deleted_groups', 'deleted_arrays', 'updated_groups', 'updated_arrays')}"
        " | {'updated_chunks': {k: sorted(map(list, v)) for k, v in d.updated_chunks.items()},"
        " 'moved_nodes': sorted(map(list, d.moved_nodes))}))\n"
    )
    out = run_icechunk([py312, "-c", script, path]).stdout
    assert json.loads(out.strip().splitlines()[-1]) == _diff_facts(d)


def test_store_sizes_emptiness_and_clear():
    import asyncio

    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    root = zarr.create_group(store=s.store)
    a = root.create_array("a", shape=(8,), chunks=(4,), dtype="f8", fill_value=0.0,
                          compressors=None)
    a[...] = np.arange(8.0)
    store = s.store

    async def check():
        meta = await store.get("a/zarr.json", zarr.core.buffer.default_buffer_prototype())
        assert await store.getsize("a/zarr.json") == len(meta.to_bytes())
        assert await store.getsize("a/c/1") == 32
        with pytest.raises(FileNotFoundError):
            await store.getsize("a/c/9")
        total = await store.getsize_prefix("a/")
        assert total == len(meta.to_bytes()) + 64
        assert await store.exists("a/c/0") and not await store.exists("a/c/2")
        assert not await store.is_empty("a") and await store.is_empty("b")
        await store.clear()
        assert await store.is_empty("")
        assert [k async for k in store.list()] == []
        with pytest.raises(Exception):
            await store.with_read_only(True).clear()

    asyncio.run(check())
    assert s.status().deleted_arrays == set()  # created and deleted in one session


def test_get_partial_values_answers_every_request_in_order():
    import asyncio

    from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(64,), chunks=(8,), dtype="u1",
                          fill_value=0, compressors=None)
    a[...] = np.arange(64, dtype="u1")
    store = s.store
    proto = zarr.core.buffer.default_buffer_prototype()
    requests = [(f"a/c/{i % 8}", RangeByteRequest(i % 5, i % 5 + 3)) for i in range(40)]
    requests += [("a/c/7", OffsetByteRequest(6)), ("a/c/2", SuffixByteRequest(2)),
                 ("a/c/3", None), ("a/c/99", None)]

    async def check():
        got = await store.get_partial_values(proto, requests)
        assert len(got) == len(requests)
        for (key, r), value in zip(requests[:40], got[:40]):
            c = int(key.rsplit("/", 1)[1])
            want = bytes(range(8 * c + r.start, 8 * c + r.end))
            assert value.to_bytes() == want, (key, r)
        assert got[40].to_bytes() == bytes([62, 63])
        assert got[41].to_bytes() == bytes([22, 23])
        assert got[42].to_bytes() == bytes(range(24, 32))
        assert got[43] is None

    asyncio.run(check())
