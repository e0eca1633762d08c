"""Tests of viboost.distributions.log_gamma: both forms of the ``log G``, ``G ~ Gamma`` draws.

The oracles are independent of the code under test: scipy's Gamma distribution (a KS test of
``exp`` of the draws), the regularised incomplete gamma function for the CDF of ``log G`` itself
(where ``G`` underflows), and ``E[log G] = digamma(shape)``, ``Var[log G] = trigamma(shape)``.
The numpy and the compiled forms are also compared with each other (two-sample KS), since they
consume their random numbers in different orders and cannot agree draw by draw.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracles import compiled_log_gamma_draws
from scipy import stats
from scipy.special import digamma, gammainc, gammaln, polygamma

from viboost.distributions.log_gamma import log_gamma_variates

KS_ALPHA = 1e-3  # seeded draws, so each verdict is deterministic
N_DRAWS = 4000


def _numpy_draws(shape: float, n: int, seed: int) -> np.ndarray:
    return log_gamma_variates(np.full(n, shape), np.random.default_rng(seed))


def _log_gamma_cdf(shape: float):
    """P(log G <= t) = P(G <= e^t); where e^t underflows, its leading term
    e^(k t) / Gamma(k + 1) (relative error below k e^t)."""

    def cdf(t):
        t = np.asarray(t)
        small = np.exp(np.minimum(shape * t - gammaln(shape + 1.0), 0.0))
        return np.where(t < -700.0, small, gammainc(shape, np.exp(np.maximum(t, -700.0))))

    return cdf


FORMS = {
    "numpy": lambda shape, n, seed: _numpy_draws(shape, n, seed),
    "compiled": lambda shape, n, seed: compiled_log_gamma_draws(shape, n, seed),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("shape", [0.05, 0.7, 3.0])
def test_exp_of_draws_is_gamma(form, shape):
    draws = FORMS[form](shape, N_DRAWS, 1)
    assert draws.shape == (N_DRAWS,) and np.all(np.isfinite(draws))
    assert stats.kstest(np.exp(draws), stats.gamma(shape).cdf).pvalue > KS_ALPHA


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("shape", [1e-3, 0.3, 1.0, 7.5, 400.0])
def test_log_of_gamma_cdf(form, shape):
    # For shape 1e-3, G underflows to 0 for most draws: only log G can be tested.
    draws = FORMS[form](shape, N_DRAWS, 2)
    assert np.all(np.isfinite(draws))
    assert stats.kstest(draws, _log_gamma_cdf(shape)).pvalue > KS_ALPHA


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("shape", [0.05, 0.7, 3.0])
def test_mean_is_digamma(form, shape):
    n = 20_000
    draws = FORMS[form](shape, n, 3)
    se = np.sqrt(polygamma(1, shape) / n)  # Var[log G] = trigamma(shape)
    assert abs(draws.mean() - digamma(shape)) < 4.0 * se


@pytest.mark.parametrize("form", sorted(FORMS))
def test_tiny_shapes_are_finite(form):
    for shape in (1e-3, 1e-8, 1e-12):
        draws = FORMS[form](shape, 1000, 4)
        assert np.all(np.isfinite(draws))
        # log G ~ log(U) / shape: draws of size 1 / shape, all negative but a rare few
        assert np.median(draws) < -0.1 / shape


@pytest.mark.parametrize("shape", [0.05, 0.7, 3.0])
def test_numpy_and_compiled_forms_agree(shape):
    numpy_draws = _numpy_draws(shape, N_DRAWS, 5)
    compiled_draws = compiled_log_gamma_draws(shape, N_DRAWS, 6)
    assert stats.ks_2samp(numpy_draws, compiled_draws).pvalue > KS_ALPHA


def test_numpy_form_keeps_shape_and_mixes_shapes():
    shape = np.array([[0.05, 3.0], [1.0, 1e-3]])
    draws = log_gamma_variates(shape, np.random.RandomState(0))
    assert draws.shape == (2, 2) and np.all(np.isfinite(draws))
    # Same seed, same draws; a RandomState and a Generator both work.
    again = log_gamma_variates(shape, np.random.RandomState(0))
    np.testing.assert_array_equal(draws, again)
    assert log_gamma_variates(shape, np.random.default_rng(0)).shape == (2, 2)
