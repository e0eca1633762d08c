"""Exact TreeSHAP over node arrays (viboost.boosting.tree_shap), against independent oracles:
shap's TreeExplainer on the same trees, and Shapley values by enumerating every coalition."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from viboost._utils.parallel import max_threads, numba_threads
from viboost.boosting.learners import NODE_DTYPE
from viboost.boosting.stumps import DecisionStump
from viboost.boosting.tree_shap import (
    interventional_shap,
    interventional_tree_shap,
    path_dependent_shap,
    path_dependent_tree_shap,
)

# --- Random trees and independent references ------------------------------------------------------


def random_tree(rng, max_depth, n_features, zero_cover=0.0, shuffle=True):
    """A random binary tree of at most ``max_depth`` splits on a path (features may repeat on a
    path), leaves of random value and cover (0 with probability ``zero_cover``), inner covers
    the sums of their children's, NaN sent either way; nodes in a random order, root first."""
    records = []

    def grow(depth):
        index = len(records)
        records.append(None)
        if depth == max_depth or (depth > 0 and rng.random() < 0.3):
            cover = 0.0 if rng.random() < zero_cover else float(rng.uniform(0.5, 3.0))
            records[index] = (float(rng.normal()), -1, 0.0, False, -1, -1, True, cover)
            return index, cover
        feature = int(rng.integers(n_features))
        threshold = float(np.round(rng.normal(), 1))
        left, left_cover = grow(depth + 1)
        right, right_cover = grow(depth + 1)
        cover = left_cover + right_cover
        missing_left = bool(rng.random() < 0.5)
        records[index] = (0.0, feature, threshold, missing_left, left, right, False, cover)
        return index, cover

    grow(0)
    n = len(records)
    position = np.arange(n)
    if shuffle:
        position[1:] = 1 + rng.permutation(n - 1)
    nodes = np.zeros(n, dtype=NODE_DTYPE)
    for old, (value, feature, threshold, missing_left, left, right, leaf, cover) in enumerate(
        records
    ):
        at = position[old]
        nodes[at]["value"] = value
        nodes[at]["feature"] = feature
        nodes[at]["threshold"] = threshold
        nodes[at]["missing_left"] = missing_left
        nodes[at]["left"] = -1 if leaf else position[left]
        nodes[at]["right"] = -1 if leaf else position[right]
        nodes[at]["is_leaf"] = leaf
        nodes[at]["cover"] = cover
    return nodes


def random_rows(rng, n, n_features, missing=0.15, grid=True):
    """Rows with some NaN, on the trees' threshold grid (values equal to thresholds happen) or
    not (``grid=False``)."""
    X = rng.normal(size=(n, n_features))
    if grid:
        X = np.round(X, 1)
    X[rng.random(X.shape) < missing] = np.nan
    return X


def goes_left(nodes, i, value):
    if np.isnan(value):
        return bool(nodes["missing_left"][i])
    return bool(value <= nodes["threshold"][i])


def tree_output(nodes, x):
    i = 0
    while not nodes["is_leaf"][i]:
        i = nodes["left"][i] if goes_left(nodes, i, x[nodes["feature"][i]]) else nodes["right"][i]
    return float(nodes["value"][i])


def trees_output(trees, alphas, rows):
    """``sum_t alphas[t] * h_t(x)`` for each row, one row at a time in Python."""
    return np.array(
        [sum(a * tree_output(t, x) for t, a in zip(trees, alphas, strict=True)) for x in rows]
    )


def conditional_expectation(nodes, x, coalition, i=0):
    """Path-dependent ``E[h | x_S]``: follow ``x`` on the features of ``S``, both children
    weighted by their covers on the others (one half each when both covers are 0)."""
    if nodes["is_leaf"][i]:
        return float(nodes["value"][i])
    left, right = nodes["left"][i], nodes["right"][i]
    feature = nodes["feature"][i]
    if feature in coalition:
        child = left if goes_left(nodes, i, x[feature]) else right
        return conditional_expectation(nodes, x, coalition, child)
    cover_left, cover_right = nodes["cover"][left], nodes["cover"][right]
    total = cover_left + cover_right
    share = cover_left / total if total > 0 else 0.5
    return share * conditional_expectation(nodes, x, coalition, left) + (
        1 - share
    ) * conditional_expectation(nodes, x, coalition, right)


def shapley(value, n_features):
    """Shapley values of a set function over ``range(n_features)`` by enumeration."""
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


def vectorized_output(trees, alphas, rows):
    """``sum_t alphas[t] * h_t`` of many rows at once (numpy, one level of every tree a step)."""
    total = np.zeros(rows.shape[0])
    for nodes, alpha in zip(trees, alphas, strict=True):
        at = np.zeros(rows.shape[0], dtype=np.int64)
        while not nodes["is_leaf"][at].all():
            inner = ~nodes["is_leaf"][at]
            node = at[inner]
            value = rows[np.flatnonzero(inner), nodes["feature"][node]]
            left = np.where(
                np.isnan(value), nodes["missing_left"][node], value <= nodes["threshold"][node]
            )
            at[inner] = np.where(left, nodes["left"][node], nodes["right"][node])
        total += alpha * nodes["value"][at]
    return total


def shap_model(trees, alphas):
    """The trees as a shap custom-model dict (covers as node_sample_weight)."""
    converted = []
    for nodes, alpha in zip(trees, alphas, strict=True):
        leaf = nodes["is_leaf"]
        default = np.where(nodes["missing_left"], nodes["left"], nodes["right"])
        converted.append(
            {
                "children_left": np.where(leaf, -1, nodes["left"]),
                "children_right": np.where(leaf, -1, nodes["right"]),
                "children_default": np.where(leaf, -1, default),
                "features": np.where(leaf, -2, nodes["feature"]),
                "thresholds": np.where(leaf, -2.0, nodes["threshold"]),
                "values": (alpha * np.where(leaf, nodes["value"], 0.0))[:, None],
                "node_sample_weight": np.array(nodes["cover"]),
            }
        )
    return {
        "trees": converted,
        "base_offset": 0.0,
        "tree_output": "raw_value",
        "input_dtype": np.float64,
        "internal_dtype": np.float64,
    }


def ensemble(rng, n_trees, max_depth, n_features, **kwargs):
    trees = [random_tree(rng, max_depth, n_features, **kwargs) for _ in range(n_trees)]
    return trees, rng.uniform(-1.5, 1.5, size=n_trees)


# --- Path-dependent ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_depth", [0, 1, 2, 3, 4])
def test_path_dependent_matches_shap(max_depth):
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(max_depth)
    trees, alphas = ensemble(rng, 6, max_depth, 4)
    X = random_rows(rng, 40, 4)
    values, expected = path_dependent_shap(trees, alphas, X)
    explainer = shap.TreeExplainer(
        shap_model(trees, alphas), feature_perturbation="tree_path_dependent"
    )
    reference = explainer.shap_values(X)
    print(f"path-dependent vs shap, depth {max_depth}: {np.abs(reference - values).max():.3g}")
    np.testing.assert_allclose(values, reference, rtol=0, atol=1e-12)
    assert abs(np.ravel(explainer.expected_value)[0] - expected) < 1e-12


@pytest.mark.parametrize("max_depth", [1, 2, 3, 4])
def test_path_dependent_matches_brute_force(max_depth):
    # Zero covers included (shap gives NaN there), features repeated along paths.
    rng = np.random.default_rng(10 + max_depth)
    n_features = 4 if max_depth < 4 else 5
    trees, alphas = ensemble(rng, 3, max_depth, n_features, zero_cover=0.2)
    X = random_rows(rng, 6, n_features)
    values, expected = path_dependent_shap(trees, alphas, X)
    for x, row in zip(X, values, strict=True):

        def value(coalition, x=x):
            return sum(
                a * conditional_expectation(t, x, coalition)
                for t, a in zip(trees, alphas, strict=True)
            )

        phi, bias = shapley(value, n_features)
        np.testing.assert_allclose(row, phi, rtol=0, atol=1e-12)
        assert abs(bias - expected) < 1e-12


def test_one_feature_trees_take_the_short_cut_exactly():
    # All splits on one feature (the h(x) - E[h] short cut) against shap's general algorithm.
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(20)
    trees = [random_tree(rng, 3, 1) for _ in range(3)]
    for nodes in trees:
        nodes["feature"] = np.where(nodes["is_leaf"], -1, 2)
    alphas = [0.5, -1.0, 2.0]
    X = random_rows(rng, 30, 3)
    values, expected = path_dependent_shap(trees, alphas, X)
    explainer = shap.TreeExplainer(
        shap_model(trees, alphas), feature_perturbation="tree_path_dependent"
    )
    np.testing.assert_allclose(values, explainer.shap_values(X), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(values[:, :2], 0.0)
    background = random_rows(rng, 50, 3)
    values, expected = interventional_shap(trees, alphas, X, background)
    mean = vectorized_output(trees, alphas, background).mean()
    np.testing.assert_allclose(values[:, 2], vectorized_output(trees, alphas, X) - mean, atol=1e-12)
    assert abs(expected - mean) < 1e-12


def test_stump_with_covers():
    stump = DecisionStump(feature=1, threshold=0.0, polarity=-1, missing_right=True, covers=(3, 1))
    X = np.array([[0.0, -1.0], [0.0, 1.0], [0.0, np.nan]])
    values, expected = path_dependent_tree_shap(stump.nodes, X)
    assert expected == 0.5  # -1 * (1 - 3) / 4
    np.testing.assert_array_equal(values, [[0.0, 0.5], [0.0, -1.5], [0.0, -1.5]])


# --- Interventional ---------------------------------------------------------------------------


def brute_force_interventional(trees, alphas, x, background, weights):
    weights = weights / weights.sum()

    def value(coalition):
        hybrid = background.copy()
        hybrid[:, sorted(coalition)] = x[sorted(coalition)]
        return float(weights @ vectorized_output(trees, alphas, hybrid))

    return shapley(value, x.shape[0])


@pytest.mark.parametrize("weighted", [False, True])
def test_interventional_matches_brute_force_large_background(weighted):
    rng = np.random.default_rng(30 + weighted)
    trees, alphas = ensemble(rng, 4, 4, 5)
    background = random_rows(rng, 1200, 5)
    weights = rng.uniform(0.0, 2.0, size=1200) if weighted else np.ones(1200)
    X = random_rows(rng, 4, 5)
    values, expected = interventional_shap(trees, alphas, X, background, weights)
    worst = 0.0
    for x, row in zip(X, values, strict=True):
        phi, bias = brute_force_interventional(trees, alphas, x, background, weights)
        np.testing.assert_allclose(row, phi, rtol=0, atol=1e-12)
        assert abs(bias - expected) < 1e-12
        worst = max(worst, np.abs(row - phi).max())
    print(f"interventional vs enumeration, 1200 background rows: {worst:.3g}")


def test_interventional_matches_shap_on_every_background_row():
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(40)
    trees, alphas = ensemble(rng, 8, 4, 6)
    # Off the thresholds' grid: shap's interventional algorithm compares x with the threshold
    # rounded to float32, which sends a value equal to a threshold such as -0.3 right.
    background = random_rows(rng, 1500, 6, grid=False)
    X = random_rows(rng, 25, 6, grid=False)
    values, expected = interventional_shap(trees, alphas, X, background)
    # A raw array would go through shap's default Independent masker, which keeps a sample of
    # 100 rows; a masker with max_samples = all rows keeps them all.
    masker = shap.maskers.Independent(background, max_samples=background.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # shap's note on large backgrounds
        explainer = shap.TreeExplainer(
            shap_model(trees, alphas), data=masker, feature_perturbation="interventional"
        )
    assert explainer.data.shape == background.shape
    reference = explainer.shap_values(X)
    # shap 0.51 keeps the per-leaf terms of this algorithm in float32 (pos_lst / neg_lst in
    # tree_shap_indep): agreement to about 2**-24 of the leaf scale.
    scale = sum(abs(a) * np.abs(t["value"]).max() for t, a in zip(trees, alphas, strict=True))
    difference = np.abs(reference - values).max()
    print(
        f"interventional vs shap, 1500 background rows: max abs difference {difference:.3g} "
        f"({difference / scale:.2g} of the leaf scale)"
    )
    assert difference < 1e-6 * scale
    assert abs(explainer.expected_value - expected) < 1e-12


def test_integer_weights_equal_repeated_rows():
    rng = np.random.default_rng(50)
    trees, alphas = ensemble(rng, 3, 3, 4)
    background = random_rows(rng, 30, 4)
    counts = rng.integers(0, 4, size=30)
    counts[0] = 1
    X = random_rows(rng, 10, 4)
    weighted = interventional_shap(trees, alphas, X, background, counts)
    repeated = interventional_shap(trees, alphas, X, np.repeat(background, counts, axis=0))
    np.testing.assert_allclose(weighted[0], repeated[0], rtol=0, atol=1e-12)
    assert abs(weighted[1] - repeated[1]) < 1e-12


def test_single_tree_function_is_the_unit_weight_ensemble():
    rng = np.random.default_rng(60)
    nodes = random_tree(rng, 4, 3)
    X, background = random_rows(rng, 8, 3), random_rows(rng, 20, 3)
    weights = rng.uniform(0.5, 1.0, size=20)
    single = interventional_tree_shap(nodes, X, background, weights)
    scaled = interventional_shap([nodes, nodes], [0.25, 0.75], X, background, weights)
    np.testing.assert_allclose(single[0], scaled[0], atol=1e-12)
    assert abs(single[1] - scaled[1]) < 1e-12


# --- Both ---------------------------------------------------------------------------------------


def test_additivity_and_thread_count_independence():
    # Deep trees (repeated features, zero covers, NaN) on more features than the oracles reach.
    rng = np.random.default_rng(70)
    trees, alphas = ensemble(rng, 12, 9, 8, zero_cover=0.1)
    leaf = (0.7, -1, 0.0, 0, False, -1, -1, True, 0.0, 1.0, False, 0)
    trees.append(np.array([leaf], dtype=NODE_DTYPE))
    alphas = np.append(alphas, 2.0)
    X, background = random_rows(rng, 150, 8), random_rows(rng, 40, 8)
    H = trees_output(trees, alphas, X)
    results = {}
    for threads in sorted({1, max_threads()}):
        with numba_threads(threads):
            results[threads] = (
                path_dependent_shap(trees, alphas, X),
                interventional_shap(trees, alphas, X, background),
            )
    for (values, expected), reference in zip(results[1], results[max(results)], strict=True):
        np.testing.assert_allclose(values.sum(axis=1) + expected, H, rtol=0, atol=1e-11)
        np.testing.assert_array_equal(values, reference[0])
        assert expected == reference[1]
    mean = vectorized_output(trees, alphas, background).mean()
    assert abs(results[1][1][1] - mean) < 1e-12


def test_no_learners():
    X = np.ones((3, 2))
    values, expected = path_dependent_shap([], [], X)
    assert values.shape == (3, 2) and expected == 0.0
    values, expected = interventional_shap([], [], X, X)
    assert values.shape == (3, 2) and expected == 0.0


def test_bad_node_arrays():
    rng = np.random.default_rng(80)
    nodes = random_tree(rng, 2, 3, shuffle=False)
    X = random_rows(rng, 2, 3)
    missing = nodes.copy()
    missing["cover"][0] = np.nan
    with pytest.raises(ValueError, match="cover is NaN"):
        path_dependent_shap([missing], [1.0], X)
    interventional_shap([missing], [1.0], X, X)  # covers are not needed there
    negative = nodes.copy()
    negative["cover"][-1] = -1.0
    with pytest.raises(ValueError, match="nonnegative"):
        path_dependent_shap([negative], [1.0], X)
    with pytest.raises(ValueError, match="columns of X"):
        path_dependent_shap([nodes], [1.0], X[:, :0])
    cycle = nodes.copy()
    cycle["left"][0] = 0
    with pytest.raises(ValueError, match="not a tree"):
        path_dependent_shap([cycle], [1.0], X)
    outside = nodes.copy()
    outside["right"][0] = nodes.size
    with pytest.raises(ValueError, match="children"):
        path_dependent_shap([outside], [1.0], X)
    with pytest.raises(ValueError, match="alphas"):
        path_dependent_shap([nodes], [1.0, 2.0], X)
    with pytest.raises(ValueError, match="weights"):
        interventional_shap([nodes], [1.0], X, X, weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="columns"):
        interventional_shap([nodes], [1.0], X, X[:, :2])
