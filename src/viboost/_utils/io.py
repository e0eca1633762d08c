"""Safe file input and output for the command line.

- :func:`atomic_write_bytes`, :func:`atomic_write_text` and :func:`atomic_dump_model` write to a
  temporary file in the target's directory, flush it to disk and then rename it over the target
  with :func:`os.replace`. A reader sees either the old file or the complete new one: a failure
  half way (a full disk, an exception while pickling, an interrupt) leaves an existing file as it
  was, and the temporary file is removed.
- :func:`read_table_checked` reads a table of features (and optionally a target column, a
  row-index column and an id column) from a delimited text file (comma, semicolon, tab or pipe,
  sniffed by :func:`sniff_delimiter` unless given) or a Parquet file (by its suffix or its
  ``PAR1`` magic bytes; needs pyarrow), and turns every way it can go wrong into a
  :class:`ValueError` with a message fit for a user. Non-numeric feature columns are kept as
  categorical features, with a note naming them (``non_numeric="categorical"``), passed on for
  a fitted model to check (``"model"``), or refused, found and described by
  :func:`viboost._utils.validation.describe_non_numeric_columns` (``"refuse"``).
  :func:`read_csv_checked` is its older two-value form.
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import io
import lzma
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd

from viboost._utils.validation import describe_non_numeric_columns, non_numeric_columns

__all__ = [
    "TableData",
    "atomic_dump_model",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_csv_checked",
    "read_table_checked",
    "sniff_delimiter",
]

#: Suffixes read as Parquet (a file starting with the magic bytes ``PAR1`` is too).
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
#: Delimiters :func:`sniff_delimiter` chooses from, in order of preference on a tie.
SNIFFED_DELIMITERS = (",", ";", "\t", "|")
#: How pandas names a column whose header cell is empty: the first one is the index that
#: ``DataFrame.to_csv()`` writes by default.
UNNAMED_INDEX = "Unnamed: 0"
PARQUET_HINT = 'pip install "viboost[parquet]" (or pip install pyarrow)'
_SAMPLE_BYTES = 65536
_SAMPLE_LINES = 50


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    """Create a new, empty temporary file next to ``name``; the umask sets its permissions."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        candidate = directory / f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(candidate, flags, 0o666), candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file in {directory}")


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable, where the platform allows it."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:  # Windows: directories cannot be opened
        return
    try:
        fd = os.open(directory, os.O_RDONLY | flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write`` on a temporary file next to ``path``, then rename it onto ``path``."""
    target = Path(path)
    if target.is_symlink():  # replace the file the link points to, and keep the link
        target = Path(os.path.realpath(target))
    directory = target.parent
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a directory, not a file")
    if not directory.is_dir():
        raise FileNotFoundError(f"directory {directory} does not exist (writing {target})")
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None  # a new file: the permissions open() would give it under the umask
    fd, tmp = _create_temp(directory, target.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:  # replacing a file keeps its permissions
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_directory(directory)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically.

    The bytes go to a temporary file in the same directory, which is flushed to disk and then
    renamed onto ``path``. An existing file is replaced only by complete new content; on any
    failure it is left unchanged and the temporary file is removed.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file. Its directory must exist.
    data : bytes
        The new content.

    Raises
    ------
    OSError
        If the directory is missing, ``path`` is a directory, or writing fails.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "out.bin"
    ...     atomic_write_bytes(path, b"abc")
    ...     path.read_bytes()
    b'abc'
    """
    payload = bytes(data)
    _atomic_write(path, lambda handle: handle.write(payload))


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`).

    Parameters
    ----------
    path : str or os.PathLike
        Destination file. Its directory must exist.
    text : str
        The new content; newlines are written as they are.
    encoding : str, default="utf-8"
        Text encoding.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "out.txt"
    ...     atomic_write_text(path, "a,b\\n1,2\\n")
    ...     path.read_text()
    'a,b\\n1,2\\n'
    """
    atomic_write_bytes(path, text.encode(encoding))


def atomic_dump_model(model: object, path: str | os.PathLike[str]) -> None:
    """Save ``model`` with :func:`joblib.dump`, atomically.

    The pickle is written to a temporary file in the directory of ``path``, flushed to disk and
    renamed onto ``path``: an existing model file is never left half-written or lost, even when
    pickling fails part way; the temporary file is removed on failure.

    Parameters
    ----------
    model : object
        Any picklable object, typically a fitted :class:`~viboost.VIBoostClassifier`.
    path : str or os.PathLike
        Destination file. Its directory must exist.

    Examples
    --------
    >>> import joblib, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "model.joblib"
    ...     atomic_dump_model({"rounds": 3}, path)
    ...     joblib.load(path)
    {'rounds': 3}
    """
    import joblib

    _atomic_write(path, lambda handle: joblib.dump(model, handle))


@contextlib.contextmanager
def _as_value_error(path: Path) -> Iterator[None]:
    try:
        yield
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path} is not a CSV file: it is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: expected a CSV file with a header row") from None
    except (pd.errors.ParserError, csv.Error, EOFError) as exc:
        message = " ".join(str(exc).split())
        raise ValueError(f"could not parse {path} as a CSV file: {message}") from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise ValueError(f"file not found: {path}") from None
        if isinstance(exc, IsADirectoryError):
            raise ValueError(f"{path} is a directory, not a CSV file") from None
        if isinstance(exc, PermissionError):
            raise ValueError(f"permission denied reading {path}") from None
        raise ValueError(f"could not read {path}: {exc.strerror or exc}") from None


def _looks_binary(path: Path) -> bool:
    """True for a file whose first bytes contain NUL, unless pandas will decompress it."""
    if path.suffix.lower() in {".gz", ".bz2", ".zip", ".xz", ".zst", ".tar"}:
        return False
    with open(path, "rb") as handle:
        return b"\x00" in handle.read(8192)


def _is_parquet(path: Path) -> bool:
    """A Parquet file: by its suffix, or by the magic bytes ``PAR1`` it starts with."""
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return True
    with open(path, "rb") as handle:
        return handle.read(4) == b"PAR1"


def sniff_delimiter(sample: str) -> str:
    """The delimiter of a delimited text sample: ``","``, ``";"``, ``"\\t"`` or ``"|"``.

    Each candidate splits the (non-blank) lines with :mod:`csv`'s quoting rules. The header must
    split into at least two fields; among the candidates that split every line into as many
    fields as the header, the one giving the most fields wins (ties in the order above); if
    none is consistent (a malformed file), the one splitting the header into the most fields;
    if no candidate splits the header, a comma. Unlike :class:`csv.Sniffer`, this never guesses
    a letter or a digit as the delimiter, and decimal commas in a semicolon file do not fool it.

    Parameters
    ----------
    sample : str
        The first lines of the file (a last line cut short is ignored if the sample is long).

    Returns
    -------
    str
        One character.

    Examples
    --------
    >>> sniff_delimiter("make;address;spam\\n0,5;1;0\\n")
    ';'
    >>> [sniff_delimiter(text) for text in ("a\\tb\\n1\\t2\\n", "a,b\\n1,2\\n", "a\\n1\\n")]
    ['\\t', ',', ',']
    """
    lines = [line for line in sample.splitlines() if line.strip()]
    if len(sample) >= _SAMPLE_BYTES and len(lines) > 1:
        lines = lines[:-1]  # probably cut short
    lines = lines[:_SAMPLE_LINES]
    if not lines:
        return ","
    consistent: list[tuple[int, int, str]] = []
    header_only: list[tuple[int, int, str]] = []
    for rank, delimiter in enumerate(SNIFFED_DELIMITERS):
        try:
            rows = [row for row in csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)]
        except csv.Error:
            continue
        rows = [row for row in rows if row]
        if not rows or len(rows[0]) < 2:
            continue
        width = len(rows[0])
        header_only.append((width, -rank, delimiter))
        if all(len(row) == width for row in rows[1:]):
            consistent.append((width, -rank, delimiter))
    if consistent:
        return max(consistent)[2]
    if header_only:
        return max(header_only)[2]
    return ","


def _text_sample(path: Path) -> str | None:
    """The first 64 KiB of ``path`` as text (decompressed by suffix), or None if not readable."""
    openers: dict[str, Callable[..., IO[Any]]] = {
        ".gz": gzip.open,
        ".bz2": bz2.open,
        ".xz": lzma.open,
    }
    suffix = path.suffix.lower()
    if suffix in {".zip", ".zst", ".tar"}:
        return None
    try:
        with openers.get(suffix, open)(path, "rb") as handle:
            data = handle.read(_SAMPLE_BYTES)
    except (OSError, EOFError, lzma.LZMAError):
        return None
    return data.decode("utf-8-sig", errors="replace")


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow
    except ImportError:
        raise ValueError(
            f"{path} is a Parquet file, and reading Parquet needs pyarrow: {PARQUET_HINT}"
        ) from None
    try:
        return pd.read_parquet(path, engine="pyarrow")
    except (OSError, ValueError, pyarrow.ArrowException) as exc:
        message = " ".join(str(exc).split())[:300]
        raise ValueError(f"could not read {path} as a Parquet file: {message}") from None


@dataclass(frozen=True)
class TableData:
    """What :func:`read_table_checked` read.

    Attributes
    ----------
    X : DataFrame of shape (n_rows, n_features)
        The feature columns, all numeric (or boolean).
    y : Series of shape (n_rows,) or None
        The target column, or None when no target was asked for.
    ids : Series of shape (n_rows,) or None
        The id column (never a feature), or None when no id column was asked for.
    index_col : str or None
        The column used as the row index (given, or a leading unnamed pandas index).
    sep : str or None
        The delimiter of a text file (given or sniffed); None for Parquet.
    notes : list of str
        Things the user should hear about, such as a detected pandas index column.
    """

    X: pd.DataFrame
    y: pd.Series | None
    ids: pd.Series | None = None
    index_col: str | None = None
    sep: str | None = None
    notes: list[str] = field(default_factory=list)


def _listing(columns: Sequence[str]) -> str:
    shown = ", ".join(repr(col) for col in columns[:50])
    return shown + (f" and {len(columns) - 50} more" if len(columns) > 50 else "")


def read_table_checked(
    path: str | os.PathLike[str],
    target: str | None = None,
    *,
    features: Sequence[str] | None = None,
    sep: str | None = None,
    index_col: str | None = None,
    id_col: str | None = None,
    non_numeric: str = "refuse",
    as_strings: Sequence[str] = (),
) -> TableData:
    """Read a table of features, with a clear ``ValueError`` for every kind of bad input.

    Parameters
    ----------
    path : str or os.PathLike
        A delimited text file with a header row (compressed files, ``.gz``, ``.zip``, ..., are
        read by suffix) or a Parquet file (suffix ``.parquet`` or ``.pq``, or starting with the
        bytes ``PAR1``; needs pyarrow). Empty cells become NaN, which VIBoost treats as missing.
    target : str or None, default=None
        Name of the label column, returned separately. Its values may be of any type but must not
        be missing.
    features : sequence of str or None, default=None
        Feature columns to select by name, in this order; other columns are ignored and need not
        be numeric. None takes every column other than ``target``, ``index_col`` and ``id_col``.
    sep : str or None, default=None
        The delimiter of a text file; None sniffs it (:func:`sniff_delimiter`). Ignored for
        Parquet.
    index_col : str or None, default=None
        A column to use as the row index, never a feature. None: a leading column with an empty
        header (``Unnamed: 0``, the index ``DataFrame.to_csv()`` writes) is used as the index,
        with a note, unless ``features``, ``target`` or ``id_col`` names it. The index pandas
        stores in a Parquet file is always the index.
    id_col : str or None, default=None
        A column (or a named index level of a Parquet file) returned as ``ids``, never a feature.
    non_numeric : {"refuse", "categorical", "model"}, default="refuse"
        What becomes of feature columns that are not numeric (strings): ``"refuse"``, a
        ``ValueError`` naming them with an offending value; ``"categorical"``, kept, with a note
        that they are fitted as categorical features; ``"model"``, kept silently (a fitted
        model checks them).
    as_strings : sequence of str, default=()
        Columns of a text file read as strings, so that a code such as ``007`` is not the
        number 7 (the categorical columns a model was fitted with as strings, or those given to
        ``--categorical``). Missing cells stay missing.

    Returns
    -------
    TableData
        The features ``X``, the target ``y``, the ``ids`` and notes for the user.

    Raises
    ------
    ValueError
        If the file is missing or unreadable, is neither delimited text nor Parquet (binary or
        unparseable), is Parquet but pyarrow is missing, has no rows, lacks the ``target``,
        ``index_col`` or ``id_col`` column (the message lists the columns), has missing target
        values, lacks some of ``features`` (named), or has non-numeric feature columns (named,
        with an offending value) and ``non_numeric="refuse"``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "data.csv"
    ...     _ = path.write_text("id;x1;label\\na;0.5;yes\\nb;1.5;no\\n")
    ...     data = read_table_checked(path, target="label", id_col="id")
    >>> data.sep, list(data.X.columns), data.ids.tolist(), data.y.tolist()
    (';', ['x1'], ['a', 'b'], ['yes', 'no'])
    """
    if non_numeric not in {"refuse", "categorical", "model"}:
        raise ValueError(
            f"non_numeric must be 'refuse', 'categorical' or 'model', got {non_numeric!r}"
        )
    path = Path(path)
    notes: list[str] = []
    with _as_value_error(path):
        if not path.exists():
            raise FileNotFoundError(path)
        if path.is_dir():
            raise IsADirectoryError(path)
        if _is_parquet(path):
            frame = _read_parquet(path)
            sep = None
            stored_index = not isinstance(frame.index, pd.RangeIndex)
        else:
            if _looks_binary(path):
                raise ValueError(
                    f"{path} is not a CSV file: it holds binary data (Parquet files are read "
                    "by their suffix .parquet or .pq)"
                )
            if sep is None:
                sample = _text_sample(path)
                sep = "," if sample is None else sniff_delimiter(sample)
            header = pd.read_csv(path, sep=sep, encoding="utf-8", nrows=0) if as_strings else None
            strings = {} if header is None else {c: str for c in as_strings if c in header.columns}
            frame = pd.read_csv(path, sep=sep, encoding="utf-8", dtype=strings or None)
            stored_index = False
    if frame.columns.size == 0:
        raise ValueError(f"{path} has no columns")
    if len(frame) == 0:
        raise ValueError(f"{path} has a header but no data rows")
    frame.columns = [str(col) for col in frame.columns]
    index_names = [str(name) for name in frame.index.names if name is not None]
    columns = list(frame.columns)
    listing = _listing(columns)

    def absent(column: str, option: str) -> ValueError:
        return ValueError(f"{path} has no column {column!r} ({option}); its columns are: {listing}")

    for column, option in ((index_col, "--index-col"), (id_col, "--id")):
        if column is not None and column == target:
            raise ValueError(f"{option} {column!r} is the target column; give another column")
    if index_col is not None and index_col == id_col:
        raise ValueError(f"--index-col and --id name the same column {index_col!r}")
    if (
        index_col is None
        and not stored_index
        and columns[0] == UNNAMED_INDEX
        and UNNAMED_INDEX not in {target, id_col, *(features or ())}
    ):
        index_col = UNNAMED_INDEX
        notes.append(
            f"the first column of {path} has no header (the index pandas' to_csv() writes); "
            "it is used as the row index, not as a feature (--index-col COL picks another)"
        )
    if index_col is not None:
        if index_col in columns:
            frame = frame.set_index(index_col)
            columns.remove(index_col)
        elif index_col not in index_names:
            raise absent(index_col, "--index-col")
    ids = None
    if id_col is not None:
        if id_col in columns:
            ids = frame[id_col]
        elif id_col in index_names:
            ids = pd.Series(frame.index.get_level_values(id_col), index=frame.index, name=id_col)
        else:
            raise absent(id_col, "--id")
    y = None
    if target is not None:
        if target not in columns:
            raise ValueError(f"{path} has no column {target!r}; its columns are: {listing}")
        y = frame[target]
        missing = y.isna().to_numpy()
        if missing.any():
            raise ValueError(
                f"target column {target!r} of {path} has {int(missing.sum())} missing value(s) "
                f"(first in data row {int(missing.argmax()) + 1}); drop or fill those rows"
            )
    if features is None:
        selected = [col for col in columns if col not in {target, id_col}]
    else:
        selected = [str(col) for col in features]
        lacking = [col for col in selected if col not in columns]
        if lacking:
            raise ValueError(
                f"{path} lacks {len(lacking)} feature column(s) the model needs: "
                + ", ".join(repr(col) for col in lacking[:20])
                + (f" and {len(lacking) - 20} more" if len(lacking) > 20 else "")
            )
    if not selected:
        others = ", ".join(repr(c) for c in (target, id_col, index_col) if c is not None)
        raise ValueError(f"{path} has no feature columns besides {others}")
    X = frame[selected]
    # Rows by position (1-based data rows), whatever the index is.
    if non_numeric == "categorical":
        text = non_numeric_columns(X)
        if text:
            notes.append(
                f"column(s) {', '.join(repr(c) for c in text)} of {path} are not numeric: "
                "fitted as categorical features (categorical_features='from_dtype')"
            )
        for column in text:
            values = X[column].dropna()
            if len(values) > 1 and values.nunique() == len(values):
                notes.append(
                    f"column {column!r} has a different value in every row, like an id: as a "
                    "categorical feature it cannot generalise; set it aside with --id"
                )
    elif non_numeric == "refuse":
        bad = describe_non_numeric_columns(X.reset_index(drop=True))
        if bad:
            raise ValueError(
                f"{path} has non-numeric feature column(s): {', '.join(bad)}; encode them as "
                "numbers, drop them, or name an id column with --id"
            )
    return TableData(X=X, y=y, ids=ids, index_col=index_col, sep=sep, notes=notes)


def read_csv_checked(
    path: str | os.PathLike[str],
    target: str | None = None,
    *,
    features: Sequence[str] | None = None,
    sep: str | None = None,
) -> tuple[pd.DataFrame, pd.Series | None]:
    """Read a table of numeric features: :func:`read_table_checked`, returning ``(X, y)``.

    Parameters
    ----------
    path : str or os.PathLike
        A delimited text file with a header row (delimiter sniffed unless ``sep`` is given;
        compressed files are read by suffix) or a Parquet file.
    target : str or None, default=None
        Name of the label column, returned separately; its values must not be missing.
    features : sequence of str or None, default=None
        Feature columns to select by name, in this order; None takes every column other than
        ``target``.
    sep : str or None, default=None
        The delimiter; None sniffs it.

    Returns
    -------
    X : DataFrame of shape (n_rows, n_features)
        The feature columns, all numeric (or boolean).
    y : Series of shape (n_rows,) or None
        The target column, or None when ``target`` is None.

    Raises
    ------
    ValueError
        As :func:`read_table_checked`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "data.csv"
    ...     _ = path.write_text("x1,x2,label\\n0.5,1,yes\\n1.5,,no\\n")
    ...     X, y = read_csv_checked(path, target="label")
    ...     try:
    ...         read_csv_checked(path, target="class")
    ...     except ValueError as exc:
    ...         message = str(exc)
    >>> X.shape, y.tolist()
    ((2, 2), ['yes', 'no'])
    >>> message  # doctest: +ELLIPSIS
    "...data.csv has no column 'class'; its columns are: 'x1', 'x2', 'label'"
    """
    data = read_table_checked(path, target, features=features, sep=sep)
    return data.X, data.y
