"""Console logs: off by default, on with FLOE_LOG / ICECHUNK_LOG or
set_logs_filter, to stderr unless FLOE_LOG_TO_STDOUT / ICECHUNK_LOG_TO_STDOUT is set
when floe is imported; print_debug_info prints versions."""

import os
import subprocess
import sys

import pytest

import floe

SNIPPET = "import floe\nfloe.Repository.create(floe.in_memory_storage())\n"


def _run(env):
    clean = {k: v for k, v in os.environ.items() if "LOG" not in k}
    return subprocess.run(
        [sys.executable, "-c", SNIPPET], capture_output=True, text=True,
        env={**clean, **env}, check=True,
    )


@pytest.mark.parametrize("var", ["FLOE_LOG", "ICECHUNK_LOG"])
def test_environment_turns_logs_on(var):
    out = _run({var: "debug"})
    assert "Creating Repository" in out.stderr and "Creating Repository" not in out.stdout


def test_logs_are_off_by_default_and_can_go_to_stdout():
    assert "Creating Repository" not in _run({}).stderr
    out = _run({"FLOE_LOG": "debug", "FLOE_LOG_TO_STDOUT": "1"})
    assert "Creating Repository" in out.stdout and "Creating Repository" not in out.stderr


def test_set_logs_filter(capfd):
    floe.set_logs_filter("debug")
    floe.Repository.create(floe.in_memory_storage())
    assert "Creating Repository" in capfd.readouterr().err
    floe.set_logs_filter("false")
    floe.Repository.create(floe.in_memory_storage())
    assert capfd.readouterr().err == ""
    floe.set_logs_filter(None)


def test_print_debug_info(capsys):
    floe.print_debug_info()
    out = capsys.readouterr().out
    assert out.startswith("floe: ") and "zarr: " in out


def _write_two_arrays(repo):
    import numpy as np
    import zarr

    session = repo.writable_session("main")
    for name in ("first", "second"):
        arr = zarr.create_array(
            session.store, name=name, shape=(12,), chunks=(3,), dtype="int32", fill_value=0
        )
        arr[:] = np.arange(12, dtype="int32")
    session.commit("two arrays of four chunks")


@pytest.mark.parametrize("spec_version", [1, 2])
def test_small_caches_warn_once_per_kind(capfd, spec_version):
    """A cache configured too small for the objects it must hold logs one warning
    for manifests and one for snapshots, with the sizes, however many objects miss."""
    capfd.readouterr()
    floe.set_logs_filter("warn")
    try:
        config = floe.RepositoryConfig(
            caching=floe.CachingConfig(num_chunk_refs=2, num_snapshot_nodes=0)
        )
        repo = floe.Repository.create(
            floe.in_memory_storage(), config=config, spec_version=spec_version
        )
        _write_two_arrays(repo)
        # reading back loads both manifests and the snapshot again: no more warnings
        import zarr

        session = repo.readonly_session(branch="main")
        for name in ("first", "second"):
            assert zarr.open_array(session.store, path=name)[:].sum() == 66
        err = capfd.readouterr().err
    finally:
        floe.set_logs_filter(None)
    assert err.count("WARN") == 2, err
    assert "A manifest with 4 chunk references" in err
    assert "can only keep 2 references" in err
    assert "A snapshot with 3 nodes" in err and "can only keep 0 nodes" in err


def test_default_caches_do_not_warn(capfd):
    capfd.readouterr()
    floe.set_logs_filter("warn")
    try:
        _write_two_arrays(floe.Repository.create(floe.in_memory_storage()))
        err = capfd.readouterr().err
    finally:
        floe.set_logs_filter(None)
    assert "WARN" not in err, err


def test_version_is_the_installed_package_version():
    import importlib.metadata

    assert floe.__version__ == importlib.metadata.version("zarr-floe")
    major, minor, patch = (int(part) for part in floe.__version__.split("."))
    assert (major, minor, patch) >= (0, 1, 0)
