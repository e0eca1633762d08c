"""Reproduce the figures of sections 6 and 7 of "A Bayesian Boosting Model".

Structure
---------
Each experiment is a function ``run_<name>(settings) -> ExperimentResult`` that does its runs,
writes its PNG figures and the CSV behind each figure into ``settings.out`` (atomically) and
returns the tables, the figure names and the rows of the report. The computations behind them
are plain functions returning pandas DataFrames or arrays, usable without writing anything.

===================  ============================================  =========================
name                 paper                                         module
===================  ============================================  =========================
``prior``            Figure 5, eq. (18): prior shrinks weights     :mod:`.prior`
``spam``             Figure 6 (Spambase) and the ELBO trajectory   :mod:`.classification`
``text``             Figure 7 (text data: Reuters acq/crude)       :mod:`.classification`
``step``             Figures 8 and 9 (step data)                   :mod:`.noise`
``long-servedio``    Figure 10 (Long-Servedio data)                :mod:`.noise`
``vi-vs-gibbs``      Figures 8-9 data: VIBoost vs Gibbs (S.3)      :mod:`.vi_vs_gibbs`
===================  ============================================  =========================

:func:`run_experiments` runs some of them and, for ``all``, writes ``report.md``
(:mod:`.report`). Shared plumbing (settings, per-run seeds, percentile bands, atomic output)
lives in :mod:`._common`. The command line entry is ``viboost reproduce``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from viboost.experiments._common import ExperimentResult, ReportRow, Settings
from viboost.experiments.classification import run_spam, run_text
from viboost.experiments.noise import run_long_servedio, run_step
from viboost.experiments.prior import run_prior
from viboost.experiments.report import write_report
from viboost.experiments.vi_vs_gibbs import run_vi_vs_gibbs

__all__ = [
    "EXPERIMENTS",
    "ExperimentResult",
    "ReportRow",
    "Settings",
    "run_experiments",
    "run_long_servedio",
    "run_prior",
    "run_spam",
    "run_step",
    "run_text",
    "run_vi_vs_gibbs",
]

#: Experiment name -> runner, in the order of the paper (then the comparison with Gibbs).
EXPERIMENTS: dict[str, Callable[[Settings], ExperimentResult]] = {
    "prior": run_prior,
    "spam": run_spam,
    "text": run_text,
    "step": run_step,
    "long-servedio": run_long_servedio,
    "vi-vs-gibbs": run_vi_vs_gibbs,
}


def run_experiments(
    names: Sequence[str],
    settings: Settings,
    report: bool = False,
    progress: Callable[[ExperimentResult], None] | None = None,
) -> list[ExperimentResult]:
    """Run the named experiments in order; optionally write ``report.md``.

    Parameters
    ----------
    names : sequence of str
        Keys of :data:`EXPERIMENTS`.
    settings : Settings
        Output folder (must exist), runs, quick mode, seed, processes.
    report : bool, default=False
        Also write ``report.md`` summarising the experiments.
    progress : callable or None, default=None
        Called with each result as soon as its experiment is done.

    Returns
    -------
    list of ExperimentResult
    """
    unknown = [name for name in names if name not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    results = []
    for name in names:
        result = EXPERIMENTS[name](settings)
        results.append(result)
        if progress is not None:
            progress(result)
    if report:
        write_report(results, settings)
    return results
