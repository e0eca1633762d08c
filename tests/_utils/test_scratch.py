"""Tests for viboost._utils.scratch (the reusable temporaries of a tree's growth)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from viboost._utils.scratch import ALIGNMENT, ScratchArrays, aligned_empty
from viboost.boosting.histogram import node_histograms


def test_take_reuses_the_smallest_free_buffer_that_fits() -> None:
    scratch = ScratchArrays()
    big, small = scratch.take((100, 3)), scratch.take((10,))
    assert big.shape == (100, 3) and small.shape == (10,)
    assert not np.shares_memory(big, small)
    scratch.give(big, small)
    again = scratch.take((8,))
    assert np.shares_memory(again, small) and not np.shares_memory(again, big)
    ints = scratch.take((50,), np.int64)  # on the big buffer, as 8-byte integers
    assert ints.dtype == np.int64 and np.shares_memory(ints, big)
    ints[:] = np.arange(50)
    assert ints[-1] == 49
    fresh = scratch.take((400,))  # nothing free is large enough
    assert not np.shares_memory(fresh, big) and not np.shares_memory(fresh, again)


def test_every_array_starts_on_a_cache_line() -> None:
    # The histograms' 4-lane slots must not straddle cache lines: new and reused buffers, of
    # every dtype, start on a 64-byte boundary, and a reused buffer still holds what it must.
    scratch = ScratchArrays()
    taken = [scratch.take((n, 3)) for n in (1, 7, 1000, 40_000)]
    taken += [scratch.take((999,), np.int64), scratch.take((12_345,), np.uint8)]
    for array in taken:
        assert array.ctypes.data % ALIGNMENT == 0 and array.flags.c_contiguous
    scratch.give(*taken)
    for n in (40_000 * 3, 1, 3 * 1000 + 1, 12_345 * 2):
        array = scratch.take((n,))
        assert array.ctypes.data % ALIGNMENT == 0 and array.shape == (n,)
        array[:] = 1.0  # the whole of it is writable memory of the buffer
        scratch.give(array)
    # Arrays dropped without being given back free their buffers; new buffers (which may reuse
    # their ids) and buffers of another pool given to this one start aligned too.
    for _ in range(3):
        dropped = [scratch.take((n,)) for n in (5, 50, 500, 5000)]
        del dropped
        fresh = scratch.take((70_000,))
        assert fresh.ctypes.data % ALIGNMENT == 0
        scratch.give(fresh)
    other = ScratchArrays().take((3_333,))
    scratch.give(other)
    again = scratch.take((3_333,))
    assert again.ctypes.data % ALIGNMENT == 0 and np.shares_memory(again, other)
    for shape, dtype in (((3, 5), np.float64), (17, np.uint8), ((2, 2, 2), np.int64)):
        array = aligned_empty(shape, dtype)
        assert array.ctypes.data % ALIGNMENT == 0
        assert array.shape == np.empty(shape).shape and array.dtype == dtype
        assert array.flags.c_contiguous and array.flags.writeable


def test_held_arrays_come_back_at_reclaim_only() -> None:
    scratch = ScratchArrays()
    held = scratch.take((20,), hold=True)
    other = scratch.take((20,))
    assert not np.shares_memory(held, other)  # still held
    scratch.reclaim()
    assert np.shares_memory(scratch.take((20,)), held)


def test_bad_use_is_refused() -> None:
    scratch = ScratchArrays()
    with pytest.raises(ValueError, match="8-byte"):
        scratch.take((3,), np.float32)
    array = scratch.take((3,))
    scratch.give(array)
    with pytest.raises(ValueError, match="given back already"):
        scratch.give(array)
    with pytest.raises(ValueError, match="from take"):
        scratch.give(np.zeros(3, dtype=np.int32))
    scratch.give(None)  # skipped


@pytest.mark.parametrize("rows_per_node", [100, 40_000])  # one chunk per node, or several
def test_node_histograms_are_the_same_from_scratch(rows_per_node: int) -> None:
    rng = np.random.default_rng(0)
    n, d, n_nodes = 2 * rows_per_node, 3, 2
    binned = rng.integers(0, 4, size=(n, d)).astype(np.uint8)
    rows = rng.permutation(n).astype(np.int64)
    stats = rng.random((n, 3))
    starts = np.array([0, rows_per_node])
    stops = starts + rows_per_node
    expected = np.zeros((n_nodes, d, 5, 3))  # a reference written here: slot = bin
    for r in range(n_nodes):
        for k in range(starts[r], stops[r]):
            for j in range(d):
                expected[r, j, binned[rows[k], j]] += stats[k]
    scratch = ScratchArrays()
    dirty = scratch.take((4 * n * 3,))
    dirty[:] = np.nan  # the pool hands out memory with any values in it
    scratch.give(dirty)
    for pool in (None, scratch):
        got = node_histograms(binned, rows, starts, stops, stats, 5, scratch=pool)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)
        # Into a caller's array (dirty, and a slice of a larger one): the same sums, there.
        out = np.full((n_nodes + 1, d, 5, 3), np.nan)[:n_nodes]
        put = node_histograms(binned, rows, starts, stops, stats, 5, scratch=pool, out=out)
        assert put is out
        np.testing.assert_array_equal(out, got)
    with pytest.raises(ValueError, match="out must be C-contiguous float64 of shape"):
        node_histograms(binned, rows, starts, stops, stats, 5, out=np.zeros((n_nodes, d, 4, 3)))
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        out = np.zeros((n_nodes, d, 5, 6))[..., ::2]
        node_histograms(binned, rows, starts, stops, stats, 5, out=out)


def test_a_grown_partition_gives_its_arrays_back() -> None:
    """Stacked partitions on a pool: release() returns the statistics (both sides) and the
    partition's decisions, and the shared rows (both sides) come back once every partition
    has released them."""
    from viboost.boosting.growth import Expansion
    from viboost.boosting.partition import RowPartition, expand_together

    rng = np.random.default_rng(0)
    n = 2_000
    binned = rng.integers(0, 8, size=(n, 2)).astype(np.uint8)
    scratch = ScratchArrays()
    rows = [np.arange(0, 1_000), np.arange(1_000, n)]
    stats = scratch.take((n, 3))  # stacked() takes the statistics over
    stats[:] = rng.random((n, 3))
    parts = RowPartition.stacked(binned, rows, stats, 9, scratch=scratch)
    split = [Expansion(0, 1, 2, 0, 4, False, True)]
    expand_together(parts, [split, split])  # the children land on the buffers' side
    left, right = parts[0].node_rows(1), parts[0].node_rows(2)
    assert left.size + right.size == 1_000
    assert np.all(binned[left, 0] < 4) and np.all(binned[right, 0] >= 4)
    scratch.reclaim()
    n_free = len(scratch._free)
    parts[0].release()  # the statistics (both sides) and the partition's decisions
    assert len(scratch._free) == n_free + 3
    parts[0].release_rows()
    assert len(scratch._free) == n_free + 3  # the second partition still reads the rows
    parts[1].release_rows()
    assert len(scratch._free) == n_free + 5  # the rows of both sides
    with pytest.raises(RuntimeError, match="released"):
        parts[1].node_rows(1)


@pytest.mark.parametrize("out_of_band", [False, True])
def test_a_pickled_partition_releases_without_its_pool(out_of_band: bool) -> None:
    """A grown partition pickled (as dask moves a block's trees to another worker: pickle
    protocol 5, its arrays in band or out of band) releases its copy's arrays without a pool
    (they are the pickle's memory; giving them to one raised AttributeError), and the original
    still gives its own back to its pool."""
    from viboost.boosting.growth import Expansion
    from viboost.boosting.partition import RowPartition, expand_together

    rng = np.random.default_rng(1)
    n = 600
    binned = rng.integers(0, 8, size=(n, 2)).astype(np.uint8)
    scratch = ScratchArrays()
    stats = scratch.take((n, 3))
    stats[:] = rng.random((n, 3))
    parts = RowPartition.stacked(binned, [np.arange(300), np.arange(300, n)], stats, 9,
                                 scratch=scratch)  # fmt: skip
    split = [Expansion(0, 1, 2, 0, 4, False, True)]
    expand_together(parts, [split, split])
    if out_of_band:
        buffers: list = []
        data = pickle.dumps(parts, protocol=5, buffer_callback=buffers.append)
        copy = pickle.loads(data, buffers=[b.raw() for b in buffers])
    else:
        copy = pickle.loads(pickle.dumps(parts, protocol=5))
    for got, want in zip(copy, parts, strict=True):
        np.testing.assert_array_equal(got.node_rows(1), want.node_rows(1))
    scratch.reclaim()
    n_free = len(scratch._free)
    for part in copy:
        part.release()
    for part in copy:
        part.release_rows()
    assert len(scratch._free) == n_free  # nothing of the copy's went to the original pool
    for part in parts:
        part.release()
    for part in parts:
        part.release_rows()
    assert len(scratch._free) == n_free + 5  # statistics, buffers, decisions, rows (both sides)


def test_byte_arrays_share_the_pool() -> None:
    """take() hands out uint8 arrays (the partition's decisions) on the same 8-byte buffers:
    a buffer given back serves a later array of either kind, and no other item size is
    taken."""
    scratch = ScratchArrays()
    decisions = scratch.take((13,), np.uint8)
    assert decisions.shape == (13,) and decisions.dtype == np.uint8
    decisions[:] = 7  # every item is writable
    scratch.give(decisions)
    again = scratch.take((1,))
    assert np.shares_memory(decisions, again)
    with pytest.raises(ValueError, match="8-byte or 1-byte"):
        scratch.take((4,), np.int32)


def test_a_pool_is_pickled_empty():
    """Its buffers stay behind: the copy hands out new memory."""
    scratch = ScratchArrays()
    a = scratch.take((1000, 3))
    scratch.give(a)
    copy = pickle.loads(pickle.dumps(scratch))
    assert len(pickle.dumps(scratch)) < 200
    b = copy.take((1000, 3))
    assert not np.shares_memory(a, b) and b.shape == (1000, 3)
    assert np.shares_memory(scratch.take((10, 3)), a)
