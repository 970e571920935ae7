"""Interop fixtures for floe's Zarr layer, using zarr-python 3.

Usage:
  zarr_interop.py write-v3 OUTDIR   zarr-python writes a matrix of v3 arrays
  zarr_interop.py write-v2 OUTDIR   zarr-python writes a matrix of v2 arrays
  zarr_interop.py verify OUTDIR     zarr-python reads arrays floe wrote and checks them

Layout of OUTDIR: store.zarr/ (a plain filesystem store), expected/<name>.bin (the
whole array as little-endian C-order bytes) or expected/<name>.json (strings), and
manifest.json: [{"path", "dtype", "shape", "kind": "raw"|"strings", "expected", ...}].
`verify` exits non-zero on any mismatch.
"""

import json
import os
import sys
import warnings
import zlib

import numpy as np
import zarr
import zarr.codecs as zc

warnings.filterwarnings("ignore")

NUMERIC = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]


def le(dtype):
    dt = np.dtype(dtype)
    return dt.newbyteorder("<") if dt.byteorder in (">", "=") else dt


def make_data(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    target = np.dtype(dtype)
    dt = target.newbyteorder("=")
    n = int(np.prod(shape)) if shape else 1
    if dt.kind == "b":
        v = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    elif dt.kind == "f":
        v = (rng.standard_normal(n) * 100).astype(dt)
        if n > 3:
            v[1] = np.nan
            v[2] = np.inf
            v[3] = -np.inf
    elif dt.kind == "c":
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
        if n > 1:
            v[1] = complex(np.nan, 2.0)
    else:
        raise ValueError(dtype)
    return v.astype(target).reshape(shape)


def fill_for(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return True
    if dt.kind in "iu":
        return 3
    if dt.kind == "f":
        return np.nan
    return complex(np.nan, 1.0)


def codec_configs(itemsize):
    """name -> kwargs for zarr.create_array (v3)."""
    return {
        "bytes_le": dict(serializer=zc.BytesCodec(endian="little"), compressors=None),
        "bytes_be": dict(serializer=zc.BytesCodec(endian="big"), compressors=None),
        "transpose_zstd": dict(
            filters=[zc.TransposeCodec(order=[1, 0])],
            serializer=zc.BytesCodec(endian="little"),
            compressors=[zc.ZstdCodec(level=3, checksum=True)],
        ),
        "gzip": dict(compressors=[zc.GzipCodec(level=5)]),
        "blosc_lz4_shuffle": dict(
            compressors=[zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=itemsize)]
        ),
        "blosc_zstd_bitshuffle": dict(
            compressors=[zc.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle", typesize=itemsize)]
        ),
        "blosc_blosclz_noshuffle": dict(compressors=[zc.BloscCodec(cname="blosclz", shuffle="noshuffle")]),
        "blosc_lz4hc": dict(compressors=[zc.BloscCodec(cname="lz4hc", shuffle="shuffle", typesize=itemsize)]),
        "blosc_zlib": dict(compressors=[zc.BloscCodec(cname="zlib", shuffle="shuffle", typesize=itemsize)]),
        "crc32c": dict(compressors=[zc.Crc32cCodec()]),
        "sharded": dict(shards=(4, 6), compressors=[zc.GzipCodec(level=1)]),
        "sharded_start": dict(
            serializer=zc.ShardingCodec(
                chunk_shape=(2, 3),
                codecs=[zc.BytesCodec(endian="big"), zc.ZstdCodec(level=1)],
                index_codecs=[zc.BytesCodec(), zc.Crc32cCodec()],
                index_location="start",
            ),
            compressors=None,
            chunks=(4, 6),
        ),
        "nested_sharding": dict(
            serializer=zc.ShardingCodec(
                chunk_shape=(4, 6),
                codecs=[zc.ShardingCodec(chunk_shape=(2, 3), codecs=[zc.BytesCodec()])],
                index_codecs=[zc.BytesCodec(), zc.Crc32cCodec()],
            ),
            compressors=None,
            chunks=(8, 12),
        ),
        "numcodecs_shuffle_zlib": dict(
            compressors=[
                zarr.codecs.numcodecs.Shuffle(elementsize=itemsize),
                zarr.codecs.numcodecs.Zlib(level=1),
            ]
        ),
        "v2_keys": dict(chunk_key_encoding={"name": "v2", "separator": "."}),
        "default_dot_keys": dict(chunk_key_encoding={"name": "default", "separator": "."}),
    }


class Writer:
    def __init__(self, outdir, zarr_format):
        self.outdir = outdir
        self.root = os.path.join(outdir, "store.zarr")
        os.makedirs(os.path.join(outdir, "expected"), exist_ok=True)
        self.store = zarr.storage.LocalStore(self.root)
        self.zarr_format = zarr_format
        self.manifest = []

    def record(self, name, arr, **extra):
        data = arr[...]
        if arr.dtype.kind in "OT" or str(arr.dtype).startswith("StringDType"):
            path = os.path.join("expected", name.replace("/", "__") + ".json")
            with open(os.path.join(self.outdir, path), "w") as f:
                json.dump([str(x) for x in np.asarray(data).reshape(-1)], f)
            kind = "strings"
        else:
            path = os.path.join("expected", name.replace("/", "__") + ".bin")
            with open(os.path.join(self.outdir, path), "wb") as f:
                f.write(np.ascontiguousarray(np.asarray(data).astype(le(arr.dtype))).tobytes())
            kind = "raw"
        entry = dict(path=name, dtype=str(arr.dtype), shape=list(arr.shape), kind=kind, expected=path)
        entry.update(extra)
        self.manifest.append(entry)

    def finish(self):
        with open(os.path.join(self.outdir, "manifest.json"), "w") as f:
            json.dump(self.manifest, f, indent=1)
        print(f"wrote {len(self.manifest)} arrays")


def write_v3(outdir):
    w = Writer(outdir, 3)
    zarr.open_group(w.store, mode="w", attributes={"title": "interop"})
    shape, chunks = (7, 10), (2, 3)
    for dtype in NUMERIC:
        itemsize = np.dtype(dtype).itemsize
        for cname, kwargs in codec_configs(itemsize).items():
            name = f"{dtype}/{cname}"
            kw = dict(kwargs)
            ch = kw.pop("chunks", chunks)
            a = zarr.create_array(
                w.store, name=name, shape=shape, chunks=ch, dtype=dtype,
                fill_value=fill_for(dtype), zarr_format=3, **kw,
            )
            data = make_data(dtype, shape, zlib.crc32(name.encode()))
            # Partial write: chunks in the last rows/columns are never written.
            a[0:5, 0:7] = data[0:5, 0:7]
            w.record(name, a)

    # Special cases
    a = zarr.create_array(w.store, name="special/scalar", shape=(), dtype="int32", fill_value=7)
    a[...] = 42
    w.record("special/scalar", a)
    a = zarr.create_array(w.store, name="special/scalar_unwritten", shape=(), dtype="float64", fill_value=np.nan)
    w.record("special/scalar_unwritten", a)
    a = zarr.create_array(w.store, name="special/empty", shape=(5, 5), chunks=(2, 2), dtype="float32", fill_value=-1.5)
    w.record("special/empty", a)
    a = zarr.create_array(w.store, name="special/zero_size", shape=(0, 5), chunks=(2, 2), dtype="int16")
    w.record("special/zero_size", a)
    a = zarr.create_array(
        w.store, name="special/transpose3d", shape=(5, 6, 7), chunks=(2, 3, 4), dtype="<i4",
        filters=[zc.TransposeCodec(order=[2, 0, 1])], compressors=None,
    )
    a[...] = np.arange(5 * 6 * 7, dtype="<i4").reshape(5, 6, 7)
    w.record("special/transpose3d", a)
    a = zarr.create_array(w.store, name="special/many_chunks", shape=(100, 100), chunks=(10, 10), dtype="float64")
    a[...] = np.arange(10000, dtype="float64").reshape(100, 100) / 7
    w.record("special/many_chunks", a)
    a = zarr.create_array(
        w.store, name="special/sharded_big", shape=(64, 64), shards=(32, 32), chunks=(8, 8), dtype="uint16",
        fill_value=0,
    )
    a[0:40, 0:50] = (np.arange(40 * 50) % 1000).astype("uint16").reshape(40, 50)
    w.record("special/sharded_big", a)
    a = zarr.create_array(
        w.store, name="special/dims", shape=(3, 4), chunks=(2, 2), dtype="int8",
        dimension_names=["y", "x"], attributes={"units": "m", "nested": {"a": [1, 2]}},
    )
    a[...] = np.arange(12, dtype="int8").reshape(3, 4)
    w.record("special/dims", a, dimension_names=["y", "x"], attributes={"units": "m", "nested": {"a": [1, 2]}})

    # Strings
    strings = np.array(["", "a", "héllo", "日本語", "x" * 40, "end"] * 4, dtype=object).reshape(4, 6)
    a = zarr.create_array(w.store, name="strings/vlen", shape=(5, 6), chunks=(2, 4), dtype=str)
    a[0:4, :] = strings
    w.record("strings/vlen", a)
    a = zarr.create_array(
        w.store, name="strings/vlen_gzip", shape=(5, 6), chunks=(2, 4), dtype=str,
        compressors=[zc.GzipCodec(level=1)], fill_value="missing",
    )
    a[0:3, 0:5] = strings[0:3, 0:5]
    w.record("strings/vlen_gzip", a)
    a = zarr.create_array(w.store, name="strings/utf32", shape=(5, 6), chunks=(2, 4), dtype="<U5")
    a[0:4, :] = np.array([s[:5] for s in strings.reshape(-1)], dtype="<U5").reshape(4, 6)
    w.record("strings/utf32", a)
    a = zarr.create_array(
        w.store, name="strings/utf32_be", shape=(3,), chunks=(2,), dtype="<U3",
        serializer=zc.BytesCodec(endian="big"), compressors=None, fill_value="zz",
    )
    a[0:2] = np.array(["ab", "çé"], dtype="<U3")
    w.record("strings/utf32_be", a)
    a = zarr.create_array(w.store, name="raw/v3", shape=(5,), chunks=(2,), dtype="V3")
    a[0:3] = np.array([b"abc", b"\x00\x01\x02", b"xyz"], dtype="V3")
    w.record("raw/v3", a)
    a = zarr.create_array(w.store, name="raw/s4", shape=(5,), chunks=(2,), dtype="S4")
    a[0:3] = np.array([b"ab", b"abcd", b""], dtype="S4")
    w.record("raw/s4", a)
    w.finish()


def write_v2(outdir):
    import numcodecs

    w = Writer(outdir, 2)
    root = zarr.open_group(w.store, mode="w", zarr_format=2, attributes={"title": "v2"})
    shape, chunks = (7, 10), (3, 4)
    configs = {
        "raw": dict(compressors=None),
        "zlib": dict(compressors=numcodecs.Zlib(level=1)),
        "gzip": dict(compressors=numcodecs.GZip(level=5)),
        "zstd": dict(compressors=numcodecs.Zstd(level=3)),
        "blosc_lz4": dict(compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)),
        "blosc_zstd_bit": dict(compressors=numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE)),
        "blosc_auto": dict(compressors=numcodecs.Blosc(cname="blosclz", shuffle=numcodecs.Blosc.AUTOSHUFFLE)),
        "shuffle_zlib": dict(filters=[numcodecs.Shuffle(elementsize=1)], compressors=numcodecs.Zlib(level=1)),
        "forder_zlib": dict(order="F", compressors=numcodecs.Zlib(level=1)),
        "forder_blosc_shuffle": dict(
            order="F", filters=[numcodecs.Shuffle(elementsize=1)],
            compressors=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
        ),
        "slash_sep": dict(chunk_key_encoding={"name": "v2", "separator": "/"}, compressors=numcodecs.Zlib(level=1)),
    }
    for dtype in ["|b1", "|i1", "<i2", ">i4", "<i8", "|u1", ">u2", "<u4", "<u8", "<f2", "<f4", ">f8", "<c8", ">c16"]:
        for cname, kwargs in configs.items():
            name = f"{dtype[1:]}{'_be' if dtype[0] == '>' else ''}/{cname}"
            fill = fill_for(dtype)
            if cname == "raw":
                fill = None if np.dtype(dtype).kind != "b" else False
            a = zarr.create_array(
                w.store, name=name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                zarr_format=2, **kwargs,
            )
            data = make_data(dtype, shape, zlib.crc32(name.encode()))
            a[0:5, 0:6] = data[0:5, 0:6]
            w.record(name, a)
    a = zarr.create_array(w.store, name="special/scalar", shape=(), dtype="<f8", fill_value=np.nan, zarr_format=2)
    a[...] = 2.5
    w.record("special/scalar", a)
    a = zarr.create_array(
        w.store, name="special/xarray", shape=(4, 3), chunks=(2, 2), dtype="<i4", zarr_format=2,
        attributes={"_ARRAY_DIMENSIONS": ["lat", "lon"], "units": "K"},
    )
    a[...] = np.arange(12, dtype="<i4").reshape(4, 3)
    w.record("special/xarray", a, dimension_names=["lat", "lon"], attributes={"units": "K"})
    strings = np.array(["", "a", "héllo", "日本語", "x" * 30, "end"], dtype=object)
    a = zarr.create_array(w.store, name="strings/vlen", shape=(8,), chunks=(3,), dtype=str, zarr_format=2)
    a[0:6] = strings
    w.record("strings/vlen", a)
    a = zarr.create_array(w.store, name="strings/utf32", shape=(8,), chunks=(3,), dtype="<U4", zarr_format=2)
    a[0:6] = np.array([s[:4] for s in strings], dtype="<U4")
    w.record("strings/utf32", a)
    a = zarr.create_array(w.store, name="strings/bytes", shape=(4,), chunks=(3,), dtype="|S3", zarr_format=2)
    a[0:3] = np.array([b"ab", b"abc", b""], dtype="S3")
    w.record("strings/bytes", a)
    w.finish()


def verify(outdir):
    with open(os.path.join(outdir, "manifest.json")) as f:
        manifest = json.load(f)
    store = zarr.storage.LocalStore(os.path.join(outdir, "store.zarr"), read_only=True)
    failures = []
    for entry in manifest:
        name = entry["path"]
        try:
            a = zarr.open_array(store, path=name, mode="r")
            if list(a.shape) != entry["shape"]:
                raise AssertionError(f"shape {a.shape} != {entry['shape']}")
            data = np.asarray(a[...])
            exp_path = os.path.join(outdir, entry["expected"])
            if entry["kind"] == "strings":
                with open(exp_path) as f:
                    expected = json.load(f)
                got = [str(x) for x in data.reshape(-1)]
                if got != expected:
                    raise AssertionError(f"strings differ: {got[:8]} vs {expected[:8]}")
            else:
                with open(exp_path, "rb") as f:
                    expected = f.read()
                got = np.ascontiguousarray(data.astype(le(a.dtype))).tobytes()
                if entry.get("dtype") and np.dtype(entry["dtype"]) != np.dtype(a.dtype).newbyteorder("="):
                    if le(entry["dtype"]) != le(a.dtype):
                        raise AssertionError(f"dtype {a.dtype} != {entry['dtype']}")
                if got != expected:
                    raise AssertionError(
                        f"values differ: got {data.reshape(-1)[:6]} expected "
                        f"{np.frombuffer(expected, dtype=le(a.dtype))[:6]}"
                    )
            if "attributes" in entry and dict(a.attrs) != entry["attributes"]:
                raise AssertionError(f"attributes {dict(a.attrs)} != {entry['attributes']}")
            if "dimension_names" in entry and list(a.metadata.dimension_names or []) != entry["dimension_names"]:
                raise AssertionError(f"dimension names {a.metadata.dimension_names}")
        except Exception as e:  # noqa: BLE001 - report every failure
            failures.append(f"{name}: {type(e).__name__}: {e}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(manifest) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    mode, outdir = sys.argv[1], sys.argv[2]
    if mode == "write-v3":
        write_v3(outdir)
    elif mode == "write-v2":
        write_v2(outdir)
    elif mode == "verify":
        sys.exit(verify(outdir))
    else:
        sys.exit(f"unknown mode {mode}")
