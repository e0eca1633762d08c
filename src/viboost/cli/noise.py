"""``viboost noise``: estimate the share of wrong labels and rank rows by P(label wrong).

Fits a VIBoostClassifier, estimates the flip rates (:func:`viboost.noise.estimate_flip_rate`),
prints the top rows by the probability that their label is wrong
(:func:`viboost.noise.label_quality_scores`) and optionally writes the ranking of all rows.
"""

from __future__ import annotations

import argparse
import textwrap

import numpy as np

from viboost.cli.common import (
    binary_target,
    build_estimator,
    check_destination,
    check_fit_plan,
    format_table,
    id_column_header,
    interval,
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
        "calibrated. " + DATA_HELP,
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
        "row), the --id column if given, label, mislabel_proba, label_quality, issue)",
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
    check_fit_plan(args)
    data = read_data(args, target=args.target)
    X = data.X
    y = binary_target(data.y, args)
    model = build_estimator(args)
    model.fit(X, y)
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
    id_header = None
    if data.ids is not None:
        id_header = id_column_header(data.ids.name, ranking.columns)
        ranking.insert(2, id_header, data.ids.to_numpy()[order])
    top = min(args.top, order.size)
    plot_labels = None if data.ids is None else [str(v) for v in data.ids.to_numpy()]
    intro = (
        f"VIBoost (preset {args.preset!r}) on {args.data}: {X.shape[0]:,} rows, "
        f"{rounds_phrase(model)} of {learner_phrase(model.plan_)}."
    )
    lines = [textwrap.fill(intro, width=88)]
    lines += [
        textwrap.fill(line, width=88, subsequent_indent="    " if line.startswith("  ") else "")
        for line in _flip_rate_lines(
            estimate, X.shape[0], int(issues.sum()), uncalibrated_reason(model)
        )
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
        [f"{v:.4f}" for v in head["mislabel_proba"]],
    ]
    header = ["rank", "row", *([] if id_header is None else [id_header]), "label"]
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
