"""Helpers for the cloud emulators of floe's tests (.ci/cloud_emulators.sh): Azure
Blob Storage (Azurite) and Google Cloud Storage (gcp-storage-emulator). Standard
library only.

usage:
  cloudutil.py wait URL SECONDS          wait until URL answers HTTP (any status)
  cloudutil.py azure-mkcontainer NAME    create a container (Shared Key auth from
                                         AZURITE_BLOB_STORAGE_URL, AZURE_STORAGE_ACCOUNT_NAME,
                                         AZURE_STORAGE_ACCOUNT_KEY); an existing one is fine
  cloudutil.py azure-check CONTAINER     conditional writes on Azure: PUT If-None-Match: *
                                         on an existing blob, PUT If-Match: <stale etag>, and
                                         N racing creates of one new blob; exit 1 unless all
                                         are refused but one
  cloudutil.py gcs-check BUCKET          the same on GCS (STORAGE_EMULATOR_HOST) with
                                         x-goog-if-generation-match; prints what the server
                                         does and exits 0 (floe's own tests check that floe
                                         refuses to write where it is ignored), 2 when the
                                         server enforces it (then the tests expecting a
                                         refusal must change)
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid


def request(method: str, url: str, body: bytes = b"", headers: dict | None = None):
    """(status, headers, body) of one HTTP request; HTTP errors are answers too."""
    req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def wait(url: str, seconds: float) -> int:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            request("GET", url)
            return 0
        except OSError:
            time.sleep(0.2)
    print(f"cloudutil: {url} did not answer within {seconds}s", file=sys.stderr)
    return 1


# --- Azure Shared Key ----------------------------------------------------------------


def azure_request(method: str, path: str, query: dict | None = None, body: bytes = b"", headers: dict | None = None):
    """A request to Azurite signed with Shared Key (the account's well-known key)."""
    base = os.environ["AZURITE_BLOB_STORAGE_URL"].rstrip("/")
    account = os.environ["AZURE_STORAGE_ACCOUNT_NAME"]
    key = base64.b64decode(os.environ["AZURE_STORAGE_ACCOUNT_KEY"])
    query = query or {}
    h = {
        "x-ms-date": email.utils.formatdate(usegmt=True),
        "x-ms-version": "2021-08-06",
        **(headers or {}),
    }
    if method == "PUT":
        # urllib adds a Content-Type to every body; it is part of the signature.
        h.setdefault("Content-Type", "application/octet-stream")
        if "restype" not in query:
            h.setdefault("x-ms-blob-type", "BlockBlob")
    length = str(len(body)) if body or method == "PUT" else ""
    if length == "0":
        length = ""
    canon_headers = "".join(f"{k.lower()}:{v}\n" for k, v in sorted(h.items()) if k.lower().startswith("x-ms-"))
    canon_resource = f"/{account}/{account}{path}"
    for k in sorted(query):
        canon_resource += f"\n{k.lower()}:{query[k]}"
    to_sign = "\n".join([
        method, "", "", length, "", h.get("Content-Type", ""), "",
        h.get("If-Modified-Since", ""), h.get("If-Match", ""), h.get("If-None-Match", ""),
        h.get("If-Unmodified-Since", ""), "",
    ]) + "\n" + canon_headers + canon_resource
    sig = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
    h["Authorization"] = f"SharedKey {account}:{sig}"
    url = f"{base}/{account}{urllib.parse.quote(path)}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    return request(method, url, body, h)


def azure_mkcontainer(name: str) -> int:
    status, _, body = azure_request("PUT", f"/{name}", {"restype": "container"})
    if status in (201, 409):
        return 0
    print(f"cloudutil: creating container {name}: HTTP {status} {body[:300]!r}", file=sys.stderr)
    return 1


def race(n: int, put) -> list[int]:
    """Statuses of n threads released together, each calling put(i)."""
    barrier = threading.Barrier(n)
    out = [0] * n

    def run(i: int) -> None:
        barrier.wait()
        out[i] = put(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def report(backend: str, create: bool, update: bool, racing_ok: bool) -> None:
    print(f"{backend}: create-if-not-exists enforced: {create}; compare-and-swap enforced: {update}; "
          f"racing creates have one winner: {racing_ok}")


def azure_check(container: str) -> int:
    p = f"/{container}/conditional-check-{uuid.uuid4().hex}"
    s, h, _ = azure_request("PUT", p, body=b"1", headers={"If-None-Match": "*"})
    if s != 201:
        print(f"azure: first conditional create answered {s}", file=sys.stderr)
        return 1
    etag = {k.lower(): v for k, v in h.items()}.get("etag", "")
    s2, _, _ = azure_request("PUT", p, body=b"2", headers={"If-None-Match": "*"})
    create = s2 in (409, 412)
    s3, _, _ = azure_request("PUT", p, body=b"3", headers={"If-Match": '"0x0000000000000000"'})
    s4, _, _ = azure_request("PUT", p, body=b"4", headers={"If-Match": etag})
    update = s3 == 412 and s4 == 201
    p2 = f"/{container}/conditional-race-{uuid.uuid4().hex}"
    statuses = race(8, lambda i: azure_request("PUT", p2, body=str(i).encode(), headers={"If-None-Match": "*"})[0])
    racing_ok = statuses.count(201) == 1 and all(s in (201, 409, 412) for s in statuses)
    report("azure", create, update, racing_ok)
    return 0 if create and update and racing_ok else 1


def gcs_check(bucket: str) -> int:
    base = os.environ["STORAGE_EMULATOR_HOST"].rstrip("/")
    if "://" not in base:
        base = "http://" + base
    name = f"conditional-check-{uuid.uuid4().hex}"
    url = f"{base}/{bucket}/{name}"
    s, _, _ = request("PUT", url, b"1", {"x-goog-if-generation-match": "0"})
    s2, _, _ = request("PUT", url, b"2", {"x-goog-if-generation-match": "0"})
    s3, _, _ = request("PUT", url, b"3", {"x-goog-if-generation-match": "1"})
    create = s2 == 412
    update = s3 == 412
    name2 = f"conditional-race-{uuid.uuid4().hex}"
    statuses = race(8, lambda i: request("PUT", f"{base}/{bucket}/{name2}", str(i).encode(),
                                         {"x-goog-if-generation-match": "0"})[0])
    racing_ok = statuses.count(200) == 1
    head, _, _ = request("HEAD", url)
    report("gcs", create, update, racing_ok)
    print(f"gcs: first create {s}; HEAD answers {head} (object_store's GCS client needs HEAD and ETag)")
    return 2 if create and update and racing_ok else 0


def main(argv: list[str]) -> int:
    cmd, *args = argv
    if cmd == "wait":
        return wait(args[0], float(args[1]))
    if cmd == "azure-mkcontainer":
        return azure_mkcontainer(args[0])
    if cmd == "azure-check":
        return azure_check(args[0])
    if cmd == "gcs-check":
        return gcs_check(args[0])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
