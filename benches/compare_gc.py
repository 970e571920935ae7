"""Garbage collection side by side: floe's (incremental) and Icechunk 2.3.0's on copies
of one repository, a first time and again after one more "day" of commits.

    python benches/compare_gc.py [--floe-python PY] [--icechunk-python PY]
        [--arrays 40] [--commits 400] [--per-commit 4] [--chunks 16] [--day 40]
        [--runs 3] [--keep-history] [--writer icechunk|floe] [--base DIR]

The repository (spec 2, local disk) is written by Icechunk: `--arrays` arrays, then
`--commits` commits, each rewriting the `--chunks` chunks of `--per-commit` arrays
(so each commit writes that many new manifests), every commit but the last few then
expired. With `--keep-history` nothing is expired: every snapshot and manifest stays
reachable, as in a repository whose history is kept for years, and each collection
finds only the chunks of one abandoned session per "day" to delete. `--writer`
chooses the engine that writes the repository (Icechunk by default; floe writes the
same format faster, for large repositories); `--base` takes a repository written
earlier by this script's writer (with the same options) instead of writing one.
Each run copies it twice (as hard links); on each copy one engine expires and collects (the first
collection), then Icechunk adds `--day` more commits to both copies (the same
writes), and each engine expires and collects again (the second collection, where
floe reads only the manifests written since the first). Engines run in their own
interpreters, alternating; medians in milliseconds, then one JSON line.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_compare_common import rerun_self, settle, venv_python  # noqa: E402


def _write(engine, repo_dir, arrays, commits, per_commit, chunks, first, create, abandon):
    """`engine` writes `commits` commits (numbered from `first`) into the repository,
    then, with `abandon`, one session's chunks that are never committed."""
    import numpy as np
    import zarr

    ic = __import__(engine)

    storage = ic.local_filesystem_storage(repo_dir)
    if create:
        repo = ic.Repository.create(storage)
        s = repo.writable_session("main")
        root = zarr.group(s.store)
        for a in range(arrays):
            # 1 KiB chunks: above the inline threshold (512 bytes), so native objects.
            root.create_array(f"a{a}", shape=(chunks * 128,), chunks=(128,), dtype="f8",
                              fill_value=0.0, compressors=None)
        s.commit("arrays")
    repo = ic.Repository.open(storage)
    for k in range(first, first + commits):
        s = repo.writable_session("main")
        root = zarr.open_group(s.store)
        for j in range(per_commit):
            a = (k * per_commit + j) % arrays
            root[f"a{a}"][:] = np.full(chunks * 128, k + j / 10)
        s.commit(f"commit {k}")
    if abandon:
        s = repo.writable_session("main")
        zarr.open_group(s.store)["a0"][:] = np.full(chunks * 128, -1.0)
        if hasattr(s, "flush_packs"):
            s.flush_packs()


def _collect(engine, repo_dir, expire):
    """Expires every snapshot older than now (with `expire`) and collects; returns
    seconds taken by the collection alone."""
    import datetime
    import time

    ic = __import__(engine)
    repo = ic.Repository.open(ic.local_filesystem_storage(repo_dir))
    now = datetime.datetime.now(datetime.timezone.utc)
    if expire:
        repo.expire_snapshots(now)
    kw = {"allow_recent_cutoff": True} if engine == "floe" else {}
    t = time.perf_counter()
    summary = repo.garbage_collect(now, **kw)
    elapsed = time.perf_counter() - t
    return elapsed, summary.chunks_deleted, summary.manifests_deleted


def _child(args):
    """One step in this interpreter, printing JSON."""
    if args.step == "write":
        _write(args.engine, args.repo, args.arrays, args.n, args.per_commit, args.chunks,
               args.first, args.create, args.keep_history)
        print(json.dumps({}))
    else:
        s, chunks, manifests = _collect(args.engine, args.repo, not args.keep_history)
        print(json.dumps({"s": s, "chunks": chunks, "manifests": manifests}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", choices=["write", "collect"], help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--repo", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--create", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--floe-python", default=venv_python("pyfloe"))
    p.add_argument("--icechunk-python", default=venv_python("py312", "FLOE_PYTHON312"))
    p.add_argument("--arrays", type=int, default=40)
    p.add_argument("--commits", type=int, default=400)
    p.add_argument("--per-commit", type=int, default=4)
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--day", type=int, default=40)
    p.add_argument("--keep-history", action="store_true")
    p.add_argument("--writer", choices=["icechunk", "floe"], default="icechunk")
    p.add_argument("--base", help="reuse this repository instead of writing one")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    if args.step:
        _child(args)
        return
    engines = {"floe": args.floe_python, "icechunk": args.icechunk_python}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        base = os.path.join(tmp, "base")
        common = ["--arrays", str(args.arrays), "--per-commit", str(args.per_commit),
                  "--chunks", str(args.chunks), "--engine", args.writer]
        if args.keep_history:
            common.append("--keep-history")
        writer = engines[args.writer]
        if args.base:
            base = args.base
        else:
            t = time.perf_counter()
            rerun_self(writer, __file__, ["--step", "write", "--repo", base, "--n",
                                          str(args.commits), "--create", *common])
            print(f"written in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        manifests = len(os.listdir(os.path.join(base, "manifests")))
        chunks = len(os.listdir(os.path.join(base, "chunks")))
        times = {e: {"first": [], "second": []} for e in engines}
        deleted = {}
        for r in range(args.runs):
            order = list(engines) if r % 2 == 0 else list(engines)[::-1]
            for engine in order:
                copy = os.path.join(tmp, f"{engine}-{r}")
                t = time.perf_counter()
                # Hard links: collection only deletes files and writes new ones (each
                # written to a temporary name and renamed), so a linked copy behaves
                # as a copy, and 10^6 files link in seconds where copying takes
                # minutes.
                subprocess.run(["cp", "-al", base, copy], check=True)
                print(f"copied in {time.perf_counter() - t:.0f} s", file=sys.stderr)
                settle()
                keep = ["--keep-history"] if args.keep_history else []
                collect = ["--step", "collect", "--engine", engine, "--repo", copy, *keep]
                first = rerun_self(engines[engine], __file__, collect)
                rerun_self(writer, __file__, ["--step", "write", "--repo", copy, "--n",
                                              str(args.day), "--first", str(args.commits),
                                              *common])
                settle()
                second = rerun_self(engines[engine], __file__, collect)
                shutil.rmtree(copy)
                times[engine]["first"].append(first["s"])
                times[engine]["second"].append(second["s"])
                deleted[engine] = (first["chunks"], first["manifests"], second["chunks"],
                                   second["manifests"])
        if deleted["floe"] != deleted["icechunk"]:
            sys.exit(f"the engines deleted different objects: {deleted}")
        med = {e: {k: statistics.median(v) * 1e3 for k, v in t.items()} for e, t in times.items()}
        history = "history kept" if args.keep_history else "history expired"
        print(f"{manifests} manifests, {chunks} chunk objects, {args.commits} commits "
              f"(+{args.day}), {history}; medians of {args.runs}\n")
        print("| collection | floe (ms) | Icechunk 2.3.0 (ms) | floe speed-up |")
        print("|---|---:|---:|---:|")
        for k, name in (("first", "first (floe: no state yet)"),
                        ("second", f"after {args.day} more commits")):
            f, i = med["floe"][k], med["icechunk"][k]
            print(f"| {name} | {f:.0f} | {i:.0f} | {i / f:.1f}x |")
        print(json.dumps({"median_ms": med, "deleted": deleted, "manifests": manifests,
                          "chunks": chunks}))


if __name__ == "__main__":
    main()
