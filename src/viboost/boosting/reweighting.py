"""Reweighting between rounds: the ensemble margins and the next round's stump-search weights.

After round t the ensemble is ``H + alpha_t h_t`` and the next stump is the one of least
weighted error under

- ``s_n phi_n exp(-tau y_n H(x_n))`` for the approximate mode (section 5: its eq. (17) is
  monotone in that weighted error, S.6), or
- ``s_n phi_n sigmoid(-y_n H(x_n))`` for ``alpha="exact"`` (one Newton step from 0 towards
  the exact mode of q(c); the logistic-loss gradient),

with phi_n from the state's q(w) (:class:`viboost.variational.CleanLogOdds`). This module owns
those weights:

- :func:`search_weights`: the weights for given margins and q(w), one compiled pass, no overflow
  or total underflow however large the margins;
- :class:`RowMargins`: the per-row margins ``H(x_n)`` of a fit and, per round,
  ``H += alpha h`` fused with the next round's weights. With the noise model's q(w) (slope 1)
  and ``tau = 1`` or the exact mode, the weights are rational in a cached ``exp(-y_n H_n)``
  (the rational form of phi_n in :mod:`viboost.variational.state`), so a round needs no
  exponential per row.

Sums are accumulated over fixed chunks of rows in a fixed order, so the weights are the same for
any number of threads.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from scipy.special import log_expit, logsumexp

from viboost._utils.parallel import threaded_kernel
from viboost.variational.state import (
    CleanLogOdds,
    inverse_clean_proba,
    scaled_inverse_clean_proba,
)

__all__ = ["RowMargins", "ScaledWeights", "scaled_search_weights", "search_weights"]

_CHUNK_ROWS = 1 << 16
_MAX_CHUNKS = 64
# |offset| of the clean log-odds beyond which exp(-offset) may overflow: weights from logs.
_OFFSET_REACH = 600.0
# A floor for exp(-y H) where its reciprocal is formed (the cached exponential may underflow
# to 0 in a round that takes |H| past the cache's reach; that reciprocal is then not used).
_TINY = 1e-300


@threaded_kernel(cache=True)
def _weights_kernel(
    y, margin, sample_weight, offset_neg, offset_pos, slope, tau, logistic, out
):  # pragma: no cover - compiled
    """Unnormalised stump-search weights, scaled by exp(-M) with M a bound on their log.

    ``s phi exp(tau u)``, or ``s phi sigma(u)`` when ``logistic``, with ``u = -y H``. With slope 1,
    ``1 / phi = 1 + A (1 + e^u)`` (``A = exp(-a_y)``, :func:`inverse_clean_proba`): one or two
    exponentials per row and no overflow, as ``log(phi e^{tau u}) <= M = max(tau u + min(0, a -
    max(u, 0)))`` within 2 log 2. Returns the sum, accumulated over fixed chunks in a fixed order,
    M, and the range of the knots u over the weighted rows (for
    :func:`~viboost.variational.compression.compress_round`).
    """
    n = y.shape[0]
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    bound = np.full(n_chunks, -np.inf)
    lows = np.full(n_chunks, np.inf)
    highs = np.full(n_chunks, -np.inf)
    for c in numba.prange(n_chunks):
        b, low, high = -np.inf, np.inf, -np.inf
        for i in range(c * size, min(n, (c + 1) * size)):
            if sample_weight[i] > 0.0:
                u = -y[i] * margin[i]
                low = min(low, u)
                high = max(high, u)
                a = offset_pos if y[i] > 0.0 else offset_neg
                lead = min(0.0, u) if logistic else tau * u
                b = max(b, lead + (min(0.0, a - max(u, 0.0)) if slope > 0.0 else 0.0))
        bound[c] = b
        lows[c] = low
        highs[c] = high
    log_bound = bound.max()
    inverse_odds_neg = math.exp(-offset_neg) if slope > 0.0 else 0.0
    inverse_odds_pos = math.exp(-offset_pos) if slope > 0.0 else 0.0
    # exp(-M) once when it is a normal float (|M| < 700): then tau = 1 needs one exp per row.
    scale = math.exp(-log_bound) if abs(log_bound) < 700.0 else 0.0
    unit_tau = tau == 1.0 and scale > 0.0
    sums = np.zeros(n_chunks)
    for c in numba.prange(n_chunks):
        acc = 0.0
        for i in range(c * size, min(n, (c + 1) * size)):
            s = sample_weight[i]
            if not s > 0.0:
                out[i] = 0.0
                continue
            u = -y[i] * margin[i]
            inverse_odds = inverse_odds_pos if y[i] > 0.0 else inverse_odds_neg
            if u <= 0.0:
                e = math.exp(u)  # e^u <= 1
                lead = e * scale if (logistic or unit_tau) else math.exp(tau * u - log_bound)
                if logistic:
                    w = lead / ((1.0 + e) * inverse_clean_proba(e, inverse_odds))
                else:
                    w = lead / inverse_clean_proba(e, inverse_odds)
            else:
                e = math.exp(-u)  # e^-u < 1
                if logistic and slope > 0.0:
                    # sigma(u) phi(u) e^-M = e^-(u+M) / ((1 + e^-u) e^-u / phi)
                    lead = e * scale if scale > 0.0 else math.exp(-u - log_bound)
                    w = lead / ((1.0 + e) * scaled_inverse_clean_proba(e, inverse_odds))
                elif logistic:  # constant phi: sigma(u) e^-M
                    w = (scale if scale > 0.0 else math.exp(-log_bound)) / (1.0 + e)
                elif slope > 0.0:
                    lead = scale if unit_tau else math.exp((tau - 1.0) * u - log_bound)
                    w = lead / scaled_inverse_clean_proba(e, inverse_odds)
                else:
                    w = math.exp(tau * u - log_bound)
            w *= s
            out[i] = w
            acc += w
        sums[c] = acc
    total = 0.0
    for c in range(n_chunks):
        total += sums[c]
    return total, log_bound, lows.min(), highs.max()


class ScaledWeights(NamedTuple):
    """Stump-search weights up to a common factor: the weights are ``values * exp(log_scale)``
    and ``values`` sum to ``total``. Parts of the rows (blocks of a distributed fit) each give
    their own; :meth:`normalized` is the weights of the rows of one part alone. ``knot_range``:
    (min, max) of the knots ``-y H`` over the weighted rows when found on the way, else None."""

    values: np.ndarray
    log_scale: float
    total: float
    knot_range: tuple[float, float] | None = None

    def normalized(self) -> np.ndarray:
        """The weights divided by their sum (in place)."""
        values = self.values
        if self.total > 0.0:
            values /= self.total
        return values


def search_weights(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    clean: CleanLogOdds,
    tau: float,
    logistic: bool = False,
) -> np.ndarray:
    """Normalised weights under which the least weighted error picks this round's stump.

    ``s_n phi_n exp(-tau y_n H_n)`` for the approximate mode (section 5, S.6), or, with
    ``logistic``, ``s_n phi_n sigmoid(-y_n H_n)`` for one Newton step towards the exact mode.
    phi_n comes from ``clean``; no overflow or total underflow whatever the margins, one
    compiled pass.
    """
    return scaled_search_weights(y, margin, sample_weight, clean, tau, logistic).normalized()


def scaled_search_weights(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray,
    clean: CleanLogOdds,
    tau: float,
    logistic: bool = False,
) -> ScaledWeights:
    """The weights of :func:`search_weights` before normalisation, with their common scale."""
    y, margin, sample_weight = (
        np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin, sample_weight)
    )
    out = np.empty_like(margin)
    if clean.slope == 0.0:  # phi is the same for every row: it scales out
        offset_neg = offset_pos = 0.0
    else:
        offset_neg, offset_pos = clean.offset_neg, clean.offset_pos
    if max(abs(offset_neg), abs(offset_pos)) < _OFFSET_REACH:
        total, log_bound, low, high = _weights_kernel(
            y, margin, sample_weight, offset_neg, offset_pos, clean.slope, float(tau),
            logistic, out,
        )  # fmt: skip
        if total > 0.0 and np.isfinite(total):
            return ScaledWeights(out, float(log_bound), float(total), (float(low), float(high)))
    # Extreme odds: the same weights from their logs.
    log_clean, _ = clean.log_proba(y, margin)
    lead = log_expit(-y * margin) if logistic else -tau * y * margin
    with np.errstate(divide="ignore"):
        log_w = np.log(sample_weight) + log_clean + lead
    log_total = float(logsumexp(log_w))
    if not np.isfinite(log_total):  # no row carries weight
        return ScaledWeights(np.zeros_like(margin), 0.0, 0.0)
    values = np.exp(log_w - log_total)
    return ScaledWeights(values, log_total, float(values.sum()))


@numba.njit(cache=True, inline="always")
def _next_weight(
    yi, margin, exp_knot, s, inverse_odds_neg, inverse_odds_pos, slope, logistic, acc,
    max_abs_margin, low, high,
):  # pragma: no cover - compiled  # fmt: skip
    """One row of :func:`_add_kernel`: its next weight from its new margin and ``exp_knot =
    exp(-y H)``, and the running sum of the weights, ``max |H|`` and range of the knots (over the
    weighted rows). No branch on the data: an unweighted row takes the same steps, its results
    selected away, and both forms of the weight are computed and one kept (``e <= 1`` is as
    unpredictable as the labels)."""
    e = exp_knot
    weighted = s > 0.0
    u = -yi * margin
    inverse_odds = inverse_odds_pos if yi > 0.0 else inverse_odds_neg
    r = 1.0 / max(e, _TINY)  # exp(y H), used only where e > 1
    if slope > 0.0:
        small = e / inverse_clean_proba(e, inverse_odds)
        large = 1.0 / scaled_inverse_clean_proba(r, inverse_odds)  # phi e^u
    else:
        small = large = e
    if logistic:
        small /= 1.0 + e
        large *= r / (1.0 + r)  # phi sigma(u) = phi e^u * r / (1 + r)
    w = (small if e <= 1.0 else large) * s if weighted else 0.0
    return (
        w,
        acc + w,
        max(max_abs_margin, abs(margin)),
        min(low, u if weighted else np.inf),
        max(high, u if weighted else -np.inf),
    )


@threaded_kernel(cache=True)
def _add_kernel(
    y,
    sample_weight,
    h,
    alpha,
    margin,
    exp_knot,
    offset_neg,
    offset_pos,
    slope,
    logistic,
    unit,
    leaf,
    out,
):  # pragma: no cover - compiled
    """``H += alpha h`` and ``exp(u) *= exp(-alpha y h)`` in place; next weights (q(w) of slope 1
    or 0, tau = 1). Slope 0 is a phi constant over the rows (1 for the core model), a common factor
    that the weights leave out, as :func:`_weights_kernel` does.

    With ``unit`` (outputs in {-1, +1}) the factor is one of two precomputed exponentials. With
    ``leaf`` non-empty, ``h`` holds the leaves' values and row i's output is ``h[leaf[i]]``:
    the factors are two precomputed exponentials per leaf (the same numbers as per row).

    With ``E = exp(u)``, ``u = -y H``, phi is rational in E (:func:`inverse_clean_proba`), so
    ``phi e^u = E phi`` and ``phi sigma(u) = E phi / (1 + E)`` need no exponential per row.
    Returns the sum of the weights, ``max |H|`` and the range of the knots u over the weighted rows
    (for :func:`~viboost.variational.compression.compress_round`).
    """
    n = y.shape[0]
    n_chunks = min(_MAX_CHUNKS, max(1, (n + _CHUNK_ROWS - 1) // _CHUNK_ROWS))
    size = (n + n_chunks - 1) // n_chunks
    down, up = math.exp(-alpha), math.exp(alpha)
    by_leaf = leaf.shape[0] > 0
    n_leaves = h.shape[0] if by_leaf else 0
    leaf_step = np.empty(n_leaves)
    leaf_down = np.empty(n_leaves)  # exp(-alpha y h) for y = +1
    leaf_up = np.empty(n_leaves)  # and for y = -1
    for k in range(n_leaves):
        leaf_step[k] = alpha * h[k]
        leaf_down[k] = math.exp(-alpha * 1.0 * h[k])
        leaf_up[k] = math.exp(-alpha * -1.0 * h[k])
    inverse_odds_neg, inverse_odds_pos = math.exp(-offset_neg), math.exp(-offset_pos)
    sums = np.zeros(n_chunks)
    chunk_max_abs_margin = np.zeros(n_chunks)
    lows = np.full(n_chunks, np.inf)
    highs = np.full(n_chunks, -np.inf)
    # One loop per kind of output, each free of branches on the row's data (the row's weight
    # from :func:`_next_weight`), which the compiler vectorises: against one loop that tested
    # the kind and the row's weight in every row, 10^6 rows on one thread took 6.5 ms against
    # 33 by leaf, and 1.3-3x less with +-1 or other outputs; the same numbers bit for bit.
    for c in numba.prange(n_chunks):
        acc, max_abs_margin, low, high = 0.0, 0.0, np.inf, -np.inf
        start, stop = c * size, min(n, (c + 1) * size)
        if by_leaf:
            for i in range(np.uint64(start), np.uint64(stop)):
                yi = y[i]
                j = np.uint64(leaf[i])
                m = margin[i] + leaf_step[j]
                e = exp_knot[i] * (leaf_down[j] if yi > 0.0 else leaf_up[j])
                margin[i], exp_knot[i] = m, e
                out[i], acc, max_abs_margin, low, high = _next_weight(
                    yi, m, e, sample_weight[i], inverse_odds_neg, inverse_odds_pos, slope,
                    logistic, acc, max_abs_margin, low, high,
                )  # fmt: skip
        elif unit:
            for i in range(np.uint64(start), np.uint64(stop)):
                yi = y[i]
                m = margin[i] + alpha * h[i]
                e = exp_knot[i] * (down if yi * h[i] > 0.0 else up)
                margin[i], exp_knot[i] = m, e
                out[i], acc, max_abs_margin, low, high = _next_weight(
                    yi, m, e, sample_weight[i], inverse_odds_neg, inverse_odds_pos, slope,
                    logistic, acc, max_abs_margin, low, high,
                )  # fmt: skip
        else:
            for i in range(np.uint64(start), np.uint64(stop)):
                yi = y[i]
                m = margin[i] + alpha * h[i]
                e = exp_knot[i] * math.exp(-alpha * yi * h[i])
                margin[i], exp_knot[i] = m, e
                out[i], acc, max_abs_margin, low, high = _next_weight(
                    yi, m, e, sample_weight[i], inverse_odds_neg, inverse_odds_pos, slope,
                    logistic, acc, max_abs_margin, low, high,
                )  # fmt: skip
        sums[c] = acc
        chunk_max_abs_margin[c] = max_abs_margin
        lows[c] = low
        highs[c] = high
    total = 0.0
    for c in range(n_chunks):
        total += sums[c]
    return total, chunk_max_abs_margin.max(), lows.min(), highs.max()


_NO_LEAVES = np.empty(0, dtype=np.int64)


class RowMargins:
    """The boosting loop's per-row state: ``H(x_n)`` and, as a cache, ``exp(-y_n H(x_n))``.

    :meth:`add_and_reweight` adds a round's ``alpha h`` and returns the next round's stump
    weights (:func:`search_weights`) in the same pass. With the noise model's q(w) (slope 1) and
    ``tau = 1`` (or logistic weights) the weights are rational in the cached exponential,
    updated by a factor ``exp(-+alpha)`` per round, so a round needs no exponential per row.
    Elsewhere (other tau, the core model, margins beyond +-700, extreme odds) the weights come
    from :func:`search_weights`. Both give the same weights to rounding (relative 1e-13 after
    thousands of rounds).
    """

    _REACH = 700.0  # |H| beyond which exp(-y H) may overflow: the cache is dropped

    def __init__(self, y: np.ndarray, sample_weight: np.ndarray, margin: np.ndarray) -> None:
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
        self.margin = np.array(margin, dtype=np.float64)
        #: The sum of the sample weights (the multiplicities).
        self.total_weight = float(self.sample_weight.sum())
        #: Whether every label is -1 or +1 (then a tree's rows move by per-leaf factors).
        self._signed = bool(np.all(np.abs(self.y) == 1.0))
        self._exp_knot: np.ndarray | None = None
        #: (min, max) of the knots -y H over the weighted rows when the last round found it.
        self.knot_range: tuple[float, float] | None = None
        self._cache_ok = bool(np.max(np.abs(self.margin), initial=0.0) < self._REACH)

    def copy(self) -> RowMargins:
        """An independent copy (the margins and the cache)."""
        other = RowMargins.__new__(RowMargins)
        other.y, other.sample_weight = self.y, self.sample_weight  # never written
        other.total_weight = self.total_weight
        other._signed = self._signed
        other.margin = self.margin.copy()
        other._exp_knot = None if self._exp_knot is None else self._exp_knot.copy()
        other.knot_range = self.knot_range
        other._cache_ok = self._cache_ok
        return other

    def move(self, alpha: float, h: np.ndarray, leaf: np.ndarray | None = None) -> None:
        """``H += alpha h`` only (no weights: for a caller that resets the margins next, as
        the K-class coupling does); ``leaf`` as in :meth:`add`. The cached exponentials are
        dropped."""
        step = alpha * np.asarray(h, dtype=np.float64)
        self.margin += step if leaf is None else step[leaf]
        self._exp_knot = None
        self.knot_range = None
        self._cache_ok = bool(np.max(np.abs(self.margin), initial=0.0) < self._REACH)

    def written(self, largest: float) -> None:
        """The margins ``H`` were written in place (by the caller), ``largest`` their largest
        absolute value (NaN if one is NaN): the cached exponentials are dropped."""
        self._exp_knot = None
        self.knot_range = None
        self._cache_ok = bool(largest < self._REACH)

    def weights(self, clean: CleanLogOdds, tau: float, logistic: bool) -> np.ndarray:
        """Normalised stump-search weights for the current margins (:func:`search_weights`)."""
        return self.scaled_weights(clean, tau, logistic).normalized()

    def scaled_weights(self, clean: CleanLogOdds, tau: float, logistic: bool) -> ScaledWeights:
        """:meth:`weights` before normalisation (:func:`scaled_search_weights`); records the
        knots' range when it comes with them."""
        scaled = scaled_search_weights(
            self.y, self.margin, self.sample_weight, clean, tau, logistic
        )
        self.knot_range = scaled.knot_range  # of the current margins, or None: unknown
        return scaled

    def add_and_reweight(
        self,
        alpha: float,
        h: np.ndarray,
        clean: CleanLogOdds,
        tau: float,
        logistic: bool,
        unit: bool = True,
    ) -> np.ndarray:
        """``H += alpha h``; return the next round's normalised weights under q(w) ``clean``."""
        return self.add(alpha, h, clean, tau, logistic, unit).normalized()

    def add(
        self,
        alpha: float,
        h: np.ndarray,
        clean: CleanLogOdds,
        tau: float,
        logistic: bool,
        unit: bool = True,
        leaf: np.ndarray | None = None,
    ) -> ScaledWeights:
        """``H += alpha h``; return the next round's weights, before normalisation. ``unit``:
        whether ``h`` is in {-1, +1} (a stump or a tree with tied weights), which saves an
        exponential per row. ``leaf`` (each row's leaf of a tree): ``h`` holds the leaves'
        values instead, row ``i``'s being ``h[leaf[i]]`` (two exponentials per leaf, not one
        per row; labels in {-1, +1})."""
        if leaf is not None and not self._signed:
            h, leaf = np.asarray(h)[leaf], None  # the per-leaf factors need y in {-1, +1}
        # Slope 1 (the noise model's q(w)) with offsets within reach of exp(-offset), or 0
        # (phi constant over the rows: a common factor, left out).
        fast = (
            self._cache_ok
            and (logistic or tau == 1.0)
            and (
                clean.slope == 0.0
                or clean.slope == 1.0
                and max(abs(clean.offset_neg), abs(clean.offset_pos)) < _OFFSET_REACH
            )
        )
        if fast:
            if self._exp_knot is None:
                self._exp_knot = np.exp(-self.y * self.margin)
            out = np.empty_like(self.margin)
            total, max_abs_margin, low, high = _add_kernel(
                self.y,
                self.sample_weight,
                np.ascontiguousarray(h, dtype=np.float64),
                float(alpha),
                self.margin,
                self._exp_knot,
                clean.offset_neg,
                clean.offset_pos,
                float(clean.slope),
                logistic,
                bool(unit) and leaf is None,
                _NO_LEAVES if leaf is None else np.ascontiguousarray(leaf, dtype=np.int64),
                out,
            )
            self.knot_range = (low, high)
            if max_abs_margin < self._REACH and total > 0.0 and np.isfinite(total):
                return ScaledWeights(out, 0.0, float(total))
            self._cache_ok = max_abs_margin < self._REACH
            if not self._cache_ok:
                self._exp_knot = None
            return self.scaled_weights(clean, tau, logistic)
        self.knot_range = None
        if leaf is not None:
            h = np.asarray(h)[leaf]
        self.margin += alpha * h
        self._exp_knot = None  # stale from here on
        if self._cache_ok and np.max(np.abs(self.margin), initial=0.0) >= self._REACH:
            self._cache_ok = False
        return self.scaled_weights(clean, tau, logistic)
