"""floe and Icechunk 2.3.0 on object storage one round trip away: the S3 test server
(ministack, started here as `.ci/s3_server.sh` does) behind `latency_proxy.py`, which
adds a fixed delay to every request and every new connection, at 0 and 20 ms.

    python benches/s3_latency.py [--delays 0,20] [--runs 3] [--workload NAME]...
        [--floe-bin PATH] [--icechunk-python PY] [--ministack-python PY] [--json OUT]
        [--small-chunks 1000]

floe runs as the `s3_latency` bench executable (`benches/s3_latency.rs`; built with
`cargo bench --bench s3_latency --no-run` when `--floe-bin` is not given), Icechunk
2.3.0 through zarr-python in its own interpreter (default: the py312 venv; this file
re-runs itself there with `--engine icechunk`). Both make spec-2 repositories with
default options. Each run of a workload is its own process on a fresh prefix: the
setup (untimed) talks to the server directly, then the timed part goes through the
proxy on a fresh repository handle; the engines alternate run by run (floe,
Icechunk, floe, ...). The proxy counts requests and connections during the timed
part only (see its marks). The table shows the median of the runs (seconds), the
ratio Icechunk / floe, and each engine's requests and connections (of the median
run).

Workloads:

- create: a new spec-2 repository on an empty prefix (a fresh client).
- write_64mib: 64 MiB float32, 1 MiB chunks (256 x 1024), bytes + zstd level 3,
  written through the array API (create + write) plus the commit.
- read_64mib: that array, written and committed untimed, read back whole through
  the array API from a read-only session on main (opening the array included).
- ancestry_200: a branch of 200 commits (attribute changes); open the repository
  (fresh handle) and list the whole ancestry of main.
- open_read_one: open the repository (fresh handle), read-only session on main, open
  a 1-D array of 1,000 4 KiB chunks and read one chunk.
- attr_commit: a writable session, the root group's attributes set, the commit
  (median of 5 per run).
- small_write_commit / small_read: 1,000 (`--small-chunks`) chunks of 4 KiB (1-D float32, no
  compression) written through the array API plus the commit / read back whole.
- commit_100_arrays: a repository with 100 small arrays (one inline chunk each); a
  writable session writes a new value in each and commits.
- ancestry_200_spec1 (floe only): ancestry_200 on a spec-1 repository.
- The floor of the two 64 MiB rows (engine "floor", floe's executable): the same
  64 chunks, encoded untimed, moved by the same S3 client with no format, plus the
  sequential round trips the format cannot avoid. Write: one GET (the tip snapshot
  a session reads before it writes), the 64 PUTs, one PUT (the commit point, after
  every write). Read: three GETs (the chain `repo` object -> snapshot -> manifest,
  each naming the next), then the 64 GETs. Each run tries 8, 16, 32 and 64 requests
  in flight on a fresh client and keeps the fastest (the rate the link and the
  server allow); the table gives floe's time over it.
- commits_8x5: a repository with 8 small arrays (setup); then 8 processes, started
  together, each open the repository (fresh handle) and make 5 commits to main, each
  writing its own array (so they rebase over each other; Icechunk with
  `rebase_with=ConflictDetector()`). The time runs from the agreed start (every
  process waits for it after its imports) to the last process's end.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKLOADS = [
    "create",
    "write_64mib",
    "read_64mib",
    "ancestry_200",
    "open_read_one",
    "attr_commit",
    "small_write_commit",
    "small_read",
    "commit_100_arrays",
    "ancestry_200_spec1",
    "commits_8x5",
]
FLOE_ONLY = {"ancestry_200_spec1"}
# The bulk rows' floors (run by floe's executable, engine "floor"): the same encoded
# bytes moved by the same S3 client with no format, plus the round trips the format
# cannot avoid.
FLOORS = {"write_64mib": "floor_write_64mib", "read_64mib": "floor_read_64mib"}

MIB = 64
COLS = 1024
CHUNK_ROWS = 256
SMALL_CHUNKS = int(os.environ.get("FLOE_BENCH_SMALL_CHUNKS", "1000"))
SMALL_LEN = 1024
COMMITS = 200
ARRAYS = 100
ATTR_COMMITS = 5
WORKERS = 8
WORKER_COMMITS = 5


def mark(proxy, what):
    with urllib.request.urlopen(f"http://{proxy}/__mark/{what}", timeout=30) as r:
        return json.loads(r.read())


# ---------------------------------------------------------------- Icechunk side


def icechunk_engine(args):
    import icechunk
    import numpy as np
    import zarr
    from zarr.codecs import ZstdCodec

    def storage(endpoint):
        return icechunk.s3_storage(
            bucket=args.bucket, prefix=args.prefix, region="us-east-1",
            endpoint_url=f"http://{endpoint}", allow_http=True,
            access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            force_path_style=True)

    def create():
        return icechunk.Repository.create(storage(args.direct), spec_version=2)

    def fresh():
        return icechunk.Repository.open(storage(args.proxy))

    w = args.workload
    if w == "commits_setup":
        repo = create()
        s = repo.writable_session("main")
        root = zarr.open_group(s.store, mode="w")
        for i in range(WORKERS):
            root.create_array(f"w{i}", shape=(16,), chunks=(16,), dtype="float32",
                              compressors=None, fill_value=0.0)
        s.commit("one array per worker")
        print(json.dumps({"ok": True}))
        return
    if w == "commit_worker":
        time.sleep(max(0.0, args.start_at - time.time()))
        repo = fresh()
        for c in range(WORKER_COMMITS):
            s = repo.writable_session("main")
            zarr.open_array(s.store, path=f"w{args.worker}")[:] = np.full(16, c, "float32")
            s.commit("worker commit", rebase_with=icechunk.ConflictDetector())
        print(json.dumps({"end": time.time()}))
        return
    if w == "create":
        mark(args.proxy, "start")
        t = time.perf_counter()
        icechunk.Repository.create(storage(args.proxy), spec_version=2)
        elapsed = time.perf_counter() - t
        c = mark(args.proxy, "stop")
        assert fresh().list_branches() == {"main"}
        print(json.dumps({"s": elapsed, "requests": c["requests"],
                          "connections": c["connections"]}))
        return
    data = None
    if w in ("write_64mib", "read_64mib"):
        data = np.fromfile(args.data, dtype="<f4").reshape(-1, COLS)

    def write_big(repo):
        s = repo.writable_session("main")
        a = zarr.create_array(s.store, name="big", shape=data.shape,
                              chunks=(CHUNK_ROWS, COLS), dtype="float32",
                              compressors=[ZstdCodec(level=3, checksum=False)],
                              fill_value=0.0)
        a[:] = data
        s.commit("zstd array")

    small = np.arange(SMALL_CHUNKS * SMALL_LEN, dtype="float32")

    def write_small(repo):
        s = repo.writable_session("main")
        a = zarr.create_array(s.store, name="small", shape=small.shape, chunks=(SMALL_LEN,),
                              dtype="float32", compressors=None, fill_value=0.0)
        a[:] = small
        s.commit("small chunks")

    def attrs(repo, i):
        s = repo.writable_session("main")
        g = zarr.open_group(s.store, mode="a")
        g.attrs["i"] = i
        s.commit(f"attributes {i}")

    times = []
    counts = None

    def timed(fn):
        nonlocal counts
        mark(args.proxy, "start")
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
        c = mark(args.proxy, "stop")
        if counts is None:
            counts = c
        else:
            counts = {k: counts[k] + c[k] for k in ("requests", "connections")}
        return out

    repo = create()
    s = repo.writable_session("main")
    zarr.open_group(s.store, mode="w")
    s.commit("root group")
    if w == "write_64mib":
        repo = fresh()
        timed(lambda: write_big(repo))
        back = zarr.open_array(repo.readonly_session("main").store, path="big")[:]
        assert (back == data).all()
    elif w == "read_64mib":
        write_big(repo)
        repo = fresh()

        def read():
            return zarr.open_array(repo.readonly_session("main").store, path="big", mode="r")[:]
        back = timed(read)
        assert (back == data).all()
    elif w == "ancestry_200":
        for i in range(COMMITS - 1):
            attrs(repo, i)
        n = timed(lambda: len(list(fresh().ancestry(branch="main"))))
        assert n == COMMITS + 1, n
    elif w == "open_read_one":
        write_small(repo)

        def read_one():
            r = fresh()
            a = zarr.open_array(r.readonly_session("main").store, path="small", mode="r")
            return a[SMALL_LEN * 7: SMALL_LEN * 8]
        back = timed(read_one)
        assert (back == small[SMALL_LEN * 7: SMALL_LEN * 8]).all()
    elif w == "attr_commit":
        repo = fresh()
        for i in range(ATTR_COMMITS):
            timed(lambda: attrs(repo, i))
    elif w == "small_write_commit":
        repo = fresh()
        timed(lambda: write_small(repo))
    elif w == "small_read":
        write_small(repo)
        repo = fresh()
        back = timed(lambda: zarr.open_array(repo.readonly_session("main").store,
                                             path="small", mode="r")[:])
        assert (back == small).all()
    elif w == "commit_100_arrays":
        s = repo.writable_session("main")
        for i in range(ARRAYS):
            a = zarr.create_array(s.store, name=f"a{i}", shape=(16,), chunks=(16,),
                                  dtype="float32", compressors=None, fill_value=0.0)
            a[:] = np.full(16, i, dtype="float32")
        s.commit("100 arrays")
        repo = fresh()

        def commit_all():
            s = repo.writable_session("main")
            for i in range(ARRAYS):
                zarr.open_array(s.store, path=f"a{i}")[:] = np.full(16, i + 1, dtype="float32")
            s.commit("touch 100 arrays")
        timed(commit_all)
    else:
        sys.exit(f"unknown workload {w}")
    n = len(times)
    print(json.dumps({"s": statistics.median(times),
                      "requests": counts["requests"] / n,
                      "connections": counts["connections"] / n}))


# ---------------------------------------------------------------- driver


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"nothing listens on 127.0.0.1:{port}")


def start_ministack(py, workdir):
    port = free_port()
    env = dict(os.environ, GATEWAY_PORT=str(port), BIND_HOST="127.0.0.1",
               MINISTACK_HOST="127.0.0.1", SERVICES="s3", S3_PERSIST="0",
               PERSIST_STATE="0", LOG_LEVEL="WARNING", MINISTACK_REGION="us-east-1",
               TMPDIR=workdir)
    log = open(os.path.join(workdir, "ministack.log"), "w")
    proc = subprocess.Popen([py, "-m", "ministack"], env=env, stdout=log, stderr=log)
    wait_port(port)
    return proc, port


def start_proxy(upstream_port, delay_ms):
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "latency_proxy.py"),
                             "--upstream", f"127.0.0.1:{upstream_port}",
                             "--delay-ms", str(delay_ms)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening "):
        sys.exit(f"proxy did not start: {line!r}")
    return proc, line.split()[1]


def run(cmd, env):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_processes(cmd, env, proxy_addr, workers=WORKERS, lead=3.0):
    """commits_8x5: `workers` processes of `cmd` started together at an agreed
    wall-clock time `lead` seconds ahead (after their imports); the time from then to
    the last one's end, and the proxy's counts over all of them."""
    start_at = time.time() + lead
    mark(proxy_addr, "start")
    procs = [subprocess.Popen(cmd + ["--worker", str(i), "--start-at", repr(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=tempfile.gettempdir())
             for i in range(workers)]
    ends = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            sys.stderr.write(err[-4000:])
            sys.exit(f"worker failed ({p.returncode}): {' '.join(cmd)}")
        ends.append(json.loads(out.strip().splitlines()[-1])["end"])
    if time.time() < start_at:
        sys.exit("workers ended before the agreed start")
    c = mark(proxy_addr, "stop")
    return {"s": max(ends) - start_at, "requests": c["requests"],
            "connections": c["connections"]}


def floe_binary():
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    out = subprocess.run(["cargo", "bench", "--bench", "s3_latency", "--no-run",
                          "--message-format", "json"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "s3_latency" \
                and msg.get("executable"):
            return msg["executable"]
    sys.exit("could not find the s3_latency bench executable")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=["icechunk"])
    p.add_argument("--workload", action="append")
    p.add_argument("--bucket")
    p.add_argument("--prefix")
    p.add_argument("--proxy")
    p.add_argument("--direct")
    p.add_argument("--data")
    p.add_argument("--delays", default="0,20")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--floe-bin")
    p.add_argument("--icechunk-python", default="/opt/floe-py/py312/bin/python")
    p.add_argument("--ministack-python", default="/opt/floe-py/py311/bin/python")
    p.add_argument("--json")
    p.add_argument("--small-chunks", type=int, default=1000,
                   help="chunks of 4 KiB in the small_* and open_read_one workloads")
    p.add_argument("--worker", type=int, default=0)
    p.add_argument("--start-at", type=float, default=0.0)
    a = p.parse_args()
    if a.engine == "icechunk":
        a.workload = a.workload[0]
        return icechunk_engine(a)

    import numpy as np

    workloads = a.workload or WORKLOADS
    floe_bin = a.floe_bin or floe_binary()
    work = tempfile.mkdtemp(prefix="floe-s3lat.")
    data = os.path.join(work, "data.f32")
    rng = np.random.default_rng(0)
    rng.standard_normal(MIB * 1024 * 1024 // 4, dtype=np.float32).astype("<f4").tofile(data)
    ministack, s3_port = start_ministack(a.ministack_python, work)
    bucket = "floe-bench"
    env = dict(os.environ, AWS_ACCESS_KEY_ID="floe-test-key",
               AWS_SECRET_ACCESS_KEY="floe-test-secret", AWS_REGION="us-east-1",
               AWS_DEFAULT_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    env["FLOE_BENCH_SMALL_CHUNKS"] = str(a.small_chunks)
    env.pop("AWS_SESSION_TOKEN", None)
    env.pop("AWS_PROFILE", None)
    subprocess.run([a.ministack_python, os.path.join(ROOT, ".ci", "s3util.py"), "mkbucket",
                    bucket], env=dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{s3_port}"),
                   check=True)
    results = {}
    try:
        for delay in [float(d) for d in a.delays.split(",")]:
            proxy, proxy_addr = start_proxy(s3_port, delay)
            try:
                for w in workloads:
                    engines = ["floe"] if w in FLOE_ONLY else ["floe", "icechunk"]
                    if w in FLOORS:
                        engines.append("floor")
                    per = {e: [] for e in engines}
                    for r in range(a.runs):
                        for e in engines:
                            prefix = f"{e}-{w}-{int(delay)}-{r}-{uuid.uuid4().hex[:8]}"
                            common = ["--workload", FLOORS[w] if e == "floor" else w,
                                      "--bucket", bucket, "--prefix", prefix,
                                      "--proxy", proxy_addr,
                                      "--direct", f"127.0.0.1:{s3_port}", "--data", data]
                            if e in ("floe", "floor"):
                                engine = [floe_bin]
                            else:
                                engine = [a.icechunk_python, os.path.abspath(__file__),
                                          "--engine", "icechunk"]
                            if w == "commits_8x5":
                                common[1] = "commits_setup"
                                run(engine + common, env)
                                common[1] = "commit_worker"
                                out = run_processes(engine + common, env, proxy_addr)
                            else:
                                out = run(engine + common, env)
                            per[e].append(out)
                            print(f"delay {delay:g} ms {w} {e} run {r}: {out}",
                                  file=sys.stderr, flush=True)
                    results[(delay, w)] = per
            finally:
                proxy.terminate()
                proxy.wait()
    finally:
        ministack.terminate()
        ministack.wait()

    def median_run(runs):
        runs = sorted(runs, key=lambda o: o["s"])
        return runs[len(runs) // 2]

    print("| workload | delay | floe (s) | Icechunk 2.3.0 (s) | ratio | floor (s) | floe / floor "
          "| requests floe / Icechunk | connections floe / Icechunk |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    table = []
    for (delay, w), per in results.items():
        f = median_run(per["floe"])
        i = median_run(per["icechunk"]) if "icechunk" in per else None
        ratio = f"{i['s'] / f['s']:.2f}" if i else "-"
        its = f"{i['s']:.3f}" if i else "-"
        req = f"{f['requests']:g} / {i['requests']:g}" if i else f"{f['requests']:g}"
        con = f"{f['connections']:g} / {i['connections']:g}" if i else f"{f['connections']:g}"
        fl = median_run(per["floor"]) if "floor" in per else None
        fls = f"{fl['s']:.3f}" if fl else "-"
        over = f"{f['s'] / fl['s']:.2f}" if fl else "-"
        if fl:
            fls += f" ({fl['in_flight']} in flight)"
        print(f"| {w} | {delay:g} ms | {f['s']:.3f} | {its} | {ratio} | {fls} | {over} "
              f"| {req} | {con} |")
        table.append({"workload": w, "delay_ms": delay, "floe": per["floe"],
                      "icechunk": per.get("icechunk"), "floor": per.get("floor")})
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(table, fh, indent=1)


if __name__ == "__main__":
    main()
