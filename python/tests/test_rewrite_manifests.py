"""``Repository.rewrite_manifests`` (Icechunk 2.3.0's): every array's manifests at a
branch tip rewritten in the configured splitting layout, as a new commit (or an amend
on spec 2), data unchanged, the configuration applied recorded in the metadata.
Also what Icechunk does with expired snapshots on spec 2 (not found once expired) and
``diff_async`` refusing a backwards chain as ``diff`` does."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np
import pytest
import zarr

import floe
from floe import (
    ManifestConfig,
    ManifestSplitCondition as S,
    ManifestSplitDimCondition as D,
    ManifestSplittingConfig,
    RepositoryConfig,
)


def _repo(spec_version=None):
    repo = floe.Repository.create(
        floe.in_memory_storage(),
        config=RepositoryConfig(inline_chunk_threshold_bytes=0),
        spec_version=spec_version,
    )
    s = repo.writable_session("main")
    a = zarr.group(s.store).create_array("a", shape=(12,), chunks=(2,), dtype="i4", compressors=None)
    a[:] = np.arange(12)
    first = s.commit("data")
    return repo, first


def _split_every(n):
    return RepositoryConfig(
        manifest=ManifestConfig(splitting=ManifestSplittingConfig.from_dict({S.AnyArray(): {D.Any(): n}}))
    )


@pytest.mark.parametrize("spec_version", [1, 2])
def test_new_commit_applies_current_splitting(spec_version):
    repo, first = _repo(spec_version)
    assert len(repo.list_manifest_files(first)) == 1
    split = repo.reopen(config=_split_every(2))
    new = split.rewrite_manifests("split", branch="main", metadata={"who": "me"})
    info = split.lookup_snapshot(new)
    assert info.parent_id == first and info.message == "split"
    assert info.metadata["who"] == "me"
    assert info.metadata["__icechunk"]["splitting_config"] == {
        "split_sizes": [["any_array", [{"condition": "Any", "num_chunks": 2}]]]
    }
    assert len(split.list_manifest_files(new)) == 3  # 6 chunks, 2 per manifest
    data = zarr.open_array(split.readonly_session("main").store, path="a", mode="r")[:]
    np.testing.assert_array_equal(data, np.arange(12))
    assert split.diff(from_snapshot_id=first, to_snapshot_id=new).updated_chunks == {}


def test_without_splitting_records_icechunks_default_and_merges_manifests():
    repo, _ = _repo()
    split = repo.reopen(config=_split_every(1))
    many = split.rewrite_manifests("split", branch="main")
    assert len(split.list_manifest_files(many)) == 6
    one = repo.rewrite_manifests("join", branch="main")
    assert len(repo.list_manifest_files(one)) == 1
    rule = repo.lookup_snapshot(one).metadata["__icechunk"]["splitting_config"]["split_sizes"]
    assert rule == [[{"path_matches": {"regex": ".*"}}, [{"num_chunks": 2**32 - 1, "condition": "Any"}]]]


def test_amend_replaces_tip_and_needs_spec_2():
    repo, first = _repo()
    parent = repo.lookup_snapshot(first).parent_id
    amended = repo.reopen(config=_split_every(3)).rewrite_manifests(
        "again", branch="main", commit_method="amend"
    )
    assert repo.lookup_branch("main") == amended
    assert repo.lookup_snapshot(amended).parent_id == parent
    assert [s.message for s in repo.ancestry(branch="main")][:1] == ["again"]

    v1, _ = _repo(1)
    with pytest.raises(floe.FloeError, match="amend"):
        v1.rewrite_manifests("x", branch="main", commit_method="amend")
    with pytest.raises(ValueError):
        v1.rewrite_manifests("x", branch="main", commit_method="squash")


def test_missing_branch_and_async():
    repo, first = _repo()
    with pytest.raises(floe.FloeError, match="nope"):
        repo.rewrite_manifests("x", branch="nope")
    new = asyncio.run(repo.rewrite_manifests_async("async", branch="main"))
    assert repo.lookup_snapshot(new).parent_id == first


def _expired_history(spec_version):
    repo = floe.Repository.create(floe.in_memory_storage(), spec_version=spec_version)
    s = repo.writable_session("main")
    zarr.group(s.store)
    a = s.commit("a")
    repo.create_branch("side", a)
    s = repo.writable_session("side")
    zarr.group(s.store).create_group("x")
    b = s.commit("b")
    s = repo.writable_session("main")
    zarr.group(s.store).create_group("y")
    c = s.commit("c")
    expired = repo.expire_snapshots(
        repo.lookup_snapshot(b).written_at + timedelta(microseconds=1), delete_expired_branches=True
    )
    assert expired == {a, b}
    return repo, a, b, c


def test_expired_snapshots_are_not_found_on_spec_2():
    repo, a, b, c = _expired_history(2)
    for snap in (a, b):
        with pytest.raises(floe.SnapshotNotFoundError):
            repo.lookup_snapshot(snap)
        with pytest.raises(floe.SnapshotNotFoundError):
            repo.readonly_session(snapshot_id=snap)
        with pytest.raises(floe.SnapshotNotFoundError):
            list(repo.ancestry(snapshot_id=snap))
    assert repo.lookup_snapshot(c).message == "c"


def test_expired_snapshots_stay_readable_on_spec_1():
    repo, a, b, _ = _expired_history(1)
    assert repo.lookup_snapshot(a).message == "a"
    assert repo.lookup_snapshot(b).message == "b"


def test_diff_async_refuses_a_backwards_chain():
    repo, first = _repo()
    s = repo.writable_session("main")
    zarr.group(s.store).create_group("g")
    second = s.commit("g")
    with pytest.raises(floe.InvalidInputError, match="doesn't include"):
        asyncio.run(repo.diff_async(from_snapshot_id=second, to_snapshot_id=first))
    d = asyncio.run(repo.diff_async(from_snapshot_id=first, to_snapshot_id=second))
    assert d.new_groups == {"/g"}
