"""The read plan of a chunk selection that is not a box (``floe._selection_reads``):
reading only its regions into a buffer of its box and applying its shifted selection
gives numpy's ``chunk[selection]``, and only blocks the selection touches are read."""

import numpy as np
import pytest

from floe._selection_reads import plan


def _read_by_plan(chunk, selection, block):
    """``chunk[selection]`` computed from the plan: the regions copied into a buffer
    of the box (the rest of it stays poisoned), then the shifted selection; and the
    set of blocks the regions cover."""
    planned = plan(selection, list(chunk.shape), block)
    if planned is None:
        return None, set()
    lo, hi, shifted, regions = planned
    buf = np.full([b - a for a, b in zip(lo, hi)], -(10**6), dtype=chunk.dtype)
    covered = set()
    for a, b in regions:
        src = tuple(slice(l + x, l + y) for l, x, y in zip(lo, a, b))
        buf[tuple(slice(x, y) for x, y in zip(a, b))] = chunk[src]
        for idx in np.ndindex(*[y - x for x, y in zip(a, b)]):
            covered.add(tuple((l + x + i) // q for l, x, i, q in zip(lo, a, idx, block)))
    return buf[shifted], covered


def _touched_blocks(chunk_shape, selection, block):
    """The blocks holding an element ``selection`` selects (by selecting from an
    array of element positions)."""
    pos = np.stack(np.meshgrid(*[np.arange(n) for n in chunk_shape], indexing="ij"), -1)
    picked = pos[selection].reshape(-1, len(chunk_shape))
    return {tuple(int(p) // q for p, q in zip(row, block)) for row in picked}


CASES = [
    ((np.array([7]), slice(0, 64, 1)), 1),
    (np.ix_(np.array([7, 200]), np.array([1, 40])), 2),
    ((np.array([7, 200, 100]), np.array([1, 2, 40])), 3),
    ((5, np.array([1, 40, 63])), 1),
    ((slice(0, 100, 7), 3), 1),
]


@pytest.mark.parametrize("selection,regions", CASES)
def test_known_selections_read_few_regions(selection, regions):
    chunk = np.arange(256 * 64).reshape(256, 64)
    got, covered = _read_by_plan(chunk, selection, [32, 32])
    np.testing.assert_array_equal(got, chunk[selection])
    assert len(plan(selection, [256, 64], [32, 32])[3]) == regions


def test_selections_of_nothing_plan_nothing():
    assert plan((slice(10, 10, 1), 3), [256, 64], [32, 32]) is None
    assert plan((np.array([], dtype=np.intp), slice(None)), [256, 64], [32, 32]) is None
    assert plan((np.zeros(256, dtype=bool), slice(None)), [256, 64], [32, 32]) is None


@pytest.mark.parametrize(
    "selection",
    [(np.array([256]), slice(None)), (np.array([-1]), slice(None)), (slice(0, 9, -1), 0),
     (np.zeros(3, dtype=bool), slice(None)), ("a", 0), (1.5, 0), (0,)],
)
def test_unknown_selections_are_refused(selection):
    with pytest.raises(ValueError):
        plan(selection, [256, 64], [32, 32])


def test_random_selections_match_numpy_and_read_only_touched_blocks():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(400):
        nd = int(rng.integers(1, 4))
        shape = [int(x) for x in rng.integers(1, 14, nd)]
        block = [int(rng.integers(1, n + 1)) for n in shape]
        kinds = rng.integers(0, 4, nd)
        if (kinds == 3).sum() > 1 or ((kinds == 3).any() and (kinds == 2).any()):
            continue  # boolean arrays broadcast only alone
        selection = []
        for kind, n in zip(kinds, shape):
            if kind == 0:
                a = int(rng.integers(0, n))
                selection.append(slice(a, int(rng.integers(a, n + 1)), int(rng.integers(1, 4))))
            elif kind == 1:
                selection.append(int(rng.integers(0, n)))
            elif kind == 2:
                selection.append(rng.integers(0, n, 4))
            else:
                selection.append(rng.random(n) < 0.3)
        selection = tuple(selection)
        chunk = rng.integers(0, 1000, shape)
        got, covered = _read_by_plan(chunk, selection, block)
        want = chunk[selection]
        if got is None:
            assert want.size == 0
            continue
        np.testing.assert_array_equal(got, want)
        touched = _touched_blocks(shape, selection, block)
        # Every touched block is read; stepped slices may read the blocks between.
        assert touched <= covered
        if not any(type(s) is slice and s.step != 1 for s in selection):
            assert covered == touched
        checked += 1
    assert checked > 200
