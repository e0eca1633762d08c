"""Per-bin weight histograms of binned rows: the compiled pass that every binned search makes.

The features of a fit are binned once (:class:`~viboost.boosting.binning.FeatureBinner`, ``uint8``
bins, bin 255 for missing values). Each round a search needs, per feature and bin, the weight of
the positive and of the negative rows under the round's weights (:func:`binned_histogram`), and,
once per set of rows, which bins hold any row (:func:`occupied_bins`). Sums are taken over fixed
row chunks (boundaries from the data's shape only) and reduced in chunk order, so a histogram, and
so every chosen split, is the same for any number of threads.
"""

from __future__ import annotations

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel

__all__ = ["binned_histogram", "node_histogram", "occupied_bins", "transpose_bins"]

# Rows per chunk of the histogram; the chunk boundaries depend on n_samples and n_features only
# (never on the number of threads), so every histogram, hence every chosen stump, is the same for
# any thread count.
_HIST_CHUNK_ROWS = 1 << 15
_HIST_MAX_CHUNKS = 64
# Memory allowed for the per-chunk partial histograms (d * 256 * 2 float64 each).
_HIST_BUDGET_BYTES = 1 << 25
# Rows per block of the (n, d) -> (d, n) transpose.
_TRANSPOSE_BLOCK_ROWS = 1 << 12
# Rows per chunk of a tree node's histogram: boundaries from the node's row count only.
_NODE_CHUNK_ROWS = 1 << 14
_NODE_MAX_CHUNKS = 32


def _histogram_chunks(n_samples: int, n_features: int) -> int:
    by_rows = -(-n_samples // _HIST_CHUNK_ROWS)
    by_memory = _HIST_BUDGET_BYTES // (n_features * 256 * 2 * 8)
    return max(1, min(by_rows, by_memory, _HIST_MAX_CHUNKS))


@threaded_kernel(cache=True)
def _histogram(binned, weights, y, active, n_chunks):  # pragma: no cover - compiled
    """Weight per (feature, bin, label): ``hist[j, b, 1]`` positives, ``hist[j, b, 0]`` negatives.

    Inactive rows and rows of zero weight are skipped. Chunk ``c`` covers a fixed row range and
    fills its own partial histogram; the partials are summed in chunk order.
    """
    n, d = binned.shape
    width = d * 512
    size = (n + n_chunks - 1) // n_chunks
    partial = np.zeros((n_chunks, width))
    for c in numba.prange(n_chunks):
        h = partial[c]
        for i in range(c * size, min(n, (c + 1) * size)):
            w = weights[i]
            if w == 0.0 or not active[i]:
                continue
            label = 1 if y[i] > 0.0 else 0
            row = binned[i]
            for j in range(d):
                h[j * 512 + 2 * np.int64(row[j]) + label] += w
    if n_chunks == 1:  # small inputs: the one partial is the histogram (no second pass)
        return partial[0].reshape((d, 256, 2))
    total = np.empty(width)
    for k in numba.prange(width):
        s = partial[0, k]
        for c in range(1, n_chunks):
            s += partial[c, k]
        total[k] = s
    return total.reshape((d, 256, 2))


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


@threaded_kernel(cache=True)
def _node_histogram(binned, rows, start, stop, stats, n_slots):  # pragma: no cover - compiled
    """Per (feature, slot): the sums of the three columns of ``stats`` (in the order of
    ``rows``) over positions ``start:stop``, shape ``(d, n_slots, 3)``; bin ``b`` in slot ``b``,
    the missing bin in the last slot; fixed chunks summed in chunk order."""
    d = binned.shape[1]
    n = stop - start
    n_chunks = min(_NODE_MAX_CHUNKS, max(1, (n + _NODE_CHUNK_ROWS - 1) // _NODE_CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    stride = 3 * n_slots
    missing_slot = n_slots - 1
    partial = np.zeros((n_chunks, d * stride))
    for c in numba.prange(n_chunks):
        h = partial[c]
        for k in range(start + c * size, min(stop, start + (c + 1) * size)):
            a, b, n_k = stats[k, 0], stats[k, 1], stats[k, 2]
            row = binned[rows[k]]
            for j in range(d):
                slot = np.int64(row[j])
                if slot == 255:
                    slot = missing_slot
                base = j * stride + 3 * slot
                h[base] += a
                h[base + 1] += b
                h[base + 2] += n_k
    total = partial[0]
    for c in range(1, n_chunks):
        total += partial[c]
    return total.reshape((d, n_slots, 3))


def node_histogram(
    binned: np.ndarray,
    rows: np.ndarray,
    start: int,
    stop: int,
    stats: np.ndarray,
    n_slots: int = 256,
) -> np.ndarray:
    """The histogram of one tree node: per (feature, slot), the sums of the three per-row
    statistics (two of the split score and the rows' count) over positions ``start:stop`` of
    ``rows``, shape ``(n_features, n_slots, 3)``.

    Bin ``b`` of a feature is slot ``b`` and the missing bin (255) the last slot, so
    ``n_slots`` = the most bins of any feature + 1 keeps the histogram no larger than the
    binning needs (256: bin and slot agree). ``stats[k]`` belongs to row ``rows[k]`` (ordered
    with the rows, as LightGBM orders its gradients, so only the bins are read out of order).
    Summed over fixed row chunks in a fixed order (the same for any number of threads); a node
    of a single chunk runs on the calling thread (waking threads would cost more than it).
    """
    if stop - start <= _NODE_CHUNK_ROWS:
        return _node_histogram.serial(binned, rows, start, stop, stats, int(n_slots))
    return _node_histogram(binned, rows, start, stop, stats, int(n_slots))
