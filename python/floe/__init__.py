"""floe: transactional, versioned Zarr v3 repositories in the Icechunk format.

The names mirror Icechunk's Python API, so that code written for Icechunk switches by
changing the import::

    import floe as ic

    repo = ic.Repository.create(ic.local_filesystem_storage("/data/repo"))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="t", shape=(10,), dtype="f4")
    session.commit("first")
"""

from floe._floe import (
    BasicConflictSolver,
    CompressionConfig,
    ConflictDetector,
    ConflictError,
    FloeError,
    Repository as _NativeRepository,
    RepositoryConfig,
    Session as _NativeSession,
    SnapshotInfo,
    Storage,
    in_memory_storage,
    local_filesystem_storage,
    s3_storage,
    VersionSelection,
)
from floe.diff import Diff
from floe.store import FloeStore

__all__ = [
    "BasicConflictSolver",
    "CompressionConfig",
    "ConflictDetector",
    "ConflictError",
    "Diff",
    "FloeError",
    "FloeStore",
    "Repository",
    "RepositoryConfig",
    "Session",
    "SnapshotInfo",
    "Storage",
    "in_memory_storage",
    "local_filesystem_storage",
    "s3_storage",
    "VersionSelection",
]


class Session:
    """A session on a repository: read-only, writable on a branch, a fork, or a
    rearrange session (spec 2, moves only). ``store`` is its zarr-python store."""

    def __init__(self, native: _NativeSession):
        self._native = native

    @property
    def store(self) -> FloeStore:
        return FloeStore(self._native._native_store(), session=self)

    @property
    def snapshot_id(self) -> str:
        return self._native.snapshot_id

    @property
    def branch(self) -> str | None:
        return self._native.branch

    @property
    def read_only(self) -> bool:
        return self._native.read_only

    @property
    def has_uncommitted_changes(self) -> bool:
        return self._native.has_uncommitted_changes

    def status(self) -> Diff:
        """The uncommitted changes of this session."""
        return Diff(self._native.status())

    def discard_changes(self) -> None:
        self._native.discard_changes()

    def commit(self, message: str, metadata: dict | None = None, *, allow_empty: bool = False,
               rebase_with=None, rebase_tries: int = 100) -> str:
        """Commits and returns the new snapshot id; when the branch moved, rebases
        with ``rebase_with`` (a ConflictDetector or BasicConflictSolver; default:
        detect and fail) and raises ConflictError for conflicts it leaves."""
        return self._native.commit(message, metadata, allow_empty=allow_empty,
                                   rebase_with=rebase_with, rebase_tries=rebase_tries)

    def amend(self, message: str, metadata: dict | None = None) -> str:
        return self._native.amend(message, metadata)

    def rebase(self, solver=None) -> None:
        self._native.rebase(solver)

    def fork(self) -> "Session":
        return Session(self._native.fork())

    def merge(self, *forks: "Session") -> None:
        self._native.merge(*[f._native for f in forks])

    def move(self, from_path: str, to_path: str) -> None:
        """Rearrange sessions (spec 2): moves a node and everything under it."""
        self._native.move(from_path, to_path)

    def __reduce__(self):
        # Read-only sessions and forks pickle (storage URL and snapshot id, or the
        # fork's changes; no credentials); a writable session refuses: fork it.
        return (Session, (self._native,))


class Repository:
    """A floe repository (Icechunk format, spec 1 or 2)."""

    def __init__(self, native: _NativeRepository):
        self._native = native

    @classmethod
    def create(cls, storage: Storage, config: RepositoryConfig | None = None, *,
               spec_version: int | None = None) -> "Repository":
        return cls(_NativeRepository.create(storage, config, spec_version))

    @property
    def config(self) -> RepositoryConfig:
        return self._native.config

    def save_config(self, config: RepositoryConfig | None = None) -> None:
        self._native.save_config(config)

    @classmethod
    def open(cls, storage: Storage) -> "Repository":
        return cls(_NativeRepository.open(storage))

    @classmethod
    def open_or_create(cls, storage: Storage) -> "Repository":
        return cls(_NativeRepository.open_or_create(storage))

    @staticmethod
    def exists(storage: Storage) -> bool:
        return _NativeRepository.exists(storage)

    @property
    def spec_version(self) -> int:
        return self._native.spec_version

    def writable_session(self, branch: str) -> Session:
        return Session(self._native.writable_session(branch))

    def readonly_session(self, branch=None, *, tag=None, snapshot_id=None, as_of=None) -> Session:
        return Session(
            self._native.readonly_session(branch, tag=tag, snapshot_id=snapshot_id, as_of=as_of)
        )

    def rearrange_session(self, branch: str) -> Session:
        return Session(self._native.rearrange_session(branch))

    def ancestry(self, *, branch=None, tag=None, snapshot_id=None):
        return iter(self._native.ancestry(branch=branch, tag=tag, snapshot_id=snapshot_id))

    def diff(self, *, from_branch=None, from_tag=None, from_snapshot_id=None,
             to_branch=None, to_tag=None, to_snapshot_id=None) -> Diff:
        """What changed from one version to a later one; each is named by exactly one
        of a branch, a tag or a snapshot id. ``from`` must be an ancestor of ``to``."""
        start = self._version("from", from_branch, from_tag, from_snapshot_id)
        end = self._version("to", to_branch, to_tag, to_snapshot_id)
        return Diff(self._native.diff(from_snapshot_id=start, to_snapshot_id=end))

    def _version(self, side: str, branch, tag, snapshot_id) -> str:
        given = [v for v in (branch, tag, snapshot_id) if v is not None]
        if len(given) != 1:
            raise ValueError(f"name the `{side}` version by exactly one of branch, tag, snapshot_id")
        if branch is not None:
            return self._native.lookup_branch(branch)
        if tag is not None:
            return self._native.lookup_tag(tag)
        return snapshot_id

    def __getattr__(self, name):
        # Branches, tags, diff, metadata, expiry and GC: the native methods as they are.
        return getattr(self._native, name)
