"""floe's exceptions follow Icechunk 2.3.0's tree: classes, builtin bases, kinds,
messages users match on, notes, pickling, and errors raised through the store."""

import asyncio
import pickle

import pytest
import zarr

import floe
from floe._floe import _all_error_kinds


def _repo(spec_version=None):
    repo = floe.Repository.create(floe.in_memory_storage(), spec_version=spec_version)
    s = repo.writable_session("main")
    zarr.create_group(s.store).create_array("a", shape=(4,), chunks=(1,), dtype="i4")
    s.commit("tree")
    return repo


def _conflicting_sessions(repo):
    a, b = repo.writable_session("main"), repo.writable_session("main")
    zarr.open_array(a.store, path="a")[:] = 1
    zarr.open_array(b.store, path="a")[:] = 2
    a.commit("a")
    return b


def test_classes_and_bases():
    assert floe.FloeError is floe.IcechunkError
    assert issubclass(floe.RebaseFailedError, floe.ConflictError)
    for cls in (floe.NodeNotFoundError, floe.SnapshotNotFoundError, floe.RefNotFoundError,
                floe.RepositoryNotFoundError):
        assert issubclass(cls, floe.NotFoundError) and issubclass(cls, KeyError)
    assert issubclass(floe.InvalidInputError, ValueError)
    for cls in (floe.AlreadyExistsError, floe.ReadOnlyError, floe.SessionStateError,
                floe.StorageError, floe.FormatError, floe.InternalError):
        assert issubclass(cls, floe.IcechunkError)


def test_error_kinds_match_the_native_list():
    assert set(_all_error_kinds()) == {k.value for k in floe.ErrorKind}
    assert len(_all_error_kinds()) == len(set(_all_error_kinds()))


def test_plain_commit_conflict_has_parents_and_kind():
    repo = _repo()
    b = _conflicting_sessions(repo)
    with pytest.raises(floe.ConflictError) as e:
        b.commit("b")
    assert type(e.value) is floe.ConflictError
    assert e.value.kind == floe.ErrorKind.COMMIT_CONFLICT
    assert e.value.actual_parent == repo.lookup_branch("main")
    assert e.value.expected_parent != e.value.actual_parent
    assert str(e.value).startswith("Failed to commit, expected parent: Some(")
    copy = pickle.loads(pickle.dumps(e.value))
    assert (type(copy), copy.expected_parent, copy.kind) == (
        floe.ConflictError, e.value.expected_parent, e.value.kind)


def test_rebase_failure_lists_chunk_conflicts():
    repo = _repo()
    b = _conflicting_sessions(repo)
    with pytest.raises(floe.RebaseFailedError) as e:
        b.commit("b", rebase_with=floe.ConflictDetector())
    err = e.value
    assert err.kind == "rebase-failed"
    assert err.snapshot == repo.lookup_branch("main")
    [conflict] = err.conflicts
    assert conflict.conflict_type == floe.ConflictType.ChunkDoubleUpdate
    assert conflict.path == "/a"
    assert sorted(conflict.conflicted_chunks) == [[0], [1], [2], [3]]
    assert str(err) == f"Rebase failed on snapshot {err.snapshot}: 1 conflicts found"


@pytest.mark.parametrize("spec_version", [1, 2])
def test_not_found_errors(spec_version, tmp_path):
    repo = _repo(spec_version)
    with pytest.raises(floe.RefNotFoundError, match="ref not found `nope`") as e:
        repo.lookup_branch("nope")
    assert isinstance(e.value, KeyError) and e.value.kind == "ref-not-found"
    with pytest.raises(floe.RefNotFoundError):
        repo.readonly_session(tag="nope")
    with pytest.raises(floe.SnapshotNotFoundError) as e:
        repo.readonly_session(snapshot_id="AAAAAAAAAAAAAAAAAAA0")
    assert e.value.kind == "snapshot-not-found"
    with pytest.raises(floe.RepositoryNotFoundError, match="the repository doesn't exist") as e:
        floe.Repository.open(floe.local_filesystem_storage(str(tmp_path / "none")))
    assert e.value.kind == "repository-not-found"
    assert e.value.__notes__  # the cause chain rides along


def test_kinds_of_state_and_input_errors():
    repo = _repo()
    snap = repo.lookup_branch("main")
    repo.create_tag("t", snap)
    with pytest.raises(floe.AlreadyExistsError) as e:
        repo.create_tag("t", snap)
    assert e.value.kind == "tag-already-exists"
    with pytest.raises(floe.SessionStateError, match="no changes made to the session") as e:
        repo.writable_session("main").commit("nothing")
    assert e.value.kind == "no-changes-to-commit"
    with pytest.raises(floe.SessionStateError, match="main branch cannot be deleted"):
        repo.delete_branch("main")
    with pytest.raises(floe.InvalidInputError) as e:
        repo.readonly_session(snapshot_id="not a snapshot id")
    assert e.value.kind == "invalid-snapshot-id" and isinstance(e.value, ValueError)
    with pytest.raises(floe.ConflictError, match="branch update conflict") as e:
        repo.reset_branch("main", snap, from_snapshot_id="1CECHNKREP0F1RSTCMT0")
    assert e.value.kind == "branch-update-conflict"
    with pytest.raises(floe.NodeNotFoundError) as e:
        repo.rearrange_session("main").move("/nope", "/elsewhere")
    assert e.value.kind == "node-not-found"


def test_spec1_only_operations_say_upgrade():
    repo = _repo(1)
    with pytest.raises(floe.FormatError, match="upgrade"):
        repo.get_metadata()
    s = repo.writable_session("main")
    zarr.open_group(s.store).attrs["x"] = 1
    with pytest.raises(floe.FormatError, match="upgrade"):
        s.amend("again")


def test_errors_through_the_store_keep_their_class():
    repo = _repo()
    store = repo.readonly_session("main").store
    async def write():
        await store._store.set("zarr.json", b"{}")

    with pytest.raises(floe.ReadOnlyError) as e:
        asyncio.run(write())
    assert e.value.kind in ("read-only-session", "read-only-store")
    with pytest.raises(floe.InvalidInputError):
        asyncio.run(store.exists("foo"))


@pytest.mark.parametrize(
    "err",
    [
        floe.IcechunkError("m"),
        floe.StorageError("m", "io"),
        floe.NodeNotFoundError("m", "node-not-found"),
        floe.ConflictError(None, None, "custom", "branch-update-conflict"),
        floe.RebaseFailedError("S", [floe.Conflict(floe.ConflictType(6), "/a", [[0]])]),
    ],
)
def test_pickle_keeps_class_message_and_kind(err):
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), copy.message, copy.kind) == (type(err), err.message, err.kind)
    if isinstance(err, floe.RebaseFailedError):
        assert copy.conflicts == err.conflicts


def test_reprs():
    assert repr(floe.IcechunkError("boom")) == 'floe.IcechunkError(message="boom", kind="unknown")'
    assert str(floe.ConflictError("abc", "def")) == (
        'Failed to commit, expected parent: Some("abc"), actual parent: Some("def")')
    assert repr(floe.ConflictType.ChunkDoubleUpdate) == "ChunkDoubleUpdate"
    assert str(floe.ConflictType.ChunkDoubleUpdate) == "Chunk double update"
    text = repr(floe.Conflict(floe.ConflictType(6), "/my/array", [[0, 0]]))
    assert text.startswith("<floe.conflicts.Conflict>\n") and "conflicted_chunks: [[0, 0]]" in text
