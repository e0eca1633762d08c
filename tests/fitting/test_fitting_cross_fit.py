"""viboost.fitting.cross_fit: the folds, the score of a round count, the early-stopping rule
and the CrossFitter driver (out-of-fold margins against a fold booster fitted alone, the
warning at the round cap, the progress bars)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import viboost.noise_fit.cross_fit
from scipy.special import log_expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

import viboost.boosting.booster
from viboost.boosting.booster import Booster, InMemoryRows
from viboost.boosting.stumps import BinnedStumpSearch
from viboost.fitting.cross_fit import (
    AUTO_CV_TRAIN_ROWS,
    CHECK_EVERY,
    CV_RELATIVE_TOL,
    CV_TOL,
    SECOND_PASS_FOLDS,
    SECOND_PASS_SHARE,
    CrossFitter,
    RoundCountSearch,
    auto_fold_count,
    cross_fit_folds,
    score_out_of_fold,
    validation_fold,
)
from viboost.fitting.task import BinaryTask, ClassesTask
from viboost.variational import ModelPriors, RoundSettings, initial_state


def test_round_count_search_keeps_the_best_and_stops_after_patience():
    search = RoundCountSearch(patience=20, total_weight=100.0)
    margin = CV_TOL * 100.0  # the smallest gain that counts
    assert not search.update(10, -50.0, "a")
    assert not search.update(20, -40.0, "b")
    assert not search.update(30, -40.0 + margin / 2, "c")  # not enough to count
    assert search.best[:3] == (20, -40.0, "b")
    assert search.update(40, -39.0 - margin / 2 - 1.0, "d")  # 20 rounds after the best: stop
    np.testing.assert_array_equal(search.rounds, [10, 20, 30, 40])
    assert search.scores[0] == -50.0


def test_round_count_search_stops_once_gains_are_within_a_standard_error():
    """Gains below one standard error of the paired difference still choose the count (the
    highest score) but do not extend the search; a gain well above it does. The oracle: the
    standard error of a weighted sum of differences, written out."""
    rng = np.random.default_rng(0)
    n = 2000
    weights = rng.uniform(0.5, 1.5, n)
    search = RoundCountSearch(patience=20, total_weight=weights.sum(), weights=weights)
    base = rng.normal(-0.5, 0.3, n)

    def check(rounds, rows):
        return search.update(rounds, float(np.dot(weights, rows)), rounds, rows)

    assert not check(10, base)
    noise = rng.normal(0.0, 0.05, n)
    creeping = base + noise - noise.mean() + 1e-4  # a real but tiny rise, far below 1 SE
    diff = creeping - base
    share = weights / weights.sum()
    spread = np.sqrt(np.dot(share**2, (diff - np.dot(share, diff)) ** 2) * n / (n - 1))
    se = weights.sum() * spread
    assert search.standard_error(creeping, base) == pytest.approx(se, rel=1e-12)
    assert np.dot(weights, diff) < se  # within a standard error
    assert not check(20, creeping)
    assert search.best[0] == 20  # the highest score still chooses the count
    assert check(30, creeping + 1e-5)  # 20 rounds without a significant gain: stop
    # A gain of many standard errors extends the search.
    again = RoundCountSearch(patience=20, total_weight=weights.sum(), weights=weights)
    assert not again.update(10, float(np.dot(weights, base)), 10, base)
    assert not again.update(20, float(np.dot(weights, base + 0.1)), 20, base + 0.1)
    assert not again.update(30, float(np.dot(weights, base + 0.1)), 30, base + 0.1)
    assert again.update(40, float(np.dot(weights, base + 0.1)), 40, base + 0.1)


def test_round_count_search_stops_on_a_steady_creep_below_the_relative_tolerance():
    """A creep of many paired standard errors (every row gains the same, as on nearly separable
    data) extends the search only while each gain within ``patience`` rounds is at least
    CV_RELATIVE_TOL of the score's size; a smaller one still chooses the count."""
    n = 1000
    weights = np.ones(n)
    base = np.full(n, -0.15)
    base[::2] = -0.25  # rows differ, but every row gains the same: the paired SE is 0

    def search_with(step: float) -> tuple[bool, RoundCountSearch]:
        search = RoundCountSearch(patience=20, total_weight=float(n), weights=weights)
        stopped = False
        for k, rounds in enumerate(range(10, 60, 10)):
            rows = base + k * step
            stopped = search.update(rounds, float(rows.sum()), rounds, rows)
            if stopped:
                break
        return stopped, search

    size = -float(base.sum()) / n  # the score's size per row: 0.2 nats
    below = 0.4 * CV_RELATIVE_TOL * size  # two checks (20 rounds) gain 0.8 of the tolerance
    assert below > CV_TOL  # above the absolute tolerance: the relative one decides
    stopped, search = search_with(below)
    assert stopped and search.rounds[-1] == 30  # 20 rounds after the first check
    assert search.best[0] == 30  # each check still beats the best: it chooses the count
    stopped, search = search_with(0.6 * CV_RELATIVE_TOL * size)  # two checks: 1.2 of it
    assert not stopped and search.rounds[-1] == 50


def test_round_count_search_without_patience_never_stops():
    search = RoundCountSearch(patience=None, total_weight=1.0)
    assert not any(search.update(r, -float(r), None) for r in range(10, 1000, 10))
    assert search.best[0] == 10


def test_int_cv_gives_stratified_folds_over_weighted_rows_only():
    y = np.array([1.0, -1.0] * 10)
    weighted = np.ones(20, dtype=bool)
    weighted[:2] = False
    folds = cross_fit_folds(3, y, weighted, random_state=0)
    validation = np.sort(np.concatenate([val for _, val in folds]))
    np.testing.assert_array_equal(validation, np.arange(2, 20))
    for train, val in folds:
        assert np.intersect1d(train, val).size == 0
        assert set(np.unique(y[val])) == {-1.0, 1.0}
    again = cross_fit_folds(3, y, weighted, random_state=0)  # seeded: the same folds
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))


def test_auto_fold_count_is_five_or_the_fewest_folds_whose_boosters_train_on_enough_rows():
    for n in (2, 1_000, 249_999, 250_000, 266_667, 266_668, 299_999, 300_000, 400_000, 10**7):
        # Reference: the fewest k whose training folds hold AUTO_CV_TRAIN_ROWS rows, else 5.
        enough = [k for k in range(2, 5) if n - n / k >= AUTO_CV_TRAIN_ROWS]
        assert auto_fold_count(n) == (enough[0] if enough else 5), n
    counts = [auto_fold_count(n) for n in range(200_000, 500_000, 1_000)]
    assert counts == sorted(counts, reverse=True)  # more rows, never more folds


def test_auto_cv_counts_the_rows_of_positive_weight():
    y = np.tile([1.0, -1.0], 200_000)  # 400,000 rows: 2 folds of 200,000 training rows
    weighted = np.ones(y.size, dtype=bool)
    assert len(cross_fit_folds("auto", y, weighted, random_state=0)) == 2
    weighted[:2] = False  # two rows fewer of positive weight: 3 folds
    folds = cross_fit_folds("auto", y, weighted, random_state=0)
    assert len(folds) == 3
    assert all(train.size >= AUTO_CV_TRAIN_ROWS for train, _ in folds)
    small = cross_fit_folds("auto", y[:1000], weighted[:1000] | True, random_state=0)
    assert len(small) == 5


def test_too_few_rows_in_a_class_warns_and_gives_none():
    y = np.array([1.0, -1.0, -1.0, -1.0])
    with pytest.warns(UserWarning, match="fitted in-sample"):
        assert cross_fit_folds(5, y, np.ones(4, dtype=bool), random_state=0) is None


def test_a_splitter_is_used_as_given_and_zero_weight_training_rows_dropped():
    y = np.array([1.0, -1.0] * 6)
    weighted = np.ones(12, dtype=bool)
    weighted[5] = False
    folds = cross_fit_folds(KFold(3), y, weighted, random_state=None)
    assert len(folds) == 3
    assert all(5 not in train for train, _ in folds)
    np.testing.assert_array_equal(folds[0][1], np.arange(4))


def test_score_is_the_logistic_log_likelihood_for_the_core_model():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
    margin, weight = rng.normal(size=50), rng.random(50)
    score, calibration, _ = score_out_of_fold(
        BinaryTask(), y, margin[:, None], weight, ModelPriors(), noise_model=False
    )
    assert calibration is None
    assert score == pytest.approx(float(np.sum(weight * log_expit(y * margin))), rel=1e-12)
    score, calibration, _ = score_out_of_fold(
        BinaryTask(), y, margin[:, None], weight, ModelPriors(), noise_model=True
    )
    assert score == calibration.log_likelihood


# ---------------------------------------------------------------------------- the driver
def _noisy_data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1.0, -1.0)
    flip = rng.random(n) < 0.15
    y[flip] = -y[flip]
    return X, y


def _cross_fitter(
    n_estimators: int,
    patience: int | None,
    verbose: int = 0,
    drop_mislabeled: bool = False,
    average_folds: bool = False,
) -> CrossFitter:
    return CrossFitter(
        BinaryTask(),
        n_estimators=n_estimators,
        learning_rate=0.1,
        patience=patience,
        priors=ModelPriors(),
        settings=RoundSettings(alpha="exact", noise_model=False),
        noise_model=True,
        init_eta=(1.0, 1.0),
        verbose=verbose,
        drop_mislabeled=drop_mislabeled,
        average_folds=average_folds,
    )


def _make_rows(X: np.ndarray, y: np.ndarray):
    search = BinnedStumpSearch(X)

    def make_rows(multiplicities, validation):
        searches = [search.restricted(m > 0) for m in multiplicities]
        return InMemoryRows(searches, y, list(multiplicities), validation=validation)

    return make_rows


def test_cross_fitter_refits_on_clean_proba_and_scores_each_row_out_of_fold():
    X, y = _noisy_data()
    s = np.ones(y.size)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    result = _cross_fitter(200, patience=30).fit(_make_rows(X, y), y, s, folds)
    assert result.n_rounds < 200 and result.n_rounds % CHECK_EVERY == 0
    # The refit fits all rows, 3 / 2 of a fold booster's: 1.5 times the chosen count.
    assert result.final.n_rounds == result.refit_rounds == round(1.5 * result.n_rounds)
    assert result.rounds[-1] - result.n_rounds >= 30  # stopped by patience
    np.testing.assert_array_equal(
        result.clean_proba, result.calibration.clean_proba(y, result.out_of_fold[:, 0])
    )
    # A row's out-of-fold margin is its fold booster's, which never saw it: refitting that
    # fold's booster alone for the chosen rounds gives the same margin.
    train, val = folds[1]
    weights = np.zeros(y.size)
    weights[train] = 1.0
    search = BinnedStumpSearch(X)
    alone = Booster(
        InMemoryRows([search.restricted(weights > 0)], y, [weights]),
        [initial_state(y, weights, 1.0, (1.0, 1.0), ModelPriors())],
        ModelPriors(),
        RoundSettings(alpha="exact", noise_model=False, fixed_vi_iter=1),
        learning_rate=0.1,
    )
    for _ in range(result.n_rounds):
        alone.add_round()
    np.testing.assert_array_equal(result.out_of_fold[val, 0], alone.margins()[val])


def test_validation_fold_is_the_first_fold_holding_a_row_out():
    folds = [(np.array([2, 3]), np.array([0, 1])), (np.array([0, 1]), np.array([1, 2]))]
    np.testing.assert_array_equal(validation_fold(folds, 5), [0, 0, 1, -1, -1])


def test_cross_fitter_bags_the_posterior_by_the_validation_folds(monkeypatch):
    # Rows scored by one fold booster share its errors: the bags reweight them together
    # (a cluster bootstrap over the folds, on top of the rows' own).
    import viboost.fitting.cross_fit as cross_fit_module

    seen = {}
    original = cross_fit_module.bootstrap_reweightings

    def spy(y, margin, weight, n_bags, seed, groups=None):
        seen["groups"] = groups
        return original(y, margin, weight, n_bags, seed, groups)

    monkeypatch.setattr(cross_fit_module, "bootstrap_reweightings", spy)
    X, y = _noisy_data()
    s = np.ones(y.size)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    _cross_fitter(60, patience=20).fit(_make_rows(X, y), y, s, folds)
    expected = np.empty(y.size, dtype=int)
    for k, (_, val) in enumerate(folds):
        expected[val] = k
    np.testing.assert_array_equal(seen["groups"], expected)


def test_cross_fitter_warns_when_the_best_round_count_is_the_cap():
    X, y = _noisy_data()
    s = np.ones(y.size)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="n_estimators=20"):
        result = _cross_fitter(20, patience=None).fit(_make_rows(X, y), y, s, folds)
    assert result.n_rounds == 20
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert _cross_fitter(400, patience=30).fit(_make_rows(X, y), y, s, folds).n_rounds < 400


def test_cross_fitter_warns_when_the_cap_stops_the_refit_short():
    """With 3 folds the refit runs 1.5 times the chosen count (60 here, uncapped): a cap of 85
    leaves the choice alone but stops the refit 5 rounds short, and the warning says so, with
    the parameter to raise; a cap of 90 lets it run them all, without a warning."""
    X, y = _noisy_data()
    s = np.ones(y.size)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="refit stopped at n_estimators=85 .* the 90"):
        result = _cross_fitter(85, patience=30).fit(_make_rows(X, y), y, s, folds)
    assert (result.n_rounds, result.refit_rounds) == (60, 85)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = _cross_fitter(90, patience=30).fit(_make_rows(X, y), y, s, folds)
    assert (result.n_rounds, result.refit_rounds) == (60, 90)


def test_cross_fit_progress_bar_ends_at_the_rounds_run_and_names_the_choice(monkeypatch):
    bars = []

    class Bar:
        def __init__(self, total, desc, **kwargs):
            self.total, self.desc, self.n, self.postfix = total, desc, kwargs.get("initial", 0), ""
            bars.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n=1):
            self.n += n

        def set_postfix_str(self, text, refresh=True):
            self.postfix = text

    monkeypatch.setattr(viboost.noise_fit.cross_fit, "tqdm", Bar)
    monkeypatch.setattr(viboost.boosting.booster, "tqdm", Bar)
    X, y = _noisy_data()
    s = np.ones(y.size)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    result = _cross_fitter(400, patience=30, verbose=1).fit(_make_rows(X, y), y, s, folds)
    cross, refit = bars
    assert cross.total == cross.n == result.rounds[-1] < 400
    assert cross.postfix == f"chose {result.n_rounds} rounds"
    assert refit.desc == "VIBoost refit" and refit.total == refit.n == result.refit_rounds


def test_refit_round_count_scales_by_the_weight_the_refit_fits():
    """The refit's rounds: the chosen count times the total weight over a training fold's mean
    weight, rounded, never fewer than chosen and at most n_estimators."""
    from viboost.fitting.cross_fit import refit_round_count

    s = np.ones(10)
    s[0] = 5.0  # total 14
    folds = [(np.arange(1, 10), np.arange(1)), (np.arange(5), np.arange(5, 10))]
    # Training weights 9 and 9: 14 / 9 of the count.
    assert refit_round_count(9, s, folds, 1000) == 14
    assert refit_round_count(10, s, folds, 1000) == round(10 * 14 / 9)
    assert refit_round_count(9, s, folds, 12) == 12  # capped
    assert refit_round_count(0, s, folds, 1000) == 0
    # Folds that hold every row (a splitter that trains on all): the count as chosen.
    assert refit_round_count(7, s, [(np.arange(10), np.arange(10))], 1000) == 7


def _refit_alone(X, y, multiplicity, n_rounds):
    """A booster on every row counted ``multiplicity`` times, as the refit is built."""
    search = BinnedStumpSearch(X)
    booster = Booster(
        InMemoryRows([search.restricted(multiplicity > 0)], y, [multiplicity]),
        [initial_state(y, multiplicity, 1.0, (1.0, 1.0), ModelPriors())],
        ModelPriors(),
        RoundSettings(alpha="exact", noise_model=False),
        learning_rate=0.1,
    )
    for _ in range(n_rounds):
        booster.add_round()
    return booster


def _refit_phi(result, y):
    """phi_n of the refit: the noise model's at the peak of the posterior of theta
    (NoisePosterior.refit_clean_proba), not the reported posterior average."""
    return result.calibration.refit_clean_proba(y, np.ravel(result.out_of_fold))


def test_drop_mislabeled_refits_without_the_flagged_rows_for_a_second_search():
    """drop_mislabeled: the noise statistics are the first pass's (the same as without it);
    the refit fits the rows of phi > 1/2 at weight s, for the count of a second search whose
    fold boosters fit those rows only."""
    X, y = _noisy_data()
    s = np.random.default_rng(3).integers(1, 3, y.size).astype(float)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    weighted = _cross_fitter(200, patience=30).fit(_make_rows(X, y), y, s, folds)
    dropped = _cross_fitter(200, patience=30, drop_mislabeled=True).fit(
        _make_rows(X, y), y, s, folds
    )
    assert weighted.n_passes == 1
    np.testing.assert_array_equal(weighted.refit_weight, s * _refit_phi(weighted, y))
    # The reported phi_n is the posterior average (no noise and the noise model's draws).
    np.testing.assert_array_equal(
        weighted.clean_proba, weighted.calibration.clean_proba(y, np.ravel(weighted.out_of_fold))
    )
    # The first pass and every noise statistic are unchanged.
    np.testing.assert_array_equal(dropped.out_of_fold, weighted.out_of_fold)
    np.testing.assert_array_equal(dropped.clean_proba, weighted.clean_proba)
    np.testing.assert_array_equal(dropped.mislabel_proba, weighted.mislabel_proba)
    np.testing.assert_array_equal(dropped.flip_rates, weighted.flip_rates)
    kept = _refit_phi(dropped, y) > 0.5
    assert 0.05 < np.mean(~kept) < 0.3  # 15% of the labels were flipped
    assert dropped.n_passes == 2
    np.testing.assert_array_equal(dropped.refit_weight, np.where(kept, s, 0.0))
    # The second search: its fold boosters fit the kept rows only, so it scores another
    # sequence of counts (more rounds before the kept labels are overfitted) ...
    assert dropped.n_rounds > weighted.n_rounds and dropped.rounds[-1] < 200
    assert not np.array_equal(dropped.scores[: len(weighted.scores)], weighted.scores)
    # ... and the refit is the booster of the kept rows for that count, scaled.
    # (the second search runs the boosters of the first SECOND_PASS_FOLDS folds)
    trained = np.mean([np.sum((s * kept)[train]) for train, _ in folds[:SECOND_PASS_FOLDS]])
    assert dropped.refit_rounds == min(200, round(dropped.n_rounds * np.sum(s * kept) / trained))
    alone = _refit_alone(X, y, np.where(kept, s, 0.0), dropped.refit_rounds)
    np.testing.assert_array_equal(dropped.final.margins(), alone.margins())


def test_average_folds_is_the_mean_of_each_folds_booster_on_its_weighted_training_rows():
    """average_folds: the noise statistics are the refit's; the model is one booster per fold
    on the fold's training rows counted s_n phi_n times, for the chosen count, averaged."""
    X, y = _noisy_data()
    s = np.random.default_rng(4).integers(1, 3, y.size).astype(float)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    refit = _cross_fitter(200, patience=30).fit(_make_rows(X, y), y, s, folds)
    average = _cross_fitter(200, patience=30, average_folds=True).fit(_make_rows(X, y), y, s, folds)
    assert (refit.n_averaged, average.n_averaged) == (1, 3)
    np.testing.assert_array_equal(average.out_of_fold, refit.out_of_fold)
    np.testing.assert_array_equal(average.mislabel_proba, refit.mislabel_proba)
    np.testing.assert_array_equal(average.refit_weight, refit.refit_weight)
    assert average.refit_rounds == average.n_rounds == refit.n_rounds
    (records,) = average.records
    assert len(records.learners) == 3 * average.n_rounds
    margins = []
    for k, (train, _) in enumerate(folds):
        multiplicity = np.zeros(y.size)
        multiplicity[train] = (s * _refit_phi(refit, y))[train]
        alone = _refit_alone(X, y, multiplicity, average.n_rounds)
        margins.append(alone.margins())
        np.testing.assert_array_equal(average.final.margins(k), alone.margins())
        # Fold k's rounds sit at k, k + 3, ... of the average, each weight divided by 3.
        np.testing.assert_array_equal(records.learners[k::3], alone.records[0].learners)
        np.testing.assert_allclose(np.array(records.alphas[k::3]) * 3, alone.records[0].alphas)
    (refit_records,) = refit.records
    assert refit_records is refit.final.records[0]
    h = np.zeros(y.size)
    for learner, alpha in zip(records.learners, records.alphas, strict=True):
        h += alpha * learner.predict(X)
    np.testing.assert_allclose(h, np.mean(margins, axis=0), rtol=1e-12, atol=1e-12)


def test_average_records_needs_equal_groups():
    from viboost.boosting.booster import BoosterRecords, average_records

    one = BoosterRecords(learners=["a"], alphas=[1.0])
    two = BoosterRecords(learners=["b", "c"], alphas=[1.0, 1.0])
    with pytest.raises(ValueError, match="equal groups"):
        average_records([one, one, one], 2)
    with pytest.raises(ValueError, match="different numbers of rounds"):
        average_records([one, two], 2)


def test_drop_mislabeled_skips_the_second_pass_when_few_rows_are_flagged(monkeypatch):
    """Flagged rows under SECOND_PASS_SHARE of the weight: no second search, the first
    pass's count, and still no flagged row in the refit."""
    monkeypatch.setattr(viboost.noise_fit.cross_fit, "SECOND_PASS_SHARE", 0.99)
    X, y = _noisy_data()
    s = np.ones(y.size)
    folds = cross_fit_folds(3, y, s > 0, random_state=0)
    weighted = _cross_fitter(200, patience=30).fit(_make_rows(X, y), y, s, folds)
    dropped = _cross_fitter(200, patience=30, drop_mislabeled=True).fit(
        _make_rows(X, y), y, s, folds
    )
    assert dropped.n_passes == 1 and dropped.n_rounds == weighted.n_rounds
    np.testing.assert_array_equal(dropped.scores, weighted.scores)
    kept = _refit_phi(dropped, y) > 0.5
    assert not kept.all()
    np.testing.assert_array_equal(dropped.refit_weight, kept.astype(float))
    assert 0.0 < SECOND_PASS_SHARE < 0.05


def test_drop_mislabeled_drops_nothing_when_a_class_would_lose_every_row():
    fitter = _cross_fitter(10, patience=None, drop_mislabeled=True)
    y = np.array([1.0, 1.0, -1.0, -1.0, -1.0])
    s = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(
        fitter._kept(y, s, np.array([0.9, 0.2, 0.8, 0.7, 0.1])), [1.0, 0.0, 1.0, 1.0, 0.0]
    )
    # Every weighted row of class -1 flagged (the row of weight 0 does not count).
    assert fitter._kept(y, s, np.array([0.9, 0.8, 0.4, 0.5, 0.9])) is None
    # K classes: class indices.
    k_fitter = CrossFitter(
        ClassesTask(3), 10, 0.1, None, ModelPriors(), RoundSettings(), True, (1.0, 1.0),
        drop_mislabeled=True,
    )  # fmt: skip
    labels = np.array([0, 1, 2, 2])
    assert k_fitter._kept(labels, np.ones(4), np.array([0.9, 0.3, 0.9, 0.9])) is None
    np.testing.assert_array_equal(
        k_fitter._kept(labels, np.ones(4), np.array([0.9, 0.9, 0.2, 0.9])), [1, 1, 0, 1]
    )
