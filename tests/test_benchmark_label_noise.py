"""The label-noise benchmark script runs end to end on tiny data (no shared data needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

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
