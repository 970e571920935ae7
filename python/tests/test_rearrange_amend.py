"""Rearrange sessions: any move is a change, moves that cancel out still commit, and
``amend`` after moves replaces the tip with the moves composed into its transaction
log (Icechunk 2.3.0's behaviour)."""

import numpy as np
import pytest
import zarr

import floe


def _repo_with_array(name: str = "a") -> floe.Repository:
    repo = floe.Repository.create(floe.in_memory_storage())
    session = repo.writable_session("main")
    root = zarr.group(session.store)
    root.create_array(name, shape=(4,), chunks=(2,), dtype="i4")[:] = np.arange(4)
    session.commit("init")
    return repo


def _moves(repo: floe.Repository) -> list[tuple[str, str]]:
    log = repo.inspect_transaction_log(repo.lookup_branch("main"))
    return sorted((m["from"], m["to"]) for m in log["moved_nodes"])


def _tree(repo: floe.Repository) -> list[str]:
    return sorted(zarr.open_group(repo.readonly_session("main").store, mode="r").keys())


def test_a_move_is_a_change_even_when_undone():
    repo = _repo_with_array()
    session = repo.rearrange_session("main")
    assert not session.has_uncommitted_changes
    with pytest.raises(floe.SessionStateError, match="no changes"):
        session.commit("nothing moved")
    session = repo.rearrange_session("main")
    session.move("/a", "/b")
    assert session.has_uncommitted_changes
    session.move("/b", "/a")
    assert session.has_uncommitted_changes
    session.commit("there and back")
    assert _moves(repo) == []
    assert _tree(repo) == ["a"]


def test_amends_compose_chained_moves():
    repo = _repo_with_array()
    parent = list(repo.ancestry(branch="main"))[1].id
    for src, dst in [("/a", "/b"), ("/b", "/c")]:
        session = repo.rearrange_session("main")
        session.move(src, dst)
        session.amend(f"{src} -> {dst}")
    assert _moves(repo) == [("/a", "/c")]
    assert _tree(repo) == ["c"]
    history = list(repo.ancestry(branch="main"))
    assert history[0].message == "/b -> /c" and history[1].id == parent
    values = zarr.open_array(repo.readonly_session("main").store, path="c")[:]
    np.testing.assert_array_equal(values, np.arange(4))
    # moving back and amending records no move at all
    session = repo.rearrange_session("main")
    session.move("/c", "/a")
    session.amend("back")
    assert _moves(repo) == [] and _tree(repo) == ["a"]


def test_amend_after_moves_equals_one_commit_of_all_moves():
    one = _repo_with_array()
    session = one.rearrange_session("main")
    for src, dst in [("/a", "/g"), ("/g", "/h")]:
        session.move(src, dst)
    session.commit("all moves")
    split = _repo_with_array()
    for src, dst in [("/a", "/g"), ("/g", "/h")]:
        session = split.rearrange_session("main")
        session.move(src, dst)
        session.amend("amend")
    assert _tree(one) == _tree(split) == ["h"]
    assert _moves(one) == _moves(split) == [("/a", "/h")]


def test_amend_of_a_moved_branch_conflicts():
    repo = _repo_with_array()
    session = repo.rearrange_session("main")
    other = repo.writable_session("main")
    zarr.group(other.store).create_group("x")
    other.commit("moves the branch")
    session.move("/a", "/b")
    with pytest.raises(floe.ConflictError):
        session.amend("late")


def test_inspected_moves_show_paths_only():
    repo = _repo_with_array()
    session = repo.rearrange_session("main")
    session.move("/a", "/b")
    session.commit("moved")
    log = repo.inspect_transaction_log(repo.lookup_branch("main"))
    assert log["moved_nodes"] == [{"from": "/a", "to": "/b"}]
