"""The accuracy of ``benchmarks/default_cost.py``'s candidates on the label-noise benchmark's
binary tasks (issue 54, item 4): a cheaper default is kept only if it keeps the accuracy there.

Usage::

    python benchmarks/default_cost_accuracy.py --candidates lr0.4 cv3 --splits 10 --n-jobs 2

Each candidate is fitted on exactly the tasks of ``python benchmarks/label_noise.py --part
binary`` (the same data sets, training sizes, flips and seeds: ``label_noise.make_noise``), and
its test error is compared, task by task, with the default's: refitted here when ``default``
is among the candidates (its errors then checked against the ``viboost`` rows of the committed
``benchmarks/label_noise.csv``), else those committed rows. The report gives per
data set and setting the mean test error of the default and of each candidate, and overall the
mean difference and the tasks where the candidate is worse by more than a point.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import label_noise as ln  # noqa: E402  (a sibling script)
from default_cost import CANDIDATES  # noqa: E402

from viboost import VIBoostClassifier  # noqa: E402
from viboost._utils.io import atomic_write_text  # noqa: E402

BINARY_SETTINGS = ("0", "10", "20", "30", "cc")


def one_task(
    dataset: str, X: np.ndarray, y: np.ndarray, setting: str, seed: int, candidates: list[str]
) -> list[dict[str, Any]]:
    """Every candidate on one task of the binary part (as ``label_noise.run_task`` splits and
    flips it): one row each."""
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, train_size=ln.TRAIN_SIZE[dataset], random_state=seed, stratify=y
    )
    y_noisy, _ = ln.make_noise(y_tr, setting, seed)
    rows = []
    for name in candidates:
        with threadpool_limits(limits=1), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model = VIBoostClassifier(random_state=seed, n_jobs=1, **CANDIDATES[name])
            model.fit(X_tr, y_noisy)
        error = 100.0 * float(np.mean(model.predict(X_te) != y_te))
        rows.append(
            {"dataset": dataset, "setting": setting, "split": seed, "model": name,
             "test_error": error}
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    """Fit the candidates, compare them with the committed default, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES), required=True)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=HERE.parents[1] / "shared" / "data")
    parser.add_argument("--out", type=Path, default=HERE / "default_cost_accuracy.md")
    args = parser.parse_args(argv)
    committed = pd.read_csv(HERE / "label_noise.csv", dtype={"setting": str})
    default = committed[committed.model == "viboost"]
    tasks = []
    for dataset in ln.DATASETS:
        data = ln.load_dataset(dataset, args.data_dir)
        if data is None:
            print(f"note: {dataset} not found under {args.data_dir}: skipped", file=sys.stderr)
            continue
        X, y = data
        for setting in BINARY_SETTINGS:
            for seed in range(args.splits):
                tasks.append((dataset, X, y, setting, seed))
    results = Parallel(n_jobs=args.n_jobs)(
        delayed(one_task)(*task, args.candidates) for task in tasks
    )
    fitted = pd.DataFrame([row for rows in results for row in rows])
    keys = ["dataset", "setting", "split"]
    base = default[[*keys, "test_error"]].rename(columns={"test_error": "committed"})
    wide = fitted.pivot_table(index=keys, columns="model", values="test_error").reset_index()
    paired = wide.merge(base, on=keys, how="inner")
    refitted = "default" in args.candidates
    if not refitted:
        paired["default"] = paired["committed"]
    args.candidates = [name for name in args.candidates if name != "default"]
    lines = [
        "# The default's cheaper candidates on the label-noise benchmark (issue 54, item 4)",
        "",
        f"Command: `python benchmarks/default_cost_accuracy.py "
        f"{' '.join(sys.argv[1:] if argv is None else argv)}`; the default's errors are the "
        "`viboost` rows of `benchmarks/label_noise.csv`; test error % on clean test labels, "
        f"{len(paired)} tasks.",
        "",
        "| data set | setting | default | " + " | ".join(args.candidates) + " |",
        "|---|---|---:|" + "---:|" * len(args.candidates),
    ]
    cells = paired.groupby(["dataset", "setting"])[["default", *args.candidates]].mean()
    for (dataset, setting), row in cells.iterrows():
        values = " | ".join(f"{row[name]:.2f}" for name in args.candidates)
        lines.append(f"| {dataset} | {setting} | {row['default']:.2f} | {values} |")
    lines.append("")
    if refitted:
        agree = float(np.mean(np.abs(paired["default"] - paired["committed"]) < 1e-9))
        lines.append(
            f"- The default refitted here gives the committed error in {agree:.0%} of the tasks."
        )
    else:
        lines.append("- The default's errors: the committed ones (not refitted).")
    for name in args.candidates:
        diff = paired[name] - paired["default"]
        worse = cells[name] - cells["default"]
        lines.append(
            f"- `{name}`: mean error {paired[name].mean():.2f}% against "
            f"{paired['default'].mean():.2f}% (mean difference {diff.mean():+.2f} points); "
            "worse by more than 0.3 point in "
            f"{int((worse > 0.3).sum())} of {len(cells)} cells, better by more in "
            f"{int((worse < -0.3).sum())}."
        )
    text = "\n".join(lines) + "\n"
    atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
