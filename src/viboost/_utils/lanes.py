"""Vector additions into float64 slots for the compiled histogram kernels.

A histogram kernel adds each row's statistics to one slot per feature. As scalar additions,
each waits on the memory it just wrote whenever consecutive rows share a slot; as one vector
load, add and store per slot, the statistics of a row are one memory operation
(:mod:`viboost.boosting.histogram`; measured: :doc:`docs/speed.md </speed>` ("Inside the
kernels")). Each lane is an IEEE addition, the same as the scalar one, so the sums are bit for
bit those of scalar additions in the same order.

``add_four_lanes`` adds three values and a zero pad (a 32-byte slot);
``add_two_lanes`` two values (a 16-byte slot). Compiled callers leave out ``typingctx``,
which numba's type hints of an ``@intrinsic`` count as an argument: hence their
``# type: ignore[call-arg]``. numba's on-disk cache of a kernel that calls them holds their
code and is keyed by the kernel's own source file only: a change here needs a change in those
modules (:mod:`viboost.boosting.histogram`) or a cleared cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["add_four_lanes", "add_two_lanes"]


def _is_flat_float64(hist: Any) -> bool:
    """Whether numba type ``hist`` is a C-contiguous 1-d float64 array."""
    return (
        isinstance(hist, types.Array)
        and hist.ndim == 1
        and hist.layout == "C"
        and hist.dtype == types.float64
    )


def _lane_addition(n_lanes: int) -> Callable[..., Any]:
    """The code of ``hist[offset:offset + n_lanes] += (values..., 0...)``: one vector load,
    add and store of ``n_lanes`` float64 (the values fill the first lanes, zeros the rest)."""

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        lanes = ir.VectorType(ir.DoubleType(), n_lanes)
        stats = ir.Constant(lanes, [0.0] * n_lanes)
        for lane, value in enumerate(args[2:]):
            stats = builder.insert_element(stats, value, ir.Constant(ir.IntType(32), lane))
        pointer = builder.bitcast(builder.gep(array.data, [args[1]]), lanes.as_pointer())
        builder.store(builder.fadd(builder.load(pointer, align=8), stats), pointer, align=8)
        return context.get_dummy_value()

    return codegen


@intrinsic
def add_four_lanes(typingctx, hist, offset, a, b, c):  # pragma: no cover - compiled
    """``hist[offset:offset + 4] += (a, b, c, 0)`` as one 4-lane load, add and store (the
    fourth lane, a pad, adds 0 to 0). ``hist``: a C-contiguous 1-d float64 array with at least
    ``offset + 4`` items."""
    if not _is_flat_float64(hist):
        return None
    sig = types.void(hist, types.int64, types.float64, types.float64, types.float64)
    return sig, _lane_addition(4)


@intrinsic
def add_two_lanes(typingctx, hist, offset, a, b):  # pragma: no cover - compiled
    """``hist[offset:offset + 2] += (a, b)`` as one 2-lane load, add and store. ``hist``: a
    C-contiguous 1-d float64 array with at least ``offset + 2`` items."""
    if not _is_flat_float64(hist):
        return None
    sig = types.void(hist, types.int64, types.float64, types.float64)
    return sig, _lane_addition(2)
