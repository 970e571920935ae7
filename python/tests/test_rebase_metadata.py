"""A commit that rebased records {"__icechunk": {"rebase_attempts": n}} in its
metadata, as Icechunk; one that did not rebase records only the caller's metadata."""

import zarr

import floe


def test_a_rebased_commit_records_its_rebase_attempts():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="a", shape=(4,), chunks=(1,), dtype="i4", fill_value=0)
    s.commit("array")
    ours = repo.writable_session("main")
    theirs = repo.writable_session("main")
    zarr.open_array(ours.store, path="a", mode="r+")[0] = 1
    zarr.open_array(theirs.store, path="a", mode="r+")[1] = 2
    theirs.commit("theirs", {"who": "theirs"})
    ours.commit("ours", {"who": "ours"}, rebase_with=floe.ConflictDetector())
    newest, older = list(repo.ancestry(branch="main"))[:2]
    assert newest.metadata == {"who": "ours", "__icechunk": {"rebase_attempts": 1}}
    assert older.metadata == {"who": "theirs"}
