"""Fit time under CPU contention for each ``n_jobs``, and the measurements behind the threshold.

Run from the repository root::

    python benchmarks/contention.py            # the table, printed and written to --out
    python benchmarks/contention.py --sweep    # 1 vs 2 threads over rows x features (threshold)
    python benchmarks/contention.py --launch   # cost of one parallel kernel launch

Every fit but one is the engine at fixed rounds: preset='paper' (Algorithm 1 as printed,
exactly the given number of rounds); the table also times the library's default fit
(``preset="robust"``: cross-fitted boosters of trees, early stopping, a refit) of the small data.

The table (default mode) times, in one run and in this process:

- a small fit: breast cancer (569 rows x 30 features, bundled with scikit-learn), 100 rounds,
  with the default ``n_jobs`` (None), ``n_jobs=1``, ``n_jobs=2``, and "2 threads, no threshold"
  (``n_jobs=2`` with ``viboost._utils.parallel.WORK_THRESHOLD`` set to 0, which is what every fit
  did before the threshold existed: numba's default of all cores for every kernel);
- the default fit of the same data, ``VIBoostClassifier(random_state=0)``, with ``n_jobs``
  None, 1 and -1;
- a large fit: 10^6 rows x 4 features (i.i.d. standard normal, a noisy linear label), 5 rounds,
  with ``n_jobs=1`` and ``n_jobs=2``;

each on an idle machine and with two busy background processes (``multiprocessing`` processes
spinning in pure Python, started by this script, stopped by a deadline and terminated at the
end). Times are medians of ``--repeats`` fits (default 11 small, 5 large; the settings take
turns, one fit each), after warm-up fits that load or compile the numba kernels. The ratio
column divides by the ``n_jobs=1`` fit under the same load. "Idle" means no process of this
script's; other work on the machine is not controlled, so run it on a quiet machine.

``--sweep`` times 5-round fits of ``n`` rows x ``d`` features at one and two threads (threshold
forced to 0, idle, median of ``--repeats``) and ``decision_function`` of 100 stumps on ``n``
rows; the threshold :data:`viboost._utils.parallel.WORK_THRESHOLD` is where two threads start to
win. ``--launch`` times one call of a small parallel kernel (the loop of ``_stump_outputs`` on 569
rows) at two threads, at one thread, and compiled without ``parallel``, idle and loaded.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import numba
import numpy as np
from sklearn.base import clone

import viboost._utils.parallel as parallel
from viboost import VIBoostClassifier

LOAD_PROCESSES = 2
LOAD_LIMIT_S = 600.0  # a background process stops by itself after this long, whatever happens


def _spin(deadline: float) -> None:
    """Keep one core busy in pure Python until ``deadline`` (time.time())."""
    x = 0
    while time.time() < deadline:
        for _ in range(10_000):
            x += 1


@contextmanager
def background_load(n_processes: int) -> Iterator[None]:
    """``n_processes`` busy processes for the duration of the block (bounded by LOAD_LIMIT_S)."""
    procs = [
        mp.Process(target=_spin, args=(time.time() + LOAD_LIMIT_S,), daemon=True)
        for _ in range(n_processes)
    ]
    for p in procs:
        p.start()
    time.sleep(0.5 if procs else 0.0)  # let them get going
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=10)


@contextmanager
def no_threshold() -> Iterator[None]:
    """Every kernel on the threads ``n_jobs`` asks for: the behaviour before the threshold."""
    saved = parallel.WORK_THRESHOLD
    parallel.WORK_THRESHOLD = 0
    try:
        yield
    finally:
        parallel.WORK_THRESHOLD = saved


def _fit(model: VIBoostClassifier, X: np.ndarray, y: np.ndarray) -> VIBoostClassifier:
    return clone(model).fit(X, y)


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def large_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X[:, 0] - 0.5 * X[:, 1 % d] + 0.5 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def warm_up() -> None:
    """Load or compile every kernel a fit and a prediction use (small and compressed rounds)."""
    X, y = large_data(50_000, 4, seed=1)
    for n_jobs in (1, 2):
        with no_threshold():
            VIBoostClassifier(2, preset="paper", n_jobs=n_jobs).fit(X, y).decision_function(X)
            VIBoostClassifier(2, preset="paper", n_jobs=n_jobs).fit(X[:500], y[:500])
        VIBoostClassifier(random_state=0, n_jobs=n_jobs).fit(X[:500], y[:500])


def table(small_repeats: int, large_repeats: int) -> str:
    from sklearn.datasets import load_breast_cancer

    Xs, ys = load_breast_cancer(return_X_y=True)
    Xl, yl = large_data(1_000_000, 4)
    small = [
        ("default (None)", {}, False),
        ("n_jobs=1", {"n_jobs": 1}, False),
        ("n_jobs=2", {"n_jobs": 2}, False),
        ("2 threads, no threshold", {"n_jobs": 2}, True),
    ]
    large = [("n_jobs=1", {"n_jobs": 1}), ("n_jobs=2", {"n_jobs": 2})]
    robust = [("default (None)", {}), ("n_jobs=1", {"n_jobs": 1}), ("n_jobs=-1", {"n_jobs": -1})]
    rows = []
    for load in (0, LOAD_PROCESSES):
        condition = "idle" if load == 0 else f"{load} busy processes"
        with background_load(load):
            # The settings take turns, one fit each per turn, so that drifts of the machine
            # (frequency, the load's scheduling) reach all of them alike.
            times: dict[str, list[float]] = {label: [] for label, _, _ in small}
            for _ in range(small_repeats):
                for label, kwargs, forced in small:
                    fit = partial(_fit, VIBoostClassifier(100, preset="paper", **kwargs), Xs, ys)
                    with no_threshold() if forced else nullcontext():
                        times[label].append(median_time(fit, 1))
            for label, _, _ in small:
                seconds = statistics.median(times[label])
                rows.append(("breast cancer 569 x 30, 100 rounds", condition, label, seconds))
                print(f"  {rows[-1]}", file=sys.stderr)
            times = {label: [] for label, _ in robust}
            for _ in range(small_repeats):
                for label, kwargs in robust:
                    fit = partial(_fit, VIBoostClassifier(random_state=0, **kwargs), Xs, ys)
                    times[label].append(median_time(fit, 1))
            for label, _ in robust:
                seconds = statistics.median(times[label])
                rows.append(("breast cancer 569 x 30, default (robust) fit", condition, label,
                             seconds))  # fmt: skip
                print(f"  {rows[-1]}", file=sys.stderr)
            times = {label: [] for label, _ in large}
            for _ in range(large_repeats):
                for label, kwargs in large:
                    model = VIBoostClassifier(5, preset="paper", random_state=0, **kwargs)
                    fit = partial(_fit, model, Xl, yl)
                    times[label].append(median_time(fit, 1))
            for label, _ in large:
                seconds = statistics.median(times[label])
                rows.append(("10^6 x 4, 5 rounds", condition, label, seconds))
                print(f"  {rows[-1]}", file=sys.stderr)
    single = {(what, condition): s for what, condition, label, s in rows if label == "n_jobs=1"}
    lines = [
        "| fit | load | n_jobs | median s | x n_jobs=1 (same load) |",
        "|---|---|---|---:|---:|",
    ]
    for what, condition, label, seconds in rows:
        ratio = seconds / single[what, condition]
        lines.append(f"| {what} | {condition} | {label} | {seconds:.3f} | {ratio:.2f} |")
    return "\n".join(lines)


def sweep(repeats: int) -> str:
    """1 vs 2 threads, no threshold, idle: fits over rows x features, predictions over rows."""
    lines = [
        "| call | rows | features / stumps | work | 1 thread s | 2 threads s | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    with no_threshold():
        for n, d in [
            (569, 30), (4_096, 30), (16_384, 30), (32_768, 30), (65_536, 4), (65_536, 30),
            (131_072, 4), (131_072, 30), (262_144, 4), (524_288, 4), (1_000_000, 4),
        ]:  # fmt: skip
            X, y = large_data(n, d)
            t = [
                median_time(
                    lambda k=k, X=X, y=y: VIBoostClassifier(5, preset="paper", n_jobs=k).fit(X, y),
                    repeats,
                )
                for k in (1, 2)
            ]
            lines.append(f"| fit, 5 rounds | {n} | {d} | {n * d:.1e} | {t[0]:.4f} | {t[1]:.4f} "
                         f"| {t[0] / t[1]:.2f} |")  # fmt: skip
            print(lines[-1], file=sys.stderr)
        X, y = large_data(5_000, 4)
        model = VIBoostClassifier(100, preset="paper").fit(X, y)
        for n in (1_000, 10_000, 30_000, 100_000, 1_000_000):
            Xp, _ = large_data(n, 4, seed=2)
            t = []
            for k in (1, 2):
                model.set_params(n_jobs=k)
                t.append(median_time(lambda Xp=Xp: model.decision_function(Xp), repeats))
            lines.append(f"| decision_function | {n} | 100 | {n * 100:.1e} | {t[0]:.4f} "
                         f"| {t[1]:.4f} | {t[0] / t[1]:.2f} |")  # fmt: skip
            print(lines[-1], file=sys.stderr)
    return "\n".join(lines)


def _outputs(column, position, polarity):  # the loop of viboost's _stump_outputs kernel
    n = column.shape[0]
    out = np.empty(n)
    for i in numba.prange(n):
        out[i] = float(polarity) if column[i] >= position else -float(polarity)
    return out


def launch() -> str:
    """Microseconds per call of a small parallel kernel at 2 and 1 threads, and a serial copy."""
    parallel_kernel = numba.njit(parallel=True)(_outputs)
    serial_kernel = numba.njit(_outputs)  # prange is range when not parallel
    column = np.random.default_rng(0).integers(0, 255, 569).astype(np.uint8)
    parallel_kernel(column, 3, 1)
    serial_kernel(column, 3, 1)

    def per_call(fn: Callable, threads: int, calls: int = 2_000) -> float:
        with parallel.numba_threads(threads):
            return 1e6 * median_time(lambda: [fn(column, 3, 1) for _ in range(calls)], 5) / calls

    lines = [
        f"numba threading layer: {numba.threading_layer()}",
        "",
        "| load | parallel kernel, 2 threads | parallel kernel, 1 thread | plain njit |",
        "|---|---:|---:|---:|",
    ]
    for load in (0, LOAD_PROCESSES):
        with background_load(load):
            cells = [
                per_call(parallel_kernel, 2),
                per_call(parallel_kernel, 1),
                per_call(serial_kernel, 1),
            ]
        condition = "idle" if load == 0 else f"{load} busy processes"
        lines.append(f"| {condition} | " + " | ".join(f"{c:.1f} us" for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--sweep", action="store_true", help="threshold measurement")
    mode.add_argument("--launch", action="store_true", help="kernel launch cost")
    parser.add_argument("--repeats", type=int, default=11, help="small-fit repeats (median)")
    parser.add_argument("--large-repeats", type=int, default=5, help="large-fit repeats")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("contention.md"))
    args = parser.parse_args()

    print(f"numba {numba.__version__}, NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}, "
          f"{mp.cpu_count()} CPUs; warming up", file=sys.stderr)  # fmt: skip
    warm_up()
    if args.launch:
        print(launch())
        return
    if args.sweep:
        print(sweep(args.repeats))
        return
    load_before = os.getloadavg()[0]  # other work on the machine, not this script's
    text = table(args.repeats, args.large_repeats)
    header = (
        "# Fit time under contention\n\n"
        f"`python benchmarks/contention.py`: numba {numba.__version__} "
        f"({numba.threading_layer()} layer), NUMBA_NUM_THREADS="
        f"{numba.config.NUMBA_NUM_THREADS}, {mp.cpu_count()} CPUs. Medians of {args.repeats} "
        f"small and {args.large_repeats} large fits; 1-minute load average before the run "
        f'{load_before:.2f} ("idle" adds no process of this script\'s).\n\n'
    )
    print(text)
    args.out.write_text(header + text + "\n")


if __name__ == "__main__":
    main()
