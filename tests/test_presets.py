"""viboost.presets: which settings each preset resolves to, and that explicit values win."""

from __future__ import annotations

import pytest

from viboost import VIBoostClassifier
from viboost.presets import PRESETS, FitPlan, resolve_preset


def test_paper_preset_is_algorithm_1_as_printed():
    assert PRESETS["paper"] == FitPlan(100, 1.0, "approx", "in-sample")


def test_robust_preset():
    assert PRESETS["robust"] == FitPlan(1000, 0.1, "exact", "cross-fit")


@pytest.mark.parametrize("preset", ["paper", "robust"])
def test_explicit_values_win(preset):
    plan = resolve_preset(preset, 7, 0.3, "approx", "in-sample")
    assert plan == FitPlan(7, 0.3, "approx", "in-sample")
    assert resolve_preset(preset, None, None, None, None) == PRESETS[preset]


def test_unknown_preset_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="preset"):
        VIBoostClassifier(preset="fast").fit([[0.0], [1.0]], [0, 1])
