"""K classes: the softmax coupling (viboost.boosting.softmax) and the K-class fit of
VIBoostClassifier."""

import mpmath
import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax
from sklearn.metrics import roc_auc_score

from viboost import VIBoostClassifier
from viboost._utils.parallel import numba_threads
from viboost.boosting.softmax import _coupled_round, class_labels, other_class_margins


def _other_class_margin_mp(row, k):
    others = mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for j, v in enumerate(row) if j != k)
    return float(mpmath.mpf(row[k]) - mpmath.log(others))


@pytest.mark.parametrize(
    "f",
    [
        np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5], [3.0, 3.0, -1.0]]),
        np.array([[800.0, 0.0, -800.0], [-1e4, 1e4, 0.0], [40.0, 40.0 + 1e-12, -5.0]]),
        # the top class's sum on either side of the 600 gap where its reference changes
        np.array([[0.0, -599.0, -650.0], [0.0, -601.0, -601.5], [5.0, -595.0, -2000.0]]),
        np.random.default_rng(7).normal(scale=20.0, size=(40, 5)),
    ],
)
def test_other_class_margins_match_mpmath(f):
    g = other_class_margins(f)
    n_classes = f.shape[1]
    expected = np.array([[_other_class_margin_mp(row, k) for k in range(n_classes)] for row in f])
    np.testing.assert_allclose(g, expected, rtol=1e-13, atol=1e-13)


def test_sigmoid_of_the_other_class_margin_is_the_softmax():
    f = np.random.default_rng(0).normal(scale=3.0, size=(100, 5))
    g = other_class_margins(f)
    np.testing.assert_allclose(1 / (1 + np.exp(-g)), softmax(f, axis=1), rtol=1e-12)


def test_coupled_round_is_the_steps_one_after_the_other():
    # A group's coupling after a round (F += H - before, G of the new F, each H reset to its
    # G) in one compiled pass: bit for bit the steps done one by one, in place, whatever the
    # chunks and threads; the largest |G_k| per class, NaN where a G_k is NaN.
    rng = np.random.default_rng(4)
    f = rng.normal(scale=3.0, size=(1000, 4))
    before = other_class_margins(f)
    moved = [before[:, k] + rng.normal(scale=0.3, size=1000) for k in range(4)]
    want_f = f.copy()
    for k in range(4):
        want_f[:, k] += moved[k] - before[:, k]
    want_g = other_class_margins(want_f)
    for n_chunks in (1, 3, 7):
        for threads in (1, 2):
            got_f, got_g, margins = f.copy(), before.copy(), np.array(moved)
            with numba_threads(threads):
                largest = _coupled_round(got_f, got_g, margins, got_g, n_chunks)
            assert np.array_equal(got_f, want_f) and np.array_equal(got_g, want_g)
            assert all(np.array_equal(margins[k], want_g[:, k]) for k in range(4))
            np.testing.assert_array_equal(largest, np.abs(want_g).max(axis=0))
    moved[2][5] = np.nan
    margins = np.array(moved)
    largest = _coupled_round.serial(f.copy(), before.copy(), margins, np.empty_like(f), 3)
    assert np.all(np.isnan(largest))  # row 5's F, so all its G, are NaN
    assert np.isnan(margins[0][5]) and not np.isnan(np.delete(margins[0], 5)).any()


def test_class_labels():
    labels = class_labels(np.array([0, 2, 1]), 3)
    np.testing.assert_array_equal(labels[2], [-1.0, 1.0, -1.0])


def _three_class_data(n=900, flip=0.2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    true = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.6, 0.6])
    flipped = rng.random(n) < flip
    y = true.copy()
    y[flipped] = (true[flipped] + rng.integers(1, 3, flipped.sum())) % 3
    return X, y, true, flipped


@pytest.fixture(scope="module")
def fitted():
    X, y, true, flipped = _three_class_data()
    names = np.array(["cat", "dog", "emu"])
    return VIBoostClassifier(random_state=0).fit(X, names[y]), X, y, true, flipped, names


def test_predictions_have_one_column_per_class(fitted):
    clf, X, _, true, _, names = fitted
    np.testing.assert_array_equal(clf.classes_, names)
    proba = clf.predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), names[np.argmax(proba, axis=1)])
    assert np.mean(clf.predict(X) == names[true]) > 0.85
    margin = clf.decision_function(X)
    assert margin.shape == (X.shape[0], 3)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba, rtol=1e-12)
    staged = list(clf.staged_predict_proba(X))
    assert len(staged) == len(clf.estimators_)
    np.testing.assert_allclose(staged[-1], proba, rtol=1e-10)
    np.testing.assert_array_equal(list(clf.staged_predict(X))[-1], clf.predict(X))


def test_noise_statistics(fitted):
    clf, _, y, true, flipped, _ = fitted
    n = y.size
    assert clf.mislabel_proba_.shape == (n,)
    assert roc_auc_score(flipped, clf.mislabel_proba_) > 0.85
    lo, hi = clf.noise_rate_interval_
    assert lo <= clf.noise_rate_ <= hi
    assert abs(clf.noise_rate_ - flipped.mean()) < 0.05
    assert clf.noise_rate_ == pytest.approx(np.mean(clf.mislabel_proba_))
    assert clf.flip_rates_.shape == (3,) and clf.flip_rates_interval_.shape == (3, 2)
    np.testing.assert_allclose(clf.true_class_proba_.sum(axis=1), 1.0)
    np.testing.assert_allclose(
        clf.mislabel_proba_, 1 - clf.true_class_proba_[np.arange(n), y], atol=1e-12
    )
    np.testing.assert_allclose(clf.label_joint_.sum(), 1.0)
    np.testing.assert_allclose(clf.noise_matrix_.sum(axis=0), 1.0)
    # The true noise matrix of these labels: P(given i | true j).
    truth = np.array([[np.mean(y[true == j] == i) for j in range(3)] for i in range(3)])
    assert np.abs(clf.noise_matrix_ - truth).mean() < 0.03
    assert clf.omega_.shape == (3,) and np.isnan(clf.noise_grade_)


def test_contributions_sum_to_each_class_margin(fitted):
    clf, X, *_ = fitted
    phi = clf.predict_contributions(X[:20])
    assert phi.shape == (20, X.shape[1] + 1, 3)
    np.testing.assert_allclose(phi.sum(axis=1), clf.decision_function(X[:20]), atol=1e-9)
    importances = clf.feature_importances_
    assert importances.shape == (X.shape[1],) and importances.sum() == pytest.approx(1.0)


def test_same_fit_for_any_number_of_threads():
    X, y, *_ = _three_class_data(n=600)
    one = VIBoostClassifier(random_state=1, n_jobs=1).fit(X, y)
    two = VIBoostClassifier(random_state=1, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(one.alphas_, two.alphas_)
    np.testing.assert_array_equal(one.mislabel_proba_, two.mislabel_proba_)
    np.testing.assert_array_equal(one.noise_rate_interval_, two.noise_rate_interval_)


def test_k_classes_drop_the_flagged_rows_from_the_refit_on_request(fitted):
    """mislabeled="weight" (default) refits every row at s phi; "drop" keeps the noise
    statistics of that fit, and leaves the rows of phi <= 1/2 out of the refit, for the count
    of a second search."""
    weighted, X, y, true, flipped, names = fitted
    assert weighted.cv_n_passes_ == 1
    # The refit counts the noise model's phi (at its mode: K classes); the reported phi is
    # the posterior average with no noise, never below it.
    posterior = weighted.noise_calibration_
    refit_phi = posterior.refit_clean_proba(y, weighted.cv_decision_function_)
    np.testing.assert_allclose(weighted.refit_weight_, refit_phi, rtol=1e-12)
    assert 0.0 <= posterior.no_noise_proba <= 1.0
    clf = VIBoostClassifier(random_state=0, mislabeled="drop").fit(X, names[y])
    assert clf.cv_n_passes_ == 2
    for name in ("clean_proba_", "mislabel_proba_", "cv_decision_function_", "noise_matrix_"):
        np.testing.assert_array_equal(getattr(clf, name), getattr(weighted, name), err_msg=name)
    assert clf.noise_rate_ == weighted.noise_rate_
    kept = refit_phi > 0.5
    np.testing.assert_array_equal(clf.refit_weight_, kept.astype(float))
    assert np.mean(flipped[~kept]) > 0.8 and np.mean(flipped[kept]) < 0.05
    # The second search ran longer than the first (the kept labels overfit later).
    assert clf.cv_best_rounds_ > weighted.cv_best_rounds_
    assert np.mean(clf.predict(X) == names[true]) > 0.85


def test_k_classes_average_the_fold_boosters_on_request(fitted):
    """final_model="fold-average": the noise statistics of the refit's fit; the model is the
    average of one ensemble per fold, its learners interleaved round by round."""
    refit, X, y, true, flipped, names = fitted
    clf = VIBoostClassifier(random_state=0, final_model="fold-average").fit(X, names[y])
    for name in ("clean_proba_", "mislabel_proba_", "cv_decision_function_", "refit_weight_"):
        np.testing.assert_array_equal(getattr(clf, name), getattr(refit, name), err_msg=name)
    n_folds = clf.cv_n_splits_
    assert len(clf.estimators_) == n_folds * clf.cv_best_rounds_
    margin = clf.decision_function(X)
    # Each fold's ensemble: every n_folds-th round, weights times n_folds; their mean is F.
    folds = []
    for k in range(n_folds):
        f = np.zeros_like(margin)
        rounds = zip(clf.estimators_[k::n_folds], clf.alphas_[k::n_folds], strict=True)
        for learners, alphas in rounds:
            columns = [a * n_folds * h.predict(X) for h, a in zip(learners, alphas, strict=True)]
            f += np.column_stack(columns)
        folds.append(f)
    np.testing.assert_allclose(margin, np.mean(folds, axis=0), rtol=1e-10, atol=1e-10)
    # The fold ensembles differ (each left out a fold), and the average is a good classifier.
    assert np.abs(folds[0] - folds[1]).max() > 1e-3
    assert np.mean(clf.predict(X) == names[true]) > 0.85
    np.testing.assert_allclose(list(clf.staged_decision_function(X))[-1], margin, rtol=1e-12)
    shap = clf.predict_contributions(X[:20])
    np.testing.assert_allclose(shap.sum(axis=1), margin[:20], rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="final_model"):
        VIBoostClassifier(final_model="bag").fit(X, y)


def test_zero_weights_are_rows_left_out():
    X, y, *_ = _three_class_data(n=600, seed=2)
    weight = np.ones(y.size)
    weight[::7] = 0.0
    kept = weight > 0
    with_zeros = VIBoostClassifier(random_state=3).fit(X, y, sample_weight=weight)
    without = VIBoostClassifier(random_state=3).fit(X[kept], y[kept])
    np.testing.assert_allclose(with_zeros.alphas_, without.alphas_, rtol=1e-12)
    np.testing.assert_allclose(with_zeros.predict_proba(X), without.predict_proba(X), rtol=1e-10)
    np.testing.assert_allclose(
        with_zeros.mislabel_proba_[kept], without.mislabel_proba_, rtol=1e-9, atol=1e-12
    )
    assert with_zeros.noise_rate_ == pytest.approx(without.noise_rate_, rel=1e-9)


def test_integer_and_string_labels_fit_the_same():
    X, y, *_ = _three_class_data(n=450, seed=4)
    by_int = VIBoostClassifier(random_state=0).fit(X, y + 10)
    by_str = VIBoostClassifier(random_state=0).fit(X, pd.Series(np.array(["a", "b", "c"])[y]))
    np.testing.assert_array_equal(by_int.classes_, [10, 11, 12])
    np.testing.assert_array_equal(by_int.predict_proba(X), by_str.predict_proba(X))


def test_bad_multiclass_input_is_named():
    X, y, *_ = _three_class_data(n=300, seed=5)
    with pytest.raises(ValueError, match="Only binary classification"):
        VIBoostClassifier(preset="paper").fit(X, y)
    with pytest.raises(ValueError, match="only one class"):
        VIBoostClassifier().fit(X, np.zeros(y.size, dtype=int))
    weight = (y == 0).astype(float)
    with pytest.raises(ValueError, match="at least 2 classes with positive sample weight"):
        VIBoostClassifier().fit(X, y, sample_weight=weight)


def test_a_class_with_fewer_rows_than_folds_is_fitted_with_unidentified_noise():
    X, y, *_ = _three_class_data(n=300, seed=5)
    lonely = y.copy()
    lonely[0] = 3  # a fourth class with a single row: no fold booster of 5 sees it in 4 folds
    with pytest.warns(UserWarning, match=r"classes at indices \[3\] of classes_"):
        clf = VIBoostClassifier(random_state=0).fit(X, lonely)
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2, 3])
    assert clf.predict_proba(X).shape == (300, 4)
    assert np.isnan(clf.flip_rates_[3]) and np.isnan(clf.flip_rates_interval_[3]).all()
    assert np.isnan(clf.noise_matrix_[:, 3]).all()
    assert np.isnan(clf.noise_matrix_interval_[:, 3]).all()
    assert np.isfinite(clf.flip_rates_[:3]).all() and np.isfinite(clf.noise_matrix_[:, :3]).all()
    assert 0.0 <= clf.noise_rate_ <= 1.0


def test_a_label_unseen_in_training_scores_as_wrong():
    X, y, *_ = _three_class_data(n=300, seed=6)
    clf = VIBoostClassifier(random_state=0).fit(X, y)
    unseen = np.full(y.size, 7)
    assert clf.score(X, unseen) == 0.0  # scikit-learn's behaviour: a prediction never matches


def test_pairwise_noise_picks_the_class_conditional_channel():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 4))
    true = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.6, 0.6])
    moved = rng.random(3000) < 0.25
    y = np.where(moved, (true + 1) % 3, true)  # each class into the next one
    truth = np.array([[np.mean(y[true == j] == i) for j in range(3)] for i in range(3)])
    auto = VIBoostClassifier(random_state=0).fit(X, y)
    paper = VIBoostClassifier(random_state=0, noise_channel="independent").fit(X, y)
    assert auto.noise_channel_ == "class-conditional" and paper.noise_channel_ == "independent"
    error = {m: np.abs(m.noise_matrix_ - truth).mean() for m in (auto, paper)}
    # (0.102 against 0.158: on this fold draw the bagged posterior keeps 0.40 of its mass at
    # no noise (its bags reweight the folds: another draw of them finds the noise, and the
    # bags say the draw matters), which pulls the averaged matrix towards the identity; 0.085
    # with the rows' bags alone, 0.077 before bagging; random_state 1 and 2 give 0.051 and
    # 0.044.)
    assert error[auto] < 0.7 * error[paper]
    assert roc_auc_score(moved, auto.mislabel_proba_) > roc_auc_score(moved, paper.mislabel_proba_)
    lo, hi = auto.noise_rate_interval_
    assert lo <= auto.noise_rate_ <= hi
    forced = VIBoostClassifier(random_state=0, noise_channel="class-conditional").fit(X, y)
    np.testing.assert_array_equal(forced.mislabel_proba_, auto.mislabel_proba_)
