"""The fit driver that both estimators run: :class:`FitDriver`, and the one result it returns,
:class:`FittedModel`.

A fit is one of two runs of the same :class:`~viboost.boosting.booster.Booster`, over any
:class:`~viboost.fitting.data.TrainingData` (rows in this process, or blocks on a Dask
cluster), for a task decided once (:mod:`viboost.fitting.task`):

- ``noise_fit="in-sample"`` (the paper preset): Algorithm 1's rounds on all rows (search,
  :func:`~viboost.variational.run_round`, reweight, record), the noise model fitted by each
  round's inner loop (section 5), or a warm start continuing them;
- ``noise_fit="cross-fit"`` (the robust preset): :class:`~viboost.fitting.cross_fit.CrossFitter`
  runs fold boosters in lockstep, chooses the number of rounds and calibrates the noise model on
  their out-of-fold margins, and refits on every row counted ``s_n phi_n`` times.

Either run ends in a :class:`FittedModel`, every fitted attribute of the estimator, which the
estimator stores once (:meth:`FittedModel.store`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict

import numpy as np

from viboost.boosting.booster import Booster, BoosterRecords, run_rounds
from viboost.fitting.config import FitConfig
from viboost.fitting.cross_fit import (
    CrossFitResult,
    CrossFitter,
    Folds,
    cross_fit_folds,
    unidentified_classes,
)
from viboost.fitting.data import TrainingData
from viboost.fitting.task import Task
from viboost.presets import FitPlan
from viboost.variational import ModelPriors, VariationalState

__all__ = ["FitDriver", "FittedModel", "WarmStart"]

#: The fitted attributes that hold one value (or row of values) per training row.
PER_ROW = (
    "cv_decision_function_", "clean_proba_", "mislabel_proba_", "true_class_proba_",
    "refit_weight_",
)  # fmt: skip


@dataclass
class WarmStart:
    """A fitted in-sample run to continue (``warm_start=True``): its training margins, its
    state and its records."""

    margins: list[np.ndarray]
    state: VariationalState
    records: list[BoosterRecords]


@dataclass
class FittedModel:
    """Every fitted attribute of a fit (see :class:`viboost.VIBoostClassifier` for each),
    stored at once by :meth:`store`; ``state``, ``priors`` and ``n_train`` are kept privately
    (``state``: the in-sample q(theta), q(xi), q(w), which a warm start continues)."""

    plan_: FitPlan
    estimators_: list
    alphas_: np.ndarray
    elbo_: list
    n_vi_iter_: np.ndarray
    snr_path_: np.ndarray
    noise_grade_path_: np.ndarray
    eta_: np.ndarray
    omega_: np.ndarray
    snr_: float
    noise_grade_: float
    clean_proba_: Any
    mislabel_proba_: Any
    true_class_proba_: Any
    noise_rate_: float
    noise_rate_interval_: np.ndarray
    flip_rates_: np.ndarray
    flip_rates_interval_: np.ndarray
    label_joint_: np.ndarray
    noise_matrix_: np.ndarray
    noise_channel_: str
    cv_rounds_: np.ndarray
    cv_best_rounds_: int
    cv_n_splits_: int
    cv_n_passes_: int
    cv_log_likelihood_: np.ndarray
    refit_weight_: Any
    cv_decision_function_: Any
    noise_calibration_: Any
    no_noise_proba_: float
    noise_matrix_interval_: np.ndarray
    noise_rate_draws_: np.ndarray
    priors: ModelPriors
    n_train: int
    state: VariationalState | None = None

    def store(self, estimator: Any) -> None:
        """Set every fitted attribute on ``estimator`` (the private ones as ``_priors``,
        ``_n_train`` and, for an in-sample fit, ``_state``)."""
        private = {"priors", "n_train", "state"}
        for field in fields(self):
            if field.name not in private:
                setattr(estimator, field.name, getattr(self, field.name))
        estimator._priors = self.priors
        estimator._n_train = self.n_train
        if self.state is not None:
            estimator._state = self.state
        else:
            estimator.__dict__.pop("_state", None)


class _Posteriors(TypedDict):
    """The posterior attributes of :class:`FittedModel` (``FitDriver._posteriors``)."""

    eta_: np.ndarray
    omega_: np.ndarray
    snr_: float
    noise_grade_: float


class _RateAttributes(TypedDict):
    """The flip-rate attributes of :class:`FittedModel` (:func:`_rate_attributes`)."""

    noise_rate_: float
    noise_rate_interval_: np.ndarray
    flip_rates_: np.ndarray
    flip_rates_interval_: np.ndarray


class _JointAttributes(TypedDict):
    """The joint-label attributes of :class:`FittedModel` (:func:`_joint_attributes`)."""

    label_joint_: np.ndarray
    noise_matrix_: np.ndarray


def _joint_attributes(joint: np.ndarray | None, n_classes: int) -> _JointAttributes:
    """``label_joint_`` (NaN where None: without the noise model) and ``noise_matrix_`` (its
    columns normalised)."""
    if joint is None:
        joint = np.full((n_classes, n_classes), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):  # a class expected empty: NaN
        return {"label_joint_": joint, "noise_matrix_": joint / joint.sum(axis=0)}


def _rate_attributes(rates: np.ndarray, intervals: np.ndarray | None) -> _RateAttributes:
    """``noise_rate_``, ``flip_rates_`` and their intervals (NaN where there are none) from
    ``[share of wrong labels, flip rate of each true class]``."""
    if intervals is None:
        intervals = np.full((rates.size, 2), np.nan)
    return {
        "noise_rate_": float(rates[0]),
        "noise_rate_interval_": intervals[0],
        "flip_rates_": rates[1:],
        "flip_rates_interval_": intervals[1:],
    }


class FitDriver:
    """Runs a fit of ``task`` with the settings of ``config`` over any training data (see the
    module docstring): :meth:`folds` (the plan's folds, drawn from the labels), then
    :meth:`fit`; :meth:`run` does both."""

    def __init__(self, task: Task, config: FitConfig, plan: FitPlan) -> None:
        self.task = task
        self.config = config
        self.plan = plan

    def folds(self, data: TrainingData) -> tuple[FitPlan, Folds | None]:
        """The plan and the cross-fit's folds (None for an in-sample fit). With too few rows
        in a class to cross-fit, the plan falls back to in-sample (warned)."""
        plan = self.plan
        if plan.noise_fit != "cross-fit":
            return plan, None
        y, weight = data.labels()
        folds = cross_fit_folds(self.config.cv, y, weight > 0, self.config.random_state)
        if folds is None:  # too few rows in a class (warned)
            plan = replace(plan, noise_fit="in-sample")
        return plan, folds

    def run(self, data: TrainingData, warm: WarmStart | None = None) -> FittedModel:
        """:meth:`folds`, then :meth:`fit`."""
        plan, folds = self.folds(data)
        return self.fit(data, plan, folds, warm)

    def fit(
        self,
        data: TrainingData,
        plan: FitPlan,
        folds: Folds | None,
        warm: WarmStart | None = None,
    ) -> FittedModel:
        """The fit of ``plan`` on ``data``: cross-fitted over ``folds``, or in-sample (from
        ``warm`` when given)."""
        if folds is None:
            return self._in_sample(data, plan, warm)
        return self._cross_fitted(data, plan, folds)

    # ------------------------------------------------------------------ in-sample
    def _in_sample(self, data: TrainingData, plan: FitPlan, warm: WarmStart | None) -> FittedModel:
        """Rounds of Algorithm 1 on all rows (from scratch or warm-started), with the noise
        model fitted in-sample by the inner loop (or the core model)."""
        task, config = self.task, self.config
        priors, noise_model = config.priors(plan), bool(config.noise_model)
        if warm is None:
            margins, records = None, None
            state = data.initial_state(config.initial_clean_proba(plan), config.init_eta, priors)
        else:
            margins, state, records = warm.margins, warm.state, warm.records
        rows = data.in_sample_rows(margins)
        booster = Booster(
            rows, [state], priors, config.round_settings(plan), plan.learning_rate, records
        )
        run_rounds(
            booster, plan.n_estimators, "VIBoost" + data.label, config.verbose, booster.n_rounds
        )
        state = booster.states[0]
        (record,) = booster.records
        stats = data.in_sample_statistics(rows, state.clean, noise_model)
        nan_path = np.full(len(record), np.nan)
        return FittedModel(
            plan_=plan,
            **task.ensemble_attributes(booster.records),
            snr_path_=np.array(record.snr_path, dtype=np.float64) if noise_model else nan_path,
            noise_grade_path_=(
                np.array(record.noise_grade_path, dtype=np.float64) if noise_model else nan_path
            ),
            **self._posteriors(state.eta, state.omega, noise_model),
            clean_proba_=stats.clean_proba,
            mislabel_proba_=stats.mislabel_proba,
            true_class_proba_=stats.true_class_proba,
            **_rate_attributes(stats.flip_rates, None),
            **_joint_attributes(stats.joint, task.n_classes),
            noise_channel_="independent",  # two classes: the paper's channel is the general one
            cv_rounds_=np.empty(0, dtype=int),
            cv_best_rounds_=0,
            cv_n_splits_=0,
            cv_n_passes_=0,
            cv_log_likelihood_=np.empty(0),
            refit_weight_=None,
            cv_decision_function_=data.per_row(None, fill=np.nan),
            noise_calibration_=None,
            no_noise_proba_=float("nan"),
            noise_matrix_interval_=np.full((task.n_classes, task.n_classes, 2), np.nan),
            noise_rate_draws_=np.empty((0, 2)),
            priors=priors,
            n_train=data.n_rows,
            state=state,
        )

    def _posteriors(
        self, eta: np.ndarray | None, omega: np.ndarray | None, noise_model: bool
    ) -> _Posteriors:
        """``eta_``, ``omega_``, ``snr_`` (``eta_1 / eta_2``) and ``noise_grade_`` (two classes:
        ``log(omega_2 / omega_1)``, the mode of q(xi)); NaN without the noise model."""
        if not noise_model or eta is None or omega is None:
            return {
                "eta_": np.full(2, np.nan),
                "omega_": np.full(self.task.n_classes, np.nan),
                "snr_": float("nan"),
                "noise_grade_": float("nan"),
            }
        return {
            "eta_": eta.copy(),
            "omega_": omega.copy(),
            "snr_": float(eta[0] / eta[1]),
            "noise_grade_": self.task.noise_grade(omega),
        }

    # ------------------------------------------------------------------ cross-fitted
    def _cross_fitted(self, data: TrainingData, plan: FitPlan, folds: Folds) -> FittedModel:
        """The robust fit: :class:`~viboost.fitting.cross_fit.CrossFitter` over ``folds``."""
        task, config = self.task, self.config
        fitter = CrossFitter(
            task,
            n_estimators=plan.n_estimators,
            learning_rate=plan.learning_rate,
            patience=config.n_iter_no_change,
            priors=config.priors(plan),
            settings=config.round_settings(plan),
            noise_model=bool(config.noise_model),
            init_eta=config.init_eta,
            verbose=config.verbose,
            label=data.label,
            random_state=config.random_state,
            channel=config.noise_channel,
            drop_mislabeled=config.mislabeled == "drop",
            average_folds=config.final_model == "fold-average",
        )
        y, weight = data.labels()
        result = fitter.fit(data.make_rows, y, weight, folds)
        unidentified = unidentified_classes(
            self.task.label_index(y), weight > 0, folds, self.task.n_classes
        )
        if unidentified.any():
            warnings.warn(
                f"The classes at indices {np.flatnonzero(unidentified).tolist()} of classes_ "
                "have too few training rows of positive weight for every fold to hold one: "
                "they are fitted, but their noise statistics (flip rates, their columns of "
                "the noise matrix) are not identified and are NaN.",
                UserWarning,
                stacklevel=4,
            )
        return self._cross_fit_model(result, data, plan, y, unidentified)

    def _cross_fit_model(
        self,
        result: CrossFitResult,
        data: TrainingData,
        plan: FitPlan,
        y: np.ndarray,
        unidentified: np.ndarray,
    ) -> FittedModel:
        """The fitted attributes of a cross-fit; the noise statistics of the classes in
        ``unidentified`` (a mask: classes some fold booster never saw) are NaN."""
        task = self.task
        n_rows, n_classes = y.shape[0], task.n_classes
        calibration = result.calibration
        attributes = task.ensemble_attributes(result.records)
        # The in-sample paths of Algorithm 1's inner loop do not exist in a cross-fitted fit.
        nan_path = np.full(len(attributes["estimators_"]), np.nan)
        if calibration is None:  # core model: no noise statistics
            mislabel = np.zeros(n_rows)
            true_class = np.eye(n_classes)[task.label_index(y)]
            rates = _rate_attributes(np.full(n_classes + 1, np.nan), None)
        else:  # the noise statistics (CrossFitter._noise_statistics)
            assert result.mislabel_proba is not None and result.true_class_proba is not None
            assert result.flip_rates is not None
            mislabel, true_class = result.mislabel_proba, result.true_class_proba
            rates = _rate_attributes(result.flip_rates, result.flip_rate_intervals)
        joint_attributes = _joint_attributes(result.joint, n_classes)
        matrix_interval = (
            np.full((n_classes, n_classes, 2), np.nan)
            if result.noise_matrix_intervals is None
            else result.noise_matrix_intervals.copy()
        )
        if unidentified.any():
            rates["flip_rates_"] = np.where(unidentified, np.nan, rates["flip_rates_"])
            rates["flip_rates_interval_"] = np.where(
                unidentified[:, None], np.nan, rates["flip_rates_interval_"]
            )
            joint_attributes["noise_matrix_"] = np.where(
                unidentified[None, :], np.nan, joint_attributes["noise_matrix_"]
            )
            matrix_interval[:, unidentified] = np.nan
        return FittedModel(
            plan_=plan,
            **attributes,
            snr_path_=nan_path,
            noise_grade_path_=nan_path.copy(),
            **self._posteriors(result.eta, result.omega, calibration is not None),
            clean_proba_=data.per_row(result.clean_proba),
            mislabel_proba_=data.per_row(mislabel),
            true_class_proba_=data.per_row(true_class),
            **rates,
            **joint_attributes,
            noise_channel_="independent" if calibration is None else calibration.channel_name,
            cv_rounds_=result.rounds,
            cv_best_rounds_=int(result.n_rounds),
            cv_n_splits_=int(result.n_splits),
            cv_n_passes_=int(result.n_passes),
            cv_log_likelihood_=result.scores,
            refit_weight_=data.per_row(result.refit_weight),
            cv_decision_function_=data.per_row(task.decision(result.out_of_fold)),
            noise_calibration_=calibration,
            no_noise_proba_=result.no_noise_proba,
            noise_matrix_interval_=matrix_interval,
            noise_rate_draws_=(
                np.empty((0, 2))
                if result.noise_rate_draws is None
                else result.noise_rate_draws.copy()
            ),
            priors=self.config.priors(plan),
            n_train=n_rows,
        )
