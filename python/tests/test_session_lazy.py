"""As in Icechunk 2.3.0, a writable session reads its snapshot on first use, not
when it opens: a branch whose tip snapshot is missing opens a session, and the
first read or write raises StorageError naming the missing object."""

import asyncio
import shutil

import numpy as np
import pytest
import zarr

import floe


@pytest.mark.parametrize("spec", [1, 2])
def test_a_missing_snapshot_is_the_error_of_the_first_use(tmp_path, spec):
    storage = floe.local_filesystem_storage(str(tmp_path))
    floe.Repository.create(storage, spec_version=spec)
    shutil.rmtree(tmp_path / "snapshots")

    repo = floe.Repository.open(storage)
    session = repo.writable_session("main")
    # What needs no snapshot answers.
    assert session.snapshot_id == "1CECHNKREP0F1RSTCMT0"
    assert session.branch == "main"
    assert not session.read_only
    assert not session.has_uncommitted_changes

    with pytest.raises(floe.StorageError, match=r"object not found.*1CECHNKREP0F1RSTCMT0"):
        zarr.group(store=session.store, overwrite=True)
    with pytest.raises(floe.StorageError, match="object not found"):
        session.status()
    with pytest.raises(floe.StorageError, match="object not found"):
        asyncio.run(session.store.exists("zarr.json"))
    # The base exception is Icechunk's.
    with pytest.raises(floe.IcechunkError):
        session.get_node_id("/")
    # A read-only session at a snapshot id still checks it exists when it opens.
    with pytest.raises(floe.SnapshotNotFoundError):
        repo.readonly_session(snapshot_id="1CECHNKREP0F1RSTCMT0")


def test_the_first_use_reads_the_snapshot_and_the_session_works(tmp_path):
    storage = floe.local_filesystem_storage(str(tmp_path))
    repo = floe.Repository.create(storage)
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="a", shape=(6,), chunks=(2,), dtype="i4",
                      fill_value=-1)[0:4] = [1, 2, 3, 4]
    s.commit("first")

    # The first call on a new session is a node lookup: it reads the snapshot.
    s = repo.writable_session("main")
    assert len(s.get_node_id("/a")) == 13
    s = repo.writable_session("main")
    arr = zarr.open_array(s.store, path="a", mode="r+")
    np.testing.assert_array_equal(arr[...], [1, 2, 3, 4, -1, -1])
    arr[4:6] = [5, 6]
    assert s.status()  # the change shows
    s.commit("second")
    check = repo.readonly_session(branch="main")
    np.testing.assert_array_equal(
        zarr.open_array(check.store, path="a", mode="r")[...], [1, 2, 3, 4, 5, 6])


def test_the_async_session_opens_without_its_snapshot_too(tmp_path):
    storage = floe.local_filesystem_storage(str(tmp_path))
    floe.Repository.create(storage)
    shutil.rmtree(tmp_path / "snapshots")

    async def go():
        repo = await floe.Repository.open_async(storage)
        session = await repo.writable_session_async("main")
        assert session.branch == "main"
        with pytest.raises(floe.StorageError, match="object not found"):
            await session.store.get("zarr.json", zarr.core.buffer.default_buffer_prototype())

    asyncio.run(go())
