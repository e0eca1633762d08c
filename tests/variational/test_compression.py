"""viboost.variational.compression: knot aggregation into pseudo-rows against the sums over all rows
and
against the accurate log B_c (VersatileLogistic.log_normalizer) over all rows."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from oracles import random_round_rows
from scipy.special import log_expit

from viboost.variational import log_normalizer_c, weight_posterior
from viboost.variational.compression import (
    KnotGrid,
    combine_knot_moments,
    compress_round,
    knot_moments,
    knot_range,
    pseudo_rows,
)


def _summands(alpha, offset):
    """Smooth functions of a row that the inner loop sums: softplus, phi, phi*softplus, e^u phi."""

    def softplus(y, h, m):
        return np.logaddexp(0.0, -y * m - alpha * y * h)

    def log_phi(y, h, m):
        return log_expit(offset * y - softplus(y, h, m))

    return [
        softplus,
        lambda y, h, m: np.exp(log_phi(y, h, m)),
        lambda y, h, m: np.exp(log_phi(y, h, m)) * softplus(y, h, m),
        lambda y, h, m: np.exp(-y * m + log_phi(y, h, m)),  # the approximate-mode sums
    ]


@pytest.mark.parametrize("spread", [0.0, 0.3, 3.0, 30.0, 3000.0, 1e6])
def test_pseudo_rows_reproduce_row_sums(spread):
    y, h, margin, weight = random_round_rows(200_000, spread)
    yp, hp, mp, wp = compress_round(y, h, margin, weight)
    assert yp.size <= 2 * 4 * 3000
    assert np.isclose(wp.sum(), weight.sum(), rtol=1e-12)
    for alpha in (0.0, -2.0, 0.7):
        for f in _summands(alpha, offset=0.4):
            exact = np.sum(weight * f(y, h, margin))
            approx = np.sum(wp * f(yp, hp, mp))
            assert abs(approx - exact) <= 1e-8 * abs(exact), (spread, alpha)


def test_pseudo_rows_are_exact_for_few_distinct_knots():
    y, h, margin, weight = random_round_rows(50_000, 0.0, seed=1)
    margin = np.random.default_rng(2).integers(-3, 4, margin.size) * 0.37
    weight[::7] = 0.0  # zero-weight rows are left out
    yp, hp, mp, wp = compress_round(y, h, margin, weight)
    assert yp.size <= 4 * 7
    for f in _summands(0.9, offset=-1.3):
        assert np.isclose(np.sum(wp * f(yp, hp, mp)), np.sum(weight * f(y, h, margin)), rtol=1e-13)


def test_pseudo_rows_do_not_depend_on_the_thread_count():
    y, h, margin, weight = random_round_rows(300_000, 4.0, seed=3)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = compress_round(y, h, margin, weight)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = compress_round(y, h, margin, weight)
    finally:
        numba.set_num_threads(before)
    for a, b in zip(one, many, strict=True):
        np.testing.assert_array_equal(a, b)


def test_compress_rejects_a_bad_bin_width_and_handles_no_weight():
    y, h, margin, weight = random_round_rows(10, 1.0)
    with pytest.raises(ValueError, match="bin_width"):
        compress_round(y, h, margin, weight, bin_width=0.3)
    assert compress_round(y, h, margin, np.zeros(10))[0].size == 0


def test_log_normalizer_on_pseudo_rows_is_within_1e9_of_all_rows():
    """log B_c from aggregated knots within 1e-9 relative of the accurate value on all rows."""
    for spread, seed in [(2.0, 5), (20.0, 6)]:
        y, h, margin, weight = random_round_rows(200_000, spread, seed=seed)
        phi = np.exp(log_expit(1.5 - np.logaddexp(0.0, -y * (margin + 0.4 * h))))
        accurate = weight_posterior(y, margin, h, weight * phi, 1.0).log_normalizer()
        yp, hp, mp, wp = compress_round(y, h, margin, weight)
        phi_p = np.exp(log_expit(1.5 - np.logaddexp(0.0, -yp * (mp + 0.4 * hp))))
        fast = log_normalizer_c(yp, mp, hp, wp * phi_p, 1.0)
        assert abs(fast - accurate) <= 1e-9 * abs(accurate)


def test_pseudo_rows_with_the_knot_range_given_are_those_without():
    """RoundRows.pseudo passes RowMargins.knot_range; a correct range changes nothing."""
    y, h, margin, weight = random_round_rows(50_000, 3.0, seed=14)
    knots = (-y * margin)[weight > 0]
    given = compress_round(y, h, margin, weight, knot_range=(knots.min(), knots.max()))
    found = compress_round(y, h, margin, weight)
    for a, b in zip(given, found, strict=True):
        np.testing.assert_array_equal(a, b)


def test_knot_moments_of_parts_combine_to_the_moments_of_the_whole():
    rng = np.random.default_rng(3)
    n = 20_000
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(n) < 0.7, y, -y)
    margin = rng.normal(0.0, 3.0, n) * np.where(rng.random(n) < 0.01, 30.0, 1.0)
    weight = rng.random(n) * (rng.random(n) < 0.9)
    low, high = knot_range(y, margin, weight)
    active = weight > 0
    np.testing.assert_equal((low, high), ((-y * margin)[active].min(), (-y * margin)[active].max()))
    grid = KnotGrid.covering(low, high)
    whole = knot_moments(y, h, margin, weight, grid)
    cuts = [0, 3000, 3000, 11_000, n]  # an empty part included
    parts = [
        knot_moments(y[a:b], h[a:b], margin[a:b], weight[a:b], grid)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    combined = combine_knot_moments(parts)
    np.testing.assert_allclose(combined[..., :4], whole[..., :4], rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(combined[..., 4:], whole[..., 4:])
    # The pseudo-rows of the combination are compress_round's.
    got = pseudo_rows(combined, grid)
    want = compress_round(y, h, margin, weight)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_a_bin_of_extreme_skew_gives_no_pseudo_row_of_zero_weight():
    # Nearly all the weight at the centre of a knot bin and a speck a quarter bin away: the
    # two-point rule's weight for the speck's side rounds to 0 (a skew of -1.4e8).
    from viboost.variational.compression import DEFAULT_BIN_WIDTH

    centre = DEFAULT_BIN_WIDTH / 2  # of the bin [0, width) of the knots -y H
    y, h = np.ones(3), np.ones(3)
    margin = -np.array([centre, centre, centre - DEFAULT_BIN_WIDTH / 4])
    weight = np.array([1e16, 1e16, 1.0])
    yp, hp, mp, sp = compress_round(y, h, margin, weight)
    assert np.all(sp > 0)
    assert sp.sum() == pytest.approx(weight.sum(), rel=1e-15)
