"""``redirect_storage``: a read-only repository found by following HTTP redirects, as
Icechunk 2.3.0's. A local HTTP server answers with redirects (two hops) to the
``file://`` URL of a repository; floe opens it, reads its data and refuses writes."""

import http.server
import pickle
import threading

import numpy as np
import pytest
import zarr

import floe


class _Redirects(http.server.BaseHTTPRequestHandler):
    """`/hop` redirects to `/final`, which redirects to the server's `target`;
    anything else is 404."""

    target = ""

    def do_GET(self):  # noqa: N802
        if self.path == "/hop":
            self.send_response(307)
            self.send_header("Location", "/final")
        elif self.path == "/final":
            self.send_response(302)
            self.send_header("Location", self.server.target)
        else:
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirects)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_redirects_lead_to_a_readable_read_only_repository(tmp_path, server):
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path)))
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="a", shape=(3,), chunks=(3,), dtype="i4")[:] = [1, 2, 3]
    s.commit("data")
    server.target = f"file://{tmp_path}"
    base = f"http://127.0.0.1:{server.server_address[1]}/hop"

    storage = floe.redirect_storage(base)
    assert "type: redirect" in repr(storage) and f"file://{tmp_path}" in repr(storage)
    remote = floe.Repository.open(storage)
    arr = zarr.open_array(remote.readonly_session("main").store, path="a", mode="r")
    np.testing.assert_array_equal(arr[:], [1, 2, 3])
    with pytest.raises(floe.FloeError):
        remote.create_branch("dev", remote.lookup_branch("main"))
    again = pickle.loads(pickle.dumps(storage))
    assert floe.Repository.open(again).list_branches() == {"main"}


def test_a_url_that_does_not_redirect_is_a_storage_error(server):
    with pytest.raises(floe.StorageError, match="without a redirect"):
        floe.redirect_storage(f"http://127.0.0.1:{server.server_address[1]}/nothing")
