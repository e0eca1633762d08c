"""The posterior of the noise model that the cross-fit reports and refits with.

A calibration (:mod:`viboost.noise_fit.calibration`, :mod:`~viboost.noise_fit.class_calibration`,
:mod:`~viboost.noise_fit.channel_calibration`) is the mode of the noise model's posterior given
out-of-fold margins. Reporting and refitting at that mode claims more than the labels say where
they say little: on clean labels whose classes overlap, the mode puts a few per cent of the
labels down as noise (rows the ensemble cannot yet predict look like wrong labels), its
logit-normal interval never reaches "no noise", and the refit discounts correct hard rows.

:class:`NoisePosterior` is the model average of two models:

- *no noise* (theta = 1, every label drawn from the signal model; the core model with a fitted
  scale of the margins), with prior probability :data:`NO_NOISE_PRIOR`;
- the noise model (theta < 1), through draws from its posterior: for two classes by quadrature
  over theta (:func:`~viboost.noise_fit.calibration.integrate_noise_posterior`), for K classes
  from the calibration's Laplace approximation.

Their posterior probabilities are Bayes' rule on the two models' evidence, ``p(y | H)``
(:func:`no_noise_log_evidence` for the first). Every statistic is the posterior average: the
probability that a label is right (phi_n, the refit's multiplicity), that it is wrong, each
row's true class, the joint of given and true labels and the noise matrix, and the flip rates,
whose credible intervals are quantiles of that mixture. The share of wrong labels is that of
*these* rows: each draw's expected share plus the binomial spread of the realised share around
it, so that an interval can hold the share a simulation actually flipped.

A statistic of the no-noise model is exact (no label wrong): when its posterior probability
exceeds the tail of an interval, the interval starts at 0, and :attr:`NoisePosterior.no_noise_proba`
is the stated probability that no label is wrong.

Both models are approximations of how the labels came about (a logistic signal of the margins, a
noisy label drawn whatever the features say), and a posterior conditional on a misspecified
model is too sure of itself. The posterior the cross-fit reports is therefore *bagged*
(BayesBag: Buhlmann 2014; Huggins and Miller, "Reproducible model selection using bagged
posteriors", Bayesian Analysis 2023): the average of :data:`BAGS` posteriors, each given a
Bayesian-bootstrap reweighting of the calibration's rows and of the cross-fit's validation
folds, whose rows share one booster's errors (:func:`bootstrap_reweightings`,
:func:`bag_posteriors`). Its spread is the posterior's plus the sampling spread of the
calibration itself (the sandwich variance ``J^-1 I J^-1``, which the posterior alone misses
where the model is wrong), and its probability of no noise is the average of theirs, so that a
choice between the two models that a reweighting of the rows would overturn is not stated
with confidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import expit, logsumexp

from viboost.noise_fit.calibration import (
    INTERVAL_ROWS,
    interval_subset,
    joint_of,
    true_class_from_mislabel,
)
from viboost.noise_fit.class_calibration import joint_rates
from viboost.noise_fit.model import NoiseModel
from viboost.variational.priors import ModelPriors

__all__ = [
    "AVERAGE_DRAWS",
    "BAGS",
    "NO_NOISE_PRIOR",
    "POSTERIOR_DRAWS",
    "NoisePosterior",
    "RowAverages",
    "bag_posteriors",
    "bootstrap_reweightings",
    "model_average",
    "no_noise_log_evidence",
    "posterior_rows",
    "weighted_quantiles",
]

#: Draws from the noise model's posterior behind the intervals.
POSTERIOR_DRAWS = 200
#: Prior probability that no label is wrong (theta = 1): even odds against the noise model.
NO_NOISE_PRIOR = 0.5
#: The per-row averages (phi_n, the probability that a label is wrong, the true class) are
#: taken over at most this many of the draws (the first: draws are independent).
AVERAGE_DRAWS = 50
#: The reported posterior is the average of this many posteriors, each given a
#: Bayesian-bootstrap reweighting of the calibration's rows (:func:`bag_posteriors`).
BAGS = 8
#: The nodes of :func:`no_noise_log_evidence`'s trapezoid rule over ``log b``.
_EVIDENCE_NODES = 41
#: The prior on ``log b`` of every calibration: N(0, 3^2).
_LOG_SCALE_PRIOR_SD = 3.0


def no_noise_log_evidence(
    row_log_likelihood: Callable[[float], np.ndarray], sample_weight: np.ndarray
) -> float:
    """``log p(y | H)`` when every label is drawn from the signal model with log-odds ``b H``,
    ``b`` integrated over its prior ``log b ~ N(0, 3^2)`` by the trapezoid rule on a grid of
    ``log b`` around the posterior mode (:data:`_EVIDENCE_NODES` nodes over 10 posterior
    standard deviations on each side: half a standard deviation apart, where the trapezoid
    rule's error on a smooth, normal-like integrand is of order ``exp(-2 pi^2 / 0.5^2)``, far
    below rounding).

    ``row_log_likelihood(b)``: each row's ``log p(y_n | b H_n)``.

    Examples
    --------
    With no rows the evidence is the prior's total mass:

    >>> import numpy as np
    >>> round(no_noise_log_evidence(lambda b: np.zeros(0), np.zeros(0)), 6)
    0.0
    """
    weight = np.asarray(sample_weight, dtype=np.float64)
    sd = _LOG_SCALE_PRIOR_SD

    def log_joint(log_b: float) -> float:
        prior = -0.5 * (log_b / sd) ** 2 - 0.5 * np.log(2.0 * np.pi * sd**2)
        return float(np.dot(weight, row_log_likelihood(float(np.exp(log_b))))) + prior

    best = minimize_scalar(lambda v: -log_joint(v), bounds=(-20.0, 20.0), method="bounded",
                           options={"xatol": 1e-8})  # fmt: skip
    centre = float(best.x)
    step = 1e-3
    curvature = -(log_joint(centre + step) - 2 * log_joint(centre) + log_joint(centre - step))
    width = 1.0 / np.sqrt(curvature / step**2) if curvature > 0 else sd
    if width < 1e-9:  # a posterior narrower than the grid can resolve: its Laplace value
        return log_joint(centre) + float(np.log(width * np.sqrt(2.0 * np.pi)))
    grid = np.linspace(centre - 10.0 * width, centre + 10.0 * width, _EVIDENCE_NODES)
    values = np.array([log_joint(v) for v in grid])
    # The trapezoid rule in log space.
    cells = np.logaddexp(values[:-1], values[1:]) - np.log(2.0) + np.log(np.diff(grid))
    return float(logsumexp(cells))


def weighted_quantiles(
    values: np.ndarray, weights: np.ndarray, levels: Sequence[float]
) -> np.ndarray:
    """Quantiles of each column of ``values`` (rows: draws with probabilities ``weights``),
    the smallest value whose cumulative probability reaches each level (NaN values left
    out), shape ``(n_columns, len(levels))``.

    Examples
    --------
    >>> import numpy as np
    >>> values, weights = np.array([[0.0], [1.0], [2.0]]), np.array([0.5, 0.25, 0.25])
    >>> weighted_quantiles(values, weights, [0.05, 0.6])
    array([[0., 1.]])
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.full((values.shape[1], len(levels)), np.nan)
    for j in range(values.shape[1]):
        column = values[:, j]
        keep = ~np.isnan(column)
        if not keep.any():
            continue
        order = np.argsort(column[keep], kind="stable")
        sorted_values = column[keep][order]
        cumulative = np.cumsum(weights[keep][order])
        cumulative /= cumulative[-1]
        for i, level in enumerate(levels):
            index = int(np.searchsorted(cumulative, level - 1e-12))
            out[j, i] = sorted_values[min(index, sorted_values.size - 1)]
    return out


@dataclass(frozen=True)
class RowAverages:
    """The per-row averages over a :class:`NoisePosterior` (:meth:`NoisePosterior.row_averages`).

    Attributes
    ----------
    clean_proba : ndarray of shape (n,)
        phi_n, the probability that each label was drawn from the signal model.
    true_class_proba : ndarray of shape (n, K)
        The posterior of each row's true class (columns in the order of ``classes_``).
    mislabel_proba : ndarray of shape (n,)
        The probability that each label is wrong.
    noise_true_class_proba, noise_mislabel_proba : ndarray
        The same two under the noise model alone (averaged over its draws).
    label_columns : ndarray of shape (n,)
        Each label's column of ``true_class_proba``.
    """

    clean_proba: np.ndarray
    true_class_proba: np.ndarray
    mislabel_proba: np.ndarray
    noise_true_class_proba: np.ndarray
    noise_mislabel_proba: np.ndarray
    label_columns: np.ndarray

    def joint(self, sample_weight: np.ndarray) -> np.ndarray:
        """The expected joint of given (rows) and true (columns) labels, averaged over the
        posterior, as shares of the weight (K, K)."""
        return joint_of(self.true_class_proba, self.label_columns, sample_weight)

    def noise_joint(self, sample_weight: np.ndarray) -> np.ndarray:
        """The same under the noise model alone."""
        return joint_of(self.noise_true_class_proba, self.label_columns, sample_weight)

    def flip_rates(self, sample_weight: np.ndarray) -> np.ndarray:
        """``[share of wrong labels, flip rate of each true class]`` of :meth:`joint`."""
        return joint_rates(self.joint(sample_weight))


@dataclass(frozen=True)
class NoisePosterior:
    """The posterior average of the no-noise model and the noise model (see the module
    docstring); it answers the :class:`~viboost.noise_fit.model.NoiseModel` questions, and
    the noise model's parameters (``theta``, ``scale``, ...) are those of its mode.

    Attributes
    ----------
    mode : NoiseModel
        The noise model's posterior mode (the calibration).
    draws : list of NoiseModel
        Draws from the noise model's posterior (theta < 1).
    no_noise_proba : float
        The posterior probability that no label is wrong.
    log_evidence : ndarray of shape (2,)
        ``log p(y | H)`` of the no-noise model and of the noise model.
    n_classes : int
    refit_model : NoiseModel
        The noise model whose phi_n the refit counts: for two classes the peak of the marginal
        posterior of theta within the identifiable model
        (:func:`~viboost.noise_fit.calibration.peak_calibration`), for K the mode.
    grid : ndarray or None
        Two classes: the nodes of ``logit theta`` and the log marginal density of the noise
        model's posterior there (:func:`~viboost.noise_fit.calibration.integrate_noise_posterior`).
    nodes : ndarray or None
        Where the posterior was integrated over theta, each node's parameters
        (:attr:`~viboost.noise_fit.laplace.NestedPosterior.nodes`): the guide of the bags'
        posteriors (:func:`bag_posteriors`).
    """

    mode: Any
    draws: list = field(repr=False)
    no_noise_proba: float
    log_evidence: np.ndarray
    n_classes: int
    refit_model: Any = field(repr=False)
    grid: np.ndarray | None = field(default=None, repr=False)
    nodes: np.ndarray | None = field(default=None, repr=False)

    # ------------------------------------------------------------ the mode's parameters
    def __getattr__(self, name: str) -> Any:
        # The noise model's named parameters (theta, noise_grade, scale, covariance, ...)
        # are its mode's; private names and the fields themselves are never forwarded (an
        # object being unpickled has no fields yet).
        if name.startswith("_") or name in {
            "mode",
            "draws",
            "no_noise_proba",
            "log_evidence",
            "n_classes",
            "grid",
            "refit_model",
            "nodes",
        }:
            raise AttributeError(name)
        return getattr(self.mode, name)

    @property
    def channel_name(self) -> str:
        return str(self.mode.channel_name)

    @property
    def log_likelihood(self) -> float:
        return float(self.mode.log_likelihood)

    def row_log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The mode's (the round-count search scores the calibration itself)."""
        return np.asarray(self.mode.row_log_likelihood(y, margin))

    # ------------------------------------------------------------ posterior averages
    def _averaged(self) -> list:
        return self.draws[:AVERAGE_DRAWS]

    def _label_columns(self, y: np.ndarray) -> np.ndarray:
        """Each label's column of ``true_class_proba`` (the label's class)."""
        return (
            np.asarray(y > 0, dtype=np.intp)
            if self.n_classes == 2
            else np.asarray(y, dtype=np.intp)
        )

    def row_averages(self, y: np.ndarray, margin: np.ndarray) -> RowAverages:
        """Every per-row posterior average in one pass over the averaged draws (each draw's
        phi_n and true-class posterior, summed as they come: no draw's rows are kept)."""
        y, margin = np.asarray(y), np.asarray(margin)
        columns = self._label_columns(y)
        binary = self.n_classes == 2
        clean_sum, wrong_sum = np.zeros(y.shape[0]), np.zeros(y.shape[0])
        true_sum = None if binary else np.zeros((y.shape[0], self.n_classes))
        draws = self._averaged()
        for draw in draws:
            clean_sum += draw.clean_proba(y, margin)
            # The probability that a label is wrong from its own kernel, not as 1 - P(true
            # class = label): no cancellation where it is tiny.
            wrong_sum += draw.mislabel_proba(y, margin)
            if true_sum is not None:
                true_sum += draw.true_class_proba(y, margin)
        noise_clean, noise_wrong = clean_sum / len(draws), wrong_sum / len(draws)
        # Two classes: a wrong label's true class is the other one (linear, so the average of
        # the draws' true-class posteriors is that of their averaged probability of a wrong
        # label).
        noise_true = (
            true_class_from_mislabel(noise_wrong, columns)
            if true_sum is None
            else true_sum / len(draws)
        )
        none = self.no_noise_proba
        true_class = (1.0 - none) * noise_true
        true_class[np.arange(y.shape[0]), columns] += none
        return RowAverages(
            clean_proba=none + (1.0 - none) * noise_clean,
            true_class_proba=true_class,
            mislabel_proba=(1.0 - none) * noise_wrong,
            noise_true_class_proba=noise_true,
            noise_mislabel_proba=noise_wrong,
            label_columns=columns,
        )

    def clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n averaged over the posterior: 1 under the no-noise model."""
        return self.row_averages(y, margin).clean_proba

    def refit_clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n of the refit (:class:`~viboost.fitting.cross_fit.CrossFitter`): the noise
        model's at :attr:`refit_model`.

        Not the posterior average (:meth:`clean_proba`): on small tables the labels leave
        theta all but undetermined between a little noise and a lot (the scale of the margins
        trades off against it), and averaged over that posterior every row's phi_n moves
        towards 1, the flipped rows' with the others'; the refit then fitted the flipped
        labels and lost up to 10 points of accuracy at 30% flips (``docs/label_noise.md``)."""
        return np.asarray(self.refit_model.clean_proba(y, margin))

    def mislabel_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The probability that each label is wrong, averaged over the posterior (0 under the
        no-noise model)."""
        return self.row_averages(y, margin).mislabel_proba

    def true_class_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """Each row's true class, averaged over the posterior (the label's own class under the
        no-noise model)."""
        return self.row_averages(y, margin).true_class_proba

    def joint(self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        """The expected joint of given (rows) and true (columns) labels, averaged over the
        posterior."""
        return self.row_averages(y, margin).joint(sample_weight)

    def _draw_joints(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """Each noise-model draw's joint on these rows, shape (n_draws, K, K)."""
        return np.asarray(self.mode.joints_of(self.draws, y, margin, sample_weight))

    def rate_draws(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        averages: RowAverages | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draws of ``[share of wrong labels, flip rate of each true class]`` and of the noise
        matrix (``P(given | true)``, flattened), the no-noise model's first, with their
        probabilities. ``averages``: :meth:`row_averages` of these rows, if at hand."""
        y, margin, weight = (
            np.asarray(y),
            np.asarray(margin),
            np.asarray(sample_weight, dtype=np.float64),
        )
        if averages is None:
            averages = self.row_averages(y, margin)
        subset = y.size > INTERVAL_ROWS
        # All rows, or a fixed, evenly spaced subset of them (the draws' spread is what is
        # estimated).
        rows: slice | np.ndarray = (
            np.linspace(0, y.size - 1, INTERVAL_ROWS).astype(np.intp) if subset else slice(None)
        )
        joints = self._draw_joints(y[rows], margin[rows], weight[rows])
        rates = np.array([joint_rates(joint) for joint in joints])
        with np.errstate(divide="ignore", invalid="ignore"):
            matrices = (joints / joints.sum(axis=1, keepdims=True)).reshape(len(self.draws), -1)
        if subset:
            # The subset's draws centred on the noise model's averages over all rows: the
            # subset estimates the spread, and its own sampling error (a share of 2^15 rows
            # is off by ~0.002) must not move the interval off the estimate.
            full = averages.noise_joint(weight)
            with np.errstate(divide="ignore", invalid="ignore"):
                full_matrix = (full / full.sum(axis=0, keepdims=True)).ravel()
            averaged = slice(0, min(AVERAGE_DRAWS, len(self.draws)))
            rates += joint_rates(full) - rates[averaged].mean(axis=0)
            matrices += full_matrix - matrices[averaged].mean(axis=0)
            np.clip(rates, 0.0, 1.0, out=rates)
            np.clip(matrices, 0.0, 1.0, out=matrices)
        # The realised share of wrong labels of these rows spreads binomially around each
        # draw's expected share (the rows' labels are wrong or not): its variance under the
        # noise model, sum_n s_n^2 p_n (1 - p_n) / S^2 with p_n the noise model's averaged
        # probability that label n is wrong, is added to each draw by a normal perturbation.
        wrong = averages.noise_mislabel_proba
        share = weight / weight.sum()  # (no overflow whatever the weights' scale)
        spread = float(np.sqrt(np.dot(share * share, wrong * (1.0 - wrong))))
        offsets = np.random.default_rng(0).standard_normal(rates.shape[0]) * spread
        rates[:, 0] = np.clip(rates[:, 0] + offsets, 0.0, 1.0)
        n_classes = self.n_classes
        none_rates = np.zeros((1, n_classes + 1))
        none_matrix = np.eye(n_classes).reshape(1, -1)
        values = np.vstack([np.hstack([none_rates, none_matrix]),
                            np.hstack([rates, matrices])])  # fmt: skip
        probabilities = np.concatenate(
            [
                [self.no_noise_proba],
                np.full(len(self.draws), (1.0 - self.no_noise_proba) / len(self.draws)),
            ]
        )
        return values, probabilities

    def flip_rates(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """The posterior mean of ``[share of wrong labels, flip rate of each true class]``."""
        return self.row_averages(y, margin).flip_rates(sample_weight)

    def intervals(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        averages: RowAverages | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed ``level`` credible intervals of :meth:`flip_rates`, shape (K + 1, 2),
        and of each entry of the noise matrix ``P(given j | true i)`` at ``[j, i]``, shape
        (K, K, 2): quantiles of the posterior mixture (``averages``: :meth:`row_averages`
        of these rows, if at hand)."""
        values, probabilities = self.rate_draws(y, margin, sample_weight, averages)
        return self.intervals_of_draws(values, probabilities, level)

    def intervals_of_draws(
        self, values: np.ndarray, probabilities: np.ndarray, level: float = 0.9
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`intervals` from :meth:`rate_draws`' ``values`` and ``probabilities``."""
        tail = (1.0 - level) / 2.0
        k = self.n_classes
        bounds = weighted_quantiles(values, probabilities, [tail, 1.0 - tail])
        return bounds[: k + 1], bounds[k + 1 :].reshape(k, k, 2)

    def flip_rate_interval(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        n_draws: int = 400,
        random_state: Any = None,
    ) -> np.ndarray:
        """Equal-tailed ``level`` credible intervals of :meth:`flip_rates`, shape (K + 1, 2)
        (:meth:`intervals`; the draws are the posterior's own: ``n_draws`` and
        ``random_state`` are not used)."""
        return self.intervals(y, margin, sample_weight, level)[0]

    def label_posteriors(
        self, y: np.ndarray, sample_weight: np.ndarray, clean_proba: np.ndarray, priors: ModelPriors
    ) -> tuple[np.ndarray, np.ndarray]:
        """q(theta) and the noisy labels' posterior given phi_n (the mode's updates)."""
        return self.mode.label_posteriors(y, sample_weight, clean_proba, priors)


def posterior_rows(
    y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows on which both models' posteriors are computed: all of them up to
    :data:`~viboost.noise_fit.calibration.INTERVAL_ROWS`, else a random subset of that many
    (:func:`~viboost.noise_fit.calibration.interval_subset`) with weights scaled to the
    total weight of all rows (the log-likelihood of the subset estimates that of all rows)."""
    weight = np.asarray(sample_weight, dtype=np.float64)
    subset = interval_subset(y.shape[0], random_state)
    if subset is None:
        return y, margin, weight
    scale = weight.sum() / weight[subset].sum()
    return y[subset], margin[subset], weight[subset] * scale


def model_average(
    mode: NoiseModel,
    draws: list,
    log_evidence_noise: float,
    log_evidence_none: float,
    n_classes: int,
    refit_model: NoiseModel | None = None,
    grid: np.ndarray | None = None,
    nodes: np.ndarray | None = None,
) -> NoisePosterior:
    """The :class:`NoisePosterior` of a noise model's ``draws`` and the two models' log
    evidence, with prior probability :data:`NO_NOISE_PRIOR` of no noise."""
    log_odds = (log_evidence_none - log_evidence_noise) + np.log(
        NO_NOISE_PRIOR / (1.0 - NO_NOISE_PRIOR)
    )
    no_noise = float(expit(log_odds)) if not np.isnan(log_odds) else NO_NOISE_PRIOR
    return NoisePosterior(
        mode=mode,
        draws=list(draws),
        no_noise_proba=no_noise,
        log_evidence=np.array([log_evidence_none, log_evidence_noise]),
        n_classes=int(n_classes),
        refit_model=mode if refit_model is None else refit_model,
        grid=grid,
        nodes=nodes,
    )


def bootstrap_reweightings(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    n_bags: int,
    seed: int,
    groups: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The rows of :func:`posterior_rows` (with ``random_state=seed``: the same rows) and
    ``n_bags`` Bayesian-bootstrap reweightings of them (Rubin 1981: each row's weight times an
    independent standard exponential, a Dirichlet(1, ..., 1) over the rows scaled to their
    number).

    On a subset of ``m`` rows standing for all ``N`` (each row's weight scaled by ``r = W /
    W_subset``, about ``N / m``), a row's exponential ``alpha`` enters as ``1 + (alpha - 1) /
    sqrt(r)``: the reweighted log-likelihood of the subset then varies as much as that of all
    rows reweighted would (``r^2 * m * Var / r = N * Var``), where reweighting the subset's
    rows by ``alpha`` itself would vary ``r`` times as much. The factor stays at or above
    ``1 - 1/sqrt(r) >= 0``.

    ``groups`` (one label per row of ``y``; the cross-fit passes each row's validation fold):
    rows of one group share the errors of the one booster that scored them, which reweighting
    rows one at a time averages away. Each bag then also multiplies every row of group ``g``
    by ``K D_g``, with ``D`` a Dirichlet(1, ..., 1) over the ``K`` groups (a cluster Bayesian
    bootstrap, on top of the rows' own), so that the bags vary as much as another draw of the
    folds moves the calibration (``docs/label_noise.md``, "Bags by validation fold").

    Examples
    --------
    >>> import numpy as np
    >>> y, h = np.array([1.0, -1.0, 1.0]), np.zeros(3)
    >>> rows_y, rows_h, weights = bootstrap_reweightings(y, h, np.ones(3), 2, 0)
    >>> len(weights), weights[0].shape, bool(np.all(weights[0] > 0))
    (2, (3,), True)
    """
    weight = np.asarray(sample_weight, dtype=np.float64)
    subset = interval_subset(y.shape[0], seed)
    if subset is None:
        rows_y, rows_h, rows_w, scale = y, margin, weight, 1.0
    else:
        scale = float(weight.sum() / weight[subset].sum())
        rows_y, rows_h, rows_w = y[subset], margin[subset], weight[subset] * scale
    # A stream of its own (the subset's draws come from the seed itself).
    rng = np.random.default_rng([seed, _BAG_STREAM])
    spread = 1.0 / np.sqrt(max(scale, 1.0))
    weights = [
        rows_w * (1.0 + (rng.standard_exponential(rows_w.shape[0]) - 1.0) * spread)
        for _ in range(n_bags)
    ]
    if groups is not None:
        # Rows that share a group (a cross-fit's validation fold, scored by one booster)
        # share their margins' errors: each group's weight is also one draw of a Bayesian
        # bootstrap over the groups (a cluster bootstrap), so that the bags vary as much as
        # another draw of the folds would move the calibration.
        rows_g = np.asarray(groups if subset is None else groups[subset])
        labels, index = np.unique(rows_g, return_inverse=True)
        group_rng = np.random.default_rng([seed, _BAG_STREAM, 2])
        for w in weights:
            draw = group_rng.standard_exponential(labels.size)
            w *= (draw / draw.mean())[index]
    return rows_y, rows_h, weights


#: The bootstrap's random stream, apart from the subset's and the draws' (same seed).
_BAG_STREAM = 0xBA6


def bag_posteriors(
    full: NoisePosterior, bags: Sequence[NoisePosterior], seed: int
) -> NoisePosterior:
    """The average of the ``bags``' posteriors (BayesBag; see the module docstring) as one
    :class:`NoisePosterior`: the probability of no noise is the average of theirs, and the
    noise model's draws are the bags' pooled, bag ``b`` giving a share of them proportional to
    its probability of noise ``1 - P_b(no noise)`` (so the mixture is the average of the bags'
    mixtures, to one draw), in a random order (any prefix of them, such as the
    :data:`AVERAGE_DRAWS` behind the per-row averages, is a draw from the mixture). The mode,
    the refit's model, the evidence and the grid stay ``full``'s: the posterior of all rows
    as they are weighted, which the reported parameters and the refit use.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.noise_fit.calibration import NoiseCalibration
    >>> def posterior(theta, none):
    ...     draw = NoiseCalibration(theta, 0.0, 1.0, np.eye(3), 0.0)
    ...     return model_average(draw, [draw] * 4, 0.0, float(np.log(none / (1 - none))), 2)
    >>> bagged = bag_posteriors(posterior(0.9, 0.5), [posterior(0.8, 0.2), posterior(0.7, 0.6)], 0)
    >>> round(bagged.no_noise_proba, 2), sorted(round(d.theta, 1) for d in bagged.draws)
    (0.4, [0.7, 0.8, 0.8, 0.8])
    """
    if not bags:
        return full
    none = np.array([bag.no_noise_proba for bag in bags], dtype=np.float64)
    noise = 1.0 - none
    n_draws = len(full.draws)
    shares = noise / noise.sum() if noise.sum() > 0 else np.full(len(bags), 1.0 / len(bags))
    # Largest remainders: the counts sum to n_draws and each is within one of its share.
    exact = shares * n_draws
    counts = np.floor(exact).astype(np.intp)
    counts[np.argsort(counts - exact, kind="stable")[: n_draws - int(counts.sum())]] += 1
    rng = np.random.default_rng([seed, _BAG_STREAM, 1])
    draws: list = []
    for bag, count in zip(bags, counts, strict=True):
        picked = rng.choice(len(bag.draws), size=min(int(count), len(bag.draws)), replace=False)
        draws.extend(bag.draws[i] for i in np.sort(picked))
    order = rng.permutation(len(draws))
    return replace(full, draws=[draws[i] for i in order], no_noise_proba=float(none.mean()))
