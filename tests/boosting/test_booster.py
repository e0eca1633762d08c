"""viboost.boosting.booster: ensembles in lockstep against the same ensembles fitted one by one,
the in-memory row source against the loop written out here, records and warm starts."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.booster import Booster, BoosterRecords, InMemoryRows, run_rounds
from viboost.boosting.reweighting import search_weights
from viboost.boosting.stumps import BinnedStumpSearch
from viboost.variational import ModelPriors, RoundRows, RoundSettings, initial_state, run_round

PRIORS = ModelPriors()


def _data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.where(np.nan_to_num(X[:, 0]) - 0.7 * np.nan_to_num(X[:, 2]) > 0, 1.0, -1.0)
    flip = rng.random(n) < 0.15
    y[flip] = -y[flip]
    return X, y


def _booster(search, y, weights, settings, learning_rate=0.5, phi0=0.9):
    states = [initial_state(y, w, phi0, (1.0, 1.0), PRIORS) for w in weights]
    searches = [search.restricted(w > 0) for w in weights]
    return Booster(InMemoryRows(searches, y, weights), states, PRIORS, settings, learning_rate)


@pytest.mark.parametrize("alpha", ["approx", "exact"])
def test_ensembles_in_lockstep_are_the_ensembles_fitted_alone(alpha):
    X, y = _data()
    rng = np.random.default_rng(1)
    weights = [np.where(rng.random(y.size) < 0.7, 1.0, 0.0) for _ in range(3)]
    search = BinnedStumpSearch(X)
    settings = RoundSettings(alpha=alpha)
    together = _booster(search, y, weights, settings)
    alone = [_booster(search, y, [w], settings) for w in weights]
    for _ in range(15):
        together.add_round()
        for booster in alone:
            booster.add_round()
    for k, booster in enumerate(alone):
        assert together.records[k].learners == booster.records[0].learners
        assert together.records[k].alphas == booster.records[0].alphas
        assert together.margins(k).tobytes() == booster.margins().tobytes()
        assert together.states[k].snr == booster.states[0].snr


def test_a_round_is_search_run_round_reweight_record():
    """The booster's first two rounds against the loop written out with the library's parts."""
    X, y = _data(seed=2)
    s = np.full(y.size, 2.0)
    search = BinnedStumpSearch(X)
    settings = RoundSettings(tau=1.0, alpha="approx")
    booster = _booster(search, y, [s], settings, learning_rate=0.5)

    state = initial_state(y, s, 0.9, (1.0, 1.0), PRIORS)
    margin = np.zeros(y.size)
    for _ in range(2):
        booster.add_round()
        weights = search_weights(y, margin, s, state.clean, 1.0)
        stump, _ = search.best(weights, y)
        h = stump.predict(X)
        result = run_round(RoundRows.weighted(y, h, margin, s), state, PRIORS, settings)
        state = result.state
        margin = margin + 0.5 * result.alpha * h
    records = booster.records[0]
    assert records.learners[-1] == stump
    assert records.alphas[-1] == pytest.approx(0.5 * result.alpha, rel=1e-12)
    np.testing.assert_allclose(booster.margins(), margin, rtol=1e-12, atol=1e-15)
    assert records.snr_path[-1] == pytest.approx(state.snr, rel=1e-12)
    assert len(records) == booster.n_rounds == 2
    assert records.n_iter[-1] == result.n_iter


def test_warm_start_from_records_continues_one_run():
    X, y = _data(seed=3)
    s = np.ones(y.size)
    search = BinnedStumpSearch(X)
    settings = RoundSettings()
    whole = _booster(search, y, [s], settings)
    run_rounds(whole, 12, "test", verbose=0)
    first = _booster(search, y, [s], settings)
    run_rounds(first, 5, "test", verbose=0)
    records = first.records[0]
    resumed = Booster(
        InMemoryRows([search], y, [s], [first.margins().copy()]),
        first.states,
        PRIORS,
        settings,
        0.5,
        [BoosterRecords(**{k: list(v) for k, v in vars(records).items()})],
    )
    run_rounds(resumed, 12, "test", verbose=0, done=resumed.n_rounds)
    assert resumed.records[0].learners == whole.records[0].learners
    np.testing.assert_allclose(resumed.margins(), whole.margins(), rtol=1e-12, atol=1e-15)


def test_out_of_fold_takes_each_rows_last_holding_ensemble():
    X, y = _data(n=8)
    search = BinnedStumpSearch(X)
    weights = [np.ones(8), np.ones(8)]
    validation = np.array([[1, 1, 0, 0, 1, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0, 0]], dtype=bool)
    margins = [np.full(8, 1.0), np.full(8, 2.0)]
    rows = InMemoryRows([search, search], y, weights, margins, validation=validation)
    np.testing.assert_array_equal(rows.out_of_fold(), [1, 2, 2, 0, 1, 0, 0, 0])
    assert not InMemoryRows([search], y, [np.ones(8)]).out_of_fold().any()
