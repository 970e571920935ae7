"""Pickling repositories and sessions, as Icechunk 2.3.0: a repository pickles as its
storage, configuration and default commit metadata and opens again on unpickling; a
writable session (and its store) refuses with ValueError, forks and read-only
sessions travel."""

import pickle

import pytest
import zarr

import floe


def test_a_repository_pickles_and_opens_again(tmp_path):
    repo = floe.Repository.create(
        floe.local_filesystem_storage(str(tmp_path)),
        config=floe.RepositoryConfig(inline_chunk_threshold_bytes=7),
    )
    repo.set_default_commit_metadata({"author": "test"})
    repo.create_branch("dev", repo.lookup_branch("main"))
    back = pickle.loads(pickle.dumps(repo))
    assert back.list_branches() == {"main", "dev"}
    assert back.default_commit_metadata() == {"author": "test"}
    assert back.config.inline_chunk_threshold_bytes == 7
    s = back.writable_session("main")
    zarr.create_group(s.store)
    s.commit("from the unpickled repository")
    assert len(list(repo.ancestry(branch="main"))) == 2


def test_a_repository_on_in_memory_storage_does_not_pickle():
    with pytest.raises(TypeError, match="in-memory"):
        pickle.dumps(floe.Repository.create(floe.in_memory_storage()))


def test_writable_sessions_and_their_stores_refuse_with_value_error(tmp_path):
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path)))
    s = repo.writable_session("main")
    with pytest.raises(ValueError, match="fork"):
        pickle.dumps(s)
    with pytest.raises(ValueError, match="fork"):
        pickle.dumps(s.store)
    fork = pickle.loads(pickle.dumps(s.fork()))
    assert fork.store.read_only is False
    store = pickle.loads(pickle.dumps(s.fork().store))
    assert store.read_only is False
