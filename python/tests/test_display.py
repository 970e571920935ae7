"""Notebook and terminal display of repositories, sessions, stores, snapshots,
diffs and ops-log entries, in Icechunk's layout (a `<package.Class>` header, then
`name: value` lines; HTML in a `div.icechunk-repr`)."""

import datetime

import zarr

import floe


def _repo():
    repo = floe.Repository.create(floe.in_memory_storage())
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="arr", shape=(4,), chunks=(2,), dtype="i4")[:] = 1
    s.commit("first")
    return repo


def test_repository_session_and_store():
    repo = _repo()
    text = repr(repo)
    assert text.startswith("<floe.Repository (v2)>\n") and "storage:" in text
    s = repo.writable_session("main")
    text = repr(s)
    assert text.startswith("<floe.session.Session>\n")
    assert "read_only: False" in text and "branch: main" in text
    assert f"snapshot_id: {s.snapshot_id}" in text
    ro = repr(repo.readonly_session("main"))
    assert "read_only: True" in ro and "branch" not in ro
    assert repr(s.store).startswith("<floe.IcechunkStore>\n")
    for obj in (repo, s, s.store):
        assert '<div class="icechunk-repr">' in obj._repr_html_()


def test_snapshot_info_diff_update_stats_and_flags():
    repo = _repo()
    info = next(repo.ancestry(branch="main"))
    text = repr(info)
    assert text.startswith("<floe.snapshots.SnapshotInfo>\n")
    assert f"id: {info.id}" in text and "message: first" in text
    assert "floe.snapshots.SnapshotInfo" in info._repr_html_()
    diff = repo.diff(from_snapshot_id=info.parent_id, to_snapshot_id=info.id)
    assert "Arrays created:\n    /arr\n" in repr(diff)
    assert "Chunks updated:\n    /arr:\n        [0]\n        [1]\n" in repr(diff)
    assert "floe.snapshots.Diff" in diff._repr_html_()
    update = next(repo.ops_log())
    assert repr(update).startswith("<floe.ops.Update>\nkind: floe.ops.UpdateType.NewCommit(")
    assert "<floe.stats.ChunkStorageStats>" in repr(repo.chunk_storage_stats())
    assert "<floe.config.FeatureFlag>" in repr(repo.feature_flags()[0])
    gc = repo.garbage_collect(
        datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=2)
    )
    assert repr(gc).startswith("<floe.ops.GCSummary>\n") and gc["chunks_deleted"] == 0


def test_names_follow_the_package_users_import(as_icechunk):
    assert repr(floe.IcechunkError("x")).startswith("icechunk.IcechunkError(")
    assert repr(_repo().readonly_session("main")).startswith("<icechunk.session.Session>")
    assert repr(floe.CachingConfig()).startswith("icechunk.config.CachingConfig(")


def test_names_are_floes_without_install_as_icechunk():
    assert repr(floe.IcechunkError("x")).startswith("floe.IcechunkError(")
    assert repr(floe.CachingConfig()).startswith("floe.config.CachingConfig(")


def test_ancestry_graph():
    repo = _repo()
    repo.create_tag("v1", repo.lookup_branch("main"))
    plain = str(repo.ancestry_graph(branch="main"))
    assert "first" in plain and "main" in plain and "tag: v1" in plain
    assert "\x1b" not in plain
    assert "\x1b" in str(repo.ancestry_graph(plain=False))
    svg = repo.ancestry_graph()._repr_svg_()
    assert svg.startswith("<svg") and "<circle" in svg and "first" in svg
