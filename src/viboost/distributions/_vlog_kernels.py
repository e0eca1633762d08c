"""Shifted kernels of the v-Log density and the root finder of its mode (supplement S.1, S.5.1).

For ``g(z) = sum_k mu_k softplus(beta_k (z - gamma_k))`` (see
:mod:`viboost.distributions.versatile_logistic`), ``g~(d) = g(z0 + d) - g(z0)`` is the kernel
that the normaliser's integration (S.5.1), the cdf tables and the sampler work with. This
module owns those kernels, the float64 constants they share with the integration and the
sampler (:data:`FLOAT64_EPS`, :data:`BREGMAN_CHUNK_ELEMENTS`, :func:`chunk_rows`), the checks
of their rounding noise (:func:`slope_noise_factor`, :func:`check_kernel_dip`) and:

* :class:`ShiftedKernel` -- term-by-term ``logaddexp`` form, fast, for moderate multiplicities;
* :class:`BregmanKernel` -- linear term plus Bregman divergences of softplus, accurate whatever
  the multiplicities;
* :func:`solve_increasing` -- safeguarded Newton root finding (the mode, where ``g' = 0``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, log_expit

#: The float64 machine epsilon.
FLOAT64_EPS = float(np.finfo(np.float64).eps)

# Number of float64 elements allowed in one (points x terms) temporary: 2**20 elements = 8 MiB.
_CHUNK_ELEMENTS = 1 << 20

# Bregman kernel (``BregmanKernel``).
_SERIES_DELTA = 0.2  # |delta| below which the Bregman term is summed as a cumulant series
#: Elements per chunk of the Bregman kernel (which has ~15 temporaries per element).
BREGMAN_CHUNK_ELEMENTS = 1 << 17


# g~ = g(z0 + d) - g(z0) with z0 the computed mode dips below 0 by at most ~50: the minimiser
# lies within 10 curvature widths of z0 (see ``BregmanKernel.center``).  A deeper dip means
# that g~ is rounding noise, and the density cannot be integrated or sampled.
KERNEL_DIP_LIMIT = 60.0


def slope_noise_factor(n_terms: int) -> float:
    """Rounding noise of a sum of ``n_terms`` slope summands, per unit of their magnitude.

    ``(8 + log2 K) eps``: each summand is off by a few eps when formed, and summation adds
    ``log2 K`` more; where ``|g'|`` is below this times the summands' magnitude the point is
    the mode to working precision.
    """
    return (8.0 + math.log2(max(n_terms, 1))) * FLOAT64_EPS


def check_kernel_dip(values: ArrayLike, what: str) -> None:
    """Raise ``FloatingPointError`` if ``g~`` dips below ``-KERNEL_DIP_LIMIT`` (rounding noise)."""
    low = float(np.min(values))
    if not low > -KERNEL_DIP_LIMIT:  # NaN included
        raise FloatingPointError(
            f"{what} is not resolved in float64: its log-density rises by {-low:.3g} away from "
            "its computed mode (rounding noise of extreme multiplicities or slopes)"
        )


def scaled_slope(
    slopes: NDArray[np.float64], knots: NDArray[np.float64], weights: NDArray[np.float64], z: float
) -> tuple[float, float, float]:
    """``(g'(z), its rounding noise, g''(z))``, all divided by the multiplicity scale.

    ``mu_k = weights_k * 2**e`` (how ``VersatileLogistic`` stores multiplicities); products with the
    weights are formed in log space, so that they neither overflow nor lose a subnormal
    ``expit``.  The summands ``mu_k beta_k expit(t_k)`` are formed elementwise and summed
    exactly (``math.fsum``), not by a BLAS dot product, whose fused multiply-adds on some CPUs
    leave the rounding error of one product where two products cancel exactly.  The sum is
    still only known to within the noise: a few eps of each summand (each was rounded when
    formed) plus a few eps of ``mu_k |beta_k t_k| expit(t_k) expit(-t_k)``, the change of a
    summand when its argument ``t_k = beta_k (z - gamma_k)`` moves by its own rounding error.
    """
    t = slopes * (z - knots)
    log_w = np.log(weights)
    lp, lq = log_expit(t), log_expit(-t)
    summands = slopes * np.exp(log_w + lp)
    spread = np.abs(slopes) * np.exp(log_w + lp + lq)  # mu |beta| expit(t) expit(-t)
    magnitude = math.fsum(np.abs(summands).tolist()) + math.fsum((spread * np.abs(t)).tolist())
    noise = slope_noise_factor(slopes.shape[0]) * magnitude
    curvature = float(spread @ np.abs(slopes))
    return math.fsum(summands.tolist()), noise, curvature


def chunk_rows(n_terms: int, elements: int = _CHUNK_ELEMENTS) -> int:
    return max(1, elements // max(1, n_terms))


class ShiftedKernel:
    """``g~(d) = g(z0 + d) - g(z0)`` evaluated term by term, without cancellation.

    For ``a_k = beta_k (z0 - gamma_k)``, ``softplus(a_k + beta_k d) - softplus(a_k)`` equals
    ``logaddexp(log_expit(-a_k), log_expit(a_k) + beta_k d)``, which is exact up to rounding
    (no difference of two large numbers), so ``g~`` is accurate even when ``g(z0)`` is huge
    (e.g. 1e5 or more).
    """

    def __init__(
        self,
        slopes: NDArray[np.float64],
        knots: NDArray[np.float64],
        mults: NDArray[np.float64],
        z0: float,
    ) -> None:
        a = slopes * (z0 - knots)
        self.slopes = slopes
        self.mults = mults
        self.log_lo = log_expit(-a)
        self.log_hi = log_expit(a)
        # softplus(a) = -log_expit(-a); expit(a) expit(-a) = exp(log_expit(a) + log_expit(-a)).
        self.g0 = -float(mults @ self.log_lo)
        self.curvature = float((mults * slopes * slopes) @ np.exp(self.log_hi + self.log_lo))
        self.n_evals = 0
        # Rounding-noise scales of g~ (see ``noise``): each term's logaddexp is off by ~eps
        # times |log_lo| plus eps times its value, which is about |beta d| expit(a) near d = 0.
        self._noise_const = float(mults @ np.abs(self.log_lo))
        self._noise_slope = float((mults * np.abs(slopes)) @ np.exp(self.log_hi))
        self._scale = 1.0
        self._scaled = slopes

    def _scaled_slopes(self, scale: float) -> NDArray[np.float64]:
        if scale != self._scale:
            self._scale = scale
            self._scaled = self.slopes * scale
        return self._scaled

    def __call__(self, d: NDArray[np.float64], scale: float = 1.0) -> NDArray[np.float64]:
        """``g~(scale * d)`` for a 1-D array ``d``."""
        d = np.asarray(d, dtype=np.float64)
        out = np.empty(d.shape[0])
        slopes = self._scaled_slopes(scale)
        rows = chunk_rows(slopes.shape[0])
        for start in range(0, d.shape[0], rows):
            block = d[start : start + rows]
            tmp = np.multiply.outer(block, slopes)
            tmp += self.log_hi
            np.logaddexp(self.log_lo, tmp, out=tmp)
            out[start : start + rows] = tmp @ self.mults
        self.n_evals += d.shape[0]
        return out

    def scalar(self, d: float, scale: float = 1.0) -> float:
        """``g~(scale * d)`` for a scalar ``d``."""
        self.n_evals += 1
        tmp = self._scaled_slopes(scale) * d
        tmp += self.log_hi
        np.logaddexp(self.log_lo, tmp, out=tmp)
        return float(tmp @ self.mults)

    def noise(self, s: float) -> float:
        """Estimated absolute rounding noise of ``g~(d)`` for ``|d|`` up to ~8 widths ``s``.

        ``g~`` is a sum of terms ``log(expit(-a) + expit(a) exp(beta d))`` that cancel to 0 at
        ``d = 0``; with huge multiplicities (1e300) the noise, ~eps times the sum of the terms'
        magnitudes, is far above 1 and this kernel is useless, although the log normaliser (then
        of order -1e300) needs little absolute accuracy.  ``log_normalizer`` compares this
        estimate with the accuracy it needs before trusting the fast path.
        """
        return 4.0 * FLOAT64_EPS * (self._noise_const + 8.0 * s * self._noise_slope)


class BregmanKernel:
    """``g~(d) = g(z0 + d) - g(z0)`` as ``gamma d + sum_k mu_k D(a_k, beta_k d)``, accurately.

    ``a_k = beta_k (z0 - gamma_k)``, ``gamma = g'(z0)`` and ``D(a, delta) = softplus(a + delta)
    - softplus(a) - delta expit(a) >= 0`` is the Bregman divergence of softplus, i.e. the log
    moment generating function of a Bernoulli(p = expit(a)) variable minus its linear term.  As
    ``D(a, delta) = D(-a, -delta)``, each term is evaluated with ``a <= 0`` (``p <= 1/2``) by

    * the cumulant series ``sum_{n=2}^{12} kappa_n(p) delta^n / n!`` for ``|delta| <= 0.2``;
    * ``(log1p(y) - y) + p (expm1(delta) - delta)`` with ``y = p expm1(delta)`` while
      ``delta <= 30`` and ``y <= 1/2``;
    * ``log(q + p e^delta) - p delta`` (a logaddexp) otherwise,

    each accurate to ~1e-14 relative, so the sum over terms (all nonnegative) is as accurate
    whatever the multiplicities: unlike ``ShiftedKernel`` nothing cancels except the linear
    term, whose rounding error is a smooth tilt ``d * O(eps sum|mu beta expit(a)|)`` rather than
    noise.  Products ``mu p`` are formed as ``exp(log mu + log p)`` so that a subnormal
    ``p`` (a term saturated at ``z0``) never loses precision.  ``__call__`` returns values in
    true units (``mu_k = weights_k * 2**log2_scale``), clipped to ``[-1e300, 1e300]``.
    """

    def __init__(
        self,
        slopes: NDArray[np.float64],
        knots: NDArray[np.float64],
        weights: NDArray[np.float64],
        log2_scale: int,
        z0: float,
    ) -> None:
        keep = weights > 0.0  # weights that underflowed (mu < 2**(log2_scale - 1074)) are dropped
        if not np.all(keep):
            slopes, knots, weights = slopes[keep], knots[keep], weights[keep]
        self.z0 = z0
        self.slopes = slopes
        self.knots = knots
        self.weights = weights
        self.scale = 2.0**log2_scale
        self._cap = 1e300 / self.scale
        self._center: float | None = None
        a = slopes * (z0 - knots)
        self.a = a
        flip = a > 0.0
        af = -np.abs(a)
        self.flipped_slopes = np.where(flip, -slopes, slopes)
        self.p = expit(af)  # <= 1/2
        q = expit(-af)
        self.log_p = log_expit(af)
        self.log_q = log_expit(-af)
        log_w = np.log(weights)
        self.wp = np.exp(log_w + self.log_p)  # mu p / scale, exact even where p is subnormal
        # g'(z0) / scale and (g(z0) - constant terms) / scale, with the same care for mu expit(a).
        log_hi = log_expit(a)
        self.gamma, self.gamma_noise, _ = scaled_slope(slopes, knots, weights, z0)
        # softplus(a) = -log_expit(-a); for a < -30 it is expit(a) to 1e-13, formed in log space.
        sp_big = -log_expit(-np.maximum(a, -30.0))
        self.g0 = float(np.sum(np.where(a > -30.0, weights * sp_big, np.exp(log_w + log_hi))))
        # Cumulants kappa_n(p) / n! times mu, n = 2..12, in the variable v = p q (r = q - p for
        # odd n), highest order first for Horner's rule.
        v = self.p * q
        r = q - self.p
        polys = {
            2: 1.0,
            3: r,
            4: 1.0 - 6.0 * v,
            5: r * (1.0 - 12.0 * v),
            6: 1.0 + v * (-30.0 + 120.0 * v),
            7: r * (1.0 + v * (-60.0 + 360.0 * v)),
            8: 1.0 + v * (-126.0 + v * (1680.0 - 5040.0 * v)),
            9: r * (1.0 + v * (-252.0 + v * (5040.0 - 20160.0 * v))),
            10: 1.0 + v * (-510.0 + v * (17640.0 + v * (-151200.0 + 362880.0 * v))),
            11: r * (1.0 + v * (-1020.0 + v * (52920.0 + v * (-604800.0 + 1814400.0 * v)))),
            12: 1.0
            + v * (-2046.0 + v * (168960.0 + v * (-3160080.0 + v * (19958400.0 - 39916800.0 * v)))),
        }
        wpq = self.wp * q
        self.series = [wpq * polys[n] / math.factorial(n) for n in range(12, 1, -1)]

    def restricted(self, span: float) -> BregmanKernel:
        """Copy without the terms that change ``g~`` by < 1e-17 / K over ``|d| <= span``.

        ``|D(a, delta)| <= 2 |delta|``, so term ``k`` contributes at most
        ``2 mu_k |beta_k| span``; ``gamma`` (the whole linear term) is kept as it is.
        """
        n_terms = self.weights.shape[0]
        bound = 1e-17 / n_terms / self.scale
        keep = 2.0 * self.weights * np.abs(self.slopes) * span > bound
        if np.all(keep):
            return self
        new = object.__new__(BregmanKernel)
        new.__dict__.update(self.__dict__)
        for name in ("slopes", "knots", "weights", "a", "flipped_slopes", "p", "log_p"):
            setattr(new, name, getattr(self, name)[keep])
        for name in ("log_q", "wp"):
            setattr(new, name, getattr(self, name)[keep])
        new.series = [coef[keep] for coef in self.series]
        return new

    def _scaled(self, d: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.empty(d.shape[0])
        rows = chunk_rows(self.weights.shape[0], BREGMAN_CHUNK_ELEMENTS)
        p, wp, w = self.p, self.wp, self.weights
        for start in range(0, d.shape[0], rows):
            block = d[start : start + rows]
            delta = np.multiply.outer(block, self.flipped_slopes)
            small = np.abs(delta) <= _SERIES_DELTA
            ds = np.where(small, delta, 0.0)
            series = self.series[0] * ds
            for coef in self.series[1:-1]:
                series += coef
                series *= ds
            series += self.series[-1]
            series *= ds
            series *= ds
            dc = np.minimum(delta, 30.0)
            em = np.expm1(dc)
            y = p * em
            # Far out (|d| ~ 1e300) a term overflows to +inf, the limit of a convex g~ (the
            # sum is clipped below); the branch np.where does not take may even be inf - inf.
            # Only those overflows are let through: a NaN in the result is an error below.
            with np.errstate(over="ignore", invalid="ignore"):
                direct = w * (np.log1p(y) - y) + wp * (em - dc)
                # log(q + p e^delta) - p delta, +inf (not inf - inf) at delta = +inf.
                logadd = w * np.logaddexp(self.log_q, self.log_p + delta) - wp * delta
                logadd[delta == np.inf] = np.inf
                use_direct = (delta <= 30.0) & (y <= 0.5)
                vals = np.where(small, series, np.where(use_direct, direct, logadd))
                out[start : start + rows] = vals.sum(axis=1)
                out[start : start + rows] += self.gamma * block
        if np.any(np.isnan(out)):
            raise FloatingPointError("v-Log kernel: NaN from an evaluation point or term")
        return np.clip(out, -self._cap, self._cap)

    def __call__(self, d: ArrayLike) -> NDArray[np.float64]:
        """``g~(d)`` for a 1-D array ``d`` (true units, clipped to ``[-1e300, 1e300]``)."""
        return self._scaled(np.atleast_1d(np.asarray(d, dtype=np.float64))) * self.scale

    def center(self, g_star: float) -> float:
        """Offset ``d_c`` of the kernel's minimiser from ``z0`` (may zero ``gamma``; see below).

        The mode is known only up to the rounding noise of ``g'`` (~eps sum|mu beta expit|),
        which tilts ``g~`` by ``gamma = g'(z0)``.  With huge multiplicities the peak (width
        ``w = 1/sqrt(g'')``) can be narrower than that offset, even narrower than the float
        spacing at ``z0``.  Where the quadratic model holds (``|beta d_c| <= 1e-3``), the
        Newton offset ``d_c = -gamma / g''`` is returned if ``|d_c| <= 10 w``.  Farther, ``g~``
        near the peak is the difference of two terms of size ``(d_c / w)**2`` and loses that
        many units of ``eps``: the tilt is then pure noise and ``gamma`` is set to 0, which
        changes ``log B`` by ``~(d_c / w)**2 / 2``, allowed when that is below 1e-12 ``g(z*)``
        (``g_star``) or when ``d_c + u`` could not even resolve the peak (``|d_c| > 1e8 w``).
        """
        if self._center is None:
            self._center = self._find_center(g_star)
        return self._center

    def _find_center(self, g_star: float) -> float:
        d1, d2 = self.derivatives(0.0)
        if not d2 > 0.0:
            return 0.0
        d_c = -d1 / d2
        ratio = abs(d_c) * math.sqrt(d2) * math.sqrt(self.scale)
        if ratio > 10.0 and abs(d1) <= self.gamma_noise:
            # The tilt is below the rounding noise of g'(z0) (z0 is the mode to working
            # precision, which is how ``mode`` accepted it) and yet would move the peak by more
            # than 10 widths: it is pure noise.  Typical case: huge multiplicities on tiny,
            # opposite slopes (mu = 1e200, beta = +-1e-100), whose summands of g' (1e100 each)
            # cancel to a noise of ~1e84 around a peak of width ~1.  Kept, it would make g~
            # unbounded below (a density that cannot be normalised or sampled).
            self.gamma = 0.0
            return 0.0
        if abs(d_c) * float(np.max(np.abs(self.slopes))) > 1e-3:
            return 0.0
        if ratio <= 10.0:
            return d_c
        if ratio > 1e8 or ratio * ratio <= 1e-12 * abs(g_star):
            self.gamma = 0.0
            return 0.0
        return d_c  # pragma: no cover - not met: (d_c / w)**2 ~ eps**2 g(z*) in practice

    def derivatives(self, d: float) -> tuple[float, float]:
        """``(g~'(d), g~''(d)) / scale`` (scaled, so that they cannot overflow)."""
        t = self.a + self.slopes * d
        log_w = np.log(self.weights)
        lp, lq = log_expit(t), log_expit(-t)
        d1 = float(self.slopes @ np.exp(log_w + lp)) if d else self.gamma
        d2 = float((self.slopes * self.slopes) @ np.exp(log_w + lp + lq))
        return d1, d2


# ---------------------------------------------------------------------- root finding
def solve_increasing(func, x0: float, spread: float) -> tuple[float, float]:
    """Root of an increasing function by bracket expansion and safeguarded Newton (rtsafe).

    ``func(x)`` returns ``(f, f', tolerance, magnitude, width)``: ``|f| <= tolerance`` is
    accepted as a root (``f`` is at its rounding-noise level), ``magnitude`` is returned with
    the root, and ``width`` is the curvature width of the density's peak at ``x``.  Otherwise
    the iteration stops once a step is below ``1e-6`` widths (and ``1e-12`` relative), or below
    the float spacing when the peak is narrower than that: the root is then placed well inside
    the peak, which the shifted kernels need (a mode off by many widths leaves a tilt that
    ``BregmanKernel.center`` cannot tell from rounding noise).  Returns ``(root, magnitude)``.
    """
    f0, fp0, tol0, mag0, _ = func(x0)
    if abs(f0) <= tol0:
        return x0, mag0
    # Bracket: expand from x0 on the side where f changes sign.  The first step is the Newton
    # step (or ``spread`` when f' underflows); then it doubles.  Since f(-inf) < 0 < f(+inf)
    # for a valid density this terminates.
    step = abs(f0) / fp0 if fp0 > 0.0 else spread
    step = max(step, 1e-8 * max(1.0, abs(x0)))
    direction = 1.0 if f0 < 0.0 else -1.0
    inner = x0
    for _ in range(2100):
        outer = x0 + direction * step
        if not math.isfinite(outer):
            break
        f_outer, _, _, mag_outer, _ = func(outer)
        if (f_outer > 0.0) == (direction > 0.0) or f_outer == 0.0:
            break
        inner = outer
        step *= 2.0
    else:  # pragma: no cover - defensive
        raise RuntimeError("could not bracket the mode of the v-Log density")
    if not math.isfinite(outer):  # pragma: no cover - defensive
        raise RuntimeError("could not bracket the mode of the v-Log density")
    if f_outer == 0.0:
        return outer, mag_outer
    lo, hi = (inner, outer) if direction > 0.0 else (outer, inner)

    # Safeguarded Newton (rtsafe): Newton step when it stays inside the bracket and shrinks
    # fast enough, bisection otherwise.
    x = x0 - f0 / fp0 if fp0 > 0.0 else math.nan
    if not (lo < x < hi):
        x = 0.5 * (lo + hi)
    dx_old = hi - lo
    dx = dx_old
    for _ in range(5000):
        f, fp, tol_f, mag, width = func(x)
        if abs(f) <= tol_f:
            return x, mag
        if f < 0.0:
            lo = x
        else:
            hi = x
        x_new = x - f / fp if fp > 0.0 else math.nan
        if not (lo <= x_new <= hi) or abs(2.0 * f) > abs(dx_old * fp):
            dx_old = dx
            x_new = 0.5 * (lo + hi)
            dx = x_new - x
        else:
            dx_old = dx
            dx = x_new - x
        tol = min(1e-12 * max(min(1.0, width), abs(x_new)), 1e-6 * width)
        tol = max(tol, 2.0 * float(np.spacing(abs(x_new))))
        if abs(dx) <= tol or hi - lo <= 4.0 * np.spacing(max(abs(lo), abs(hi))):
            return x_new, mag
        x = x_new
    # Not reached in practice (bisection alone needs < 2100 halvings of a finite bracket,
    # and rtsafe bisects at least every other step); the bracket still holds the root.
    return 0.5 * (lo + hi), mag
