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
                        "rate_lo": 0.15 if vb else np.nan,  # widths 0.1 and 0.2 (mean 0.15)
                        "rate_hi": (0.25 + 0.1 * split) if vb else np.nan,
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
    # rate err viboost, its interval's coverage (1 of 2 splits) and mean width, then cleanlab's
    assert "| rate err viboost | cover viboost | width viboost | rate err cleanlab |" in table
    row = (
        "| 0% | 6.00 | 7.00 | 6.00 | 6.50 | 8.00 | - | - | 0.010 | 0.50 | 0.150 | 0.050 | 0.0100 |"
    )
    assert row in table
    assert "| pairwise 20% | 7.00 |" in table and "| 0.950 | 0.970 |" in table
    assert "| 0.0100 | 0.0300 | 3.0 | 2.0 |" in table  # noise-matrix MAE; fit seconds

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
    assert "noisy fits (all settings but 0%): `viboost` 0.50 (2 fits; mean width 0.150)." in report
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


# The ``rfl`` peer: LightGBM on Robust-GBDT's Robust Focal Loss (benchmarks/robust_focal.py).

RFL_SCRIPT = SCRIPT.with_name("robust_focal.py")
RFL_PARAMS = [(0.5, 0.3), (0.0, 0.0), (0.0, 0.5), (2.0, 0.0), (1.0, 0.7)]


def _load_rfl():
    spec = importlib.util.spec_from_file_location("robust_focal_benchmark", RFL_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _central(f, x: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """First and second central differences of the elementwise function f at x."""
    up, mid, down = f(x + step), f(x), f(x - step)
    return (up - down) / (2 * step), (up - 2 * mid + down) / step**2


@pytest.mark.parametrize(("r", "q"), RFL_PARAMS)
def test_rfl_binary_derivatives_match_finite_differences(r: float, q: float) -> None:
    rf = _load_rfl()
    score = np.linspace(-6.0, 6.0, 49)
    for label in (0, 1):
        y = np.full(score.size, label)
        grad, hess = rf.binary_grad_hess(score, y, r, q, hess_floor=None)

        def loss(s: np.ndarray, y: np.ndarray = y) -> np.ndarray:
            return rf.binary_loss(s, y, r, q)

        d1, _ = _central(loss, score, 1e-5)
        _, d2 = _central(loss, score, 1e-3)
        np.testing.assert_allclose(grad, d1, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(hess, d2, rtol=1e-4, atol=1e-6)
    # The loss's value: the definition, written out directly at moderate scores.
    p = 1.0 / (1.0 + np.exp(-score))
    value = (1 - p) ** r * ((1 - p**q) / q if q > 0 else -np.log(p))
    np.testing.assert_allclose(rf.binary_loss(score, np.ones(score.size), r, q), value, rtol=1e-12)


def test_rfl_reduces_to_the_cross_entropy_at_r_q_zero() -> None:
    rf = _load_rfl()
    rng = np.random.default_rng(0)
    score, y = rng.normal(0, 4, 200), rng.integers(0, 2, 200)
    p = 1.0 / (1.0 + np.exp(-score))
    grad, hess = rf.binary_grad_hess(score, y, 0.0, 0.0, hess_floor=None)
    np.testing.assert_allclose(grad, p - y, atol=1e-12)
    np.testing.assert_allclose(hess, p * (1 - p), atol=1e-12)
    scores, labels = rng.normal(0, 3, (100, 4)), rng.integers(0, 4, 100)
    soft = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    grad, hess = rf.multiclass_grad_hess(scores, labels, 0.0, 0.0, hess_floor=None)
    np.testing.assert_allclose(grad, soft - np.eye(4)[labels], atol=1e-12)
    np.testing.assert_allclose(hess, soft * (1 - soft), atol=1e-12)


@pytest.mark.parametrize(("r", "q"), RFL_PARAMS)
def test_rfl_multiclass_derivatives_match_finite_differences(r: float, q: float) -> None:
    rf = _load_rfl()
    rng = np.random.default_rng(1)
    scores, y = rng.normal(0, 2, (30, 4)), rng.integers(0, 4, 30)
    grad, hess = rf.multiclass_grad_hess(scores, y, r, q, hess_floor=None)
    for k in range(4):
        unit = np.eye(4)[k]

        def along(t: np.ndarray, unit: np.ndarray = unit) -> np.ndarray:
            return rf.multiclass_loss(scores + t[:, None] * unit, y, r, q)

        d1, _ = _central(along, np.zeros(30), 1e-5)
        _, d2 = _central(along, np.zeros(30), 1e-3)
        np.testing.assert_allclose(grad[:, k], d1, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(hess[:, k], d2, rtol=1e-4, atol=1e-6)
    # Two classes: the K-class loss of scores (0, s) is the binary loss of s.
    s2 = np.column_stack([np.zeros(30), scores[:, 0]])
    y2 = y % 2
    np.testing.assert_allclose(
        rf.multiclass_loss(s2, y2, r, q), rf.binary_loss(scores[:, 0], y2, r, q), rtol=1e-12
    )


def test_rfl_finite_at_huge_scores_and_hessian_positive() -> None:
    rf = _load_rfl()
    score = np.array([-1000.0, -1000.0, 1000.0, 1000.0, 0.0])
    y = np.array([0, 1, 0, 1, 1])
    loss = rf.binary_loss(score, y)
    grad, hess = rf.binary_grad_hess(score, y)
    assert np.all(np.isfinite(loss)) and np.all(np.isfinite(grad)) and np.all(hess > 0)
    # Confidently wrong rows: the loss is bounded by 1 / q (the robustness), no overflow.
    assert loss[1] == pytest.approx(1 / rf.Q) and loss[2] == pytest.approx(1 / rf.Q)
    assert loss[0] == pytest.approx(0.0, abs=1e-12) and loss[3] == pytest.approx(0.0, abs=1e-12)
    scores = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 0.0], [0.0, 0.0, 0.0]])
    labels = np.array([1, 1, 2])
    loss = rf.multiclass_loss(scores, labels)
    grad, hess = rf.multiclass_grad_hess(scores, labels)
    assert np.all(np.isfinite(loss)) and np.all(np.isfinite(grad)) and np.all(hess > 0)
    assert loss[0] == pytest.approx(1 / rf.Q) and loss[1] == pytest.approx(0.0, abs=1e-12)
    # The exact Hessian is negative where the loss is concave (small p_t); the floor lifts it.
    rng = np.random.default_rng(2)
    score, y = rng.normal(0, 5, 500), rng.integers(0, 2, 500)
    exact = rf.binary_grad_hess(score, y, hess_floor=None)[1]
    floored = rf.binary_grad_hess(score, y)[1]
    assert (exact < 0).any() and floored.min() >= rf.HESS_FLOOR
    np.testing.assert_array_equal(floored, np.maximum(exact, rf.HESS_FLOOR))
    scores, labels = rng.normal(0, 5, (200, 3)), rng.integers(0, 3, 200)
    assert rf.multiclass_grad_hess(scores, labels)[1].min() >= rf.HESS_FLOOR


def _separable(n: int, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    if n_classes == 2:
        return X, (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return X, np.digitize(X[:, 0], np.quantile(X[:, 0], np.linspace(0, 1, n_classes + 1)[1:-1]))


def test_rfl_matches_lightgbm_with_the_cross_entropy() -> None:
    # r = q = 0 is LightGBM's own binary objective: the wrapper's labels, initial score (the
    # log prior odds, LightGBM's boost_from_average) and raw scores must reproduce it.
    pytest.importorskip("lightgbm")
    from lightgbm import LGBMClassifier

    rf = _load_rfl()
    X, y = _separable(300, 2, 3)
    y = np.where(np.random.default_rng(3).random(300) < 0.2, 1 - y, y)
    ours = rf.RobustFocalLGBM(0, r=0.0, q=0.0, hess_floor=None).fit(X, y)
    ref = LGBMClassifier(verbose=-1, n_jobs=1, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-9)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_rfl_fit_beats_a_coin_with_20_percent_flips(n_classes: int) -> None:
    pytest.importorskip("lightgbm")
    rf = _load_rfl()
    X, y = _separable(1000, n_classes, 0)
    names = np.array(["alpha", "beta", "gamma"])[:n_classes]  # any labels, not 0..K-1
    train, test = np.arange(500), np.arange(500, 1000)
    rng = np.random.default_rng(0)
    flip = rng.random(500) < 0.2
    y_noisy = y[train].copy()
    y_noisy[flip] = (y_noisy[flip] + rng.integers(1, n_classes, flip.sum())) % n_classes
    model = rf.RobustFocalLGBM(seed=0).fit(X[train], names[y_noisy])
    assert list(model.classes_) == list(names)
    predicted = model.predict(X[test])
    assert predicted.dtype == names.dtype and set(predicted) <= set(names)
    error = np.mean(predicted != names[y[test]])
    assert error < 0.15  # a coin: 1 - 1/K; the noise: 0.2
    proba = model.predict_proba(X[test])
    assert proba.shape == (500, n_classes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(names[proba.argmax(axis=1)], predicted)


def test_rfl_is_a_peer_of_both_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load_script()
    assert "rfl" in bench.MODELS and "rfl" in bench.MC_MODELS
    assert type(bench.make_model("rfl", 3)).__name__ == "RobustFocalLGBM"
    model = bench.make_multiclass_model("rfl", 3, threads=1)
    assert (model.seed, model.n_jobs) == (3, 1)
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # as when run from benchmarks/
    path = SCRIPT.with_name("label_noise_known_truth.py")
    spec = importlib.util.spec_from_file_location("known_truth", path)
    known = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(known)
    assert "rfl" in known.PEERS
    assert type(known.peer("rfl", 1)).__name__ == "RobustFocalLGBM"
    # Results written before rfl was a peer (no rfl column): nan, no crash.
    row = {"data": "dna", "part": "binary", "setting": "20", "seed": 0, "true_rate": 0.2}
    row |= {"rate": 0.18, "low": 0.1, "high": 0.3, "covered": True, "no_noise_proba": 0.01}
    row |= {"bayes_error": 0.1, "majority_error": 0.4, "viboost": 0.15, "viboost_seconds": 1.0}
    row |= {p: 0.2 for p in known.PEERS if p != "rfl"}
    report = known.report(pd.DataFrame([row]), "test")
    assert report.splitlines()[4].endswith("| catboost | rfl |")
    assert "| 0.150 | 0.200 | 0.200 | 0.200 | 0.200 | nan |" in report


def test_binary_tables_show_coverage_and_width_without_rfl_rows() -> None:
    bench = _load_script()
    rows = []
    for split in (0, 1):
        for setting in ("0", "20"):
            for model in ("viboost", "lgbm", "cleanlab"):
                row = {"dataset": "spambase", "setting": setting, "split": split, "model": model}
                row |= {"test_error": 10.0, "fit_s": 1.0, "true_rate": 0.2 * (setting == "20")}
                noisy = setting == "20"
                if model == "viboost":  # widths 0.1 and 0.2; covered in split 0 only
                    row |= {"rate_abs_err": 0.02, "rate_lo": 0.1, "rate_hi": 0.2 + 0.1 * split}
                    row |= {"covered": float(split == 0), "auroc": 0.9 if noisy else np.nan}
                if model == "cleanlab":
                    row |= {"rate_abs_err": 0.05, "auroc": 0.8 if noisy else np.nan}
                rows.append(row)
    results = bench.tidy(pd.DataFrame(rows), bench.BINARY)
    summary = bench.summarise(results)
    table = bench.dataset_table(summary, "spambase")
    assert "err rfl" not in table  # the committed CSVs have no rfl rows
    assert "| rate err viboost | cover viboost | width viboost | rate err cleanlab |" in table
    assert "| 0.020 | 0.50 | 0.150 | 0.050 |" in table
    targets = bench.targets_table(summary)
    assert targets.splitlines()[0].endswith("| rate abs err | rate <= 0.03 | cover | width |")
    assert "| 0.020 | yes | 0.50 | 0.150 |" in targets
    line = bench.coverage_line(results, ["viboost", "viboost-31"])
    assert line.endswith("`viboost` 0.50 (2 fits; mean width 0.150).")
    report = bench.report(results, summary, "test")
    assert line in report and "`rfl`: `RobustFocalLGBM(seed, n_jobs=1)" in report


def _load_seeds():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "label_noise_seeds.py"
    spec = importlib.util.spec_from_file_location("label_noise_seeds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seed_stability_split_flips_a_fifth_of_the_training_labels():
    seeds = _load_seeds()
    X_tr, y_noisy, X_te, y_te, flipped = seeds.noisy_split()
    assert X_tr.shape[0] + X_te.shape[0] == 569 and y_noisy.size == flipped.size
    assert flipped.sum() == round(0.2 * flipped.size)
    again = seeds.noisy_split()
    np.testing.assert_array_equal(again[1], y_noisy)  # the one split, whatever the fit's seed


def test_seed_stability_report_states_both_targets():
    seeds = _load_seeds()
    rows = [
        {"seed": k, "accuracy": 0.90 + 0.01 * k, "rate": 0.2, "low": 0.1 + 0.02 * k,
         "high": 0.25, "true_rate": 0.2, "covered": 0.1 + 0.02 * k <= 0.2,
         "no_noise_proba": 0.0, "issues": 80, "flipped": 80}
        for k in range(8)
    ]  # fmt: skip
    text = seeds.report(pd.DataFrame(rows), "cmd")
    assert "accuracy spread (max - min): 7.0 points (target: at most 3)" in text
    assert "intervals holding the flipped share 0.200: 6 of 8 (target: at least 6 of 8)" in text
    assert text.count("| yes |") == 6 and text.count("| no |") == 2


def test_rfl_without_a_usable_feature_predicts_the_prior_as_lightgbm_does():
    """35 rows whose features LightGBM cannot bin (Reuters' rare words): LightGBM's own
    objectives fit no tree and predict the prior; the custom objective raised instead."""
    pytest.importorskip("lightgbm")
    rfl = _load_rfl()
    X = np.zeros((35, 4))
    for labels, prior in (
        (np.array([0] * 25 + [1] * 10), [25 / 35, 10 / 35]),
        (np.array([0] * 20 + [1] * 10 + [2] * 5), [20 / 35, 10 / 35, 5 / 35]),
    ):
        model = rfl.RobustFocalLGBM(0).fit(X, labels)
        assert model.booster_ is None
        np.testing.assert_allclose(model.predict_proba(X[:3]), np.tile(prior, (3, 1)))
        np.testing.assert_array_equal(model.predict(X[:3]), [0, 0, 0])


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


# The mixed-type part (benchmarks/label_noise_mixed.py): tables with categorical columns.


def _load_mixed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # as when run from benchmarks/
    path = SCRIPT.with_name("label_noise_mixed.py")
    spec = importlib.util.spec_from_file_location("label_noise_mixed_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_mixed_table(path: Path, n: int, seed: int) -> None:
    """A penguins-like file: 3 classes, a string column with missing cells, two numbers."""
    rng = np.random.default_rng(seed)
    species = rng.integers(0, 3, n)
    island = np.array(["Biscoe", "Dream", "Torgersen"], dtype=object)[(species + (rng.random(n)
                                                                       < 0.2)) % 3]  # fmt: skip
    island[rng.random(n) < 0.05] = None
    frame = pd.DataFrame({
        "species": np.array(["Adelie", "Chinstrap", "Gentoo"])[species],
        "island": island,
        "bill": species * 4.0 + rng.normal(size=n),
        "mass": rng.normal(size=n),
    })  # fmt: skip
    frame.to_csv(path, index=False, compression="gzip")


def test_mixed_part_tiny_run_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = _load_mixed(monkeypatch)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    _write_mixed_table(data_dir / "penguins.csv.gz", 240, 0)

    X, y = mixed.load_mixed("penguins", data_dir)
    assert isinstance(X["island"].dtype, pd.CategoricalDtype)
    assert X["island"].isna().any()  # a missing cell stays missing
    assert set(np.unique(y)) == {0, 1, 2}
    assert mixed.load_mixed("credit", data_dir) is None  # its file is missing: skipped

    models = ["viboost", "viboost-onehot", "hgb"]
    results = mixed.run_mixed(["penguins", "credit"], 1, models, out_dir=tmp_path,
                              data_dir=data_dir)  # fmt: skip
    assert len(results) == 2 * len(models)  # penguins at 0% and 20% moved
    assert results["note"].isna().all()
    rows = pd.read_csv(tmp_path / "label_noise_mixed.csv", dtype={"setting": str})
    moved = rows[rows.setting == "20"]
    assert (moved.n_flipped == round(0.2 * 120)).all()
    vb = rows[rows.model == "viboost"].set_index("setting")
    assert 0.5 < vb.loc["20", "auroc"] <= 1.0  # the moved rows are found better than by chance
    assert rows.loc[rows.model == "hgb", "auroc"].isna().all()  # not a detector
    report = (tmp_path / "label_noise_mixed.md").read_text()
    assert "## penguins" in report and "## Targets (issue 53)" in report
    assert "| penguins | 20% |" in report
    assert not list(tmp_path.glob(".*.tmp*"))

    # --resume: nothing left to fit; the rows are kept as they were.
    again = mixed.run_mixed(["penguins"], 1, models, out_dir=tmp_path, data_dir=data_dir,
                            resume=True)  # fmt: skip
    pd.testing.assert_frame_equal(
        again.sort_values(["setting", "model"]).reset_index(drop=True)[["model", "test_error"]],
        rows.sort_values(["setting", "model"]).reset_index(drop=True)[["model", "test_error"]],
    )


def test_mixed_part_targets_name_the_best_peer() -> None:
    spec = importlib.util.spec_from_file_location(
        "label_noise_mixed_targets", SCRIPT.with_name("label_noise_mixed.py")
    )
    mixed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mixed)
    index = pd.MultiIndex.from_tuples(
        [("t", s, m) for s in ("0", "20") for m in ("viboost", "lgbm", "catboost", "cleanlab")],
        names=["dataset", "setting", "model"],
    )
    errors = [10.4, 10.2, 10.0, 11.0, 15.0, 18.0, 16.0, 14.0]
    summary = pd.DataFrame({"test_error": errors, "auroc": np.nan, "fit_s": 1.0}, index=index)
    table = mixed.targets(summary).set_index("setting")
    # Clean: the best of LightGBM, HGB and CatBoost (cleanlab is not a clean peer).
    assert table.loc["0", "best_peer"] == 10.0 and table.loc["0", "excess"] == pytest.approx(0.4)
    # Flipped: cleanlab counts.
    assert table.loc["20", "best_peer"] == 14.0 and table.loc["20", "excess"] == pytest.approx(1.0)


# benchmarks/categorical.py: the regularisation grid reaches the categorical split search.


def test_categorical_grid_settings_reach_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location(
        "categorical_benchmark", SCRIPT.with_name("categorical.py")
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from viboost import VIBoostClassifier

    X, y = bench.make_table(1_200, 2, 0)
    assert list(X.columns[:2]) == ["A", "B"] and X["B"].cat.categories.size == 200
    row = bench.fit_one(VIBoostClassifier(random_state=0), X, y, X, y)
    default_importance = row["share_B"]
    assert 0.0 <= default_importance < 1.0
    # A category of fewer rows than cat_smooth is left out of the ordered scan: with
    # cat_smooth above any category's count no categorical split is found at all.
    with bench.searches_with({"cat_smooth": 1e9, "max_cat_to_onehot": 0}):
        model = VIBoostClassifier(random_state=0).fit(X, y)
    assert model.feature_importances_[:2].sum() == 0.0
    # ... and the shipped searches come back after the block.
    model = VIBoostClassifier(random_state=0).fit(X, y)
    assert model.feature_importances_[0] > 0.0


def test_fold_draws_pool_posteriors_as_an_equal_mixture() -> None:
    """benchmarks/label_noise_fold_draws.py: the pooled mean and 90% interval of two weighted
    posteriors are those of the equal mixture, checked against samples repeated in proportion
    to their weights (an independent oracle: numpy's inverted-CDF quantiles)."""
    bench = _load_script()
    folds = bench.sibling("label_noise_fold_draws")
    a = np.array([[0.0, 0.5], [0.1, 0.25], [0.2, 0.25]])  # "no noise" at 0, then draws
    b = np.array([[0.0, 0.1], [0.3, 0.6], [0.4, 0.3]])
    rate, low, high, median, noise_mean = folds.pooled([a, b])
    # Equal mixture: weights halved, as counts out of 40 (a: 10, 5, 5; b: 2, 12, 6).
    samples = np.repeat([0.0, 0.1, 0.2, 0.0, 0.3, 0.4], [10, 5, 5, 2, 12, 6])
    assert rate == pytest.approx(samples.mean())
    expected = np.quantile(samples, [0.05, 0.5, 0.95], method="inverted_cdf")
    np.testing.assert_allclose([low, median, high], expected)
    # The noise model's mean: each posterior's draws after its first ("no noise"), each
    # posterior's noise part weighing one (a: 0.1 and 0.2 evenly; b: 0.3 and 0.4 as 2:1).
    assert noise_mean == pytest.approx((0.15 + (0.3 * 2 + 0.4) / 3) / 2)
    # One posterior alone: its own quantiles, whatever the scale of its weights.
    rate1, low1, high1, _, _ = folds.pooled([b * [1.0, 3.0]])
    assert (low1, high1) == (0.0, 0.4) and rate1 == pytest.approx(0.3 * 0.6 + 0.4 * 0.3)
