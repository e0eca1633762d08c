"""First-fit time: how long numba's one-time compilation makes the first fits, against later ones.

Run from the repository root (on a quiet machine)::

    python benchmarks/first_fit.py

Each measurement runs in a fresh Python process with ``NUMBA_CACHE_DIR`` pointed at a new empty
directory, so nothing is cached at the start, exactly as after ``pip install``. One process
fits, in order: breast cancer (569 x 30, 100 rounds) twice, Spambase (4,601 rows: the pseudo-row
kernels) once, and 10^6 x 4 rows with ``n_jobs=-1`` (the parallel kernel forms) once, printing
each fit's time and the seconds numba spent compiling (``viboost._utils.compile.compile_seconds``).
A second process repeats the breast-cancer fit against the now-filled cache (a new process that
only loads the kernels). Every fit is the engine at fixed rounds: preset='paper' (Algorithm 1 as
printed; the default ``preset="robust"`` would cross-fit and choose its own number of rounds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import numpy as np
from sklearn.datasets import load_breast_cancer
from viboost import VIBoostClassifier
from viboost._utils.compile import compile_seconds
from viboost.datasets import load_spambase

def paper(rounds, **kwargs):
    # The engine at fixed rounds: preset='paper'.
    return VIBoostClassifier(rounds, preset="paper", **kwargs)

def timed(name, make, X, y, out):
    before, start = compile_seconds(), time.perf_counter()
    make().fit(X, y)
    out[name] = (time.perf_counter() - start, compile_seconds() - before)

out = {}
X, y = load_breast_cancer(return_X_y=True)
timed("breast cancer, first fit", lambda: paper(100), X, y, out)
if sys.argv[1] == "cold":
    timed("breast cancer, second fit", lambda: paper(100), X, y, out)
    Xs, ys = load_spambase(return_X_y=True)
    timed("Spambase (> 4,096 rows), first fit", lambda: paper(100), Xs, ys, out)
    rng = np.random.default_rng(0)
    Xl = rng.normal(size=(1_000_000, 4))
    yl = (Xl[:, 0] + rng.normal(size=1_000_000) > 0).astype(int)
    timed("10^6 x 4, n_jobs=-1, first fit", lambda: paper(5, n_jobs=-1), Xl, yl, out)
print(json.dumps(out))
"""


def run(cache: str, mode: str) -> dict[str, list[float]]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "VIBOOST_QUIET_COMPILE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="viboost-first-fit-") as cache:
        rows = list(run(cache, "cold").items())
        warm = run(cache, "warm")["breast cancer, first fit"]
        rows.append(("breast cancer, first fit in a new process (cached kernels)", warm))
    print("| fit | seconds | of which compiling |")
    print("|---|---:|---:|")
    for name, (seconds, compiling) in rows:
        print(f"| {name} | {seconds:.2f} | {compiling:.2f} |")


if __name__ == "__main__":
    main()
