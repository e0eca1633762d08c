"""The ``viboost`` command line: fit, predict, inspect, noise, demo and reproduce.

Run ``viboost --help`` (or ``python -m viboost --help``) for the usage. Every subcommand reads
delimited text files with a header row (comma, semicolon, tab or pipe: sniffed, or given with
``--sep``) or Parquet files (``.parquet``/``.pq``, needs pyarrow: ``pip install
"viboost[parquet]"``); feature columns of text are categorical features (``fit`` and ``noise``
print a note naming them; ``--categorical COLS`` reads more as text), the others numeric;
``--index-col`` and ``--id`` name columns that are not features (a leading column with an empty
header, the index pandas' ``to_csv()`` writes, is used as the row index). Rows are numbered
1, 2, ... from the first data row after the header, in error messages and in ``noise`` output
alike. Models are saved with joblib. ``fit``
and ``noise`` use the noise-robust preset by default (``preset="robust"``: the number of rounds
and the noise model are chosen by cross-fitting on folds seeded by ``--random-state``, 0 unless
given, so the same file gives the same model); ``--preset paper`` runs the paper's Algorithm 1
as printed, and ``reproduce`` always does. User
errors (a missing file, a bad CSV, an unknown column, a file that is not a viboost model) print
``viboost: error: <message>`` on stderr and return exit code 2, without a traceback; a numerical
failure (for example a density not resolved in float64) prints the same way with exit code 1.
No command waits without a bound: every iterative loop underneath is capped. Output files
are written atomically, so an existing file is only ever replaced by complete new content.

The package has one module per command, each with ``add_parser(subparsers)``, which declares the
command and its options, and ``run(args)``, which runs it: :mod:`~viboost.cli.fit`,
:mod:`~viboost.cli.predict`, :mod:`~viboost.cli.inspect`, :mod:`~viboost.cli.noise`,
:mod:`~viboost.cli.demo` and :mod:`~viboost.cli.reproduce`. What several commands share lives in
:mod:`~viboost.cli.options` (argument types and shared option groups) and
:mod:`~viboost.cli.common` (errors, files, data, the estimator, text). This module assembles the
parser (:func:`build_parser`) and runs a command, turning its errors into messages and exit
codes (:func:`main`).

Model files are pickles: load only model files you trust.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence

from viboost._version import __version__
from viboost.cli import demo, fit, inspect, noise, predict, reproduce
from viboost.cli.common import EXIT_FAILURE, EXIT_USAGE, PROG, CommandError

__all__ = ["COMMANDS", "CommandError", "build_parser", "main"]

#: The command modules, in the order ``viboost --help`` lists them.
COMMANDS = (fit, predict, inspect, noise, demo, reproduce)


def build_parser() -> argparse.ArgumentParser:
    """The ``viboost`` argument parser: one subparser per module of :data:`COMMANDS`.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each subcommand stores its ``run`` function in ``handler``.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=textwrap.fill(
            "VIBoost: Bayesian boosting with a model of label noise (Lorbert, Blei, Schapire, "
            "Ramadge). Fit ensembles of histogram trees or decision stumps from CSV or Parquet "
            "files, predict, inspect models, estimate the share of wrong labels and rank "
            "training rows by how likely their label is wrong. fit and noise use the "
            "noise-robust preset by default (8-leaf trees; rounds and noise model chosen by "
            "cross-fitting, seeded by --random-state); --preset paper runs the paper's "
            "Algorithm 1 as printed, with decision stumps.",
            width=79,
            break_on_hyphens=False,
        ),
        epilog=(
            "examples:\n"
            "  viboost demo\n"
            "  viboost fit train.csv --target label -o model.joblib\n"
            "  viboost fit train.csv --target label -o paper.joblib --preset paper\n"
            "  viboost predict model.joblib test.csv -o predictions.csv\n"
            "  viboost inspect model.joblib\n"
            "  viboost noise train.csv --target label --top 20\n"
            "  viboost reproduce all --quick --out results\n\n"
            "Model files are pickles: load only model files you trust."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def _os_error_message(exc: OSError) -> str:
    if exc.strerror and exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``viboost`` command line.

    Parameters
    ----------
    argv : sequence of str or None, default=None
        The arguments after the program name; None reads ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status: 0 on success, 2 for a usage or input error (reported on stderr as
        ``viboost: error: <message>``), 1 for a numerical failure (an ``ArithmeticError`` or
        ``RuntimeError``, reported the same way, without a traceback), 130 when interrupted.

    Examples
    --------
    >>> main(["--version"])  # doctest: +ELLIPSIS
    viboost ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version or a usage error: argparse has printed it
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.handler(args)
    except BrokenPipeError:  # the reader went away (viboost predict ... | head)
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except (CommandError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"{PROG}: error: {_os_error_message(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (ArithmeticError, RuntimeError) as exc:  # a numerical failure, reported plainly
        print(f"{PROG}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
