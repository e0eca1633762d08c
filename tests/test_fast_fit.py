"""Contracts of the fast fit (issue 3): same answers as the exhaustive engine, whatever the threads.

- With at most ``max_bins`` distinct values per feature, the binned search picks the stumps of the
  exhaustive search, so the whole fit (stumps, alphas, noise statistics) is the same.
- A fit is bit-identical for any ``n_jobs`` (numba threads), on rows and on pseudo-rows.
- Quantile binning (more distinct values than bins) still fits well, with thresholds in the units
  of ``X``.
"""

from __future__ import annotations

import numpy as np
import pytest

import viboost._parallel as viboost_parallel
from viboost import VIBoostClassifier


def _integer_data(n, seed=0):
    """Features with few distinct values (integers, some NaN), labels with 10% flipped."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 40, size=(n, 5)).astype(float)
    X[:, 3] = rng.integers(0, 255, size=n)  # exactly at the limit of 255 distinct values
    X[rng.random(n) < 0.05, 2] = np.nan
    score = (X[:, 0] - 20) / 10 - (X[:, 1] - 20) / 15 + (X[:, 3] - 127) / 100
    y = (score + 0.5 * rng.normal(size=n) > 0).astype(int)
    y[rng.random(n) < 0.1] ^= 1
    return X, y


@pytest.mark.parametrize(
    ("n", "kwargs"),
    [(600, {}), (600, {"alpha": "exact"}), (600, {"noise_model": False}), (30_000, {})],
)
def test_binned_search_fits_like_the_exact_search(n, kwargs):
    X, y = _integer_data(n)
    weights = np.random.default_rng(1).integers(0, 3, size=n).astype(float)
    exact = VIBoostClassifier(15, max_bins=None, **kwargs).fit(X, y, sample_weight=weights)
    binned = VIBoostClassifier(15, max_bins=255, **kwargs).fit(X, y, sample_weight=weights)
    assert binned.estimators_ == exact.estimators_
    np.testing.assert_allclose(binned.alphas_, exact.alphas_, rtol=1e-12)
    np.testing.assert_allclose(binned.clean_proba_, exact.clean_proba_, rtol=1e-12)
    np.testing.assert_allclose(binned.snr_path_, exact.snr_path_, rtol=1e-12)


@pytest.mark.parametrize("n", [3_000, 40_000])
def test_fit_is_identical_across_thread_counts(n, monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, 6))
    X[rng.random(n) < 0.02, 4] = np.nan
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n) > 0).astype(int)
    y[rng.random(n) < 0.1] ^= 1
    # No work threshold: n_jobs=-1 really runs the kernels on every thread numba has.
    monkeypatch.setattr(viboost_parallel, "WORK_THRESHOLD", 0)
    fits = [VIBoostClassifier(20, random_state=0, n_jobs=jobs).fit(X, y) for jobs in (1, -1)]
    one, many = fits
    assert one.estimators_ == many.estimators_
    np.testing.assert_array_equal(one.alphas_, many.alphas_)
    np.testing.assert_array_equal(one.clean_proba_, many.clean_proba_)
    np.testing.assert_array_equal(one.snr_path_, many.snr_path_)
    for a, b in zip(one.elbo_, many.elbo_, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one.decision_function(X), many.decision_function(X))


def test_quantile_bins_fit_well_with_thresholds_in_data_units():
    rng = np.random.default_rng(3)
    n = 5_000
    X = rng.normal(size=(n, 3)) * [1.0, 1e6, 1e-6]
    y = (X[:, 0] + X[:, 1] / 1e6 - X[:, 2] / 1e-6 > 0).astype(int)
    binned = VIBoostClassifier(40, max_bins=32, random_state=0).fit(X, y)
    exact = VIBoostClassifier(40, max_bins=None).fit(X, y)
    assert binned.score(X, y) > exact.score(X, y) - 0.02
    for stump in binned.estimators_:
        scale = [1.0, 1e6, 1e-6][stump.feature]
        assert np.isneginf(stump.threshold) or abs(stump.threshold) < 5 * scale
    # Predicting from the thresholds on raw X reproduces the training margins of the fit.
    margin = np.zeros(n)
    for stump, alpha in zip(binned.estimators_, binned.alphas_, strict=True):
        margin += alpha * stump.predict(X)
    np.testing.assert_array_equal(binned.decision_function(X), margin)
