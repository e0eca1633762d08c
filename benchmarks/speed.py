"""Fit time, peak memory and accuracy of VIBoost against AdaBoost, LightGBM, XGBoost, cleanlab.

Run from the repository root::

    python benchmarks/speed.py                                   # N = 1e4, 1e5, 1e6; 100 rounds
    python benchmarks/speed.py --sizes 2000 5000 --rounds 10     # quick check
    python benchmarks/speed.py --models lightgbm xgboost --sizes 1000000 --repeats 3
    python benchmarks/speed.py --models trees --sizes 10000 100000   # the 31-leaf tree rows only
    python benchmarks/speed.py --models default --out benchmarks/speed_default.md  # default fits

Options: ``--sizes N ...`` (training rows; ``--rows`` is the same option), ``--rounds T``
(boosting rounds, default 100), ``--repeats R`` (best of R fits, and of R predictions of the
tree rows; default 1), ``--models KEY ...`` (a subset of ``viboost``, ``viboost-1iter``,
``adaboost``, ``lightgbm``, ``xgboost``, ``lightgbm-trees``, ``xgboost-trees``,
``viboost-trees``, ``cleanlab``, ``lightgbm-default``, ``viboost-default``,
``viboost-default-1thread``, or the groups ``stumps``, ``trees`` and ``default``; without
``--models``: the stump and tree rows, not the default group), ``--test-rows`` (default
100,000), ``--predict-rows`` (default 1,000,000), ``--out PATH`` (default
``benchmarks/speed.md``). The table is printed on stdout and written atomically to ``--out``;
progress goes to stderr. A model whose library is not installed or fails to import (XGBoost,
LightGBM, cleanlab: ``pip install ".[bench]"``) is skipped with a note on stderr and in the
report.

Stump rows, all with T = ``--rounds`` rounds of depth-1 trees (stumps):

- ``viboost``: ``VIBoostClassifier(n_estimators=T, preset="paper", random_state=0,
  n_jobs=-1)``: the engine at fixed rounds: preset='paper' (Algorithm 1 as printed, exactly T
  rounds, ELBO on; the default ``preset="robust"`` would cross-fit and choose its own number of
  rounds), on all cores as LightGBM and XGBoost;
- ``viboost-1iter``: ``VIBoostClassifier(n_estimators=T, preset="paper", fixed_vi_iter=1,
  random_state=0, n_jobs=-1)``;
- ``adaboost``: ``AdaBoostClassifier(estimator=DecisionTreeClassifier(max_depth=1),
  n_estimators=T)``, only for N <= 100,000;
- ``lightgbm``: ``LGBMClassifier(n_estimators=T, num_leaves=2, max_depth=1, verbose=-1)``;
- ``xgboost``: ``XGBClassifier(n_estimators=T, tree_method="hist", max_depth=1)``.

Every library of the stump rows runs with its default threading (LightGBM, XGBoost and numba
use all cores).

Tree rows, T = ``--rounds`` trees of up to 31 leaves grown best-first, learning rate 0.1, every
library on all cores (``n_jobs=-1``):

- ``lightgbm-trees``: ``LGBMClassifier(n_estimators=T, num_leaves=31, learning_rate=0.1,
  n_jobs=-1, verbose=-1)`` (at least 20 rows per leaf, its default);
- ``xgboost-trees``: ``XGBClassifier(n_estimators=T, tree_method="hist", max_leaves=31,
  grow_policy="lossguide", max_depth=0, learning_rate=0.1, n_jobs=-1)`` (``max_depth=0``: no
  depth limit, as LightGBM's and VIBoost's);
- ``viboost-trees``: ``VIBoostClassifier(n_estimators=T + 1, preset="paper",
  max_leaf_nodes=31, leaf_weights="per-leaf", alpha="exact", learning_rate=0.1,
  noise_model=False, min_samples_leaf=20, random_state=0, n_jobs=-1)``: one booster fitted
  in-sample (``preset="paper"`` fixes the rounds; no cross-fitting), the core model (no noise
  model, as the others have none), per-leaf weights at the mode of their exact posterior. Its
  first learner is the intercept (a one-leaf tree), so T + 1 learners are T trees after it, as
  LightGBM's and XGBoost's T trees follow their initial score.

The tree rows also time the prediction (``predict_proba``) of the N training rows, after a
warm-up call on 1,000 rows, best of ``--repeats``; the report gives each tree row's fit and
predict times against LightGBM's at the same N (VIBoost/LightGBM, XGBoost/LightGBM).

Default rows (``--models default``), each library's default fit, as a user would compare them on
noisy labels; ``--rounds`` does not apply (VIBoost chooses its own number of rounds, LightGBM
and CleanLearning use LightGBM's default 100 trees of up to 31 leaves):

- ``cleanlab``: ``cleanlab.classification.CleanLearning(LGBMClassifier(random_state=0,
  n_jobs=-1, verbose=-1), seed=0)``: 5-fold cross-validated LightGBM probabilities, the label
  issues they point to, then LightGBM refitted on the rows not flagged;
- ``lightgbm-default``: ``LGBMClassifier(random_state=0, n_jobs=-1, verbose=-1)`` (no label
  cleaning);
- ``viboost-default``: ``VIBoostClassifier(random_state=0, n_jobs=-1)``: the default robust
  preset (cross-fitted noise model, 8-leaf trees, early stopping on the out-of-fold marginal
  likelihood), on all cores: since issue 54 the fit of ``VIBoostClassifier()`` as a user
  writes it (``n_jobs=None`` is all cores; before, it was one thread, the next row);
- ``viboost-default-1thread``: ``VIBoostClassifier(random_state=0, n_jobs=1)``: the same on one
  thread (its model is bit-identical to the n_jobs=-1 one; the ratio of the two fit times is
  the speed-up from threads).

The report's default section gives, per N, the fit times, VIBoost's over CleanLearning's, the
1-thread over the all-threads VIBoost fit time, the test error in % of each, the peak RSS and
RSS increase of each, VIBoost's number of rounds (``len(model.estimators_)``) and its estimated
noise rate ``model.noise_rate_`` against the true 10%, and how many numba compilations (or
cache loads) happened during VIBoost's timed fit (0 when the warm-up covered every kernel).

Data (deterministic, regenerated in every child process): D = 50 features, float64, i.i.d.
standard normal, C-contiguous. With e a standard-normal noise draw per row, the clean label is
``y = 1[s(X) + 0.5 * e > 0]``, where ``--recipe`` chooses the signal ``s`` (:func:`signal`):
``additive`` (the default), ``s = X[:, :5] @ w`` with w = (1, -1, 0.5, 0.5, -0.5), which stumps
can fit; ``interactions``, ``s = x0 x1 + sign(x2) x3 + 0.5 x4 - 0.5 (|x5| - sqrt(2 / pi))`` (the
label-noise benchmark's ``make_interactions`` signal, centred), which needs trees and many
rounds (issue 54). In the TRAINING set,
exactly ``floor(0.1 * N)`` labels, chosen uniformly without replacement, are flipped; the TEST
set (``--test-rows``, 100,000 rows for every N, so accuracies are comparable across N) keeps its
clean labels. Seeds: training set ``TRAIN_SEED`` (the same for every N), test set ``TEST_SEED``,
warm-up data ``WARMUP_SEED``, prediction-timing rows ``PREDICT_SEED``.

Each (model, N) runs in a fresh child process (this script with a hidden ``--child`` flag),
one at a time, never two fits at once. A child:

1. imports the libraries and warms the model up with two small fits and predicts (2,000 rows x
   5 rounds, and 50,000 rows x 2 rounds, above the size from which VIBoost compresses a round's
   rows), so the timed fit excludes numba JIT compilation (and library start-up costs). A
   default VIBoost row warms up with ``VIBoostClassifier(random_state=0, n_jobs=<its n_jobs>,
   n_estimators=20)`` fitted (and predicting) on 2,000 rows and on 60,000 rows (60,000 x 50 is
   above the 2^20 rows x features from which the compiled kernels run threaded, so the
   parallel kernels are compiled too), and with ``n_estimators=2`` on 400,000 rows (folds
   above the 2^18 rows from which the tree statistics run threaded); LightGBM's and
   CleanLearning's default rows with one fit and predict of their own model on 2,000 rows
   (nothing to compile);
2. generates the training data;
3. reads VmRSS from /proc/self/status (the "pre-fit RSS") and resets the high-water mark VmHWM
   by writing 5 to /proc/self/clear_refs (so allocations before the fit do not count);
4. times ``fit`` with ``time.perf_counter`` and reads VmHWM right after it: "peak RSS" is that
   VmHWM, "RSS increase" is VmHWM minus the pre-fit RSS (the input data is already resident
   before the fit). If the reset is not possible, ``resource.getrusage(RUSAGE_SELF).ru_maxrss``
   read after the data and after the fit is used instead and the report says so;
5. with ``--repeats R``, steps 3-4 run R times on fresh estimators: the best fit time and the
   largest RSS increase are kept;
6. for a tree row, times ``predict_proba`` on the N training rows (see above);
7. computes the test accuracy and, for VIBoost's stump rows at the largest N, times
   ``decision_function`` on ``--predict-rows`` rows (best of 3, after a small warm-up call).

MB means 10^6 bytes throughout. The "x LightGBM" column is fit seconds over LightGBM's fit
seconds at the same N in the same run: the stump rows against LightGBM with stumps, the tree
rows against LightGBM with 31-leaf trees (the default rows have their own section and are
compared with CleanLearning). The per-round time exponent of a model is the least squares slope
of log(ms per round) against log N over the sizes it ran (stump and tree rows only). The peak
RSS is that of the child process alone: processes it may start (cleanlab's ``find_label_issues``
can use a multiprocessing pool) are not counted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

D = 50
WEIGHTS = np.array([1.0, -1.0, 0.5, 0.5, -0.5])
NOISE_SCALE = 0.5
#: The data recipes (``--recipe``; :func:`signal`).
RECIPES = ("additive", "interactions")
SIGNAL_TEXT = {
    "additive": f"X[:, :5] @ {tuple(WEIGHTS.tolist())}",
    "interactions": "x0 x1 + sign(x2) x3 + 0.5 x4 - 0.5 (|x5| - sqrt(2 / pi))",
}
#: Rows and seed of the Monte Carlo estimate of the interactions recipe's Bayes error.
BAYES_ROWS = 2_000_000
BAYES_SEED = 20_240_005
FLIP_RATE = 0.1
TRAIN_SEED = 20_240_001
TEST_SEED = 20_240_002
WARMUP_SEED = 20_240_003
PREDICT_SEED = 20_240_004
# Warm-up fits (rows, rounds): a small one and one above the row count from which the estimator
# compresses each round's rows (2**14 at the time of writing), so both paths are compiled.
WARMUP_FITS = ((2_000, 5), (50_000, 2))
ADABOOST_MAX_N = 100_000
MB = 1e6

MODELS: dict[str, str] = {
    "lightgbm": "LightGBM",
    "xgboost": "XGBoost",
    "adaboost": "sklearn AdaBoost",
    "viboost": "VIBoost (paper preset)",
    "viboost-1iter": "VIBoost (1 inner iteration)",
    "lightgbm-trees": "LightGBM (31-leaf trees)",
    "xgboost-trees": "XGBoost (31-leaf trees)",
    "viboost-trees": "VIBoost (31-leaf trees)",
    "cleanlab": "CleanLearning (LightGBM)",
    "lightgbm-default": "LightGBM (defaults)",
    "viboost-default": "VIBoost (defaults, n_jobs=-1)",
    "viboost-default-1thread": "VIBoost (defaults, n_jobs=1)",
}
#: VIBoost's stump rows (the targets, the inner iterations and the predict-time section).
VIBOOST_KEYS = ("viboost", "viboost-1iter")
#: The rows of 31-leaf trees, compared with LightGBM's 31-leaf trees (fit and predict).
TREE_KEYS = ("lightgbm-trees", "xgboost-trees", "viboost-trees")
#: The default rows: each library's default fit, compared with CleanLearning (own section).
DEFAULT_KEYS = ("cleanlab", "lightgbm-default", "viboost-default", "viboost-default-1thread")
#: ``n_jobs`` of VIBoost's default rows.
DEFAULT_VIBOOST_JOBS = {"viboost-default": -1, "viboost-default-1thread": 1}
#: ``--models`` groups.
GROUPS = {
    "stumps": tuple(key for key in MODELS if key not in TREE_KEYS + DEFAULT_KEYS),
    "trees": TREE_KEYS,
    "default": DEFAULT_KEYS,
}
#: The models run without ``--models``: the stump and tree rows.
DEFAULT_MODELS = [key for key in MODELS if key not in DEFAULT_KEYS]
#: The LightGBM row each row's "x LightGBM" ratios are taken against.
BASELINE = {key: "lightgbm-trees" if key in TREE_KEYS else "lightgbm" for key in MODELS}
#: The modules each model needs (skipped with a note when one is missing or fails to import).
REQUIRES = {
    "lightgbm": ("lightgbm",),
    "xgboost": ("xgboost",),
    "adaboost": ("sklearn",),
    "viboost": ("viboost",),
    "viboost-1iter": ("viboost",),
    "lightgbm-trees": ("lightgbm",),
    "xgboost-trees": ("xgboost",),
    "viboost-trees": ("viboost",),
    "cleanlab": ("cleanlab", "lightgbm"),
    "lightgbm-default": ("lightgbm",),
    "viboost-default": ("viboost",),
    "viboost-default-1thread": ("viboost",),
}
#: What to install for a missing module.
INSTALL = {
    "lightgbm": 'pip install lightgbm, or the bench extra: pip install ".[bench]"',
    "xgboost": 'pip install xgboost, or the bench extra: pip install ".[bench]"',
    "cleanlab": 'pip install cleanlab, or the bench extra: pip install ".[bench]"',
    "sklearn": "pip install scikit-learn",
    "viboost": "pip install -e .",
}
TREE_LEAVES = 31
TREE_LEARNING_RATE = 0.1
TREE_MIN_SAMPLES_LEAF = 20
# Rows of the warm-up prediction before the timed prediction of the training rows.
PREDICT_WARMUP_ROWS = 1_000
# Warm-up of the default rows: VIBoost fits at most `rounds` rounds on each of these row counts:
# the second above the 2**20 rows x features (60,000 x 50 = 3e6) from which its compiled kernels
# run threaded, the third above the 2**18 fold rows from which the tree statistics run threaded;
# LightGBM and CleanLearning fit the smallest one only.
DEFAULT_WARMUP_FITS = ((2_000, 20), (60_000, 20), (400_000, 2))
DEFAULT_WARMUP_ROWS = tuple(rows for rows, _ in DEFAULT_WARMUP_FITS)

# Targets of the project.
TARGET_N_RATIO = 1_000_000
TARGET_RATIO = {"viboost": 1.0, "viboost-1iter": 0.5}
TARGET_N_ADABOOST = 100_000
TARGET_ADABOOST_SPEEDUP = 100.0
TARGET_MEM_FRACTION = 0.25
TARGET_MEM_EXTRA_MB = 300.0
TARGET_PREDICT_S = 0.2
TARGET_PREDICT_ROWS = 1_000_000
TARGET_ROUNDS = 100
# Targets of the default rows: VIBoost (n_jobs=-1) no slower and no less accurate than
# CleanLearning at every N; n_jobs=-1 at least this much faster than n_jobs=1 from this N.
TARGET_DEFAULT_RATIO = 1.0
TARGET_THREAD_SPEEDUP = 1.6
TARGET_THREAD_MIN_N = 100_000


# ---------------------------------------------------------------------------------- data
def signal(X: np.ndarray, recipe: str = "additive") -> np.ndarray:
    """The clean labels' signal ``s(X)`` of a recipe (see the module docstring)."""
    if recipe == "additive":
        return X[:, : len(WEIGHTS)] @ WEIGHTS
    if recipe == "interactions":
        return (
            X[:, 0] * X[:, 1]
            + np.sign(X[:, 2]) * X[:, 3]
            + 0.5 * X[:, 4]
            - 0.5 * (np.abs(X[:, 5]) - math.sqrt(2.0 / math.pi))
        )
    raise ValueError(f"unknown recipe {recipe!r}; choose from {', '.join(RECIPES)}")


def make_data(
    n: int, seed: int, flip_rate: float = 0.0, labels: bool = True, recipe: str = "additive"
) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows of the benchmark problem: ``X`` (n, D) float64 and labels in {0, 1} (see docstring).

    ``flip_rate`` flips exactly ``floor(flip_rate * n)`` labels chosen uniformly at random.
    Generated without large temporaries, so the process's RSS high-water mark stays close to
    the size of ``X``.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    if not labels:
        return X, None
    score = signal(X, recipe)
    score += NOISE_SCALE * rng.standard_normal(n)
    y = (score > 0).astype(np.int64)
    del score
    n_flip = math.floor(flip_rate * n)
    if n_flip:
        flip = rng.choice(n, size=n_flip, replace=False)
        y[flip] = 1 - y[flip]
    return X, y


def make_model(key: str, rounds: int) -> Any:
    """A fresh, unfitted estimator for model ``key`` with ``rounds`` boosting rounds."""
    if key == "viboost":
        from viboost import VIBoostClassifier

        # All cores, as LightGBM and XGBoost use by default (viboost's default is one thread).
        # The engine at fixed rounds: preset='paper' (the robust default cross-fits).
        return VIBoostClassifier(n_estimators=rounds, preset="paper", random_state=0, n_jobs=-1)
    if key == "viboost-1iter":
        from viboost import VIBoostClassifier

        return VIBoostClassifier(
            n_estimators=rounds, preset="paper", fixed_vi_iter=1, random_state=0, n_jobs=-1
        )
    if key == "adaboost":
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier

        return AdaBoostClassifier(
            estimator=DecisionTreeClassifier(max_depth=1), n_estimators=rounds
        )
    if key == "lightgbm":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(n_estimators=rounds, num_leaves=2, max_depth=1, verbose=-1)
    if key == "xgboost":
        from xgboost import XGBClassifier

        return XGBClassifier(n_estimators=rounds, tree_method="hist", max_depth=1)
    if key == "lightgbm-trees":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(
            n_estimators=rounds,
            num_leaves=TREE_LEAVES,
            learning_rate=TREE_LEARNING_RATE,
            n_jobs=-1,
            verbose=-1,
        )
    if key == "xgboost-trees":
        from xgboost import XGBClassifier

        return XGBClassifier(
            n_estimators=rounds,
            tree_method="hist",
            max_leaves=TREE_LEAVES,
            grow_policy="lossguide",
            max_depth=0,  # no depth limit, as LightGBM's and VIBoost's trees
            learning_rate=TREE_LEARNING_RATE,
            n_jobs=-1,
        )
    if key == "viboost-trees":
        from viboost import VIBoostClassifier

        # One in-sample booster (preset='paper': fixed rounds, no cross-fitting) of the core
        # model with 31-leaf per-leaf trees; its first learner is the intercept, so rounds + 1
        # learners are `rounds` trees, as LightGBM's follow its initial score.
        return VIBoostClassifier(
            n_estimators=rounds + 1,
            preset="paper",
            max_leaf_nodes=TREE_LEAVES,
            leaf_weights="per-leaf",
            alpha="exact",
            learning_rate=TREE_LEARNING_RATE,
            noise_model=False,
            min_samples_leaf=TREE_MIN_SAMPLES_LEAF,
            random_state=0,
            n_jobs=-1,
        )
    # The default rows (``rounds`` does not apply: each library's defaults).
    if key == "cleanlab":
        from cleanlab.classification import CleanLearning
        from lightgbm import LGBMClassifier

        return CleanLearning(LGBMClassifier(random_state=0, n_jobs=-1, verbose=-1), seed=0)
    if key == "lightgbm-default":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(random_state=0, n_jobs=-1, verbose=-1)
    if key == "viboost-default":
        from viboost import VIBoostClassifier

        return VIBoostClassifier(random_state=0, n_jobs=-1)
    if key == "viboost-default-1thread":
        from viboost import VIBoostClassifier

        return VIBoostClassifier(random_state=0, n_jobs=1)
    raise ValueError(f"unknown model {key!r}; choose from {', '.join(MODELS)}")


def warm_up(factory: Callable[[int], Any]) -> None:
    """Fit ``factory(rounds)`` and predict on each of the ``WARMUP_FITS`` (JIT, start-up)."""
    for rows, rounds in WARMUP_FITS:
        X_w, y_w = make_data(rows, WARMUP_SEED, FLIP_RATE)
        factory(rounds).fit(X_w, y_w).predict(X_w)
    gc.collect()


def warm_up_default(key: str) -> None:
    """Warm a default row up (see the docstring): VIBoost's robust fit below and above the
    threading threshold, so its timed fit compiles nothing; the others' start-up costs."""
    if key in DEFAULT_VIBOOST_JOBS:
        from viboost import VIBoostClassifier

        for rows, rounds in DEFAULT_WARMUP_FITS:
            X_w, y_w = make_data(rows, WARMUP_SEED, FLIP_RATE)
            with warnings.catch_warnings():  # "best at n_estimators=20": expected, capped here
                warnings.simplefilter("ignore")
                VIBoostClassifier(
                    random_state=0,
                    n_jobs=DEFAULT_VIBOOST_JOBS[key],
                    n_estimators=rounds,
                ).fit(X_w, y_w).predict(X_w)
    else:
        X_w, y_w = make_data(DEFAULT_WARMUP_ROWS[0], WARMUP_SEED, FLIP_RATE)
        make_model(key, 0).fit(X_w, y_w).predict(X_w)
    gc.collect()


def compile_recorder(key: str) -> contextlib.AbstractContextManager[Any]:
    """For VIBoost's default rows, a recorder of numba's compile events (compilations and cache
    loads, ``.buffer``); a no-op context (None) for the other rows."""
    if key not in DEFAULT_VIBOOST_JOBS:
        return contextlib.nullcontext()
    from numba.core import event

    return event.install_recorder("numba:compile")


# ---------------------------------------------------------------------------------- memory
def read_status_kib() -> dict[str, int]:
    """VmRSS and VmHWM of this process in KiB (empty when /proc is not available)."""
    values: dict[str, int] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    name, rest = line.split(":", 1)
                    values[name] = int(rest.split()[0])
    except OSError:
        pass
    return values


def reset_hwm() -> bool:
    """Reset this process's RSS high-water mark (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    status = read_status_kib()
    return "VmHWM" in status and status["VmHWM"] <= status["VmRSS"] + 1024


def maxrss_kib() -> int:
    """``ru_maxrss`` of this process (KiB on Linux)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


# ---------------------------------------------------------------------------------- child
def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Warm up, generate the data, fit ``spec["repeats"]`` times and measure (see docstring)."""
    key, n, rounds = spec["model"], spec["n"], spec["rounds"]
    out: dict[str, Any] = {"model": key, "n": n, "rounds": rounds}

    # 1. warm-up: imports, numba JIT, library start-up.
    if key in DEFAULT_KEYS:
        warm_up_default(key)
    else:
        warm_up(lambda rounds: make_model(key, rounds))

    # 2. data.
    recipe = spec.get("recipe", "additive")
    X, y = make_data(n, TRAIN_SEED, FLIP_RATE, recipe=recipe)
    out["input_mb"] = X.nbytes / MB
    out["maxrss_after_data_mb"] = maxrss_kib() * 1024 / MB

    times: list[float] = []
    peaks: list[float] = []
    increases: list[float] = []
    method = ""
    model = None
    compilations = 0
    for _ in range(spec["repeats"]):
        model = None
        gc.collect()
        model = make_model(key, rounds)
        # 3. pre-fit RSS, then reset the high-water mark.
        before = read_status_kib()
        if reset_hwm():
            method = "VmHWM after fit minus VmRSS before fit (VmHWM reset before fit)"
            base_kib = before["VmRSS"]
        else:
            method = "ru_maxrss after fit minus ru_maxrss after data (no reset possible)"
            base_kib = maxrss_kib()
        # 4. the timed fit.
        with compile_recorder(key) as recorder:
            start = time.perf_counter()
            model.fit(X, y)
            times.append(time.perf_counter() - start)
        if recorder is not None:
            compilations += sum(1 for _, ev in recorder.buffer if ev.is_start)
        after = read_status_kib()
        peak_kib = after["VmHWM"] if "VmHWM" in after else maxrss_kib()
        peaks.append(peak_kib * 1024 / MB)
        increases.append((peak_kib - base_kib) * 1024 / MB)
    out["fit_s"] = min(times)
    out["fit_s_all"] = times
    out["peak_rss_mb"] = max(peaks)
    out["rss_increase_mb"] = max(increases)
    out["maxrss_after_fit_mb"] = maxrss_kib() * 1024 / MB
    out["memory_method"] = method
    if key in VIBOOST_KEYS:
        out["n_stumps"] = len(model.estimators_)
        out["inner_iterations"] = int(np.sum(model.n_vi_iter_))
    if key == "viboost-trees":
        out["n_learners"] = len(model.estimators_)
        out["mean_leaves"] = float(np.mean([tree.n_leaves for tree in model.estimators_[1:]]))
    if key in DEFAULT_VIBOOST_JOBS:
        out["n_rounds"] = len(model.estimators_)
        out["chosen_rounds"] = int(model.cv_best_rounds_)
        out["n_splits"] = int(model.cv_n_splits_)
        out["noise_rate"] = float(model.noise_rate_)
        out["noise_rate_interval"] = [float(v) for v in model.noise_rate_interval_]
        out["jit_compilations"] = compilations
    if key == "cleanlab":
        out["label_issues"] = int(np.sum(model.label_issues_df["is_label_issue"]))

    # 6. a tree row: predict the N training rows.
    if key in TREE_KEYS:
        model.predict_proba(X[:PREDICT_WARMUP_ROWS])
        predict_times = []
        for _ in range(spec["repeats"]):
            start = time.perf_counter()
            model.predict_proba(X)
            predict_times.append(time.perf_counter() - start)
        out["train_predict_s"] = min(predict_times)

    # 7. accuracy on the clean test set.
    X_test, y_test = make_data(spec["test_rows"], TEST_SEED, recipe=recipe)
    out["test_accuracy"] = float(np.mean(model.predict(X_test) == y_test))
    del X_test, y_test

    if spec.get("predict_rows"):
        rows = spec["predict_rows"]
        if n >= rows:
            X_pred = X[:rows]
        else:
            del X, y
            gc.collect()
            X_pred, _ = make_data(rows, PREDICT_SEED, labels=False)
        model.decision_function(X_pred[:1000])
        predict_times = []
        for _ in range(3):
            start = time.perf_counter()
            model.decision_function(X_pred)
            predict_times.append(time.perf_counter() - start)
        out["predict_rows"] = rows
        out["predict_s"] = min(predict_times)
    return out


def spawn_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in a fresh Python process; its stdout goes to our stderr."""
    fd, path = tempfile.mkstemp(prefix="viboost-speed-", suffix=".json")
    os.close(fd)
    try:
        spec = {**spec, "result_path": path}
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
            stdout=sys.stderr,
            check=False,
        )
        if proc.returncode != 0:
            return {"model": spec["model"], "n": spec["n"], "error": f"exit {proc.returncode}"}
        with open(path) as fh:
            return json.load(fh)
    finally:
        os.unlink(path)


# ---------------------------------------------------------------------------------- report
def machine_lines() -> list[str]:
    """CPU model, core count and RAM of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = "unknown"
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    ram = f"{int(line.split()[1]) * 1024 / 2**30:.1f} GiB"
                    break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- CPU: {cpu}; {os.cpu_count()} logical cores ({usable} usable by this process)",
        f"- RAM: {ram}",
        f"- OS: {platform.system()} {platform.release()}; Python {platform.python_version()}",
    ]


def load_average() -> float:
    """The 1-minute load average of the machine (NaN where unavailable)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return math.nan


def versions_line() -> str:
    """Versions of the benchmarked libraries, read from their installed metadata."""
    parts = []
    for dist in ("viboost", "numpy", "numba", "scikit-learn", "lightgbm", "xgboost", "cleanlab"):
        try:
            parts.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{dist} (not installed)")
    return "- Libraries: " + ", ".join(parts)


def fmt(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, or a dash."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:.0f}"


def verdict(measured: float, limit: float) -> str:
    """Return "met" or "MISSED by X%" for a target ``measured <= limit``."""
    if measured <= limit:
        return "met"
    return f"MISSED by {100 * (measured / limit - 1):.0f}%"


def fitted_exponent(ns: list[int], ms: list[float]) -> float:
    """Least-squares slope of log(ms per round) against log N."""
    return float(np.polyfit(np.log(ns), np.log(ms), 1)[0])


def build_report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The markdown report of a run."""
    ok = [r for r in results if "error" not in r]
    by = {(r["model"], r["n"]): r for r in ok}
    fixed = [key for key in args.models if key not in DEFAULT_KEYS]  # stump and tree rows
    default = [key for key in args.models if key in DEFAULT_KEYS]
    threads = []
    if fixed:
        threads.append(
            "stump rows: library defaults (LightGBM, XGBoost and numba use all cores); "
            "tree rows: n_jobs=-1 (all cores) for every library"
        )
    if default:
        threads.append(
            "default rows: n_jobs=-1 for every library, except VIBoost (defaults, n_jobs=1)"
        )
    lines = [
        "# VIBoost speed benchmark",
        "",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        *machine_lines(),
        versions_line(),
        f"- Threads: {'; '.join(threads) or 'no model ran'}.",
        f"- Load average (1 min) before the run: {args.load_before:.2f}, after: "
        f"{load_average():.2f} (other processes on the machine slow every fit down).",
        f"- Command: `{shlex.join(['python', *sys.argv])}`",
        f"- Data (recipe `{args.recipe}`): D = {D} i.i.d. standard-normal float64 features; "
        f"clean label y = 1[{SIGNAL_TEXT[args.recipe]} + {NOISE_SCALE} * e > 0], e ~ N(0, 1); "
        f"{FLIP_RATE:.0%} of the training labels flipped (exactly floor(0.1 N), uniformly); "
        f"test set: {args.test_rows:,} rows with clean labels, the same for every N.",
    ]
    if fixed:
        lines.append(
            f"- Rounds: {args.rounds} (stump rows: depth-1 trees; tree rows: trees of up to "
            f"{TREE_LEAVES} leaves, VIBoost's after its intercept); fit time: best of "
            f"{args.repeats}; each "
            "(model, N) in a fresh process, one at a time, after warm-up fits ("
            + ", ".join(f"{rows:,} rows x {rounds} rounds" for rows, rounds in WARMUP_FITS)
            + ") so numba JIT compilation is excluded from the timed fit."
        )
    if default:
        lines.append(
            "- Default rows: each library's defaults (--rounds does not apply; VIBoost chooses "
            f"its own rounds); fit time: best of {args.repeats}; each (model, N) in a fresh "
            "process, one at a time, after warm-up fits: VIBoost: VIBoostClassifier("
            "random_state=0, n_jobs=<its n_jobs>, n_estimators=<rounds>) on "
            + ", ".join(f"{rows:,} rows x {rounds} rounds" for rows, rounds in DEFAULT_WARMUP_FITS)
            + " (above 2^20 rows x features: the threaded kernels), so numba JIT "
            f"compilation is excluded from the timed fit; LightGBM and CleanLearning: one fit "
            f"of their own model on {DEFAULT_WARMUP_ROWS[0]:,} rows."
        )
    lines += [
        "- Memory: peak RSS = VmHWM read after the fit, the high-water mark having been reset "
        "just before it (/proc/self/clear_refs); RSS increase = that peak minus VmRSS before "
        "the fit, when the training data is already resident. MB = 10^6 bytes.",
        "",
    ]
    methods = {r["memory_method"] for r in ok}
    if any(not m.startswith("VmHWM") for m in methods):
        lines += [f"- NOTE: memory measured as: {'; '.join(sorted(methods))}", ""]
    for note in getattr(args, "skipped", []):
        lines += [f"- Skipped: {note}", ""]

    size_line = (
        "Size of the float64 training matrix: "
        + ", ".join(f"N = {n:,}: {n * D * 8 / MB:.0f} MB" for n in args.sizes)
        + "."
    )
    if fixed:
        lines += fixed_lines([r for r in results if r["model"] in fixed], ok, by, args, size_line)
    if default:
        lines += default_lines([r for r in results if r["model"] in default], by, args)
        if not fixed:
            lines += [size_line, ""]
    lines += build_targets(ok, by, args)
    return "\n".join(lines) + "\n"


def fixed_lines(
    results: list[dict[str, Any]],
    ok: list[dict[str, Any]],
    by: dict[tuple[str, int], dict[str, Any]],
    args: argparse.Namespace,
    size_line: str,
) -> list[str]:
    """The sections of the stump and tree rows (fixed rounds): table, exponents, predict."""
    ok = [r for r in ok if r["model"] not in DEFAULT_KEYS]
    lines = [
        "| N | model | fit s | ms/round | x LightGBM | peak RSS MB | RSS increase MB "
        "| test accuracy |",
        "|---:|:---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        name = MODELS[r["model"]]
        if "error" in r:
            lines.append(f"| {r['n']:,} | {name} | failed ({r['error']}) | | | | | |")
            continue
        base = by.get((BASELINE[r["model"]], r["n"]))
        ratio = r["fit_s"] / base["fit_s"] if base else None
        lines.append(
            f"| {r['n']:,} | {name} | {fmt(r['fit_s'])} | {fmt(r['fit_s'] / r['rounds'] * 1e3)}"
            f" | {fmt(ratio)} | {r['peak_rss_mb']:.0f} | {r['rss_increase_mb']:.0f}"
            f" | {r['test_accuracy']:.4f} |"
        )
    lines += ["", size_line, ""]

    vib = [r for r in ok if r["model"] in VIBOOST_KEYS]
    if vib:
        lines.append(
            "VIBoost inner iterations (total over all rounds): "
            + "; ".join(
                f"{MODELS[r['model']]} at N = {r['n']:,}: {r['inner_iterations']}" for r in vib
            )
            + "."
        )
        lines.append("")

    lines += tree_lines(results, by)

    lines += [
        "## Per-round time exponent",
        "",
        "Least-squares slope of log(ms per round) against log N (1 = linear in N).",
        "",
        "| model | exponent | over N |",
        "|:---|---:|:---|",
    ]
    for key in (key for key in args.models if key not in DEFAULT_KEYS):
        runs = sorted((r for r in ok if r["model"] == key), key=lambda r: r["n"])
        if len(runs) >= 2:
            ns = [r["n"] for r in runs]
            ms = [r["fit_s"] / r["rounds"] * 1e3 for r in runs]
            sizes = ", ".join(f"{n:,}" for n in ns)
            lines.append(f"| {MODELS[key]} | {fitted_exponent(ns, ms):.2f} | {sizes} |")
        else:
            lines.append(f"| {MODELS[key]} | - | fewer than 2 sizes |")
    lines.append("")

    lines += ["## VIBoost predict time", ""]
    predicted = [r for r in ok if "predict_s" in r]
    if not predicted:
        lines.append("Not measured (no VIBoost stump row in this run).")
    for r in predicted:
        lines.append(
            f"- {MODELS[r['model']]} (fitted at N = {r['n']:,}): `decision_function` on "
            f"{r['predict_rows']:,} rows with {r['n_stumps']} stumps: {r['predict_s']:.3f} s "
            f"(best of 3; {r['predict_s'] / (r['predict_rows'] * r['n_stumps']) * 1e9:.2f} ns "
            "per row and stump)"
        )
    lines.append("")
    return lines


def bayes_error(recipe: str = "additive") -> float:
    """The least error possible on the clean labels, P(sign(s) != sign(s + NOISE_SCALE e)).

    Additive: s = X[:, :5] @ WEIGHTS ~ N(0, |WEIGHTS|^2), so it is arccos(corr(s, s +
    NOISE_SCALE e)) / pi. Interactions: the mean of Phi(-|s| / NOISE_SCALE) (the Bayes rule's
    error at each x) over :data:`BAYES_ROWS` draws of X (seed :data:`BAYES_SEED`; standard
    error below 2e-4)."""
    if recipe == "additive":
        norm = float(np.linalg.norm(WEIGHTS))
        return math.acos(norm / math.hypot(norm, NOISE_SCALE)) / math.pi
    from scipy.special import ndtr

    X = np.random.default_rng(BAYES_SEED).standard_normal((BAYES_ROWS, 6))
    return float(np.mean(ndtr(-np.abs(signal(X, recipe)) / NOISE_SCALE)))


def default_lines(
    results: list[dict[str, Any]],
    by: dict[tuple[str, int], dict[str, Any]],
    args: argparse.Namespace,
) -> list[str]:
    """The section of the default rows: VIBoost's default fit against CleanLearning's."""
    failed = {(r["model"], r["n"]): r["error"] for r in results if "error" in r}

    def cell(key: str, n: int, show: Callable[[dict[str, Any]], str]) -> str:
        if (key, n) in failed:
            return f"failed ({failed[key, n]})"
        run = by.get((key, n))
        return show(run) if run else "-"

    def error(r: dict[str, Any]) -> str:
        return f"{100 * (1 - r['test_accuracy']):.2f}"

    def rss(r: dict[str, Any]) -> str:
        return f"{r['peak_rss_mb']:.0f} (+{r['rss_increase_mb']:.0f})"

    def ratio(n: int, key: str, base_key: str) -> float | None:
        run, base = by.get((key, n)), by.get((base_key, n))
        return run["fit_s"] / base["fit_s"] if run and base else None

    keys = ("cleanlab", "lightgbm-default", "viboost-default", "viboost-default-1thread")
    short = ("CleanLearning", "LightGBM", "VIBoost", "VIBoost n_jobs=1")
    lines = [
        "## Default fits: VIBoost against CleanLearning",
        "",
        "Each library's defaults on the same training labels, "
        f"{FLIP_RATE:.0%} of them flipped: CleanLearning = `cleanlab.classification."
        "CleanLearning(LGBMClassifier(random_state=0, n_jobs=-1, verbose=-1), seed=0)` (5-fold "
        "cross-validated LightGBM, label issues, LightGBM refitted on the rows not flagged); "
        "LightGBM = `LGBMClassifier(random_state=0, n_jobs=-1, verbose=-1)` (100 trees of 31 "
        "leaves, no cleaning); VIBoost = `VIBoostClassifier(random_state=0, n_jobs=-1)` (robust "
        "preset: cross-fitted noise model, trees, early stopping) and the same with n_jobs=1.",
        "",
        "VIBoost/CleanLearning: fit seconds over CleanLearning's at the same N (< 1: faster). "
        "Threads speed-up: VIBoost's n_jobs=1 fit seconds over its n_jobs=-1 seconds. Test "
        f"error: % of the {args.test_rows:,} clean test rows misclassified; the clean labels "
        f"carry the noise {NOISE_SCALE} e, so no model can go below the Bayes error "
        f"{100 * bayes_error(args.recipe):.2f}%. Rounds: `len(model.estimators_)`. Noise rate: "
        f"VIBoost's `noise_rate_` (true rate of flipped training labels: {FLIP_RATE:.0%}). "
        "RSS: peak MB (+ increase over the pre-fit RSS).",
        "",
        "| N | CleanLearning fit s | LightGBM fit s | VIBoost fit s (n_jobs=-1) "
        "| VIBoost/CleanLearning | VIBoost n_jobs=1 s | threads speed-up "
        + "".join(f"| test error % {name} " for name in short)
        + "| VIBoost rounds | VIBoost noise rate "
        + "".join(f"| peak RSS MB {name} " for name in short)
        + "|",
        "|---:" * 17 + "|",
    ]
    sizes = sorted({r["n"] for r in results})
    for n in sizes:
        cells = [f"{n:,}"]
        cells += [cell(key, n, lambda r: fmt(r["fit_s"])) for key in keys[:3]]
        cells.append(fmt(ratio(n, "viboost-default", "cleanlab")))
        cells.append(cell(keys[3], n, lambda r: fmt(r["fit_s"])))
        cells.append(fmt(ratio(n, "viboost-default-1thread", "viboost-default")))
        cells += [cell(key, n, error) for key in keys]
        cells.append(cell(keys[2], n, lambda r: str(r["n_rounds"])))
        cells.append(cell(keys[2], n, lambda r: f"{r['noise_rate']:.4f}"))
        cells += [cell(key, n, rss) for key in keys]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for n in sizes:
        notes = []
        one_vs_cl = ratio(n, "viboost-default-1thread", "cleanlab")
        if one_vs_cl is not None:
            notes.append(f"VIBoost n_jobs=1/CleanLearning fit {one_vs_cl:.3g}x")
        many, one = by.get(("viboost-default", n)), by.get(("viboost-default-1thread", n))
        if many:
            low, high = many["noise_rate_interval"]
            notes.append(
                f"VIBoost: {many.get('n_splits', '?')} folds (cv='auto'), "
                f"{many.get('chosen_rounds', '?')} rounds chosen, "
                f"{many['n_rounds']} refitted, noise rate {many['noise_rate']:.4f} (90% "
                f"interval {low:.4f} to {high:.4f}; true {FLIP_RATE:.0%})"
            )
        if many and one:
            same = (one["n_rounds"], one["noise_rate"]) == (many["n_rounds"], many["noise_rate"])
            notes.append(
                "n_jobs=1: the same rounds and noise rate"
                if same
                else f"n_jobs=1 DIFFERS: {one['n_rounds']} rounds, noise rate "
                f"{one['noise_rate']:.4f}"
            )
        compiled = [
            f"{by[key, n]['jit_compilations']} ({MODELS[key]})"
            for key in DEFAULT_VIBOOST_JOBS
            if (key, n) in by
        ]
        if compiled:
            notes.append(
                "numba compilations or cache loads during VIBoost's timed fit (0: the warm-up "
                "compiled everything): " + ", ".join(compiled)
            )
        run = by.get(("cleanlab", n))
        if run:
            notes.append(
                f"CleanLearning flagged {run['label_issues']:,} label issues "
                f"({math.floor(FLIP_RATE * n):,} labels flipped)"
            )
        if notes:
            lines.append(f"- N = {n:,}: " + "; ".join(notes) + ".")
    lines += [
        "",
        "Peak RSS: of the benchmark's child process alone (cleanlab's find_label_issues may "
        "start a multiprocessing pool, whose processes are not counted).",
        "",
    ]
    return lines


def tree_ratios(r: dict[str, Any], by: dict[tuple[str, int], dict[str, Any]]) -> tuple:
    """Fit and predict seconds of a tree row over LightGBM's (31-leaf trees) at the same N."""
    base = by.get(("lightgbm-trees", r["n"]))
    if not base:
        return None, None
    return r["fit_s"] / base["fit_s"], r["train_predict_s"] / base["train_predict_s"]


def tree_lines(
    results: list[dict[str, Any]], by: dict[tuple[str, int], dict[str, Any]]
) -> list[str]:
    """The section of the 31-leaf tree rows: fit and predict times against LightGBM's."""
    rows = [r for r in results if r["model"] in TREE_KEYS]
    if not rows:
        return []
    lines = [
        f"## {TREE_LEAVES}-leaf trees: fit and predict",
        "",
        f"Trees of up to {TREE_LEAVES} leaves, learning rate {TREE_LEARNING_RATE:g}, all cores "
        "(n_jobs=-1) for every library; VIBoost: one in-sample booster of the core model with "
        "per-leaf weights (preset='paper', noise_model=False), its intercept plus the same "
        "number of trees. Predict: `predict_proba` on the N training rows. The ratios are over "
        "LightGBM's seconds at the same N in this run (< 1: faster than LightGBM).",
        "",
        "| N | model | fit s | fit x LightGBM | predict s (N rows) | predict x LightGBM "
        "| test accuracy |",
        "|---:|:---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        name = MODELS[r["model"]]
        if "error" in r:
            lines.append(f"| {r['n']:,} | {name} | failed ({r['error']}) | | | | |")
            continue
        fit_ratio, predict_ratio = tree_ratios(r, by)
        lines.append(
            f"| {r['n']:,} | {name} | {fmt(r['fit_s'])} | {fmt(fit_ratio)} "
            f"| {fmt(r['train_predict_s'])} | {fmt(predict_ratio)} | {r['test_accuracy']:.4f} |"
        )
    lines.append("")
    vib = sorted((r for r in rows if r["model"] == "viboost-trees" and "error" not in r),
                 key=lambda r: r["n"])  # fmt: skip
    for r in vib:
        fit_ratio, predict_ratio = tree_ratios(r, by)
        if fit_ratio is None:
            lines.append(f"- N = {r['n']:,}: VIBoost/LightGBM not measured (no LightGBM row).")
            continue
        lines.append(
            f"- N = {r['n']:,}: VIBoost/LightGBM fit {fit_ratio:.3g}x, predict "
            f"{predict_ratio:.3g}x ({r['n_learners']} learners: the intercept and "
            f"{r['n_learners'] - 1} trees of {r['mean_leaves']:.1f} leaves on average)."
        )
    if vib:
        lines.append("")
    return lines


def build_targets(
    ok: list[dict[str, Any]], by: dict[tuple[str, int], dict[str, Any]], args: argparse.Namespace
) -> list[str]:
    """The project's targets and whether this run met them (computed, never assumed)."""
    fixed = any(key not in DEFAULT_KEYS for key in args.models)
    default = any(key in DEFAULT_KEYS for key in args.models)
    lines = ["## Targets", ""]
    if fixed and args.rounds != TARGET_ROUNDS:
        lines += [
            f"NOTE: the targets are defined at {TARGET_ROUNDS} rounds; this run used "
            f"{args.rounds}, so the statuses below are indicative only.",
            "",
        ]
    lines += [
        "'MISSED by X%': the measured value exceeds its limit by X% of the limit.",
        "",
        "| target | measured | limit | status |",
        "|:---|---:|---:|:---|",
    ]
    if fixed:
        lines += fixed_targets(ok, by)
    if default:
        lines += default_targets(by, args)
    if not (fixed or default):
        lines.append("| - | - | - | no model ran |")
    if fixed:
        lines += [
            "",
            "Memory budget: RSS increase over the pre-fit RSS (which already holds the float64 "
            f"training matrix) <= {TARGET_MEM_FRACTION:g} x (N x {D} x 8 bytes) + "
            f"{TARGET_MEM_EXTRA_MB:g} MB, i.e. total fit-time footprint <= input + 25% + 300 MB.",
        ]
    return lines


def default_targets(
    by: dict[tuple[str, int], dict[str, Any]], args: argparse.Namespace
) -> list[str]:
    """Target rows of the default group: VIBoost against CleanLearning, and its threads."""
    lines = []
    name = MODELS["viboost-default"]
    for n in args.sizes:
        vi, cl = by.get(("viboost-default", n)), by.get(("cleanlab", n))
        label = f"N = {n:,}: {name} fit <= {TARGET_DEFAULT_RATIO:g}x CleanLearning"
        if vi and cl:
            ratio = vi["fit_s"] / cl["fit_s"]
            lines.append(
                f"| {label} | {ratio:.3g}x ({vi['fit_s']:.3g} s) | {TARGET_DEFAULT_RATIO:g}x "
                f"({cl['fit_s']:.3g} s) | {verdict(ratio, TARGET_DEFAULT_RATIO)} |"
            )
        else:
            lines.append(f"| {label} | - | {TARGET_DEFAULT_RATIO:g}x | not measured in this run |")
        label = f"N = {n:,}: {name} test error <= CleanLearning's"
        if vi and cl:
            err_vi, err_cl = 100 * (1 - vi["test_accuracy"]), 100 * (1 - cl["test_accuracy"])
            lines.append(f"| {label} | {err_vi:.2f}% | {err_cl:.2f}% | {verdict(err_vi, err_cl)} |")
        else:
            lines.append(f"| {label} | - | - | not measured in this run |")
    large = [n for n in args.sizes if n >= TARGET_THREAD_MIN_N]
    for n in large:
        label = (
            f"N = {n:,}: {name} >= {TARGET_THREAD_SPEEDUP:g}x faster than "
            f"{MODELS['viboost-default-1thread']}"
        )
        many, one = by.get(("viboost-default", n)), by.get(("viboost-default-1thread", n))
        if many and one:
            allowed = one["fit_s"] / TARGET_THREAD_SPEEDUP
            lines.append(
                f"| {label} | {one['fit_s'] / many['fit_s']:.3g}x faster ({many['fit_s']:.3g} s)"
                f" | {TARGET_THREAD_SPEEDUP:g}x ({allowed:.3g} s) "
                f"| {verdict(many['fit_s'], allowed)} |"
            )
        else:
            lines.append(f"| {label} | - | {TARGET_THREAD_SPEEDUP:g}x | not measured in this run |")
    if not large:
        lines.append(
            f"| {name} >= {TARGET_THREAD_SPEEDUP:g}x faster than n_jobs=1 at N >= "
            f"{TARGET_THREAD_MIN_N:,} | - | {TARGET_THREAD_SPEEDUP:g}x | not measured in this run "
            f"(needs N >= {TARGET_THREAD_MIN_N:,}) |"
        )
    return lines


def fixed_targets(ok: list[dict[str, Any]], by: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    """Target rows of the stump rows: fit time against LightGBM and AdaBoost, memory, predict."""
    lines = []
    lgbm = by.get(("lightgbm", TARGET_N_RATIO))
    for key, limit in TARGET_RATIO.items():
        label = f"N = {TARGET_N_RATIO:,}: {MODELS[key]} fit <= {limit:g}x LightGBM"
        run = by.get((key, TARGET_N_RATIO))
        if run and lgbm:
            ratio = run["fit_s"] / lgbm["fit_s"]
            lines.append(f"| {label} | {ratio:.3g}x | {limit:g}x | {verdict(ratio, limit)} |")
        else:
            lines.append(f"| {label} | - | {limit:g}x | not measured in this run |")

    label = (
        f"N = {TARGET_N_ADABOOST:,}: {MODELS['viboost']} >= {TARGET_ADABOOST_SPEEDUP:g}x faster "
        "than sklearn AdaBoost"
    )
    vi, ada = by.get(("viboost", TARGET_N_ADABOOST)), by.get(("adaboost", TARGET_N_ADABOOST))
    if vi and ada:
        allowed = ada["fit_s"] / TARGET_ADABOOST_SPEEDUP
        lines.append(
            f"| {label} | {ada['fit_s'] / vi['fit_s']:.3g}x faster ({vi['fit_s']:.3g} s) "
            f"| {TARGET_ADABOOST_SPEEDUP:g}x ({allowed:.3g} s) | {verdict(vi['fit_s'], allowed)} |"
        )
    else:
        lines.append(f"| {label} | - | {TARGET_ADABOOST_SPEEDUP:g}x | not measured in this run |")

    for r in sorted(
        (r for r in ok if r["model"] in VIBOOST_KEYS), key=lambda r: (r["model"], r["n"])
    ):
        budget = TARGET_MEM_FRACTION * r["input_mb"] + TARGET_MEM_EXTRA_MB
        lines.append(
            f"| N = {r['n']:,}: {MODELS[r['model']]} fit memory: RSS increase <= "
            f"{TARGET_MEM_FRACTION:g} x input ({r['input_mb']:.0f} MB) + "
            f"{TARGET_MEM_EXTRA_MB:g} MB | {r['rss_increase_mb']:.0f} MB | {budget:.0f} MB "
            f"| {verdict(r['rss_increase_mb'], budget)} |"
        )
    if not any(r["model"] in VIBOOST_KEYS for r in ok):
        lines.append("| VIBoost fit memory | - | - | not measured in this run |")

    label = (
        f"predict {TARGET_PREDICT_ROWS:,} rows x {TARGET_ROUNDS} stumps <= {TARGET_PREDICT_S:g} s"
    )
    exact = [
        r
        for r in ok
        if r.get("predict_rows") == TARGET_PREDICT_ROWS and r.get("n_stumps") == TARGET_ROUNDS
    ]
    if exact:
        best = min(exact, key=lambda r: r["predict_s"])
        lines.append(
            f"| {label} | {best['predict_s']:.3f} s | {TARGET_PREDICT_S:g} s "
            f"| {verdict(best['predict_s'], TARGET_PREDICT_S)} |"
        )
    else:
        lines.append(
            f"| {label} | - | {TARGET_PREDICT_S:g} s | not measured in this run "
            "(needs 100 stumps and --predict-rows 1000000) |"
        )
    return lines


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates the file 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--sizes",
        "--rows",
        dest="sizes",
        type=int,
        nargs="+",
        default=[10_000, 100_000, 1_000_000],
        help="training rows N, one run per size (default: 10000 100000 1000000)",
    )
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=1, help="best of R fits (default 1)")
    parser.add_argument(
        "--models",
        nargs="+",
        choices=[*MODELS, *GROUPS],
        default=DEFAULT_MODELS,
        help="models to run, or the groups 'stumps', 'trees' and 'default' (default: the stump "
        "and tree rows)",
    )
    parser.add_argument(
        "--recipe",
        choices=RECIPES,
        default="additive",
        help="the clean labels' signal: additive (stumps fit it) or interactions (trees and "
        "many rounds needed); see the module docstring",
    )
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--predict-rows", type=int, default=TARGET_PREDICT_ROWS)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("speed.md"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is None:
        if min(args.sizes) < 1 or args.rounds < 1 or args.repeats < 1 or args.test_rows < 1:
            parser.error("--sizes, --rounds, --repeats and --test-rows must be positive")
        args.sizes = sorted(set(args.sizes))
        chosen = {key for name in args.models for key in GROUPS.get(name, (name,))}
        args.models = [key for key in MODELS if key in chosen]  # LightGBM first
    return args


def import_problem(module: str) -> str:
    """Why ``module`` cannot be used ("is not installed", "fails to import: ..."), or ""."""
    if importlib.util.find_spec(module) is None:
        return "is not installed"
    try:
        importlib.import_module(module)
    except Exception as exc:  # a broken install: skip its models, as for a missing one
        return f"fails to import ({type(exc).__name__}: {exc})"
    return ""


def main(argv: list[str] | None = None) -> int:
    """Run every (model, N) in its own child process, print and write the report."""
    args = parse_args(argv)
    if args.child is not None:
        spec = json.loads(args.child)
        result = run_child(spec)
        with open(spec["result_path"], "w") as fh:
            json.dump(result, fh)
        return 0

    args.skipped = []
    for module in sorted({module for key in args.models for module in REQUIRES[key]}):
        problem = import_problem(module)
        if problem:
            names = ", ".join(MODELS[key] for key in args.models if module in REQUIRES[key])
            if not names:  # its models were skipped already, for another module
                continue
            args.skipped.append(f"{names}: {module} {problem} ({INSTALL[module]}).")
            print(f"note: skipping {args.skipped[-1]}", file=sys.stderr)
            args.models = [key for key in args.models if module not in REQUIRES[key]]
    plan = [
        (n, key)
        for n in args.sizes
        for key in args.models
        if not (key == "adaboost" and n > ADABOOST_MAX_N)
    ]
    largest = max(args.sizes)
    args.load_before = load_average()
    if args.load_before > 0.5:
        print(
            f"warning: load average {args.load_before:.2f}: other processes are running, "
            "timings will be inflated",
            file=sys.stderr,
        )
    results = []
    for i, (n, key) in enumerate(plan, 1):
        print(f"[{i}/{len(plan)}] N={n:,} {MODELS[key]}: running ...", file=sys.stderr, flush=True)
        spec = {
            "model": key,
            "n": n,
            "rounds": args.rounds,
            "repeats": args.repeats,
            "test_rows": args.test_rows,
            "recipe": args.recipe,
            "predict_rows": args.predict_rows if key in VIBOOST_KEYS and n == largest else 0,
        }
        r = spawn_child(spec)
        results.append(r)
        if "error" in r:
            print(
                f"[{i}/{len(plan)}] N={n:,} {MODELS[key]}: FAILED ({r['error']})",
                file=sys.stderr,
                flush=True,
            )
        else:
            extra = f", predict {r['predict_s']:.3f} s" if "predict_s" in r else ""
            if key in DEFAULT_KEYS:
                if "n_rounds" in r:
                    extra = (
                        f", {r['n_rounds']} rounds, noise rate {r['noise_rate']:.4f}, "
                        f"{r['jit_compilations']} numba compilations in the timed fit"
                    )
                if "label_issues" in r:
                    extra = f", {r['label_issues']:,} label issues flagged"
                print(
                    f"[{i}/{len(plan)}] N={n:,} {MODELS[key]}: fit {r['fit_s']:.3f} s, peak RSS "
                    f"{r['peak_rss_mb']:.0f} MB (+{r['rss_increase_mb']:.0f}), test error "
                    f"{100 * (1 - r['test_accuracy']):.2f}%{extra}",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            if key in TREE_KEYS:
                extra += f", predict {n:,} rows {r['train_predict_s']:.3g} s"
                fit_ratio, predict_ratio = tree_ratios(
                    r, {(x["model"], x["n"]): x for x in results if "error" not in x}
                )
                if fit_ratio is not None and key != "lightgbm-trees":
                    extra += f" (x LightGBM: fit {fit_ratio:.3g}, predict {predict_ratio:.3g})"
            print(
                f"[{i}/{len(plan)}] N={n:,} {MODELS[key]}: fit {r['fit_s']:.3f} s "
                f"({r['fit_s'] / r['rounds'] * 1e3:.3g} ms/round), peak RSS "
                f"{r['peak_rss_mb']:.0f} MB (+{r['rss_increase_mb']:.0f}), "
                f"acc {r['test_accuracy']:.4f}{extra}",
                file=sys.stderr,
                flush=True,
            )
    report = build_report(results, args)
    print(report, end="")
    write_atomic(args.out, report)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
