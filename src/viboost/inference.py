"""Stagewise variational inference for the noise model: the updates of Algorithm 1 and the ELBO.

Each boosting round fixes the current ensemble ``H`` and a new stump ``h`` and runs mean-field
variational inference on the dynamic model of section 5 (Figure 4), whose latent variables are

========  ==========================  ====================================================
symbol    variational factor          held here as
========  ==========================  ====================================================
``c``     v-Log(beta(h), gamma(H,h),  :func:`weight_posterior`, mode ``alpha``
          mu(phi))
``xi``    v-Log([+1,-1], [0,0],       ``omega = (omega_1, omega_2)``; noise grade
          omega)                      ``log(omega_2 / omega_1)``
``w_n``   Bernoulli(phi_n)            ``log_clean`` = log phi_n and ``log_noise`` =
                                      log(1 - phi_n), both kept to full precision
``theta`` Beta(eta_1, eta_2)          ``eta``; SNR ``eta_1 / eta_2``
========  ==========================  ====================================================

One place for each piece of the supplement:

- :func:`weight_posterior`, :func:`approx_alpha`: the weight update (S.3.1), its exact mode and
  the approximate mode of eq. appxmode (section 5), in log space;
- :func:`update_noise_grade`: the omega update (S.3.2);
- :func:`update_clean_proba`: the kappa / phi update (S.3.3, eq. supp:eq:kappa);
- :func:`update_snr`: the eta update (S.3.4);
- :func:`elbo`: the dynamic ELBO of S.4 (eq. supp:eq:elbo), including the constant, so that it is
  a lower bound on the log evidence of the round's model.

Every per-row sum carries the sample weight ``s_n`` as a multiplicity: the ELBO is additive over
rows, so a row of weight 2 contributes exactly as two identical rows would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, digamma, gammaln, log_expit, logsumexp, xlogy

from viboost._math import softplus
from viboost.distributions import BinaryLogistic, VersatileLogistic

__all__ = [
    "ModelPriors",
    "approx_alpha",
    "core_elbo",
    "elbo",
    "update_clean_proba",
    "update_noise_grade",
    "update_snr",
    "weight_posterior",
]


@dataclass(frozen=True)
class ModelPriors:
    """Hyperparameters of the generative model of section 4.

    ``weight`` is mu_0 (prior v-Log(u, 0, mu_0 1) on each weight c_m), ``noise_grade`` is mu_0'
    (prior v-Log(u, 0, mu_0' 1) on xi) and ``clean`` is zeta (prior Beta(zeta_1, zeta_2) on theta).
    """

    weight: float = 1.0
    noise_grade: float = 1.0
    clean: tuple[float, float] = (1.0, 1.0)


def weight_posterior(
    y: np.ndarray,
    margin: np.ndarray,
    h: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
) -> VersatileLogistic:
    """The variational factor q(c) = v-Log(beta(h), gamma(H, h), mu(phi)) of S.3.1.

    Built by the b-Log / v-Log conjugacy of section 3: the prior v-Log([+1,-1],[0,0],[mu_0,mu_0])
    conditioned on ``y_n | c ~ b-Log(c, h(x_n), -H(x_n) h(x_n))`` with likelihood powers
    ``multiplicity_n = s_n * phi_n``. Rows of zero multiplicity are constant terms and are dropped.
    """
    prior = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [weight_prior, weight_prior])
    keep = multiplicity > 0
    likelihood = BinaryLogistic(slope=h[keep], knot=-margin[keep] * h[keep])
    return prior.condition(y[keep], likelihood, weights=multiplicity[keep])


def approx_alpha(
    y: np.ndarray,
    h: np.ndarray,
    log_weight: np.ndarray,
    weight_prior: float,
    tau: float,
) -> float:
    """Approximate mode of q(c), eq. appxmode with |beta_k| = 1, in log space.

    ``alpha = 1/(2 tau) log[(mu_0 + sum_{y=h} w_n) / (mu_0 + sum_{y!=h} w_n)]`` where
    ``log_weight_n = log(s_n phi_n) - tau y_n H(x_n)`` (S.6 derivation, before dividing by Z).
    With all phi_n = 1 this is eq. 1oz: the prior mu_0 is not rescaled with the weights.
    """
    correct = y == h
    log_prior = np.log(weight_prior)
    log_right = np.logaddexp(log_prior, logsumexp(log_weight[correct]))
    log_wrong = np.logaddexp(log_prior, logsumexp(log_weight[~correct]))
    return float((log_right - log_wrong) / (2.0 * tau))


def update_noise_grade(
    y: np.ndarray, sample_weight: np.ndarray, noise_proba: np.ndarray, noise_grade_prior: float
) -> np.ndarray:
    """omega_1 = mu_0' + sum_{y=-1} s(1-phi), omega_2 = mu_0' + sum_{y=+1} s(1-phi) (S.3.2)."""
    noisy = sample_weight * noise_proba
    return np.array(
        [noise_grade_prior + noisy[y < 0].sum(), noise_grade_prior + noisy[y > 0].sum()]
    )


def update_clean_proba(
    y: np.ndarray, margin: np.ndarray, eta: np.ndarray, omega: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """phi_n = kappa_n / (1 + kappa_n) with kappa_n of eq. supp:eq:kappa, as (log phi, log(1-phi)).

    ``log kappa_n = psi(eta_1) - psi(eta_2) + psi(omega_0) - psi(omega_{y_n})
    - log(1 + exp(-y_n margin_n))``, with ``omega_{+1} = omega_2``, ``omega_{-1} = omega_1`` and
    ``margin = H + alpha h``. Returned in log space so that phi near 0 or 1 keeps its digits.
    """
    psi_eta = digamma(eta)
    psi_omega = digamma(omega)
    psi_label = np.where(y > 0, psi_omega[1], psi_omega[0])
    log_kappa = psi_eta[0] - psi_eta[1] + digamma(omega.sum()) - psi_label - softplus(-y * margin)
    return log_expit(log_kappa), log_expit(-log_kappa)


def update_snr(
    sample_weight: np.ndarray,
    clean_proba: np.ndarray,
    noise_proba: np.ndarray,
    clean_prior: tuple[float, float],
) -> np.ndarray:
    """eta_1 = zeta_1 + sum s phi, eta_2 = zeta_2 + sum s (1-phi) (S.3.4)."""
    return np.array(
        [
            clean_prior[0] + np.dot(sample_weight, clean_proba),
            clean_prior[1] + np.dot(sample_weight, noise_proba),
        ]
    )


def elbo(
    log_normalizer_c: float,
    y: np.ndarray,
    sample_weight: np.ndarray,
    log_clean: np.ndarray,
    log_noise: np.ndarray,
    eta: np.ndarray,
    omega: np.ndarray,
    priors: ModelPriors,
) -> float:
    """The dynamic ELBO of S.4 (eq. supp:eq:elbo), constant included.

    The expectations of the weight terms cancel against the entropy of q(c), leaving
    ``log B_c`` (the log normaliser of :func:`weight_posterior`); the constant is
    ``-log B(mu_0, mu_0) - log B(mu_0', mu_0') - log B(zeta_1, zeta_2)``, the log normalisers of the
    three priors, so the value is a lower bound on the round's log evidence.
    """
    mu0p = priors.noise_grade
    zeta = np.asarray(priors.clean, dtype=float)
    clean = np.exp(log_clean)
    noise = np.exp(log_noise)
    s_clean = np.dot(sample_weight, clean)
    s_noise_neg = np.dot(sample_weight[y < 0], noise[y < 0])
    s_noise_pos = np.dot(sample_weight[y > 0], noise[y > 0])
    n_total = sample_weight.sum()
    omega0, eta0 = omega.sum(), eta.sum()
    psi_omega, psi_omega0 = digamma(omega), digamma(omega0)
    psi_eta, psi_eta0 = digamma(eta), digamma(eta0)

    constant = -betaln(priors.weight, priors.weight) - betaln(mu0p, mu0p) - betaln(*zeta)
    # q(xi) entropy + E log p(xi): log B(omega) + (omega_0 - 2 mu_0') psi(omega_0) - ...
    xi_terms = (
        gammaln(omega).sum()
        - gammaln(omega0)
        + (omega0 - 2.0 * mu0p) * psi_omega0
        - np.dot(omega - mu0p, psi_omega)
    )
    # q(theta) entropy + E log p(theta).
    theta_terms = (
        gammaln(eta).sum()
        - gammaln(eta0)
        + (eta0 - zeta.sum()) * psi_eta0
        - np.dot(eta - zeta, psi_eta)
    )
    # q(w) entropy; xlogy(p, p) is 0 at p = 0.
    w_entropy = -np.dot(sample_weight, xlogy(clean, clean) + xlogy(noise, noise))
    # E log p(w | theta).
    w_terms = -n_total * psi_eta0 + psi_eta[0] * s_clean + psi_eta[1] * (n_total - s_clean)
    # E log p(y_n | w_n = 0, xi) for the noisy labels.
    noise_terms = (
        -psi_omega0 * (s_noise_neg + s_noise_pos)
        + psi_omega[0] * s_noise_neg
        + psi_omega[1] * s_noise_pos
    )
    return float(
        constant + log_normalizer_c + xi_terms + theta_terms + w_entropy + w_terms + noise_terms
    )


def core_elbo(log_normalizer_c: float, weight_prior: float) -> float:
    """Log evidence of the round's core model (section 2, all labels true).

    ``log B_c - log B(mu0, mu0)``.

    With phi_n = 1 the posterior of c is exactly the v-Log of :func:`weight_posterior`, so this is
    ``log p(y | H, h)`` itself, not just a bound.
    """
    return float(log_normalizer_c - betaln(weight_prior, weight_prior))
