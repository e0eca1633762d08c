"""VIBoostClassifier as a scikit-learn estimator: API, inputs, errors, persistence."""

from __future__ import annotations

import pickle
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.multiclass import OneVsRestClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

import viboost.estimator
from viboost import VIBoostClassifier, ViboostVersionWarning
from viboost.stumps import DecisionStump


@parametrize_with_checks([VIBoostClassifier(n_estimators=10)])
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
    clf = VIBoostClassifier(12).fit(X, y)
    assert list(clf.classes_) == ["no", "yes"]
    assert len(clf.estimators_) == 12 and clf.alphas_.shape == (12,)
    assert all(isinstance(s, DecisionStump) for s in clf.estimators_)
    assert clf.clean_proba_.shape == (150,)
    assert np.all((clf.clean_proba_ > 0) & (clf.clean_proba_ <= 1))
    assert clf.snr_ == pytest.approx(clf.eta_[0] / clf.eta_[1])
    assert clf.noise_grade_ == pytest.approx(np.log(clf.omega_[1] / clf.omega_[0]))
    # eta counts the expected clean and noisy labels on top of the prior (S.3.4).
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
    clf = VIBoostClassifier(8, tol=1e-6, max_vi_iter=4).fit(X, y)
    for trace, n_iter in zip(clf.elbo_, clf.n_vi_iter_, strict=True):
        gains = np.diff(trace)
        threshold = 1e-6 * np.abs(trace[:-1])
        assert np.all(gains[:-1] > threshold[:-1])  # it only went on while the ELBO rose enough
        assert n_iter == 4 or gains[-1] <= threshold[-1]


def test_paper_modifications(data):
    X, y = data
    fixed = VIBoostClassifier(6, fixed_vi_iter=3).fit(X, y)
    assert np.all(fixed.n_vi_iter_ == 3) and all(t.size == 0 for t in fixed.elbo_)
    once = VIBoostClassifier(1, fixed_vi_iter=3, update_alpha_once=True).fit(X, y)
    first = VIBoostClassifier(1, fixed_vi_iter=1).fit(X, y)
    assert once.alphas_[0] == first.alphas_[0]
    again = VIBoostClassifier(1, fixed_vi_iter=3).fit(X, y)
    assert again.alphas_[0] != first.alphas_[0]  # without (b), alpha moves with phi


def test_core_model_has_no_noise_statistics(data):
    X, y = data
    clf = VIBoostClassifier(5, noise_model=False, init_clean_proba=0.5).fit(X, y)
    assert np.isnan(clf.snr_) and np.isnan(clf.noise_grade_)
    np.testing.assert_array_equal(clf.clean_proba_, 1.0)
    assert all(t.shape == (1,) for t in clf.elbo_) and np.all(clf.n_vi_iter_ == 0)


def test_predictions_and_staged(data):
    X, y = data
    clf = VIBoostClassifier(10).fit(X, y)
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
    weighted = VIBoostClassifier(10).fit(X, y, sample_weight=weights)
    rows = np.repeat(np.arange(len(y)), weights)
    repeated = VIBoostClassifier(10).fit(X[rows], y[rows])
    _same_fit(weighted, repeated, rtol=1e-8)
    np.testing.assert_allclose(weighted.clean_proba_[rows], repeated.clean_proba_, rtol=1e-8)
    for a, b in zip(weighted.elbo_, repeated.elbo_, strict=True):
        np.testing.assert_allclose(a[-1], b[-1], rtol=1e-8)


def test_warm_start_continues_the_same_run(data):
    X, y = data
    clf = VIBoostClassifier(6, warm_start=True).fit(X, y)
    clf.set_params(n_estimators=14).fit(X, y)
    once = VIBoostClassifier(14).fit(X, y)
    _same_fit(clf, once, rtol=0)
    np.testing.assert_array_equal(clf.clean_proba_, once.clean_proba_)
    with pytest.raises(ValueError, match="same training data"):
        clf.set_params(n_estimators=16).fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="at least"):
        clf.set_params(n_estimators=3).fit(X, y)


def test_pandas_input_keeps_feature_names(data):
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = VIBoostClassifier(8).fit(frame, pd.Series(y))
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])
    np.testing.assert_allclose(
        clf.decision_function(frame), VIBoostClassifier(8).fit(X, y).decision_function(X)
    )
    with pytest.warns(UserWarning, match="feature names"):
        clf.predict(X)


def test_missing_values_go_to_the_better_side():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 2))
    y = np.where(X[:, 0] > 0, 1, 0)
    X[y == 1, 1] = np.nan  # missingness of feature 1 alone tells the class
    X[:, 0] = rng.normal(size=200)  # feature 0 is now noise
    clf = VIBoostClassifier(5).fit(X, y)
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
        clf = VIBoostClassifier(10, weight_prior=1e-12, noise_model=noise_model)
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
        (np.arange(6.0)[:, None], [0, 1, 2, 0, 1, 2], {}, "OneVsRestClassifier"),
        (np.arange(4.0)[:, None], [0, 1, 0, 1], {"sample_weight": [1, -1, 1, 1]}, "Negative val"),
        (np.arange(4.0)[:, None], [0, 1, 0, 1], {"sample_weight": [0, 0, 0, 0]}, "non-zero"),
        (np.arange(4.0)[:, None], [0, 1, 0, 1], {"sample_weight": [1, 0, 1, 0]}, "both classes"),
        (np.arange(4.0)[:, None], [0, 1, 0], {}, "inconsistent numbers of samples"),
        (np.arange(4.0)[:, None], [0.5, 1.5, 0.2, 0.1], {}, "Unknown label type"),
    ],
)
def test_bad_input_is_named(X, y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        VIBoostClassifier(3).fit(X, np.asarray(y), **kwargs)


def test_non_numeric_columns_are_named():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "city": ["a", "b", "a", "b"]})
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['city'\]"):
        VIBoostClassifier(3).fit(frame, [0, 1, 0, 1])


def test_wrong_number_of_features_at_predict(data):
    X, y = data
    clf = VIBoostClassifier(3).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])


def test_multiclass_through_one_vs_rest():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    model = OneVsRestClassifier(VIBoostClassifier(15)).fit(X, y)
    assert model.score(X, y) > 0.9


def test_pickle_and_joblib_round_trips(data, tmp_path):
    X, y = data
    clf = VIBoostClassifier(7).fit(X, y)
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    joblib.dump(clf, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib")
    np.testing.assert_array_equal(loaded.decision_function(X), clf.decision_function(X))
    _same_fit(loaded, clf, rtol=0)


def test_loading_another_version_warns(data, monkeypatch):
    X, y = data
    clf = VIBoostClassifier(3).fit(X, y)
    monkeypatch.setattr(viboost.estimator, "__version__", "0.0.1")
    blob = pickle.dumps(clf)
    monkeypatch.undo()
    with pytest.warns(ViboostVersionWarning, match="saved by viboost 0.0.1"):
        loaded = pickle.loads(blob)
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(pickle.dumps(clf))  # the same version loads silently
