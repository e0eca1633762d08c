"""Integration of the v-Log kernel: log normaliser and cdf tables (supplement S.1, S.5.1).

This module owns every integral of the shifted kernel ``g~`` that ``VersatileLogistic`` needs:

* the log normaliser ``log B`` (S.5.1, eqs. (92)-(97)): the scale of the peak
  (:func:`integration_scale`), the fast nested sinh-trapezoid path
  (:func:`log_integral_trapezoid`, at most :data:`TRAPEZOID_MAX_EVALS` kernel evaluations) and
  the split path, with closed-form hinge tails (:func:`hinge_tail_log_integral`) and an
  adaptive Gauss-Kronrod middle (:func:`log_middle_integral`, :func:`_gauss_kronrod`, at most
  :data:`GAUSS_KRONROD_MAX_ROUNDS` rounds);
* the cached quadrature behind the moments (:class:`QuadratureSetup`, :func:`rise_scale`,
  :func:`gauss_kronrod_intervals`);
* the cdf tables (S.1): piecewise Chebyshev interpolants of ``g~`` on each side of the mode,
  their tail masses and inversion (:class:`SideTable`, :class:`CdfTable`,
  :func:`build_side_table`, :func:`partial_masses`, :func:`invert_side_table`).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.integrate import IntegrationWarning

from viboost._utils.special import log1mexp, log_cosh, log_sum_exp
from viboost.distributions._vlog_kernels import (
    FLOAT64_EPS,
    BregmanKernel,
    ShiftedKernel,
    check_kernel_dip,
)

# Integration settings of the fast path of ``log_normalizer`` (see ``log_integral_trapezoid``).
_SINH_LAMBDA = 3.0  # x = lambda * sinh(t / lambda): uniform near the peak, geometric in the tails
_TRAP_H0 = 0.5  # coarsest trapezoid step in t
_TRAP_RTOL = 1e-10  # accept when two successive (nested) trapezoid sums agree to this
#: Beyond this many kernel evaluations, use the split integration instead.
TRAPEZOID_MAX_EVALS = 800
_TAIL_LOG_THRESHOLD = 34.0  # truncate where g~(x) >= 34 + log|x| (tail mass < 1e-16)

# Split integration (the fallback path of ``VersatileLogistic.log_normalizer``) and the cdf
# tables.
_GK_RTOL = 1e-13  # per-interval Gauss-Kronrod error bound, relative to the whole integral
_GK_MAX_INTERVALS = 5000
#: Most rounds of interval splitting of the adaptive Gauss-Kronrod integration.
GAUSS_KRONROD_MAX_ROUNDS = 100
_GK_FLOOR = 1e-280  # absolute tolerance of ``gauss_kronrod_intervals``, relative to the total

# Gauss-Kronrod 7-15 rule on [-1, 1] (QUADPACK qk15): nodes, Kronrod and Gauss weights.
_GK_X = np.array(
    [
        0.991455371120812639206854697526329,
        0.949107912342758524526189684047851,
        0.864864423359769072789712788640926,
        0.741531185599394439863864773280788,
        0.586087235467691130294144845693013,
        0.405845151377397166906606412076961,
        0.207784955007898467600689403773245,
    ]
)
_GK_NODES = np.concatenate([-_GK_X, [0.0], _GK_X[::-1]])
_GK_WK = np.array(
    [
        0.022935322010529224963732008058970,
        0.063092092629978553290700663189204,
        0.104790010322250183839876322541518,
        0.140653259715525918745189590510238,
        0.169004726639267902826583426598550,
        0.190350578064785409913256402421014,
        0.204432940075298892414161999234649,
    ]
)
_GK_WK15 = np.concatenate([_GK_WK, [0.209482141084727828012999174891714], _GK_WK[::-1]])
_GK_WG = np.array(
    [
        0.129484966168869693270611432679082,
        0.279705391489276667901467771423780,
        0.381830050505118944950369775488975,
    ]
)
_GK_NODES_ENDS = np.concatenate([[-1.0], _GK_NODES, [1.0]])  # plus the ends (see below)
# Gauss 7-point weights laid out on the 15 Kronrod nodes (zero on the Kronrod-only nodes).
_GK_WG15 = np.zeros(15)
_GK_WG15[[1, 3, 5]] = _GK_WG
_GK_WG15[[13, 11, 9]] = _GK_WG
_GK_WG15[7] = 0.417959183673469387755102040816327


# ---------------------------------------------------------------------- integration helpers
def integration_scale(kernel: ShiftedKernel, slopes: NDArray, knots: NDArray) -> float:
    """Scale ``s`` so that ``x = (z - z*) / s`` puts the peak of ``exp(-g~)`` at about unit width.

    Start from the Laplace width ``1/sqrt(g''(z*))``: it keeps the peak about one unit wide in
    the integration variable (x, and so t or u near 0), so the trapezoid steps / quad's first
    subdivisions resolve it whatever the actual width in z (1e-5 for multiplicities ~1e6 or
    1e3 for tiny ones).  Two safeguards, using convexity of ``g~`` (``g~(0) = 0``, so
    ``g~(c w) <= c g~(w)`` for ``0 <= c <= 1`` and ``>= c g~(w)`` for ``c >= 1``):

    * if ``g''(z*)`` underflows (flat top), grow a width until ``g~`` reaches ~1/2;
    * if ``g~(+-s) > 2`` (a cliff within one Laplace width, e.g. a double-exponential side),
      shrink ``s`` on that side by geometric bisection until ``0.25 <= g~(+-s) <= 2``.
    """
    h = kernel.curvature
    s = 1.0 / math.sqrt(h) if h > 0.0 else math.inf
    if not (math.isfinite(s) and s > 0.0):
        s = float(np.max(knots) - np.min(knots)) + 1.0 / float(np.min(np.abs(slopes)))
        for _ in range(200):
            r = max(kernel.scalar(s), kernel.scalar(-s))
            if r >= 0.25:
                break
            s *= 1e3 if r <= 0.0 else min(1e3, max(2.0, 0.5 / r))
    for sign in (1.0, -1.0):
        r = kernel.scalar(sign * s)
        if r <= 2.0:
            continue
        lo, hi = s / min(r, 1e300), s  # g~(sign * lo) <= 1 by convexity, g~(sign * hi) > 2
        for _ in range(100):
            if hi <= 1.5 * lo:
                break
            mid = math.sqrt(lo * hi)
            r = kernel.scalar(sign * mid)
            if r > 2.0:
                hi = mid
            elif r < 0.25:
                lo = mid
            else:
                lo = mid
                break
        s = lo
    return s


def log_integral_trapezoid(kernel: ShiftedKernel, s: float) -> float | None:
    """``log`` of ``integral exp(-g~(s x)) dx`` by nested trapezoid sums, or None.

    Substituting ``x = lam sinh(t / lam)`` keeps the grid nearly uniform on the unit-width
    peak and geometric in the (at least exponentially decaying, by convexity) tails; the
    integrand is analytic, so the trapezoid rule converges geometrically in the step ``h``.
    The window is truncated where ``g~(s x) >= 34 + log|x|``: by convexity the mass beyond is
    at most ``|x| exp(-g~)/g~ < 6e-17`` (the total is >= ~0.8 since ``g~(+-1) <= 2``).  Steps
    are halved (reusing all previous nodes) until two successive sums agree to ``1e-10``; the
    finer sum is returned.  Returns None if that needs more than ``TRAPEZOID_MAX_EVALS`` kernel
    evaluations (e.g. nearly-kinked kernels with tiny multiplicities).
    """
    lam, h0 = _SINH_LAMBDA, _TRAP_H0

    def log_integrand(t: NDArray[np.floating]) -> tuple[NDArray, NDArray, NDArray]:
        x = lam * np.sinh(t / lam)
        gt = kernel(x, s)
        return -gt + log_cosh(t / lam), gt, x

    # Coarse grid t = k h0 walked outwards from 0, in blocks (one vectorised kernel call each)
    # whose length is predicted so that few nodes past the cut-off are wasted.
    values = [float(np.exp(log_integrand(np.zeros(1))[0][0]))]
    extent = []
    for side in (1.0, -1.0):
        k_done, x_last, g_last = 0, 0.0, 0.0
        side_vals: list[float] = []
        while True:
            if g_last > 0.0 and x_last > 0.0:
                # Optimistic (quadratic-growth) guess of where g~ reaches the threshold; if it
                # falls short, the next block is predicted again from the new last point.
                target = _TAIL_LOG_THRESHOLD + math.log(max(1.0, x_last))
                x_need = x_last * math.sqrt(target / g_last) if g_last < target else x_last
                t_need = lam * math.asinh(min(x_need, 1e300) / lam)
                n_block = int(min(64, max(2, math.ceil(t_need / h0) - k_done)))
            else:
                n_block = 4
            if kernel.n_evals > TRAPEZOID_MAX_EVALS or (k_done + n_block) * h0 > 600.0 * lam:
                return None  # very slowly growing g~: leave it to the adaptive fallback
            ks = np.arange(k_done + 1, k_done + n_block + 1, dtype=np.float64)
            log_f, gt, x = log_integrand(side * h0 * ks)
            ax = np.abs(x)
            done = gt >= _TAIL_LOG_THRESHOLD + np.log(np.maximum(1.0, ax))
            if np.any(done):
                stop = int(np.argmax(done))
                side_vals.extend(np.exp(log_f[: stop + 1]).tolist())
                k_done += stop + 1
                break
            side_vals.extend(np.exp(log_f).tolist())
            k_done += n_block
            x_last, g_last = float(ax[-1]), float(gt[-1])
        values.extend(side_vals)
        extent.append(k_done * h0)
    t_hi, t_lo = extent[0], -extent[1]
    total = math.fsum(values)
    h = h0
    estimate = h * total
    n_intervals = int(round((t_hi - t_lo) / h0))
    while kernel.n_evals + n_intervals <= TRAPEZOID_MAX_EVALS:
        h *= 0.5
        t_new = t_lo + h * (2.0 * np.arange(n_intervals) + 1.0)
        total += math.fsum(np.exp(log_integrand(t_new)[0]).tolist())
        n_intervals *= 2
        new_estimate = h * total
        if abs(new_estimate - estimate) <= _TRAP_RTOL * new_estimate:
            return math.log(new_estimate)
        estimate = new_estimate
    return None


def hinge_tail_log_integral(
    slopes: NDArray, knots: NDArray, log_mults: NDArray, start: float
) -> float:
    """``log`` of ``integral_start^inf exp(-(H(z) - H(start))) dz`` in closed form.

    ``H(z) = sum_k mu_k max(0, beta_k (z - gamma_k))`` (``mu_k = exp(log_mults_k)``) is convex
    and piecewise linear; on ``[start, inf)`` its breakpoints are the knots beyond ``start``,
    where the slope grows by ``mu_k |beta_k|`` (a positive-slope term switching on, or a
    negative-slope one switching off).  On a piece of length ``L`` and slope ``lambda`` starting
    at height ``A`` the integral is ``exp(-A) L phi(lambda L)`` with
    ``phi(x) = (1 - exp(-x)) / x`` (also for ``x <= 0``); the last piece has the slope
    ``sum_{beta_k > 0} mu_k beta_k > 0`` and integral ``exp(-A) / lambda``.  Slopes are formed
    from prefix sums of the positive and suffix sums of the negative parts, each scaled by its
    largest ``mu |beta|``, so that multiplicities from 1e-300 to 1e307 mix without overflow and
    the final slope has no cancellation.
    """
    log_rate = log_mults + np.log(np.abs(slopes))  # log(mu |beta|)
    pos = slopes > 0.0
    later = knots > start
    idx = np.flatnonzero(later)
    idx = idx[np.argsort(knots[idx], kind="stable")]
    n_breaks = idx.shape[0]
    rising = pos[idx]
    # Positive part of the slope on the n + 1 pieces (prefix sums), in units of exp(top_p).
    top_p = float(np.max(log_rate[pos]))
    base = float(np.sum(np.exp(log_rate[pos & ~later] - top_p)))
    inc = np.where(rising, np.exp(log_rate[idx] - top_p), 0.0)
    pos_part = np.cumsum(np.concatenate([[base], inc]))
    # Negative part: negative-slope terms whose knot is still ahead (suffix sums).
    if np.any(~rising):
        top_n = float(np.max(log_rate[idx][~rising]))
        dec = np.where(rising, 0.0, np.exp(log_rate[idx] - top_n))
        neg_part = np.concatenate([np.cumsum(dec[::-1])[::-1], [0.0]])
    else:
        top_n = 0.0
        neg_part = np.zeros(n_breaks + 1)
    log_pos = np.full(n_breaks + 1, -np.inf)
    log_neg = np.full(n_breaks + 1, -np.inf)
    log_pos[pos_part > 0.0] = np.log(pos_part[pos_part > 0.0]) + top_p
    log_neg[neg_part > 0.0] = np.log(neg_part[neg_part > 0.0]) + top_n
    sign = np.where(log_pos > log_neg, 1.0, np.where(log_pos < log_neg, -1.0, 0.0))
    upper = np.maximum(log_pos, log_neg)
    lower = np.minimum(log_pos, log_neg)
    # log |slope| = upper + log(1 - exp(-(upper - lower))), -inf where the slope is 0.
    log_slope = np.full(n_breaks + 1, -np.inf)
    gap = np.full(n_breaks + 1, np.inf)
    finite_lower = np.isfinite(lower)
    gap[finite_lower] = upper[finite_lower] - lower[finite_lower]
    nonzero = sign != 0.0
    log_slope[nonzero] = upper[nonzero] + log1mexp(gap[nonzero])

    log_terms = np.full(n_breaks + 1, -np.inf)
    heights = np.zeros(n_breaks + 1)
    if n_breaks:
        lengths = np.diff(np.concatenate([[start], knots[idx]]))
        fin_slope = log_slope[:n_breaks]
        fin_sign = sign[:n_breaks]
        has_len = lengths > 0.0
        log_len = np.full(n_breaks, -np.inf)
        log_len[has_len] = np.log(lengths[has_len])
        # x = |lambda| L, capped at 1e300 (beyond, exp(-A) is 0 anyway); 0 where it underflows.
        log_x = np.minimum(fin_slope + log_len, 690.0)
        x = np.zeros(n_breaks)
        active = has_len & (fin_sign != 0.0) & (log_x > -700.0)
        x[active] = np.exp(log_x[active])
        heights[1:] = np.cumsum(fin_sign * x)
        # log(L phi): log L for x = 0; log L + log1mexp(x) - log x, plus x if lambda < 0.
        log_phi = log_len.copy()
        corr = log1mexp(x[active]) - log_x[active]
        corr = corr + np.where(fin_sign[active] < 0.0, x[active], 0.0)
        log_phi[active] += corr
        log_terms[:n_breaks] = np.where(has_len, log_phi - heights[:n_breaks], -np.inf)
    log_terms[n_breaks] = -log_slope[n_breaks] - heights[n_breaks]
    return log_sum_exp(log_terms)


def _side_scale(kernel: BregmanKernel, rise, d_anchor: float, side: float, length: float) -> float:
    """Width ``s`` in ``(0, length]`` with ``rise(s)`` in ``[1/4, 2]`` (or ``length``).

    ``rise(u) = g~(d_anchor + side u) - g~(d_anchor)`` is convex, increasing and 0 at 0.  The
    first guess is the smallest of ``length``, the curvature width ``1/sqrt(g~'')`` and the slope
    width ``1/|g~'|`` at the anchor; it is then corrected as in ``integration_scale`` (shrink
    by ``1/rise``, which convexity bounds, grow at least 2-fold, then geometric bisection).
    """
    d1, d2 = kernel.derivatives(d_anchor)
    s = length
    if d2 > 0.0:
        s = min(s, 1.0 / math.sqrt(d2) / math.sqrt(kernel.scale))
    if side * d1 > 0.0:
        s = min(s, 1.0 / (side * d1) / kernel.scale)
    s = max(s, length * 1e-300, 5e-324)
    lo, hi = 0.0, math.inf
    val = float(rise(s)[0])
    for _ in range(400):
        if val > 2.0:
            hi = s
            s = math.sqrt(lo * hi) if lo > 0.0 else max(s / min(val, 1e300), 5e-324)
        elif val < 0.25:
            if s >= length:
                return length
            lo = s
            if hi < math.inf:
                s = math.sqrt(lo * hi)
            else:
                s = min(length, s * min(1e3, max(2.0, 0.5 / max(val, 1e-300))))
        else:
            return s
        if lo > 0.0 and hi <= 1.5 * lo:
            return lo
        val = float(rise(s)[0])
    return lo if lo > 0.0 else s  # pragma: no cover - defensive


def log_middle_integral(
    kernel: BregmanKernel, z_left: float, z_right: float, log_other: float
) -> float:
    """``log`` of ``integral_{z_left}^{z_right} exp(-g~(z - z*)) dz`` by adaptive Gauss-Kronrod.

    The integrand is log-concave, largest at the anchor ``clip(z*, z_left, z_right)``.  On each
    side of the anchor the panels are ``[0, s], [s, 2s], [2s, 4s], ...`` (``s`` from
    ``_side_scale``) up to the end of the middle, or up to the first edge ``u`` where the rise
    ``r(u) = g~ - g~(anchor)`` reaches ``40 + log(u / s)``: by convexity the rest is below
    ``(u / r) exp(-r) < 1e-18`` of the part on ``[0, s]``.  Panels are bisected until
    ``|K15 - G7| <= 1e-13`` times the whole integral (``log_other``: the tails, in units of
    ``exp(-g(z*))``).  Returns ``-inf`` when the middle is negligible against the tails.
    """
    z_star = kernel.z0
    kernel = kernel.restricted(max(z_right - z_star, z_star - z_left))
    d_center = kernel.center(math.inf)  # cached: settled by the caller with g(z*)
    d_anchor = min(max(d_center, z_left - z_star), z_right - z_star)
    g_anchor = float(kernel(np.array([d_anchor]))[0]) if d_anchor != 0.0 else 0.0
    if math.log(z_right - z_left) - g_anchor < log_other - 50.0:
        return -math.inf
    cut = _TAIL_LOG_THRESHOLD + 6.0
    panels: list[NDArray] = []
    for side, length in ((1.0, z_right - z_star - d_anchor), (-1.0, d_anchor - (z_left - z_star))):
        if not length > 0.0:
            continue

        def rise(u: ArrayLike, side: float = side) -> NDArray:
            return kernel(d_anchor + side * np.asarray(u, dtype=np.float64)) - g_anchor

        s = _side_scale(kernel, rise, d_anchor, side, length)
        edges = [0.0]
        u = s
        while edges[-1] < length:
            batch = np.minimum(u * 2.0 ** np.arange(16), length)
            batch = batch[: int(np.searchsorted(batch, length)) + 1]
            vals = rise(batch)
            check_kernel_dip(vals, "the v-Log normaliser's integrand")
            for u_k, r_k in zip(batch, vals, strict=True):
                edges.append(float(u_k))
                if u_k >= length or r_k >= cut + math.log(u_k / s):
                    break
            else:
                u = float(batch[-1]) * 2.0
                continue
            break
        panels.append(d_anchor + side * np.asarray(edges))
    if not panels:  # a middle of (numerically) zero width
        return -math.inf
    lo = np.concatenate([np.minimum(e[:-1], e[1:]) for e in panels])
    hi = np.concatenate([np.maximum(e[:-1], e[1:]) for e in panels])
    others = math.exp(min(log_other + g_anchor, 690.0))  # the tails, in units of the anchor

    def integrand(d: NDArray) -> NDArray:
        return np.exp(-np.maximum(kernel(d) - g_anchor, -700.0))

    total = _gauss_kronrod(integrand, lo, hi, others)
    return -g_anchor + math.log(total)


def _gauss_kronrod(integrand, lo: NDArray, hi: NDArray, others: float) -> float:
    """Sum of the integrals over ``[lo_i, hi_i]`` by globally-toleranced adaptive GK 7-15.

    Every round evaluates the integrand on all pending intervals in one vectorised call;
    an interval is accepted when ``|K15 - G7| <= 1e-13 (current total + others)`` and its end
    values show no cliff hidden between the outermost nodes and the ends (invisible to both
    rules), or when it can no longer be split in floating point; it is split in two otherwise.
    """
    accepted: list[float] = []
    pending = np.zeros(0)
    n_total = lo.shape[0]
    for _ in range(GAUSS_KRONROD_MAX_ROUNDS):
        mid = 0.5 * (lo + hi)
        half = 0.5 * (hi - lo)
        nodes = mid[:, None] + half[:, None] * _GK_NODES_ENDS
        values = integrand(nodes.ravel()).reshape(nodes.shape)
        inner = values[:, 1:-1]
        kronrod = half * (inner @ _GK_WK15)
        gauss = half * (inner @ _GK_WG15)
        # Neither rule sees the slivers between the outermost nodes and the ends, where a cliff
        # can hide.  Across a sliver (width 0.0085) a smooth integrand changes by about 0.2
        # times its change between the two outermost nodes (spacing 0.042); a change beyond
        # 10 times that (plus rounding) marks a cliff, and the interval is split.
        cliff = np.zeros(values.shape[0], dtype=bool)
        for end, n1, n2 in ((0, 1, 2), (-1, -2, -3)):
            jump = np.abs(values[:, end] - values[:, n1])
            slope = np.abs(values[:, n1] - values[:, n2])
            cliff |= jump > 2.0 * slope + 1e-14 * np.max(values, axis=1)
        err = np.where(cliff, np.inf, np.abs(kronrod - gauss))
        estimate = math.fsum(accepted) + float(np.sum(kronrod)) + others
        tiny = half <= 64.0 * np.spacing(np.maximum(np.abs(lo), np.abs(hi)))
        done = (err <= _GK_RTOL * estimate) | tiny
        accepted.extend(kronrod[done].tolist())
        if np.all(done):
            return math.fsum(accepted)
        pending = kronrod[~done]
        lo, mid, hi = lo[~done], mid[~done], hi[~done]
        n_total += lo.shape[0]
        if n_total > _GK_MAX_INTERVALS:
            break
        lo, hi = np.concatenate([lo, mid]), np.concatenate([mid, hi])
    warnings.warn(
        "v-Log normaliser: adaptive quadrature did not reach its tolerance",
        IntegrationWarning,
        stacklevel=4,
    )
    return math.fsum(accepted) + float(np.sum(pending))


# ---------------------------------------------------------------------- moments and cdf
CDF_TABLE_CUTOFF = 760.0  # panels stop where g~ exceeds this (+ 3 log(u/s)): exp(-760) underflows


class QuadratureSetup(NamedTuple):
    """Cached quadrature of the shifted kernel: panels, tail masses and side integrals."""

    kernel: BregmanKernel
    z_star: float
    scale: float  # s0, the curvature width: masses and moments are integrals over t = d / s0
    right: tuple[NDArray, NDArray, NDArray]  # (edges in d, masses beyond each edge, integrals)
    left: tuple[NDArray, NDArray, NDArray]
    mass: float  # integral of exp(-g~(s0 t)) dt over both sides


def rise_scale(kernel: BregmanKernel, side: float, s0: float) -> float:
    """Width ``s`` with ``g~(side s)`` in ``[1/4, 2]`` (or the nearest found), from ``s0``."""
    s = s0
    lo, hi = 0.0, math.inf
    for _ in range(300):
        r = float(kernel(np.array([side * s]))[0])
        if r > 2.0:
            hi = s
            s = math.sqrt(lo * hi) if lo > 0.0 else s / 4.0
        elif r < 0.25:
            lo = s
            if s > 1e300:
                return s
            s = math.sqrt(lo * hi) if hi < math.inf else s * 4.0
        else:
            return s
        if lo > 0.0 and hi <= 1.5 * lo:
            return lo
        if s < 1e-300:
            return 1e-300
    return s


def gauss_kronrod_intervals(integrand, lo: NDArray, hi: NDArray, others: NDArray) -> NDArray:
    """Integrals over each ``[lo_i, hi_i]`` by adaptive Gauss-Kronrod 7-15, vectorised.

    ``integrand(x)`` returns an array of shape ``(m, len(x))`` of nonnegative functions; the
    result has shape ``(m, len(lo))``.  A subinterval is accepted when for every function
    ``|K15 - G7| <= 1e-13 (estimate of its interval's integral + others_i)`` (``others``:
    further mass the caller adds to that interval's result, for function 0 and scaled for the
    rest), or when it can no longer be split.  The work is bounded: after
    ``GAUSS_KRONROD_MAX_ROUNDS`` rounds, or beyond ``_GK_MAX_INTERVALS`` plus 64 per interval
    subintervals, the unconverged subintervals keep their Kronrod estimates and an
    ``IntegrationWarning`` says so.
    """
    n = lo.shape[0]
    owner = np.arange(n)
    result: NDArray | None = None
    n_total = n
    for round_ in range(GAUSS_KRONROD_MAX_ROUNDS):
        if owner.shape[0] == 0:
            break
        mid = 0.5 * (lo + hi)
        half = 0.5 * (hi - lo)
        nodes = mid[:, None] + half[:, None] * _GK_NODES
        values = np.asarray(integrand(nodes.ravel()))
        m = values.shape[0]
        values = values.reshape(m, *nodes.shape)
        # Panels out to 1e300 can hold more mass than a float does (tails of multiplicities
        # like 1e-200): such integrals overflow to inf, which the callers turn into an error.
        with np.errstate(over="ignore", invalid="ignore"):
            kronrod = half * (values @ _GK_WK15)
            gauss = half * (values @ _GK_WG15)
        if not np.all(np.isfinite(kronrod)):
            raise FloatingPointError(
                "v-Log quadrature: the density's mass or moments exceed the float range (its "
                "tails are too long: multiplicities far below 1 on some term)"
            )
        if result is None:
            result = np.zeros((m, n))
        err = np.abs(kronrod - gauss)
        done = half <= 64.0 * np.spacing(np.maximum(np.abs(lo), np.abs(hi)))
        est = np.zeros((m, n))
        for j in range(m):
            est[j] = result[j] + np.bincount(owner, weights=kronrod[j], minlength=n)
        # others / est[0], capped at 1e300 (no overflow where an interval's own mass is tiny).
        pos_est = est[0] > 0.0
        safe = np.where(pos_est, est[0], 1.0)
        ratio = np.where(pos_est, others / np.maximum(safe, 1e-300 * others), 0.0)
        ok = np.ones(owner.shape[0], dtype=bool)
        for j in range(m):
            with np.errstate(over="ignore"):  # inf: the interval is negligible, accept it
                tol = _GK_RTOL * (est[j] * (1.0 + ratio) + (others if j == 0 else 0.0))
            # Below 1e-280 of the whole, intervals are accepted (subnormal integrands have
            # lost their relative precision, and bisecting them would never end).
            floor = float(np.sum(_GK_FLOOR * np.abs(est[j])) + np.sum(_GK_FLOOR * others))
            ok &= err[j] <= np.maximum(tol[owner], floor)
        done |= ok
        n_split = int(np.count_nonzero(~done))
        n_total += 2 * n_split
        last_round = round_ == GAUSS_KRONROD_MAX_ROUNDS - 1
        if n_split and (last_round or n_total > _GK_MAX_INTERVALS + 64 * n):
            warnings.warn(
                "v-Log quadrature: adaptive Gauss-Kronrod did not reach its tolerance "
                f"within {round_ + 1} rounds and {n_total} subintervals",
                IntegrationWarning,
                stacklevel=3,
            )
            done[:] = True  # keep the current estimates of the unconverged subintervals
        for j in range(m):
            np.add.at(result[j], owner[done], kronrod[j][done])
        keep = ~done
        lo, mid, hi, owner = lo[keep], mid[keep], hi[keep], owner[keep]
        lo, hi = np.concatenate([lo, mid]), np.concatenate([mid, hi])
        owner = np.concatenate([owner, owner])
    if result is None:
        return np.zeros((1, n))
    return result


# ---------------------------------------------------------------------- cdf table
# Piecewise Chebyshev interpolant of g~ on each side of the mode (behind
# ``VersatileLogistic.cdf``).
_CHEB_DEG = 16
_CHEB_T = np.cos(np.pi * np.arange(_CHEB_DEG + 1) / _CHEB_DEG)[::-1]  # Lobatto nodes, ascending
# Values at the nodes -> Chebyshev coefficients (DCT-I with halved end weights).
_CHEB_MAT = np.cos(np.outer(np.arange(_CHEB_DEG + 1), np.pi * np.arange(_CHEB_DEG + 1) / _CHEB_DEG))
_CHEB_MAT = _CHEB_MAT[:, ::-1] * (2.0 / _CHEB_DEG)
_CHEB_MAT[:, [0, -1]] *= 0.5
_CHEB_MAT[[0, -1], :] *= 0.5
_CHEB_RTOL = 1e-13  # accept a cell when its last three coefficients are below this (1 + |g~|)
_CHEB_SKIP = 780.0  # ... or when g~ exceeds this on the whole cell (exp(-780) underflows)
_CHEB_MAX_CELLS = 20_000


class SideTable(NamedTuple):
    """One side of the mode: cells ``[edges_i, edges_{i+1}]`` in ``u = |z - z*|``."""

    edges: NDArray  # (n + 1,), edges[0] = 0
    coefs: NDArray  # (n, _CHEB_DEG + 1): Chebyshev coefficients of g~(side u) on each cell
    tails: NDArray  # (n + 1,): unnormalised mass beyond each edge, tails[n] = 0


class CdfTable(NamedTuple):
    """Both sides of the mode, in units of ``t = (z - z*) / scale`` (masses over ``t`` too)."""

    right: SideTable
    left: SideTable
    mass: float
    z_star: float
    scale: float


def interpolate_side_table(table: SideTable, u: NDArray) -> NDArray:
    """The interpolant of ``g~(side u)`` at ``u`` (Clenshaw; ``u`` clipped to the table)."""
    edges, coefs = table.edges, table.coefs
    cell = np.clip(np.searchsorted(edges, u, side="right") - 1, 0, coefs.shape[0] - 1)
    a, b = edges[cell], edges[cell + 1]
    t = np.clip((2.0 * u - a - b) / (b - a), -1.0, 1.0)
    c = coefs[cell]
    b1 = np.zeros(u.shape)
    b2 = np.zeros(u.shape)
    for k in range(_CHEB_DEG, 0, -1):
        b1, b2 = 2.0 * t * b1 - b2 + c[:, k], b1
    return t * b1 - b2 + c[:, 0]


def tail_masses(masses: NDArray) -> NDArray:
    """Mass beyond each edge (``tails[i]`` = sum of pieces ``i, i+1, ...``; last entry 0)."""
    with np.errstate(over="ignore"):
        tails = np.concatenate([np.cumsum(masses[::-1])[::-1], [0.0]])
    if not np.isfinite(tails[0]):
        raise FloatingPointError(
            "v-Log quadrature: the density's mass exceeds the float range (its tails are too "
            "long: multiplicities far below 1 on some term)"
        )
    return tails


def build_side_table(
    kernel: BregmanKernel, side: float, panels: NDArray, width: float
) -> SideTable:
    """Refine ``panels`` by bisection until Chebyshev interpolation of ``g~`` has converged.

    ``panels`` and the table are in units of ``t = u / width`` (``u = |z - z*|``), so that the
    masses of a peak 1e-150 or 1e150 wide neither underflow nor overflow.
    """
    pending = np.stack([panels[:-1], panels[1:]], axis=1)
    cells: list[NDArray] = []
    coefs: list[NDArray] = []
    n_cells = 0
    while pending.shape[0]:
        a, b = pending[:, :1], pending[:, 1:]
        nodes = 0.5 * (a + b) + 0.5 * (b - a) * _CHEB_T
        vals = kernel(side * width * nodes.ravel()).reshape(nodes.shape)
        c = vals @ _CHEB_MAT.T
        err = np.max(np.abs(c[:, -3:]), axis=1)
        scale = 1.0 + np.max(np.abs(vals), axis=1)
        tiny = (b - a)[:, 0] <= 64.0 * np.spacing(b[:, 0])
        done = (err <= _CHEB_RTOL * scale) | (np.min(vals, axis=1) > _CHEB_SKIP) | tiny
        n_cells += pending.shape[0]
        if n_cells > _CHEB_MAX_CELLS and not np.all(done):  # rounding noise in g~ (extremes)
            warnings.warn(
                f"v-Log cdf table: Chebyshev interpolation did not converge in {n_cells} "
                "cells; the remaining cells keep their current interpolants",
                IntegrationWarning,
                stacklevel=3,
            )
            done[:] = True
        cells.append(pending[done])
        coefs.append(c[done])
        rest = pending[~done]
        mid = 0.5 * (rest[:, 0] + rest[:, 1])
        pending = np.concatenate(
            [np.stack([rest[:, 0], mid], axis=1), np.stack([mid, rest[:, 1]], axis=1)]
        )
    all_cells = np.concatenate(cells)
    order = np.argsort(all_cells[:, 0], kind="stable")
    edges = np.concatenate([all_cells[order, 0], all_cells[order[-1:], 1]])
    table = SideTable(edges, np.concatenate(coefs)[order], np.zeros(edges.shape[0]))

    def integrand(u: NDArray) -> NDArray:
        return np.exp(-np.maximum(interpolate_side_table(table, u), -700.0))[None, :]

    masses = gauss_kronrod_intervals(
        integrand, edges[:-1], edges[1:], np.zeros(edges.shape[0] - 1)
    )[0]
    tails = tail_masses(masses)
    return table._replace(tails=tails)


def partial_masses(table: SideTable, u: NDArray) -> NDArray:
    """Unnormalised mass beyond ``u`` (``u >= 0``) on one side, from the table."""
    edges, tails = table.edges, table.tails
    res = np.zeros(u.shape[0])
    inside = u < edges[-1]
    if not np.any(inside):
        return res
    ui = u[inside]
    # Integrate from each point to the next point or edge, then sum outwards (no cancellation).
    pts = np.unique(np.concatenate([ui, edges]))
    lo, hi = pts[:-1], pts[1:]
    beyond = tails[np.searchsorted(edges, lo, side="right")]

    def integrand(x: NDArray) -> NDArray:
        return np.exp(-np.maximum(interpolate_side_table(table, x), -700.0))[None, :]

    pieces = gauss_kronrod_intervals(integrand, lo, hi, beyond)[0]
    cum = np.concatenate([np.cumsum(pieces[::-1])[::-1], [0.0]])
    res[inside] = cum[np.searchsorted(pts, ui)]
    return res


def invert_side_table(table: SideTable, target: NDArray) -> NDArray:
    """``u`` with (mass beyond ``u``) ``= target``, for ``0 < target <= tails[0]``, vectorised.

    The cell is found from the cached masses; inside it, safeguarded Newton (bisection
    fallback) on ``F(u) = integral_u^b f - (target - tails[i + 1])``, ``F' = -f(u)``.
    """
    edges, tails = table.edges, table.tails
    # tails is decreasing: cell i has tails[i] >= target > tails[i + 1].
    cell = np.clip(np.searchsorted(-tails, -target, side="left") - 1, 0, edges.shape[0] - 2)
    lo, hi = edges[cell].copy(), edges[cell + 1].copy()
    rest = target - tails[cell + 1]
    u = 0.5 * (lo + hi)
    active = np.ones(u.shape[0], dtype=bool)
    for _ in range(100):
        idx = np.flatnonzero(active)
        if idx.shape[0] == 0:
            break
        ui = u[idx]

        def integrand(x: NDArray) -> NDArray:
            return np.exp(-np.maximum(interpolate_side_table(table, x), -700.0))[None, :]

        mass = gauss_kronrod_intervals(integrand, ui, edges[cell[idx] + 1], tails[cell[idx] + 1])[0]
        f_val = mass - rest[idx]
        dens = np.exp(-np.maximum(interpolate_side_table(table, ui), -700.0))
        # F is decreasing: F > 0 means u is too small.
        pos = f_val > 0.0
        lo[idx] = np.where(pos, ui, lo[idx])
        hi[idx] = np.where(pos, hi[idx], ui)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = ui + f_val / dens
        ok = np.isfinite(newton) & (newton > lo[idx]) & (newton < hi[idx])
        new = np.where(ok, newton, 0.5 * (lo[idx] + hi[idx]))
        new = np.where(f_val == 0.0, ui, new)  # an exact root stays put
        tol = 4.0 * FLOAT64_EPS * np.maximum(np.abs(new), edges[1])
        conv = (np.abs(new - ui) <= tol) | (hi[idx] - lo[idx] <= tol) | (f_val == 0.0)
        u[idx] = new
        active[idx[conv]] = False
    return u
