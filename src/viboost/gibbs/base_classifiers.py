"""The base classifiers of a fitted :class:`~viboost.VIBoostClassifier`, as the Gibbs sampler
takes them.

Section 2 of the paper weighs a fixed set of base classifiers ``f_m``; a VIBoost fit gives them
as its ``estimators_``:

- a :class:`~viboost.boosting.stumps.DecisionStump` (``preset="paper"``) is one +-1 classifier;
- a :class:`~viboost.boosting.trees.HistogramTree` with tied leaves (``leaf_weights="tied"``) is
  one +-1 classifier (each leaf labelled +-1), like a stump;
- a :class:`~viboost.boosting.trees.HistogramTree` with per-leaf weights (the default) is one
  base classifier per leaf, the leaf's indicator ``1{x in leaf l}`` (:class:`LeafIndicator`,
  0 outside the leaf and 1 inside, not +-1); the one-leaf tree a per-leaf fit starts with is the
  intercept, the indicator of every ``x``.

:func:`distinct_base_classifiers` lists them once each, in order of first selection, with a name
per classifier, and :func:`base_outputs` computes the ``N x M`` matrix of their outputs: a dense
array of +-1 for stumps and tied trees, a ``scipy.sparse`` CSR matrix (one nonzero per tree and
row) as soon as there are leaf indicators.

Duplicates merge only when they are the same function of ``x`` (or, for a +-1 classifier, its
negation, a sign of the weight): stumps by feature, threshold and side of missing values (as
before trees), trees and leaves by the *region* of each leaf, the interval ``(lo, hi]`` and the
side of missing values that its path sets on each feature (:func:`leaf_regions`). Two leaves with
the same region are the same indicator wherever they come from (a leaf repeated in a later tree,
or a later one-leaf tree and the intercept); leaves of different regions never merge, even when
they hold the same training rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from viboost.boosting.stumps import DecisionStump, predict_stumps
from viboost.boosting.trees import HistogramTree

__all__ = [
    "LeafIndicator",
    "base_outputs",
    "distinct_base_classifiers",
    "leaf_regions",
    "unique_stumps",
]

#: A leaf's region: per constrained feature ``(feature, lo, hi, missing_inside)`` (or ``(feature,
#: "in", codes, missing_inside)``, :func:`leaf_regions`), sorted; ``x``
#: is in it when, for each entry, ``lo < x_j <= hi`` or (``x_j`` is NaN and ``missing_inside``).
Region = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True, eq=False)
class LeafIndicator:
    """The base classifier ``1{x in leaf l}`` of a tree with per-leaf weights.

    Parameters
    ----------
    tree : HistogramTree
        The fitted tree (``leaf_weights="per-leaf"``).
    leaf : int
        The leaf's number, in the tree's leaf order (``tree.leaves[leaf]`` is its node).
    estimator : int
        The tree's position in the classifier's ``estimators_``.
    """

    tree: HistogramTree
    leaf: int
    estimator: int

    @property
    def name(self) -> str:
        """``"intercept"`` for a one-leaf tree, else ``"tree{estimator}_leaf{leaf}"``."""
        return _leaf_name(self.tree, self.estimator, self.leaf)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``1.0`` for the rows of the 2-D array ``X`` in the leaf, ``0.0`` elsewhere."""
        return (leaf_numbers(self.tree, X) == self.leaf).astype(np.float64)


def _leaf_name(tree: HistogramTree, estimator: int, leaf: int) -> str:
    return "intercept" if tree.n_leaves == 1 else f"tree{estimator}_leaf{leaf}"


def unique_stumps(stumps: list[DecisionStump]) -> list[DecisionStump]:
    """The distinct base classifiers among ``stumps``, in order of first selection.

    A stump and its negation (same feature, threshold and side of missing values, opposite
    polarity) are one base classifier up to the sign of its weight; section 2 assumes ``h`` and
    ``-h`` are not both in the set, so the first polarity seen is kept.
    """
    seen: set[tuple[int, object, bool]] = set()
    out = []
    for stump in stumps:
        # A categorical stump's threshold is NaN: its category set identifies it.
        key = (
            int(stump.feature),
            float(stump.threshold) if stump.left_categories is None else stump.left_categories,
            bool(stump.missing_right),
        )
        if key not in seen:
            seen.add(key)
            out.append(stump)
    return out


#: Every code a categorical split can test (:data:`~viboost.boosting.learners.NODE_DTYPE`'s
#: 256-bit ``left_categories``).
_ALL_CODES = (1 << 256) - 1


def leaf_regions(tree: HistogramTree) -> list[Region]:
    """The region of each leaf of ``tree`` (in leaf order), in a canonical form.

    A split on feature ``j`` at ``threshold`` sends ``x_j <= threshold`` left and NaN to its
    missing side; along a leaf's path each feature keeps the interval ``(lo, hi]`` of the splits
    on it and whether NaN followed the path at all of them. Features that the path leaves
    unconstrained (``(-inf, inf]`` with NaN inside) are dropped, so equal regions give equal
    tuples; the intercept's region is ``()``. A split on a categorical feature constrains it to
    a set of codes instead, ``(j, "in", codes, nan_inside)`` with the codes as the bits of one
    integer (a split sends the codes of its ``left_categories`` left, the others right).
    """
    nodes = tree.nodes
    regions: dict[int, Region] = {}
    stack: list[tuple[int, dict[int, tuple]]] = [(0, {})]
    while stack:
        node, bounds = stack.pop()
        record = nodes[node]
        if record["is_leaf"]:
            regions[node] = tuple(
                sorted(
                    (j, *bound)
                    for j, bound in bounds.items()
                    if bound not in ((-np.inf, np.inf, True), ("in", _ALL_CODES, True))
                )
            )
            continue
        j = int(record["feature"])
        missing_left = bool(record["missing_left"])
        if record["is_categorical"]:
            # A category-set split: the codes still allowed, as one 256-bit integer.
            words = [int(w) for w in np.asarray(record["left_categories"], dtype="<u8")]
            left_set = sum(w << (64 * k) for k, w in enumerate(words))
            _, allowed, inside = bounds.get(j, ("in", _ALL_CODES, True))
            stack.append(
                (int(record["left"]), {**bounds, j: ("in", allowed & left_set,
                                                     inside and missing_left)})
            )  # fmt: skip
            stack.append(
                (int(record["right"]), {**bounds, j: ("in", allowed & ~left_set & _ALL_CODES,
                                                      inside and not missing_left)})
            )  # fmt: skip
            continue
        cut = float(record["threshold"])
        lo, hi, inside = bounds.get(j, (-np.inf, np.inf, True))
        stack.append(
            (int(record["left"]), {**bounds, j: (lo, min(hi, cut), inside and missing_left)})
        )
        stack.append(
            (int(record["right"]), {**bounds, j: (max(lo, cut), hi, inside and not missing_left)})
        )
    return [regions[int(node)] for node in tree.leaves]


def _tied_key(tree: HistogramTree, sign: float) -> tuple:
    """A tied tree as a function: its leaves' regions with their (signed) labels, sorted."""
    return tuple(sorted(zip(leaf_regions(tree), (sign * tree.leaf_values).tolist(), strict=True)))


def _check_tied_tree(tree: HistogramTree, t: int) -> None:
    values = tree.leaf_values
    if not np.all(np.abs(values) == 1.0):
        raise ValueError(
            f"estimators_[{t}] is a tree with tied leaves whose leaf values are not all -1 or +1 "
            f"({values.tolist()[:5]}); it is not a +-1 base classifier."
        )


def distinct_base_classifiers(
    estimators: Sequence[object],
) -> tuple[list[DecisionStump | HistogramTree | LeafIndicator], list[str]]:
    """The distinct base classifiers of a fit's ``estimators_`` and their names.

    Stumps (named ``"stump{t}"``) and tied trees (``"tree{t}"``) are +-1 classifiers, merged
    with earlier equal or negated ones; each leaf of a per-leaf tree is a
    :class:`LeafIndicator` (``"tree{t}_leaf{l}"``, or ``"intercept"`` for a one-leaf tree),
    merged with an earlier leaf of the same region. ``t`` is the position in ``estimators_`` of
    the first occurrence, ``l`` the leaf's number in that tree.

    Raises
    ------
    TypeError
        If an estimator is neither a DecisionStump nor a HistogramTree.
    ValueError
        If a tied tree has a leaf value other than -1 or +1.
    """
    learners: list[DecisionStump | HistogramTree | LeafIndicator] = []
    names: list[str] = []
    seen: set[tuple] = set()
    for t, estimator in enumerate(estimators):
        if isinstance(estimator, DecisionStump):
            key: tuple[object, ...] = (
                "stump",
                int(estimator.feature),
                float(estimator.threshold),
                bool(estimator.missing_right),
            )
            if key not in seen:
                seen.add(key)
                learners.append(estimator)
                names.append(f"stump{t}")
        elif isinstance(estimator, HistogramTree) and estimator.per_leaf:
            for leaf, region in enumerate(leaf_regions(estimator)):
                key = ("leaf", region)
                if key not in seen:
                    seen.add(key)
                    learners.append(LeafIndicator(estimator, leaf, t))
                    names.append(_leaf_name(estimator, t, leaf))
        elif isinstance(estimator, HistogramTree):
            _check_tied_tree(estimator, t)
            key, negated = ("tied", _tied_key(estimator, 1.0)), ("tied", _tied_key(estimator, -1.0))
            if key not in seen and negated not in seen:
                seen.add(key)
                learners.append(estimator)
                names.append(f"tree{t}")
        else:
            raise TypeError(
                f"estimators_[{t}] is a {type(estimator).__name__}; the Gibbs sampler takes "
                "decision stumps and histogram trees."
            )
    return learners, names


def leaf_numbers(tree: HistogramTree, X: np.ndarray) -> np.ndarray:
    """The leaf number (in leaf order) that each row of ``X`` reaches in ``tree``."""
    numbered = tree.with_leaf_values(np.arange(tree.n_leaves, dtype=np.float64))
    return numbered.predict(X).astype(np.int64)


def base_outputs(
    learners: Sequence[DecisionStump | HistogramTree | LeafIndicator], X: np.ndarray
) -> np.ndarray | sp.csr_matrix:
    """The ``(n_samples, M)`` matrix of ``f_m(x_n)`` of ``learners`` on the rows of ``X``.

    A dense array of +-1 when every learner is a +-1 classifier; with leaf indicators a CSR
    matrix whose nonzeros are the +-1 outputs and the 1s of the leaves (each tree is walked once,
    whatever the number of its leaves kept).
    """
    n_rows = X.shape[0]
    stumps = [learner for learner in learners if isinstance(learner, DecisionStump)]
    if len(stumps) == len(learners):
        return np.ascontiguousarray(predict_stumps(stumps, X).T)
    if not any(isinstance(learner, LeafIndicator) for learner in learners):
        out = np.empty((n_rows, len(learners)))
        for m, learner in enumerate(learners):
            out[:, m] = learner.predict(X)
        return out
    rows, cols, values = [], [], []
    numbers: dict[int, np.ndarray] = {}  # leaf numbers by estimator, one tree walk each
    all_rows = np.arange(n_rows)
    for m, learner in enumerate(learners):
        if isinstance(learner, LeafIndicator):
            if learner.estimator not in numbers:
                numbers[learner.estimator] = leaf_numbers(learner.tree, X)
            inside = np.flatnonzero(numbers[learner.estimator] == learner.leaf)
            rows.append(inside)
            cols.append(np.full(inside.size, m))
            values.append(np.ones(inside.size))
        else:
            rows.append(all_rows)
            cols.append(np.full(n_rows, m))
            values.append(np.asarray(learner.predict(X), dtype=np.float64))
    matrix = sp.csr_matrix(
        (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_rows, len(learners)),
    )
    matrix.sort_indices()
    return matrix
