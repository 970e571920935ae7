"""Icechunk 2.3.0's `garbage_collect` arguments and `GCSummary` fields on floe: the
tuning arguments are accepted (and checked as Icechunk checks them), change nothing
but how much runs at once, and the summary reports failed deletes."""

import asyncio
import datetime
import shutil

import pytest

import floe
from test_gc_state import _objects, _repo


TUNED = dict(
    max_snapshots_in_memory=2,
    max_compressed_manifest_mem_bytes=1024,
    max_decoded_manifest_mem_bytes=64 * 1024 * 1024,
    max_concurrent_manifest_fetches=1,
    max_concurrent_deletes=1,
    max_consecutive_delete_failures=3,
    max_concurrent_listings=1,
)


def _collect(path, now, use_async, **kwargs):
    repo = floe.Repository.open(floe.local_filesystem_storage(str(path)))
    repo.expire_snapshots(now)
    if use_async:
        return asyncio.run(repo.garbage_collect_async(now, allow_recent_cutoff=True, **kwargs))
    return repo.garbage_collect(now, allow_recent_cutoff=True, **kwargs)


@pytest.mark.parametrize("use_async", [False, True])
def test_tuning_arguments_change_nothing_collected(tmp_path, use_async):
    base = tmp_path / "base"
    _repo(base)
    tuned = tmp_path / "tuned"
    shutil.copytree(base, tuned)
    now = datetime.datetime.now(datetime.timezone.utc)
    plain = _collect(base, now, use_async)
    summary = _collect(tuned, now, use_async, **TUNED)
    assert isinstance(summary, floe.GCSummary)
    assert summary.chunks_deleted == 16 and summary.snapshots_deleted == 2, summary
    assert summary == plain
    assert _objects(tuned) == _objects(base)
    assert summary.objects_failed_to_delete == 0
    assert summary.throttled_batches == 0
    assert summary.delete_errors == []
    assert summary.skipped_phases == []
    for field in ("objects_failed_to_delete", "throttled_batches", "delete_errors",
                  "skipped_phases"):
        assert field in repr(summary)
        assert field in summary._repr_html_()
        assert field in dict(summary)


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("max_concurrent_deletes", 0, ValueError),
        ("max_concurrent_listings", 0, ValueError),
        ("max_snapshots_in_memory", 0, ValueError),
        ("max_decoded_manifest_mem_bytes", 0, ValueError),
        ("max_concurrent_manifest_fetches", -1, OverflowError),
        ("max_consecutive_delete_failures", 70_000, OverflowError),
        ("max_compressed_manifest_mem_bytes", "1", TypeError),
        ("max_concurrent_deletes", True, TypeError),
    ],
)
def test_tuning_arguments_are_checked_as_icechunk_checks_them(tmp_path, argument, value, error):
    repo = _repo(tmp_path / "repo")
    before = _objects(tmp_path / "repo")
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    with pytest.raises(error, match=argument):
        repo.garbage_collect(old, **{argument: value})
    with pytest.raises(error, match=argument):
        asyncio.run(repo.garbage_collect_async(old, **{argument: value}))
    assert _objects(tmp_path / "repo") == before
    if argument in ("max_snapshots_in_memory", "max_decoded_manifest_mem_bytes",
                    "max_compressed_manifest_mem_bytes", "max_concurrent_manifest_fetches"):
        with pytest.raises(error, match=argument):
            repo.chunk_storage_stats(**{argument: value})
        with pytest.raises(error, match=argument), pytest.warns(DeprecationWarning):
            repo.total_chunks_storage(**{argument: value})


def test_stats_accept_icechunks_budgets(tmp_path):
    repo = _repo(tmp_path / "repo")
    budgets = {k: v for k, v in TUNED.items() if k in (
        "max_snapshots_in_memory", "max_compressed_manifest_mem_bytes",
        "max_decoded_manifest_mem_bytes", "max_concurrent_manifest_fetches")}
    assert repo.chunk_storage_stats(**budgets) == repo.chunk_storage_stats()
    # 3 commits of 8 chunks of 2 KiB, all reachable from main's history
    assert repo.chunk_storage_stats().native_bytes == 3 * 8 * 2048
