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

from floe.config import CompressionConfig, RepositoryConfig
from floe.conflicts import BasicConflictSolver, ConflictDetector, VersionSelection
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
    RepoStatus,
    Repository,
    SpecVersion,
    supported_spec_versions,
    upgrade_icechunk_repository,
)
from floe.session import ChunkType, Session, SessionMode
from floe.stats import ChunkStorageStats
from floe._display import print_debug_info
from floe._floe import initialize_logs, set_logs_filter
from floe.snapshots import SnapshotInfo
from floe.storage import Storage, in_memory_storage, local_filesystem_storage, s3_storage
from floe.store import FloeStore, IcechunkStore

__all__ = [
    "AlreadyExistsError",
    "ChunkStorageStats",
    "ChunkType",
    "Conflict",
    "ConflictType",
    "ErrorKind",
    "FeatureFlag",
    "FormatError",
    "InternalError",
    "NodeNotFoundError",
    "NotFoundError",
    "RebaseFailedError",
    "RepoAvailability",
    "RepoStatus",
    "RefNotFoundError",
    "RepositoryNotFoundError",
    "SessionMode",
    "SnapshotNotFoundError",
    "StorageError",
    "GCSummary",
    "Update",
    "UpdateType",
    "initialize_logs",
    "print_debug_info",
    "set_logs_filter",
    "supported_spec_versions",
    "upgrade_icechunk_repository",
    "BasicConflictSolver",
    "CompressionConfig",
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
    "_exceptions": "floe.exceptions",
    # floe's own modules too, so that `import icechunk.<name>` never loads a second
    # copy of one (with classes of its own) under the icechunk name.
    "exceptions": "floe.exceptions",
    "diff": "floe.diff",
    "ops": "floe.ops",
    "stats": "floe.stats",
    "_floe": "floe._floe",
    # Icechunk's native module: its exception classes and `_all_error_kinds`.
    "_icechunk_python": "floe._floe",
}


# Logs are off unless FLOE_LOG / ICECHUNK_LOG says otherwise (as `import icechunk`).
initialize_logs()


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
