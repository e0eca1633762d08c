"""Test data and reference computations shared by several test modules (not a test module).

- :func:`random_round_rows`: the rows of one boosting round, ``(y, h, margin, weight)``;
- :func:`log_sigmoid` and :func:`normalised_density`: a density normalised by direct quadrature,
  the oracle of the ELBO and update tests;
- :func:`compiled_log_gamma_draws`: ``n`` draws of the compiled ``log_gamma_variate`` from one
  seeded Generator (the log-gamma and Gibbs-step tests);
- :func:`laplace_log_integral`: the Laplace approximation of a log integral, the Hessian by
  central differences (the Laplace and channel-calibration tests).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy import integrate
from scipy.special import log_expit

from viboost.distributions.log_gamma import log_gamma_variate


def random_round_rows(n, spread, seed=0, agree=0.7):
    """Labels, stump outputs agreeing with them at rate ``agree``, N(0, spread) margins (all 0 for
    ``spread=0``) and uniform weights, from ``seed``."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(n) < agree, y, -y)
    margin = rng.normal(0.0, spread, n) if spread else np.zeros(n)
    weight = rng.random(n)
    return y, h, margin, weight


def log_sigmoid(x: float) -> float:
    return float(log_expit(x))


def normalised_density(log_kernel):
    """(pdf, logpdf) of an unnormalised log density on the real line, by direct quadrature."""
    z = integrate.quad(
        lambda t: np.exp(log_kernel(t)), -np.inf, np.inf, epsabs=0, epsrel=1e-12, limit=500
    )[0]
    return (lambda t: np.exp(log_kernel(t)) / z), (lambda t: log_kernel(t) - np.log(z))


def laplace_log_integral(log_f, mode: np.ndarray, step: float = 1e-4) -> float:
    """The Laplace approximation of ``log int exp(log_f(v)) dv`` at ``mode``, with the Hessian
    of ``log_f`` by central second differences."""
    size = mode.size
    hessian = np.empty((size, size))
    for i, e_i in enumerate(np.eye(size) * step):
        for j, e_j in enumerate(np.eye(size) * step):
            hessian[i, j] = (
                log_f(mode + e_i + e_j) - log_f(mode + e_i - e_j)
                - log_f(mode - e_i + e_j) + log_f(mode - e_i - e_j)
            ) / (4 * step**2)  # fmt: skip
    return log_f(mode) + 0.5 * size * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(-hessian)[1]


@njit
def _log_gamma_draws(shape, n, rng):
    out = np.empty(n)
    for i in range(n):
        out[i] = log_gamma_variate(shape, rng)
    return out


def compiled_log_gamma_draws(shape: float, n: int, seed: int) -> np.ndarray:
    """``n`` draws of ``log G``, ``G ~ Gamma(shape)``, by the compiled form, from ``seed``."""
    return _log_gamma_draws(shape, n, np.random.default_rng(seed))


def sparse_feature_rows(n, groups, n_counts, n_dense, seed):
    """Rows with sparse features: ``groups`` one-hot groups of 4 columns, ``n_counts`` counts
    that are mostly 0, then ``n_dense`` Gaussian columns; returns ``X``, a signal from some of
    the columns (for labels), and the generator (to draw on from)."""
    rng = np.random.default_rng(seed)
    onehot = np.eye(4)[rng.integers(0, 4, size=(n, groups))].reshape(n, 4 * groups)
    counts = np.where(rng.random((n, n_counts)) < 0.8, 0.0, rng.poisson(3.0, (n, n_counts)))
    X = np.hstack([onehot, counts, rng.normal(size=(n, n_dense))])
    signal = onehot[:, 0] + onehot[:, 5] - onehot[:, 9] + 0.3 * counts[:, 0] + X[:, -1]
    return X, signal, rng
