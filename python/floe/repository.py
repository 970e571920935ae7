"""``Repository`` and ``SpecVersion``, as Icechunk's ``icechunk.repository``: create
and open repositories, open sessions, manage branches, tags, metadata, expiry and
garbage collection. Every method is written out (none is forwarded), so ``help()``,
IDEs and type checkers see them."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from enum import IntEnum
from typing import Any

from floe import _tuning
from floe._display import html_block, qualified, text_block
from floe._floe import Repository as _NativeRepository
from floe._floe import SnapshotInfo, Storage
from floe.config import RepositoryConfig
from floe.diff import Diff
from floe.exceptions import InvalidInputError
from floe.ops import GCSummary, RepoAvailability, RepoStatus, Update
from floe.session import Session
from floe.snapshots import ManifestFileInfo
from floe.stats import ChunkStorageStats

__all__ = [
    "FeatureFlag",
    "RepoAvailability",
    "RepoStatus",
    "Repository",
    "SpecVersion",
    "supported_spec_versions",
    "upgrade_icechunk_repository",
    "clone_repository",
]


class SpecVersion(IntEnum):
    """The Icechunk format (spec) versions floe reads and writes: ``v1`` (Icechunk
    1.x) and ``v2`` (Icechunk 2.x). Compares equal to the integers 1 and 2, as
    Icechunk's ``SpecVersion`` does."""

    v1 = 1
    v2 = 2

    @staticmethod
    def current() -> SpecVersion:
        """The newest spec version (the one Icechunk 2.x writes)."""
        return SpecVersion.v2

    def __repr__(self) -> str:
        # As Icechunk: "SpecVersion.v2 (current)".
        current = " (current)" if self is SpecVersion.current() else ""
        return f"SpecVersion.{self.name}{current}"

    __str__ = __repr__


def supported_spec_versions() -> list[SpecVersion]:
    """The spec versions floe reads and writes, newest first (Icechunk's
    ``supported_spec_versions()``: ``[SpecVersion.v2 (current), SpecVersion.v1]``).

    ```python
    print(floe.supported_spec_versions())  # [SpecVersion.v2 (current), SpecVersion.v1]
    ```
    """
    return sorted(SpecVersion, reverse=True)


class FeatureFlag:
    """One feature flag of a spec-2 repository (Icechunk's ``FeatureFlag``): ``id``
    and ``name`` (``move_node``, ``create_tag``, ``delete_tag``), ``setting`` (the
    explicit value, ``None`` for the default), ``default_enabled`` (every flag is
    on by default) and ``enabled`` (the value in effect). A disabled flag makes its
    operation raise ``SessionStateError`` (kind ``feature-flag-disabled``).

    ```python
    for flag in repo.feature_flags():
        print(flag.name, flag.enabled)  # move_node True, create_tag True, delete_tag True
    repo.set_feature_flag("delete_tag", False)
    print([f.name for f in repo.disabled_feature_flags()])  # ['delete_tag']
    ```
    """

    __slots__ = ("id", "name", "setting", "enabled", "default_enabled")

    def __init__(self, id: int, name: str, setting: bool | None, enabled: bool):
        self.id = id
        self.name = name
        self.setting = setting
        self.enabled = enabled
        self.default_enabled = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeatureFlag) and self._fields() == other._fields()

    def _fields(self) -> list[tuple[str, object]]:
        return [
            ("id", self.id),
            ("name", self.name),
            ("default_enabled", self.default_enabled),
            ("setting", self.setting),
            ("enabled", self.enabled),
        ]

    def __repr__(self) -> str:
        return text_block(qualified("config.FeatureFlag"), self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(qualified("config.FeatureFlag"), self._fields())


def _authorized(access: dict[str, Any] | None) -> dict[str, Any] | None:
    """An ``authorize_virtual_chunk_access`` mapping for the native module: URL prefix
    to ``Credentials`` (bare ``S3Credentials``, ``GcsCredentials`` or
    ``AzureCredentials`` are wrapped as ``containers_credentials`` does) or ``None``;
    ``None`` authorizes none. Raises ``TypeError`` for a value that is no mapping and
    ``ValueError`` for an unknown credential type."""
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
    from floe.credentials import containers_credentials

    return {str(prefix): cred for prefix, cred in containers_credentials(access).items()}


# URL schemes of object stores (buckets/containers), as floe's storages name them.
_OBJECT_STORE_SCHEMES = ("s3", "gs", "az")


def _refuse_bucket_root(storage: Storage) -> None:
    """Refuses to create a repository at the root of a bucket (an object store with an
    empty prefix), as Icechunk 2.1 and later: ``InvalidInputError`` before any
    request. Existing bucket-root repositories still open."""
    url = str(getattr(storage, "url", ""))
    scheme, _, rest = url.partition("://")
    if scheme in _OBJECT_STORE_SCHEMES and "/" not in rest.strip("/"):
        raise InvalidInputError(
            "creating a repository at an empty prefix (the object store bucket root) is "
            "not supported; use a non-empty prefix. Existing empty-prefix repositories "
            "can still be opened"
        )


def _unpickle_repository(
    storage: Storage,
    config: RepositoryConfig | None,
    authorized: dict[str, Any] | None,
    default_metadata: dict[str, Any],
) -> Repository:
    """Opens a pickled repository again (see ``Repository.__reduce__``)."""
    repo = Repository(_NativeRepository.open(storage, config, authorized), storage, authorized)
    if default_metadata:
        repo.set_default_commit_metadata(default_metadata)
    return repo


class Repository:
    """A versioned Zarr v3 repository in the Icechunk format (spec 1 or 2), as
    Icechunk 2.3.0's ``icechunk.Repository``.

    A repository holds snapshots (immutable versions of a Zarr hierarchy), branches
    (names that move to new snapshots on commit) and tags (names that never move).
    Read and write through sessions: ``writable_session`` on a branch,
    ``readonly_session`` at a branch, tag, snapshot or time. Build one with
    ``create``, ``open`` or ``open_or_create``, never with the constructor.

    ```python
    import zarr
    import floe

    repo = floe.Repository.open_or_create(floe.local_filesystem_storage("my-repo"))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="t", shape=(3,), dtype="i4")[:] = [1, 2, 3]
    snapshot_id = session.commit("three values")
    print(repo.lookup_branch("main") == snapshot_id)  # True
    ```

    A repository object is safe to share between threads and pickles (its storage,
    configuration and credentials travel; refs and snapshots are read anew), so it
    can be sent to Dask workers.
    """

    def __init__(
        self,
        native: _NativeRepository,
        storage: Storage | None = None,
        authorized: dict[str, Any] | None = None,
    ):
        self._native = native
        self._storage = storage
        # The authorized virtual chunk prefixes it was opened with (for pickling).
        self._authorized_prefixes = authorized

    def __reduce__(self):
        """Pickles as Icechunk's repository does: its storage (with its credentials
        objects, see ``floe.credentials``), its configuration, its authorized virtual
        chunk prefixes and its default commit metadata; unpickling opens the
        repository in that storage again (nothing else travels: refs and snapshots
        are read from storage). A repository on in-memory storage raises
        ``TypeError`` (that storage lives in one process)."""
        if self._storage is None:
            raise TypeError("a repository opened without its storage cannot be pickled")
        return (
            _unpickle_repository,
            (self._storage, self.config, self._authorized_prefixes, self.default_commit_metadata()),
        )

    # -- creating and opening -------------------------------------------------------

    @classmethod
    def create(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
        *,
        spec_version: SpecVersion | int | None = None,
    ) -> Repository:
        """Creates an empty repository in ``storage``: one branch ``main`` at the
        initial snapshot (``1CECHNKREP0F1RSTCMT0``, an empty root).

        ```python
        repo = floe.Repository.create(floe.local_filesystem_storage("new-repo"))
        print(repo.list_branches())  # {'main'}
        ```

        :param storage: where the repository lives (``local_filesystem_storage``,
            ``s3_storage``, ``gcs_storage``, ``azure_storage``, ``in_memory_storage``).
        :param config: the configuration to store (``RepositoryConfig``); ``None``
            stores none and uses the defaults.
        :param authorize_virtual_chunk_access: as in ``open``.
        :param spec_version: Icechunk spec version 1 or 2 (``SpecVersion``); ``None``
            is 2, as in Icechunk 2.x. Icechunk 1.x reads only spec 1.
        :raises InvalidInputError: a repository (or other objects) already exists
            there ("repositories can only be created in clean prefixes"), or an
            object store's prefix is empty (the bucket root), as in Icechunk.
        :raises StorageError: the storage cannot be reached or written.
        """
        _refuse_bucket_root(storage)
        prefixes = _authorized(authorize_virtual_chunk_access)
        return cls(
            _NativeRepository.create(storage, config, _spec_arg(spec_version), prefixes),
            storage,
            prefixes,
        )

    @classmethod
    def open(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> Repository:
        """Opens the repository in ``storage`` (written by floe or by Icechunk, spec
        1 or 2). Reads only its refs (spec 1) or its ``repo`` object (spec 2):
        snapshots and manifests are read when a session needs them.

        ```python
        repo = floe.Repository.open(floe.local_filesystem_storage("repo"))
        session = repo.readonly_session("main")
        # in S3: floe.Repository.open(floe.s3_storage(bucket="my-bucket", prefix="era5"))
        ```

        ``config`` is merged over the stored configuration
        (``RepositoryConfig.merge``): the repository works with the result, and
        ``save_config()`` stores it.

        Raises ``RepositoryNotFoundError`` (a ``KeyError``) when there is no
        repository in ``storage`` and ``StorageError`` when it cannot be read.

        ``authorize_virtual_chunk_access``: the virtual chunk container URL prefixes
        (its keys) the caller trusts this repository to read from, as Icechunk; a
        virtual chunk under any other prefix is never read (the read raises
        ``InvalidInputError`` naming the prefix to authorize). The values are the
        credentials that sign the reads under each key (``containers_credentials``:
        static, anonymous, from the environment or refreshable S3 credentials;
        ``None``: the ``AWS_*`` environment variables, unsigned for an anonymous
        container). An S3 endpoint is only contacted when the reader chose it: the
        containers of ``config`` (which win over the stored ones of the same prefix)
        or the reader's ``AWS_ENDPOINT_URL``; an endpoint only the stored
        configuration names fails the read with ``InvalidInputError``. Raises
        ``InvalidInputError`` for a key that is no URL or absolute path."""
        prefixes = _authorized(authorize_virtual_chunk_access)
        return cls(_NativeRepository.open(storage, config, prefixes), storage, prefixes)

    @classmethod
    def open_or_create(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        *,
        create_version: SpecVersion | int | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> Repository:
        """Opens the repository in ``storage`` (``config`` merged over its stored
        one), creating it with ``config`` in spec version ``create_version`` (2 when
        ``None``) when there is none, as Icechunk's ``open_or_create``.

        ```python
        repo = floe.Repository.open_or_create(floe.local_filesystem_storage("repo"))
        print(repo.list_branches())  # {'main'}: it existed
        ```

        :param authorize_virtual_chunk_access: as in ``open``.
        :raises StorageError: the storage cannot be reached.
        """
        prefixes = _authorized(authorize_virtual_chunk_access)
        return cls(
            _NativeRepository.open_or_create(storage, config, _spec_arg(create_version), prefixes),
            storage,
            prefixes,
        )

    @staticmethod
    def fetch_config(storage: Storage) -> RepositoryConfig | None:
        """The configuration the repository in ``storage`` stores, ``None`` when it
        stores none; raises ``FloeError`` when there is no repository.

        ```python
        config = floe.Repository.fetch_config(floe.local_filesystem_storage("repo"))
        print(config)  # None: the repository stores no configuration yet
        ```
        """
        return _NativeRepository.fetch_config(storage)

    def reopen(
        self,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> Repository:
        """This repository with ``config`` merged over its configuration (same
        storage and caches); nothing is stored until ``save_config()``.

        The virtual chunk containers of ``config`` are the reader's own, trusted as
        ``open(config=...)`` trusts them (their endpoints may be contacted with the
        reader's credentials), beside those the repository was opened with.
        ``authorize_virtual_chunk_access`` (as in ``open``), when given, replaces the
        authorized prefixes and their credentials; ``None`` keeps them (Icechunk's
        ``reopen``). Raises ``InvalidInputError`` for a prefix that is no URL.

        ```python
        config = floe.RepositoryConfig(max_concurrent_requests=16)
        repo = repo.reopen(config)  # this object only; save_config() stores it
        print(repo.config.max_concurrent_requests)  # 16
        ```
        """
        if authorize_virtual_chunk_access is None:
            return type(self)(
                self._native.reopen(config, None), self._storage, self._authorized_prefixes
            )
        prefixes = _authorized(authorize_virtual_chunk_access)
        return type(self)(self._native.reopen(config, prefixes), self._storage, prefixes)

    @staticmethod
    def exists(storage: Storage, storage_settings: Any | None = None) -> bool:
        """Whether a repository exists in ``storage`` (``storage_settings`` is
        accepted for Icechunk compatibility and not needed).

        ```python
        print(floe.Repository.exists(floe.local_filesystem_storage("repo")))  # True
        print(floe.Repository.exists(floe.local_filesystem_storage("nowhere")))  # False
        ```
        """
        return _NativeRepository.exists(storage)

    @staticmethod
    def fetch_spec_version(
        storage: Storage, storage_settings: Any | None = None
    ) -> SpecVersion | None:
        """The spec version of the repository in ``storage``, ``None`` when there is
        none (reads only its refs; ``storage_settings`` is accepted for Icechunk
        compatibility and not needed).

        ```python
        print(floe.Repository.fetch_spec_version(floe.local_filesystem_storage("repo")))  # v2
        ```
        """
        version = _NativeRepository.fetch_spec_version(storage)
        return None if version is None else SpecVersion(version)

    @property
    def storage(self) -> Storage | None:
        """The storage the repository was created or opened with."""
        return self._storage

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
        ``FloeError`` when another writer changed it since it was read.

        ```python
        repo.save_config(floe.RepositoryConfig(inline_chunk_threshold_bytes=0))  # no inline chunks
        print(floe.Repository.fetch_config(repo.storage).inline_chunk_threshold_bytes)  # 0
        ```
        """
        self._native.save_config(config)

    # -- sessions -------------------------------------------------------------------

    def writable_session(self, branch: str) -> Session:
        """A session that writes to ``branch``: its ``store`` is a Zarr store, and
        ``commit`` makes the changes a new snapshot at the branch's tip (as
        Icechunk's ``writable_session``). Opening one reads only the branch's tip.

        ```python
        session = repo.writable_session("main")
        zarr.open_group(session.store).attrs["title"] = "demo"
        session.commit("set a title")
        ```

        :raises RefNotFoundError: ``branch`` does not exist (a ``KeyError``).
        :raises ReadOnlyError: spec 2, the repository's status is read-only.
        """
        return Session(self._native.writable_session(branch))

    def readonly_session(
        self,
        branch: str | None = None,
        *,
        tag: str | None = None,
        snapshot_id: str | None = None,
        as_of: datetime.datetime | None = None,
    ) -> Session:
        """A read-only session at one version, named by exactly one of ``branch``
        (its tip, or its tip as it was at ``as_of``), ``tag`` or ``snapshot_id``, as
        Icechunk's ``readonly_session``.

        ```python
        import datetime

        repo.create_tag("v1", repo.lookup_branch("main"))
        latest = repo.readonly_session("main")
        release = repo.readonly_session(tag="v1")
        first = repo.readonly_session(snapshot_id=list(repo.ancestry(branch="main"))[-1].id)
        as_it_was = repo.readonly_session("main", as_of=datetime.datetime.now(datetime.UTC))
        print(zarr.open_array(latest.store, path="temperature", mode="r")[0, :3])  # [0. 1. 2.]
        # xarray: xarray.open_zarr(latest.store, consolidated=False)
        ```

        :param as_of: a timezone-aware time; the branch's newest snapshot written
            at or before it.
        :raises ValueError: none or more than one of ``branch``, ``tag``,
            ``snapshot_id`` given.
        :raises RefNotFoundError: unknown branch or tag.
        :raises InvalidInputError: ``snapshot_id`` is no snapshot id (wrong length,
            characters outside Crockford base32).
        :raises SnapshotNotFoundError: ``snapshot_id`` names no snapshot of the
            repository (ids are read as Icechunk reads them: either case, ``O``
            for ``0``, ``I``/``L`` for ``1``), or ``as_of`` is before the branch's
            first snapshot.
        """
        return Session(
            self._native.readonly_session(branch, tag=tag, snapshot_id=snapshot_id, as_of=as_of)
        )

    def rearrange_session(self, branch: str) -> Session:
        """Spec 2: a session on ``branch`` that only moves nodes (``Session.move``),
        as Icechunk 2's ``rearrange_session``; moving a group or array changes no
        chunk or metadata object, and the commit records the moves.

        ```python
        session = repo.rearrange_session("main")
        session.move("/temperature", "/t2m")
        session.commit("rename temperature to t2m")
        ```

        :raises FormatError: a spec-1 repository (upgrade it first).
        :raises RefNotFoundError: unknown branch.
        """
        return Session(self._native.rearrange_session(branch))

    @contextlib.contextmanager
    def transaction(
        self,
        branch: str,
        *,
        message: str,
        metadata: dict[str, Any] | None = None,
        rebase_with=None,
        rebase_tries: int = 1000,
    ) -> Iterator[Any]:
        """A writable session on ``branch`` as a context manager yielding its store,
        as Icechunk's ``transaction``: the changes are committed with ``message`` and
        ``metadata`` when the block ends without an exception (rebasing with
        ``rebase_with`` at most ``rebase_tries`` times, as ``Session.commit``), and
        dropped when it raises. A block that changed nothing commits nothing.

        ```python
        with repo.transaction("main", message="add attrs") as store:
            zarr.open_group(store).attrs["units"] = "K"
        ```

        :raises ConflictError: the branch moved and the changes conflict (or no
            ``rebase_with`` was given).
        """
        session = self.writable_session(branch)
        yield session.store
        if session.has_uncommitted_changes:
            session.commit(message, metadata, rebase_with=rebase_with, rebase_tries=rebase_tries)

    # -- default commit metadata -------------------------------------------------------

    def set_default_commit_metadata(self, metadata: dict[str, Any]) -> None:
        """Metadata every commit (and amend, flush) of sessions opened from now on
        records; a commit's own metadata wins key by key. Kept by this repository
        object only, not stored.

        ```python
        repo.set_default_commit_metadata({"pipeline": "nightly"})
        session = repo.writable_session("main")
        zarr.open_array(session.store, path="temperature")[0] = 0.0
        snapshot_id = session.commit("reset row 0", metadata={"run": 42})
        print(repo.lookup_snapshot(snapshot_id).metadata)  # {'pipeline': 'nightly', 'run': 42}
        ```
        """
        self._native.set_default_commit_metadata(metadata)

    def default_commit_metadata(self) -> dict[str, Any]:
        """The default commit metadata (a copy).

        ```python
        repo.set_default_commit_metadata({"author": "ci"})
        print(repo.default_commit_metadata())  # {'author': 'ci'}
        session = repo.writable_session("main")
        zarr.open_group(session.store).attrs["source"] = "ERA5"
        snapshot_id = session.commit("set source")
        print(repo.lookup_snapshot(snapshot_id).metadata)  # {'author': 'ci'}
        ```
        """
        return self._native.default_commit_metadata()

    # -- history --------------------------------------------------------------------

    def ancestry(
        self,
        *,
        branch: str | None = None,
        tag: str | None = None,
        snapshot_id: str | None = None,
    ) -> Iterator[SnapshotInfo]:
        """The history of a branch, tag or snapshot (exactly one), newest first, as
        ``SnapshotInfo`` objects (``id``, ``parent_id``, ``written_at``, ``message``,
        ``metadata``), down to the initial snapshot. Commits are read as iteration
        reaches them, so ``next()`` on a long history reads one snapshot.

        ```python
        for snap in repo.ancestry(branch="main"):
            print(snap.id, snap.written_at, snap.message)
        ```

        :raises ValueError: none or more than one version named.
        :raises RefNotFoundError: unknown branch or tag.
        :raises InvalidInputError: ``snapshot_id`` is no snapshot id.
        :raises SnapshotNotFoundError: ``snapshot_id`` names no snapshot.
        """
        return iter(self._native.ancestry(branch=branch, tag=tag, snapshot_id=snapshot_id))

    def ancestry_graph(self, *, branch: str | None = None, plain: bool = True):
        """The history of ``branch`` (every branch when ``None``) as an
        ``AncestryGraph``: ``str()`` is a text graph with branch and tag labels
        (ANSI colours unless ``plain``), ``_repr_svg_()`` a drawing for notebooks.

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        print(repo.ancestry_graph())  # one line per snapshot, with branch and tag labels
        ```
        """
        from floe.graph import AncestryGraph

        return AncestryGraph._build(self, branch, plain)

    def lookup_snapshot(self, snapshot_id: str) -> SnapshotInfo:
        """The commit ``snapshot_id`` as a ``SnapshotInfo`` (``id``, ``parent_id``,
        ``written_at``, ``message``, ``metadata``).

        ```python
        info = repo.lookup_snapshot(repo.lookup_branch("main"))
        print(info.message, info.written_at)
        ```

        :raises InvalidInputError: text that is no snapshot id (kind
            ``invalid-snapshot-id``), as Icechunk.
        :raises SnapshotNotFoundError: an id of the right form that names no
            snapshot (``ZZZZZZZZZZZZZZZZZZZZ`` included), as Icechunk.
        """
        return self._native.lookup_snapshot(snapshot_id)

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
        """What changed from one version to a later one, as Icechunk's ``diff``: a
        ``Diff`` with the paths of new, deleted and updated groups and arrays and the
        chunk indices written per array. Each side is named by exactly one of a
        branch, a tag or a snapshot id.

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        session = repo.writable_session("main")
        zarr.open_array(session.store, path="temperature")[1, :] = -1.0  # chunk (1, 0)
        session.commit("overwrite row 1")
        d = repo.diff(from_tag="v1", to_branch="main")
        print(d.updated_arrays, d.updated_chunks)  # set() {'/temperature': [[1, 0]]}
        ```

        :raises ValueError: a side named by none or more than one of branch, tag,
            snapshot id.
        :raises InvalidInputError: a snapshot id that is no snapshot id; or
            ``from`` is not ``to`` or one of its ancestors (kind
            ``bad-snapshot-chain-for-diff``).
        :raises SnapshotNotFoundError: a snapshot id that names no snapshot (both
            ids are read before the ancestry check, ``from`` first, as Icechunk).
        :raises RefNotFoundError: unknown branch or tag.
        """
        start = self._version("from", from_branch, from_tag, from_snapshot_id)
        end = self._version("to", to_branch, to_tag, to_snapshot_id)
        start, end = self._check_diff_chain(start, end)
        return Diff(self._native.diff(from_snapshot_id=start, to_snapshot_id=end))

    def _check_diff_chain(self, start: str, end: str) -> tuple[str, str]:
        """As Icechunk: both ids are read first (``InvalidInputError`` for text that is
        no snapshot id, ``SnapshotNotFoundError`` for one naming no snapshot, ``from``
        before ``to``); a diff runs forward along one history, so ``start`` must be
        ``end`` or one of its ancestors (``InvalidInputError`` otherwise). Returns the
        two ids in canonical form."""
        start = self._native.lookup_snapshot(start).id
        end = self._native.lookup_snapshot(end).id
        if start != end and not any(s.id == start for s in self.ancestry(snapshot_id=end)):
            raise InvalidInputError(
                f"bad snapshot chain for diff: the ancestry of snapshot {end} doesn't "
                f"include snapshot {start} (`from` must be an ancestor of `to`)",
                "bad-snapshot-chain-for-diff",
            )
        return start, end

    def _version(self, side: str, branch, tag, snapshot_id) -> str:
        given = [v for v in (branch, tag, snapshot_id) if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"name the `{side}` version by exactly one of branch, tag, snapshot_id"
            )
        if branch is not None:
            return self._native.lookup_branch(branch)
        if tag is not None:
            return self._native.lookup_tag(tag)
        return snapshot_id

    # -- branches -------------------------------------------------------------------

    def list_branches(self) -> set[str]:
        """The names of the branches, as a set (Icechunk returns a set too).

        ```python
        repo.list_branches()  # {"main", "dev"}
        ```
        """
        return set(self._native.list_branches())

    def lookup_branch(self, branch: str) -> str:
        """The snapshot id ``branch`` points to (20 characters of Crockford base32).

        ```python
        tip = repo.lookup_branch("main")
        ```

        :raises RefNotFoundError: unknown branch (a ``KeyError``), as Icechunk.
        """
        return self._native.lookup_branch(branch)

    def create_branch(self, branch: str, snapshot_id: str) -> None:
        """Creates ``branch`` pointing to ``snapshot_id``.

        ```python
        repo.create_branch("dev", repo.lookup_branch("main"))
        session = repo.writable_session("dev")
        ```

        :raises AlreadyExistsError: the branch exists.
        :raises InvalidInputError: ``snapshot_id`` is no snapshot id.
        :raises SnapshotNotFoundError: ``snapshot_id`` names no snapshot (nothing
            is created), as Icechunk.
        """
        self._native.create_branch(branch, snapshot_id)

    def reset_branch(
        self, branch: str, snapshot_id: str, *, from_snapshot_id: str | None = None
    ) -> None:
        """Moves ``branch`` to ``snapshot_id`` (any snapshot, not only an ancestor).
        With ``from_snapshot_id``, only if the branch still points there, atomically
        (compare-and-swap), as Icechunk 2.3.0's ``reset_branch``.

        ```python
        first = list(repo.ancestry(branch="main"))[-1].id  # the initial snapshot
        repo.create_branch("dev", first)
        old_tip = repo.lookup_branch("dev")
        repo.reset_branch("dev", repo.lookup_branch("main"), from_snapshot_id=old_tip)
        ```

        The commits only the old tip reached stay in storage until
        ``expire_snapshots`` and ``garbage_collect`` remove them; keep ``old_tip``
        (or read ``ops_log()`` on spec 2) to go back.

        :raises RefNotFoundError: unknown branch.
        :raises InvalidInputError: a snapshot id that is no snapshot id.
        :raises SnapshotNotFoundError: ``snapshot_id`` names no snapshot.
        :raises ConflictError: the branch no longer points to ``from_snapshot_id``
            (kind ``branch-update-conflict``).
        """
        self._native.reset_branch(branch, snapshot_id, from_snapshot_id=from_snapshot_id)

    def delete_branch(self, branch: str) -> None:
        """Deletes ``branch``. Its snapshots stay until ``expire_snapshots`` and
        ``garbage_collect`` remove them.

        ```python
        repo.create_branch("dev", repo.lookup_branch("main"))
        repo.delete_branch("dev")
        print(repo.list_branches())  # {'main'}
        ```

        :raises SessionStateError: ``branch`` is ``main``, which cannot be deleted.
        :raises RefNotFoundError: unknown branch.
        """
        self._native.delete_branch(branch)

    # -- tags -----------------------------------------------------------------------

    def list_tags(self) -> set[str]:
        """The names of the tags, as a set (deleted tags are not listed), as
        Icechunk.

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        print(repo.list_tags())  # {'v1'}
        ```
        """
        return set(self._native.list_tags())

    def lookup_tag(self, tag: str) -> str:
        """The snapshot id ``tag`` points to.

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        session = repo.readonly_session(snapshot_id=repo.lookup_tag("v1"))
        ```

        :raises RefNotFoundError: unknown or deleted tag.
        """
        return self._native.lookup_tag(tag)

    def create_tag(self, tag: str, snapshot_id: str) -> None:
        """Creates ``tag`` pointing to ``snapshot_id``. A tag never moves, and the
        name of a deleted tag cannot be used again (as in Icechunk).

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        ```

        :raises AlreadyExistsError: the tag exists or existed (kind
            ``tag-already-exists``).
        :raises InvalidInputError: ``snapshot_id`` is no snapshot id.
        :raises SnapshotNotFoundError: ``snapshot_id`` names no snapshot.
        """
        self._native.create_tag(tag, snapshot_id)

    def delete_tag(self, tag: str) -> None:
        """Deletes ``tag`` (a tombstone is written: its name can never be used
        again, as in Icechunk).

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        repo.delete_tag("v1")
        print(repo.list_tags())  # set()
        ```

        :raises RefNotFoundError: unknown or already deleted tag.
        """
        self._native.delete_tag(tag)

    # -- repository metadata (spec 2) -------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        """Spec 2: the repository's metadata (``get_metadata()``)."""
        return self.get_metadata()

    def get_metadata(self) -> dict[str, Any]:
        """Spec 2: the repository's metadata.

        ```python
        repo.set_metadata({"project": "era5", "owner": "climate-team"})
        repo.update_metadata({"owner": "data-team"})
        print(repo.get_metadata())  # {'owner': 'data-team', 'project': 'era5'}
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        return self._native.get_metadata()

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Spec 2: replaces the repository's metadata.

        ```python
        repo.set_metadata({"project": "era5"})
        print(repo.get_metadata())  # {'project': 'era5'}
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        self._native.set_metadata(metadata)

    def update_metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Spec 2: sets the given keys of the repository's metadata; returns the
        metadata after.

        ```python
        repo.set_metadata({"project": "era5"})
        print(repo.update_metadata({"owner": "me"}))  # {'owner': 'me', 'project': 'era5'}
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        return self._native.update_metadata(metadata)

    # -- status, ops log and feature flags (spec 2) -----------------------------------

    def get_status(self) -> RepoStatus:
        """Spec 2: whether the repository accepts writes, since when and why.

        ```python
        status = repo.get_status()
        print(status.availability, status.set_at)  # Online 2026-...
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        availability, set_at, reason = self._native.get_status()
        when = datetime.datetime.fromtimestamp(set_at / 1_000_000, tz=datetime.UTC)
        return RepoStatus(RepoAvailability(availability), reason, when)

    @property
    def status(self) -> RepoStatus:
        """Spec 2: the repository status (``get_status()``)."""
        return self.get_status()

    def set_status(self, status: RepoStatus) -> None:
        """Spec 2: sets the status (recorded in the ops log); a ``read_only``
        repository refuses writable and rearrange sessions, commits and ref changes
        (``ReadOnlyError``) until it is ``online`` again.

        ```python
        repo.set_status(floe.RepoStatus(floe.RepoAvailability.read_only, "backup running"))
        try:
            repo.writable_session("main")
        except floe.ReadOnlyError:
            print("read-only for now")
        repo.set_status(floe.RepoStatus(floe.RepoAvailability.online))
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        self._native.set_status(
            RepoAvailability(status.availability).value, status.limited_availability_reason
        )

    def ops_log(self) -> Iterator[Update]:
        """Spec 2: every change of the repository's refs, metadata, configuration,
        status and flags, newest first, as ``Update`` objects. ``FormatError`` on
        spec 1.

        ```python
        repo.create_tag("v1", repo.lookup_branch("main"))
        newest = next(iter(repo.ops_log()))
        print(newest.kind)  # floe.ops.UpdateType.TagCreated(name="v1")
        ```
        """
        return iter([Update._from_native(u) for u in self._native.ops_log()])

    def feature_flags(self) -> list[FeatureFlag]:
        """Spec 2: every feature flag with its setting.

        ```python
        print({f.name: f.enabled for f in repo.feature_flags()})
        # {'move_node': True, 'create_tag': True, 'delete_tag': True}
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        return [FeatureFlag(*f) for f in self._native.feature_flags()]

    def enabled_feature_flags(self) -> list[FeatureFlag]:
        """Spec 2: the flags in effect.

        ```python
        repo.set_feature_flag("move_node", False)
        print([f.name for f in repo.enabled_feature_flags()])  # ['create_tag', 'delete_tag']
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        return [f for f in self.feature_flags() if f.enabled]

    def disabled_feature_flags(self) -> list[FeatureFlag]:
        """Spec 2: the flags turned off.

        ```python
        repo.set_feature_flag("move_node", False)
        print([f.name for f in repo.disabled_feature_flags()])  # ['move_node']
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        """
        return [f for f in self.feature_flags() if not f.enabled]

    def set_feature_flag(self, name: str, setting: bool | None) -> None:
        """Spec 2: turns flag ``name`` on (``True``) or off (``False``), or back to
        its default (``None``); recorded in the ops log. ``InvalidInputError`` for an
        unknown name.

        ```python
        repo.set_feature_flag("delete_tag", False)  # tags can no longer be deleted
        repo.set_feature_flag("delete_tag", None)  # back to the default (on)
        ```

        :raises FormatError: a spec-1 repository (kind ``unsupported-spec-version``, as
            Icechunk); upgrade it with ``upgrade_icechunk_repository``.
        :raises InvalidInputError: an unknown flag name.
        """
        self._native.set_feature_flag(name, setting)

    # -- inspecting stored objects ------------------------------------------------------

    def inspect_snapshot(self, snapshot_id: str, *, pretty: bool = True) -> dict[str, Any]:
        """What snapshot ``snapshot_id`` holds, as a dict: ``id``, ``parent_id``,
        ``flushed_at``, ``commit_message``, ``metadata``, ``manifests`` and
        ``nodes`` (with their ids, paths, types, array shapes and manifest
        extents).

        ```python
        info = repo.inspect_snapshot(repo.lookup_branch("main"))
        print(info["commit_message"], [node["path"] for node in info["nodes"]])
        ```
        """
        return self._native.inspect_snapshot(snapshot_id, pretty=pretty)

    def inspect_repo_info(self) -> dict[str, Any]:
        """Spec 2: the repository's ``repo`` object as a dict (Icechunk's
        ``inspect_repo_info``): ``spec_version``, ``branches`` and ``tags`` (name to
        snapshot id), ``deleted_tags``, ``snapshots`` (``id``, ``parent_id``,
        ``flushed_at``, ``message``, ``metadata``), ``metadata`` and
        ``latest_updates``. Raises ``FloeError`` on a spec-1 repository (it has no
        such object).

        ```python
        info = repo.inspect_repo_info()
        print(info["branches"].keys(), len(info["snapshots"]))  # dict_keys(['main']) 2
        ```
        """
        return self._native.inspect_repo_info()

    def inspect_transaction_log(self, snapshot_id: str, *, pretty: bool = True) -> dict[str, Any]:
        """The transaction log of snapshot ``snapshot_id`` as a dict of node ids by
        kind of change (``new_groups``, ..., ``updated_chunks``, ``moved_nodes``).

        ```python
        log = repo.inspect_transaction_log(repo.lookup_branch("main"))
        print(sorted(k for k, v in log.items() if v))  # ['id', 'new_arrays', ...]
        ```
        """
        return self._native.inspect_transaction_log(snapshot_id, pretty=pretty)

    def inspect_manifest(self, manifest_id: str, *, pretty: bool = True) -> dict[str, Any]:
        """Manifest ``manifest_id`` summarised: chunk ref counts in all and per
        array, by kind (inline, native, virtual).

        ```python
        (manifest,) = repo.list_manifest_files(repo.lookup_branch("main"))
        print(repo.inspect_manifest(manifest.id))
        ```
        """
        return self._native.inspect_manifest(manifest_id, pretty=pretty)

    def list_manifest_files(self, snapshot_id: str) -> list[ManifestFileInfo]:
        """The manifest files snapshot ``snapshot_id`` lists.

        ```python
        for manifest in repo.list_manifest_files(repo.lookup_branch("main")):
            print(manifest.id, manifest.size_bytes, manifest.num_chunk_refs)
        ```
        """
        return [ManifestFileInfo(*m) for m in self._native.list_manifest_files(snapshot_id)]

    # -- storage statistics -----------------------------------------------------------

    def chunk_storage_stats(
        self,
        *,
        max_snapshots_in_memory: int = 50,
        max_compressed_manifest_mem_bytes: int = 512 * 1024 * 1024,
        max_decoded_manifest_mem_bytes: int = 4 * 1024 * 1024 * 1024,
        max_concurrent_manifest_fetches: int = 500,
    ) -> ChunkStorageStats:
        """Bytes of the chunks any branch or tag reaches, by kind, each chunk counted
        once (reads every manifest those snapshots list).

        The keyword arguments are Icechunk 2.3.0's budgets (snapshots, bytes, bytes,
        fetches), checked as Icechunk checks them; floe reads the manifests at the
        storage's own bound on requests in flight.

        ```python
        stats = repo.chunk_storage_stats()
        print(stats.native_bytes, stats.inlined_bytes, stats.virtual_bytes)
        ```

        :raises ValueError, OverflowError, TypeError: a budget of 0, out of range,
            or not an integer (as Icechunk).
        """
        _tuning.memory_budgets(
            max_snapshots_in_memory,
            max_compressed_manifest_mem_bytes,
            max_decoded_manifest_mem_bytes,
        )
        _tuning.positive(
            "max_concurrent_manifest_fetches", max_concurrent_manifest_fetches, _tuning.U16
        )
        return ChunkStorageStats(*self._native.chunk_storage_stats())

    def total_chunks_storage(self, **budgets: int) -> int:
        """Deprecated (as in Icechunk): the bytes of native chunk objects any branch
        or tag reaches; use ``chunk_storage_stats()``.

        ```python
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            print(repo.total_chunks_storage())  # 0 here: the chunks are small, so inline
        ```
        """
        warnings.warn(
            "total_chunks_storage is deprecated, use chunk_storage_stats instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.chunk_storage_stats(**budgets).native_bytes

    # -- maintenance ----------------------------------------------------------------

    def expire_snapshots(
        self,
        older_than: datetime.datetime,
        *,
        delete_expired_branches: bool = False,
        delete_expired_tags: bool = False,
    ) -> set[str]:
        """Removes the snapshots written before ``older_than`` from the history of
        every branch and tag, as Icechunk's ``expire_snapshots``: each history then
        goes from its oldest kept snapshot straight to the initial snapshot. Nothing
        is deleted from storage; ``garbage_collect`` later deletes what no branch or
        tag reaches.

        ```python
        import datetime

        week_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=7)
        expired = repo.expire_snapshots(week_ago)
        summary = repo.garbage_collect(week_ago)
        ```

        :param older_than: a timezone-aware cut-off (a snapshot's ``written_at``
            before it is expired).
        :param delete_expired_branches: also delete branches (never ``main``) whose
            tip is expired; otherwise such a tip is kept. A branch a commit moved
            meanwhile is kept (Icechunk deletes it, losing that commit).
        :param delete_expired_tags: also delete tags whose snapshot is expired.
        :returns: the ids of the snapshots that left a history (a set, as Icechunk).
            The CLI's ``floe expire --dry-run`` shows them without writing.
        :raises ReadOnlyError: spec 2, the repository's status is read-only.
        """
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
        max_snapshots_in_memory: int = 50,
        max_compressed_manifest_mem_bytes: int = 512 * 1024 * 1024,
        max_decoded_manifest_mem_bytes: int = 4 * 1024 * 1024 * 1024,
        max_concurrent_manifest_fetches: int | None = None,
        max_concurrent_deletes: int | None = None,
        max_consecutive_delete_failures: int = 50,
        max_concurrent_listings: int | None = None,
        allow_recent_cutoff: bool = False,
        full: bool = False,
    ) -> GCSummary:
        """Deletes the snapshots, transaction logs, manifests and chunks that no branch
        or tag reaches and that were written before ``delete_object_older_than``, as
        Icechunk's ``garbage_collect``. Run ``expire_snapshots`` first to make old
        snapshots unreachable.

        ```python
        import datetime

        cutoff = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=7)
        print(repo.garbage_collect(cutoff, dry_run=True).bytes_deleted)
        repo.garbage_collect(cutoff)
        ```

        :param delete_object_older_than: a timezone-aware cut-off; newer objects
            are kept (a writer may be about to reference them).
        :param dry_run: count what would be deleted; delete nothing.
        :param allow_recent_cutoff: accept a cut-off within the last hour (3600 s),
            safe only when no writer is active.
        :param max_snapshots_in_memory, max_compressed_manifest_mem_bytes,
            max_decoded_manifest_mem_bytes: Icechunk 2.3.0's memory budgets
            (snapshots; bytes, bytes): checked as Icechunk checks them, not needed by
            floe, which bounds its memory by the retained chunk ids held at once
            (4 Mi, about 160 MiB; more are collected in passes).
        :param max_concurrent_manifest_fetches: manifests (and spec-2 snapshots)
            fetched at once; default: the storage's bound on requests in flight (64
            on S3), 32 elsewhere.
        :param max_concurrent_deletes: delete batches (up to 1,000 objects each) in
            flight at once; default 32.
        :param max_consecutive_delete_failures: delete batches failing in a row (each
            after its retries) that stop the collection with ``StorageError``;
            default 50, as Icechunk. A batch failing alone stops nothing: see
            ``GCSummary.objects_failed_to_delete`` and ``skipped_phases``.
        :param max_concurrent_listings: listings in flight at once (on object
            storage each directory is listed as 32 key ranges); default 32.
        :param full: fetch every retained manifest. By default (floe's, not
            Icechunk's) the chunk ids of manifests an earlier collection read come
            from floe's collection state (the object ``floe/gc-state``): manifests
            never change, so the same objects are deleted either way.
        :returns: a ``GCSummary``: ``chunks_deleted``, ``manifests_deleted``,
            ``snapshots_deleted``, ``attributes_deleted``,
            ``transaction_logs_deleted`` (counts), ``bytes_deleted`` (bytes), and
            the failed deletes (``objects_failed_to_delete``, ``delete_errors``,
            ``skipped_phases``, ``throttled_batches``).
        :raises InvalidInputError: a cut-off within the last hour without
            ``allow_recent_cutoff``.
        :raises StorageError: ``max_consecutive_delete_failures`` delete batches
            failed in a row (what was deleted before stays deleted).
        :raises ValueError, OverflowError, TypeError: a tuning argument of 0, out of
            range, or not an integer (as Icechunk).
        """
        raw = self._native.garbage_collect(
            delete_object_older_than,
            dry_run=dry_run,
            allow_recent_cutoff=allow_recent_cutoff,
            full=full,
            **_gc_tuning(
                max_snapshots_in_memory,
                max_compressed_manifest_mem_bytes,
                max_decoded_manifest_mem_bytes,
                max_concurrent_manifest_fetches,
                max_concurrent_deletes,
                max_consecutive_delete_failures,
                max_concurrent_listings,
            ),
        )
        return GCSummary(**{k: v for k, v in raw.items() if k in GCSummary._FIELDS})

    # -- retention, squash, maintain (floe's own) -----------------------------------

    def retention_policy(self) -> dict[str, Any] | None:
        """Spec 2: the retention policy stored in the repository (repository
        metadata ``floe:retention``, which Icechunk keeps and ignores), or ``None``.

        ```python
        repo.set_retention_policy({"default": {"keep_last": 30}})
        assert repo.retention_policy() == {"default": {"keep_last": 30}}
        ```

        :returns: the policy in the form ``set_retention_policy`` takes, with
            ``keep_within`` as ``keep_within_seconds`` (whole seconds).
        :raises InvalidInputError: the stored value is not a policy; spec 1.
        """
        raw = self._native.retention_policy()
        return None if raw is None else json.loads(raw)

    def set_retention_policy(self, policy: dict[str, Any] | None) -> None:
        """Spec 2: stores a retention policy in the repository; ``None`` removes it.
        ``maintain`` and ``apply_retention()`` apply the stored policy.

        A policy has a ``"default"`` rule for every branch and rules for named
        branches under ``"branches"``; a rule keeps the last ``keep_last`` commits
        (the tip counts) and every commit of the last ``keep_within`` (a
        ``datetime.timedelta``, or ``keep_within_seconds``); a commit either keeps
        stays. Tags, branch tips, fork points other branches keep and detached
        snapshots are never released. A branch without a rule keeps its history.

        ```python
        import datetime

        repo.set_retention_policy({
            "default": {"keep_last": 100, "keep_within": datetime.timedelta(days=30)},
            "branches": {"scratch": {"keep_last": 1}},
        })
        ```

        :raises InvalidInputError: unknown fields, a rule with neither ``keep_last``
            nor ``keep_within``, ``keep_last`` of 0; spec 1.
        :raises ReadOnlyError: the repository's status is read-only.
        """
        self._native.set_retention_policy(None if policy is None else _policy_json(policy))

    def apply_retention(
        self, policy: dict[str, Any] | None = None, *, dry_run: bool = False
    ) -> dict[str, set[str]]:
        """Spec 2: thins every branch's history by a retention policy (``policy``, or
        the stored one when ``None``; the form ``set_retention_policy`` takes). The
        commits no rule keeps leave the histories; each kept commit whose parent
        left follows its nearest kept ancestor. Nothing is deleted from storage
        until ``garbage_collect``; refs are never deleted.

        ```python
        released = repo.apply_retention({"default": {"keep_last": 1}}, dry_run=True)
        print(len(released["expired"]), "commits would leave the histories")
        ```

        :param dry_run: say what would be released; write nothing.
        :returns: ``{"expired": {...}, "edited": {...}}``: ids of the snapshots that
            left (would leave) the histories and of those re-parented.
        :raises InvalidInputError: an invalid policy; spec 1 (upgrade first).
        :raises ReadOnlyError: the repository's status is read-only.
        """
        raw = self._native.apply_retention(
            None if policy is None else _policy_json(policy), dry_run=dry_run
        )
        return {k: set(v) for k, v in raw.items()}

    def squash(
        self,
        branch: str,
        from_snapshot_id: str,
        to_snapshot_id: str | None = None,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Squashes the commits of ``branch`` after ``from_snapshot_id`` up to
        ``to_snapshot_id`` (the tip when ``None``) into that last commit, which
        keeps its id, tree and message and becomes ``from_snapshot_id``'s child.
        The branch does not move, so a concurrent writer never loses a commit;
        ``garbage_collect`` later deletes what only the squashed commits reached.

        ```python
        base = repo.lookup_branch("main")
        for value in (1.0, 2.0):
            s = repo.writable_session("main")
            zarr.open_array(s.store, path="temperature")[0] = value
            s.commit(f"row 0 set to {value}")
        done = repo.squash("main", base)
        assert len(done["squashed"]) == 1  # the tip now follows base directly
        ```

        :param dry_run: say which commits would be squashed; write nothing.
        :returns: ``{"branch", "from", "to", "squashed", "removed", "dry_run"}``;
            ``squashed`` lists the commits that left the branch's history (oldest
            first), ``removed`` those that also left the repository's list of
            snapshots (spec 2).
        :raises InvalidInputError: ``to_snapshot_id`` is not on the branch, or
            ``from_snapshot_id`` is not below it; a malformed id.
        :raises RefNotFoundError: no such branch.
        """
        return dict(self._native.squash(branch, from_snapshot_id, to_snapshot_id, dry_run=dry_run))

    def compact(
        self,
        branch: str,
        *,
        paths: Sequence[str] | None = None,
        message: str | None = None,
    ) -> str:
        """Rewrites the small chunks of ``branch``, stored one object each, into
        packs (objects holding many chunks at different offsets), in one new commit
        on ``branch`` with the same tree and values: only chunk refs change. Reading
        the arrays back then takes a request per pack instead of one per chunk.

        A chunk is rewritten when it is a native chunk of at most
        ``chunk_packing.threshold_bytes`` encoded bytes (default 65,536) in an object
        of its own; packs are about ``chunk_packing.target_size_bytes`` (default
        8 MiB). Both come from the repository configuration whatever its packing
        mode, so a repository with packing disabled is compacted too. Bytes are
        copied as stored (nothing is decoded); inline and virtual chunks, larger
        chunks and chunks already in packs are left as they are.

        A compaction that fails or is interrupted leaves the branch unchanged (the
        packs it wrote are deleted by ``garbage_collect``). When another writer
        commits to ``branch`` meanwhile, it raises ``ConflictError``: call it again.
        The objects the chunks were in are deleted by ``expire_snapshots`` and
        ``garbage_collect`` once no kept snapshot refers to them.

        ```python
        snapshot = repo.compact("main", paths=["/temperature"])
        assert repo.lookup_branch("main") == snapshot
        ```

        :param branch: the branch to compact.
        :param paths: arrays to compact (a group's path stands for every array
            below it); ``None`` for every array.
        :param message: the commit message; default ``compact: N chunks into M
            packs``.
        :returns: the new commit's snapshot id; the branch's tip, unchanged, when
            fewer than two chunks qualify (no commit is made then).
        :raises RefNotFoundError: no such branch.
        :raises NodeNotFoundError: a path of ``paths`` is not in the tree.
        :raises ConflictError: the branch moved during the compaction.
        :raises ReadOnlyError: the repository's status is read-only.
        """
        raw = self._native.compact(branch, None if paths is None else list(paths), message)
        return str(raw["snapshot"] or raw["base"])

    def maintain(
        self, *, gc_older_than: datetime.datetime | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """The scheduled job: the stored retention policy (spec 2, when one is
        stored), then ``garbage_collect`` of what nothing reaches and was written
        before ``gc_older_than`` (default: one hour ago, the safety window).

        ```python
        import datetime

        week_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=7)
        summary = repo.maintain(gc_older_than=week_ago, dry_run=True)
        print(summary["gc"].bytes_deleted)
        ```

        :returns: ``{"retention": {"expired": {...}, "edited": {...}} or None,
            "gc": GCSummary}``.
        :raises InvalidInputError: a stored value that is not a policy; a cut-off
            within the last hour.
        """
        raw = self._native.maintain(gc_older_than=gc_older_than, dry_run=dry_run)
        retention = raw["retention"]
        gc = raw["gc"]
        return {
            "retention": None if retention is None else {k: set(v) for k, v in retention.items()},
            "gc": GCSummary(**{k: v for k, v in gc.items() if k in GCSummary._FIELDS}),
        }

    def verify(self, *, read_chunks: bool = False, check_virtual: bool = False) -> dict[str, Any]:
        """Checks the repository's integrity, as ``floe verify`` does (floe's own;
        Icechunk has no such check): every branch and tag resolves; every snapshot,
        transaction log and manifest they reach exists and decodes within the format
        limits; every native chunk object exists, is not empty and holds at least
        the offset + length its refs record (sizes from listings, no chunk bytes
        read unless ``read_chunks``); with ``check_virtual``, every virtual chunk's
        object exists, is long enough and still has the recorded ETag or
        modification time (one HEAD per object, under the repository's
        ``authorize_virtual_chunk_access``). Problems are reported, not raised.

        ```python
        report = repo.verify()
        print(report["ok"], report["problems"])  # True []
        print(report["snapshots"], report["manifests"])  # 2 1
        ```

        :param read_chunks: also read every native chunk's bytes.
        :param check_virtual: also check the objects virtual chunks point into.
        :returns: a dict: the counts checked (``refs``, ``snapshots``,
            ``transaction_logs``, ``manifests``, ``native_refs``, ``chunk_objects``,
            ``inline_refs``, ``virtual_refs``, ``virtual_objects``), ``problems``
            (a list of dicts with ``kind``, such as ``missing_chunk``,
            ``truncated_chunk``, ``zero_length_chunk``, ``corrupt_manifest``,
            ``dangling_ref``, ``changed_virtual_object``; ``message``; and where
            known ``ref``, ``snapshot``, ``array``, ``chunk`` and ``key``),
            ``problems_omitted`` (beyond the first 10,000) and ``ok``.
        :raises StorageError: the storage failed (network, access): the
            repository's state is unknown.
        """
        return self._native.verify(read_chunks=read_chunks, check_virtual=check_virtual)

    # -- display --------------------------------------------------------------------

    def _fields(self) -> list[tuple[str, object]]:
        return [
            ("storage", self._storage if self._storage is not None else "unknown"),
            ("config", "<RepositoryConfig ...>"),
        ]

    def __repr__(self) -> str:
        return text_block(f"{qualified('Repository')} (v{int(self.spec_version)})", self._fields())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_block(f"{qualified('Repository')} (v{int(self.spec_version)})", self._fields())

    # -- async twins (Icechunk's *_async API) -----------------------------------------
    #
    # Each awaits a native coroutine running on floe's tokio runtime, so the event loop
    # is never blocked; results equal the blocking twins'. The methods marked "thread"
    # have no native coroutine yet and run their blocking twin with
    # ``asyncio.to_thread`` (the loop stays free, a worker thread waits instead).

    @classmethod
    async def create_async(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
        *,
        spec_version: SpecVersion | int | None = None,
    ) -> Repository:
        """Awaitable ``create``: creates a repository in ``storage`` of spec version
        ``spec_version`` (1 or 2; 2 when ``None``). Raises ``ValueError`` for another
        version, ``FloeError`` when a repository exists there already."""
        _refuse_bucket_root(storage)
        spec = _spec_arg(spec_version)
        access = _authorized(authorize_virtual_chunk_access)
        return cls(
            await _NativeRepository.create_async(storage, config, spec, access), storage, access
        )

    @classmethod
    async def open_async(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> Repository:
        """Awaitable ``open`` (``config`` merged over the stored configuration, not
        stored; ``authorize_virtual_chunk_access`` as in ``open``); raises
        ``FloeError`` when there is no repository in ``storage``."""
        access = _authorized(authorize_virtual_chunk_access)
        return cls(await _NativeRepository.open_async(storage, config, access), storage, access)

    @classmethod
    async def open_or_create_async(
        cls,
        storage: Storage,
        config: RepositoryConfig | None = None,
        *,
        create_version: SpecVersion | int | None = None,
        authorize_virtual_chunk_access: dict[str, Any] | None = None,
    ) -> Repository:
        """Awaitable ``open_or_create``: opens the repository in ``storage`` (``config``
        merged over its stored one), creating one with ``config`` in spec version
        ``create_version`` (2 when ``None``; Icechunk's ``create_version``) when there
        is none; ``authorize_virtual_chunk_access`` as in ``open``."""
        spec = _spec_arg(create_version)
        access = _authorized(authorize_virtual_chunk_access)
        return cls(
            await _NativeRepository.open_or_create_async(storage, config, spec, access),
            storage,
            access,
        )

    @staticmethod
    async def exists_async(storage: Storage) -> bool:
        """Awaitable ``exists``: whether a repository (either spec) is in
        ``storage``."""
        return await _NativeRepository.exists_async(storage)

    @staticmethod
    async def fetch_spec_version_async(storage: Storage) -> SpecVersion | None:
        """The awaitable twin of ``fetch_spec_version``: same arguments, result and errors."""
        v = await _NativeRepository.fetch_spec_version_async(storage)
        return None if v is None else SpecVersion(v)

    @staticmethod
    async def fetch_config_async(storage: Storage) -> RepositoryConfig | None:
        """Awaitable ``fetch_config`` (thread: runs ``Repository.fetch_config`` with
        ``asyncio.to_thread``)."""
        return await asyncio.to_thread(Repository.fetch_config, storage)

    async def save_config_async(self, config: RepositoryConfig | None = None) -> None:
        """Awaitable ``save_config``; raises ``FloeError`` when another writer changed
        the configuration since it was read."""
        await self._native.save_config_async(config)

    async def reopen_async(self, *args: Any, **kwargs: Any) -> Repository:
        """Awaitable ``reopen``, same arguments (thread: runs ``reopen`` with
        ``asyncio.to_thread``)."""
        return await asyncio.to_thread(self.reopen, *args, **kwargs)

    async def writable_session_async(self, branch: str) -> Session:
        """The awaitable twin of ``writable_session``: same arguments, result and errors."""
        return Session(await self._native.writable_session_async(branch))

    async def readonly_session_async(
        self,
        branch: str | None = None,
        *,
        tag: str | None = None,
        snapshot_id: str | None = None,
        as_of: datetime.datetime | None = None,
    ) -> Session:
        """Awaitable ``readonly_session``: exactly one of a branch (optionally as of
        ``as_of``), a tag or a snapshot id (``ValueError`` otherwise)."""
        return Session(
            await self._native.readonly_session_async(
                branch, tag=tag, snapshot_id=snapshot_id, as_of=as_of
            )
        )

    async def rearrange_session_async(self, branch: str) -> Session:
        """Awaitable ``rearrange_session`` (spec 2)."""
        return Session(await self._native.rearrange_session_async(branch))

    def async_ancestry(
        self,
        *,
        branch: str | None = None,
        tag: str | None = None,
        snapshot_id: str | None = None,
    ) -> AsyncIterator[SnapshotInfo]:
        """The history of a branch, tag or snapshot, newest first, for ``async for``
        (Icechunk's ``async_ancestry``): the commits ``ancestry`` yields, read in
        batches by native coroutines as iteration reaches them. Errors are raised by
        the step that reaches them; ``aclose()`` ends the iteration early.

        ```python
        import asyncio

        async def messages():
            return [snap.message async for snap in repo.async_ancestry(branch="main")]

        print(asyncio.run(messages()))  # ['add temperature', 'Repository initialized']
        ```
        """
        return self._native.async_ancestry(branch=branch, tag=tag, snapshot_id=snapshot_id)

    async def diff_async(
        self,
        *,
        from_branch: str | None = None,
        from_tag: str | None = None,
        from_snapshot_id: str | None = None,
        to_branch: str | None = None,
        to_tag: str | None = None,
        to_snapshot_id: str | None = None,
    ) -> Diff:
        """Awaitable ``diff``: what changed from one version to a later one, each named
        by exactly one of a branch, a tag or a snapshot id (``ValueError``
        otherwise); ``InvalidInputError`` when ``from`` is not an ancestor of ``to``."""
        start = await self._version_async("from", from_branch, from_tag, from_snapshot_id)
        end = await self._version_async("to", to_branch, to_tag, to_snapshot_id)
        start, end = await asyncio.to_thread(self._check_diff_chain, start, end)
        return Diff(await self._native.diff_async(from_snapshot_id=start, to_snapshot_id=end))

    async def _version_async(self, side: str, branch, tag, snapshot_id) -> str:
        given = [v for v in (branch, tag, snapshot_id) if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"name the `{side}` version by exactly one of branch, tag, snapshot_id"
            )
        if branch is not None:
            return await self._native.lookup_branch_async(branch)
        if tag is not None:
            return await self._native.lookup_tag_async(tag)
        return snapshot_id

    async def list_branches_async(self) -> set[str]:
        """Awaitable ``list_branches`` (a set)."""
        return set(await self._native.list_branches_async())

    async def lookup_branch_async(self, branch: str) -> str:
        """Awaitable ``lookup_branch``; raises ``FloeError`` for an unknown branch."""
        return await self._native.lookup_branch_async(branch)

    async def create_branch_async(self, branch: str, snapshot_id: str) -> None:
        """The awaitable twin of ``create_branch``: same arguments, result and errors."""
        await self._native.create_branch_async(branch, snapshot_id)

    async def reset_branch_async(
        self, branch: str, snapshot_id: str, *, from_snapshot_id: str | None = None
    ) -> None:
        """Awaitable ``reset_branch``: with ``from_snapshot_id``, only if the branch
        is still there (raises what ``reset_branch`` raises otherwise)."""
        await self._native.reset_branch_async(
            branch, snapshot_id, from_snapshot_id=from_snapshot_id
        )

    async def delete_branch_async(self, branch: str) -> None:
        """The awaitable twin of ``delete_branch``: same arguments, result and errors."""
        await self._native.delete_branch_async(branch)

    async def list_tags_async(self) -> set[str]:
        """Awaitable ``list_tags`` (a set)."""
        return set(await self._native.list_tags_async())

    async def lookup_tag_async(self, tag: str) -> str:
        """Awaitable ``lookup_tag``; raises ``FloeError`` for an unknown tag."""
        return await self._native.lookup_tag_async(tag)

    async def create_tag_async(self, tag: str, snapshot_id: str) -> None:
        """The awaitable twin of ``create_tag``: same arguments, result and errors."""
        await self._native.create_tag_async(tag, snapshot_id)

    async def delete_tag_async(self, tag: str) -> None:
        """The awaitable twin of ``delete_tag``: same arguments, result and errors."""
        await self._native.delete_tag_async(tag)

    async def get_metadata_async(self) -> dict[str, Any]:
        """Awaitable ``get_metadata`` (spec 2)."""
        return await self._native.get_metadata_async()

    async def set_metadata_async(self, metadata: dict[str, Any]) -> None:
        """Awaitable ``set_metadata`` (spec 2)."""
        await self._native.set_metadata_async(metadata)

    async def update_metadata_async(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Awaitable ``update_metadata`` (spec 2): the metadata after."""
        return await self._native.update_metadata_async(metadata)

    async def expire_snapshots_async(
        self,
        older_than: datetime.datetime,
        *,
        delete_expired_branches: bool = False,
        delete_expired_tags: bool = False,
    ) -> set[str]:
        """Awaitable ``expire_snapshots``: the expired snapshot ids (a set)."""
        return set(
            await self._native.expire_snapshots_async(
                older_than,
                delete_expired_branches=delete_expired_branches,
                delete_expired_tags=delete_expired_tags,
            )
        )

    async def garbage_collect_async(
        self,
        delete_object_older_than: datetime.datetime,
        *,
        dry_run: bool = False,
        max_snapshots_in_memory: int = 50,
        max_compressed_manifest_mem_bytes: int = 512 * 1024 * 1024,
        max_decoded_manifest_mem_bytes: int = 4 * 1024 * 1024 * 1024,
        max_concurrent_manifest_fetches: int | None = None,
        max_concurrent_deletes: int | None = None,
        max_consecutive_delete_failures: int = 50,
        max_concurrent_listings: int | None = None,
        allow_recent_cutoff: bool = False,
        full: bool = False,
    ) -> GCSummary:
        """Awaitable ``garbage_collect``, same arguments and ``GCSummary``. A cut-off
        within the last hour raises ``InvalidInputError`` unless
        ``allow_recent_cutoff``; ``full`` as in ``garbage_collect``."""
        raw = await self._native.garbage_collect_async(
            delete_object_older_than,
            dry_run=dry_run,
            allow_recent_cutoff=allow_recent_cutoff,
            full=full,
            **_gc_tuning(
                max_snapshots_in_memory,
                max_compressed_manifest_mem_bytes,
                max_decoded_manifest_mem_bytes,
                max_concurrent_manifest_fetches,
                max_concurrent_deletes,
                max_consecutive_delete_failures,
                max_concurrent_listings,
            ),
        )
        return GCSummary(**{k: v for k, v in raw.items() if k in GCSummary._FIELDS})

    # Thread twins: the blocking method runs in a worker thread (asyncio.to_thread)
    # until a native coroutine exists; arguments and results are the blocking
    # method's.

    async def get_status_async(self) -> Any:
        """Awaitable ``get_status`` (thread)."""
        return await asyncio.to_thread(self.get_status)

    async def set_status_async(self, status: Any) -> None:
        """Awaitable ``set_status`` (thread)."""
        await asyncio.to_thread(self.set_status, status)

    async def feature_flags_async(self) -> list[Any]:
        """Awaitable ``feature_flags`` (thread)."""
        return await asyncio.to_thread(self.feature_flags)

    async def enabled_feature_flags_async(self) -> list[Any]:
        """Awaitable ``enabled_feature_flags`` (thread)."""
        return await asyncio.to_thread(self.enabled_feature_flags)

    async def disabled_feature_flags_async(self) -> list[Any]:
        """Awaitable ``disabled_feature_flags`` (thread)."""
        return await asyncio.to_thread(self.disabled_feature_flags)

    async def set_feature_flag_async(self, name: str, setting: bool | None) -> None:
        """Awaitable ``set_feature_flag`` (thread)."""
        await asyncio.to_thread(self.set_feature_flag, name, setting)

    async def ancestry_graph_async(self, *args: Any, **kwargs: Any) -> Any:
        """Awaitable ``ancestry_graph``, same arguments (thread)."""
        return await asyncio.to_thread(self.ancestry_graph, *args, **kwargs)

    async def ops_log_async(self) -> AsyncIterator[Any]:
        """The repository's operations log for ``async for``, newest first, as
        ``ops_log`` yields it (the awaitable twin: each step runs in a worker
        thread)."""
        entries = await asyncio.to_thread(lambda: iter(self.ops_log()))
        done = object()
        while (entry := await asyncio.to_thread(next, entries, done)) is not done:
            yield entry

    async def lookup_snapshot_async(self, snapshot_id: str) -> SnapshotInfo:
        """Awaitable ``lookup_snapshot`` (thread)."""
        return await asyncio.to_thread(self.lookup_snapshot, snapshot_id)

    async def list_manifest_files_async(self, snapshot_id: str) -> list[Any]:
        """Awaitable ``list_manifest_files`` (thread)."""
        return await asyncio.to_thread(self.list_manifest_files, snapshot_id)

    def rewrite_manifests(
        self,
        message: str,
        *,
        branch: str,
        metadata: dict[str, Any] | None = None,
        commit_method: str = "new_commit",
    ) -> str:
        """Rewrites the manifests of every array at the tip of ``branch`` in the
        layout the repository configuration's ``manifest.splitting`` gives now, and
        commits the result with ``message`` and ``metadata``; returns the new
        snapshot id (Icechunk 2.3.0's ``Repository.rewrite_manifests``). Chunk refs
        do not change, only how they are spread over manifest files. The commit's
        metadata records the splitting configuration applied under
        ``["__icechunk"]["splitting_config"]``.

        ``commit_method``: ``"new_commit"`` (a child of the tip) or ``"amend"``
        (replaces the tip; spec 2 only, ``FormatError`` on spec 1). Raises
        ``RefNotFoundError``-kind errors for a missing branch, ``ConflictError`` when
        the branch moves during the rewrite, ``ValueError`` for another
        ``commit_method``.

        ```python
        snapshot_id = repo.rewrite_manifests("compact manifests", branch="main")
        print(repo.lookup_branch("main") == snapshot_id)  # True
        ```
        """
        method = getattr(commit_method, "value", commit_method)
        if method not in ("new_commit", "amend"):
            raise ValueError(f"unknown commit_method {commit_method!r}: new_commit or amend")
        session = self._native.writable_session(branch)
        return session._rewrite_manifests(message, metadata, amend=method == "amend")

    async def rewrite_manifests_async(self, *args: Any, **kwargs: Any) -> str:
        """Awaitable ``rewrite_manifests``, same arguments (thread)."""
        return await asyncio.to_thread(self.rewrite_manifests, *args, **kwargs)

    async def chunk_storage_stats_async(self, *args: Any, **kwargs: Any) -> Any:
        """Awaitable ``chunk_storage_stats``, same arguments (thread)."""
        return await asyncio.to_thread(self.chunk_storage_stats, *args, **kwargs)

    async def total_chunks_storage_async(self, *args: Any, **kwargs: Any) -> int:
        """Deprecated (as in Icechunk): awaitable ``total_chunks_storage``, in bytes
        (thread); use ``chunk_storage_stats_async()``."""
        warnings.warn(
            "total_chunks_storage_async is deprecated, use chunk_storage_stats_async instead",
            DeprecationWarning,
            stacklevel=2,
        )
        stats = await asyncio.to_thread(self.chunk_storage_stats, *args, **kwargs)
        return stats.native_bytes

    async def inspect_snapshot_async(self, snapshot_id: str, **kwargs: Any) -> Any:
        """Awaitable ``inspect_snapshot`` (thread)."""
        return await asyncio.to_thread(self.inspect_snapshot, snapshot_id, **kwargs)

    async def inspect_repo_info_async(self, **kwargs: Any) -> Any:
        """Awaitable ``inspect_repo_info`` (thread)."""
        return await asyncio.to_thread(self.inspect_repo_info, **kwargs)

    async def inspect_manifest_async(self, manifest_id: str, **kwargs: Any) -> Any:
        """Awaitable ``inspect_manifest`` (thread)."""
        return await asyncio.to_thread(self.inspect_manifest, manifest_id, **kwargs)

    async def inspect_transaction_log_async(self, snapshot_id: str, **kwargs: Any) -> Any:
        """Awaitable ``inspect_transaction_log`` (thread)."""
        return await asyncio.to_thread(self.inspect_transaction_log, snapshot_id, **kwargs)


def _gc_tuning(
    max_snapshots_in_memory: int,
    max_compressed_manifest_mem_bytes: int,
    max_decoded_manifest_mem_bytes: int,
    max_concurrent_manifest_fetches: int | None,
    max_concurrent_deletes: int | None,
    max_consecutive_delete_failures: int,
    max_concurrent_listings: int | None,
) -> dict[str, int | None]:
    """Icechunk 2.3.0's tuning arguments of ``garbage_collect``, checked as Icechunk
    checks them, as the native call's keywords (``None``: floe's default)."""
    _tuning.memory_budgets(
        max_snapshots_in_memory, max_compressed_manifest_mem_bytes, max_decoded_manifest_mem_bytes
    )

    def optional(name: str, value: int | None) -> int | None:
        return None if value is None else _tuning.positive(name, value, _tuning.U16)

    return {
        "manifest_concurrency": optional(
            "max_concurrent_manifest_fetches", max_concurrent_manifest_fetches
        ),
        "delete_concurrency": optional("max_concurrent_deletes", max_concurrent_deletes),
        "max_consecutive_delete_failures": _tuning.positive(
            "max_consecutive_delete_failures", max_consecutive_delete_failures, _tuning.U16
        ),
        "list_concurrency": optional("max_concurrent_listings", max_concurrent_listings),
    }


def _spec_arg(spec_version: Any) -> int | None:
    """A spec version argument as the native create takes it; ``ValueError`` as
    Icechunk words it for anything else."""
    if spec_version is None:
        return None
    if isinstance(spec_version, bool) or not isinstance(spec_version, int):
        raise ValueError(f"Couldn't parse a valid version from {spec_version!r}")
    if int(spec_version) not in {v.value for v in SpecVersion}:
        raise ValueError(f"Unsupported version {int(spec_version)}")
    return int(spec_version)


def clone_repository(
    source: Storage,
    destination: Storage,
    *,
    refs: list[str] | None = None,
    verify: bool = True,
) -> dict[str, Any]:
    """Copies the repository in ``source`` to ``destination``, as ``floe clone``
    does (floe's own; icechunk#1034): every object byte for byte, chunks never
    decoded, virtual refs copied as refs; the full history, or only what ``refs``
    reach (branch or tag names, or ``branch:NAME`` / ``tag:NAME``; ``main`` always
    comes along). Running it again resumes an interrupted clone or brings an
    earlier one up to date; the refs are written last.

    ```python
    repo.create_tag("v1", repo.lookup_branch("main"))
    report = floe.clone_repository(
        floe.local_filesystem_storage("repo"), floe.local_filesystem_storage("backup")
    )
    assert report["ok"] and "tag:v1" in report["refs"]
    backup = floe.Repository.open(floe.local_filesystem_storage("backup"))
    ```

    :param verify: check the clone at the end (``Repository.verify``).
    :returns: ``{"objects_copied", "bytes_copied", "objects_skipped", "refs",
        "verify", "ok"}``: counts, bytes, the clone's refs, the verification report
        (``None`` without ``verify``) and whether it found no problem.
    :raises RepositoryNotFoundError: no repository in ``source``.
    :raises InvalidInputError: ``destination`` holds another repository (or commits
        the source lacks), which the clone would overwrite; nothing is copied.
    """
    return dict(_NativeRepository._clone(source, destination, list(refs or []), verify))


def upgrade_icechunk_repository(
    repo: Repository,
    *,
    dry_run: bool,
    delete_unused_v1_files: bool = True,
    prefetch_concurrency: int | None = None,
) -> Repository:
    """Upgrades a spec-1 repository to spec 2 in place (Icechunk's
    ``upgrade_icechunk_repository``): the refs, tags and history move into the
    ``repo`` object and an ops log starting with ``RepoMigrated`` is written. With
    ``dry_run`` nothing changes. Returns the repository reopened (use it instead of
    ``repo``). ``FormatError`` when it is spec 2 already. floe always removes the
    spec-1 ref files it replaced (``delete_unused_v1_files`` is accepted and
    ignored), and ``prefetch_concurrency`` is not needed.

    ```python
    from floe import upgrade_icechunk_repository

    floe.Repository.create(floe.local_filesystem_storage("old-repo"), spec_version=1)
    repo = floe.Repository.open(floe.local_filesystem_storage("old-repo"))
    if repo.spec_version == floe.SpecVersion.v1:
        upgrade_icechunk_repository(repo, dry_run=True)  # checks, changes nothing
        repo = upgrade_icechunk_repository(repo, dry_run=False)
    ```

    After the upgrade Icechunk 1.x can no longer read the repository; Icechunk
    2.x and floe can.
    """
    storage = repo._storage
    if storage is None and not dry_run:
        raise ValueError("the repository's storage is unknown: open it with Repository.open")
    repo._native._upgrade_to_spec2(dry_run=dry_run)
    if dry_run or storage is None:
        return repo
    upgraded = Repository.open(storage)
    # The old object views spec 1, which is gone: as Icechunk, any further use of it
    # raises RuntimeError instead of acting on stale state. (A deliberate class swap,
    # which mypy refuses between unrelated classes.)
    repo.__class__ = _InvalidatedRepository  # type: ignore[assignment]
    return upgraded


class _InvalidatedRepository:
    """What a ``Repository`` object becomes once ``upgrade_icechunk_repository``
    migrated its repository (Icechunk's ``_InvalidatedRepository``): every attribute
    access raises ``RuntimeError``; use the repository the upgrade returned."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            f"cannot use `{name}`: this Repository object was invalidated by "
            "upgrade_icechunk_repository; use the repository it returned"
        )

    def __repr__(self) -> str:
        return "<invalidated Repository (upgraded by upgrade_icechunk_repository)>"


def _policy_json(policy: dict[str, Any]) -> str:
    """A retention policy as the JSON text the engine takes: ``keep_within`` given
    as a ``datetime.timedelta`` becomes ``keep_within_seconds``."""
    if not isinstance(policy, dict):
        raise InvalidInputError(f"a retention policy is a dict, not {type(policy).__name__}")

    def rule(r: Any) -> Any:
        if not isinstance(r, dict):
            return r
        out = dict(r)
        if "keep_within" in out:
            within = out.pop("keep_within")
            if not isinstance(within, datetime.timedelta):
                raise InvalidInputError("keep_within is a datetime.timedelta")
            out["keep_within_seconds"] = int(within.total_seconds())
        return out

    plain = dict(policy)
    if "default" in plain:
        plain["default"] = rule(plain["default"])
    if isinstance(plain.get("branches"), dict):
        plain["branches"] = {b: rule(r) for b, r in plain["branches"].items()}
    return json.dumps(plain)
