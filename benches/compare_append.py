"""Appending one time step to large arrays, side by side: floe and Icechunk 2.3.0, each
in its default configuration, on a repository it wrote itself.

    python benches/compare_append.py [--floe-python PY] [--icechunk-python PY]
        [--rows 9990] [--cols 100] [--arrays 1] [--appends 5]

Each engine creates a repository (spec 2, local disk) holding `--arrays` float32
arrays of `--rows` x `--cols` chunks of 1 x 256 elements, every chunk a virtual ref
(so setting up 10^6 refs needs no chunk data), and commits it. Then, `--appends`
times, a fresh process opens the repository, grows every array by one row of
chunks along its first (slowest) dimension, writes that row (native chunks of
1 KiB) and commits. Engines alternate; the table gives medians per append: time of
the whole step and of the commit alone, the bytes and objects written (new files
in the repository), and the process's peak resident set.

The default `--rows 9990` is close to floe's worst case: floe cuts an array's refs
into manifests of at most 50,000 chunk positions along whole trailing dimensions
(here blocks of 500 rows), so an append rewrites the last block, which holds
490 to 495 rows here; Icechunk's default keeps one manifest per array.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_compare_common import rerun_self, settle, venv_python  # noqa: E402

INNER = 256  # elements per chunk along the last dimension (1 KiB of float32)


def _repo(ic, path, create):
    config = ic.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        ic.VirtualChunkContainer("file:///data/", ic.local_filesystem_store("/data/"))
    )
    storage = ic.local_filesystem_storage(path)
    if create:
        return ic.Repository.create(storage, config=config)
    return ic.Repository.open(storage, config=config)


def _setup(engine, path, rows, cols, arrays):
    import numpy as np
    import zarr

    ic = __import__(engine)
    repo = _repo(ic, path, True)
    s = repo.writable_session("main")
    root = zarr.group(s.store)
    n = rows * cols
    locations = [f"file:///data/f{i}.bin" for i in range(rows) for _ in range(cols)]
    offsets = np.tile(np.arange(cols, dtype="u8") * INNER * 4, rows)
    lengths = np.full(n, INNER * 4, dtype="u8")
    for a in range(arrays):
        root.create_array(f"a{a}", shape=(rows, cols * INNER), chunks=(1, INNER),
                          dtype="f4", compressors=None, fill_value=0.0)
        s.store.set_virtual_refs_arr(f"a{a}", (rows, cols), locations, offsets, lengths)
    s.commit("setup")
    return {}


def _files(path):
    out = {}
    for d, _, names in os.walk(path):
        for name in names:
            p = os.path.join(d, name)
            out[p] = os.path.getsize(p)
    return out


def _append(engine, path, arrays):
    import numpy as np
    import zarr

    ic = __import__(engine)
    before = _files(path)
    t0 = time.perf_counter()
    repo = _repo(ic, path, False)
    s = repo.writable_session("main")
    root = zarr.open_group(s.store)
    for a in range(arrays):
        arr = root[f"a{a}"]
        rows = arr.shape[0]
        arr.resize((rows + 1, arr.shape[1]))
        arr[rows] = np.full(arr.shape[1], rows, dtype="f4")
    t1 = time.perf_counter()
    s.commit(f"append {rows}")
    t2 = time.perf_counter()
    after = _files(path)
    new = {p: n for p, n in after.items() if before.get(p) != n}
    manifests = sum(1 for p in new if f"{os.sep}manifests{os.sep}" in p)
    return {
        "s": t2 - t0,
        "commit_s": t2 - t1,
        "bytes": sum(new.values()),
        "manifest_bytes": sum(n for p, n in new.items() if f"{os.sep}manifests{os.sep}" in p),
        "objects": len(new),
        "manifests": manifests,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", choices=["setup", "append"], help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--repo", help=argparse.SUPPRESS)
    p.add_argument("--floe-python", default=venv_python("pyfloe"))
    p.add_argument("--icechunk-python", default=venv_python("py312", "FLOE_PYTHON312"))
    p.add_argument("--rows", type=int, default=9990)
    p.add_argument("--cols", type=int, default=100)
    p.add_argument("--arrays", type=int, default=1)
    p.add_argument("--appends", type=int, default=5)
    args = p.parse_args()
    if args.step == "setup":
        print(json.dumps(_setup(args.engine, args.repo, args.rows, args.cols, args.arrays)))
        return
    if args.step == "append":
        result = _append(args.engine, args.repo, args.arrays)
        print(json.dumps(result))
        sys.stdout.flush()
        os._exit(0)  # Icechunk 2.3.0 sometimes crashes at interpreter exit
    engines = {"floe": args.floe_python, "icechunk": args.icechunk_python}
    shape = ["--rows", str(args.rows), "--cols", str(args.cols), "--arrays", str(args.arrays)]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        repos = {e: os.path.join(tmp, e) for e in engines}
        for e, py in engines.items():
            t = time.perf_counter()
            rerun_self(py, __file__, ["--step", "setup", "--engine", e, "--repo", repos[e],
                                      *shape])
            print(f"{e}: set up in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        results = {e: [] for e in engines}
        for r in range(args.appends):
            order = list(engines) if r % 2 == 0 else list(engines)[::-1]
            for e in order:
                settle()
                append = ["--step", "append", "--engine", e, "--repo", repos[e], *shape]
                results[e].append(rerun_self(engines[e], __file__, append))
        med = {e: {k: statistics.median(x[k] for x in v) for k in v[0]}
               for e, v in results.items()}
        f, i = med["floe"], med["icechunk"]
        refs = args.rows * args.cols
        print(f"{args.arrays} array(s) of {refs:,} chunk refs, one row of {args.cols} chunks "
              f"appended per commit; medians of {args.appends}\n")
        print("| per append | floe | Icechunk 2.3.0 | Icechunk / floe |")
        print("|---|---:|---:|---:|")
        rows = (("append + commit (ms)", "s", 1e3), ("commit alone (ms)", "commit_s", 1e3),
                ("bytes written (KiB)", "bytes", 1 / 1024),
                ("manifest bytes (KiB)", "manifest_bytes", 1 / 1024),
                ("objects written", "objects", 1), ("manifests written", "manifests", 1),
                ("peak RSS (MiB)", "rss_mib", 1))
        for name, k, scale in rows:
            ratio = i[k] / f[k] if f[k] else float("inf")
            print(f"| {name} | {f[k] * scale:,.1f} | {i[k] * scale:,.1f} | {ratio:.1f}x |")
        print(json.dumps({"median": med, "runs": results}))


if __name__ == "__main__":
    main()
