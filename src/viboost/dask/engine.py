"""The client side of a distributed fit: tasks on the blocks, and boosters run in lockstep.

:class:`BlockTasks` submits one task per block of training rows (:mod:`viboost.dask.blocks`)
and waits for their results with a bound, turning a lost or silent cluster into a clear error.
:class:`LockstepBoosters` runs one or more boosters over the same blocks (one for an in-sample
fit or the final fit of a cross-fitted one, one per fold while cross-fitting), round by round
as :meth:`viboost.VIBoostClassifier._rounds` does in memory:

1. each block adds the previous round's stumps and computes its stump-search weights and their
   histogram over its bins; the client adds the histograms **in block order** and picks the
   stump (:func:`~viboost.stumps.best_binned_stump`);
2. each block returns the knot moments of its rows for that stump (or, for at most
   :data:`~viboost.compression.COMPRESS_ABOVE` weighted rows in all, the rows themselves); the
   client combines them in block order into the round's rows and runs
   :func:`~viboost.variational.run_round` on them.

So a round moves two histograms' or moments' worth of numbers per block, and the rows, their
bins and margins stay on the workers. The blocks and the order of every reduction depend only
on the shape of the data (:func:`~viboost.dask.blocks.block_sizes`), so the fit is the same for
any partitioning of the input and any number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from viboost import compression
from viboost.binning import FeatureBinner
from viboost.compression import KnotGrid, combine_knot_moments, pseudo_rows
from viboost.dask import blocks
from viboost.stumps import DecisionStump, best_binned_stump
from viboost.variational import (
    ModelPriors,
    RoundResult,
    RoundRows,
    RoundSettings,
    VariationalState,
    run_round,
)

__all__ = ["BlockTasks", "BoosterPlan", "LockstepBoosters"]


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


@dataclass
class BoosterPlan:
    """The client's state of one booster: its variational state, how its rounds run, and the
    stump it added last (applied to the blocks' margins at the start of the next round)."""

    state: VariationalState
    settings: RoundSettings
    learning_rate: float
    n_active: int
    occupied: np.ndarray | None = None
    pending: blocks.StumpUpdate | None = None

    @property
    def compress(self) -> bool:
        return self.n_active > compression.COMPRESS_ABOVE


class LockstepBoosters:
    """Boosters that share the blocks and run their rounds together (see the module docstring).

    Parameters
    ----------
    tasks : BlockTasks
    training : list of futures
        The :class:`~viboost.dask.blocks.TrainingBlock` of each block.
    binner : FeatureBinner
        The binning of the blocks.
    priors : ModelPriors
    plans : list of BoosterPlan
        One per booster; their settings must share ``tau`` and ``exact_mode``.
    multiplicities : list of ndarray or None
        Per block, an array of shape ``(n_boosters, block rows)`` of the boosters' row weights;
        None: every booster fits the sample weights.
    """

    def __init__(
        self,
        tasks: BlockTasks,
        training: list,
        binner: FeatureBinner,
        priors: ModelPriors,
        plans: list[BoosterPlan],
        multiplicities: list[np.ndarray] | None = None,
    ) -> None:
        self.tasks = tasks
        self.training = training
        self.binner = binner
        self.priors = priors
        self.plans = plans
        settings = plans[0].settings
        self.tau = float(settings.tau)
        self.logistic = settings.exact_mode
        per_block = [None] * len(training) if multiplicities is None else multiplicities
        self.states = tasks.submit(
            blocks.start_boosters, training, per_block, n_boosters=len(plans)
        )
        occupied = np.any(tasks.run(blocks.occupied_by_booster, training, self.states), axis=0)
        for plan, bins in zip(plans, occupied, strict=True):
            plan.occupied = bins

    def _updates(self) -> tuple[blocks.StumpUpdate | None, ...]:
        return tuple(plan.pending for plan in self.plans)

    def step(self) -> list[tuple[DecisionStump, float, RoundResult]]:
        """One round of every booster: the stump, its shrunk alpha and the round's result."""
        cleans = tuple(plan.state.clean for plan in self.plans)
        self.states = self.tasks.submit(
            blocks.reweight,
            self.training,
            self.states,
            updates=self._updates(),
            cleans=cleans,
            tau=self.tau,
            logistic=self.logistic,
        )
        parts = self.tasks.run(blocks.histograms, self.training, self.states)
        splits, grids = [], []
        for k, plan in enumerate(self.plans):
            hist, low, high = _combine_histograms([part[k] for part in parts])
            stump, _, position = best_binned_stump(hist, self.binner, plan.occupied)
            splits.append((stump, position))
            grids.append(KnotGrid.covering(low, high) if plan.compress else None)
        rows = self.tasks.run(
            blocks.round_rows, self.training, self.states, splits=tuple(splits), grids=tuple(grids)
        )
        out = []
        for k, plan in enumerate(self.plans):
            mine = [part[k] for part in rows]
            if grids[k] is not None:
                round_rows = RoundRows(*pseudo_rows(combine_knot_moments(mine), grids[k]))
            else:
                round_rows = RoundRows(
                    *(np.concatenate([part[i] for part in mine]) for i in range(4))
                )
            result = run_round(round_rows, plan.state, self.priors, plan.settings)
            # Shrinkage: H += learning_rate * alpha_t h_t (exactly alpha_t at rate 1).
            alpha = plan.learning_rate * result.alpha
            plan.state = result.state
            stump, position = splits[k]
            plan.pending = blocks.StumpUpdate(stump, position, alpha)
            out.append((stump, alpha, result))
        return out

    def out_of_fold(self, validation: list[np.ndarray]) -> np.ndarray:
        """The out-of-fold margins of every row (:func:`~viboost.dask.blocks.out_of_fold`),
        in row order; ``validation[b]`` is block ``b``'s (n_boosters, rows) validation mask."""
        parts = self.tasks.run(
            blocks.out_of_fold, self.training, self.states, validation, updates=self._updates()
        )
        return np.concatenate(parts)

    def finish(self) -> list:
        """Add the last stumps to the margins; return the blocks' final booster states."""
        self.states = self.tasks.submit(
            blocks.finish_boosters, self.training, self.states, updates=self._updates()
        )
        for plan in self.plans:
            plan.pending = None
        return self.states


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
