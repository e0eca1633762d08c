"""The settings of one fit, from an estimator's parameters: :class:`FitConfig`.

:meth:`FitConfig.plan` resolves the preset (:func:`viboost.presets.resolve_preset`) and makes
the checks that a fit's data and parameters must pass before any work is done, for either
estimator: the classes that carry weight, what the K-class model and the exhaustive stump
search support, and what a warm start can continue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from viboost.fitting.task import Task
from viboost.presets import FitPlan, resolve_preset
from viboost.variational import ModelPriors, RoundSettings

__all__ = ["FitConfig", "shown"]


def shown(label: object) -> object:
    """A class label as a user wrote it (a Python scalar, not a numpy one), for messages."""
    return label.item() if isinstance(label, np.generic) else label


@dataclass(frozen=True)
class FitConfig:
    """An estimator's parameters as the fit driver reads them (see
    :class:`viboost.VIBoostClassifier` for each)."""

    params: Mapping[str, Any]
    clean_prior: tuple[float, float]
    init_eta: tuple[float, float]
    name: str = "VIBoostClassifier"

    def __getattr__(self, key: str) -> Any:
        try:
            return self.params[key]
        except KeyError:
            raise AttributeError(key) from None

    def priors(self, plan: FitPlan) -> ModelPriors:
        """The model's priors: mu_0 on each weight (the plan's: ``weight_prior``, or its
        preset's when that is None), mu_0' on xi (or pi), zeta on theta."""
        if plan.weight_prior is None:
            raise ValueError("weight_prior is unresolved (resolve_preset with total_weight)")
        return ModelPriors(
            weight=float(plan.weight_prior),
            noise_grade=float(self.params["noise_grade_prior"]),
            clean=self.clean_prior,
        )

    def in_sample_noise(self, plan: FitPlan) -> bool:
        """Whether the rounds run Algorithm 1's inner loop (the noise model fitted
        in-sample)."""
        return bool(self.params["noise_model"]) and plan.noise_fit == "in-sample"

    def round_settings(self, plan: FitPlan) -> RoundSettings:
        """The hyperparameters of :func:`~viboost.variational.run_round`."""
        p = self.params
        return RoundSettings(
            tau=float(p["tau"]),
            alpha=plan.alpha,
            noise_model=self.in_sample_noise(plan),
            tol=float(p["tol"]),
            max_vi_iter=int(p["max_vi_iter"]),
            fixed_vi_iter=p["fixed_vi_iter"],
            update_alpha_once=bool(p["update_alpha_once"]),
        )

    def initial_clean_proba(self, plan: FitPlan) -> float:
        """phi_n before the first round: 1 for the core model (and each booster of a
        cross-fitted fit: every label true)."""
        return float(self.params["init_clean_proba"]) if self.in_sample_noise(plan) else 1.0

    def plan(
        self, task: Task, classes: np.ndarray, counts: np.ndarray, total_weight: float
    ) -> FitPlan:
        """The fit's plan, after the checks of a fit of ``task`` on ``counts``, the rows of
        positive weight of each of ``classes``, whose sample weights sum to ``total_weight``."""
        p, name = self.params, self.name
        if task.n_ensembles == 1 and np.count_nonzero(counts) < 2:
            raise ValueError(
                f"{name} needs both classes to carry positive sample weight; only class "
                f"{shown(classes[np.argmax(counts)])!r} does."
            )
        if np.count_nonzero(counts) < 2:
            raise ValueError(
                f"{name} needs at least 2 classes with positive sample weight; only class "
                f"{shown(classes[np.argmax(counts)])!r} has any."
            )
        plan = resolve_preset(
            p["preset"],
            p["n_estimators"],
            p["learning_rate"],
            p["alpha"],
            p["noise_fit"],
            p["max_leaf_nodes"],
            p["max_depth"],
            p["min_samples_leaf"],
            p["leaf_weights"],
            total_weight,
            p["weight_prior"],
        )
        if task.n_ensembles > 1 and plan.noise_fit == "in-sample":
            raise ValueError(
                "Only binary classification is supported with noise_fit='in-sample' "
                f"(preset='paper': Algorithm 1 as printed), and y has {task.n_classes} classes. "
                "K classes are fitted with the noise model cross-fitted (noise_fit='cross-fit', "
                "the robust preset)."
            )
        if not plan.stumps and p["max_bins"] is None:
            raise ValueError(
                "max_bins=None (the exhaustive search) builds decision stumps only; trees "
                "(max_leaf_nodes > 2 or leaf_weights='per-leaf') need binned features: set "
                "max_bins, e.g. 255."
            )
        if p["warm_start"] and plan.noise_fit == "cross-fit":
            raise ValueError(
                "warm_start=True continues one run of rounds, but a cross-fitted fit (every "
                "K-class fit) chooses its number of rounds from scratch; use "
                "noise_fit='in-sample' (or preset='paper') to warm-start."
            )
        return plan
