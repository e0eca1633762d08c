"""FeatureBinner: exact bins for few distinct values, quantile bins otherwise, NaN in bin 255."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.binning import MISSING_BIN, FeatureBinner


def exact_midpoints(values):
    """Thresholds of ExactStumpSearch between consecutive distinct values (after -inf)."""
    lo, hi = values[:-1], values[1:]
    mid = lo / 2.0 + hi / 2.0
    return np.where(mid >= hi, lo, mid)


def assert_splits_match_bins(X, binner, bins):
    """``x > thresholds_[j][b]`` on the raw values is exactly ``bin > b``, for every edge."""
    for j, edges in enumerate(binner.thresholds_):
        column, binned = X[:, j], bins[:, j]
        observed = ~np.isnan(column)
        np.testing.assert_array_equal(binned[~observed], MISSING_BIN)
        assert binned[observed].max(initial=0) < binner.n_bins_[j]
        right = column[observed, None] > edges[None, :]
        np.testing.assert_array_equal(right, binned[observed, None] > np.arange(edges.size))


def test_few_distinct_values_are_binned_exactly():
    rng = np.random.default_rng(0)
    X = rng.integers(-20, 230, size=(3000, 3)).astype(float)  # 250 values at most
    X[:, 2] = rng.choice([0.1, 0.2, 0.7, 1e300, -1e300], size=3000)
    X[rng.random(X.shape) < 0.1] = np.nan
    active = rng.random(3000) < 0.9
    X[~active, 0] = 1000.0  # inactive rows place no threshold
    binner = FeatureBinner().fit(X, active)
    assert binner.exact_.all()
    for j in range(3):
        column = X[active, j]
        values = np.unique(column[~np.isnan(column)])
        np.testing.assert_array_equal(binner.thresholds_[j], exact_midpoints(values))
        assert binner.n_bins_[j] == values.size
    bins = binner.transform(X)
    assert bins.dtype == np.uint8 and bins.flags.c_contiguous and bins.shape == X.shape
    assert np.all(bins[~active, 0] == binner.n_bins_[0] - 1)  # above every active value
    assert_splits_match_bins(X, binner, bins)


def test_a_value_missed_by_the_subsample_is_found_on_the_full_column():
    X = np.zeros((5000, 1))
    X[::2, 0] = 1.0
    X[1234, 0] = 0.5  # one row: almost surely absent from a subsample of 100
    binner = FeatureBinner(subsample=100, random_state=0).fit(X)
    assert binner.exact_[0]
    np.testing.assert_array_equal(binner.thresholds_[0], [0.25, 0.75])
    bins = binner.transform(X)
    assert bins[1234, 0] == 1 and np.count_nonzero(bins == 1) == 1


def test_full_column_with_more_values_than_bins_falls_back_to_quantiles():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 8, size=(4000, 1)).astype(float)
    X[:400, 0] = np.arange(400) + 0.5  # rare values the small subsample misses
    binner = FeatureBinner(max_bins=16, subsample=50, random_state=3).fit(X)
    assert not binner.exact_[0]
    assert binner.n_bins_[0] <= 16
    assert_splits_match_bins(X, binner, binner.transform(X))


@pytest.mark.parametrize("max_bins", [2, 7, 255])
def test_quantile_bins_split_in_original_units(max_bins):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((3000, 2))
    X[:, 1] = np.round(rng.exponential(size=3000), 2)  # heavy ties, > 255 distinct values
    X[rng.random(X.shape) < 0.05] = np.nan
    binner = FeatureBinner(max_bins=max_bins, subsample=1000, random_state=0).fit(X)
    assert not binner.exact_.any()
    for edges in binner.thresholds_:
        assert np.all(np.diff(edges) > 0)
    np.testing.assert_array_equal(binner.n_bins_, [e.size + 1 for e in binner.thresholds_])
    assert np.all(binner.n_bins_ <= max_bins)
    if max_bins == 255:
        assert binner.n_bins_[0] == 255  # continuous data fills every bin
    assert_splits_match_bins(X, binner, binner.transform(X))
    X_new = rng.standard_normal((500, 2)) * 3  # unseen values obey the same rule
    assert_splits_match_bins(X_new, binner, binner.transform(X_new))


def test_quantile_bins_hold_similar_counts():
    X = np.random.default_rng(3).standard_normal((20_000, 1))
    bins = FeatureBinner(max_bins=10, subsample=20_000).fit_transform(X)
    counts = np.bincount(bins[:, 0])
    assert counts.size == 10 and counts.min() > 1900 and counts.max() < 2100


def test_subsample_is_reproducible():
    X = np.random.default_rng(4).standard_normal((2000, 3))

    def edges(random_state):
        binner = FeatureBinner(max_bins=20, subsample=300, random_state=random_state).fit(X)
        return np.concatenate(binner.thresholds_)

    np.testing.assert_array_equal(edges(7), edges(7))
    np.testing.assert_array_equal(edges(np.random.default_rng(7)), edges(np.random.default_rng(7)))
    np.testing.assert_array_equal(edges(np.random.RandomState(7)), edges(np.random.RandomState(7)))
    assert not np.array_equal(edges(7), edges(8))
    # Without subsampling the seed does not matter.
    full = [FeatureBinner(max_bins=20, random_state=s).fit(X).thresholds_[0] for s in (1, 2)]
    np.testing.assert_array_equal(*full)


def test_degenerate_columns():
    X = np.array([[np.nan, 3.0], [np.nan, 3.0], [np.nan, 3.0]])
    binner = FeatureBinner().fit(X)
    np.testing.assert_array_equal(binner.n_bins_, [1, 1])
    assert binner.thresholds_[0].size == 0 and binner.thresholds_[1].size == 0
    np.testing.assert_array_equal(binner.transform(X), [[255, 0]] * 3)
    # No active row at all: one bin per feature.
    binner = FeatureBinner().fit(X, active=np.zeros(3, dtype=bool))
    np.testing.assert_array_equal(binner.n_bins_, [1, 1])


@pytest.mark.parametrize("max_bins", [0, 1, 256, 1000])
def test_max_bins_out_of_range(max_bins):
    with pytest.raises(ValueError, match="max_bins"):
        FeatureBinner(max_bins=max_bins).fit(np.zeros((3, 1)))


@pytest.mark.parametrize("max_bins", [2.5, True, "255"])
def test_max_bins_not_an_int(max_bins):
    with pytest.raises(TypeError, match="max_bins"):
        FeatureBinner(max_bins=max_bins).fit(np.zeros((3, 1)))


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="subsample"):
        FeatureBinner(subsample=0).fit(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="no features"):
        FeatureBinner().fit(np.zeros((3, 0)))
    with pytest.raises(ValueError, match="2-D"):
        FeatureBinner().fit(np.zeros(3))
    with pytest.raises(ValueError, match="active"):
        FeatureBinner().fit(np.zeros((3, 1)), active=np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match="not fitted"):
        FeatureBinner().transform(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="features"):
        FeatureBinner().fit(np.zeros((3, 2))).transform(np.zeros((3, 1)))


def test_adjacent_floats_get_separate_bins():
    a = 1.0
    b = np.nextafter(a, 2.0)
    X = np.array([[a], [b], [b]])
    binner = FeatureBinner().fit(X)
    np.testing.assert_array_equal(binner.thresholds_[0], [a])  # the midpoint rounds to b: lo
    np.testing.assert_array_equal(binner.transform(X)[:, 0], [0, 1, 1])


def test_memory_layout_does_not_matter():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 4))
    X[:, 0] = np.round(X[:, 0])
    X[rng.random(X.shape) < 0.1] = np.nan
    c_binner = FeatureBinner(max_bins=40, subsample=1000, random_state=1).fit(X)
    f_binner = FeatureBinner(max_bins=40, subsample=1000, random_state=1).fit(np.asfortranarray(X))
    for c_edges, f_edges in zip(c_binner.thresholds_, f_binner.thresholds_, strict=True):
        np.testing.assert_array_equal(c_edges, f_edges)
    bins = f_binner.transform(np.asfortranarray(X))
    assert bins.flags.c_contiguous
    np.testing.assert_array_equal(bins, c_binner.transform(X))


def test_fit_sample_with_callbacks_gives_the_edges_of_fit():
    """The binner of a distributed fit: a sample and two callbacks give fit's edges, also when
    the subsample misses values of a few-valued feature."""
    from viboost.boosting.binning import absent_values, subsample_ranks

    rng = np.random.default_rng(0)
    n = 5000
    X = np.column_stack(
        [
            rng.normal(size=n),
            rng.integers(0, 7, n).astype(float),
            np.where(np.arange(n) == 4321, 99.0, rng.integers(0, 3, n)),  # one rare value
        ]
    )
    active = rng.random(n) < 0.9
    binner = FeatureBinner(max_bins=20, subsample=500, random_state=3)
    want = FeatureBinner(max_bins=20, subsample=500, random_state=3).fit(X, active)
    rows = np.flatnonzero(active)
    ranks = subsample_ranks(rows.size, 500, 3)
    assert ranks is not None and np.all(np.diff(ranks) > 0)
    got = binner.fit_sample(
        X[rows[ranks]],
        True,
        lambda features, table: absent_values(X, active, features, table),
        lambda j: np.unique(X[active, j]),
    )
    for a, b in zip(got.thresholds_, want.thresholds_, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got.exact_, want.exact_)
    assert 99.0 in got.bin_values_[2]  # the rare value was found by the full pass
    assert np.isnan(got.bin_values_[0]).all()  # quantile bins have no values
    assert subsample_ranks(400, 500, 3) is None


def test_categorical_bin_is_code():
    """A categorical feature's bin is its code whatever the data (issue 53), NaN and
    out-of-range codes go to the missing bin, and K > max_bins raises."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 7, size=500).astype(float)
    codes[::17] = np.nan
    X = np.column_stack([codes, rng.normal(size=500)])
    binner = FeatureBinner(max_bins=16, n_categories=np.array([9, 0])).fit(X)
    assert binner.is_categorical_.tolist() == [True, False]
    assert binner.n_bins_[0] == 9 and binner.exact_[0]
    np.testing.assert_array_equal(binner.thresholds_[0], np.arange(8) + 0.5)
    bins = binner.transform(X)
    observed = ~np.isnan(codes)
    np.testing.assert_array_equal(bins[observed, 0], codes[observed].astype(np.uint8))
    assert np.all(bins[~observed, 0] == 255)
    odd = binner.transform(np.array([[-1.0, 0.0], [9.0, 0.0], [2.5, 0.0], [8.0, 0.0]]))
    assert odd[:, 0].tolist() == [255, 255, 255, 8]
    numeric = FeatureBinner(max_bins=16).fit(X[:, 1:])
    np.testing.assert_array_equal(binner.thresholds_[1], numeric.thresholds_[0])
    with pytest.raises(ValueError, match="categories, more than max_bins"):
        FeatureBinner(max_bins=8, n_categories=np.array([9, 0])).fit(X)
