"""Tests of viboost.boosting.histogram: the slots of the node histograms."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.histogram import HISTOGRAM_SLOTS, histogram_slots, node_histograms


def test_histogram_slots_hold_every_bin_and_the_missing_one_in_an_odd_count():
    for n_bins in range(1, 256):
        n_slots = histogram_slots(n_bins)
        assert n_slots in (n_bins + 1, n_bins + 2) and n_slots % 2 == 1
    assert HISTOGRAM_SLOTS == 257


def test_padded_slots_give_the_same_sums_as_one_slot_per_bin():
    # Sparse bins (most rows in bin 0, some missing): the padding slot stays empty, the missing
    # values move to the last slot, and every other sum is bit for bit the same.
    rng = np.random.default_rng(3)
    n, d = 5000, 7
    binned = np.where(rng.random((n, d)) < 0.8, 0, rng.integers(1, 255, (n, d))).astype(np.uint8)
    binned[rng.random((n, d)) < 0.05] = 255  # missing
    rows = np.sort(rng.choice(n, 3000, replace=False)).astype(np.int64)
    stats = rng.standard_normal((rows.size, 3))
    starts, stops = np.array([0, 1000]), np.array([1000, 3000])
    plain = node_histograms(binned, rows, starts, stops, stats, n_slots=256)
    padded = node_histograms(binned, rows, starts, stops, stats, n_slots=257)
    np.testing.assert_array_equal(padded[:, :, :255], plain[:, :, :255])
    np.testing.assert_array_equal(padded[:, :, 256], plain[:, :, 255])
    assert not padded[:, :, 255].any()
    # Against sums written here: node 1, feature 2, the missing values and bin 0.
    picked = rows[1000:3000]
    for code, slot in ((255, 256), (0, 0)):
        mask = binned[picked, 2] == code
        np.testing.assert_allclose(padded[1, 2, slot], stats[1000:3000][mask].sum(0), rtol=1e-12)


def _reference_histograms(binned, rows, starts, stops, stats, n_slots, counted):
    """Each node's sums written here: ``np.add.at`` adds the rows one by one in their order,
    as a single chunk of the kernel does."""
    out = np.zeros((len(starts), binned.shape[1], n_slots, 3))
    for r, (lo, hi) in enumerate(zip(starts, stops, strict=True)):
        slots = binned[rows[lo:hi]].astype(np.int64)
        slots[slots == 255] = n_slots - 1
        for j in range(binned.shape[1]):
            for t in range(3 if counted else 2):
                np.add.at(out[r, j, :, t], slots[:, j], stats[lo:hi, t])
    return out


@pytest.mark.parametrize("counted", [True, False])
@pytest.mark.parametrize("by_columns", [True, False])
def test_four_lane_and_scalar_additions_give_the_sums_of_a_reference(counted, by_columns):
    # A chunk of at least 4 rows a slot adds each row's statistics in one 4-lane operation,
    # a smaller one slot by slot: the same node with 51 slots (600 rows: 4-lane) and with 255
    # (scalar) must give bit for bit the sums of np.add.at in row order, for a dense node
    # (read row by row) and a sparse one (by columns when given), counts or not.
    rng = np.random.default_rng(11)
    n, d = 6000, 9
    binned = np.where(rng.random((n, d)) < 0.6, 0, rng.integers(1, 50, (n, d))).astype(np.uint8)
    binned[rng.random((n, d)) < 0.03] = 255  # missing
    dense = np.sort(rng.choice(n, 2400, replace=False))  # 40% of the rows
    sparse = np.sort(rng.choice(n, 600, replace=False))  # 10%
    small = np.sort(rng.choice(n, 30, replace=False))  # scalar at any slot count
    rows = np.concatenate([dense, sparse, small]).astype(np.int64)
    starts, stops = np.array([0, 2400, 3000]), np.array([2400, 3000, 3030])
    stats = rng.standard_normal((rows.size, 3))
    stats[rng.random(rows.size) < 0.1, 0] = -0.0
    columns = np.ascontiguousarray(binned.T) if by_columns else None
    for n_slots in (51, 255):
        got = node_histograms(
            binned, rows, starts, stops, stats, n_slots=n_slots, columns=columns, counted=counted
        )
        want = _reference_histograms(binned, rows, starts, stops, stats, n_slots, counted)
        np.testing.assert_array_equal(got, want)
        assert not (np.signbit(got) & (got == 0)).any()  # sums start at +0: never -0.0
