"""Plots of a fitted VIBoost model with matplotlib: its training, noise statistics and suspects.

Every function takes a fitted :class:`~viboost.VIBoostClassifier` (and, for
:func:`plot_gibbs_posterior`, the draws of a :class:`~viboost.gibbs.sampler.GibbsSampler`) and
draws on the matplotlib Axes given as ``ax`` -- or on a new figure when ``ax`` is None. The
one-panel plots (:func:`plot_elbo`, :func:`plot_clean_proba`, :func:`plot_suspects`,
:func:`plot_noise_matrix`) return the
:class:`~matplotlib.axes.Axes` they drew on; the plots that may draw several panels return a
1-d numpy array of Axes, one per panel: :func:`plot_noise_paths` of shape (2,) (SNR, noise
grade) or, for a cross-fitted fit, (1,), and :func:`plot_gibbs_posterior` of shape (2,)
(theta, xi). Nothing is shown: call ``matplotlib.pyplot.show()`` or ``savefig`` on the
figure (``ax.figure``) yourself; :func:`write_plots` writes every plot that applies to a model
as PNG files (the ``--plots DIR`` option of ``viboost inspect`` and ``viboost noise``).

- :func:`plot_elbo`: the dynamic ELBO (S.5) after each round, with the rounds in which it fell
  during the inner loop; for a cross-fitted fit (``preset="robust"``), the final booster's
  exact log evidence of the core model.
- :func:`plot_noise_paths`: the signal-to-noise ratio and the noise grade after each round of
  the in-sample loop (``preset="paper"``) or, for a cross-fitted fit, the out-of-fold
  log-likelihood that chose the number of rounds.
- :func:`plot_clean_proba`: histogram of each training row's probability that its label is
  wrong, optionally split by a mask of known flips.
- :func:`plot_suspects`: the training rows most likely mislabelled.
- :func:`plot_noise_matrix`: the noise matrix ``P(given label | true class)`` as a heat map,
  given labels by true classes, any number of classes.
- :func:`plot_gibbs_posterior`: the Gibbs posterior (Algorithm 2) of theta and xi against the
  variational estimates.

Functions that have nothing to draw for a model (an ELBO fitted with ``fixed_vi_iter``, noise
statistics without the noise model) raise a ValueError that says why.

Models of K > 2 classes (one tree per class per round, always cross-fitted): :func:`plot_elbo`
draws one line per class, :func:`plot_noise_paths` the cross-fitted log-likelihood,
:func:`plot_clean_proba`, :func:`plot_suspects` and :func:`plot_noise_matrix` their
statistics as for two classes; :func:`plot_gibbs_posterior` raises a ValueError (the Gibbs
sampler samples the binary model of Algorithm 2).

Every plot works alike for decision stumps (``preset="paper"``) and histogram trees (the robust
default, or ``max_leaf_nodes``/``leaf_weights``): they read the per-round records (``elbo_``,
``snr_path_``, ``noise_grade_path_``, ``cv_rounds_``) and the noise statistics, never the base
learners themselves. A fit with per-leaf weights starts with an intercept (a one-leaf tree),
which counts as round 1: the round axes say so.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import PowerNorm
from sklearn.utils.validation import check_is_fitted

from viboost._utils.io import atomic_write_bytes
from viboost.estimator import VIBoostClassifier
from viboost.gibbs.sampler import GibbsSampler

__all__ = [
    "plot_clean_proba",
    "plot_elbo",
    "plot_gibbs_posterior",
    "plot_noise_matrix",
    "plot_noise_paths",
    "plot_noise_rate_posterior",
    "plot_suspects",
    "write_plots",
]

#: Resolution of the PNG files written by :func:`write_plots`.
DPI = 120
_THRESHOLD = 0.5
_FELL_COLOR = "tab:red"


def _check_model(model: VIBoostClassifier) -> None:
    check_is_fitted(model, "estimators_")


def _cross_fitted(model: VIBoostClassifier) -> bool:
    """Whether the number of rounds was chosen by cross-fitting (the robust preset)."""
    return np.size(getattr(model, "cv_rounds_", ())) > 0


def _multiclass(model: VIBoostClassifier) -> bool:
    """Whether the model was fitted on K > 2 classes (one tree per class per round)."""
    return len(model.classes_) > 2


def _starts_with_intercept(model: VIBoostClassifier) -> bool:
    """Whether round 1 is the intercept of a per-leaf tree fit (a one-leaf tree; for K
    classes, one per class)."""
    first = model.estimators_[0] if len(model.estimators_) else None
    if isinstance(first, (list, tuple)):  # K classes: round 1's tree of the first class
        first = first[0] if first else None
    nodes = getattr(first, "nodes", None)
    return bool(getattr(first, "per_leaf", False)) and nodes is not None and nodes.size == 1


def _round_label(model: VIBoostClassifier) -> str:
    """The label of a per-round axis: ``"round"``, noting the intercept of a per-leaf tree fit."""
    return "round (1: the intercept)" if _starts_with_intercept(model) else "round"


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _mislabel_proba(model: VIBoostClassifier) -> np.ndarray:
    _check_model(model)
    if not model.noise_model:
        raise ValueError(
            "The model was fitted without the noise model (noise_model=False), so every "
            "P(label wrong) is 0 and there is nothing to plot; refit with noise_model=True."
        )
    return np.asarray(model.mislabel_proba_, dtype=float)


def plot_elbo(model: VIBoostClassifier, ax: Axes | None = None) -> Axes:
    """Plot the dynamic ELBO after each boosting round.

    For an in-sample fit (``preset="paper"``) each round's value is the last of its trace in
    ``elbo_``: the dynamic ELBO (S.5) after the round's last inner iteration. Rounds in which
    the ELBO fell at some inner iteration (the paper notes that it may) are marked with red
    crosses. For a cross-fitted fit (``preset="robust"``) and the core model
    (``noise_model=False``) the rounds run no inner loop and ``elbo_`` holds the exact log
    evidence of the core model (for a cross-fitted fit, of the final booster, every row counted
    ``s_n phi_n`` times); that is plotted instead, and the title says so. Stumps and trees
    alike; for a fit with per-leaf tree weights, round 1 is the intercept (a one-leaf tree) and
    the x axis says so. For a model of K > 2 classes, one line per class: the log evidence that
    each round of that class's ensemble recorded (the core model of its labels, the class
    against the rest, its margin against the log-sum-exp of the other classes' margins), when
    the fit recorded it.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    ax : matplotlib Axes or None, default=None
        Where to draw; None draws on a new figure.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on.

    Raises
    ------
    ValueError
        If no round recorded an ELBO (a model fitted with ``fixed_vi_iter``, or a K-class fit
        that recorded no per-round log evidence).

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import plot_elbo
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = VIBoostClassifier(10, preset="paper").fit(X, y)
    >>> ax = plot_elbo(model)
    >>> ax.get_xlabel()
    'round'
    """
    _check_model(model)
    if _multiclass(model):
        return _plot_class_elbo(model, ax)
    traces = [np.asarray(trace, dtype=float) for trace in model.elbo_]
    rounds = np.array([t + 1 for t, trace in enumerate(traces) if trace.size], dtype=int)
    if rounds.size == 0:
        raise _no_elbo_error(model)
    last = np.array([traces[t - 1][-1] for t in rounds])
    fell = np.array([bool(np.any(np.diff(traces[t - 1]) < 0)) for t in rounds])
    in_sample = bool(model.noise_model) and not _cross_fitted(model)

    ax = _axes(ax, (6.4, 4.0))
    marker = "." if rounds.size <= 200 else None
    ax.plot(rounds, last, marker=marker, color="tab:blue", label="after the round")
    if in_sample:
        ax.plot(
            rounds[fell],
            last[fell],
            "x",
            color=_FELL_COLOR,
            markersize=8,
            label=f"fell during the inner loop ({fell.sum()} of {rounds.size} rounds)",
        )
        ax.set_title("Dynamic ELBO (S.5) after each round")
        ax.set_ylabel("ELBO")
        ax.legend(loc="lower right")
    elif model.noise_model:
        ax.set_title(
            "Final fit of a cross-fitted model: core-model log evidence\n"
            "(no inner loop, so no ELBO; every row counted $s_n\\,\\phi_n$ times)",
            fontsize="medium",
        )
        ax.set_ylabel("log evidence log p(y | H)")
    else:
        ax.set_title("Core model (noise_model=False): log evidence after each round")
        ax.set_ylabel("log evidence log p(y | H)")
    ax.set_xlabel(_round_label(model))
    ax.grid(True, alpha=0.3)
    return ax


def _no_elbo_error(model: VIBoostClassifier) -> ValueError:
    return ValueError(
        f"The model has no ELBO to plot: it was fitted with fixed_vi_iter="
        f"{model.fixed_vi_iter!r}, which runs a fixed number of inner iterations per round "
        "and computes no ELBO (elbo_ holds empty arrays). Refit with fixed_vi_iter=None to "
        "record it."
    )


def _plot_class_elbo(model: VIBoostClassifier, ax: Axes | None) -> Axes:
    """:func:`plot_elbo` of a K-class model: one line per class."""
    names = [str(c) for c in model.classes_]
    last = np.full((len(model.elbo_), len(names)), np.nan)
    for t, per_class in enumerate(model.elbo_):
        for k, trace in enumerate(per_class):
            trace = np.asarray(trace, dtype=float)
            if trace.size:
                last[t, k] = trace[-1]
    if not np.isfinite(last).any():
        raise ValueError(
            f"The model has no ELBO to plot: a fit of {len(names)} classes records no "
            "per-round log evidence (elbo_ holds empty arrays); plot_noise_paths shows the "
            "cross-fitted log-likelihood that chose its number of rounds."
        )
    rounds = np.arange(1, last.shape[0] + 1)
    ax = _axes(ax, (6.4, 4.0))
    marker = "." if rounds.size <= 200 else None
    for k, name in enumerate(names):
        ax.plot(rounds, last[:, k], marker=marker, label=f"class {name}")
    weighted = "; every row counted $s_n\\,\\phi_n$ times" if model.noise_model else ""
    ax.set_title(
        f"{len(names)} classes: each class's core-model log evidence after each round\n"
        f"(the class against the rest, its margin against the others'{weighted})",
        fontsize="medium",
    )
    ax.set_ylabel("log evidence log p(y | H)")
    ax.set_xlabel(_round_label(model))
    ax.legend(loc="lower right", fontsize="small", ncol=1 if len(names) <= 8 else 2)
    ax.grid(True, alpha=0.3)
    return ax


def _as_axes_list(ax: Axes | Sequence[Axes] | np.ndarray | None) -> list[Axes] | None:
    if ax is None:
        return None
    if isinstance(ax, Axes):
        return [ax]
    axes = list(np.ravel(np.asarray(ax, dtype=object)))
    if not 1 <= len(axes) <= 2 or not all(isinstance(a, Axes) for a in axes):
        raise ValueError(f"ax must be None, one Axes or a pair of Axes; got {ax!r}.")
    return axes


def _object_array(axes: list[Axes]) -> np.ndarray:
    out = np.empty(len(axes), dtype=object)
    out[:] = axes
    return out


def plot_noise_paths(
    model: VIBoostClassifier, ax: Axes | Sequence[Axes] | np.ndarray | None = None
) -> np.ndarray:
    """Plot how the noise statistics evolved over the boosting rounds.

    For an in-sample fit (``preset="paper"``): the signal-to-noise ratio ``snr_path_``
    (``eta_1 / eta_2``; log scale when it spans more than two decades) and the noise grade
    ``noise_grade_path_`` (log-odds of a +1 among noisy labels) after each round, in two panels
    sharing the round axis.

    A cross-fitted fit (``preset="robust"``) fits the noise model once, after the rounds, so
    its paths are NaN; the plot then shows the out-of-fold marginal log-likelihood
    ``cv_log_likelihood_`` at each round count tried (``cv_rounds_``), with the chosen count
    marked and the final SNR and noise grade in the title (for a model of K > 2 classes, which
    has no noise grade, the SNR and the share of wrong labels).

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    ax : matplotlib Axes, pair of Axes or None, default=None
        Where to draw. None: a new figure (two stacked panels for the paths, one for the
        cross-fitted log-likelihood). One Axes: the paths share it, the noise grade on a
        twin y-axis at the right. A pair: one panel each (a cross-fitted fit uses the first).

    Returns
    -------
    axes : numpy.ndarray of matplotlib Axes, of shape (2,) or (1,)
        The panels drawn on, not a single Axes: of shape (2,) for the paths (the SNR panel, then
        the noise-grade panel; with one Axes given, that Axes and its twin), of shape (1,) for
        the cross-fitted log-likelihood.

    Raises
    ------
    ValueError
        If there is neither a path nor a cross-fitted log-likelihood (an in-sample fit
        without the noise model).

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import plot_noise_paths
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = VIBoostClassifier(10, preset="paper").fit(X, y)
    >>> snr_ax, grade_ax = plot_noise_paths(model)
    >>> grade_ax.get_ylabel()
    'noise grade xi'
    """
    _check_model(model)
    snr = np.asarray(model.snr_path_, dtype=float)
    grade = np.asarray(model.noise_grade_path_, dtype=float)
    given = _as_axes_list(ax)
    if np.isfinite(snr).any() or np.isfinite(grade).any():
        return _plot_paths(snr, grade, given, _round_label(model))
    if _cross_fitted(model):
        axis = given[0] if given else _axes(None, (6.4, 4.0))
        return _object_array([_plot_cv(model, axis)])
    raise ValueError(
        "The model has no noise paths to plot: it was fitted without the noise model "
        "(noise_model=False) and without cross-fitting, so snr_path_ and noise_grade_path_ are "
        "NaN and cv_log_likelihood_ is empty."
    )


def _plot_paths(
    snr: np.ndarray, grade: np.ndarray, given: list[Axes] | None, xlabel: str = "round"
) -> np.ndarray:
    rounds = np.arange(1, snr.size + 1)
    if given is None:
        fig, pair = plt.subplots(2, 1, sharex=True, figsize=(6.4, 5.0), layout="constrained")
        snr_ax, grade_ax = pair
        fig.suptitle("Noise statistics after each round (in-sample inner loop)")
        twin = False
    elif len(given) == 1:
        snr_ax = given[0]
        grade_ax = snr_ax.twinx()
        snr_ax.set_title("Noise statistics after each round (in-sample inner loop)")
        twin = True
    else:
        snr_ax, grade_ax = given
        twin = False
    snr_ax.plot(rounds, snr, color="tab:blue", label="SNR")
    finite = snr[np.isfinite(snr) & (snr > 0)]
    if finite.size and finite.max() / finite.min() > 100:
        snr_ax.set_yscale("log")
    snr_ax.set_ylabel("SNR  eta_1 / eta_2", color="tab:blue" if twin else "black")
    grade_ax.plot(rounds, grade, color="tab:orange", label="noise grade")
    grade_ax.axhline(0.0, color="grey", linewidth=0.8, linestyle=":")
    grade_ax.set_ylabel("noise grade xi", color="tab:orange" if twin else "black")
    grade_ax.set_xlabel(xlabel)
    snr_ax.set_xlabel(xlabel if twin else "")
    snr_ax.grid(True, alpha=0.3)
    if not twin:
        grade_ax.grid(True, alpha=0.3)
    return _object_array([snr_ax, grade_ax])


def _plot_cv(model: VIBoostClassifier, ax: Axes) -> Axes:
    rounds = np.asarray(model.cv_rounds_, dtype=int)
    score = np.asarray(model.cv_log_likelihood_, dtype=float)
    chosen = int(model.cv_best_rounds_)
    refit = len(model.estimators_)
    ax.plot(rounds, score, marker=".", color="tab:blue", label="out-of-fold log-likelihood")
    at = np.flatnonzero(rounds == chosen)
    ax.axvline(chosen, color="tab:red", linestyle="--", linewidth=1)
    label = f"chosen: {chosen} rounds (refit on all rows: {refit})"
    if at.size:
        ax.plot(chosen, score[at[0]], "o", color="tab:red", label=label)
    else:
        ax.plot([], [], "--", color="tab:red", label=label)
    if model.noise_model and _multiclass(model):
        what = "marginal log-likelihood of the noise model"
        title = (
            f"Cross-fitted, {len(model.classes_)} classes: {chosen} rounds chosen; final SNR "
            f"{model.snr_:.3g}, share of wrong labels {float(model.noise_rate_):.1%}"
        )
    elif model.noise_model:
        what = "marginal log-likelihood of the noise model"
        title = (
            f"Cross-fitted: {chosen} rounds chosen; final SNR {model.snr_:.3g}, "
            f"noise grade {model.noise_grade_:+.2f}"
        )
    else:
        what = "logistic log-likelihood"
        title = f"Cross-fitted core model: {chosen} rounds chosen"
    ax.set_title(title, fontsize="medium")
    ax.set_xlabel("rounds (the intercept included)" if _starts_with_intercept(model) else "rounds")
    ax.set_ylabel(f"out-of-fold {what}" if len(what) < 30 else "out-of-fold log-likelihood")
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    return ax


def plot_clean_proba(
    model: VIBoostClassifier,
    flipped: np.ndarray | Sequence[bool] | None = None,
    ax: Axes | None = None,
    bins: int = 20,
    log: bool = True,
) -> Axes:
    """Histogram of each training row's probability that its label is wrong.

    The plotted statistic is ``mislabel_proba_``, ``P(label wrong) = (1 - phi_n)
    sigmoid(-y_n F_n)``, not ``1 - clean_proba_``: a *noisy* label (``1 - phi_n``) is still
    right when the noise process's coin agrees with the truth, so ``clean_proba_`` mixes
    correct noisy labels in with wrong ones while ``mislabel_proba_`` separates flipped rows
    from the rest best. With ``flipped`` (a mask of known flips, e.g. from a simulation) two
    overlaid histograms compare the known flips with the other rows. The 0.5 threshold (a
    label more likely wrong than right) is marked.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model with the noise model.
    flipped : array-like of bool of shape (n_samples,) or None, default=None
        True for the training rows whose label is known to be wrong.
    ax : matplotlib Axes or None, default=None
        Where to draw; None draws on a new figure.
    bins : int, default=20
        Number of equal-width bins on [0, 1].
    log : bool, default=True
        Counts on a log scale (most rows sit near 0, the few suspects would be invisible on a
        linear one).

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on.

    Raises
    ------
    ValueError
        If the model was fitted without the noise model, or ``flipped`` is not a boolean mask
        of one entry per training row.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import plot_clean_proba
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> flipped = rng.random(100) < 0.1
    >>> y[flipped] = 1 - y[flipped]
    >>> model = VIBoostClassifier(10, preset="paper").fit(X, y)
    >>> ax = plot_clean_proba(model, flipped=flipped)
    >>> [text.get_text() for text in ax.get_legend().get_texts()][:2]
    ['known flips (n=12)', 'other rows (n=88)']
    """
    wrong = _mislabel_proba(model)
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive int; got {bins!r}.")
    # An uncalibrated (in-sample) fit may put every row far below 0.5: zoom on [0, max].
    upper = 1.0 if wrong.max(initial=0.0) > _THRESHOLD else max(float(wrong.max()), 1e-12)
    edges = np.linspace(0.0, upper, int(bins) + 1).tolist()  # matplotlib's hints: a sequence
    ax = _axes(ax, (7.4, 4.0))
    if flipped is None:
        ax.hist(wrong, bins=edges, color="tab:blue", label=f"all rows (n={wrong.size})")
    else:
        mask = np.asarray(flipped)
        if mask.dtype != bool or mask.shape != wrong.shape:
            raise ValueError(
                f"flipped must be a boolean mask with one entry per training row "
                f"({wrong.size}); got dtype {mask.dtype} and shape {mask.shape}."
            )
        ax.hist(
            wrong[mask],
            bins=edges,
            color="tab:red",
            alpha=0.6,
            label=f"known flips (n={int(mask.sum())})",
        )
        ax.hist(
            wrong[~mask],
            bins=edges,
            color="tab:blue",
            alpha=0.6,
            label=f"other rows (n={int((~mask).sum())})",
        )
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.7)
    if upper == 1.0:
        ax.axvline(_THRESHOLD, color="black", linestyle="--", linewidth=1, label="0.5")
        zoom = ""
    else:
        zoom = f"; all below 0.5, x axis up to the largest, {upper:.3g}"
    ax.set_xlim(0.0, upper)
    ax.set_xlabel("P(label wrong)  (mislabel_proba_)")
    ax.set_ylabel("rows" + (" (log scale)" if log else ""))
    calibrated = "calibrated" if _cross_fitted(model) else "a ranking, not calibrated"
    ax.set_title(f"P(label wrong) per training row\n({calibrated}{zoom})", fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax


def plot_suspects(
    model: VIBoostClassifier,
    top: int = 20,
    labels: Sequence[Any] | np.ndarray | None = None,
    ax: Axes | None = None,
    first_row: int = 1,
) -> Axes:
    """Horizontal bars of the training rows most likely mislabelled.

    The ``top`` rows with the highest ``mislabel_proba_`` (ties in row order), the most likely
    at the top, each labelled by its row number or by ``labels``; bars beyond the 0.5
    threshold (a label more likely wrong than right) are red, and the threshold is marked.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model with the noise model.
    top : int, default=20
        How many rows to show (all rows if fewer).
    labels : sequence of shape (n_samples,) or None, default=None
        A name per training row (e.g. IDs); None labels rows by number.
    ax : matplotlib Axes or None, default=None
        Where to draw; None draws on a new figure, its height growing with ``top``.
    first_row : int, default=1
        The number of the first training row: 1 numbers data rows from 1, 0 as Python
        indices.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on.

    Raises
    ------
    ValueError
        If the model was fitted without the noise model, ``top`` is not positive or
        ``labels`` has not one entry per training row.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import plot_suspects
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> y[:5] = 1 - y[:5]
    >>> model = VIBoostClassifier(10, preset="paper").fit(X, y)
    >>> ax = plot_suspects(model, top=5)
    >>> len(ax.patches)
    5
    """
    wrong = _mislabel_proba(model)
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ValueError(f"top must be a positive int; got {top!r}.")
    if labels is not None:
        labels = list(labels)
        if len(labels) != wrong.size:
            raise ValueError(
                f"labels must have one entry per training row ({wrong.size}); got {len(labels)}."
            )
    order = np.argsort(-wrong, kind="stable")[: int(top)]
    values = wrong[order]
    if labels is None:
        names = [f"row {int(i) + first_row}" for i in order]
    else:
        names = [str(labels[i]) for i in order]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 1.2 + 0.28 * order.size), layout="constrained")
    positions = np.arange(order.size)[::-1]  # the most likely at the top
    colors = np.where(values > _THRESHOLD, "tab:red", "tab:blue")
    ax.barh(positions, values, color=colors)
    ax.set_yticks(positions, names)
    for y, value in zip(positions, values, strict=True):
        inside = value > 0.85
        ax.text(
            value - 0.01 if inside else value + 0.01,
            y,
            f"{value:.2f}",
            va="center",
            ha="right" if inside else "left",
            fontsize="small",
            color="white" if inside else "black",
        )
    ax.axvline(_THRESHOLD, color="black", linestyle="--", linewidth=1)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-0.6, order.size - 0.4)
    ax.set_xlabel("P(label wrong)  (mislabel_proba_; dashed: 0.5)")
    n_issues = int(np.sum(wrong > _THRESHOLD))
    ax.set_title(
        f"Top {order.size} of {wrong.size} training rows by P(label wrong); {n_issues} above 0.5",
        fontsize="medium",
    )
    return ax


def plot_noise_matrix(
    model: VIBoostClassifier,
    ax: Axes | None = None,
    annotate: bool = True,
    cmap: str = "Blues",
    colorbar: bool = True,
    gamma: float = 0.5,
) -> Axes:
    """Heat map of the noise matrix ``P(given label | true class)``.

    Rows are the given (observed) labels, columns the true classes, both named by
    ``classes_``: cell (i, j) is ``noise_matrix_[i, j]``, the share of the rows of true class
    ``classes_[j]`` that carry the label ``classes_[i]`` (cleanlab's orientation: each column
    sums to 1, the diagonal is each class's share of correct labels). The colour scale runs
    from 0 to 1, as a power ``gamma`` of the value (the default, a square root, makes the small
    off-diagonal shares visible next to a diagonal near 1); each cell is annotated with its
    value in percent (NaN, a true class that no row is expected to have, is shown as ``n/a``),
    and the title gives the share of wrong labels with its interval. Works for two classes
    (``preset="paper"`` or ``"robust"``) and for K > 2; for an in-sample fit
    (``preset="paper"``) the matrix ranks but is not calibrated, and the title says so.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model with the noise model.
    ax : matplotlib Axes or None, default=None
        Where to draw; None draws on a new figure sized for the number of classes.
    annotate : bool, default=True
        Write each cell's value in it.
    cmap : str, default="Blues"
        A matplotlib colour map name.
    colorbar : bool, default=True
        Add a colour bar beside the Axes.
    gamma : float, default=0.5
        The colour of a value v is that of ``v ** gamma`` (:class:`matplotlib.colors.PowerNorm`);
        1 for a linear scale.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on.

    Raises
    ------
    ValueError
        If the model was fitted without the noise model, has no ``noise_matrix_`` (saved by a
        viboost version that did not estimate it), or ``gamma`` is not positive.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import plot_noise_matrix
    >>> X, y = load_iris(return_X_y=True)
    >>> model = VIBoostClassifier(random_state=0).fit(X, y)
    >>> ax = plot_noise_matrix(model)
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('true class', 'given label')
    >>> len(ax.texts)  # one annotation per cell
    9
    """
    _check_model(model)
    if not model.noise_model:
        raise ValueError(
            "The model was fitted without the noise model (noise_model=False): it has no noise "
            "matrix to plot; refit with noise_model=True."
        )
    if getattr(model, "noise_matrix_", None) is None:
        raise ValueError(
            "The model has no noise_matrix_: it was saved by a viboost version that did not "
            "estimate it; refit it to plot the noise matrix."
        )
    if isinstance(gamma, bool) or not isinstance(gamma, Real) or not gamma > 0:
        raise ValueError(f"gamma must be a positive number; got {gamma!r}.")
    matrix = np.asarray(model.noise_matrix_, dtype=float)
    names = [str(c) for c in model.classes_]
    n_classes = len(names)
    if ax is None:
        side = min(3.2 + 0.55 * n_classes, 12.0)
        _, ax = plt.subplots(figsize=(side + 1.2, side), layout="constrained")
    colours = matplotlib.colormaps[cmap].with_extremes(bad="lightgrey")  # NaN cells: grey
    image = ax.imshow(
        np.ma.masked_invalid(matrix),
        cmap=colours,
        norm=PowerNorm(float(gamma), vmin=0.0, vmax=1.0),
        interpolation="nearest",
    )
    ticks = np.arange(n_classes)
    if max(len(name) for name in names) > 3:  # long names: slanted
        ax.set_xticks(ticks, names, rotation=45, ha="right", rotation_mode="anchor")
    else:
        ax.set_xticks(ticks, names)
    ax.set_yticks(ticks, names)
    ax.set_xlabel("true class")
    ax.set_ylabel("given label")
    if annotate:
        size = "medium" if n_classes <= 6 else ("small" if n_classes <= 10 else "x-small")
        for i in range(n_classes):
            for j in range(n_classes):
                value = matrix[i, j]
                text = "n/a" if not np.isfinite(value) else f"{value:.1%}"
                dark = np.isfinite(value) and value**gamma > 0.6
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=size,
                    color="white" if dark else "black",
                )
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="P(given label | true class)", shrink=0.85)
    rate = float(getattr(model, "noise_rate_", np.nan))
    bounds = np.asarray(getattr(model, "noise_rate_interval_", (np.nan, np.nan)), dtype=float)
    if _cross_fitted(model) and np.all(np.isfinite(bounds)):
        what = f"share of wrong labels {rate:.1%} (90% interval {bounds[0]:.1%}-{bounds[1]:.1%})"
    elif _cross_fitted(model):
        what = f"share of wrong labels {rate:.1%}"
    else:
        what = "in-sample: a ranking, not calibrated"
    ax.set_title(f"Noise matrix P(given | true)\n({what})", fontsize="medium")
    return ax


def plot_noise_rate_posterior(
    model: VIBoostClassifier, ax: Axes | None = None, bins: int = 30
) -> Axes:
    """The posterior of the share of wrong training labels: the probability of "no noise" as a
    bar at 0, the noise model's posterior as a histogram beside it.

    What a cross-fitted model knows of the share (``noise_rate_draws_``, from
    :mod:`viboost.noise_fit.posterior`): with probability ``no_noise_proba_`` no label is
    wrong, otherwise the share is spread as the draws say. The shaded span is the 90% interval
    ``noise_rate_interval_`` and the line the estimate ``noise_rate_`` (the posterior mean).
    A tall bar at 0 and a wide histogram mean the labels cannot tell a little noise from none
    (``docs/label_noise.md``, "What the labels can say").

    Parameters
    ----------
    model : VIBoostClassifier
        A cross-fitted model (``preset="robust"``, the default) with the noise model.
    ax : matplotlib Axes or None, default=None
        Where to draw; None draws on a new figure.
    bins : int, default=30
        Bins of the histogram over the range of the draws.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on.

    Raises
    ------
    ValueError
        If the model has no posterior of the noise model (fitted in-sample or without the
        noise model, or saved by a viboost version that did not keep it), or ``bins`` is not
        a positive integer.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import plot_noise_rate_posterior
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = VIBoostClassifier(random_state=0).fit(X, y)
    >>> ax = plot_noise_rate_posterior(model)
    >>> ax.get_xlabel()
    'share of wrong training labels'
    """
    _check_model(model)
    if isinstance(bins, bool) or not isinstance(bins, Integral) or bins < 1:
        raise ValueError(f"bins must be a positive integer; got {bins!r}.")
    if not model.noise_model or not _cross_fitted(model):
        raise ValueError(
            "The model has no posterior of the noise model to plot: it is kept by cross-fitted "
            "fits with the noise model (preset='robust', noise_model=True)."
        )
    draws = getattr(model, "noise_rate_draws_", None)
    if draws is None or np.shape(draws)[0] == 0:
        raise ValueError(
            "The model has no noise_rate_draws_: it was saved by a viboost version that did "
            "not keep the posterior of the noise rate; refit it to plot that posterior."
        )
    draws = np.asarray(draws, dtype=float)
    values, probabilities = draws[:, 0], draws[:, 1]
    none = float(probabilities[0])  # the first row: no noise, at 0
    ax = _axes(ax, (6.0, 3.6))
    noisy_values, noisy_weights = values[1:], probabilities[1:]
    top = float(np.nanmax(noisy_values)) if noisy_values.size else 0.0
    edges = np.linspace(0.0, max(top, 1e-3) * 1.02, int(bins) + 1)
    width = edges[1] - edges[0]
    if noisy_values.size:
        ax.hist(noisy_values, bins=edges, weights=noisy_weights, color="tab:blue", alpha=0.7,
                label=f"noise model (P = {1.0 - none:.2f})")  # fmt: skip
    ax.bar([0.0], [none], width=width * 0.6, color="tab:green",
           label=f"no noise (P = {none:.2f})")  # fmt: skip
    bounds = np.asarray(model.noise_rate_interval_, dtype=float)
    if np.all(np.isfinite(bounds)):
        ax.axvspan(bounds[0], bounds[1], color="grey", alpha=0.15,
                   label=f"90% interval {bounds[0]:.1%}-{bounds[1]:.1%}")  # fmt: skip
    rate = float(model.noise_rate_)
    ax.axvline(rate, color="black", linestyle="--", linewidth=1.0,
               label=f"estimate {rate:.1%}")  # fmt: skip
    ax.set_xlabel("share of wrong training labels")
    ax.set_ylabel("posterior probability (per bin)")
    ax.set_xlim(-width, edges[-1] + width)
    ax.set_title("Posterior of the share of wrong labels", fontsize="medium")
    ax.legend(fontsize="small", frameon=False)
    return ax


def _gibbs_draws(samples: Any) -> tuple[np.ndarray, np.ndarray]:
    """theta and xi draws (flattened over chains) from a sampler, InferenceData or mapping."""
    if isinstance(samples, GibbsSampler):
        check_is_fitted(samples, "clean_rate_draws_")
        theta, xi = samples.clean_rate_draws_, samples.noise_grade_draws_
    elif hasattr(samples, "posterior"):  # arviz.InferenceData
        theta, xi = samples.posterior["theta"], samples.posterior["xi"]
    elif isinstance(samples, Mapping):
        if "theta" not in samples or "xi" not in samples:
            raise ValueError(
                f"A mapping of draws needs the keys 'theta' and 'xi'; got {sorted(samples)}."
            )
        theta, xi = samples["theta"], samples["xi"]
    else:
        raise TypeError(
            "samples_or_sampler_result must be a fitted GibbsSampler, the InferenceData of its "
            "to_inference_data() or a mapping with draws 'theta' and 'xi'; got "
            f"{type(samples).__name__}."
        )
    theta = np.ravel(np.asarray(theta, dtype=float))
    xi = np.ravel(np.asarray(xi, dtype=float))
    if theta.size == 0 or xi.size == 0:
        raise ValueError("The Gibbs sampler result holds no draws of theta and xi.")
    return theta, xi


def _vi_theta(model: VIBoostClassifier) -> tuple[float, str]:
    calibration = getattr(model, "noise_calibration_", None)
    if calibration is not None:
        return float(calibration.theta), "VI (cross-fitted calibration)"
    eta = np.asarray(model.eta_, dtype=float)
    return float(eta[0] / eta.sum()), "VI: E[theta] = eta_1 / (eta_1 + eta_2)"


def plot_gibbs_posterior(
    samples_or_sampler_result: Any,
    model: VIBoostClassifier,
    ax: Sequence[Axes] | np.ndarray | None = None,
    bins: int = 40,
) -> np.ndarray:
    """The Gibbs posterior of theta and xi against VIBoost's variational estimates.

    Two panels: histograms (densities, all chains pooled) of the draws of theta (the
    probability that a label is true) and of xi (the noise grade), with the posterior means
    (dashed) and VIBoost's estimates (solid red): for theta ``noise_calibration_.theta`` when
    cross-fitted, else the mean ``eta_1 / (eta_1 + eta_2)`` of q(theta); for xi
    ``noise_grade_`` (the mode of q(xi)).

    Parameters
    ----------
    samples_or_sampler_result : GibbsSampler, arviz.InferenceData or mapping
        A fitted :class:`~viboost.gibbs.sampler.GibbsSampler` (for instance run with
        ``classifier=model``), the result of its ``to_inference_data()``, or a mapping with
        arrays of draws ``"theta"`` and ``"xi"``.
    model : VIBoostClassifier
        The fitted VIBoost model to compare with (with the noise model).
    ax : pair of matplotlib Axes or None, default=None
        Where to draw (theta, xi); None draws on a new figure with two panels.
    bins : int, default=40
        Histogram bins per panel.

    Returns
    -------
    axes : numpy.ndarray of matplotlib Axes, of shape (2,)
        The panels drawn on, not a single Axes: the theta panel, then the xi panel.

    Raises
    ------
    ValueError
        If the model was fitted without the noise model or on more than two classes (the
        Gibbs sampler samples the binary model of Algorithm 2), or there are no draws.
    TypeError
        If ``samples_or_sampler_result`` is of none of the accepted types.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import GibbsSampler, VIBoostClassifier
    >>> from viboost.plotting import plot_gibbs_posterior
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = VIBoostClassifier(10, preset="paper").fit(X, y)
    >>> gibbs = GibbsSampler(100, n_burnin=50, n_chains=2, classifier=model,
    ...                      store_row_draws=False, random_state=0).fit(X, y)
    >>> theta_ax, xi_ax = plot_gibbs_posterior(gibbs, model)
    >>> theta_ax.get_xlabel(), xi_ax.get_xlabel()
    ('theta (P(label true))', 'xi (noise grade)')
    """
    _check_model(model)
    if _multiclass(model):
        raise ValueError(
            f"plot_gibbs_posterior compares the Gibbs posterior of theta and xi, the binary model "
            f"of Algorithm 2, with a two-class fit; this model has {len(model.classes_)} classes "
            "(no noise grade xi: its noise-type labels follow a distribution pi over the "
            "classes), and the Gibbs sampler does not sample K classes yet."
        )
    if not model.noise_model:
        raise ValueError(
            "The model was fitted without the noise model (noise_model=False): it has no "
            "estimate of theta and xi to compare with the Gibbs posterior."
        )
    theta, xi = _gibbs_draws(samples_or_sampler_result)
    if ax is None:
        fig, pair = plt.subplots(1, 2, figsize=(9.0, 4.6), layout="constrained")
        fig.suptitle(f"Gibbs posterior ({theta.size} draws) vs variational estimates")
    else:
        pair = list(np.ravel(np.asarray(ax, dtype=object)))
        if len(pair) != 2 or not all(isinstance(a, Axes) for a in pair):
            raise ValueError(f"ax must be None or a pair of Axes; got {ax!r}.")
    theta_vi, theta_what = _vi_theta(model)
    panels = [
        (pair[0], theta, theta_vi, theta_what, "theta (P(label true))"),
        (pair[1], xi, float(model.noise_grade_), "VI: noise_grade_ (mode of q(xi))", ""),
    ]
    for axis, draws, vi, vi_label, xlabel in panels:
        axis.hist(draws, bins=bins, density=True, color="tab:blue", alpha=0.5, label="Gibbs")
        axis.axvline(
            float(draws.mean()), color="tab:blue", linestyle="--", label="Gibbs posterior mean"
        )
        axis.axvline(vi, color="tab:red", linewidth=2, label=vi_label)
        axis.set_xlabel(xlabel or "xi (noise grade)")
        axis.set_ylabel("density")
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize="small")
    return _object_array(list(pair))


def write_plots(
    model: VIBoostClassifier,
    directory: str | os.PathLike[str],
    flipped: np.ndarray | Sequence[bool] | None = None,
    top: int = 20,
    labels: Sequence[Any] | np.ndarray | None = None,
    gibbs: Any = None,
) -> list[Path]:
    """Write every plot that applies to ``model`` as PNG files into ``directory``.

    The files are ``elbo.png`` (:func:`plot_elbo`), ``noise_paths.png``
    (:func:`plot_noise_paths`), ``mislabel_proba.png`` (:func:`plot_clean_proba`),
    ``suspects.png`` (:func:`plot_suspects`), ``noise_matrix.png`` (:func:`plot_noise_matrix`),
    ``noise_rate_posterior.png`` (:func:`plot_noise_rate_posterior`, cross-fitted models) and,
    with ``gibbs``, ``gibbs_posterior.png`` (:func:`plot_gibbs_posterior`); a plot that
    does not apply (no ELBO with ``fixed_vi_iter``, no noise statistics without the noise
    model) is skipped. Each file is
    written atomically (a temporary file in ``directory``, renamed onto the name), at
    120 dpi, and its figure closed.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    directory : str or os.PathLike
        Where to write; created (with its parents) if missing. Existing files of the same
        names are replaced.
    flipped : array-like of bool of shape (n_samples,) or None, default=None
        Known flips, passed to :func:`plot_clean_proba`.
    top : int, default=20
        Rows shown by :func:`plot_suspects`.
    labels : sequence of shape (n_samples,) or None, default=None
        Row names for :func:`plot_suspects`.
    gibbs : GibbsSampler, arviz.InferenceData, mapping or None, default=None
        Gibbs draws for :func:`plot_gibbs_posterior`; None skips that plot.

    Returns
    -------
    paths : list of pathlib.Path
        The files written, in the order above.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> from viboost.plotting import write_plots
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = VIBoostClassifier(10, preset="paper").fit(X, y)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     [path.name for path in write_plots(model, tmp)]
    ['elbo.png', 'noise_paths.png', 'mislabel_proba.png', 'suspects.png', 'noise_matrix.png']
    """
    _check_model(model)
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    plots = [
        ("elbo.png", lambda: plot_elbo(model)),
        ("noise_paths.png", lambda: plot_noise_paths(model)),
        ("mislabel_proba.png", lambda: plot_clean_proba(model, flipped=flipped)),
        ("suspects.png", lambda: plot_suspects(model, top=top, labels=labels)),
        ("noise_matrix.png", lambda: plot_noise_matrix(model)),
        ("noise_rate_posterior.png", lambda: plot_noise_rate_posterior(model)),
    ]
    if gibbs is not None:
        plots.append(("gibbs_posterior.png", lambda: plot_gibbs_posterior(gibbs, model)))
    written = []
    for name, draw in plots:
        before = set(plt.get_fignums())
        try:
            result = draw()
        except ValueError as error:
            if "noise model" in str(error) or "no ELBO" in str(error):
                _close_new(before)
                continue  # the plot does not apply to this model
            _close_new(before)
            raise
        except BaseException:
            _close_new(before)
            raise
        figure = np.ravel(np.asarray(result, dtype=object))[0].figure
        path = target / name
        try:
            png = io.BytesIO()
            figure.savefig(png, format="png", dpi=DPI)
            atomic_write_bytes(path, png.getvalue())
        finally:
            plt.close(figure)
        written.append(path)
    return written


def _close_new(before: set[int]) -> None:
    """Close the figures opened since ``before`` (a plot that failed half-way)."""
    for number in set(plt.get_fignums()) - before:
        plt.close(number)
