"""Draws of ``log G`` for ``G ~ Gamma(shape, 1)``, exact and finite even for tiny shapes.

This module owns the one formula by which viboost draws the logarithm of a Gamma variate, in
its two forms side by side:

- :func:`log_gamma_variates`: numpy, vectorised over an array of shapes; the generative model
  (:mod:`viboost.gibbs.generative`) draws its two-term v-Log variables with it;
- :func:`log_gamma_variate`: compiled (numba), one scalar draw from a ``numpy.random.Generator``;
  the Gibbs sampler's kernel (:mod:`viboost.gibbs.kernels`) draws the noise grade ``xi`` and the
  type prior ``theta`` of supplement S.3 with it.

For ``shape >= 1`` the draw is ``log G`` of numpy's Gamma variate. Below 1, ``G`` itself would
underflow to 0 for tiny shapes (its draws are of the size of ``U**(1/shape)``), so the draw is
``log G' + log(U) / shape`` with ``G' ~ Gamma(shape + 1)`` and ``U`` uniform on ``(0, 1]``: the
identity ``G = G' U^(1/shape)`` in distribution is exact for any ``shape > 0``. The difference
``log G_1 - log G_2`` of two independent draws with shapes ``b`` and ``a`` is the two-term v-Log
``v-Log([+1, -1], [0, 0], [a, b])`` (its sigmoid is Beta(b, a), section 3 and supplement S.1.1),
drawn exactly and in log-odds form.

The two forms consume their random numbers in different orders (the numpy form draws all the
Gamma variates first, then the uniforms of the small shapes), so they agree in distribution, not
draw by draw.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["SMALL_SHAPE", "log_gamma_variate", "log_gamma_variates"]

#: Below this shape, ``log G`` is drawn as ``log G' + log(U) / shape``, ``G' ~ Gamma(shape + 1)``.
SMALL_SHAPE = 1.0


def log_gamma_variates(
    shape: NDArray[np.float64], rng: np.random.Generator | np.random.RandomState
) -> NDArray[np.float64]:
    """``log G`` with ``G ~ Gamma(shape, 1)`` elementwise, without underflow for tiny shapes.

    Parameters
    ----------
    shape : ndarray of float64
        Positive finite shapes (not checked); the output has the same shape.
    rng : numpy.random.Generator or numpy.random.RandomState
        Source of randomness: one Gamma variate per entry, then one uniform per entry below
        :data:`SMALL_SHAPE`.

    Returns
    -------
    ndarray of float64

    Examples
    --------
    >>> import numpy as np
    >>> x = log_gamma_variates(np.array([1e-3, 2.0]), np.random.RandomState(0))
    >>> x.shape, bool(np.all(np.isfinite(x)))
    ((2,), True)
    """
    flat = np.ravel(shape)
    small = flat < SMALL_SHAPE
    gamma_shape = np.where(small, flat + 1.0, flat)
    log_g = np.log(np.asarray(rng.gamma(gamma_shape, 1.0, size=flat.shape), dtype=np.float64))
    if np.any(small):
        # 1 - U lies in (0, 1] for U in [0, 1), so its log is finite.
        u = np.asarray(rng.uniform(size=int(np.count_nonzero(small))), dtype=np.float64)
        log_g[small] += np.log1p(-u) / flat[small]
    return log_g.reshape(shape.shape)


@njit(cache=True, nogil=True)
def log_gamma_variate(shape, rng):
    """``log G`` with ``G ~ Gamma(shape, 1)``; for ``shape < 1`` via ``G = G' U^(1/shape)``,
    ``G' ~ Gamma(shape + 1)``, so tiny shapes give a finite (very negative) logarithm."""
    if shape >= SMALL_SHAPE:  # a global: numba compiles it in as the constant 1.0
        return math.log(rng.gamma(shape, 1.0))
    return math.log(rng.gamma(shape + 1.0, 1.0)) + math.log(1.0 - rng.random()) / shape
