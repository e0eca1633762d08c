"""Tests of viboost.boosting.histogram: the slots of the node histograms."""

from __future__ import annotations

import numpy as np

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
