"""Plumbing shared by the ``viboost`` commands: errors, files, data, the estimator and text.

- Errors: :class:`CommandError` (a user error), :data:`PROG` and the exit codes that
  :func:`viboost.cli.main` returns.
- Files: :func:`check_destination` fails early, before any fitting, when an output cannot be
  written; :func:`load_model` loads a fitted model file with plain messages for anything else;
  :func:`read_data` reads DATA with the ``--sep``, ``--index-col``, ``--id`` and
  ``--categorical`` options.
- The fit: :func:`fit_target` checks the target (two or more classes; for K > 2, the
  cross-fitted noise model and 2 rows per class) or makes one-vs-rest labels with
  ``--positive``; :func:`check_fit_plan` resolves and checks the hyperparameter options before
  the data is read; :func:`build_estimator` makes the VIBoostClassifier of the hyperparameter
  options; :func:`is_multiclass` and :func:`classes_phrase` tell a K-class model.
- Text: :func:`fmt` (numbers), :func:`pct` (shares), :func:`interval` and :func:`format_table`
  for people; :func:`rounds_phrase`, :func:`learner_phrase`, :func:`is_calibrated`,
  :func:`is_cross_fitted` and :func:`uncalibrated_reason` describe how a model was fitted, from
  its fitted attributes (``plan_``, ``cv_rounds_``, ``noise_calibration_``).
- :func:`write_model_plots` writes the plots of ``--plots``.

pandas, joblib, the estimator and matplotlib are imported inside the functions that use them,
so that ``viboost --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from viboost._version import __version__

if TYPE_CHECKING:
    import pandas as pd

    from viboost._utils.io import TableData
    from viboost.estimator import VIBoostClassifier
    from viboost.presets import FitPlan

PROG = "viboost"  #: the command's name, in its usage and messages
EXIT_FAILURE = 1  # a numerical failure
EXIT_USAGE = 2  # a usage or input error

#: The label of every other class under ``--positive LABEL`` (one-vs-rest).
OTHER = "(other)"


# ------------------------------------------------------------------------------------------- errors
class CommandError(Exception):
    """A user error: printed as ``viboost: error: <message>``, exit code 2."""


def check_destination(output: str | os.PathLike[str], *inputs: str | os.PathLike[str]) -> Path:
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


# ----------------------------------------------------------------------------------- files and data
def load_model(path: str | os.PathLike[str]) -> VIBoostClassifier:
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


def read_data(
    args: argparse.Namespace,
    target: str | None = None,
    features: Sequence[str] | None = None,
    model: VIBoostClassifier | None = None,
) -> TableData:
    """Read DATA with the --sep, --index-col and --id options; print the reader's notes.

    To fit (no ``model``), text columns are kept as categorical features (a note names them),
    and the columns of ``--categorical`` are read as text (a CommandError if one is not a
    feature column). To predict with ``model``, its columns fitted with string categories are
    read as text, and the model checks the others.
    """
    from viboost._utils.io import read_table_checked

    if model is None:
        as_strings = list(getattr(args, "categorical", None) or ())
    else:
        categories = getattr(model, "categories_", None) or []
        names = getattr(model, "feature_names_in_", None)
        as_strings = [
            str(names[j])
            for j, values in enumerate(categories)
            if names is not None and values is not None and values.dtype == object
        ]
    data = read_table_checked(
        args.data,
        target,
        features=features,
        sep=args.sep,
        index_col=args.index_col,
        id_col=args.id_col,
        non_numeric="categorical" if model is None else "model",
        as_strings=as_strings,
    )
    if model is None and as_strings:
        absent = [name for name in as_strings if name not in data.X.columns]
        if absent:
            raise CommandError(
                f"--categorical names {', '.join(repr(c) for c in absent)}, not feature "
                f"column(s) of {args.data}; its feature columns are: "
                + ", ".join(repr(c) for c in list(data.X.columns)[:20])
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


# ----------------------------------------------------------------------------- target and estimator
def fit_target(y: pd.Series, args: argparse.Namespace, plan: FitPlan) -> pd.Series:
    """The labels to fit, checked here so that errors are CLI messages with plain numbers: two
    or more classes (K > 2 classes need the cross-fitted noise model, ``plan.noise_fit``, and at
    least 2 rows per class); with --positive, LABEL against all others (one-vs-rest)."""
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
            "viboost fits two or more classes"
        )
    if classes.size > 2:
        if plan.noise_fit == "in-sample":
            how = (
                "--preset paper (Algorithm 1 as printed)"
                if args.noise_fit is None
                else "--noise-fit in-sample"
            )
            raise CommandError(
                f"the {where} has {classes.size} classes ({_labels(classes)}), but {how} fits "
                "the noise model in-sample, for two classes only; K classes are fitted with the "
                "cross-fitted noise model of the default preset (--preset robust), or give "
                "--positive LABEL to fit one label against all the others (one-vs-rest)"
            )
        counts = y.value_counts(sort=False)
        lonely = [label for label, count in counts.items() if count == 1]
        if lonely:
            which = (
                f"class {_labels(lonely)} has a single row"
                if len(lonely) == 1
                else f"classes {_labels(lonely, 5)} have a single row each"
            )
            raise CommandError(
                f"the {where} has {classes.size} classes, and {which}; the noise model of more "
                "than two classes is cross-fitted and needs at least 2 rows per class: drop or "
                "relabel such rows"
            )
    return y


def is_multiclass(model: VIBoostClassifier) -> bool:
    """Whether the model was fitted on more than two classes (one ensemble per class)."""
    return len(model.classes_) > 2


def classes_phrase(model: VIBoostClassifier) -> str:
    """The classes in words: ``"classes 0 and 1; 1 is the positive class"`` for two,
    ``"3 classes: a, b, c"`` for more."""
    if not is_multiclass(model):
        c0, c1 = (str(c) for c in model.classes_)
        return f"classes {c0} and {c1}; {c1} is the positive class"
    return f"{len(model.classes_)} classes: {', '.join(str(c) for c in model.classes_)}"


def check_fit_plan(args: argparse.Namespace) -> FitPlan:
    """The plan of the hyperparameter options, checked before any data is read: the options
    that cannot go together are a usage error, and an option with no effect gets a note."""
    from viboost.presets import resolve_preset

    plan = resolve_preset(
        args.preset,
        args.n_estimators,
        args.learning_rate,
        args.alpha,
        args.noise_fit,
        args.max_leaf_nodes,
        args.max_depth,
        args.min_samples_leaf,
        args.leaf_weights,
    )
    if not plan.stumps and args.max_bins is None:
        raise CommandError(
            f"--max-bins none (the exhaustive search) builds decision stumps only, but these "
            f"options fit {learner_phrase(plan)}; give a number of bins (e.g. --max-bins 255), "
            "or --max-leaf-nodes 2 --leaf-weights tied for stumps"
        )
    if plan.stumps and args.min_samples_leaf is not None:
        print(
            f"{PROG}: note: --min-samples-leaf has no effect on decision stumps (2 leaves, tied "
            "weights); give --max-leaf-nodes or --leaf-weights per-leaf for trees",
            file=sys.stderr,
        )
    return plan


def build_estimator(args: argparse.Namespace, noise_model: bool = True) -> VIBoostClassifier:
    """The VIBoostClassifier of the hyperparameter options and ``--jobs``, with a progress bar
    on stderr for long fits (see :func:`viboost.cli.options.add_fit_options`)."""
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
        max_leaf_nodes=args.max_leaf_nodes,
        max_depth=args.max_depth,
        min_samples_leaf=args.min_samples_leaf,
        leaf_weights=args.leaf_weights,
        noise_channel=args.noise_channel,
        mislabeled=args.mislabeled,
        final_model=args.final_model,
        random_state=args.random_state,
        n_jobs=args.jobs,
        verbose=1,
    )


# --------------------------------------------------------------------------------------------- text
def fmt(value: float | None, digits: int = 4) -> str:
    """A number for people: ``digits`` significant digits, NaN as ``n/a``."""
    if value is None or not np.isfinite(value):
        return "n/a" if value is None or np.isnan(value) else str(value)
    return f"{value:.{digits}g}"


def pct(value: float | None, digits: int = 1) -> str:
    """A share as a percentage, NaN (or None) as ``n/a``."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.{digits}%}"


def interval(bounds: np.ndarray | None, level: float = 0.9) -> str:
    """``"90% interval a%-b%"``, or ``"no interval"`` when the bounds are missing or NaN."""
    if bounds is None or not np.all(np.isfinite(bounds)):
        return "no interval"
    return f"{level:.0%} interval {bounds[0]:.1%}-{bounds[1]:.1%}"


def no_noise_sentence(model: VIBoostClassifier) -> str:
    """``" Probability that no label is wrong: 0.39."`` (the noise posterior's
    ``no_noise_proba_``), or ``""`` for a model without it."""
    value = float(getattr(model, "no_noise_proba_", np.nan))
    if not np.isfinite(value):
        return ""
    return f" Probability that no label is wrong: {value:.2f}."


def no_noise_lines(model: VIBoostClassifier) -> list[str]:
    """``["probability that no label is wrong: 0.39 (...)"]``, or ``[]`` for a model
    without it."""
    value = float(getattr(model, "no_noise_proba_", np.nan))
    if not np.isfinite(value):
        return []
    return [
        f"probability that no label is wrong: {value:.2f} (the noise posterior's model average)"
    ]


def format_table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """A text table, indented by two spaces; the columns in ``right`` are right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def id_column_header(name: object, taken: Iterable[str]) -> str:
    """The header of the passed-through id column: its own name, unless an output column has it."""
    name = str(name)
    return name if name not in set(taken) else f"id_{name}"


# --------------------------------------------------------------------------- how a model was fitted
def is_calibrated(model: VIBoostClassifier) -> bool:
    """Whether the model's noise statistics were cross-fitted and calibrated."""
    return getattr(model, "noise_calibration_", None) is not None


def is_cross_fitted(model: VIBoostClassifier) -> bool:
    """Whether the number of rounds was chosen by cross-fitting (the robust preset)."""
    return np.size(getattr(model, "cv_rounds_", ())) > 0


def uncalibrated_reason(model: VIBoostClassifier) -> str:
    """Why the model's noise statistics are not calibrated, for the message that says so."""
    preset = getattr(model, "preset", "paper")
    if preset == "paper":
        return "preset='paper'"
    return "the noise model was fitted in-sample"


def learner_phrase(plan: FitPlan) -> str:
    """The base learner of a plan (``model.plan_``) in words: ``"decision stumps"`` or
    ``"trees of up to 8 leaves (per-leaf weights, ...)"``."""
    if plan.stumps:
        return "decision stumps"
    weights = (
        "per-leaf weights"
        if plan.leaf_weights == "per-leaf"
        else "tied weights: +-1 leaves, one weight per tree"
    )
    depth = "no depth limit" if plan.max_depth is None else f"depth at most {plan.max_depth}"
    if plan.min_samples_leaf is None:  # resolved from the data at fit time
        from viboost.presets import AUTO_MIN_SAMPLES_LEAF

        rows = (
            f"at least {AUTO_MIN_SAMPLES_LEAF} rows per leaf, fewer on small data "
            "(rows / (2 x leaves))"
        )
    else:
        rows = f"at least {plan.min_samples_leaf} row{'s' if plan.min_samples_leaf != 1 else ''}"
        rows += " per leaf"
    return f"trees of up to {plan.max_leaf_nodes} leaves ({weights}; {depth}; {rows})"


def rounds_phrase(model: VIBoostClassifier) -> str:
    """``"N rounds"``, with how N was chosen for a cross-fitted model."""
    n_rounds = len(model.estimators_)
    if not is_cross_fitted(model):
        return f"{n_rounds} rounds"
    if model.final_model == "fold-average":
        return (
            f"{n_rounds} rounds (the average of {model.cv_n_splits_} fold boosters of the "
            f"{model.cv_best_rounds_} rounds chosen by cross-fitting, at most "
            f"{model.plan_.n_estimators}, interleaved)"
        )
    return (
        f"{n_rounds} rounds (refitted on all rows from the {model.cv_best_rounds_} chosen by "
        f"cross-fitting, at most {model.plan_.n_estimators})"
    )


# -------------------------------------------------------------------------------------------- plots
def write_model_plots(
    model: VIBoostClassifier,
    directory: str | None,
    top: int,
    labels: Sequence[str] | None = None,
) -> list[str]:
    """Write the model's plots into ``directory`` (if given); the lines that say where."""
    if directory is None:
        return []
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    from viboost.plotting import write_plots

    paths = write_plots(model, directory, top=top, labels=labels)
    return ["", f"Wrote {len(paths)} plots to {directory}: " + ", ".join(p.name for p in paths)]
