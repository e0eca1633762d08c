"""Small numerically stable helpers shared across :mod:`viboost`."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "LOG2",
    "softplus",
    "log_cosh",
    "log_weighted_sum_exp",
    "log_sum_exp",
    "log1mexp",
]

#: ``log(2)`` as a Python float.
LOG2: float = float(np.log(2.0))

# Weights within this factor of each other are summed directly by ``log_weighted_sum_exp``.
_WEIGHT_RANGE = 2.0**-900


def softplus(x: ArrayLike) -> NDArray[np.float64] | np.float64:
    """Evaluate ``log(1 + exp(x))`` without overflow.

    Parameters
    ----------
    x : array_like
        Input values.

    Returns
    -------
    ndarray or numpy.float64
        ``log(1 + exp(x))``, computed as ``np.logaddexp(0, x)``.

    Examples
    --------
    >>> from viboost._utils.special import softplus
    >>> float(softplus(5000.0))
    5000.0
    >>> print(f"{float(softplus(0.0)):.6f}")
    0.693147
    """
    return np.logaddexp(0.0, x)


def log_cosh(x: ArrayLike) -> NDArray[np.float64] | np.float64:
    """Evaluate ``log(cosh(x))`` without overflow.

    Parameters
    ----------
    x : array_like
        Input values.

    Returns
    -------
    ndarray or numpy.float64
        ``|x| + log1p(exp(-2|x|)) - log(2)``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost._utils.special import log_cosh
    >>> float(log_cosh(0.0))
    0.0
    >>> float(log_cosh(1000.0)) == 1000.0 - float(np.log(2.0))
    True
    """
    ax = np.abs(x)
    return ax + np.log1p(np.exp(-2.0 * ax)) - LOG2


def log_weighted_sum_exp(values: ArrayLike, weights: ArrayLike) -> float:
    """Evaluate ``log(sum_i w_i exp(v_i))`` for nonnegative weights without overflow.

    Same result as ``scipy.special.logsumexp(values, b=weights)`` for ``weights >= 0`` (with at
    least one positive weight), but without its per-call overhead, which matters in tight loops.
    Weights may span the whole float64 range (e.g. 1e-300 and 1e307 together): when they are
    within a factor ``2**900`` of each other and their sum cannot overflow, the sum is formed
    directly; otherwise the weights are moved into the exponents, ``v_i + log w_i``, so that no
    term overflows or is lost to underflow.

    Parameters
    ----------
    values : array_like
        Exponents ``v_i`` (1-D, finite).
    weights : array_like
        Nonnegative weights ``w_i``, same length, not all zero.

    Returns
    -------
    float
        ``log(sum_i w_i exp(v_i))``.

    Examples
    --------
    >>> from viboost._utils.special import log_weighted_sum_exp
    >>> print(f"{log_weighted_sum_exp([1e4, 1e4], [1.0, 3.0]) - 1e4:.6f}")
    1.386294
    >>> print(f"{log_weighted_sum_exp([1400.0, 0.0], [1e-300, 1e307]):.6f}")  # no overflow
    709.317246
    """
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    w_max = float(np.max(w))
    w_min = float(np.min(w))
    if w_min > 0.0 and w_max * v.shape[0] < 1e300 and w_min >= w_max * _WEIGHT_RANGE:
        # Terms whose exponential underflows are below 2**-1022 * w_max <= 2**-122 * w_min,
        # i.e. negligible next to the term with the largest exponent.
        v_max = float(np.max(v))
        return v_max + float(np.log(w @ np.exp(v - v_max)))
    pos = w > 0.0
    return log_sum_exp(v[pos] + np.log(w[pos]))


def log_sum_exp(values: ArrayLike) -> float:
    """Evaluate ``log(sum_i exp(v_i))`` without overflow.

    Parameters
    ----------
    values : array_like
        Exponents ``v_i`` (1-D, at least one element, none ``+inf`` or NaN; ``-inf`` allowed).

    Returns
    -------
    float
        ``max(v) + log(sum_i exp(v_i - max(v)))``; ``-inf`` if every ``v_i`` is ``-inf``.

    Examples
    --------
    >>> from viboost._utils.special import log_sum_exp
    >>> print(f"{log_sum_exp([1000.0, 1000.0]) - 1000.0:.6f}")
    0.693147
    """
    v = np.asarray(values, dtype=np.float64)
    v_max = float(np.max(v))
    if v_max == -np.inf:
        return -np.inf
    return v_max + float(np.log(np.sum(np.exp(v - v_max))))


def log1mexp(x: ArrayLike) -> float | NDArray[np.float64]:
    """Evaluate ``log(1 - exp(-x))`` accurately for ``x > 0`` (Maechler's two-branch rule).

    Parameters
    ----------
    x : float or array_like
        Positive argument(s); ``+inf`` gives 0.

    Returns
    -------
    float or ndarray
        ``log(-expm1(-x))`` where ``x <= log 2``, else ``log1p(-exp(-x))``; a float for scalar
        input.

    Examples
    --------
    >>> from viboost._utils.special import log1mexp
    >>> print(f"{log1mexp(1e-20):.6f}")
    -46.051702
    >>> log1mexp([800.0, float("inf")])
    array([-0., -0.])
    """
    x_arr = np.asarray(x, dtype=np.float64)
    small = x_arr <= LOG2
    out = np.where(
        small,
        np.log(-np.expm1(-np.where(small, x_arr, 1.0))),
        np.log1p(-np.exp(-np.where(small, 1.0, x_arr))),
    )
    if out.ndim == 0:
        return float(out)
    return out
