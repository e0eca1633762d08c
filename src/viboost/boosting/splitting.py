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
values, and every categorical feature (bins are its codes; issue 53) for the best set of
categories to send left, as LightGBM and scikit-learn HGB search it
(:func:`_best_categorical_split`, regularised by :func:`categorical_settings`);
:func:`partition_nodes` moves nodes' rows into their two children (a categorical split by its
set's bits), and :func:`leaf_value` is a leaf's provisional value under each score.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.binning import MISSING_BIN
from viboost.boosting.predictor import category_bit

__all__ = [
    "CRITERIA",
    "GAIN_TOL",
    "best_node_split",
    "categorical_settings",
    "leaf_value",
    "node_score",
    "partition_nodes",
    "partition_ranges",
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


#: Defaults of the categorical split search (issue 53; LightGBM's and scikit-learn HGB's
#: regularisation of category sets): the smoothing of the sort key in rows, the rows a prefix
#: must add before its boundary is scored, the most groups tried one against the rest, the
#: most groups on the scanned side, and the extra L2 term in row units. The kernel reads them
#: in this order from a float array (:func:`categorical_settings`).
CAT_SMOOTH = 10.0
MAX_CAT_TO_ONEHOT = 4
MAX_CAT_THRESHOLD = 32
CAT_L2 = 0.0


def categorical_settings(
    min_samples_leaf: float,
    cat_smooth: float = CAT_SMOOTH,
    min_data_per_group: float | None = None,
    max_cat_to_onehot: int = MAX_CAT_TO_ONEHOT,
    max_cat_threshold: int = MAX_CAT_THRESHOLD,
    cat_l2: float = CAT_L2,
) -> np.ndarray:
    """The categorical search's constants as the float array :func:`best_node_split` reads:
    ``[cat_smooth, min_data_per_group, max_cat_to_onehot, max_cat_threshold, cat_l2]``;
    ``min_data_per_group`` None is ``min(100, max(min_samples_leaf, 10))``."""
    if min_data_per_group is None:
        min_data_per_group = min(100.0, max(float(min_samples_leaf), 10.0))
    return np.array(
        [cat_smooth, min_data_per_group, max_cat_to_onehot, max_cat_threshold, cat_l2],
        dtype=np.float64,
    )


@numba.njit(cache=True)
def _set_bit(words, code):  # pragma: no cover - compiled
    """Set bit ``code`` (0 .. 255) of the four int64 words (uint64 bit patterns)."""
    words[code >> 6] |= np.int64(1) << np.int64(code & 63)


@numba.njit(cache=True)
def _sums_of(hist, j, slots, n, missing_slot, ma, mb, mc):  # pragma: no cover - compiled
    """The three sums of the groups ``slots[:n]`` of feature ``j`` (the missing values' slot
    counted as its own sums ``ma, mb, mc``)."""
    xa, xb, xc = 0.0, 0.0, 0.0
    for g in range(n):
        s = slots[g]
        if s == missing_slot:
            xa += ma
            xb += mb
            xc += mc
        else:
            xa += hist[j, s, 0]
            xb += hist[j, s, 1]
            xc += hist[j, s, 2]
    return xa, xb, xc


@numba.njit(cache=True, inline="always")
def _beats(gain, best, tol):  # pragma: no cover - compiled
    """Whether a category set's ``gain`` beats the best so far by more than ``tol`` and by more
    than rounding of ``best`` itself (relative :data:`GAIN_TOL`). A set and its complement (NaN
    on the other side) are one split, reached from both ends of the scan (or, one against the
    rest, as a category and as the rest): their gains differ by rounding only, and the first
    reached must win whatever the order of the sums in the histogram (blocks added in another
    order, on Dask), where ``tol`` alone (relative to the parent's score, near 0 for a node
    whose gradients cancel) would let rounding choose."""
    if best == -np.inf:
        return gain > best
    return gain > best + max(tol, GAIN_TOL * abs(best))


@numba.njit(cache=True)
def _best_categorical_split(
    hist, j, n_categories, criterion, prior, min_leaf, cat, ta, tb, tc, empty, tol, left_slots
):  # pragma: no cover - compiled
    """The best set of categories of feature ``j`` to send left, as HGB and LightGBM search it.

    The *groups* are the categories with rows in the node, and the missing values' slot when
    occupied (a category of its own, as in HGB). With at most ``max_cat_to_onehot`` groups each
    is tried alone on the left (a category with NaN on either side, and NaN alone). Otherwise
    the groups with at least ``cat_smooth`` rows are sorted by a smoothed leaf statistic
    (newton: ``a / (b + cat_smooth u)``, ``u = tb / tc`` the node's ``b`` per row; the other
    scores: the smoothed positive rate ``(a + s/2) / (a + b + s)``, ``s = cat_smooth (ta + tb) /
    tc``; ties to the lower code) and prefixes are scanned from both ends, at most
    ``min(max_cat_threshold, (n + 1) // 2)`` groups, a boundary scored only once the groups
    since the last scored one hold ``min_data_per_group`` rows (LightGBM's
    ``cnt_cur_group``); the rarer groups stay right. The score is the node score with
    ``prior + cat_l2 u``. For any of the three (convex) scores and no smoothing or caps, the
    best set is a prefix of this order, so the scan is exact.

    ``left_slots`` (scratch, at least ``n_categories + 1`` entries) receives the slots of the
    best set; returns its gain (-inf: none), size, and the left child's three sums.
    """
    cat_smooth, min_data_per_group = cat[0], cat[1]
    max_onehot, max_threshold, cat_l2 = cat[2], cat[3], cat[4]
    missing_slot = hist.shape[1] - 1
    ma, mb, mc = hist[j, missing_slot, 0], hist[j, missing_slot, 1], hist[j, missing_slot, 2]
    u = tb / tc if tc > 0.0 else 0.0
    lam = prior + cat_l2 * u
    parent = node_score(ta, tb, criterion, lam)
    slots = np.empty(n_categories + 1, dtype=np.int64)
    n = 0
    for k in range(n_categories):
        if hist[j, k, 2] > empty:
            slots[n] = k
            n += 1
    if mc > empty:
        slots[n] = missing_slot
        n += 1
    best_gain, best_n = -np.inf, 0
    best_la, best_lb, best_lc = 0.0, 0.0, 0.0
    if n < 2:
        return best_gain, best_n, best_la, best_lb, best_lc
    candidate = np.empty(n + 1, dtype=np.int64)
    if n <= max_onehot:  # one against the rest: each category, NaN on either side; NaN alone
        for g in range(n):
            for with_missing in range(2):
                size = 0
                if slots[g] != missing_slot:
                    candidate[size] = slots[g]
                    size += 1
                if with_missing == 1:
                    if mc <= empty:
                        continue
                    candidate[size] = missing_slot
                    size += 1
                if size == 0 or (slots[g] == missing_slot and with_missing == 0):
                    continue
                xa, xb, xc = _sums_of(hist, j, candidate, size, missing_slot, ma, mb, mc)
                if xc < min_leaf or tc - xc < min_leaf or tc - xc <= empty:
                    continue
                gain = (
                    node_score(xa, xb, criterion, lam)
                    + node_score(ta - xa, tb - xb, criterion, lam)
                    - parent
                )
                if _beats(gain, best_gain, tol):
                    best_gain, best_n = gain, size
                    best_la, best_lb, best_lc = xa, xb, xc
                    left_slots[:size] = candidate[:size]
        return best_gain, best_n, best_la, best_lb, best_lc
    # Sort and scan: the groups of at least cat_smooth rows, by their smoothed statistic.
    kept = np.empty(n, dtype=np.int64)
    keys = np.empty(n)
    n_kept = 0
    s_rows = cat_smooth * (ta + tb) / tc if tc > 0.0 else 0.0
    for g in range(n):
        s = slots[g]
        if s == missing_slot:
            a, b, c = ma, mb, mc
        else:
            a, b, c = hist[j, s, 0], hist[j, s, 1], hist[j, s, 2]
        if c < cat_smooth:
            continue
        if criterion == 0:
            denominator = b + cat_smooth * u
        else:
            denominator = a + b + s_rows
        if criterion == 0:
            key = a / denominator if denominator > 0.0 else 0.0
        else:
            key = (a + 0.5 * s_rows) / denominator if denominator > 0.0 else 0.5
        kept[n_kept] = s
        keys[n_kept] = key
        n_kept += 1
    if n_kept == 0:
        return best_gain, best_n, best_la, best_lb, best_lc
    order = np.argsort(keys[:n_kept], kind="mergesort")  # stable: ties to the lower code
    steps = min(int(max_threshold), (n_kept + 1) // 2)
    for direction in range(2):  # 0: from the lowest key, 1: from the highest
        xa, xb, xc = 0.0, 0.0, 0.0
        since = 0.0
        for i in range(min(steps, n_kept)):
            s = kept[order[i] if direction == 0 else order[n_kept - 1 - i]]
            if s == missing_slot:
                xa += ma
                xb += mb
                xc += mc
                since += mc
            else:
                xa += hist[j, s, 0]
                xb += hist[j, s, 1]
                xc += hist[j, s, 2]
                since += hist[j, s, 2]
            if xc < min_leaf:
                continue
            if tc - xc < min_leaf or tc - xc < min_data_per_group or tc - xc <= empty:
                break
            if since < min_data_per_group:
                continue
            since = 0.0
            gain = (
                node_score(xa, xb, criterion, lam)
                + node_score(ta - xa, tb - xb, criterion, lam)
                - parent
            )
            if _beats(gain, best_gain, tol):
                best_gain, best_n = gain, i + 1
                best_la, best_lb, best_lc = xa, xb, xc
                for q in range(i + 1):
                    left_slots[q] = kept[order[q] if direction == 0 else order[n_kept - 1 - q]]
    return best_gain, best_n, best_la, best_lb, best_lc


@numba.njit(cache=True)
def best_node_split(
    hist, n_bins, is_cat, criterion, prior, min_leaf, cat
):  # pragma: no cover - compiled
    """The best split of a node from its histogram (per feature and slot, the missing values
    in the last slot: :func:`~viboost.boosting.histogram.node_histograms`).

    Position ``p`` sends the observed bins ``< p`` left (``p = n_bins[j]``: every observed value
    left, the missing ones right); missing values go left or right, whichever gains more (left
    first on ties). A categorical feature (``is_cat[j]``: its bins are its codes) is split by a
    set of categories (:func:`_best_categorical_split`, constants ``cat`` of
    :func:`categorical_settings`); its position is -1. Ties go to the lowest feature, then
    position. Returns the gain (-inf for none), feature, position, missing side, the left
    child's three sums and the four words (int64 bit patterns of uint64) of a categorical
    split's left set: bit ``k`` for code ``k``; with the missing values on the left, every code
    without rows in the node too (a code not seen here follows NaN).
    """
    d = hist.shape[0]
    best_gain = -np.inf
    best_j, best_p, best_missing_left = -1, 0, True
    best_la, best_lb, best_lc = 0.0, 0.0, 0.0
    words = np.zeros(4, dtype=np.int64)
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
    left_slots = np.empty(hist.shape[1] + 1, dtype=np.int64)
    for j in range(d):
        ma, mb, mc = hist[j, missing, 0], hist[j, missing, 1], hist[j, missing, 2]
        no_missing = mc <= empty
        nb = n_bins[j]
        if is_cat[j]:
            gain, size, xa, xb, xc = _best_categorical_split(
                hist, j, nb, criterion, prior, min_leaf, cat, ta, tb, tc, empty, tol, left_slots
            )
            if gain > best_gain + tol:
                best_gain = gain
                best_j, best_p = j, -1
                best_la, best_lb, best_lc = xa, xb, xc
                words[:] = 0
                missing_in = False
                for q in range(size):
                    if left_slots[q] == missing:
                        missing_in = True
                    else:
                        _set_bit(words, left_slots[q])
                if no_missing:  # no missing value here: NaN to the larger child
                    best_missing_left = xc >= tc - xc
                else:
                    best_missing_left = missing_in
                if best_missing_left:  # codes without rows here follow NaN
                    for k in range(256):
                        if k >= nb or hist[j, k, 2] <= empty:
                            _set_bit(words, k)
            continue
        la, lb, lc = 0.0, 0.0, 0.0
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
        return -np.inf, -1, 0, True, 0.0, 0.0, 0.0, 0, 0, 0, 0
    if best_p >= 0:
        words[:] = 0
    return (
        best_gain, best_j, best_p, best_missing_left, best_la, best_lb, best_lc,
        words[0], words[1], words[2], words[3],
    )  # fmt: skip


# Rows per chunk of a parallel partition (boundaries from the node's row count only).
_PARTITION_CHUNK_ROWS = 1 << 15
_PARTITION_MAX_CHUNKS = 64


@numba.njit(cache=True)
def _goes_left(b, position, missing_left, bits):  # pragma: no cover - compiled
    """Whether bin ``b`` goes left: bin 255 to the missing side; a categorical split
    (``position < 0``) sends the codes of its set ``bits`` (uint64 words) left, a numeric one
    the bins ``< position``."""
    if b == MISSING_BIN:
        return missing_left
    if position < 0:
        return category_bit(bits, np.int64(b))
    return b < position


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
    bitsets,
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
        bits = bitsets[r]
        source = rows if sides[r] == 0 else row_buffer
        count = 0
        for k in range(np.uint64(lo), np.uint64(min(stops[r], lo + size[r]))):
            left = _goes_left(columns[feature, source[k]], position, missing, bits)
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


@numba.njit(cache=True, inline="always")
def _one_chunk(starts, stops):  # pragma: no cover - compiled
    """Whether a partition of these nodes is a single chunk of rows, run on the calling thread
    (the rule of :func:`partition_nodes` and :func:`partition_ranges`)."""
    total = 0
    for r in range(starts.shape[0]):
        total += stops[r] - starts[r]
    return total <= _PARTITION_CHUNK_ROWS


_partition_serial = _partition.serial


# Inlined into its compiled caller, as histogram.histograms_into is (numba re-optimises every
# library a caller links in).
@threaded_kernel(calls={"_partition": _partition}, cache=True, inline="always")
def partition_ranges(
    columns, rows, stats, row_buffer, stat_buffer, starts, stops, sides, features, positions,
    missing_left, bitsets, decisions,
):  # pragma: no cover - compiled  # fmt: skip
    """:func:`partition_nodes` of checked arrays (``sides`` int8, ``features`` and
    ``positions`` int64, ``missing_left`` bool, ``bitsets`` uint64 of shape ``(n_nodes, 4)``,
    ``decisions`` uint8 as long as ``rows``), compiled, for a compiled caller
    (:func:`viboost.boosting.partition.grow_in_place`)."""
    if _one_chunk(starts, stops):
        return _partition_serial(
            columns, rows, stats, row_buffer, stat_buffer, starts, stops, sides, features,
            positions, missing_left, bitsets, decisions,
        )  # fmt: skip
    return _partition(
        columns, rows, stats, row_buffer, stat_buffer, starts, stops, sides, features,
        positions, missing_left, bitsets, decisions,
    )  # fmt: skip


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
    bitsets: np.ndarray | None = None,
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
    all are one parallel pass. A node with ``positions[r] < 0`` is a categorical split: its
    rows whose bin (the code) has its bit set in ``bitsets[r]`` (four uint64 words; None: no
    categorical split) go left. ``decisions`` (uint8, as long as ``rows``; allocated when None)
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
    if bitsets is None:
        bitsets = np.zeros((n_nodes, 4), dtype=np.uint64)
    bitsets = np.ascontiguousarray(bitsets, dtype=np.uint64).reshape(n_nodes, 4)
    kernel = _partition.serial if _one_chunk(starts, stops) else _partition
    return kernel(
        columns, rows, stats, row_buffer, stat_buffer, starts, stops, sides,
        np.ascontiguousarray(features, dtype=np.int64),
        np.ascontiguousarray(positions, dtype=np.int64),
        np.ascontiguousarray(missing_left, dtype=np.bool_),
        bitsets,
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
