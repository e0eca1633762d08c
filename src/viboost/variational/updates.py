"""The coordinate updates of the inner variational loop (Algorithm 1; supplement S.4), pure.

Each function takes the round's rows (or pseudo-rows) and the other factors and returns the new
parameters of one factor; nothing is mutated. Every per-row sum carries the sample weight
``s_n`` as a multiplicity, so a row of weight 2 counts exactly as two identical rows.

- :func:`weight_posterior`: q(c) = v-Log(beta(h), gamma(H, h), mu(phi)), S.4.1 eqs. (67)-(68);
- :func:`approx_alpha`: its approximate mode, section 5 eq. (17) (S.6, eq. (106));
  :func:`exact_alpha`: its exact mode;
- :func:`leaf_approx_alphas`, :func:`leaf_exact_alphas`: the same for each leaf of a tree with
  per-leaf weights (q(c) factorises over the leaves: S.4.1 on each leaf's rows, ``h = +1``);
- :func:`update_omega`: q(xi), S.4.2 eqs. (73)-(74);
- :func:`update_clean_proba`: q(w), S.4.3 eq. (79), through the one definition of phi_n in
  :class:`viboost.variational.state.CleanLogOdds`;
- :func:`update_eta`: q(theta), S.4.4 eqs. (82)-(83).
"""

from __future__ import annotations

import numpy as np

from viboost._utils.special import log_sum_exp
from viboost.distributions import BinaryLogistic, VersatileLogistic
from viboost.distributions.unit_slope_vlog import grouped_unit_slope_modes, unit_slope_mode
from viboost.variational.state import CleanLogOdds

__all__ = [
    "approx_alpha",
    "exact_alpha",
    "leaf_approx_alphas",
    "leaf_exact_alphas",
    "update_clean_proba",
    "update_eta",
    "update_omega",
    "weight_posterior",
]


def weight_posterior(
    y: np.ndarray,
    margin: np.ndarray,
    h: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
) -> VersatileLogistic:
    """The variational factor q(c) = v-Log(beta(h), gamma(H, h), mu(phi)) of S.4.1, eq. (68).

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
    """Approximate mode of q(c), section 5 eq. (17) with ``|beta_k| = 1``, in log space.

    ``alpha = 1/(2 tau) log[(mu_0 + sum_{y=h} w_n) / (mu_0 + sum_{y!=h} w_n)]`` where
    ``log_weight_n = log(s_n phi_n) - tau y_n H(x_n)`` (S.6, eq. (101), before dividing by Z).
    With all phi_n = 1 and tau = 1 this is section 6 eq. (18): the prior mu_0 is not rescaled
    with the weights.
    """
    correct = y == h
    log_prior = np.log(weight_prior)
    right, wrong = log_weight[correct], log_weight[~correct]
    log_right = np.logaddexp(log_prior, log_sum_exp(right) if right.size else -np.inf)
    log_wrong = np.logaddexp(log_prior, log_sum_exp(wrong) if wrong.size else -np.inf)
    return float((log_right - log_wrong) / (2.0 * tau))


def exact_alpha(
    y: np.ndarray,
    margin: np.ndarray,
    h: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
) -> float:
    """The exact mode of q(c) (:func:`weight_posterior`).

    By the compiled safeguarded Newton of
    :func:`~viboost.distributions.unit_slope_vlog.unit_slope_mode` (q(c) has slopes +-1), from
    0; where that declines (no convergence, or multiplicities beyond 1e200) by the v-Log's own
    root finder, which also works in log space for extreme multiplicities.
    """
    keep = multiplicity > 0
    slope_sign = np.concatenate([[-1.0, 1.0], (y * h)[keep]])
    knot = np.concatenate([[0.0, 0.0], (-y * margin)[keep]])
    weight = np.concatenate([[weight_prior, weight_prior], multiplicity[keep]])
    if np.isfinite(weight.sum()) and weight.max() < 1e200 and weight.min() > 1e-200:
        mode, curvature = unit_slope_mode(slope_sign, knot, weight, 0.0)
        if curvature > 0.0 and np.isfinite(mode):
            return float(mode)
    return weight_posterior(y, margin, h, multiplicity, weight_prior).mode()


def leaf_exact_alphas(
    offsets: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
) -> np.ndarray:
    """The exact mode of each leaf's weight posterior, rows sorted by leaf (leaf ``l``'s rows
    are ``[offsets[l], offsets[l + 1])``; ``h = +1`` on them).

    One compiled call for all leaves (:func:`grouped_unit_slope_modes`); a leaf where it
    declines gets :func:`exact_alpha` on its rows.
    """
    ones = np.ones_like(y)
    modes = grouped_unit_slope_modes(offsets, y, -y * margin, multiplicity, weight_prior)
    for leaf in np.flatnonzero(~np.isfinite(modes)):
        part = slice(offsets[leaf], offsets[leaf + 1])
        modes[leaf] = exact_alpha(
            y[part], margin[part], ones[part], multiplicity[part], weight_prior
        )
    return modes


def leaf_approx_alphas(
    offsets: np.ndarray,
    y: np.ndarray,
    log_weight: np.ndarray,
    weight_prior: float,
    tau: float,
) -> np.ndarray:
    """:func:`approx_alpha` of each leaf (rows sorted by leaf as in :func:`leaf_exact_alphas`):
    ``1/(2 tau) log[(mu_0 + W+) / (mu_0 + W-)]`` with ``W+-`` the leaf's weights of labels +-1,
    Schapire and Singer's smoothed confidence-rated leaf."""
    n_leaves = offsets.size - 1
    leaf = np.repeat(np.arange(n_leaves), np.diff(offsets))
    group = 2 * leaf + (y > 0)
    top = np.full(2 * n_leaves, -np.inf)
    np.maximum.at(top, group, log_weight)
    shift = np.where(np.isfinite(top), top, 0.0)
    sums = np.bincount(group, np.exp(log_weight - shift[group]), minlength=2 * n_leaves)
    with np.errstate(divide="ignore"):
        log_sums = np.log(sums) + shift
    log_prior = np.log(weight_prior)
    log_right = np.logaddexp(log_prior, log_sums[1::2])
    log_wrong = np.logaddexp(log_prior, log_sums[0::2])
    return (log_right - log_wrong) / (2.0 * tau)


def update_omega(
    y: np.ndarray, sample_weight: np.ndarray, noise_proba: np.ndarray, noise_grade_prior: float
) -> np.ndarray:
    """omega_1 = mu_0' + sum_{y=-1} s(1-phi), omega_2 = mu_0' + sum_{y=+1} s(1-phi) (S.4.2)."""
    noisy = sample_weight * noise_proba
    return np.array(
        [noise_grade_prior + noisy[y < 0].sum(), noise_grade_prior + noisy[y > 0].sum()]
    )


def update_clean_proba(
    y: np.ndarray, margin: np.ndarray, eta: np.ndarray, omega: np.ndarray
) -> tuple[CleanLogOdds, np.ndarray, np.ndarray]:
    """The type update (S.4.3, eq. (79)) at the ensemble ``margin = H + alpha h``.

    Returns q(w) as a function of the margin and, at ``margin``, ``(log phi_n, log(1-phi_n))``.
    """
    clean = CleanLogOdds.from_posteriors(eta, omega)
    log_clean, log_noise = clean.log_proba(y, margin)
    return clean, log_clean, log_noise


def update_eta(
    sample_weight: np.ndarray,
    clean_proba: np.ndarray,
    noise_proba: np.ndarray,
    clean_prior: tuple[float, float],
) -> np.ndarray:
    """eta_1 = zeta_1 + sum s phi, eta_2 = zeta_2 + sum s (1-phi) (S.4.4, eqs. (82)-(83))."""
    return np.array(
        [
            clean_prior[0] + np.dot(sample_weight, clean_proba),
            clean_prior[1] + np.dot(sample_weight, noise_proba),
        ]
    )
