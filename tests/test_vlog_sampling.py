"""Adaptive rejection sampling, fast cdf/ppf and the S.3 closed forms of VersatileLogistic."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad
from scipy.special import digamma, expit

from viboost.distributions import VersatileLogistic


def _many_term(n_terms: int, spread: float, seed: int) -> VersatileLogistic:
    rng = np.random.default_rng(seed)
    slopes = rng.choice([-1.0, 1.0], n_terms) * rng.uniform(0.5, 2.0, n_terms)
    knots = rng.uniform(-spread, spread, n_terms)
    return VersatileLogistic(slopes, knots, rng.uniform(0.2, 3.0, n_terms))


CASES = {
    "two-terms": ([1.0, -1.0], 0.0, [1.0, 1.0]),
    "asymmetric": ([1.0, -1.0], 0.0, [0.3, 40.0]),
    "mixed-slopes": ([50.0, -0.02, 1.0, -3.0], [0.0, 1.0, -2.0, 3.0], [1.0, 2.0, 0.7, 1.5]),
    "small-mult": ([1.0, -1.0], [0.0, 2.0], [1e-3, 2e-3]),
    "huge-mult-tiny-slopes": ([1e-100, -1e-100], 0.0, [1e200, 1e200]),
    "huge-mult-narrow": ([1.0, -1.0, 2.0, -2.0], 0.0, [1e200, 1e200, 3e199, 3e199]),
    "huge-and-small": ([1e-100, -1e-100, 1.0], [0.0, 0.0, 5.0], [1e200, 1e200, 1e-3]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rvs_kolmogorov_smirnov(name):
    d = VersatileLogistic(*CASES[name])
    x = d.rvs(size=2000, random_state=20240)
    assert x.shape == (2000,)
    assert np.all(np.isfinite(x))
    assert stats.kstest(x, d.cdf).pvalue > 1e-3


def test_rvs_kolmogorov_smirnov_many_terms():
    d = _many_term(100, 10.0, 5)
    x = d.rvs(size=3000, random_state=5)
    assert stats.kstest(x, d.cdf).pvalue > 1e-3


def test_rvs_and_cdf_ten_thousand_terms_fast():
    d = _many_term(10_000, 50.0, 13)
    start = time.perf_counter()
    x = d.rvs(size=2000, random_state=13)
    p = stats.kstest(x, d.cdf).pvalue
    elapsed = time.perf_counter() - start
    assert p > 1e-3
    assert elapsed < 10.0  # a couple of seconds on one core; generous for loaded machines


def test_rvs_huge_multiplicities_off_zero():
    # Peak width ~1e-100 at z* = log 2: narrower than the float spacing, draws round to z*.
    d = VersatileLogistic([1.0, -1.0], 0.0, [1e200, 2e200])
    x = d.rvs(size=500, random_state=0)
    assert np.all(np.abs(x - d.mode()) <= 4.0 * np.spacing(d.mode()))
    assert np.all(np.abs(x - math.log(2.0)) <= 1e-14)


def test_rvs_reproducible_and_shapes():
    d = VersatileLogistic([1.0, -2.0, 0.5, -1.0], [0.0, 1.0, -2.0, 3.0], [1.0, 2.0, 0.7, 1.5])
    np.testing.assert_array_equal(d.rvs(7, random_state=3), d.rvs(7, random_state=3))
    fresh = VersatileLogistic(d.slopes, d.knots, d.multiplicities)
    np.testing.assert_array_equal(d.rvs(7, random_state=3), fresh.rvs(7, random_state=3))
    a = d.rvs(5, random_state=np.random.default_rng(9))
    np.testing.assert_array_equal(a, d.rvs(5, random_state=np.random.default_rng(9)))
    b = d.rvs(5, random_state=np.random.RandomState(9))
    np.testing.assert_array_equal(b, d.rvs(5, random_state=np.random.RandomState(9)))
    assert isinstance(d.rvs(random_state=1), float)
    assert d.rvs(size=(2, 3), random_state=1).shape == (2, 3)
    assert d.rvs(size=0, random_state=1).shape == (0,)
    assert not np.array_equal(d.rvs(5, random_state=1), d.rvs(5, random_state=2))


def test_ppf_vectorised_roundtrip_and_tails():
    d = _many_term(300, 20.0, 2)
    p = np.concatenate([[1e-200, 1e-12], np.linspace(0.01, 0.99, 99), [1.0 - 1e-12]])
    z = d.ppf(p)
    assert np.all(np.diff(z) > 0.0)
    np.testing.assert_allclose(d.cdf(z[:-1]), p[:-1], rtol=1e-9)
    np.testing.assert_allclose(d.sf(z[-1]), 1.0 - p[-1], rtol=1e-9)  # 1 - p is exact
    # Type IV logistic with mu = [1, 2]: cdf = expit(z)**2, so ppf(q) = logit(sqrt(q)).
    t = VersatileLogistic([1.0, -1.0], 0.0, [1.0, 2.0])
    q = np.array([1e-30, 0.2, 0.7])
    np.testing.assert_allclose(expit(t.ppf(q)) ** 2, q, rtol=1e-10)


def _softplus_by_quad(d: VersatileLogistic, sign: float, shift: float = 0.0) -> float:
    z0 = d.mode()
    width = 1.0 / math.sqrt(d._derivatives(z0)[1])
    log_b = d.log_normalizer()

    def f(z: float) -> float:
        return math.exp(-d.negative_log_kernel(z) - log_b)

    def sp(z: float) -> float:
        return np.logaddexp(0.0, sign * (z - shift)) * f(z)

    # Split at the mode and integrate each half out to infinity.
    pieces = [
        quad(sp, -np.inf, z0 - width, epsabs=0.0, epsrel=1e-12, limit=400)[0],
        quad(sp, z0 - width, z0 + width, epsabs=0.0, epsrel=1e-12, limit=400)[0],
        quad(sp, z0 + width, np.inf, epsabs=0.0, epsrel=1e-12, limit=400)[0],
    ]
    return math.fsum(pieces)


@pytest.mark.parametrize(
    ("a", "b"), [(0.1, 0.1), (0.1, 5.0), (2.0, 5.0), (500.0, 0.1), (500.0, 500.0)]
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_expected_softplus_closed_form(a, b, sign):
    d = VersatileLogistic([1.0, -1.0], 0.0, [a, b])
    ref = _softplus_by_quad(d, sign)
    closed = digamma(a + b) - (digamma(a) if sign > 0 else digamma(b))
    assert ref == pytest.approx(closed, rel=1e-8)
    assert d.expected_softplus(sign) == pytest.approx(closed, rel=1e-12)
    # Either order of the terms, and a common knot with the matching shift.
    flipped = VersatileLogistic([-1.0, 1.0], [2.5, 2.5], [b, a])
    assert flipped.expected_softplus(sign, shift=2.5) == pytest.approx(closed, rel=1e-12)


def test_expected_softplus_closed_form_no_cancellation():
    d = VersatileLogistic([1.0, -1.0], 0.0, [1e200, 1.0])
    assert d.expected_softplus(1.0) == pytest.approx(1e-200, rel=1e-12)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_expected_softplus_quadrature_path(sign):
    d = _many_term(40, 6.0, 8)
    ref = _softplus_by_quad(d, sign, shift=0.7)
    assert d.expected_softplus(sign, shift=0.7) == pytest.approx(ref, rel=1e-9)
    # Two terms with a shift other than the knot also take the quadrature path.
    t = VersatileLogistic([1.0, -1.0], 0.0, [2.0, 3.0])
    assert t.expected_softplus(sign, shift=1.5) == pytest.approx(
        _softplus_by_quad(t, sign, shift=1.5), rel=1e-9
    )


def test_expected_softplus_validates():
    d = VersatileLogistic([1.0, -1.0], 0.0, 1.0)
    with pytest.raises(ValueError):
        d.expected_softplus(2.0)
    with pytest.raises(ValueError):
        d.expected_softplus(1.0, shift=math.inf)
