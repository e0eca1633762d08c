"""Tests of viboost.boosting.split_statistics: the trees' settings, the per-row statistics of
each split score against their formulas, and the prior's term in the weights' units."""

from __future__ import annotations

import numpy as np
import pytest

from viboost._utils.parallel import numba_threads
from viboost.boosting.split_statistics import TreeSettings


@pytest.mark.parametrize("criterion", ["newton", "smoothed", "error"])
@pytest.mark.parametrize("with_margin", [False, True])
def test_statistics_are_the_split_scores_sums(criterion, with_margin):
    # Independent oracle, the formulas written out: Newton's y w and w sigmoid(y H) (H = 0
    # without a margin), else the weights of the positive and of the negative rows.
    rng = np.random.default_rng(0)
    n = 500
    weights = rng.uniform(0.0, 1.0, n)
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    margin = rng.normal(0.0, 2.0, n) if with_margin else None
    first, second = TreeSettings(criterion=criterion).statistics(weights, y, margin)
    if criterion == "newton":
        h = np.zeros(n) if margin is None else margin
        want = (y * weights, weights / (1.0 + np.exp(-(y * h))))
    else:
        want = (np.where(y > 0, weights, 0.0), np.where(y > 0, 0.0, weights))
    np.testing.assert_allclose(first, want[0], rtol=1e-15, atol=0.0)
    np.testing.assert_allclose(second, want[1], rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("threads", [1, 2])
def test_row_statistics_follow_the_rows_order(threads):
    # Rows in any order (a partition's), above the size from which the kernel runs on
    # threads: each output row is its row's statistics and count, the same for any threads.
    rng = np.random.default_rng(1)
    n = 1 << 16
    weights, margin, counts = rng.random(n), rng.normal(size=n), rng.integers(0, 3, n) * 1.0
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    rows = rng.permutation(n)[: n - 100]
    settings = TreeSettings()
    first, second = settings.statistics(weights, y, margin)
    out = np.empty((rows.size, 3))
    with numba_threads(threads):
        settings.row_statistics(rows, weights, y, margin, counts, out)
    np.testing.assert_array_equal(out, np.column_stack([first, second, counts])[rows])


def test_settings_refuse_unknown_names_and_scale_the_prior():
    with pytest.raises(ValueError, match="leaf_weights must be one of"):
        TreeSettings(leaf_weights="shared")
    with pytest.raises(ValueError, match="criterion must be one of"):
        TreeSettings(criterion="gini")
    # lambda = mu_0 / 2 for Newton's score, mu_0 for the others, in the units of weights
    # summing to one (total: their sum before normalisation); no weight: an infinite prior.
    assert TreeSettings(weight_prior=3.0).prior(4.0) == 3.0 / 2 / 4.0
    assert TreeSettings(criterion="error", weight_prior=3.0).prior(4.0) == 3.0 / 4.0
    assert TreeSettings().prior(0.0) == 1e300
    assert TreeSettings(leaf_weights="tied").per_leaf is False
    assert TreeSettings(criterion="smoothed").code == 1
