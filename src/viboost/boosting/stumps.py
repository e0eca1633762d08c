"""Decision stumps and their search: the paper's base classifiers, one learner of the seam.

A decision stump ``h(x) = polarity * (+1 if x[feature] > threshold else -1)`` is the paper's base
classifier (section 7: "For all experiments we used decision stumps"). Missing values (NaN) go to
the side chosen at fit time, as in LightGBM and scikit-learn's HistGradientBoosting.

Structure of this module
------------------------
- :class:`DecisionStump` is one fitted base classifier, a
  :class:`~viboost.boosting.learners.BaseLearner`: a tree of three nodes.
- :func:`predict_stumps` evaluates many stumps at once (the ``h_t(x)`` of the ensemble).
- :class:`ExactStumpSearch` is the reference engine: every feature, every threshold between two
  consecutive distinct training values (plus the threshold below all of them), both polarities,
  and both directions for missing values, scored with cumulative sums over a presorted order.
- :class:`BinnedStumpSearch` is the fast engine: the features are binned once
  (:class:`~viboost.boosting.binning.FeatureBinner`, at most 255 bins each), each call builds a
  histogram of positive and negative weight per (feature, bin)
  (:func:`~viboost.boosting.histogram.binned_histogram`) and scans the bin boundaries with the
  same error formulas and tie rules as the exact search (:func:`best_binned_stump`). A feature
  with at most ``max_bins`` distinct values is binned exactly, so on such data both engines
  return the same stump; other features are split at quantile edges only.

Both searches are :class:`~viboost.boosting.learners.LearnerSearch` es: section 5 shows that the
stump of largest approximate mode ``|alpha|`` (eq. (17)) is the one of least weighted error under
the weights ``phi_n * exp(-tau * y_n * H(x_n))``, so the loop only needs a weighted-error
minimiser. The compiled kernels (numba) are private: ``_best_split`` (the scan) and
``_stump_outputs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.binning import MISSING_BIN, FeatureBinner
from viboost.boosting.histogram import binned_histogram, occupied_bins, transpose_bins
from viboost.boosting.learners import NODE_DTYPE, BaseLearner
from viboost.boosting.splitting import CAT_SMOOTH

__all__ = [
    "BinnedStumpSearch",
    "DecisionStump",
    "ExactStumpSearch",
    "best_binned_stump",
    "binned_stump_outputs",
    "predict_stumps",
]

#: Weighted errors (of weights summing to one) closer than this are ties. Tied stumps are broken by
#: position, never by the rounding of a particular summation order, so that equal data weighted
#: two ways (repeated rows, integer sample weights) pick the same stump.
TIE_TOLERANCE = 1e-12
# A word of a categorical set as a Python int in uint64 range (the kernels hold int64 patterns).
_WORD = (1 << 64) - 1


@dataclass(frozen=True)
class DecisionStump:
    """A one-split classifier with outputs in {-1, +1}.

    Parameters
    ----------
    feature : int
        Column of ``X`` the stump splits on.
    threshold : float
        Split point in the units of that column; ``-inf`` puts every observed value on the right.
    polarity : {-1, +1}
        Output for values above the threshold.
    missing_right : bool
        Whether a missing value (NaN) is treated as lying above the threshold.
    split_bin : int or None, default=None
        For a stump found by a binned search: bins ``<= split_bin`` of its feature go left (-1
        for the threshold ``-inf``); None otherwise. Not part of the stump's identity.
    gain : float, default=nan
        The search's score of the stump: its edge ``1 - 2 * error`` under the round's weights.
        Not part of the stump's identity.
    covers : (float, float) or None, default=None
        The training weight that went left and right when the stump was fitted (recorded by
        the booster; the ``cover`` of its leaves). Not part of the stump's identity.
    left_categories : (int, int, int, int) or None, default=None
        For a categorical stump (issue 53), the four uint64 words of the set of codes that go
        left (bit ``k`` of word ``k // 64`` for code ``k``; ``threshold`` is then NaN); a NaN,
        a code outside the set's range or a non-code goes to the missing side. None for a
        numeric stump. Part of the stump's identity.

    Examples
    --------
    >>> import numpy as np
    >>> stump = DecisionStump(feature=0, threshold=0.5, polarity=1, missing_right=False)
    >>> stump.predict(np.array([[0.0], [1.0], [np.nan]]))
    array([-1.,  1., -1.])
    >>> stump.nodes[["feature", "threshold", "value", "is_leaf"]].tolist()
    [(0, 0.5, 0.0, False), (-1, 0.0, -1.0, True), (-1, 0.0, 1.0, True)]
    """

    feature: int
    threshold: float
    polarity: int
    missing_right: bool
    split_bin: int | None = field(default=None, compare=False, repr=False)
    gain: float = field(default=float("nan"), compare=False, repr=False)
    covers: tuple[float, float] | None = field(default=None, compare=False, repr=False)
    left_categories: tuple[int, int, int, int] | None = field(default=None, repr=False)

    @property
    def is_categorical(self) -> bool:
        """Whether the stump splits a categorical feature by a set of codes."""
        return self.left_categories is not None

    def _words(self) -> np.ndarray:
        """The set's four words as uint64 (zeros for a numeric stump)."""
        words = (0, 0, 0, 0) if self.left_categories is None else self.left_categories
        return np.array([int(w) for w in words], dtype=np.uint64)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Return ``h(x)`` in {-1.0, +1.0} for each row of the 2-D array ``X``."""
        return np.where(self._right(X), float(self.polarity), -float(self.polarity))

    def _right(self, X: np.ndarray) -> np.ndarray:
        column = X[:, self.feature]
        if self.left_categories is not None:  # numpy twin of predictor.goes_left_raw
            with np.errstate(invalid="ignore"):
                valid = (column >= 0) & (column < 256) & (column == np.floor(column))
            codes = np.where(valid, column, 0).astype(np.int64)
            words = self._words()
            bit = (words[codes >> 6] >> (codes & 63).astype(np.uint64)) & np.uint64(1)
            return np.where(valid, bit == 0, self.missing_right)
        right = column > self.threshold
        if self.missing_right:
            right |= np.isnan(column)
        return right

    @property
    def nodes(self) -> np.ndarray:
        """Three nodes (:data:`~viboost.boosting.learners.NODE_DTYPE`): the split, the left leaf
        (``-polarity``) and the right leaf (``polarity``)."""
        nodes = np.zeros(3, dtype=NODE_DTYPE)
        nodes["feature"] = [self.feature, -1, -1]
        nodes["threshold"][0] = self.threshold
        nodes["bin_threshold"][0] = -2 if self.split_bin is None else self.split_bin
        nodes["missing_left"][0] = not self.missing_right
        nodes["left"] = [1, -1, -1]
        nodes["right"] = [2, -1, -1]
        nodes["is_leaf"] = [False, True, True]
        nodes["gain"][0] = 0.0 if np.isnan(self.gain) else self.gain
        nodes["value"] = [0.0, -float(self.polarity), float(self.polarity)]
        nodes["cover"] = np.nan
        if self.left_categories is not None:
            nodes["bin_threshold"][0] = -1
            nodes["is_categorical"][0] = True
            nodes["left_categories"][0] = self._words()
        if self.covers is not None:
            left, right = self.covers
            nodes["cover"] = [left + right, left, right]
        return nodes

    def with_covers(self, leaf_covers: np.ndarray) -> DecisionStump:
        """The stump with the training weight of its left and right leaf recorded."""
        return replace(self, covers=(float(leaf_covers[0]), float(leaf_covers[1])))

    @property
    def is_constant(self) -> bool:
        """Whether the stump sends every value, missing ones included, to the same side."""
        if self.left_categories is not None:  # no code goes left, nor NaN
            return not any(self.left_categories) and self.missing_right
        return not np.isfinite(self.threshold) and self.missing_right

    def split_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The stump's feature and gain (none for a constant stump)."""
        if self.is_constant:
            return np.empty(0, dtype=np.int64), np.empty(0)
        return np.array([self.feature]), np.array([self.gain])

    def binned_outputs(self, binned_columns: np.ndarray) -> np.ndarray:
        """``h`` of rows from their bins (``binned_columns[j]``: bins of feature ``j``); only
        for a stump found by a binned search (``split_bin`` set)."""
        if self.split_bin is None:
            raise ValueError(
                "this stump was not found by a binned search (split_bin is None): use "
                "stump.predict(X)"
            )
        column = np.ascontiguousarray(binned_columns[self.feature])
        if self.left_categories is not None:  # bin == code: the set read bin by bin
            codes = np.zeros((256, self.feature + 1))
            codes[:, self.feature] = np.arange(256)
            left = ~self._right(codes)
            left[MISSING_BIN] = not self.missing_right
            return np.where(left[column], -float(self.polarity), float(self.polarity))
        return binned_stump_outputs(column, self.split_bin + 1, self)


def predict_stumps(stumps: list[DecisionStump], X: np.ndarray) -> np.ndarray:
    """Outputs of several stumps, as an array of shape ``(len(stumps), n_samples)``."""
    out = np.empty((len(stumps), X.shape[0]))
    for t, stump in enumerate(stumps):
        out[t] = stump.predict(X)
    return out


class ExactStumpSearch:
    """Exhaustive stump search over presorted feature values.

    Sorting happens once, in the constructor; each call to :meth:`best` is one pass of cumulative
    sums per feature, ``O(n_samples * n_features)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training features, finite or NaN.
    active : ndarray of bool, shape (n_samples,), default=None
        Rows that may carry weight. Thresholds are placed only between values of active rows, so
        a row of zero sample weight changes nothing, exactly as if it had been removed.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0], [2.0], [3.0], [4.0]])
    >>> y = np.array([-1.0, -1.0, 1.0, 1.0])
    >>> stump, error = ExactStumpSearch(X).best(np.full(4, 0.25), y)
    >>> stump.threshold, stump.polarity, error
    (2.5, 1, 0.0)
    """

    def __init__(self, X: np.ndarray, active: np.ndarray | None = None) -> None:
        n_samples, n_features = X.shape
        if active is None:
            active = np.ones(n_samples, dtype=bool)
        self.n_features = n_features
        self._X = X
        self._order: list[np.ndarray] = []  # active, non-missing rows sorted by value
        self._split_after: list[np.ndarray] = []  # positions i with x[i] < x[i+1] in that order
        self._thresholds: list[np.ndarray] = []  # -inf, then the midpoints at those positions
        self._missing: list[np.ndarray] = []  # active rows with NaN in this feature
        for j in range(n_features):
            column = X[:, j]
            present = active & ~np.isnan(column)
            rows = np.flatnonzero(present)
            order = rows[np.argsort(column[rows], kind="stable")]
            values = column[order]
            split_after = np.flatnonzero(values[:-1] < values[1:])
            lo, hi = values[split_after], values[split_after + 1]
            mid = lo / 2.0 + hi / 2.0  # halves first: no overflow near the float limits
            mid = np.where(mid >= hi, lo, mid)  # adjacent floats: keep lo on the left side
            self._order.append(order)
            self._split_after.append(split_after)
            self._thresholds.append(np.concatenate([[-np.inf], mid]))
            self._missing.append(np.flatnonzero(active & np.isnan(column)))

    def best(self, weights: np.ndarray, y: np.ndarray) -> tuple[DecisionStump, float]:
        """Stump of least weighted error ``sum(weights[h(X) != y])`` and that error.

        Errors within :data:`TIE_TOLERANCE` are ties; they go to the lowest feature index, then
        the lowest threshold, polarity +1 first, NaN on the left first.
        """
        pos = np.where(y > 0, weights, 0.0)
        neg = np.where(y > 0, 0.0, weights)
        best_error, best_stump = np.inf, None
        for j in range(self.n_features):
            order = self._order[j]
            # Weight of positives / negatives at or left of each candidate split (first: none).
            cum_pos = np.concatenate([[0.0], np.cumsum(pos[order])[self._split_after[j]]])
            cum_neg = np.concatenate([[0.0], np.cumsum(neg[order])[self._split_after[j]]])
            pos_total, neg_total = pos[order].sum(), neg[order].sum()
            missing = self._missing[j]
            pos_missing, neg_missing = pos[missing].sum(), neg[missing].sum()
            # Polarity +1 predicts -1 on the left: errors are left positives and right negatives.
            err_plus = cum_pos + (neg_total - cum_neg)
            err_minus = cum_neg + (pos_total - cum_pos)
            # Rows 0-3: (polarity, missing side) = (+1, left), (+1, right), (-1, left), (-1, right).
            errors = np.stack(
                [
                    err_plus + pos_missing,
                    err_plus + neg_missing,
                    err_minus + neg_missing,
                    err_minus + pos_missing,
                ]
            )
            if missing.size == 0:
                errors = errors[[0, 2]]  # the missing side is decided below, not by the error
            by_threshold = errors.T.ravel()  # threshold-major: the lowest threshold wins ties
            flat = int(np.argmax(by_threshold <= by_threshold.min() + TIE_TOLERANCE))
            error = float(by_threshold[flat])
            if error < best_error - TIE_TOLERANCE:
                position, combo = divmod(flat, errors.shape[0])
                if missing.size:
                    polarity = 1 if combo < 2 else -1
                    missing_right = combo % 2 == 1
                else:
                    polarity = 1 if combo == 0 else -1
                    # No NaN seen in training: send NaN to the side holding more weight.
                    left_weight = cum_pos[position] + cum_neg[position]
                    missing_right = left_weight <= (pos_total + neg_total) / 2.0
                best_error = error
                best_stump = DecisionStump(
                    feature=j,
                    threshold=float(self._thresholds[j][position]),
                    polarity=polarity,
                    missing_right=bool(missing_right),
                )
        if best_stump is None:
            raise ValueError("no stump can be formed: X has no feature columns")
        error = max(best_error, 0.0)
        return replace(best_stump, gain=1.0 - 2.0 * error), error

    def outputs(self, stump: BaseLearner) -> np.ndarray:
        """``h(x_n)`` in {-1.0, +1.0} for the training rows: ``stump.predict(X)``."""
        return stump.predict(self._X)

    def restricted(self, active: np.ndarray) -> ExactStumpSearch:
        """The search over the same rows with thresholds from the rows ``active`` only."""
        return ExactStumpSearch(self._X, active=active)


# --- Binned search -------------------------------------------------------------------------------


@numba.njit(cache=True)
def _best_split(hist, n_bins, occupied, bin_values, tol):  # pragma: no cover - compiled
    """Scan every bin boundary of every feature, as :meth:`ExactStumpSearch.best` scans values.

    Position ``p`` sends bins ``< p`` left (``p = 0``: threshold ``-inf``). ``occupied[j, b]``
    says whether any of the search's rows lies in bin ``b`` (``occupied[j, 255]``: is missing
    feature ``j``). Positions separated only by unoccupied bins split the rows alike and tie;
    the winner is then not the lowest of that run but, for an exactly binned feature
    (``bin_values[j]``: its values, NaN otherwise), the split at the exact search's threshold
    halfway between the two values of the search's rows around the run, and for other
    features its middle. Returns the feature, position,
    polarity, missing side and error of the winner (feature -1 if none, e.g. NaN).
    """
    d = hist.shape[0]
    cum_pos = np.empty(256)
    cum_neg = np.empty(256)
    best_error = np.inf
    best_j, best_p, best_polarity, best_missing_right = -1, 0, 1, False
    for j in range(d):
        nb = n_bins[j]
        cp, cn = 0.0, 0.0
        for b in range(nb):
            cum_pos[b] = cp  # weight of positives / negatives left of position b
            cum_neg[b] = cn
            cp += hist[j, b, 1]
            cn += hist[j, b, 0]
        pos_total, neg_total = cp, cn
        pos_missing, neg_missing = hist[j, MISSING_BIN, 1], hist[j, MISSING_BIN, 0]
        missing = occupied[j, MISSING_BIN]
        # Combos: 0 (+1, NaN left), 1 (+1, NaN right), 2 (-1, NaN left), 3 (-1, NaN right); with
        # no NaN among the active rows only 0 and 2 compete and the NaN side is decided after.
        lowest = np.inf
        for p in range(nb):
            err_plus = cum_pos[p] + (neg_total - cum_neg[p])
            err_minus = cum_neg[p] + (pos_total - cum_pos[p])
            lowest = min(lowest, err_plus + pos_missing, err_minus + neg_missing)
            if missing:
                lowest = min(lowest, err_plus + neg_missing, err_minus + pos_missing)
        limit = lowest + tol
        error, position, combo = np.inf, -1, -1
        for p in range(nb):  # threshold-major: the lowest threshold wins ties
            err_plus = cum_pos[p] + (neg_total - cum_neg[p])
            err_minus = cum_neg[p] + (pos_total - cum_pos[p])
            e0, e2 = err_plus + pos_missing, err_minus + neg_missing
            e1, e3 = err_plus + neg_missing, err_minus + pos_missing
            if e0 <= limit:
                error, combo = e0, 0
            elif missing and e1 <= limit:
                error, combo = e1, 1
            elif e2 <= limit:
                error, combo = e2, 2
            elif missing and e3 <= limit:
                error, combo = e3, 3
            if combo >= 0:
                position = p
                break
        if position > 0:  # a run of positions parted by unoccupied bins only
            last = position
            while last < nb - 1 and not occupied[j, last]:
                last += 1
            if last > position:
                lo, hi = bin_values[j, position - 1], bin_values[j, last]
                if lo == lo and hi == hi:  # exact bins: at the midpoint of lo and hi
                    mid = lo / 2.0 + hi / 2.0
                    if mid >= hi:
                        mid = lo
                    while position < last and bin_values[j, position] <= mid:
                        position += 1
                else:
                    position += (last - position + 1) // 2
        if combo >= 0 and error < best_error - tol:
            best_error, best_j, best_p = error, j, position
            best_polarity = 1 if combo < 2 else -1
            if missing:
                best_missing_right = combo % 2 == 1
            else:  # no NaN seen in training: send NaN to the side holding more weight
                left_weight = cum_pos[position] + cum_neg[position]
                best_missing_right = left_weight <= (pos_total + neg_total) / 2.0
    return best_j, best_p, best_polarity, best_missing_right, best_error


@numba.njit(cache=True)
def _best_categorical_stumps(
    hist, is_cat, n_bins, counts, cat_smooth, min_data_per_group, tol, best_error
):  # pragma: no cover - compiled
    """The best categorical stump over the features ``is_cat[j]`` (bins are codes), if its error
    is below ``best_error - tol``: the error is additive per category, so for polarity +1 a
    category goes left (where ``h = -1``) iff its positive weight is below its negative weight
    (the mirror image for -1). A category of fewer than ``cat_smooth`` rows (``counts``) goes
    right, a left set of fewer than ``min_data_per_group`` rows is dropped (all right); the NaN
    group takes the same rule when occupied, else the heavier side. Ties: lowest feature, then
    polarity +1. Returns the feature (-1: none better), polarity, missing side, error and the
    four words (int64 patterns) of the left set; codes without rows follow NaN."""
    best_j, best_polarity, best_missing_right = -1, 1, True
    words = np.zeros(4, dtype=np.int64)
    for j in range(hist.shape[0]):
        if not is_cat[j]:
            continue
        nb = n_bins[j]
        for polarity in (1, -1):
            error, left_rows, left_weight, total = 0.0, 0.0, 0.0, 0.0
            for k in range(nb):
                pos, neg = hist[j, k, 1], hist[j, k, 0]
                total += pos + neg
                goes = (pos < neg if polarity == 1 else neg < pos) and counts[j, k] >= cat_smooth
                if goes and counts[j, k] > 0:
                    left_rows += counts[j, k]
            drop = left_rows < min_data_per_group
            for k in range(nb):
                pos, neg = hist[j, k, 1], hist[j, k, 0]
                goes = (pos < neg if polarity == 1 else neg < pos) and counts[j, k] >= cat_smooth
                goes = goes and not drop and counts[j, k] > 0
                if goes:  # left predicts -polarity
                    error += pos if polarity == 1 else neg
                    left_weight += pos + neg
                else:
                    error += neg if polarity == 1 else pos
            pos, neg = hist[j, MISSING_BIN, 1], hist[j, MISSING_BIN, 0]
            if counts[j, MISSING_BIN] > 0:
                missing_left = pos < neg if polarity == 1 else neg < pos
                error += (
                    (pos if polarity == 1 else neg)
                    if missing_left
                    else (neg if polarity == 1 else pos)
                )
            else:  # no NaN seen: to the side holding more weight
                missing_left = left_weight > total / 2.0
            if error < best_error - tol:
                best_error, best_j, best_polarity = error, j, polarity
                best_missing_right = not missing_left
                words[:] = 0
                for k in range(256):
                    goes = False
                    if k < nb and counts[j, k] > 0:
                        pos, neg = hist[j, k, 1], hist[j, k, 0]
                        goes = (
                            (pos < neg if polarity == 1 else neg < pos)
                            and (counts[j, k] >= cat_smooth)
                            and not drop
                        )
                    else:
                        goes = missing_left  # a code without rows follows NaN
                    if goes:
                        words[k >> 6] |= np.int64(1) << np.int64(k & 63)
    return best_j, best_polarity, best_missing_right, best_error, words


@threaded_kernel(cache=True)
def _stump_outputs(column, position, polarity, missing_right):  # pragma: no cover - compiled
    """``h`` of the training rows from one binned column: bins ``>= position`` on the right."""
    n = column.shape[0]
    out = np.empty(n)
    right_value = float(polarity)
    left_value = -right_value
    for i in numba.prange(n):
        b = column[i]
        right = missing_right if b == MISSING_BIN else b >= position
        out[i] = right_value if right else left_value
    return out


def best_binned_stump(
    hist: np.ndarray,
    binner: FeatureBinner,
    occupied: np.ndarray,
    counts: np.ndarray | None = None,
    cat_smooth: float = CAT_SMOOTH,
    min_data_per_group: float = 10.0,
) -> tuple[DecisionStump, float]:
    """The stump of least weighted error from a :func:`binned_histogram` of the weights.

    Returns the stump (with its ``split_bin``: bins ``<= split_bin`` go left) and its error.
    ``occupied`` is :func:`occupied_bins` of the search's rows. Errors within
    :data:`TIE_TOLERANCE` are ties, broken as in :meth:`ExactStumpSearch.best`, except that a
    run of positions parted only by unoccupied bins gives its middle one. A
    histogram whose weights do not sum to one (beyond rounding) is normalised first (in
    place), and the error is that of the normalised weights. A categorical feature
    (``binner.is_categorical_``) gives a stump on a set of codes
    (:func:`_best_categorical_stumps`, with ``counts``: the search's rows per bin, needed then;
    ``cat_smooth`` and ``min_data_per_group`` in rows); it wins only with an error lower by
    more than :data:`TIE_TOLERANCE`.
    """
    total = float(hist[0].sum())
    if not np.isfinite(total):
        raise ValueError("weights must be finite")
    if total > 0.0 and abs(total - 1.0) > 1e-9:
        hist /= total
    feature, position, polarity, missing_right, error = _best_split(
        hist, binner.n_bins_, occupied, binner.bin_values_, TIE_TOLERANCE
    )
    is_cat = getattr(binner, "is_categorical_", None)
    if is_cat is not None and is_cat.any():
        if counts is None:
            raise ValueError("a search over categorical features needs the bins' row counts")
        cat = _best_categorical_stumps(
            hist, is_cat, binner.n_bins_, counts, float(cat_smooth), float(min_data_per_group),
            TIE_TOLERANCE, error if feature >= 0 else np.inf,
        )  # fmt: skip
        if cat[0] >= 0:
            error = max(float(cat[3]), 0.0)
            stump = DecisionStump(
                feature=int(cat[0]),
                threshold=float("nan"),
                polarity=int(cat[1]),
                missing_right=bool(cat[2]),
                split_bin=-1,
                gain=1.0 - 2.0 * error,
                left_categories=(
                    int(cat[4][0]) & _WORD,
                    int(cat[4][1]) & _WORD,
                    int(cat[4][2]) & _WORD,
                    int(cat[4][3]) & _WORD,
                ),
            )
            return stump, error
    if feature < 0:
        raise ValueError("no stump could be scored: are the weights and labels finite?")
    threshold = -np.inf if position == 0 else binner.thresholds_[feature][position - 1]
    error = max(float(error), 0.0)
    stump = DecisionStump(
        feature=int(feature),
        threshold=float(threshold),
        polarity=int(polarity),
        missing_right=bool(missing_right),
        split_bin=int(position) - 1,
        gain=1.0 - 2.0 * error,
    )
    return stump, error


def binned_stump_outputs(column: np.ndarray, position: int, stump: DecisionStump) -> np.ndarray:
    """``h`` of rows from their bins of the stump's feature: bins ``>= position`` (and the
    missing bin if ``stump.missing_right``) are on the right, where ``h = stump.polarity``."""
    return _stump_outputs(column, position, stump.polarity, stump.missing_right)


class BinnedStumpSearch:
    """Stump search over binned features: one compiled histogram pass per call.

    The same contract as :class:`ExactStumpSearch`: :meth:`best` returns the stump of least
    weighted error (section 6 and S.6: the stump of largest approximate mode is the one of least
    weighted error), with the same error formulas and tie rules. The candidate thresholds are the
    bin edges of a :class:`~viboost.boosting.binning.FeatureBinner`, so a feature with at most
    ``max_bins`` distinct active values gives exactly the thresholds of the exact search, and any
    other feature is split at (at most ``max_bins - 1``) quantile edges. Each call to :meth:`best`
    costs one pass over the ``(n_samples, n_features)`` ``uint8`` bins plus ``O(n_features * 256)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training features, finite or NaN.
    active : ndarray of bool, shape (n_samples,), default=None
        Rows that may carry weight. Bin edges are placed from active rows only and the weights of
        inactive rows are ignored, so a row of zero sample weight changes nothing.
    max_bins : int, default=255
        Most bins per feature, from 2 to 255.
    subsample : int, default=200_000
        Most rows drawn to place quantile edges (see
        :class:`~viboost.boosting.binning.FeatureBinner`).
    random_state : int, RandomState, Generator or None, default=None
        Source of that subsample.
    n_categories : ndarray of int64, shape (n_features,), default=None
        Per feature, 0 (numeric) or its number of categories (values the codes ``0 .. K-1``):
        split by sets of codes (:func:`best_binned_stump`, issue 53). None: all numeric.
    cat_smooth : float, default=10.0
        A category of fewer rows goes right in a categorical stump.
    min_data_per_group : float, default=10.0
        A categorical stump's left set of fewer rows is dropped (every category right).

    Attributes
    ----------
    binner_ : FeatureBinner
        The fitted binner; ``binner_.thresholds_[j]`` are feature ``j``'s candidate thresholds
        (after ``-inf``).
    binned_ : ndarray of uint8, shape (n_samples, n_features)
        Bins of ``X``, row-major (read by the histogram).
    binned_columns_ : ndarray of uint8, shape (n_features, n_samples)
        The same bins, one contiguous row per feature (read by :meth:`outputs`).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [2.0, 1.0], [3.0, 0.0], [4.0, np.nan]])
    >>> y = np.array([-1.0, -1.0, 1.0, 1.0])
    >>> search = BinnedStumpSearch(X)
    >>> stump, error = search.best(np.full(4, 0.25), y)
    >>> stump, error
    (DecisionStump(feature=0, threshold=2.5, polarity=1, missing_right=True), 0.0)
    >>> search.outputs(stump)
    array([-1., -1.,  1.,  1.])
    """

    def __init__(
        self,
        X: np.ndarray,
        active: np.ndarray | None = None,
        max_bins: int = 255,
        subsample: int = 200_000,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        n_categories: np.ndarray | None = None,
        cat_smooth: float = CAT_SMOOTH,
        min_data_per_group: float = 10.0,
    ) -> None:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
        n_samples, n_features = X.shape
        if n_features == 0:
            raise ValueError("no stump can be formed: X has no feature columns")
        if active is None:
            active = np.ones(n_samples, dtype=bool)
        active = np.ascontiguousarray(active, dtype=bool)
        if active.shape != (n_samples,):
            raise ValueError(f"active must have shape ({n_samples},), got {active.shape}")
        self.n_features = n_features
        self.binner_ = FeatureBinner(
            max_bins=max_bins,
            subsample=subsample,
            random_state=random_state,
            n_categories=n_categories,
        ).fit(X, active)
        self.binned_ = self.binner_.transform(X)
        self.binned_columns_ = transpose_bins(self.binned_)
        self.cat_smooth = float(cat_smooth)
        self.min_data_per_group = float(min_data_per_group)
        self._active = active
        # Which bins hold active rows (weight-free; column 255: missing values).
        self._occupied = occupied_bins(self.binned_, active)
        self._counts = self._category_counts(active)

    def restricted(self, active: np.ndarray) -> BinnedStumpSearch:
        """A search over the same bins for the rows ``active`` (a subset of this search's rows,
        e.g. a cross-fitting fold): binning is shared, nothing is copied."""
        active = np.ascontiguousarray(active, dtype=bool)
        if active.shape != self._active.shape:
            raise ValueError(f"active must have shape {self._active.shape}, got {active.shape}")
        other = BinnedStumpSearch.__new__(BinnedStumpSearch)
        other.n_features = self.n_features
        other.binner_ = self.binner_
        other.binned_ = self.binned_
        other.binned_columns_ = self.binned_columns_
        other.cat_smooth = self.cat_smooth
        other.min_data_per_group = self.min_data_per_group
        other._active = active
        other._occupied = occupied_bins(self.binned_, active)
        other._counts = other._category_counts(active)
        return other

    def _category_counts(self, active: np.ndarray) -> np.ndarray | None:
        """The active rows per bin of each categorical feature (None when there is none)."""
        is_cat = self.binner_.is_categorical_
        if not is_cat.any():
            return None
        counts = np.zeros((self.n_features, 256))
        for j in np.flatnonzero(is_cat):
            counts[j] = np.bincount(self.binned_columns_[j][active], minlength=256)
        return counts

    def best(self, weights: np.ndarray, y: np.ndarray) -> tuple[DecisionStump, float]:
        """Stump of least weighted error ``sum(weights[h(X) != y])`` and that error.

        Errors within :data:`TIE_TOLERANCE` are ties; they go to the lowest feature index, then
        the lowest threshold, polarity +1 first, NaN on the left first. Weights of the active rows
        that do not sum to one (beyond rounding) are normalised first, and the error is that of
        the normalised weights.
        """
        n_samples = self.binned_.shape[0]
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        if weights.shape != (n_samples,) or y.shape != (n_samples,):
            raise ValueError(
                f"weights and y must have shape ({n_samples},), got {weights.shape} and {y.shape}"
            )
        hist = binned_histogram(self.binned_, weights, y, self._active)
        return best_binned_stump(
            hist, self.binner_, self._occupied, getattr(self, "_counts", None),
            getattr(self, "cat_smooth", CAT_SMOOTH), getattr(self, "min_data_per_group", 10.0),
        )  # fmt: skip

    def split_bin(self, stump: DecisionStump) -> int:
        """The bin ``b`` such that ``stump`` sends bins ``<= b`` of its feature left.

        -1 for the threshold ``-inf``. Raises ``ValueError`` when the threshold is not one of this
        search's candidate thresholds (a stump it did not return).
        """
        if not 0 <= stump.feature < self.n_features:
            raise ValueError(
                f"stump feature {stump.feature} is out of range for {self.n_features} features"
            )
        if stump.left_categories is not None:
            raise ValueError("a categorical stump splits by a set of codes, not at a bin")
        if stump.threshold == -np.inf:
            return -1
        edges = self.binner_.thresholds_[stump.feature]
        b = int(np.searchsorted(edges, stump.threshold))
        if b == edges.size or edges[b] != stump.threshold:
            raise ValueError(
                f"threshold {stump.threshold!r} is not a bin edge of feature {stump.feature}; "
                "use stump.predict(X) for stumps this search did not return"
            )
        return b

    def outputs(self, stump: BaseLearner) -> np.ndarray:
        """``h(x_n)`` in {-1.0, +1.0} for the training rows, equal to ``stump.predict(X)``.

        Read from the binned column, so ``stump`` must be one this search returned (or share its
        threshold with one).
        """
        if not isinstance(stump, DecisionStump):
            raise TypeError(f"a stump search has no outputs of a {type(stump).__name__}")
        if stump.split_bin is None:
            stump = replace(stump, split_bin=self.split_bin(stump))
        return stump.binned_outputs(self.binned_columns_)
