"""The label-noise benchmark script runs end to end on tiny data (no shared data needed), and
the pieces of its multi-class part compute what they should."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "label_noise.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("label_noise_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_label_noise_benchmark_tiny(tmp_path: Path, capsys) -> None:
    # Breast cancer ships with scikit-learn; DNA would need ../shared/data, which data_dir
    # points away from, so it must be skipped with a note rather than fail.
    bench = _load_script()
    results = bench.run_benchmark(
        ["breast_cancer", "dna"],
        ["0", "20"],
        1,
        ["adaboost", "viboost"],
        out_dir=tmp_path,
        data_dir=tmp_path / "no-shared-data",
    )
    for name in ("label_noise.csv", "label_noise_summary.csv", "label_noise.md", "label_noise.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert not list(tmp_path.glob(".*.tmp*"))  # no temp file left behind
    out = capsys.readouterr()
    assert "skipping dna" in out.err
    assert "## breast_cancer" in out.out

    rows = pd.read_csv(tmp_path / "label_noise.csv", dtype={"setting": str})
    assert len(rows) == len(results) == 4
    assert set(rows["model"]) == {"adaboost", "viboost"}
    assert rows["note"].isna().all()
    assert rows["test_error"].between(0, 100).all()
    assert (rows.loc[rows.setting == "20", "n_flipped"] == round(0.2 * 284)).all()
    vb = rows[rows.model == "viboost"].set_index("setting")
    assert np.isnan(vb.loc["0", "auroc"]) and np.isnan(vb.loc["0", "precision_at_k"])
    assert 0.0 <= vb.loc["20", "auroc"] <= 1.0
    assert 0.0 <= vb.loc["20", "precision_at_k"] <= 1.0
    assert vb["rate_est"].between(0, 1).all() and vb["rate_abs_err"].between(0, 1).all()
    assert rows.loc[rows.model == "adaboost", "auroc"].isna().all()  # not a detector

    report = (tmp_path / "label_noise.md").read_text()
    assert "python benchmarks/label_noise.py" in report
    assert "## Targets" in report and "| breast_cancer | 20% |" in report

    # --reuse keeps the rows of the models not run again (adaboost here).
    bench.run_benchmark(["breast_cancer"], ["0"], 1, ["viboost"], out_dir=tmp_path, reuse=True)
    merged = pd.read_csv(tmp_path / "label_noise.csv", dtype={"setting": str})
    assert (merged.model == "adaboost").sum() == 2
    assert (merged.model == "viboost").sum() == 1


# The multi-class part: noise generators, true noise matrix, metrics, report, driver.


def test_move_to_other_class_moves_an_exact_share_to_other_classes() -> None:
    bench = _load_script()
    y = np.repeat(np.arange(4), 250)
    y_noisy, moved = bench.move_to_other_class(y, 0.2, 4, seed=3)
    assert moved.sum() == 200 and moved.dtype == bool
    assert np.all(y_noisy[moved] != y[moved]) and np.array_equal(y_noisy[~moved], y[~moved])
    assert set(np.unique(y_noisy)) <= {0, 1, 2, 3}
    offsets = (y_noisy[moved] - y[moved]) % 4  # all three other classes are drawn
    assert set(np.unique(offsets)) == {1, 2, 3} and np.bincount(offsets)[1:].min() > 40
    again, moved_again = bench.move_to_other_class(y, 0.2, 4, seed=3)
    assert np.array_equal(again, y_noisy) and np.array_equal(moved_again, moved)
    assert bench.move_to_other_class(y, 0.0, 4, seed=3)[1].sum() == 0
    assert bench.make_multiclass_noise(y, "30", 4, seed=3)[1].sum() == 300


def test_move_pairwise_moves_each_class_to_the_next() -> None:
    bench = _load_script()
    y = np.repeat(np.arange(3), [100, 50, 30])
    y_noisy, moved = bench.move_pairwise(y, 0.2, 3, seed=0)
    assert [int(moved[y == k].sum()) for k in range(3)] == [20, 10, 6]
    assert np.array_equal(y_noisy[moved], (y[moved] + 1) % 3)
    assert np.array_equal(y_noisy[~moved], y[~moved])
    _, moved_pair = bench.make_multiclass_noise(y, "pair", 3, seed=0)
    assert bench.PAIR_RATE == 0.2 and np.array_equal(moved_pair, moved)


def test_true_noise_matrix_and_its_error() -> None:
    bench = _load_script()
    y_true = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    y_given = np.array([0, 0, 0, 1, 1, 2, 2, 0])
    truth = bench.true_noise_matrix(y_true, y_given, 3)
    expected = np.array([[0.75, 0.0, 0.5], [0.25, 0.5, 0.0], [0.0, 0.5, 0.5]])
    np.testing.assert_allclose(truth, expected)
    np.testing.assert_allclose(truth.sum(axis=0), 1.0)
    estimate = np.array([[0.8, 0.1], [0.2, 0.9]])
    assert bench.noise_matrix_mae(np.eye(2), estimate) == pytest.approx(0.6 / 4)


def test_detection_metrics_by_hand() -> None:
    bench = _load_script()
    flipped = np.array([True, False, False, True])
    det = (np.array([0.9, 0.1, 0.8, 0.2]), 0.4, (0.3, 0.6), "test")
    got = bench.detection_metrics(flipped, det)
    assert got["auroc"] == pytest.approx(0.75)  # 3 of the 4 (flipped, kept) pairs ordered
    assert got["precision_at_k"] == pytest.approx(0.5)  # top 2: rows 0 (flipped) and 2
    assert got["rate_abs_err"] == pytest.approx(0.1) and got["covered"] == 1.0
    # The multi-class detectors map onto the same metrics.
    fitted = SimpleNamespace(
        classes_=np.arange(3),
        mislabel_proba_=det[0],
        noise_rate_=0.4,
        noise_rate_interval_=np.array([0.3, 0.6]),
        noise_matrix_=np.eye(3),
    )
    vb_det, matrix = bench.detect_viboost_multiclass(fitted)
    assert bench.detection_metrics(flipped, vb_det) == {**got, "noise_api": "mislabel_proba_"}
    assert np.array_equal(matrix, np.eye(3))


def test_cleanlab_rate_is_the_off_diagonal_mass_of_its_joint() -> None:
    # cleanlab is a benchmark dependency (the bench extra), not a test one.
    pytest.importorskip("cleanlab")
    bench = _load_script()
    # None for confident probabilities that agree with the labels.
    y = np.repeat(np.arange(3), 20)
    proba = np.full((60, 3), 0.05) + 0.85 * np.eye(3)[y]
    suspicion, rate, interval, _ = bench.cleanlab_detection(y, proba)
    assert rate == pytest.approx(0.0) and np.all(np.isnan(interval))
    assert np.allclose(suspicion, 0.1)


def _synthetic_multiclass_results(bench) -> pd.DataFrame:
    """Two splits of DNA at 0% and pairwise, all models; viboost misses some targets."""
    rows = []
    for split in (0, 1):
        for setting in ("0", "pair"):
            noisy = setting == "pair"
            for model, err, fit in (
                ("viboost", 6.0, 3.0),
                ("lgbm", 7.0, 1.0),
                ("hgb", 5.5 + split, 1.0),  # best peer: mean 6.0, a tie
                ("cleanlab", 6.5, 2.0),
                ("ovr-viboost", 8.0, 4.0),
            ):
                row = {"dataset": "dna", "setting": setting, "split": split, "model": model}
                row |= {"test_error": err + (1.0 if noisy and model == "viboost" else 0.0)}
                row |= {"fit_s": fit, "true_rate": 0.2 if noisy else 0.0}
                if model in bench.MC_DETECTORS:
                    vb = model == "viboost"
                    row |= {
                        "auroc": (0.95 if vb else 0.97) if noisy else np.nan,
                        "rate_est": 0.21 if vb else 0.25,
                        "rate_abs_err": 0.01 if vb else 0.05,
                        "nm_mae": 0.01 if vb else 0.03,
                        "covered": float(split == 0) if vb else np.nan,
                        "detect_s": 0.5,
                    }
                rows.append(row)
    return bench.tidy(pd.DataFrame(rows), bench.MULTICLASS)


def test_multiclass_report_on_synthetic_results() -> None:
    bench = _load_script()
    results = _synthetic_multiclass_results(bench)
    summary = bench.summarise(results, bench.MC_METRICS)
    table = bench.multiclass_table(summary, "dna")
    assert table.splitlines()[0].startswith("| setting | err viboost | err lgbm | err hgb |")
    assert "| 0% | 6.00 | 7.00 | 6.00 | 6.50 | 8.00 | - | - | 0.010 | 0.050 | 0.0100 |" in table
    assert "| pairwise 20% | 7.00 |" in table and "| 0.950 | 0.970 |" in table
    assert "| 0.50 | 3.0 | 2.0 |" in table  # coverage 1 of 2 splits; fit seconds

    targets = bench.multiclass_targets_table(summary)
    lines = {line.split(" | ")[1]: line for line in targets.splitlines()[2:]}
    zero, pair = lines["0%"], lines["pairwise 20%"]
    assert "| 6.00 vs hgb 6.00 | yes |" in zero  # a tie meets the error target
    assert "| - vs - | - |" in zero  # no AUROC without flips
    assert "| 0.010 | yes | 0.0100 vs 0.0150 | yes | 3.0 vs 2.0 | no (+1.0) |" in zero
    assert "| 7.00 vs hgb 6.00 | no (+1.00) | 0.950 vs 0.970 | no (+0.020) |" in pair
    assert bench.target_cell(np.nan, 2) == "-" and bench.target_cell(0.0, 2) == "yes"

    report = bench.multiclass_report(results, summary, "python benchmarks/label_noise.py -x")
    assert "This file: `python benchmarks/label_noise.py -x`; viboost " in report
    assert "## dna" in report and "Splits: 2." in report and "## Targets" in report
    assert "Failed fits: 0." in report and "1 `ie`, 2 `n`" in report
    assert "## satellite" not in report and "Models (each on all cores):" in report
    assert bench.plot(results, summary, bench.MULTICLASS) is not None


def test_multiclass_cli_rejects_the_other_parts_options() -> None:
    bench = _load_script()
    for argv in (
        ["--part", "multiclass", "--models", "adaboost"],
        ["--part", "multiclass", "--settings", "cc"],
        ["--part", "multiclass", "--reuse"],
        ["--settings", "pair"],
        ["--resume"],
        ["--threads", "1"],
    ):
        with pytest.raises(SystemExit):
            bench.main(argv)


def test_multiclass_benchmark_tiny_and_resume(tmp_path: Path, capsys) -> None:
    # A tiny stand-in for DNA (3 classes, 180 binary features) and a trivially small model.
    bench = _load_script()
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 30)
    X = (rng.random((90, 180)) < 0.2 + 0.6 * (np.arange(180) % 3 == y[:, None])).astype(int)
    frame = pd.DataFrame(X, columns=[f"V{i}" for i in range(1, 181)])
    frame["Class"] = np.array(bench.MC_CLASSES["dna"])[y]
    frame.to_csv(tmp_path / "dna.csv.gz", index=False)
    out = tmp_path / "out"
    kwargs = {"out_dir": out, "data_dir": tmp_path, "threads": 1}
    results = bench.run_multiclass_benchmark(
        ["dna", "satellite"], ["20", "pair"], 1, ["hgb"], **kwargs
    )
    assert len(results) == 2 and results["note"].isna().all()
    assert (results["n_flipped"] == [9, 9]).all()  # 20% of 45 rows; of 15 per class: 3 each
    for name in ("", "_summary"):
        assert (out / f"label_noise_multiclass{name}.csv").stat().st_size > 0
    assert "Models (here each fit on 1 thread(s)" in (out / "label_noise_multiclass.md").read_text()
    assert not list(out.glob(".*.tmp*"))
    err = capsys.readouterr().err
    assert (
        "skipping satellite" in err and "[2/2, " in err and "dna pairwise 20% split 0: hgb=" in err
    )

    # --resume keeps the rows there and runs only what is missing.
    bench.run_multiclass_benchmark(
        ["dna"], ["20", "pair"], 1, ["hgb", "lgbm"], resume=True, **kwargs
    )
    assert "2 tasks to run; 2 fits kept" in capsys.readouterr().err
    merged = pd.read_csv(out / "label_noise_multiclass.csv", dtype={"setting": str})
    assert len(merged) == 4 and set(merged["model"]) == {"hgb", "lgbm"}
    pd.testing.assert_series_equal(
        merged.loc[merged.model == "hgb", "test_error"].reset_index(drop=True),
        results["test_error"],
        check_names=False,
    )


def test_known_truth_part_draws_labels_flips_them_and_reports(tmp_path: Path, monkeypatch) -> None:
    """One known-truth fit: labels drawn from the smooth model, the flipped share known, the
    report's totals computed from the rows."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import label_noise_known_truth as kt
    row = kt.one_fit(("breast_cancer", False, "20", 0, str(tmp_path), ("hgb",)))
    assert row["true_rate"] == pytest.approx(0.2, abs=0.01)
    assert row["covered"] == (row["low"] <= row["true_rate"] <= row["high"])
    assert 0.0 <= row["viboost"] <= 1.0 and 0.0 <= row["hgb"] <= 1.0
    assert np.isnan(row["lgbm"])  # a peer not asked for
    clean = dict(row, setting="0", true_rate=0.0, rate=0.01, low=0.0, high=0.05, covered=True)
    text = kt.report(pd.DataFrame([row, clean]), "test")
    assert "clean fits whose interval reaches 0.01: 1.00 (1 fits" in text
    assert f"noisy fits: {float(row['covered']):.2f} (1 fits" in text
