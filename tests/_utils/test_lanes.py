"""viboost._utils.lanes: the vector additions equal scalar additions in the same order, bit for
bit (the oracle: numpy's own float64 additions, one value at a time)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from viboost._utils.lanes import add_four_lanes, add_two_lanes


@numba.njit
def _four(hist, offsets, values):
    for k in range(offsets.shape[0]):
        add_four_lanes(hist, offsets[k], values[k, 0], values[k, 1], values[k, 2])


@numba.njit
def _two(hist, offsets, values):
    for k in range(offsets.shape[0]):
        add_two_lanes(hist, offsets[k], values[k, 0], values[k, 1])


@pytest.mark.parametrize(("lanes", "kernel", "width"), [(4, _four, 3), (2, _two, 2)])
def test_vector_additions_are_scalar_additions_in_order(lanes, kernel, width):
    rng = np.random.default_rng(5)
    n_slots, n_rows = 7, 400
    # Offsets of any alignment (odd ones too), repeated slots, values of every magnitude and
    # sign, and signed zeros.
    offsets = rng.integers(0, n_slots * lanes - lanes + 1, n_rows).astype(np.int64)
    values = rng.standard_normal((n_rows, width)) * 10.0 ** rng.integers(-300, 300, (n_rows, 1))
    values[rng.random((n_rows, width)) < 0.1] = -0.0
    got = np.zeros(n_slots * lanes)
    kernel(got, offsets, values)
    want = np.zeros(n_slots * lanes)
    for k in range(n_rows):
        for lane in range(lanes):
            value = values[k, lane] if lane < width else 0.0
            want[offsets[k] + lane] = want[offsets[k] + lane] + value
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_other_arrays_are_refused():
    with pytest.raises(numba.core.errors.TypingError):
        _two(np.zeros(4, dtype=np.float32), np.zeros(1, dtype=np.int64), np.ones((1, 2)))
    with pytest.raises(numba.core.errors.TypingError):
        _four(np.zeros((2, 4)), np.zeros(1, dtype=np.int64), np.ones((1, 3)))
