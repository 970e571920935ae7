"""``Session``: a read-only or writable view of one version of a repository, as
Icechunk's ``icechunk.session``."""

from __future__ import annotations

from floe._floe import Session as _NativeSession
from floe.config import RepositoryConfig
from floe.diff import Diff
from floe.store import FloeStore

__all__ = ["Session"]


class Session:
    """A session on a repository: read-only, writable on a branch, a fork, or a
    rearrange session (spec 2, moves only). ``store`` is its zarr-python store.

    As in Icechunk, a session that committed (or amended) is read-only from then on,
    at the snapshot it wrote; so are the stores it gave out before. Open a new
    writable session for the next commit.
    """

    def __init__(self, native: _NativeSession):
        self._native = native

    @property
    def store(self) -> FloeStore:
        """The zarr-python store over this session (read-only for a read-only
        session)."""
        return FloeStore(self._native._native_store(), session=self)

    @property
    def config(self) -> "RepositoryConfig":
        """The repository configuration the session works with (a copy)."""
        return self._native.config

    @property
    def snapshot_id(self) -> str:
        """The snapshot the session reads: its base, or the snapshot it committed."""
        return self._native.snapshot_id

    @property
    def branch(self) -> str | None:
        """The branch of a writable session; ``None`` for read-only sessions, forks and
        sessions that committed (as Icechunk)."""
        return self._native.branch

    @property
    def read_only(self) -> bool:
        """Whether the session refuses writes (read-only and rearrange sessions, and a
        session once it committed)."""
        return self._native.read_only

    @property
    def has_uncommitted_changes(self) -> bool:
        """Whether the session holds changes not yet committed."""
        return self._native.has_uncommitted_changes

    def status(self) -> Diff:
        """The uncommitted changes of this session."""
        return Diff(self._native.status())

    def discard_changes(self) -> None:
        """Forgets the uncommitted changes."""
        self._native.discard_changes()

    def commit(
        self,
        message: str,
        metadata: dict | None = None,
        *,
        allow_empty: bool = False,
        rebase_with=None,
        rebase_tries: int = 100,
    ) -> str:
        """Commits the changes and returns the new snapshot id; the session is
        read-only afterwards (as Icechunk). When the branch moved, rebases with
        ``rebase_with`` (a ``ConflictDetector`` or ``BasicConflictSolver``; default:
        detect and fail) at most ``rebase_tries`` times; a commit that rebased records
        ``{"__icechunk": {"rebase_attempts": n}}`` in its metadata.

        Raises ``ConflictError`` for conflicts the solver leaves,
        ``SessionStateError`` on a fork, a read-only session, a session that already
        committed, or no changes (unless ``allow_empty``)."""
        return self._native.commit(
            message,
            metadata,
            allow_empty=allow_empty,
            rebase_with=rebase_with,
            rebase_tries=rebase_tries,
        )

    def amend(self, message: str, metadata: dict | None = None) -> str:
        """Replaces the branch tip with a snapshot holding its content plus these
        changes (same parent); returns its id. The session is read-only afterwards.
        Raises ``ConflictError`` when the branch moved meanwhile."""
        return self._native.amend(message, metadata)

    def rebase(self, solver=None) -> None:
        """Moves the session's base to its branch tip, keeping its changes as
        ``solver`` resolves their conflicts (default: any conflict raises
        ``ConflictError``)."""
        self._native.rebase(solver)

    def fork(self) -> "Session":
        """A fork of this writable session: write in it (in another process if
        pickled), then ``merge`` it back. Forks cannot commit."""
        return Session(self._native.fork())

    def merge(self, *forks: "Session") -> None:
        """Merges the changes of ``forks`` into this session; raises
        ``ConflictError`` when two of them wrote the same chunk."""
        self._native.merge(*[f._native for f in forks])

    def move(self, from_path: str, to_path: str) -> None:
        """Rearrange sessions (spec 2): moves a node and everything under it."""
        self._native.move(from_path, to_path)

    def all_virtual_chunk_locations(self) -> list[str]:
        """The location URL of every virtual chunk ref in the session (uncommitted
        changes included), one entry per ref, as Icechunk."""
        from floe._floe import _all_virtual_chunk_locations

        return _all_virtual_chunk_locations(self._native)

    async def all_virtual_chunk_locations_async(self) -> list[str]:
        """``all_virtual_chunk_locations`` as a coroutine."""
        import asyncio

        return await asyncio.to_thread(self.all_virtual_chunk_locations)

    def __reduce__(self):
        # Read-only sessions and forks pickle (storage URL and snapshot id, or the
        # fork's changes; no credentials); a writable session refuses: fork it.
        return (Session, (self._native,))

    def __repr__(self) -> str:
        if self.read_only:
            kind = "read-only"
        elif self.branch is None:
            kind = "fork"
        else:
            kind = f"writable on {self.branch!r}"
        return f"<floe.Session {kind} at {self.snapshot_id}>"
