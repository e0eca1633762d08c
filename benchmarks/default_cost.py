"""The default's cost where the data asks for many rounds (issue 54, item 4): candidate
settings of ``VIBoostClassifier`` against today's default and CleanLearning(LightGBM), timed in
the same process on the same data.

Usage::

    python benchmarks/default_cost.py                        # both recipes, 10^4 and 10^5 rows
    python benchmarks/default_cost.py --recipes interactions --sizes 100000 --out FILE.md
    python benchmarks/default_cost.py --recipes --issue-case    # only issue 54's own case

The data are ``benchmarks/speed.py``'s (``make_data``: 50 standard-normal features, 10% of the
training labels flipped, 100,000 clean test rows; ``--recipe`` additive or interactions). Per
recipe and size, after warm-up fits that compile every kernel, each model is fitted once, one
after another (never two at once), with all cores (``n_jobs=-1``: VIBoost's default
``n_jobs=None`` since issue 54, and LightGBM's). The candidates:

- ``default``: ``VIBoostClassifier(random_state=0)``;
- ``lr0.4``: ``learning_rate=0.4`` (twice the default's step: about half the rounds);
- ``leaves16``: ``max_leaf_nodes=16`` (twice the default's leaves);
- ``cv3``: ``cv=3`` (the round count and the noise model found on 3 folds, not 5: each
  booster fits 2/3 of the rows, and there are 3 of them, not 5).

The report gives fit seconds, their ratio to CleanLearning's, the test error in % against the
Bayes error, the chosen round count (``cv_best_rounds_``) and ``noise_rate_`` (true: 10%).
Timings on a shared machine move by 10-20% from run to run: compare within one run. A candidate
is worth keeping only if it holds the accuracy on the label-noise benchmarks too
(``benchmarks/label_noise.py``), which this script does not run.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from viboost._utils.io import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import (  # noqa: E402  (a sibling script)
    FLIP_RATE,
    RECIPES,
    TEST_SEED,
    TRAIN_SEED,
    WARMUP_SEED,
    bayes_error,
    machine_lines,
    make_data,
    versions_line,
)

CANDIDATES: dict[str, dict[str, Any]] = {
    "default": {},
    "lr0.4": {"learning_rate": 0.4},
    "leaves16": {"max_leaf_nodes": 16},
    "cv3": {"cv": 3},
}


def viboost(**params: Any) -> Any:
    """A VIBoostClassifier with the default's seed and ``params``."""
    from viboost import VIBoostClassifier

    return VIBoostClassifier(random_state=0, **params)


def clean_learning() -> Any:
    """CleanLearning(LightGBM), as ``benchmarks/speed.py`` fits it."""
    from cleanlab.classification import CleanLearning
    from lightgbm import LGBMClassifier

    return CleanLearning(LGBMClassifier(random_state=0, n_jobs=-1, verbose=-1), seed=0)


def warm_up(candidates: list[str]) -> None:
    """Compile every kernel the timed fits use: each candidate on 2,000 rows and on 60,000
    (above the threshold from which the kernels run threaded); CleanLearning once."""
    for rows in (2_000, 60_000):
        X, y = make_data(rows, WARMUP_SEED, FLIP_RATE, recipe="interactions")
        for name in candidates:
            viboost(**CANDIDATES[name], n_estimators=20).fit(X, y)
    X, y = make_data(2_000, WARMUP_SEED, FLIP_RATE)
    clean_learning().fit(X, y)


#: The reproducible case of issue 54 (``--issue-case``): ``make_classification(200_000, 30,
#: n_informative=10, flip_y=0.1, random_state=0)``, a quarter held out (``random_state=0``);
#: its test labels carry the same 10% of random labels as the training ones.
ISSUE_CASE = "make_classification 200,000 x 30"


def issue_case() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training and test rows of :data:`ISSUE_CASE`."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    X, y = make_classification(200_000, 30, n_informative=10, flip_y=0.1, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    return X_train, y_train, X_test, y_test


def run(recipe: str, n: int, candidates: list[str], test_rows: int) -> list[dict[str, Any]]:
    """Fit CleanLearning and every candidate on one recipe and size (or on
    :data:`ISSUE_CASE`); one row each."""
    if recipe == ISSUE_CASE:
        X, y, X_test, y_test = issue_case()
    else:
        X, y = make_data(n, TRAIN_SEED, FLIP_RATE, recipe=recipe)
        X_test, y_test = make_data(test_rows, TEST_SEED, recipe=recipe)
    n = len(y)
    rows = []
    for name in ["cleanlab", *candidates]:
        model = clean_learning() if name == "cleanlab" else viboost(**CANDIDATES[name])
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
        row = {
            "recipe": recipe,
            "n": n,
            "model": name,
            "seconds": seconds,
            "error": 100.0 * float(np.mean(model.predict(X_test) != y_test)),
        }
        if name != "cleanlab":
            row["rounds"] = int(model.cv_best_rounds_)
            row["noise_rate"] = float(model.noise_rate_)
        rows.append(row)
        print(
            f"{recipe} N={n:,} {name}: {seconds:.2f} s, error {row['error']:.2f}%",
            file=sys.stderr,
            flush=True,
        )
    return rows


def report(rows: list[dict[str, Any]], argv: list[str]) -> str:
    """The markdown report of :func:`run`'s rows."""
    lines = [
        "# The default's cost where the data ask for many rounds (issue 54, item 4)",
        "",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        *machine_lines(),
        versions_line(),
        f"- Command: `{shlex.join(['python', *argv])}`",
        "- Every model on all cores, fitted once, one after another in one process after "
        "warm-up fits; data as `benchmarks/speed.py --recipe` (10% of the training labels "
        "flipped, 100,000 clean test rows); the issue's case (`--issue-case`): "
        "`make_classification(200_000, 30, n_informative=10, flip_y=0.1, random_state=0)`, "
        "a quarter held out, its test labels as noisy as the training ones.",
        "",
        "| recipe | N | model | fit s | / CleanLearning | test error % | Bayes error % "
        "| rounds chosen | noise rate |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    bayes = {
        recipe: f"{100.0 * bayes_error(recipe):.2f}" if recipe in RECIPES else "-"
        for recipe in {r["recipe"] for r in rows}
    }
    base = {(r["recipe"], r["n"]): r["seconds"] for r in rows if r["model"] == "cleanlab"}
    for r in rows:
        ratio = r["seconds"] / base[r["recipe"], r["n"]]
        rounds = str(r.get("rounds", "-"))
        rate = f"{r['noise_rate']:.3f}" if "noise_rate" in r else "-"
        lines.append(
            f"| {r['recipe']} | {r['n']:,} | {r['model']} | {r['seconds']:.2f} | {ratio:.2f} "
            f"| {r['error']:.2f} | {bayes[r['recipe']]} | {rounds} | {rate} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the grid and write the report (atomically)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--recipes", nargs="*", choices=RECIPES, default=list(RECIPES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument(
        "--candidates", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES)
    )
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument(
        "--issue-case",
        action="store_true",
        help="also the reproducible case of issue 54 (make_classification(200_000, 30, "
        "n_informative=10, flip_y=0.1), a quarter held out, its test labels as noisy)",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("default_cost.md"))
    args = parser.parse_args(argv)
    if min(args.sizes) < 100 or args.test_rows < 1:
        parser.error("--sizes must be at least 100 and --test-rows positive")
    warnings.simplefilter("ignore", category=UserWarning)  # LightGBM's and cleanlab's chatter
    warm_up(args.candidates)
    rows = []
    for recipe in args.recipes:
        for n in sorted(set(args.sizes)):
            rows.extend(run(recipe, n, args.candidates, args.test_rows))
    if args.issue_case:
        rows.extend(run(ISSUE_CASE, 0, args.candidates, 0))
    text = report(rows, [sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
