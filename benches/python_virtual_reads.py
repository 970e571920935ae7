"""Reads of many tiny virtual chunks of one file from Python (floe issue 31).

An int32 array of ``--chunks`` chunks of ``--chunk-values`` values each, every chunk a
virtual ref into one local file (back to back) or, with ``--http``, into one file
served by a local HTTP server answering each request after ``--latency-ms``. Reads the
whole array with zarr-python (``arr[...]``: zarr calls ``store.get`` for every chunk,
``async.concurrency`` at once) and with ``store.get_partial_values`` of every chunk
key at once, and prints the time of each and the number of HTTP requests.

    python benches/python_virtual_reads.py [--chunks 10000] [--http] [--latency-ms 1]
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import tempfile
import threading
import time

import numpy as np
import zarr
from zarr.core.buffer import default_buffer_prototype

import floe


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    latency = 0.0
    requests = 0
    protocol_version = "HTTP/1.1"
    # Headers and body are written separately: without this, Nagle and delayed ACKs
    # add ~40 ms to every response.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:  # noqa: N802
        type(self).requests += 1
        if self.latency:
            time.sleep(self.latency)
        first, last = self.headers["Range"].removeprefix("bytes=").split("-")
        part = self.body[int(first) : int(last) + 1]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{int(first) + len(part) - 1}/{len(self.body)}")
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--chunk-values", type=int, default=1)
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    args = ap.parse_args()
    n, per = args.chunks, args.chunk_values
    values = np.arange(n * per, dtype="<i4")
    tmp = tempfile.mkdtemp(prefix="floe-bench-")
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    with open(os.path.join(data, "one.bin"), "wb") as f:
        f.write(values.tobytes())
    server = None
    if args.http:
        _Handler.body = values.tobytes()
        _Handler.latency = args.latency_ms / 1000
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        prefix = f"http://127.0.0.1:{server.server_address[1]}/data/"
        store_config = floe.http_store()
        access = floe.credentials.HttpAccess
    else:
        prefix = f"file://{data}/"
        store_config = floe.local_filesystem_store(data)
        access = floe.credentials.LocalFileSystemAccess
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(floe.VirtualChunkContainer(prefix, store_config))
    storage = floe.local_filesystem_storage(os.path.join(tmp, "repo"))
    repo = floe.Repository.create(storage, config, authorize_virtual_chunk_access={prefix: access})
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="v", shape=(n * per,), chunks=(per,), dtype="<i4", compressors=None, fill_value=-1)
    s.store.set_virtual_refs_arr(
        "v", (n,), [f"{prefix}one.bin"] * n, np.arange(n) * 4 * per, np.full(n, 4 * per)
    )
    s.commit("refs")
    store = repo.readonly_session("main").store
    arr = zarr.open_array(store, path="v", mode="r")
    t = time.perf_counter()
    got = arr[...]
    zarr_s = time.perf_counter() - t
    assert np.array_equal(got, values)
    zarr_requests = _Handler.requests
    _Handler.requests = 0
    keys = [(f"v/c/{i}", None) for i in range(n)]
    t = time.perf_counter()
    parts = asyncio.run(store.get_partial_values(default_buffer_prototype(), keys))
    gpv_s = time.perf_counter() - t
    assert b"".join(p.to_bytes() for p in parts) == values.tobytes()
    _Handler.requests, gpv_requests = 0, _Handler.requests

    async def per_key() -> list:
        # What FloeStore.get did before batching: one native get per key, 10 at once.
        limit = asyncio.Semaphore(10)

        async def one(k: str):
            async with limit:
                return await store._native.get(k, 0, 0, 0)

        return await asyncio.gather(*(one(k) for k, _ in keys))

    t = time.perf_counter()
    single = asyncio.run(per_key())
    single_s = time.perf_counter() - t
    assert b"".join(single) == values.tobytes()
    where = f"HTTP, {args.latency_ms} ms per request" if args.http else "local file"
    print(f"{n} virtual chunks of {4 * per} B in one file ({where}):")
    print(f"  zarr arr[...]            {zarr_s:.3f} s" + (f", {zarr_requests} requests" if args.http else ""))
    print(f"  store.get_partial_values {gpv_s:.3f} s" + (f", {gpv_requests} requests" if args.http else ""))
    print(f"  per-key native gets      {single_s:.3f} s" + (f", {_Handler.requests} requests" if args.http else "")
          + "  (the path before batching)")
    if server is not None:
        server.shutdown()


if __name__ == "__main__":
    main()
