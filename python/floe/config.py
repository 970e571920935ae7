"""Repository configuration, as Icechunk's ``icechunk.config``: ``RepositoryConfig``
(inline chunk threshold, compression) and ``CompressionConfig`` (zstd level).

A configuration is passed to ``Repository.create``, read from ``Repository.config``
and stored with ``Repository.save_config``.
"""

from floe._floe import CompressionConfig, RepositoryConfig

__all__ = ["CompressionConfig", "RepositoryConfig"]
