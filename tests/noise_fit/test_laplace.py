"""The Laplace approximation's helpers (viboost.noise_fit.laplace): Stirling's error against
mpmath, what the normal approximation of a Dirichlet in softmax coordinates misses against
the closed form of its normaliser, the approximation computed here numerically, the mode
and covariance of a posterior against closed forms, and the credible intervals' parameter
draws against the Cholesky form written out here."""

import mpmath
import numpy as np
import pytest
from oracles import laplace_log_integral
from scipy.optimize import minimize
from scipy.special import gammaln, log_softmax

from viboost.noise_fit.laplace import (
    dirichlet_laplace_gap,
    laplace_covariance,
    laplace_draws,
    laplace_posterior,
    stirling_gap,
)


@pytest.mark.parametrize(
    "a", [1e-3, 0.05, 0.2, 1.0, 3.5, 7.999, 8.0, 11.999, 12.0, 12.001, 50.0, 1e4, 1e9]
)
def test_stirling_gap_against_mpmath(a):
    with mpmath.workdps(60):
        x = mpmath.mpf(a)
        want = mpmath.loggamma(x) - ((x - 0.5) * mpmath.log(x) - x + mpmath.log(2 * mpmath.pi) / 2)
    assert stirling_gap(a) == pytest.approx(float(want), rel=1e-10, abs=1e-14)


def test_stirling_gap_rejects_what_is_not_positive():
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="positive"):
            stirling_gap(np.array([1.0, bad]))


def _softmax_laplace(alpha: np.ndarray) -> float:
    """The Laplace approximation of log B(alpha) = log int prod_j p_j^alpha_j dv with
    ``p = softmax(0, v)``: the mode by BFGS (from near the closed-form one), the Hessian by
    central differences."""

    def log_density(v):
        return float(alpha @ log_softmax(np.concatenate([[0.0], v])))

    start = np.log(alpha[1:] / alpha[0]) + 0.1
    mode = minimize(lambda v: -log_density(v), start, method="BFGS", tol=1e-12).x
    return laplace_log_integral(log_density, mode)


@pytest.mark.parametrize(
    "alpha", [[0.3, 5.0], [1.0, 1.0], [0.2, 0.2, 0.2, 40.0], [2.5, 0.05, 900.0], [1e3, 3e3]]
)
def test_dirichlet_gap_is_what_the_softmax_laplace_misses(alpha):
    alpha = np.array(alpha)
    exact = gammaln(alpha).sum() - gammaln(alpha.sum())
    assert exact - _softmax_laplace(alpha) == pytest.approx(dirichlet_laplace_gap(alpha), abs=2e-6)


def test_dirichlet_gap_sums_the_columns_of_a_matrix():
    columns = np.array([[1.0, 0.2, 0.2], [0.2, 30.0, 0.2], [0.2, 0.2, 4.0]])
    gaps = [dirichlet_laplace_gap(columns[:, i]) for i in range(3)]
    assert dirichlet_laplace_gap(columns, axis=0) == pytest.approx(sum(gaps), rel=1e-14)
    assert dirichlet_laplace_gap(columns.T) == pytest.approx(sum(gaps), rel=1e-14)


def _normal_objective(center, precision):
    """Minus the log density per unit weight of N(center, precision^-1 / total), and its
    gradient."""

    def objective(x):
        d = x - center
        return 0.5 * d @ precision @ d, precision @ d

    return objective


def test_laplace_posterior_of_a_normal_is_the_normal():
    """A normal posterior is its own Laplace approximation: the mode is its mean and the
    covariance its covariance, precision^-1 / total (closed form)."""
    rng = np.random.default_rng(3)
    root = rng.normal(size=(4, 4))
    precision = root @ root.T + 0.5 * np.eye(4)
    center = rng.normal(size=4)
    bounds = np.array([[-10.0, 10.0]] * 4)
    mode, cov = laplace_posterior(
        _normal_objective(center, precision), np.zeros(4), (), bounds, total=250.0
    )
    np.testing.assert_allclose(mode, center, atol=1e-9)
    np.testing.assert_allclose(cov, np.linalg.inv(precision) / 250.0, rtol=1e-6, atol=1e-12)


def test_laplace_posterior_stops_at_the_search_box():
    """A mode outside the box: the answer is the box's edge in that coordinate (where the
    constrained optimum of a diagonal normal lies), and the other coordinate is exact."""
    precision = np.diag([2.0, 3.0])
    bounds = np.array([[-1.0, 1.0], [-5.0, 5.0]])
    mode, _ = laplace_posterior(
        _normal_objective(np.array([4.0, 0.25]), precision), np.zeros(2), (), bounds, total=1.0
    )
    assert mode[0] == pytest.approx(1.0, abs=1e-12)
    assert mode[1] == pytest.approx(0.25, abs=1e-8)


def _clustered_covariance(seed: int = 0) -> np.ndarray:
    """A covariance with a cluster of near-equal eigenvalues (as a K-class noise matrix's
    prior-dominated entries give) beside a few distinct ones."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    values = np.r_[5.0 + 1e-3 * rng.standard_normal(9), 1.3, 0.2, 0.04]
    return (basis * values) @ basis.T


def test_laplace_draws_are_the_mean_plus_the_cholesky_factor_times_normals_clipped():
    cov = _clustered_covariance()
    mean = np.linspace(-1.0, 1.0, 12)
    box = np.column_stack([np.full(12, -2.5), np.full(12, 3.0)])
    draws = laplace_draws(np.random.default_rng(7), mean, cov, box, 300)
    z = np.random.default_rng(7).standard_normal((300, 12))
    want = np.clip(mean + z @ np.linalg.cholesky(cov).T, box[:, 0], box[:, 1])
    assert np.array_equal(draws, want)
    assert (draws == -2.5).any() and (draws == 3.0).any()  # the box clips some


def test_laplace_draws_move_with_the_covariance_by_rounding_only():
    # Within a cluster of near-equal eigenvalues the eigenvectors turn with a relative change
    # of 1e-12 in the covariance; the Cholesky factor moves by about that much.
    cov = _clustered_covariance(1)
    noise = np.random.default_rng(2).standard_normal(cov.shape) * 1e-12
    bumped = cov * (1.0 + 0.5 * (noise + noise.T))
    box = np.column_stack([np.full(12, -50.0), np.full(12, 50.0)])
    mean = np.zeros(12)
    a = laplace_draws(np.random.default_rng(0), mean, cov, box, 400)
    b = laplace_draws(np.random.default_rng(0), mean, bumped, box, 400)
    assert np.abs(a - b).max() < 1e-9


def test_laplace_draws_keep_the_eigenvector_form_on_request_and_check_the_method():
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    box = np.array([[-50.0, 50.0], [-50.0, 50.0]])
    draws = laplace_draws(np.random.default_rng(4), np.zeros(2), cov, box, 10, method="eigh")
    want = np.random.default_rng(4).multivariate_normal(np.zeros(2), cov, size=10, method="eigh")
    assert np.array_equal(draws, want)
    with pytest.raises(ValueError, match="method must be"):
        laplace_draws(np.random.default_rng(4), np.zeros(2), cov, box, 10, method="svd")


def test_laplace_draws_repair_a_covariance_positive_definite_only_in_exact_arithmetic():
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    box = np.tile([-1e6, 1e6], (6, 1))
    # An ordinary covariance: draws as numpy's own Cholesky draws, bit for bit.
    hessian = basis @ np.diag([0.5, 1.0, 2.0, 3.0, 5.0, 8.0]) @ basis.T
    covariance = laplace_covariance(hessian, 4.0)
    np.testing.assert_array_equal(
        laplace_draws(np.random.default_rng(1), np.zeros(6), covariance, box, 50),
        np.random.default_rng(1).multivariate_normal(
            np.zeros(6), covariance, 50, method="cholesky"
        ),
    )
    # A direction pinned 1e20 times harder than a flat one (as a K-class fit on a few rows
    # with a near-empty fold gives): the covariance rebuilt from the floored eigenvalues is
    # positive definite in exact arithmetic, not to rounding, and numpy's Cholesky refuses it.
    hessian = basis @ np.diag([1e-6, 1.0, 1.0, 1.0, 1.0, 1e14]) @ basis.T
    covariance = laplace_covariance(hessian, 1.0)
    with pytest.raises(np.linalg.LinAlgError):
        np.random.default_rng(1).multivariate_normal(np.zeros(6), covariance, 5, method="cholesky")
    draws = laplace_draws(np.random.default_rng(1), np.zeros(6), covariance, box, 20000)
    # The draws follow the covariance (up to the jitter, of order eps times its largest
    # variance): the flat direction's variance is the covariance's, the pinned one stays pinned.
    flat, pinned = basis[:, 0], basis[:, 5]
    assert np.var(draws @ flat) == pytest.approx(flat @ covariance @ flat, rel=0.05)
    assert np.var(draws @ pinned) < 1e-8
