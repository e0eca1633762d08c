"""Empirical Bayes for the K-class noise model: (theta, pi, the scale of H) by the marginal
likelihood, and what follows from it (the true class of every row, the joint of given and true
labels, the noise matrix).

The paper's model (section 4) with K classes: a label is *true* with probability theta, drawn
from ``softmax(F(x))``, or *noise*, drawn from pi, a distribution over the K classes with a
Dirichlet(mu_0' 1) prior, whatever ``x`` is. For K = 2 this is the paper's model: its noise
grade xi is ``logit pi_+`` (a v-Log(u, 0, omega) is the logit of a Beta, S.1.1). Summing out the
type ``w_n``,

    p(y_n | x_n) = theta softmax_{y_n}(F(x_n)) + (1 - theta) pi_{y_n},

so the channel from true class i to given class j is ``theta 1{i = j} + (1 - theta) pi_j``.
Given out-of-fold margins ``H`` (one column per class), this module maximises that marginal
likelihood over ``theta``, ``pi`` and a scale ``b`` with ``F = b H + c``, under Beta(zeta) on
theta, Dirichlet(mu_0' 1) on pi and a weak normal prior on ``log b`` (as
:mod:`viboost.noise_fit.calibration` does for two classes, of which this is the K-class form).

The intercept ``c`` is not free: a booster fitted to noisy labels is indifferent (``H = 0``)
where a noisy label is uniform over the classes, which is where a true label has probabilities
``p0_k = (1/K - (1 - theta) pi_k) / theta``; so ``c_k = log p0_k`` (for K = 2, the binary
calibration's ``logit p0``).

Per row, the posterior of the true class (S.4.3 with K classes and point estimates) is
proportional to ``softmax_i(F) (theta 1{y = i} + (1 - theta) pi_y)``; summed over the rows it
gives the joint of given and true labels (cleanlab's ``estimate_joint`` orientation: rows given,
columns true) and the noise matrix ``P(given | true)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

import numba
import numpy as np
from scipy.special import expit, gammaln, log_expit, log_softmax, logit

from viboost._utils.parallel import sum_chunks, threaded_kernel
from viboost._utils.validation import RandomStateLike, spawn_generator
from viboost.noise_fit.calibration import MAX_FLIP_RATE, interval_subset
from viboost.noise_fit.laplace import (
    NestedPosterior,
    dirichlet_laplace_gap,
    laplace_draws,
    laplace_posterior,
    nested_posterior,
)
from viboost.variational.priors import ModelPriors
from viboost.variational.updates import update_eta

__all__ = [
    "ClassNoiseCalibration",
    "KClassChannel",
    "calibrate_class_noise",
    "class_inputs",
    "class_log_likelihood",
    "draw_joints",
    "expected_joints",
    "integrate_class_noise_posterior",
    "joint_rates",
    "noise_posteriors",
    "rate_interval",
    "softmax_row",
    "true_class_log_proba",
    "true_class_row",
]

# As the binary calibration: a N(0, 3^2) prior on log b, the search box of (logit theta, the
# log-odds of pi against class 0, log b), and the smallest p0_k of the intercept.
_LOG_SCALE_PRIOR_SD = 3.0
_P0_MIN = 1e-9
_THETA_BOUND = (-30.0, 30.0)
_PI_BOUND = (-50.0, 50.0)
_SCALE_BOUND = (-20.0, 20.0)


def _bounds(n_classes: int) -> np.ndarray:
    return np.array([_THETA_BOUND] + [_PI_BOUND] * (n_classes - 1) + [_SCALE_BOUND])


def _unpack(params: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``(logit theta, log pi, log b)`` from the parameter vector ``(logit theta, v_1..v_{K-1},
    log b)`` with ``pi = softmax(0, v_1, ..., v_{K-1})``."""
    log_pi = log_softmax(np.concatenate([[0.0], params[1:-1]]))
    return float(params[0]), log_pi, float(params[-1])


def _intercept(logit_theta: float, log_pi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``c_k = log p0_k`` (module docstring) and its derivatives: in ``logit theta`` (shape
    (K,)) and in ``v_m``, the log-odds of pi_m against pi_0 (shape (K, K - 1)). A ``p0_k``
    below 1e-9 (class k would be flipped more often than kept) is held there, with zero
    derivatives."""
    n_classes = log_pi.size
    theta = expit(logit_theta)
    pi = np.exp(log_pi)
    p0 = (1.0 / n_classes - (1.0 - theta) * pi) / theta
    held = p0 < _P0_MIN
    p0 = np.maximum(p0, _P0_MIN)
    ratio = (1.0 - theta) / (theta * p0)
    dc_du = np.where(held, 0.0, (pi - 1.0 / n_classes) * ratio)
    # d pi_k / d v_m = pi_k (1{k = m} - pi_m), m = 1..K-1.
    dpi_dv = pi[:, None] * (np.eye(n_classes)[:, 1:] - pi[None, 1:])
    dc_dv = np.where(held[:, None], 0.0, -ratio[:, None] * dpi_dv)
    return np.log(p0), dc_du, dc_dv


@numba.njit(cache=True)
def softmax_row(margin_row, b, c, log_p, p):  # pragma: no cover - compiled
    """``log softmax(F)`` and ``softmax(F)`` of one row, ``F = b H + c``, into ``log_p`` and
    ``p`` (K,), compiled; both relative to the largest ``F_k``, so no digits are lost however
    large the margins."""
    n_classes = margin_row.shape[0]
    top = -math.inf
    for k in range(n_classes):
        log_p[k] = b * margin_row[k] + c[k]
        top = max(top, log_p[k])
    total = 0.0
    for k in range(n_classes):
        p[k] = math.exp(log_p[k] - top)
        total += p[k]
    log_total = math.log(total)
    for k in range(n_classes):
        log_p[k] = (log_p[k] - top) - log_total
        p[k] /= total


@numba.njit(cache=True)
def _row_term(
    margin_row, yi, b, c, log_theta, log_not_theta, log_pi_y, log_p, p
):  # pragma: no cover - compiled
    """Row n of the marginal likelihood: fills ``log_p`` and ``p`` (K,) with ``log softmax(F_n)``
    and ``softmax(F_n)``, ``F_n = b H_n + c``, and returns ``log p(y_n | H_n) = log(theta
    p_{n y} + (1 - theta) pi_y)`` and phi_n (the probability that the label is true)."""
    softmax_row(margin_row, b, c, log_p, p)
    log_signal = log_theta + log_p[yi]
    log_noise = log_not_theta + log_pi_y
    high, low = max(log_signal, log_noise), min(log_signal, log_noise)
    row = high + math.log1p(math.exp(low - high))
    return row, math.exp(log_signal - row)


@numba.njit(cache=True)
def _rows(y, margin, b, c, log_theta, log_not_theta, log_pi):  # pragma: no cover - compiled
    """:func:`_row_term` of every row: ``log p(y | H)``, phi and ``log softmax(F)`` (n, K)."""
    n = y.shape[0]
    row = np.empty(n)
    clean = np.empty(n)
    log_p = np.empty(margin.shape)
    p = np.empty(margin.shape[1])
    for i in range(n):
        row[i], clean[i] = _row_term(
            margin[i], y[i], b, c, log_theta, log_not_theta, log_pi[y[i]], log_p[i], p
        )
    return row, clean, log_p


@threaded_kernel(cache=True)
def _objective_sums(
    y, margin, weight, b, c, log_theta, log_not_theta, log_pi, n_chunks
):  # pragma: no cover - compiled
    """The weighted sums over rows that :func:`_objective` needs, in one pass: of ``log p(y |
    H)``, phi, the weights, ``g . H`` and ``1 - phi``, and per class of ``g`` and of ``1 - phi``
    on the rows labelled with it; ``g_k = phi (1{y = k} - p_k)``. Each of ``n_chunks`` fixed
    chunks of rows is summed in row order (in parallel), then the chunks' sums in order."""
    n, n_classes = margin.shape
    size = (n + n_chunks - 1) // n_chunks
    scalars = np.zeros((n_chunks, 5))
    by_class = np.zeros((n_chunks, 2, n_classes))
    for chunk in numba.prange(n_chunks):
        log_p = np.empty(n_classes)
        p = np.empty(n_classes)
        # Local sums (the chunks' partials share cache lines: writing them per row would make
        # the threads contend).
        by_class_g = np.zeros(n_classes)
        by_class_noise = np.zeros(n_classes)
        value = clean_sum = weight_sum = gh_sum = noise_sum = 0.0
        for i in range(chunk * size, min(n, (chunk + 1) * size)):
            yi, w = y[i], weight[i]
            row, clean = _row_term(
                margin[i], yi, b, c, log_theta, log_not_theta, log_pi[yi], log_p, p
            )
            value += w * row
            clean_sum += w * clean
            weight_sum += w
            gh = 0.0
            for k in range(n_classes):
                g = clean * ((1.0 if k == yi else 0.0) - p[k])
                by_class_g[k] += w * g
                gh += g * margin[i, k]
            gh_sum += w * gh
            by_class_noise[yi] += w * (1.0 - clean)
            noise_sum += w * (1.0 - clean)
        scalars[chunk, 0] = value
        scalars[chunk, 1] = clean_sum
        scalars[chunk, 2] = weight_sum
        scalars[chunk, 3] = gh_sum
        scalars[chunk, 4] = noise_sum
        by_class[chunk, 0] = by_class_g
        by_class[chunk, 1] = by_class_noise
    total = scalars[0].copy()
    classes = by_class[0].copy()
    for chunk in range(1, n_chunks):
        total += scalars[chunk]
        classes += by_class[chunk]
    return total[0], total[1], total[2], total[3], total[4], classes[0], classes[1]


def _sums(y: np.ndarray, margin: np.ndarray, weight: np.ndarray, row_arguments: tuple) -> tuple:
    """:func:`_objective_sums` over chunks of
    :data:`~viboost._utils.parallel.SUM_CHUNK_ROWS` rows, on the calling thread when there is
    one chunk."""
    n_chunks = sum_chunks(y.size)
    kernel = _objective_sums.serial if n_chunks == 1 else _objective_sums
    return kernel(y, margin, weight, *row_arguments, n_chunks)


def _row_arguments(logit_theta: float, log_pi: np.ndarray, log_b: float, c: np.ndarray) -> tuple:
    """``(b, c, log theta, log(1 - theta), log pi)``: the row terms' arguments, from the
    unpacked parameters and the intercept ``c``."""
    return (
        math.exp(log_b), c, float(log_expit(logit_theta)), float(log_expit(-logit_theta)),
        log_pi,
    )  # fmt: skip


def _row_terms(
    params: np.ndarray, y: np.ndarray, margin: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: ``log p(y | H)``, phi (the probability that the label is true) and the log of
    the true-class probabilities ``softmax(F)`` (n, K), at ``params``."""
    y = np.ascontiguousarray(y, dtype=np.int64)
    margin = np.ascontiguousarray(margin, dtype=np.float64)
    logit_theta, log_pi, log_b = _unpack(params)
    c = _intercept(logit_theta, log_pi)[0]
    return _rows(y, margin, *_row_arguments(logit_theta, log_pi, log_b, c))


def _objective(
    params: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    weight: np.ndarray,
    total: float,
    priors: ModelPriors,
) -> tuple[float, np.ndarray]:
    """Minus the log posterior of the parameters and its gradient, divided by the total weight
    ``total`` (``weight`` sums to 1).

    With ``g_nk = phi_n (1{y_n = k} - p_nk)`` the derivative of row n's log-likelihood in
    ``F_nk``: the derivative in ``logit theta`` is ``phi_n - theta + g_n . dc/du``, in ``log
    b`` it is ``g_n . (b H_n)``, and in ``v_m`` it is ``(1 - phi_n)(1{y_n = m} - pi_m) + g_n .
    dc/dv_m``."""
    n_classes = margin.shape[1]
    logit_theta, log_pi, log_b = _unpack(params)
    theta = expit(logit_theta)
    pi = np.exp(log_pi)
    c, dc_du, dc_dv = _intercept(logit_theta, log_pi)
    value_sum, clean_sum, weight_sum, gh_sum, noise_sum, wg, noise_by_class = _sums(
        np.ascontiguousarray(y, dtype=np.int64),
        np.ascontiguousarray(margin, dtype=np.float64),
        np.ascontiguousarray(weight, dtype=np.float64),
        _row_arguments(logit_theta, log_pi, log_b, c),
    )
    b = np.exp(log_b)
    d_u = clean_sum - theta * weight_sum + float(wg @ dc_du)
    d_b = b * gh_sum
    d_v = noise_by_class[1:] - pi[1:] * noise_sum + wg @ dc_dv
    # theta ~ Beta(zeta) in logit coordinates; pi ~ Dirichlet(mu_0' 1) in the coordinates v
    # (Jacobian prod_k pi_k): mu_0' sum_k log pi_k; log b ~ N(0, sd^2).
    zeta1, zeta2 = priors.clean
    mu = priors.noise_grade
    log_prior = (
        zeta1 * log_expit(logit_theta)
        + zeta2 * log_expit(-logit_theta)
        + mu * float(log_pi.sum())
        - 0.5 * (log_b / _LOG_SCALE_PRIOR_SD) ** 2
    )
    value = value_sum + log_prior / total
    grad = np.concatenate(
        [
            [d_u + (zeta1 * (1.0 - theta) - zeta2 * theta) / total],
            d_v + mu * (1.0 - n_classes * pi[1:]) / total,
            [d_b - log_b / _LOG_SCALE_PRIOR_SD**2 / total],
        ]
    )
    return -value, -grad


def class_log_likelihood(y: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """``log softmax_{y_n}(H_n)`` of every row: the core model's (every label true) score of
    K-class margins ``H`` (n, K) for class indices ``y``."""
    return log_softmax(margin, axis=1)[np.arange(y.size), y]


def draw_joints(
    draws: Sequence[KClassChannel], y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
) -> np.ndarray:
    """The expected joint of given and true labels under each of ``draws`` (K-class noise
    models) on these rows, shape (n_draws, K, K), in one compiled pass
    (:func:`expected_joints`)."""
    return np.asarray(
        expected_joints(y, margin, sample_weight, [d.signal_and_channel() for d in draws])
    )


@dataclass(frozen=True)
class ClassNoiseCalibration:
    """The K-class noise model's parameters fitted to out-of-fold margins, with their Laplace
    posterior.

    Attributes
    ----------
    theta : float
        Probability that a label is true (drawn from the signal model).
    noise_label_proba : ndarray of shape (n_classes,)
        pi: the distribution of a noisy label.
    scale : float
        b: the true-class log-odds are ``b H + c``.
    covariance : ndarray of shape (n_classes + 1, n_classes + 1)
        Laplace covariance of ``(logit theta, log(pi_1 / pi_0), ..., log b)`` at the optimum.
    log_likelihood : float
        The weighted marginal log-likelihood ``sum_n s_n log p(y_n | H_n)`` at the optimum.
    log_evidence : float
        Log marginal likelihood of the labels, the priors included (to compare with another
        channel's, :mod:`viboost.noise_fit.channel_calibration`): the Laplace approximation
        plus what it misses of q(theta) and q(pi)
        (:func:`~viboost.noise_fit.laplace.dirichlet_laplace_gap`).
    """

    theta: float
    noise_label_proba: np.ndarray
    scale: float
    covariance: np.ndarray
    log_likelihood: float
    log_evidence: float = float("nan")

    #: The paper's channel: a noisy label is drawn from pi whatever the true class.
    channel_name: ClassVar[str] = "independent"

    @property
    def n_classes(self) -> int:
        return int(self.noise_label_proba.size)

    @property
    def params(self) -> np.ndarray:
        """The parameter vector of the optimisation."""
        log_pi = np.log(self.noise_label_proba)
        return np.concatenate([[logit(self.theta)], log_pi[1:] - log_pi[0], [np.log(self.scale)]])

    @classmethod
    def from_params(
        cls, params: np.ndarray, covariance: np.ndarray, log_likelihood: float = 0.0, **extra
    ) -> ClassNoiseCalibration:
        logit_theta, log_pi, log_b = _unpack(params)
        return cls(float(expit(logit_theta)), np.exp(log_pi), float(np.exp(log_b)),
                   covariance, float(log_likelihood), **extra)  # fmt: skip

    @property
    def channel(self) -> np.ndarray:
        """The channel ``P(given j | true i)`` at ``[j, i]``: ``theta 1{i = j} + (1 - theta)
        pi_j``."""
        n_classes = self.n_classes
        return self.theta * np.eye(n_classes) + (1.0 - self.theta) * np.repeat(
            self.noise_label_proba[:, None], n_classes, axis=1
        )

    def log_proba(self, margin: np.ndarray) -> np.ndarray:
        """``log softmax(b H + c)``: the log-probabilities of the true class (n, K)."""
        logit_theta, log_pi, log_b = _unpack(self.params)
        c = _intercept(logit_theta, log_pi)[0]
        return log_softmax(np.exp(log_b) * margin + c, axis=1)

    def row_log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """``log p(y_n | H_n)`` of each row (the terms of :attr:`log_likelihood`)."""
        return _row_terms(self.params, y, margin)[0]

    def clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n: the posterior probability that label ``y_n`` is true (drawn from the signal
        model), ``theta p_y / (theta p_y + (1 - theta) pi_y)``."""
        return _row_terms(self.params, y, margin)[1]

    def true_class_log_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The log posterior of each row's true class given its label, (n, K): proportional
        to ``softmax_i(F) (theta 1{y = i} + (1 - theta) pi_y)`` (:func:`true_class_log_proba`)."""
        return true_class_log_proba(y, margin, self.signal_and_channel())

    def true_class_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The posterior of each row's true class given its label, (n, K); rows sum to 1."""
        return np.exp(self.true_class_log_proba(y, margin))

    def mislabel_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """Posterior probability that label ``y_n`` differs from row ``n``'s true class:
        ``(1 - phi_n)(1 - p_{y_n})``."""
        log_true = self.true_class_log_proba(y, margin)[np.arange(y.size), y]
        return -np.expm1(log_true)

    def joint(self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        """The expected joint of given (rows) and true (columns) labels over these rows, as
        shares of their weight, (K, K)."""
        return expected_joints(y, margin, sample_weight, [self.signal_and_channel()])[0]

    def flip_rates(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """``[share of wrong labels, flip rate of each true class]`` on these rows
        (:func:`joint_rates` of :meth:`joint`)."""
        return joint_rates(self.joint(y, margin, sample_weight))

    def label_posteriors(
        self,
        y: np.ndarray,
        sample_weight: np.ndarray,
        clean_proba: np.ndarray,
        priors: ModelPriors,
    ) -> tuple[np.ndarray, np.ndarray]:
        """q(theta) and q(pi) given each label's phi_n (:func:`noise_posteriors`)."""
        return noise_posteriors(y, sample_weight, clean_proba, priors, self.n_classes)

    def signal_and_channel(self) -> tuple[float, np.ndarray, np.ndarray]:
        """``(b, c, log T)``: the true-class log-odds ``F = b H + c`` and the log channel
        ``log T[j, i] = log P(given j | true i) = log(theta 1{i = j} + (1 - theta) pi_j)``."""
        logit_theta, log_pi, log_b = _unpack(self.params)
        c = _intercept(logit_theta, log_pi)[0]
        log_noise = float(log_expit(-logit_theta)) + log_pi
        log_channel = np.repeat(log_noise[:, None], log_pi.size, axis=1)
        np.fill_diagonal(log_channel, np.logaddexp(float(log_expit(logit_theta)), log_noise))
        return math.exp(log_b), c, log_channel

    def flip_rate_interval(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        n_draws: int = 400,
        random_state: RandomStateLike = None,
    ) -> np.ndarray:
        """Equal-tailed ``level`` credible intervals of :func:`joint_rates` (the share of wrong
        labels, then each true class's flip rate), shape (K + 1, 2).

        Parameters are drawn from the Laplace approximation and the rates recomputed for each
        draw on the same rows; above :data:`~viboost.noise_fit.calibration.INTERVAL_ROWS` rows,
        on a random subset of that many
        (:func:`~viboost.noise_fit.calibration.interval_subset`), plus the rates at the
        posterior mode on all rows minus those on the subset (a control variate, as the binary
        calibration does).
        """
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
        """:meth:`joint` of each of ``draws`` on these rows (:func:`draw_joints`)."""
        return draw_joints(draws, y, margin, sample_weight)

    def posterior_draws(
        self, n_draws: int = 400, random_state: RandomStateLike = None
    ) -> list[ClassNoiseCalibration]:
        """Parameter draws from the Laplace approximation, clipped to the search box
        (:func:`~viboost.noise_fit.laplace.laplace_draws`)."""
        rng = spawn_generator(random_state)
        bounds = _bounds(self.n_classes)
        draws = laplace_draws(rng, self.params, self.covariance, bounds, n_draws)
        return [ClassNoiseCalibration.from_params(d, self.covariance) for d in draws]


@numba.njit(cache=True)
def true_class_row(margin_row, yi, b, c, log_channel, shifted, scaled):  # pragma: no cover
    """The posterior of one row's true class, ``P(true = i | y, H) = softmax_i(b H + c + log
    T[y, :])`` (the softmax of F times the channel's row for the given label ``y``,
    normalised), compiled: fills ``shifted`` with ``b H_i + c_i + log T[y, i]`` minus its
    largest value and ``scaled`` with their exponentials, and returns the sum of those (at
    least 1) and that largest value. The posterior is ``scaled / sum``, its log ``shifted -
    log(sum)``; ``log sum_i exp(F_i) T[y, i]`` is the largest value plus ``log(sum)``."""
    n_classes = margin_row.shape[0]
    top = -math.inf
    for k in range(n_classes):
        shifted[k] = b * margin_row[k] + c[k] + log_channel[yi, k]
        top = max(top, shifted[k])
    total = 0.0
    for k in range(n_classes):
        shifted[k] -= top
        scaled[k] = math.exp(shifted[k])
        total += scaled[k]
    return total, top


@numba.njit(cache=True)
def _true_class_log_proba(y, margin, b, c, log_channel):  # pragma: no cover - compiled
    """:func:`true_class_log_proba` of every row."""
    n, n_classes = margin.shape
    out = np.empty((n, n_classes))
    scaled = np.empty(n_classes)
    for i in range(n):
        total, _ = true_class_row(margin[i], y[i], b, c, log_channel, out[i], scaled)
        log_total = math.log(total)
        for k in range(n_classes):
            out[i, k] -= log_total
    return out


def true_class_log_proba(
    y: np.ndarray, margin: np.ndarray, terms: tuple[float, np.ndarray, np.ndarray]
) -> np.ndarray:
    """The log posterior of each row's true class given its label ``y`` (class indices) and
    margins ``H`` (n, K), shape (n, K), under ``terms = (b, c, log T)`` (a calibration's
    ``signal_and_channel``): proportional to ``softmax_i(b H + c) T[y, i]``."""
    b, c, log_channel = terms
    return _true_class_log_proba(
        np.ascontiguousarray(y, dtype=np.int64),
        np.ascontiguousarray(margin, dtype=np.float64),
        float(b),
        np.ascontiguousarray(c, dtype=np.float64),
        np.ascontiguousarray(log_channel, dtype=np.float64),
    )


@threaded_kernel(cache=True)
def _expected_joints(
    y, margin, weight, scales, intercepts, log_channels
):  # pragma: no cover - compiled
    """Per parameter set d, the sum over rows of ``s_n 1{y_n = j} P_d(true = i | y_n, H_n)``
    at ``[d, j, i]`` (:func:`true_class_row`). Each d on one thread, its rows in order: the
    same sums for any number of threads."""
    n, n_classes = margin.shape
    n_sets = scales.shape[0]
    out = np.zeros((n_sets, n_classes, n_classes))
    for d in numba.prange(n_sets):
        shifted = np.empty(n_classes)
        scaled = np.empty(n_classes)
        for i in range(n):
            yi = y[i]
            total, _ = true_class_row(
                margin[i], yi, scales[d], intercepts[d], log_channels[d], shifted, scaled
            )
            share = weight[i] / total
            for k in range(n_classes):
                out[d, yi, k] += share * scaled[k]
    return out


def expected_joints(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    terms: Sequence[tuple[float, np.ndarray, np.ndarray]],
) -> np.ndarray:
    """The expected joint of given (rows) and true (columns) labels over these rows, as
    shares of their weight, under each set of ``terms`` (``(b, c, log T)``, as
    ``signal_and_channel`` gives them: the true class's posterior is proportional to
    ``softmax_i(b H + c) T[y, i]``), shape (len(terms), K, K); one compiled pass per set, the
    sets on threads from 16 of them."""
    n_classes = margin.shape[1]
    scales = np.array([t[0] for t in terms], dtype=np.float64)
    intercepts = np.array([t[1] for t in terms], dtype=np.float64).reshape(-1, n_classes)
    log_channels = np.array([t[2] for t in terms], dtype=np.float64)
    log_channels = log_channels.reshape(-1, n_classes, n_classes)
    kernel = _expected_joints if len(terms) >= 16 else _expected_joints.serial
    joints = kernel(
        np.ascontiguousarray(y, dtype=np.int64),
        np.ascontiguousarray(margin, dtype=np.float64),
        np.ascontiguousarray(sample_weight, dtype=np.float64),
        scales, intercepts, log_channels,
    )  # fmt: skip
    total = float(np.sum(sample_weight))
    return joints / total if total > 0 else joints


class KClassChannel(Protocol):
    """What :func:`rate_interval` needs of a K-class calibration (the paper's channel or the
    full one): its signal model and channel, and the joint it implies."""

    def signal_and_channel(self) -> tuple[float, np.ndarray, np.ndarray]: ...

    def joint(self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> np.ndarray: ...


def rate_interval(
    calibration: KClassChannel,
    draws: Sequence[KClassChannel],
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    subset: np.ndarray | None,
    level: float,
) -> np.ndarray:
    """Equal-tailed ``level`` credible intervals of :func:`joint_rates`, shape (K + 1, 2),
    from parameter ``draws`` of a K-class calibration (each with ``signal_and_channel``):
    the rates of each draw on the rows ``subset`` (None: all), plus, on a subset, the rates
    at ``calibration`` on all rows minus those on the subset (a control variate)."""
    rows = slice(None) if subset is None else subset
    sub = (y[rows], margin[rows], sample_weight[rows])
    joints = expected_joints(*sub, [draw.signal_and_channel() for draw in draws])
    rates = np.array([joint_rates(joint) for joint in joints])
    if subset is not None:
        rates += joint_rates(calibration.joint(y, margin, sample_weight)) - joint_rates(
            calibration.joint(*sub)
        )
    tail = (1.0 - level) / 2.0
    return np.nanquantile(rates, [tail, 1.0 - tail], axis=0).T


def joint_rates(joint: np.ndarray) -> np.ndarray:
    """``[share of wrong labels, flip rate of each true class]`` from a joint of given (rows)
    and true (columns) labels: the off-diagonal mass, and per true class its off-diagonal
    share (NaN for a class with no expected rows)."""
    true_mass = joint.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        flips = 1.0 - np.diag(joint) / true_mass
    return np.concatenate([[1.0 - np.trace(joint) / joint.sum()], flips])


def noise_posteriors(
    y: np.ndarray,
    sample_weight: np.ndarray,
    clean_proba: np.ndarray,
    priors: ModelPriors,
    n_classes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """q(theta) = Beta(eta) and q(pi) = Dirichlet(omega) given each label's phi_n: ``eta``
    by S.4.4 and ``omega_k = mu_0' + sum_n s_n (1 - phi_n) 1{y_n = k}`` (S.4.2 with K
    classes).

    Examples
    --------
    >>> import numpy as np
    >>> eta, omega = noise_posteriors(
    ...     np.array([0, 1, 2, 2]), np.ones(4), np.array([1.0, 0.5, 0.75, 1.0]), ModelPriors(), 3
    ... )
    >>> eta.tolist(), omega.tolist()
    ([4.25, 1.75], [1.0, 1.5, 1.25])
    """
    noise = 1.0 - clean_proba
    eta = update_eta(sample_weight, clean_proba, noise, priors.clean)
    omega = priors.noise_grade + np.bincount(y, weights=sample_weight * noise, minlength=n_classes)
    return eta, omega


def class_inputs(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray | None,
    priors: ModelPriors | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, ModelPriors]:
    """A K-class calibration's inputs as its objective reads them: class indices, the margins
    (C-contiguous float64, one column per class: a clear error for any other shape), the
    sample weights (ones for None) and the priors (the defaults for None)."""
    y = np.asarray(y, dtype=np.intp)
    margin = np.ascontiguousarray(margin, dtype=np.float64)
    if margin.ndim != 2 or margin.shape[0] != y.size or margin.shape[1] < 2:
        raise ValueError(f"margin must have shape ({y.size}, n_classes >= 2), got {margin.shape}")
    weight = np.ones(y.size) if sample_weight is None else np.asarray(sample_weight, float)
    return y, margin, weight, ModelPriors() if priors is None else priors


def calibrate_class_noise(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray | None = None,
    priors: ModelPriors | None = None,
    start: ClassNoiseCalibration | None = None,
) -> ClassNoiseCalibration:
    """Fit theta, pi and the scale of ``H`` by the marginal likelihood of K-class labels.

    Parameters
    ----------
    y : ndarray of int, shape (n_samples,)
        Class indices in ``0..K-1``.
    margin : ndarray of shape (n_samples, K)
        Ensemble margins ``H`` (one column per class) not fitted to these labels (out-of-fold).
    sample_weight : ndarray of shape (n_samples,), default=None
    priors : ModelPriors, default=None
        zeta on theta, mu_0' (the Dirichlet's concentration) on pi.
    start : ClassNoiseCalibration, default=None
        Where the search starts (``theta = 0.73``, uniform pi, ``b = 1`` if None).

    Returns
    -------
    ClassNoiseCalibration

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import softmax
    >>> rng = np.random.default_rng(0)
    >>> margin = rng.normal(scale=3.0, size=(20000, 3))
    >>> p = softmax(margin, axis=1)
    >>> true = (rng.random((20000, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    >>> noisy = rng.random(20000) < 0.3  # 30% noise labels, uniform over the classes
    >>> y = np.where(noisy, rng.integers(0, 3, 20000), true)
    >>> fit = calibrate_class_noise(y, margin / 2)  # margins on half the true scale
    >>> round(fit.theta, 1), bool(abs(fit.scale - 2.0) < 0.15)
    (0.7, True)
    """
    y, margin, weight, priors = class_inputs(y, margin, sample_weight, priors)
    n_classes = margin.shape[1]
    total = float(weight.sum())
    share = weight / total
    bounds = _bounds(n_classes)
    if start is None or start.n_classes != n_classes:
        x0 = np.zeros(n_classes + 1)
        x0[0] = 1.0
    else:
        x0 = np.clip(start.params, bounds[:, 0], bounds[:, 1])
    args = (y, margin, share, total, priors)
    params, covariance = laplace_posterior(_objective, x0, args, bounds, total)
    row, clean, _ = _row_terms(params, y, margin)
    log_likelihood = total * float(share @ row)
    # The log evidence: the log posterior at the mode with the priors' normalising constants
    # (Beta(zeta), Dirichlet(mu_0' 1), log b's normal), plus the Laplace volume, plus what
    # that volume misses of q(theta) = Beta(eta) and q(pi) = Dirichlet(omega), the posteriors
    # given phi (S.4.2): the Laplace approximation in these coordinates is theirs with
    # Stirling's formula for each Gamma (laplace.dirichlet_laplace_gap).
    zeta1, zeta2 = priors.clean
    mu = priors.noise_grade
    log_normalizer = (
        gammaln(zeta1 + zeta2) - gammaln(zeta1) - gammaln(zeta2)
        + gammaln(n_classes * mu) - n_classes * gammaln(mu)
        - 0.5 * np.log(2.0 * np.pi * _LOG_SCALE_PRIOR_SD**2)
    )  # fmt: skip
    log_joint = -total * _objective(params, *args)[0] + log_normalizer
    eta, omega = noise_posteriors(y, weight, clean, priors, n_classes)
    log_evidence = (
        log_joint
        + 0.5 * params.size * np.log(2.0 * np.pi)
        + 0.5 * np.linalg.slogdet(covariance)[1]
        + dirichlet_laplace_gap(eta)
        + dirichlet_laplace_gap(omega)
    )
    return ClassNoiseCalibration.from_params(
        params, covariance, log_likelihood, log_evidence=float(log_evidence)
    )


def integrate_class_noise_posterior(
    mode: ClassNoiseCalibration,
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    priors: ModelPriors,
    n_draws: int = 200,
    random_state: RandomStateLike = None,
    guide: np.ndarray | None = None,
) -> NestedPosterior:
    """The posterior of ``(theta, pi, b)`` integrated over ``logit theta`` on a grid, the
    Laplace approximation over ``(pi, log b)`` at each node
    (:func:`~viboost.noise_fit.laplace.nested_posterior`), as the binary calibration's
    (:func:`~viboost.noise_fit.calibration.integrate_noise_posterior`); its draws as
    calibrations. ``log_evidence`` carries the priors' normalising constants (Beta(zeta),
    Dirichlet(mu_0' 1), the normal on log b). Noise labels are at most
    ``2 MAX_FLIP_RATE`` (90%) of the labels. ``guide``: as the binary one's."""
    y, margin, weight, priors = class_inputs(y, margin, sample_weight, priors)
    n_classes = margin.shape[1]
    total = float(weight.sum())
    args = (y, margin, weight / total, total, priors)
    bounds = _bounds(n_classes)
    zeta1, zeta2 = priors.clean
    mu = priors.noise_grade
    log_norm = (
        gammaln(zeta1 + zeta2) - gammaln(zeta1) - gammaln(zeta2)
        + gammaln(n_classes * mu) - n_classes * gammaln(mu)
        - 0.5 * np.log(2.0 * np.pi * _LOG_SCALE_PRIOR_SD**2)
    )  # fmt: skip
    nested = nested_posterior(
        _objective, mode.params, mode.covariance, args, lambda u: bounds[1:], total,
        float(log_norm), n_draws, spawn_generator(random_state),
        float(logit(1.0 - 2.0 * MAX_FLIP_RATE)) + 1e-9, guide=guide,
    )  # fmt: skip
    draws = [ClassNoiseCalibration.from_params(p, mode.covariance) for p in nested.params]
    return replace(nested, draws=draws)
