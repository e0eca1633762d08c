"""The Laplace approximation behind the calibrations' credible intervals.

Both calibrations (:mod:`viboost.noise_fit.calibration` for two classes,
:mod:`viboost.noise_fit.class_calibration` for K) maximise a log posterior whose gradient they
compute in closed form. This module turns such an objective into a posterior: the Hessian by
central differences of the gradient (:func:`objective_hessian`), Newton steps from L-BFGS's
answer to the optimum itself (:func:`newton_polish`), and the covariance of the normal
approximation (:func:`laplace_covariance`); :func:`laplace_posterior` runs the three after the
search, for all three calibrations, and :func:`laplace_draws` draws their parameters from the
normal approximation for the credible intervals. Both K-class calibrations also compare two
models by their log evidence; :func:`dirichlet_laplace_gap` is what the normal approximation of a
Dirichlet (or Beta) part of such a posterior misses there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize
from scipy.special import gammaln

__all__ = [
    "cholesky_factor",
    "dirichlet_laplace_gap",
    "laplace_covariance",
    "laplace_draws",
    "laplace_posterior",
    "NestedPosterior",
    "nested_posterior",
    "newton_polish",
    "objective_hessian",
    "stirling_gap",
]

#: From this argument on, :func:`stirling_gap` sums its asymptotic series (four terms, error
#: below 2e-13) instead of subtracting Stirling's formula from ``gammaln`` (which cancels).
_SERIES_FROM = 12.0

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


def stirling_gap(a: np.ndarray | float) -> np.ndarray:
    """``log Gamma(a)`` minus Stirling's formula ``(a - 1/2) log a - a + log(2 pi) / 2``, for
    ``a > 0``: 0.0810 at ``a = 1``, 0.322 at 0.2, about ``1 / (12 a)`` for large ``a``.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(stirling_gap(np.array([0.2, 1.0, 100.0])), 6)
    array([0.322294, 0.081061, 0.000833])
    """
    a = np.asarray(a, dtype=np.float64)
    if np.any(~(a > 0.0)):
        raise ValueError("stirling_gap needs positive arguments")
    small = np.minimum(a, _SERIES_FROM)
    direct = gammaln(small) - ((small - 0.5) * np.log(small) - small + 0.5 * np.log(2.0 * np.pi))
    inverse = 1.0 / np.maximum(a, _SERIES_FROM)
    square = inverse * inverse
    series = inverse * (1 / 12 - square * (1 / 360 - square * (1 / 1260 - square / 1680)))
    return np.where(a < _SERIES_FROM, direct, series)


def dirichlet_laplace_gap(alpha: np.ndarray, axis: int = -1) -> float:
    """How much the Laplace approximation in softmax coordinates underestimates the log
    normaliser of Dirichlet densities: ``log B(alpha)`` minus its approximation, summed over
    the Dirichlets laid out along the other axes (a Beta is a Dirichlet of two).

    In the coordinates ``v_j = log(p_j / p_0)`` a Dirichlet(alpha) density is proportional to
    ``prod_j p_j^alpha_j`` (the Jacobian is ``prod_j p_j``), and its Laplace approximation
    there equals ``B(alpha) = prod_j Gamma(alpha_j) / Gamma(sum_j alpha_j)`` with every Gamma
    replaced by Stirling's formula (MacKay, "Choice of basis for Laplace approximation",
    1998). So the gap is ``sum_j stirling_gap(alpha_j) - stirling_gap(sum_j alpha_j)``: small
    where every ``alpha_j`` is large, and about 0.32 nats for each entry of ``alpha_j = 0.2``
    (an entry of a noise matrix with next to no rows behind it).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import gammaln
    >>> alpha = np.array([0.2, 0.2, 30.0])
    >>> exact = gammaln(alpha).sum() - gammaln(alpha.sum())
    >>> mode = alpha / alpha.sum()  # the Laplace approximation in softmax coordinates:
    >>> hessian = alpha.sum() * (np.diag(mode[1:]) - np.outer(mode[1:], mode[1:]))
    >>> log_det = np.linalg.slogdet(hessian)[1]
    >>> laplace = (alpha * np.log(mode)).sum() + np.log(2 * np.pi) - 0.5 * log_det
    >>> bool(abs(exact - laplace - dirichlet_laplace_gap(alpha)) < 1e-10)
    True
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    return float(stirling_gap(alpha).sum() - stirling_gap(alpha.sum(axis=axis)).sum())


def laplace_draws(
    rng: np.random.Generator,
    mean: np.ndarray,
    covariance: np.ndarray,
    bounds: np.ndarray,
    n_draws: int,
    method: Literal["cholesky", "eigh"] = "cholesky",
) -> np.ndarray:
    """``n_draws`` parameter vectors from the normal approximation ``N(mean, covariance)``,
    clipped to the search box ``bounds`` (one (low, high) row per parameter: the posterior
    lives there, and a flat direction can have a huge variance); shape ``(n_draws, size)``.

    The draws are ``mean + z L^T`` with ``z`` standard normal (``rng``) and ``L`` the Cholesky
    factor of ``covariance`` (positive definite: :func:`laplace_covariance` floors its
    eigenvalues). The factor is unique and moves with the covariance by rounding only, so
    two fits whose sums differ by rounding (another CPU, another order of the rows) draw the
    same parameters to rounding. An eigenvector factor (``method="eigh"``) does not: within a
    cluster of near-equal eigenvalues, as the prior-dominated entries of a K-class noise
    matrix have (15 of the 31 eigenvalues of a Satellite fit within 1% of 5.0), the
    eigenvectors turn with the rounding, and a relative change of 1e-9 in the covariance
    moved such draws by 3.6e-5 (by 7.6e-9 through the Cholesky factor). ``"eigh"`` is kept
    for the two-class calibration, whose three parameters' eigenvalues are apart and whose
    intervals are in the committed outputs.

    Examples
    --------
    >>> import numpy as np
    >>> cov = np.array([[1.0, 0.5], [0.5, 2.0]])
    >>> box = np.array([[-50.0, 50.0], [-50.0, 50.0]])
    >>> draws = laplace_draws(np.random.default_rng(0), np.zeros(2), cov, box, 20000)
    >>> np.round(np.cov(draws.T), 1)
    array([[1. , 0.5],
           [0.5, 2. ]])
    """
    if method not in ("cholesky", "eigh"):
        raise ValueError(f"method must be 'cholesky' or 'eigh', got {method!r}")
    if method == "cholesky":
        # As rng.multivariate_normal(..., method="cholesky") draws, bit for bit, with the
        # factor repaired where rounding left the covariance without one.
        factor = cholesky_factor(np.asarray(covariance, dtype=np.float64))
        draws = mean + rng.standard_normal((n_draws, factor.shape[0])) @ factor.T
    else:
        draws = rng.multivariate_normal(mean, covariance, size=n_draws, method=method)
    return np.clip(draws, bounds[:, 0], bounds[:, 1])


#: :func:`cholesky_factor` doubles its jitter at most this many times.
_JITTER_DOUBLINGS = 30


def cholesky_factor(covariance: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor ``L`` of a Laplace covariance (``L L^T = covariance``), or,
    where it does not exist to rounding, that of the covariance with the least jitter on its
    diagonal (``eps`` times its size and its largest variance, doubled until the factor
    exists) that makes it so.

    :func:`laplace_covariance` floors the Hessian's eigenvalues, so the covariance is positive
    definite in exact arithmetic; but where they span more than ``1 / eps`` (a flat direction
    beside one pinned by many rows, as a K-class fit of a few rows with a near-empty fold
    gives), the covariance rebuilt from them is not, to rounding, and has no Cholesky factor.
    The jitter is of the order of that rounding: it moves a pinned direction's standard
    deviation by about ``sqrt(eps)`` times the largest one's. The factor is unique and moves
    with the covariance by rounding only (:func:`laplace_draws` says why that matters)."""
    try:
        return np.linalg.cholesky(covariance)
    except np.linalg.LinAlgError:
        pass
    size = covariance.shape[0]
    jitter = np.finfo(np.float64).eps * size * max(float(np.max(np.diag(covariance))), 1e-300)
    for _ in range(_JITTER_DOUBLINGS):
        try:
            return np.linalg.cholesky(covariance + jitter * np.eye(size))
        except np.linalg.LinAlgError:
            jitter *= 2.0
    raise np.linalg.LinAlgError(
        "The Laplace covariance has no Cholesky factor even with a jitter of "
        f"{jitter:.3g} on its diagonal: it is not a covariance (NaN or negative variances?)."
    )


def laplace_posterior(
    objective: Objective,
    start: np.ndarray,
    args: Sequence,
    bounds: np.ndarray,
    total: float,
    maxiter: int = 500,
    gtol: float = 1e-12,
    ftol: float = 1e-15,
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior mode within ``bounds`` (one (low, high) row per parameter) and its
    Laplace covariance, ``(params, covariance)``: L-BFGS-B from ``start`` (``maxiter``,
    ``gtol``, ``ftol``: its options), then :func:`newton_polish` with the Hessian there
    (:func:`objective_hessian`), whose inverse is the covariance (:func:`laplace_covariance`;
    ``total``: the weight the objective was divided by).

    Examples
    --------
    A normal posterior, N(m, A^-1 / total), is its own Laplace approximation:

    >>> import numpy as np
    >>> m, a = np.array([0.5, -1.0]), np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> def objective(x):
    ...     return 0.5 * (x - m) @ a @ (x - m), a @ (x - m)
    >>> mode, cov = laplace_posterior(objective, np.zeros(2), (), np.array([[-5.0, 5.0]] * 2), 10.0)
    >>> bool(np.allclose(mode, m, atol=1e-10)), bool(np.allclose(cov, np.linalg.inv(a) / 10.0))
    (True, True)
    """
    bounds = np.asarray(bounds, dtype=np.float64)
    result = minimize(
        objective,
        start,
        args=tuple(args),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": maxiter, "gtol": gtol, "ftol": ftol},
    )
    hessian = objective_hessian(objective, result.x, args)
    params = newton_polish(objective, result.x, hessian, bounds, args)
    return params, laplace_covariance(hessian, total)


#: :func:`nested_posterior`'s grid of ``logit theta`` runs from the mode until the log posterior
#: has fallen this many nats ...
GRID_DROP = 12.0
#: ... with at most this many nodes on each side of the mode ...
GRID_SIDE = 60
#: ... and ends at this ``logit theta``: a share of noise labels of 3e-7, indistinguishable
#: from none (:mod:`viboost.noise_fit.posterior` gives theta = 1 its own mass).
GRID_TOP = 15.0
#: A guided node (:func:`_guided_node`) takes this many Newton steps from the guide's
#: conditional mode ...
GUIDED_STEPS = 2
#: ... each halved at most this many times until it lowers the objective.
GUIDED_HALVINGS = 3


@dataclass(frozen=True)
class NestedPosterior:
    """A posterior integrated over its first parameter, ``logit theta``, on a grid
    (:func:`nested_posterior`).

    Attributes
    ----------
    params : ndarray of shape (n_draws, n_params)
        Draws of the whole parameter vector.
    log_evidence : float
        The log marginal likelihood (the objective's priors with ``log_norm``).
    grid : ndarray of shape (n_nodes, 2)
        The nodes of ``logit theta`` and the log marginal density there (not normalised).
    peak : ndarray of shape (n_params,)
        The node of the highest marginal density and the others' conditional mode there.
    draws : list
        The draws as the caller's objects (filled in by the caller).
    nodes : ndarray of shape (n_nodes, n_params + (n_params - 1)^2) or None
        Each node's ``logit theta``, the others' conditional mode there and its Laplace
        covariance (flattened): the ``guide`` of a posterior of reweighted rows
        (:func:`nested_posterior`).
    """

    params: np.ndarray
    log_evidence: float
    grid: np.ndarray
    peak: np.ndarray
    draws: list[Any] = field(default_factory=list, repr=False)
    nodes: np.ndarray | None = field(default=None, repr=False)


def _conditional_mode(
    objective: Objective,
    first: float,
    start: np.ndarray,
    args: Sequence,
    bounds: np.ndarray,
    total: float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Given the first parameter, the mode of the others, their Laplace covariance and the
    log of the (unnormalised) marginal density of the first there, by the Laplace
    approximation over the others."""

    def conditional(rest: np.ndarray, *a: Any) -> tuple[float, np.ndarray]:
        value, grad = objective(np.concatenate([[first], rest]), *a)
        return value, grad[1:]

    result = minimize(
        conditional,
        np.clip(start, bounds[:, 0], bounds[:, 1]),
        args=tuple(args),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 300, "gtol": 1e-10, "ftol": 1e-14},
    )
    covariance = laplace_covariance(objective_hessian(conditional, result.x, args), total)
    log_density = (
        -total * float(result.fun)
        + 0.5 * result.x.size * np.log(2.0 * np.pi)
        + 0.5 * float(np.linalg.slogdet(covariance)[1])
    )
    return result.x, covariance, log_density


def nested_posterior(
    objective: Objective,
    mode: np.ndarray,
    covariance: np.ndarray,
    args: Sequence,
    rest_bounds: Callable[[float], np.ndarray],
    total: float,
    log_norm: float,
    n_draws: int,
    rng: np.random.Generator,
    lowest: float = -30.0,
    guide: np.ndarray | None = None,
) -> NestedPosterior:
    """The posterior of a parameter vector whose first entry is ``logit theta``, integrated
    over it on a grid, with the Laplace approximation over the others given it at each node
    (the nested Laplace approximation of Rue, Martino and Chopin, 2009, JRSS B 71: 319-392).

    The grid starts at the mode (``mode``, with ``covariance`` its Laplace covariance, whose
    first variance sets the first step), and runs on each side, with steps growing by 1.2,
    until the log density has fallen :data:`GRID_DROP` nats below its highest, up to
    ``logit theta`` = :data:`GRID_TOP` (above, a likelihood flat in theta carries no mass
    worth the nodes: the prior's density in ``logit theta`` falls as ``1 - theta``) and down
    to ``lowest`` (``rest_bounds(u)``: the box of the other parameters given ``u``, for ``u``
    at least ``lowest``; a mode below ``lowest`` starts the grid at ``lowest``).
    ``guide``: the :attr:`NestedPosterior.nodes` of the posterior of nearby data (the same
    rows reweighted, :func:`viboost.noise_fit.posterior.bootstrap_reweightings`); the grid is
    then the guide's nodes, and each node's conditional mode is found by Newton steps from the
    guide's there with the guide's curvature (:func:`_guided_node`), where otherwise it is
    searched by L-BFGS from the neighbouring node's and from the joint mode (a guard against
    a second conditional mode, which the guide's search has passed already). The guide's
    grid spans :data:`GRID_DROP` nats of its own posterior, some five of its standard
    deviations on each side, and a reweighting of the rows moves the posterior by about one.
    ``log_norm``: the log normalising constant of the priors inside ``objective`` (minus the
    log posterior divided by ``total``). Between nodes the log density is interpolated
    linearly (exact for an exponential tail): the evidence is the sum of the cells' masses;
    a draw takes a cell by its mass, ``logit theta`` from the interpolated density within it
    and the others from the normal at the nearer node.

    Examples
    --------
    A normal posterior with a normal prior: the evidence in closed form.

    >>> import numpy as np
    >>> a = np.array([[2.0, 0.3], [0.3, 1.0]])
    >>> def objective(x):  # minus the log density of N(0, inv(a)), unnormalised
    ...     return 0.5 * x @ a @ x, a @ x
    >>> box = lambda u: np.array([[-50.0, 50.0]])
    >>> post = nested_posterior(objective, np.zeros(2), np.linalg.inv(a), (), box, 1.0, 0.0,
    ...                         20000, np.random.default_rng(0))
    >>> exact = np.log(2 * np.pi) - 0.5 * np.log(np.linalg.det(a))
    >>> bool(abs(post.log_evidence - exact) < 0.02)
    True
    >>> bool(np.allclose(np.cov(post.params.T), np.linalg.inv(a), atol=0.03))
    True
    """
    # The grid starts at the mode, or at ``lowest`` when the mode lies below it (outside the
    # identifiable model: there ``rest_bounds`` may be empty).
    centre = max(float(mode[0]), lowest)
    low = float(lowest)
    sd = float(np.sqrt(max(covariance[0, 0], 1e-8)))

    if guide is not None:
        # The guide's nodes, each a Newton step from the guide's conditional mode there.
        size = mode.size - 1
        nodes = {}
        for row in np.asarray(guide, dtype=np.float64):
            u = float(row[0])
            nodes[u] = _guided_node(
                objective, u, row[1 : 1 + size], row[1 + size :].reshape(size, size), args,
                rest_bounds(u), total,
            )  # fmt: skip
    else:
        nodes = _walk(objective, mode, centre, low, sd, args, rest_bounds, total)
    grid = np.array(sorted(nodes))
    log_density = np.array([nodes[u][2] for u in grid])
    node_params = np.array([np.concatenate([[u], nodes[u][0], nodes[u][1].ravel()]) for u in grid])
    best = float(grid[int(np.argmax(log_density))])
    peak_params = np.concatenate([[best], nodes[best][0]])
    if grid.size == 1:  # the mode at a bound with nothing beyond: a point
        params = np.tile(mode, (n_draws, 1))
        return NestedPosterior(params, float(log_density[0]) + log_norm,
                               np.column_stack([grid, log_density]), peak_params,
                               nodes=node_params)  # fmt: skip
    # Within a cell the log density is interpolated linearly: the cell's mass is
    # w (e^b - e^a) / (b - a), and a draw within it is an exponential's inverse CDF.
    widths = np.diff(grid)
    lower, upper = log_density[:-1], log_density[1:]
    slope = upper - lower
    flat = np.abs(slope) < 1e-9
    safe = np.where(flat, 1.0, slope)
    # log of (e^{slope} - 1) / slope, stably for either sign.
    log_factor = np.where(
        flat, 0.0, np.maximum(slope, 0.0) + np.log(-np.expm1(-np.abs(safe))) - np.log(np.abs(safe))
    )
    cells = lower + np.log(widths) + log_factor
    top = float(cells.max())
    mass = np.exp(cells - top)
    log_evidence = top + float(np.log(mass.sum())) + log_norm
    cell = rng.choice(cells.size, size=n_draws, p=mass / mass.sum())
    q = rng.random(n_draws)
    k = slope[cell]
    # Inverse CDF of the density exp(k t) on t in [0, 1]: log(1 + q (e^k - 1)) / k, written
    # as k + log(q + (1 - q) e^-k) for k > 0 (no overflow however steep the cell).
    tiny = np.abs(k) < 1e-9
    steep = np.where(tiny, 1.0, k)
    decay = np.exp(-np.abs(steep))
    log_cdf_inverse = np.where(
        steep > 0, steep + np.log(q + (1.0 - q) * decay), np.log1p(q * (decay - 1.0))
    )
    fraction = np.where(tiny, q, log_cdf_inverse / steep)
    first = grid[cell] + np.clip(fraction, 0.0, 1.0) * widths[cell]
    nearer = np.where(first - grid[cell] < 0.5 * widths[cell], cell, cell + 1)
    params = np.empty((n_draws, mode.size))
    params[:, 0] = first
    # The others from the normal at the nearer node: one factor per node, not per draw.
    normal = rng.standard_normal((n_draws, mode.size - 1))
    for node in np.unique(nearer):
        picked = nearer == node
        rest, cov, _ = nodes[grid[node]]
        params[picked, 1:] = rest + normal[picked] @ cholesky_factor(cov).T
    for i, u in enumerate(first):
        box = rest_bounds(float(u))
        np.clip(params[i, 1:], box[:, 0], box[:, 1], out=params[i, 1:])
    return NestedPosterior(
        params, float(log_evidence), np.column_stack([grid, log_density]), peak_params,
        nodes=node_params,
    )  # fmt: skip


def _guided_node(
    objective: Objective,
    first: float,
    start: np.ndarray,
    covariance: np.ndarray,
    args: Sequence,
    bounds: np.ndarray,
    total: float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`_conditional_mode` of reweighted rows, from a guide's conditional mode ``start``
    and Laplace ``covariance`` at the same node: Newton steps with the guide's Hessian (the
    step halved, up to :data:`GUIDED_HALVINGS` times, until it lowers the objective), and the
    guide's covariance (a reweighting of the rows moves the conditional mode by about one of
    its standard deviations and its curvature by a share of order ``n^-1/2``)."""

    def conditional(rest: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = objective(np.concatenate([[first], rest]), *args)
        return float(value), np.asarray(grad[1:])

    rest = np.clip(start, bounds[:, 0], bounds[:, 1])
    value, grad = conditional(rest)
    for _ in range(GUIDED_STEPS):
        step = -(covariance @ grad) * total  # the objective was divided by the total weight
        for _ in range(GUIDED_HALVINGS + 1):
            trial = np.clip(rest + step, bounds[:, 0], bounds[:, 1])
            trial_value, trial_grad = conditional(trial)
            if trial_value <= value:
                rest, value, grad = trial, trial_value, trial_grad
                break
            step = 0.5 * step
        else:
            break
    log_density = (
        -total * value
        + 0.5 * rest.size * np.log(2.0 * np.pi)
        + 0.5 * float(np.linalg.slogdet(covariance)[1])
    )
    return rest, covariance, log_density


def _walk(
    objective: Objective,
    mode: np.ndarray,
    centre: float,
    low: float,
    sd: float,
    args: Sequence,
    rest_bounds: Callable[[float], np.ndarray],
    total: float,
) -> dict[float, tuple[np.ndarray, np.ndarray, float]]:
    """:func:`nested_posterior`'s nodes: from ``centre`` on each side, with steps growing by
    1.2, until the log density has fallen :data:`GRID_DROP` nats below its highest."""
    nodes = {
        centre: _conditional_mode(objective, centre, mode[1:], args, rest_bounds(centre), total)
    }
    peak = nodes[centre][2]
    mode_rest = mode[1:]
    for direction in (-1.0, 1.0):
        step, u, start = 0.25 * sd, centre, mode_rest
        for _ in range(GRID_SIDE):
            nxt = min(max(u + direction * step, low), max(GRID_TOP, centre))
            if nxt == u:
                break
            # From the neighbour's mode and from the joint mode's: the conditional posterior
            # can have two modes, and a walk from one side alone may stay on the lower one.
            # (The first step of each side starts from the joint mode's already: one search.)
            box = rest_bounds(nxt)
            node = _conditional_mode(objective, nxt, start, args, box, total)
            if start is not mode_rest:
                node = max(
                    node,
                    _conditional_mode(objective, nxt, mode_rest, args, box, total),
                    key=lambda candidate: candidate[2],
                )
            nodes[nxt] = node
            peak = max(peak, node[2])
            u, start = nxt, node[0]
            if node[2] < peak - GRID_DROP:
                break
            step *= 1.2
    return nodes
