"""viboost.noise: label quality, label issues and the flip rate, from one fit, against the
fitted estimator's own attributes and the rules written here (the Bayes decision, the expected
count, per-class top-k), on labels flipped at random."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from viboost import VIBoostClassifier
from viboost.noise import (
    FlipRateEstimate,
    estimate_flip_rate,
    find_label_issues,
    label_quality_scores,
)


@pytest.fixture(scope="module")
def noisy():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(500, 3))
    y = np.where(X[:, 0] - X[:, 2] > 0, "spam", "ham")
    flipped = rng.random(500) < 0.2
    y_noisy = np.where(flipped, np.where(y == "spam", "ham", "spam"), y)
    # An additive (linear) boundary: stumps fit it exactly, and the noise statistics of the
    # API are checked on their fit. The default's 8-leaf trees estimate 12% here (true 17%);
    # trees are checked on an interaction in tests/boosting/test_trees.py.
    stumps = {"max_leaf_nodes": 2, "leaf_weights": "tied", "min_samples_leaf": 1}
    model = VIBoostClassifier(random_state=0, **stumps).fit(X, y_noisy)
    return X, y_noisy, flipped, model


def test_label_quality_is_the_probability_the_label_is_right(noisy):
    X, y, flipped, model = noisy
    scores = label_quality_scores(X, y, estimator=model)
    np.testing.assert_array_equal(scores, 1.0 - model.mislabel_proba_)
    assert np.all((scores >= 0) & (scores <= 1))
    assert roc_auc_score(flipped, -scores) > 0.9


def test_an_unfitted_estimator_is_cloned_and_fitted(noisy):
    X, y, _, model = noisy
    template = VIBoostClassifier(**model.get_params())
    scores = label_quality_scores(X, y, estimator=template)
    assert not hasattr(template, "estimators_")
    np.testing.assert_array_equal(scores, 1.0 - model.mislabel_proba_)
    default = label_quality_scores(X, y, random_state=0)
    trees = label_quality_scores(X, y, estimator=VIBoostClassifier(random_state=0))
    np.testing.assert_array_equal(default, trees)


def test_cv_refits_with_that_many_folds(noisy):
    X, y, flipped, model = noisy
    scores = label_quality_scores(X, y, estimator=model, cv=3)
    assert not np.array_equal(scores, 1.0 - model.mislabel_proba_)
    assert roc_auc_score(flipped, -scores) > 0.85


def test_find_label_issues_mask_and_ranking(noisy):
    X, y, flipped, model = noisy
    mask = find_label_issues(X, y, estimator=model)
    assert mask.dtype == bool and mask.shape == y.shape
    np.testing.assert_array_equal(mask, model.mislabel_proba_ > 0.5)
    ranked = find_label_issues(X, y, estimator=model, return_indices_ranked_by="self_confidence")
    assert set(ranked) == set(np.flatnonzero(mask))
    assert np.all(np.diff(model.mislabel_proba_[ranked]) <= 0)  # most suspicious first
    assert flipped[mask].mean() > 0.7


def test_find_label_issues_by_expected_count(noisy):
    X, y, _, model = noisy
    mask = find_label_issues(X, y, estimator=model, filter_by="expected_count")
    assert mask.sum() == round(model.mislabel_proba_.sum())
    half = find_label_issues(X, y, estimator=model, filter_by="expected_count", frac_noise=0.5)
    assert half.sum() == round(0.5 * model.mislabel_proba_.sum())
    assert np.all(mask[half])


def test_find_label_issues_per_class(noisy):
    X, y, _, model = noisy
    ranked = find_label_issues(
        X,
        y,
        estimator=model,
        num_to_remove_per_class=[3, 5],
        return_indices_ranked_by="self_confidence",
    )
    assert (y[ranked] == "ham").sum() == 3 and (y[ranked] == "spam").sum() == 5
    worst_ham = np.flatnonzero(y == "ham")[np.argsort(-model.mislabel_proba_[y == "ham"])[:3]]
    assert set(worst_ham) <= set(ranked)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"filter_by": "prune_by_noise_rate"}, "filter_by"),
        ({"return_indices_ranked_by": "normalized_margin"}, "return_indices_ranked_by"),
        ({"frac_noise": 1.5}, "frac_noise"),
        ({"num_to_remove_per_class": [1]}, "one count per class"),
        ({"num_to_remove_per_class": [1, -1]}, ">= 0"),
    ],
)
def test_find_label_issues_rejects_bad_arguments(noisy, kwargs, match):
    X, y, _, model = noisy
    with pytest.raises(ValueError, match=match):
        find_label_issues(X, y, estimator=model, **kwargs)


def test_a_fitted_estimator_must_match_the_rows(noisy):
    X, y, _, model = noisy
    with pytest.raises(ValueError, match="500 rows but 499 labels"):
        label_quality_scores(X[:-1], y[:-1], estimator=model)
    with pytest.raises(TypeError, match="VIBoostClassifier"):
        label_quality_scores(X, y, estimator=object())


def test_estimate_flip_rate(noisy):
    X, y, flipped, model = noisy
    est = estimate_flip_rate(X, y, estimator=model)
    assert isinstance(est, FlipRateEstimate) and est.calibrated and est.level == 0.9
    assert est.rate == model.noise_rate_
    # The interval holds the flipped share; the rate is the posterior mean, pulled towards 0
    # by the posterior mass of no noise (docs/label_noise.md, "What the labels can say").
    assert est.interval[0] <= flipped.mean() <= est.interval[1]
    assert abs(est.rate - flipped.mean()) < 0.08
    assert est.interval[0] < est.rate < est.interval[1]
    assert est.n_wrong == pytest.approx(est.rate * 500, rel=1e-12)
    np.testing.assert_array_equal(est.classes, ["ham", "spam"])
    wide = estimate_flip_rate(X, y, estimator=model, level=0.99, random_state=0)
    assert wide.interval[1] - wide.interval[0] > est.interval[1] - est.interval[0]
    assert wide.rate == est.rate


def test_paper_preset_is_a_ranking_without_intervals(noisy):
    X, y, _, _ = noisy
    paper = VIBoostClassifier(preset="paper").fit(X, y)
    est = estimate_flip_rate(X, y, estimator=paper)
    assert not est.calibrated and np.isnan(est.interval).all()
