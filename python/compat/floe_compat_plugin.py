"""pytest plugin for the Icechunk compatibility run (``icechunk_suite.py``).

- Deselects the tests listed in the file named by ``$FLOE_COMPAT_EXCLUDE`` (one test
  id or id prefix per line; ``#`` starts a comment): tests that need services this
  machine lacks (a MinIO server, the public internet, ``flatc``).
- Loads one bounded, derandomized hypothesis profile after Icechunk's conftest has
  registered its own, so that both engines see the same examples and the stateful
  tests finish.
"""

from __future__ import annotations

import os

import pytest


def _excluded() -> list[str]:
    path = os.environ.get("FLOE_COMPAT_EXCLUDE")
    if not path:
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def _matches(nodeid: str, prefix: str) -> bool:
    return nodeid == prefix or nodeid.startswith((prefix + "[", prefix + "::"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    try:
        from hypothesis import HealthCheck, settings

        settings.register_profile(
            "floe-compat",
            max_examples=10,
            stateful_step_count=15,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        settings.load_profile("floe-compat")
    except ImportError:
        pass
    prefixes = _excluded()
    keep, drop = [], []
    for item in items:
        (drop if any(_matches(item.nodeid, p) for p in prefixes) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
