"""floe (through its Rust API) and Icechunk (through zarr-python) on the same
workloads and the same data, in one run, with the ratios.

    python benches/compare_engines.py [--icechunk-python PY] [--icechunk1-python PY]
        [--floe-bin PATH] [--mib 256] [--runs 3] [--workload NAME] [--json OUT]

floe runs as the `workloads` bench executable (`benches/workloads.rs`; built with
`cargo bench --bench workloads --no-run` when `--floe-bin` is not given). Icechunk
runs in its own interpreter (one with icechunk 2.3.0, zarr and numpy, by default
`$FLOE_PYTHON312` or the py312 venv `.ci/run` sets up; optionally one with icechunk
1.1.21): this file re-runs itself there with `--engine icechunk`. The helpers it
shares with `compare_python.py` (floe's Python package against Icechunk) are in
`engine_compare_common.py`. Every
engine prints one JSON line of timings (seconds); the engines alternate run by run
(floe, Icechunk 2, Icechunk 1, floe, ...), each run on fresh spec-1 repositories on
the local filesystem, and the table shows the median of the runs per workload, in
milliseconds, with floe's speed-up (Icechunk time / floe time).

Every run's repositories stay on disk until the whole comparison ends, and before
every run each engine flushes dirty pages and, where allowed (root), drops the
kernel's clean caches: ext4 scans past the inodes of files deleted within the last
minute (or five, while their inode-table blocks are dirty) for every file it
creates, which made 10,000 file creations take 0.8-4 s instead of 0.16 s for
whichever engine ran after the previous run's clean-up.

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
- read_zstd_array: the zstd array of write_zstd_commit, written and committed
  untimed, read whole through the array API from a read-only session.
- small_write_commit / small_read: 10,000 chunks of 4 KiB (a 1-D float32 array of
  0, 1, 2, ..., uncompressed) written through the array API plus the commit / read
  back whole through the array API from a read-only session.
- cold_open: a repository of 1,000 small arrays (one chunk each, one commit); open it
  fresh, take a read-only session on main, open one array and read it; the median
  of 20 such opens.
- concurrent_commits: 8 writer processes (each its own interpreter and repository
  handle) make 10 commits each to main at once, each commit writing its own element
  of a shared array and rebasing when the branch moved (Icechunk: `commit(...,
  rebase_with=ConflictDetector())`); timed from the start signal until every writer
  is done. Commits that raised an error are counted as failed
  (`concurrent_commits_failed`), those that reported success but are missing from
  the history or the array as lost (`concurrent_commits_lost`), summed over the
  runs. (Icechunk warns that its local file-system storage is not safe for
  concurrent commits; floe's local storage has a real compare-and-swap.)
- ancestry_2001_cold: a branch of 2,001 commits; open the repository fresh and list
  the whole ancestry of main.
- ancestry_2001_cold_spec2: the same on a spec-2 repository (Icechunk 2.x only).

A second table puts the bulk-write and store-API rows against their floors, which the
floe side measures too: `floor_zstd_write` (the same chunks compressed with zstd
level 3 on one thread per core and written as files), `floor_write` and `floor_read`
(the same files written and read with plain std::fs, 10 at a time), all without a
repository.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_compare_common import (  # noqa: E402
    medians, rerun_self, run_engine, settle, table, venv_python)

WORKLOADS = [
    "attr_commit",
    "commit_10k_refs",
    "write_zstd_commit",
    "store_write_commit",
    "read_store",
    "read_array",
    "read_zstd_array",
    "small_write_commit",
    "small_read",
    "cold_open",
    "concurrent_commits",
    "ancestry_2001_cold",
    "ancestry_2001_cold_spec2",
]
COLS = 1024
CHUNK_ROWS = 256
IN_FLIGHT = 10
ATTR_COMMITS = 100
REFS = 10_000
ANCESTRY_COMMITS = 2001
SMALL_CHUNKS = 10_000
SMALL_CHUNK_LEN = 1_024
COLD_ARRAYS = 1_000
COLD_OPENS = 20
WRITERS = 8
COMMITS_PER_WRITER = 10


def make_data(mib):
    rows = mib * 1024 * 1024 // 4 // COLS
    return np.random.default_rng(0).normal(size=(rows, COLS)).astype("<f4")


# --- Icechunk side (runs under the Icechunk interpreter) -------------------------


class IcechunkWorkloads:
    """The workloads through zarr-python on an Icechunk repository."""

    def __init__(self, data, scratch=None):
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
        # Nothing is deleted before the process ends (see `settle`); with a scratch
        # directory from the driver, not before the whole comparison ends.
        self.own_tmp = None if scratch else tempfile.TemporaryDirectory()
        self.root = tempfile.mkdtemp(dir=scratch) if scratch else self.own_tmp.name

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def new_repo(self, spec=1):
        path = tempfile.mkdtemp(dir=self.root)
        storage = self.ic.local_filesystem_storage(path)
        if self.major >= 2:
            repo = self.ic.Repository.create(storage, spec_version=spec)
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

    def read_zstd_array(self):
        _, repo = self.new_repo()
        s = repo.writable_session("main")
        self.float_array(s.store, "big", zstd=True)[...] = self.data
        s.commit("zstd array")
        store = self.main_store(repo)
        t = time.perf_counter()
        back = self.zarr.open_array(store=store, path="big", mode="r")[...]
        elapsed = time.perf_counter() - t
        assert np.array_equal(back, self.data), "array reads back as written"
        return elapsed

    def ancestry_2001_cold(self, spec=1):
        path, repo = self.new_repo(spec)
        self.attribute_commits(repo, ANCESTRY_COMMITS - 1)
        del repo
        t = time.perf_counter()
        repo = self.ic.Repository.open(self.ic.local_filesystem_storage(path))
        history = list(repo.ancestry(branch="main"))
        elapsed = time.perf_counter() - t
        # The commits plus the initial snapshot.
        assert len(history) == ANCESTRY_COMMITS + 1, len(history)
        return elapsed

    def ancestry_2001_cold_spec2(self):
        """None on Icechunk 1.x, which has no spec 2."""
        return self.ancestry_2001_cold(spec=2) if self.major >= 2 else None


    def small_values(self):
        return np.arange(SMALL_CHUNKS * SMALL_CHUNK_LEN, dtype="<f4")

    def write_small(self, repo, values):
        s = repo.writable_session("main")
        a = self.zarr.create_array(
            s.store, name="small", shape=values.shape, chunks=(SMALL_CHUNK_LEN,),
            dtype="float32", fill_value=0.0, compressors=None,
        )
        a[...] = values
        return s

    def small_write_commit(self):
        values = self.small_values()
        _, repo = self.new_repo()
        t = time.perf_counter()
        self.write_small(repo, values).commit("small chunks")
        elapsed = time.perf_counter() - t
        back = self.zarr.open_array(store=self.main_store(repo), path="small", mode="r")
        assert np.array_equal(back[...], values), "small chunks read back as written"
        return elapsed

    def small_read(self):
        values = self.small_values()
        _, repo = self.new_repo()
        self.write_small(repo, values).commit("small chunks")
        store = self.main_store(repo)
        t = time.perf_counter()
        back = self.zarr.open_array(store=store, path="small", mode="r")[...]
        elapsed = time.perf_counter() - t
        assert np.array_equal(back, values), "small chunks read back as written"
        return elapsed

    @staticmethod
    def cold_values(i):
        return np.arange(i * 4, i * 4 + 4, dtype="<f4")

    def cold_open(self):
        path, repo = self.new_repo()
        s = repo.writable_session("main")
        self.zarr.create_group(s.store)
        for i in range(COLD_ARRAYS):
            a = self.zarr.create_array(s.store, name=f"a{i}", shape=(4,), chunks=(4,),
                                       dtype="float32", fill_value=0.0, compressors=None)
            a[...] = self.cold_values(i)
        s.commit("1,000 arrays")
        del repo
        times = []
        for k in range(COLD_OPENS):
            i = k * COLD_ARRAYS // COLD_OPENS + 7
            t = time.perf_counter()
            repo = self.ic.Repository.open(self.ic.local_filesystem_storage(path))
            store = repo.readonly_session(branch="main").store
            back = self.zarr.open_array(store=store, path=f"a{i}", mode="r")[...]
            times.append(time.perf_counter() - t)
            assert np.array_equal(back, self.cold_values(i)), f"array a{i} reads back"
        return statistics.median(times)

    def concurrent_commits(self):
        """Returns (seconds, {"failed": commits that raised, "lost": commits that
        reported success but are missing from the history or the array})."""
        total = WRITERS * COMMITS_PER_WRITER
        path, repo = self.new_repo()
        s = repo.writable_session("main")
        self.zarr.create_array(s.store, name="c", shape=(total,), chunks=(1,),
                               dtype="uint8", fill_value=0, compressors=None)
        base = s.commit("shared array")
        writers = []
        for w in range(WRITERS):
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--writer", path, str(w)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True,
            )
            assert protocol_line(proc, lambda line: line == "ready"), f"writer {w} started"
            writers.append(proc)
        t = time.perf_counter()
        for proc in writers:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        # Each writer prints the commits it made that returned success.
        succeeded = []
        for proc in writers:
            report = protocol_line(proc, lambda line: line.startswith("[["))
            succeeded += json.loads(report) if report else []
            proc.wait()
        elapsed = time.perf_counter() - t
        # What landed: the commits since `base` on main, by message, and the values.
        landed = set()
        for c in repo.ancestry(branch="main"):
            if c.id == base:
                break
            landed.add(c.message)
        back = self.zarr.open_array(store=self.main_store(repo), path="c", mode="r")[...]
        lost = sum(1 for w, c in succeeded
                   if f"writer {w} commit {c}" not in landed
                   or int(back[w * COMMITS_PER_WRITER + c]) != writer_value(w, c))
        return elapsed, {"failed": total - len(succeeded), "lost": lost}


def protocol_line(proc, wanted):
    """The next line of a writer's stdout that `wanted` accepts, or None at its end.
    Icechunk 1.x logs its warnings to stdout, so other lines are skipped."""
    for line in proc.stdout:
        if wanted(line.strip()):
            return line.strip()
    return None


def writer_value(w, c):
    """The value concurrent_commits writer w writes at its commit c (never 0)."""
    return w * COMMITS_PER_WRITER + c + 1


def writer_main(path, w):
    """A concurrent_commits writer: opens the repository, prints `ready`, waits for a
    line on stdin, makes its commits, then prints the JSON list of `[w, c]` for the
    commits that returned success (a failure is reported on stderr)."""
    import icechunk
    import zarr

    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
    print("ready", flush=True)
    sys.stdin.readline()
    succeeded = []
    for c in range(COMMITS_PER_WRITER):
        s = repo.writable_session("main")
        a = zarr.open_array(store=s.store, path="c", mode="r+")
        a[w * COMMITS_PER_WRITER + c] = writer_value(w, c)
        try:
            s.commit(f"writer {w} commit {c}", rebase_with=icechunk.ConflictDetector())
            succeeded.append([w, c])
        except Exception as e:  # noqa: BLE001 - reported and counted
            print(f"writer {w} commit {c} failed: {e!r}", file=sys.stderr)
    print(json.dumps(succeeded), flush=True)


def icechunk_main(args):
    import icechunk
    import zarr

    data = None
    if set(args.workloads) & {"write_zstd_commit", "store_write_commit", "read_store",
                              "read_array", "read_zstd_array"}:
        if args.data:
            data = np.fromfile(args.data, dtype="<f4").reshape(-1, COLS)
            assert data.nbytes == args.mib * 1024 * 1024, "--data must hold --mib MiB"
        else:
            data = make_data(args.mib)
    w = IcechunkWorkloads(data, args.scratch)
    out = {"engine": "icechunk", "version": icechunk.__version__,
           "zarr": zarr.__version__, "mib": args.mib, "runs": args.runs}
    for name in args.workloads:
        times = []
        outcomes = []
        for run in range(args.runs):
            settle()
            result = getattr(w, name)()
            if result is None:
                break
            if isinstance(result, tuple):
                result, outcome = result
                outcomes.append(outcome)
            times.append(result)
            print(f"icechunk {icechunk.__version__}: {name} run {run + 1}/{args.runs}: "
                  f"{times[-1]:.4f} s", file=sys.stderr)
        if not times:
            continue
        out[f"{name}_s"] = statistics.median(times)
        for kind in ("failed", "lost"):
            if outcomes:
                out[f"{name}_{kind}"] = sum(o[kind] for o in outcomes)
    if w.own_tmp:
        w.own_tmp.cleanup()
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


# The floors of the bulk-write and store-API rows (floe's side only): the same chunks
# compressed on one thread per core and written as files / the same files written
# and read with plain std::fs.
FLOORS = {"write_zstd_commit": "floor_zstd_write", "store_write_commit": "floor_write",
          "read_store": "floor_read"}


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
    return "\n".join(["| workload | floe (ms) | floor: the same files, no repository (ms) "
                      "| floe / floor |",
                      "|---|---:|---:|---:|"] + lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=["icechunk"], help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--writer", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--scratch", help=argparse.SUPPRESS)
    p.add_argument("--icechunk-python", default=venv_python("py312", "FLOE_PYTHON312"),
                   help="interpreter with icechunk 2.x, zarr, numpy (default: the py312 venv)")
    p.add_argument("--icechunk1-python", help="interpreter with icechunk 1.x (optional)")
    p.add_argument("--floe-bin", help="the built workloads bench executable")
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workload", choices=WORKLOADS, help="run only this workload")
    p.add_argument("--json", help="save runs, medians and the table here")
    args = p.parse_args()
    args.workloads = [args.workload] if args.workload else WORKLOADS

    if args.writer:
        writer_main(args.writer[0], int(args.writer[1]))
        return
    if args.engine == "icechunk":
        icechunk_main(args)
        return
    if not args.icechunk_python:
        p.error("--icechunk-python is required (no default venv found)")
    floe_bin = args.floe_bin or build_floe()
    engines = {"floe": None, "icechunk2": args.icechunk_python}
    if args.icechunk1_python:
        engines["icechunk1"] = args.icechunk1_python
    only = ["--workload", args.workload] if args.workload else []
    runs = {e: [] for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        data_path = os.path.join(tmp, "data.f32")
        make_data(args.mib).tofile(data_path)
        # Every engine run's repositories stay until the whole comparison ends.
        scratch = os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        common = ["--mib", str(args.mib), "--runs", "1", "--data", data_path,
                  "--scratch", scratch] + only
        for run in range(args.runs):
            for engine, py in engines.items():
                print(f"run {run + 1}/{args.runs}: {engine} ...", file=sys.stderr)
                if py is None:
                    out = run_engine([floe_bin] + common)
                else:
                    out = rerun_self(py, __file__, ["--engine", "icechunk"] + common)
                if engine != "floe":
                    want = "2." if engine == "icechunk2" else "1."
                    if not out["version"].startswith(want):
                        sys.exit(f"{py} has icechunk {out['version']}, expected {want}x")
                runs[engine].append(out)

    labels = {e: "floe" if e == "floe" else f"Icechunk {runs[e][0]['version']}"
              for e in engines}
    med = medians(runs, [f"{w}_s" for w in args.workloads])
    md = table(labels, med, [f"{w}_s" for w in args.workloads])
    if "concurrent_commits" in args.workloads:
        total = WRITERS * COMMITS_PER_WRITER * args.runs
        md += f"\n\nconcurrent_commits, of {total} commits: " + "; ".join(
            f"{labels[e]} "
            + ", ".join(f"{sum(r.get(f'concurrent_commits_{k}', 0) for r in rs)} {k}"
                        for k in ("failed", "lost"))
            for e, rs in runs.items())
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
