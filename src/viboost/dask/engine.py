"""The client side of a distributed fit: tasks on the blocks, and the blocks as a row source.

:class:`BlockTasks` submits one task per block of training rows (:mod:`viboost.dask.blocks`)
and waits for their results with a bound, turning a lost or silent cluster into a clear error.
:class:`BlockRows` is the :class:`~viboost.boosting.booster.RowSource` of a distributed fit: the
same :class:`~viboost.boosting.booster.Booster` as in memory runs its rounds over it (one
ensemble for an in-sample fit or the refit of a cross-fitted one, one per fold while
cross-fitting, all stepped together, so every pass below serves all of them). A round is:

1. **search**: each block adds the previous round's learners and computes its search weights;
   for **stumps** it returns their histogram over its bins, the client adds the histograms
   **in block order** and picks the stump (:func:`~viboost.boosting.stumps.best_binned_stump`):
   one pass. For **trees** the block returns the histogram of the root, keeps its rows
   partitioned by node, and the client grows each tree best-first
   (:class:`~viboost.boosting.growth.TreeGrowth`, the splits of
   :class:`~viboost.boosting.tree_search.TreeSearch`): each further pass sends the splits the growth
   needs and gets back, per block, the histograms of the smaller children (the larger ones
   are their parents' minus those), added in block order. The blocks split their partitions
   in place (:class:`~viboost.dask.blocks.TreeRows`, every ensemble's tree in one pass).
   Through the scheduler the growth speculates, splitting in one pass every node that may
   still split, so a tree costs about one pass per level (for 31 leaves, typically 9 to 12
   passes) instead of one per split; over direct connections
   (:class:`~viboost.dask.service.BlockService`), whose passes are cheaper, it splits the
   best-ranked few per pass (``BlockService.speculate``; children of earlier speculative
   splits included, so still about a pass per level), which are nearly always split anyway.
   The tree is the same either way. The first round of per-leaf trees, the
   intercept, needs no search (one pass for the knot ranges);
2. **round rows**: each block returns the knot moments of its rows for the learner (by leaf
   for per-leaf weights), or, for at most
   :data:`~viboost.variational.compression.COMPRESS_ABOVE` weighted rows in all, the rows
   themselves, and the learner's covers on its rows; the client combines them in block order
   into the round's rows, on which the booster runs :func:`~viboost.variational.run_round`.

A pass is one trip through the scheduler. The passes that return small results (histograms,
moments) run as one task per worker thread over that thread's blocks
(:meth:`BlockTasks.run_grouped`; :meth:`BlockTasks.place` spreads the blocks over the threads
by rows once), and the tasks that only update the blocks' states (reweighting, the trees'
roots) are submitted without waiting, so they ride on the next pass. So a round of 31-leaf
trees costs about 1 + 10 + 1 trips, and a round of stumps two.

For K > 2 classes the source holds one ensemble per class per group (a fold, or the refit),
ensemble ``g * K + k`` fitting class k against the rest, as
:class:`~viboost.boosting.softmax.SoftmaxRows` does in memory: the blocks keep each group's
margins ``F`` and, after every round, reset every class's margins to ``G_k`` of the new ``F``
(:func:`~viboost.dask.blocks.reweight_classes`); the passes above serve all of the ensembles.

The client's share of a pass (adding the blocks' histograms, the split search, combining the
moments) runs its compiled kernels on one thread
(:func:`~viboost._utils.parallel.numba_threads`): it is a few nodes' histograms between two
trips, and numba's OpenMP threads,
woken for it and spinning after it, took a core from the workers as they started the next pass
(measured on a 2-worker LocalCluster on 2 cores, 30 trees of 31 leaves on 10^6 rows: 8.5-9.6 s
against 10.9-11.2 s with two client threads, in alternating pairs; the split search itself 0.27
ms a call against 0.95).

So a round moves histograms, moments and scalars, and the rows, their bins and margins stay on
the workers. The blocks and the order of every reduction depend only on the shape of the data
(:func:`~viboost.dask.blocks.block_sizes`), so the fit is the same for any partitioning of the
input and any number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from viboost._utils.parallel import numba_threads
from viboost.boosting.binning import FeatureBinner
from viboost.boosting.growth import TreeGrowths, padded_thresholds
from viboost.boosting.learners import BaseLearner
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.stumps import best_binned_stump
from viboost.boosting.trees import HistogramTree, intercept_tree
from viboost.dask import blocks
from viboost.variational import RoundRows
from viboost.variational.compression import (
    COMPRESS_ABOVE,
    KnotGrid,
    combine_knot_moments,
    pseudo_rows,
    pseudo_rows_by_leaf,
)
from viboost.variational.state import CleanLogOdds

__all__ = ["BlockRows", "BlockScale", "BlockTasks"]


class BlockTasks:
    """Submit one task per block and gather the results, each wait bounded by ``timeout``."""

    #: Whether trees grow speculatively over these tasks (:class:`BlockRows`): a trip through
    #: the scheduler costs more than the histograms of the extra nodes.
    speculate = True

    def __init__(self, client: Any, timeout: float) -> None:
        self.client = client
        self.timeout = float(timeout)
        #: Per block, the worker thread that runs its grouped tasks (:meth:`place`): a
        #: ``(worker address, thread number)``; None: one task per block.
        self.homes: list[tuple[str, int]] | None = None

    def place(self, futures: list, sizes: Sequence[int]) -> list:
        """Spread the blocks ``futures`` (of ``sizes`` rows) over the workers' threads, the
        largest first, each to the thread with the fewest rows so far (a worker that already
        holds the block first), moving the blocks that land on another worker; return the
        blocks' futures and remember the threads for :meth:`run_grouped`."""
        from distributed import wait

        with self.client.as_current():
            wait(futures, timeout=self.timeout)
        threads = sorted(self.client.nthreads().items())
        slots = [(worker, t) for worker, n in threads for t in range(max(int(n), 1))]
        if not slots:
            return futures
        holders = self.client.who_has(futures)
        load = dict.fromkeys(slots, 0)
        homes: list[tuple[str, int]] = [slots[0]] * len(futures)
        for b in sorted(range(len(futures)), key=lambda b: (-sizes[b], b)):
            held = holders.get(futures[b].key, ())
            homes[b] = min(slots, key=lambda slot: (load[slot], slot[0] not in held))
            load[homes[b]] += sizes[b]
        out = list(futures)
        for b, (worker, _) in enumerate(homes):
            if worker not in holders.get(futures[b].key, ()):
                out[b] = self.client.submit(
                    blocks.same, futures[b], workers=[worker], allow_other_workers=True, pure=False
                )
        self.homes = homes
        return out

    def run_grouped(
        self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any
    ) -> list:
        """As :meth:`run`, but one task per worker thread of :meth:`place` runs ``func`` on
        each of its blocks in turn (fewer tasks for the scheduler); the results in block
        order. For functions of small results whose blocks' arguments sit on that worker."""
        n_blocks = len(per_block[0])
        if self.homes is None or len(self.homes) != n_blocks:
            return self.run(func, *per_block, **shared)
        groups: dict[tuple[str, int], list[int]] = {}
        for b, home in enumerate(self.homes):
            groups.setdefault(home, []).append(b)
        calls = list(zip(*per_block, strict=True))
        futures = [
            self.client.submit(
                blocks.on_blocks, func, [calls[b] for b in members], workers=[home[0]],
                allow_other_workers=True, pure=False, **shared,
            )
            for home, members in groups.items()
        ]  # fmt: skip
        out: list = [None] * n_blocks
        for members, results in zip(groups.values(), self.gather(futures), strict=True):
            for b, result in zip(members, results, strict=True):
                out[b] = result
        return out

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

    def scatter(self, value: Any) -> Any:
        """A block's argument, sent to the workers once (a future)."""
        return self.client.scatter(value)

    def finish(self, *outputs: list) -> list[list]:
        """The end of the rounds: ``outputs`` (lists of futures, one per block) as they are
        (:meth:`viboost.dask.service.BlockService.finish` turns its handles into futures)."""
        return list(outputs)


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
    tree : TreeSettings or None, default=None
        The trees' settings (:class:`~viboost.boosting.split_statistics.TreeSettings`); None:
        the base learners are decision stumps.
    n_classes : int, default=2
        More than 2: the blocks hold class indices (:func:`~viboost.dask.blocks.build_block`
        with ``classes``), ``multiplicities`` and ``validation`` have one row per group, and
        ``n_active`` one entry per ensemble (K per group); :meth:`margins` and
        :meth:`out_of_fold` return ``F``, shape (n_samples, K).
    """

    def __init__(
        self,
        tasks: BlockTasks,
        training: list,
        binner: FeatureBinner,
        n_active: list[int],
        multiplicities: list | None = None,
        validation: list | None = None,
        tree: TreeSettings | None = None,
        n_classes: int = 2,
    ) -> None:
        self.tasks = tasks
        self.n_classes = int(n_classes)
        self.training = training
        self.binner = binner
        self.validation = validation
        self.tree = tree
        # The splits' thresholds by (feature, bin), padded once for every tree's growth.
        self._thresholds = (
            None if tree is None else padded_thresholds(binner.thresholds_, binner.n_bins_)
        )
        n_ensembles = len(n_active)
        self.compress = [n > COMPRESS_ABOVE for n in n_active]
        per_block = [None] * len(training) if multiplicities is None else multiplicities
        self.states = tasks.submit(
            blocks.start_boosters, training, per_block, n_boosters=n_ensembles
        )
        self.occupied: list = [None] * n_ensembles
        #: Per ensemble, its rows per bin of every feature (the categorical stumps read those
        #: of the categorical features; zero for the others, as in memory); None: no
        #: categorical feature.
        self.counts: list = [None] * n_ensembles
        categorical = np.flatnonzero(getattr(binner, "is_categorical_", ()))
        if tree is None and categorical.size:
            # Which bins hold rows, and the rows per bin of the categorical features (whole
            # numbers: their sums over the blocks are exact in any order).
            occupied = np.any(tasks.run(blocks.occupied_by_booster, training, self.states), axis=0)
            counts = np.sum(
                tasks.run(blocks.counts_by_booster, training, self.states, features=categorical),
                axis=0,
            )
            self.occupied = list(occupied)
            for k in range(n_ensembles):
                full = np.zeros((binner.n_bins_.size, 256))
                full[categorical] = counts[k]
                self.counts[k] = full
        elif tree is None:  # the stump search skips bins that hold none of its rows
            self.occupied = list(
                np.any(tasks.run(blocks.occupied_by_booster, training, self.states), axis=0)
            )
        # The learners added last, applied to the blocks' margins by the next pass over them.
        self.pending: list[blocks.LearnerUpdate | None] = [None] * n_ensembles
        # The last round's trees on the blocks (TreeRows, which keep every row's leaf for the
        # pass that applies the pending learners; None for stumps and the intercept), and
        # what round_rows needs to read the leaves off their partitions.
        self._trees: list | None = None
        self._grown: tuple | None = None
        self._grids: list[KnotGrid | None] = []
        #: Round trips to the workers that grew the last round's trees (after the first pass).
        self.tree_trips = 0
        #: Which leaves a trip splits (``TreeGrowth``'s ``speculate``; the tasks say what a trip
        #: costs against the histograms of nodes split for nothing): True every leaf that
        #: may still split (a level per trip), an int ``m`` the best ``m``.
        self.speculate = getattr(tasks, "speculate", True)

    @property
    def fits_intercept(self) -> bool:
        """Whether a fit starts with the intercept (trees with per-leaf weights)."""
        return self.tree is not None and self.tree.per_leaf

    def start(self, cleans: Sequence[CleanLogOdds], tau: float, logistic: bool) -> None:
        self.cleans = tuple(cleans)
        self.tau, self.logistic = float(tau), bool(logistic)

    def _trees_of_blocks(self) -> list:
        """Per block, the last round's trees (None where there are none)."""
        return [None] * len(self.training) if self._trees is None else self._trees

    def _reweight(self) -> None:
        """Submit: apply the pending learners to the blocks' margins, and reweight."""
        self.states = self.tasks.submit(
            blocks.reweight if self.n_classes == 2 else blocks.reweight_classes,
            self.training,
            self.states,
            self._trees_of_blocks(),
            updates=tuple(self.pending),
            cleans=self.cleans,
            tau=self.tau,
            logistic=self.logistic,
        )
        self.pending = [None] * len(self.pending)

    def best(self, intercept: bool = False) -> list[BaseLearner]:
        """Apply the pending learners and reweight on the blocks; then each ensemble's learner:
        the stump from the blocks' histograms added in block order (one pass over the blocks),
        a tree grown from the blocks' node histograms (:meth:`_grow_trees`), or, with
        ``intercept``, the one-leaf tree (a pass for the knot ranges only)."""
        self._reweight()
        self._trees = self._grown = None
        with numba_threads(1):  # the client's share of a pass (see the module docstring)
            return self._best(intercept)

    def _best(self, intercept: bool) -> list[BaseLearner]:
        """:meth:`best` after the reweighting was submitted."""
        if intercept:
            parts = self.tasks.run_grouped(blocks.knot_ranges, self.training, self.states)
            self._grids = [
                _grid([part[k] for part in parts]) if compress else None
                for k, compress in enumerate(self.compress)
            ]
            return [intercept_tree() for _ in self.compress]
        if self.tree is not None:
            return list(self._grow_trees())
        parts = self.tasks.run_grouped(blocks.histograms, self.training, self.states)
        learners: list[BaseLearner] = []
        self._grids = []
        for k, occupied in enumerate(self.occupied):
            mine = [part[k] for part in parts]
            hist = _combine_histograms(mine)
            stump, _ = best_binned_stump(hist, self.binner, occupied, self.counts[k])
            learners.append(stump)
            self._grids.append(_grid([part[3] for part in mine]) if self.compress[k] else None)
        return learners

    def _grow_trees(self) -> list[HistogramTree]:
        """Each ensemble's tree, grown best-first (:class:`~viboost.boosting.growth.TreeGrowths`,
        all ensembles' trees together) from node histograms that the blocks compute over their
        rows (:func:`~viboost.dask.blocks.start_trees`,
        :func:`~viboost.dask.blocks.expand_trees`) and the client adds in block order; all
        ensembles share each trip. With ``speculate=True`` a trip splits every node that may still
        split, so a tree costs about one trip per level; with an int ``m`` (cheaper trips: direct
        connections) the best-ranked ``m`` of each tree
        (:class:`~viboost.boosting.growth.TreeGrowths`). The same trees either way."""
        settings, thresholds = self.tree, self._thresholds
        assert settings is not None and thresholds is not None, "stumps grow no trees"
        binner = self.binner
        trees = self.tasks.submit(blocks.start_trees, self.training, self.states, settings=settings)
        parts = self.tasks.run_grouped(blocks.tree_roots, trees)
        roots, priors, scales, self._grids = [], [], [], []
        for k, compress in enumerate(self.compress):
            mine = [part[k] for part in parts]
            scale = BlockScale.of(mine)
            roots.append(scale.combine([part[0][0] for part in mine]))
            priors.append(settings.prior(scale.unnormalised_total))
            scales.append(scale)
            self._grids.append(_grid([part[3] for part in mine]) if compress else None)
        growths = TreeGrowths(
            roots, binner.n_bins_, thresholds, settings, priors, speculate=self.speculate,
            is_categorical=getattr(binner, "is_categorical_", None),
        )  # fmt: skip
        self.tree_trips = 0
        history: tuple = ()
        while True:
            requests = tuple(tuple(mine) for mine in growths.requests())
            if not any(requests):
                break
            history += (requests,)
            parts = self.tasks.run_grouped(
                blocks.expand_trees,
                self.training,
                self.states,
                trees,
                settings=settings,
                history=history,
            )
            self.tree_trips += 1
            growths.expanded(
                [
                    [scales[k].combine([part[k][i] for part in parts]) for i in range(len(wanted))]
                    for k, wanted in enumerate(requests)
                ]
            )
        out = [
            HistogramTree(growths.tree(k)[0], settings.leaf_weights) for k in range(len(growths))
        ]
        self._trees = trees
        self._grown = (
            settings,
            history,
            tuple(growths.node_positions(k) for k in range(len(growths))),
        )
        return out

    def round_rows(
        self, learners: Sequence[BaseLearner]
    ) -> tuple[list[RoundRows], list[BaseLearner]]:
        """Each ensemble's round rows: the blocks' knot moments combined in block order into
        pseudo-rows (by leaf for per-leaf weights), or the rows themselves; and the learners
        with their training covers, summed over the blocks (one pass over the blocks)."""
        parts = self.tasks.run_grouped(
            blocks.round_rows,
            self.training,
            self.states,
            self._trees_of_blocks(),
            learners=tuple(learners),
            grids=tuple(self._grids),
            grown=self._grown,
        )
        with numba_threads(1):  # the client's share of a pass (see the module docstring)
            return self._combine_round_rows(learners, parts)

    def _combine_round_rows(
        self, learners: Sequence[BaseLearner], parts: list
    ) -> tuple[list[RoundRows], list[BaseLearner]]:
        """:meth:`round_rows` from the blocks' parts."""
        out, covered = [], []
        for k, (learner, grid) in enumerate(zip(learners, self._grids, strict=True)):
            mine = [part[k][0] for part in parts]
            covers = _sum_in_order([part[k][1] for part in parts])
            per_leaf = getattr(learner, "per_leaf", False)
            if grid is not None:
                moments = combine_knot_moments(mine)
                if per_leaf:
                    assert isinstance(learner, HistogramTree), "per-leaf weights are a tree's"
                    y_p, h_p, margin_p, weight_p, leaf = pseudo_rows_by_leaf(moments, grid)
                    offsets = _leaf_offsets(leaf, learner.n_leaves)
                    out.append(RoundRows(y_p, h_p, margin_p, weight_p, offsets))
                else:
                    out.append(RoundRows(*pseudo_rows(moments, grid)))
            elif per_leaf:
                assert isinstance(learner, HistogramTree), "per-leaf weights are a tree's"
                y, margin, weight, leaf = (
                    np.concatenate([part[i] for part in mine]) for i in range(4)
                )
                order = np.argsort(leaf, kind="stable")
                out.append(
                    RoundRows(
                        y[order], np.ones(order.size), margin[order], weight[order],
                        _leaf_offsets(leaf, learner.n_leaves),
                    )
                )  # fmt: skip
            else:
                out.append(
                    RoundRows(*(np.concatenate([part[i] for part in mine]) for i in range(4)))
                )
            if not hasattr(learner, "leaf_index"):  # a stump: (total, right side's weight)
                total, right = covers
                covers = np.array([total - right, right])
            covered.append(learner.with_covers(covers))
        return out, covered

    def add(
        self,
        learners: Sequence[BaseLearner],
        alphas: Sequence[float],
        cleans: Sequence[CleanLogOdds],
    ) -> None:
        """Record ``H += alpha h`` and the new q(w); the blocks apply them in the next pass."""
        self.pending = [
            blocks.LearnerUpdate(learner, float(alpha))
            for learner, alpha in zip(learners, alphas, strict=True)
        ]
        self.cleans = tuple(cleans)

    def finish(self) -> list:
        """Apply the pending learners to the blocks' margins; return the blocks' states."""
        finish = blocks.finish_boosters if self.n_classes == 2 else blocks.finish_classes
        self.states = self.tasks.submit(
            finish, self.training, self.states, self._trees_of_blocks(),
            updates=tuple(self.pending),
        )  # fmt: skip
        self.pending = [None] * len(self.pending)
        return self.states

    def margins(self, k: int = 0) -> np.ndarray:
        """Ensemble ``k``'s margins of every row, gathered in row order; for K > 2 classes,
        group ``k``'s margins ``F``, shape (n_samples, K)."""
        if self.n_classes > 2:
            parts = self.tasks.run(
                blocks.class_margins, self.finish(), group=k, n_classes=self.n_classes
            )
            return np.concatenate(parts)
        return np.concatenate(self.tasks.run(blocks.margins, self.finish(), k=k))

    def out_of_fold(self) -> np.ndarray:
        """The out-of-fold margins of every row (:func:`~viboost.dask.blocks.out_of_fold`), in
        row order; 0 for rows no ensemble holds out. For K > 2 classes, ``F`` of the last group
        that holds each row out (:func:`~viboost.dask.blocks.class_out_of_fold`)."""
        assert self.validation is not None, "out-of-fold margins need the validation rows"
        parts = self.tasks.run(
            blocks.out_of_fold if self.n_classes == 2 else blocks.class_out_of_fold,
            self.training,
            self.states,
            self.validation,
            self._trees_of_blocks(),
            updates=tuple(self.pending),
        )
        return np.concatenate(parts)


def _combine_histograms(
    parts: list[tuple[np.ndarray, float, float, tuple[float, float]]],
) -> np.ndarray:
    """The normalised histogram of all blocks' weights (added in block order, each block's
    scale brought to the largest)."""
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
    return hist


def _grid(knots: list[tuple[float, float]]) -> KnotGrid:
    """The knot grid that covers every block's knot range."""
    return KnotGrid.covering(min(low for low, _ in knots), max(high for _, high in knots))


def _sum_in_order(parts: list[np.ndarray]) -> np.ndarray:
    """The sum of the blocks' arrays, in block order."""
    total = np.array(parts[0], dtype=np.float64)
    for part in parts[1:]:
        total += part
    return total


def _leaf_offsets(leaf: np.ndarray, n_leaves: int) -> np.ndarray:
    """Start of each leaf's rows once sorted by leaf, and the end: ``n_leaves + 1`` offsets."""
    counts = np.bincount(leaf, minlength=n_leaves)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


@dataclass(frozen=True)
class BlockScale:
    """How the blocks' node histograms of one ensemble's round combine: each block's search
    weights are known up to its own factor ``exp(log_scale)``; the blocks' statistics are
    brought to the largest factor and divided by the total, so that the weights sum to one
    (the row counts are added as they are)."""

    factors: np.ndarray
    total: float
    log_top: float

    @classmethod
    def of(cls, parts: list[tuple]) -> BlockScale:
        """From the blocks' ``(hists, log_scale, total, knots)``, in block order."""
        weighted = [part for part in parts if part[2] > 0.0]
        if not weighted:
            raise ValueError("no row carries weight: no tree can be grown")
        top = max(part[1] for part in weighted)
        factors = np.array(
            [np.exp(part[1] - top) if part[2] > 0.0 else 0.0 for part in parts], dtype=np.float64
        )
        total = 0.0
        for part, factor in zip(parts, factors, strict=True):
            if part[2] > 0.0:
                total += part[2] * factor
        return cls(factors, float(total), float(top))

    @property
    def unnormalised_total(self) -> float:
        """The weights' sum before normalisation (the prior's units)."""
        with np.errstate(over="ignore"):
            return self.total * float(np.exp(self.log_top))

    def combine(self, hists: list[np.ndarray]) -> np.ndarray:
        """The histogram of all blocks' rows, added in block order: from 0, each block's two
        statistics times its factor (as they are where it is 1, none where it is 0) and its
        counts, then the statistics divided by the total (one compiled pass per block: a
        tenth of the time of the same operations on numpy's strided views, and the same
        bits)."""
        if len(hists) != self.factors.size:
            raise ValueError(f"{len(hists)} histograms for {self.factors.size} blocks")
        out = np.empty(np.shape(hists[0]))  # C order, whatever the first one's layout
        flat = out.reshape(-1, 3)
        for b, (hist, factor) in enumerate(zip(hists, self.factors, strict=True)):
            part = np.ascontiguousarray(hist, dtype=np.float64).reshape(-1, 3)
            _add_scaled(flat, part, float(factor), b == 0)
        _normalise(flat, self.total)
        return out


@numba.njit(cache=True)
def _add_scaled(out, hist, factor, first):  # pragma: no cover - compiled
    """``out`` (``(m, 3)``; any values if ``first``, else the sums so far) plus ``hist``: its
    first two columns times ``factor`` (as they are where it is 1, not at all where it is 0),
    its third as it is. Element by element the operations of ``out[:, :2] += hist[:, :2] *
    factor`` and ``out[:, 2] += hist[:, 2]`` starting from zeros."""
    for e in range(out.shape[0]):
        if first:
            a, b, c = 0.0, 0.0, 0.0
        else:
            a, b, c = out[e, 0], out[e, 1], out[e, 2]
        if factor > 0.0:
            if factor != 1.0:
                a += hist[e, 0] * factor
                b += hist[e, 1] * factor
            else:
                a += hist[e, 0]
                b += hist[e, 1]
        out[e, 0] = a
        out[e, 1] = b
        out[e, 2] = c + hist[e, 2]


@numba.njit(cache=True)
def _normalise(out, total):  # pragma: no cover - compiled
    """The first two columns of ``out`` (``(m, 3)``) divided by ``total``."""
    for e in range(out.shape[0]):
        out[e, 0] /= total
        out[e, 1] /= total
