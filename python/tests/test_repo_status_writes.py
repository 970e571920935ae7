"""Spec 2: a repository whose status is read-only opens no writable or rearrange
session and is not garbage collected (Icechunk 2.3.0's behaviour); read-only
sessions still open, and everything works again once the status is online."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import floe
from floe import RepoAvailability, RepoStatus


def test_read_only_status_refuses_writers_and_gc():
    repo = floe.Repository.create(floe.in_memory_storage(), spec_version=2)
    repo.writable_session("main").commit("one", allow_empty=True)
    repo.set_status(RepoStatus(availability=RepoAvailability.read_only))
    for open_writer in (repo.writable_session, repo.rearrange_session):
        with pytest.raises(floe.ReadOnlyError, match="repository status is read-only"):
            open_writer("main")
    with pytest.raises(floe.ReadOnlyError, match="repository status is read-only"):
        repo.garbage_collect(datetime.now(UTC))
    assert repo.readonly_session("main").read_only

    repo.set_status(RepoStatus(availability=RepoAvailability.online))
    repo.writable_session("main").commit("two", allow_empty=True)
    assert repo.rearrange_session("main") is not None


def test_status_set_by_another_handle_is_seen():
    storage = floe.in_memory_storage()
    repo = floe.Repository.create(storage, spec_version=2)
    other = floe.Repository.open(storage)
    other.set_status(RepoStatus(availability=RepoAvailability.read_only))
    with pytest.raises(floe.ReadOnlyError):
        repo.writable_session("main")
