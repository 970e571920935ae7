"""Credentials for storage backends, as Icechunk 2.3.0's ``icechunk.credentials``.

Classes (from the native module): ``S3StaticCredentials``, ``S3Credentials``
(``FromEnv``, ``Anonymous``, ``Static``, ``Refreshable``), ``GcsBearerCredential``,
``GcsStaticCredentials``, ``GcsCredentials``, ``AzureRefreshableCredential``,
``AzureStaticCredentials``, ``AzureCredentials`` and ``Credentials`` (one credential of
a virtual chunk container). Helpers choose the variant from keyword arguments:
``s3_credentials``, ``gcs_credentials``, ``azure_credentials`` (and their
``*_static_``, ``*_anonymous_``, ``*_from_env_``, ``*_refreshable_`` forms) and
``containers_credentials``.

Refreshable credentials
    ``get_credentials`` is a picklable function of no arguments returning
    ``S3StaticCredentials`` (S3), ``GcsBearerCredential`` (GCS) or an
    ``AzureRefreshableCredential`` (Azure). The storage calls it when it first needs to
    sign a request and again whenever the credential it holds is past its
    ``expires_after`` (a credential without one serves until the process ends); calls
    are made one at a time, in a worker thread, with the GIL. Each storage object keeps
    its own credential: an unpickled copy (a dask worker's) calls the function again,
    unless it was built with ``scatter_initial_credentials=True``, which calls the
    function once at construction and sends that first credential with every pickle
    (so the secrets travel with it, as in Icechunk). An exception raised by the
    function, or a result of the wrong type, fails the storage operation that needed
    the credential with ``FloeError`` naming it.

Pickling
    Every class pickles with its fields, secrets included (a storage sent to a worker
    must sign requests there). Prefer ``from_env`` or refreshable credentials when the
    pickle may be stored or logged.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from datetime import datetime

from floe._floe import (
    AzureCredentials,
    AzureRefreshableCredential,
    AzureStaticCredentials,
    Credentials,
    GcsBearerCredential,
    GcsCredentials,
    GcsStaticCredentials,
    S3Credentials,
    S3StaticCredentials,
)

__all__ = [
    "AnyAzureCredential",
    "AnyAzureStaticCredential",
    "AnyCredential",
    "AnyGcsCredential",
    "AnyGcsStaticCredential",
    "AnyS3Credential",
    "AzureCredentials",
    "AzureRefreshableCredential",
    "AzureStaticCredentials",
    "Credentials",
    "GcsBearerCredential",
    "GcsCredentials",
    "GcsStaticCredentials",
    "HttpAccess",
    "LocalFileSystemAccess",
    "S3Credentials",
    "S3StaticCredentials",
    "azure_anonymous_credentials",
    "azure_credentials",
    "azure_from_env_credentials",
    "azure_refreshable_credentials",
    "azure_static_credentials",
    "containers_credentials",
    "gcs_anonymous_credentials",
    "gcs_credentials",
    "gcs_from_env_credentials",
    "gcs_refreshable_credentials",
    "gcs_static_credentials",
    "s3_anonymous_credentials",
    "s3_credentials",
    "s3_from_env_credentials",
    "s3_refreshable_credentials",
    "s3_static_credentials",
]

#: Any S3 credential variant.
AnyS3Credential = (
    S3Credentials.Static
    | S3Credentials.Anonymous
    | S3Credentials.FromEnv
    | S3Credentials.Refreshable
)
#: Any fixed GCS credential.
AnyGcsStaticCredential = (
    GcsStaticCredentials.ServiceAccount
    | GcsStaticCredentials.ServiceAccountKey
    | GcsStaticCredentials.ApplicationCredentials
    | GcsStaticCredentials.BearerToken
)
#: Any GCS credential variant.
AnyGcsCredential = (
    GcsCredentials.Anonymous
    | GcsCredentials.FromEnv
    | GcsCredentials.Static
    | GcsCredentials.Refreshable
)
#: Any fixed Azure credential.
AnyAzureStaticCredential = (
    AzureStaticCredentials.AccessKey
    | AzureStaticCredentials.SasToken
    | AzureStaticCredentials.BearerToken
)
#: Any Azure credential variant.
AnyAzureCredential = (
    AzureCredentials.FromEnv
    | AzureCredentials.Anonymous
    | AzureCredentials.Static
    | AzureCredentials.Refreshable
)
#: Any credential of a virtual chunk container.
AnyCredential = (
    Credentials.S3
    | Credentials.Gcs
    | Credentials.Azure
    | Credentials.LocalFileSystemAccess
    | Credentials.HttpAccess
)

#: Access to a ``file://`` virtual chunk container (no credential needed).
LocalFileSystemAccess = Credentials.LocalFileSystemAccess()
#: Access to an ``http(s)://`` virtual chunk container (no credential needed).
HttpAccess = Credentials.HttpAccess()


def _gcs_bearer_credential(bearer: str, expires_after: datetime | None) -> GcsBearerCredential:
    """Unpickles a ``GcsBearerCredential`` (its constructor takes ``expires_after`` by
    keyword only)."""
    return GcsBearerCredential(bearer, expires_after=expires_after)


def _azure_refreshable_credential(
    kind: str, secret: str, expires_after: datetime | None
) -> AzureRefreshableCredential:
    """Unpickles an ``AzureRefreshableCredential`` of ``kind`` (``access_key``,
    ``sas_token`` or ``bearer_token``)."""
    cls = {
        "access_key": AzureRefreshableCredential.AccessKey,
        "sas_token": AzureRefreshableCredential.SasToken,
        "bearer_token": AzureRefreshableCredential.BearerToken,
    }[kind]
    return cls(secret, expires_after=expires_after)


def _pickled(get_credentials: Callable[[], object]) -> bytes:
    """``get_credentials`` pickled; raises ``pickle.PicklingError`` (or the error the
    pickler raises) when it cannot be: it must be importable by reference in the
    processes that use the storage, or a picklable callable object."""
    return pickle.dumps(get_credentials)


# --- S3 ----------------------------------------------------------------------------


def s3_refreshable_credentials(
    get_credentials: Callable[[], S3StaticCredentials],
    scatter_initial_credentials: bool = False,
) -> S3Credentials.Refreshable:
    """S3 credentials fetched by ``get_credentials`` (a picklable function returning
    ``S3StaticCredentials``) whenever the storage has none or they expired.

    With ``scatter_initial_credentials=True`` the function is called now, and its
    result serves every copy of the storage (pickles included) until it expires; an
    exception it raises propagates from here. See the module documentation.

    ```python
    import datetime

    def fetch():  # module level, so that it pickles by reference
        return floe.S3StaticCredentials(
            access_key_id="AKIA...",
            secret_access_key="...",
            expires_after=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1),
        )

    credentials = floe.s3_refreshable_credentials(fetch)
    storage = floe.s3_storage(bucket="my-bucket", prefix="era5", get_credentials=fetch)
    ```
    """
    current = get_credentials() if scatter_initial_credentials else None
    return S3Credentials.Refreshable(_pickled(get_credentials), current)


def s3_static_credentials(
    *,
    access_key_id: str,
    secret_access_key: str,
    session_token: str | None = None,
    expires_after: datetime | None = None,
) -> S3Credentials.Static:
    """A fixed S3 access key (``session_token`` for temporary keys; ``expires_after``
    is informative for static keys).

    ```python
    credentials = floe.s3_static_credentials(
        access_key_id="minioadmin", secret_access_key="minioadmin"
    )
    print(credentials)  # S3Credentials.Static(...)
    ```
    """
    return S3Credentials.Static(
        S3StaticCredentials(
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
            expires_after=expires_after,
        )
    )


def s3_anonymous_credentials() -> S3Credentials.Anonymous:
    """Unsigned S3 requests (public buckets).

    ```python
    credentials = floe.containers_credentials(
        {"s3://public-bucket/": floe.s3_anonymous_credentials()}
    )
    ```
    """
    return S3Credentials.Anonymous()


def s3_from_env_credentials() -> S3Credentials.FromEnv:
    """S3 credentials from the environment (``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``...), read by the process that uses
    the storage.

    ```python
    credentials = floe.containers_credentials({"s3://my-bucket/": floe.s3_from_env_credentials()})
    ```
    """
    return S3Credentials.FromEnv()


def s3_credentials(
    *,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    expires_after: datetime | None = None,
    anonymous: bool | None = None,
    from_env: bool | None = None,
    get_credentials: Callable[[], S3StaticCredentials] | None = None,
    scatter_initial_credentials: bool = False,
) -> AnyS3Credential:
    """The S3 credential variant these arguments describe, as Icechunk chooses it:

    - nothing (or only ``from_env=True``): ``FromEnv``;
    - ``anonymous=True`` alone: ``Anonymous``;
    - ``get_credentials`` alone: ``Refreshable``;
    - ``access_key_id`` and ``secret_access_key`` (with optional ``session_token`` and
      ``expires_after``): ``Static``.

    Raises ``ValueError`` for any other combination (keys with ``from_env``,
    ``anonymous`` with keys, a key without its secret...).

    ```python
    assert isinstance(floe.s3_credentials(), floe.S3Credentials.FromEnv)
    assert isinstance(floe.s3_credentials(anonymous=True), floe.S3Credentials.Anonymous)
    static = floe.s3_credentials(access_key_id="AKIA...", secret_access_key="...")
    assert isinstance(static, floe.S3Credentials.Static)
    ```
    """
    no_keys = (
        access_key_id is None
        and secret_access_key is None
        and session_token is None
        and expires_after is None
    )
    if (from_env is None or from_env) and no_keys and not anonymous and get_credentials is None:
        return s3_from_env_credentials()
    if anonymous and no_keys and not from_env and get_credentials is None:
        return s3_anonymous_credentials()
    if get_credentials is not None and no_keys and not from_env and not anonymous:
        return s3_refreshable_credentials(
            get_credentials, scatter_initial_credentials=scatter_initial_credentials
        )
    if (
        access_key_id
        and secret_access_key
        and not from_env
        and not anonymous
        and get_credentials is None
    ):
        return s3_static_credentials(
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
            expires_after=expires_after,
        )
    raise ValueError("Conflicting arguments to s3_credentials function")


# --- GCS ---------------------------------------------------------------------------


def gcs_static_credentials(
    *,
    service_account_file: str | None = None,
    service_account_key: str | None = None,
    application_credentials: str | None = None,
    bearer_token: str | None = None,
) -> AnyGcsStaticCredential:
    """A fixed GCS credential: the first given of a service account file (path), a
    service account key (JSON text), an application credentials file (path) or a
    bearer token. Raises ``ValueError`` when none is given.

    ```python
    credentials = floe.gcs_static_credentials(service_account_file="/secrets/sa.json")
    assert isinstance(credentials, floe.GcsStaticCredentials.ServiceAccount)
    ```
    """
    if service_account_file is not None:
        return GcsStaticCredentials.ServiceAccount(service_account_file)
    if service_account_key is not None:
        return GcsStaticCredentials.ServiceAccountKey(service_account_key)
    if application_credentials is not None:
        return GcsStaticCredentials.ApplicationCredentials(application_credentials)
    if bearer_token is not None:
        return GcsStaticCredentials.BearerToken(bearer_token)
    raise ValueError("Conflicting arguments to gcs_static_credentials function")


def gcs_refreshable_credentials(
    get_credentials: Callable[[], GcsBearerCredential],
    scatter_initial_credentials: bool = False,
) -> GcsCredentials.Refreshable:
    """GCS bearer tokens fetched by ``get_credentials`` (a picklable function returning
    ``GcsBearerCredential``) when missing or expired; ``scatter_initial_credentials``
    as for ``s3_refreshable_credentials``.

    ```python
    def fetch():  # module level, so that it pickles by reference
        return floe.GcsBearerCredential("ya29....")

    credentials = floe.gcs_refreshable_credentials(fetch)
    ```
    """
    current = get_credentials() if scatter_initial_credentials else None
    return GcsCredentials.Refreshable(_pickled(get_credentials), current)


def gcs_anonymous_credentials() -> GcsCredentials.Anonymous:
    """Unsigned GCS requests (public buckets, emulators).

    ```python
    credentials = floe.containers_credentials(
        {"gs://public-bucket/": floe.gcs_anonymous_credentials()}
    )
    ```
    """
    return GcsCredentials.Anonymous()


def gcs_from_env_credentials() -> GcsCredentials.FromEnv:
    """GCS credentials from the environment (``GOOGLE_*`` variables, application
    default credentials, the metadata server); ``STORAGE_EMULATOR_HOST`` points at an
    emulator.

    ```python
    credentials = floe.containers_credentials({"gs://my-bucket/": floe.gcs_from_env_credentials()})
    ```
    """
    return GcsCredentials.FromEnv()


def gcs_credentials(
    *,
    service_account_file: str | None = None,
    service_account_key: str | None = None,
    application_credentials: str | None = None,
    bearer_token: str | None = None,
    from_env: bool | None = None,
    anonymous: bool | None = None,
    get_credentials: Callable[[], GcsBearerCredential] | None = None,
    scatter_initial_credentials: bool = False,
) -> AnyGcsCredential:
    """The GCS credential variant these arguments describe, as Icechunk chooses it:
    ``anonymous=True`` wins; then with no fixed credential and ``from_env`` not
    ``False``: ``FromEnv``; a fixed credential (``from_env`` not ``True``): ``Static``;
    then ``get_credentials``: ``Refreshable``. Raises ``ValueError`` otherwise.

    ```python
    assert isinstance(floe.gcs_credentials(), floe.GcsCredentials.FromEnv)
    assert isinstance(floe.gcs_credentials(anonymous=True), floe.GcsCredentials.Anonymous)
    static = floe.gcs_credentials(service_account_file="/secrets/sa.json")
    assert isinstance(static, floe.GcsCredentials.Static)
    ```
    """
    if anonymous:
        return gcs_anonymous_credentials()
    fixed = (service_account_file, service_account_key, application_credentials, bearer_token)
    if (from_env is None or from_env) and all(f is None for f in fixed) and get_credentials is None:
        return gcs_from_env_credentials()
    if any(f is not None for f in fixed) and not from_env:
        return GcsCredentials.Static(
            gcs_static_credentials(
                service_account_file=service_account_file,
                service_account_key=service_account_key,
                application_credentials=application_credentials,
                bearer_token=bearer_token,
            )
        )
    if get_credentials is not None:
        return gcs_refreshable_credentials(
            get_credentials, scatter_initial_credentials=scatter_initial_credentials
        )
    raise ValueError("Conflicting arguments to gcs_credentials function")


# --- Azure -------------------------------------------------------------------------


def azure_static_credentials(
    *,
    access_key: str | None = None,
    sas_token: str | None = None,
    bearer_token: str | None = None,
) -> AnyAzureStaticCredential:
    """A fixed Azure credential: exactly one of a storage account key (base64), a SAS
    token (its query string) or a bearer token. Raises ``ValueError`` otherwise.

    ```python
    credentials = floe.azure_static_credentials(sas_token="sv=2024-...")
    assert isinstance(credentials, floe.AzureStaticCredentials.SasToken)
    ```
    """
    given = [c for c in (access_key, sas_token, bearer_token) if c is not None]
    if len(given) != 1:
        raise ValueError("Conflicting arguments to azure_static_credentials function")
    if access_key is not None:
        return AzureStaticCredentials.AccessKey(access_key)
    if sas_token is not None:
        return AzureStaticCredentials.SasToken(sas_token)
    return AzureStaticCredentials.BearerToken(given[0])


def azure_refreshable_credentials(
    get_credentials: Callable[[], AzureRefreshableCredential],
    scatter_initial_credentials: bool = False,
) -> AzureCredentials.Refreshable:
    """Azure credentials fetched by ``get_credentials`` (a picklable function returning
    an ``AzureRefreshableCredential``) when missing or expired;
    ``scatter_initial_credentials`` as for ``s3_refreshable_credentials``.

    ```python
    def fetch():  # module level, so that it pickles by reference
        return floe.AzureRefreshableCredential.BearerToken("eyJ0...")

    credentials = floe.azure_refreshable_credentials(fetch)
    ```
    """
    current = get_credentials() if scatter_initial_credentials else None
    return AzureCredentials.Refreshable(_pickled(get_credentials), current)


def azure_from_env_credentials() -> AzureCredentials.FromEnv:
    """Azure credentials from the environment (``AZURE_STORAGE_ACCOUNT_KEY``,
    ``AZURE_STORAGE_USE_EMULATOR``, managed identity, the Azure CLI...).

    ```python
    credentials = floe.containers_credentials({"az://data/": floe.azure_from_env_credentials()})
    ```
    """
    return AzureCredentials.FromEnv()


def azure_anonymous_credentials() -> AzureCredentials.Anonymous:
    """Unsigned Azure requests (public containers).

    ```python
    credentials = floe.containers_credentials({"az://public/": floe.azure_anonymous_credentials()})
    ```
    """
    return AzureCredentials.Anonymous()


def azure_credentials(
    *,
    access_key: str | None = None,
    sas_token: str | None = None,
    bearer_token: str | None = None,
    from_env: bool | None = None,
    anonymous: bool | None = None,
    get_credentials: Callable[[], AzureRefreshableCredential] | None = None,
    scatter_initial_credentials: bool = False,
) -> AnyAzureCredential:
    """The Azure credential variant these arguments describe, as Icechunk chooses it:
    ``anonymous=True`` wins, then ``get_credentials`` (``Refreshable``), then with no
    fixed credential and ``from_env`` not ``False``: ``FromEnv``; a fixed credential
    (``from_env`` not ``True``): ``Static``. Raises ``ValueError`` otherwise.

    ```python
    assert isinstance(floe.azure_credentials(), floe.AzureCredentials.FromEnv)
    static = floe.azure_credentials(access_key="bXlrZXk=")
    assert isinstance(static, floe.AzureCredentials.Static)
    ```
    """
    if anonymous:
        return azure_anonymous_credentials()
    if get_credentials is not None:
        return azure_refreshable_credentials(
            get_credentials, scatter_initial_credentials=scatter_initial_credentials
        )
    fixed = (access_key, sas_token, bearer_token)
    if (from_env is None or from_env) and all(f is None for f in fixed):
        return azure_from_env_credentials()
    if any(f is not None for f in fixed) and not from_env:
        return AzureCredentials.Static(
            azure_static_credentials(
                access_key=access_key, sas_token=sas_token, bearer_token=bearer_token
            )
        )
    raise ValueError("Conflicting arguments to azure_credentials function")


def containers_credentials(
    m: Mapping[str, AnyS3Credential | AnyGcsCredential | AnyAzureCredential | AnyCredential | None],
) -> dict[str, AnyCredential | None]:
    """Credentials of virtual chunk containers, by container URL prefix: each S3, GCS
    or Azure credential wrapped in ``Credentials.S3`` / ``.Gcs`` / ``.Azure``;
    ``LocalFileSystemAccess``, ``HttpAccess`` and ``None`` kept as they are. Raises
    ``ValueError`` for any other value.

    Pass the result as ``authorize_virtual_chunk_access`` when opening a repository:
    it authorizes reading from those containers, and no other (``None`` as a value is
    deprecated, as in Icechunk 2.3.0: give ``Credentials.LocalFileSystemAccess()`` or
    ``Credentials.HttpAccess()`` for containers that need no secret).

    ```python
    import os

    data = os.path.abspath("netcdf")
    credentials = floe.containers_credentials({
        "s3://public-bucket/": floe.s3_anonymous_credentials(),
        f"file://{data}/": floe.Credentials.LocalFileSystemAccess(),  # no secret
    })
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(f"file://{data}/", floe.local_filesystem_store(data))
    )
    repo = repo.reopen(config, authorize_virtual_chunk_access=credentials)
    ```
    """
    out: dict[str, AnyCredential | None] = {}
    for prefix, cred in m.items():
        if cred is None or isinstance(cred, Credentials):
            out[prefix] = cred
        elif isinstance(cred, S3Credentials):
            out[prefix] = Credentials.S3(cred)
        elif isinstance(cred, GcsCredentials):
            out[prefix] = Credentials.Gcs(cred)
        elif isinstance(cred, AzureCredentials):
            out[prefix] = Credentials.Azure(cred)
        else:
            raise ValueError(f"Unknown credential type {type(cred)}")
    return out
