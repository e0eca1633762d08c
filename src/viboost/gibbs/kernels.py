"""Compiled kernels of the Gibbs sampler (Algorithm 2, supplement S.3).

Structure of this module
------------------------
- :func:`weight_log_density`: ``log J[c_i]`` and its first two derivatives. The conditional of a
  weight is the v-Log of S.3, eq. (59), with slopes ``-y_n f_i(x_n)`` (all +-1), knots
  ``-f~_i(x_n) f_i(x_n)`` and multiplicities ``w_n``, times the prior v-Log(u, 0, mu_0 1); here it
  is written as ``h(c) = -mu_0 [softplus(c) + softplus(-c)] + sum_k log sigmoid(a_k c + b_k)``
  over the rows with ``w_n = 1`` (``a_k = y_n f_i(x_n)``, ``b_k = y_n f~_i(x_n)``).  An output
  may also be 0 (a tree's leaf indicator ``1{x in leaf}`` outside its leaf): such a row does not
  depend on ``c_i`` and carries no term, so a leaf's weight has the v-Log over the rows of its
  leaf. :func:`weight_terms` builds the ``a_k, b_k`` of one weight.
- :func:`draw_weight`: an exact draw from that log-concave density by adaptive rejection
  sampling (Gilks and Wild 1992, the method the paper used): a few safeguarded Newton steps
  towards the mode from the chain's current value, tangents at the mode and at +-1.5 curvature
  widths, a chord squeeze so that most proposals are accepted without evaluating ``h``, and
  every evaluation added to the hull.
- the two-term v-Log of ``xi`` and the Beta of ``theta`` are drawn as differences of two
  ``log G``, ``G ~ Gamma``, by :func:`viboost.distributions.log_gamma.log_gamma_variate`
  (``sigmoid(Z) ~ Beta``), i.e. exactly, in log-odds form.
- :func:`run_chain`: one chain of Algorithm 2 (weights ``c_1..c_M`` in turn, then ``xi``, then
  each ``w_n``, then ``theta``), with burn-in and thinning, over the outputs stored by columns
  (dense, or compressed sparse columns for leaf indicators, whose weights then cost the rows of
  their leaf only); it records the kept draws and, for each kept sweep, the conditional
  probabilities ``P(w_n = 1 | c, xi, theta, y)`` whose average is the Rao-Blackwellised posterior
  probability that label ``n`` is true.

Random numbers come from a ``numpy.random.Generator`` passed in (numba supports them), one per
chain, so a chain is reproducible from its seed whichever thread runs it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from viboost.distributions.log_gamma import log_gamma_variate

#: Terms per product in ``weight_log_density``: a product of 512 factors <= 2 stays below
#: 2**512.
_PRODUCT_BLOCK = 512
# |c| up to which exp(-c) and exp(c) are precomputed and reused for the terms.
_REUSE_BOUND = 700.0
#: Most abscissae kept in the adaptive rejection hull of one draw.
HULL_SIZE = 32
# Newton steps are stopped once shorter than this many curvature widths.
_NEWTON_TOL = 0.25
# Envelope abscissae on each side of the mode, in curvature widths (acceptance ~0.88 for a
# Gaussian with the tangent at the mode).
_SIDE = 1.5
# Newton iterations at most (bisection of a bracket of width 1e300 down to 1 takes ~1000).
_MAX_NEWTON = 5000
# Evaluations of the mode search kept for the hull, if within _NEAR curvature widths of the mode.
_RECENT = 3
_NEAR = 4.0
# Longest Newton step towards the mode, in units of c (whose posterior scale is O(1)).
_MAX_STEP = 16.0
# Proposals before giving up on a draw (the acceptance rate is above 0.8 in practice).
_MAX_PROPOSALS = 100_000


@njit(cache=True, nogil=True)
def _log_sigmoid(u: float) -> float:
    if u >= 0.0:
        return -math.log1p(math.exp(-u))
    return u - math.log1p(math.exp(u))


@njit(cache=True, nogil=True)
def weight_log_density(c, a, b, exp_abs_b, n_active, mu0):
    """``(h, h', h'')`` at ``c`` of the weight conditional (S.3, eq. (59)), up to a constant.

    ``h(c) = -mu0 (softplus(c) + softplus(-c)) + sum_{k < n_active} log sigmoid(a_k c + b_k)``
    with ``a_k`` in {-1, +1}.  ``exp_abs_b[k] = exp(-|b_k|)`` is computed once per weight, so a
    term whose ``u_k = a_k c + b_k`` keeps the sign of ``b_k`` needs no ``exp`` here:
    ``exp(-|u_k|) = exp(-|b_k|) exp(-sign(b_k) a_k c)``.  The ``log1p(exp(-|u_k|))`` are summed
    as the logarithm of a running product of factors in ``(1, 2]``, taken every
    :data:`_PRODUCT_BLOCK` terms so it cannot overflow (one ``log`` per block).
    """
    abs_c = abs(c)
    e = math.exp(-abs_c)
    h = -mu0 * (abs_c + 2.0 * math.log1p(e))
    dh = -mu0 * math.tanh(0.5 * c)
    d2h = -2.0 * mu0 * e / ((1.0 + e) * (1.0 + e))
    reuse = abs_c <= _REUSE_BOUND
    exp_minus_c = math.exp(-c) if reuse else 0.0
    exp_plus_c = math.exp(c) if reuse else 0.0
    product = 1.0
    for k in range(n_active):
        ak = a[k]
        bk = b[k]
        u = ak * c + bk
        if reuse and ((u >= 0.0) == (bk >= 0.0)):
            e = exp_abs_b[k] * (exp_minus_c if (ak > 0.0) == (bk >= 0.0) else exp_plus_c)
        else:
            e = math.exp(-abs(u))
        one_e = 1.0 + e
        r = 1.0 / one_e
        product *= one_e
        if (k & (_PRODUCT_BLOCK - 1)) == _PRODUCT_BLOCK - 1:
            h -= math.log(product)
            product = 1.0
        if u >= 0.0:
            dh += ak * (e * r)  # a sigmoid(-u)
        else:
            h += u
            dh += ak * r
        d2h -= e * r * r
    h -= math.log(product)
    return h, dh, d2h


@njit(cache=True, nogil=True)
def _insert(xs, hs, dhs, n, x, h, dh):
    """Insert ``(x, h, dh)`` into the sorted hull arrays of length ``n``; return the new length."""
    if n >= xs.shape[0]:
        return n
    j = n
    while j > 0 and xs[j - 1] > x:
        j -= 1
    if (j > 0 and xs[j - 1] == x) or (j < n and xs[j] == x):
        return n
    for k in range(n, j, -1):
        xs[k] = xs[k - 1]
        hs[k] = hs[k - 1]
        dhs[k] = dhs[k - 1]
    xs[j] = x
    hs[j] = h
    dhs[j] = dh
    return n + 1


@njit(cache=True, nogil=True)
def _build_hull(xs, hs, dhs, n, zs, cum):
    """Tangent intersections ``zs[0..n-2]`` and cumulative piece masses ``cum[0..n-1]``.

    Piece ``j`` spans ``[zs[j-1], zs[j]]`` (``-inf``/``+inf`` at the ends) under the tangent at
    ``xs[j]``; masses are relative to ``exp(max h)`` so nothing overflows.  Returns the total.
    """
    for j in range(n - 1):
        d0, d1 = dhs[j], dhs[j + 1]
        lo, hi = xs[j], xs[j + 1]
        if d0 - d1 > 1e-12 * (abs(d0) + abs(d1)):
            z = (hs[j + 1] - hs[j] - hi * d1 + lo * d0) / (d0 - d1)
            z = min(max(z, lo), hi)
        else:  # (nearly) parallel tangents: the density is log-linear between the points
            z = 0.5 * (lo + hi)
        zs[j] = z
    hmax = hs[0]
    for j in range(1, n):
        hmax = max(hmax, hs[j])
    total = 0.0
    for j in range(n):
        d = dhs[j]
        if j == 0:  # (-inf, z_0]: d > 0
            log_mass = hs[0] + d * (zs[0] - xs[0]) - hmax - math.log(d)
        elif j == n - 1:  # [z_{n-2}, inf): d < 0
            log_mass = hs[j] + d * (zs[j - 1] - xs[j]) - hmax - math.log(-d)
        else:
            zl, zr = zs[j - 1], zs[j]
            width = zr - zl
            ul = hs[j] + d * (zl - xs[j]) - hmax
            ur = hs[j] + d * (zr - xs[j]) - hmax
            if width <= 0.0:
                log_mass = -math.inf
            elif abs(d) * width < 1e-10:
                log_mass = max(ul, ur) + math.log(width)
            else:
                log_mass = max(ul, ur) + math.log(-math.expm1(-abs(d) * width)) - math.log(abs(d))
        total += math.exp(log_mass) if log_mass > -745.0 else 0.0
        cum[j] = total
    return total


@njit(cache=True, nogil=True)
def _sample_piece(xs, hs, dhs, n, zs, j, u):
    """Inverse-CDF draw from piece ``j`` of the hull (a truncated exponential) at uniform ``u``."""
    d = dhs[j]
    if j == 0:
        return zs[0] + math.log(u) / d
    if j == n - 1:
        return zs[j - 1] + math.log(u) / d
    zl, zr = zs[j - 1], zs[j]
    width = zr - zl
    if abs(d) * width < 1e-10:
        return zl + u * width
    if d > 0.0:
        return zr + math.log(u + (1.0 - u) * math.exp(-d * width)) / d
    return zl + math.log(u + (1.0 - u) * math.exp(d * width)) / d


@njit(cache=True, nogil=True)
def draw_weight(x0, a, b, exp_abs_b, n_active, mu0, xs, hs, dhs, zs, cum, rng):
    """One exact draw of a weight from its conditional, starting the mode search at ``x0``.

    ``xs, hs, dhs, zs, cum`` are work arrays of length :data:`HULL_SIZE`.  Returns
    ``(draw, evaluations of h)``.
    """
    evals = 0
    lo, hi = -math.inf, math.inf
    x = x0
    scale = 1.0
    cap = _MAX_STEP
    # The last _RECENT evaluations, kept in a ring at the end of the work arrays and offered to
    # the hull (built from the front) once the mode is found.
    ring = xs.shape[0] - _RECENT
    recent = 0
    for _ in range(_MAX_NEWTON):
        h, dh, d2h = weight_log_density(x, a, b, exp_abs_b, n_active, mu0)
        evals += 1
        slot = ring + recent % _RECENT
        xs[slot], hs[slot], dhs[slot] = x, h, dh
        recent += 1
        if dh > 0.0:
            lo = x
        elif dh < 0.0:
            hi = x
        else:
            break
        scale = 1.0 / math.sqrt(-d2h) if d2h < 0.0 else math.inf
        # Safeguarded Newton step (h is strictly concave since mu0 > 0).  Far in a tail h is
        # linear and h'' underflows: the step is capped, and the cap doubles while it binds.
        capped = not (d2h < 0.0 and abs(dh) < -d2h * cap)
        if capped:  # at least back to 0 at once: starts at |x| ~ 1e300 take a few steps
            step = math.copysign(max(cap, abs(x)), dh)
            cap *= 2.0
        else:
            step = -dh / d2h
            if abs(step) < _NEWTON_TOL * scale:
                break
            cap = _MAX_STEP
        x_new = x + step
        if not (lo < x_new < hi):  # overshot the bracket [lo, hi] of the mode: bisect
            x_new = 0.5 * lo + 0.5 * hi
        if not math.isfinite(x_new):  # the mode is beyond the float range
            break
        if x_new == x and not capped:  # converged to rounding
            break
        x = x_new
    mode = xs[ring + (recent - 1) % _RECENT]  # the last point evaluated
    scale = min(scale, 1e300)
    # np.int64(0), not 0: a literal 0 would be typed Literal[int](0) while numba infers the
    # loop, and _insert, _build_hull and _sample_piece would each compile a second time for it.
    n = np.int64(0)
    for k in range(ring, ring + min(recent, _RECENT)):
        if abs(xs[k] - mode) <= _NEAR * scale:
            n = _insert(xs, hs, dhs, n, xs[k], hs[k], dhs[k])
    # Tangents on both sides of the mode: h' > 0 at the leftmost abscissa, < 0 at the rightmost.
    for side in (-1.0, 1.0):
        dist = _SIDE * scale
        for _ in range(200):
            edge = 0 if side < 0.0 else n - 1
            if side * dhs[edge] < 0.0 and abs(xs[edge] - mode) >= 0.5 * dist:
                break
            xe = mode + side * dist
            if side * (xe - xs[edge]) <= 0.0:  # the edge is too close: move beyond it
                xe = xs[edge] + side * dist
            h, dh, _ = weight_log_density(xe, a, b, exp_abs_b, n_active, mu0)
            evals += 1
            n = _insert(xs, hs, dhs, n, xe, h, dh)
            dist *= 2.0
    total = _build_hull(xs, hs, dhs, n, zs, cum)
    for _ in range(_MAX_PROPOSALS):
        # Choose a piece in proportion to its mass, then a point in it.
        target = rng.random() * total
        j = 0
        while j < n - 1 and cum[j] <= target:
            j += 1
        u = 1.0 - rng.random()  # (0, 1]
        x = _sample_piece(xs, hs, dhs, n, zs, j, u)
        upper = hs[j] + dhs[j] * (x - xs[j])
        log_u = math.log(1.0 - rng.random())
        # Squeeze: the chord between the abscissae around x lies below h (h is concave).
        k = j if x >= xs[j] else j - 1
        if 0 <= k < n - 1:
            t = (x - xs[k]) / (xs[k + 1] - xs[k])
            lower = hs[k] + t * (hs[k + 1] - hs[k])
            if log_u <= lower - upper:
                return x, evals
        h, dh, _ = weight_log_density(x, a, b, exp_abs_b, n_active, mu0)
        evals += 1
        if log_u <= h - upper:
            return x, evals
        if n < xs.shape[0]:
            n = _insert(xs, hs, dhs, n, x, h, dh)
            total = _build_hull(xs, hs, dhs, n, zs, cum)
    raise RuntimeError("adaptive rejection sampling of a weight failed to accept a proposal")


@njit(cache=True, nogil=True)
def weight_terms(indptr, indices, values, dense, y, margin, clean, m, cm, a, b, exp_abs_b):
    """The data terms of the conditional of ``c_m`` (S.3, eq. (59)); returns their number ``k``.

    Classifier ``m``'s outputs are ``values[indptr[m]:indptr[m + 1]]``, at the rows
    ``indices[...]`` (or, when ``dense``, at every row in order). A row carries a term when
    ``w_n = 1`` and ``f_m(x_n) != 0`` (a leaf indicator is 0 outside its leaf: those rows do not
    depend on ``c_m``): ``a[k] = y_n f_m(x_n)`` in {-1, +1} and ``b[k] = y_n (F_n - c_m f_m(x_n))``,
    the label times the rest of the margin, so the term is ``log sigmoid(a_k c + b_k)``;
    ``exp_abs_b[k] = exp(-|b_k|)``.  ``margin`` holds ``F_n`` at ``c_m = cm``.
    """
    start = indptr[m]
    k = np.int64(0)
    for p in range(start, indptr[m + 1]):
        i = p - start if dense else indices[p]
        f = values[p]
        if clean[i] and f != 0.0:
            a[k] = y[i] * f
            bk = y[i] * (margin[i] - cm * f)
            b[k] = bk
            exp_abs_b[k] = math.exp(-abs(bk))
            k += 1
    return k


@njit(cache=True, nogil=True)
def run_chain(
    indptr,
    indices,
    values,
    dense,
    y,
    c,
    xi,
    logit_theta,
    clean,
    mu0,
    mu0_noise,
    zeta1,
    zeta2,
    n_burnin,
    n_draws,
    thin,
    rng,
    out_c,
    out_xi,
    out_logit_theta,
    out_clean_proba,
    clean_proba_sum,
    out_evals,
):
    """Run one chain of Algorithm 2 in place.

    The ``(M, N)`` matrix of base-classifier outputs ``f_m(x_n)`` in {-1, 0, +1} is given by
    columns of the ``N x M`` matrix (compressed sparse columns): classifier ``m``'s nonzero outputs
    are ``values[indptr[m]:indptr[m + 1]]`` at the rows ``indices[...]``, in increasing order;
    with ``dense`` (``indices`` then unused) ``values`` is the whole ``(M, N)`` matrix, raveled,
    and ``indptr[m] = m N``. ``rng`` is a ``numpy.random.Generator``; ``c``, ``xi``,
    ``logit_theta`` and ``clean`` (``w``, uint8) are the initial state (``c`` and ``clean`` are
    updated in place).  Kept sweeps ``t = n_burnin + k * thin`` fill ``out_c[k]``, ``out_xi[k]``,
    ``out_logit_theta[k]`` (``log theta - log(1 - theta)``), ``out_clean_proba[k]``
    (``P(w_n = 1 | rest)`` at that sweep's ``w`` step; skipped when ``out_clean_proba`` has no
    rows) and ``out_evals[k]`` (evaluations of the weight densities in that sweep); the
    ``P(w_n = 1 | rest)`` of kept sweeps are also summed into ``clean_proba_sum``.  Returns the
    final ``(xi, logit_theta)``.
    """
    store_rows = out_clean_proba.shape[0] > 0
    m_count = c.shape[0]
    n_rows = y.shape[0]
    margin = np.zeros(n_rows)
    for m in range(m_count):
        cm = c[m]
        start = indptr[m]
        for p in range(start, indptr[m + 1]):
            i = p - start if dense else indices[p]
            margin[i] += cm * values[p]
    a = np.empty(n_rows)
    b = np.empty(n_rows)
    exp_abs_b = np.empty(n_rows)
    xs = np.empty(HULL_SIZE)
    hs = np.empty(HULL_SIZE)
    dhs = np.empty(HULL_SIZE)
    zs = np.empty(HULL_SIZE)
    cum = np.empty(HULL_SIZE)
    n_sweeps = n_burnin + n_draws * thin
    for t in range(n_sweeps):
        keep = t >= n_burnin and (t - n_burnin) % thin == 0
        slot = (t - n_burnin) // thin
        evals = 0
        # c_i ~ v-Log(...), i = 1..M: only rows with w_n = 1 and f_i(x_n) != 0 carry a term.
        for m in range(m_count):
            cm = c[m]
            k = weight_terms(
                indptr, indices, values, dense, y, margin, clean, m, cm, a, b, exp_abs_b
            )
            new, used = draw_weight(cm, a, b, exp_abs_b, k, mu0, xs, hs, dhs, zs, cum, rng)
            evals += used
            step = new - cm
            if step != 0.0:
                start = indptr[m]
                for p in range(start, indptr[m + 1]):
                    i = p - start if dense else indices[p]
                    margin[i] += step * values[p]
            c[m] = new
        # xi ~ v-Log(u, 0, [mu0' + #noisy -1 labels, mu0' + #noisy +1 labels]) (S.3, eq. (61)):
        # sigmoid(xi) ~ Beta(mu0' + #noisy +1, mu0' + #noisy -1).
        noisy_pos = 0.0
        noisy_neg = 0.0
        for i in range(n_rows):
            if not clean[i]:
                if y[i] > 0.0:
                    noisy_pos += 1.0
                else:
                    noisy_neg += 1.0
        xi = log_gamma_variate(mu0_noise + noisy_pos, rng) - log_gamma_variate(
            mu0_noise + noisy_neg, rng
        )
        # w_n ~ Bernoulli(theta s(y F) / (theta s(y F) + (1 - theta) s(y xi))) (S.3, eq. (63)),
        # in log-odds.
        log_odds_theta = logit_theta
        n_clean = 0.0
        for i in range(n_rows):
            log_odds = log_odds_theta + _log_sigmoid(y[i] * margin[i]) - _log_sigmoid(y[i] * xi)
            if log_odds >= 0.0:
                p_clean = 1.0 / (1.0 + math.exp(-log_odds))
            else:
                e = math.exp(log_odds)
                p_clean = e / (1.0 + e)
            is_clean = rng.random() < p_clean
            clean[i] = 1 if is_clean else 0
            if is_clean:
                n_clean += 1.0
            if keep:
                clean_proba_sum[i] += p_clean
                if store_rows:
                    out_clean_proba[slot, i] = p_clean
        # theta ~ Beta(zeta_1 + sum w, zeta_2 + sum (1 - w)) (S.3, eq. (65)), drawn as its log-odds.
        logit_theta = log_gamma_variate(zeta1 + n_clean, rng) - log_gamma_variate(
            zeta2 + (n_rows - n_clean), rng
        )
        if keep:
            for m in range(m_count):
                out_c[slot, m] = c[m]
            out_xi[slot] = xi
            out_logit_theta[slot] = logit_theta
            out_evals[slot] = evals
    return xi, logit_theta
