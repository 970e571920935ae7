"""Store errors keep Icechunk's types: `exists` on a key no Zarr hierarchy has raises
InvalidInputError (also a ValueError) rather than answering False, and writes to a
read-only store raise the engine's ReadOnlyError rather than zarr's ValueError."""

import asyncio

import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype

import floe


def _repo():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    root = zarr.create_group(s.store)
    root.create_array("a", shape=(4,), chunks=(2,), dtype="i4", fill_value=0)[0:2] = [1, 2]
    s.commit("tree")
    return repo


@pytest.mark.parametrize(
    "key, expected",
    [
        ("zarr.json", True),
        ("a/zarr.json", True),
        ("a/c/0", True),
        ("a/c/1", False),
        ("a/c", False),
        ("nope/zarr.json", False),
        ("nope/c/0/0", False),
        ("a/.zarray", False),
    ],
)
def test_exists_answers_for_zarr_keys(key, expected):
    store = _repo().readonly_session("main").store
    assert asyncio.run(store.exists(key)) is expected


@pytest.mark.parametrize("key", ["foo", "a/c/x", "a//b", ""])
def test_exists_raises_for_keys_no_hierarchy_has(key):
    store = _repo().readonly_session("main").store
    with pytest.raises(floe.InvalidInputError):
        asyncio.run(store.exists(key))
    # Also a ValueError, as Icechunk's InvalidInputError.
    with pytest.raises(ValueError):
        asyncio.run(store.exists(key))


def _value():
    return default_buffer_prototype().buffer.from_bytes(b'{"zarr_format":3,"node_type":"group"}')


@pytest.mark.parametrize("write", ["set", "delete", "delete_dir", "clear"])
def test_writes_to_a_read_only_session_store_raise_read_only_error(write):
    store = _repo().readonly_session("main").store
    call = {
        "set": lambda: store.set("g/zarr.json", _value()),
        "delete": lambda: store.delete("a/zarr.json"),
        "delete_dir": lambda: store.delete_dir("a"),
        "clear": lambda: store.clear(),
    }[write]
    with pytest.raises(floe.ReadOnlyError):
        asyncio.run(call())


def test_writes_through_a_read_only_view_raise_read_only_error():
    repo = _repo()
    store = repo.writable_session("main").store.with_read_only(True)
    with pytest.raises(floe.ReadOnlyError):
        asyncio.run(store.set("g/zarr.json", _value()))
    assert issubclass(floe.ReadOnlyError, floe.FloeError)
    assert not issubclass(floe.ReadOnlyError, ValueError)


def test_invalid_keys_written_raise_invalid_input_error():
    store = _repo().writable_session("main").store
    with pytest.raises(floe.InvalidInputError):
        asyncio.run(store.set("foo", _value()))


def test_metadata_keys_are_answered_from_the_session_without_a_round_trip(monkeypatch):
    """Gets of metadata keys and sets of `zarr.json` are answered from the session's
    memory (no batched read, no awaited write); their answers and errors are those of
    the awaited path, which chunk keys still take."""
    repo = _repo()
    s = repo.writable_session("main")
    store = s.store
    proto = default_buffer_prototype()
    asyncio.run(store.get("a/c/0", proto))  # loads the session's snapshot

    def no_batch(*args, **kwargs):
        raise AssertionError("a metadata key went through the batched read")

    class NoAwaitedWrites:
        def __init__(self, native):
            self._inner = native

        def __getattr__(self, name):
            if name == "_prepare_set":
                raise AssertionError("a zarr.json set went through the awaited write")
            return getattr(self._inner, name)

    monkeypatch.setattr(store, "_get_batcher", no_batch)
    monkeypatch.setattr(store, "_native", NoAwaitedWrites(store._native))
    doc = asyncio.run(store.get("a/zarr.json", proto)).to_bytes()
    assert b'"node_type"' in doc and b'"array"' in doc
    assert asyncio.run(store.get("nope/zarr.json", proto)) is None
    assert asyncio.run(store.get("a/.zarray", proto)) is None
    assert asyncio.run(store.get(".zattrs", proto)) is None
    with pytest.raises(floe.InvalidInputError):
        asyncio.run(store.get("a//zarr.json", proto))
    group = zarr.open_group(store, mode="r+")
    group.attrs["k"] = 1
    assert zarr.open_group(store, mode="r").attrs["k"] == 1
    with pytest.raises(AssertionError, match="batched read"):
        asyncio.run(store.get("a/c/0", proto))
    s.commit("attrs")
    assert zarr.open_group(repo.readonly_session("main").store, mode="r").attrs["k"] == 1
    with pytest.raises(floe.ReadOnlyError):
        asyncio.run(store.set("g/zarr.json", _value()))
