"""Tests for the viboost command line (viboost.cli) and its safe file I/O (viboost._utils.io)."""

from __future__ import annotations

import errno
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest

from viboost import VIBoostClassifier
from viboost._utils.io import (
    atomic_dump_model,
    atomic_write_text,
    read_csv_checked,
    read_table_checked,
)
from viboost.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
FLIPPED_ROW = 7


@pytest.fixture
def easy_csv(tmp_path: Path) -> Path:
    """An easy data set (label = f0 > 0) with one label flipped far from the boundary."""
    rng = np.random.default_rng(0)
    n = 120
    f0 = rng.uniform(-1, 1, n)
    f0[FLIPPED_ROW] = 0.95
    f1 = rng.normal(size=n)
    label = (f0 > 0).astype(int)
    label[FLIPPED_ROW] = 0
    path = tmp_path / "train.csv"
    pd.DataFrame({"f0": f0, "f1": f1, "label": label}).to_csv(path, index=False)
    return path


def _fit(easy_csv: Path, model: Path, *extra: str) -> int:
    return main(
        ["fit", str(easy_csv), "--target", "label", "-o", str(model), "--n-estimators", "8", *extra]
    )


@pytest.fixture
def model_file(easy_csv: Path, tmp_path: Path) -> Path:
    path = tmp_path / "model.joblib"
    assert _fit(easy_csv, path) == 0
    return path


def _assert_error(capsys: pytest.CaptureFixture[str], code: int, *fragments: str) -> str:
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("viboost: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


@pytest.fixture
def paper_model_file(easy_csv: Path, tmp_path: Path) -> Path:
    path = tmp_path / "paper.joblib"
    assert _fit(easy_csv, path, "--preset", "paper") == 0
    return path


def _flat(text: str) -> str:
    """The output with its line wrapping undone."""
    return " ".join(text.split())


# ----------------------------------------------------------------------------------- fit/predict
def test_fit_predict_round_trip(easy_csv, tmp_path, capsys):
    model_path = tmp_path / "model.joblib"
    assert _fit(easy_csv, model_path) == 0
    out = _flat(capsys.readouterr().out)
    assert "preset 'robust'" in out and "8 rounds (refitted on all rows from the " in out
    assert "chosen by cross-fitting, at most 8)" in out
    assert "Training accuracy" in out and str(model_path) in out
    assert re.search(r"Estimated share of wrong labels \d+\.\d% \(90% interval ", out), out
    assert re.search(r"Probability that no label is wrong: [01]\.\d\d\.", out), out
    assert "of true 0 rows labelled 1" in out and "noise grade xi" in out
    assert "clean_proba" not in out and "false training labels" not in out

    model = joblib.load(model_path)
    assert isinstance(model, VIBoostClassifier)
    assert model.preset == "robust" and model.random_state == 0
    assert model.noise_calibration_ is not None
    assert len(model.estimators_) == 8
    assert list(model.feature_names_in_) == ["f0", "f1"]

    assert main(["predict", str(model_path), str(easy_csv)]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(printed.columns) == ["prediction", "proba_0", "proba_1"]
    X = pd.read_csv(easy_csv)[["f0", "f1"]]
    np.testing.assert_array_equal(printed["prediction"], model.predict(X))
    np.testing.assert_allclose(printed[["proba_0", "proba_1"]], model.predict_proba(X))

    out_csv = tmp_path / "pred.csv"
    assert main(["predict", str(model_path), str(easy_csv), "-o", str(out_csv)]) == 0
    assert "Wrote 120 predictions" in capsys.readouterr().out
    written = pd.read_csv(out_csv)
    pd.testing.assert_frame_equal(written, printed)


def test_predict_selects_columns_by_name(model_file, easy_csv, tmp_path, capsys):
    frame = pd.read_csv(easy_csv)
    shuffled = tmp_path / "shuffled.csv"
    frame.assign(comment="text")[["comment", "f1", "label", "f0"]].to_csv(shuffled, index=False)
    assert main(["predict", str(model_file), str(easy_csv)]) == 0
    expected = capsys.readouterr().out
    assert main(["predict", str(model_file), str(shuffled)]) == 0
    assert capsys.readouterr().out == expected

    missing = tmp_path / "missing.csv"
    frame[["f1", "label"]].to_csv(missing, index=False)
    code = main(["predict", str(model_file), str(missing)])
    _assert_error(capsys, code, "'f0'", "lacks")


def test_fit_string_labels_and_options(tmp_path, easy_csv, capsys):
    frame = pd.read_csv(easy_csv)
    frame["label"] = np.where(frame["label"] == 1, "pos", "neg")
    data = tmp_path / "strings.csv"
    frame.to_csv(data, index=False)
    model_path = tmp_path / "m.joblib"
    args = ["fit", str(data), "--target", "label", "-o", str(model_path), "--n-estimators", "4"]
    assert main([*args, "--no-noise-model", "--alpha", "exact"]) == 0
    assert "Noise model off" in capsys.readouterr().out
    model = joblib.load(model_path)
    assert model.noise_model is False and model.alpha == "exact"
    assert main(["predict", str(model_path), str(data)]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(printed.columns) == ["prediction", "proba_neg", "proba_pos"]
    assert set(printed["prediction"]) <= {"neg", "pos"}
    assert main(["inspect", str(model_path)]) == 0
    assert "SNR: n/a" in capsys.readouterr().out


def test_preset_paper_is_the_old_path(easy_csv, tmp_path, capsys):
    # --preset paper fits Algorithm 1 as printed: the model of VIBoostClassifier(preset="paper")
    # bit for bit, 100 rounds by default, with the SNR and noise grade of the old summary.
    paper_model_file = tmp_path / "paper.joblib"
    assert _fit(easy_csv, paper_model_file, "--preset", "paper") == 0
    out = _flat(capsys.readouterr().out)
    assert "preset 'paper'" in out and "with 8 rounds in" in out and "SNR eta1/eta2" in out
    assert "noise grade log(omega2/omega1)" in out
    assert "is a ranking statistic, not calibrated (preset='paper')" in out
    assert "Estimated share" not in out and "false training labels" not in out
    model = joblib.load(paper_model_file)
    frame = pd.read_csv(easy_csv)
    expected = VIBoostClassifier(8, preset="paper").fit(frame[["f0", "f1"]], frame["label"])
    np.testing.assert_array_equal(model.alphas_, expected.alphas_)
    np.testing.assert_array_equal(model.clean_proba_, expected.clean_proba_)
    assert model.noise_calibration_ is None and np.isnan(model.noise_rate_interval_).all()

    default_rounds = tmp_path / "paper100.joblib"
    args = ["fit", str(easy_csv), "--target", "label", "-o", str(default_rounds)]
    assert main([*args, "--preset", "paper"]) == 0
    assert "with 100 rounds in" in _flat(capsys.readouterr().out)
    assert len(joblib.load(default_rounds).estimators_) == 100


def test_random_state_makes_fit_deterministic(easy_csv, tmp_path, capsys):
    # The robust fit's folds are seeded by --random-state (0 by default): the same file gives
    # the same model.
    first, second, other = (tmp_path / f"{name}.joblib" for name in ("a", "b", "c"))
    assert _fit(easy_csv, first) == 0
    assert _fit(easy_csv, second) == 0
    assert _fit(easy_csv, other, "--random-state", "7") == 0
    capsys.readouterr()
    a, b, c = (joblib.load(path) for path in (first, second, other))
    assert (a.random_state, c.random_state) == (0, 7)
    X = pd.read_csv(easy_csv)[["f0", "f1"]]
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.mislabel_proba_, b.mislabel_proba_)
    np.testing.assert_array_equal(a.cv_decision_function_, b.cv_decision_function_)
    assert not np.array_equal(a.cv_decision_function_, c.cv_decision_function_)
    assert main(["predict", str(first), str(easy_csv)]) == 0
    once = capsys.readouterr().out
    assert main(["predict", str(second), str(easy_csv)]) == 0
    assert capsys.readouterr().out == once
    code = main(
        ["fit", str(easy_csv), "--target", "label", "-o", str(first), "--random-state", "x"]
    )
    assert code == 2 and "expected an integer seed" in capsys.readouterr().err


# --------------------------------------------------------------------------------------- inspect
def test_inspect(model_file, capsys):
    assert main(["inspect", str(model_file), "--stumps", "3"]) == 0
    out = capsys.readouterr().out
    assert "preset: robust (noise_fit: cross-fit" in out
    assert "learning rate: 0.2, alpha: exact, noise model: on" in out
    model = joblib.load(model_file)
    assert (
        f"rounds: 8 (refitted on all rows from the {model.cv_best_rounds_} chosen by "
        "cross-fitting, at most 8)" in out
    )
    assert f"at the chosen {model.cv_best_rounds_} rounds" in out
    assert "cross-fitting, cv=auto (5 folds)" in out
    assert "classes: 0, 1" in out
    assert re.search(r"share of wrong labels: \d+\.\d% \(90% interval ", out), out
    assert f"probability that no label is wrong: {model.no_noise_proba_:.2f}" in out
    assert "calibration (empirical Bayes" in out and "theta (share of labels" in out
    assert "SNR (eta1/eta2):" in out and "noise grade" in out
    assert "eta: [" in out and "omega: [" in out
    # The default preset fits trees with per-leaf weights, the first an intercept.
    assert "base learners: trees of up to 8 leaves (per-leaf weights" in out
    assert "trees: 8 (the first an intercept, a one-leaf tree; then 7 grown trees)" in out
    assert "first 3 of 8 trees" in _flat(out) and "stumps" not in out
    assert "f0" in out  # the trees split on the informative feature
    # The final fit's trajectory is the core model's log evidence, not an inner loop's ELBO.
    assert "ELBO trajectory (final fit: exact log evidence of the core model" in out
    assert "noise statistics come from cross-fitting" in out
    assert "fell during the inner loop" not in out
    model = joblib.load(model_file)
    last = [trace[-1] for trace in model.elbo_]
    assert f"{last[0]:.8g}" in out and f"{last[-1]:.8g}" in out
    assert "Cross-fitted log-likelihood" in out
    assert f"{model.cv_log_likelihood_[-1]:.8g} at the chosen 8 rounds" in out


def test_inspect_paper_model(paper_model_file, capsys):
    capsys.readouterr()
    assert main(["inspect", str(paper_model_file), "--stumps", "3"]) == 0
    out = capsys.readouterr().out
    assert "preset: paper (noise_fit: in-sample" in out and "rounds: 8\n" in out
    assert "alpha: approx" in out
    assert "share of wrong labels: " in out and "(no interval)" in out  # NaN-safe
    assert "not calibrated (preset='paper')" in out and "nan%" not in out.lower()
    assert "ELBO trajectory (value after each round's last inner iteration" in out
    assert "fell during the inner loop" in out
    assert "Cross-fitted log-likelihood" not in out
    # The paper preset fits decision stumps: listed as before.
    assert "base learners: decision stumps" in out
    assert "first 3 of 8 stumps, h(x) = polarity if x[feature] > threshold" in out
    model = joblib.load(paper_model_file)
    header = next(i for i, line in enumerate(out.splitlines()) if "polarity   alpha" in line)
    rows = [line.split() for line in out.splitlines()[header + 1 : header + 4]]
    assert [row[0] for row in rows] == ["1", "2", "3"]
    for row, stump, alpha in zip(rows, model.estimators_, model.alphas_, strict=False):
        assert row[1] == ["f0", "f1"][stump.feature]
        assert row[2] == f"{stump.threshold:.6g}" and row[3] == f"{stump.polarity:+d}"
        assert row[4] == f"{alpha:.4g}"
        assert row[5] == ("above" if stump.missing_right else "below")
    assert "top features" not in out and "leaves per tree" not in out


# ------------------------------------------------------------------------------------------ trees
@pytest.fixture
def xor_csv(tmp_path: Path) -> Path:
    """An interaction (label = f0 * f1 > 0): no stump fits it, a 4-leaf tree does."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(200, 3))
    label = (X[:, 0] * X[:, 1] > 0).astype(int)
    path = tmp_path / "xor.csv"
    pd.DataFrame({"f0": X[:, 0], "f1": X[:, 1], "f2": X[:, 2], "label": label}).to_csv(
        path, index=False
    )
    return path


def _tree_args(data: Path, model: Path, *extra: str) -> list[str]:
    return ["fit", str(data), "--target", "label", "-o", str(model), "--n-estimators", "20", *extra]


def test_fit_tree_options_reach_the_estimator(xor_csv, tmp_path, capsys):
    model_path = tmp_path / "trees.joblib"
    tree_options = ["--max-leaf-nodes", "4", "--min-samples-leaf", "5"]
    assert main(_tree_args(xor_csv, model_path, *tree_options, "--max-depth", "3")) == 0
    out = _flat(capsys.readouterr().out)
    assert (
        "base learners: trees of up to 4 leaves (per-leaf weights; depth at most 3; at least 5 "
        "rows per leaf)"
    ) in out
    model = joblib.load(model_path)
    params = model.get_params()
    expected = {"max_leaf_nodes": 4, "max_depth": 3, "min_samples_leaf": 5, "leaf_weights": None}
    assert {key: params[key] for key in expected} == expected
    plan = model.plan_
    assert (plan.max_leaf_nodes, plan.max_depth, plan.min_samples_leaf) == (4, 3, 5)
    assert plan.leaf_weights == "per-leaf" and not plan.stumps
    leaves = [learner.n_leaves for learner in model.estimators_]
    assert leaves[0] == 1 and max(leaves) == 4  # an intercept, then trees of up to 4 leaves
    # The model of the same VIBoostClassifier in Python.
    frame = pd.read_csv(xor_csv)
    X, y = frame[["f0", "f1", "f2"]], frame["label"]
    same = VIBoostClassifier(
        20, max_leaf_nodes=4, max_depth=3, min_samples_leaf=5, random_state=0
    ).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), same.predict_proba(X))
    assert model.score(X, y) > 0.8  # trees fit the interaction (stumps cannot)

    # --leaf-weights tied on the paper preset: Algorithm 1 with trees, no intercept.
    tied = tmp_path / "tied.joblib"
    args = _tree_args(xor_csv, tied, "--preset", "paper", *tree_options, "--leaf-weights", "tied")
    assert main(args) == 0
    assert "trees of up to 4 leaves (tied weights" in _flat(capsys.readouterr().out)
    model = joblib.load(tied)
    assert model.plan_.leaf_weights == "tied" and len(model.estimators_) == 20
    assert all(set(learner.leaf_values) <= {-1.0, 1.0} for learner in model.estimators_)


def test_inspect_tree_model(xor_csv, tmp_path, capsys):
    model_path = tmp_path / "trees.joblib"
    args = ["--max-leaf-nodes", "4", "--min-samples-leaf", "5", "--no-noise-model"]
    assert main(_tree_args(xor_csv, model_path, *args)) == 0
    capsys.readouterr()
    assert main(["inspect", str(model_path), "--learners", "3", "--top-features", "2"]) == 0
    out = capsys.readouterr().out
    flat = _flat(out)
    model = joblib.load(model_path)
    n_trees = len(model.estimators_)
    leaves = np.array([learner.n_leaves for learner in model.estimators_])
    assert "base learners: trees of up to 4 leaves (per-leaf weights" in out
    assert f"trees: {n_trees} (the first an intercept, a one-leaf tree; then {n_trees - 1}" in out
    grown = leaves[1:]
    assert (
        f"leaves per tree: min {grown.min()}, median {np.median(grown):.4g}, mean "
        f"{grown.mean():.1f}, max {grown.max()}; {grown.sum():,} leaves in all"
    ) in out
    assert "depth per tree: min " in out
    # The top features by feature_importances_, as shares.
    importances = model.feature_importances_
    assert "top 2 of the " in flat and "by feature_importances_" in flat
    start = next(i for i, line in enumerate(out.splitlines()) if "importance" in line.split())
    rows = [line.split() for line in out.splitlines()[start + 1 : start + 3]]
    order = np.argsort(-importances, kind="stable")[:2]
    assert [row[1] for row in rows] == [["f0", "f1", "f2"][j] for j in order]
    assert [row[2] for row in rows] == [f"{importances[j]:.1%}" for j in order]
    assert {row[1] for row in rows} == {"f0", "f1"}  # the interaction's two features
    # The first trees: the intercept, then trees with their root split and leaf values.
    assert f"first 3 of {n_trees} trees" in flat
    lines = out.splitlines()
    header = next(
        i for i, line in enumerate(lines) if line.split()[:3] == ["round", "leaves", "depth"]
    )
    assert "root split" in lines[header] and "leaf values" in lines[header]
    table = lines[header + 1 : header + 4]
    assert table[0].split()[:3] == ["1", "1", "0"] and "(none: one leaf)" in table[0]
    root = model.estimators_[1].nodes[0]
    name = ["f0", "f1", "f2"][root["feature"]]
    assert f"{name} <= {root['threshold']:.6g}" in table[1]
    assert table[1].split()[1] == str(leaves[1])
    assert "first" in out and "stumps" not in out and "polarity" not in out
    assert "SNR: n/a" in out and "ELBO trajectory" in out

    # The plots of a tree model.
    plots = tmp_path / "plots"
    assert main(["inspect", str(model_path), "--plots", str(plots)]) == 0
    assert (plots / "elbo.png").read_bytes()[:4] == b"\x89PNG"


def test_tree_option_errors(xor_csv, tmp_path, capsys):
    model_path = tmp_path / "m.joblib"
    for bad, message in (
        (["--max-leaf-nodes", "1"], "argument --max-leaf-nodes: a tree needs at least 2 leaves"),
        (["--max-leaf-nodes", "many"], "expected an integer of at least 2, got 'many'"),
        (["--max-depth", "0"], "argument --max-depth: expected a depth of at least 1"),
        (["--min-samples-leaf", "0"], "argument --min-samples-leaf: expected a positive integer"),
        (["--leaf-weights", "both"], "argument --leaf-weights: invalid choice: 'both'"),
    ):
        assert main(_tree_args(xor_csv, model_path, *bad)) == 2
        err = capsys.readouterr().err
        assert "usage: viboost fit" in err and message in err, (bad, err)
        assert "Traceback" not in err
    # The exhaustive search builds stumps only: a usage error before any fitting, naming a fix.
    code = main(_tree_args(xor_csv, model_path, "--max-bins", "none"))
    _assert_error(
        capsys, code, "--max-bins none", "decision stumps only", "trees of up to 8 leaves",
        "--max-leaf-nodes 2 --leaf-weights tied",
    )  # fmt: skip
    assert not model_path.exists()
    stumps = ["--max-bins", "none", "--max-leaf-nodes", "2", "--leaf-weights", "tied"]
    assert main(_tree_args(xor_csv, model_path, *stumps)) == 0
    assert "base learners: decision stumps" in _flat(capsys.readouterr().out)
    # An option stumps ignore gets a note.
    args = _tree_args(xor_csv, model_path, "--preset", "paper", "--min-samples-leaf", "5")
    assert main(args) == 0
    assert "note: --min-samples-leaf has no effect on decision stumps" in capsys.readouterr().err
    # noise shares the options.
    args = ["noise", str(xor_csv), "--target", "label", "--preset", "paper", "--top", "2"]
    assert main([*args, "--n-estimators", "5", "--max-leaf-nodes", "4"]) == 0
    assert "5 rounds of trees of up to 4 leaves (tied weights" in _flat(capsys.readouterr().out)
    assert main([*args, "--max-leaf-nodes", "0"]) == 2
    assert "usage: viboost noise" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- noise
def _table_rows(out: str) -> list[list[str]]:
    """The rows of the printed ranking (after its header line)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "row"])
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def test_noise_ranks_flipped_row_first(easy_csv, tmp_path, capsys):
    out_csv = tmp_path / "ranking.csv"
    args = ["noise", str(easy_csv), "--target", "label", "--top", "5", "--n-estimators", "10"]
    assert main([*args, "-o", str(out_csv)]) == 0
    out = capsys.readouterr().out
    flat = _flat(out)
    assert "P(label wrong)" in out
    assert re.search(r"Estimated share of wrong labels: \d+\.\d% \(90% interval ", flat), out
    assert re.search(r"true 0 rows labelled 1: \d+\.\d% \(90% interval ", flat), out
    ranking = pd.read_csv(out_csv)
    # (One wrong label in 120 after 10 rounds: the posterior gives "no noise" about even odds,
    # so the flipped row tops the ranking with P(label wrong) near 0.4 and may not be flagged.)
    n_issues = int(ranking["issue"].sum())
    assert f"Rows flagged as issues (P(label wrong) > 0.5): {n_issues}." in flat
    assert list(ranking.columns) == [
        "rank",
        "row",
        "label",
        "mislabel_proba",
        "label_quality",
        "issue",
    ]
    assert len(ranking) == 120
    assert sorted(ranking["row"]) == list(range(1, 121))  # 1-based data rows
    assert ranking["mislabel_proba"].is_monotonic_decreasing
    np.testing.assert_allclose(ranking["label_quality"], 1.0 - ranking["mislabel_proba"])
    assert ranking["issue"].dtype == bool
    np.testing.assert_array_equal(ranking["issue"], ranking["mislabel_proba"] > 0.5)
    assert FLIPPED_ROW + 1 in ranking["row"].head(3).tolist()

    # The numbers are those of viboost.noise on the same (seeded) fit.
    from viboost.noise import estimate_flip_rate, label_quality_scores

    frame = pd.read_csv(easy_csv)
    X, y = frame[["f0", "f1"]], frame["label"]
    model = VIBoostClassifier(10, random_state=0).fit(X, y)
    quality = label_quality_scores(X, y, estimator=model)
    np.testing.assert_allclose(ranking.sort_values("row")["label_quality"], quality)
    estimate = estimate_flip_rate(X, y, estimator=model)
    lo, hi = estimate.interval
    assert f"{estimate.rate:.1%} (90% interval {lo:.1%}-{hi:.1%})" in flat

    table = _table_rows(out)
    assert len(table) == 5
    assert str(FLIPPED_ROW + 1) in [row[1] for row in table[:3]]


def test_noise_paper_preset_is_not_calibrated(easy_csv, capsys):
    args = ["noise", str(easy_csv), "--target", "label", "--top", "3", "--preset", "paper"]
    assert main([*args, "--n-estimators", "10"]) == 0
    out = capsys.readouterr().out
    flat = _flat(out)
    assert "preset 'paper'" in flat and "10 rounds" in flat
    assert "a ranking statistic, not calibrated (preset='paper'), with no interval" in flat
    assert "Rows flagged as issues" in flat and "interval" not in flat.replace("no interval", "")
    assert len(_table_rows(out)) == 3


# ------------------------------------------------------------------------------------------ demo
def _has_lightgbm() -> bool:
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        return False
    return True


def test_demo_small(capsys):
    assert main(["demo", "--n-estimators", "5", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    flat = _flat(out)
    assert "test error" in out and "fit time" in out
    models = [line.split()[0] for line in out.splitlines() if re.search(r"%\s+[\d.]+ s$", line)]
    expected = ["VIBoost", "AdaBoost", *(["LightGBM"] if _has_lightgbm() else [])]
    assert models == expected
    if not _has_lightgbm():
        assert "LightGBM skipped" in flat and "pip install" in flat
    assert "460 rows" in flat and "92 labels flipped" in flat
    assert "5 rounds of decision stumps" in flat and "chosen by cross-fitting" in flat
    assert re.search(r"VIBoost \(preset 'robust'\): (\d+) rounds of .*, refitted on all rows "
                     r"from the (\d+) chosen by cross-fitting", flat)  # fmt: skip
    assert re.search(r"Estimated flip rate: \d+\.\d% \(90% interval [^)]*\); true: 20%\.", flat)
    assert re.search(r"true: 20%\. Probability that no label is wrong: [01]\.\d\d\.", flat), flat
    assert "Of the top-92 rows ranked by P(label wrong) (mislabel_proba_)" in flat
    assert "a random ranking would get 20%" in flat
    assert "Wall time" in out


def test_demo_without_lightgbm(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # import lightgbm raises ImportError
    assert main(["demo", "--n-estimators", "3", "--seed", "1", "--top", "10"]) == 0
    flat = _flat(capsys.readouterr().out)
    assert "LightGBM skipped: lightgbm is not installed" in flat
    assert "pip install 'viboost[demo]'" in flat
    assert "AdaBoost: 3 rounds" in flat and "Of the top-10 rows" in flat


def test_demo_top_out_of_range(capsys):
    code = main(["demo", "--n-estimators", "1", "--top", "10000"])
    _assert_error(capsys, code, "--top")


# ---------------------------------------------------------------------------------------- errors
def test_unknown_target_column(easy_csv, tmp_path, capsys):
    code = main(["fit", str(easy_csv), "--target", "nope", "-o", str(tmp_path / "m.joblib")])
    _assert_error(capsys, code, "no column 'nope'", "'f0', 'f1', 'label'")
    assert not (tmp_path / "m.joblib").exists()


def test_non_numeric_column(tmp_path, capsys):
    # Text columns are read as categorical features (with a note); the reader still refuses
    # them on request, and a column of too many categories is an error naming it.
    data = tmp_path / "text.csv"
    data.write_text("f0,colour,label\n1,red,0\n2,blue,1\n3,red,1\n")
    table = read_table_checked(data, "label", non_numeric="categorical")
    assert list(table.X.columns) == ["f0", "colour"]
    assert any(
        "'colour'" in note and "fitted as categorical features" in note for note in table.notes
    )
    with pytest.raises(ValueError, match="non-numeric feature column.*'colour'"):
        read_table_checked(data, "label")
    many = tmp_path / "many.csv"
    rows = "".join(f"{i},c{i},{i % 2}\n" for i in range(300))
    many.write_text("f0,code,label\n" + rows)
    code = main(["fit", str(many), "--target", "label", "-o", str(tmp_path / "m.joblib")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "viboost: error: Categorical column 'code' has 300 distinct categories" in err
    assert "max_bins=255" in err and "fitted as categorical features" in err  # note first
    assert not (tmp_path / "m.joblib").exists()
    code = main(
        [
            "fit",
            str(data),
            "--target",
            "label",
            "-o",
            str(tmp_path / "m.joblib"),
            "--categorical",
            "x",
        ]
    )
    _assert_error(capsys, code, "--categorical names 'x'", "'f0', 'colour'")


def test_missing_file(tmp_path, capsys):
    missing = tmp_path / "absent.csv"
    code = main(["fit", str(missing), "--target", "y", "-o", str(tmp_path / "m.joblib")])
    _assert_error(capsys, code, "file not found", "absent.csv")
    code = main(["inspect", str(tmp_path / "absent.joblib")])
    _assert_error(capsys, code, "model file not found")


def test_malformed_csv(tmp_path, capsys):
    data = tmp_path / "bad.csv"
    data.write_text("f0,label\n1,0\n2,1,7,8\n")
    code = main(["noise", str(data), "--target", "label"])
    _assert_error(capsys, code, "could not parse", "bad.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\x00\x01\x02PK\x03\x04" * 20)
    code = main(["fit", str(binary), "--target", "label", "-o", str(tmp_path / "m.joblib")])
    _assert_error(capsys, code, "not a CSV file")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code = main(["fit", str(empty), "--target", "label", "-o", str(tmp_path / "m.joblib")])
    _assert_error(capsys, code, "empty")


def test_model_from_an_older_layout_names_the_missing_module(tmp_path, capsys):
    # A pickle that refers to a class of a module viboost no longer has (protocol-0 GLOBAL).
    old = tmp_path / "old.joblib"
    old.write_bytes(b"cviboost.inference\nCleanLogOdds\n.")
    code = main(["inspect", str(old)])
    _assert_error(capsys, code, "saved by an older viboost", "viboost.inference", "refit")
    foreign = tmp_path / "foreign.joblib"
    foreign.write_bytes(b"cno_such_package_xyz\nThing\n.")
    code = main(["inspect", str(foreign)])
    _assert_error(capsys, code, "could not be loaded", "no_such_package_xyz")


def test_not_a_model_file(easy_csv, tmp_path, capsys):
    code = main(["predict", str(easy_csv), str(easy_csv)])
    _assert_error(capsys, code, "not a viboost model")
    other = tmp_path / "other.joblib"
    joblib.dump({"a": 1}, other)
    code = main(["inspect", str(other)])
    _assert_error(capsys, code, "not a viboost model", "dict")
    unfitted = tmp_path / "unfitted.joblib"
    joblib.dump(VIBoostClassifier(), unfitted)
    code = main(["inspect", str(unfitted)])
    _assert_error(capsys, code, "never fitted")


def test_usage_errors(capsys):
    assert main([]) == 2
    assert main(["fit", "data.csv"]) == 2  # no --target, no -o
    assert main(["demo", "--n-estimators", "0"]) == 2
    err = capsys.readouterr().err
    assert "usage: viboost" in err
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def test_output_must_not_clobber_input(easy_csv, capsys):
    before = easy_csv.read_bytes()
    code = main(["fit", str(easy_csv), "--target", "label", "-o", str(easy_csv)])
    _assert_error(capsys, code, "is the input file")
    assert easy_csv.read_bytes() == before


def test_output_directory_missing(easy_csv, tmp_path, capsys):
    code = _fit(easy_csv, tmp_path / "no" / "such" / "model.joblib")
    _assert_error(capsys, code, "does not exist")


# ------------------------------------------------------------------------------- atomic writing
def test_failed_model_write_keeps_old_file(easy_csv, tmp_path, capsys, monkeypatch):
    model_path = tmp_path / "model.joblib"
    model_path.write_bytes(b"old model")

    def failing_dump(value, handle, *args, **kwargs):
        handle.write(b"half a pickle")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(joblib, "dump", failing_dump)
    before = sorted(os.listdir(tmp_path))
    code = _fit(easy_csv, model_path)
    _assert_error(capsys, code, "No space left on device")
    assert model_path.read_bytes() == b"old model"
    assert sorted(os.listdir(tmp_path)) == before  # no temporary file left behind


def test_atomic_dump_model_failure_leaves_no_trace(tmp_path, monkeypatch):
    target = tmp_path / "model.joblib"
    atomic_dump_model({"version": 1}, target)
    assert joblib.load(target) == {"version": 1}

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("cannot pickle this")

    with pytest.raises(RuntimeError, match="cannot pickle"):
        atomic_dump_model([1, 2, Unpicklable()], target)
    assert joblib.load(target) == {"version": 1}
    assert os.listdir(tmp_path) == ["model.joblib"]


def test_failed_predict_write_keeps_old_file(model_file, easy_csv, tmp_path, capsys, monkeypatch):
    out_csv = tmp_path / "pred.csv"
    out_csv.write_text("old,content\n")
    monkeypatch.setattr(os, "replace", lambda *a, **k: (_ for _ in ()).throw(OSError("boom")))
    code = main(["predict", str(model_file), str(easy_csv), "-o", str(out_csv)])
    _assert_error(capsys, code, "boom")
    assert out_csv.read_text() == "old,content\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_text_keeps_mode(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    os.chmod(path, 0o640)
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert (path.stat().st_mode & 0o777) == 0o640


def test_read_csv_checked_features(easy_csv):
    X, y = read_csv_checked(easy_csv, "label")
    assert list(X.columns) == ["f0", "f1"] and y.name == "label"
    X, y = read_csv_checked(easy_csv, features=["f1", "f0"])
    assert list(X.columns) == ["f1", "f0"] and y is None


# ------------------------------------------------------------------------------------ python -m
def _run_command(
    args: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """Run a command in a subprocess, bounded by ``timeout`` seconds; never raises on its exit."""
    return subprocess.run(
        args, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def test_python_m_viboost_help():
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = _run_command([sys.executable, "-m", "viboost", "--help"], env, 60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: viboost")
    for command in ("fit", "predict", "inspect", "noise", "demo"):
        assert command in result.stdout


# ------------------------------------------------------------------------ issue 10: threads, exits
def test_jobs_option_gives_the_same_model(easy_csv, tmp_path, capsys):
    one, many = tmp_path / "one.joblib", tmp_path / "many.joblib"
    assert _fit(easy_csv, one, "--jobs", "1") == 0
    assert _fit(easy_csv, many, "--jobs", "-1") == 0
    a, b = joblib.load(one), joblib.load(many)
    assert a.n_jobs == 1 and b.n_jobs == -1
    np.testing.assert_array_equal(a.alphas_, b.alphas_)
    np.testing.assert_array_equal(a.clean_proba_, b.clean_proba_)
    out = tmp_path / "pred.csv"
    assert main(["predict", str(many), str(easy_csv), "-o", str(out), "--jobs", "2"]) == 0
    assert main(["noise", str(easy_csv), "--target", "label", "--jobs", "-1"]) == 0
    capsys.readouterr()
    assert main(["fit", str(easy_csv), "--target", "label", "-o", str(one), "--jobs", "0"]) == 2
    assert "0 threads" in capsys.readouterr().err


def test_numerical_failure_is_reported_with_exit_code_1(easy_csv, tmp_path, capsys, monkeypatch):
    def fail(self, *args, **kwargs):
        raise FloatingPointError("the log-density is not resolved in float64")

    monkeypatch.setattr(VIBoostClassifier, "fit", fail)
    code = main(["fit", str(easy_csv), "--target", "label", "-o", str(tmp_path / "m.joblib")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("viboost: error: FloatingPointError: the log-density is not resolved")
    assert "Traceback" not in err
    assert not (tmp_path / "m.joblib").exists()


def test_installed_command_exits_within_bound(easy_csv, tmp_path):
    # The installed console script (not main() in this process): fit, then a bad input; each
    # run is bounded, ends with its documented exit code and prints no traceback.
    env = {**os.environ, "VIBOOST_QUIET_COMPILE": "1"}
    # The script of the environment running the tests (next to its python), else the PATH's.
    beside = Path(sys.executable).with_name("viboost")
    command = str(beside) if beside.exists() else shutil.which("viboost")
    assert command is not None, "the viboost command is not installed"
    model = tmp_path / "model.joblib"
    fit = [command, "fit", str(easy_csv), "--target", "label", "-o", str(model)]
    ok = _run_command([*fit, "--jobs", "-1"], env, 240)
    assert ok.returncode == 0, ok.stderr
    assert model.exists()
    bad = _run_command([*fit[:3], "--target", "nope", "-o", str(model)], env, 240)
    assert bad.returncode == 2
    assert bad.stderr.startswith("viboost: error: ") and "Traceback" not in bad.stderr


# ---------------------------------------------- issue 14: file formats, columns, options, labels
def _viboost(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the installed ``viboost`` console script (bounded by 120 s)."""
    beside = Path(sys.executable).with_name("viboost")
    command = str(beside) if beside.exists() else shutil.which("viboost")
    assert command is not None, "the viboost command is not installed"
    env = {**os.environ, "VIBOOST_QUIET_COMPILE": "1", **(env or {})}
    return _run_command([command, *map(str, args)], env, 120)


def _assert_cli_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("viboost: error: "), result.stderr
    assert "Traceback" not in result.stderr and "np." not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


@pytest.fixture
def mail_frame() -> pd.DataFrame:
    """60 rows: an id column, two features and a binary label (spam = f0 > 0)."""
    rng = np.random.default_rng(1)
    n = 60
    f0 = rng.uniform(-1, 1, n)
    return pd.DataFrame(
        {
            "email": [f"m{i:03d}" for i in range(n)],
            "f0": f0,
            "f1": rng.normal(size=n),
            "label": np.where(f0 > 0, "spam", "ham"),
        }
    )


def test_sniff_delimiter_and_sep_option(tmp_path, mail_frame):
    from viboost._utils.io import sniff_delimiter

    assert sniff_delimiter("make;address;spam\n0,5;1;0\n1;2,25;1\n") == ";"
    assert sniff_delimiter("a\tb,c\tlabel\n1\t2\t0\n") == "\t"
    assert sniff_delimiter("a|b\n1|2\n") == "|" and sniff_delimiter("f0,label\n1,0\n") == ","
    assert sniff_delimiter("f0,label\n1,0\n2,1,7,8\n") == ","  # malformed: still a comma
    semi = tmp_path / "semi.csv"
    mail_frame.to_csv(semi, sep=";", index=False)
    data = read_table_checked(semi, "label", id_col="email")
    assert data.sep == ";" and list(data.X.columns) == ["f0", "f1"]
    # An explicit --sep wins over sniffing: the issue's old message, on purpose.
    result = _viboost("fit", semi, "--target", "label", "-o", tmp_path / "m.joblib", "--sep", ",")
    _assert_cli_error(result, "has no column 'label'", "'email;f0;f1;label'")


def test_installed_fit_tab_file_with_options(tmp_path, mail_frame):
    # A tab-separated file, sniffed; the id and index columns are not features; every
    # hyperparameter option reaches the estimator.
    data = tmp_path / "train.tsv"
    mail_frame.assign(key=np.arange(100, 160)).to_csv(data, sep="\t", index=False)
    model_path = tmp_path / "model.joblib"
    result = _viboost(
        "fit", data, "--target", "label", "-o", model_path, "--id", "email",
        "--index-col", "key", "--preset", "paper", "--n-estimators", "5",
        "--learning-rate", "0.5", "--cv", "3", "--max-bins", "16", "--n-iter-no-change", "none",
        "--alpha", "exact", "--noise-fit", "in-sample", "--no-noise-model", "--random-state", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    flat = _flat(result.stdout)
    assert "60 rows x 2 features" in flat
    assert "not used as features: 'key' (row index), 'email' (--id)" in flat
    model = joblib.load(model_path)
    assert list(model.feature_names_in_) == ["f0", "f1"]
    params = model.get_params()
    expected = {
        "preset": "paper", "n_estimators": 5, "learning_rate": 0.5, "cv": 3, "max_bins": 16,
        "n_iter_no_change": None, "alpha": "exact", "noise_fit": "in-sample",
        "noise_model": False, "random_state": 3,
    }  # fmt: skip
    assert {key: params[key] for key in expected} == expected
    assert len(model.estimators_) == 5


def test_installed_noise_semicolon_index_id_positive(tmp_path, mail_frame):
    # The issue's case: a semicolon file, written by pandas with its index (an empty header),
    # three classes fitted one-vs-rest with --positive; rows are numbered from 1, ids pass
    # through to the table and the output file.
    frame = mail_frame.copy()
    frame.loc[frame["f1"] > 1.0, "label"] = "ads"
    assert frame["label"].nunique() == 3
    data = tmp_path / "mail.csv"
    frame.to_csv(data, sep=";")  # index=True: a leading column with an empty header
    out = tmp_path / "ranking.csv"
    result = _viboost(
        "noise", data, "--target", "label", "--id", "email", "--positive", "spam", "--top", "4",
        "--preset", "paper", "--n-estimators", "5", "-o", out,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "viboost: note: " in result.stderr and "used as the row index" in result.stderr
    assert "rows are numbered from 1" in _flat(result.stdout)
    table = _table_rows(result.stdout)
    assert len(table) == 4
    header = next(line.split() for line in result.stdout.splitlines() if "rank" in line.split())
    assert header[:4] == ["rank", "row", "email", "label"]
    ranking = pd.read_csv(out)
    assert list(ranking.columns[:4]) == ["rank", "row", "email", "label"]
    assert sorted(ranking["row"]) == list(range(1, 61))
    # Row n is the n-th data row after the header, and its id is that row's.
    np.testing.assert_array_equal(ranking["email"], frame["email"].to_numpy()[ranking["row"] - 1])
    assert set(ranking["label"]) == {"spam", "(other)"}
    for row in table:
        assert row[2] == frame["email"].iloc[int(row[1]) - 1]


def test_installed_predict_parquet_with_id(tmp_path, mail_frame):
    pytest.importorskip("pyarrow")
    train = tmp_path / "train.csv"
    mail_frame.to_csv(train, index=False)
    model_path = tmp_path / "model.joblib"
    args = ["--target", "label", "--id", "email", "--preset", "paper", "--n-estimators", "5"]
    assert main(["fit", str(train), "-o", str(model_path), *args]) == 0
    parquet = tmp_path / "test.data"  # no suffix: found by its magic bytes PAR1
    mail_frame.iloc[::-1].to_parquet(parquet, index=False)
    out = tmp_path / "pred.csv"
    result = _viboost("predict", model_path, parquet, "--id", "email", "-o", out)
    assert result.returncode == 0, result.stderr
    predicted = pd.read_csv(out)
    assert list(predicted.columns) == ["email", "prediction", "proba_ham", "proba_spam"]
    assert predicted["email"].tolist() == mail_frame["email"].iloc[::-1].tolist()
    model = joblib.load(model_path)
    expected = model.predict_proba(mail_frame.iloc[::-1][["f0", "f1"]])
    np.testing.assert_allclose(predicted[["proba_ham", "proba_spam"]], expected)


def test_installed_parquet_without_pyarrow(tmp_path, mail_frame):
    # A pyarrow that cannot be imported, shadowing the real one: a clear error naming the extra.
    fake = tmp_path / "fake"
    (fake / "pyarrow").mkdir(parents=True)
    (fake / "pyarrow" / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    data = tmp_path / "train.parquet"
    data.write_bytes(b"PAR1" + b"\x00" * 32 + b"PAR1")
    pythonpath = os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")])
    result = _viboost(
        "fit", data, "--target", "label", "-o", tmp_path / "m.joblib",
        env={"PYTHONPATH": pythonpath},
    )  # fmt: skip
    _assert_cli_error(result, "is a Parquet file", 'pip install "viboost[parquet]"')


def test_installed_label_errors_are_plain(tmp_path):
    one = tmp_path / "one.csv"
    one.write_text("f0,label\n0.5,1\n1.5,1\n2.5,1\n")
    result = _viboost("fit", one, "--target", "label", "-o", tmp_path / "m.joblib")
    _assert_cli_error(result, "has only one class (1, in all 3 rows)", "two or more classes")
    three = tmp_path / "three.csv"
    three.write_text("f0\tlabel\n0.5\t1\n1.5\t2\n2.5\t3\n3.5\t2\n")
    result = _viboost("noise", three, "--target", "label")
    _assert_cli_error(
        result, "has 3 classes, and classes 1, 3 have a single row each", "at least 2 rows"
    )
    assert "OneVsRest" not in result.stderr
    assert not (tmp_path / "m.joblib").exists()


def test_more_than_two_classes_and_positive(tmp_path, capsys):
    three = tmp_path / "three.csv"
    three.write_text("f0,label\n" + "".join(f"{i / 10},{i % 3}\n" for i in range(30)))
    model_path = tmp_path / "m.joblib"
    args = ["fit", str(three), "--target", "label", "-o", str(model_path)]
    # Three classes are fitted natively (issue 23), by the robust preset.
    assert main([*args, "--n-estimators", "5"]) == 0
    assert "3 classes: 0, 1, 2" in _flat(capsys.readouterr().out)
    assert list(joblib.load(model_path).classes_) == [0, 1, 2]
    # The paper preset (the in-sample noise model) fits two classes: a clear error.
    code = main([*args, "--preset", "paper", "--n-estimators", "3"])
    err = _assert_error(capsys, code, "has 3 classes (0, 1, 2)", "--preset paper", "--positive")
    assert "OneVsRest" not in err and "np." not in err
    code = main([*args, "--noise-fit", "in-sample"])
    _assert_error(capsys, code, "--noise-fit in-sample", "two classes only")
    # --positive still fits one label against the others (a two-class model).
    assert main([*args, "--positive", "2", "--preset", "paper", "--n-estimators", "3"]) == 0
    assert "classes (other) and 2; 2 is the positive class" in _flat(capsys.readouterr().out)
    assert list(joblib.load(model_path).classes_) == ["(other)", "2"]
    code = main([*args, "--positive", "7"])
    _assert_error(capsys, code, "--positive 7: no row has that label", "its labels are 0, 1, 2")


def test_input_option_errors(tmp_path, mail_frame, capsys):
    data = tmp_path / "mail.csv"
    mail_frame.to_csv(data, index=False)
    fit = ["fit", str(data), "--target", "label", "-o", str(tmp_path / "m.joblib")]
    _assert_error(capsys, main([*fit, "--id", "nope"]), "no column 'nope' (--id)", "'email'")
    _assert_error(capsys, main([*fit, "--index-col", "label"]), "is the target column")
    _assert_error(capsys, main([*fit, "--id", "f0", "--index-col", "f0"]), "the same column")
    # Without --id the text column is a categorical feature, and a note says how to set it
    # aside; refused on request, with the same advice.
    notes = read_table_checked(data, "label", non_numeric="categorical").notes
    assert any("'email'" in note and "--id" in note for note in notes)
    with pytest.raises(ValueError, match="non-numeric feature column.*'email'.*--id"):
        read_table_checked(data, "label")
    bads = (["--sep", ";;"], ["--max-bins", "300"], ["--cv", "1"], ["--cv", "five"])
    for bad in (*bads, ["--learning-rate", "0"]):
        assert main([*fit, *bad]) == 2
    assert "expected" in capsys.readouterr().err
    written = tmp_path / "indexed.csv"
    mail_frame.to_csv(written)  # a leading 'Unnamed: 0' column
    X, _ = read_csv_checked(written, "label", features=["Unnamed: 0", "f0"])
    assert list(X.columns) == ["Unnamed: 0", "f0"]  # an older model's feature stays one
    data = read_table_checked(written, "label", id_col="email")
    assert data.index_col == "Unnamed: 0" and list(data.X.columns) == ["f0", "f1"]
    assert data.notes and "row index" in data.notes[0]


def test_installed_command_writes_plots(easy_csv, tmp_path):
    """`viboost noise --plots DIR` and `viboost inspect MODEL --plots DIR` write PNG files."""
    model = tmp_path / "model.joblib"
    assert _fit(easy_csv, model, "--preset", "paper", "--n-estimators", "8") == 0
    for args, directory in (
        (["inspect", str(model)], tmp_path / "inspect_plots"),
        (
            ["noise", str(easy_csv), "--target", "label", "--preset", "paper",
             "--n-estimators", "8"],
            tmp_path / "noise_plots",
        ),
    ):  # fmt: skip
        done = _viboost(*args, "--plots", directory)
        assert done.returncode == 0, done.stderr
        pngs = sorted(p.name for p in directory.glob("*.png"))
        assert {"elbo.png", "mislabel_proba.png", "suspects.png"} <= set(pngs), pngs
        assert all((directory / name).read_bytes()[:4] == b"\x89PNG" for name in pngs)
        assert f"plots to {directory}" in done.stdout


# ------------------------------------------------------------------------ issue 23: K classes
@pytest.fixture
def three_csv(tmp_path: Path) -> Path:
    """150 rows of three classes (ant, bee, cat by bands of f0, with gaps between them), an id
    column, and the labels of two rows in the middle of a band moved to another class."""
    rng = np.random.default_rng(0)
    n = 150
    f0 = rng.integers(-1, 2, n) + rng.uniform(-0.35, 0.35, n)
    f0[[10, 40]] = [-1.0, 1.0]
    label = np.array(["ant", "bee", "cat"])[np.digitize(f0, [-0.5, 0.5])]
    label[[10, 40]] = ["bee", "ant"]
    frame = pd.DataFrame(
        {"id": [f"r{i}" for i in range(n)], "f0": f0, "f1": rng.normal(size=n), "label": label}
    )
    path = tmp_path / "three.csv"
    frame.to_csv(path, index=False)
    return path


def test_k_class_fit_predict_inspect(three_csv, tmp_path, capsys):
    model_path = tmp_path / "three.joblib"
    args = ["fit", str(three_csv), "--target", "label", "--id", "id", "-o", str(model_path)]
    assert main(args) == 0
    out = _flat(capsys.readouterr().out)
    assert "(target 'label', 3 classes: ant, bee, cat)" in out
    assert "one per class in each round" in out and "positive class" not in out
    assert re.search(r"Estimated share of wrong labels \d+\.\d% \(90% interval ", out), out
    assert re.search(r"ant \d+\.\d%, bee \d+\.\d%, cat \d+\.\d%", out), out
    model = joblib.load(model_path)
    assert f"Probability that no label is wrong: {model.no_noise_proba_:.2f}." in out
    assert list(model.classes_) == ["ant", "bee", "cat"]
    assert model.noise_calibration_ is not None

    # predict: the predicted class and one probability column per class, named after it.
    assert main(["predict", str(model_path), str(three_csv), "--id", "id"]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(printed.columns) == ["id", "prediction", "proba_ant", "proba_bee", "proba_cat"]
    X = pd.read_csv(three_csv)[["f0", "f1"]]
    np.testing.assert_array_equal(printed["prediction"], model.predict(X))
    np.testing.assert_allclose(
        printed[["proba_ant", "proba_bee", "proba_cat"]], model.predict_proba(X)
    )
    np.testing.assert_allclose(printed.filter(like="proba_").sum(axis=1), 1.0)

    # inspect: the classes, the flip rate of each true class, the noise matrix and the trees
    # listed by round and class.
    plots = tmp_path / "plots"
    assert main(["inspect", str(model_path), "--learners", "4", "--plots", str(plots)]) == 0
    out = capsys.readouterr().out
    assert "classes: ant, bee, cat (3 classes: one tree per class in each round)" in out
    assert "noise matrix P(given label | true class)" in out
    for name in ("ant", "bee", "cat"):
        assert re.search(rf"true {name}: \d+\.\d% \(90% interval ", out), out
    assert "pi (the classes of noise-type labels): ant " in out
    assert (
        f"trees: {3 * len(model.estimators_)} ({len(model.estimators_)} rounds x 3 classes" in out
    )
    header = next(
        line.split() for line in out.splitlines() if line.split()[:2] == ["round", "class"]
    )
    assert header[:3] == ["round", "class", "leaves"]
    assert "noise grade: n/a (K classes" in out
    assert "noise_matrix.png" in out and (plots / "noise_matrix.png").read_bytes()[:4] == b"\x89PNG"


def test_k_class_fit_takes_mislabeled(three_csv, tmp_path, capsys):
    model_path = tmp_path / "three.joblib"
    args = ["fit", str(three_csv), "--target", "label", "--id", "id", "-o", str(model_path)]
    assert main([*args, "--mislabeled", "weight", "--n-estimators", "20"]) == 0
    model = joblib.load(model_path)
    assert model.mislabeled == "weight" and model.cv_n_passes_ == 1
    # Each row counted phi_n of the noise model's mode (the reported clean_proba_ averages
    # over the noise posterior).
    labels = np.searchsorted(model.classes_, pd.read_csv(three_csv)["label"].to_numpy())
    refit_phi = model.noise_calibration_.refit_clean_proba(labels, model.cv_decision_function_)
    np.testing.assert_array_equal(model.refit_weight_, refit_phi)
    assert main([*args, "--mislabeled", "drop", "--n-estimators", "20"]) == 0
    assert joblib.load(model_path).mislabeled == "drop"
    assert main([*args, "--mislabeled", "remove"]) == 2
    assert "--mislabeled" in capsys.readouterr().err


def test_k_class_fit_takes_final_model(three_csv, tmp_path, capsys):
    model_path = tmp_path / "three.joblib"
    args = ["fit", str(three_csv), "--target", "label", "--id", "id", "-o", str(model_path)]
    assert main([*args, "--final-model", "fold-average", "--n-estimators", "20"]) == 0
    model = joblib.load(model_path)
    assert model.final_model == "fold-average"
    assert len(model.estimators_) == model.cv_n_splits_ * model.cv_best_rounds_
    assert "fold boosters" in capsys.readouterr().out
    assert main(["inspect", str(model_path)]) == 0
    assert f"the average of {model.cv_n_splits_} fold boosters" in capsys.readouterr().out
    assert main([*args, "--final-model", "bag"]) == 2
    assert "--final-model" in capsys.readouterr().err


def test_k_class_noise(three_csv, tmp_path, capsys):
    out_csv = tmp_path / "ranking.csv"
    args = ["noise", str(three_csv), "--target", "label", "--id", "id", "--top", "4"]
    assert main([*args, "-o", str(out_csv)]) == 0
    out = capsys.readouterr().out
    flat = _flat(out)
    assert "3 classes" in flat and "one per class in each round" in flat
    assert re.search(r"Estimated share of wrong labels: \d+\.\d% \(90% interval ", flat), out
    for name in ("ant", "bee", "cat"):
        assert re.search(rf"true {name}: \d+\.\d% \(90% interval ", flat), out
    # The noise matrix, given labels by rows, true classes by columns.
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:3] == ["given", "\\", "true"])
    assert lines[at].split()[3:] == ["ant", "bee", "cat"]
    matrix = np.array(
        [[float(v.rstrip("%")) for v in lines[at + 1 + i].split()[1:]] for i in range(3)]
    )
    assert [lines[at + 1 + i].split()[0] for i in range(3)] == ["ant", "bee", "cat"]
    np.testing.assert_allclose(matrix.sum(axis=0), 100.0, atol=0.2)

    ranking = pd.read_csv(out_csv)
    assert list(ranking.columns) == [
        "rank", "row", "id", "label", "mislabel_proba", "label_quality", "issue",
        "likely_true_label", "true_proba_ant", "true_proba_bee", "true_proba_cat",
    ]  # fmt: skip
    assert len(ranking) == 150 and sorted(ranking["row"]) == list(range(1, 151))
    assert ranking["mislabel_proba"].is_monotonic_decreasing
    true_proba = ranking[["true_proba_ant", "true_proba_bee", "true_proba_cat"]].to_numpy()
    np.testing.assert_allclose(true_proba.sum(axis=1), 1.0)
    at_label = true_proba[np.arange(150), np.searchsorted(["ant", "bee", "cat"], ranking["label"])]
    np.testing.assert_allclose(ranking["label_quality"], at_label, atol=1e-12)
    np.testing.assert_array_equal(
        ranking["likely_true_label"], np.array(["ant", "bee", "cat"])[true_proba.argmax(axis=1)]
    )
    # The two moved labels lead the ranking beside the two rows nearest a band's edge (rows 3
    # and 97, within 0.01 of the gap, where 150 rows leave the class uncertain); every other
    # row is far below. With 2 wrong labels in 150 the posterior keeps most of its mass at no
    # noise, so each moved row's label stays the likelier, its true class (ant, cat) next, and
    # the third class nowhere.
    assert sorted(ranking.head(4)["row"]) == [3, 11, 41, 97]
    assert ranking["mislabel_proba"].iloc[4] < 0.01 < 0.2 < ranking["mislabel_proba"].iloc[3]
    top = ranking[ranking["row"].isin([11, 41])].sort_values("row")
    assert top["label"].tolist() == ["bee", "ant"]
    true_of_top = top[["true_proba_ant", "true_proba_cat"]].to_numpy().diagonal()
    third = top[["true_proba_cat", "true_proba_bee"]].to_numpy().diagonal()
    assert np.all(true_of_top > 0.2) and np.all(third < 0.01)
    np.testing.assert_allclose(true_of_top, top["mislabel_proba"], atol=0.01)
    assert all(
        likely in (given, true)
        for likely, given, true in zip(
            top["likely_true_label"], top["label"], ["ant", "cat"], strict=True
        )
    )

    # The same numbers as the estimator's on the same (seeded) fit, with the CLI's defaults.
    frame = pd.read_csv(three_csv)
    model = VIBoostClassifier(random_state=0)
    model.fit(frame[["f0", "f1"]], frame["label"])
    by_row = ranking.sort_values("row")
    np.testing.assert_allclose(by_row[["true_proba_ant", "true_proba_bee", "true_proba_cat"]],
                               model.true_class_proba_)  # fmt: skip
    lo, hi = model.noise_rate_interval_
    assert f"{model.noise_rate_:.1%} (90% interval {lo:.1%}-{hi:.1%})" in flat

    table = _table_rows(out)
    assert len(table) == 4
    header = next(line.split() for line in lines if line.split()[:2] == ["rank", "row"])
    assert header == ["rank", "row", "id", "label", "likely", "true", "P(label", "wrong)"]
    assert {row[1] for row in table} == {"3", "11", "41", "97"}


def test_k_class_integer_labels_and_bad_input(tmp_path, capsys):
    rng = np.random.default_rng(3)
    f0 = rng.uniform(0, 4, 120)
    frame = pd.DataFrame({"f0": f0, "label": np.floor(f0).astype(int) * 10})
    data = tmp_path / "four.csv"
    frame.to_csv(data, index=False)
    model_path = tmp_path / "four.joblib"
    fit = ["fit", str(data), "--target", "label", "-o", str(model_path)]
    assert main([*fit, "--n-estimators", "20"]) == 0
    assert "4 classes: 0, 10, 20, 30" in _flat(capsys.readouterr().out)
    assert main(["predict", str(model_path), str(data)]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(printed.columns) == ["prediction", "proba_0", "proba_10", "proba_20", "proba_30"]
    # --no-noise-model: the core model, no noise statistics.
    assert main([*fit, "--n-estimators", "10", "--no-noise-model"]) == 0
    assert "Noise model off" in _flat(capsys.readouterr().out)
    assert main(["inspect", str(model_path)]) == 0
    assert "share of wrong labels: n/a (noise model off)" in capsys.readouterr().out
    # A class with a single row: a clear error before any fitting, with plain numbers.
    frame.loc[0, "label"] = 99
    frame.to_csv(data, index=False)
    code = main(fit)
    err = _assert_error(capsys, code, "has 5 classes, and class 99 has a single row", "at least 2")
    assert "np." not in err


def test_fit_defaults_are_the_estimators():
    # The command line fits what VIBoostClassifier() fits, unless an option says otherwise.
    from viboost.cli import build_parser
    from viboost.cli.common import build_estimator

    args = build_parser().parse_args(["fit", "data.csv", "--target", "y", "-o", "m.joblib"])
    built = build_estimator(args).get_params()
    default = VIBoostClassifier().get_params()
    different = {k for k in default if built[k] != default[k]}
    # Seeded (0), with a progress bar; --jobs defaults to the estimator's None (all cores).
    assert different == {"random_state", "verbose"}
    assert built["n_jobs"] is None and default["n_jobs"] is None
