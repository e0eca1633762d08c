"""The fits whose every output viboost 0.3.0 saved (``tests/data/reference_outputs_0_3.npz``),
and the models it pickled (``tests/data/models_viboost_0_3_0.pkl``): two classes and K
classes, both presets, in memory and on Dask, through the public API only.

``tests/test_reference_0_3.py`` fits them again and compares every fitted attribute and
prediction (:func:`outputs`), so a change of structure that changes a number fails.
Regenerate the outputs (only when a change of the model is intended, and say so in the
changelog)::

    python tests/reference_0_3.py             # the outputs; the 0.3.0 pickles are kept
    python tests/reference_0_3.py --models    # the pickles too (they are then not 0.3.0's)

The outputs were regenerated once, for issue 52 (the noise posterior): the cross-fitted fits'
noise statistics, refit weights and so predictions changed on purpose, and every fit gained
``no_noise_proba_`` and ``noise_matrix_interval_`` (NaN for the paper preset, whose other
outputs are 0.3.0's). They were regenerated again for the robust preset's leaf prior (issue 52:
``weight_prior`` None resolves to ``min_samples_leaf / 2``, so every robust fit of trees
changed on purpose; the paper preset's outputs did not), and for the bags by validation fold
(issue 52: the noise statistics of the robust fits changed on purpose; their ensembles, refit
weights and predictions did not), and once more when the nested posterior's draws took the
Cholesky factor (the same distribution, other Monte Carlo draws), and when the noise
calibration's row kernels took one ``exp`` in linear space (the same sums to rounding: the
noise statistics moved by at most 6e-8 relative, every discrete output stayed). The pickled
models are 0.3.0's and must still load and predict as then.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

from viboost import VIBoostClassifier

DATA = Path(__file__).parent / "data"
SAVED = DATA / "reference_outputs_0_3.npz"
MODELS = DATA / "models_viboost_0_3_0.pkl"

#: In-memory fits: (K, parameters).
LOCAL = {
    "binary-robust": (2, {}),
    "binary-robust-drop": (2, {"mislabeled": "drop"}),
    "binary-robust-fold-average": (2, {"final_model": "fold-average"}),
    "binary-robust-core": (2, {"noise_model": False}),
    "binary-robust-stumps-cv3": (2, {"max_leaf_nodes": 2, "cv": 3, "sample_weight": True}),
    "binary-paper": (2, {"preset": "paper", "n_estimators": 30}),
    "binary-paper-trees": (
        2,
        {"preset": "paper", "n_estimators": 20, "max_leaf_nodes": 6, "leaf_weights": "per-leaf"},
    ),
    "binary-paper-core": (2, {"preset": "paper", "n_estimators": 20, "noise_model": False}),
    "classes-robust": (3, {}),
    "classes-robust-independent": (3, {"noise_channel": "independent"}),
    "classes-robust-conditional": (3, {"noise_channel": "class-conditional"}),
    "classes-robust-drop": (3, {"mislabeled": "drop", "sample_weight": True}),
    "classes-robust-fold-average": (3, {"final_model": "fold-average"}),
    "classes-robust-core": (3, {"noise_model": False}),
}
#: Dask fits: (K, parameters); each is compared with the saved outputs too.
DASK = {
    "dask-binary-robust": (2, {}),
    "dask-binary-robust-scheduler": (2, {"transport": "scheduler"}),
    "dask-binary-paper": (2, {"preset": "paper", "n_estimators": 20}),
    "dask-binary-paper-trees": (
        2,
        {"preset": "paper", "n_estimators": 15, "max_leaf_nodes": 6, "leaf_weights": "per-leaf"},
    ),
    "dask-binary-paper-core": (2, {"preset": "paper", "n_estimators": 15, "noise_model": False}),
    "dask-classes-robust": (3, {}),
    "dask-classes-robust-core": (3, {"noise_model": False, "transport": "scheduler"}),
}
#: The pickled models: names of LOCAL fits.
PICKLED = ("binary-robust", "binary-paper", "classes-robust", "classes-robust-conditional")

#: Fitted attributes that are not numbers (compared elsewhere or not at all).
SKIP = {"estimators_", "plan_", "noise_calibration_", "feature_names_in_", "n_features_in_"}
# New since 0.3.0 (issue 53), and trivial for these all-numeric fits: None and [None] * d.
SKIP |= {"is_categorical_", "categories_"}


def data(n_classes: int, n: int = 480, seed: int = 3) -> tuple[np.ndarray, ...]:
    """Features with missing values; labels of ``n_classes`` classes, 15% moved; weights."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 4] = rng.integers(0, 4, n)
    score = X[:, 0] + 0.8 * X[:, 1] * (X[:, 2] > 0) - 0.4 * X[:, 4]
    if n_classes == 2:
        y = (score > 0).astype(int)
    else:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    moved = rng.random(n) < 0.15
    y[moved] = (y[moved] + rng.integers(1, n_classes, moved.sum())) % n_classes
    X[rng.random(X.shape) < 0.03] = np.nan
    weight = rng.choice([0.0, 1.0, 2.0, 3.0], size=n, p=[0.05, 0.65, 0.2, 0.1])
    X_test = rng.normal(size=(200, 5))
    X_test[:, 4] = rng.integers(0, 4, 200)
    return X, y, weight, X_test


def _parameters(spec: dict) -> tuple[dict, bool]:
    params = dict(spec)
    weighted = bool(params.pop("sample_weight", False))
    return {"random_state": 0, **params}, weighted


def fit_local(name: str) -> tuple[VIBoostClassifier, np.ndarray]:
    n_classes, spec = LOCAL[name]
    params, weighted = _parameters(spec)
    X, y, weight, X_test = data(n_classes)
    model = VIBoostClassifier(**params).fit(X, y, sample_weight=weight if weighted else None)
    return model, X_test


def fit_dask(name: str, client: object) -> tuple[object, np.ndarray]:
    import dask.array as da

    from viboost.dask import DaskVIBoostClassifier

    n_classes, spec = DASK[name]
    params, weighted = _parameters(spec)
    X, y, weight, X_test = data(n_classes)
    chunks = (160,)
    model = DaskVIBoostClassifier(client=client, **params).fit(
        da.from_array(X, chunks=chunks + (5,)),
        da.from_array(y, chunks=chunks),
        da.from_array(weight, chunks=chunks) if weighted else None,
    )
    return model, X_test


def _numbers(value: object) -> np.ndarray | None:
    """A fitted attribute as one float64 array (lists of lists flattened), None if not numeric."""
    if hasattr(value, "compute"):  # a dask array
        value = value.compute()
    if value is None:
        return np.array([np.nan])
    if isinstance(value, str):
        return None
    if isinstance(value, list | tuple):
        parts = [_numbers(v) for v in value]
        if any(p is None for p in parts):
            return None
        return np.concatenate([p.ravel() for p in parts]) if parts else np.empty(0)
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def outputs(model: object, X_test: np.ndarray) -> dict[str, np.ndarray]:
    """Every numeric fitted attribute, the learners' node arrays, and the predictions."""
    out: dict[str, np.ndarray] = {}
    for key in sorted(vars(model)):
        if not key.endswith("_") or key.startswith("_") or key in SKIP:
            continue
        value = _numbers(getattr(model, key))
        if value is not None:
            out[key] = value
        elif isinstance(getattr(model, key), str):
            out[key] = np.array(getattr(model, key))
    learners = model.estimators_
    flat = [lr for group in learners for lr in (group if isinstance(group, list) else [group])]
    out["learners/feature"] = np.concatenate([lr.nodes["feature"].astype(float) for lr in flat])
    out["learners/threshold"] = np.concatenate([lr.nodes["threshold"] for lr in flat])
    out["learners/value"] = np.concatenate([lr.nodes["value"] for lr in flat])
    out["n_learners"] = np.array([len(learners)], dtype=float)
    local = model.to_local() if hasattr(model, "to_local") else model
    out["decision_function"] = np.asarray(local.decision_function(X_test))
    out["predict_proba"] = np.asarray(local.predict_proba(X_test))
    out["predict_log_proba"] = np.asarray(local.predict_log_proba(X_test))
    out["predict"] = np.asarray(local.predict(X_test), dtype=float)
    staged = list(local.staged_predict_proba(X_test[:20]))
    out["staged_predict_proba"] = np.concatenate([s.ravel() for s in staged])
    out["feature_importances_"] = np.asarray(local.feature_importances_)
    out["plan"] = np.array(repr(local.plan_))
    if hasattr(model, "to_local"):
        out["dask_decision_function"] = np.asarray(
            model.decision_function(_dask(X_test)).compute()
        )
        out["dask_predict_proba"] = np.asarray(model.predict_proba(_dask(X_test)).compute())
    return out


def _dask(X: np.ndarray) -> object:
    import dask.array as da

    return da.from_array(X, chunks=(70, X.shape[1]))


def main() -> None:
    import distributed

    saved: dict[str, np.ndarray] = {}
    for name in LOCAL:
        model, X_test = fit_local(name)
        saved.update({f"{name}/{k}": v for k, v in outputs(model, X_test).items()})
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        for name in DASK:
            model, X_test = fit_dask(name, client)
            saved.update({f"{name}/{k}": v for k, v in outputs(model, X_test).items()})
    np.savez_compressed(SAVED, **saved)
    if "--models" not in sys.argv[1:]:
        print(f"saved {len(saved)} arrays to {SAVED}", file=sys.stderr)
        return
    models = {}
    for name in PICKLED:
        model, X_test = fit_local(name)
        models[name] = (pickle.dumps(model), X_test, model.predict_proba(X_test))
    MODELS.write_bytes(pickle.dumps(models))
    print(f"saved {len(saved)} arrays to {SAVED}, {len(models)} models", file=sys.stderr)


if __name__ == "__main__":
    main()
