"""Tests of viboost.boosting.partition: each row's leaf read off a grown tree's partition.

(The partitions' splits and histograms are tested through the growths they answer in
test_growth.py and test_trees.py, their pooled arrays in test_scratch.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.binning import FeatureBinner
from viboost.boosting.growth import TreeGrowth
from viboost.boosting.partition import RowPartition, grow, partition_leaf_index
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.trees import HistogramTree


def _problem(seed: int, n: int = 1_200, d: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.05] = np.nan  # missing values: both sides are tried
    y = np.where(np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + X[:, 2] > 0, 1.0, -1.0)
    return X, y


def _partitions(binned, y, settings, seeds):
    """One partition per tree (its own weights, margins and active rows), and the priors."""
    out, priors = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        active = rng.random(y.size) < 0.85
        raw = np.where(active, rng.uniform(0.1, 1.0, y.size), 0.0)
        first, second = settings.statistics(raw / raw.sum(), y, rng.normal(0, 0.5, y.size))
        rows = np.flatnonzero(active)
        out.append(RowPartition(binned, rows, first, second, active.astype(float)))
        priors.append(settings.prior(float(raw.sum())))
    return out, priors


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("max_leaf_nodes", [2, 9])
def test_partition_leaf_index_is_the_leaf_each_row_routes_to(threads, max_leaf_nodes):
    # Independent oracle: every row routed by its bins (HistogramTree.leaf_index). The rows of
    # the partition take their leaf's number from its range (on either side of the partition,
    # after one or several splits), those outside it (inactive) and those of the last split's
    # node (split without moving its rows) are routed.
    from viboost._utils.parallel import numba_threads

    X, y = _problem(7, n=3_000)
    binner = FeatureBinner(max_bins=31).fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(max_leaf_nodes, None, 15, "per-leaf", "newton", 1.0)
    (partition,), (prior,) = _partitions(binned, y, settings, [5])
    growth = TreeGrowth(partition.histogram(), binner.n_bins_, binner.thresholds_, settings, prior)
    grow(growth, partition.expand)
    nodes, _ = growth.tree()
    tree = HistogramTree(nodes, "per-leaf")
    columns = np.ascontiguousarray(binned.T)
    inside = np.zeros(y.size, dtype=bool)
    for node in partition.leaf_ranges():
        inside[partition.node_rows(node)] = True
    outside = np.flatnonzero(~inside)
    assert outside.size > 0
    with numba_threads(threads):
        got = partition_leaf_index(partition, tree, growth.node_positions(), columns, outside)
    np.testing.assert_array_equal(got, tree.leaf_index(columns))
    assert np.unique(got).size == int(nodes["is_leaf"].sum())


def _stacked_growths(n_trees, max_leaf_nodes, min_samples_leaf, with_sparse, seed=3):
    """Stacked partitions of ``n_trees`` trees (each its own rows, weights and margins) over
    bins with missing values, a categorical feature and, ``with_sparse``, sparse features, and
    their growths from the roots."""
    from viboost._utils.scratch import ScratchArrays
    from viboost.boosting.growth import TreeGrowths
    from viboost.boosting.histogram import sparse_bins, transpose_bins
    from viboost.boosting.partition import root_histograms

    rng = np.random.default_rng(seed)
    X, y = _problem(seed, n=6_000, d=6)
    X[:, 4] = np.where(rng.random(y.size) < 0.8, 0.0, X[:, 4])  # mostly one bin: sparse
    X[:, 5] = rng.integers(0, 12, y.size).astype(float)  # a categorical feature's codes
    X[rng.random(y.size) < 0.05, 5] = np.nan
    y = np.where((X[:, 5] % 3 == 0) ^ (np.nan_to_num(X[:, 0]) > 0), 1.0, -1.0)
    y[rng.random(y.size) < 0.3] *= -1  # noise: small leaves still gain (trees of 100+ leaves)
    binner = FeatureBinner(max_bins=63, n_categories=np.array([0, 0, 0, 0, 0, 12])).fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(max_leaf_nodes, None, min_samples_leaf, "per-leaf", "newton", 1.0)
    rows, stats, priors = [], [], []
    for k in range(n_trees):
        tree_rng = np.random.default_rng(seed + 100 * k)
        active = tree_rng.random(y.size) < 0.8
        raw = np.where(active, tree_rng.uniform(0.1, 1.0, y.size), 0.0)
        first, second = settings.statistics(raw / raw.sum(), y, tree_rng.normal(0, 0.5, y.size))
        tree_rows = np.flatnonzero(active)
        rows.append(tree_rows)
        stats.append(
            np.column_stack([first[tree_rows], second[tree_rows], np.ones(tree_rows.size)])
        )
        priors.append(settings.prior(float(raw.sum())))
    scratch = ScratchArrays()
    all_stats = scratch.take((sum(r.size for r in rows), 3))
    all_stats[:] = np.concatenate(stats)
    layout = sparse_bins(binned) if with_sparse else None
    assert not with_sparse or layout.sparse.size > 0
    partitions = RowPartition.stacked(
        binned, rows, all_stats, 65, transpose_bins(binned), scratch, sparse=layout
    )
    roots, _ = root_histograms(partitions, [None] * n_trees)
    growths = TreeGrowths(
        roots, binner.n_bins_, binner.thresholds_, settings, priors,
        is_categorical=binner.is_categorical_,
    )  # fmt: skip
    return partitions, growths, roots, binned


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("n_trees", "max_leaf_nodes", "min_samples_leaf", "with_sparse"),
    [(1, 2, 20, False), (3, 9, 20, False), (4, 31, 5, True), (2, 150, 1, False)],
)
def test_grow_in_place_grows_the_trees_of_the_requests_answered_one_by_one(
    threads, n_trees, max_leaf_nodes, min_samples_leaf, with_sparse
):
    # Oracle: the same growths answered from Python, request by request (TreeGrowths.requests,
    # expand_together, TreeGrowths.expanded). The compiled growth must grow the same trees,
    # bit for bit, and leave the partitions' leaves with the same rows on the same sides. The
    # cases: one tree of one split, folds of small trees, sparse and categorical features with
    # tiny leaves, and trees of up to 150 leaves (their histograms outgrow the first store,
    # which is doubled).
    from viboost._utils.parallel import numba_threads
    from viboost.boosting.partition import expand_together, grow_in_place

    with numba_threads(threads):
        partitions, growths, _, binned = _stacked_growths(
            n_trees, max_leaf_nodes, min_samples_leaf, with_sparse
        )
        while any(requests := growths.requests()):
            growths.expanded(expand_together(partitions, requests))
        want = [growths.tree(t) for t in range(n_trees)]
        want_positions = [growths.node_positions(t) for t in range(n_trees)]

        partitions_here, growths_here, roots, _ = _stacked_growths(
            n_trees, max_leaf_nodes, min_samples_leaf, with_sparse
        )
        assert grow_in_place(partitions_here, growths_here, roots) is growths_here
        assert growths_here.done
    leaves = []
    for t in range(n_trees):
        nodes, error = growths_here.tree(t)
        assert nodes.dtype == want[t][0].dtype
        assert nodes.tobytes() == want[t][0].tobytes()  # (bit for bit: a categorical
        # split's threshold is NaN)
        assert error == want[t][1]
        np.testing.assert_array_equal(growths_here.node_positions(t), want_positions[t])
        assert partitions_here[t].leaf_ranges() == partitions[t].leaf_ranges()
        assert partitions_here[t].sides == partitions[t].sides
        for node in partitions[t].leaf_ranges():
            np.testing.assert_array_equal(
                partitions_here[t].node_rows(node), partitions[t].node_rows(node)
            )
        leaves.append(int(nodes["is_leaf"].sum()))
    if max_leaf_nodes == 150:
        assert max(leaves) > 64  # past the first store's room: it was doubled
    columns = np.ascontiguousarray(binned.T)
    tree = HistogramTree(want[0][0], "per-leaf")
    inside = [partitions_here[0].node_rows(node) for node in partitions_here[0].leaf_ranges()]
    outside = np.setdiff1d(np.arange(binned.shape[0]), np.concatenate(inside))
    got = partition_leaf_index(
        partitions_here[0], tree, growths_here.node_positions(0), columns, outside
    )
    np.testing.assert_array_equal(got, tree.leaf_index(columns))


def test_grow_in_place_answers_one_request_a_tree():
    from viboost.boosting.growth import TreeGrowths
    from viboost.boosting.partition import grow_in_place

    partitions, growths, roots, _ = _stacked_growths(2, 9, 20, False)
    speculative = TreeGrowths(
        roots, growths.n_bins, growths._edges, growths.settings, growths.priors, speculate=3,
        is_categorical=growths.is_categorical,
    )  # fmt: skip
    with pytest.raises(ValueError, match="one request a tree"):
        grow_in_place(partitions, speculative, roots)
    with pytest.raises(ValueError, match="one growth and one root per partition"):
        grow_in_place(partitions[:1], growths, roots)
