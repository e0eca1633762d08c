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
  a lower bound on the log evidence of the round's model;
- :func:`log_normalizer_c`: its ``log B_c`` (S.5), fast: a Taylor expansion of ``-log q~(c)``
  about the mode integrated on the polynomial (narrow posteriors), or a compiled trapezoid rule
  (wide ones), with :meth:`VersatileLogistic.log_normalizer` as the reference and fallback.

Between rounds and across the rows:

- :class:`CleanLogOdds`: q(w) after a round as a function of the margin (eq. supp:eq:kappa with
  the final omega and eta), so phi_n is recomputed, never stored;
- :func:`stump_weights`: the weights under which the least weighted error picks the stump of
  largest approximate mode (section 5), one compiled pass;
- :class:`RowMargins`: the ensemble margins and, per round, ``H += alpha h`` fused with the next
  round's weights.

Every per-row sum carries the sample weight ``s_n`` as a multiplicity: the ELBO is additive over
rows, so a row of weight 2 contributes exactly as two identical rows would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.special import betaln, digamma, gammaln, log_expit, logsumexp, xlogy

from viboost._math import log_sum_exp, softplus
from viboost._parallel import threaded_kernel
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
    right, wrong = log_weight[correct], log_weight[~correct]
    log_right = np.logaddexp(log_prior, log_sum_exp(right) if right.size else -np.inf)
    log_wrong = np.logaddexp(log_prior, log_sum_exp(wrong) if wrong.size else -np.inf)
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


# ---------------------------------------------------------------------------------------------
# log B_c fast: Taylor expansion of g(c) = -log q~(c) about its mode (S.5, for narrow posteriors)
# ---------------------------------------------------------------------------------------------
#: Order of the Taylor polynomial of g about the mode.
_TAYLOR_ORDER = 24
#: The expansion is used only where g(c* +- x) reaches _TAIL_RISE within |x| <= _TAYLOR_REACH: the
#: Taylor series of softplus converges for |x| < pi, so at |x| <= 1 the remainder of order 25 is
#: below ~pi**-25 ~ 4e-13 per unit of multiplicity; beyond the window exp(-g) < exp(-40) and, g
#: being convex, the tail mass is below exp(-40) |x| / 40.
_TAYLOR_REACH = 1.0
_TAIL_RISE = 40.0


def _sigmoid_derivative_polynomials(order: int) -> np.ndarray:
    """Coefficients ``P[k, j]`` with ``sigma^(k)(z) = sum_j P[k, j] sigma(z)^j``.

    ``P_0(s) = s`` and ``P_{k+1}(s) = P_k'(s) s (1 - s)``, in exact integers.
    """
    polys = [[0, 1]]
    for _ in range(order):
        p = polys[-1]
        dp = [j * p[j] for j in range(1, len(p))]  # P_k'(s), coefficient of s^(j-1)
        nxt = [0] * (len(dp) + 2)
        for j, c in enumerate(dp):  # times (s - s^2)
            nxt[j + 1] += c
            nxt[j + 2] -= c
        polys.append(nxt)
    out = np.zeros((order + 1, order + 2))
    for k, p in enumerate(polys):
        out[k, : len(p)] = p
    return out


_SIGMOID_POLYS = _sigmoid_derivative_polynomials(_TAYLOR_ORDER)


@numba.njit(cache=True)
def _newton_mode(slope_sign, knot, weight, start):  # pragma: no cover - compiled
    """Mode of g(c) = sum_k w_k softplus(knot_k - slope_k c) (convex), safeguarded Newton."""
    lo, hi = -np.inf, np.inf
    c = start
    for _ in range(200):
        grad, curv = 0.0, 0.0
        for k in range(knot.shape[0]):
            z = knot[k] - slope_sign[k] * c
            if z >= 0.0:
                e = math.exp(-z)
                sig = 1.0 / (1.0 + e)  # sigma(z)
                tail = e * sig  # 1 - sigma(z)
            else:
                e = math.exp(z)
                tail = 1.0 / (1.0 + e)
                sig = e * tail
            grad -= weight[k] * slope_sign[k] * sig
            curv += weight[k] * sig * tail
        if grad > 0.0:
            hi = c
        else:
            lo = c
        step = -grad / curv if curv > 0.0 else np.nan
        new = c + step
        if not (new > lo and new < hi) or not math.isfinite(new):
            if math.isfinite(lo) and math.isfinite(hi):
                new = 0.5 * (lo + hi)
            elif math.isfinite(lo):
                new = lo + max(1.0, abs(lo))
            else:
                new = hi - max(1.0, abs(hi))
        if abs(new - c) <= 1e-14 * (1.0 + abs(c)) or grad == 0.0:
            return new, curv
        c = new
    # Not converged in 200 steps: a NaN curvature makes both callers return NaN, and
    # log_normalizer_c falls back to the next method (at last the adaptive S.5 quadrature).
    return c, np.nan


@numba.njit(cache=True)
def _taylor_log_normalizer(slope_sign, knot, weight, start, polys, reach, rise):  # pragma: no cover
    """log of the integral of exp(-g), g(c) = sum_k w_k softplus(knot_k - slope_k c); NaN if the
    posterior is too wide for the expansion (then the caller integrates accurately)."""
    mode, curv = _newton_mode(slope_sign, knot, weight, start)
    if not curv > 0.0:
        return np.nan
    # Order: the window is about sqrt(2 rise / g'') wide; the order-k remainder there is about
    # (window / pi)^k per unit multiplicity; take k with (window / pi)^k < 1e-17, at most 24.
    window = 1.5 * math.sqrt(2.0 * rise / curv)
    if window > reach:
        return np.nan
    ratio = window / math.pi
    order = polys.shape[0] - 1
    if ratio < 0.5:
        order = min(order, max(6, int(math.ceil(math.log(1e-17) / math.log(ratio)))))
    # Taylor coefficients of g about the mode: F[k] = g^(k)(mode); d/dc = -slope d/dz.
    coef = np.zeros(order + 1)
    for k in range(knot.shape[0]):
        z = knot[k] - slope_sign[k] * mode
        w = weight[k]
        coef[0] += w * (max(z, 0.0) + math.log1p(math.exp(-abs(z))))
        # sigma^(j)(z) = (-1)^(j+1) sigma^(j)(-z) for j >= 1: evaluate at s = sigma(-|z|) <= 1/2.
        s = 1.0 / (1.0 + math.exp(abs(z)))
        flip = z > 0.0
        sign = -slope_sign[k]
        factor = w * sign
        for j in range(order):  # coefficient order j + 1 uses sigma^(j)
            p = 0.0
            for i in range(j + 1, 0, -1):  # Horner over s^1 .. s^(j+1)
                p = (p + polys[j, i]) * s
            if flip:
                p = 1.0 - p if j == 0 else (p if j % 2 == 1 else -p)
            coef[j + 1] += factor * p
            factor *= sign
    if not (math.isfinite(coef[0]) and coef[2] > 0.0):
        return np.nan
    # Reduced polynomial g(mode + x) - g(mode) = sum_k coef[k] x^k / k!.
    for k in range(2, order + 1):
        coef[k] /= math.gamma(k + 1.0)

    def rise_at(x):
        acc = 0.0
        for k in range(order, 0, -1):
            acc = (acc + coef[k]) * x
        return acc

    step = 0.1 / math.sqrt(coef[2] * 2.0)  # a tenth of the Laplace width
    total = 0.0
    for side in (-1.0, 1.0):
        x = 0.0
        while True:
            x += step
            if x > reach:
                return np.nan
            r = rise_at(side * x)
            total += math.exp(-r)
            if r >= rise:
                break
    total += math.exp(-rise_at(0.0))
    return -coef[0] + math.log(total * step)


@numba.njit(cache=True)
def _direct_log_normalizer(slope_sign, knot, weight, start, rise, max_nodes):  # pragma: no cover
    """log of the integral of exp(-g) by the trapezoid rule on g itself, any width.

    Steps of half a Laplace width (at most 1/4): the integrand is analytic in a strip of
    half-width pi about the real axis, so the rule's error is below exp(-2 pi^2 / 0.25) relative.
    Nodes go out from the mode until g has risen by ``rise``; NaN beyond ``max_nodes``.
    """
    mode, curv = _newton_mode(slope_sign, knot, weight, start)
    if not curv > 0.0:
        return np.nan
    step = min(0.5 / math.sqrt(curv), 0.25)
    n = knot.shape[0]
    z0 = np.empty(n)
    sp0 = np.empty(n)
    g0 = 0.0
    for k in range(n):
        z = knot[k] - slope_sign[k] * mode
        z0[k] = z
        sp0[k] = max(z, 0.0) + math.log1p(math.exp(-abs(z)))
        g0 += weight[k] * sp0[k]
    total = 1.0  # the node at the mode
    nodes = 1
    for side in (-1.0, 1.0):
        x = 0.0
        while True:
            x += step
            nodes += 1
            if nodes > max_nodes:
                return np.nan
            r = 0.0
            for k in range(n):
                z = z0[k] - slope_sign[k] * side * x
                r += weight[k] * (max(z, 0.0) + math.log1p(math.exp(-abs(z))) - sp0[k])
            total += math.exp(-r)
            if r >= rise:
                break
    return -g0 + math.log(total * step)


def log_normalizer_c(
    y: np.ndarray,
    margin: np.ndarray,
    h: np.ndarray,
    multiplicity: np.ndarray,
    weight_prior: float,
    start: float = 0.0,
) -> float:
    """``log B_c``, the log normaliser of :func:`weight_posterior`, fast for narrow posteriors.

    ``-log q~(c) = g(c) = mu_0 softplus(c) + mu_0 softplus(-c) + sum_n m_n softplus(u_n - v_n c)``
    with ``u_n = -y_n H_n``, ``v_n = y_n h_n`` and ``m_n = s_n phi_n``. When the posterior is
    narrow (``g`` rises by 40 within 1 of its mode, as it does once ``sum m_n`` is in the
    hundreds), ``g`` is expanded to order 24 about its mode (one pass over the terms for the
    coefficients, a few for the mode) and the one-dimensional integral of ``exp(-g)`` is done on
    the polynomial by a trapezoid rule at a tenth of the Laplace width: no pass over the terms per
    quadrature node. A wider posterior (few rows) is integrated by the trapezoid rule on ``g``
    itself, at most about two million term evaluations; beyond that, or with extreme
    multiplicities, :meth:`~viboost.distributions.VersatileLogistic.log_normalizer` (S.5 with
    adaptive quadrature) decides.

    ``start`` is a guess of the mode (the approximate mode, or the last alpha).
    """
    keep = multiplicity > 0
    slope_sign = np.concatenate([[-1.0, 1.0], (y * h)[keep]])
    knot = np.concatenate([[0.0, 0.0], (-y * margin)[keep]])
    weight = np.concatenate([[weight_prior, weight_prior], multiplicity[keep]])
    if np.isfinite(weight.sum()) and weight.max() < 1e200:
        value = _taylor_log_normalizer(
            slope_sign, knot, weight, float(start), _SIGMOID_POLYS, _TAYLOR_REACH, _TAIL_RISE
        )
        if np.isfinite(value):
            return float(value)
        value = _direct_log_normalizer(
            slope_sign, knot, weight, float(start), _TAIL_RISE, max(64, 2_000_000 // weight.size)
        )
        if np.isfinite(value):
            return float(value)
    return weight_posterior(y, margin, h, multiplicity, weight_prior).log_normalizer()


# ---------------------------------------------------------------------------------------------
# q(w) between rounds, and the stump-search weights of section 5
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CleanLogOdds:
    """q(w_n) as a function of the ensemble H.

    ``logit phi_n = offset[y_n] - slope * softplus(-y_n H_n)``.

    After a round's last phi update (eq. supp:eq:kappa) ``slope = 1`` and ``offset[y] =
    psi(eta_1) - psi(eta_2) + psi(omega_0) - psi(omega_y)`` (:func:`clean_log_odds_offset`), and
    ``H`` includes that round's ``alpha h``; before the first round, ``slope = 0`` and
    ``offset = logit(init_clean_proba)`` (``+inf`` for phi = 1, the core model). So the per-row
    phi never has to be stored: it is recomputed from the margin when needed.
    """

    offset_neg: float
    offset_pos: float
    slope: float

    @classmethod
    def constant(cls, clean_proba: float) -> CleanLogOdds:
        """phi_n = ``clean_proba`` for every row."""
        with np.errstate(divide="ignore"):
            logit = float(np.log(clean_proba) - np.log1p(-clean_proba))
        return cls(logit, logit, 0.0)

    @classmethod
    def from_updates(cls, eta: np.ndarray, omega: np.ndarray) -> CleanLogOdds:
        """The state left by a phi update with q(theta) = Beta(eta), q(xi) = v-Log(omega)."""
        neg, pos = clean_log_odds_offset(eta, omega)
        return cls(neg, pos, 1.0)

    def proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n for labels ``y`` in {-1, +1} and ensemble ``margin`` (one compiled pass)."""
        y, margin = (np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin))
        return _clean_proba_kernel(y, margin, self.offset_neg, self.offset_pos, self.slope)

    def log_proba(self, y: np.ndarray, margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log phi_n, log(1 - phi_n))`` for labels ``y`` in {-1, +1} and ensemble ``margin``."""
        offset = np.where(y > 0, self.offset_pos, self.offset_neg)
        log_kappa = offset - self.slope * softplus(-y * margin) if self.slope else offset
        return log_expit(log_kappa), log_expit(-log_kappa)


@threaded_kernel(cache=True)
def _clean_proba_kernel(y, margin, a_neg, a_pos, slope):  # pragma: no cover - compiled
    """phi_n = sigmoid(a_y - slope softplus(-y_n H_n)), overflow-free."""
    n = y.shape[0]
    out = np.empty(n)
    for i in numba.prange(n):
        t = -y[i] * margin[i]
        logit = a_pos if y[i] > 0.0 else a_neg
        if slope != 0.0:
            logit -= slope * (max(t, 0.0) + math.log1p(math.exp(-abs(t))))
        if logit >= 0.0:
            out[i] = 1.0 / (1.0 + math.exp(-logit))
        else:
            e = math.exp(logit)
            out[i] = e / (1.0 + e)
    return out


def clean_log_odds_offset(eta: np.ndarray, omega: np.ndarray) -> tuple[float, float]:
    """``psi(eta_1) - psi(eta_2) + psi(omega_0) - psi(omega_y)`` for y = -1 and y = +1."""
    base = digamma(eta[0]) - digamma(eta[1]) + digamma(omega[0] + omega[1])
    psi_omega = digamma(omega)
    return float(base - psi_omega[0]), float(base - psi_omega[1])


_CHUNK_ROWS = 1 << 16
_MAX_CHUNKS = 64


@threaded_kernel(cache=True)
def _weights_kernel(y, margin, sample_weight, a_neg, a_pos, slope, clean, tau, exact, out):
    """Unnormalised stump-search weights, scaled by exp(-M) with M a bound on their log.

    approx: s phi exp(tau u); exact: s phi sigma(u); u = -y H. With slope 1, phi = 1 / (1 +
    A (1 + e^u)), A = exp(-a_y): one or two exponentials per row and no overflow, as
    ``log(phi e^{tau u}) <= M = max(tau u + min(0, a - max(u, 0)))`` within 2 log 2.
    Returns the sum, accumulated over fixed chunks in a fixed order.
    """  # pragma: no cover - compiled
    n = y.shape[0]
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    bound = np.full(n_chunks, -np.inf)
    for c in numba.prange(n_chunks):
        b = -np.inf
        for i in range(c * size, min(n, (c + 1) * size)):
            if sample_weight[i] > 0.0:
                u = -y[i] * margin[i]
                a = a_pos if y[i] > 0.0 else a_neg
                lead = min(0.0, u) if exact else tau * u
                b = max(b, lead + (min(0.0, a - max(u, 0.0)) if slope > 0.0 else 0.0))
        bound[c] = b
    big = bound.max()
    a_neg_exp = math.exp(-a_neg) if slope > 0.0 else 0.0
    a_pos_exp = math.exp(-a_pos) if slope > 0.0 else 0.0
    # exp(-M) once when it is a normal float (|M| < 700): then tau = 1 needs one exp per row.
    scale = math.exp(-big) if abs(big) < 700.0 else 0.0
    unit_tau = tau == 1.0 and scale > 0.0
    sums = np.zeros(n_chunks)
    for c in numba.prange(n_chunks):
        acc = 0.0
        for i in range(c * size, min(n, (c + 1) * size)):
            s = sample_weight[i]
            if not s > 0.0:
                out[i] = 0.0
                continue
            u = -y[i] * margin[i]
            A = a_pos_exp if y[i] > 0.0 else a_neg_exp
            if u <= 0.0:
                e = math.exp(u)  # e^u <= 1
                lead = e * scale if (exact or unit_tau) else math.exp(tau * u - big)
                if exact:
                    w = lead / ((1.0 + e) * (1.0 + A + A * e))
                else:
                    w = lead / (1.0 + A + A * e)
            else:
                e = math.exp(-u)  # e^-u < 1
                if exact:
                    # sigma(u) phi(u) e^-M = e^-(u+M) / ((1 + e^-u)(e^-u + A e^-u + A)) (slope 1)
                    lead = e * scale if scale > 0.0 else math.exp(-u - big)
                    w = lead / ((1.0 + e) * (e + A * e + A)) if slope > 0.0 else 0.0
                    if slope == 0.0:
                        w = (scale if scale > 0.0 else math.exp(-big)) / (1.0 + e)
                elif slope > 0.0:
                    lead = scale if unit_tau else math.exp((tau - 1.0) * u - big)
                    w = lead / ((1.0 + A) * e + A)
                else:
                    w = math.exp(tau * u - big)
            w *= s * clean
            out[i] = w
            acc += w
        sums[c] = acc
    total = 0.0
    for c in range(n_chunks):
        total += sums[c]
    return total


def stump_weights(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    odds: CleanLogOdds,
    tau: float,
    exact: bool = False,
) -> np.ndarray:
    """Normalised weights under which the least weighted error picks this round's stump.

    ``s_n phi_n exp(-tau y_n H_n)`` for the approximate mode (section 5: the stump of largest
    approximate mode is the one of least weighted error under these weights), or
    ``s_n phi_n sigmoid(-y_n H_n)`` for one Newton step towards the exact mode. phi_n comes from
    ``odds``; no overflow or total underflow whatever the margins, one compiled pass.
    """
    y, margin, sample_weight = (
        np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin, sample_weight)
    )
    out = np.empty_like(margin)
    constant = odds.slope == 0.0
    if constant:  # phi is the same for every row: it scales out
        a_neg = a_pos = 0.0
    else:
        a_neg, a_pos = odds.offset_neg, odds.offset_pos
    if max(abs(a_neg), abs(a_pos)) < 600.0:
        total = _weights_kernel(
            y, margin, sample_weight, a_neg, a_pos, odds.slope, 1.0, float(tau), exact, out
        )
        if total > 0.0 and np.isfinite(total):
            out /= total
            return out
    # Extreme odds: the same weights from their logs.
    log_clean, _ = odds.log_proba(y, margin)
    lead = log_expit(-y * margin) if exact else -tau * y * margin
    with np.errstate(divide="ignore"):
        log_w = np.log(sample_weight) + log_clean + lead
    return np.exp(log_w - logsumexp(log_w))


@threaded_kernel(cache=True)
def _advance_kernel(y, sample_weight, h, alpha, margin, expu, a_neg, a_pos, exact, out):
    """H += alpha h and exp(u) *= exp(-alpha y h) in place; next weights (slope-1 odds, tau = 1).

    With ``E = exp(u)``, ``u = -y H``: ``phi = 1 / (1 + A (1 + E))`` (``A = exp(-a_y)``), so
    ``phi e^u = E / (1 + A + A E)`` and ``phi sigma(u) = E / ((1 + E)(1 + A + A E))``, both
    rational in E: no exponential per row. Returns the sum of the weights, max |u| and the range
    of the knots u over the weighted rows (for :func:`~viboost.compression.compress_round`).
    """  # pragma: no cover - compiled
    n = y.shape[0]
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    down, up = math.exp(-alpha), math.exp(alpha)
    big_neg, big_pos = math.exp(-a_neg), math.exp(-a_pos)
    sums = np.zeros(n_chunks)
    reach = np.zeros(n_chunks)
    lows = np.full(n_chunks, np.inf)
    highs = np.full(n_chunks, -np.inf)
    for c in numba.prange(n_chunks):
        acc, far, low, high = 0.0, 0.0, np.inf, -np.inf
        for i in range(c * size, min(n, (c + 1) * size)):
            yi = y[i]
            margin[i] += alpha * h[i]
            e = expu[i] * (down if yi * h[i] > 0.0 else up)
            expu[i] = e
            far = max(far, abs(margin[i]))
            s = sample_weight[i]
            if not s > 0.0:
                out[i] = 0.0
                continue
            u = -yi * margin[i]
            low = min(low, u)
            high = max(high, u)
            A = big_pos if yi > 0.0 else big_neg
            if e <= 1.0:
                w = e / (1.0 + A + A * e)
                if exact:
                    w /= 1.0 + e
            else:
                r = 1.0 / e
                w = 1.0 / ((1.0 + A) * r + A)  # phi e^u
                if exact:  # phi sigma(u) = phi e^u * r / (1 + r)
                    w *= r / (1.0 + r)
            w *= s
            out[i] = w
            acc += w
        sums[c] = acc
        reach[c] = far
        lows[c] = low
        highs[c] = high
    total = 0.0
    for c in range(n_chunks):
        total += sums[c]
    return total, reach.max(), lows.min(), highs.max()


class RowMargins:
    """The boosting loop's per-row state: ``H(x_n)`` and, as a cache, ``exp(-y_n H(x_n))``.

    :meth:`advance` adds a round's ``alpha h`` and returns the next round's stump weights
    (:func:`stump_weights`) in the same pass. With the noise model's odds (slope 1) and
    ``tau = 1`` (or the exact mode) the weights are rational in the cached exponential, updated
    by a factor ``exp(-+alpha)`` per round, so a round needs no exponential per row. Elsewhere
    (other tau, the core model, margins beyond +-700, extreme odds) the weights come from
    :func:`stump_weights`. Both give the same weights to rounding (relative 1e-13 after
    thousands of rounds).
    """

    _REACH = 700.0  # |H| beyond which exp(-y H) may overflow: the cache is dropped

    def __init__(self, y: np.ndarray, sample_weight: np.ndarray, margin: np.ndarray) -> None:
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
        self.margin = np.array(margin, dtype=np.float64)
        self._expu: np.ndarray | None = None
        #: (min, max) of the knots -y H over the weighted rows when the last advance found it.
        self.knot_range: tuple[float, float] | None = None
        self._cache_ok = bool(np.max(np.abs(self.margin), initial=0.0) < self._REACH)

    def weights(self, odds: CleanLogOdds, tau: float, exact: bool) -> np.ndarray:
        """Normalised stump-search weights for the current margins (:func:`stump_weights`)."""
        return stump_weights(self.y, self.margin, self.sample_weight, odds, tau, exact)

    def advance(
        self, alpha: float, h: np.ndarray, odds: CleanLogOdds, tau: float, exact: bool
    ) -> np.ndarray:
        """``H += alpha h``; return the next round's normalised weights under ``odds``."""
        fast = (
            self._cache_ok
            and odds.slope == 1.0
            and (exact or tau == 1.0)
            and max(abs(odds.offset_neg), abs(odds.offset_pos)) < 600.0
        )
        if fast:
            if self._expu is None:
                self._expu = np.exp(-self.y * self.margin)
            out = np.empty_like(self.margin)
            total, reach, low, high = _advance_kernel(
                self.y,
                self.sample_weight,
                np.ascontiguousarray(h, dtype=np.float64),
                float(alpha),
                self.margin,
                self._expu,
                odds.offset_neg,
                odds.offset_pos,
                exact,
                out,
            )
            self.knot_range = (low, high)
            if reach < self._REACH and total > 0.0 and np.isfinite(total):
                out /= total
                return out
            self._cache_ok = reach < self._REACH
            if not self._cache_ok:
                self._expu = None
            return self.weights(odds, tau, exact)
        self.knot_range = None
        self.margin += alpha * h
        if self._expu is not None:
            self._expu = None  # stale from here on
        if self._cache_ok and np.max(np.abs(self.margin), initial=0.0) >= self._REACH:
            self._cache_ok = False
        return self.weights(odds, tau, exact)
