"""Fitted outputs of VIBoostClassifier and GibbsSampler in fixed configurations, for bit-identity.

``tests/data/reference_outputs.npz`` holds these outputs (and subsampled bin edges) as computed
by main before the variational round moved into :mod:`viboost.variational` (commit b3f2a06,
issue 10 landed).
``tests/test_reference_outputs.py`` recomputes them with the code under test and requires every
array to be bit-identical. Regenerate the file only for a deliberate change of behaviour:

    python tests/reference_outputs.py tests/data/reference_outputs.npz
"""

from __future__ import annotations

import sys

import numpy as np

from viboost import GibbsSampler, VIBoostClassifier

#: Configuration name -> (data set, estimator parameters, fit options).
VI_CONFIGS: dict[str, tuple[str, dict, dict]] = {
    "defaults": ("small", {"n_estimators": 25}, {}),
    "alpha_exact": ("small", {"n_estimators": 25, "alpha": "exact"}, {}),
    "core_model": ("small", {"n_estimators": 25, "noise_model": False}, {}),
    "fixed_vi_iter_1": ("small", {"n_estimators": 25, "fixed_vi_iter": 1}, {}),
    "alpha_once": (
        "small",
        {"n_estimators": 20, "fixed_vi_iter": 3, "update_alpha_once": True},
        {},
    ),
    "tau_half_weighted": (
        "small",
        {"n_estimators": 20, "tau": 0.5, "init_clean_proba": 0.9, "clean_prior": (2.0, 1.0)},
        {"sample_weight": "mixed"},
    ),
    "exhaustive_search": ("small", {"n_estimators": 15, "max_bins": None}, {}),
    "pseudo_rows": ("large", {"n_estimators": 15}, {}),
    "pseudo_rows_exact": ("large", {"n_estimators": 10, "alpha": "exact"}, {}),
    "warm_start": ("small", {"n_estimators": 25, "warm_start": True}, {"warm_from": 10}),
    "separable_far_margins": (
        "separable",
        {"n_estimators": 40, "weight_prior": 1e-3, "noise_grade_prior": 0.5},
        {},
    ),
}


def make_data(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Small (400 x 6, NaNs, 15% flips), large (6,000 x 4, above the pseudo-row threshold) or
    separable (300 x 3) training data from a fixed seed."""
    rng = np.random.default_rng({"small": 1, "large": 2, "separable": 3}[kind])
    n, d = {"small": (400, 6), "large": (6000, 4), "separable": (300, 3)}[kind]
    X = rng.normal(size=(n, d))
    if kind == "separable":
        return X, (X[:, 0] > 0.1).astype(int)
    y = (X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2] ** 2 > 0).astype(int)
    flip = rng.random(n) < 0.15
    y[flip] = 1 - y[flip]
    X[rng.random(n) < 0.05, 1] = np.nan
    if kind == "small":
        X[:, 4] = np.round(X[:, 4], 1)  # few distinct values: exact bins
    return X, y


def _sample_weight(kind: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    weights = rng.integers(0, 4, size=n).astype(float)
    weights[::7] = rng.random(weights[::7].size) * 3.0
    return weights


def vi_outputs(name: str) -> dict[str, np.ndarray]:
    """Every fitted attribute of one configuration, and the decision function on fresh rows."""
    data, params, options = VI_CONFIGS[name]
    X, y = make_data(data)
    fit_kw = {}
    if options.get("sample_weight"):
        fit_kw["sample_weight"] = _sample_weight(options["sample_weight"], X.shape[0])
    clf = VIBoostClassifier(**params)
    if "warm_from" in options:
        clf.set_params(n_estimators=options["warm_from"]).fit(X, y, **fit_kw)
        clf.set_params(n_estimators=params["n_estimators"])
    clf.fit(X, y, **fit_kw)
    stumps = np.array(
        [[s.feature, s.threshold, s.polarity, float(s.missing_right)] for s in clf.estimators_]
    )
    X_new = make_data(data)[0][::3] * 1.1
    trace = clf.elbo_
    return {
        "stumps": stumps,
        "alphas": clf.alphas_,
        "snr": np.array(clf.snr_),
        "noise_grade": np.array(clf.noise_grade_),
        "clean_proba": clf.clean_proba_,
        "eta": clf.eta_,
        "omega": clf.omega_,
        "elbo_lengths": np.array([len(t) for t in trace]),
        "elbo": np.concatenate(trace) if trace else np.empty(0),
        "n_vi_iter": clf.n_vi_iter_,
        "snr_path": clf.snr_path_,
        "noise_grade_path": clf.noise_grade_path_,
        "decision": clf.decision_function(X_new),
    }


def gibbs_outputs(name: str) -> dict[str, np.ndarray]:
    """Every draw of a Gibbs run: on a matrix of base outputs, or over a VIBoost fit's stumps."""
    if name == "gibbs_outputs":
        rng = np.random.default_rng(5)
        outputs = rng.choice([-1.0, 1.0], size=(250, 4))
        y = np.where(rng.random(250) < 0.85, outputs[:, 0], -outputs[:, 0])
        gibbs = GibbsSampler(n_draws=60, n_burnin=30, n_chains=2, thin=2, random_state=3)
        gibbs.fit(outputs, y)
    else:
        X, y = make_data("small")
        vi = VIBoostClassifier(n_estimators=8).fit(X, y)
        gibbs = GibbsSampler(
            n_draws=40, n_burnin=20, n_chains=2, classifier=vi, weight_prior=0.5, random_state=0
        )
        gibbs.fit(X, y)
    return {
        "weight_draws": gibbs.weight_draws_,
        "noise_grade_draws": gibbs.noise_grade_draws_,
        "clean_rate_draws": gibbs.clean_rate_draws_,
        "clean_proba_draws": gibbs.clean_proba_draws_,
        "clean_proba": gibbs.clean_proba_,
    }


GIBBS_CONFIGS = ("gibbs_outputs", "gibbs_over_vi")

#: Quantile bin edges from a subsample (above 200,000 rows), for an int seed and a RandomState.
BINNING_CONFIGS = ("binning_int_seed", "binning_random_state")


def binning_outputs(name: str) -> dict[str, np.ndarray]:
    """The bin thresholds of every feature of 250,000 rows, placed on a seeded subsample."""
    from viboost.binning import FeatureBinner

    X = np.random.default_rng(0).normal(size=(250_000, 3))
    seed = 0 if name == "binning_int_seed" else np.random.RandomState(3)
    binner = FeatureBinner(max_bins=255, random_state=seed).fit(X)
    return {f"thresholds_{j}": np.asarray(t) for j, t in enumerate(binner.thresholds_)}


def all_outputs() -> dict[str, np.ndarray]:
    """``{config/attribute: array}`` for every configuration."""
    out = {}
    for name in VI_CONFIGS:
        out.update({f"{name}/{k}": v for k, v in vi_outputs(name).items()})
    for name in GIBBS_CONFIGS:
        out.update({f"{name}/{k}": v for k, v in gibbs_outputs(name).items()})
    for name in BINNING_CONFIGS:
        out.update({f"{name}/{k}": v for k, v in binning_outputs(name).items()})
    return out


if __name__ == "__main__":
    np.savez_compressed(sys.argv[1], **all_outputs())
