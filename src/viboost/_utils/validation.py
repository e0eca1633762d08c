"""Argument checks shared across viboost, and its one convention for random seeds.

This module owns every check that more than one module needs:

- :func:`check_pair`: a pair of positive finite numbers (the Beta prior zeta, ``init_eta``);
- :func:`check_positive`, :func:`check_probability`, :func:`check_int` and :func:`check_real`:
  a scalar argument checked and returned as a Python number, else a ValueError naming it;
- :func:`as_float_vector`: a scalar or 1-D array argument as a float64 vector;
- :func:`check_classes`: at least two classes in the labels; :func:`check_binary_classes`:
  exactly two;
- :func:`non_numeric_columns`, :func:`describe_non_numeric_columns` and
  :func:`reject_non_numeric_columns`: name the non-numeric columns of a DataFrame (the one
  place that decides which columns are non-numeric) before a cell value fails somewhere deep
  inside numpy;
- the random-seed convention, :data:`RandomStateLike`, :func:`check_random_state` and
  :func:`spawn_generator`: every ``random_state`` in viboost is resolved by
  :func:`check_random_state`, which returns a ``numpy.random.Generator`` unchanged and otherwise
  follows :func:`sklearn.utils.check_random_state` (None, an int seed or a RandomState give a
  ``numpy.random.RandomState``; an int seeds the legacy RandomState stream exactly as
  scikit-learn does). Code that needs a ``numpy.random.Generator`` of its own (the compiled
  kernels, which take Generators only) gets one from :func:`spawn_generator`: an int seeds it
  directly, anything else through one integer drawn from the resolved state.

Estimator-specific checks stay with the estimator (scikit-learn's ``_parameter_constraints``).
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np

#: What a ``random_state`` argument may be: None, an int seed, a RandomState or a Generator.
RandomStateLike = int | np.random.RandomState | np.random.Generator | None

# Seeds of spawned Generators are drawn from [0, _SPAWN_SEED_BOUND), as the Gibbs sampler drew
# its per-chain seeds before this module existed (``RandomState.randint(0, 2**31 - 1)``).
_SPAWN_SEED_BOUND = 2**31 - 1


def check_random_state(
    random_state: RandomStateLike,
) -> np.random.RandomState | np.random.Generator:
    """Resolve a ``random_state`` argument into a NumPy random number generator.

    A ``numpy.random.Generator`` is returned unchanged; anything else follows
    :func:`sklearn.utils.check_random_state`: None gives numpy's global RandomState, an int seeds
    a new ``numpy.random.RandomState`` (the same stream as scikit-learn's) and a RandomState is
    returned unchanged.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        The seed or generator; an int must lie in ``[0, 2**32 - 1]`` (a bool is refused).

    Returns
    -------
    numpy.random.RandomState or numpy.random.Generator

    Raises
    ------
    ValueError
        If ``random_state`` is of any other kind, a bool, or an int out of range.

    Examples
    --------
    >>> import numpy as np
    >>> gen = np.random.default_rng(0)
    >>> check_random_state(gen) is gen
    True
    >>> state = check_random_state(3)
    >>> type(state).__name__, bool(state.randint(100) == np.random.RandomState(3).randint(100))
    ('RandomState', True)
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if not isinstance(random_state, bool):
        from sklearn.utils import check_random_state as sklearn_check_random_state

        try:
            return sklearn_check_random_state(random_state)
        except ValueError:
            pass
    raise ValueError(
        "random_state must be None, an int seed in [0, 2**32 - 1], a numpy.random.RandomState "
        f"or a numpy.random.Generator, got {random_state!r}"
    )


def spawn_generator(random_state: RandomStateLike) -> np.random.Generator:
    """A new ``numpy.random.Generator`` for code that needs one (the compiled kernels, the
    Generator-only ``choice(..., shuffle=False)``), reproducible from ``random_state``.

    An int is the new Generator's seed (``numpy.random.default_rng(seed)``). Anything else is
    resolved by :func:`check_random_state` and one integer in ``[0, 2**31 - 1)`` is drawn from
    it (``randint`` of a RandomState, ``integers`` of a Generator) to seed the new Generator, so
    the caller's state advances by that one draw and successive calls give independent streams
    (one per Gibbs chain, for instance).

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        The seed, or the source of the seed.

    Returns
    -------
    numpy.random.Generator

    Examples
    --------
    >>> import numpy as np
    >>> a = spawn_generator(np.random.RandomState(0)).random()
    >>> b = np.random.default_rng(np.random.RandomState(0).randint(0, 2**31 - 1)).random()
    >>> a == b, spawn_generator(5).random() == np.random.default_rng(5).random()
    (True, True)
    """
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        check_random_state(random_state)  # the same range check as everywhere
        return np.random.default_rng(int(random_state))
    rng = check_random_state(random_state)
    if isinstance(rng, np.random.Generator):
        seed = int(rng.integers(0, _SPAWN_SEED_BOUND))
    else:
        seed = int(rng.randint(0, _SPAWN_SEED_BOUND))
    return np.random.default_rng(seed)


def check_pair(name: str, value: Any) -> tuple[float, float]:
    """Return ``value`` as a pair of positive finite floats, else raise a ValueError naming it.

    Examples
    --------
    >>> check_pair("clean_prior", [2, 1])
    (2.0, 1.0)
    """
    pair = tuple(np.asarray(value, dtype=float).ravel()) if np.ndim(value) else ()
    if len(pair) != 2 or not all(np.isfinite(v) and v > 0 for v in pair):
        raise ValueError(f"{name} must be a pair of positive finite numbers, got {value!r}")
    return float(pair[0]), float(pair[1])


def check_positive(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a finite real number > 0, else raise ValueError.

    Examples
    --------
    >>> check_positive(2, "weight_prior")
    2.0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(float(value))
        or float(value) <= 0.0
    ):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return float(value)


def check_probability(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a real number in [0, 1], else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_int(value: object, name: str, minimum: int) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_real(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a real number other than NaN (infinities allowed)."""
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(float(value)):
        raise ValueError(f"{name} must be a real number (+-inf allowed, not NaN), got {value!r}")
    return float(value)


def _non_numeric_positions(X: object) -> list[int]:
    """Positions of the columns of a DataFrame ``X`` that are neither numeric nor boolean."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns"):
        return []
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return [
        position
        for position, dtype in enumerate(dtypes)
        if not (is_numeric_dtype(dtype) or is_bool_dtype(dtype))
    ]


def non_numeric_columns(X: Any) -> list[str]:
    """Names of the columns of a DataFrame ``X`` that are neither numeric nor boolean.

    Anything without ``dtypes`` and ``columns`` (a numpy array, a list) has none.
    """
    return [str(X.columns[position]) for position in _non_numeric_positions(X)]


def describe_non_numeric_columns(frame: Any) -> list[str]:
    """The non-numeric columns of ``frame`` (as :func:`non_numeric_columns`), each described.

    A column is described by its quoted name followed, where it has one, by its first value that
    is not missing and does not parse as a number, with the row it is on counted from 1 (the
    data row of a CSV file read with the default index), e.g. ``'colour' (e.g. 'red' in data
    row 2)``. A column whose values all parse (an object column of numeric strings) is given by
    its quoted name alone.

    Examples
    --------
    >>> import pandas as pd
    >>> describe_non_numeric_columns(pd.DataFrame({"x": [1.0, 2.0], "colour": ["1", "red"]}))
    ["'colour' (e.g. 'red' in data row 2)"]
    """
    import pandas as pd

    described = []
    for position in _non_numeric_positions(frame):
        name = str(frame.columns[position])
        column = frame.iloc[:, position]
        bad = column[column.notna() & pd.to_numeric(column, errors="coerce").isna()]
        if bad.empty:
            described.append(repr(name))
        else:  # data rows are numbered from 1 after the header
            example = f"e.g. {str(bad.iloc[0])!r} in data row {int(bad.index[0]) + 1}"
            described.append(f"{name!r} ({example})")
    return described


def reject_non_numeric_columns(
    X: object, who: str = "VIBoostClassifier", hint: str | None = None
) -> None:
    """Raise a ValueError naming the non-numeric columns of a DataFrame ``X``, if any.

    ``hint``, if given, is a further way out appended to the message (the estimator suggests
    its ``categorical_features``).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"x": [1.0], "city": ["a"]})
    >>> try:
    ...     reject_non_numeric_columns(frame, hint="or list them in categorical_features")
    ... except ValueError as exc:
    ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
    X has non-numeric column(s) ['city']; VIBoostClassifier needs numbers. Encode them first,
    e.g. with sklearn.preprocessing.OrdinalEncoder or OneHotEncoder, or list them in
    categorical_features.
    """
    bad = non_numeric_columns(X)
    if bad:
        raise ValueError(
            f"X has non-numeric column(s) {bad}; {who} needs numbers. Encode them first, e.g. "
            "with sklearn.preprocessing.OrdinalEncoder or OneHotEncoder"
            + (f", {hint}." if hint else ".")
        )


def check_classes(classes: np.ndarray, who: str = "VIBoostClassifier") -> None:
    """Raise a ValueError unless ``classes`` (the distinct labels) has at least two entries."""
    if classes.size == 1:
        only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]
        raise ValueError(
            f"{who} needs at least 2 classes in y, but y contains only one class: {only!r}."
        )


def check_binary_classes(classes: np.ndarray, who: str = "VIBoostClassifier") -> None:
    """Raise a ValueError unless ``classes`` (the distinct labels) has exactly two entries."""
    if classes.size == 1:
        only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]
        raise ValueError(f"{who} needs 2 classes in y, but y contains only one class: {only!r}.")
    if classes.size > 2:
        raise ValueError(
            f"{who} fits two classes; y has {classes.size}. For K classes use "
            "viboost.VIBoostClassifier (in memory), which fits them natively."
        )


def as_float_vector(name: str, value: object) -> np.ndarray:
    """``value`` as a 1-D float64 array (a scalar becomes length 1); a ValueError names it if it
    has more than one dimension."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array; got shape {arr.shape}")
    return np.atleast_1d(arr)
