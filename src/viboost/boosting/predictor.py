"""Prediction of a fitted ensemble ``H(x) = sum_t alpha_t h_t(x)`` from node arrays.

Every base learner exposes its nodes (:data:`~viboost.boosting.learners.NODE_DTYPE`); an
:class:`EnsemblePredictor` concatenates them once, as scikit-learn HGB's ``TreePredictor`` and
LightGBM's model arrays do, with each leaf value already multiplied by its learner's weight, and
predicts with one compiled pass over the rows. Every split's test on a raw value is
:func:`goes_left_raw` (numeric: ``x <= threshold``; categorical: the code's bit in the split's
set; NaN and invalid codes: the missing side), shared with :mod:`viboost.boosting.tree_shap`.
Rows go in blocks; within a block the learners are taken in order, so each row adds its
terms in the order ``t = 0, 1, ...`` and the margin is
bit-identical to ``margin += alpha_t * h_t.predict(X)`` round by round from zeros (a leaf value
of a stump is +-1, and a product by +-1 is exact). An ensemble of stumps (each a split and two
leaves) takes a kernel without the tree walk, as fast as a kernel written for stumps alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.learners import NODE_DTYPE, BaseLearner, current_nodes

__all__ = ["EnsemblePredictor", "goes_left_raw", "predict_ensemble"]

# Rows per block of the prediction kernel.
_BLOCK_ROWS = 256


@numba.njit(cache=True, inline="always")
def category_bit(bits, code):  # pragma: no cover - compiled
    """Whether bit ``code`` (an int in ``0 .. 255``) of the four uint64 words ``bits`` is set."""
    return (bits[code >> 6] >> np.uint64(code & 63)) & np.uint64(1) != np.uint64(0)


@numba.njit(cache=True, inline="always")
def goes_left_raw(x, threshold, missing_left, is_cat, bits):  # pragma: no cover - compiled
    """Whether a split sends the raw value ``x`` left: NaN to the missing side; a categorical
    split (``is_cat``) sends an integral ``0 <= x < 256`` left when its bit in ``bits`` (the
    node's ``left_categories``) is set and any other value (negative, fractional: not a code)
    to the missing side (HGB's rule); a numeric split sends ``x <= threshold`` left."""
    if x != x:
        return missing_left
    if is_cat:
        if x >= 0.0 and x < 256.0 and x == math.floor(x):
            return category_bit(bits, np.int64(x))
        return missing_left
    return x <= threshold


@threaded_kernel(cache=True)
def _stump_margin(  # pragma: no cover - compiled
    X, features, thresholds, left_values, right_values, missing_right, block
):
    """``sum_t alpha_t h_t(x)`` per row for depth-one learners (stumps), in learner order.

    ``left_values[t]`` and ``right_values[t]`` are alpha_t times the leaf values. Rows go in
    blocks: learner by learner over the block's rows, so the adds of different rows overlap (and
    vectorise) while each row still adds its terms in learner order.
    """
    n = X.shape[0]
    n_learners = features.shape[0]
    out = np.zeros(n)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        start, stop = c * block, min(n, (c + 1) * block)
        for t in range(n_learners):
            f, cut = features[t], thresholds[t]
            left_value, right_value = left_values[t], right_values[t]
            if missing_right[t]:  # right: x > cut or NaN, i.e. not x <= cut
                for i in range(start, stop):
                    out[i] += left_value if X[i, f] <= cut else right_value
            else:
                for i in range(start, stop):
                    out[i] += right_value if X[i, f] > cut else left_value
    return out


@threaded_kernel(cache=True)
def _tree_margin(  # pragma: no cover - compiled
    X, roots, feature, threshold, missing_left, left, right, is_leaf, scaled, block
):
    """``sum_t scaled[leaf_t(x)]`` per row for learners of any depth, in learner order.

    A split sends ``x <= threshold`` left and NaN left when ``missing_left``. Rows go in blocks,
    learner by learner over the block's rows, as :func:`_stump_margin`.
    """
    n = X.shape[0]
    n_learners = roots.shape[0]
    out = np.zeros(n)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        start, stop = c * block, min(n, (c + 1) * block)
        for t in range(n_learners):
            root = roots[t]
            for i in range(start, stop):
                node = root
                while not is_leaf[node]:
                    x = X[i, feature[node]]
                    if x != x:
                        node = left[node] if missing_left[node] else right[node]
                    elif x <= threshold[node]:
                        node = left[node]
                    else:
                        node = right[node]
                out[i] += scaled[node]
    return out


@threaded_kernel(cache=True)
def _stump_margin_categorical(  # pragma: no cover - compiled
    X, features, thresholds, left_values, right_values, missing_right, is_cat, bits, block
):
    """``sum_t alpha_t h_t(x)`` per row for depth-one learners (stumps), in learner order.

    ``left_values[t]`` and ``right_values[t]`` are alpha_t times the leaf values. Rows go in
    blocks: learner by learner over the block's rows, so the adds of different rows overlap (and
    vectorise) while each row still adds its terms in learner order. For an ensemble with a
    categorical stump (a numeric one takes :func:`_stump_margin`): a categorical stump
    (``is_cat[t]``) tests each row with :func:`goes_left_raw` against its words ``bits[t]``.
    """
    n = X.shape[0]
    n_learners = features.shape[0]
    out = np.zeros(n)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        start, stop = c * block, min(n, (c + 1) * block)
        for t in range(n_learners):
            f, cut = features[t], thresholds[t]
            left_value, right_value = left_values[t], right_values[t]
            if is_cat[t]:
                words, missing_left = bits[t], not missing_right[t]
                for i in range(start, stop):
                    left = goes_left_raw(X[i, f], cut, missing_left, True, words)
                    out[i] += left_value if left else right_value
            elif missing_right[t]:  # right: x > cut or NaN, i.e. not x <= cut
                for i in range(start, stop):
                    out[i] += left_value if X[i, f] <= cut else right_value
            else:
                for i in range(start, stop):
                    out[i] += right_value if X[i, f] > cut else left_value
    return out


@threaded_kernel(cache=True)
def _tree_margin_categorical(  # pragma: no cover - compiled
    X, roots, feature, threshold, missing_left, is_cat, bits, left, right, is_leaf, scaled, block
):
    """``sum_t scaled[leaf_t(x)]`` per row for learners of any depth, in learner order.

    A split sends ``x <= threshold`` left and NaN left when ``missing_left``; a categorical one
    the codes of its set (:func:`goes_left_raw`). Rows go in blocks, learner by learner over the
    block's rows, as :func:`_stump_margin`. (For an ensemble with a categorical split; a
    numeric one takes :func:`_tree_margin`, without the test of ``is_cat``.)
    """
    n = X.shape[0]
    n_learners = roots.shape[0]
    out = np.zeros(n)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        start, stop = c * block, min(n, (c + 1) * block)
        for t in range(n_learners):
            root = roots[t]
            for i in range(start, stop):
                node = root
                while not is_leaf[node]:
                    x = X[i, feature[node]]
                    if x != x:
                        node = left[node] if missing_left[node] else right[node]
                    elif is_cat[node]:
                        goes = goes_left_raw(
                            x, threshold[node], missing_left[node], True, bits[node]
                        )
                        node = left[node] if goes else right[node]
                    elif x <= threshold[node]:
                        node = left[node]
                    else:
                        node = right[node]
                out[i] += scaled[node]
    return out


class EnsemblePredictor:
    """The node arrays of a weighted ensemble, concatenated once, and its compiled prediction.

    Parameters
    ----------
    learners : sequence of BaseLearner
        The base classifiers ``h_t``.
    alphas : array-like of shape (len(learners),)
        Their weights ``alpha_t``.

    Examples
    --------
    >>> from viboost.boosting.stumps import DecisionStump
    >>> stumps = [DecisionStump(0, 1.0, 1, False), DecisionStump(1, 1.0, -1, True)]
    >>> predictor = EnsemblePredictor(stumps, [0.5, 0.25])
    >>> predictor.roots, predictor.scaled  # each stump's root; alpha_t times each leaf's value
    (array([0, 3]), array([ 0.  , -0.5 ,  0.5 ,  0.  ,  0.25, -0.25]))
    """

    def __init__(
        self, learners: Sequence[BaseLearner], alphas: np.ndarray | Sequence[float]
    ) -> None:
        alphas = np.asarray(alphas, dtype=np.float64)
        if alphas.shape != (len(learners),):
            raise ValueError(
                f"alphas must have shape ({len(learners)},) to match the learners, got "
                f"{alphas.shape}"
            )
        parts = [current_nodes(learner.nodes) for learner in learners]
        sizes = np.array([part.size for part in parts], dtype=np.int64)
        self.roots = (np.cumsum(sizes) - sizes).astype(np.int64)
        nodes = np.concatenate(parts) if parts else np.empty(0, dtype=NODE_DTYPE)
        offsets = np.repeat(self.roots, sizes)
        self.feature = np.ascontiguousarray(nodes["feature"])
        self.threshold = np.ascontiguousarray(nodes["threshold"])
        self.missing_left = np.ascontiguousarray(nodes["missing_left"])
        self.is_categorical = np.ascontiguousarray(nodes["is_categorical"])
        self.bitsets = np.ascontiguousarray(nodes["left_categories"])
        self.is_leaf = np.ascontiguousarray(nodes["is_leaf"])
        self.left = np.where(self.is_leaf, -1, nodes["left"] + offsets)
        self.right = np.where(self.is_leaf, -1, nodes["right"] + offsets)
        # Numeric ensembles take the kernels without the categorical test: it cost 10-15% of a
        # prediction (200,000 rows, 10 trees of 31 leaves or 50 stumps, 2 threads).
        self.any_categorical = bool(np.any(self.is_categorical & ~self.is_leaf))
        # alpha_t times each leaf's value: exactly alpha_t * h_t(x) on that leaf for a +-1 leaf.
        self.scaled = np.repeat(alphas, sizes) * nodes["value"]
        split = ~self.is_leaf
        self.max_feature = int(self.feature[split].max()) if split.any() else -1
        # Every learner a stump (a split and two leaves): the loop without the tree walk.
        self.stumps_only = bool(np.all(sizes == 3)) and not self.is_leaf[self.roots].any()

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """``H(x)`` for each row of the 2-D float array ``X`` (NaN: the learner's missing side)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
        if self.max_feature >= X.shape[1]:
            raise ValueError(f"a learner splits on a feature outside the {X.shape[1]} columns of X")
        if self.stumps_only:
            roots = self.roots
            stumps = (
                X,
                self.feature[roots],
                self.threshold[roots],
                self.scaled[self.left[roots]],
                self.scaled[self.right[roots]],
                ~self.missing_left[roots],
            )
            if not self.any_categorical:
                return _stump_margin(*stumps, _BLOCK_ROWS)
            return _stump_margin_categorical(
                *stumps, self.is_categorical[roots], self.bitsets[roots], _BLOCK_ROWS
            )
        if not self.any_categorical:
            return _tree_margin(
                X,
                self.roots,
                self.feature,
                self.threshold,
                self.missing_left,
                self.left,
                self.right,
                self.is_leaf,
                self.scaled,
                _BLOCK_ROWS,
            )
        return _tree_margin_categorical(
            X,
            self.roots,
            self.feature,
            self.threshold,
            self.missing_left,
            self.is_categorical,
            self.bitsets,
            self.left,
            self.right,
            self.is_leaf,
            self.scaled,
            _BLOCK_ROWS,
        )


def predict_ensemble(
    X: np.ndarray, learners: Sequence[BaseLearner], alphas: np.ndarray | Sequence[float]
) -> np.ndarray:
    """The ensemble margin ``H(x) = sum_t alphas[t] * h_t(x)`` for each row of ``X``.

    One compiled pass over the rows (:class:`EnsemblePredictor`), each summed in learner order
    ``t = 0, 1, ...``: bit-identical to ``margin += alphas[t] * learners[t].predict(X)`` round by
    round from zeros. A missing value goes to each split's missing side.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Features, finite or NaN.
    learners : sequence of BaseLearner
        The base classifiers ``h_t``.
    alphas : array-like of shape (len(learners),)
        Their weights.

    Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.stumps import DecisionStump
    >>> X = np.array([[0.0, 3.0], [2.0, np.nan]])
    >>> stumps = [DecisionStump(0, 1.0, 1, False), DecisionStump(1, 1.0, -1, True)]
    >>> predict_ensemble(X, stumps, [0.5, 0.25])
    array([-0.75,  0.25])
    """
    return EnsemblePredictor(learners, alphas).decision_function(X)
