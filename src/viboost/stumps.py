"""Decision stumps and the search for the best one: the base classifiers of VIBoost.

A decision stump ``h(x) = polarity * (+1 if x[feature] > threshold else -1)`` is the paper's base
classifier (section 6: "For all experiments we used decision stumps"). Missing values (NaN) go to
the side chosen at fit time, as in LightGBM and scikit-learn's HistGradientBoosting.

Structure of this module
------------------------
- :class:`DecisionStump` is one fitted base classifier, with ``predict``.
- :func:`predict_stumps` evaluates many stumps at once (the ``h_t(x)`` of the ensemble).
- :class:`StumpSearch` is the small interface the boosting loop talks to: built once per fit from
  ``X``, it answers ``best(weights, y)`` with the stump of least weighted error. Section 5 shows
  that the stump of largest approximate mode ``|alpha|`` (eq. appxmode) is the one of least
  weighted error under the weights ``phi_n * exp(-tau * y_n * H(x_n))``, so the loop only needs a
  weighted-error minimiser.
- :class:`ExactStumpSearch` is the reference engine: every feature, every threshold between two
  consecutive distinct training values (plus the threshold below all of them), both polarities,
  and both directions for missing values, scored with cumulative sums over a presorted order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["DecisionStump", "ExactStumpSearch", "StumpSearch", "predict_stumps"]

#: Weighted errors (of weights summing to one) closer than this are ties. Tied stumps are broken by
#: position, never by the rounding of a particular summation order, so that equal data weighted
#: two ways (repeated rows, integer sample weights) pick the same stump.
TIE_TOLERANCE = 1e-12


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

    Examples
    --------
    >>> import numpy as np
    >>> stump = DecisionStump(feature=0, threshold=0.5, polarity=1, missing_right=False)
    >>> stump.predict(np.array([[0.0], [1.0], [np.nan]]))
    array([-1.,  1., -1.])
    """

    feature: int
    threshold: float
    polarity: int
    missing_right: bool

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Return ``h(x)`` in {-1.0, +1.0} for each row of the 2-D array ``X``."""
        column = X[:, self.feature]
        right = column > self.threshold
        if self.missing_right:
            right |= np.isnan(column)
        return np.where(right, float(self.polarity), -float(self.polarity))


def predict_stumps(stumps: list[DecisionStump], X: np.ndarray) -> np.ndarray:
    """Outputs of several stumps, as an array of shape ``(len(stumps), n_samples)``."""
    out = np.empty((len(stumps), X.shape[0]))
    for t, stump in enumerate(stumps):
        out[t] = stump.predict(X)
    return out


class StumpSearch(Protocol):
    """What the boosting loop needs from a stump-search engine."""

    def best(self, weights: np.ndarray, y: np.ndarray) -> tuple[DecisionStump, float]:
        """Stump of least weighted error and that error.

        ``weights`` are nonnegative and sum to one; ``y`` holds labels in {-1, +1}.
        """
        ...


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
        return best_stump, max(best_error, 0.0)
