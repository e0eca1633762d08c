"""How many threads viboost's compiled kernels use: ``n_jobs``, a work threshold, numba's count.

Policy
------
- ``n_jobs`` counts as in scikit-learn (:func:`resolve_n_jobs`): -1 is all cores, -2 all but
  one, and so on. None, the default, is what a :func:`joblib.parallel_config` context sets, and
  all cores outside one, as HistGradientBoosting, LightGBM and XGBoost use all cores by default
  (issue 54): the work threshold below keeps small fits on one thread, so only fits large
  enough to gain from threads use them. The result is capped at
  ``numba.config.NUMBA_NUM_THREADS``, the size of numba's thread pool (joblib's loky workers
  start with ``NUMBA_NUM_THREADS`` set to their share of the cores, so a fit inside
  ``GridSearchCV(n_jobs=...)`` with processes is capped there).
- Below :data:`WORK_THRESHOLD` units of work (:func:`kernel_threads`) the kernels run on one
  thread whatever ``n_jobs``: a small fit or prediction never pays for waking threads, which on a
  busy machine can cost far more than the work itself.
- :func:`numba_threads` sets ``numba.set_num_threads`` for the duration of one call and restores
  the previous count, also when the call raises. :func:`fit_threads` does the same for a fit and
  also keeps BLAS (OpenBLAS, MKL) on one thread meanwhile: the fit's own BLAS calls are tiny
  (3 x 3 factorisations of the noise calibration), and OpenBLAS's threads spin for a while after
  each call, taking a core from the compiled kernels. numba's count is thread-local,
  so a fit in a joblib worker thread (``GridSearchCV(n_jobs=2)`` with the threading backend)
  changes the count of that thread only, and a new thread starts from ``NUMBA_NUM_THREADS``.

- Each parallel kernel is a :class:`ThreadedKernel` (decorator :func:`threaded_kernel`): numba
  compiles it on first use in the form the call needs, serial when the calling thread's numba
  count is 1 (``n_jobs=1`` and every call below the threshold) and with ``prange`` on
  threads otherwise. A small fit thus never touches numba's threading layer (whose ``workqueue``
  fallback, used where neither OpenMP nor TBB loads, is slow to launch even at one thread) and
  never waits for the slower parallel compile.

The kernels split their rows into chunks fixed by the data's shape, never by the thread count,
and reduce the chunks in a fixed order; numba compiles without fast-math, so the serial and the
parallel forms add the same numbers in the same order: results are bit-identical for every
``n_jobs``.

The threshold, the launch costs and the BLAS threads were measured (``python
benchmarks/contention.py --sweep`` and ``--launch``): :doc:`docs/speed.md </speed>` ("Inside the
kernels").
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterator
from numbers import Integral
from typing import Any

import joblib
import numba
from threadpoolctl import threadpool_limits

from viboost._utils.compile import is_cached

__all__ = [
    "KERNELS",
    "SUM_CHUNK_ROWS",
    "WORK_THRESHOLD",
    "ThreadedKernel",
    "fit_threads",
    "kernel_threads",
    "max_threads",
    "numba_threads",
    "resolve_n_jobs",
    "sum_chunks",
    "threaded_kernel",
]

#: Every :func:`threaded_kernel` defined so far, by ``module.qualname`` (so that code elsewhere
#: can ask about a kernel, :meth:`ThreadedKernel.cached`, without importing a private name).
KERNELS: dict[str, ThreadedKernel] = {}

#: Units of work (rows x features in a fit, rows x stumps in a prediction) below which the
#: compiled kernels run on one thread whatever ``n_jobs`` asks for; measured, see above.
WORK_THRESHOLD = 1 << 20


#: Rows per chunk of the noise models' compiled sums over rows (their objectives' sums in
#: :mod:`viboost.noise_fit`): each chunk is summed in row order and the chunks' sums are added
#: in chunk order, with boundaries from the row count only, so the sums are the same for any
#: number of threads. 4,096 rows, so that the noise posterior's searches on their subset of
#: :data:`~viboost.noise_fit.calibration.INTERVAL_ROWS` rows (16,384) run on threads too: one
#: chunk of that subset made them a fit's largest serial part (issue 54).
SUM_CHUNK_ROWS = 1 << 12


def sum_chunks(n_rows: int) -> int:
    """The number of :data:`SUM_CHUNK_ROWS`-row chunks of a sum over ``n_rows`` rows (at least
    one; one chunk is the plain sum in row order, best run on the calling thread).

    Examples
    --------
    >>> sum_chunks(0), sum_chunks(4096), sum_chunks(4097), sum_chunks(16384)
    (1, 1, 2, 4)
    """
    return max(1, -(-int(n_rows) // SUM_CHUNK_ROWS))


def max_threads() -> int:
    """The size of numba's thread pool, ``numba.config.NUMBA_NUM_THREADS``."""
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # set at import


def resolve_n_jobs(n_jobs: int | None) -> int:
    """The number of threads ``n_jobs`` asks for, counted as scikit-learn (joblib) counts.

    Parameters
    ----------
    n_jobs : int or None
        None means the ``n_jobs`` of an enclosing :func:`joblib.parallel_config` context, and
        all cores outside one (HistGradientBoosting's and LightGBM's default; scikit-learn's
        joblib estimators take 1 there); -1 means all cores, ``-k`` all but ``k - 1``; 0 is
        invalid.

    Returns
    -------
    int
        At least 1 and at most :func:`max_threads`.

    Examples
    --------
    >>> import joblib
    >>> resolve_n_jobs(None) == resolve_n_jobs(-1) == max_threads()
    True
    >>> resolve_n_jobs(1)
    1
    >>> with joblib.parallel_config(n_jobs=1):
    ...     resolve_n_jobs(None)
    1
    """
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral)):
        raise TypeError(f"n_jobs must be an int or None, got {n_jobs!r}")
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None, a positive count or -1")
    if n_jobs is None:
        # The context's n_jobs (None outside any parallel_config that sets it): all cores.
        n_jobs = joblib.parallel.get_active_backend()[1]
        if n_jobs is None:
            return max_threads()
    return max(1, min(int(joblib.effective_n_jobs(n_jobs)), max_threads()))


def kernel_threads(n_jobs: int | None, work: float) -> int:
    """Threads for the compiled kernels of one call: 1 below :data:`WORK_THRESHOLD`.

    Parameters
    ----------
    n_jobs : int or None
        As in :func:`resolve_n_jobs`.
    work : float
        The call's work: rows x features for a fit, rows x stumps for a prediction.

    Returns
    -------
    int

    Examples
    --------
    >>> kernel_threads(-1, 569 * 30)
    1
    >>> kernel_threads(-1, 10**6 * 4) == max_threads()
    True
    """
    threads = resolve_n_jobs(n_jobs)  # validates n_jobs even for small work
    return 1 if work < WORK_THRESHOLD else threads


@contextlib.contextmanager
def numba_threads(n_threads: int) -> Iterator[int]:
    """Run numba's parallel kernels on ``n_threads`` threads inside the ``with`` block.

    The calling thread's previous count is restored on exit, also on an exception. The count is
    capped at :func:`max_threads`.

    Parameters
    ----------
    n_threads : int
        At least 1.

    Yields
    ------
    int
        The count in force.

    Examples
    --------
    >>> import numba
    >>> before = numba.get_num_threads()
    >>> with numba_threads(1) as n:
    ...     n, numba.get_num_threads()
    (1, 1)
    >>> numba.get_num_threads() == before
    True
    """
    n = max(1, min(int(n_threads), max_threads()))
    before = numba.get_num_threads()
    if n == before:  # nothing to change (and nothing to restore)
        yield n
        return
    numba.set_num_threads(n)
    try:
        yield n
    finally:
        numba.set_num_threads(before)


@contextlib.contextmanager
def fit_threads(n_threads: int) -> Iterator[int]:
    """:func:`numba_threads` ``(n_threads)`` with BLAS limited to one thread inside the block
    (see the module docstring); the previous limits are restored on exit.

    Examples
    --------
    >>> import numba
    >>> with fit_threads(1) as n:
    ...     n, numba.get_num_threads()
    (1, 1)
    """
    with threadpool_limits(limits=1, user_api="blas"), numba_threads(n_threads) as n:
        yield n


class ThreadedKernel:
    """A numba kernel with ``prange`` loops, compiled lazily as a serial and a parallel form.

    A call runs the serial form (``prange`` as a plain loop) when the calling thread's numba
    thread count is 1, as inside :func:`numba_threads` ``(1)``, and the parallel form
    (``numba.njit(parallel=True)``) otherwise. Each form compiles on its first call only, and
    each has its own on-disk cache entry (the serial copy of the function is named
    ``<name>_serial``, which names numba's cache files).

    With ``calls``, the kernel is a compiled caller of other threaded kernels (a driver that
    runs several of them in one call, such as the in-memory growth of
    :func:`viboost.boosting.partition.grow_in_place`): each name of ``calls`` is a global of
    its source that names a :class:`ThreadedKernel`, bound in the serial form to that kernel's
    serial form and in the parallel form to its parallel one. The caller has no ``prange`` of
    its own, so both its forms are plain ``numba.njit``; a fit on one thread thus never
    compiles a parallel form through it, as with the kernels it calls.

    Parameters
    ----------
    py_func : callable
        The kernel's Python source, written for ``numba.njit``.
    options : dict
        Further options of ``numba.njit`` for both forms (such as ``cache=True``).
    calls : dict, default=None
        Global name to :class:`ThreadedKernel`, for a caller of other kernels (above).

    Attributes
    ----------
    serial, parallel : numba dispatcher
        The two forms.
    """

    serial: Any
    parallel: Any

    def __init__(
        self,
        py_func: Callable[..., Any],
        options: dict[str, Any],
        calls: dict[str, ThreadedKernel] | None = None,
    ) -> None:
        def form(suffix: str, bind: dict[str, Any]) -> Callable[..., Any]:
            func_globals = py_func.__globals__
            if bind:  # (a copy of the globals: the module's own names stay as they are)
                func_globals = {**func_globals, **bind}
            func = types.FunctionType(
                py_func.__code__,
                func_globals,
                py_func.__name__,
                py_func.__defaults__,
                py_func.__closure__,
            )
            func.__qualname__ = py_func.__qualname__ + suffix
            func.__module__ = py_func.__module__
            func.__doc__ = py_func.__doc__
            return func

        calls = calls or {}
        self.serial = numba.njit(**options)(
            form("_serial", {name: kernel.serial for name, kernel in calls.items()})
        )
        if calls:
            self.parallel = numba.njit(**options)(
                form("", {name: kernel.parallel for name, kernel in calls.items()})
            )
        else:
            self.parallel = numba.njit(parallel=True, **options)(py_func)
        functools.update_wrapper(self, py_func)

    def __call__(self, *args: Any) -> Any:
        if numba.get_num_threads() == 1:
            return self.serial(*args)
        return self.parallel(*args)

    def cached(self, parallel: bool) -> bool:
        """Whether numba's on-disk cache holds the parallel or the serial form, current with
        the source (:func:`viboost._utils.compile.is_cached`)."""
        return is_cached(self.parallel if parallel else self.serial)


def threaded_kernel(
    calls: dict[str, ThreadedKernel] | None = None, **options: Any
) -> Callable[[Callable[..., Any]], ThreadedKernel]:
    """Decorator: ``@threaded_kernel(cache=True)`` makes a :class:`ThreadedKernel`
    (``calls``: of a compiled caller of other threaded kernels, as there).

    Examples
    --------
    >>> import numba, numpy as np
    >>> @threaded_kernel()
    ... def total(x):
    ...     out = np.zeros(2)
    ...     for c in numba.prange(2):  # fixed chunks: the same sums at any thread count
    ...         for i in range(c, x.shape[0], 2):
    ...             out[c] += x[i]
    ...     return out[0] + out[1]
    >>> with numba_threads(1):
    ...     print(total(np.arange(10.0)))
    45.0
    >>> print(total.parallel(np.arange(10.0)))
    45.0
    """

    def wrap(py_func: Callable[..., Any]) -> ThreadedKernel:
        kernel = ThreadedKernel(py_func, options, calls)
        KERNELS[f"{py_func.__module__}.{py_func.__qualname__}"] = kernel
        return kernel

    return wrap
