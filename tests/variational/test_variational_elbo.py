"""viboost.variational.elbo: the closed-form dynamic ELBO against a brute-force ELBO by quadrature
and exact sums over the types, and against repeated rows for the sample weights."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from oracles import log_sigmoid, normalised_density
from scipy import integrate, stats
from scipy.special import betaln, log_expit

from viboost.variational import ModelPriors, core_elbo, elbo, log_normalizer_c, weight_posterior

# ---------------------------------------------------------------------------- brute-force ELBO


def _expect(pdf, f) -> float:
    return integrate.quad(
        lambda t: pdf(t) * f(t), -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12, limit=500
    )[0]


def brute_force_elbo(y, margin, h, phi, omega, eta, priors: ModelPriors) -> float:
    """E_q log p(joint) - E_q log q by quadrature over c, xi, theta and exact sums over w."""
    mu0, mu0p, zeta = priors.weight, priors.noise_grade, priors.clean
    # Normalised priors of section 4.
    _, log_prior_c = normalised_density(lambda c: mu0 * (log_sigmoid(c) + log_sigmoid(-c)))
    _, log_prior_xi = normalised_density(lambda x: mu0p * (log_sigmoid(x) + log_sigmoid(-x)))
    # The variational factors.
    log_qc_kernel = lambda c: (  # noqa: E731
        mu0 * (log_sigmoid(c) + log_sigmoid(-c))
        + sum(
            p * log_sigmoid(yn * (m + c * hn))
            for p, yn, m, hn in zip(phi, y, margin, h, strict=True)
        )
    )
    q_c, log_q_c = normalised_density(log_qc_kernel)
    q_xi, log_q_xi = normalised_density(
        lambda x: omega[0] * log_sigmoid(-x) + omega[1] * log_sigmoid(x)
    )
    q_theta = stats.beta(eta[0], eta[1])

    def e_theta(f):
        return integrate.quad(
            lambda t: q_theta.pdf(t) * f(t), 0, 1, epsabs=1e-11, epsrel=1e-11, limit=500
        )[0]

    e_log_prior_c = _expect(q_c, log_prior_c)
    e_log_prior_xi = _expect(q_xi, log_prior_xi)
    e_log_prior_theta = e_theta(lambda t: stats.beta(*zeta).logpdf(t))
    e_log_theta = e_theta(np.log)
    e_log_1m_theta = e_theta(lambda t: np.log1p(-t))
    e_lik_clean = [
        _expect(q_c, lambda c, yn=yn, m=m, hn=hn: log_sigmoid(yn * (m + c * hn)))
        for yn, m, hn in zip(y, margin, h, strict=True)
    ]
    e_lik_noise = [_expect(q_xi, lambda x, yn=yn: log_sigmoid(yn * x)) for yn in y]

    e_log_joint = e_log_prior_c + e_log_prior_xi + e_log_prior_theta
    e_log_q_w = 0.0
    for w in itertools.product([0, 1], repeat=len(y)):
        q_w = np.prod([p if wn else 1 - p for p, wn in zip(phi, w, strict=True)])
        term = sum(
            e_log_theta + e_lik_clean[n] if wn else e_log_1m_theta + e_lik_noise[n]
            for n, wn in enumerate(w)
        )
        e_log_joint += q_w * term
        e_log_q_w += q_w * np.log(q_w)
    e_log_q = _expect(q_c, log_q_c) + _expect(q_xi, log_q_xi) + e_theta(q_theta.logpdf) + e_log_q_w
    return e_log_joint - e_log_q


def test_closed_form_elbo_matches_brute_force():
    rng = np.random.default_rng(7)
    y = np.array([1.0, 1.0, -1.0, -1.0])
    margin = np.array([0.3, -1.2, 0.5, 2.0])
    h = np.array([1.0, -1.0, -1.0, 1.0])
    priors = ModelPriors(weight=1.3, noise_grade=0.7, clean=(1.5, 2.0))
    differences = []
    for _ in range(4):
        phi = rng.uniform(0.05, 0.95, size=4)
        omega = rng.uniform(0.5, 5.0, size=2)
        eta = rng.uniform(0.5, 5.0, size=2)
        log_b = weight_posterior(y, margin, h, phi, priors.weight).log_normalizer()
        closed = elbo(log_b, y, np.ones(4), np.log(phi), np.log1p(-phi), eta, omega, priors)
        brute = brute_force_elbo(y, margin, h, phi, omega, eta, priors)
        differences.append(closed - brute)
    # One constant across variational parameters; here it is zero because the closed form
    # includes the priors' log normalisers.
    assert np.ptp(differences) < 1e-7
    assert abs(np.mean(differences)) < 1e-7


def test_elbo_weights_are_multiplicities():
    rng = np.random.default_rng(3)
    y = np.array([1.0, -1.0, 1.0])
    margin = np.array([0.4, 0.1, -0.7])
    h = np.array([1.0, 1.0, -1.0])
    phi = rng.uniform(0.1, 0.9, size=3)
    omega, eta, priors = np.array([1.5, 2.5]), np.array([3.0, 1.2]), ModelPriors()
    weights = np.array([2.0, 1.0, 3.0])
    log_b = weight_posterior(y, margin, h, weights * phi, 1.0).log_normalizer()
    weighted = elbo(log_b, y, weights, np.log(phi), np.log1p(-phi), eta, omega, priors)
    rep = np.repeat(np.arange(3), weights.astype(int))
    log_b_rep = weight_posterior(y[rep], margin[rep], h[rep], phi[rep], 1.0).log_normalizer()
    repeated = elbo(
        log_b_rep,
        y[rep],
        np.ones(rep.size),
        np.log(phi[rep]),
        np.log1p(-phi[rep]),
        eta,
        omega,
        priors,
    )
    assert weighted == pytest.approx(repeated, rel=1e-10)


def test_core_elbo_is_the_log_evidence_by_quadrature():
    """With phi = 1 the core ELBO is log of the integral of prior x likelihood over c, exactly."""
    y = np.array([1.0, 1.0, -1.0, -1.0, 1.0])
    margin = np.array([0.3, -1.2, 0.5, 2.0, 0.0])
    h = np.array([1.0, -1.0, -1.0, 1.0, -1.0])
    mu0 = 1.7
    log_b = log_normalizer_c(y, margin, h, np.ones(5), mu0)
    evidence = integrate.quad(
        lambda c: np.exp(
            mu0 * (log_expit(c) + log_expit(-c))
            - betaln(mu0, mu0)
            + log_expit(y * (margin + c * h)).sum()
        ),
        -np.inf,
        np.inf,
        epsabs=0,
        epsrel=1e-12,
        limit=500,
    )[0]
    assert core_elbo(log_b, mu0) == pytest.approx(np.log(evidence), rel=1e-10)
