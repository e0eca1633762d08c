"""Distributed fit and predict time of DaskVIBoostClassifier against LightGBM and XGBoost on Dask.

Run from the repository root::

    python benchmarks/dask.py                                      # 10^6 rows, 100 rounds
    python benchmarks/dask.py --rows 20000 --rounds 10             # quick check
    python benchmarks/dask.py --workers 4 --repeat 3 --memory-limit 8GB

Options: ``--rows N`` (training rows, default 1,000,000), ``--features D`` (default 20),
``--partitions P`` (chunks of the training array, default 8), ``--test-rows`` (default 100,000),
``--flip-rate`` (fraction of training labels flipped, default 0.1; 0 keeps them clean),
``--rounds T`` (boosting rounds of every model, default 100), ``--repeat R`` (best of R fits,
default 1), ``--workers W`` (default 2), ``--memory-limit`` (per worker, default 4GB),
``--setting NAME ...`` (a subset of ``stumps``, ``trees``, ``robust``; default all), ``--models
KEY ...`` (a subset of the chosen settings' models, below), ``--transport NAME`` (how the
DaskVIBoost rows other than the ``-scheduler`` ones reach the blocks, below; default ``auto``),
``--no-warmup``, ``--dashboard ADDRESS`` (off by default) and ``--out PATH`` (default
``benchmarks/dask.md``). The table is printed on stdout and written atomically to ``--out``;
progress goes to stderr. The script exits with status 1, before starting anything, when
``viboost-dask`` is requested but ``viboost.dask.DaskVIBoostClassifier`` cannot be imported.

What is measured, in one run, on one ``distributed.LocalCluster`` of W worker processes with one
thread each (``processes=True``), all on this machine:

- ``viboost-dask``: ``viboost.dask.DaskVIBoostClassifier(n_estimators=T, preset="paper",
  random_state=0, client=client)``; preset='paper' is the engine at fixed rounds (Algorithm 1 as
  printed, exactly T rounds; the default ``preset="robust"`` would cross-fit and choose its own
  number of rounds);
- ``lightgbm-dask``: ``lightgbm.dask.DaskLGBMClassifier(n_estimators=T, num_leaves=2,
  max_depth=1, min_child_samples=1, tree_learner="data", verbose=-1, client=client)``: stumps
  (two leaves); LightGBM's default ``learning_rate=0.1`` is kept, so its T stumps are shrunk by
  0.1 (its accuracy after T rounds is not its best: this is a speed benchmark);
  ``num_threads`` is set by lightgbm.dask to each worker's thread count (1);
- ``xgboost-dask``: ``xgboost.dask.DaskXGBClassifier(n_estimators=T, max_depth=1,
  tree_method="hist")`` with ``client``: stumps, XGBoost's default ``learning_rate=0.3``; its
  threads per worker are the worker's thread count (1);
- ``viboost-local``: the in-memory reference, ``viboost.VIBoostClassifier(n_estimators=T,
  preset="paper", random_state=0)`` (default ``n_jobs``: one thread) on the same data computed
  to numpy, in this (the client) process, not on the cluster.

Setting ``trees`` (31-leaf trees; the tree engine of ``benchmarks/speed.py``'s
``viboost-trees`` row):

- ``viboost-dask-trees``: ``DaskVIBoostClassifier(n_estimators=T + 1, preset="paper",
  max_leaf_nodes=31, leaf_weights="per-leaf", alpha="exact", learning_rate=0.1,
  noise_model=False, min_samples_leaf=20, random_state=0)`` (its first learner is the
  intercept);
- ``lightgbm-dask-trees``: ``DaskLGBMClassifier(n_estimators=T, num_leaves=31,
  learning_rate=0.1, tree_learner="data", verbose=-1)``;
- ``viboost-local-trees``: ``VIBoostClassifier`` with the parameters of ``viboost-dask-trees``,
  in memory;
- ``viboost-dask-trees-scheduler``: ``viboost-dask-trees`` with ``transport="scheduler"`` (every
  pass over the blocks dask tasks, as before the direct connections: the same model).

Setting ``robust`` (each library's defaults, fitted once whatever ``--repeat`` says):
``viboost-dask-robust``, ``DaskVIBoostClassifier(random_state=0)`` (cross-fitted, it chooses
its rounds, which the report gives), ``viboost-dask-robust-scheduler`` (the same with
``transport="scheduler"``), ``lightgbm-dask-default``, ``DaskLGBMClassifier()``, and
``cleanlab-dask``, the job the robust default does done the way cleanlab's
``CleanLearning(LGBMClassifier())`` does it, with ``DaskLGBMClassifier()`` (cleanlab has no Dask
interface; :class:`DaskCleanLearning`): 5-fold out-of-fold probabilities, cleanlab's
``find_label_issues`` on the client, a refit on the rows without an issue. The report gives the
robust default's fit time over this one's as a second ratio. The
report's note gives each DaskVIBoost fit's ``transport_`` (the default ``"auto"`` picks the
direct connections on this cluster).
The models above the trees are the setting ``stumps``.

``--transport``: ``auto`` (the estimator's default), ``direct`` (the hand-written service,
:class:`viboost.dask.service.BlockService`), ``scheduler``, ``actors`` (the rounds on Dask
Actors, :class:`viboost.dask.actors.ActorService`, each call straight from the client to the
actor's worker), ``actors-on-loop`` (the same, each actor's calls run on its worker's event
loop instead of a thread of its own) or ``actors-via-scheduler`` (the same actors, each call
relayed by the scheduler: the route of a ``distributed.Actor`` handle on a client with the
default ``direct_to_workers``). Where the estimator has no ``transport="actors"``, the actors
replace the service for the run (``viboost.dask.estimator.BlockService`` set to
``ActorService``, with ``transport="direct"``); its ``transport_`` then reads ``'direct'`` and
the report says which it was.

For each model: "fit s" is the wall-clock time of ``fit`` (``time.perf_counter``), the best of R
fits of fresh estimators, after warm-up fits (2,000 rows x 5 rounds and 50,000 rows x 2 rounds,
on the cluster for the Dask models) so that numba compilation in the workers and library
start-up costs are not timed; "x DaskLGBM" is that time divided by DaskLGBMClassifier's fit time
in the same setting (< 1 means faster than LightGBM); "predict s" is the best of R calls of
``predict`` on the test set, computed to a numpy array (``.compute()`` for the Dask models);
"test accuracy" compares those predictions with the clean test labels. The report also says how
far DaskVIBoost's test ``decision_function`` is from the in-memory reference's (the two fit the
same model).

Data (deterministic for given sizes and partitions): ``dask.array.random.default_rng`` with a
fixed seed generates X, (N, D) float64 i.i.d. standard normal, in P row chunks, on the cluster;
with w = (1, -1, 0.5, 0.5, -0.5) (its first min(D, 5) entries) and e ~ N(0, 1) per row, the clean
label is ``y = 1[X[:, :5] @ w + 0.5 * e > 0]`` (int64, {0, 1}); each training label is then
flipped with probability ``--flip-rate`` (independently). The test set (another seed, clean
labels) has ``--test-rows`` rows in the same number of chunks. Both are persisted in the
workers' memory before any timing; the training set is also gathered to numpy for the in-memory
reference.

Every library runs in the same cluster, one after the other, never two fits at once. Other
processes on the machine slow every fit down; the report gives the load average before and after.
The cluster is shut down at the end (client, then cluster, each within a bounded timeout).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import math
import os
import shlex
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script, this directory is sys.path[0], and benchmarks/dask.py would then shadow the
# dask package for ``import dask`` (here and inside distributed, lightgbm, xgboost). Move the
# directory to the end of sys.path: the package wins, and dask_report (beside this file) is
# still found. Worker processes start with this sys.path too (multiprocessing's spawn copies it).
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from dask_report import close_quietly, machine_lines, progress, versions_line  # noqa: E402
from distributed import Client, LocalCluster, wait  # noqa: E402

from viboost._utils.io import atomic_write_text  # noqa: E402

MODELS = {
    "viboost-dask": "DaskVIBoostClassifier",
    "lightgbm-dask": "LightGBM (DaskLGBMClassifier)",
    "xgboost-dask": "XGBoost (DaskXGBClassifier)",
    "viboost-local": "VIBoostClassifier (in memory, 1 process)",
    "viboost-dask-trees": "DaskVIBoostClassifier",
    "lightgbm-dask-trees": "LightGBM (DaskLGBMClassifier)",
    "viboost-local-trees": "VIBoostClassifier (in memory, 1 process)",
    "viboost-dask-robust": "DaskVIBoostClassifier",
    "lightgbm-dask-default": "LightGBM (DaskLGBMClassifier)",
    "viboost-dask-trees-scheduler": "DaskVIBoostClassifier, through the scheduler",
    "viboost-dask-robust-scheduler": "DaskVIBoostClassifier, through the scheduler",
    "cleanlab-dask": "CleanLearning's recipe on Dask (DaskLGBMClassifier)",
}
NOTES = {
    "viboost-dask": "preset='paper'",
    "lightgbm-dask": "learning_rate 0.1 (default)",
    "xgboost-dask": "learning_rate 0.3 (default)",
    "viboost-local": "preset='paper', 1 thread, not on the cluster",
    "viboost-dask-trees": "preset='paper', 31 leaves, per-leaf weights",
    "lightgbm-dask-trees": "31 leaves, learning_rate 0.1",
    "viboost-local-trees": "as DaskVIBoost, 1 thread, not on the cluster",
    "viboost-dask-robust": "defaults (preset='robust': cross-fitted, chooses its rounds)",
    "lightgbm-dask-default": "defaults",
    "viboost-dask-trees-scheduler": "as above, transport='scheduler' (every pass dask tasks)",
    "viboost-dask-robust-scheduler": "as above, transport='scheduler' (every pass dask tasks)",
    "cleanlab-dask": (
        "5-fold out-of-fold DaskLGBMClassifier() probabilities, cleanlab's find_label_issues, "
        "DaskLGBMClassifier() refit on the rows kept"
    ),
}
#: The settings, each a table of the report: its models and the one the fit times are over.
SETTINGS = {
    "stumps": ("viboost-dask", "lightgbm-dask", "xgboost-dask", "viboost-local"),
    "trees": (
        "viboost-dask-trees", "viboost-dask-trees-scheduler", "lightgbm-dask-trees",
        "viboost-local-trees",
    ),
    "robust": (
        "viboost-dask-robust", "viboost-dask-robust-scheduler", "lightgbm-dask-default",
        "cleanlab-dask",
    ),
}  # fmt: skip
BASELINES = {
    "stumps": "lightgbm-dask",
    "trees": "lightgbm-dask-trees",
    "robust": "lightgbm-dask-default",
}
#: DaskVIBoost and its in-memory reference in each setting (the same model).
PAIRS = {
    "stumps": ("viboost-dask", "viboost-local"),
    "trees": ("viboost-dask-trees", "viboost-local-trees"),
}
#: The robust default against the job it does: CleanLearning's (a second ratio in the report).
JOB_PEERS = {"robust": ("viboost-dask-robust", "cleanlab-dask")}
#: Fitted once, whatever ``--repeat`` says (their own number of rounds).
ONCE = (
    "viboost-dask-robust", "viboost-dask-robust-scheduler", "lightgbm-dask-default",
    "cleanlab-dask",
)  # fmt: skip
DASK_MODELS = tuple(key for key in MODELS if "-dask" in key)
#: CleanLearning's folds (cleanlab.classification.CleanLearning's default cv_n_folds).
CLEANLAB_FOLDS = 5
#: The in-memory tree engine of benchmarks/speed.py's ``viboost-trees`` row (T + 1 learners:
#: the first is the intercept).
TREE_PARAMS = dict(
    preset="paper", max_leaf_nodes=31, leaf_weights="per-leaf", alpha="exact",
    learning_rate=0.1, noise_model=False, min_samples_leaf=20, random_state=0,
)  # fmt: skip

WEIGHTS = (1.0, -1.0, 0.5, 0.5, -0.5)
NOISE_SCALE = 0.5
TRAIN_SEED = 20_260_801
TEST_SEED = 20_260_802
WARMUP_SEED = 20_260_803
WARMUP_FITS = ((2_000, 5), (50_000, 2))  # (rows, rounds), as benchmarks/speed.py
CLOSE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 120.0
#: ``--transport`` choices (see the module docstring).
TRANSPORTS = ("auto", "direct", "scheduler", "actors", "actors-on-loop", "actors-via-scheduler")
VERSIONED = ("viboost", "dask", "distributed", "lightgbm", "xgboost", "numpy", "scikit-learn")


# ---------------------------------------------------------------------------------- data
def make_data(
    rows: int, features: int, partitions: int, seed: int, flip_rate: float
) -> tuple[da.Array, da.Array]:
    """Lazy X (rows, features) float64 and y in {0, 1} in ``partitions`` row chunks."""
    chunk = max(1, math.ceil(rows / partitions))
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, features), chunks=(chunk, features))
    noise = rng.standard_normal(rows, chunks=chunk)
    k = min(features, len(WEIGHTS))
    score = X[:, :k] @ np.asarray(WEIGHTS[:k]) + NOISE_SCALE * noise
    y = (score > 0).astype(np.int64)
    if flip_rate > 0:
        flip = rng.random(rows, chunks=chunk) < flip_rate
        y = da.where(flip, 1 - y, y)
    return X, y


def persist(client: Client, *arrays: da.Array) -> list[da.Array]:
    """``arrays`` computed and held in the workers' memory (waits for them)."""
    out = client.persist(list(arrays))
    wait(out)
    return list(out)


# ---------------------------------------------------------------------------------- models
def import_viboost_dask() -> type:
    """``viboost.dask.DaskVIBoostClassifier`` (ImportError when it is missing)."""
    from viboost.dask import DaskVIBoostClassifier

    return DaskVIBoostClassifier


class DaskCleanLearning:
    """What cleanlab's ``CleanLearning(LGBMClassifier())`` does, on Dask arrays with
    ``DaskLGBMClassifier()`` (cleanlab has no Dask interface): out-of-fold predicted
    probabilities from :data:`CLEANLAB_FOLDS` stratified folds (``StratifiedKFold(shuffle=True,
    random_state=0)``, CleanLearning's split with ``seed=0``), the label issues that
    ``cleanlab.filter.find_label_issues`` finds in them with its defaults (as CleanLearning
    calls it), and a final ``DaskLGBMClassifier()`` on the rows without an issue. The labels
    and the out-of-fold probabilities (two floats a row) are gathered to the client for
    cleanlab, as the issue detection needs them all at once; the features stay on the
    workers. ``predict`` is the final model's."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _model(self) -> Any:
        from lightgbm.dask import DaskLGBMClassifier

        return DaskLGBMClassifier(client=self.client)

    def fit(self, X: da.Array, y: da.Array) -> DaskCleanLearning:
        from cleanlab.filter import find_label_issues
        from sklearn.model_selection import StratifiedKFold

        labels = np.asarray(y.compute())
        folds = StratifiedKFold(CLEANLAB_FOLDS, shuffle=True, random_state=0)
        fold_of = np.empty(labels.size, dtype=np.int64)
        for k, (_, held_out) in enumerate(folds.split(np.zeros(labels.size), labels)):
            fold_of[held_out] = k
        # Rows picked with numpy masks (known chunk sizes, which DaskLGBMClassifier needs).
        proba = np.empty((labels.size, int(labels.max()) + 1))
        for k in range(CLEANLAB_FOLDS):
            train, held_out = fold_of != k, fold_of == k
            model = self._model().fit(X[train], y[train])
            proba[held_out] = np.asarray(model.predict_proba(X[held_out]).compute())
        issues = find_label_issues(labels, proba)
        self.model_ = self._model().fit(X[~issues], y[~issues])
        self.n_issues_ = int(issues.sum())
        return self

    def predict(self, X: da.Array) -> da.Array:
        return self.model_.predict(X)


def use_transport(name: str) -> str:
    """Make the DaskVIBoost fits of this process take the ``--transport`` ``name``; the value
    of the estimator's ``transport`` parameter that does it. For the actors: ``"actors"`` if
    the estimator accepts it, else ``"direct"`` with the service replaced by
    :class:`viboost.dask.actors.ActorService` (for every fit of this process)."""
    if not name.startswith("actors"):
        return name
    from viboost.dask import estimator
    from viboost.dask.actors import ActorService

    ActorService.via_scheduler = name == "actors-via-scheduler"
    ActorService.threaded = name != "actors-on-loop"
    accepted = estimator.DaskVIBoostClassifier._parameter_constraints["transport"]
    if any(getattr(c, "is_satisfied_by", lambda _: False)("actors") for c in accepted):
        return "actors"
    estimator.BlockService = ActorService
    return "direct"


def model_factory(key: str, client: Client, transport: str = "auto") -> Callable[[int], Any]:
    """A function of the number of rounds that returns a fresh, unfitted estimator; the
    DaskVIBoost models other than the ``-scheduler`` ones get ``transport``.

    Raises ImportError when the model's library is not installed.
    """
    if key == "viboost-dask":
        cls = import_viboost_dask()
        return lambda rounds: cls(
            n_estimators=rounds, preset="paper", random_state=0, client=client,
            transport=transport,
        )  # fmt: skip
    if key == "lightgbm-dask":
        from lightgbm.dask import DaskLGBMClassifier

        # lightgbm.dask sets num_threads to each worker's thread count and warns, every fit,
        # that the sklearn wrapper's n_jobs (None) is ignored: that is what we want.
        warnings.filterwarnings("ignore", message="Parameter n_jobs will be ignored")
        # Stumps: two leaves (max_depth=1 says the same); min_child_samples=1 lets a leaf be as
        # small as a VIBoost stump's side may be. Default learning_rate (0.1), kept on purpose.
        return lambda rounds: DaskLGBMClassifier(
            n_estimators=rounds,
            num_leaves=2,
            max_depth=1,
            min_child_samples=1,
            tree_learner="data",
            verbose=-1,
            client=client,
        )
    if key == "xgboost-dask":
        from xgboost.dask import DaskXGBClassifier

        def make_xgboost(rounds: int) -> Any:
            model = DaskXGBClassifier(n_estimators=rounds, max_depth=1, tree_method="hist")
            model.client = client
            return model

        return make_xgboost
    if key == "viboost-local":
        from viboost import VIBoostClassifier

        return lambda rounds: VIBoostClassifier(n_estimators=rounds, preset="paper", random_state=0)
    if key in ("viboost-dask-trees", "viboost-dask-trees-scheduler"):
        cls = import_viboost_dask()
        transport = "scheduler" if key.endswith("-scheduler") else transport
        return lambda rounds: cls(
            n_estimators=rounds + 1, client=client, transport=transport, **TREE_PARAMS
        )
    if key == "viboost-local-trees":
        from viboost import VIBoostClassifier

        return lambda rounds: VIBoostClassifier(n_estimators=rounds + 1, **TREE_PARAMS)
    if key in ("viboost-dask-robust", "viboost-dask-robust-scheduler"):
        cls = import_viboost_dask()
        transport = "scheduler" if key.endswith("-scheduler") else transport
        return lambda rounds: cls(random_state=0, client=client, transport=transport)
    if key in ("lightgbm-dask-trees", "lightgbm-dask-default"):
        from lightgbm.dask import DaskLGBMClassifier

        warnings.filterwarnings("ignore", message="Parameter n_jobs will be ignored")
        if key == "lightgbm-dask-default":
            return lambda rounds: DaskLGBMClassifier(client=client)
        return lambda rounds: DaskLGBMClassifier(
            n_estimators=rounds,
            num_leaves=31,
            learning_rate=0.1,
            tree_learner="data",
            verbose=-1,
            client=client,
        )
    if key == "cleanlab-dask":
        import cleanlab  # noqa: F401 - skipped with a note when it is missing
        import lightgbm.dask  # noqa: F401

        warnings.filterwarnings("ignore", message="Parameter n_jobs will be ignored")
        return lambda rounds: DaskCleanLearning(client)
    raise ValueError(f"unknown model {key!r}; choose from {', '.join(MODELS)}")


def to_numpy(result: Any) -> np.ndarray:
    """A prediction as a numpy array, computing it first when it is a Dask collection."""
    if hasattr(result, "compute"):
        result = result.compute()
    return np.asarray(result)


def run_model(
    key: str,
    factory: Callable[[int], Any],
    data: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Warm up, time ``--repeat`` fits and predicts of one model, and score it."""
    local = key not in DASK_MODELS
    X, y = (data["X_np"], data["y_np"]) if local else (data["X"], data["y"])
    X_test = data["X_test_np"] if local else data["X_test"]
    out: dict[str, Any] = {"model": key}
    if not args.no_warmup:
        for X_w, y_w, rounds in data["warmups_np" if local else "warmups"]:
            to_numpy(factory(rounds).fit(X_w, y_w).predict(X_w))
    fit_times: list[float] = []
    model = None
    repeat = 1 if key in ONCE else args.repeat
    for _ in range(repeat):
        model = None
        gc.collect()
        model = factory(args.rounds)
        start = time.perf_counter()
        model.fit(X, y)
        fit_times.append(time.perf_counter() - start)
    predict_times: list[float] = []
    pred = None
    for _ in range(repeat):
        start = time.perf_counter()
        pred = to_numpy(model.predict(X_test))
        predict_times.append(time.perf_counter() - start)
    out["fit_s"] = min(fit_times)
    out["fit_s_all"] = fit_times
    out["predict_s"] = min(predict_times)
    out["test_accuracy"] = float(np.mean(pred == data["y_test_np"]))
    out["rounds"] = _rounds(key, model, args.rounds)
    if hasattr(model, "transport_"):
        out["transport"] = model.transport_
    if hasattr(model, "n_issues_"):
        out["n_issues"] = model.n_issues_
    if key.startswith("viboost") and key not in ONCE:
        out["decision"] = to_numpy(model.decision_function(X_test)).astype(np.float64)
    return out


def _rounds(key: str, model: Any, rounds: int) -> int:
    """The boosting rounds of a fitted model: its trees, not counting VIBoost's intercept."""
    if key.startswith("viboost"):
        intercept = key != "viboost-dask" and key != "viboost-local"  # per-leaf trees
        return len(model.estimators_) - int(intercept)
    if key == "lightgbm-dask-default":
        return int(model.booster_.num_trees())
    if key == "cleanlab-dask":  # the final model's
        return int(model.model_.booster_.num_trees())
    return rounds


# ---------------------------------------------------------------------------------- report


def load_average() -> float:
    """The 1-minute load average of the machine (NaN where unavailable)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return math.nan


def fmt(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, or a dash."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:.0f}"


def build_report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The markdown report: header, one table per setting, and notes."""
    by_key = {r["model"]: r for r in results}
    lines = [
        "# Dask benchmark: DaskVIBoostClassifier, LightGBM and XGBoost on a LocalCluster",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        *machine_lines(),
        versions_line(VERSIONED),
        f"- Command: `python {shlex.join(sys.argv)}`",
        f"- Cluster: distributed.LocalCluster, {args.workers} worker processes x 1 thread, "
        f"memory_limit {args.memory_limit} each, on this machine; the in-memory reference runs "
        "in the client process (one thread).",
        f"- Data: {args.rows:,} training rows x {args.features} float64 features in "
        f"{args.partitions} chunks ({args.rows * args.features * 8 / 1e6:,.0f} MB), "
        f"{args.flip_rate:.0%} of the training labels flipped at random; "
        f"{args.test_rows:,} test rows with clean labels; persisted on the workers before timing.",
        f"- Rounds: T = {args.rounds} (stumps: depth-1 trees for every model; trees: up to 31 "
        "leaves, VIBoost's after its intercept; robust: each library's defaults, VIBoost "
        "chooses its rounds); fit time: best of "
        f"{args.repeat} (the robust setting: 1 fit)"
        + ("" if args.no_warmup else ", after warm-up fits (excluded from the timings)")
        + f"; predict time: best of {args.repeat} calls of predict on the test set, computed "
        "to numpy.",
        f"- DaskVIBoost's transport (`--transport`): {args.transport}"
        + (
            " (viboost.dask.actors.ActorService in place of the service: transport_ reads 'direct')"
            if args.transport.startswith("actors") and args.transport_parameter == "direct"
            else ""
        )
        + "; the '-scheduler' rows: scheduler.",
        f"- Load average (1 min) before the run: {args.load_before:.2f}, after: "
        f"{load_average():.2f} (other processes on the machine slow every fit down).",
        "",
    ]
    for setting, keys in SETTINGS.items():
        rows = [by_key[key] for key in keys if key in by_key]
        if not rows:
            continue
        base = by_key.get(BASELINES[setting], {}).get("fit_s")
        lines += [
            f"## {setting}",
            "",
            "| model | rounds | fit s | x DaskLGBM fit | predict s | test accuracy | note |",
            "|:---|---:|---:|---:|---:|---:|:---|",
        ]
        for r in rows:
            name = MODELS[r["model"]]
            if "fit_s" not in r:
                lines.append(f"| {name} | - | - | - | - | - | {r['note']} |")
                continue
            ratio = r["fit_s"] / base if base else None
            note = NOTES[r["model"]]
            if "transport" in r:
                note += f"; transport_='{r['transport']}'"
            lines.append(
                f"| {name} | {r['rounds']} | {fmt(r['fit_s'])} | {fmt(ratio)} "
                f"| {fmt(r['predict_s'])} | {r['test_accuracy']:.4f} | {note} |"
            )
        lines.append("")
        dask_key, local_key = PAIRS.get(setting, (None, None))
        dask_dec = by_key.get(dask_key, {}).get("decision")
        local_dec = by_key.get(local_key, {}).get("decision")
        if dask_dec is not None and local_dec is not None:
            diff = float(np.max(np.abs(dask_dec - local_dec))) if dask_dec.size else 0.0
            agree = float(np.mean((dask_dec > 0) == (local_dec > 0)))
            lines += [
                f"DaskVIBoost against the in-memory VIBoostClassifier on the test set: max "
                f"|decision_function difference| {diff:.3g}, signs agree on {agree:.2%} of rows.",
                "",
            ]
        ours, peer = (by_key.get(key, {}) for key in JOB_PEERS.get(setting, (None, None)))
        if "fit_s" in ours and "fit_s" in peer:
            ratio = ours["fit_s"] / peer["fit_s"]
            lines += [
                f"DaskVIBoost's default against CleanLearning's recipe on Dask (the same job: "
                f"cross-fitted models, label issues, a refit): {ratio:.2f}x "
                f"its fit time ({fmt(ours['fit_s'])} s against {fmt(peer['fit_s'])} s); "
                f"{peer['n_issues']:,} label issues left out of its refit.",
                "",
            ]
        if base is None:
            lines += ["DaskLGBMClassifier did not run in this setting: there is no ratio.", ""]
    lines += [
        "x DaskLGBM fit: the model's fit time divided by DaskLGBMClassifier's in the same "
        "setting and run (< 1 means faster than LightGBM).",
        "",
        "Parameters. stumps: DaskVIBoostClassifier and VIBoostClassifier(n_estimators=T, "
        "preset='paper', random_state=0); DaskLGBMClassifier(n_estimators=T, num_leaves=2, "
        "max_depth=1, min_child_samples=1, tree_learner='data', verbose=-1), learning_rate 0.1 "
        "(its default); DaskXGBClassifier(n_estimators=T, max_depth=1, tree_method='hist'), "
        "learning_rate 0.3 (its default). trees: DaskVIBoostClassifier and "
        "VIBoostClassifier(n_estimators=T + 1, preset='paper', max_leaf_nodes=31, "
        "leaf_weights='per-leaf', alpha='exact', learning_rate=0.1, noise_model=False, "
        "min_samples_leaf=20, random_state=0) (the first learner is the intercept; "
        "benchmarks/speed.py's viboost-trees engine); DaskLGBMClassifier(n_estimators=T, "
        "num_leaves=31, learning_rate=0.1, tree_learner='data', verbose=-1). robust: "
        "DaskVIBoostClassifier(random_state=0) (cross-fitted, its rounds chosen) and "
        "DaskLGBMClassifier() (100 rounds of 31 leaves), each fitted once; CleanLearning's "
        "recipe on Dask: CleanLearning(LGBMClassifier(), seed=0)'s steps with "
        "DaskLGBMClassifier() (StratifiedKFold(5, shuffle=True, random_state=0), out-of-fold "
        "predict_proba, cleanlab.filter.find_label_issues with its defaults on the client, "
        "DaskLGBMClassifier() on the rows without an issue), fitted once. LightGBM and XGBoost "
        "use one thread per worker (the worker's thread count). With shrinkage, LightGBM's and "
        "XGBoost's accuracy after T stumps is not their best; the comparison is of speed.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows")
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=8, help="row chunks of the arrays")
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--flip-rate", type=float, default=0.1, help="0 for clean labels")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="best of R fits (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (1 thread)")
    parser.add_argument("--memory-limit", default="4GB", help="per worker (dask syntax)")
    parser.add_argument(
        "--setting",
        nargs="+",
        choices=list(SETTINGS),
        default=list(SETTINGS),
        help="the settings to run (default: all)",
    )
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=None)
    parser.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="auto",
        help="how the DaskVIBoost rows (not the -scheduler ones) reach the blocks",
    )
    parser.add_argument("--no-warmup", action="store_true", help="time the first fits too")
    parser.add_argument("--dashboard", default=None, help="dashboard address (default: none)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("dask.md"))
    args = parser.parse_args(argv)
    if min(args.rows, args.features, args.partitions, args.test_rows) < 1:
        parser.error("--rows, --features, --partitions and --test-rows must be positive")
    if min(args.rounds, args.repeat, args.workers) < 1:
        parser.error("--rounds, --repeat and --workers must be positive")
    if not 0.0 <= args.flip_rate < 0.5:
        parser.error("--flip-rate must be in [0, 0.5)")
    wanted = [key for setting in args.setting for key in SETTINGS[setting]]
    if args.models is not None:
        wanted = [key for key in wanted if key in args.models]
    args.models = [key for key in MODELS if key in wanted]  # DaskVIBoost first
    return args


def main(argv: list[str] | None = None) -> int:
    """Start the cluster, make the data, run every model, print and write the report."""
    args = parse_args(argv)
    if any(key.startswith("viboost-dask") for key in args.models):
        try:
            import_viboost_dask()
        except ImportError as exc:
            print(
                "error: viboost.dask.DaskVIBoostClassifier cannot be imported "
                f"({type(exc).__name__}: {exc}). Install viboost with its Dask support, or "
                "leave the viboost-dask models out with --models.",
                file=sys.stderr,
            )
            return 1
    args.transport_parameter = use_transport(args.transport)
    args.load_before = load_average()
    if args.load_before > 0.5:
        progress(
            f"warning: load average {args.load_before:.2f}: other processes are running, "
            "timings will be inflated"
        )
    results: list[dict[str, Any]] = []
    # With dashboard_address=None the scheduler still serves HTTP (metrics) on the default port
    # and warns when another cluster has it; it then picks a free port, which is fine.
    warnings.filterwarnings("ignore", message="Port [0-9]+ is already in use", category=UserWarning)
    with contextlib.ExitStack() as stack:
        progress(f"starting a LocalCluster of {args.workers} workers ...")
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            dashboard_address=args.dashboard,
        )
        stack.callback(close_quietly, "cluster", cluster.close, CLOSE_TIMEOUT_S)
        client = Client(cluster, timeout=CONNECT_TIMEOUT_S)
        stack.callback(close_quietly, "client", client.close, CLOSE_TIMEOUT_S)

        progress("generating and persisting the data ...")
        X, y = make_data(args.rows, args.features, args.partitions, TRAIN_SEED, args.flip_rate)
        X_test, y_test = make_data(args.test_rows, args.features, args.partitions, TEST_SEED, 0.0)
        X, y, X_test, y_test = persist(client, X, y, X_test, y_test)
        data: dict[str, Any] = {"X": X, "y": y, "X_test": X_test}
        data["y_test_np"] = y_test.compute()
        if any(key.startswith("viboost-local") for key in args.models):
            data["X_np"], data["y_np"] = client.compute([X, y], sync=True)
            data["X_test_np"] = X_test.compute()
        data["warmups"], data["warmups_np"] = [], []
        for i, (rows, rounds) in enumerate(WARMUP_FITS):
            rows = min(rows, args.rows)
            X_w, y_w = make_data(rows, args.features, args.partitions, WARMUP_SEED + i, 0.1)
            X_w, y_w = persist(client, X_w, y_w)
            data["warmups"].append((X_w, y_w, rounds))
            data["warmups_np"].append((X_w.compute(), y_w.compute(), rounds))

        for i, key in enumerate(args.models, 1):
            label = f"[{i}/{len(args.models)}] {MODELS[key]}"
            try:
                factory = model_factory(key, client, args.transport_parameter)
            except ImportError as exc:
                lib = key.split("-")[0]
                note = f"skipped: cannot import {exc.name or lib} (pip install 'viboost[bench]')"
                progress(f"{label}: {note}")
                results.append({"model": key, "note": note})
                continue
            progress(f"{label}: running ...")
            try:
                r = run_model(key, factory, data, args)
            except Exception as exc:  # one failing library must not stop the rest
                traceback.print_exc()
                note = f"failed: {type(exc).__name__}: {exc}".replace("|", "/")[:200]
                progress(f"{label}: {note}")
                results.append({"model": key, "note": note})
                continue
            progress(
                f"{label}: fit {r['fit_s']:.3g} s, predict {r['predict_s']:.3g} s, "
                f"accuracy {r['test_accuracy']:.4f}"
            )
            results.append(r)

        report = build_report(results, args)
        print(report)
        atomic_write_text(args.out, report)
        progress(f"wrote {args.out}; shutting the cluster down ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
