"""``viboost reproduce``: run the paper's experiments (:mod:`viboost.experiments`).

Writes each experiment's PNG figures and CSV tables into ``--out``; ``all`` also writes a report
that puts the paper's claims next to the measured numbers.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from viboost.cli.common import CommandError
from viboost.cli.options import positive_int, random_seed


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``viboost reproduce`` and its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "reproduce",
        help="reproduce the figures of the paper's sections 5 and 6",
        description="Run the paper's experiments (every VIBoostClassifier with "
        "preset='paper': Algorithm 1 as printed) and write PNG figures and the CSV behind each "
        "into DIR (atomically): prior (Figure 5), spam (Figure 6 and the ELBO trajectory), text "
        "(Figure 7), step (Figures 8-9), long-servedio (Figure 10), vi-vs-gibbs (VIBoost's SNR "
        "and noise grade against the Gibbs posterior of Algorithm 2 on the step data); 'all' "
        "runs the six and writes DIR/report.md with the paper's claims next to the measured "
        "numbers.",
    )
    parser.add_argument(
        "experiment",
        choices=["prior", "spam", "text", "step", "long-servedio", "vi-vs-gibbs", "all"],
        help="which experiment to run",
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (created if missing)"
    )
    parser.add_argument(
        "--runs",
        type=positive_int,
        default=None,
        metavar="N",
        help="independent runs per experiment (default: 40, the paper's; 3 with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a fast smoke test: fewer runs, rounds and grid points",
    )
    parser.add_argument("--seed", type=random_seed, default=0, help="master seed (default: 0)")
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="J",
        help="processes over runs (default: 1); results do not depend on it",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the chosen experiments into --out and print where each wrote its files."""
    from viboost.experiments import EXPERIMENTS, Settings, run_experiments

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} exists and is not a directory")
    if not out.exists():
        parent = out.parent
        if not parent.is_dir():
            raise CommandError(f"--out {out}: its parent directory {parent} does not exist")
        out.mkdir()
    if not os.access(out, os.W_OK):
        raise CommandError(f"--out directory {out} is not writable")
    runs = args.runs if args.runs is not None else (3 if args.quick else 40)
    settings = Settings(out=out, runs=runs, quick=args.quick, seed=args.seed, n_jobs=args.jobs)
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]

    def progress(result) -> None:
        files = ", ".join([*result.figures, *result.tables])
        print(f"{result.name}: {result.seconds:.1f} s, wrote {files}", flush=True)

    start = time.perf_counter()
    run_experiments(names, settings, report=args.experiment == "all", progress=progress)
    if args.experiment == "all":
        print(f"report: {out / 'report.md'}")
    print(
        f"Done in {time.perf_counter() - start:.1f} s ({runs} runs, seed {args.seed}"
        f"{', quick mode' if args.quick else ''}); output in {out}."
    )
    return 0
