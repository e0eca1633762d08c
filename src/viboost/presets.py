"""The two ways to fit VIBoost: the paper's Algorithm 1 as printed, and the noise-robust default.

:class:`~viboost.VIBoostClassifier` leaves the parameters on which they differ at ``None`` and
:func:`resolve_preset` fills them in from its ``preset``; a value set explicitly always wins.

``"paper"``
    Algorithm 1 with the paper's settings: 100 rounds, the approximate mode of eq. (17) at full
    step, and the noise model fitted in-sample by the inner variational loop. Its fits are those
    of viboost 0.x bit for bit, and ``viboost reproduce`` uses it. On noisy labels its noise
    statistics are not calibrated (q(theta) runs to 1: with ``tau = 1`` the approximate mode
    puts ``H`` at about half the log-odds scale the type update assumes, so flipped labels look
    plausible), and it is no more accurate than AdaBoost.

``"robust"`` (the default)
    The same model, fitted in two stages (:meth:`viboost.estimator.VIBoostClassifier.fit`):

    1. *cross-fitting*: ``cv`` boosters (``cv="auto"``: 5, fewer from 250,000 rows), each on
       all folds but one, add trees (8 leaves, each leaf at the exact mode of its q(c)) shrunk
       by ``learning_rate = 0.2``, grown together
       (one histogram pass per step for all folds); every 10 rounds the out-of-fold margins are
       scored by the model's marginal likelihood of the observed labels, with (theta, xi, the
       scale of ``H``) fitted to them by empirical Bayes (:mod:`viboost.noise_fit.calibration`). The
       best round count wins (at most ``n_estimators = 1000``; stopping after ``n_iter_no_change
       = 30`` rounds without a significant gain), and its calibration gives phi_n for every
       training row from a margin that row did not help fit;
    2. *the final fit*: the same booster on all rows, each row counting ``s_n phi_n`` times
       (the weight update of S.4.1 under the calibrated q(w)), for the chosen count scaled by
       the refit's weight over a fold booster's (1.25 times it with 5 folds, at most
       ``n_estimators``: :func:`~viboost.fitting.cross_fit.refit_round_count`).

    Each leaf's value has the v-Log prior of section 4 with mu_0 = ``min_samples_leaf / 2``
    (:func:`auto_weight_prior`: the prior weighs as much as the smallest leaf's rows; the
    paper's mu_0 = 1 barely shrinks a leaf of a few noisy rows).

    Measured in ``benchmarks/label_noise.md`` (why each choice, and what the alternatives did):
    shrinkage and the exact mode make the booster accurate; cross-fitting makes the noise
    statistics calibrated (in-sample margins have fitted the flipped labels); reweighting the
    final fit by phi makes it robust.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from viboost.boosting.split_statistics import TreeSettings

__all__ = [
    "AUTO_MIN_SAMPLES_LEAF",
    "PRESETS",
    "FitPlan",
    "auto_min_samples_leaf",
    "auto_weight_prior",
    "resolve_preset",
]


@dataclass(frozen=True)
class FitPlan:
    """The resolved settings of one fit.

    The base learner: ``max_leaf_nodes=2`` with ``leaf_weights="tied"`` is the paper's decision
    stump (one split, +-1 leaves, one weight); anything else is a histogram tree
    (:mod:`viboost.boosting.trees`). The tree fields default to the stump, the base learner of
    every fit before trees existed (plans unpickled from viboost 0.2 read so).
    """

    n_estimators: int
    learning_rate: float
    alpha: str
    noise_fit: str  # "in-sample" (Algorithm 1's inner loop) or "cross-fit"
    max_leaf_nodes: int = 2
    max_depth: int | None = None
    min_samples_leaf: int | None = 1  # None: auto_min_samples_leaf of the fit's rows
    leaf_weights: str = "tied"  # "per-leaf" (each leaf its own weight) or "tied" (Algorithm 1)
    # mu_0 of every learner's weight (the paper's prior: 1); None: auto_weight_prior of the
    # resolved min_samples_leaf
    weight_prior: float | None = 1.0

    @property
    def stumps(self) -> bool:
        """Whether the base learners are the paper's decision stumps."""
        return self.max_leaf_nodes == 2 and self.leaf_weights == "tied"

    def tree_settings(self) -> TreeSettings | None:
        """How this plan's trees are grown (None for stumps): the split score is the one of
        the leaf values' mode (:mod:`viboost.boosting.trees`): Newton's for the exact mode,
        the smoothed exponential loss for the approximate one, the error for tied leaves.
        ``min_samples_leaf`` must be resolved (``resolve_preset`` with ``total_weight``)."""
        if self.stumps:
            return None
        from viboost.boosting.split_statistics import TreeSettings

        if self.min_samples_leaf is None or self.weight_prior is None:
            raise ValueError(
                "min_samples_leaf and weight_prior are unresolved (resolve_preset with "
                "total_weight)"
            )
        if self.leaf_weights == "per-leaf":
            criterion = "newton" if self.alpha == "exact" else "smoothed"
        else:
            criterion = "error"
        return TreeSettings(
            max_leaf_nodes=self.max_leaf_nodes,
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            leaf_weights=self.leaf_weights,
            criterion=criterion,
            weight_prior=float(self.weight_prior),
        )


PRESETS: dict[str, FitPlan] = {
    "paper": FitPlan(n_estimators=100, learning_rate=1.0, alpha="approx", noise_fit="in-sample"),
    "robust": FitPlan(
        n_estimators=1000,
        learning_rate=0.2,
        alpha="exact",
        noise_fit="cross-fit",
        max_leaf_nodes=8,
        min_samples_leaf=None,  # resolved from the data: auto_min_samples_leaf
        leaf_weights="per-leaf",
        weight_prior=None,  # resolved from min_samples_leaf: auto_weight_prior
    ),
}

#: The robust preset's least rows per leaf: this many, or fewer when a full tree of the data
#: would not fit (:func:`auto_min_samples_leaf`).
AUTO_MIN_SAMPLES_LEAF = 20


def auto_min_samples_leaf(total_weight: float, max_leaf_nodes: int) -> int:
    """The robust preset's ``min_samples_leaf`` for a fit whose rows' sample weights sum to
    ``total_weight``: 20 (LightGBM's and HGB's default), or, when that is more, half a leaf's
    share of the rows in a tree of ``max_leaf_nodes`` leaves, ``total_weight / (2 L)`` (at
    least 1): a full tree must remain possible.

    Each leaf's weight has the v-Log prior of section 4, which already shrinks the value of a
    leaf of few rows towards 0 (and the Newton split score ``G^2 / (H + mu_0 / 2)`` discounts
    its gain), so the row minimum guards against chasing a few rows, it is not the only
    regulariser. A fixed 20 forbids every split on tiny data: on 35 Reuters stories the trees
    kept only the intercept (28.6% error, as LightGBM's and HGB's defaults).

    Examples
    --------
    >>> [auto_min_samples_leaf(rows, 8) for rows in (35.0, 300.0, 1e6)]
    [2, 18, 20]
    """
    share = math.floor(total_weight / (2.0 * max_leaf_nodes))
    return int(min(AUTO_MIN_SAMPLES_LEAF, max(1, share)))


def auto_weight_prior(min_samples_leaf: int) -> float:
    """The robust preset's ``weight_prior`` (mu_0) for trees whose leaves hold at least
    ``min_samples_leaf`` rows: ``min_samples_leaf / 2``, at least the paper's 1.

    A leaf's v-Log prior v-Log([+1,-1], [0,0], mu_0) (section 4) is the likelihood of mu_0
    rows of each label at margin 0, so with ``mu_0 = min_samples_leaf / 2`` the prior weighs as
    much as the rows of the smallest leaf a tree may grow, and shrinks that leaf's value about
    halfway to 0: a leaf of a few rows, of which some may be noisy, cannot move the margins by
    much on its own, while a leaf of many rows is barely touched (the prior's curvature at 0 is
    ``mu_0 / 2``, against a quarter per row at most). With the 20-row leaves of most fits this
    is mu_0 = 10, a curvature of 5 in Newton's units (CatBoost's ``l2_leaf_reg`` is 3,
    LightGBM's ``lambda_l2`` 0); on tiny data, whose leaves may hold 2 rows, it is the paper's
    mu_0 = 1. The paper's mu_0 = 1 everywhere (a prior sd of about 1.8 in log-odds) let the
    trees chase a few noisy labels on small tables: measured in ``docs/label_noise.md``, "The
    leaf prior".

    Examples
    --------
    >>> [auto_weight_prior(m) for m in (1, 2, 17, 20)]
    [1.0, 1.0, 8.5, 10.0]
    """
    return max(1.0, 0.5 * float(min_samples_leaf))


def resolve_preset(
    preset: str,
    n_estimators: int | None,
    learning_rate: float | None,
    alpha: str | None,
    noise_fit: str | None,
    max_leaf_nodes: int | None = None,
    max_depth: int | None = None,
    min_samples_leaf: int | None = None,
    leaf_weights: str | None = None,
    total_weight: float | None = None,
    weight_prior: float | None = None,
) -> FitPlan:
    """The plan of ``preset`` with every explicitly set (non-None) value taking precedence.

    ``total_weight`` (the sum of the fit's sample weights) resolves the robust preset's
    ``min_samples_leaf`` (:func:`auto_min_samples_leaf`) and, from it, its ``weight_prior``
    (:func:`auto_weight_prior`); without it they stay None (unless given).

    ``max_depth=None`` keeps the preset's (no limit in both). Setting ``max_leaf_nodes`` or
    ``max_depth`` on the paper preset asks for trees: their leaves are then tied +-1 (Algorithm 1
    with trees as printed) unless ``leaf_weights`` says otherwise.

    Examples
    --------
    >>> plan = resolve_preset("paper", None, 0.5, None, None)
    >>> plan.learning_rate, plan.alpha, plan.stumps
    (0.5, 'approx', True)
    >>> resolve_preset("robust", None, None, None, None, max_leaf_nodes=15).max_leaf_nodes
    15
    """
    base = PRESETS[preset]
    if max_depth is not None and max_leaf_nodes is None and base.max_leaf_nodes == 2:
        max_leaf_nodes = 2 ** int(max_depth)  # a depth limit on the paper's stumps: full trees
    plan = FitPlan(
        n_estimators=base.n_estimators if n_estimators is None else int(n_estimators),
        learning_rate=base.learning_rate if learning_rate is None else float(learning_rate),
        alpha=base.alpha if alpha is None else alpha,
        noise_fit=base.noise_fit if noise_fit is None else noise_fit,
        max_leaf_nodes=base.max_leaf_nodes if max_leaf_nodes is None else int(max_leaf_nodes),
        max_depth=base.max_depth if max_depth is None else int(max_depth),
        min_samples_leaf=(
            int(min_samples_leaf)
            if min_samples_leaf is not None
            else base.min_samples_leaf
            if base.min_samples_leaf is not None or total_weight is None
            else auto_min_samples_leaf(
                float(total_weight),
                base.max_leaf_nodes if max_leaf_nodes is None else int(max_leaf_nodes),
            )
        ),
        leaf_weights=base.leaf_weights if leaf_weights is None else leaf_weights,
        weight_prior=base.weight_prior if weight_prior is None else float(weight_prior),
    )
    if plan.weight_prior is None and plan.min_samples_leaf is not None:
        plan = replace(plan, weight_prior=auto_weight_prior(plan.min_samples_leaf))
    return plan
