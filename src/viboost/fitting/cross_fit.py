"""Cross-fitting for the robust preset: the folds, the score of a round count, early stopping,
and :class:`CrossFitter`, which the fit driver (:mod:`viboost.fitting.driver`) runs for both
estimators.

With ``noise_fit="cross-fit"`` (:mod:`viboost.presets`) one booster per fold, each on all folds
but one, runs in lockstep (one :class:`~viboost.boosting.booster.Booster` of several
ensembles); every :data:`CHECK_EVERY` rounds their out-of-fold margins are scored by the model's
marginal likelihood (the task's noise model, :mod:`viboost.noise_fit`) and the best round
count is kept (:class:`RoundCountSearch`). The calibration at that count gives every row its
phi_n, and the final booster is fitted on all rows, each counted ``s_n phi_n`` times (S.4.1
under that q(w)), or, when the fitter drops mislabeled rows (``drop_mislabeled``), the final
booster leaves out the rows of ``phi_n <= 1/2`` and counts the others ``s_n`` times, for a
round count that a second search, by the boosters of :data:`SECOND_PASS_FOLDS` of the folds
fitted without those rows, chooses (:meth:`CrossFitter.fit`). With ``average_folds`` the
final model is instead the average of one booster per fold, each on its fold's training rows
so counted, for the chosen count. Two classes or K is the task's
(:mod:`viboost.fitting.task`); the noise model is one of :mod:`viboost.noise_fit`, read through
its :class:`~viboost.noise_fit.model.NoiseModel` interface. :class:`viboost.VIBoostClassifier`
and the distributed :class:`viboost.dask.DaskVIBoostClassifier` differ only in the row source
they hand the driver, so the two fit the same model. Why each choice, with the measurements:
``docs/cross_fit.md``.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass, replace
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold, check_cv
from tqdm.auto import tqdm

from viboost._utils.validation import RandomStateLike, check_random_state, spawn_generator
from viboost.boosting.booster import (
    Booster,
    BoosterRecords,
    average_records,
    run_rounds,
)
from viboost.fitting.task import MakeRows, Task
from viboost.noise_fit.model import NoiseModel
from viboost.noise_fit.posterior import (
    BAGS,
    NoisePosterior,
    RowAverages,
    bag_posteriors,
    bootstrap_reweightings,
)
from viboost.variational import RoundSettings
from viboost.variational.priors import ModelPriors

__all__ = [
    "AUTO_CV_FOLDS",
    "AUTO_CV_TRAIN_ROWS",
    "CALIBRATION_ROWS",
    "CHECK_EVERY",
    "CV_RELATIVE_TOL",
    "CV_STANDARD_ERRORS",
    "CV_TOL",
    "SECOND_PASS_FOLDS",
    "SECOND_PASS_SHARE",
    "CrossFitResult",
    "CrossFitter",
    "RoundCountSearch",
    "auto_fold_count",
    "cross_fit_folds",
    "fold_seed",
    "refit_round_count",
    "score_out_of_fold",
    "unidentified_classes",
    "validation_fold",
]

#: A cross-fitted fit scores its out-of-fold margins every this many rounds.
CHECK_EVERY = 10
#: A score counts as an improvement if it is higher by this many nats per unit of weight...
CV_TOL = 1e-5
#: ... plus this many standard errors of the difference, paired over the scored rows.
CV_STANDARD_ERRORS = 1.0
#: A gain extends the search only if it is also at least this fraction of the score's size
#: (a relative tolerance on the objective, as iterative solvers use; see RoundCountSearch).
CV_RELATIVE_TOL = 1e-3
#: ``drop_mislabeled``: the folds are fitted a second time only when the rows that the first
#: pass flags carry at least this share of the sample weight (:meth:`CrossFitter.fit`) ...
SECOND_PASS_SHARE = 0.01
#: ... and then only the boosters of this many of the folds (the first ones).
SECOND_PASS_FOLDS = 2
#: The round counts are scored on at most this many of the scored rows (a random subset fixed
#: for the fit); the chosen count's calibration is then refitted on all of them.
CALIBRATION_ROWS = 1 << 15

#: ``cv="auto"``: this many folds on small data...
AUTO_CV_FOLDS = 5
#: ... and on large data the fewest (at least 2) whose boosters each train on this many rows.
AUTO_CV_TRAIN_ROWS = 200_000

Folds = list[tuple[np.ndarray, np.ndarray]]


def auto_fold_count(n_rows: int) -> int:
    """The folds of ``cv="auto"`` for ``n_rows`` rows of positive weight.

    :data:`AUTO_CV_FOLDS` folds, unless fewer folds already give each fold's booster at least
    :data:`AUTO_CV_TRAIN_ROWS` training rows: then the fewest that do (at least 2). Each fold
    adds a booster on most of the rows, so from 250,000 rows on the cross-fit costs less (2
    folds from 400,000 rows: half the rows per booster where 5 folds train four boosters more
    on four fifths each). Fold boosters that train on 200,000 rows or more stood in for the
    refit as well as larger ones in our measurements: their out-of-fold margins only rank the
    rows and choose the round count, which the refit scales to all rows
    (:func:`refit_round_count`); measured in ``docs/speed.md`` (2, 3 and 5 folds at 10^5 to
    10^6 rows).

    Examples
    --------
    >>> [auto_fold_count(n) for n in (1_000, 250_000, 270_000, 300_000, 400_000, 10**6)]
    [5, 5, 4, 3, 2, 2]
    """
    for n_folds in range(2, AUTO_CV_FOLDS):
        if n_rows * (n_folds - 1) >= AUTO_CV_TRAIN_ROWS * n_folds:
            return n_folds
    return AUTO_CV_FOLDS


def fold_seed(random_state: RandomStateLike) -> int | None:
    """The folds' seed: ``random_state`` itself if an int (or None), else one draw from it."""
    if random_state is None:
        return None
    if isinstance(random_state, Integral):
        return int(random_state)
    rng = check_random_state(random_state)
    bound = np.iinfo(np.int32).max
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(bound))
    return int(rng.randint(bound))


def cross_fit_folds(
    cv: Any, y: np.ndarray, weighted: np.ndarray, random_state: RandomStateLike
) -> Folds | None:
    """The folds as (train, validation) row indices, training rows of zero weight left out.

    An int ``cv`` gives stratified, shuffled folds over the rows of positive weight (seeded by
    ``random_state``), or None, with a warning, when a class has fewer than 2 such rows;
    ``"auto"`` as many as :func:`auto_fold_count` gives for those rows; a splitter or an
    iterable of splits is used as given (scikit-learn's ``cv``). ``y``: labels in {-1, +1}, or
    class indices.
    """
    labels, counts = np.unique(y[weighted], return_counts=True)
    if isinstance(cv, str) and cv == "auto":
        cv = auto_fold_count(int(np.count_nonzero(weighted)))
    if not isinstance(cv, Integral):
        splits = check_cv(cv, y, classifier=True).split(np.zeros((y.size, 1)), y)
        folds = []
        for train, val in splits:
            train = np.asarray(train)[weighted[train]]
            if np.unique(y[train]).size < labels.size:
                raise ValueError(
                    "Each training fold of cv needs every class with positive sample "
                    "weight; one lacks a class."
                )
            folds.append((train, np.asarray(val)))
        return folds
    if labels.size > 2 and counts.max() >= 2:
        # K classes: a class with fewer rows than folds is fitted all the same (its rows
        # land in some folds only), and its noise statistics are not identified
        # (:func:`unidentified_classes`).
        n_splits = min(int(cv), int(counts.max()))
        rows = np.flatnonzero(weighted)
        splitter = StratifiedKFold(n_splits, shuffle=True, random_state=fold_seed(random_state))
        with warnings.catch_warnings():
            # scikit-learn's warning about the least populated class: said above.
            warnings.filterwarnings("ignore", "The least populated class", UserWarning)
            return [(rows[tr], rows[va]) for tr, va in splitter.split(rows, y[rows])]
    n_splits = min(int(cv), int(counts.min()))
    if n_splits < 2:
        warnings.warn(
            "Too few rows in a class to cross-fit the noise model: it is fitted in-sample "
            "(noise_fit='in-sample'), and its noise statistics rank rows but are not "
            "calibrated.",
            UserWarning,
            stacklevel=4,
        )
        return None
    rows = np.flatnonzero(weighted)
    splitter = StratifiedKFold(n_splits, shuffle=True, random_state=fold_seed(random_state))
    return [(rows[tr], rows[va]) for tr, va in splitter.split(rows, y[rows])]


def validation_fold(folds: Folds, n_rows: int) -> np.ndarray:
    """Each row's validation fold (the index of the first fold that holds it out; -1 for rows
    no fold holds out): the rows whose out-of-fold margins one fold booster gave."""
    fold = np.full(n_rows, -1, dtype=np.intp)
    for k in range(len(folds) - 1, -1, -1):
        fold[folds[k][1]] = k
    return fold


def unidentified_classes(
    y_index: np.ndarray, weighted: np.ndarray, folds: Folds, n_classes: int
) -> np.ndarray:
    """The classes whose noise statistics the cross-fit cannot identify: those missing from
    some fold's training rows (a fold booster that never saw a class scores its held-out
    rows of that class as impossible), as a boolean mask over the classes."""
    missing = np.zeros(n_classes, dtype=bool)
    for train, _ in folds:
        seen = np.bincount(y_index[train][weighted[train]], minlength=n_classes) > 0
        missing |= ~seen
    present = np.bincount(y_index[weighted], minlength=n_classes) > 0
    return missing & present


def score_out_of_fold(
    task: Task,
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    priors: ModelPriors,
    noise_model: bool,
    start: NoiseModel | None = None,
) -> tuple[float, NoiseModel | None, np.ndarray]:
    """The cross-fitted score of a round count: the marginal log-likelihood of the labels under
    the task's noise model calibrated to the out-of-fold margins (its search started at
    ``start``, the previous count's calibration), or the log-likelihood of the core model; the
    calibration (None for the core model); and each row's log-likelihood (the score is their
    ``sample_weight``-weighted sum). ``y``: the task's labels; ``margin``: 2-D, one column per
    ensemble."""
    if not noise_model:
        rows = task.log_likelihood(y, margin)
        return float(np.dot(sample_weight, rows)), None, rows
    calibration = task.calibrate(y, margin, sample_weight, priors, start)
    return (
        calibration.log_likelihood,
        calibration,
        calibration.row_log_likelihood(y, task.decision(margin)),
    )


def refit_round_count(
    n_rounds: int,
    sample_weight: np.ndarray,
    folds: list[tuple[np.ndarray, np.ndarray]],
    n_estimators: int | None,
) -> int:
    """The refit's rounds: the count chosen for the fold boosters scaled by how many more
    rows the refit fits, ``n_rounds * W / mean_k W_k`` (``W``: the total sample weight,
    ``W_k``: that of fold k's training rows; ``cv / (cv - 1)``, 1.25 for 5 equal folds), to
    the nearest integer, at least ``n_rounds`` and at most ``n_estimators`` (None: uncapped,
    the count the rows ask for; :meth:`CrossFitter.fit` warns when the cap binds).

    The chosen count is where boosters fitted to ``(cv - 1) / cv`` of the rows, every label
    at full weight, stop improving out of fold; the refit fits all rows, the likely flipped
    ones down-weighted by phi, and overfits later. The factor is the ratio of the rows, not a
    constant fitted to them; what it and its alternatives measured: ``docs/cross_fit.md``.

    Examples
    --------
    >>> folds = [(np.arange(20, 100), np.arange(20)), (np.arange(80), np.arange(80, 100))]
    >>> s = np.ones(100)
    >>> refit_round_count(40, s, folds, 1000), refit_round_count(40, s, folds, 45)
    (50, 45)
    >>> refit_round_count(40, s, folds, None)
    50
    """
    fold_weight = float(np.mean([np.sum(sample_weight[train]) for train, _ in folds]))
    total = float(np.sum(sample_weight))
    scale = total / fold_weight if fold_weight > 0 else 1.0
    wanted = max(n_rounds, math.floor(n_rounds * scale + 0.5))
    return int(wanted if n_estimators is None else min(n_estimators, wanted))


class RoundCountSearch:
    """Early stopping over the scored round counts: the best so far, and when to stop.

    The best count is the one of the highest score; a score counts as higher only if it beats
    the best by more than :data:`CV_TOL` nats per unit of weight (so that fits on separable
    data, whose log-likelihood creeps towards 0, stop). The search stops once ``patience``
    rounds (None: never) have passed without a *significant* gain: a score that beats the last
    significant one by more than that margin (or, if larger, :data:`CV_RELATIVE_TOL` times the
    size of that score) plus :data:`CV_STANDARD_ERRORS` standard errors of their difference,
    paired over the scored rows (when their log-likelihoods are given). Why the relative
    tolerance, and what it changed, measured: ``docs/cross_fit.md``.

    Parameters
    ----------
    patience : int or None
    total_weight : float
        The total weight of the rows whose score is compared.
    weights : ndarray, default=None
        The scored rows' weights (for the standard error); ``scale``: the factor from their
        sums to the scores (the scores of a subset of rows are scaled to all of them).
    """

    def __init__(
        self,
        patience: int | None,
        total_weight: float,
        weights: np.ndarray | None = None,
        scale: float = 1.0,
    ) -> None:
        self.patience = patience
        self._margin_of_gain = CV_TOL * float(total_weight)
        self._weights = weights
        self._scale = float(scale)
        self.best: tuple[int, float, Any] | None = None
        # The last significant gain: its round count, score and rows' log-likelihoods.
        self._anchor: tuple[int, float, np.ndarray | None] | None = None
        self.checks: list[tuple[int, float]] = []

    def standard_error(self, rows: np.ndarray, reference: np.ndarray) -> float:
        """The standard error of the difference of the scores of two checks' rows'
        log-likelihoods, paired over the rows."""
        if self._weights is None or rows.size < 2:
            return 0.0
        total = float(self._weights.sum())
        share = self._weights / total  # (no overflow whatever the weights' scale)
        diff = rows - reference
        mean = float(np.dot(share, diff))
        variance = float(np.dot(share * share, (diff - mean) ** 2)) * rows.size / (rows.size - 1)
        return self._scale * total * float(np.sqrt(variance))

    def update(
        self, rounds: int, score: float, payload: Any, rows: np.ndarray | None = None
    ) -> bool:
        """Record the score after ``rounds`` rounds (``payload`` is kept with the best;
        ``rows``: the scored rows' log-likelihoods, for the standard error); return whether to
        stop."""
        self.checks.append((rounds, score))
        if self.best is None or score > self.best[1] + self._margin_of_gain:
            self.best = (rounds, score, payload)
        anchor = self._anchor
        if anchor is None:
            significant = True
        else:
            noise = 0.0
            if rows is not None and anchor[2] is not None:
                noise = CV_STANDARD_ERRORS * self.standard_error(rows, anchor[2])
            margin = max(self._margin_of_gain, CV_RELATIVE_TOL * abs(anchor[1]))
            significant = score > anchor[1] + margin + noise
        if significant:
            self._anchor = (rounds, score, rows)
            return False
        assert anchor is not None, "a check without an anchor is significant"
        return self.patience is not None and rounds - anchor[0] >= self.patience

    @property
    def rounds(self) -> np.ndarray:
        """The round counts scored."""
        return np.array([c[0] for c in self.checks], dtype=int)

    @property
    def scores(self) -> np.ndarray:
        """Their scores."""
        return np.array([c[1] for c in self.checks], dtype=float)


@dataclass
class CrossFitResult:
    """What the cross-fitted noise fit found.

    Attributes
    ----------
    n_rounds : int
        The chosen round count (of the fold boosters).
    refit_rounds : int
        The rounds of each final booster: :func:`refit_round_count`, or ``n_rounds`` with
        ``average_folds``.
    calibration : NoiseModel or None
        The calibration at that count (None for the core model).
    out_of_fold : ndarray of shape (n_samples, n_ensembles)
        Each row's out-of-fold margins at that count (the final model's for unscored rows).
    clean_proba : ndarray of shape (n_samples,)
        phi_n from the calibration at those margins (ones for the core model).
    final : Booster
        The final booster, fitted on every row counted ``s_n phi_n`` times (with
        ``average_folds``, one ensemble (per class) for each fold, on its training rows).
    rounds, scores : ndarray
        The round counts scored and their out-of-fold scores.
    n_splits : int
        The number of folds.
    eta, omega : ndarray or None
        q(theta) = Beta(eta) and the noisy labels' posterior from the calibrated phi (S.4.4
        and S.4.2: :meth:`~viboost.noise_fit.model.NoiseModel.label_posteriors`); None for
        the core model.
    mislabel_proba : ndarray of shape (n_samples,) or None
        The calibrated probability that each label is wrong; None for the core model.
    flip_rates, flip_rate_intervals : ndarray of shape (K + 1,) and (K + 1, 2), or None
        ``[share of wrong labels, flip rate of each true class]`` and their 90% credible
        intervals; None for the core model.
    true_class_proba : ndarray of shape (n_samples, n_classes) or None
        The posterior of each row's true class given its label.
    joint : ndarray of shape (n_classes, n_classes) or None
        The expected joint of given (rows) and true (columns) labels.
    refit_weight : ndarray of shape (n_samples,) or None
        Each row's multiplicity in the final booster: ``s_n phi_n``, or with
        ``drop_mislabeled`` ``s_n`` for the rows kept and 0 for those dropped.
    n_passes : int
        How many times the fold boosters were fitted: 2 when mislabeled rows were dropped
        and fitted again without, else 1.
    records : list of BoosterRecords
        The fitted model's rounds: one ensemble, or one per class; with ``average_folds`` the
        average of the fold ensembles (:func:`~viboost.boosting.booster.average_records`).
    n_averaged : int
        How many ensembles (per class) the model averages: the number of folds with
        ``average_folds``, else 1.
    no_noise_proba : float
        The posterior probability that no label is wrong (NaN for the core model).
    noise_matrix_intervals : ndarray of shape (n_classes, n_classes, 2) or None
        90% credible intervals of each entry of the noise matrix.
    noise_rate_draws : ndarray of shape (n_draws, 2) or None
        The posterior of the share of wrong labels: values and their probabilities
        (:meth:`~viboost.noise_fit.posterior.NoisePosterior.rate_draws`).
    """

    n_rounds: int
    refit_rounds: int
    calibration: NoiseModel | None
    out_of_fold: np.ndarray
    clean_proba: np.ndarray
    final: Booster
    rounds: np.ndarray
    scores: np.ndarray
    records: list[BoosterRecords]
    n_splits: int = 0
    eta: np.ndarray | None = None
    omega: np.ndarray | None = None
    mislabel_proba: np.ndarray | None = None
    flip_rates: np.ndarray | None = None
    flip_rate_intervals: np.ndarray | None = None
    true_class_proba: np.ndarray | None = None
    joint: np.ndarray | None = None
    refit_weight: np.ndarray | None = None
    n_passes: int = 1
    n_averaged: int = 1
    no_noise_proba: float = float("nan")
    noise_matrix_intervals: np.ndarray | None = None
    noise_rate_draws: np.ndarray | None = None


class CrossFitter:
    """The robust preset's fit: fold boosters in lockstep, the calibration every
    :data:`CHECK_EVERY` rounds, early stopping, and the refit on ``s_n phi_n``.

    Parameters
    ----------
    task : BinaryTask or ClassesTask
        Two classes or K (:mod:`viboost.fitting.task`): the labels, each group's ensembles and
        their states, and the noise model.
    n_estimators : int
        The most rounds tried.
    learning_rate : float
    patience : int or None
        ``n_iter_no_change`` (:class:`RoundCountSearch`).
    priors : ModelPriors
    settings : RoundSettings
        The rounds of the final booster; the fold boosters run the core model (phi = 1)
        with no ELBO (``fixed_vi_iter=1``), as nothing reads their ELBO.
    noise_model : bool
        Whether the out-of-fold margins calibrate the noise model (else they are scored by the
        core model's likelihood and every phi_n is 1).
    init_eta : pair of float
    verbose : int
        Progress bars on stderr.
    label : str, default=""
        Appended to the progress bars' names (e.g. " (dask)").
    random_state : int, RandomState instance or None, default=None
        Seeds the draws of the credible intervals (:func:`fold_seed`).
    channel : {"auto", "independent", "class-conditional"}, default="independent"
        K classes: the noise channel of the final calibration
        (:meth:`~viboost.fitting.task.ClassesTask.choose_channel`). The round count is chosen
        under the paper's channel either way.
    drop_mislabeled : bool, default=False
        Whether the final booster leaves out the rows whose label is more likely wrong than
        right (the MAP of w_n: ``phi_n <= 1/2``) instead of counting every row ``s_n phi_n``
        times; the boosters of :data:`SECOND_PASS_FOLDS` folds are then fitted a second time
        without those rows, to choose the refit's round count (:meth:`fit`).
    average_folds : bool, default=False
        Whether the final model is the average of one booster per fold, each fitted to its
        fold's training rows with the same multiplicities as the refit, for the chosen round
        count (the count chosen for boosters of that size), instead of one booster on every
        row for :func:`refit_round_count` rounds (:meth:`fit`).
    """

    def __init__(
        self,
        task: Task,
        n_estimators: int,
        learning_rate: float,
        patience: int | None,
        priors: ModelPriors,
        settings: RoundSettings,
        noise_model: bool,
        init_eta: tuple[float, float],
        verbose: int = 0,
        label: str = "",
        random_state: RandomStateLike = None,
        channel: str = "independent",
        drop_mislabeled: bool = False,
        average_folds: bool = False,
    ) -> None:
        self.task = task
        self.n_estimators = int(n_estimators)
        self.learning_rate = float(learning_rate)
        self.patience = patience
        self.priors = priors
        self.settings = settings
        self.noise_model = bool(noise_model)
        self.init_eta = init_eta
        self.verbose = verbose
        self.label = label
        self.random_state = random_state
        self.channel = channel
        self.drop_mislabeled = bool(drop_mislabeled)
        self.average_folds = bool(average_folds)

    def fit(
        self,
        make_rows: MakeRows,
        y: np.ndarray,
        sample_weight: np.ndarray,
        folds: list[tuple[np.ndarray, np.ndarray]],
    ) -> CrossFitResult:
        """Cross-fit over ``folds`` (:func:`cross_fit_folds`), then refit; ``y``: the task's
        labels (in {-1, +1}, or class indices).

        With ``drop_mislabeled``, the final booster leaves out the rows that the calibration
        flags (``phi_n <= 1/2``). The fold boosters, fitted to every label, stop early on
        noisy labels (they start to fit the wrong ones), and a refit without the flagged rows
        overfits later than they do: so the boosters of the first :data:`SECOND_PASS_FOLDS`
        folds are fitted a second time without the flagged rows (scoring every row of those
        folds' validation sets), and that search chooses the refit's round count (a count
        alone needs fewer boosters than a margin for every row). The calibration, the
        out-of-fold margins and so every noise statistic stay the first pass's, from boosters
        fitted to every label: boosters fitted without the flagged rows would confirm the
        flags (an atypical but right label whose like were left out looks wrong to them) and
        overstate the noise. When the flagged rows carry less than :data:`SECOND_PASS_SHARE`
        of the weight (they hardly moved the count) the second pass is not run; when they
        would leave out every row of a class, no row is left out. The measurements behind
        these choices are in ``docs/cross_fit.md``."""
        task = self.task
        stopping, active = self._search_round_count(
            make_rows, y, sample_weight, folds, sample_weight
        )
        calibration, out_of_fold = self._calibration_at_best(
            stopping, active, y, sample_weight, validation_fold(folds, y.size)
        )
        n_rows = y.size
        if calibration is None:  # core model: no noise statistics to calibrate
            clean = np.ones(n_rows)
        else:
            # phi_n of the refit: the noise model's at the peak of its posterior, not the
            # posterior average (NoisePosterior.refit_clean_proba says why).
            clean = calibration.refit_clean_proba(y, task.decision(out_of_fold))
        search, train_weight, kept, count_folds = stopping, sample_weight, None, folds
        if self.drop_mislabeled and calibration is not None:
            kept = self._kept(y, sample_weight, clean)
            flagged = 0.0 if kept is None else float(np.dot(sample_weight, 1.0 - kept))
            if flagged >= SECOND_PASS_SHARE * float(sample_weight.sum()):
                train_weight = sample_weight * kept
                count_folds = folds[:SECOND_PASS_FOLDS]
                search, _ = self._search_round_count(
                    make_rows, y, sample_weight, count_folds, train_weight, " (2nd pass)"
                )
        n_passes = 1 if search is stopping else 2
        assert search.best is not None, "the search scored at least one round count"
        n_rounds = search.best[0]
        if n_rounds == self.n_estimators:
            warnings.warn(
                f"The out-of-fold score was best at n_estimators={n_rounds}, the most rounds "
                "tried, so more rounds would likely fit better: raise n_estimators (or "
                "learning_rate).",
                ConvergenceWarning,
                stacklevel=5,  # the caller of the estimator's fit
            )
        # The final booster on every row, each counted s_n phi_n times (or s_n, without the
        # flagged rows), or one such booster per fold on the fold's training rows.
        multiplicity = sample_weight * clean if kept is None else sample_weight * kept
        if self.average_folds:
            multiplicities = np.zeros((len(folds), n_rows))
            for k, (train, _) in enumerate(folds):
                multiplicities[k, train] = multiplicity[train]
            final_rounds, desc = n_rounds, "VIBoost fold boosters"
        else:
            multiplicities = multiplicity[None, :]
            wanted = refit_round_count(n_rounds, train_weight, count_folds, None)
            final_rounds, desc = min(wanted, self.n_estimators), "VIBoost refit"
            if final_rounds < wanted and n_rounds < self.n_estimators:
                # (A count chosen at the cap has been warned about above.)
                warnings.warn(
                    f"The refit stopped at n_estimators={self.n_estimators} rounds, short of the "
                    f"{wanted} its rows ask for ({n_rounds} chosen out of fold, times the refit's "
                    "rows over a fold booster's): raise n_estimators to let it run them.",
                    ConvergenceWarning,
                    stacklevel=5,  # the caller of the estimator's fit
                )
        final = Booster(
            make_rows(multiplicities, None),
            task.states(y, multiplicities, 1.0, self.init_eta, self.priors),
            self.priors,
            task.final_settings(self.settings),
            self.learning_rate,
        )
        run_rounds(final, final_rounds, desc + self.label, self.verbose)
        n_final = multiplicities.shape[0]
        records = final.records if n_final == 1 else average_records(final.records, n_final)
        # Rows in no validation fold (those of zero weight, which no booster fitted, or rows a
        # given cv leaves out) get the final model's margin.
        unscored = np.ones(n_rows, dtype=bool)
        unscored[active] = False
        if unscored.any():
            summed = sum(task.margins(final.margins(k)) for k in range(n_final))
            margin = np.asarray(summed / n_final)
            out_of_fold[unscored] = margin[unscored]
        averages = None
        if calibration is not None:
            # phi_n reported: the posterior average over both models (the refit's above is
            # the noise model's alone), with every other per-row average in the same pass.
            averages = calibration.row_averages(y, task.decision(out_of_fold))
            clean = averages.clean_proba
        result = CrossFitResult(
            n_rounds=n_rounds,
            refit_rounds=final_rounds,
            calibration=calibration,
            out_of_fold=out_of_fold,
            clean_proba=clean,
            final=final,
            rounds=search.rounds,
            scores=search.scores,
            records=records,
            n_splits=len(folds),
            refit_weight=multiplicity,
            n_passes=n_passes,
            n_averaged=n_final,
        )
        if calibration is not None:
            assert averages is not None, "computed with the calibration above"
            self._noise_statistics(result, calibration, y, sample_weight, averages)
        return result

    def _kept(
        self, y: np.ndarray, sample_weight: np.ndarray, clean: np.ndarray
    ) -> np.ndarray | None:
        """The rows whose label is more likely right than wrong (``phi_n > 1/2``), as 0/1;
        None when a class of positive weight would keep none of its rows (its labels are then
        all the data say of it, and no row is dropped)."""
        kept = clean > 0.5
        weighted = sample_weight > 0
        n_classes = self.task.n_classes
        labels = self.task.label_index(y)
        present = np.bincount(labels[weighted], minlength=n_classes) > 0
        left = np.bincount(labels[weighted & kept], minlength=n_classes) > 0
        if np.any(present & ~left):
            return None
        return kept.astype(np.float64)

    def _calibration_at_best(
        self,
        stopping: RoundCountSearch,
        active: np.ndarray,
        y: np.ndarray,
        sample_weight: np.ndarray,
        groups: np.ndarray | None = None,
    ) -> tuple[NoisePosterior | None, np.ndarray]:
        """The noise posterior of the calibration at the search's chosen count (on all the
        scored rows ``active``, with the channel of ``channel``; None for the core model) and
        the out-of-fold margins at that count."""
        task = self.task
        assert stopping.best is not None, "the search scored at least one round count"
        _, _, (calibration, out_of_fold) = stopping.best
        if calibration is None:
            return None, out_of_fold
        if active.size > CALIBRATION_ROWS:
            # The count was chosen on a subset of the scored rows: calibrate on all of them.
            calibration = task.calibrate(
                y[active], out_of_fold[active], sample_weight[active], self.priors, calibration
            )
        rows_y, rows_h, rows_w = y[active], out_of_fold[active], sample_weight[active]
        independent = calibration
        calibration = task.choose_channel(
            calibration, rows_y, rows_h, rows_w, self.priors, self.channel
        )
        # Seeded even without a random_state: the statistics are averages over the draws, and
        # two fits of the same folds should report the same.
        seed = 0 if self.random_state is None else int(fold_seed(self.random_state) or 0)
        # The statistics are the posterior's averages, not the mode's
        # (:mod:`viboost.noise_fit.posterior`), and that posterior is bagged: the average of
        # the posteriors of BAGS Bayesian-bootstrap reweightings of the rows and of the
        # validation folds (``groups``: rows one fold booster scored share its errors), each in
        # the channel chosen for all of them.
        posterior = task.posterior(calibration, rows_y, rows_h, rows_w, self.priors, seed)
        bag_y, bag_h, reweightings = bootstrap_reweightings(
            rows_y, rows_h, rows_w, BAGS, seed, None if groups is None else groups[active]
        )
        bags = []
        for k, weights in enumerate(reweightings):
            if posterior.nodes is not None:
                # A posterior integrated over theta: each bag's nodes are Newton steps from
                # the full posterior's (the guide), and its own mode, which only an unguided
                # grid starts from, is not needed.
                bag = calibration
            else:
                bag = task.calibrate(bag_y, bag_h, weights, self.priors, independent)
                bag = task.choose_channel(
                    bag, bag_y, bag_h, weights, self.priors, calibration.channel_name
                )
            bags.append(
                task.posterior(bag, bag_y, bag_h, weights, self.priors, seed + 1 + k, posterior)
            )
        posterior = bag_posteriors(posterior, bags, seed)
        return posterior, out_of_fold

    def _search_round_count(
        self,
        make_rows: MakeRows,
        y: np.ndarray,
        sample_weight: np.ndarray,
        folds: list[tuple[np.ndarray, np.ndarray]],
        train_weight: np.ndarray,
        pass_label: str = "",
    ) -> tuple[RoundCountSearch, np.ndarray]:
        """The fold boosters in lockstep, each fitting its training rows counted
        ``train_weight``, scored every :data:`CHECK_EVERY` rounds until the search stops; the
        search and the scored rows (those in a validation fold)."""
        task = self.task
        n_rows, n_folds = y.size, len(folds)
        in_train = np.zeros((n_folds, n_rows), dtype=bool)
        validation = np.zeros((n_folds, n_rows), dtype=bool)
        for k, (train, val) in enumerate(folds):
            in_train[k, train] = True
            validation[k, val] = True
        fold_weights = np.where(in_train, train_weight, 0.0)
        # A fold's booster carries its validation rows at zero weight: their margins are the
        # out-of-fold H.
        states = task.states(y, fold_weights, 1.0, self.init_eta, self.priors)
        fold_settings = replace(self.settings, noise_model=False, fixed_vi_iter=1)
        booster = Booster(
            make_rows(fold_weights, validation),
            states,
            self.priors,
            fold_settings,
            self.learning_rate,
        )
        # The scored rows in row order (a fixed order for the calibration's sums), or a random
        # subset of CALIBRATION_ROWS of them; its scores are scaled to the weight of all.
        active = np.flatnonzero(validation.any(axis=0))
        scored = active
        if active.size > CALIBRATION_ROWS:
            rng = spawn_generator(fold_seed(self.random_state))
            scored = np.sort(rng.choice(active, CALIBRATION_ROWS, replace=False))
        y_act, s_act = y[scored], sample_weight[scored]
        total = float(sample_weight[active].sum())
        to_all = total / float(s_act.sum())
        stopping = RoundCountSearch(self.patience, total, s_act, to_all)
        calibration = None
        done = 0
        with tqdm(
            total=self.n_estimators,
            desc="VIBoost cross-fit" + self.label + pass_label,
            unit="round",
            disable=not self.verbose,
            delay=2.0,
            file=sys.stderr,
        ) as progress:
            while done < self.n_estimators:
                step = min(CHECK_EVERY, self.n_estimators - done)
                for _ in range(step):
                    booster.add_round()
                done += step
                progress.update(step)
                out_of_fold = task.margins(booster.out_of_fold())
                score, calibration, rows = score_out_of_fold(
                    task,
                    y_act,
                    out_of_fold[scored],
                    s_act,
                    self.priors,
                    self.noise_model,
                    calibration,
                )
                if stopping.update(done, score * to_all, (calibration, out_of_fold), rows):
                    break
            # The bar ends where the search stopped, and says which count it chose.
            progress.total = done
            assert stopping.best is not None, "the search scored at least one round count"
            progress.set_postfix_str(f"chose {stopping.best[0]} rounds", refresh=False)
        return stopping, active

    def _noise_statistics(
        self,
        result: CrossFitResult,
        posterior: NoisePosterior,
        y: np.ndarray,
        sample_weight: np.ndarray,
        averages: RowAverages,
    ) -> None:
        """The calibrated noise statistics of ``result`` (see :class:`CrossFitResult`) from
        the noise posterior and its per-row ``averages``."""
        margin = self.task.decision(result.out_of_fold)
        result.eta, result.omega = posterior.label_posteriors(
            y, sample_weight, result.clean_proba, self.priors
        )
        result.mislabel_proba = averages.mislabel_proba
        result.true_class_proba = averages.true_class_proba
        result.joint = averages.joint(sample_weight)
        result.flip_rates = averages.flip_rates(sample_weight)
        result.no_noise_proba = posterior.no_noise_proba
        values, probabilities = posterior.rate_draws(y, margin, sample_weight, averages)
        result.flip_rate_intervals, result.noise_matrix_intervals = posterior.intervals_of_draws(
            values, probabilities
        )
        result.noise_rate_draws = np.column_stack([values[:, 0], probabilities])
