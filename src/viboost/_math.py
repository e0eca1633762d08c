"""Small numerically stable helpers shared across :mod:`viboost`."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["LOG2", "softplus", "log_cosh", "log_weighted_sum_exp"]

#: ``log(2)`` as a Python float.
LOG2: float = float(np.log(2.0))


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
    >>> from viboost._math import softplus
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
    >>> from viboost._math import log_cosh
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

    Parameters
    ----------
    values : array_like
        Exponents ``v_i`` (1-D, finite).
    weights : array_like
        Nonnegative weights ``w_i``, same length, not all zero.

    Returns
    -------
    float
        ``max(v) + log(sum_i w_i exp(v_i - max(v)))``.

    Examples
    --------
    >>> from viboost._math import log_weighted_sum_exp
    >>> print(f"{log_weighted_sum_exp([1e4, 1e4], [1.0, 3.0]) - 1e4:.6f}")
    1.386294
    """
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    v_max = float(np.max(v))
    return v_max + float(np.log(w @ np.exp(v - v_max)))
