"""Tests of viboost.boosting.histogram: the slots of the node histograms, the sparse features."""

from __future__ import annotations

import numpy as np
import pytest

from viboost._utils.scratch import ScratchArrays
from viboost.boosting.histogram import (
    HISTOGRAM_SLOTS,
    histogram_slots,
    node_histograms,
    sparse_bins,
)


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
def test_four_lane_and_scalar_additions_give_the_sums_of_a_reference(counted):
    # A chunk of at least 4 rows a slot adds each row's statistics in one 4-lane operation,
    # a smaller one slot by slot: the same node with 51 slots (600 rows: 4-lane) and with 255
    # (scalar) must give bit for bit the sums of np.add.at in row order, for a dense node and
    # sparse ones (their rows ahead prefetched), counts or not.
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
    for n_slots in (51, 255):
        got = node_histograms(binned, rows, starts, stops, stats, n_slots=n_slots, counted=counted)
        want = _reference_histograms(binned, rows, starts, stops, stats, n_slots, counted)
        np.testing.assert_array_equal(got, want)
        assert not (np.signbit(got) & (got == 0)).any()  # sums start at +0: never -0.0


def _sparse_problem(n=6_000, d=8, seed=11):
    """Bins with every kind of feature: mostly 0 (one-hot like), mostly one nonzero bin, mostly
    missing, dense; rows' statistics of any sign."""
    rng = np.random.default_rng(seed)
    binned = rng.integers(0, 40, size=(n, d)).astype(np.uint8)  # dense
    binned[:, 0] = rng.random(n) < 0.25  # binary, mostly 0
    binned[:, 1] = np.where(rng.random(n) < 0.7, 7, rng.integers(0, 20, n))  # mostly bin 7
    binned[:, 2] = np.where(rng.random(n) < 0.6, 255, rng.integers(0, 5, n))  # mostly missing
    binned[:, 5] = np.where(rng.random(n) < 0.9, 0, 3)
    return binned, rng


def test_sparse_bins_keep_each_rows_bins_other_than_the_commonest():
    binned, _ = _sparse_problem()
    layout = sparse_bins(binned)
    assert layout.sparse.tolist() == [0, 1, 2, 5]
    assert layout.common_bins.tolist() == [0, 7, 255, 0]
    assert layout.dense.tolist() == [3, 4, 6, 7]
    assert layout.n_features == binned.shape[1]
    for i in (0, 17, 5_999):  # a reference written here
        entries = [(j, binned[i, j]) for j, c in zip(layout.sparse, layout.common_bins, strict=True)
                   if binned[i, j] != c]  # fmt: skip
        at = slice(layout.row_starts[i], layout.row_starts[i + 1])
        assert list(zip(layout.entry_features[at], layout.entry_bins[at], strict=True)) == entries
    assert layout.common_slots(257).tolist() == [0, 7, 256, 0]
    assert sparse_bins(binned, min_share=1.1).sparse.size == 0
    # The commonest bin over the active rows only.
    active = binned[:, 1] != 7
    assert 1 not in sparse_bins(binned, active).sparse.tolist()


@pytest.mark.parametrize("counted", [True, False])
@pytest.mark.parametrize("rows_per_node", [150, 40_000])  # one chunk a node, or several
def test_sparse_features_give_the_sums_of_every_bin(counted, rows_per_node):
    binned, rng = _sparse_problem(n=2 * rows_per_node + 500)
    n = binned.shape[0]
    layout = sparse_bins(binned)
    rows = np.sort(rng.choice(n, 2 * rows_per_node, replace=False)).astype(np.int64)
    stats = rng.standard_normal((rows.size, 3))
    stats[:, 2] = rng.integers(1, 4, rows.size)  # integer counts: their sums are exact
    starts = np.array([0, rows_per_node // 3])
    stops = np.array([rows_per_node // 3, 2 * rows_per_node])  # a sparse node, a dense one
    dense = node_histograms(binned, rows, starts, stops, stats, 257, counted=counted)
    got = node_histograms(binned, rows, starts, stops, stats, 257, counted=counted, sparse=layout)
    scale = np.abs(stats).sum()
    np.testing.assert_allclose(got, dense, rtol=0, atol=1e-12 * scale)
    np.testing.assert_array_equal(got[..., 2], dense[..., 2])  # the counts, exactly
    np.testing.assert_array_equal(got[:, layout.dense], dense[:, layout.dense])
    with pytest.raises(ValueError, match="sparse must be sparse_bins of these bins"):
        node_histograms(binned[:-1], rows[:10], [0], [10], stats[:10], 257, sparse=layout)


@pytest.mark.parametrize("counted", [True, False])
@pytest.mark.parametrize("with_sparse", [False, True])
def test_feature_groups_change_no_sum(counted, with_sparse):
    # A call of few chunks may share each chunk's features among the threads. Forced here to
    # 1, 2, 3 and 7 groups (more than some nodes' features), on one thread and on two, for a
    # dense node, sparse ones (4-lane and scalar chunks), a node of several chunks and sparse
    # features: every sum must be bit for bit the one-group sum,
    # and the sums of a reference written here.
    from viboost._utils.parallel import numba_threads
    from viboost.boosting import histogram

    binned, rng = _sparse_problem(n=60_000, d=9, seed=5)
    n = binned.shape[0]
    layout = sparse_bins(binned) if with_sparse else None
    picks = [rng.choice(n, m, replace=False) for m in (20_000, 5_000, 300, 40_000)]
    rows = np.concatenate([np.sort(p) for p in picks]).astype(np.int64)
    bounds = np.cumsum([0] + [p.size for p in picks])
    starts, stops = bounds[:-1], bounds[1:]
    stats = rng.standard_normal((rows.size, 3))

    lay = layout if layout is not None else histogram.SparseBins.all_dense(binned.shape[1])

    def sums(n_groups, threads, nodes):
        # histograms_into with the groups forced and no call kept on one thread for its size.
        node_starts, node_stops = starts[nodes], stops[nodes]
        partial, wide = histogram.histogram_buffers(
            len(nodes), int((node_stops - node_starts).sum()), binned.shape[1], 257,
            ScratchArrays(),
        )  # fmt: skip
        out = np.empty((len(nodes), binned.shape[1], 257, 3))
        with numba_threads(threads) as n_threads:
            return histogram.histograms_into(
                binned, rows, stats, rows, stats, np.zeros(len(nodes), dtype=np.int8),
                node_starts, node_stops, counted, out, partial, wide, lay.dense, lay.row_starts,
                lay.entry_features, lay.entry_bins, lay.sparse, lay.common_slots(257), n_groups,
                0, n_threads,
            ).copy()  # fmt: skip

    for nodes in ([0, 1, 2], [1], [2], [3]):
        want = sums(1, 1, nodes)
        for n_groups in (2, 3, 7):
            for threads in (1, 2):
                np.testing.assert_array_equal(sums(n_groups, threads, nodes), want)
    # Nodes of one chunk each: the reference adds their rows in the same order.
    reference = _reference_histograms(binned, rows, starts[1:3], stops[1:3], stats, 257, counted)
    got = sums(3, 2, [1, 2])
    if with_sparse:  # the commonest bins' sums are totals less the other bins': to rounding
        np.testing.assert_allclose(got, reference, rtol=0, atol=1e-10 * np.abs(stats).sum())
    else:
        np.testing.assert_array_equal(got, reference)


def test_feature_groups_follow_the_threads_for_few_chunks():
    from viboost.boosting import histogram

    binned, _ = _sparse_problem(n=100_000, d=8)
    groups = histogram._feature_groups
    assert sparse_bins(binned).sparse.size > 0
    assert sparse_bins(binned, min_share=1.1).sparse.size == 0  # (then no sparse feature)
    for threads in (2, 3):
        assert groups(True, 1, False, threads) == threads
        assert groups(True, 2 * threads - 1, False, threads) == threads
        assert groups(True, 2 * threads, False, threads) == 1  # the chunks keep threads busy
        assert groups(False, 1, False, threads) == 1  # a call on the calling thread
        assert groups(True, 1, True, threads) == 1  # sparse features
    assert groups(True, 1, False, 1) == 1
