"""Garbage collection on S3 one round trip away, side by side: floe's (incremental)
and Icechunk 2.3.0's, a first time and again after one more "day" of commits.

    python benches/s3_gc.py [--arrays 10] [--commits 1000] [--chunks 10] [--day 20]
        [--runs 3] [--delays 20] [--floe-python PY] [--floe-path DIR]
        [--icechunk-python PY] [--ministack-python PY] [--plain-listing] [--trace]
        [--endpoint HOST:PORT] [--writer floe|icechunk] [--json OUT]

The S3 test server (ministack, started as `benches/s3_latency.py` does) holds one
spec-2 repository per engine, written directly (not through the proxy) by the same
deterministic writer, floe's Python package with chunk packing disabled, so that
every chunk is its own object as Icechunk writes it: `--arrays` 1-D float64 arrays
of `--chunks` chunks of 1 KiB (no compression: native chunks, above the inline
threshold), then `--commits` commits, each rewriting every chunk of every array (so
each commit writes `--arrays` manifests and `--arrays` x `--chunks` chunks), then
one session that writes the chunks of the first array and is never committed (the
garbage). Nothing is expired: every snapshot and manifest stays reachable, and each
collection deletes only the abandoned session's chunks. The defaults make 10^4
manifests, 10^5 chunk objects and 10^3 snapshots per repository (about 2 minutes
each to write).

Each engine, in its own interpreter, collects its repository through
`latency_proxy.py` (every request and new connection delayed by the first of
`--delays` milliseconds): the first collection (floe has no collection state yet).
Then, `--runs` times, the writer adds one "day" directly (`--day` commits plus one
abandoned session) and the engine collects again through the proxy (the second
collection, where floe reads only the manifests and snapshots written since the
previous one); with several `--delays`, each delay gets `--runs` days and second
collections. Engines alternate (floe, Icechunk; then Icechunk, floe; ...). Both
list every object; the cut-off is the time of the collection (floe with
`allow_recent_cutoff=True`). The times are of `garbage_collect` alone (the
repository is opened before); the proxy counts the requests in that time. The
script stops if the engines delete different numbers of objects.

After each day's collections, the listing floor: every object of floe's repository
listed through the proxy, one paginated listing per directory and first character
of the id, 32 at a time, nothing read (what any collection that lists every object
pays on this server).

With `--endpoint`, the repositories live on an S3 server already running instead
(Garage, MinIO, AWS: the bucket `floe-gc-bench` must exist; credentials from
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), each run under prefixes of its own.
`--writer icechunk` writes both repositories with Icechunk 2.3.0 instead of floe (the
same content, no chunk packing): floe refuses to write to a server that does not
enforce conditional writes, as Garage 2.5 does not. `benches/garage_server.sh` starts
a one-node Garage on loopback for this.

ministack's own listing sorts every key under the prefix for each page, so a page
costs the server time in proportion to the keys under the prefix, where S3's does
not: with 10^5 chunk keys under one prefix (floe lists `chunks/` split by
`start-after`; Icechunk splits it by prefix, a few thousand keys each) a page took
~0.4 s of the server's CPU. The server runs here with an indexed listing (keys kept
sorted, a page found by binary search; see `_server`); `--plain-listing` runs
ministack's own.

floe runs from `--floe-python` (default: the pyfloe312 venv), with `--floe-path` (or
`$FLOE_PYTHONPATH`: an unpacked wheel, say) first on its path; Icechunk from
`--icechunk-python` (default: the py312 venv); ministack from `--ministack-python`
(default: the py311 venv).

With `--trace` it also counts the requests by method and kind of object (the
proxy's trace). Prints a Markdown table (medians over the runs, in seconds, the
requests of the median run) and one JSON line.
"""

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUCKET = "floe-gc-bench"
CHUNK = 128  # float64 values per chunk: 1 KiB


def _storage(ic, args, endpoint):
    return ic.s3_storage(bucket=BUCKET, prefix=args.prefix, region="us-east-1",
                         endpoint_url=f"http://{endpoint}", allow_http=True,
                         access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                         secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                         force_path_style=True)


def _write(args):
    """floe (packing disabled) writes `args.n` commits numbered from `args.first`
    (creating the repository and its arrays with `args.create`), then one abandoned
    session."""
    import numpy as np

    import zarr

    floe = __import__(args.engine or "floe")  # the writer: floe, or icechunk
    zarr.config.set({"async.concurrency": 64})
    config = floe.RepositoryConfig.default()
    if floe.__name__ == "floe":
        config.chunk_packing = floe.ChunkPackingConfig(mode=floe.ChunkPackingMode.Disabled)
    storage = _storage(floe, args, args.direct)
    n = args.chunks * CHUNK
    if args.create:
        repo = floe.Repository.create(storage, config, spec_version=2)
        s = repo.writable_session("main")
        root = zarr.group(s.store)
        for a in range(args.arrays):
            root.create_array(f"a{a}", shape=(n,), chunks=(CHUNK,), dtype="f8",
                              fill_value=0.0, compressors=None)
        s.commit("arrays")
    repo = floe.Repository.open(storage, config)
    for k in range(args.first, args.first + args.n):
        s = repo.writable_session("main")
        root = zarr.open_group(s.store)
        for a in range(args.arrays):
            root[f"a{a}"][:] = np.full(n, k + a / 100)
        s.commit(f"commit {k}")
    s = repo.writable_session("main")
    zarr.open_group(s.store)["a0"][:] = np.full(n, -1.0 - args.first)
    print(json.dumps({}))


def _mark(proxy, what):
    import urllib.request
    with urllib.request.urlopen(f"http://{proxy}/__mark/{what}", timeout=60) as r:
        return json.loads(r.read())


def _collect(args):
    """`args.engine` collects through the proxy; prints seconds, the proxy's counts
    and the summary."""
    ic = __import__(args.engine)
    repo = ic.Repository.open(_storage(ic, args, args.proxy))
    now = datetime.datetime.now(datetime.UTC)
    kw = {"allow_recent_cutoff": True} if args.engine == "floe" else {}
    _mark(args.proxy, "start")
    t = time.perf_counter()
    summary = repo.garbage_collect(now, **kw)
    elapsed = time.perf_counter() - t
    counts = _mark(args.proxy, "stop")
    deleted = {k: getattr(summary, k) for k in
               ("chunks_deleted", "manifests_deleted", "snapshots_deleted",
                "transaction_logs_deleted", "attributes_deleted")}
    print(json.dumps({"s": elapsed, "requests": counts["requests"],
                      "connections": counts["connections"],
                      "by_method": counts["by_method"], "deleted": deleted}))


def _server():
    """ministack (this process is its interpreter) with an indexed listing: keys
    kept sorted (rebuilt after each change to a bucket's objects), so that a
    ListObjectsV2 page costs a binary search plus the page, as on S3, whatever the
    prefix and start key. ministack's own listing sorts every key under the prefix
    for each page: 1,000 keys out of 10^5 under one prefix (floe's listing, which
    splits the key space with `start-after`) then cost ~0.4 s of the server's CPU,
    against ~10 ms for a prefix of a few thousand keys (Icechunk's, which splits it
    by prefix). Listings with a delimiter go to ministack's own code."""
    import bisect
    import runpy

    from ministack.services import s3

    class Objects(dict):
        """A bucket's objects, counting changes."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.generation = 0
            self.sorted_gen = -1
            self.sorted_keys = []

        def keys_sorted(self):
            if self.sorted_gen != self.generation:
                gen = self.generation
                self.sorted_keys = sorted(self)
                self.sorted_gen = gen
            return self.sorted_keys

    def changes(name):
        orig = getattr(dict, name)

        def method(self, *a, **kw):
            self.generation += 1
            return orig(self, *a, **kw)
        return method

    for name in ("__setitem__", "__delitem__", "pop", "popitem", "clear", "update",
                 "setdefault"):
        setattr(Objects, name, changes(name))

    orig_ensure = s3._ensure_bucket

    def ensure_bucket(name, *a, **kw):
        bucket = orig_ensure(name, *a, **kw)
        if bucket is not None and type(bucket.get("objects")) is dict:
            bucket["objects"] = Objects(bucket["objects"])
        return bucket

    orig_collect = s3._collect_list_entries

    def collect(bucket_objects, prefix, delimiter, max_keys, start_after):
        if delimiter or not isinstance(bucket_objects, Objects):
            return orig_collect(bucket_objects, prefix, delimiter, max_keys, start_after)
        keys = bucket_objects.keys_sorted()
        if start_after and start_after >= prefix:
            i = bisect.bisect_right(keys, start_after)
        else:
            i = bisect.bisect_left(keys, prefix)
        contents = []
        truncated = False
        while i < len(keys) and keys[i].startswith(prefix):
            if len(contents) >= max_keys:
                truncated = True
                break
            contents.append(keys[i])
            i += 1
        return contents, [], truncated, contents[-1] if contents else ""

    s3._ensure_bucket = ensure_bucket
    s3._collect_list_entries = collect
    sys.argv = ["ministack"]
    runpy.run_module("ministack", run_name="__main__", alter_sys=True)


def _verify(args):
    """floe verifies its repository through the proxy (every ref, snapshot,
    transaction log and manifest decoded; every chunk object checked against its
    refs by its listed size); prints seconds, the proxy's counts, the problems found
    and the peak resident memory (MiB)."""
    import resource

    import floe
    repo = floe.Repository.open(_storage(floe, args, args.proxy))
    _mark(args.proxy, "start")
    t = time.perf_counter()
    report = repo.verify()
    elapsed = time.perf_counter() - t
    counts = _mark(args.proxy, "stop")
    print(json.dumps({"s": elapsed, "requests": counts["requests"], "ok": report["ok"],
                      "problems": len(report["problems"]),
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def _start_server(py, workdir, indexed):
    """ministack on a free port (as `s3_latency.start_ministack`), with the indexed
    listing unless `indexed` is false."""
    from s3_latency import free_port, wait_port

    port = free_port()
    env = dict(os.environ, GATEWAY_PORT=str(port), BIND_HOST="127.0.0.1",
               MINISTACK_HOST="127.0.0.1", SERVICES="s3", S3_PERSIST="0",
               PERSIST_STATE="0", LOG_LEVEL="WARNING", MINISTACK_REGION="us-east-1",
               TMPDIR=workdir)
    cmd = [py, os.path.abspath(__file__), "--step", "server"] if indexed else \
        [py, "-m", "ministack"]
    log = open(os.path.join(workdir, "ministack.log"), "w")  # noqa: SIM115 (the server's)
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
    wait_port(port)
    return proc, port


# Crockford base32: the first character of every object id.
ID_CHARS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _list_floor(proxy, prefix, threads=32):
    """Lists every object under `prefix`'s four directories through the proxy, one
    paginated listing per directory and first character of the id, `threads` at a
    time, reading nothing: the listing any collection needs. Returns seconds and the
    proxy's request count. Requests are signed (`.ci/s3util.py`, with botocore when
    this interpreter has it) with the credentials of the environment."""
    import concurrent.futures
    import re

    sys.path.insert(0, os.path.join(ROOT, ".ci"))
    import s3util

    cfg = s3util.Config(endpoint=f"http://{proxy}")
    local = __import__("threading").local()

    def list_all(p):
        if not hasattr(local, "client"):
            local.client = s3util.Client(cfg, timeout=120)
        n, token = 0, None
        while True:
            q = {"list-type": "2", "prefix": p}
            if token:
                q["continuation-token"] = token
            r = local.client.request("GET", BUCKET, query=urllib.parse.urlencode(
                sorted(q.items()), quote_via=urllib.parse.quote))
            if r.status != 200:
                raise RuntimeError(f"listing {p}: {r}")
            body = r.body.decode()
            n += body.count("<Key>")
            m = re.search(r"<NextContinuationToken>([^<]*)<", body)
            if "<IsTruncated>true" not in body or not m:
                return n
            token = m.group(1)

    shards = [f"{prefix}/{d}/{c}" for d in ("chunks", "manifests", "snapshots",
                                             "transactions") for c in ID_CHARS]
    _mark(proxy, "start")
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        keys = sum(pool.map(list_all, shards))
    elapsed = time.perf_counter() - t
    counts = _mark(proxy, "stop")
    return {"s": elapsed, "requests": counts["requests"], "keys": keys}


def _kinds(trace):
    """Requests of the proxy's trace since its last start mark, by method and kind
    (the key's first directory under the prefix, or LIST / batch DELETE)."""
    with open(trace) as f:
        lines = f.read().splitlines()
    start = max((i for i, line in enumerate(lines) if line == "mark start"), default=-1)
    kinds = collections.Counter()
    for line in lines[start + 1:]:
        parts = line.split()
        if len(parts) < 4:
            continue
        method, path = parts[2], parts[3]
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if "list-type" in query:
            # prefix=<repository prefix>/<directory>/[<first characters of the id>]
            kind = "list " + (query.get("prefix", [""])[0].split("/") + [""])[1]
        elif "delete" in query:
            kind = "batch delete"
        else:
            segs = url.path.strip("/").split("/")
            # /bucket/prefix/kind/...
            kind = segs[2] if len(segs) > 2 else "/".join(segs[1:])
        kinds[f"{method} {kind}"] += 1
    return dict(sorted(kinds.items()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step", choices=["write", "collect", "verify", "server"],
                   help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--prefix", help=argparse.SUPPRESS)
    p.add_argument("--direct", help=argparse.SUPPRESS)
    p.add_argument("--proxy", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--create", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--arrays", type=int, default=10)
    p.add_argument("--commits", type=int, default=1000)
    p.add_argument("--chunks", type=int, default=10)
    p.add_argument("--day", type=int, default=20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--delays", default="20")
    p.add_argument("--floe-python", default="/opt/floe-py/pyfloe312/bin/python")
    p.add_argument("--floe-path", default=os.environ.get("FLOE_PYTHONPATH"),
                   help="a directory to put first on the floe interpreter's PYTHONPATH "
                        "(an unpacked wheel)")
    p.add_argument("--icechunk-python", default="/opt/floe-py/py312/bin/python")
    p.add_argument("--ministack-python", default="/opt/floe-py/py311/bin/python")
    p.add_argument("--trace", action="store_true")
    p.add_argument("--plain-listing", action="store_true",
                   help="ministack's own listing (sorts every key under the prefix "
                        "for each page)")
    p.add_argument("--endpoint", metavar="HOST:PORT",
                   help="an S3 server already running (Garage, MinIO, ...) holding the "
                        f"bucket {BUCKET}, with the credentials of AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY; no ministack is started")
    p.add_argument("--verify", action="store_true",
                   help="after each day, also time floe's verify of its repository")
    p.add_argument("--writer", choices=["floe", "icechunk"], default="floe",
                   help="the engine that writes both repositories (icechunk: for a server "
                        "without conditional writes, where floe refuses to write)")
    p.add_argument("--json")
    args = p.parse_args()
    if args.step == "write":
        return _write(args)
    if args.step == "collect":
        return _collect(args)
    if args.step == "verify":
        return _verify(args)
    if args.step == "server":
        return _server()

    sys.path.insert(0, HERE)
    from engine_compare_common import rerun_self
    from s3_latency import start_proxy

    work = tempfile.mkdtemp(prefix="floe-s3gc.")
    env = dict(os.environ, AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
               AWS_ALLOW_HTTP="true")
    if not args.endpoint:
        env.update(AWS_ACCESS_KEY_ID="floe-test-key", AWS_SECRET_ACCESS_KEY="floe-test-secret")
    env.pop("AWS_SESSION_TOKEN", None)
    env.pop("AWS_PROFILE", None)
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                           "AWS_REGION")})
    floe_env = dict(env)
    if args.floe_path:
        floe_env["PYTHONPATH"] = os.pathsep.join(
            [args.floe_path] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    engines = {"floe": (args.floe_python, floe_env), "icechunk": (args.icechunk_python, env)}
    # One repository per engine, under a prefix of this run (an external server keeps
    # earlier runs' objects).
    run = time.strftime("%Y%m%dT%H%M%S")
    prefixes = {e: f"{e}-{run}" for e in engines}
    delays = [float(d) for d in args.delays.split(",")]
    if args.endpoint:
        server = None
        direct = args.endpoint
        s3_port = int(args.endpoint.rsplit(":", 1)[1])
    else:
        server, s3_port = _start_server(args.ministack_python, work, not args.plain_listing)
        direct = f"127.0.0.1:{s3_port}"
    proxies = {}
    results = {e: {"first": None, "second": {d: [] for d in delays}} for e in engines}
    floors = {d: [] for d in delays}
    verifies = {d: [] for d in delays}
    try:
        if server is not None:
            subprocess.run([args.ministack_python, os.path.join(ROOT, ".ci", "s3util.py"),
                            "mkbucket", BUCKET],
                           env=dict(env, AWS_ENDPOINT_URL=f"http://{direct}"), check=True)
        for d in delays:
            trace = os.path.join(work, f"trace-{d:g}.txt")
            if args.trace:
                os.environ["LATENCY_PROXY_TRACE"] = trace
            proxies[d] = start_proxy(s3_port, d) + (trace,)
            os.environ.pop("LATENCY_PROXY_TRACE", None)
        shape = ["--arrays", str(args.arrays), "--chunks", str(args.chunks),
                 "--direct", direct]

        def write(engine, n, first, create=False):
            t = time.perf_counter()
            py, wenv = engines[args.writer]
            rerun_self(py, __file__,
                       ["--step", "write", "--engine", args.writer, "--prefix",
                        prefixes[engine], "--n", str(n), "--first", str(first), *shape,
                        *(["--create"] if create else [])],
                       wenv)
            return time.perf_counter() - t

        def collect(engine, d):
            py, eenv = engines[engine]
            _, addr, trace = proxies[d]
            if args.trace:
                open(trace, "w").close()
            out = rerun_self(py, __file__, ["--step", "collect", "--engine", engine,
                                            "--prefix", prefixes[engine], "--proxy", addr],
                             eenv)
            if args.trace:
                out["kinds"] = _kinds(trace)
            return out

        for engine in engines:
            s = write(engine, args.commits, 0, create=True)
            print(f"{engine}'s repository written in {s:.0f} s", file=sys.stderr, flush=True)
        order = list(engines)
        for engine in order:
            out = collect(engine, delays[0])
            results[engine]["first"] = out
            print(f"first {engine} {delays[0]:g} ms: {out}", file=sys.stderr, flush=True)
        day = 0
        for d in delays:
            for r in range(args.runs):
                day += 1
                first = args.commits + (day - 1) * args.day
                for engine in order:
                    write(engine, args.day, first)
                order = order[::-1]
                for engine in order:
                    out = collect(engine, d)
                    results[engine]["second"][d].append(out)
                    print(f"second {engine} {d:g} ms run {r}: {out}", file=sys.stderr,
                          flush=True)
                out = _list_floor(proxies[d][1], prefixes["floe"])
                floors[d].append(out)
                print(f"listing floor {d:g} ms run {r}: {out}", file=sys.stderr, flush=True)
                if args.verify:
                    out = rerun_self(args.floe_python, __file__,
                                     ["--step", "verify", "--prefix", prefixes["floe"],
                                      "--proxy", proxies[d][1]], floe_env)
                    verifies[d].append(out)
                    print(f"verify {d:g} ms run {r}: {out}", file=sys.stderr, flush=True)
    finally:
        for proc, _, _ in proxies.values():
            proc.terminate()
            proc.wait()
        if server is not None:
            server.terminate()
            server.wait()

    deleted = {e: [results[e]["first"]["deleted"]]
               + [o["deleted"] for d in delays for o in results[e]["second"][d]]
               for e in engines}
    if deleted["floe"] != deleted["icechunk"]:
        sys.exit(f"the engines deleted different objects: {json.dumps(deleted)}")

    def median_run(runs):
        runs = sorted(runs, key=lambda o: o["s"])
        return runs[len(runs) // 2]

    manifests = args.arrays * args.commits
    chunk_objects = args.arrays * args.chunks * args.commits
    print(f"{args.arrays} arrays, {args.commits} commits of {args.arrays * args.chunks} "
          f"chunks of 1 KiB (~{manifests} manifests, ~{chunk_objects} chunk objects), "
          f"history kept; days of {args.day} commits + one abandoned session; "
          f"second collection and listing floor: medians of {args.runs}\n")
    print("| collection | delay | floe (s) | Icechunk 2.3.0 (s) | floe speed-up "
          "| requests floe / Icechunk | objects deleted (each) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = [("first (floe: no state yet)", delays[0], results["floe"]["first"],
             results["icechunk"]["first"])]
    for d in delays:
        rows.append((f"after {args.day} more commits", d,
                     median_run(results["floe"]["second"][d]),
                     median_run(results["icechunk"]["second"][d])))
    for name, d, f, i in rows:
        dele = f["deleted"]
        what = ", ".join(f"{v} {k.replace('_deleted', '')}" for k, v in dele.items() if v)
        print(f"| {name} | {d:g} ms | {f['s']:.2f} | {i['s']:.2f} | {i['s'] / f['s']:.1f}x "
              f"| {f['requests']} / {i['requests']} | {what or 'none'} |")
    for d in delays:
        f = median_run(floors[d])
        print(f"| listing floor (every object listed, nothing read) | {d:g} ms | {f['s']:.2f} "
              f"| | | {f['requests']} | {f['keys']} keys |")
        if verifies[d]:
            v = median_run(verifies[d])
            print(f"| floe verify (problems: {v['problems']}; peak {v['peak_mib']:.0f} MiB) "
                  f"| {d:g} ms | {v['s']:.2f} | | | {v['requests']} | |")
    if args.trace:
        print("\nrequests by kind (median run):")
        for name, d, f, i in rows:
            print(f"- {name}, {d:g} ms: floe {f.get('kinds')}; Icechunk {i.get('kinds')}")
    summary = {"results": {e: {"first": r["first"],
                               "second": {f"{d:g}": v for d, v in r["second"].items()}}
                           for e, r in results.items()},
               "listing_floor": {f"{d:g}": v for d, v in floors.items()},
               "verify": {f"{d:g}": v for d, v in verifies.items()}}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=1)
    print(json.dumps({e: {"first_s": results[e]["first"]["s"],
                          "second_median_s": {f"{d:g}": median_run(results[e]["second"][d])["s"]
                                              for d in delays}} for e in engines}))


if __name__ == "__main__":
    main()
