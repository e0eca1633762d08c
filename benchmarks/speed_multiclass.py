"""Fit time of the K-class default against CleanLearning(LightGBM) and LightGBM, in one run.

Synthetic K-class data: ``N x 20`` standard-normal features, true classes the argmax of
``tanh(X W) * 3`` plus pairwise products (interactions), 20% of the training labels moved to a
random other class, 50,000 clean test rows. Every model is timed in this process on the same
data, one after the other, with the same threads (``--threads``), after a small warm-up fit of
each (numba compiles on first use); one run per size. Prints and writes a Markdown table with
the fit times, their ratio to CleanLearning's, and the test errors.

    python benchmarks/speed_multiclass.py --sizes 10000 100000 --classes 5
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

N_FEATURES = 20
FLIP_RATE = 0.2
TEST_ROWS = 50_000
SEED = 20_261_125


def make_data(n_rows: int, n_classes: int, seed: int) -> tuple[np.ndarray, ...]:
    """Training rows, their noisy labels, test rows and their true labels."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows + TEST_ROWS, N_FEATURES))
    weights = rng.normal(size=(N_FEATURES, n_classes))
    scores = np.tanh(X @ weights) * 3.0 + 0.5 * X[:, :n_classes] * X[:, n_classes : 2 * n_classes]
    true = np.argmax(scores, axis=1)
    y = true[:n_rows].copy()
    moved = rng.random(n_rows) < FLIP_RATE
    y[moved] = (y[moved] + rng.integers(1, n_classes, moved.sum())) % n_classes
    return X[:n_rows], y, X[n_rows:], true[n_rows:]


def models(threads: int) -> dict:
    from cleanlab.classification import CleanLearning
    from lightgbm import LGBMClassifier

    from viboost import VIBoostClassifier

    def lgbm():
        return LGBMClassifier(random_state=0, verbose=-1, n_jobs=threads)

    return {
        "viboost": lambda: VIBoostClassifier(random_state=0, n_jobs=threads),
        "cleanlab": lambda: CleanLearning(lgbm(), seed=0),
        "lightgbm": lgbm,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument("--threads", type=int, default=-1)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("speed_multiclass.md"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    factories = models(args.threads)
    X, y, *_ = make_data(2_000, args.classes, SEED + 1)
    for make in factories.values():  # warm-up: compile, load libraries
        make().fit(X, y)
    lines = [
        "# K-class fit time: VIBoost's default against CleanLearning(LightGBM)",
        "",
        f"`python benchmarks/speed_multiclass.py --sizes {' '.join(map(str, args.sizes))} "
        f"--classes {args.classes} --threads {args.threads}`; {platform.processor() or 'cpu'}, "
        f"{os.cpu_count()} cores; one run per size, all models in one process, same data.",
        "",
        "| rows | classes | VIBoost (s) | CleanLearning (s) | LightGBM (s) "
        "| VIBoost / CleanLearning | test error % VIBoost / CleanLearning / LightGBM "
        "| VIBoost rounds | noise rate (true 0.20) |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for n_rows in args.sizes:
        X, y, X_test, y_test = make_data(n_rows, args.classes, SEED)
        times, errors, fitted = {}, {}, {}
        for name, make in factories.items():
            model = make()
            start = time.perf_counter()
            model.fit(X, y)
            times[name] = time.perf_counter() - start
            errors[name] = 100.0 * float(np.mean(model.predict(X_test) != y_test))
            fitted[name] = model
        vib = fitted["viboost"]
        line = (
            f"| {n_rows:,} | {args.classes} | {times['viboost']:.1f} | {times['cleanlab']:.1f} | "
            f"{times['lightgbm']:.1f} | {times['viboost'] / times['cleanlab']:.2f} | "
            f"{errors['viboost']:.2f} / {errors['cleanlab']:.2f} / {errors['lightgbm']:.2f} | "
            f"{len(vib.estimators_)} | {vib.noise_rate_:.3f} |"
        )
        print(line, flush=True)
        lines.append(line)
    tmp = args.out.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(args.out)  # atomic: a partial table never replaces a full one


if __name__ == "__main__":
    main()
