"""Finding label noise: per-row label quality, the rows most likely mislabeled, the flip rate.

Three functions over one fit of :class:`~viboost.VIBoostClassifier` (by default the noise-robust
preset, whose noise statistics are cross-fitted and calibrated, see :mod:`viboost.presets`):

- :func:`label_quality_scores`: per row, the posterior probability that its label is *correct*
  (``1 - mislabel_proba_``); low scores are the suspects, as in cleanlab;
- :func:`find_label_issues`: the rows whose label is more likely wrong than right (a boolean
  mask), or all rows ranked most suspicious first, with cleanlab's argument names and return
  shapes;
- :func:`estimate_flip_rate`: the share of wrong labels and the flip rate of each true class
  (for two classes the binary channel of S.2), each with a credible interval, and the noise
  matrix.

Any number of classes: for K > 2 the fit is the K-class noise model
(:mod:`viboost.noise_fit.class_calibration`) and the same functions read it.

Each takes the features and the (possibly noisy) labels and either fits an estimator or uses one
already fitted on exactly these rows. The probabilities are calibrated when the estimator was
cross-fitted (``noise_fit="cross-fit"``, the default); with ``preset="paper"`` they come from
Algorithm 1's in-sample posterior, rank rows but are not calibrated, and have no intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import column_or_1d

from viboost._utils.validation import check_probability
from viboost.estimator import VIBoostClassifier

#: What the functions' ``random_state`` may be: what :class:`~viboost.estimator.VIBoostClassifier`
#: accepts (scikit-learn's convention; no Generator).
SeedLike = int | np.random.RandomState | None

__all__ = ["FlipRateEstimate", "estimate_flip_rate", "find_label_issues", "label_quality_scores"]


@dataclass(frozen=True)
class FlipRateEstimate:
    """How many training labels are wrong, by the noise model.

    Attributes
    ----------
    rate : float
        Estimated share of labels that differ from their row's true class.
    interval : ndarray of shape (2,)
        Equal-tailed credible interval of ``rate`` at ``level`` (NaN when not calibrated).
    class_rates : ndarray of shape (n_classes,)
        ``class_rates[k]``: the share of rows whose true class is ``classes[k]`` that carry
        another label (for two classes, the channel of S.2: ``b`` and then ``a``).
    class_intervals : ndarray of shape (n_classes, 2)
        Credible intervals of ``class_rates``, one row per class.
    n_wrong : float
        Expected number of wrong labels (the sum of ``mislabel_proba_``, weighted).
    classes : ndarray of shape (n_classes,)
        The classes, in the estimator's order.
    noise_matrix : ndarray of shape (n_classes, n_classes) or None
        ``P(given label i | true class j)`` (cleanlab's orientation: columns sum to 1), the
        estimator's ``noise_matrix_`` (None for models saved before it existed).
    level : float
        Probability mass of the intervals.
    calibrated : bool
        Whether the numbers come from a cross-fitted (calibrated) fit.
    """

    rate: float
    interval: np.ndarray
    class_rates: np.ndarray
    class_intervals: np.ndarray
    n_wrong: float
    classes: np.ndarray
    level: float
    calibrated: bool
    noise_matrix: np.ndarray | None = None


def _fitted(
    X,
    labels,
    estimator: VIBoostClassifier | None,
    sample_weight,
    cv: int | None,
    random_state: SeedLike,
) -> VIBoostClassifier:
    """``estimator`` if it is fitted (on these rows), else a fitted clone of it (or of the
    default VIBoostClassifier)."""
    labels = column_or_1d(labels, warn=True)
    if estimator is None:
        estimator = VIBoostClassifier(random_state=random_state)
    if not isinstance(estimator, VIBoostClassifier):
        raise TypeError(
            "estimator must be a VIBoostClassifier (fitted on these rows, or not fitted), got "
            f"{type(estimator).__name__}."
        )
    if hasattr(estimator, "estimators_") and cv is None:
        n_fitted = estimator.clean_proba_.shape[0]
        if n_fitted != labels.shape[0]:
            raise ValueError(
                f"The fitted estimator was fitted on {n_fitted} rows but {labels.shape[0]} "
                "labels were given; pass the rows it was fitted on, or an unfitted estimator."
            )
        return estimator
    model = clone(estimator)
    if cv is not None:
        model.set_params(cv=cv, noise_fit="cross-fit")
    return model.fit(X, labels, sample_weight=sample_weight)


def label_quality_scores(
    X,
    labels,
    *,
    estimator: VIBoostClassifier | None = None,
    sample_weight=None,
    cv: int | None = None,
    random_state: SeedLike = None,
) -> np.ndarray:
    """Per row, the posterior probability that its label is correct.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Features.
    labels : array-like of shape (n_samples,)
        The observed, possibly noisy, labels (two or more classes).
    estimator : VIBoostClassifier, default=None
        Fitted on exactly ``X, labels``: used as is. Not fitted: cloned and fitted. None: the
        default ``VIBoostClassifier(random_state=random_state)``.
    sample_weight : array-like of shape (n_samples,), default=None
        Passed to ``fit`` when the estimator is fitted here.
    cv : int, default=None
        Number of cross-fitting folds; set, it refits a clone with ``noise_fit="cross-fit"``
        and this many folds. None keeps the estimator's own setting.
    random_state : int, RandomState instance or None, default=None
        Seeds the default estimator.

    Returns
    -------
    ndarray of shape (n_samples,)
        ``1 - P(label wrong)``, in [0, 1]; the lowest are the most suspicious rows.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.noise import label_quality_scores
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> flipped = rng.random(400) < 0.15
    >>> y[flipped] = 1 - y[flipped]
    >>> scores = label_quality_scores(X, y, random_state=0)
    >>> bool(scores[flipped].mean() < scores[~flipped].mean())
    True
    """
    model = _fitted(X, labels, estimator, sample_weight, cv, random_state)
    return 1.0 - model.mislabel_proba_


def find_label_issues(
    X,
    labels,
    *,
    estimator: VIBoostClassifier | None = None,
    sample_weight=None,
    filter_by: str = "posterior",
    return_indices_ranked_by: str | None = None,
    frac_noise: float = 1.0,
    num_to_remove_per_class: list[int] | None = None,
    cv: int | None = None,
    random_state: SeedLike = None,
) -> np.ndarray:
    """The rows whose label is likely wrong, as a mask or ranked most suspicious first.

    The argument names and return shapes follow ``cleanlab.filter.find_label_issues``.

    Parameters
    ----------
    X, labels, estimator, sample_weight, cv, random_state
        As in :func:`label_quality_scores`.
    filter_by : {"posterior", "expected_count"}, default="posterior"
        ``"posterior"``: the rows whose label is more likely wrong than right
        (``mislabel_proba_ > 0.5``, the Bayes decision row by row). ``"expected_count"``: the
        ``round(frac_noise * n_wrong)`` most suspicious rows, ``n_wrong`` being the expected
        number of wrong labels (the sum of ``mislabel_proba_``).
    return_indices_ranked_by : {None, "self_confidence"}, default=None
        None returns a boolean mask. ``"self_confidence"`` returns the indices of the flagged
        rows, lowest label quality (:func:`label_quality_scores`, the posterior probability of
        the given label) first. cleanlab's other rankings are scores of a classifier's
        ``pred_probs`` and have no counterpart here.
    frac_noise : float, default=1.0
        With ``filter_by="expected_count"``, the share of the expected count to flag.
    num_to_remove_per_class : list of int, default=None
        If given, flag exactly this many rows per observed class (in the order of
        ``classes_``), the most suspicious of each, instead of ``filter_by``.

    Returns
    -------
    ndarray
        Boolean mask of shape (n_samples,), or int indices ranked most suspicious first.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.noise import find_label_issues
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> flipped = rng.random(400) < 0.15
    >>> y[flipped] = 1 - y[flipped]
    >>> issues = find_label_issues(X, y, random_state=0)
    >>> bool(flipped[issues].mean() > 0.5)  # most flagged rows really are flipped
    True
    """
    if filter_by not in ("posterior", "expected_count"):
        raise ValueError(f"filter_by must be 'posterior' or 'expected_count', got {filter_by!r}.")
    if return_indices_ranked_by not in (None, "self_confidence"):
        raise ValueError(
            "return_indices_ranked_by must be None or 'self_confidence' (the posterior "
            f"probability of the given label), got {return_indices_ranked_by!r}."
        )
    frac_noise = check_probability(frac_noise, "frac_noise")
    model = _fitted(X, labels, estimator, sample_weight, cv, random_state)
    wrong = model.mislabel_proba_
    order = np.argsort(-wrong, kind="stable")  # most suspicious first
    issues = np.zeros(wrong.shape[0], dtype=bool)
    if num_to_remove_per_class is not None:
        observed = column_or_1d(labels)
        if len(num_to_remove_per_class) != model.classes_.shape[0]:
            raise ValueError(
                f"num_to_remove_per_class needs one count per class ({model.classes_.size}), "
                f"got {len(num_to_remove_per_class)}."
            )
        for cls, count in zip(model.classes_, num_to_remove_per_class, strict=True):
            if count < 0:
                raise ValueError(f"num_to_remove_per_class must be >= 0, got {count}.")
            in_class = order[observed[order] == cls]
            issues[in_class[: int(count)]] = True
    elif filter_by == "posterior":
        issues = wrong > 0.5
    else:
        weights = np.ones_like(wrong) if sample_weight is None else np.asarray(sample_weight)
        issues[order[: int(round(frac_noise * float(np.dot(weights, wrong))))]] = True
    if return_indices_ranked_by is None:
        return issues
    return order[issues[order]]


def estimate_flip_rate(
    X,
    labels,
    *,
    estimator: VIBoostClassifier | None = None,
    sample_weight=None,
    level: float = 0.9,
    cv: int | None = None,
    random_state: SeedLike = None,
) -> FlipRateEstimate:
    """The share of wrong labels and each class's flip rate, with credible intervals.

    Parameters
    ----------
    X, labels, estimator, sample_weight, cv, random_state
        As in :func:`label_quality_scores`.
    level : float, default=0.9
        Probability mass of the credible intervals: quantiles of the noise posterior, the
        model average of "no noise" and the noise model
        (:meth:`viboost.noise_fit.posterior.NoisePosterior.intervals`).

    Returns
    -------
    FlipRateEstimate

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.noise import estimate_flip_rate
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> flipped = rng.random(1000) < 0.2
    >>> y[flipped] = 1 - y[flipped]
    >>> est = estimate_flip_rate(X, y, random_state=0)

    Labels and features alone cannot tell a fifth of the labels flipped at random from classes
    that overlap by as much where the ensemble is surest (``docs/label_noise.md``, "What the
    labels can say"): the interval starts at "no noise" and ends near the flipped share.

    >>> float(est.interval[0]), bool(abs(est.interval[1] - flipped.mean()) < 0.05)
    (0.0, True)
    """
    level = check_probability(level, "level")
    model = _fitted(X, labels, estimator, sample_weight, cv, random_state)
    calibration = model.noise_calibration_
    weights = (
        np.ones(model.mislabel_proba_.shape[0])
        if sample_weight is None
        else np.asarray(sample_weight, dtype=float)
    )
    intervals = np.vstack([model.noise_rate_interval_, model.flip_rates_interval_])
    if calibration is not None and level != 0.9:
        observed = column_or_1d(labels)
        if model.classes_.size > 2:
            y = np.searchsorted(model.classes_, observed)
        else:
            y = np.where(observed == model.classes_[1], 1.0, -1.0)
        intervals = calibration.flip_rate_interval(
            y, model.cv_decision_function_, weights, level=level, random_state=random_state
        )
    return FlipRateEstimate(
        rate=model.noise_rate_,
        interval=intervals[0],
        class_rates=model.flip_rates_,
        class_intervals=intervals[1:],
        n_wrong=float(np.dot(weights, model.mislabel_proba_)),
        classes=model.classes_,
        level=level,
        calibrated=calibration is not None,
        noise_matrix=getattr(model, "noise_matrix_", None),
    )
