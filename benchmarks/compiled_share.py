"""Issue 54, item 2: how much of a fit runs in compiled kernels and how much in Python.

Run from the repository root, with nothing else running on the machine::

    python benchmarks/compiled_share.py --model default --recipe interactions --rows 100000
    python benchmarks/compiled_share.py --model trees --rows 100000

``default`` is ``VIBoostClassifier(random_state=0)`` as a user writes it (all cores); ``trees``
is ``benchmarks/speed.py``'s ``viboost-trees`` row (100 trees of 31 leaves, in-sample, all
cores); ``--threads 1`` runs either on one thread. The data are ``benchmarks/speed.py``'s
(``make_data``, 10% of the labels flipped). After a warm-up fit (so nothing is compiled in the
timed ones) the model is fitted twice without a profiler (the wall time: best of the two) and
once under :mod:`cProfile`. The profile's own time of every numba kernel of viboost (each
dispatcher's, matched by its Python function; it includes the call's dispatch) is the time in
compiled code; the rest of the unprofiled wall time is Python and waiting (the profiler slows
Python down, not the kernels, so the kernels' time is taken from it and Python's from the
difference; both are noisy, as the profiled fit is a third run). The share within the
profiled fit is printed too, Python's an upper bound. The kernels with the most time are
listed.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Sequence

import numba
from numba.core.registry import CPUDispatcher
from speed import make_data

import viboost
from viboost import VIBoostClassifier
from viboost._utils.parallel import KERNELS


def compiled_functions() -> set[tuple[str, int, str]]:
    """The cProfile keys ``(file, first line, name)`` of every numba kernel viboost defines."""
    keys = set()
    dispatchers: list = [k.serial for k in KERNELS.values()] + [
        k.parallel for k in KERNELS.values()
    ]
    for name, module in list(sys.modules.items()):
        if not name.startswith("viboost"):
            continue
        dispatchers += [v for v in vars(module).values() if isinstance(v, CPUDispatcher)]
    for dispatcher in dispatchers:
        code = dispatcher.py_func.__code__
        keys.add((code.co_filename, code.co_firstlineno, code.co_name))
    return keys


def model(kind: str, threads: int) -> VIBoostClassifier:
    n_jobs = None if threads == 0 else threads
    if kind == "default":
        return VIBoostClassifier(random_state=0, n_jobs=n_jobs)
    return VIBoostClassifier(
        n_estimators=101, preset="paper", max_leaf_nodes=31, leaf_weights="per-leaf",
        alpha="exact", learning_rate=0.1, noise_model=False, min_samples_leaf=20,
        random_state=0, n_jobs=-1 if threads == 0 else threads,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("default", "trees"), default="default")
    parser.add_argument("--recipe", choices=("additive", "interactions"), default="additive")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=0, help="0 (default): all cores")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    X, y = make_data(args.rows, 0, flip_rate=0.1, recipe=args.recipe)
    model(args.model, args.threads).fit(X[:20_000], y[:20_000])  # compile
    walls = []
    for _ in range(2):
        start = time.perf_counter()
        model(args.model, args.threads).fit(X, y)
        walls.append(time.perf_counter() - start)
    wall = min(walls)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    model(args.model, args.threads).fit(X, y)
    profiler.disable()
    profiled = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    compiled = compiled_functions()
    kernels = sorted(
        ((own, calls, key) for key, (_, calls, own, _, _) in stats.items() if key in compiled),
        reverse=True,
    )
    in_kernels = sum(own for own, _, _ in kernels)
    print(
        f"viboost {viboost.__version__}, numba {numba.__version__}, "
        f"{numba.get_num_threads()} threads available; {args.model} on {args.rows:,} rows "
        f"({args.recipe}), threads: {args.threads or 'all'}"
    )
    times = ", ".join(f"{w:.2f}" for w in walls)
    print(f"fit wall time (best of 2, no profiler): {wall:.2f} s ({times})")
    print(
        f"in compiled kernels (profiled): {in_kernels:.2f} s ({in_kernels / wall:.0%} of the "
        f"wall time); Python and waiting: {wall - in_kernels:.2f} s ({1 - in_kernels / wall:.0%})"
    )
    print(
        f"the profiled fit: {profiled:.2f} s, of which the kernels {in_kernels / profiled:.0%} and "
        f"Python and waiting {1 - in_kernels / profiled:.0%} (an upper bound: the profiler "
        "slows Python down)"
    )
    print(f"\n{'seconds':>8} {'calls':>7}  kernel")
    for own, calls, (filename, line, name) in kernels[: args.top]:
        print(f"{own:8.2f} {calls:7d}  {filename.split('src/')[-1]}:{line}({name})")


if __name__ == "__main__":
    main()
