"""viboost.dask.blocks: the blocks' sizes, and each block function against the in-memory
computation on the same rows (the functions take numpy arrays; no cluster needed)."""

from __future__ import annotations

import numpy as np
import pytest

from viboost.boosting.binning import FeatureBinner
from viboost.boosting.reweighting import search_weights
from viboost.boosting.stumps import BinnedStumpSearch, DecisionStump, best_binned_stump
from viboost.dask import blocks
from viboost.noise_fit.calibration import flip_rate_sums
from viboost.variational.state import CleanLogOdds


@pytest.mark.parametrize(
    ("n_rows", "n_features", "block_size", "want"),
    [
        (10, 3, 4, (4, 4, 2)),
        (8, 3, 4, (4, 4)),
        (0, 3, 4, ()),
        (10_000, 50, None, (10_000,)),
        (3_000_000, 64, None, (1 << 17,) * 22 + (3_000_000 - 22 * (1 << 17),)),
        (100_000, 100_000, None, (4096,) * 24 + (100_000 - 24 * 4096,)),
    ],
)
def test_block_sizes_depend_on_the_shape_only(n_rows, n_features, block_size, want):
    assert blocks.block_sizes(n_rows, n_features, block_size) == want


def _block(seed: int = 0, n: int = 300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.05] = np.nan
    y = np.where(X[:, 0] > 0, "yes", "no").astype(object)
    weight = rng.random(n) * (rng.random(n) < 0.9)
    binner = FeatureBinner(max_bins=32).fit(X, weight > 0)
    return X, y, weight, binner, blocks.build_block(X, y, weight, binner, "yes")


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
        block, blocks.start_boosters(block, None), (None,), (clean,), 1.0, True
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
    ((y_rows, h_rows, margin_rows, s_rows),) = blocks.round_rows(
        block, (booster,), (stump,), (None,)
    )
    active = weight > 0
    np.testing.assert_array_equal(h_rows, stump.predict(X)[active])
    np.testing.assert_array_equal(s_rows, weight[active])
    (finished,) = blocks.finish_boosters(block, (booster,), (update,))
    np.testing.assert_array_equal(finished.margins.margin, 0.4 * stump.predict(X))
    assert booster.margins.margin.max() == 0.0  # the old state is untouched


def test_out_of_fold_takes_each_rows_last_validation_fold_after_the_pending_stumps():
    X, y, weight, binner, block = _block(2, n=6)
    boosters = blocks.start_boosters(block, np.ones((2, 6)))
    stump = DecisionStump(0, -np.inf, 1, True, split_bin=-1)  # h = +1 everywhere
    updates = (blocks.LearnerUpdate(stump, 0.5), blocks.LearnerUpdate(stump, 2.0))
    validation = np.array([[1, 1, 0, 0, 1, 0], [0, 1, 1, 0, 0, 0]], dtype=bool)
    got = blocks.out_of_fold(block, boosters, validation, updates)
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
