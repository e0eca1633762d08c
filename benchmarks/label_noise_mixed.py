"""The mixed-type part of ``benchmarks/label_noise.py`` (``--part mixed``): tables with
categorical (string) columns, as they come, under label flips.

Run from the repository root::

    python benchmarks/label_noise.py --part mixed --n-jobs 2
    python benchmarks/label_noise.py --part mixed --n-jobs 2 --resume   # after an interruption
    python benchmarks/label_noise.py --part mixed --splits 1 --datasets penguins

Data (``../shared/data``, see its README): credit scoring (``Status``, positive ``bad``), HR
attrition (``Attrition``, positive ``Yes``), telco churn (``churn``, positive ``Yes``), each
binary; and Palmer penguins (``species``, 3 classes). Every non-numeric column is read as a
pandas ``category`` column, missing cells stay missing. Each set is split ``--splits`` times
(seeds 0..K-1, ``train_test_split(train_size=0.5, stratify=y)``). Only the TRAINING labels are
corrupted: exactly 0/10/20/30% of them flipped (binary sets, ``flip_labels``), or 0/20% moved to
a uniformly random other class (penguins, ``move_to_other_class``). Every model is fitted on one
thread on the noisy labels and scored on the clean test labels.

Models (:data:`MODELS`): VIBoost's default on the frame (categorical splits from the dtypes);
VIBoost's default on the same table one-hot encoded (``pd.get_dummies`` over the whole table,
so train and test share the columns; a missing category is all zeros), the baseline of issue
53; LightGBM (category dtype), HistGradientBoosting (``categorical_features="from_dtype"``),
CatBoost's defaults (categorical columns as ``cat_features``, missing as the string "nan"),
and CleanLearning(LightGBM). Detectors: ``viboost`` (``mislabel_proba_``, ``noise_rate_`` and
its 90% interval ``noise_rate_interval_``) and ``cleanlab`` (label quality and the off-diagonal
mass of its joint, from 5-fold out-of-fold LightGBM probabilities).

It writes, atomically, ``label_noise_mixed.csv`` (one row per set, setting, split and model;
rewritten after every task, so that ``--resume`` goes on from it), ``..._summary.csv`` and
``label_noise_mixed.md`` (the tables and the targets of issue 53).
"""

from __future__ import annotations

import time
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

#: Set -> (file stem, target column, the positive class; None for all classes).
DATASETS: dict[str, tuple[str, str, str | None]] = {
    "credit": ("credit_data", "Status", "bad"),
    "attrition": ("attrition", "Attrition", "Yes"),
    "churn": ("wa_churn", "churn", "Yes"),
    "penguins": ("penguins", "species", None),
}
BINARY_SETTINGS = ("0", "10", "20", "30")
MULTICLASS_SETTINGS = ("0", "20")
SETTINGS = ("0", "10", "20", "30")
TRAIN_SIZE = 0.5
OUT_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MODELS = {
    "viboost": "VIBoostClassifier(random_state=seed) on the frame (categorical_features="
    '"from_dtype", the default)',
    "viboost-onehot": "VIBoostClassifier(random_state=seed) on pd.get_dummies(frame)",
    "lgbm": "LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1) (category dtype)",
    "hgb": 'HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)',
    "catboost": "CatBoostClassifier(random_seed=seed, verbose=False, thread_count=1, "
    "cat_features=<the categorical columns>)",
    "cleanlab": "CleanLearning(LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1), "
    'seed=seed, find_label_issues_kwargs={"n_jobs": 1})',
}
DETECTORS = ("viboost", "cleanlab")
#: The peers of the clean-label target (issue 53: within 0.5 point of the best of these).
CLEAN_PEERS = ("lgbm", "hgb", "catboost")
#: The peers of the flipped-label target (at most the best of these).
NOISY_PEERS = ("lgbm", "hgb", "catboost", "cleanlab")
METRICS = ("test_error", "auroc", "precision_at_k", "rate_est", "rate_abs_err", "covered")


def load_mixed(name: str, data_dir: Path) -> tuple[pd.DataFrame, np.ndarray] | None:
    """The features (non-numeric columns as ``category``) and the labels coded 0..K-1 (binary:
    1 = the positive class; K classes: the sorted class names), or None when the file is
    missing."""
    stem, target, positive = DATASETS[name]
    path = Path(data_dir) / f"{stem}.csv.gz"
    if not path.is_file():
        print(f"note: skipping {name}: {path} not found", flush=True)
        return None
    frame = pd.read_csv(path)
    labels = frame.pop(target).astype(str)
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].astype("category")
    if positive is None:
        y = np.searchsorted(np.sort(labels.unique()), labels.to_numpy())
    else:
        if positive not in set(labels):
            raise ValueError(f"{name}: no {positive!r} in {target}")
        y = (labels == positive).to_numpy()
    return frame, np.asarray(y, dtype=np.int64)


def categorical_columns(X: pd.DataFrame) -> list[str]:
    """The names of the frame's ``category`` columns."""
    return [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)]


def for_catboost(X: pd.DataFrame) -> pd.DataFrame:
    """CatBoost's categorical input: strings, a missing cell as "nan"."""
    columns = categorical_columns(X)
    return X.assign(**{c: X[c].astype(str).fillna("nan") for c in columns})


def make_model(name: str, seed: int, X: pd.DataFrame) -> Any:
    """A fresh, unfitted model of :data:`MODELS`, on one thread."""
    from viboost import VIBoostClassifier

    if name in ("viboost", "viboost-onehot"):
        return VIBoostClassifier(random_state=seed)
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)
    if name == "catboost":
        from catboost import CatBoostClassifier

        return CatBoostClassifier(
            random_seed=seed, verbose=False, thread_count=1, allow_writing_files=False,
            cat_features=categorical_columns(X),
        )  # fmt: skip
    import label_noise as ln

    if name == "lgbm":
        return ln.lgbm(seed, n_jobs=1)
    if name == "cleanlab":
        from cleanlab.classification import CleanLearning

        return CleanLearning(ln.lgbm(seed, 1), seed=seed, find_label_issues_kwargs={"n_jobs": 1})
    raise ValueError(f"unknown model {name!r}")


def model_input(name: str, X: pd.DataFrame, onehot: pd.DataFrame) -> pd.DataFrame:
    """The rows ``X`` as the model takes them."""
    if name == "viboost-onehot":
        return onehot.loc[X.index]
    if name == "catboost":
        return for_catboost(X)
    return X


def make_flips(y: np.ndarray, setting: str, n_classes: int, seed: int) -> tuple[np.ndarray, ...]:
    """Noisy training labels and the mask of corrupted rows for one setting."""
    import label_noise as ln

    if n_classes == 2:
        return ln.make_noise(y, setting, seed)
    return ln.move_to_other_class(y, int(setting) / 100, n_classes, seed)


def detect(name: str, model: Any, X: pd.DataFrame, y: np.ndarray, seed: int) -> tuple:
    """A detector's suspicion per training row, noise rate and its 90% interval."""
    import label_noise as ln

    if name == "viboost":
        low, high = (float(v) for v in model.noise_rate_interval_)
        return (model.mislabel_proba_, float(model.noise_rate_), (low, high), "mislabel_proba_")
    proba = ln.out_of_fold_proba(ln.lgbm(seed, n_jobs=1), X, y, seed)
    return ln.cleanlab_detection(y, proba)


def run_task(
    dataset: str, X: pd.DataFrame, onehot: pd.DataFrame, y: np.ndarray, setting: str, seed: int,
    models: Sequence[str],
) -> list[dict[str, Any]]:  # fmt: skip
    """All models on one (set, setting, split): one result row per model."""
    import label_noise as ln

    n_classes = int(y.max()) + 1
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, train_size=TRAIN_SIZE, random_state=seed, stratify=y
    )
    y_noisy, flipped = make_flips(y_tr, setting, n_classes, seed)
    base = {"dataset": dataset, "setting": setting, "split": seed, "n_classes": n_classes}
    base |= {"n_train": len(y_tr), "n_test": len(y_te), "n_flipped": int(flipped.sum())}
    base |= {"true_rate": float(flipped.mean())}
    rows = []
    for name in models:
        row: dict[str, Any] = {**base, "model": name}
        try:
            with threadpool_limits(limits=1), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # LightGBM's and cleanlab's chatter
                model = make_model(name, seed, X_tr)
                train, test = model_input(name, X_tr, onehot), model_input(name, X_te, onehot)
                start = time.perf_counter()
                model.fit(train, y_noisy)
                row["fit_s"] = time.perf_counter() - start
                predicted = np.ravel(model.predict(test)).astype(np.int64)
                row["test_error"] = 100.0 * float(np.mean(predicted != y_te))
                if name in DETECTORS:
                    start = time.perf_counter()
                    row |= ln.detection_metrics(flipped, detect(name, model, X_tr, y_noisy, seed))
                    row["detect_s"] = time.perf_counter() - start
        except Exception as exc:  # one failing fit must not lose the other results
            print(f"error: {dataset} {setting} split {seed} {name}:\n{traceback.format_exc()}",
                  flush=True)  # fmt: skip
            row["note"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return rows


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean of every metric over splits, the interval's width, and the test error's standard
    error."""
    keys = ["dataset", "setting", "model"]
    results = results.assign(rate_width=results["rate_hi"] - results["rate_lo"])
    grouped = results.groupby(keys, sort=False)
    summary = grouped[[*METRICS, "rate_width", "fit_s"]].mean()
    summary["test_error_se"] = grouped["test_error"].std(ddof=1) / np.sqrt(grouped.size())
    summary["n_splits"] = grouped["test_error"].count()
    return summary


def _fmt(value: float, digits: int) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def targets(summary: pd.DataFrame) -> pd.DataFrame:
    """Issue 53's targets per set and setting: the test error's excess over the best peer
    (clean: LightGBM, HGB, CatBoost; flipped: those and CleanLearning), flip AUROC against
    cleanlab's, and the fit time against the one-hot baseline's."""
    rows = []
    for (dataset, setting), part in summary.groupby(level=["dataset", "setting"], sort=False):
        part = part.droplevel(["dataset", "setting"])
        peers = CLEAN_PEERS if setting == "0" else NOISY_PEERS
        errors = part["test_error"]
        best = min(
            (errors.get(p, np.nan) for p in peers), key=lambda v: np.inf if np.isnan(v) else v
        )
        auroc = part["auroc"]
        rows.append({
            "dataset": dataset, "setting": setting,
            "viboost": errors.get("viboost", np.nan), "best_peer": best,
            "excess": errors.get("viboost", np.nan) - best,
            "target": 0.5 if setting == "0" else 0.0,
            "onehot": errors.get("viboost-onehot", np.nan),
            "auroc": auroc.get("viboost", np.nan), "auroc_cleanlab": auroc.get("cleanlab", np.nan),
            "time_ratio": part["fit_s"].get("viboost", np.nan)
            / part["fit_s"].get("viboost-onehot", np.nan),
        })  # fmt: skip
    return pd.DataFrame(rows)


def report(results: pd.DataFrame, summary: pd.DataFrame, command: str) -> str:
    """The Markdown report: a table per set, then the targets."""
    import label_noise as ln

    present = [m for m in MODELS if m in set(results["model"])]
    lines = [
        "# Label noise on mixed-type tables (categorical columns)",
        "",
        f"Generated by `{command}` (do not edit by hand); {ln.versions()}. Protocol: "
        "`benchmarks/label_noise_mixed.py`'s docstring. Test error in % on the clean test labels "
        "(mean over splits, ± its standard error for VIBoost); `auroc`: flip AUROC of the "
        "training rows; `rate`: the estimated share of wrong training labels, `cov`: the share "
        "of splits whose 90% interval holds the true share; fit seconds on one thread.",
        "",
        "Models:",
        "",
        *(f"- `{m}`: {MODELS[m]}" for m in present),
    ]
    for dataset in [d for d in DATASETS if d in set(results["dataset"])]:
        part = summary.loc[dataset]
        settings = [s for s in SETTINGS if s in part.index.get_level_values("setting")]
        label = "moved" if dataset == "penguins" else "flips"
        head = [label, *present, "viboost auroc", "cleanlab auroc", "viboost rate", "cov",
                "width", "cleanlab rate", "viboost s", "one-hot s"]  # fmt: skip
        lines += ["", f"## {dataset}", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" + "---:|" * (len(head) - 1)]  # fmt: skip
        for s in settings:
            cells = [f"{s}%"]
            for m in present:
                value = part["test_error"].get((s, m), np.nan)
                se = part["test_error_se"].get((s, m), np.nan)
                cells.append(_fmt(value, 2) + (f" ± {_fmt(se, 2)}" if m == "viboost" else ""))
            get = part.get
            cells += [
                _fmt(get("auroc").get((s, "viboost"), np.nan), 3),
                _fmt(get("auroc").get((s, "cleanlab"), np.nan), 3),
                _fmt(get("rate_est").get((s, "viboost"), np.nan), 3),
                _fmt(get("covered").get((s, "viboost"), np.nan), 2),
                _fmt(get("rate_width").get((s, "viboost"), np.nan), 3),
                _fmt(get("rate_est").get((s, "cleanlab"), np.nan), 3),
                _fmt(get("fit_s").get((s, "viboost"), np.nan), 2),
                _fmt(get("fit_s").get((s, "viboost-onehot"), np.nan), 2),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    table = targets(summary)
    met_clean = table[(table.setting == "0") & (table.excess <= 0.5)]
    noisy = table[table.setting != "0"]
    lines += [
        "",
        "## Targets (issue 53)",
        "",
        "Clean labels: VIBoost's test error within 0.5 point of the best of LightGBM, HGB and "
        "CatBoost; flipped labels: at most the best of those and CleanLearning; flip AUROC at "
        "least cleanlab's; fit time at most 1.2 times the one-hot baseline's.",
        "",
        "| set | setting | VIBoost | best peer | excess | met | one-hot VIBoost | AUROC | "
        "cleanlab AUROC | time / one-hot |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for row in table.itertuples():
        met = "yes" if row.excess <= row.target else f"no (+{row.excess - row.target:.2f})"
        lines.append(
            f"| {row.dataset} | {row.setting}% | {_fmt(row.viboost, 2)} | {_fmt(row.best_peer, 2)}"
            f" | {row.excess:+.2f} | {met} | {_fmt(row.onehot, 2)} | {_fmt(row.auroc, 3)} | "
            f"{_fmt(row.auroc_cleanlab, 3)} | {_fmt(row.time_ratio, 2)} |"
        )
    auroc_met = noisy[noisy.auroc >= noisy.auroc_cleanlab]
    lines += [
        "",
        f"- clean within 0.5 point of the best peer: {len(met_clean)} of "
        f"{int((table.setting == '0').sum())}",
        f"- flipped at most the best peer's: {int((noisy.excess <= 0).sum())} of {len(noisy)}",
        f"- flip AUROC at least cleanlab's: {len(auroc_met)} of {len(noisy)}",
        f"- fit time / one-hot (median over cells): {np.nanmedian(table.time_ratio):.2f}",
    ]
    covered = results[(results.model == "viboost") & (results.setting != "0")]["covered"]
    lines.append(f"- VIBoost's 90% intervals holding the true share (flipped): {covered.mean():.2f}"
                 f" of {covered.count()} fits")  # fmt: skip
    return "\n".join(lines) + "\n"


def run_mixed(
    datasets: Sequence[str] = tuple(DATASETS),
    splits: int = 10,
    models: Sequence[str] = tuple(MODELS),
    *,
    n_jobs: int = 1,
    out_dir: Path = OUT_DIR,
    data_dir: Path = DATA_DIR,
    resume: bool = False,
    command: str = "python benchmarks/label_noise.py --part mixed",
) -> pd.DataFrame:
    """Run the tasks split by split (rewriting the CSV after each), then write the summary
    and the report; return the rows. ``resume`` keeps the CSV's rows and skips the fits there
    that succeeded."""
    import label_noise as ln

    models = [m for m in MODELS if m in models]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "label_noise_mixed.csv"
    key = ["dataset", "setting", "split", "model"]
    old = pd.DataFrame(columns=[*key, "note"])
    if resume and csv.is_file():
        old = pd.read_csv(csv, dtype={"setting": str})
        old["note"] = old["note"] if "note" in old else np.nan  # a run without failures
    done = set(old.loc[old["note"].isna(), key].itertuples(index=False, name=None))
    data = {d: load_mixed(d, data_dir) for d in DATASETS if d in datasets}
    tasks = []
    for seed in range(splits):
        for d, loaded in data.items():
            if loaded is None:
                continue
            X, y = loaded
            onehot = pd.get_dummies(X, columns=categorical_columns(X), dtype=float)
            settings = MULTICLASS_SETTINGS if y.max() > 1 else BINARY_SETTINGS
            for s in settings:
                todo = [m for m in models if (d, s, seed, m) not in done]
                if todo:
                    tasks.append((d, X, onehot, y, s, seed, todo))
    planned = {(t[0], t[4], t[5], m) for t in tasks for m in t[6]}
    old = old[[k not in planned for k in old[key].itertuples(index=False, name=None)]]
    ln.note(f"{len(tasks)} tasks to run" + (f"; {len(done)} fits kept from {csv}" if done else ""))
    frames, start = ([old] if len(old) else []), time.perf_counter()
    out = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(run_task)(*task) for task in tasks)
    for i, (task, rows) in enumerate(zip(tasks, out, strict=True), start=1):
        frames.append(pd.DataFrame(rows))
        results = pd.concat(frames, ignore_index=True)
        results["note"] = results["note"] if "note" in results else np.nan
        ln.write_atomic(csv, lambda p, r=results: r.to_csv(p, index=False))
        timings = " ".join(f"{r['model']}={r.get('fit_s', np.nan):.1f}s" for r in rows)
        ln.note(f"[{i}/{len(tasks)}, {time.perf_counter() - start:.0f} s] {task[0]} {task[4]}% "
                f"split {task[5]}: {timings}")  # fmt: skip
    results = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if results.empty:
        ln.note("note: nothing to report: no data set found and nothing kept")
        return results
    results["setting"] = results["setting"].astype(str)
    results["note"] = results["note"] if "note" in results else np.nan
    for column in ("rate_lo", "rate_hi", *METRICS):
        if column not in results:
            results[column] = np.nan
    summary = summarise(results)
    ln.write_atomic(csv, lambda p: results.to_csv(p, index=False))
    ln.write_atomic(out_dir / "label_noise_mixed_summary.csv", lambda p: summary.to_csv(p))
    text = report(results, summary, command)
    ln.write_atomic(out_dir / "label_noise_mixed.md",
                    lambda p: Path(p).write_text(text, encoding="utf-8"))  # fmt: skip
    print(text)
    return results
