"""What ``icechunk._icechunk_python`` names, for code that imports Icechunk's native
module directly (``floe.install_as_icechunk()`` registers this module under that
name).

Icechunk's native module holds every class of its API. floe writes some of them in
Python (the configuration sections, the storage settings and credentials, the
exception tree, ``ChunkType``, ...), so this module offers floe's native module
(``floe._floe``) together with those: one place for each name, nothing redefined.
"""

from floe import *  # noqa: F401,F403  (every public name of the package)
from floe import __all__ as _package_names

# The native classes and functions. This also replaces the package's Repository and
# Session (imported just above) with the native ones of those names; mypy reports
# the replacement.
from floe._floe import *  # type: ignore[assignment]  # noqa: F401,F403
from floe._floe import _all_error_kinds  # noqa: F401
from floe.config import *  # noqa: F401,F403
from floe.config import __all__ as _config_names

__all__ = sorted(set(_package_names) | set(_config_names) | {"_all_error_kinds"})
