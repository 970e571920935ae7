"""The ops log of a spec-2 repository, as Icechunk's ``icechunk.ops``: ``Update``
(one entry: ``kind``, ``updated_at``, ``backup_path``) and ``UpdateType`` (the
kinds, one class each, e.g. ``UpdateType.NewCommit(branch, new_snap_id)``), and the
repository status values its entries carry (``RepoAvailability``, ``RepoStatus``,
offered as ``floe.repository``'s)."""

from __future__ import annotations

import datetime
from enum import Enum
from typing import Any

from floe._display import html_block, qualified, text_block

__all__ = ["Update", "UpdateType"]


# The status of a repository, which ``floe.repository`` offers (``Repository.status``)
# and the ops log records (``UpdateType.RepoStatusChanged``): defined here, below
# both, and re-exported by ``floe.repository``, whose names they keep.


class RepoAvailability(Enum):
    """Whether a spec-2 repository accepts writes (Icechunk's
    ``RepoAvailability``): ``online`` or ``read_only``."""

    online = "online"
    read_only = "read_only"

    def __repr__(self) -> str:
        return f"RepoAvailability.{self.name}"

    def __str__(self) -> str:
        return "Online" if self is RepoAvailability.online else "ReadOnly"


class RepoStatus:
    """The status of a spec-2 repository (Icechunk's ``RepoStatus``):
    ``availability``, ``limited_availability_reason`` (why it is not online, if
    said) and ``set_at`` (when it was set, UTC; ``None`` for a status not yet
    stored).

    ```python
    repo.set_status(floe.RepoStatus(floe.RepoAvailability.read_only, "migrating"))
    print(repo.get_status().availability)  # ReadOnly
    repo.set_status(floe.RepoStatus(floe.RepoAvailability.online))
    ```
    """

    __slots__ = ("availability", "limited_availability_reason", "set_at")

    def __init__(
        self,
        availability: RepoAvailability,
        limited_availability_reason: str | None = None,
        set_at: datetime.datetime | None = None,
    ):
        self.availability = RepoAvailability(availability)
        self.limited_availability_reason = limited_availability_reason
        self.set_at = set_at

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RepoStatus) and self._fields() == other._fields()

    def _fields(self) -> list[tuple[str, object]]:
        return [
            ("availability", str(self.availability)),
            ("set_at", repr(self.set_at)),
            ("limited_availability_reason", self.limited_availability_reason),
        ]

    def __repr__(self) -> str:
        return text_block(qualified("repository.RepoStatus"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("repository.RepoStatus"), self._fields())


for _cls in (RepoAvailability, RepoStatus):
    _cls.__module__ = "floe.repository"
del _cls


class UpdateType:
    """The base of the ops-log entry kinds (Icechunk's ``icechunk.ops.UpdateType``);
    each kind is a nested class with its fields as attributes
    (``isinstance(update.kind, UpdateType.NewCommit)``), compared by value.

    ```python
    from floe.ops import UpdateType

    newest = next(iter(repo.ops_log()))  # newest first
    if isinstance(newest.kind, UpdateType.NewCommit):
        print(newest.kind.branch, newest.kind.new_snap_id)  # main <the new snapshot id>
    ```
    """

    _fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        values = dict(zip(self._fields, args, strict=False))
        values.update(kwargs)
        for name in self._fields:
            setattr(self, name, values.get(name))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self._fields
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, *(repr(getattr(self, n)) for n in self._fields)))

    def __repr__(self) -> str:
        args = ", ".join(
            f'{n}="{getattr(self, n)}"'
            if isinstance(getattr(self, n), str)
            else f"{n}={getattr(self, n)!r}"
            for n in self._fields
        )
        return f"{qualified('ops.UpdateType')}.{type(self).__name__}({args})"

    __str__ = __repr__


#: One sentence per ops-log entry kind, its ``__doc__``.
_KIND_DOCS = {
    "RepoInitialized": "The repository was created.",
    "RepoMigrated": "The repository was upgraded from spec ``from_version`` to ``to_version``.",
    "RepoStatusChanged": "The repository status became ``status`` (a ``RepoStatus``).",
    "ConfigChanged": "The stored repository configuration was changed (``save_config``).",
    "MetadataChanged": "The repository metadata was changed (``set_metadata``).",
    "TagCreated": "Tag ``name`` was created.",
    "TagDeleted": "Tag ``name`` was deleted; it pointed at ``previous_snap_id``.",
    "BranchCreated": "Branch ``name`` was created.",
    "BranchDeleted": "Branch ``name`` was deleted; it pointed at ``previous_snap_id``.",
    "BranchReset": "Branch ``name`` was reset; it pointed at ``previous_snap_id``.",
    "NewCommit": "A commit on ``branch`` made snapshot ``new_snap_id``.",
    "CommitAmended": "The tip of ``branch``, ``previous_snap_id``, was amended to ``new_snap_id``.",
    "NewDetachedSnapshot": "A snapshot on no branch, ``new_snap_id``, was written (``flush``).",
    "GCRan": "Garbage collection ran (``garbage_collect``).",
    "ExpirationRan": "Snapshots were expired (``expire_snapshots``).",
    "FeatureFlagChanged": "Feature flag ``id`` was set to ``new_value`` (``None``: default).",
}


def _kind(name: str, *fields: str) -> type[UpdateType]:
    attrs = {
        "_fields": fields,
        "__qualname__": f"UpdateType.{name}",
        "__doc__": _KIND_DOCS.get(name, f"The ops-log entry kind ``{name}``."),
    }
    return type(name, (UpdateType,), attrs)


UpdateType.RepoInitialized = _kind("RepoInitialized")  # type: ignore[attr-defined]
UpdateType.RepoMigrated = _kind("RepoMigrated", "from_version", "to_version")  # type: ignore[attr-defined]
UpdateType.RepoStatusChanged = _kind("RepoStatusChanged", "status")  # type: ignore[attr-defined]
UpdateType.ConfigChanged = _kind("ConfigChanged")  # type: ignore[attr-defined]
UpdateType.MetadataChanged = _kind("MetadataChanged")  # type: ignore[attr-defined]
UpdateType.TagCreated = _kind("TagCreated", "name")  # type: ignore[attr-defined]
UpdateType.TagDeleted = _kind("TagDeleted", "name", "previous_snap_id")  # type: ignore[attr-defined]
UpdateType.BranchCreated = _kind("BranchCreated", "name")  # type: ignore[attr-defined]
UpdateType.BranchDeleted = _kind("BranchDeleted", "name", "previous_snap_id")  # type: ignore[attr-defined]
UpdateType.BranchReset = _kind("BranchReset", "name", "previous_snap_id")  # type: ignore[attr-defined]
UpdateType.NewCommit = _kind("NewCommit", "branch", "new_snap_id")  # type: ignore[attr-defined]
UpdateType.CommitAmended = _kind("CommitAmended", "branch", "previous_snap_id", "new_snap_id")  # type: ignore[attr-defined]
UpdateType.NewDetachedSnapshot = _kind("NewDetachedSnapshot", "new_snap_id")  # type: ignore[attr-defined]
UpdateType.GCRan = _kind("GCRan")  # type: ignore[attr-defined]
UpdateType.ExpirationRan = _kind("ExpirationRan")  # type: ignore[attr-defined]
UpdateType.FeatureFlagChanged = _kind("FeatureFlagChanged", "id", "new_value")  # type: ignore[attr-defined]

#: floe's snake-case ``type`` names (the native ops log) to the kinds.
_KINDS: dict[str, type[UpdateType]] = {
    "repo_initialized": UpdateType.RepoInitialized,  # type: ignore[attr-defined]
    "repo_migrated": UpdateType.RepoMigrated,  # type: ignore[attr-defined]
    "repo_status_changed": UpdateType.RepoStatusChanged,  # type: ignore[attr-defined]
    "config_changed": UpdateType.ConfigChanged,  # type: ignore[attr-defined]
    "metadata_changed": UpdateType.MetadataChanged,  # type: ignore[attr-defined]
    "tag_created": UpdateType.TagCreated,  # type: ignore[attr-defined]
    "tag_deleted": UpdateType.TagDeleted,  # type: ignore[attr-defined]
    "branch_created": UpdateType.BranchCreated,  # type: ignore[attr-defined]
    "branch_deleted": UpdateType.BranchDeleted,  # type: ignore[attr-defined]
    "branch_reset": UpdateType.BranchReset,  # type: ignore[attr-defined]
    "new_commit": UpdateType.NewCommit,  # type: ignore[attr-defined]
    "commit_amended": UpdateType.CommitAmended,  # type: ignore[attr-defined]
    "new_detached_snapshot": UpdateType.NewDetachedSnapshot,  # type: ignore[attr-defined]
    "gc_ran": UpdateType.GCRan,  # type: ignore[attr-defined]
    "expiration_ran": UpdateType.ExpirationRan,  # type: ignore[attr-defined]
    "feature_flag_changed": UpdateType.FeatureFlagChanged,  # type: ignore[attr-defined]
}


def _micros(value: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(value / 1_000_000, tz=datetime.UTC)


class Update:
    """One ops-log entry: ``kind`` (an ``UpdateType`` instance), ``updated_at``
    (a UTC datetime) and ``backup_path`` (the ``overwritten/`` copy of the ``repo``
    object that holds it, ``None`` for the newest entries), as Icechunk's
    ``icechunk.ops.Update``. ``Repository.ops_log()`` yields them, newest first.

    ```python
    for update in repo.ops_log():
        print(update.updated_at.isoformat(), update.kind)
    # ... UpdateType.NewCommit(branch="main", new_snap_id="...")
    # ... UpdateType.RepoInitialized()
    ```
    """

    __slots__ = ("kind", "updated_at", "backup_path")

    def __init__(self, kind: UpdateType, updated_at: datetime.datetime, backup_path: str | None):
        self.kind = kind
        self.updated_at = updated_at
        self.backup_path = backup_path

    @classmethod
    def _from_native(cls, raw: dict[str, Any]) -> Update:
        raw = dict(raw)
        name = raw.pop("type")
        updated_at = _micros(raw.pop("updated_at"))
        backup_path = raw.pop("backup_path", None)
        kind_cls = _KINDS.get(name)
        if kind_cls is None:
            kind_cls = _kind("".join(p.title() for p in name.split("_")))
        if kind_cls is UpdateType.RepoStatusChanged and isinstance(raw.get("status"), dict):  # type: ignore[attr-defined]
            st = raw["status"]
            raw["status"] = RepoStatus(
                RepoAvailability(st["availability"]), st.get("reason"), _micros(st["set_at"])
            )
        if kind_cls is UpdateType.FeatureFlagChanged:  # type: ignore[attr-defined]
            # Icechunk: new_value is None when the flag went back to its default.
            raw["new_value"] = raw["new_value"] if raw.pop("is_set", True) else None
        return cls(kind_cls(**raw), updated_at, backup_path)

    def _fields(self) -> list[tuple[str, object]]:
        return [
            ("kind", repr(self.kind)),
            ("updated_at", repr(self.updated_at)),
            ("backup_path", self.backup_path),
        ]

    def __repr__(self) -> str:
        return text_block(qualified("ops.Update"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("ops.Update"), self._fields())


class GCSummary:
    """What ``Repository.garbage_collect`` deleted (or, in a dry run, would
    delete), as Icechunk 2.3.0's ``GCSummary``: ``bytes_deleted`` and the counts
    ``chunks_deleted``, ``manifests_deleted``, ``snapshots_deleted``,
    ``attributes_deleted``, ``transaction_logs_deleted``; and the deletes that
    failed: ``objects_failed_to_delete`` (objects of the delete batches that failed
    after their retries; they stay, garbage for the next collection),
    ``throttled_batches`` (always 0 in floe: its storage layer retries throttled
    requests itself), ``delete_errors`` (the first distinct messages, at most 10)
    and ``skipped_phases`` (the kinds of objects not swept because an earlier kind
    had failures, in order: ``"transaction_logs"``, ``"manifests"``, ``"chunks"``).
    Also readable as a mapping (``summary["chunks_deleted"]``), as floe's earlier
    dict was.

    ```python
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    # dry_run deletes nothing; a cut-off this recent needs allow_recent_cutoff
    summary = repo.garbage_collect(now, dry_run=True, allow_recent_cutoff=True)
    print(summary.bytes_deleted, summary.chunks_deleted)  # 0 0: nothing unreachable
    print(summary.objects_failed_to_delete, summary.skipped_phases)  # 0 []
    print(dict(summary)["chunks_deleted"])  # 0
    ```
    """

    _COUNTS = (
        "bytes_deleted",
        "chunks_deleted",
        "manifests_deleted",
        "snapshots_deleted",
        "attributes_deleted",
        "transaction_logs_deleted",
        "objects_failed_to_delete",
        "throttled_batches",
    )
    _LISTS = ("delete_errors", "skipped_phases")
    _FIELDS = _COUNTS + _LISTS
    __slots__ = _FIELDS

    def __init__(self, **fields: Any):
        for name in self._COUNTS:
            setattr(self, name, int(fields.get(name, 0)))
        for name in self._LISTS:
            setattr(self, name, [str(v) for v in fields.get(name) or ()])

    def __getitem__(self, name: str) -> Any:
        if name not in self._FIELDS:
            raise KeyError(name)
        return getattr(self, name)

    def keys(self) -> tuple[str, ...]:
        """The field names, for reading the summary as a mapping (``dict(summary)``,
        ``summary[name]``); floe's own, Icechunk's ``GCSummary`` has attributes only.

        ```python
        import datetime

        cutoff = datetime.datetime.now(datetime.UTC)
        summary = repo.garbage_collect(cutoff, dry_run=True, allow_recent_cutoff=True)
        print(summary.keys()[:2])  # ('bytes_deleted', 'chunks_deleted')
        print(summary.keys()[-2:])  # ('delete_errors', 'skipped_phases')
        print({name: summary[name] for name in summary.keys()}["chunks_deleted"])  # 0
        ```
        """
        return self._FIELDS

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            return dict(self._fields()) == other
        return isinstance(other, GCSummary) and self._fields() == other._fields()

    def _fields(self) -> list[tuple[str, object]]:
        return [(n, getattr(self, n)) for n in self._FIELDS]

    def __repr__(self) -> str:
        return text_block(qualified("ops.GCSummary"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("ops.GCSummary"), self._fields())
