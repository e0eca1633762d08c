"""Knot aggregation: the rows of one boosting round compressed into a few weighted pseudo-rows.

Within a round of Algorithm 1 the ensemble ``H`` and the new stump ``h`` are fixed, and every
quantity of the inner variational loop and of the ELBO depends on row ``n`` only through its
label ``y_n``, the agreement ``v_n = y_n h(x_n)`` in {-1, +1}, the *knot* ``u_n = -y_n H(x_n)``
and its sample weight ``s_n``:

- the phi update (S.4.3, eq. (79)) is ``logit phi_n = a_{y_n} - softplus(u_n - v_n alpha)``;
- the weight posterior q(c) (S.4.1) has one term ``s_n phi_n softplus(u_n - v_n c)`` per row, so
  ``log B_c`` in the ELBO (S.5) integrates ``exp(-sum_n s_n phi_n softplus(u_n - v_n c))``;
- the approximate mode (eq. (17)) sums ``s_n phi_n exp(tau u_n)`` over ``v_n = +1`` and
  ``v_n = -1``; the omega and eta updates and the entropy of q(w) sum ``s_n F(phi_n)``.

Each is a sum ``sum_n s_n F(u_n)`` with ``F`` smooth in ``u`` (its derivatives are bounded by
those of softplus and the logistic function) within each of the four groups ``(y, v)``. So the
rows of a group are binned on ``u`` with bins of width ``delta`` and, in each bin, the weighted
empirical measure of ``u`` is replaced by its two-point Gauss rule: two pseudo-rows carrying the
bin's total weight, mean, variance and third moment. The rule is exact for cubic ``F`` and errs
by at most ``max|F''''| delta^4 / 24`` per unit of weight; a bin whose rows share one knot gives
one pseudo-row, exactly. With ``delta = 1/16`` the relative error of every sum is below ~1e-9 and
a million rows become a few thousand pseudo-rows, so each inner iteration costs ``O(bins)``
instead of ``O(N)``; the one pass over the rows happens once per round, here.

:func:`compress_round` returns the pseudo-rows in the same ``(y, h, margin, sample_weight)`` form
as real rows (``h = y v``, ``margin = -y u``), so the updates and the ELBO of
:mod:`viboost.variational` run on them unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel

__all__ = [
    "COMPRESS_ABOVE",
    "CORE_HALF_WIDTH",
    "DEFAULT_BIN_WIDTH",
    "KnotGrid",
    "combine_knot_moments",
    "compress_round",
    "knot_moments",
    "knot_range",
    "pseudo_rows",
    "pseudo_rows_by_leaf",
]

#: Above this many weighted rows, each round's inner loop runs on the pseudo-rows instead of the
#: rows: O(bins) per inner iteration, every sum within ~1e-9 relative.
COMPRESS_ABOVE = 1 << 12
#: Width of a knot bin for ``|u| <= CORE_HALF_WIDTH`` (in units of the margin ``H``).
DEFAULT_BIN_WIDTH = 1.0 / 16.0
#: Knots within this distance of 0 get bins of equal width; beyond it bins grow geometrically
#: (each ``1/256`` of its distance to 0 wide), where every summand is linear or exponentially
#: flat in ``u`` (the kinks of softplus sit at ``|u| = |alpha|`` and those of phi at
#: ``|u| ~ |logit theta|``, both far smaller).
CORE_HALF_WIDTH = 32.0
_OUTER_RATIO = 1.0 / 256.0
# Rows per chunk of the accumulation; chunk boundaries depend on n only (never on the number of
# threads), so the sums, hence the pseudo-rows, are the same for any thread count.
_CHUNK_ROWS = 1 << 16
_MAX_CHUNKS = 32


# Serial (prange runs as range): one pass per fit on the default path, ~2 ms per 10^6 rows, while
# parallel=True tripled its first-use compile time (measured 5.3 s against 1.6 s).
@numba.njit(cache=True)
def _knot_range(y, margin, sample_weight):  # pragma: no cover - compiled
    n = y.shape[0]
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    lo = np.full(n_chunks, np.inf)
    hi = np.full(n_chunks, -np.inf)
    size = (n + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        a, b = np.inf, -np.inf
        for i in range(c * size, min(n, (c + 1) * size)):
            if sample_weight[i] > 0.0:
                u = -y[i] * margin[i]
                a = min(a, u)
                b = max(b, u)
        lo[c] = a
        hi[c] = b
    return lo.min(), hi.max()


@numba.njit(cache=True)
def _bin_of(u, edges, half, width, log_step_inv, offset):  # pragma: no cover - compiled
    """Index k of the bin ``edges[k] <= u < edges[k + 1]``.

    ``offset`` is the local index of the core edge ``-half``; the formulas give k up to
    rounding, which the two loops correct.
    """
    if u < -half:
        k = offset - 1 - int(math.log(-u / half) * log_step_inv)
    elif u >= half:
        k = offset + int(round(2.0 * half / width)) + int(math.log(u / half) * log_step_inv)
    else:
        k = offset + int((u + half) / width)
    last = edges.shape[0] - 2
    k = min(max(k, 0), last)
    while k > 0 and u < edges[k]:
        k -= 1
    while k < last and u >= edges[k + 1]:
        k += 1
    return k


@threaded_kernel(cache=True)
def _accumulate(
    y, h, margin, sample_weight, leaf, n_leaves, edges, half, width, log_step_inv, offset
):  # pragma: no cover - compiled
    """Per (group, bin): sum s, s d, s d^2, s d^3 (d: offset from the bin centre in units of the
    bin width), min and max of u; flat per-chunk arrays of 6 slots per (group, bin). Group
    ``4 leaf + 2 [y > 0] + [y h > 0]`` (``leaf`` empty: every row in leaf 0)."""  # noqa: D205
    n = y.shape[0]
    n_groups = 4 * n_leaves
    has_leaf = leaf.shape[0] > 0
    n_bins = edges.shape[0] - 1
    last = n_bins - 1
    n_core = int(round(2.0 * half / width))
    inv_width = 1.0 / width
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    partial = np.zeros((n_chunks, n_groups * n_bins * 6))
    for c in numba.prange(n_chunks):
        m = partial[c]
        for k in range(n_groups * n_bins):
            m[6 * k + 4] = np.inf
            m[6 * k + 5] = -np.inf
        for i in range(np.uint64(c * size), np.uint64(min(n, (c + 1) * size))):
            s = sample_weight[i]
            if s > 0.0:
                yi = y[i]
                u = -yi * margin[i]
                x = (u + half) * inv_width
                j = int(x) if x >= 0.0 else -1
                k = offset + j
                if x < 0.0 or j >= n_core or k < 0 or k > last:  # outside the core: search edges
                    k = _bin_of(u, edges, half, width, log_step_inv, offset)
                    lo, hi = edges[k], edges[k + 1]
                    d = (u - 0.5 * (lo + hi)) / (hi - lo)
                else:
                    d = x - (j + 0.5)
                group = (2 if yi > 0.0 else 0) + (1 if yi * h[i] > 0.0 else 0)
                if has_leaf:
                    group += 4 * leaf[i]
                base = 6 * (group * n_bins + k)
                sd = s * d
                m[base] += s
                m[base + 1] += sd
                m[base + 2] += sd * d
                m[base + 3] += sd * d * d
                m[base + 4] = min(m[base + 4], u)
                m[base + 5] = max(m[base + 5], u)
    total = partial[0].copy()
    for c in range(1, n_chunks):  # fixed order
        m = partial[c]
        for k in range(n_groups * n_bins):
            for r in range(4):
                total[6 * k + r] += m[6 * k + r]
            total[6 * k + 4] = min(total[6 * k + 4], m[6 * k + 4])
            total[6 * k + 5] = max(total[6 * k + 5], m[6 * k + 5])
    return total.reshape((n_groups, n_bins, 6))


@numba.njit(cache=True)
def _gauss_nodes(total, edges):  # pragma: no cover - compiled
    """Two-point Gauss rule of each bin's measure: (group, knot, weight) of the pseudo-rows."""
    n_groups, n_bins = total.shape[0], total.shape[1]
    groups = np.empty(2 * n_groups * n_bins, dtype=np.int64)
    knots = np.empty(2 * n_groups * n_bins)
    weights = np.empty(2 * n_groups * n_bins)
    j = 0
    for g in range(n_groups):
        for k in range(n_bins):
            m0, low, high = total[g, k, 0], total[g, k, 4], total[g, k, 5]
            if m0 <= 0.0:
                continue
            centre = 0.5 * (edges[k] + edges[k + 1])
            width = edges[k + 1] - edges[k]
            mean = total[g, k, 1] / m0
            var = total[g, k, 2] / m0 - mean * mean
            third = total[g, k, 3] / m0 - 3.0 * mean * (var + mean * mean) + 2.0 * mean**3
            if low == high or not var > 0.0:  # one knot (exact), or a spread below rounding
                groups[j] = g
                knots[j] = low if low == high else min(max(centre + mean * width, low), high)
                weights[j] = m0
                j += 1
                continue
            sd = math.sqrt(var)
            skew = third / (var * sd)
            root = math.sqrt(skew * skew + 4.0)
            # Standardised nodes t+- = (skew +- root) / 2, with t+ t- = -1; weights 1/(1 + t^2).
            t_plus = 0.5 * (skew + root) if skew >= 0.0 else 2.0 / (root - skew)
            t_minus = -1.0 / t_plus
            p_plus = 1.0 / (1.0 + t_plus * t_plus)
            # A node whose weight rounds to 0 (a skew beyond 1e8: nearly all the bin's weight
            # at one knot) is left out: it would add nothing to any sum.
            if m0 * (1.0 - p_plus) > 0.0:
                groups[j] = g
                knots[j] = min(max(centre + (mean + sd * t_minus) * width, low), high)
                weights[j] = m0 * (1.0 - p_plus)
                j += 1
            if m0 * p_plus > 0.0:
                groups[j] = g
                knots[j] = min(max(centre + (mean + sd * t_plus) * width, low), high)
                weights[j] = m0 * p_plus
                j += 1
    return groups[:j], knots[:j], weights[:j]


def _knot_bins(lo: float, hi: float, width: float) -> tuple[np.ndarray, float, int]:
    """Edges of the knot bins covering [lo, hi]; also log(1 + ratio) and the local index of -half.

    The grid: ``-half + j width`` for ``j = 0..2 half / width``, then ``+-half (1 + ratio)^j``
    outwards; only the edges from the last one <= lo to the first one > hi are kept.
    """
    half = CORE_HALF_WIDTH
    step = math.log1p(_OUTER_RATIO)
    n_core = round(2.0 * half / width)
    n_neg = math.ceil(math.log(max(-lo, half) / half) / step) + 1
    n_pos = math.ceil(math.log(max(hi, half) / half) / step) + 1
    grid = np.concatenate(
        [
            -half * np.exp(step * np.arange(n_neg, 0, -1)),
            -half + width * np.arange(n_core + 1),
            half * np.exp(step * np.arange(1, n_pos + 1)),
        ]
    )
    first = int(np.searchsorted(grid, lo, side="right")) - 1
    last = int(np.searchsorted(grid, hi, side="right"))
    return grid[first : last + 1], step, n_neg - first


def _check_bin_width(bin_width: float) -> None:
    n_core = 2.0 * CORE_HALF_WIDTH / bin_width if bin_width > 0.0 else 0.0
    if not (n_core >= 1.0 and n_core == round(n_core)):
        raise ValueError(
            f"bin_width must be a positive divisor of {2.0 * CORE_HALF_WIDTH}, got {bin_width!r}"
        )


@dataclass(frozen=True)
class KnotGrid:
    """The knot bins of one round: ``edges`` over the knot range, and the constants that find
    a knot's bin (:func:`knot_moments`)."""

    edges: np.ndarray
    width: float
    log_step: float
    offset: int

    @classmethod
    def covering(cls, low: float, high: float, bin_width: float = DEFAULT_BIN_WIDTH) -> KnotGrid:
        """The grid of bins of width ``bin_width`` within ``CORE_HALF_WIDTH`` of 0 (geometric
        beyond) that covers the knots ``[low, high]``."""
        _check_bin_width(bin_width)
        edges, step, offset = _knot_bins(low, high, float(bin_width))
        return cls(edges, float(bin_width), step, offset)


def knot_range(y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> tuple[float, float]:
    """Min and max of the knots ``-y H`` over the rows of positive weight (``(inf, -inf)`` if
    none)."""
    y, margin, sample_weight = (
        np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin, sample_weight)
    )
    low, high = _knot_range(y, margin, sample_weight)
    return float(low), float(high)


def knot_moments(
    y: np.ndarray,
    h: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    grid: KnotGrid,
    leaf: np.ndarray | None = None,
    n_leaves: int = 1,
) -> np.ndarray:
    """Per (group, bin) of ``grid``: the weight, its first three moments about the bin centre
    and the least and largest knot, shape ``(4 n_leaves, n_bins, 6)``; group
    ``4 leaf + 2 [y > 0] + [y h > 0]`` (``leaf``: each row's leaf of a tree with per-leaf
    weights, None for one). Moments of disjoint sets of rows combine by
    :func:`combine_knot_moments`."""
    y, h, margin, sample_weight = (
        np.ascontiguousarray(a, dtype=np.float64) for a in (y, h, margin, sample_weight)
    )
    leaf = np.empty(0, dtype=np.int64) if leaf is None else np.ascontiguousarray(leaf, np.int64)
    return _accumulate(
        y, h, margin, sample_weight, leaf, int(n_leaves), grid.edges, CORE_HALF_WIDTH,
        grid.width, 1.0 / grid.log_step, grid.offset,
    )  # fmt: skip


def combine_knot_moments(parts: list[np.ndarray]) -> np.ndarray:
    """The :func:`knot_moments` of the union of disjoint sets of rows, summed in list order."""
    total = parts[0].copy()
    for part in parts[1:]:
        total[..., :4] += part[..., :4]
        np.minimum(total[..., 4], part[..., 4], out=total[..., 4])
        np.maximum(total[..., 5], part[..., 5], out=total[..., 5])
    return total


def pseudo_rows(
    moments: np.ndarray, grid: KnotGrid
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pseudo-rows ``(y, h, margin, sample_weight)`` of :func:`knot_moments`: the two-point
    Gauss rule of each bin's weighted knots, in group order (so sorted by leaf)."""
    y_p, h_p, margin_p, weights, _ = pseudo_rows_by_leaf(moments, grid)
    return y_p, h_p, margin_p, weights


def pseudo_rows_by_leaf(
    moments: np.ndarray, grid: KnotGrid
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`pseudo_rows` and the leaf of each pseudo-row (sorted by leaf)."""
    groups, knots, weights = _gauss_nodes(moments, grid.edges)
    local = groups % 4
    y_p = np.where(local >= 2, 1.0, -1.0)
    v_p = np.where(local % 2 == 1, 1.0, -1.0)
    return y_p, y_p * v_p, -y_p * knots, weights, groups // 4


def compress_round(
    y: np.ndarray,
    h: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    bin_width: float = DEFAULT_BIN_WIDTH,
    knot_range: tuple[float, float] | None = None,
    leaf: np.ndarray | None = None,
    n_leaves: int = 1,
) -> tuple[np.ndarray, ...]:
    """Pseudo-rows ``(y, h, margin, sample_weight)`` standing for the rows of one round.

    Parameters
    ----------
    y, h : ndarray of shape (n_samples,)
        Labels and stump outputs in {-1.0, +1.0}.
    margin : ndarray of shape (n_samples,)
        The ensemble ``H(x_n)`` before this round's stump.
    sample_weight : ndarray of shape (n_samples,)
        Nonnegative weights; rows of zero weight are left out.
    bin_width : float, default=DEFAULT_BIN_WIDTH
        Width ``delta`` of a knot bin within ``CORE_HALF_WIDTH`` of 0 (it must divide
        ``2 * CORE_HALF_WIDTH``); beyond, bins are ``1/256`` of their distance to 0 wide.
    knot_range : (float, float), optional
        Min and max of ``-y H`` over the weighted rows, when the caller already has them (saves
        a pass).
    leaf : ndarray of int, shape (n_samples,), optional
        Each row's leaf, for a tree with per-leaf weights (rows are then grouped by leaf too,
        and the leaf of each pseudo-row is returned as a fifth array, sorted).
    n_leaves : int, default=1
        The number of leaves.

    Returns
    -------
    y, h, margin, sample_weight : ndarrays of shape (n_pseudo,)
        At most two pseudo-rows per non-empty (group, bin); every sum
        ``sum_n s_n F(y_n, y_n h_n, -y_n H_n)`` over them equals the sum over the rows for cubic
        ``F`` and is within ``max|F''''| delta^4 / 24`` per unit weight otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.variational.compression import compress_round
    >>> rng = np.random.default_rng(0)
    >>> n = 100_000
    >>> y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    >>> h = np.where(rng.random(n) < 0.7, y, -y)
    >>> margin = rng.normal(0.0, 2.0, n)
    >>> yp, hp, mp, sp = compress_round(y, h, margin, np.ones(n))
    >>> yp.size < 2_000
    True
    >>> f = lambda y, h, m: np.logaddexp(0.0, -y * m + 0.3 * y * h)  # softplus(u - 0.3 v)
    >>> exact, approx = f(y, h, margin).sum(), (sp * f(yp, hp, mp)).sum()
    >>> bool(abs(approx - exact) < 1e-9 * exact)
    True
    """
    _check_bin_width(bin_width)
    y, h, margin, sample_weight = (
        np.ascontiguousarray(a, dtype=np.float64) for a in (y, h, margin, sample_weight)
    )
    lo, hi = _knot_range(y, margin, sample_weight) if knot_range is None else knot_range
    if not np.isfinite(lo):  # no row carries weight
        empty = np.empty(0)
        return (empty,) * 4 if leaf is None else (empty,) * 4 + (np.empty(0, np.int64),)
    grid = KnotGrid.covering(lo, hi, bin_width)
    moments = knot_moments(y, h, margin, sample_weight, grid, leaf, n_leaves)
    if leaf is None:
        return pseudo_rows(moments, grid)
    return pseudo_rows_by_leaf(moments, grid)
