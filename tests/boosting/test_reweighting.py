"""viboost.boosting.reweighting: the one-pass stump weights against their log-space definition, and
RowMargins.add_and_reweight against search_weights (also beyond the exponent range)."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import random_round_rows
from scipy.special import log_expit, logsumexp

from viboost.boosting.reweighting import RowMargins, search_weights
from viboost.variational import CleanLogOdds


@pytest.mark.parametrize("logistic", [False, True])
@pytest.mark.parametrize("tau", [1.0, 0.5, 2.0])
@pytest.mark.parametrize(
    "odds",
    [
        CleanLogOdds(2.0, 3.5, 1.0),
        CleanLogOdds(-30.0, 40.0, 1.0),
        CleanLogOdds.constant(1.0),
        CleanLogOdds.constant(0.3),
        CleanLogOdds(800.0, -700.0, 1.0),
    ],
)
@pytest.mark.parametrize("spread", [5.0, 2000.0])
def test_stump_weights_match_their_log_space_definition(logistic, tau, odds, spread):
    y, _, margin, weight = random_round_rows(20_000, spread, seed=7)
    weight[:5] = 0.0
    got = search_weights(y, margin, weight, odds, tau, logistic)
    log_clean, _ = odds.log_proba(y, margin)
    lead = log_expit(-y * margin) if logistic else -tau * y * margin
    with np.errstate(divide="ignore"):
        log_w = np.log(weight) + log_clean + lead
    want = np.exp(log_w - logsumexp(log_w))
    assert np.all(np.isfinite(got)) and got.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("logistic", [False, True])
@pytest.mark.parametrize("slope", [1.0, 0.0])
def test_add_and_reweight_matches_stump_weights_round_after_round(logistic, slope):
    """The cached-exponential update gives the weights of their definition, round after round,
    for the noise model's q(w) (slope 1) and a constant phi (slope 0; 1 for the core model)."""
    y, _, margin, weight = random_round_rows(30_000, 2.0, seed=10)
    weight[:3] = 0.0
    rng = np.random.default_rng(11)
    rows = RowMargins(y, weight, margin)
    reference = margin.copy()
    for t in range(40):
        h = np.where(rng.random(y.size) < 0.6, y, -y)
        alpha = float(rng.normal(0.0, 0.5))
        odds = CleanLogOdds(float(rng.normal(2.0, 1.0)), float(rng.normal(1.0, 1.0)), 1.0)
        if slope == 0.0:
            odds = CleanLogOdds.constant(1.0 if t % 2 else float(rng.uniform(0.1, 0.9)))
        assert rows._cache_ok
        got = rows.add_and_reweight(alpha, h, odds, 1.0, logistic)
        reference += alpha * h
        np.testing.assert_array_equal(rows.margin, reference)
        want = search_weights(y, reference, weight, odds, 1.0, logistic)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300, err_msg=f"round {t}")
        knots = (-y * reference)[weight > 0]
        assert rows.knot_range == (knots.min(), knots.max())


def test_add_and_reweight_falls_back_beyond_the_exponent_range():
    y, h, margin, weight = random_round_rows(1_000, 1.0, seed=12)
    rows = RowMargins(y, weight, margin)
    odds = CleanLogOdds(3.0, 2.0, 1.0)
    rows.add_and_reweight(0.5, h, odds, 1.0, False)
    # Margins beyond RowMargins._REACH (700): exp(-y H) overflows, the cache is dropped.
    got = rows.add_and_reweight(900.0, h, odds, 1.0, False)
    assert np.max(np.abs(rows.margin)) > RowMargins._REACH
    want = search_weights(y, rows.margin, weight, odds, 1.0, False)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    got = rows.add_and_reweight(-0.1, h, odds, 1.0, False)
    np.testing.assert_allclose(
        got, search_weights(y, rows.margin, weight, odds, 1.0, False), rtol=1e-12, atol=1e-300
    )


def test_row_margins_weights_are_stump_weights_at_the_current_margins():
    y, _, margin, weight = random_round_rows(5_000, 3.0, seed=13)
    rows = RowMargins(y, weight, margin)
    for odds, tau, logistic in [
        (CleanLogOdds(1.0, 2.0, 1.0), 1.0, False),
        (CleanLogOdds.constant(0.4), 0.5, False),
        (CleanLogOdds(-1.0, 0.5, 1.0), 1.0, True),
    ]:
        np.testing.assert_array_equal(
            rows.weights(odds, tau, logistic),
            search_weights(y, margin, weight, odds, tau, logistic),
        )


@pytest.mark.parametrize("logistic", [False, True])
def test_scaled_weights_of_parts_add_up_to_the_normalised_weights(logistic):
    """Blocks of rows give their weights up to their own scale; brought to a common scale and
    normalised together, they are search_weights of all the rows."""
    y, _, margin, weight = random_round_rows(3000, 40.0, seed=5)  # past exp's range in places
    odds = CleanLogOdds.from_point_estimates(0.8, 0.3)
    want = search_weights(y, margin, weight, odds, 1.0, logistic)
    parts = [
        RowMargins(y[a:b], weight[a:b], margin[a:b]).scaled_weights(odds, 1.0, logistic)
        for a, b in ((0, 1000), (1000, 1000), (1000, 3000))
    ]
    top = max(p.log_scale for p in parts if p.total > 0)
    values = np.concatenate([p.values * np.exp(p.log_scale - top) for p in parts])
    np.testing.assert_allclose(values / values.sum(), want, rtol=1e-12, atol=1e-300)
    assert parts[1].total == 0.0 and parts[1].values.size == 0


def test_row_margins_copy_is_independent():
    y, h, margin, weight = random_round_rows(100, 2.0, seed=6)
    odds = CleanLogOdds.from_point_estimates(0.9, 0.0)
    rows = RowMargins(y, weight, margin)
    rows.add(0.3, h, odds, 1.0, False)
    copy = rows.copy()
    copy.add(0.5, h, odds, 1.0, False)
    np.testing.assert_array_equal(rows.margin, margin + 0.3 * h)
    np.testing.assert_allclose(copy.margin, margin + 0.3 * h + 0.5 * h)


@pytest.mark.parametrize("clean", [CleanLogOdds(2.0, 3.5, 1.0), CleanLogOdds.constant(1.0)])
@pytest.mark.parametrize("labels", ["signed", "other"])
def test_a_trees_rows_moved_by_leaf_are_moved_by_their_outputs(clean, labels) -> None:
    """add(values, leaf=leaf) (two exponentials per leaf) gives bit for bit what add(values[leaf])
    (one per row) gives, round after round; labels outside {-1, +1} take the per-row path."""
    rng = np.random.default_rng(4)
    n = 5_000
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    if labels == "other":
        y[:10] = 0.5
    weight = rng.integers(0, 3, n).astype(float)
    by_leaf = RowMargins(y, weight, rng.standard_normal(n))
    by_row = RowMargins(y, weight, by_leaf.margin.copy())
    moved = RowMargins(y, weight, by_leaf.margin.copy())  # margins only (the K-class coupling)
    for _ in range(5):
        leaf = rng.integers(0, 8, n)
        values = rng.standard_normal(8)
        alpha = float(rng.uniform(0.1, 0.5))
        got = by_leaf.add(alpha, values, clean, 1.0, False, unit=False, leaf=leaf)
        want = by_row.add(alpha, values[leaf], clean, 1.0, False, unit=False)
        moved.move(alpha, values, leaf)
        assert np.array_equal(by_leaf.margin, by_row.margin)
        assert np.array_equal(moved.margin, by_row.margin)
        assert np.array_equal(got.values, want.values) and got.total == want.total


def test_the_weights_pass_finds_the_knots_range() -> None:
    """RowMargins.scaled_weights records the (min, max) of -y H over the weighted rows, the
    range compression.knot_range finds in its own pass."""
    from viboost.variational.compression import knot_range

    rng = np.random.default_rng(8)
    n = 70_000
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    weight = rng.integers(0, 3, n).astype(float)
    margins = RowMargins(y, weight, 3.0 * rng.standard_normal(n))
    margins.scaled_weights(CleanLogOdds(2.0, 3.5, 1.0), 1.0, False)
    assert margins.knot_range == knot_range(y, margins.margin, weight)
