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
        leaf_weights="per-leaf", weight_prior=None,
    )  # fmt: skip
    assert not PRESETS["robust"].stumps
    assert PRESETS["paper"].weight_prior == 1.0


def test_the_robust_leaf_prior_weighs_as_much_as_the_smallest_leaf():
    """mu_0 = min_samples_leaf / 2 (at least 1), resolved with min_samples_leaf; an explicit
    weight_prior wins, and the paper preset keeps the paper's 1."""
    resolve = lambda preset, **kw: resolve_preset(preset, None, None, None, None, **kw)  # noqa: E731
    assert resolve("robust", total_weight=1e5).weight_prior == 10.0
    assert resolve("robust", total_weight=300.0).weight_prior == 9.0  # 18-row leaves
    assert resolve("robust", total_weight=35.0).weight_prior == 1.0  # 2-row leaves
    assert resolve("robust", min_samples_leaf=50).weight_prior == 25.0
    assert resolve("robust", total_weight=1e5, weight_prior=3).weight_prior == 3.0
    assert resolve("robust").weight_prior is None  # unresolved until the data is known
    assert resolve("paper", total_weight=1e5).weight_prior == 1.0
    assert resolve("paper", total_weight=1e5, max_leaf_nodes=8).weight_prior == 1.0
    with pytest.raises(ValueError, match="unresolved"):
        resolve("robust").tree_settings()


def test_the_fit_uses_the_resolved_leaf_prior():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + rng.normal(size=400) > 0).astype(int)
    model = VIBoostClassifier(random_state=0).fit(X, y)
    assert model.plan_.weight_prior == model.plan_.min_samples_leaf / 2 == 10.0
    assert model._priors.weight == 10.0
    assert VIBoostClassifier(weight_prior=2.0, random_state=0).fit(X, y)._priors.weight == 2.0
    assert VIBoostClassifier(preset="paper", n_estimators=5).fit(X, y)._priors.weight == 1.0


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
