"""How a fit's histogram trees are grown, and the per-row statistics of their split scores.

A tree's growth (:mod:`viboost.boosting.growth`) needs of the rows only the histograms of its
nodes: per feature and bin, two sums of the round's per-row statistics and the rows' count,
summed where the rows are (in memory: :mod:`viboost.boosting.partition`; on Dask: the blocks of
:mod:`viboost.dask.blocks`). :class:`TreeSettings` holds the trees' settings and computes
those statistics for a split score (:data:`~viboost.boosting.splitting.CRITERIA`):
:meth:`TreeSettings.statistics`, :meth:`TreeSettings.row_statistics` (the same in one
compiled pass, in the order of a partition's rows) and the prior's term of the score
(:meth:`TreeSettings.prior`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.splitting import (
    CAT_L2,
    CAT_SMOOTH,
    CRITERIA,
    MAX_CAT_THRESHOLD,
    MAX_CAT_TO_ONEHOT,
    categorical_settings,
)
from viboost.boosting.trees import LEAF_WEIGHTS

__all__ = ["TreeSettings"]


@dataclass(frozen=True)
class TreeSettings:
    """How the trees of a fit are grown (the parameters of
    :class:`~viboost.boosting.tree_search.TreeSearch` of the same names)."""

    max_leaf_nodes: int = 31
    max_depth: int | None = None
    min_samples_leaf: int = 20
    leaf_weights: str = "per-leaf"
    criterion: str = "newton"
    weight_prior: float = 1.0
    #: The categorical split search's regularisation (issue 53; LightGBM's names, see
    #: :func:`~viboost.boosting.splitting.categorical_settings`): ``min_data_per_group`` None
    #: is ``min(100, max(min_samples_leaf, 10))``.
    cat_smooth: float = CAT_SMOOTH
    min_data_per_group: float | None = None
    max_cat_to_onehot: int = MAX_CAT_TO_ONEHOT
    max_cat_threshold: int = MAX_CAT_THRESHOLD
    cat_l2: float = CAT_L2

    def __post_init__(self) -> None:
        if self.leaf_weights not in LEAF_WEIGHTS:
            raise ValueError(
                f"leaf_weights must be one of {LEAF_WEIGHTS}, got {self.leaf_weights!r}"
            )
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {tuple(CRITERIA)}, got {self.criterion!r}")

    @property
    def per_leaf(self) -> bool:
        """Whether each leaf carries its own weight."""
        return self.leaf_weights == "per-leaf"

    @property
    def categorical(self) -> np.ndarray:
        """The categorical search's constants as the compiled kernel reads them
        (:func:`~viboost.boosting.splitting.categorical_settings`)."""
        return categorical_settings(
            self.min_samples_leaf, self.cat_smooth, self.min_data_per_group,
            self.max_cat_to_onehot, self.max_cat_threshold, self.cat_l2,
        )  # fmt: skip

    @property
    def code(self) -> int:
        """The criterion's code in the compiled kernels."""
        return CRITERIA[self.criterion]

    def statistics(
        self, weights: np.ndarray, y: np.ndarray, margin: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The two per-row sums of the split score, linear in ``weights`` (so weights known up
        to a factor give sums known up to the same factor): ``y w`` and ``w sigmoid(y H)`` for
        ``"newton"`` (``H = 0`` when ``margin`` is None), else the weights of the positive and
        of the negative rows."""
        n_rows = y.shape[0]
        out = np.empty((n_rows, 3))
        self.row_statistics(np.arange(n_rows), weights, y, margin, np.zeros(n_rows), out)
        return out[:, 0].copy(), out[:, 1].copy()

    def row_statistics(
        self,
        rows: np.ndarray,
        weights: np.ndarray,
        y: np.ndarray,
        margin: np.ndarray | None,
        counts: np.ndarray,
        out: np.ndarray,
    ) -> np.ndarray:
        """:meth:`statistics` and ``counts`` (how much a row counts towards
        ``min_samples_leaf``) of rows ``rows``, in their order, into ``out`` (shape
        ``(rows.size, 3)``): the statistics of a
        :class:`~viboost.boosting.partition.RowPartition`, in one compiled pass."""
        if margin is None:
            margin = np.zeros(y.shape[0])
        as_float = [np.ascontiguousarray(a, dtype=np.float64) for a in (weights, y, margin, counts)]
        # One exponential a row. Into a reused buffer (viboost._utils.scratch) two threads run
        # 2.3x faster from 2 x 10^4 rows up (measured: 0.105 -> 0.049 ms at 20,000 rows, 0.40 ->
        # 0.17 ms at 80,000); into fresh pages they were slower at 80,000 rows.
        kernel = _row_statistics if rows.shape[0] > _PARALLEL_STATISTICS else _row_statistics.serial
        kernel(out, np.ascontiguousarray(rows, dtype=np.int64), *as_float, self.code)
        return out

    def prior(self, total: float) -> float:
        """The prior's term of the split score in the units of weights summing to one
        (``total``: their sum before normalisation): ``lambda = mu_0 / 2`` for ``"newton"``,
        ``mu_0`` otherwise."""
        prior = 0.5 * self.weight_prior if self.code == 0 else self.weight_prior
        return min(prior / total, 1e300) if total > 0 else 1e300


#: Rows above which :meth:`TreeSettings.row_statistics` runs on threads.
_PARALLEL_STATISTICS = 1 << 15


@threaded_kernel(cache=True)
def _row_statistics(out, rows, weights, y, margin, counts, code):  # pragma: no cover - compiled
    """:meth:`TreeSettings.row_statistics` into ``out``."""
    for k in numba.prange(rows.shape[0]):
        i = np.uint64(rows[k])
        w = weights[i]
        if code == 0:
            out[k, 0] = y[i] * w
            out[k, 1] = w * (1.0 / (1.0 + math.exp(-(y[i] * margin[i]))))
        elif y[i] > 0.0:
            out[k, 0] = w
            out[k, 1] = 0.0
        else:
            out[k, 0] = 0.0
            out[k, 1] = w
        out[k, 2] = counts[i]
