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
