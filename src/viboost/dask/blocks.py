"""The worker side of a distributed fit: one block of training rows and what runs on it.

A distributed fit cuts the training rows into consecutive *blocks* whose sizes depend only on
the number of rows and features (:func:`block_sizes`), never on the input's partitions or the
number of workers. Each function here takes one block (numpy arrays, on a worker) and returns
either a new block state or a small summary (counts, a histogram, knot moments) that the client
reduces over the blocks in block order. Every formula is the in-memory engine's own:
:class:`~viboost.boosting.binning.FeatureBinner`,
:func:`~viboost.boosting.histogram.binned_histogram` (stumps), the node histograms and row
partition of :class:`~viboost.boosting.partition.RowPartition` (trees),
:class:`~viboost.boosting.reweighting.RowMargins`, the learners' own ``binned_outputs`` and
``leaf_index``, :func:`~viboost.variational.compression.knot_moments` and
:func:`~viboost.noise_fit.calibration.flip_rate_sums`; for K classes the boosters of each group
(a fold, or the refit) are coupled through the softmax as
:class:`~viboost.boosting.softmax.SoftmaxRows` couples them in memory
(:func:`reweight_classes`). Nothing is mutated in place but the
round's tree partitions (:class:`TreeRows`, split where they are, and given back to the block's
pool of temporaries once the round's rows are read), which record the steps they hold and
replay them when they do not hold what a task expects, and the boosters' cache of their roots'
counts (:attr:`BoosterRows.counts`, the same numbers whenever summed); so a task that dask runs
twice (after a worker is lost) gives the same result.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from viboost._utils.parallel import numba_threads
from viboost._utils.scratch import ScratchArrays
from viboost.boosting.binning import FeatureBinner, absent_values
from viboost.boosting.histogram import binned_histogram, occupied_bins
from viboost.boosting.learners import BaseLearner
from viboost.boosting.partition import (
    RowPartition,
    expand_together,
    partition_leaf_index,
    root_histograms,
)
from viboost.boosting.reweighting import RowMargins, ScaledWeights
from viboost.boosting.softmax import class_labels, other_class_margins
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.stumps import DecisionStump
from viboost.boosting.trees import HistogramTree
from viboost.fitting.task import Task
from viboost.noise_fit.calibration import flip_rate_sums, mislabel_proba_in_sample
from viboost.variational.compression import KnotGrid, knot_moments, knot_range
from viboost.variational.state import CleanLogOdds
from viboost.variational.updates import update_omega

if TYPE_CHECKING:  # (the splits the client's growth asks for: annotations only)
    from viboost.boosting.growth import Expansion

__all__ = [
    "BlockSummary",
    "BoosterRows",
    "LearnerUpdate",
    "TrainingBlock",
    "TreeRows",
    "absent_in_block",
    "block_sizes",
    "build_block",
    "class_margins",
    "class_out_of_fold",
    "counts_by_booster",
    "distinct_in_block",
    "expand_trees",
    "finish_boosters",
    "finish_classes",
    "histograms",
    "in_sample_noise",
    "knot_ranges",
    "labels_and_weights",
    "margins",
    "occupied_by_booster",
    "noise_weight_by_class",
    "on_blocks",
    "on_one_thread",
    "out_of_fold",
    "reweight",
    "reweight_classes",
    "round_rows",
    "same",
    "sample_block",
    "start_boosters",
    "start_trees",
    "summarize_block",
    "tree_roots",
]

#: Rows per block are at most this many bytes of binned features (uint8) ...
_BLOCK_BYTES = 1 << 23
#: ... and at least, and at most, this many rows.
_MIN_BLOCK_ROWS = 1 << 12
_MAX_BLOCK_ROWS = 1 << 20


def on_one_thread(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` with the compiled kernels on one thread: a worker runs one
    task per thread, and the serial kernels skip numba's thread launches (and the slower
    parallel compile)."""
    with numba_threads(1):
        return func(*args, **kwargs)


def on_blocks(func: Callable[..., Any], calls: list[tuple], **kwargs: Any) -> list:
    """``[func(*args, **kwargs) for args in calls]`` on one thread (:func:`on_one_thread`):
    one task for several blocks of a worker."""
    with numba_threads(1):
        return [func(*args, **kwargs) for args in calls]


def same(value: Any) -> Any:
    """``value`` itself (a task that moves a block to another worker)."""
    return value


def block_sizes(n_rows: int, n_features: int, block_size: int | None = None) -> tuple[int, ...]:
    """The rows of each block: ``block_size`` each, the last one shorter; by default as few
    blocks of at most 8 MiB of binned features (and at most 1,048,576 rows) as hold the data,
    their number rounded up to a multiple of 4 while the blocks keep at least 4096 rows (so
    that 2 or 4 workers get equal shares), the rows shared out as evenly as possible. They
    depend on the shape of the data only, so the fit's sums are the same for any partitioning
    and any number of workers."""
    if block_size is not None:
        full, rest = divmod(n_rows, block_size)
        return (block_size,) * full + ((rest,) if rest else ())
    if n_rows == 0:
        return ()
    cap = min(_MAX_BLOCK_ROWS, max(_MIN_BLOCK_ROWS, _BLOCK_BYTES // max(n_features, 1)))
    n_blocks = -(-n_rows // cap)
    if n_blocks > 1:
        n_blocks = max(n_blocks, min(-(-n_blocks // 4) * 4, n_rows // _MIN_BLOCK_ROWS))
    base, extra = divmod(n_rows, n_blocks)
    return (base + 1,) * extra + (base,) * (n_blocks - extra)


@dataclass(frozen=True, eq=False)
class BlockSummary:
    """What the client checks before any fitting: sizes, labels and the bad values of a block."""

    n_rows: int
    n_active: int
    total_weight: float
    labels: np.ndarray
    active_labels: np.ndarray
    infinite_features: int
    missing_labels: int
    bad_weights: int
    #: The number of rows of positive weight of each of ``active_labels``.
    active_counts: np.ndarray | None = None


def summarize_block(X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray) -> BlockSummary:
    """Sizes, distinct labels and counts of bad values (infinite features, missing labels,
    negative or non-finite weights) of one block."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).ravel()
    sample_weight = np.asarray(sample_weight, dtype=np.float64).ravel()
    missing = _missing_labels(y)
    active_labels, active_counts = np.unique(y[~missing & (sample_weight > 0)], return_counts=True)
    return BlockSummary(
        n_rows=int(X.shape[0]),
        n_active=int(np.count_nonzero(sample_weight > 0)),
        total_weight=float(sample_weight[np.isfinite(sample_weight)].sum()),
        labels=np.unique(y[~missing]),
        active_labels=active_labels,
        infinite_features=int(np.count_nonzero(np.isinf(X).any(axis=0))),
        missing_labels=int(np.count_nonzero(missing)),
        bad_weights=int(np.count_nonzero(~(np.isfinite(sample_weight) & (sample_weight >= 0)))),
        active_counts=active_counts,
    )


def _missing_labels(y: np.ndarray) -> np.ndarray:
    if y.dtype.kind == "f":
        return np.isnan(y)
    if y.dtype.kind == "O":
        return np.array([v is None or (isinstance(v, float) and v != v) for v in y], dtype=bool)
    return np.zeros(y.shape, dtype=bool)


def sample_block(X: np.ndarray, sample_weight: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The active rows of the block at ``ranks`` (their ranks among its active rows)."""
    rows = np.flatnonzero(np.asarray(sample_weight) > 0)[ranks]
    return np.asarray(X, dtype=np.float64)[rows]


def absent_in_block(
    X: np.ndarray, sample_weight: np.ndarray, features: np.ndarray, table: np.ndarray
) -> np.ndarray:
    """:func:`viboost.boosting.binning.absent_values` on the active rows of one block."""
    return absent_values(X, np.asarray(sample_weight) > 0, features, table)


def distinct_in_block(X: np.ndarray, sample_weight: np.ndarray, feature: int) -> np.ndarray:
    """Sorted distinct non-missing values of one feature over the active rows of a block."""
    column = np.asarray(X, dtype=np.float64)[np.asarray(sample_weight) > 0, feature]
    return np.unique(column[~np.isnan(column)])


@dataclass(frozen=True, eq=False)
class TrainingBlock:
    """One block of training rows as the rounds read it: the bins of its features (row-major
    ``uint8``), labels in {-1, +1} (for ``n_classes > 2``, class indices ``0..K-1``), sample
    weights and the bins by feature (C-contiguous ``(n_features, n_rows)``: the trees' splits
    read them; None: ``binned.T``). Each booster reads its own labels in {-1, +1}
    (``BoosterRows.margins.y``): ``y`` itself for two classes, class k against the rest for
    class k's boosters of a K-class fit."""

    binned: np.ndarray
    y: np.ndarray
    sample_weight: np.ndarray
    by_feature: np.ndarray | None = None
    n_classes: int = 2

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])


def build_block(
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray,
    binner: FeatureBinner,
    classes: np.ndarray,
    task: Task,
) -> TrainingBlock:
    """Bin a block of raw rows; its labels are the task's encoding of their index in
    ``classes`` (sorted), as :class:`viboost.VIBoostClassifier` encodes them."""
    y = np.asarray(y).ravel()
    binned = binner.transform(np.asarray(X, dtype=np.float64))
    return TrainingBlock(
        binned=binned,
        by_feature=np.ascontiguousarray(binned.T),
        y=task.encode(np.searchsorted(classes, y)),
        sample_weight=np.ascontiguousarray(sample_weight, dtype=np.float64).ravel(),
        n_classes=task.n_classes,
    )


@dataclass(frozen=True, eq=False)
class LearnerUpdate:
    """A round's base learner and its shrunk weight alpha."""

    learner: BaseLearner
    alpha: float

    @property
    def unit(self) -> bool:
        """Whether the learner's outputs are in {-1, +1} (not a tree with per-leaf values)."""
        return not getattr(self.learner, "per_leaf", False)


@dataclass(frozen=True, eq=False)
class BoosterRows:
    """One booster's state on one block: the margins ``H`` of every row (with the cache of
    :class:`~viboost.boosting.reweighting.RowMargins`), whose labels are the booster's and whose
    sample weights are its multiplicities (zero for rows it does not fit), and the last search
    weights. For K > 2 classes, ``f``: the margins ``F`` (shape ``(n_rows, K)``) of the
    booster's group, shared by its K boosters, whose ``H`` is then ``G_k`` of
    :func:`~viboost.boosting.softmax.other_class_margins` (never written in place)."""

    margins: RowMargins
    weights: ScaledWeights | None = None
    f: np.ndarray | None = None
    #: The count histogram of the booster's rows at a tree's root, under ``"root"``: the same
    #: rows and sample weights every round, so :func:`start_trees` sums it with the first tree
    #: and copies it into the later roots (a quarter of the root's pass; the same numbers, as
    #: the in-memory search does). The booster's later states share this dict.
    counts: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def active(self) -> np.ndarray:
        return self.margins.sample_weight > 0

    @property
    def search_weights(self) -> ScaledWeights:
        """``weights``, which every booster that searches has (:func:`reweight` sets them)."""
        weights = self.weights
        assert weights is not None, "the booster has no search weights (reweight first)"
        return weights


def start_boosters(
    block: TrainingBlock, multiplicities: np.ndarray | None, n_boosters: int = 1
) -> tuple[BoosterRows, ...]:
    """Boosters at ``H = 0``; ``multiplicities[k]`` are booster ``k``'s row weights (None: the
    sample weights, for every booster).

    For K > 2 classes (``block.n_classes``) each row of ``multiplicities`` is a group's
    (``n_boosters`` is then the number of boosters, K per group): its K boosters, booster
    ``g * K + k`` fitting class k against the rest, start at ``F = 0``, so ``H = G_k =
    -log(K - 1)``, as :class:`~viboost.boosting.softmax.SoftmaxRows` starts."""
    n_classes = block.n_classes
    if n_classes > 2:
        n_groups = n_boosters // n_classes if multiplicities is None else len(multiplicities)
        if multiplicities is None:
            multiplicities = np.broadcast_to(block.sample_weight, (n_groups, block.n_rows))
        labels = class_labels(block.y, n_classes)
        out: list[BoosterRows] = []
        for m in multiplicities:
            f = np.zeros((block.n_rows, n_classes))
            g = other_class_margins(f)
            weight = np.array(m, dtype=np.float64)
            out.extend(
                BoosterRows(RowMargins(labels[k], weight, g[:, k].copy()), f=f)
                for k in range(n_classes)
            )
        return tuple(out)
    if multiplicities is None:
        multiplicities = np.broadcast_to(block.sample_weight, (n_boosters, block.n_rows))
    return tuple(
        BoosterRows(RowMargins(block.y, np.array(m, dtype=np.float64), np.zeros(block.n_rows)))
        for m in multiplicities
    )


def occupied_by_booster(block: TrainingBlock, boosters: tuple[BoosterRows, ...]) -> np.ndarray:
    """Per booster, :func:`~viboost.boosting.histogram.occupied_bins` of its active rows."""
    n_features = block.binned.shape[1]
    out = np.zeros((len(boosters), n_features, 256), dtype=bool)
    for k, booster in enumerate(boosters):
        if block.n_rows:
            out[k] = occupied_bins(block.binned, booster.active)
    return out


def counts_by_booster(
    block: TrainingBlock, boosters: tuple[BoosterRows, ...], features: np.ndarray
) -> np.ndarray:
    """Per booster, its active rows in each bin of the listed ``features`` (the categorical
    ones, whose stump search needs them), shape ``(n_boosters, len(features), 256)``; whole
    numbers as floats, so that the blocks' counts add up exactly in any order."""
    columns = block.binned.T if block.by_feature is None else block.by_feature
    out = np.zeros((len(boosters), len(features), 256))
    for k, booster in enumerate(boosters):
        active = booster.active
        for i, j in enumerate(features):
            out[k, i] = np.bincount(columns[int(j)][active], minlength=256)
    return out


def _leaf_of(
    block: TrainingBlock, tree: HistogramTree, trees: TreeRows | None = None, k: int = 0
) -> np.ndarray:
    """The leaf of every row of the block in ``tree``: booster ``k``'s leaves that
    :func:`round_rows` kept in ``trees`` when they are this tree's, else from the bins."""
    leaf = None if trees is None else trees.leaves_of(k, tree)
    return tree.leaf_index(block.binned.T) if leaf is None else leaf


def _outputs(
    block: TrainingBlock, learner: BaseLearner, trees: TreeRows | None = None, k: int = 0
) -> np.ndarray:
    """``h(x_n)`` of the block's rows (for a tree, by each row's leaf: :func:`_leaf_of`)."""
    if isinstance(learner, HistogramTree):
        return learner.leaf_values[_leaf_of(block, learner, trees, k)]
    return learner.binned_outputs(block.binned.T)


def _with_update(
    margins: RowMargins,
    block: TrainingBlock,
    update: LearnerUpdate | None,
    trees: TreeRows | None = None,
    k: int = 0,
) -> np.ndarray:
    """The margins ``H + alpha h`` (a new array), as the next reweighting will add them."""
    if update is None:
        return margins.margin
    return margins.margin + update.alpha * _outputs(block, update.learner, trees, k)


def reweight(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows | None,
    updates: tuple[LearnerUpdate | None, ...],
    cleans: tuple[CleanLogOdds, ...],
    tau: float,
    logistic: bool,
) -> tuple[BoosterRows, ...]:
    """New boosters: ``H += alpha h`` for each update (None: none yet; ``trees``: the trees of
    the updates' round, whose leaves :func:`round_rows` kept, or None), and the search
    weights under q(w) ``cleans[k]`` (:meth:`RowMargins.add`)."""
    out = []
    for k, (booster, update, clean) in enumerate(zip(boosters, updates, cleans, strict=True)):
        margins = booster.margins.copy()
        if update is None:
            weights = margins.scaled_weights(clean, tau, logistic)
        elif isinstance(update.learner, HistogramTree) and update.learner.per_leaf:
            # As InMemoryRows.add: by leaf.
            leaf = _leaf_of(block, update.learner, trees, k)
            values = update.learner.leaf_values
            weights = margins.add(update.alpha, values, clean, tau, logistic, False, leaf)
        else:
            h = _outputs(block, update.learner, trees, k)
            weights = margins.add(update.alpha, h, clean, tau, logistic, unit=update.unit)
        out.append(BoosterRows(margins, weights, counts=booster.counts))
    return tuple(out)


def _class_groups(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    updates: tuple[LearnerUpdate | None, ...],
    trees: TreeRows | None = None,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """K classes: per group, its margins ``F`` after the pending ``updates`` (a new array, or
    the group's own when it has none) and the new ``G`` (None when there was no update).

    The arithmetic of :meth:`~viboost.boosting.softmax.SoftmaxRows.add`: each class's binary
    margins move to ``G_k + alpha h`` (as :meth:`~viboost.boosting.reweighting.RowMargins.add`
    adds it), ``F_k`` by the same step, ``F_k += (G_k + alpha h) - G_k``; then every ``G_k``
    from the new ``F``."""
    n_classes = block.n_classes
    out: list[tuple[np.ndarray, np.ndarray | None]] = []
    for start in range(0, len(boosters), n_classes):
        group = boosters[start : start + n_classes]
        moves = updates[start : start + n_classes]
        f = group[0].f
        assert f is not None, "K-class boosters hold their group's F"
        if all(update is None for update in moves):
            out.append((f, None))
            continue
        f = f.copy()
        for k, (booster, update) in enumerate(zip(group, moves, strict=True)):
            if update is not None:
                before = booster.margins.margin
                step = _with_update(booster.margins, block, update, trees, start + k)
                f[:, k] += step - before
        out.append((f, other_class_margins(f)))
    return out


def reweight_classes(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows | None,
    updates: tuple[LearnerUpdate | None, ...],
    cleans: tuple[CleanLogOdds, ...],
    tau: float,
    logistic: bool,
) -> tuple[BoosterRows, ...]:
    """:func:`reweight` for K > 2 classes: each group's ``F`` after the updates, every class's
    margins reset to ``G_k`` of the new ``F``, and the search weights under q(w) ``cleans[k]``
    (:class:`~viboost.boosting.softmax.SoftmaxRows`, whose arithmetic this repeats row by
    row)."""
    n_classes = block.n_classes
    out = []
    for g, (f, g_new) in enumerate(_class_groups(block, boosters, updates, trees)):
        for k in range(n_classes):
            booster = boosters[g * n_classes + k]
            if g_new is None:
                margins = booster.margins.copy()
            else:
                margins = RowMargins(booster.margins.y, booster.margins.sample_weight, g_new[:, k])
            clean = cleans[g * n_classes + k]
            weights = margins.scaled_weights(clean, tau, logistic)
            out.append(BoosterRows(margins, weights, f, counts=booster.counts))
    return tuple(out)


def finish_classes(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows | None,
    updates: tuple[LearnerUpdate | None, ...],
) -> tuple[BoosterRows, ...]:
    """:func:`finish_boosters` for K > 2 classes: each group's ``F`` and ``G`` with the last
    learners added, without weights."""
    n_classes = block.n_classes
    out = []
    for g, (f, g_new) in enumerate(_class_groups(block, boosters, updates, trees)):
        for k in range(n_classes):
            margins = boosters[g * n_classes + k].margins
            if g_new is not None:
                margins = RowMargins(margins.y, margins.sample_weight, g_new[:, k])
            out.append(BoosterRows(margins, None, f))
    return tuple(out)


def class_margins(boosters: tuple[BoosterRows, ...], group: int, n_classes: int) -> np.ndarray:
    """K classes: group ``group``'s margins ``F`` of the block's rows, shape (n_rows, K)."""
    f = boosters[group * n_classes].f
    assert f is not None, "K-class boosters hold their group's F"
    return f


def class_out_of_fold(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    validation: np.ndarray,
    trees: TreeRows | None,
    updates: tuple[LearnerUpdate | None, ...],
) -> np.ndarray:
    """:func:`out_of_fold` for K > 2 classes: row ``i`` gets ``F`` (after the pending
    ``updates``) of the last group ``g`` with ``validation[g, i]``, shape (n_rows, K); 0 for
    rows in no validation fold."""
    out = np.zeros((block.n_rows, block.n_classes))
    groups = _class_groups(block, boosters, updates, trees)
    for (f, _), rows in zip(groups, validation, strict=True):
        out[rows] = f[rows]
    return out


def _knots(booster: BoosterRows, block: TrainingBlock) -> tuple[float, float]:
    """The range of the knots ``-y H`` over the booster's active rows."""
    margins = booster.margins
    if margins.knot_range is not None:
        return margins.knot_range
    return knot_range(margins.y, margins.margin, margins.sample_weight)


def knot_ranges(
    block: TrainingBlock, boosters: tuple[BoosterRows, ...]
) -> list[tuple[float, float]]:
    """Per booster, the range of the knots ``-y H`` over its active rows (a round that needs
    no search: the intercept)."""
    return [_knots(booster, block) for booster in boosters]


def histograms(
    block: TrainingBlock, boosters: tuple[BoosterRows, ...]
) -> list[tuple[np.ndarray, float, float, tuple[float, float]]]:
    """Per booster: the histogram of its (scaled) weights over the block's bins, the log of
    the scale, the total of the scaled weights and the range of the knots ``-y H`` over its
    active rows."""
    out = []
    for booster in boosters:
        weights = booster.search_weights
        active = booster.active
        hist = binned_histogram(block.binned, weights.values, booster.margins.y, active)
        out.append((hist, weights.log_scale, weights.total, _knots(booster, block)))
    return out


class TreeRows:
    """The trees of a round on one block, one per booster: each booster's active rows
    partitioned by node (:meth:`~viboost.boosting.partition.RowPartition.stacked`, all boosters'
    rows in one array, so that a step splits and histograms the nodes of every tree in one
    pass), the expansions applied to them, and per booster the root's histogram, the log of
    the block's scale, the total of its scaled weights and its knot range.

    It is the one state that a task changes in place (:func:`expand_trees` splits the
    partitions where they are, instead of copying the block's rows every step, and
    :func:`round_rows` gives their arrays back to the block's pool); ``applied`` says which
    steps it holds, so a task that finds other steps applied, or none (dask ran it twice, or
    moved an older copy of the state to another worker), rebuilds the partitions from the
    boosters and replays the steps: its result depends on its arguments only.
    """

    def __init__(
        self,
        partitions: list[RowPartition],
        roots: tuple[tuple[tuple[np.ndarray], float, float, tuple[float, float]], ...],
    ) -> None:
        self.partitions = partitions
        self.roots = roots
        #: The steps of expansions applied to ``partitions`` (None while one is applied).
        self.applied: tuple | None = ()
        #: The grown trees and, per booster, the leaf of every row of the block
        #: (:func:`round_rows`), for the next pass that adds the trees to the margins.
        self.leaves: tuple[tuple[BaseLearner, ...], list[np.ndarray]] | None = None

    def leaves_of(self, k: int, tree: BaseLearner) -> np.ndarray | None:
        """Booster ``k``'s leaf of every row if :func:`round_rows` kept them for a tree of the
        same structure as ``tree`` (its leaf values may differ), else None."""
        if self.leaves is None:
            return None
        trees, leaves = self.leaves
        if k >= len(trees) or not _same_structure(trees[k], tree):
            return None
        return leaves[k]


#: The fields of a tree's nodes that fix where its rows go (:func:`_same_structure`).
_STRUCTURE = (
    "feature",
    "bin_threshold",
    "missing_left",
    "left",
    "right",
    "is_leaf",
    "is_categorical",
    "left_categories",
)


def _same_structure(a: BaseLearner, b: BaseLearner) -> bool:
    """Whether two trees route every row to the same leaf (the same splits, node by node:
    numeric ones by their bin, categorical ones by their sets of categories)."""
    nodes_a, nodes_b = getattr(a, "nodes", None), getattr(b, "nodes", None)
    if nodes_a is None or nodes_b is None or nodes_a.shape != nodes_b.shape:
        return False
    return all(np.array_equal(nodes_a[name], nodes_b[name]) for name in _STRUCTURE)


#: Per training block, the pool of its trees' temporaries (viboost._utils.scratch): the rows'
#: statistics in partition order, the partitions' buffers and the histograms' partial sums,
#: taken by :func:`_partitions` and :func:`expand_trees` and given back once a round's rows
#: are read (:func:`round_rows`), so that the next round reuses them instead of faulting in
#: fresh pages (measured on the 2-core AMD EPYC VM, 100 31-leaf trees on 10^6 rows, 2 workers:
#: 78,000-222,000 page faults and 1.0-1.5 s of system time a worker without it). Kept beside
#: the block, not in it, so that a block moved to another worker travels without it. A block's
#: tree tasks run one after another (each takes the last one's state), so one pool a block.
_POOLS: weakref.WeakKeyDictionary[TrainingBlock, ScratchArrays] = weakref.WeakKeyDictionary()


def _pool(block: TrainingBlock) -> ScratchArrays:
    """The block's pool of temporaries (:data:`_POOLS`)."""
    pool = _POOLS.get(block)
    if pool is None:
        pool = _POOLS[block] = ScratchArrays()
    return pool


def _release(trees: TreeRows) -> None:
    """Give the round's partitions back to their pool (the round's rows are read); a later
    task on ``trees`` rebuilds them (:func:`_replay`)."""
    for partition in trees.partitions:
        partition.release()
    for partition in trees.partitions:
        partition.release_rows()
    trees.partitions = []
    trees.applied = None


def _histograms_out(partitions: list[RowPartition], n_nodes: int) -> np.ndarray:
    """Fresh arrays for the histograms of ``n_nodes`` nodes of ``partitions`` (they leave the
    block, so not from its pool)."""
    first = partitions[0]
    return np.empty((n_nodes, first.binned.shape[1], first.n_slots, 3))


def _partitions(
    block: TrainingBlock, boosters: tuple[BoosterRows, ...], settings: TreeSettings
) -> list[RowPartition]:
    """Per booster, its active rows at the root of a partition (stacked), with the
    statistics of ``settings``' split score under its search weights
    (:meth:`~viboost.boosting.split_statistics.TreeSettings.row_statistics`, linear in the
    weights, so in the block's scale); a row counts towards ``min_samples_leaf`` as its sample
    weight, as in memory. The arrays come from the block's pool (:data:`_POOLS`)."""
    pool = _pool(block)
    rows = [np.flatnonzero(booster.active) for booster in boosters]
    stats = pool.take((sum(r.size for r in rows), 3))
    at = 0
    for booster, mine in zip(boosters, rows, strict=True):
        settings.row_statistics(
            mine, booster.search_weights.values, booster.margins.y, booster.margins.margin,
            block.sample_weight, stats[at : at + mine.size],
        )  # fmt: skip
        at += mine.size
    return RowPartition.stacked(block.binned, rows, stats, columns=block.by_feature, scratch=pool)


def start_trees(
    block: TrainingBlock, boosters: tuple[BoosterRows, ...], settings: TreeSettings
) -> TreeRows:
    """The round's trees on the block at their roots, with the roots' histograms (all
    boosters' in one pass)."""
    partitions = _partitions(block, boosters, settings)
    hists, counts = root_histograms(
        partitions,
        [booster.counts.get("root") for booster in boosters],
        out=_histograms_out(partitions, len(boosters)),
    )
    for booster, count in zip(boosters, counts, strict=True):
        booster.counts["root"] = count
    roots = tuple(
        (
            (hist,),
            booster.search_weights.log_scale,
            booster.search_weights.total,
            _knots(booster, block),
        )
        for hist, booster in zip(hists, boosters, strict=True)
    )
    return TreeRows(partitions, roots)


def tree_roots(
    trees: TreeRows,
) -> tuple[tuple[tuple[np.ndarray], float, float, tuple[float, float]], ...]:
    """Per booster: ``(root's histogram,)``, the log of the block's scale, the total of its
    scaled weights and its knot range."""
    return trees.roots


def expand_trees(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows,
    settings: TreeSettings,
    history: tuple[tuple[tuple[Expansion, ...], ...], ...],
) -> list[tuple[np.ndarray, ...]]:
    """Apply the last step of ``history`` (per booster, the nodes to split:
    :func:`~viboost.boosting.partition.expand_together`, every tree in one pass) to the trees
    holding the steps before it, and return per booster its smaller children's histograms.

    ``trees`` is split in place; if it does not hold exactly the earlier steps (a rerun), its
    partitions are rebuilt from ``boosters`` and those steps replayed first.
    """
    *before, step = history
    _replay(block, boosters, trees, settings, tuple(before))
    trees.applied = None
    n_nodes = sum(len(mine) for mine in step)
    hists = expand_together(
        trees.partitions, step, out=_histograms_out(trees.partitions, n_nodes) if n_nodes else None
    )
    trees.applied = tuple(history)
    return [tuple(mine) for mine in hists]


def _replay(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows,
    settings: TreeSettings,
    history: tuple,
) -> None:
    """Make ``trees`` hold exactly the steps ``history``: if it holds others (a rerun),
    rebuild its partitions from ``boosters`` and replay the steps."""
    if trees.applied != history:
        trees.applied = None
        trees.leaves = None
        trees.partitions = _partitions(block, boosters, settings)
        for done in history:
            expand_together(trees.partitions, done)
        trees.applied = history


def round_rows(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows | None,
    learners: tuple[BaseLearner, ...],
    grids: tuple[KnotGrid | None, ...],
    grown: tuple[TreeSettings, tuple, tuple[np.ndarray, ...]] | None = None,
) -> list[tuple[np.ndarray | tuple[np.ndarray, ...], np.ndarray]]:
    """Per booster, what its round's inference needs of the block for the learner
    ``learners[k]``, and the learner's covers on the block.

    For trees grown on ``trees`` (``grown``: the settings, the steps of expansions and per
    booster :meth:`~viboost.boosting.growth.TreeGrowth.node_positions`), each row's leaf comes
    from its node in the partition (:func:`~viboost.boosting.partition.partition_leaf_index`),
    and the leaves are kept in ``trees`` for the pass that adds the trees to the margins;
    otherwise the rows are routed by their bins.

    The first is the knot moments of :func:`~viboost.variational.compression.knot_moments` on
    ``grid`` (by leaf for a tree with per-leaf weights), or (grid None) the active rows
    themselves: ``(y, h, H, s)``, or ``(y, H, s, leaf)`` for per-leaf weights. The covers
    are the booster's multiplicities summed per leaf of a tree, or, for a stump, their total
    and the part on the side where ``h = polarity``.
    """
    if trees is not None and grown is not None:
        settings, history, positions = grown
        _replay(block, boosters, trees, settings, history)
    out: list[tuple[np.ndarray | tuple[np.ndarray, ...], np.ndarray]] = []
    leaves: list[np.ndarray] = []
    for k, (booster, learner, grid) in enumerate(zip(boosters, learners, grids, strict=True)):
        margins = booster.margins
        y, margin, weight = margins.y, margins.margin, margins.sample_weight
        leaf: np.ndarray | None = None
        part: np.ndarray | tuple[np.ndarray, ...]
        if isinstance(learner, HistogramTree):  # a tree: the leaf of every row
            if trees is not None and grown is not None:
                leaf = partition_leaf_index(
                    trees.partitions[k], learner, positions[k], block.binned.T,
                    np.flatnonzero(~booster.active),
                )  # fmt: skip
            else:
                leaf = learner.leaf_index(block.binned.T)
            leaves.append(leaf)
            covers = np.bincount(leaf, weights=weight, minlength=learner.n_leaves)
        if getattr(learner, "per_leaf", False):
            assert isinstance(learner, HistogramTree) and leaf is not None, "a tree's leaves"
            n_leaves = learner.n_leaves
            if grid is not None:
                part = knot_moments(y, np.ones_like(y), margin, weight, grid, leaf, n_leaves)
            else:
                act = booster.active
                part = (y[act], margin[act], weight[act], leaf[act])
        else:
            if leaf is None:  # a stump: the weight on its right side (h = polarity)
                assert isinstance(learner, DecisionStump), "a learner without leaves is a stump"
                h = _outputs(block, learner)
                side = h > 0 if learner.polarity > 0 else h < 0
                covers = np.array([weight.sum(), weight[side].sum()])
            else:
                assert isinstance(learner, HistogramTree), "a learner with leaves is a tree"
                h = learner.leaf_values[leaf]
            if grid is not None:
                part = knot_moments(y, h, margin, weight, grid)
            else:
                act = booster.active
                part = (y[act], h[act], margin[act], weight[act])
        out.append((part, covers))
    if trees is not None and len(leaves) == len(learners):
        trees.leaves = (tuple(learners), leaves)
    if trees is not None and grown is not None:
        _release(trees)
    return out


def finish_boosters(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    trees: TreeRows | None,
    updates: tuple[LearnerUpdate | None, ...],
) -> tuple[BoosterRows, ...]:
    """New boosters with the last learners added (``H += alpha h``), without weights."""
    out = []
    for k, (booster, update) in enumerate(zip(boosters, updates, strict=True)):
        margins = booster.margins.copy()
        margins.margin = _with_update(margins, block, update, trees, k)
        out.append(BoosterRows(margins))
    return tuple(out)


def margins(boosters: tuple[BoosterRows, ...], k: int = 0) -> np.ndarray:
    """Booster ``k``'s margins ``H`` of the block's rows."""
    return boosters[k].margins.margin


def out_of_fold(
    block: TrainingBlock,
    boosters: tuple[BoosterRows, ...],
    validation: np.ndarray,
    trees: TreeRows | None,
    updates: tuple[LearnerUpdate | None, ...],
) -> np.ndarray:
    """Out-of-fold margins of the block's rows after the pending ``updates``: row ``i`` gets
    booster ``k``'s margin for the last ``k`` with ``validation[k, i]`` (as the in-memory fit
    writes them, fold by fold), and 0 if it is in no validation fold."""
    out = np.zeros(block.n_rows)
    for k, (booster, update) in enumerate(zip(boosters, updates, strict=True)):
        rows = validation[k]
        out[rows] = _with_update(booster.margins, block, update, trees, k)[rows]
    return out


def in_sample_noise(
    block: TrainingBlock, boosters: tuple[BoosterRows, ...], clean: CleanLogOdds
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For an in-sample fit: phi_n under q(w) ``clean`` at the final margins, the probability
    that each label is wrong, ``(1 - phi_n) sigmoid(-y_n H_n)`` (a ranking), and the
    :func:`~viboost.noise_fit.calibration.flip_rate_sums` of the block."""
    margin = boosters[0].margins.margin
    phi = clean.proba(block.y, margin)
    mislabel = mislabel_proba_in_sample(phi, block.y, margin)
    return phi, mislabel, flip_rate_sums(mislabel, block.y, block.sample_weight)


def noise_weight_by_class(block: TrainingBlock, noise_proba: float) -> np.ndarray:
    """``[sum_{y=-1} s (1 - phi), sum_{y=+1} s (1 - phi)]`` at a constant phi (S.4.2 without
    the prior): the block's part of the initial omega."""
    noise = np.full(block.n_rows, noise_proba)
    return update_omega(block.y, block.sample_weight, noise, 0.0)


def labels_and_weights(block: TrainingBlock) -> tuple[np.ndarray, np.ndarray]:
    """The block's labels in {-1, +1} and its sample weights."""
    return block.y, block.sample_weight
