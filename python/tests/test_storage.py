"""Storage constructors and credentials with Icechunk 2.3.0's names: options,
credential selection, pickling, refreshable credentials (called, cached, re-called on
expiry, carried by pickles only when scattered), and repositories on real local
servers: the S3 test server (AWS_ENDPOINT_URL / FLOE_TEST_S3_BUCKET), Azurite
(FLOE_TEST_AZURE_CONTAINER) and gcp-storage-emulator (FLOE_TEST_GCS_BUCKET), which
.ci/s3_server.sh and .ci/cloud_emulators.sh start. Server tests skip without their
server, and fail instead when CI=true."""

from __future__ import annotations

import datetime
import functools
import http.server
import os
import pickle
import shutil
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest
import zarr

import floe
from floe.credentials import (
    AzureCredentials,
    AzureRefreshableCredential,
    AzureStaticCredentials,
    Credentials,
    GcsBearerCredential,
    GcsCredentials,
    GcsStaticCredentials,
    HttpAccess,
    S3Credentials,
    S3StaticCredentials,
)

IN_CI = os.environ.get("CI") in ("true", "1")


def need(var: str) -> str:
    """The value of environment variable var; skips the test without it (fails in
    CI)."""
    value = os.environ.get(var)
    if not value:
        if IN_CI:
            pytest.fail(f"{var} is required when CI=true (.ci/run starts the servers)")
        pytest.skip(f"{var} is not set (start the servers with .ci/run)")
    return value


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:12]}"


# --- options and constructors -------------------------------------------------------


def test_s3_options_defaults_fields_equality_and_pickle():
    o = floe.S3Options()
    assert (o.region, o.endpoint_url, o.allow_http, o.anonymous, o.force_path_style) == (
        None, None, False, False, False)
    assert o.network_stream_timeout_seconds is None and o.requester_pays is False
    o2 = floe.S3Options(region="eu-west-1", endpoint_url="http://127.0.0.1:1", allow_http=True,
                        force_path_style=True, network_stream_timeout_seconds=5)
    assert o2 != o
    o.region = "eu-west-1"
    assert o.region == "eu-west-1"
    assert pickle.loads(pickle.dumps(o2)) == o2
    assert "region='eu-west-1'" in repr(o2) or 'region="eu-west-1"' in repr(o2)
    with pytest.raises(TypeError, match="checksum_algorithm"):
        floe.S3Options(checksum_algorithm=object())
    with pytest.raises(ValueError, match="checksum_algorithm"):
        floe.S3Options(checksum_algorithm=floe.ChecksumAlgorithm.Crc32)


def test_constructors_name_their_backend_in_the_url():
    s3 = floe.s3_storage(bucket="b", prefix="p/q", region="us-east-1", anonymous=True)
    assert s3.url == "s3://b/p/q"
    gcs = floe.gcs_storage(bucket="g", prefix="r", anonymous=True)
    assert gcs.url == "gs://g/r"
    az = floe.azure_storage(account="acct", container="c", prefix="x", access_key="a2V5")
    assert az.url == "az://c/x"
    r2 = floe.r2_storage(bucket="b", prefix="p", account_id="abc", anonymous=True)
    assert r2.url == "s3://b/p"
    tig = floe.tigris_storage(bucket="b", prefix="p", region="auto", anonymous=True)
    assert tig.url == "s3://b/p"
    h = floe.http_storage("http://127.0.0.1:9/repo/")
    assert h.url == "http://127.0.0.1:9/repo"
    assert isinstance(floe.Storage.new_s3(floe.S3Options(region="us-east-1"), "b", "p",
                                          floe.s3_anonymous_credentials()), floe.Storage)


def test_constructor_argument_errors():
    with pytest.raises(ValueError, match="endpoint_url or account_id"):
        floe.r2_storage(bucket="b", prefix="p", anonymous=True)
    with pytest.raises(ValueError, match="region"):
        floe.tigris_storage(bucket="b", prefix="p", anonymous=True)
    with pytest.raises(ValueError, match="legacy_rooted_keys"):
        floe.s3_storage(bucket="b", prefix="p", anonymous=True, legacy_rooted_keys=True)
    with pytest.raises(ValueError, match="Conflicting"):
        floe.s3_storage(bucket="b", prefix="p", access_key_id="a", secret_access_key="s",
                        anonymous=True)
    with pytest.raises(floe.FloeError, match="no_such_option"):
        floe.gcs_storage(bucket="g", prefix="p", anonymous=True, config={"no_such_option": "1"})
    with pytest.raises(ValueError, match="invalid HTTP header"):
        floe.http_storage("http://127.0.0.1:9/r", headers={"bad header": "x"})


def test_settings_classes_compare_pickle_and_refuse_unsafe_writes():
    s = floe.StorageSettings(
        retries=floe.StorageRetriesSettings(max_tries=2, initial_backoff_ms=10),
        timeouts=floe.StorageTimeoutSettings(connect_timeout_ms=500),
        concurrency=floe.StorageConcurrencySettings(max_concurrent_requests_for_object=4),
    )
    assert s == pickle.loads(pickle.dumps(s))
    assert s != floe.StorageSettings()
    assert s.retries.max_tries == 2 and s.timeouts.read_timeout_ms is None
    assert "max_tries=2" in repr(s)
    defaults = floe.in_memory_storage().default_settings()
    assert defaults.retries == floe.StorageRetriesSettings(11, 100, 15_000)
    assert defaults.concurrency == floe.StorageConcurrencySettings()
    with pytest.raises(ValueError, match="unsafe_use_conditional_update"):
        floe.StorageSettings(unsafe_use_conditional_update=False)


# --- credentials --------------------------------------------------------------------


def make_creds() -> S3StaticCredentials:
    return S3StaticCredentials("id", "secret")


def test_s3_credentials_choose_the_variant_icechunk_chooses():
    assert isinstance(floe.s3_credentials(), S3Credentials.FromEnv)
    assert isinstance(floe.s3_credentials(anonymous=True), S3Credentials.Anonymous)
    static = floe.s3_credentials(access_key_id="a", secret_access_key="b", session_token="t")
    assert isinstance(static, S3Credentials.Static)
    assert static._0 == S3StaticCredentials("a", "b", "t")
    refresh = floe.s3_credentials(get_credentials=make_creds)
    assert isinstance(refresh, S3Credentials.Refreshable) and refresh.current is None
    scattered = floe.s3_credentials(get_credentials=make_creds, scatter_initial_credentials=True)
    assert scattered.current == make_creds()
    assert pickle.loads(bytes(scattered.pickled_function)) is make_creds
    for bad in (dict(access_key_id="a"), dict(access_key_id="a", secret_access_key="b", from_env=True),
                dict(anonymous=True, get_credentials=make_creds)):
        with pytest.raises(ValueError, match="Conflicting"):
            floe.s3_credentials(**bad)


def test_gcs_and_azure_credentials():
    assert isinstance(floe.gcs_credentials(), GcsCredentials.FromEnv)
    assert isinstance(floe.gcs_credentials(anonymous=True), GcsCredentials.Anonymous)
    st = floe.gcs_credentials(bearer_token="tok")
    assert isinstance(st, GcsCredentials.Static) and st._0 == GcsStaticCredentials.BearerToken("tok")
    assert isinstance(floe.gcs_static_credentials(service_account_file="/f"),
                      GcsStaticCredentials.ServiceAccount)
    with pytest.raises(ValueError):
        floe.gcs_static_credentials()
    assert isinstance(floe.azure_credentials(), AzureCredentials.FromEnv)
    assert isinstance(floe.azure_credentials(sas_token="sv=1"), AzureCredentials.Static)
    with pytest.raises(ValueError, match="Conflicting"):
        floe.azure_static_credentials(access_key="a", sas_token="b")
    with pytest.raises(ValueError, match="Conflicting"):
        floe.azure_credentials(access_key="a", from_env=True)


def test_containers_credentials_wrap_each_family():
    out = floe.containers_credentials({
        "s3://a/": floe.s3_anonymous_credentials(),
        "gs://b/": floe.gcs_anonymous_credentials(),
        "az://c/": floe.azure_anonymous_credentials(),
        "https://d/": HttpAccess,
        "file:///e/": None,
    })
    assert isinstance(out["s3://a/"], Credentials.S3)
    assert isinstance(out["gs://b/"], Credentials.Gcs)
    assert isinstance(out["az://c/"], Credentials.Azure)
    assert out["https://d/"] == HttpAccess and out["file:///e/"] is None
    with pytest.raises(ValueError, match="Unknown credential"):
        floe.containers_credentials({"x": 42})


@pytest.mark.parametrize("cred", [
    S3StaticCredentials("a", "b", "t", datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)),
    S3Credentials.FromEnv(),
    S3Credentials.Anonymous(),
    S3Credentials.Static(S3StaticCredentials("a", "b")),
    S3Credentials.Refreshable(pickle.dumps(make_creds), make_creds()),
    GcsBearerCredential("tok", expires_after=datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)),
    GcsCredentials.Static(GcsStaticCredentials.ServiceAccountKey("{}")),
    GcsCredentials.Refreshable(pickle.dumps(make_creds)),
    AzureRefreshableCredential.SasToken("sv=1", expires_after=None),
    AzureCredentials.Static(AzureStaticCredentials.AccessKey("a2V5")),
    Credentials.S3(S3Credentials.Anonymous()),
    Credentials.LocalFileSystemAccess(),
])
def test_every_credential_pickles_to_an_equal_value(cred):
    again = pickle.loads(pickle.dumps(cred))
    assert type(again) is type(cred)
    assert again == cred


def test_secrets_are_not_shown_in_reprs():
    c = S3StaticCredentials("my-id", "my-secret", "my-token")
    assert "my-secret" not in repr(c) and "my-token" not in repr(c)
    assert "access_key_id: my-i****" in repr(c)
    assert "tok" not in repr(GcsBearerCredential("tok"))


def test_storage_pickles_as_its_recipe_and_memory_storage_refuses(tmp_path):
    s = floe.s3_storage(bucket="b", prefix="p", region="eu-west-1",
                        access_key_id="id", secret_access_key="secret")
    again = pickle.loads(pickle.dumps(s))
    assert again.url == "s3://b/p"
    local = floe.local_filesystem_storage(str(tmp_path / "r"))
    assert pickle.loads(pickle.dumps(local)).url == local.url
    with pytest.raises(TypeError, match="in-memory"):
        pickle.dumps(floe.in_memory_storage())
    # From-environment credentials carry no secret: the pickle holds no key.
    env = floe.s3_storage(bucket="b", prefix="p", region="us-east-1", from_env=True)
    assert b"secret" not in pickle.dumps(env)


# --- the S3 test server -------------------------------------------------------------


def s3_env() -> dict:
    bucket = need("FLOE_TEST_S3_BUCKET")
    return dict(
        bucket=bucket,
        endpoint=os.environ["AWS_ENDPOINT_URL"],
        key=os.environ["AWS_ACCESS_KEY_ID"],
        secret=os.environ["AWS_SECRET_ACCESS_KEY"],
    )


class CountingCredentials:
    """Returns the test server's keys, appending a line to a file per call (a file,
    so calls in unpickled copies count too); the first expired_calls calls return
    already-expired keys."""

    def __init__(self, path: Path, key: str, secret: str, expired_calls: int = 0):
        self.path, self.key, self.secret, self.expired_calls = path, key, secret, expired_calls

    def calls(self) -> int:
        return len(self.path.read_text()) if self.path.exists() else 0

    def __call__(self) -> S3StaticCredentials:
        n = self.calls()
        self.path.write_text("." * (n + 1))
        expires = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
                   if n < self.expired_calls else None)
        return S3StaticCredentials(self.key, self.secret, expires_after=expires)


def s3_with(env: dict, prefix: str, **kw) -> floe.Storage:
    return floe.s3_storage(bucket=env["bucket"], prefix=prefix, endpoint_url=env["endpoint"],
                           region="us-east-1", allow_http=True, **kw)


def write_array(repo: floe.Repository) -> str:
    session = repo.writable_session("main")
    root = zarr.group(store=session.store)
    a = root.create_array("a", shape=(4,), chunks=(2,), dtype="i4")
    a[:] = np.arange(4)
    return session.commit("array")


def read_array(repo: floe.Repository) -> list:
    return zarr.open_group(store=repo.readonly_session("main").store, mode="r")["a"][:].tolist()


def test_s3_round_trip_with_static_credentials():
    env = s3_env()
    st = s3_with(env, unique("static"), access_key_id=env["key"], secret_access_key=env["secret"])
    write_array(floe.Repository.create(st))
    again = pickle.loads(pickle.dumps(st))
    assert read_array(floe.Repository.open(again)) == [0, 1, 2, 3]


def test_refreshable_credentials_are_called_once_and_cached(tmp_path):
    env = s3_env()
    creds = CountingCredentials(tmp_path / "calls", env["key"], env["secret"])
    st = s3_with(env, unique("cached"), get_credentials=creds)
    assert creds.calls() == 0, "not called before the first request"
    repo = floe.Repository.create(st)
    write_array(repo)
    assert floe.Repository.exists(st)
    assert read_array(floe.Repository.open(st)) == [0, 1, 2, 3]
    assert creds.calls() == 1


def test_expired_refreshable_credentials_are_fetched_again(tmp_path):
    env = s3_env()
    creds = CountingCredentials(tmp_path / "calls", env["key"], env["secret"], expired_calls=2)
    st = s3_with(env, unique("expiring"), get_credentials=creds)
    assert not floe.Repository.exists(st)
    assert creds.calls() >= 1
    for _ in range(3):
        assert not floe.Repository.exists(st)
    # Each expired credential served one request and was fetched again; the third,
    # without expiry, is kept for every request after it.
    assert creds.calls() == 3


@pytest.mark.parametrize("scatter", [False, True])
def test_pickled_storage_carries_only_scattered_credentials(tmp_path, scatter):
    env = s3_env()
    creds = CountingCredentials(tmp_path / "calls", env["key"], env["secret"])
    st = s3_with(env, unique("scatter"), get_credentials=creds, scatter_initial_credentials=scatter)
    assert creds.calls() == (1 if scatter else 0)
    write_array(floe.Repository.create(st))
    calls = creds.calls()
    copy = pickle.loads(pickle.dumps(st))
    assert read_array(floe.Repository.open(copy)) == [0, 1, 2, 3]
    # The copy reuses the scattered credential, or asks the function again.
    assert creds.calls() == (calls if scatter else calls + 1)


def failing() -> S3StaticCredentials:
    raise RuntimeError("no credentials today")


def not_credentials() -> int:
    return 42


def test_refreshable_credential_errors_fail_the_operation():
    env = s3_env()
    with pytest.raises(RuntimeError, match="no credentials today"):
        s3_with(env, "x", get_credentials=failing, scatter_initial_credentials=True)
    st = s3_with(env, unique("failing"), get_credentials=failing)
    with pytest.raises(floe.FloeError, match="no credentials today"):
        floe.Repository.exists(st)
    opts = floe.S3Options(region="us-east-1", endpoint_url=env["endpoint"], allow_http=True)
    st = floe.Storage.new_s3(opts, env["bucket"], unique("notcallable"),
                             floe.s3_refreshable_credentials(42))
    with pytest.raises(floe.FloeError, match="not callable"):
        floe.Repository.exists(st)
    st = floe.Storage.new_s3(opts, env["bucket"], unique("wrongtype"),
                             floe.s3_refreshable_credentials(not_credentials))
    with pytest.raises(floe.FloeError, match="S3StaticCredentials"):
        floe.Repository.exists(st)


def test_settings_rebuild_the_client():
    env = s3_env()
    st = s3_with(env, unique("settings"), access_key_id=env["key"], secret_access_key=env["secret"])
    tuned = st._with_settings(floe.StorageSettings(
        retries=floe.StorageRetriesSettings(max_tries=1),
        timeouts=floe.StorageTimeoutSettings(connect_timeout_ms=1000, read_timeout_ms=5000),
    ))
    assert tuned.url == st.url
    write_array(floe.Repository.create(tuned))
    assert read_array(floe.Repository.open(st)) == [0, 1, 2, 3]
    # One try, and nothing listening: fails at once.
    dead = floe.s3_storage(bucket="b", prefix="p", endpoint_url="http://127.0.0.1:9",
                           region="us-east-1", allow_http=True, anonymous=True)
    dead = dead._with_settings(floe.StorageSettings(retries=floe.StorageRetriesSettings(max_tries=1)))
    with pytest.raises(floe.FloeError):
        floe.Repository.exists(dead)


# --- Azurite and the GCS emulator ---------------------------------------------------


def azurite_endpoint(account: str) -> dict:
    """Options reaching Azurite as an ordinary endpoint: object_store's emulator mode
    signs with the emulator's fixed key and ignores the credentials given."""
    url = need("AZURITE_BLOB_STORAGE_URL").rstrip("/")
    return {"azure_storage_endpoint": f"{url}/{account}", "azure_allow_http": "true"}


def test_azure_round_trip_on_azurite():
    container = need("FLOE_TEST_AZURE_CONTAINER")
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1")
    prefix = unique("azure")
    st = floe.azure_storage(account=account, container=container, prefix=prefix)
    repo = floe.Repository.create(st)
    write_array(repo)
    with pytest.raises(floe.FloeError):
        floe.Repository.create(st)
    # With the account key given explicitly, and through a pickle.
    key = floe.azure_storage(account=account, container=container, prefix=prefix,
                             access_key=os.environ["AZURE_STORAGE_ACCOUNT_KEY"],
                             from_env=False, config=azurite_endpoint(account))
    assert read_array(floe.Repository.open(pickle.loads(pickle.dumps(key)))) == [0, 1, 2, 3]


def test_azure_refreshable_credentials_on_azurite(tmp_path):
    container = need("FLOE_TEST_AZURE_CONTAINER")
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1")
    calls = tmp_path / "calls"
    get = functools.partial(azure_key, calls, os.environ["AZURE_STORAGE_ACCOUNT_KEY"])
    st = floe.azure_storage(account=account, container=container, prefix=unique("azref"),
                            get_credentials=get, config=azurite_endpoint(account))
    write_array(floe.Repository.create(st))
    assert read_array(floe.Repository.open(st)) == [0, 1, 2, 3]
    assert calls.read_text() == "."


def azure_key(calls: Path, key: str) -> AzureRefreshableCredential:
    calls.write_text((calls.read_text() if calls.exists() else "") + ".")
    return AzureRefreshableCredential.AccessKey(key)


def test_gcs_emulator_is_refused():
    """gcp-storage-emulator ignores generation preconditions and answers neither HEAD
    nor ETag: floe neither writes nor reads a repository there; every attempt raises
    FloeError rather than writing without the preconditions."""
    bucket = need("FLOE_TEST_GCS_BUCKET")
    need("STORAGE_EMULATOR_HOST")
    st = floe.gcs_storage(bucket=bucket, prefix=unique("gcs"))
    st = st._with_settings(floe.StorageSettings(retries=floe.StorageRetriesSettings(max_tries=1)))
    with pytest.raises(floe.FloeError):
        floe.Repository.create(st)
    with pytest.raises(floe.FloeError):
        floe.Repository.exists(st)


# --- HTTP (read-only) ---------------------------------------------------------------


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single `Range: bytes=a-b` requests answered 206."""

    def log_message(self, *args):
        pass

    def send_head(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            return super().send_head()
        start, end = rng.removeprefix("bytes=").split("-")
        data = Path(path).read_bytes()
        start = int(start)
        end = min(int(end) if end else len(data) - 1, len(data) - 1)
        if start >= len(data):
            self.send_error(416)
            return None
        body = data[start:end + 1]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Last-Modified", self.date_time_string(os.path.getmtime(path)))
        self.end_headers()
        import io
        return io.BytesIO(body)


def test_http_storage_reads_a_served_repository_and_refuses_writes(tmp_path):
    root = tmp_path / "served"
    write_array(floe.Repository.create(floe.local_filesystem_storage(str(root / "repo"))))
    handler = functools.partial(RangeHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        st = floe.http_storage(f"http://127.0.0.1:{server.server_port}/repo")
        repo = floe.Repository.open(st)
        assert read_array(repo) == [0, 1, 2, 3]
        session = repo.writable_session("main")
        with pytest.raises(floe.FloeError, match="read-only"):
            zarr.open_group(store=session.store)["a"][:2] = 9
            session.commit("refused")
        # The repo object has no version over plain HTTP: refused before the write.
        with pytest.raises(floe.FloeError, match="read-only|updated safely"):
            repo.create_branch("dev", repo.lookup_branch("main"))
    finally:
        server.shutdown()
    shutil.rmtree(root)


def test_local_filesystem_storage_creates_its_directory_only_when_written(tmp_path):
    missing = tmp_path / "typo" / "repo"
    with pytest.raises(floe.IcechunkError, match="the repository doesn.t exist"):
        floe.Repository.open(floe.local_filesystem_storage(str(missing)))
    assert not (tmp_path / "typo").exists()
    assert not floe.Repository.exists(floe.local_filesystem_storage(str(missing)))
    assert not (tmp_path / "typo").exists()
    floe.Repository.create(floe.local_filesystem_storage(str(missing)))
    assert (missing / "repo").is_file() or (missing / "refs").is_dir()
