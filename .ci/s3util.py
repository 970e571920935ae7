"""Minimal S3 client for the CI scripts: signed path-style requests over http.client.

Configuration comes from the same variables the Rust tests read: AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION. Requests are signed with
Signature Version 4 through botocore (a dependency of ministack, so present in the
CI venv); without botocore they go unsigned, which a server with authentication
disabled (ministack's default) accepts.

Also a command line: `python s3util.py wait` (until the endpoint answers) and
`python s3util.py mkbucket NAME` (create a bucket; an existing one is fine).
"""

from __future__ import annotations

import http.client
import os
import sys
import time
import urllib.parse

try:  # pragma: no cover - depends on the venv
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:  # pragma: no cover
    S3SigV4Auth = None


class Config:
    """Endpoint and credentials, from the environment unless given."""

    def __init__(self, endpoint=None, access_key=None, secret_key=None, region=None):
        self.endpoint = (endpoint or os.environ.get("AWS_ENDPOINT_URL") or "").rstrip("/")
        if not self.endpoint:
            raise SystemExit("AWS_ENDPOINT_URL is not set")
        url = urllib.parse.urlsplit(self.endpoint)
        if url.scheme not in ("http", "https"):
            raise SystemExit(f"unsupported endpoint {self.endpoint!r}")
        self.scheme = url.scheme
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.access_key = access_key or os.environ.get("AWS_ACCESS_KEY_ID", "test")
        self.secret_key = secret_key or os.environ.get("AWS_SECRET_ACCESS_KEY", "test")
        self.region = region or os.environ.get("AWS_REGION") or "us-east-1"


class Response:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    def __repr__(self) -> str:
        return f"<{self.status} {self.body[:200]!r}>"


class Client:
    """One HTTP/1.1 keep-alive connection to the S3 endpoint (not thread-safe: use one
    client per thread)."""

    def __init__(self, cfg: Config | None = None, timeout: float = 30.0):
        self.cfg = cfg or Config()
        self.timeout = timeout
        self.conn = None

    def connect(self):
        if self.conn is None:
            cls = (
                http.client.HTTPSConnection
                if self.cfg.scheme == "https"
                else http.client.HTTPConnection
            )
            self.conn = cls(self.cfg.host, self.cfg.port, timeout=self.timeout)
            self.conn.connect()
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def prepare(self, method, bucket, key="", body=b"", headers=None, query=""):
        """A signed request (method, path, body, headers) ready to `send`."""
        path = "/" + bucket
        if key:
            path += "/" + urllib.parse.quote(key, safe="/-_.~")
        if query:
            path += "?" + query
        hdrs = dict(headers or {})
        url = f"{self.cfg.endpoint}{path}"
        if S3SigV4Auth is not None:
            req = AWSRequest(method=method, url=url, data=body, headers=hdrs)
            S3SigV4Auth(
                Credentials(self.cfg.access_key, self.cfg.secret_key), "s3", self.cfg.region
            ).add_auth(req)
            hdrs = dict(req.headers.items())
        hdrs["Content-Length"] = str(len(body))
        return method, path, body, hdrs

    def send(self, prepared) -> Response:
        method, path, body, hdrs = prepared
        for attempt in range(2):
            conn = self.connect()
            try:
                conn.request(method, path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
                return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection the server closed: reconnect once.
                self.close()
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def request(self, method, bucket, key="", body=b"", headers=None, query="") -> Response:
        return self.send(self.prepare(method, bucket, key, body, headers, query))


def wait_ready(cfg: Config, timeout: float) -> bool:
    """Polls the endpoint until it answers any HTTP request."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(cfg.host, cfg.port, timeout=2)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def main(argv):
    if len(argv) >= 1 and argv[0] == "wait":
        timeout = float(argv[1]) if len(argv) > 1 else 60.0
        cfg = Config()
        if not wait_ready(cfg, timeout):
            print(f"S3 endpoint {cfg.endpoint} did not answer within {timeout:.0f}s", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 2 and argv[0] == "mkbucket":
        r = Client().request("PUT", argv[1])
        if r.status == 200 or (r.status == 409 and b"BucketAlreadyOwnedByYou" in r.body):
            return 0
        print(f"creating bucket {argv[1]!r} failed: {r}", file=sys.stderr)
        return 1
    print("usage: s3util.py wait [SECONDS] | mkbucket NAME", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
