"""``viboost fit``: fit a VIBoostClassifier on a data file, save it and print a summary.

The summary says how many rounds were fitted (and how they were chosen), the training accuracy
and the noise statistics: the calibrated share of wrong labels of a cross-fitted model, or the
in-sample ranking statistics of the paper preset. A target of K > 2 classes is fitted with one
ensemble per class (the robust preset); the summary then gives each true class's flip rate.
"""

from __future__ import annotations

import argparse
import textwrap
import time
from typing import TYPE_CHECKING

import numpy as np

from viboost.cli.common import (
    build_estimator,
    check_destination,
    check_fit_plan,
    classes_phrase,
    fit_target,
    fmt,
    interval,
    is_calibrated,
    is_multiclass,
    learner_phrase,
    no_noise_sentence,
    pct,
    read_data,
    rounds_phrase,
    uncalibrated_reason,
)
from viboost.cli.options import (
    DATA_HELP,
    add_data_and_target,
    add_fit_options,
    add_input_options,
    add_jobs_option,
)

if TYPE_CHECKING:
    from viboost.estimator import VIBoostClassifier


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``viboost fit`` and its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "fit",
        help="fit a model on a CSV or Parquet file and save it",
        description="Fit VIBoostClassifier on every column of DATA except the target (and the "
        "--index-col and --id columns); save the "
        "model with joblib (atomically) and print a summary. The default preset 'robust' "
        "chooses the number of rounds and calibrates the noise model by 5-fold cross-fitting "
        "(folds seeded by --random-state), then refits on all rows weighted by the "
        "probability that each label is of the signal type; it reports the estimated share of "
        "wrong labels with a 90% interval; its base learners are trees of up to 8 leaves with "
        "per-leaf weights. --preset paper fits the paper's Algorithm 1 as printed (100 rounds "
        "of decision stumps, approximate mode, noise model fitted in-sample: its noise "
        "statistics rank rows but are not calibrated). --max-leaf-nodes, --max-depth, "
        "--min-samples-leaf and --leaf-weights choose the base learner of either preset. A "
        "target of more than two classes is fitted natively (one tree per class per round, the "
        "robust preset), or one label against the others with --positive. " + DATA_HELP,
    )
    add_data_and_target(parser)
    parser.add_argument(
        "-o", "--output", required=True, metavar="MODEL", help="model file to write"
    )
    add_input_options(parser, id_help="an id column, never a feature (fit only sets it aside)")
    add_fit_options(parser, noise_switch=True)
    add_jobs_option(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Fit the model of the options on DATA, save it atomically and print a summary."""
    from viboost._utils.io import atomic_dump_model

    output = check_destination(args.output, args.data)
    plan = check_fit_plan(args)
    data = read_data(args, target=args.target)
    X = data.X
    y = fit_target(data.y, args, plan)
    model = build_estimator(args, noise_model=args.noise_model)
    start = time.perf_counter()
    model.fit(X, y)
    elapsed = time.perf_counter() - start
    accuracy = model.score(X, y)
    atomic_dump_model(model, output)
    per_class = ", one per class in each round" if is_multiclass(model) else ""
    summary = (
        f"Fitted VIBoost (preset {args.preset!r}) on {X.shape[0]} rows x {X.shape[1]} "
        f"features of {args.data} (target {args.target!r}, {classes_phrase(model)})"
        f"{_not_features(data)} with {rounds_phrase(model)} in {elapsed:.2f} s; base learners: "
        f"{learner_phrase(model.plan_)}{per_class}. Training accuracy against the given "
        f"labels: {accuracy:.2%}. {_noise_sentence(model)} Model saved to {output}."
    )
    print(textwrap.fill(summary, width=88, break_on_hyphens=False))
    return 0


def _noise_sentence(model: VIBoostClassifier) -> str:
    if not model.noise_model:
        return "Noise model off (noise_model=False): no SNR, noise grade or share of wrong labels."
    n_rows = model.mislabel_proba_.size
    if is_multiclass(model):
        return _class_noise_sentence(model)
    c0, c1 = (str(c) for c in model.classes_)
    if is_calibrated(model):
        calibration = model.noise_calibration_
        assert calibration is not None  # is_calibrated
        rate = float(model.noise_rate_)
        flip0, flip1 = (float(v) for v in model.flip_rates_)
        return (
            f"Estimated share of wrong labels {pct(rate)} "
            f"({interval(model.noise_rate_interval_)}), i.e. about {rate * n_rows:,.0f} of "
            f"{n_rows:,} rows; by class: {pct(flip0)} of true {c0} rows labelled {c1}, "
            f"{pct(flip1)} of true {c1} rows labelled {c0}. Noise model: theta (share of "
            f"labels drawn from the signal) {calibration.theta:.2f}, noise grade xi (log-odds "
            f"of {c1} among noise-type labels) {calibration.noise_grade:.2f}, scale of the "
            f"margin {calibration.scale:.2f}.{no_noise_sentence(model)}"
        )
    eta1, eta2 = (float(v) for v in model.eta_)
    expected_wrong = float(np.sum(model.mislabel_proba_))
    return (
        f"SNR eta1/eta2 = {fmt(model.snr_)} (expected share of labels drawn from the signal "
        f"{eta1 / (eta1 + eta2):.1%}); noise grade log(omega2/omega1) = "
        f"{fmt(model.noise_grade_)}. The expected number of wrong labels (sum of "
        f"mislabel_proba_), {expected_wrong:.1f} of {n_rows:,}, is a ranking statistic, not "
        f"calibrated ({uncalibrated_reason(model)})."
    )


def _class_noise_sentence(model: VIBoostClassifier) -> str:
    """The noise statistics of a K-class fit (always cross-fitted and calibrated)."""
    n_rows = model.mislabel_proba_.size
    calibration = model.noise_calibration_
    if calibration is None:
        return "The noise model has no calibration: no share of wrong labels."
    rate = float(model.noise_rate_)
    flips = ", ".join(
        f"{c} {pct(float(v))}" for c, v in zip(model.classes_, model.flip_rates_, strict=True)
    )
    if getattr(model, "noise_channel_", "") == "class-conditional":
        channel = "a class-conditional noise matrix (the higher evidence)"
    else:
        channel = (
            f"the paper's, theta (share of labels drawn from the signal) {calibration.theta:.2f}"
        )
    return (
        f"Estimated share of wrong labels {pct(rate)} "
        f"({interval(model.noise_rate_interval_)}), i.e. about {rate * n_rows:,.0f} of "
        f"{n_rows:,} rows; by true class, the share of its rows labelled as another class: "
        f"{flips} ('viboost noise' prints the noise matrix). Noise channel: {channel}; scale of "
        f"the margin {calibration.scale:.2f}.{no_noise_sentence(model)}"
    )


def _not_features(data) -> str:
    """``"; not features: 'id' (--id)"`` for the columns the reader set aside, else ``""``."""
    parts = []
    if data.index_col is not None:
        parts.append(f"{data.index_col!r} (row index)")
    if data.ids is not None:
        parts.append(f"{data.ids.name!r} (--id)")
    return f"; not used as features: {', '.join(parts)}" if parts else ""
