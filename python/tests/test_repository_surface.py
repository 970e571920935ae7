"""Icechunk's repository surface on floe: transaction, lookup_snapshot, default
commit metadata, ops log, feature flags, chunk storage statistics, spec versions
and upgrades."""

import pytest
import zarr

import floe


def _repo(spec_version=None, config=None):
    return floe.Repository.create(
        floe.in_memory_storage(), config=config, spec_version=spec_version
    )


def test_transaction_commits_on_success_and_drops_on_error():
    repo = _repo()
    before = repo.lookup_branch("main")
    with repo.transaction("main", message="make a group") as store:
        zarr.create_group(store, attributes={"x": 1})
    info = next(repo.ancestry(branch="main"))
    assert info.message == "make a group" and info.parent_id == before
    with pytest.raises(RuntimeError):
        with repo.transaction("main", message="never") as store:
            zarr.open_group(store).attrs["x"] = 2
            raise RuntimeError("boom")
    assert repo.lookup_branch("main") == info.id


def test_lookup_snapshot():
    repo = _repo()
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    sid = s.commit("c", {"k": [1, 2]})
    info = repo.lookup_snapshot(sid)
    assert (info.id, info.message, info.metadata) == (sid, "c", {"k": [1, 2]})
    assert info == next(repo.ancestry(branch="main"))
    with pytest.raises(floe.SnapshotNotFoundError):
        repo.lookup_snapshot("AAAAAAAAAAAAAAAAAAA0")


@pytest.mark.parametrize("spec_version", [1, 2])
def test_default_commit_metadata_is_recorded_under_the_commits_own(spec_version):
    repo = _repo(spec_version)
    repo.set_default_commit_metadata({"user": "ann", "team": "x"})
    assert repo.default_commit_metadata() == {"user": "ann", "team": "x"}
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    sid = s.commit("c", {"team": "y"})
    assert repo.lookup_snapshot(sid).metadata == {"user": "ann", "team": "y"}


def test_ops_log_and_feature_flags():
    repo = _repo(2)
    flags = repo.feature_flags()
    assert {f.name for f in flags} == {"move_node", "create_tag", "delete_tag"}
    assert all(f.enabled and f.default_enabled and f.setting is None for f in flags)
    repo.set_feature_flag("create_tag", False)
    assert [f.name for f in repo.disabled_feature_flags()] == ["create_tag"]
    with pytest.raises(floe.SessionStateError) as e:
        repo.create_tag("t", repo.lookup_branch("main"))
    assert e.value.kind == "feature-flag-disabled"
    repo.set_feature_flag("create_tag", None)
    with pytest.raises(floe.InvalidInputError):
        repo.set_feature_flag("no_such_flag", True)
    ops = list(repo.ops_log())
    assert [type(u.kind).__name__ for u in ops] == [
        "FeatureFlagChanged", "FeatureFlagChanged", "RepoInitialized"]
    assert isinstance(ops[0].kind, floe.UpdateType.FeatureFlagChanged)
    assert ops[0].kind.new_value is None and ops[1].kind.new_value is False
    assert ops[0].updated_at >= ops[1].updated_at
    with pytest.raises(floe.FormatError):
        _repo(1).ops_log()


@pytest.mark.parametrize("spec_version", [1, 2])
def test_chunk_storage_stats_count_each_chunk_once(spec_version):
    repo = _repo(spec_version, floe.RepositoryConfig(inline_chunk_threshold_bytes=0))
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(10,), chunks=(1,), dtype="i4",
                          compressors=None)
    a[:] = 7
    s.commit("c1")
    s = repo.writable_session("main")
    zarr.open_group(s.store).attrs["touched"] = True
    s.commit("c2")  # the same chunks, referenced again
    stats = repo.chunk_storage_stats()
    assert (stats.native_bytes, stats.virtual_bytes, stats.inlined_bytes) == (40, 0, 0)
    assert stats.total_bytes() == stats.non_virtual_bytes() == 40
    with pytest.warns(DeprecationWarning, match="total_chunks_storage"):
        assert repo.total_chunks_storage() == 40


def test_spec_versions_and_upgrade():
    assert str(floe.supported_spec_versions()) == "[SpecVersion.v2 (current), SpecVersion.v1]"
    storage = floe.in_memory_storage()
    assert floe.Repository.fetch_spec_version(storage) is None
    repo = floe.Repository.create(storage, spec_version=1)
    assert floe.Repository.fetch_spec_version(storage) == 1
    with pytest.raises(ValueError, match="Unsupported version 255"):
        floe.Repository.create(floe.in_memory_storage(), spec_version=255)
    with pytest.raises(ValueError, match="Couldn't parse a valid version"):
        floe.Repository.create(floe.in_memory_storage(), spec_version="v1")
    s = repo.writable_session("main")
    zarr.create_group(s.store)
    sid = s.commit("c")
    assert floe.upgrade_icechunk_repository(repo, dry_run=True) is repo
    assert floe.Repository.fetch_spec_version(storage) == 1
    upgraded = floe.upgrade_icechunk_repository(repo, dry_run=False)
    assert upgraded.spec_version == floe.SpecVersion.v2
    assert upgraded.lookup_branch("main") == sid
    assert isinstance(next(upgraded.ops_log()).kind, floe.UpdateType.RepoMigrated)
    with pytest.raises(floe.IcechunkError, match=r"invalid repository version \(2\.0\)"):
        floe.upgrade_icechunk_repository(upgraded, dry_run=False)
