"""Label-noise robustness: test error, flip detection and flip-rate estimates under label flips.

Run from the repository root (the full benchmark: 5 data sets x 5 settings x 10 splits)::

    python benchmarks/label_noise.py
    python benchmarks/label_noise.py --datasets spambase --splits 2 --settings 0 20 cc
    python benchmarks/label_noise.py --reuse --models viboost viboost-paper   # baselines kept

and its multi-class part (2 data sets x 5 settings x 10 splits; see "Multi-class part" below)::

    python benchmarks/label_noise.py --part multiclass
    python benchmarks/label_noise.py --part multiclass --resume   # go on after an interruption
    python benchmarks/label_noise.py --part multiclass --datasets dna --splits 1 --settings 0 20

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
:func:`detect_viboost`. ``rfl`` is LightGBM on the Robust Focal Loss of Robust-GBDT (Luo et al.,
arXiv 2310.05067; ``benchmarks/robust_focal.py``), in both parts. Every fit runs on one
thread (threadpoolctl and ``n_jobs=1``), so neither results nor timings depend on ``--n-jobs``
(but other load on the machine slows the fits: the seconds are for comparing models within one
run). Missing data sets are skipped.

Multi-class part (``--part multiclass``; :func:`run_multiclass_benchmark`). DNA (3 classes)
and Satellite (6 classes) with all their classes (:data:`MC_CLASSES`), split 50/50 (stratified,
seeds 0..K-1). Training labels only: exactly 0/10/20/30% of them moved to a uniformly random
other class (:func:`move_to_other_class`), or, setting ``pair``, 20% of each class k moved to
class (k + 1) mod K (:func:`move_pairwise`). Models: :data:`MC_MODELS`, each on all cores
(``--threads 1``: on one thread, as in the binary part; on a busy machine LightGBM's and
HistGradientBoosting's OpenMP threads can wait on each other for seconds per fit). Detectors:
``viboost`` (``mislabel_proba_``, ``noise_rate_`` and its interval, ``noise_matrix_``) and
``cleanlab`` on 5-fold out-of-fold LightGBM probabilities (:func:`detect_cleanlab_multiclass`);
besides flip AUROC and rate error, the mean absolute error of the estimated noise matrix
against the split's empirical one (:func:`true_noise_matrix`, :func:`noise_matrix_mae`). It
writes ``label_noise_multiclass.csv`` (rewritten after every task, so ``--resume`` can go on
from it), ``..._summary.csv``, ``.md`` and ``.png``; a progress line per task goes to stderr.
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
from typing import Any, NamedTuple

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
#: The ``rfl`` peer as written in the report (``n_jobs`` filled in).
RFL_TEXT = (
    "RobustFocalLGBM(seed, n_jobs={n_jobs}) (benchmarks/robust_focal.py: "
    "LGBMClassifier(verbose=-1, random_state=seed, n_jobs={n_jobs}) on the Robust Focal Loss "
    "of Robust-GBDT, "
    "(1 - p_t)^r (1 - p_t^q) / q with r = 0.5, q = 0.3, Hessian floored at 1e-6, started from "
    "the log prior odds / log class priors)"
)
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
    "rfl": RFL_TEXT.format(n_jobs=1),
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

# The multi-class part (``--part multiclass``): all classes, 50/50 splits.
MC_DATASETS = ("dna", "satellite")
#: The class names of each multi-class data set, sorted: class k of the benchmark is the k-th.
MC_CLASSES = {
    "dna": ("ei", "ie", "n"),
    "satellite": (
        "cotton crop",
        "damp grey soil",
        "grey soil",
        "red soil",
        "vegetation stubble",
        "very damp grey soil",
    ),
}
MC_TRAIN_SIZE = 0.5
MC_SETTINGS = ("0", "10", "20", "30", "pair")
#: Share of each class's rows moved to the next class in the ``pair`` setting.
PAIR_RATE = 0.2
MC_SETTING_LABEL = {"0": "0%", "10": "10%", "20": "20%", "30": "30%", "pair": "pairwise 20%"}
#: Model name -> its settings as written in the report; :func:`make_multiclass_model` builds them.
MC_MODELS = {
    "viboost": "VIBoostClassifier(random_state=seed, n_jobs=-1) (the library default; K classes "
    "natively)",
    "lgbm": "LGBMClassifier(random_state=seed, verbose=-1, n_jobs=-1)",
    "hgb": "HistGradientBoostingClassifier(random_state=seed)",
    "cleanlab": "CleanLearning(LGBMClassifier(random_state=seed, verbose=-1, n_jobs=-1), "
    "seed=seed)",
    "rfl": RFL_TEXT.format(n_jobs=-1),
    "ovr-viboost": "OneVsRestClassifier(VIBoostClassifier(random_state=seed, n_jobs=-1)) (the "
    "route before K-class fits; no noise statistics)",
    "viboost-drop": "VIBoostClassifier(random_state=seed, n_jobs=-1, mislabeled='drop') (the "
    "refit leaves out the flagged rows; its noise statistics are viboost's)",
    "viboost-folds": "VIBoostClassifier(random_state=seed, n_jobs=-1, "
    "final_model='fold-average') (the average of one booster per fold in place of the refit; "
    "its noise statistics are viboost's)",
}
MC_DETECTORS = ("viboost", "cleanlab")
#: The peers of the error target: ``viboost``'s test error is at most the best of theirs.
MC_PEERS = ("lgbm", "hgb", "cleanlab", "ovr-viboost")
MC_METRICS = (*METRICS, "nm_mae")
#: Targets of the multi-class part: the most rate error, and the most noise-matrix MAE as a
#: share of cleanlab's.
MC_RATE_TARGET = 0.03
MC_NM_TARGET = 0.5


class Part(NamedTuple):
    """What the helpers shared by the binary and the multi-class part need to know of one."""

    stem: str  # output files: {stem}.csv, {stem}_summary.csv, {stem}.md, {stem}.png
    datasets: tuple[str, ...]
    settings: tuple[str, ...]
    setting_label: dict[str, str]
    models: dict[str, str]
    detectors: tuple[str, ...]
    metrics: tuple[str, ...]
    special: str  # the setting off the plot's rate axis (its own marker in the rate scatter)
    noise_label: str  # the x axis of the plot's first two rows


BINARY = Part(
    "label_noise",
    DATASETS,
    SETTINGS,
    SETTING_LABEL,
    MODELS,
    DETECTORS,
    METRICS,
    "cc",
    "symmetric flip rate (%)",
)
MULTICLASS = Part(
    "label_noise_multiclass",
    MC_DATASETS,
    MC_SETTINGS,
    MC_SETTING_LABEL,
    MC_MODELS,
    MC_DETECTORS,
    MC_METRICS,
    "pair",
    "labels moved to another class (%)",
)


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
        shared = read_shared(name, data_dir)
        if shared is None:
            return None
        X, classes = shared
        if name == "dna":
            y = classes.isin(DNA_JUNCTIONS).to_numpy()
        else:
            if not set(SATELLITE_GREY) <= set(classes.unique()):
                raise ValueError(f"unexpected satellite classes: {sorted(classes.unique())}")
            y = classes.isin(SATELLITE_GREY).to_numpy()
    return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)


def read_shared(name: str, data_dir: Path) -> tuple[np.ndarray, pd.Series] | None:
    """Features (float64) and the class column of a shared data set (``dna`` or
    ``satellite``), or None when its file is missing."""
    path = data_dir / f"{name}.csv.gz"
    if not path.is_file():
        note(f"note: skipping {name}: {path} not found")
        return None
    frame = pd.read_csv(path)
    if name == "dna":
        features, label = [f"V{i}" for i in range(1, 181)], "Class"
    else:
        features, label = [f"x.{i}" for i in range(1, 37)], "classes"
    return frame[features].to_numpy(dtype=np.float64), frame[label]


def load_multiclass(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """Features (float64) and all classes of a shared data set, coded 0..K-1 in the sorted
    order of the class names (:data:`MC_CLASSES`), or None when its file is missing."""
    shared = read_shared(name, data_dir)
    if shared is None:
        return None
    X, classes = shared
    if sorted(classes.unique()) != list(MC_CLASSES[name]):
        raise ValueError(f"unexpected {name} classes: {sorted(classes.unique())}")
    return X, np.searchsorted(np.array(MC_CLASSES[name]), classes.to_numpy()).astype(np.int64)


def make_noise(y: np.ndarray, setting: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy training labels and the mask of flipped rows for one setting."""
    if setting == "cc":
        return flip_labels_class_conditional(y, 0.3, 0.1, random_state=seed)
    return flip_labels(y, int(setting) / 100, random_state=seed)


def move_to_other_class(
    y: np.ndarray, rate: float, n_classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Move exactly ``round(rate * n)`` labels, drawn uniformly, each to a uniformly random
    *other* class of 0..K-1; return the noisy labels and the mask of moved rows."""
    rng = np.random.default_rng(seed)
    moved = np.zeros(y.size, dtype=bool)
    moved[rng.choice(y.size, size=round(rate * y.size), replace=False)] = True
    y_noisy = y.copy()
    y_noisy[moved] = (y[moved] + rng.integers(1, n_classes, size=moved.sum())) % n_classes
    return y_noisy, moved


def move_pairwise(
    y: np.ndarray, rate: float, n_classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """In each class k of 0..K-1, move exactly ``round(rate * n_k)`` of its labels, drawn
    uniformly, to class (k + 1) mod K; return the noisy labels and the mask of moved rows."""
    rng = np.random.default_rng(seed)
    moved = np.zeros(y.size, dtype=bool)
    for k in range(n_classes):
        rows = np.flatnonzero(y == k)
        moved[rng.choice(rows, size=round(rate * rows.size), replace=False)] = True
    y_noisy = y.copy()
    y_noisy[moved] = (y[moved] + 1) % n_classes
    return y_noisy, moved


def make_multiclass_noise(
    y: np.ndarray, setting: str, n_classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Noisy training labels (0..K-1) and the mask of moved rows for one multi-class setting."""
    if setting == "pair":
        return move_pairwise(y, PAIR_RATE, n_classes, seed)
    return move_to_other_class(y, int(setting) / 100, n_classes, seed)


def true_noise_matrix(y_true: np.ndarray, y_given: np.ndarray, n_classes: int) -> np.ndarray:
    """The empirical noise matrix of a split: ``[i, j]`` is the share of the rows of true class
    j whose given label is i (cleanlab's orientation: columns sum to 1)."""
    counts = np.zeros((n_classes, n_classes))
    np.add.at(counts, (y_given, y_true), 1.0)
    return counts / np.maximum(counts.sum(axis=0), 1.0)


def noise_matrix_mae(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Mean absolute error over all K x K entries of an estimated noise matrix."""
    return float(np.mean(np.abs(np.asarray(estimate) - truth)))


def lgbm(seed: int, n_jobs: int) -> Any:
    """LightGBM's defaults (quiet, seeded), on ``n_jobs`` threads."""
    from lightgbm import LGBMClassifier

    return LGBMClassifier(verbose=-1, random_state=seed, n_jobs=n_jobs)


def sibling(name: str) -> Any:
    """The module ``benchmarks/{name}.py`` (imported by name, or by path when this script was
    loaded by path, as in the tests)."""
    module = sys.modules.get(name)
    if module is None:
        path = Path(__file__).resolve().with_name(f"{name}.py")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


def robust_focal_lgbm(seed: int, n_jobs: int) -> Any:
    """The ``rfl`` peer: ``RobustFocalLGBM(seed, n_jobs)`` of ``benchmarks/robust_focal.py``."""
    return sibling("robust_focal").RobustFocalLGBM(seed, n_jobs=n_jobs)


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
    if name == "rfl":
        return robust_focal_lgbm(seed, n_jobs=1)
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
        return lgbm(seed, n_jobs=1)
    if name == "cleanlab":
        from cleanlab.classification import CleanLearning

        return CleanLearning(lgbm(seed, 1), seed=seed, find_label_issues_kwargs={"n_jobs": 1})
    raise ValueError(f"unknown model {name!r}")


def make_multiclass_model(name: str, seed: int, threads: int = -1) -> Any:
    """A fresh, unfitted model of :data:`MC_MODELS`: ``n_jobs=threads`` for VIBoost and
    LightGBM (-1, the default, is all cores, as written there), and with ``threads >= 1`` also
    cleanlab's ``find_label_issues_kwargs={"n_jobs": threads}`` (HistGradientBoosting takes
    its threads from the caller's threadpoolctl limit)."""
    if name == "viboost":
        return VIBoostClassifier(random_state=seed, n_jobs=threads)
    if name == "viboost-drop":
        return VIBoostClassifier(random_state=seed, n_jobs=threads, mislabeled="drop")
    if name == "viboost-folds":
        return VIBoostClassifier(random_state=seed, n_jobs=threads, final_model="fold-average")
    if name == "ovr-viboost":
        from sklearn.multiclass import OneVsRestClassifier

        return OneVsRestClassifier(VIBoostClassifier(random_state=seed, n_jobs=threads))
    if name == "lgbm":
        return lgbm(seed, n_jobs=threads)
    if name == "hgb":
        return make_model("hgb", seed)
    if name == "rfl":
        return robust_focal_lgbm(seed, n_jobs=threads)
    if name == "cleanlab":
        from cleanlab.classification import CleanLearning

        kwargs = {"find_label_issues_kwargs": {"n_jobs": threads}} if threads >= 1 else {}
        return CleanLearning(lgbm(seed, n_jobs=threads), seed=seed, **kwargs)
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


def out_of_fold_proba(model: Any, X: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """5-fold out-of-fold class probabilities, ``StratifiedKFold(5, shuffle=True,
    random_state=seed)``: cleanlab's input."""
    cv = StratifiedKFold(5, shuffle=True, random_state=seed)
    return cross_val_predict(model, X, y, cv=cv, method="predict_proba")


def cleanlab_detection(y: np.ndarray, proba: np.ndarray) -> Detection:
    """Cleanlab's suspicion (1 - label quality) and its share of wrong labels (the off-diagonal
    mass of its joint of given and true labels) from out-of-fold probabilities."""
    from cleanlab.count import estimate_joint
    from cleanlab.rank import get_label_quality_scores

    joint = estimate_joint(y, proba)
    rate = float(joint.sum() - np.trace(joint))
    return 1.0 - get_label_quality_scores(y, proba), rate, (np.nan, np.nan), "cleanlab"


def detect_cleanlab(X: np.ndarray, y: np.ndarray, seed: int) -> Detection:
    """Cleanlab's suspicion and flip rate from 5-fold out-of-fold AdaBoost probabilities."""
    return cleanlab_detection(y, out_of_fold_proba(adaboost(seed), X, y, seed))


def detect_viboost_multiclass(fitted: VIBoostClassifier) -> tuple[Detection, np.ndarray]:
    """A K-class fit's suspicion (``mislabel_proba_``), share of wrong labels with its 90%
    interval, and noise matrix (classes 0..K-1 in order)."""
    n_classes = fitted.noise_matrix_.shape[0]
    if not np.array_equal(fitted.classes_, np.arange(n_classes)):
        raise ValueError(f"expected classes 0..{n_classes - 1}, got {fitted.classes_}")
    lo, hi = (float(v) for v in fitted.noise_rate_interval_)
    det = (fitted.mislabel_proba_, float(fitted.noise_rate_), (lo, hi), "mislabel_proba_")
    return det, fitted.noise_matrix_


def detect_cleanlab_multiclass(
    X: np.ndarray, y: np.ndarray, seed: int, threads: int = -1
) -> tuple[Detection, np.ndarray]:
    """Cleanlab's suspicion, share of wrong labels and noise matrix (``P(given i | true j)``,
    from ``estimate_py_and_noise_matrices_from_probabilities`` with its defaults) from 5-fold
    out-of-fold LightGBM probabilities (on ``n_jobs=threads``)."""
    from cleanlab.count import estimate_py_and_noise_matrices_from_probabilities

    proba = out_of_fold_proba(lgbm(seed, n_jobs=threads), X, y, seed)
    _, noise_matrix, _, _ = estimate_py_and_noise_matrices_from_probabilities(y, proba)
    return cleanlab_detection(y, proba), noise_matrix


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


def run_multiclass_task(
    dataset: str,
    X: np.ndarray,
    y: np.ndarray,
    setting: str,
    seed: int,
    models: Sequence[str],
    threads: int = -1,
) -> list[dict[str, Any]]:
    """All models on one multi-class (data set, setting, split): one result row per model;
    each fit on ``threads`` threads (-1: all cores; see :func:`make_multiclass_model`)."""
    n_classes = int(y.max()) + 1
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, train_size=MC_TRAIN_SIZE, random_state=seed, stratify=y
    )
    y_noisy, moved = make_multiclass_noise(y_tr, setting, n_classes, seed)
    truth = true_noise_matrix(y_tr, y_noisy, n_classes)
    base = {"dataset": dataset, "setting": setting, "split": seed, "n_classes": n_classes}
    base |= {"n_train": len(y_tr), "n_test": len(y_te), "n_flipped": int(moved.sum())}
    base |= {"true_rate": moved.mean(), "threads": threads}
    rows = []
    for name in models:
        row: dict[str, Any] = {**base, "model": name}
        try:
            with threadpool_limits(limits=threads if threads >= 1 else None):
                model = make_multiclass_model(name, seed, threads)
                start = time.perf_counter()
                model.fit(X_tr, y_noisy)
                row["fit_s"] = time.perf_counter() - start
                row["test_error"] = 100.0 * float(np.mean(model.predict(X_te) != y_te))
                if name in MC_DETECTORS:
                    start = time.perf_counter()
                    if name == "viboost":
                        det, matrix = detect_viboost_multiclass(model)
                    else:
                        det, matrix = detect_cleanlab_multiclass(X_tr, y_noisy, seed, threads)
                    row |= detection_metrics(moved, det)
                    row["nm_mae"] = noise_matrix_mae(matrix, truth)
                    row["detect_s"] = time.perf_counter() - start
        except Exception as exc:  # one failing fit must not lose an hour of other results
            note(f"error: {dataset} {setting} split {seed} {name}:\n{traceback.format_exc()}")
            row["note"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return rows


def interval_width(results: pd.DataFrame) -> pd.Series:
    """Width of each fit's 90% interval of the flip rate (NaN without one)."""
    if {"rate_lo", "rate_hi"} <= set(results.columns):
        return results["rate_hi"] - results["rate_lo"]
    return pd.Series(np.nan, index=results.index)


def summarise(results: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Mean of every metric and of the interval's width (``rate_width``), and standard error
    of the test error over splits."""
    keys = ["dataset", "setting", "model"]
    grouped = results.assign(rate_width=interval_width(results)).groupby(keys, sort=False)
    summary = grouped[[*metrics, "rate_width", "fit_s", "detect_s"]].mean()
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


Column = tuple[str, str, str, int]  # header, model, metric, digits


def settings_table(part: pd.DataFrame, columns: Sequence[Column], kind: Part) -> str:
    """A data set's summary as a markdown table: a row per setting, the given columns."""
    rows = []
    for setting in [s for s in kind.settings if s in part.index.get_level_values("setting")]:
        cells = [kind.setting_label[setting]]
        for _, model, metric, digits in columns:
            value = part[metric].get((setting, model), np.nan)
            cells.append(fmt(value, digits))
        rows.append(cells)
    return md_table(["setting", *(c[0] for c in columns)], rows)


def dataset_table(summary: pd.DataFrame, dataset: str) -> str:
    """One data set's table: a row per setting, columns as in the module docstring."""
    part = summary.loc[dataset]
    present = set(part.index.get_level_values("model"))
    models = [m for m in MODELS if m in present]
    detectors = [m for m in DETECTORS if m in present]
    columns = [(f"err {m}", m, "test_error", 2) for m in models]
    columns += [(f"AUROC {m}", m, "auroc", 3) for m in detectors]
    columns += [(f"P@k {m}", m, "precision_at_k", 3) for m in detectors]
    for m in detectors:  # the rate's |error|, then (interval detectors) coverage and width
        columns.append((f"rate err {m}", m, "rate_abs_err", 3))
        if m != "cleanlab":
            columns += [(f"cover {m}", m, "covered", 2), (f"width {m}", m, "rate_width", 3)]
    return settings_table(part, columns, BINARY)


def multiclass_table(summary: pd.DataFrame, dataset: str) -> str:
    """One multi-class data set's table: a row per setting; test errors, then ``viboost`` vs
    ``cleanlab`` as detectors (flip AUROC, rate error, with, next to ``viboost``'s, the
    coverage and mean width of its 90% interval, noise-matrix MAE), and the fit times of
    ``viboost`` and ``cleanlab``."""
    part = summary.loc[dataset]
    present = set(part.index.get_level_values("model"))
    models = [m for m in MC_MODELS if m in present]
    detectors = [m for m in MC_DETECTORS if m in present]
    columns = [(f"err {m}", m, "test_error", 2) for m in models]
    columns += [(f"AUROC {m}", m, "auroc", 3) for m in detectors]
    for m in detectors:
        columns.append((f"rate err {m}", m, "rate_abs_err", 3))
        if m == "viboost":
            columns += [("cover viboost", m, "covered", 2), ("width viboost", m, "rate_width", 3)]
    columns += [(f"NM MAE {m}", m, "nm_mae", 4) for m in detectors]
    columns += [(f"fit s {m}", m, "fit_s", 1) for m in detectors]
    columns += [
        (f"fit s {m}", m, "fit_s", 1) for m in ("viboost-drop", "viboost-folds") if m in present
    ]
    return settings_table(part, columns, MULTICLASS)


def targets_table(summary: pd.DataFrame) -> str:
    """Per data set and setting: does ``viboost`` meet the error, AUROC and rate targets? With
    the coverage and mean width of its 90% interval next to the rate's |error|."""
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
                fmt(vb.covered, 2),
                fmt(vb.rate_width, 3),
            ]
        )
    headers = ["data set", "setting", "viboost err", "reference err", "error target"]
    headers += ["AUROC viboost vs cleanlab", "AUROC target", "rate abs err", "rate <= 0.03"]
    headers += ["cover", "width"]
    return md_table(headers, rows)


def coverage_line(results: pd.DataFrame, models: Sequence[str]) -> str:
    """The summary line on the 90% intervals: per model, the share of its noisy fits (setting
    other than "0") whose interval holds the true share, and their mean width."""
    noisy = results[(results["setting"].astype(str) != "0") & results["covered"].notna()]
    parts = []
    for m in models:
        rows = noisy[noisy["model"] == m]
        if len(rows):
            width = interval_width(rows).mean()
            parts.append(
                f"`{m}` {rows['covered'].mean():.2f} ({len(rows)} fits; mean width {fmt(width, 3)})"
            )
    text = "; ".join(parts) if parts else "no fit with an interval"
    return (
        "Coverage of the 90% interval of the share of wrong labels over the noisy fits (all "
        f"settings but 0%): {text}."
    )


def target_cell(excess: float, digits: int) -> str:
    """A target's verdict: "yes" when ``excess`` (value minus bound, signed so that larger
    is worse) is <= 0, else "no (+miss)"; "-" when it cannot be judged."""
    if excess is None or not np.isfinite(excess):
        return "-"
    return "yes" if excess <= 0 else f"no (+{excess:.{digits}f})"


def multiclass_targets_table(summary: pd.DataFrame) -> str:
    """Per data set and setting: does ``viboost`` meet the multi-class targets, and by how
    much does it miss them (test error vs the best peer in points, AUROC vs cleanlab's, rate
    error vs 0.03, noise-matrix MAE vs half of cleanlab's, fit seconds vs CleanLearning's)?"""
    rows = []
    for (dataset, setting), part in summary.groupby(level=["dataset", "setting"], sort=False):
        part = part.droplevel(["dataset", "setting"])
        if "viboost" not in part.index:
            continue
        vb = part.loc["viboost"]
        cl = part.reindex(["cleanlab"]).iloc[0]  # all NaN without cleanlab
        errors = part["test_error"].reindex([m for m in MC_PEERS if m in part.index]).dropna()
        best = errors.idxmin() if len(errors) else None
        ref = errors.min() if best else np.nan
        rows.append(
            [
                dataset,
                MC_SETTING_LABEL[setting],
                f"{fmt(vb.test_error, 2)} vs {best} {fmt(ref, 2)}",
                target_cell(vb.test_error - ref, 2),
                f"{fmt(vb.auroc, 3)} vs {fmt(cl.auroc, 3)}",
                target_cell(cl.auroc - vb.auroc, 3),
                fmt(vb.rate_abs_err, 3),
                target_cell(vb.rate_abs_err - MC_RATE_TARGET, 3),
                f"{fmt(vb.nm_mae, 4)} vs {fmt(MC_NM_TARGET * cl.nm_mae, 4)}",
                target_cell(vb.nm_mae - MC_NM_TARGET * cl.nm_mae, 4),
                f"{fmt(vb.fit_s, 1)} vs {fmt(cl.fit_s, 1)}",
                target_cell(vb.fit_s - cl.fit_s, 1),
            ]
        )
    headers = ["data set", "setting", "err viboost vs best peer", "error target"]
    headers += ["AUROC viboost vs cleanlab", "AUROC target", "rate err viboost"]
    headers += [f"rate <= {MC_RATE_TARGET}", "NM MAE viboost vs cleanlab / 2", "NM target"]
    headers += ["fit s viboost vs cleanlab", "time target"]
    return md_table(headers, rows)


def plot(results: pd.DataFrame, summary: pd.DataFrame, kind: Part = BINARY) -> Figure:
    """Error, flip AUROC and estimated flip rate: one column per data set (no pyplot: Agg)."""
    datasets = [d for d in kind.datasets if d in set(results["dataset"])]
    fig = Figure(figsize=(4.2 * len(datasets), 11), layout="tight")
    axes = fig.subplots(3, len(datasets), squeeze=False)
    colors = dict(zip(kind.models, matplotlib.colormaps["tab10"].colors, strict=False))
    numeric = [s for s in kind.settings if s != kind.special]
    for col, dataset in enumerate(datasets):
        part = summary.loc[dataset]
        for model in [m for m in kind.models if m in set(part.index.get_level_values("model"))]:
            s = [x for x in numeric if (x, model) in part.index]
            xs = [int(x) for x in s]
            kw = {"color": colors[model], "marker": "o", "label": model}
            axes[0, col].plot(xs, [part.loc[(x, model), "test_error"] for x in s], **kw)
            if model in kind.detectors:
                s = [x for x in s if x != "0"]
                aucs = [part.loc[(x, model), "auroc"] for x in s]
                axes[1, col].plot([int(x) for x in s], aucs, **kw)
                rows = results[(results.dataset == dataset) & (results.model == model)]
                for special, marker in ((False, "o"), (True, "^")):
                    r = rows[(rows.setting == kind.special) == special]
                    label = f"{model} ({kind.special})" if special else model
                    kw |= {"marker": marker, "label": label}
                    axes[2, col].scatter(100 * r.true_rate, 100 * r.rate_est, alpha=0.6, **kw)
        axes[0, col].set_title(dataset)
        axes[0, col].set_xlabel(kind.noise_label)
        axes[1, col].set_xlabel(kind.noise_label)
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
        if axes[row, 0].get_legend_handles_labels()[0]:  # none: no model or detector there
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
        "true share; `width` mean width of that interval. Standard errors are in "
        "`label_noise_summary.csv`.",
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
        coverage_line(results, [m for m in DETECTORS if m != "cleanlab"]),
        "",
        f"Failed fits: {len(failed)}"
        + (" (see the `note` column of the CSV)." if len(failed) else "."),
        "",
        "![label noise](label_noise.png)",
        "",
    ]
    return "\n".join(lines)


def tidy(results: pd.DataFrame, kind: Part) -> pd.DataFrame:
    """Every metric column present (NaN where none), rows in the order of data set, setting,
    split and model."""
    for column in (*kind.metrics, "fit_s", "detect_s", "note", "noise_api"):
        if column not in results:
            results[column] = np.nan
    order = {
        "dataset": {d: i for i, d in enumerate(kind.datasets)},
        "setting": {s: i for i, s in enumerate(kind.settings)},
        "model": {m: i for i, m in enumerate(kind.models)},
    }
    return results.sort_values(
        ["dataset", "setting", "split", "model"],
        key=lambda c: c.map(order[c.name]) if c.name in order else c,
        ignore_index=True,
    )


def multiclass_report(results: pd.DataFrame, summary: pd.DataFrame, command: str) -> str:
    """The markdown report of the multi-class part."""
    used = sorted(set(results.get("threads", pd.Series([-1])).fillna(-1).astype(int)))
    if len(used) > 1:
        threads_text = f"the rows mix --threads {used} (see the `threads` column of the CSV)"
    elif used[0] < 1:
        threads_text = "each on all cores"
    else:
        threads_text = (
            f"here each fit on {used[0]} thread(s): `n_jobs={used[0]}` in place of -1, "
            f'cleanlab\'s `find_label_issues_kwargs={{"n_jobs": {used[0]}}}`, and a '
            "threadpoolctl limit"
        )
    datasets = [d for d in MC_DATASETS if d in set(results["dataset"])]
    models = "\n".join(f"- `{m}`: `{s}`" for m, s in MC_MODELS.items())
    classes = "\n".join(
        f"- `{d}` ({len(c)} classes): " + ", ".join(f"{k} `{name}`" for k, name in enumerate(c))
        for d, c in MC_CLASSES.items()
    )
    lines = [
        "# Label-noise robustness, K classes",
        "",
        "Generated by `benchmarks/label_noise.py --part multiclass` (do not edit by hand). Full "
        "run, from the repository root:",
        "",
        "    python benchmarks/label_noise.py --part multiclass",
        "",
        f"This file: `{command}`; {versions()}.",
        "",
        "## Protocol",
        "",
        "Data sets (read from `../shared/data/` or `--data-dir`), all classes, coded 0..K-1 in "
        "the sorted order of their names:",
        "",
        classes,
        "",
        f"Splits: `train_test_split(X, y, train_size={MC_TRAIN_SIZE}, random_state=seed, "
        "stratify=y)` for seeds 0..S-1.",
        "",
        "Noise, on the training labels only (test labels are clean): `0%`-`30%`, exactly that "
        "share of the training rows, drawn uniformly, each moved to a uniformly random other "
        f"class (`move_to_other_class`); `pairwise {PAIR_RATE:.0%}`, in each class k exactly "
        f"{PAIR_RATE:.0%} of its rows moved to class (k + 1) mod K (`move_pairwise`). Both are "
        "seeded by the split's seed.",
        "",
        f"Models ({threads_text}):",
        "",
        models,
        "",
        "Detectors. `viboost` is fitted once on the noisy labels: suspicion is "
        "`mislabel_proba_`, the share of wrong labels `noise_rate_` with its 90% interval "
        "`noise_rate_interval_`, the noise matrix `noise_matrix_`. `cleanlab` ranks by `1 - "
        "cleanlab.rank.get_label_quality_scores`, estimates the share as the off-diagonal mass "
        "of `cleanlab.count.estimate_joint` and the noise matrix with "
        "`cleanlab.count.estimate_py_and_noise_matrices_from_probabilities` (its defaults), "
        "all on 5-fold out-of-fold probabilities of `LGBMClassifier(random_state=seed, "
        "verbose=-1, n_jobs=-1)` (`StratifiedKFold(5, shuffle=True, random_state=seed)`); "
        "the CleanLearning model's own fit is separate.",
        "",
        "Columns (means over splits): `err` test error (%) on the clean test set; `AUROC` ROC "
        "AUC of suspicion against the moved mask (none at 0%); `rate err` |estimated - true "
        "share of moved training labels|; `NM MAE` mean absolute error over the K x K entries "
        "of the estimated noise matrix P(given label i | true class j) against the split's "
        "empirical one (the share of the training rows of true class j whose given label is "
        "i); `cover` share of splits whose 90% interval holds the true share; `width` mean "
        "width of that interval; `fit s` seconds "
        "of `fit` (for `cleanlab`, CleanLearning's; its detector's cross-validation is "
        "`detect_s` in the CSV). Fit times were measured on a machine shared with other work: "
        "compare them within this run only. Standard errors are in "
        "`label_noise_multiclass_summary.csv`.",
    ]
    for d in datasets:
        n = summary.loc[d, "n_splits"]
        n_text = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()} (differs!)"
        lines += ["", f"## {d}", "", f"Splits: {n_text}.", "", multiclass_table(summary, d)]
    failed = results[results["note"].notna()] if "note" in results else results.iloc[:0]
    lines += [
        "",
        "## Targets",
        "",
        "Per setting, `viboost` against: error, its test error <= the best of "
        + ", ".join(f"`{m}`" for m in MC_PEERS)
        + "; AUROC, its flip AUROC >= `cleanlab`'s; rate, its mean |rate error| <= "
        f"{MC_RATE_TARGET}; NM, its noise-matrix MAE <= {MC_NM_TARGET} x `cleanlab`'s; time, "
        "its mean fit seconds <= CleanLearning's. A miss says by how much (points, AUROC, "
        "rate, MAE, seconds).",
        "",
        multiclass_targets_table(summary),
        "",
        coverage_line(results, [m for m in MC_DETECTORS if m != "cleanlab"]),
        "",
        f"Failed fits: {len(failed)}"
        + (" (see the `note` column of the CSV)." if len(failed) else "."),
        "",
        "![label noise, K classes](label_noise_multiclass.png)",
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
    results = tidy(results, BINARY)
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


def run_multiclass_benchmark(
    datasets: Sequence[str] = MC_DATASETS,
    settings: Sequence[str] = MC_SETTINGS,
    splits: int = 10,
    models: Sequence[str] = tuple(MC_MODELS),
    *,
    n_jobs: int = 1,
    threads: int = -1,
    out_dir: Path = OUT_DIR,
    data_dir: Path = DATA_DIR,
    resume: bool = False,
    command: str = "python benchmarks/label_noise.py --part multiclass",
) -> pd.DataFrame:
    """Run the multi-class tasks, split by split; rewrite the CSV after each task (so that an
    interrupted run goes on with ``resume=True``, which keeps the rows there and skips the
    (data set, setting, split, model) fits that succeeded), then write summary, report and
    figure; return the rows. ``threads``: the threads of each fit (-1: all cores, the models
    as :data:`MC_MODELS` writes them); ``n_jobs``: processes over tasks."""
    models = [m for m in MC_MODELS if m in models]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / f"{MULTICLASS.stem}.csv"
    key = ["dataset", "setting", "split", "model"]
    old = pd.DataFrame(columns=[*key, "note"])
    if resume and csv.is_file():
        old = pd.read_csv(csv, dtype={"setting": str})
    elif resume:
        note(f"note: --resume: {csv} does not exist yet; starting afresh")
    done = set(old.loc[old["note"].isna(), key].itertuples(index=False, name=None))
    data = {d: load_multiclass(d, Path(data_dir)) for d in MC_DATASETS if d in datasets}
    tasks = []
    for seed in range(splits):  # split by split: an interrupted run has whole splits
        for d, xy in [(d, xy) for d, xy in data.items() if xy is not None]:
            for s in [s for s in MC_SETTINGS if s in settings]:
                todo = [m for m in models if (d, s, seed, m) not in done]
                if todo:
                    tasks.append((d, xy, s, seed, todo))
    planned = {(d, s, seed, m) for d, _, s, seed, todo in tasks for m in todo}
    old = old[[k not in planned for k in old[key].itertuples(index=False, name=None)]]
    note(f"{len(tasks)} tasks to run" + (f"; {len(done)} fits kept from {csv}" if done else ""))
    frames, start = [old] if len(old) else [], time.perf_counter()
    out = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(run_multiclass_task)(d, X, y, s, seed, todo, threads)
        for d, (X, y), s, seed, todo in tasks
    )
    for i, ((d, _, s, seed, _), rows) in enumerate(zip(tasks, out, strict=True), start=1):
        frames.append(pd.DataFrame(rows))
        results = tidy(pd.concat(frames, ignore_index=True), MULTICLASS)
        write_atomic(csv, lambda p, r=results: r.to_csv(p, index=False))
        timings = " ".join(f"{r['model']}={r.get('fit_s', np.nan):.1f}s" for r in rows)
        elapsed = time.perf_counter() - start
        note(
            f"[{i}/{len(tasks)}, {elapsed:.0f} s] {d} {MC_SETTING_LABEL[s]} split {seed}: {timings}"
        )
    results = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if results.empty:
        note("note: nothing to report: no data set found and nothing kept")
        return results
    results = tidy(results, MULTICLASS)
    summary = summarise(results, MC_METRICS)
    stem = out_dir / MULTICLASS.stem
    write_atomic(csv, lambda p: results.to_csv(p, index=False))
    write_atomic(stem.with_name(f"{stem.name}_summary.csv"), lambda p: summary.to_csv(p))
    text = multiclass_report(results, summary, command)
    write_atomic(stem.with_suffix(".md"), lambda p: Path(p).write_text(text, encoding="utf-8"))
    fig = plot(results, summary, MULTICLASS)
    write_atomic(stem.with_suffix(".png"), lambda p: fig.savefig(p, format="png", dpi=110))
    for d in [d for d in MC_DATASETS if d in set(results["dataset"])]:
        print(f"\n## {d}\n\n{multiclass_table(summary, d)}")
    print(f"\n## Targets\n\n{multiclass_targets_table(summary)}\n\nwrote {stem}.*")
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part",
        choices=("binary", "multiclass", "known-truth", "mixed"),
        default="binary",
        help="binary: the binarised data sets (default); multiclass: DNA and Satellite, K classes; "
        "known-truth: labels drawn from a smooth model of each set, then flipped "
        "(benchmarks/label_noise_known_truth.py); mixed: tables with categorical columns "
        "(benchmarks/label_noise_mixed.py)",
    )
    mixed = sibling("label_noise_mixed")
    kinds = (BINARY, MULTICLASS)
    choices = {
        "datasets": list(
            dict.fromkeys(
                [*(d for k in kinds for d in k.datasets), *mixed.DATASETS, "breast_cancer"]
            )
        ),
        "settings": list(dict.fromkeys(s for k in kinds for s in k.settings)),
        "models": list(dict.fromkeys([*(m for k in kinds for m in k.models), *mixed.MODELS])),
    }
    for option, names in choices.items():
        parser.add_argument(
            f"--{option}", nargs="+", choices=names, help=f"default: all of the part's {option}"
        )
    parser.add_argument("--splits", type=int, default=10, help="splits, seeds 0..K-1")
    parser.add_argument("--n-jobs", type=int, default=1, help="processes over tasks")
    parser.add_argument(
        "--threads",
        type=int,
        default=-1,
        help="multiclass: threads of each fit (default -1: all cores; 1 avoids OpenMP threads "
        "waiting on each other on a busy machine)",
    )
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="binary: keep the CSV rows of models not in --models; known-truth: keep the CSV rows "
        "of the sets not in --datasets",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="multiclass: keep the CSV's rows and skip the fits there that succeeded",
    )
    args = parser.parse_args(argv)
    if args.splits < 1:
        parser.error("--splits must be >= 1")
    if args.part == "known-truth":
        known = sibling("label_noise_known_truth")
        ignored = ["--settings"] if args.settings else []
        ignored += [f"--models {m}" for m in args.models or () if m != "viboost"]
        ignored += ["--resume"] if args.resume else []
        sets = args.datasets or [*known.BINARY_SETS, *known.MULTICLASS_SETS]
        ignored += [d for d in sets if d not in (*known.BINARY_SETS, *known.MULTICLASS_SETS)]
        if ignored or args.threads != -1:
            parser.error(
                f"{' '.join(ignored) or '--threads'}: not for the known-truth part (it fits "
                "every setting of the sets of benchmarks/label_noise_known_truth.py)"
            )

        command = " ".join(["python benchmarks/label_noise.py", *sys.argv[1:]])
        known.run_known_truth(args.splits, args.n_jobs, args.out_dir, args.data_dir,
                        command if argv is None else "run_known_truth(...)",
                        tuple(d for d in known.BINARY_SETS if d in sets),
                        tuple(d for d in known.MULTICLASS_SETS if d in sets),
                        reuse=args.reuse, keep_peers=args.models == ["viboost"])  # fmt: skip
        return
    if args.part == "mixed":
        wrong = [d for d in args.datasets or () if d not in mixed.DATASETS]
        wrong += [m for m in args.models or () if m not in mixed.MODELS]
        if wrong or args.settings or args.reuse or args.threads != -1:
            parser.error(
                f"{' '.join(wrong) or '--settings/--reuse/--threads'}: not for the mixed part "
                "(its sets, models and settings are those of benchmarks/label_noise_mixed.py)"
            )
        command = " ".join(["python benchmarks/label_noise.py", *sys.argv[1:]])
        mixed.run_mixed(args.datasets or tuple(mixed.DATASETS), args.splits,
                        args.models or tuple(mixed.MODELS), n_jobs=args.n_jobs,
                        out_dir=args.out_dir, data_dir=args.data_dir, resume=args.resume,
                        command=command if argv is None else "run_mixed(...)")  # fmt: skip
        return
    kind = MULTICLASS if args.part == "multiclass" else BINARY
    offered = {"datasets": kind.datasets, "settings": kind.settings, "models": kind.models}
    for option, names in offered.items():
        chosen = getattr(args, option)
        if chosen is None:
            setattr(args, option, list(names))
        elif wrong := [n for n in chosen if n not in names]:
            parser.error(f"--{option} {' '.join(wrong)}: not in the {args.part} part")
    if args.reuse if kind is MULTICLASS else args.resume:
        parser.error(f"--{'reuse' if args.reuse else 'resume'} is not for the {args.part} part")
    if kind is BINARY and args.threads != -1:
        parser.error("--threads is for the multiclass part (binary fits run on one thread)")
    command = " ".join(["python benchmarks/label_noise.py", *sys.argv[1:]])
    run = run_multiclass_benchmark if kind is MULTICLASS else run_benchmark
    extra = {"resume": args.resume, "threads": args.threads}
    if kind is BINARY:
        extra = {"reuse": args.reuse}
    run(
        args.datasets,
        args.settings,
        args.splits,
        args.models,
        n_jobs=args.n_jobs,
        out_dir=args.out_dir,
        data_dir=args.data_dir,
        command=command if argv is None else "run_benchmark(...)",
        **extra,
    )


if __name__ == "__main__":
    main()
