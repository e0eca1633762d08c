"""Tests of the v-Log and b-Log distributions against independent oracles.

Oracles: the closed form of supplement S.1.1 (Beta function), mpmath quadrature at 50 digits
of integrands written here from the definition, scipy quadrature of ``pdf``, and
``scipy.optimize.minimize_scalar`` on ``g``.  For multiplicities over the whole float64 range
(1e-300 to 1e307, sums that overflow) the oracles are mpmath bisection for the mode and mpmath
Gauss-Legendre quadrature in ``u = log|z - mode|`` (tails 1e300 long), at 50 digits beyond the
magnitude of ``g(mode)`` and of ``|mode| / width``.
"""

from __future__ import annotations

import math
import time
import warnings

import mpmath
import numpy as np
import pytest
from mpmath.calculus.quadrature import GaussLegendre
from scipy.integrate import IntegrationWarning, quad
from scipy.optimize import minimize_scalar
from scipy.special import betaln, expit

from viboost._utils.special import log1mexp, log_sum_exp, log_weighted_sum_exp, softplus
from viboost.distributions import BinaryLogistic, VersatileLogistic
from viboost.distributions import _vlog_quadrature as quad_module
from viboost.distributions import versatile_logistic as vlog_module
from viboost.distributions._vlog_kernels import ShiftedKernel

MP_DPS = 50


def _random_valid_params(rng: np.random.Generator, n_terms: int, knot_range: float = 10.0):
    """Random slopes of mixed sign and magnitude, knots, and multiplicities (always valid)."""
    signs = rng.choice([-1.0, 1.0], n_terms)
    signs[0], signs[1] = 1.0, -1.0
    slopes = signs * np.exp(rng.uniform(np.log(0.1), np.log(10.0), n_terms))
    knots = rng.uniform(-knot_range, knot_range, n_terms)
    mults = rng.exponential(1.0, n_terms) + 0.01
    return slopes, knots, mults


def _mp_log_integral(slopes, knots, mults, center: float, width: float, extra_points=()) -> float:
    """log of integral of prod_k (1 + exp(b_k (z - g_k)))^(-mu_k) dz with mpmath (50 digits).

    The integral is split around ``center`` (a point near the mode, ``width`` about the peak
    width; plus ``extra_points``) and truncated where the integrand has fallen below exp(-150)
    times its value at ``center`` (log-concave integrand, so the rest is negligible at 1e-60
    relative).
    """
    with mpmath.workdps(MP_DPS):
        b = [mpmath.mpf(float(v)) for v in slopes]
        g = [mpmath.mpf(float(v)) for v in knots]
        m = [mpmath.mpf(float(v)) for v in mults]

        def neg_log_f(z):
            return mpmath.fsum(
                mk * mpmath.log(1 + mpmath.exp(bk * (z - gk)))
                for bk, gk, mk in zip(b, g, m, strict=True)
            )

        zc = mpmath.mpf(center)
        w = mpmath.mpf(width)
        g_c = neg_log_f(zc)

        def edge(sign: int):
            k = 1
            while neg_log_f(zc + sign * k * w) - g_c < 150:
                k *= 2
            return zc + sign * k * w

        lo, hi = edge(-1), edge(1)
        inner = [zc + k * w for k in (-8, -3, 0, 3, 8)] + [mpmath.mpf(p) for p in extra_points]
        points = [lo] + sorted(p for p in inner if lo < p < hi) + [hi]
        integral, err = mpmath.quad(
            lambda z: mpmath.exp(g_c - neg_log_f(z)), points, error=True, maxdegree=5
        )
        assert err < mpmath.mpf(10) ** -14 * integral, "mpmath oracle did not converge"
        return float(mpmath.log(integral) - g_c)


def _mp_terms(slopes, knots, mults):
    """(slope, knot, multiplicity) as mpf, identical pairs merged (their factors multiply)."""
    merged: dict = {}
    for b, c, m in zip(slopes, knots, mults, strict=True):
        if b != 0.0 and m > 0.0:
            key = (float(b), float(c))
            merged[key] = merged.get(key, mpmath.mpf(0)) + mpmath.mpf(float(m))
    return [(mpmath.mpf(b), mpmath.mpf(c), m) for (b, c), m in merged.items()]


def _mp_g(terms, z):
    return mpmath.fsum(m * mpmath.log1p(mpmath.exp(b * (z - c))) for b, c, m in terms)


def _mp_derivatives(terms, z):
    d1 = mpmath.fsum(m * b / (1 + mpmath.exp(-b * (z - c))) for b, c, m in terms)
    d2 = mpmath.fsum(m * b * b / (2 + 2 * mpmath.cosh(b * (z - c))) for b, c, m in terms)
    return d1, d2


def _mp_mode(terms):
    """Bisection on g' (increasing) to 10**(8 - dps) relative."""
    lo, hi = mpmath.mpf(-1), mpmath.mpf(1)
    while _mp_derivatives(terms, lo)[0] > 0:
        lo *= 2
    while _mp_derivatives(terms, hi)[0] < 0:
        hi *= 2
    tol = mpmath.mpf(10) ** (8 - mpmath.mp.dps)
    while hi - lo > tol * max(1, abs(lo), abs(hi)):
        mid = (lo + hi) / 2
        if _mp_derivatives(terms, mid)[0] < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _mp_log_normalizer_and_mode(slopes, knots, mults, drop: int = 60) -> tuple[float, float]:
    """(log B, mode) for any multiplicities, e.g. 1e-300 next to 1e307 (tails 1e300 long).

    Each side of the mode is integrated in ``u = log|z - mode|`` (integrand
    ``exp(g(mode) - g(mode +- e^u) + u)``) over points stepped so that the log-integrand moves
    by at most 12 (steps up to 16), from where ``e^u`` is negligible to where ``g - g(mode)``
    exceeds ``drop``; each piece by 24-point Gauss-Legendre, checked against the 12-point rule
    and bisected until they agree to 1e-16 of the total.  The working precision is 50 digits
    beyond the magnitude of ``g(mode)`` (cancellation in ``g(mode) - g``) and of
    ``|mode| / width`` (resolution of the peak).
    """
    with mpmath.workdps(MP_DPS + 10):
        terms = _mp_terms(slopes, knots, mults)
        z_star = _mp_mode(terms)
        g_star = _mp_g(terms, z_star)
        # Peak width, at most the distance to the farthest knot (+1): flat tops have g'' ~ 0.
        reach = max(abs(c - z_star) for _, c, _ in terms) + 1
        curv = _mp_derivatives(terms, z_star)[1]
        width = min(reach, 1 / mpmath.sqrt(curv)) if curv > 0 else reach
        extra = mpmath.log10(max(1, abs(g_star))) + mpmath.log10(max(1, abs(z_star) / width))
    with mpmath.workdps(MP_DPS + int(extra) + 5):
        rules = [GaussLegendre(mpmath.mp).calc_nodes(deg, mpmath.mp.prec) for deg in (3, 4)]
        if extra > 10:
            z_star = _mp_mode(terms)
            g_star = _mp_g(terms, z_star)
        total = mpmath.mpf(0)
        for side in (1, -1):

            def log_h(u, side=side):
                return g_star - _mp_g(terms, z_star + side * mpmath.exp(u)) + u

            u = mpmath.log(width) - 40
            while log_h(u) > -drop - 10:
                u -= 40
            points, lu, step = [u], log_h(u), mpmath.mpf(16)
            while lu > -drop or lu - u > -drop:  # stop past the peak, where g - g* > drop
                step = min(mpmath.mpf(16), 4 * step)
                while abs(log_h(u + step) - lu) > 12:
                    step /= 2
                u += step
                lu = log_h(u)
                points.append(u)
            stack = list(zip(points[:-1], points[1:], strict=True))
            while stack:
                a, b = stack.pop()
                top = max(log_h(a), log_h(b))
                half, mid = (b - a) / 2, (a + b) / 2
                coarse, fine = (
                    half * mpmath.fsum(w * mpmath.exp(log_h(mid + half * x) - top) for x, w in rule)
                    for rule in rules
                )
                if abs(fine - coarse) > mpmath.mpf(10) ** -16 * (fine + total * mpmath.exp(-top)):
                    stack += [(a, mid), (mid, b)]
                else:
                    total += fine * mpmath.exp(top)
        return float(mpmath.log(total) - g_star), float(z_star)


def _direct_neg_log_kernel(slopes, knots, mults, z: float) -> float:
    """g(z) straight from the definition, term by term (reference for the vectorised code)."""
    terms = zip(slopes, knots, mults, strict=True)
    return float(sum(m * np.logaddexp(0.0, b * (z - g)) for b, g, m in terms))


def _reference_center_width(slopes, knots, mults, lo: float, hi: float) -> tuple[float, float]:
    """Mode by bounded Brent on the direct g, and the peak width from a finite-difference g''."""

    def g(z):
        return _direct_neg_log_kernel(slopes, knots, mults, z)

    center = minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}).x
    width = 1e-3
    for _ in range(3):
        step = width / 10.0
        curv = (g(center + step) - 2.0 * g(center) + g(center - step)) / step**2
        width = 1.0 / math.sqrt(curv) if curv > 1e-12 else (hi - lo) / 10.0
    return center, width


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("slopes", "knots", "mults", "match"),
    [
        ([1.0, 2.0], [0.0, 1.0], [1.0, 1.0], r"no term has slope < 0"),
        ([-1.0, -2.0], [0.0, 1.0], [1.0, 1.0], r"no term has slope > 0"),
        ([1.0, -1.0], [0.0, 0.0], [1.0, 0.0], r"no term has slope < 0"),
        ([1.0, -1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 2.0, 3.0], r"no term has slope > 0"),
        ([1.0, -1.0], [0.0, 0.0], [1.0, -0.5], r"multiplicities must be nonnegative"),
        ([1.0, np.nan], [0.0, 0.0], [1.0, 1.0], r"slopes must contain only finite"),
        ([1.0, -1.0], [0.0, np.inf], [1.0, 1.0], r"knots must contain only finite"),
        ([1.0, -1.0], [0.0, 0.0], [1.0, np.nan], r"multiplicities must contain only finite"),
        ([1.0, -1.0, 2.0], [0.0, 0.0], [1.0, 1.0, 1.0], r"equal lengths; got 3, 2 and 3"),
        ([[1.0, -1.0]], [0.0, 0.0], [1.0, 1.0], r"1-D"),
    ],
)
def test_invalid_parameters_raise(slopes, knots, mults, match):
    with pytest.raises(ValueError, match=match):
        VersatileLogistic(slopes, knots, mults)


def test_both_sides_missing_message():
    with pytest.raises(ValueError, match=r"slope > 0 .*; no term has slope < 0"):
        VersatileLogistic([0.0, 1.0], [0.0, 0.0], [1.0, 0.0])


def test_attributes_broadcast_and_read_only():
    d = VersatileLogistic([1.0, -1.0, 0.5], 2.0, 1.5)
    assert d.n_terms == 3
    np.testing.assert_array_equal(d.knots, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(d.multiplicities, [1.5, 1.5, 1.5])
    for arr in (d.slopes, d.knots, d.multiplicities):
        assert arr.dtype == np.float64
        with pytest.raises(ValueError):
            arr[0] = 0.0
    assert repr(d).startswith("VersatileLogistic(slopes=[ 1. , -1. ,  0.5]")
    # The stored arrays are copies: mutating the input does not change the distribution.
    src = np.array([1.0, -1.0])
    d2 = VersatileLogistic(src, 0.0, 1.0)
    src[0] = -5.0
    assert d2.slopes[0] == 1.0


# --------------------------------------------------------------------------- kernel
def test_negative_log_kernel_matches_definition_and_chunks():
    rng = np.random.default_rng(0)
    slopes, knots, mults = _random_valid_params(rng, 3000)
    slopes[5], mults[7] = 0.0, 0.0  # a constant term (mu log 2) and an inert term
    d = VersatileLogistic(slopes, knots, mults)
    z = np.linspace(-30.0, 30.0, 701)  # 701 x 3000 > one chunk of 2**20 elements
    got = d.negative_log_kernel(z)
    want = np.array([_direct_neg_log_kernel(slopes, knots, mults, zi) for zi in z[::50]])
    np.testing.assert_allclose(got[::50], want, rtol=1e-13)
    assert isinstance(d.negative_log_kernel(0.5), float)
    assert d.negative_log_kernel(z.reshape(701, 1)).shape == (701, 1)
    np.testing.assert_allclose(d.unnormalized_logpdf(z), -got, rtol=0, atol=0)
    # Stable far in the tails (no overflow): g grows linearly.
    assert np.all(np.isfinite(d.negative_log_kernel([-1e300, 1e6, 1e300])))


def test_constant_terms_are_consistent():
    base = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [2.0, 3.0])
    with_const = VersatileLogistic([1.0, -1.0, 0.0, 4.0], [0.0, 0.0, 7.0, 1.0], [2.0, 3.0, 5.0, 0])
    z = np.array([-3.0, 0.0, 2.5])
    np.testing.assert_allclose(
        with_const.negative_log_kernel(z), base.negative_log_kernel(z) + 5.0 * math.log(2.0)
    )
    assert with_const.log_normalizer() == pytest.approx(
        base.log_normalizer() - 5.0 * math.log(2.0), rel=1e-13
    )
    np.testing.assert_allclose(with_const.logpdf(z), base.logpdf(z), rtol=1e-13)
    assert with_const.mode() == pytest.approx(base.mode(), rel=1e-13)


# --------------------------------------------------------------------------- normaliser
MU_GRID = [1e-3, 0.5, 1.0, 7.0, 1e6]


@pytest.mark.parametrize("gamma", [-500.0, 0.0, 3.0])
@pytest.mark.parametrize("beta", [0.1, 1.0, 30.0])
@pytest.mark.parametrize("mu2", MU_GRID)
@pytest.mark.parametrize("mu1", MU_GRID)
def test_log_normalizer_two_term_closed_form(mu1, mu2, beta, gamma):
    # S.1.1: v-Log(beta [+1, -1], gamma [1, 1], [mu1, mu2]) has B = Beta(mu1, mu2) / beta.
    d = VersatileLogistic([beta, -beta], [gamma, gamma], [mu1, mu2])
    expected = betaln(mu1, mu2) - math.log(beta)
    # (scipy's betaln itself is only good to ~1e-10 relative for e.g. (0.5, 1e6).)
    np.testing.assert_allclose(d.log_normalizer(), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mu2", MU_GRID)
@pytest.mark.parametrize("mu1", MU_GRID)
def test_log_normalizer_two_term_mpmath_beta(mu1, mu2):
    # Same identity with the Beta function at 50 digits, at a tighter tolerance.
    d = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [mu1, mu2])
    with mpmath.workdps(MP_DPS):
        expected = float(mpmath.log(mpmath.beta(mu1, mu2)))
    assert abs(d.log_normalizer() - expected) <= 1e-12 * max(1.0, abs(expected))


def test_log_normalizer_one_million_identical_terms():
    k_half = 500_000
    slopes = np.tile([1.0, -1.0], k_half)
    d = VersatileLogistic(slopes, 0.0, 0.5)
    assert d.n_terms == 10**6
    assert d.negative_log_kernel(d.mode()) > 1e5
    expected = betaln(0.5 * k_half, 0.5 * k_half)  # multiplicities aggregate
    np.testing.assert_allclose(d.log_normalizer(), expected, rtol=1e-9)
    assert d.mode() == pytest.approx(0.0, abs=1e-12)


def test_log_normalizer_one_million_distinct_terms():
    # Knots jittered by ~1e-7 so that no two terms coincide and the full K = 1e6 path runs.
    # The jitters are antisymmetric within each slope group, so the first-order change of
    # log B cancels exactly; the second-order change is ~1e-9 absolute (3e-15 relative).
    rng = np.random.default_rng(1)
    k_quarter = 250_000
    jitter = rng.uniform(0.0, 1e-7, k_quarter)
    slopes = np.repeat([1.0, 1.0, -1.0, -1.0], k_quarter)
    knots = np.concatenate([jitter, -jitter, jitter[::-1] * 0.5, -jitter[::-1] * 0.5])
    d = VersatileLogistic(slopes, knots, 0.5)
    assert np.unique(np.stack([slopes, knots]), axis=1).shape[1] == 10**6  # nothing merged
    assert d.negative_log_kernel(d.mode()) > 1e5
    np.testing.assert_allclose(d.log_normalizer(), betaln(2.5e5, 2.5e5), rtol=1e-9)


def test_log_normalizer_one_million_terms_two_knots_mpmath():
    k_quarter = 250_000
    slopes = np.tile([1.0, -1.0, 1.0, -1.0], k_quarter)
    knots = np.tile([0.0, 0.0, 0.01, 0.01], k_quarter)
    d = VersatileLogistic(slopes, knots, 0.5)
    assert d.negative_log_kernel(d.mode()) > 1e5
    # Identical factors multiply: (1 + e^t)^(-0.5) repeated n times is (1 + e^t)^(-0.5 n).
    m = 0.5 * k_quarter
    expected = _mp_log_integral(
        [1.0, -1.0, 1.0, -1.0], [0.0, 0.0, 0.01, 0.01], [m, m, m, m], center=0.005, width=3e-3
    )
    np.testing.assert_allclose(d.log_normalizer(), expected, rtol=1e-9)


@pytest.mark.parametrize(("seed", "n_terms"), [(2024, 200), (7, 40)])
def test_log_normalizer_many_distinct_terms_mpmath(seed, n_terms):
    rng = np.random.default_rng(seed)
    slopes, knots, mults = _random_valid_params(rng, n_terms, knot_range=50.0)
    d = VersatileLogistic(slopes, knots, mults)
    center, width = _reference_center_width(slopes, knots, mults, -100.0, 100.0)
    expected = _mp_log_integral(slopes, knots, mults, center, width)
    np.testing.assert_allclose(d.log_normalizer(), expected, rtol=1e-9)


@pytest.mark.parametrize(
    ("slopes", "knots", "mults", "bounds"),
    [
        # flat top: g''(mode) underflows to 0
        ([1.0, -1.0], [-1000.0, 1000.0], [1.0, 1.0], (-500.0, 500.0)),
        # a cliff close to the mode (slope 200)
        ([1.0, -1.0, 200.0], [0.0, 0.0, 0.3], [1.0, 1.0, 1.0], (-10.0, 10.0)),
        # tiny multiplicities and steep slopes: heavy tails with a sharp kink
        ([30.0, -30.0, 5.0], [0.0, 0.5, -2.0], [1e-3, 2e-3, 1e-3], (-10.0, 10.0)),
        # huge knots, huge multiplicities: g(mode) ~ 4e5, peak width ~ 2e-3
        ([3.0, -3.0, -1.0], [1e4, 1e4 + 0.5, 1e4 - 2.0], [1e5, 3e5, 2e5], (9990.0, 10010.0)),
    ],
)
def test_log_normalizer_edge_cases_mpmath(slopes, knots, mults, bounds):
    d = VersatileLogistic(slopes, knots, mults)
    center, width = _reference_center_width(slopes, knots, mults, *bounds)
    # Split the oracle's integral at the knots as well (kinks of the integrand).
    extra = [g + k / abs(b) for b, g in zip(slopes, knots, strict=True) for k in (-5.0, 0.0, 5.0)]
    expected = _mp_log_integral(slopes, knots, mults, center, width, extra)
    np.testing.assert_allclose(d.log_normalizer(), expected, rtol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_trapezoid_and_split_paths_agree(seed, monkeypatch):
    # Both integration paths of log_normalizer (nested sinh-trapezoid; closed-form hinge tails
    # plus Gauss-Kronrod middle) on the same density; the trapezoid may run to convergence.
    monkeypatch.setattr(quad_module, "TRAPEZOID_MAX_EVALS", 100_000)
    rng = np.random.default_rng(100 + seed)
    slopes, knots, mults = _random_valid_params(rng, 30, knot_range=5.0)
    mults *= 10.0 ** rng.uniform(-2, 2)
    d = VersatileLogistic(slopes, knots, mults)
    # The fast path as log_normalizer sets it up (distinct terms, no constant ones, ordinary
    # multiplicities): the kernel shifted to the mode, g(z*) = kernel.g0, the scale s.
    kernel = ShiftedKernel(d.slopes, d.knots, d.multiplicities, d.mode())
    s = quad_module.integration_scale(kernel, d.slopes, d.knots)
    trapezoid = quad_module.log_integral_trapezoid(kernel, s)
    assert trapezoid is not None
    fast = -kernel.g0 + math.log(s) + trapezoid
    # With no kernel evaluation allowed to the trapezoid, log_normalizer takes the split path.
    monkeypatch.setattr(quad_module, "TRAPEZOID_MAX_EVALS", -1)
    split = VersatileLogistic(slopes, knots, mults).log_normalizer()
    assert fast == pytest.approx(split, rel=1e-11, abs=1e-11)


@pytest.mark.parametrize(
    ("slopes", "knots", "mults"),
    [
        ([1.0, -1.0], [0.0, 0.0], [1.0, 1.0]),
        ([2.0, -0.5, 1.0, -3.0], [0.0, 1.0, -2.0, 4.0], [1.0, 2.0, 0.3, 0.7]),
        ([0.3, -0.3], [5.0, 5.0], [0.5, 4.0]),
        ([10.0, -1.0, -2.0], [1.0, -3.0, 0.0], [3.0, 1.0, 0.2]),
    ],
)
def test_pdf_integrates_to_one(slopes, knots, mults):
    d = VersatileLogistic(slopes, knots, mults)
    m = d.mode()
    total = sum(
        quad(d.pdf, lo, hi, epsabs=0.0, epsrel=1e-12, limit=500)[0]
        for lo, hi in ((-np.inf, m), (m, np.inf))
    )
    assert total == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(np.log(d.pdf(np.array([m, m + 1.0]))), d.logpdf([m, m + 1.0]))


def test_log_normalizer_is_cached(monkeypatch):
    d = VersatileLogistic([1.0, -1.0], 0.0, [2.0, 3.0])
    first = d.log_normalizer()
    assert d.log_normalizer() is first or d.log_normalizer() == first

    def recompute(*args, **kwargs):
        raise AssertionError("log_normalizer recomputed instead of cached")

    # Both integration paths call these; a cached value needs neither.
    monkeypatch.setattr(vlog_module, "log_integral_trapezoid", recompute)
    monkeypatch.setattr(vlog_module, "hinge_tail_log_integral", recompute)
    assert d.log_normalizer() == first


# --------------------------------------------------------------------------- extreme multiplicities
def _separable_posterior(mu0: float, weight: float, n_data: int = 40):
    """Weight posterior of the boosting loop on separable data with sample weights ``weight``:
    two prior terms (multiplicity mu0, slopes +-1, knots 0) and n data terms of slope -1."""
    slopes = np.r_[1.0, -1.0, -np.ones(n_data)]
    knots = np.r_[0.0, 0.0, np.full(n_data, -700.0)]
    mults = np.r_[mu0, mu0, np.full(n_data, weight)]
    return slopes, knots, mults


def _random_extreme_params(seed: int, knot_range: float):
    """Mixed slopes in +-[0.2, 5], multiplicities log-uniform in [1e-300, 1e300]."""
    rng = np.random.default_rng(seed)
    n_terms = int(rng.integers(2, 7))
    signs = rng.choice([-1.0, 1.0], n_terms)
    signs[:2] = [1.0, -1.0]
    slopes = signs * np.exp(rng.uniform(np.log(0.2), np.log(5.0), n_terms))
    knots = rng.uniform(-knot_range, knot_range, n_terms)
    mults = 10.0 ** rng.uniform(-300.0, 300.0, n_terms)
    return slopes, knots, mults


def _log_normalizer_and_mode_strict(slopes, knots, mults) -> tuple[float, float]:
    """log_normalizer() and mode() of a fresh instance, with every warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = VersatileLogistic(slopes, knots, mults)
        log_b, mode = d.log_normalizer(), d.mode()
    assert math.isfinite(log_b) and math.isfinite(mode)
    return log_b, mode


@pytest.mark.parametrize(
    ("params", "expected_log_b"),
    [
        # The four separable-data cases (tails exp(-mu0 (z - 0)) of length 1/mu0).
        (_separable_posterior(1e-6, 1e300), 13.8155155163),
        (_separable_posterior(1e-300, 1e30), 690.7755278982),  # ~ log(1 / mu0)
        (_separable_posterior(1.0, 1e307), -10.5825537123),  # 40 x 1e307 overflows float64
        (_separable_posterior(1e-12, 1e300), 27.6310211159),
        # Random extreme-range cases: log B near 1, ~1e2, and knots ~1e6 with a flat top whose
        # walls (cliffs) are ~7.6e5 apart, not on any panel edge.
        (_random_extreme_params(13, 10.0), 1.2806233305),
        (_random_extreme_params(8, 10.0), 106.7518606656),
        (_random_extreme_params(1003, 1e6), 13.5469627293),
        (_random_extreme_params(1004, 1e6), 7.8192313678),
    ],
)
def test_extreme_multiplicities_match_mpmath(params, expected_log_b):
    slopes, knots, mults = params
    log_b, mode = _log_normalizer_and_mode_strict(slopes, knots, mults)
    want_log_b, want_mode = _mp_log_normalizer_and_mode(slopes, knots, mults)
    assert want_log_b == pytest.approx(expected_log_b, rel=1e-10)  # the oracle itself
    assert abs(log_b - want_log_b) <= 1e-11 * max(1.0, abs(want_log_b))
    assert abs(mode - want_mode) <= 1e-11 * max(1.0, abs(want_mode))


EXTREME_PAIRS = [
    (1e-300, 1e300),
    (1e300, 1e-300),
    (1e-300, 1e-300),
    (1e307, 1e307),
    (1e-300, 1e307),
    (1e-300, 1.0),
    (1e-6, 1e300),
    (0.5, 1e307),
]


@pytest.mark.parametrize("gamma", [0.0, -1e6])
@pytest.mark.parametrize("beta", [1.0, 3.5])
@pytest.mark.parametrize(("mu1", "mu2"), EXTREME_PAIRS)
def test_two_term_closed_form_extreme(mu1, mu2, beta, gamma):
    # S.1.1: B = Beta(mu1, mu2) / beta, mode = gamma + log(mu2 / mu1) / beta.  Oracle from
    # mpmath loggamma at 340 digits (loggamma(1e307) ~ 7e309 must keep ~30 digits after the
    # point; rounding 1e300 + 1e-300 changes the result by ~1e-297); scipy's betaln is
    # inaccurate at such ratios.
    slopes, knots, mults = [beta, -beta], [gamma, gamma], [mu1, mu2]
    log_b, mode = _log_normalizer_and_mode_strict(slopes, knots, mults)
    with mpmath.workdps(340):
        a, b = mpmath.mpf(mu1), mpmath.mpf(mu2)
        want_log_b = mpmath.loggamma(a) + mpmath.loggamma(b) - mpmath.loggamma(a + b)
        want_log_b = float(want_log_b - mpmath.log(beta))
        want_mode = float(gamma + mpmath.log(b / a) / beta)
    assert abs(log_b - want_log_b) <= 1e-12 * max(1.0, abs(want_log_b))
    assert abs(mode - want_mode) <= 1e-12 * max(1.0, abs(want_mode))


def test_extreme_weights_in_a_boosting_sized_posterior():
    # K = 2000 terms, slopes +-1, knots within +-5, data multiplicities 1e300 (sum 1e303) or
    # 1e-300 with a unit prior: finite, warning-free, quick, and consistent.
    rng = np.random.default_rng(21)
    n_data = 2000
    slopes = np.r_[1.0, -1.0, rng.choice([-1.0, 1.0], n_data)]
    knots = np.r_[0.0, 0.0, rng.uniform(-5.0, 5.0, n_data)]
    shape = rng.uniform(0.2, 1.0, n_data)
    start = time.perf_counter()
    huge = _log_normalizer_and_mode_strict(slopes, knots, np.r_[1.0, 1.0, 1e300 * shape])
    tiny = _log_normalizer_and_mode_strict(slopes, knots, np.r_[1.0, 1.0, 1e-300 * shape])
    assert time.perf_counter() - start < 2.0
    # Huge weights: log B = -g(mode) + O(log width) with |log B| ~ 1e303.
    log_b, mode = huge
    g_mode = math.fsum(
        m * float(np.logaddexp(0.0, b * (mode - c)))
        for b, c, m in zip(slopes, knots, np.r_[1.0, 1.0, 1e300 * shape], strict=True)
    )
    assert log_b == pytest.approx(-g_mode, rel=1e-12)
    # Negligible data: the prior v-Log([1, -1], 0, [1, 1]) alone, B = Beta(1, 1) = 1, mode 0.
    assert abs(tiny[0]) <= 1e-12 and abs(tiny[1]) <= 1e-12


def test_extreme_multiplicities_kernel_and_approx_mode():
    slopes, knots, mults = _separable_posterior(1e-300, 1e307)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = VersatileLogistic(slopes, knots, mults)
        # g overflows float64 far left (4e308 (z + 700)) and is ~1e-300 z far right.
        values = d.negative_log_kernel([-800.0, 0.0, 1e4])
        assert values[0] == np.inf
        assert values[2] == pytest.approx(1e-300 * 1e4, rel=1e-12)
        assert math.isfinite(d.logpdf(d.mode()))
        with mpmath.workdps(60):  # tau = 1: (1/2) log((1e-300 + 4e308 e^-700) / 1e-300)
            num = mpmath.mpf(1e-300) + 40 * mpmath.mpf(1e307) * mpmath.exp(-700)
            want = float(mpmath.log(num / mpmath.mpf(1e-300)) / 2)
        assert d.approx_mode() == pytest.approx(want, rel=1e-13)


def test_ordinary_case_uses_the_fast_path(monkeypatch):
    # Boosting-like posterior: the trapezoid path must serve it (speed); the split path not.
    def forbidden(*args, **kwargs):
        raise AssertionError("split path used for an ordinary posterior")

    monkeypatch.setattr(vlog_module, "hinge_tail_log_integral", forbidden)  # split path only
    rng = np.random.default_rng(4)
    slopes = np.r_[1.0, -1.0, rng.choice([-1.0, 1.0], 500)]
    d = VersatileLogistic(slopes, rng.uniform(-5.0, 5.0, 502), rng.uniform(0.2, 1.0, 502))
    assert math.isfinite(d.log_normalizer())


def test_quadrature_warns_when_it_cannot_converge(monkeypatch):
    monkeypatch.setattr(quad_module, "GAUSS_KRONROD_MAX_ROUNDS", 1)
    d = VersatileLogistic(*_random_extreme_params(1003, 1e6))  # cliffs need many rounds
    with pytest.warns(IntegrationWarning, match="did not reach"):
        assert math.isfinite(d.log_normalizer())


# --------------------------------------------------------------------------- mode
@pytest.mark.parametrize("seed", range(8))
def test_mode_matches_minimize_scalar(seed):
    rng = np.random.default_rng(seed)
    n_terms = int(rng.integers(2, 60))
    slopes, knots, mults = _random_valid_params(rng, n_terms)
    if seed % 2:  # strongly unbalanced multiplicities: mode outside the knots' range
        mults[slopes > 0] *= 1e3
    d = VersatileLogistic(slopes, knots, mults)

    def g(z):
        return _direct_neg_log_kernel(slopes, knots, mults, z)

    ref = minimize_scalar(g, bounds=(-200.0, 200.0), method="bounded", options={"xatol": 1e-10})
    mode = d.mode()
    assert mode == pytest.approx(ref.x, abs=1e-6 * (1.0 + abs(ref.x)))
    assert g(mode) <= g(ref.x) + 1e-12 * abs(g(ref.x))
    # g' changes sign around the mode at the 1e-9 scale.
    assert g(mode) <= g(mode + 1e-6) and g(mode) <= g(mode - 1e-6)


def test_mode_when_start_point_is_far_in_a_saturated_region():
    # Regression: the weighted-mean start lies where every term is saturated, so g'' ~ 1e-99
    # there; Newton must not stop on the (huge) g'-noise / g'' step size.
    slopes = [7.9648, -4.1254, -0.53077, -29.463, 3.3771, 17.422, -0.23291]
    knots = [17.006, -118.27, 193.21, -99.996, -94.680, -166.21, -94.316]
    mults = [76.781, 0.0079563, 0.43020, 0.88399, 45.174, 1.5542, 12.753]
    d = VersatileLogistic(slopes, knots, mults)

    def g(z):
        return _direct_neg_log_kernel(slopes, knots, mults, z)

    ref = minimize_scalar(g, bounds=(-300.0, 300.0), method="bounded", options={"xatol": 1e-10})
    assert d.mode() == pytest.approx(ref.x, abs=1e-6 * (1.0 + abs(ref.x)))
    assert g(d.mode()) <= g(ref.x) + 1e-12 * abs(g(ref.x))


@pytest.mark.parametrize(("mu1", "mu2"), [(1.0, 1.0), (1.0, 3.0), (1e-3, 1e6), (7.0, 0.5)])
def test_two_term_mode_is_log_ratio(mu1, mu2):
    d = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [mu1, mu2])
    assert d.mode() == pytest.approx(math.log(mu2 / mu1), rel=1e-12, abs=1e-12)


def test_mode_with_huge_knots_and_narrow_peak():
    d = VersatileLogistic([2.0, -2.0], [1e4, 1e4], [1e6, 1e6])
    assert d.mode() == pytest.approx(1e4, rel=1e-14)
    d = VersatileLogistic([1.0, -1.0], [-1000.0, 1000.0], [1.0, 1.0])  # flat top
    assert abs(d.mode()) < 1000.0


# --------------------------------------------------------------------------- approx_mode
@pytest.mark.parametrize(("w1", "w2"), [(1.0, 1.0), (2.0, 5.0), (1e-3, 40.0), (1e5, 3.0)])
def test_approx_mode_tau_half_is_exact_for_two_terms(w1, w2):
    d = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [w1, w2])
    assert d.approx_mode(tau=0.5) == pytest.approx(math.log(w2 / w1), rel=1e-13, abs=1e-13)
    assert d.approx_mode(tau=0.5) == pytest.approx(d.mode(), rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("tau", [0.5, 1.0, 3.0])
def test_approx_mode_huge_knots_matches_mpmath(tau):
    rng = np.random.default_rng(3)
    n_terms = 50
    beta = 2.0
    slopes = beta * rng.choice([-1.0, 1.0], n_terms)
    slopes[:2] = [beta, -beta]
    knots = rng.uniform(-1e4, 1e4, n_terms)
    mults = rng.uniform(0.1, 3.0, n_terms)
    mults[5] = 0.0  # ignored
    d = VersatileLogistic(slopes, knots, mults)
    alpha = d.approx_mode(tau=tau)
    assert math.isfinite(alpha)
    with mpmath.workdps(MP_DPS):
        tb = mpmath.mpf(tau) * beta
        num = mpmath.fsum(
            mpmath.mpf(m) * mpmath.exp(tb * mpmath.mpf(g))
            for b, g, m in zip(slopes, knots, mults, strict=True)
            if b < 0
        )
        den = mpmath.fsum(
            mpmath.mpf(m) * mpmath.exp(-tb * mpmath.mpf(g))
            for b, g, m in zip(slopes, knots, mults, strict=True)
            if b > 0
        )
        expected = float(mpmath.log(num / den) / (2 * tb))
    assert alpha == pytest.approx(expected, rel=1e-13, abs=1e-9)


def test_approx_mode_errors():
    d = VersatileLogistic([1.0, -2.0], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="same magnitude"):
        d.approx_mode()
    d = VersatileLogistic([1.0, -1.0, 5.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0])  # mu=0: ignored
    assert d.approx_mode(0.5) == pytest.approx(0.0, abs=1e-15)
    for tau in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="tau must be"):
            d.approx_mode(tau)


def test_log_weighted_sum_exp_matches_definition():
    values = np.array([1e4, 1e4 - 1.0, -1e4])
    weights = np.array([1.0, 2.0, 3.0])
    with mpmath.workdps(MP_DPS):
        expected = float(
            mpmath.log(mpmath.fsum(w * mpmath.exp(v) for v, w in zip(values, weights, strict=True)))
        )
    assert log_weighted_sum_exp(values, weights) == pytest.approx(expected, rel=1e-15)
    # Weights over the whole float range: 1e307 * 40 overflows, 1e-300 * e^1400 does not.
    values = np.array([1400.0, 0.0, 0.0, -5.0])
    weights = np.array([1e-300, 1e307, 1e307, 0.0])
    with mpmath.workdps(MP_DPS):
        expected = float(mpmath.log(mpmath.mpf(1e-300) * mpmath.exp(1400) + 2 * mpmath.mpf(1e307)))
    assert log_weighted_sum_exp(values, weights) == pytest.approx(expected, rel=1e-15)


def test_log_sum_exp_and_log1mexp():
    assert log_sum_exp([1000.0, 1000.0, -np.inf]) == pytest.approx(1000.0 + math.log(2.0))
    assert log_sum_exp([-np.inf, -np.inf]) == -np.inf
    x = np.array([1e-20, 0.1, math.log(2.0), 1.0, 50.0, np.inf])
    with mpmath.workdps(MP_DPS):
        want = [float(mpmath.log(1 - mpmath.exp(-mpmath.mpf(v)))) for v in x[:-1]] + [0.0]
    np.testing.assert_allclose(log1mexp(x), want, rtol=1e-15)
    assert isinstance(log1mexp(0.5), float)


# --------------------------------------------------------------------------- conjugacy
def _conjugacy_setup(seed: int = 11):
    rng = np.random.default_rng(seed)
    prior = VersatileLogistic(*_random_valid_params(rng, 4, knot_range=2.0))
    n_obs = 6
    lik = BinaryLogistic(rng.normal(0.0, 1.5, n_obs), rng.normal(0.0, 2.0, n_obs))
    y = rng.choice([-1, 1], n_obs)
    weights = rng.uniform(0.0, 2.0, n_obs)
    return prior, lik, y, weights


@pytest.mark.parametrize("use_weights", [False, True])
def test_condition_is_conjugate(use_weights):
    prior, lik, y, weights = _conjugacy_setup()
    w = weights if use_weights else np.ones(lik.n_obs)
    post = prior.condition(y, lik, weights=weights if use_weights else None)
    assert post.n_terms == prior.n_terms + lik.n_obs
    np.testing.assert_array_equal(post.slopes[prior.n_terms :], -y * lik.slope)
    np.testing.assert_array_equal(post.knots[prior.n_terms :], lik.knot)
    np.testing.assert_array_equal(post.multiplicities[prior.n_terms :], w)

    zs = np.array([-8.0, -2.5, 0.0, 1.0, 3.7, 12.0])
    diff = [
        post.unnormalized_logpdf(z) - prior.unnormalized_logpdf(z) - w @ lik.logpmf(y, z)
        for z in zs
    ]
    assert np.ptp(diff) < 1e-12

    # Posterior normaliser = integral of prior pdf times the (weighted) likelihood.
    def integrand(z):
        return prior.pdf(z) * math.exp(w @ lik.logpmf(y, z))

    m = post.mode()
    evidence = sum(
        quad(integrand, lo, hi, epsabs=0.0, epsrel=1e-12, limit=500)[0]
        for lo, hi in ((-np.inf, m), (m, np.inf))
    )
    assert post.log_normalizer() - prior.log_normalizer() == pytest.approx(
        math.log(evidence), rel=1e-9, abs=1e-10
    )


def test_condition_validates_inputs():
    prior, lik, y, weights = _conjugacy_setup()
    bad_y = y.astype(float)
    bad_y[0] = 0.0
    with pytest.raises(ValueError, match=r"-1 or \+1"):
        prior.condition(bad_y, lik)
    with pytest.raises(ValueError, match="observations"):
        prior.condition(y[:3], lik)
    bad_w = weights.copy()
    bad_w[1] = -0.1
    with pytest.raises(ValueError, match="nonnegative"):
        prior.condition(y, lik, weights=bad_w)
    with pytest.raises(ValueError, match="finite"):
        prior.condition(y, lik, weights=np.full(lik.n_obs, np.nan))
    with pytest.raises(TypeError):
        prior.condition(y, "not a likelihood")


# --------------------------------------------------------------------------- b-Log
def test_binary_logistic_pmf_sums_to_one_and_matches_definition():
    rng = np.random.default_rng(5)
    lik = BinaryLogistic(rng.normal(0.0, 3.0, 20), rng.normal(0.0, 3.0, 20))
    for z in (-4.0, 0.0, 0.3, 9.0):
        total = lik.pmf(np.ones(20), z) + lik.pmf(-np.ones(20), z)
        np.testing.assert_allclose(total, 1.0, rtol=1e-15)
        want = 1.0 / (1.0 + np.exp(-lik.slope * (z - lik.knot)))
        np.testing.assert_allclose(lik.pmf(1, z), want, rtol=1e-14)
        want_log_minus = -np.log1p(np.exp(lik.slope * (z - lik.knot)))
        np.testing.assert_allclose(lik.logpmf(-1, z), want_log_minus, rtol=1e-14)


def test_binary_logistic_logpmf_stable_for_large_margins():
    lik = BinaryLogistic([1.0, -1.0, 2.0], [0.0, 0.0, 0.0])
    for z in (1e4, -1e4):
        for label in (1, -1):
            out = lik.logpmf(label, z)
            assert np.all(np.isfinite(out))
            np.testing.assert_allclose(out, -softplus(-label * lik.slope * z), rtol=1e-15)
    assert lik.logpmf(-1, 1e4)[0] == -1e4


def test_binary_logistic_validation():
    with pytest.raises(ValueError, match="finite"):
        BinaryLogistic([1.0, np.nan], 0.0)
    with pytest.raises(ValueError, match="equal lengths"):
        BinaryLogistic([1.0, 2.0], [0.0, 1.0, 2.0])
    lik = BinaryLogistic(2.0, [0.0, 1.0])
    assert lik.n_obs == 2
    np.testing.assert_array_equal(lik.slope, [2.0, 2.0])
    with pytest.raises(ValueError):
        lik.slope[0] = 1.0
    with pytest.raises(ValueError, match=r"-1 or \+1"):
        lik.logpmf([1, 2], 0.0)
    assert repr(lik) == "BinaryLogistic(slope=[2., 2.], knot=[0., 1.])"


def test_binary_logistic_rvs_frequencies():
    n_per_group = 20_000
    slopes = np.repeat([1.0, -2.0, 0.5], n_per_group)
    knots = np.repeat([0.0, 0.3, -4.0], n_per_group)
    lik = BinaryLogistic(slopes, knots)
    z = 0.7
    draws = lik.rvs(z, random_state=123)
    assert draws.shape == (3 * n_per_group,)
    assert set(np.unique(draws)) <= {-1, 1}
    np.testing.assert_array_equal(draws, lik.rvs(z, random_state=123))
    for grp in range(3):
        sl = slice(grp * n_per_group, (grp + 1) * n_per_group)
        p = float(expit(slopes[sl][0] * (z - knots[sl][0])))
        freq = np.mean(draws[sl] == 1)
        assert abs(freq - p) <= 5.0 * math.sqrt(p * (1 - p) / n_per_group)
