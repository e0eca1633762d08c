"""viboost.variational.round: run_round against the updates of S.4 applied by hand, its own ELBO
trace (stopping rule), core_elbo for the core model, and the same round on pseudo-rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from viboost.variational import (
    CleanLogOdds,
    ModelPriors,
    RoundRows,
    RoundSettings,
    VariationalState,
    approx_alpha,
    core_elbo,
    exact_alpha,
    initial_state,
    log_normalizer_c,
    run_round,
    update_clean_proba,
    update_eta,
    update_omega,
)

PRIORS = ModelPriors(weight=1.2, noise_grade=0.8, clean=(1.5, 1.0))


def _round(n, seed=0, spread=1.5):
    """Rows of a round past the first: an ensemble margin, a stump right on ~65% of the rows."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(n) < 0.65, y, -y)
    margin = y * rng.normal(0.5, spread, n)
    weight = rng.random(n) * 2.0
    weight[:3] = 0.0
    return y, h, margin, weight


def _state(y, weight):
    """A state after some rounds: slope-1 q(w) from a non-trivial (eta, omega)."""
    eta, omega = np.array([0.8, 0.2]) * weight.sum() + 1.0, np.array([3.0, 5.0])
    return VariationalState(eta=eta, omega=omega, clean=CleanLogOdds.from_posteriors(eta, omega))


def _copy(state):
    return VariationalState(state.eta.copy(), state.omega.copy(), state.clean)


@pytest.mark.parametrize(
    "settings",
    [RoundSettings(), RoundSettings(fixed_vi_iter=2), RoundSettings(noise_model=False)],
)
def test_run_round_does_not_mutate_its_input(settings):
    y, h, margin, weight = _round(300)
    rows = RoundRows.weighted(y, h, margin, weight)
    before = [a.copy() for a in (rows.y, rows.h, rows.margin, rows.sample_weight)]
    state = _state(y, weight)
    kept = _copy(state)
    result = run_round(rows, state, PRIORS, settings)
    np.testing.assert_array_equal(state.eta, kept.eta)
    np.testing.assert_array_equal(state.omega, kept.omega)
    assert state.clean == kept.clean
    for a, b in zip((rows.y, rows.h, rows.margin, rows.sample_weight), before, strict=True):
        np.testing.assert_array_equal(a, b)
    if settings.noise_model:
        assert result.state is not state and not np.array_equal(result.state.eta, state.eta)


def test_weighted_rows_drop_the_rows_of_zero_weight():
    y, h, margin, weight = _round(50)
    rows = RoundRows.weighted(y, h, margin, weight)
    keep = weight > 0
    assert rows.y.size == keep.sum() == 47
    for got, want in zip(
        (rows.y, rows.h, rows.margin, rows.sample_weight), (y, h, margin, weight), strict=True
    ):
        np.testing.assert_array_equal(got, want[keep])


@pytest.mark.parametrize("n_leaves", [1, 3, 40])
def test_weighted_rows_by_leaf_are_the_active_rows_stably_sorted_by_leaf(n_leaves):
    # Oracle: numpy's stable argsort of the active rows' leaves, and bincount for the offsets.
    rng = np.random.default_rng(n_leaves)
    y, _, margin, weight = _round(500)
    weight = np.where(rng.random(500) < 0.2, 0.0, weight)
    leaf = rng.integers(0, n_leaves, 500)
    leaf[leaf == n_leaves - 1] = 0  # (with 3 or 40 leaves: the last one empty)
    rows = RoundRows.weighted(y, None, margin, weight, leaf, n_leaves)
    act = weight > 0
    order = np.argsort(leaf[act], kind="stable")
    np.testing.assert_array_equal(rows.y, y[act][order])
    np.testing.assert_array_equal(rows.margin, margin[act][order])
    np.testing.assert_array_equal(rows.sample_weight, weight[act][order])
    np.testing.assert_array_equal(rows.h, np.ones(act.sum()))
    counts = np.bincount(leaf[act], minlength=n_leaves)
    np.testing.assert_array_equal(rows.leaf_offsets, np.concatenate([[0], np.cumsum(counts)]))
    assert rows.leaf_offsets.dtype == np.int64 and rows.per_leaf
    with pytest.raises(ValueError, match="outside"):
        RoundRows.weighted(y, None, margin, weight, np.full(500, n_leaves), n_leaves)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_fixed_vi_iter_runs_exactly_k_iterations_with_an_empty_trace(k):
    y, h, margin, weight = _round(400, seed=1)
    rows = RoundRows.weighted(y, h, margin, weight)
    result = run_round(rows, _state(y, weight), PRIORS, RoundSettings(fixed_vi_iter=k, tol=1e30))
    assert result.n_iter == k
    assert result.elbo_trace.shape == (0,)


@pytest.mark.parametrize("alpha", ["approx", "exact"])
@pytest.mark.parametrize("update_alpha_once", [False, True])
def test_run_round_applies_the_updates_of_algorithm_1_in_order(alpha, update_alpha_once):
    """alpha, omega (S.4.2), phi at H + alpha h (S.4.3, previous eta), eta (S.4.4), by hand."""
    y, h, margin, weight = _round(500, seed=2)
    rows = RoundRows.weighted(y, h, margin, weight)
    y, h, margin, weight = rows.y, rows.h, rows.margin, rows.sample_weight
    state = _state(y, weight)
    settings = RoundSettings(
        tau=0.7, alpha=alpha, fixed_vi_iter=3, update_alpha_once=update_alpha_once
    )
    result = run_round(rows, state, PRIORS, settings)

    log_clean, log_noise = state.clean.log_proba(y, margin)
    eta, omega, clean, a = state.eta, state.omega, state.clean, None
    for it in range(3):
        if it == 0 or not update_alpha_once:
            if alpha == "exact":
                a = exact_alpha(y, margin, h, weight * np.exp(log_clean), PRIORS.weight)
            else:
                log_w = np.log(weight) + log_clean - 0.7 * y * margin
                a = approx_alpha(y, h, log_w, PRIORS.weight, 0.7)
        omega = update_omega(y, weight, np.exp(log_noise), PRIORS.noise_grade)
        clean, log_clean, log_noise = update_clean_proba(y, margin + a * h, eta, omega)
        eta = update_eta(weight, np.exp(log_clean), np.exp(log_noise), PRIORS.clean)
    assert result.alpha == a
    np.testing.assert_array_equal(result.state.eta, eta)
    np.testing.assert_array_equal(result.state.omega, omega)
    assert result.state.clean == clean


@pytest.mark.parametrize("alpha", ["approx", "exact"])
def test_core_model_returns_no_iterations_and_its_exact_log_evidence(alpha):
    y, h, margin, weight = _round(400, seed=3)
    rows = RoundRows.weighted(y, h, margin, weight)
    state = initial_state(rows.y, rows.sample_weight, 1.0, (1.0, 1.0), PRIORS)
    settings = RoundSettings(noise_model=False, alpha=alpha)
    result = run_round(rows, state, PRIORS, settings)
    assert result.n_iter == 0
    assert result.state is state
    if alpha == "exact":
        want_alpha = exact_alpha(rows.y, rows.margin, rows.h, rows.sample_weight, PRIORS.weight)
    else:
        log_w = np.log(rows.sample_weight) - rows.y * rows.margin
        want_alpha = approx_alpha(rows.y, rows.h, log_w, PRIORS.weight, 1.0)
    assert result.alpha == want_alpha
    # phi = 1: the multiplicities of q(c) are the sample weights.
    log_b = log_normalizer_c(
        rows.y, rows.margin, rows.h, rows.sample_weight, PRIORS.weight, want_alpha
    )
    assert result.elbo_trace.shape == (1,)
    assert result.elbo_trace[0] == pytest.approx(core_elbo(log_b, PRIORS.weight), rel=1e-13)


@pytest.mark.parametrize("tol", [1e-4, 1e-8, 1e-12])
def test_stopping_rule_stops_at_the_first_rise_of_at_most_tol_relative(tol):
    y, h, margin, weight = _round(600, seed=4)
    rows = RoundRows.weighted(y, h, margin, weight)
    state = _state(rows.y, rows.sample_weight)
    result = run_round(rows, state, PRIORS, RoundSettings(tol=tol, max_vi_iter=200))
    trace = result.elbo_trace
    assert trace.size == result.n_iter + 1 and np.all(np.isfinite(trace))
    rise = np.diff(trace)
    threshold = tol * np.abs(trace[:-1])
    assert np.all(rise[:-1] > threshold[:-1])  # it went on only while the ELBO rose enough
    assert rise[-1] <= threshold[-1]  # and stopped at the first rise that did not
    assert result.n_iter < 200
    # A cap below that stops at the cap with the same trace so far.
    capped = run_round(rows, state, PRIORS, RoundSettings(tol=tol, max_vi_iter=result.n_iter - 1))
    assert capped.n_iter == result.n_iter - 1
    np.testing.assert_array_equal(capped.elbo_trace, trace[: result.n_iter])


@pytest.mark.parametrize(
    "settings",
    [RoundSettings(), RoundSettings(alpha="exact"), RoundSettings(fixed_vi_iter=2)],
)
def test_round_on_pseudo_rows_matches_the_round_on_weighted_rows(settings):
    y, h, margin, weight = _round(6_000, seed=5, spread=3.0)
    state = _state(y, weight)
    rows = run_round(RoundRows.weighted(y, h, margin, weight), state, PRIORS, settings)
    pseudo_rows = RoundRows.pseudo(y, h, margin, weight)
    assert pseudo_rows.y.size < 6_000
    pseudo = run_round(pseudo_rows, state, PRIORS, settings)
    assert pseudo.alpha == pytest.approx(rows.alpha, rel=1e-8)
    assert pseudo.n_iter == rows.n_iter
    np.testing.assert_allclose(pseudo.state.eta, rows.state.eta, rtol=1e-8)
    np.testing.assert_allclose(pseudo.state.omega, rows.state.omega, rtol=1e-8)
    np.testing.assert_allclose(pseudo.elbo_trace, rows.elbo_trace, rtol=1e-8)


def test_initial_state_is_a_constant_phi_and_its_omega():
    y, _, _, weight = _round(100, seed=6)
    state = initial_state(y, weight, 0.9, (2.0, 3.0), PRIORS)
    np.testing.assert_array_equal(state.eta, [2.0, 3.0])
    assert state.clean == CleanLogOdds.constant(0.9)
    noisy = 0.1 * weight
    want = PRIORS.noise_grade + np.array([noisy[y < 0].sum(), noisy[y > 0].sum()])
    np.testing.assert_allclose(state.omega, want, rtol=1e-13)


def test_round_settings_defaults_are_the_paper_presets():
    from viboost import VIBoostClassifier
    from viboost.presets import PRESETS

    params = VIBoostClassifier(preset="paper").get_params()
    params["alpha"] = PRESETS["paper"].alpha  # left at None: the preset fills it in
    for field in dataclasses.fields(RoundSettings):
        assert getattr(RoundSettings(), field.name) == params[field.name], field.name


def test_core_model_with_fixed_iterations_computes_no_elbo():
    rng = np.random.default_rng(3)
    y = rng.choice([-1.0, 1.0], size=50)
    h = np.where(rng.random(50) < 0.8, y, -y)
    rows = RoundRows.weighted(y, h, np.zeros(50), np.ones(50))
    state = initial_state(y, np.ones(50), 1.0, (1.0, 1.0), ModelPriors())
    tracked = run_round(rows, state, ModelPriors(), RoundSettings(noise_model=False))
    fixed = run_round(rows, state, ModelPriors(), RoundSettings(noise_model=False, fixed_vi_iter=1))
    assert fixed.alpha == tracked.alpha
    assert tracked.elbo_trace.size == 1 and fixed.elbo_trace.size == 0
