"""Split finding of histogram trees: node scores, the best split of a node, the row partition.

A node's histogram (:func:`viboost.boosting.histogram.node_histograms`) holds per feature and bin
two sums of the round's per-row statistics and the rows' count. The split score depends on how
the leaf values are set (:data:`CRITERIA`, see :mod:`viboost.boosting.trees`); a split gains
``score(left) + score(right) - score(parent)``:

- ``"newton"`` (code 0): ``G^2 / (H + lambda)``;
- ``"smoothed"`` (code 1): the fall in the exponential loss at Schapire and Singer's smoothed
  confidence-rated leaf;
- ``"error"`` (code 2): the fall in weighted error, each leaf labelled by its majority.

:func:`best_node_split` scans every bin boundary of every feature with both sides for missing
values, :func:`partition_nodes` moves nodes' rows into their two children, and
:func:`leaf_value` is a leaf's provisional value under each score.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.binning import MISSING_BIN

__all__ = [
    "CRITERIA",
    "GAIN_TOL",
    "best_node_split",
    "leaf_value",
    "node_score",
    "partition_nodes",
]

#: Split scores by code: Newton's G^2 / (H + lambda), the smoothed exponential loss, the error.
CRITERIA = {"newton": 0, "smoothed": 1, "error": 2}
#: A split must gain more than this fraction of its parent's score (ties below rounding); a
#: bin or a node side whose count is below this fraction of the node's is empty (the
#: subtraction trick leaves rounding residue where a count is 0).
GAIN_TOL = 1e-12


@numba.njit(cache=True)
def node_score(a, b, criterion, prior):  # pragma: no cover - compiled
    """A node's score from its two sums (see the module docstring)."""
    if criterion == 0:
        return a * a / (b + prior)
    if criterion == 1:
        ratio = math.sqrt((prior + b) / (prior + a))
        return a + b - (a * ratio + b / ratio)
    return max(a, b)


@numba.njit(cache=True)
def best_node_split(hist, n_bins, criterion, prior, min_leaf):  # pragma: no cover - compiled
    """The best split of a node from its histogram (per feature and slot, the missing values
    in the last slot: :func:`~viboost.boosting.histogram.node_histograms`).

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
    missing = hist.shape[1] - 1  # the missing values' slot
    ta, tb, tc = 0.0, 0.0, 0.0
    for b in range(hist.shape[1]):
        ta += hist[0, b, 0]
        tb += hist[0, b, 1]
        tc += hist[0, b, 2]
    parent = node_score(ta, tb, criterion, prior)
    tol = GAIN_TOL * max(abs(parent), 1e-300)
    empty = GAIN_TOL * tc  # a count below this is rounding residue of the subtraction trick
    for j in range(d):
        ma, mb, mc = hist[j, missing, 0], hist[j, missing, 1], hist[j, missing, 2]
        no_missing = mc <= empty
        la, lb, lc = 0.0, 0.0, 0.0
        nb = n_bins[j]
        for p in range(1, nb + 1):
            la += hist[j, p - 1, 0]
            lb += hist[j, p - 1, 1]
            lc += hist[j, p - 1, 2]
            if hist[j, p - 1, 2] <= empty and p < nb:
                continue  # an empty bin: the same split as the next position
            for side in range(2):  # 0: missing left, 1: missing right
                if no_missing and side == 1:
                    continue
                if side == 0:
                    xa, xb, xc = la + ma, lb + mb, lc + mc
                else:
                    xa, xb, xc = la, lb, lc
                if xc < min_leaf or tc - xc < min_leaf:
                    continue
                gain = (
                    node_score(xa, xb, criterion, prior)
                    + node_score(ta - xa, tb - xb, criterion, prior)
                    - parent
                )
                if gain > best_gain + tol:
                    best_gain = gain
                    best_j, best_p = j, p
                    if no_missing:  # no missing value here: NaN to the larger child
                        best_missing_left = lc >= tc - lc
                    else:
                        best_missing_left = side == 0
                    best_la, best_lb, best_lc = xa, xb, xc
    if best_gain <= tol:
        return -np.inf, -1, 0, True, 0.0, 0.0, 0.0
    return best_gain, best_j, best_p, best_missing_left, best_la, best_lb, best_lc


# Rows per chunk of a parallel partition (boundaries from the node's row count only).
_PARTITION_CHUNK_ROWS = 1 << 15
_PARTITION_MAX_CHUNKS = 64


@numba.njit(cache=True)
def _goes_left(b, position, missing_left):  # pragma: no cover - compiled
    return missing_left if b == MISSING_BIN else b < position


@numba.njit(cache=True)
def _partition_chunks(starts, stops):  # pragma: no cover - compiled
    """Each node's chunks (as ``_node_chunks`` of the histograms): the first chunk's index per
    node (and the total at the end) and the rows per chunk."""
    n_nodes = starts.shape[0]
    first = np.zeros(n_nodes + 1, dtype=np.int64)
    size = np.zeros(n_nodes, dtype=np.int64)
    for r in range(n_nodes):
        n = stops[r] - starts[r]
        n_chunks = min(
            _PARTITION_MAX_CHUNKS, max(1, (n + _PARTITION_CHUNK_ROWS - 1) // _PARTITION_CHUNK_ROWS)
        )
        size[r] = (n + n_chunks - 1) // n_chunks
        first[r + 1] = first[r] + n_chunks
    return first, size


@threaded_kernel(cache=True)
def _partition(
    columns,
    rows,
    stats,
    row_buffer,
    stat_buffer,
    starts,
    stops,
    sides,
    features,
    positions,
    missing_left,
    decisions,
):  # pragma: no cover - compiled
    """Stable partition of each node's positions ``starts[r]:stops[r]`` in fixed chunks, read
    from side ``sides[r]`` (0: ``rows``, ``stats``; 1: the buffers) and written to the other
    side at the same positions: count each chunk's left rows (noting each row's side in
    ``decisions``), then each chunk writes its rows to their final places; the same order for
    any number of threads. Returns each node's left count.

    The positions are counted with unsigned integers: an index that may be negative makes
    numba test it for Python's wraparound at every use, which here cost more than the work
    (measured: :doc:`docs/speed.md </speed>` ("Inside the kernels"))."""
    n_nodes = starts.shape[0]
    first, size = _partition_chunks(starts, stops)
    n_units = first[n_nodes]
    lefts = np.zeros(n_units, dtype=np.int64)
    for unit in numba.prange(n_units):
        r = np.searchsorted(first, unit, side="right") - 1
        lo = starts[r] + (unit - first[r]) * size[r]
        feature, position, missing = features[r], positions[r], missing_left[r]
        source = rows if sides[r] == 0 else row_buffer
        count = 0
        for k in range(np.uint64(lo), np.uint64(min(stops[r], lo + size[r]))):
            left = _goes_left(columns[feature, source[k]], position, missing)
            decisions[k] = left
            count += left
        lefts[unit] = count
    left_at = np.zeros(n_units, dtype=np.int64)
    right_at = np.zeros(n_units, dtype=np.int64)
    n_left = np.zeros(n_nodes, dtype=np.int64)
    for node in range(n_nodes):
        count = 0
        for unit in range(first[node], first[node + 1]):
            left_at[unit] = starts[node] + count
            count += lefts[unit]
        n_left[node] = count
        taken = 0
        for unit in range(first[node], first[node + 1]):
            right_at[unit] = starts[node] + count + ((unit - first[node]) * size[node] - taken)
            taken += lefts[unit]
    for unit in numba.prange(n_units):
        r = np.searchsorted(first, unit, side="right") - 1
        lo = starts[r] + (unit - first[r]) * size[r]
        if sides[r] == 0:
            from_rows, from_stats, to_rows, to_stats = rows, stats, row_buffer, stat_buffer
        else:
            from_rows, from_stats, to_rows, to_stats = row_buffer, stat_buffer, rows, stats
        at_left, at_right = left_at[unit], right_at[unit]
        for k in range(np.uint64(lo), np.uint64(min(stops[r], lo + size[r]))):
            # Branch-free: the side was decided in the count pass, and a mispredicted branch
            # per row cost more than the select.
            left = np.int64(decisions[k])
            at = np.uint64(at_left if left else at_right)
            at_left += left
            at_right += 1 - left
            to_rows[at] = from_rows[k]
            to_stats[at, 0] = from_stats[k, 0]
            to_stats[at, 1] = from_stats[k, 1]
            to_stats[at, 2] = from_stats[k, 2]
    return n_left


def partition_nodes(
    columns: np.ndarray,
    rows: np.ndarray,
    stats: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    features: np.ndarray,
    positions: np.ndarray,
    missing_left: np.ndarray,
    row_buffer: np.ndarray,
    stat_buffer: np.ndarray,
    sides: np.ndarray | None = None,
    decisions: np.ndarray | None = None,
) -> np.ndarray:
    """Stable partition of the disjoint ranges ``starts[r]:stops[r]`` (each node's left
    child's rows first); returns their counts.

    The rows (and ``stats``, ordered with them) live on two sides, ``rows`` / ``stats`` and
    ``row_buffer`` / ``stat_buffer``: node ``r``'s on side ``sides[r]`` (0: the first pair,
    1: the buffers; None: all on side 0), and its children are written to the other side at
    the same positions (nothing is copied back: the next split of a child reads where it
    lies). Row ``i`` has bin ``columns[j, i]`` of feature ``j`` (the bins by feature,
    ``binned.T``, fastest C-contiguous: a split reads one feature of many rows). Rows with bin
    ``< positions[r]`` of ``features[r]`` go left, missing ones (bin 255) if
    ``missing_left[r]``. The nodes may belong to different trees (their rows in one array):
    all are one parallel pass. ``decisions`` (uint8, as long as ``rows``; allocated when None)
    is scratch. A call of a single chunk runs on the calling thread.

    Two sides, with nothing copied back and each row's side decided once, against the
    children copied back to one side: :doc:`docs/speed.md </speed>` ("Inside the kernels")."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    stops = np.ascontiguousarray(stops, dtype=np.int64)
    n_nodes = starts.shape[0]
    sides = (
        np.zeros(n_nodes, dtype=np.int8)
        if sides is None
        else np.ascontiguousarray(sides, dtype=np.int8)
    )
    if sides.shape != (n_nodes,):
        raise ValueError(f"sides must have one entry per node ({n_nodes}), got {sides.shape}")
    if decisions is None:
        decisions = np.empty(rows.shape[0], dtype=np.uint8)
    kernel = _partition
    if int(np.sum(stops - starts)) <= _PARTITION_CHUNK_ROWS:
        kernel = _partition.serial
    return kernel(
        columns, rows, stats, row_buffer, stat_buffer, starts, stops, sides,
        np.ascontiguousarray(features, dtype=np.int64),
        np.ascontiguousarray(positions, dtype=np.int64),
        np.ascontiguousarray(missing_left, dtype=np.bool_),
        decisions,
    )  # fmt: skip


@numba.njit(cache=True)
def leaf_value(a, b, criterion, prior):  # pragma: no cover - compiled
    """The provisional value of a leaf from its two sums (replaced by its posterior's mode in a
    per-leaf fit): Newton's step, the smoothed log-ratio, or the majority label (compiled:
    the grown trees' leaves take it in :mod:`viboost.boosting.growth`)."""
    if criterion == 0:
        return a / (b + prior) if b + prior > 0 else 0.0
    if criterion == 1:
        return 0.5 * (math.log(prior + a) - math.log(prior + b)) if prior + a > 0 else 0.0
    return 1.0 if a >= b else -1.0
