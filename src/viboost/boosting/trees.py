"""Histogram trees: base classifiers whose leaves partition the rows, grown best-first.

The paper's model takes any base classifiers ``h_t`` (section 2). A tree of ``L`` leaves gives
two of them:

- **per-leaf weights** (``leaf_weights="per-leaf"``): the base classifiers of a round are the
  ``L`` leaf indicators ``1{x in leaf l}``, each with its own weight ``c_l`` under the prior
  v-Log(u, 0, mu_0 1) of section 4. The leaves partition the rows, so q(c) of the round
  factorises over the leaves exactly and each leaf's posterior is S.4.1 restricted to the rows
  of that leaf (h = +1 there): a v-Log like a stump's q(c). The tree's leaf values are the modes
  of those posteriors (:func:`viboost.variational.run_round`), the tree is added with the
  learning rate as its ``alpha_t``;
- **tied weights** (``leaf_weights="tied"``): Algorithm 1 as printed with a richer ``F``: every
  leaf is labelled +-1 by its weighted majority, and the tree is one base classifier with one
  weight ``alpha_t``, like a stump.

Growth (scikit-learn HGB's names and LightGBM's order): the leaf whose best split gains most is
split next, until ``max_leaf_nodes`` leaves, no positive gain, ``max_depth`` or
``min_samples_leaf`` stop it. Each node's histogram holds, per feature and bin, two sums of the
round's per-row statistics and the count of the search's rows; the larger child's histogram is
its parent's minus the smaller child's (the subtraction trick), so a split costs one pass over
the smaller child's rows. A split tries both sides for the node's missing values (bin 255), as
LightGBM and HGB do; a node without missing values sends them to the child with more rows.

Split scores, one per way of setting the leaf values (a node's score; a split gains
``score(left) + score(right) - score(parent)``):

- ``"newton"`` (per-leaf, the exact mode): ``G^2 / (H + lambda)``, the second-order gain in the
  log posterior at the leaf modes. ``G`` and ``H`` are the first and second derivatives at
  ``c = 0`` of the rows' log-likelihood terms ``s_n phi_n log sigmoid(y_n (H_n + c))`` and
  ``lambda = mu_0 / 2`` is the prior's curvature at 0 (``mu_0 (log sigmoid(c) + log
  sigmoid(-c))`` has second derivative ``-mu_0 / 2`` there);
- ``"smoothed"`` (per-leaf, the approximate mode of eq. (17)): the fall in the exponential
  loss ``W+ e^-c + W- e^c`` at Schapire and Singer's smoothed confidence-rated leaf
  ``c = 1/2 log((mu_0 + W+) / (mu_0 + W-))``, ``W+-`` the weights of the leaf's rows labelled
  +-1 under ``s_n phi_n exp(-y_n H_n)``;
- ``"error"`` (tied): the fall in weighted error, each leaf labelled by its majority.

The engine's stages, one module each (as scikit-learn's HGB): the node histograms
(:func:`viboost.boosting.histogram.node_histograms`), the split scores, the best split of a node
and the row partition (:mod:`viboost.boosting.splitting`), the trees' settings and the per-row
statistics of the split scores (:mod:`viboost.boosting.split_statistics`), the best-first growth
over node histograms wherever the rows are (:mod:`viboost.boosting.growth`), the rows of the
nodes held in one place (:mod:`viboost.boosting.partition`), the in-memory search
(:class:`viboost.boosting.tree_search.TreeSearch`) and the prediction
(:mod:`viboost.boosting.predictor`). This module holds the fitted tree,
:class:`HistogramTree` (a :class:`~viboost.boosting.learners.BaseLearner`), and the intercept.
Every sum runs in a fixed order over fixed row chunks, so a tree is the same for any number of
threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.binning import MISSING_BIN
from viboost.boosting.learners import NODE_DTYPE, current_nodes
from viboost.boosting.predictor import category_bit, predict_ensemble

__all__ = ["LEAF_WEIGHTS", "HistogramTree", "intercept_tree"]

#: How a tree's leaves are weighted: one posterior per leaf, or one tied weight (Algorithm 1).
LEAF_WEIGHTS = ("per-leaf", "tied")
# Rows per block of the binned tree walk.
_APPLY_BLOCK = 1 << 12


@threaded_kernel(cache=True)
def _apply_binned(
    binned_columns, rows, feature, bin_threshold, missing_left, is_cat, bits, left, right, is_leaf,
    block,
):  # pragma: no cover - compiled  # fmt: skip
    """The node index of the leaf each of ``rows`` reaches, from its bins
    (``binned_columns[j, n]``): bin 255 to the missing side, else a categorical split's bit of
    the bin (bin == code) or ``bin <= bin_threshold``."""
    n = rows.shape[0]
    out = np.empty(n, dtype=np.int64)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        for k in range(c * block, min(n, (c + 1) * block)):
            i = rows[k]
            node = 0
            while not is_leaf[node]:
                b = binned_columns[feature[node], i]
                if b == MISSING_BIN:
                    node = left[node] if missing_left[node] else right[node]
                elif is_cat[node]:
                    node = left[node] if category_bit(bits[node], np.int64(b)) else right[node]
                elif b <= bin_threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            out[k] = node
    return out


@dataclass(eq=False)
class HistogramTree:
    """A fitted tree (node arrays, :data:`~viboost.boosting.learners.NODE_DTYPE`).

    Parameters
    ----------
    nodes : ndarray of NODE_DTYPE
        The tree, root first; leaves hold the tree's output there.
    leaf_weights : {"per-leaf", "tied"}
        Whether each leaf is a base classifier with its own weight (its ``value`` is the mode of
        its posterior) or the tree is one base classifier with +-1 leaves.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.tree_search import TreeSearch
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = np.where((X[:, 0] > 0) & (X[:, 1] > 0), 1.0, -1.0)  # an interaction
    >>> search = TreeSearch(X, max_leaf_nodes=4, min_samples_leaf=5)
    >>> tree, _ = search.best(np.full(400, 1 / 400), y)
    >>> tree.n_leaves, sorted(set(tree.split_gains()[0].tolist()))
    (3, [0, 1])
    >>> leaf = search.leaf_index(tree)  # the leaf of x0 > 0 and x1 > 0 holds the positives
    >>> bool(np.all(y[leaf == leaf[np.argmax(y)]] > 0))
    True
    """

    nodes: np.ndarray
    leaf_weights: str = "per-leaf"

    def __setstate__(self, state: dict) -> None:
        # Unpickling skips __init__: a tree pickled with an older node layout (viboost 0.3,
        # without the categorical fields) is brought to NODE_DTYPE here.
        state = dict(state)
        state["nodes"] = current_nodes(state["nodes"])
        self.__dict__.update(state)

    @property
    def per_leaf(self) -> bool:
        """Whether each leaf carries its own weight."""
        return self.leaf_weights == "per-leaf"

    @property
    def leaves(self) -> np.ndarray:
        """Node indices of the leaves, in node order (leaf ``l`` is ``nodes[leaves[l]]``)."""
        return np.flatnonzero(self.nodes["is_leaf"])

    @property
    def leaf_numbers(self) -> np.ndarray:
        """Per node, its leaf number (in leaf order; meaningful at the leaves only)."""
        return np.cumsum(self.nodes["is_leaf"]) - 1

    @property
    def n_leaves(self) -> int:
        """Number of leaves."""
        return int(self.nodes["is_leaf"].sum())

    @property
    def leaf_values(self) -> np.ndarray:
        """The leaves' values, in leaf order."""
        return self.nodes["value"][self.leaves]

    def with_leaf_values(self, values: np.ndarray) -> HistogramTree:
        """The same tree with new leaf values (in leaf order)."""
        nodes = self.nodes.copy()
        nodes["value"][self.leaves] = values
        return HistogramTree(nodes, self.leaf_weights)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HistogramTree):
            return NotImplemented
        return self.leaf_weights == other.leaf_weights and (
            self.nodes.dtype == other.nodes.dtype and self.nodes.tobytes() == other.nodes.tobytes()
        )

    __hash__ = None  # type: ignore[assignment]  # mutable node arrays: unhashable

    def with_covers(self, leaf_covers: np.ndarray) -> HistogramTree:
        """The same tree with each node's training weight recorded, from its leaves' (in leaf
        order): a split's cover is the sum of its children's."""
        nodes = self.nodes.copy()
        cover = np.zeros(nodes.size)
        cover[self.leaves] = leaf_covers
        for node in range(nodes.size - 1, -1, -1):  # children follow their parent
            if not nodes["is_leaf"][node]:
                cover[node] = cover[nodes["left"][node]] + cover[nodes["right"][node]]
        nodes["cover"] = cover
        return HistogramTree(nodes, self.leaf_weights)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The tree's output at each row of the 2-D array ``X`` (NaN: the split's missing side)."""
        return predict_ensemble(X, [self], [1.0])

    def leaf_index(self, binned_columns: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Leaf number (in leaf order) of each row from its bins (``binned_columns[j, n]``), or
        of the rows ``rows`` only."""
        nodes = self.nodes
        if rows is None:
            rows = np.arange(binned_columns.shape[1])
        reached = _apply_binned(
            binned_columns,
            np.ascontiguousarray(rows, dtype=np.int64),
            np.ascontiguousarray(nodes["feature"]),
            np.ascontiguousarray(nodes["bin_threshold"]),
            np.ascontiguousarray(nodes["missing_left"]),
            np.ascontiguousarray(nodes["is_categorical"]),
            np.ascontiguousarray(nodes["left_categories"]),
            np.ascontiguousarray(nodes["left"]),
            np.ascontiguousarray(nodes["right"]),
            np.ascontiguousarray(nodes["is_leaf"]),
            _APPLY_BLOCK,
        )
        return self.leaf_numbers[reached]

    def binned_outputs(self, binned_columns: np.ndarray) -> np.ndarray:
        """``h(x_n)`` of rows from their bins; equal to :meth:`predict` on those rows."""
        return self.leaf_values[self.leaf_index(binned_columns)]

    def split_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The features and gains of the tree's splits."""
        split = ~self.nodes["is_leaf"]
        return self.nodes["feature"][split].astype(np.int64), self.nodes["gain"][split]


def intercept_tree() -> HistogramTree:
    """The tree of one leaf: the intercept ``c_0`` (a base classifier that is 1 everywhere)."""
    nodes = np.zeros(1, dtype=NODE_DTYPE)
    nodes[0] = (1.0, -1, 0.0, 0, False, -1, -1, True, 0.0, np.nan, False, 0)
    return HistogramTree(nodes, "per-leaf")
