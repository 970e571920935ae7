"""Virtual chunk containers, as Icechunk's ``icechunk.virtual``: ``VirtualChunkContainer``
(a url prefix and the ``ObjectStoreConfig`` its objects are read through), held by a
``RepositoryConfig``. Defined in ``floe.config``, with the configuration it belongs to.
"""

from floe.config import VirtualChunkContainer

__all__ = ["VirtualChunkContainer"]
