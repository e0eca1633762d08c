"""Issue 54, item 1: the ideas that made LightGBM's histograms fast, timed against viboost's node
histograms in one process.

Run from the repository root, with nothing else running on the machine::

    python benchmarks/histogram_kernels.py --out benchmarks/histogram_kernels.md

Every variant computes one tree node's histogram (per feature and bin: two sums of the rows'
statistics and the rows' count, shape ``(d, n_slots, 3)``, float64) from the same binned rows
(``uint8``, bins drawn uniformly from 0-254 as quantile binning spreads a continuous feature),
the node's rows a sorted subset of all rows (100%, 20% or 2% of them, as a root, a node high in
a tree and one low in it), on one thread, over the chunks of ``node_histograms`` (at most
16,384 rows, as even as can be):

- ``viboost``: :func:`viboost.boosting.histogram.node_histograms` as a fit calls it (each row's
  three statistics added to a slot in one 4-lane float64 operation, the row 16 ahead
  prefetched);
- ``quantized``: LightGBM's ``use_quantized_grad``: the two statistics rounded to integers of
  at most 255 levels of their largest magnitude (the rounding done once per round for all rows,
  outside the timed pass, as LightGBM does) and packed with the count into one ``int64``
  (``q0 << 40 | q1 << 16 | 1``, exact for the chunk's at most 2^14 rows); the histogram is one
  integer addition a (row, feature) into 8-byte slots, unpacked and rescaled per chunk;
- ``two-lane``: no third sum (LightGBM derives its counts from the hessians): the two
  statistics in one 2-lane addition into 16-byte slots, the counts left 0;
- ``column-wise``: feature by feature from the transposed bins (one feature's slots stay in L1),
  the same 4-lane additions.

Reported per node share: nanoseconds a (row, feature), the ratio to ``viboost`` (below 1:
faster) and whether the sums equal ``viboost``'s (bit for bit; ``quantized``: its largest
error relative to the largest sum). Best of ``--repeats`` passes; the variants alternate
within each repeat.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numba
import numpy as np

from viboost._utils.io import atomic_write_text
from viboost._utils.lanes import add_four_lanes, add_two_lanes
from viboost._utils.prefetch import prefetch
from viboost.boosting.histogram import HISTOGRAM_SLOTS, node_histograms

AHEAD = 16
#: Levels of a quantised statistic (LightGBM's ``num_grad_quant_bins`` is 4 by default; 255
#: keeps the rounding small and still fits the packed sums of a chunk in 64 bits).
LEVELS = 255


@numba.njit
def _quantized(binned, rows, packed, scales, n_slots, size, out):  # pragma: no cover - compiled
    n_rows, d = rows.shape[0], binned.shape[1]
    hist = np.empty(d * n_slots, dtype=np.int64)
    out[:] = 0.0
    for lo in range(0, n_rows, size):
        hi = min(n_rows, lo + size)
        hist[:] = 0
        for k in range(lo, hi):
            if k < hi - AHEAD:
                prefetch(binned, (rows[k + AHEAD], 0))
            v = packed[k]
            row = binned[rows[k]]
            for j in range(np.uint64(0), np.uint64(d)):
                slot = np.int64(row[j])
                if slot == 255:
                    slot = n_slots - 1
                hist[np.int64(j) * n_slots + slot] += v
        for j in range(d):
            for slot in range(n_slots):
                total = hist[j * n_slots + slot]
                out[j, slot, 0] += (total >> 40) * scales[0]
                out[j, slot, 1] += ((total >> 16) & 0xFFFFFF) * scales[1]
                out[j, slot, 2] += total & 0xFFFF


@numba.njit
def _two_lane(binned, rows, stats, n_slots, size, out):  # pragma: no cover - compiled
    n_rows, d = rows.shape[0], binned.shape[1]
    wide = np.empty(d * n_slots * 2)
    out[:] = 0.0
    for lo in range(0, n_rows, size):
        hi = min(n_rows, lo + size)
        wide[:] = 0.0
        for k in range(lo, hi):
            if k < hi - AHEAD:
                prefetch(binned, (rows[k + AHEAD], 0))
            a, b = stats[k, 0], stats[k, 1]
            row = binned[rows[k]]
            for j in range(np.uint64(0), np.uint64(d)):
                slot = np.int64(row[j])
                if slot == 255:
                    slot = n_slots - 1
                add_two_lanes(wide, (np.int64(j) * n_slots + slot) * 2, a, b)
        for j in range(d):
            for slot in range(n_slots):
                out[j, slot, 0] += wide[(j * n_slots + slot) * 2]
                out[j, slot, 1] += wide[(j * n_slots + slot) * 2 + 1]


@numba.njit
def _column_wise(columns, rows, stats, n_slots, size, out):  # pragma: no cover - compiled
    n_rows, d = rows.shape[0], columns.shape[0]
    wide = np.empty(n_slots * 4)
    out[:] = 0.0
    for lo in range(0, n_rows, size):
        hi = min(n_rows, lo + size)
        for j in range(d):
            column = columns[j]
            wide[:] = 0.0
            for k in range(lo, hi):
                slot = np.int64(column[rows[k]])
                if slot == 255:
                    slot = n_slots - 1
                add_four_lanes(wide, slot * 4, stats[k, 0], stats[k, 1], stats[k, 2])
            for slot in range(n_slots):
                for s in range(3):
                    out[j, slot, s] += wide[slot * 4 + s]


def quantize(stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's two statistics rounded to at most :data:`LEVELS` levels of their largest
    magnitude and packed with a count of 1 (see the module docstring); and the two scales."""
    scales = np.maximum(np.abs(stats[:, :2]).max(axis=0), 1e-300) / LEVELS
    q0 = np.rint(stats[:, 0] / scales[0]).astype(np.int64)
    q1 = np.rint(stats[:, 1] / scales[1]).astype(np.int64)
    if np.any(q1 < 0):
        raise ValueError("the second statistic must be non-negative to pack it")
    return (q0 << 40) + (q1 << 16) + 1, scales


def call(
    name: str,
    out: np.ndarray,
    binned: np.ndarray,
    columns: np.ndarray,
    rows: np.ndarray,
    stats: np.ndarray,
    packed: np.ndarray,
    scales: np.ndarray,
    n_slots: int,
    size: int,
) -> None:
    """One pass of variant ``name`` into ``out``."""
    if name == "viboost":
        starts, stops = np.array([0]), np.array([rows.size])
        out[...] = node_histograms(binned, rows, starts, stops, stats, n_slots)[0]
    elif name == "quantized":
        _quantized(binned, rows, packed, scales, n_slots, size, out)
    elif name == "two-lane":
        _two_lane(binned, rows, stats, n_slots, size, out)
    else:
        _column_wise(columns, rows, stats, n_slots, size, out)


def run(n_rows: int, n_features: int, shares: Sequence[float], repeats: int) -> list[dict]:
    """Time every variant on every node share; one dict per (share, variant)."""
    rng = np.random.default_rng(0)
    binned = rng.integers(0, 255, size=(n_rows, n_features), dtype=np.uint8)
    columns = np.ascontiguousarray(binned.T)
    n_slots = HISTOGRAM_SLOTS
    results = []
    numba.set_num_threads(1)
    for share in shares:
        m = int(n_rows * share)
        rows = np.sort(rng.choice(n_rows, m, replace=False)).astype(np.int64)
        weights = rng.exponential(size=m) / m
        labels = rng.choice([-1.0, 1.0], size=m)
        stats = np.column_stack([labels * weights, weights * rng.random(m), np.ones(m)])
        packed, scales = quantize(stats)
        outs = {name: np.empty((n_features, n_slots, 3)) for name in VARIANTS}
        n_chunks = min(16, -(-m // (1 << 14)))
        data = (binned, columns, rows, stats, packed, scales, n_slots, -(-m // n_chunks))

        best = dict.fromkeys(VARIANTS, np.inf)
        for name in VARIANTS:  # compile
            call(name, outs[name], *data)
        for _ in range(repeats):
            for name in VARIANTS:
                start = time.perf_counter()
                call(name, outs[name], *data)
                best[name] = min(best[name], time.perf_counter() - start)
        reference = outs["viboost"]
        for name in VARIANTS:
            got = outs[name]
            if name == "quantized":
                error = np.abs(got[..., :2] - reference[..., :2]).max()
                agreement = f"max error {error / np.abs(reference[..., :2]).max():.1e}"
                if np.array_equal(got[..., 2], reference[..., 2]):
                    agreement += ", counts equal"
            elif name == "two-lane":
                same = np.array_equal(got[..., :2], reference[..., :2])
                agreement = "sums equal, no counts" if same else "sums differ"
            else:
                agreement = "equal" if np.array_equal(got, reference) else "differ"
            ns = best[name] / (m * n_features) * 1e9
            ratio = best[name] / best["viboost"]
            results.append(
                {"share": share, "variant": name, "ns": ns, "ratio": ratio, "agreement": agreement}
            )
    return results


VARIANTS = ("viboost", "quantized", "two-lane", "column-wise")


def report(results: list[dict], args: argparse.Namespace, command: str) -> str:
    lines = [
        "# Histogram kernels: viboost's against LightGBM's ideas (issue 54, item 1)",
        "",
        f"- Command: `{command}`",
        f"- Machine: {platform.processor() or platform.machine()}; Python "
        f"{platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}; one "
        "thread",
        f"- Rows: {args.rows:,} x {args.features} features, bins uniform over 0-254; best of "
        f"{args.repeats}",
        "",
        "| node's share of the rows | variant | ns a (row, feature) | x viboost | sums |",
        "|---:|---|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['share']:.0%} | {r['variant']} | {r['ns']:.3f} | {r['ratio']:.2f} | "
            f"{r['agreement']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--shares", type=float, nargs="+", default=[1.0, 0.2, 0.02])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    results = run(args.rows, args.features, args.shares, args.repeats)
    command = " ".join(["python benchmarks/histogram_kernels.py", *sys.argv[1:]])
    text = report(results, args, command)
    print(text)
    if args.out is not None:
        atomic_write_text(args.out, text)


if __name__ == "__main__":
    main()
