"""Tests of viboost.dask.engine's client-side arithmetic: how the blocks' node histograms add up.

The reference is the arithmetic written out with numpy in the test (each block's two statistics
scaled by its factor, the counts as they are, in block order from zeros, then divided by the
total): the compiled combination must give the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("distributed")

from viboost.dask.engine import BlockScale  # noqa: E402


def _reference(hists, factors, total):
    out = np.zeros_like(hists[0])
    for hist, factor in zip(hists, factors, strict=True):
        if factor > 0.0:
            out[..., :2] += hist[..., :2] * factor if factor != 1.0 else hist[..., :2]
        out[..., 2] += hist[..., 2]
    out[..., :2] /= total
    return out


@pytest.mark.parametrize("seed", range(6))
def test_block_histograms_combine_bit_for_bit_as_written_out(seed):
    rng = np.random.default_rng(seed)
    n_blocks = int(rng.integers(1, 9))
    hists = [
        rng.standard_normal((7, 17, 3)) * np.exp(rng.normal(0.0, 20.0)) for _ in range(n_blocks)
    ]
    hists[0][0, 0] = -0.0  # signed zeros and exact zeros stay as numpy leaves them
    hists[-1][1, :, 2] = 0.0
    log_scales = rng.normal(0.0, 3.0, n_blocks)
    totals = rng.exponential(1.0, n_blocks)
    totals[rng.random(n_blocks) < 0.25] = 0.0  # blocks without weight: factor 0
    totals[int(rng.integers(n_blocks))] = 1.0  # at least one with weight
    parts = [
        ((h,), float(ls), float(t), (0.0, 1.0))
        for h, ls, t in zip(hists, log_scales, totals, strict=True)
    ]
    scale = BlockScale.of(parts)
    assert np.max(scale.factors) == 1.0  # the largest scale's block is taken as it is
    got = scale.combine(hists)
    want = _reference(hists, scale.factors, scale.total)
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def test_block_histograms_combine_from_views_and_refuse_a_wrong_count():
    rng = np.random.default_rng(9)
    big = rng.standard_normal((2, 5, 11, 3))
    hists = [np.asfortranarray(big[0]), big[1][:, ::-1, :]]
    scale = BlockScale.of([((h,), 0.0, 1.0, (0.0, 1.0)) for h in hists])
    np.testing.assert_array_equal(
        scale.combine(hists), _reference(hists, scale.factors, scale.total)
    )
    with pytest.raises(ValueError, match="1 histograms for 2 blocks"):
        scale.combine(hists[:1])
    with pytest.raises(ValueError, match="no row carries weight"):
        BlockScale.of([((h,), 0.0, 0.0, (0.0, 1.0)) for h in hists])
