"""Type stub of floe's native module ``floe._floe`` (Rust, pyo3). The ``floe`` package
wraps it; use the ``floe`` names, not these."""

import datetime
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, Final, final

from typing_extensions import disjoint_base

from floe.exceptions import (
    AlreadyExistsError as AlreadyExistsError,
)
from floe.exceptions import (
    Conflict as Conflict,
)
from floe.exceptions import (
    ConflictError as ConflictError,
)
from floe.exceptions import (
    ConflictType as ConflictType,
)
from floe.exceptions import (
    ErrorKind as ErrorKind,
)
from floe.exceptions import (
    FloeError as FloeError,
)
from floe.exceptions import (
    FormatError as FormatError,
)
from floe.exceptions import (
    IcechunkError as IcechunkError,
)
from floe.exceptions import (
    InternalError as InternalError,
)
from floe.exceptions import (
    InvalidInputError as InvalidInputError,
)
from floe.exceptions import (
    NodeNotFoundError as NodeNotFoundError,
)
from floe.exceptions import (
    NotFoundError as NotFoundError,
)
from floe.exceptions import (
    ReadOnlyError as ReadOnlyError,
)
from floe.exceptions import (
    RebaseFailedError as RebaseFailedError,
)
from floe.exceptions import (
    RefNotFoundError as RefNotFoundError,
)
from floe.exceptions import (
    RepositoryNotFoundError as RepositoryNotFoundError,
)
from floe.exceptions import (
    SessionStateError as SessionStateError,
)
from floe.exceptions import (
    SnapshotNotFoundError as SnapshotNotFoundError,
)
from floe.exceptions import (
    StorageError as StorageError,
)

# The module's export list, in the order the extension registers its members.
__all__ = [
    "__version__",
    "IcechunkError",
    "FloeError",
    "ConflictError",
    "RebaseFailedError",
    "Conflict",
    "ConflictType",
    "ErrorKind",
    "NotFoundError",
    "NodeNotFoundError",
    "SnapshotNotFoundError",
    "RefNotFoundError",
    "RepositoryNotFoundError",
    "AlreadyExistsError",
    "ReadOnlyError",
    "InvalidInputError",
    "SessionStateError",
    "StorageError",
    "FormatError",
    "InternalError",
    "_all_error_kinds",
    "initialize_logs",
    "set_logs_filter",
    "_merge_configs",
    "S3StaticCredentials",
    "S3Credentials",
    "GcsBearerCredential",
    "GcsStaticCredentials",
    "GcsCredentials",
    "AzureRefreshableCredential",
    "AzureStaticCredentials",
    "AzureCredentials",
    "Credentials",
    "Storage",
    "LatencyStorage",
    "S3Options",
    "ChecksumAlgorithm",
    "local_filesystem_storage",
    "in_memory_storage",
    "storage_from_url",
    "_storage_from_recipe",
    "Repository",
    "SnapshotInfo",
    "Ancestry",
    "Session",
    "NativeStore",
    "PreparedSet",
    "VersionSelection",
    "ConflictDetector",
    "BasicConflictSolver",
    "_open_readonly",
    "_open_fork",
    "AsyncAncestry",
    "VirtualChunkSpec",
    "_set_virtual_ref",
    "_set_virtual_refs",
    "_set_virtual_refs_arr",
    "_all_virtual_chunk_locations",
    "_virtual_chunk_refs",
    "PipelineArray",
    "Completions",
]

def _all_error_kinds() -> list[str]:
    """Every error code the native module raises (the values of ``ErrorKind``)."""

__version__: str
"""floe's version (the Rust package version the extension was built from)."""

def initialize_logs() -> None:
    """Starts console logging with the filter in ``FLOE_LOG`` / ``ICECHUNK_LOG``.

    ```python
    floe.initialize_logs()  # as at import: FLOE_LOG=floe=debug (or ICECHUNK_LOG) logs
    ```
    """

def set_logs_filter(log_filter_directive: str | None = None) -> None:
    """Sets the log filter; ``None`` re-reads the environment.

    ```python
    floe.set_logs_filter("floe=info")  # a tracing filter directive
    floe.set_logs_filter(None)  # back to FLOE_LOG / ICECHUNK_LOG
    ```
    """

def _merge_configs(base: Any, other: Any) -> Any:
    """``other`` over ``base`` (two ``floe.config.RepositoryConfig``), merged by the
    engine with Icechunk's rules."""

@final
class ChecksumAlgorithm:
    """The checksum S3 uploads carry; floe's S3 client supports ``Sha256`` only.

    ```python
    options = floe.S3Options(
        region="us-east-1", checksum_algorithm=floe.ChecksumAlgorithm.Sha256
    )
    print(options.checksum_algorithm.name)  # Sha256
    ```
    """

    Crc32: ChecksumAlgorithm
    Crc32c: ChecksumAlgorithm
    Crc64Nvme: ChecksumAlgorithm
    Sha1: ChecksumAlgorithm
    Sha256: ChecksumAlgorithm
    @property
    def name(self) -> str:
        """The algorithm's name (``"Sha256"``)."""

@final
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

@final
class S3Options:
    """Options of an S3-compatible client (seconds for the stream timeout).

    ```python
    options = floe.S3Options(endpoint_url="http://localhost:9000", allow_http=True)
    storage = floe.Storage.new_s3(options, "my-bucket", "era5")
    print(options.allow_http, options.region)  # True None
    ```
    """

    region: str | None
    """The AWS region (``"us-east-1"``); ``None``: from the environment."""
    endpoint_url: str | None
    """The URL of an S3-compatible service (MinIO, Ceph); ``None``: AWS."""
    allow_http: bool
    """Whether plain ``http://`` endpoints are allowed."""
    anonymous: bool
    """Whether requests go unsigned (public buckets)."""
    force_path_style: bool
    """Whether the bucket goes in the path, not the host name."""
    network_stream_timeout_seconds: int | None
    """Seconds a response stream may stall before the request fails; ``None``: the default."""
    requester_pays: bool
    """Whether requests say the requester pays (``x-amz-request-payer``)."""
    checksum_algorithm: ChecksumAlgorithm | None
    """The checksum uploads carry; ``None``: the default."""
    def __new__(
        cls,
        region: str | None = None,
        endpoint_url: str | None = None,
        allow_http: bool = False,
        anonymous: bool = False,
        force_path_style: bool = False,
        network_stream_timeout_seconds: int | None = None,
        requester_pays: bool = False,
        checksum_algorithm: ChecksumAlgorithm | None = None,
    ) -> S3Options: ...
    def _repr_html_(self) -> str: ...

@final
class S3StaticCredentials:
    """A fixed S3 access key (Icechunk's ``S3StaticCredentials``), also what the
    function of refreshable S3 credentials returns. Build with
    ``floe.s3_static_credentials`` for storage, or directly in a refresh function.

    ```python
    import datetime

    def fetch():  # a refresh function: picklable, no arguments
        return floe.S3StaticCredentials(
            access_key_id="AKIA...",
            secret_access_key="...",
            expires_after=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1),
        )

    credentials = floe.s3_refreshable_credentials(fetch)
    ```
    """

    access_key_id: str
    """The access key id (``AKIA...``)."""
    secret_access_key: str
    """The secret access key."""
    session_token: str | None
    """The session token of temporary credentials, or ``None``."""
    expires_after: datetime.datetime | None
    """When the key expires (UTC), or ``None`` for never."""
    def __new__(
        cls,
        access_key_id: str,
        secret_access_key: str,
        session_token: str | None = None,
        expires_after: datetime.datetime | None = None,
    ) -> S3StaticCredentials: ...

# The credential families below are pyo3 complex enums: each variant is a final
# subclass of its family, built positionally (tuple variants keep their value as
# ``_0``) and matchable with ``match`` (``__match_args__``).

@disjoint_base
class S3Credentials:
    """One S3 credential (Icechunk's ``S3Credentials``): the variant ``FromEnv``,
    ``Anonymous``, ``Static`` (an ``S3StaticCredentials``) or ``Refreshable`` (a pickled
    function and its current credential). ``floe.s3_credentials`` and its
    ``s3_*_credentials`` forms build them; ``match`` tells them apart.

    ```python
    credentials = floe.s3_credentials(anonymous=True)
    match credentials:
        case floe.S3Credentials.Anonymous():
            print("unsigned requests")
        case floe.S3Credentials.Static(key):
            print(key.access_key_id)
    ```
    """

    @final
    class FromEnv(S3Credentials):
        """Credentials from the environment (``AWS_*`` variables, profiles, instance roles)."""

        __match_args__ = ()
        def __new__(cls) -> S3Credentials.FromEnv: ...

    @final
    class Anonymous(S3Credentials):
        """Unsigned requests (public buckets)."""

        __match_args__ = ()
        def __new__(cls) -> S3Credentials.Anonymous: ...

    @final
    class Static(S3Credentials):
        """A fixed access key, an ``S3StaticCredentials``."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> S3StaticCredentials: ...
        def __new__(cls, _0: S3StaticCredentials) -> S3Credentials.Static: ...

    @final
    class Refreshable(S3Credentials):
        """Credentials a pickled function returns, fetched again once expired."""

        __match_args__ = ("pickled_function", "current")
        @property
        def pickled_function(self) -> bytes: ...
        @property
        def current(self) -> S3StaticCredentials | None: ...
        def __new__(
            cls, pickled_function: bytes, current: S3StaticCredentials | None = None
        ) -> S3Credentials.Refreshable: ...

@final
class GcsBearerCredential:
    """A GCS bearer token and its expiry (Icechunk's ``GcsBearerCredential``), what
    the function of refreshable GCS credentials returns.

    ```python
    def fetch():  # picklable, no arguments
        return floe.GcsBearerCredential("ya29....", expires_after=None)

    credentials = floe.gcs_refreshable_credentials(fetch)
    ```
    """

    bearer: str
    """The bearer token."""
    expires_after: datetime.datetime | None
    """When the token expires (UTC), or ``None`` for never."""
    def __new__(
        cls, bearer: str, *, expires_after: datetime.datetime | None = None
    ) -> GcsBearerCredential: ...

@disjoint_base
class GcsStaticCredentials:
    """A fixed GCS credential (Icechunk's ``GcsStaticCredentials``): the variant
    ``ServiceAccount`` (a JSON file path), ``ServiceAccountKey`` (its contents),
    ``ApplicationCredentials`` (a file path) or ``BearerToken``.

    ```python
    static = floe.GcsStaticCredentials.ServiceAccount("/secrets/sa.json")
    credentials = floe.gcs_static_credentials(service_account_file="/secrets/sa.json")
    ```
    """

    @final
    class ServiceAccount(GcsStaticCredentials):
        """A service account JSON file at this path."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> GcsStaticCredentials.ServiceAccount: ...

    @final
    class ServiceAccountKey(GcsStaticCredentials):
        """A serialized service account key."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> GcsStaticCredentials.ServiceAccountKey: ...

    @final
    class ApplicationCredentials(GcsStaticCredentials):
        """An application default credentials file at this path."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> GcsStaticCredentials.ApplicationCredentials: ...

    @final
    class BearerToken(GcsStaticCredentials):
        """A bearer token."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> GcsStaticCredentials.BearerToken: ...

@disjoint_base
class GcsCredentials:
    """One GCS credential (Icechunk's ``GcsCredentials``): the variant ``FromEnv``,
    ``Anonymous``, ``Static`` (a ``GcsStaticCredentials``) or ``Refreshable``.
    ``floe.gcs_credentials`` and its ``gcs_*_credentials`` forms build them.

    ```python
    credentials = floe.gcs_credentials(anonymous=True)
    assert isinstance(credentials, floe.GcsCredentials.Anonymous)
    ```
    """

    @final
    class Anonymous(GcsCredentials):
        """Unsigned requests (public buckets, emulators)."""

        __match_args__ = ()
        def __new__(cls) -> GcsCredentials.Anonymous: ...

    @final
    class FromEnv(GcsCredentials):
        """Credentials from the environment (``GOOGLE_*`` variables, application defaults)."""

        __match_args__ = ()
        def __new__(cls) -> GcsCredentials.FromEnv: ...

    @final
    class Static(GcsCredentials):
        """A fixed credential, a ``GcsStaticCredentials``."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> GcsStaticCredentials: ...
        def __new__(cls, _0: GcsStaticCredentials) -> GcsCredentials.Static: ...

    @final
    class Refreshable(GcsCredentials):
        """Bearer tokens a pickled function returns, fetched again once expired."""

        __match_args__ = ("pickled_function", "current")
        @property
        def pickled_function(self) -> bytes: ...
        @property
        def current(self) -> GcsBearerCredential | None: ...
        def __new__(
            cls, pickled_function: bytes, current: GcsBearerCredential | None = None
        ) -> GcsCredentials.Refreshable: ...

@disjoint_base
class AzureRefreshableCredential:
    """What the function of refreshable Azure credentials returns (Icechunk's
    ``AzureRefreshableCredential``): the variant ``AccessKey``, ``SasToken`` or
    ``BearerToken``, each with an optional ``expires_after`` (UTC).

    ```python
    def fetch():  # picklable, no arguments
        return floe.AzureRefreshableCredential.SasToken("sv=2024-...", expires_after=None)

    credentials = floe.azure_refreshable_credentials(fetch)
    ```
    """

    @final
    class AccessKey(AzureRefreshableCredential):
        """A storage account key and its expiry."""

        __match_args__ = ("key", "expires_after")
        @property
        def key(self) -> str: ...
        @property
        def expires_after(self) -> datetime.datetime | None: ...
        def __new__(
            cls, key: str, *, expires_after: datetime.datetime | None = None
        ) -> AzureRefreshableCredential.AccessKey: ...

    @final
    class SasToken(AzureRefreshableCredential):
        """A shared access signature token and its expiry."""

        __match_args__ = ("token", "expires_after")
        @property
        def token(self) -> str: ...
        @property
        def expires_after(self) -> datetime.datetime | None: ...
        def __new__(
            cls, token: str, *, expires_after: datetime.datetime | None = None
        ) -> AzureRefreshableCredential.SasToken: ...

    @final
    class BearerToken(AzureRefreshableCredential):
        """A bearer token and its expiry."""

        __match_args__ = ("bearer", "expires_after")
        @property
        def bearer(self) -> str: ...
        @property
        def expires_after(self) -> datetime.datetime | None: ...
        def __new__(
            cls, bearer: str, *, expires_after: datetime.datetime | None = None
        ) -> AzureRefreshableCredential.BearerToken: ...

@disjoint_base
class AzureStaticCredentials:
    """A fixed Azure credential (Icechunk's ``AzureStaticCredentials``): the variant
    ``AccessKey`` (a storage account key), ``SasToken`` or ``BearerToken``.

    ```python
    static = floe.AzureStaticCredentials.SasToken("sv=2024-...")
    credentials = floe.azure_static_credentials(sas_token="sv=2024-...")
    ```
    """

    @final
    class AccessKey(AzureStaticCredentials):
        """A storage account key (base64)."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> AzureStaticCredentials.AccessKey: ...

    @final
    class SasToken(AzureStaticCredentials):
        """A shared access signature token."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> AzureStaticCredentials.SasToken: ...

    @final
    class BearerToken(AzureStaticCredentials):
        """A bearer token."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> str: ...
        def __new__(cls, _0: str) -> AzureStaticCredentials.BearerToken: ...

@disjoint_base
class AzureCredentials:
    """One Azure credential (Icechunk's ``AzureCredentials``): the variant ``FromEnv``,
    ``Anonymous``, ``Static`` (an ``AzureStaticCredentials``) or ``Refreshable``.
    ``floe.azure_credentials`` and its ``azure_*_credentials`` forms build them.

    ```python
    credentials = floe.azure_credentials(from_env=True)
    assert isinstance(credentials, floe.AzureCredentials.FromEnv)
    ```
    """

    @final
    class Anonymous(AzureCredentials):
        """Unsigned requests (public containers)."""

        __match_args__ = ()
        def __new__(cls) -> AzureCredentials.Anonymous: ...

    @final
    class FromEnv(AzureCredentials):
        """Credentials from the environment (``AZURE_STORAGE_*`` variables)."""

        __match_args__ = ()
        def __new__(cls) -> AzureCredentials.FromEnv: ...

    @final
    class Static(AzureCredentials):
        """A fixed credential, an ``AzureStaticCredentials``."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> AzureStaticCredentials: ...
        def __new__(cls, _0: AzureStaticCredentials) -> AzureCredentials.Static: ...

    @final
    class Refreshable(AzureCredentials):
        """Credentials a pickled function returns, fetched again once expired."""

        __match_args__ = ("pickled_function", "current")
        @property
        def pickled_function(self) -> bytes: ...
        @property
        def current(self) -> AzureRefreshableCredential | None: ...
        def __new__(
            cls, pickled_function: bytes, current: AzureRefreshableCredential | None = None
        ) -> AzureCredentials.Refreshable: ...

@disjoint_base
class Credentials:
    """The credential of one virtual chunk container (Icechunk's ``Credentials``): the
    variant ``S3``, ``Gcs`` or ``Azure`` (wrapping that cloud's credential),
    ``LocalFileSystemAccess`` or ``HttpAccess``. ``floe.containers_credentials`` wraps
    cloud credentials in them by container URL prefix.

    ```python
    credentials = floe.containers_credentials(
        {"s3://public-bucket/": floe.s3_anonymous_credentials()}
    )
    assert isinstance(credentials["s3://public-bucket/"], floe.Credentials.S3)
    ```
    """

    @final
    class S3(Credentials):
        """An S3 container's credential, an ``S3Credentials``."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> S3Credentials: ...
        def __new__(cls, _0: S3Credentials) -> Credentials.S3: ...

    @final
    class Gcs(Credentials):
        """A GCS container's credential, a ``GcsCredentials``."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> GcsCredentials: ...
        def __new__(cls, _0: GcsCredentials) -> Credentials.Gcs: ...

    @final
    class Azure(Credentials):
        """An Azure container's credential, an ``AzureCredentials``."""

        __match_args__ = ("_0",)
        @property
        def _0(self) -> AzureCredentials: ...
        def __new__(cls, _0: AzureCredentials) -> Credentials.Azure: ...

    @final
    class LocalFileSystemAccess(Credentials):
        """Access to a local file system container (no secret)."""

        __match_args__ = ()
        def __new__(cls) -> Credentials.LocalFileSystemAccess: ...

    @final
    class HttpAccess(Credentials):
        """Access to an HTTP container (no secret)."""

        __match_args__ = ()
        def __new__(cls) -> Credentials.HttpAccess: ...

@disjoint_base
class Storage:
    """Where a repository lives (Icechunk's ``Storage``). Build one with the
    constructors of ``floe.storage`` (``local_filesystem_storage``,
    ``s3_storage``, ``gcs_storage``, ``azure_storage``, ``http_storage``,
    ``in_memory_storage``), not with the class methods here.

    ```python
    storage = floe.s3_storage(bucket="my-bucket", prefix="era5")
    print(storage.url)  # s3://my-bucket/era5
    local = floe.local_filesystem_storage("repo")
    print(floe.Repository.open(local).list_branches())  # {'main'}
    ```

    Pickles as the constructor and arguments it was built with (credentials as
    ``floe.credentials`` describes; in-memory storage raises ``TypeError``), so a
    repository or session on it can travel to Dask workers.
    """

    @property
    def url(self) -> str:
        """Where the repository is, as a URL (``file:///data/repo``,
        ``s3://bucket/prefix``, ``memory://``)."""
    def _repr_html_(self) -> str: ...
    def default_settings(self) -> Any:
        """The ``StorageSettings`` this storage uses when none are given.

        ```python
        settings = floe.local_filesystem_storage("repo").default_settings()
        print(settings.retries.max_tries)  # 11: object_store's default, first try included
        ```
        """
    def _with_settings(self, settings: Any) -> Storage: ...
    @classmethod
    def new_in_memory(cls) -> Storage:
        """An in-memory storage, as ``floe.in_memory_storage()``.

        ```python
        repo = floe.Repository.create(floe.Storage.new_in_memory())
        ```
        """
    @classmethod
    def _new_redirect(cls, base_url: str, location: str) -> Storage: ...
    @classmethod
    def new_local_filesystem(cls, path: str) -> Storage:
        """A storage in the local directory ``path``, as
        ``floe.local_filesystem_storage(path)``.

        ```python
        storage = floe.Storage.new_local_filesystem("new-repo")
        ```
        """
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
    ) -> Storage:
        """An S3 storage, as ``floe.s3_storage`` (which takes keyword arguments).

        ```python
        storage = floe.Storage.new_s3(floe.S3Options(region="us-east-1"), "my-bucket", "era5")
        ```
        """
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
    ) -> Storage:
        """A Tigris storage, as ``floe.tigris_storage``.

        ```python
        storage = floe.Storage.new_tigris(floe.S3Options(region="auto"), "my-bucket", "era5", False)
        ```
        """
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
    ) -> Storage:
        """A Cloudflare R2 storage, as ``floe.r2_storage``.

        ```python
        storage = floe.Storage.new_r2(
            floe.S3Options(), bucket="my-bucket", prefix="era5", account_id="my-account"
        )
        ```
        """
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
    ) -> Storage:
        """A Google Cloud Storage storage, as ``floe.gcs_storage``.

        ```python
        credentials = floe.gcs_anonymous_credentials()
        storage = floe.Storage.new_gcs("my-bucket", "era5", credentials)
        ```
        """
    @classmethod
    def new_azure_blob(
        cls,
        account: str,
        container: str,
        prefix: str,
        credentials: AzureCredentials | None = None,
        *,
        config: dict[str, str] | None = None,
    ) -> Storage:
        """An Azure Blob Storage storage, as ``floe.azure_storage``.

        ```python
        credentials = floe.azure_anonymous_credentials()
        storage = floe.Storage.new_azure_blob("myaccount", "data", "era5", credentials)
        ```
        """
    @classmethod
    def new_http(
        cls,
        base_url: str,
        config: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Storage:
        """A read-only storage over HTTP(S), as ``floe.http_storage``.

        ```python
        storage = floe.Storage.new_http("https://example.org/repos/era5")
        ```
        """

def local_filesystem_storage(path: str) -> Storage: ...
def in_memory_storage() -> Storage: ...
def storage_from_url(url: str) -> Storage: ...
def _storage_from_recipe(name: str, kwargs: dict[str, Any]) -> Storage: ...

@final
class SnapshotInfo:
    """One commit of a history (Icechunk's ``SnapshotInfo``), as
    ``Repository.ancestry`` and ``Repository.lookup_snapshot`` return it.

    ```python
    for snap in repo.ancestry(branch="main"):
        print(snap.id, snap.parent_id, snap.written_at.isoformat(), snap.message)
    ```
    """

    @property
    def id(self) -> str:
        """The snapshot id: 20 characters of Crockford base32 (12 random bytes)."""
    @property
    def parent_id(self) -> str | None:
        """The previous snapshot's id; ``None`` for the initial snapshot."""
    @property
    def written_at(self) -> datetime.datetime:
        """When the snapshot was written (UTC, microseconds)."""
    @property
    def message(self) -> str:
        """The commit message."""
    @property
    def metadata(self) -> dict[str, Any]:
        """The commit metadata (JSON values), with the repository's default commit
        metadata merged under it."""
    def _repr_html_(self) -> str: ...

@final
class Ancestry(Iterator[SnapshotInfo]):
    """The commits of a history, newest first, read as iteration reaches them."""

    def __iter__(self) -> Ancestry: ...
    def __next__(self) -> SnapshotInfo: ...

@final
class VersionSelection:
    """Which side wins a chunk both sides wrote, for ``BasicConflictSolver``
    (Icechunk's ``VersionSelection``): ``Fail`` (raise ``RebaseFailedError``),
    ``UseOurs`` (this session's chunk), ``UseTheirs`` (the branch's chunk).

    ```python
    zarr.open_array(session.store, path="temperature")[0] = 1.0  # chunk (0, 0)
    other = repo.writable_session("main")
    zarr.open_array(other.store, path="temperature")[0] = 2.0  # the same chunk
    other.commit("row 0 = 2")  # the branch moves on
    solver = floe.BasicConflictSolver(on_chunk_conflict=floe.VersionSelection.UseOurs)
    session.commit("row 0 = 1", rebase_with=solver)  # our chunk wins
    print(zarr.open_array(repo.readonly_session("main").store, path="temperature")[0, 0])  # 1.0
    ```
    """

    Fail: Final[VersionSelection]
    UseOurs: Final[VersionSelection]
    UseTheirs: Final[VersionSelection]

@final
class ConflictDetector:
    """A rebase that fails on any conflict (Icechunk's ``ConflictDetector``):
    changes to different chunks, arrays and groups than the branch's new commits
    rebase; the same chunk, node metadata, or a deleted node raise
    ``RebaseFailedError`` listing them.

    ```python
    zarr.open_array(session.store, path="temperature")[0] = 1.0  # chunk (0, 0)
    other = repo.writable_session("main")
    zarr.open_array(other.store, path="temperature")[1] = 2.0  # another chunk
    other.commit("row 1")
    session.commit("row 0", rebase_with=floe.ConflictDetector())  # no conflict: rebases
    ```
    """

    def __new__(cls) -> ConflictDetector: ...

@final
class BasicConflictSolver:
    """A rebase that resolves the conflicts it can (Icechunk's
    ``BasicConflictSolver``): a chunk both sides wrote goes to
    ``on_chunk_conflict`` (``VersionSelection.UseOurs`` by default), and a node one
    side deleted while the other updated it is deleted unless
    ``fail_on_delete_of_updated_array`` / ``fail_on_delete_of_updated_group``.
    Conflicting node metadata still raises ``RebaseFailedError``.

    ```python
    zarr.open_array(session.store, path="temperature")[0] = 1.0  # chunk (0, 0)
    other = repo.writable_session("main")
    zarr.open_array(other.store, path="temperature")[0] = 2.0  # the same chunk
    other.commit("row 0 = 2")  # the branch moves on
    try:
        session.commit("row 0 = 1", rebase_with=floe.ConflictDetector())
    except floe.RebaseFailedError as e:
        print(e.conflicts[0].conflict_type)  # Chunk double update
        session.commit("row 0 = 1", rebase_with=floe.BasicConflictSolver())
    ```
    """

    def __new__(
        cls,
        *,
        on_chunk_conflict: VersionSelection = ...,
        fail_on_delete_of_updated_array: bool = False,
        fail_on_delete_of_updated_group: bool = False,
    ) -> BasicConflictSolver: ...

@final
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
        storage: Storage,
        config: Any = None,
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
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
    def reopen(
        self,
        config: Any = None,
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
    ) -> Repository: ...
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
    def get_status(self) -> tuple[str, int, str | None]:
        """Spec 2: ``(availability, set_at in microseconds since the Unix epoch,
        reason)``; availability is ``online``, ``read_only`` or ``offline``."""
    def set_status(self, availability: str, reason: str | None = None) -> None:
        """Spec 2: sets the status (``online`` or ``read_only``)."""
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
        full: bool = False,
        manifest_concurrency: int | None = None,
        delete_concurrency: int | None = None,
        max_consecutive_delete_failures: int | None = None,
        list_concurrency: int | None = None,
    ) -> dict[str, Any]: ...
    def retention_policy(self) -> str | None: ...
    def set_retention_policy(self, policy: str | None) -> None: ...
    def apply_retention(
        self, policy: str | None = None, *, dry_run: bool = False
    ) -> dict[str, list[str]]: ...
    def squash(
        self,
        branch: str,
        from_snapshot_id: str,
        to_snapshot_id: str | None = None,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]: ...
    def compact(
        self,
        branch: str,
        paths: list[str] | None = None,
        message: str | None = None,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]: ...
    def maintain(
        self, *, gc_older_than: datetime.datetime | None = None, dry_run: bool = False
    ) -> dict[str, Any]: ...
    def verify(
        self, *, read_chunks: bool = False, check_virtual: bool = False
    ) -> dict[str, Any]: ...
    @staticmethod
    def _clone(
        source: Storage, destination: Storage, refs: list[str], verify: bool
    ) -> dict[str, Any]: ...

    # Async twins (python/src/aio.rs): native coroutines on floe's tokio runtime.
    @staticmethod
    def create_async(
        storage: Storage,
        config: Any = None,
        spec_version: int | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
    ) -> Awaitable[Repository]: ...
    @staticmethod
    def open_async(
        storage: Storage,
        config: Any = None,
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
    ) -> Awaitable[Repository]: ...
    @staticmethod
    def open_or_create_async(
        storage: Storage,
        config: Any = None,
        create_version: int | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | list[str] | None = None,
    ) -> Awaitable[Repository]: ...
    @staticmethod
    def exists_async(storage: Storage) -> Awaitable[bool]: ...
    @staticmethod
    def fetch_spec_version_async(storage: Storage) -> Awaitable[int | None]: ...
    def save_config_async(self, config: Any = None) -> Awaitable[None]: ...
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
        full: bool = False,
        manifest_concurrency: int | None = None,
        delete_concurrency: int | None = None,
        max_consecutive_delete_failures: int | None = None,
        list_concurrency: int | None = None,
    ) -> Awaitable[dict[str, Any]]: ...
    def async_ancestry(
        self, *, branch: str | None = None, tag: str | None = None, snapshot_id: str | None = None
    ) -> AsyncAncestry: ...

@final
class AsyncAncestry(AsyncIterator[SnapshotInfo]):
    """The commits of a history, newest first, for ``async for``; read in batches."""

    def __aiter__(self) -> AsyncAncestry: ...
    def __anext__(self) -> Awaitable[SnapshotInfo]: ...
    def aclose(self) -> Awaitable[None]: ...

@final
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
    def flush_packs(self) -> None: ...
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

@final
class PreparedSet:
    """A value ``NativeStore._prepare_set`` stored (a chunk's bytes written, or a
    metadata document), for ``NativeStore._finish_set`` to record once."""

@final
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
    def _get_now(self, key: str) -> tuple[bool, bytes | None]: ...
    def _set_now(self, key: str, value: bytes) -> bool: ...
    def _prepare_set(self, key: str, value: bytes) -> Awaitable[PreparedSet]: ...
    def _finish_set(self, prepared: PreparedSet) -> None: ...
    def set_if_not_exists(self, key: str, value: bytes) -> Awaitable[bool]: ...
    def delete(self, key: str) -> Awaitable[None]: ...
    def _load(self) -> Awaitable[None]: ...
    def _delete_loaded(self, key: str) -> None: ...
    def delete_prefix(self, prefix: str) -> Awaitable[None]: ...
    def list_prefix(self, prefix: str) -> Awaitable[list[str]]: ...
    def list_dir(self, prefix: str) -> Awaitable[tuple[list[str], list[str]]]: ...
    def _pipeline_array(self, path: str, metadata: str, zarr_format: int) -> PipelineArray: ...

# floe's zarr codec pipeline (python/src/pipeline.rs; floe.codec_pipeline).

@final
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

@final
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

@final
class VirtualChunkSpec:
    """One virtual chunk ref for ``FloeStore.set_virtual_refs`` (Icechunk's
    ``VirtualChunkSpec``): chunk ``index`` (chunk grid coordinates), the ``location`` URL
    of the file holding it, its ``offset`` and ``length`` in bytes, and optionally a
    checksum the file must still match when read (``etag_checksum`` or
    ``last_updated_at_checksum``, a UTC datetime; a chunk whose file changed fails to
    read with ``StorageError``).

    ```python
    spec = floe.VirtualChunkSpec(
        index=[0, 0], location="s3://my-bucket/data/file.nc", offset=4096, length=40
    )
    print(spec.index, spec.length)  # [0, 0] 40
    ```
    """

    index: list[int]
    """The chunk's coordinates in the array's chunk grid."""
    location: str
    """The URL of the file holding the chunk (``s3://``, ``gs://``, ``file://``...)."""
    offset: int
    """Where the chunk starts in the file, in bytes."""
    length: int
    """The chunk's length, in bytes."""
    etag_checksum: str | None
    """The ETag the file must still have, or ``None``."""
    last_updated_at_checksum: datetime.datetime | None
    """A time (UTC) the file must not have been modified after, or ``None``."""
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
    session: Session,
    array_path: str,
    chunks: list[VirtualChunkSpec],
    validate_containers: bool = True,
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
