"""Retention policies, squash and maintain from Python (issue 47, items 3 and 4):
the same rules as the engine's tests, the policy forms Python accepts, the
exceptions raised, and garbage collection afterwards."""

import datetime

import numpy as np
import pytest
import zarr

import floe


def _repo(tmp_path, spec_version=2):
    return floe.Repository.create(
        floe.local_filesystem_storage(str(tmp_path / "repo")), spec_version=spec_version
    )


def _commits(repo, n, branch="main"):
    """`n` commits on `branch`, commit i writing row i % 4 of `a` with i; their ids."""
    ids = []
    for i in range(n):
        s = repo.writable_session(branch)
        group = zarr.open_group(s.store, mode="a")
        if "a" not in group:
            group.create_array("a", shape=(4, 256), chunks=(1, 256), dtype="i4")
        zarr.open_array(s.store, path="a")[i % 4] = i
        ids.append(s.commit(f"c{i}"))
    return ids


def _history(repo, branch="main"):
    return [s.id for s in repo.ancestry(branch=branch)]


def _values(repo, **ref):
    s = repo.readonly_session(**ref)
    return zarr.open_array(s.store, path="a", mode="r")[:, 0].tolist()


def test_keep_last_then_gc_keeps_values_and_tags(tmp_path):
    repo = _repo(tmp_path)
    ids = _commits(repo, 6)
    repo.create_tag("v1", ids[1])
    before = (_values(repo, branch="main"), _values(repo, tag="v1"))
    init = _history(repo)[-1]

    dry = repo.apply_retention({"default": {"keep_last": 2}}, dry_run=True)
    assert dry["expired"] == {ids[0], ids[2], ids[3]}
    assert len(_history(repo)) == 7
    done = repo.apply_retention({"default": {"keep_last": 2}})
    assert done == dry
    assert _history(repo) == [ids[5], ids[4], ids[1], init]

    cutoff = datetime.datetime.now(datetime.UTC)
    summary = repo.garbage_collect(cutoff, allow_recent_cutoff=True)
    assert summary.snapshots_deleted == 3
    reopened = floe.Repository.open(floe.local_filesystem_storage(str(tmp_path / "repo")))
    assert (_values(reopened, branch="main"), _values(reopened, tag="v1")) == before


def test_stored_policy_with_timedelta_and_maintain(tmp_path):
    repo = _repo(tmp_path)
    ids = _commits(repo, 4)
    assert repo.retention_policy() is None
    repo.set_retention_policy(
        {
            "default": {"keep_last": 1, "keep_within": datetime.timedelta(seconds=0)},
            "branches": {"dev": {"keep_last": 5}},
        }
    )
    assert repo.retention_policy() == {
        "default": {"keep_last": 1, "keep_within_seconds": 0},
        "branches": {"dev": {"keep_last": 5}},
    }
    two_hours_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=2)
    summary = repo.maintain(gc_older_than=two_hours_ago)
    assert summary["retention"]["expired"] == set(ids[:3])
    assert isinstance(summary["gc"], floe.GCSummary)
    assert _history(repo)[0] == ids[3]
    assert len(_history(repo)) == 2
    repo.set_retention_policy(None)
    assert repo.retention_policy() is None
    assert repo.maintain(gc_older_than=two_hours_ago)["retention"] is None


@pytest.mark.parametrize(
    "policy",
    [
        {"default": {"keep_lst": 3}},
        {"default": {}},
        {"default": {"keep_last": 0}},
        {"defaults": {"keep_last": 3}},
        {"default": {"keep_within": 30}},
        "keep_last=3",
    ],
)
def test_invalid_policies_raise_invalid_input(tmp_path, policy):
    repo = _repo(tmp_path)
    _commits(repo, 2)
    with pytest.raises(floe.InvalidInputError):
        repo.set_retention_policy(policy)
    with pytest.raises(floe.InvalidInputError):
        repo.apply_retention(policy)
    assert repo.retention_policy() is None


def test_retention_needs_spec2(tmp_path):
    repo = _repo(tmp_path, spec_version=1)
    _commits(repo, 2)
    with pytest.raises(floe.IcechunkError):
        repo.apply_retention({"default": {"keep_last": 1}})


@pytest.mark.parametrize("spec_version", [1, 2])
def test_squash_ranges_and_refusals(tmp_path, spec_version):
    repo = _repo(tmp_path, spec_version)
    ids = _commits(repo, 5)
    before = _values(repo, branch="main")
    done = repo.squash("main", ids[0], dry_run=True)
    assert done["squashed"] == ids[1:4]
    assert len(_history(repo)) == 6
    done = repo.squash("main", ids[1], ids[3])
    assert done["squashed"] == [ids[2]]
    assert _history(repo)[:4] == [ids[4], ids[3], ids[1], ids[0]]
    done = repo.squash("main", ids[0])
    assert done["to"] == ids[4]
    assert _history(repo)[:2] == [ids[4], ids[0]]
    assert _values(repo, branch="main") == before
    with pytest.raises(floe.InvalidInputError):
        repo.squash("main", ids[4], ids[0])
    with pytest.raises(floe.InvalidInputError):
        repo.squash("main", "not an id")
    with pytest.raises(floe.RefNotFoundError):
        repo.squash("nope", ids[0])
    # A commit after the squash lands on the same tip.
    s = repo.writable_session("main")
    zarr.open_array(s.store, path="a")[0] = np.int32(99)
    after = s.commit("after")
    assert _history(repo)[:3] == [after, ids[4], ids[0]]
