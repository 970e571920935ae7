"""Repository configuration, as Icechunk's ``icechunk.config``.

``RepositoryConfig`` and its sections (``CompressionConfig``, ``CachingConfig``,
``ManifestConfig`` with ``ManifestPreloadConfig`` / ``ManifestPreloadCondition`` and
``ManifestSplittingConfig`` / ``ManifestSplitCondition`` / ``ManifestSplitDimCondition``,
``ManifestVirtualChunkLocationCompressionConfig``, ``RepoUpdateRetryConfig``), and, as
far as a configuration holds them, ``VirtualChunkContainer`` and ``ObjectStoreConfig``.

These are plain values: pass one to ``Repository.create(config=)`` or
``Repository.open(config=)`` (merged over the stored configuration, as Icechunk does),
read the repository's from ``Repository.config``, store it with
``Repository.save_config()``. Every field is optional; an unset field (``None``) takes
Icechunk's default, which ``str()`` shows as ``(default)``. Nested sections are held by
reference, so ``config.compression.level = 2`` changes ``config``.

The engine checks, stores and applies them: the format (``config.yaml`` in spec 1, the
``repo`` object in spec 2) is written by floe's Rust core, byte-compatible with
Icechunk 2.3. Each class compares by value, pickles, and has Icechunk's three displays:
``repr`` (executable: ``eval`` gives an equal value, with the package under the name it
was imported as), ``str`` (with effective defaults) and ``_repr_html_``.
"""

from __future__ import annotations

import enum
import html
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from floe._display import _package
from floe._floe import S3Options

__all__ = [
    "CachingConfig",
    "ChunkPackingConfig",
    "ChunkPackingMode",
    "CompressionAlgorithm",
    "CompressionConfig",
    "ManifestConfig",
    "ManifestPreloadCondition",
    "ManifestPreloadConfig",
    "ManifestSplitCondition",
    "ManifestSplitDimCondition",
    "ManifestSplitValues",
    "ManifestSplittingConfig",
    "ManifestVirtualChunkLocationCompressionConfig",
    "ObjectStoreConfig",
    "RepoUpdateRetryConfig",
    "RepositoryConfig",
    "SplitSizesDict",
    "VirtualChunkContainer",
    "azure_store",
    "gcs_store",
    "http_store",
    "local_filesystem_store",
    "s3_store",
]


def _lit(value: Any) -> str:
    """A Python literal for a field value, strings in double quotes (as Icechunk)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_lit(v) for v in value)
        return (
            f"[{inner}]"
            if isinstance(value, list)
            else f"({inner}{',' if len(value) == 1 else ''})"
        )
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in text.split("\n"))


# Default-valued displays: what `str` shows for an unset field.
_CSS_CLASS = "icechunk-repr"


class _Section:
    """Common behaviour of configuration sections: value equality, the three
    displays. Subclasses list ``_FIELDS`` (display order) and ``_DEFAULTS`` (effective
    defaults of unset scalar fields, shown by ``str``) and ``_NESTED`` (field → class
    whose default instance ``str`` expands when the field is unset)."""

    _FIELDS: tuple[str, ...] = ()
    _DEFAULTS: dict[str, Any] = {}
    _NESTED: dict[str, type] = {}
    _MODULE = "config"

    def _qualname(self) -> str:
        return f"{_package()}.{self._MODULE}.{type(self).__qualname__}"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable, as Icechunk's

    def __repr__(self) -> str:
        lines = [f"{self._qualname()}("]
        for f in self._FIELDS:
            lines.append(_indent(f"{f}={_lit(getattr(self, f))},"))
        lines.append(")")
        return "\n".join(lines)

    def _str_value(self, field: str) -> str:
        value = getattr(self, field)
        if value is None:
            if field in self._NESTED:
                return "\n" + _indent(str(self._NESTED[field]()))
            if field in self._DEFAULTS:
                return f" {self._DEFAULTS[field]} (default)"
            return " None"
        if (
            isinstance(value, _Section)
            or hasattr(value, "_repr_html_")
            and not isinstance(value, (_Condition, enum.Enum))
        ):
            return "\n" + _indent(str(value))
        if (
            isinstance(value, dict)
            and value
            and all(isinstance(v, _Section) for v in value.values())
        ):
            return "".join(f"\n    {k}:\n" + _indent(str(v), "        ") for k, v in value.items())
        if isinstance(value, enum.Enum):
            return f" {value.name}"
        return f" {_lit(value)}" if not isinstance(value, str) else f" {value}"

    def __str__(self) -> str:
        lines = [f"<{self._qualname()}>"]
        for f in self._FIELDS:
            lines.append(f"{f}:{self._str_value(f)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = [
            f'<div class="{_CSS_CLASS}">',
            f'  <div class="icechunk-header">{html.escape(self._qualname())}</div>',
        ]
        for f in self._FIELDS:
            value = getattr(self, f)
            nested = (
                value if value is not None else (self._NESTED[f]() if f in self._NESTED else None)
            )
            if (
                nested is not None
                and hasattr(nested, "_repr_html_")
                and not isinstance(nested, (_Condition, enum.Enum))
            ):
                rows.append(
                    f"  <details>\n    <summary>{html.escape(f)}</summary>\n"
                    f"{nested._repr_html_()}\n  </details>"
                )
            elif isinstance(value, dict) and value:
                inner = "".join(
                    f"<details><summary>{html.escape(str(k))}</summary>"
                    f"{v._repr_html_() if hasattr(v, '_repr_html_') else html.escape(repr(v))}"
                    "</details>"
                    for k, v in value.items()
                )
                rows.append(
                    f"  <details>\n    <summary>{html.escape(f)}</summary>\n{inner}\n  </details>"
                )
            else:
                shown = self._str_value(f).strip()
                rows.append(
                    '  <div class="icechunk-field">'
                    f'<span class="icechunk-field-name">{html.escape(f)}:</span> '
                    f'<span class="icechunk-field-value">{html.escape(shown)}</span></div>'
                )
        rows.append("</div>")
        return "\n".join(rows)


def _opt_int(name: str, value: Any, *, minimum: int = 0, maximum: int | None = None) -> int | None:
    """``value`` checked as an optional integer in ``[minimum, maximum]``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{name} must be in {bound}, got {value}")
    return value


_U16 = 65_535
_U32 = 4_294_967_295
_U64 = 2**64 - 1


# -- compression ------------------------------------------------------------------


class _DefaultCallMeta(enum.EnumMeta):
    """Lets ``CompressionAlgorithm()`` give the default member, as Icechunk's."""

    # Defined by the enum classes of this metaclass (an annotation only: no attribute).
    default: Callable[[], Any]

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        if not args and not kwargs:
            return cls.default()
        return super().__call__(*args, **kwargs)


class CompressionAlgorithm(enum.Enum, metaclass=_DefaultCallMeta):
    """The algorithm metadata files are compressed with: zstd, the only one the
    Icechunk format defines.

    ```python
    config = floe.RepositoryConfig.default()
    config.compression = floe.CompressionConfig(algorithm=floe.CompressionAlgorithm.Zstd)
    assert floe.CompressionAlgorithm() is floe.CompressionAlgorithm.Zstd  # the default
    ```
    """

    Zstd = 0

    @staticmethod
    def default() -> CompressionAlgorithm:
        """The default algorithm (zstd)."""
        return CompressionAlgorithm.Zstd

    def __repr__(self) -> str:
        return f"{_package()}.config.CompressionAlgorithm.{self.name}"


class CompressionConfig(_Section):
    """How snapshots, manifests, transaction logs and the ``repo`` object are
    compressed: ``algorithm`` (``CompressionAlgorithm.Zstd``; ``None``: the default)
    at zstd ``level`` (1-22; ``None``: each file type's default, 3 for snapshots and
    the ``repo`` object as Icechunk, 1 for manifests and transaction logs).

    ```python
    config = floe.RepositoryConfig.default()
    config.compression = floe.CompressionConfig(level=9)  # smaller metadata, slower commits
    repo = repo.reopen(config)
    repo.save_config()  # store it for every later open
    ```
    """

    _FIELDS = ("algorithm", "level")
    _DEFAULTS = {"algorithm": "Zstd", "level": 3}

    def __init__(self, algorithm: CompressionAlgorithm | None = None, level: int | None = None):
        self.algorithm = algorithm
        self.level = level

    @property
    def algorithm(self) -> CompressionAlgorithm | None:
        """The algorithm, ``None`` for the default (zstd)."""
        return self._algorithm

    @algorithm.setter
    def algorithm(self, value: CompressionAlgorithm | str | None) -> None:
        if isinstance(value, str):
            if value.lower() != "zstd":
                raise ValueError(f"compression algorithm {value!r}: only zstd is defined")
            value = CompressionAlgorithm.Zstd
        if value is not None and not isinstance(value, CompressionAlgorithm):
            raise TypeError(f"algorithm must be a CompressionAlgorithm or None, got {value!r}")
        self._algorithm = value

    @property
    def level(self) -> int | None:
        """The zstd level (0-255 accepted as Icechunk; 0 and unset: the default; above
        22: 22)."""
        return self._level

    @level.setter
    def level(self, value: int | None) -> None:
        self._level = _opt_int("level", value, maximum=255)

    @staticmethod
    def default() -> CompressionConfig:
        """A configuration with every field unset.

        ```python
        assert floe.CompressionConfig.default() == floe.CompressionConfig()
        ```
        """
        return CompressionConfig()

    def __repr__(self) -> str:
        return (
            f"{self._qualname()}(\n    algorithm={self.algorithm!r},\n    level={self.level!r},\n)"
        )

    def _to_plain(self) -> dict[str, Any]:
        return {"algorithm": None if self.algorithm is None else "zstd", "level": self.level}

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> CompressionConfig:
        algorithm = CompressionAlgorithm.Zstd if d.get("algorithm") is not None else None
        return cls(algorithm=algorithm, level=d.get("level"))


# -- caching ----------------------------------------------------------------------


class CachingConfig(_Section):
    """How much the repository keeps decoded in memory, shared by its sessions:
    ``num_snapshot_nodes`` (nodes of cached snapshots, default 500,000),
    ``num_chunk_refs`` (refs of cached manifests, default 15,000,000),
    ``num_transaction_changes`` (changes of cached transaction logs, default 0),
    ``num_bytes_attributes`` and ``num_bytes_chunks`` (default 0; floe keeps no
    attribute or chunk cache, so these are stored only). floe applies the first three
    when set; unset, it keeps its own count-based caches (512 snapshots, 256
    manifests, 512 transaction logs).

    ```python
    config = floe.RepositoryConfig.default()
    config.caching = floe.CachingConfig(num_snapshot_nodes=100_000, num_chunk_refs=1_000_000)
    repo = repo.reopen(config)  # this process only, until save_config()
    ```
    """

    _FIELDS = (
        "num_snapshot_nodes",
        "num_chunk_refs",
        "num_transaction_changes",
        "num_bytes_attributes",
        "num_bytes_chunks",
    )
    _DEFAULTS = {
        "num_snapshot_nodes": 500000,
        "num_chunk_refs": 15000000,
        "num_transaction_changes": 0,
        "num_bytes_attributes": 0,
        "num_bytes_chunks": 0,
    }

    def __init__(
        self,
        num_snapshot_nodes: int | None = None,
        num_chunk_refs: int | None = None,
        num_transaction_changes: int | None = None,
        num_bytes_attributes: int | None = None,
        num_bytes_chunks: int | None = None,
    ):
        self.num_snapshot_nodes = num_snapshot_nodes
        self.num_chunk_refs = num_chunk_refs
        self.num_transaction_changes = num_transaction_changes
        self.num_bytes_attributes = num_bytes_attributes
        self.num_bytes_chunks = num_bytes_chunks

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._FIELDS:
            value = _opt_int(name, value, maximum=_U64)
        object.__setattr__(self, name, value)

    def _to_plain(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self._FIELDS}

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> CachingConfig:
        return cls(**{f: d.get(f) for f in cls._FIELDS})


# -- chunk packing ----------------------------------------------------------------


class ChunkPackingMode(enum.Enum, metaclass=_DefaultCallMeta):
    """When sessions pack small chunks (floe's ``chunk_packing.mode``).

    ``Auto`` (the default): on for object storage (S3, GCS, Azure, HTTP, in memory),
    where each object costs a request; off for local filesystem repositories.
    ``Enabled``: always on. ``Disabled``: always off (one chunk object per chunk, as
    Icechunk writes them).

    ```python
    assert floe.ChunkPackingMode() is floe.ChunkPackingMode.Auto  # the default
    ```
    """

    Auto = "auto"
    Enabled = "enabled"
    Disabled = "disabled"

    @staticmethod
    def default() -> ChunkPackingMode:
        """The default mode (``Auto``)."""
        return ChunkPackingMode.Auto

    def __repr__(self) -> str:
        return f"{_package()}.config.ChunkPackingMode.{self.name}"


class ChunkPackingConfig(_Section):
    """Chunk packing (floe's ``chunk_packing`` section): a session appends every
    chunk of at most ``threshold_bytes`` encoded bytes (and above
    ``inline_chunk_threshold_bytes``) to a pack, one chunk object holding many chunks
    at different offsets, written once it holds ``target_size_bytes`` and at the
    latest by the commit. Writing a thousand 4 KiB chunks then takes one request, not
    a thousand, and reading them back one ranged read per pack.

    Fields (all optional): ``mode`` (a ``ChunkPackingMode``, default ``Auto``: on
    for object storage, off for local files), ``threshold_bytes`` (bytes, default
    65,536), ``target_size_bytes`` (bytes, default 8,388,608). Icechunk 2.3.0 reads
    packed repositories and opens repositories whose configuration stores this
    section (it drops the section if it rewrites the configuration itself).

    ```python
    config = floe.RepositoryConfig.default()
    config.chunk_packing = floe.ChunkPackingConfig(
        mode=floe.ChunkPackingMode.Enabled, threshold_bytes=32 * 1024
    )
    print(config.chunk_packing.target_size_bytes)  # None: the default, 8 MiB
    ```
    """

    _FIELDS = ("mode", "threshold_bytes", "target_size_bytes")
    _DEFAULTS = {"mode": "Auto", "threshold_bytes": 65536, "target_size_bytes": 8388608}

    def __init__(
        self,
        mode: ChunkPackingMode | None = None,
        threshold_bytes: int | None = None,
        target_size_bytes: int | None = None,
    ):
        self.mode = mode
        self.threshold_bytes = threshold_bytes
        self.target_size_bytes = target_size_bytes

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "mode":
            if isinstance(value, str):
                value = ChunkPackingMode(value.lower())
            if value is not None and not isinstance(value, ChunkPackingMode):
                raise TypeError(f"mode must be a ChunkPackingMode or None, got {value!r}")
        elif name in self._FIELDS:
            value = _opt_int(name, value, maximum=_U32)
        object.__setattr__(self, name, value)

    @staticmethod
    def default() -> ChunkPackingConfig:
        """A configuration with every field unset (the defaults apply).

        ```python
        assert floe.ChunkPackingConfig.default() == floe.ChunkPackingConfig()
        ```
        """
        return ChunkPackingConfig()

    def _to_plain(self) -> dict[str, Any]:
        return {
            "mode": None if self.mode is None else self.mode.value,
            "threshold_bytes": self.threshold_bytes,
            "target_size_bytes": self.target_size_bytes,
        }

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> ChunkPackingConfig:
        return cls(
            mode=d.get("mode"),
            threshold_bytes=d.get("threshold_bytes"),
            target_size_bytes=d.get("target_size_bytes"),
        )


# -- conditions -------------------------------------------------------------------


class _Condition:
    """A condition: an immutable value compared (and hashed) by its plain form."""

    _KIND = ""

    def __init__(self, plain: Any):
        self._plain = plain

    def _to_plain(self) -> Any:
        return self._plain

    def _key(self) -> str:
        return json.dumps(self._plain, sort_keys=True)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self)._from_plain, (self._plain,))

    @classmethod
    def _from_plain(cls, plain: Any) -> Any:
        return cls(plain)

    def _call(self, method: str, *args: str) -> str:
        return f"{_package()}.config.{type(self).__name__}.{method}({', '.join(args)})"

    def __str__(self) -> str:
        return repr(self)

    def _regex_repr(self) -> str | None:
        if isinstance(self._plain, dict):
            ((kind, value),) = self._plain.items()
            if kind in ("path_matches", "name_matches"):
                return self._call(kind, json.dumps(value["regex"]))
        return None

    def _list_repr(self) -> str | None:
        if isinstance(self._plain, dict):
            ((kind, value),) = self._plain.items()
            if kind in ("and", "or"):
                inner = ", ".join(repr(type(self)(c)) for c in value)
                return self._call(f"{kind}_conditions", f"[{inner}]")
        return None


def _conditions(kind: str, conditions: Iterable[_Condition], cls: type) -> Any:
    items = list(conditions)
    for c in items:
        if not isinstance(c, cls):
            raise TypeError(f"{kind}_conditions takes {cls.__name__} values, got {c!r}")
    return cls({kind: [c._to_plain() for c in items]})


def _regex(value: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a regular expression must be a str, got {type(value).__name__}")
    return value


class ManifestPreloadCondition(_Condition):
    """Which manifests a new session preloads: build with ``path_matches`` (regular
    expression searched in the array's absolute path ``/a/b``), ``name_matches`` (in
    its name), ``num_refs(from_refs, to_refs)`` (the manifest's refs in
    ``[from_refs, to_refs)``, ``None`` for no bound), ``true()``, ``false()``,
    ``and_conditions`` / ``or_conditions`` or the operators ``&`` and ``|``.

    ```python
    preload_if = floe.ManifestPreloadCondition.and_conditions([
        floe.ManifestPreloadCondition.name_matches("^(time|lat|lon)$"),
        floe.ManifestPreloadCondition.num_refs(None, 10_000),  # fewer than 10,000 refs
    ])
    everything = floe.ManifestPreloadCondition.true() | floe.ManifestPreloadCondition.false()
    coords = floe.ManifestPreloadCondition.or_conditions(
        [floe.ManifestPreloadCondition.path_matches("^/coords/")]
    )
    config = floe.RepositoryConfig.default()
    config.manifest = floe.ManifestConfig(preload=floe.ManifestPreloadConfig(preload_if=preload_if))
    ```
    """

    @staticmethod
    def or_conditions(conditions: list[ManifestPreloadCondition]) -> ManifestPreloadCondition:
        """Holds when any of ``conditions`` holds."""
        return _conditions("or", conditions, ManifestPreloadCondition)

    @staticmethod
    def and_conditions(conditions: list[ManifestPreloadCondition]) -> ManifestPreloadCondition:
        """Holds when all of ``conditions`` hold."""
        return _conditions("and", conditions, ManifestPreloadCondition)

    @staticmethod
    def path_matches(regex: str) -> ManifestPreloadCondition:
        """Holds when ``regex`` is found in the array's absolute path."""
        return ManifestPreloadCondition({"path_matches": {"regex": _regex(regex)}})

    @staticmethod
    def name_matches(regex: str) -> ManifestPreloadCondition:
        """Holds when ``regex`` is found in the array's name (last path segment)."""
        return ManifestPreloadCondition({"name_matches": {"regex": _regex(regex)}})

    @staticmethod
    def num_refs(from_refs: int | None, to_refs: int | None) -> ManifestPreloadCondition:
        """Holds when the manifest holds at least ``from_refs`` and fewer than
        ``to_refs`` chunk refs (``None``: no bound)."""
        lo = (
            "Unbounded"
            if from_refs is None
            else {"Included": _opt_int("from_refs", from_refs, maximum=_U32)}
        )
        hi = (
            "Unbounded"
            if to_refs is None
            else {"Excluded": _opt_int("to_refs", to_refs, maximum=_U32)}
        )
        return ManifestPreloadCondition({"num_refs": {"from": lo, "to": hi}})

    @staticmethod
    def true() -> ManifestPreloadCondition:
        """A condition that always holds (every manifest)."""
        return ManifestPreloadCondition("true")

    @staticmethod
    def false() -> ManifestPreloadCondition:
        """A condition that never holds (no manifest)."""
        return ManifestPreloadCondition("false")

    def __and__(self, other: ManifestPreloadCondition) -> ManifestPreloadCondition:
        return ManifestPreloadCondition.and_conditions([self, other])

    def __or__(self, other: ManifestPreloadCondition) -> ManifestPreloadCondition:
        return ManifestPreloadCondition.or_conditions([self, other])

    def __repr__(self) -> str:
        if self._plain in ("true", "false"):
            return self._call(self._plain)
        found = self._regex_repr() or self._list_repr()
        if found:
            return found
        if isinstance(self._plain, dict) and "num_refs" in self._plain:
            b = self._plain["num_refs"]

            def bound(v: Any, upper: bool) -> str:
                if v == "Unbounded":
                    return "None"
                ((kind, n),) = v.items()
                # [from, to) in ints: an included upper or excluded lower bound moves by one.
                shift = (kind == "Included") if upper else (kind == "Excluded")
                return str(n + 1 if shift else n)

            return self._call("num_refs", bound(b["from"], False), bound(b["to"], True))
        return f"{type(self).__name__}({self._plain!r})"


class ManifestSplitCondition(_Condition):
    """Which arrays a splitting rule applies to: ``path_matches`` (regular expression
    searched in the array's absolute path), ``name_matches`` (in its name),
    ``AnyArray()``, ``and_conditions`` / ``or_conditions`` or ``&`` and ``|``.

    ```python
    Cond = floe.ManifestSplitCondition
    big = Cond.or_conditions([Cond.path_matches("^/era5/"), Cond.name_matches("temperature")])
    every = Cond.and_conditions([Cond.AnyArray(), Cond.any_array()])
    splitting = floe.ManifestSplittingConfig.from_dict(
        {big: {floe.ManifestSplitDimCondition.Axis(0): 365}}  # one manifest per 365 chunks
    )
    ```
    """

    @staticmethod
    def or_conditions(conditions: list[ManifestSplitCondition]) -> ManifestSplitCondition:
        """Holds when any of ``conditions`` holds."""
        return _conditions("or", conditions, ManifestSplitCondition)

    @staticmethod
    def and_conditions(conditions: list[ManifestSplitCondition]) -> ManifestSplitCondition:
        """Holds when all of ``conditions`` hold."""
        return _conditions("and", conditions, ManifestSplitCondition)

    @staticmethod
    def path_matches(regex: str) -> ManifestSplitCondition:
        """Holds when ``regex`` is found in the array's absolute path."""
        return ManifestSplitCondition({"path_matches": {"regex": _regex(regex)}})

    @staticmethod
    def name_matches(regex: str) -> ManifestSplitCondition:
        """Holds when ``regex`` is found in the array's name."""
        return ManifestSplitCondition({"name_matches": {"regex": _regex(regex)}})

    @staticmethod
    def AnyArray() -> ManifestSplitCondition:  # noqa: N802  (Icechunk's name)
        """Holds for every array."""
        return ManifestSplitCondition("any_array")

    any_array = AnyArray

    def __and__(self, other: ManifestSplitCondition) -> ManifestSplitCondition:
        return ManifestSplitCondition.and_conditions([self, other])

    def __or__(self, other: ManifestSplitCondition) -> ManifestSplitCondition:
        return ManifestSplitCondition.or_conditions([self, other])

    def __repr__(self) -> str:
        if self._plain == "any_array":
            return self._call("any_array")
        return self._regex_repr() or self._list_repr() or f"{type(self).__name__}({self._plain!r})"


class _DimCondition(_Condition):
    def __repr__(self) -> str:
        p = self._plain
        base = f"{_package()}.config.ManifestSplitDimCondition"
        if p == "Any":
            return f"{base}.any()"
        ((kind, value),) = p.items()
        if kind == "Axis":
            return f"{base}.axis({value})"
        return f"{base}.dimension_name({json.dumps(value)})"


class ManifestSplitDimCondition:
    """Which dimension of an array a split size applies to: ``Axis(i)`` (0-based),
    ``DimensionName(regex)`` (a dimension whose name matches; unnamed ones never do)
    or ``Any()``.

    ```python
    Dim = floe.ManifestSplitDimCondition
    splitting = floe.ManifestSplittingConfig.from_dict({
        floe.ManifestSplitCondition.AnyArray(): {
            Dim.dimension_name("^time$"): 24,  # cut along time every 24 chunks
            Dim.axis(1): 10,  # and along the second axis every 10 chunks
            Dim.any(): 1000,  # any other dimension every 1,000 chunks
        }
    })
    ```
    """

    class Axis(_DimCondition):
        """The dimension at axis ``axis``."""

        def __init__(self, axis: int | dict):
            if isinstance(axis, dict):  # from the plain form
                super().__init__(axis)
                return
            super().__init__({"Axis": _opt_int("axis", axis, maximum=_U64)})

        @property
        def axis(self) -> int:
            """The axis."""
            return self._plain["Axis"]

    class DimensionName(_DimCondition):
        """Dimensions whose name matches the regular expression ``regex``."""

        def __init__(self, regex: str | dict):
            if isinstance(regex, dict):
                super().__init__(regex)
                return
            super().__init__({"DimensionName": _regex(regex)})

        @property
        def regex(self) -> str:
            """The regular expression."""
            return self._plain["DimensionName"]

    class Any(_DimCondition):
        """Matches every dimension of the array."""

        def __init__(self, _plain: Any = None):
            super().__init__("Any")

    @staticmethod
    def axis(axis: int) -> ManifestSplitDimCondition.Axis:
        """The condition ``Axis(axis)``: the dimension at ``axis`` (0-based)."""
        return ManifestSplitDimCondition.Axis(axis)

    @staticmethod
    def dimension_name(regex: str) -> ManifestSplitDimCondition.DimensionName:
        """The condition ``DimensionName(regex)``: dimensions whose name matches."""
        return ManifestSplitDimCondition.DimensionName(regex)

    @staticmethod
    def any() -> ManifestSplitDimCondition.Any:
        """The condition ``Any()``: every dimension."""
        return ManifestSplitDimCondition.Any()

    @staticmethod
    def _from_plain(plain: Any) -> _DimCondition:
        if plain == "Any":
            return ManifestSplitDimCondition.Any()
        if isinstance(plain, dict) and "Axis" in plain:
            return ManifestSplitDimCondition.Axis(plain)
        if isinstance(plain, dict) and "DimensionName" in plain:
            return ManifestSplitDimCondition.DimensionName(plain)
        raise ValueError(f"not a ManifestSplitDimCondition: {plain!r}")


# -- manifest sections ------------------------------------------------------------


class ManifestPreloadConfig(_Section):
    """Which manifests a new session fetches into the repository's cache in the
    background: those ``preload_if`` selects (``None``: arrays named like CF
    coordinates, such as ``time``, ``lat``, ``lon``, ``x``, ``y``, ``z``, whose
    manifest holds at most 1,000 refs), up to ``max_total_refs`` refs in all (default
    10,000; 0 turns preloading off), looking at up to ``max_arrays_to_scan`` arrays
    (default 50).

    ```python
    config = floe.RepositoryConfig.default()
    config.manifest = floe.ManifestConfig(
        preload=floe.ManifestPreloadConfig(max_total_refs=0)  # no preloading
    )
    repo = repo.reopen(config)
    ```
    """

    _FIELDS = ("max_total_refs", "preload_if", "max_arrays_to_scan")
    _DEFAULTS = {"max_total_refs": 10000, "max_arrays_to_scan": 50}

    def __init__(
        self,
        max_total_refs: int | None = None,
        preload_if: ManifestPreloadCondition | None = None,
        max_arrays_to_scan: int | None = None,
    ):
        self.max_total_refs = max_total_refs
        self.preload_if = preload_if
        self.max_arrays_to_scan = max_arrays_to_scan

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("max_total_refs", "max_arrays_to_scan"):
            value = _opt_int(name, value, maximum=_U32)
        elif (
            name == "preload_if"
            and value is not None
            and not isinstance(value, ManifestPreloadCondition)
        ):
            raise TypeError(f"preload_if must be a ManifestPreloadCondition or None, got {value!r}")
        object.__setattr__(self, name, value)

    def _to_plain(self) -> dict[str, Any]:
        return {
            "max_total_refs": self.max_total_refs,
            "preload_if": None if self.preload_if is None else self.preload_if._to_plain(),
            "max_arrays_to_scan": self.max_arrays_to_scan,
        }

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> ManifestPreloadConfig:
        cond = d.get("preload_if")
        return cls(
            max_total_refs=d.get("max_total_refs"),
            preload_if=None if cond is None else ManifestPreloadCondition(cond),
            max_arrays_to_scan=d.get("max_arrays_to_scan"),
        )


_SplitSizes = tuple[tuple[ManifestSplitCondition, tuple[tuple[_DimCondition, int], ...]], ...]

#: Split sizes of one rule, by dimension condition (``ManifestSplittingConfig.from_dict``).
ManifestSplitValues = dict[_DimCondition, int]
#: The rules of a ``ManifestSplittingConfig`` as a dict, in order.
SplitSizesDict = dict[ManifestSplitCondition, ManifestSplitValues]


class ManifestSplittingConfig(_Section):
    """How an array's chunk refs are spread over manifests: ``split_sizes``, rules in
    order, each ``(ManifestSplitCondition, ((ManifestSplitDimCondition, n), ...))``:
    the dimensions of the arrays a rule matches are cut every ``n`` chunks. For each
    dimension, the first matching dimension condition of the first matching rule that
    sizes it applies; a dimension no rule sizes is not cut. ``from_dict`` / ``to_dict``
    take and give the rules as (ordered) dicts.

    With ``splitting`` set, a commit writes one manifest per block of that grid, as
    Icechunk; without it floe cuts manifests at 50,000 chunk positions.

    ```python
    splitting = floe.ManifestSplittingConfig.from_dict({
        floe.ManifestSplitCondition.name_matches("temperature"): {
            floe.ManifestSplitDimCondition.Axis(0): 2  # a manifest per 2 chunks of axis 0
        }
    })
    print(splitting.to_dict())
    config = floe.RepositoryConfig.default()
    config.manifest = floe.ManifestConfig(splitting=splitting)
    repo = repo.reopen(config)  # the next commits write split manifests
    ```
    """

    _FIELDS = ("split_sizes",)

    def __init__(self, split_sizes: Iterable[Any] | None = None):
        self.split_sizes = split_sizes

    @property
    def split_sizes(self) -> _SplitSizes | None:
        """The rules, ``None`` when unset (one manifest per array)."""
        return self._split_sizes

    @split_sizes.setter
    def split_sizes(self, value: Iterable[Any] | None) -> None:
        if value is None:
            self._split_sizes = None
            return
        rules = []
        for rule in value:
            condition, dims = rule
            if not isinstance(condition, ManifestSplitCondition):
                raise TypeError(
                    f"a splitting rule starts with a ManifestSplitCondition, got {condition!r}"
                )
            sizes = []
            for dim, n in dims:
                if not isinstance(dim, _DimCondition):
                    raise TypeError(
                        f"split sizes are keyed by ManifestSplitDimCondition, got {dim!r}"
                    )
                _opt_int("split size", n, minimum=1, maximum=_U32)
                sizes.append((dim, n))
            rules.append((condition, tuple(sizes)))
        self._split_sizes = tuple(rules)

    @staticmethod
    def from_dict(
        split_sizes: Mapping[ManifestSplitCondition, Mapping[Any, int]],
    ) -> ManifestSplittingConfig:
        """The rules of a dict ``{condition: {dim_condition: n}}``, in its order."""
        return ManifestSplittingConfig(tuple((c, tuple(d.items())) for c, d in split_sizes.items()))

    def to_dict(self) -> dict[ManifestSplitCondition, dict[Any, int]]:
        """The rules as a dict ``{condition: {dim_condition: n}}``, in order."""
        return {c: dict(d) for c, d in (self.split_sizes or ())}

    def __repr__(self) -> str:
        if self.split_sizes is None:
            shown = "None"
        else:
            shown = (
                "["
                + ", ".join(
                    f"({c!r}, [" + ", ".join(f"({d!r}, {n})" for d, n in dims) + "])"
                    for c, dims in self.split_sizes
                )
                + "]"
            )
        return f"{self._qualname()}(\n    split_sizes={shown},\n)"

    def _str_value(self, field: str) -> str:
        return " " + repr(self).split("split_sizes=", 1)[1].rsplit(",\n)", 1)[0]

    def _to_plain(self) -> dict[str, Any]:
        if self.split_sizes is None:
            return {"split_sizes": None}
        return {
            "split_sizes": [
                [c._to_plain(), [{"condition": d._to_plain(), "num_chunks": n} for d, n in dims]]
                for c, dims in self.split_sizes
            ]
        }

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> ManifestSplittingConfig:
        rules = d.get("split_sizes")
        if rules is None:
            return cls(None)
        return cls(
            tuple(
                (
                    ManifestSplitCondition(c),
                    tuple(
                        (ManifestSplitDimCondition._from_plain(x["condition"]), x["num_chunks"])
                        for x in dims
                    ),
                )
                for c, dims in rules
            )
        )


class ManifestVirtualChunkLocationCompressionConfig(_Section):
    """Icechunk's zstd-dictionary compression of virtual chunk locations in manifests:
    ``min_num_chunks`` (default 1,000), ``dictionary_max_training_samples`` (100),
    ``dictionary_max_size_bytes`` (2,048), ``compression_level`` (3). floe stores these
    and writes locations uncompressed (which every reader reads).

    ```python
    config = floe.RepositoryConfig.default()
    config.manifest = floe.ManifestConfig(
        virtual_chunk_location_compression=floe.ManifestVirtualChunkLocationCompressionConfig(
            min_num_chunks=5000
        )
    )
    ```
    """

    _FIELDS = (
        "min_num_chunks",
        "dictionary_max_training_samples",
        "dictionary_max_size_bytes",
        "compression_level",
    )
    _DEFAULTS = {
        "min_num_chunks": 1000,
        "dictionary_max_training_samples": 100,
        "dictionary_max_size_bytes": 2048,
        "compression_level": 3,
    }
    _LIMITS = {
        "min_num_chunks": (0, _U16),
        "dictionary_max_training_samples": (0, _U16),
        "dictionary_max_size_bytes": (0, _U32),
        "compression_level": (-(2**31), 2**31 - 1),
    }

    def __init__(
        self,
        min_num_chunks: int | None = None,
        *,
        dictionary_max_training_samples: int | None = None,
        dictionary_max_size_bytes: int | None = None,
        compression_level: int | None = None,
    ):
        self.min_num_chunks = min_num_chunks
        self.dictionary_max_training_samples = dictionary_max_training_samples
        self.dictionary_max_size_bytes = dictionary_max_size_bytes
        self.compression_level = compression_level

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._LIMITS:
            lo, hi = self._LIMITS[name]
            value = _opt_int(name, value, minimum=lo, maximum=hi)
        object.__setattr__(self, name, value)

    def _to_plain(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self._FIELDS}

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> ManifestVirtualChunkLocationCompressionConfig:
        return cls(d.get("min_num_chunks"), **{f: d.get(f) for f in cls._FIELDS[1:]})


class ManifestConfig(_Section):
    """The ``manifest`` section: ``preload`` (``ManifestPreloadConfig``),
    ``splitting`` (``ManifestSplittingConfig``), ``virtual_chunk_location_compression``
    and ``max_concurrent_manifest_fetches_during_commit`` (default 1).

    ```python
    config = floe.RepositoryConfig.default()
    config.manifest = floe.ManifestConfig(
        preload=floe.ManifestPreloadConfig(max_total_refs=50_000),
        max_concurrent_manifest_fetches_during_commit=4,
    )
    repo = repo.reopen(config)
    ```
    """

    _FIELDS = (
        "preload",
        "splitting",
        "virtual_chunk_location_compression",
        "max_concurrent_manifest_fetches_during_commit",
    )
    _DEFAULTS = {"max_concurrent_manifest_fetches_during_commit": 1}

    def __init__(
        self,
        preload: ManifestPreloadConfig | None = None,
        splitting: ManifestSplittingConfig | None = None,
        virtual_chunk_location_compression: ManifestVirtualChunkLocationCompressionConfig
        | None = None,
        max_concurrent_manifest_fetches_during_commit: int | None = None,
    ):
        self.preload = preload
        self.splitting = splitting
        self.virtual_chunk_location_compression = virtual_chunk_location_compression
        self.max_concurrent_manifest_fetches_during_commit = (
            max_concurrent_manifest_fetches_during_commit
        )

    _TYPES: dict[
        str,
        type[
            ManifestPreloadConfig
            | ManifestSplittingConfig
            | ManifestVirtualChunkLocationCompressionConfig
        ],
    ] = {
        "preload": ManifestPreloadConfig,
        "splitting": ManifestSplittingConfig,
        "virtual_chunk_location_compression": ManifestVirtualChunkLocationCompressionConfig,
    }

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._TYPES and value is not None and not isinstance(value, self._TYPES[name]):
            raise TypeError(f"{name} must be a {self._TYPES[name].__name__} or None, got {value!r}")
        if name == "max_concurrent_manifest_fetches_during_commit":
            value = _opt_int(name, value, maximum=_U16)
        object.__setattr__(self, name, value)

    def _str_value(self, field: str) -> str:
        if field == "splitting" and self.splitting is None:
            default = ManifestSplittingConfig.from_dict(
                {ManifestSplitCondition.path_matches(".*"): {ManifestSplitDimCondition.Any(): _U32}}
            )
            return "\n" + _indent(str(default))
        return super()._str_value(field)

    def _to_plain(self) -> dict[str, Any]:
        return {
            f: (None if getattr(self, f) is None else getattr(self, f)._to_plain())
            for f in self._TYPES
        } | {
            "max_concurrent_manifest_fetches_during_commit": (
                self.max_concurrent_manifest_fetches_during_commit
            )
        }

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> ManifestConfig:
        kwargs: dict[str, Any] = {
            f: (None if d.get(f) is None else t._from_plain(d[f])) for f, t in cls._TYPES.items()
        }
        return cls(
            **kwargs,
            max_concurrent_manifest_fetches_during_commit=d.get(
                "max_concurrent_manifest_fetches_during_commit"
            ),
        )


ManifestConfig._NESTED = {
    "preload": ManifestPreloadConfig,
    "virtual_chunk_location_compression": ManifestVirtualChunkLocationCompressionConfig,
}


# -- storage settings -----------------------------------------------------------
#
# Icechunk's ``icechunk.storage`` holds the ``StorageSettings`` family and
# ``floe.storage`` re-exports it; the classes are defined here because a configuration
# holds them (``RepositoryConfig.storage``, ``RepoUpdateRetryConfig.default``) and
# ``floe.storage`` builds on this module, not the other way round.


class _Settings(_Section):
    """Shared behaviour of the settings classes: keyword construction, equality by
    fields, Icechunk's three displays (``repr`` executable as
    ``icechunk.storage.X(...)``, ``str`` with the effective defaults of unset fields
    marked ``(default)``, ``_repr_html_``), pickling by fields."""

    _MODULE = "storage"

    @property
    def _fields(self) -> tuple[str, ...]:
        return self._FIELDS

    # Settings hash by their fields (as Icechunk's), unlike the other sections: mypy
    # cannot express a hashable subclass of an unhashable class.
    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(repr(getattr(self, f)) for f in self._FIELDS))

    def __reduce__(self):
        return (type(self), tuple(getattr(self, f) for f in self._FIELDS))


class StorageRetriesSettings(_Settings):
    """How failed requests are retried, with exponential backoff (Icechunk's
    ``StorageRetriesSettings``).

    ``max_tries``: tries of a request, the first included (1: no retry); ``None``
    keeps object_store's default (11). ``initial_backoff_ms`` / ``max_backoff_ms``:
    the first and the longest wait between tries, in milliseconds; ``None`` keeps the
    defaults (100 ms and 15 s).

    ```python
    config = floe.RepositoryConfig.default()
    config.storage = floe.StorageSettings(
        retries=floe.StorageRetriesSettings(max_tries=5, initial_backoff_ms=200)
    )
    repo = repo.reopen(config)
    ```
    """

    _FIELDS = ("max_tries", "initial_backoff_ms", "max_backoff_ms")
    # object_store's defaults, which floe's client keeps: 10 retries after the
    # first try, 100 ms first backoff, 15 s longest backoff.
    _DEFAULTS = {"max_tries": 11, "initial_backoff_ms": 100, "max_backoff_ms": 15_000}

    def __init__(
        self,
        max_tries: int | None = None,
        initial_backoff_ms: int | None = None,
        max_backoff_ms: int | None = None,
    ) -> None:
        self.max_tries = max_tries
        self.initial_backoff_ms = initial_backoff_ms
        self.max_backoff_ms = max_backoff_ms


class StorageTimeoutSettings(_Settings):
    """Timeouts of storage requests, in milliseconds (Icechunk's
    ``StorageTimeoutSettings``); ``None`` keeps object_store's default.

    ``connect_timeout_ms``: establishing a connection (default 5 s);
    ``read_timeout_ms``: the longest a response may stall between bytes (default: no
    limit); ``operation_timeout_ms``: a whole operation, retries included (default
    3 min); ``operation_attempt_timeout_ms``: one try (default 30 s).

    ```python
    config = floe.RepositoryConfig.default()
    config.storage = floe.StorageSettings(
        timeouts=floe.StorageTimeoutSettings(connect_timeout_ms=2_000, operation_timeout_ms=60_000)
    )
    repo = repo.reopen(config)
    ```
    """

    _FIELDS = (
        "connect_timeout_ms",
        "read_timeout_ms",
        "operation_timeout_ms",
        "operation_attempt_timeout_ms",
    )

    def __init__(
        self,
        connect_timeout_ms: int | None = None,
        read_timeout_ms: int | None = None,
        operation_timeout_ms: int | None = None,
        operation_attempt_timeout_ms: int | None = None,
    ) -> None:
        self.connect_timeout_ms = connect_timeout_ms
        self.read_timeout_ms = read_timeout_ms
        self.operation_timeout_ms = operation_timeout_ms
        self.operation_attempt_timeout_ms = operation_attempt_timeout_ms


class StorageConcurrencySettings(_Settings):
    """Icechunk's split of large reads into concurrent requests
    (``max_concurrent_requests_for_object``, ``ideal_concurrent_request_size`` in
    bytes). Kept for compatibility: floe plans its reads itself (coalesced ranged
    reads), so these values do not change its requests.

    ```python
    settings = floe.StorageSettings(
        concurrency=floe.StorageConcurrencySettings(ideal_concurrent_request_size=16 << 20)
    )
    ```
    """

    _FIELDS = ("max_concurrent_requests_for_object", "ideal_concurrent_request_size")

    def __init__(
        self,
        max_concurrent_requests_for_object: int | None = None,
        ideal_concurrent_request_size: int | None = None,
    ) -> None:
        self.max_concurrent_requests_for_object = max_concurrent_requests_for_object
        self.ideal_concurrent_request_size = ideal_concurrent_request_size


class StorageSettings(_Settings):
    """Icechunk's ``StorageSettings``: ``concurrency``, ``retries`` and ``timeouts``
    (the classes above, or ``None`` for the defaults), the ``unsafe_use_*`` switches,
    storage classes and ``minimum_size_for_multipart_upload`` (bytes).

    floe passes ``retries`` and ``timeouts`` to the object-store client. It refuses
    ``unsafe_use_conditional_create=False`` and ``unsafe_use_conditional_update=False``
    with ``ValueError``: floe never writes a repository without preconditions (see the
    module documentation). The other fields are kept and compared but do not change
    floe's requests.

    ```python
    config = floe.RepositoryConfig.default()
    config.storage = floe.StorageSettings(
        retries=floe.StorageRetriesSettings(max_tries=3),
        timeouts=floe.StorageTimeoutSettings(read_timeout_ms=30_000),
    )
    repo = repo.reopen(config)
    print(repo.config.storage.retries.max_tries)  # 3
    ```
    """

    _FIELDS = (
        "unsafe_use_conditional_create",
        "unsafe_use_conditional_update",
        "unsafe_use_metadata",
        "storage_class",
        "metadata_storage_class",
        "chunks_storage_class",
        "minimum_size_for_multipart_upload",
        "concurrency",
        "retries",
        "timeouts",
    )

    def __init__(
        self,
        concurrency: StorageConcurrencySettings | None = None,
        retries: StorageRetriesSettings | None = None,
        unsafe_use_conditional_create: bool | None = None,
        unsafe_use_conditional_update: bool | None = None,
        unsafe_use_metadata: bool | None = None,
        storage_class: str | None = None,
        metadata_storage_class: str | None = None,
        chunks_storage_class: str | None = None,
        minimum_size_for_multipart_upload: int | None = None,
        timeouts: StorageTimeoutSettings | None = None,
    ) -> None:
        for name, value in (
            ("unsafe_use_conditional_create", unsafe_use_conditional_create),
            ("unsafe_use_conditional_update", unsafe_use_conditional_update),
        ):
            if value is False:
                raise ValueError(
                    f"{name}=False is not supported by floe: it never writes a repository "
                    "without conditional writes (use a server that enforces them)"
                )
        self.concurrency = concurrency
        self.retries = retries
        self.unsafe_use_conditional_create = unsafe_use_conditional_create
        self.unsafe_use_conditional_update = unsafe_use_conditional_update
        self.unsafe_use_metadata = unsafe_use_metadata
        self.storage_class = storage_class
        self.metadata_storage_class = metadata_storage_class
        self.chunks_storage_class = chunks_storage_class
        self.minimum_size_for_multipart_upload = minimum_size_for_multipart_upload
        self.timeouts = timeouts

    def __reduce__(self):
        return (
            type(self),
            (
                self.concurrency,
                self.retries,
                self.unsafe_use_conditional_create,
                self.unsafe_use_conditional_update,
                self.unsafe_use_metadata,
                self.storage_class,
                self.metadata_storage_class,
                self.chunks_storage_class,
                self.minimum_size_for_multipart_upload,
                self.timeouts,
            ),
        )


# What ``str`` shows for unset fields: floe always writes with preconditions, and
# unset retries and concurrency expand to their own (default) fields.
StorageSettings._DEFAULTS = {
    "unsafe_use_conditional_create": True,
    "unsafe_use_conditional_update": True,
}
StorageSettings._NESTED = {
    "concurrency": StorageConcurrencySettings,
    "retries": StorageRetriesSettings,
}


def _default_settings() -> StorageSettings:
    """What ``Storage.default_settings()`` returns: floe's effective defaults (those
    of the object-store client) with the nested sections present, so that callers can
    change them in place (``settings.retries.max_tries = 3``)."""
    return StorageSettings(
        concurrency=StorageConcurrencySettings(),
        retries=StorageRetriesSettings(**StorageRetriesSettings._DEFAULTS),
    )


# The classes are ``floe.storage``'s (Icechunk's ``icechunk.storage``): their module
# says so, for pickles, ``help()`` and documentation tools.
for _cls in (
    StorageRetriesSettings,
    StorageTimeoutSettings,
    StorageConcurrencySettings,
    StorageSettings,
):
    _cls.__module__ = "floe.storage"
del _cls

_RETRY_FIELDS = StorageRetriesSettings._FIELDS
_STORAGE_SECTIONS: dict[str, type[_Settings]] = {
    "concurrency": StorageConcurrencySettings,
    "retries": StorageRetriesSettings,
    "timeouts": StorageTimeoutSettings,
}
_STORAGE_SCALARS = (
    "unsafe_use_conditional_update",
    "unsafe_use_conditional_create",
    "unsafe_use_metadata",
    "storage_class",
    "metadata_storage_class",
    "chunks_storage_class",
    "minimum_size_for_multipart_upload",
)


def _fields_plain(obj: Any, fields: Iterable[str]) -> dict[str, Any]:
    if hasattr(obj, "_to_plain"):
        return obj._to_plain()
    if isinstance(obj, Mapping):
        return {f: obj.get(f) for f in fields}
    return {f: getattr(obj, f, None) for f in fields}


def _construct(cls: type[Any], kwargs: dict[str, Any]) -> Any:
    """``cls(**kwargs)`` (unset fields left out); when the constructor refuses a
    value that a stored configuration holds (floe's ``StorageSettings`` refuses
    ``unsafe_use_conditional_update=False``, which Icechunk stores for local
    storage), the value is still read back as stored: set without the check, so the
    configuration round-trips (the storage layer refuses to act on it)."""
    try:
        return cls(**{k: v for k, v in kwargs.items() if v is not None})
    except ValueError:
        obj = object.__new__(cls)  # none of the settings classes defines __new__
        for k, v in kwargs.items():
            object.__setattr__(obj, k, v)
        return obj


def _fields_value(cls: type[_Settings], d: Mapping[str, Any]) -> Any:
    return _construct(cls, {f: d.get(f) for f in cls._FIELDS})


def _storage_to_plain(settings: Any) -> Any:
    if settings is None:
        return None
    if hasattr(settings, "_to_plain"):
        return settings._to_plain()
    get = settings.get if isinstance(settings, Mapping) else (lambda f: getattr(settings, f, None))
    out: dict[str, Any] = {}
    for section, cls in _STORAGE_SECTIONS.items():
        value = get(section)
        out[section] = None if value is None else _fields_plain(value, cls._FIELDS)
    for f in _STORAGE_SCALARS:
        out[f] = get(f)
    return out


def _storage_from_plain(d: Any) -> Any:
    if d is None:
        return None
    kwargs: dict[str, Any] = {}
    for section, cls in _STORAGE_SECTIONS.items():
        value = d.get(section)
        kwargs[section] = None if value is None else _fields_value(cls, value)
    for f in _STORAGE_SCALARS:
        kwargs[f] = d.get(f)
    return _construct(StorageSettings, kwargs)


class RepoUpdateRetryConfig(_Section):
    """How often an update of the spec-2 ``repo`` object (a commit, a branch or tag
    change, a configuration save) is tried when another writer changed it meanwhile:
    ``default`` (a ``StorageRetriesSettings``: ``max_tries``, and waits from
    ``initial_backoff_ms`` doubling up to ``max_backoff_ms``, jittered; its unset fields
    take Icechunk's 100 tries, 50 ms and 30 s). With no ``default``, floe retries its
    own way: 100 tries, 5 at once, then waits from 40 ms up to 5 s. An update that
    loses every try raises ``ConflictError`` (kind ``update-attempts-exhausted``).

    ```python
    config = floe.RepositoryConfig.default()
    config.repo_update_retries = floe.RepoUpdateRetryConfig(
        default=floe.StorageRetriesSettings(max_tries=20, initial_backoff_ms=100)
    )
    repo = repo.reopen(config)
    ```
    """

    _FIELDS = ("default",)

    def __init__(self, default: Any = None):
        self.default = default

    def _str_value(self, field: str) -> str:
        if self.default is None:
            shown = _fields_value(
                StorageRetriesSettings,
                {"max_tries": 100, "initial_backoff_ms": 50, "max_backoff_ms": 30000},
            )
            return "\n" + _indent(str(shown))
        return super()._str_value(field)

    def _to_plain(self) -> dict[str, Any]:
        return {
            "default": None if self.default is None else _fields_plain(self.default, _RETRY_FIELDS)
        }

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> RepoUpdateRetryConfig:
        default = d.get("default")
        return cls(None if default is None else _fields_value(StorageRetriesSettings, default))


# -- virtual chunk containers (as far as the configuration holds them) --------------

_S3_FIELDS = (
    "region",
    "endpoint_url",
    "anonymous",
    "allow_http",
    "force_path_style",
    "network_stream_timeout_seconds",
    "requester_pays",
)


def _s3_from_plain(d: Mapping[str, Any]) -> S3Options:
    return S3Options(**{f: d[f] for f in _S3_FIELDS if d.get(f) is not None})


class _Store(_Section):
    _MODULE = "config"
    _TAG = ""

    def _qualname(self) -> str:
        return f"{_package()}.config.ObjectStoreConfig.{type(self).__name__}"

    def _to_plain(self) -> Any:
        """The store as Icechunk's configuration holds it; every kind defines it."""
        raise NotImplementedError


class ObjectStoreConfig:
    """Where a virtual chunk container's objects are: ``InMemory()``,
    ``LocalFileSystem(path)``, ``S3(options)`` / ``S3Compatible(options)`` /
    ``Tigris(options)`` (an ``S3Options``), ``Gcs(opts)``, ``Azure(opts)``,
    ``Http(opts, headers)``.

    ```python
    container = floe.VirtualChunkContainer(
        "file:///data/netcdf/", floe.ObjectStoreConfig.LocalFileSystem("/data/netcdf")
    )
    s3 = floe.ObjectStoreConfig.S3(floe.S3Options(region="us-east-1"))
    ```
    """

    class InMemory(_Store):
        """Objects in memory."""

        def __repr__(self) -> str:
            return f"{self._qualname()}()"

        def _to_plain(self) -> Any:
            return "in_memory"

    class LocalFileSystem(_Store):
        """Files under the directory ``path``."""

        _FIELDS = ("path",)

        def __init__(self, path: str):
            self.path = str(path)

        def __repr__(self) -> str:
            return f"{self._qualname()}({json.dumps(self.path)})"

        def _to_plain(self) -> Any:
            return {"local_file_system": self.path}

    class S3(_Store):
        """AWS S3, with ``options`` (an ``S3Options``)."""

        _FIELDS = ("options",)
        _TAG = "s3"

        def __init__(self, options: Any):
            self.options = options

        def __repr__(self) -> str:
            return f"{self._qualname()}({self.options!r})"

        def _to_plain(self) -> Any:
            return {self._TAG: _fields_plain(self.options, _S3_FIELDS)}

    class S3Compatible(S3):
        """An S3-compatible store (MinIO, ...), with ``options``."""

        _TAG = "s3_compatible"

    class Tigris(S3):
        """Tigris, with ``options``."""

        _TAG = "tigris"

    class Gcs(_Store):
        """Google Cloud Storage, with ``opts`` (string options)."""

        _FIELDS = ("opts",)
        _TAG = "gcs"

        def __init__(self, opts: Mapping[str, str] | None = None):
            self.opts = dict(opts or {})

        def __repr__(self) -> str:
            return f"{self._qualname()}({_lit(self.opts)})"

        def _to_plain(self) -> Any:
            return {self._TAG: dict(self.opts)}

    class Azure(Gcs):
        """Azure Blob Storage, with ``opts`` (an ``account`` key among them)."""

        _TAG = "azure"

    class Http(_Store):
        """HTTP(S) servers, with transport ``opts`` and static ``headers``."""

        _FIELDS = ("opts", "headers")

        def __init__(
            self, opts: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None
        ):
            self.opts = dict(opts or {})
            self.headers = dict(headers or {})

        def __repr__(self) -> str:
            return f"{self._qualname()}({_lit(self.opts)}, {_lit(self.headers)})"

        def _to_plain(self) -> Any:
            body: dict[str, Any] = dict(self.opts)
            if self.headers:
                body["headers"] = dict(self.headers)
            return {"http": body}

    @staticmethod
    def _from_plain(plain: Any) -> _Store:
        if plain == "in_memory":
            return ObjectStoreConfig.InMemory()
        if isinstance(plain, dict) and len(plain) == 1:
            ((tag, body),) = plain.items()
            if tag == "local_file_system":
                return ObjectStoreConfig.LocalFileSystem(body)
            s3 = {
                "s3": ObjectStoreConfig.S3,
                "s3_compatible": ObjectStoreConfig.S3Compatible,
                "tigris": ObjectStoreConfig.Tigris,
            }
            if tag in s3:
                return s3[tag](_s3_from_plain(body or {}))
            if tag in ("gcs", "azure"):
                return (ObjectStoreConfig.Gcs if tag == "gcs" else ObjectStoreConfig.Azure)(
                    body or {}
                )
            if tag == "http":
                body = dict(body or {})
                headers = body.pop("headers", None)
                return ObjectStoreConfig.Http(body, headers)
        raise ValueError(f"unknown object store in the configuration: {plain!r}")


class VirtualChunkContainer(_Section):
    """Virtual chunk refs whose location starts with ``url_prefix`` are read through
    ``store`` (an ``ObjectStoreConfig``); a ``name`` is optional. Only the
    configuration side: reading through containers needs the repository to be opened
    with access to them.

    ```python
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer("s3://my-bucket/netcdf/", floe.s3_store(region="us-east-1"))
    )
    repo = repo.reopen(config)
    repo.save_config()  # readers see the container; each authorizes it when opening
    ```
    """

    _FIELDS = ("name", "url_prefix", "store")

    def __init__(self, url_prefix: str, store: _Store, name: str | None = None):
        if not isinstance(store, _Store):
            raise TypeError(f"store must be an ObjectStoreConfig, got {store!r}")
        self.url_prefix = url_prefix
        self.store = store
        self.name = name

    def _qualname(self) -> str:
        return f"{_package()}.virtual.VirtualChunkContainer"

    def __repr__(self) -> str:
        return (
            f"{self._qualname()}(\n    name={_lit(self.name)},\n"
            f"    url_prefix={_lit(self.url_prefix)},\n"
            f"    store={self.store!r},\n)"
        )

    def _to_plain(self) -> dict[str, Any]:
        return {"name": self.name, "url_prefix": self.url_prefix, "store": self.store._to_plain()}

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> VirtualChunkContainer:
        return cls(d["url_prefix"], ObjectStoreConfig._from_plain(d["store"]), name=d.get("name"))


def s3_store(
    region: str | None = None,
    endpoint_url: str | None = None,
    allow_http: bool = False,
    anonymous: bool = False,
    s3_compatible: bool = False,
    force_path_style: bool = False,
    network_stream_timeout_seconds: int = 60,
    requester_pays: bool = False,
) -> ObjectStoreConfig.S3:
    """The ``ObjectStoreConfig`` of an S3 (or, with ``s3_compatible``, S3-compatible)
    store for a virtual chunk container.

    ```python
    store_config = floe.s3_store(region="us-east-1", anonymous=True)
    minio = floe.s3_store(
        endpoint_url="http://localhost:9000", allow_http=True, s3_compatible=True
    )
    container = floe.VirtualChunkContainer("s3://public-bucket/", store_config)
    ```
    """
    options = _s3_from_plain(
        {
            "region": region,
            "endpoint_url": endpoint_url,
            "anonymous": anonymous,
            "allow_http": allow_http,
            "force_path_style": force_path_style,
            "network_stream_timeout_seconds": network_stream_timeout_seconds,
            "requester_pays": requester_pays,
        }
    )
    return (ObjectStoreConfig.S3Compatible if s3_compatible else ObjectStoreConfig.S3)(options)


def gcs_store(opts: Mapping[str, str] | None = None) -> ObjectStoreConfig.Gcs:
    """The ``ObjectStoreConfig`` of Google Cloud Storage for a virtual chunk container
    (Icechunk's ``gcs_store``): ``opts`` are object_store ``GoogleConfigKey`` names and
    string values (``google_base_url``, ...). The container's URL prefix is
    ``gs://bucket/...`` (or ``gcs://``); the bucket is each location's host.

    Reads sign with the ``containers_credentials`` given for the prefix
    (``gcs_credentials(...)``: anonymous, service account, application credentials,
    bearer token, refreshable, from the environment), anonymously without one. From a
    container only the repository's configuration names, a ``google_base_url`` is
    contacted only when it is the reader's ``STORAGE_EMULATOR_HOST``, and options
    naming credentials are refused (``FloeError``); a container the reader passes in
    its own ``config`` when opening is trusted whole.

    ```python
    container = floe.VirtualChunkContainer("gs://my-bucket/data/", floe.gcs_store())
    ```
    """
    return ObjectStoreConfig.Gcs(opts)


def azure_store(
    *, account: str, config: Mapping[str, str] | None = None
) -> ObjectStoreConfig.Azure:
    """The ``ObjectStoreConfig`` of Azure Blob Storage account ``account`` for a virtual
    chunk container (Icechunk's ``azure_store``): ``config`` holds object_store
    ``AzureConfigKey`` names and string values (``azure_storage_use_emulator``,
    ``azure_storage_endpoint``, ...). The container's URL prefix is
    ``az://container/...`` (or ``azure://``, ``abfs://``); the Azure container is each
    location's host.

    Reads sign with the ``containers_credentials`` given for the prefix
    (``azure_credentials(...)``: account key, SAS token, bearer token, refreshable,
    anonymous, from the environment), anonymously without one. From a container only
    the repository's configuration names, an endpoint or the emulator switch is used
    only when it is the reader's own (``AZURE_STORAGE_ENDPOINT``,
    ``AZURE_STORAGE_USE_EMULATOR``), the account with credentials only when it is the
    reader's ``AZURE_STORAGE_ACCOUNT_NAME``, and options naming credentials are
    refused (``FloeError``); a container the reader passes in its own ``config`` when
    opening is trusted whole.

    ```python
    container = floe.VirtualChunkContainer(
        "az://data/", floe.config.azure_store(account="myaccount")
    )
    ```
    """
    return ObjectStoreConfig.Azure({"account": account, **dict(config or {})})


def http_store(
    opts: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None
) -> ObjectStoreConfig.Http:
    """The ``ObjectStoreConfig`` of HTTP(S) servers for a virtual chunk container.

    ```python
    container = floe.VirtualChunkContainer("https://example.org/files/", floe.http_store())
    ```
    """
    return ObjectStoreConfig.Http(opts, headers)


def local_filesystem_store(path: str) -> ObjectStoreConfig.LocalFileSystem:
    """The ``ObjectStoreConfig`` of a local directory for a virtual chunk container.

    ```python
    import os

    path = os.path.abspath("netcdf")
    container = floe.VirtualChunkContainer(
        f"file://{path}/", floe.local_filesystem_store(path)
    )
    ```
    """
    return ObjectStoreConfig.LocalFileSystem(path)


# -- the repository configuration -------------------------------------------------


class RepositoryConfig(_Section):
    """A repository's configuration (Icechunk's ``RepositoryConfig``).

    Fields (all optional, Icechunk's defaults in brackets): ``inline_chunk_threshold_bytes``
    (chunks of at most this many encoded bytes are stored in the manifest [512]),
    ``get_partial_values_concurrency`` [10], ``max_concurrent_requests`` (storage
    requests of the repository in flight at once [256]),
    ``max_concurrent_decodes`` [2], ``num_updates_per_repo_info_file`` (spec 2: ops-log
    entries per ``repo`` object [1,000]), ``compression`` (``CompressionConfig``),
    ``caching`` (``CachingConfig``), ``storage`` (a ``StorageSettings``), ``manifest``
    (``ManifestConfig``), ``repo_update_retries`` (``RepoUpdateRetryConfig``: tries
    and backoff, in milliseconds, of a spec-2 ``repo`` object update that another
    writer raced; unset, floe's own: 100 tries, 5 at once, then 40 ms up to 5 s),
    ``virtual_chunk_containers`` (url prefix → ``VirtualChunkContainer``), and
    floe's ``chunk_packing`` (``ChunkPackingConfig``: small chunks written several to
    one chunk object; on by default for object storage).

    Keys of a stored configuration that floe does not know are kept and written back.

    ```python
    config = floe.RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = 1024  # bytes
    new_repo = floe.Repository.create(floe.local_filesystem_storage("new-repo"), config)

    # Later, or on an existing repository: change and store it.
    config = repo.config
    config.max_concurrent_requests = 64
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer("s3://my-bucket/", floe.s3_store(region="us-east-1"))
    )
    repo = repo.reopen(config)
    repo.save_config()
    print(floe.Repository.fetch_config(repo.storage).max_concurrent_requests)  # 64

    config.clear_virtual_chunk_containers()  # an empty set of containers
    ```
    """

    _FIELDS = (
        "inline_chunk_threshold_bytes",
        "get_partial_values_concurrency",
        "max_concurrent_requests",
        "max_concurrent_decodes",
        "num_updates_per_repo_info_file",
        "compression",
        "caching",
        "storage",
        "manifest",
        "repo_update_retries",
        "virtual_chunk_containers",
        "chunk_packing",
    )
    _DEFAULTS = {
        "inline_chunk_threshold_bytes": 512,
        "get_partial_values_concurrency": 10,
        "max_concurrent_requests": 256,
        "max_concurrent_decodes": 2,
        "num_updates_per_repo_info_file": 1000,
    }
    _NESTED = {
        "compression": CompressionConfig,
        "caching": CachingConfig,
        "manifest": ManifestConfig,
        "repo_update_retries": RepoUpdateRetryConfig,
        "chunk_packing": ChunkPackingConfig,
    }
    _U16_FIELDS = (
        "inline_chunk_threshold_bytes",
        "get_partial_values_concurrency",
        "max_concurrent_requests",
        "max_concurrent_decodes",
        "num_updates_per_repo_info_file",
    )

    def __init__(
        self,
        inline_chunk_threshold_bytes: int | None = None,
        get_partial_values_concurrency: int | None = None,
        compression: CompressionConfig | None = None,
        max_concurrent_requests: int | None = None,
        caching: CachingConfig | None = None,
        storage: Any = None,
        virtual_chunk_containers: Mapping[str, VirtualChunkContainer] | None = None,
        manifest: ManifestConfig | None = None,
        repo_update_retries: RepoUpdateRetryConfig | None = None,
        num_updates_per_repo_info_file: int | None = None,
        max_concurrent_decodes: int | None = None,
        chunk_packing: ChunkPackingConfig | None = None,
    ):
        self._extra: dict[str, Any] = {}
        self.previous_file: str | None = None
        self.inline_chunk_threshold_bytes = inline_chunk_threshold_bytes
        self.get_partial_values_concurrency = get_partial_values_concurrency
        self.compression = compression
        self.max_concurrent_requests = max_concurrent_requests
        self.caching = caching
        self.storage = storage
        self.manifest = manifest
        self.repo_update_retries = repo_update_retries
        self.num_updates_per_repo_info_file = num_updates_per_repo_info_file
        self.max_concurrent_decodes = max_concurrent_decodes
        self.chunk_packing = chunk_packing
        self._virtual_chunk_containers: dict[str, VirtualChunkContainer] | None = None
        if virtual_chunk_containers is not None:
            self._virtual_chunk_containers = {}
            for c in virtual_chunk_containers.values():
                self.set_virtual_chunk_container(c)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._U16_FIELDS:
            value = _opt_int(name, value, maximum=_U16)
        elif (
            name in self._NESTED and value is not None and not isinstance(value, self._NESTED[name])
        ):
            raise TypeError(
                f"{name} must be a {self._NESTED[name].__name__} or None, got {value!r}"
            )
        object.__setattr__(self, name, value)

    @staticmethod
    def default() -> RepositoryConfig:
        """A configuration with every field unset (Icechunk's defaults apply).

        ```python
        config = floe.RepositoryConfig.default()
        print(config.inline_chunk_threshold_bytes)  # None: Icechunk's default (512) applies
        ```
        """
        return RepositoryConfig()

    # -- virtual chunk containers ---------------------------------------------------

    @property
    def virtual_chunk_containers(self) -> dict[str, VirtualChunkContainer] | None:
        """The containers by url prefix, ``None`` when the configuration sets none (a
        copy: change them with ``set_virtual_chunk_container`` /
        ``clear_virtual_chunk_containers``)."""
        return (
            None if self._virtual_chunk_containers is None else dict(self._virtual_chunk_containers)
        )

    def get_virtual_chunk_container(self, name: str) -> VirtualChunkContainer | None:
        """The container with this url prefix, ``None`` when there is none.

        ```python
        config = floe.RepositoryConfig.default()
        config.set_virtual_chunk_container(
            floe.VirtualChunkContainer("s3://my-bucket/", floe.s3_store(region="us-east-1"))
        )
        print(config.get_virtual_chunk_container("s3://my-bucket/").url_prefix)  # s3://my-bucket/
        config.clear_virtual_chunk_containers()
        print(config.virtual_chunk_containers)  # {}
        ```
        """
        return (self._virtual_chunk_containers or {}).get(name)

    def set_virtual_chunk_container(self, cont: VirtualChunkContainer) -> None:
        """Adds ``cont``, replacing the container of the same url prefix, and, for a
        named one, any container of the same name (a name identifies a container)."""
        if not isinstance(cont, VirtualChunkContainer):
            raise TypeError(f"expected a VirtualChunkContainer, got {cont!r}")
        containers = self._virtual_chunk_containers or {}
        if cont.name is not None:
            containers = {k: v for k, v in containers.items() if v.name != cont.name}
        containers[cont.url_prefix] = cont
        self._virtual_chunk_containers = containers

    def clear_virtual_chunk_containers(self) -> None:
        """Removes every container (an empty set, which replaces the stored containers
        when merged over them)."""
        self._virtual_chunk_containers = {}

    # -- merging --------------------------------------------------------------------

    def merge(self, other: RepositoryConfig) -> RepositoryConfig:
        """A new configuration: ``other`` over this one. Every field ``other`` sets
        wins; ``compression``, ``caching``, ``storage``, ``manifest`` (and its
        ``preload`` and ``virtual_chunk_location_compression``) and
        ``repo_update_retries`` and ``chunk_packing`` merge field by field;
        ``virtual_chunk_containers`` and ``manifest.splitting`` are replaced whole
        (Icechunk's rules, applied by the engine).

        ```python
        base = floe.RepositoryConfig(inline_chunk_threshold_bytes=1024)
        override = floe.RepositoryConfig(max_concurrent_requests=64)
        merged = base.merge(override)
        print(merged.inline_chunk_threshold_bytes, merged.max_concurrent_requests)  # 1024 64
        ```
        """
        if not isinstance(other, RepositoryConfig):
            raise TypeError(f"expected a RepositoryConfig, got {other!r}")
        from floe._floe import _merge_configs  # noqa: PLC0415

        return _merge_configs(self, other)

    # -- equality and displays ------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._to_plain() == other._to_plain()

    __hash__ = None

    def __repr__(self) -> str:
        lines = [f"{self._qualname()}("]
        for f in self._FIELDS:
            value = getattr(self, f)
            if f == "virtual_chunk_containers" and value is not None:
                shown = "{" + ", ".join(f"{_lit(k)}: {v!r}" for k, v in value.items()) + "}"
            else:
                shown = _lit(value)
            lines.append(_indent(f"{f}={shown},"))
        lines.append(")")
        return "\n".join(lines)

    # -- the plain form (what crosses to the engine) ----------------------------------

    def _to_plain(self) -> dict[str, Any]:
        """The configuration as the engine takes it (serde's plain form)."""
        out = dict(self._extra)
        out.update(
            {
                "inline_chunk_threshold_bytes": self.inline_chunk_threshold_bytes,
                "get_partial_values_concurrency": self.get_partial_values_concurrency,
                "compression": None if self.compression is None else self.compression._to_plain(),
                "max_concurrent_requests": self.max_concurrent_requests,
                "max_concurrent_decodes": self.max_concurrent_decodes,
                "caching": None if self.caching is None else self.caching._to_plain(),
                "storage": _storage_to_plain(self.storage),
                "virtual_chunk_containers": None
                if self._virtual_chunk_containers is None
                else {k: v._to_plain() for k, v in self._virtual_chunk_containers.items()},
                "manifest": None if self.manifest is None else self.manifest._to_plain(),
                "previous_file": self.previous_file,
                "repo_update_retries": None
                if self.repo_update_retries is None
                else self.repo_update_retries._to_plain(),
                "num_updates_per_repo_info_file": self.num_updates_per_repo_info_file,
                "chunk_packing": None
                if self.chunk_packing is None
                else self.chunk_packing._to_plain(),
            }
        )
        return out

    @classmethod
    def _from_plain(cls, d: Mapping[str, Any]) -> RepositoryConfig:
        """A configuration from the engine's plain form."""

        def section(key: str, t: Any) -> Any:
            return None if d.get(key) is None else t._from_plain(d[key])

        config = cls(
            inline_chunk_threshold_bytes=d.get("inline_chunk_threshold_bytes"),
            get_partial_values_concurrency=d.get("get_partial_values_concurrency"),
            compression=section("compression", CompressionConfig),
            max_concurrent_requests=d.get("max_concurrent_requests"),
            caching=section("caching", CachingConfig),
            storage=_storage_from_plain(d.get("storage")),
            manifest=section("manifest", ManifestConfig),
            repo_update_retries=section("repo_update_retries", RepoUpdateRetryConfig),
            num_updates_per_repo_info_file=d.get("num_updates_per_repo_info_file"),
            max_concurrent_decodes=d.get("max_concurrent_decodes"),
            chunk_packing=section("chunk_packing", ChunkPackingConfig),
        )
        containers = d.get("virtual_chunk_containers")
        if containers is not None:
            config._virtual_chunk_containers = {
                k: VirtualChunkContainer._from_plain(v) for k, v in containers.items()
            }
        config.previous_file = d.get("previous_file")
        known = set(config._to_plain())
        config._extra = {k: v for k, v in d.items() if k not in known and v is not None}
        return config
