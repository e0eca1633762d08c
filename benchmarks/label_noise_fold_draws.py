"""A candidate for issue 52, measured before it is built: the noise posterior pooled over
cross-fits with other fold draws.

The default's noise posterior is conditional on one draw of the cross-fit's folds: the
out-of-fold margins of that draw. Another draw gives other margins, and the posterior moves
more than its own spread admits (the issue's breast-cancer seeds). This script fits the default
``R`` times on each known-truth task of ``benchmarks/label_noise_known_truth.py`` (the same
data, splits and flips), with ``random_state = seed + 7919 r`` for ``r = 0 .. R-1`` (so other
folds), and pools the ``R`` posteriors of the share of wrong labels as an equal mixture of their
weighted draws (``noise_rate_draws_``): the mixture's mean, and its 5% and 95% quantiles as the
90% interval. ``r = 0`` alone is the default as shipped.

Reported for 1, 2, ..., R draws: coverage of the 90% intervals over the noisy fits (binary and K
classes), the share of clean fits whose interval reaches 0.01, the mean abs error of the share
and the intervals' mean width. Test errors are not reported: the pooled posterior would leave
the refit as it is. The cost is R cross-fits instead of one. (Measured at 2273139; the default
has since bagged its posterior by validation fold as well, which gave one fit the coverage of
three draws: ``docs/label_noise.md``, "Bags by validation fold".)

    python benchmarks/label_noise_fold_draws.py --splits 5 --draws 3 --n-jobs 2

``--params JSON`` fits ``VIBoostClassifier(**params)`` instead of the default, for the noise
statistics of a candidate default (issue 54: ``--draws 1 --params '{"learning_rate": 0.4}'``,
kept as ``label_noise_fold_draws_lr0.4.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from viboost.noise_fit.posterior import weighted_quantiles

HERE = Path(__file__).resolve().parent
DATA_DIR = HERE.parent.parent / "shared" / "data"
#: The step between the fold draws' seeds (a prime, so no two tasks share a draw's seed).
SEED_STEP = 7919


def pooled(draws: list[np.ndarray]) -> tuple[float, float, float, float, float]:
    """Mean, 90% interval, median and the noise model's own mean (its draws alone, without the
    point mass at "no noise", each posterior's first row) of an equal mixture of posteriors
    given as weighted draws (``noise_rate_draws_``: column 0 a value, column 1 its
    probability)."""
    values = np.concatenate([d[:, 0] for d in draws])
    weights = np.concatenate([d[:, 1] / d[:, 1].sum() for d in draws]) / len(draws)
    low, median, high = weighted_quantiles(values[:, None], weights, [0.05, 0.5, 0.95])[0]
    noise_values = np.concatenate([d[1:, 0] for d in draws])
    noise_weights = np.concatenate([d[1:, 1] / max(d[1:, 1].sum(), 1e-300) for d in draws])
    noise_mean = float(np.sum(noise_values * noise_weights) / noise_weights.sum())
    return float(np.sum(values * weights)), float(low), float(high), float(median), noise_mean


def one_task(task: tuple[str, bool, str, int, int, str, dict]) -> list[dict[str, Any]]:
    """One known-truth task fitted with ``draws`` fold draws: a row per number of draws."""
    sys.path.insert(0, str(HERE))
    import label_noise_known_truth as kt

    from viboost import VIBoostClassifier

    name, multiclass, setting, seed, n_draws, data_dir, params = task
    X_tr, _, y_noisy, flipped, _, _ = kt.drawn_task(name, multiclass, setting, seed, Path(data_dir))
    true = float(np.mean(flipped))
    draws, rows = [], []
    for r in range(n_draws):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = VIBoostClassifier(random_state=seed + SEED_STEP * r, **params)
            model.fit(X_tr, y_noisy)
        draws.append(model.noise_rate_draws_)
        rate, low, high, median, noise_mean = pooled(draws)
        rows.append({
            "data": name, "part": "multiclass" if multiclass else "binary", "setting": setting,
            "seed": seed, "draws": r + 1, "true_rate": true, "rate": rate, "low": low,
            "high": high, "covered": bool(low <= true <= high), "median": median,
            "noise_mean": noise_mean,
        })  # fmt: skip
    return rows


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Per number of draws: coverage (all, binary, K classes), clean fits reaching 0.01, mean
    abs error and mean width."""
    out = []
    for k, d in results.groupby("draws"):
        noisy, clean = d[d.setting != "0"], d[d.setting == "0"]
        out.append({
            "draws": k,
            "coverage": noisy.covered.mean(),
            "coverage binary": noisy[noisy.part == "binary"].covered.mean(),
            "coverage K": noisy[noisy.part == "multiclass"].covered.mean(),
            "clean reaching 0.01": (clean.low <= 0.01).mean(),
            "abs error": (d.rate - d.true_rate).abs().mean(),
            "abs error, median": (d["median"] - d.true_rate).abs().mean(),
            "abs error, noise model's mean": (d.noise_mean - d.true_rate).abs().mean(),
            "width": (noisy.high - noisy.low).mean(),
            "fits": len(d),
        })  # fmt: skip
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out-dir", type=Path, default=HERE)
    parser.add_argument(
        "--params",
        type=json.loads,
        default={},
        help="VIBoostClassifier parameters other than the default's, as JSON (for instance "
        "'{\"learning_rate\": 0.4}'): the noise statistics of a candidate default",
    )
    args = parser.parse_args(argv)
    if args.splits < 1 or args.draws < 1:
        parser.error("--splits and --draws must be >= 1")
    sys.path.insert(0, str(HERE))
    import label_noise as ln
    import label_noise_known_truth as kt

    tasks = [(d, False, s, k, args.draws, str(args.data_dir), args.params) for d in kt.BINARY_SETS
             for s in kt.BINARY_SETTINGS for k in range(args.splits)]  # fmt: skip
    tasks += [(d, True, s, k, args.draws, str(args.data_dir), args.params)
              for d in kt.MULTICLASS_SETS for s in kt.MULTICLASS_SETTINGS
              for k in range(args.splits)]  # fmt: skip
    if args.n_jobs > 1:
        with ProcessPoolExecutor(args.n_jobs) as pool:
            rows = [row for task_rows in pool.map(one_task, tasks) for row in task_rows]
    else:
        rows = [row for task in tasks for row in one_task(task)]
    results = pd.DataFrame(rows)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    csv = args.out_dir / "label_noise_fold_draws.csv"
    ln.write_atomic(csv, lambda p: results.to_csv(p, index=False))
    table = summary(results)
    rows_text = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
                 for row in table.itertuples(index=False)]  # fmt: skip
    command = " ".join(["python benchmarks/label_noise_fold_draws.py", *sys.argv[1:]])
    text = (
        "# The noise posterior pooled over fold draws (issue 52, a candidate)\n\n"
        f"Written by `{command}`: the known-truth tasks, each fitted with 1 to "
        f"{args.draws} draws of the cross-fit's folds, their posteriors of the share of wrong "
        "labels pooled as an equal mixture (`benchmarks/label_noise_fold_draws.py`). One draw "
        "is the default as shipped.\n\n" + ln.md_table(list(table.columns), rows_text) + "\n"
    )
    ln.write_atomic(csv.with_suffix(".md"), lambda p: Path(p).write_text(text))
    print(text)


if __name__ == "__main__":
    main()
