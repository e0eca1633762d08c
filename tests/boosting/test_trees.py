"""viboost.boosting.trees: the grower against a reference written here, per-leaf rounds against
quadrature and optimisation oracles, and tree fits through the estimator (edge cases, bad input,
pickling, warm start, thread counts)."""

from __future__ import annotations

import heapq
import pickle

import numpy as np
import pytest
from oracles import sparse_feature_rows
from scipy import integrate, optimize
from scipy.special import betaln, expit, log_expit
from sklearn.utils._param_validation import InvalidParameterError

from viboost import VIBoostClassifier
from viboost._utils.parallel import numba_threads
from viboost.boosting.binning import MISSING_BIN
from viboost.boosting.booster import Booster, InMemoryRows, run_rounds
from viboost.boosting.predictor import predict_ensemble
from viboost.boosting.splitting import partition_nodes
from viboost.boosting.tree_search import TreeSearch
from viboost.boosting.trees import HistogramTree
from viboost.presets import PRESETS
from viboost.variational import ModelPriors, RoundRows, RoundSettings, initial_state, run_round
from viboost.variational.compression import compress_round


def _data(n=600, d=5, seed=0, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    F = 2.0 * X[:, 0] * X[:, 1] + X[:, 2]
    y = np.where(rng.random(n) < expit(2.0 * F), 1.0, -1.0)
    X[rng.random((n, d)) < nan] = np.nan
    return X, y


# --- the grower against a reference grower --------------------------------------------------------


def _reference_tree(binned, n_bins, first, second, rows, max_leaves, min_leaf, prior, max_depth):
    """Best-first growth by brute force over every (feature, position, missing side), with the
    Newton score; returns the leaves as sorted row sets and the splits in order."""

    def score(a, b):
        return a * a / (b + prior)

    def best_split(idx):
        a, b = first[idx].sum(), second[idx].sum()
        parent = score(a, b)
        best = None
        for j in range(binned.shape[1]):
            col = binned[idx, j]
            missing = col == MISSING_BIN
            for p in range(1, n_bins[j] + 1):
                for missing_left in (True, False):
                    if not missing.any() and not missing_left:
                        continue
                    left = (col < p) & ~missing
                    if missing_left:
                        left |= missing
                    nl = left.sum()
                    if nl < min_leaf or idx.size - nl < min_leaf:
                        continue
                    la, lb = first[idx][left].sum(), second[idx][left].sum()
                    gain = score(la, lb) + score(a - la, b - lb) - parent
                    if best is None or gain > best[0] + 1e-9 * abs(parent):
                        best = (gain, j, p, left)
        return best if best is not None and best[0] > 1e-12 * abs(parent) else None

    heap, leaves, counter = [], [], 0
    split = best_split(rows)
    heapq.heappush(heap, (-(split[0] if split else -np.inf), counter, rows, split, 0))
    n_leaves, splits = 1, []
    done = []
    while heap and n_leaves < max_leaves:
        _, _, idx, split, depth = heapq.heappop(heap)
        if split is None:
            done.append(idx)
            continue
        _, j, p, left = split
        splits.append((j, p))
        for child in (idx[left], idx[~left]):
            counter += 1
            s = best_split(child) if depth + 1 < max_depth and child.size >= 2 * min_leaf else None
            heapq.heappush(heap, (-(s[0] if s else -np.inf), counter, child, s, depth + 1))
        n_leaves += 1
    leaves = done + [item[2] for item in heap]
    return sorted(tuple(sorted(leaf)) for leaf in leaves), splits


@pytest.mark.parametrize(
    "max_leaves, min_leaf, max_depth", [(6, 10, np.inf), (8, 25, 2), (2, 1, 1)]
)
def test_grower_matches_a_brute_force_reference(max_leaves, min_leaf, max_depth):
    X, y = _data(n=300, d=4, seed=1)
    rng = np.random.default_rng(2)
    weights = rng.random(300)
    weights /= weights.sum()
    margin = rng.normal(size=300)
    search = TreeSearch(
        X,
        max_bins=16,
        max_leaf_nodes=max_leaves,
        min_samples_leaf=min_leaf,
        max_depth=None if np.isinf(max_depth) else int(max_depth),
    )
    tree, _ = search.best(weights, y, margin, total=1.0)
    first, second = y * weights, weights * expit(y * margin)
    leaves, splits = _reference_tree(
        search.binned_,
        search.binner_.n_bins_,
        first,
        second,
        np.arange(300),
        max_leaves,
        min_leaf,
        0.5,
        max_depth,
    )
    leaf = search.leaf_index(tree)
    got = sorted(tuple(np.flatnonzero(leaf == k)) for k in range(tree.n_leaves))
    assert got == leaves
    assert tree.n_leaves == len(splits) + 1
    assert min(len(g) for g in got) >= min_leaf
    # The node arrays route raw features exactly as the bins do.
    np.testing.assert_array_equal(tree.predict(X), tree.binned_outputs(search.binned_columns_))


def test_zero_weight_rows_change_nothing_and_never_count():
    X, y = _data(n=400, seed=3)
    s = np.ones(400)
    s[::3] = 0.0
    a = VIBoostClassifier(
        15,
        preset="paper",
        max_leaf_nodes=8,
        min_samples_leaf=10,
        leaf_weights="per-leaf",
        alpha="exact",
        learning_rate=0.3,
    )
    full = a.fit(X, y, sample_weight=s)
    kept = VIBoostClassifier(**a.get_params()).fit(X[s > 0], y[s > 0])
    np.testing.assert_allclose(full.decision_function(X), kept.decision_function(X), rtol=1e-9)
    search = TreeSearch(X, active=s > 0, max_leaf_nodes=8, min_samples_leaf=10)
    tree, _ = search.best(np.where(s > 0, 1.0, 0.0) / (s > 0).sum(), y)
    counts = np.bincount(search.leaf_index(tree)[s > 0], minlength=tree.n_leaves)
    assert counts.min() >= 10


def test_trees_are_the_same_for_any_thread_count():
    X, y = _data(n=40_000, d=8, seed=4)
    weights = np.full(40_000, 1 / 40_000)
    search = TreeSearch(X, max_leaf_nodes=31, min_samples_leaf=20)
    with numba_threads(1):
        one, _ = search.best(weights, y)
    with numba_threads(2):
        two, _ = search.best(weights, y)
    assert one.nodes.tobytes() == two.nodes.tobytes()


# --- per-leaf rounds against oracles -------------------------------------------------------------


def _leaf_rows(seed=5, n=120, leaves=3):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.6, 1.0, -1.0)
    margin = rng.normal(0.0, 1.5, n)
    weight = rng.uniform(0.5, 2.0, n)
    leaf = rng.integers(0, leaves, n)
    return y, margin, weight, leaf


def _neg_log_post(c, y, margin, weight, mu):
    return -(mu * (log_expit(c) + log_expit(-c)) + np.sum(weight * log_expit(y * (margin + c))))


def test_per_leaf_modes_maximise_each_leafs_posterior():
    y, margin, weight, leaf = _leaf_rows()
    rows = RoundRows.weighted(y, None, margin, weight, leaf, 3)
    state = initial_state(y, weight, 1.0, (1.0, 1.0), ModelPriors())
    result = run_round(
        rows, state, ModelPriors(weight=2.0), RoundSettings(alpha="exact", noise_model=False)
    )
    for k in range(3):
        m = leaf == k
        ref = optimize.minimize_scalar(
            _neg_log_post, args=(y[m], margin[m], weight[m], 2.0), bracket=(-1, 1), tol=1e-12
        )
        assert abs(result.alpha[k] - ref.x) < 1e-6


def test_per_leaf_core_elbo_is_the_sum_of_each_leafs_log_evidence():
    y, margin, weight, leaf = _leaf_rows(seed=6, n=60)
    rows = RoundRows.weighted(y, None, margin, weight, leaf, 3)
    state = initial_state(y, weight, 1.0, (1.0, 1.0), ModelPriors())
    result = run_round(rows, state, ModelPriors(), RoundSettings(alpha="exact", noise_model=False))
    total = 0.0
    for k in range(3):
        m = leaf == k
        mode = result.alpha[k]
        peak = _neg_log_post(mode, y[m], margin[m], weight[m], 1.0)
        value, _ = integrate.quad(
            lambda c, m=m, peak=peak: np.exp(
                peak - _neg_log_post(c, y[m], margin[m], weight[m], 1.0)
            ),
            -np.inf,
            np.inf,
            epsabs=0,
            epsrel=1e-12,
            limit=200,
        )
        total += np.log(value) - peak - betaln(1.0, 1.0)
    assert abs(result.elbo_trace[0] - total) < 1e-8 * abs(total)


def test_one_leaf_round_is_the_stump_round_with_h_one():
    y, margin, weight, _ = _leaf_rows(seed=7)
    leaf = np.zeros(y.size, dtype=np.int64)
    priors = ModelPriors()
    state = initial_state(y, weight, 0.9, (2.0, 1.0), priors)
    for alpha in ("exact", "approx"):
        settings = RoundSettings(alpha=alpha)
        per_leaf = run_round(
            RoundRows.weighted(y, None, margin, weight, leaf, 1), state, priors, settings
        )
        plain = run_round(
            RoundRows.weighted(y, np.ones_like(y), margin, weight), state, priors, settings
        )
        assert abs(per_leaf.alpha[0] - plain.alpha) < 1e-10
        np.testing.assert_allclose(per_leaf.elbo_trace, plain.elbo_trace, rtol=1e-10)
        np.testing.assert_allclose(per_leaf.state.eta, plain.state.eta, rtol=1e-10)


def test_per_leaf_approximate_mode_is_eq_17_on_each_leaf():
    y, margin, weight, leaf = _leaf_rows(seed=8)
    rows = RoundRows.weighted(y, None, margin, weight, leaf, 3)
    state = initial_state(y, weight, 1.0, (1.0, 1.0), ModelPriors())
    result = run_round(
        rows, state, ModelPriors(), RoundSettings(alpha="approx", noise_model=False, tau=0.5)
    )
    for k in range(3):
        m = leaf == k
        w = weight[m] * np.exp(-0.5 * y[m] * margin[m])
        ref = np.log((1 + w[y[m] > 0].sum()) / (1 + w[y[m] < 0].sum())) / (2 * 0.5)
        assert abs(result.alpha[k] - ref) < 1e-12


def test_compression_by_leaf_keeps_every_leaf_sum():
    rng = np.random.default_rng(9)
    n = 50_000
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    margin = rng.normal(0.0, 2.0, n)
    leaf = rng.integers(0, 7, n)
    yp, _, mp, sp, lp = compress_round(y, np.ones(n), margin, np.ones(n), leaf=leaf, n_leaves=7)
    assert np.all(np.diff(lp) >= 0) and yp.size < 20_000
    for k in range(7):
        exact = np.logaddexp(0.0, -y[leaf == k] * (margin[leaf == k] + 0.3)).sum()
        approx = (sp[lp == k] * np.logaddexp(0.0, -yp[lp == k] * (mp[lp == k] + 0.3))).sum()
        assert abs(approx - exact) < 1e-9 * exact


# --- the booster and the estimator with trees ---------------------------------------------------


def test_booster_margins_equal_the_predictor_on_the_training_rows():
    X, y = _data(n=500, seed=10)
    s = np.ones(500)
    priors = ModelPriors()
    search = TreeSearch(X, max_leaf_nodes=8, min_samples_leaf=5)
    booster = Booster(
        InMemoryRows([search], y, [s]),
        [initial_state(y, s, 0.9, (1.0, 1.0), priors)],
        priors,
        RoundSettings(alpha="exact"),
        learning_rate=0.2,
    )
    run_rounds(booster, 12, "test", 0)
    records = booster.records[0]
    assert records.learners[0].n_leaves == 1  # the intercept
    assert records.alphas[0] == 1.0 and records.alphas[1] == pytest.approx(0.2)
    np.testing.assert_allclose(
        predict_ensemble(X, records.learners, records.alphas),
        booster.margins(),
        rtol=1e-12,
        atol=1e-12,
    )
    for tree in records.learners:  # covers recorded: a split's is its children's sum
        nodes = tree.nodes
        assert nodes["cover"][0] == pytest.approx(500.0)
        split = ~nodes["is_leaf"]
        np.testing.assert_allclose(
            nodes["cover"][split],
            nodes["cover"][nodes["left"][split]] + nodes["cover"][nodes["right"][split]],
        )


def test_default_fit_uses_trees_and_everything_works():
    X, y = _data(n=400, seed=11)
    clf = VIBoostClassifier(random_state=0, n_estimators=60).fit(X, (y > 0).astype(int))
    assert isinstance(clf.estimators_[1], HistogramTree) and clf.estimators_[1].per_leaf
    assert clf.plan_.max_leaf_nodes == PRESETS["robust"].max_leaf_nodes
    staged = list(clf.staged_decision_function(X))
    np.testing.assert_allclose(staged[-1], clf.decision_function(X), rtol=1e-12, atol=1e-12)
    assert clf.feature_importances_.sum() == pytest.approx(1.0)
    assert np.argmax(clf.feature_importances_) in (0, 1, 2)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(X), clf.decision_function(X))


def test_warm_start_with_trees_continues_the_same_run():
    X, y = _data(n=300, seed=12)
    params = dict(
        preset="paper",
        max_leaf_nodes=6,
        min_samples_leaf=5,
        leaf_weights="per-leaf",
        alpha="exact",
        learning_rate=0.3,
    )
    one = VIBoostClassifier(20, **params).fit(X, y)
    two = VIBoostClassifier(10, warm_start=True, **params).fit(X, y)
    two.set_params(n_estimators=20).fit(X, y)
    np.testing.assert_allclose(
        two.decision_function(X), one.decision_function(X), rtol=1e-10, atol=1e-12
    )


def test_tied_trees_are_algorithm_1_with_one_weight_per_tree():
    X, y = _data(n=300, seed=13)
    clf = VIBoostClassifier(10, preset="paper", max_depth=2).fit(X, y)
    tree = clf.estimators_[0]
    assert not tree.per_leaf and tree.n_leaves <= 4
    assert set(np.unique(tree.leaf_values)) <= {-1.0, 1.0}


@pytest.mark.parametrize(
    "params",
    [{"max_leaf_nodes": 1}, {"max_depth": 0}, {"min_samples_leaf": 0}, {"leaf_weights": "each"}],
)
def test_invalid_tree_sizes_get_parameter_errors(params):
    with pytest.raises(InvalidParameterError):
        VIBoostClassifier(**params).fit([[0.0], [1.0], [2.0], [3.0]], [0, 1, 0, 1])


def test_exhaustive_search_is_for_stumps_only():
    with pytest.raises(ValueError, match="max_bins=None"):
        VIBoostClassifier(max_bins=None).fit([[0.0], [1.0], [2.0], [3.0]], [0, 1, 0, 1])


@pytest.mark.parametrize(
    "case", ["separable", "constant", "all_nan", "huge_weights", "one_row_class"]
)
def test_edge_cases_give_finite_models(case):
    rng = np.random.default_rng(14)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    s = None
    if case == "constant":
        X[:, 1] = 3.0
    elif case == "all_nan":
        X[:, 2] = np.nan
    elif case == "huge_weights":
        s = np.where(rng.random(120) < 0.5, 1e300, 0.0)
        s[:2] = 1e300
        y[:2] = [0, 1]
    elif case == "one_row_class":
        y[:] = 0
        y[0] = 1
    with pytest.warns() if case == "one_row_class" else _no_warning():
        clf = VIBoostClassifier(40, random_state=0).fit(X, y, sample_weight=s)
    margin = clf.decision_function(X)
    assert np.all(np.isfinite(margin)) and np.all(np.isfinite(clf.mislabel_proba_))
    if case == "separable":
        assert clf.score(X, y) == 1.0


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_leaves_from_the_partition_equal_the_routed_leaves():
    X, y = _data(n=2000, seed=15)
    search = TreeSearch(X, max_leaf_nodes=15, min_samples_leaf=10)
    tree, _ = search.best(np.full(2000, 1 / 2000), y)
    np.testing.assert_array_equal(search.leaf_index(tree), tree.leaf_index(search.binned_columns_))
    np.testing.assert_array_equal(search.outputs(tree), tree.predict(X))


def test_gain_importances_and_clean_hard_rows_are_not_called_noise():
    # Clean labels with a hard (interaction) boundary: the noise fit must not discount the rows
    # near it; the importances go to the two features of the interaction.
    rng = np.random.default_rng(16)
    X = rng.normal(size=(1500, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    clf = VIBoostClassifier(300, random_state=0).fit(X, y)
    assert clf.noise_rate_ < 0.03
    near = np.abs(X[:, 0] * X[:, 1]) < 0.1
    assert np.mean(clf.mislabel_proba_[near] > 0.5) < 0.1
    importances = clf.feature_importances_
    assert importances.sum() == pytest.approx(1.0) and importances[:2].sum() > 0.9


def test_default_trees_estimate_the_flip_rate_of_an_interaction():
    rng = np.random.default_rng(17)
    X = rng.normal(size=(1500, 4))
    truth = (X[:, 0] * X[:, 1] > 0).astype(int)
    flipped = rng.random(1500) < 0.2
    clf = VIBoostClassifier(random_state=0).fit(X, np.where(flipped, 1 - truth, truth))
    assert abs(clf.noise_rate_ - flipped.mean()) < 0.03
    lo, hi = clf.noise_rate_interval_
    assert lo < clf.noise_rate_ < hi
    assert np.mean(clf.predict(X) == truth) > 0.93  # stumps: 0.53 (no additive fit exists)


@pytest.mark.parametrize("n", [10, 100_001])
def test_partition_is_stable_and_the_same_for_any_thread_count(n):
    rng = np.random.default_rng(n)
    binned = rng.integers(0, 256, size=(n, 3), dtype=np.uint8)
    binned[rng.random(n) < 0.1, 1] = MISSING_BIN
    rows = np.sort(rng.choice(n, n - n // 7, replace=False)).astype(np.int64)
    stats = rng.random((rows.size, 3))
    start, stop = 3, rows.size - 2
    part = rows[start:stop]
    left = (binned[part, 1] < 100) | (binned[part, 1] == MISSING_BIN)
    order = np.concatenate([np.flatnonzero(left), np.flatnonzero(~left)])
    want_rows, want_stats = rows.copy(), stats.copy()
    want_rows[start:stop], want_stats[start:stop] = part[order], stats[start:stop][order]
    for threads in (1, 2):
        given_rows, given_stats = rows.copy(), stats.copy()
        # The children land on the other side (the buffers), at the node's positions; the
        # positions outside the node are left as they were.
        got_rows, got_stats = want_rows.copy(), want_stats.copy()
        got_rows[start:stop], got_stats[start:stop] = -1, np.nan
        with numba_threads(threads):
            (n_left,) = partition_nodes(
                binned.T, given_rows, given_stats, [start], [stop], [1], [100], [True],
                got_rows, got_stats,
            )  # fmt: skip
        assert n_left == left.sum()
        np.testing.assert_array_equal(got_rows, want_rows)
        np.testing.assert_array_equal(got_stats, want_stats)
        np.testing.assert_array_equal(given_rows, rows)  # the source side is not written
        np.testing.assert_array_equal(given_stats, stats)
        # And back: the same partition read from the buffers (side 1) lands in the arrays.
        back_rows, back_stats = rows.copy(), stats.copy()
        back_rows[start:stop], back_stats[start:stop] = -1, np.nan
        with numba_threads(threads):
            (n_back,) = partition_nodes(
                binned.T, back_rows, back_stats, [start], [stop], [1], [100], [True],
                given_rows, given_stats, sides=[1],
            )  # fmt: skip
        assert n_back == n_left
        np.testing.assert_array_equal(back_rows, want_rows)
        np.testing.assert_array_equal(back_stats, want_stats)


def test_nodes_of_several_trees_partition_and_histogram_as_one_each():
    """partition_nodes and node_histograms of nodes of several trees in one call (their rows
    stacked in one array) equal the calls for one node at a time, and the sums written out."""
    from viboost.boosting.histogram import node_histograms

    rng = np.random.default_rng(4)
    n, d = 40_000, 4
    binned = rng.integers(0, 200, size=(n, d), dtype=np.uint8)
    binned[rng.random(n) < 0.05, 2] = MISSING_BIN
    trees = [np.sort(rng.choice(n, size, replace=False)) for size in (30_000, 25_000, 5)]
    rows = np.concatenate(trees).astype(np.int64)
    stats = rng.random((rows.size, 3))
    starts = np.array([0, 30_000 + 100, 55_000])
    stops = np.array([30_000, 55_000, 55_005])
    features, positions, missing = np.array([0, 2, 1]), np.array([50, 120, 7]), [True, False, True]
    together, together_stats = np.empty_like(rows), np.empty_like(stats)
    with numba_threads(2):
        n_left = partition_nodes(
            np.ascontiguousarray(binned.T), rows, stats, starts, stops, features,
            positions, missing, together, together_stats,
        )  # fmt: skip
        hists = node_histograms(binned, together, starts, starts + n_left, together_stats, 201)
        # The same nodes read from the other side: the same histograms.
        other = node_histograms(
            binned, rows, starts, starts + n_left, stats, 201,
            other_side=(together, together_stats), sides=np.ones(3, dtype=np.int8),
        )  # fmt: skip
    assert np.array_equal(hists, other)
    with pytest.raises(ValueError, match="other_side"):
        node_histograms(binned, rows, starts, stops, stats, 201, sides=np.ones(3, np.int8))
    with pytest.raises(ValueError, match="one entry per node"):
        node_histograms(binned, rows, starts, stops, stats, 201, sides=np.ones(2, np.int8))
    for r in range(3):
        alone, alone_stats = np.empty_like(rows), np.empty_like(stats)
        (count,) = partition_nodes(
            binned.T, rows, stats, starts[r : r + 1], stops[r : r + 1],
            features[r : r + 1], positions[r : r + 1], missing[r : r + 1],
            alone, alone_stats,
        )  # fmt: skip
        assert count == n_left[r]
        span = slice(starts[r], stops[r])
        np.testing.assert_array_equal(alone[span], together[span])
        np.testing.assert_array_equal(alone_stats[span], together_stats[span])
        left = slice(starts[r], starts[r] + count)
        # The oracle: the sums written out with numpy.
        want = np.zeros((d, 201, 3))
        for j in range(d):
            bins = binned[alone[left], j]
            slot = np.where(bins == MISSING_BIN, 200, bins)
            for c in range(3):
                np.add.at(want[j, :, c], slot, alone_stats[left, c])
        np.testing.assert_allclose(hists[r], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("share", [0.02, 0.2, 0.9])  # sparse and dense nodes
def test_node_histograms_of_sparse_and_dense_nodes_equal_a_reference(share: float) -> None:
    """A node's histogram (its rows read in order, the rows ahead prefetched) is the same on
    one thread as on two, and a reference written here; without the counts, the same two
    statistics; with 256 slots, the missing bin in slot 255."""
    from viboost._utils.parallel import numba_threads
    from viboost.boosting.histogram import node_histograms

    rng = np.random.default_rng(3)
    n, d = 60_000, 6
    binned = rng.integers(0, 40, size=(n, d)).astype(np.uint8)
    binned[rng.random((n, d)) < 0.05] = 255  # missing: the last slot
    m = int(share * n)
    rows = np.sort(rng.choice(n, m, replace=False)).astype(np.int64)
    stats = rng.standard_normal((m, 3))
    starts = np.array([0, m // 3])
    stops = np.array([m // 3, m])
    with numba_threads(1):
        hists = node_histograms(binned, rows, starts, stops, stats, 41)
    with numba_threads(2):
        assert np.array_equal(node_histograms(binned, rows, starts, stops, stats, 41), hists)
    # Without the counts: the same two statistics, bit for bit, and zeros for the counts.
    uncounted = node_histograms(binned, rows, starts, stops, stats, 41, counted=False)
    assert np.array_equal(uncounted[..., :2], hists[..., :2])
    assert not uncounted[..., 2].any()
    slots = np.where(binned == 255, 40, binned)
    for r in range(2):
        part = rows[starts[r] : stops[r]]
        for j in range(d):
            expected = np.zeros((41, 3))
            np.add.at(expected, slots[part, j], stats[starts[r] : stops[r]])
            np.testing.assert_allclose(hists[r, j], expected, rtol=1e-10, atol=1e-10)
    # With 256 slots the missing bin is slot 255 (no remapping): the same sums, moved there.
    wide = node_histograms(binned, rows, starts, stops, stats, 256)
    assert np.array_equal(wide[:, :, :40], hists[:, :, :40])
    assert np.array_equal(wide[:, :, 255], hists[:, :, 40])
    assert not wide[:, :, 40:255].any()


def test_partition_moves_each_node_between_the_two_sides() -> None:
    """partition_nodes reads each node from its side (``sides``) and writes its children to
    the other side: nodes of both sides in one call, split there and back, give each node's
    stable partition, and leave every other position of both sides as it was."""
    from viboost.boosting.splitting import partition_nodes

    rng = np.random.default_rng(5)
    n, d = 50_000, 4
    columns = rng.integers(0, 30, size=(d, n)).astype(np.uint8)
    columns[0, rng.random(n) < 0.1] = 255
    rows = rng.permutation(n).astype(np.int64)
    stats = rng.standard_normal((n, 3))
    starts, stops = np.array([0, 20_000, 45_000]), np.array([20_000, 41_000, n])
    features, positions = np.array([0, 2, 1]), np.array([10, 15, 3])
    missing = np.array([True, False, False])
    sides = np.array([0, 1, 0], dtype=np.int8)
    # Side 0 holds the first and third nodes, side 1 the second.
    side_rows = [rows.copy(), rng.permutation(n).astype(np.int64)]
    side_stats = [stats.copy(), rng.standard_normal((n, 3))]
    before = [a.copy() for a in (*side_rows, *side_stats)]
    for threads in (1, 2):
        got = [a.copy() for a in before]
        with numba_threads(threads):
            n_left = partition_nodes(
                columns, got[0], got[2], starts, stops, features, positions, missing,
                got[1], got[3], sides=sides,
            )  # fmt: skip
        for r, (start, stop) in enumerate(zip(starts, stops, strict=True)):
            source, target = int(sides[r]), 1 - int(sides[r])
            node = before[source][start:stop]
            node_stats = before[2 + source][start:stop]
            bins = columns[features[r], node]
            left = np.where(bins == 255, missing[r], bins < positions[r])
            order = np.concatenate([np.flatnonzero(left), np.flatnonzero(~left)])
            assert n_left[r] == left.sum()
            assert np.array_equal(got[target][start:stop], node[order])
            assert np.array_equal(got[2 + target][start:stop], node_stats[order])
            # The source side of the node is not written.
            assert np.array_equal(got[source][start:stop], node)
        # Positions in no node (41,000 to 45,000) are left as they were on both sides.
        for now, then in zip(got, before, strict=True):
            assert np.array_equal(now[41_000:45_000], then[41_000:45_000])
    with pytest.raises(ValueError, match="one entry per node"):
        partition_nodes(
            columns, rows, stats, starts, stops, features, positions, missing,
            np.empty_like(rows), np.empty_like(stats), sides=[0, 1],
        )  # fmt: skip


def test_tree_search_reuses_its_roots_count_histogram() -> None:
    """A search sums its root's count histogram once (the rows are the same every round) and
    copies it into later roots: every later tree, and every root histogram, is the one a fresh
    search (which sums the counts) grows, with sample weights as counts."""
    from viboost.boosting.tree_search import TreeSearch

    rng = np.random.default_rng(11)
    n = 3000
    X = rng.standard_normal((n, 5))
    X[rng.random((n, 5)) < 0.05] = np.nan
    y = np.where(X[:, 0] + np.nan_to_num(X[:, 1]) * X[:, 2] > 0, 1.0, -1.0)
    active = rng.random(n) < 0.8
    s = rng.integers(1, 4, n).astype(float)
    kw = dict(max_leaf_nodes=8, min_samples_leaf=20, random_state=0, sample_weight=s)
    reused = TreeSearch(X, active, **kw)
    for round_ in range(3):
        w = rng.random(n) * active
        w /= w.sum()
        margin = rng.standard_normal(n)
        tree, _ = reused.best(w, y, margin, 2.0)
        assert reused._root_counts is not None
        fresh = TreeSearch(X, active, **kw)
        want, _ = fresh.best(w, y, margin, 2.0)
        assert np.array_equal(tree.nodes, want.nodes), round_
        np.testing.assert_array_equal(reused._root_counts, fresh._root_counts)
    # The cached counts are those of the root: per feature, the active rows' weights by bin.
    binned = reused.binned_.astype(np.int64)  # (slot 256 does not fit a uint8)
    slots = np.where(binned == 255, reused._n_slots - 1, binned)
    for j in range(5):
        want = np.bincount(slots[active, j], weights=s[active], minlength=reused._n_slots)
        np.testing.assert_allclose(reused._root_counts[j], want, rtol=0, atol=1e-9)
    # A restricted search sums its own root's counts.
    other = reused.restricted(active & (rng.random(n) < 0.5))
    assert other._root_counts is None


def test_trees_on_sparse_features_are_those_of_every_bin_read():
    """One-hot and mostly-zero features: the search reads their entries (TreeSearch's
    sparse_bins_) and grows the trees that reading every bin grows (the same splits; the sums
    in the commonest bins, so the leaf values and gains, to rounding)."""
    from viboost.boosting.histogram import sparse_bins

    X, signal, rng = sparse_feature_rows(3_000, 30, 5, 3, seed=12)
    n = X.shape[0]
    y = np.where(signal + rng.logistic(size=n) * 0.5 > 1.0, 1.0, -1.0)
    weights = rng.uniform(0.5, 1.5, n)
    weights /= weights.sum()
    margin = rng.normal(0.0, 0.3, n)
    search = TreeSearch(X, max_leaf_nodes=15, min_samples_leaf=10)
    assert search.sparse_bins_.sparse.size == 125 and search.sparse_bins_.dense.size == 3
    got, _ = search.best(weights, y, margin)
    search.sparse_bins_ = sparse_bins(search.binned_, min_share=2.0)  # every feature dense
    want, _ = search.best(weights, y, margin)
    assert got.n_leaves == want.n_leaves >= 10
    for name in ("feature", "bin_threshold", "missing_left", "left", "right", "is_leaf", "cover"):
        np.testing.assert_array_equal(got.nodes[name], want.nodes[name], err_msg=name)
    for name in ("value", "gain"):
        np.testing.assert_allclose(got.nodes[name], want.nodes[name], rtol=1e-9, err_msg=name)
