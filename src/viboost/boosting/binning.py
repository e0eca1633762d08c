"""Feature binning: each column of ``X`` mapped to at most 255 ordered bins, stored as ``uint8``.

The binned stump search (:class:`viboost.boosting.stumps.BinnedStumpSearch`) scores every split of a
feature from a histogram of weights over that feature's bins, so it needs, per feature, a sorted
list of *edges* (thresholds in the original units) and the bin of every training value.

Structure of this module
------------------------
- :class:`FeatureBinner` learns the edges (``fit``) and maps values to bins (``transform``).

  * A feature with at most ``max_bins`` distinct values (among the active, non-missing rows) is
    binned *exactly*: one bin per distinct value, and the edge between two consecutive values is
    their midpoint computed exactly as :class:`viboost.boosting.stumps.ExactStumpSearch` computes
    its thresholds, so both searches see the same candidate splits. The count of distinct values is
    taken on a subsample and then verified on the full column (a compiled binary-search pass); only
    if some value is absent from the subsample does ``np.unique`` run on the whole column.
  * Any other feature gets *quantile* bins from a random subsample of the active rows: the values
    at evenly spaced ranks of the sorted subsample, deduplicated, each followed by an edge halfway
    to the next larger distinct subsample value. Edges therefore always fall strictly between two
    distinct observed values, and no bin boundary splits a run of equal values.

- The bin of ``x`` is the number of edges strictly below ``x``: ``x <= edges[b]`` if and only if
  ``bin(x) <= b``. So the split "bins ``<= b`` go left" is the stump threshold ``edges[b]``, and
  ``x > edges[b]`` on the raw values reproduces the binned split for every value, seen in training
  or not. A missing value (NaN) goes to the reserved bin :data:`MISSING_BIN` (255).
- The compiled kernels: ``_bin_rows`` (a branchless eight-step binary search over the edges of
  each feature, padded to 256 entries with ``+inf``) and ``_absent_values`` (the verification
  pass of exact binning). Both are element-wise, so their results do not depend on the number of
  numba threads.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost._utils.validation import RandomStateLike, spawn_generator

__all__ = ["MISSING_BIN", "FeatureBinner", "absent_values", "subsample_ranks"]

#: Bin of a missing value (NaN); the bins of observed values are ``0 .. n_bins_[j] - 1 <= 254``.
MISSING_BIN = 255
# Edges per feature in the padded edge table: 254 real edges at most, then +inf.
_TABLE_SIZE = 256


@numba.njit(cache=True, inline="always")
def _count_below(sorted_row, x):  # pragma: no cover - compiled
    """Number of entries of ``sorted_row`` (256 entries, +inf-padded, at most 255 finite) below x.

    A branchless eight-step binary search (faster than a branchy one: :doc:`docs/speed.md </speed>`
    ("Inside the kernels")); reads entries ``pos + step - 1``, at most index 254.
    """
    pos = 0
    pos += 128 * (sorted_row[pos + 127] < x)
    pos += 64 * (sorted_row[pos + 63] < x)
    pos += 32 * (sorted_row[pos + 31] < x)
    pos += 16 * (sorted_row[pos + 15] < x)
    pos += 8 * (sorted_row[pos + 7] < x)
    pos += 4 * (sorted_row[pos + 3] < x)
    pos += 2 * (sorted_row[pos + 1] < x)
    pos += 1 * (sorted_row[pos] < x)
    return pos


@threaded_kernel(cache=True)
def _bin_rows(X, table):  # pragma: no cover - compiled
    """Bin of each entry of ``X``: the count of a feature's edges below the value; NaN -> 255.

    ``table[j]`` holds feature ``j``'s edges in increasing order, padded with ``+inf`` to 256
    entries (at most 254 are real, so ``table[j, 254]`` is ``+inf`` and a count never exceeds
    254). The search reads entries ``pos + step - 1``, at most index 254.
    """
    n, d = X.shape
    out = np.empty((n, d), dtype=np.uint8)
    for i in numba.prange(n):
        for j in range(d):
            x = X[i, j]
            out[i, j] = _count_below(table[j], x) if x == x else 255
    return out


def subsample_ranks(
    n_active: int, subsample: int, random_state: RandomStateLike
) -> np.ndarray | None:
    """Which active rows (their ranks among the active rows, ascending) the edges are placed
    from, or None for all of them (at most ``subsample`` rows: none are drawn)."""
    if n_active <= subsample:
        return None
    ranks = spawn_generator(random_state).choice(
        n_active, size=int(subsample), replace=False, shuffle=False
    )
    ranks.sort()
    return ranks


def absent_values(
    X: np.ndarray, active: np.ndarray, features: np.ndarray, table: np.ndarray
) -> np.ndarray:
    """For each of ``features``, whether some active, non-missing value of ``X`` is absent from
    that feature's row of ``table`` (sorted distinct values, ``+inf``-padded to 256)."""
    return _absent_values(
        np.asarray(X, dtype=np.float64), np.ascontiguousarray(active, dtype=bool), features, table
    )


@threaded_kernel(cache=True)
def _absent_values(X, active, features, table):  # pragma: no cover - compiled
    """For each listed feature, whether some active, non-missing value is absent from its table.

    ``table[k]`` holds the sorted distinct values found for ``features[k]`` (at most 255),
    padded with ``+inf`` to 256 entries. Per-chunk flags, combined at the end: no write races.
    """
    n = X.shape[0]
    m = features.shape[0]
    n_chunks = min(64, max(1, (n + 65535) // 65536))
    size = (n + n_chunks - 1) // n_chunks
    flags = np.zeros((n_chunks, m), dtype=np.bool_)
    for c in numba.prange(n_chunks):
        for i in range(c * size, min(n, (c + 1) * size)):
            if not active[i]:
                continue
            for k in range(m):
                x = X[i, features[k]]
                pos = _count_below(table[k], x)  # x is present iff table[k, pos] == x
                if x == x and table[k, pos] != x:
                    flags[c, k] = True
    absent = np.zeros(m, dtype=np.bool_)
    for c in range(n_chunks):
        for k in range(m):
            absent[k] |= flags[c, k]
    return absent


def _midpoints(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Split points between ``lo < hi``, exactly as
    :class:`~viboost.boosting.stumps.ExactStumpSearch`."""
    mid = lo / 2.0 + hi / 2.0  # halves first: no overflow near the float limits
    return np.where(mid >= hi, lo, mid)  # adjacent floats: keep lo on the left side


def _distinct(sorted_values: np.ndarray) -> np.ndarray:
    """Distinct values of a sorted 1-D array without NaN."""
    if sorted_values.size == 0:
        return sorted_values
    keep = np.empty(sorted_values.size, dtype=bool)
    keep[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=keep[1:])
    return sorted_values[keep]


def _quantile_edges(sorted_values: np.ndarray, max_bins: int) -> np.ndarray:
    """Edges giving at most ``max_bins`` bins of about equal counts of ``sorted_values``."""
    m = sorted_values.size
    ranks = np.arange(1, max_bins) * m // max_bins  # values before rank r go left of the cut
    cut_values = _distinct(sorted_values[np.clip(ranks - 1, 0, m - 1)])
    after = np.searchsorted(sorted_values, cut_values, side="right")
    keep = after < m  # the largest value has nothing above it to split from
    return _midpoints(cut_values[keep], sorted_values[after[keep]])


def _sort_columns(sample: np.ndarray) -> None:
    """Sort each column of a Fortran-ordered array in place, groups of columns in threads.

    numpy's sort beats a compiled one here and releases the GIL, so the threads run in parallel;
    the result is the same for any number of threads.
    """
    n_threads = min(numba.get_num_threads(), sample.shape[1])
    if n_threads <= 1 or sample.shape[0] < 10_000:
        sample.sort(axis=0)
        return
    bounds = np.linspace(0, sample.shape[1], n_threads + 1).astype(np.int64)
    groups = [sample[:, a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    with ThreadPoolExecutor(n_threads) as pool:
        for _ in pool.map(lambda group: group.sort(axis=0), groups):
            pass


@threaded_kernel(cache=True)
def _gather_rows(X, rows, out):  # pragma: no cover - compiled
    """``out[k] = X[rows[k]]`` for a C-ordered X into a Fortran-ordered ``out``, in row blocks."""
    n_rows, d = rows.shape[0], X.shape[1]
    n_blocks = (n_rows + 4095) // 4096
    for c in numba.prange(n_blocks):
        for k in range(c * 4096, min(n_rows, (c + 1) * 4096)):
            r = rows[k]
            for j in range(d):
                out[k, j] = X[r, j]


class FeatureBinner:
    """Map each feature to at most ``max_bins`` ordered bins (``uint8``), NaN to bin 255.

    Parameters
    ----------
    max_bins : int, default=255
        Most bins per feature for observed values, from 2 to 255 (bin 255 is reserved for NaN).
    subsample : int, default=200_000
        Most active rows drawn (without replacement) to place quantile edges and to count the
        distinct values of each feature.
    random_state : int, RandomState, Generator or None, default=None
        Source of the subsample; an int gives a reproducible one. The subsample is drawn from
        :func:`viboost._utils.validation.spawn_generator` of it (an int seeds the Generator itself;
        otherwise one integer drawn from ``check_random_state(random_state)`` does).
    n_categories : ndarray of int64, shape (n_features,), default=None
        Per feature, 0 for a numeric one, or ``K > 0`` for a categorical one whose values are the
        float codes ``0 .. K-1`` (NaN: missing or unseen). A categorical feature's edges are
        ``k + 0.5``, whatever the data, so its bin is its code (NaN: bin 255). ``K > max_bins``
        raises. None: every feature numeric.

    Attributes
    ----------
    thresholds_ : list of ndarray
        Per feature, the increasing edges in the original units; ``x > thresholds_[j][b]`` if
        and only if ``x`` falls in a bin above ``b``.
    n_bins_ : ndarray of int64, shape (n_features,)
        Bins of observed values per feature (``len(thresholds_[j]) + 1``).
    exact_ : ndarray of bool, shape (n_features,)
        Whether the feature is binned exactly (one bin per distinct active value).
    bin_values_ : ndarray of shape (n_features, 256)
        For an exactly binned feature, the value of each bin (NaN-padded); all NaN otherwise.
    is_categorical_ : ndarray of bool, shape (n_features,)
        Whether the feature is categorical (``n_categories[j] > 0``): bin == code.
    n_features_in_ : int
        Columns seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.5], [2.0, np.nan], [2.0, 0.25], [4.0, 0.5]])
    >>> binner = FeatureBinner().fit(X)
    >>> binner.thresholds_[0], binner.n_bins_
    (array([1.5, 3. ]), array([3, 2]))
    >>> binner.transform(X)
    array([[  0,   1],
           [  1, 255],
           [  1,   0],
           [  2,   1]], dtype=uint8)
    """

    def __init__(
        self,
        max_bins: int = 255,
        subsample: int = 200_000,
        random_state: RandomStateLike = None,
        n_categories: np.ndarray | None = None,
    ) -> None:
        self.max_bins = max_bins
        self.subsample = subsample
        self.random_state = random_state
        self.n_categories = n_categories

    def _check_params(self) -> None:
        max_bins, subsample = self.max_bins, self.subsample
        if isinstance(max_bins, bool) or not isinstance(max_bins, numbers.Integral):
            raise TypeError(f"max_bins must be an int, got {max_bins!r}")
        if not 2 <= max_bins <= MISSING_BIN:
            raise ValueError(f"max_bins must be in [2, {MISSING_BIN}], got {max_bins}")
        if isinstance(subsample, bool) or not isinstance(subsample, numbers.Integral):
            raise TypeError(f"subsample must be an int, got {subsample!r}")
        if subsample < 1:
            raise ValueError(f"subsample must be at least 1, got {subsample}")

    def fit(self, X: np.ndarray, active: np.ndarray | None = None) -> FeatureBinner:
        """Learn the edges of each feature from the active rows of ``X``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Training features, finite or NaN.
        active : ndarray of bool, shape (n_samples,), default=None
            Rows that may carry weight; edges are placed from their values only.

        Returns
        -------
        self : FeatureBinner
        """
        self._check_params()
        X = _check_X(X)
        n_samples, n_features = X.shape
        if active is None:
            active = np.ones(n_samples, dtype=bool)
        else:
            active = np.ascontiguousarray(active, dtype=bool)
            if active.shape != (n_samples,):
                raise ValueError(f"active must have shape ({n_samples},), got {active.shape}")
        rows = np.flatnonzero(active)
        ranks = subsample_ranks(rows.size, self.subsample, self.random_state)
        if ranks is not None:
            rows = rows[ranks]  # ascending rows: a cache-friendly gather
        if X.flags.f_contiguous:  # column by column: contiguous reads
            sample = np.empty((rows.size, n_features), order="F")
            for j in range(n_features):
                np.take(X[:, j], rows, out=sample[:, j])
        else:
            sample = np.empty((rows.size, n_features), order="F")
            _gather_rows(X, rows, sample)

        def distinct(j: int) -> np.ndarray:
            column = X[active, j]
            return np.unique(column[~np.isnan(column)])

        return self.fit_sample(
            sample,
            subsampled=ranks is not None,
            find_absent=lambda features, table: absent_values(X, active, features, table),
            distinct_values=distinct,
        )

    def fit_sample(
        self,
        sample: np.ndarray,
        subsampled: bool,
        find_absent: Callable[[np.ndarray, np.ndarray], np.ndarray],
        distinct_values: Callable[[int], np.ndarray],
    ) -> FeatureBinner:
        """Learn the edges from a sample of the active rows (sorted here, column by column).

        The parts of :meth:`fit` that read every row are callbacks, so that rows held
        elsewhere (the blocks of a distributed fit) give the same edges: ``find_absent(features,
        table)`` says, per listed feature, whether some active value is absent from its row of
        ``table`` (:func:`absent_values`), and ``distinct_values(j)`` returns the sorted distinct
        non-missing active values of feature ``j``. With ``subsampled=False`` the sample is all
        the active rows and neither is called.
        """
        self._check_params()
        max_bins = int(self.max_bins)
        sample = np.asarray(sample, dtype=np.float64, order="F")
        if sample.ndim != 2 or sample.shape[1] == 0:
            raise ValueError(f"the sample must be 2-D with features, got shape {sample.shape}")
        n_features = sample.shape[1]
        n_categories = self._categories(n_features)
        _sort_columns(sample)  # NaN sorts last

        thresholds: list[np.ndarray | None] = [None] * n_features
        bin_values = np.full((n_features, _TABLE_SIZE), np.nan)
        exact = np.zeros(n_features, dtype=bool)
        to_verify: list[int] = []
        verify_values: list[np.ndarray] = []
        for j in range(n_features):
            if n_categories[j] > 0:  # categorical: edges k + 0.5, so bin == code (issue 53)
                codes = np.arange(n_categories[j], dtype=np.float64)
                thresholds[j] = codes[:-1] + 0.5
                bin_values[j, : codes.size] = codes
                exact[j] = True
                continue
            column = sample[:, j]
            observed = column[: np.searchsorted(column, np.nan)]  # NaN sorts (and searches) last
            values = _distinct(observed)
            if values.size <= max_bins:
                if subsampled:
                    to_verify.append(j)
                    verify_values.append(values)
                else:
                    thresholds[j] = _midpoints(values[:-1], values[1:])
                    bin_values[j, : values.size] = values
                    exact[j] = True
            else:
                thresholds[j] = _quantile_edges(observed, max_bins)

        if to_verify:
            table = np.full((len(to_verify), _TABLE_SIZE), np.inf)
            for k, values in enumerate(verify_values):
                table[k, : values.size] = values
            absent = find_absent(np.asarray(to_verify, dtype=np.int64), table)
            for k, j in enumerate(to_verify):
                values = verify_values[k]
                if absent[k]:  # the subsample missed a value: count on the whole column
                    full = distinct_values(j)
                    if full.size > max_bins:
                        observed = sample[: np.searchsorted(sample[:, j], np.nan), j]
                        thresholds[j] = _quantile_edges(observed, max_bins)
                        continue
                    values = full
                thresholds[j] = _midpoints(values[:-1], values[1:])
                bin_values[j, : values.size] = values
                exact[j] = True

        self.thresholds_ = [np.asarray(t, dtype=np.float64) for t in thresholds]
        self.n_bins_ = np.array([t.size + 1 for t in self.thresholds_], dtype=np.int64)
        self.exact_ = exact
        self.bin_values_ = bin_values
        self.is_categorical_ = n_categories > 0
        self.n_features_in_ = n_features
        table = np.full((n_features, _TABLE_SIZE), np.inf)
        for j, edges in enumerate(self.thresholds_):
            table[j, : edges.size] = edges
        self._table = table
        return self

    def _categories(self, n_features: int) -> np.ndarray:
        """``n_categories`` as int64 per feature (zeros when None), checked against
        ``max_bins``: a categorical feature needs one bin per category."""
        if self.n_categories is None:
            return np.zeros(n_features, dtype=np.int64)
        n_categories = np.asarray(self.n_categories, dtype=np.int64).reshape(-1)
        if n_categories.shape != (n_features,):
            raise ValueError(
                f"n_categories must have one entry per feature ({n_features}), got "
                f"{n_categories.shape}"
            )
        if np.any(n_categories < 0):
            raise ValueError("n_categories must be nonnegative (0: a numeric feature)")
        too_many = np.flatnonzero(n_categories > int(self.max_bins))
        if too_many.size:
            j = int(too_many[0])
            raise ValueError(
                f"feature {j} has {int(n_categories[j])} categories, more than max_bins="
                f"{int(self.max_bins)}: a categorical feature needs one bin per category"
            )
        return n_categories

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Bins of ``X``: a C-contiguous ``uint8`` array of shape (n_samples, n_features).

        Observed values go to bins ``0 .. n_bins_[j] - 1`` (the count of edges below the value),
        NaN to :data:`MISSING_BIN`.
        """
        if not hasattr(self, "_table"):
            raise ValueError("this FeatureBinner is not fitted yet: call fit first")
        X = _check_X(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but the binner was fitted with {self.n_features_in_}"
            )
        binned = _bin_rows(X, self._table)
        categorical = np.flatnonzero(getattr(self, "is_categorical_", ()))
        for j in categorical:  # a code outside 0 .. K-1 or not integral: missing (as predict)
            column = X[:, j]
            with np.errstate(invalid="ignore"):
                bad = ~((column >= 0) & (column < self.n_bins_[j]) & (column == np.floor(column)))
            binned[bad, j] = MISSING_BIN
        return binned

    def fit_transform(self, X: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """``fit(X, active)`` then ``transform(X)``."""
        return self.fit(X, active).transform(X)


def _check_X(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
    if X.shape[1] == 0:
        raise ValueError("X has no features (0 columns): nothing to bin")
    return X
