"""floe's zarr codec pipeline (floe.codec_pipeline) on and off, Icechunk 2.3.0, and
zarrs-python on a plain LocalStore, on the workloads of issue 32, through zarr-python.

    python benches/compare_pipeline.py [--floe-python PY] [--icechunk-python PY]
        [--zarrs-python PY] [--mib 256] [--xr-mib 1024] [--runs 3] [--only ROWS]

Engines, each in its own interpreter, alternating run by run (medians printed as a
Markdown table in milliseconds, then one JSON line):
- ``floe``: floe's package with its pipeline (the default once ``floe`` is imported);
- ``floe-off``: the same interpreter with ``FLOE_CODEC_PIPELINE=0`` (zarr's pipeline);
- ``icechunk``: Icechunk 2.3.0 (zarr's pipeline);
- ``zarrs``: zarrs-python's pipeline on a zarr ``LocalStore`` (no versioning, no
  commit), when ``--zarrs-python`` has the ``zarrs`` package;
- ``rust``: floe's own Rust API on the same workloads, when ``--floe-rust-bin`` names
  the ``workloads`` bench executable (``cargo bench --bench workloads --no-run``):
  the same bytes for the 1 MiB-chunk and sharded rows (passed with ``--data``),
  the dataset rows as 4 arrays written and read back whole and averaged (no
  xarray; the Dask row is compared with the same write, no cluster).
Repositories (spec 1) and stores live in a temporary directory on local disk. Each
write row starts after ``os.sync()``: no row pays the kernel's writeback of the files
an earlier row wrote (which made a row depend on the rows before it). Each
engine's process first writes and reads 4 MiB through each codec path in a repository
or store of its own (untimed): the caches were just dropped, and the first timed row
would otherwise include reading the engine's libraries back from disk.

The floor of the zstd write rows is measured in each engine's process just before
them (``floor_zstd_numcodecs``: numcodecs' zstd level 3 of the same chunks on one
thread per core into plain files, no repository, no zarr); each engine's zstd and
xarray writes are printed as ratios to the floor of their own process under the
table. A floor from another process is not comparable on a virtual machine that
hands freed memory back to its host: a page handed back costs a fault on the host
when it is next written, and a page cache of 256 MiB written into new files took
0.06 s of kernel time on pages just freed and 0.8-1.6 s on pages handed back, so a
write row's time depends on what the machine did seconds before it.

Workloads (``--mib`` MiB of float32 for the first three, ``--shard-mib`` for the sharded
array, ``--xr-mib`` for xarray):
zstd(3) and uncompressed arrays of 1 MiB chunks written + committed and read back;
10,000 chunks of 4 KiB written + committed and read back; a sharded array (1 MiB
shards of 4 KiB inner chunks) written + committed, read whole, and one inner chunk
read per shard, then one selection of each kind zarr-python has (orthogonal with an
integer array, coordinate, mask, stepped slice, block) touching one inner chunk or
element of every shard; attribute-only commits of a group (median of 50); the 1 MiB-chunk arrays once more in the same process ("again":
a second batch, which reuses what the first allocated); an xarray dataset of 4
float32 variables written with ``to_zarr`` + commit, then ``open_zarr(...).mean().compute()``; the same dataset as Dask arrays
written from a ``LocalCluster`` of 2 worker processes (``to_icechunk`` through forks
+ one commit; zarrs: ``to_zarr``).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_compare_common import medians, run_engine, settle, table, venv_python  # noqa: E402

ROWS = ["zstd", "raw", "small", "sharded", "attrs", "xarray", "dask"]


def _write_row_start():
    """Flushes the dirty pages earlier rows left (so that a write row pays only its
    own writeback), then returns the row's start time (``time.perf_counter()``)."""
    os.sync()
    return time.perf_counter()


def _zstd_floor(data, tmp):
    """Seconds to compress the 1 MiB chunks of `data` (rows of 256) with numcodecs'
    zstd level 3 on one thread per core into plain files, with no repository and
    no zarr: the floor of the zstd write rows (numcodecs compresses without the
    GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    from numcodecs import Zstd

    codec = Zstd(level=3)
    out = os.path.join(tmp, "zstd-floor")
    os.makedirs(out)

    def one(i):
        with open(os.path.join(out, str(i)), "wb") as f:
            f.write(codec.encode(data[i * 256:(i + 1) * 256]))

    t = _write_row_start()
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(one, range(data.shape[0] // 256)))
    return time.perf_counter() - t


def _engine(engine, tmp):
    """(open a writable store, commit it, open a read-only store) for `engine`."""
    import zarr

    if engine == "zarrs":
        import zarrs  # noqa: F401

        zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
        root = os.path.join(tmp, "plain")

        def writable():
            return zarr.storage.LocalStore(root)

        return writable, lambda store: None, lambda: zarr.storage.LocalStore(root, read_only=True)
    ic = __import__("icechunk" if engine == "icechunk" else "floe")
    repo = ic.Repository.create(ic.local_filesystem_storage(os.path.join(tmp, "repo")),
                                spec_version=1)
    sessions = {}

    def writable():
        s = repo.writable_session("main")
        store = s.store
        sessions[id(store)] = (s, store)
        return store

    def commit(store):
        sessions.pop(id(store))[0].commit("bench")

    return writable, commit, lambda: repo.readonly_session("main").store


def _warm_up(engine, tmp):
    """A few chunks written, committed and read through every path the rows take
    (zstd, uncompressed, sharded), in a repository or store of their own: `settle`
    dropped the kernel's caches, so without this the first row would also time
    reading the engine's libraries back from disk."""
    import zarr
    from zarr.codecs import ZstdCodec

    os.makedirs(tmp)
    writable, commit, readonly = _engine(engine, tmp)
    data = np.random.default_rng(1).normal(size=(1024, 1024)).astype("f4")
    st = writable()
    for name, kw in (("z", {"compressors": [ZstdCodec(level=3)]}), ("r", {"compressors": None}),
                     ("s", {"compressors": None, "shards": (256, 1024)})):
        chunks = (1, 1024) if "shards" in kw else (256, 1024)
        a = zarr.create_array(st, name=name, shape=data.shape, chunks=chunks, dtype="f4",
                              fill_value=0, **kw)
        a[...] = data
    commit(st)
    for name in ("z", "r", "s"):
        assert np.array_equal(zarr.open_array(readonly(), path=name, mode="r")[...], data)


def workloads(engine, mib, xr_mib, rows, shard_mib=32):
    import zarr
    from zarr.codecs import ZstdCodec

    out = {}
    settle()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        _warm_up(engine, os.path.join(tmp, "warm-up"))
        writable, commit, readonly = _engine(engine, tmp)
        n = mib * 1024 * 1024 // 4
        data = np.random.default_rng(0).normal(size=(n // 1024, 1024)).astype("f4")

        if "zstd" in rows and engine != "zarrs":
            # Measured in every engine's process just before its zstd rows, in the
            # same state of the machine (see the module's docstring).
            out["floor_zstd_numcodecs_s"] = _zstd_floor(data, tmp)
        for row, compressors in (("zstd", [ZstdCodec(level=3)]), ("raw", None)):
            if row not in rows:
                continue
            t = _write_row_start()
            st = writable()
            a = zarr.create_array(st, name=row, shape=data.shape, chunks=(256, 1024),
                                  dtype="f4", compressors=compressors, fill_value=0)
            a[...] = data
            commit(st)
            out[f"write_{row}_1MiB_chunks_and_commit_s"] = time.perf_counter() - t
            t = time.perf_counter()
            back = zarr.open_array(readonly(), path=row, mode="r")[...]
            out[f"read_{row}_1MiB_chunks_s"] = time.perf_counter() - t
            assert np.array_equal(back, data)
            del back
            t = _write_row_start()
            st = writable()
            a = zarr.create_array(st, name=f"{row}_again", shape=data.shape,
                                  chunks=(256, 1024), dtype="f4", compressors=compressors,
                                  fill_value=0)
            a[...] = data
            commit(st)
            out[f"write_{row}_again_s"] = time.perf_counter() - t
            t = time.perf_counter()
            back = zarr.open_array(readonly(), path=f"{row}_again", mode="r")[...]
            out[f"read_{row}_again_s"] = time.perf_counter() - t
            assert np.array_equal(back, data)
            del back

        if "small" in rows:
            small = np.arange(10_000 * 1024, dtype="f4").reshape(10_000, 1024)
            t = _write_row_start()
            st = writable()
            b = zarr.create_array(st, name="small", shape=small.shape, chunks=(1, 1024),
                                  dtype="f4", compressors=None, fill_value=-1)
            b[...] = small
            commit(st)
            out["write_10000_4KiB_chunks_and_commit_s"] = time.perf_counter() - t
            t = time.perf_counter()
            back = zarr.open_array(readonly(), path="small", mode="r")[...]
            out["read_10000_4KiB_chunks_s"] = time.perf_counter() - t
            assert np.array_equal(back, small)

        if "sharded" in rows:
            data = data[: shard_mib * 256]
            t = _write_row_start()
            st = writable()
            c = zarr.create_array(st, name="sharded", shape=data.shape, chunks=(1, 1024),
                                  shards=(256, 1024), dtype="f4", compressors=None,
                                  fill_value=0)
            c[...] = data
            commit(st)
            out["write_sharded_4KiB_inner_and_commit_s"] = time.perf_counter() - t
            t = time.perf_counter()
            r = zarr.open_array(readonly(), path="sharded", mode="r")
            back = r[...]
            out["read_sharded_s"] = time.perf_counter() - t
            assert np.array_equal(back, data)
            t = time.perf_counter()
            for i in range(0, data.shape[0], 256):
                one = r[i + 7]
                assert np.array_equal(one, data[i + 7])
            out["read_one_inner_chunk_per_shard_s"] = time.perf_counter() - t
            # One selection call per kind, each touching one inner chunk (or one
            # element) of every shard.
            rows_ = np.arange(7, data.shape[0], 256)
            cols_ = (np.arange(rows_.size) * 13) % data.shape[1]
            mask = np.zeros(data.shape, dtype=bool)
            mask[rows_, cols_] = True
            for name, select, want in (
                ("orthogonal", lambda: r.get_orthogonal_selection((rows_, slice(None))),
                 lambda: data[rows_]),
                ("coordinate", lambda: r.vindex[rows_, cols_], lambda: data[rows_, cols_]),
                ("mask", lambda: r.vindex[mask], lambda: data[mask]),
                ("stepped", lambda: r[7::256], lambda: data[7::256]),
                ("block", lambda: r.blocks[1:3], lambda: data[256:768]),
            ):
                t = time.perf_counter()
                got = select()
                out[f"read_{name}_selection_s"] = time.perf_counter() - t
                assert np.array_equal(got, want()), name

        if "attrs" in rows:
            # Attribute-only commits, in a repository of their own beside a group and
            # an array of 10,000 chunks: one attribute of the group set and
            # committed, 50 times; the median.
            os.makedirs(os.path.join(tmp, "attrs"))
            # Names of their own: the rows after this one use the main repository.
            attrs_writable, attrs_commit, _ = _engine(engine, os.path.join(tmp, "attrs"))
            st = attrs_writable()
            zarr.create_group(st, path="meta", attributes={"n": -1})
            zarr.create_array(st, name="series", shape=(10_000, 1024), chunks=(1, 1024),
                              dtype="f4", compressors=None, fill_value=0)[...] = 1
            attrs_commit(st)
            settle()
            times = []
            for i in range(50):
                t = time.perf_counter()
                st = attrs_writable()
                zarr.open_group(st, path="meta", mode="r+").attrs["n"] = i
                attrs_commit(st)
                times.append(time.perf_counter() - t)
            out["attribute_commit_median_s"] = float(np.median(times))
            # zarr-python's own share: the same open and set on its MemoryStore (no
            # engine, no commit). With floe's Rust-API commit it is this row's floor.
            mem = zarr.storage.MemoryStore()
            zarr.create_group(mem, path="meta", attributes={"n": -1})
            times = []
            for i in range(50):
                t = time.perf_counter()
                zarr.open_group(mem, path="meta", mode="r+").attrs["n"] = i
                times.append(time.perf_counter() - t)
            out["attribute_set_zarr_memory_store_s"] = float(np.median(times))

        if "xarray" in rows:
            import xarray as xr

            per = xr_mib * 1024 * 1024 // 4 // 4
            nx = per // 1024
            rng = np.random.default_rng(1)
            ds = xr.Dataset({f"v{k}": (("t", "x"), rng.standard_normal((nx, 1024), "f4"))
                             for k in range(4)})
            enc = {f"v{k}": {"chunks": (256, 1024)} for k in range(4)}
            t = _write_row_start()
            st = writable()
            ds.to_zarr(st, zarr_format=3, consolidated=False, encoding=enc, mode="w")
            commit(st)
            out["xarray_to_zarr_and_commit_s"] = time.perf_counter() - t
            t = time.perf_counter()
            m = xr.open_zarr(readonly(), consolidated=False).mean().compute()
            out["xarray_open_zarr_mean_s"] = time.perf_counter() - t
            assert abs(float(m["v0"])) < 0.01

        if "dask" in rows:
            out.update(_dask_row(engine, tmp, xr_mib))
    return out


def _dask_row(engine, tmp, xr_mib):
    """The xarray dataset as Dask arrays, written from a ``LocalCluster`` of 2 worker
    processes (``to_icechunk``/``to_floe`` through forks, + one commit; zarrs: plain
    ``to_zarr`` into a LocalStore)."""
    import dask.array as da
    import xarray as xr
    from distributed import Client, LocalCluster

    per = xr_mib * 1024 * 1024 // 4 // 4
    nx = per // 1024
    ds = xr.Dataset({f"v{k}": (("t", "x"), da.random.default_rng(k).standard_normal(
        (nx, 1024), chunks=(256, 1024), dtype="f4")) for k in range(4)})
    enc = {f"v{k}": {"chunks": (256, 1024)} for k in range(4)}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        t = _write_row_start()
        if engine == "zarrs":
            import zarr

            ds.to_zarr(zarr.storage.LocalStore(os.path.join(tmp, "dask-plain")),
                       zarr_format=3, consolidated=False, encoding=enc, mode="w")
        else:
            ic = __import__("icechunk" if engine == "icechunk" else "floe")
            from importlib import import_module

            to_ic = import_module(f"{ic.__name__}.xarray").to_icechunk
            repo = ic.Repository.create(
                ic.local_filesystem_storage(os.path.join(tmp, "dask-repo")), spec_version=1)
            session = repo.writable_session("main")
            to_ic(ds, session, mode="w", encoding=enc)
            session.commit("dask")
        return {"dask_cluster_write_and_commit_s": time.perf_counter() - t}


# floe's Rust API (benches/workloads.rs): its workload -> this script's key.
RUST_KEYS = {
    "write_zstd_commit": "write_zstd_1MiB_chunks_and_commit_s",
    "read_zstd_array": "read_zstd_1MiB_chunks_s",
    "write_raw_commit": "write_raw_1MiB_chunks_and_commit_s",
    "read_array": "read_raw_1MiB_chunks_s",
    "small_write_commit": "write_10000_4KiB_chunks_and_commit_s",
    "small_read": "read_10000_4KiB_chunks_s",
    "sharded_write_commit": "write_sharded_4KiB_inner_and_commit_s",
    "sharded_read": "read_sharded_s",
    "sharded_read_inner": "read_one_inner_chunk_per_shard_s",
    "attr_commit": "attribute_commit_median_s",
}
RUST_ROWS = {"attrs": ["attr_commit"],
             "zstd": ["write_zstd_commit", "read_zstd_array"],
             "raw": ["write_raw_commit", "read_array"],
             "small": ["small_write_commit", "small_read"],
             "sharded": ["sharded_write_commit", "sharded_read", "sharded_read_inner"]}


def _rust_run(binary, args, rows, data_file):
    """One run of floe's Rust API (the ``workloads`` executable, one run of each
    workload, in a fresh scratch directory) on the rows it has, as this script's
    keys."""
    out = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as scratch:
        names = [w for r in rows for w in RUST_ROWS.get(r, [])]
        if names:
            got = run_engine([binary, "--runs", "1", "--mib", str(args.mib), "--data", data_file,
                              "--scratch", scratch, "--workload", ",".join(names)])
            out.update({RUST_KEYS[w]: got[f"{w}_s"] for w in names})
        if "xarray" in rows or "dask" in rows:
            got = run_engine([binary, "--runs", "1", "--mib", str(args.xr_mib), "--scratch",
                              scratch, "--workload", "dataset_write_commit,dataset_read_mean"])
            if "xarray" in rows:
                out["xarray_to_zarr_and_commit_s"] = got["dataset_write_commit_s"]
                out["xarray_open_zarr_mean_s"] = got["dataset_read_mean_s"]
            if "dask" in rows:
                out["dask_cluster_write_and_commit_s"] = got["dataset_write_commit_s"]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=["floe", "floe-off", "icechunk", "zarrs"],
                   help=argparse.SUPPRESS)
    p.add_argument("--floe-python", default=venv_python("pyfloe"))
    p.add_argument("--icechunk-python", default=venv_python("py312", "FLOE_PYTHON312"))
    p.add_argument("--zarrs-python", default=None,
                   help="interpreter with zarrs-python (row skipped when not given)")
    p.add_argument("--floe-rust-bin", default=None,
                   help="the workloads bench executable (Rust API column skipped when not given)")
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--xr-mib", type=int, default=1024)
    p.add_argument("--shard-mib", type=int, default=32,
                   help="MiB of the sharded array (1 MiB shards)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", default=",".join(ROWS), help="comma-separated of " + ",".join(ROWS))
    args = p.parse_args()
    rows = args.only.split(",")
    if args.engine:
        print(json.dumps(workloads(args.engine, args.mib, args.xr_mib, rows, args.shard_mib)))
        return
    engines = {"floe": args.floe_python, "floe-off": args.floe_python,
               "icechunk": args.icechunk_python}
    if args.zarrs_python:
        engines["zarrs"] = args.zarrs_python
    if args.floe_rust_bin:
        engines["rust"] = args.floe_rust_bin
        data_file = os.path.join(tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP")), "data.f32")
        n = args.mib * 1024 * 1024 // 4
        np.random.default_rng(0).normal(size=(n // 1024, 1024)).astype("<f4").tofile(data_file)
    runs = {e: [] for e in engines}
    for _ in range(args.runs):
        for engine, py in engines.items():
            if engine == "rust":
                settle()
                runs[engine].append(_rust_run(py, args, rows, data_file))
                continue
            env = dict(os.environ)
            env["FLOE_CODEC_PIPELINE"] = "0" if engine == "floe-off" else "1"
            os.environ.update(env)
            runs[engine].append(run_engine(
                [py, os.path.abspath(__file__), "--engine", engine, "--mib", str(args.mib),
                 "--xr-mib", str(args.xr_mib), "--shard-mib", str(args.shard_mib),
                 "--only", args.only]))
    if args.floe_rust_bin:
        shutil.rmtree(os.path.dirname(data_file), ignore_errors=True)
    med = medians(runs)
    labels = {"floe": "floe", "floe-off": "floe pipeline off", "icechunk": "Icechunk",
              "zarrs": "zarrs LocalStore", "rust": "floe Rust-API"}
    keys = list(med["floe"]) + [k for k in med.get("rust", {}) if k not in med["floe"]]
    print(table(labels, med, keys))
    same_size = ["xarray_to_zarr_and_commit_s"] if args.xr_mib == args.mib else []
    for engine in ("floe", "icechunk"):
        floor = med[engine].get("floor_zstd_numcodecs_s")
        for key in ["write_zstd_1MiB_chunks_and_commit_s", "write_zstd_again_s"] + same_size:
            if floor and key in med[engine]:
                print(f"{key}: {engine} {med[engine][key] / floor:.2f}x the zstd floor "
                      f"of its process ({floor * 1e3:.0f} ms)")
    rust_commit = med.get("rust", {}).get("attribute_commit_median_s")
    if rust_commit and "attribute_set_zarr_memory_store_s" in med["floe"]:
        attrs_floor = rust_commit + med["floe"]["attribute_set_zarr_memory_store_s"]
        print(f"attribute_commit_median: floe {med['floe']['attribute_commit_median_s'] / attrs_floor:.2f}x "
              f"its floor ({attrs_floor * 1e3:.2f} ms: zarr-python on a MemoryStore + "
              "floe's Rust-API commit)")
    print(json.dumps(med))


if __name__ == "__main__":
    main()
