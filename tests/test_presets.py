"""viboost.presets: which settings each preset resolves to, and that explicit values win."""

from __future__ import annotations

import numpy as np
import pytest

from viboost import VIBoostClassifier
from viboost.presets import PRESETS, FitPlan, resolve_preset


def test_paper_preset_is_algorithm_1_as_printed():
    assert PRESETS["paper"] == FitPlan(100, 1.0, "approx", "in-sample")
    assert PRESETS["paper"].stumps  # the paper's decision stumps, one tied weight each


def test_robust_preset():
    assert PRESETS["robust"] == FitPlan(
        1000, 0.2, "exact", "cross-fit", max_leaf_nodes=8, min_samples_leaf=None,
        leaf_weights="per-leaf",
    )  # fmt: skip
    assert not PRESETS["robust"].stumps


@pytest.mark.parametrize("preset", ["paper", "robust"])
def test_explicit_values_win(preset):
    plan = resolve_preset(preset, 7, 0.3, "approx", "in-sample", 5, 3, 2, "tied")
    assert plan == FitPlan(7, 0.3, "approx", "in-sample", 5, 3, 2, "tied")
    assert resolve_preset(preset, None, None, None, None) == PRESETS[preset]


def test_a_depth_on_the_paper_preset_asks_for_tied_trees():
    plan = resolve_preset("paper", None, None, None, None, max_depth=3)
    assert (plan.max_leaf_nodes, plan.max_depth, plan.leaf_weights) == (8, 3, "tied")
    assert not plan.stumps


def test_plans_saved_before_trees_read_as_stumps():
    old = FitPlan.__new__(FitPlan)
    object.__setattr__(
        old,
        "__dict__",
        {"n_estimators": 10, "learning_rate": 0.1, "alpha": "exact", "noise_fit": "cross-fit"},
    )
    assert old.stumps and old.min_samples_leaf == 1


def test_unknown_preset_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="preset"):
        VIBoostClassifier(preset="fast").fit([[0.0], [1.0]], [0, 1])


def test_robust_min_samples_leaf_is_20_or_half_a_leafs_share():
    assert resolve_preset("robust", None, None, None, None, total_weight=35.0).min_samples_leaf == 2
    assert resolve_preset("robust", None, None, None, None, total_weight=1e5).min_samples_leaf == 20
    explicit = resolve_preset("robust", None, None, None, None, None, None, 7, None, 35.0)
    assert explicit.min_samples_leaf == 7
    assert resolve_preset("paper", None, None, None, None, total_weight=35.0).min_samples_leaf == 1
    X = np.random.default_rng(0).normal(size=(60, 2))
    clf = VIBoostClassifier(20, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    assert clf.plan_.min_samples_leaf == 3  # 60 rows / (2 x 8 leaves)
