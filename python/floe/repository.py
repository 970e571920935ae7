"""``Repository`` and ``SpecVersion``, as Icechunk's ``icechunk.repository``: create
and open repositories, open sessions, manage branches, tags, metadata, expiry and
garbage collection. Every method is written out (none is forwarded), so ``help()``,
IDEs and type checkers see them."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterator
from enum import IntEnum
from typing import Any

from floe._floe import Repository as _NativeRepository
from floe._floe import SnapshotInfo, Storage
from floe.config import RepositoryConfig
from floe.diff import Diff
from floe.session import Session

__all__ = ["Repository", "SpecVersion"]


class SpecVersion(IntEnum):
    """The Icechunk format (spec) versions floe reads and writes: ``v1`` (Icechunk
    1.x) and ``v2`` (Icechunk 2.x). Compares equal to the integers 1 and 2, as
    Icechunk's ``SpecVersion`` does."""

    v1 = 1
    v2 = 2

    @staticmethod
    def current() -> "SpecVersion":
        """The newest spec version (the one Icechunk 2.x writes)."""
        return SpecVersion.v2

    def __repr__(self) -> str:
        # As Icechunk: "SpecVersion.v2 (current)".
        current = " (current)" if self is SpecVersion.current() else ""
        return f"SpecVersion.{self.name}{current}"

    __str__ = __repr__


def _authorized(access: dict[str, Any] | None) -> list[str] | None:
    """The URL prefixes an ``authorize_virtual_chunk_access`` mapping authorizes (its
    keys); ``None`` authorizes none."""
    if access is None:
        return None
    if not isinstance(access, dict):
        raise TypeError(
            "authorize_virtual_chunk_access must be a dict of URL prefix to credentials, "
            f"got {type(access).__name__}"
        )
    for prefix, credentials in access.items():
        if credentials is None:
            # As Icechunk 2.3.0 (its issue 2194): `None` is deprecated in favour of
            # an explicit credential or no-auth sentinel.
            warnings.warn(
                f"Passing `None` in `authorize_virtual_chunk_access` for container "
                f"`{prefix}` is deprecated: pass the container's credentials or a "
                "no-auth sentinel (such as `LocalFileSystemAccess` for file:// prefixes)",
                DeprecationWarning,
                stacklevel=3,
            )
    return [str(prefix) for prefix in access]


class Repository:
    """A floe repository (Icechunk format, spec 1 or 2)."""

    def __init__(self, native: _NativeRepository):
        self._native = native

    # -- creating and opening -------------------------------------------------------

    @classmethod
    def create(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
        *,
        spec_version: SpecVersion | int | None = None,
    ) -> "Repository":
        """Creates a repository in ``storage`` with ``config`` (the defaults when
        ``None``) in ``spec_version`` (1 or 2; the default when ``None``). Raises
        ``FloeError`` when a repository exists there already.
        ``authorize_virtual_chunk_access``: as in ``open``."""
        spec = None if spec_version is None else int(spec_version)
        return cls(
            _NativeRepository.create(
                storage, config, spec, _authorized(authorize_virtual_chunk_access)
            )
        )

    @classmethod
    def open(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> "Repository":
        """Opens the repository in ``storage``; raises ``FloeError`` when there is
        none. ``config`` is merged over the stored configuration
        (``RepositoryConfig.merge``): the repository works with the result, and
        ``save_config()`` stores it.

        ``authorize_virtual_chunk_access``: the virtual chunk container URL prefixes
        (its keys) the caller trusts this repository to read from, as Icechunk; a
        virtual chunk under any other prefix is never read (the read raises
        ``FloeError`` naming the prefix to authorize). The values stand for
        per-container credentials: floe takes S3 credentials from the ``AWS_*``
        environment variables whatever they are. Raises ``InvalidInputError`` for a
        key that is no URL or absolute path."""
        return cls(
            _NativeRepository.open(storage, config, _authorized(authorize_virtual_chunk_access))
        )

    @classmethod
    def open_or_create(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        *,
        create_version: SpecVersion | int | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> "Repository":
        """Opens the repository in ``storage`` (``config`` merged over its stored
        one), creating it with ``config`` in spec version ``create_version`` (the
        default when ``None``) when there is none. ``authorize_virtual_chunk_access``:
        as in ``open``."""
        spec = None if create_version is None else int(create_version)
        return cls(
            _NativeRepository.open_or_create(
                storage, config, spec, _authorized(authorize_virtual_chunk_access)
            )
        )

    @staticmethod
    def fetch_config(storage: Storage) -> RepositoryConfig | None:
        """The configuration the repository in ``storage`` stores, ``None`` when it
        stores none; raises ``FloeError`` when there is no repository."""
        return _NativeRepository.fetch_config(storage)

    def reopen(self, config: RepositoryConfig | None = None) -> "Repository":
        """This repository with ``config`` merged over its configuration (same
        storage and caches); nothing is stored until ``save_config()``."""
        return type(self)(self._native.reopen(config))

    @staticmethod
    def exists(storage: Storage) -> bool:
        """Whether a repository exists in ``storage``."""
        return _NativeRepository.exists(storage)

    @property
    def spec_version(self) -> SpecVersion:
        """The repository's Icechunk spec version."""
        return SpecVersion(self._native.spec_version)

    @property
    def config(self) -> RepositoryConfig:
        """The configuration as last read or saved (a copy: change it, then
        ``save_config``)."""
        return self._native.config

    def save_config(self, config: RepositoryConfig | None = None) -> None:
        """Stores ``config`` (or, with no argument, the current configuration, with
        what ``open(config=)`` merged in) as the repository's configuration; raises
        ``FloeError`` when another writer changed it since it was read."""
        self._native.save_config(config)

    # -- sessions -------------------------------------------------------------------

    def writable_session(self, branch: str) -> Session:
        """A session that writes to ``branch``."""
        return Session(self._native.writable_session(branch))

    def readonly_session(
        self,
        branch: str | None = None,
        *,
        tag: str | None = None,
        snapshot_id: str | None = None,
        as_of: datetime.datetime | None = None,
    ) -> Session:
        """A read-only session at a branch (optionally as it was at ``as_of``), a tag
        or a snapshot id: exactly one of them."""
        return Session(
            self._native.readonly_session(branch, tag=tag, snapshot_id=snapshot_id, as_of=as_of)
        )

    def rearrange_session(self, branch: str) -> Session:
        """Spec 2: a session on ``branch`` that only moves nodes (``Session.move``)."""
        return Session(self._native.rearrange_session(branch))

    # -- history --------------------------------------------------------------------

    def ancestry(
        self,
        *,
        branch: str | None = None,
        tag: str | None = None,
        snapshot_id: str | None = None,
    ) -> Iterator[SnapshotInfo]:
        """The history of a branch, tag or snapshot, newest first; commits are read as
        iteration reaches them."""
        return iter(self._native.ancestry(branch=branch, tag=tag, snapshot_id=snapshot_id))

    def diff(
        self,
        *,
        from_branch: str | None = None,
        from_tag: str | None = None,
        from_snapshot_id: str | None = None,
        to_branch: str | None = None,
        to_tag: str | None = None,
        to_snapshot_id: str | None = None,
    ) -> Diff:
        """What changed from one version to a later one; each is named by exactly one
        of a branch, a tag or a snapshot id. ``from`` must be an ancestor of ``to``."""
        start = self._version("from", from_branch, from_tag, from_snapshot_id)
        end = self._version("to", to_branch, to_tag, to_snapshot_id)
        return Diff(self._native.diff(from_snapshot_id=start, to_snapshot_id=end))

    def _version(self, side: str, branch, tag, snapshot_id) -> str:
        given = [v for v in (branch, tag, snapshot_id) if v is not None]
        if len(given) != 1:
            raise ValueError(f"name the `{side}` version by exactly one of branch, tag, snapshot_id")
        if branch is not None:
            return self._native.lookup_branch(branch)
        if tag is not None:
            return self._native.lookup_tag(tag)
        return snapshot_id

    # -- branches -------------------------------------------------------------------

    def list_branches(self) -> set[str]:
        """The names of the branches (a set, as Icechunk)."""
        return set(self._native.list_branches())

    def lookup_branch(self, branch: str) -> str:
        """The snapshot id ``branch`` points to; raises ``FloeError`` for an unknown
        branch."""
        return self._native.lookup_branch(branch)

    def create_branch(self, branch: str, snapshot_id: str) -> None:
        """Creates ``branch`` pointing to ``snapshot_id``; raises ``FloeError`` when it
        exists."""
        self._native.create_branch(branch, snapshot_id)

    def reset_branch(
        self, branch: str, snapshot_id: str, *, from_snapshot_id: str | None = None
    ) -> None:
        """Moves ``branch`` to ``snapshot_id``; with ``from_snapshot_id``, only if the
        branch still points there (raises ``ConflictError`` otherwise)."""
        self._native.reset_branch(branch, snapshot_id, from_snapshot_id=from_snapshot_id)

    def delete_branch(self, branch: str) -> None:
        """Deletes ``branch`` (never ``main``)."""
        self._native.delete_branch(branch)

    # -- tags -----------------------------------------------------------------------

    def list_tags(self) -> set[str]:
        """The names of the tags (a set, as Icechunk)."""
        return set(self._native.list_tags())

    def lookup_tag(self, tag: str) -> str:
        """The snapshot id ``tag`` points to; raises ``FloeError`` for an unknown
        tag."""
        return self._native.lookup_tag(tag)

    def create_tag(self, tag: str, snapshot_id: str) -> None:
        """Creates ``tag`` pointing to ``snapshot_id``; a tag never moves, and the
        name of a deleted tag cannot be used again."""
        self._native.create_tag(tag, snapshot_id)

    def delete_tag(self, tag: str) -> None:
        """Deletes ``tag``; its name can never be used again."""
        self._native.delete_tag(tag)

    # -- repository metadata (spec 2) -------------------------------------------------

    def get_metadata(self) -> dict[str, Any]:
        """Spec 2: the repository's metadata."""
        return self._native.get_metadata()

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Spec 2: replaces the repository's metadata."""
        self._native.set_metadata(metadata)

    def update_metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Spec 2: sets the given keys of the repository's metadata; returns the
        metadata after."""
        return self._native.update_metadata(metadata)

    # -- maintenance ----------------------------------------------------------------

    def expire_snapshots(
        self,
        older_than: datetime.datetime,
        *,
        delete_expired_branches: bool = False,
        delete_expired_tags: bool = False,
    ) -> set[str]:
        """Removes snapshots older than ``older_than`` from every history (a branch or
        tag tip is kept unless ``delete_expired_branches`` / ``delete_expired_tags``);
        returns the ids of the expired snapshots (a set, as Icechunk). Their objects
        stay until ``garbage_collect``."""
        return set(
            self._native.expire_snapshots(
                older_than,
                delete_expired_branches=delete_expired_branches,
                delete_expired_tags=delete_expired_tags,
            )
        )

    def garbage_collect(
        self,
        delete_object_older_than: datetime.datetime,
        *,
        dry_run: bool = False,
        allow_recent_cutoff: bool = False,
    ) -> dict[str, Any]:
        """Deletes objects no branch or tag reaches that are older than
        ``delete_object_older_than``; returns a summary (Icechunk's ``GCSummary``
        fields: counts and bytes freed). A cut-off within the last hour raises
        ``FloeError`` unless ``allow_recent_cutoff`` (no writer is active)."""
        return self._native.garbage_collect(
            delete_object_older_than, dry_run=dry_run, allow_recent_cutoff=allow_recent_cutoff
        )

    def __repr__(self) -> str:
        return f"<floe.Repository spec {int(self.spec_version)}>"
