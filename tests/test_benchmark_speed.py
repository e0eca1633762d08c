"""benchmarks/speed.py's data recipes: the labels follow the signal as documented, and the
Bayes errors the report prints match the labels drawn (an independent Monte Carlo count)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "speed.py"


@pytest.fixture(scope="module")
def speed():
    spec = importlib.util.spec_from_file_location("speed_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("recipe", ["additive", "interactions"])
def test_bayes_error_is_the_error_of_the_bayes_rule_on_drawn_labels(speed, recipe):
    """The share of clean labels that disagree with sign(s(X)), counted on 400,000 drawn rows,
    is the printed Bayes error (closed form or Monte Carlo) within 4 standard errors."""
    n = 400_000
    X, y = speed.make_data(n, 7, recipe=recipe)
    disagree = float(np.mean(y != (speed.signal(X, recipe) > 0)))
    expected = speed.bayes_error(recipe)
    se = math.sqrt(expected * (1 - expected) / n)
    assert abs(disagree - expected) < 4 * se
    assert 0.05 < expected < 0.2  # noisy enough to matter, learnable enough to rank models


def test_recipes_flip_exactly_the_share_asked_and_differ(speed):
    X, clean = speed.make_data(10_000, 3, recipe="interactions")
    _, noisy = speed.make_data(10_000, 3, flip_rate=0.1, recipe="interactions")
    assert int(np.sum(clean != noisy)) == 1_000
    _, additive = speed.make_data(10_000, 3)
    assert np.mean(additive != clean) > 0.2  # another signal, the same features
    with pytest.raises(ValueError, match="unknown recipe"):
        speed.signal(X, "quadratic")
