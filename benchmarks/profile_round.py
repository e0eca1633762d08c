"""Where the time of one VIBoost boosting round goes: a cProfile of a short fit, per round.

Run from the repository root::

    python benchmarks/profile_round.py                        # 10^6 x 50, 3 rounds
    python benchmarks/profile_round.py --fixed-vi-iter 1      # the 1-inner-iteration variant
    python benchmarks/profile_round.py --rows 20000 --top 15  # quick look

It generates the data of ``benchmarks/speed.py`` (``make_data``: 50 standard-normal features,
10% of the labels flipped), warms up as ``speed.py`` does (fits of 2,000 rows x 5 rounds and
50,000 rows x 2 rounds: numba JIT compilation is not profiled), then fits
``VIBoostClassifier(n_estimators=ROUNDS, preset="paper")`` under cProfile and prints the top
functions by cumulative and by own ("total") time, divided by the number of rounds: ms and calls
per round. It profiles the engine at fixed rounds: preset='paper' (Algorithm 1 as printed; the
default ``preset="robust"`` would cross-fit and choose its own number of rounds).

Caveats: cProfile adds overhead to every Python call, so many small calls look more expensive
than they are; a numba-compiled function is one opaque entry (its inner work, and the threads of
``prange`` loops, are not broken down); the first round also holds one-off setup (input
validation, sorting or binning of the features) spread over the rounds by the division.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

from speed import FLIP_RATE, TRAIN_SEED, make_data, warm_up

from viboost import VIBoostClassifier

REPO = Path(__file__).resolve().parent.parent


def short_name(func: tuple[str, int, str]) -> str:
    """``file:line(function)`` with the file relative to the repository or site-packages."""
    filename, line, name = func
    if filename == "~":  # built-in
        return name
    path = filename
    if filename.startswith(str(REPO)):
        path = str(Path(filename).relative_to(REPO))
    elif "site-packages/" in filename:
        path = filename.split("site-packages/", 1)[1]
    return f"{path}:{line}({name})"


def print_top(stats: pstats.Stats, key: int, title: str, rounds: int, top: int) -> None:
    """Print the ``top`` functions sorted by field ``key`` (2: own time, 3: cumulative)."""
    rows = sorted(stats.stats.items(), key=lambda item: item[1][key], reverse=True)[:top]
    print(f"\n{title} (per round, {rounds} rounds)")
    print(f"{'calls/round':>12} {'own ms':>10} {'cum ms':>10}  function")
    for func, (_, ncalls, own, cumulative, _) in rows:
        print(
            f"{ncalls / rounds:12.1f} {own / rounds * 1e3:10.2f} {cumulative / rounds * 1e3:10.2f}"
            f"  {short_name(func)}"
        )


def main(argv: list[str] | None = None) -> int:
    """Warm up, profile the fit, print the per-round tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixed-vi-iter", type=int, default=None)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    warm_up(
        lambda rounds: VIBoostClassifier(rounds, preset="paper", fixed_vi_iter=args.fixed_vi_iter)
    )
    X, y = make_data(args.rows, TRAIN_SEED, FLIP_RATE)

    model = VIBoostClassifier(args.rounds, preset="paper", fixed_vi_iter=args.fixed_vi_iter)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    model.fit(X, y)
    profiler.disable()
    elapsed = time.perf_counter() - start

    print(
        f"VIBoostClassifier(n_estimators={args.rounds}, preset='paper', "
        f"fixed_vi_iter={args.fixed_vi_iter}) "
        f"on {args.rows:,} x {X.shape[1]}: fit {elapsed:.2f} s under cProfile, "
        f"{elapsed / args.rounds * 1e3:.1f} ms per round; "
        f"inner iterations per round: {model.n_vi_iter_.tolist()}"
    )
    stats = pstats.Stats(profiler)
    print_top(stats, 3, "Top functions by cumulative time", args.rounds, args.top)
    print_top(stats, 2, "Top functions by own (total) time", args.rounds, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
