"""Label-noise robustness: test error, flip detection and flip-rate estimates under label flips.

Run from the repository root (the full benchmark: 5 data sets x 5 settings x 10 splits)::

    python benchmarks/label_noise.py
    python benchmarks/label_noise.py --datasets spambase --splits 2 --settings 0 20 cc
    python benchmarks/label_noise.py --reuse --models viboost viboost-paper   # baselines kept

It writes, atomically, into ``--out-dir`` (default ``benchmarks/``): ``label_noise.csv`` (one row
per data set, setting, split and model), ``label_noise_summary.csv`` (means and standard errors
over splits), ``label_noise.md`` (protocol, one table per data set, targets) and
``label_noise.png``. The per-data-set tables are also printed; progress goes to stderr.

Protocol. Each data set is binarised (0/1) and split ``--splits`` times (seeds 0..K-1) with
``train_test_split(..., random_state=seed, stratify=y)``: 10% train for Spambase, DNA and
Satellite, 50% for breast cancer and Reuters. Only the TRAINING labels are corrupted: exactly
0/10/20/30% of them (``flip_labels``), or class-conditionally, positives (class 1) with
probability 0.3 and negatives with 0.1 (``flip_labels_class_conditional``, setting ``cc``).
Every model is fitted on the noisy labels and scored on the clean test labels. The detectors
(``viboost``, ``viboost-paper``, ``cleanlab``) also rank the training rows by suspicion and
estimate the share of wrong training labels; see :data:`MODELS` and :func:`detect_cleanlab`,
:func:`detect_viboost`. Every fit runs on one thread (threadpoolctl and ``n_jobs=1``), so
neither results nor timings depend on ``--n-jobs`` (but other load on the machine slows the
fits: the seconds are for comparing models within one run). Missing data sets are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from matplotlib.figure import Figure
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import AdaBoostClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

import viboost
from viboost import VIBoostClassifier, noise
from viboost.datasets import (
    flip_labels,
    flip_labels_class_conditional,
    load_reuters_acq_crude,
    load_spambase,
)

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
OUT_DIR = Path(__file__).resolve().parent
DATASETS = ("spambase", "dna", "satellite", "breast_cancer", "reuters", "interactions")
TRAIN_SIZE = {
    "spambase": 0.1,
    "dna": 0.1,
    "satellite": 0.1,
    "breast_cancer": 0.5,
    "reuters": 0.5,
    "interactions": 0.25,
}
SETTINGS = ("0", "10", "20", "30", "cc")
SETTING_LABEL = {"0": "0%", "10": "10%", "20": "20%", "30": "30%", "cc": "cc 30/10"}
#: Model name -> its settings as written in the report; :func:`make_model` builds them.
MODELS = {
    "viboost": "VIBoostClassifier(random_state=seed) (the library default)",
    "viboost-31": "VIBoostClassifier(max_leaf_nodes=31, random_state=seed) (LightGBM's tree size)",
    "viboost-stumps": 'VIBoostClassifier(max_leaf_nodes=2, leaf_weights="tied", '
    "min_samples_leaf=1, random_state=seed) (the default before trees)",
    "viboost-paper": 'VIBoostClassifier(preset="paper", random_state=seed)',
    "adaboost": "AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=200, "
    "random_state=seed)",
    "lgbm-stumps": "LGBMClassifier(n_estimators=200, num_leaves=2, learning_rate=0.1, "
    "min_child_samples=5, verbose=-1, random_state=seed, n_jobs=1)",
    "lgbm": "LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)",
    "hgb": "HistGradientBoostingClassifier(random_state=seed)",
    "cleanlab": "CleanLearning(LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1), seed=seed, "
    'find_label_issues_kwargs={"n_jobs": 1})',
}
DETECTORS = ("viboost", "viboost-31", "viboost-stumps", "viboost-paper", "cleanlab")
BASELINES = ("adaboost", "lgbm-stumps", "lgbm", "cleanlab")
METRICS = ("test_error", "auroc", "precision_at_k", "rate_est", "rate_abs_err", "covered")
DNA_JUNCTIONS = ("ei", "ie")
SATELLITE_GREY = ("grey soil", "damp grey soil", "very damp grey soil")
BINARISATION = {
    "spambase": "spam (1) vs not spam (0), 39% positive",
    "dna": "splice junction, `Class` ei or ie (1) vs neither, n (0); 48% positive",
    "satellite": "the three grey soils, `classes` grey / damp grey / very damp grey soil (1) vs "
    "red soil, cotton crop, vegetation stubble (0); 54% positive",
    "breast_cancer": "scikit-learn's target: benign (1) vs malignant (0), 63% positive",
    "reuters": "crude (1) vs acq (0), 29% positive",
    "interactions": "synthetic (`make_interactions`): 20,000 rows x 20 standard normal features, "
    "P(y = 1 | x) = sigmoid(4 F(x)) with F = x0 x1 + sign(x2) x3 + 0.5 x4 - 0.5 |x5|; 50% positive",
}
#: Clean-label references: the better of these two defaults (the target is within 0.3 points).
CLEAN_REFERENCES = ("lgbm", "hgb")


def make_interactions(n_samples: int = 20_000, seed: int = 12345) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic set that needs interactions: a stump ensemble (additive in the features)
    cannot fit ``x0 x1`` or ``sign(x2) x3``; trees of a few leaves can."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, 20))
    F = X[:, 0] * X[:, 1] + np.sign(X[:, 2]) * X[:, 3] + 0.5 * X[:, 4] - 0.5 * np.abs(X[:, 5])
    y = (rng.random(n_samples) < 1.0 / (1.0 + np.exp(-4.0 * F))).astype(np.int64)
    return X, y


def note(message: str) -> None:
    """Print a progress line or a note on stderr."""
    print(message, file=sys.stderr, flush=True)


def load_dataset(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """Features (float64) and 0/1 labels of a data set, or None when its file is missing."""
    if name == "spambase":
        X, y = load_spambase(return_X_y=True)
    elif name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "reuters":
        X, y = load_reuters_acq_crude(return_X_y=True)
    elif name == "interactions":
        X, y = make_interactions()
    else:
        path = data_dir / f"{name}.csv.gz"
        if not path.is_file():
            note(f"note: skipping {name}: {path} not found")
            return None
        frame = pd.read_csv(path)
        if name == "dna":
            X = frame[[f"V{i}" for i in range(1, 181)]].to_numpy()
            y = frame["Class"].isin(DNA_JUNCTIONS).to_numpy()
        else:
            classes = frame["classes"]
            if not set(SATELLITE_GREY) <= set(classes.unique()):
                raise ValueError(f"unexpected satellite classes: {sorted(classes.unique())}")
            X = frame[[f"x.{i}" for i in range(1, 37)]].to_numpy()
            y = classes.isin(SATELLITE_GREY).to_numpy()
    return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)


def make_noise(y: np.ndarray, setting: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy training labels and the mask of flipped rows for one setting."""
    if setting == "cc":
        return flip_labels_class_conditional(y, 0.3, 0.1, random_state=seed)
    return flip_labels(y, int(setting) / 100, random_state=seed)


def make_model(name: str, seed: int) -> Any:
    """A fresh, unfitted model of :data:`MODELS`.

    LightGBM ignores threadpoolctl's limit and, on a busy machine, its OpenMP threads wait on
    each other (seen: 0.05 s -> 20 s per fit), hence ``n_jobs=1``; cleanlab would otherwise fork
    a process pool. Neither setting changes what is fitted, only the threads it runs on.
    """
    if name == "viboost":
        return VIBoostClassifier(random_state=seed)
    if name == "viboost-31":
        return VIBoostClassifier(max_leaf_nodes=31, random_state=seed)
    if name == "viboost-stumps":
        return VIBoostClassifier(
            max_leaf_nodes=2, leaf_weights="tied", min_samples_leaf=1, random_state=seed
        )
    if name == "viboost-paper":
        return VIBoostClassifier(preset="paper", random_state=seed)
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(random_state=seed)
    if name == "adaboost":
        return adaboost(seed)
    from lightgbm import LGBMClassifier

    if name == "lgbm-stumps":
        return LGBMClassifier(
            n_estimators=200,
            num_leaves=2,
            learning_rate=0.1,
            min_child_samples=5,
            verbose=-1,
            random_state=seed,
            n_jobs=1,
        )
    if name == "lgbm":
        return LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)
    if name == "cleanlab":
        from cleanlab.classification import CleanLearning

        lgbm = LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)
        return CleanLearning(lgbm, seed=seed, find_label_issues_kwargs={"n_jobs": 1})
    raise ValueError(f"unknown model {name!r}")


def adaboost(seed: int) -> AdaBoostClassifier:
    """AdaBoost with 200 stumps, the ``adaboost`` baseline and cleanlab's probability model."""
    return AdaBoostClassifier(
        DecisionTreeClassifier(max_depth=1), n_estimators=200, random_state=seed
    )


Detection = tuple[np.ndarray, float, tuple[float, float], str]


def detect_viboost(fitted: VIBoostClassifier, X: np.ndarray, y: np.ndarray) -> Detection:
    """Suspicion per training row, estimated flip rate and its 90% interval, from the fit."""
    scores = noise.label_quality_scores(X, y, estimator=fitted)
    est = noise.estimate_flip_rate(X, y, estimator=fitted)
    lo, hi = (float(v) for v in est.interval)
    return 1.0 - scores, float(est.rate), (lo, hi), "viboost.noise"


def detect_cleanlab(X: np.ndarray, y: np.ndarray, seed: int) -> Detection:
    """Cleanlab's suspicion and flip rate from 5-fold out-of-fold AdaBoost probabilities."""
    from cleanlab.count import estimate_joint
    from cleanlab.rank import get_label_quality_scores

    cv = StratifiedKFold(5, shuffle=True, random_state=seed)
    proba = cross_val_predict(adaboost(seed), X, y, cv=cv, method="predict_proba")
    joint = estimate_joint(y, proba)
    rate = float(joint.sum() - np.trace(joint))
    return 1.0 - get_label_quality_scores(y, proba), rate, (np.nan, np.nan), "cleanlab"


def detection_metrics(flipped: np.ndarray, det: Detection) -> dict[str, Any]:
    """Flip AUROC, precision at k = #flips, rate error and interval coverage of a detector."""
    suspicion, rate, (lo, hi), api = det
    k, true_rate = int(flipped.sum()), float(flipped.mean())
    order = np.argsort(-suspicion, kind="stable")
    has_both = 0 < k < flipped.size
    return {
        "auroc": roc_auc_score(flipped, suspicion) if has_both else np.nan,
        "precision_at_k": float(flipped[order[:k]].mean()) if k else np.nan,
        "rate_est": rate,
        "rate_lo": lo,
        "rate_hi": hi,
        "rate_abs_err": abs(rate - true_rate),
        "covered": float(lo <= true_rate <= hi) if np.isfinite(lo) else np.nan,
        "noise_api": api,
    }


def run_task(
    dataset: str, X: np.ndarray, y: np.ndarray, setting: str, seed: int, models: Sequence[str]
) -> list[dict[str, Any]]:
    """All models on one (data set, setting, split): one result row per model."""
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, train_size=TRAIN_SIZE[dataset], random_state=seed, stratify=y
    )
    y_noisy, flipped = make_noise(y_tr, setting, seed)
    base = {"dataset": dataset, "setting": setting, "split": seed, "n_train": len(y_tr)}
    base |= {"n_test": len(y_te), "n_flipped": int(flipped.sum()), "true_rate": flipped.mean()}
    rows = []
    for name in models:
        row: dict[str, Any] = {**base, "model": name}
        try:
            with threadpool_limits(limits=1):
                model = make_model(name, seed)
                start = time.perf_counter()
                model.fit(X_tr, y_noisy)
                row["fit_s"] = time.perf_counter() - start
                row["test_error"] = 100.0 * float(np.mean(model.predict(X_te) != y_te))
                start = time.perf_counter()
                if name.startswith("viboost"):
                    row |= detection_metrics(flipped, detect_viboost(model, X_tr, y_noisy))
                elif name == "cleanlab":
                    row |= detection_metrics(flipped, detect_cleanlab(X_tr, y_noisy, seed))
                if name in DETECTORS:
                    row["detect_s"] = time.perf_counter() - start
        except Exception as exc:  # one failing fit must not lose hours of other results
            note(f"error: {dataset} {setting} split {seed} {name}:\n{traceback.format_exc()}")
            row["note"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    timings = " ".join(f"{r['model']}={r.get('fit_s', np.nan):.1f}s" for r in rows)
    note(f"{dataset} {SETTING_LABEL[setting]} split {seed}: {timings}")
    return rows


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean of every metric and standard error of the test error over splits."""
    keys = ["dataset", "setting", "model"]
    grouped = results.groupby(keys, sort=False)
    summary = grouped[[*METRICS, "fit_s", "detect_s"]].mean()
    summary["test_error_se"] = grouped["test_error"].std(ddof=1) / np.sqrt(grouped.size())
    summary["n_splits"] = grouped["test_error"].count()
    return summary


def fmt(value: float, digits: int) -> str:
    """A number for the tables, "-" when missing."""
    return "-" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def dataset_table(summary: pd.DataFrame, dataset: str) -> str:
    """One data set's table: a row per setting, columns as in the module docstring."""
    part = summary.loc[dataset]
    present = set(part.index.get_level_values("model"))
    models = [m for m in MODELS if m in present]
    detectors = [m for m in DETECTORS if m in present]
    columns = [(f"err {m}", m, "test_error", 2) for m in models]
    columns += [(f"AUROC {m}", m, "auroc", 3) for m in detectors]
    columns += [(f"P@k {m}", m, "precision_at_k", 3) for m in detectors]
    columns += [(f"rate err {m}", m, "rate_abs_err", 3) for m in detectors]
    columns += [(f"cover {m}", m, "covered", 2) for m in detectors if m != "cleanlab"]
    rows = []
    for setting in [s for s in SETTINGS if s in part.index.get_level_values("setting")]:
        cells = [SETTING_LABEL[setting]]
        for _, model, metric, digits in columns:
            value = part[metric].get((setting, model), np.nan)
            cells.append(fmt(value, digits))
        rows.append(cells)
    return md_table(["setting", *(c[0] for c in columns)], rows)


def targets_table(summary: pd.DataFrame) -> str:
    """Per data set and setting: does ``viboost`` meet the error, AUROC and rate targets?"""
    rows = []
    for (dataset, setting), part in summary.groupby(level=["dataset", "setting"], sort=False):
        part = part.droplevel(["dataset", "setting"])
        if "viboost" not in part.index:
            continue
        vb = part.loc["viboost"]
        yes_no = {True: "yes", False: "no"}
        if setting == "0":
            errors = part["test_error"].reindex([b for b in CLEAN_REFERENCES if b in part.index])
            best = errors.idxmin() if errors.notna().any() else None
            ref = errors.min() if best else np.nan
            ref_text, ok = f"{best} {fmt(ref, 2)} + 0.3", vb.test_error <= ref + 0.3
        else:
            errors = part["test_error"].reindex([b for b in BASELINES if b in part.index])
            best = errors.idxmin() if errors.notna().any() else None
            ref = errors.min() if best else np.nan
            ref_text, ok = f"{best} {fmt(ref, 2)}", vb.test_error <= ref
        error_ok = yes_no[bool(ok)] if np.isfinite(ref) else "-"
        cl_auc = part["auroc"].get("cleanlab", np.nan)
        auc_ok = vb.auroc >= cl_auc if np.isfinite(vb.auroc) and np.isfinite(cl_auc) else None
        rate_ok = vb.rate_abs_err <= 0.03 if np.isfinite(vb.rate_abs_err) else None
        rows.append(
            [
                dataset,
                SETTING_LABEL[setting],
                fmt(vb.test_error, 2),
                ref_text,
                error_ok,
                f"{fmt(vb.auroc, 3)} vs {fmt(cl_auc, 3)}",
                "-" if auc_ok is None else yes_no[bool(auc_ok)],
                fmt(vb.rate_abs_err, 3),
                "-" if rate_ok is None else yes_no[bool(rate_ok)],
            ]
        )
    headers = ["data set", "setting", "viboost err", "reference err", "error target"]
    headers += ["AUROC viboost vs cleanlab", "AUROC target", "rate abs err", "rate <= 0.03"]
    return md_table(headers, rows)


def plot(results: pd.DataFrame, summary: pd.DataFrame) -> Figure:
    """Error, flip AUROC and estimated flip rate: one column per data set (no pyplot: Agg)."""
    datasets = [d for d in DATASETS if d in set(results["dataset"])]
    fig = Figure(figsize=(4.2 * len(datasets), 11), layout="tight")
    axes = fig.subplots(3, len(datasets), squeeze=False)
    colors = dict(zip(MODELS, matplotlib.colormaps["tab10"].colors, strict=False))
    numeric = [s for s in SETTINGS if s != "cc"]
    for col, dataset in enumerate(datasets):
        part = summary.loc[dataset]
        for model in [m for m in MODELS if m in set(part.index.get_level_values("model"))]:
            s = [x for x in numeric if (x, model) in part.index]
            xs = [int(x) for x in s]
            kw = {"color": colors[model], "marker": "o", "label": model}
            axes[0, col].plot(xs, [part.loc[(x, model), "test_error"] for x in s], **kw)
            if model in DETECTORS:
                s = [x for x in s if x != "0"]
                aucs = [part.loc[(x, model), "auroc"] for x in s]
                axes[1, col].plot([int(x) for x in s], aucs, **kw)
                rows = results[(results.dataset == dataset) & (results.model == model)]
                for cc, marker in ((False, "o"), (True, "^")):
                    r = rows[(rows.setting == "cc") == cc]
                    kw |= {"marker": marker, "label": f"{model}{' (cc)' if cc else ''}"}
                    axes[2, col].scatter(100 * r.true_rate, 100 * r.rate_est, alpha=0.6, **kw)
        axes[0, col].set_title(dataset)
        axes[0, col].set_xlabel("symmetric flip rate (%)")
        axes[1, col].set_xlabel("symmetric flip rate (%)")
        axes[2, col].set_xlabel("true flip rate (%), all settings")
        axes[2, col].axline((0, 0), slope=1, color="grey", lw=0.8, ls="--")
        axes[1, col].axhline(0.5, color="grey", lw=0.8, ls="--")  # chance
        for row in range(3):
            axes[row, col].grid(alpha=0.3)
            axes[row, col].set_xlim(-2, 37)
        top = 100 * results.loc[results.dataset == dataset, "rate_est"].max()
        axes[2, col].set_ylim(-2, max(37, top + 2) if np.isfinite(top) else 37)
    axes[0, 0].set_ylabel("test error (%)")
    axes[1, 0].set_ylabel("flip AUROC")
    axes[2, 0].set_ylabel("estimated flip rate (%)")
    for row in range(3):
        axes[row, 0].legend(fontsize=8)
    return fig


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then move it onto ``path``."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        write(str(tmp))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def versions() -> str:
    """Versions of the libraries that produced the numbers."""
    import sklearn

    parts = [f"viboost {viboost.__version__}", f"scikit-learn {sklearn.__version__}"]
    for lib in ("lightgbm", "cleanlab"):
        if importlib.util.find_spec(lib) is not None:
            parts.append(f"{lib} {__import__(lib).__version__}")
    return ", ".join(parts)


def report(results: pd.DataFrame, summary: pd.DataFrame, command: str) -> str:
    """The markdown report."""
    datasets = [d for d in DATASETS if d in set(results["dataset"])]
    models = "\n".join(f"- `{m}`: `{s}`" for m, s in MODELS.items())
    data = "\n".join(
        f"- `{d}`: {BINARISATION[d]}; {TRAIN_SIZE[d]:.0%} train / {1 - TRAIN_SIZE[d]:.0%} test"
        for d in DATASETS
    )
    lines = [
        "# Label-noise robustness",
        "",
        "Generated by `benchmarks/label_noise.py` (do not edit by hand). Full run, from the "
        "repository root:",
        "",
        "    python benchmarks/label_noise.py",
        "",
        f"This file: `{command}`; {versions()}.",
        "",
        "## Protocol",
        "",
        "Data sets (DNA and Satellite are read from `../shared/data/` or `--data-dir`), "
        "binarised as class 1 vs class 0, split with `train_test_split(..., "
        "random_state=seed, stratify=y)` for seeds 0..K-1:",
        "",
        data,
        "",
        "Noise, on the training labels only (test labels are clean): symmetric, exactly 0, 10, "
        "20 or 30% of them flipped (`flip_labels(y_train, rate, random_state=seed)`), and `cc "
        "30/10`, each class-1 label flipped with probability 0.3 and each class-0 label with 0.1 "
        "(`flip_labels_class_conditional(y_train, 0.3, 0.1, random_state=seed)`).",
        "",
        "Models (every fit on one thread):",
        "",
        models,
        "",
        "Detectors. `viboost` and `viboost-paper` are fitted once on the noisy labels; "
        "suspicion is `1 - viboost.noise.label_quality_scores(X_train, y_noisy, "
        "estimator=fitted)` and the flip rate and its 90% interval come from "
        "`viboost.noise.estimate_flip_rate`. `cleanlab` ranks by `1 - "
        "cleanlab.rank.get_label_quality_scores` and estimates the rate as the off-diagonal "
        "mass of `cleanlab.count.estimate_joint`, both on 5-fold out-of-fold probabilities of "
        "the AdaBoost above (`StratifiedKFold(5, shuffle=True, random_state=seed)`).",
        "",
        "Columns (means over splits): `err` test error (%) on the clean test set; `AUROC` ROC "
        "AUC of suspicion against the flipped mask (none at 0%); `P@k` share of flipped rows "
        "among the k most suspicious, k = number of flips; `rate err` |estimated - true share "
        "of flipped training labels|; `cover` share of splits whose 90% interval holds the "
        "true share. Standard errors are in `label_noise_summary.csv`.",
    ]
    for d in datasets:
        n = summary.loc[d, "n_splits"]
        n_text = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()} (differs!)"
        lines += ["", f"## {d}", "", f"Splits: {n_text}.", "", dataset_table(summary, d)]
    failed = results[results["note"].notna()] if "note" in results else results.iloc[:0]
    lines += [
        "",
        "## Targets",
        "",
        "Error target: at 0% flips `viboost` is at most 0.3 points worse than the better of "
        "`lgbm` and `hgb` (LightGBM's and HistGradientBoosting's defaults); at "
        "10-30% and cc, its error is at most the best baseline's (adaboost, lgbm-stumps, lgbm, "
        "cleanlab). AUROC target: `viboost` >= `cleanlab`. Rate target: mean |flip-rate "
        "error| <= 0.03.",
        "",
        targets_table(summary),
        "",
        f"Failed fits: {len(failed)}"
        + (" (see the `note` column of the CSV)." if len(failed) else "."),
        "",
        "![label noise](label_noise.png)",
        "",
    ]
    return "\n".join(lines)


def run_benchmark(
    datasets: Sequence[str] = DATASETS,
    settings: Sequence[str] = SETTINGS,
    splits: int = 10,
    models: Sequence[str] = tuple(MODELS),
    *,
    n_jobs: int = 1,
    out_dir: Path = OUT_DIR,
    data_dir: Path = DATA_DIR,
    reuse: bool = False,
    command: str = "python benchmarks/label_noise.py",
) -> pd.DataFrame:
    """Run the tasks, merge with ``--reuse`` rows, write CSVs, report and figure; return rows."""
    models = [m for m in MODELS if m in models]
    if "viboost-paper" in models and "preset" not in VIBoostClassifier().get_params():
        note("note: skipping viboost-paper: VIBoostClassifier has no `preset` parameter yet")
        models.remove("viboost-paper")
    data = {d: load_dataset(d, Path(data_dir)) for d in DATASETS if d in datasets}
    tasks = [
        (d, xy, s, seed)
        for d, xy in data.items()
        if xy is not None
        for s in SETTINGS
        if s in settings
        for seed in range(splits)
    ]
    out = Parallel(n_jobs=n_jobs)(
        delayed(run_task)(d, X, y, s, seed, models) for d, (X, y), s, seed in tasks
    )
    results = pd.DataFrame([row for rows in out for row in rows])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "label_noise.csv"
    if reuse and csv.is_file():
        old = pd.read_csv(csv, dtype={"setting": str})
        results = pd.concat([old[~old["model"].isin(models)], results], ignore_index=True)
    elif reuse:
        note(f"note: --reuse: {csv} does not exist yet; nothing reused")
    if results.empty:
        note("note: nothing to report: no data set found and nothing reused")
        return results
    for column in (*METRICS, "fit_s", "detect_s", "note", "noise_api"):
        if column not in results:
            results[column] = np.nan
    order = {
        "dataset": {d: i for i, d in enumerate(DATASETS)},
        "setting": {s: i for i, s in enumerate(SETTINGS)},
        "model": {m: i for i, m in enumerate(MODELS)},
    }
    results = results.sort_values(
        ["dataset", "setting", "split", "model"],
        key=lambda c: c.map(order[c.name]) if c.name in order else c,
        ignore_index=True,
    )
    summary = summarise(results)
    write_atomic(csv, lambda p: results.to_csv(p, index=False))
    write_atomic(out_dir / "label_noise_summary.csv", lambda p: summary.to_csv(p))
    text = report(results, summary, command)
    write_atomic(out_dir / "label_noise.md", lambda p: Path(p).write_text(text, encoding="utf-8"))
    fig = plot(results, summary)
    write_atomic(out_dir / "label_noise.png", lambda p: fig.savefig(p, format="png", dpi=110))
    for d in [d for d in DATASETS if d in set(results["dataset"])]:
        print(f"\n## {d}\n\n{dataset_table(summary, d)}")
    print(f"\n## Targets\n\n{targets_table(summary)}\n\nwrote {out_dir}/label_noise.*")
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--splits", type=int, default=10, help="splits, seeds 0..K-1")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--n-jobs", type=int, default=1, help="processes over tasks")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--reuse", action="store_true", help="keep the CSV rows of models not in --models"
    )
    args = parser.parse_args(argv)
    if args.splits < 1:
        parser.error("--splits must be >= 1")
    command = " ".join(["python benchmarks/label_noise.py", *sys.argv[1:]])
    run_benchmark(
        args.datasets,
        args.settings,
        args.splits,
        args.models,
        n_jobs=args.n_jobs,
        out_dir=args.out_dir,
        data_dir=args.data_dir,
        reuse=args.reuse,
        command=command if argv is None else "run_benchmark(...)",
    )


if __name__ == "__main__":
    main()
