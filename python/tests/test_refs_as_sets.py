"""Branch and tag names (and expired snapshot ids) come back as sets, as in Icechunk."""

import datetime

import zarr

import floe


def test_list_branches_and_list_tags_return_sets():
    repo = floe.Repository.create(floe.in_memory_storage())
    assert repo.list_branches() == {"main"} and repo.list_tags() == set()
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    sid = s.commit("root")
    repo.create_branch("dev", sid)
    repo.create_tag("v1", sid)
    repo.create_tag("v2", sid)
    branches, tags = repo.list_branches(), repo.list_tags()
    assert isinstance(branches, set) and isinstance(tags, set)
    assert branches == {"main", "dev"} and tags == {"v1", "v2"}
    repo.delete_tag("v1")
    assert repo.list_tags() == {"v2"}


def test_expire_snapshots_returns_a_set():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    s.commit("root")
    expired = repo.expire_snapshots(datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
    assert expired == set()
