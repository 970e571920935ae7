"""Type stub of floe's native module ``floe._floe`` (Rust, pyo3). The ``floe`` package
wraps it; use the ``floe`` names, not these."""

import datetime
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, Final

from floe.exceptions import (
    AlreadyExistsError as AlreadyExistsError,
    Conflict as Conflict,
    ConflictError as ConflictError,
    ConflictType as ConflictType,
    ErrorKind as ErrorKind,
    FloeError as FloeError,
    FormatError as FormatError,
    IcechunkError as IcechunkError,
    InternalError as InternalError,
    InvalidInputError as InvalidInputError,
    NodeNotFoundError as NodeNotFoundError,
    NotFoundError as NotFoundError,
    ReadOnlyError as ReadOnlyError,
    RebaseFailedError as RebaseFailedError,
    RefNotFoundError as RefNotFoundError,
    RepositoryNotFoundError as RepositoryNotFoundError,
    SessionStateError as SessionStateError,
    SnapshotNotFoundError as SnapshotNotFoundError,
    StorageError as StorageError,
)

def _all_error_kinds() -> list[str]:
    """Every error code the native module raises (the values of ``ErrorKind``)."""

__version__: str
"""floe's version (the Rust package version the extension was built from)."""

def initialize_logs() -> None:
    """Starts console logging with the filter in ``FLOE_LOG`` / ``ICECHUNK_LOG``."""

def set_logs_filter(log_filter_directive: str | None = None) -> None:
    """Sets the log filter; ``None`` re-reads the environment."""

def _merge_configs(base: Any, other: Any) -> Any:
    """``other`` over ``base`` (two ``floe.config.RepositoryConfig``), merged by the
    engine with Icechunk's rules."""

class ChecksumAlgorithm:
    """The checksum S3 uploads carry; floe's S3 client supports ``Sha256`` only."""

    Crc32: ChecksumAlgorithm
    Crc32c: ChecksumAlgorithm
    Crc64Nvme: ChecksumAlgorithm
    Sha1: ChecksumAlgorithm
    Sha256: ChecksumAlgorithm
    @property
    def name(self) -> str: ...
class LatencyStorage(Storage):
    """A storage that waits ``write_latency_ms`` before each write and
    ``read_latency_ms`` before each read it forwards to ``inner`` (Icechunk's
    ``icechunk.testing.LatencyStorage``); both adjustable at run time. Not picklable."""

    def __new__(
        cls, inner: Storage, *, write_latency_ms: int = 0, read_latency_ms: int = 0
    ) -> LatencyStorage: ...
    @property
    def write_latency_ms(self) -> int: ...
    @write_latency_ms.setter
    def write_latency_ms(self, ms: int) -> None: ...
    @property
    def read_latency_ms(self) -> int: ...
    @read_latency_ms.setter
    def read_latency_ms(self, ms: int) -> None: ...

class S3Options:
    """Options of an S3-compatible client (seconds for the stream timeout)."""

    region: str | None
    endpoint_url: str | None
    allow_http: bool
    anonymous: bool
    force_path_style: bool
    network_stream_timeout_seconds: int | None
    requester_pays: bool
    def __init__(
        self,
        region: str | None = None,
        endpoint_url: str | None = None,
        allow_http: bool = False,
        anonymous: bool = False,
        force_path_style: bool = False,
        network_stream_timeout_seconds: int | None = None,
        requester_pays: bool = False,
        checksum_algorithm: ChecksumAlgorithm | None = None,
    ) -> None: ...
    checksum_algorithm: ChecksumAlgorithm | None
    def _repr_html_(self) -> str: ...

class S3StaticCredentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None
    expires_after: datetime.datetime | None
    def __init__(
        self,
        access_key_id: str,
        secret_access_key: str,
        session_token: str | None = None,
        expires_after: datetime.datetime | None = None,
    ) -> None: ...

class S3Credentials:
    class FromEnv(S3Credentials):
        def __init__(self) -> None: ...
    class Anonymous(S3Credentials):
        def __init__(self) -> None: ...
    class Static(S3Credentials):
        _0: S3StaticCredentials
        def __init__(self, credentials: S3StaticCredentials) -> None: ...
    class Refreshable(S3Credentials):
        pickled_function: bytes
        current: S3StaticCredentials | None
        def __init__(self, pickled_function: bytes, current: S3StaticCredentials | None = None) -> None: ...

class GcsBearerCredential:
    bearer: str
    expires_after: datetime.datetime | None
    def __init__(self, bearer: str, *, expires_after: datetime.datetime | None = None) -> None: ...

class GcsStaticCredentials:
    class ServiceAccount(GcsStaticCredentials):
        def __init__(self, path: str) -> None: ...
    class ServiceAccountKey(GcsStaticCredentials):
        def __init__(self, key: str) -> None: ...
    class ApplicationCredentials(GcsStaticCredentials):
        def __init__(self, path: str) -> None: ...
    class BearerToken(GcsStaticCredentials):
        def __init__(self, token: str) -> None: ...

class GcsCredentials:
    class Anonymous(GcsCredentials):
        def __init__(self) -> None: ...
    class FromEnv(GcsCredentials):
        def __init__(self) -> None: ...
    class Static(GcsCredentials):
        def __init__(self, credentials: GcsStaticCredentials) -> None: ...
    class Refreshable(GcsCredentials):
        def __init__(self, pickled_function: bytes, current: GcsBearerCredential | None = None) -> None: ...

class AzureRefreshableCredential:
    class AccessKey(AzureRefreshableCredential):
        def __init__(self, key: str, *, expires_after: datetime.datetime | None = None) -> None: ...
    class SasToken(AzureRefreshableCredential):
        def __init__(self, token: str, *, expires_after: datetime.datetime | None = None) -> None: ...
    class BearerToken(AzureRefreshableCredential):
        def __init__(self, bearer: str, *, expires_after: datetime.datetime | None = None) -> None: ...

class AzureStaticCredentials:
    class AccessKey(AzureStaticCredentials):
        def __init__(self, key: str) -> None: ...
    class SasToken(AzureStaticCredentials):
        def __init__(self, token: str) -> None: ...
    class BearerToken(AzureStaticCredentials):
        def __init__(self, token: str) -> None: ...

class AzureCredentials:
    class Anonymous(AzureCredentials):
        def __init__(self) -> None: ...
    class FromEnv(AzureCredentials):
        def __init__(self) -> None: ...
    class Static(AzureCredentials):
        def __init__(self, credentials: AzureStaticCredentials) -> None: ...
    class Refreshable(AzureCredentials):
        def __init__(
            self, pickled_function: bytes, current: AzureRefreshableCredential | None = None
        ) -> None: ...

class Credentials:
    class S3(Credentials):
        def __init__(self, credentials: S3Credentials) -> None: ...
    class Gcs(Credentials):
        def __init__(self, credentials: GcsCredentials) -> None: ...
    class Azure(Credentials):
        def __init__(self, credentials: AzureCredentials) -> None: ...
    class LocalFileSystemAccess(Credentials):
        def __init__(self) -> None: ...
    class HttpAccess(Credentials):
        def __init__(self) -> None: ...

class Storage:
    """Where a repository lives; pickles as the constructor and arguments it was
    built with (see ``floe.storage``)."""

    @property
    def url(self) -> str: ...
    def _repr_html_(self) -> str: ...
    def default_settings(self) -> Any: ...
    def _with_settings(self, settings: Any) -> Storage: ...
    @classmethod
    def new_in_memory(cls) -> Storage: ...
    @classmethod
    def _new_redirect(cls, base_url: str, location: str) -> Storage: ...
    @classmethod
    def new_local_filesystem(cls, path: str) -> Storage: ...
    @classmethod
    def new_s3(
        cls,
        config: S3Options,
        bucket: str,
        prefix: str | None,
        credentials: S3Credentials | None = None,
        legacy_rooted_keys: bool | None = None,
        *,
        read_headers: dict[str, str] | None = None,
        write_headers: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Storage: ...
    @classmethod
    def new_tigris(
        cls,
        config: S3Options,
        bucket: str,
        prefix: str | None,
        use_weak_consistency: bool,
        credentials: S3Credentials | None = None,
        legacy_rooted_keys: bool | None = None,
        *,
        read_headers: dict[str, str] | None = None,
        write_headers: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Storage: ...
    @classmethod
    def new_r2(
        cls,
        config: S3Options,
        bucket: str | None = None,
        prefix: str | None = None,
        account_id: str | None = None,
        credentials: S3Credentials | None = None,
        legacy_rooted_keys: bool | None = None,
        *,
        read_headers: dict[str, str] | None = None,
        write_headers: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Storage: ...
    @classmethod
    def new_gcs(
        cls,
        bucket: str,
        prefix: str | None,
        credentials: GcsCredentials | None = None,
        *,
        config: dict[str, str] | None = None,
        read_headers: dict[str, str] | None = None,
        write_headers: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Storage: ...
    @classmethod
    def new_azure_blob(
        cls,
        account: str,
        container: str,
        prefix: str,
        credentials: AzureCredentials | None = None,
        *,
        config: dict[str, str] | None = None,
    ) -> Storage: ...
    @classmethod
    def new_http(
        cls, base_url: str, config: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> Storage: ...

def local_filesystem_storage(path: str) -> Storage: ...
def in_memory_storage() -> Storage: ...
def storage_from_url(url: str) -> Storage: ...
def _storage_from_recipe(name: str, kwargs: dict[str, Any]) -> Storage: ...

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
    def _repr_html_(self) -> str: ...

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
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
    ) -> Repository: ...
    @staticmethod
    def exists(storage: Storage) -> bool: ...
    @property
    def config(self) -> Any: ...
    def save_config(self, config: Any = None) -> None: ...
    @staticmethod
    def open(
        storage: Storage, config: Any = None, authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None
    ) -> Repository: ...
    @staticmethod
    def open_or_create(
        storage: Storage,
        config: Any = None,
        spec_version: int | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
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
    def set_default_commit_metadata(self, metadata: dict[str, Any]) -> None: ...
    def default_commit_metadata(self) -> dict[str, Any]: ...
    def lookup_snapshot(self, snapshot_id: str) -> SnapshotInfo: ...
    def ops_log(self) -> list[dict[str, Any]]: ...
    def feature_flags(self) -> list[tuple[int, str, bool | None, bool]]: ...
    def set_feature_flag(self, name: str, setting: bool | None) -> None: ...
    def chunk_storage_stats(self) -> tuple[int, int, int]: ...
    @staticmethod
    def fetch_spec_version(storage: Storage) -> int | None: ...
    def _upgrade_to_spec2(self, *, dry_run: bool) -> dict[str, Any]: ...
    def inspect_repo_info(self) -> dict[str, Any]: ...
    def inspect_snapshot(self, snapshot_id: str, *, pretty: bool = True) -> dict[str, Any]: ...
    def inspect_transaction_log(
        self, snapshot_id: str, *, pretty: bool = True
    ) -> dict[str, Any]: ...
    def inspect_manifest(self, manifest_id: str, *, pretty: bool = True) -> dict[str, Any]: ...
    def list_manifest_files(self, snapshot_id: str) -> list[tuple[str, int, int]]: ...
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

    # Async twins (python/src/aio.rs): native coroutines on floe's tokio runtime.
    @staticmethod
    def create_async(
        storage: Storage, config: RepositoryConfig | None = None, spec_version: int | None = None
    ) -> Awaitable[Repository]: ...
    @staticmethod
    def open_async(storage: Storage, config: Any = None) -> Awaitable[Repository]: ...
    @staticmethod
    def open_or_create_async(
        storage: Storage, config: Any = None, create_version: int | None = None
    ) -> Awaitable[Repository]: ...
    @staticmethod
    def exists_async(storage: Storage) -> Awaitable[bool]: ...
    @staticmethod
    def fetch_spec_version(storage: Storage) -> int | None: ...
    @staticmethod
    def fetch_spec_version_async(storage: Storage) -> Awaitable[int | None]: ...
    def save_config_async(self, config: RepositoryConfig | None = None) -> Awaitable[None]: ...
    def list_branches_async(self) -> Awaitable[list[str]]: ...
    def lookup_branch_async(self, branch: str) -> Awaitable[str]: ...
    def create_branch_async(self, branch: str, snapshot_id: str) -> Awaitable[None]: ...
    def delete_branch_async(self, branch: str) -> Awaitable[None]: ...
    def reset_branch_async(
        self, branch: str, snapshot_id: str, *, from_snapshot_id: str | None = None
    ) -> Awaitable[None]: ...
    def list_tags_async(self) -> Awaitable[list[str]]: ...
    def lookup_tag_async(self, tag: str) -> Awaitable[str]: ...
    def create_tag_async(self, tag: str, snapshot_id: str) -> Awaitable[None]: ...
    def delete_tag_async(self, tag: str) -> Awaitable[None]: ...
    def get_metadata_async(self) -> Awaitable[dict[str, Any]]: ...
    def set_metadata_async(self, metadata: dict[str, Any]) -> Awaitable[None]: ...
    def update_metadata_async(self, metadata: dict[str, Any]) -> Awaitable[dict[str, Any]]: ...
    def diff_async(
        self, *, from_snapshot_id: str, to_snapshot_id: str
    ) -> Awaitable[dict[str, Any]]: ...
    def writable_session_async(self, branch: str) -> Awaitable[Session]: ...
    def readonly_session_async(
        self,
        branch: str | None = None,
        *,
        tag: str | None = None,
        snapshot_id: str | None = None,
        as_of: datetime.datetime | None = None,
    ) -> Awaitable[Session]: ...
    def rearrange_session_async(self, branch: str) -> Awaitable[Session]: ...
    def expire_snapshots_async(
        self,
        older_than: datetime.datetime,
        *,
        delete_expired_branches: bool = False,
        delete_expired_tags: bool = False,
    ) -> Awaitable[list[str]]: ...
    def garbage_collect_async(
        self,
        delete_object_older_than: datetime.datetime,
        *,
        dry_run: bool = False,
        allow_recent_cutoff: bool = False,
    ) -> Awaitable[dict[str, Any]]: ...
    def async_ancestry(
        self, *, branch: str | None = None, tag: str | None = None, snapshot_id: str | None = None
    ) -> AsyncAncestry: ...

class AsyncAncestry(AsyncIterator[SnapshotInfo]):
    """The commits of a history, newest first, for ``async for``; read in batches."""

    def __aiter__(self) -> AsyncAncestry: ...
    def __anext__(self) -> Awaitable[SnapshotInfo]: ...
    def aclose(self) -> Awaitable[None]: ...

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
    def amend(
        self, message: str, metadata: dict[str, Any] | None = None, *, allow_empty: bool = False
    ) -> str: ...
    def flush(self, message: str, metadata: dict[str, Any] | None = None) -> str: ...
    def _chunk_refs(
        self, array_path: str
    ) -> tuple[
        list[list[int]], bytes, list[str], list[int], list[int], list[tuple[int, bytes]]
    ]: ...
    def _rewrite_manifests(
        self, message: str, metadata: dict[str, Any] | None = None, *, amend: bool = False
    ) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def config(self) -> RepositoryConfig: ...
    def chunk_type(self, array_path: str, chunk_coordinates: list[int]) -> str: ...
    def get_node_id(self, path: str) -> str: ...
    def shift_array(self, array_path: str, chunk_offset: list[int]) -> None: ...
    def reindex_array(
        self,
        array_path: str,
        forward: Callable[[list[int]], Iterable[int] | None],
        backward: Callable[[list[int]], Iterable[int] | None] | None = None,
    ) -> None: ...
    def rebase(self, solver: ConflictDetector | BasicConflictSolver | None = None) -> None: ...
    def fork(self) -> Session: ...
    def merge(self, *forks: Session) -> None: ...
    def move(self, from_path: str, to_path: str) -> None: ...
    def _native_store(self) -> NativeStore: ...

    # Async twins (python/src/aio.rs): native coroutines on floe's tokio runtime.
    def commit_async(
        self,
        message: str,
        metadata: dict[str, Any] | None = None,
        *,
        allow_empty: bool = False,
        rebase_with: ConflictDetector | BasicConflictSolver | None = None,
        rebase_tries: int = 100,
    ) -> Awaitable[str]: ...
    def amend_async(
        self, message: str, metadata: dict[str, Any] | None = None, *, allow_empty: bool = False
    ) -> Awaitable[str]: ...
    def rebase_async(
        self, solver: ConflictDetector | BasicConflictSolver | None = None
    ) -> Awaitable[None]: ...
    def merge_async(self, *forks: Session) -> Awaitable[None]: ...
    def move_async(self, from_path: str, to_path: str) -> Awaitable[None]: ...
    def _chunk_coordinates_async(self, array_path: str) -> Awaitable[list[list[int]]]: ...

def _open_readonly(storage: Storage | str, snapshot_id: str) -> Session: ...
def _open_fork(storage: Storage | str, fork: bytes) -> Session: ...

class NativeStore:
    """The Zarr store view of a session; ``floe.FloeStore`` wraps it. Byte ranges are
    ``(kind, a, b)``: 0 whole, 1 ``a..b``, 2 from ``a``, 3 the last ``a`` bytes."""

    @property
    def writable(self) -> bool: ...
    def get(self, key: str, kind: int = 0, a: int = 0, b: int = 0) -> Awaitable[bytes | None]: ...
    def get_many(
        self, keys: list[str], concurrency: int | None = None
    ) -> Awaitable[list[bytes | BaseException | None]]: ...
    def exists(self, key: str) -> Awaitable[bool]: ...
    def getsize(self, key: str) -> Awaitable[int | None]: ...
    def getsize_prefix(self, prefix: str) -> Awaitable[int]: ...
    def set(self, key: str, value: bytes) -> Awaitable[None]: ...
    def set_if_not_exists(self, key: str, value: bytes) -> Awaitable[bool]: ...
    def delete(self, key: str) -> Awaitable[None]: ...
    def delete_prefix(self, prefix: str) -> Awaitable[None]: ...
    def list_prefix(self, prefix: str) -> Awaitable[list[str]]: ...
    def list_dir(self, prefix: str) -> Awaitable[tuple[list[str], list[str]]]: ...
    def _pipeline_array(self, path: str, metadata: str, zarr_format: int) -> PipelineArray: ...

# floe's zarr codec pipeline (python/src/pipeline.rs; floe.codec_pipeline).

class PipelineArray:
    """One array of a session as ``floe.codec_pipeline`` sees it: regions
    (``start``, ``shape`` in elements) read into / written from C-contiguous
    ``uint8`` views of native-endian, C-order elements, whose memory Rust uses in
    place until ``Completions.take`` returns the call's token. Both methods return at
    once (``TypeError`` for a read-only or non-contiguous output, ``ValueError`` for
    a buffer of another size, ``ReadOnlyError`` for a write after the commit); the
    outcome comes through ``completions``."""

    @property
    def item_size(self) -> int: ...
    def read(
        self, start: list[int], shape: list[int], out: Any, completions: Completions, token: int
    ) -> None: ...
    def write(
        self,
        start: list[int],
        shape: list[int],
        data: Any,
        write_empty_chunks: bool,
        completions: Completions,
        token: int,
    ) -> None: ...

class Completions:
    """Outcomes of ``PipelineArray`` calls for one event loop (python/src/completions.rs):
    the loop watches ``fileno()`` for readability (``loop.add_reader``) and then calls
    ``take()``, which returns ``(token, exception or None)`` for every call that ended
    since, and releases the buffers they borrowed. ``OSError`` when the socket pair
    cannot be made."""

    def __new__(cls) -> Completions: ...
    def fileno(self) -> int: ...
    def take(self) -> list[tuple[int, BaseException | None]]: ...

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
