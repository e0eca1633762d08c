"""viboost.distributions.unit_slope_vlog: the compiled unit-slope log normaliser and mode against
the accurate VersatileLogistic.log_normalizer and VersatileLogistic.mode."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from oracles import random_round_rows
from scipy.special import betaln

from viboost.distributions import VersatileLogistic
from viboost.distributions.unit_slope_vlog import unit_slope_log_normalizer, unit_slope_mode
from viboost.variational import log_normalizer_c, weight_posterior


def _terms(y, h, margin, mult, weight_prior):
    """g(c) = sum_k w_k softplus(knot_k - slope_k c) of the weight posterior, prior included."""
    slope_sign = np.concatenate([[-1.0, 1.0], y * h])
    knot = np.concatenate([[0.0, 0.0], -y * margin])
    weight = np.concatenate([[weight_prior, weight_prior], mult])
    return slope_sign, knot, weight


def _vlog(slope_sign, knot, weight):
    """The same density as a v-Log: w softplus(knot - s c) = w softplus(beta (c - gamma))."""
    return VersatileLogistic(-slope_sign, slope_sign * knot, weight)


@pytest.mark.parametrize(
    ("n", "scale", "spread"),
    [
        (50, 1.0, 3.0),
        (2_000, 1.0, 3.0),
        (5_000, 100.0, 3.0),
        (20_000, 1.0, 0.5),
        (3_000, 1.0, 30.0),
    ],
)
def test_fast_log_normalizer_matches_the_accurate_one(n, scale, spread):
    y, h, margin, weight = random_round_rows(n, spread, seed=4)
    mult = weight * scale
    accurate = weight_posterior(y, margin, h, mult, 1.0).log_normalizer()
    fast = log_normalizer_c(y, margin, h, mult, 1.0, start=0.3)
    assert fast == pytest.approx(accurate, rel=1e-12, abs=1e-9)
    # The compiled normaliser itself (no fallback) gives that value.
    direct = unit_slope_log_normalizer(*_terms(y, h, margin, mult, 1.0), start=0.3)
    assert np.isfinite(direct)
    assert direct == pytest.approx(accurate, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize(
    ("slope_sign", "knot", "weight"),
    [
        ([-1.0, 1.0, 1.0, -1.0, 1.0], [0.0, 0.0, 1.5, -2.0, 0.3], [1.0, 1.0, 4.0, 2.5, 0.7]),
        ([-1.0, 1.0, -1.0], [-40.0, 35.0, 3.0], [0.2, 0.3, 50.0]),  # knots far apart
        ([1.0, -1.0, 1.0, -1.0], [0.0, 0.0, 5.0, 5.0], [1e-6, 1e-6, 300.0, 100.0]),
    ],
)
@pytest.mark.parametrize("start", [0.0, 7.0, -12.0])
def test_unit_slope_mode_is_the_vlog_mode(slope_sign, knot, weight, start):
    slope_sign, knot, weight = (np.array(a, dtype=float) for a in (slope_sign, knot, weight))
    mode, curvature = unit_slope_mode(slope_sign, knot, weight, start)
    assert mode == pytest.approx(_vlog(slope_sign, knot, weight).mode(), rel=1e-10, abs=1e-10)
    # The curvature g''(mode) = sum_k w_k sigma(z_k)(1 - sigma(z_k)), z_k = knot_k - s_k mode.
    z = knot - slope_sign * mode
    sigma = 1.0 / (1.0 + np.exp(-z))
    assert curvature == pytest.approx(np.sum(weight * sigma * (1.0 - sigma)), rel=1e-10)


def test_unit_slope_mode_of_a_weight_posterior_is_the_vlog_mode():
    y, h, margin, weight = random_round_rows(2_000, 3.0, seed=5)
    terms = _terms(y, h, margin, weight, 1.0)
    mode, _ = unit_slope_mode(*terms, 0.0)
    assert mode == pytest.approx(_vlog(*terms).mode(), rel=1e-10, abs=1e-12)
    assert mode == pytest.approx(weight_posterior(y, margin, h, weight, 1.0).mode(), rel=1e-10)


def test_unit_slope_mode_stops_once_newtons_step_rounds_to_nothing():
    """Newton's iterates here rise to the mode from below (g' never positive: the bracket has no
    upper end), and the last step rounds to nothing: the iterate was once taken for a step out
    of the bracket, jumped away by max(1, |c|) and bisected back, 38 passes over the terms in
    place of 6. Counted in the Python form, with math.exp counted (one call a term a pass)."""
    import math
    import types

    slope_sign = np.array([1, 1, -1, 1, 1, 1, 1, 1, -1, 1, 1, 1], dtype=float)
    knot = np.array([-0.28, -0.67, -1.06, -0.39, 0.48, -0.24, 0.96, -0.2, 0.02, 1.55, 0.55, -0.51])
    weight = np.ones(12)

    class CountingMath:
        calls = 0

        def __getattr__(self, name):
            return getattr(math, name)

        def exp(self, x):
            CountingMath.calls += 1
            return math.exp(x)

    f = unit_slope_mode.py_func
    counted = types.FunctionType(
        f.__code__, {**f.__globals__, "math": CountingMath()}, f.__name__, f.__defaults__
    )
    mode, curvature = counted(slope_sign, knot, weight, 0.0)
    assert CountingMath.calls / knot.size <= 8
    assert mode == pytest.approx(_vlog(slope_sign, knot, weight).mode(), rel=1e-12)
    assert (mode, curvature) == unit_slope_mode(slope_sign, knot, weight, 0.0)


@pytest.mark.parametrize("start", [0.0, -12.0])
def test_unit_slope_mode_of_a_beta_type_density_is_log_of_the_weight_ratio(start):
    """v-Log([+1,-1],[0,0],[2,3]): mode log(3/2); from these starts Newton lands on g' == 0.0."""
    slope_sign, knot, weight = np.array([-1.0, 1.0]), np.zeros(2), np.array([2.0, 3.0])
    mode, _ = unit_slope_mode(slope_sign, knot, weight, start)
    assert _vlog(slope_sign, knot, weight).mode() == pytest.approx(np.log(1.5), rel=1e-12)
    assert mode == pytest.approx(np.log(1.5), rel=1e-10)
    # The normaliser's expansion point (kept for bit-identity of preset="paper") is the
    # safeguard's next point there, not the mode; the normaliser is right all the same.
    centre, _ = unit_slope_mode(slope_sign, knot, weight, start, True)
    assert centre != pytest.approx(np.log(1.5), rel=1e-3)
    assert unit_slope_log_normalizer(slope_sign, knot, weight, start) == pytest.approx(
        betaln(2.0, 3.0), rel=1e-12
    )


def test_unit_slope_mode_of_a_beta_type_density_from_a_start_above_it():
    slope_sign, knot, weight = np.array([-1.0, 1.0]), np.zeros(2), np.array([2.0, 3.0])
    mode, curvature = unit_slope_mode(slope_sign, knot, weight, 7.0)
    assert mode == pytest.approx(np.log(1.5), rel=1e-10)
    assert curvature == pytest.approx(5.0 * 0.6 * 0.4, rel=1e-12)


def test_extreme_multiplicities_fall_back_and_match_laplace():
    """Multiplicities near 1e71 (met with sample weights of 1e300): the order-24 expansion's
    trapezoid walk would need ~1e20 steps of 1e-21 (it took seconds and returned inf); it now
    gives up after a bounded number of steps, and the normaliser that the ELBO uses equals the
    Laplace value computed here with mpmath (exact far below float precision at this width)."""
    slope_sign = np.array([-1.0, 1.0, -1.0, 1.0, 1.0, 1.0])
    knot = np.array([0.0, 0.0, 502.69210205, -502.69210205, -502.69210205, -502.69210205])
    weight = np.array([1.0, 1.0, 3.32260756e38, 3.33268138e39, 1.56903239e71, 3.33268138e39])
    fast = unit_slope_log_normalizer(slope_sign, knot, weight, start=-427.457)
    # The same terms as a weight posterior (prior weight 1, h = 1): S.5.1's normaliser, which
    # falls back to the adaptive quadrature when the compiled one declines.
    y = slope_sign[2:]
    value = log_normalizer_c(y, -knot[2:] / y, np.ones(4), weight[2:], 1.0, start=-427.457)
    mpmath.mp.dps = 60

    def g(c, order=0):
        total = mpmath.mpf(0)
        for s, k, w in zip(slope_sign, knot, weight, strict=True):
            z = mpmath.mpf(k) - s * c
            if order == 0:
                total += w * mpmath.log1p(mpmath.exp(z))
            elif order == 1:
                total += -s * w / (1 + mpmath.exp(-z))
            else:
                total += w / (1 + mpmath.exp(-z)) / (1 + mpmath.exp(z))
        return total

    mode = mpmath.mpf(-427.457)
    for _ in range(60):  # Newton on g' (g is convex), at 60 digits
        mode -= g(mode, 1) / g(mode, 2)
    laplace = -g(mode) + 0.5 * mpmath.log(2 * mpmath.pi / g(mode, 2))
    assert np.isnan(fast) or fast == pytest.approx(float(laplace), rel=1e-12)
    assert value == pytest.approx(float(laplace), rel=1e-12)


@pytest.mark.parametrize("threads", [1, 2])
def test_grouped_log_normalizers_are_each_groups_own(threads):
    # Oracle: each group's terms with its prior terms, normalised alone
    # (unit_slope_log_normalizer), and the accurate v-Log's log normaliser. The groups (a
    # tree's leaves) run in parallel on two threads: the same numbers bit for bit.
    from viboost._utils.parallel import numba_threads
    from viboost.distributions.unit_slope_vlog import grouped_unit_slope_log_normalizers

    rng = np.random.default_rng(11)
    sizes = [1, 40, 700, 3, 2_000, 90, 5]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    slope_sign = rng.choice([-1.0, 1.0], offsets[-1])
    knot = rng.normal(0.0, 2.0, offsets[-1])
    weight = rng.uniform(0.1, 3.0, offsets[-1])
    prior = 1.5
    starts = rng.normal(0.0, 1.0, len(sizes))
    with numba_threads(threads):
        got = grouped_unit_slope_log_normalizers(offsets, slope_sign, knot, weight, prior, starts)
    with numba_threads(1):
        serial = grouped_unit_slope_log_normalizers(
            offsets, slope_sign, knot, weight, prior, starts
        )
    np.testing.assert_array_equal(got, serial)
    for g in range(len(sizes)):
        part = slice(offsets[g], offsets[g + 1])
        terms = (
            np.concatenate([[-1.0, 1.0], slope_sign[part]]),
            np.concatenate([[0.0, 0.0], knot[part]]),
            np.concatenate([[prior, prior], weight[part]]),
        )
        assert got[g] == unit_slope_log_normalizer(*terms, start=starts[g])
        accurate = _vlog(*terms).log_normalizer()
        assert got[g] == pytest.approx(accurate, rel=1e-10, abs=1e-9)
