"""Tests for the viboost command line (viboost.cli) and its safe file I/O (viboost._io)."""

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
from viboost._io import atomic_dump_model, atomic_write_text, read_csv_checked
from viboost.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"
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
    assert "preset 'robust'" in out and "8 rounds (chosen by cross-fitting" in out
    assert "Training accuracy" in out and str(model_path) in out
    assert re.search(r"Estimated share of wrong labels \d+\.\d% \(90% interval ", out), out
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
    assert "learning rate: 0.1, alpha: exact, noise model: on" in out
    assert "rounds: 8 (chosen by cross-fitting, at most 8)" in out
    assert "classes: 0, 1" in out
    assert re.search(r"share of wrong labels: \d+\.\d% \(90% interval ", out), out
    assert "calibration (empirical Bayes" in out and "theta (share of labels" in out
    assert "SNR (eta1/eta2):" in out and "noise grade" in out
    assert "eta: [" in out and "omega: [" in out
    assert "first 3 of 8 stumps" in out
    assert "f0" in out  # the first stump splits on the informative feature
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
    assert "Rows flagged as issues (P(label wrong) > 0.5): 1." in flat
    ranking = pd.read_csv(out_csv)
    assert list(ranking.columns) == [
        "rank",
        "row",
        "label",
        "mislabel_proba",
        "label_quality",
        "issue",
    ]
    assert len(ranking) == 120
    assert sorted(ranking["row"]) == list(range(120))
    assert ranking["mislabel_proba"].is_monotonic_decreasing
    np.testing.assert_allclose(ranking["label_quality"], 1.0 - ranking["mislabel_proba"])
    assert ranking["issue"].dtype == bool
    np.testing.assert_array_equal(ranking["issue"], ranking["mislabel_proba"] > 0.5)
    assert FLIPPED_ROW in ranking["row"].head(3).tolist()

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
    assert str(FLIPPED_ROW) in [row[1] for row in table[:3]]


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
    assert re.search(r"Estimated flip rate: \d+\.\d% \(90% interval [^)]*\); true: 20%\.", flat)
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
    data = tmp_path / "text.csv"
    data.write_text("f0,colour,label\n1,red,0\n2,blue,1\n3,red,1\n")
    code = main(["fit", str(data), "--target", "label", "-o", str(tmp_path / "m.joblib")])
    _assert_error(capsys, code, "non-numeric", "'colour'")


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
