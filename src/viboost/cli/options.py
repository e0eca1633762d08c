"""Options of the ``viboost`` command line: argument types and the option groups commands share.

The argument types (:func:`positive_int`, :func:`random_seed` and the private ones behind the
hyperparameters) turn a command-line string into a checked value or raise
:class:`argparse.ArgumentTypeError`, which argparse reports as a usage error (exit code 2).
The ``add_*`` functions declare the options that several commands share:

- :func:`add_data_and_target`: DATA and ``--target`` (fit, noise);
- :func:`add_input_options`: ``--sep``, ``--index-col`` and ``--id`` (fit, predict, noise);
- :func:`add_fit_options`: the estimator's hyperparameters (fit, noise), the base learner's
  among them (:func:`add_tree_options`: ``--max-leaf-nodes``, ``--max-depth``,
  ``--min-samples-leaf``, ``--leaf-weights``);
- :func:`add_jobs_option`: ``--jobs``, threads of the compiled kernels (fit, predict, noise);
- :func:`add_plots_option`: ``--plots`` (inspect, noise).

:data:`DATA_ARG` and :data:`DATA_HELP` describe the DATA argument in the commands' help.
"""

from __future__ import annotations

import argparse

import numpy as np


# ----------------------------------------------------------------------------------- argument types
def _integer(text: str, expected: str = "an integer") -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer of at least 1 (rounds, row counts, processes)."""
    value = _integer(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _jobs(text: str) -> int:
    value = _integer(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 threads: use a positive count, or -1 for all cores")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _folds(text: str) -> int | str:
    if text.lower() == "auto":
        return "auto"
    value = _integer(text, "an integer of at least 2 or 'auto'")
    if value < 2:
        raise argparse.ArgumentTypeError(f"cross-fitting needs at least 2 folds, got {text!r}")
    return value


def _column_list(text: str) -> list[str]:
    """A comma-separated list of column names (``--categorical``)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _max_bins(text: str) -> int | None:
    if text.lower() == "none":
        return None
    value = _integer(text, "an integer from 2 to 255 or 'none'")
    if not 2 <= value <= 255:
        raise argparse.ArgumentTypeError(f"expected an integer from 2 to 255, got {text!r}")
    return value


def _patience(text: str) -> int | None:
    return None if text.lower() == "none" else positive_int(text)


def _max_leaf_nodes(text: str) -> int:
    value = _integer(text, "an integer of at least 2")
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"a tree needs at least 2 leaves, got {text!r} (2 leaves with --leaf-weights tied "
            "is the paper's decision stump)"
        )
    return value


def _max_depth(text: str) -> int | None:
    if text.lower() == "none":
        return None
    value = _integer(text, "a positive integer or 'none'")
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a depth of at least 1 (one split) or 'none' (no limit), got {text!r}"
        )
    return value


def random_seed(text: str) -> int:
    """A seed for numpy's generators: an integer in ``[0, 2**32)``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"the seed must be in [0, 2**32), got {text!r}")
    return value


#: The names --sep accepts for a delimiter.
_SEPARATORS = {"comma": ",", "semicolon": ";", "tab": "\t", "\\t": "\t", "pipe": "|", "space": " "}


def _separator(text: str) -> str | None:
    if text.lower() == "auto":
        return None
    value = _SEPARATORS.get(text.lower(), text)
    if len(value) != 1 or value in '"\r\n':
        raise argparse.ArgumentTypeError(
            f"expected one character, tab, comma, semicolon, pipe, space or auto, got {text!r}"
        )
    return value


# ----------------------------------------------------------------------------------- shared options
#: The help of a DATA argument.
DATA_ARG = "a delimited text file with a header row (CSV, semicolon, tab) or a Parquet file"
#: The sentence about DATA that ends the description of fit, predict and noise.
DATA_HELP = (
    "DATA is a text file with a header row, its delimiter (comma, semicolon, tab or pipe) "
    "sniffed unless --sep is given, or a Parquet file (.parquet, .pq; needs pyarrow: pip "
    'install "viboost[parquet]").'
)


def add_data_and_target(parser: argparse.ArgumentParser) -> None:
    """DATA and --target, shared by fit and noise."""
    parser.add_argument("data", metavar="DATA", help=DATA_ARG)
    parser.add_argument(
        "--target",
        required=True,
        metavar="COL",
        help="label column: two or more classes (more than two: one tree per class per round, "
        "robust preset); --positive fits one label against the others",
    )


def add_input_options(parser: argparse.ArgumentParser, id_help: str) -> None:
    """--sep, --index-col and --id, shared by fit, predict and noise."""
    parser.add_argument(
        "--sep",
        type=_separator,
        default=None,
        metavar="SEP",
        help="delimiter of a text file: one character, or tab, comma, semicolon, pipe, space "
        "(default: auto, sniffed from the first lines among , ; tab |); ignored for Parquet",
    )
    parser.add_argument(
        "--index-col",
        default=None,
        metavar="COL",
        help="column to use as the row index, never a feature (default: a leading column with "
        "an empty header, the index pandas' to_csv() writes, is used as the index)",
    )
    parser.add_argument("--id", dest="id_col", default=None, metavar="COL", help=id_help)


def add_fit_options(parser: argparse.ArgumentParser, noise_switch: bool) -> None:
    """The estimator's hyperparameters, shared by fit and noise."""
    parser.add_argument(
        "--preset",
        choices=["robust", "paper"],
        default="robust",
        help="robust (default): 8-leaf trees with per-leaf weights, rounds and noise model "
        "chosen by cross-fitting, calibrated noise statistics; paper: the paper's Algorithm 1 "
        "as printed, with decision stumps",
    )
    parser.add_argument(
        "--n-estimators",
        type=positive_int,
        default=None,
        metavar="T",
        help="boosting rounds (default: from the preset; robust: at most 1000, chosen by "
        "cross-fitting; paper: 100)",
    )
    parser.add_argument(
        "--random-state",
        type=random_seed,
        default=0,
        metavar="SEED",
        help="seed of the cross-fitting folds (and of the quantile-bin subsample above 200,000 "
        "rows); default: 0, so the same file gives the same model",
    )
    parser.add_argument(
        "--learning-rate",
        type=_positive_float,
        default=None,
        metavar="LR",
        help="shrinkage of each round's weight (default: from the preset; robust: 0.2, paper: 1)",
    )
    parser.add_argument(
        "--cv",
        type=_folds,
        default="auto",
        metavar="K",
        help="stratified folds of the cross-fitting that chooses the rounds and calibrates the "
        "noise model under the robust preset, or 'auto': 5, fewer from 250,000 rows (2 from "
        "400,000; default: auto)",
    )
    parser.add_argument(
        "--n-iter-no-change",
        type=_patience,
        default=30,
        metavar="N",
        help="with cross-fitting, stop once the out-of-fold log-likelihood has not risen "
        "significantly for N rounds (default: 30, as VIBoostClassifier; none: try all "
        "--n-estimators rounds)",
    )
    parser.add_argument(
        "--noise-channel",
        choices=["auto", "independent", "class-conditional"],
        default="auto",
        help="more than two classes: the paper's noise channel (independent of the true "
        "class), a class-conditional noise matrix, or auto (default): the one of the higher "
        "evidence",
    )
    parser.add_argument(
        "--mislabeled",
        choices=["weight", "drop"],
        default="weight",
        help="with cross-fitting: the final model fits every row weighted by the probability "
        "that its label is right (weight, the default), or leaves out the rows whose label is "
        "more likely wrong, with a round count from a second search without them (drop)",
    )
    parser.add_argument(
        "--final-model",
        choices=["refit", "fold-average"],
        default="refit",
        help="with cross-fitting: one booster refitted on every row (refit, the default), or "
        "the average of one booster per fold on the fold's training rows (fold-average: more "
        "accurate on some data, about three times the refit's cost with 5 folds)",
    )
    parser.add_argument(
        "--max-bins",
        type=_max_bins,
        default=255,
        metavar="B",
        help="bins per feature for the split search, 2 to 255 (default: 255; none: exhaustive "
        "search over all distinct values, slower, for decision stumps only); also the most "
        "categories of a categorical feature",
    )
    parser.add_argument(
        "--categorical",
        type=_column_list,
        default=None,
        metavar="COLS",
        help="comma-separated feature columns to fit as categorical features, read as text (so "
        "that a code such as 007 stays 007); columns of text are categorical anyway",
    )
    add_tree_options(parser)
    parser.add_argument(
        "--alpha",
        choices=["approx", "exact"],
        default=None,
        help="approximate (paper) or exact mode of the weight posterior (default: from the "
        "preset; robust: exact, paper: approx)",
    )
    parser.add_argument(
        "--noise-fit",
        choices=["cross-fit", "in-sample"],
        default=None,
        help="how the noise model is fitted: from out-of-fold margins, or Algorithm 1's inner "
        "loop in every round (default: from the preset; robust: cross-fit, paper: in-sample)",
    )
    if noise_switch:
        parser.add_argument(
            "--noise-model",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="model label noise (default); --no-noise-model fits the core model without "
            "it (smoothed AdaBoost); with the robust preset its number of rounds is still "
            "chosen by cross-fitting",
        )
    parser.add_argument(
        "--positive",
        default=None,
        metavar="LABEL",
        help="fit LABEL against all other labels of the target (one-vs-rest: a two-class "
        "model), which become '(other)'; without it a target of more than two classes is fitted "
        "with all its classes",
    )


def add_tree_options(parser: argparse.ArgumentParser) -> None:
    """The base learner: --max-leaf-nodes, --max-depth, --min-samples-leaf and --leaf-weights
    (scikit-learn HGB's names), part of :func:`add_fit_options`."""
    parser.add_argument(
        "--max-leaf-nodes",
        type=_max_leaf_nodes,
        default=None,
        metavar="L",
        help="most leaves of each round's tree, grown best-first, at least 2 (default: from the "
        "preset; robust: 8, paper: 2, the decision stump)",
    )
    parser.add_argument(
        "--max-depth",
        type=_max_depth,
        default=None,
        metavar="D",
        help="most splits from a tree's root to a leaf (default: none, no limit; with the paper "
        "preset and no --max-leaf-nodes, trees of up to 2^D leaves)",
    )
    parser.add_argument(
        "--min-samples-leaf",
        type=positive_int,
        default=None,
        metavar="M",
        help="fewest training rows in a leaf of a tree (default: from the preset; robust: 20, "
        "paper: 1); decision stumps ignore it",
    )
    parser.add_argument(
        "--leaf-weights",
        choices=["per-leaf", "tied"],
        default=None,
        help="per-leaf: each leaf has its own weight (a fit starts with an intercept, a one-leaf "
        "tree); tied: one weight per tree with +-1 leaves, Algorithm 1 as printed (default: "
        "from the preset; robust: per-leaf, paper: tied)",
    )


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    """--jobs, the compiled kernels' threads, shared by fit, predict and noise."""
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        metavar="J",
        help="threads for the compiled kernels (default: all cores, the library's n_jobs=None; "
        "-1: all cores, 1: one); data under about 10^6 cells runs on one thread anyway, and "
        "results do not depend on it",
    )


def add_plots_option(parser: argparse.ArgumentParser) -> None:
    """--plots, shared by inspect and noise (see :func:`viboost.cli.common.write_model_plots`)."""
    parser.add_argument(
        "--plots",
        metavar="DIR",
        help="also write the model's plots as PNG files into DIR (created if needed): the "
        "ELBO per round, the noise statistics over the rounds (or the cross-fitted round "
        "choice), the histogram of P(label wrong) and the top suspects (viboost.plotting)",
    )
