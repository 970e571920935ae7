"""MkDocs hook: pages that may or may not exist yet join the nav when they do.

``docs/how-to/serve.md`` (the guide to ``floe serve``) goes into "How-to guides" as
soon as the file exists, unless ``mkdocs.yml`` lists it already; without it the nav
stays as written (a nav entry for a missing file would fail ``--strict``).
"""

from __future__ import annotations

from pathlib import Path

OPTIONAL = [("How-to guides", "Serving over HTTP", "how-to/serve.md")]


def _listed(nav, path: str) -> bool:
    if isinstance(nav, str):
        return nav == path
    if isinstance(nav, list):
        return any(_listed(item, path) for item in nav)
    if isinstance(nav, dict):
        return any(_listed(v, path) for v in nav.values())
    return False


def on_config(config):
    docs = Path(config["docs_dir"])
    nav = config["nav"]
    for section, title, path in OPTIONAL:
        if not (docs / path).exists() or _listed(nav, path):
            continue
        for item in nav:
            if isinstance(item, dict) and section in item:
                item[section].append({title: path})
                break
    return config
