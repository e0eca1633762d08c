"""Argument checks shared by the data generators and label-noise helpers of viboost.datasets."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

RandomStateLike = int | np.random.RandomState | np.random.Generator | None


def as_rng(random_state: RandomStateLike) -> np.random.RandomState | np.random.Generator:
    """Return a NumPy random generator: a Generator is used as is, anything else goes through
    :func:`sklearn.utils.check_random_state` (None, an int seed or a RandomState)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return check_random_state(random_state)


def check_probability(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a real number in [0, 1], else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_int(value: object, name: str, minimum: int) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_real(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a real number other than NaN (infinities allowed)."""
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(float(value)):
        raise ValueError(f"{name} must be a real number (+-inf allowed, not NaN), got {value!r}")
    return float(value)
