"""The generative model of section 4 ("Incorporating Noise") and the label inversions of S.2.

Section 4 of the paper draws labels from a fixed set of base-classifier outputs
``f_m(x_n) in {-1, +1}`` as follows (``mu_0``, ``mu_0'`` and ``zeta`` are the hyperparameters,
named ``weight_prior``, ``noise_grade_prior`` and ``clean_prior`` as in
:class:`viboost.variational.ModelPriors`):

1. ``c_m ~ v-Log([+1, -1], [0, 0], [mu_0, mu_0])`` independently, ``m = 1, ..., M``;
2. ``F = sum_m c_m f_m`` (the *margin* of each of the ``N`` instances);
3. ``xi ~ v-Log([+1, -1], [0, 0], [mu_0', mu_0'])`` (the *noise grade*);
4. ``theta ~ Beta(zeta_1, zeta_2)`` (the *type prior*);
5. ``w_n | theta ~ Bernoulli(theta)`` independently (1: true label, 0: noisy label);
6. ``y_n`` in {-1, +1} with ``P(y_n = +1) = sigmoid(w_n F_n + (1 - w_n) xi)``.

:func:`sample_model` runs these steps (step 3 of the paper, drawing the instances, is replaced by
the given matrix of base-classifier outputs) and returns every latent quantity in a
:class:`ModelDraw`.

The two-term v-Log draws are exact, not rejection-based: ``Z ~ v-Log([+1, -1], [0, 0], [a, b])``
has density proportional to ``sigmoid(z)^b (1 - sigmoid(z))^a``, so ``sigmoid(Z) ~ Beta(b, a)``
and ``Z = log G_1 - log G_2`` with independent ``G_1 ~ Gamma(b)``, ``G_2 ~ Gamma(a)``.
:func:`sample_two_term_vlog` computes ``log G`` directly with
:func:`viboost.distributions.log_gamma.log_gamma_variates` (for a shape ``k < 1`` through
``log Gamma(k) = log Gamma(k + 1) + log(U) / k``), so the draws stay finite and exact in the tails
even for tiny multiplicities, where ``sigmoid(Z)`` rounds to 0 or 1.

Every ``random_state`` here is resolved by :func:`viboost._utils.validation.check_random_state` (an
int seeds a ``numpy.random.RandomState``, as in scikit-learn; a Generator is used as is).

Supplement S.2 ("Accounting for label inversions") shows that the noise model also covers label
*inversion*: a label ``v`` kept with probability ``rho_1``, inverted with probability ``rho_2`` and
replaced by a Bernoulli(``r``) label with probability ``rho_3`` is distributed exactly as a label
kept with probability ``theta = 2 rho_1 + rho_3 - 1`` and otherwise replaced by a Bernoulli(``s``)
label (so ``s = sigmoid(xi)`` is the noise grade's probability of ``+1``).
:func:`inversion_to_noise` computes ``(theta, s)``, :func:`binary_asymmetric_channel` the
crossover probabilities ``(a, b)`` of the resulting binary asymmetric channel and
:func:`true_to_noisy_ratio` the ratio ``(1 + theta) / (1 - theta)`` of S.2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from viboost._utils.validation import (
    RandomStateLike,
    check_positive,
    check_probability,
    check_random_state,
)
from viboost.distributions.log_gamma import log_gamma_variates

__all__ = [
    "ModelDraw",
    "binary_asymmetric_channel",
    "inversion_to_noise",
    "sample_model",
    "sample_two_term_vlog",
    "true_to_noisy_ratio",
]

# Tolerance on sum(rho) == 1 in inversion_to_noise.
_RHO_SUM_ATOL = 1e-12


class ModelDraw(NamedTuple):
    """One draw of every variable of the generative model of section 4.

    Attributes
    ----------
    weights : ndarray of float64, shape (M,)
        The classifier weights ``c_1, ..., c_M``.
    noise_grade : float
        The noise grade ``xi`` (log-odds of ``+1`` for a noisy label).
    clean_proba : float
        The type prior ``theta`` (probability that a label is true).
    is_clean : ndarray of bool, shape (N,)
        The type selectors ``w_n`` (True: true label, False: noisy label).
    margin : ndarray of float64, shape (N,)
        ``F(x_n) = sum_m c_m f_m(x_n)``.
    y : ndarray of int64, shape (N,)
        The labels, in {-1, +1}.
    """

    weights: NDArray[np.float64]
    noise_grade: float
    clean_proba: float
    is_clean: NDArray[np.bool_]
    margin: NDArray[np.float64]
    y: NDArray[np.int64]


def _check_shapes(value: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return ``value`` as a float64 array if all its entries are finite and > 0."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be finite positive numbers, got {value!r}") from exc
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0.0):
        raise ValueError(f"{name} must be finite positive numbers, got {value!r}")
    return arr


def sample_two_term_vlog(
    a: ArrayLike,
    b: ArrayLike,
    size: int | tuple[int, ...] | None = None,
    random_state: RandomStateLike = None,
) -> float | NDArray[np.float64]:
    """Draw exactly from the two-term versatile logistic ``v-Log([+1, -1], [0, 0], [a, b])``.

    The density is proportional to ``(1 + e^z)^(-a) (1 + e^(-z))^(-b)
    = sigmoid(z)^b (1 - sigmoid(z))^a``, so ``sigmoid(Z) ~ Beta(b, a)``; ``a = b = 1`` is the
    standard logistic distribution. A draw is ``Z = log G_1 - log G_2`` with independent
    ``G_1 ~ Gamma(b)`` and ``G_2 ~ Gamma(a)``, which equals ``logit(B)`` for ``B = G_1 / (G_1 +
    G_2) ~ Beta(b, a)`` but never rounds ``B`` to 0 or 1. For shapes below 1, ``log G`` is drawn
    as ``log Gamma(k + 1) + log(U) / k`` (exact), so it does not underflow to ``-inf``.

    Parameters
    ----------
    a : float or array_like of float
        Multiplicity of the slope ``+1`` term (it weighs the right tail down); finite, > 0.
    b : float or array_like of float
        Multiplicity of the slope ``-1`` term (it weighs the left tail down); finite, > 0.
    size : int or tuple of ints, optional
        Output shape; ``a`` and ``b`` must broadcast to it. By default the broadcast shape of
        ``a`` and ``b`` (a single float if both are scalars).
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Source of randomness, resolved by :func:`viboost._utils.validation.check_random_state`: a
        Generator or RandomState is used as is, an int seeds a ``numpy.random.RandomState`` as
        scikit-learn does (reproducible draws), None uses numpy's global RandomState.

    Returns
    -------
    float or ndarray of float64
        The draws; a float if ``size`` is None and ``a`` and ``b`` are scalars. Finite for any
        multiplicities above about ``1e-300`` (below that ``log(U) / k`` can overflow).

    Raises
    ------
    ValueError
        If an entry of ``a`` or ``b`` is not a finite positive number, if ``a``, ``b`` and
        ``size`` do not broadcast together, or if ``random_state`` is of an unsupported kind.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import digamma
    >>> from viboost.gibbs.generative import sample_two_term_vlog
    >>> z = sample_two_term_vlog(2.0, 5.0, size=100_000, random_state=0)
    >>> z.shape, bool(abs(z.mean() - (digamma(5.0) - digamma(2.0))) < 0.02)
    ((100000,), True)
    >>> isinstance(sample_two_term_vlog(1.0, 1.0, random_state=1), float)
    True
    >>> tiny = sample_two_term_vlog(1e-3, 1e-3, size=1000, random_state=2)
    >>> bool(np.all(np.isfinite(tiny)))
    True
    >>> sample_two_term_vlog([1.0, 2.0, 3.0], 1.0, size=(4, 3), random_state=3).shape
    (4, 3)
    """
    a_arr = _check_shapes(a, "a")
    b_arr = _check_shapes(b, "b")
    rng = check_random_state(random_state)
    try:
        if size is None:
            shape = np.broadcast_shapes(a_arr.shape, b_arr.shape)
        else:
            shape = (
                (int(size),) if isinstance(size, int | np.integer) else tuple(int(s) for s in size)
            )
        a_full = np.broadcast_to(a_arr, shape)
        b_full = np.broadcast_to(b_arr, shape)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"a (shape {a_arr.shape}) and b (shape {b_arr.shape}) must broadcast to size {size!r}"
        ) from exc
    z = log_gamma_variates(b_full, rng) - log_gamma_variates(a_full, rng)
    if size is None and shape == ():
        return float(z)
    return z


def _check_base_outputs(base_outputs: ArrayLike) -> NDArray[np.float64]:
    try:
        h = np.asarray(base_outputs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("base_outputs must be a numeric N x M array of -1/+1 entries") from exc
    if h.ndim != 2:
        raise ValueError(f"base_outputs must be 2-D (N x M), got an array of shape {h.shape}")
    if h.shape[0] < 1:
        raise ValueError("base_outputs must have at least one row (N >= 1)")
    if np.any(np.isnan(h)):
        raise ValueError("base_outputs contains NaN; its entries must be -1 or +1")
    if not np.all((h == 1.0) | (h == -1.0)):
        bad = np.unique(h[(h != 1.0) & (h != -1.0)])[:5].tolist()
        raise ValueError(f"base_outputs entries must be -1 or +1, found {bad}")
    return h


def _check_clean_prior(clean_prior: object) -> tuple[float, float]:
    message = (
        f"clean_prior must be two finite positive numbers (zeta_1, zeta_2), got {clean_prior!r}"
    )
    if isinstance(clean_prior, (str, bytes)) or not isinstance(clean_prior, (Sequence, np.ndarray)):
        raise ValueError(message)
    if len(clean_prior) != 2:
        raise ValueError(message)
    try:
        zeta1 = check_positive(clean_prior[0], "clean_prior[0]")
        zeta2 = check_positive(clean_prior[1], "clean_prior[1]")
    except ValueError as exc:
        raise ValueError(message) from exc
    return zeta1, zeta2


def sample_model(
    base_outputs: ArrayLike,
    *,
    weight_prior: float = 1.0,
    noise_grade_prior: float = 1.0,
    clean_prior: tuple[float, float] = (1.0, 1.0),
    random_state: RandomStateLike = None,
) -> ModelDraw:
    """Draw weights, noise variables and labels from the generative model of section 4.

    Given the outputs ``f_m(x_n)`` of ``M`` base classifiers on ``N`` instances:

    1. ``c_m ~ v-Log([+1, -1], [0, 0], [mu_0, mu_0])`` iid (``mu_0 = weight_prior``);
    2. ``F = base_outputs @ c``;
    3. ``xi ~ v-Log([+1, -1], [0, 0], [mu_0', mu_0'])`` (``mu_0' = noise_grade_prior``);
    4. ``theta ~ Beta(zeta_1, zeta_2)`` (``zeta = clean_prior``);
    5. ``w_n ~ Bernoulli(theta)`` iid;
    6. ``y_n = +1`` with probability ``sigmoid(w_n F_n + (1 - w_n) xi)``, else ``-1``.

    The v-Log draws use :func:`sample_two_term_vlog` and are exact; ``theta`` is drawn as
    ``sigmoid(Z)`` with ``Z ~ v-Log([+1, -1], [0, 0], [zeta_2, zeta_1])``, i.e. Beta(zeta_1,
    zeta_2), which stays well defined for tiny ``zeta``.

    Parameters
    ----------
    base_outputs : array_like of shape (N, M)
        ``base_outputs[n, m] = f_m(x_n)`` in {-1, +1}; ``N >= 1``, ``M`` may be 0 (then
        ``F = 0``).
    weight_prior : float, default=1.0
        ``mu_0``, the multiplicity of the prior on each weight (1: standard logistic).
    noise_grade_prior : float, default=1.0
        ``mu_0'``, the multiplicity of the prior on the noise grade ``xi``.
    clean_prior : tuple of two floats, default=(1.0, 1.0)
        ``(zeta_1, zeta_2)``, the Beta prior on the type prior ``theta``; its mean
        ``zeta_1 / (zeta_1 + zeta_2)`` is the expected share of true labels.
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Source of randomness, resolved by :func:`viboost._utils.validation.check_random_state`: a
        Generator or RandomState is used as is, an int seeds a ``numpy.random.RandomState`` as
        scikit-learn does (reproducible draws), None uses numpy's global RandomState.

    Returns
    -------
    ModelDraw
        ``weights`` (M,), ``noise_grade``, ``clean_proba``, ``is_clean`` (N,) bool, ``margin``
        (N,) and ``y`` (N,) int64 in {-1, +1}.

    Raises
    ------
    ValueError
        If ``base_outputs`` is not 2-D, has no row, contains NaN or an entry other than -1 or +1;
        if ``weight_prior`` or ``noise_grade_prior`` is not a finite positive number; if
        ``clean_prior`` is not two finite positive numbers; or if ``random_state`` is of an
        unsupported kind.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.gibbs.generative import sample_model
    >>> H = np.array([[1, -1, 1], [-1, -1, 1], [1, 1, -1], [-1, 1, 1]])
    >>> draw = sample_model(H, clean_prior=(9.0, 1.0), random_state=0)
    >>> draw.weights.shape, draw.is_clean.dtype, draw.y.shape
    ((3,), dtype('bool'), (4,))
    >>> bool(np.allclose(draw.margin, H @ draw.weights)), set(draw.y.tolist()) <= {-1, 1}
    (True, True)
    >>> 0.0 <= draw.clean_proba <= 1.0
    True
    >>> again = sample_model(H, clean_prior=(9.0, 1.0), random_state=0)
    >>> bool(np.array_equal(draw.y, again.y)) and draw.noise_grade == again.noise_grade
    True
    >>> sample_model(np.empty((2, 0)), random_state=0).margin.tolist()
    [0.0, 0.0]
    """
    h = _check_base_outputs(base_outputs)
    mu0 = check_positive(weight_prior, "weight_prior")
    mu0_noise = check_positive(noise_grade_prior, "noise_grade_prior")
    zeta1, zeta2 = _check_clean_prior(clean_prior)
    rng = check_random_state(random_state)
    n_rows, n_cols = h.shape

    # One vectorised draw of the M weights, xi and logit(theta), all independent.  theta uses
    # sigmoid(Z) ~ Beta(b, a) for Z ~ v-Log([+1, -1], [0, 0], [a, b]).
    a = np.concatenate([np.full(n_cols, mu0), [mu0_noise, zeta2]])
    b = np.concatenate([np.full(n_cols, mu0), [mu0_noise, zeta1]])
    z = np.asarray(sample_two_term_vlog(a, b, random_state=rng))
    weights = z[:n_cols].copy()
    margin = h @ weights  # all zeros when M == 0
    noise_grade = float(z[n_cols])
    clean_proba = float(expit(z[n_cols + 1]))
    is_clean = np.asarray(rng.uniform(size=n_rows)) < clean_proba
    p_plus = expit(np.where(is_clean, margin, noise_grade))
    y = np.where(rng.uniform(size=n_rows) < p_plus, 1, -1).astype(np.int64)
    return ModelDraw(
        weights=weights.astype(np.float64, copy=False),
        noise_grade=noise_grade,
        clean_proba=clean_proba,
        is_clean=is_clean,
        margin=np.asarray(margin, dtype=np.float64),
        y=y,
    )


def inversion_to_noise(rho: ArrayLike, r: float) -> tuple[float, float]:
    """Map the label-inversion model of S.2 to the noise model of section 4.

    In the inversion model a label ``v`` becomes ``y = v`` with probability ``rho_1`` (equality),
    ``y = -v`` with probability ``rho_2`` (inversion) and a Bernoulli label (``+1`` with
    probability ``r``) with probability ``rho_3``. The same conditional law ``P(y | v)`` arises
    when ``y = v`` with probability ``theta`` and otherwise ``y`` is ``+1`` with probability
    ``s``, where

        ``theta = 2 rho_1 + rho_3 - 1 = rho_1 - rho_2``,
        ``s = (1 - rho_1 - rho_3 (1 - r)) / (2 - 2 rho_1 - rho_3)
        = (rho_2 + rho_3 r) / (2 rho_2 + rho_3)``.

    ``theta`` is the type prior of section 4 and ``s = sigmoid(xi)`` fixes the noise grade
    ``xi = logit(s)``. The right-hand forms above are evaluated: they equal the paper's for a
    probability vector and avoid its cancellations (``theta`` is exactly 0 when
    ``rho_1 == rho_2``).

    Parameters
    ----------
    rho : array_like of 3 floats
        ``(rho_1, rho_2, rho_3)``: probabilities of equality, inversion and an independent
        Bernoulli(``r``) trial; nonnegative, summing to 1, with ``rho_1 >= rho_2``.
    r : float
        Probability in [0, 1] of ``+1`` in the Bernoulli trial.

    Returns
    -------
    theta : float
        Probability in [0, 1] that the label is kept.
    s : float
        Probability in [0, 1] that a label that is not kept is ``+1``. When ``theta == 1``
        (``rho_2 = rho_3 = 0``) no label is replaced and ``s`` is arbitrary; ``s = r`` is then
        returned.

    Raises
    ------
    ValueError
        If ``rho`` is not 3 finite nonnegative numbers summing to 1 (within 1e-12), if ``r`` is
        not in [0, 1], or if ``rho_2 > rho_1``: then ``theta < 0``, a channel that inverts labels
        more often than it keeps them, which the noise model cannot express.

    Examples
    --------
    >>> from viboost.gibbs.generative import inversion_to_noise
    >>> inversion_to_noise([0.7, 0.1, 0.2], 0.5)
    (0.6, 0.5)
    >>> theta, s = inversion_to_noise([0.5, 0.25, 0.25], 1.0)
    >>> theta, round(s, 12)
    (0.25, 0.666666666667)
    >>> inversion_to_noise([1.0, 0.0, 0.0], 0.3)
    (1.0, 0.3)
    """
    try:
        values = np.asarray(rho, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"rho must be a probability vector of 3 numbers, got {rho!r}") from exc
    if values.shape != (3,):
        raise ValueError(f"rho must be a probability vector of 3 numbers, got shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values < 0.0):
        raise ValueError(f"rho must have finite nonnegative entries, got {values.tolist()}")
    total = float(values.sum())
    if abs(total - 1.0) > _RHO_SUM_ATOL:
        raise ValueError(f"rho must sum to 1 (within {_RHO_SUM_ATOL:g}), got sum {total!r}")
    r = check_probability(r, "r")
    rho1, rho2, rho3 = (float(v) for v in values)
    if rho2 > rho1:
        raise ValueError(
            f"rho_2 = {rho2!r} > rho_1 = {rho1!r} gives theta = rho_1 - rho_2 < 0: the noise model "
            "cannot express a channel that inverts labels more often than it keeps them"
        )
    theta = rho1 - rho2
    flipped_or_random = 2.0 * rho2 + rho3  # = 1 - theta
    if flipped_or_random == 0.0:
        return theta, r
    s = (rho2 + rho3 * r) / flipped_or_random
    return theta, min(max(s, 0.0), 1.0)


def binary_asymmetric_channel(theta: float, s: float) -> tuple[float, float]:
    """Crossover probabilities of the binary asymmetric channel of S.2.

    A label ``v`` is kept with probability ``theta`` and otherwise replaced by ``+1`` with
    probability ``s`` (``-1`` with probability ``1 - s``), so

        ``a = P(Y = -1 | V = +1) = (1 - theta) (1 - s)``,
        ``b = P(Y = +1 | V = -1) = (1 - theta) s``.

    Parameters
    ----------
    theta : float
        Probability in [0, 1] that the label is kept (the type prior).
    s : float
        Probability in [0, 1] that a replaced label is ``+1`` (``sigmoid`` of the noise grade).

    Returns
    -------
    a : float
        ``P(Y = -1 | V = +1)``.
    b : float
        ``P(Y = +1 | V = -1)``.

    Raises
    ------
    ValueError
        If ``theta`` or ``s`` is not a number in [0, 1].

    Examples
    --------
    >>> from viboost.gibbs.generative import binary_asymmetric_channel, inversion_to_noise
    >>> binary_asymmetric_channel(0.5, 0.25)
    (0.375, 0.125)
    >>> a, b = binary_asymmetric_channel(*inversion_to_noise([0.7, 0.1, 0.2], 0.5))
    >>> round(a, 12), round(b, 12)  # rho_2 + rho_3 (1 - r), rho_2 + rho_3 r
    (0.2, 0.2)
    """
    theta = check_probability(theta, "theta")
    s = check_probability(s, "s")
    return (1.0 - theta) * (1.0 - s), (1.0 - theta) * s


def true_to_noisy_ratio(theta: float) -> float:
    """Ratio of labels that equal ``v`` to labels that differ from it, for balanced data (S.2).

    With equally many ``v = +1`` and ``v = -1`` and the channel of
    :func:`binary_asymmetric_channel`, the ratio is
    ``(2 - (a + b)) / (a + b) = (2 - (1 - theta)) / (1 - theta) = (1 + theta) / (1 - theta)``,
    which does not depend on ``s`` and is at least 1 (the paper's ratio of true to noisy
    labels; a replaced label agrees with ``v`` half the time on balanced data).

    Parameters
    ----------
    theta : float
        Probability in [0, 1] that a label is kept (the type prior).

    Returns
    -------
    float
        ``(1 + theta) / (1 - theta)``; ``inf`` for ``theta == 1``.

    Raises
    ------
    ValueError
        If ``theta`` is not a number in [0, 1].

    Examples
    --------
    >>> from viboost.gibbs.generative import true_to_noisy_ratio
    >>> true_to_noisy_ratio(0.0), true_to_noisy_ratio(0.5), true_to_noisy_ratio(1.0)
    (1.0, 3.0, inf)
    """
    theta = check_probability(theta, "theta")
    if theta == 1.0:
        return math.inf
    return (1.0 + theta) / (1.0 - theta)
