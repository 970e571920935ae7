"""floe: transactional, versioned Zarr v3 repositories in the Icechunk format.

The names mirror Icechunk's Python API, so that code written for Icechunk switches by
changing the import::

    import floe as icechunk

    repo = icechunk.Repository.create(icechunk.local_filesystem_storage("/data/repo"))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="t", shape=(10,), dtype="f4")
    session.commit("first")

Third-party code that imports ``icechunk`` by name gets floe after
``floe.install_as_icechunk()``.

Modules, one per concept as in icechunk-python: ``floe.repository`` (``Repository``,
``SpecVersion``), ``floe.session`` (``Session``), ``floe.store`` (``FloeStore``, alias
``IcechunkStore``), ``floe.storage``, ``floe.config``, ``floe.conflicts``,
``floe.snapshots``, ``floe.exceptions``, ``floe.xarray`` (``to_floe``, alias
``to_icechunk``).
"""

from __future__ import annotations

import sys

from floe.config import (
    CachingConfig,
    CompressionAlgorithm,
    CompressionConfig,
    ManifestConfig,
    ManifestPreloadCondition,
    ManifestPreloadConfig,
    ManifestSplitCondition,
    ManifestSplitDimCondition,
    ManifestSplittingConfig,
    ManifestVirtualChunkLocationCompressionConfig,
    ObjectStoreConfig,
    RepoUpdateRetryConfig,
    RepositoryConfig,
    http_store,
    local_filesystem_store,
    s3_store,
)
from floe.virtual import VirtualChunkContainer
from floe.conflicts import BasicConflictSolver, ConflictDetector, VersionSelection
from floe.diff import Diff
from floe.exceptions import (
    ConflictError,
    FloeError,
    IcechunkError,
    InvalidInputError,
    ReadOnlyError,
    SessionStateError,
)
from floe.repository import Repository, SpecVersion
from floe.session import Session
from floe.snapshots import SnapshotInfo
from floe.storage import Storage, in_memory_storage, local_filesystem_storage, s3_storage
from floe.store import FloeStore, IcechunkStore
from floe.virtual import VirtualChunkSpec

__all__ = [
    "BasicConflictSolver",
    "CachingConfig",
    "CompressionAlgorithm",
    "CompressionConfig",
    "ManifestConfig",
    "ManifestPreloadCondition",
    "ManifestPreloadConfig",
    "ManifestSplitCondition",
    "ManifestSplitDimCondition",
    "ManifestSplittingConfig",
    "ManifestVirtualChunkLocationCompressionConfig",
    "ObjectStoreConfig",
    "RepoUpdateRetryConfig",
    "VirtualChunkContainer",
    "VirtualChunkSpec",
    "http_store",
    "local_filesystem_store",
    "s3_store",
    "ConflictDetector",
    "ConflictError",
    "Diff",
    "FloeError",
    "FloeStore",
    "IcechunkError",
    "IcechunkStore",
    "InvalidInputError",
    "ReadOnlyError",
    "Repository",
    "RepositoryConfig",
    "Session",
    "SessionStateError",
    "SnapshotInfo",
    "SpecVersion",
    "Storage",
    "VersionSelection",
    "in_memory_storage",
    "install_as_icechunk",
    "local_filesystem_storage",
    "s3_storage",
    "spec_version",
]

#: The submodules of icechunk-python that floe provides, by the name ``icechunk.<name>``
#: they are registered under, and floe's module for each.
_ICECHUNK_MODULES = {
    "repository": "floe.repository",
    "session": "floe.session",
    "store": "floe.store",
    "storage": "floe.storage",
    "config": "floe.config",
    "conflicts": "floe.conflicts",
    "snapshots": "floe.snapshots",
    "xarray": "floe.xarray",
    "virtual": "floe.virtual",
    "_exceptions": "floe.exceptions",
    # floe's own modules too, so that `import icechunk.<name>` never loads a second
    # copy of one (with classes of its own) under the icechunk name.
    "exceptions": "floe.exceptions",
    "diff": "floe.diff",
    "_floe": "floe._floe",
}


def spec_version() -> SpecVersion:
    """The newest Icechunk spec version floe writes (Icechunk's
    ``icechunk.spec_version()``)."""
    return SpecVersion.current()


def install_as_icechunk() -> None:
    """Makes ``import icechunk`` give floe, for third-party code that imports Icechunk
    by name (PyMySQL's ``install_as_MySQLdb`` convention).

    Registers floe in ``sys.modules`` as ``icechunk`` and its modules as
    ``icechunk.repository``, ``icechunk.session``, ``icechunk.store``,
    ``icechunk.storage``, ``icechunk.config``, ``icechunk.conflicts``,
    ``icechunk.snapshots``, ``icechunk.xarray`` and ``icechunk._exceptions``. Call it
    before the code that imports ``icechunk`` runs: modules that imported the real
    Icechunk earlier keep it. Icechunk modules floe does not provide (``icechunk.dask``,
    ``icechunk.distributed``, ...) stay unimportable rather than half-working.
    """
    import importlib

    sys.modules["icechunk"] = sys.modules[__name__]
    for name, module in _ICECHUNK_MODULES.items():
        sys.modules[f"icechunk.{name}"] = importlib.import_module(module)
