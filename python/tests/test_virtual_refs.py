"""Virtual chunk refs from Python (Icechunk's API: ``store.set_virtual_ref``,
``set_virtual_refs``, ``set_virtual_refs_arr``, ``session.all_virtual_chunk_locations``,
``Repository.open(..., authorize_virtual_chunk_access=...)``) on files these tests
write themselves, read back with zarr-python."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import zarr

import floe
from floe._floe import _virtual_chunk_refs
from oracle import run_icechunk
from virtual_datasets import need, netcdf_time_file, write_virtual_files

# `None` credentials are deprecated (as in Icechunk 2.3.0) but still authorize; these
# tests use them, and test_none_credentials_warn checks the warning.
pytestmark = pytest.mark.filterwarnings("ignore:Passing `None`:DeprecationWarning")

N = 16  # int32 values in the raw file
CHUNK = 4  # values per chunk


def _mtime(path) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(os.stat(path).st_mtime, tz=datetime.timezone.utc)


@pytest.fixture
def data(tmp_path):
    """A directory with ``raw.bin`` (int32 0..15, little-endian, no header), a
    repository whose one virtual chunk container covers the directory, and the
    directory's ``file://`` prefix."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "raw.bin").write_bytes(np.arange(N, dtype="<i4").tobytes())
    prefix = f"file://{d}/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.local_filesystem_store(str(d)))
    )
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    repo = floe.Repository.create(
        storage, config, authorize_virtual_chunk_access={prefix: None}
    )
    return d, prefix, repo, storage


def _array(session, name="a", shape=(N,), chunks=(CHUNK,)):
    return zarr.create_array(
        session.store, name=name, shape=shape, chunks=chunks, dtype="<i4",
        compressors=None, fill_value=-1,
    )


def _read(repo, name="a"):
    return zarr.open_array(repo.readonly_session("main").store, path=name, mode="r")[...]


def test_set_virtual_ref_reads_back_after_commit_and_reopen(data):
    d, prefix, repo, storage = data
    s = repo.writable_session("main")
    _array(s)
    for i in range(N // CHUNK):
        s.store.set_virtual_ref(
            f"a/c/{i}", f"{prefix}raw.bin", offset=4 * CHUNK * i, length=4 * CHUNK
        )
    s.commit("virtual")
    np.testing.assert_array_equal(_read(repo), np.arange(N))
    again = floe.Repository.open(storage, authorize_virtual_chunk_access={prefix: None})
    np.testing.assert_array_equal(_read(again), np.arange(N))
    assert again.readonly_session("main").all_virtual_chunk_locations() == [
        f"{prefix}raw.bin"
    ] * (N // CHUNK)


def test_validate_container_refuses_uncovered_locations(data, tmp_path):
    d, prefix, repo, _ = data
    s = repo.writable_session("main")
    _array(s)
    elsewhere = f"file://{tmp_path}/other.bin"
    with pytest.raises(floe.InvalidInputError, match="no matching virtual chunk container"):
        s.store.set_virtual_ref("a/c/0", elsewhere, offset=0, length=16)
    assert s.all_virtual_chunk_locations() == []
    # Without validation the ref is stored, and reading it fails: no container.
    s.store.set_virtual_ref("a/c/0", elsewhere, offset=0, length=16, validate_container=False)
    assert s.all_virtual_chunk_locations() == [elsewhere]
    with pytest.raises(floe.FloeError, match="no virtual chunk container"):
        zarr.open_array(s.store, path="a", mode="r")[...]


def test_set_virtual_ref_errors(data):
    d, prefix, repo, _ = data
    s = repo.writable_session("main")
    _array(s)
    with pytest.raises(floe.FloeError, match="/zz"):
        s.store.set_virtual_ref("zz/c/0", f"{prefix}raw.bin", offset=0, length=16)
    with pytest.raises(floe.FloeError, match="index"):
        s.store.set_virtual_ref("a/c/9", f"{prefix}raw.bin", offset=0, length=16)
    with pytest.raises(TypeError):
        s.store.set_virtual_ref("a/c/0", f"{prefix}raw.bin", offset=0, length=16, checksum=3)
    s.store.set_virtual_ref("a/c/0", f"{prefix}raw.bin", offset=0, length=16)
    s.commit("one")
    with pytest.raises(floe.ReadOnlyError):
        s.store.set_virtual_ref("a/c/1", f"{prefix}raw.bin", offset=16, length=16)
    ro = repo.readonly_session("main")
    with pytest.raises(floe.ReadOnlyError):
        ro.store.set_virtual_refs("a", [floe.VirtualChunkSpec([1], f"{prefix}raw.bin", 16, 16)])


def test_set_virtual_refs_skips_and_returns_uncovered(data, tmp_path):
    d, prefix, repo, _ = data
    s = repo.writable_session("main")
    _array(s)
    specs = [
        floe.VirtualChunkSpec([i], f"{prefix}raw.bin", 16 * i, 16) for i in range(4)
    ] + [floe.VirtualChunkSpec([3], f"file://{tmp_path}/other.bin", 0, 16)]
    # The uncovered ref is skipped (chunk 3 keeps the covered ref written before it).
    assert s.store.set_virtual_refs("a", specs) == [(3,)]
    assert s.store.set_virtual_refs("/a", specs[:4]) is None
    s.commit("refs")
    np.testing.assert_array_equal(_read(repo), np.arange(N))
    # An out-of-grid index stores nothing.
    s2 = repo.writable_session("main")
    with pytest.raises(floe.FloeError):
        s2.store.set_virtual_refs(
            "a", [floe.VirtualChunkSpec([0], f"{prefix}raw.bin", 4, 16),
                  floe.VirtualChunkSpec([7], f"{prefix}raw.bin", 0, 16)]
        )
    assert not s2.has_uncommitted_changes


def test_set_virtual_refs_arr(data, tmp_path):
    d, prefix, repo, _ = data
    s = repo.writable_session("main")
    _array(s, shape=(N * 2,))
    loc = f"{prefix}raw.bin"
    # Chunks 0..3 from the file; chunk 2 has no ref (empty location: fill value).
    assert s.store.set_virtual_refs_arr(
        "a", (4,), [loc, loc, "", loc],
        np.array([0, 16, 0, 48], dtype=np.uint64), np.array([16, 16, 0, 16], dtype=np.uint64),
    ) is None
    # Chunks 4..7, shifted by arr_offset; one location no container covers.
    failed = s.store.set_virtual_refs_arr(
        "a", (4,), [loc, loc, loc, f"file://{tmp_path}/x.bin"],
        np.array([0, 16, 32, 0], dtype=np.uint64), np.full(4, 16, dtype=np.uint64),
        arr_offset=(4,),
    )
    assert failed == [(7,)]
    with pytest.raises(ValueError, match="chunk_grid_shape"):
        s.store.set_virtual_refs_arr("a", (2,), [loc], np.zeros(1, np.uint64), np.zeros(1, np.uint64))
    s.commit("arr")
    want = np.concatenate([np.arange(8), [-1] * 4, np.arange(12, 16), np.arange(12), [-1] * 4])
    np.testing.assert_array_equal(_read(repo), want)


def test_set_virtual_refs_arr_two_dimensional_c_order(data):
    d, prefix, repo, _ = data
    s = repo.writable_session("main")
    _array(s, shape=(4, 4), chunks=(2, 2))
    loc = f"{prefix}raw.bin"
    # Chunk (i, j) is the i*2+j-th group of 4 values of the file.
    s.store.set_virtual_refs_arr(
        "a", (2, 2), [loc] * 4, np.arange(4, dtype=np.uint64) * 16, np.full(4, 16, np.uint64)
    )
    s.commit("2d")
    got = _read(repo)
    blocks = np.arange(N).reshape(4, 2, 2)
    want = np.block([[blocks[0], blocks[1]], [blocks[2], blocks[3]]])
    np.testing.assert_array_equal(got, want)


def test_checksums_refuse_a_file_that_changed(data):
    d, prefix, repo, _ = data
    raw = d / "raw.bin"
    s = repo.writable_session("main")
    _array(s)
    loc = f"{prefix}raw.bin"
    s.store.set_virtual_ref("a/c/0", loc, offset=0, length=16, checksum=_mtime(raw))
    s.store.set_virtual_ref("a/c/1", loc, offset=16, length=16, checksum="not-the-etag")
    s.commit("checksums")
    arr = zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")
    np.testing.assert_array_equal(arr[0:4], np.arange(4))
    with pytest.raises(floe.FloeError, match="modified after the reference was made"):
        arr[4:8]
    # The file changes: the last-modified checksum refuses it too.
    later = os.stat(raw).st_mtime + 10
    os.utime(raw, (later, later))
    with pytest.raises(floe.FloeError, match="modified after the reference was made"):
        zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")[0:4]


def test_reads_outside_authorized_prefixes_are_refused(data, tmp_path):
    d, prefix, repo, storage = data
    s = repo.writable_session("main")
    _array(s)
    s.store.set_virtual_ref("a/c/0", f"{prefix}raw.bin", offset=0, length=16)
    s.commit("one")
    # Not authorized at all.
    plain = floe.Repository.open(storage)
    with pytest.raises(floe.FloeError, match=f"authorize the prefix `{prefix}"):
        _read(plain)
    # Authorized for a sibling directory only.
    other = tmp_path / "other"
    other.mkdir()
    sibling = floe.Repository.open(
        storage, authorize_virtual_chunk_access={f"file://{other}/": None}
    )
    with pytest.raises(floe.FloeError, match="not authorized"):
        _read(sibling)
    # A symbolic link inside the authorized directory to a file outside it.
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\x07" * 16)
    (d / "link.bin").symlink_to(secret)
    s = repo.writable_session("main")
    s.store.set_virtual_ref("a/c/1", f"{prefix}link.bin", offset=0, length=16)
    s.commit("link")
    arr = zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")
    np.testing.assert_array_equal(arr[0:4], np.arange(4))
    with pytest.raises(floe.FloeError, match="not authorized"):
        arr[4:8]
    with pytest.raises(floe.InvalidInputError):
        floe.Repository.open(storage, authorize_virtual_chunk_access={"relative/dir": None})


def test_netcdf4_variable_read_through_virtual_refs(data):
    h5py = need("h5py")
    d, prefix, repo, _ = data
    path = d / "t.nc"
    values = np.linspace(0.0, 1.0, 24, dtype="<f8").reshape(6, 4)
    with h5py.File(path, "w") as f:
        # Contiguous storage, as netCDF4 writes uncompressed variables: one chunk.
        f.create_dataset("temp", data=values)
        # A chunked variable: one virtual ref per HDF5 chunk.
        f.create_dataset("chunked", data=values, chunks=(3, 2))
    with h5py.File(path, "r") as f:
        contiguous = (f["temp"].id.get_offset(), f["temp"].id.get_storage_size())
        dsid = f["chunked"].id
        pieces = [dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks())]
    s = repo.writable_session("main")
    for name, chunks in (("temp", (6, 4)), ("chunked", (3, 2))):
        zarr.create_array(s.store, name=name, shape=(6, 4), chunks=chunks, dtype="<f8",
                          compressors=None, fill_value=np.nan)
    loc = f"{prefix}t.nc"
    s.store.set_virtual_ref("temp/c/0/0", loc, offset=contiguous[0], length=contiguous[1],
                            checksum=_mtime(path))
    s.store.set_virtual_refs("chunked", [
        floe.VirtualChunkSpec([p.chunk_offset[0] // 3, p.chunk_offset[1] // 2], loc,
                              p.byte_offset, p.size)
        for p in pieces
    ])
    s.commit("netcdf")
    for name in ("temp", "chunked"):
        np.testing.assert_array_equal(_read(repo, name), values)


def _floe_cli() -> str:
    cli = os.environ.get("FLOE_BIN") or shutil.which("floe")
    if cli is None:
        if os.environ.get("CI") == "true":
            pytest.fail("FLOE_BIN is not set and no floe on the PATH")
        pytest.skip("no floe CLI")
    return cli


def test_kerchunk_importer_and_python_api_write_the_same_refs(tmp_path):
    cli = _floe_cli()
    d = tmp_path / "src"
    d.mkdir()
    raw = d / "raw.bin"
    raw.write_bytes(np.arange(N, dtype="<i4").tobytes())
    loc = f"file://{raw}"
    zarray = {
        "zarr_format": 2, "shape": [N], "chunks": [CHUNK], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": -1, "order": "C",
    }
    refs = {".zgroup": json.dumps({"zarr_format": 2}), "a/.zarray": json.dumps(zarray)}
    for i in range(N // CHUNK):
        refs[f"a/{i}"] = [loc, 4 * CHUNK * i, 4 * CHUNK]
    refs_file = tmp_path / "refs.json"
    refs_file.write_text(json.dumps({"version": 1, "refs": refs}))
    cli_repo = tmp_path / "cli"
    subprocess.run([cli, "init", str(cli_repo)], check=True, capture_output=True)
    subprocess.run([cli, "import", "kerchunk", str(refs_file), str(cli_repo), "-m", "kerchunk"],
                   check=True, capture_output=True)

    prefix = f"file://{d}/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.local_filesystem_store(str(d)))
    )
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path / "py")), config,
                                  authorize_virtual_chunk_access={prefix: None})
    s = repo.writable_session("main")
    _array(s)
    n = N // CHUNK
    s.store.set_virtual_refs_arr("a", (n,), [loc] * n, np.arange(n, dtype=np.uint64) * 16,
                                 np.full(n, 16, np.uint64), checksum=_mtime(raw))
    s.commit("python")

    imported = floe.Repository.open(floe.local_filesystem_storage(str(cli_repo)),
                                    authorize_virtual_chunk_access={prefix: None})
    by_cli = _virtual_chunk_refs(imported.readonly_session("main")._native, "a")
    by_python = _virtual_chunk_refs(repo.readonly_session("main")._native, "a")
    assert len(by_cli) == n
    assert by_cli == by_python
    np.testing.assert_array_equal(_read(imported), _read(repo))


def test_none_credentials_warn(data):
    d, prefix, repo, storage = data
    with pytest.warns(DeprecationWarning, match="authorize_virtual_chunk_access"):
        floe.Repository.open(storage, authorize_virtual_chunk_access={prefix: None})


def test_locations_must_be_absolute_urls_and_are_kept_verbatim(data):
    d, prefix, repo, _ = data
    s = repo.writable_session("main")
    _array(s)
    for bad in ("", "relative/path", "/abs/path/without/scheme", "1x://host/a"):
        with pytest.raises(floe.InvalidInputError, match="error parsing"):
            s.store.set_virtual_ref("a/c/0", bad, offset=0, length=4, validate_container=False)
        with pytest.raises(floe.InvalidInputError, match="error parsing"):
            s.store.set_virtual_refs("a", [floe.VirtualChunkSpec([0], bad, 0, 4)],
                                     validate_containers=False)
    odd = "https://user:pw@host.example:8443/a//b/../c.bin?versionId=42#frag"
    s.store.set_virtual_refs("a", [floe.VirtualChunkSpec([1], odd, 0, 16)],
                             validate_containers=False)
    assert s.all_virtual_chunk_locations() == [odd]


def test_virtualizarr_to_icechunk_and_append_read_back_identical(tmp_path, as_icechunk):
    """VirtualiZarr (PyPI) writes two NetCDF4 files' refs into floe (``to_icechunk``,
    then ``append_dim="time"``); xarray reads every variable back as netCDF4 does, and
    Icechunk 2.3.0 reads the same repository the same."""
    need("virtualizarr")
    need("h5py")
    import xarray as xr
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser
    from obspec_utils.registry import ObjectStoreRegistry

    d = tmp_path / "nc"
    d.mkdir()
    files = [d / f"f{i}.nc" for i in range(2)]
    for i, f in enumerate(files):
        netcdf_time_file(f, 3 * i)
    prefix = f"file://{d}/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.local_filesystem_store(str(d)))
    )
    repo_path = str(tmp_path / "repo")
    repo = floe.Repository.create(floe.local_filesystem_storage(repo_path), config,
                                  authorize_virtual_chunk_access={prefix: None})
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    write_virtual_files(repo, [
        open_virtual_dataset(f"file://{f}", registry=registry, parser=HDFParser())
        for f in files
    ])
    assert set(repo.readonly_session("main").all_virtual_chunk_locations()) == {
        f"file://{f}" for f in files
    }
    got = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3)
    parts = [xr.open_dataset(f, engine="netcdf4") for f in files]
    want = xr.concat(parts, dim="time", data_vars="minimal")
    for name in ("time", "x", "temp", "raw", "scalar"):
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)
    assert np.isnan(got["temp"].values[1, 2])  # the fill value reads as missing
    for p in parts:
        p.close()

    py312 = os.environ.get("FLOE_PYTHON312")
    if not py312:
        if os.environ.get("CI") == "true":
            pytest.fail("FLOE_PYTHON312 (Python with icechunk 2.x) is not set")
        return
    script = (
        "import icechunk as ic, zarr, json, sys\n"
        "repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]),"
        " authorize_virtual_chunk_access={sys.argv[2]: None})\n"
        "g = zarr.open_group(repo.readonly_session('main').store, mode='r')\n"
        "print(json.dumps({k: g[k][...].tolist() for k in ('raw', 'x', 'time')}))\n"
    )
    out = run_icechunk([py312, "-W", "ignore", "-c", script, repo_path, prefix]).stdout
    by_icechunk = json.loads(out.strip().splitlines()[-1])
    got_raw = zarr.open_group(repo.readonly_session("main").store, mode="r")
    for k in ("raw", "x", "time"):
        assert by_icechunk[k] == got_raw[k][...].tolist(), k


def test_vcc_locations_name_their_container(tmp_path):
    """``vcc://name/path`` (Icechunk 2.x relative locations): stored as written, read
    through the container named ``name``, listed expanded; an unknown name is no
    container, and ``..`` cannot leave the authorized prefix."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "raw.bin").write_bytes(np.arange(N, dtype="<i4").tobytes())
    (tmp_path / "secret.bin").write_bytes(b"\x07" * 64)
    prefix = f"file://{d}/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.local_filesystem_store(str(d)), name="mydata")
    )
    repo = floe.Repository.create(
        floe.local_filesystem_storage(str(tmp_path / "repo")),
        config,
        authorize_virtual_chunk_access={prefix: floe.credentials.LocalFileSystemAccess},
    )
    s = repo.writable_session("main")
    _array(s)
    s.store.set_virtual_ref("a/c/0", "vcc://mydata/raw.bin", offset=0, length=16)
    s.store.set_virtual_ref("a/c/1", "vcc://mydata/sub/../raw.bin", offset=16, length=16)
    for unknown in ("vcc://nope/raw.bin", "vcc://mydata"):
        with pytest.raises(floe.InvalidInputError, match="no matching virtual chunk container"):
            s.store.set_virtual_ref("a/c/2", unknown, offset=0, length=16)
    s.store.set_virtual_ref(
        "a/c/2", "vcc://mydata/../secret.bin", offset=0, length=16, validate_container=False
    )
    assert s.all_virtual_chunk_locations() == [
        f"{prefix}raw.bin", f"{prefix}sub/../raw.bin", f"{prefix}../secret.bin"
    ]
    s.commit("vcc")
    arr = zarr.open_array(repo.readonly_session("main").store, path="a", mode="r")
    np.testing.assert_array_equal(arr[0:8], np.arange(8))
    # The expanded, normalized URL leaves the container: refused, never read.
    with pytest.raises(floe.FloeError, match="no virtual chunk container of this repository covers"):
        arr[8:12]
    # Stored as written: the kerchunk-comparison helper sees the vcc:// text.
    refs = _virtual_chunk_refs(repo.readonly_session("main")._native, "a")
    assert [r[1] for r in refs][:2] == ["vcc://mydata/raw.bin", "vcc://mydata/sub/../raw.bin"]


def test_many_virtual_chunks_of_one_file_are_read_coalesced(tmp_path):
    """Whole-chunk reads from zarr (``store.get`` of one event-loop turn) and
    ``store.get_partial_values`` go through floe's coalesced path: nearby virtual
    chunks of one file share a request. Errors stay per key."""
    import asyncio
    import http.server
    import threading

    from zarr.core.buffer import default_buffer_prototype

    n = 200
    body = np.arange(n, dtype="<i4").tobytes()
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            if self.path != "/d/one.bin":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            a, b = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
            part = body[a : b + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{a + len(part) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            self.wfile.write(part)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        prefix = f"http://127.0.0.1:{srv.server_address[1]}/d/"
        config = floe.RepositoryConfig.default()
        config.set_virtual_chunk_container(floe.VirtualChunkContainer(prefix, floe.http_store()))
        repo = floe.Repository.create(
            floe.local_filesystem_storage(str(tmp_path / "repo")),
            config,
            authorize_virtual_chunk_access={prefix: floe.credentials.HttpAccess},
        )
        s = repo.writable_session("main")
        _array(s, shape=(n + 1,), chunks=(1,))
        locations = [f"{prefix}one.bin"] * n + [f"{prefix}missing.bin"]
        s.store.set_virtual_refs_arr(
            "a", (n + 1,), locations, np.arange(n + 1) * 4, np.full(n + 1, 4)
        )
        s.commit("refs")
        store = repo.readonly_session("main").store
        arr = zarr.open_array(store, path="a", mode="r")
        np.testing.assert_array_equal(arr[:n], np.arange(n))
        # zarr asks `async.concurrency` (10) chunks at a time: one request each time.
        assert 0 < len(hits) <= n // 10 + 1, len(hits)
        hits.clear()
        keys = [(f"a/c/{i}", None) for i in range(n)]
        parts = asyncio.run(store.get_partial_values(default_buffer_prototype(), keys))
        assert b"".join(p.to_bytes() for p in parts) == body
        assert hits == ["/d/one.bin"]
        # The missing file fails its own chunk only.
        with pytest.raises(floe.FloeError, match="not found"):
            arr[n - 1 :]
        np.testing.assert_array_equal(arr[: n - 1], np.arange(n - 1))
    finally:
        srv.shutdown()
        srv.server_close()
