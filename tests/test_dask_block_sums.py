"""Tests of viboost.dask.block_sums: the blocks' histograms added in their tree order, in parts.

The oracle is the pairwise sum written out in the test (blocks added in pairs level by level, an
odd block out carried up): whatever blocks each worker holds and adds itself, the client's
total must be that sum, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from viboost.dask.block_sums import held_sums, normalised, scaled_histogram, tree_sum


def _pairwise(parts):
    level = list(parts)
    while len(level) > 1:
        level = [
            level[i] + level[i + 1] if i + 1 < len(level) else level[i]
            for i in range(0, len(level), 2)
        ]
    return level[0]


def _bits(array):
    return np.ascontiguousarray(array).view(np.int64)


@pytest.mark.parametrize("seed", range(8))
def test_workers_adding_their_own_blocks_give_the_sum_of_the_pairs_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n_blocks = int(rng.integers(1, 12))
    hists = [
        rng.standard_normal((3, 5, 3)) * np.exp(rng.normal(0.0, 15.0)) for _ in range(n_blocks)
    ]
    want = _pairwise(hists)
    # Any assignment of the blocks to workers: runs, or scattered at random.
    n_workers = int(rng.integers(1, n_blocks + 1))
    for owner in (
        np.sort(rng.integers(n_workers, size=n_blocks)),
        rng.integers(n_workers, size=n_blocks),
    ):
        nodes = {}
        for worker in range(n_workers):
            mine = {b: hists[b] for b in np.flatnonzero(owner == worker).tolist()}
            held = held_sums(mine, n_blocks)
            covered = sorted(b for lo, end in held for b in range(lo, end))
            assert covered == sorted(mine)  # each block in exactly one of its sums
            nodes.update(held)
        got = tree_sum(nodes, n_blocks)
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_blocks_in_runs_send_one_sum_per_run_of_a_power_of_two():
    hists = {b: np.full((1, 1, 3), float(b)) for b in range(8)}
    held = held_sums({b: hists[b] for b in (0, 1, 2, 3)}, 8)
    assert list(held) == [(0, 4)]
    held = held_sums({b: hists[b] for b in (2, 3, 4)}, 8)
    assert sorted(held) == [(2, 4), (4, 5)]
    # A last, shorter node: blocks 4 and 5 of 6 fill the node of blocks 4 to 7.
    assert list(held_sums({4: hists[4], 5: hists[5]}, 6)) == [(4, 6)]


def test_the_arrays_given_are_not_changed_and_missing_blocks_are_an_error():
    a, b = np.ones((2, 3)), np.full((2, 3), 2.0)
    total = tree_sum({(0, 1): a, (1, 2): b}, 2)
    np.testing.assert_array_equal(total, 3.0)
    np.testing.assert_array_equal(a, 1.0)
    assert tree_sum({(0, 1): a}, 1) is a
    with pytest.raises(ValueError, match="no sum covers block 1"):
        tree_sum({(0, 1): a}, 2)
    with pytest.raises(ValueError, match="at least one block"):
        tree_sum({}, 0)
    with pytest.raises(ValueError, match=r"block indices must lie in \[0, 2\)"):
        held_sums({2: a}, 2)


def test_scaling_and_normalising_touch_the_two_statistics_only():
    rng = np.random.default_rng(3)
    hist = rng.standard_normal((4, 6, 3))
    view = np.asfortranarray(hist)[:, ::-1, :]  # any layout
    for factor in (0.0, 1.0, 0.37):
        got = scaled_histogram(view, factor)
        assert got.flags.c_contiguous
        want = np.array(view)
        want[..., :2] = view[..., :2] * factor if factor > 0.0 else 0.0
        np.testing.assert_array_equal(_bits(got), _bits(want))
    got = normalised(view, 3.5)
    want = np.array(view)
    want[..., :2] /= 3.5
    np.testing.assert_array_equal(_bits(got), _bits(want))
    np.testing.assert_array_equal(scaled_histogram(view, 1.0), view)  # the input is unchanged
    with pytest.raises(ValueError, match="last axis holds 3 sums"):
        scaled_histogram(np.ones((2, 2)), 1.0)
