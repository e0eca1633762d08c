"""The class-conditional channel (viboost.noise_fit.channel_calibration), against the model
written out here, simulated labels, and the paper's channel it generalises."""

import numpy as np
import pytest
from scipy.special import softmax

from viboost.noise_fit.channel_calibration import ClassChannelCalibration, calibrate_class_channel
from viboost.noise_fit.class_calibration import (
    calibrate_class_noise,
    expected_joints,
    joint_of,
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


def test_interval_and_extremes():
    margin, true, y = _simulate(6_000, PAIRWISE, 1.0, seed=4)
    fit = calibrate_class_channel(y, margin)
    weight = np.ones(y.size)
    interval = fit.flip_rate_interval(y, margin, weight, random_state=0)
    assert interval.shape == (4, 2) and np.all(interval[:, 0] <= interval[:, 1])
    assert interval[0, 0] - 0.01 <= np.mean(y != true) <= interval[0, 1] + 0.01
    huge = np.array([[1e6, 0.0, -1e6], [0.0, 0.0, 0.0]])
    assert np.all(np.isfinite(fit.true_class_proba(np.array([2, 0]), huge)))
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
