"""The versatile logistic distribution v-Log(beta, gamma, mu) (section 3 and supplement S.1).

The (unnormalised) density is

    f(z) = prod_k (1 + exp(beta_k (z - gamma_k)))^(-mu_k),

i.e. ``g(z) = -log f(z) = sum_k mu_k softplus(beta_k (z - gamma_k))``, which is convex.  Terms
with ``mu_k == 0`` contribute nothing and terms with ``beta_k == 0`` contribute the constant
``mu_k log 2``; both are kept in ``g`` everywhere so that all methods agree.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.integrate import IntegrationWarning, quad
from scipy.special import expit, log_expit

from viboost._math import LOG2, log_cosh, log_weighted_sum_exp, softplus
from viboost.distributions.binary_logistic import BinaryLogistic, validate_labels

__all__ = ["VersatileLogistic"]

# Number of float64 elements allowed in one (points x terms) temporary: 2**20 elements = 8 MiB.
_CHUNK_ELEMENTS = 1 << 20

# Relative tolerance of the slope-magnitude equality required by ``approx_mode``.
_SLOPE_MAGNITUDE_RTOL = 1e-12

# Integration settings for ``log_normalizer`` (see ``_log_integral_trapezoid``).
_SINH_LAMBDA = 3.0  # x = lambda * sinh(t / lambda): uniform near the peak, geometric in the tails
_TRAP_H0 = 0.5  # coarsest trapezoid step in t
_TRAP_RTOL = 1e-10  # accept when two successive (nested) trapezoid sums agree to this
_TRAP_MAX_EVALS = 800  # beyond this many kernel evaluations, fall back to adaptive quad
_TAIL_LOG_THRESHOLD = 34.0  # truncate where g~(x) >= 34 + log|x| (tail mass < 1e-16)
_QUAD_EPSREL = 1e-11
_QUAD_LIMIT = 1000


def _as_float_vector(name: str, value: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array; got shape {arr.shape}")
    return np.atleast_1d(arr)


def _chunk_rows(n_terms: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, n_terms))


class _ShiftedKernel:
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
        rows = _chunk_rows(slopes.shape[0])
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


class VersatileLogistic:
    r"""Versatile logistic distribution v-Log(beta, gamma, mu).

    The density over the reals is

    .. math:: p(z) \propto \prod_{k=1}^K \left(1 + \exp[\beta_k (z - \gamma_k)]\right)^{-\mu_k},

    valid if and only if some term has ``beta_k > 0, mu_k > 0`` and some term has
    ``beta_j < 0, mu_j > 0`` (corollary of supplement S.1).  It is log-concave, hence unimodal.
    Instances are immutable; the mode and the log normaliser are computed once and cached.

    Parameters
    ----------
    slopes : array_like
        Slope vector ``beta`` (1-D, length ``K``; a scalar is broadcast).
    knots : array_like
        Knot vector ``gamma`` (1-D, length ``K``; a scalar is broadcast).
    multiplicities : array_like
        Nonnegative multiplicity vector ``mu`` (1-D, length ``K``; a scalar is broadcast).

    Attributes
    ----------
    slopes, knots, multiplicities : ndarray of shape (K,)
        Read-only float64 copies of the parameters.

    Raises
    ------
    ValueError
        If the lengths differ, a value is not finite, a multiplicity is negative, or the density
        is not normalisable (no positive-slope or no negative-slope term with positive
        multiplicity).

    Examples
    --------
    The standard logistic distribution is v-Log([+1, -1], [0, 0], [1, 1]):

    >>> import numpy as np
    >>> from viboost.distributions import VersatileLogistic
    >>> d = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [1.0, 1.0])
    >>> print(f"{abs(d.log_normalizer()):.12f}")  # B = 1
    0.000000000000
    >>> print(f"{d.pdf(0.0):.6f}")
    0.250000

    With multiplicities ``[mu1, mu2]`` the mode is ``log(mu2 / mu1)`` and the normaliser is the
    Beta function ``B(mu1, mu2)`` (supplement S.1.1):

    >>> d = VersatileLogistic([1.0, -1.0], 0.0, [1.0, 3.0])
    >>> print(f"{d.mode():.10f} {np.log(3.0):.10f}")
    1.0986122887 1.0986122887
    >>> print(f"{d.log_normalizer():.10f} {np.log(1.0 / 3.0):.10f}")
    -1.0986122887 -1.0986122887
    """

    def __init__(self, slopes: ArrayLike, knots: ArrayLike, multiplicities: ArrayLike) -> None:
        arrays = [
            _as_float_vector("slopes", slopes),
            _as_float_vector("knots", knots),
            _as_float_vector("multiplicities", multiplicities),
        ]
        lengths = [a.shape[0] for a in arrays]
        n_terms = max(lengths)
        if any(n not in (1, n_terms) for n in lengths):
            raise ValueError(
                "slopes, knots and multiplicities must have equal lengths; got "
                f"{lengths[0]}, {lengths[1]} and {lengths[2]}"
            )
        b, g, m = (np.array(np.broadcast_to(a, (n_terms,)), dtype=np.float64) for a in arrays)
        for name, arr in (("slopes", b), ("knots", g), ("multiplicities", m)):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} must contain only finite values (found NaN or inf)")
        if np.any(m < 0):
            raise ValueError("multiplicities must be nonnegative")
        pos = bool(np.any((b > 0) & (m > 0)))
        neg = bool(np.any((b < 0) & (m > 0)))
        if not (pos and neg):
            missing = []
            if not pos:
                missing.append(
                    "no term has slope > 0 and multiplicity > 0 (the kernel does not decay "
                    "as z -> +inf)"
                )
            if not neg:
                missing.append(
                    "no term has slope < 0 and multiplicity > 0 (the kernel does not decay "
                    "as z -> -inf)"
                )
            raise ValueError("invalid v-Log density: " + "; ".join(missing))
        for arr in (b, g, m):
            arr.setflags(write=False)
        self._slopes = b
        self._knots = g
        self._multiplicities = m
        self._active_cache: tuple[NDArray, NDArray, NDArray, float] | None = None
        self._compressed_cache: tuple[NDArray, NDArray, NDArray] | None = None
        self._deriv_coef: tuple[NDArray, NDArray, NDArray] | None = None
        self._mode_cache: float | None = None
        self._log_normalizer_cache: float | None = None

    # ------------------------------------------------------------------ parameters
    @property
    def slopes(self) -> NDArray[np.float64]:
        """Read-only slope vector ``beta``."""
        return self._slopes

    @property
    def knots(self) -> NDArray[np.float64]:
        """Read-only knot vector ``gamma``."""
        return self._knots

    @property
    def multiplicities(self) -> NDArray[np.float64]:
        """Read-only multiplicity vector ``mu``."""
        return self._multiplicities

    @property
    def n_terms(self) -> int:
        """Number of terms ``K`` (including constant terms)."""
        return int(self._slopes.shape[0])

    def _active(self) -> tuple[NDArray, NDArray, NDArray, float]:
        """Non-constant terms (``beta != 0`` and ``mu > 0``) and the constant ``sum mu log 2``."""
        if self._active_cache is None:
            b, g, m = self._slopes, self._knots, self._multiplicities
            const = LOG2 * float(np.sum(m[b == 0.0]))
            keep = (b != 0.0) & (m > 0.0)
            if not np.all(keep):
                b, g, m = b[keep], g[keep], m[keep]
            self._active_cache = (b, g, m, const)
        return self._active_cache

    def _compressed(self) -> tuple[NDArray, NDArray, NDArray]:
        """Active terms with identical (slope, knot) pairs merged by summing multiplicities."""
        if self._compressed_cache is None:
            b, g, m, _ = self._active()
            # Cheap screen: without a repeated knot there is no repeated (slope, knot) pair.
            if b.shape[0] > 1 and np.any(np.diff(np.sort(g)) == 0.0):
                order = np.lexsort((g, b))
                bs, gs, ms = b[order], g[order], m[order]
                new = np.empty(bs.shape[0], dtype=bool)
                new[0] = True
                new[1:] = (bs[1:] != bs[:-1]) | (gs[1:] != gs[:-1])
                starts = np.flatnonzero(new)
                if starts.shape[0] < b.shape[0]:
                    b, g, m = bs[starts], gs[starts], np.add.reduceat(ms, starts)
            self._compressed_cache = (b, g, m)
        return self._compressed_cache

    # ------------------------------------------------------------------ kernel and density
    def negative_log_kernel(self, z: ArrayLike) -> float | NDArray[np.float64]:
        """Negative log of the unnormalised density, ``g(z)``.

        ``g(z) = sum_k mu_k softplus(beta_k (z - gamma_k))``, constant terms included.

        Parameters
        ----------
        z : float or array_like
            Evaluation point(s); any shape.

        Returns
        -------
        float or ndarray
            ``g(z)`` with the shape of ``z`` (a float for scalar input).  Work is chunked so
            temporaries stay below ~10 MB whatever ``K`` and the number of points.

        Examples
        --------
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([1.0, -1.0, 0.0], [0.0, 0.0, 5.0], [1.0, 1.0, 2.0])
        >>> print(f"{d.negative_log_kernel(0.0):.6f}")  # 1*log2 + 1*log2 + 2*log2
        2.772589
        >>> d.negative_log_kernel([0.0, 1e6]).shape
        (2,)
        """
        b, g, m, const = self._active()
        z_arr = np.asarray(z, dtype=np.float64)
        flat = z_arr.reshape(-1)
        out = np.empty(flat.shape[0])
        rows = _chunk_rows(b.shape[0])
        for start in range(0, flat.shape[0], rows):
            block = flat[start : start + rows]
            tmp = np.subtract.outer(block, g)
            tmp *= b
            out[start : start + rows] = softplus(tmp) @ m
        out += const
        if z_arr.ndim == 0:
            return float(out[0])
        return out.reshape(z_arr.shape)

    def unnormalized_logpdf(self, z: ArrayLike) -> float | NDArray[np.float64]:
        """Log of the unnormalised density, ``-g(z)``.

        Parameters
        ----------
        z : float or array_like
            Evaluation point(s).

        Returns
        -------
        float or ndarray
            ``-g(z)``, same shape as ``z``.

        Examples
        --------
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([1.0, -1.0], 0.0, 1.0)
        >>> print(f"{d.unnormalized_logpdf(0.0):.6f}")
        -1.386294
        """
        return -self.negative_log_kernel(z)

    def logpdf(self, z: ArrayLike) -> float | NDArray[np.float64]:
        """Log density, ``-g(z) - log_normalizer()``.

        Parameters
        ----------
        z : float or array_like
            Evaluation point(s).

        Returns
        -------
        float or ndarray
            Log density, same shape as ``z``.

        Examples
        --------
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([1.0, -1.0], 0.0, 1.0)
        >>> print(f"{d.logpdf(0.0):.6f}")  # logistic density at 0 is 1/4
        -1.386294
        """
        return -self.negative_log_kernel(z) - self.log_normalizer()

    def pdf(self, z: ArrayLike) -> float | NDArray[np.float64]:
        """Density ``exp(logpdf(z))``.

        Parameters
        ----------
        z : float or array_like
            Evaluation point(s).

        Returns
        -------
        float or ndarray
            Density, same shape as ``z``.

        Examples
        --------
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([2.0, -2.0], 0.0, 1.0)
        >>> print(f"{d.pdf(0.0):.6f}")
        0.500000
        """
        logp = self.logpdf(z)
        if isinstance(logp, float):
            return math.exp(logp)
        return np.exp(logp)

    # ------------------------------------------------------------------ mode
    def _derivatives(self, z: float) -> tuple[float, float, float]:
        """``(g'(z), g''(z), sum_k |mu_k beta_k| expit(t_k))``, computed stably from ``expit``.

        Here ``t_k = beta_k (z - gamma_k)``, ``g' = sum mu beta expit(t)`` and
        ``g'' = sum mu beta^2 expit(t) expit(-t)``.  The last value bounds the magnitude of the
        summands of ``g'``; times ``eps`` it is the rounding noise of ``g'(z)``.
        """
        b, g, _, _ = self._active()
        if self._deriv_coef is None:
            m = self._active()[2]
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
        b, g, m, _ = self._active()
        mag = np.abs(b)
        if np.all(np.abs(mag - mag[0]) <= _SLOPE_MAGNITUDE_RTOL * mag[0]):
            return self.approx_mode(tau=0.5)
        w = m * mag
        return float(w @ g / np.sum(w))

    def mode(self) -> float:
        """Exact mode, i.e. the minimiser of the convex function ``g``.

        Solves ``g'(z) = sum_k mu_k beta_k expit(beta_k (z - gamma_k)) = 0`` by safeguarded Newton
        iterations (bisection fallback) inside a bracket ``[a, b]`` with ``g'(a) < 0 < g'(b)``.
        The bracket is found by expanding from a starting guess (``approx_mode(0.5)`` when all
        slopes have the same magnitude, else a weighted mean of the knots).  Cached.

        Returns
        -------
        float
            The mode, to about 1e-12 relative (or absolute when it is near 0).

        Raises
        ------
        RuntimeError
            If the iteration fails to converge (should not happen for a valid density).

        Examples
        --------
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([2.0, -0.5, 1.0], [0.0, 1.0, -3.0], [1.0, 4.0, 0.5])
        >>> z = d.mode()
        >>> bool(d.pdf(z) > d.pdf(z - 1e-4) and d.pdf(z) > d.pdf(z + 1e-4))
        True
        """
        if self._mode_cache is None:
            self._mode_cache = self._compute_mode()
        return self._mode_cache

    def _compute_mode(self) -> float:
        b, g, _, _ = self._active()
        # Rounding noise of g'(z) is below ~(8 + log2 K) eps times the sum of its |summands|;
        # where |g'| is at that level the point is the mode to working precision.
        noise = (8.0 + math.log2(b.shape[0])) * float(np.finfo(np.float64).eps)
        x0 = self._start_point()
        d0, h0, mag0 = self._derivatives(x0)
        if abs(d0) <= noise * mag0:
            return x0
        # Bracket: expand from x0 on the side where g' changes sign.  The first step is the
        # Newton step (or a scale from the knot spread and slopes when g'' underflows); then it
        # doubles.  Since g'(-inf) < 0 < g'(+inf) for a valid density this terminates.
        spread = float(np.max(g) - np.min(g)) + 1.0 / float(np.max(np.abs(b)))
        step = abs(d0) / h0 if h0 > 0.0 else spread
        step = max(step, 1e-8 * max(1.0, abs(x0)))
        direction = 1.0 if d0 < 0.0 else -1.0
        inner = x0
        for _ in range(2100):
            outer = x0 + direction * step
            if not math.isfinite(outer):
                break
            d_outer = self._derivatives(outer)[0]
            if (d_outer > 0.0) == (direction > 0.0) or d_outer == 0.0:
                break
            inner = outer
            step *= 2.0
        else:  # pragma: no cover - defensive
            raise RuntimeError("could not bracket the mode of the v-Log density")
        if not math.isfinite(outer):  # pragma: no cover - defensive
            raise RuntimeError("could not bracket the mode of the v-Log density")
        if d_outer == 0.0:
            return outer
        lo, hi = (inner, outer) if direction > 0.0 else (outer, inner)

        # Safeguarded Newton (rtsafe): Newton step when it stays inside the bracket and shrinks
        # fast enough, bisection otherwise.
        x = x0 - d0 / h0 if h0 > 0.0 else math.nan
        if not (lo < x < hi):
            x = 0.5 * (lo + hi)
        dx_old = hi - lo
        dx = dx_old
        for _ in range(5000):
            d, h, d_mag = self._derivatives(x)
            if abs(d) <= noise * d_mag:
                return x
            if d < 0.0:
                lo = x
            else:
                hi = x
            x_new = x - d / h if h > 0.0 else math.nan
            if not (lo <= x_new <= hi) or abs(2.0 * d) > abs(dx_old * h):
                dx_old = dx
                x_new = 0.5 * (lo + hi)
                dx = x_new - x
            else:
                dx_old = dx
                dx = x_new - x
            width = 1.0 / math.sqrt(h) if h > 0.0 else math.inf
            tol = 1e-12 * max(min(1.0, width), abs(x_new))
            if abs(dx) <= tol or hi - lo <= 4.0 * np.spacing(max(abs(lo), abs(hi))):
                return x_new
            x = x_new
        # Not reached in practice (bisection alone needs < 2100 halvings of a finite bracket,
        # and rtsafe bisects at least every other step); the bracket still holds the mode.
        return 0.5 * (lo + hi)

    def approx_mode(self, tau: float = 1.0) -> float:
        r"""Closed-form approximate mode, eq. (appxmode) of the paper.

        With all slopes of equal magnitude ``beta`` (terms with ``mu_k = 0`` or ``beta_k = 0``
        are ignored: they are constant),

        .. math::

            \alpha = \frac{1}{2\tau\beta} \log
                \frac{\sum_{k:\beta_k<0} \mu_k e^{\tau\beta\gamma_k}}
                     {\sum_{k:\beta_k>0} \mu_k e^{-\tau\beta\gamma_k}} ,

        evaluated in log space (a weighted log-sum-exp, equivalent to
        ``scipy.special.logsumexp(..., b=mu)``) so that huge knots never overflow.  ``tau = 1/2``
        is exact for two terms with knots 0 (supplement S.3).

        Parameters
        ----------
        tau : float, default=1.0
            Positive tail-approximation parameter.

        Returns
        -------
        float
            The approximate mode ``alpha``.

        Raises
        ------
        ValueError
            If ``tau`` is not a positive finite number or the slopes with positive multiplicity
            do not all have the same magnitude.

        Examples
        --------
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [2.0, 5.0])
        >>> print(f"{d.approx_mode(tau=0.5):.10f} {d.mode():.10f}")
        0.9162907319 0.9162907319
        """
        tau = float(tau)
        if not (math.isfinite(tau) and tau > 0.0):
            raise ValueError(f"tau must be a positive finite number; got {tau}")
        b, g, m, _ = self._active()
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

    # ------------------------------------------------------------------ normaliser
    def log_normalizer(self) -> float:
        """Log of the normalising constant ``B = integral of exp(-g(z)) dz`` (supplement S.5).

        Following S.5: ``g`` is minimised at ``z* = mode()`` and translated,
        ``g~(d) = g(z* + d) - g(z*)`` (evaluated term by term, so no cancellation even when
        ``g(z*)`` is 1e5 or more), and ``log B = -g(z*) + log(integral of exp(-g~))``.  The
        remaining integral is rescaled by the Laplace width ``s = 1/sqrt(g''(z*))`` (reduced if
        ``g~`` rises much faster than a Gaussian within one width) and computed with a nested
        trapezoid rule after the substitution ``d = s * 3 sinh(t/3)``, falling back to
        ``scipy.integrate.quad`` on the ``d = s tan(u)`` substitution of S.5 when the
        trapezoid rule does not converge quickly (tiny multiplicities with steep slopes, cliffs).
        Terms with identical (slope, knot) are merged first.  Cached.

        Returns
        -------
        float
            ``log B``.

        Examples
        --------
        >>> import numpy as np
        >>> from scipy.special import betaln
        >>> from viboost.distributions import VersatileLogistic
        >>> d = VersatileLogistic([2.0, -2.0], [1.0, 1.0], [0.5, 7.0])
        >>> print(f"{d.log_normalizer():.10f}")
        -1.0758952624
        >>> print(f"{betaln(0.5, 7.0) - np.log(2.0):.10f}")  # closed form of S.1.1
        -1.0758952624
        """
        if self._log_normalizer_cache is None:
            self._log_normalizer_cache = self._compute_log_normalizer()
        return self._log_normalizer_cache

    def _integration_setup(self) -> tuple[_ShiftedKernel, float, float]:
        """Shifted kernel at the mode, constant ``g(z*)`` and the integration scale ``s``."""
        b, g, m = self._compressed()
        const = self._active()[3]
        z_star = self.mode()
        kernel = _ShiftedKernel(b, g, m, z_star)
        g_star = const + kernel.g0
        s = _integration_scale(kernel, b, g)
        return kernel, g_star, s

    def _compute_log_normalizer(self) -> float:
        kernel, g_star, s = self._integration_setup()
        log_integral = _log_integral_trapezoid(kernel, s)
        if log_integral is None:
            log_integral = _log_integral_quad(kernel, s)
        return -g_star + math.log(s) + log_integral

    # ------------------------------------------------------------------ conjugacy
    def condition(
        self,
        y: ArrayLike,
        likelihood: BinaryLogistic,
        weights: ArrayLike | None = None,
    ) -> VersatileLogistic:
        """Posterior after observing labels ``y`` from b-Log likelihoods (section 3).

        If ``z ~ v-Log(beta, gamma, mu)`` and independently ``y_n | z ~ b-Log(z, slope_n, knot_n)``
        then ``z | y ~ v-Log([beta, -y * slope], [gamma, knot], [mu, weights])`` with unit
        weights.  Nonnegative ``weights`` raise each likelihood term to a power (used by the
        variational update with ``phi_n``).

        Parameters
        ----------
        y : array_like
            Labels in {-1, +1}, length ``likelihood.n_obs`` (a scalar is broadcast).
        likelihood : BinaryLogistic
            The per-observation likelihoods.
        weights : array_like, optional
            Nonnegative finite weights, one per observation (default all ones).

        Returns
        -------
        VersatileLogistic
            The posterior, with ``n_terms + likelihood.n_obs`` terms.

        Raises
        ------
        ValueError
            If a label is not -1 or +1, or the weights are invalid or of the wrong length.

        Examples
        --------
        >>> from viboost.distributions import BinaryLogistic, VersatileLogistic
        >>> prior = VersatileLogistic([1.0, -1.0], 0.0, 1.0)
        >>> post = prior.condition([1, 1, -1], BinaryLogistic([1.0, 1.0, 1.0], 0.0))
        >>> post.slopes
        array([ 1., -1., -1., -1.,  1.])
        >>> post.multiplicities
        array([1., 1., 1., 1., 1.])
        """
        if not isinstance(likelihood, BinaryLogistic):
            raise TypeError("likelihood must be a BinaryLogistic instance")
        n_obs = likelihood.n_obs
        y_arr = validate_labels(y, n_obs)
        if weights is None:
            w = np.ones(n_obs)
        else:
            w = np.asarray(weights, dtype=np.float64)
            if w.ndim > 1:
                raise ValueError(f"weights must be a scalar or a 1-D array; got shape {w.shape}")
            try:
                w = np.broadcast_to(w, (n_obs,))
            except ValueError:
                raise ValueError(
                    f"weights has {w.shape[0]} entries but there are {n_obs} observations"
                ) from None
            if not np.all(np.isfinite(w)):
                raise ValueError("weights must contain only finite values")
            if np.any(w < 0):
                raise ValueError("weights must be nonnegative")
        return VersatileLogistic(
            np.concatenate([self._slopes, -y_arr * likelihood.slope]),
            np.concatenate([self._knots, likelihood.knot]),
            np.concatenate([self._multiplicities, w]),
        )

    def __repr__(self) -> str:
        opts = {"threshold": 6, "edgeitems": 2, "separator": ", "}
        return (
            f"VersatileLogistic(slopes={np.array2string(self._slopes, **opts)}, "
            f"knots={np.array2string(self._knots, **opts)}, "
            f"multiplicities={np.array2string(self._multiplicities, **opts)})"
        )


# ---------------------------------------------------------------------- integration helpers
def _integration_scale(kernel: _ShiftedKernel, slopes: NDArray, knots: NDArray) -> float:
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


def _log_integral_trapezoid(kernel: _ShiftedKernel, s: float) -> float | None:
    """``log`` of ``integral exp(-g~(s x)) dx`` by nested trapezoid sums, or None.

    Substituting ``x = lam sinh(t / lam)`` keeps the grid nearly uniform on the unit-width
    peak and geometric in the (at least exponentially decaying, by convexity) tails; the
    integrand is analytic, so the trapezoid rule converges geometrically in the step ``h``.
    The window is truncated where ``g~(s x) >= 34 + log|x|``: by convexity the mass beyond is
    at most ``|x| exp(-g~)/g~ < 6e-17`` (the total is >= ~0.8 since ``g~(+-1) <= 2``).  Steps
    are halved (reusing all previous nodes) until two successive sums agree to ``1e-10``; the
    finer sum is returned.  Returns None if that needs more than ``_TRAP_MAX_EVALS`` kernel
    evaluations (e.g. nearly-kinked kernels with tiny multiplicities).
    """
    lam, h0 = _SINH_LAMBDA, _TRAP_H0

    def log_integrand(t: NDArray[np.float64]) -> tuple[NDArray, NDArray, NDArray]:
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
            if kernel.n_evals > _TRAP_MAX_EVALS or (k_done + n_block) * h0 > 600.0 * lam:
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
    while kernel.n_evals + n_intervals <= _TRAP_MAX_EVALS:
        h *= 0.5
        t_new = t_lo + h * (2.0 * np.arange(n_intervals) + 1.0)
        total += math.fsum(np.exp(log_integrand(t_new)[0]).tolist())
        n_intervals *= 2
        new_estimate = h * total
        if abs(new_estimate - estimate) <= _TRAP_RTOL * new_estimate:
            return math.log(new_estimate)
        estimate = new_estimate
    return None


def _log_integral_quad(kernel: _ShiftedKernel, s: float) -> float:
    """``log`` of ``integral exp(-g~(s x)) dx`` with ``x = tan(u)`` and adaptive quad (S.5)."""

    def integrand(u: float) -> float:
        # exp(-g~(s tan u)) sec^2(u); cos(u) > 0 at quad's interior nodes, and the exponent is
        # formed before exponentiating so that 0 * inf never occurs near u = +-pi/2.
        return math.exp(-kernel.scalar(math.tan(u), s) - 2.0 * math.log(math.cos(u)))

    total = 0.0
    abserr = 0.0
    for lo, hi in ((-0.5 * math.pi, 0.0), (0.0, 0.5 * math.pi)):
        res = quad(
            integrand, lo, hi, epsabs=0.0, epsrel=_QUAD_EPSREL, limit=_QUAD_LIMIT, full_output=1
        )
        total += res[0]
        abserr += res[1]
    if not (total > 0.0 and math.isfinite(total)):
        raise RuntimeError(f"numerical integration of the v-Log kernel failed (got {total})")
    if abserr > 1e-9 * total:
        warnings.warn(
            f"v-Log normaliser: quad error estimate {abserr / total:.1e} (relative) exceeds 1e-9",
            IntegrationWarning,
            stacklevel=3,
        )
    return math.log(total)
