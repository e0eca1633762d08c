"""viboost.estimator: VIBoostClassifier as a scikit-learn estimator (API, inputs, errors,
persistence) and its fits against oracles written here: plain discrete AdaBoost, section 6
eq. (18), the exact v-Log mode by a generic minimiser, the Newton step, the generative model of
section 4, the exhaustive stump search, one thread, and the fit on the rows themselves."""

from __future__ import annotations

import inspect
import pickle
import warnings
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy.special import expit
from sklearn.base import clone
from sklearn.multiclass import OneVsRestClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

import viboost._utils.parallel as viboost_parallel
import viboost.estimator
import viboost.variational.compression
from viboost import VIBoostClassifier, ViboostVersionWarning
from viboost.boosting.stumps import DecisionStump
from viboost.fitting.data import InMemoryData
from viboost.variational.priors import ModelPriors


@parametrize_with_checks(
    [VIBoostClassifier(n_estimators=10, preset="paper"), VIBoostClassifier(n_estimators=30)]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 4))
    y = np.where(X[:, 0] - X[:, 2] + rng.normal(scale=0.8, size=150) > 0, "yes", "no")
    return X, y


def _same_fit(a: VIBoostClassifier, b: VIBoostClassifier, rtol=1e-10):
    assert a.estimators_ == b.estimators_
    np.testing.assert_allclose(a.alphas_, b.alphas_, rtol=rtol)
    assert a.snr_ == pytest.approx(b.snr_, rel=rtol)
    assert a.noise_grade_ == pytest.approx(b.noise_grade_, rel=rtol, abs=1e-12)


def test_fitted_attributes(data):
    X, y = data
    clf = VIBoostClassifier(12, preset="paper").fit(X, y)
    assert list(clf.classes_) == ["no", "yes"]
    assert len(clf.estimators_) == 12 and clf.alphas_.shape == (12,)
    assert all(isinstance(s, DecisionStump) for s in clf.estimators_)
    assert clf.clean_proba_.shape == (150,)
    assert np.all((clf.clean_proba_ > 0) & (clf.clean_proba_ <= 1))
    assert clf.snr_ == pytest.approx(clf.eta_[0] / clf.eta_[1])
    assert clf.noise_grade_ == pytest.approx(np.log(clf.omega_[1] / clf.omega_[0]))
    # eta counts the expected clean and noisy labels on top of the prior (S.4.4).
    assert clf.eta_.sum() == pytest.approx(150 + 2.0)
    assert len(clf.elbo_) == 12 and clf.n_vi_iter_.shape == (12,)
    assert all(len(trace) == n + 1 for trace, n in zip(clf.elbo_, clf.n_vi_iter_, strict=True))
    assert np.all(np.isfinite(np.concatenate(clf.elbo_)))
    assert clf.snr_path_[-1] == clf.snr_ and clf.noise_grade_path_.shape == (12,)
    imp = clf.feature_importances_
    assert imp.shape == (4,) and imp.sum() == pytest.approx(1.0)
    assert imp[[0, 2]].sum() > 0.6  # the two informative features dominate


def test_inner_loop_stops_on_tolerance_or_cap(data):
    X, y = data
    clf = VIBoostClassifier(8, preset="paper", tol=1e-6, max_vi_iter=4).fit(X, y)
    for trace, n_iter in zip(clf.elbo_, clf.n_vi_iter_, strict=True):
        gains = np.diff(trace)
        threshold = 1e-6 * np.abs(trace[:-1])
        assert np.all(gains[:-1] > threshold[:-1])  # it only went on while the ELBO rose enough
        assert n_iter == 4 or gains[-1] <= threshold[-1]


def test_paper_modifications(data):
    X, y = data
    fixed = VIBoostClassifier(6, preset="paper", fixed_vi_iter=3).fit(X, y)
    assert np.all(fixed.n_vi_iter_ == 3) and all(t.size == 0 for t in fixed.elbo_)
    once = VIBoostClassifier(1, preset="paper", fixed_vi_iter=3, update_alpha_once=True).fit(X, y)
    first = VIBoostClassifier(1, preset="paper", fixed_vi_iter=1).fit(X, y)
    assert once.alphas_[0] == first.alphas_[0]
    again = VIBoostClassifier(1, preset="paper", fixed_vi_iter=3).fit(X, y)
    assert again.alphas_[0] != first.alphas_[0]  # without (b), alpha moves with phi


def test_core_model_has_no_noise_statistics(data):
    X, y = data
    clf = VIBoostClassifier(5, preset="paper", noise_model=False, init_clean_proba=0.5).fit(X, y)
    assert np.isnan(clf.snr_) and np.isnan(clf.noise_grade_)
    np.testing.assert_array_equal(clf.clean_proba_, 1.0)
    assert all(t.shape == (1,) for t in clf.elbo_) and np.all(clf.n_vi_iter_ == 0)


def test_predictions_and_staged(data):
    X, y = data
    clf = VIBoostClassifier(10, preset="paper").fit(X, y)
    H = clf.decision_function(X)
    np.testing.assert_array_equal(clf.predict(X), np.where(H > 0, "yes", "no"))
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-H)))
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba)
    staged = list(clf.staged_decision_function(X))
    assert len(staged) == 10
    np.testing.assert_allclose(staged[-1], H)
    np.testing.assert_allclose(staged[0], clf.alphas_[0] * clf.estimators_[0].predict(X))
    np.testing.assert_array_equal(list(clf.staged_predict(X))[-1], clf.predict(X))
    np.testing.assert_allclose(list(clf.staged_predict_proba(X))[-1], proba)
    assert clf.score(X, y) == np.mean(clf.predict(X) == y)


def test_integer_sample_weights_equal_repeated_rows(data):
    X, y = data
    weights = np.random.default_rng(2).integers(0, 4, size=len(y))
    weighted = VIBoostClassifier(10, preset="paper").fit(X, y, sample_weight=weights)
    rows = np.repeat(np.arange(len(y)), weights)
    repeated = VIBoostClassifier(10, preset="paper").fit(X[rows], y[rows])
    _same_fit(weighted, repeated, rtol=1e-8)
    np.testing.assert_allclose(weighted.clean_proba_[rows], repeated.clean_proba_, rtol=1e-8)
    for a, b in zip(weighted.elbo_, repeated.elbo_, strict=True):
        np.testing.assert_allclose(a[-1], b[-1], rtol=1e-8)


def test_warm_start_continues_the_same_run(data):
    X, y = data
    clf = VIBoostClassifier(6, preset="paper", warm_start=True).fit(X, y)
    clf.set_params(n_estimators=14).fit(X, y)
    once = VIBoostClassifier(14, preset="paper").fit(X, y)
    _same_fit(clf, once, rtol=0)
    np.testing.assert_array_equal(clf.clean_proba_, once.clean_proba_)
    with pytest.raises(ValueError, match="same training data"):
        clf.set_params(n_estimators=16).fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="at least"):
        clf.set_params(n_estimators=3).fit(X, y)


def test_pandas_input_keeps_feature_names(data):
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = VIBoostClassifier(8, preset="paper").fit(frame, pd.Series(y))
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])
    np.testing.assert_allclose(
        clf.decision_function(frame),
        VIBoostClassifier(8, preset="paper").fit(X, y).decision_function(X),
    )
    with pytest.warns(UserWarning, match="feature names"):
        clf.predict(X)


def test_missing_values_go_to_the_better_side():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 2))
    y = np.where(X[:, 0] > 0, 1, 0)
    X[y == 1, 1] = np.nan  # missingness of feature 1 alone tells the class
    X[:, 0] = rng.normal(size=200)  # feature 0 is now noise
    clf = VIBoostClassifier(5, preset="paper").fit(X, y)
    first = clf.estimators_[0]
    assert first.feature == 1 and first.missing_right == (first.polarity == 1)
    assert clf.score(X, y) == 1.0
    # A feature without NaN at fit sends NaN at predict time to the side with more weight.
    out = clf.predict_proba(np.array([[np.nan, np.nan], [np.nan, 0.5]]))
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("noise_model", [False, True])
def test_huge_margins_do_not_overflow(noise_model):
    # Separable data: H grows to about log(sum of weights / mu_0), past exp's float64 limit of 709.
    X = np.arange(40, dtype=float)[:, None]
    y = (X[:, 0] >= 20).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = VIBoostClassifier(10, preset="paper", weight_prior=1e-12, noise_model=noise_model)
        clf.fit(X, y, sample_weight=np.full(40, 1e300))
        H = clf.decision_function(X)
        proba = clf.predict_proba(X)
        log_proba = clf.predict_log_proba(X)
    assert np.abs(H).max() > 709
    assert np.all(np.isfinite(np.concatenate(clf.elbo_))) and np.all(np.isfinite(proba))
    assert np.all(np.isfinite(log_proba)) and log_proba.min() < -709
    assert clf.score(X, y) == 1.0


@pytest.mark.parametrize(
    ("X", "y", "kwargs", "match"),
    [
        (np.array([[1.0], [np.inf], [2.0]]), [0, 1, 0], {}, "infinity"),
        (np.zeros((0, 2)), [], {}, "0 sample"),
        (np.arange(4.0), [0, 1, 0, 1], {}, "2D array"),
        (np.ones((4, 1)), [1, 1, 1, 1], {}, "only one class"),
        (np.arange(6.0)[:, None], [0, 1, 2, 0, 1, 2], {}, "Only binary classification"),
        (np.arange(4.0)[:, None], [0, 1, 0, 1], {"sample_weight": [1, -1, 1, 1]}, "Negative val"),
        (np.arange(4.0)[:, None], [0, 1, 0, 1], {"sample_weight": [0, 0, 0, 0]}, "non-zero"),
        (np.arange(4.0)[:, None], [0, 1, 0, 1], {"sample_weight": [1, 0, 1, 0]}, "both classes"),
        (np.arange(4.0)[:, None], [0, 1, 0], {}, "inconsistent numbers of samples"),
        (np.arange(4.0)[:, None], [0.5, 1.5, 0.2, 0.1], {}, "Unknown label type"),
    ],
)
def test_bad_input_is_named(X, y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        VIBoostClassifier(3, preset="paper").fit(X, np.asarray(y), **kwargs)


def test_non_numeric_columns_are_named():
    # Not declared categorical (categorical_features=None or a mask without them): refused,
    # named, with categorical_features suggested; at predict too for a numeric model.
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "city": ["a", "b", "a", "b"]})
    for declared in (None, [True, False], [0]):
        with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['city'\]") as info:
            VIBoostClassifier(3, preset="paper", categorical_features=declared).fit(
                frame, [0, 1, 0, 1]
            )
        assert "categorical_features" in str(info.value)
    numeric = frame.assign(city=[0.0, 1.0, 0.0, 1.0])
    clf = VIBoostClassifier(3, preset="paper").fit(numeric, [0, 1, 0, 1])
    assert clf.is_categorical_ is None and clf.categories_ == [None, None]
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['city'\].*categorical_f"):
        clf.predict(frame)


@pytest.mark.skipif(
    "n_categories" not in inspect.signature(InMemoryData).parameters,
    reason="engine not yet categorical",
)
@pytest.mark.filterwarnings("ignore:The out-of-fold score was best")
def test_string_columns_are_fitted_as_categorical():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0] * 5, "city": ["a", "b", "a", "b"] * 5})
    y = [0, 1, 0, 1] * 5
    clf = VIBoostClassifier(10, random_state=0).fit(frame, y)
    assert clf.is_categorical_.tolist() == [False, True]
    assert clf.categories_[0] is None and clf.categories_[1].tolist() == ["a", "b"]
    assert clf.n_features_in_ == 2 and clf.feature_names_in_.tolist() == ["x", "city"]
    np.testing.assert_array_equal(clf.predict(frame), y)


@pytest.mark.filterwarnings("ignore:The out-of-fold score was best")
@pytest.mark.parametrize("n_classes", [2, 3])
def test_categorical_model_round_trips_and_k_classes(n_classes):
    # A frame with a text column and a category column of 12 levels (beyond one-vs-rest), K
    # classes decided by the levels: category-set splits, pickles, clone and importances.
    rng = np.random.default_rng(n_classes)
    n = 300
    level = rng.integers(0, 12, n)
    frame = pd.DataFrame({
        "noise": rng.normal(size=n),
        "level": pd.Categorical([f"L{v}" for v in level]),
        "city": np.array(["x", "y", "z"], dtype=object)[rng.integers(0, 3, n)],
    })  # fmt: skip
    y = (level * 7 % 12) % n_classes  # levels of each class are scattered: a set, not a cut
    clf = VIBoostClassifier(20, random_state=0).fit(frame, y)
    assert clf.is_categorical_.tolist() == [False, True, True]
    assert clf.score(frame, y) > 0.95
    importances = clf.feature_importances_
    assert importances.shape == (3,) and importances.argmax() == 1  # by original column
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict_proba(frame), clf.predict_proba(frame))
    assert [c is None or c.tolist() for c in loaded.categories_] == [
        c is None or c.tolist() for c in clf.categories_
    ]
    # The predict frame's categories listed in another order, or as text: the same model.
    shuffled = frame.assign(level=frame["level"].cat.reorder_categories(
        [f"L{v}" for v in rng.permutation(12)]))  # fmt: skip
    as_text = frame.assign(level=frame["level"].astype(str))
    np.testing.assert_array_equal(clf.predict_proba(shuffled), clf.predict_proba(frame))
    np.testing.assert_array_equal(clf.predict_proba(as_text), clf.predict_proba(frame))
    assert not hasattr(clone(clf), "categories_")


def test_wrong_number_of_features_at_predict(data):
    X, y = data
    clf = VIBoostClassifier(3, preset="paper").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])


def test_multiclass_through_one_vs_rest():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    model = OneVsRestClassifier(VIBoostClassifier(15, preset="paper")).fit(X, y)
    assert model.score(X, y) > 0.9


def test_pickle_and_joblib_round_trips(data, tmp_path):
    X, y = data
    clf = VIBoostClassifier(7, preset="paper").fit(X, y)
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    joblib.dump(clf, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib")
    np.testing.assert_array_equal(loaded.decision_function(X), clf.decision_function(X))
    _same_fit(loaded, clf, rtol=0)


def test_loading_another_version_warns(data, monkeypatch):
    X, y = data
    clf = VIBoostClassifier(3, preset="paper").fit(X, y)
    monkeypatch.setattr(viboost.estimator, "__version__", "0.0.1")
    blob = pickle.dumps(clf)
    monkeypatch.undo()
    with pytest.warns(ViboostVersionWarning, match="saved by viboost 0.0.1"):
        loaded = pickle.loads(blob)
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(pickle.dumps(clf))  # the same version loads silently


def test_a_model_pickled_by_viboost_0_1_0_loads_warns_and_predicts_as_it_did():
    """tests/data/model_viboost_0_1_0.pkl: a robust and a paper fit pickled by viboost 0.1.0
    (main at 1e96ddc), whose stumps lived in viboost.stumps, with their decision functions."""
    blob = (Path(__file__).parent / "data" / "model_viboost_0_1_0.pkl").read_bytes()
    with pytest.warns(ViboostVersionWarning, match="saved by viboost 0.1.0.*Refit"):
        saved = pickle.loads(blob)
    for name, noise_fit in (("robust", "cross-fit"), ("paper", "in-sample")):
        model = saved[name]
        assert model.plan_.noise_fit == noise_fit
        assert not hasattr(model, "_plan")
        np.testing.assert_array_equal(
            model.decision_function(saved["X"]), saved[f"{name}_decision"]
        )
        assert model.feature_importances_.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------------- AdaBoost relation
def _all_stumps(X):
    """Every (feature, threshold, polarity), in the search's tie-breaking order."""
    for j in range(X.shape[1]):
        values = np.unique(X[:, j])
        thresholds = np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2])
        for thr in thresholds:
            for polarity in (1, -1):
                yield j, thr, polarity


def _stump_output(X, j, thr, polarity):
    return np.where(X[:, j] > thr, polarity, -polarity).astype(float)


def reference_adaboost(X, y, n_rounds):
    """Discrete AdaBoost with exhaustive stumps, written independently of viboost."""
    d = np.full(len(y), 1.0 / len(y))
    stumps, alphas = [], []
    for _ in range(n_rounds):
        best = None
        for j, thr, polarity in _all_stumps(X):
            err = d[_stump_output(X, j, thr, polarity) != y].sum()
            if best is None or err < best[0] - 1e-12:
                best = (err, j, thr, polarity)
        err, j, thr, polarity = best
        alpha = 0.5 * np.log((1 - err) / err)
        h = _stump_output(X, j, thr, polarity)
        d = d * np.exp(-alpha * y * h)
        d /= d.sum()
        stumps.append((j, thr, polarity))
        alphas.append(alpha)
    return stumps, np.array(alphas)


@pytest.fixture
def noisy_linear():
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(60, 3)), 2)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.7, size=60) > 0, 1.0, -1.0)
    return X, y


def test_core_model_with_vanishing_prior_is_discrete_adaboost(noisy_linear):
    X, y = noisy_linear
    ref_stumps, ref_alphas = reference_adaboost(X, y, 15)
    clf = VIBoostClassifier(15, preset="paper", noise_model=False, tau=1.0, weight_prior=1e-12).fit(
        X, y
    )
    got = [(s.feature, s.threshold, s.polarity) for s in clf.estimators_]
    assert [(j, p) for j, _, p in got] == [(j, p) for j, _, p in ref_stumps]
    np.testing.assert_allclose([t for _, t, _ in got], [t for _, t, _ in ref_stumps])
    np.testing.assert_allclose(clf.alphas_, ref_alphas, rtol=1e-8)


def test_unit_prior_follows_eq_18(noisy_linear):
    X, y = noisy_linear
    clf = VIBoostClassifier(20, preset="paper", noise_model=False, tau=1.0, weight_prior=1.0).fit(
        X, y
    )
    H = np.zeros(len(y))
    for stump, alpha in zip(clf.estimators_, clf.alphas_, strict=True):
        h = stump.predict(X)
        Z = np.exp(-y * H).sum()
        d = np.exp(-y * H) / Z
        eps = d[h != y].sum()
        assert alpha == pytest.approx(0.5 * np.log((1 / Z + 1 - eps) / (1 / Z + eps)), rel=1e-10)
        H += alpha * h
        # The 1/Z term shrinks alpha below AdaBoost's for the same weighted error.
        assert alpha < 0.5 * np.log((1 - eps) / eps)


def test_exact_alpha_is_the_vlog_mode(noisy_linear):
    X, y = noisy_linear
    clf = VIBoostClassifier(5, preset="paper", alpha="exact", fixed_vi_iter=1).fit(X, y)
    # Round 1 with phi = 1 and H = 0: alpha minimises
    # mu0 softplus(c) + mu0 softplus(-c) + sum_n softplus(-y_n c h_n).
    h = clf.estimators_[0].predict(X)

    def neg_log_density(c):
        return np.logaddexp(0, c) + np.logaddexp(0, -c) + np.logaddexp(0, -y * c * h).sum()

    res = optimize.minimize_scalar(
        neg_log_density, bounds=(-20, 20), method="bounded", options={"xatol": 1e-12}
    )
    assert clf.alphas_[0] == pytest.approx(res.x, abs=1e-7)


def test_exact_alpha_ranks_stumps_by_the_newton_step(noisy_linear):
    X, y = noisy_linear
    clf = VIBoostClassifier(3, preset="paper", alpha="exact", noise_model=False).fit(X, y)
    H = clf.alphas_[0] * clf.estimators_[0].predict(X)
    h_chosen = clf.estimators_[1].predict(X)

    # Newton step from c = 0 on g(c) = softplus(c) + softplus(-c) + sum softplus(-y (H + c h)).
    def newton_step(h):
        grad = -(y * h * expit(-y * H)).sum()
        hess = 0.5 + (expit(y * H) * expit(-y * H)).sum()
        return -grad / hess

    best = max(abs(newton_step(_stump_output(X, *s))) for s in _all_stumps(X))
    assert abs(newton_step(h_chosen)) == pytest.approx(best, rel=1e-12)
    assert clf.alphas_[1] > 0.1  # the exact step along the chosen stump is not stalled at zero


# ---------------------------------------------------------------------------- generative model
def draw_step_data(theta, noise_grade, rng):
    """Section 6's step data by the process of section 4: F = +-inf, w ~ Bern(theta)."""
    x = np.arange(-99, 100, 2, dtype=float)
    true = np.sign(x)
    clean = rng.random(x.size) < theta
    noisy = np.where(rng.random(x.size) < expit(noise_grade), 1.0, -1.0)
    return x[:, None], np.where(clean, true, noisy)


def _mean_statistics(theta, noise_grade, seeds=6):
    snr, grade = [], []
    for seed in range(seeds):
        X, y = draw_step_data(theta, noise_grade, np.random.default_rng(seed))
        clf = VIBoostClassifier(50, preset="paper").fit(X, y)
        snr.append(clf.snr_)
        grade.append(clf.noise_grade_)
    return np.mean(snr), np.mean(grade)


def test_snr_rises_with_theta():
    snrs = [_mean_statistics(theta, np.log(3))[0] for theta in (0.1, 0.5, 0.9)]
    assert snrs[0] < snrs[1] < snrs[2]


def test_noise_grade_follows_xi():
    grades = [_mean_statistics(0.2, xi)[1] for xi in (-2.0, 0.0, 2.0)]
    assert grades[0] < grades[1] < grades[2]
    assert grades[0] < 0 < grades[2]


# ---------------------------------------------------------------------------- fast fit
def _integer_data(n, seed=0):
    """Features with few distinct values (integers, some NaN), labels with 10% flipped."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 40, size=(n, 5)).astype(float)
    X[:, 3] = rng.integers(0, 255, size=n)  # exactly at the limit of 255 distinct values
    X[rng.random(n) < 0.05, 2] = np.nan
    score = (X[:, 0] - 20) / 10 - (X[:, 1] - 20) / 15 + (X[:, 3] - 127) / 100
    y = (score + 0.5 * rng.normal(size=n) > 0).astype(int)
    y[rng.random(n) < 0.1] ^= 1
    return X, y


@pytest.mark.parametrize(
    ("n", "kwargs"),
    [(600, {}), (600, {"alpha": "exact"}), (600, {"noise_model": False}), (30_000, {})],
)
def test_binned_search_fits_like_the_exact_search(n, kwargs):
    """With at most max_bins distinct values per feature the binned search picks the stumps of
    the exhaustive search, so the whole fit is the same."""
    X, y = _integer_data(n)
    weights = np.random.default_rng(1).integers(0, 3, size=n).astype(float)
    exact = VIBoostClassifier(15, preset="paper", max_bins=None, **kwargs).fit(
        X, y, sample_weight=weights
    )
    binned = VIBoostClassifier(15, preset="paper", max_bins=255, **kwargs).fit(
        X, y, sample_weight=weights
    )
    assert binned.estimators_ == exact.estimators_
    np.testing.assert_allclose(binned.alphas_, exact.alphas_, rtol=1e-12)
    np.testing.assert_allclose(binned.clean_proba_, exact.clean_proba_, rtol=1e-12)
    np.testing.assert_allclose(binned.snr_path_, exact.snr_path_, rtol=1e-12)


@pytest.mark.parametrize("n", [3_000, 40_000])
def test_fit_is_identical_across_thread_counts(n, monkeypatch):
    """Bit-identical for any n_jobs, on rows (3,000) and on pseudo-rows (40,000)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, 6))
    X[rng.random(n) < 0.02, 4] = np.nan
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n) > 0).astype(int)
    y[rng.random(n) < 0.1] ^= 1
    # No work threshold: n_jobs=-1 really runs the kernels on every thread numba has.
    monkeypatch.setattr(viboost_parallel, "WORK_THRESHOLD", 0)
    fits = [
        VIBoostClassifier(20, preset="paper", random_state=0, n_jobs=jobs).fit(X, y)
        for jobs in (1, -1)
    ]
    one, many = fits
    assert one.estimators_ == many.estimators_
    np.testing.assert_array_equal(one.alphas_, many.alphas_)
    np.testing.assert_array_equal(one.clean_proba_, many.clean_proba_)
    np.testing.assert_array_equal(one.snr_path_, many.snr_path_)
    for a, b in zip(one.elbo_, many.elbo_, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one.decision_function(X), many.decision_function(X))


def test_quantile_bins_fit_well_with_thresholds_in_data_units():
    rng = np.random.default_rng(3)
    n = 5_000
    X = rng.normal(size=(n, 3)) * [1.0, 1e6, 1e-6]
    y = (X[:, 0] + X[:, 1] / 1e6 - X[:, 2] / 1e-6 > 0).astype(int)
    binned = VIBoostClassifier(40, preset="paper", max_bins=32, random_state=0).fit(X, y)
    exact = VIBoostClassifier(40, preset="paper", max_bins=None).fit(X, y)
    assert binned.score(X, y) > exact.score(X, y) - 0.02
    for stump in binned.estimators_:
        scale = [1.0, 1e6, 1e-6][stump.feature]
        assert np.isneginf(stump.threshold) or abs(stump.threshold) < 5 * scale
    # Predicting from the thresholds on raw X reproduces the training margins of the fit.
    margin = np.zeros(n)
    for stump, alpha in zip(binned.estimators_, binned.alphas_, strict=True):
        margin += alpha * stump.predict(X)
    np.testing.assert_array_equal(binned.decision_function(X), margin)


@pytest.mark.parametrize("kwargs", [{}, {"fixed_vi_iter": 2}, {"alpha": "exact"}])
def test_fit_on_pseudo_rows_matches_the_fit_on_rows(monkeypatch, kwargs):
    rng = np.random.default_rng(9)
    n = 40_000
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    y[rng.random(n) < 0.1] ^= 1
    fits = {}
    for threshold in (10**9, 1_000):
        monkeypatch.setattr(viboost.variational.compression, "COMPRESS_ABOVE", threshold)
        fits[threshold] = VIBoostClassifier(12, preset="paper", **kwargs).fit(X, y)
    rows, pseudo = fits[10**9], fits[1_000]
    assert rows.estimators_ == pseudo.estimators_
    np.testing.assert_allclose(pseudo.alphas_, rows.alphas_, rtol=1e-7)
    np.testing.assert_allclose(pseudo.snr_path_, rows.snr_path_, rtol=1e-7)
    np.testing.assert_allclose(pseudo.noise_grade_path_, rows.noise_grade_path_, rtol=1e-7)
    np.testing.assert_allclose(pseudo.clean_proba_, rows.clean_proba_, rtol=1e-7)
    np.testing.assert_array_equal(pseudo.n_vi_iter_, rows.n_vi_iter_)
    for a, b in zip(pseudo.elbo_, rows.elbo_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9)


# --------------------------------------------------------- the noise-robust preset (issue 12)
def _noisy(n=600, rate=0.2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    flipped = rng.random(n) < rate
    return X, np.where(flipped, 1 - y, y), flipped, y


@pytest.fixture(scope="module")
def robust_fit():
    # A linear boundary, where stumps are the right base learner (the robust preset with
    # stumps, the default before trees; tests/boosting/test_trees.py checks the trees' noise fit).
    X, y, flipped, truth = _noisy()
    stumps = {"max_leaf_nodes": 2, "leaf_weights": "tied", "min_samples_leaf": 1}
    return X, y, flipped, VIBoostClassifier(random_state=0, **stumps).fit(X, y)


def test_robust_fit_chooses_its_rounds_by_the_cross_fitted_likelihood(robust_fit):
    _, _, _, clf = robust_fit
    assert clf.noise_calibration_ is not None
    chosen = list(clf.cv_rounds_).index(clf.cv_best_rounds_)
    # The best check wins, up to the tolerance that stops fits on separable data.
    assert clf.cv_log_likelihood_[chosen] >= clf.cv_log_likelihood_.max() - 1e-5 * 600
    assert np.all(np.diff(clf.cv_rounds_) == 10)
    # The refit fits all rows, 5 / 4 of a fold booster's weight: 1.25 times the count.
    assert len(clf.estimators_) == round(1.25 * clf.cv_best_rounds_) < 1000
    assert clf.cv == "auto" and clf.cv_n_splits_ == 5  # cv="auto" on few rows: 5 folds


def test_cv_takes_an_int_auto_or_a_splitter_and_names_anything_else():
    X, y = np.random.default_rng(0).normal(size=(40, 2)), np.tile([0, 1], 20)
    with pytest.raises(ValueError, match="'cv' parameter"):
        VIBoostClassifier(cv="five").fit(X, y)
    clf = VIBoostClassifier(cv=3, n_estimators=10, random_state=0).fit(X, y)
    assert clf.cv_n_splits_ == 3
    paper = VIBoostClassifier(preset="paper", n_estimators=3).fit(X, y)
    assert paper.cv_n_splits_ == 0  # not cross-fitted


def test_robust_fit_estimates_the_flip_rate_with_an_interval(robust_fit):
    _, y, flipped, clf = robust_fit
    assert abs(clf.noise_rate_ - flipped.mean()) < 0.04
    lo, hi = clf.noise_rate_interval_
    assert lo < clf.noise_rate_ < hi and lo <= flipped.mean() <= hi
    # The rate is the mean of the per-row probabilities that a label is wrong.
    assert clf.noise_rate_ == pytest.approx(clf.mislabel_proba_.mean(), rel=1e-12)
    truth = np.where(flipped, 1 - y, y)
    for k in (0, 1):
        actual = flipped[truth == k].mean()
        assert abs(clf.flip_rates_[k] - actual) < 0.06
    assert np.all(clf.flip_rates_interval_[:, 0] < clf.flip_rates_interval_[:, 1])


def test_robust_fit_ranks_flipped_rows(robust_fit):
    from sklearn.metrics import roc_auc_score

    _, _, flipped, clf = robust_fit
    assert roc_auc_score(flipped, clf.mislabel_proba_) > 0.9
    assert roc_auc_score(flipped, 1 - clf.clean_proba_) > 0.9


def test_robust_noise_statistics_agree_with_the_calibration(robust_fit):
    """S.4.4 and S.4.2 applied to the calibrated phi give back about its theta and xi: without
    the intercept c(theta, xi) they would be its stationarity conditions exactly
    (eta_1 / (eta_1 + eta_2) = theta, log(omega_2 / omega_1) = xi); c adds a small term."""
    _, y, _, clf = robust_fit
    cal = clf.noise_calibration_
    signs, margin = np.where(y == 1, 1.0, -1.0), clf.cv_decision_function_
    # At the noise model's mode, S.4.4 on its own phi gives back its theta ...
    mode_phi = cal.mode.clean_proba(signs, margin)
    mode_eta, _ = cal.mode.label_posteriors(signs, np.ones(y.size), mode_phi, ModelPriors())
    assert mode_eta[0] / mode_eta.sum() == pytest.approx(cal.theta, abs=2e-3)
    # ... and the reported eta_ is S.4.4 on the reported phi, the posterior average (with
    # its mass at no noise, a label is at least as likely right as at the mode, on average).
    assert clf.eta_[0] / clf.eta_.sum() == pytest.approx(clf.clean_proba_.mean(), abs=2e-3)
    assert clf.clean_proba_.mean() >= mode_phi.mean() - 1e-3
    # xi of S.4.2 on the reported phi (averaged over the bagged posterior) is within the
    # posterior's own spread of xi, not at the full posterior's mode.
    grades = np.array([draw.noise_grade for draw in cal.draws])
    low, high = np.quantile(grades, [0.05, 0.95])
    assert low <= clf.noise_grade_ <= high and high - low < 1.0
    assert clf.snr_ == pytest.approx(clf.eta_[0] / clf.eta_[1], rel=1e-12)
    assert np.all(np.isnan(clf.snr_path_))


def test_robust_fit_beats_the_paper_preset_on_flipped_labels(robust_fit):
    X, y, _, clf = robust_fit
    X_test, _, _, truth = _noisy(n=4000, seed=1)
    paper = VIBoostClassifier(preset="paper").fit(X, y)
    assert clf.score(X_test, truth) > paper.score(X_test, truth) + 0.02
    assert np.isnan(paper.noise_rate_interval_).all() and paper.noise_calibration_ is None


def test_robust_fit_is_reproducible_for_any_n_jobs():
    X, y, _, _ = _noisy(n=300)
    fits = [VIBoostClassifier(random_state=3, n_jobs=jobs).fit(X, y) for jobs in (1, 2, 1)]
    for other in fits[1:]:
        assert other.estimators_ == fits[0].estimators_
        assert other.alphas_.tobytes() == fits[0].alphas_.tobytes()
        assert other.mislabel_proba_.tobytes() == fits[0].mislabel_proba_.tobytes()
        assert other.noise_rate_interval_.tobytes() == fits[0].noise_rate_interval_.tobytes()


def test_learning_rate_shrinks_each_weight():
    X, y, _, _ = _noisy(n=200)
    full = VIBoostClassifier(1, preset="paper").fit(X, y)
    half = VIBoostClassifier(1, preset="paper", learning_rate=0.5).fit(X, y)
    assert half.alphas_[0] == 0.5 * full.alphas_[0]
    assert half.estimators_ == full.estimators_


def test_cv_accepts_a_splitter_or_explicit_splits():
    from sklearn.model_selection import KFold

    X, y, _, _ = _noisy(n=200)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    by_list = VIBoostClassifier(cv=splits, random_state=0).fit(X, y)
    by_splitter = VIBoostClassifier(cv=KFold(4, shuffle=True, random_state=0)).fit(X, y)
    assert by_list.estimators_ == by_splitter.estimators_
    assert by_list.noise_rate_ == by_splitter.noise_rate_
    with pytest.raises(ValueError, match="every class"):
        one_class = [(np.flatnonzero(y == 0), np.flatnonzero(y == 1))]
        VIBoostClassifier(cv=one_class).fit(X, y)


def test_cross_fitting_rejects_warm_start():
    X, y, _, _ = _noisy(n=100)
    with pytest.raises(ValueError, match="warm_start"):
        VIBoostClassifier(warm_start=True).fit(X, y)


def test_cross_fitting_falls_back_in_sample_when_a_class_is_too_small():
    X = np.arange(12, dtype=float)[:, None]
    y = np.array([0] * 11 + [1])
    with pytest.warns(UserWarning, match="in-sample"):
        clf = VIBoostClassifier(n_estimators=5, random_state=0).fit(X, y)
    assert clf.noise_calibration_ is None and np.isnan(clf.noise_rate_interval_).all()


def test_rows_of_zero_weight_get_an_out_of_sample_margin():
    X, y, _, _ = _noisy(n=300)
    weight = np.ones(300)
    weight[:20] = 0.0
    clf = VIBoostClassifier(random_state=0).fit(X, y, sample_weight=weight)
    np.testing.assert_allclose(
        clf.cv_decision_function_[:20], clf.decision_function(X[:20]), rtol=1e-12
    )
    assert np.all(np.isfinite(clf.mislabel_proba_))


def test_cross_fitted_core_model_has_no_noise_statistics():
    X, y, _, _ = _noisy(n=200)
    clf = VIBoostClassifier(noise_model=False, random_state=0).fit(X, y)
    assert clf.noise_calibration_ is None
    assert np.isnan(clf.noise_rate_) and np.isnan(clf.snr_)
    assert np.all(clf.clean_proba_ == 1.0) and len(clf.cv_rounds_) > 0


def test_robust_fit_with_huge_weights_stays_finite():
    X = np.arange(40, dtype=float)[:, None]
    y = (X[:, 0] >= 20).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = VIBoostClassifier(weight_prior=1e-12, random_state=0)
        clf.fit(X, y, sample_weight=np.full(40, 1e300))
    assert np.all(np.isfinite(clf.decision_function(X)))
    assert np.isfinite(clf.noise_rate_) and np.all(np.isfinite(clf.noise_rate_interval_))


def test_a_model_pickled_before_the_presets_loads_as_the_paper_preset():
    X, y, _, _ = _noisy(n=100)
    clf = VIBoostClassifier(5, preset="paper").fit(X, y)
    state = clf.__getstate__()
    for name in ("preset", "learning_rate", "noise_fit", "cv", "n_iter_no_change"):
        del state[name]
    old = VIBoostClassifier.__new__(VIBoostClassifier)
    old.__setstate__(state)
    assert old.get_params()["preset"] == "paper"
    np.testing.assert_array_equal(old.decision_function(X), clf.decision_function(X))


def test_two_classes_weight_their_rows_by_default_and_drop_on_request():
    """mislabeled="weight" (default): every row counted s phi, one pass; "drop" leaves the
    rows of phi <= 1/2 out of the refit after a second search, with the same noise
    statistics."""
    X, y, flipped, _ = _noisy(n=400)
    s = np.random.default_rng(0).integers(1, 3, y.size).astype(float)
    default = VIBoostClassifier(random_state=0).fit(X, y, sample_weight=s)
    weighted = VIBoostClassifier(random_state=0, mislabeled="weight").fit(X, y, sample_weight=s)
    _same_fit(default, weighted, rtol=0)
    assert default.cv_n_passes_ == 1
    # Each row counted s phi_n, phi_n the noise model's at the peak of the posterior of theta
    # (the reported clean_proba_ is the posterior average).
    signs = np.where(y == 1, 1.0, -1.0)
    refit_phi = default.noise_calibration_.refit_clean_proba(signs, default.cv_decision_function_)
    np.testing.assert_array_equal(default.refit_weight_, s * refit_phi)
    dropped = VIBoostClassifier(random_state=0, mislabeled="drop").fit(X, y, sample_weight=s)
    assert dropped.cv_n_passes_ == 2
    np.testing.assert_array_equal(dropped.mislabel_proba_, default.mislabel_proba_)
    assert dropped.noise_rate_ == default.noise_rate_
    kept = refit_phi > 0.5
    np.testing.assert_array_equal(dropped.refit_weight_, np.where(kept, s, 0.0))
    assert np.mean(flipped[~kept]) > 0.5
    paper = VIBoostClassifier(5, preset="paper", mislabeled="drop").fit(X, y)
    assert paper.refit_weight_ is None and paper.cv_n_passes_ == 0  # in-sample: no refit
    with pytest.raises(ValueError, match="mislabeled"):
        VIBoostClassifier(mislabeled="remove").fit(X, y)


def test_a_model_pickled_before_mislabeled_loads_as_weighting_its_rows():
    X, y, _, _ = _noisy(n=100)
    clf = VIBoostClassifier(20, random_state=0).fit(X, y)
    state = clf.__getstate__()
    del state["mislabeled"]
    old = VIBoostClassifier.__new__(VIBoostClassifier)
    old.__setstate__(state)
    assert old.get_params()["mislabeled"] == "weight"
    np.testing.assert_array_equal(old.decision_function(X), clf.decision_function(X))


def test_a_verbose_fit_compiles_up_front_once_per_process(monkeypatch, capsys):
    """A verbose cross-fitted fit, of any size, first calls the up-front compile (which fits
    the default on synthetic rows unless the kernels are cached), once per process for each
    (K > 2, threads > 1); a quiet fit does not, and a second one finds it done; the fitted
    model is the one a fit without it gives."""
    monkeypatch.setattr(viboost.estimator, "_COMPILED_UP_FRONT", set())
    # As after an install: the up-front fit runs (it is skipped when the kernels are cached).
    monkeypatch.setattr(viboost_parallel.ThreadedKernel, "cached", lambda self, parallel: False)
    calls = []
    fits = []
    original = viboost.estimator._compile_up_front
    original_fit = VIBoostClassifier._fit

    def spy(multiclass, threads, verbose):
        calls.append((multiclass, threads))
        original(multiclass, threads, verbose)

    def spy_fit(self, X, y, sample_weight=None, threads=None):
        fits.append(X.shape[0])
        return original_fit(self, X, y, sample_weight, threads)

    monkeypatch.setattr(viboost.estimator, "_compile_up_front", spy)
    monkeypatch.setattr(VIBoostClassifier, "_fit", spy_fit)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + rng.logistic(size=400) > 0).astype(int)
    kwargs = dict(n_estimators=20, random_state=0, n_jobs=1)
    quiet = VIBoostClassifier(**kwargs).fit(X, y)
    assert calls == []
    fits.clear()
    loud = VIBoostClassifier(**kwargs, verbose=1).fit(X, y)  # 1,200 cells: small, compiled too
    assert fits == [400, viboost.estimator._UP_FRONT_ROWS[False]]  # the up-front fit first
    VIBoostClassifier(**kwargs, verbose=1).fit(X, y)
    assert calls == [(False, 1), (False, 1)]
    assert viboost.estimator._COMPILED_UP_FRONT == {(False, False)}
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    VIBoostClassifier(**kwargs, verbose=1).fit(X, y3)
    assert viboost.estimator._COMPILED_UP_FRONT == {(False, False), (True, False)}
    np.testing.assert_array_equal(quiet.decision_function(X), loud.decision_function(X))
    np.testing.assert_array_equal(quiet.mislabel_proba_, loud.mislabel_proba_)
    # The warm-up's 20 rounds end at its cap; its warning stays inside it.
    viboost.estimator._COMPILED_UP_FRONT.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        VIBoostClassifier(random_state=0, n_jobs=1, verbose=1).fit(X, y)
    assert calls[-1] == (False, 1)
