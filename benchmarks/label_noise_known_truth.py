"""The known-truth part of ``benchmarks/label_noise.py`` (``--part known-truth``): labels drawn
from a smooth model fitted to a real table, then a known share flipped.

On each set a smooth model p(x) is fitted once to the real labels (quantile-normal features,
cubic splines of 4 knots, an L2 logistic regression with C = 0.05, multinomial for K classes);
labels are drawn from it (so the classes overlap as in the real data, but no label is wrong),
the rows split (binary: the training shares of :data:`label_noise.TRAIN_SIZE`; K classes:
half), and 0/10/20/30% of the training labels flipped (K classes: moved to another class, or
"pair": 20% of each class moved to the next). Reported per set and setting: the noise rate's
bias and |error|, the coverage and width of the 90% interval, the share of clean fits whose
interval reaches 0.01, the posterior probability of no noise, and the test error against the
drawn (clean) test labels of VIBoost's default and its peers: LightGBM, HGB,
CleanLearning(LightGBM) and ``rfl`` (LightGBM on Robust-GBDT's Robust Focal Loss,
``benchmarks/robust_focal.py``) by default, CatBoost's defaults when ``catboost`` is installed.

The mixed-type sets (:data:`MIXED_SETS`: credit, attrition, churn binary; penguins K = 3) are
read as ``benchmarks/label_noise_mixed.py`` reads them (non-numeric columns as pandas
``category``) and every model is fitted on the frame as it comes (CatBoost with those columns as
``cat_features``); their p(x) takes the categorical columns one-hot and the numeric ones (missing
cells set to the median) through the same splines; they are split in half.

``python benchmarks/label_noise.py --part known-truth --models viboost`` refits VIBoost only and
takes the peers' test errors from the CSV's rows of the same tasks (a change of VIBoost leaves
them as they were; every task must be in the CSV).
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, QuantileTransformer, SplineTransformer

BINARY_SETS = ("breast_cancer", "spambase", "dna", "satellite", "credit", "attrition", "churn")
MULTICLASS_SETS = ("dna", "satellite", "penguins")
#: The mixed-type sets (``benchmarks/label_noise_mixed.py``): fitted as frames with categorical
#: columns, split in half.
MIXED_SETS = ("credit", "attrition", "churn", "penguins")
BINARY_SETTINGS = ("0", "10", "20", "30")
MULTICLASS_SETTINGS = ("0", "10", "20", "30", "pair")
PEERS = ("lgbm", "hgb", "cleanlab", "catboost", "rfl")


def truth_model(categorical: list[str] | None = None) -> Any:
    """The smooth model p(x) fitted to a table's real labels; with ``categorical`` column
    names (a mixed-type frame), those columns one-hot and the others, their missing cells
    set to the median, through the same splines."""
    numeric = make_pipeline(
        QuantileTransformer(n_quantiles=200, output_distribution="normal", random_state=0),
        SplineTransformer(n_knots=4, degree=3),
    )
    if categorical is None:
        return make_pipeline(numeric, LogisticRegression(C=0.05, max_iter=3000))
    columns = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), categorical),
        remainder=make_pipeline(SimpleImputer(strategy="median"), numeric),
    )
    return make_pipeline(columns, LogisticRegression(C=0.05, max_iter=3000))


_TRUTH: dict[tuple[str, bool], tuple[Any, np.ndarray]] = {}


def truth(name: str, multiclass: bool, data_dir: Path) -> tuple[Any, np.ndarray]:
    """Features (an array, or a frame for the mixed-type sets) and p(x) (n, K) of a set
    (cached per process)."""
    import label_noise as ln

    key = (name, multiclass)
    if key not in _TRUTH:
        if name in MIXED_SETS:
            loaded = ln.sibling("label_noise_mixed").load_mixed(name, data_dir)
        else:
            loaded = (ln.load_multiclass if multiclass else ln.load_dataset)(name, data_dir)
        if loaded is None:
            raise FileNotFoundError(name)
        X, y = loaded
        if (y.max() > 1) != multiclass:
            raise ValueError(f"{name} is {'not ' if multiclass else ''}a K-class set")
        categorical = list(X.columns[X.dtypes == "category"]) if name in MIXED_SETS else None
        _TRUTH[key] = (X, truth_model(categorical).fit(X, y).predict_proba(X))
    return _TRUTH[key]


def peer(name: str, seed: int, X: Any = None) -> Any | None:
    """A peer's default model, or None when its library is missing (``X``: the training rows,
    for CatBoost's ``cat_features`` on a mixed-type frame)."""
    if isinstance(X, pd.DataFrame) and name == "catboost":
        import label_noise as ln

        if importlib.util.find_spec("catboost") is None:
            return None
        return ln.sibling("label_noise_mixed").make_model("catboost", seed, X)
    if name == "lgbm":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)
    if name == "hgb":
        return HistGradientBoostingClassifier(random_state=seed)
    if name == "cleanlab":
        from cleanlab.classification import CleanLearning
        from lightgbm import LGBMClassifier

        return CleanLearning(LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1), seed=seed,
                             find_label_issues_kwargs={"n_jobs": 1})  # fmt: skip
    if name == "catboost":
        try:
            from catboost import CatBoostClassifier
        except ImportError:
            return None
        return CatBoostClassifier(
            random_seed=seed, verbose=False, thread_count=1, allow_writing_files=False
        )
    if name == "rfl":
        import label_noise as ln

        return ln.robust_focal_lgbm(seed, n_jobs=1)
    raise ValueError(name)


def drawn_task(
    name: str, multiclass: bool, setting: str, seed: int, data_dir: Path
) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One set x setting x split of the protocol: labels drawn from p(x) (seed ``1000 +
    seed``), the rows split, the training labels flipped. Returns the training and test rows,
    the noisy training labels, which of them were flipped, the drawn test labels and the
    test rows' p(x)."""
    import label_noise as ln

    X, p = truth(name, multiclass, Path(data_dir))
    n_classes = p.shape[1]
    rng = np.random.default_rng(1000 + seed)
    y = np.minimum((rng.random((p.shape[0], 1)) > np.cumsum(p, axis=1)).sum(axis=1), n_classes - 1)
    if name in MIXED_SETS:
        size = ln.sibling("label_noise_mixed").TRAIN_SIZE
    else:
        size = ln.MC_TRAIN_SIZE if multiclass else ln.TRAIN_SIZE[name]
    X_tr, X_te, y_tr, y_te, _, p_te = train_test_split(
        X, y, p, train_size=size, random_state=seed, stratify=y
    )
    if multiclass:
        y_noisy, flipped = ln.make_multiclass_noise(y_tr, setting, n_classes, seed)
    else:
        y_noisy, flipped = ln.make_noise(y_tr, setting, seed)
    return X_tr, X_te, y_noisy, flipped, y_te, p_te


def one_fit(task: tuple[str, bool, str, int, str, tuple[str, ...]]) -> dict[str, Any]:
    """One set x setting x split: VIBoost's default and the peers."""
    import label_noise as ln

    from viboost import VIBoostClassifier

    name, multiclass, setting, seed, data_dir, peers = task
    X_tr, X_te, y_noisy, flipped, y_te, p_te = drawn_task(
        name, multiclass, setting, seed, Path(data_dir)
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VIBoostClassifier(random_state=seed).fit(X_tr, y_noisy)
    seconds = time.perf_counter() - start
    low, high = model.noise_rate_interval_
    true = float(np.mean(flipped))
    row: dict[str, Any] = {
        "data": name, "part": "multiclass" if multiclass else "binary", "setting": setting,
        "seed": seed, "true_rate": true, "rate": float(model.noise_rate_), "low": float(low),
        "high": float(high), "covered": bool(low <= true <= high),
        "no_noise_proba": float(getattr(model, "no_noise_proba_", np.nan)),
        "bayes_error": float(np.mean(1.0 - p_te.max(axis=1))),
        "majority_error": float(1.0 - np.bincount(y_te).max() / y_te.size),
        "viboost": float(np.mean(model.predict(X_te) != y_te)), "viboost_seconds": seconds,
    }  # fmt: skip
    for name_ in PEERS:
        estimator = peer(name_, seed, X_tr) if name_ in peers else None
        if estimator is None:
            row[name_] = np.nan
            continue
        train, test = X_tr, X_te
        if name_ == "catboost" and isinstance(X_tr, pd.DataFrame):
            mixed = ln.sibling("label_noise_mixed")
            train, test = mixed.for_catboost(X_tr), mixed.for_catboost(X_te)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator.fit(train, y_noisy)
        row[name_] = float(np.mean(np.ravel(estimator.predict(test)).astype(int) != y_te))
    return row


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Per part, set and setting: the rate's bias, |error|, RMSE, coverage, width, the share of
    intervals reaching 0.01, P(no noise), and the mean test errors (NaN for a peer the results
    lack, as ``rfl`` in CSVs written before it was a peer)."""
    results = results.assign(**{p: np.nan for p in PEERS if p not in results.columns})
    frame = results.assign(
        error=results.rate - results.true_rate,
        abs_error=(results.rate - results.true_rate).abs(),
        width=results.high - results.low,
        reaches_001=results.low <= 0.01,
    )
    groups = frame.groupby(["part", "data", "setting"], sort=False)
    summary = groups.agg(
        fits=("seed", "size"), bias=("error", "mean"), abs_error=("abs_error", "mean"),
        rmse=("error", lambda e: float(np.sqrt(np.mean(np.square(e))))),
        coverage=("covered", "mean"), width=("width", "mean"),
        reaches_001=("reaches_001", "mean"), no_noise_proba=("no_noise_proba", "mean"),
        bayes=("bayes_error", "mean"), majority=("majority_error", "mean"),
        viboost=("viboost", "mean"), **{p: (p, "mean") for p in PEERS},
    )  # fmt: skip
    return summary.reset_index()


def report(results: pd.DataFrame, command: str) -> str:
    """The Markdown report: the table per set and setting, then the targets' totals."""
    summary = summarise(results)
    lines = [
        "# Known-truth labels: VIBoost's noise statistics and test error",
        "",
        f"Written by `{command}`. Labels drawn from a smooth model fitted to each set "
        "(`benchmarks/label_noise_known_truth.py`), then flipped; test errors against the drawn "
        "(clean) test labels (`majority`: the error of always guessing the most frequent test "
        "class). Peers not fitted (not asked for, or not installed; `rfl` in CSVs written before "
        "it was a peer) show `nan`.",
        "",
        "| part | set | flips | fits | bias | abs err | RMSE | coverage | width | lo<=.01 | "
        "P(none) | Bayes | majority | VIBoost | " + " | ".join(PEERS) + " |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + "---:|" * len(PEERS),
    ]
    for row in summary.itertuples():
        values = [getattr(row, p) for p in PEERS]
        lines.append(
            f"| {row.part} | {row.data} | {row.setting} | {row.fits} | {row.bias:+.3f} | "
            f"{row.abs_error:.3f} | {row.rmse:.3f} | {row.coverage:.2f} | {row.width:.3f} | "
            f"{row.reaches_001:.2f} | {row.no_noise_proba:.2f} | {row.bayes:.3f} | "
            f"{row.majority:.3f} | {row.viboost:.3f} | "
            + " | ".join(f"{v:.3f}" for v in values)
            + " |"
        )
    clean = results[results.setting == "0"]
    noisy = results[results.setting != "0"]
    error = noisy.rate - noisy.true_rate
    lines += [
        "",
        "## Totals",
        "",
        f"- clean fits whose interval reaches 0.01: {np.mean(clean.low <= 0.01):.2f} "
        f"({len(clean)} fits; target 0.90)",
        f"- coverage of the 90% intervals, noisy fits: {noisy.covered.mean():.2f} "
        f"({len(noisy)} fits; target 0.85)",
        f"- mean width / RMSE, noisy fits: "
        f"{(noisy.high - noisy.low).mean() / np.sqrt(np.mean(error**2)):.2f} (target <= 4)",
        f"- mean |error| of the rate, all fits: "
        f"{np.mean(np.abs(results.rate - results.true_rate)):.3f} (target <= 0.04)",
    ]
    return "\n".join(lines) + "\n"


def run_known_truth(
    splits: int, n_jobs: int, out_dir: Path, data_dir: Path, command: str,
    binary_sets: tuple[str, ...] = BINARY_SETS, multiclass_sets: tuple[str, ...] = MULTICLASS_SETS,
    peers: tuple[str, ...] = PEERS, name: str = "label_noise_known_truth", reuse: bool = False,
    keep_peers: bool = False,
) -> pd.DataFrame:  # fmt: skip
    """Run every fit, write ``NAME.csv`` and ``NAME.md`` to ``out_dir`` (``peers``: the
    peers to fit beside VIBoost; ``reuse``: keep the CSV's rows of the sets not run;
    ``keep_peers``: fit VIBoost only and take the peers' test errors from the CSV's rows of
    the same set, setting and split, which every task must have: a peer's fit does not depend
    on VIBoost's, and its task's data come from the seed alone)."""
    import label_noise as ln

    csv = Path(out_dir) / f"{name}.csv"
    key = ["part", "data", "setting", "seed"]
    if keep_peers:
        if not csv.is_file():
            raise FileNotFoundError(f"keep_peers: no {csv} to take the peers' errors from")
        previous = pd.read_csv(csv, dtype={"setting": str})
        peers = ()

    tasks = [(d, False, s, k, str(data_dir), peers) for d in binary_sets
             for s in BINARY_SETTINGS for k in range(splits)]  # fmt: skip
    tasks += [(d, True, s, k, str(data_dir), peers) for d in multiclass_sets
              for s in MULTICLASS_SETTINGS for k in range(splits)]  # fmt: skip
    if n_jobs > 1:
        with ProcessPoolExecutor(n_jobs) as pool:
            rows = list(pool.map(one_fit, tasks))
    else:
        rows = [one_fit(task) for task in tasks]
    results = pd.DataFrame(rows)
    if keep_peers:
        known = previous[key + [p for p in PEERS if p in previous.columns]]
        results = results.drop(columns=list(PEERS)).merge(known, on=key, how="left", validate="1:1")
        missing = results[list(PEERS)].isna().all(axis=1) & results.seed.notna()
        if missing.any():
            first = results.loc[missing, key].iloc[0].tolist()
            raise ValueError(f"keep_peers: {csv} has no peers' errors for {first}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if reuse and csv.is_file():
        old = pd.read_csv(csv, dtype={"setting": str})
        run = set(zip(results.part, results.data, strict=True))
        keep = [key not in run for key in zip(old.part, old.data, strict=True)]
        results = pd.concat([old[keep], results], ignore_index=True)
    ln.write_atomic(csv, lambda p: results.to_csv(p, index=False))
    text = report(results, command)
    ln.write_atomic(out_dir / f"{name}.md", lambda p: Path(p).write_text(text))
    print(text)
    return results
