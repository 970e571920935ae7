"""Where repositories live, as Icechunk's ``icechunk.storage``: ``Storage`` and its
constructors for the local filesystem, memory and S3 (or S3-compatible) buckets.

A ``Storage`` pickles as its URL (no credentials: the receiving process reads its own
environment); in-memory storage lives in one process and does not pickle.
"""

from floe._floe import Storage, in_memory_storage, local_filesystem_storage, s3_storage

__all__ = ["Storage", "in_memory_storage", "local_filesystem_storage", "s3_storage"]
