"""Categorical features: which columns are categorical, and their encoding as category codes.

- :func:`resolve_categorical` turns the estimator's ``categorical_features`` parameter into a
  boolean mask, with scikit-learn's ``HistGradientBoostingClassifier`` meaning of its values.
- :class:`CategoricalEncoder` maps each categorical column to float codes ``0..K-1`` (its
  categories, matched by value) and every other column to floats as
  :func:`sklearn.utils.check_array` would; missing values, and categories not seen at fit,
  become NaN. The tree engine bins code ``k`` into bin ``k`` (``n_categories_`` tells it K), so
  a split sends a *set* of categories left, and NaN (missing or unseen) takes the split's
  missing side.

An ordered pandas categorical is treated as an unordered set of categories, as scikit-learn's
HGB does: its order is kept as the code order only, and splits ignore it (to keep the order,
pass ``column.cat.codes`` as a numeric column instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "MAX_CATEGORIES",
    "NON_NUMERIC_HINT",
    "CategoricalEncoder",
    "categorical_reason",
    "check_category_count",
    "column_categories",
    "resolve_categorical",
]

#: The most categories one feature may have: codes 0..254, bin 255 is the missing bin.
MAX_CATEGORIES = 255
#: The values of ``pandas.api.types.infer_dtype`` read as numbers / as strings.
_NUMERIC_KINDS = frozenset({"integer", "floating", "mixed-integer-float", "decimal", "boolean"})
_STRING_KINDS = frozenset({"string"})
#: Appended to the error for non-numeric columns that are not categorical features.
NON_NUMERIC_HINT = (
    "or list them in categorical_features (the default 'from_dtype' fits string, object and "
    "category columns as categorical features)"
)


def _is_frame(X: Any) -> bool:
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _n_features(X: Any) -> int:
    """The number of columns of ``X``, or 0 when it has no 2-d shape (the caller's own checks
    then refuse it with their usual message)."""
    if _is_frame(X):
        return len(X.columns)
    try:
        shape = np.shape(X)
    except Exception:  # ragged nested lists: check_array refuses them later
        return 0
    return int(shape[1]) if len(shape) == 2 else 0


def is_categorical_dtype(dtype: Any) -> bool:
    """Whether ``categorical_features="from_dtype"`` makes a column of this dtype categorical.

    The pandas dtypes ``category`` (ordered or not), ``object``, ``string`` (python or pyarrow
    storage, and pandas 3's default ``str``) and pyarrow ``string`` or ``dictionary`` types.
    Numbers, ``bool`` and the nullable ``Int*``/``Float*``/``boolean`` dtypes are numeric.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> [is_categorical_dtype(t) for t in ("category", "string", np.dtype(object))]
    [True, True, True]
    >>> [is_categorical_dtype(t) for t in (np.dtype(float), np.dtype(bool), "Int64", "boolean")]
    [False, False, False, False]
    """
    import pandas as pd

    if isinstance(dtype, str):
        dtype = pd.api.types.pandas_dtype(dtype)
    if isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype)):
        return True
    if isinstance(dtype, np.dtype):
        return dtype == np.dtype(object)
    arrow = getattr(dtype, "pyarrow_dtype", None)
    if arrow is not None:
        import pyarrow as pa

        return bool(
            pa.types.is_string(arrow)
            or pa.types.is_large_string(arrow)
            or pa.types.is_dictionary(arrow)
        )
    return False


def resolve_categorical(
    X: Any, categorical_features: Any, feature_names: Sequence[str] | None = None
) -> np.ndarray:
    """Which features of ``X`` are categorical: ``categorical_features`` as a boolean mask.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        The data (only its dtypes and number of columns are read).
    categorical_features : "from_dtype", array-like of bool, int or str, or None
        As in scikit-learn's HGB. ``None``: no categorical feature. ``"from_dtype"``: the
        DataFrame columns of dtype ``category``, ``object``, ``string`` (python or pyarrow)
        or a pyarrow string or dictionary type (:func:`is_categorical_dtype`); none for a numpy
        array. A boolean mask of length ``n_features``; integer indices (negative ones count
        from the end); or feature names, which need ``feature_names``.
    feature_names : sequence of str or None, default=None
        The column names of ``X`` (the estimator's ``feature_names_in_``).

    Returns
    -------
    ndarray of bool, shape (n_features,)

    Raises
    ------
    ValueError
        For a mask of the wrong length, an index out of range, names without feature names or
        a name that is not a column, a mix of kinds, or values of any other type.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> frame = pd.DataFrame({"x": [1.0, 2.0], "colour": ["red", "blue"], "n": [1, 2]})
    >>> resolve_categorical(frame, "from_dtype").tolist()
    [False, True, False]
    >>> resolve_categorical(frame, ["n"], list(frame.columns)).tolist()
    [False, False, True]
    >>> resolve_categorical(np.zeros((2, 3)), [0, -1]).tolist()
    [True, False, True]
    >>> resolve_categorical(np.zeros((2, 3)), None).tolist()
    [False, False, False]
    """
    n_features = _n_features(X)
    mask = np.zeros(n_features, dtype=bool)
    if categorical_features is None:
        return mask
    if isinstance(categorical_features, str):
        if categorical_features != "from_dtype":
            raise ValueError(
                "categorical_features must be 'from_dtype', None, a boolean mask, integer "
                f"indices or feature names; got the string {categorical_features!r} (to name "
                "one feature, pass a list: [name])"
            )
        if _is_frame(X):
            mask[:] = [is_categorical_dtype(dtype) for dtype in X.dtypes]
        return mask
    if isinstance(categorical_features, (list, tuple)):
        texts = [isinstance(v, str) for v in categorical_features]
        if any(texts) and not all(texts):  # numpy would turn the indices into names
            raise ValueError(
                "categorical_features must be 'from_dtype', None, a boolean mask, integer "
                f"indices or feature names (not a mix); got {categorical_features!r}"
            )
    values = np.asarray(categorical_features)
    if values.ndim != 1:
        raise ValueError(
            "categorical_features must be 1-dimensional (a mask, indices or names); got an "
            f"array of shape {values.shape}"
        )
    if values.size == 0:
        return mask
    if values.dtype.kind == "b":
        if values.size != n_features:
            raise ValueError(
                f"categorical_features is a boolean mask of length {values.size}, but X has "
                f"{n_features} features"
            )
        return values.astype(bool).copy()
    if values.dtype.kind in "iu":
        for index in values.tolist():
            if not -n_features <= index < n_features:
                raise ValueError(
                    f"categorical_features holds the index {index}, out of range for X with "
                    f"{n_features} features"
                )
            mask[index] = True
        return mask
    if values.dtype.kind in "OUS" and all(isinstance(v, str) for v in values.tolist()):
        if feature_names is None:
            raise ValueError(
                "categorical_features names features, but X has no feature names (pass a "
                "DataFrame with string column names, or give indices or a boolean mask)"
            )
        position = {str(name): j for j, name in enumerate(feature_names)}
        unknown = [name for name in values.tolist() if name not in position]
        if unknown:
            raise ValueError(
                f"categorical_features names {unknown}, which are not features of X; its "
                f"features are {[str(n) for n in feature_names][:20]}"
            )
        mask[[position[name] for name in values.tolist()]] = True
        return mask
    raise ValueError(
        "categorical_features must be 'from_dtype', None, a boolean mask, integer indices or "
        f"feature names (not a mix); got {categorical_features!r}"
    )


def _column_label(X: Any, j: int) -> str:
    """How an error message names column ``j``: ``column 'city'`` or ``column 3``."""
    if _is_frame(X):
        return f"column {str(X.columns[j])!r}"
    return f"column {j}"


def _first(values: Any, where: np.ndarray) -> tuple[Any, int]:
    """The first value of ``values`` (a Series) where ``where`` holds, and its row (from 0)."""
    row = int(np.flatnonzero(where)[0])
    return values.iloc[row], row


class CategoricalEncoder:
    """Encode the categorical columns of ``X`` as float codes ``0..K-1``, the others as floats.

    A categorical column's categories are its sorted distinct non-missing values; for a pandas
    ``category`` column, its categories present in the data, in the dtype's order. An ordered
    categorical is treated as an unordered set of categories (as scikit-learn's HGB does): its
    order is only the code order, which splits ignore. Values are matched by *value*, never by
    a pandas category code, so frames whose category lists differ or are reordered encode
    alike. Missing values, and categories not seen at fit, become NaN, without an error.

    A numeric column declared categorical has non-negative integer values (``1`` and ``1.0``
    are one category); negative values are missing (HGB's rule, so that the ``-1`` of an
    ``OrdinalEncoder(unknown_value=-1)`` keeps its meaning) and other non-integers an error.
    Numeric columns come out as :func:`sklearn.utils.check_array` with ``dtype=float64`` and
    NaN allowed gives them (``bool`` and the nullable ``Int64``/``boolean`` dtypes as floats,
    ``pd.NA`` as NaN).

    Attributes
    ----------
    is_categorical_ : ndarray of bool, shape (n_features,)
        Which features are categorical.
    categories_ : list of (ndarray or None)
        Per feature, its categories in code order (object array of str, or float array), or
        None for a numeric feature.
    n_categories_ : ndarray of int64, shape (n_features,)
        K per categorical feature (0 for numeric ones, and for a categorical column whose
        values were all missing at fit).
    n_features_in_ : int
        The number of features.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"x": [0.5, None, 2.0], "colour": ["red", "blue", None]})
    >>> encoder = CategoricalEncoder().fit(frame, [False, True])
    >>> encoder.categories_[1].tolist(), encoder.n_categories_.tolist()
    (['blue', 'red'], [0, 2])
    >>> encoder.transform(frame).tolist()
    [[0.5, 1.0], [nan, 0.0], [2.0, nan]]
    >>> encoder.transform(pd.DataFrame({"x": [1.0], "colour": ["green"]})).tolist()  # unseen
    [[1.0, nan]]
    """

    def __init__(self) -> None:
        self.is_categorical_ = np.zeros(0, dtype=bool)
        self.categories_: list[np.ndarray | None] = []
        self.n_categories_ = np.zeros(0, dtype=np.int64)
        self.n_features_in_ = 0
        self._kinds: list[str | None] = []

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_categories(cls, categories: Sequence[Any]) -> CategoricalEncoder:
        """An encoder with the given categories, fitted to no data.

        Parameters
        ----------
        categories : sequence of (array-like or None)
            Per feature, None for a numeric feature, else its categories in code order: all
            strings, or all non-negative integers.

        Returns
        -------
        CategoricalEncoder

        Examples
        --------
        >>> import numpy as np
        >>> encoder = CategoricalEncoder.from_categories([None, ["b", "a"]])
        >>> encoder.transform(np.array([[1.5, "a"], [2.0, "c"]], dtype=object)).tolist()
        [[1.5, 1.0], [2.0, nan]]
        >>> CategoricalEncoder.from_categories([None, None]).any_categorical
        False
        """
        import pandas as pd

        encoder = cls()
        encoder.n_features_in_ = len(categories)
        encoder.is_categorical_ = np.array([c is not None for c in categories], dtype=bool)
        for j, values in enumerate(categories):
            if values is None:
                encoder.categories_.append(None)
                encoder._kinds.append(None)
                continue
            series = pd.Series(list(values), dtype=object)
            kind = _value_kind(series, f"categories[{j}]")
            if kind == "num":
                array = series.to_numpy(dtype=np.float64)
                if np.any(~np.isfinite(array) | (array < 0) | (array != np.floor(array))):
                    raise ValueError(
                        f"categories[{j}] must be non-negative integers or strings; got "
                        f"{list(values)!r}"
                    )
            else:
                array = series.to_numpy(dtype=object)
            if pd.Index(array).has_duplicates:
                raise ValueError(f"categories[{j}] holds a category twice: {list(values)!r}")
            encoder.categories_.append(array)
            encoder._kinds.append(kind or "num")  # no category: numbers, as fit has it
        encoder.n_categories_ = np.array(
            [0 if c is None else len(c) for c in encoder.categories_], dtype=np.int64
        )
        return encoder

    @classmethod
    def numeric(cls, n_features: int) -> CategoricalEncoder:
        """An encoder of ``n_features`` numeric features (no categorical one)."""
        return cls.from_categories([None] * int(n_features))

    @property
    def any_categorical(self) -> bool:
        """Whether any feature is categorical."""
        return bool(np.any(self.is_categorical_))

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        X: Any,
        is_categorical: Any,
        max_bins: int | None = MAX_CATEGORIES,
        *,
        from_dtype: bool = False,
    ) -> CategoricalEncoder:
        """Find the categories of each categorical column of ``X``.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            The training data (a numpy array, possibly of dtype object, or a list of rows).
        is_categorical : array-like of bool, shape (n_features,)
            Which columns are categorical (:func:`resolve_categorical`).
        max_bins : int or None, default=255
            The most categories a column may have (None: 255).
        from_dtype : bool, default=False
            Whether the columns were picked by their dtype (``categorical_features=
            "from_dtype"``); error messages say why a column is categorical.

        Returns
        -------
        self : CategoricalEncoder

        Raises
        ------
        ValueError
            Naming the column: numbers and strings mixed in one column (with an example of
            each), more distinct categories than ``max_bins``, non-integer numbers, or values
            that are neither numbers nor strings.
        """
        import pandas as pd

        mask = np.asarray(is_categorical, dtype=bool)
        n_features = _n_features(X)
        if mask.shape != (n_features,):
            raise ValueError(
                f"is_categorical has {mask.size} entries, but X has {n_features} features"
            )
        limit = MAX_CATEGORIES if max_bins is None else min(int(max_bins), MAX_CATEGORIES)
        categories: list[np.ndarray | None] = [None] * n_features
        kinds: list[str | None] = [None] * n_features
        for j in map(int, np.flatnonzero(mask)):
            column = _column(X, j)
            label = _column_label(X, j)
            why = categorical_reason(column.dtype, from_dtype)
            if isinstance(column.dtype, pd.CategoricalDtype):
                codes = column.cat.codes.to_numpy()
                present = np.unique(codes[codes >= 0])
                kind, cats = _category_values(column.cat.categories[present], label)
                if kind == "num":
                    cats = cats[cats >= 0]
            else:
                kind = _value_kind(column, label)
                if kind == "str":
                    count = int(column.nunique(dropna=True))
                    _check_count(label, count, limit, why)
                    cats = np.array(sorted(column.dropna().unique().tolist()), dtype=object)
                elif kind == "num":
                    values = _integer_values(column, label)
                    cats = np.unique(values[values >= 0])
                else:  # every value missing
                    cats = np.zeros(0)
            _check_count(label, len(cats), limit, why)
            categories[j] = cats
            kinds[j] = kind or "num"
        self.n_features_in_ = n_features
        self.is_categorical_ = mask.copy()
        self.categories_ = categories
        self._kinds = kinds
        self.n_categories_ = np.array(
            [0 if c is None else len(c) for c in categories], dtype=np.int64
        )
        return self

    # ------------------------------------------------------------------ transform
    def transform(self, X: Any, *, estimator: Any = None) -> np.ndarray:
        """``X`` as a float64 C-contiguous matrix: categorical columns as their codes.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            The columns in the order seen at fit (the caller checks names and count).
        estimator : estimator or str, default=None
            Named in the messages of :func:`sklearn.utils.check_array`.

        Returns
        -------
        ndarray of float64, shape (n_samples, n_features)

        Raises
        ------
        ValueError
            If a column fitted with string categories holds numbers (or the reverse), mixes
            numbers and strings, or a numeric categorical column holds non-integers; and as
            :func:`sklearn.utils.check_array` for the numeric columns.
        """
        from sklearn.utils import check_array

        check = {"dtype": np.float64, "ensure_all_finite": "allow-nan", "estimator": estimator}
        if not self.any_categorical:
            return check_array(X, input_name="X", **check)
        if not _is_frame(X):
            if hasattr(X, "tocsr") or hasattr(X, "toarray"):
                raise TypeError(
                    "Categorical features need dense input; X is a sparse matrix. Pass a "
                    "numpy array or a DataFrame."
                )
            X = X if isinstance(X, np.ndarray) else np.asarray(X, dtype=object)
            if X.ndim != 2:
                # check_array's own message for 1-d or scalar input
                return check_array(X, input_name="X", **check)
        n_rows = X.shape[0]
        if n_rows == 0:  # check_array's message for empty data
            check_array(np.zeros((0, self.n_features_in_)), input_name="X", **check)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but the encoder was fitted with "
                f"{self.n_features_in_}"
            )
        out = np.empty((n_rows, self.n_features_in_), dtype=np.float64)
        numeric = np.flatnonzero(~self.is_categorical_)
        if numeric.size:
            part = X.iloc[:, numeric] if _is_frame(X) else X[:, numeric]
            out[:, numeric] = check_array(
                part, input_name="X", ensure_min_samples=0, ensure_min_features=0, **check
            )
        for j in map(int, np.flatnonzero(self.is_categorical_)):
            out[:, j] = self._codes(_column(X, j), j, _column_label(X, j))
        return out

    def fit_transform(
        self,
        X: Any,
        is_categorical: Any,
        max_bins: int | None = MAX_CATEGORIES,
        *,
        from_dtype: bool = False,
    ) -> np.ndarray:
        """:meth:`fit`, then :meth:`transform`."""
        return self.fit(X, is_categorical, max_bins, from_dtype=from_dtype).transform(X)

    def _codes(self, column: Any, j: int, label: str) -> np.ndarray:
        """The codes of one categorical column (NaN where missing or unseen)."""
        import pandas as pd

        fitted = self.categories_[j]
        assert fitted is not None
        kind = self._kinds[j]
        index = pd.Index(fitted)
        if isinstance(column.dtype, pd.CategoricalDtype):
            got, cats = _category_values(column.cat.categories, label)
            _check_kind(label, kind, got)
            if got == "num":
                cats = np.where(cats >= 0, cats, np.nan)
            lookup = np.append(index.get_indexer(cats), -1)  # code -1 (missing) -> last
            codes = lookup[column.cat.codes.to_numpy()]
        else:
            got = _value_kind(column, label)
            _check_kind(label, kind, got)
            if got == "num":
                values = _integer_values(column, label)
                values[values < 0] = np.nan
                codes = index.get_indexer(values)
            elif got == "str":
                codes = index.get_indexer(column.to_numpy(dtype=object))
            else:
                codes = np.full(len(column), -1)
        result = codes.astype(np.float64)
        result[codes < 0] = np.nan
        return result


def categorical_reason(dtype: Any, from_dtype: bool) -> str:
    """Why a column is categorical, as the errors about it say: its ``dtype`` under
    ``categorical_features="from_dtype"`` (``from_dtype``), else its listing."""
    if from_dtype:
        return f"it is categorical because its dtype is {dtype}"
    return "it is listed in categorical_features"


def check_category_count(
    label: str,
    count: int,
    max_bins: int | None = MAX_CATEGORIES,
    why: str = "it is listed in categorical_features",
    *,
    approximate: bool = False,
) -> None:
    """A ValueError naming the categorical column ``label`` (``"column 'city'"``) if it has
    more than ``max_bins`` (None: 255) categories, the message :meth:`CategoricalEncoder.fit`
    gives; ``approximate``: ``count`` is an estimate (the message says "about").

    Examples
    --------
    >>> try:
    ...     check_category_count("column 'id'", 10_000, 255, approximate=True)
    ... except ValueError as exc:
    ...     print(str(exc)[:65])
    Categorical column 'id' has about 10000 distinct categories, more
    """
    limit = MAX_CATEGORIES if max_bins is None else min(int(max_bins), MAX_CATEGORIES)
    _check_count(label, int(count), limit, why, about=approximate)


def column_categories(
    values: Any,
    label: str,
    max_bins: int | None = MAX_CATEGORIES,
    why: str = "it is listed in categorical_features",
    *,
    in_order: bool = False,
) -> np.ndarray:
    """The categories of one categorical column, in code order, from its distinct values, as
    :meth:`CategoricalEncoder.fit` finds them from the whole column (for data held elsewhere,
    e.g. the partitions of a dask dataframe; :meth:`CategoricalEncoder.from_categories` takes
    the result).

    Parameters
    ----------
    values : array-like
        The column's distinct values, in any order (missing ones are dropped); with
        ``in_order``, the categories of a pandas ``category`` column that occur in the data,
        in the dtype's order.
    label : str
        How errors name the column (``"column 'city'"``).
    max_bins : int or None, default=255
        The most categories the column may have (None: 255).
    why : str, default="it is listed in categorical_features"
        Why it is categorical (:func:`categorical_reason`), for the errors.
    in_order : bool, default=False
        Keep the order of ``values`` (a ``category`` column); else strings are sorted, and
        numbers too.

    Returns
    -------
    ndarray
        Strings (object array) or non-negative integers (float array; negative values are
        missing); a float array of length 0 when every value is missing.

    Raises
    ------
    ValueError
        Naming the column, as :meth:`CategoricalEncoder.fit`: numbers and strings mixed,
        non-integer numbers, values that are neither, or more than ``max_bins`` categories.

    Examples
    --------
    >>> column_categories(["b", None, "a"], "column 'c'").tolist()
    ['a', 'b']
    >>> column_categories([3, -1, 0.0], "column 'k'").tolist()
    [0.0, 3.0]
    >>> column_categories(["z", "a"], "column 'c'", in_order=True).tolist()
    ['z', 'a']
    """
    import pandas as pd

    series = pd.Series(values, dtype=object)
    series = series[series.notna().to_numpy()].reset_index(drop=True)
    kind = _value_kind(series, label, rows=False)
    cats: np.ndarray
    if kind == "str":
        texts = series.tolist()
        cats = np.array(texts if in_order else sorted(set(texts)), dtype=object)
    elif kind == "num":
        numbers = _integer_values(series, label, rows=False)
        numbers = numbers[numbers >= 0]
        cats = numbers if in_order else np.unique(numbers)
    else:  # every value missing
        cats = np.zeros(0)
    check_category_count(label, len(cats), max_bins, why)
    return cats


def _column(X: Any, j: int) -> Any:
    """Column ``j`` of ``X`` as a pandas Series with a 0-based row index."""
    import pandas as pd

    if _is_frame(X):
        return X.iloc[:, j].reset_index(drop=True)
    return pd.Series(np.asarray(X)[:, j])


def _value_kind(column: Any, label: str, rows: bool = True) -> str | None:
    """``"str"`` or ``"num"`` for a column of strings or of numbers (None when every value is
    missing); a ValueError naming the column otherwise (with the rows of its examples unless
    ``rows`` is False: ``column`` holds a column's distinct values, not its rows)."""
    from pandas.api.types import infer_dtype

    inferred = infer_dtype(column, skipna=True)
    if inferred in _STRING_KINDS:
        return "str"
    if inferred in _NUMERIC_KINDS:
        return "num"
    if inferred == "empty":
        return None
    present = column.notna().to_numpy()
    is_text = np.array([isinstance(v, (str, bytes)) for v in column.to_numpy(dtype=object)])

    def where(row: int) -> str:
        return f" in row {row}" if rows else ""

    if inferred in {"mixed", "mixed-integer"} and is_text.any() and (present & ~is_text).any():
        text, text_row = _first(column, is_text)
        other, other_row = _first(column, present & ~is_text)
        raise ValueError(
            f"Categorical {label} mixes numbers and strings, e.g. {other!r}{where(other_row)} "
            f"and {text!r}{where(text_row)}; make its values all strings (e.g. "
            "column.astype(str)) or all numbers"
        )
    value, row = _first(column, present)
    raise ValueError(
        f"Categorical {label} must hold strings or numbers; got {inferred} values, e.g. "
        f"{value!r}{where(row)}"
    )


def _category_values(categories: Any, label: str) -> tuple[str | None, np.ndarray]:
    """The kind and values of a pandas ``category`` column's categories."""
    import pandas as pd

    kind = _value_kind(pd.Series(categories, dtype=object), label)
    if kind == "num":
        values = _integer_values(pd.Series(categories), label)
        return kind, values
    return kind, np.asarray(categories, dtype=object)


def _integer_values(column: Any, label: str, rows: bool = True) -> np.ndarray:
    """A numeric column's values as floats (NaN for missing); a ValueError naming the column if
    one is not an integer (negative ones are allowed: they mean missing), with its row unless
    ``rows`` is False."""
    import pandas as pd

    values = pd.Series(column).astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isnan(values) & (~np.isfinite(values) | (values != np.floor(values)))
    bad &= ~(values < 0)  # negative values are missing, whatever they are
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        where = f" in row {row}" if rows else ""
        raise ValueError(
            f"Categorical {label} holds the non-integer {float(values[row])!r}{where}; a "
            "numeric categorical feature takes the integers 0, 1, 2, ... (negative values "
            "mean missing)"
        )
    return values


def _check_count(label: str, count: int, limit: int, why: str, about: bool = False) -> None:
    if count > limit:
        raise ValueError(
            f"Categorical {label} has {'about ' if about else ''}{count} distinct categories, "
            f"more than max_bins={limit} ({why}). Drop the column, group its rare values into "
            f"one, or raise max_bins (at most {MAX_CATEGORIES})."
        )


def _check_kind(label: str, fitted: str | None, got: str | None) -> None:
    if got is None or fitted is None or got == fitted:
        return
    names = {"str": "strings", "num": "numbers"}
    raise ValueError(
        f"Categorical {label} was fitted with {names[fitted]} as its categories, but now holds "
        f"{names[got]}; it would encode as all missing. Pass the column as in fit (e.g. read "
        "it as text, or convert it)."
    )
