"""The ``viboost`` command line: fit, predict, inspect, noise, demo and reproduce.

Run ``viboost --help`` (or ``python -m viboost --help``) for the usage. Every subcommand reads
delimited text files with a header row (comma, semicolon, tab or pipe: sniffed, or given with
``--sep``) or Parquet files (``.parquet``/``.pq``, needs pyarrow: ``pip install
"viboost[parquet]"``), with numeric feature columns; ``--index-col`` and ``--id`` name columns that
are not features (a leading column with an empty header, the index pandas' ``to_csv()`` writes,
is used as the row index). Rows are numbered 1, 2, ... from the first data row after the header,
in error messages and in ``noise`` output alike. Models are saved with joblib. ``fit``
and ``noise`` use the noise-robust preset by default (``preset="robust"``: the number of rounds
and the noise model are chosen by cross-fitting on folds seeded by ``--random-state``, 0 unless
given, so the same file gives the same model); ``--preset paper`` runs the paper's Algorithm 1
as printed, and ``reproduce`` always does. User
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
def _integer(text: str, expected: str = "an integer") -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def _positive_int(text: str) -> int:
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


def _folds(text: str) -> int:
    value = _integer(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"cross-fitting needs at least 2 folds, got {text!r}")
    return value


def _max_bins(text: str) -> int | None:
    if text.lower() == "none":
        return None
    value = _integer(text, "an integer from 2 to 255 or 'none'")
    if not 2 <= value <= 255:
        raise argparse.ArgumentTypeError(f"expected an integer from 2 to 255, got {text!r}")
    return value


def _patience(text: str) -> int | None:
    return None if text.lower() == "none" else _positive_int(text)


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


def _add_input_options(parser: argparse.ArgumentParser, id_help: str) -> None:
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


def _add_fit_options(parser: argparse.ArgumentParser, noise_switch: bool) -> None:
    """The estimator's hyperparameters, shared by fit and noise."""
    parser.add_argument(
        "--preset",
        choices=["robust", "paper"],
        default="robust",
        help="robust (default): rounds and noise model chosen by cross-fitting, calibrated "
        "noise statistics; paper: the paper's Algorithm 1 as printed",
    )
    parser.add_argument(
        "--n-estimators",
        type=_positive_int,
        default=None,
        metavar="T",
        help="boosting rounds (default: from the preset; robust: at most 1000, chosen by "
        "cross-fitting; paper: 100)",
    )
    parser.add_argument(
        "--random-state",
        type=_seed,
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
        help="shrinkage of each round's weight (default: from the preset; robust: 0.1, paper: 1)",
    )
    parser.add_argument(
        "--cv",
        type=_folds,
        default=5,
        metavar="K",
        help="stratified folds of the cross-fitting that chooses the rounds and calibrates the "
        "noise model under the robust preset (default: 5)",
    )
    parser.add_argument(
        "--n-iter-no-change",
        type=_patience,
        default=100,
        metavar="N",
        help="with cross-fitting, stop once the out-of-fold log-likelihood has not risen for N "
        "rounds (default: 100; none: try all --n-estimators rounds)",
    )
    parser.add_argument(
        "--max-bins",
        type=_max_bins,
        default=255,
        metavar="B",
        help="bins per feature for the stump search, 2 to 255 (default: 255; none: exhaustive "
        "search over all distinct values, slower)",
    )
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
        help="fit LABEL against all other labels of the target (one-vs-rest), which become "
        "'(other)'; needed when the target has more than two classes",
    )


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


def _pct(value: float | None, digits: int = 1) -> str:
    """A share as a percentage, NaN (or None) as ``n/a``."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.{digits}%}"


def _interval(bounds: np.ndarray | None, level: float = 0.9) -> str:
    """``"90% interval a%-b%"``, or ``"no interval"`` when the bounds are missing or NaN."""
    if bounds is None or not np.all(np.isfinite(bounds)):
        return "no interval"
    return f"{level:.0%} interval {bounds[0]:.1%}-{bounds[1]:.1%}"


def _calibrated(model: VIBoostClassifier) -> bool:
    """Whether the model's noise statistics were cross-fitted and calibrated."""
    return getattr(model, "noise_calibration_", None) is not None


def _cross_fitted(model: VIBoostClassifier) -> bool:
    """Whether the number of rounds was chosen by cross-fitting (the robust preset)."""
    return np.size(getattr(model, "cv_rounds_", ())) > 0


def _uncalibrated_reason(model: VIBoostClassifier) -> str:
    preset = getattr(model, "preset", "paper")
    if preset == "paper":
        return "preset='paper'"
    return "the noise model was fitted in-sample"


def _noise_sentence(model: VIBoostClassifier) -> str:
    if not model.noise_model:
        return "Noise model off (noise_model=False): no SNR, noise grade or share of wrong labels."
    n_rows = model.mislabel_proba_.size
    c0, c1 = (str(c) for c in model.classes_)
    if _calibrated(model):
        calibration = model.noise_calibration_
        rate = float(model.noise_rate_)
        flip0, flip1 = (float(v) for v in model.flip_rates_)
        return (
            f"Estimated share of wrong labels {_pct(rate)} "
            f"({_interval(model.noise_rate_interval_)}), i.e. about {rate * n_rows:,.0f} of "
            f"{n_rows:,} rows; by class: {_pct(flip0)} of true {c0} rows labelled {c1}, "
            f"{_pct(flip1)} of true {c1} rows labelled {c0}. Noise model: theta (share of "
            f"labels drawn from the signal) {calibration.theta:.2f}, noise grade xi (log-odds "
            f"of {c1} among noise-type labels) {calibration.noise_grade:.2f}, scale of the "
            f"margin {calibration.scale:.2f}."
        )
    eta1, eta2 = (float(v) for v in model.eta_)
    expected_wrong = float(np.sum(model.mislabel_proba_))
    return (
        f"SNR eta1/eta2 = {_fmt(model.snr_)} (expected share of labels drawn from the signal "
        f"{eta1 / (eta1 + eta2):.1%}); noise grade log(omega2/omega1) = "
        f"{_fmt(model.noise_grade_)}. The expected number of wrong labels (sum of "
        f"mislabel_proba_), {expected_wrong:.1f} of {n_rows:,}, is a ranking statistic, not "
        f"calibrated ({_uncalibrated_reason(model)})."
    )


def _rounds_phrase(model: VIBoostClassifier) -> str:
    """``"N rounds"``, with how N was chosen for a cross-fitted model."""
    n_rounds = len(model.estimators_)
    if not _cross_fitted(model):
        return f"{n_rounds} rounds"
    return f"{n_rounds} rounds (chosen by cross-fitting, at most {_plan(model).n_estimators})"


def _plan(model: VIBoostClassifier):
    """The model's settings, resolved from its preset (viboost.presets.resolve_preset)."""
    from viboost.presets import resolve_preset

    return resolve_preset(
        getattr(model, "preset", "paper"),
        getattr(model, "n_estimators", None),
        getattr(model, "learning_rate", None),
        getattr(model, "alpha", None),
        getattr(model, "noise_fit", None),
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
def _read_data(args: argparse.Namespace, target: str | None = None, features=None):
    """Read DATA with the --sep, --index-col and --id options; print the reader's notes."""
    from viboost._io import read_table_checked

    data = read_table_checked(
        args.data,
        target,
        features=features,
        sep=args.sep,
        index_col=args.index_col,
        id_col=args.id_col,
    )
    for note in data.notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    return data


def _labels(values, limit: int = 10) -> str:
    """Distinct labels as plain text (``str``, never a numpy repr), sorted where possible."""
    try:
        ordered = sorted(values)
    except TypeError:
        ordered = sorted(values, key=str)
    text = ", ".join(str(v) for v in ordered[:limit])
    return text + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def _matches(values: np.ndarray, label: str) -> np.ndarray:
    """Which ``values`` equal the command-line ``label`` (as text, or as a number)."""
    match = np.array([str(v) == label for v in values], dtype=bool)
    if not match.any() and np.issubdtype(values.dtype, np.number):
        try:
            match = values == float(label)
        except ValueError:
            pass
    return np.asarray(match, dtype=bool)


OTHER = "(other)"


def _binary_target(y, args: argparse.Namespace):
    """The labels to fit: checked for two classes here, so errors are CLI messages with plain
    numbers; with --positive, LABEL against all others (one-vs-rest)."""
    import pandas as pd

    values = y.to_numpy()
    where = f"target column {args.target!r} of {args.data}"
    if args.positive is not None:
        label = args.positive
        match = _matches(values, label)
        if not match.any():
            raise CommandError(
                f"--positive {label}: no row has that label in the {where}; its labels are "
                f"{_labels(pd.unique(y))}"
            )
        if match.all():
            raise CommandError(
                f"--positive {label}: every row has that label in the {where}; there is no "
                "other class to fit against"
            )
        if not OTHER < label:
            raise CommandError(f"--positive {label}: the label must not sort before {OTHER!r}")
        return pd.Series(np.where(match, label, OTHER), index=y.index, name=y.name)
    classes = pd.unique(y)
    if classes.size == 1:
        raise CommandError(
            f"the {where} has only one class ({_labels(classes)}, in all {len(y):,} rows); "
            "viboost fits two classes"
        )
    if classes.size > 2:
        raise CommandError(
            f"the {where} has {classes.size} classes ({_labels(classes)}); viboost fits two: "
            "give --positive LABEL to fit one label against all the others (one-vs-rest), or "
            "filter or merge the classes first"
        )
    return y


def _estimator(args: argparse.Namespace, noise_model: bool = True) -> VIBoostClassifier:
    from viboost.estimator import VIBoostClassifier

    return VIBoostClassifier(
        n_estimators=args.n_estimators,
        preset=args.preset,
        learning_rate=args.learning_rate,
        noise_model=noise_model,
        alpha=args.alpha,
        noise_fit=args.noise_fit,
        cv=args.cv,
        n_iter_no_change=args.n_iter_no_change,
        max_bins=args.max_bins,
        random_state=args.random_state,
        n_jobs=args.jobs,
        verbose=1,
    )


def _not_features(data) -> str:
    """``"; not features: 'id' (--id)"`` for the columns the reader set aside, else ``""``."""
    parts = []
    if data.index_col is not None:
        parts.append(f"{data.index_col!r} (row index)")
    if data.ids is not None:
        parts.append(f"{data.ids.name!r} (--id)")
    return f"; not used as features: {', '.join(parts)}" if parts else ""


def _cmd_fit(args: argparse.Namespace) -> int:
    from viboost._io import atomic_dump_model

    output = _check_destination(args.output, args.data)
    data = _read_data(args, target=args.target)
    X = data.X
    y = _binary_target(data.y, args)
    model = _estimator(args, noise_model=args.noise_model)
    start = time.perf_counter()
    model.fit(X, y)
    elapsed = time.perf_counter() - start
    accuracy = model.score(X, y)
    atomic_dump_model(model, output)
    classes = " and ".join(str(c) for c in model.classes_)
    summary = (
        f"Fitted VIBoost (preset {args.preset!r}) on {X.shape[0]} rows x {X.shape[1]} "
        f"features of {args.data} (target {args.target!r}, classes {classes}; "
        f"{model.classes_[1]} is the positive class){_not_features(data)} with "
        f"{_rounds_phrase(model)} in {elapsed:.2f} s. Training accuracy against the given "
        f"labels: {accuracy:.2%}. {_noise_sentence(model)} Model saved to {output}."
    )
    print(textwrap.fill(summary, width=88, break_on_hyphens=False))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    import pandas as pd

    from viboost._io import atomic_write_text

    model = _load_model(args.model)
    output = _check_destination(args.output, args.data, args.model) if args.output else None
    names = getattr(model, "feature_names_in_", None)
    data = _read_data(args, features=None if names is None else list(names))
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
        table.insert(0, _id_header(data.ids.name, table.columns), data.ids.to_numpy())
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
    in_sample = model.noise_model and not _cross_fitted(model)
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
        f"  first {_fmt(last[0], 8)}, last {_fmt(last[-1], 8)}, "
        f"min {_fmt(last.min(), 8)}, max {_fmt(last.max(), 8)}",
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
    lines.append("  " + ", ".join(f"{t + 1}: {_fmt(last[t], 7)}" for t in picks))
    return lines


def _fit_lines(model: VIBoostClassifier) -> list[str]:
    """How the model was fitted: the preset and its resolved settings."""
    plan = _plan(model)
    preset = getattr(model, "preset", "paper")
    if _cross_fitted(model):
        noise_fit = "cross-fit"
        how = f"rounds chosen by cross-fitting, cv={getattr(model, 'cv', '?')}"
        if model.noise_model:
            how += ", noise model calibrated on out-of-fold margins"
    else:
        noise_fit = "in-sample"
        how = "fixed rounds" + (", Algorithm 1's inner loop" if model.noise_model else "")
    return [
        f"preset: {preset} (noise_fit: {noise_fit}; {how})",
        f"learning rate: {_fmt(plan.learning_rate)}, alpha: {plan.alpha}, "
        f"noise model: {'on' if model.noise_model else 'off'}",
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
        f"share of wrong labels: {_pct(rate)} ({_interval(model.noise_rate_interval_)}), "
        f"about {np.sum(model.mislabel_proba_):.1f} of {n_rows:,} rows",
        f"  true {c0} labelled {c1}: {_pct(flips[0])} ({_interval(flip_intervals[0])})",
        f"  true {c1} labelled {c0}: {_pct(flips[1])} ({_interval(flip_intervals[1])})",
    ]
    if _calibrated(model):
        calibration = model.noise_calibration_
        lines += [
            "calibration (empirical Bayes on the out-of-fold margins):",
            f"  theta (share of labels drawn from the signal) {_fmt(calibration.theta)}, noise "
            f"grade xi {_fmt(calibration.noise_grade)}, scale of the margin "
            f"{_fmt(calibration.scale)}",
        ]
    else:
        lines.append(
            f"  (a ranking statistic, not calibrated ({_uncalibrated_reason(model)}): no intervals)"
        )
    return lines


def _cross_fit_lines(model: VIBoostClassifier) -> list[str]:
    """The cross-fitted log-likelihood at the chosen number of rounds."""
    if not _cross_fitted(model):
        return []
    rounds = np.asarray(model.cv_rounds_)
    scores = np.asarray(model.cv_log_likelihood_, dtype=float)
    n_rounds = len(model.estimators_)
    chosen = np.flatnonzero(rounds == n_rounds)
    at = scores[chosen[0]] if chosen.size else float("nan")
    what = (
        "marginal log-likelihood of the labels under the calibrated noise model"
        if model.noise_model
        else "logistic log-likelihood of the labels"
    )
    return [
        f"Cross-fitted log-likelihood (out-of-fold margins; {what}):",
        f"  {_fmt(at, 8)} at the chosen {n_rounds} rounds; checked at {rounds.size} round "
        f"counts from {int(rounds[0])} to {int(rounds[-1])}, max {_fmt(scores.max(), 8)}",
    ]


def _add_data_and_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", metavar="DATA", help=_DATA_ARG)
    parser.add_argument(
        "--target",
        required=True,
        metavar="COL",
        help="label column (2 classes, or use --positive)",
    )


def _add_plots_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plots",
        metavar="DIR",
        help="also write the model's plots as PNG files into DIR (created if needed): the "
        "ELBO per round, the noise statistics over the rounds (or the cross-fitted round "
        "choice), the histogram of P(label wrong) and the top suspects (viboost.plotting)",
    )


def _write_plots(model, directory: str | None, top: int, labels=None) -> list[str]:
    """Write the model's plots into ``directory`` (if given); the lines that say where."""
    if directory is None:
        return []
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    from viboost.plotting import write_plots

    paths = write_plots(model, directory, top=top, labels=labels)
    return ["", f"Wrote {len(paths)} plots to {directory}: " + ", ".join(p.name for p in paths)]


def _cmd_inspect(args: argparse.Namespace) -> int:
    model = _load_model(args.model)
    n_rounds = len(model.estimators_)
    classes = ", ".join(str(c) for c in model.classes_)
    rounds = _rounds_phrase(model).removeprefix(f"{n_rounds} rounds")
    lines = [
        f"VIBoostClassifier from {args.model}",
        *_fit_lines(model),
        f"rounds: {n_rounds}{rounds}",
        f"classes: {classes} (positive class, +1: {model.classes_[1]})",
        f"features: {model.n_features_in_}",
    ]
    if model.noise_model:
        eta1, eta2 = (float(v) for v in model.eta_)
        omega1, omega2 = (float(v) for v in model.omega_)
        lines += _noise_rate_lines(model)
        lines += [
            f"SNR (eta1/eta2): {_fmt(model.snr_)} "
            f"(expected share of labels drawn from the signal {eta1 / (eta1 + eta2):.1%})",
            f"noise grade (log(omega2/omega1)): {_fmt(model.noise_grade_)}",
            f"eta: [{_fmt(eta1, 6)}, {_fmt(eta2, 6)}]",
            f"omega: [{_fmt(omega1, 6)}, {_fmt(omega2, 6)}]",
        ]
    else:
        lines += [
            "SNR: n/a (noise model off)",
            "noise grade: n/a (noise model off)",
            "share of wrong labels: n/a (noise model off)",
        ]
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
    cross = _cross_fit_lines(model)
    if cross:
        lines += ["", *cross]
    lines += _write_plots(model, args.plots, top=20)
    print("\n".join(lines))
    return 0


def _flip_rate_lines(estimate, n_rows: int, n_issues: int, reason: str) -> list[str]:
    """The flip-rate estimate of ``viboost noise``: calibrated numbers with intervals, or the
    in-sample ranking statistic of the paper preset."""
    c0, c1 = (str(c) for c in estimate.classes)
    if not estimate.calibrated:
        return [
            f"Expected number of wrong labels (sum of P(label wrong)): {estimate.n_wrong:.1f} "
            f"of {n_rows:,} ({_pct(estimate.rate)}): a ranking statistic, not calibrated "
            f"({reason}), with no interval.",
            f"Rows flagged as issues (P(label wrong) > 0.5): {n_issues:,}.",
        ]
    level = estimate.level
    return [
        f"Estimated share of wrong labels: {_pct(estimate.rate)} "
        f"({_interval(estimate.interval, level)}), about {estimate.n_wrong:,.0f} of {n_rows:,} "
        "rows (the sum of P(label wrong)).",
        f"  true {c0} rows labelled {c1}: {_pct(estimate.class_rates[0])} "
        f"({_interval(estimate.class_intervals[0], level)})",
        f"  true {c1} rows labelled {c0}: {_pct(estimate.class_rates[1])} "
        f"({_interval(estimate.class_intervals[1], level)})",
        f"Rows flagged as issues (P(label wrong) > 0.5): {n_issues:,}.",
    ]


def _cmd_noise(args: argparse.Namespace) -> int:
    import pandas as pd

    from viboost._io import atomic_write_text
    from viboost.noise import estimate_flip_rate, label_quality_scores

    output = _check_destination(args.output, args.data) if args.output else None
    data = _read_data(args, target=args.target)
    X = data.X
    y = _binary_target(data.y, args)
    model = _estimator(args)
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
        id_header = _id_header(data.ids.name, ranking.columns)
        ranking.insert(2, id_header, data.ids.to_numpy()[order])
    top = min(args.top, order.size)
    plot_labels = None if data.ids is None else [str(v) for v in data.ids.to_numpy()]
    intro = (
        f"VIBoost (preset {args.preset!r}) on {args.data}: {X.shape[0]:,} rows, "
        f"{_rounds_phrase(model)}."
    )
    lines = [textwrap.fill(intro, width=88)]
    lines += [
        textwrap.fill(line, width=88, subsequent_indent="    " if line.startswith("  ") else "")
        for line in _flip_rate_lines(
            estimate, X.shape[0], int(issues.sum()), _uncalibrated_reason(model)
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
    lines += _table(header, rows, right={0, 1, len(header) - 1})
    if output is not None:
        atomic_write_text(output, ranking.to_csv(index=False, lineterminator="\n"))
        lines += ["", f"Wrote the ranking of all {len(ranking)} rows to {output}."]
    lines += _write_plots(model, args.plots, top=top, labels=plot_labels)
    print("\n".join(lines))
    return 0


def _id_header(name: object, taken) -> str:
    """The header of the passed-through id column: its own name, unless an output column has it."""
    name = str(name)
    return name if name not in set(taken) else f"id_{name}"


def _demo_split(seed: int) -> list[np.ndarray]:
    from sklearn.model_selection import train_test_split

    from viboost.datasets import load_spambase

    X, y = load_spambase(return_X_y=True)
    return train_test_split(X, y, train_size=0.1, stratify=y, random_state=seed)


def _lightgbm_stumps(n_estimators: int, seed: int):
    """LightGBM with stumps (2 leaves), or None when lightgbm (the ``demo`` extra) is absent."""
    try:
        from lightgbm import LGBMClassifier
    except ImportError:
        return None
    return LGBMClassifier(
        n_estimators=n_estimators,
        num_leaves=2,
        learning_rate=0.1,
        min_child_samples=5,
        verbose=-1,
        n_jobs=1,
        random_state=seed,
    )


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

    results = []  # (model, test error, fit seconds)

    def timed(name: str, model) -> object:
        start = time.perf_counter()
        model.fit(X_train, y_noisy)
        seconds = time.perf_counter() - start
        error = float(np.mean(model.predict(X_test) != y_test))
        results.append((name, error, seconds))
        return model

    compiled_before = compile_seconds()
    # The default (robust) preset; a progress bar on stderr if the fit takes over 2 s.
    vib = timed("VIBoost", VIBoostClassifier(random_state=args.seed, verbose=1))
    # On the first run after an install, most of the fit time is numba compiling the kernels.
    vib_compile = compile_seconds() - compiled_before
    timed(
        "AdaBoost",
        AdaBoostClassifier(
            estimator=DecisionTreeClassifier(max_depth=1),
            n_estimators=args.n_estimators,
            random_state=args.seed,
        ),
    )
    lightgbm = _lightgbm_stumps(args.n_estimators, args.seed)
    if lightgbm is not None:
        timed("LightGBM", lightgbm)

    ranked = np.argsort(-vib.mislabel_proba_, kind="stable")[:top]
    hits = int(flipped[ranked].sum())
    base_rate = n_flipped / n_train
    estimate = vib.noise_rate_
    compile_note = (
        [
            f"  (VIBoost's fit time includes {vib_compile:.1f} s of one-time kernel compilation; "
            "run the demo again for its compiled speed)"
        ]
        if vib_compile >= 0.1
        else []
    )
    skipped = (
        []
        if lightgbm is not None
        else [
            "  (LightGBM skipped: lightgbm is not installed; pip install 'viboost[demo]' or "
            "pip install lightgbm)"
        ]
    )
    others = "AdaBoost and LightGBM" if lightgbm is not None else "AdaBoost"

    def indented(text: str) -> str:
        return textwrap.fill(text, width=88, initial_indent="  ", subsequent_indent="  ")

    lines = [
        f"viboost demo: Spambase (4,601 e-mails, 57 features), seed {args.seed}",
        indented(
            f"training set: {n_train} rows (stratified 10%), {n_flipped} labels flipped "
            f"({base_rate:.0%}); test set: {y_test.size} rows with their true labels"
        ),
        indented(
            f"{others}: {args.n_estimators} rounds of decision stumps; VIBoost (preset "
            f"'robust'): {len(vib.estimators_)} rounds, chosen by cross-fitting (at most "
            f"{_plan(vib).n_estimators}); all on the noisy labels"
        ),
        "",
        *_table(
            ["model", "test error", "fit time"],
            [[name, f"{error:.2%}", f"{seconds:.2f} s"] for name, error, seconds in results],
            right={1, 2},
        ),
        *compile_note,
        *skipped,
        "",
        f"Estimated flip rate: {_pct(estimate)} ({_interval(vib.noise_rate_interval_)}); "
        f"true: {base_rate:.0%}.",
        textwrap.fill(
            f"Of the top-{top} rows ranked by P(label wrong) (mislabel_proba_), {hits} were "
            f"really flipped (precision {hits}/{top} = {hits / top:.0%}; a random ranking "
            f"would get {base_rate:.0%}).",
            width=88,
        ),
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
_DATA_ARG = "a delimited text file with a header row (CSV, semicolon, tab) or a Parquet file"
_DATA_HELP = (
    "DATA is a text file with a header row, its delimiter (comma, semicolon, tab or pipe) "
    "sniffed unless --sep is given, or a Parquet file (.parquet, .pq; needs pyarrow: pip "
    'install "viboost[parquet]").'
)


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
            "Ramadge). Fit decision-stump ensembles from CSV or Parquet files, predict, inspect "
            "models, estimate the share of wrong labels and rank training rows by how likely their "
            "label is wrong. fit and noise use the noise-robust preset by default (rounds and "
            "noise model chosen by cross-fitting, seeded by --random-state); --preset paper "
            "runs the paper's Algorithm 1 as printed.",
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    fit = sub.add_parser(
        "fit",
        help="fit a model on a CSV or Parquet file and save it",
        description="Fit VIBoostClassifier on every column of DATA except the target (and the "
        "--index-col and --id columns); save the "
        "model with joblib (atomically) and print a summary. The default preset 'robust' "
        "chooses the number of rounds and calibrates the noise model by 5-fold cross-fitting "
        "(folds seeded by --random-state), then refits on all rows weighted by the "
        "probability that each label is of the signal type; it reports the estimated share of "
        "wrong labels with a 90% interval. --preset paper fits the paper's Algorithm 1 as "
        "printed (100 rounds, approximate mode, noise model fitted in-sample: its noise "
        "statistics rank rows but are not calibrated). " + _DATA_HELP,
    )
    _add_data_and_target(fit)
    fit.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write")
    _add_input_options(fit, id_help="an id column, never a feature (fit only sets it aside)")
    _add_fit_options(fit, noise_switch=True)
    _add_jobs_option(fit)
    fit.set_defaults(handler=_cmd_fit)

    predict = sub.add_parser(
        "predict",
        help="predict classes and probabilities for a CSV or Parquet file",
        description="Write a CSV with the columns 'prediction' and 'proba_<class>' for each "
        "class, one row per row of DATA in its order, led by the --id column if given. The "
        "model's feature columns are selected by name; other columns (such as the target) are "
        "ignored. " + _DATA_HELP,
    )
    predict.add_argument("model", metavar="MODEL", help="model file written by 'viboost fit'")
    predict.add_argument("data", metavar="DATA", help="rows to predict: " + _DATA_ARG)
    predict.add_argument(
        "-o",
        "--output",
        metavar="OUT.csv",
        help="write the CSV here (atomically) instead of to stdout",
    )
    _add_input_options(predict, id_help="an id column copied to the output, as its first column")
    _add_jobs_option(predict)
    predict.set_defaults(handler=_cmd_predict)

    inspect = sub.add_parser(
        "inspect",
        help="describe a fitted model",
        description="Print the preset and how the model was fitted, rounds, classes, the "
        "noise statistics (share of wrong labels with its interval and the calibration for a "
        "cross-fitted model; SNR, noise grade, eta, omega), the first stumps, a summary of the "
        "ELBO trajectory (for a cross-fitted model: the core model's log evidence of the final "
        "fit) and the cross-fitted log-likelihood at the chosen number of rounds.",
    )
    inspect.add_argument("model", metavar="MODEL", help="model file written by 'viboost fit'")
    inspect.add_argument(
        "--stumps",
        type=_positive_int,
        default=10,
        metavar="N",
        help="number of stumps to list (default: 10)",
    )
    _add_plots_option(inspect)
    inspect.set_defaults(handler=_cmd_inspect)

    noise = sub.add_parser(
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
        "calibrated. " + _DATA_HELP,
    )
    _add_data_and_target(noise)
    noise.add_argument(
        "--top", type=_positive_int, default=20, metavar="K", help="rows to print (default: 20)"
    )
    _add_input_options(
        noise, id_help="an id column, never a feature, shown in the table and the output"
    )
    _add_fit_options(noise, noise_switch=False)
    noise.add_argument(
        "-o",
        "--output",
        metavar="OUT.csv",
        help="also write the ranking of all rows to this CSV (columns rank, row (1-based data "
        "row), the --id column if given, label, mislabel_proba, label_quality, issue)",
    )
    _add_plots_option(noise)
    _add_jobs_option(noise)
    noise.set_defaults(handler=_cmd_noise)

    demo = sub.add_parser(
        "demo",
        help="VIBoost vs AdaBoost and LightGBM on Spambase with 20%% flipped training labels",
        description="Train on a stratified random 10% of the bundled Spambase data with 20% "
        "of the training labels flipped, test on the other 90% against the true labels, "
        "compare VIBoost (robust preset) with AdaBoost and LightGBM stumps (LightGBM if "
        "installed: pip install 'viboost[demo]'), compare VIBoost's estimated flip rate with "
        "the true one and check how many flipped rows VIBoost ranks at the top.",
    )
    demo.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    demo.add_argument(
        "--n-estimators",
        type=_positive_int,
        default=200,
        metavar="T",
        help="rounds for AdaBoost and LightGBM (default: 200); VIBoost chooses its own (at "
        "most 1000)",
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
        description="Run the paper's experiments (every VIBoostClassifier with "
        "preset='paper': Algorithm 1 as printed) and write PNG figures and the CSV behind each "
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
