"""viboost.boosting.predictor: the compiled prediction over node arrays against the learners'
own ``predict`` accumulated round by round, and against a tree walk written here."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.learners import NODE_DTYPE
from viboost.boosting.predictor import EnsemblePredictor, predict_ensemble
from viboost.boosting.stumps import DecisionStump


class _Tree:
    """A learner given by its node arrays, with a reference predict written here."""

    def __init__(self, nodes: np.ndarray) -> None:
        self.nodes = nodes

    def predict(self, X: np.ndarray) -> np.ndarray:
        out = np.empty(X.shape[0])
        for i, row in enumerate(X):
            node = self.nodes[0]
            while not node["is_leaf"]:
                x = row[node["feature"]]
                go_left = node["missing_left"] if np.isnan(x) else x <= node["threshold"]
                node = self.nodes[node["left"] if go_left else node["right"]]
            out[i] = node["value"]
        return out


def _random_tree(rng: np.random.Generator, n_features: int, depth: int) -> _Tree:
    """A full tree of the given depth in breadth-first order, leaves valued +-1 or a float."""
    n_inner = 2**depth - 1
    nodes = np.zeros(2 ** (depth + 1) - 1, dtype=NODE_DTYPE)
    for i in range(nodes.size):
        if i < n_inner:
            nodes[i] = (0.0, rng.integers(n_features), np.round(rng.standard_normal(), 1), -2,
                        rng.random() < 0.5, 2 * i + 1, 2 * i + 2, False, 1.0, np.nan,
                        False, 0)  # fmt: skip
        else:
            nodes[i] = (rng.choice([-1.0, 1.0, rng.standard_normal()]), -1, 0.0, 0, False, -1, -1,
                        True, 0.0, np.nan, False, 0)  # fmt: skip
    return _Tree(nodes)


@pytest.mark.parametrize("n", [1, 1000, 3001])
def test_predict_ensemble_bit_equals_round_by_round_accumulation(n):
    rng = np.random.default_rng(n)
    X = np.round(rng.standard_normal((n, 6)), 1)
    X[rng.random(X.shape) < 0.1] = np.nan
    stumps = [
        DecisionStump(
            int(rng.integers(6)),
            float(rng.choice([-np.inf, np.round(rng.standard_normal(), 1), rng.standard_normal()])),
            int(rng.choice([-1, 1])),
            bool(rng.random() < 0.5),
        )
        for _ in range(60)
    ]
    alphas = rng.standard_normal(60) * 10.0 ** rng.integers(-8, 3, size=60)
    margin = np.zeros(n)
    for alpha, stump in zip(alphas, stumps, strict=True):
        margin += alpha * stump.predict(X)
    result = predict_ensemble(X, stumps, alphas)
    assert result.tobytes() == margin.tobytes()  # bit-equal, not approximately equal
    np.testing.assert_array_equal(predict_ensemble(np.asfortranarray(X), stumps, alphas), margin)


def test_predict_ensemble_edge_cases():
    X = np.array([[1.0, np.nan], [-1.0, 2.0]])
    np.testing.assert_array_equal(predict_ensemble(X, [], []), [0.0, 0.0])
    with pytest.raises(ValueError, match="alphas"):
        predict_ensemble(X, [DecisionStump(0, 0.0, 1, False)], [1.0, 2.0])
    with pytest.raises(ValueError, match="feature"):
        predict_ensemble(X, [DecisionStump(2, 0.0, 1, False)], [1.0])
    with pytest.raises(ValueError, match="2-D"):
        predict_ensemble(X[0], [DecisionStump(0, 0.0, 1, False)], [1.0])


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_trees_of_any_depth_follow_the_reference_walk(depth):
    rng = np.random.default_rng(depth)
    X = np.round(rng.standard_normal((700, 4)), 1)
    X[rng.random(X.shape) < 0.1] = np.nan
    trees = [_random_tree(rng, 4, depth) for _ in range(12)]
    alphas = rng.standard_normal(12)
    margin = np.zeros(X.shape[0])
    for alpha, tree in zip(alphas, trees, strict=True):
        margin += alpha * tree.predict(X)
    np.testing.assert_allclose(predict_ensemble(X, trees, alphas), margin, rtol=1e-14, atol=1e-14)


def test_predictor_concatenates_node_arrays_with_offsets():
    stumps = [DecisionStump(0, 1.0, 1, False), DecisionStump(1, 1.0, -1, True)]
    predictor = EnsemblePredictor(stumps, [0.5, 0.25])
    np.testing.assert_array_equal(predictor.roots, [0, 3])
    np.testing.assert_array_equal(predictor.left, [1, -1, -1, 4, -1, -1])
    np.testing.assert_array_equal(predictor.scaled, [0.0, -0.5, 0.5, 0.0, 0.25, -0.25])
