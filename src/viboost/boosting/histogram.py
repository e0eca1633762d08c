"""Per-bin weight histograms of binned rows: the compiled pass that every binned search makes.

The features of a fit are binned once (:class:`~viboost.boosting.binning.FeatureBinner`, ``uint8``
bins, bin 255 for missing values). Each round a search needs, per feature and bin, the weight of
the positive and of the negative rows under the round's weights (:func:`binned_histogram`), and,
once per set of rows, which bins hold any row (:func:`occupied_bins`). Sums are taken over fixed
row chunks (boundaries from the data's shape only) and reduced in chunk order, so a histogram, and
so every chosen split, is the same for any number of threads.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np

from viboost._utils.lanes import add_four_lanes
from viboost._utils.parallel import threaded_kernel
from viboost._utils.prefetch import prefetch
from viboost._utils.scratch import ScratchArrays, aligned_empty

__all__ = [
    "HISTOGRAM_SLOTS",
    "SPARSE_SHARE",
    "SparseBins",
    "binned_histogram",
    "histogram_buffers",
    "histogram_slots",
    "histograms_into",
    "node_histograms",
    "occupied_bins",
    "sparse_bins",
    "transpose_bins",
]

# Rows per chunk of the histogram; the chunk boundaries depend on n_samples and n_features only
# (never on the number of threads), so every histogram, hence every chosen stump, is the same for
# any thread count.
_HIST_CHUNK_ROWS = 1 << 15
_HIST_MAX_CHUNKS = 64
# Memory allowed for the per-chunk partial histograms (about d * 512 float64 each).
_HIST_BUDGET_BYTES = 1 << 25
# Rows per block of the (n, d) -> (d, n) transpose.
_TRANSPOSE_BLOCK_ROWS = 1 << 12
# Rows per chunk of a tree node's histogram: boundaries from the node's row count only.
_NODE_CHUNK_ROWS = 1 << 14
_NODE_MAX_CHUNKS = 16
# Measured (AMD EPYC, one thread, 5 x 10^5 random rows x 20, 2026-11-27): 1.2-1.5 ns a (row,
# feature) at any share of the rows from 1% to all of them, where reading row by row without
# the prefetch took 3.2-3.8 ns at 1% and the column-wise reading of sparse nodes that it
# replaces 2.6-3.7 ns from 1% to 20%; in the nodes below the roots of 100 trees of 31 leaves,
# 1.85-2.1 ns against 3.55.
#: A node's rows are read row by row from ``binned``, and the bins of the row this many rows
#: ahead are prefetched (:mod:`viboost._utils.prefetch`): the rows are sorted but sparse, so
#: without it each row waits on a cache miss. The prefetch changes no sum.
_PREFETCH_ROWS = 16
#: A node's chunk of at least this many rows a histogram slot sums its rows into 4-lane slots
#: (``add_four_lanes`` of :mod:`viboost._utils.lanes`); a smaller one, whose slots would cost more
#: to clear and copy than the wide additions save, into the histogram itself.
_WIDE_ROWS_PER_SLOT = 4
# A call of fewer (rows x features) runs on the calling thread (waking threads would cost
# more than it saves; a node of 3,000 rows x 50 takes 0.86 ms on one thread, 0.54 on two).
_SERIAL_CELLS = 1 << 17
#: Calls of fewer chunks than this many a thread split each chunk's features among the
#: threads (:func:`_feature_groups`); with more, the chunks alone keep the threads busy.
_GROUP_BELOW = 2


@dataclass(frozen=True)
class SparseBins:
    """The bins of the sparse features of binned rows, row by row, as a tree's node histograms
    read them (:func:`node_histograms`; LightGBM keeps its sparse features so).

    A feature is sparse when one bin, its commonest, holds at least :data:`SPARSE_SHARE` of
    the rows (one-hot columns, counts that are mostly 0: on DNA's 180 binary features, 0 for
    about three rows in four). Per row only its bins of the sparse features other than their
    commonest are kept (``entry_features[e]``, ``entry_bins[e]`` for ``e`` in
    ``row_starts[i]:row_starts[i + 1]``); a node's sums in a feature's commonest bin are its
    rows' totals less its other bins'. The dense features are read from the bins as before.

    Attributes
    ----------
    dense : ndarray of int64
        The dense features, in order.
    sparse : ndarray of int64
        The sparse features, in order.
    common_bins : ndarray of int64
        Each sparse feature's commonest bin (255: the missing values).
    row_starts : ndarray of int64, shape (n_rows + 1,)
    entry_features : ndarray of int32
    entry_bins : ndarray of uint8
    """

    dense: np.ndarray
    sparse: np.ndarray
    common_bins: np.ndarray
    row_starts: np.ndarray
    entry_features: np.ndarray
    entry_bins: np.ndarray

    @property
    def n_features(self) -> int:
        """The features of the bins (dense and sparse)."""
        return int(self.dense.size + self.sparse.size)

    def common_slots(self, n_slots: int) -> np.ndarray:
        """The histogram slot of each sparse feature's commonest bin (the last slot for the
        missing values' bin)."""
        return np.where(self.common_bins == 255, n_slots - 1, self.common_bins).astype(np.int64)

    @staticmethod
    def all_dense(n_features: int) -> SparseBins:
        """The layout with no sparse feature (of any number of rows: no row has an entry);
        one per feature count, made once (its arrays are read, never written)."""
        return _all_dense(n_features)


#: A feature is sparse (:class:`SparseBins`) when its commonest bin holds at least this share of
#: the rows: its entries then cost at most half the additions of reading every row.
SPARSE_SHARE = 0.5


@numba.njit(cache=True)
def _sparse_entries(binned, sparse, common):  # pragma: no cover - compiled
    """Each row's bins of the ``sparse`` features other than their ``common`` bins: the rows'
    starts, the entries' features and bins."""
    n = binned.shape[0]
    row_starts = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        count = 0
        for jj in range(sparse.shape[0]):
            if binned[i, sparse[jj]] != common[jj]:
                count += 1
        row_starts[i + 1] = row_starts[i] + count
    features = np.empty(row_starts[n], dtype=np.int32)
    bins = np.empty(row_starts[n], dtype=np.uint8)
    for i in range(n):
        e = row_starts[i]
        for jj in range(sparse.shape[0]):
            b = binned[i, sparse[jj]]
            if b != common[jj]:
                features[e] = sparse[jj]
                bins[e] = b
                e += 1
    return row_starts, features, bins


def sparse_bins(
    binned: np.ndarray, active: np.ndarray | None = None, min_share: float = SPARSE_SHARE
) -> SparseBins:
    """The sparse features of ``binned`` (those whose commonest bin over the ``active`` rows,
    all when None, holds at least ``min_share`` of them; ``min_share > 1``: none) and their
    entries for every row (:class:`SparseBins`).

    Examples
    --------
    >>> import numpy as np
    >>> binned = np.array([[0, 3], [0, 1], [2, 2], [0, 0]], dtype=np.uint8)
    >>> layout = sparse_bins(binned)
    >>> layout.sparse.tolist(), layout.common_bins.tolist(), layout.dense.tolist()
    ([0], [0], [1])
    >>> layout.row_starts.tolist(), layout.entry_bins.tolist()
    ([0, 0, 0, 1, 1], [2])
    """
    binned = np.ascontiguousarray(binned, dtype=np.uint8)
    n_rows, n_features = binned.shape
    if active is None:
        active = np.ones(n_rows, dtype=bool)
    counts = binned_histogram(
        binned, np.ones(n_rows), np.ones(n_rows), np.ascontiguousarray(active, dtype=bool)
    )[:, :, 1]
    total = int(np.count_nonzero(active))
    common = np.argmax(counts, axis=1).astype(np.int64)
    share = counts[np.arange(n_features), common] / max(total, 1)
    is_sparse = (share >= min_share) & (total > 0)
    sparse = np.flatnonzero(is_sparse).astype(np.int64)
    row_starts, features, bins = _sparse_entries(binned, sparse, common[sparse].astype(np.uint8))
    return SparseBins(
        dense=np.flatnonzero(~is_sparse).astype(np.int64),
        sparse=sparse,
        common_bins=common[sparse],
        row_starts=row_starts,
        entry_features=features,
        entry_bins=bins,
    )


@functools.lru_cache(maxsize=64)
def _all_dense(n_features: int) -> SparseBins:
    """The layout with no sparse feature (of any number of rows: no row has an entry)."""
    return SparseBins(
        dense=np.arange(n_features, dtype=np.int64),
        sparse=np.empty(0, dtype=np.int64),
        common_bins=np.empty(0, dtype=np.int64),
        row_starts=np.zeros(1, dtype=np.int64),
        entry_features=np.empty(0, dtype=np.int32),
        entry_bins=np.empty(0, dtype=np.uint8),
    )


def histogram_slots(n_bins: int) -> int:
    """The slots per feature of the tree nodes' histograms (:func:`node_histograms`) for
    features of at most ``n_bins`` bins: one per bin and one for the missing values, plus an
    empty one when that count is even.

    A node's histogram holds each feature's slots ``n_slots x 3 x 8`` bytes apart. For an even count
    that distance is a multiple of 16 bytes, and for 256 slots (255 bins) it is 96 cache lines, so
    the same slot of every feature falls in one of two sets of a 64-set L1 cache. Where most rows
    share a bin (sparse features: on Spambase the median feature has 84% of its rows in bin 0) the
    features' slots then evict one another on every row, several times slower (measured:
    :doc:`docs/speed.md </speed>` ("Inside the kernels")). An odd count spreads them over the sets.
    The sums, so every split, are the same.

    Examples
    --------
    >>> histogram_slots(255), histogram_slots(2), histogram_slots(15)
    (257, 3, 17)
    """
    n_slots = int(n_bins) + 1
    return n_slots + 1 if n_slots % 2 == 0 else n_slots


#: The slots of histograms of features of up to 255 bins (``max_bins=255``, the most).
HISTOGRAM_SLOTS = histogram_slots(255)


# 3,000 Spambase rows x 57 at a stride of 4,096 bytes: 8.8 ns a (row, feature) against 0.50.
#: Values per feature in the stump histograms' partial sums: 257 (bin, label) pairs, one more
#: than the 256 bins, so that a feature's sums start 4,112 bytes after the previous feature's
#: rather than 4,096: at a multiple of 4 KiB the same bin of every feature falls in one set of
#: the L1 cache, and sparse features (most rows in one bin) evict one another every row (see
#: :func:`histogram_slots`).
_STUMP_STRIDE = 2 * 257


def _histogram_chunks(n_samples: int, n_features: int) -> int:
    by_rows = -(-n_samples // _HIST_CHUNK_ROWS)
    # (512 values a feature, as before the stride became 514: the same chunks, so the same sums)
    by_memory = _HIST_BUDGET_BYTES // (n_features * 512 * 8)
    return max(1, min(by_rows, by_memory, _HIST_MAX_CHUNKS))


@threaded_kernel(cache=True)
def _histogram(binned, weights, y, active, n_chunks):  # pragma: no cover - compiled
    """Weight per (feature, bin, label): ``hist[j, b, 1]`` positives, ``hist[j, b, 0]`` negatives.

    Inactive rows and rows of zero weight are skipped. Chunk ``c`` covers a fixed row range and
    fills its own partial histogram (each feature's sums :data:`_STUMP_STRIDE` apart); the
    partials are summed in chunk order into the ``(d, 256, 2)`` histogram.
    """
    n, d = binned.shape
    stride = _STUMP_STRIDE
    width = d * stride
    size = (n + n_chunks - 1) // n_chunks
    partial = np.empty((n_chunks, width))
    for c in numba.prange(n_chunks):
        h = partial[c]
        h[:] = 0.0  # on the chunk's thread (one memset of every partial would be serial)
        for i in range(c * size, min(n, (c + 1) * size)):
            w = weights[i]
            if w == 0.0 or not active[i]:
                continue
            label = 1 if y[i] > 0.0 else 0
            row = binned[i]
            for j in range(d):
                h[j * stride + 2 * np.int64(row[j]) + label] += w
    total = np.empty((d, 256, 2))
    for j in numba.prange(d):
        for k in range(512):
            s = partial[0, j * stride + k]
            for c in range(1, n_chunks):
                s += partial[c, j * stride + k]
            total[j, k // 2, k % 2] = s
    return total


@threaded_kernel(cache=True)
def _transpose(binned, block):  # pragma: no cover - compiled
    """``binned.T`` as a C-contiguous (d, n) array, in row blocks that stay in cache."""
    n, d = binned.shape
    out = np.empty((d, n), dtype=binned.dtype)
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        stop = min(n, (c + 1) * block)
        for j in range(d):
            for i in range(c * block, stop):
                out[j, i] = binned[i, j]
    return out


def binned_histogram(
    binned: np.ndarray, weights: np.ndarray, y: np.ndarray, active: np.ndarray
) -> np.ndarray:
    """Weight per (feature, bin, label) of the active rows, shape ``(n_features, 256, 2)``:
    ``[..., 1]`` positives, ``[..., 0]`` negatives; summed over fixed row chunks in a fixed order
    (the same for any number of threads)."""
    n_samples, n_features = binned.shape
    return _histogram(binned, weights, y, active, _histogram_chunks(n_samples, n_features))


def occupied_bins(binned: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Per feature and bin, whether any active row lies in it, shape ``(n_features, 256)``
    (column ``MISSING_BIN``: whether any active row is missing the feature)."""
    n_samples = binned.shape[0]
    counts = binned_histogram(binned, active.astype(np.float64), np.ones(n_samples), active)
    return counts[:, :, 1] > 0.0


def transpose_bins(binned: np.ndarray) -> np.ndarray:
    """``binned.T`` as a C-contiguous ``(n_features, n_samples)`` array (one row per feature, as
    :meth:`~viboost.boosting.learners.BaseLearner.binned_outputs` reads them)."""
    return _transpose(binned, _TRANSPOSE_BLOCK_ROWS)


@numba.njit(cache=True)
def _node_chunks(starts, stops):  # pragma: no cover - compiled
    """Each node's chunks: the first chunk's index per node (and the total at the end), and
    the rows per chunk; boundaries from each node's row count only."""
    n_nodes = starts.shape[0]
    first = np.zeros(n_nodes + 1, dtype=np.int64)
    size = np.zeros(n_nodes, dtype=np.int64)
    for r in range(n_nodes):
        n = stops[r] - starts[r]
        n_chunks = min(_NODE_MAX_CHUNKS, max(1, (n + _NODE_CHUNK_ROWS - 1) // _NODE_CHUNK_ROWS))
        size[r] = (n + n_chunks - 1) // n_chunks
        first[r + 1] = first[r] + n_chunks
    return first, size


# The intrinsics of viboost._utils.lanes and prefetch are called without ``typingctx``, which
# numba's type hints count as an argument: hence their ``# type: ignore[call-arg]``.


@numba.njit(cache=True, inline="always")
def _add_row(h, w, to_wide, counted, j, slot, a, b, n_k):  # pragma: no cover - compiled
    """A row's statistics into slot ``slot`` of feature ``j``: as one 4-lane addition into
    ``w`` (flat, 4 lanes a slot; ``n_k`` is 0 when not ``counted``) if ``to_wide``, else one
    by one into ``h`` (``(d, n_slots, 3)``; the count only if ``counted``)."""
    if to_wide:
        add_four_lanes(w, (j * h.shape[1] + slot) * 4, a, b, n_k)  # type: ignore[call-arg]
    else:
        h[j, slot, 0] += a
        h[j, slot, 1] += b
        if counted:
            h[j, slot, 2] += n_k


@numba.njit(cache=True)
def _wide_dense_rows(
    binned, rows, stats, lo, hi, d0, d1, counted, w, n_slots
):  # pragma: no cover - compiled
    """Rows ``rows[lo:hi]`` (statistics ``stats[lo:hi]``) into the 4-lane slots ``w`` of
    features ``d0:d1`` (``add_four_lanes`` of :mod:`viboost._utils.lanes`), every feature dense:
    the common case of :func:`_node_histograms`, compiled apart so that its loop is optimised
    alone. The features are counted with unsigned integers: an index that may be negative
    makes numba test it for Python's wraparound at every use (measured: :doc:`docs/speed.md
    </speed>` ("Inside the kernels")). The bins of the row :data:`_PREFETCH_ROWS` ahead are
    prefetched (the rows of a node are sorted but sparse)."""
    missing_slot = n_slots - 1
    ahead = hi - _PREFETCH_ROWS
    for k in range(lo, hi):
        if k < ahead:
            prefetch(binned, (rows[k + _PREFETCH_ROWS], d0))  # type: ignore[call-arg]
        a, b = stats[k, 0], stats[k, 1]
        n_k = stats[k, 2] if counted else 0.0
        row = binned[rows[k]]
        for j in range(np.uint64(d0), np.uint64(d1)):
            slot = np.int64(row[j])
            if slot == 255:
                slot = missing_slot
            add_four_lanes(w, (np.int64(j) * n_slots + slot) * 4, a, b, n_k)  # type: ignore[call-arg]


@numba.njit(cache=True)
def _dense_rows(
    binned, rows, stats, lo, hi, features, counted, to_wide, h, w
):  # pragma: no cover - compiled
    """As :func:`_wide_dense_rows` for any dense ``features`` (int64), into ``w`` if
    ``to_wide``, else one statistic at a time into ``h`` (:func:`_add_row`)."""
    missing_slot = h.shape[1] - 1
    first_feature = features[0]
    ahead = hi - _PREFETCH_ROWS
    for k in range(lo, hi):
        if k < ahead:
            prefetch(binned, (rows[k + _PREFETCH_ROWS], first_feature))  # type: ignore[call-arg]
        a, b = stats[k, 0], stats[k, 1]
        n_k = stats[k, 2] if counted else 0.0
        row = binned[rows[k]]
        for jj in range(np.uint64(features.shape[0])):
            j = features[jj]
            slot = np.int64(row[j])
            if slot == 255:
                slot = missing_slot
            _add_row(h, w, to_wide, counted, j, slot, a, b, n_k)


@numba.njit(cache=True)
def _feature_groups(threaded, n_units, has_sparse, threads):  # pragma: no cover - compiled
    """Into how many groups :func:`_node_histograms` splits the dense features of each chunk
    on ``threads`` threads (the calling thread's numba count, given: read in compiled code it
    would keep the caller out of numba's cache): one per thread when a threaded call has
    fewer than :data:`_GROUP_BELOW` chunks a thread and no sparse features, else 1. So a node
    of one chunk (up to 16,384 rows), as most of a tree's nodes are, is histogrammed by all
    the threads, not by one (measured: :doc:`docs/speed.md </speed>` ("Inside the
    kernels")). The groups change no sum."""
    if not threaded or threads == 1 or n_units >= _GROUP_BELOW * threads or has_sparse:
        return 1
    return threads


@threaded_kernel(cache=True)
def _node_histograms(
    binned, rows, stats, other_rows, other_stats, sides, starts, stops, first, size,
    counted, partial, wide, out, dense, row_starts, entry_features, entry_bins, sparse,
    common_slots, n_groups,
):  # pragma: no cover - compiled  # fmt: skip
    """Per node ``r`` and (feature, slot): the sums of the three columns of ``stats`` (in the
    order of ``rows``) over positions ``starts[r]:stops[r]``, shape ``(n_nodes, d, n_slots,
    3)``; bin ``b`` in slot ``b``, the missing bin in the last slot. A node with ``sides[r]``
    = 1 reads ``other_rows`` and ``other_stats`` instead (the rows' other side:
    :func:`~viboost.boosting.splitting.partition_nodes`). Without ``counted`` the
    third column (the rows' counts) is not summed and its sums are left 0 (a quarter less
    time a row). Every node's fixed chunks
    (``first``, ``size``: :func:`_node_chunks`) are filled in one parallel loop, each into its
    own slice of ``partial`` (shape ``(chunks, d, n_slots, 3)``, any values), and summed per
    node in chunk order into ``out`` (shape ``(n_nodes, d, n_slots, 3)``), which is returned;
    with one chunk per node, ``partial`` holds the histograms and is returned (``out`` is not
    used).

    The loop's units are each chunk times ``n_groups`` groups of the dense features
    (consecutive, as even as can be), unit ``chunk * n_groups + group``: a unit sums its
    chunk's rows into its group's features, the first group also into the sparse features.
    The groups change which thread adds a sum, never the sum (each (feature, slot) still adds
    its chunk's rows in their order), so their number may follow the threads: a node of one
    chunk is then shared by all of them.

    A chunk is read row by row from ``binned``, the row :data:`_PREFETCH_ROWS` ahead
    prefetched. A chunk of at least :data:`_WIDE_ROWS_PER_SLOT` rows a slot adds each row's
    three statistics to a slot in one 4-lane operation
    (``add_four_lanes`` of :mod:`viboost._utils.lanes`) into its row of ``wide`` (shape ``(chunks,
    d * n_slots * 4)``, any values), then copies the three lanes into its partial; a smaller
    chunk adds them one by one into its partial (the wide slots would cost more to clear and
    copy than they save). Either way each (feature, slot) adds
    the chunk's rows in their order, so the sums are the same. Only the ``dense`` features are
    read from the bins; the ``sparse`` ones from each row's entries (``row_starts``,
    ``entry_features``, ``entry_bins``: :class:`SparseBins`), their commonest bins
    (``common_slots``) then set to the chunk's totals less the feature's other slots."""
    d = binned.shape[1]
    n_slots = partial.shape[2]
    missing_slot = n_slots - 1
    # The missing bin (255) moves to the last slot (a no-op with 256 slots; histogram_slots
    # gives 257, and the test costs no measurable time: 0.48 ns a (row, feature) on 2 x 10^5
    # random rows x 50, against 0.50 with 256 slots and no test). ``counted`` is a
    # loop-invariant test: the compiler unswitches it (the loop without the counts runs as
    # fast as one written without them, measured).
    n_nodes = starts.shape[0]
    n_dense = dense.shape[0]
    all_dense = n_dense == d  # (loop-invariant: unswitched as ``counted`` is)
    n_sparse = sparse.shape[0]
    slot_values = n_slots * 4  # a feature's values in ``wide``
    # Indexed (feature, slot, statistic): the compiled loop runs about twice as fast as with
    # flat offsets j * stride + 3 * slot (measured, numba 0.6x).
    # Each unit zeroes its own partial on its thread (one memset of them all would be serial).
    no_wide = np.empty(0)
    for unit in numba.prange(first[n_nodes] * n_groups):
        chunk = unit // n_groups
        group = unit - chunk * n_groups
        r = np.searchsorted(first, chunk, side="right") - 1
        lo = starts[r] + (chunk - first[r]) * size[r]
        hi = min(stops[r], lo + size[r])
        h = partial[chunk]
        node_rows = rows if sides[r] == 0 else other_rows
        node_stats = stats if sides[r] == 0 else other_stats
        # Loop-invariant, unswitched by the compiler as ``counted`` is.
        to_wide = hi - lo >= _WIDE_ROWS_PER_SLOT * n_slots
        w = wide[chunk] if to_wide else no_wide
        # The unit's dense features, dense[d0:d1], and whether it sums the sparse ones.
        d0, d1 = group * n_dense // n_groups, (group + 1) * n_dense // n_groups
        with_sparse = group == 0 and n_sparse > 0
        if n_groups == 1:
            if to_wide:
                w[:] = 0.0
            else:
                h[:] = 0.0
        else:
            for jj in range(d0, d1 + (n_sparse if with_sparse else 0)):
                j = (jj if all_dense else dense[jj]) if jj < d1 else sparse[jj - d1]
                if to_wide:
                    w[j * slot_values : (j + 1) * slot_values] = 0.0
                else:
                    h[j] = 0.0
        if d1 > d0:
            if to_wide and all_dense:
                _wide_dense_rows(binned, node_rows, node_stats, lo, hi, d0, d1, counted, w, n_slots)
            else:
                _dense_rows(
                    binned, node_rows, node_stats, lo, hi, dense[d0:d1], counted, to_wide, h, w
                )
        # The sparse features: only each row's bins other than the feature's commonest
        # (:class:`SparseBins`), and the rows' totals, from which the commonest bin's sums
        # follow below.
        ta, tb, tc = 0.0, 0.0, 0.0
        if with_sparse:
            for k in range(lo, hi):
                i = node_rows[k]
                a, b = node_stats[k, 0], node_stats[k, 1]
                n_k = node_stats[k, 2] if counted else 0.0
                ta += a
                tb += b
                tc += n_k
                for e in range(row_starts[i], row_starts[i + 1]):
                    entry_slot = np.int64(entry_bins[e])
                    if entry_slot == 255:
                        entry_slot = missing_slot
                    _add_row(h, w, to_wide, counted, entry_features[e], entry_slot, a, b, n_k)
        if to_wide:  # the three lanes of each slot into the partial
            for jj in range(d0, d1 + (n_sparse if with_sparse else 0)):
                j = (jj if all_dense else dense[jj]) if jj < d1 else sparse[jj - d1]
                for slot in range(n_slots):
                    at = j * slot_values + slot * 4
                    h[j, slot, 0] = w[at]
                    h[j, slot, 1] = w[at + 1]
                    h[j, slot, 2] = w[at + 2]
        for jj in range(n_sparse if with_sparse else 0):  # the commonest bin: the rows'
            j = sparse[jj]  # totals less the other bins
            common = common_slots[jj]
            ra, rb, rc = ta, tb, tc
            for slot in range(n_slots):
                if slot != common:
                    ra -= h[j, slot, 0]
                    rb -= h[j, slot, 1]
                    rc -= h[j, slot, 2]
            h[j, common, 0] = ra
            h[j, common, 1] = rb
            h[j, common, 2] = rc
    if first[n_nodes] == n_nodes:  # one chunk per node: the partials are the histograms
        return partial
    for r in numba.prange(n_nodes):
        total = out[r]
        total[:] = partial[first[r]]
        for c in range(first[r] + 1, first[r + 1]):
            total += partial[c]
    return out


@numba.njit(cache=True, inline="always")
def _histogram_plan(n_rows, n_features, n_units, has_sparse, n_threads, serial_cells, n_groups):
    """Whether a call of ``n_units`` chunks over ``n_rows`` rows runs threaded, and into how
    many groups it splits each chunk's features (``n_groups``; 0: :func:`_feature_groups`):
    on the calling thread below ``serial_cells`` (rows x features; negative:
    ``_SERIAL_CELLS``) or when it is one unit of work (waking threads would cost more
    than it). The one rule of :func:`node_histograms` and :func:`histograms_into`."""
    if serial_cells < 0:
        serial_cells = _SERIAL_CELLS
    threaded = n_rows * n_features >= serial_cells
    if n_groups == 0:
        n_groups = _feature_groups(threaded, n_units, has_sparse, n_threads)
    return threaded and n_units * n_groups > 1, n_groups


_node_histograms_serial = _node_histograms.serial


# Inlined into its compiled caller: numba re-optimises every compiled library that a caller
# links in, so a chain of compiled calls over the large histogram kernel would compile it once
# more per link (measured on the demo's first fit: 37 s of compiling against 26 s).
@threaded_kernel(calls={"_node_histograms": _node_histograms}, cache=True, inline="always")
def histograms_into(
    binned, rows, stats, other_rows, other_stats, sides, starts, stops, counted, out, partial,
    wide, dense, row_starts, entry_features, entry_bins, sparse, common_slots, n_groups,
    serial_cells, n_threads,
):  # pragma: no cover - compiled  # fmt: skip
    """:func:`node_histograms` of checked arrays into given buffers, compiled, for a compiled
    caller (:func:`viboost.boosting.partition.grow_in_place`); returns the histograms.

    ``sides`` is int8 and ``starts``, ``stops`` int64, one per node; ``out`` and ``partial``
    are C-contiguous float64 of shape ``(n, d, n_slots, 3)``, ``partial`` with a row for each
    of the nodes' chunks (``_node_chunks``); ``wide`` has as many rows of ``d * n_slots *
    4`` where a chunk is at least ``_WIDE_ROWS_PER_SLOT`` rows a slot (else any rows);
    ``dense`` to ``common_slots``: a :class:`SparseBins` (:meth:`SparseBins.common_slots`).
    With a chunk per node the histograms are written to ``out`` if it has a row per node, else
    to ``partial``; otherwise to ``out``. ``serial_cells``, ``n_groups`` and ``n_threads`` (the
    calling thread's numba count) as :func:`_histogram_plan` takes them."""
    first, size = _node_chunks(starts, stops)
    n_nodes = starts.shape[0]
    n_units = first[n_nodes]
    n_rows = 0
    for r in range(n_nodes):
        n_rows += stops[r] - starts[r]
    threaded, n_groups = _histogram_plan(
        n_rows, binned.shape[1], n_units, sparse.shape[0] > 0, n_threads, serial_cells, n_groups
    )
    if n_units == n_nodes and out.shape[0] == n_nodes:
        partial = out
    if threaded:
        return _node_histograms(
            binned, rows, stats, other_rows, other_stats, sides, starts, stops, first, size,
            counted, partial, wide, out, dense, row_starts, entry_features, entry_bins, sparse,
            common_slots, n_groups,
        )  # fmt: skip
    return _node_histograms_serial(
        binned, rows, stats, other_rows, other_stats, sides, starts, stops, first, size,
        counted, partial, wide, out, dense, row_starts, entry_features, entry_bins, sparse,
        common_slots, n_groups,
    )  # fmt: skip


def histogram_buffers(
    n_nodes: int, n_rows: int, n_features: int, n_slots: int, scratch: ScratchArrays
) -> tuple[np.ndarray, np.ndarray]:
    """``partial`` and ``wide`` of :func:`histograms_into` (from ``scratch``; give them back
    when done) for any call on at most ``n_nodes`` nodes of at most ``n_rows`` rows in all:
    a row of partial sums for each of their chunks (at most ``_NODE_MAX_CHUNKS`` a node, and
    ``ceil(n / _NODE_CHUNK_ROWS)`` for a node of ``n`` rows, so at most ``n_nodes + n_rows //
    _NODE_CHUNK_ROWS`` in all), and as many 4-lane rows where a chunk may be wide."""
    n_units = min(n_nodes * _NODE_MAX_CHUNKS, n_nodes + n_rows // _NODE_CHUNK_ROWS)
    any_wide = n_rows >= _WIDE_ROWS_PER_SLOT * n_slots
    partial = scratch.take((n_units, n_features, n_slots, 3))
    wide = scratch.take((n_units if any_wide else 0, n_features * n_slots * 4))
    return partial, wide


def node_histograms(
    binned: np.ndarray,
    rows: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    stats: np.ndarray,
    n_slots: int = HISTOGRAM_SLOTS,
    scratch: ScratchArrays | None = None,
    counted: bool = True,
    other_side: tuple[np.ndarray, np.ndarray] | None = None,
    sides: np.ndarray | None = None,
    out: np.ndarray | None = None,
    sparse: SparseBins | None = None,
) -> np.ndarray:
    """The histograms of tree nodes: per node ``r`` and (feature, slot), the sums of the three
    per-row statistics (two of the split score and the rows' count) over positions
    ``starts[r]:stops[r]`` of ``rows``, shape ``(n_nodes, n_features, n_slots, 3)``.

    Bin ``b`` of a feature is slot ``b`` and the missing bin (255) the last slot, so ``n_slots``
    = the most bins of any feature + 1 is enough; :func:`histogram_slots` gives that count, made
    odd so that the features' slots do not collide in the cache (256: bin and slot agree).
    ``stats[k]`` belongs to row ``rows[k]`` (ordered with the rows, as LightGBM orders its
    gradients, so only the bins are read out of order, each row's a few rows ahead of its use
    prefetched). The nodes may belong to different trees (the folds of a cross-fit, their rows
    in one array): all of them are one parallel pass. Each node is summed over fixed row chunks
    in a fixed order, so its histogram is the same for any number of threads and any other nodes
    of the call; a call of fewer than 2^17 (row, feature) pairs runs on the calling thread
    (waking threads would cost more than it), and a call of few chunks shares each chunk's
    features among the threads (the same sums). With ``scratch``
    (:class:`~viboost._utils.scratch.ScratchArrays`), the partial sums and the histograms are
    taken from it, the histograms held until its
    :meth:`~viboost._utils.scratch.ScratchArrays.reclaim`. With ``counted=False`` the counts are
    not summed (their slots hold 0): for nodes whose count histogram the caller already has (a
    search's root, whose rows are the same every round). A chunk of at least four rows a slot
    adds a row's three statistics to a slot in one 4-lane operation (the same sums, faster:
    :doc:`docs/speed.md </speed>` ("Inside the kernels")).
    ``other_side``, ``(rows, stats)`` of the rows' other side, and ``sides`` (per node, 1
    where its rows are on that side, 0 where in ``rows`` and ``stats``) serve rows that
    :func:`~viboost.boosting.splitting.partition_nodes` moves between two sides. ``out``
    (C-contiguous float64 of the result's shape): the histograms are written there (and it is
    returned) rather than into new arrays or arrays held from ``scratch``. ``sparse``
    (:func:`sparse_bins` of ``binned``): its sparse features are summed from each row's bins
    other than their commonest, whose sums are the rows' totals less the other bins' (the same
    sums to rounding).
    """
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    stops = np.ascontiguousarray(stops, dtype=np.int64)
    if sides is None:
        sides = np.zeros(starts.shape[0], dtype=np.int8)
    else:
        sides = np.ascontiguousarray(sides, dtype=np.int8)
        if sides.shape != starts.shape:
            raise ValueError(f"sides must have one entry per node, got shape {sides.shape}")
        if other_side is None and np.any(sides):
            raise ValueError("a node on the other side needs other_side=(rows, stats)")
    other_rows, other_stats = (rows, stats) if other_side is None else other_side
    # The nodes' chunks (histograms_into finds the same for a compiled caller).
    first, size = _node_chunks(starts, stops)
    n_units = int(first[-1])
    n_nodes = starts.shape[0]
    shape = (binned.shape[1], int(n_slots), 3)
    one_chunk_each = n_units == n_nodes  # then the partials are the histograms
    lent = None  # partial sums taken from scratch for this call only
    # The 4-lane slots of the chunks that use them (any values; see _node_histograms).
    any_wide = int(np.max(size, initial=0)) >= _WIDE_ROWS_PER_SLOT * int(n_slots)
    wide_shape = (n_units if any_wide else 0, shape[0] * shape[1] * 4)
    if out is not None:
        if out.shape != (n_nodes, *shape) or out.dtype != np.float64 or not out.flags.c_contiguous:
            raise ValueError(
                f"out must be C-contiguous float64 of shape {(n_nodes, *shape)}, got "
                f"{out.dtype} {out.shape}"
            )
        if one_chunk_each:
            partial = out
        elif scratch is None:
            partial = np.empty((n_units, *shape))
        else:
            partial = lent = scratch.take((n_units, *shape))
        wide = aligned_empty(wide_shape) if scratch is None else scratch.take(wide_shape)
    elif scratch is None:
        partial = np.empty((n_units, *shape))
        out = np.empty((0 if one_chunk_each else n_nodes, *shape))
        wide = aligned_empty(wide_shape)
    elif one_chunk_each:
        partial = scratch.take((n_units, *shape), hold=True)
        out = partial[:0]
        wide = scratch.take(wide_shape)
    else:
        partial = lent = scratch.take((n_units, *shape))
        out = scratch.take((n_nodes, *shape), hold=True)
        wide = scratch.take(wide_shape)
    if sparse is None:
        sparse = SparseBins.all_dense(binned.shape[1])
    elif sparse.n_features != binned.shape[1] or sparse.row_starts.size != binned.shape[0] + 1:
        raise ValueError("sparse must be sparse_bins of these bins")
    try:
        threaded, n_groups = _histogram_plan(
            int(np.sum(stops - starts)), binned.shape[1], n_units, sparse.sparse.size > 0,
            numba.get_num_threads(), _SERIAL_CELLS, 0,
        )  # fmt: skip
        # (the ThreadedKernel itself: its serial form when the thread's numba count is 1)
        kernel = _node_histograms if threaded else _node_histograms.serial
        return kernel(
            binned, rows, stats, other_rows, other_stats, sides, starts, stops, first,
            size, bool(counted), partial, wide, out, sparse.dense, sparse.row_starts,
            sparse.entry_features, sparse.entry_bins, sparse.sparse,
            sparse.common_slots(int(n_slots)), n_groups,
        )  # fmt: skip
    finally:
        if scratch is not None:
            scratch.give(lent, wide)
