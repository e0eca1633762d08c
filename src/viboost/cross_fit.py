"""Cross-fitting for the robust preset: the folds, the score of a round count, early stopping.

With ``noise_fit="cross-fit"`` (:mod:`viboost.presets`) boosters on all folds but one run in
lockstep; every :data:`CHECK_EVERY` rounds their out-of-fold margins are scored by the model's
marginal likelihood (:func:`viboost.calibration.calibrate_noise`) and the best round count is
kept (:class:`RoundCountSearch`). Both :class:`viboost.VIBoostClassifier` and the distributed
:class:`viboost.dask.DaskVIBoostClassifier` take their folds, scores and stopping rule from here,
so the two fit the same model.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
from scipy.special import log_expit
from sklearn.model_selection import StratifiedKFold, check_cv

from viboost._validation import RandomStateLike, check_random_state
from viboost.calibration import NoiseCalibration, calibrate_noise
from viboost.variational.priors import ModelPriors

__all__ = [
    "CHECK_EVERY",
    "CV_TOL",
    "RoundCountSearch",
    "cross_fit_folds",
    "fold_seed",
    "score_out_of_fold",
]

#: A cross-fitted fit scores its out-of-fold margins every this many rounds.
CHECK_EVERY = 10
#: A score counts as an improvement if it is higher by this many nats per unit of weight.
CV_TOL = 1e-5

Folds = list[tuple[np.ndarray, np.ndarray]]


def fold_seed(random_state: RandomStateLike) -> int | None:
    """The folds' seed: ``random_state`` itself if an int (or None), else one draw from it."""
    if random_state is None or isinstance(random_state, Integral):
        return random_state
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def cross_fit_folds(
    cv: Any, y: np.ndarray, weighted: np.ndarray, random_state: RandomStateLike
) -> Folds | None:
    """The folds as (train, validation) row indices, training rows of zero weight left out.

    An int ``cv`` gives stratified, shuffled folds over the rows of positive weight (seeded by
    ``random_state``), or None, with a warning, when a class has fewer than 2 such rows; a
    splitter or an iterable of splits is used as given (scikit-learn's ``cv``).
    """
    if not isinstance(cv, Integral):
        splits = check_cv(cv, y, classifier=True).split(np.zeros((y.size, 1)), y)
        folds = []
        for train, val in splits:
            train = np.asarray(train)[weighted[train]]
            if np.unique(y[train]).size < 2:
                raise ValueError(
                    "Each training fold of cv needs both classes with positive sample "
                    "weight; one has only one."
                )
            folds.append((train, np.asarray(val)))
        return folds
    n_splits = min(int(cv), int(np.bincount((y[weighted] > 0).astype(int)).min()))
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


def score_out_of_fold(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    priors: ModelPriors,
    noise_model: bool,
) -> tuple[float, NoiseCalibration | None]:
    """The cross-fitted score of a round count: the marginal log-likelihood of the labels under
    the calibrated noise model, or the logistic log-likelihood for the core model."""
    if not noise_model:
        return float(np.dot(sample_weight, log_expit(y * margin))), None
    calibration = calibrate_noise(y, margin, sample_weight, priors)
    return calibration.log_likelihood, calibration


class RoundCountSearch:
    """Early stopping over the scored round counts: the best so far, and when to stop.

    A score counts as an improvement if it beats the best by more than :data:`CV_TOL` nats per
    unit of weight (so that fits on separable data, whose log-likelihood creeps towards 0,
    stop); the search stops once ``patience`` rounds (None: never) have passed since the best.
    """

    def __init__(self, patience: int | None, total_weight: float) -> None:
        self.patience = patience
        self._margin_of_gain = CV_TOL * float(total_weight)
        self.best: tuple[int, float, Any] | None = None
        self.checks: list[tuple[int, float]] = []

    def update(self, rounds: int, score: float, payload: Any) -> bool:
        """Record the score after ``rounds`` rounds (``payload`` is kept with the best);
        return whether to stop."""
        self.checks.append((rounds, score))
        if self.best is None or score > self.best[1] + self._margin_of_gain:
            self.best = (rounds, score, payload)
            return False
        return self.patience is not None and rounds - self.best[0] >= self.patience

    @property
    def rounds(self) -> np.ndarray:
        """The round counts scored."""
        return np.array([c[0] for c in self.checks], dtype=int)

    @property
    def scores(self) -> np.ndarray:
        """Their scores."""
        return np.array([c[1] for c in self.checks], dtype=float)
