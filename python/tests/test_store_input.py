"""FloeStore checks its arguments' types before it does anything, as Icechunk's
store does: a value that is not a zarr ``Buffer`` (an ``int`` has ``to_bytes()``
too), a key or prefix that is not a ``str``, a prototype that is not a
``BufferPrototype`` or a byte range that is not one of zarr's byte requests raises
``TypeError`` and stores, reads and deletes nothing."""

import asyncio

import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer

import floe

PROTO = default_buffer_prototype()
KEY = "a/c/0"
NOT_STR = [5, b"a/c/0", None, ("a",), 1.5]


def run(coro):
    return asyncio.run(coro)


async def collect(iterator):
    return [k async for k in iterator]


@pytest.fixture
def written(tmp_path):
    """A writable store holding an int32 array `a` of 4 elements in one chunk."""
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path / "r")))
    session = repo.writable_session("main")
    a = zarr.create_array(session.store, name="a", shape=(4,), chunks=(4,), dtype="i4")
    a[...] = np.arange(4, dtype="i4")
    return session.store


def stored(store, key=KEY):
    data = run(store.get(key, PROTO))
    return None if data is None else data.to_bytes()


def test_set_refuses_an_int_and_keeps_the_array_readable(written):
    before = stored(written)
    with pytest.raises(TypeError, match="must be a Buffer instance"):
        run(written.set(KEY, 5))
    for value in [b"\x00" * 16, bytearray(16), memoryview(b"x"), "text", None, [1, 2]]:
        with pytest.raises(TypeError, match="`value` must be a Buffer"):
            run(written.set(KEY, value))
    assert stored(written) == before
    a = zarr.open_array(written, path="a", mode="r")
    np.testing.assert_array_equal(a[...], np.arange(4, dtype="i4"))


def test_set_if_not_exists_checks_before_looking(written):
    # The key exists, so the old code returned quietly whatever the value was.
    with pytest.raises(TypeError, match="must be a Buffer instance"):
        run(written.set_if_not_exists(KEY, 5))
    with pytest.raises(TypeError, match="must be a Buffer instance"):
        run(written.set_if_not_exists("new/zarr.json", 5))
    assert stored(written, "new/zarr.json") is None
    with pytest.raises(TypeError, match="`key` must be a str"):
        run(written.set_if_not_exists(5, Buffer.from_bytes(b"{}")))


@pytest.mark.parametrize("key", NOT_STR)
def test_every_key_argument_must_be_a_str(written, key):
    value = Buffer.from_bytes(b"\x00" * 16)
    calls = [
        lambda: written.get(key, PROTO),
        lambda: written.exists(key),
        lambda: written.set(key, value),
        lambda: written.set_if_not_exists(key, value),
        lambda: written.delete(key),
        lambda: written.delete_dir(key),
        lambda: written.getsize(key),
        lambda: written.getsize_prefix(key),
        lambda: written.is_empty(key),
        lambda: written.get_partial_values(PROTO, [(key, None)]),
        lambda: collect(written.list_prefix(key)),
        lambda: collect(written.list_dir(key)),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="must be a str"):
            run(call())
    assert stored(written) is not None, "nothing was deleted"


def test_list_methods_raise_at_the_call_not_at_the_first_item(written):
    with pytest.raises(TypeError, match="`prefix` must be a str"):
        written.list_prefix(5)
    with pytest.raises(TypeError, match="`prefix` must be a str"):
        written.list_dir(None)
    assert "a/zarr.json" in run(collect(written.list_prefix("")))
    assert set(run(collect(written.list_dir("")))) == {"zarr.json", "a"}


@pytest.mark.parametrize("prototype", [None, Buffer, "cpu", (Buffer, None)])
def test_get_refuses_a_prototype_that_is_not_a_buffer_prototype(written, prototype):
    with pytest.raises(TypeError, match="`prototype` must be a BufferPrototype"):
        run(written.get(KEY, prototype))
    with pytest.raises(TypeError, match="`prototype` must be a BufferPrototype"):
        run(written.get_partial_values(prototype, [(KEY, None)]))


@pytest.mark.parametrize("byte_range", [(0, 4), slice(0, 4), 4, "0-4", [0, 4]])
def test_get_refuses_a_byte_range_that_is_not_a_byte_request(written, byte_range):
    with pytest.raises(TypeError, match="`byte_range` must be None, a RangeByteRequest"):
        run(written.get(KEY, PROTO, byte_range))
    with pytest.raises(TypeError, match="`byte_range` must be None, a RangeByteRequest"):
        run(written.get_partial_values(PROTO, [(KEY, byte_range)]))


def test_byte_request_fields_are_non_negative_ints(written):
    for request in [
        RangeByteRequest(0.5, 4),
        RangeByteRequest(0, "4"),
        OffsetByteRequest(None),
        SuffixByteRequest(True),
    ]:
        with pytest.raises(TypeError, match="must be an int"):
            run(written.get(KEY, PROTO, request))
    for request in [RangeByteRequest(-1, 4), OffsetByteRequest(-2), SuffixByteRequest(-3)]:
        with pytest.raises(ValueError, match="must not be negative"):
            run(written.get(KEY, PROTO, request))
    whole = stored(written)
    assert run(written.get(KEY, PROTO, RangeByteRequest(1, 3))).to_bytes() == whole[1:3]
    assert run(written.get(KEY, PROTO, OffsetByteRequest(2))).to_bytes() == whole[2:]
    assert run(written.get(KEY, PROTO, SuffixByteRequest(2))).to_bytes() == whole[-2:]


def test_get_partial_values_checks_every_pair_before_reading(written):
    for key_ranges in [5, "a/c/0", [KEY], [(KEY,)], [(KEY, None, None)], [None]]:
        with pytest.raises(TypeError):
            run(written.get_partial_values(PROTO, key_ranges))
    got = run(
        written.get_partial_values(
            PROTO, [(KEY, None), ["missing", None], (KEY, SuffixByteRequest(1))]
        )
    )
    assert got[0].to_bytes() == stored(written)
    assert got[1] is None
    assert got[2].to_bytes() == stored(written)[-1:]


def test_set_partial_values_checks_then_refuses(written):
    method = written.set_partial_values
    for triples in [
        5,
        [(KEY, 0)],
        [(5, 0, b"x")],
        [(KEY, "0", b"x")],
        [(KEY, True, b"x")],
        [(KEY, 0, 5)],
        [(KEY, 0, Buffer.from_bytes(b"x"))],
    ]:
        with pytest.raises(TypeError):
            run(method(triples))
    with pytest.raises(ValueError, match="must not be negative"):
        run(method([(KEY, -1, b"x")]))
    with pytest.raises(NotImplementedError):
        run(method([(KEY, 0, b"x")]))
    with pytest.raises(floe.ReadOnlyError, match="read-only"):
        run(written.with_read_only(True).set_partial_values([(KEY, 0, b"x")]))
    assert written.supports_partial_writes is False


def test_a_read_only_store_checks_types_first(written):
    ro = written.with_read_only(True)
    with pytest.raises(TypeError, match="must be a Buffer instance"):
        run(ro.set(KEY, 5))
    with pytest.raises(floe.ReadOnlyError, match="read-only"):
        run(ro.set(KEY, Buffer.from_bytes(b"x")))
