"""Garbage collection keeps floe's collection state (`floe/gc-state`: the chunk ids of
the manifests it retained) beside the repository; `full=True` reads every manifest
and leaves the state alone. Both delete the same objects."""

import datetime
import shutil

import numpy as np
import zarr

import floe


def _repo(path):
    repo = floe.Repository.create(floe.local_filesystem_storage(str(path)))
    for k in range(3):
        s = repo.writable_session("main")
        # 2 KiB uncompressed chunks: native objects, not inline.
        a = zarr.create_array(s.store, name="a", shape=(8, 256), chunks=(1, 256), dtype="f8",
                              fill_value=0, compressors=None, overwrite=True)
        a[...] = np.full((8, 256), k + 1)
        s.commit(f"write {k}")
    return repo


def _objects(path):
    """The data objects (snapshots, manifests, transaction logs, chunks)."""
    keys = (str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    return sorted(k for k in keys if k.split("/")[0] in
                  ("snapshots", "manifests", "transactions", "chunks"))


def test_incremental_and_full_collections_delete_the_same_objects(tmp_path):
    base = tmp_path / "base"
    _repo(base)
    full_dir = tmp_path / "full"
    shutil.copytree(base, full_dir)
    now = datetime.datetime.now(datetime.timezone.utc)
    summaries = []
    for path, full in ((base, False), (full_dir, True)):
        repo = floe.Repository.open(floe.local_filesystem_storage(str(path)))
        repo.expire_snapshots(now)
        summaries.append(repo.garbage_collect(now, allow_recent_cutoff=True, full=full))
    assert summaries[0] == summaries[1]
    assert summaries[0].chunks_deleted == 16
    assert _objects(base) == _objects(full_dir)
    assert (base / "floe" / "gc-state").is_file()
    assert not (full_dir / "floe" / "gc-state").exists()
    # The state changes nothing a later collection deletes, and Icechunk's layout is
    # untouched by it.
    again = floe.Repository.open(floe.local_filesystem_storage(str(base)))
    assert again.garbage_collect(now, allow_recent_cutoff=True).chunks_deleted == 0
    np.testing.assert_array_equal(
        zarr.open_array(again.readonly_session("main").store, path="a", mode="r")[...],
        np.full((8, 256), 3),
    )
