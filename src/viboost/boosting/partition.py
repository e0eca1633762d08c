"""The rows of histogram trees' nodes held in one place, answering a growth's requests.

A growth (:class:`~viboost.boosting.growth.TreeGrowths`) asks for nodes to be split
(:class:`~viboost.boosting.growth.Expansion`) and for the histograms of their smaller
children. :class:`RowPartition` answers those requests for rows held in one place: the rows of
each node in one contiguous range (:func:`~viboost.boosting.splitting.partition_nodes`), the
histogram of a range (:func:`~viboost.boosting.histogram.node_histograms`) of the round's
per-row statistics (:meth:`~viboost.boosting.split_statistics.TreeSettings.row_statistics`).
A distributed fit keeps one per block of rows and adds the blocks' histograms.

The partitions of several trees over the same bins (:meth:`RowPartition.stacked`: the folds of
a cross-fit, the classes of a round) share one array of rows, so that
:func:`histograms_together`, :func:`root_histograms` and :func:`expand_together` serve all of
them in one parallel pass; :func:`grow_in_place` grows their trees from the roots in one
compiled call, every step of every tree without a return to Python (what
:meth:`~viboost.boosting.tree_search.TreeSearch.best_together` does; the Dask fit answers the
growth's requests step by step, with :func:`expand_together` on each block).
:func:`partition_leaf_index` reads each row's leaf off a grown tree's partition, and
:func:`grow` runs a growth against a function that answers its requests (such as
:meth:`RowPartition.expand`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost._utils.scratch import ScratchArrays
from viboost.boosting.growth import (
    Expansion,
    TreeGrowth,
    TreeGrowths,
    advance_growths,
    attach_children,
    pending_requests,
)
from viboost.boosting.histogram import (
    HISTOGRAM_SLOTS,
    SparseBins,
    histogram_buffers,
    histograms_into,
    node_histograms,
)
from viboost.boosting.splitting import partition_nodes, partition_ranges
from viboost.boosting.trees import HistogramTree

__all__ = [
    "RowPartition",
    "expand_together",
    "grow",
    "grow_in_place",
    "histograms_together",
    "partition_leaf_index",
    "root_histograms",
]


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
        The statistics of :meth:`~viboost.boosting.split_statistics.TreeSettings.statistics`.
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
    sparse : SparseBins, default=None
        :func:`~viboost.boosting.histogram.sparse_bins` of ``binned``: the histograms read the
        sparse features' entries (the same sums to rounding); None: every feature dense.

    ``rows`` and ``ranges`` are copied: :meth:`expand` never writes the caller's arrays. A
    split moves a node's rows (and their statistics) to the children's ranges in a second
    array (:func:`~viboost.boosting.splitting.partition_nodes`), and the next split of a child
    moves them back: each node's rows lie on one of two sides (``sides``), and
    :meth:`node_rows` reads them there.
    :meth:`stacked` makes the partitions of several trees over the same bins (the folds of a
    cross-fit) whose rows share one array, so that :func:`expand_together` splits and
    histograms the nodes of all of them in one parallel pass.
    """

    # Set by :meth:`stacked` (which also makes the partitions that no __init__ runs for).
    #: The rows' bins (row-major), shape (n_rows, n_features).
    binned: np.ndarray
    #: The same bins by feature, shape (n_features, n_rows).
    columns: np.ndarray
    #: The sparse features' entries, or None (every feature dense).
    sparse: SparseBins | None
    #: Slots per feature of the histograms.
    n_slots: int
    #: The rows and statistics shared with the partitions stacked with this one.
    _store: _Store
    #: Where this partition's rows start in the shared arrays of ``_store``.
    _offset: int
    #: How many rows this partition fits.
    _size: int

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
        sparse: SparseBins | None = None,
    ) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        # Per row (by row index, never written): the statistics as given.
        per_row = [np.asarray(values, dtype=np.float64) for values in (first, second, counts)]
        stats = np.empty((rows.size, 3))
        for column, values in enumerate(per_row):
            stats[:, column] = values[rows]
        (partition,) = self.stacked(binned, [rows], stats, n_slots, columns, sparse=sparse)
        self.__dict__.update(partition.__dict__)
        self.first, self.second, self.counts = per_row
        if ranges is not None:
            self.ranges = dict(ranges)
            #: The side (0: ``rows``, 1: ``row_buffer`` of the shared store) on which each
            #: node's rows lie.
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
        sparse: SparseBins | None = None,
    ) -> list[RowPartition]:
        """The partitions of several trees over the same bins, each at its root, their rows in
        one shared array: tree ``k`` fits ``rows[k]``, whose statistics (ordered with them,
        :meth:`~viboost.boosting.split_statistics.TreeSettings.row_statistics`) are the next
        ``rows[k].size`` rows of ``stats`` (shape ``(total rows, 3)``; taken over, not
        copied). With ``scratch`` (from which ``stats`` must then come), the shared rows, the
        buffers and the histograms come from it; :meth:`release` gives the buffers and
        ``stats`` back to it, and the last :meth:`release_rows` of the stacked partitions the
        rows."""
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
            part.sparse = sparse
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

    # Each of the arrays is None once released.
    rows: np.ndarray | None
    stats: np.ndarray | None
    scratch: ScratchArrays | None = None
    #: Partitions still reading ``rows`` (:meth:`RowPartition.release_rows`).
    readers: int = 1

    def __post_init__(self) -> None:
        rows, stats = self.rows, self.stats
        assert rows is not None and stats is not None, "a store starts with its arrays"
        self.row_buffer: np.ndarray | None
        self.stat_buffer: np.ndarray | None
        self.decisions: np.ndarray | None
        if self.scratch is None:
            self.row_buffer = np.empty_like(rows)
            self.stat_buffer = np.empty_like(stats)
            self.decisions = np.empty(rows.shape, dtype=np.uint8)
        else:
            self.row_buffer = self.scratch.take(rows.shape, np.int64)
            self.stat_buffer = self.scratch.take(stats.shape)
            self.decisions = self.scratch.take(rows.shape, np.uint8)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``rows``, ``stats``, ``row_buffer``, ``stat_buffer`` and ``decisions``, for a split
        or a histogram; RuntimeError once the statistics are released."""
        rows, stats, row_buffer = self.rows, self.stats, self.row_buffer
        stat_buffer, decisions = self.stat_buffer, self.decisions
        if (
            rows is None
            or stats is None
            or row_buffer is None
            or stat_buffer is None
            or decisions is None
        ):
            raise RuntimeError("the partition's statistics were released")
        return rows, stats, row_buffer, stat_buffer, decisions

    def __getstate__(self) -> dict:
        """A copy (a block's trees moved to another dask worker) keeps no pool: its arrays are
        the pickle's memory, which no pool handed out, so its partitions' releases leave them
        to the garbage collector."""
        state = self.__dict__.copy()
        state["scratch"] = None
        return state


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
    rows, stats, row_buffer, stat_buffer, _ = store.arrays()
    hists = node_histograms(
        part.binned, rows, bounds[:, 0], bounds[:, 1], stats, part.n_slots,
        scratch=store.scratch, counted=counts is None,
        other_side=(row_buffer, stat_buffer), sides=sides, out=out,
        sparse=part.sparse,
    )  # fmt: skip
    if counts is not None:
        for hist, count in zip(hists, counts, strict=True):
            hist[:, :, 2] = count
    return hists


def root_histograms(
    partitions: Sequence[RowPartition],
    counts: Sequence[np.ndarray | None],
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The roots' histograms of stacked partitions (:func:`histograms_together` of node 0;
    ``out`` as there) and their count histograms: ``counts`` (per partition, its root's count
    histogram from an earlier round, or None), copied in where all are known (a root's rows
    and weights are the same every round), else summed with the statistics and returned for
    the next rounds."""
    nodes = [0] * len(partitions)
    known = [c for c in counts if c is not None]
    if len(known) == len(counts):
        return histograms_together(partitions, nodes, known, out=out), known
    roots = histograms_together(partitions, nodes, out=out)
    return roots, [root[:, :, 2].copy() for root in roots]


def _bitsets(expansions: Sequence[Expansion]) -> np.ndarray | None:
    """The left sets of the categorical splits among ``expansions`` (uint64, shape
    ``(len, 4)``, zeros for a numeric split), or None when there is none."""
    if all(e.categories is None for e in expansions):
        return None
    out = np.zeros((len(expansions), 4), dtype=np.uint64)
    for r, e in enumerate(expansions):
        if e.categories is not None:
            out[r] = e.categories
    return out


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
    rows, stats, row_buffer, stat_buffer, decisions = store.arrays()
    n_left = partition_nodes(
        partitions[0].columns, rows, stats, bounds[:, 0], bounds[:, 1],
        np.array([e.feature for _, e in flat]), np.array([e.position for _, e in flat]),
        np.array([e.missing_left for _, e in flat]), row_buffer, stat_buffer,
        sides=sides, decisions=decisions, bitsets=_bitsets([e for _, e in flat]),
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


@threaded_kernel(
    calls={
        "attach_children": attach_children,
        "histograms_into": histograms_into,
        "partition_ranges": partition_ranges,
    },
    cache=True,
)
def _grow_in_place(
    ints, reals, counts, pending, max_leaf_nodes, max_depth, min_leaf, n_bins, is_cat, cat,
    code, priors, binned, columns, rows, stats, row_buffer, stat_buffer, decisions, node_start,
    node_stop, node_side, node_hist, store, used, partial, wide, dense, row_starts,
    entry_features, entry_bins, sparse, common_slots, n_threads,
):  # pragma: no cover - compiled  # fmt: skip
    """The growth of :func:`grow_in_place`, compiled (on ``n_threads``, the calling thread's
    numba count): until every tree is grown, or ``store``
    has no room for another step's histograms, advance the growths (one request a tree),
    split the requested nodes' rows (:func:`~viboost.boosting.splitting.partition_ranges`),
    histogram the smaller children (:func:`~viboost.boosting.histogram.histograms_into`)
    into the next rows of ``store``, the larger ones as their parents' minus the smaller
    ones' after them, and attach them
    (:func:`~viboost.boosting.growth.attach_children`): the steps of
    :meth:`~viboost.boosting.growth.TreeGrowths.requests`, :func:`expand_together` and
    :meth:`~viboost.boosting.growth.TreeGrowths.expanded`, in the same order on the same
    numbers. Node ``i`` of tree ``t`` holds positions ``node_start[t, i]:node_stop[t, i]`` of
    the shared rows on side ``node_side[t, i]`` (-1 once split) and its histogram is
    ``store[node_hist[t, i]]``. Returns the rows of ``store`` used and whether the trees are
    grown."""
    n_trees = ints.shape[0]
    while used + 2 * n_trees <= store.shape[0]:
        advance_growths(ints, reals, counts, pending, max_leaf_nodes, max_depth, min_leaf, 1, True)
        tree, node, left, right, feature, position, missing_left, small_left, words = (
            pending_requests(counts, pending)
        )
        m = tree.shape[0]
        if m == 0:
            return used, True
        starts = np.empty(m, dtype=np.int64)
        stops = np.empty(m, dtype=np.int64)
        sides = np.empty(m, dtype=np.int8)
        for q in range(m):
            t, i = tree[q], node[q]
            starts[q], stops[q], sides[q] = node_start[t, i], node_stop[t, i], node_side[t, i]
        n_left = partition_ranges(
            columns, rows, stats, row_buffer, stat_buffer, starts, stops, sides, feature,
            position, missing_left, words, decisions,
        )  # fmt: skip
        small_starts = np.empty(m, dtype=np.int64)
        small_stops = np.empty(m, dtype=np.int64)
        small_sides = np.empty(m, dtype=np.int8)
        for q in range(m):
            t, mid, side = tree[q], starts[q] + n_left[q], 1 - sides[q]
            # The children's rows, on the side the partition wrote them to (the parent's
            # rows are no longer a leaf's).
            node_start[t, left[q]], node_stop[t, left[q]] = starts[q], mid
            node_start[t, right[q]], node_stop[t, right[q]] = mid, stops[q]
            node_side[t, left[q]] = node_side[t, right[q]] = side
            node_side[t, node[q]] = -1
            small = left[q] if small_left[q] else right[q]
            small_starts[q], small_stops[q] = node_start[t, small], node_stop[t, small]
            small_sides[q] = side
        children = store[used : used + 2 * m]
        histograms_into(
            binned, rows, stats, row_buffer, stat_buffer, small_sides, small_starts,
            small_stops, True, children[:m], partial, wide, dense, row_starts, entry_features,
            entry_bins, sparse, common_slots, 0, -1, n_threads,
        )  # fmt: skip
        for q in range(m):
            t = tree[q]
            # The larger child's histogram: its parent's minus the smaller one's (as loops:
            # numba's np.subtract(a, b, out) made the 10^5-row tree fit 1.76 -> 2.0 s).
            parent = store[node_hist[t, node[q]]]
            small, large = children[q], children[m + q]
            for j in range(parent.shape[0]):
                for slot in range(parent.shape[1]):
                    for s in range(3):
                        large[j, slot, s] = parent[j, slot, s] - small[j, slot, s]
            small_id, large_id = (left[q], right[q]) if small_left[q] else (right[q], left[q])
            node_hist[t, small_id] = used + q
            node_hist[t, large_id] = used + m + q
        attach_children(
            ints, reals, counts, pending, children, n_bins, is_cat, cat, code, priors, min_leaf,
            max_depth,
        )  # fmt: skip
        used += 2 * m
    return used, False


def grow_in_place(
    partitions: Sequence[RowPartition],
    growths: TreeGrowths,
    roots: np.ndarray,
) -> TreeGrowths:
    """Grow ``growths`` (:class:`~viboost.boosting.growth.TreeGrowths` of one tree per
    partition, stacked partitions at their roots, one request at a time), answering its
    requests here, in one compiled call for every step of every tree (:func:`_grow_in_place`)
    rather than a call per kernel and step: the trees and the partitions' ranges are those of
    :func:`expand_together` answering :meth:`~viboost.boosting.growth.TreeGrowths.requests`.
    ``roots``: the roots' histograms (shape ``(n_trees, n_features, n_slots, 3)``). The
    children's histograms are held in one array from the partitions' scratch pool (grown,
    if a growth needs more, by doubling), given back when the trees are grown."""
    if growths.speculate not in (False, 1):
        raise ValueError("grow_in_place answers one request a tree (speculate=False)")
    n_trees = len(partitions)
    if len(growths) != n_trees or roots.shape[0] != n_trees:
        raise ValueError(
            f"expected one growth and one root per partition ({n_trees}), got "
            f"{len(growths)} and {roots.shape[0]}"
        )
    store_arrays = _shared_store(partitions)
    scratch = store_arrays.scratch if store_arrays.scratch is not None else ScratchArrays()
    rows, stats, row_buffer, stat_buffer, decisions = store_arrays.arrays()
    state = growths.state
    capacity = state.ints.shape[1]
    node_start = np.full((n_trees, capacity), -1, dtype=np.int64)
    node_stop = np.full((n_trees, capacity), -1, dtype=np.int64)
    node_side = np.full((n_trees, capacity), -1, dtype=np.int8)
    node_hist = np.full((n_trees, capacity), -1, dtype=np.int64)
    for t, part in enumerate(partitions):
        if list(part.ranges) != [0]:
            raise ValueError("grow_in_place grows partitions from their roots")
        start, stop = part.ranges[0]
        node_start[t, 0], node_stop[t, 0] = part._offset + start, part._offset + stop
        node_side[t, 0] = part.sides[0]
        node_hist[t, 0] = t
    part = partitions[0]
    sparse = SparseBins.all_dense(part.binned.shape[1]) if part.sparse is None else part.sparse
    # Room for each tree's root and the children of 30 splits (a tree of 31 leaves, the
    # default of LightGBM and HGB, or of max_leaf_nodes leaves if fewer); doubled if the
    # trees grow further, so a large max_leaf_nodes costs the histograms its trees grow.
    splits = min(state.max_leaf_nodes - 1, 30)
    store = scratch.take((n_trees * (1 + 2 * splits), *roots.shape[1:]))
    store[:n_trees] = roots
    partial, wide = histogram_buffers(
        n_trees, int(rows.shape[0]), roots.shape[1], roots.shape[2], scratch
    )
    used = n_trees
    try:
        while True:
            used, grown = _grow_in_place(
                *state, part.binned, part.columns, rows, stats, row_buffer, stat_buffer,
                decisions, node_start, node_stop, node_side, node_hist, store, used, partial,
                wide, sparse.dense, sparse.row_starts, sparse.entry_features, sparse.entry_bins,
                sparse.sparse, sparse.common_slots(roots.shape[2]), numba.get_num_threads(),
            )  # fmt: skip
            if grown:
                break
            larger = scratch.take((2 * store.shape[0], *store.shape[1:]))
            larger[:used] = store[:used]
            scratch.give(store)
            store = larger
    finally:
        scratch.give(store, partial, wide)
    for t, part in enumerate(partitions):
        leaves = np.flatnonzero(node_side[t] >= 0)
        part.ranges = {
            int(i): (int(node_start[t, i]) - part._offset, int(node_stop[t, i]) - part._offset)
            for i in leaves
        }
        part.sides = {int(i): int(node_side[t, i]) for i in leaves}
    return growths


@threaded_kernel(cache=True)
def _number_rows(out, rows, other_rows, starts, stops, sides, numbers):  # pragma: no cover
    """``out[row] = numbers[r]`` for every row of range ``starts[r]:stops[r]`` of ``rows``
    (``other_rows`` where ``sides[r]`` is 1): each leaf's number to its rows, leaves in
    parallel (the ranges are disjoint, so are their rows)."""
    for r in numba.prange(starts.shape[0]):
        source = rows if sides[r] == 0 else other_rows
        value = numbers[r]
        for k in range(starts[r], stops[r]):
            out[source[k]] = value


def partition_leaf_index(
    partition: RowPartition,
    tree: HistogramTree,
    node_positions: np.ndarray,
    binned_columns: np.ndarray,
    outside: np.ndarray,
) -> np.ndarray:
    """The leaf number (in leaf order) of every row of ``binned_columns`` (``[feature,
    row]``) in ``tree``, grown on ``partition``: a row of the partition from its node's range
    (``node_positions``: :meth:`~viboost.boosting.growth.TreeGrowth.node_positions`); the rows
    ``outside`` it, and those of a node the tree split without partitioning its rows (its last
    split), routed by their bins."""
    number = tree.leaf_numbers
    is_leaf = tree.nodes["is_leaf"]
    out = np.empty(binned_columns.shape[1], dtype=np.int64)
    routed = [outside]
    bounds, sides, numbers = [], [], []
    for node, (start, stop) in partition.leaf_ranges().items():
        position = node_positions[node]
        if is_leaf[position]:
            bounds.append((partition._offset + start, partition._offset + stop))
            sides.append(partition.sides[node])
            numbers.append(number[position])
        else:  # split without partitioning its rows (the tree's last split)
            routed.append(partition.node_rows(node))
    if bounds:
        store = partition._store
        if store.rows is None or store.row_buffer is None:
            raise RuntimeError("the partition's rows were released")
        edges = np.array(bounds, dtype=np.int64)
        _number_rows(
            out, store.rows, store.row_buffer, edges[:, 0], edges[:, 1],
            np.array(sides, dtype=np.int8), np.array(numbers, dtype=np.int64),
        )  # fmt: skip
    routed_rows = np.concatenate(routed)
    if routed_rows.size:
        out[routed_rows] = tree.leaf_index(binned_columns, routed_rows)
    return out


def grow(
    growth: TreeGrowth, expand: Callable[[list[Expansion]], Sequence[np.ndarray]]
) -> TreeGrowth:
    """Answer ``growth``'s requests with ``expand`` until the tree is grown.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.binning import FeatureBinner
    >>> from viboost.boosting.growth import TreeGrowth
    >>> from viboost.boosting.split_statistics import TreeSettings
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
