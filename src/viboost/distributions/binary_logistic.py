"""The binary logistic distribution b-Log(z, beta, gamma) (section 3 of the paper, eq. (2)).

This module owns :class:`BinaryLogistic` (the likelihood of ``+-1`` labels given a latent
``z``: its pmf and label draws) and :func:`validate_labels`, the check of a label vector that
:meth:`viboost.distributions.VersatileLogistic.condition` shares.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, log_expit

from viboost._utils.validation import RandomStateLike, as_float_vector, check_random_state

__all__ = ["BinaryLogistic", "validate_labels"]


def validate_labels(y: ArrayLike, n_obs: int) -> NDArray[np.float64]:
    """Return labels as a float64 array of shape ``(n_obs,)``, checking they lie in {-1, +1}.

    Parameters
    ----------
    y : array_like
        Labels; a scalar is broadcast to every observation.
    n_obs : int
        Number of observations expected.

    Returns
    -------
    ndarray of shape (n_obs,)
        The labels as float64.

    Raises
    ------
    ValueError
        If ``y`` does not broadcast to ``(n_obs,)`` or holds a value other than -1 or +1.

    Examples
    --------
    >>> from viboost.distributions.binary_logistic import validate_labels
    >>> validate_labels([1, -1, 1], 3)
    array([ 1., -1.,  1.])
    """
    y_arr = np.asarray(y, dtype=np.float64)
    if y_arr.ndim > 1:
        raise ValueError(f"y must be a scalar or a 1-D array; got shape {y_arr.shape}")
    try:
        y_arr = np.broadcast_to(y_arr, (n_obs,))
    except ValueError:
        raise ValueError(
            f"y has {y_arr.shape[0]} entries but there are {n_obs} observations"
        ) from None
    if not np.all((y_arr == 1.0) | (y_arr == -1.0)):
        raise ValueError("labels y must all be -1 or +1")
    return y_arr


class BinaryLogistic:
    r"""Vectorised binary logistic distribution b-Log(z, beta, gamma).

    For a latent real ``z``, observation ``n`` takes the value ``y`` in {-1, +1} with
    probability

    .. math:: p(y \mid z) = \frac{1}{1 + \exp[-y \beta_n (z - \gamma_n)]} .

    Parameters
    ----------
    slope : array_like
        Slopes ``beta_n``; a 1-D array of length ``n_obs`` (scalars are broadcast).
    knot : array_like
        Knots ``gamma_n``; a 1-D array of length ``n_obs`` (scalars are broadcast).

    Attributes
    ----------
    slope : ndarray of shape (n_obs,)
        Read-only float64 slopes.
    knot : ndarray of shape (n_obs,)
        Read-only float64 knots.

    Raises
    ------
    ValueError
        If the arrays are not 1-D, have incompatible lengths, or contain non-finite values.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.distributions import BinaryLogistic
    >>> lik = BinaryLogistic(slope=[1.0, -2.0], knot=0.5)
    >>> lik.n_obs
    2
    >>> p_plus = lik.pmf(1, 0.5)  # at z == knot both labels are equally likely
    >>> p_plus
    array([0.5, 0.5])
    >>> bool(np.allclose(lik.pmf(1, 3.0) + lik.pmf(-1, 3.0), 1.0))
    True
    """

    def __init__(self, slope: ArrayLike, knot: ArrayLike) -> None:
        slope_arr = as_float_vector("slope", slope)
        knot_arr = as_float_vector("knot", knot)
        try:
            slope_arr, knot_arr = np.broadcast_arrays(slope_arr, knot_arr)
        except ValueError:
            raise ValueError(
                "slope and knot must have equal lengths; got "
                f"{slope_arr.shape[0]} and {knot_arr.shape[0]}"
            ) from None
        for name, arr in (("slope", slope_arr), ("knot", knot_arr)):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} must contain only finite values")
        self._slope = np.array(slope_arr, dtype=np.float64, copy=True)
        self._knot = np.array(knot_arr, dtype=np.float64, copy=True)
        self._slope.setflags(write=False)
        self._knot.setflags(write=False)

    @property
    def slope(self) -> NDArray[np.float64]:
        """Read-only slopes ``beta_n``, shape ``(n_obs,)``."""
        return self._slope

    @property
    def knot(self) -> NDArray[np.float64]:
        """Read-only knots ``gamma_n``, shape ``(n_obs,)``."""
        return self._knot

    @property
    def n_obs(self) -> int:
        """Number of observations."""
        return int(self._slope.shape[0])

    def _margin(self, z: ArrayLike) -> NDArray[np.float64]:
        z_arr = np.asarray(z, dtype=np.float64)
        return self._slope * (z_arr - self._knot)

    def logpmf(self, y: ArrayLike, z: ArrayLike) -> NDArray[np.float64]:
        """Log-probability of each label given the latent value.

        Parameters
        ----------
        y : array_like
            Labels in {-1, +1}, shape ``(n_obs,)`` (a scalar is broadcast).
        z : float or array_like
            Latent value; a scalar or an array broadcastable against ``(n_obs,)``.

        Returns
        -------
        ndarray
            ``log p(y_n | z) = log_expit(y_n beta_n (z - gamma_n))`` per observation.

        Examples
        --------
        >>> from viboost.distributions import BinaryLogistic
        >>> lik = BinaryLogistic(slope=1.0, knot=0.0)
        >>> lik.logpmf([1], 1e4)
        array([-0.])
        >>> lik.logpmf([-1], 1e4)
        array([-10000.])
        """
        y_arr = validate_labels(y, self.n_obs)
        return log_expit(y_arr * self._margin(z))

    def pmf(self, y: ArrayLike, z: ArrayLike) -> NDArray[np.float64]:
        """Probability of each label given the latent value.

        Parameters
        ----------
        y : array_like
            Labels in {-1, +1}, shape ``(n_obs,)`` (a scalar is broadcast).
        z : float or array_like
            Latent value; a scalar or an array broadcastable against ``(n_obs,)``.

        Returns
        -------
        ndarray
            ``p(y_n | z) = expit(y_n beta_n (z - gamma_n))`` per observation.

        Examples
        --------
        >>> from viboost.distributions import BinaryLogistic
        >>> BinaryLogistic(slope=2.0, knot=1.0).pmf(1, 1.0)
        array([0.5])
        """
        y_arr = validate_labels(y, self.n_obs)
        return expit(y_arr * self._margin(z))

    def rvs(
        self,
        z: ArrayLike,
        random_state: RandomStateLike = None,
    ) -> NDArray[np.int64]:
        """Draw one label per observation.

        Parameters
        ----------
        z : float or array_like
            Latent value; a scalar or an array broadcastable against ``(n_obs,)``.
        random_state : int, numpy.random.RandomState, numpy.random.Generator or None, default=None
            Seed or generator, resolved by :func:`viboost._utils.validation.check_random_state`: a
            Generator or RandomState is used as is, an int seeds a ``numpy.random.RandomState``
            as scikit-learn does, None uses numpy's global RandomState.

        Returns
        -------
        ndarray of int64
            Labels in {-1, +1}, one per observation.

        Examples
        --------
        >>> from viboost.distributions import BinaryLogistic
        >>> lik = BinaryLogistic(slope=[50.0, -50.0], knot=0.0)
        >>> lik.rvs(1.0, random_state=0)
        array([ 1, -1])
        """
        rng = check_random_state(random_state)
        p_plus = expit(np.broadcast_to(self._margin(z), (self.n_obs,)))
        u = rng.uniform(size=p_plus.shape)
        return np.where(u < p_plus, 1, -1).astype(np.int64)

    def __repr__(self) -> str:
        def short(a: np.ndarray) -> str:
            return np.array2string(a, threshold=6, edgeitems=2, separator=", ")

        return f"BinaryLogistic(slope={short(self._slope)}, knot={short(self._knot)})"
