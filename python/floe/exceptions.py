"""floe's exceptions: Icechunk 2.3.0's exception tree, with the same names, bases,
attributes and machine-readable ``kind`` codes, so ``except icechunk.XError`` works
unchanged after ``floe.install_as_icechunk()``.

The tree::

    IcechunkError (alias FloeError)
    ├── ConflictError
    │   └── RebaseFailedError          (.snapshot, .conflicts: list[Conflict])
    ├── NotFoundError                  (also a KeyError)
    │   ├── NodeNotFoundError
    │   ├── SnapshotNotFoundError
    │   ├── RefNotFoundError
    │   └── RepositoryNotFoundError
    ├── AlreadyExistsError
    ├── ReadOnlyError
    ├── InvalidInputError              (also a ValueError)
    ├── SessionStateError
    ├── StorageError
    ├── FormatError
    └── InternalError

Every instance has ``message`` (what ``str(e)`` gives) and ``kind`` (an
:class:`ErrorKind` code, ``"unknown"`` when none was given); errors floe raises
carry the full cause chain as a PEP 678 note (``e.__notes__``). Every class pickles
with its attributes. Which floe failure raises which class and kind is decided in
one place, the native module's error mapping (``python/src/errors.rs``).

This module is pure Python and imports nothing of floe but the display helpers
(``floe._display``, pure Python too): the native module imports it at start-up to
raise these classes, and re-exports them (``floe._floe``).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

from floe._display import _package, html_block


class ErrorKind(StrEnum):
    """The machine-readable codes of ``IcechunkError.kind``, Icechunk 2.3.0's
    ``ErrorKind`` (same members, same values), grouped by the exception class that
    usually carries them. Match on them rather than on messages:
    ``if e.kind == ErrorKind.TAG_ALREADY_EXISTS: ...``. floe raises a subset of them
    (``floe._floe._all_error_kinds()`` lists every code the native module knows)."""

    # conflicts
    COMMIT_CONFLICT = "commit-conflict"
    BRANCH_UPDATE_CONFLICT = "branch-update-conflict"
    REBASE_FAILED = "rebase-failed"
    CONFIG_UPDATED = "config-updated"
    REPO_INFO_UPDATED = "repo-info-updated"
    UPDATE_ATTEMPTS_EXHAUSTED = "update-attempts-exhausted"
    GC_DELETES_FAILING = "gc-deletes-failing"
    # not found
    NODE_NOT_FOUND = "node-not-found"
    ANCESTOR_NODE_NOT_FOUND = "ancestor-node-not-found"
    CHUNK_NOT_FOUND = "chunk-not-found"
    KEY_NOT_FOUND = "key-not-found"
    SNAPSHOT_NOT_FOUND = "snapshot-not-found"
    NO_SNAPSHOT_AT_TIME = "no-snapshot-at-time"
    REF_NOT_FOUND = "ref-not-found"
    BRANCH_NOT_FOUND = "branch-not-found"
    TAG_NOT_FOUND = "tag-not-found"
    REPOSITORY_NOT_FOUND = "repository-not-found"
    MANIFEST_INFO_NOT_FOUND = "manifest-info-not-found"
    # already exists
    NODE_ALREADY_EXISTS = "node-already-exists"
    BRANCH_ALREADY_EXISTS = "branch-already-exists"
    TAG_ALREADY_EXISTS = "tag-already-exists"
    TAG_PREVIOUSLY_DELETED = "tag-previously-deleted"
    MOVE_WONT_OVERWRITE = "move-wont-overwrite"
    # read only
    READ_ONLY_SESSION = "read-only-session"
    READ_ONLY_STORE = "read-only-store"
    READ_ONLY_STORAGE = "read-only-storage"
    READ_ONLY_REPOSITORY = "read-only-repository"
    # invalid input
    INVALID_KEY = "invalid-key"
    INVALID_CHUNK_INDEX = "invalid-chunk-index"
    ZERO_LENGTH_CHUNK = "zero-length-chunk"
    INVALID_MANIFEST_SPLIT_INDEX = "invalid-manifest-split-index"
    INVALID_REF_TYPE = "invalid-ref-type"
    INVALID_REF_NAME = "invalid-ref-name"
    INVALID_SNAPSHOT_ID = "invalid-snapshot-id"
    INVALID_PATH = "invalid-path"
    BAD_KEY_PREFIX = "bad-key-prefix"
    BAD_METADATA = "bad-metadata"
    BAD_PREFIX = "bad-prefix"
    NOT_AN_ARRAY = "not-an-array"
    NOT_A_GROUP = "not-a-group"
    INVALID_BYTE_RANGE = "invalid-byte-range"
    INVALID_COMMIT_CONFIGURATION = "invalid-commit-configuration"
    INVALID_ARRAY_METADATA = "invalid-array-metadata"
    INVALID_FEATURE_FLAG = "invalid-feature-flag"
    INVALID_VIRTUAL_REF = "invalid-virtual-ref"
    INVALID_CREDENTIALS = "invalid-credentials"
    NO_CONTAINER_FOR_VIRTUAL_CHUNK = "no-container-for-virtual-chunk"
    UNAUTHORIZED_VIRTUAL_CHUNK_CONTAINER = "unauthorized-virtual-chunk-container"
    EMPTY_PREFIX_CREATION = "empty-prefix-creation"
    PARENT_DIRECTORY_NOT_CLEAN = "parent-directory-not-clean"
    BAD_SNAPSHOT_CHAIN_FOR_DIFF = "bad-snapshot-chain-for-diff"
    # session/repository state
    COMMIT_NOT_ALLOWED = "commit-not-allowed"
    MERGE_NOT_ALLOWED = "merge-not-allowed"
    CANNOT_FORK_READ_ONLY_SESSION = "cannot-fork-read-only-session"
    REARRANGE_SESSION_ONLY = "rearrange-session-only"
    NON_REARRANGE_SESSION = "non-rearrange-session"
    MOVE_INTO_SELF_OR_DESCENDANT = "move-into-self-or-descendant"
    MOVE_DESTINATION_PARENT_MISSING = "move-destination-parent-missing"
    MOVE_DESTINATION_PARENT_NOT_GROUP = "move-destination-parent-not-group"
    NO_CHANGES_TO_COMMIT = "no-changes-to-commit"
    NO_AMEND_FOR_INITIAL_COMMIT = "no-amend-for-initial-commit"
    NOT_ON_BRANCH = "not-on-branch"
    NO_SNAPSHOT = "no-snapshot"
    CANNOT_DELETE_MAIN = "cannot-delete-main"
    UNCOMMITTED_CHANGES = "uncommitted-changes"
    MERGE_FAILED = "merge-failed"
    NOT_ALLOWED = "not-allowed"
    UNIMPLEMENTED = "unimplemented"
    REBASE_TX_LOG_PRUNED = "rebase-tx-log-pruned"
    FEATURE_FLAG_DISABLED = "feature-flag-disabled"
    TAG_ERROR = "tag-error"
    INVALID_REPOSITORY_MIGRATION = "invalid-repository-migration"
    # storage / environment
    OBJECT_NOT_FOUND = "object-not-found"
    OBJECT_STORE = "object-store"
    IO = "io"
    STORAGE_CONFIG = "storage-config"
    CANNOT_PARSE_URL = "cannot-parse-url"
    BAD_REDIRECT = "bad-redirect"
    SEMAPHORE_ACQUIRE = "semaphore-acquire"
    THROTTLED = "throttled"
    STORAGE_OTHER = "storage-other"
    VIRTUAL_CHUNK_FETCH = "virtual-chunk-fetch"
    VIRTUAL_CHUNK_MODIFIED = "virtual-chunk-modified"
    INVALID_OBJECT_SIZE = "invalid-object-size"
    # format
    SERIALIZATION = "serialization"
    DESERIALIZATION = "deserialization"
    CONFIG_DESERIALIZATION = "config-deserialization"
    INVALID_FILE_FORMAT = "invalid-file-format"
    UNSUPPORTED_SPEC_VERSION = "unsupported-spec-version"
    UNSUPPORTED_OPERATION_FOR_VERSION = "unsupported-operation-for-version"
    SNAPSHOT_TIMESTAMP = "snapshot-timestamp"
    DUPLICATE_SNAPSHOT_ID = "duplicate-snapshot-id"
    # internal
    CONCURRENCY = "concurrency"
    FLUSH = "flush"
    PARTIAL_VALUES_PANIC = "partial-values-panic"
    CONFLICTING_PATH_NOT_FOUND = "conflicting-path-not-found"
    INCONSISTENT_MANIFESTS = "inconsistent-manifests"
    POISON_LOCK = "poison-lock"
    PICKLE = "pickle"
    UNKNOWN = "unknown"


class IcechunkError(Exception):
    """The base of every error floe raises (Icechunk's ``IcechunkError``; floe's
    older name ``FloeError`` is an alias).

    ``IcechunkError(message, kind=None)``: ``message`` is ``str(e)``; ``kind`` an
    :class:`ErrorKind` code (``"unknown"`` when ``None``).

    ```python
    snapshot_id = repo.lookup_branch("main")
    repo.create_tag("v1", snapshot_id)
    try:
        repo.create_tag("v1", snapshot_id)  # a second time
    except floe.AlreadyExistsError as e:
        assert e.kind == floe.ErrorKind.TAG_ALREADY_EXISTS
    except floe.IcechunkError as e:  # every other floe error
        print(e.kind, e)
    ```
    """

    def __init__(self, message: str, kind: str | None = None) -> None:
        args = (message,) if kind is None else (message, kind)
        super().__init__(*args)
        self.message: str = message
        self.kind: str = str(kind) if kind is not None else ErrorKind.UNKNOWN.value

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f'{_package()}.{type(self).__name__}(message="{self.message}", kind="{self.kind}")'

    def __reduce__(self):
        # Pickles as its class and arguments (tblib and multiprocessing rebuild it),
        # keeping notes.
        state = {"__notes__": self.__notes__} if hasattr(self, "__notes__") else None
        return (type(self), (self.message, self.kind), state)

    def __setstate__(self, state) -> None:
        if state:
            for name, value in state.items():
                setattr(self, name, value)


#: floe's name for :class:`IcechunkError`.
FloeError = IcechunkError


def _rust_option(value: str | None) -> str:
    return "None" if value is None else f'Some("{value}")'


class ConflictError(IcechunkError):
    """A commit (or branch update) lost to a concurrent writer: the branch is no
    longer at the snapshot the session started from.

    ``ConflictError(expected_parent=None, actual_parent=None, message=None,
    kind=None)``: ``expected_parent`` is the snapshot the session was based on,
    ``actual_parent`` where the branch is now; the message defaults to Icechunk's
    ``Failed to commit, expected parent: ..., actual parent: ...`` and the kind to
    ``commit-conflict``. Rebase (``Session.rebase`` or ``commit(rebase_with=...)``)
    and commit again."""

    def __init__(
        self,
        expected_parent: str | None = None,
        actual_parent: str | None = None,
        message: str | None = None,
        kind: str | None = None,
    ) -> None:
        if message is None:
            message = (
                f"Failed to commit, expected parent: {_rust_option(expected_parent)}, "
                f"actual parent: {_rust_option(actual_parent)}"
            )
        IcechunkError.__init__(self, message, kind or ErrorKind.COMMIT_CONFLICT.value)
        self.args = (expected_parent, actual_parent)
        self.expected_parent: str | None = expected_parent
        self.actual_parent: str | None = actual_parent

    def __repr__(self) -> str:
        return (
            f"{_package()}.ConflictError(expected_parent={self.expected_parent}, "
            f"actual_parent={self.actual_parent})"
        )

    def __reduce__(self):
        state = {"__notes__": self.__notes__} if hasattr(self, "__notes__") else None
        return (
            type(self),
            (self.expected_parent, self.actual_parent, self.message, self.kind),
            state,
        )


class ConflictType(IntEnum):
    """Why a change cannot be rebased onto a branch tip (Icechunk's
    ``ConflictType``, same names and numbers). ``repr`` is the name, ``str`` a
    phrase."""

    NewNodeConflictsWithExistingNode = 1
    NewNodeInInvalidGroup = 2
    ZarrMetadataDoubleUpdate = 3
    ZarrMetadataUpdateOfDeletedArray = 4
    ZarrMetadataUpdateOfDeletedGroup = 5
    ChunkDoubleUpdate = 6
    ChunksUpdatedInDeletedArray = 7
    ChunksUpdatedInUpdatedArray = 8
    DeleteOfUpdatedArray = 9
    DeleteOfUpdatedGroup = 10
    MoveOperationCannotBeRebased = 11

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        words: list[str] = []
        for ch in self.name:
            if ch.isupper() and words:
                words.append(" ")
            words.append(ch.lower())
        text = "".join(words)
        return text[0].upper() + text[1:]


class Conflict:
    """One conflict found by a rebase: its ``conflict_type`` (:class:`ConflictType`),
    the node ``path`` (``/a/b``) and, for chunk conflicts, ``conflicted_chunks``
    (the chunk grid indices, each a list of ints; ``None`` otherwise).

    ```python
    zarr.open_array(session.store, path="temperature")[0] = 1.0
    other = repo.writable_session("main")
    zarr.open_array(other.store, path="temperature")[0] = 2.0
    other.commit("row 0 = 2")
    try:
        session.rebase(floe.ConflictDetector())
    except floe.RebaseFailedError as e:
        for conflict in e.conflicts:
            print(conflict.conflict_type, conflict.path, conflict.conflicted_chunks)
            # Chunk double update /temperature [[0, 0]]
    ```
    """

    __slots__ = ("conflict_type", "path", "conflicted_chunks")

    def __init__(
        self,
        conflict_type: ConflictType,
        path: str,
        conflicted_chunks: list[list[int]] | None = None,
    ) -> None:
        self.conflict_type = ConflictType(conflict_type)
        self.path = path
        self.conflicted_chunks = (
            None if conflicted_chunks is None else [list(c) for c in conflicted_chunks]
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conflict) and (
            (self.conflict_type, self.path, self.conflicted_chunks)
            == (other.conflict_type, other.path, other.conflicted_chunks)
        )

    def __reduce__(self):
        return (Conflict, (int(self.conflict_type), self.path, self.conflicted_chunks))

    def __repr__(self) -> str:
        lines = [
            f"<{_package()}.conflicts.Conflict>",
            f"conflict_type: {self.conflict_type!r}",
            f"path: {self.path}",
        ]
        if self.conflicted_chunks is not None:
            lines.append(f"conflicted_chunks: {self.conflicted_chunks}")
        return "\n".join(lines) + "\n"

    __str__ = __repr__

    def _repr_html_(self) -> str:
        fields = [("conflict_type", repr(self.conflict_type)), ("path", self.path)]
        if self.conflicted_chunks is not None:
            fields.append(("conflicted_chunks", str(self.conflicted_chunks)))
        return html_block(f"{_package()}.conflicts.Conflict", fields)


class RebaseFailedError(ConflictError):
    """A rebase found conflicts its solver did not resolve: ``snapshot`` is the
    branch tip it rebased onto, ``conflicts`` the :class:`Conflict` list (kind
    ``rebase-failed``). Nothing was committed; the session keeps its changes."""

    def __init__(self, snapshot: str, conflicts: list[Conflict]) -> None:
        conflicts = list(conflicts)
        ConflictError.__init__(
            self,
            None,
            None,
            f"Rebase failed on snapshot {snapshot}: {len(conflicts)} conflicts found",
            ErrorKind.REBASE_FAILED.value,
        )
        self.args = (snapshot, conflicts)
        self.snapshot: str = snapshot
        self.conflicts: list[Conflict] = conflicts

    def __repr__(self) -> str:
        inner = ", ".join(
            f"Conflict(conflict_type={c.conflict_type!r}, path={c.path!r}, "
            f"conflicted_chunks={c.conflicted_chunks!r})"
            for c in self.conflicts
        )
        return f'{_package()}.RebaseFailedError(snapshot="{self.snapshot}", conflicts=[{inner}])'

    def __reduce__(self):
        state = {"__notes__": self.__notes__} if hasattr(self, "__notes__") else None
        return (type(self), (self.snapshot, self.conflicts), state)


class NotFoundError(IcechunkError, KeyError):
    """Something asked for does not exist. Also a ``KeyError``, as in Icechunk, so
    ``except KeyError`` catches it.

    ```python
    try:
        repo.lookup_branch("nope")
    except floe.NotFoundError:  # RefNotFoundError
        ...
    ```
    """


class NodeNotFoundError(NotFoundError):
    """No group or array at the path (or no ancestor of it)."""


class SnapshotNotFoundError(NotFoundError):
    """No snapshot with the id, or none of the branch at or before the time
    (``readonly_session(as_of=...)``). Raised, as by Icechunk 2.3.0, for an id of
    the right form (20 Crockford base32 characters) that names no snapshot of the
    repository, by ``readonly_session``, ``lookup_snapshot``, ``ancestry``,
    ``create_branch``, ``create_tag``, ``reset_branch`` and ``diff``; text that is no
    snapshot id raises :class:`InvalidInputError` instead."""


class RefNotFoundError(NotFoundError):
    """No branch or tag of the name."""


class RepositoryNotFoundError(NotFoundError):
    """No repository at the storage location."""


class AlreadyExistsError(IcechunkError):
    """What was to be created exists: a node, a branch or a tag, or the name of a
    deleted tag. (Creating a repository where one exists raises
    :class:`InvalidInputError`, as in Icechunk.)"""


class ReadOnlyError(IcechunkError):
    """A write through a read-only session, store or repository; a session is
    read-only once it committed."""


class InvalidInputError(IcechunkError, ValueError):
    """An invalid argument, key, index, id, name or metadata value. Also a
    ``ValueError``, as in Icechunk. For snapshot ids: text that is no id (wrong
    length, characters outside Crockford base32) raises this, kind
    ``invalid-snapshot-id``; a well-formed id of no snapshot raises
    :class:`SnapshotNotFoundError`."""


class SessionStateError(IcechunkError):
    """The session's or repository's state forbids the operation: committing a fork
    or a read-only session, committing nothing, moving outside a rearrange session,
    deleting ``main``, an operation a feature flag turned off."""


class StorageError(IcechunkError):
    """The storage backend failed (often transient) or an object is missing."""


class FormatError(IcechunkError):
    """Stored data cannot be read or written: corrupt or truncated objects, an
    unsupported spec version, an operation that needs another spec version."""


class InternalError(IcechunkError):
    """An unexpected internal failure (a floe bug)."""


__all__ = [
    "AlreadyExistsError",
    "Conflict",
    "ConflictError",
    "ConflictType",
    "ErrorKind",
    "FloeError",
    "FormatError",
    "IcechunkError",
    "InternalError",
    "InvalidInputError",
    "NodeNotFoundError",
    "NotFoundError",
    "ReadOnlyError",
    "RebaseFailedError",
    "RefNotFoundError",
    "RepositoryNotFoundError",
    "SessionStateError",
    "SnapshotNotFoundError",
    "StorageError",
]
