#!/usr/bin/env python3
"""`floe serve` against nginx serving the same data as a plain Zarr store.

Builds a repository with one float32 array of CHUNKS chunks of 1 MiB (raw, no
compression; `floe import zarr` of a plain store written here with numpy), exports
its `main` as a plain Zarr v3 store (`floe export`), and serves the repository with
`floe serve` and the export with nginx (Debian's, `sendfile on`, worker_processes
auto). wrk (Debian's) then GETs the chunk URLs round-robin at each client count.

Each (engine, clients) trial starts a fresh server, warms it with one untimed pass
over every chunk, runs wrk for --seconds, and reads the server's peak resident set
(VmHWM; nginx: master plus workers). Engines alternate within every round (ABBA
across rounds); the table gives medians over --runs rounds: chunk GETs per second,
MB/s of chunk bytes (10^6 bytes), p50 and p99 latency in ms, peak RSS in MiB, and
floe / nginx for throughput.

Usage (release binary; nginx and wrk from Debian; a Python with numpy):
    cargo build --release
    python3 benches/serve_vs_nginx.py --floe target/release/floe \\
        [--chunks 256] [--clients 1,16,256] [--seconds 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHUNK_BYTES = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def write_plain_store(root: Path, chunks: int) -> None:
    """A plain Zarr v3 store: group at the root, array `data` of `chunks` 1 MiB chunks."""
    import numpy as np

    side = CHUNK_BYTES // 4
    root.mkdir(parents=True)
    (root / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}})
    )
    arr = root / "data"
    arr.mkdir()
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [chunks * side],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [side]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }
    (arr / "zarr.json").write_text(json.dumps(meta))
    (arr / "c").mkdir()
    rng = np.random.default_rng(0)
    for i in range(chunks):
        (arr / "c" / str(i)).write_bytes(rng.random(side, dtype=np.float32).tobytes())


def peak_rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


class Floe:
    name = "floe serve"

    def __init__(self, binary: str, repo: Path) -> None:
        self.binary, self.repo = binary, repo

    def start(self) -> tuple[subprocess.Popen, int, str]:
        port = free_port()
        proc = subprocess.Popen(
            [self.binary, "serve", str(self.repo), "--bind", f"127.0.0.1:{port}",
             "--max-connections", "1024"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(port)
        return proc, port, "/zarr/branch/main/data/c/"

    def pids(self, proc: subprocess.Popen) -> list[int]:
        return [proc.pid]


class Nginx:
    name = "nginx"

    def __init__(self, root: Path, work: Path) -> None:
        self.root, self.work = root, work

    def start(self) -> tuple[subprocess.Popen, int, str]:
        port = free_port()
        prefix = self.work / f"nginx-{port}"
        prefix.mkdir()
        user = "user root;" if os.geteuid() == 0 else ""
        conf = prefix / "nginx.conf"
        conf.write_text(
            f"""{user}
worker_processes auto;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {self.root};
    }}
}}
"""
        )
        proc = subprocess.Popen(
            ["nginx", "-c", str(conf), "-p", str(prefix)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(port)
        return proc, port, "/data/c/"

    def pids(self, proc: subprocess.Popen) -> list[int]:
        return [proc.pid, *children(proc.pid)]


LUA = """
local n = {n}
local i = 0
request = function()
    i = (i + 1) % n
    return wrk.format("GET", "{prefix}" .. i)
end
"""


def to_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        raise ValueError(text)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]
    return float(m.group(1)) * scale


def run_wrk(port: int, prefix: str, chunks: int, clients: int, seconds: int, work: Path) -> dict:
    script = work / "chunks.lua"
    script.write_text(LUA.format(n=chunks, prefix=prefix))
    threads = min(clients, 2)
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{seconds}s", "--latency",
         "-s", str(script), f"http://127.0.0.1:{port}"],
        capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    if errors or socket_errors:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    return {"rps": rps, "mbps": rps * CHUNK_BYTES / 1e6, "p50": to_ms(lat["50"]),
            "p99": to_ms(lat["99"])}


def warm(port: int, prefix: str, chunks: int) -> None:
    import urllib.request

    for i in range(chunks):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{prefix}{i}") as r:
            if len(r.read()) != CHUNK_BYTES:
                raise RuntimeError("a warm-up read came back short")


def trial(engine, chunks: int, clients: int, seconds: int, work: Path) -> dict:
    proc, port, prefix = engine.start()
    try:
        warm(port, prefix, chunks)
        result = run_wrk(port, prefix, chunks, clients, seconds, work)
        result["rss"] = peak_rss_mib(engine.pids(proc))
        return result
    finally:
        proc.send_signal(signal.SIGTERM if engine.name != "nginx" else signal.SIGQUIT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--floe", default="target/release/floe")
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--clients", default="1,16,256")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed (Debian: apt-get install nginx-light wrk)")
    clients = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="floe-serve-bench-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        write_plain_store(work / "plain", args.chunks)
        subprocess.run([args.floe, "init", str(work / "repo")], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([args.floe, "import", "zarr", str(work / "plain"), str(work / "repo"),
                        "-m", "bench data"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.floe, "export", str(work / "repo"), str(work / "export")],
                       check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(work / "plain")
        engines = [Floe(args.floe, work / "repo"), Nginx(work / "export", work)]
        results: dict[tuple[str, int], list[dict]] = {}
        for r in range(args.runs):
            order = engines if r % 2 == 0 else engines[::-1]
            for c in clients:
                for e in order:
                    res = trial(e, args.chunks, c, args.seconds, work)
                    results.setdefault((e.name, c), []).append(res)
                    print(f"run {r + 1} {e.name:10} {c:4} clients: {res['rps']:9.0f} GET/s "
                          f"{res['mbps']:8.0f} MB/s p50 {res['p50']:.2f} ms p99 {res['p99']:.2f}"
                          f" ms rss {res['rss']:.0f} MiB", file=sys.stderr, flush=True)
    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
          f"{args.chunks} chunks of 1 MiB, {args.seconds} s per trial, medians of {args.runs}\n")
    print("| clients | engine | chunk GET/s | MB/s | p50 (ms) | p99 (ms) | peak RSS (MiB) "
          "| floe / nginx |")
    print("|---|---|---|---|---|---|---|---|")
    for c in clients:
        med = {}
        for e in engines:
            runs = results[(e.name, c)]
            med[e.name] = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
        for e in engines:
            m = med[e.name]
            ratio = (f"{m['mbps'] / med['nginx']['mbps']:.2f}" if e.name != "nginx" else "")
            print(f"| {c} | {e.name} | {m['rps']:,.0f} | {m['mbps']:,.0f} | {m['p50']:.2f} "
                  f"| {m['p99']:.2f} | {m['rss']:.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
