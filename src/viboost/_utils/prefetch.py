"""A software prefetch for the compiled kernels that read rows out of order.

A tree node's rows are a sorted but sparse subset of all rows, so a kernel that reads each
row's bins (the node histograms) waits on a cache miss per row: the hardware prefetchers follow
strides, not a list of row indices. :func:`prefetch` asks the CPU to load the cache line of a
row that the loop will reach some iterations later (LLVM's ``llvm.prefetch``, a PREFETCHT0 on
x86 and PRFM on ARM), as LightGBM's histogram loops do. It is a hint: it changes no value the
kernels compute, only when the memory arrives. Where the data already sits in a near cache it
only costs instructions, so the partition's pass over the split feature's column (held in L2)
does without it (measured: :doc:`docs/speed.md </speed>` ("Inside the kernels"))."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["prefetch"]


# Compiled callers leave out ``typingctx``, which numba's type hints of an @intrinsic count as an
# argument: hence their ``# type: ignore[call-arg]``.
@intrinsic
def prefetch(typingctx, array, index):  # pragma: no cover - compiled
    """Prefetch (for reading, into every cache level) the cache line that holds
    ``array[index]`` (``index``: an integer for a 1-d array, a tuple of ``ndim`` integers
    otherwise; any layout). A hint only: nothing is read, so an index past the end faults
    no more than none would (the callers keep it within the array all the same)."""
    if not isinstance(array, types.Array):
        return None
    if isinstance(index, types.Integer) and array.ndim == 1:
        index_types = [index]
    elif (
        isinstance(index, types.BaseTuple)
        and len(index) == array.ndim
        # numba's BaseTuple declares no __iter__ (its tuple kinds each define one).
        and all(isinstance(member, types.Integer) for member in index)  # type: ignore[attr-defined]
    ):
        index_types = list(index)  # type: ignore[call-overload]
    else:
        return None
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        data = context.make_array(array_type)(context, builder, args[0])
        if isinstance(index_type, types.Integer):
            indices = [args[1]]
        else:
            indices = cgutils.unpack_tuple(builder, args[1], len(index_types))
        indices = [
            context.cast(builder, value, value_type, types.intp)
            for value, value_type in zip(indices, index_types, strict=True)
        ]
        item = cgutils.get_item_pointer(
            context, builder, array_type, data, indices, wraparound=False
        )
        byte_pointer = builder.bitcast(item, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        # Named by the pointer's type ("llvm.prefetch.p0", or ".p0i8" with typed pointers).
        function = builder.module.declare_intrinsic(
            "llvm.prefetch",
            [byte_pointer.type],
            fnty=ir.FunctionType(ir.VoidType(), [byte_pointer.type, i32, i32, i32]),
        )
        # (address, 0: read, 3: keep in every cache level, 1: data cache)
        builder.call(
            function,
            [byte_pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)],
        )
        return context.get_dummy_value()

    return sig, codegen
