"""The dynamic ELBO of a round (supplement S.5) and its log normaliser ``log B_c`` (S.5.1).

- :func:`elbo`: the dynamic ELBO of S.5 (eqs. (87)-(91)), constant included, so that it is a
  lower bound on the log evidence of the round's model; the inner loop of
  :func:`viboost.variational.run_round` stops on it;
- :func:`core_elbo`: the exact log evidence of the core model (section 2, every label true);
- :func:`log_normalizer_c`: ``log B_c`` of q(c), fast (the compiled unit-slope normaliser of
  :mod:`viboost.distributions.unit_slope_vlog`), with
  :meth:`~viboost.distributions.VersatileLogistic.log_normalizer` as the reference and fallback.
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, digamma, gammaln, xlogy

from viboost.distributions.unit_slope_vlog import (
    grouped_unit_slope_log_normalizers,
    unit_slope_log_normalizer,
)
from viboost.variational.priors import ModelPriors
from viboost.variational.updates import weight_posterior

__all__ = ["core_elbo", "elbo", "leaf_log_normalizer", "log_normalizer_c"]


def elbo(
    log_normalizer: float,
    y: np.ndarray,
    sample_weight: np.ndarray,
    log_clean: np.ndarray,
    log_noise: np.ndarray,
    eta: np.ndarray,
    omega: np.ndarray,
    priors: ModelPriors,
) -> float:
    """The dynamic ELBO of S.5 (eqs. (87)-(91)), constant included.

    The expectations of the weight terms cancel against the entropy of q(c), leaving
    ``log_normalizer``, the ``log B_c`` of q(c) (:func:`log_normalizer_c`); the constant is
    ``-log B(mu_0, mu_0) - log B(mu_0', mu_0') - log B(zeta_1, zeta_2)``, the log normalisers of
    the three priors, so the value is a lower bound on the round's log evidence.
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
        constant + log_normalizer + xi_terms + theta_terms + w_entropy + w_terms + noise_terms
    )


def core_elbo(log_normalizer: float, weight_prior: float) -> float:
    """Log evidence of the round's core model (section 2, all labels true).

    ``log B_c - log B(mu0, mu0)`` with ``log_normalizer`` = ``log B_c``. With phi_n = 1 the
    posterior of c is exactly the v-Log of :func:`~.updates.weight_posterior`, so this is
    ``log p(y | H, h)`` itself, not just a bound.
    """
    return float(log_normalizer - betaln(weight_prior, weight_prior))


def log_normalizer_c(
    y: np.ndarray,
    margin: np.ndarray,
    h: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
    start: float = 0.0,
) -> float:
    """``log B_c``, the log normaliser of q(c) (:func:`~.updates.weight_posterior`), S.5.1.

    ``-log q~(c) = g(c) = mu_0 softplus(c) + mu_0 softplus(-c) + sum_n m_n softplus(u_n - v_n c)``
    with ``u_n = -y_n H_n``, ``v_n = y_n h_n`` and ``m_n = s_n phi_n``: a v-Log whose slopes are
    all +-1, integrated by the compiled
    :func:`~viboost.distributions.unit_slope_vlog.unit_slope_log_normalizer` (Taylor expansion
    about the mode for narrow posteriors, trapezoid rule for wide ones). Where that declines
    (extreme multiplicities, very wide posteriors) the adaptive quadrature of
    :meth:`~viboost.distributions.VersatileLogistic.log_normalizer` decides.

    ``start`` is a guess of the mode (the approximate mode, or the last alpha).
    """
    keep = multiplicity > 0
    slope_sign = np.concatenate([[-1.0, 1.0], (y * h)[keep]])
    knot = np.concatenate([[0.0, 0.0], (-y * margin)[keep]])
    weight = np.concatenate([[weight_prior, weight_prior], multiplicity[keep]])
    value = unit_slope_log_normalizer(slope_sign, knot, weight, float(start))
    if np.isfinite(value):
        return value
    return weight_posterior(y, margin, h, multiplicity, weight_prior).log_normalizer()


def leaf_log_normalizer(
    offsets: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
    start: np.ndarray,
) -> float:
    """The ``log B_c`` term of a round whose tree has per-leaf weights, in the units of
    :func:`elbo` and :func:`core_elbo` (which subtract one ``log B(mu_0, mu_0)``).

    q(c) factorises over the leaves, so the ELBO gains one ``log B_l - log B(mu_0, mu_0)`` per
    leaf: this returns ``sum_l log B_l - (L - 1) log B(mu_0, mu_0)``. Rows are sorted by leaf
    (leaf ``l``: ``[offsets[l], offsets[l + 1])``, ``h = +1``); each ``log B_l`` is
    :func:`log_normalizer_c` on the leaf's rows (one compiled call for all leaves, the reference
    quadrature where it declines). ``start`` holds guesses of the leaves' modes.
    """
    values = grouped_unit_slope_log_normalizers(
        offsets, y, -y * margin, multiplicity, weight_prior, start
    )
    ones = np.ones_like(y)
    for leaf in np.flatnonzero(~np.isfinite(values)):
        part = slice(offsets[leaf], offsets[leaf + 1])
        values[leaf] = log_normalizer_c(
            y[part], margin[part], ones[part], multiplicity[part], weight_prior, start[leaf]
        )
    n_leaves = offsets.size - 1
    return float(values.sum() - (n_leaves - 1) * betaln(weight_prior, weight_prior))
