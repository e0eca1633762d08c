"""Categorical splits: what each regularisation choice buys, and the fit time against one-hot.

Run from the repository root (nothing else running on the cores, for the timing part)::

    python benchmarks/categorical.py                 # both parts, writes benchmarks/categorical.md
    python benchmarks/categorical.py --part grid --seeds 2
    python benchmarks/categorical.py --part timing --repeats 3

Part ``grid`` (issue 53, item 2). Synthetic tables (:func:`make_table`): feature ``A`` has 100
categories of Zipf(1.2) frequencies whose log-odds are drawn N(0, 1); feature ``B`` has 200
equally frequent categories that carry nothing (pure noise: a split on ``B`` is overfitting);
five standard normal features add ``0.6 x0 - 0.4 x1 + 0.3 x2``. n = 2,000 and 20,000 rows,
half for the test; 0% and 20% of the training labels flipped. VIBoost's default (trees) is
fitted with the categorical search's regularisation varied one choice at a time around the
shipped default (LightGBM's names, :class:`viboost.boosting.split_statistics.TreeSettings`):
``cat_smooth`` (rows added to each category's hessian when ordering them; a category with fewer
rows is left out of the ordered scan), ``min_data_per_group`` (the fewest rows on a side of a
category split), ``cat_l2`` (an extra L2 on categorical splits), and all of them off; the paper
preset's stumps with theirs; K = 3 classes with the default and all off. Baselines on the same
rows: VIBoost on the category codes as numbers (``ordinal``) and one-hot, HGB
(``categorical_features="from_dtype"``) and LightGBM (category dtype). Reported: test log-loss
and error (against the clean test labels) and the share of the gain importance on ``B``.

The settings are not estimator parameters: the grid reaches them by wrapping the search
classes that :mod:`viboost.fitting.data` builds (:func:`searches_with`), in this process only.

Part ``timing``: fit seconds of ``VIBoostClassifier(n_jobs=1)`` on categorical columns against
the same table one-hot encoded, best of ``--repeats``, at 20,000 and 100,000 rows; "few" (8
columns of 4 categories) and "many" (4 columns of 100 categories), with 8 numeric columns.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.metrics import log_loss
from threadpoolctl import threadpool_limits

OUT = Path(__file__).resolve().with_name("categorical.md")
#: The grid: name -> the categorical settings changed from the default.
GRID: dict[str, dict[str, float]] = {
    "default": {},
    "cat_smooth=0": {"cat_smooth": 0.0},
    "cat_smooth=1": {"cat_smooth": 1.0},
    "min_data_per_group=1": {"min_data_per_group": 1.0},
    "min_data_per_group=100": {"min_data_per_group": 100.0},
    "cat_l2=10": {"cat_l2": 10.0},
    "all off": {"cat_smooth": 0.0, "min_data_per_group": 1.0},
}
STUMP_GRID = ("default", "cat_smooth=0", "min_data_per_group=1", "all off")
MULTICLASS_GRID = ("default", "all off")
BASELINES = ("ordinal", "one-hot", "hgb", "lgbm")


def make_table(n: int, n_classes: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The grid's table: ``A`` (100 Zipf categories that matter), ``B`` (200 that do not),
    ``x0..x4`` numeric; labels drawn from the logistic (K = 2) or softmax model."""
    rng = np.random.default_rng(seed)
    frequency = 1.0 / np.arange(1, 101) ** 1.2
    a = rng.choice(100, size=n, p=frequency / frequency.sum())
    b = rng.integers(0, 200, size=n)
    x = rng.standard_normal((n, 5))
    effect = rng.standard_normal((100, n_classes))  # log-odds per category of A (and class)
    numeric = x @ np.array([0.6, -0.4, 0.3, 0.0, 0.0])
    if n_classes == 2:
        y = (rng.random(n) < expit(effect[a, 0] + numeric)).astype(np.int64)
    else:
        logits = effect[a] + np.outer(numeric, np.arange(n_classes) - (n_classes - 1) / 2)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        y = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1).clip(max=n_classes - 1)
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(5)])
    frame.insert(
        0, "B", pd.Categorical([f"b{v}" for v in b], categories=[f"b{i}" for i in range(200)])
    )
    frame.insert(
        0, "A", pd.Categorical([f"a{v}" for v in a], categories=[f"a{i}" for i in range(100)])
    )
    return frame, y


@contextmanager
def searches_with(settings: dict[str, float]) -> Iterator[None]:
    """Fits in this block grow their trees and stumps with the categorical ``settings``
    (:data:`GRID`) in place of the shipped ones."""
    import viboost.fitting.data as data

    tree_search, stump_search = data.TreeSearch, data.BinnedStumpSearch
    stump_keys = {"cat_smooth", "min_data_per_group"}

    def trees(*args: Any, **kwargs: Any) -> Any:
        return tree_search(*args, **{**kwargs, **settings})

    def stumps(*args: Any, **kwargs: Any) -> Any:
        return stump_search(
            *args, **kwargs, **{k: v for k, v in settings.items() if k in stump_keys}
        )

    data.TreeSearch, data.BinnedStumpSearch = trees, stumps
    try:
        yield
    finally:
        data.TreeSearch, data.BinnedStumpSearch = tree_search, stump_search


def flip(y: np.ndarray, rate: float, n_classes: int, seed: int) -> np.ndarray:
    """Exactly ``round(rate * n)`` labels moved to a uniformly random other class."""
    rng = np.random.default_rng(seed + 7)
    noisy = y.copy()
    rows = rng.choice(y.size, size=round(rate * y.size), replace=False)
    noisy[rows] = (y[rows] + rng.integers(1, n_classes, size=rows.size)) % n_classes
    return noisy


def fit_one(model: Any, X_tr: Any, y_tr: np.ndarray, X_te: Any, y_te: np.ndarray) -> dict:
    """Fit seconds, test log-loss and error, and the share of the importance on ``B``."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X_tr, y_tr)
    seconds = time.perf_counter() - start
    proba = np.clip(model.predict_proba(X_te), 1e-15, 1.0)
    row = {"seconds": seconds, "log_loss": log_loss(y_te, proba, labels=np.arange(proba.shape[1]))}
    row["error"] = 100.0 * float(np.mean(proba.argmax(axis=1) != y_te))
    names = list(getattr(model, "feature_names_in_", X_tr.columns))
    importance = np.asarray(getattr(model, "feature_importances_", np.full(len(names), np.nan)))
    importance = importance / importance.sum() if importance.sum() > 0 else importance
    row["share_B"] = float(
        sum(v for c, v in zip(names, importance, strict=True) if c.startswith("B"))
    )
    return row


def one_hot(X: pd.DataFrame) -> pd.DataFrame:
    """The categorical columns as 0/1 columns (a missing value: all zeros)."""
    columns = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)]
    return pd.get_dummies(X, columns=columns, dtype=float)


def ordinal(X: pd.DataFrame) -> pd.DataFrame:
    """The categorical columns as their codes, numbers (missing: NaN)."""
    return X.assign(**{c: X[c].cat.codes.replace(-1, np.nan).astype(float) for c in X.columns
                       if isinstance(X[c].dtype, pd.CategoricalDtype)})  # fmt: skip


def grid_rows(seeds: int) -> pd.DataFrame:
    """Every grid fit and baseline (see the module docstring), one row each."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from viboost import VIBoostClassifier

    rows = []
    cases = [("trees", 2, n) for n in (2_000, 20_000)] + [("stumps", 2, 2_000), ("K=3", 3, 2_000)]
    for kind, n_classes, n in cases:
        names = {"trees": tuple(GRID), "stumps": STUMP_GRID, "K=3": MULTICLASS_GRID}[kind]
        for rate in (0.0, 0.2):
            for seed in range(seeds):
                X, y = make_table(2 * n, n_classes, seed)
                X_tr, X_te, y_tr, y_te = X.iloc[:n], X.iloc[n:], y[:n], y[n:]
                y_noisy = flip(y_tr, rate, n_classes, seed)
                base = {"model": kind, "n": n, "flips": rate, "seed": seed}
                params = {"preset": "paper"} if kind == "stumps" else {}
                for name in names:
                    with searches_with(GRID[name]), threadpool_limits(1):
                        model = VIBoostClassifier(random_state=seed, n_jobs=1, **params)
                        row = fit_one(model, X_tr, y_noisy, X_te, y_te)
                    rows.append({**base, "setting": name, **row})
                if kind != "trees":
                    continue
                for name in BASELINES:
                    with threadpool_limits(1):
                        if name in ("ordinal", "one-hot"):
                            encode = ordinal if name == "ordinal" else one_hot
                            both = encode(pd.concat([X_tr, X_te]))
                            model, tr, te = VIBoostClassifier(random_state=seed, n_jobs=1), \
                                both.iloc[:n], both.iloc[n:]  # fmt: skip
                        elif name == "hgb":
                            model, tr, te = (
                                HistGradientBoostingClassifier(
                                    categorical_features="from_dtype", random_state=seed
                                ),
                                X_tr,
                                X_te,
                            )
                        else:
                            from lightgbm import LGBMClassifier

                            model = LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)
                            tr, te = X_tr, X_te
                        row = fit_one(model, tr, y_noisy, te, y_te)
                    rows.append({**base, "setting": name, **row})
                print(
                    f"{kind} n={n} flips={rate:.0%} seed={seed} done", file=sys.stderr, flush=True
                )
    return pd.DataFrame(rows)


def timing_rows(repeats: int) -> pd.DataFrame:
    """Fit seconds, categorical against one-hot (best of ``repeats``)."""
    from viboost import VIBoostClassifier

    rows = []
    for n in (20_000, 100_000):
        for label, n_cat, k in (("few", 8, 4), ("many", 4, 100)):
            rng = np.random.default_rng(0)
            codes = rng.integers(0, k, size=(n, n_cat))
            effect = rng.standard_normal((n_cat, k))
            x = rng.standard_normal((n, 8))
            score = effect[np.arange(n_cat), codes].sum(axis=1) / np.sqrt(n_cat) + x[:, :3].sum(
                axis=1
            )
            y = (rng.random(n) < expit(score)).astype(np.int64)
            y = flip(y, 0.1, 2, 0)
            frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(8)])
            for j in range(n_cat):
                frame[f"c{j}"] = pd.Categorical.from_codes(codes[:, j], [f"v{i}" for i in range(k)])
            for name, X in (("categorical", frame), ("one-hot", one_hot(frame))):
                seconds = []
                for _ in range(repeats):
                    model = VIBoostClassifier(random_state=0, n_jobs=1)
                    with threadpool_limits(1), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        start = time.perf_counter()
                        model.fit(X, y)
                        seconds.append(time.perf_counter() - start)
                rows.append({"n": n, "categories": label, "columns": X.shape[1], "input": name,
                             "seconds": min(seconds),
                             "rounds": len(model.estimators_)})  # fmt: skip
                print(f"timing n={n} {label} {name}: {min(seconds):.2f} s", file=sys.stderr,
                      flush=True)  # fmt: skip
    return pd.DataFrame(rows)


def grid_report(rows: pd.DataFrame) -> list[str]:
    """The grid's tables: mean (and standard error) over seeds per case and setting."""
    lines = []
    for (kind, n), part in rows.groupby(["model", "n"], sort=False):
        lines += ["", f"### {kind}, n = {n:,} training rows", "",
                  "| setting | log-loss 0% | error 0% | share on B 0% | log-loss 20% | "
                  "error 20% | share on B 20% | fit s |", "|---|" + "---:|" * 7]  # fmt: skip
        for setting, group in part.groupby("setting", sort=False):
            cells = [setting]
            for rate in (0.0, 0.2):
                g = group[group.flips == rate]
                se = g.log_loss.std(ddof=1) / np.sqrt(len(g)) if len(g) > 1 else np.nan
                cells += [f"{g.log_loss.mean():.4f} ± {se:.4f}", f"{g.error.mean():.2f}",
                          f"{g.share_B.mean():.3f}"]  # fmt: skip
            cells.append(f"{group.seconds.mean():.2f}")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def timing_report(rows: pd.DataFrame) -> list[str]:
    """The timing table: categorical against one-hot."""
    lines = ["", "| rows | categories | input | columns | rounds | fit s | / one-hot |",
             "|---:|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for (n, label), part in rows.groupby(["n", "categories"], sort=False):
        reference = float(part.loc[part.input == "one-hot", "seconds"].iloc[0])
        for row in part.itertuples():
            lines.append(f"| {n:,} | {label} | {row.input} | {row.columns} | {row.rounds} | "
                         f"{row.seconds:.2f} | {row.seconds / reference:.2f} |")  # fmt: skip
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("grid", "timing", "both"), default="both")
    parser.add_argument("--seeds", type=int, default=3, help="grid: tables per case")
    parser.add_argument("--repeats", type=int, default=2, help="timing: fits, best of")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    import label_noise as ln

    grid_csv = args.out.with_name(f"{args.out.stem}_grid.csv")
    timing_csv = args.out.with_name(f"{args.out.stem}_timing.csv")
    if args.part in ("grid", "both"):
        grid = grid_rows(args.seeds)
        ln.write_atomic(grid_csv, lambda p: grid.to_csv(p, index=False))
    if args.part in ("timing", "both"):
        timing = timing_rows(args.repeats)
        ln.write_atomic(timing_csv, lambda p: timing.to_csv(p, index=False))
    # The report is rebuilt from both parts' CSVs, whichever part ran last.
    sections = [f"# Categorical splits\n\nWritten by `python benchmarks/categorical.py "
                f"{' '.join(sys.argv[1:] if argv is None else argv)}` (the report of both parts, "
                f"from `{grid_csv.name}` and `{timing_csv.name}`); {ln.versions()}. Protocol: "
                "the script's docstring."]  # fmt: skip
    if grid_csv.is_file():
        grid = pd.read_csv(grid_csv)
        sections.append("\n".join(["## Regularisation grid", *grid_report(grid)]))
    if timing_csv.is_file():
        timing = pd.read_csv(timing_csv)
        sections.append("\n".join(["## Fit time against one-hot (one thread)",
                                   *timing_report(timing)]))  # fmt: skip
    text = "\n\n".join(sections) + "\n"
    ln.write_atomic(args.out, lambda p: Path(p).write_text(text, encoding="utf-8"))
    print(text)


if __name__ == "__main__":
    main()
