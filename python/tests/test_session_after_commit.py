"""As in Icechunk, a session that committed is read-only afterwards, at the snapshot
it wrote: writes through its stores (also stores taken before the commit) raise
ReadOnlyError, another commit SessionStateError."""

import asyncio
import pickle

import numpy as np
import pytest
import zarr

import floe


def _written_session(storage=None):
    repo = floe.Repository.create(storage or floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="a", shape=(4,), chunks=(2,), dtype="i4",
                      fill_value=0)[...] = [1, 2, 3, 4]
    return repo, s


def test_a_session_is_read_only_at_its_snapshot_after_commit():
    repo, s = _written_session()
    before = s.store
    assert not s.read_only and s.branch == "main"
    sid = s.commit("first")
    assert s.read_only and s.branch is None and s.snapshot_id == sid
    assert not s.has_uncommitted_changes
    assert s.store.read_only
    # It still reads what it committed.
    np.testing.assert_array_equal(zarr.open_array(s.store, path="a", mode="r")[...],
                                  [1, 2, 3, 4])
    # Writes through a store taken before the commit raise, as Icechunk's do.
    with pytest.raises(floe.ReadOnlyError):
        zarr.open_array(before, path="a", mode="r+")[0:2] = [9, 9]
    with pytest.raises(floe.ReadOnlyError):
        asyncio.run(before.delete("a/c/0"))
    with pytest.raises(floe.ReadOnlyError):
        asyncio.run(s.store.delete("a/c/0"))
    assert repo.lookup_branch("main") == sid


@pytest.mark.parametrize("again", ["commit", "amend", "fork", "rebase"])
def test_a_committed_session_refuses_to_commit_again(again):
    _, s = _written_session()
    s.commit("first")
    call = {
        "commit": lambda: s.commit("second", allow_empty=True),
        "amend": lambda: s.amend("amended"),
        "fork": s.fork,
        "rebase": s.rebase,
    }[again]
    with pytest.raises(floe.SessionStateError, match="committed"):
        call()


def test_commit_on_read_only_sessions_and_forks_is_a_session_state_error():
    repo, s = _written_session()
    fork = s.fork()
    with pytest.raises(floe.SessionStateError):
        fork.commit("fork")
    s.commit("first")
    with pytest.raises(floe.SessionStateError):
        repo.readonly_session("main").commit("nope", allow_empty=True)


def test_a_committed_session_pickles_as_a_read_only_session(tmp_path):
    repo, s = _written_session(floe.local_filesystem_storage(str(tmp_path / "r")))
    with pytest.raises(ValueError):
        pickle.dumps(s)
    sid = s.commit("first")
    back = pickle.loads(pickle.dumps(s))
    assert back.read_only and back.snapshot_id == sid


def test_the_next_commit_takes_a_new_writable_session():
    repo, s = _written_session()
    first = s.commit("first")
    s = repo.writable_session("main")
    zarr.open_array(s.store, path="a", mode="r+")[0] = 7
    second = s.commit("second")
    assert [h.id for h in repo.ancestry(branch="main")][:2] == [second, first]
