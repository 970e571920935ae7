"""Checks Icechunk 2.3.0 makes around creating and upgrading repositories and building
storage: no new repository at a bucket root, ``legacy_rooted_keys`` only with an empty
prefix, invalid extra HTTP headers refused when the storage is built, the old object
of an upgraded repository invalidated, ``inspect_repo_info`` and the deprecated
``total_chunks_storage_async``."""

import asyncio
import shutil

import pytest
import zarr

import floe


def _s3(prefix, **kw):
    return floe.s3_storage(
        bucket="testbucket", prefix=prefix, region="us-east-1",
        endpoint_url="http://127.0.0.1:9", allow_http=True,
        access_key_id="k", secret_access_key="s", force_path_style=True, **kw,
    )


def test_no_new_repository_at_a_bucket_root():
    # Refused before any request: the endpoint does not exist.
    with pytest.raises(floe.InvalidInputError, match="empty prefix"):
        floe.Repository.create(_s3(None))
    with pytest.raises(floe.InvalidInputError, match="empty prefix"):
        asyncio.run(floe.Repository.create_async(_s3("")))


def test_legacy_rooted_keys_need_an_empty_prefix():
    with pytest.raises(ValueError, match="only valid with an empty prefix"):
        _s3("some/prefix", legacy_rooted_keys=True)


@pytest.mark.parametrize(
    "headers", [{"bad header name": "v"}, {"x-ok": "line\nbreak"}, {"": "v"}]
)
def test_invalid_headers_are_refused_when_the_storage_is_built(headers):
    with pytest.raises(ValueError, match="invalid HTTP header"):
        _s3("p", write_headers=headers)
    with pytest.raises(ValueError, match="invalid HTTP header"):
        floe.http_storage("http://127.0.0.1:9/repo", headers=headers)


def test_upgrade_invalidates_the_old_repository_object(tmp_path):
    repo = floe.Repository.create(
        floe.local_filesystem_storage(str(tmp_path)), spec_version=1
    )
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    s.commit("v1")
    new = floe.upgrade_icechunk_repository(repo, dry_run=False)
    assert int(new.spec_version) == 2
    with pytest.raises(RuntimeError, match="invalidated by upgrade_icechunk_repository"):
        repo.writable_session("main")
    assert new.list_branches() == {"main"}


def test_inspect_repo_info_lists_refs_snapshots_and_updates(tmp_path):
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path)))
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    sid = s.commit("first", metadata={"k": 1})
    repo.create_tag("v1", sid)
    info = repo.inspect_repo_info()
    assert info["branches"] == {"main": sid}
    assert info["tags"] == {"v1": sid}
    assert info["spec_version"] == "2.0"
    snaps = {x["id"]: x for x in info["snapshots"]}
    assert snaps[sid]["message"] == "first" and snaps[sid]["metadata"] == {"k": 1}
    assert info["latest_updates"][0]["update_type"]["type"] == "TagCreatedUpdate"
    assert asyncio.run(repo.inspect_repo_info_async()) == info


def test_inspected_files_show_their_header(tmp_path):
    """As Icechunk 2.3.0: every ``inspect_*`` result carries the file's binary
    header, with the writer's name (floe's, for files floe wrote)."""
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path)),
                                  config=floe.RepositoryConfig(inline_chunk_threshold_bytes=0))
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(4,), chunks=(2,), dtype="i4")
    a[:] = 1
    sid = s.commit("data")
    manifest = repo.list_manifest_files(sid)[0].id
    results = {
        "snapshot": repo.inspect_snapshot(sid),
        "transaction-log": repo.inspect_transaction_log(sid),
        "manifest": repo.inspect_manifest(manifest),
        "repo-info": repo.inspect_repo_info(),
    }
    for kind, result in results.items():
        assert result["header"] == {
            "written_by": f"floe-{floe.__version__}",
            "app_name": "floe",
            "app_version": floe.__version__,
            "spec_version": "2.0",
            "file_type": kind,
            "compression": "zstd",
        }, kind
    assert asyncio.run(repo.inspect_snapshot_async(sid)) == results["snapshot"]
    (tmp_path / "snapshots" / sid).write_bytes(b"not an icechunk file")
    with pytest.raises(floe.FormatError):
        repo.inspect_snapshot(sid)


def test_total_chunks_storage_async_is_deprecated():
    repo = floe.Repository.create(
        floe.in_memory_storage(), config=floe.RepositoryConfig(inline_chunk_threshold_bytes=0)
    )
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(4,), chunks=(1,), dtype="i4", compressors=None)
    a[:] = 1
    s.commit("data")
    with pytest.warns(DeprecationWarning, match="total_chunks_storage_async"):
        assert asyncio.run(repo.total_chunks_storage_async()) == 16


def test_a_commit_reparented_by_expiry_shows_the_logs_it_spans(tmp_path):
    import datetime

    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path)))
    ids = []
    for i in range(3):
        s = repo.writable_session("main")
        zarr.create_group(s.store, attributes={"i": i}, overwrite=True)
        ids.append(s.commit(f"c{i}"))
    plain = repo.inspect_transaction_log(ids[0])
    assert "synthetic_composite" not in plain
    expired = repo.expire_snapshots(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    )
    assert set(ids[:2]) <= expired
    composite = repo.inspect_transaction_log(ids[2])["synthetic_composite"]
    assert set(ids[:2]) <= set(composite["merged_pruned_ancestor_tx_logs"])
    assert composite["missing_tx_logs"] == []
