"""What the fit driver reads of the training rows: the :class:`TrainingData` protocol, and
:class:`InMemoryData`, the rows of a fit in this process.

The driver (:mod:`viboost.fitting.driver`) never touches the rows themselves: it asks the data
for the labels and weights (to draw the folds), for row sources
(:class:`~viboost.boosting.booster.RowSource`: the cross-fit's groups of ensembles, or every
row at its own weight for Algorithm 1 in-sample), for the first state of an in-sample fit, and
for the in-sample noise statistics of each row; per-row results come back in the data's own
form (numpy arrays here, dask arrays chunked as the training rows for
:class:`viboost.dask.DaskVIBoostClassifier`, whose :class:`~viboost.dask.data.BlockData`
answers the same calls on the workers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from viboost._utils.validation import RandomStateLike
from viboost.boosting.booster import InMemoryRows, RowSource
from viboost.boosting.learners import LearnerSearch
from viboost.boosting.stumps import BinnedStumpSearch, ExactStumpSearch
from viboost.boosting.tree_search import TreeSearch
from viboost.fitting.task import Task
from viboost.noise_fit.calibration import (
    flip_rates_from_mislabel,
    joint_of,
    mislabel_proba_in_sample,
    true_class_from_mislabel,
)
from viboost.presets import FitPlan
from viboost.variational import ModelPriors, VariationalState, initial_state
from viboost.variational.state import CleanLogOdds

__all__ = ["InMemoryData", "InSampleStatistics", "TrainingData", "learner_search"]


@dataclass
class InSampleStatistics:
    """The noise statistics of Algorithm 1's in-sample q(w) and the training margins (a
    ranking, not calibrated): per row (in the data's form) phi_n, the probability that the
    label is wrong and the posterior of the true class; the flip rates and the joint of given
    and true labels (None without the noise model)."""

    clean_proba: Any
    mislabel_proba: Any
    true_class_proba: Any
    flip_rates: np.ndarray
    joint: np.ndarray | None


class TrainingData(Protocol):
    """The training rows as the fit driver reads them (see the module docstring)."""

    #: Appended to the progress bars' names (" (dask)").
    label: str

    @property
    def n_rows(self) -> int:
        """The number of training rows."""
        ...

    def labels(self) -> tuple[np.ndarray, np.ndarray]:
        """The task's labels and the sample weights of every row, in this process."""
        ...

    def make_rows(self, multiplicities: np.ndarray, validation: np.ndarray | None) -> RowSource:
        """The row source of groups of ensembles (:data:`~viboost.fitting.task.MakeRows`)."""
        ...

    def in_sample_rows(self, margins: list[np.ndarray] | None) -> RowSource:
        """The row source of one ensemble on every row at its own weight, from ``margins``
        (a warm start) or zero."""
        ...

    def initial_state(
        self, init_clean_proba: float, init_eta: tuple[float, float], priors: ModelPriors
    ) -> VariationalState:
        """An in-sample fit's state before its first round."""
        ...

    def in_sample_statistics(
        self, rows: RowSource, clean: CleanLogOdds, noise_model: bool
    ) -> InSampleStatistics:
        """The noise statistics of the in-sample q(w) at the margins of ``rows``."""
        ...

    def per_row(self, values: np.ndarray | None, fill: float = 0.0) -> Any:
        """A per-row result computed in this process (``None``: the constant ``fill``), in
        the data's form."""
        ...


def learner_search(
    X: np.ndarray,
    sample_weight: np.ndarray,
    plan: FitPlan,
    max_bins: int | None,
    random_state: RandomStateLike,
    n_categories: np.ndarray | None = None,
) -> LearnerSearch:
    """The search engine of a fit, built once over its rows of positive weight: trees, binned
    stumps, or the exhaustive stump search with ``max_bins=None``. ``n_categories`` (int64 per
    feature: 0 numeric, ``K > 0`` categorical with float codes ``0 .. K-1``, NaN missing; None:
    all numeric) reaches the binning and the split searches (issue 53)."""
    weighted = sample_weight > 0
    has_categories = n_categories is not None and bool(np.any(np.asarray(n_categories) > 0))
    if max_bins is None and has_categories:
        raise ValueError(
            "max_bins=None (the exhaustive stump search over raw values) cannot split "
            "categorical features: set max_bins (e.g. 255); categorical features are binned "
            "exactly, one bin per category, so the binned search is exhaustive for them."
        )
    settings = plan.tree_settings()
    if settings is not None:
        # FitConfig.plan refuses trees with max_bins=None (the exhaustive search is stumps').
        assert max_bins is not None, "trees are grown on binned features"
        return TreeSearch(
            X,
            active=weighted,
            max_bins=max_bins,
            random_state=random_state,
            sample_weight=sample_weight,
            n_categories=n_categories,
            **asdict(settings),
        )
    if max_bins is None:
        return ExactStumpSearch(X, active=weighted)
    return BinnedStumpSearch(
        X,
        active=weighted,
        max_bins=max_bins,
        random_state=random_state,
        n_categories=n_categories,
    )


class InMemoryData:
    """The training rows of a fit in this process (the :class:`TrainingData` protocol).

    The rows are binned once, at the first row source asked for (after the folds are drawn,
    so that a ``random_state`` instance is drawn from in the same order as always), and
    every booster of the fit searches that one binning (as LightGBM's ``cv``).
    """

    label = ""

    def __init__(
        self,
        task: Task,
        X: np.ndarray,
        y: np.ndarray,
        sample_weight: np.ndarray,
        plan: FitPlan,
        max_bins: int | None,
        random_state: RandomStateLike,
        n_categories: np.ndarray | None = None,
    ) -> None:
        self.task = task
        self.X = X
        self.y = y
        self.sample_weight = sample_weight
        self.plan = plan
        self.max_bins = max_bins
        self.random_state = random_state
        #: Per feature, 0 (numeric) or its number of categories (:func:`learner_search`).
        self.n_categories = n_categories
        self._search: LearnerSearch | None = None

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    @property
    def search(self) -> LearnerSearch:
        """The fit's one learner search (built at the first use)."""
        if self._search is None:
            self._search = learner_search(
                self.X,
                self.sample_weight,
                self.plan,
                self.max_bins,
                self.random_state,
                getattr(self, "n_categories", None),
            )
        return self._search

    def labels(self) -> tuple[np.ndarray, np.ndarray]:
        return self.y, self.sample_weight

    def make_rows(self, multiplicities: np.ndarray, validation: np.ndarray | None) -> RowSource:
        return self.task.in_memory_rows(self.search, self.y)(multiplicities, validation)

    def in_sample_rows(self, margins: list[np.ndarray] | None) -> RowSource:
        return InMemoryRows([self.search], self.y, [self.sample_weight], margins)

    def initial_state(
        self, init_clean_proba: float, init_eta: tuple[float, float], priors: ModelPriors
    ) -> VariationalState:
        return initial_state(self.y, self.sample_weight, init_clean_proba, init_eta, priors)

    def in_sample_statistics(
        self, rows: RowSource, clean: CleanLogOdds, noise_model: bool
    ) -> InSampleStatistics:
        y, weight = self.y, self.sample_weight
        margin = rows.margins()
        # phi_n for every training row, from the final q(w) and the final ensemble.
        clean_proba = clean.proba(y, margin)
        if noise_model:
            mislabel = mislabel_proba_in_sample(clean_proba, y, margin)
            rates = flip_rates_from_mislabel(mislabel, y, weight)
        else:
            mislabel, rates = np.zeros(y.shape[0]), np.full(3, np.nan)
        y_index = self.task.label_index(y)
        true_class = true_class_from_mislabel(mislabel, y_index)
        joint = joint_of(true_class, y_index, weight) if noise_model else None
        return InSampleStatistics(clean_proba, mislabel, true_class, rates, joint)

    def per_row(self, values: np.ndarray | None, fill: float = 0.0) -> Any:
        return np.full(self.n_rows, fill) if values is None else values
