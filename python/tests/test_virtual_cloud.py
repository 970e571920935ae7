"""Virtual chunks in Azure Blob Storage and Google Cloud Storage containers
(``azure_store`` / ``gcs_store``, floe issue 31), on the emulators CI runs
(``.ci/cloud_emulators.sh``): a file is put in the emulator, zarr arrays get virtual
refs into it, the commit is reopened with the prefix authorized and the reader's
credentials, and the values read back; an unauthorized prefix, a changed file and
settings only the repository names are typed errors.

gcp-storage-emulator answers no ``ETag``/``Last-Modified`` header (object_store's
GCS client requires them; real GCS always sends both) and does not decode the
percent-encoded object names object_store sends: the GCS test reads through a
forwarding proxy (a thread here) that decodes the path and adds those two headers;
bytes, ranges and statuses are the emulator's.

Needs ``FLOE_TEST_AZURE_CONTAINER`` (with ``AZURITE_BLOB_STORAGE_URL`` and the
``AZURE_STORAGE_*`` variables) and ``FLOE_TEST_GCS_BUCKET`` (with
``STORAGE_EMULATOR_HOST``): skipped without them, failed under ``CI=true``.
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
import zarr

import floe

N = 4  # int32 values per chunk
# Three chunks' values at offsets 0, 32 and 64 of the object (gaps between them).
VALUES = [np.arange(i * 10, i * 10 + N, dtype="<i4") for i in range(3)]
OFFSETS = [0, 32, 64]


def _file() -> bytes:
    body = bytearray(b"-" * 80)
    for off, v in zip(OFFSETS, VALUES):
        body[off : off + 4 * N] = v.tobytes()
    return bytes(body)


def _need(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"{var} is required when CI=true (.ci/run starts the emulators)")
        pytest.skip(f"{var} is not set (start the emulators with .ci/cloud_emulators.sh)")
    return value


def _cloudutil():
    """The CI's emulator helper (.ci/cloudutil.py: Shared Key requests to Azurite)."""
    path = Path(__file__).resolve().parents[2] / ".ci" / "cloudutil.py"
    spec = importlib.util.spec_from_file_location("floe_cloudutil", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(repo, location: str) -> None:
    """Array ``v`` (3 chunks of N int32) whose chunks are virtual refs into
    ``location``, committed."""
    s = repo.writable_session("main")
    zarr.create_array(
        s.store, name="v", shape=(3 * N,), chunks=(N,), dtype="<i4", compressors=None,
        fill_value=-1,
    )
    for i, off in enumerate(OFFSETS):
        s.store.set_virtual_ref(f"v/c/{i}", location, offset=off, length=4 * N)
    s.commit("virtual refs")


def _read(repo) -> np.ndarray:
    return zarr.open_array(repo.readonly_session("main").store, path="v", mode="r")[...]


def test_azure_virtual_refs_on_azurite(tmp_path):
    container = _need("FLOE_TEST_AZURE_CONTAINER")
    _need("AZURITE_BLOB_STORAGE_URL")
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1")
    key = _need("AZURE_STORAGE_ACCOUNT_KEY")
    util = _cloudutil()
    name = f"virtual-{uuid.uuid4().hex[:12]}/file.bin"
    status, headers, _ = util.azure_request("PUT", f"/{container}/{name}", body=_file())
    assert status == 201, status
    location = f"az://{container}/{name}"
    prefix = f"az://{container}/"

    config = floe.RepositoryConfig.default()
    store = floe.storage.azure_store(account=account, config={"azure_storage_use_emulator": "true"})
    assert isinstance(store, floe.ObjectStoreConfig.Azure)
    config.set_virtual_chunk_container(floe.VirtualChunkContainer(prefix, store))
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    _write(floe.Repository.create(storage, config), location)

    authorized = f"az://{container}/{name.split('/')[0]}/"
    creds = floe.containers_credentials({authorized: floe.azure_credentials(access_key=key)})
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=creds)
    assert np.array_equal(_read(repo), np.concatenate(VALUES))

    # Another prefix of the container is not authorized.
    elsewhere = floe.containers_credentials(
        {f"az://{container}/elsewhere/": floe.azure_credentials(access_key=key)}
    )
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=elsewhere)
    with pytest.raises(floe.InvalidInputError, match="elsewhere|authoriz"):
        _read(repo)

    # GCS credentials for an Azure container.
    wrong = floe.containers_credentials({authorized: floe.gcs_credentials(anonymous=True)})
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=wrong)
    with pytest.raises(floe.InvalidInputError, match="GCS credentials for an Azure container"):
        _read(repo)

    # An endpoint only the repository names is not contacted with the reader's key.
    hostile = floe.RepositoryConfig.default()
    hostile.set_virtual_chunk_container(
        floe.VirtualChunkContainer(
            prefix,
            floe.storage.azure_store(
                account=account, config={"azure_storage_endpoint": "http://127.0.0.1:9/acct"}
            ),
        )
    )
    storage2 = floe.local_filesystem_storage(str(tmp_path / "hostile"))
    _write(floe.Repository.create(storage2, hostile), location)
    repo = floe.Repository.open(storage2, authorize_virtual_chunk_access=creds)
    with pytest.raises(floe.InvalidInputError, match="which the reader did not choose"):
        _read(repo)

    # The file changes: pinned to its ETag, the read fails.
    s = floe.Repository.open(storage, authorize_virtual_chunk_access=creds).writable_session("main")
    etag = {k.lower(): v for k, v in headers.items()}["etag"]
    s.store.set_virtual_ref("v/c/0", location, offset=0, length=4 * N, checksum=etag)
    s.commit("pinned")
    status, _, _ = util.azure_request("PUT", f"/{container}/{name}", body=_file()[::-1])
    assert status == 201, status
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=creds)
    with pytest.raises(floe.StorageError):
        _read(repo)


class _EtagProxy(http.server.BaseHTTPRequestHandler):
    """Forwards GETs to the emulator (``self.server.upstream``) with the path
    decoded, adding ``ETag`` and ``Last-Modified``; records the paths requested."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        req = urllib.request.Request(self.server.upstream + urllib.parse.unquote(self.path))
        if self.headers.get("Range"):
            req.add_header("Range", self.headers["Range"])
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, headers, body = resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            status, headers, body = e.code, dict(e.headers), e.read()
        self.send_response(status)
        for k in ("Content-Range", "Content-Type"):
            if k in headers:
                self.send_header(k, headers[k])
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"emulator-object"')
        self.send_header("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def gcs_proxy():
    emulator = _need("STORAGE_EMULATOR_HOST")
    if "://" not in emulator:
        emulator = f"http://{emulator}"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EtagProxy)
    server.upstream = emulator.rstrip("/")
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_gcs_virtual_refs_on_the_emulator(tmp_path, gcs_proxy):
    bucket = _need("FLOE_TEST_GCS_BUCKET")
    name = f"virtual-{uuid.uuid4().hex[:12]}/file.bin"
    req = urllib.request.Request(f"{gcs_proxy.upstream}/{bucket}/{name}", data=_file(), method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200, resp.status
    location = f"gs://{bucket}/{name}"
    prefix = f"gs://{bucket}/"
    proxy_url = f"http://127.0.0.1:{gcs_proxy.server_address[1]}"

    # The repository's container names the proxy as its base URL.
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.gcs_store({"google_base_url": proxy_url}))
    )
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    _write(floe.Repository.create(storage, config), location)
    authorized = f"gs://{bucket}/{name.split('/')[0]}/"
    creds = floe.containers_credentials({authorized: floe.gcs_credentials(anonymous=True)})

    # Only the repository names that base URL: refused, nothing requested.
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=creds)
    with pytest.raises(floe.InvalidInputError, match="which the reader did not choose"):
        _read(repo)
    assert gcs_proxy.paths == []

    # The reader passes the container in its own config: trusted, read back, the
    # three chunks in one ranged request.
    mine = floe.RepositoryConfig.default()
    mine.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.gcs_store({"google_base_url": proxy_url}))
    )
    repo = floe.Repository.open(storage, config=mine, authorize_virtual_chunk_access=creds)
    assert np.array_equal(_read(repo), np.concatenate(VALUES))
    assert [urllib.parse.unquote(p) for p in gcs_proxy.paths] == [f"/{bucket}/{name}"]

    # Another prefix of the bucket is not authorized.
    elsewhere = floe.containers_credentials(
        {f"gs://{bucket}/elsewhere/": floe.gcs_credentials(anonymous=True)}
    )
    repo = floe.Repository.open(storage, config=mine, authorize_virtual_chunk_access=elsewhere)
    with pytest.raises(floe.InvalidInputError):
        _read(repo)
    assert len(gcs_proxy.paths) == 1


def test_reopen_with_a_config_trusts_its_containers(tmp_path, gcs_proxy):
    """``Repository.reopen(config=...)`` trusts the containers of its config as
    ``open(config=...)`` does, and an ``authorize_virtual_chunk_access`` passed to it
    applies (Icechunk's ``reopen``); without one the authorization is kept."""
    bucket = _need("FLOE_TEST_GCS_BUCKET")
    name = f"virtual-{uuid.uuid4().hex[:12]}/file.bin"
    req = urllib.request.Request(f"{gcs_proxy.upstream}/{bucket}/{name}", data=_file(), method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200, resp.status
    location = f"gs://{bucket}/{name}"
    prefix = f"gs://{bucket}/"
    proxy_url = f"http://127.0.0.1:{gcs_proxy.server_address[1]}"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.gcs_store({"google_base_url": proxy_url}))
    )
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    _write(floe.Repository.create(storage, config), location)
    authorized = f"gs://{bucket}/{name.split('/')[0]}/"
    creds = floe.containers_credentials({authorized: floe.gcs_credentials(anonymous=True)})

    # Opened without a config: the repository's base URL is not trusted.
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=creds)
    with pytest.raises(floe.InvalidInputError, match="which the reader did not choose"):
        _read(repo)
    # Reopened with a config naming it: trusted, the authorization kept.
    mine = floe.RepositoryConfig.default()
    mine.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.gcs_store({"google_base_url": proxy_url}))
    )
    reopened = repo.reopen(config=mine)
    assert np.array_equal(_read(reopened), np.concatenate(VALUES))
    # The original keeps its trust (none).
    with pytest.raises(floe.InvalidInputError, match="which the reader did not choose"):
        _read(repo)

    # Opened with no authorization; the authorization passed to reopen applies.
    bare = floe.Repository.open(storage, config=mine)
    with pytest.raises(floe.InvalidInputError):
        _read(bare)
    assert np.array_equal(
        _read(bare.reopen(authorize_virtual_chunk_access=creds)), np.concatenate(VALUES)
    )
    # And replaces the one it was opened with.
    elsewhere = floe.containers_credentials(
        {f"gs://{bucket}/elsewhere/": floe.gcs_credentials(anonymous=True)}
    )
    with pytest.raises(floe.InvalidInputError):
        _read(reopened.reopen(authorize_virtual_chunk_access=elsewhere))
