"""Keep freed memory in the process's heap while a long computation reuses it (glibc only).

Every pass of a distributed fit allocates the same temporaries again on the workers: the rows'
statistics, the partition's buffers, the node histograms, the new margins (numpy arrays of one
to tens of MiB). glibc serves an allocation above its *mmap threshold* with fresh pages from the
kernel and unmaps them when the array is freed, so each pass faults in and zeroes its memory
anew, a 4 KiB page at a time, inside the compiled kernels that first write it. By default the
threshold rises to the size of the largest block freed so far, which soon serves such arrays
from the heap; but dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``, to hand unused memory back to the system), and setting
any of glibc's thresholds switches that adjustment off: the threshold stays at 128 KiB for the
worker's life. What that cost the Dask fit, measured with ``benchmarks/dask.py``:
:doc:`docs/dask.md </dask>` ("Speed").

:func:`retained_heap` raises both thresholds for the duration of a block (arrays up to 32 MiB,
glibc's largest mmap threshold, come from the heap, and freed memory stays there for the next
pass), then puts back the values the process started with and returns the heap's free memory
to the system (``malloc_trim``). It acts only where the thresholds are fixed, as in a nanny's
worker: in a process started with one of glibc's ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TOP_PAD_`` or ``MALLOC_MMAP_MAX_``, whose thresholds are
then the first two variables' values or glibc's default of 128 KiB, which it restores exactly.
Elsewhere it does nothing: with the dynamic threshold (no such variable) the heap already keeps
such arrays, and a threshold once set could not be made dynamic again; nor off glibc (macOS,
musl). While it is held, the process keeps up to its peak of freed memory instead of returning
it; nested and concurrent holders (two services on one worker) share one setting, restored
when the last one leaves.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator

__all__ = ["retained_heap"]

#: mallopt(3) parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's default mmap and trim thresholds.
GLIBC_DEFAULT_THRESHOLD = 128 * 1024
#: The mmap threshold while retained: glibc's largest on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
RETAINED_MMAP_THRESHOLD = 32 * 1024 * 1024
#: The trim threshold while retained: free memory at the heap's top stays up to this much.
RETAINED_TRIM_THRESHOLD = 1 << 30

#: The environment variables that fix glibc's thresholds when set at the process's start.
FIXING_VARIABLES = (
    "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
)  # fmt: skip

_INT_MAX = 2**31 - 1

_lock = threading.Lock()
_holders = 0


def _glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc (with ``mallopt`` and ``malloc_trim``)."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # pragma: no cover - no C library to load (Windows: TypeError)
        return None
    if not all(hasattr(libc, name) for name in ("gnu_get_libc_version", "mallopt", "malloc_trim")):
        return None
    return libc


def _started_with(variable: str) -> int:
    """The value of ``variable`` the process started with (glibc reads it at start-up), or
    glibc's default when it is unset, not a number or negative."""
    try:
        value = int(os.environ.get(variable, GLIBC_DEFAULT_THRESHOLD))
    except ValueError:
        return GLIBC_DEFAULT_THRESHOLD
    return value if value >= 0 else GLIBC_DEFAULT_THRESHOLD


def _set_thresholds(libc: ctypes.CDLL, mmap: int, trim: int) -> None:
    libc.mallopt(M_MMAP_THRESHOLD, ctypes.c_int(mmap))
    libc.mallopt(M_TRIM_THRESHOLD, ctypes.c_int(trim))


@contextlib.contextmanager
def retained_heap() -> Iterator[bool]:
    """Serve the block's allocations of up to 32 MiB from the heap and keep freed memory there,
    in a glibc process whose thresholds are fixed (see the module docstring); yields whether
    it did.

    Examples
    --------
    >>> import numpy as np
    >>> with retained_heap():
    ...     total = sum(float(np.ones(1 << 20).sum()) for _ in range(3))  # a nanny's worker:
    ...     # the three arrays of 8 MiB come from the heap, the second and third reuse the first's
    >>> total
    3145728.0
    """
    global _holders
    libc = _glibc()
    if libc is None or not any(name in os.environ for name in FIXING_VARIABLES):
        yield False
        return
    with _lock:
        if _holders == 0:
            _set_thresholds(libc, RETAINED_MMAP_THRESHOLD, RETAINED_TRIM_THRESHOLD)
        _holders += 1
    try:
        yield True
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                mmap = _started_with("MALLOC_MMAP_THRESHOLD_")
                # glibc refused an mmap threshold above its largest at start-up (keeping its
                # default); mallopt takes an int, and the largest never trims, as a larger
                # trim threshold did not.
                if mmap > RETAINED_MMAP_THRESHOLD:
                    mmap = GLIBC_DEFAULT_THRESHOLD
                trim = min(_started_with("MALLOC_TRIM_THRESHOLD_"), _INT_MAX)
                _set_thresholds(libc, mmap, trim)
                libc.malloc_trim(ctypes.c_size_t(0))
