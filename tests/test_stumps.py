"""The exact stump search against brute-force enumeration written here."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.stumps import DecisionStump, ExactStumpSearch, predict_stumps


def brute_force_best_error(X, y, d, active):
    """Least weighted error over every threshold between active values, polarity, NaN side."""
    best = np.inf
    for j in range(X.shape[1]):
        col = X[:, j]
        values = np.unique(col[active & ~np.isnan(col)])
        for thr in np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2]):
            for polarity in (1, -1):
                for missing_right in (False, True):
                    h = DecisionStump(j, thr, polarity, missing_right).predict(X)
                    best = min(best, d[h != y].sum())
    return best


@pytest.mark.parametrize("seed", range(5))
def test_search_finds_the_least_weighted_error(seed):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(40, 3)), 1)  # ties in values
    X[rng.random(X.shape) < 0.15] = np.nan
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    d = rng.random(40)
    active = rng.random(40) < 0.8
    d[~active] = 0
    d /= d.sum()
    stump, error = ExactStumpSearch(X, active=active).best(d, y)
    assert error == pytest.approx(brute_force_best_error(X, y, d, active), abs=1e-12)
    # The reported error is the stump's own error.
    assert error == pytest.approx(d[stump.predict(X) != y].sum(), abs=1e-12)


def test_threshold_between_adjacent_floats_separates_them():
    a = 1.0
    b = np.nextafter(a, 2.0)
    X = np.array([[a], [b]])
    stump, error = ExactStumpSearch(X).best(np.array([0.5, 0.5]), np.array([-1.0, 1.0]))
    assert error == 0.0
    np.testing.assert_array_equal(stump.predict(X), [-1.0, 1.0])


def test_zero_weight_rows_place_no_threshold():
    X = np.array([[0.0], [1.0], [5.0], [10.0]])
    y = np.array([-1.0, -1.0, 1.0, 1.0])
    active = np.array([True, False, True, True])
    stump, _ = ExactStumpSearch(X, active=active).best(np.array([1 / 3, 0, 1 / 3, 1 / 3]), y)
    assert stump.threshold == 2.5  # midpoint of the active values 0 and 5, not of 1 and 5


def test_predict_stumps_stacks_outputs():
    X = np.array([[0.0, 3.0], [2.0, np.nan]])
    stumps = [DecisionStump(0, 1.0, 1, False), DecisionStump(1, 1.0, -1, True)]
    np.testing.assert_array_equal(predict_stumps(stumps, X), [[-1, 1], [-1, -1]])
