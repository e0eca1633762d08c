"""The client side of a distributed fit: tasks on the blocks, and the blocks as a row source.

:class:`BlockTasks` submits one task per block of training rows (:mod:`viboost.dask.blocks`)
and waits for their results with a bound, turning a lost or silent cluster into a clear error.
:class:`BlockRows` is the :class:`~viboost.boosting.booster.RowSource` of a distributed fit: the
same :class:`~viboost.boosting.booster.Booster` as in memory runs its rounds over it (one
ensemble for an in-sample fit or the refit of a cross-fitted one, one per fold while
cross-fitting, all stepped together). A round is two passes over the blocks:

1. each block adds the previous round's learners and computes its search weights and their
   histogram over its bins; the client adds the histograms **in block order** and picks the
   stump (:func:`~viboost.boosting.stumps.best_binned_stump`);
2. each block returns the knot moments of its rows for that stump (or, for at most
   :data:`~viboost.variational.compression.COMPRESS_ABOVE` weighted rows in all, the rows
   themselves); the client combines them in block order into the round's rows, on which the
   booster runs :func:`~viboost.variational.run_round`.

So a round moves two histograms' or moments' worth of numbers per block, and the rows, their
bins and margins stay on the workers. The blocks and the order of every reduction depend only
on the shape of the data (:func:`~viboost.dask.blocks.block_sizes`), so the fit is the same for
any partitioning of the input and any number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from viboost.boosting.binning import FeatureBinner
from viboost.boosting.stumps import DecisionStump, best_binned_stump
from viboost.dask import blocks
from viboost.variational import RoundRows
from viboost.variational.compression import (
    COMPRESS_ABOVE,
    KnotGrid,
    combine_knot_moments,
    pseudo_rows,
)
from viboost.variational.state import CleanLogOdds

__all__ = ["BlockRows", "BlockTasks"]


class BlockTasks:
    """Submit one task per block and gather the results, each wait bounded by ``timeout``."""

    def __init__(self, client: Any, timeout: float) -> None:
        self.client = client
        self.timeout = float(timeout)

    def submit(self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any) -> list:
        """``func(*args_of_block_b, **shared)`` for every block ``b``, as futures."""
        return [
            self.client.submit(blocks.on_one_thread, func, *args, pure=False, **shared)
            for args in zip(*per_block, strict=True)
        ]

    def compute(self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any) -> list:
        """As :meth:`submit`, for arguments that are dask collections or delayed objects (the
        raw input blocks): they are computed on the workers, not on the client."""
        from dask import delayed

        calls = [
            delayed(func, pure=False)(*args, **shared) for args in zip(*per_block, strict=True)
        ]
        return self.client.compute(calls)

    def gather(self, futures: list) -> list:
        """The results, in block order; a clear error if they do not all arrive in time or a
        worker holding them died too often."""
        from distributed import wait
        from distributed.scheduler import KilledWorker

        try:
            # distributed.wait() waits through the current client: make it this fit's.
            with self.client.as_current():
                wait(futures, timeout=self.timeout)
        except TimeoutError as error:
            raise RuntimeError(
                f"DaskVIBoostClassifier: a distributed step did not finish within "
                f"timeout={self.timeout:g} s. Are the workers alive and connected to the "
                "scheduler? Raise `timeout` for very large blocks."
            ) from error
        try:
            return self.client.gather(futures)
        except KilledWorker as error:
            raise RuntimeError(
                "DaskVIBoostClassifier: workers died while running a step of the fit (dask "
                f"gave up on task {error.task!r}); the fit cannot go on. Check the workers' "
                "memory limits and logs."
            ) from error

    def run(self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any) -> list:
        """:meth:`submit` and :meth:`gather`."""
        return self.gather(self.submit(func, *per_block, **shared))


class BlockRows:
    """The row source (:class:`~viboost.boosting.booster.RowSource`) of a distributed fit: the
    rows stay in blocks on the workers, and each round moves histograms, knot moments and
    scalars (see the module docstring).

    Parameters
    ----------
    tasks : BlockTasks
    training : list of futures
        The :class:`~viboost.dask.blocks.TrainingBlock` of each block.
    binner : FeatureBinner
        The binning of the blocks.
    n_active : list of int
        Per ensemble, how many rows it fits (positive multiplicity); above
        :data:`~viboost.variational.compression.COMPRESS_ABOVE` its rounds run on pseudo-rows.
    multiplicities : list of futures or None, default=None
        Per block, an array of shape ``(n_ensembles, block rows)`` of the ensembles' row
        weights; None: every ensemble fits the sample weights.
    validation : list of futures or None, default=None
        Per block, an array of shape ``(n_ensembles, block rows)``: each ensemble's held-out
        rows (:meth:`out_of_fold`).
    """

    def __init__(
        self,
        tasks: BlockTasks,
        training: list,
        binner: FeatureBinner,
        n_active: list[int],
        multiplicities: list | None = None,
        validation: list | None = None,
    ) -> None:
        self.tasks = tasks
        self.training = training
        self.binner = binner
        self.validation = validation
        n_ensembles = len(n_active)
        self.compress = [n > COMPRESS_ABOVE for n in n_active]
        per_block = [None] * len(training) if multiplicities is None else multiplicities
        self.states = tasks.submit(
            blocks.start_boosters, training, per_block, n_boosters=n_ensembles
        )
        self.occupied = list(
            np.any(tasks.run(blocks.occupied_by_booster, training, self.states), axis=0)
        )
        # The learners added last, applied to the blocks' margins by the next pass over them.
        self.pending: list[blocks.LearnerUpdate | None] = [None] * n_ensembles
        self._learners: list = []
        self._grids: list[KnotGrid | None] = []

    def start(self, cleans: Sequence[CleanLogOdds], tau: float, logistic: bool) -> None:
        self.cleans = tuple(cleans)
        self.tau, self.logistic = float(tau), bool(logistic)

    def best(self) -> list[DecisionStump]:
        """Apply the pending learners and reweight on the blocks; add the blocks' histograms in
        block order and pick each ensemble's stump (one pass over the blocks)."""
        self.states = self.tasks.submit(
            blocks.reweight,
            self.training,
            self.states,
            updates=tuple(self.pending),
            cleans=self.cleans,
            tau=self.tau,
            logistic=self.logistic,
        )
        self.pending = [None] * len(self.pending)
        parts = self.tasks.run(blocks.histograms, self.training, self.states)
        learners, self._grids = [], []
        for k, occupied in enumerate(self.occupied):
            hist, low, high = _combine_histograms([part[k] for part in parts])
            stump, _ = best_binned_stump(hist, self.binner, occupied)
            learners.append(stump)
            self._grids.append(KnotGrid.covering(low, high) if self.compress[k] else None)
        return learners

    def round_rows(self, learners: Sequence[DecisionStump]) -> list[RoundRows]:
        """Each ensemble's round rows: the blocks' knot moments combined in block order into
        pseudo-rows, or the rows themselves (one pass over the blocks)."""
        self._learners = list(learners)
        parts = self.tasks.run(
            blocks.round_rows,
            self.training,
            self.states,
            learners=tuple(learners),
            grids=tuple(self._grids),
        )
        out = []
        for k, grid in enumerate(self._grids):
            mine = [part[k] for part in parts]
            if grid is not None:
                out.append(RoundRows(*pseudo_rows(combine_knot_moments(mine), grid)))
            else:
                out.append(
                    RoundRows(*(np.concatenate([part[i] for part in mine]) for i in range(4)))
                )
        return out

    def add(self, alphas: Sequence[float], cleans: Sequence[CleanLogOdds]) -> None:
        """Record ``H += alpha h`` and the new q(w); the blocks apply them in the next pass."""
        self.pending = [
            blocks.LearnerUpdate(learner, float(alpha))
            for learner, alpha in zip(self._learners, alphas, strict=True)
        ]
        self.cleans = tuple(cleans)

    def finish(self) -> list:
        """Apply the pending learners to the blocks' margins; return the blocks' states."""
        self.states = self.tasks.submit(
            blocks.finish_boosters, self.training, self.states, updates=tuple(self.pending)
        )
        self.pending = [None] * len(self.pending)
        return self.states

    def margins(self, k: int = 0) -> np.ndarray:
        """Ensemble ``k``'s margins of every row, gathered in row order."""
        return np.concatenate(self.tasks.run(blocks.margins, self.finish(), k=k))

    def out_of_fold(self) -> np.ndarray:
        """The out-of-fold margins of every row (:func:`~viboost.dask.blocks.out_of_fold`), in
        row order; 0 for rows no ensemble holds out."""
        parts = self.tasks.run(
            blocks.out_of_fold,
            self.training,
            self.states,
            self.validation,
            updates=tuple(self.pending),
        )
        return np.concatenate(parts)


def _combine_histograms(
    parts: list[tuple[np.ndarray, float, float, tuple[float, float]]],
) -> tuple[np.ndarray, float, float]:
    """The normalised histogram of all blocks' weights (added in block order, each block's
    scale brought to the largest) and the range of the knots over all blocks."""
    low = min(part[3][0] for part in parts)
    high = max(part[3][1] for part in parts)
    weighted = [part for part in parts if part[2] > 0.0]
    if not weighted:
        raise ValueError("no row carries weight: no stump can be scored")
    top = max(part[1] for part in weighted)
    hist = np.zeros_like(weighted[0][0])
    total = 0.0
    for part_hist, log_scale, part_total, _ in weighted:
        factor = np.exp(log_scale - top)
        hist += part_hist * factor if factor != 1.0 else part_hist
        total += part_total * factor
    hist /= total
    return hist, low, high
