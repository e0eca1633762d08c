"""Tests for viboost.datasets: the bundled Spambase data and flip_labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from viboost.datasets import flip_labels, load_spambase


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
