"""The class-conditional channel for K classes: a noise matrix fitted by the marginal likelihood.

The paper's noise model draws a noisy label from one distribution pi whatever the true class
(:mod:`viboost.noise_fit.class_calibration`): its channel from true class i to given class j is
``theta 1{i = j} + (1 - theta) pi_j``. Noise that confuses one class with one other (a
annotator who mixes up two crops) is outside that model. Here the channel is a full noise matrix
``T[j, i] = P(given j | true i)``, each column with a Dirichlet prior, the true class latent:

    p(y_n | x_n) = sum_i softmax_i(F(x_n)) T[y_n, i],   F = b H + c,

with ``c_k = log p0_k`` and ``p0 = T^{-1} 1 / K``: where a booster fitted to the given labels is
indifferent (``H = 0``) they are uniform over the classes (the same rule as the paper's channel,
of which this is the general form: the two agree for K = 2). Column i's prior is
Dirichlet(zeta_1 on the diagonal, zeta_2 / (K - 1) off it), so that the probability ``T[i, i]``
that a label of true class i is kept has theta's prior, Beta(zeta). The posterior of row n's
true class is proportional to ``softmax_i(F) T[y_n, i]``; the probability that its label is
right, ``P(true = y_n)``, takes the place of phi_n in the refit.

:func:`calibrate_class_channel` maximises the posterior over ``T`` (the log-odds of each
off-diagonal entry against its column's diagonal) and ``log b`` by L-BFGS with the gradient in
closed form, and gives a Laplace approximation of the posterior and its log evidence, by which
the cross-fit chooses between this channel and the paper's
(:attr:`~viboost.noise_fit.class_calibration.ClassNoiseCalibration.log_evidence`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
from scipy.special import gammaln, log_softmax

from viboost._utils.parallel import sum_chunks, threaded_kernel
from viboost._utils.validation import RandomStateLike, spawn_generator
from viboost.noise_fit.calibration import interval_subset
from viboost.noise_fit.class_calibration import (
    KClassChannel,
    class_inputs,
    draw_joints,
    expected_joints,
    joint_rates,
    noise_posteriors,
    rate_interval,
    softmax_row,
    true_class_log_proba,
    true_class_row,
)
from viboost.noise_fit.laplace import dirichlet_laplace_gap, laplace_draws, laplace_posterior
from viboost.variational.priors import ModelPriors

__all__ = ["ClassChannelCalibration", "calibrate_class_channel"]

_LOG_SCALE_PRIOR_SD = 3.0
_P0_MIN = 1e-9
_LOG_ODDS_BOUND = (-30.0, 30.0)
_SCALE_BOUND = (-20.0, 20.0)


def _bounds(n_classes: int) -> np.ndarray:
    return np.array([_LOG_ODDS_BOUND] * (n_classes * (n_classes - 1)) + [_SCALE_BOUND])


def _channel(params: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(T, log T)``: each column the softmax of its off-diagonal log-odds against a diagonal
    of 0."""
    v = np.zeros((n_classes, n_classes))
    v[~np.eye(n_classes, dtype=bool)] = params[:-1]
    log_t = log_softmax(v, axis=0)
    return np.exp(log_t), log_t


def _dirichlet(priors: ModelPriors, n_classes: int) -> np.ndarray:
    """The columns' Dirichlet parameters: zeta_1 on the diagonal, zeta_2 / (K - 1) off it."""
    zeta1, zeta2 = priors.clean
    alpha = np.full((n_classes, n_classes), zeta2 / (n_classes - 1))
    np.fill_diagonal(alpha, zeta1)
    return alpha


def _indifferent(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p0 = T^{-1} 1 / K`` (unclamped), ``T^{-1}``, and which ``p0_k`` are held at 1e-9
    (those below it: the intercept's derivatives there are 0)."""
    n_classes = t.shape[0]
    try:
        inverse = np.linalg.inv(t)
    except np.linalg.LinAlgError:  # a singular channel: no class is told apart
        inverse = np.linalg.pinv(t)
    p0 = inverse @ np.full(n_classes, 1.0 / n_classes)
    return p0, inverse, ~(p0 >= _P0_MIN)


@numba.njit(cache=True)
def _channel_row(margin_row, yi, b, c, log_t, zeros, log_p, p, shifted, scaled):  # pragma: no cover
    """Row n under the channel ``T``: fills ``log_p`` and ``p`` with ``log softmax(F_n)`` and
    ``softmax(F_n)``, ``F = b H + c``
    (:func:`~viboost.noise_fit.class_calibration.softmax_row`), and
    (:func:`~viboost.noise_fit.class_calibration.true_class_row` of ``log_p``, with ``zeros``
    for its intercept) ``scaled`` with the posterior of the true class times ``total``;
    returns ``log p(y_n | H_n) = log sum_i softmax_i(F_n) T[y_n, i]`` and ``total``. Each
    log-sum is taken relative to its largest term, so no digits are lost however large the
    margins."""
    softmax_row(margin_row, b, c, log_p, p)
    total, joint_top = true_class_row(log_p, yi, 1.0, zeros, log_t, shifted, scaled)
    return joint_top + math.log(total), total


@numba.njit(cache=True)
def _channel_rows(y, margin, b, c, log_t):  # pragma: no cover - compiled
    """:func:`_channel_row` of every row: ``log p(y | H)`` (n), ``log softmax(F)`` and the
    posterior of the true class (n, K)."""
    n, n_classes = margin.shape
    row = np.empty(n)
    log_p = np.empty((n, n_classes))
    posterior = np.empty((n, n_classes))
    p = np.empty(n_classes)
    shifted = np.empty(n_classes)
    zeros = np.zeros(n_classes)
    for i in range(n):
        row[i], total = _channel_row(
            margin[i], y[i], b, c, log_t, zeros, log_p[i], p, shifted, posterior[i]
        )
        for k in range(n_classes):
            posterior[i, k] /= total
    return row, log_p, posterior


@threaded_kernel(cache=True)
def _channel_sums(y, margin, weight, b, c, log_t, n_chunks):  # pragma: no cover - compiled
    """The weighted sums over rows that :func:`_objective` needs (``r`` the posterior of the
    true class, ``p = softmax(F)``): of ``log p(y | H)``; per given label j and true class i
    of ``r_i`` on the rows labelled j; per class of ``r - p``; and of ``(r - p) . H``. Each of
    ``n_chunks`` fixed chunks of rows is summed in row order (in parallel), then the chunks'
    sums in order."""
    n, n_classes = margin.shape
    size = (n + n_chunks - 1) // n_chunks
    values = np.zeros(n_chunks)
    by_labels = np.zeros((n_chunks, n_classes, n_classes))
    gaps = np.zeros((n_chunks, n_classes))
    along = np.zeros(n_chunks)
    for chunk in numba.prange(n_chunks):
        log_p = np.empty(n_classes)
        p = np.empty(n_classes)
        shifted = np.empty(n_classes)
        scaled = np.empty(n_classes)
        zeros = np.zeros(n_classes)
        # Local sums (the chunks' partials share cache lines: writing them per row would make
        # the threads contend).
        by_label = np.zeros((n_classes, n_classes))
        gap = np.zeros(n_classes)
        value = gap_h = 0.0
        for i in range(chunk * size, min(n, (chunk + 1) * size)):
            yi, w = y[i], weight[i]
            row, total = _channel_row(margin[i], yi, b, c, log_t, zeros, log_p, p, shifted, scaled)
            value += w * row
            dot = 0.0
            for k in range(n_classes):
                r = scaled[k] / total
                d = r - p[k]
                by_label[yi, k] += w * r
                gap[k] += w * d
                dot += d * margin[i, k]
            gap_h += w * dot
        values[chunk] = value
        by_labels[chunk] = by_label
        gaps[chunk] = gap
        along[chunk] = gap_h
    by_label = by_labels[0].copy()
    gap = gaps[0].copy()
    value, gap_h = values[0], along[0]
    for chunk in range(1, n_chunks):
        value += values[chunk]
        by_label += by_labels[chunk]
        gap += gaps[chunk]
        gap_h += along[chunk]
    return value, by_label, gap, gap_h


def _signal(params: np.ndarray, n_classes: int):
    """``T``, ``log T``, ``p0``, ``T^{-1}``, the held ``p0``, ``b`` and ``c = log p0``."""
    t, log_t = _channel(params, n_classes)
    p0, inverse, held = _indifferent(t)
    c = np.log(np.where(held, _P0_MIN, p0))
    return t, log_t, p0, inverse, held, float(np.exp(params[-1])), c


def _terms(params: np.ndarray, y: np.ndarray, margin: np.ndarray):
    """Per row ``log p(y | H)``, the log-probabilities of the true class under the signal model
    (n, K), the posterior of the true class (n, K), and ``T``, ``log T``, ``p0``, ``T^{-1}`` and
    the held ``p0``."""
    t, log_t, p0, inverse, held, b, c = _signal(params, margin.shape[1])
    row, log_p, posterior = _channel_rows(
        np.ascontiguousarray(y, dtype=np.int64), np.ascontiguousarray(margin, dtype=np.float64),
        b, c, log_t,
    )  # fmt: skip
    return row, log_p, posterior, t, log_t, p0, inverse, held


def _objective(
    params: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    weight: np.ndarray,
    total: float,
    priors: ModelPriors,
) -> tuple[float, np.ndarray]:
    """Minus the log posterior (without its normalising constants) and its gradient, divided by
    the total weight ``total`` (``weight`` sums to 1).

    With ``r`` the posterior of the true class and ``p`` the signal model's probabilities, the
    derivative of row n's log-likelihood is ``r_nk - p_nk`` in ``F_nk`` and ``1{y_n = j}
    r_ni / T[j, i]`` in ``T[j, i]``; ``T[:, i]`` is the softmax of its log-odds ``v[:, i]``,
    and the intercept ``c = log p0`` moves with T as ``dp0 / dv[j, i] = -p0_i T[j, i]
    (T^{-1} e_j - e_i)``."""
    n_classes = margin.shape[1]
    off = ~np.eye(n_classes, dtype=bool)
    t, log_t, p0, inverse, held, b, c = _signal(params, n_classes)
    n_chunks = sum_chunks(y.size)
    kernel = _channel_sums.serial if n_chunks == 1 else _channel_sums
    value_sum, by_label, g, g_h = kernel(
        np.ascontiguousarray(y, dtype=np.int64), np.ascontiguousarray(margin, dtype=np.float64),
        np.ascontiguousarray(weight, dtype=np.float64), b, c, log_t, n_chunks,
    )  # fmt: skip
    # Direct: sum_n w r_ni (1{y_n = j} - T[j, i]).
    direct = by_label - t * by_label.sum(axis=0)[None, :]
    # Through c: with G = sum_n w (r_n - p_n), sum_k G_k / p0_k dp0_k / dv[j, i].
    scaled = np.where(held, 0.0, g / np.where(held, 1.0, p0))
    z = inverse.T @ scaled  # z_j = sum_k (G_k / p0_k) (T^{-1})[k, j]
    through_c = -p0[None, :] * t * (z[:, None] - scaled[None, :])
    d_b = b * g_h
    alpha = _dirichlet(priors, n_classes)
    log_b = params[-1]
    log_prior = float((alpha * log_t).sum()) - 0.5 * (log_b / _LOG_SCALE_PRIOR_SD) ** 2
    prior_v = alpha - t * alpha.sum(axis=0)[None, :]
    value = value_sum + log_prior / total
    grad = np.concatenate(
        [
            (direct + through_c + prior_v / total)[off],
            [d_b - log_b / _LOG_SCALE_PRIOR_SD**2 / total],
        ]
    )
    return -value, -grad


def _log_normalizer(priors: ModelPriors, n_classes: int) -> float:
    """The log of the priors' normalising constants (the columns' Dirichlets and log b's normal),
    for the log evidence."""
    alpha = _dirichlet(priors, n_classes)
    dirichlet = float(np.sum(gammaln(alpha.sum(axis=0)) - gammaln(alpha).sum(axis=0)))
    return dirichlet - 0.5 * np.log(2.0 * np.pi * _LOG_SCALE_PRIOR_SD**2)


@dataclass(frozen=True)
class ClassChannelCalibration:
    """A class-conditional noise matrix fitted to out-of-fold margins, with its Laplace
    posterior (the interface of
    :class:`~viboost.noise_fit.class_calibration.ClassNoiseCalibration`).

    Attributes
    ----------
    channel : ndarray of shape (n_classes, n_classes)
        ``T[j, i] = P(given j | true i)`` (columns sum to 1).
    scale : float
        b: the true-class log-odds are ``b H + c``.
    covariance : ndarray
        Laplace covariance of the off-diagonal log-odds (row-major) and ``log b``.
    log_likelihood : float
        ``sum_n s_n log p(y_n | H_n)`` at the optimum.
    log_evidence : float
        Log marginal likelihood of the labels (priors included): the Laplace approximation
        plus what it misses of the columns' Dirichlet posteriors
        (:func:`~viboost.noise_fit.laplace.dirichlet_laplace_gap`).
    """

    channel: np.ndarray
    scale: float
    covariance: np.ndarray
    log_likelihood: float
    log_evidence: float = float("nan")

    #: A full noise matrix: noise that mistakes one class for another.
    channel_name: ClassVar[str] = "class-conditional"

    @property
    def n_classes(self) -> int:
        return int(self.channel.shape[0])

    @property
    def params(self) -> np.ndarray:
        log_t = np.log(self.channel)
        odds = log_t - np.diag(log_t)[None, :]
        return np.concatenate([odds[~np.eye(self.n_classes, dtype=bool)], [np.log(self.scale)]])

    @classmethod
    def from_params(
        cls, params: np.ndarray, covariance: np.ndarray, log_likelihood: float = 0.0, **extra
    ) -> ClassChannelCalibration:
        channel, _ = _channel(params, int(round((1 + np.sqrt(1 + 4 * (params.size - 1))) / 2)))
        return cls(channel, float(np.exp(params[-1])), covariance, float(log_likelihood), **extra)

    def row_log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """``log p(y_n | H_n)`` of each row."""
        return _terms(self.params, y, margin)[0]

    def true_class_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The posterior of each row's true class given its label, (n, K):
        proportional to ``softmax_i(F) T[y, i]``."""
        return np.exp(true_class_log_proba(y, margin, self.signal_and_channel()))

    def clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The probability that label ``y_n`` is right, ``P(true = y_n)`` (the refit's
        multiplicity, in place of phi_n)."""
        return self.true_class_proba(y, margin)[np.arange(y.size), y]

    def mislabel_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """Posterior probability that label ``y_n`` differs from row n's true class."""
        return 1.0 - self.clean_proba(y, margin)

    def joint(self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        """The expected joint of given (rows) and true (columns) labels, (K, K)."""
        return expected_joints(y, margin, sample_weight, [self.signal_and_channel()])[0]

    def flip_rates(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """``[share of wrong labels, flip rate of each true class]`` on these rows
        (:func:`~viboost.noise_fit.class_calibration.joint_rates` of :meth:`joint`)."""
        return joint_rates(self.joint(y, margin, sample_weight))

    def label_posteriors(
        self,
        y: np.ndarray,
        sample_weight: np.ndarray,
        clean_proba: np.ndarray,
        priors: ModelPriors,
    ) -> tuple[np.ndarray, np.ndarray]:
        """q(theta) and q(pi) given each label's probability of being right
        (:func:`~viboost.noise_fit.class_calibration.noise_posteriors`)."""
        return noise_posteriors(y, sample_weight, clean_proba, priors, self.n_classes)

    def signal_and_channel(self) -> tuple[float, np.ndarray, np.ndarray]:
        """``(b, c, log T)``: the true-class log-odds ``F = b H + c`` and the log channel."""
        params = self.params
        t, log_t = _channel(params, self.n_classes)
        p0, _, held = _indifferent(t)
        return float(np.exp(params[-1])), np.log(np.where(held, _P0_MIN, p0)), log_t

    def flip_rate_interval(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        n_draws: int = 400,
        random_state: RandomStateLike = None,
    ) -> np.ndarray:
        """Equal-tailed ``level`` credible intervals of
        :func:`~viboost.noise_fit.class_calibration.joint_rates`, shape (K + 1, 2), as
        :meth:`~viboost.noise_fit.class_calibration.ClassNoiseCalibration.flip_rate_interval`
        draws them."""
        draws = self.posterior_draws(n_draws, random_state)
        subset = interval_subset(y.size, random_state)
        return rate_interval(self, draws, y, margin, sample_weight, subset, level)

    def joints_of(
        self,
        draws: Sequence[KClassChannel],
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
    ) -> np.ndarray:
        """:meth:`joint` of each of ``draws`` on these rows
        (:func:`~viboost.noise_fit.class_calibration.draw_joints`)."""
        return draw_joints(draws, y, margin, sample_weight)

    def posterior_draws(
        self, n_draws: int = 400, random_state: RandomStateLike = None
    ) -> list[ClassChannelCalibration]:
        """Parameter draws from the Laplace approximation, clipped to the search box
        (:func:`~viboost.noise_fit.laplace.laplace_draws`)."""
        rng = spawn_generator(random_state)
        bounds = _bounds(self.n_classes)
        params = laplace_draws(rng, self.params, self.covariance, bounds, n_draws)
        return [ClassChannelCalibration.from_params(d, self.covariance) for d in params]


def calibrate_class_channel(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray | None = None,
    priors: ModelPriors | None = None,
    start: np.ndarray | None = None,
) -> ClassChannelCalibration:
    """Fit a class-conditional noise matrix and the scale of ``H`` by the marginal likelihood.

    Parameters
    ----------
    y : ndarray of int, shape (n_samples,)
        Class indices in ``0..K-1``.
    margin : ndarray of shape (n_samples, K)
        Out-of-fold ensemble margins ``H``.
    sample_weight : ndarray of shape (n_samples,), default=None
    priors : ModelPriors, default=None
        zeta sets the columns' Dirichlet priors (module docstring).
    start : ndarray of shape (K, K), default=None
        A channel to start from (e.g. the paper's channel fitted to the same margins); one
        that keeps 80% of every class's labels, spreading the rest evenly, if None.

    Returns
    -------
    ClassChannelCalibration

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import softmax
    >>> rng = np.random.default_rng(0)
    >>> margin = rng.normal(scale=3.0, size=(20000, 3))
    >>> true = (rng.random((20000, 1)) > np.cumsum(softmax(margin, axis=1), axis=1)).sum(axis=1)
    >>> moved = rng.random(20000) < 0.2  # a fifth of each class moved to the next class
    >>> y = np.where(moved, (true + 1) % 3, true)
    >>> fit = calibrate_class_channel(y, margin)
    >>> np.round(fit.channel, 1)
    array([[0.8, 0. , 0.2],
           [0.2, 0.8, 0. ],
           [0. , 0.2, 0.8]])
    """
    y, margin, weight, priors = class_inputs(y, margin, sample_weight, priors)
    n_classes = margin.shape[1]
    total = float(weight.sum())
    share = weight / total
    bounds = _bounds(n_classes)
    if start is None:
        start = np.full((n_classes, n_classes), 0.2 / (n_classes - 1))
        np.fill_diagonal(start, 0.8)
    start = np.clip(start, 1e-6, None)
    odds = np.log(start) - np.log(np.diag(start))[None, :]
    x0 = np.concatenate([odds[~np.eye(n_classes, dtype=bool)], [0.0]])
    x0 = np.clip(x0, bounds[:, 0], bounds[:, 1])
    args = (y, margin, share, total, priors)
    params, covariance = laplace_posterior(
        _objective, x0, args, bounds, total, maxiter=1000, gtol=1e-10, ftol=1e-14
    )
    row, _, posterior = _terms(params, y, margin)[:3]
    log_likelihood = total * float(share @ row)
    log_joint = -total * _objective(params, *args)[0] + _log_normalizer(priors, n_classes)
    sign, log_det = np.linalg.slogdet(covariance)
    # What the Laplace volume misses of the columns' posteriors given the true classes,
    # Dirichlet(alpha + the expected counts of given j and true i): most of a noise matrix's
    # entries have next to no rows, and each such entry of alpha = zeta_2 / (K - 1) is
    # underestimated by 0.32 nats at K = 6 (laplace.dirichlet_laplace_gap).
    counts = np.zeros((n_classes, n_classes))
    for j in range(n_classes):
        counts[j] = weight[y == j] @ posterior[y == j]
    gap = dirichlet_laplace_gap(_dirichlet(priors, n_classes) + counts, axis=0)
    log_evidence = log_joint + 0.5 * params.size * np.log(2.0 * np.pi) + 0.5 * log_det + gap
    return ClassChannelCalibration.from_params(
        params, covariance, log_likelihood, log_evidence=float(log_evidence)
    )
