"""K classes: one ensemble per class, coupled through the softmax.

True labels of a K-class fit are drawn from ``softmax(F(x))``, with one margin ``F_k`` per class
and one tree per class per round (as scikit-learn's HGB and LightGBM grow them). The weights stay
conjugate class by class: as a function of class k's margin with the others fixed, the softmax
likelihood of row n is a b-Log of unit slope,

    softmax_{y_n}(F) = sigmoid(y_nk (F_k - log sum_{j != k} exp F_j)),

with ``y_nk = +1`` if ``y_n = k`` else ``-1``;

so class k's round is the binary round of Algorithm 1 (search, ``run_round``, reweight) on the
labels ``y_nk`` and the margins ``G_k = F_k - log sum_{j != k} exp F_j``: each leaf's weight keeps
its v-Log posterior, with knots shifted by the other classes. :class:`SoftmaxRows` is that row
source: it holds ``F`` and, per class, an in-memory binary ensemble whose margins it resets to
``G_k`` after every round.

Where this departs from exact coordinate ascent: the K trees of a round are fitted to the same
``F`` (the ``G_k`` of the round's start), as HGB and LightGBM fit them, rather than one class
after the other; each leaf posterior is exact given the other classes at the start of the round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.booster import InMemoryRows
from viboost.boosting.learners import BaseLearner, LearnerSearch
from viboost.variational import RoundRows
from viboost.variational.state import CleanLogOdds

__all__ = ["SoftmaxRows", "class_labels", "other_class_margins"]

# Above this many cells (rows x classes) the coupling runs on the kernels' threads; a round's
# coupling in chunks of about _CHUNK_CELLS cells, at most _MAX_CHUNKS (a row's values do not
# depend on the chunks).
_PARALLEL_CELLS = 1 << 18
_CHUNK_CELLS = 1 << 15
_MAX_CHUNKS = 64


def class_labels(y: np.ndarray, n_classes: int) -> list[np.ndarray]:
    """The one-against-rest labels of each class: ``+1`` where ``y == k``, else ``-1``."""
    return [np.where(y == k, 1.0, -1.0) for k in range(n_classes)]


def other_class_margins(f: np.ndarray) -> np.ndarray:
    """``G_k = F_k - log sum_{j != k} exp F_j`` for every row and class (shape (n, K)), so that
    ``sigmoid(G_k) = softmax_k(F)``; no overflow or cancellation however large the margins.

    Each sum is taken relative to the row's largest margin M, with one exponential per class:
    for the classes other than the row's largest the sum is at least 1, so removing class k's
    term loses no digits; for the row's largest class it is led by the second largest term,
    a normal number unless the two margins are more than 600 apart, in which case that sum is
    taken relative to the second largest margin instead. One compiled pass over the rows (the
    same values for any number of threads).
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    out = np.empty_like(f)
    kernel = _other_class_margins if f.size > _PARALLEL_CELLS else _other_class_margins.serial
    kernel(f, out)
    return out


@numba.njit(cache=True, inline="always")
def _other_class_row(f, out):  # pragma: no cover - compiled
    """:func:`other_class_margins` of one row ``f`` (K,) into ``out`` (K,)."""
    n_classes = f.shape[0]
    top = 0
    for k in range(1, n_classes):
        if f[k] > f[top]:
            top = k
    first = f[top]
    second = -np.inf
    for k in range(n_classes):
        if k != top and f[k] > second:
            second = f[k]
    # e_k = exp(F_k - M), kept in out meanwhile: one exponential per class.
    total = 0.0  # sum_j e_j >= 1 (e_top = 1)
    rest = 0.0  # sum_{j != top} e_j, led by e_second
    for k in range(n_classes):
        e = math.exp(f[k] - first)
        out[k] = e
        total += e
        if k != top:
            rest += e
    if second - first > _REST_REACH:  # e_second is a normal number: rest is exact enough
        top_term = math.log(rest) + first
    else:  # far apart: the sum relative to the second largest margin
        rest = 0.0
        for k in range(n_classes):
            if k != top:
                rest += math.exp(f[k] - second)
        top_term = math.log(rest) + second
    for k in range(n_classes):
        if k == top:
            out[k] = f[k] - top_term
        else:
            out[k] = f[k] - (math.log(total - out[k]) + first)


@threaded_kernel(cache=True)
def _other_class_margins(f, out):  # pragma: no cover - compiled
    """:func:`other_class_margins` of every row of ``f`` into ``out``."""
    for i in numba.prange(f.shape[0]):
        _other_class_row(f[i], out[i])


@threaded_kernel(cache=True)
def _coupled_round(f, before, margins, out, n_chunks):  # pragma: no cover - compiled
    """A group's coupling after a round, in one pass over its rows: ``F_k += H_k - before_k``
    (``margins``, shape ``(K, n)``: row k the margins ``H_k`` of class k's ensemble after the
    round; ``before``: the ``G`` the round started from), then ``G`` of the new ``F`` into
    ``out`` (:func:`_other_class_row`; ``out`` may be ``before``: a row is read before it is
    written) and each ``H_k`` set to ``G_k`` in place. Returns per class the largest
    ``|G_k|`` (NaN if a ``G_k`` is NaN). Each row's values are those of the steps done one
    after the other, whatever ``n_chunks`` and the threads."""
    n_rows, n_classes = f.shape
    size = (n_rows + n_chunks - 1) // n_chunks
    tops = np.zeros((n_chunks, n_classes))
    nans = np.zeros((n_chunks, n_classes), dtype=np.bool_)
    for c in numba.prange(n_chunks):
        lo, hi = c * size, min(n_rows, (c + 1) * size)
        # Class by class where the ensembles' margins are read and written (their rows).
        for k in range(n_classes):
            margin = margins[k]
            for i in range(lo, hi):
                f[i, k] += margin[i] - before[i, k]
        for i in range(lo, hi):
            _other_class_row(f[i], out[i])
        for k in range(n_classes):
            margin = margins[k]
            top, nan = 0.0, False
            for i in range(lo, hi):
                g = out[i, k]
                margin[i] = g
                if g != g:
                    nan = True
                elif abs(g) > top:
                    top = abs(g)
            tops[c, k] = top
            nans[c, k] = nan
    largest = np.zeros(n_classes)
    for k in range(n_classes):
        for c in range(n_chunks):
            if nans[c, k]:
                largest[k] = np.nan
                break
            largest[k] = max(largest[k], tops[c, k])
    return largest


# Below this gap (second largest minus largest margin) e^(second - largest) nears the
# smallest normal double (e^-708): the top class's sum is then taken relative to the second.
_REST_REACH = -600.0


class SoftmaxRows:
    """The row source of K-class ensembles in this process (the
    :class:`~viboost.boosting.booster.RowSource` protocol): ``n_groups`` sets of K ensembles
    (one set per cross-fitting fold, or one for a plain fit), ensemble ``g * K + k`` fitting
    class k of group g.

    Parameters
    ----------
    searches : sequence of LearnerSearch
        Per group, the search over its rows (each class of the group gets its own copy).
    y : ndarray of int, shape (n_samples,)
        Class indices in ``0..K-1``.
    n_classes : int
    multiplicities : ndarray of shape (n_groups, n_samples)
        Per group, the row weights it fits.
    validation : ndarray of bool, shape (n_groups, n_samples), default=None
        Per group, its held-out rows (:meth:`out_of_fold`).
    """

    def __init__(
        self,
        searches: Sequence[LearnerSearch],
        y: np.ndarray,
        n_classes: int,
        multiplicities: np.ndarray,
        validation: np.ndarray | None = None,
    ) -> None:
        self.n_classes = int(n_classes)
        self.n_groups = len(searches)
        n_rows = y.shape[0]
        self.y = np.asarray(y, dtype=np.intp)
        labels = class_labels(self.y, self.n_classes)
        self.validation = validation
        # F = 0 before the first round: G_k = -log(K - 1) for every class.
        self._f = np.zeros((self.n_groups, n_rows, self.n_classes))
        self._g = [other_class_margins(f) for f in self._f]
        class_searches, class_labels_, class_weights, class_margins = [], [], [], []
        for g, search in enumerate(searches):
            for k in range(self.n_classes):
                class_searches.append(search.restricted(multiplicities[g] > 0))
                class_labels_.append(labels[k])
                class_weights.append(multiplicities[g])
                class_margins.append(self._g[g][:, k].copy())
        self._rows = InMemoryRows(
            class_searches,
            labels[0],
            class_weights,
            class_margins,
            # Held-out rows per class ensemble: a fold's learners are then never kept (no
            # covers are recorded for them), as for two classes.
            validation=None if validation is None else np.repeat(validation, self.n_classes, 0),
            labels=class_labels_,
        )
        # Each group's K ensembles keep their margins H as the rows of one array, which the
        # coupling after each round writes in one pass (_coupled_round).
        self._h = [
            self._rows.shared_margins(range(g * self.n_classes, (g + 1) * self.n_classes))
            for g in range(self.n_groups)
        ]

    @property
    def fits_intercept(self) -> bool:
        return self._rows.fits_intercept

    def start(self, cleans: Sequence[CleanLogOdds], tau: float, logistic: bool) -> None:
        self._rows.start(cleans, tau, logistic)

    def best(self, intercept: bool = False) -> list[BaseLearner]:
        return self._rows.best(intercept)

    def round_rows(
        self, learners: Sequence[BaseLearner]
    ) -> tuple[list[RoundRows], list[BaseLearner]]:
        return self._rows.round_rows(learners)

    def add(
        self,
        learners: Sequence[BaseLearner],
        alphas: Sequence[float],
        cleans: Sequence[CleanLogOdds],
    ) -> None:
        """Each class's ``alpha h`` added to its ``F_k``; then every ``G_k`` from the new ``F``
        and the next round's search weights."""
        rows = self._rows
        rows.add(learners, alphas, cleans, reweight=False)  # the weights follow from G below
        n_classes = self.n_classes
        f_size = self._f[0].size
        kernel = _coupled_round if f_size > _PARALLEL_CELLS else _coupled_round.serial
        n_chunks = max(1, min(_MAX_CHUNKS, f_size // _CHUNK_CELLS))
        for g in range(self.n_groups):
            # The binary ensembles moved each G_k by the round's alpha h: so did F_k. Then
            # every G_k from the new F, and the ensembles' margins reset to them (in place).
            ensembles = range(g * n_classes, (g + 1) * n_classes)
            largest = kernel(self._f[g], self._g[g], self._h[g], self._g[g], n_chunks)
            for e, top in zip(ensembles, largest, strict=True):
                rows.margins_written(e, float(top))
        rows.start(cleans, rows.tau, rows.logistic)

    def margins(self, k: int = 0) -> np.ndarray:
        """Group ``k``'s margins ``F``, shape (n_samples, n_classes)."""
        return self._f[k]

    def out_of_fold(self) -> np.ndarray:
        """Per row, the margins ``F`` of the last group that holds it out, shape (n_samples,
        n_classes); 0 for rows no group holds out."""
        out = np.zeros(self._f.shape[1:])
        if self.validation is not None:
            for f, held_out in zip(self._f, self.validation, strict=True):
                out[held_out] = f[held_out]
        return out
