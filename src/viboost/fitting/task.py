"""Two classes or K, decided once per fit: :class:`BinaryTask` and :class:`ClassesTask`.

A *task* holds everything that depends on the number of classes, as scikit-learn's HGB decides
``n_trees_per_iteration_`` and its loss object once: how many ensembles a round adds (one for
two classes, one per class for K), how labels are encoded for the engine (``-1 / +1`` or class
indices), each ensemble's one-against-rest labels and initial state, the in-memory row source
(:class:`~viboost.boosting.booster.InMemoryRows` or
:class:`~viboost.boosting.softmax.SoftmaxRows`), which noise model is calibrated on the
out-of-fold margins (:mod:`viboost.noise_fit`), the link from margins to probabilities, and the
layout of the fitted ensembles. Inside, margins are 2-D, one column per ensemble; the public
``decision_function`` of two classes is their one column (:meth:`BinaryTask.decision`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax

from viboost.boosting.booster import BoosterRecords, InMemoryRows, RowSource
from viboost.boosting.learners import BaseLearner, LearnerSearch
from viboost.boosting.softmax import SoftmaxRows, class_labels
from viboost.noise_fit.calibration import (
    NoiseCalibration,
    calibrate_noise,
    integrate_noise_posterior,
    peak_calibration,
)
from viboost.noise_fit.channel_calibration import ClassChannelCalibration, calibrate_class_channel
from viboost.noise_fit.class_calibration import (
    ClassNoiseCalibration,
    calibrate_class_noise,
    class_log_likelihood,
    integrate_class_noise_posterior,
)
from viboost.noise_fit.model import NoiseModel
from viboost.noise_fit.posterior import (
    POSTERIOR_DRAWS,
    NoisePosterior,
    model_average,
    no_noise_log_evidence,
    posterior_rows,
)
from viboost.variational import ModelPriors, RoundSettings, VariationalState, initial_state

__all__ = ["BinaryTask", "ClassesTask", "MakeRows", "Task", "make_task"]

#: Builds the row source of a booster: ``make_rows(multiplicities, validation)`` with one row of
#: multiplicities per group of ensembles (a fold's, or the refit's; shape ``(n_groups,
#: n_samples)``) and, for the fold boosters, each one's held-out rows (a boolean array of the
#: same shape; None for the refit).
MakeRows = Callable[[np.ndarray, "np.ndarray | None"], RowSource]

#: An ensemble as prediction reads it: its learners and their weights.
Ensemble = tuple[list, np.ndarray]


class _Labels:
    """The part of :class:`BinaryTask` and :class:`ClassesTask` that reads only their
    ensembles' labels."""

    n_classes: int

    @property
    def n_ensembles(self) -> int:
        """Ensembles a round adds (scikit-learn HGB's ``n_trees_per_iteration_``)."""
        raise NotImplementedError

    def ensemble_labels(self, y: np.ndarray) -> list[np.ndarray]:
        """Each ensemble's labels in {-1, +1}."""
        raise NotImplementedError

    def states(
        self,
        y: np.ndarray,
        multiplicities: Sequence[np.ndarray] | np.ndarray,
        init_clean_proba: float,
        init_eta: tuple[float, float],
        priors: ModelPriors,
    ) -> list[VariationalState]:
        """Every ensemble's state before its first round: one per group of ``multiplicities``
        (a fold's, or the refit's; a sequence, or the rows of one array) and ensemble of the
        group (class k's labels one-against-rest)."""
        labels = self.ensemble_labels(y)
        return [
            initial_state(y_k, weights, init_clean_proba, init_eta, priors)
            for weights in multiplicities
            for y_k in labels
        ]


@dataclass(frozen=True)
class BinaryTask(_Labels):
    """Two classes: one ensemble ``H``, labels in {-1, +1} (``+1`` for ``classes_[1]``), the
    logistic link ``P(classes_[1]) = sigmoid(H)`` and the binary noise model of section 4
    (:func:`~viboost.noise_fit.calibration.calibrate_noise`)."""

    n_classes: int = 2

    @property
    def n_ensembles(self) -> int:
        return 1

    # ------------------------------------------------------------------ labels
    def encode(self, y_index: np.ndarray) -> np.ndarray:
        """The engine's labels from each row's index in ``classes_``: ``-1.0`` / ``+1.0``."""
        return np.where(y_index == 1, 1.0, -1.0)

    def label_index(self, y: np.ndarray) -> np.ndarray:
        """Each row's index in ``classes_`` from the engine's labels."""
        return (y > 0).astype(np.intp)

    def ensemble_labels(self, y: np.ndarray) -> list[np.ndarray]:
        """Each ensemble's labels in {-1, +1}."""
        return [y]

    def in_memory_rows(self, search: LearnerSearch, y: np.ndarray) -> MakeRows:
        """The row sources of a fit in this process: every group searches the fit's one
        binning, restricted to the rows it fits (positive multiplicity)."""

        def make_rows(multiplicities: np.ndarray, validation: np.ndarray | None) -> RowSource:
            searches = [search.restricted(m > 0) for m in multiplicities]
            return InMemoryRows(searches, y, list(multiplicities), validation=validation)

        return make_rows

    # ------------------------------------------------------------------ the noise model
    def calibrate(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        start: Any = None,
    ) -> NoiseModel:
        """The noise model fitted to out-of-fold margins by its marginal likelihood."""
        return calibrate_noise(y, margin[:, 0], sample_weight, priors, start=start)

    def choose_channel(
        self,
        calibration: NoiseModel,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        channel: str,
    ) -> NoiseModel:
        """Two classes: the paper's channel is the general one (``noise_channel`` is moot)."""
        return calibration

    def posterior(
        self,
        calibration: NoiseModel,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        random_state: Any = None,
        guide: NoisePosterior | None = None,
    ) -> NoisePosterior:
        """The posterior average of no noise and the noise model
        (:mod:`viboost.noise_fit.posterior`): the noise model's posterior by quadrature over
        theta (:func:`~viboost.noise_fit.calibration.integrate_noise_posterior`; ``guide``:
        the posterior of these rows otherwise weighted, whose nodes start the searches)."""
        assert isinstance(calibration, NoiseCalibration), "calibrate() fits the paper's model"
        rows_y, rows_h, rows_w = posterior_rows(y, margin[:, 0], sample_weight, random_state)
        integrated = integrate_noise_posterior(
            calibration, rows_y, rows_h, rows_w, priors, POSTERIOR_DRAWS, random_state,
            None if guide is None else guide.nodes,
        )  # fmt: skip
        none = no_noise_log_evidence(lambda b: log_expit(rows_y * b * rows_h), rows_w)
        peak = peak_calibration(integrated, calibration)
        return model_average(
            calibration, integrated.draws, integrated.log_evidence, none, 2, peak, integrated.grid,
            integrated.nodes,
        )  # fmt: skip

    def log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """Each row's log-likelihood under the core model (every label true)."""
        return log_expit(y * margin[:, 0])

    def final_settings(self, settings: RoundSettings) -> RoundSettings:
        """The final booster's round settings."""
        return settings

    # ------------------------------------------------------------------ the link
    def decision(self, margin: np.ndarray) -> np.ndarray:
        """The public ``decision_function`` from the 2-D margins: ``H``, shape (n,)."""
        return margin[:, 0]

    def margins(self, decision: np.ndarray) -> np.ndarray:
        """The 2-D margins from the public ``decision_function`` (and its staged values)."""
        return decision[:, None]

    def proba(self, margin: np.ndarray) -> np.ndarray:
        """``[sigmoid(-H), sigmoid(H)]``: the model's probabilities of the *true* class."""
        h = margin[:, 0]
        return np.column_stack([expit(-h), expit(h)])

    def log_proba(self, margin: np.ndarray) -> np.ndarray:
        """The logarithm of :meth:`proba`, without underflow."""
        h = margin[:, 0]
        return np.column_stack([log_expit(-h), log_expit(h)])

    def predict_index(self, margin: np.ndarray) -> np.ndarray:
        """The index in ``classes_`` of the predicted class: 1 where ``H > 0``."""
        return (margin[:, 0] > 0).astype(int)

    def noise_grade(self, omega: np.ndarray) -> float:
        """``log(omega_2 / omega_1)``, the mode of q(xi): the log-odds of a +1 among noisy
        labels (``noise_grade_``)."""
        return float(np.log(omega[1] / omega[0]))

    # ------------------------------------------------------------------ the fitted ensembles
    def ensemble_attributes(self, records: Sequence[BoosterRecords]) -> dict[str, Any]:
        """``estimators_``, ``alphas_``, ``elbo_`` and ``n_vi_iter_`` from the one ensemble's
        records: a learner, a weight, an ELBO trace and an iteration count per round."""
        (record,) = records
        return {
            "estimators_": list(record.learners),
            "alphas_": np.array(record.alphas, dtype=np.float64),
            "elbo_": list(record.elbo),
            "n_vi_iter_": np.array(record.n_iter, dtype=int),
        }

    def ensembles(self, estimators: list, alphas: np.ndarray) -> list[Ensemble]:
        """Each ensemble's learners and weights, as prediction reads them."""
        return [(list(estimators), np.asarray(alphas))]

    def learners(self, estimators: list, alphas: np.ndarray) -> list[tuple[BaseLearner, float]]:
        """Every learner with its weight, in the order of the rounds."""
        return list(zip(estimators, alphas, strict=True))


@dataclass(frozen=True)
class ClassesTask(_Labels):
    """K > 2 classes: one ensemble ``F_k`` per class (class k's labels one-against-rest,
    coupled through the softmax: :mod:`viboost.boosting.softmax`), class indices as labels, the
    link ``softmax(F)`` and the K-class noise model
    (:mod:`viboost.noise_fit.class_calibration`, or the class-conditional channel of
    :mod:`viboost.noise_fit.channel_calibration`)."""

    n_classes: int = 3

    @property
    def n_ensembles(self) -> int:
        return self.n_classes

    def encode(self, y_index: np.ndarray) -> np.ndarray:
        return np.asarray(y_index, dtype=np.intp)

    def label_index(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.intp)

    def ensemble_labels(self, y: np.ndarray) -> list[np.ndarray]:
        return class_labels(y, self.n_classes)

    def in_memory_rows(self, search: LearnerSearch, y: np.ndarray) -> MakeRows:
        """The row sources of a fit in this process: per group one ensemble per class over the
        fit's one binning."""

        def make_rows(multiplicities: np.ndarray, validation: np.ndarray | None) -> RowSource:
            searches = [search.restricted(m > 0) for m in multiplicities]
            return SoftmaxRows(searches, y, self.n_classes, multiplicities, validation)

        return make_rows

    def calibrate(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        start: Any = None,
    ) -> NoiseModel:
        return calibrate_class_noise(y, margin, sample_weight, priors, start=start)

    def choose_channel(
        self,
        calibration: NoiseModel,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        channel: str,
    ) -> NoiseModel:
        """The class-conditional channel fitted to the same margins
        (:mod:`viboost.noise_fit.channel_calibration`), kept when ``channel`` asks for it, or
        with ``"auto"`` when its log evidence beats the paper's channel's."""
        if channel == "independent":
            return calibration
        # The paper's channel (from calibrate), from which the full channel's fit starts.
        assert isinstance(calibration, ClassNoiseCalibration), "calibrate() fits the paper's"
        full = calibrate_class_channel(y, margin, sample_weight, priors, calibration.channel)
        if channel == "class-conditional" or full.log_evidence > calibration.log_evidence:
            return full
        return calibration

    def posterior(
        self,
        calibration: NoiseModel,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        random_state: Any = None,
        guide: NoisePosterior | None = None,
    ) -> NoisePosterior:
        """The posterior average of no noise and the noise model
        (:mod:`viboost.noise_fit.posterior`): the paper's channel integrated over theta
        (``guide`` as for two classes), the class-conditional channel's draws from its Laplace
        approximation, its log evidence the calibration's."""
        assert isinstance(calibration, ClassNoiseCalibration | ClassChannelCalibration)
        rows_y, rows_h, rows_w = posterior_rows(y, margin, sample_weight, random_state)
        none = no_noise_log_evidence(lambda b: class_log_likelihood(rows_y, b * rows_h), rows_w)
        if isinstance(calibration, ClassNoiseCalibration):
            integrated = integrate_class_noise_posterior(
                calibration, rows_y, rows_h, rows_w, priors, POSTERIOR_DRAWS, random_state,
                None if guide is None else guide.nodes,
            )  # fmt: skip
            return model_average(calibration, integrated.draws, integrated.log_evidence, none,
                                 self.n_classes, grid=integrated.grid,
                                 nodes=integrated.nodes)  # fmt: skip
        # The full channel has no theta to integrate over: its Laplace approximation.
        draws = calibration.posterior_draws(POSTERIOR_DRAWS, random_state)
        return model_average(calibration, draws, calibration.log_evidence, none, self.n_classes)

    def log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        return class_log_likelihood(y, margin)

    def final_settings(self, settings: RoundSettings) -> RoundSettings:
        """K classes: no per-round log evidence is recorded (one inner iteration)."""
        return replace(settings, fixed_vi_iter=1)

    def decision(self, margin: np.ndarray) -> np.ndarray:
        """The K margins ``F``, one column per class."""
        return margin

    def margins(self, decision: np.ndarray) -> np.ndarray:
        return decision

    def proba(self, margin: np.ndarray) -> np.ndarray:
        """``softmax(F)``: the model's probabilities of the true class."""
        return softmax(margin, axis=1)

    def log_proba(self, margin: np.ndarray) -> np.ndarray:
        return log_softmax(margin, axis=1)

    def predict_index(self, margin: np.ndarray) -> np.ndarray:
        return np.argmax(margin, axis=1)

    def noise_grade(self, omega: np.ndarray) -> float:
        """K classes have no one noise grade: their noisy labels' distribution is pi
        (``omega_``)."""
        return float("nan")

    def ensemble_attributes(self, records: Sequence[BoosterRecords]) -> dict[str, Any]:
        """Per round, one learner per class (``estimators_[t][k]``), the weights and iteration
        counts as (rounds, classes) arrays, and each round's ELBO traces per class."""
        n_rounds = len(records[0])
        return {
            "estimators_": [[r.learners[t] for r in records] for t in range(n_rounds)],
            "alphas_": np.column_stack([np.array(r.alphas, dtype=np.float64) for r in records]),
            "elbo_": [[r.elbo[t] for r in records] for t in range(n_rounds)],
            "n_vi_iter_": np.column_stack([np.array(r.n_iter, dtype=int) for r in records]),
        }

    def ensembles(self, estimators: list, alphas: np.ndarray) -> list[Ensemble]:
        return [
            ([learners[k] for learners in estimators], alphas[:, k]) for k in range(self.n_classes)
        ]

    def learners(self, estimators: list, alphas: np.ndarray) -> list[tuple[BaseLearner, float]]:
        flat = [learner for per_class in estimators for learner in per_class]
        return list(zip(flat, np.ravel(alphas), strict=True))


#: Either task (what the fit driver and the estimators hold).
Task = BinaryTask | ClassesTask


def make_task(n_classes: int) -> Task:
    """The task of a fit to ``n_classes`` classes: :class:`BinaryTask` for 2, else
    :class:`ClassesTask`."""
    return BinaryTask() if n_classes == 2 else ClassesTask(n_classes)
