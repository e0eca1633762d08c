"""Exact per-feature contributions (viboost.explain, VIBoostClassifier.predict_contributions)."""

from __future__ import annotations

import importlib.util
import itertools
import math

import numpy as np
import pytest

from viboost import VIBoostClassifier
from viboost.boosting.stumps import DecisionStump
from viboost.explain import learner_contributions, predict_contributions, to_shap_tree_model

#: Several stumps on the same feature, both NaN directions, both polarities, a constant stump.
STUMPS = [
    DecisionStump(feature=0, threshold=0.1, polarity=1, missing_right=False),
    DecisionStump(feature=1, threshold=-0.3, polarity=-1, missing_right=True),
    DecisionStump(feature=0, threshold=-0.5, polarity=1, missing_right=True),
    DecisionStump(feature=2, threshold=0.7, polarity=1, missing_right=False),
    DecisionStump(feature=0, threshold=0.9, polarity=-1, missing_right=False),
    DecisionStump(feature=1, threshold=-np.inf, polarity=1, missing_right=True),
]
ALPHAS = [0.8, 0.45, 0.3, 0.2, 0.15, 0.05]


def _model(stumps=STUMPS, alphas=ALPHAS, n_features=3) -> VIBoostClassifier:
    """A 'fitted' classifier with the given stumps, without running fit."""
    clf = VIBoostClassifier()
    clf.estimators_ = list(stumps)
    clf.alphas_ = np.asarray(alphas, dtype=np.float64)
    clf.classes_ = np.array([0, 1])
    clf.n_features_in_ = n_features
    return clf


def _data(rng: np.random.Generator, n: int, n_features: int = 3) -> np.ndarray:
    X = rng.normal(size=(n, n_features))
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


def _brute_force_shapley(model, x, background, weights) -> tuple[np.ndarray, float]:
    """Shapley values of v(S) = E_b[H(x_S, b_rest)] by enumerating every coalition S."""
    n = x.shape[0]
    weights = weights / weights.sum()

    def value(subset: tuple[int, ...]) -> float:
        hybrid = background.copy()
        hybrid[:, list(subset)] = x[list(subset)]
        return float(weights @ model.decision_function(hybrid))

    phi = np.zeros(n)
    for j in range(n):
        others = [k for k in range(n) if k != j]
        for size in range(n):
            for subset in itertools.combinations(others, size):
                share = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                phi[j] += share * (value((*subset, j)) - value(subset))
    return phi, value(())


def test_rows_sum_to_decision_function():
    rng = np.random.default_rng(0)
    model = _model()
    X, background = _data(rng, 50), _data(rng, 30)
    contrib = model.predict_contributions(X, background=background)
    assert contrib.shape == (50, 4)
    np.testing.assert_allclose(contrib.sum(axis=1), model.decision_function(X), atol=1e-12)
    # The bias is E_background[H], the same on every row.
    np.testing.assert_allclose(contrib[:, -1], model.decision_function(background).mean())


def test_fitted_model_with_nan_sums_to_decision_function():
    rng = np.random.default_rng(1)
    X = _data(rng, 120, 4)
    y = (np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) > 0).astype(int)
    clf = VIBoostClassifier(15, preset="paper").fit(X, y)
    assert len({stump.feature for stump in clf.estimators_}) < len(clf.estimators_)
    contrib = clf.predict_contributions(X, background=X)
    np.testing.assert_allclose(contrib.sum(axis=1), clf.decision_function(X), atol=1e-12)
    np.testing.assert_array_equal(contrib, predict_contributions(clf, X, background=X))


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_brute_force_shapley(weighted):
    rng = np.random.default_rng(2)
    model = _model()
    X, background = _data(rng, 6), _data(rng, 25)
    weights = rng.uniform(0.1, 2.0, size=25) if weighted else np.ones(25)
    contrib = model.predict_contributions(
        X, background=background, background_weight=weights if weighted else None
    )
    for row, x in zip(contrib, X, strict=True):
        phi, bias = _brute_force_shapley(model, x, background, weights)
        np.testing.assert_allclose(row[:-1], phi, atol=1e-12)
        np.testing.assert_allclose(row[-1], bias, atol=1e-12)


def test_integer_weights_equal_repeated_rows():
    rng = np.random.default_rng(3)
    X, background = _data(rng, 10), _data(rng, 8)
    counts = rng.integers(0, 4, size=8)
    counts[0] = 1
    weighted = learner_contributions(STUMPS, ALPHAS, X, background, background_weight=counts)
    repeated = learner_contributions(STUMPS, ALPHAS, X, np.repeat(background, counts, axis=0))
    np.testing.assert_allclose(weighted, repeated, atol=1e-12)


def test_unused_feature_and_constant_stump_get_nothing():
    rng = np.random.default_rng(4)
    constant = DecisionStump(feature=1, threshold=-np.inf, polarity=1, missing_right=True)
    X, background = _data(rng, 20), _data(rng, 10)
    contrib = _model([STUMPS[0], constant], [0.5, 0.25]).predict_contributions(X, background)
    alone = _model([STUMPS[0]], [0.5]).predict_contributions(X, background)
    np.testing.assert_array_equal(contrib[:, 1:3], 0.0)
    np.testing.assert_array_equal(contrib[:, 0], alone[:, 0])
    np.testing.assert_allclose(contrib[:, -1], alone[:, -1] + 0.25)


def test_bad_input():
    rng = np.random.default_rng(5)
    model = _model()
    with pytest.raises(ValueError, match="features"):
        model.predict_contributions(rng.normal(size=(4, 2)), background=rng.normal(size=(4, 3)))
    with pytest.raises(ValueError, match="features"):
        model.predict_contributions(rng.normal(size=(4, 3)), background=rng.normal(size=(4, 5)))
    with pytest.raises(ValueError, match="did not record covers; pass background="):
        model.predict_contributions(rng.normal(size=(4, 3)))
    with pytest.raises(ValueError, match="background_weight"):
        model.predict_contributions(
            rng.normal(size=(4, 3)), background=rng.normal(size=(4, 3)), background_weight=[1, 2]
        )
    with pytest.raises(ValueError, match="background_weight"):
        model.predict_contributions(
            rng.normal(size=(4, 3)), background=rng.normal(size=(2, 3)), background_weight=[1, -1]
        )


def test_unfitted_model_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        VIBoostClassifier().predict_contributions(np.zeros((2, 3)), background=np.zeros((2, 3)))


# --- Without a background: path-dependent values from the recorded covers -----------------------

#: The stumps above with recorded covers (training weight left, right), zero on one side too.
COVERS = [(3.0, 5.0), (2.5, 0.5), (1.0, 7.0), (6.0, 2.0), (4.0, 4.0), (0.0, 8.0)]


def _covered(stumps=STUMPS, covers=COVERS):
    return [
        DecisionStump(s.feature, s.threshold, s.polarity, s.missing_right, covers=c)
        for s, c in zip(stumps, covers, strict=True)
    ]


class NodeLearner:
    """A learner that is only its node arrays (a tree, as far as the explainer is concerned)."""

    def __init__(self, nodes):
        self.nodes = nodes


def test_no_background_stumps_use_the_covers():
    rng = np.random.default_rng(7)
    model = _model(_covered())
    X = _data(rng, 30)
    contrib = model.predict_contributions(X)
    # Each stump: alpha (h(x) - E[h]) on its feature, E[h] = polarity (right - left) / total.
    expected = np.zeros((30, 4))
    for stump, (left, right), alpha in zip(model.estimators_, COVERS, ALPHAS, strict=True):
        mean = stump.polarity * (right - left) / (left + right)
        expected[:, stump.feature] += alpha * (stump.predict(X) - mean)
        expected[:, -1] += alpha * mean
    np.testing.assert_allclose(contrib, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(contrib.sum(axis=1), model.decision_function(X), atol=1e-12)


def test_no_background_matches_shap_path_dependent():
    shap = pytest.importorskip("shap")
    from viboost.explain import shap_explainer

    rng = np.random.default_rng(8)
    # shap refuses path-dependent values for a tree with a leaf of zero cover.
    model = _model(_covered(covers=[*COVERS[:-1], (0.5, 8.0)]))
    X = _data(rng, 40)
    contrib = model.predict_contributions(X)
    explainer = shap.TreeExplainer(
        to_shap_tree_model(model), feature_perturbation="tree_path_dependent"
    )
    np.testing.assert_allclose(explainer.shap_values(X), contrib[:, :-1], rtol=0, atol=1e-12)
    assert abs(np.ravel(explainer.expected_value)[0] - contrib[0, -1]) < 1e-12
    explainer = shap_explainer(model)
    assert explainer.feature_perturbation == "tree_path_dependent"
    np.testing.assert_allclose(explainer.shap_values(X), contrib[:, :-1], rtol=0, atol=1e-12)


def _random_tree_nodes(rng, n_features, max_depth):
    """A random tree (NODE_DTYPE, preorder) whose leaves have positive covers."""
    from viboost.boosting.learners import NODE_DTYPE

    rows = []

    def grow(depth):
        index = len(rows)
        rows.append(None)
        if depth == max_depth or (depth > 0 and rng.random() < 0.3):
            cover = float(rng.uniform(0.5, 2.0))
            rows[index] = (rng.normal(), -1, 0.0, 0, False, -1, -1, True, 0.0, cover, False, 0)
            return cover
        left_index = len(rows)
        left_cover = grow(depth + 1)
        right_index = len(rows)
        right_cover = grow(depth + 1)
        feature, threshold = int(rng.integers(n_features)), float(rng.normal())
        missing_left = bool(rng.random() < 0.5)
        cover = left_cover + right_cover
        rows[index] = (0.0, feature, threshold, 0, missing_left, left_index, right_index, False,
                       1.0, cover, False, 0)  # fmt: skip
        return cover

    grow(0)
    return np.array(rows, dtype=NODE_DTYPE)


def test_trees_both_ways_match_shap():
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(9)
    trees = [NodeLearner(_random_tree_nodes(rng, 4, depth)) for depth in (0, 1, 2, 3, 4, 4)]
    model = _model(trees, rng.uniform(0.2, 1.0, size=6), n_features=4)
    X = _data(rng, 30, 4)
    contrib = model.predict_contributions(X)
    np.testing.assert_allclose(contrib.sum(axis=1), model.decision_function(X), atol=1e-12)
    explainer = shap.TreeExplainer(
        to_shap_tree_model(model), feature_perturbation="tree_path_dependent"
    )
    np.testing.assert_allclose(explainer.shap_values(X), contrib[:, :-1], rtol=0, atol=1e-12)
    assert abs(np.ravel(explainer.expected_value)[0] - contrib[0, -1]) < 1e-12
    # Interventional: against a brute-force Shapley oracle (weighted background).
    background = _data(rng, 30, 4)
    weights = rng.uniform(0.1, 2.0, size=30)
    contrib = model.predict_contributions(X[:3], background, background_weight=weights)
    for row, x in zip(contrib, X[:3], strict=True):
        phi, bias = _brute_force_shapley(model, x, background, weights)
        np.testing.assert_allclose(row[:-1], phi, atol=1e-12)
        np.testing.assert_allclose(row[-1], bias, atol=1e-12)


def test_fitted_model_without_background():
    # The booster records each stump's covers (the training weight that went left and right).
    from viboost.explain import shap_explainer

    rng = np.random.default_rng(10)
    X = _data(rng, 200, 4)
    y = (np.nan_to_num(X[:, 0]) - 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(int)
    weight = rng.integers(1, 4, size=200).astype(float)
    clf = VIBoostClassifier(10, preset="paper").fit(X, y, sample_weight=weight)
    covers = np.array([learner.nodes["cover"] for learner in clf.estimators_])
    assert np.isfinite(covers).all()
    contrib = clf.predict_contributions(X)
    np.testing.assert_allclose(contrib.sum(axis=1), clf.decision_function(X), atol=1e-12)
    # For stumps, the training rows and weights as an (interventional) background give the
    # path-dependent values of the training covers.
    interventional = clf.predict_contributions(X, background=X, background_weight=weight)
    np.testing.assert_allclose(contrib, interventional, rtol=0, atol=1e-12)
    # shap (optional) refuses leaves of zero cover.
    if importlib.util.find_spec("shap") is not None and (covers > 0).all():
        values = shap_explainer(clf).shap_values(X)
        np.testing.assert_allclose(values, contrib[:, :-1], rtol=0, atol=1e-12)


def test_model_without_recorded_covers_needs_a_background():
    # A model pickled by a version that did not record covers: NaN covers.
    from dataclasses import replace

    rng = np.random.default_rng(11)
    X = _data(rng, 100, 3)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int)
    clf = VIBoostClassifier(5, preset="paper").fit(X, y)
    clf.estimators_ = [replace(stump, covers=None) for stump in clf.estimators_]
    with pytest.raises(ValueError, match="did not record covers; pass background="):
        clf.predict_contributions(X[:5])
    with pytest.raises(ValueError, match="did not record covers"):
        to_shap_tree_model(clf)
    contrib = clf.predict_contributions(X[:5], background=X)
    np.testing.assert_allclose(contrib.sum(axis=1), clf.decision_function(X[:5]), atol=1e-12)


def test_shap_tree_explainer_agrees():
    shap = pytest.importorskip("shap")
    from viboost.explain import shap_explainer

    rng = np.random.default_rng(6)
    X = _data(rng, 1400, 4)
    y = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(int)
    clf = VIBoostClassifier(20, preset="paper").fit(X, y)
    background, rows = X[:1200], X[1200:]
    contrib = clf.predict_contributions(rows, background=background)

    # Interventional TreeSHAP over all 1200 background rows (shap's default masker would keep
    # 100). shap 0.51 holds the per-leaf terms of this algorithm as float32 (pos_lst/neg_lst in
    # tree_shap_indep), so it agrees to about |alpha| * 2**-24 per stump ...
    explainer = shap_explainer(clf, background)
    assert explainer.data.shape == background.shape
    values = explainer.shap_values(rows)
    interventional_diff = np.abs(values - contrib[:, :-1]).max()
    print(f"interventional (1200 background rows) max abs difference: {interventional_diff:.3g}")
    assert interventional_diff < 1e-6 * np.abs(clf.alphas_).sum()
    assert abs(explainer.expected_value - contrib[0, -1]) < 1e-12
    # ... and to float64 rounding once our alphas are rounded the same way.
    alphas32 = clf.alphas_.astype(np.float32).astype(np.float64)
    rounded = learner_contributions(clf.estimators_, alphas32, rows, background)
    rounded_diff = np.abs(values - rounded[:, :-1]).max()
    print(f"interventional, float32 alphas, max abs difference: {rounded_diff:.3g}")
    assert rounded_diff < 1e-10

    # Path-dependent TreeSHAP with the background weights as covers: float64 throughout.
    weights = rng.uniform(0.5, 1.5, size=background.shape[0])
    tree_model = to_shap_tree_model(clf, background, background_weight=weights)
    path = shap.TreeExplainer(tree_model, feature_perturbation="tree_path_dependent")
    weighted = clf.predict_contributions(rows, background=background, background_weight=weights)
    path_diff = np.abs(path.shap_values(rows) - weighted[:, :-1]).max()
    print(f"path-dependent (background covers) max abs difference: {path_diff:.3g}")
    assert path_diff < 1e-10
    assert abs(np.ravel(path.expected_value)[0] - weighted[0, -1]) < 1e-10

    # Path-dependent TreeSHAP with the covers recorded in fit, no background.
    recorded = clf.predict_contributions(rows)
    path = shap_explainer(clf)
    recorded_diff = np.abs(path.shap_values(rows) - recorded[:, :-1]).max()
    print(f"path-dependent (recorded covers) max abs difference: {recorded_diff:.3g}")
    assert recorded_diff < 1e-12
    assert abs(np.ravel(path.expected_value)[0] - recorded[0, -1]) < 1e-12


# --- K classes (issue 23): one array per class, shap's multi-output layout ----------------------
@pytest.fixture(scope="module")
def three_class_fit():
    rng = np.random.default_rng(11)
    X = _data(rng, 300, 4)
    score = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    y = np.array(["ant", "bee", "cat"])[np.digitize(score, [-0.4, 0.4])]
    return VIBoostClassifier(random_state=0).fit(X, y), X


def test_k_class_contributions_sum_to_each_class_margin(three_class_fit):
    clf, X = three_class_fit
    rows, background = X[:25], X[100:220]
    margins = clf.decision_function(rows)
    assert margins.shape == (25, 3)
    weights = np.random.default_rng(0).uniform(0.5, 2.0, background.shape[0])
    for kwargs in ({}, {"background": background}, {"background": background,
                                                     "background_weight": weights}):  # fmt: skip
        contrib = clf.predict_contributions(rows, **kwargs)
        assert contrib.shape == (25, X.shape[1] + 1, 3)
        np.testing.assert_allclose(contrib.sum(axis=1), margins, atol=1e-10)
        # The bias of each class is the same on every row.
        np.testing.assert_allclose(contrib[:, -1, :], np.broadcast_to(contrib[0, -1], (25, 3)))
        # The function gives what the method gives, and class k's slice is the explanation of
        # class k's ensemble alone.
        np.testing.assert_array_equal(predict_contributions(clf, rows, **kwargs), contrib)
        for k in range(3):
            learners = [per_class[k] for per_class in clf.estimators_]
            alone = learner_contributions(
                learners,
                clf.alphas_[:, k],
                rows,
                kwargs.get("background"),
                background_weight=kwargs.get("background_weight"),
            )
            np.testing.assert_allclose(contrib[:, :, k], alone, rtol=0, atol=1e-12)


def test_k_class_shap_tree_model_and_explainer(three_class_fit):
    clf, X = three_class_fit
    n_rounds = len(clf.estimators_)
    tree_model = to_shap_tree_model(clf)
    assert len(tree_model["trees"]) == 3 * n_rounds
    for index, tree in enumerate(tree_model["trees"]):
        values = tree["values"]
        assert values.shape[1] == 3
        own = index // n_rounds  # class 0's trees first, then class 1's, then class 2's
        assert not np.any(np.delete(values, own, axis=1))
    shap = pytest.importorskip("shap")
    from viboost.explain import shap_explainer

    rows = X[:20]
    explainer = shap_explainer(clf)
    values = explainer.shap_values(rows)
    contrib = clf.predict_contributions(rows)
    assert np.shape(values) == (20, X.shape[1], 3)
    np.testing.assert_allclose(values, contrib[:, :-1, :], atol=1e-10)
    np.testing.assert_allclose(explainer.expected_value, contrib[0, -1, :], atol=1e-10)
    background = X[100:220]
    explainer = shap_explainer(clf, background)
    against = clf.predict_contributions(rows, background=background)
    values = explainer.shap_values(rows)
    assert np.shape(values) == (20, X.shape[1], 3)
    # shap's interventional algorithm keeps its per-leaf terms in float32 (see above).
    assert np.abs(values - against[:, :-1, :]).max() < 1e-6 * np.abs(clf.alphas_).sum()
    np.testing.assert_allclose(explainer.expected_value, against[0, -1, :], atol=1e-10)
    assert isinstance(shap.TreeExplainer(tree_model), shap.TreeExplainer)


def test_k_class_views_and_unfitted_input():
    from sklearn.exceptions import NotFittedError

    class Bare:  # neither an estimator nor fitted
        n_features_in_ = 3

    with pytest.raises(NotFittedError, match="Bare has no estimators_ and alphas_"):
        predict_contributions(Bare(), np.zeros((2, 3)))
    clf = _model()
    clf.alphas_ = np.ones((2, 3))  # alphas of 2 rounds for 6 rounds of learners
    with pytest.raises(ValueError, match=r"alphas_ of shape \(2, 3\) does not match 6 rounds"):
        predict_contributions(clf, np.zeros((2, 3)), background=np.zeros((2, 3)))


def _categorical_fit():
    import pandas as pd

    rng = np.random.default_rng(5)
    colour = rng.choice(["red", "green", "blue", "grey", "pink", "teal"], size=400)
    colour[:20] = None  # missing values
    x = rng.normal(size=400)
    y = (np.isin(colour, ["red", "blue", "teal"]) ^ (x > 1.0)).astype(int)
    X = pd.DataFrame({"colour": colour, "x": x})
    return X, VIBoostClassifier(random_state=0, n_estimators=20).fit(X, y)


def test_node_covers_of_category_set_splits_follow_the_categories():
    from viboost.explain import _node_covers

    X, clf = _categorical_fit()
    codes = clf._validate_X(X)
    tree = next(t for t in clf.estimators_ if t.nodes.size > 1 and t.nodes["is_categorical"][0])
    root = tree.nodes[0]
    covers = _node_covers(tree.nodes, codes, np.ones(len(X)))
    # The left set by name, against the frame itself (not the codes).
    bits = np.unpackbits(
        np.asarray(root["left_categories"], "<u8").view(np.uint8), bitorder="little"
    )
    names = clf.categories_[0][np.flatnonzero(bits[: len(clf.categories_[0])])]
    missing = X["colour"].isna().to_numpy()
    left = np.where(missing, bool(root["missing_left"]), X["colour"].isin(names).to_numpy())
    assert covers[root["left"]] == left.sum() and covers[root["right"]] == (~left).sum()
    assert covers[0] == len(X)


def test_shap_tree_model_refuses_category_set_splits():
    X, clf = _categorical_fit()
    with pytest.raises(ValueError, match="categorical features.*predict_contributions"):
        to_shap_tree_model(clf)
    # The model's own TreeSHAP takes them: contributions add up to the margin.
    contributions = predict_contributions(clf, X.head(30))
    np.testing.assert_allclose(
        contributions.sum(axis=1), clf.decision_function(X.head(30)), rtol=1e-9, atol=1e-9
    )
