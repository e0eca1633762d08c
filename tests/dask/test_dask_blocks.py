"""viboost.dask.blocks and the engine's row source: the blocks' sizes, each block function
against the in-memory computation on the same rows, the tree growth from node histograms
(:mod:`viboost.boosting.growth`) against :class:`~viboost.boosting.tree_search.TreeSearch`, and
:class:`~viboost.dask.engine.BlockRows` driving a booster over blocks held in this process (the
functions take numpy arrays; no cluster needed)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import numba
import numpy as np
import pytest

from viboost._utils.parallel import max_threads, numba_threads
from viboost.boosting.binning import FeatureBinner
from viboost.boosting.booster import Booster, InMemoryRows
from viboost.boosting.growth import TreeGrowth
from viboost.boosting.partition import RowPartition, grow
from viboost.boosting.reweighting import search_weights
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.stumps import BinnedStumpSearch, DecisionStump, best_binned_stump
from viboost.boosting.tree_search import TreeSearch
from viboost.boosting.trees import HistogramTree, intercept_tree
from viboost.dask import blocks
from viboost.dask.engine import BlockRows
from viboost.fitting.task import BinaryTask, make_task
from viboost.noise_fit.calibration import flip_rate_sums
from viboost.variational import ModelPriors, RoundRows, RoundSettings, initial_state
from viboost.variational.compression import KnotGrid, knot_moments
from viboost.variational.state import CleanLogOdds

#: The fields of a node that fix a tree's structure (compared exactly).
STRUCTURE = ("feature", "bin_threshold", "threshold", "missing_left", "left", "right", "is_leaf")


@pytest.mark.parametrize(
    ("n_rows", "n_features", "block_size", "want"),
    [
        (10, 3, 4, (4, 4, 2)),
        (8, 3, 4, (4, 4)),
        (0, 3, 4, ()),
        (10_000, 50, None, (10_000,)),
        (1_000_000, 20, None, (250_000,) * 4),  # 3 blocks of 8 MiB, rounded up to 4
        (3_000_000, 64, None, (125_000,) * 24),
        (1_000_003, 20, None, (250_001,) * 3 + (250_000,)),
        (100_000, 100_000, None, (4000,) * 25),  # 25 blocks: 28 would be under 4096 rows
        (5_000, 100_000, None, (2500, 2500)),
    ],
)
def test_block_sizes_depend_on_the_shape_only(n_rows, n_features, block_size, want):
    assert blocks.block_sizes(n_rows, n_features, block_size) == want


#: Labels -1.0 / +1.0 as blocks of a two-class fit: their classes and task.
_BINARY = (np.array([-1.0, 1.0]), BinaryTask())


def _block(seed: int = 0, n: int = 300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.05] = np.nan
    y = np.where(X[:, 0] > 0, "yes", "no").astype(object)
    weight = rng.random(n) * (rng.random(n) < 0.9)
    binner = FeatureBinner(max_bins=32).fit(X, weight > 0)
    classes = np.array(["no", "yes"], dtype=object)
    return X, y, weight, binner, blocks.build_block(X, y, weight, binner, classes, BinaryTask())


def test_summary_counts_bad_values_and_labels():
    X, y, weight, _, _ = _block()
    y = y.copy()
    y[3] = None
    X = X.copy()
    X[5, 2] = np.inf
    weight = weight.copy()
    weight[7] = -1.0
    summary = blocks.summarize_block(X, y, weight)
    assert summary.n_rows == 300
    assert summary.missing_labels == 1
    assert summary.infinite_features == 1
    assert summary.bad_weights == 1
    assert list(summary.labels) == ["no", "yes"]


def test_built_block_holds_bins_signed_labels_and_weights():
    X, y, weight, binner, block = _block()
    np.testing.assert_array_equal(block.binned, binner.transform(X))
    np.testing.assert_array_equal(block.y, np.where(y == "yes", 1.0, -1.0))
    np.testing.assert_array_equal(block.sample_weight, weight)


def test_a_round_on_a_block_matches_the_in_memory_search_and_reweighting():
    X, y, weight, binner, block = _block(1)
    search = BinnedStumpSearch(X, active=weight > 0, max_bins=32)
    clean = CleanLogOdds.from_point_estimates(0.85, 0.2)
    (booster,) = blocks.reweight(
        block, blocks.start_boosters(block, None), None, (None,), (clean,), 1.0, True
    )
    ((hist, log_scale, total, knots),) = blocks.histograms(block, (booster,))
    weights = search_weights(block.y, np.zeros(300), weight, clean, 1.0, True)
    stump, _ = search.best(weights, block.y)
    occupied = blocks.occupied_by_booster(block, (booster,))[0]
    got, _ = best_binned_stump(hist / total, binner, occupied)
    assert got == stump
    stump = got  # the stump with its split bin
    assert knots == (0.0, 0.0)
    # The stump's outputs from the bins are stump.predict on the raw values.
    update = blocks.LearnerUpdate(stump, 0.4)
    (((y_rows, h_rows, margin_rows, s_rows), covers),) = blocks.round_rows(
        block, (booster,), None, (stump,), (None,)
    )
    active = weight > 0
    np.testing.assert_array_equal(h_rows, stump.predict(X)[active])
    np.testing.assert_array_equal(s_rows, weight[active])
    # The covers: the total multiplicity and the part on the stump's right side.
    right = stump.predict(X) == stump.polarity
    np.testing.assert_allclose(covers, [weight.sum(), weight[right].sum()], rtol=1e-14)
    (finished,) = blocks.finish_boosters(block, (booster,), None, (update,))
    np.testing.assert_array_equal(finished.margins.margin, 0.4 * stump.predict(X))
    assert booster.margins.margin.max() == 0.0  # the old state is untouched


def test_out_of_fold_takes_each_rows_last_validation_fold_after_the_pending_stumps():
    X, y, weight, binner, block = _block(2, n=6)
    boosters = blocks.start_boosters(block, np.ones((2, 6)))
    stump = DecisionStump(0, -np.inf, 1, True, split_bin=-1)  # h = +1 everywhere
    updates = (blocks.LearnerUpdate(stump, 0.5), blocks.LearnerUpdate(stump, 2.0))
    validation = np.array([[1, 1, 0, 0, 1, 0], [0, 1, 1, 0, 0, 0]], dtype=bool)
    got = blocks.out_of_fold(block, boosters, validation, None, updates)
    np.testing.assert_array_equal(got, [0.5, 2.0, 2.0, 0.0, 0.5, 0.0])


def test_in_sample_noise_of_a_block():
    X, y, weight, binner, block = _block(3)
    boosters = blocks.start_boosters(block, None)
    clean = CleanLogOdds.from_point_estimates(0.7, -0.4)
    phi, mislabel, sums = blocks.in_sample_noise(block, boosters, clean)
    np.testing.assert_allclose(phi, clean.proba(block.y, np.zeros(300)))
    np.testing.assert_allclose(mislabel, (1 - phi) * 0.5)
    np.testing.assert_allclose(sums, flip_rate_sums(mislabel, block.y, weight))
    omega_part = blocks.noise_weight_by_class(block, 0.25)
    np.testing.assert_allclose(
        omega_part, [0.25 * weight[block.y < 0].sum(), 0.25 * weight[block.y > 0].sum()]
    )


# --- Trees ---------------------------------------------------------------------------------------


def _tree_data(seed: int = 0, n: int = 3000):
    """An interaction with noise (trees of many leaves), missing values and an integer column."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 3] = rng.integers(0, 6, n)
    X[rng.random((n, 5)) < 0.04] = np.nan
    clean = np.nan_to_num(X)
    score = clean[:, 0] * clean[:, 1] + 0.5 * clean[:, 2] - 0.2 * clean[:, 3]
    y = np.where(score + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize(
    ("leaf_weights", "criterion", "max_leaf_nodes", "max_depth"),
    [
        ("per-leaf", "newton", 31, None),
        ("per-leaf", "smoothed", 12, 3),
        ("tied", "error", 31, None),
    ],
)
@pytest.mark.parametrize("speculate", [False, True, 3])
def test_growth_from_node_histograms_is_the_tree_search(
    leaf_weights, criterion, max_leaf_nodes, max_depth, speculate
):
    """TreeGrowth over a RowPartition grows TreeSearch's tree: bit for bit without speculation
    (the same histograms, the same splits in the same order); speculating, the same splits,
    with the sums of more leaves taken from their parents' splits (leaves it never needed to
    split; without speculation only the children of the last split and of nodes whose children
    cannot split). ``speculate=3``: at most the best three leaves a trip."""
    X, y = _tree_data()
    rng = np.random.default_rng(1)
    active = rng.random(y.size) < 0.9
    margin = rng.normal(0.0, 0.5, y.size)
    raw = np.where(active, rng.uniform(0.1, 1.0, y.size), 0.0)
    total = raw.sum()
    weights = raw / total
    search = TreeSearch(
        X, active=active, max_leaf_nodes=max_leaf_nodes, max_depth=max_depth,
        min_samples_leaf=15, leaf_weights=leaf_weights, criterion=criterion,
    )  # fmt: skip
    want, want_error = search.best(weights.copy(), y, margin, total)
    settings = TreeSettings(max_leaf_nodes, max_depth, 15, leaf_weights, criterion, 1.0)
    first, second = settings.statistics(weights, y, margin)
    counts = active.astype(np.float64)
    partition = RowPartition(search.binned_, np.flatnonzero(active), first, second, counts)
    binner = search.binner_
    growth = TreeGrowth(
        partition.histogram(), binner.n_bins_, binner.thresholds_, settings,
        settings.prior(total), speculate=speculate,
    )  # fmt: skip
    trips = []
    grow(growth, lambda requests: trips.append(len(requests)) or partition.expand(requests))
    nodes, error = growth.tree()
    got = HistogramTree(nodes, leaf_weights)
    assert got.n_leaves == want.n_leaves > 2
    for name in want.nodes.dtype.names:
        if speculate and name == "value":
            np.testing.assert_allclose(got.nodes[name], want.nodes[name], rtol=1e-12)
        else:
            np.testing.assert_array_equal(got.nodes[name], want.nodes[name])
    if speculate:  # fewer exchanges than splits, each of several nodes
        assert len(trips) < want.n_leaves - 1
        np.testing.assert_allclose(error, want_error, rtol=1e-12)
        if speculate is not True:  # at most that many a trip
            assert max(trips) <= speculate
    else:  # one node a trip; the last split needs no histograms
        assert trips == [1] * len(trips) and len(trips) <= want.n_leaves - 1
        assert error == want_error


@pytest.mark.parametrize("speculate", [0, -2, 2.5, "all", None])
def test_growth_refuses_a_speculation_that_is_no_count(speculate):
    X, y = _tree_data()
    binner = FeatureBinner().fit(X)
    binned = binner.transform(X)
    settings = TreeSettings(8, None, 5, "tied", "error", 1.0)
    weights = np.full(y.size, 1.0 / y.size)
    first, second = settings.statistics(weights, y, None)
    rows = RowPartition(binned, np.arange(y.size), first, second, np.ones(y.size))
    with pytest.raises(ValueError, match="speculate must be a bool or an int >= 1"):
        TreeGrowth(
            rows.histogram(), binner.n_bins_, binner.thresholds_, settings, 1.0,
            speculate=speculate,
        )  # fmt: skip


def test_growth_counts_rows_as_their_sample_weights():
    """min_samples_leaf counts sample weights: the tree of integer weights is the tree of the
    repeated rows."""
    X, y = _tree_data(6, n=800)
    repeats = np.random.default_rng(2).integers(1, 4, y.size)
    binner = FeatureBinner().fit(X)
    settings = TreeSettings(max_leaf_nodes=31, min_samples_leaf=25)
    trees = []
    for rows_X, rows_y, counts in (
        (X, y, repeats.astype(np.float64)),
        (np.repeat(X, repeats, axis=0), np.repeat(y, repeats), np.ones(repeats.sum())),
    ):
        weights = counts / counts.sum()
        first, second = settings.statistics(weights, rows_y, None)
        binned = binner.transform(rows_X)
        partition = RowPartition(binned, np.arange(rows_y.size), first, second, counts)
        growth = TreeGrowth(
            partition.histogram(), binner.n_bins_, binner.thresholds_, settings,
            settings.prior(counts.sum()), speculate=True,
        )  # fmt: skip
        trees.append(HistogramTree(grow(growth, partition.expand).tree()[0]))
    assert trees[0].n_leaves > 2
    for name in STRUCTURE:
        np.testing.assert_array_equal(trees[0].nodes[name], trees[1].nodes[name])
    np.testing.assert_allclose(trees[0].nodes["cover"], trees[1].nodes["cover"])


def test_expanding_trees_on_a_block_gives_the_same_histograms_when_run_again():
    X, y = _tree_data(2, n=500)
    weight = np.ones(y.size)
    binner = FeatureBinner(max_bins=32).fit(X)
    block = blocks.build_block(X, y, weight, binner, *_BINARY)
    clean = CleanLogOdds.constant(1.0)
    boosters = blocks.reweight(
        block, blocks.start_boosters(block, None, 2), None, (None, None), (clean, clean), 1.0,
        True,
    )  # fmt: skip
    settings = TreeSettings(min_samples_leaf=5)
    start = blocks.start_trees(block, boosters, settings)
    roots = blocks.tree_roots(start)
    assert len(roots) == 2
    ((root,), log_scale, total, _) = roots[0]
    growth = TreeGrowth(
        root / np.array([total, total, 1.0]), binner.n_bins_, binner.thresholds_, settings,
        settings.prior(total * np.exp(log_scale)), speculate=True,
    )  # fmt: skip
    history = ((tuple(growth.requests()), ()),)
    assert len(history[0][0]) == 1
    first = blocks.expand_trees(block, boosters, start, settings, history)
    assert start.applied == history
    assert len(first[0]) == 1 and first[1] == ()
    growth.expanded([hist / np.array([total, total, 1.0]) for hist in first[0]])
    later = history + ((tuple(growth.requests()), ()),)
    assert later[1][0]
    # A copy of the state as it was before the first step (dask moved it) and a rerun of the
    # first step on the state that already holds it: the partitions are rebuilt, same result.
    copy = pickle.loads(pickle.dumps(blocks.start_trees(block, boosters, settings)))
    again = blocks.expand_trees(block, boosters, start, settings, history)
    np.testing.assert_array_equal(again[0][0], first[0][0])
    step = blocks.expand_trees(block, boosters, start, settings, later)
    replayed = blocks.expand_trees(block, boosters, copy, settings, later)
    assert len(step[0]) == len(later[1][0])
    for got, want in zip(replayed[0], step[0], strict=True):
        np.testing.assert_array_equal(got, want)
    assert copy.applied == start.applied == later


def test_roots_count_their_rows_once_and_copy_the_counts_in_later_rounds():
    """The first tree of a booster sums its root's counts; the reweighted boosters share them,
    and the later roots copy them in: the same histograms as summed anew."""
    X, y = _tree_data(5, n=600)
    weight = np.random.default_rng(1).integers(0, 3, y.size).astype(np.float64)
    binner = FeatureBinner(max_bins=32).fit(X)
    block = blocks.build_block(X, y, weight, binner, *_BINARY)
    clean = CleanLogOdds.constant(1.0)
    multiplicities = np.stack([weight, weight * (np.arange(y.size) % 2)])
    boosters = blocks.reweight(
        block, blocks.start_boosters(block, multiplicities, 2), None, (None, None),
        (clean, clean), 1.0, True,
    )  # fmt: skip
    settings = TreeSettings(min_samples_leaf=5)
    assert all(not booster.counts for booster in boosters)
    first = blocks.tree_roots(blocks.start_trees(block, boosters, settings))
    for booster, multiplicity in zip(boosters, multiplicities, strict=True):
        counts = booster.counts["root"]
        # Feature 0's counts of its observed bins are the multiplicities summed by bin.
        n_bins = int(binner.n_bins_[0])
        want = np.bincount(block.binned[:, 0], weights=multiplicity, minlength=256)[:n_bins]
        np.testing.assert_array_equal(counts[0, :n_bins], want)
    # A later round: new weights, the same rows; the counts are shared, not summed again.
    tree = intercept_tree()
    updates = (blocks.LearnerUpdate(tree, 0.3), blocks.LearnerUpdate(tree, -0.2))
    later = blocks.reweight(block, boosters, None, updates, (clean, clean), 1.0, True)
    assert all(a.counts is b.counts for a, b in zip(later, boosters, strict=True))
    copied = blocks.tree_roots(blocks.start_trees(block, later, settings))
    for booster in later:
        booster.counts.clear()  # summed anew
    summed = blocks.tree_roots(blocks.start_trees(block, later, settings))
    for got, want, before in zip(copied, summed, first, strict=True):
        np.testing.assert_array_equal(got[0][0], want[0][0])
        np.testing.assert_array_equal(got[0][0][..., 2], before[0][0][..., 2])
        assert not np.array_equal(got[0][0][..., 0], before[0][0][..., 0])  # new weights


def test_per_leaf_round_rows_and_covers_of_a_block():
    X, y, weight, binner, block = _block(4)
    search = TreeSearch(X, active=weight > 0, max_bins=32, max_leaf_nodes=5, min_samples_leaf=5)
    normalized = weight / weight.sum()
    tree, _ = search.best(normalized, block.y, np.zeros(300), weight.sum())
    n_leaves = tree.n_leaves
    assert n_leaves > 2
    boosters = blocks.start_boosters(block, None)
    leaf = search.leaf_index(tree)
    ((rows, covers),) = blocks.round_rows(block, boosters, None, (tree,), (None,))
    active = weight > 0
    np.testing.assert_array_equal(rows[3], leaf[active])
    np.testing.assert_array_equal(rows[2], weight[active])
    want = np.bincount(leaf, weights=weight, minlength=n_leaves)
    np.testing.assert_allclose(covers, want, rtol=1e-14)
    grid = KnotGrid.covering(0.0, 0.0)
    ((moments, _),) = blocks.round_rows(block, boosters, None, (tree,), (grid,))
    want = knot_moments(block.y, np.ones(300), np.zeros(300), weight, grid, leaf, n_leaves)
    np.testing.assert_array_equal(moments, want)


def _tree_grown_on_block(seed, n, every, max_leaf_nodes, speculate):
    """A block of ``n`` rows (every ``every``-th of zero weight), one booster, and its first
    tree grown on the block's partitions as a distributed fit grows it (the roots' and
    children's histograms normalised by the block's total); also the raw histograms of each
    expansion step, in order."""
    X, y = _tree_data(seed, n=n)
    weight = np.where(np.arange(n) % every == 0, 0.0, 1.0)
    binner = FeatureBinner(max_bins=32).fit(X)
    block = blocks.build_block(X, y, weight, binner, *_BINARY)
    clean = CleanLogOdds.constant(1.0)
    settings = TreeSettings(max_leaf_nodes=max_leaf_nodes, min_samples_leaf=5)
    boosters = blocks.reweight(
        block, blocks.start_boosters(block, None, 1), None, (None,), (clean,), 1.0, True
    )
    trees = blocks.start_trees(block, boosters, settings)
    ((root,), log_scale, total, _) = blocks.tree_roots(trees)[0]
    scale = np.array([total, total, 1.0])
    growth = TreeGrowth(
        root / scale, binner.n_bins_, binner.thresholds_, settings,
        settings.prior(total * np.exp(log_scale)), speculate=speculate,
    )  # fmt: skip
    history: tuple = ()
    answers = []
    while requests := tuple(growth.requests()):
        history += ((requests,),)
        (hists,) = blocks.expand_trees(block, boosters, trees, settings, history)
        answers.append([hist.copy() for hist in hists])
        growth.expanded([hist / scale for hist in hists])
    tree = HistogramTree(growth.tree()[0], "per-leaf")
    grown = (settings, history, (growth.node_positions(),))
    return SimpleNamespace(
        X=X, y=y, weight=weight, binner=binner, block=block, clean=clean, settings=settings,
        boosters=boosters, trees=trees, tree=tree, grown=grown, history=history,
        answers=answers,
    )  # fmt: skip


def test_round_rows_read_the_leaves_off_the_partitions_and_keep_them_for_the_margins():
    """Trees grown on a block (speculatively, as a distributed fit grows them): round_rows
    reads every row's leaf off the grown partitions (rows of zero weight routed by their bins),
    the same leaves as routing every row; the next pass adds the tree from the kept leaves,
    the same margins as from the bins, and a tree of another structure is routed."""
    g = _tree_grown_on_block(7, 800, 5, 7, True)
    block, boosters, trees, tree, weight = g.block, g.boosters, g.trees, g.tree, g.weight
    assert tree.n_leaves == 7
    ((part, covers),) = blocks.round_rows(block, boosters, trees, (tree,), (None,), g.grown)
    routed = tree.leaf_index(block.binned.T)
    np.testing.assert_array_equal(trees.leaves[1][0], routed)
    np.testing.assert_array_equal(part[3], routed[weight > 0])
    np.testing.assert_array_equal(covers, np.bincount(routed, weights=weight, minlength=7))
    valued = tree.with_leaf_values(np.linspace(-1.0, 1.0, 7))
    update = (blocks.LearnerUpdate(valued, 0.3),)
    kept = blocks.finish_boosters(block, boosters, trees, update)
    assert trees.leaves_of(0, valued) is trees.leaves[1][0]
    want = blocks.finish_boosters(block, boosters, None, update)
    np.testing.assert_array_equal(kept[0].margins.margin, want[0].margins.margin)
    np.testing.assert_array_equal(want[0].margins.margin, 0.3 * valued.predict(g.X))
    assert trees.leaves_of(0, intercept_tree()) is None


def test_a_round_gives_its_partitions_back_to_the_block_and_reruns_rebuild_them():
    """Once round_rows has read a round's rows, its partitions' arrays go back to the block's
    pool and the next round's partitions reuse them (no fresh pages a round); a task that
    dask runs again on the released round rebuilds the partitions: the same histograms and
    the same round rows."""
    g = _tree_grown_on_block(8, 900, 7, 6, 2)
    block, boosters, trees, tree, settings = g.block, g.boosters, g.trees, g.tree, g.settings
    store = trees.partitions[0]._store
    arrays = [store.stats, store.rows, store.stat_buffer, store.row_buffer]
    first = blocks.round_rows(block, boosters, trees, (tree,), (None,), g.grown)
    assert trees.partitions == [] and trees.applied is None
    assert store.stats is None and store.rows is None  # given back
    # A rerun of the last expansion and of the round rows: rebuilt from the boosters.
    (again,) = blocks.expand_trees(block, boosters, trees, settings, g.history)
    for got, want in zip(again, g.answers[-1], strict=True):
        np.testing.assert_array_equal(got, want)
    rerun = blocks.round_rows(block, boosters, trees, (tree,), (None,), g.grown)
    for got, want in zip(rerun[0][0] + (rerun[0][1],), first[0][0] + (first[0][1],), strict=True):
        np.testing.assert_array_equal(got, want)
    # The next round's partitions on the pool's arrays.
    update = (blocks.LearnerUpdate(tree.with_leaf_values(np.linspace(-1, 1, 6)), 0.3),)
    later = blocks.reweight(block, boosters, trees, update, (g.clean,), 1.0, True)
    following = blocks.start_trees(block, later, settings)
    reused = following.partitions[0]._store
    held = [reused.stats, reused.rows]
    assert all(any(np.shares_memory(a, b) for b in arrays) for a in held)
    other = blocks.build_block(g.X, g.y, g.weight, g.binner, *_BINARY)
    fresh = blocks.start_trees(other, later, settings)
    np.testing.assert_array_equal(
        blocks.tree_roots(following)[0][0][0], blocks.tree_roots(fresh)[0][0][0]
    )


class _LocalTasks:
    """:class:`~viboost.dask.engine.BlockTasks` without a cluster: every task runs here, at
    once, on the same objects (so a block function that wrote its input would show)."""

    def submit(self, func, *per_block, **shared):
        return [
            blocks.on_one_thread(func, *args, **shared) for args in zip(*per_block, strict=True)
        ]

    run = run_grouped = submit

    def gather(self, futures):
        return futures


def _blocks_of(X, y, weight, binner, size):
    return [
        blocks.build_block(
            X[i : i + size], y[i : i + size], weight[i : i + size], binner, *_BINARY
        )
        for i in range(0, y.size, size)
    ]


@pytest.mark.parametrize(
    ("settings", "alpha", "n_rows"),
    [
        (TreeSettings(max_leaf_nodes=31, min_samples_leaf=20), "exact", 3000),
        # Above COMPRESS_ABOVE rows: pseudo-rows by leaf.
        (TreeSettings(max_leaf_nodes=8, min_samples_leaf=10), "exact", 5000),
        (TreeSettings(8, 3, 10, "per-leaf", "smoothed"), "approx", 3000),
        (TreeSettings(6, None, 10, "tied", "error"), "approx", 5000),
    ],
    ids=["per-leaf", "per-leaf-compressed", "smoothed", "tied"],
)
def test_block_rows_drive_the_same_booster_as_in_memory_rows(settings, alpha, n_rows):
    """The booster over BlockRows (blocks of 700 rows) fits the trees of the booster over
    InMemoryRows and TreeSearch: the same structure, leaf values, covers and alphas."""
    X, y = _tree_data(3, n=n_rows)
    # Integer weights: the counts of min_samples_leaf are exact, as with unit weights.
    weight = np.random.default_rng(4).integers(1, 4, n_rows).astype(np.float64)
    search = TreeSearch(
        X, max_leaf_nodes=settings.max_leaf_nodes, max_depth=settings.max_depth,
        min_samples_leaf=settings.min_samples_leaf, leaf_weights=settings.leaf_weights,
        criterion=settings.criterion, sample_weight=weight,
    )  # fmt: skip
    priors = ModelPriors()
    round_settings = RoundSettings(alpha=alpha, max_vi_iter=10)
    boosters = []
    for rows in (
        InMemoryRows([search], y, [weight]),
        BlockRows(
            _LocalTasks(), _blocks_of(X, y, weight, search.binner_, 700), search.binner_,
            [n_rows], tree=settings,
        ),
    ):  # fmt: skip
        state = initial_state(y, weight, 1.0, (1.0, 1.0), priors)
        booster = Booster(rows, [state], priors, round_settings, learning_rate=0.5)
        with numba_threads(1):  # as a small fit runs (and the blocks always)
            for _ in range(6):
                booster.add_round()
        boosters.append(booster)
    want, got = (booster.records[0] for booster in boosters)
    assert rows.fits_intercept == settings.per_leaf
    for tree, expected in zip(got.learners, want.learners, strict=True):
        for name in STRUCTURE:
            np.testing.assert_array_equal(tree.nodes[name], expected.nodes[name])
        for name in ("value", "gain", "cover"):
            np.testing.assert_allclose(tree.nodes[name], expected.nodes[name], rtol=1e-9)
    assert max(tree.n_leaves for tree in want.learners) > 2
    np.testing.assert_allclose(got.alphas, want.alphas, rtol=1e-9)
    np.testing.assert_allclose(boosters[1].margins(), boosters[0].margins(), rtol=1e-9, atol=1e-12)
    if rows.tree_trips:  # a tree costs about one exchange per level, not one per split
        assert rows.tree_trips < max(tree.n_leaves for tree in got.learners) - 1


def test_round_rows_of_block_rows_for_per_leaf_weights_sort_by_leaf():
    X, y = _tree_data(5, n=1500)
    weight = np.where(np.arange(1500) % 7 == 0, 0.0, 1.0)
    settings = TreeSettings(max_leaf_nodes=6, min_samples_leaf=10)
    search = TreeSearch(X, active=weight > 0, max_leaf_nodes=6, min_samples_leaf=10)
    rows = BlockRows(
        _LocalTasks(), _blocks_of(X, y, weight, search.binner_, 400), search.binner_,
        [int(np.count_nonzero(weight))], tree=settings,
    )  # fmt: skip
    rows.start([CleanLogOdds.constant(1.0)], 1.0, True)
    (tree,) = rows.best()
    (got,), (covered,) = rows.round_rows([tree])
    want = RoundRows.weighted(y, None, np.zeros(1500), weight, search.leaf_index(tree), 6)
    for name in ("y", "h", "margin", "sample_weight", "leaf_offsets"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    leaf_covers = np.bincount(search.leaf_index(tree), weights=weight, minlength=6)
    np.testing.assert_allclose(covered.nodes["cover"][covered.leaves], leaf_covers)


@pytest.mark.skipif(max_threads() < 2, reason="numba's pool has one thread")
def test_the_clients_share_of_a_pass_runs_its_kernels_on_one_thread(monkeypatch):
    # The split search and the round rows' combination run between two trips, while the
    # workers wait or start the next pass: one thread whatever the caller's count, and the
    # caller's count back afterwards.
    import viboost.boosting.growth as growth_module
    import viboost.dask.engine as engine_module

    seen = {"search": [], "combine": []}

    def recorded(name, func):
        def wrapper(*args, **kwargs):
            seen[name].append(numba.get_num_threads())
            return func(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(  # the children's split search (TreeGrowths.expanded)
        growth_module, "attach_children", recorded("search", growth_module.attach_children)
    )
    monkeypatch.setattr(
        engine_module, "_sum_in_order", recorded("combine", engine_module._sum_in_order)
    )
    X, y = _tree_data(5, n=1500)
    weight = np.ones(1500)
    settings = TreeSettings(max_leaf_nodes=6, min_samples_leaf=10)
    search = TreeSearch(X, max_leaf_nodes=6, min_samples_leaf=10)
    rows = BlockRows(
        _LocalTasks(), _blocks_of(X, y, weight, search.binner_, 400), search.binner_, [1500],
        tree=settings,
    )  # fmt: skip
    with numba_threads(2):
        rows.start([CleanLogOdds.constant(1.0)], 1.0, True)
        (tree,) = rows.best()
        rows.round_rows([tree])
        assert numba.get_num_threads() == 2
    assert seen["search"] and set(seen["search"]) == {1}
    assert seen["combine"] and set(seen["combine"]) == {1}


def _class_blocks_of(X, y, weight, binner, size, n_classes):
    classes = np.arange(n_classes)
    return [
        blocks.build_block(
            X[i : i + size],
            y[i : i + size],
            weight[i : i + size],
            binner,
            classes=classes,
            task=make_task(n_classes),
        )
        for i in range(0, y.size, size)
    ]


@pytest.mark.parametrize(
    ("settings", "alpha", "n_rows"),
    [
        (TreeSettings(max_leaf_nodes=8, min_samples_leaf=10), "exact", 2000),
        # Above COMPRESS_ABOVE rows per group: pseudo-rows from the blocks' knot moments.
        (TreeSettings(max_leaf_nodes=8, min_samples_leaf=10), "exact", 9000),
        (TreeSettings(6, None, 10, "tied", "error"), "approx", 2000),
        (None, "exact", 2000),  # stumps
    ],
    ids=["per-leaf", "per-leaf-compressed", "tied", "stumps"],
)
def test_block_rows_of_k_classes_drive_the_same_booster_as_softmax_rows(settings, alpha, n_rows):
    """K classes: BlockRows over blocks of class indices (two groups of three classes, as two
    folds, blocks of 700 rows) fit the ensembles of SoftmaxRows: the same learners, alphas,
    margins F of each group and out-of-fold F."""
    from viboost.boosting.softmax import SoftmaxRows, class_labels

    X, _ = _tree_data(6, n=n_rows)
    clean = np.nan_to_num(X)
    y = np.digitize(clean[:, 0] + 0.5 * clean[:, 2], [-0.5, 0.5])  # classes 0, 1, 2
    n_classes = 3
    weight = np.random.default_rng(7).integers(1, 4, y.size).astype(np.float64)
    half = np.arange(y.size) % 2 == 0
    validation = np.stack([half, ~half])
    multiplicities = np.where(validation, 0.0, weight)
    if settings is None:
        search = BinnedStumpSearch(X, max_bins=64)
        binner = search.binner_
    else:
        search = TreeSearch(
            X, max_leaf_nodes=settings.max_leaf_nodes, max_depth=settings.max_depth,
            min_samples_leaf=settings.min_samples_leaf, leaf_weights=settings.leaf_weights,
            criterion=settings.criterion, sample_weight=weight,
        )  # fmt: skip
        binner = search.binner_
    priors = ModelPriors()
    round_settings = RoundSettings(alpha=alpha, max_vi_iter=10)
    labels = class_labels(y, n_classes)
    n_active = [int(np.count_nonzero(m)) for m in multiplicities for _ in range(n_classes)]
    boosters = []
    for rows in (
        SoftmaxRows(
            [search.restricted(m > 0) for m in multiplicities], y, n_classes, multiplicities,
            validation,
        ),
        BlockRows(
            _LocalTasks(), _class_blocks_of(X, y, weight, binner, 700, n_classes), binner,
            n_active, [multiplicities[:, i : i + 700] for i in range(0, y.size, 700)],
            [validation[:, i : i + 700] for i in range(0, y.size, 700)], settings,
            n_classes=n_classes,
        ),
    ):  # fmt: skip
        states = [
            initial_state(labels[k], m, 1.0, (1.0, 1.0), priors)
            for m in multiplicities
            for k in range(n_classes)
        ]
        booster = Booster(rows, states, priors, round_settings, learning_rate=0.5)
        with numba_threads(1):
            for _ in range(5):
                booster.add_round()
        boosters.append(booster)
    want, got = boosters
    assert len(got.records) == 2 * n_classes
    for records, expected in zip(got.records, want.records, strict=True):
        for learner, other in zip(records.learners, expected.learners, strict=True):
            for name in STRUCTURE:
                np.testing.assert_array_equal(learner.nodes[name], other.nodes[name])
            np.testing.assert_allclose(
                learner.nodes["value"], other.nodes["value"], rtol=1e-9, atol=1e-12
            )
        np.testing.assert_allclose(records.alphas, expected.alphas, rtol=1e-9)
    # Out of fold with the last round's learners still pending on the blocks, then after.
    np.testing.assert_allclose(got.out_of_fold(), want.out_of_fold(), rtol=1e-9, atol=1e-12)
    for g in range(2):
        assert got.margins(g).shape == (y.size, n_classes)
        np.testing.assert_allclose(got.margins(g), want.margins(g), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.out_of_fold(), want.out_of_fold(), rtol=1e-9, atol=1e-12)
    # The margins moved (the classes were fitted), and each group's F differs from the other's.
    assert np.ptp(want.margins(0)) > 0.5
    assert not np.allclose(want.margins(0), want.margins(1))
