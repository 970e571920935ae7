"""Per-container credentials for virtual chunk reads (Icechunk's
``authorize_virtual_chunk_access=containers_credentials({...})``), and the reader's
control of where S3 requests go.

Two servers stand in for S3:

- the S3 test server (ministack; ``AWS_ENDPOINT_URL``, ``FLOE_TEST_S3_BUCKET``, as CI
  starts it with ``.ci/s3_server.sh``): real S3 reads through two containers with
  different credentials (static keys, a refreshable callback). It accepts any key, so
- a local fake S3 endpoint (a thread in this process) answers path-style ranged GETs
  only when the SigV4 signature names the expected access key id, ``403`` otherwise:
  it shows that each container's reads carry that container's credentials, that
  wrong credentials fail with ``StorageError``, and that a repository naming an
  endpoint the reader did not give is never contacted (``InvalidInputError``).
"""

from __future__ import annotations

import http.server
import os
import threading
import urllib.request
import uuid

import numpy as np
import pytest
import zarr

import floe

N = 8  # int32 values per object
VALUES_A = np.arange(N, dtype="<i4")
VALUES_B = np.arange(100, 100 + N, dtype="<i4")

# Calls of the refreshable callback of this process (it is unpickled here).
CALLS: list[str] = []


def fresh_keys() -> floe.S3StaticCredentials:
    """The refreshable callback: records the call, returns the B key."""
    CALLS.append("called")
    return floe.S3StaticCredentials(access_key_id="KEYB", secret_access_key="secret-b")


def _s3_server() -> tuple[str, str]:
    """The S3 test server's endpoint and bucket; fails under CI when it is not set
    up, skips elsewhere."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    bucket = os.environ.get("FLOE_TEST_S3_BUCKET")
    if not endpoint or not bucket:
        if os.environ.get("CI") == "true":
            pytest.fail("the S3 test server (AWS_ENDPOINT_URL, FLOE_TEST_S3_BUCKET) is not set up")
        pytest.skip("no S3 test server (run under .ci/s3_server.sh)")
    return endpoint.rstrip("/"), bucket


def _put(endpoint: str, bucket: str, key: str, body: bytes) -> None:
    """An unsigned path-style PUT (the test server does not check signatures)."""
    req = urllib.request.Request(f"{endpoint}/{bucket}/{key}", data=body, method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status in (200, 201), resp.status


def _container(prefix: str, endpoint: str) -> floe.VirtualChunkContainer:
    return floe.VirtualChunkContainer(
        prefix,
        floe.s3_store(
            region="us-east-1",
            endpoint_url=endpoint,
            allow_http=True,
            s3_compatible=True,
            force_path_style=True,
        ),
    )


def _write_two_arrays(repo, loc_a: str, loc_b: str) -> None:
    s = repo.writable_session("main")
    for name, loc in (("a", loc_a), ("b", loc_b)):
        zarr.create_array(
            s.store, name=name, shape=(N,), chunks=(N,), dtype="<i4", compressors=None,
            fill_value=-1,
        )
        s.store.set_virtual_ref(f"{name}/c/0", loc, offset=0, length=4 * N)
    s.commit("two containers")


def _read(repo, name: str) -> np.ndarray:
    return zarr.open_array(repo.readonly_session("main").store, path=name, mode="r")[...]


def test_two_containers_with_their_own_credentials_on_the_s3_server(tmp_path):
    endpoint, bucket = _s3_server()
    run = f"virtual-credentials/{uuid.uuid4()}"
    _put(endpoint, bucket, f"{run}/a/data.bin", VALUES_A.tobytes())
    _put(endpoint, bucket, f"{run}/b/data.bin", VALUES_B.tobytes())
    prefix_a, prefix_b = f"s3://{bucket}/{run}/a/", f"s3://{bucket}/{run}/b/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(_container(prefix_a, endpoint))
    config.set_virtual_chunk_container(_container(prefix_b, endpoint))
    credentials = floe.containers_credentials(
        {
            prefix_a: floe.s3_credentials(access_key_id="KEYA", secret_access_key="secret-a"),
            prefix_b: floe.s3_refreshable_credentials(fresh_keys),
        }
    )
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    repo = floe.Repository.create(storage, config, authorize_virtual_chunk_access=credentials)
    _write_two_arrays(repo, f"{prefix_a}data.bin", f"{prefix_b}data.bin")
    CALLS.clear()
    again = floe.Repository.open(storage, config, authorize_virtual_chunk_access=credentials)
    np.testing.assert_array_equal(_read(again, "a"), VALUES_A)
    assert CALLS == [], "container a's read used container b's credentials"
    np.testing.assert_array_equal(_read(again, "b"), VALUES_B)
    assert CALLS == ["called"], "container b's refreshable credentials were not used"
    # A callback that fails fails the read of its container only.
    failing = floe.containers_credentials(
        {
            prefix_a: floe.s3_credentials(access_key_id="KEYA", secret_access_key="secret-a"),
            prefix_b: floe.s3_refreshable_credentials(_no_keys),
        }
    )
    broken = floe.Repository.open(storage, config, authorize_virtual_chunk_access=failing)
    np.testing.assert_array_equal(_read(broken, "a"), VALUES_A)
    with pytest.raises(floe.StorageError, match="no keys today"):
        _read(broken, "b")


def _no_keys() -> floe.S3StaticCredentials:
    raise RuntimeError("no keys today")


class _FakeS3(http.server.BaseHTTPRequestHandler):
    """Serves ``objects`` (path -> bytes) to GETs signed with ``key_for[path]``."""

    objects: dict[str, bytes] = {}
    key_for: dict[str, str] = {}
    requests: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        auth = self.headers.get("Authorization") or ""
        key = auth.split("Credential=")[1].split("/")[0] if "Credential=" in auth else None
        self.requests.append((self.path, key))
        body = self.objects.get(self.path)
        if body is None:
            self._answer(404, b"")
        elif key != self.key_for[self.path]:
            self._answer(403, b"<Error><Code>AccessDenied</Code></Error>")
        else:
            first, last = self.headers["Range"].removeprefix("bytes=").split("-")
            part = body[int(first) : int(last) + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{int(first) + len(part) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            self.wfile.write(part)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_s3():
    """Two fake S3 endpoints (the reader's and another one): each serves
    ``/bucket/a/data.bin`` to key ``KEYA`` and ``/bucket/b/data.bin`` to ``KEYB``.
    Yields their URLs and request logs."""
    servers = []
    for _ in range(2):
        handler = type(
            "Handler",
            (_FakeS3,),
            {
                "objects": {"/bucket/a/data.bin": VALUES_A.tobytes(), "/bucket/b/data.bin": VALUES_B.tobytes()},
                "key_for": {"/bucket/a/data.bin": "KEYA", "/bucket/b/data.bin": "KEYB"},
                "requests": [],
            },
        )
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append((srv, handler))
    yield [(f"http://127.0.0.1:{srv.server_address[1]}", h.requests) for srv, h in servers]
    for srv, _ in servers:
        srv.shutdown()
        srv.server_close()


def _fake_repo(tmp_path, endpoint: str):
    """A repository whose config names ``endpoint`` for ``s3://bucket/a/`` and
    ``s3://bucket/b/``, holding arrays ``a`` and ``b`` pointing into them."""
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(_container("s3://bucket/a/", endpoint))
    config.set_virtual_chunk_container(_container("s3://bucket/b/", endpoint))
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    repo = floe.Repository.create(storage, config)
    _write_two_arrays(repo, "s3://bucket/a/data.bin", "s3://bucket/b/data.bin")
    return storage, config


def test_each_container_signs_with_its_credentials_and_wrong_ones_fail(tmp_path, fake_s3):
    (endpoint, requests), _ = fake_s3
    storage, config = _fake_repo(tmp_path, endpoint)
    right = floe.containers_credentials(
        {
            "s3://bucket/a/": floe.s3_static_credentials(access_key_id="KEYA", secret_access_key="x"),
            "s3://bucket/b/": floe.s3_refreshable_credentials(fresh_keys),
        }
    )
    repo = floe.Repository.open(storage, config, authorize_virtual_chunk_access=right)
    np.testing.assert_array_equal(_read(repo, "a"), VALUES_A)
    np.testing.assert_array_equal(_read(repo, "b"), VALUES_B)
    assert requests == [("/bucket/a/data.bin", "KEYA"), ("/bucket/b/data.bin", "KEYB")]
    # Container b with a's key: b's read is refused by the server, a's still reads.
    requests.clear()
    swapped = floe.containers_credentials(
        {
            "s3://bucket/a/": floe.s3_static_credentials(access_key_id="KEYA", secret_access_key="x"),
            "s3://bucket/b/": floe.s3_static_credentials(access_key_id="KEYA", secret_access_key="x"),
        }
    )
    repo = floe.Repository.open(storage, config, authorize_virtual_chunk_access=swapped)
    np.testing.assert_array_equal(_read(repo, "a"), VALUES_A)
    with pytest.raises(floe.StorageError, match="denied"):
        _read(repo, "b")
    assert requests == [("/bucket/a/data.bin", "KEYA"), ("/bucket/b/data.bin", "KEYA")]
    # Anonymous credentials send no signature: refused as well.
    anonymous = floe.containers_credentials(
        {"s3://bucket/a/": floe.s3_anonymous_credentials(), "s3://bucket/b/": floe.s3_anonymous_credentials()}
    )
    repo = floe.Repository.open(storage, config, authorize_virtual_chunk_access=anonymous)
    with pytest.raises(floe.StorageError):
        _read(repo, "a")
    assert requests[-1] == ("/bucket/a/data.bin", None)
    # Credentials for another kind of store are refused before any request.
    n = len(requests)
    wrong_kind = floe.containers_credentials({"s3://bucket/a/": floe.gcs_anonymous_credentials()})
    repo = floe.Repository.open(storage, config, authorize_virtual_chunk_access=wrong_kind)
    with pytest.raises(floe.InvalidInputError, match="GCS credentials for an S3 container"):
        _read(repo, "a")
    assert len(requests) == n


def test_a_repository_endpoint_the_reader_did_not_give_is_never_contacted(tmp_path, fake_s3):
    (mine, my_requests), (theirs, their_requests) = fake_s3
    # The repository's stored configuration names `theirs`.
    storage, _ = _fake_repo(tmp_path, theirs)
    credentials = floe.containers_credentials(
        {"s3://bucket/a/": floe.s3_static_credentials(access_key_id="KEYA", secret_access_key="x")}
    )
    # Opened without a config of the reader's: the stored endpoint is not contacted.
    repo = floe.Repository.open(storage, authorize_virtual_chunk_access=credentials)
    with pytest.raises(floe.InvalidInputError, match="which the reader did not choose"):
        _read(repo, "a")
    # The reader's own container for the prefix wins over the stored one.
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(_container("s3://bucket/a/", mine))
    repo = floe.Repository.open(storage, config, authorize_virtual_chunk_access=credentials)
    np.testing.assert_array_equal(_read(repo, "a"), VALUES_A)
    assert my_requests == [("/bucket/a/data.bin", "KEYA")]
    # Only requests of the repository's creation (none) reached the other endpoint.
    assert their_requests == []
