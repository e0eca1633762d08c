"""The ``viboost`` command line: fit, predict, inspect, noise, demo and reproduce.

Run ``viboost --help`` (or ``python -m viboost --help``) for the usage. Every subcommand reads
CSV files with a header row and numeric feature columns; models are saved with joblib. User
errors (a missing file, a bad CSV, an unknown column, a file that is not a viboost model) print
``viboost: error: <message>`` on stderr and return exit code 2, without a traceback; a numerical
failure (for example a density not resolved in float64) prints the same way with exit code 1.
No command waits without a bound: every iterative loop underneath is capped. Output files
are written atomically, so an existing file is only ever replaced by complete new content.

Model files are pickles: load only model files you trust.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from viboost._compile import compile_seconds
from viboost._version import __version__

if TYPE_CHECKING:
    from viboost.estimator import VIBoostClassifier

__all__ = ["main"]

PROG = "viboost"
EXIT_FAILURE = 1
EXIT_USAGE = 2

_SPARK_UNICODE = "▁▂▃▄▅▆▇█"
_SPARK_ASCII = "_.-:=+*#"


class CommandError(Exception):
    """A user error: printed as ``viboost: error: <message>``, exit code 2."""


# ---------------------------------------------------------------------------------------- helpers
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("0 threads: use a positive count, or -1 for all cores")
    return value


def _add_jobs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="J",
        help="threads for the compiled kernels (default: 1; -1: all cores); data under about "
        "10^6 cells runs on one thread anyway, and results do not depend on it",
    )


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"the seed must be in [0, 2**32), got {text!r}")
    return value


def _fmt(value: float, digits: int = 4) -> str:
    """A number for people: ``digits`` significant digits, NaN as ``n/a``."""
    if value is None or not np.isfinite(value):
        return "n/a" if value is None or np.isnan(value) else str(value)
    return f"{value:.{digits}g}"


def _check_destination(output: str | os.PathLike[str], *inputs: str | os.PathLike[str]) -> Path:
    """Fail early, before any fitting, if ``output`` cannot be written or would clobber an input."""
    out = Path(output)
    if out.is_dir():
        raise CommandError(f"output {out} is a directory; give a file name")
    directory = out.parent
    if not directory.is_dir():
        raise CommandError(f"output directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise CommandError(f"output directory {directory} is not writable")
    for source in inputs:
        try:
            same = out.exists() and os.path.samefile(out, source)
        except OSError:
            same = False
        if same:
            raise CommandError(f"output {out} is the input file {source}; choose another name")
    return out


def _load_model(path: str | os.PathLike[str]) -> VIBoostClassifier:
    """Load a fitted VIBoostClassifier saved by ``viboost fit`` (or joblib.dump)."""
    import joblib

    from viboost.estimator import VIBoostClassifier

    path = Path(path)
    if not path.exists():
        raise CommandError(f"model file not found: {path}")
    if path.is_dir():
        raise CommandError(f"{path} is a directory, not a model file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = joblib.load(path)
        except ModuleNotFoundError as exc:
            if not str(exc.name or "").startswith("viboost."):
                raise CommandError(f"{path} could not be loaded: {exc}") from None
            # A pickle names the module of each class it holds; viboost's modules have moved
            # since (viboost.inference became viboost.variational, for instance).
            raise CommandError(
                f"{path} was saved by an older viboost whose module {exc.name} no longer "
                f"exists; refit the model with viboost {__version__}"
            ) from None
        except Exception as exc:  # anything unpickling can raise: the file is not a model
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            raise CommandError(
                f"{path} is not a viboost model file (joblib could not load it: {detail})"
            ) from None
    seen = set()
    for warning in caught:
        message = " ".join(str(warning.message).split())
        if message not in seen:
            seen.add(message)
            print(f"{PROG}: warning: {message}", file=sys.stderr)
    if not isinstance(model, VIBoostClassifier):
        raise CommandError(
            f"{path} is not a viboost model file: it holds a {type(model).__module__}."
            f"{type(model).__qualname__}, not a VIBoostClassifier"
        )
    if not hasattr(model, "estimators_"):
        raise CommandError(f"{path} holds a VIBoostClassifier that was never fitted")
    return model


def _feature_name(model: VIBoostClassifier, index: int) -> str:
    names = getattr(model, "feature_names_in_", None)
    return str(names[index]) if names is not None else f"x[{index}]"


def _noise_sentence(model: VIBoostClassifier) -> str:
    if not model.noise_model:
        return "Noise model off (noise_model=False): no SNR or noise grade."
    eta1, eta2 = (float(v) for v in model.eta_)
    expected_noisy = float(np.sum(1.0 - model.clean_proba_))
    return (
        f"SNR eta1/eta2 = {_fmt(model.snr_)} (expected share of true labels "
        f"{eta1 / (eta1 + eta2):.1%}); noise grade log(omega2/omega1) = "
        f"{_fmt(model.noise_grade_)}; expected number of false training labels "
        f"{expected_noisy:.1f} of {model.clean_proba_.size}."
    )


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


# --------------------------------------------------------------------------------------- commands
def _cmd_fit(args: argparse.Namespace) -> int:
    from viboost._io import atomic_dump_model, read_csv_checked
    from viboost.estimator import VIBoostClassifier

    output = _check_destination(args.output, args.data)
    X, y = read_csv_checked(args.data, args.target)
    model = VIBoostClassifier(
        n_estimators=args.n_estimators,
        noise_model=not args.no_noise_model,
        alpha=args.alpha,
        n_jobs=args.jobs,
        verbose=1,
    )
    start = time.perf_counter()
    model.fit(X, y)
    elapsed = time.perf_counter() - start
    accuracy = model.score(X, y)
    atomic_dump_model(model, output)
    classes = " and ".join(str(c) for c in model.classes_)
    summary = (
        f"Fitted VIBoost on {X.shape[0]} rows x {X.shape[1]} features of {args.data} "
        f"(target {args.target!r}, classes {classes}; {model.classes_[1]} is the positive "
        f"class) with {len(model.estimators_)} rounds in {elapsed:.2f} s. Training accuracy "
        f"against the given labels: {accuracy:.2%}. {_noise_sentence(model)} "
        f"Model saved to {output}."
    )
    print(textwrap.fill(summary, width=88))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    import pandas as pd

    from viboost._io import atomic_write_text, read_csv_checked

    model = _load_model(args.model)
    output = _check_destination(args.output, args.data, args.model) if args.output else None
    names = getattr(model, "feature_names_in_", None)
    X, _ = read_csv_checked(args.data, features=None if names is None else list(names))
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
    text = table.to_csv(index=False, lineterminator="\n")
    if output is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(output, text)
        print(f"Wrote {len(table)} predictions to {output}.")
    return 0


def _stump_rows(model: VIBoostClassifier, count: int) -> list[list[str]]:
    rows = []
    for t, (stump, alpha) in enumerate(
        zip(model.estimators_[:count], model.alphas_[:count], strict=True)
    ):
        rows.append(
            [
                str(t + 1),
                _feature_name(model, stump.feature),
                _fmt(stump.threshold, 6),
                f"{stump.polarity:+d}",
                _fmt(alpha, 4),
                "above" if stump.missing_right else "below",
            ]
        )
    return rows


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _elbo_lines(model: VIBoostClassifier) -> list[str]:
    traces = [np.asarray(trace, dtype=float) for trace in model.elbo_]
    recorded = [trace for trace in traces if trace.size]
    if not recorded:
        return ["ELBO: not recorded (fixed_vi_iter runs a fixed number of inner iterations)."]
    last = np.array([trace[-1] for trace in recorded])
    lines = [
        f"ELBO trajectory (value after each round's last inner iteration, {last.size} rounds):",
        f"  first {_fmt(last[0], 8)}, last {_fmt(last[-1], 8)}, "
        f"min {_fmt(last.min(), 8)}, max {_fmt(last.max(), 8)}",
    ]
    if model.noise_model:
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
    else:
        lines.append("  (noise_model=False: exact log evidence of the core model, no inner loop)")
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
    lines.append("  " + ", ".join(f"{t + 1}: {_fmt(last[t], 7)}" for t in picks))
    return lines


def _cmd_inspect(args: argparse.Namespace) -> int:
    model = _load_model(args.model)
    n_rounds = len(model.estimators_)
    classes = ", ".join(str(c) for c in model.classes_)
    lines = [
        f"VIBoostClassifier from {args.model}",
        f"rounds: {n_rounds}",
        f"classes: {classes} (positive class, +1: {model.classes_[1]})",
        f"features: {model.n_features_in_}",
        f"alpha: {model.alpha}, noise model: {'on' if model.noise_model else 'off'}",
    ]
    if model.noise_model:
        eta1, eta2 = (float(v) for v in model.eta_)
        omega1, omega2 = (float(v) for v in model.omega_)
        lines += [
            f"SNR (eta1/eta2): {_fmt(model.snr_)} "
            f"(expected share of true labels {eta1 / (eta1 + eta2):.1%})",
            f"noise grade (log(omega2/omega1)): {_fmt(model.noise_grade_)}",
            f"eta: [{_fmt(eta1, 6)}, {_fmt(eta2, 6)}]",
            f"omega: [{_fmt(omega1, 6)}, {_fmt(omega2, 6)}]",
            "expected false training labels (sum of 1 - clean_proba_): "
            f"{np.sum(1.0 - model.clean_proba_):.1f} of {model.clean_proba_.size}",
        ]
    else:
        lines += ["SNR: n/a (noise model off)", "noise grade: n/a (noise model off)"]
    shown = min(args.stumps, n_rounds)
    lines += [
        "",
        f"first {shown} of {n_rounds} stumps, h(x) = polarity if x[feature] > threshold else "
        "-polarity",
        "(+1 votes for the positive class; 'missing' is the side a NaN value goes to):",
    ]
    header = ["round", "feature", "threshold", "polarity", "alpha", "missing"]
    lines += _table(header, _stump_rows(model, shown), right={0, 2, 3, 4})
    lines += ["", *_elbo_lines(model)]
    print("\n".join(lines))
    return 0


def _cmd_noise(args: argparse.Namespace) -> int:
    import pandas as pd

    from viboost._io import atomic_write_text, read_csv_checked
    from viboost.estimator import VIBoostClassifier

    output = _check_destination(args.output, args.data) if args.output else None
    X, y = read_csv_checked(args.data, args.target)
    model = VIBoostClassifier(n_estimators=args.n_estimators, n_jobs=args.jobs, verbose=1)
    model.fit(X, y)
    noise_proba = 1.0 - model.clean_proba_
    order = np.argsort(-noise_proba, kind="stable")
    labels = y.to_numpy()
    ranking = pd.DataFrame(
        {
            "rank": np.arange(1, order.size + 1),
            "row": order,
            "label": labels[order],
            "noise_proba": noise_proba[order],
        }
    )
    top = min(args.top, order.size)
    intro = (
        f"VIBoost on {args.data}: {X.shape[0]} rows, {len(model.estimators_)} rounds. "
        f"{_noise_sentence(model)}"
    )
    lines = [textwrap.fill(intro, width=88), ""]
    lines.append(
        f"Top {top} training rows by the probability that their label is false "
        "(1 - clean_proba_); rows are numbered from 0 after the header:"
    )
    rows = [
        [str(r.rank), str(r.row), str(r.label), f"{r.noise_proba:.4f}"]
        for r in ranking.head(top).itertuples(index=False)
    ]
    lines += _table(["rank", "row", "label", "P(label false)"], rows, right={0, 1, 3})
    if output is not None:
        atomic_write_text(output, ranking.to_csv(index=False, lineterminator="\n"))
        lines += ["", f"Wrote the ranking of all {len(ranking)} rows to {output}."]
    print("\n".join(lines))
    return 0


def _demo_split(seed: int) -> list[np.ndarray]:
    from sklearn.model_selection import train_test_split

    from viboost.datasets import load_spambase

    X, y = load_spambase(return_X_y=True)
    return train_test_split(X, y, train_size=0.1, stratify=y, random_state=seed)


def _cmd_demo(args: argparse.Namespace) -> int:
    from sklearn.ensemble import AdaBoostClassifier
    from sklearn.tree import DecisionTreeClassifier

    from viboost.datasets import flip_labels
    from viboost.estimator import VIBoostClassifier

    wall = time.perf_counter()
    X_train, X_test, y_train, y_test = _demo_split(args.seed)
    y_noisy, flipped = flip_labels(y_train, 0.2, random_state=args.seed)
    n_train, n_flipped = y_train.size, int(flipped.sum())
    top = n_flipped if args.top is None else args.top
    if not 1 <= top <= n_train:
        raise CommandError(f"--top must be between 1 and the {n_train} training rows, got {top}")

    compiled_before = compile_seconds()
    start = time.perf_counter()
    vib = VIBoostClassifier(n_estimators=args.n_estimators).fit(X_train, y_noisy)
    vib_time = time.perf_counter() - start
    # On the first run after an install, most of the fit time is numba compiling the kernels.
    vib_compile = compile_seconds() - compiled_before
    start = time.perf_counter()
    ada = AdaBoostClassifier(
        estimator=DecisionTreeClassifier(max_depth=1),
        n_estimators=args.n_estimators,
        random_state=args.seed,
    ).fit(X_train, y_noisy)
    ada_time = time.perf_counter() - start
    vib_error = float(np.mean(vib.predict(X_test) != y_test))
    ada_error = float(np.mean(ada.predict(X_test) != y_test))

    ranked = np.argsort(-(1.0 - vib.clean_proba_), kind="stable")[:top]
    hits = int(flipped[ranked].sum())
    base_rate = n_flipped / n_train
    eta1, eta2 = (float(v) for v in vib.eta_)
    compile_note = (
        [
            f"  (VIBoost's fit time includes {vib_compile:.1f} s of one-time kernel compilation; "
            "run the demo again for its compiled speed)"
        ]
        if vib_compile >= 0.1
        else []
    )
    lines = [
        f"viboost demo: Spambase (4,601 e-mails, 57 features), seed {args.seed}",
        f"  training set: {n_train} rows (stratified 10%), {n_flipped} labels flipped "
        f"({base_rate:.0%}); test set: {y_test.size} rows with their true labels",
        f"  both models: {args.n_estimators} rounds of decision stumps on the noisy labels",
        "",
        *_table(
            ["model", "test error", "fit time"],
            [
                ["VIBoost", f"{vib_error:.2%}", f"{vib_time:.2f} s"],
                ["AdaBoost", f"{ada_error:.2%}", f"{ada_time:.2f} s"],
            ],
            right={1, 2},
        ),
        *compile_note,
        "",
        f"  VIBoost SNR (eta1/eta2): {_fmt(vib.snr_)}  (expected share of true labels "
        f"{eta1 / (eta1 + eta2):.1%}; really {1 - base_rate:.0%})",
        f"  VIBoost noise grade (log(omega2/omega1)): {_fmt(vib.noise_grade_)}",
        "",
        f"Of the top-{top} rows ranked by 1 - clean_proba_, {hits} were really flipped "
        f"(precision {hits}/{top} = {hits / top:.0%}; a random ranking would get "
        f"{base_rate:.0%}).",
        f"Wall time: {time.perf_counter() - wall:.2f} s",
    ]
    print("\n".join(lines))
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
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


# ----------------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The ``viboost`` argument parser, with one subparser per command.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each subcommand stores its handler in ``handler``.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=textwrap.fill(
            "VIBoost: Bayesian boosting with a model of label noise (Lorbert, Blei, Schapire, "
            "Ramadge). Fit decision-stump ensembles from CSV files, predict, inspect models and "
            "rank training rows by how likely their label is false.",
            width=79,
        ),
        epilog=(
            "examples:\n"
            "  viboost demo\n"
            "  viboost fit train.csv --target label -o model.joblib\n"
            "  viboost predict model.joblib test.csv -o predictions.csv\n"
            "  viboost inspect model.joblib\n"
            "  viboost noise train.csv --target label --top 20\n"
            "  viboost reproduce all --quick --out results\n\n"
            "Model files are pickles: load only model files you trust."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    fit = sub.add_parser(
        "fit",
        help="fit a model on a CSV file and save it",
        description="Fit VIBoostClassifier on every column of DATA except the target; save the "
        "model with joblib (atomically) and print a summary.",
    )
    fit.add_argument("data", metavar="DATA.csv", help="training data with a header row")
    fit.add_argument("--target", required=True, metavar="COL", help="label column (2 classes)")
    fit.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write")
    fit.add_argument(
        "--n-estimators",
        type=_positive_int,
        default=100,
        metavar="T",
        help="boosting rounds (default: 100)",
    )
    fit.add_argument(
        "--no-noise-model",
        action="store_true",
        help="fit the core model without label noise (smoothed AdaBoost)",
    )
    fit.add_argument(
        "--alpha",
        choices=["approx", "exact"],
        default="approx",
        help="approximate (paper) or exact mode of the weight posterior (default: approx)",
    )
    _add_jobs_option(fit)
    fit.set_defaults(handler=_cmd_fit)

    predict = sub.add_parser(
        "predict",
        help="predict classes and probabilities for a CSV file",
        description="Write a CSV with the columns 'prediction' and 'proba_<class>' for each "
        "class. The model's feature columns are selected by name; other columns (such as the "
        "target) are ignored.",
    )
    predict.add_argument("model", metavar="MODEL", help="model file written by 'viboost fit'")
    predict.add_argument("data", metavar="DATA.csv", help="rows to predict, with a header row")
    predict.add_argument(
        "-o",
        "--output",
        metavar="OUT.csv",
        help="write the CSV here (atomically) instead of to stdout",
    )
    _add_jobs_option(predict)
    predict.set_defaults(handler=_cmd_predict)

    inspect = sub.add_parser(
        "inspect",
        help="describe a fitted model",
        description="Print rounds, classes, the noise statistics (SNR, noise grade, eta, "
        "omega), the first stumps and a summary of the ELBO trajectory.",
    )
    inspect.add_argument("model", metavar="MODEL", help="model file written by 'viboost fit'")
    inspect.add_argument(
        "--stumps",
        type=_positive_int,
        default=10,
        metavar="N",
        help="number of stumps to list (default: 10)",
    )
    inspect.set_defaults(handler=_cmd_inspect)

    noise = sub.add_parser(
        "noise",
        help="rank training rows by how likely their label is false",
        description="Fit VIBoostClassifier, then list the training rows ranked by the posterior "
        "probability that their label is false (1 - clean_proba_).",
    )
    noise.add_argument("data", metavar="DATA.csv", help="training data with a header row")
    noise.add_argument("--target", required=True, metavar="COL", help="label column (2 classes)")
    noise.add_argument(
        "--top", type=_positive_int, default=20, metavar="K", help="rows to print (default: 20)"
    )
    noise.add_argument(
        "--n-estimators",
        type=_positive_int,
        default=100,
        metavar="T",
        help="boosting rounds (default: 100)",
    )
    noise.add_argument(
        "-o",
        "--output",
        metavar="OUT.csv",
        help="also write the ranking of all rows (rank, row, label, noise_proba) to this CSV",
    )
    _add_jobs_option(noise)
    noise.set_defaults(handler=_cmd_noise)

    demo = sub.add_parser(
        "demo",
        help="VIBoost vs AdaBoost on Spambase with 20%% flipped training labels",
        description="Train on a stratified random 10% of the bundled Spambase data with 20% of "
        "the training labels flipped, test on the other 90% against the true labels, compare "
        "with AdaBoost and check how many flipped rows VIBoost ranks at the top.",
    )
    demo.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    demo.add_argument(
        "--n-estimators",
        type=_positive_int,
        default=100,
        metavar="T",
        help="boosting rounds for both models (default: 100)",
    )
    demo.add_argument(
        "--top",
        type=_positive_int,
        default=None,
        metavar="K",
        help="rows to check (default: the number of flipped rows)",
    )
    demo.set_defaults(handler=_cmd_demo)

    reproduce = sub.add_parser(
        "reproduce",
        help="reproduce the figures of the paper's sections 5 and 6",
        description="Run the paper's experiments and write PNG figures and the CSV behind each "
        "into DIR (atomically): prior (Figure 5), spam (Figure 6 and the ELBO trajectory), text "
        "(Figure 7), step (Figures 8-9), long-servedio (Figure 10), vi-vs-gibbs (VIBoost's SNR "
        "and noise grade against the Gibbs posterior of Algorithm 2 on the step data); 'all' "
        "runs the six and writes DIR/report.md with the paper's claims next to the measured "
        "numbers.",
    )
    reproduce.add_argument(
        "experiment",
        choices=["prior", "spam", "text", "step", "long-servedio", "vi-vs-gibbs", "all"],
        help="which experiment to run",
    )
    reproduce.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (created if missing)"
    )
    reproduce.add_argument(
        "--runs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="independent runs per experiment (default: 40, the paper's; 3 with --quick)",
    )
    reproduce.add_argument(
        "--quick",
        action="store_true",
        help="a fast smoke test: fewer runs, rounds and grid points",
    )
    reproduce.add_argument("--seed", type=_seed, default=0, help="master seed (default: 0)")
    reproduce.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="J",
        help="processes over runs (default: 1); results do not depend on it",
    )
    reproduce.set_defaults(handler=_cmd_reproduce)
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
