"""viboost.noise_fit.calibration: the marginal-likelihood fit of (theta, xi, scale of H) against
oracles written here: a generic Nelder-Mead maximiser of the log posterior, the EM type posterior by
enumeration of (true class, type), the stationarity conditions of S.4.2 and S.4.4, data drawn
from the model itself, and the Laplace curvature by finite differences of the log posterior."""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit

from viboost.noise_fit.calibration import (
    NoiseCalibration,
    calibrate_noise,
    flip_rates_from_mislabel,
)
from viboost.variational import ModelPriors


def _intercept(theta, xi):
    """The oracle of the intercept: where a noisy label is +1 with probability 1/2, a true label
    is +1 with probability p0 = (1/2 - (1 - theta) sigmoid(xi)) / theta."""
    p0 = (0.5 - (1 - theta) * expit(xi)) / theta
    return np.log(p0 / (1 - p0))


def _draw(n, theta, xi, scale, seed=0):
    """Labels from the model (section 4): true with probability theta, else +1 w.p. sigmoid(xi);
    the margins handed to the calibration are what a booster of the noisy labels estimates, the
    true log-odds less the intercept, divided by ``scale``."""
    rng = np.random.default_rng(seed)
    log_odds = rng.normal(scale=3.0, size=n)
    truth = np.where(rng.random(n) < expit(log_odds), 1.0, -1.0)
    noise_label = np.where(rng.random(n) < expit(xi), 1.0, -1.0)
    y = np.where(rng.random(n) < theta, truth, noise_label)
    return y, (log_odds - _intercept(theta, xi)) / scale, truth


def _log_posterior(params, y, margin, weight, priors):
    """The oracle: the log posterior of (logit theta, xi, log b), written out directly."""
    logit_theta, xi, log_b = params
    theta = 1.0 / (1.0 + np.exp(-logit_theta))
    log_odds = np.exp(log_b) * margin + _intercept(theta, xi)
    p = theta * expit(y * log_odds) + (1.0 - theta) * expit(y * xi)
    z1, z2 = priors.clean
    return (
        np.sum(weight * np.log(p))
        + z1 * np.log(theta)
        + z2 * np.log(1.0 - theta)
        + priors.noise_grade * (np.log(expit(xi)) + np.log(expit(-xi)))
        - 0.5 * (log_b / 3.0) ** 2
    )


def test_recovers_the_parameters_of_data_drawn_from_the_model():
    y, margin, _ = _draw(40000, theta=0.6, xi=0.8, scale=2.0)
    fit = calibrate_noise(y, margin)
    sd = np.sqrt(np.diag(fit.covariance))
    assert abs(np.log(fit.theta / (1 - fit.theta)) - np.log(0.6 / 0.4)) < 4 * sd[0]
    assert abs(fit.noise_grade - 0.8) < 4 * sd[1]
    assert abs(np.log(fit.scale) - np.log(2.0)) < 4 * sd[2]


@pytest.mark.parametrize("seed", [0, 1])
def test_is_the_maximum_of_the_log_posterior(seed):
    y, margin, _ = _draw(3000, theta=0.7, xi=-0.5, scale=0.5, seed=seed)
    weight = np.random.default_rng(seed).uniform(0.5, 2.0, size=y.size)
    priors = ModelPriors(clean=(2.0, 3.0), noise_grade=1.5)
    fit = calibrate_noise(y, margin, weight, priors)
    ours = [np.log(fit.theta / (1 - fit.theta)), fit.noise_grade, np.log(fit.scale)]
    ref = optimize.minimize(
        lambda p: -_log_posterior(p, y, margin, weight, priors),
        [0.0, 0.0, 0.0],
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000},
    )
    np.testing.assert_allclose(ours, ref.x, atol=1e-5)
    signal = fit.theta * expit(y * fit.log_odds(margin))
    expected = np.sum(weight * np.log(signal + (1 - fit.theta) * expit(y * fit.noise_grade)))
    assert fit.log_likelihood == pytest.approx(expected, rel=1e-12)


def test_laplace_covariance_is_the_inverse_curvature():
    y, margin, _ = _draw(2000, theta=0.7, xi=0.3, scale=1.0, seed=4)
    priors = ModelPriors()
    fit = calibrate_noise(y, margin, None, priors)
    mode = np.array([np.log(fit.theta / (1 - fit.theta)), fit.noise_grade, np.log(fit.scale)])
    step, weight = 1e-4, np.ones(y.size)
    hessian = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            di, dj = np.eye(3)[i] * step, np.eye(3)[j] * step
            hessian[i, j] = (
                _log_posterior(mode + di + dj, y, margin, weight, priors)
                - _log_posterior(mode + di - dj, y, margin, weight, priors)
                - _log_posterior(mode - di + dj, y, margin, weight, priors)
                + _log_posterior(mode - di - dj, y, margin, weight, priors)
            ) / (4 * step**2)
    np.testing.assert_allclose(fit.covariance, np.linalg.inv(-hessian), rtol=1e-3, atol=1e-7)


def test_type_and_mislabel_probabilities_by_enumeration():
    """phi_n and P(label wrong) against the joint of (true class t, type w) summed by hand:
    p(t, w, y | x) = sigmoid(t F) [theta 1{y = t}]^w [(1 - theta) sigmoid(y xi)]^(1 - w)."""
    y, margin, _ = _draw(500, theta=0.6, xi=0.4, scale=1.5, seed=2)
    fit = calibrate_noise(y, margin)
    F = fit.scale * margin + _intercept(fit.theta, fit.noise_grade)
    np.testing.assert_allclose(fit.log_odds(margin), F, rtol=1e-13)
    joint = {}
    for t in (-1.0, 1.0):
        for w in (0, 1):
            p_t = expit(t * F)
            p_y = fit.theta * (y == t) if w else (1 - fit.theta) * expit(y * fit.noise_grade)
            joint[t, w] = p_t * p_y
    evidence = sum(joint.values())
    clean = (joint[-1.0, 1] + joint[1.0, 1]) / evidence
    wrong = np.where(y > 0, joint[-1.0, 0] + joint[-1.0, 1], joint[1.0, 0] + joint[1.0, 1])
    wrong = wrong / evidence
    np.testing.assert_allclose(fit.clean_proba(y, margin), clean, rtol=1e-12)
    np.testing.assert_allclose(fit.mislabel_proba(y, margin), wrong, rtol=1e-10, atol=1e-300)


def test_flip_rates_match_the_drawn_channel():
    y, margin, truth = _draw(40000, theta=0.6, xi=np.log(0.3 / 0.1), scale=1.0, seed=3)
    fit = calibrate_noise(y, margin)
    rates = fit.flip_rates(y, margin, np.ones(y.size))
    wrong = y != truth
    np.testing.assert_allclose(
        rates, [wrong.mean(), wrong[truth < 0].mean(), wrong[truth > 0].mean()], atol=0.01
    )
    interval = fit.flip_rate_interval(y, margin, np.ones(y.size), random_state=0)
    assert np.all(interval[:, 0] < rates) and np.all(rates < interval[:, 1])
    assert np.all(interval[:, 1] - interval[:, 0] < 0.03)


def test_flip_rates_from_mislabel_by_hand():
    wrong = np.array([0.1, 0.9, 0.2, 0.5])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    weight = np.array([1.0, 2.0, 1.0, 1.0])
    total = (0.1 + 1.8 + 0.2 + 0.5) / 5
    true_pos = np.array([0.9, 0.1, 0.2, 0.5])  # P(true +1): 1 - wrong for +1 labels
    neg_flipped = 0.1 + 1.8  # +1 labels that are wrong: true -1
    pos_flipped = 0.2 + 0.5
    expected = [
        total,
        neg_flipped / np.dot(weight, 1 - true_pos),
        pos_flipped / np.dot(weight, true_pos),
    ]
    np.testing.assert_allclose(flip_rates_from_mislabel(wrong, y, weight), expected, rtol=1e-14)


def test_no_overflow_or_warning_for_extreme_margins_and_weights():
    y, margin, _ = _draw(300, theta=0.8, xi=0.0, scale=1.0, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = calibrate_noise(y, margin * 1e6, np.full(y.size, 1e300))
        assert np.isfinite([fit.theta, fit.noise_grade, fit.scale, fit.log_likelihood]).all()
        assert np.all(np.isfinite(fit.mislabel_proba(y, margin * 1e6)))
        uninformative = calibrate_noise(y, np.zeros(y.size))
    assert np.isfinite(uninformative.scale) and np.all(np.isfinite(uninformative.covariance))


def test_the_calibration_is_the_optimum_itself_whatever_the_row_order():
    """After L-BFGS, Newton steps reach the optimum: the answer does not depend on the order in
    which the rows are summed beyond ~1e-10 (a distributed fit sums them in another order)."""
    rng = np.random.default_rng(11)
    n = 3000
    margin = rng.normal(scale=2.0, size=n)
    true = np.where(rng.random(n) < expit(2 * margin), 1.0, -1.0)
    y = np.where(rng.random(n) < 0.3, rng.choice([-1.0, 1.0], size=n), true)
    weight = rng.random(n) + 0.5
    fit = calibrate_noise(y, margin, weight)
    order = rng.permutation(n)
    again = calibrate_noise(y[order], margin[order], weight[order])
    for name in ("theta", "noise_grade", "scale", "log_likelihood"):
        assert getattr(again, name) == pytest.approx(getattr(fit, name), rel=1e-10, abs=1e-12)


def test_a_warm_start_reaches_the_same_optimum():
    y, margin, _ = _draw(20000, theta=0.7, xi=-0.5, scale=1.5, seed=3)
    cold = calibrate_noise(y, margin)
    nearby = calibrate_noise(y, margin * 1.2)
    warm = calibrate_noise(y, margin, start=nearby)
    for name in ("theta", "noise_grade", "scale", "log_likelihood"):
        assert getattr(warm, name) == pytest.approx(getattr(cold, name), rel=1e-9, abs=1e-12)


def test_row_log_likelihoods_sum_to_the_score_and_match_the_oracle():
    y, margin, _ = _draw(3000, theta=0.8, xi=0.3, scale=2.0, seed=4)
    weight = np.random.default_rng(4).uniform(0.5, 2.0, y.size)
    fit = calibrate_noise(y, margin, weight)
    rows = fit.row_log_likelihood(y, margin)
    assert np.dot(weight, rows) == pytest.approx(fit.log_likelihood, rel=1e-12)
    log_odds = fit.scale * margin + _intercept(fit.theta, fit.noise_grade)
    p = fit.theta * expit(y * log_odds) + (1 - fit.theta) * expit(y * fit.noise_grade)
    np.testing.assert_allclose(rows, np.log(p), rtol=1e-12)


def test_flip_rate_interval_on_a_row_subset_matches_all_rows():
    """Above INTERVAL_ROWS rows the draws are evaluated on a subset with the mode's rates on all
    rows as a control variate: the interval agrees with the one evaluated on every row (the
    oracle, with INTERVAL_ROWS raised) to well under its width."""
    import viboost.noise_fit.calibration as calibration_module

    y, margin, _ = _draw(60000, theta=0.85, xi=0.4, scale=1.5, seed=6)
    weight = np.ones(y.size)
    fit = calibrate_noise(y, margin, weight)
    subset = fit.flip_rate_interval(y, margin, weight, random_state=0)
    limit = calibration_module.INTERVAL_ROWS
    try:
        calibration_module.INTERVAL_ROWS = y.size
        every_row = fit.flip_rate_interval(y, margin, weight, random_state=0)
    finally:
        calibration_module.INTERVAL_ROWS = limit
    width = every_row[:, 1] - every_row[:, 0]
    assert np.all(width > 0)
    np.testing.assert_allclose(subset, every_row, atol=0.02 * width.max())
    rates = fit.flip_rates(y, margin, weight)
    assert np.all((every_row[:, 0] <= rates) & (rates <= every_row[:, 1]))


def _mp_row(theta, xi, intercept, y, margin, scale):
    """The oracle at 50 digits: ``log p(y | H)`` and P(label wrong) of one row, from the
    mixture written out (a true label from sigmoid(y F), a noise label from sigmoid(y xi))."""
    mp = mpmath.mp
    with mpmath.workdps(50):
        sig = lambda v: 1 / (1 + mpmath.exp(-v))  # noqa: E731
        log_odds = mpmath.mpf(scale) * mpmath.mpf(margin) + mpmath.mpf(intercept)
        signal = mpmath.mpf(theta) * sig(y * log_odds)
        noise = (1 - mpmath.mpf(theta)) * sig(y * mpmath.mpf(xi))
        # wrong: the true class is -y; a true label then is never y, a noise label is y with
        # probability sigmoid(y xi) whatever the class
        wrong = sig(-y * log_odds) * noise / (signal + noise)
        return float(mp.log(signal + noise)), float(wrong)


@pytest.mark.parametrize("xi", [0.0, 2.5, -30.0, 690.0, 705.0, -760.0])
def test_row_kernels_match_mpmath_in_linear_and_log_space(xi):
    """The compiled rows of ``log p(y | H)`` and P(label wrong) take one exp in linear space,
    and fall back to log space where a ratio would overflow (|xi| beyond ~700: both forms are
    exercised); either way they match the 50-digit oracle, margins up to 1e4 included."""
    margin = np.array([-1e4, -300.0, -40.0, -3.0, -1e-3, 0.0, 0.5, 7.0, 45.0, 800.0, 1e4])
    margin = np.concatenate([margin, margin])
    y = np.repeat([1.0, -1.0], margin.size // 2)
    theta, scale = 0.7, 1.3
    fit = NoiseCalibration(theta, xi, scale, np.eye(3), 0.0)
    intercept = _intercept(theta, xi)
    oracle = np.array(
        [_mp_row(theta, xi, intercept, yi, h, scale) for yi, h in zip(y, margin, strict=True)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = fit.row_log_likelihood(y, margin)
        wrong = fit.mislabel_proba(y, margin)
    np.testing.assert_allclose(rows, oracle[:, 0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(wrong, oracle[:, 1], rtol=1e-12, atol=1e-300)
