"""Notebook and terminal display of floe objects, in Icechunk's layout.

Text (``repr``/``str``): a header line ``<package.Class>`` then one ``name: value``
line per field. HTML (``_repr_html_``, Jupyter): a ``<div class="icechunk-repr">``
with a header and one row per field; nested objects fold into ``<details>``. The
class name ``icechunk-repr`` is Icechunk's, so notebook themes written for it apply.

The bottom layer of the package: this module imports nothing of floe, every other
module (``floe.exceptions`` included) may import it.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Iterable, Mapping
from typing import Any

_STYLE = """<style>
.icechunk-repr { line-height: 1.6; max-width: 700px; }
.icechunk-repr .icechunk-header { font-weight: 500; padding-bottom: 6px;
  margin-bottom: 4px; border-bottom: solid 1px var(--jp-border-color2, #ddd); }
.icechunk-repr .icechunk-field { padding: 2px 0; }
.icechunk-repr .icechunk-field-name { font-weight: 500;
  color: var(--jp-content-font-color2, rgba(0, 0, 0, 0.54)); }
.icechunk-repr .icechunk-field-value { padding-left: 0.3em; }
.icechunk-repr details > .icechunk-repr { margin-top: 4px; margin-left: 12px; }
</style>"""


def _package() -> str:
    """The package name users see in reprs: ``icechunk`` once
    ``floe.install_as_icechunk()`` made floe the ``icechunk`` module, else ``floe``."""
    floe = sys.modules.get("floe")
    icechunk = sys.modules.get("icechunk")
    # install_as_icechunk registers a module object over floe (its own __version__).
    registered = getattr(icechunk, "__floe_module__", icechunk)
    return "icechunk" if floe is not None and registered is floe else "floe"


def qualified(name: str) -> str:
    """``name`` under the package users import (``icechunk.X`` once floe is
    installed as icechunk, else ``floe.X``)."""
    return f"{_package()}.{name}"


def text_block(header: str, fields: Iterable[tuple[str, object]]) -> str:
    """``<header>`` and one ``name: value`` line per field; a multi-line value
    (a nested object) is indented under its name."""
    lines = [f"<{header}>"]
    for name, value in fields:
        text = str(value)
        if "\n" in text.strip():
            lines.append(f"{name}:")
            lines.extend(f"    {line}" for line in text.strip().splitlines())
        else:
            lines.append(f"{name}: {text}")
    return "\n".join(lines) + "\n"


def html_block(header: str, fields: Iterable[tuple[str, object]]) -> str:
    """The HTML of a header and fields; a field whose value has ``_repr_html_``
    (a nested object) folds into ``<details>``."""
    rows = []
    for name, value in fields:
        nested = getattr(value, "_repr_html_", None)
        if callable(nested):
            rows.append(
                f'  <details>\n    <summary class="icechunk-field-name">{html.escape(name)}'
                f"</summary>\n    {nested()}\n  </details>"
            )
        else:
            rows.append(
                f'  <div class="icechunk-field"><span class="icechunk-field-name">'
                f"{html.escape(name)}:</span> "
                f'<span class="icechunk-field-value">{html.escape(str(value))}</span></div>'
            )
    body = "\n".join(rows)
    return (
        f'{_STYLE}\n<div class="icechunk-repr">\n'
        f'  <div class="icechunk-header">{html.escape(header)}</div>\n{body}\n</div>\n'
    )


def print_debug_info() -> None:
    """Prints what a bug report needs (Icechunk's ``print_debug_info``): floe's
    version, Python's, the platform, and the versions of the packages floe works
    with (zarr, numpy, xarray, dask) when installed.

    ```python
    floe.print_debug_info()  # floe, Python, platform, zarr, numpy, ... versions
    ```
    """
    import importlib.metadata
    import platform

    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    from floe._floe import __version__

    # The distribution is `zarr-floe`; the version is also the extension's own.
    print(f"floe: {__version__} (distribution zarr-floe: {version('zarr-floe')})")
    print(f"python: {sys.version.split()[0]}")
    print(f"platform: {platform.platform()}")
    for name in ("zarr", "numpy", "xarray", "dask", "distributed"):
        print(f"{name}: {version(name)}")


def storage_fields(recipe: tuple[str, Mapping[str, Any]] | None) -> list[tuple[str, object]]:
    """The fields Icechunk shows for a ``Storage``: ``type`` (``in-memory``, ``local
    filesystem``, ``S3 (native)``, ``GCS``, ``Azure``, ``HTTP``) then the backend's
    location and the S3 options that differ from the defaults (``region``,
    ``endpoint_url``, and ``anonymous`` / ``allow_http`` / ``force_path_style`` /
    ``requester_pays`` when true). ``recipe`` is the storage's ``(constructor name,
    keyword arguments)`` or ``None`` (in-memory)."""
    if recipe is None:
        return [("type", "in-memory")]
    name, kwargs = recipe

    def given(*items: tuple[str, object]) -> list[tuple[str, object]]:
        return [(k, v) for k, v in items if v not in (None, "")]

    if name == "new_local_filesystem":
        return [("type", "local filesystem"), ("path", kwargs.get("path"))]
    if name in ("new_s3", "new_tigris", "new_r2"):
        options = kwargs.get("config")
        region = getattr(options, "region", None)
        endpoint = getattr(options, "endpoint_url", None)
        path_style = bool(getattr(options, "force_path_style", False))
        if name == "new_tigris":
            endpoint = endpoint or "https://t3.storage.dev"
        if name == "new_r2":
            region = region or "auto"
            if endpoint is None and kwargs.get("account_id"):
                endpoint = f"https://{kwargs['account_id']}.r2.cloudflarestorage.com"
            path_style = True
        fields = given(
            ("type", "S3 (native)"),
            ("bucket", kwargs.get("bucket")),
            ("prefix", kwargs.get("prefix")),
            ("region", region),
            ("endpoint_url", endpoint),
        )
        for flag, value in (
            ("anonymous", getattr(options, "anonymous", False)),
            ("allow_http", getattr(options, "allow_http", False)),
            ("force_path_style", path_style),
            ("requester_pays", getattr(options, "requester_pays", False)),
        ):
            if value:
                fields.append((flag, "True"))
        checksum = getattr(options, "checksum_algorithm", None)
        if checksum is not None:
            fields.append(("checksum_algorithm", getattr(checksum, "name", str(checksum))))
        return fields
    if name == "new_gcs":
        return given(
            ("type", "GCS"), ("bucket", kwargs.get("bucket")), ("prefix", kwargs.get("prefix"))
        )
    if name == "new_azure_blob":
        return given(
            ("type", "Azure"),
            ("account", kwargs.get("account")),
            ("container", kwargs.get("container")),
            ("prefix", kwargs.get("prefix")),
        )
    if name == "new_redirect":
        return [
            ("type", "redirect"),
            ("url", kwargs.get("base_url")),
            ("location", kwargs.get("location")),
        ]
    if name == "new_http":
        return [("type", "HTTP"), ("url", kwargs.get("base_url"))]
    url = str(kwargs.get("url", ""))
    return [("type", url.split("://", 1)[0] or "unknown"), ("url", url)]


def storage_display(function: str, recipe: tuple[str, Mapping[str, Any]] | None) -> str:
    """``text_block`` or ``html_block`` (``function``) of a ``Storage`` with the
    recipe ``recipe`` (see ``storage_fields``)."""
    block = text_block if function == "text_block" else html_block
    return block(qualified("Storage"), storage_fields(recipe))
