"""Moves in a rearrange session refused as Icechunk 2.3.0 refuses them (error type
and wording), and moved nodes listed by destination path, segment by segment, under
"Nodes moved/renamed:"."""

from __future__ import annotations

import pytest
import zarr

import floe


@pytest.fixture
def repo():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    root = zarr.group(s.store)
    root.create_group("g").create_group("sub")
    root.create_array("arr", shape=(1,), dtype="i4")
    root.create_array("src", shape=(1,), dtype="i4")
    s.commit("tree")
    return repo


@pytest.mark.parametrize(
    "src, dst, error, words",
    [
        ("/", "/renamed", floe.SessionStateError, "cannot move `/` into itself or its own descendant `/renamed`"),
        ("/g", "/g/sub/x", floe.SessionStateError, "into itself or its own descendant `/g/sub/x`"),
        ("/g", "/g", floe.SessionStateError, "into itself or its own descendant"),
        ("/src", "/arr/x", floe.SessionStateError, "the destination's parent `/arr` is an array, not a group"),
        ("/src", "/missing/x", floe.SessionStateError, "the destination's parent group `/missing` does not exist"),
        ("/src", "/arr", floe.AlreadyExistsError, "move cannot overwrite existing node at `/arr`"),
        ("/nope", "/z", floe.NodeNotFoundError, "node not found at `/nope`"),
    ],
)
def test_refused_moves(repo, src, dst, error, words):
    s = repo.rearrange_session("main")
    with pytest.raises(error) as caught:
        s.move(src, dst)
    assert words in str(caught.value)
    assert s.status().is_empty()


def test_moves_sorted_by_destination_segments(repo):
    before = repo.lookup_branch("main")
    s = repo.rearrange_session("main")
    s.move("/src", "/0")
    s.move("/arr", "/00")
    s.move("/0", "/0-a")
    s.move("/00", "/0")
    s.move("/g", "/h")
    after = s.commit("moves")
    diff = repo.diff(from_snapshot_id=before, to_snapshot_id=after)
    assert diff.moved_nodes == [
        ("/arr", "/0"),
        ("/src", "/0-a"),
        ("/g", "/h"),
        ("/g/sub", "/h/sub"),
    ]
    assert repr(diff) == (
        "Nodes moved/renamed:\n"
        "    /arr -> /0\n"
        "    /src -> /0-a\n"
        "    /g -> /h\n"
        "    /g/sub -> /h/sub\n\n"
    )
