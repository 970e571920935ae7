"""Checks of the tuning arguments Icechunk 2.3.0's maintenance calls take
(``garbage_collect``, ``chunk_storage_stats``, ``total_chunks_storage``): a value
Icechunk refuses raises the same exception type here, so Icechunk code behaves the
same on floe."""

from __future__ import annotations

import operator
from typing import Any

U16 = 2**16 - 1
"""The largest value of Icechunk's 16-bit arguments (``max_concurrent_deletes``...)."""
USIZE = 2**64 - 1
"""The largest value of Icechunk's byte budgets (``max_*_mem_bytes``)."""


def positive(name: str, value: Any, largest: int) -> int:
    """``value`` as an int in ``1..=largest``.

    :raises TypeError: not an integer (``bool`` included, as Icechunk's conversion).
    :raises ValueError: 0 (Icechunk's "invalid zero value").
    :raises OverflowError: below 0 or above ``largest``.

    ```python
    from floe._tuning import U16, positive

    assert positive("max_concurrent_deletes", 8, U16) == 8
    ```
    """
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an integer, got a bool")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}") from None
    if n < 0:
        raise OverflowError(f"{name}: {n} is too small (at least 1)")
    if n == 0:
        raise ValueError(f"{name}: invalid zero value (at least 1)")
    if n > largest:
        raise OverflowError(f"{name}: {n} is too large (at most {largest})")
    return n


def memory_budgets(
    max_snapshots_in_memory: object,
    max_compressed_manifest_mem_bytes: object,
    max_decoded_manifest_mem_bytes: object,
) -> None:
    """Checks Icechunk's memory arguments, which floe accepts and does not need: it
    bounds a collection's memory by its own limits (the retained chunk ids held at
    once, 4 Mi; the objects of ``chunks/`` listed ahead of the manifest reads, 2**18).

    :raises TypeError, ValueError, OverflowError: as :func:`positive`.
    """
    positive("max_snapshots_in_memory", max_snapshots_in_memory, U16)
    positive("max_compressed_manifest_mem_bytes", max_compressed_manifest_mem_bytes, USIZE)
    positive("max_decoded_manifest_mem_bytes", max_decoded_manifest_mem_bytes, USIZE)
