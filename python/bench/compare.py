"""The same zarr-python workloads on floe and on Icechunk 2.3.0, side by side.

    python python/bench/compare.py --floe-python PY --icechunk-python PY [--mib 64]

Each engine runs in its own interpreter (floe's package and Icechunk 2.3.0 live in
different venvs): this file re-runs itself with `--engine floe|icechunk` and prints
one JSON line of timings per engine (medians of 3 runs, engines alternated), then the
table with floe's speed-up (Icechunk time / floe time). Local filesystem storage in
a temporary directory; spec-1 repositories for both. Each run starts by flushing
dirty pages and dropping the kernel's clean caches where allowed (see `settle`).
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
        if engine == "floe":
            repo = ic.Repository.create(storage)
        else:
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


def settle():
    """Flushes dirty pages and, where allowed (root), drops the kernel's clean caches
    before an engine's run: ext4 otherwise scans past the inodes of files the previous
    run deleted (within the last minute) for every file this run creates."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError:
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=["floe", "icechunk"])
    p.add_argument("--floe-python")
    p.add_argument("--icechunk-python")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    if args.engine:
        print(json.dumps(workloads(args.engine, args.mib)))
        return
    runs = {"floe": [], "icechunk": []}
    for _ in range(args.runs):
        for engine, py in (("floe", args.floe_python), ("icechunk", args.icechunk_python)):
            out = subprocess.run(
                [py, os.path.abspath(__file__), "--engine", engine, "--mib", str(args.mib)],
                check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
            ).stdout
            runs[engine].append(json.loads(out.strip().splitlines()[-1]))
    med = {e: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for e, rs in runs.items()}
    print(f"{'workload':44} {'floe':>10} {'icechunk':>10} {'speed-up':>9}")
    for k in med["floe"]:
        f, i = med["floe"][k], med["icechunk"][k]
        print(f"{k:44} {f:10.3f} {i:10.3f} {i / f:8.2f}x")
    print(json.dumps(med))


if __name__ == "__main__":
    main()
