"""Unknown and malformed snapshot ids raise Icechunk 2.3.0's exception classes, call
by call (issue 45, item 6). The table was run on icechunk 2.3.0 and is its behaviour:

- text that is no snapshot id (wrong length, characters outside Crockford base32,
  empty) raises ``InvalidInputError`` (a ``ValueError``);
- text of the right shape that names no snapshot raises ``SnapshotNotFoundError``
  (a ``KeyError``). Icechunk reads ids as Crockford base32 does: ``O`` for ``0``,
  ``I`` and ``L`` for ``1``, either case, and the four padding bits of the last
  character ignored, so ``ZZZZZZZZZZZZZZZZZZZZ`` is the unknown snapshot
  ``ZZZZZZZZZZZZZZZZZZZG``, not malformed text.

``diff`` reads both ids before it checks that ``from`` is an ancestor of ``to``.
"""

import asyncio

import pytest
import zarr

import floe

MALFORMED = {
    "too-short": "ABC",
    "too-long": "1CECHNKREP0F1RSTCMT00",
    "not-base32": "1!1!1!1!1!1!1!1!1!1!",
    "crockford-U": "1CECHNKREP0F1RSTCMTU",
    "words": "not a snapshot id",
    "empty": "",
    "leading-space": " 1CECHNKREP0F1RSTCMT0",
}
UNKNOWN = {
    "all-Z": "ZZZZZZZZZZZZZZZZZZZZ",
    "valid-unknown": "0000000000000000000G",
}

CALLS = {
    "readonly_session": lambda repo, i: repo.readonly_session(snapshot_id=i),
    "lookup_snapshot": lambda repo, i: repo.lookup_snapshot(i),
    "ancestry": lambda repo, i: list(repo.ancestry(snapshot_id=i)),
    "reset_branch": lambda repo, i: repo.reset_branch("main", i),
    "create_tag": lambda repo, i: repo.create_tag("t", i),
    "create_branch": lambda repo, i: repo.create_branch("b", i),
    "diff-from": lambda repo, i: repo.diff(from_snapshot_id=i, to_branch="main"),
    "diff-to": lambda repo, i: repo.diff(from_branch="main", to_snapshot_id=i),
}


@pytest.fixture(scope="module")
def repo():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    s.commit("one")
    return repo


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_id_is_invalid_input(repo, call, case):
    text = MALFORMED[case]
    with pytest.raises(floe.InvalidInputError) as e:
        CALLS[call](repo, text)
    assert isinstance(e.value, ValueError)
    assert e.value.kind == "invalid-snapshot-id"
    assert f"invalid snapshot id: `{text}`" in str(e.value)


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("case", sorted(UNKNOWN))
def test_unknown_id_is_snapshot_not_found(repo, call, case):
    with pytest.raises(floe.SnapshotNotFoundError) as e:
        CALLS[call](repo, UNKNOWN[case])
    assert isinstance(e.value, KeyError)
    assert "snapshot id not found" in str(e.value)
    # Nothing moved or appeared.
    assert repo.list_branches() == {"main"} and repo.list_tags() == set()


def test_ids_are_read_as_icechunk_reads_them(repo):
    """Crockford aliases, either case and padding bits name the same snapshot."""
    initial = list(repo.ancestry(branch="main"))[-1].id
    assert initial == "1CECHNKREP0F1RSTCMT0"
    for text in (
        initial.lower(),
        initial[:-1] + "1",
        initial.replace("0", "O"),
        initial.replace("1", "I"),
        initial.replace("1", "l"),
    ):
        assert repo.lookup_snapshot(text).id == initial, text
        assert repo.readonly_session(snapshot_id=text).snapshot_id == initial, text
    with pytest.raises(floe.SnapshotNotFoundError, match="ZZZZZZZZZZZZZZZZZZZG"):
        repo.lookup_snapshot("Z" * 20)
    main = repo.lookup_branch("main")
    assert len(repo.diff(from_snapshot_id=initial.lower(), to_snapshot_id=main).new_groups) == 1


def test_async_twins_raise_the_same_classes(repo):
    with pytest.raises(floe.SnapshotNotFoundError):
        asyncio.run(repo.diff_async(from_snapshot_id="Z" * 20, to_branch="main"))
    with pytest.raises(floe.InvalidInputError):
        asyncio.run(repo.diff_async(from_branch="main", to_snapshot_id="ABC"))
    with pytest.raises(floe.SnapshotNotFoundError):
        asyncio.run(repo.readonly_session_async(snapshot_id="Z" * 20))
