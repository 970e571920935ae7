"""What the virtual-dataset tests share (``test_virtual_refs.py``,
``test_virtualizarr_s3.py``): optional dependencies that must be there in CI, and the
NetCDF4 files VirtualiZarr reads."""

from __future__ import annotations

import os

import numpy as np
import pytest


def need(module: str):
    """Imports ``module``; a missing one fails the test under ``CI=true`` and skips it
    elsewhere."""
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed")
        pytest.skip(f"{module} is not installed")


def netcdf_time_file(path, t0: int) -> None:
    """A NetCDF4 file of 3 time steps from day ``t0``: a coordinate, a zlib-compressed
    variable with a fill value (one value missing), an uncompressed one, and a scalar."""
    netCDF4 = need("netCDF4")
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", 3)
        ds.createDimension("x", 4)
        t = ds.createVariable("time", "f8", ("time",))
        t[:] = np.arange(t0, t0 + 3)
        t.units = "days since 2000-01-01"
        ds.createVariable("x", "i4", ("x",))[:] = np.arange(4)
        temp = ds.createVariable("temp", "f4", ("time", "x"), zlib=True, fill_value=-999.0)
        values = np.arange(12, dtype="f4").reshape(3, 4) + t0
        values[1, 2] = -999.0  # a missing value
        temp[:] = values
        ds.createVariable("raw", "i2", ("time", "x"))[:] = np.arange(12).reshape(3, 4) + t0
        ds.createVariable("scalar", "f8").assignValue(3.5)


def write_virtual_files(repo, datasets, append_dim: str = "time") -> None:
    """Writes VirtualiZarr datasets into ``repo``'s main branch as VirtualiZarr's users
    do: the first with ``to_icechunk``, each later one appended along ``append_dim``,
    one commit per dataset.

    VirtualiZarr 2.8.0 with zarr-python 3.4.2 (the Python 3.12 stack; 2.5.1 with zarr
    3.1 appends) refuses to append to a dataset holding a scalar variable: it compares
    the scalar's stored ``dimension_names`` (``None``) with the requested ``()`` and
    raises ``ValueError: Array 'scalar' already exists with different
    dimension_names``. Icechunk 2.3.0 refuses the same way on the same stack (checked
    by hand at stop 42). Only that refusal is accepted: the session is thrown away and
    the dataset appended without its ``scalar`` variable (the first dataset's stays).
    """
    for i, vds in enumerate(datasets):
        s = repo.writable_session("main")
        if i == 0:
            vds.vz.to_icechunk(s.store)
        else:
            try:
                vds.vz.to_icechunk(s.store, append_dim=append_dim)
            except ValueError as e:
                if "'scalar' already exists with different dimension_names" not in str(e):
                    raise
                s = repo.writable_session("main")
                vds.drop_vars("scalar").vz.to_icechunk(s.store, append_dim=append_dim)
        s.commit(f"file {i}")
