"""Icechunk's names in floe: SpecVersion, IcechunkStore / IcechunkError aliases,
to_icechunk, and install_as_icechunk() so code importing `icechunk` gets floe."""

import subprocess
import sys

import numpy as np
import pytest
import zarr

import floe


def test_spec_version_compares_as_icechunks():
    S = floe.SpecVersion
    assert [int(v) for v in S] == [1, 2]
    assert S.v1 == 1 and S.v2 == 2 and S.v1 < S.v2 and S.v1 < 2
    assert S.current() is S.v2 and floe.spec_version() is S.v2
    assert repr(S.v1) == "SpecVersion.v1" and repr(S.v2) == "SpecVersion.v2 (current)"
    assert {S.v1: "one"}[1] == "one"


@pytest.mark.parametrize("spec", [floe.SpecVersion.v1, floe.SpecVersion.v2, 1, 2])
def test_repositories_report_and_accept_spec_versions(spec):
    repo = floe.Repository.create(floe.in_memory_storage(), spec_version=spec)
    assert isinstance(repo.spec_version, floe.SpecVersion)
    assert repo.spec_version == spec


def test_icechunk_aliases():
    assert floe.IcechunkStore is floe.FloeStore
    assert floe.IcechunkError is floe.FloeError
    from floe.store import IcechunkStore
    from floe.xarray import to_floe, to_icechunk

    assert IcechunkStore is floe.FloeStore and to_icechunk is to_floe
    repo = floe.Repository.create(floe.in_memory_storage())
    assert isinstance(repo.writable_session("main").store, floe.IcechunkStore)
    for error in (floe.ConflictError, floe.ReadOnlyError, floe.InvalidInputError,
                  floe.SessionStateError):
        assert issubclass(error, floe.IcechunkError)
    assert issubclass(floe.InvalidInputError, ValueError)


_THIRD_PARTY = """
import floe
floe.install_as_icechunk()

# What a library written for Icechunk does:
import icechunk
import icechunk.repository, icechunk.session, icechunk.store, icechunk.storage
import icechunk.config, icechunk.xarray, icechunk.conflicts, icechunk.snapshots
from icechunk import IcechunkStore, Repository, SpecVersion, in_memory_storage
from icechunk.store import IcechunkStore as StoreFromModule
from icechunk.xarray import to_icechunk
import zarr

assert icechunk.Repository is floe.Repository and StoreFromModule is floe.FloeStore
# Code that checks Icechunk's version takes the branch for the API floe offers;
# floe's own version is unchanged.
assert icechunk.__version__ == floe.ICECHUNK_API_VERSION == "2.3.0"
assert floe.__version__ != icechunk.__version__
from packaging.version import Version
assert Version(icechunk.__version__).major >= 2
# Everything else is floe's: patching icechunk.X patches floe.X.
icechunk.some_patch = 1
assert floe.some_patch == 1
del icechunk.some_patch
assert not hasattr(floe, "some_patch")
assert "Repository" in dir(icechunk) and "__version__" in dir(icechunk)
# Reprs name the package users imported, and evaluate back under it.
assert repr(icechunk.CachingConfig()).startswith("icechunk.config.CachingConfig(")
assert eval(repr(icechunk.CachingConfig()), {"icechunk": icechunk}) == icechunk.CachingConfig()
assert icechunk.repository is floe.repository and icechunk.session is floe.session
assert icechunk.store is floe.store and icechunk.storage is floe.storage
assert icechunk.config is floe.config and icechunk.xarray is floe.xarray
assert to_icechunk is floe.xarray.to_floe
repo = Repository.create(in_memory_storage(), spec_version=SpecVersion.v2)
s = repo.writable_session("main")
zarr.create_array(s.store, name="a", shape=(3,), dtype="i2", fill_value=0)[...] = [1, 2, 3]
assert isinstance(s.store, IcechunkStore)
s.commit("via icechunk names")
# Modules floe does not offer fail to import, rather than half-working.
try:
    import icechunk.types
except ImportError:
    pass
else:
    raise AssertionError("icechunk.types imported")
import icechunk.virtual, icechunk.credentials
assert icechunk.virtual is floe.virtual and icechunk.credentials is floe.credentials
import icechunk.dask, icechunk.distributed
assert icechunk.dask is floe.dask and icechunk.distributed is floe.distributed
# No second copy of a floe module under the icechunk name.
import icechunk.diff, icechunk._floe
assert icechunk.diff is floe.diff and icechunk._floe is floe._floe
# Icechunk's native module name offers floe's native classes and the ones floe
# writes in Python, each the one class floe uses.
from icechunk._icechunk_python import RepoUpdateRetryConfig, SnapshotInfo, _all_error_kinds
assert RepoUpdateRetryConfig is floe.config.RepoUpdateRetryConfig
assert SnapshotInfo is floe._floe.SnapshotInfo and "ref-not-found" in _all_error_kinds()
print("ok")
"""


def test_install_as_icechunk_makes_import_icechunk_give_floe():
    # A fresh interpreter: sys.modules of this one stays as it is.
    out = subprocess.run([sys.executable, "-c", _THIRD_PARTY], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_to_icechunk_writes_a_dataset():
    xr = pytest.importorskip("xarray")
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    ds = xr.Dataset({"v": (("x",), np.arange(4.0))})
    floe.xarray.to_icechunk(ds, s)
    s.commit("dataset")
    got = zarr.open_array(repo.readonly_session("main").store, path="v", mode="r")[...]
    np.testing.assert_array_equal(got, np.arange(4.0))
