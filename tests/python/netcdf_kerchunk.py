"""Writes a NetCDF4 file with netCDF4-python, makes kerchunk references to it, and
dumps the raw values netCDF4-python reads (auto mask/scale off).

usage: netcdf_kerchunk.py OUT_DIR [URL_PREFIX]

Writes OUT_DIR/data/sample.nc, OUT_DIR/refs.json (kerchunk version 1; chunk URLs use
URL_PREFIX + "sample.nc" when given, else the file's absolute path) and
OUT_DIR/expected.json: {variable path: {"dtype", "shape", "raw_b64"}} where raw_b64 is
the C-order little-endian bytes of the values.
"""
import base64
import json
import os
import sys

import numpy as np
import netCDF4
from kerchunk.hdf import SingleHdf5ToZarr

out = sys.argv[1]
prefix = sys.argv[2] if len(sys.argv) > 2 else None
data_dir = os.path.join(out, "data")
os.makedirs(data_dir, exist_ok=True)
path = os.path.join(data_dir, "sample.nc")

with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
    ds.title = "floe kerchunk test"
    ds.history = "created by netcdf_kerchunk.py"
    ds.createDimension("time", 6)
    ds.createDimension("lat", 10)
    ds.createDimension("lon", 12)
    t = ds.createVariable("time", "f8", ("time",))
    t[:] = np.arange(6, dtype="f8") * 86400.0
    t.units = "seconds since 2000-01-01"
    lat = ds.createVariable("lat", "f4", ("lat",))
    lat[:] = np.linspace(-45, 45, 10, dtype="f4")
    lon = ds.createVariable("lon", "f4", ("lon",))
    lon[:] = np.linspace(0, 330, 12, dtype="f4")
    temp = ds.createVariable(
        "temperature", "f4", ("time", "lat", "lon"),
        zlib=True, shuffle=True, complevel=4, chunksizes=(2, 5, 4),
    )
    rng = np.random.default_rng(42)
    temp[:] = (rng.standard_normal((6, 10, 12)) * 10 + 280).astype("f4")
    temp.units = "K"
    temp.long_name = "air temperature"
    counts = ds.createVariable(
        "counts", "i2", ("time", "lat"), fill_value=np.int16(-999), chunksizes=(3, 5),
    )
    counts.scale_factor = 0.5
    counts.add_offset = 1.0
    raw = (np.arange(60, dtype="i2").reshape(6, 10) * 3 - 20)
    counts.set_auto_maskandscale(False)
    counts[:] = raw
    counts[0, 0] = -999  # a fill value stored in the data
    scalar = ds.createVariable("scalar", "i4", ())
    scalar[...] = 42
    scalar.note = "a 0-d variable"
    sub = ds.createGroup("forecast")
    sub.source = "model"
    sub.createDimension("step", 4)
    steps = sub.createVariable("step", "i8", ("step",))
    steps[:] = np.array([0, 6, 12, 18], dtype="i8")
    wind = sub.createVariable("wind", "f8", ("step",), zlib=True, chunksizes=(2,))
    wind[:] = np.array([1.5, 2.25, -3.0, 4.125])

refs = SingleHdf5ToZarr(path, inline_threshold=64).translate()
if prefix is not None:
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and value[0] in (path, "file://" + path):
            value[0] = prefix + "sample.nc"
with open(os.path.join(out, "refs.json"), "w") as f:
    json.dump(refs, f)

expected = {}
with netCDF4.Dataset(path) as ds:
    ds.set_auto_maskandscale(False)

    def dump(group, prefix):
        for name, var in group.variables.items():
            values = np.asarray(var[...])
            expected[prefix + name] = {
                "dtype": values.dtype.str,
                "shape": list(values.shape),
                "raw_b64": base64.b64encode(
                    np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()
                ).decode(),
            }
        for gname, g in group.groups.items():
            dump(g, prefix + gname + "/")

    dump(ds, "")
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f)
print(json.dumps({"variables": sorted(expected), "refs": len(refs["refs"])}))
