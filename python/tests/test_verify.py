"""``Repository.verify`` (floe's own integrity check, ``floe verify``): a healthy
repository has no problem; a deleted and an emptied chunk are found with their
array, chunk index and key."""

from __future__ import annotations

import numpy as np
import zarr

import floe


def _repo(tmp_path):
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path)))
    session = repo.writable_session("main")
    array = zarr.create_array(
        session.store, name="a", shape=(4, 1024), chunks=(1, 1024), dtype="uint8", compressors=None
    )
    array[:] = np.arange(4 * 1024).astype("uint8").reshape(4, 1024)
    session.commit("values")
    return repo


def test_healthy_repository_has_no_problem(tmp_path):
    report = _repo(tmp_path).verify(read_chunks=True)
    assert report["ok"] is True
    assert report["problems"] == []
    assert report["refs"] == 1
    assert report["snapshots"] == 2
    assert report["chunk_objects"] == 4


def test_deleted_and_empty_chunks_are_found(tmp_path):
    repo = _repo(tmp_path)
    chunks = sorted((tmp_path / "chunks").iterdir())
    chunks[0].unlink()
    chunks[1].write_bytes(b"")
    report = repo.verify()
    assert report["ok"] is False
    kinds = sorted(p["kind"] for p in report["problems"])
    assert kinds == ["missing_chunk", "zero_length_chunk"]
    for problem in report["problems"]:
        assert problem["array"] == "/a"
        assert problem["key"].startswith("chunks/")
        assert problem["ref"] == "branch:main"
        assert len(problem["chunk"]) == 2
    missing = next(p for p in report["problems"] if p["kind"] == "missing_chunk")
    assert missing["key"] == f"chunks/{chunks[0].name}"
