"""floe.clone_repository (issue 47, item 2) from Python: a full clone reads as the
source, selected refs, resuming over an earlier clone, and the refusals."""

import numpy as np
import pytest
import zarr

import floe


def _storage(tmp_path, name):
    return floe.local_filesystem_storage(str(tmp_path / name))


def _build(tmp_path, name, values):
    repo = floe.Repository.create(_storage(tmp_path, name))
    for i, v in enumerate(values):
        s = repo.writable_session("main")
        if i == 0:
            zarr.create_array(s.store, name="a", shape=(4,), chunks=(2,), dtype="i4")
        zarr.open_array(s.store, path="a")[:] = v
        s.commit(f"write {v}")
    return repo


def _read(repo, **ref):
    s = repo.readonly_session(**ref)
    return zarr.open_array(s.store, path="a", mode="r")[:].tolist()


def _log(repo, **ref):
    return [s.id for s in repo.ancestry(**ref)]


def test_a_clone_reads_as_the_source_and_resumes(tmp_path):
    src = _build(tmp_path, "src", [1, 2])
    src.create_tag("v1", src.lookup_branch("main"))
    report = floe.clone_repository(_storage(tmp_path, "src"), _storage(tmp_path, "dst"))
    assert report["ok"] is True
    assert report["objects_copied"] > 0
    assert set(report["refs"]) == {"branch:main", "tag:v1"}
    dst = floe.Repository.open(_storage(tmp_path, "dst"))
    assert _log(dst, branch="main") == _log(src, branch="main")
    assert _read(dst, tag="v1") == [2, 2, 2, 2]

    s = src.writable_session("main")
    zarr.open_array(s.store, path="a")[:] = np.int32(3)
    s.commit("write 3")
    again = floe.clone_repository(
        _storage(tmp_path, "src"), _storage(tmp_path, "dst"), verify=False
    )
    assert again["verify"] is None
    assert again["objects_skipped"] > 0
    dst = floe.Repository.open(_storage(tmp_path, "dst"))
    assert _read(dst, branch="main") == [3, 3, 3, 3]


def test_selected_refs_and_refusals(tmp_path):
    src = _build(tmp_path, "src", [1, 2])
    src.create_branch("side", src.lookup_branch("main"))
    src.create_tag("v1", src.lookup_branch("main"))
    report = floe.clone_repository(
        _storage(tmp_path, "src"), _storage(tmp_path, "some"), refs=["v1"]
    )
    assert set(report["refs"]) == {"branch:main", "tag:v1"}
    some = floe.Repository.open(_storage(tmp_path, "some"))
    assert "side" not in some.list_branches()

    _build(tmp_path, "other", [9])
    with pytest.raises(floe.InvalidInputError):
        floe.clone_repository(_storage(tmp_path, "src"), _storage(tmp_path, "other"))
    other = floe.Repository.open(_storage(tmp_path, "other"))
    assert _read(other, branch="main") == [9, 9, 9, 9]
    with pytest.raises(floe.RepositoryNotFoundError):
        floe.clone_repository(_storage(tmp_path, "nothing"), _storage(tmp_path, "x"))
