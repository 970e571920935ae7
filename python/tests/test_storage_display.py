"""How storage, S3 options, static credentials and storage settings show themselves
(Icechunk 2.3.0's layout): ``<icechunk.Storage>`` with ``type:`` and the backend's
location, executable reprs for option and settings classes, ``(default)`` marks in
``str``, and credentials that never show their secrets."""

import pickle

import floe
from floe._display import qualified
from floe.storage import (
    S3Options,
    StorageConcurrencySettings,
    StorageRetriesSettings,
    StorageSettings,
    StorageTimeoutSettings,
)


def P() -> str:
    """The package name displays use: ``floe``, or ``icechunk`` once another test
    called ``floe.install_as_icechunk()``."""
    return qualified("x")[: -len(".x")]


def test_in_memory_and_local_storage_show_type_and_path(tmp_path):
    assert repr(floe.in_memory_storage()) == f"<{P()}.Storage>\ntype: in-memory\n"
    s = floe.local_filesystem_storage(str(tmp_path))
    assert repr(s) == f"<{P()}.Storage>\ntype: local filesystem\npath: {tmp_path}\n"
    assert str(s) == repr(s)
    html = s._repr_html_()
    assert '<div class="icechunk-repr">' in html and str(tmp_path) in html


def test_s3_storage_shows_only_the_options_that_were_set():
    s = floe.s3_storage(
        bucket="b", prefix="p", region="us-east-1", endpoint_url="http://x:9000",
        allow_http=True, access_key_id="a", secret_access_key="b",
    )
    assert repr(s) == (
        f"<{P()}.Storage>\ntype: S3 (native)\nbucket: b\nprefix: p\nregion: us-east-1\n"
        "endpoint_url: http://x:9000\nallow_http: True\n"
    )
    r2 = floe.r2_storage(bucket="b", prefix="p", account_id="acc", anonymous=True)
    text = repr(r2)
    assert "region: auto" in text and "https://acc.r2.cloudflarestorage.com" in text
    assert "force_path_style: True" in text and "anonymous: True" in text


def test_repository_repr_nests_its_storage():
    repo = floe.Repository.create(floe.in_memory_storage())
    assert f"storage:\n    <{P()}.Storage>\n    type: in-memory" in repr(repo)
    assert "in-memory" in repo._repr_html_()


def test_s3_options_repr_evaluates_back_and_str_lists_fields():
    opts = S3Options(region="us-east-1", allow_http=True, requester_pays=True)
    text = repr(opts)
    assert text.startswith(f"{P()}.storage.S3Options(\n")
    assert 'region="us-east-1",' in text and "checksum_algorithm=None," in text
    assert eval(text, {"floe": floe, "icechunk": floe}) == opts
    assert str(opts).startswith(f"<{P()}.storage.S3Options>\nregion: \"us-east-1\"\n")


def test_static_credentials_are_redacted():
    c = floe.S3StaticCredentials(
        access_key_id="AKIAIOSFODNN7EXAMPLE", secret_access_key="wJalrXUtnFEMI/K7",
        session_token="XYZSECRET",
    )
    for text in (repr(c), str(c), c._repr_html_()):
        assert "AKIA****" in text
        assert "wJalr" not in text and "XYZSECRET" not in text and "IOSFODNN" not in text
    assert pickle.loads(pickle.dumps(c)).secret_access_key == "wJalrXUtnFEMI/K7"


def test_settings_reprs_evaluate_back_and_str_marks_defaults():
    for obj in (
        StorageRetriesSettings(max_tries=3, initial_backoff_ms=100),
        StorageTimeoutSettings(connect_timeout_ms=5000),
        StorageConcurrencySettings(),
        StorageSettings(retries=StorageRetriesSettings(max_tries=5), storage_class="STANDARD_IA"),
    ):
        assert repr(obj).startswith(f"{P()}.storage.{type(obj).__name__}(")
        assert eval(repr(obj), {"floe": floe, "icechunk": floe}) == obj
    text = str(StorageSettings(retries=StorageRetriesSettings(max_tries=5)))
    assert text.startswith(f"<{P()}.storage.StorageSettings>")
    assert "unsafe_use_conditional_create: True (default)" in text
    assert "max_tries: 5" in text and "initial_backoff_ms: 100 (default)" in text
    assert "retries" in StorageSettings()._repr_html_()


def test_default_settings_hold_the_client_defaults_and_can_be_changed_in_place():
    settings = floe.in_memory_storage().default_settings()
    assert settings.retries == StorageRetriesSettings(
        max_tries=11, initial_backoff_ms=100, max_backoff_ms=15_000
    )
    assert settings.concurrency == StorageConcurrencySettings()
    settings.retries.max_tries = 42
    assert settings.retries.max_tries == 42
