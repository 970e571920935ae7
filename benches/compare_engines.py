"""floe (through its Rust API) and Icechunk (through zarr-python) on the same
workloads and the same data, in one run, with the ratios.

    python benches/compare_engines.py --icechunk-python PY [--icechunk1-python PY]
        [--floe-bin PATH] [--mib 256] [--runs 3] [--workload NAME] [--json OUT]

floe runs as the `workloads` bench executable (`benches/workloads.rs`; built with
`cargo bench --bench workloads --no-run` when `--floe-bin` is not given). Icechunk
runs in its own interpreter (one with icechunk 2.3.0, zarr and numpy; optionally one
with icechunk 1.1.21): this file re-runs itself there with `--engine icechunk`. Every
engine prints one JSON line of timings (seconds); the engines alternate run by run
(floe, Icechunk 2, Icechunk 1, floe, ...), each run on fresh spec-1 repositories on
the local filesystem, and the table shows the median of the runs per workload, in
milliseconds, with floe's speed-up (Icechunk time / floe time).

The float32 data (random normal, seed 0) is generated once here and handed to every
engine as a file, so both write and read exactly the same bytes. Each engine checks
that what it reads back equals what it wrote.

Workloads (see `benches/workloads.rs` for the floe side):

- attr_commit: 100 commits that each only set the root group's zarr.json (new
  attributes) through the store API; median single commit (set + commit).
- commit_10k_refs: an array of 10,000 one-byte chunks, all written; the commit.
- write_zstd_commit: --mib MiB float32, 1 MiB chunks (256 x 1024), bytes + zstd
  level 3, written through the array API (create + write + commit).
- store_write_commit: the same compressed chunks (encoded beforehand) set through
  the store API, 10 in flight, plus the commit.
- read_store / read_array: an uncompressed --mib MiB float32 array (written and
  committed untimed) read from a read-only session: every chunk key through the
  store API (10 in flight) / the whole array through the array API.
- ancestry_2001_cold: a branch of 2,001 commits; open the repository fresh and list
  the whole ancestry of main.

A second table puts the store-API rows against their page-cache floor, which the floe
side measures too (`floor_write`, `floor_read`): the same files written and read with
plain std::fs, 10 at a time, without a repository.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

WORKLOADS = [
    "attr_commit",
    "commit_10k_refs",
    "write_zstd_commit",
    "store_write_commit",
    "read_store",
    "read_array",
    "ancestry_2001_cold",
]
COLS = 1024
CHUNK_ROWS = 256
IN_FLIGHT = 10
ATTR_COMMITS = 100
REFS = 10_000
ANCESTRY_COMMITS = 2001


def make_data(mib):
    rows = mib * 1024 * 1024 // 4 // COLS
    return np.random.default_rng(0).normal(size=(rows, COLS)).astype("<f4")


# --- Icechunk side (runs under the Icechunk interpreter) -------------------------


class IcechunkWorkloads:
    """The workloads through zarr-python on an Icechunk repository."""

    def __init__(self, data):
        import asyncio

        import icechunk
        import zarr
        from zarr.codecs import ZstdCodec
        from zarr.core.buffer import default_buffer_prototype

        self.ic = icechunk
        self.zarr = zarr
        self.zstd = ZstdCodec
        self.proto = default_buffer_prototype()
        self.loop = asyncio.new_event_loop()
        self.asyncio = asyncio
        self.major = int(icechunk.__version__.split(".")[0])
        self.data = data
        self.tmp = tempfile.TemporaryDirectory()

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def new_repo(self):
        path = tempfile.mkdtemp(dir=self.tmp.name)
        storage = self.ic.local_filesystem_storage(path)
        if self.major >= 2:
            repo = self.ic.Repository.create(storage, spec_version=1)
        else:
            repo = self.ic.Repository.create(storage)
        return path, repo

    def main_store(self, repo):
        return repo.readonly_session(branch="main").store

    def buf(self, b):
        return self.proto.buffer.from_bytes(b)

    def group_json(self, i):
        doc = {"zarr_format": 3, "node_type": "group", "attributes": {"i": i}}
        return self.buf(json.dumps(doc).encode())

    def float_array(self, store, name, zstd):
        return self.zarr.create_array(
            store,
            name=name,
            shape=self.data.shape,
            chunks=(CHUNK_ROWS, COLS),
            dtype="float32",
            fill_value=0.0,
            compressors=[self.zstd(level=3, checksum=False)] if zstd else None,
        )

    def check_array(self, repo, name):
        a = self.zarr.open_array(store=self.main_store(repo), path=name, mode="r")
        assert np.array_equal(a[...], self.data), f"array {name} reads back as written"

    def attribute_commits(self, repo, more):
        s = repo.writable_session("main")
        self.run(s.store.set("zarr.json", self.group_json(0)))
        s.commit("root group")
        times = []
        for i in range(1, more + 1):
            s = repo.writable_session("main")
            store = s.store
            doc = self.group_json(i)
            t = time.perf_counter()
            self.run(store.set("zarr.json", doc))
            s.commit(f"attrs {i}")
            times.append(time.perf_counter() - t)
        meta = self.run(self.main_store(repo).get("zarr.json", prototype=self.proto))
        assert json.loads(meta.to_bytes())["attributes"]["i"] == more
        return times

    def attr_commit(self):
        _, repo = self.new_repo()
        return statistics.median(self.attribute_commits(repo, ATTR_COMMITS))

    def commit_10k_refs(self):
        _, repo = self.new_repo()
        s = repo.writable_session("main")
        a = self.zarr.create_array(
            s.store, name="refs", shape=(REFS,), chunks=(1,), dtype="uint8",
            fill_value=0, compressors=None,
        )
        values = (np.arange(REFS) % 255 + 1).astype("uint8")  # never the fill value
        a[...] = values
        t = time.perf_counter()
        s.commit("10k chunks")
        elapsed = time.perf_counter() - t
        back = self.zarr.open_array(store=self.main_store(repo), path="refs", mode="r")
        assert np.array_equal(back[...], values), "10k chunks read back as written"
        return elapsed

    def write_zstd_commit(self):
        _, repo = self.new_repo()
        s = repo.writable_session("main")
        t = time.perf_counter()
        a = self.float_array(s.store, "big", zstd=True)
        a[...] = self.data
        s.commit("zstd array")
        elapsed = time.perf_counter() - t
        self.check_array(repo, "big")
        return elapsed

    def store_write_commit(self):
        # The encoded chunks and their keys, from an in-memory store.
        scratch = self.zarr.storage.MemoryStore()
        self.float_array(scratch, "big", zstd=True)[...] = self.data
        keys = [f"big/c/{i}/0" for i in range(self.data.shape[0] // CHUNK_ROWS)]
        chunks = [(k, self.run(scratch.get(k, prototype=self.proto))) for k in keys]
        assert all(b is not None for _, b in chunks)
        del scratch

        _, repo = self.new_repo()
        s = repo.writable_session("main")
        self.float_array(s.store, "big", zstd=True)
        store = s.store
        asyncio = self.asyncio

        async def set_all():
            sem = asyncio.Semaphore(IN_FLIGHT)

            async def one(key, value):
                async with sem:
                    await store.set(key, value)

            await asyncio.gather(*(one(k, b) for k, b in chunks))

        t = time.perf_counter()
        self.run(set_all())
        s.commit("store-API chunks")
        elapsed = time.perf_counter() - t
        self.check_array(repo, "big")
        return elapsed

    def uncompressed_repo(self):
        _, repo = self.new_repo()
        s = repo.writable_session("main")
        self.float_array(s.store, "raw", zstd=False)[...] = self.data
        s.commit("uncompressed array")
        return repo

    def read_store(self):
        repo = self.uncompressed_repo()
        store = self.main_store(repo)
        keys = [f"raw/c/{i}/0" for i in range(self.data.shape[0] // CHUNK_ROWS)]
        asyncio = self.asyncio
        proto = self.proto

        async def get_all():
            sem = asyncio.Semaphore(IN_FLIGHT)

            async def one(key):
                async with sem:
                    return await store.get(key, prototype=proto)

            return await asyncio.gather(*(one(k) for k in keys))

        t = time.perf_counter()
        chunks = self.run(get_all())
        elapsed = time.perf_counter() - t
        for i, b in enumerate(chunks):
            want = self.data[i * CHUNK_ROWS:(i + 1) * CHUNK_ROWS].tobytes()
            assert b is not None and b.to_bytes() == want, f"chunk {i} reads back"
        return elapsed

    def read_array(self):
        repo = self.uncompressed_repo()
        store = self.main_store(repo)
        t = time.perf_counter()
        back = self.zarr.open_array(store=store, path="raw", mode="r")[...]
        elapsed = time.perf_counter() - t
        assert np.array_equal(back, self.data), "array reads back as written"
        return elapsed

    def ancestry_2001_cold(self):
        path, repo = self.new_repo()
        self.attribute_commits(repo, ANCESTRY_COMMITS - 1)
        del repo
        t = time.perf_counter()
        repo = self.ic.Repository.open(self.ic.local_filesystem_storage(path))
        history = list(repo.ancestry(branch="main"))
        elapsed = time.perf_counter() - t
        # The commits plus the initial snapshot.
        assert len(history) == ANCESTRY_COMMITS + 1, len(history)
        return elapsed


def icechunk_main(args):
    import icechunk
    import zarr

    data = None
    if set(args.workloads) & {"write_zstd_commit", "store_write_commit", "read_store",
                              "read_array"}:
        if args.data:
            data = np.fromfile(args.data, dtype="<f4").reshape(-1, COLS)
            assert data.nbytes == args.mib * 1024 * 1024, "--data must hold --mib MiB"
        else:
            data = make_data(args.mib)
    w = IcechunkWorkloads(data)
    out = {"engine": "icechunk", "version": icechunk.__version__,
           "zarr": zarr.__version__, "mib": args.mib, "runs": args.runs}
    for name in args.workloads:
        times = []
        for run in range(args.runs):
            # Flush the previous workload's dirty pages first: their writeback would
            # otherwise stall this one's file creations (both engines do the same).
            os.sync()
            times.append(getattr(w, name)())
            print(f"icechunk {icechunk.__version__}: {name} run {run + 1}/{args.runs}: "
                  f"{times[-1]:.4f} s", file=sys.stderr)
        out[f"{name}_s"] = statistics.median(times)
    w.tmp.cleanup()
    print(json.dumps(out))


# --- Driver -----------------------------------------------------------------------


def build_floe():
    """Builds the `workloads` bench; returns its executable."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print("building the workloads bench (cargo bench --no-run) ...", file=sys.stderr)
    out = subprocess.run(
        ["cargo", "bench", "--bench", "workloads", "--no-run", "--message-format=json"],
        cwd=root, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    exe = None
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if (msg.get("reason") == "compiler-artifact"
                and msg.get("target", {}).get("name") == "workloads"
                and msg.get("executable")):
            exe = msg["executable"]
    if exe is None:
        sys.exit("cargo did not report the workloads executable")
    return exe


def run_engine(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(labels, med, workloads):
    """Markdown: times in ms, floe's speed-up against each Icechunk."""
    head = ["workload"] + [f"{labels[e]} (ms)" for e in med]
    others = [e for e in med if e != "floe"]
    head += [f"floe speed-up vs {labels[e].split()[-1]}" for e in others]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for w in workloads:
        key = f"{w}_s"
        row = [w] + [f"{med[e][key] * 1000:.1f}" for e in med]
        row += [f"{med[e][key] / med['floe'][key]:.2f}x" for e in others]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# The page-cache floor of the store-API rows (floe's side only): the same files
# written / read with plain std::fs.
FLOORS = {"store_write_commit": "floor_write", "read_store": "floor_read"}


def floor_table(floe_runs, floe_med):
    """Markdown: each store-API row against its page-cache floor, when both ran."""
    lines = []
    for w, f in FLOORS.items():
        if f"{w}_s" not in floe_med or not all(f"{f}_s" in r for r in floe_runs):
            continue
        fl = statistics.median(r[f"{f}_s"] for r in floe_runs)
        lines.append(f"| {w} | {floe_med[f'{w}_s'] * 1000:.1f} | {fl * 1000:.1f} | "
                     f"{floe_med[f'{w}_s'] / fl:.2f}x |")
    if not lines:
        return ""
    return "\n".join(["| workload | floe (ms) | plain std::fs, same files (ms) | floe / floor |",
                      "|---|---:|---:|---:|"] + lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=["icechunk"], help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--icechunk-python", help="interpreter with icechunk 2.x, zarr, numpy")
    p.add_argument("--icechunk1-python", help="interpreter with icechunk 1.x (optional)")
    p.add_argument("--floe-bin", help="the built workloads bench executable")
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workload", choices=WORKLOADS, help="run only this workload")
    p.add_argument("--json", help="save runs, medians and the table here")
    args = p.parse_args()
    args.workloads = [args.workload] if args.workload else WORKLOADS

    if args.engine == "icechunk":
        icechunk_main(args)
        return
    if not args.icechunk_python:
        p.error("--icechunk-python is required")
    floe_bin = args.floe_bin or build_floe()
    engines = {"floe": None, "icechunk2": args.icechunk_python}
    if args.icechunk1_python:
        engines["icechunk1"] = args.icechunk1_python
    only = ["--workload", args.workload] if args.workload else []
    runs = {e: [] for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        data_path = os.path.join(tmp, "data.f32")
        make_data(args.mib).tofile(data_path)
        common = ["--mib", str(args.mib), "--runs", "1", "--data", data_path] + only
        for run in range(args.runs):
            for engine, py in engines.items():
                if py is None:
                    cmd = [floe_bin] + common
                else:
                    cmd = [py, os.path.abspath(__file__), "--engine", "icechunk"] + common
                print(f"run {run + 1}/{args.runs}: {engine} ...", file=sys.stderr)
                out = run_engine(cmd)
                if engine != "floe":
                    want = "2." if engine == "icechunk2" else "1."
                    if not out["version"].startswith(want):
                        sys.exit(f"{py} has icechunk {out['version']}, expected {want}x")
                runs[engine].append(out)

    labels = {e: "floe" if e == "floe" else f"Icechunk {runs[e][0]['version']}"
              for e in engines}
    med = {e: {f"{w}_s": statistics.median(r[f"{w}_s"] for r in rs) for w in args.workloads}
           for e, rs in runs.items()}
    md = table(labels, med, args.workloads)
    floor = floor_table(runs["floe"], med["floe"])
    if floor:
        md += "\n\n" + floor
    print(f"{args.mib} MiB, median of {args.runs} run(s), local filesystem, spec 1\n")
    print(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mib": args.mib, "runs": args.runs, "labels": labels,
                       "runs_by_engine": runs, "median_s": med, "table": md}, f, indent=2)


if __name__ == "__main__":
    main()
