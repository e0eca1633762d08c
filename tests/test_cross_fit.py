"""viboost.noise_fit.cross_fit: the folds, the score of a round count and the early-stopping
rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_expit
from sklearn.model_selection import KFold

from viboost.noise_fit.cross_fit import CV_TOL, RoundCountSearch, cross_fit_folds, score_out_of_fold
from viboost.variational import ModelPriors


def test_round_count_search_keeps_the_best_and_stops_after_patience():
    search = RoundCountSearch(patience=20, total_weight=100.0)
    margin = CV_TOL * 100.0  # the smallest gain that counts
    assert not search.update(10, -50.0, "a")
    assert not search.update(20, -40.0, "b")
    assert not search.update(30, -40.0 + margin / 2, "c")  # not enough to count
    assert search.best[:3] == (20, -40.0, "b")
    assert search.update(40, -39.0 - margin / 2 - 1.0, "d")  # 20 rounds after the best: stop
    np.testing.assert_array_equal(search.rounds, [10, 20, 30, 40])
    assert search.scores[0] == -50.0


def test_round_count_search_without_patience_never_stops():
    search = RoundCountSearch(patience=None, total_weight=1.0)
    assert not any(search.update(r, -float(r), None) for r in range(10, 1000, 10))
    assert search.best[0] == 10


def test_int_cv_gives_stratified_folds_over_weighted_rows_only():
    y = np.array([1.0, -1.0] * 10)
    weighted = np.ones(20, dtype=bool)
    weighted[:2] = False
    folds = cross_fit_folds(3, y, weighted, random_state=0)
    validation = np.sort(np.concatenate([val for _, val in folds]))
    np.testing.assert_array_equal(validation, np.arange(2, 20))
    for train, val in folds:
        assert np.intersect1d(train, val).size == 0
        assert set(np.unique(y[val])) == {-1.0, 1.0}
    again = cross_fit_folds(3, y, weighted, random_state=0)  # seeded: the same folds
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))


def test_too_few_rows_in_a_class_warns_and_gives_none():
    y = np.array([1.0, -1.0, -1.0, -1.0])
    with pytest.warns(UserWarning, match="fitted in-sample"):
        assert cross_fit_folds(5, y, np.ones(4, dtype=bool), random_state=0) is None


def test_a_splitter_is_used_as_given_and_zero_weight_training_rows_dropped():
    y = np.array([1.0, -1.0] * 6)
    weighted = np.ones(12, dtype=bool)
    weighted[5] = False
    folds = cross_fit_folds(KFold(3), y, weighted, random_state=None)
    assert len(folds) == 3
    assert all(5 not in train for train, _ in folds)
    np.testing.assert_array_equal(folds[0][1], np.arange(4))


def test_score_is_the_logistic_log_likelihood_for_the_core_model():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
    margin, weight = rng.normal(size=50), rng.random(50)
    score, calibration = score_out_of_fold(y, margin, weight, ModelPriors(), noise_model=False)
    assert calibration is None
    assert score == pytest.approx(float(np.sum(weight * log_expit(y * margin))), rel=1e-12)
    score, calibration = score_out_of_fold(y, margin, weight, ModelPriors(), noise_model=True)
    assert score == calibration.log_likelihood
