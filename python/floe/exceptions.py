"""floe's exceptions, named as Icechunk's Python API names them.

``FloeError`` (alias ``IcechunkError``) is the base of every error floe raises. The
subclasses are the ones of Icechunk 2.3.0's exception tree that floe raises today:

- ``ConflictError``: a commit, rebase or merge conflicts with changes made meanwhile;
- ``ReadOnlyError``: a write through a read-only session or store, also through a
  session that committed (it is read-only afterwards, as in Icechunk);
- ``InvalidInputError`` (also a ``ValueError``): a key no Zarr hierarchy has (``exists``
  on such a key raises it, as Icechunk), an invalid branch or tag name;
- ``SessionStateError``: an operation the session's state forbids (committing a fork
  or a read-only session, committing twice, committing no changes).

Every other failure is a ``FloeError``.
"""

from floe._floe import (
    ConflictError,
    FloeError,
    InvalidInputError,
    ReadOnlyError,
    SessionStateError,
)

#: Icechunk's name for the base class of every error.
IcechunkError = FloeError

__all__ = [
    "ConflictError",
    "FloeError",
    "IcechunkError",
    "InvalidInputError",
    "ReadOnlyError",
    "SessionStateError",
]
