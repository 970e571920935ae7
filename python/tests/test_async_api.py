"""Icechunk's ``*_async`` API: every awaitable twin gives what its blocking twin gives,
raises the same exception classes, and never blocks the event loop (native coroutines
on floe's tokio runtime)."""

import asyncio
import datetime

import numpy as np
import pytest
import zarr

import floe

pytestmark = pytest.mark.asyncio


def _storage(tmp_path, name="repo"):
    return floe.local_filesystem_storage(str(tmp_path / name))


def _write(session, name="a", values=(1, 2, 3, 4)):
    arr = zarr.create_array(session.store, name=name, shape=(len(values),), chunks=(1,),
                            dtype="i4", fill_value=0, overwrite=True)
    arr[...] = np.asarray(values, dtype="i4")


async def test_create_open_exists_and_spec_versions(tmp_path):
    storage = _storage(tmp_path)
    assert await floe.Repository.exists_async(storage) is False
    assert await floe.Repository.fetch_spec_version_async(storage) is None
    assert floe.Repository.fetch_spec_version(storage) is None

    repo = await floe.Repository.create_async(storage)
    assert isinstance(repo, floe.Repository)
    assert repo.spec_version == floe.SpecVersion.v2
    assert await floe.Repository.exists_async(storage) is True
    assert await floe.Repository.fetch_spec_version_async(storage) is floe.SpecVersion.v2
    assert floe.Repository.fetch_spec_version(storage) is floe.SpecVersion.v2
    with pytest.raises(floe.FloeError):
        await floe.Repository.create_async(storage)

    opened = await floe.Repository.open_async(storage)
    assert await opened.list_branches_async() == repo.list_branches() == {"main"}
    with pytest.raises(floe.FloeError):
        await floe.Repository.open_async(_storage(tmp_path, "missing"))

    v1 = await floe.Repository.create_async(_storage(tmp_path, "v1"), spec_version=1)
    assert v1.spec_version == floe.SpecVersion.v1
    assert floe.Repository.fetch_spec_version(_storage(tmp_path, "v1")) is floe.SpecVersion.v1
    with pytest.raises(ValueError):
        await floe.Repository.create_async(_storage(tmp_path, "v9"), spec_version=9)


async def test_open_or_create_creates_the_requested_version_once(tmp_path):
    storage = _storage(tmp_path)
    created = await floe.Repository.open_or_create_async(storage, create_version=1)
    assert created.spec_version == floe.SpecVersion.v1
    # Existing: opened as it is, whatever version is asked for creation.
    again = await floe.Repository.open_or_create_async(storage, create_version=2)
    assert again.spec_version == floe.SpecVersion.v1
    # The blocking twin takes the same argument.
    sync = floe.Repository.open_or_create(_storage(tmp_path, "s"), create_version=1)
    assert sync.spec_version == floe.SpecVersion.v1
    default = await floe.Repository.open_or_create_async(_storage(tmp_path, "d"))
    assert default.spec_version == floe.SpecVersion.v2


async def test_sessions_commit_and_read_back_like_the_blocking_twins(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    session = await repo.writable_session_async("main")
    assert session.branch == "main" and not session.read_only
    _write(session)
    sid = await session.commit_async("first", {"who": "async"})
    assert sid == repo.lookup_branch("main") == await repo.lookup_branch_async("main")
    assert session.read_only  # as the blocking commit: read-only afterwards
    with pytest.raises(floe.SessionStateError):
        await session.commit_async("again")

    ro = await repo.readonly_session_async(snapshot_id=sid)
    assert ro.read_only and ro.snapshot_id == sid
    np.testing.assert_array_equal(zarr.open_array(ro.store, path="a", mode="r")[...], [1, 2, 3, 4])
    ro_branch = await repo.readonly_session_async("main")
    assert ro_branch.snapshot_id == repo.readonly_session("main").snapshot_id
    with pytest.raises(ValueError):
        await repo.readonly_session_async("main", tag="x")

    empty = await repo.writable_session_async("main")
    with pytest.raises(floe.SessionStateError):
        await empty.commit_async("nothing")
    assert await empty.commit_async("nothing", allow_empty=True) == repo.lookup_branch("main")
    info = next(repo.ancestry(branch="main"))
    history = [s async for s in repo.async_ancestry(branch="main")]
    assert [h.id for h in history][1] == sid
    assert history[1].metadata == {"who": "async"}
    assert info.id == history[0].id


async def test_async_ancestry_equals_ancestry_across_batches_and_raises_like_it(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    for i in range(40):  # more than the first batches of 16 and 32
        s = await repo.writable_session_async("main")
        await s.commit_async(f"c{i}", allow_empty=True)
    await repo.create_tag_async("v1", repo.lookup_branch("main"))
    sync = [(h.id, h.parent_id, h.message, h.written_at) for h in repo.ancestry(branch="main")]
    got = [(h.id, h.parent_id, h.message, h.written_at)
           async for h in repo.async_ancestry(branch="main")]
    assert got == sync and len(got) == 41
    by_tag = [h.id async for h in repo.async_ancestry(tag="v1")]
    assert by_tag == [h[0] for h in sync]
    by_id = [h.id async for h in repo.async_ancestry(snapshot_id=sync[5][0])]
    assert by_id == [h[0] for h in sync[5:]]

    it = repo.async_ancestry(branch="main")
    assert (await it.__anext__()).id == sync[0][0]
    await it.aclose()
    with pytest.raises(StopAsyncIteration):
        await it.__anext__()

    with pytest.raises(floe.FloeError):
        [h async for h in repo.async_ancestry(branch="nope")]
    with pytest.raises(ValueError):
        repo.async_ancestry(branch="main", tag="v1")


async def test_branches_tags_and_their_errors(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    s = await repo.writable_session_async("main")
    _write(s)
    first = await s.commit_async("one")
    s = await repo.writable_session_async("main")
    _write(s, values=(5, 6, 7, 8))
    second = await s.commit_async("two")

    await repo.create_branch_async("dev", first)
    assert await repo.list_branches_async() == repo.list_branches() == {"main", "dev"}
    assert await repo.lookup_branch_async("dev") == first
    with pytest.raises(floe.FloeError):
        await repo.create_branch_async("dev", first)
    # The branch is not where the caller expects it: the same error as the blocking twin.
    with pytest.raises(floe.FloeError) as blocking:
        repo.reset_branch("dev", second, from_snapshot_id=second)
    with pytest.raises(type(blocking.value), match="moved"):
        await repo.reset_branch_async("dev", second, from_snapshot_id=second)
    await repo.reset_branch_async("dev", second, from_snapshot_id=first)
    assert repo.lookup_branch("dev") == second
    with pytest.raises(ValueError):
        await repo.create_branch_async("bad", "not-an-id")
    await repo.delete_branch_async("dev")
    assert await repo.list_branches_async() == {"main"}
    with pytest.raises(floe.FloeError):
        await repo.lookup_branch_async("dev")

    await repo.create_tag_async("v1", first)
    assert await repo.list_tags_async() == repo.list_tags() == {"v1"}
    assert await repo.lookup_tag_async("v1") == first
    await repo.delete_tag_async("v1")
    assert await repo.list_tags_async() == set()
    with pytest.raises(floe.FloeError):
        await repo.create_tag_async("v1", first)  # a deleted tag's name is never reused

    assert (await repo.diff_async(from_snapshot_id=first, to_branch="main")).updated_arrays \
        == repo.diff(from_snapshot_id=first, to_branch="main").updated_arrays
    assert repr(await repo.diff_async(from_snapshot_id=first, to_snapshot_id=second)) == \
        repr(repo.diff(from_snapshot_id=first, to_snapshot_id=second))


async def test_metadata_config_expiry_and_gc(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    await repo.set_metadata_async({"owner": "a", "n": 1})
    assert await repo.get_metadata_async() == repo.get_metadata() == {"owner": "a", "n": 1}
    assert await repo.update_metadata_async({"n": 2}) == {"owner": "a", "n": 2}
    await repo.save_config_async()
    await repo.save_config_async(repo.config)

    for i in range(3):
        s = await repo.writable_session_async("main")
        _write(s, values=(i, i, i, i))
        await s.commit_async(f"c{i}")
    now = datetime.datetime.now(datetime.UTC)
    dry_async = await repo.garbage_collect_async(now, dry_run=True, allow_recent_cutoff=True)
    dry_sync = repo.garbage_collect(now, dry_run=True, allow_recent_cutoff=True)
    assert dry_async == dry_sync
    with pytest.raises(floe.FloeError):
        await repo.garbage_collect_async(now)  # a cut-off within the safety window
    expired = await repo.expire_snapshots_async(now)
    assert isinstance(expired, set) and len(expired) >= 2
    assert await repo.expire_snapshots_async(now) == set()


async def test_forks_merge_amend_rebase_and_move(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    s = await repo.writable_session_async("main")
    _write(s)
    base = await s.commit_async("base")

    s = await repo.writable_session_async("main")
    f1, f2 = s.fork(), s.fork()
    assert isinstance(f1, floe.ForkSession)
    zarr.open_array(f1.store, path="a", mode="r+")[0] = 10
    zarr.open_array(f2.store, path="a", mode="r+")[1] = 20
    await s.merge_async(f1, f2)
    merged = await s.commit_async("merged")
    ro = repo.readonly_session(snapshot_id=merged)
    np.testing.assert_array_equal(zarr.open_array(ro.store, path="a", mode="r")[...], [10, 20, 3, 4])

    # Two forks writing one chunk: the fork merged last wins, as the blocking one.
    s = await repo.writable_session_async("main")
    f1, f2 = s.fork(), s.fork()
    zarr.open_array(f1.store, path="a", mode="r+")[0] = 1
    zarr.open_array(f2.store, path="a", mode="r+")[0] = 2
    await s.merge_async(f1, f2)
    assert zarr.open_array(s.store, path="a", mode="r")[0] == 2
    # Two forks changing one array's metadata: the merge fails as a whole.
    s = await repo.writable_session_async("main")
    f1, f2 = s.fork(), s.fork()
    zarr.open_array(f1.store, path="a", mode="r+").attrs["by"] = 1
    zarr.open_array(f2.store, path="a", mode="r+").attrs["by"] = 2
    with pytest.raises(floe.ConflictError):
        await s.merge_async(f1, f2)
    assert not s.has_uncommitted_changes

    # amend replaces the tip, keeping its parent.
    s = await repo.writable_session_async("main")
    zarr.open_array(s.store, path="a", mode="r+")[3] = 40
    amended = await s.amend_async("merged, amended")
    tip = next(repo.ancestry(branch="main"))
    assert tip.id == amended and tip.parent_id == base and tip.message == "merged, amended"

    # rebase: a session behind the branch moves onto it.
    behind = await repo.writable_session_async("main")
    ahead = await repo.writable_session_async("main")
    zarr.open_array(ahead.store, path="a", mode="r+")[2] = 30
    await ahead.commit_async("ahead")
    zarr.open_array(behind.store, path="a", mode="r+")[1] = 21
    await behind.rebase_async()
    assert behind.snapshot_id == repo.lookup_branch("main")
    after = await behind.commit_async("rebased")
    ro = repo.readonly_session(snapshot_id=after)
    np.testing.assert_array_equal(zarr.open_array(ro.store, path="a", mode="r")[...], [10, 21, 30, 40])

    r = await repo.rearrange_session_async("main")
    await r.move_async("/a", "/b")
    moved = await r.commit_async("moved")
    group = zarr.open_group(repo.readonly_session(snapshot_id=moved).store, mode="r")
    assert [name for name, _ in group.arrays()] == ["b"]


async def test_the_event_loop_keeps_running_while_an_operation_is_awaited(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    s = await repo.writable_session_async("main")
    arr = zarr.create_array(s.store, name="big", shape=(4000,), chunks=(1,), dtype="i4",
                            fill_value=0)
    arr[...] = np.arange(4000, dtype="i4")
    for i in range(30):
        await repo.writable_session_async("main")

    async def ticks_while(awaitable):
        task = asyncio.ensure_future(awaitable)
        ticks = 0
        while not task.done():
            await asyncio.sleep(0)
            ticks += 1
        return ticks, task.result()

    # A commit of 4,000 chunk refs: the loop keeps turning while the engine works.
    ticks, sid = await ticks_while(s.commit_async("big"))
    assert sid == repo.lookup_branch("main")
    assert ticks >= 10, f"the event loop was blocked: {ticks} turns during the commit"

    # Many awaits at once overlap on the runtime, in any order, with correct results.
    results = await asyncio.gather(*[repo.lookup_branch_async("main") for _ in range(50)],
                                   *[repo.list_branches_async() for _ in range(50)])
    assert results[:50] == [sid] * 50 and results[50:] == [{"main"}] * 50


async def test_chunk_coordinates_lists_initialized_chunks_committed_or_not(tmp_path):
    repo = await floe.Repository.create_async(_storage(tmp_path))
    s = await repo.writable_session_async("main")
    arr = zarr.create_array(s.store, name="g/m", shape=(4, 6), chunks=(2, 2), dtype="i4",
                            fill_value=0)
    arr[0:2, 0:2] = 1
    arr[2:4, 4:6] = 2
    await s.commit_async("two chunks")
    s = await repo.writable_session_async("main")
    zarr.open_array(s.store, path="g/m", mode="r+")[0:2, 2:4] = 3
    coords = [c async for c in s.chunk_coordinates("/g/m")]
    assert coords == [(0, 0), (0, 1), (1, 2)]
    ro = repo.readonly_session("main")
    assert [c async for c in ro.chunk_coordinates("/g/m", batch_size=1)] == [(0, 0), (1, 2)]
    with pytest.raises(floe.FloeError):
        [c async for c in s.chunk_coordinates("/g")]
