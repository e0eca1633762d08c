"""The K-class noise model's calibration (viboost.noise_fit.class_calibration), against the
binary calibration (its K = 2 case), closed forms written here, and simulated data."""

import numpy as np
import pytest
from scipy.special import expit, log_softmax, softmax

from viboost._utils.parallel import numba_threads
from viboost.noise_fit.calibration import calibrate_noise, joint_of
from viboost.noise_fit.class_calibration import (
    ClassNoiseCalibration,
    _objective_sums,
    calibrate_class_noise,
    class_log_likelihood,
    expected_joints,
    joint_rates,
    rate_interval,
)
from viboost.variational.priors import ModelPriors


def _simulate(n, n_classes, theta, pi, scale, seed):
    """Margins H, true classes drawn from softmax(scale H + c) with the model's intercept
    (c_k = log p0_k: a noisy label is uniform where H = 0), labels through the channel."""
    rng = np.random.default_rng(seed)
    margin = rng.normal(scale=2.0, size=(n, n_classes))
    p0 = (1 / n_classes - (1 - theta) * np.asarray(pi)) / theta
    p = softmax(scale * margin + np.log(p0), axis=1)
    true = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    noisy = rng.random(n) > theta
    y = np.where(noisy, rng.choice(n_classes, size=n, p=pi), true)
    return margin, true, y


@pytest.mark.parametrize("xi", [0.0, 0.9])
def test_two_classes_are_the_binary_calibration(xi):
    rng = np.random.default_rng(3)
    margin = rng.normal(scale=3.0, size=6000)
    true = np.where(rng.random(6000) < expit(margin), 1, 0)
    noisy = rng.random(6000) < 0.3
    y = np.where(noisy, (rng.random(6000) < expit(xi)).astype(int), true)
    weight = rng.uniform(0.5, 2.0, 6000)
    priors = ModelPriors(noise_grade=1.5, clean=(2.0, 1.0))
    binary = calibrate_noise(np.where(y == 1, 1.0, -1.0), margin / 2, weight, priors)
    # Class margins whose difference is the binary margin.
    classes = calibrate_class_noise(y, np.column_stack([-margin / 4, margin / 4]), weight, priors)
    assert classes.theta == pytest.approx(binary.theta, rel=1e-7)
    pi = classes.noise_label_proba
    assert np.log(pi[1] / pi[0]) == pytest.approx(binary.noise_grade, rel=1e-6, abs=1e-8)
    assert classes.scale == pytest.approx(binary.scale, rel=1e-7)
    assert classes.log_likelihood == pytest.approx(binary.log_likelihood, rel=1e-10)
    np.testing.assert_allclose(
        classes.mislabel_proba(y, np.column_stack([-margin / 4, margin / 4])),
        binary.mislabel_proba(np.where(y == 1, 1.0, -1.0), margin / 2),
        rtol=1e-6,
        atol=1e-12,
    )


def test_recovers_the_channel_of_simulated_labels():
    pi = np.array([0.5, 0.2, 0.2, 0.1])
    margin, _, y = _simulate(40_000, 4, 0.7, pi, 2.0, seed=0)
    fit = calibrate_class_noise(y, margin)  # margins on half the true scale
    assert fit.theta == pytest.approx(0.7, abs=0.02)
    assert fit.scale == pytest.approx(2.0, rel=0.05)
    np.testing.assert_allclose(fit.noise_label_proba, pi, atol=0.03)


def test_row_terms_match_the_model_written_out():
    rng = np.random.default_rng(1)
    margin = rng.normal(size=(50, 3))
    y = rng.integers(0, 3, 50)
    fit = ClassNoiseCalibration(0.8, np.array([0.5, 0.3, 0.2]), 1.7, np.eye(4), 0.0)
    # c_k = log p0_k with p0_k = (1/K - (1 - theta) pi_k) / theta.
    p0 = (1 / 3 - 0.2 * np.array([0.5, 0.3, 0.2])) / 0.8
    p = softmax(1.7 * margin + np.log(p0), axis=1)
    rows = np.arange(50)
    likelihood = 0.8 * p[rows, y] + 0.2 * np.array([0.5, 0.3, 0.2])[y]
    np.testing.assert_allclose(fit.row_log_likelihood(y, margin), np.log(likelihood), rtol=1e-12)
    np.testing.assert_allclose(fit.clean_proba(y, margin), 0.8 * p[rows, y] / likelihood)
    # The posterior of the true class: p_i (theta 1{y = i} + (1 - theta) pi_y), normalised.
    channel = 0.2 * np.array([0.5, 0.3, 0.2])[y][:, None] + 0.8 * (np.arange(3) == y[:, None])
    posterior = p * channel / (p * channel).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(fit.true_class_proba(y, margin), posterior, rtol=1e-12)
    np.testing.assert_allclose(fit.mislabel_proba(y, margin), 1 - posterior[rows, y], rtol=1e-10)
    b, c, log_channel = fit.signal_and_channel()
    assert b == pytest.approx(1.7) and np.allclose(c, np.log(p0))
    np.testing.assert_allclose(np.exp(log_channel), fit.channel, rtol=1e-12)


def test_objective_sums_over_chunks_match_the_sums_written_out():
    # The objective's sums over fixed chunks of rows (in parallel) against the same sums
    # written out in numpy; the same for any number of threads.
    rng = np.random.default_rng(11)
    n, n_classes = 5000, 4
    margin = rng.normal(scale=2.0, size=(n, n_classes))
    y = rng.integers(0, n_classes, n)
    weight = rng.random(n)
    b, c = 1.3, np.array([0.2, -0.1, 0.0, 0.4])
    theta, pi = 0.75, np.array([0.4, 0.3, 0.2, 0.1])
    p = softmax(b * margin + c, axis=1)
    rows = np.arange(n)
    likelihood = theta * p[rows, y] + (1 - theta) * pi[y]
    clean = theta * p[rows, y] / likelihood
    g = clean[:, None] * ((np.arange(n_classes) == y[:, None]) - p)
    expected = [
        weight @ np.log(likelihood), weight @ clean, weight.sum(),
        weight @ (g * margin).sum(axis=1), weight @ (1 - clean),
    ]  # fmt: skip
    by_class_g = weight @ g
    by_class_noise = np.bincount(y, weights=weight * (1 - clean), minlength=n_classes)
    args = (y, margin, weight, b, c, np.log(theta), np.log1p(-theta), np.log(pi))
    for n_chunks in (1, 3, 7):
        got = _objective_sums.serial(*args, n_chunks)
        np.testing.assert_allclose(got[:5], expected, rtol=1e-12)
        np.testing.assert_allclose(got[5], by_class_g, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[6], by_class_noise, rtol=1e-12)
        for threads in (1, 2):
            with numba_threads(threads):
                again = _objective_sums.parallel(*args, n_chunks)
            assert all(np.array_equal(x, z) for x, z in zip(got, again, strict=True))


def test_extreme_margins_stay_finite():
    margin = np.array([[1e6, 0.0, -1e6], [-1e6, 1e6, 0.0], [0.0, 0.0, 0.0]])
    y = np.array([1, 1, 2])
    fit = ClassNoiseCalibration(0.9, np.full(3, 1 / 3), 1.0, np.eye(4), 0.0)
    for values in (
        fit.row_log_likelihood(y, margin),
        fit.true_class_log_proba(y, margin),
        fit.mislabel_proba(y, margin),
    ):
        assert np.all(np.isfinite(values))
    # A label the margins rule out is noise for sure, and the true class is the margin's.
    assert fit.mislabel_proba(y, margin)[0] == pytest.approx(1.0)
    assert fit.true_class_proba(y, margin)[0, 0] == pytest.approx(1.0)


def test_joint_and_rates():
    rng = np.random.default_rng(2)
    margin = rng.normal(size=(300, 3))
    y = rng.integers(0, 3, 300)
    weight = rng.uniform(0.0, 2.0, 300)
    fit = ClassNoiseCalibration(0.7, np.array([0.2, 0.3, 0.5]), 1.0, np.eye(4), 0.0)
    joint = fit.joint(y, margin, weight)
    post = fit.true_class_proba(y, margin)
    expected = (
        np.array([[np.sum(weight * (y == j) * post[:, i]) for i in range(3)] for j in range(3)])
        / weight.sum()
    )
    np.testing.assert_allclose(joint, expected, rtol=1e-12)
    assert joint.sum() == pytest.approx(1.0)
    rates = joint_rates(joint)
    assert rates[0] == pytest.approx(np.dot(weight, fit.mislabel_proba(y, margin)) / weight.sum())
    np.testing.assert_allclose(rates[1:], 1 - np.diag(joint) / joint.sum(axis=0))
    hand = joint_rates(np.array([[0.4, 0.1], [0.1, 0.4]]))
    np.testing.assert_allclose(hand, [0.2, 0.2, 0.2])


def test_interval_covers_the_simulated_rate():
    pi = np.full(3, 1 / 3)
    margin, true, y = _simulate(20_000, 3, 0.75, pi, 1.0, seed=4)
    fit = calibrate_class_noise(y, margin)
    weight = np.ones(y.size)
    interval = fit.flip_rate_interval(y, margin, weight, random_state=0)
    assert interval.shape == (4, 2)
    assert np.all(interval[:, 0] <= interval[:, 1])
    rate = joint_rates(fit.joint(y, margin, weight))[0]
    assert interval[0, 0] <= rate <= interval[0, 1]
    assert interval[0, 0] - 0.01 <= np.mean(y != true) <= interval[0, 1] + 0.01
    # The same draws for the same seed.
    np.testing.assert_array_equal(
        interval, fit.flip_rate_interval(y, margin, weight, random_state=0)
    )


def test_core_model_score_is_the_softmax_log_likelihood():
    margin = np.array([[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]])
    y = np.array([2, 1])
    np.testing.assert_allclose(
        class_log_likelihood(y, margin), log_softmax(margin, axis=1)[[0, 1], [2, 1]]
    )


def test_bad_margin_shape_is_named():
    with pytest.raises(ValueError, match="margin must have shape"):
        calibrate_class_noise(np.array([0, 1]), np.zeros((2, 1)))


def test_the_fit_is_the_mode_of_the_posterior_written_out():
    """The fitted (logit theta, v, log b) is a stationary point of the log posterior written
    here from the model (scipy, finite differences): a check of the compiled sums and the
    closed-form gradient that the search follows."""
    from scipy.special import log_expit, logsumexp

    pi_true = np.array([0.4, 0.35, 0.25])
    margin, _, y = _simulate(3000, 3, 0.75, pi_true, 1.5, seed=4)
    weight = np.random.default_rng(5).uniform(0.5, 2.0, y.size)
    priors = ModelPriors(noise_grade=1.5, clean=(2.0, 1.0))
    fit = calibrate_class_noise(y, margin, weight, priors)

    def log_likelihood(params):
        u, v, log_b = params[0], params[1:-1], params[-1]
        log_pi = log_softmax(np.concatenate([[0.0], v]))
        theta, pi = expit(u), np.exp(log_pi)
        c = np.log((1 / 3 - (1 - theta) * pi) / theta)  # the intercept: p0_k
        log_p = log_softmax(np.exp(log_b) * margin + c, axis=1)[np.arange(y.size), y]
        rows = logsumexp([np.log(theta) + log_p, np.log1p(-theta) + log_pi[y]], axis=0)
        return float(weight @ rows)

    def log_posterior(params):
        u, log_b = params[0], params[-1]
        log_pi = log_softmax(np.concatenate([[0.0], params[1:-1]]))
        prior = 2.0 * log_expit(u) + 1.0 * log_expit(-u) + 1.5 * log_pi.sum() - log_b**2 / 18
        return log_likelihood(params) + prior

    params = np.asarray(fit.params, dtype=float)
    step = 1e-5
    gradient = [
        (log_posterior(params + step * e) - log_posterior(params - step * e)) / (2 * step)
        for e in np.eye(params.size)
    ]
    np.testing.assert_allclose(gradient, 0.0, atol=2e-3)  # the sums are of order 10^3
    assert fit.log_likelihood == pytest.approx(log_likelihood(params), rel=1e-12)


def test_expected_joints_of_draws_match_each_draws_posterior_written_out():
    """The joints of many parameter draws in one compiled pass (the credible interval's) are
    each draw's joint from its true-class posterior written here with scipy's softmax, for any
    thread count; and the interval is the quantiles of their rates (computed here)."""
    from viboost._utils.parallel import numba_threads

    pi = np.array([0.5, 0.3, 0.2])
    margin, _, y = _simulate(3000, 3, 0.8, pi, 1.0, seed=7)
    weight = np.random.default_rng(1).uniform(0.0, 2.0, y.size)
    fit = calibrate_class_noise(y, margin, weight)
    draws = fit.posterior_draws(40, random_state=3)
    terms = [d.signal_and_channel() for d in draws]
    with numba_threads(1):
        one = expected_joints(y, margin, weight, terms)
    with numba_threads(2):
        two = expected_joints(y, margin, weight, terms)
    np.testing.assert_array_equal(one, two)

    def posterior(draw, y, margin):
        b, c, log_channel = draw.signal_and_channel()
        return softmax(b * margin + c + log_channel[y], axis=1)

    reference = np.array([joint_of(posterior(d, y, margin), y, weight) for d in draws])
    np.testing.assert_allclose(one, reference, rtol=1e-11, atol=1e-15)
    subset = np.arange(0, y.size, 3)
    interval = rate_interval(fit, draws, y, margin, weight, subset, 0.8)
    sub = (y[subset], margin[subset], weight[subset])
    rates = np.array([joint_rates(joint_of(posterior(d, *sub[:2]), sub[0], sub[2]))
                      for d in draws])  # fmt: skip
    rates += joint_rates(joint_of(posterior(fit, y, margin), y, weight)) - joint_rates(
        joint_of(posterior(fit, *sub[:2]), sub[0], sub[2])
    )
    np.testing.assert_allclose(interval, np.quantile(rates, [0.1, 0.9], axis=0).T, atol=1e-12)
    # Margins of any size: finite joints that still sum to one.
    huge = expected_joints(y, 1e300 * np.sign(margin), weight, terms[:2])
    assert np.all(np.isfinite(huge))
    np.testing.assert_allclose(huge.sum(axis=(1, 2)), 1.0)
