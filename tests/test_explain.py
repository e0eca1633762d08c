"""Exact per-feature contributions (viboost.explain, VIBoostClassifier.predict_contributions)."""

from __future__ import annotations

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
    with pytest.raises(ValueError, match="background"):
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


def test_shap_tree_explainer_agrees():
    shap = pytest.importorskip("shap")
    from viboost.explain import shap_explainer

    rng = np.random.default_rng(6)
    X = _data(rng, 150, 4)
    y = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(int)
    clf = VIBoostClassifier(20, preset="paper").fit(X, y)
    background, rows = X[:60], X[60:]
    contrib = clf.predict_contributions(rows, background=background)

    # Interventional TreeSHAP. shap 0.51 holds the leaf values as float32 in this algorithm
    # (pos_lst/neg_lst in tree_shap_indep), so it agrees to about |alpha| * 2**-24 per stump ...
    explainer = shap_explainer(clf, background)
    values = explainer.shap_values(rows)
    interventional_diff = np.abs(values - contrib[:, :-1]).max()
    print(f"interventional max abs difference: {interventional_diff:.3g}")
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
    print(f"path-dependent max abs difference: {path_diff:.3g}")
    assert path_diff < 1e-10
    assert abs(np.ravel(path.expected_value)[0] - weighted[0, -1]) < 1e-10
