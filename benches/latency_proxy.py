"""A request-delaying HTTP/1.1 proxy on 127.0.0.1 for `benches/s3_latency.py`.

It stands between a client and an S3-compatible server (ministack) and adds a fixed
delay (default 20 ms) before forwarding each request, and the same delay when a
client opens a connection (a TCP handshake costs a round trip too), so that a
loopback server behaves like object storage one round trip away. Responses go back
unchanged.

It counts what it forwards: requests by method and connections opened, between
marks that a client sets with plain requests to the proxy itself (answered by the
proxy, never forwarded):

- `GET /__mark/start` resets the counters;
- `GET /__mark/stop` answers with the counts since the last start, as JSON
  (`{"requests": N, "connections": C, "by_method": {"GET": n, ...}}`).

Requests are parsed only as far as needed to find where each ends (a
`Content-Length` body or a chunked body); `Expect: 100-continue` works because the
request head is forwarded before the body is read.

    python benches/latency_proxy.py --upstream 127.0.0.1:PORT [--delay-ms 20] [--port 0]

With `LATENCY_PROXY_TRACE=FILE` in its environment it also appends one line per
forwarded request to FILE: milliseconds since the last start mark, the connection's
number, method and path (to see which requests of an operation wait for each other).

prints `listening 127.0.0.1:PORT` once it accepts connections. Loopback only.
"""

import argparse
import asyncio
import json
import os
import sys
import time


class Counts:
    def __init__(self):
        self.reset()

    def reset(self):
        self.by_method = {}
        self.connections = 0
        self.started = time.monotonic()
        trace = os.environ.get("LATENCY_PROXY_TRACE")
        if trace:
            with open(trace, "a") as f:
                f.write("mark start\n")

    def trace(self, conn, method, path):
        trace = os.environ.get("LATENCY_PROXY_TRACE")
        if trace:
            ms = (time.monotonic() - self.started) * 1000
            with open(trace, "a") as f:
                f.write(f"{ms:9.1f} conn{conn} {method} {path}\n")

    def as_json(self):
        return json.dumps({
            "requests": sum(self.by_method.values()),
            "connections": self.connections,
            "by_method": self.by_method,
        })


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def forward_body(head, client, upstream):
    """Forwards the body of the request whose head (bytes, without the body) is
    `head`."""
    length = None
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size_line = await client.readuntil(b"\r\n")
            upstream.write(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                # Trailers, then an empty line.
                while True:
                    line = await client.readuntil(b"\r\n")
                    upstream.write(line)
                    if line == b"\r\n":
                        break
                break
            upstream.write(await client.readexactly(size + 2))
            await upstream.drain()
    elif length:
        left = length
        while left > 0:
            data = await client.read(min(left, 1 << 16))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            upstream.write(data)
            left -= len(data)
            await upstream.drain()


async def serve(upstream_host, upstream_port, delay, port, counts):
    async def handle(client_r, client_w):
        counts.connections += 1
        conn = counts.connections
        up_r = up_w = None
        back = None
        try:
            first = True
            while True:
                try:
                    head = await client_r.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, _, rest = request_line.partition(" ")
                path = rest.rsplit(" ", 1)[0]
                if path.startswith("/__mark/"):
                    if path == "/__mark/start":
                        counts.reset()
                        body = b"{}"
                    else:
                        body = counts.as_json().encode()
                    client_w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   b"Connection: close\r\n"
                                   b"Content-Length: %d\r\n\r\n" % len(body) + body)
                    await client_w.drain()
                    break
                if first:
                    # The handshake's round trip (a mark is not counted as one).
                    first = False
                    await asyncio.sleep(delay)
                    up_r, up_w = await asyncio.open_connection(upstream_host, upstream_port)
                    back = asyncio.ensure_future(pipe(up_r, client_w))
                counts.by_method[method] = counts.by_method.get(method, 0) + 1
                counts.trace(conn, method, path)
                await asyncio.sleep(delay)
                up_w.write(head)
                await up_w.drain()
                await forward_body(head, client_r, up_w)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if up_w is not None:
                try:
                    up_w.close()
                except Exception:
                    pass
            if back is not None:
                try:
                    await asyncio.wait_for(back, 5)
                except Exception:
                    pass
            try:
                client_w.close()
            except Exception:
                pass

    server = await asyncio.start_server(handle, "127.0.0.1", port, limit=1 << 20)
    addr = server.sockets[0].getsockname()
    print(f"listening {addr[0]}:{addr[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream", required=True, help="HOST:PORT of the S3 server (loopback)")
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    host, _, port = a.upstream.rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        sys.exit("latency_proxy: loopback upstreams only")
    asyncio.run(serve(host, int(port), a.delay_ms / 1000.0, a.port, Counts()))


if __name__ == "__main__":
    main()
