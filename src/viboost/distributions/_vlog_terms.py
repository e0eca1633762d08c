"""The terms of the v-Log kernel ``g`` and its minimiser, the mode (supplement S.1).

``g(z) = sum_k mu_k softplus(beta_k (z - gamma_k))``
(:mod:`viboost.distributions.versatile_logistic`). :class:`VlogTerms` holds a v-Log's
parameters and computes, once each, what every computation on ``g`` starts from: the
non-constant terms and the constant ``sum mu log 2`` of the others (:meth:`VlogTerms.active`),
the multiplicities' scale (above ``2**600`` they are stored as ``mu = w 2**e``:
:meth:`VlogTerms.log2_scale`, :meth:`VlogTerms.is_extreme`), the terms with identical (slope,
knot) merged (:class:`CompressedTerms`) and their exact ``log mu``
(:meth:`VlogTerms.log_mults`). On these it evaluates ``g`` and its derivatives and finds the
mode (``VersatileLogistic.mode``: safeguarded Newton on ``g'``, or on ``log P - log N`` in log
space for extreme multiplicities, then polished on the exactly summed slope) and the closed-form
approximate mode of eq. (17) (``VersatileLogistic.approx_mode``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, log_expit

from viboost._utils.special import LOG2, log_sum_exp, log_weighted_sum_exp, softplus
from viboost.distributions._vlog_kernels import (
    chunk_rows,
    scaled_slope,
    slope_noise_factor,
    solve_increasing,
)

# Relative tolerance of the slope-magnitude equality required by ``approx_mode``.
_SLOPE_MAGNITUDE_RTOL = 1e-12

# Multiplicity range.  Multiplicities up to 2**600 are used as they are; above, all are divided
# by 2**(e - 600) (e: binary exponent of the largest), so sums of up to ~1e100 terms stay finite.
_UNSCALED_EXP = 600
# The mode is found in log space if min(mu) / max(mu) is below this (or if mu were scaled) ...
_LOG_MODE_RANGE = 2.0**-600
# ... or if, at the linear-space solution, the summands of g' have underflowed below this.
_UNDERFLOW_MAGNITUDE = 1e-250


class CompressedTerms(NamedTuple):
    """Active terms with identical (slope, knot) merged; ``mu_k = weights_k * 2**log2_scale``."""

    slopes: NDArray[np.float64]
    knots: NDArray[np.float64]
    weights: NDArray[np.float64]
    log2_scale: int



class VlogTerms:
    """The terms of a v-Log's kernel ``g``, what every computation on it starts from, and its
    minimiser (cached on first use).

    Parameters
    ----------
    slopes, knots, multiplicities : ndarray of shape (K,)
        The parameters of a valid v-Log (validated by ``VersatileLogistic``), read-only
        float64 arrays.
    """

    def __init__(
        self,
        slopes: NDArray[np.float64],
        knots: NDArray[np.float64],
        multiplicities: NDArray[np.float64],
    ) -> None:
        self.slopes = slopes
        self.knots = knots
        self.multiplicities = multiplicities
        self._active_cache: tuple[NDArray, NDArray, NDArray, float] | None = None
        self._compressed_cache: CompressedTerms | None = None
        self._merge: tuple[NDArray, NDArray] | None = None
        self._log_mults_cache: NDArray | None = None
        self._log2_scale_cache: int | None = None
        self._deriv_coef: tuple[NDArray, NDArray, NDArray] | None = None
        self._mode_cache: float | None = None

    def active(self) -> tuple[NDArray, NDArray, NDArray, float]:
        """Non-constant terms (``beta != 0`` and ``mu > 0``) and the constant ``sum mu log 2``."""
        if self._active_cache is None:
            b, g, m = self.slopes, self.knots, self.multiplicities
            const = 0.0
            flat = b == 0.0
            if np.any(flat):
                m_flat = m[flat]
                top = float(np.max(m_flat))
                if top > 0.0:  # scaled sum: a float product overflows to inf without a warning
                    const = LOG2 * top * float(np.sum(m_flat / top))
            keep = (b != 0.0) & (m > 0.0)
            if not np.all(keep):
                b, g, m = b[keep], g[keep], m[keep]
            self._active_cache = (b, g, m, const)
        return self._active_cache

    def log2_scale(self) -> int:
        """Binary exponent ``e`` of the scale: the stored weights are ``mu / 2**e``."""
        if self._log2_scale_cache is None:
            top = float(np.max(self.active()[2]))
            self._log2_scale_cache = max(0, math.frexp(top)[1] - _UNSCALED_EXP)
        return self._log2_scale_cache

    def is_extreme(self) -> bool:
        """Whether the multiplicities need the scaled / log-space treatment (see
        :mod:`viboost.distributions.versatile_logistic`)."""
        m = self.active()[2]
        top = float(np.max(m))
        return self.log2_scale() > 0 or float(np.min(m)) < top * _LOG_MODE_RANGE

    def compressed(self) -> CompressedTerms:
        """Active terms with identical (slope, knot) pairs merged by summing multiplicities.

        The merged multiplicities are stored as weights ``mu / 2**e`` (``e = 0`` unless the
        largest multiplicity exceeds ``2**600``), so that their sums cannot overflow.
        """
        if self._compressed_cache is None:
            b, g, m, _ = self.active()
            e = self.log2_scale()
            w = np.ldexp(m, -e) if e else m
            # Cheap screen: without a repeated knot there is no repeated (slope, knot) pair.
            if b.shape[0] > 1 and np.any(np.diff(np.sort(g)) == 0.0):
                order = np.lexsort((g, b))
                bs, gs = b[order], g[order]
                new = np.empty(bs.shape[0], dtype=bool)
                new[0] = True
                new[1:] = (bs[1:] != bs[:-1]) | (gs[1:] != gs[:-1])
                starts = np.flatnonzero(new)
                if starts.shape[0] < b.shape[0]:
                    b, g, w = bs[starts], gs[starts], np.add.reduceat(w[order], starts)
                    self._merge = (order, starts)
            self._compressed_cache = CompressedTerms(b, g, w, e)
        return self._compressed_cache

    def log_mults(self) -> NDArray[np.float64]:
        """``log mu`` of the compressed terms, exact even where the scaled weight underflowed."""
        if self._log_mults_cache is None:
            m = self.active()[2]
            terms = self.compressed()
            if self._merge is None:
                logs = np.log(m)
            else:
                order, starts = self._merge
                logs = np.logaddexp.reduceat(np.log(m[order]), starts)
                # Where the merged weight is a normal float, its log is the more accurate one.
                normal = terms.weights >= 2.0**-1000
                logs[normal] = np.log(terms.weights[normal]) + terms.log2_scale * LOG2
            self._log_mults_cache = logs
        return self._log_mults_cache

    def negative_log_kernel(self, z: ArrayLike) -> float | NDArray[np.float64]:
        """``g(z)``, constant terms included (``VersatileLogistic.negative_log_kernel``)."""
        b, g, m, const = self.active()
        e = self.log2_scale()
        w = np.ldexp(m, -e) if e else m
        cap = 1e300 / float(np.sum(w))
        z_arr = np.asarray(z, dtype=np.float64)
        flat = z_arr.reshape(-1)
        out = np.empty(flat.shape[0])
        rows = chunk_rows(b.shape[0])
        for start in range(0, flat.shape[0], rows):
            block = flat[start : start + rows]
            tmp = np.subtract.outer(block, g)
            tmp *= b
            tmp = np.asarray(softplus(tmp))  # an ndarray for the 2-D tmp (no copy)
            big = np.max(tmp, axis=1) > cap
            vals = np.minimum(tmp, cap) @ w  # exact where no term exceeds cap (no overflow)
            if e or np.any(big):
                factor = 2.0**e
                limit = 1.7e308 / factor
                over = vals > limit
                vals = np.minimum(vals, limit) * factor
                vals[over] = np.inf
                for i in np.flatnonzero(big):  # in log space: g may exceed the float range
                    pos = tmp[i] > 0.0
                    log_val = log_weighted_sum_exp(np.log(tmp[i][pos]), w[pos]) + e * LOG2
                    vals[i] = math.exp(log_val) if log_val < 709.0 else np.inf
            out[start : start + rows] = vals
        out += const
        if z_arr.ndim == 0:
            return float(out[0])
        return out.reshape(z_arr.shape)

    def derivatives(self, z: float) -> tuple[float, float, float]:
        """``(g'(z), g''(z), sum_k |mu_k beta_k| expit(t_k))``, computed stably from ``expit``.

        Here ``t_k = beta_k (z - gamma_k)``, ``g' = sum mu beta expit(t)`` and
        ``g'' = sum mu beta^2 expit(t) expit(-t)``.  The last value bounds the magnitude of the
        summands of ``g'``; times ``eps`` it is the rounding noise of ``g'(z)``.
        """
        b, g, _, _ = self.active()
        if self._deriv_coef is None:
            m = self.active()[2]
            mb = m * b
            self._deriv_coef = (mb, mb * b, np.abs(mb))
        mb, mbb, abs_mb = self._deriv_coef
        t = b * (z - g)
        p = expit(t)
        q = expit(-t)
        q *= p
        return float(mb @ p), float(mbb @ q), float(abs_mb @ p)

    def _start_point(self) -> float:
        """Initial guess for the mode."""
        b, g, m, _ = self.active()
        mag = np.abs(b)
        if np.all(np.abs(mag - mag[0]) <= _SLOPE_MAGNITUDE_RTOL * mag[0]):
            return self.approx_mode(tau=0.5)
        if not self.is_extreme():
            w = m * mag
            return float(w @ g / np.sum(w))
        # Weighted mean of the knots with weights mu |beta| formed in log space.
        terms = self.compressed()
        log_w = self.log_mults() + np.log(np.abs(terms.slopes))
        w = np.exp(log_w - float(np.max(log_w)))
        return float(w @ terms.knots / np.sum(w))

    def mode(self) -> float:
        """The minimiser of ``g`` (``VersatileLogistic.mode``; cached)."""
        if self._mode_cache is None:
            self._mode_cache = self._compute_mode()
        return self._mode_cache

    def _compute_mode(self) -> float:
        x0 = self._start_point()
        if self.is_extreme():
            return self._mode_log_space(x0)
        b, g, _, _ = self.active()
        # Rounding noise of g'(z) is below ~(8 + log2 K) eps times the sum of its |summands|;
        # where |g'| is at that level the point is the mode to working precision.
        noise = slope_noise_factor(b.shape[0])

        def func(x: float) -> tuple[float, float, float, float, float]:
            d, h, d_mag = self.derivatives(x)
            width = 1.0 / math.sqrt(h) if h > 0.0 else math.inf
            return d, h, noise * d_mag, d_mag, width

        spread = float(np.max(g) - np.min(g)) + 1.0 / float(np.max(np.abs(b)))
        x, mag = solve_increasing(func, x0, spread)
        if mag < _UNDERFLOW_MAGNITUDE:
            # The summands of g' have underflowed (every term saturated at x, e.g. between
            # far-apart knots): g' carries no information there, log P - log N still does.
            return self._mode_log_space(x)
        return x

    def _mode_log_space(self, x0: float) -> float:
        """Mode as the root of ``h(z) = log P(z) - log N(z)`` (see ``VersatileLogistic.mode``)."""
        terms = self.compressed()
        b, g = terms.slopes, terms.knots
        log_rate = self.log_mults() + np.log(np.abs(b))  # log(mu |beta|)
        pos = b > 0.0
        sides = [(b[pos], g[pos], log_rate[pos]), (b[~pos], g[~pos], log_rate[~pos])]
        noise = slope_noise_factor(b.shape[0])

        def func(x: float) -> tuple[float, float, float, float, float]:
            logs, slopes_of_log, log_curv = [], [], []
            for bs, gs, ls in sides:
                t = bs * (x - gs)
                v = ls + log_expit(t)
                top = float(np.max(v))
                e = np.exp(v - top)
                total = float(np.sum(e))
                logs.append(top + math.log(total))
                # d/dz log(sum mu |beta| expit(t)) = sum softmax * beta expit(-t)
                slopes_of_log.append(float(e @ (bs * expit(-t))) / total)
                # g'' = sum mu beta^2 expit(t) expit(-t), this side's part in log space.
                log_curv.append(log_sum_exp(v + np.log(np.abs(bs)) + log_expit(-t)))
            h = logs[0] - logs[1]
            dh = slopes_of_log[0] - slopes_of_log[1]
            width = math.exp(min(-0.5 * log_sum_exp(np.array(log_curv)), 690.0))
            # Each log-sum-exp is off by ~eps times the magnitude of its exponents.
            return h, dh, noise * (abs(logs[0]) + abs(logs[1]) + 1.0), 1.0, width

        spread = float(np.max(g) - np.min(g)) + 1.0 / float(np.max(np.abs(b)))
        return self._polish_mode(solve_increasing(func, x0, spread)[0])

    def _polish_mode(self, x: float) -> float:
        """Safeguarded Newton steps on the exactly summed, scaled ``g'`` from a mode ``x``.

        In log space ``log P - log N`` is known only to about ``eps |log P|``, i.e. the mode
        only to about ``1e-13 / h'``, which is many peak widths when the multiplicities are huge
        (1e130 summands of ``g'`` and a peak 1e-42 wide at 1e47, for instance); the scaled slope
        summed by ``math.fsum`` is far more precise there.  The steps stop when ``g'`` is within its
        rounding noise, when a step no longer changes ``x``, or after 60 steps. Skipped when a
        scaled multiplicity has underflowed (the slope would miss that term).
        """
        terms = self.compressed()
        if not np.all(terms.weights > 0.0):
            return x
        lo, hi = -math.inf, math.inf
        for _ in range(60):
            d1, noise, d2 = scaled_slope(terms.slopes, terms.knots, terms.weights, x)
            if abs(d1) <= noise or not d2 > 0.0:
                break
            if d1 > 0.0:
                hi = x
            else:
                lo = x
            new = x - d1 / d2
            if not lo < new < hi:  # both ends are finite here: a bracket of the root
                new = 0.5 * (lo + hi)
            if new == x or not math.isfinite(new):
                break
            x = new
        return x

    def approx_mode(self, tau: float = 1.0) -> float:
        """The closed-form approximate mode of eq. (17) (``VersatileLogistic.approx_mode``)."""
        tau = float(tau)
        if not (math.isfinite(tau) and tau > 0.0):
            raise ValueError(f"tau must be a positive finite number; got {tau}")
        b, g, m, _ = self.active()
        mag = np.abs(b)
        beta = float(np.max(mag))
        if np.any(np.abs(mag - beta) > _SLOPE_MAGNITUDE_RTOL * beta):
            raise ValueError(
                "approx_mode requires every slope with positive multiplicity to have the same "
                f"magnitude; got magnitudes between {float(np.min(mag))} and {beta}"
            )
        neg = b < 0.0
        log_num = log_weighted_sum_exp(tau * beta * g[neg], m[neg])
        log_den = log_weighted_sum_exp(-tau * beta * g[~neg], m[~neg])
        return float((log_num - log_den) / (2.0 * tau * beta))
