"""The lean inner loop of issue 3 against per-row references written here.

- knot aggregation (:mod:`viboost.compression`) against the sums over all rows;
- the Taylor ``log B_c`` (:func:`viboost.inference.log_normalizer_c`) against the accurate
  :meth:`VersatileLogistic.log_normalizer` over all rows (the issue asks for 1e-6 relative);
- the one-pass stump weights against their log-space definition;
- :class:`CleanLogOdds` against the phi update it stands for;
- a whole fit on pseudo-rows against the same fit on the rows.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from scipy.special import log_expit, logsumexp

from viboost import VIBoostClassifier, estimator
from viboost.compression import compress_round
from viboost.inference import (
    CleanLogOdds,
    log_normalizer_c,
    stump_weights,
    update_clean_proba,
    weight_posterior,
)


def _rows(n, spread, seed=0, agree=0.7):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(n) < agree, y, -y)
    margin = rng.normal(0.0, spread, n) if spread else np.zeros(n)
    weight = rng.random(n)
    return y, h, margin, weight


def _summands(alpha, offset):
    """Smooth functions of a row that the inner loop sums: softplus, phi, phi*softplus, e^u phi."""

    def softplus(y, h, m):
        return np.logaddexp(0.0, -y * m - alpha * y * h)

    def log_phi(y, h, m):
        return log_expit(offset * y - softplus(y, h, m))

    return [
        softplus,
        lambda y, h, m: np.exp(log_phi(y, h, m)),
        lambda y, h, m: np.exp(log_phi(y, h, m)) * softplus(y, h, m),
        lambda y, h, m: np.exp(-y * m + log_phi(y, h, m)),  # the approximate-mode sums
    ]


@pytest.mark.parametrize("spread", [0.0, 0.3, 3.0, 30.0, 3000.0, 1e6])
def test_pseudo_rows_reproduce_row_sums(spread):
    y, h, margin, weight = _rows(200_000, spread)
    yp, hp, mp, wp = compress_round(y, h, margin, weight)
    assert yp.size <= 2 * 4 * 3000
    assert np.isclose(wp.sum(), weight.sum(), rtol=1e-12)
    for alpha in (0.0, -2.0, 0.7):
        for f in _summands(alpha, offset=0.4):
            exact = np.sum(weight * f(y, h, margin))
            approx = np.sum(wp * f(yp, hp, mp))
            assert abs(approx - exact) <= 1e-8 * abs(exact), (spread, alpha)


def test_pseudo_rows_are_exact_for_few_distinct_knots():
    y, h, margin, weight = _rows(50_000, 0.0, seed=1)
    margin = np.random.default_rng(2).integers(-3, 4, margin.size) * 0.37
    weight[::7] = 0.0  # zero-weight rows are left out
    yp, hp, mp, wp = compress_round(y, h, margin, weight)
    assert yp.size <= 4 * 7
    for f in _summands(0.9, offset=-1.3):
        assert np.isclose(np.sum(wp * f(yp, hp, mp)), np.sum(weight * f(y, h, margin)), rtol=1e-13)


def test_pseudo_rows_do_not_depend_on_the_thread_count():
    y, h, margin, weight = _rows(300_000, 4.0, seed=3)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = compress_round(y, h, margin, weight)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = compress_round(y, h, margin, weight)
    finally:
        numba.set_num_threads(before)
    for a, b in zip(one, many, strict=True):
        np.testing.assert_array_equal(a, b)


def test_compress_rejects_a_bad_bin_width_and_handles_no_weight():
    y, h, margin, weight = _rows(10, 1.0)
    with pytest.raises(ValueError, match="bin_width"):
        compress_round(y, h, margin, weight, bin_width=0.3)
    assert compress_round(y, h, margin, np.zeros(10))[0].size == 0


@pytest.mark.parametrize(
    ("n", "scale", "spread"),
    [
        (50, 1.0, 3.0),
        (2_000, 1.0, 3.0),
        (5_000, 100.0, 3.0),
        (20_000, 1.0, 0.5),
        (3_000, 1.0, 30.0),
    ],
)
def test_fast_log_normalizer_matches_the_accurate_one(n, scale, spread):
    y, h, margin, weight = _rows(n, spread, seed=4)
    mult = weight * scale
    accurate = weight_posterior(y, margin, h, mult, 1.0).log_normalizer()
    fast = log_normalizer_c(y, margin, h, mult, 1.0, start=0.3)
    assert fast == pytest.approx(accurate, rel=1e-12, abs=1e-9)


def test_log_normalizer_on_pseudo_rows_is_within_1e6_of_all_rows():
    """Issue 3: log B_c from aggregated knots within 1e-6 relative of the accurate value."""
    for spread, seed in [(2.0, 5), (20.0, 6)]:
        y, h, margin, weight = _rows(200_000, spread, seed=seed)
        phi = np.exp(log_expit(1.5 - np.logaddexp(0.0, -y * (margin + 0.4 * h))))
        accurate = weight_posterior(y, margin, h, weight * phi, 1.0).log_normalizer()
        yp, hp, mp, wp = compress_round(y, h, margin, weight)
        phi_p = np.exp(log_expit(1.5 - np.logaddexp(0.0, -yp * (mp + 0.4 * hp))))
        fast = log_normalizer_c(yp, mp, hp, wp * phi_p, 1.0)
        assert abs(fast - accurate) <= 1e-9 * abs(accurate)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("tau", [1.0, 0.5, 2.0])
@pytest.mark.parametrize(
    "odds",
    [
        CleanLogOdds(2.0, 3.5, 1.0),
        CleanLogOdds(-30.0, 40.0, 1.0),
        CleanLogOdds.constant(1.0),
        CleanLogOdds.constant(0.3),
        CleanLogOdds(800.0, -700.0, 1.0),
    ],
)
@pytest.mark.parametrize("spread", [5.0, 2000.0])
def test_stump_weights_match_their_log_space_definition(exact, tau, odds, spread):
    y, _, margin, weight = _rows(20_000, spread, seed=7)
    weight[:5] = 0.0
    got = stump_weights(y, margin, weight, odds, tau, exact)
    log_clean, _ = odds.log_proba(y, margin)
    lead = log_expit(-y * margin) if exact else -tau * y * margin
    with np.errstate(divide="ignore"):
        log_w = np.log(weight) + log_clean + lead
    want = np.exp(log_w - logsumexp(log_w))
    assert np.all(np.isfinite(got)) and got.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)


def test_clean_log_odds_is_the_phi_update():
    y, h, margin, _ = _rows(1_000, 3.0, seed=8)
    eta, omega = np.array([40.0, 7.0]), np.array([3.0, 5.5])
    log_clean, log_noise = update_clean_proba(y, margin + 0.8 * h, eta, omega)
    got_clean, got_noise = CleanLogOdds.from_updates(eta, omega).log_proba(y, margin + 0.8 * h)
    np.testing.assert_allclose(got_clean, log_clean, rtol=1e-14)
    np.testing.assert_allclose(got_noise, log_noise, rtol=1e-14)
    clean, noise = CleanLogOdds.constant(1.0).log_proba(y, margin)
    assert np.all(clean == 0.0) and np.all(noise == -np.inf)
    for odds in (CleanLogOdds.from_updates(eta, omega), CleanLogOdds.constant(0.3)):
        np.testing.assert_allclose(
            odds.proba(y, margin * 100), np.exp(odds.log_proba(y, margin * 100)[0]), rtol=1e-14
        )


@pytest.mark.parametrize("kwargs", [{}, {"fixed_vi_iter": 2}, {"alpha": "exact"}])
def test_fit_on_pseudo_rows_matches_the_fit_on_rows(monkeypatch, kwargs):
    rng = np.random.default_rng(9)
    n = 40_000
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    y[rng.random(n) < 0.1] ^= 1
    fits = {}
    for threshold in (10**9, 1_000):
        monkeypatch.setattr(estimator, "_COMPRESS_ABOVE", threshold)
        fits[threshold] = VIBoostClassifier(12, **kwargs).fit(X, y)
    rows, pseudo = fits[10**9], fits[1_000]
    assert rows.estimators_ == pseudo.estimators_
    np.testing.assert_allclose(pseudo.alphas_, rows.alphas_, rtol=1e-7)
    np.testing.assert_allclose(pseudo.snr_path_, rows.snr_path_, rtol=1e-7)
    np.testing.assert_allclose(pseudo.noise_grade_path_, rows.noise_grade_path_, rtol=1e-7)
    np.testing.assert_allclose(pseudo.clean_proba_, rows.clean_proba_, rtol=1e-7)
    np.testing.assert_array_equal(pseudo.n_vi_iter_, rows.n_vi_iter_)
    for a, b in zip(pseudo.elbo_, rows.elbo_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9)


@pytest.mark.parametrize("exact", [False, True])
def test_row_margins_advance_matches_stump_weights(exact):
    """The cached-exponential update gives the weights of their definition, round after round."""
    from viboost.inference import RowMargins

    y, _, margin, weight = _rows(30_000, 2.0, seed=10)
    weight[:3] = 0.0
    rng = np.random.default_rng(11)
    rows = RowMargins(y, weight, margin)
    reference = margin.copy()
    for t in range(40):
        h = np.where(rng.random(y.size) < 0.6, y, -y)
        alpha = float(rng.normal(0.0, 0.5))
        odds = CleanLogOdds(float(rng.normal(2.0, 1.0)), float(rng.normal(1.0, 1.0)), 1.0)
        got = rows.advance(alpha, h, odds, 1.0, exact)
        reference += alpha * h
        np.testing.assert_array_equal(rows.margin, reference)
        want = stump_weights(y, reference, weight, odds, 1.0, exact)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300, err_msg=f"round {t}")
        knots = (-y * reference)[weight > 0]
        assert rows.knot_range == (knots.min(), knots.max())


def test_row_margins_fall_back_beyond_the_exponent_range():
    from viboost.inference import RowMargins

    y, h, margin, weight = _rows(1_000, 1.0, seed=12)
    rows = RowMargins(y, weight, margin)
    odds = CleanLogOdds(3.0, 2.0, 1.0)
    rows.advance(0.5, h, odds, 1.0, False)
    got = rows.advance(900.0, h, odds, 1.0, False)  # margins beyond 700: exp(-y H) overflows
    want = stump_weights(y, rows.margin, weight, odds, 1.0, False)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    got = rows.advance(-0.1, h, odds, 1.0, False)
    np.testing.assert_allclose(
        got, stump_weights(y, rows.margin, weight, odds, 1.0, False), rtol=1e-12, atol=1e-300
    )
