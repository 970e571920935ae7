"""Where repositories live, as Icechunk 2.3.0's ``icechunk.storage``: ``Storage`` and
its constructors, ``S3Options``, and the ``StorageSettings`` family.

Backends (all through the Rust ``object_store`` crate):

- ``local_filesystem_storage(path)`` and ``in_memory_storage()``;
- ``s3_storage`` (AWS S3 and S3-compatible servers), ``tigris_storage``,
  ``r2_storage`` (Cloudflare R2);
- ``gcs_storage`` (Google Cloud Storage; conditional writes by generation match);
- ``azure_storage`` (Azure Blob Storage);
- ``http_storage`` (read-only: every write raises ``FloeError`` before any request).

Conditional writes
    Icechunk's consistency needs the server to enforce create-if-not-exists and
    compare-and-swap. AWS S3, GCS and Azure do. On a custom endpoint (an
    S3-compatible server, an emulator: ``endpoint_url``, ``STORAGE_EMULATOR_HOST``,
    a GCS ``google_base_url``, Azurite) floe checks this once, before the first
    conditional write of a storage object, with a probe object under
    ``.floe-conditional-write-check/`` that it deletes again. A server that ignores the
    preconditions gets every conditional write (creating a repository, committing,
    moving refs) refused with ``FloeError`` ("cannot be written safely"), instead of
    writing without them as Icechunk's ``unsafe_use_conditional_*=False`` settings
    would. Measured on the CI emulators: Azurite enforces both preconditions;
    gcp-storage-emulator enforces neither (and answers no ``HEAD`` and no ``ETag``,
    which object_store's GCS client needs: floe cannot read it either).

Pickling
    A ``Storage`` pickles as the constructor and arguments it was built with;
    credentials travel as described in ``floe.credentials``. In-memory storage does
    not pickle (``TypeError``).

Settings
    ``StorageSettings`` (with ``StorageConcurrencySettings``,
    ``StorageRetriesSettings``, ``StorageTimeoutSettings``) holds Icechunk's storage
    settings. floe passes retries (tries, backoff) and timeouts (connect, read,
    operation, attempt) to the object-store client (``Storage._with_settings``); the
    concurrency, storage-class, multipart and ``unsafe_*`` fields are kept but not
    used by floe's engine (which has its own request planning, writes every object
    in one request, and never writes without preconditions).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from floe._floe import ChecksumAlgorithm, S3Options, Storage
from floe.config import (
    StorageConcurrencySettings,
    StorageRetriesSettings,
    StorageSettings,
    StorageTimeoutSettings,
    azure_store,
    gcs_store,
)

# Looked up here by the native module (``Storage.default_settings``).
from floe.config import _default_settings as _default_settings
from floe.credentials import (
    AzureRefreshableCredential,
    GcsBearerCredential,
    S3StaticCredentials,
    azure_credentials,
    gcs_credentials,
    s3_credentials,
)

__all__ = [
    "ChecksumAlgorithm",
    "S3Options",
    "Storage",
    "StorageConcurrencySettings",
    "StorageRetriesSettings",
    "StorageSettings",
    "StorageTimeoutSettings",
    "azure_storage",
    "azure_store",
    "gcs_storage",
    "gcs_store",
    "http_storage",
    "in_memory_storage",
    "local_filesystem_storage",
    "r2_storage",
    "redirect_storage",
    "s3_object_store_storage",
    "s3_storage",
    "tigris_storage",
]


# RFC 9110 `token`: the characters a header name may have.
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def _check_headers(*groups: dict[str, str] | None) -> None:
    """Refuses invalid extra headers when the storage is built (as Icechunk), not at
    the first request: a name that is not an RFC 9110 token or a value with control
    characters (CR, LF, NUL...) raises ``ValueError`` ("invalid HTTP header ...")."""
    for headers in groups:
        for name, value in (headers or {}).items():
            if not isinstance(name, str) or not _HEADER_NAME.match(name):
                raise ValueError(f"invalid HTTP header name {name!r}")
            if not isinstance(value, str) or any(
                (ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value
            ):
                raise ValueError(f"invalid HTTP header value for {name!r}")


def _follow_redirects(base_url: str, max_hops: int = 10, timeout_s: float = 60.0) -> str:
    """Where ``base_url`` leads: GETs it without following redirects and, while the
    answer is a redirect (3xx with ``Location``) to another ``http(s)://`` URL, goes
    on (at most ``max_hops`` requests of at most ``timeout_s`` seconds). Returns the
    first ``Location`` with another scheme (``s3://``, ``gs://``,
    ``http+icechunk://``...). Raises ``StorageError`` when a response is not a
    redirect, a server cannot be reached, or the hops run out."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from floe.exceptions import StorageError

    class _Stop(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
            return None  # hand the 3xx back as an HTTPError

    opener = urllib.request.build_opener(_Stop)
    url = base_url
    for _ in range(max_hops):
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            return url
        try:
            with opener.open(url, timeout=timeout_s) as response:
                raise StorageError(
                    f"redirect storage: {url} answered {response.status} without a redirect"
                )
        except urllib.error.HTTPError as e:
            location = e.headers.get("Location")
            if not (300 <= e.code < 400 and location):
                raise StorageError(
                    f"redirect storage: {url} answered {e.code} without a redirect"
                ) from e
            url = urllib.parse.urljoin(url, location)
        except urllib.error.URLError as e:
            raise StorageError(f"redirect storage: cannot reach {url}: {e.reason}") from e
    raise StorageError(f"redirect storage: more than {max_hops} redirects from {base_url}")


def redirect_storage(base_url: str) -> Storage:
    """A read-only repository found by following the HTTP redirects of ``base_url``
    (Icechunk's ``redirect_storage``): a service answers with a redirect (3xx,
    ``Location``) to where the repository lives, ``s3://bucket/prefix``,
    ``gs://...``, ``az://...``, ``file://...`` or ``http(s)+icechunk://host/path`` (a
    repository served over HTTP); redirects to plain ``http(s)://`` URLs are followed
    on. The redirects are followed here, once (Icechunk follows them on first use);
    the final storage is opened with credentials from the environment, and every
    write raises ``FloeError``. Raises ``StorageError`` when ``base_url`` does not
    redirect or cannot be reached. Pickles with the resolved location.

    ```python
    # not run: needs a service that answers with a redirect
    storage = floe.redirect_storage("https://catalog.example.org/repos/era5")
    repo = floe.Repository.open(storage)  # read-only
    ```
    """
    return Storage._new_redirect(base_url, _follow_redirects(base_url))


def s3_object_store_storage(
    *,
    bucket: str,
    prefix: str | None,
    region: str | None = None,
    endpoint_url: str | None = None,
    allow_http: bool = False,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    expires_after: datetime | None = None,
    anonymous: bool | None = None,
    from_env: bool | None = None,
    force_path_style: bool = False,
    read_headers: dict[str, str] | None = None,
    write_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Storage:
    """S3 through the Rust ``object_store`` crate (Icechunk's
    ``s3_object_store_storage``, its alternative to the AWS SDK client). floe's
    ``s3_storage`` already uses ``object_store``, so this is ``s3_storage`` with these
    arguments (no refreshable credentials, as Icechunk's).

    ```python
    storage = floe.s3_object_store_storage(
        bucket="my-bucket", prefix="era5", region="us-east-1", from_env=True
    )
    print(storage.url)  # s3://my-bucket/era5
    ```
    """
    return s3_storage(
        bucket=bucket,
        prefix=prefix,
        region=region,
        endpoint_url=endpoint_url,
        allow_http=allow_http,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        session_token=session_token,
        expires_after=expires_after,
        anonymous=anonymous,
        from_env=from_env,
        force_path_style=force_path_style,
        read_headers=read_headers,
        write_headers=write_headers,
        headers=headers,
    )


def in_memory_storage() -> Storage:
    """A repository in this process's memory: gone when the process ends, visible only
    through this ``Storage`` object, not picklable (``TypeError``), as Icechunk's
    ``in_memory_storage``. For tests and examples.

    ```python
    repo = floe.Repository.create(floe.in_memory_storage())
    ```
    """
    return Storage.new_in_memory()


def local_filesystem_storage(path: str) -> Storage:
    """A repository in the local directory ``path`` (created when missing), as
    Icechunk's ``local_filesystem_storage``. Unlike Icechunk's (which warns that it
    is not safe for concurrent commits), floe's compare-and-swap on refs holds
    across threads and processes on one machine.

    ```python
    repo = floe.Repository.open_or_create(floe.local_filesystem_storage("data/repo"))
    print(repo.storage.url)  # file:///.../data/repo
    ```

    :param path: a directory path (``~`` is not expanded; relative paths are
        relative to the working directory).
    """
    return Storage.new_local_filesystem(path)


def http_storage(
    base_url: str,
    opts: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Storage:
    """A read-only repository served over HTTP(S) at ``base_url``, as Icechunk's
    ``http_storage``.

    ```python
    # not run: needs a repository served over HTTP
    import xarray

    repo = floe.Repository.open(floe.http_storage("https://example.org/repos/era5"))
    ds = xarray.open_zarr(repo.readonly_session("main").store, consolidated=False)
    ```

    ``opts``: object_store ``ClientConfigKey`` options in snake case (``timeout``,
    ``allow_invalid_certificates``...); plain ``http://`` URLs are allowed. ``headers``:
    sent with every request (e.g. ``{"authorization": "Bearer ..."}``). Any write
    (creating a repository, committing, writable sessions' commits) raises
    ``FloeError`` ("read-only") before a request is sent. An unknown option or an
    invalid header raises ``FloeError`` here.
    """
    _check_headers(headers)
    return Storage.new_http(base_url, opts, headers)


def s3_storage(
    *,
    bucket: str,
    prefix: str | None,
    region: str | None = None,
    endpoint_url: str | None = None,
    allow_http: bool = False,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    expires_after: datetime | None = None,
    anonymous: bool | None = None,
    from_env: bool | None = None,
    get_credentials: Callable[[], S3StaticCredentials] | None = None,
    scatter_initial_credentials: bool = False,
    force_path_style: bool = False,
    network_stream_timeout_seconds: int = 60,
    requester_pays: bool = False,
    checksum_algorithm: ChecksumAlgorithm | None = None,
    legacy_rooted_keys: bool | None = None,
    read_headers: dict[str, str] | None = None,
    write_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Storage:
    """A repository under ``prefix`` of an S3 bucket, or of an S3-compatible server at
    ``endpoint_url`` (MinIO, Ceph...), with Icechunk 2.3.0's ``s3_storage``
    arguments.

    ```python
    # not run: needs credentials for the bucket
    storage = floe.s3_storage(bucket="my-bucket", prefix="era5", region="us-east-1")
    public = floe.s3_storage(bucket="open-data", prefix="repo", anonymous=True)
    minio = floe.s3_storage(
        bucket="b", prefix="r", endpoint_url="http://localhost:9000", allow_http=True,
        access_key_id="minioadmin", secret_access_key="minioadmin",
    )
    repo = floe.Repository.open_or_create(storage)
    ```

    Credentials (see ``floe.credentials.s3_credentials`` for how they combine):
    ``access_key_id`` + ``secret_access_key`` (+ ``session_token``), ``anonymous=True``
    (unsigned), ``get_credentials`` (refreshed when expired;
    ``scatter_initial_credentials`` fetches the first now), or from the environment
    (``AWS_*``, the default). With from-environment credentials, unset ``region`` and
    ``endpoint_url`` come from ``AWS_REGION`` / ``AWS_ENDPOINT_URL`` too.

    ``allow_http`` permits ``http://`` endpoints; ``force_path_style`` sends
    ``endpoint/bucket/key`` (implied for IP-address and ``localhost`` endpoints);
    ``network_stream_timeout_seconds`` fails a response that stalls that long (0:
    never); ``requester_pays`` sends ``x-amz-request-payer``. ``headers``,
    ``read_headers`` and ``write_headers`` are sent with every request (object_store
    has one header set per client; on a name clash write, then read headers win).

    ``checksum_algorithm=ChecksumAlgorithm.Sha256`` sends a SHA-256 checksum with
    every upload (``x-amz-checksum-sha256``), which S3 verifies before storing it.

    Raises ``ValueError`` for conflicting credential arguments, another
    ``checksum_algorithm`` (floe's S3 client computes SHA-256 only) or
    ``legacy_rooted_keys=True`` (not supported); ``FloeError`` for options the client
    rejects.
    """
    _check_headers(headers, read_headers, write_headers)
    credentials = s3_credentials(
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        session_token=session_token,
        expires_after=expires_after,
        anonymous=anonymous,
        from_env=from_env,
        get_credentials=get_credentials,
        scatter_initial_credentials=scatter_initial_credentials,
    )
    options = S3Options(
        region=region,
        endpoint_url=endpoint_url,
        allow_http=allow_http,
        anonymous=bool(anonymous),
        force_path_style=force_path_style,
        network_stream_timeout_seconds=network_stream_timeout_seconds,
        requester_pays=requester_pays,
        checksum_algorithm=checksum_algorithm,
    )
    return Storage.new_s3(
        options,
        bucket,
        prefix,
        credentials,
        legacy_rooted_keys,
        read_headers=read_headers,
        write_headers=write_headers,
        headers=headers,
    )


def tigris_storage(
    *,
    bucket: str,
    prefix: str | None,
    region: str | None = None,
    endpoint_url: str | None = None,
    use_weak_consistency: bool = False,
    allow_http: bool = False,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    expires_after: datetime | None = None,
    anonymous: bool | None = None,
    from_env: bool | None = None,
    get_credentials: Callable[[], S3StaticCredentials] | None = None,
    scatter_initial_credentials: bool = False,
    network_stream_timeout_seconds: int = 60,
    checksum_algorithm: ChecksumAlgorithm | None = None,
    legacy_rooted_keys: bool | None = None,
    read_headers: dict[str, str] | None = None,
    write_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Storage:
    """A repository in a Tigris bucket: S3 at ``https://t3.storage.dev`` (or
    ``endpoint_url``) with Tigris' consistency headers (``X-Tigris-Regions: <region>``,
    ``X-Tigris-Consistent: true``, ``Cache-Control: no-cache``), which need ``region``
    (``ValueError`` without it). ``use_weak_consistency=True`` drops them and makes the
    storage read-only (reads from the nearest region may be stale). Other arguments as
    for ``s3_storage``.

    ```python
    storage = floe.tigris_storage(
        bucket="my-bucket", prefix="era5", region="auto", from_env=True
    )
    ```
    """
    _check_headers(headers, read_headers, write_headers)
    credentials = s3_credentials(
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        session_token=session_token,
        expires_after=expires_after,
        anonymous=anonymous,
        from_env=from_env,
        get_credentials=get_credentials,
        scatter_initial_credentials=scatter_initial_credentials,
    )
    options = S3Options(
        region=region,
        endpoint_url=endpoint_url,
        allow_http=allow_http,
        anonymous=bool(anonymous),
        network_stream_timeout_seconds=network_stream_timeout_seconds,
        checksum_algorithm=checksum_algorithm,
    )
    return Storage.new_tigris(
        options,
        bucket,
        prefix,
        use_weak_consistency,
        credentials,
        legacy_rooted_keys,
        read_headers=read_headers,
        write_headers=write_headers,
        headers=headers,
    )


def r2_storage(
    *,
    bucket: str | None = None,
    prefix: str | None = None,
    account_id: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    allow_http: bool = False,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    expires_after: datetime | None = None,
    anonymous: bool | None = None,
    from_env: bool | None = None,
    get_credentials: Callable[[], S3StaticCredentials] | None = None,
    scatter_initial_credentials: bool = False,
    network_stream_timeout_seconds: int = 60,
    checksum_algorithm: ChecksumAlgorithm | None = None,
    legacy_rooted_keys: bool | None = None,
    read_headers: dict[str, str] | None = None,
    write_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Storage:
    """A repository in a Cloudflare R2 bucket: S3 at
    ``https://<account_id>.r2.cloudflarestorage.com`` (or ``endpoint_url``; one of the
    two is required, else ``ValueError``), region ``auto`` unless given, path-style
    requests. Other arguments as for ``s3_storage``.

    ```python
    storage = floe.r2_storage(
        bucket="my-bucket", prefix="era5", account_id="my-account", from_env=True
    )
    ```
    """
    _check_headers(headers, read_headers, write_headers)
    credentials = s3_credentials(
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        session_token=session_token,
        expires_after=expires_after,
        anonymous=anonymous,
        from_env=from_env,
        get_credentials=get_credentials,
        scatter_initial_credentials=scatter_initial_credentials,
    )
    options = S3Options(
        region=region,
        endpoint_url=endpoint_url,
        allow_http=allow_http,
        anonymous=bool(anonymous),
        network_stream_timeout_seconds=network_stream_timeout_seconds,
        checksum_algorithm=checksum_algorithm,
    )
    return Storage.new_r2(
        options,
        bucket,
        prefix,
        account_id,
        credentials,
        legacy_rooted_keys,
        read_headers=read_headers,
        write_headers=write_headers,
        headers=headers,
    )


def gcs_storage(
    *,
    bucket: str,
    prefix: str | None,
    service_account_file: str | None = None,
    service_account_key: str | None = None,
    application_credentials: str | None = None,
    bearer_token: str | None = None,
    anonymous: bool | None = None,
    from_env: bool | None = None,
    config: dict[str, str] | None = None,
    get_credentials: Callable[[], GcsBearerCredential] | None = None,
    scatter_initial_credentials: bool = False,
    read_headers: dict[str, str] | None = None,
    write_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Storage:
    """A repository under ``prefix`` of a Google Cloud Storage bucket, with Icechunk
    2.3.0's ``gcs_storage`` arguments.

    ```python
    storage = floe.gcs_storage(bucket="my-bucket", prefix="era5")  # credentials from env
    public = floe.gcs_storage(bucket="public-bucket", prefix="era5", anonymous=True)
    # a service account: floe.gcs_storage(..., service_account_file="/secrets/sa.json")
    ```

    Credentials (see ``floe.credentials.gcs_credentials``): a service account file or
    key, an application credentials file, a bearer token, ``anonymous=True``,
    ``get_credentials`` (returning ``GcsBearerCredential``), or from the environment
    (the default; ``STORAGE_EMULATOR_HOST`` then points at an emulator, reached
    unsigned). ``config``: object_store ``GoogleConfigKey`` options
    (``google_base_url``...). Conditional writes match generations, as GCS requires.
    Extra headers raise ``ValueError`` (not supported on GCS by floe); an unknown
    ``config`` key raises ``FloeError``.
    """
    _check_headers(headers, read_headers, write_headers)
    credentials = gcs_credentials(
        service_account_file=service_account_file,
        service_account_key=service_account_key,
        application_credentials=application_credentials,
        bearer_token=bearer_token,
        from_env=from_env,
        anonymous=anonymous,
        get_credentials=get_credentials,
        scatter_initial_credentials=scatter_initial_credentials,
    )
    return Storage.new_gcs(
        bucket,
        prefix,
        credentials,
        config=config,
        read_headers=read_headers,
        write_headers=write_headers,
        headers=headers,
    )


def azure_storage(
    *,
    account: str,
    container: str,
    prefix: str,
    access_key: str | None = None,
    sas_token: str | None = None,
    bearer_token: str | None = None,
    from_env: bool | None = None,
    anonymous: bool | None = None,
    config: dict[str, str] | None = None,
    get_credentials: Callable[[], AzureRefreshableCredential] | None = None,
    scatter_initial_credentials: bool = False,
) -> Storage:
    """A repository under ``prefix`` of container ``container`` in Azure Blob Storage
    account ``account``, with Icechunk 2.3.0's ``azure_storage`` arguments.

    ```python
    storage = floe.azure_storage(
        account="myaccount", container="data", prefix="era5", from_env=True
    )
    ```

    Credentials (see ``floe.credentials.azure_credentials``): an account key, a SAS
    token, a bearer token, ``anonymous=True``, ``get_credentials`` (returning an
    ``AzureRefreshableCredential``; a floe addition to Icechunk's signature), or from
    the environment (the default: ``AZURE_STORAGE_ACCOUNT_KEY``...;
    ``AZURE_STORAGE_USE_EMULATOR=true`` with ``AZURITE_BLOB_STORAGE_URL`` reaches
    Azurite). ``config``: object_store ``AzureConfigKey`` options
    (``azure_storage_use_emulator``, ``azure_storage_endpoint``...); an unknown key
    raises ``FloeError``.
    """
    credentials = azure_credentials(
        access_key=access_key,
        sas_token=sas_token,
        bearer_token=bearer_token,
        from_env=from_env,
        anonymous=anonymous,
        get_credentials=get_credentials,
        scatter_initial_credentials=scatter_initial_credentials,
    )
    return Storage.new_azure_blob(account, container, prefix, credentials, config=config)
