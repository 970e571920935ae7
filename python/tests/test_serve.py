"""`floe serve` (issue 46) read by plain Zarr clients over HTTP: zarr-python's
FsspecStore (fsspec + aiohttp) and xarray, with no floe code on the reading side.

The server is the `floe` binary at env FLOE_BIN (or on the PATH), started on a free
port; without it the tests skip, and fail when CI=true.
"""

import os
import shutil
import signal
import subprocess

import numpy as np
import pytest
import zarr

import floe

xr = pytest.importorskip("xarray")


def _cli():
    cli = os.environ.get("FLOE_BIN") or shutil.which("floe")
    if cli is None:
        if os.environ.get("CI") == "true":
            pytest.fail("FLOE_BIN is not set and no floe on the PATH")
        pytest.skip("no floe CLI")
    for module in ("fsspec", "aiohttp"):
        try:
            __import__(module)
        except ImportError:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{module} is required to read Zarr over HTTP")
            pytest.skip(f"no {module}")
    return cli


def _dataset():
    rng = np.random.default_rng(46)
    return xr.Dataset(
        {
            "temperature": (("time", "lat", "lon"), rng.random((6, 5, 8), dtype="f4")),
            "count": (("time",), np.arange(6, dtype="i8")),
        },
        coords={
            "time": np.arange(6),
            "lat": np.linspace(-60, 60, 5),
            "lon": np.linspace(0, 315, 8),
        },
        attrs={"title": "served <b>dataset</b>"},
    )


@pytest.fixture
def served(tmp_path):
    """A repository whose tag `v1` holds `_dataset()` and whose `main` has one more
    commit, served by `floe serve`: (base URL, repository, first snapshot id, dataset)."""
    cli = _cli()
    path = str(tmp_path / "repo")
    repo = floe.Repository.create(floe.local_filesystem_storage(path))
    s = repo.writable_session("main")
    ds = _dataset()
    ds.to_zarr(
        s.store,
        zarr_format=3,
        consolidated=False,
        encoding={"temperature": {"chunks": (2, 5, 3)}, "count": {"chunks": (4,)}},
    )
    first = s.commit("dataset")
    repo.create_tag("v1", first)
    s = repo.writable_session("main")
    g = zarr.open_group(s.store, mode="r+")
    g["count"][0:2] = [100, 101]
    s.commit("change count")
    proc = subprocess.Popen(
        [cli, "serve", path, "--bind", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        url = next(w for w in line.split() if w.startswith("http://")).rstrip("/")
        yield url, repo, first, ds
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def _arrays(group):
    return {name: a for name, a in group.members(max_depth=None) if isinstance(a, zarr.Array)}


def test_zarr_python_reads_every_array_of_every_version_over_http(served):
    url, repo, first, _ = served
    versions = {
        f"{url}/zarr/branch/main/": repo.readonly_session("main"),
        f"{url}/zarr/tag/v1/": repo.readonly_session(tag="v1"),
        f"{url}/zarr/snapshot/{first}/": repo.readonly_session(snapshot_id=first),
    }
    for http_url, session in versions.items():
        remote = zarr.open_group(http_url, mode="r")
        local = zarr.open_group(session.store, mode="r")
        assert dict(remote.attrs) == dict(local.attrs)
        remote_arrays, local_arrays = _arrays(remote), _arrays(local)
        assert sorted(remote_arrays) == sorted(local_arrays) != []
        for name, a in local_arrays.items():
            r = remote_arrays[name]
            assert (r.shape, r.dtype, r.chunks) == (a.shape, a.dtype, a.chunks)
            np.testing.assert_array_equal(r[...], a[...], err_msg=f"{http_url} {name}")
            # A region across chunk boundaries.
            region = tuple(slice(1, max(1, n - 1)) for n in a.shape)
            np.testing.assert_array_equal(r[region], a[region])
    main = zarr.open_group(f"{url}/zarr/branch/main/", mode="r")
    v1 = zarr.open_group(f"{url}/zarr/tag/v1/", mode="r")
    assert main["count"][0] == 100 and v1["count"][0] == 0


def test_a_commit_while_serving_shows_at_the_branch_url_not_the_old_snapshot(served):
    url, repo, _, _ = served
    before = repo.lookup_branch("main")
    s = repo.writable_session("main")
    zarr.open_group(s.store, mode="r+")["count"][5] = 555
    s.commit("while serving")
    # Clients re-read the branch: no cache of the old answer (Cache-Control: no-cache).
    main = zarr.open_group(f"{url}/zarr/branch/main/", mode="r")
    old = zarr.open_group(f"{url}/zarr/snapshot/{before}/", mode="r")
    assert main["count"][5] == 555
    assert old["count"][5] == 5


def test_xarray_open_zarr_over_http_equals_the_dataset_written(served):
    url, _, first, ds = served
    for version in ("tag/v1", f"snapshot/{first}"):
        back = xr.open_zarr(f"{url}/zarr/{version}/", consolidated=True).compute()
        xr.testing.assert_identical(back, ds)
    main = xr.open_zarr(f"{url}/zarr/branch/main/").compute()
    assert main["count"].values[:2].tolist() == [100, 101]
