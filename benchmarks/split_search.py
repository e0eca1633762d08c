"""Issue 54, item 2: two rewrites of a node's numeric split search, timed against viboost's.

Run from the repository root, with nothing else running on the machine::

    python benchmarks/split_search.py

The histograms are a tree node's (``node_histograms``) of 10^4 rows x 50 standard-normal
features (5% of the values missing) with Newton statistics of random weights and margins, for
nodes of all, 30% and 5% of the rows; the prior is 5 and ``min_samples_leaf`` 20. Timed, best
of ``--repeats`` calls, each variant checked to choose the split ``best_node_split`` chooses
(gain, feature, position, missing side and the left sums, bit for bit):

- ``viboost``: :func:`viboost.boosting.splitting.best_node_split`, one pass per feature: the
  running sums, then at each position (and each side of the missing values) the gain, two
  divisions, compared with the best so far;
- ``pretest``: the same pass, but a position is skipped when a test by multiplications shows
  that its gain cannot beat the best so far (with a margin far above rounding), so most
  positions need no division;
- ``three-pass``: per feature the running sums into arrays, then every position's gains without
  branches (so the compiler may vectorise the divisions), then the selection in the same order.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import numba
import numpy as np

from viboost.boosting.binning import FeatureBinner
from viboost.boosting.histogram import HISTOGRAM_SLOTS, node_histograms
from viboost.boosting.splitting import GAIN_TOL, best_node_split, categorical_settings, node_score


@numba.njit
def _node_totals(hist, prior):  # pragma: no cover - compiled
    """The node's sums (from feature 0), its score and the tolerances, as
    ``best_node_split`` takes them."""
    ta, tb, tc = 0.0, 0.0, 0.0
    for b in range(hist.shape[1]):
        ta += hist[0, b, 0]
        tb += hist[0, b, 1]
        tc += hist[0, b, 2]
    parent = node_score(ta, tb, 0, prior)
    return ta, tb, tc, parent, GAIN_TOL * max(abs(parent), 1e-300), GAIN_TOL * tc


@numba.njit
def _pretest(hist, n_bins, prior, min_leaf):  # pragma: no cover - compiled
    """``best_node_split``'s numeric pass (Newton score) with the multiplicative pre-test."""
    best_gain = -np.inf
    best_j, best_p, best_missing_left = -1, 0, True
    best_la, best_lb, best_lc = 0.0, 0.0, 0.0
    missing = hist.shape[1] - 1
    ta, tb, tc, parent, tol, empty = _node_totals(hist, prior)
    for j in range(hist.shape[0]):
        ma, mb, mc = hist[j, missing, 0], hist[j, missing, 1], hist[j, missing, 2]
        no_missing = mc <= empty
        la, lb, lc = 0.0, 0.0, 0.0
        for p in range(1, n_bins[j] + 1):
            la += hist[j, p - 1, 0]
            lb += hist[j, p - 1, 1]
            lc += hist[j, p - 1, 2]
            if hist[j, p - 1, 2] <= empty and p < n_bins[j]:
                continue
            for side in range(2):
                if no_missing and side == 1:
                    continue
                xa, xb, xc = (la + ma, lb + mb, lc + mc) if side == 0 else (la, lb, lc)
                if xc < min_leaf or tc - xc < min_leaf:
                    continue
                u, v, ra = xb + prior, tb - xb + prior, ta - xa
                lhs = xa * xa * v + ra * ra * u
                rhs = (best_gain + tol + parent) * u * v
                if math.isfinite(rhs) and lhs < rhs - 1e-9 * (abs(lhs) + abs(rhs)):
                    continue
                gain = node_score(xa, xb, 0, prior) + node_score(ra, tb - xb, 0, prior) - parent
                if gain > best_gain + tol:
                    best_gain = gain
                    best_j, best_p = j, p
                    best_missing_left = lc >= tc - lc if no_missing else side == 0
                    best_la, best_lb, best_lc = xa, xb, xc
    return best_gain, best_j, best_p, best_missing_left, best_la, best_lb, best_lc


@numba.njit
def _three_pass(hist, n_bins, prior, min_leaf):  # pragma: no cover - compiled
    """The same search in three passes per feature (see the module docstring)."""
    n_slots = hist.shape[1]
    best_gain = -np.inf
    best_j, best_p, best_missing_left = -1, 0, True
    best_la, best_lb, best_lc = 0.0, 0.0, 0.0
    missing = n_slots - 1
    ta, tb, tc, parent, tol, empty = _node_totals(hist, prior)
    la, lb, lc = np.empty(n_slots), np.empty(n_slots), np.empty(n_slots)
    gains = np.empty((n_slots, 2))
    for j in range(hist.shape[0]):
        ma, mb, mc = hist[j, missing, 0], hist[j, missing, 1], hist[j, missing, 2]
        no_missing = mc <= empty
        nb = n_bins[j]
        sa, sb, sc = 0.0, 0.0, 0.0
        for p in range(1, nb + 1):
            sa += hist[j, p - 1, 0]
            sb += hist[j, p - 1, 1]
            sc += hist[j, p - 1, 2]
            la[p], lb[p], lc[p] = sa, sb, sc
        for p in range(1, nb + 1):
            skip = hist[j, p - 1, 2] <= empty and p < nb
            for side in range(2):
                xa = la[p] + ma if side == 0 else la[p]
                xb = lb[p] + mb if side == 0 else lb[p]
                xc = lc[p] + mc if side == 0 else lc[p]
                ok = not skip and (side == 0 or not no_missing)
                ok = ok and xc >= min_leaf and tc - xc >= min_leaf
                gain = (
                    node_score(xa, xb, 0, prior) + node_score(ta - xa, tb - xb, 0, prior) - parent
                )
                gains[p, side] = gain if ok else -np.inf
        for p in range(1, nb + 1):
            for side in range(2):
                if gains[p, side] > best_gain + tol:
                    best_gain = gains[p, side]
                    best_j, best_p = j, p
                    best_missing_left = lc[p] >= tc - lc[p] if no_missing else side == 0
                    if side == 0:
                        best_la, best_lb, best_lc = la[p] + ma, lb[p] + mb, lc[p] + mc
                    else:
                        best_la, best_lb, best_lc = la[p], lb[p], lc[p]
    return best_gain, best_j, best_p, best_missing_left, best_la, best_lb, best_lc


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    n, d = 10_000, 50
    X = rng.standard_normal((n, d))
    y = np.where(X[:, :5] @ np.array([1.0, -1.0, 0.5, 0.5, -0.5]) > 0, 1.0, -1.0)
    X[rng.random((n, d)) < 0.05] = np.nan
    binner = FeatureBinner().fit(X)
    binned = binner.transform(X)
    weights = rng.exponential(size=n)
    weights /= weights.sum()
    stats = np.column_stack(
        [y * weights, weights / (1.0 + np.exp(-y * rng.normal(size=n))), np.ones(n)]
    )
    n_bins = binner.n_bins_.astype(np.int64)
    is_cat = np.zeros(d, dtype=np.bool_)
    cat = categorical_settings(20)
    prior, min_leaf = 5.0, 20.0
    variants = {
        "viboost": lambda h: best_node_split(h, n_bins, is_cat, 0, prior, min_leaf, cat)[:7],
        "pretest": lambda h: _pretest(h, n_bins, prior, min_leaf),
        "three-pass": lambda h: _three_pass(h, n_bins, prior, min_leaf),
    }
    print(f"numba {numba.__version__}; {n:,} rows x {d} features; best of {args.repeats} calls")
    print("| node's share of the rows | variant | us a node | x viboost | same split |")
    print("|---:|---|---:|---:|---|")
    for share in (1.0, 0.3, 0.05):
        m = int(n * share)
        rows = np.sort(rng.choice(n, m, replace=False))
        hist = node_histograms(binned, rows, np.array([0]), np.array([m]), stats[rows])[0]
        assert hist.shape[1] == HISTOGRAM_SLOTS
        want = tuple(variants["viboost"](hist))
        best = {}
        for name, search in variants.items():
            same = tuple(search(hist)) == want
            best[name] = np.inf
            for _ in range(args.repeats):
                start = time.perf_counter()
                search(hist)
                best[name] = min(best[name], time.perf_counter() - start)
            ratio = best[name] / best["viboost"]
            print(f"| {share:.0%} | {name} | {best[name] * 1e6:.1f} | {ratio:.2f} | {same} |")


if __name__ == "__main__":
    main()
