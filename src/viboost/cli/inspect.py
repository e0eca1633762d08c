"""``viboost inspect``: describe a saved model.

How it was fitted (its preset and ``plan_``, the base learner among it), its rounds and classes,
the noise statistics, the base learners (the first stumps; for trees, the number of trees, their
leaves and depths, the top features by ``feature_importances_`` and the first trees), a summary
of the ELBO trajectory (with a sparkline) and, for a cross-fitted model, the out-of-fold
log-likelihood at the chosen number of rounds.

A model of K > 2 classes has one tree per class in each round: its trees are listed by round
and class, its noise statistics are each true class's flip rate and the noise matrix
``P(given label | true class)``, and its ELBO summary has one line per class.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np

from viboost.cli.common import (
    fmt,
    format_table,
    interval,
    is_calibrated,
    is_cross_fitted,
    is_multiclass,
    learner_phrase,
    load_model,
    no_noise_lines,
    pct,
    rounds_phrase,
    uncalibrated_reason,
    write_model_plots,
)
from viboost.cli.options import add_plots_option, positive_int

if TYPE_CHECKING:
    from viboost.estimator import VIBoostClassifier

# The marks of the ELBO sparkline, low to high; ASCII where stdout cannot encode the blocks.
_SPARK_UNICODE = "▁▂▃▄▅▆▇█"
_SPARK_ASCII = "_.-:=+*#"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``viboost inspect`` and its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "inspect",
        help="describe a fitted model",
        description="Print the preset and how the model was fitted, rounds, classes, the "
        "noise statistics (share of wrong labels with its interval and the calibration for a "
        "cross-fitted model; SNR, noise grade, eta, omega), the base learners (the first "
        "stumps; for trees: how many, their leaves and depths, the top features by importance "
        "and the first trees), a summary of the ELBO trajectory (for a cross-fitted model: the "
        "core model's log evidence of the final fit) and the cross-fitted log-likelihood at "
        "the chosen number of rounds. For a model of more than two classes: one tree per class "
        "per round, each true class's flip rate and the noise matrix.",
    )
    parser.add_argument("model", metavar="MODEL", help="model file written by 'viboost fit'")
    parser.add_argument(
        "--learners",
        "--stumps",
        dest="learners",
        type=positive_int,
        default=10,
        metavar="N",
        help="number of base learners (stumps or trees) to list (default: 10)",
    )
    parser.add_argument(
        "--top-features",
        type=positive_int,
        default=10,
        metavar="K",
        help="for a tree model, the number of features to list by feature_importances_ "
        "(default: 10)",
    )
    add_plots_option(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print a description of the model file."""
    from viboost.boosting.stumps import DecisionStump

    model = load_model(args.model)
    n_rounds = len(model.estimators_)
    classes = ", ".join(str(c) for c in model.classes_)
    rounds = rounds_phrase(model).removeprefix(f"{n_rounds} rounds")
    multiclass = is_multiclass(model)
    if multiclass:
        classes_line = (
            f"classes: {classes} ({len(model.classes_)} classes: one tree per class in each round)"
        )
    else:
        classes_line = f"classes: {classes} (positive class, +1: {model.classes_[1]})"
    lines = [
        f"VIBoostClassifier from {args.model}",
        *_fit_lines(model),
        f"rounds: {n_rounds}{rounds}",
        classes_line,
        f"features: {model.n_features_in_}",
    ]
    if model.noise_model and multiclass:
        eta1, eta2 = (float(v) for v in model.eta_)
        omega = ", ".join(fmt(float(v), 6) for v in model.omega_)
        lines += _class_noise_rate_lines(model)
        lines += [
            f"SNR (eta1/eta2): {fmt(model.snr_)} "
            f"(expected share of labels drawn from the signal {eta1 / (eta1 + eta2):.1%})",
            "noise grade: n/a (K classes: noise-type labels follow pi, a distribution over the "
            "classes, q(pi) = Dirichlet(omega))",
            f"eta: [{fmt(eta1, 6)}, {fmt(eta2, 6)}]",
            f"omega: [{omega}]",
        ]
    elif model.noise_model:
        eta1, eta2 = (float(v) for v in model.eta_)
        omega1, omega2 = (float(v) for v in model.omega_)
        lines += _noise_rate_lines(model)
        lines += [
            f"SNR (eta1/eta2): {fmt(model.snr_)} "
            f"(expected share of labels drawn from the signal {eta1 / (eta1 + eta2):.1%})",
            f"noise grade (log(omega2/omega1)): {fmt(model.noise_grade_)}",
            f"eta: [{fmt(eta1, 6)}, {fmt(eta2, 6)}]",
            f"omega: [{fmt(omega1, 6)}, {fmt(omega2, 6)}]",
        ]
    else:
        lines += [
            "SNR: n/a (noise model off)",
            "noise grade: n/a (noise model off)",
            "share of wrong labels: n/a (noise model off)",
        ]
    shown = min(args.learners, n_rounds * (len(model.classes_) if multiclass else 1))
    if not multiclass and all(isinstance(learner, DecisionStump) for learner in model.estimators_):
        lines += [
            "",
            f"first {shown} of {n_rounds} stumps, h(x) = polarity if x[feature] > threshold "
            "else -polarity",
            "(+1 votes for the positive class; 'missing' is the side a NaN value goes to):",
        ]
        header = ["round", "feature", "threshold", "polarity", "alpha", "missing"]
        lines += format_table(header, _stump_rows(model, shown), right={0, 2, 3, 4})
    else:
        lines += ["", *_tree_lines(model, shown, args.top_features)]
    lines += ["", *(_class_elbo_lines(model) if multiclass else _elbo_lines(model))]
    cross = _cross_fit_lines(model)
    if cross:
        lines += ["", *cross]
    lines += write_model_plots(model, args.plots, top=20)
    print("\n".join(lines))
    return 0


def _feature_name(model: VIBoostClassifier, index: int) -> str:
    names = getattr(model, "feature_names_in_", None)
    return str(names[index]) if names is not None else f"x[{index}]"


def _fit_lines(model: VIBoostClassifier) -> list[str]:
    """How the model was fitted: the preset and its plan (``plan_``)."""
    plan = model.plan_
    preset = getattr(model, "preset", "paper")
    if is_cross_fitted(model):
        noise_fit = "cross-fit"
        how = f"rounds chosen by cross-fitting, cv={getattr(model, 'cv', '?')}"
        n_splits = getattr(model, "cv_n_splits_", 0)
        if n_splits:
            how += f" ({n_splits} folds)"
        if model.noise_model:
            how += ", noise model calibrated on out-of-fold margins"
    else:
        noise_fit = "in-sample"
        how = "fixed rounds" + (", Algorithm 1's inner loop" if model.noise_model else "")
    return [
        f"preset: {preset} (noise_fit: {noise_fit}; {how})",
        f"learning rate: {fmt(plan.learning_rate)}, alpha: {plan.alpha}, "
        f"noise model: {'on' if model.noise_model else 'off'}",
        f"base learners: {learner_phrase(plan)}",
    ]


def _noise_rate_lines(model: VIBoostClassifier) -> list[str]:
    """The share of wrong labels and the flip rate of each class, NaN-safe."""
    if not hasattr(model, "mislabel_proba_"):  # saved before viboost estimated flip rates
        return ["share of wrong labels: n/a (the model predates it; refit to get it)"]
    n_rows = model.mislabel_proba_.size
    c0, c1 = (str(c) for c in model.classes_)
    rate = float(model.noise_rate_)
    flips = np.asarray(model.flip_rates_, dtype=float)
    flip_intervals = np.asarray(model.flip_rates_interval_, dtype=float)
    lines = [
        f"share of wrong labels: {pct(rate)} ({interval(model.noise_rate_interval_)}), "
        f"about {np.sum(model.mislabel_proba_):.1f} of {n_rows:,} rows",
        f"  true {c0} labelled {c1}: {pct(flips[0])} ({interval(flip_intervals[0])})",
        f"  true {c1} labelled {c0}: {pct(flips[1])} ({interval(flip_intervals[1])})",
    ]
    if is_calibrated(model):
        calibration = model.noise_calibration_
        assert calibration is not None  # is_calibrated
        lines += no_noise_lines(model)
        lines += [
            "calibration (empirical Bayes on the out-of-fold margins):",
            f"  theta (share of labels drawn from the signal) {fmt(calibration.theta)}, noise "
            f"grade xi {fmt(calibration.noise_grade)}, scale of the margin "
            f"{fmt(calibration.scale)}",
        ]
    else:
        lines.append(
            f"  (a ranking statistic, not calibrated ({uncalibrated_reason(model)}): no intervals)"
        )
    return lines


def _class_noise_rate_lines(model: VIBoostClassifier) -> list[str]:
    """The share of wrong labels, each true class's flip rate and the noise matrix of a K-class
    model (cross-fitted and calibrated), NaN-safe."""
    n_rows = model.mislabel_proba_.size
    names = [str(c) for c in model.classes_]
    flips = np.asarray(model.flip_rates_, dtype=float)
    flip_intervals = np.asarray(model.flip_rates_interval_, dtype=float)
    lines = [
        f"share of wrong labels: {pct(float(model.noise_rate_))} "
        f"({interval(model.noise_rate_interval_)}), about {np.sum(model.mislabel_proba_):.1f} "
        f"of {n_rows:,} rows",
        *no_noise_lines(model),
        "flip rate of each true class (the share of its rows labelled as another class):",
        *(
            f"  true {name}: {pct(flips[k])} ({interval(flip_intervals[k])})"
            for k, name in enumerate(names)
        ),
        "noise matrix P(given label | true class) (rows: given label; columns: true class):",
    ]
    matrix = np.asarray(model.noise_matrix_, dtype=float)
    rows = [[name, *(pct(float(v)) for v in matrix[i])] for i, name in enumerate(names)]
    lines += format_table(["given \\ true", *names], rows, right=set(range(1, len(names) + 1)))
    calibration = getattr(model, "noise_calibration_", None)
    if calibration is not None and getattr(model, "noise_channel_", "") == "class-conditional":
        lines += [
            "calibration (empirical Bayes on the out-of-fold margins): the class-conditional "
            "channel (its evidence beat the paper's channel's, or --noise-channel asked for it)",
            f"  scale of the margin {fmt(calibration.scale)}",
        ]
    elif calibration is not None:
        pi = ", ".join(
            f"{name} {fmt(float(v), 3)}"
            for name, v in zip(names, calibration.noise_label_proba, strict=True)
        )
        lines += [
            "calibration (empirical Bayes on the out-of-fold margins):",
            f"  theta (share of labels drawn from the signal) {fmt(calibration.theta)}, scale of "
            f"the margin {fmt(calibration.scale)}",
            f"  pi (the classes of noise-type labels): {pi}",
        ]
    return lines


def _category_set(model: VIBoostClassifier, feature: int, words: Any, shown: int = 6) -> str:
    """``{a, b, ...}``: the categories of ``feature`` whose bits are set in ``words`` (the
    four 64-bit words of a split's ``left_categories``), by name, the first ``shown`` of them."""
    bits = np.unpackbits(np.asarray(words, dtype="<u8").view(np.uint8), bitorder="little")
    categories = getattr(model, "categories_", None)
    names = None if categories is None else categories[feature]
    codes = np.flatnonzero(bits)
    if names is not None:
        codes = codes[codes < len(names)]
    labels = [str(names[c]) if names is not None else str(c) for c in codes[:shown]]
    more = f", ... +{codes.size - shown}" if codes.size > shown else ""
    return "{" + ", ".join(labels) + more + "}"


def _stump_rows(model: VIBoostClassifier, count: int) -> list[list[str]]:
    from viboost.boosting.stumps import DecisionStump

    rows = []
    for t, (stump, alpha) in enumerate(
        zip(model.estimators_[:count], model.alphas_[:count], strict=True)
    ):
        assert isinstance(stump, DecisionStump)  # the caller's check: a model of stumps
        rows.append(
            [
                str(t + 1),
                _feature_name(model, stump.feature),
                (
                    "not in " + _category_set(model, stump.feature, stump.left_categories)
                    if stump.left_categories is not None
                    else fmt(stump.threshold, 6)
                ),
                f"{stump.polarity:+d}",
                fmt(alpha, 4),
                "above" if stump.missing_right else "below",
            ]
        )
    return rows


def _depths(nodes: np.ndarray) -> np.ndarray:
    """The depth of each node of a node array (children follow their parent)."""
    depth = np.zeros(nodes.size, dtype=int)
    for node in range(nodes.size):
        if not nodes["is_leaf"][node]:
            depth[nodes["left"][node]] = depth[nodes["right"][node]] = depth[node] + 1
    return depth


def _spread(values: np.ndarray) -> str:
    """``min a, median b, mean c, max d`` of integer counts."""
    return (
        f"min {int(values.min())}, median {fmt(float(np.median(values)))}, mean "
        f"{values.mean():.1f}, max {int(values.max())}"
    )


def _tree_lines(model: VIBoostClassifier, count: int, top: int) -> list[str]:
    """The trees of a tree model: how many, their leaves and depths, the top features by
    ``feature_importances_`` and the first ``count`` trees."""
    multiclass = is_multiclass(model)
    if multiclass:  # round by round, class by class
        n_classes = len(model.classes_)
        learners = [learner for per_class in model.estimators_ for learner in per_class]
        alphas = np.asarray(model.alphas_, dtype=float).ravel()
    else:
        n_classes = 1
        learners = list(model.estimators_)
        alphas = np.asarray(model.alphas_, dtype=float)
    leaves = np.array([int(learner.nodes["is_leaf"].sum()) for learner in learners])
    depths = np.array([int(_depths(learner.nodes).max()) for learner in learners])
    per_leaf = bool(getattr(learners[-1], "per_leaf", False))
    intercept = per_leaf and bool(np.all(leaves[:n_classes] == 1))
    n_intercepts = n_classes if intercept else 0
    grown = slice(n_intercepts, None)
    n_grown = len(learners) - n_intercepts
    if multiclass:
        rounds = len(model.estimators_)
        lines = [
            f"trees: {len(learners)} ({rounds} rounds x {n_classes} classes"
            + (
                f"; the first round one intercept per class, one-leaf trees; then {n_grown} "
                "grown trees)"
                if intercept
                else ")"
            )
        ]
    else:
        lines = [
            f"trees: {len(learners)}"
            + (
                f" (the first an intercept, a one-leaf tree; then {n_grown} grown trees)"
                if intercept
                else ""
            )
        ]
    if n_grown:
        lines += [
            f"leaves per tree: {_spread(leaves[grown])}; {int(leaves[grown].sum()):,} leaves "
            "in all"
            + (f" (not counting the intercept{'s' if multiclass else ''})" if intercept else ""),
            f"depth per tree: {_spread(depths[grown])}",
        ]
    importances = np.asarray(model.feature_importances_, dtype=float)
    used = int(np.sum(importances > 0))
    order = np.argsort(-importances, kind="stable")[: min(top, used)]
    lines += [
        "",
        *textwrap.wrap(
            f"top {order.size} of the {used} features that the trees split on (of "
            f"{importances.size}), by feature_importances_ (each tree's |alpha| spread over its "
            "splits by their gains):",
            width=88,
        ),
    ]
    if order.size:
        rows = [
            [str(rank), _feature_name(model, int(j)), pct(importances[j])]
            for rank, j in enumerate(order, 1)
        ]
        lines += format_table(["rank", "feature", "importance"], rows, right={0, 2})
    else:
        lines.append("  (none: no tree separates any rows)")
    if per_leaf:
        what = (
            "each tree adds alpha times the value of the leaf a row reaches, the leaf's weight "
            "(the mode of its posterior); alpha is the learning rate"
        )
    else:
        what = "each tree adds alpha times its leaf's vote, +1 for the positive class or -1"
    if multiclass:
        what = (
            f"{what}, to the margin of its class (the classes' margins make the probabilities "
            "through the softmax)"
        ).replace("the positive class", "its class")
    lines += [
        "",
        *textwrap.wrap(
            f"first {count} of {len(learners)} trees ({what}; 'root split' sends a row left "
            "when x[feature] <= threshold, or when its category is in the set, and a NaN "
            "value or a category not seen in fit to the 'missing' side):",
            width=88,
        ),
    ]
    header = ["round", "leaves", "depth", "root split", "missing", "alpha", "leaf values"]
    if multiclass:
        header.insert(1, "class")
    rows = []
    for t in range(count):
        nodes = learners[t].nodes
        values = nodes["value"][nodes["is_leaf"]]
        if nodes["is_leaf"][0]:
            split, missing = "(none: one leaf)", "-"
        else:
            root = nodes[0]
            feature = _feature_name(model, int(root["feature"]))
            left = _category_set(model, int(root["feature"]), root["left_categories"])
            split = (
                f"{feature} in {left}"
                if root["is_categorical"]
                else f"{feature} <= {fmt(float(root['threshold']), 6)}"
            )
            missing = "left" if root["missing_left"] else "right"
        spread = (
            fmt(float(values[0]), 4)
            if values.size == 1
            else f"{fmt(float(values.min()), 4)} .. {fmt(float(values.max()), 4)}"
        )
        row = [
            str(t // n_classes + 1),
            str(int(leaves[t])),
            str(int(depths[t])),
            split,
            missing,
            fmt(float(alphas[t]), 4),
            spread,
        ]
        if multiclass:
            row.insert(1, str(model.classes_[t % n_classes]))
        rows.append(row)
    right = {0, 2, 3, 6} if multiclass else {0, 1, 2, 5}
    lines += format_table(header, rows, right=right)
    return lines


def _elbo_lines(model: VIBoostClassifier) -> list[str]:
    traces = [np.asarray(trace, dtype=float) for trace in model.elbo_]
    recorded = [trace for trace in traces if trace.size]
    if not recorded:
        return ["ELBO: not recorded (fixed_vi_iter runs a fixed number of inner iterations)."]
    last = np.array([trace[-1] for trace in recorded])
    in_sample = model.noise_model and not is_cross_fitted(model)
    if in_sample:
        title = f"value after each round's last inner iteration, {last.size} rounds"
    elif model.noise_model:  # cross-fitted: the final fit is the core model, rows weighted by phi
        title = (
            f"final fit: exact log evidence of the core model after each round, every row "
            f"counted s_n phi_n times, {last.size} rounds"
        )
    else:
        title = f"exact log evidence of the core model after each round, {last.size} rounds"
    lines = [
        f"ELBO trajectory ({title}):",
        f"  first {fmt(last[0], 8)}, last {fmt(last[-1], 8)}, "
        f"min {fmt(last.min(), 8)}, max {fmt(last.max(), 8)}",
    ]
    if in_sample:
        fell = [t + 1 for t, trace in enumerate(traces) if np.any(np.diff(trace) < 0)]
        where = f" (rounds {', '.join(map(str, fell[:10]))}{', ...' if len(fell) > 10 else ''})"
        lines.append(
            f"  rounds where the ELBO fell during the inner loop: {len(fell)} of {len(traces)}"
            + (where if fell else "")
        )
        iters = np.asarray(model.n_vi_iter_)
        lines.append(
            f"  inner iterations per round: mean {iters.mean():.1f}, max {int(iters.max())}"
        )
    elif model.noise_model:
        lines.append(
            "  (no inner variational loop: the noise statistics come from cross-fitting, "
            "not from this trajectory)"
        )
    else:
        lines.append("  (noise_model=False: no inner variational loop)")
    step = max(1, -(-last.size // 60))
    lines.append(
        f"  sparkline{f' (one mark per {step} rounds)' if step > 1 else ''}: "
        f"{_sparkline(last[::step])}"
    )
    k = max(1, -(-last.size // 10))
    lines.append(
        f"  ELBO {'every ' + str(k) + ' rounds' if k > 1 else 'of each round'} (round: value):"
    )
    picks = list(range(0, last.size, k))
    if picks[-1] != last.size - 1:
        picks.append(last.size - 1)
    lines.append("  " + ", ".join(f"{t + 1}: {fmt(last[t], 7)}" for t in picks))
    return lines


def _class_elbo_lines(model: VIBoostClassifier) -> list[str]:
    """The ELBO summary of a K-class model: per class, the log evidence that each round of its
    ensemble recorded (the core model of its class-against-the-rest labels, its margin against
    the log-sum-exp of the others'), first, last, range and a sparkline."""
    names = [str(c) for c in model.classes_]
    last = np.array(
        [
            [
                float(np.asarray(trace, dtype=float)[-1]) if np.size(trace) else float("nan")
                for trace in per_class
            ]
            for per_class in model.elbo_
        ]
    ).reshape(len(model.elbo_), len(names))
    if not np.isfinite(last).any():
        return [
            f"ELBO: not recorded (a fit of {len(names)} classes records no per-round log "
            "evidence; the cross-fitted log-likelihood below chose the number of rounds)."
        ]
    weighted = " every row counted s_n phi_n times," if model.noise_model else ""
    lines = textwrap.wrap(
        f"ELBO trajectory (K classes; per class, the exact log evidence of the core model of its "
        f"round's labels, the class against the rest, its margin against the log-sum-exp of the "
        f"other classes' margins,{weighted} after each of {last.shape[0]} rounds):",
        width=88,
    )
    step = max(1, -(-last.shape[0] // 60))
    for k, name in enumerate(names):
        values = last[:, k][np.isfinite(last[:, k])]
        if not values.size:
            lines.append(f"  class {name}: not recorded")
            continue
        lines.append(
            f"  class {name}: first {fmt(values[0], 8)}, last {fmt(values[-1], 8)}, min "
            f"{fmt(values.min(), 8)}, max {fmt(values.max(), 8)}; {_sparkline(values[::step])}"
        )
    if step > 1:
        lines.append(f"  (sparklines: one mark per {step} rounds)")
    if model.noise_model:
        lines.append(
            "  (no inner variational loop: the noise statistics come from cross-fitting, "
            "not from this trajectory)"
        )
    return lines


def _sparkline(values: np.ndarray) -> str:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        _SPARK_UNICODE.encode(encoding)
        ramp = _SPARK_UNICODE
    except (UnicodeEncodeError, LookupError):
        ramp = _SPARK_ASCII
    lo, hi = float(np.min(values)), float(np.max(values))
    if not hi > lo:
        return ramp[len(ramp) // 2] * values.size
    levels = np.floor((values - lo) / (hi - lo) * (len(ramp) - 1) + 0.5).astype(int)
    return "".join(ramp[i] for i in levels)


def _cross_fit_lines(model: VIBoostClassifier) -> list[str]:
    """The cross-fitted log-likelihood at the chosen number of rounds."""
    if not is_cross_fitted(model):
        return []
    rounds = np.asarray(model.cv_rounds_)
    scores = np.asarray(model.cv_log_likelihood_, dtype=float)
    n_rounds = int(model.cv_best_rounds_)
    chosen = np.flatnonzero(rounds == n_rounds)
    at = scores[chosen[0]] if chosen.size else float("nan")
    what = (
        "marginal log-likelihood of the labels under the calibrated noise model"
        if model.noise_model
        else "logistic log-likelihood of the labels"
    )
    return [
        f"Cross-fitted log-likelihood (out-of-fold margins; {what}):",
        f"  {fmt(at, 8)} at the chosen {n_rounds} rounds; checked at {rounds.size} round "
        f"counts from {int(rounds[0])} to {int(rounds[-1])}, max {fmt(scores.max(), 8)}",
        f"  refitted on all rows for {len(model.estimators_)} rounds (the chosen count scaled "
        "by the refit's weight over a fold booster's)",
    ]
