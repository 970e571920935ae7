"""VirtualiZarr end to end on the S3 test server (floe issue 31): NetCDF4 files the
test writes are uploaded to the S3 test server (ministack; ``AWS_ENDPOINT_URL``,
``FLOE_TEST_S3_BUCKET``, as ``.ci/s3_server.sh`` sets them), VirtualiZarr (PyPI)
parses them there and writes their refs into floe with ``vds.vz.to_icechunk`` (then
``append_dim="time"``), and xarray reads every variable back through floe's S3
virtual reads, equal to netCDF4's values of the local copies."""

from __future__ import annotations

import os
import urllib.request
import uuid

import numpy as np
import pytest

import floe
from virtual_datasets import need, netcdf_time_file, write_virtual_files


def _s3_server() -> tuple[str, str]:
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    bucket = os.environ.get("FLOE_TEST_S3_BUCKET")
    if not endpoint or not bucket:
        if os.environ.get("CI") == "true":
            pytest.fail("the S3 test server (AWS_ENDPOINT_URL, FLOE_TEST_S3_BUCKET) is not set up")
        pytest.skip("no S3 test server (run under .ci/s3_server.sh)")
    return endpoint.rstrip("/"), bucket


def test_virtualizarr_on_s3_to_floe_and_back(tmp_path, as_icechunk):
    endpoint, bucket = _s3_server()
    need("virtualizarr")
    need("h5py")
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import S3Store
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    run = f"virtualizarr/{uuid.uuid4()}"
    files = [tmp_path / f"f{i}.nc" for i in range(2)]
    for i, f in enumerate(files):
        netcdf_time_file(f, 3 * i)
        req = urllib.request.Request(
            f"{endpoint}/{bucket}/{run}/{f.name}", data=f.read_bytes(), method="PUT"
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status in (200, 201)
    region = os.environ.get("AWS_REGION", "us-east-1")
    s3 = S3Store(
        bucket,
        endpoint=endpoint,
        region=region,
        access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    registry = ObjectStoreRegistry({f"s3://{bucket}": s3})
    prefix = f"s3://{bucket}/{run}/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(
            prefix,
            floe.s3_store(
                region=region, endpoint_url=endpoint, allow_http=True, s3_compatible=True,
                force_path_style=True,
            ),
        )
    )
    credentials = floe.containers_credentials({prefix: floe.s3_from_env_credentials()})
    storage = floe.local_filesystem_storage(str(tmp_path / "repo"))
    repo = floe.Repository.create(storage, config, authorize_virtual_chunk_access=credentials)
    write_virtual_files(repo, [
        open_virtual_dataset(f"{prefix}{f.name}", registry=registry, parser=HDFParser())
        for f in files
    ])
    # A new reader, with its own config (the endpoint it trusts) and credentials.
    reader = floe.Repository.open(storage, config, authorize_virtual_chunk_access=credentials)
    assert set(reader.readonly_session("main").all_virtual_chunk_locations()) == {
        f"{prefix}{f.name}" for f in files
    }
    got = xr.open_zarr(reader.readonly_session("main").store, consolidated=False, zarr_format=3)
    parts = [xr.open_dataset(f, engine="netcdf4") for f in files]
    want = xr.concat(parts, dim="time", data_vars="minimal")
    for name in ("time", "x", "temp", "raw", "scalar"):
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)
    assert np.isnan(got["temp"].values[1, 2])
    for p in parts:
        p.close()
    # Without the reader's credentials nothing under the prefix is read.
    stranger = floe.Repository.open(storage, config)
    with pytest.raises(floe.InvalidInputError, match="not authorized"):
        xr.open_zarr(stranger.readonly_session("main").store, consolidated=False,
                     zarr_format=3)["raw"].values
