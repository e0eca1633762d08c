"""Tests of viboost.gibbs.generative: the generative model of section 4 and the label inversions of
S.2.

The oracles are independent of the code under test: the four conditional probabilities of S.2
written from (rho, r) directly, direct simulations of both stochastic label mappings, the exact
CDF of the two-term v-Log (``sigmoid(Z) ~ Beta(b, a)``, a regularised incomplete beta function),
its mean ``digamma(b) - digamma(a)``, the Laplace limit of tiny multiplicities, the standard
logistic distribution and the Beta prior mean.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import betainc, betaincc, digamma, expit, polygamma

from viboost.gibbs.generative import (
    ModelDraw,
    binary_asymmetric_channel,
    inversion_to_noise,
    sample_model,
    sample_two_term_vlog,
    true_to_noisy_ratio,
)

KS_ALPHA = 1e-3  # seeded draws, so each KS verdict is deterministic


def _random_rhos(rng: np.random.Generator, count: int) -> np.ndarray:
    """Random probability vectors with rho_1 >= rho_2 (swap the first two where needed)."""
    rho = rng.dirichlet([1.0, 1.0, 1.0], size=count)
    swap = rho[:, 1] > rho[:, 0]
    rho[swap, 0], rho[swap, 1] = rho[swap, 1], rho[swap, 0].copy()
    return rho


# --------------------------------------------------------------------------------------------
# S.2: label inversions
# --------------------------------------------------------------------------------------------


def test_inversion_four_equalities_exact():
    rng = np.random.default_rng(20240501)
    rhos = _random_rhos(rng, 2000)
    rs = rng.uniform(size=2000)
    # a few edge cases: no inversion, no random trial, r at the ends, theta = 0
    extra = [
        ([1.0, 0.0, 0.0], 0.3),
        ([0.5, 0.5, 0.0], 0.9),
        ([0.4, 0.4, 0.2], 0.0),
        ([0.0, 0.0, 1.0], 1.0),
        ([0.6, 0.0, 0.4], 0.7),
        ([0.8, 0.2, 0.0], 0.5),
    ]
    cases = [(rho, r) for rho, r in zip(rhos, rs, strict=True)] + extra
    for rho, r in cases:
        rho1, rho2, rho3 = rho
        theta, s = inversion_to_noise(rho, r)
        assert 0.0 <= theta <= 1.0 and 0.0 <= s <= 1.0
        got = [theta + (1 - theta) * s, (1 - theta) * (1 - s), (1 - theta) * s]
        got.append(theta + (1 - theta) * (1 - s))
        want = [rho1 + rho3 * r, rho2 + rho3 * (1 - r), rho2 + rho3 * r, rho1 + rho3 * (1 - r)]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        a, b = binary_asymmetric_channel(theta, s)
        np.testing.assert_allclose([a, b], want[1:3], rtol=1e-12, atol=1e-15)


def test_inversion_theta_and_s_formulas_of_the_paper():
    rng = np.random.default_rng(7)
    for rho, r in zip(_random_rhos(rng, 500), rng.uniform(size=500), strict=True):
        rho1, _, rho3 = rho
        theta, s = inversion_to_noise(rho, r)
        np.testing.assert_allclose(theta, 2 * rho1 + rho3 - 1, rtol=1e-12, atol=1e-15)
        paper_s = (1 - rho1 - rho3 * (1 - r)) / (2 - 2 * rho1 - rho3)
        np.testing.assert_allclose(s, paper_s, rtol=1e-9, atol=1e-12)


def test_inversion_theta_one_returns_r():
    assert inversion_to_noise([1.0, 0.0, 0.0], 0.25) == (1.0, 0.25)


def _simulate_inversion(rng, v, rho, r, n):
    kind = rng.choice(3, size=n, p=rho)
    coin = np.where(rng.uniform(size=n) < r, 1, -1)
    return np.select([kind == 0, kind == 1], [v, -v], coin)


def _simulate_noise(rng, v, theta, s, n):
    keep = rng.uniform(size=n) < theta
    coin = np.where(rng.uniform(size=n) < s, 1, -1)
    return np.where(keep, v, coin)


@pytest.mark.parametrize(
    ("rho", "r"),
    [([0.6, 0.15, 0.25], 0.3), ([0.45, 0.4, 0.15], 0.9), ([0.3, 0.1, 0.6], 0.5)],
)
def test_inversion_equivalence_by_simulation(rho, r):
    n = 200_000
    rng = np.random.default_rng(12345)
    theta, s = inversion_to_noise(rho, r)
    a, b = binary_asymmetric_channel(theta, s)
    # (true label v, probability that y != v under the channel)
    for v, p_flip in [(1, a), (-1, b)]:
        freq3 = np.mean(_simulate_inversion(rng, v, rho, r, n) != v)
        freq2 = np.mean(_simulate_noise(rng, v, theta, s, n) != v)
        se = np.sqrt(p_flip * (1 - p_flip) / n)
        assert abs(freq3 - p_flip) < 5 * se
        assert abs(freq2 - p_flip) < 5 * se
        assert abs(freq3 - freq2) < 5 * np.sqrt(2) * se


def test_balanced_ratio():
    rng = np.random.default_rng(3)
    for theta, s in rng.uniform(size=(200, 2)):
        a, b = binary_asymmetric_channel(theta, s)
        want = (2 - (a + b)) / (a + b)
        np.testing.assert_allclose(true_to_noisy_ratio(theta), want, rtol=1e-12)
        np.testing.assert_allclose(want, (1 + theta) / (1 - theta), rtol=1e-12)
    assert true_to_noisy_ratio(0.0) == 1.0
    assert true_to_noisy_ratio(1.0) == np.inf


@pytest.mark.parametrize(
    ("rho", "r", "match"),
    [
        ([0.2, 0.5, 0.3], 0.5, "more often than it keeps"),
        ([0.5, 0.3, 0.3], 0.5, "sum to 1"),
        ([0.6, 0.5, -0.1], 0.5, "nonnegative"),
        ([0.5, 0.5], 0.5, "3 numbers"),
        ([0.5, np.nan, 0.5], 0.5, "finite nonnegative"),
        ([0.6, 0.2, 0.2], 1.5, "r must be a number in"),
        ([0.6, 0.2, 0.2], -0.1, "r must be a number in"),
    ],
)
def test_inversion_bad_input(rho, r, match):
    with pytest.raises(ValueError, match=match):
        inversion_to_noise(rho, r)


@pytest.mark.parametrize(("theta", "s"), [(-0.1, 0.5), (1.1, 0.5), (0.5, 2.0), (np.nan, 0.5)])
def test_channel_bad_input(theta, s):
    with pytest.raises(ValueError, match="must be a number in"):
        binary_asymmetric_channel(theta, s)
    with pytest.raises(ValueError, match="theta must be a number in"):
        true_to_noisy_ratio(-0.5)


# --------------------------------------------------------------------------------------------
# the two-term v-Log
# --------------------------------------------------------------------------------------------


def _vlog_cdf(z, a, b):
    """P(Z <= z) for Z ~ v-Log([+1,-1],[0,0],[a,b]): sigmoid(Z) ~ Beta(b, a).

    ``betainc(b, a, expit(z))``; for z > 0 the equal ``betaincc(a, b, expit(-z))`` keeps the
    upper tail exact where expit(z) rounds to 1."""
    z = np.asarray(z, dtype=float)
    lower = betainc(b, a, expit(np.minimum(z, 0.0)))
    upper = betaincc(a, b, expit(-np.maximum(z, 0.0)))
    return np.where(z <= 0.0, lower, upper)


@pytest.mark.parametrize(("a", "b"), [(0.05, 3.0), (1.0, 1.0), (2.0, 5.0), (200.0, 30.0)])
def test_two_term_vlog_ks(a, b):
    z = sample_two_term_vlog(a, b, size=20_000, random_state=11)
    assert np.all(np.isfinite(z))
    result = stats.kstest(z, lambda x: _vlog_cdf(x, a, b))
    assert result.pvalue > KS_ALPHA
    # the two multiplicities are not interchangeable (unless equal)
    if a != b:
        assert stats.kstest(z, lambda x: _vlog_cdf(x, b, a)).pvalue < KS_ALPHA


def test_two_term_vlog_unit_is_logistic():
    z = sample_two_term_vlog(1.0, 1.0, size=20_000, random_state=5)
    assert stats.kstest(z, stats.logistic.cdf).pvalue > KS_ALPHA


@pytest.mark.parametrize(("a", "b"), [(2.0, 5.0), (0.05, 3.0), (0.5, 0.3)])
def test_two_term_vlog_mean(a, b):
    n = 200_000
    z = sample_two_term_vlog(a, b, size=n, random_state=21)
    se = np.sqrt((polygamma(1, a) + polygamma(1, b)) / n)
    assert abs(z.mean() - (digamma(b) - digamma(a))) < 5 * se


def test_two_term_vlog_tiny_shapes_finite_and_laplace():
    k = 1e-3
    z = sample_two_term_vlog(k, k, size=20_000, random_state=8)
    assert np.all(np.isfinite(z))
    # k log Gamma(k) -> log U as k -> 0, so k Z tends to a standard Laplace variable
    assert stats.kstest(k * z, stats.laplace.cdf).pvalue > KS_ALPHA
    assert np.all(np.isfinite(sample_two_term_vlog(1e-12, 1e-9, size=1000, random_state=0)))


def test_two_term_vlog_shapes_and_broadcasting():
    assert isinstance(sample_two_term_vlog(1.0, 2.0, random_state=0), float)
    assert sample_two_term_vlog([1.0, 2.0], 3.0, random_state=0).shape == (2,)
    assert sample_two_term_vlog(1.0, 1.0, size=7, random_state=0).shape == (7,)
    z = sample_two_term_vlog([1.0, 50.0, 1.0], [1.0, 1.0, 50.0], size=(20_000, 3), random_state=0)
    assert z.shape == (20_000, 3)
    means = z.mean(axis=0)
    want = digamma(np.array([1.0, 1.0, 50.0])) - digamma(np.array([1.0, 50.0, 1.0]))
    np.testing.assert_allclose(means, want, atol=0.05)
    with pytest.raises(ValueError, match="broadcast"):
        sample_two_term_vlog([1.0, 2.0], 1.0, size=3)


def test_two_term_vlog_reproducible_and_generators():
    first = sample_two_term_vlog(0.3, 2.0, size=50, random_state=4)
    np.testing.assert_array_equal(first, sample_two_term_vlog(0.3, 2.0, size=50, random_state=4))
    assert not np.array_equal(first, sample_two_term_vlog(0.3, 2.0, size=50, random_state=5))
    z = sample_two_term_vlog(1.0, 1.0, size=5000, random_state=np.random.RandomState(0))
    assert stats.kstest(z, stats.logistic.cdf).pvalue > KS_ALPHA
    gen = np.random.default_rng(0)
    assert sample_two_term_vlog(1.0, 1.0, size=3, random_state=gen).shape == (3,)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [(0.0, 1.0, "a must be finite positive"), (1.0, -2.0, "b must be finite positive")]
    + [(np.nan, 1.0, "a must be finite"), (1.0, np.inf, "b must be finite")]
    + [([1.0, 0.0], 1.0, "a must be finite positive"), ("x", 1.0, "a must be")],
)
def test_two_term_vlog_bad_shapes(a, b, match):
    with pytest.raises(ValueError, match=match):
        sample_two_term_vlog(a, b)


@pytest.mark.parametrize("state", ["seed", 1.5, -3, True])
def test_bad_random_state(state):
    with pytest.raises(ValueError, match="random_state"):
        sample_two_term_vlog(1.0, 1.0, random_state=state)
    with pytest.raises(ValueError, match="random_state"):
        sample_model(np.ones((2, 2)), random_state=state)


# --------------------------------------------------------------------------------------------
# sample_model
# --------------------------------------------------------------------------------------------

H = np.array([[1, -1, 1], [-1, -1, 1], [1, 1, -1], [-1, 1, 1], [1, 1, 1]])


def test_sample_model_shapes_and_dtypes():
    draw = sample_model(H, random_state=0)
    assert isinstance(draw, ModelDraw)
    assert draw.weights.shape == (3,) and draw.weights.dtype == np.float64
    assert isinstance(draw.noise_grade, float) and np.isfinite(draw.noise_grade)
    assert isinstance(draw.clean_proba, float) and 0.0 <= draw.clean_proba <= 1.0
    assert draw.is_clean.shape == (5,) and draw.is_clean.dtype == np.bool_
    assert draw.margin.shape == (5,) and draw.margin.dtype == np.float64
    assert draw.y.shape == (5,) and draw.y.dtype == np.int64
    assert set(draw.y.tolist()) <= {-1, 1}
    np.testing.assert_allclose(draw.margin, H @ draw.weights, rtol=1e-15, atol=1e-15)
    # lists and booleans-free float arrays are accepted alike
    assert sample_model(H.tolist(), random_state=0).y.shape == (5,)


def test_sample_model_reproducible():
    one = sample_model(H, random_state=3)
    two = sample_model(H, random_state=3)
    for field_one, field_two in zip(one, two, strict=True):
        np.testing.assert_array_equal(field_one, field_two)
    other = sample_model(H, random_state=4)
    assert not np.array_equal(one.weights, other.weights)
    assert one.noise_grade != other.noise_grade


def test_sample_model_no_base_classifiers():
    draw = sample_model(np.empty((4, 0)), random_state=1)
    assert draw.weights.shape == (0,)
    np.testing.assert_array_equal(draw.margin, np.zeros(4))
    assert draw.y.shape == (4,)


def _many_draws(n_draws, base, **priors):
    rng = np.random.default_rng(2024)
    return [sample_model(base, random_state=rng, **priors) for _ in range(n_draws)]


def test_sample_model_distributions():
    zeta = (2.0, 3.0)
    draws = _many_draws(4000, H, clean_prior=zeta, noise_grade_prior=3.0)
    n_draws, n_rows = len(draws), H.shape[0]

    # share of true labels: E[w] = E[theta] = zeta_1 / (zeta_1 + zeta_2)
    w = np.array([d.is_clean for d in draws])
    theta = np.array([d.clean_proba for d in draws])
    mean, total = zeta[0] / sum(zeta), sum(zeta)
    var_theta = zeta[0] * zeta[1] / (total**2 * (total + 1))
    se = np.sqrt((var_theta + (mean - var_theta - mean**2) / n_rows) / n_draws)
    assert abs(w.mean() - mean) < 5 * se
    assert stats.kstest(theta, stats.beta(*zeta).cdf).pvalue > KS_ALPHA

    # weights: standard logistic for mu_0 = 1; noise grade: sigmoid(xi) ~ Beta(3, 3)
    weights = np.concatenate([d.weights for d in draws])
    assert stats.kstest(weights, stats.logistic.cdf).pvalue > KS_ALPHA
    xi = np.array([d.noise_grade for d in draws])
    assert stats.kstest(expit(xi), stats.beta(3.0, 3.0).cdf).pvalue > KS_ALPHA

    # labels: P(y = +1) = sigmoid(F) for true labels and sigmoid(xi) for noisy ones
    y = np.array([d.y for d in draws])
    margin = np.array([d.margin for d in draws])
    p_clean = expit(margin[w])
    p_noisy = expit(np.broadcast_to(xi[:, None], w.shape)[~w])
    for plus, p in [(y[w] == 1, p_clean), (y[~w] == 1, p_noisy)]:
        se = np.sqrt(np.sum(p * (1 - p))) / p.size
        assert abs(plus.mean() - p.mean()) < 5 * se
    # labels agree with sign(F) more often when true than when noisy
    agree = y == np.sign(margin)
    assert agree[w].mean() > agree[~w].mean() + 0.1


def test_sample_model_weight_prior_is_used():
    draws = _many_draws(1000, np.ones((1, 4)), weight_prior=4.0)
    weights = np.concatenate([d.weights for d in draws])
    assert stats.kstest(expit(weights), stats.beta(4.0, 4.0).cdf).pvalue > KS_ALPHA
    assert stats.kstest(weights, stats.logistic.cdf).pvalue < KS_ALPHA


def test_sample_model_extreme_clean_prior():
    all_clean = _many_draws(200, H, clean_prior=(1e6, 1e-6))
    assert np.mean([d.is_clean.mean() for d in all_clean]) > 0.99
    none_clean = _many_draws(200, H, clean_prior=(1e-6, 1e6))
    assert np.mean([d.is_clean.mean() for d in none_clean]) < 0.01


@pytest.mark.parametrize(
    ("base", "match"),
    [
        (np.ones(3), "must be 2-D"),
        (np.ones((2, 2, 2)), "must be 2-D"),
        (np.empty((0, 3)), "at least one row"),
        (np.array([[1.0, 0.0], [1.0, -1.0]]), "must be -1 or \\+1"),
        (np.array([[1.0, 2.0]]), "must be -1 or \\+1"),
        (np.array([[1.0, np.nan]]), "NaN"),
        ([["a", "b"]], "numeric"),
    ],
)
def test_sample_model_bad_base_outputs(base, match):
    with pytest.raises(ValueError, match=match):
        sample_model(base)


@pytest.mark.parametrize("name", ["weight_prior", "noise_grade_prior"])
@pytest.mark.parametrize("value", [0.0, -1.0, np.inf, np.nan, "1", True])
def test_sample_model_bad_priors(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a finite positive number"):
        sample_model(H, **{name: value})


@pytest.mark.parametrize(
    "value", [1.0, (1.0,), (1.0, 2.0, 3.0), (1.0, 0.0), (-1.0, 1.0), (1.0, np.inf), "ab", None]
)
def test_sample_model_bad_clean_prior(value):
    with pytest.raises(ValueError, match="clean_prior must be two finite positive numbers"):
        sample_model(H, clean_prior=value)
