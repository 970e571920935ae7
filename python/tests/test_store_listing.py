"""Listing as Icechunk's store lists: "/" (and "") is the whole store, the root
zarr.json included; a prefix matches whole path segments ("0" is not "00");
consolidated metadata is not offered."""

import asyncio

import pytest
import zarr

import floe


@pytest.fixture
def store():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    root = zarr.create_group(s.store)
    for name in ("0", "00"):
        a = root.create_array(name, shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
        a[...] = [1, 2, 3, 4]
    root.create_group("0x")
    return s.store


def _list(store, prefix):
    async def go():
        return sorted([k async for k in store.list_prefix(prefix)])

    return asyncio.run(go())


EVERYTHING = ["0/c/0", "0/c/1", "0/zarr.json", "00/c/0", "00/c/1", "00/zarr.json",
              "0x/zarr.json", "zarr.json"]


@pytest.mark.parametrize("prefix", ["/", ""])
def test_the_root_prefix_lists_the_whole_store(store, prefix):
    assert _list(store, prefix) == EVERYTHING


def test_list_is_the_whole_store(store):
    async def go():
        return sorted([k async for k in store.list()])

    assert asyncio.run(go()) == EVERYTHING


@pytest.mark.parametrize("prefix", ["0", "0/"])
def test_a_prefix_matches_whole_path_segments(store, prefix):
    assert _list(store, prefix) == ["0/c/0", "0/c/1", "0/zarr.json"]


def test_prefixes_that_share_leading_characters_are_distinct(store):
    assert _list(store, "00") == ["00/c/0", "00/c/1", "00/zarr.json"]
    assert _list(store, "0x") == ["0x/zarr.json"]
    assert _list(store, "0/c") == ["0/c/0", "0/c/1"]


def test_consolidated_metadata_is_not_offered(store):
    assert store.supports_consolidated_metadata is False
    assert floe.FloeStore.supports_consolidated_metadata is False
    # zarr then neither writes nor expects it.
    with pytest.raises(TypeError):
        zarr.consolidate_metadata(store)
    zarr.open_group(store, mode="r", use_consolidated=None)
