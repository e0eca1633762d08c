"""Moments, cdf/ppf and the exact sampler of VersatileLogistic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad
from scipy.special import betaln, digamma, expit, polygamma

from viboost.distributions import VersatileLogistic


def _curvature(d: VersatileLogistic, z: float) -> float:
    """``g''(z) = sum_k mu_k beta_k**2 expit(t_k) expit(-t_k)``, ``t_k = beta_k (z - gamma_k)``."""
    t = d.slopes * (z - d.knots)
    return float(np.sum(d.multiplicities * d.slopes**2 * expit(t) * expit(-t)))


def _quad_moments(d: VersatileLogistic) -> tuple[float, float, float]:
    """Mean, variance and entropy by scipy.integrate.quad, as an independent reference."""
    z0 = d.mode()
    width = 1.0 / math.sqrt(_curvature(d, z0))
    lo, hi = z0 - 80.0 * width, z0 + 80.0 * width
    pts = [z0 + k * width for k in (-4, -1, 0, 1, 4)]

    def integral(fun):
        # An absolute tolerance too: the first moment of a symmetric density integrates to 0,
        # where a purely relative tolerance is unreachable (quad's roundoff warning).
        return quad(fun, lo, hi, points=pts, limit=400, epsabs=1e-13, epsrel=1e-11)[0]

    mass = integral(d.pdf)
    mean = integral(lambda z: z * d.pdf(z)) / mass
    var = integral(lambda z: (z - mean) ** 2 * d.pdf(z)) / mass
    ent = integral(lambda z: -d.pdf(z) * d.logpdf(z)) / mass
    return mean, var, ent


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (2.0, 5.0), (0.3, 7.0), (40.0, 0.5)])
def test_two_term_closed_forms(a, b):
    # v-Log([1, -1], [0, 0], [a, b]) has density e^{b z} / (1 + e^z)^{a + b} / B(a, b): the
    # type IV logistic (logit of a Beta(b, a) variable), mode log(b / a).
    d = VersatileLogistic([1.0, -1.0], 0.0, [a, b])
    assert d.log_normalizer() == pytest.approx(betaln(a, b), rel=1e-10, abs=1e-12)
    ref_mean, ref_var, ref_ent = _quad_moments(d)
    # Sign check against quadrature before relying on the closed forms.
    assert ref_mean == pytest.approx(digamma(b) - digamma(a), rel=1e-8, abs=1e-9)
    assert d.mean() == pytest.approx(digamma(b) - digamma(a), rel=1e-10, abs=1e-12)
    assert d.var() == pytest.approx(polygamma(1, a) + polygamma(1, b), rel=1e-10)
    assert ref_var == pytest.approx(d.var(), rel=1e-8)
    # Entropy of the logit of Beta(b, a): log B + (a + b) psi(a + b) - a psi(a) - b psi(b).
    ent = betaln(a, b) + (a + b) * digamma(a + b) - a * digamma(a) - b * digamma(b)
    assert d.entropy() == pytest.approx(ent, rel=1e-10, abs=1e-12)
    assert ref_ent == pytest.approx(ent, rel=1e-8, abs=1e-9)


def test_standard_logistic():
    d = VersatileLogistic([1.0, -1.0], 0.0, 1.0)
    assert d.mean() == pytest.approx(0.0, abs=1e-12)
    assert d.var() == pytest.approx(math.pi**2 / 3.0, rel=1e-12)
    assert d.entropy() == pytest.approx(2.0, rel=1e-12)
    z = np.array([-30.0, -3.0, 0.0, 0.5, 3.0, 30.0])
    np.testing.assert_allclose(d.cdf(z), 1.0 / (1.0 + np.exp(-z)), rtol=1e-11)
    np.testing.assert_allclose(d.sf(z), 1.0 / (1.0 + np.exp(z)), rtol=1e-11)
    assert d.ppf(0.0) == -math.inf
    assert d.ppf(1.0) == math.inf
    assert d.cdf(math.inf) == 1.0
    assert d.cdf(-math.inf) == 0.0
    with pytest.raises(ValueError):
        d.ppf(1.5)
    with pytest.raises(ValueError):
        d.ppf(np.nan)


def _many_term(n_terms: int, spread: float, seed: int) -> VersatileLogistic:
    rng = np.random.default_rng(seed)
    slopes = rng.choice([-1.0, 1.0], n_terms) * rng.uniform(0.5, 2.0, n_terms)
    knots = rng.uniform(-spread, spread, n_terms)
    mults = rng.uniform(0.2, 3.0, n_terms)
    return VersatileLogistic(slopes, knots, mults)


@pytest.mark.parametrize(("n_terms", "spread", "seed"), [(7, 3.0, 0), (60, 10.0, 1)])
def test_many_term_moments_against_quad(n_terms, spread, seed):
    d = _many_term(n_terms, spread, seed)
    ref_mean, ref_var, ref_ent = _quad_moments(d)
    assert d.mean() == pytest.approx(ref_mean, rel=1e-8, abs=1e-9)
    assert d.var() == pytest.approx(ref_var, rel=1e-8)
    assert d.entropy() == pytest.approx(ref_ent, rel=1e-8, abs=1e-9)


def test_cdf_monotone_and_ppf_roundtrip():
    d = _many_term(40, 8.0, 3)
    z0 = d.mode()
    sd = math.sqrt(d.var())
    z = z0 + sd * np.linspace(-8.0, 8.0, 161)
    c = d.cdf(z)
    assert np.all(np.diff(c) >= 0.0)
    assert np.all(np.diff(c[c < 0.999]) > 0.0)  # strictly increasing below the float ceiling
    assert c[0] > 0.0 and d.sf(z[-1]) > 0.0
    np.testing.assert_allclose(c + d.sf(z), 1.0, rtol=0, atol=1e-14)
    # The cdf at the mode is a plausible probability, and agrees with quadrature of the pdf.
    c_mode = d.cdf(z0)
    assert 0.05 < c_mode < 0.95
    ref = quad(d.pdf, z0 - 60.0 * sd, z0, epsrel=1e-12, limit=200)[0]
    assert c_mode == pytest.approx(ref, rel=1e-8)
    zz = z0 + sd * np.array([-5.0, -2.0, -0.3, 0.0, 0.4, 2.5, 5.0])
    np.testing.assert_allclose(d.ppf(d.cdf(zz)), zz, rtol=0, atol=1e-9)
    assert d.cdf(np.array([[z0]])).shape == (1, 1)
    assert isinstance(d.ppf(0.3), float)


def test_tails_relative_accuracy():
    # Far tails keep relative accuracy: exact tails of the type IV logistic.
    d = VersatileLogistic([1.0, -1.0], 0.0, [1.0, 2.0])
    # cdf(z) = 1 - (1 + e^z)^-2 ... via F = 1 - sf; sf(z) = (1 + e^z)^-2 for mu = [1, 2]?
    # Density 2 e^{2z} / (1 + e^z)^3: cdf = (e^z / (1 + e^z))^2, sf = 1 - that.
    z = np.array([-60.0, -20.0])
    np.testing.assert_allclose(d.cdf(z), (1.0 / (1.0 + np.exp(-z))) ** 2, rtol=1e-10)
    z = np.array([20.0, 60.0])
    p = 1.0 / (1.0 + np.exp(z))
    np.testing.assert_allclose(d.sf(z), p * (2.0 - p), rtol=1e-10)


@pytest.mark.parametrize(
    ("n_terms", "spread", "seed", "size"),
    [(2, 0.0, 10, 3000), (9, 4.0, 11, 3000), (200, 20.0, 12, 1500), (10_000, 50.0, 13, 200)],
)
def test_rvs_kolmogorov_smirnov(n_terms, spread, seed, size):
    if n_terms == 2:
        d = VersatileLogistic([1.0, -1.0], 0.0, [0.3, 4.0])
    else:
        d = _many_term(n_terms, spread, seed)
    x = d.rvs(size=size, random_state=seed)
    assert x.shape == (size,)
    assert np.all(np.isfinite(x))
    assert stats.kstest(x, d.cdf).pvalue > 1e-3


def test_rvs_reproducibility_and_types():
    d = VersatileLogistic([1.0, -2.0, 0.5, -1.0], [0.0, 1.0, -2.0, 3.0], [1.0, 2.0, 0.7, 1.5])
    a = d.rvs(size=(3, 4), random_state=123)
    b = d.rvs(size=(3, 4), random_state=123)
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)
    c = d.rvs(size=5, random_state=np.random.default_rng(7))
    e = d.rvs(size=5, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(c, e)
    f = d.rvs(size=5, random_state=np.random.RandomState(7))
    g = d.rvs(size=5, random_state=np.random.RandomState(7))
    np.testing.assert_array_equal(f, g)
    x = d.rvs(random_state=1)
    assert isinstance(x, float)
    assert not np.array_equal(d.rvs(size=5, random_state=1), d.rvs(size=5, random_state=2))


def test_huge_multiplicities_moments():
    # Multiplicities of 1e200: the kernel is shifted to 0 at the mode, so nothing overflows.
    # (Sampling with such multiplicities is tested in test_vlog_sampling.py.)
    d = VersatileLogistic([1.0, -1.0], 0.0, [1e200, 2e200])
    assert d.var() == pytest.approx(polygamma(1, 1e200) + polygamma(1, 2e200), rel=1e-6)
    assert d.mean() == pytest.approx(math.log(2.0), rel=1e-9)
