"""viboost._utils.prefetch: a hint that compiles for every array the kernels prefetch from and
changes no value."""

import numba
import numpy as np
import pytest

from viboost._utils.prefetch import prefetch


@numba.njit
def _sum_prefetched_1d(values, order, ahead):
    total = 0.0
    for k in range(order.shape[0]):
        if k + ahead < order.shape[0]:
            prefetch(values, order[k + ahead])
        total += values[order[k]]
    return total


@numba.njit
def _sum_prefetched_2d(values, order, column, ahead):
    total = 0
    for k in range(order.shape[0]):
        if k + ahead < order.shape[0]:
            prefetch(values, (order[k + ahead], column))
        total += values[order[k], column]
    return total


def test_prefetch_changes_no_value():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(10_000)
    order = rng.permutation(10_000)
    want = 0.0
    for i in order:  # the same additions in the same order
        want += values[i]
    for ahead in (0, 1, 16):
        assert _sum_prefetched_1d(values, order, ahead) == want
    # The hint is in the compiled code (LLVM's prefetch intrinsic).
    (ir,) = _sum_prefetched_1d.inspect_llvm().values()
    assert "@llvm.prefetch" in ir


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_prefetch_of_two_dimensional_arrays_of_any_layout(layout):
    rng = np.random.default_rng(1)
    bins = rng.integers(0, 255, size=(3_000, 7), dtype=np.uint8)
    if layout == "F":
        bins = np.asfortranarray(bins)
    elif layout == "strided":
        bins = np.ascontiguousarray(np.repeat(bins, 2, axis=1))[:, ::2]
    order = np.sort(rng.choice(3_000, 500, replace=False)).astype(np.int64)
    for column in (0, 6, np.uint8(3)):  # indices of mixed integer types too
        want = int(bins[order, column].astype(np.int64).sum())
        assert _sum_prefetched_2d(bins, order, column, 16) == want


def test_prefetch_refuses_a_wrong_index():
    @numba.njit
    def wrong(values):
        prefetch(values, (1, 2))  # two indices for a 1-d array

    with pytest.raises(numba.core.errors.TypingError):
        wrong(np.zeros(4))
