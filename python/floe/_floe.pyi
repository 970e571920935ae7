"""Type stub of floe's native module ``floe._floe`` (Rust, pyo3). The ``floe`` package
wraps it; use the ``floe`` names, not these."""

import datetime
from collections.abc import Awaitable, Iterator
from typing import Any, Final

class FloeError(Exception):
    """A floe operation failed (Icechunk's ``IcechunkError``)."""

class ConflictError(FloeError):
    """A commit, rebase or merge conflicts with changes made meanwhile."""

class ReadOnlyError(FloeError):
    """A write through a read-only session or store (also once a session committed)."""

class InvalidInputError(FloeError, ValueError):
    """An invalid argument or key."""

class SessionStateError(FloeError):
    """An operation the session's state forbids."""

def _merge_configs(base: Any, other: Any) -> Any:
    """``other`` over ``base`` (two ``floe.config.RepositoryConfig``), merged by the
    engine with Icechunk's rules."""

class Storage:
    """Where a repository lives; pickles as its URL (no credentials)."""

    @property
    def url(self) -> str: ...

def local_filesystem_storage(path: str) -> Storage: ...
def in_memory_storage() -> Storage: ...
def s3_storage(
    *,
    bucket: str,
    prefix: str | None = None,
    region: str | None = None,
    endpoint_url: str | None = None,
    allow_http: bool = False,
    from_env: bool = True,
) -> Storage: ...
def storage_from_url(url: str) -> Storage: ...

class SnapshotInfo:
    """One commit of a history."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def written_at(self) -> datetime.datetime: ...
    @property
    def message(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...

class Ancestry(Iterator[SnapshotInfo]):
    """The commits of a history, newest first, read as iteration reaches them."""

    def __iter__(self) -> Ancestry: ...
    def __next__(self) -> SnapshotInfo: ...

class VersionSelection:
    """Which side wins a chunk both sides wrote."""

    Fail: Final[VersionSelection]
    UseOurs: Final[VersionSelection]
    UseTheirs: Final[VersionSelection]

class ConflictDetector:
    """Fails on any conflict."""

    def __init__(self) -> None: ...

class BasicConflictSolver:
    """Resolves chunk double-writes and deletes of updated nodes."""

    def __init__(
        self,
        *,
        on_chunk_conflict: VersionSelection = ...,
        fail_on_delete_of_updated_array: bool = False,
        fail_on_delete_of_updated_group: bool = False,
    ) -> None: ...

class Repository:
    """The native repository (``floe.Repository`` wraps it)."""

    @staticmethod
    def create(
        storage: Storage,
        config: Any = None,
        spec_version: int | None = None,
        authorize_virtual_chunk_access: list[str] | None = None,
    ) -> Repository: ...
    @staticmethod
    def exists(storage: Storage) -> bool: ...
    @property
    def config(self) -> Any: ...
    def save_config(self, config: Any = None) -> None: ...
    @staticmethod
    def open(
        storage: Storage, config: Any = None, authorize_virtual_chunk_access: list[str] | None = None
    ) -> Repository: ...
    @staticmethod
    def open_or_create(
        storage: Storage,
        config: Any = None,
        spec_version: int | None = None,
        authorize_virtual_chunk_access: list[str] | None = None,
    ) -> Repository: ...
    @staticmethod
    def fetch_config(storage: Storage) -> Any: ...
    def reopen(self, config: Any = None) -> Repository: ...
    @property
    def spec_version(self) -> int: ...
    def list_branches(self) -> list[str]: ...
    def lookup_branch(self, branch: str) -> str: ...
    def create_branch(self, branch: str, snapshot_id: str) -> None: ...
    def delete_branch(self, branch: str) -> None: ...
    def reset_branch(
        self, branch: str, snapshot_id: str, *, from_snapshot_id: str | None = None
    ) -> None: ...
    def list_tags(self) -> list[str]: ...
    def lookup_tag(self, tag: str) -> str: ...
    def create_tag(self, tag: str, snapshot_id: str) -> None: ...
    def delete_tag(self, tag: str) -> None: ...
    def ancestry(
        self, *, branch: str | None = None, tag: str | None = None, snapshot_id: str | None = None
    ) -> Ancestry: ...
    def writable_session(self, branch: str) -> Session: ...
    def readonly_session(
        self,
        branch: str | None = None,
        *,
        tag: str | None = None,
        snapshot_id: str | None = None,
        as_of: datetime.datetime | None = None,
    ) -> Session: ...
    def rearrange_session(self, branch: str) -> Session: ...
    def diff(self, *, from_snapshot_id: str, to_snapshot_id: str) -> dict[str, Any]: ...
    def get_metadata(self) -> dict[str, Any]: ...
    def set_metadata(self, metadata: dict[str, Any]) -> None: ...
    def update_metadata(self, metadata: dict[str, Any]) -> dict[str, Any]: ...
    def expire_snapshots(
        self,
        older_than: datetime.datetime,
        *,
        delete_expired_branches: bool = False,
        delete_expired_tags: bool = False,
    ) -> list[str]: ...
    def garbage_collect(
        self,
        delete_object_older_than: datetime.datetime,
        *,
        dry_run: bool = False,
        allow_recent_cutoff: bool = False,
    ) -> dict[str, Any]: ...

class Session:
    """The native session (``floe.Session`` wraps it)."""

    @property
    def config(self) -> Any: ...
    @property
    def snapshot_id(self) -> str: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def has_uncommitted_changes(self) -> bool: ...
    def discard_changes(self) -> None: ...
    def status(self) -> dict[str, Any]: ...
    def commit(
        self,
        message: str,
        metadata: dict[str, Any] | None = None,
        *,
        allow_empty: bool = False,
        rebase_with: ConflictDetector | BasicConflictSolver | None = None,
        rebase_tries: int = 100,
    ) -> str: ...
    def amend(self, message: str, metadata: dict[str, Any] | None = None) -> str: ...
    def rebase(self, solver: ConflictDetector | BasicConflictSolver | None = None) -> None: ...
    def fork(self) -> Session: ...
    def merge(self, *forks: Session) -> None: ...
    def move(self, from_path: str, to_path: str) -> None: ...
    def _native_store(self) -> NativeStore: ...

def _open_readonly(url: str, snapshot_id: str) -> Session: ...
def _open_fork(url: str, fork: bytes) -> Session: ...

class NativeStore:
    """The Zarr store view of a session; ``floe.FloeStore`` wraps it. Byte ranges are
    ``(kind, a, b)``: 0 whole, 1 ``a..b``, 2 from ``a``, 3 the last ``a`` bytes."""

    @property
    def writable(self) -> bool: ...
    def get(self, key: str, kind: int, a: int, b: int) -> Awaitable[bytes | None]: ...
    def exists(self, key: str) -> Awaitable[bool]: ...
    def getsize(self, key: str) -> Awaitable[int | None]: ...
    def getsize_prefix(self, prefix: str) -> Awaitable[int]: ...
    def set(self, key: str, value: bytes) -> Awaitable[None]: ...
    def delete(self, key: str) -> Awaitable[None]: ...
    def delete_prefix(self, prefix: str) -> Awaitable[None]: ...
    def list_prefix(self, prefix: str) -> Awaitable[list[str]]: ...
    def list_dir(self, prefix: str) -> Awaitable[tuple[list[str], list[str]]]: ...

# Virtual chunk refs (python/src/virtual_chunks.rs).

class VirtualChunkSpec:
    index: list[int]
    location: str
    offset: int
    length: int
    etag_checksum: str | None
    last_updated_at_checksum: datetime.datetime | None
    def __new__(
        cls,
        index: list[int],
        location: str,
        offset: int,
        length: int,
        etag_checksum: str | None = None,
        last_updated_at_checksum: datetime.datetime | None = None,
    ) -> VirtualChunkSpec: ...

def _set_virtual_ref(
    session: Session,
    key: str,
    location: str,
    offset: int,
    length: int,
    checksum: str | datetime.datetime | None = None,
    validate_container: bool = True,
) -> None: ...
def _set_virtual_refs(
    session: Session, array_path: str, chunks: list[VirtualChunkSpec], validate_containers: bool = True
) -> list[list[int]] | None: ...
def _set_virtual_refs_arr(
    session: Session,
    array_path: str,
    chunk_grid_shape: list[int],
    locations: list[str],
    offsets: bytes,
    lengths: bytes,
    validate_containers: bool = True,
    arr_offset: list[int] | None = None,
    checksum: str | datetime.datetime | None = None,
) -> list[list[int]] | None: ...
def _all_virtual_chunk_locations(session: Session) -> list[str]: ...
def _virtual_chunk_refs(
    session: Session, array_path: str
) -> list[tuple[list[int], str, int, int, tuple[str, str] | None]]: ...
