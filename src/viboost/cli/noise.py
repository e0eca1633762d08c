"""``viboost noise``: estimate the share of wrong labels and rank rows by P(label wrong).

Fits a VIBoostClassifier, estimates the flip rates (:func:`viboost.noise.estimate_flip_rate`),
prints the top rows by the probability that their label is wrong
(:func:`viboost.noise.label_quality_scores`) and optionally writes the ranking of all rows. For
a target of K > 2 classes it also prints the noise matrix ``P(given label | true class)``, adds
the most likely true class to the table and writes the posterior of each row's true class
(``true_class_proba_``) to the ranking.
"""

from __future__ import annotations

import argparse
import textwrap

import numpy as np

from viboost.cli.common import (
    build_estimator,
    check_destination,
    check_fit_plan,
    fit_target,
    format_table,
    id_column_header,
    interval,
    is_multiclass,
    learner_phrase,
    pct,
    read_data,
    rounds_phrase,
    uncalibrated_reason,
    write_model_plots,
)
from viboost.cli.options import (
    DATA_HELP,
    add_data_and_target,
    add_fit_options,
    add_input_options,
    add_jobs_option,
    add_plots_option,
    positive_int,
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``viboost noise`` and its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "noise",
        help="estimate the share of wrong labels and rank rows by how likely theirs is wrong",
        description="Fit VIBoostClassifier, estimate the share of wrong labels and the flip "
        "rate of each class (with 90% intervals under the default robust preset) and list the "
        "training rows ranked by the posterior probability that their label is wrong "
        "(P(label wrong) = 1 - label quality, viboost.noise.label_quality_scores); rows with "
        "P(label wrong) > 0.5 are flagged as issues. Rows are numbered 1, 2, ... from the "
        "first data row after the header (as in error messages), whatever --index-col says; "
        "--id adds an id column to the table and the output. With --preset paper the "
        "probabilities come from Algorithm 1's in-sample fit: they rank rows but are not "
        "calibrated. For a target of more than two classes (fitted natively, one tree per "
        "class per round) it also prints the flip rate of each true class and the noise matrix "
        "P(given label | true class), lists the most likely true class of each row and writes "
        "the posterior probability of every true class to the output. " + DATA_HELP,
    )
    add_data_and_target(parser)
    parser.add_argument(
        "--top", type=positive_int, default=20, metavar="K", help="rows to print (default: 20)"
    )
    add_input_options(
        parser, id_help="an id column, never a feature, shown in the table and the output"
    )
    add_fit_options(parser, noise_switch=False)
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.csv",
        help="also write the ranking of all rows to this CSV (columns rank, row (1-based data "
        "row), the --id column if given, label, mislabel_proba, label_quality, issue; for more "
        "than two classes also likely_true_label and true_proba_<class> for each class)",
    )
    add_plots_option(parser)
    add_jobs_option(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Fit on DATA, print the estimated share of wrong labels and the top suspect rows."""
    import pandas as pd

    from viboost._utils.io import atomic_write_text
    from viboost.noise import estimate_flip_rate, label_quality_scores

    output = check_destination(args.output, args.data) if args.output else None
    plan = check_fit_plan(args)
    data = read_data(args, target=args.target)
    X = data.X
    y = fit_target(data.y, args, plan)
    model = build_estimator(args)
    model.fit(X, y)
    multiclass = is_multiclass(model)
    quality = label_quality_scores(X, y, estimator=model)
    estimate = estimate_flip_rate(X, y, estimator=model)
    wrong = 1.0 - quality
    order = np.argsort(-wrong, kind="stable")
    labels = y.to_numpy()
    issues = wrong > 0.5
    ranking = pd.DataFrame(
        {
            "rank": np.arange(1, order.size + 1),
            "row": order + 1,  # 1-based data rows, as in error messages
            "label": labels[order],
            "mislabel_proba": wrong[order],
            "label_quality": quality[order],
            "issue": issues[order],
        }
    )
    if multiclass:
        true_proba = np.asarray(model.true_class_proba_, dtype=float)[order]
        ranking["likely_true_label"] = model.classes_[np.argmax(true_proba, axis=1)]
        for k, label in enumerate(model.classes_):
            ranking[f"true_proba_{label}"] = true_proba[:, k]
    id_header = None
    if data.ids is not None:
        id_header = id_column_header(data.ids.name, ranking.columns)
        ranking.insert(2, id_header, data.ids.to_numpy()[order])
    top = min(args.top, order.size)
    plot_labels = None if data.ids is None else [str(v) for v in data.ids.to_numpy()]
    if multiclass:
        intro = (
            f"VIBoost (preset {args.preset!r}) on {args.data}: {X.shape[0]:,} rows, "
            f"{model.classes_.size} classes, {rounds_phrase(model)} of "
            f"{learner_phrase(model.plan_)}, one per class in each round."
        )
        flip_lines = _class_flip_rate_lines(estimate, X.shape[0], int(issues.sum()))
    else:
        intro = (
            f"VIBoost (preset {args.preset!r}) on {args.data}: {X.shape[0]:,} rows, "
            f"{rounds_phrase(model)} of {learner_phrase(model.plan_)}."
        )
        flip_lines = _flip_rate_lines(
            estimate, X.shape[0], int(issues.sum()), uncalibrated_reason(model)
        )
    lines = [textwrap.fill(intro, width=88)]
    lines += [
        line
        if line.startswith("   ")  # a table row: as it is
        else textwrap.fill(
            line, width=88, subsequent_indent="    " if line.startswith("  ") else ""
        )
        for line in flip_lines
    ]
    lines += [
        "",
        textwrap.fill(
            f"Top {top} training rows by the probability that their label is wrong "
            "(P(label wrong) = 1 - label quality); rows are numbered from 1, the first data "
            "row after the header:",
            width=88,
        ),
    ]
    head = ranking.head(top)
    ids = [] if id_header is None else [[str(v) for v in head[id_header]]]
    columns = [
        [str(v) for v in head["rank"]],
        [str(v) for v in head["row"]],
        *ids,
        [str(v) for v in head["label"]],
        *([[str(v) for v in head["likely_true_label"]]] if multiclass else []),
        [f"{v:.4f}" for v in head["mislabel_proba"]],
    ]
    header = ["rank", "row", *([] if id_header is None else [id_header]), "label"]
    if multiclass:
        header.append("likely true")
    header.append("P(label wrong)")
    rows = [list(row) for row in zip(*columns, strict=True)]
    lines += format_table(header, rows, right={0, 1, len(header) - 1})
    if output is not None:
        atomic_write_text(output, ranking.to_csv(index=False, lineterminator="\n"))
        lines += ["", f"Wrote the ranking of all {len(ranking)} rows to {output}."]
    lines += write_model_plots(model, args.plots, top=top, labels=plot_labels)
    print("\n".join(lines))
    return 0


def _flip_rate_lines(estimate, n_rows: int, n_issues: int, reason: str) -> list[str]:
    """The flip-rate estimate of ``viboost noise``: calibrated numbers with intervals, or the
    in-sample ranking statistic of the paper preset."""
    c0, c1 = (str(c) for c in estimate.classes)
    if not estimate.calibrated:
        return [
            f"Expected number of wrong labels (sum of P(label wrong)): {estimate.n_wrong:.1f} "
            f"of {n_rows:,} ({pct(estimate.rate)}): a ranking statistic, not calibrated "
            f"({reason}), with no interval.",
            f"Rows flagged as issues (P(label wrong) > 0.5): {n_issues:,}.",
        ]
    level = estimate.level
    return [
        f"Estimated share of wrong labels: {pct(estimate.rate)} "
        f"({interval(estimate.interval, level)}), about {estimate.n_wrong:,.0f} of {n_rows:,} "
        "rows (the sum of P(label wrong)).",
        f"  true {c0} rows labelled {c1}: {pct(estimate.class_rates[0])} "
        f"({interval(estimate.class_intervals[0], level)})",
        f"  true {c1} rows labelled {c0}: {pct(estimate.class_rates[1])} "
        f"({interval(estimate.class_intervals[1], level)})",
        f"Rows flagged as issues (P(label wrong) > 0.5): {n_issues:,}.",
    ]


def _class_flip_rate_lines(estimate, n_rows: int, n_issues: int) -> list[str]:
    """The noise estimate of ``viboost noise`` for K > 2 classes (always cross-fitted): the
    share of wrong labels, each true class's flip rate with its interval, and the noise matrix
    ``P(given label | true class)`` as a table (rows: given labels; columns: true classes)."""
    level = estimate.level
    names = [str(c) for c in estimate.classes]
    lines = [
        f"Estimated share of wrong labels: {pct(estimate.rate)} "
        f"({interval(estimate.interval, level)}), about {estimate.n_wrong:,.0f} of {n_rows:,} "
        "rows (the sum of P(label wrong)).",
        "Flip rate of each true class (the share of its rows labelled as another class):",
    ]
    lines += [
        f"  true {name}: {pct(rate)} ({interval(bounds, level)})"
        for name, rate, bounds in zip(
            names, estimate.class_rates, estimate.class_intervals, strict=True
        )
    ]
    matrix = estimate.noise_matrix
    if matrix is not None:
        lines.append(
            "Noise matrix P(given label | true class) (rows: given label; columns: true class; "
            "each column sums to 100%):"
        )
        rows = [[name, *(pct(float(v)) for v in matrix[i])] for i, name in enumerate(names)]
        table = format_table(["given \\ true", *names], rows, right=set(range(1, len(names) + 1)))
        lines += ["  " + line for line in table]
    lines.append(f"Rows flagged as issues (P(label wrong) > 0.5): {n_issues:,}.")
    return lines
