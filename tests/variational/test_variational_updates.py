"""viboost.variational.updates: the coordinate updates of S.4 against a generic optimiser of the
closed-form ELBO, expectations by quadrature, and closed forms at huge margins."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import log_sigmoid, normalised_density
from scipy import integrate, optimize, stats
from scipy.special import digamma, expit

from viboost.variational import (
    CleanLogOdds,
    ModelPriors,
    approx_alpha,
    elbo,
    exact_alpha,
    update_clean_proba,
    update_eta,
    update_omega,
    weight_posterior,
)


def _expect(pdf, f) -> float:
    return integrate.quad(
        lambda t: pdf(t) * f(t), -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12, limit=500
    )[0]


def test_updates_stay_finite_at_huge_margins():
    y = np.array([1.0, -1.0, 1.0, -1.0])
    margin = np.array([5000.0, -4000.0, -3000.0, 6000.0])  # y H = 5000, 4000, -3000, -6000
    eta, omega = np.array([2.0, 3.0]), np.array([1.5, 2.5])
    clean, log_clean, log_noise = update_clean_proba(y, margin, eta, omega)
    assert isinstance(clean, CleanLogOdds) and clean.slope == 1.0
    # Rows that H gets badly wrong are noise for sure (log phi ~ -|H|); rows it gets right keep
    # the prior odds times the noise likelihood ratio of S.4.3 eq. (79).
    assert log_clean[2] == pytest.approx(-3000, rel=1e-3)
    assert log_clean[3] == pytest.approx(-6000, rel=1e-3)
    prior_log_odds = digamma(eta[0]) - digamma(eta[1]) + digamma(omega.sum())
    expected = expit(prior_log_odds - digamma(np.array([omega[1], omega[0]])))
    np.testing.assert_allclose(np.exp(log_clean[:2]), expected, rtol=1e-12)
    np.testing.assert_allclose(np.exp(log_noise[:2]), 1 - expected, rtol=1e-12)
    # alpha = 1/2 log[(mu0 + sum_right w) / (mu0 + sum_wrong w)] with w = exp(-y H) up to e^6000.
    h = np.ones(4)
    alpha = approx_alpha(y, h, -y * margin, 1.0, 1.0)
    assert alpha == pytest.approx(0.5 * (3000.0 - 6000.0), rel=1e-12)
    log_b = weight_posterior(y, margin, h, np.exp(log_clean), 1.0).log_normalizer()
    value = elbo(log_b, y, np.ones(4), log_clean, log_noise, eta, omega, ModelPriors())
    assert np.isfinite(log_b) and np.isfinite(value)


@pytest.fixture
def small_state():
    rng = np.random.default_rng(11)
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    margin = rng.normal(size=5)
    h = np.array([1.0, -1.0, -1.0, 1.0, 1.0])
    phi = rng.uniform(0.1, 0.9, size=5)
    weights = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    priors = ModelPriors(weight=1.0, noise_grade=0.8, clean=(1.2, 0.7))
    log_b = weight_posterior(y, margin, h, weights * phi, priors.weight).log_normalizer()
    return y, weights, phi, priors, log_b, margin, h


def _argmax_elbo(objective, start):
    """Maximise over positive parameters with a generic optimiser, in log coordinates."""
    res = optimize.minimize(
        lambda v: -objective(np.exp(v)),
        np.log(start),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 4000},
    )
    return np.exp(res.x)


def test_omega_and_eta_updates_maximise_the_elbo(small_state):
    """The omega (S.4.2) and eta (S.4.4) updates are the coordinate-ascent maximisers."""
    y, weights, phi, priors, log_b, _, _ = small_state
    eta, omega = np.array([2.0, 1.5]), np.array([1.3, 2.2])

    def value(eta, omega):
        return elbo(log_b, y, weights, np.log(phi), np.log1p(-phi), eta, omega, priors)

    omega_star = update_omega(y, weights, 1 - phi, priors.noise_grade)
    np.testing.assert_allclose(omega_star, _argmax_elbo(lambda o: value(eta, o), omega), rtol=1e-6)
    eta_star = update_eta(weights, phi, 1 - phi, priors.clean)
    np.testing.assert_allclose(eta_star, _argmax_elbo(lambda e: value(e, omega), eta), rtol=1e-6)


def test_phi_update_is_the_bernoulli_posterior_of_the_type(small_state):
    """kappa_n of S.4.3 eq. (79) against expectations taken by quadrature here."""
    y, _, _, _, _, margin, h = small_state
    eta, omega, alpha = np.array([3.0, 1.5]), np.array([1.3, 2.2]), 0.7
    _, log_clean, log_noise = update_clean_proba(y, margin + alpha * h, eta, omega)
    q_theta = stats.beta(*eta)
    e_log_theta = integrate.quad(lambda t: q_theta.pdf(t) * np.log(t), 0, 1)[0]
    e_log_1m_theta = integrate.quad(lambda t: q_theta.pdf(t) * np.log1p(-t), 0, 1)[0]
    q_xi = normalised_density(lambda x: omega[0] * log_sigmoid(-x) + omega[1] * log_sigmoid(x))[0]
    for n in range(len(y)):
        clean = e_log_theta + log_sigmoid(y[n] * (margin[n] + alpha * h[n]))  # c -> alpha
        noisy = e_log_1m_theta + _expect(q_xi, lambda x, yn=y[n]: log_sigmoid(yn * x))
        assert np.exp(log_clean[n]) == pytest.approx(expit(clean - noisy), rel=1e-8)
        assert np.exp(log_noise[n]) == pytest.approx(expit(noisy - clean), rel=1e-8)


def test_approx_alpha_is_eq_17_with_the_prior_not_rescaled():
    """alpha = 1/(2 tau) log[(mu_0 + sum_{y=h} w) / (mu_0 + sum_{y!=h} w)], written out here."""
    rng = np.random.default_rng(5)
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(40) < 0.7, y, -y)
    weight = rng.random(40)
    for tau, mu0 in [(1.0, 1.0), (0.5, 2.0), (2.0, 1e-3)]:
        w = weight * np.exp(0.3 * rng.normal(size=40))
        want = np.log((mu0 + w[y == h].sum()) / (mu0 + w[y != h].sum())) / (2 * tau)
        assert approx_alpha(y, h, np.log(w), mu0, tau) == pytest.approx(want, rel=1e-13)


def test_exact_alpha_is_the_mode_of_the_weight_posterior_by_a_generic_minimiser():
    rng = np.random.default_rng(6)
    y = np.where(rng.random(60) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(60) < 0.65, y, -y)
    margin = rng.normal(size=60)
    mult = rng.random(60)
    mu0 = 1.3

    def neg_log_density(c):
        return mu0 * (np.logaddexp(0, c) + np.logaddexp(0, -c)) + np.dot(
            mult, np.logaddexp(0, -y * (margin + c * h))
        )

    res = optimize.minimize_scalar(
        neg_log_density, bounds=(-20, 20), method="bounded", options={"xatol": 1e-12}
    )
    assert exact_alpha(y, margin, h, mult, mu0) == pytest.approx(res.x, abs=1e-7)
