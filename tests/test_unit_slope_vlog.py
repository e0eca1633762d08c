"""viboost.distributions.unit_slope_vlog: the compiled unit-slope log normaliser and mode against
the accurate VersatileLogistic.log_normalizer and VersatileLogistic.mode."""

from __future__ import annotations

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
