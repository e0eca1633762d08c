"""Best-first growth of a histogram tree from node histograms, wherever the rows are.

:class:`~viboost.boosting.trees.TreeSearch` grows a tree over rows in this process. The growth
itself needs of the rows only one thing: the histogram of a node's rows (per feature and bin,
two sums of the round's per-row statistics and the row count). This module splits the two:

- :class:`TreeGrowth` is the growth as a state machine over histograms: given the root's
  histogram, it says which nodes it needs split next (:meth:`TreeGrowth.requests`, a list of
  :class:`Expansion`), takes the histograms of their smaller children
  (:meth:`TreeGrowth.expanded`; the larger child's is its parent's minus the smaller's, the
  subtraction trick) and in the end gives the tree (:meth:`TreeGrowth.tree`). It finds splits
  with the same compiled kernel (``_best_node_split``) and in the same order as ``TreeSearch``
  (best gain first, ties to the node created first), so on the same histograms it grows the
  same tree, node for node.
- :class:`RowPartition` answers those requests for rows held in one place: the rows of each
  node in one contiguous range (:func:`~viboost.boosting.splitting.partition_nodes`), the
  histogram of a range (:func:`~viboost.boosting.histogram.node_histograms`).
  A distributed fit keeps one per block of rows and adds the blocks' histograms.

With ``speculate=True`` a request also splits, besides the node the growth needs now, every
leaf that could still be split before the tree is full (the best ``max_leaf_nodes - leaves``
ones): one exchange of histograms then serves a whole level of the tree, not one node, which is
what a distributed fit needs when a round trip to the workers costs far more than a histogram.
``speculate=m`` (an int) splits the best ``m`` leaves per request: about ``m`` times fewer
exchanges, and a histogram is computed for nothing only where one of them is never split (the
tree fills up first). Either way the tree is the same: the growth still splits the leaves in
best-first order, and the histograms of the nodes it splits are the same. The extra work is
bounded: a node split speculatively but never by the growth is a leaf of the final tree, and
the leaves are disjoint, so the extra histograms cover at most half of the rows once per tree.

:func:`grow` runs a growth against a function that answers requests; :class:`TreeSettings`
holds the settings and the per-row statistics of a split score
(:data:`~viboost.boosting.splitting.CRITERIA`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost._utils.scratch import ScratchArrays
from viboost.boosting.histogram import HISTOGRAM_SLOTS, node_histograms
from viboost.boosting.learners import NODE_DTYPE
from viboost.boosting.splitting import (
    CRITERIA,
    best_node_split,
    best_node_splits,
    leaf_value,
    partition_nodes,
)
from viboost.boosting.trees import LEAF_WEIGHTS, HistogramTree

__all__ = [
    "Expansion",
    "RowPartition",
    "TreeGrowth",
    "TreeSettings",
    "expand_together",
    "expanded_together",
    "grow",
    "histograms_together",
    "partition_leaf_index",
]


@dataclass(frozen=True)
class TreeSettings:
    """How the trees of a fit are grown (the parameters of
    :class:`~viboost.boosting.trees.TreeSearch` of the same names)."""

    max_leaf_nodes: int = 31
    max_depth: int | None = None
    min_samples_leaf: int = 20
    leaf_weights: str = "per-leaf"
    criterion: str = "newton"
    weight_prior: float = 1.0

    def __post_init__(self) -> None:
        if self.leaf_weights not in LEAF_WEIGHTS:
            raise ValueError(
                f"leaf_weights must be one of {LEAF_WEIGHTS}, got {self.leaf_weights!r}"
            )
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {tuple(CRITERIA)}, got {self.criterion!r}")

    @property
    def per_leaf(self) -> bool:
        """Whether each leaf carries its own weight."""
        return self.leaf_weights == "per-leaf"

    @property
    def code(self) -> int:
        """The criterion's code in the compiled kernels."""
        return CRITERIA[self.criterion]

    def statistics(
        self, weights: np.ndarray, y: np.ndarray, margin: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The two per-row sums of the split score, linear in ``weights`` (so weights known up
        to a factor give sums known up to the same factor): ``y w`` and ``w sigmoid(y H)`` for
        ``"newton"`` (``H = 0`` when ``margin`` is None), else the weights of the positive and
        of the negative rows."""
        n_rows = y.shape[0]
        out = np.empty((n_rows, 3))
        self.row_statistics(np.arange(n_rows), weights, y, margin, np.zeros(n_rows), out)
        return out[:, 0].copy(), out[:, 1].copy()

    def row_statistics(
        self,
        rows: np.ndarray,
        weights: np.ndarray,
        y: np.ndarray,
        margin: np.ndarray | None,
        counts: np.ndarray,
        out: np.ndarray,
    ) -> np.ndarray:
        """:meth:`statistics` and ``counts`` (how much a row counts towards
        ``min_samples_leaf``) of rows ``rows``, in their order, into ``out`` (shape
        ``(rows.size, 3)``): the statistics of a :class:`RowPartition`, in one compiled
        pass."""
        if margin is None:
            margin = np.zeros(y.shape[0])
        as_float = [np.ascontiguousarray(a, dtype=np.float64) for a in (weights, y, margin, counts)]
        # One exponential a row. Into a reused buffer (viboost._utils.scratch) two threads run
        # 2.3x faster from 2 x 10^4 rows up (measured: 0.105 -> 0.049 ms at 20,000 rows, 0.40 ->
        # 0.17 ms at 80,000); into fresh pages they were slower at 80,000 rows.
        kernel = _row_statistics if rows.shape[0] > _PARALLEL_STATISTICS else _row_statistics.serial
        kernel(out, np.ascontiguousarray(rows, dtype=np.int64), *as_float, self.code)
        return out

    def prior(self, total: float) -> float:
        """The prior's term of the split score in the units of weights summing to one
        (``total``: their sum before normalisation): ``lambda = mu_0 / 2`` for ``"newton"``,
        ``mu_0`` otherwise."""
        prior = 0.5 * self.weight_prior if self.code == 0 else self.weight_prior
        return min(prior / total, 1e300) if total > 0 else 1e300


#: Rows above which :meth:`TreeSettings.row_statistics` runs on threads.
_PARALLEL_STATISTICS = 1 << 15


@threaded_kernel(cache=True)
def _row_statistics(out, rows, weights, y, margin, counts, code):  # pragma: no cover - compiled
    """:meth:`TreeSettings.row_statistics` into ``out``."""
    for k in numba.prange(rows.shape[0]):
        i = rows[k]
        w = weights[i]
        if code == 0:
            out[k, 0] = y[i] * w
            out[k, 1] = w * (1.0 / (1.0 + math.exp(-(y[i] * margin[i]))))
        elif y[i] > 0.0:
            out[k, 0] = w
            out[k, 1] = 0.0
        else:
            out[k, 0] = 0.0
            out[k, 1] = w
        out[k, 2] = counts[i]


class Expansion(NamedTuple):
    """A request to split a node: its rows with ``bin < position`` of ``feature`` (and the
    missing ones if ``missing_left``) become node ``left``, the others node ``right``; the
    histogram wanted is the left child's if ``small_left`` (the child of smaller count, so the
    one with fewer rows when every row counts 1)."""

    node: int
    left: int
    right: int
    feature: int
    position: int
    missing_left: bool
    small_left: bool


class TreeGrowth:
    """The best-first growth of one tree from node histograms (see the module docstring).

    Parameters
    ----------
    root : ndarray of shape (n_features, n_slots, 3)
        The root's histogram: per feature and bin, the two statistics of
        :meth:`TreeSettings.statistics` in the units of weights summing to one, and the rows'
        count (each row counted as its sample weight, as ``min_samples_leaf`` counts them).
    n_bins : ndarray of int64, shape (n_features,)
        Bins of observed values per feature (``FeatureBinner.n_bins_``).
    thresholds : sequence of ndarray
        Per feature, the bin edges (``FeatureBinner.thresholds_``).
    settings : TreeSettings
    prior : float
        :meth:`TreeSettings.prior` of the round's weights.
    speculate : bool or int, default=False
        Which leaves a request splits: False (or 1) only the one the growth splits next; an
        int ``m`` the best ``m``; True every leaf that may still be split (one exchange per
        level of the tree instead of per node). The same tree whichever.
    """

    def __init__(
        self,
        root: np.ndarray,
        n_bins: np.ndarray,
        thresholds: Sequence[np.ndarray],
        settings: TreeSettings,
        prior: float,
        speculate: bool = False,
    ) -> None:
        self.n_bins = n_bins
        self.thresholds = thresholds
        self.settings = settings
        self.prior = float(prior)
        if isinstance(speculate, bool):
            self._per_request = settings.max_leaf_nodes if speculate else 1
        elif isinstance(speculate, int | np.integer) and speculate >= 1:
            self._per_request = int(speculate)
        else:
            raise ValueError(f"speculate must be a bool or an int >= 1, got {speculate!r}")
        self.speculate = speculate
        self._code = settings.code
        self._min_leaf = max(1e-300, float(settings.min_samples_leaf))
        self._max_depth = np.inf if settings.max_depth is None else settings.max_depth
        # Per node (this growth's id): depth, histogram (until split), sums, best split, the
        # children once split, and the order in which TreeSearch would have created it.
        self._records: list[dict] = []
        self._heap: list[tuple[float, int, int]] = []  # (-gain, creation order, id)
        self._created = 0
        self._split: dict[int, tuple[int, int]] = {}  # the growth's splits: node -> children
        self._n_leaves = 1
        self._pending: list[Expansion] = []
        sums = root[0].sum(axis=0)
        split = None
        if self._may_split(0, sums):
            split = best_node_split(root, self.n_bins, self._code, self.prior, self._min_leaf)
        self._add_record(0, root, sums, split)
        self._admit(0)

    def _add_record(
        self, depth: int, hist: np.ndarray | None, sums: np.ndarray, split: tuple | None
    ) -> int:
        """A node's record (its histogram, None when not needed; its sums; its best split, None
        when it may not split); returns its id."""
        self._records.append(
            {"depth": depth, "hist": hist, "sums": sums, "split": split, "children": None}
        )
        return len(self._records) - 1

    def _may_split(self, depth: int, sums: np.ndarray) -> bool:
        """Whether a node of this depth and these sums may split (depth and row limits)."""
        return bool(depth < self._max_depth and sums[2] >= 2 * self._min_leaf)

    def _admit(self, index: int) -> None:
        """A node joins the tree (TreeSearch creates it here): a candidate if it can split."""
        record = self._records[index]
        record["order"] = self._created
        self._created += 1
        split = record["split"]
        if split is not None and np.isfinite(split[0]):
            heapq.heappush(self._heap, (-split[0], record["order"], index))

    def _needs_histograms(self, index: int) -> bool:
        """Whether splitting a leaf needs its children's histograms: for their own splits,
        unless it is the tree's last split or neither child may split (depth, rows); their
        sums then come from the leaf's split, and the leaf's rows stay unpartitioned (a
        :class:`RowPartition` range of a node that is no leaf of the tree)."""
        if self._n_leaves + 1 >= self.settings.max_leaf_nodes:
            return False
        record = self._records[index]
        left_count = record["split"][6]
        right_count = record["sums"][2] - left_count
        return record["depth"] + 1 < self._max_depth and (
            max(left_count, right_count) >= 2 * self._min_leaf
        )

    def _split_without_histograms(self, index: int) -> tuple[int, int]:
        """The children of a leaf whose split needs no histograms (:meth:`_needs_histograms`):
        their sums from the split, no split of their own."""
        record = self._records[index]
        left_sums = np.array(record["split"][4:7], dtype=np.float64)
        children = []
        for sums in (left_sums, record["sums"] - left_sums):
            children.append(self._add_record(record["depth"] + 1, None, sums, None))
        record["hist"] = None
        record["children"] = (children[0], children[1])
        return record["children"]

    def _advance(self) -> None:
        """Split the best leaves, in order, while their children's histograms are known (or
        not needed)."""
        while self._heap and self._n_leaves < self.settings.max_leaf_nodes:
            index = self._heap[0][2]
            children = self._records[index]["children"]
            if children is None:
                if self._needs_histograms(index):
                    return
                children = self._split_without_histograms(index)
            heapq.heappop(self._heap)
            self._split[index] = children
            self._admit(children[0])
            self._admit(children[1])
            self._n_leaves += 1

    @property
    def done(self) -> bool:
        """Whether the tree is grown."""
        self._advance()
        return not self._heap or self._n_leaves >= self.settings.max_leaf_nodes

    def requests(self) -> list[Expansion]:
        """The nodes to split next (empty once the tree is grown); answer with
        :meth:`expanded`."""
        if self._pending:
            raise RuntimeError("the previous requests have not been answered")
        if self.done:
            return []
        # At most max_leaf_nodes - leaves more splits: a leaf ranked lower can never be split.
        wanted = heapq.nsmallest(
            min(self._per_request, self.settings.max_leaf_nodes - self._n_leaves), self._heap
        )
        out = []
        for _, _, index in wanted:
            record = self._records[index]
            if record["children"] is not None or not self._needs_histograms(index):
                continue
            _, feature, position, missing_left, _, _, left_count = record["split"]
            total = record["sums"][2]
            left = len(self._records) + 2 * len(out)
            out.append(
                Expansion(
                    index, left, left + 1, int(feature), int(position), bool(missing_left),
                    bool(left_count <= total - left_count),
                )
            )  # fmt: skip
        self._pending = out
        return list(out)

    def expanded(self, histograms: Sequence[np.ndarray]) -> None:
        """The histograms of the smaller children of the last :meth:`requests`, in order."""
        expanded_together([self], [histograms])

    def _children(
        self,
        histograms: Sequence[np.ndarray],
        out: np.ndarray,
        at: int,
        n_requests: int,
        copy_small: bool,
    ) -> list[tuple[int, int]]:
        """The children of the last requests in ``out`` (:func:`expanded_together`): the
        ``k``-th request's smaller child's histogram at ``out[at + k]`` (copied there from
        ``histograms[k]`` if ``copy_small``), its larger child's, by the subtraction trick, at
        ``out[n_requests + at + k]``. Returns each child's depth and position in ``out``,
        left then right per request."""
        if len(histograms) != len(self._pending):
            raise ValueError(f"expected {len(self._pending)} histograms, got {len(histograms)}")
        children = []
        for k, (request, small) in enumerate(zip(self._pending, histograms, strict=True)):
            parent = self._records[request.node]
            small_at, large_at = at + k, n_requests + at + k
            if copy_small:
                out[small_at] = small
            np.subtract(parent["hist"], out[small_at], out=out[large_at])
            parent["hist"] = None  # free the parent's histogram
            depth = parent["depth"] + 1
            left, right = (small_at, large_at) if request.small_left else (large_at, small_at)
            children.append((depth, left))
            children.append((depth, right))
        return children

    def _attach(self, children: list, splits: Sequence[tuple | None]) -> None:
        """Record the children of the last requests with their splits."""
        for k, request in enumerate(self._pending):
            made = [
                self._add_record(depth, hist, sums, splits[2 * k + side])
                for side, (depth, hist, sums) in enumerate(children[2 * k : 2 * k + 2])
            ]
            if tuple(made) != (request.left, request.right):
                raise RuntimeError("histograms arrived out of order")
            self._records[request.node]["children"] = (made[0], made[1])
        self._pending = []

    def tree(self) -> tuple[np.ndarray, float]:
        """The grown tree's node arrays (:data:`~viboost.boosting.learners.NODE_DTYPE`,
        depth-first, root first; a :class:`~viboost.boosting.trees.HistogramTree` with the
        settings' ``leaf_weights``) and the weighted error of its leaves' signs (0 for the
        Newton score)."""
        if not self.done:
            raise RuntimeError("the tree is not grown yet")
        order: list[int] = []
        position_of: dict[int, int] = {}
        stack = [0]
        while stack:
            index = stack.pop()
            position_of[index] = len(order)
            order.append(index)
            if index in self._split:
                left, right = self._split[index]
                stack.append(right)
                stack.append(left)
        # One tuple a node, made into the structured array at once (assigning a structured
        # array item by item costs a few microseconds a node).
        rows: list[tuple] = []
        error = 0.0
        for index in order:
            record = self._records[index]
            sums = record["sums"]
            cover = float(sums[2])
            children = self._split.get(index)
            if children is not None:
                gain, feature, position, missing_left, *_ = record["split"]
                edges = self.thresholds[feature]
                threshold = float(edges[position - 1]) if position - 1 < edges.size else np.inf
                rows.append((
                    0.0, feature, threshold, position - 1, missing_left,
                    position_of[children[0]], position_of[children[1]], False, gain, cover,
                ))  # fmt: skip
            else:
                value = leaf_value(float(sums[0]), float(sums[1]), self._code, self.prior)
                if self._code != 0:
                    error += float(min(sums[0], sums[1]))
                rows.append((value, -1, 0.0, 0, False, -1, -1, True, 0.0, cover))
        nodes = np.array(rows, dtype=NODE_DTYPE)
        #: Position in the node arrays of each node of this growth (by its id), once grown.
        self.positions = position_of
        return nodes, error

    def node_positions(self) -> np.ndarray:
        """After :meth:`tree`: per node of this growth (by id), the position in the grown tree
        of the node that holds its rows: its own, or, for a child of a speculative split that
        the tree did not make, that of the leaf it lies in."""
        positions = self.positions
        out = np.empty(len(self._records), dtype=np.int64)
        for index, record in enumerate(self._records):  # a parent comes before its children
            if index in positions:
                out[index] = positions[index]
            if record["children"] is not None:
                for child in record["children"]:
                    out[child] = out[index]
        return out


def partition_leaf_index(
    partition: RowPartition,
    tree: HistogramTree,
    node_positions: np.ndarray,
    binned_columns: np.ndarray,
    outside: np.ndarray,
) -> np.ndarray:
    """The leaf number (in leaf order) of every row of ``binned_columns`` (``[feature,
    row]``) in ``tree``, grown on ``partition``: a row of the partition from its node's range
    (``node_positions``: :meth:`TreeGrowth.node_positions`); the rows ``outside`` it, and
    those of a node the tree split without partitioning its rows (its last split), routed by
    their bins."""
    number = tree.leaf_numbers
    is_leaf = tree.nodes["is_leaf"]
    out = np.empty(binned_columns.shape[1], dtype=np.int64)
    routed = [outside]
    for node in partition.leaf_ranges():
        position = node_positions[node]
        if is_leaf[position]:
            out[partition.node_rows(node)] = number[position]
        else:  # split without partitioning its rows (the tree's last split)
            routed.append(partition.node_rows(node))
    routed_rows = np.concatenate(routed)
    if routed_rows.size:
        out[routed_rows] = tree.leaf_index(binned_columns, routed_rows)
    return out


class RowPartition:
    """The rows of one tree's nodes, held here: each node's rows a contiguous range of one
    array (a child's within its parent's), and the round's two per-row statistics.

    Parameters
    ----------
    binned : ndarray of uint8, shape (n_rows, n_features)
        The rows' bins (row-major).
    rows : ndarray of int
        The rows the tree fits (the others are never counted).
    first, second : ndarray of shape (n_rows,)
        The statistics of :meth:`TreeSettings.statistics`.
    counts : ndarray of shape (n_rows,)
        How much each row counts towards ``min_samples_leaf`` (its sample weight).
    ranges : dict or None, default=None
        The range of ``rows`` that holds each node's rows, by node id, when ``rows`` is already
        partitioned; None: ``rows`` are the root's (node 0).
    n_slots : int, default=HISTOGRAM_SLOTS
        Slots per feature of the histograms (:func:`~viboost.boosting.histogram.node_histograms`:
        :func:`~viboost.boosting.histogram.histogram_slots` of the most bins of any feature).
    columns : ndarray of uint8, shape (n_features, n_rows), default=None
        The same bins by feature (C-contiguous: the splits read them 4x faster on 10^6 rows);
        ``binned.T`` when None.

    ``rows`` and ``ranges`` are copied: :meth:`expand` never writes the caller's arrays. A
    split moves a node's rows (and their statistics) to the children's ranges in a second
    array (:func:`~viboost.boosting.splitting.partition_nodes`), and the next split of a child
    moves them back: each node's rows lie on one of two sides (``sides``), and
    :meth:`node_rows` reads them there.
    :meth:`stacked` makes the partitions of several trees over the same bins (the folds of a
    cross-fit) whose rows share one array, so that :func:`expand_together` splits and
    histograms the nodes of all of them in one parallel pass.
    """

    def __init__(
        self,
        binned: np.ndarray,
        rows: np.ndarray,
        first: np.ndarray,
        second: np.ndarray,
        counts: np.ndarray,
        ranges: dict[int, tuple[int, int]] | None = None,
        n_slots: int = HISTOGRAM_SLOTS,
        columns: np.ndarray | None = None,
    ) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        # Per row (by row index, never written): the statistics as given.
        per_row = [np.asarray(values, dtype=np.float64) for values in (first, second, counts)]
        stats = np.empty((rows.size, 3))
        for column, values in enumerate(per_row):
            stats[:, column] = values[rows]
        (partition,) = self.stacked(binned, [rows], stats, n_slots, columns)
        self.__dict__.update(partition.__dict__)
        self.first, self.second, self.counts = per_row
        if ranges is not None:
            self.ranges = dict(ranges)
            self.sides = dict.fromkeys(self.ranges, 0)

    @classmethod
    def stacked(
        cls,
        binned: np.ndarray,
        rows: Sequence[np.ndarray],
        stats: np.ndarray,
        n_slots: int = HISTOGRAM_SLOTS,
        columns: np.ndarray | None = None,
        scratch: ScratchArrays | None = None,
    ) -> list[RowPartition]:
        """The partitions of several trees over the same bins, each at its root, their rows in
        one shared array: tree ``k`` fits ``rows[k]``, whose statistics (ordered with them,
        :meth:`TreeSettings.row_statistics`) are the next ``rows[k].size`` rows of ``stats``
        (shape ``(total rows, 3)``; taken over, not copied). With ``scratch`` (from which
        ``stats`` must then come), the shared rows, the buffers and the histograms come from
        it; :meth:`release` gives the buffers and ``stats`` back to it, and the last
        :meth:`release_rows` of the stacked partitions the rows."""
        sizes = [np.size(r) for r in rows]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if stats.shape != (int(offsets[-1]), 3):
            raise ValueError(f"stats must have shape ({int(offsets[-1])}, 3), got {stats.shape}")
        parts = [np.asarray(r, dtype=np.int64) for r in rows]
        if scratch is None:
            all_rows = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        else:
            all_rows = scratch.take((int(offsets[-1]),), np.int64)
            if parts:
                np.concatenate(parts, out=all_rows)
        store = _Store(rows=all_rows, stats=stats, scratch=scratch, readers=len(sizes))
        out = []
        for k in range(len(sizes)):
            part = cls.__new__(cls)
            part.binned = binned
            part.columns = binned.T if columns is None else columns
            part.n_slots = int(n_slots)
            part._store = store
            part._offset = int(offsets[k])
            part._size = int(sizes[k])
            part.ranges = {0: (0, sizes[k])}
            part.sides = {0: 0}
            out.append(part)
        return out

    def node_rows(self, node: int) -> np.ndarray:
        """The rows of node ``node`` (a current leaf: :meth:`leaf_ranges`), a view of the side
        that holds them."""
        store = self._store
        side = store.rows if self.sides[node] == 0 else store.row_buffer
        if side is None:
            raise RuntimeError("the partition's rows were released")
        start, stop = self.ranges[node]
        return side[self._offset + start : self._offset + stop]

    def histogram(self, node: int = 0) -> np.ndarray:
        """The histogram of a node's rows, shape ``(n_features, n_slots, 3)``."""
        return histograms_together([self], [node])[0]

    def release(self) -> None:
        """Free the statistics of this partition and those stacked with it, keeping the rows
        and ranges (no more splits or histograms after this)."""
        store = self._store
        if store.scratch is not None:
            store.scratch.give(store.stats, store.stat_buffer, store.decisions)
        store.stats = store.stat_buffer = store.decisions = None

    def release_rows(self) -> None:
        """Done with this partition's rows (after :meth:`release`): once every partition
        stacked with it is, their shared arrays (both sides) go back to the scratch pool, if
        any."""
        store = self._store
        store.readers -= 1
        if store.readers == 0 and store.scratch is not None and store.stats is None:
            store.scratch.give(store.rows, store.row_buffer)
            store.rows = store.row_buffer = None

    def leaf_ranges(self) -> dict[int, tuple[int, int]]:
        """The range of ``rows`` that holds each current leaf's rows, by node id."""
        return dict(self.ranges)

    def expand(self, expansions: Sequence[Expansion]) -> list[np.ndarray]:
        """Split the nodes (in place) and return their smaller children's histograms."""
        return expand_together([self], [expansions])[0]


@dataclass
class _Store:
    """The rows and statistics that stacked partitions share, on two sides: ``rows`` and
    ``stats``, and the buffers of the same shapes (a node's rows lie on one side or the
    other: :attr:`RowPartition.sides`), with the partition's scratch ``decisions`` (all from
    ``scratch``, if any, to which :meth:`RowPartition.release` and
    :meth:`RowPartition.release_rows` return them)."""

    rows: np.ndarray
    stats: np.ndarray
    scratch: ScratchArrays | None = None
    #: Partitions still reading ``rows`` (:meth:`RowPartition.release_rows`).
    readers: int = 1

    def __post_init__(self) -> None:
        if self.scratch is None:
            self.row_buffer = np.empty_like(self.rows)
            self.stat_buffer = np.empty_like(self.stats)
            self.decisions = np.empty(self.rows.shape, dtype=np.uint8)
        else:
            self.row_buffer = self.scratch.take(self.rows.shape, np.int64)
            self.stat_buffer = self.scratch.take(self.stats.shape)
            self.decisions = self.scratch.take(self.rows.shape, np.uint8)


def _shared_store(partitions: Sequence[RowPartition]) -> _Store:
    store = partitions[0]._store
    if any(p._store is not store for p in partitions):
        raise ValueError("the partitions do not share their rows (RowPartition.stacked)")
    return store


def histograms_together(
    partitions: Sequence[RowPartition],
    nodes: Sequence[int],
    counts: Sequence[np.ndarray] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The histograms of node ``nodes[i]`` of ``partitions[i]`` (stacked partitions), in one
    pass, shape ``(len(nodes), n_features, n_slots, 3)``. ``counts``: the nodes' count
    histograms (shape ``(n_features, n_slots)`` each), when known (a root's, the same every
    round): they are then copied in, not summed again (a quarter of the pass). ``out``: where
    to write them (:func:`~viboost.boosting.histogram.node_histograms`)."""
    store = _shared_store(partitions)
    bounds = np.array(
        [
            [p._offset + i for i in p.ranges[node]]
            for p, node in zip(partitions, nodes, strict=True)
        ],
        dtype=np.int64,
    ).reshape(-1, 2)
    sides = np.array([p.sides[node] for p, node in zip(partitions, nodes, strict=True)])
    part = partitions[0]
    hists = node_histograms(
        part.binned, store.rows, bounds[:, 0], bounds[:, 1], store.stats, part.n_slots,
        scratch=store.scratch, columns=part.columns, counted=counts is None,
        other_side=(store.row_buffer, store.stat_buffer), sides=sides, out=out,
    )  # fmt: skip
    if counts is not None:
        for hist, count in zip(hists, counts, strict=True):
            hist[:, :, 2] = count
    return hists


def expand_together(
    partitions: Sequence[RowPartition],
    expansions: Sequence[Sequence[Expansion]],
    out: np.ndarray | None = None,
) -> list[list[np.ndarray]]:
    """Split the nodes of ``expansions[k]`` in ``partitions[k]`` (stacked partitions, in place)
    in one pass, and return, per partition, their smaller children's histograms (computed in
    one further pass; with ``out``, into ``out[i]`` for the ``i``-th expansion of all, in
    order, and the histograms returned are views of it)."""
    if not partitions:
        return []
    store = _shared_store(partitions)
    flat = [(p, e) for p, requests in zip(partitions, expansions, strict=True) for e in requests]
    if not flat:
        return [[] for _ in partitions]
    bounds = np.array([[p._offset + i for i in p.ranges.pop(e.node)] for p, e in flat])
    sides = np.array([p.sides.pop(e.node) for p, e in flat], dtype=np.int8)
    n_left = partition_nodes(
        partitions[0].columns, store.rows, store.stats, bounds[:, 0], bounds[:, 1],
        np.array([e.feature for _, e in flat]), np.array([e.position for _, e in flat]),
        np.array([e.missing_left for _, e in flat]), store.row_buffer, store.stat_buffer,
        sides=sides, decisions=store.decisions,
    )  # fmt: skip
    smaller = []
    for (p, e), (start, stop), count, side in zip(flat, bounds, n_left, sides, strict=True):
        start, stop, mid = start - p._offset, stop - p._offset, start - p._offset + count
        p.ranges[e.left] = (int(start), int(mid))
        p.ranges[e.right] = (int(mid), int(stop))
        p.sides[e.left] = p.sides[e.right] = 1 - int(side)
        smaller.append(e.left if e.small_left else e.right)
    hists = histograms_together([p for p, _ in flat], smaller, out=out)
    per_partition: list[list[np.ndarray]] = [[] for _ in partitions]
    index = {id(p): k for k, p in enumerate(partitions)}
    for (p, _), hist in zip(flat, hists, strict=True):
        per_partition[index[id(p)]].append(hist)
    return per_partition


def expanded_together(
    growths: Sequence[TreeGrowth],
    histograms: Sequence[Sequence[np.ndarray]],
    scratch: ScratchArrays | None = None,
    children: np.ndarray | None = None,
) -> None:
    """:meth:`TreeGrowth.expanded` of several growths of the same settings and bins (the folds'
    trees), with the best splits of all their new nodes found in one parallel call
    (:func:`~viboost.boosting.splitting.best_node_splits`). With ``scratch``, the children's
    histograms are held from it (until the trees are grown and it is reclaimed).

    ``children`` (shape ``(2 m, n_features, n_slots, 3)`` for ``m`` requests in all): where the
    children's histograms are kept, the ``i``-th request's smaller child's already in
    ``children[i]`` (``histograms`` are views of them: :func:`expand_together` with ``out``),
    its larger child's then written to ``children[m + i]``; when None, both are held from
    ``scratch`` (or made) and the smaller ones copied in."""
    n_requests = sum(len(h) for h in histograms)
    if n_requests == 0:
        for growth in growths:
            growth._attach([], [])
        return
    first = next(h for h in histograms if len(h))[0]
    shape = (2 * n_requests, *first.shape)
    copy_small = children is None
    if children is None:
        children = np.empty(shape) if scratch is None else scratch.take(shape, hold=True)
    elif children.shape != shape:
        raise ValueError(f"children must have shape {shape}, got {children.shape}")
    made, priors, owners = [], np.empty(2 * n_requests), []
    at = 0
    for growth, hists in zip(growths, histograms, strict=True):
        mine = growth._children(hists, children, at, n_requests, copy_small)
        made.extend(mine)
        priors[at : at + len(hists)] = growth.prior
        priors[n_requests + at : n_requests + at + len(hists)] = growth.prior
        owners.append((growth, len(mine)))
        at += len(hists)
    # Every child's sums from its feature 0 (each row has one bin of every feature), in one
    # reduction: per child the slots are added in order, as ``hist[0].sum(axis=0)`` adds them.
    sums = np.sum(children[:, 0], axis=1)
    wanted = np.zeros(2 * n_requests, dtype=bool)
    at = 0
    for growth, count in owners:
        for depth, position in made[at : at + count]:
            wanted[position] = growth._may_split(depth, sums[position])
        at += count
    reference = growths[0]
    splits = best_node_splits(
        children, reference.n_bins, reference._code, priors, reference._min_leaf, wanted
    )
    at = 0
    for growth, count in owners:
        growth._attach(
            [(depth, children[p], sums[p]) for depth, p in made[at : at + count]],
            [splits[p] for _, p in made[at : at + count]],
        )
        at += count


def grow(
    growth: TreeGrowth, expand: Callable[[list[Expansion]], Sequence[np.ndarray]]
) -> TreeGrowth:
    """Answer ``growth``'s requests with ``expand`` until the tree is grown.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.binning import FeatureBinner
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)  # an interaction: no stump fits it
    >>> binner = FeatureBinner().fit(X)
    >>> settings = TreeSettings(4, None, 5, leaf_weights="tied", criterion="error")
    >>> first, second = settings.statistics(np.full(400, 1 / 400), y, None)
    >>> rows = RowPartition(binner.transform(X), np.arange(400), first, second, np.ones(400))
    >>> growth = TreeGrowth(
    ...     rows.histogram(), binner.n_bins_, binner.thresholds_, settings, settings.prior(1.0),
    ...     speculate=True)
    >>> nodes, error = grow(growth, rows.expand).tree()
    >>> int(nodes["is_leaf"].sum())
    4
    >>> from viboost.boosting.tree_search import TreeSearch  # the in-memory search's tree
    >>> search = TreeSearch(X, max_leaf_nodes=4, min_samples_leaf=5, leaf_weights="tied")
    >>> bool(np.array_equal(nodes, search.best(np.full(400, 1 / 400), y)[0].nodes))
    True
    """
    while requests := growth.requests():
        growth.expanded(expand(requests))
    return growth
