"""``ChecksumAlgorithm`` (Icechunk 2.3.0's names): S3 options take ``Sha256``, and
then every upload carries an ``x-amz-checksum-sha256`` header holding the body's
SHA-256 (checked here against a local HTTP server that records the requests); the
other algorithms, which floe's S3 client cannot compute, raise ValueError."""

import base64
import hashlib
import http.server
import pickle
import threading

import pytest

import floe
from floe import ChecksumAlgorithm, S3Options


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every PUT with 200 and an ETag, everything else with 404; keeps
    (headers, body) of each PUT in `server.puts`."""

    def do_PUT(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.puts.append((dict(self.headers), body))
        self.send_response(200)
        self.send_header("ETag", '"e"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _missing(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_DELETE = do_POST = _missing  # noqa: N815

    def log_message(self, *args):
        pass


def test_only_sha256_is_accepted_and_shown_in_reprs():
    opts = S3Options(checksum_algorithm=ChecksumAlgorithm.Sha256)
    assert opts.checksum_algorithm == ChecksumAlgorithm.Sha256
    assert "checksum_algorithm=floe.ChecksumAlgorithm.Sha256," in repr(opts)
    assert eval(repr(opts), {"floe": floe}) == opts
    assert pickle.loads(pickle.dumps(opts)) == opts
    for other in (ChecksumAlgorithm.Crc32, ChecksumAlgorithm.Crc32c,
                  ChecksumAlgorithm.Crc64Nvme, ChecksumAlgorithm.Sha1):
        with pytest.raises(ValueError, match="Sha256"):
            S3Options(checksum_algorithm=other)


def test_sha256_uploads_carry_their_checksum():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    httpd.puts = []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        storage = floe.s3_storage(
            bucket="b", prefix="p", region="us-east-1",
            endpoint_url=f"http://127.0.0.1:{httpd.server_address[1]}", allow_http=True,
            access_key_id="k", secret_access_key="s", force_path_style=True,
            checksum_algorithm=ChecksumAlgorithm.Sha256,
        )
        assert "checksum_algorithm: Sha256" in repr(storage)
        # The server ignores preconditions, so creating fails after its first
        # uploads (floe's conditional-write check); the uploads are what matter.
        with pytest.raises(floe.FloeError):
            floe.Repository.create(storage)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert httpd.puts
    for headers, body in httpd.puts:
        sent = {k.lower(): v for k, v in headers.items()}["x-amz-checksum-sha256"]
        assert sent == base64.b64encode(hashlib.sha256(body).digest()).decode()
