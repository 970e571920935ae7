"""floe's Python package and Icechunk 2.3.0 on the same zarr-python workloads.

    python benches/compare_python.py [--floe-python PY] [--icechunk-python PY]
        [--mib 64] [--runs 3]

Each engine runs in its own interpreter (floe's package and Icechunk 2.3.0 live in
different venvs; the defaults are those `.ci/run` sets up: `$FLOE_VENV_DIR/pyfloe`
with floe's package installed, and `$FLOE_PYTHON312` or `$FLOE_VENV_DIR/py312`): this
file re-runs itself with `--engine floe|icechunk`, the engines alternating run by run,
and prints the medians as a table in milliseconds with floe's speed-up (Icechunk time
/ floe time), then as one JSON line. Local filesystem storage in a temporary
directory; spec-1 repositories for both. Each run starts by flushing dirty pages and
dropping the kernel's clean caches where allowed (see `settle` in
`engine_compare_common.py`, shared with `compare_engines.py`).
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_compare_common import medians, rerun_self, settle, table, venv_python  # noqa: E402


def workloads(engine, mib):
    import zarr

    if engine == "floe":
        import floe as ic
    else:
        import icechunk as ic
    from zarr.codecs import ZstdCodec

    out = {}
    settle()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "repo")
        storage = ic.local_filesystem_storage(path)
        repo = ic.Repository.create(storage, spec_version=1)
        n = mib * 1024 * 1024 // 4
        rows = n // 1024
        data = np.random.default_rng(0).normal(size=(rows, 1024)).astype("f4")

        t = time.perf_counter()
        s = repo.writable_session("main")
        a = zarr.create_array(s.store, name="big", shape=data.shape, chunks=(256, 1024),
                              dtype="f4", compressors=[ZstdCodec(level=3)])
        a[...] = data
        s.commit("big")
        out["write_zstd_and_commit_s"] = time.perf_counter() - t

        t = time.perf_counter()
        r = zarr.open_array(store=repo.readonly_session(branch="main").store, path="big",
                            mode="r")
        back = r[...]
        out["read_zstd_s"] = time.perf_counter() - t
        assert np.array_equal(back, data)

        small = np.arange(2000 * 1024, dtype="u4").reshape(2000, 1024)
        t = time.perf_counter()
        s = repo.writable_session("main")
        b = zarr.create_array(s.store, name="small", shape=small.shape, chunks=(2, 512),
                              dtype="u4", compressors=None)
        b[...] = small
        s.commit("small chunks")
        out["write_2000_4KiB_chunks_and_commit_s"] = time.perf_counter() - t

        t = time.perf_counter()
        r = zarr.open_array(store=repo.readonly_session(branch="main").store, path="small",
                            mode="r")
        assert np.array_equal(r[...], small)
        out["read_2000_4KiB_chunks_s"] = time.perf_counter() - t

        t = time.perf_counter()
        for i in range(20):
            s = repo.writable_session("main")
            g = zarr.open_group(store=s.store, mode="r+")
            g.attrs["i"] = i
            s.commit(f"attrs {i}")
        out["attribute_commit_ms"] = (time.perf_counter() - t) / 20 * 1000
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=["floe", "icechunk"], help=argparse.SUPPRESS)
    p.add_argument("--floe-python", default=venv_python("pyfloe"),
                   help="interpreter with floe's package, zarr, numpy")
    p.add_argument("--icechunk-python", default=venv_python("py312", "FLOE_PYTHON312"),
                   help="interpreter with icechunk 2.x, zarr, numpy")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    if args.engine:
        print(json.dumps(workloads(args.engine, args.mib)))
        return
    engines = {"floe": args.floe_python, "icechunk": args.icechunk_python}
    for engine, py in engines.items():
        if py is None:
            p.error(f"--{engine}-python is required (no default venv found)")
    runs = {e: [] for e in engines}
    for _ in range(args.runs):
        for engine, py in engines.items():
            runs[engine].append(
                rerun_self(py, __file__, ["--engine", engine, "--mib", str(args.mib)]))
    med = medians(runs)
    print(table({"floe": "floe", "icechunk": "Icechunk"}, med, list(med["floe"])))
    print(json.dumps(med))


if __name__ == "__main__":
    main()
