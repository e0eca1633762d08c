"""VIBoost's variational noise statistics against the Gibbs posterior on the step data.

The step data of section 7 (Figures 8 and 9; see :mod:`~viboost.experiments.noise`) are drawn
for a grid of type priors theta with the paper's noise grade ``log 3``. On each draw
:func:`vi_vs_gibbs_run`

1. fits :class:`~viboost.VIBoostClassifier` with the settings of the step experiment
   (``preset="paper"``: Algorithm 1 as printed, 50 rounds, the paper's priors, exhaustive
   stumps) and records its SNR ``eta_1 / eta_2`` and noise grade ``log(omega_2 / omega_1)`` (the
   mode of q(xi)), the variational estimates of section 5;
2. runs :class:`~viboost.GibbsSampler` (Algorithm 2) with the same priors on the distinct stumps
   that fit selected, and records the posterior ``E[theta] / E[1 - theta]`` with the 5th and 95th
   percentiles of ``theta / (1 - theta)``, the posterior mean of xi with its 5th and 95th
   percentiles, R-hat and bulk effective sample sizes of theta and xi (ArviZ) and both run times.

The true SNR is ``theta / (1 - theta)`` (infinite at theta = 1) and the true noise grade
``log 3``; the share of labels that are really true in the draw is recorded too. The variational
fit is stagewise and factorised (q(c) q(xi) q(theta) q(w)); the sampler targets the joint
posterior over the weights of the *selected* stumps, xi, theta and the type selectors, so the
two can disagree even where both are computed exactly.

:func:`vi_vs_gibbs_statistics` returns one row per (theta, run); :func:`run_vi_vs_gibbs`
summarises them per theta and writes ``vi_vs_gibbs_runs.csv``, ``vi_vs_gibbs.csv`` and
``vi_vs_gibbs.png``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from viboost.experiments._common import (
    ExperimentResult,
    ReportRow,
    Settings,
    Timer,
    exact_max_bins,
    fmt,
    map_runs,
    new_figure,
    run_seeds,
    write_csv,
    write_figure,
)
from viboost.experiments.noise import STEP_NOISE_GRADE, STEP_ROUNDS

__all__ = [
    "FULL_CHAINS",
    "QUICK_CHAINS",
    "RUN_COLUMNS",
    "THETAS",
    "THETAS_QUICK",
    "ChainSettings",
    "run_vi_vs_gibbs",
    "summarise_vi_vs_gibbs",
    "vi_vs_gibbs_run",
    "vi_vs_gibbs_statistics",
]

#: Type priors of the full experiment (theta = 0 is left out: its true SNR, 0, has no place on a
#: log axis, and the step experiment already covers it).
THETAS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)
#: Type priors of ``--quick``.
THETAS_QUICK: tuple[float, ...] = (0.5, 0.9, 1.0)
#: Percentiles of the posterior interval (a central 90% interval).
INTERVAL = (5.0, 95.0)


@dataclass(frozen=True)
class ChainSettings:
    """Length of the Gibbs chains: ``n_chains`` chains of ``n_draws`` kept draws each."""

    n_draws: int
    n_burnin: int
    n_chains: int = 4


#: Chains of the full experiment.
FULL_CHAINS = ChainSettings(n_draws=1000, n_burnin=500)
#: Chains of ``--quick``.
QUICK_CHAINS = ChainSettings(n_draws=200, n_burnin=100)

#: Columns of :func:`vi_vs_gibbs_statistics`, in order.
RUN_COLUMNS = [
    "theta",
    "run",
    "seed",
    "true_snr",
    "true_noise_grade",
    "true_share",
    "empirical_snr",
    "n_stumps",
    "vi_snr",
    "vi_noise_grade",
    "gibbs_snr",
    "gibbs_snr_low",
    "gibbs_snr_high",
    "gibbs_noise_grade",
    "gibbs_noise_grade_low",
    "gibbs_noise_grade_high",
    "rhat_theta",
    "rhat_xi",
    "ess_theta",
    "ess_xi",
    "vi_seconds",
    "gibbs_seconds",
]


def _odds(p: float | np.ndarray) -> float | np.ndarray:
    """``p / (1 - p)``, infinite at ``p = 1`` without a warning."""
    with np.errstate(divide="ignore"):
        return np.divide(p, 1.0 - np.asarray(p, dtype=float))


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run numba's parallel kernels (VIBoost's) on one thread, as the Gibbs chains run.

    On 100 rows threads gain nothing, and on a busy machine they can cost a lot: both fits are
    timed single-threaded (VIBoost's default ``n_jobs=None`` already is, unless a
    ``joblib.parallel_config`` context says otherwise; this makes it explicit).
    """
    from viboost._utils.parallel import numba_threads

    with numba_threads(1):
        yield


@functools.cache
def _warm_up() -> None:
    """Load (or compile) the sampler's numba kernels once per process, outside any timing."""
    from viboost.gibbs.sampler import GibbsSampler

    outputs = np.array([[1.0], [-1.0], [1.0]])
    GibbsSampler(2, n_burnin=1, n_chains=1, random_state=0).fit(outputs, outputs[:, 0])


def vi_vs_gibbs_run(theta: float, seed: int, chains: ChainSettings) -> dict[str, float]:
    """One draw of the step data: VIBoost's estimates and the Gibbs posterior's summaries.

    Parameters
    ----------
    theta : float
        Type prior of the data (probability that a label is true).
    seed : int
        Seeds the data and the chains.
    chains : ChainSettings
        Number and length of the Gibbs chains.

    Returns
    -------
    dict
        The values of :data:`RUN_COLUMNS` except ``theta``, ``run`` and ``seed``.
    """

    from viboost import datasets
    from viboost.estimator import VIBoostClassifier
    from viboost.gibbs.sampler import GibbsSampler, import_arviz

    arviz = import_arviz()
    _warm_up()
    X, y, is_true = datasets.make_step(
        theta, STEP_NOISE_GRADE, random_state=seed, return_flags=True
    )
    with _one_thread():
        with Timer() as vi_timer:
            # As in the step experiment: the paper's priors, 100 distinct x so the binned search
            # (max_bins=255) is exact.
            bins = exact_max_bins(X)
            clf = VIBoostClassifier(STEP_ROUNDS, preset="paper", max_bins=bins).fit(X, y)
        with Timer() as gibbs_timer:
            gibbs = GibbsSampler(
                chains.n_draws,
                n_burnin=chains.n_burnin,
                n_chains=chains.n_chains,
                weight_prior=clf.plan_.weight_prior,
                noise_grade_prior=clf.noise_grade_prior,
                clean_prior=clf.clean_prior,
                classifier=clf,
                store_row_draws=False,
                random_state=seed,
            ).fit(X, y)
    idata = gibbs.to_inference_data(include_rows=False)
    rhat = arviz.rhat(idata, var_names=["theta", "xi"])
    ess = arviz.ess(idata, var_names=["theta", "xi"], method="bulk")
    theta_low, theta_high = np.percentile(gibbs.clean_rate_draws_, INTERVAL)
    xi_low, xi_high = np.percentile(gibbs.noise_grade_draws_, INTERVAL)
    share = float(np.mean(is_true))
    assert gibbs.base_classifiers_ is not None  # fitted with a classifier
    return {
        "true_snr": float(_odds(theta)),
        "true_noise_grade": STEP_NOISE_GRADE,
        "true_share": share,
        "empirical_snr": float(_odds(share)),
        "n_stumps": len(gibbs.base_classifiers_),
        "vi_snr": float(clf.snr_),
        "vi_noise_grade": float(clf.noise_grade_),
        "gibbs_snr": float(gibbs.snr_),
        # theta / (1 - theta) is increasing in theta: its percentiles are theta's, mapped.
        "gibbs_snr_low": float(_odds(theta_low)),
        "gibbs_snr_high": float(_odds(theta_high)),
        "gibbs_noise_grade": float(gibbs.noise_grade_),
        "gibbs_noise_grade_low": float(xi_low),
        "gibbs_noise_grade_high": float(xi_high),
        "rhat_theta": float(rhat["theta"]),
        "rhat_xi": float(rhat["xi"]),
        "ess_theta": float(ess["theta"]),
        "ess_xi": float(ess["xi"]),
        "vi_seconds": vi_timer.seconds,
        "gibbs_seconds": gibbs_timer.seconds,
    }


def vi_vs_gibbs_statistics(
    thetas: Sequence[float],
    runs: int,
    seed: int,
    chains: ChainSettings = FULL_CHAINS,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """VIBoost's and the Gibbs sampler's noise statistics on the step data, per run.

    Parameters
    ----------
    thetas : sequence of float
        Type priors to simulate, in [0, 1].
    runs : int
        Draws of the data per theta.
    seed : int
        Master seed; run ``r`` of ``theta`` gets the seed
        ``run_seeds(seed, f"vi-vs-gibbs theta={theta:.6g}", runs)[r]``.
    chains : ChainSettings, default=FULL_CHAINS
        Gibbs chains per run (4 chains of 1,000 draws after 500 burn-in sweeps).
    n_jobs : int, default=1
        Processes over the runs (each run is sequential: chains one after the other).

    Returns
    -------
    DataFrame
        One row per (theta, run), columns :data:`RUN_COLUMNS`.
    """
    jobs = []
    for theta in thetas:
        for run, s in enumerate(run_seeds(seed, f"vi-vs-gibbs theta={theta:.6g}", runs)):
            jobs.append((float(theta), run, s))
    results = map_runs(vi_vs_gibbs_run, [(theta, s, chains) for theta, _, s in jobs], n_jobs)
    rows = [
        {"theta": theta, "run": run, "seed": s, **result}
        for (theta, run, s), result in zip(jobs, results, strict=True)
    ]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def _share(mask: pd.Series) -> float:
    return float(mask.mean()) if len(mask) else float("nan")


def summarise_vi_vs_gibbs(raw: pd.DataFrame) -> pd.DataFrame:
    """Per theta: means (and SNR medians) over runs, interval coverage, diagnostics, times.

    Parameters
    ----------
    raw : DataFrame
        The output of :func:`vi_vs_gibbs_statistics`.

    Returns
    -------
    DataFrame
        One row per theta. ``*_mean`` are means over runs; ``gibbs_snr_low_mean`` and
        ``gibbs_snr_high_mean`` (likewise for the noise grade) average the runs' 5th and 95th
        posterior percentiles. ``snr_covered`` is the share of runs whose 90% interval holds the
        true SNR (n/a at theta = 1, where it is infinite), ``vi_snr_in_interval`` the share whose
        interval holds VIBoost's SNR; likewise for the noise grade. ``rhat_max`` is the largest
        R-hat of theta and xi over the runs, ``ess_min`` the smallest bulk ESS.
    """
    rows = []
    for theta, g in raw.groupby("theta", sort=True):
        finite = bool(np.isfinite(g.true_snr).all())
        rows.append(
            {
                "theta": theta,
                "runs": len(g),
                "true_snr": float(g.true_snr.iloc[0]),
                "true_share_mean": float(g.true_share.mean()),
                "vi_snr_mean": float(g.vi_snr.mean()),
                "vi_snr_median": float(g.vi_snr.median()),
                "gibbs_snr_mean": float(g.gibbs_snr.mean()),
                "gibbs_snr_median": float(g.gibbs_snr.median()),
                "gibbs_snr_low_mean": float(g.gibbs_snr_low.mean()),
                "gibbs_snr_high_mean": float(g.gibbs_snr_high.mean()),
                "snr_covered": _share(
                    (g.gibbs_snr_low <= g.true_snr) & (g.true_snr <= g.gibbs_snr_high)
                )
                if finite
                else float("nan"),
                "vi_snr_in_interval": _share(
                    (g.gibbs_snr_low <= g.vi_snr) & (g.vi_snr <= g.gibbs_snr_high)
                ),
                "true_noise_grade": STEP_NOISE_GRADE,
                "vi_noise_grade_mean": float(g.vi_noise_grade.mean()),
                "gibbs_noise_grade_mean": float(g.gibbs_noise_grade.mean()),
                "gibbs_noise_grade_low_mean": float(g.gibbs_noise_grade_low.mean()),
                "gibbs_noise_grade_high_mean": float(g.gibbs_noise_grade_high.mean()),
                "noise_grade_covered": _share(
                    (g.gibbs_noise_grade_low <= STEP_NOISE_GRADE)
                    & (STEP_NOISE_GRADE <= g.gibbs_noise_grade_high)
                ),
                "vi_noise_grade_in_interval": _share(
                    (g.gibbs_noise_grade_low <= g.vi_noise_grade)
                    & (g.vi_noise_grade <= g.gibbs_noise_grade_high)
                ),
                "rhat_max": float(np.max([g.rhat_theta.max(), g.rhat_xi.max()])),
                "ess_min": float(np.min([g.ess_theta.min(), g.ess_xi.min()])),
                "n_stumps_mean": float(g.n_stumps.mean()),
                "vi_seconds_mean": float(g.vi_seconds.mean()),
                "gibbs_seconds_mean": float(g.gibbs_seconds.mean()),
            }
        )
    return pd.DataFrame(rows)


def _offsets(count: int, left: bool) -> np.ndarray:
    """x offsets of ``count`` runs within one half of a category's slot."""
    spread = np.linspace(0.06, 0.34, count) if count > 1 else np.array([0.2])
    return -spread[::-1] if left else spread


def _plot(raw: pd.DataFrame, chains: ChainSettings, settings: Settings) -> str:
    thetas = np.sort(raw.theta.unique())
    figure = new_figure(11.0, 4.6)
    axes = figure.subplots(1, 2)
    panels = (
        ("snr", r"SNR $\theta/(1-\theta)$ (log scale)", "Signal-to-noise ratio"),
        ("noise_grade", r"noise grade $\xi$", "Noise grade"),
    )
    for ax, (stat, ylabel, title) in zip(axes, panels, strict=True):
        for i, theta in enumerate(thetas):
            g = raw[raw.theta == theta]
            vi_x = i + _offsets(len(g), left=True)
            gibbs_x = i + _offsets(len(g), left=False)
            ax.plot(
                vi_x, g[f"vi_{stat}"], "o", color="C0", ms=4, label="VIBoost" if i == 0 else None
            )
            mean = g[f"gibbs_{stat}"].to_numpy()
            err = np.vstack([mean - g[f"gibbs_{stat}_low"], g[f"gibbs_{stat}_high"] - mean])
            ax.errorbar(
                gibbs_x,
                mean,
                yerr=err,
                fmt="s",
                color="C1",
                ms=4,
                elinewidth=0.8,
                label="Gibbs: posterior mean, 90% interval" if i == 0 else None,
            )
            truth = float(g[f"true_{stat}"].iloc[0])
            if np.isfinite(truth):
                ax.hlines(
                    truth, i - 0.45, i + 0.45, colors="k", linestyles="--",
                    label="truth" if i == 0 else None,
                )  # fmt: skip
            else:
                ax.annotate(
                    r"truth $\infty$", (i, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, -4), textcoords="offset points", ha="center", va="top",
                )  # fmt: skip
        if stat == "snr":
            ax.set_yscale("log")
        ax.set_xticks(range(len(thetas)), [f"{t:g}" for t in thetas])
        ax.set_xlim(-0.5, len(thetas) - 0.5)
        ax.set_xlabel(r"type prior $\theta$ (probability that a label is true)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    runs = int(raw.groupby("theta").size().max())
    figure.suptitle(
        f"Step data (noise grade log 3): VIBoost ({STEP_ROUNDS} rounds) vs Gibbs on its stumps "
        f"({chains.n_chains} chains x {chains.n_draws} draws, {chains.n_burnin} burn-in)\n"
        f"{runs} runs per theta, one marker (VIBoost, left) or bar (Gibbs, right) per run"
    )
    return write_figure(figure, settings.out, "vi_vs_gibbs.png")


def run_vi_vs_gibbs(settings: Settings) -> ExperimentResult:
    """VIBoost's SNR and noise grade against the Gibbs posterior on the step data.

    theta in :data:`THETAS` (quick: :data:`THETAS_QUICK`), ``settings.runs`` draws each;
    VIBoost for 50 rounds, then 4 Gibbs chains of 1,000 draws after 500 burn-in sweeps (quick:
    200 after 100) on its distinct stumps, with the same priors.

    Parameters
    ----------
    settings : Settings

    Returns
    -------
    ExperimentResult
        Tables ``vi_vs_gibbs.csv`` (per theta, see :func:`summarise_vi_vs_gibbs`) and
        ``vi_vs_gibbs_runs.csv`` (per run, :data:`RUN_COLUMNS`); figure ``vi_vs_gibbs.png``.
    """
    thetas = THETAS_QUICK if settings.quick else THETAS
    chains = QUICK_CHAINS if settings.quick else FULL_CHAINS
    with Timer() as timer:
        raw = vi_vs_gibbs_statistics(
            thetas, settings.runs, settings.seed, chains, n_jobs=settings.n_jobs
        )
        summary = summarise_vi_vs_gibbs(raw)
        figures = [_plot(raw, chains, settings)]
        tables = {
            write_csv(summary, settings.out, "vi_vs_gibbs.csv"): summary,
            write_csv(raw, settings.out, "vi_vs_gibbs_runs.csv"): raw,
        }
    s = summary.set_index("theta")
    noisy = [t for t in s.index if t < 1.0]
    rows = [
        ReportRow(
            "SNR, median over runs: VIBoost eta_1/eta_2 | Gibbs E[theta]/E[1-theta] | true",
            "VIBoost's eta_1/eta_2 stands for the posterior SNR (section 5); the Gibbs "
            "sampler, the common approach, targets the posterior itself (footnote, section 4)",
            "; ".join(
                f"theta={t:g}: {fmt(s.loc[t, 'vi_snr_median'])} | "
                f"{fmt(s.loc[t, 'gibbs_snr_median'])} | {fmt(s.loc[t, 'true_snr'])}"
                for t in s.index
            ),
        ),
        ReportRow(
            "share of runs whose Gibbs 90% interval holds the true SNR | VIBoost's SNR",
            "-",
            "; ".join(
                f"theta={t:g}: {s.loc[t, 'snr_covered']:.0%} | {s.loc[t, 'vi_snr_in_interval']:.0%}"
                for t in noisy
            ),
        ),
        ReportRow(
            "noise grade, mean over runs: VIBoost mode of q(xi) | Gibbs posterior mean "
            "[mean 5th, 95th percentile]",
            "true noise grade log 3 = 1.10",
            "; ".join(
                f"theta={t:g}: {fmt(s.loc[t, 'vi_noise_grade_mean'])} | "
                f"{fmt(s.loc[t, 'gibbs_noise_grade_mean'])} "
                f"[{fmt(s.loc[t, 'gibbs_noise_grade_low_mean'])}, "
                f"{fmt(s.loc[t, 'gibbs_noise_grade_high_mean'])}]"
                for t in s.index
            ),
        ),
        ReportRow(
            "time per fit (mean over all runs): VIBoost | Gibbs; largest R-hat of theta and xi",
            "the Gibbs sampler with adaptive rejection sampling was 'too time consuming' "
            "(footnote, section 4)",
            f"{fmt(float(raw.vi_seconds.mean()))} s | {fmt(float(raw.gibbs_seconds.mean()))} s "
            f"({chains.n_chains} x {chains.n_draws + chains.n_burnin} sweeps over "
            f"{fmt(float(raw.n_stumps.mean()))} stumps on average); R-hat up to "
            f"{float(summary.rhat_max.max()):.3f}",
        ),
    ]
    notes = [
        f"{settings.runs} draws of make_step(theta, log 3) per theta (seed {settings.seed}); "
        f"VIBoost as in the step experiment ({STEP_ROUNDS} rounds, mu_0 = mu_0' = zeta = 1, "
        "exhaustive stumps); GibbsSampler(classifier=the VIBoost fit) with the same priors on "
        f"its distinct stumps, {chains.n_chains} chains of {chains.n_draws} draws after "
        f"{chains.n_burnin} burn-in sweeps.",
        "Gibbs intervals are central 90% posterior intervals (5th-95th percentiles of the "
        "draws); R-hat and bulk ESS from ArviZ. Times are wall times per fit, both on one "
        "thread (numba's parallel kernels of VIBoost are set to one thread for the fit).",
    ]
    return ExperimentResult(
        "vi-vs-gibbs",
        "VIBoost vs the Gibbs posterior on the step data (SNR and noise grade)",
        tables=tables,
        figures=figures,
        rows=rows,
        notes=notes,
        seconds=timer.seconds,
    )
