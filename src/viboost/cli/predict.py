"""``viboost predict``: classes and class probabilities of a saved model for a data file.

The model's feature columns are selected by name (by position for a model fitted without
names); the output CSV goes to stdout or, atomically, to ``-o``.
"""

from __future__ import annotations

import argparse
import sys

from viboost.cli.common import (
    CommandError,
    check_destination,
    id_column_header,
    load_model,
    read_data,
)
from viboost.cli.options import DATA_ARG, DATA_HELP, add_input_options, add_jobs_option


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``viboost predict`` and its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "predict",
        help="predict classes and probabilities for a CSV or Parquet file",
        description="Write a CSV with the columns 'prediction' and 'proba_<class>' for each "
        "class, one row per row of DATA in its order, led by the --id column if given. The "
        "model's feature columns are selected by name; other columns (such as the target) are "
        "ignored. " + DATA_HELP,
    )
    parser.add_argument("model", metavar="MODEL", help="model file written by 'viboost fit'")
    parser.add_argument("data", metavar="DATA", help="rows to predict: " + DATA_ARG)
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.csv",
        help="write the CSV here (atomically) instead of to stdout",
    )
    add_input_options(parser, id_help="an id column copied to the output, as its first column")
    add_jobs_option(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Write the model's predictions and class probabilities for DATA as CSV."""
    import pandas as pd

    from viboost._utils.io import atomic_write_text

    model = load_model(args.model)
    output = check_destination(args.output, args.data, args.model) if args.output else None
    names = getattr(model, "feature_names_in_", None)
    data = read_data(args, features=None if names is None else list(names), model=model)
    X = data.X
    if names is None:
        if X.shape[1] != model.n_features_in_:
            raise CommandError(
                f"the model was fitted without column names on {model.n_features_in_} features, "
                f"but {args.data} has {X.shape[1]} columns; give a CSV with exactly the "
                "model's feature columns, in order"
            )
        X = X.to_numpy()  # by position: the model has no names to match
    model.set_params(n_jobs=args.jobs)  # threads for this prediction, not the saved model's
    proba = model.predict_proba(X)
    table = pd.DataFrame({"prediction": model.predict(X)})
    for i, label in enumerate(model.classes_):
        table[f"proba_{label}"] = proba[:, i]
    if data.ids is not None:
        table.insert(0, id_column_header(data.ids.name, table.columns), data.ids.to_numpy())
    text = table.to_csv(index=False, lineterminator="\n")
    if output is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(output, text)
        print(f"Wrote {len(table)} predictions to {output}.")
    return 0
