"""Scratch arrays reused from one tree to the next, so a fit does not fault in fresh memory.

A tree's growth needs large temporaries that live for one tree only: the rows' statistics in
partition order, the partition's buffers, the per-chunk partial histograms. Allocated afresh
every round, they cost more than their arithmetic: glibc hands blocks of this size back to the
kernel when they are freed (``munmap``, or trimming the heap's top), so the next round's arrays
arrive as untouched pages that the kernel must fault in and zero one 4 KiB page at a time, and
faults taken on two threads at once serialise in the kernel (what that cost a fit:
:doc:`docs/speed.md </speed>` ("Inside the kernels")).

:class:`ScratchArrays` keeps the buffers a fit has used and hands them out again; the growth
returns each one when it is done with it, or all at once when its tree is grown
(:meth:`ScratchArrays.reclaim`). It never holds more than the largest set of
temporaries in use at one time, which is what the fit peaks at anyway. Values in a buffer taken
from the pool are arbitrary (as with :func:`numpy.empty`).

Every array handed out starts on a 64-byte boundary (:func:`aligned_empty`), a cache line. The
histograms add a row's statistics to a 32-byte slot in one vector operation
(:mod:`viboost.boosting.histogram`); numpy's large arrays start 16 bytes past a boundary (glibc's
block header), so every slot straddled two 32-byte halves and every other one two cache lines;
aligned, the histogram kernels run faster, whole fits by less than their run-to-run noise
(measured: :doc:`docs/speed.md </speed>` ("Inside the kernels")).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["ALIGNMENT", "ScratchArrays", "aligned_empty"]

#: Bytes to which every scratch array's start is aligned (a cache line).
ALIGNMENT = 64
_SLACK = ALIGNMENT // 8  # 8-byte items allocated beyond the size, to shift the start


def _bytes_to_boundary(buf: np.ndarray) -> int:
    """Bytes from the start of ``buf`` to the first :data:`ALIGNMENT` boundary in it."""
    return -buf.ctypes.data % ALIGNMENT


def _aligned_start(buf: np.ndarray) -> int:
    """The first item of the 8-byte buffer ``buf`` that starts on an :data:`ALIGNMENT`
    boundary."""
    return _bytes_to_boundary(buf) // 8


def aligned_empty(shape: tuple[int, ...] | int, dtype: DTypeLike = np.float64) -> np.ndarray:
    """:func:`numpy.empty` whose data start on a 64-byte boundary (:data:`ALIGNMENT`).

    Examples
    --------
    >>> a = aligned_empty((1000, 3))
    >>> a.shape, a.ctypes.data % 64, a.flags.c_contiguous
    ((1000, 3), 0, True)
    """
    item = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    n_bytes = math.prod(int(n) for n in shape) * item.itemsize
    buf = np.empty(n_bytes + ALIGNMENT, dtype=np.uint8)
    start = _bytes_to_boundary(buf)
    return buf[start : start + n_bytes].view(item).reshape(shape)


class ScratchArrays:
    """A pool of reusable float64, int64 and uint8 buffers (one fit's temporaries, one thread).

    Examples
    --------
    >>> scratch = ScratchArrays()
    >>> a = scratch.take((1000, 3))
    >>> scratch.give(a)
    >>> b = scratch.take((10, 3))  # the same memory again
    >>> bool(np.shares_memory(a, b))
    True
    """

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._held: list[np.ndarray] = []
        # Per buffer in the pool (by id): its first aligned item, noted when the buffer is made
        # or given back (reading an array's address costs microseconds, and a fit takes
        # thousands); an id that a freed buffer left behind is overwritten then.
        self._starts: dict[int, int] = {}

    def _note(self, buf: np.ndarray) -> np.ndarray:
        self._starts[id(buf)] = _aligned_start(buf)
        return buf

    def take(
        self, shape: tuple[int, ...], dtype: DTypeLike = np.float64, hold: bool = False
    ) -> np.ndarray:
        """An uninitialised array of ``shape`` and ``dtype`` (``np.float64``, ``np.int64`` or
        ``np.uint8``), starting on a 64-byte boundary, on the smallest free buffer that holds
        it, or on a new one.
        ``hold=True``: it comes back with every other held array at :meth:`reclaim` (for
        arrays that many hands keep, such as a tree's node histograms, until the tree is
        grown)."""
        item = np.dtype(dtype)
        if item.itemsize not in (1, 8):
            raise ValueError(f"scratch buffers hold 8-byte or 1-byte items, not {item}")
        items = math.prod(int(n) for n in shape)  # (np.prod costs several microseconds)
        size = -(-items // (8 // item.itemsize))  # in 8-byte items
        starts = self._starts
        fitting = [k for k, buf in enumerate(self._free) if buf.size - starts[id(buf)] >= size]
        if fitting:
            buf = self._free.pop(min(fitting, key=lambda k: self._free[k].size))
        else:
            buf = self._note(np.empty(max(size, 1) + _SLACK, dtype=np.float64))
        if hold:
            self._held.append(buf)
        start = starts[id(buf)]
        return buf[start : start + size].view(item)[:items].reshape(shape)

    def __reduce__(self) -> tuple:
        """A pool travels empty (pickled with a block's partitions, say): its free buffers are
        this process's memory, not values."""
        return (type(self), ())

    def reclaim(self) -> None:
        """Take back every array taken with ``hold=True``; none of them may be used after."""
        self._free.extend(self._held)
        self._held = []

    def give(self, *arrays: np.ndarray | None) -> None:
        """Return arrays from :meth:`take` (None is skipped); they must not be used after."""
        for array in arrays:
            if array is None:
                continue
            base = array
            while base.base is not None:
                base = base.base
            if not isinstance(base, np.ndarray) or base.dtype != np.float64 or base.ndim != 1:
                raise ValueError("give() takes arrays from take() only")
            if any(buf is base for buf in self._free):
                raise ValueError("this buffer was given back already")
            self._free.append(self._note(base))
