"""Tests of viboost.boosting.growth's TreeGrowths: several trees grown together, each the tree
it would be alone, the state machine's errors, and the speculative requests."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.binning import FeatureBinner
from viboost.boosting.growth import TreeGrowth, TreeGrowths
from viboost.boosting.partition import RowPartition, grow
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


@pytest.mark.parametrize("speculate", [False, 2, True])
@pytest.mark.parametrize(
    "criterion, leaf_weights, max_leaf_nodes, max_depth",
    [("newton", "per-leaf", 12, None), ("smoothed", "per-leaf", 7, 3), ("error", "tied", 9, None)],
)
def test_trees_grown_together_are_the_trees_grown_alone(
    criterion, leaf_weights, max_leaf_nodes, max_depth, speculate
):
    X, y = _problem(0)
    binner = FeatureBinner(max_bins=31).fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(max_leaf_nodes, max_depth, 15, leaf_weights, criterion, 1.0)
    seeds = [1, 2, 3]
    together, priors = _partitions(binned, y, settings, seeds)
    growths = TreeGrowths(
        [p.histogram() for p in together], binner.n_bins_, binner.thresholds_, settings, priors,
        speculate=speculate,
    )  # fmt: skip
    steps = 0
    while any(requests := growths.requests()):
        growths.expanded([p.expand(r) for p, r in zip(together, requests, strict=True)])
        steps += 1
    assert growths.done and steps >= 2
    alone, _ = _partitions(binned, y, settings, seeds)
    for t, (partition, prior) in enumerate(zip(alone, priors, strict=True)):
        growth = TreeGrowth(
            partition.histogram(), binner.n_bins_, binner.thresholds_, settings, prior,
            speculate=speculate,
        )  # fmt: skip
        grow(growth, partition.expand)
        want, want_error = growth.tree()
        got, error = growths.tree(t)
        assert got.dtype == want.dtype and got.shape == want.shape
        for name in want.dtype.names:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        assert error == want_error
        np.testing.assert_array_equal(growths.node_positions(t), growth.node_positions())
        assert int(got["is_leaf"].sum()) <= max_leaf_nodes


def test_a_tree_grown_together_is_its_brute_force_tree():
    """Independent oracle: each tree of a growth of two, against the tree grown by scanning
    every feature and threshold over the rows themselves (Newton's score ``G^2 / (H +
    lambda)``, the best gain first), for two trees whose weights differ."""
    X, y = _problem(4, n=400, d=3)
    X = np.nan_to_num(X)
    binner = FeatureBinner(max_bins=16).fit(X)
    binned = binner.transform(X)
    max_leaves, min_leaf = 5, 10
    settings = TreeSettings(max_leaves, None, min_leaf, "per-leaf", "newton", 1.0)
    partitions, priors = _partitions(binned, y, settings, [5, 6])
    growths = TreeGrowths(
        [p.histogram() for p in partitions], binner.n_bins_, binner.thresholds_, settings, priors
    )
    while any(requests := growths.requests()):
        growths.expanded([p.expand(r) for p, r in zip(partitions, requests, strict=True)])
    for t, partition in enumerate(partitions):
        first, second, lam = partition.first, partition.second, priors[t]

        def score(idx, first=first, second=second, lam=lam):
            g, h = first[idx].sum(), second[idx].sum()
            return g * g / (h + lam)

        def best(idx, score=score):
            top, parent = None, score(idx)
            for j in range(binned.shape[1]):
                for p in range(1, int(binner.n_bins_[j])):
                    left = binned[idx, j] < p
                    if left.sum() < min_leaf or (~left).sum() < min_leaf:
                        continue
                    gain = score(idx[left]) + score(idx[~left]) - parent
                    if top is None or gain > top[0] + 1e-12 * abs(parent):
                        top = (gain, idx[left], idx[~left])
            return top if top is not None and top[0] > 1e-12 * abs(parent) else None

        rows = np.flatnonzero(partition.counts > 0)
        leaves = [(rows, best(rows))]  # in the order they were made (ties: the first)
        while len(leaves) < max_leaves and any(split for _, split in leaves):
            k = max(
                (k for k, (_, split) in enumerate(leaves) if split),
                key=lambda k: leaves[k][1][0],
            )
            _, left, right = leaves.pop(k)[1]
            leaves += [(left, best(left)), (right, best(right))]
        want = sorted(tuple(idx) for idx, _ in leaves)
        nodes, _ = growths.tree(t)
        leaf = HistogramTree(nodes, "per-leaf").leaf_index(np.ascontiguousarray(binned.T))
        got = sorted(tuple(r for r in rows if leaf[r] == k) for k in np.unique(leaf[rows]))
        assert got == want and len(want) > 2


def test_the_state_machine_refuses_misuse():
    X, y = _problem(7, n=300, d=3)
    binner = FeatureBinner(max_bins=8).fit(X)
    settings = TreeSettings(4, None, 5, "per-leaf", "newton", 1.0)
    partitions, priors = _partitions(binner.transform(X), y, settings, [8, 9])
    roots = [p.histogram() for p in partitions]
    with pytest.raises(ValueError, match="one prior per tree"):
        TreeGrowths(roots, binner.n_bins_, binner.thresholds_, settings, priors[:1])
    with pytest.raises(ValueError, match="speculate must be"):
        TreeGrowths(roots, binner.n_bins_, binner.thresholds_, settings, priors, speculate=0)
    growths = TreeGrowths(roots, binner.n_bins_, binner.thresholds_, settings, priors)
    with pytest.raises(RuntimeError, match="not grown yet"):
        growths.tree(0)
    requests = growths.requests()
    assert [len(r) for r in requests] == [1, 1]
    with pytest.raises(RuntimeError, match="not been answered"):
        growths.requests()
    with pytest.raises(ValueError, match="histograms per tree"):
        growths.expanded([partitions[0].expand(requests[0]), []])
    with pytest.raises(ValueError, match="children must hold 4 histograms"):
        growths.expanded(children=np.zeros((3, *roots[0].shape)))
    with pytest.raises(ValueError, match="give the histograms or the children"):
        growths.expanded()


def test_a_speculating_request_splits_the_best_leaves_that_still_need_histograms():
    """With ``speculate=m`` a request splits ``m`` leaves, passing over the leaves split by an
    earlier request (whose children are known), while the tree has room for them: on plenty of
    rows every request but the first two (one leaf, then two) and the last ones is ``m``
    expansions, none of a node asked for before. (Before, a leaf split by an earlier request
    took one of the ``m`` places: requests of one leaf in the middle of the growth.)"""
    X, y = _problem(11, n=20_000, d=6)
    binner = FeatureBinner(max_bins=63).fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(31, None, 5, "per-leaf", "smoothed", 1.0)
    for m in (2, 3):
        (partition,), (prior,) = _partitions(binned, y, settings, [12])
        growth = TreeGrowth(
            partition.histogram(), binner.n_bins_, binner.thresholds_, settings, prior,
            speculate=m,
        )  # fmt: skip
        sizes, asked = [], set()
        while requests := growth.requests():
            assert not asked & {e.node for e in requests}
            asked |= {e.node for e in requests}
            sizes.append(len(requests))
            growth.expanded(partition.expand(requests))
        splits = int(growth.tree()[0]["is_leaf"].sum()) - 1
        assert splits == 30
        # While the tree may still take m more splits, every request holds m of them.
        room = 30
        for k, size in enumerate(sizes):
            if k >= 2 and room > 2 * m:
                assert size == m, (m, sizes)
            room -= size


def test_a_speculating_growth_splits_below_speculative_splits_and_needs_a_trip_a_level():
    """Requests rank the nodes in best-first order (a node by the smaller of its gain and its
    parent's rank), children of speculative splits that the growth has not made yet
    included: on plenty of rows a tree of depth ``d`` then takes about ``d`` requests, with
    few histograms for nothing. (Before, only the children of splits the growth had made
    could be asked for: 15 requests and 44 expansions here, for a tree of depth 9.)"""
    X, y = _problem(11, n=20_000, d=6)
    binner = FeatureBinner(max_bins=63).fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(31, None, 5, "per-leaf", "smoothed", 1.0)
    (partition,), (prior,) = _partitions(binned, y, settings, [12])
    growth = TreeGrowth(
        partition.histogram(), binner.n_bins_, binner.thresholds_, settings, prior, speculate=4
    )
    trips, expansions = 0, 0
    while requests := growth.requests():
        trips += 1
        expansions += len(requests)
        growth.expanded(partition.expand(requests))
    nodes = growth.tree()[0]
    depth = np.zeros(nodes.size, dtype=np.int64)
    for i in np.flatnonzero(~nodes["is_leaf"]):  # parents come before their children
        depth[nodes["left"][i]] = depth[nodes["right"][i]] = depth[i] + 1
    assert int(nodes["is_leaf"].sum()) == 31
    assert trips <= depth.max() + 1, (trips, depth.max())
    assert expansions <= 34, expansions
    # The same tree as one split a request.
    (alone,), _ = _partitions(binned, y, settings, [12])
    reference = TreeGrowth(alone.histogram(), binner.n_bins_, binner.thresholds_, settings, prior)
    grow(reference, alone.expand)
    np.testing.assert_array_equal(nodes, reference.tree()[0])
