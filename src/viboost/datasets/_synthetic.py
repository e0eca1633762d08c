"""The synthetic data sets of section 7 of the paper: *step* and *Long-Servedio*."""

from __future__ import annotations

from typing import Literal, overload

import numpy as np
from scipy.special import expit

from viboost._utils.validation import (
    RandomStateLike,
    check_int,
    check_probability,
    check_random_state,
    check_real,
)

__all__ = ["make_long_servedio", "make_step"]

_STEP_X = np.arange(-99, 100, 2, dtype=np.float64)  # -99, -97, ..., 99: 100 points


@overload
def make_step(
    theta: float,
    noise_grade: float = ...,
    *,
    random_state: RandomStateLike = ...,
    return_flags: Literal[False] = ...,
) -> tuple[np.ndarray, np.ndarray]: ...


@overload
def make_step(
    theta: float,
    noise_grade: float = ...,
    *,
    random_state: RandomStateLike = ...,
    return_flags: Literal[True],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def make_step(
    theta: float,
    noise_grade: float = np.log(3),
    *,
    random_state: RandomStateLike = None,
    return_flags: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate the *step* data set of section 7: 100 points, a step function and label noise.

    The inputs are the 100 odd numbers ``x = -99, -97, ..., 97, 99``. The model of section 4 is
    followed with ``F(x) = +inf`` for ``x > 0`` and ``F(x) = -inf`` for ``x < 0``, so a *true*
    label is ``+1`` for ``x > 0`` and ``-1`` for ``x < 0``. For each point independently:

    1. draw its type ``w ~ Bernoulli(theta)`` (1 = true label, 0 = noisy label);
    2. if ``w = 1`` the label is the true one, ``sign(x)``;
    3. if ``w = 0`` the label is noisy: ``+1`` with probability ``sigmoid(noise_grade)``, else
       ``-1``, whatever ``x`` is (the noise grade is the log-odds of a noisy ``+1``).

    The paper uses ``noise_grade = log 3`` (a noisy label is ``+1`` with probability 3/4) and
    varies ``theta``, the type prior.

    Parameters
    ----------
    theta : float
        Probability in [0, 1] that a label is true (the type prior). 1 gives the exact step, 0
        pure noise.
    noise_grade : float, default=log(3)
        Log-odds ``log(P(y=+1) / P(y=-1))`` of a noisy label; ``+inf`` and ``-inf`` make every
        noisy label ``+1`` or ``-1``.
    random_state : int, RandomState instance, Generator or None, default=None
        Seed or generator for the draws; pass an int for reproducible output. Resolved by
        :func:`viboost._utils.validation.check_random_state` (a Generator or RandomState is used as
        is, an int seeds a ``numpy.random.RandomState`` as in scikit-learn).
    return_flags : bool, default=False
        If True, also return which labels are true (``w = 1``).

    Returns
    -------
    X : ndarray of shape (100, 1)
        The points ``-99, -97, ..., 99`` as float64, in increasing order (the same every call).
    y : ndarray of shape (100,)
        Labels in {-1, +1}, int64.
    is_true : ndarray of bool, shape (100,)
        True where the label was drawn as a true label (``w = 1``); only if ``return_flags``.
        A noisy label can still agree with ``sign(x)`` by chance.

    Raises
    ------
    ValueError
        If ``theta`` is not a number in [0, 1] or ``noise_grade`` is NaN or not a number.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.datasets import make_step
    >>> X, y = make_step(1.0, random_state=0)
    >>> X.shape, y.shape, X[:3, 0].tolist(), float(X[-1, 0])
    ((100, 1), (100,), [-99.0, -97.0, -95.0], 99.0)
    >>> bool(np.array_equal(y, np.where(X[:, 0] > 0, 1, -1)))
    True
    >>> X, y, is_true = make_step(0.5, random_state=0, return_flags=True)
    >>> sorted(np.unique(y).tolist()), is_true.dtype
    ([-1, 1], dtype('bool'))
    >>> bool(np.all(y[is_true] == np.sign(X[is_true, 0])))
    True
    """
    theta = check_probability(theta, "theta")
    noise_grade = check_real(noise_grade, "noise_grade")
    rng = check_random_state(random_state)
    n_samples = _STEP_X.size
    is_true = rng.random(n_samples) < theta  # w_n ~ Bernoulli(theta)
    noisy_plus = rng.random(n_samples) < expit(noise_grade)  # P(y = +1 | noisy) = sigmoid(xi)
    true_y = np.where(_STEP_X > 0, 1, -1)
    noisy_y = np.where(noisy_plus, 1, -1)
    y = np.where(is_true, true_y, noisy_y).astype(np.int64)
    X = _STEP_X.reshape(-1, 1).copy()
    if return_flags:
        return X, y, is_true
    return X, y


def _random_bv(
    rng: np.random.RandomState | np.random.Generator, n_neg: np.ndarray, width: int
) -> np.ndarray:
    """Rows of +-1 of length ``width`` with ``n_neg[i]`` entries -1 at random places in row ``i``.

    The vectorised ``get_random_bv`` of the Matlab code: ranking i.i.d. uniform keys gives a
    uniformly random permutation of each row.
    """
    keys = rng.random((n_neg.size, width))
    ranks = keys.argsort(axis=1).argsort(axis=1)
    return np.where(ranks < n_neg[:, None], -1.0, 1.0)


def make_long_servedio(
    m: int,
    n: int = 10,
    eta: float = 0.2,
    *,
    random_state: RandomStateLike = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Generate the *Long-Servedio* data set: the paper's transcription of its Matlab generator.

    This is ``longservedio(m, n, eta)`` of the paper's supplement ("Matlab code for
    Long-Servedio Data"), after Schapire & Freund (2012, section 12.3) and Long & Servedio
    (2010), vectorised with NumPy. Each of the ``m`` rows has ``2n + 11`` features in {-1, +1}:
    a block ``x1`` of length ``2n + 1`` followed by a block ``x2`` of length 10, drawn from one
    of three components:

    ==============  ==========================  ===========================
    probability     ``x1`` (length 2n + 1)      ``x2`` (length 10)
    ==============  ==========================  ===========================
    1/4             all ones (sum ``2n + 1``)   ``get_random_bv(10, 0)``
    1/2             ``get_random_bv(2n+1, 1)``  ``get_random_bv(10, -2)``
    1/4             ``get_random_bv(2n+1, 1)``  all ones (sum 10)
    ==============  ==========================  ===========================

    ``get_random_bv(n, k)`` puts ``(k + n) / 2`` entries -1 and the others +1 at random
    places. Its comment says the sum is ``k``, but what the code does gives the sum ``-k``; this
    function does what the code does. So the block sums are, per component: ``x1`` = ``2n + 1``
    and ``x2`` = 0 (first); ``x1`` = -1 and ``x2`` = +2 (second); ``x1`` = -1 and ``x2`` = 10
    (third). The three components can be told apart by the sum of ``x2``: 0, 2 or 10.

    The label does not depend on ``x``: it is ``+1`` with probability ``1 - eta`` and ``-1``
    with probability ``eta`` (the Matlab ``if rand < 1 - eta``), so ``eta`` is the Bayes error.

    Parameters
    ----------
    m : int
        Number of rows, at least 1 (the paper draws 1,200).
    n : int, default=10
        Size parameter, at least 0: the data have ``2n + 11`` features (31 in the paper).
    eta : float, default=0.2
        Probability in [0, 1] of the label -1 (the paper's "noise level" 0.20).
    random_state : int, RandomState instance, Generator or None, default=None
        Seed or generator for the draws; pass an int for reproducible output. Resolved by
        :func:`viboost._utils.validation.check_random_state` (a Generator or RandomState is used as
        is, an int seeds a ``numpy.random.RandomState`` as in scikit-learn). The stream of
        draws differs from Matlab's, so Matlab's numbers are not reproduced exactly.

    Returns
    -------
    X : ndarray of shape (m, 2n + 11)
        The features, float64 values -1.0 and +1.0.
    y : ndarray of shape (m,)
        Labels in {-1, +1}, int64.

    Raises
    ------
    ValueError
        If ``m`` is not an integer >= 1, ``n`` not an integer >= 0, or ``eta`` not in [0, 1].

    Notes
    -----
    Noise grade. Section 7 says this set corresponds to "a type prior of 0 (always reassigning
    a random label) and a noise grade of about -1.4". Section 4 defines the noise grade as
    ``xi = log(P(y=+1) / P(y=-1))`` for a noisy label. Here every label is noise, and it is
    ``+1`` with probability ``1 - eta = 0.8``, so under section 4's convention the noise grade
    is ``log(0.8 / 0.2) = +log 4 = +1.386``, not -1.386. The paper's -1.4 has the opposite
    sign: it is ``log(eta / (1 - eta))``, the log-odds of the label -1.

    References
    ----------
    P. M. Long and R. A. Servedio (2010). Random classification noise defeats all convex
    potential boosters. Machine Learning 78(3), 287-304.

    R. E. Schapire and Y. Freund (2012). Boosting: Foundations and Algorithms. MIT Press,
    section 12.3.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.datasets import make_long_servedio
    >>> X, y = make_long_servedio(1200, random_state=0)
    >>> X.shape, X.dtype, y.shape
    ((1200, 31), dtype('float64'), (1200,))
    >>> sorted(np.unique(X).tolist()), sorted(np.unique(y).tolist())
    ([-1.0, 1.0], [-1, 1])
    >>> sorted(set(X[:, 21:].sum(axis=1).astype(int).tolist()))  # x2 sums: the 3 components
    [0, 2, 10]
    >>> sorted(set(X[:, :21].sum(axis=1).astype(int).tolist()))  # x1 sums: -1 or 2n + 1
    [-1, 21]
    """
    m = check_int(m, "m", 1)
    n = check_int(n, "n", 0)
    eta = check_probability(eta, "eta")
    rng = check_random_state(random_state)
    k = 2 * n + 1
    t = rng.random(m)
    component = np.where(t < 1 / 4, 0, np.where(t < 3 / 4, 1, 2))
    # number of -1 entries, (k + n) / 2 of get_random_bv(n, k), per component (ones: none)
    x1_neg = np.array([0, (1 + k) // 2, (1 + k) // 2])[component]
    x2_neg = np.array([(0 + 10) // 2, (-2 + 10) // 2, 0])[component]
    x1 = _random_bv(rng, x1_neg, k)
    x2 = _random_bv(rng, x2_neg, 10)
    X = np.hstack([x1, x2])
    s = rng.random(m)
    y = np.where(s < 1 - eta, 1, -1).astype(np.int64)
    return X, y
