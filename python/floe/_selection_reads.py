"""Reads of one chunk by a selection that is not a box (integer arrays, masks,
stepped slices): the regions of the chunk to read, and the selection shifted onto
them.

zarr-python reads an orthogonal, coordinate (``vindex``), mask or stepped selection
chunk by chunk: each chunk of the batch comes with a ``chunk_selection`` (per axis a
slice, an integer, an integer array or a boolean array; integer arrays already
broadcast against each other, ``np.ix_``-style for orthogonal selections) and zarr
assigns ``out[out_selection] = chunk[chunk_selection]``. ``plan`` finds the bounding
box of the selected elements in the chunk and, for a sharded array, the inner chunks
of that box the selection touches: the codec pipeline reads only those regions (in
Rust, with partial shard reads) into a buffer of the box, then applies the shifted
selection to it with numpy, so the values are numpy's (and zarr's) by construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: (box start, box stop, selection shifted onto the box, regions to read)
Plan = tuple[list[int], list[int], tuple[Any, ...], list[tuple[list[int], list[int]]]]


def plan(chunk_selection: tuple[Any, ...], chunk_shape: list[int], block: list[int]) -> Plan | None:
    """How to read ``chunk_selection`` of a chunk of ``chunk_shape`` elements whose
    reads are whole blocks of ``block`` elements (the inner chunk shape of a sharded
    array, else the chunk shape): ``(lo, hi, shifted, regions)`` where ``[lo, hi)``
    is the bounding box of the selected elements (chunk coordinates), ``shifted``
    selects from a buffer of that box what ``chunk_selection`` selects from the
    chunk, and ``regions`` are the ``(start, stop)`` boxes, relative to ``lo``, that
    cover every selected element (each a run of touched blocks). ``None`` when the
    selection selects nothing.

    :raises ValueError: a selection this does not know (an index out of the chunk, a
        negative step, an object it cannot classify): the caller uses zarr's path.
    """
    nd = len(chunk_shape)
    if len(chunk_selection) != nd or len(block) != nd:
        raise ValueError("rank")
    lo: list[int] = []
    hi: list[int] = []
    shifted: list[Any] = []
    # Per axis, the selection in block space (block indices relative to the box's
    # first block), with the same indexing semantics as the element selection.
    blocks: list[Any] = []
    for s, n, q in zip(chunk_selection, chunk_shape, block, strict=True):
        if q <= 0:
            raise ValueError("block")
        if type(s) is slice:
            start, stop, step = s.indices(n)
            if step <= 0:
                raise ValueError("step")
            if start >= stop:
                return None
            a, b = start, start + (stop - 1 - start) // step * step + 1
            shifted.append(slice(0, b - a, step))
            blocks.append(slice(None))
        elif isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            a = int(s)
            if not 0 <= a < n:
                raise ValueError("index")
            b = a + 1
            shifted.append(0)
            blocks.append(0)
        elif isinstance(s, np.ndarray) and s.dtype == np.bool_:
            if s.shape != (n,):
                raise ValueError("mask")
            nz = np.flatnonzero(s)
            if nz.size == 0:
                return None
            a, b = int(nz[0]), int(nz[-1]) + 1
            shifted.append(s[a:b])
            # A 1-d boolean index is its nonzero() integer array.
            blocks.append(nz // q - a // q)
        elif isinstance(s, np.ndarray) and s.dtype.kind in "iu":
            if s.size == 0:
                return None
            a, b = int(s.min()), int(s.max()) + 1
            if a < 0 or b > n:
                raise ValueError("index")
            shifted.append(s - a)
            blocks.append(s // q - a // q)
        else:
            raise ValueError("selector")
        lo.append(a)
        hi.append(b)
    first = [a // q for a, q in zip(lo, block, strict=True)]
    counts = [(b - 1) // q - f + 1 for b, q, f in zip(hi, block, first, strict=True)]
    touched = np.zeros(counts, dtype=bool)
    touched[tuple(blocks)] = True
    return lo, hi, tuple(shifted), _regions(touched, lo, hi, block, first)


def _regions(
    touched: np.ndarray, lo: list[int], hi: list[int], block: list[int], first: list[int]
) -> list[tuple[list[int], list[int]]]:
    """The boxes (relative to ``lo``) covering the touched blocks: the whole box when
    every block is touched, else runs of touched blocks along the last axis."""
    nd = len(lo)

    def box(start_block: list[int], stop_block: list[int]) -> tuple[list[int], list[int]]:
        a = [max(lo[d], (first[d] + start_block[d]) * block[d]) - lo[d] for d in range(nd)]
        b = [min(hi[d], (first[d] + stop_block[d]) * block[d]) - lo[d] for d in range(nd)]
        return a, b

    if touched.all():
        return [box([0] * nd, list(touched.shape))]
    out = []
    last = touched.shape[-1]
    for head in np.ndindex(*touched.shape[:-1]):
        row = touched[head]
        j = 0
        while j < last:
            if not row[j]:
                j += 1
                continue
            k = j
            while k < last and row[k]:
                k += 1
            out.append(box([*head, j], [*(h + 1 for h in head), k]))
            j = k
    return out
