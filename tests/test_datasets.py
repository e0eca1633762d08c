"""Tests for viboost.datasets: bundled data (Spambase, Reuters), synthetic sets, label noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from viboost.datasets import (
    flip_labels,
    flip_labels_class_conditional,
    load_reuters_acq_crude,
    load_spambase,
    make_long_servedio,
    make_step,
)


def test_load_spambase_arrays():
    bunch = load_spambase()
    assert bunch.data.shape == (4601, 57)
    assert bunch.data.dtype == np.float64
    assert bunch.target.shape == (4601,)
    assert bunch.target.dtype.kind == "i"
    assert set(np.unique(bunch.target)) == {0, 1}
    assert int(bunch.target.sum()) == 1813  # 1 = spam
    assert len(bunch.feature_names) == 57
    assert bunch.feature_names[0] == "make"
    assert list(bunch.target_names) == ["nonspam", "spam"]
    assert bunch.frame is None
    assert np.all(bunch.data >= 0)


def test_load_spambase_descr_cites_and_notes_the_slip():
    descr = load_spambase().DESCR
    assert "Hopkins" in descr and "CC BY 4.0" in descr
    assert "6,401" in descr and "4,601" in descr


def test_load_spambase_as_frame():
    bunch = load_spambase(as_frame=True)
    assert isinstance(bunch.data, pd.DataFrame)
    assert isinstance(bunch.target, pd.Series)
    assert bunch.target.name == "spam"
    assert list(bunch.data.columns) == bunch.feature_names
    assert bunch.frame.shape == (4601, 58)
    assert int(bunch.frame["spam"].sum()) == 1813
    X, y = load_spambase()["data"], load_spambase()["target"]
    np.testing.assert_array_equal(bunch.data.to_numpy(), X)
    np.testing.assert_array_equal(bunch.target.to_numpy(), y)


def test_load_spambase_return_X_y():
    X, y = load_spambase(return_X_y=True)
    assert isinstance(X, np.ndarray) and X.shape == (4601, 57)
    assert isinstance(y, np.ndarray) and y.shape == (4601,)
    X, y = load_spambase(return_X_y=True, as_frame=True)
    assert isinstance(X, pd.DataFrame) and isinstance(y, pd.Series)


@pytest.mark.parametrize(
    ("n", "rate"), [(10, 0.3), (460, 0.2), (7, 0.5), (5, 0.0), (5, 1.0), (101, 0.125)]
)
def test_flip_labels_exact_count(n, rate):
    y = np.arange(n) % 2
    y_noisy, flipped = flip_labels(y, rate, random_state=0)
    assert flipped.dtype == bool and flipped.shape == (n,)
    assert int(flipped.sum()) == round(rate * n)
    np.testing.assert_array_equal(y_noisy != y, flipped)
    np.testing.assert_array_equal(y_noisy[flipped], 1 - y[flipped])
    assert y_noisy.dtype == y.dtype


def test_flip_labels_does_not_modify_input():
    y = np.array([0, 1] * 10)
    original = y.copy()
    flip_labels(y, 0.5, random_state=0)
    np.testing.assert_array_equal(y, original)


def test_flip_labels_reproducible():
    y = np.array([0, 1] * 50)
    a = flip_labels(y, 0.2, random_state=42)
    b = flip_labels(y, 0.2, random_state=42)
    c = flip_labels(y, 0.2, random_state=43)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])
    g1 = flip_labels(y, 0.2, random_state=np.random.default_rng(5))
    g2 = flip_labels(y, 0.2, random_state=np.random.default_rng(5))
    np.testing.assert_array_equal(g1[1], g2[1])


def test_flip_labels_any_two_values():
    y = np.array(["ham", "spam", "ham", "ham", "spam", "spam"])
    y_noisy, flipped = flip_labels(y, 0.5, random_state=1)
    assert int(flipped.sum()) == 3
    assert set(y_noisy) <= {"ham", "spam"}
    assert np.all(y_noisy[flipped] != y[flipped])
    y_pm = np.array([-1, 1, 1, -1, 1])
    y_noisy, flipped = flip_labels(y_pm, 1.0, random_state=0)
    np.testing.assert_array_equal(y_noisy, -y_pm)
    assert flipped.all()


def test_flip_labels_uniform():
    y = np.array([0, 1] * 5)
    counts = np.zeros(10)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        counts += flip_labels(y, 0.3, random_state=rng)[1]
    # each row is flipped with probability 0.3: 600 expected, sd about 20
    assert np.all(np.abs(counts - 600) < 100)


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan"), "0.2", True])
def test_flip_labels_bad_rate(rate):
    with pytest.raises(ValueError, match="rate"):
        flip_labels(np.array([0, 1, 0, 1]), rate)


@pytest.mark.parametrize(
    "y",
    [
        np.array([0, 1, 2, 1]),
        np.array([1, 1, 1]),
        np.array([0.0, np.nan, 1.0]),
        np.array([[0, 1], [1, 0]]),
    ],
)
def test_flip_labels_not_binary(y):
    with pytest.raises(ValueError):
        flip_labels(y, 0.5)


# --- load_reuters_acq_crude -------------------------------------------------------------------

REUTERS_VOCABULARY = 2348  # CountVectorizer defaults, min_df=1


def test_load_reuters_arrays():
    bunch = load_reuters_acq_crude()
    assert bunch.data.shape == (70, REUTERS_VOCABULARY)
    assert isinstance(bunch.data, np.ndarray) and bunch.data.dtype == np.float64
    assert set(np.unique(bunch.data)) == {0.0, 1.0}
    assert bunch.target.shape == (70,) and bunch.target.dtype.kind == "i"
    assert np.bincount(bunch.target).tolist() == [50, 20]  # 0 = acq, 1 = crude
    assert list(bunch.target_names) == ["acq", "crude"]
    assert len(bunch.feature_names) == REUTERS_VOCABULARY
    assert bunch.feature_names == sorted(bunch.feature_names)
    assert len(set(bunch.ids)) == 70 and bunch.ids[0] == "acq/reut-00001.xml"
    assert all(
        i.startswith(bunch.target_names[t]) for i, t in zip(bunch.ids, bunch.target, strict=True)
    )
    assert len(bunch.text) == 70
    assert np.all(bunch.data.sum(axis=1) > 0)  # every story has words
    assert bunch.frame is None
    oil = bunch.feature_names.index("oil")
    assert bunch.data[bunch.target == 1, oil].mean() > bunch.data[bunch.target == 0, oil].mean()


def test_load_reuters_descr_names_the_stand_in():
    descr = load_reuters_acq_crude().DESCR
    for phrase in ("Reuters-21578", "tm", "state", "Gabrilovich", "not publicly", "22,648"):
        assert phrase in descr


def test_load_reuters_as_frame_and_return_X_y():
    bunch = load_reuters_acq_crude(as_frame=True)
    assert isinstance(bunch.data, pd.DataFrame) and isinstance(bunch.target, pd.Series)
    assert bunch.target.name == "topic" and "topic" not in bunch.feature_names
    assert list(bunch.data.columns) == bunch.feature_names
    assert bunch.frame.shape == (70, REUTERS_VOCABULARY + 1)
    X, y = load_reuters_acq_crude(return_X_y=True)
    np.testing.assert_array_equal(bunch.data.to_numpy(), X)
    np.testing.assert_array_equal(bunch.target.to_numpy(), y)
    X, y = load_reuters_acq_crude(return_X_y=True, as_frame=True)
    assert isinstance(X, pd.DataFrame) and isinstance(y, pd.Series)


def test_load_reuters_counts_and_min_df():
    counts = load_reuters_acq_crude(binary=False)
    binary = load_reuters_acq_crude()
    assert counts.data.max() > 1
    np.testing.assert_array_equal(counts.data > 0, binary.data > 0)
    pruned = load_reuters_acq_crude(min_df=5)
    assert pruned.data.shape == (70, 284)
    assert np.all(pruned.data.sum(axis=0) >= 5)
    assert set(pruned.feature_names) <= set(binary.feature_names)
    assert load_reuters_acq_crude(min_df=0.5).data.shape[1] < 284


@pytest.mark.parametrize("min_df", [0, -1, 0.0, 1.5, "2", True, None])
def test_load_reuters_bad_min_df(min_df):
    with pytest.raises(ValueError, match="min_df"):
        load_reuters_acq_crude(min_df=min_df)


# --- make_step --------------------------------------------------------------------------------


def test_make_step_shapes_and_exact_step():
    X, y, is_true = make_step(1.0, random_state=0, return_flags=True)
    assert X.shape == (100, 1) and X.dtype == np.float64
    np.testing.assert_array_equal(X[:, 0], np.arange(-99, 100, 2))
    assert y.shape == (100,) and y.dtype == np.int64
    np.testing.assert_array_equal(y, np.where(X[:, 0] > 0, 1, -1))
    assert is_true.dtype == bool and is_true.all()
    assert len(make_step(1.0)) == 2


def test_make_step_reproducible():
    a = make_step(0.4, random_state=3, return_flags=True)
    b = make_step(0.4, random_state=3, return_flags=True)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    g1 = make_step(0.4, random_state=np.random.default_rng(3))[1]
    g2 = make_step(0.4, random_state=np.random.default_rng(3))[1]
    np.testing.assert_array_equal(g1, g2)
    assert not np.array_equal(a[1], make_step(0.4, random_state=4)[1])


def test_make_step_pure_noise_proportion():
    # theta = 0: every label noisy, +1 with probability sigmoid(log 3) = 0.75
    rng = np.random.default_rng(0)
    draws = [make_step(0.0, random_state=rng, return_flags=True) for _ in range(200)]
    assert not any(flags.any() for _, _, flags in draws)
    share = np.mean([y == 1 for _, y, _ in draws])
    assert abs(share - 0.75) < 0.015  # 20,000 labels: sd about 0.003
    # noisy labels do not depend on x
    plus = np.mean([y[:50] == 1 for _, y, _ in draws]), np.mean([y[50:] == 1 for _, y, _ in draws])
    assert abs(plus[0] - 0.75) < 0.02 and abs(plus[1] - 0.75) < 0.02


def test_make_step_mixture():
    rng = np.random.default_rng(1)
    draws = [make_step(0.6, np.log(1 / 4), random_state=rng, return_flags=True) for _ in range(100)]
    flags = np.concatenate([f for _, _, f in draws])
    assert abs(flags.mean() - 0.6) < 0.02
    for X, y, f in draws:
        np.testing.assert_array_equal(y[f], np.sign(X[f, 0]))
    noisy = np.concatenate([y[~f] for _, y, f in draws])
    assert abs(np.mean(noisy == 1) - 0.2) < 0.02
    X, y = make_step(0.0, np.inf, random_state=0)
    assert np.all(y == 1)
    X, y = make_step(0.0, -np.inf, random_state=0)
    assert np.all(y == -1)


@pytest.mark.parametrize("theta", [-0.1, 1.01, float("nan"), "0.5", None, True])
def test_make_step_bad_theta(theta):
    with pytest.raises(ValueError, match="theta"):
        make_step(theta)


@pytest.mark.parametrize("grade", [float("nan"), "1", None])
def test_make_step_bad_noise_grade(grade):
    with pytest.raises(ValueError, match="noise_grade"):
        make_step(0.5, grade)


# --- make_long_servedio -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 10])
def test_make_long_servedio_components(n):
    m = 20000
    X, y = make_long_servedio(m, n, random_state=0)
    k = 2 * n + 1
    assert X.shape == (m, 2 * n + 11) and X.dtype == np.float64
    assert y.shape == (m,) and y.dtype == np.int64
    assert set(np.unique(X)) <= {-1.0, 1.0} and set(np.unique(y)) == {-1, 1}
    s1, s2 = X[:, :k].sum(axis=1), X[:, k:].sum(axis=1)
    # get_random_bv(n, k) sets (k + n) / 2 entries to -1: its sum is -k (the code, not the comment)
    first, second, third = s2 == 0, s2 == 2, s2 == 10
    assert np.all(first | second | third)
    np.testing.assert_array_equal(s1[first], k)  # x1 = ones, x2 = get_random_bv(10, 0)
    np.testing.assert_array_equal(s1[second], -1)  # get_random_bv(k, 1), get_random_bv(10, -2)
    np.testing.assert_array_equal(s1[third], -1)  # get_random_bv(k, 1), x2 = ones
    # frequencies 1/4, 1/2, 1/4: sd about 0.003 at m = 20,000
    for mask, p in ((first, 0.25), (second, 0.5), (third, 0.25)):
        assert abs(mask.mean() - p) < 0.02
        assert abs(np.mean(y[mask] == 1) - 0.8) < 0.03  # labels independent of x
    assert abs(np.mean(y == 1) - 0.8) < 0.02


def test_make_long_servedio_positions_are_random():
    X, _ = make_long_servedio(20000, 10, random_state=1)
    rows = X[:, 21:].sum(axis=1) == 2  # second component: 4 of the 10 x2 entries are -1
    share_neg = np.mean(X[rows, 21:] == -1, axis=0)
    assert np.all(np.abs(share_neg - 0.4) < 0.03)


def test_make_long_servedio_reproducible_and_eta():
    a = make_long_servedio(300, random_state=7)
    b = make_long_servedio(300, random_state=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], make_long_servedio(300, random_state=8)[0])
    assert np.all(make_long_servedio(50, eta=0.0, random_state=0)[1] == 1)
    assert np.all(make_long_servedio(50, eta=1.0, random_state=0)[1] == -1)
    assert make_long_servedio(1, random_state=0)[0].shape == (1, 31)
    assert make_long_servedio(np.int64(5), np.int32(2))[0].shape == (5, 15)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"m": 0}, "m"),
        ({"m": 2.0}, "m"),
        ({"m": True}, "m"),
        ({"m": 5, "n": -1}, "n"),
        ({"m": 5, "n": 1.5}, "n"),
        ({"m": 5, "eta": 1.2}, "eta"),
        ({"m": 5, "eta": -0.1}, "eta"),
        ({"m": 5, "eta": float("nan")}, "eta"),
    ],
)
def test_make_long_servedio_bad_args(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_long_servedio(**kwargs)


# --- flip_labels_class_conditional ------------------------------------------------------------


def test_flip_class_conditional_rates():
    y = np.array([-1, 1] * 10000)
    y_noisy, flipped = flip_labels_class_conditional(y, 0.3, 0.1, random_state=0)
    assert flipped.dtype == bool and flipped.shape == y.shape
    assert y_noisy.dtype == y.dtype
    np.testing.assert_array_equal(y_noisy != y, flipped)
    np.testing.assert_array_equal(y_noisy[flipped], -y[flipped])
    assert abs(flipped[y == 1].mean() - 0.3) < 0.02  # sd about 0.005
    assert abs(flipped[y == -1].mean() - 0.1) < 0.02


def test_flip_class_conditional_extremes_and_labels():
    y01 = np.array([0, 1, 1, 0, 1])
    y_noisy, flipped = flip_labels_class_conditional(y01, 1.0, 0.0, random_state=0)
    np.testing.assert_array_equal(flipped, y01 == 1)  # the larger value is the positive class
    np.testing.assert_array_equal(y_noisy, np.zeros(5, dtype=y01.dtype))
    y_noisy, flipped = flip_labels_class_conditional(y01, 0.0, 0.0, random_state=0)
    assert not flipped.any()
    np.testing.assert_array_equal(y_noisy, y01)
    ys = np.array(["ham", "spam", "spam"])
    y_noisy, flipped = flip_labels_class_conditional(ys, 0.0, 1.0)
    assert y_noisy.tolist() == ["spam", "spam", "spam"] and flipped.tolist() == [True, False, False]


def test_flip_class_conditional_reproducible_and_no_side_effects():
    y = np.array([0, 1] * 50)
    original = y.copy()
    a = flip_labels_class_conditional(y, 0.2, 0.4, random_state=42)
    b = flip_labels_class_conditional(y, 0.2, 0.4, random_state=42)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(y, original)
    g1 = flip_labels_class_conditional(y, 0.2, 0.4, random_state=np.random.default_rng(5))
    g2 = flip_labels_class_conditional(y, 0.2, 0.4, random_state=np.random.default_rng(5))
    np.testing.assert_array_equal(g1[1], g2[1])


@pytest.mark.parametrize(
    ("rates", "name"),
    [
        ((-0.1, 0.2), "rate_pos"),
        ((0.2, 1.5), "rate_neg"),
        ((float("nan"), 0.1), "rate_pos"),
        (("0.2", 0.1), "rate_pos"),
        ((0.1, True), "rate_neg"),
    ],
)
def test_flip_class_conditional_bad_rates(rates, name):
    with pytest.raises(ValueError, match=name):
        flip_labels_class_conditional(np.array([0, 1, 0, 1]), *rates)


@pytest.mark.parametrize(
    "y",
    [
        np.array([0, 1, 2, 1]),
        np.array([1, 1, 1]),
        np.array([0.0, np.nan, 1.0]),
        np.array([[0, 1], [1, 0]]),
    ],
)
def test_flip_class_conditional_not_binary(y):
    with pytest.raises(ValueError):
        flip_labels_class_conditional(y, 0.5, 0.5)
