"""Tests for ``viboost reproduce`` and the :mod:`viboost.experiments` package.

The quick run of ``all`` goes through the command line entry point once per test session (a
module-scoped fixture) and the other tests inspect its output folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from viboost.cli import main
from viboost.experiments import EXPERIMENTS, Settings
from viboost.experiments._common import exact_max_bins, run_seeds, write_csv
from viboost.experiments.prior import DEFAULT_TOTALS, prior_alpha, prior_curves
from viboost.experiments.vi_vs_gibbs import (
    QUICK_CHAINS,
    RUN_COLUMNS,
    THETAS_QUICK,
    summarise_vi_vs_gibbs,
    vi_vs_gibbs_run,
)
from viboost.variational import approx_alpha

FIGURES = [
    "prior_alpha.png",
    "spam_error.png",
    "elbo_gain.png",
    "text_error.png",
    "step_snr.png",
    "step_noise_grade.png",
    "long_servedio_snr.png",
    "long_servedio_error.png",
    "vi_vs_gibbs.png",
]
CSVS = [
    "prior_alpha.csv",
    "spam_error.csv",
    "elbo_gain.csv",
    "text_error.csv",
    "step_snr.csv",
    "step_runs.csv",
    "long_servedio_snr.csv",
    "long_servedio_error.csv",
    "vi_vs_gibbs.csv",
    "vi_vs_gibbs_runs.csv",
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LOG3 = float(np.log(3))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``viboost reproduce all --quick`` into a fresh folder (once per module)."""
    out = tmp_path_factory.mktemp("reproduce") / "results"  # created by the command
    code = main(["reproduce", "all", "--quick", "--out", str(out), "--seed", "1"])
    assert code == 0
    return out, (out / "report.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------ prior
@pytest.mark.parametrize("total", [1.0, 5.0, 20.0, 100.0, 3.7e4])
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.3, 0.5, 0.77, 0.99])
def test_prior_alpha_matches_approx_alpha(total: float, eps: float) -> None:
    # Rows of unequal weights with total Z and weighted error eps: approx_alpha must give
    # section 6 eq. (18).
    rng = np.random.default_rng(0)
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    h = np.array([1.0, -1.0, -1.0, 1.0, 1.0])  # right, right, wrong, wrong, right
    right = rng.dirichlet(np.ones(3)) * (1.0 - eps)
    wrong = rng.dirichlet(np.ones(2)) * eps
    d = np.array([right[0], right[1], wrong[0], wrong[1], right[2]])
    log_weight = np.log(total * d)
    expected = approx_alpha(y, h, log_weight, weight_prior=1.0, tau=1.0)
    assert float(prior_alpha(eps, total)) == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_prior_alpha_limits_and_tau() -> None:
    eps = np.array([0.1, 0.25, 0.4])
    ada = 0.5 * np.log((1 - eps) / eps)
    np.testing.assert_allclose(prior_alpha(eps, np.inf), ada)
    np.testing.assert_allclose(prior_alpha(eps, 1e12), ada, rtol=1e-9)
    # Shrinkage: |alpha| grows with Z towards AdaBoost's.
    values = [prior_alpha(eps, z) for z in (1.0, 5.0, 20.0, 100.0)]
    assert all(np.all(a < b) for a, b in zip(values, values[1:], strict=False))
    assert np.all(values[-1] < ada)
    assert float(prior_alpha(0.5, 3.0)) == 0.0
    # General mu_0 and tau (supplement S.6): 1/(2 tau) log((mu0/Z + 1 - eps)/(mu0/Z + eps)).
    assert float(prior_alpha(0.2, 4.0, weight_prior=2.0, tau=0.5)) == pytest.approx(
        np.log((0.5 + 0.8) / (0.5 + 0.2))
    )


def test_prior_curves_table() -> None:
    frame = prior_curves()
    assert set(frame.Z) == set(DEFAULT_TOTALS)
    assert frame.eps.between(0, 1, inclusive="neither").all()
    np.testing.assert_allclose(frame.alpha, frame.alpha_package, rtol=1e-10, atol=1e-12)
    assert np.isfinite(frame[["alpha", "alpha_package", "alpha_adaboost"]].to_numpy()).all()


# ------------------------------------------------------------------------------ quick run
def test_quick_all_writes_every_file(quick_run: tuple[Path, str]) -> None:
    out, report = quick_run
    for name in FIGURES:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert len(data) > 5000, name
    for name in CSVS:
        frame = pd.read_csv(out / name)
        assert len(frame) > 0, name
    # No temporary files left behind by the atomic writes.
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    for name in FIGURES:
        assert f"({name})" in report
    for name in CSVS:
        assert f"]({name})" in report
    for name in EXPERIMENTS:
        assert f"`viboost reproduce {name}`" in report


def test_quick_error_curves_are_sane(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    for name in ("spam_error.csv", "text_error.csv", "long_servedio_error.csv"):
        frame = pd.read_csv(out / name)
        assert list(frame.columns) == ["round", "model", "mean", "low", "high"]
        values = frame[["mean", "low", "high"]].to_numpy()
        assert np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all()
        assert (frame["low"] <= frame["mean"] + 1e-12).all()
        assert (frame["mean"] <= frame["high"] + 1e-12).all()
        for _, part in frame.groupby("model"):
            assert part["round"].tolist() == list(range(1, len(part) + 1))
    spam = pd.read_csv(out / "spam_error.csv")
    assert set(spam.model) == {"VIBoost", "AdaBoost", "AdaBoost (scikit-learn)"}
    assert len(spam) == 3 * 30
    final = spam.groupby("model")["mean"].last()
    assert (final < 0.2).all(), final  # stumps on Spambase: about 7-10% after 30 rounds


def test_quick_noise_statistics_are_sane(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    step = pd.read_csv(out / "step_runs.csv")
    assert len(step) == 5 * 3
    assert (step.snr > 0).all() and np.isfinite(step.snr).all()
    assert np.isfinite(step.noise_grade).all()
    summary = pd.read_csv(out / "step_snr.csv")
    snr = summary[summary.statistic == "snr"].set_index("theta")["median"]
    assert snr.loc[1.0] > snr.loc[0.0]  # the paper's claim, robust even with 3 runs
    ls = pd.read_csv(out / "long_servedio_snr.csv")
    assert len(ls) == 50 and (ls[["mean", "low", "high"]] > 0).all().all()
    elbo = pd.read_csv(out / "elbo_gain.csv")
    assert elbo.share_negative.between(0, 1).all() and np.isfinite(elbo["mean"]).all()
    prior = pd.read_csv(out / "prior_alpha.csv")
    np.testing.assert_allclose(prior.alpha, prior.alpha_package, rtol=1e-10, atol=1e-12)


def test_quick_vi_vs_gibbs_is_sane(quick_run: tuple[Path, str]) -> None:
    out, report = quick_run
    raw = pd.read_csv(out / "vi_vs_gibbs_runs.csv")
    assert list(raw.columns) == RUN_COLUMNS
    assert len(raw) == len(THETAS_QUICK) * 3
    assert sorted(set(raw.theta)) == sorted(THETAS_QUICK)
    noisy, clean = raw[raw.theta < 1], raw[raw.theta == 1]
    # The truth: theta / (1 - theta), infinite only at theta = 1; log 3 everywhere.
    np.testing.assert_allclose(noisy.true_snr, noisy.theta / (1 - noisy.theta))
    assert np.isinf(clean.true_snr).all() and (clean.true_share == 1).all()
    np.testing.assert_allclose(raw.true_noise_grade, LOG3)
    assert raw.true_share.between(0, 1).all()
    finite = [c for c in RUN_COLUMNS if c not in ("true_snr", "empirical_snr")]
    assert np.isfinite(raw[finite].to_numpy()).all()
    assert (raw[["vi_snr", "gibbs_snr", "gibbs_snr_low"]] > 0).all().all()
    # Posterior summaries are ordered; the mean of xi lies inside its 90% interval.
    assert (raw.gibbs_snr_low < raw.gibbs_snr_high).all()
    assert (raw.gibbs_noise_grade_low < raw.gibbs_noise_grade).all()
    assert (raw.gibbs_noise_grade < raw.gibbs_noise_grade_high).all()
    # Diagnostics from ArviZ: R-hat near 1 where the chains mix well (little noise; at theta =
    # 0.5 the 200-draw quick chains of theta can reach R-hat 1.5), ESS positive and at most the
    # number of draws times a small factor (antithetic chains can exceed it a little).
    draws = QUICK_CHAINS.n_chains * QUICK_CHAINS.n_draws
    rhat = raw[["rhat_theta", "rhat_xi"]]
    assert rhat.to_numpy().min() > 0.99
    assert rhat[raw.theta >= 0.9].to_numpy().max() < 1.2
    assert (raw[["ess_theta", "ess_xi"]] > 0).all().all()
    assert (raw[["ess_theta", "ess_xi"]] < 3 * draws).all().all()
    assert (raw[["vi_seconds", "gibbs_seconds"]] > 0).all().all()
    # Noise-free step data: VIBoost keeps choosing the one stump at x = 0.
    assert (clean.n_stumps == 1).all() and (noisy.n_stumps >= 1).all()
    # At theta = 0.9 the Gibbs 90% interval holds the true SNR (9) in most runs, and the noise
    # grade's holds log 3 in most runs with noise.
    high = raw[raw.theta == 0.9]
    assert ((high.gibbs_snr_low <= 9) & (9 <= high.gibbs_snr_high)).sum() >= 2
    covered = (noisy.gibbs_noise_grade_low <= LOG3) & (LOG3 <= noisy.gibbs_noise_grade_high)
    assert covered.mean() >= 2 / 3
    # Both SNRs grow with theta (medians over the runs).
    medians = raw.groupby("theta")[["vi_snr", "gibbs_snr"]].median()
    assert medians.vi_snr.is_monotonic_increasing
    assert medians.gibbs_snr.iloc[-1] > medians.gibbs_snr.iloc[0]
    summary = pd.read_csv(out / "vi_vs_gibbs.csv")
    pd.testing.assert_frame_equal(
        summary, summarise_vi_vs_gibbs(raw), check_exact=False, check_dtype=False
    )
    assert "`viboost reproduce vi-vs-gibbs`" in report and "(vi_vs_gibbs.png)" in report


def test_vi_vs_gibbs_run_is_reproducible() -> None:
    a, b = (vi_vs_gibbs_run(0.8, 7, QUICK_CHAINS) for _ in range(2))
    timings = {"vi_seconds", "gibbs_seconds"}
    assert {k: v for k, v in a.items() if k not in timings} == {
        k: v for k, v in b.items() if k not in timings
    }
    c = vi_vs_gibbs_run(0.8, 8, QUICK_CHAINS)
    assert c["gibbs_snr"] != a["gibbs_snr"]


def test_summarise_vi_vs_gibbs_by_hand() -> None:
    rows = []
    for theta, run, vi, mean, low, high, rhat in [
        (0.5, 0, 40.0, 3.0, 0.5, 50.0, 1.01),  # holds the truth (1) and VI's 40
        (0.5, 1, 10.0, 5.0, 2.0, 50.0, 1.20),  # holds VI's 10, not the truth
        (1.0, 0, 70.0, 50.0, 10.0, 900.0, 1.00),
    ]:
        rows.append(
            {
                "theta": theta,
                "run": run,
                "seed": run,
                "true_snr": theta / (1 - theta) if theta < 1 else np.inf,
                "true_noise_grade": LOG3,
                "true_share": theta,
                "empirical_snr": np.inf,
                "n_stumps": 3,
                "vi_snr": vi,
                "vi_noise_grade": 0.1,
                "gibbs_snr": mean,
                "gibbs_snr_low": low,
                "gibbs_snr_high": high,
                "gibbs_noise_grade": 0.5,
                "gibbs_noise_grade_low": -2.0 + run * 3.5,  # run 1: [1.5, 3] misses 0.1, log 3
                "gibbs_noise_grade_high": 3.0,
                "rhat_theta": rhat,
                "rhat_xi": 1.0,
                "ess_theta": 100.0 + run,
                "ess_xi": 400.0,
                "vi_seconds": 0.1,
                "gibbs_seconds": 0.5 + run,
            }
        )
    summary = summarise_vi_vs_gibbs(pd.DataFrame(rows, columns=RUN_COLUMNS)).set_index("theta")
    half = summary.loc[0.5]
    assert half.runs == 2 and half.true_snr == 1.0
    assert half.snr_covered == 0.5 and half.vi_snr_in_interval == 1.0
    assert half.vi_snr_mean == 25.0 and half.gibbs_snr_median == 4.0
    assert half.gibbs_snr_low_mean == 1.25 and half.gibbs_snr_high_mean == 50.0
    assert half.noise_grade_covered == 0.5 and half.vi_noise_grade_in_interval == 0.5
    assert half.rhat_max == 1.20 and half.ess_min == 100.0 and half.gibbs_seconds_mean == 1.0
    assert np.isnan(summary.loc[1.0, "snr_covered"])  # infinite truth: no coverage
    assert summary.loc[1.0, "vi_snr_in_interval"] == 1.0


def test_report_has_a_table_per_experiment(quick_run: tuple[Path, str]) -> None:
    _, report = quick_run
    assert report.count("| Quantity | Paper (claim) | Measured |") == len(EXPERIMENTS)
    assert "quick mode" in report and "seed 1" in report
    assert "nan" not in report.lower().replace("nanmean", "")
    assert re.search(r"VIBoost: \d+\.\d+%", report)


def test_single_experiment_and_seed_determinism(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert main(["reproduce", "prior", "--out", str(out)]) == 0
        assert main(["reproduce", "step", "--quick", "--runs", "1", "--out", str(out)]) == 0
    assert not (a / "report.md").exists()
    pd.testing.assert_frame_equal(
        pd.read_csv(a / "step_runs.csv"), pd.read_csv(b / "step_runs.csv")
    )
    assert (a / "prior_alpha.csv").read_bytes() == (b / "prior_alpha.csv").read_bytes()


def test_binned_search_is_exact_where_used() -> None:
    # exact_max_bins picks the binned search only where it finds the exhaustive stumps.
    from viboost import VIBoostClassifier
    from viboost.datasets import load_reuters_acq_crude

    X, y = load_reuters_acq_crude(return_X_y=True)
    assert exact_max_bins(X) == 255
    assert exact_max_bins(np.linspace(0, 1, 400)[:, None]) is None
    fits = [
        VIBoostClassifier(8, preset="paper", max_bins=b).fit(X[::2], y[::2]) for b in (255, None)
    ]
    np.testing.assert_allclose(fits[0].alphas_, fits[1].alphas_, rtol=1e-12)
    assert [(s.feature, s.polarity) for s in fits[0].estimators_] == [
        (s.feature, s.polarity) for s in fits[1].estimators_
    ]


def test_experiments_fit_the_paper_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    # The paper's experiments run Algorithm 1 as printed: every VIBoostClassifier they fit,
    # the AdaBoost of the core model included, has preset="paper" (not the robust default).
    from viboost.estimator import VIBoostClassifier
    from viboost.experiments import classification, noise

    fitted: list[tuple[str, bool]] = []
    original = VIBoostClassifier.fit

    def spy(self, *args, **kwargs):
        fitted.append((self.preset, self.noise_model))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(VIBoostClassifier, "fit", spy)
    noise._step_run(0.8, 3, 0)
    noise._ls_run(3, 0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    classification._one_run(X, y, 0.5, 3, 0)
    vi_vs_gibbs_run(0.8, 7, QUICK_CHAINS)
    assert len(fitted) == 6
    assert {preset for preset, _ in fitted} == {"paper"}
    assert fitted.count(("paper", False)) == 2  # the two AdaBoosts


def test_run_seeds_do_not_depend_on_the_number_of_runs() -> None:
    assert run_seeds(3, "spam", 4) == run_seeds(3, "spam", 40)[:4]
    assert len(set(run_seeds(3, "spam", 40))) == 40


# --------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["reproduce", "nonsense", "--out", "x"], "invalid choice"),
        (["reproduce", "prior"], "--out"),
        (["reproduce", "prior", "--out", "x", "--runs", "0"], "positive integer"),
        (["reproduce", "prior", "--out", "x", "--runs", "many"], "positive integer"),
        (["reproduce", "prior", "--out", "x", "--seed", "-1"], "seed"),
    ],
)
def test_bad_arguments_exit_2(argv, fragment, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and fragment in err, err


def test_bad_output_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep me")
    assert main(["reproduce", "prior", "--out", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("viboost: error: ") and "not a directory" in err
    assert a_file.read_text() == "keep me"
    missing = tmp_path / "no" / "such" / "dir"
    assert main(["reproduce", "prior", "--out", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("viboost: error: ") and "does not exist" in err
    assert not missing.exists()


def test_outputs_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A failure while rendering leaves the previous file intact and no temporary file behind.
    target = tmp_path / "table.csv"
    write_csv(pd.DataFrame({"a": [1, 2]}), tmp_path, "table.csv")
    before = target.read_bytes()

    class Boom(pd.DataFrame):
        def to_csv(self, *args, **kwargs):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_csv(Boom({"a": [3]}), tmp_path, "table.csv")
    assert target.read_bytes() == before

    def failing_replace(src, dst):
        raise OSError("interrupted before the rename")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="interrupted"):
        write_csv(pd.DataFrame({"a": [4]}), tmp_path, "table.csv")
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_settings_defaults() -> None:
    settings = Settings(out=Path("."))
    assert settings.runs == 40 and not settings.quick and settings.n_jobs == 1
