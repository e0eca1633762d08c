"""Empirical Bayes for the noise model: (theta, xi, the scale of H) by the marginal likelihood.

Under the paper's model (section 4) an observed label is true with probability theta, drawn from
the logistic model of the ensemble, or noise, drawn with log-odds xi whatever ``x`` is, so

    p(y_n | x_n) = theta sigmoid(y_n F(x_n)) + (1 - theta) sigmoid(y_n xi)

once the type ``w_n`` is summed out (section 4, the display after step 6). Given margins ``H``
that were *not* fitted to the labels they are scored on (out-of-fold margins of cross-fitting),
this module maximises that marginal likelihood over ``theta``, ``xi`` and a scale ``b`` with
``F = b H``, under the model's own priors: Beta(zeta) on theta and v-Log([+1,-1], [0,0], mu_0')
on xi (S.1). The scale is needed because a booster fitted to noisy labels estimates the log-odds
of a *noisy* label, which the noise squeezes towards ``xi``; ``b`` stretches it back to the
log-odds of a true label. (In-sample margins cannot be used: the ensemble has partly fitted the
flipped labels, so they look true and theta runs to 1.)

At the optimum the type posterior is the type update of S.4.3 with point estimates in place of
the expectations, i.e. :meth:`~viboost.variational.CleanLogOdds.from_point_estimates` evaluated
at ``b H``: phi_n is defined there and only there. The curvature at the optimum gives a Laplace
approximation to the posterior of ``(logit theta, xi, log b)``, from which
:meth:`NoiseCalibration.flip_rate_interval` draws a credible interval for the share of wrong
labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numba
import numpy as np
from scipy.special import betaln, expit, log_expit, logit

from viboost._utils.parallel import sum_chunks, threaded_kernel
from viboost._utils.validation import RandomStateLike, spawn_generator
from viboost.noise_fit.laplace import (
    NestedPosterior,
    laplace_draws,
    laplace_posterior,
    nested_posterior,
)
from viboost.variational.priors import ModelPriors
from viboost.variational.state import CleanLogOdds
from viboost.variational.updates import update_eta, update_omega

__all__ = [
    "INTERVAL_ROWS",
    "MAX_FLIP_RATE",
    "NoiseCalibration",
    "calibrate_noise",
    "equal_tailed_interval",
    "flip_rate_sums",
    "flip_rates_from_mislabel",
    "flip_rates_from_sums",
    "integrate_noise_posterior",
    "peak_calibration",
    "interval_subset",
    "joint_of",
    "mislabel_proba_in_sample",
    "true_class_from_mislabel",
]

# A weakly informative N(0, 3^2) prior on log b keeps b finite when the margins carry no signal
# (b is then not identified by the likelihood); it moves a fitted b by well under 1% otherwise.
_LOG_SCALE_PRIOR_SD = 3.0
# The search box of (logit theta, xi, log b): wide enough for any data (theta within 1e-13 of 0
# or 1, noise log-odds of +-50, scales from 2e-9 to 5e8), narrow enough that nothing overflows.
_P0_MIN = 1e-9
_BOUNDS = [(-30.0, 30.0), (-50.0, 50.0), (-20.0, 20.0)]
#: The credible intervals' parameter draws are evaluated on at most this many rows (a random
#: subset, with the full rows' value at the posterior mode as a control variate): see
#: :meth:`NoiseCalibration.flip_rate_interval`.
INTERVAL_ROWS = 1 << 14


def interval_subset(n_rows: int, random_state: RandomStateLike = None) -> np.ndarray | None:
    """The rows on which a credible interval's parameter draws are evaluated (binary and
    K-class calibrations alike): all of them (None) up to :data:`INTERVAL_ROWS` rows, else
    that many, drawn without replacement by a generator spawned from ``random_state``
    (:func:`~viboost._utils.validation.spawn_generator`, only then), in increasing order.

    Examples
    --------
    >>> interval_subset(100, random_state=0) is None
    True
    >>> rows = interval_subset(10 * INTERVAL_ROWS, random_state=0)
    >>> rows.size == INTERVAL_ROWS, bool(np.all(np.diff(rows) > 0))
    (True, True)
    """
    if n_rows <= INTERVAL_ROWS:
        return None
    rng = spawn_generator(random_state)
    return np.sort(rng.choice(n_rows, INTERVAL_ROWS, replace=False))


@dataclass(frozen=True)
class NoiseCalibration:
    """The noise model's parameters fitted to out-of-fold margins, with their Laplace posterior.

    Attributes
    ----------
    theta : float
        Probability that a label is true (drawn from the signal model).
    noise_grade : float
        xi, the log-odds of a +1 among noisy labels.
    scale : float
        b: the log-odds of a true label is ``b * H``.
    covariance : ndarray of shape (3, 3)
        Laplace covariance of ``(logit theta, xi, log b)`` at the optimum.
    log_likelihood : float
        The weighted marginal log-likelihood ``sum_n s_n log p(y_n | H_n)`` at the optimum.
    """

    theta: float
    noise_grade: float
    scale: float
    covariance: np.ndarray
    log_likelihood: float

    #: Two classes: the paper's channel is the general one.
    channel_name: ClassVar[str] = "independent"

    def log_odds(self, margin: np.ndarray) -> np.ndarray:
        """F = b H + c: the log-odds of a true +1 label at ensemble margin ``H``.

        ``c`` is not a free parameter: a booster fitted to noisy labels puts ``H = 0`` where a
        *noisy* label is +1 with probability 1/2, which is where a true label is +1 with
        probability ``p0 = (1/2 - (1 - theta) sigmoid(xi)) / theta``; so ``c = logit p0``,
        which is 0 for symmetric noise (xi = 0) and shifts the boundary for class-dependent
        noise (S.2).
        """
        return self.scale * margin + _intercept(logit(self.theta), self.noise_grade)[0]

    @property
    def clean(self) -> CleanLogOdds:
        """q(w) at these point estimates, as a function of the (scaled) margin ``b H``."""
        return CleanLogOdds.from_point_estimates(self.theta, self.noise_grade)

    def clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n: posterior probability that label ``y_n`` is true, given ``H_n = margin_n``."""
        return self.clean.proba(y, self.log_odds(margin))

    def mislabel_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """Posterior probability that label ``y_n`` differs from the true class of row ``n``.

        A noisy label is drawn whatever the true class is, so it is wrong with the model's
        probability of the other class: ``P(wrong) = (1 - phi_n) sigmoid(-y_n b H_n)``.
        """
        y, margin = (np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin))
        return _mislabel_kernel(y, margin, self._channel())

    def true_class_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The posterior of each row's true class, columns ``[-1, +1]`` (the order of
        ``classes_``): a wrong label's true class is the other one
        (:func:`true_class_from_mislabel`)."""
        return true_class_from_mislabel(self.mislabel_proba(y, margin), (y > 0).astype(np.intp))

    def joint(self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        """The expected joint of given (rows) and true (columns) labels, as shares of the
        weight, shape (2, 2) (:func:`joint_of`)."""
        return joint_of(self.true_class_proba(y, margin), (y > 0).astype(np.intp), sample_weight)

    def label_posteriors(
        self,
        y: np.ndarray,
        sample_weight: np.ndarray,
        clean_proba: np.ndarray,
        priors: ModelPriors,
    ) -> tuple[np.ndarray, np.ndarray]:
        """q(theta) = Beta(eta) by S.4.4 and q(xi) = v-Log(omega) by S.4.2 given each label's
        phi_n (close to theta and xi, which they would equal at the optimum but for the
        intercept's dependence on them)."""
        noise = 1.0 - clean_proba
        eta = update_eta(sample_weight, clean_proba, noise, priors.clean)
        return eta, update_omega(y, sample_weight, noise, priors.noise_grade)

    def row_log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """``log p(y_n | H_n)`` of each row under these parameters (the terms of
        :attr:`log_likelihood`, unweighted)."""
        y, margin = (np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin))
        logit_theta = float(logit(self.theta))
        intercept = _intercept(logit_theta, self.noise_grade)[0]
        return _row_log_likelihoods(
            logit_theta, self.noise_grade, float(np.log(self.scale)), intercept, y, margin
        )

    def _channel(self) -> np.ndarray:
        """``(b, c, a_-, a_+)``: the scale and intercept of :meth:`log_odds` and the offsets of
        q(w) (:meth:`clean`), what the compiled kernels read."""
        clean = self.clean
        intercept = _intercept(logit(self.theta), self.noise_grade)[0]
        return np.array([self.scale, intercept, clean.offset_neg, clean.offset_pos])

    def flip_rates(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """``[share of wrong labels, P(y=+1 | true -1), P(y=-1 | true +1)]`` on these rows.

        The last two are the binary channel of S.2 (``b`` and ``a`` there), each the expected
        number of wrong labels of a true class over the expected size of that class.
        """
        return flip_rates_from_mislabel(self.mislabel_proba(y, margin), y, sample_weight)

    def flip_rate_interval(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        n_draws: int = 400,
        random_state: RandomStateLike = None,
    ) -> np.ndarray:
        """Equal-tailed ``level`` credible intervals of the three :meth:`flip_rates`, shape (3, 2).

        Parameters are drawn from the Laplace approximation (a normal on ``(logit theta, xi,
        log b)``) and the rates recomputed for each draw on the same rows. Above
        :data:`INTERVAL_ROWS` rows, each draw's rates are those at the posterior mode on all
        rows plus the draw's change from the mode on a random subset of that many rows (a
        control variate: the change is small and smooth in the parameters, so its subset
        estimate is off by well under 1% of the interval's width, far below the Monte Carlo
        error of ``n_draws`` draws).
        """
        y, margin, weight = (
            np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin, sample_weight)
        )
        draws = self.posterior_draws(n_draws, random_state)
        channels = np.array([draw._channel() for draw in draws])
        subset = interval_subset(y.size, random_state)
        if subset is not None:
            at_mode = _flip_rate_sums_of(self._channel()[None, :], y, margin, weight)
            sub = (y[subset], margin[subset], weight[subset])
            sums = _flip_rate_sums_of(channels, *sub)
            sub_mode = _flip_rate_sums_of(self._channel()[None, :], *sub)
            rates = flip_rates_from_sums(at_mode[0]) + (
                _rates_of_sums(sums) - flip_rates_from_sums(sub_mode[0])
            )
        else:
            rates = _rates_of_sums(_flip_rate_sums_of(channels, y, margin, weight))
        return equal_tailed_interval(rates, level)

    def joints_of(
        self,
        draws: list[NoiseCalibration],
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
    ) -> np.ndarray:
        """:meth:`joint` of each of ``draws`` on these rows, shape (n_draws, 2, 2), in one
        compiled pass per draw (the joint of two classes is the expected wrong labels among
        each label's rows)."""
        y, margin, weight = (
            np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin, sample_weight)
        )
        channels = np.array([draw._channel() for draw in draws])
        wrong = _wrong_by_label(channels, y, margin, weight)  # (n_draws, [-1 labels, +1])
        by_label = np.bincount((y >= 0).astype(np.intp), weights=weight, minlength=2)
        joints = np.empty((len(draws), 2, 2))
        joints[:, 0, 0] = by_label[0] - wrong[:, 0]
        joints[:, 0, 1] = wrong[:, 0]
        joints[:, 1, 0] = wrong[:, 1]
        joints[:, 1, 1] = by_label[1] - wrong[:, 1]
        total = float(weight.sum())
        return joints / total if total > 0 else joints

    def posterior_draws(
        self, n_draws: int = 400, random_state: RandomStateLike = None
    ) -> list[NoiseCalibration]:
        """Parameter draws from the Laplace approximation (a normal on ``(logit theta, xi,
        log b)``), clipped to the search box, as calibrations (with this covariance)."""
        rng = spawn_generator(random_state)
        mean = np.array([logit(self.theta), self.noise_grade, np.log(self.scale)])
        # Through the eigenvectors of the covariance, as the committed outputs were drawn
        # (laplace_draws: three parameters, whose eigenvalues are apart).
        draws = laplace_draws(rng, mean, self.covariance, np.array(_BOUNDS), n_draws, method="eigh")
        return [
            NoiseCalibration(expit(logit_theta), xi, np.exp(log_b), self.covariance, 0.0)
            for logit_theta, xi, log_b in draws
        ]


def equal_tailed_interval(draws: np.ndarray, level: float = 0.9) -> np.ndarray:
    """Equal-tailed ``level`` interval of each column of ``draws``, shape (n_columns, 2)."""
    tail = (1.0 - level) / 2.0
    return np.quantile(draws, [tail, 1.0 - tail], axis=0).T


def mislabel_proba_in_sample(
    clean_proba: np.ndarray, y: np.ndarray, margin: np.ndarray
) -> np.ndarray:
    """``(1 - phi_n) sigmoid(-y_n H_n)``: the probability that label ``y_n`` differs from the
    row's true class under Algorithm 1's in-sample q(w) (phi_n) and the training margins (a
    ranking, not calibrated: :meth:`NoiseCalibration.mislabel_proba` is the calibrated one)."""
    return (1.0 - clean_proba) * expit(-y * margin)


def true_class_from_mislabel(wrong: np.ndarray, y_index: np.ndarray) -> np.ndarray:
    """Two classes: each row's posterior of its true class (columns in the order of
    ``classes_``) from ``wrong``, the probability that its label is wrong, and ``y_index``,
    its label's index (a wrong label's true class is the other one)."""
    positive = np.where(y_index == 1, 1.0 - wrong, wrong)
    return np.column_stack([1.0 - positive, positive])


def joint_of(true_proba: np.ndarray, y: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
    """The joint of given (rows) and true (columns) labels from each row's posterior of its
    true class: the sum over rows of ``s_n 1{y_n = j} P(true = i)`` at ``[j, i]``, divided by
    the weight (``y``: class indices)."""
    n_classes = true_proba.shape[1]
    joint = np.zeros((n_classes, n_classes))
    np.add.at(joint, y, sample_weight[:, None] * true_proba)
    total = float(sample_weight.sum())
    return joint / total if total > 0 else joint


def flip_rate_sums(wrong: np.ndarray, y: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
    """The six weighted sums behind :func:`flip_rates_from_sums`: the total weight, the
    expected wrong labels, those among -1 labels and among +1 labels, and the expected weights
    of true +1 and true -1 rows. Sums over disjoint sets of rows add up."""
    label = (y >= 0).astype(np.intp)  # 0: a -1 label, 1: a +1 label
    wrong_by_label = np.bincount(label, weights=sample_weight * wrong, minlength=2)
    weight_by_label = np.bincount(label, weights=sample_weight, minlength=2)
    return _six_sums(wrong_by_label[None, :], weight_by_label)[0]


def _six_sums(wrong_by_label: np.ndarray, weight_by_label: np.ndarray) -> np.ndarray:
    """:func:`flip_rate_sums` from the expected wrong labels among -1 and +1 labels (one row
    per set of them) and the weights of the -1 and +1 labels."""
    wrong_neg, wrong_pos = wrong_by_label[:, 0], wrong_by_label[:, 1]
    weight_neg, weight_pos = weight_by_label
    # A true +1 row is a +1 label that is right or a -1 label that is wrong (and vice versa).
    return np.column_stack(
        [
            np.full_like(wrong_neg, weight_neg + weight_pos),
            wrong_neg + wrong_pos,
            wrong_neg,
            wrong_pos,
            (weight_pos - wrong_pos) + wrong_neg,
            (weight_neg - wrong_neg) + wrong_pos,
        ]
    )


def flip_rates_from_sums(sums: np.ndarray) -> np.ndarray:
    """``[share of wrong labels, P(y=+1 | true -1), P(y=-1 | true +1)]`` from
    :func:`flip_rate_sums` (the binary channel of S.2: expected wrong labels of a true class over
    the expected size of that class)."""
    total, wrong, pos_flipped, neg_flipped, true_pos, true_neg = sums
    with np.errstate(divide="ignore", invalid="ignore"):  # a class expected empty: NaN
        return np.array([wrong / total, neg_flipped / true_neg, pos_flipped / true_pos])


def flip_rates_from_mislabel(
    wrong: np.ndarray, y: np.ndarray, sample_weight: np.ndarray
) -> np.ndarray:
    """``[share of wrong labels, P(y=+1 | true -1), P(y=-1 | true +1)]`` from per-row
    probabilities ``wrong`` that a label differs from its row's true class."""
    return flip_rates_from_sums(flip_rate_sums(wrong, y, sample_weight))


def _rates_of_sums(sums: np.ndarray) -> np.ndarray:
    """:func:`flip_rates_from_sums` of each row of ``sums`` (shape ``(n, 6)``), shape (n, 3)."""
    return np.array([flip_rates_from_sums(row) for row in sums]).reshape(-1, 3)


@numba.njit(cache=True)
def _log_expit(x):  # pragma: no cover - compiled
    """log sigmoid(x) without overflow."""
    if x >= 0.0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


@numba.njit(cache=True)
def _log_mislabel(y, margin, channel):  # pragma: no cover - compiled
    """log P(label wrong) of one row: ``log(1 - phi) + log sigmoid(-y F)`` with ``F = b H + c``
    and ``1 - phi = sigmoid(-(a_y - softplus(-y F)))`` (q(w) at point estimates, slope 1:
    :meth:`viboost.variational.CleanLogOdds.log_proba`); ``channel = (b, c, a_-, a_+)``. The
    log-space form of :func:`_mislabel`, for channels whose offsets :func:`_linear_channel`
    refuses."""
    knot = -y * (channel[0] * margin + channel[1])  # -y F
    offset = channel[3] if y > 0.0 else channel[2]
    softplus = max(knot, 0.0) + math.log1p(math.exp(-abs(knot)))
    return _log_expit(softplus - offset) + _log_expit(knot)


#: Above this offset (or log ratio) the linear-space row kernels would overflow ``exp`` (the
#: largest double is e^709.8); the log-space forms take over.
_LINEAR_LIMIT = 700.0


@numba.njit(cache=True)
def _linear_channel(channel):  # pragma: no cover - compiled
    """Whether :func:`_mislabel` may read ``channel``: its offsets ``a_y`` below
    :data:`_LINEAR_LIMIT`, so that ``exp(a_y)`` is finite."""
    return max(channel[2], channel[3]) < _LINEAR_LIMIT


@numba.njit(cache=True)
def _mislabel(y, margin, channel, odds_neg, odds_pos):  # pragma: no cover - compiled
    """P(label wrong) of one row, :func:`_log_mislabel` in linear space with one ``exp``:
    ``sigmoid(-y F) (1 - phi)`` with ``1 - phi = 1 / (1 + e^{a_y} sigmoid(y F))`` (since
    ``e^{-softplus(-y F)} = sigmoid(y F)``); ``odds_y = e^{a_y}``, finite
    (:func:`_linear_channel`). Both factors are ratios of terms in [0, 1] and in [1, inf), so
    nothing cancels: the relative error is a few ulp, as in log space."""
    knot = -y * (channel[0] * margin + channel[1])  # -y F
    odds = odds_pos if y > 0.0 else odds_neg
    e = math.exp(-abs(knot))
    inverse = 1.0 / (1.0 + e)
    if knot >= 0.0:
        wrong_side, right_side = inverse, e * inverse  # sigmoid(-y F), sigmoid(y F)
    else:
        wrong_side, right_side = e * inverse, inverse
    return wrong_side / (1.0 + odds * right_side)


@threaded_kernel(cache=True)
def _mislabel_kernel(y, margin, channel):  # pragma: no cover - compiled
    """P(label wrong) of every row (:func:`_mislabel`, or :func:`_log_mislabel` for a channel
    :func:`_linear_channel` refuses)."""
    out = np.empty(y.shape[0])
    if _linear_channel(channel):
        odds_neg, odds_pos = math.exp(channel[2]), math.exp(channel[3])
        for i in numba.prange(y.shape[0]):
            out[i] = _mislabel(y[i], margin[i], channel, odds_neg, odds_pos)
    else:
        for i in numba.prange(y.shape[0]):
            out[i] = math.exp(_log_mislabel(y[i], margin[i], channel))
    return out


def _flip_rate_sums_of(
    channels: np.ndarray, y: np.ndarray, margin: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """:func:`flip_rate_sums` of the rows under each channel of ``channels`` (one per row,
    :meth:`NoiseCalibration._channel`), shape ``(n_channels, 6)``."""
    label = (y >= 0).astype(np.intp)
    weight_by_label = np.bincount(label, weights=weight, minlength=2)
    return _six_sums(_wrong_by_label(channels, y, margin, weight), weight_by_label)


@threaded_kernel(cache=True)
def _wrong_by_label(channels, y, margin, weight):  # pragma: no cover - compiled
    """Per channel, the expected wrong labels among the -1 and the +1 labels, shape
    ``(n_channels, 2)``; each channel's sums run over the rows in order (the same for any
    number of threads)."""
    out = np.zeros((channels.shape[0], 2))
    for d in numba.prange(channels.shape[0]):
        channel = channels[d]
        linear = _linear_channel(channel)
        odds_neg = math.exp(min(channel[2], _LINEAR_LIMIT))
        odds_pos = math.exp(min(channel[3], _LINEAR_LIMIT))
        wrong_neg, wrong_pos = 0.0, 0.0
        for i in range(y.shape[0]):
            if linear:
                wrong = weight[i] * _mislabel(y[i], margin[i], channel, odds_neg, odds_pos)
            else:
                wrong = weight[i] * math.exp(_log_mislabel(y[i], margin[i], channel))
            if y[i] >= 0.0:
                wrong_pos += wrong
            else:
                wrong_neg += wrong
        out[d, 0] = wrong_neg
        out[d, 1] = wrong_pos
    return out


@numba.njit(cache=True)
def _row_terms_log(yi, margin, b, intercept, log_theta, noise_pos, noise_neg):  # pragma: no cover
    """One row's ``log p(y | H) = logaddexp(log theta sigmoid(y F), log (1 - theta) sigmoid(y
    xi))`` with ``F = b H + c``, its ``phi``, ``sigmoid(-y F)`` and ``y b H``; ``noise_pos`` and
    ``noise_neg`` are ``log (1 - theta) sigmoid(+-xi)``. The log-space form of
    :func:`_row_terms`, for parameters :func:`_linear_ratios` refuses."""
    ybh = yi * b * margin
    yf = ybh + yi * intercept
    # log sigmoid(y F) and sigmoid(-y F) from one exp and one log1p.
    e = math.exp(-abs(yf))
    if yf >= 0.0:
        log_signal = log_theta - math.log1p(e)
        sig = e / (1.0 + e)
    else:
        log_signal = log_theta + yf - math.log1p(e)
        sig = 1.0 / (1.0 + e)
    log_noise = noise_pos if yi > 0.0 else noise_neg
    # row = logaddexp(log_signal, log_noise) and phi = exp(log_signal - row).
    gap = log_signal - log_noise
    e = math.exp(-abs(gap))
    if gap >= 0.0:
        return log_signal + math.log1p(e), 1.0 / (1.0 + e), sig, ybh
    return log_noise + math.log1p(e), e / (1.0 + e), sig, ybh


@numba.njit(cache=True)
def _linear_ratios(log_theta, noise_pos, noise_neg):  # pragma: no cover - compiled
    """``theta / ((1 - theta) sigmoid(+-xi))``, the odds of signal over noise at ``sigmoid(y
    F) = 1`` for each label, and whether both are finite (log ratios below
    :data:`_LINEAR_LIMIT`), so that :func:`_row_terms` may use them."""
    gap_pos, gap_neg = log_theta - noise_pos, log_theta - noise_neg
    linear = max(gap_pos, gap_neg) < _LINEAR_LIMIT
    return (
        math.exp(min(gap_pos, _LINEAR_LIMIT)),
        math.exp(min(gap_neg, _LINEAR_LIMIT)),
        linear,
    )


@numba.njit(cache=True)
def _row_terms(
    yi, margin, b, intercept, noise_pos, noise_neg, ratio_pos, ratio_neg
):  # pragma: no cover - compiled
    """:func:`_row_terms_log` with one ``exp`` and one ``log1p``: with ``r = theta sigmoid(y F)
    / ((1 - theta) sigmoid(y xi))`` (``ratio_y`` times ``sigmoid(y F)``), ``log p(y | H) = log
    (1 - theta) sigmoid(y xi) + log1p(r)`` and ``phi = r / (1 + r)``, the same logaddexp
    written around the noise term, which is a constant per label. ``r`` is a product of
    positive terms and ``1 + r`` has no cancellation, so the result is as accurate as the log
    form's; ``ratio_y`` must be finite (:func:`_linear_ratios`)."""
    ybh = yi * b * margin
    yf = ybh + yi * intercept
    e = math.exp(-abs(yf))
    inverse = 1.0 / (1.0 + e)
    if yf >= 0.0:
        signal, sig = inverse, e * inverse  # sigmoid(y F), sigmoid(-y F)
    else:
        signal, sig = e * inverse, inverse
    if yi > 0.0:
        log_noise, r = noise_pos, ratio_pos * signal
    else:
        log_noise, r = noise_neg, ratio_neg * signal
    return log_noise + math.log1p(r), r / (1.0 + r), sig, ybh


@numba.njit(cache=True)
def _row_terms_either(
    yi, margin, b, intercept, log_theta, noise_pos, noise_neg, ratio_pos, ratio_neg, linear
):  # pragma: no cover - compiled
    """:func:`_row_terms` where ``linear`` (:func:`_linear_ratios`), else
    :func:`_row_terms_log`."""
    if linear:
        return _row_terms(yi, margin, b, intercept, noise_pos, noise_neg, ratio_pos, ratio_neg)
    return _row_terms_log(yi, margin, b, intercept, log_theta, noise_pos, noise_neg)


@threaded_kernel(cache=True)
def _row_log_likelihoods(logit_theta, xi, log_b, intercept, y, margin):  # pragma: no cover
    """``log p(y_n | H_n)`` of every row (:func:`_row_terms`)."""
    log_theta = _log_expit(logit_theta)
    log_not_theta = _log_expit(-logit_theta)
    noise_pos = log_not_theta + _log_expit(xi)
    noise_neg = log_not_theta + _log_expit(-xi)
    ratio_pos, ratio_neg, linear = _linear_ratios(log_theta, noise_pos, noise_neg)
    b = math.exp(log_b)
    out = np.empty(y.shape[0])
    for i in numba.prange(y.shape[0]):
        out[i] = _row_terms_either(
            y[i], margin[i], b, intercept, log_theta, noise_pos, noise_neg, ratio_pos,
            ratio_neg, linear,
        )[0]  # fmt: skip
    return out


@threaded_kernel(cache=True)
def _objective_sums(
    logit_theta, xi, log_b, intercept, y, margin, weight, n_chunks
):  # pragma: no cover - compiled
    """The sums over rows of :func:`_objective`: ``sum w log p(y | H)``, ``sum w (phi -
    theta)``, ``sum w phi y sigmoid(-y F)``, ``sum w (1 - phi) y sigmoid(-y xi)`` and ``sum w
    phi y b H sigmoid(-y F)``, with ``F = b H + c``; over fixed chunks summed in order."""
    n = y.shape[0]
    theta = 1.0 / (1.0 + math.exp(-logit_theta))
    log_theta = _log_expit(logit_theta)
    log_not_theta = _log_expit(-logit_theta)
    b = math.exp(log_b)
    # The noise term is a constant per label: log (1 - theta) sigmoid(y xi).
    noise_pos = log_not_theta + _log_expit(xi)
    noise_neg = log_not_theta + _log_expit(-xi)
    ratio_pos, ratio_neg, linear = _linear_ratios(log_theta, noise_pos, noise_neg)
    slope_pos = 1.0 / (1.0 + math.exp(xi))  # sigmoid(-xi)
    slope_neg = -1.0 / (1.0 + math.exp(-xi))  # -sigmoid(xi)
    size = (n + n_chunks - 1) // n_chunks
    partial = np.zeros((n_chunks, 5))
    for c in numba.prange(n_chunks):
        # Local sums (chunks' partials share cache lines: writing them per row would make the
        # threads contend).
        s0, s1, s2, s3, s4 = 0.0, 0.0, 0.0, 0.0, 0.0
        for i in range(c * size, min(n, (c + 1) * size)):
            w = weight[i]
            yi = y[i]
            row, clean, sig, ybh = _row_terms_either(
                yi, margin[i], b, intercept, log_theta, noise_pos, noise_neg, ratio_pos,
                ratio_neg, linear,
            )  # fmt: skip
            s0 += w * row
            s1 += w * (clean - theta)
            s2 += w * clean * yi * sig
            s3 += w * (1.0 - clean) * (slope_pos if yi > 0.0 else slope_neg)
            s4 += w * clean * ybh * sig
        partial[c, 0], partial[c, 1], partial[c, 2], partial[c, 3], partial[c, 4] = (
            s0,
            s1,
            s2,
            s3,
            s4,
        )
    total = partial[0].copy()
    for c in range(1, n_chunks):
        total += partial[c]
    return total


def _sums(
    params: np.ndarray, intercept: float, y: np.ndarray, margin: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """:func:`_objective_sums` at ``(logit theta, xi, log b)``, on one thread when small."""
    n_chunks = sum_chunks(y.size)
    kernel = _objective_sums.serial if n_chunks == 1 else _objective_sums
    return kernel(float(params[0]), float(params[1]), float(params[2]), float(intercept),
                  y, margin, weight, n_chunks)  # fmt: skip


def _intercept(logit_theta: float, xi: float) -> tuple[float, float, float]:
    """``c = logit p0`` of :meth:`NoiseCalibration.log_odds` and its derivatives in
    ``logit theta`` and ``xi``; ``p0`` is kept within [1e-9, 1 - 1e-9] (beyond, a class would be
    flipped more often than not)."""
    theta, s = expit(logit_theta), expit(xi)
    p0 = (0.5 - (1.0 - theta) * s) / theta
    if not _P0_MIN < p0 < 1.0 - _P0_MIN:
        p0 = min(max(p0, _P0_MIN), 1.0 - _P0_MIN)
        return float(logit(p0)), 0.0, 0.0
    dc_dp0 = 1.0 / (p0 * (1.0 - p0))
    dp0_du = (s - 0.5) * (1.0 - theta) / theta
    dp0_dxi = -(1.0 - theta) * s * (1.0 - s) / theta
    return float(logit(p0)), dc_dp0 * dp0_du, dc_dp0 * dp0_dxi


def _objective(
    params: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    weight: np.ndarray,
    total: float,
    priors: ModelPriors,
) -> tuple[float, np.ndarray]:
    """Minus the log posterior of ``(logit theta, xi, log b)`` and its gradient, both divided by
    the total weight ``total`` (``weight`` sums to 1), so that no sum overflows whatever the
    scale of the sample weights. The sums over rows are one compiled pass
    (:func:`_objective_sums`): ``log p(y_n | H_n) = log(theta sigmoid(y_n F_n) + (1 - theta)
    sigmoid(y_n xi))`` with ``F = b H + c`` (:meth:`NoiseCalibration.log_odds`)."""
    logit_theta, xi, log_b = params
    theta = expit(logit_theta)
    c, dc_du, dc_dxi = _intercept(logit_theta, xi)
    value_sum, d_theta, d_f, d_xi, d_b = _sums(params, c, y, margin, weight)
    # theta ~ Beta(zeta) in logit coordinates (Jacobian theta (1 - theta) included); xi under
    # its v-Log prior mu_0' (log sigmoid(xi) + log sigmoid(-xi)); log b ~ N(0, sd^2).
    zeta1, zeta2 = priors.clean
    mu = priors.noise_grade
    log_prior = (
        zeta1 * log_expit(logit_theta)
        + zeta2 * log_expit(-logit_theta)
        + mu * (log_expit(xi) + log_expit(-xi))
        - 0.5 * (log_b / _LOG_SCALE_PRIOR_SD) ** 2
    )
    value = float(value_sum + log_prior / total)
    # d row / dF = phi_n y_n sigmoid(-y_n F_n); F depends on (logit theta, xi) through c.
    grad = np.array(
        [
            d_theta + d_f * dc_du + (zeta1 * (1.0 - theta) - zeta2 * theta) / total,
            d_xi + d_f * dc_dxi + mu * (expit(-xi) - expit(xi)) / total,
            d_b - log_b / _LOG_SCALE_PRIOR_SD**2 / total,
        ]
    )
    return -value, -grad


def calibrate_noise(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray | None = None,
    priors: ModelPriors | None = None,
    start: NoiseCalibration | None = None,
) -> NoiseCalibration:
    """Fit theta, xi and the scale of ``H`` by the marginal likelihood of the labels.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    margin : ndarray of shape (n_samples,)
        Ensemble margins ``H`` not fitted to these labels (out-of-fold).
    sample_weight : ndarray of shape (n_samples,), default=None
        Multiplicities of the rows.
    priors : ModelPriors, default=None
        The model's priors (zeta on theta, mu_0' on xi); the paper's defaults if None.
    start : NoiseCalibration, default=None
        Where the search starts (a calibration of nearby margins, such as the previous check of
        a cross-fit: fewer steps); ``theta = 0.73, xi = 0, b = 1`` if None. The optimum found
        is the same to rounding (the search ends with Newton steps at the optimum itself).

    Returns
    -------
    NoiseCalibration
        The posterior mode and its Laplace covariance.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import expit
    >>> rng = np.random.default_rng(0)
    >>> margin = rng.normal(scale=4.0, size=20000)
    >>> true = np.where(rng.random(20000) < expit(margin), 1.0, -1.0)
    >>> noisy = rng.random(20000) < 0.4  # 40% noise labels, +1 or -1 at random
    >>> y = np.where(noisy, rng.choice([-1.0, 1.0], size=20000), true)
    >>> fit = calibrate_noise(y, margin / 2)  # margins on half the true scale
    >>> round(fit.theta, 1), round(fit.scale, 1)
    (0.6, 2.0)
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    margin = np.ascontiguousarray(margin, dtype=np.float64)
    weight = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, float)
    priors = ModelPriors() if priors is None else priors
    total = float(weight.sum())
    share = np.ascontiguousarray(weight / total)
    if start is None:
        x0 = np.array([1.0, 0.0, 0.0])
    else:
        x0 = np.array([logit(start.theta), start.noise_grade, np.log(start.scale)])
        x0 = np.clip(x0, *np.array(_BOUNDS).T)
    args = (y, margin, share, total, priors)
    params, covariance = laplace_posterior(_objective, x0, args, np.array(_BOUNDS), total)
    return NoiseCalibration(
        theta=float(expit(params[0])),
        noise_grade=float(params[1]),
        scale=float(np.exp(params[2])),
        covariance=covariance,
        log_likelihood=total
        * float(_sums(params, _intercept(*params[:2])[0], y, margin, share)[0]),
    )


#: The identifiable noise model: each class's labels wrong at most this often
#: (:func:`integrate_noise_posterior`).
MAX_FLIP_RATE = 0.45


def integrate_noise_posterior(
    mode: NoiseCalibration,
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    priors: ModelPriors,
    n_draws: int = 400,
    random_state: RandomStateLike = None,
    guide: np.ndarray | None = None,
) -> NestedPosterior:
    """The posterior of ``(theta, xi, b)`` without the normal approximation in ``logit
    theta``: :func:`~viboost.noise_fit.laplace.nested_posterior` (a grid over ``logit theta``
    with the Laplace approximation over ``(xi, log b)`` at each node), its draws as
    calibrations in :attr:`~viboost.noise_fit.laplace.NestedPosterior.draws`.

    The Laplace approximation of :func:`calibrate_noise` is a normal in ``logit theta``; where
    the labels say little about the noise (few rows, classes that overlap) the posterior of
    theta is skewed towards theta = 1 (a likelihood flat in ``logit theta`` up there), and the
    normal misses that tail. ``log_evidence`` carries the priors' normalising constants (Beta
    on theta, v-Log on xi, the normal on log b), to be compared with the no-noise model's
    (:func:`viboost.noise_fit.posterior.no_noise_log_evidence`). The posterior is that of the
    identifiable model: each class's labels are wrong at most :data:`MAX_FLIP_RATE` of the
    time (``(1 - theta) sigmoid(+-xi) <= 0.45``, so ``|xi| <= logit(0.45 / (1 - theta))``
    where ``1 - theta > 0.45``, and ``1 - theta <= 0.9``); beyond, the labels' classes could
    be swapped and the intercept's ``p0`` runs to 0 (a likelihood with a second, spurious
    mode at a near-step signal model drowned in noise).
    """
    y, margin, weight = (
        np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin, sample_weight)
    )
    total = float(weight.sum())
    args = (y, margin, np.ascontiguousarray(weight / total), total, priors)
    bounds = np.array(_BOUNDS)

    def rest_bounds(logit_theta: float) -> np.ndarray:
        rest = bounds[1:].copy()
        noise = float(expit(-logit_theta))
        if noise > MAX_FLIP_RATE:
            edge = float(logit(min(MAX_FLIP_RATE / noise, 1.0 - 1e-12)))
            rest[0] = (-edge, edge)
        return rest

    zeta1, zeta2 = priors.clean
    mu = priors.noise_grade
    log_norm = (
        -betaln(zeta1, zeta2) - betaln(mu, mu) - 0.5 * np.log(2.0 * np.pi * _LOG_SCALE_PRIOR_SD**2)
    )
    mean = np.array([logit(mode.theta), mode.noise_grade, np.log(mode.scale)])
    nested = nested_posterior(
        _objective, mean, mode.covariance, args, rest_bounds, total, float(log_norm),
        n_draws, spawn_generator(random_state), float(logit(1.0 - 2.0 * MAX_FLIP_RATE)) + 1e-9,
        guide=guide,
    )  # fmt: skip
    draws = [
        NoiseCalibration(float(expit(u)), float(xi), float(np.exp(log_b)), mode.covariance, 0.0)
        for u, xi, log_b in nested.params
    ]
    return replace(nested, draws=draws)


def peak_calibration(posterior: NestedPosterior, mode: NoiseCalibration) -> NoiseCalibration:
    """The calibration at the peak of :func:`integrate_noise_posterior`'s marginal posterior
    of theta (within the identifiable model), with ``mode``'s covariance."""
    u, xi, log_b = posterior.peak
    return NoiseCalibration(float(expit(u)), float(xi), float(np.exp(log_b)), mode.covariance,
                            mode.log_likelihood)  # fmt: skip
