"""floe: transactional, versioned Zarr v3 repositories in the Icechunk format.

Install with ``pip install zarr-floe`` (the import name is ``floe``). The names
mirror Icechunk 2.3.0's Python API::

    import zarr
    import floe

    repo = floe.Repository.create(floe.local_filesystem_storage("/tmp/repo"))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="t", shape=(10,), dtype="f4")
    session.commit("first")

To run code written for Icechunk unchanged (scripts, xarray's ``to_icechunk``,
VirtualiZarr, anything that imports ``icechunk`` by name), call
``floe.install_as_icechunk()`` once before that code imports ``icechunk``::

    import floe

    floe.install_as_icechunk()
    import icechunk  # floe, under Icechunk's module names

Modules, one per concept as in icechunk-python: ``floe.repository`` (``Repository``,
``SpecVersion``), ``floe.session`` (``Session``), ``floe.store`` (``FloeStore``, alias
``IcechunkStore``), ``floe.storage`` (backends and ``StorageSettings``),
``floe.credentials``, ``floe.config``, ``floe.conflicts``,
``floe.snapshots``, ``floe.exceptions``, ``floe.xarray`` (``to_floe``, alias
``to_icechunk``), ``floe.dask`` (``store_dask``), ``floe.distributed``
(``merge_sessions``). Every blocking method of ``Repository`` and ``Session`` that
Icechunk has as ``*_async`` has that awaitable twin too.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from floe import codec_pipeline
from floe._display import print_debug_info
from floe._floe import __version__ as __version__
from floe._floe import initialize_logs, set_logs_filter
from floe.config import (
    CachingConfig,
    ChunkPackingConfig,
    ChunkPackingMode,
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
    RepositoryConfig,
    RepoUpdateRetryConfig,
    gcs_store,
    http_store,
    local_filesystem_store,
    s3_store,
)
from floe.conflicts import BasicConflictSolver, ConflictDetector, VersionSelection
from floe.credentials import (
    AzureCredentials,
    AzureRefreshableCredential,
    AzureStaticCredentials,
    Credentials,
    GcsBearerCredential,
    GcsCredentials,
    GcsStaticCredentials,
    S3Credentials,
    S3StaticCredentials,
    azure_anonymous_credentials,
    azure_credentials,
    azure_from_env_credentials,
    azure_refreshable_credentials,
    azure_static_credentials,
    containers_credentials,
    gcs_anonymous_credentials,
    gcs_credentials,
    gcs_from_env_credentials,
    gcs_refreshable_credentials,
    gcs_static_credentials,
    s3_anonymous_credentials,
    s3_credentials,
    s3_from_env_credentials,
    s3_refreshable_credentials,
    s3_static_credentials,
)
from floe.diff import Diff
from floe.exceptions import (
    AlreadyExistsError,
    Conflict,
    ConflictError,
    ConflictType,
    ErrorKind,
    FloeError,
    FormatError,
    IcechunkError,
    InternalError,
    InvalidInputError,
    NodeNotFoundError,
    NotFoundError,
    ReadOnlyError,
    RebaseFailedError,
    RefNotFoundError,
    RepositoryNotFoundError,
    SessionStateError,
    SnapshotNotFoundError,
    StorageError,
)
from floe.ops import GCSummary, Update, UpdateType
from floe.repository import (
    FeatureFlag,
    RepoAvailability,
    Repository,
    RepoStatus,
    SpecVersion,
    clone_repository,
    supported_spec_versions,
    upgrade_icechunk_repository,
)
from floe.session import ChunkType, ForkSession, Session, SessionMode
from floe.snapshots import SnapshotInfo
from floe.stats import ChunkStorageStats
from floe.storage import (
    ChecksumAlgorithm,
    S3Options,
    Storage,
    StorageConcurrencySettings,
    StorageRetriesSettings,
    StorageSettings,
    StorageTimeoutSettings,
    azure_storage,
    gcs_storage,
    http_storage,
    in_memory_storage,
    local_filesystem_storage,
    r2_storage,
    redirect_storage,
    s3_object_store_storage,
    s3_storage,
    tigris_storage,
)
from floe.store import FloeStore, IcechunkStore
from floe.virtual import VirtualChunkContainer, VirtualChunkSpec

# floe's zarr codec pipeline for floe stores (zarr's own for every other store); off
# with FLOE_CODEC_PIPELINE=0 or floe.codec_pipeline.disable().
codec_pipeline._install_default()

__all__ = [
    "AlreadyExistsError",
    "azure_anonymous_credentials",
    "azure_credentials",
    "azure_from_env_credentials",
    "azure_refreshable_credentials",
    "azure_static_credentials",
    "azure_storage",
    "AzureCredentials",
    "AzureRefreshableCredential",
    "AzureStaticCredentials",
    "BasicConflictSolver",
    "CachingConfig",
    "ChunkPackingConfig",
    "ChunkPackingMode",
    "ChunkStorageStats",
    "ChunkType",
    "CompressionAlgorithm",
    "CompressionConfig",
    "Conflict",
    "ConflictDetector",
    "ConflictError",
    "ConflictType",
    "containers_credentials",
    "Credentials",
    "Diff",
    "ErrorKind",
    "FeatureFlag",
    "FloeError",
    "FloeStore",
    "ForkSession",
    "FormatError",
    "gcs_anonymous_credentials",
    "gcs_credentials",
    "gcs_from_env_credentials",
    "gcs_refreshable_credentials",
    "gcs_static_credentials",
    "gcs_storage",
    "gcs_store",
    "GcsBearerCredential",
    "GcsCredentials",
    "GcsStaticCredentials",
    "GCSummary",
    "http_storage",
    "http_store",
    "IcechunkError",
    "IcechunkStore",
    "in_memory_storage",
    "initialize_logs",
    "install_as_icechunk",
    "InternalError",
    "InvalidInputError",
    "local_filesystem_storage",
    "local_filesystem_store",
    "ManifestConfig",
    "ManifestPreloadCondition",
    "ManifestPreloadConfig",
    "ManifestSplitCondition",
    "ManifestSplitDimCondition",
    "ManifestSplittingConfig",
    "ManifestVirtualChunkLocationCompressionConfig",
    "NodeNotFoundError",
    "NotFoundError",
    "ObjectStoreConfig",
    "print_debug_info",
    "r2_storage",
    "ReadOnlyError",
    "RebaseFailedError",
    "RefNotFoundError",
    "RepoAvailability",
    "Repository",
    "RepositoryConfig",
    "RepositoryNotFoundError",
    "RepoStatus",
    "RepoUpdateRetryConfig",
    "redirect_storage",
    "s3_anonymous_credentials",
    "s3_credentials",
    "s3_from_env_credentials",
    "s3_refreshable_credentials",
    "s3_static_credentials",
    "s3_object_store_storage",
    "s3_storage",
    "s3_store",
    "S3Credentials",
    "S3Options",
    "ChecksumAlgorithm",
    "S3StaticCredentials",
    "Session",
    "SessionMode",
    "SessionStateError",
    "set_logs_filter",
    "SnapshotInfo",
    "SnapshotNotFoundError",
    "spec_version",
    "SpecVersion",
    "Storage",
    "StorageConcurrencySettings",
    "StorageError",
    "StorageRetriesSettings",
    "StorageSettings",
    "StorageTimeoutSettings",
    "supported_spec_versions",
    "tigris_storage",
    "Update",
    "UpdateType",
    "upgrade_icechunk_repository",
    "clone_repository",
    "VersionSelection",
    "VirtualChunkContainer",
    "VirtualChunkSpec",
]

#: The submodules of icechunk-python that floe provides, by the name ``icechunk.<name>``
#: they are registered under, and floe's module for each.
_ICECHUNK_MODULES = {
    "repository": "floe.repository",
    "session": "floe.session",
    "store": "floe.store",
    "storage": "floe.storage",
    "credentials": "floe.credentials",
    "config": "floe.config",
    "conflicts": "floe.conflicts",
    "snapshots": "floe.snapshots",
    "xarray": "floe.xarray",
    "virtual": "floe.virtual",
    "distributed": "floe.distributed",
    "_exceptions": "floe.exceptions",
    # floe's own modules too, so that `import icechunk.<name>` never loads a second
    # copy of one (with classes of its own) under the icechunk name.
    "exceptions": "floe.exceptions",
    "diff": "floe.diff",
    "ops": "floe.ops",
    "stats": "floe.stats",
    "_floe": "floe._floe",
    # Icechunk's native module: floe's native module and the classes floe writes in
    # Python that Icechunk's native module holds (configuration, exceptions, ...).
    "_icechunk_python": "floe._icechunk_python",
}


#: Icechunk modules that need an optional dependency (``floe.dask`` imports Dask, as
#: ``icechunk.dask`` does): registered when it is installed.
_OPTIONAL_ICECHUNK_MODULES = {"dask": "floe.dask"}
# Logs are off unless FLOE_LOG / ICECHUNK_LOG says otherwise (as `import icechunk`).
initialize_logs()


def spec_version() -> SpecVersion:
    """The newest Icechunk spec version floe writes (Icechunk's
    ``icechunk.spec_version()``).

    ```python
    print(floe.spec_version())  # SpecVersion.v2 (current)
    assert repo.spec_version == floe.spec_version()  # new repositories use it
    ```
    """
    return SpecVersion.current()


#: The Icechunk release whose Python API and behaviour floe follows: what
#: ``icechunk.__version__`` reports once ``install_as_icechunk()`` ran, so that code
#: that checks Icechunk's version (``Version(icechunk.__version__).major >= 2``) takes
#: the branch for the API floe offers. ``floe.__version__`` stays floe's own.
ICECHUNK_API_VERSION = "2.3.0"


class _IcechunkModule(types.ModuleType):
    """floe under the name ``icechunk`` (``install_as_icechunk``): every attribute is
    floe's (reads, writes and deletions go to the ``floe`` module, so patching
    ``icechunk.X`` patches floe), except ``__version__``, which is
    ``ICECHUNK_API_VERSION``. Submodules are found on floe's ``__path__``."""

    def __init__(self, floe_module: types.ModuleType) -> None:
        super().__init__("icechunk", floe_module.__doc__)
        object.__setattr__(self, "__floe_module__", floe_module)
        object.__setattr__(self, "__version__", ICECHUNK_API_VERSION)
        object.__setattr__(self, "__path__", floe_module.__path__)
        object.__setattr__(self, "__file__", floe_module.__file__)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "__floe_module__"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "__floe_module__"), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, "__floe_module__"), name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(object.__getattribute__(self, "__floe_module__"))) | {"__version__"})


def install_as_icechunk() -> None:
    """Makes ``import icechunk`` give floe, for third-party code that imports Icechunk
    by name (PyMySQL's ``install_as_MySQLdb`` convention).

    Registers floe in ``sys.modules`` as ``icechunk`` (every attribute floe's, except
    ``icechunk.__version__``: ``ICECHUNK_API_VERSION``, the Icechunk release whose API
    floe follows, so code that checks Icechunk's version takes the right branch) and
    its modules as
    ``icechunk.repository``, ``icechunk.session``, ``icechunk.store``,
    ``icechunk.storage``, ``icechunk.credentials``, ``icechunk.config``,
    ``icechunk.conflicts``, ``icechunk.virtual``, ``icechunk.snapshots``,
    ``icechunk.xarray``, ``icechunk.dask``,
    ``icechunk.distributed`` and ``icechunk._exceptions`` (``icechunk.dask`` when Dask is
    installed). Call it before the code that
    imports ``icechunk`` runs: modules that imported the real Icechunk earlier keep
    it. Icechunk modules floe does not provide stay unimportable rather than
    half-working. This is the one supported way to run Icechunk code on floe
    (``import floe as icechunk`` would leave ``icechunk.xarray`` and the other
    submodules unimportable, or pick up a real Icechunk if one is installed).

    ```python
    import floe

    floe.install_as_icechunk()

    import icechunk
    from icechunk.xarray import to_icechunk

    repo = icechunk.Repository.create(icechunk.in_memory_storage())
    assert isinstance(repo, floe.Repository)
    assert icechunk.__version__ == floe.ICECHUNK_API_VERSION  # "2.3.0"
    ```

    Calling it again changes nothing.
    """
    import importlib

    if not isinstance(sys.modules.get("icechunk"), _IcechunkModule):
        sys.modules["icechunk"] = _IcechunkModule(sys.modules[__name__])
    for name, module in _ICECHUNK_MODULES.items():
        sys.modules[f"icechunk.{name}"] = importlib.import_module(module)
    for name, module in _OPTIONAL_ICECHUNK_MODULES.items():
        try:
            sys.modules[f"icechunk.{name}"] = importlib.import_module(module)
        except ImportError:
            pass  # `import icechunk.dask` fails as it does without Dask
