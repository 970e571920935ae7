"""zarr-python fixtures for the floe CLI tests (tests/integration/cli.rs).

Usage:
  cli_interop.py write OUTDIR
      zarr-python writes OUTDIR/v3.zarr (Zarr v3: groups, attributes, several data
      types, codecs incl. sharding, non-default chunk key encodings) and
      OUTDIR/v2.zarr (Zarr v2: zlib, blosc, `/` separator, F order, strings).
  cli_interop.py verify OUTDIR FLOE
      After `floe import zarr` of both stores into OUTDIR/repo (at /v3 and /v2) and
      `floe export` of it to OUTDIR/export: zarr-python reads the export and checks
      values, data types and attributes against the data it wrote; `floe cat --format
      json` and `--format raw` (of the repository and of the plain source stores) are
      checked against the same values, and so is a region. When icechunk is installed,
      it opens OUTDIR/repo and reads the same values too.

Data is regenerated from fixed seeds, so `verify` needs nothing saved by `write`.
Exits non-zero on the first mismatch.
"""

import json
import subprocess
import os
import sys
import warnings

import numcodecs
import numpy as np
import zarr
import zarr.codecs as zc

warnings.filterwarnings("ignore")

ROOT_ATTRS = {"title": "cli interop", "nested": {"a": [1, 2], "b": None}}
GROUP_ATTRS = {"kind": "integers"}

# (path, dtype, shape, chunks, options); options feed zarr.create_array.
V3 = [
    ("ints/i8", "int8", (20,), (7,), {}),
    ("ints/u32", "uint32", (10, 12), (4, 5), {"compressors": zc.GzipCodec(level=3)}),
    ("ints/i64", "int64", (6, 5), (3, 5), {"compressors": None, "fill_value": -1,
                                           "partial": True}),
    ("floats/f32", "float32", (9, 9), (4, 4), {
        "compressors": zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
        "dimension_names": ["y", "x"], "attributes": {"units": "K"}}),
    ("floats/f64", "float64", (50,), (5,), {"shards": (20,), "nan": True,
                                            "compressors": zc.ZstdCodec(level=1)}),
    ("floats/f16", "float16", (7,), (3,), {"compressors": [zc.Crc32cCodec()]}),
    ("bools", "bool", (5, 5), (2, 2), {}),
    ("c64", "complex64", (4,), (2,), {}),
    ("strings", "str", (5,), (2,), {}),
    ("sharded2d", "uint16", (16, 16), (4, 4), {"shards": (8, 8),
                                               "compressors": zc.GzipCodec(level=1)}),
    ("bigendian", "int32", (6,), (4,), {"serializer": zc.BytesCodec(endian="big")}),
    ("dotsep", "int16", (6, 6), (3, 3), {
        "chunk_key_encoding": {"name": "default", "separator": "."}}),
    ("v2keys", "int32", (4, 4), (2, 2), {
        "chunk_key_encoding": {"name": "v2", "separator": "."}}),
    ("scalar", "float64", (), (), {}),
]

V2 = [
    ("a", "int16", (10, 10), (3, 4), {"compressors": numcodecs.Zlib(level=1)}),
    ("g/b", "float64", (7,), (3,), {
        "compressors": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE),
        "chunk_key_encoding": {"name": "v2", "separator": "/"}}),
    ("g/f", "int32", (4, 5), (2, 3), {"order": "F", "compressors": numcodecs.Zlib(level=1),
                                      "attributes": {"_ARRAY_DIMENSIONS": ["y", "x"],
                                                     "units": "m"}}),
    ("g/s", "str", (4,), (3,), {}),
]

STRINGS = ["alpha", "", "gamma δ", "Ω long string " * 3, "e"]


def data(dtype, shape, seed, nan=False):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "str":
        return np.array([STRINGS[i % len(STRINGS)] + str(i) for i in range(n)],
                        dtype=object).reshape(shape)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        v = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    elif dt.kind == "f":
        v = (rng.standard_normal(n) * 100).astype(dt)
        if nan and n > 3:
            v[1] = np.nan
            v[2] = np.inf
            v[3] = -np.inf
    elif dt.kind == "c":
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    else:
        raise ValueError(dtype)
    return v.reshape(shape)


def expected(spec, seed):
    path, dtype, shape, chunks, opts = spec
    v = data(dtype, shape, seed, nan=opts.get("nan", False))
    if opts.get("partial"):
        fill = opts["fill_value"]
        v = v.copy()
        v[shape[0] // 2:] = fill
    return v


def write_store(root, specs, zarr_format, group_attrs):
    g = zarr.open_group(root, mode="w", zarr_format=zarr_format)
    g.attrs.update(ROOT_ATTRS)
    for i, spec in enumerate(specs):
        path, dtype, shape, chunks, opts = spec
        parent = path.rsplit("/", 1)[0] if "/" in path else None
        if parent is not None and parent not in g:
            sub = g.create_group(parent)
            sub.attrs.update(group_attrs)
        kwargs = {k: v for k, v in opts.items() if k not in ("nan", "partial")}
        if dtype == "str":
            kwargs["dtype"] = str
        else:
            kwargs["dtype"] = dtype
        a = zarr.create_array(root, name=path, shape=shape, chunks=chunks,
                              zarr_format=zarr_format, **kwargs)
        v = expected(spec, i)
        if opts.get("partial"):
            a[: shape[0] // 2] = v[: shape[0] // 2]
        else:
            a[...] = v


def fail(msg):
    print("MISMATCH:", msg, file=sys.stderr)
    sys.exit(1)


def same(path, got, want):
    got = np.asarray(got)
    if got.shape != want.shape:
        fail(f"{path}: shape {got.shape} != {want.shape}")
    if want.dtype == object:
        ok = got.astype(object).tolist() == want.tolist()
    elif want.dtype.kind in "fc":
        ok = np.array_equal(got.astype(want.dtype), want, equal_nan=True)
    else:
        ok = np.array_equal(got.astype(want.dtype), want)
    if not ok:
        fail(f"{path}: values differ:\n{got!r}\n!=\n{want!r}")


def unjson(v):
    if isinstance(v, list):
        return [unjson(x) for x in v]
    if v == "NaN":
        return float("nan")
    if v == "Infinity":
        return float("inf")
    if v == "-Infinity":
        return float("-inf")
    return v


def from_cat_json(text, want):
    v = unjson(json.loads(text))
    if want.dtype == object:
        return np.array(v, dtype=object).reshape(want.shape)
    if want.dtype.kind == "c":
        a = np.array(v, dtype=np.float64)
        return (a[..., 0] + 1j * a[..., 1]).astype(want.dtype)
    return np.array(v, dtype=want.dtype).reshape(want.shape)


def floe(floe_bin, *args, binary=False):
    r = subprocess.run([floe_bin, *args], capture_output=True)
    if r.returncode != 0:
        fail(f"floe {' '.join(args)} failed: {r.stderr.decode()}")
    return r.stdout if binary else r.stdout.decode()


def check_cat(floe_bin, location, node, want):
    got = from_cat_json(floe(floe_bin, "cat", location, node, "--format", "json"), want)
    same(f"cat json {location} {node}", got, want)
    if want.dtype != object:
        le = want.dtype.newbyteorder("<")
        raw = floe(floe_bin, "cat", location, node, "--format", "raw", binary=True)
        same(f"cat raw {location} {node}", np.frombuffer(raw, dtype=le).reshape(want.shape),
             want)
    if want.ndim >= 1 and want.shape[0] >= 3:
        region = ",".join(["1:3"] + [":"] * (want.ndim - 1))
        text = floe(floe_bin, "cat", location, node, "--format", "json", "--region", region)
        same(f"cat region {location} {node}", from_cat_json(text, want[1:3]), want[1:3])


def verify(outdir, floe_bin):
    export = zarr.open_group(f"{outdir}/export", mode="r")
    if dict(export["v3"].attrs) != ROOT_ATTRS:
        fail(f"/v3 attributes {dict(export['v3'].attrs)}")
    if dict(export["v3/ints"].attrs) != GROUP_ATTRS:
        fail(f"/v3/ints attributes {dict(export['v3/ints'].attrs)}")
    for prefix, specs in (("v3", V3), ("v2", V2)):
        for i, spec in enumerate(specs):
            path, dtype, shape, chunks, opts = spec
            want = expected(spec, i)
            node = f"{prefix}/{path}"
            a = export[node]
            if a.metadata.zarr_format != 3:
                fail(f"{node}: exported zarr_format {a.metadata.zarr_format}")
            if dtype != "str" and np.dtype(a.dtype) != np.dtype(dtype).newbyteorder("="):
                if np.dtype(a.dtype).newbyteorder("=") != np.dtype(dtype):
                    fail(f"{node}: dtype {a.dtype} != {dtype}")
            same(f"export {node}", a[...], want)
            attrs = dict(opts.get("attributes", {}))
            attrs.pop("_ARRAY_DIMENSIONS", None)
            if dict(a.attrs) != attrs:
                fail(f"{node}: attributes {dict(a.attrs)} != {attrs}")
            check_cat(floe_bin, f"{outdir}/repo", f"/{node}", want)
            check_cat(floe_bin, f"{outdir}/{prefix}.zarr", f"/{path}", want)
            check_cat(floe_bin, f"{outdir}/export", f"/{node}", want)
    verify_icechunk(outdir)
    dims = export["v2/g/f"].metadata.dimension_names
    if tuple(dims or ()) != ("y", "x"):
        fail(f"/v2/g/f dimension names {dims}")
    print("ok")


def verify_icechunk(outdir):
    try:
        import icechunk
    except ImportError:
        print("icechunk not installed: repository not checked with icechunk", file=sys.stderr)
        return
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(f"{outdir}/repo"))
    root = zarr.open_group(repo.readonly_session("main").store, mode="r")
    for prefix, specs in (("v3", V3), ("v2", V2)):
        for i, spec in enumerate(specs):
            node = f"{prefix}/{spec[0]}"
            same(f"icechunk {node}", root[node][...], expected(spec, i))


def main():
    mode, outdir = sys.argv[1], sys.argv[2]
    if mode == "write":
        write_store(f"{outdir}/v3.zarr", V3, 3, GROUP_ATTRS)
        write_store(f"{outdir}/v2.zarr", V2, 2, {})
        print("ok")
    elif mode == "verify":
        verify(outdir, sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
    # Icechunk 2.3.0's extension can crash (SIGSEGV) while the interpreter shuts
    # down, after the work is done and printed (seen in CI): leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
