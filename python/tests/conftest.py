"""Fixtures shared by floe's Python tests."""

import sys

import pytest

import floe


@pytest.fixture
def as_icechunk():
    """``floe.install_as_icechunk()`` for one test, the previous ``icechunk`` modules
    put back afterwards."""
    saved = {k: v for k, v in sys.modules.items() if k == "icechunk" or k.startswith("icechunk.")}
    floe.install_as_icechunk()
    yield
    for k in [k for k in sys.modules if k == "icechunk" or k.startswith("icechunk.")]:
        del sys.modules[k]
    sys.modules.update(saved)
