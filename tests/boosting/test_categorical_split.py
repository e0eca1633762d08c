"""Categorical splits (issue 53) against independent oracles: the best set of categories
against brute force over every subset, the routing of codes (binned and raw, unseen codes and
NaN to the missing side), old node arrays, TreeSHAP against enumeration of coalitions, and
categorical stumps against brute force."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest

from viboost.boosting.learners import NODE_DTYPE, current_nodes
from viboost.boosting.partition import RowPartition
from viboost.boosting.predictor import predict_ensemble
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.splitting import (
    CRITERIA,
    best_node_split,
    categorical_settings,
    node_score,
    partition_nodes,
)
from viboost.boosting.stumps import BinnedStumpSearch, DecisionStump
from viboost.boosting.tree_search import TreeSearch
from viboost.boosting.tree_shap import interventional_shap, path_dependent_shap
from viboost.boosting.trees import HistogramTree

#: No smoothing, no caps, no one-vs-rest: the scan must find the best of all subsets.
EXHAUSTIVE = categorical_settings(1.0, 0.0, 1.0, 0, 256, 0.0)


def _words(codes) -> np.ndarray:
    words = np.zeros(4, dtype=np.uint64)
    for k in codes:
        words[k // 64] |= np.uint64(1) << np.uint64(k % 64)
    return words


def _in_set(words, k) -> bool:
    return bool((int(words[k // 64]) >> (k % 64)) & 1)


def _random_hist(rng, n_categories, n_slots, criterion, missing, empty):
    """A one-feature node histogram over ``n_categories`` codes, some empty, NaN maybe."""
    hist = np.zeros((1, n_slots, 3))
    for k in range(n_categories):
        if rng.random() < empty:
            continue
        count = float(rng.integers(1, 30))
        if criterion == "newton":
            hist[0, k] = rng.normal() * count / 10, rng.uniform(0.1, 0.3) * count / 10, count
        else:
            hist[0, k] = rng.uniform(0, 1) * count / 10, rng.uniform(0, 1) * count / 10, count
    if missing:
        hist[0, -1] = hist[0, int(rng.integers(n_categories))] + [0.05, 0.03, 2.0]
    return hist


def _brute_force(hist, n_categories, criterion, prior, min_leaf, singletons=False):
    """The best gain over every set of groups (categories with rows, and NaN) sent left."""
    code = CRITERIA[criterion]
    groups = [k for k in range(n_categories) if hist[0, k, 2] > 0]
    if hist[0, -1, 2] > 0:
        groups.append(-1)
    total = hist[0].sum(axis=0)
    parent = node_score(total[0], total[1], code, prior)
    best = -np.inf
    for size in range(1, len(groups)):
        for subset in itertools.combinations(groups, size):
            if singletons and len([g for g in subset if g >= 0]) > 1:
                continue
            left = hist[0, list(subset)].sum(axis=0)
            if left[2] < min_leaf or total[2] - left[2] < min_leaf:
                continue
            right = total - left
            gain = (
                node_score(left[0], left[1], code, prior)
                + node_score(right[0], right[1], code, prior)
                - parent
            )
            best = max(best, gain)
    return best


@pytest.mark.parametrize("criterion", list(CRITERIA))
def test_best_set_is_the_best_of_every_subset(criterion):
    """With no smoothing or caps, the sorted prefix scan finds the best of all 2^K subsets
    (every criterion's node score is convex in the two sums), NaN a group of its own."""
    rng = np.random.default_rng(CRITERIA[criterion])
    code = CRITERIA[criterion]
    for trial in range(60):
        n_categories = int(rng.integers(2, 8))
        hist = _random_hist(rng, n_categories, 9, criterion, trial % 2 == 0, empty=0.2)
        if np.count_nonzero(hist[0, :, 2]) < 2:
            continue
        prior = float(rng.uniform(0.01, 1.0))
        min_leaf = float(rng.choice([1.0, 5.0]))
        gain, j, p, missing_left, la, lb, lc, *words = best_node_split(
            hist, np.array([n_categories]), np.array([True]), code, prior, min_leaf, EXHAUSTIVE
        )
        want = _brute_force(hist, n_categories, criterion, prior, min_leaf)
        if not np.isfinite(want) or want <= 1e-12 * abs(
            node_score(*hist[0].sum(0)[:2], code, prior)
        ):
            assert gain == -np.inf
            continue
        assert j == 0 and p == -1
        np.testing.assert_allclose(gain, want, rtol=1e-9, atol=1e-15)
        # The left sums are those of the set (and NaN when it goes left).
        bits = np.array(words, dtype=np.int64).view(np.uint64)
        left = [k for k in range(n_categories) if hist[0, k, 2] > 0 and _in_set(bits, k)]
        sums = hist[0, left].sum(axis=0)
        if missing_left and hist[0, -1, 2] > 0:
            sums = sums + hist[0, -1]
        np.testing.assert_allclose([la, lb, lc], sums, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("criterion", list(CRITERIA))
def test_few_groups_are_tried_one_against_the_rest(criterion):
    rng = np.random.default_rng(10 + CRITERIA[criterion])
    code = CRITERIA[criterion]
    cat = categorical_settings(1.0, 0.0, 1.0, 4, 32, 0.0)
    for trial in range(30):
        hist = _random_hist(rng, 4, 9, criterion, trial % 2 == 0, empty=0.0)
        hist[0, 3] = 0.0 if trial % 2 == 0 else hist[0, 3]  # at most 4 groups with NaN
        gain, *_ = best_node_split(hist, np.array([4]), np.array([True]), code, 0.1, 1.0, cat)
        want = _brute_force(hist, 4, criterion, 0.1, 1.0, singletons=True)
        if want <= 1e-12 * abs(node_score(*hist[0].sum(0)[:2], code, 0.1)):
            assert gain == -np.inf  # no split gains
            continue
        np.testing.assert_allclose(gain, want, rtol=1e-9, atol=1e-15)


def test_rare_categories_stay_right_and_numeric_features_are_unchanged():
    """Groups of fewer than cat_smooth rows are never in the set; a numeric feature beside a
    categorical one is scored as without it."""
    rng = np.random.default_rng(3)
    hist = _random_hist(rng, 8, 9, "newton", True, empty=0.0)
    hist[0, 2, 2] = 3.0  # rare
    cat = categorical_settings(1.0, 5.0, 1.0, 0, 32, 0.0)
    *_, w0, w1, w2, w3 = best_node_split(hist, np.array([8]), np.array([True]), 0, 0.5, 1.0, cat)
    assert not _in_set(np.array([w0, w1, w2, w3], dtype=np.int64).view(np.uint64), 2)
    numeric = rng.normal(size=(1, 9, 3))
    numeric[..., 2] = 5.0
    both = np.concatenate([numeric, numeric])
    alone = best_node_split(numeric, np.array([8]), np.array([False]), 0, 0.5, 1.0, cat)
    pair = best_node_split(both, np.array([8, 8]), np.array([False, True]), 0, 0.5, 1.0, cat)
    if pair[1] == 0:
        assert pair[:7] == alone[:7] and pair[7:] == (0, 0, 0, 0)


def _categorical_data(rng, n, n_categories=9):
    codes = rng.integers(0, n_categories, size=n).astype(float)
    codes[rng.random(n) < 0.08] = np.nan
    x = rng.normal(size=n)
    effect = rng.normal(size=n_categories) * 1.5
    logit = np.where(np.isnan(codes), 0.8, effect[np.nan_to_num(codes).astype(int)]) + x
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), 1.0, -1.0)
    return np.column_stack([codes, x, rng.integers(0, 3, size=n).astype(float)]), y


@pytest.mark.parametrize("leaf_weights", ["per-leaf", "tied"])
def test_tree_routes_training_bins_as_raw_codes(leaf_weights):
    rng = np.random.default_rng(5)
    X, y = _categorical_data(rng, 2000)
    n_categories = np.array([9, 0, 3])
    search = TreeSearch(
        X, max_leaf_nodes=12, min_samples_leaf=5, leaf_weights=leaf_weights,
        n_categories=n_categories,
    )  # fmt: skip
    tree, _ = search.best(np.full(2000, 1 / 2000), y)
    nodes = tree.nodes
    assert nodes["is_categorical"].any()
    split = nodes["is_categorical"]
    assert np.all(np.isnan(nodes["threshold"][split])) and np.all(nodes["bin_threshold"][split] < 0)
    from_partition = search.leaf_index(tree)
    from_bins = tree.leaf_index(search.binned_columns_)
    np.testing.assert_array_equal(from_partition, from_bins)
    np.testing.assert_array_equal(tree.leaf_values[from_bins], tree.predict(X))
    np.testing.assert_array_equal(tree.binned_outputs(search.binned_columns_), tree.predict(X))


def test_unseen_codes_and_nan_take_the_missing_side():
    for missing_left in (False, True):
        nodes = np.zeros(3, dtype=NODE_DTYPE)
        nodes[0] = (0.0, 0, np.nan, -1, missing_left, 1, 2, False, 1.0, np.nan, True, 0)
        nodes["left_categories"][0] = _words([1, 3, 200])
        nodes[1] = (-1.0, -1, 0.0, 0, False, -1, -1, True, 0.0, np.nan, False, 0)
        nodes[2] = (1.0, -1, 0.0, 0, False, -1, -1, True, 0.0, np.nan, False, 0)
        tree = HistogramTree(nodes)
        X = np.array([[1.0], [3.0], [200.0], [0.0], [2.0], [np.nan], [-1.0], [2.5], [300.0]])
        missing = -1.0 if missing_left else 1.0
        want = [-1, -1, -1, 1, 1, missing, missing, missing, missing]
        np.testing.assert_array_equal(tree.predict(X), want)
        bins = np.array([[1, 3, 200, 0, 2, 255]], dtype=np.uint8)
        np.testing.assert_array_equal(tree.binned_outputs(bins), want[:6])


def test_grown_set_sends_codes_without_rows_to_the_missing_side():
    rng = np.random.default_rng(8)
    X, y = _categorical_data(rng, 1500)
    X[X[:, 0] == 4, 0] = np.nan  # code 4 never seen
    search = TreeSearch(X, max_leaf_nodes=2, min_samples_leaf=5, n_categories=np.array([9, 0, 3]))
    tree, _ = search.best(np.full(1500, 1 / 1500), y)
    root = tree.nodes[0]
    if root["is_categorical"]:
        assert _in_set(root["left_categories"], 4) == root["missing_left"]
        assert _in_set(root["left_categories"], 250) == root["missing_left"]


def test_partition_nodes_routes_by_bitsets():
    rng = np.random.default_rng(9)
    columns = rng.integers(0, 6, size=(2, 500)).astype(np.uint8)
    columns[0, ::7] = 255
    rows = np.arange(500, dtype=np.int64)
    stats = rng.normal(size=(500, 3))
    words = _words([0, 4])
    n_left = partition_nodes(
        columns, rows, stats, np.array([0]), np.array([500]), np.array([0]), np.array([-1]),
        np.array([True]), np.empty(500, dtype=np.int64), np.empty((500, 3)),
        bitsets=words[None],
    )  # fmt: skip
    want = np.isin(columns[0], [0, 4]) | (columns[0] == 255)
    assert n_left[0] == want.sum()


def test_old_node_arrays_are_upcast():
    old_dtype = np.dtype([(name, NODE_DTYPE.fields[name][0]) for name in NODE_DTYPE.names[:10]])
    old = np.zeros(3, dtype=old_dtype)
    old[0] = (0.0, 0, 0.5, 0, True, 1, 2, False, 1.0, 2.0)
    old[1] = (-1.0, -1, 0.0, 0, False, -1, -1, True, 0.0, 1.0)
    old[2] = (1.0, -1, 0.0, 0, False, -1, -1, True, 0.0, 1.0)
    new = current_nodes(old)
    assert new.dtype == NODE_DTYPE and not new["is_categorical"].any()
    assert not new["left_categories"].any()
    for name in old_dtype.names:
        np.testing.assert_array_equal(new[name], old[name])
    assert current_nodes(new) is new
    tree = HistogramTree.__new__(HistogramTree)
    tree.__dict__.update(nodes=old, leaf_weights="per-leaf")  # as a 0.3 pickle holds it
    loaded = pickle.loads(pickle.dumps(tree))
    assert loaded.nodes.dtype == NODE_DTYPE
    X = np.array([[0.0], [1.0], [np.nan]])
    np.testing.assert_array_equal(loaded.predict(X), [-1.0, 1.0, -1.0])
    np.testing.assert_array_equal(predict_ensemble(X, [tree], [1.0]), [-1.0, 1.0, -1.0])


# --- TreeSHAP ----------------------------------------------------------------------------------


def _goes_left(nodes, i, value):
    """The routing rule written out: NaN and non-codes to the missing side."""
    if np.isnan(value):
        return bool(nodes["missing_left"][i])
    if nodes["is_categorical"][i]:
        if value < 0 or value >= 256 or value != math.floor(value):
            return bool(nodes["missing_left"][i])
        return _in_set(nodes["left_categories"][i], int(value))
    return bool(value <= nodes["threshold"][i])


def _output(nodes, x):
    i = 0
    while not nodes["is_leaf"][i]:
        i = nodes["left"][i] if _goes_left(nodes, i, x[nodes["feature"][i]]) else nodes["right"][i]
    return float(nodes["value"][i])


def _random_categorical_tree(rng, max_depth, n_features):
    """Features 0 and 1 categorical (codes 0..5), the others numeric; features repeat."""
    rows = []

    def grow(depth):
        index = len(rows)
        rows.append(None)
        if depth == max_depth or (depth > 0 and rng.random() < 0.25):
            cover = float(rng.uniform(0.5, 3.0))
            rows[index] = (float(rng.normal()), -1, 0.0, 0, False, -1, -1, True, 0.0, cover,
                           False, 0)  # fmt: skip
            return cover
        feature = int(rng.integers(n_features))
        left_index = len(rows)
        left_cover = grow(depth + 1)
        right_index = len(rows)
        right_cover = grow(depth + 1)
        missing_left = bool(rng.random() < 0.5)
        cover = left_cover + right_cover
        if feature < 2:
            words = _words([k for k in range(6) if rng.random() < 0.5])
            rows[index] = (0.0, feature, np.nan, -1, missing_left, left_index, right_index,
                           False, 1.0, cover, True, words)  # fmt: skip
        else:
            threshold = float(np.round(rng.normal(), 1))
            rows[index] = (0.0, feature, threshold, 0, missing_left, left_index, right_index,
                           False, 1.0, cover, False, 0)  # fmt: skip
        return cover

    grow(0)
    return np.array(rows, dtype=NODE_DTYPE)


def _rows(rng, n, n_features):
    X = np.round(rng.normal(size=(n, n_features)), 1)
    X[:, :2] = rng.integers(0, 8, size=(n, 2))  # codes 6 and 7 unseen
    X[rng.random(X.shape) < 0.15] = np.nan
    X[rng.random(X.shape) < 0.05] = -1.0
    return X


def _shapley(value, n_features):
    cache = {}

    def v(coalition):
        key = frozenset(coalition)
        if key not in cache:
            cache[key] = value(key)
        return cache[key]

    phi = np.zeros(n_features)
    for j in range(n_features):
        others = [k for k in range(n_features) if k != j]
        for size in range(n_features):
            share = (
                math.factorial(size)
                * math.factorial(n_features - size - 1)
                / math.factorial(n_features)
            )
            for coalition in itertools.combinations(others, size):
                phi[j] += share * (v((*coalition, j)) - v(coalition))
    return phi, v(())


def _conditional(nodes, x, coalition, i=0):
    if nodes["is_leaf"][i]:
        return float(nodes["value"][i])
    left, right = nodes["left"][i], nodes["right"][i]
    if nodes["feature"][i] in coalition:
        child = left if _goes_left(nodes, i, x[nodes["feature"][i]]) else right
        return _conditional(nodes, x, coalition, child)
    total = nodes["cover"][left] + nodes["cover"][right]
    share = nodes["cover"][left] / total
    return share * _conditional(nodes, x, coalition, left) + (1 - share) * _conditional(
        nodes, x, coalition, right
    )


def test_tree_shap_of_categorical_splits_matches_enumeration():
    rng = np.random.default_rng(21)
    n_features = 4
    trees = [_random_categorical_tree(rng, 4, n_features) for _ in range(3)]
    assert any(t["is_categorical"].any() for t in trees)
    alphas = rng.uniform(0.5, 1.5, size=3)
    X = _rows(rng, 6, n_features)
    background = _rows(rng, 30, n_features)
    # The compiled routing is the rule written out.
    for x in np.vstack([X, background]):
        want = sum(a * _output(t, x) for t, a in zip(trees, alphas, strict=True))
        got = float(predict_ensemble(x[None], [HistogramTree(t) for t in trees], alphas)[0])
        assert abs(got - want) < 1e-12
    values, expected = path_dependent_shap(trees, alphas, X)
    for x, row in zip(X, values, strict=True):

        def value(coalition, x=x):
            return sum(
                a * _conditional(t, x, coalition) for t, a in zip(trees, alphas, strict=True)
            )

        phi, bias = _shapley(value, n_features)
        np.testing.assert_allclose(row, phi, rtol=0, atol=1e-12)
        assert abs(bias - expected) < 1e-12
    values, expected = interventional_shap(trees, alphas, X, background)
    for x, row in zip(X, values, strict=True):

        def value(coalition, x=x):
            hybrid = background.copy()
            hybrid[:, sorted(coalition)] = x[sorted(coalition)]
            return float(
                np.mean(
                    [
                        sum(a * _output(t, h) for t, a in zip(trees, alphas, strict=True))
                        for h in hybrid
                    ]
                )
            )

        phi, bias = _shapley(value, n_features)
        np.testing.assert_allclose(row, phi, rtol=0, atol=1e-12)
        assert abs(bias - expected) < 1e-12


# --- Stumps ------------------------------------------------------------------------------------


def _stump_error(weights, y, codes, left_set, polarity, missing_right):
    """Weighted error of a categorical stump, by its rule written out."""
    nan = np.isnan(codes)
    left = np.isin(np.nan_to_num(codes, nan=-1), list(left_set)) & ~nan
    left |= nan & (not missing_right)
    predicted = np.where(left, -polarity, polarity)
    return float(weights[predicted != y].sum())


def test_categorical_stump_is_the_best_of_every_set():
    rng = np.random.default_rng(31)
    for trial in range(20):
        n, n_categories = 300, int(rng.integers(2, 7))
        codes = rng.integers(0, n_categories, size=n).astype(float)
        if trial % 2:
            codes[rng.random(n) < 0.1] = np.nan
        numeric = rng.normal(size=n)
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
        weights = rng.uniform(0.1, 1.0, size=n)
        weights /= weights.sum()
        X = np.column_stack([codes, numeric])
        search = BinnedStumpSearch(
            X, n_categories=np.array([n_categories, 0]), cat_smooth=0.0, min_data_per_group=1.0
        )
        stump, error = search.best(weights, y)
        best = np.inf
        present = sorted({int(c) for c in codes[~np.isnan(codes)]})
        for size in range(len(present) + 1):
            for subset in itertools.combinations(present, size):
                for polarity in (1, -1):
                    for missing_right in (False, True):
                        e = _stump_error(weights, y, codes, subset, polarity, missing_right)
                        best = min(best, e)
        numeric_best = BinnedStumpSearch(X[:, 1:]).best(weights, y)[1]
        assert error <= min(best, numeric_best) + 1e-12
        assert error >= min(best, numeric_best) - 1e-12
        np.testing.assert_array_equal(search.outputs(stump), stump.predict(X))
        if stump.is_categorical:
            got = _stump_error(
                weights, y, codes, [k for k in range(256) if _in_set(stump._words(), k)],
                stump.polarity, stump.missing_right,
            )  # fmt: skip
            assert abs(got - error) < 1e-12


def test_categorical_stump_nodes_and_predict_agree():
    stump = DecisionStump(
        0,
        np.nan,
        1,
        True,
        split_bin=-1,
        gain=0.3,
        left_categories=tuple(int(w) for w in _words([0, 2])),
    )
    X = np.array([[0.0], [1.0], [2.0], [np.nan], [7.0], [-1.0], [0.5]])
    want = [-1, 1, -1, 1, 1, 1, 1]
    np.testing.assert_array_equal(stump.predict(X), want)
    np.testing.assert_array_equal(predict_ensemble(X, [stump], [1.0]), want)
    np.testing.assert_array_equal(
        predict_ensemble(X, [stump, stump], [1.0, 0.5]), np.multiply(want, 1.5)
    )
    np.testing.assert_array_equal(HistogramTree(stump.nodes).predict(X), want)
    bins = np.array([[0, 1, 2, 255, 7]], dtype=np.uint8)
    np.testing.assert_array_equal(stump.binned_outputs(bins), want[:5])
    assert stump != DecisionStump(0, np.nan, 1, True)
    assert DecisionStump(0, np.nan, 1, True, left_categories=(0, 0, 0, 0)).is_constant
    assert not DecisionStump(0, np.nan, 1, False, left_categories=(0, 0, 0, 0)).is_constant


def test_settings_reach_the_search():
    settings = TreeSettings(cat_smooth=0.0, min_data_per_group=1.0, max_cat_threshold=8)
    np.testing.assert_array_equal(settings.categorical, [0.0, 1.0, 4.0, 8.0, 0.0])
    assert TreeSettings().categorical[1] == 20.0  # min(100, max(min_samples_leaf=20, 10))
    rng = np.random.default_rng(0)
    X, _ = _categorical_data(rng, 50)
    assert RowPartition is not None
    search = TreeSearch(X, n_categories=np.array([9, 0, 3]), cat_l2=2.0)
    assert search.settings.cat_l2 == 2.0


def test_exhaustive_stump_search_refuses_categorical_features():
    from viboost.fitting.data import learner_search

    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="max_bins=None"):
        learner_search(X, np.ones(4), None, None, 0, n_categories=np.array([3, 0]))


@pytest.mark.parametrize("speculate", [False, True])
def test_categorical_trees_grown_together_are_the_trees_grown_alone(speculate):
    """Expansion.categories carries the sets through the row partitions: trees grown in
    lockstep (speculative requests or not) are node for node the trees grown alone, and
    their leaves route the rows as their partitions hold them."""
    from viboost.boosting.binning import FeatureBinner
    from viboost.boosting.growth import TreeGrowth, TreeGrowths
    from viboost.boosting.partition import grow

    rng = np.random.default_rng(12)
    X, y = _categorical_data(rng, 1500, n_categories=14)
    binner = FeatureBinner(max_bins=31, n_categories=np.array([14, 0, 3])).fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(10, None, 5, "per-leaf", "newton", 1.0, cat_smooth=2.0)

    def partitions():
        out, priors = [], []
        for seed in (1, 2):
            r = np.random.default_rng(seed)
            active = r.random(y.size) < 0.9
            raw = np.where(active, r.uniform(0.1, 1.0, y.size), 0.0)
            first, second = settings.statistics(raw / raw.sum(), y, r.normal(0, 0.5, y.size))
            out.append(RowPartition(binned, np.flatnonzero(active), first, second, active * 1.0))
            priors.append(settings.prior(float(raw.sum())))
        return out, priors

    together, priors = partitions()
    growths = TreeGrowths(
        [p.histogram() for p in together], binner.n_bins_, binner.thresholds_, settings, priors,
        speculate=speculate, is_categorical=binner.is_categorical_,
    )  # fmt: skip
    asked = []
    while any(requests := growths.requests()):
        asked += [e for r in requests for e in r]
        growths.expanded([p.expand(r) for p, r in zip(together, requests, strict=True)])
    assert any(e.categories is not None and e.position == -1 for e in asked)
    alone, _ = partitions()
    for t, (partition, prior) in enumerate(zip(alone, priors, strict=True)):
        growth = TreeGrowth(
            partition.histogram(), binner.n_bins_, binner.thresholds_, settings, prior,
            is_categorical=binner.is_categorical_,
        )  # fmt: skip
        grow(growth, partition.expand)
        want, _ = growth.tree()
        got, _ = growths.tree(t)
        assert got.tobytes() == want.tobytes()
        assert got["is_categorical"].any()
        tree = HistogramTree(got)
        np.testing.assert_array_equal(
            tree.leaf_values[tree.leaf_index(binned.T.copy())], tree.predict(X)
        )


def test_categorical_tree_is_the_same_for_any_thread_count():
    from viboost._utils.parallel import max_threads, numba_threads

    rng = np.random.default_rng(13)
    X, y = _categorical_data(rng, 40_000, n_categories=40)
    weights = np.full(y.size, 1 / y.size)
    trees = []
    for threads in sorted({1, max_threads()}):
        with numba_threads(threads):
            search = TreeSearch(X, max_leaf_nodes=16, n_categories=np.array([40, 0, 3]))
            trees.append(search.best(weights, y)[0])
    assert trees[0].nodes["is_categorical"].any()
    assert all(tree == trees[0] for tree in trees)


def test_caps_limit_the_set():
    """max_cat_threshold caps the groups on the scanned side; min_data_per_group skips
    boundaries until enough rows have been added."""
    rng = np.random.default_rng(14)
    hist = np.zeros((1, 33, 3))
    hist[0, :30, 2] = 20.0
    hist[0, :30, 0] = rng.normal(size=30)
    hist[0, :30, 1] = 1.0
    for cap in (1, 3, 8):
        cat = categorical_settings(1.0, 0.0, 1.0, 0, cap, 0.0)
        *_, w0, w1, w2, w3 = best_node_split(
            hist, np.array([30]), np.array([True]), 0, 0.1, 1.0, cat
        )
        words = np.array([w0, w1, w2, w3], dtype=np.int64).view(np.uint64)
        size = sum(_in_set(words, k) for k in range(30))
        assert 1 <= size <= cap or 30 - size <= cap
    cat = categorical_settings(1.0, 0.0, 50.0, 0, 32, 0.0)  # boundaries every 3 groups
    *_, w0, w1, w2, w3 = best_node_split(hist, np.array([30]), np.array([True]), 0, 0.1, 1.0, cat)
    words = np.array([w0, w1, w2, w3], dtype=np.int64).view(np.uint64)
    size = sum(_in_set(words, k) for k in range(30))
    assert size % 3 == 0


def test_categorical_stump_on_a_later_feature():
    """A categorical stump of feature > 0: binned outputs, predict and nodes agree."""
    words = tuple(int(w) for w in _words([1]))
    stump = DecisionStump(2, np.nan, -1, False, split_bin=-1, left_categories=words)
    X = np.array([[9.0, 9.0, 1.0], [9.0, 9.0, 0.0], [9.0, 9.0, np.nan]])
    want = [1.0, -1.0, 1.0]
    np.testing.assert_array_equal(stump.predict(X), want)
    bins = np.array([[0, 0, 0], [0, 0, 0], [1, 0, 255]], dtype=np.uint8)
    np.testing.assert_array_equal(stump.binned_outputs(bins), want)
    np.testing.assert_array_equal(predict_ensemble(X, [stump], [1.0]), want)
    rng = np.random.default_rng(40)
    codes = rng.integers(0, 5, size=400).astype(float)
    y = np.where(np.isin(codes, [1, 3]), 1.0, -1.0)
    X = np.column_stack([rng.normal(size=400), codes])
    search = BinnedStumpSearch(X, n_categories=np.array([0, 5]))
    stump, error = search.best(np.full(400, 1 / 400), y)
    assert stump.feature == 1 and stump.is_categorical and error == 0.0
    np.testing.assert_array_equal(search.outputs(stump), stump.predict(X))
