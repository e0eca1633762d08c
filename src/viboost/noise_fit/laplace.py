"""The Laplace approximation behind the calibrations' credible intervals.

Both calibrations (:mod:`viboost.noise_fit.calibration` for two classes,
:mod:`viboost.noise_fit.class_calibration` for K) maximise a log posterior whose gradient they
compute in closed form. This module turns such an objective into a posterior: the Hessian by
central differences of the gradient (:func:`objective_hessian`), Newton steps from L-BFGS's
answer to the optimum itself (:func:`newton_polish`), and the covariance of the normal
approximation (:func:`laplace_covariance`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["laplace_covariance", "newton_polish", "objective_hessian"]

#: ``objective(params, *args) -> (value, gradient)``: minus the log posterior, divided by the
#: total weight of the rows.
Objective = Callable[..., tuple[float, np.ndarray]]


def objective_hessian(objective: Objective, params: np.ndarray, args: Sequence) -> np.ndarray:
    """Hessian of the (normalised) objective by central differences of its gradient."""
    step = 1e-5
    size = params.size
    hessian = np.empty((size, size))
    for j in range(size):
        delta = np.zeros(size)
        delta[j] = step
        upper = objective(params + delta, *args)[1]
        lower = objective(params - delta, *args)[1]
        hessian[:, j] = (upper - lower) / (2.0 * step)
    return 0.5 * (hessian + hessian.T)


def newton_polish(
    objective: Objective,
    params: np.ndarray,
    hessian: np.ndarray,
    bounds: np.ndarray,
    args: Sequence,
    max_steps: int = 4,
) -> np.ndarray:
    """Newton steps (with the Hessian at L-BFGS's answer) to the optimum itself.

    L-BFGS stops once the objective barely changes, which on a flat ridge leaves the
    parameters up to ~1e-8 from the optimum, by an amount that the rounding of the sums can
    change; after these steps the gradient is at rounding level and the answer moves with the
    data only, so fits that sum the same rows in another order (a distributed fit) get the same
    calibration to ~1e-12. Skipped at a bound of the search box (``bounds``: one (low, high)
    row per parameter) or where the Hessian is not positive definite; a step is kept only if it
    shrinks the gradient."""
    if np.any(np.abs(params - bounds[:, 0]) < 1e-6) or np.any(np.abs(params - bounds[:, 1]) < 1e-6):
        return params
    try:
        factor = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
        return params
    grad = objective(params, *args)[1]
    for _ in range(max_steps):
        size = np.max(np.abs(grad))
        if size < 1e-15:
            break
        step = np.linalg.solve(factor.T, np.linalg.solve(factor, grad))
        candidate = np.clip(params - step, bounds[:, 0], bounds[:, 1])
        new_grad = objective(candidate, *args)[1]
        if not np.max(np.abs(new_grad)) < size:
            break
        params, grad = candidate, new_grad
    return params


def laplace_covariance(hessian: np.ndarray, total: float) -> np.ndarray:
    """Inverse of the Hessian of minus the log posterior (:func:`objective_hessian`, of the
    objective divided by the total weight); eigenvalues are floored so the result is a valid
    covariance even on a flat ridge."""
    values, vectors = np.linalg.eigh(hessian)
    values = np.maximum(values, 1e-6) * total  # the objective was divided by the total weight
    return (vectors / values) @ vectors.T
