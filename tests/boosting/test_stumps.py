"""The exact stump search against brute-force enumeration written here; the binned search
against the exact search; DecisionStump as a learner (node arrays, binned outputs, gains,
Shapley values) against its own predict and a formula written here."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from viboost.boosting.histogram import binned_histogram, occupied_bins
from viboost.boosting.stumps import (
    BinnedStumpSearch,
    DecisionStump,
    ExactStumpSearch,
    best_binned_stump,
    predict_stumps,
)
from viboost.boosting.tree_shap import interventional_tree_shap


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


# --- BinnedStumpSearch and predict_ensemble ------------------------------------------------------


def few_valued_data(seed, n=400, d=5):
    """Integer features (<= 255 distinct values each), NaN, a constant and an all-NaN column."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.integers(0, high, size=n) for high in rng.integers(2, 250, size=d)]
    ).astype(float)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 1] = rng.integers(0, 3, size=n)  # no NaN: the NaN side is decided by weight
    X[:, 3] = 7.0 if seed % 2 else np.nan
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    active = rng.random(n) < 0.85
    return rng, X, y, active


@pytest.mark.parametrize("seed", range(4))
def test_binned_search_matches_exact_search(seed):
    rng, X, y, active = few_valued_data(seed)
    exact = ExactStumpSearch(X, active=active)
    binned = BinnedStumpSearch(X, active=active, subsample=150, random_state=seed)
    assert binned.binner_.exact_.all()
    for trial in range(40):
        d = rng.random(X.shape[0]) ** 4
        d[~active] = 0.0
        if trial % 4 == 0:
            d[rng.random(X.shape[0]) < 0.5] = 0.0  # active rows of zero weight this round
        if trial % 5 == 0:
            d = np.where(y > 0, d, 0.0) + 1e-3 * active  # near-trivial, many ties
        d /= d.sum()
        expected, expected_error = exact.best(d, y)
        stump, error = binned.best(d, y)
        assert stump == expected
        assert error == pytest.approx(expected_error, abs=1e-12)
        assert binned.split_bin(stump) == stump.split_bin
        np.testing.assert_array_equal(binned.outputs(stump), stump.predict(X))


def test_binned_search_on_quantile_bins_reports_its_stumps_error():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((2000, 3))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.where(X[:, 1] + 0.5 * rng.standard_normal(2000) > 0.3, 1.0, -1.0)
    binned = BinnedStumpSearch(X, max_bins=32, subsample=500, random_state=0)
    exact = ExactStumpSearch(X)
    for _ in range(10):
        d = rng.random(2000)
        d /= d.sum()
        stump, error = binned.best(d, y)
        h = binned.outputs(stump)
        np.testing.assert_array_equal(h, stump.predict(X))
        assert error == pytest.approx(d[h != y].sum(), abs=1e-12)
        assert error >= exact.best(d, y)[1] - 1e-12  # fewer candidate thresholds


def test_binned_search_normalises_weights():
    _, X, y, active = few_valued_data(6)
    d = np.where(active, np.arange(X.shape[0]) % 7 + 1.0, 0.0)
    search = BinnedStumpSearch(X, active=active)
    stump, error = search.best(3.0 * d, y)
    normalised_stump, normalised_error = search.best(d / d.sum(), y)
    assert stump == normalised_stump
    assert error == pytest.approx(normalised_error, abs=1e-12)
    assert stump == ExactStumpSearch(X, active=active).best(d / d.sum(), y)[0]


def test_binned_search_is_the_same_for_any_thread_count():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((100_000, 4))  # several histogram chunks
    X[rng.random(X.shape) < 0.02] = np.nan
    y = np.where(X[:, 2] + rng.standard_normal(100_000) > 0, 1.0, -1.0)
    d = rng.random(100_000)
    d /= d.sum()
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            search = BinnedStumpSearch(X, subsample=20_000, random_state=0)
            stump, error = search.best(d, y)
            results.append((search.binned_.copy(), stump, error, search.outputs(stump)))
    finally:
        numba.set_num_threads(before)
    (bins_1, stump_1, error_1, h_1), (bins_2, stump_2, error_2, h_2) = results
    np.testing.assert_array_equal(bins_1, bins_2)
    assert stump_1 == stump_2
    assert error_1 == error_2  # bit-identical, not approximately equal
    np.testing.assert_array_equal(h_1, h_2)


def test_binned_search_keeps_both_layouts():
    _, X, _, _ = few_valued_data(8)
    search = BinnedStumpSearch(X)
    assert search.binned_.flags.c_contiguous and search.binned_.shape == X.shape
    assert search.binned_columns_.flags.c_contiguous
    np.testing.assert_array_equal(search.binned_columns_, search.binned_.T)


def test_outputs_rejects_a_foreign_threshold():
    search = BinnedStumpSearch(np.array([[0.0], [1.0], [2.0]]))
    np.testing.assert_array_equal(
        search.outputs(DecisionStump(0, -np.inf, -1, True)), [-1.0, -1.0, -1.0]
    )
    with pytest.raises(ValueError, match="not a bin edge"):
        search.outputs(DecisionStump(0, 0.7, 1, False))
    with pytest.raises(ValueError, match="out of range"):
        search.outputs(DecisionStump(3, 0.5, 1, False))


def test_binned_search_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="no feature columns"):
        BinnedStumpSearch(np.zeros((4, 0)))
    with pytest.raises(ValueError, match="max_bins"):
        BinnedStumpSearch(np.zeros((4, 1)), max_bins=256)
    with pytest.raises(ValueError, match="max_bins"):
        BinnedStumpSearch(np.zeros((4, 1)), max_bins=1)
    with pytest.raises(ValueError, match="active"):
        BinnedStumpSearch(np.zeros((4, 1)), active=np.ones(3, dtype=bool))
    search = BinnedStumpSearch(np.zeros((4, 1)))
    with pytest.raises(ValueError, match="shape"):
        search.best(np.full(3, 1 / 3), np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        search.best(np.array([np.inf, 0.0, 0.0, 0.0]), np.ones(4))


def test_restricted_search_splits_a_gap_where_the_exact_search_would():
    """Bins the search's rows leave empty tie; the split goes to the exact search's midpoint
    between its rows' values around the gap, not to the gap's lowest edge."""
    X = np.arange(10.0)[:, None]  # 10 exact bins, values 0..9
    y = np.where(X[:, 0] > 4.5, 1.0, -1.0)
    active = np.isin(X[:, 0], [0, 1, 2, 7, 8, 9])  # rows 3-6 are someone else's
    weights = np.where(active, 1.0 / active.sum(), 0.0)
    restricted = BinnedStumpSearch(X).restricted(active)
    stump, error = restricted.best(weights, y)
    exact, _ = ExactStumpSearch(X, active=active).best(weights, y)
    assert error == 0.0
    assert exact.threshold == 4.5
    assert stump.threshold == 4.5  # the shared edge between the values 4 and 5
    np.testing.assert_array_equal(stump.predict(X), exact.predict(X))
    # The unrestricted search over the same bins is unchanged: every bin is occupied.
    full, _ = BinnedStumpSearch(X).best(np.full(10, 0.1), y)
    assert full.threshold == 4.5


def test_restricted_search_shares_the_bins():
    X = np.random.default_rng(0).normal(size=(50, 3))
    search = BinnedStumpSearch(X)
    sub = search.restricted(np.arange(50) < 30)
    assert sub.binned_ is search.binned_ and sub.binner_ is search.binner_
    with pytest.raises(ValueError, match="active must have shape"):
        search.restricted(np.ones(3, dtype=bool))


def test_best_binned_stump_normalises_a_histogram_and_rejects_nan():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([-1.0, -1.0, 1.0, 1.0])
    search = BinnedStumpSearch(X)
    hist = binned_histogram(search.binned_, np.full(4, 5.0), y, np.ones(4, dtype=bool))
    occupied = occupied_bins(search.binned_, np.ones(4, dtype=bool))
    stump, error = best_binned_stump(hist, search.binner_, occupied)
    assert (stump.threshold, error, stump.split_bin + 1) == (1.5, 0.0, 2)
    hist[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        best_binned_stump(hist, search.binner_, occupied)


def test_stump_nodes_binned_outputs_and_gains_agree_with_predict():
    rng = np.random.default_rng(4)
    X = np.round(rng.standard_normal((300, 3)), 1)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.where(X[:, 1] > 0.2, 1.0, -1.0)
    search = BinnedStumpSearch(X)
    stump, error = search.best(np.full(300, 1 / 300), y)
    assert stump.split_bin is not None and stump.gain == 1.0 - 2.0 * error
    np.testing.assert_array_equal(stump.binned_outputs(search.binned_columns_), stump.predict(X))
    nodes = stump.nodes
    assert nodes["bin_threshold"][0] == stump.split_bin
    assert nodes["missing_left"][0] == (not stump.missing_right)
    np.testing.assert_array_equal(nodes["value"][1:], [-stump.polarity, stump.polarity])
    features, gains = stump.split_gains()
    np.testing.assert_array_equal(features, [stump.feature])
    np.testing.assert_array_equal(gains, [stump.gain])
    constant = DecisionStump(0, -np.inf, 1, True)
    assert constant.is_constant and constant.split_gains()[0].size == 0
    with pytest.raises(ValueError, match="binned search"):
        DecisionStump(0, 0.5, 1, False).binned_outputs(search.binned_columns_)
    exact, exact_error = ExactStumpSearch(X).best(np.full(300, 1 / 300), y)
    assert exact.split_bin is None and exact.gain == 1.0 - 2.0 * exact_error


def test_stump_shapley_values_are_its_centred_output_on_its_feature():
    rng = np.random.default_rng(5)
    X, background = rng.standard_normal((7, 3)), rng.standard_normal((50, 3))
    background[::5, 2] = np.nan
    weights = rng.random(50)
    stump = DecisionStump(2, 0.1, -1, True)
    values, expected = interventional_tree_shap(stump.nodes, X, background, weights)
    h_background = stump.predict(background)
    assert expected == pytest.approx(np.average(h_background, weights=weights), abs=1e-15)
    np.testing.assert_allclose(values[:, 2], stump.predict(X) - expected, atol=1e-15)
    assert not values[:, :2].any()
