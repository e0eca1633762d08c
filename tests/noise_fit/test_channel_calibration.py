"""The class-conditional channel (viboost.noise_fit.channel_calibration), against the model
written out here, simulated labels, and the paper's channel it generalises."""

import numpy as np
import pytest
from oracles import laplace_log_integral
from scipy.special import softmax

from viboost._utils.parallel import numba_threads
from viboost.noise_fit.calibration import joint_of
from viboost.noise_fit.channel_calibration import (
    ClassChannelCalibration,
    _channel_sums,
    calibrate_class_channel,
)
from viboost.noise_fit.class_calibration import (
    calibrate_class_noise,
    expected_joints,
    joint_rates,
)


def _simulate(n, channel, scale, seed):
    """Margins H; true classes from softmax(scale H + c) with the model's intercept
    (c = log T^{-1} 1 / K); labels through ``channel[:, true]``."""
    rng = np.random.default_rng(seed)
    n_classes = channel.shape[0]
    margin = rng.normal(scale=2.0, size=(n, n_classes))
    p0 = np.linalg.solve(channel, np.full(n_classes, 1 / n_classes))
    p = softmax(scale * margin + np.log(p0), axis=1)
    true = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    given = (rng.random((n, 1)) > np.cumsum(channel[:, true].T, axis=1)).sum(axis=1)
    return margin, true, given


PAIRWISE = np.array([[0.8, 0.0, 0.1], [0.2, 0.9, 0.0], [0.0, 0.1, 0.9]])


def test_recovers_a_pairwise_channel():
    margin, true, y = _simulate(30_000, PAIRWISE, 1.5, seed=0)
    fit = calibrate_class_channel(y, margin)
    np.testing.assert_allclose(fit.channel, PAIRWISE, atol=0.03)
    assert fit.scale == pytest.approx(1.5, rel=0.06)
    rate = joint_rates(fit.joint(y, margin, np.ones(y.size)))[0]
    assert rate == pytest.approx(np.mean(y != true), abs=0.02)


def test_evidence_prefers_the_channel_that_made_the_labels():
    pairwise = _simulate(8_000, PAIRWISE, 1.0, seed=1)
    independent_channel = 0.8 * np.eye(3) + 0.2 * np.full((3, 3), 1 / 3)
    independent = _simulate(8_000, independent_channel, 1.0, seed=2)
    for (margin, _, y), full_wins in ((pairwise, True), (independent, False)):
        paper = calibrate_class_noise(y, margin)
        full = calibrate_class_channel(y, margin, start=paper.channel)
        assert (full.log_evidence > paper.log_evidence) is full_wins
        # The full channel nests the paper's: its likelihood is at least as high.
        assert full.log_likelihood >= paper.log_likelihood - 1e-6 * abs(paper.log_likelihood)


def test_posterior_matches_the_model_written_out():
    rng = np.random.default_rng(3)
    margin = rng.normal(size=(40, 3))
    y = rng.integers(0, 3, 40)
    channel = np.array([[0.7, 0.1, 0.2], [0.2, 0.8, 0.1], [0.1, 0.1, 0.7]])
    fit = ClassChannelCalibration(channel, 1.3, np.eye(7), 0.0)
    p0 = np.linalg.solve(channel, np.full(3, 1 / 3))
    p = softmax(1.3 * margin + np.log(p0), axis=1)
    unnormalised = p * channel[y]
    np.testing.assert_allclose(
        fit.row_log_likelihood(y, margin), np.log(unnormalised.sum(axis=1)), rtol=1e-12
    )
    posterior = unnormalised / unnormalised.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(fit.true_class_proba(y, margin), posterior, rtol=1e-12)
    np.testing.assert_allclose(fit.clean_proba(y, margin), posterior[np.arange(40), y])
    np.testing.assert_allclose(fit.params, ClassChannelCalibration.from_params(
        fit.params, fit.covariance).params)  # fmt: skip


def test_objective_sums_over_chunks_match_the_sums_written_out():
    # The objective's sums over fixed chunks of rows (in parallel) against the same sums
    # written out in numpy; the same for any number of threads.
    rng = np.random.default_rng(8)
    n = 4000
    margin = rng.normal(scale=2.0, size=(n, 3))
    y = rng.integers(0, 3, n)
    weight = rng.random(n)
    channel = np.array([[0.7, 0.1, 0.2], [0.2, 0.8, 0.1], [0.1, 0.1, 0.7]])
    b, c = 1.3, np.log(np.linalg.solve(channel, np.full(3, 1 / 3)))
    p = softmax(b * margin + c, axis=1)
    unnormalised = p * channel[y]
    posterior = unnormalised / unnormalised.sum(axis=1, keepdims=True)
    by_label = np.stack([weight[y == j] @ posterior[y == j] for j in range(3)])
    gap = weight @ (posterior - p)
    args = (y, margin, weight, b, c, np.log(channel))
    for n_chunks in (1, 3, 7):
        value, got_by_label, got_gap, got_gap_h = _channel_sums.serial(*args, n_chunks)
        assert value == pytest.approx(weight @ np.log(unnormalised.sum(axis=1)), rel=1e-12)
        np.testing.assert_allclose(got_by_label, by_label, rtol=1e-12)
        np.testing.assert_allclose(got_gap, gap, rtol=1e-10, atol=1e-12)
        along = weight @ ((posterior - p) * margin).sum(axis=1)
        assert got_gap_h == pytest.approx(along, rel=1e-10)
        for threads in (1, 2):
            with numba_threads(threads):
                again = _channel_sums.parallel(*args, n_chunks)
            got = (value, got_by_label, got_gap, got_gap_h)
            assert all(np.array_equal(x, z) for x, z in zip(got, again, strict=True))


def test_interval_and_extremes():
    margin, true, y = _simulate(6_000, PAIRWISE, 1.0, seed=4)
    fit = calibrate_class_channel(y, margin)
    weight = np.ones(y.size)
    interval = fit.flip_rate_interval(y, margin, weight, random_state=0)
    assert interval.shape == (4, 2) and np.all(interval[:, 0] <= interval[:, 1])
    assert interval[0, 0] - 0.01 <= np.mean(y != true) <= interval[0, 1] + 0.01
    huge = np.array([[1e6, 0.0, -1e6], [0.0, 0.0, 0.0]])
    assert np.all(np.isfinite(fit.true_class_proba(np.array([2, 0]), huge)))
    # Far out the true class is the largest margin's: log p(y | H) = log T[y, 0] to the digit.
    labels, far = np.array([0, 1, 2]), np.array([[1e6, 0.0, -1e6]] * 3)
    np.testing.assert_allclose(
        fit.row_log_likelihood(labels, far), np.log(fit.channel[labels, 0]), rtol=1e-14
    )
    with pytest.raises(ValueError, match="margin must have shape"):
        calibrate_class_channel(np.array([0, 1]), np.zeros((2, 1)))


def test_joint_of_draws_match_the_posterior_written_out():
    """The full channel's joints (the interval's compiled pass) are those of its posterior."""
    margin, _, y = _simulate(2000, PAIRWISE, 1.5, seed=2)
    weight = np.ones(y.size)
    fit = calibrate_class_channel(y, margin)
    rng = np.random.default_rng(0)
    draws = [
        ClassChannelCalibration.from_params(fit.params + 0.1 * rng.standard_normal(fit.params.size),
                                            fit.covariance)
        for _ in range(5)
    ]  # fmt: skip
    joints = expected_joints(y, margin, weight, [d.signal_and_channel() for d in draws])
    for draw, joint in zip(draws, joints, strict=True):
        # The posterior written out: softmax(b H + c) times the channel's row of the label.
        p0 = np.linalg.solve(draw.channel, np.full(3, 1 / 3))
        p = softmax(draw.scale * margin + np.log(p0), axis=1) * draw.channel[y]
        want = joint_of(p / p.sum(axis=1, keepdims=True), y, weight)
        np.testing.assert_allclose(joint, want, rtol=1e-10, atol=1e-15)


def _levels_rows(levels, counts):
    """Two classes: margins ``(h / 2, -h / 2)`` at each level h, with ``counts[h] = (rows
    labelled 0, rows labelled 1)`` as sample weights."""
    y, margin, weight = [], [], []
    for h, pair in zip(levels, counts, strict=True):
        for label, count in enumerate(pair):
            y.append(label), margin.append((h / 2, -h / 2)), weight.append(count)
    return np.array(y), np.array(margin), np.array(weight, dtype=float)


def _log_joint_full(y, margin, weight, zeta, v01, v10, log_b):
    """The full channel's log likelihood plus log prior (with its normaliser) for K = 2, written
    out; broadcasts over the parameters. ``T[0, 1] = expit(v01)``, ``T[1, 0] = expit(v10)``."""
    from scipy.special import gammaln, log_expit

    log_t = {(0, 1): log_expit(v01), (1, 1): log_expit(-v01)}
    log_t |= {(1, 0): log_expit(v10), (0, 0): log_expit(-v10)}
    a, e = np.exp(log_t[1, 0]), np.exp(log_t[0, 1])
    with np.errstate(divide="ignore", invalid="ignore"):  # p0 = T^{-1} 1 / 2
        p0 = (0.5 * (1 - 2 * e) / (1 - a - e), 0.5 * (1 - 2 * a) / (1 - a - e))
    c = [np.log(np.where(p >= 1e-9, p, 1e-9)) for p in p0]
    b = np.exp(log_b)
    total = zeta[0] * (log_t[0, 0] + log_t[1, 1]) + zeta[1] * (log_t[0, 1] + log_t[1, 0])
    total = total - log_b**2 / 18 - 0.5 * np.log(2 * np.pi * 9)
    total = total + 2 * (gammaln(sum(zeta)) - gammaln(zeta[0]) - gammaln(zeta[1]))
    for label, (h0, h1), count in zip(y, margin, weight, strict=True):
        f0, f1 = b * h0 + c[0], b * h1 + c[1]
        log_p = (f0 - np.logaddexp(f0, f1), f1 - np.logaddexp(f0, f1))
        total = total + count * np.logaddexp(log_p[0] + log_t[label, 0], log_p[1] + log_t[label, 1])
    return total


def _log_joint_paper(y, margin, weight, zeta, mu, u, v, log_b):
    """The paper's channel (theta = expit(u), pi = softmax(0, v)) for K = 2, as above."""
    from scipy.special import gammaln, log_expit

    log_theta, log_not = log_expit(u), log_expit(-u)
    log_pi = (log_expit(-v), log_expit(v))
    theta = np.exp(log_theta)
    c = [np.log(np.maximum((0.5 - (1 - theta) * np.exp(lp)) / theta, 1e-9)) for lp in log_pi]
    b = np.exp(log_b)
    total = zeta[0] * log_theta + zeta[1] * log_not + mu * (log_pi[0] + log_pi[1])
    total = total - log_b**2 / 18 - 0.5 * np.log(2 * np.pi * 9)
    total = total + gammaln(sum(zeta)) - gammaln(zeta[0]) - gammaln(zeta[1])
    total = total + gammaln(2 * mu) - 2 * gammaln(mu)
    for label, (h0, h1), count in zip(y, margin, weight, strict=True):
        f0, f1 = b * h0 + c[0], b * h1 + c[1]
        log_p = (f0, f1)[label] - np.logaddexp(f0, f1)
        total = total + count * np.logaddexp(log_theta + log_p, log_not + log_pi[label])
    return total


def _quadrature(log_joint, axes):
    """log int exp(log_joint) on the grid ``axes`` (a Riemann sum: the integrand is smooth and
    negligible at the grid's edges)."""
    from scipy.special import logsumexp

    grid = np.meshgrid(*axes, indexing="ij", sparse=True)
    values = log_joint(*grid)
    for axis in range(len(axes)):  # nothing left at the edges
        edges = np.take(values, [0, -1], axis=axis)
        assert logsumexp(edges) < logsumexp(values) - 8
    return logsumexp(values) + sum(np.log(a[1] - a[0]) for a in axes)


def test_log_evidences_add_the_dirichlet_gap_to_laplace_and_approach_quadrature():
    """Both channels' log evidence (K = 2) is the Laplace approximation of the posterior written
    out here plus laplace.dirichlet_laplace_gap of the Dirichlet (Beta) parts given the
    expected counts; that brings it closer to the evidence by quadrature, not past it."""
    from viboost.noise_fit.laplace import dirichlet_laplace_gap
    from viboost.variational.priors import ModelPriors

    # Nearly clean labels: the full channel's off-diagonal entries have next to no rows.
    y, margin, weight = _levels_rows([-4, -2, 2, 4], [(0, 60), (8, 52), (52, 8), (60, 0)])
    zeta = (1.0, 0.2)
    full = calibrate_class_channel(y, margin, weight, ModelPriors(clean=zeta))
    v01, v10, log_b = full.params

    def log_joint(*p):
        return _log_joint_full(y, margin, weight, zeta, *p)

    laplace = laplace_log_integral(lambda p: log_joint(*p), full.params)
    counts = full.joint(y, margin, weight) * weight.sum()
    alpha = np.array([[zeta[0], zeta[1]], [zeta[1], zeta[0]]])
    gap = dirichlet_laplace_gap(alpha + counts, axis=0)
    assert full.log_evidence == pytest.approx(laplace + gap, abs=2e-3)
    v = np.arange(-100.0, 10.0, 0.5)
    exact = _quadrature(log_joint, (v, v + 0.25, np.arange(-2.0, 3.0, 0.1)))
    assert gap > 0.25 and laplace < full.log_evidence < exact + 0.02

    # Labels with some noise under the paper's channel.
    y, margin, weight = _levels_rows([-4, -2, 2, 4], [(5, 55), (12, 48), (50, 10), (56, 4)])
    zeta, mu = (1.0, 1.0), 1.0
    paper = calibrate_class_noise(y, margin, weight, ModelPriors(clean=zeta, noise_grade=mu))

    def log_joint_paper(*p):
        return _log_joint_paper(y, margin, weight, zeta, mu, *p)

    laplace = laplace_log_integral(lambda p: log_joint_paper(*p), paper.params)
    phi = paper.clean_proba(y, margin)
    noise = weight * (1 - phi)
    gap = dirichlet_laplace_gap(np.array([zeta[0] + weight @ phi, zeta[1] + noise.sum()]))
    gap += dirichlet_laplace_gap(mu + np.bincount(y, weights=noise, minlength=2))
    assert paper.log_evidence == pytest.approx(laplace + gap, abs=2e-3)
    axes = (np.arange(-15.0, 45.0, 0.5), np.arange(-45.0, 45.0, 0.5), np.arange(-4.0, 12.0, 0.2))
    exact = _quadrature(log_joint_paper, axes)
    assert gap > 0.005 and laplace < paper.log_evidence < exact + 0.02
