"""``viboost demo``: VIBoost against AdaBoost and LightGBM on Spambase with flipped labels.

Trains on a stratified 10% of the bundled Spambase data with 20% of the training labels flipped
and tests on the rest; reports the test errors and fit times, the estimated flip rate against the
true one, and how many flipped rows VIBoost ranks at the top. LightGBM is optional (the ``demo``
extra).
"""

from __future__ import annotations

import argparse
import textwrap
import time
from typing import Any, Protocol, TypeVar

import numpy as np

from viboost._utils.compile import compile_seconds
from viboost.cli.common import (
    CommandError,
    format_table,
    interval,
    learner_phrase,
    no_noise_sentence,
    pct,
)
from viboost.cli.options import positive_int, random_seed


class _Classifier(Protocol):
    """What the demo times: a scikit-learn classifier."""

    def fit(self, X: Any, y: Any) -> Any: ...

    def predict(self, X: Any) -> Any: ...


_C = TypeVar("_C", bound=_Classifier)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``viboost demo`` and its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "demo",
        help="VIBoost vs AdaBoost and LightGBM on Spambase with 20%% flipped training labels",
        description="Train on a stratified random 10% of the bundled Spambase data with 20% "
        "of the training labels flipped, test on the other 90% against the true labels, "
        "compare VIBoost (robust preset, 8-leaf trees) with AdaBoost and LightGBM stumps "
        "(LightGBM if installed: pip install 'viboost[demo]'), compare VIBoost's estimated "
        "flip rate with the true one and check how many flipped rows VIBoost ranks at the top.",
    )
    parser.add_argument("--seed", type=random_seed, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--n-estimators",
        type=positive_int,
        default=200,
        metavar="T",
        help="rounds for AdaBoost and LightGBM (default: 200); VIBoost chooses its own (at "
        "most 1000)",
    )
    parser.add_argument(
        "--top",
        type=positive_int,
        default=None,
        metavar="K",
        help="rows to check (default: the number of flipped rows)",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the Spambase comparison and print its table and noise estimates."""
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

    def timed(name: str, model: _C) -> _C:
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
            f"'robust'): {len(vib.estimators_)} rounds of {learner_phrase(vib.plan_)}, refitted "
            f"on all rows from the {vib.cv_best_rounds_} chosen by cross-fitting (at most "
            f"{vib.plan_.n_estimators}); all on the noisy labels"
        ),
        "",
        *format_table(
            ["model", "test error", "fit time"],
            [[name, f"{error:.2%}", f"{seconds:.2f} s"] for name, error, seconds in results],
            right={1, 2},
        ),
        *compile_note,
        *skipped,
        "",
        f"Estimated flip rate: {pct(estimate)} ({interval(vib.noise_rate_interval_)}); "
        f"true: {base_rate:.0%}.{no_noise_sentence(vib)}",
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
