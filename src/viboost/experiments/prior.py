"""Figure 5: the effect of the versatile logistic prior on the classifier weights.

Section 5 of the paper takes the core model (every label true, phi_n = 1) and the approximate mode
of eq. (17) with mu_0 = tau = 1. With ``Z = sum_n exp(-y_n H(x_n))``, the current
exponential loss, and ``eps`` the weighted error of the new stump under ``d_n = exp(-y_n H) / Z``,
the weight is eq. (18), derived in supplement S.6 ("Approximate mode simplification") for any
mu_0 and tau:

    alpha = 1 / (2 tau) * log[(mu_0 / Z + 1 - eps) / (mu_0 / Z + eps)]

As Z grows the prior's pseudo-examples weigh less and alpha tends to AdaBoost's
``1/2 log((1 - eps) / eps)``; a small Z shrinks the weight towards 0.

:func:`prior_alpha` is the formula; :func:`prior_curves` tabulates it on a grid of eps for several
Z together with the package's own :func:`viboost.variational.approx_alpha` on a two-row data set
of total weight Z (one correct row of weight ``Z (1 - eps)``, one wrong row of weight
``Z eps``): the two must agree. :func:`run_prior` writes ``prior_alpha.csv`` and
``prior_alpha.png``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from viboost.experiments._common import (
    ExperimentResult,
    ReportRow,
    Settings,
    Timer,
    fmt,
    new_figure,
    write_csv,
    write_figure,
)
from viboost.variational import approx_alpha

__all__ = ["DEFAULT_TOTALS", "prior_alpha", "prior_curves", "run_prior"]

#: The totals Z drawn in the figure; ``inf`` is AdaBoost.
DEFAULT_TOTALS: tuple[float, ...] = (1.0, 5.0, 20.0, 100.0, np.inf)


def prior_alpha(
    eps: np.ndarray | float, total: float, weight_prior: float = 1.0, tau: float = 1.0
) -> np.ndarray:
    """Section 6 eq. (18): the approximate-mode weight for weighted error ``eps`` and total ``Z``.

    Parameters
    ----------
    eps : float or ndarray
        Weighted error of the stump, in (0, 1).
    total : float
        Z, the total weight ``sum_n phi_n exp(-tau y_n H(x_n))``; ``inf`` gives AdaBoost.
    weight_prior : float, default=1.0
        mu_0.
    tau : float, default=1.0
        The tail parameter of the approximate mode.

    Returns
    -------
    ndarray
        ``1/(2 tau) log((mu_0/Z + 1 - eps) / (mu_0/Z + eps))``.

    Examples
    --------
    >>> float(prior_alpha(0.25, np.inf))  # AdaBoost: 1/2 log 3
    0.5493061443340549
    >>> float(prior_alpha(0.25, 1.0))  # 1/2 log(1.75 / 1.25)
    0.16823611831060645
    """
    eps = np.asarray(eps, dtype=float)
    shrink = weight_prior / total  # 0 for Z = inf
    return np.log((shrink + 1.0 - eps) / (shrink + eps)) / (2.0 * tau)


def _package_alpha(eps: float, total: float, weight_prior: float, tau: float) -> float:
    """``approx_alpha`` on two rows of total weight Z: right ``Z (1 - eps)``, wrong ``Z eps``."""
    y = np.array([1.0, 1.0])
    h = np.array([1.0, -1.0])
    log_weight = np.log(total) + np.log(np.array([1.0 - eps, eps]))
    return approx_alpha(y, h, log_weight, weight_prior, tau)


def prior_curves(
    totals: Sequence[float] = DEFAULT_TOTALS,
    n_points: int = 199,
    weight_prior: float = 1.0,
    tau: float = 1.0,
) -> pd.DataFrame:
    """alpha against eps for each Z, by eq. (18) and by ``approx_alpha``.

    Parameters
    ----------
    totals : sequence of float, default=DEFAULT_TOTALS
        The values of Z; ``inf`` is AdaBoost's ``1/2 log((1-eps)/eps)``.
    n_points : int, default=199
        Grid points of eps, evenly spaced strictly inside (0, 1).
    weight_prior, tau : float, default=1.0
        mu_0 and tau (the paper's Figure 5 uses 1 and 1).

    Returns
    -------
    DataFrame
        Columns ``Z``, ``eps``, ``alpha`` (eq. (18)), ``alpha_package`` (``approx_alpha``; for
        Z = inf the same formula, as ``approx_alpha`` needs finite weights) and
        ``alpha_adaboost``.

    Examples
    --------
    >>> frame = prior_curves(totals=[5.0], n_points=9)
    >>> bool(np.allclose(frame.alpha, frame.alpha_package))
    True
    """
    eps = np.linspace(0.0, 1.0, n_points + 2)[1:-1]
    frames = []
    for total in totals:
        alpha = prior_alpha(eps, total, weight_prior, tau)
        if np.isfinite(total):
            package = np.array([_package_alpha(e, total, weight_prior, tau) for e in eps])
        else:
            package = alpha.copy()
        frames.append(
            pd.DataFrame(
                {
                    "Z": total,
                    "eps": eps,
                    "alpha": alpha,
                    "alpha_package": package,
                    "alpha_adaboost": prior_alpha(eps, np.inf, 0.0, tau),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _z_label(total: float) -> str:
    return r"$Z=\infty$ (AdaBoost)" if not np.isfinite(total) else f"$Z={total:g}$"


def run_prior(settings: Settings) -> ExperimentResult:
    """Figure 5: alpha against the weighted error for several Z (eq. (18), mu_0 = tau = 1).

    Deterministic: no runs or seeds are involved.

    Parameters
    ----------
    settings : Settings
        Only ``settings.out`` is used.

    Returns
    -------
    ExperimentResult
        Table ``prior_alpha.csv``, figure ``prior_alpha.png``.
    """
    with Timer() as timer:
        frame = prior_curves()
        figure = new_figure()
        ax = figure.add_subplot()
        for total, group in frame.groupby("Z", sort=False):
            style = "--" if not np.isfinite(total) else "-"
            ax.plot(group.eps, group.alpha, style, label=_z_label(total))
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_ylim(-2.5, 2.5)
        ax.set_xlabel(r"weighted error $\varepsilon$ of the new stump")
        ax.set_ylabel(r"weight $\alpha$ (approximate mode)")
        ax.set_title(
            "Figure 5: effect of the v-Log prior on classifier weights\n"
            r"eq. (18), $\mu_0 = w_n = \tau = 1$"
        )
        ax.legend(title="total weight")
        ax.grid(alpha=0.3)
        figures = [write_figure(figure, settings.out, "prior_alpha.png")]
        csv = write_csv(frame, settings.out, "prior_alpha.csv")

    deviation = float(np.max(np.abs(frame.alpha - frame.alpha_package)))
    at = frame[np.isclose(frame.eps, 0.1)]
    ratios = ", ".join(
        f"Z={total:g}: {fmt(a)} ({a / ada:.0%})"
        for total, a, ada in zip(at.Z, at.alpha, at.alpha_adaboost, strict=True)
    )
    rows = [
        ReportRow(
            "alpha at eps = 0.1 (share of AdaBoost's 1.099)",
            "the 1/Z term shrinks the weight; small Z (small exponential loss) shrinks most",
            ratios,
        ),
        ReportRow(
            "limit Z -> inf",
            "identical to AdaBoost's 1/2 log((1-eps)/eps) when the 1/Z term is absent",
            f"Z=100 within {fmt(_gap(frame, 100.0))} of AdaBoost on eps in [0.05, 0.95]",
        ),
        ReportRow(
            "eq. (18) vs viboost.variational.approx_alpha",
            "eq. (18) is the approximate mode (eq. (17)) with |beta_k| = 1",
            f"max |difference| {deviation:.2g} over {len(frame)} points",
        ),
    ]
    notes = [
        "Exact formula, no runs: alpha = 1/(2 tau) log((mu_0/Z + 1 - eps)/(mu_0/Z + eps)) "
        "(section 6 eq. (18), derived in supplement S.6) with mu_0 = tau = 1.",
    ]
    return ExperimentResult(
        "prior",
        "Figure 5: the versatile logistic prior shrinks the weights (eq. (18))",
        tables={csv: frame},
        figures=figures,
        rows=rows,
        notes=notes,
        seconds=timer.seconds,
    )


def _gap(frame: pd.DataFrame, total: float) -> float:
    """Largest ``|alpha_Z - alpha_AdaBoost|`` for eps in [0.05, 0.95]."""
    part = frame[(frame.Z == total) & (frame.eps >= 0.05) & (frame.eps <= 0.95)]
    return float(np.max(np.abs(part.alpha - part.alpha_adaboost)))
