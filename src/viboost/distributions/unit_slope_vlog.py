"""Compiled mode and log normaliser of a v-Log density whose slopes are all +-1.

The weight posterior q(c) of VIBoost (S.4.1, eq. (68)) is such a density:
``-log q~(c) = g(c) = sum_k w_k softplus(knot_k - slope_k c)`` with ``slope_k`` in {-1, +1}
(the two prior terms and one term per row or pseudo-row). This module owns its fast numerics,
one compiled pass over the terms at a time:

- :func:`unit_slope_mode`: the mode of ``g`` by safeguarded Newton (bisection inside a bracket,
  expansion outside one), with the curvature at the mode;
- :func:`unit_slope_log_normalizer`: ``log B = log int exp(-g)``, the normalisation constant of
  S.5.1 (eqs. (92)-(95): shift to the mode, integrate the rise), by a Taylor expansion of ``g``
  about its mode integrated on the polynomial (narrow densities) or a trapezoid rule on ``g``
  itself (wide ones). NaN where neither applies; the caller then uses
  :meth:`viboost.distributions.VersatileLogistic.log_normalizer`, the accurate reference for
  any slopes (adaptive quadrature of S.5.1).

The v-Log class keeps its own root finder for general slopes and extreme multiplicities, and the
Gibbs sampler its own Newton steps, whose evaluations feed its rejection envelope; those are
different iterations, and each caller's results are fixed bit for bit by the tests.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel

__all__ = [
    "grouped_unit_slope_log_normalizers",
    "grouped_unit_slope_modes",
    "unit_slope_log_normalizer",
    "unit_slope_mode",
]

_TAYLOR_ORDER = 24
#: The expansion is used only where ``g(c* +- x)`` reaches ``_TAIL_RISE`` within
#: ``|x| <= _TAYLOR_REACH``: the Taylor series of softplus converges for ``|x| < pi``, so at
#: ``|x| <= 1`` the remainder of order 25 is below ``~pi**-25 ~ 4e-13`` per unit of
#: multiplicity; beyond the window ``exp(-g) < exp(-40)`` and, g being convex, the tail mass is
#: below ``exp(-40) |x| / 40``.
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
def unit_slope_mode(slope_sign, knot, weight, start, expansion_point=False):  # pragma: no cover
    """Mode of ``g(c) = sum_k w_k softplus(knot_k - slope_k c)`` (convex, slopes +-1) and
    ``g''`` there, by safeguarded Newton from ``start``; the curvature is NaN if 200 steps do
    not converge.

    Converged when ``g'`` is 0.0 or Newton's step is at most ``1e-14 (1 + |c|)``, before the
    safeguard: a step that rounds to nothing leaves the iterate on the bracket's end, which
    the safeguard would take for a step out of the bracket (on Satellite's leaf posteriors
    that cost half the passes: 11.2 a mode on average, 5.8 since).

    ``expansion_point=True`` is the point about which :func:`unit_slope_log_normalizer` expands
    ``g``: the iteration as it was before that test, so that an iterate where ``g'`` is exactly
    0.0 (or Newton's step rounds to nothing) is answered with the safeguard's next point rather
    than the iterate itself. Any point near the mode
    serves as an expansion centre (the integral moves by ~1e-16 relative), and keeping this one
    keeps the ELBO traces of ``preset="paper"`` fits bit-identical to viboost before issue 12;
    as a mode it is wrong (off by up to ``max(1, |c|)``), so every other caller uses the default.
    """
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
        if grad == 0.0 and not expansion_point:  # c is the mode to working precision
            return c, curv
        if grad > 0.0:
            hi = c
        else:
            lo = c
        step = -grad / curv if curv > 0.0 else np.nan
        new = c + step
        if not expansion_point and abs(step) <= 1e-14 * (1.0 + abs(c)):
            return new, curv  # the mode to working precision (see the docstring)
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
    # log_normalizer_c falls back to the next method (at last the adaptive quadrature of S.5.1).
    return c, np.nan


#: Most trapezoid steps on each side of the mode in the Taylor normaliser (it returns NaN beyond,
#: and the direct rule, bounded by its own node count, takes over).
_TAYLOR_MAX_STEPS = 10_000


@numba.njit(cache=True)
def _taylor_log_normalizer(slope_sign, knot, weight, start, polys, reach, rise):  # pragma: no cover
    """log of the integral of exp(-g), g(c) = sum_k w_k softplus(knot_k - slope_k c); NaN if the
    posterior is too wide for the expansion (then the caller integrates accurately)."""
    mode, curv = unit_slope_mode(slope_sign, knot, weight, start, True)
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
        # A polynomial that rises like its quadratic term reaches ``rise`` within about
        # 10 sqrt(2 rise) ~ 90 steps; one that has not after _TAYLOR_MAX_STEPS (higher terms
        # cancelling the quadratic one: extreme multiplicities) is not trusted.
        for _ in range(_TAYLOR_MAX_STEPS):
            x += step
            if x > reach:
                return np.nan
            r = rise_at(side * x)
            total += math.exp(-r)
            if r >= rise:
                break
        else:
            return np.nan
    total += math.exp(-rise_at(0.0))
    if not (math.isfinite(total) and total > 0.0):
        return np.nan
    return -coef[0] + math.log(total * step)


@numba.njit(cache=True)
def _direct_log_normalizer(slope_sign, knot, weight, start, rise, max_nodes):  # pragma: no cover
    """log of the integral of exp(-g) by the trapezoid rule on g itself, any width.

    Steps of half a Laplace width (at most 1/4): the integrand is analytic in a strip of
    half-width pi about the real axis, so the rule's error is below exp(-2 pi^2 / 0.25) relative.
    Nodes go out from the mode until g has risen by ``rise``; NaN beyond ``max_nodes``.
    """
    mode, curv = unit_slope_mode(slope_sign, knot, weight, start, True)
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


def unit_slope_log_normalizer(
    slope_sign: np.ndarray, knot: np.ndarray, weight: np.ndarray, start: float = 0.0
) -> float:
    """``log int exp(-g(c)) dc`` for ``g(c) = sum_k w_k softplus(knot_k - slope_k c)``, or NaN.

    ``slope_sign`` holds +-1. When the density is narrow (``g`` rises by 40 within 1 of its
    mode, as a weight posterior does once its multiplicities sum to a few hundred), ``g`` is
    expanded to order 24 about its mode (one pass over the terms for the coefficients, a few for
    the mode) and ``exp(-g)`` is integrated on the polynomial by a trapezoid rule at a tenth of
    the Laplace width: no pass over the terms per node. A wider density is integrated by the
    trapezoid rule on ``g`` itself, at most about two million term evaluations. NaN when the
    weights are not finite or reach 1e200, or when both methods decline; ``start`` is a guess of
    the mode.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import betaln
    >>> # v-Log([+1, -1], [0, 0], [2, 3]) integrates to the Beta function B(2, 3).
    >>> value = unit_slope_log_normalizer(
    ...     np.array([-1.0, 1.0]), np.zeros(2), np.array([2.0, 3.0]))
    >>> bool(abs(value - betaln(2.0, 3.0)) < 1e-10)
    True
    """
    if not (np.isfinite(weight.sum()) and weight.max() < 1e200):
        return float("nan")
    value = _taylor_log_normalizer(
        slope_sign, knot, weight, float(start), _SIGMOID_POLYS, _TAYLOR_REACH, _TAIL_RISE
    )
    if np.isfinite(value):
        return float(value)
    value = _direct_log_normalizer(
        slope_sign, knot, weight, float(start), _TAIL_RISE, max(64, 2_000_000 // weight.size)
    )
    return float(value)


@numba.njit(cache=True)
def _with_prior(slope_sign, knot, weight, start, stop, prior):  # pragma: no cover - compiled
    """The terms ``[start, stop)`` after the two prior terms ``softplus(-+c)`` of weight
    ``prior``: one group's v-Log (a leaf's weight posterior, S.4.1)."""
    m = stop - start + 2
    s = np.empty(m)
    k = np.zeros(m)
    w = np.empty(m)
    s[0], s[1] = -1.0, 1.0
    w[0], w[1] = prior, prior
    s[2:] = slope_sign[start:stop]
    k[2:] = knot[start:stop]
    w[2:] = weight[start:stop]
    return s, k, w


@numba.njit(cache=True)
def _grouped_modes(offsets, slope_sign, knot, weight, prior):  # pragma: no cover - compiled
    n_groups = offsets.shape[0] - 1
    modes = np.empty(n_groups)
    for g in range(n_groups):
        s, k, w = _with_prior(slope_sign, knot, weight, offsets[g], offsets[g + 1], prior)
        mode, curv = unit_slope_mode(s, k, w, 0.0)
        modes[g] = mode if curv > 0.0 and math.isfinite(mode) else np.nan
    return modes


@threaded_kernel(cache=True)
def _grouped_log_normalizers(
    offsets, slope_sign, knot, weight, prior, starts, polys, reach, rise
):  # pragma: no cover - compiled
    """Each group's log normalizer, the groups (a tree's leaves) in parallel: each is its own
    computation, so the same numbers for any number of threads."""
    n_groups = offsets.shape[0] - 1
    out = np.empty(n_groups)
    for g in numba.prange(n_groups):
        s, k, w = _with_prior(slope_sign, knot, weight, offsets[g], offsets[g + 1], prior)
        value = _taylor_log_normalizer(s, k, w, starts[g], polys, reach, rise)
        if not math.isfinite(value):
            value = _direct_log_normalizer(
                s, k, w, starts[g], rise, max(64, 2_000_000 // w.shape[0])
            )
        out[g] = value
    return out


def grouped_unit_slope_modes(
    offsets: np.ndarray,
    slope_sign: np.ndarray,
    knot: np.ndarray,
    weight: np.ndarray,
    prior: float,
) -> np.ndarray:
    """The mode of each group's v-Log, the terms of group ``g`` being ``[offsets[g],
    offsets[g + 1])`` together with the prior terms ``prior softplus(c) + prior softplus(-c)``
    (one compiled call for all groups: the leaves of a tree, S.4.1 per leaf). NaN where
    :func:`unit_slope_mode` declines (the caller falls back to the v-Log's root finder).

    Examples
    --------
    >>> import numpy as np
    >>> # Two groups of one term each, 3 softplus(-c) and 3 softplus(c), prior 1: e^c = 4, 1/4.
    >>> modes = grouped_unit_slope_modes(
    ...     np.array([0, 1, 2]), np.array([1.0, -1.0]), np.zeros(2), np.array([3.0, 3.0]), 1.0)
    >>> bool(abs(modes[0] - np.log(4.0)) < 1e-12 and abs(modes[1] + np.log(4.0)) < 1e-12)
    True
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if not (np.isfinite(weight.sum()) and weight.size and weight.max() < 1e200):
        return np.full(offsets.size - 1, np.nan)
    return _grouped_modes(offsets, slope_sign, knot, weight, float(prior))


def grouped_unit_slope_log_normalizers(
    offsets: np.ndarray,
    slope_sign: np.ndarray,
    knot: np.ndarray,
    weight: np.ndarray,
    prior: float,
    starts: np.ndarray,
) -> np.ndarray:
    """:func:`unit_slope_log_normalizer` of each group of :func:`grouped_unit_slope_modes`
    (``starts``: guesses of the modes), NaN where it declines.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import betaln
    >>> # Group 0: prior (1, 1) plus softplus(-c) of weight 1: the v-Log integrates to B(2, 1).
    >>> out = grouped_unit_slope_log_normalizers(
    ...     np.array([0, 1]), np.array([1.0]), np.zeros(1), np.ones(1), 1.0, np.zeros(1))
    >>> bool(abs(out[0] - betaln(2.0, 1.0)) < 1e-10)
    True
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if not (np.isfinite(weight.sum()) and (weight.size == 0 or weight.max() < 1e200)):
        return np.full(offsets.size - 1, np.nan)
    return _grouped_log_normalizers(
        offsets, slope_sign, knot, weight, float(prior),
        np.ascontiguousarray(starts, dtype=np.float64), _SIGMOID_POLYS, _TAYLOR_REACH, _TAIL_RISE,
    )  # fmt: skip
