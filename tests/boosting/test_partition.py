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
