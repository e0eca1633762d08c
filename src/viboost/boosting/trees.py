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

Structure of this module: :class:`HistogramTree` is one fitted tree (a
:class:`~viboost.boosting.learners.BaseLearner`); :class:`TreeSearch` grows one per round (a
:class:`~viboost.boosting.learners.LearnerSearch`). The compiled kernels are private:
``_node_histogram``, ``_best_node_split``, ``_partition`` and ``_apply_binned``. Every sum runs
in a fixed order over fixed row chunks, so a tree is the same for any number of threads.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.special import expit

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.binning import MISSING_BIN, FeatureBinner
from viboost.boosting.histogram import transpose_bins
from viboost.boosting.learners import NODE_DTYPE
from viboost.boosting.predictor import predict_ensemble

__all__ = ["CRITERIA", "LEAF_WEIGHTS", "HistogramTree", "TreeSearch"]

#: How a tree's leaves are weighted: one posterior per leaf, or one tied weight (Algorithm 1).
LEAF_WEIGHTS = ("per-leaf", "tied")
#: Split scores by code: Newton's G^2 / (H + lambda), the smoothed exponential loss, the error.
CRITERIA = {"newton": 0, "smoothed": 1, "error": 2}

# Rows per chunk of a node histogram: boundaries from the node's row count only.
_CHUNK_ROWS = 1 << 14
_MAX_CHUNKS = 32
# A split must gain more than this fraction of its parent's score (ties below rounding).
_GAIN_TOL = 1e-12
# Rows per block of the binned tree walk.
_APPLY_BLOCK = 1 << 12


@threaded_kernel(cache=True)
def _node_histogram(binned, rows, start, stop, first, second, counts):  # pragma: no cover
    """Per (feature, bin): sums of ``first``, ``second`` and ``counts`` (the rows' sample
    weights) over ``rows[start:stop]``, shape ``(d, 256, 3)``; fixed chunks summed in chunk
    order."""
    d = binned.shape[1]
    n = stop - start
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    width = d * 768
    partial = np.zeros((n_chunks, width))
    for c in numba.prange(n_chunks):
        h = partial[c]
        for k in range(start + c * size, min(stop, start + (c + 1) * size)):
            i = rows[k]
            a, b, n_i = first[i], second[i], counts[i]
            row = binned[i]
            for j in range(d):
                base = j * 768 + 3 * np.int64(row[j])
                h[base] += a
                h[base + 1] += b
                h[base + 2] += n_i
    total = partial[0]
    for c in range(1, n_chunks):
        total += partial[c]
    return total.reshape((d, 256, 3))


@numba.njit(cache=True)
def _score(a, b, criterion, prior):  # pragma: no cover - compiled
    """A node's score from its two sums (see the module docstring)."""
    if criterion == 0:
        return a * a / (b + prior)
    if criterion == 1:
        ratio = math.sqrt((prior + b) / (prior + a))
        return a + b - (a * ratio + b / ratio)
    return max(a, b)


@numba.njit(cache=True)
def _best_node_split(hist, n_bins, criterion, prior, min_leaf):  # pragma: no cover - compiled
    """The best split of a node from its histogram.

    Position ``p`` sends the observed bins ``< p`` left (``p = n_bins[j]``: every observed value
    left, the missing ones right); missing values go left or right, whichever gains more (left
    first on ties). Ties go to the lowest feature, then position. Returns the gain (-inf for
    none), feature, position, missing side and the left child's three sums.
    """
    d = hist.shape[0]
    best_gain = -np.inf
    best_j, best_p, best_missing_left = -1, 0, True
    best_la, best_lb, best_lc = 0.0, 0.0, 0.0
    # The node's totals, from feature 0 (every row has one bin of each feature).
    ta, tb, tc = 0.0, 0.0, 0.0
    for b in range(256):
        ta += hist[0, b, 0]
        tb += hist[0, b, 1]
        tc += hist[0, b, 2]
    parent = _score(ta, tb, criterion, prior)
    tol = _GAIN_TOL * max(abs(parent), 1e-300)
    for j in range(d):
        ma, mb, mc = hist[j, MISSING_BIN, 0], hist[j, MISSING_BIN, 1], hist[j, MISSING_BIN, 2]
        la, lb, lc = 0.0, 0.0, 0.0
        nb = n_bins[j]
        for p in range(1, nb + 1):
            la += hist[j, p - 1, 0]
            lb += hist[j, p - 1, 1]
            lc += hist[j, p - 1, 2]
            if hist[j, p - 1, 2] == 0.0 and p < nb:
                continue  # an empty bin: the same split as the next position
            for side in range(2):  # 0: missing left, 1: missing right
                if mc == 0.0 and side == 1:
                    continue
                if side == 0:
                    xa, xb, xc = la + ma, lb + mb, lc + mc
                else:
                    xa, xb, xc = la, lb, lc
                if xc < min_leaf or tc - xc < min_leaf:
                    continue
                gain = (
                    _score(xa, xb, criterion, prior)
                    + _score(ta - xa, tb - xb, criterion, prior)
                    - parent
                )
                if gain > best_gain + tol:
                    best_gain = gain
                    best_j, best_p = j, p
                    if mc == 0.0:  # no missing value here: NaN to the larger child
                        best_missing_left = lc >= tc - lc
                    else:
                        best_missing_left = side == 0
                    best_la, best_lb, best_lc = xa, xb, xc
    if best_gain <= tol:
        return -np.inf, -1, 0, True, 0.0, 0.0, 0.0
    return best_gain, best_j, best_p, best_missing_left, best_la, best_lb, best_lc


@numba.njit(cache=True)
def _partition(binned, rows, start, stop, feature, position, missing_left, buffer):
    """Stable partition of ``rows[start:stop]``: left child first; returns the left count."""  # noqa: D401
    n_left = 0
    n_right = 0
    for k in range(start, stop):
        i = rows[k]
        b = binned[i, feature]
        go_left = missing_left if b == MISSING_BIN else b < position
        if go_left:
            rows[start + n_left] = i
            n_left += 1
        else:
            buffer[n_right] = i
            n_right += 1
    for k in range(n_right):
        rows[start + n_left + k] = buffer[k]
    return n_left


@threaded_kernel(cache=True)
def _apply_binned(
    binned_columns, feature, bin_threshold, missing_left, left, right, is_leaf, block
):  # pragma: no cover - compiled
    """The node index of the leaf each row reaches, from its bins (``binned_columns[j, n]``)."""
    n = binned_columns.shape[1]
    out = np.empty(n, dtype=np.int64)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        for i in range(c * block, min(n, (c + 1) * block)):
            node = 0
            while not is_leaf[node]:
                b = binned_columns[feature[node], i]
                if b == MISSING_BIN:
                    node = left[node] if missing_left[node] else right[node]
                elif b <= bin_threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            out[i] = node
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
    >>> from viboost.boosting.trees import TreeSearch
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

    @property
    def per_leaf(self) -> bool:
        """Whether each leaf carries its own weight."""
        return self.leaf_weights == "per-leaf"

    @property
    def leaves(self) -> np.ndarray:
        """Node indices of the leaves, in node order (leaf ``l`` is ``nodes[leaves[l]]``)."""
        return np.flatnonzero(self.nodes["is_leaf"])

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

    __hash__ = None  # mutable node arrays

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

    def leaf_index(self, binned_columns: np.ndarray) -> np.ndarray:
        """Leaf number (in leaf order) of each row from its bins (``binned_columns[j, n]``)."""
        nodes = self.nodes
        reached = _apply_binned(
            binned_columns,
            np.ascontiguousarray(nodes["feature"]),
            np.ascontiguousarray(nodes["bin_threshold"]),
            np.ascontiguousarray(nodes["missing_left"]),
            np.ascontiguousarray(nodes["left"]),
            np.ascontiguousarray(nodes["right"]),
            np.ascontiguousarray(nodes["is_leaf"]),
            _APPLY_BLOCK,
        )
        number = np.cumsum(nodes["is_leaf"]) - 1
        return number[reached]

    def binned_outputs(self, binned_columns: np.ndarray) -> np.ndarray:
        """``h(x_n)`` of rows from their bins; equal to :meth:`predict` on those rows."""
        return self.leaf_values[self.leaf_index(binned_columns)]

    def split_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The features and gains of the tree's splits."""
        split = ~self.nodes["is_leaf"]
        return self.nodes["feature"][split].astype(np.int64), self.nodes["gain"][split]


def _leaf_value(a: float, b: float, criterion: int, prior: float) -> float:
    """The provisional value of a leaf from its two sums (replaced by its posterior's mode in a
    per-leaf fit): Newton's step, the smoothed log-ratio, or the majority label."""
    if criterion == 0:
        return a / (b + prior) if b + prior > 0 else 0.0
    if criterion == 1:
        return 0.5 * (math.log(prior + a) - math.log(prior + b)) if prior + a > 0 else 0.0
    return 1.0 if a >= b else -1.0


class TreeSearch:
    """Grows one histogram tree per round over binned rows (best-first).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training features, finite or NaN.
    active : ndarray of bool, shape (n_samples,), default=None
        The rows the trees fit (positive multiplicity); others are routed but never counted.
    max_bins : int, default=255
        Most bins per feature.
    max_leaf_nodes : int, default=31
        Most leaves of a tree (at least 2).
    max_depth : int or None, default=None
        Most splits from the root to a leaf; None for no limit.
    min_samples_leaf : int, default=20
        Fewest of the search's rows in a leaf, counted with their ``sample_weight``.
    leaf_weights : {"per-leaf", "tied"}, default="per-leaf"
        See :class:`HistogramTree`.
    criterion : {"newton", "smoothed", "error"} or None, default=None
        The split score; None: ``"newton"`` for per-leaf weights, ``"error"`` for tied ones.
    weight_prior : float, default=1.0
        ``mu_0``, the prior multiplicity of every leaf weight.
    subsample : int, default=200_000
        Most rows drawn to place quantile edges.
    random_state : int, RandomState, Generator or None, default=None
        Source of that subsample.
    sample_weight : ndarray of shape (n_samples,), default=None
        How much each row counts towards ``min_samples_leaf`` (the fit's sample weights, so
        that a row of weight k counts as k copies of it); ones when None.

    Attributes
    ----------
    binner_ : FeatureBinner
    binned_ : ndarray of uint8, shape (n_samples, n_features)
    binned_columns_ : ndarray of uint8, shape (n_features, n_samples)
    """

    def __init__(
        self,
        X: np.ndarray,
        active: np.ndarray | None = None,
        max_bins: int = 255,
        max_leaf_nodes: int = 31,
        max_depth: int | None = None,
        min_samples_leaf: int = 20,
        leaf_weights: str = "per-leaf",
        criterion: str | None = None,
        weight_prior: float = 1.0,
        subsample: int = 200_000,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> None:
        X = np.asarray(X, dtype=np.float64)
        self._sample_weight = sample_weight
        if X.ndim != 2 or X.shape[1] == 0:
            raise ValueError(f"X must be 2-D with at least one column, got shape {X.shape}")
        if leaf_weights not in LEAF_WEIGHTS:
            raise ValueError(f"leaf_weights must be one of {LEAF_WEIGHTS}, got {leaf_weights!r}")
        if criterion is None:
            criterion = "newton" if leaf_weights == "per-leaf" else "error"
        if criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {tuple(CRITERIA)}, got {criterion!r}")
        n_samples = X.shape[0]
        if active is None:
            active = np.ones(n_samples, dtype=bool)
        self.max_leaf_nodes = int(max_leaf_nodes)
        self.max_depth = max_depth
        self.min_samples_leaf = int(min_samples_leaf)
        self.leaf_weights = leaf_weights
        self.criterion = criterion
        self.weight_prior = float(weight_prior)
        self.binner_ = FeatureBinner(
            max_bins=max_bins, subsample=subsample, random_state=random_state
        ).fit(X, active)
        self.binned_ = self.binner_.transform(X)
        self.binned_columns_ = transpose_bins(self.binned_)
        self._set_active(active, sample_weight)

    def _set_active(self, active: np.ndarray, sample_weight: np.ndarray | None) -> None:
        n_samples = self.binned_.shape[0]
        active = np.ascontiguousarray(active, dtype=bool)
        if active.shape != (n_samples,):
            raise ValueError(f"active must have shape ({n_samples},)")
        if sample_weight is None:
            sample_weight = np.ones(n_samples)
        self._active = active
        self._rows = np.flatnonzero(active).astype(np.int64)
        # A row counts towards min_samples_leaf as its sample weight (k copies of a row count
        # k times), never when inactive.
        self._counts = np.where(active, np.asarray(sample_weight, dtype=np.float64), 0.0)

    @property
    def fits_intercept(self) -> bool:
        """Whether a fit starts with the intercept ``c_0`` (per-leaf weights)."""
        return self.leaf_weights == "per-leaf"

    @property
    def per_leaf(self) -> bool:
        """Whether the trees' leaves carry their own weights."""
        return self.leaf_weights == "per-leaf"

    def restricted(self, active: np.ndarray) -> TreeSearch:
        """The same search over the same bins for the rows ``active`` only."""
        other = TreeSearch.__new__(TreeSearch)
        other.__dict__.update(self.__dict__)
        other._set_active(active, self._sample_weight)
        return other

    def intercept(self) -> HistogramTree:
        """The tree of one leaf: the intercept ``c_0`` (a base classifier that is 1 everywhere)."""
        nodes = np.zeros(1, dtype=NODE_DTYPE)
        nodes[0] = (1.0, -1, 0.0, 0, False, -1, -1, True, 0.0, np.nan)
        return HistogramTree(nodes, "per-leaf")

    def _statistics(
        self, weights: np.ndarray, y: np.ndarray, margin: np.ndarray | None, total: float
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """The two per-row sums of the criterion and the prior in the weights' units."""
        code = CRITERIA[self.criterion]
        if code == 0:
            # G_n = y_n w_n and H_n = w_n sigmoid(y_n H_n) (w_n = s phi sigmoid(-y H) / Z);
            # lambda = mu_0 / 2 in the same units.
            sigma = np.full_like(weights, 0.5) if margin is None else expit(y * margin)
            first = y * weights
            second = weights * sigma
            prior = 0.5 * self.weight_prior
        else:
            first = np.where(y > 0, weights, 0.0)
            second = np.where(y > 0, 0.0, weights)
            prior = self.weight_prior
        prior = min(prior / total, 1e300) if total > 0 else 1e300
        return first, second, prior

    def best(
        self,
        weights: np.ndarray,
        y: np.ndarray,
        margin: np.ndarray | None = None,
        total: float = 1.0,
    ) -> tuple[HistogramTree, float]:
        """Grow the round's tree under the search weights.

        Parameters
        ----------
        weights : ndarray of shape (n_samples,)
            The round's search weights (:mod:`viboost.boosting.reweighting`), summing to one.
        y : ndarray of shape (n_samples,)
            Labels in {-1, +1}.
        margin : ndarray of shape (n_samples,), default=None
            The ensemble ``H`` (for the curvature of the Newton score; 0 when None).
        total : float, default=1.0
            The weights' sum before normalisation, to put the prior in their units.

        Returns
        -------
        tree : HistogramTree
        error : float
            The weighted error of the tree's leaf signs.
        """
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        code = CRITERIA[self.criterion]
        first, second, prior = self._statistics(weights, y, margin, float(total))
        first = np.ascontiguousarray(first)
        second = np.ascontiguousarray(second)
        rows = self._rows.copy()
        buffer = np.empty(rows.size, dtype=np.int64)
        n_bins = self.binner_.n_bins_
        min_leaf = max(1e-300, float(self.min_samples_leaf))
        max_depth = np.inf if self.max_depth is None else self.max_depth

        # Per node: (start, stop, depth, histogram, sums, split); nodes are appended in order.
        records: list[dict] = []

        def new_node(start: int, stop: int, depth: int, hist: np.ndarray) -> int:
            sums = hist[0].sum(axis=0)
            node = {"start": start, "stop": stop, "depth": depth, "hist": hist, "sums": sums}
            node["split"] = (
                _best_node_split(hist, n_bins, code, prior, min_leaf)
                if depth < max_depth and sums[2] >= 2 * min_leaf
                else None
            )
            records.append(node)
            return len(records) - 1

        root_hist = _node_histogram(self.binned_, rows, 0, rows.size, first, second, self._counts)
        new_node(0, rows.size, 0, root_hist)
        children: dict[int, tuple[int, int]] = {}
        heap: list[tuple[float, int]] = []

        def push(index: int) -> None:
            split = records[index]["split"]
            if split is not None and np.isfinite(split[0]):
                heapq.heappush(heap, (-split[0], index))

        push(0)
        n_leaves = 1
        while heap and n_leaves < self.max_leaf_nodes:
            _, index = heapq.heappop(heap)
            node = records[index]
            _, feature, position, missing_left, *_ = node["split"]
            start, stop = node["start"], node["stop"]
            n_left = _partition(
                self.binned_, rows, start, stop, feature, position, missing_left, buffer
            )
            mid = start + n_left
            if n_left <= stop - mid:
                small = _node_histogram(self.binned_, rows, start, mid, first, second, self._counts)
                left_hist, right_hist = small, node["hist"] - small
            else:
                small = _node_histogram(self.binned_, rows, mid, stop, first, second, self._counts)
                left_hist, right_hist = node["hist"] - small, small
            node["hist"] = None  # free the parent's histogram
            depth = node["depth"] + 1
            left = new_node(start, mid, depth, left_hist)
            right = new_node(mid, stop, depth, right_hist)
            children[index] = (left, right)
            push(left)
            push(right)
            n_leaves += 1
        return self._tree(records, children, code, prior)

    def _tree(
        self, records: list[dict], children: dict[int, tuple[int, int]], code: int, prior: float
    ) -> tuple[HistogramTree, float]:
        """The node arrays of a grown tree (depth-first, root first) and its leaves' error."""
        nodes = np.zeros(len(records), dtype=NODE_DTYPE)
        order: list[int] = []
        position_of: dict[int, int] = {}
        stack = [0]
        while stack:
            index = stack.pop()
            position_of[index] = len(order)
            order.append(index)
            if index in children:
                left, right = children[index]
                stack.append(right)
                stack.append(left)
        error = 0.0
        thresholds = self.binner_.thresholds_
        for index in order:
            record = records[index]
            at = position_of[index]
            sums = record["sums"]
            cover = float(sums[2])
            if index in children:
                gain, feature, position, missing_left, *_ = record["split"]
                left, right = children[index]
                edges = thresholds[feature]
                threshold = float(edges[position - 1]) if position - 1 < edges.size else np.inf
                nodes[at] = (
                    0.0, feature, threshold, position - 1, missing_left,
                    position_of[left], position_of[right], False, gain, cover,
                )  # fmt: skip
            else:
                value = _leaf_value(float(sums[0]), float(sums[1]), code, prior)
                if code != 0:
                    error += float(min(sums[0], sums[1]))
                nodes[at] = (value, -1, 0.0, 0, False, -1, -1, True, 0.0, cover)
        return HistogramTree(nodes, self.leaf_weights), error

    def outputs(self, tree: HistogramTree) -> np.ndarray:
        """``h(x_n)`` (the tree's leaf values) for every row of the search."""
        return tree.binned_outputs(self.binned_columns_)

    def leaf_index(self, tree: HistogramTree) -> np.ndarray:
        """The leaf number of every row of the search."""
        return tree.leaf_index(self.binned_columns_)
