"""Safe file input and output for the command line.

- :func:`atomic_write_bytes`, :func:`atomic_write_text` and :func:`atomic_dump_model` write to a
  temporary file in the target's directory, flush it to disk and then rename it over the target
  with :func:`os.replace`. A reader sees either the old file or the complete new one: a failure
  half way (a full disk, an exception while pickling, an interrupt) leaves an existing file as it
  was, and the temporary file is removed.
- :func:`read_csv_checked` reads a CSV of numeric features (and optionally a target column) and
  turns every way it can go wrong into a :class:`ValueError` with a message fit for a user
  (non-numeric feature columns are found and described by
  :func:`viboost._validation.describe_non_numeric_columns`).
"""

from __future__ import annotations

import contextlib
import csv
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from viboost._validation import describe_non_numeric_columns

__all__ = ["atomic_dump_model", "atomic_write_bytes", "atomic_write_text", "read_csv_checked"]


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


def read_csv_checked(
    path: str | os.PathLike[str],
    target: str | None = None,
    *,
    features: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, pd.Series | None]:
    """Read a CSV of numeric features, with a clear ``ValueError`` for every kind of bad input.

    Parameters
    ----------
    path : str or os.PathLike
        CSV file with a header row; compressed files (``.gz``, ``.zip``, ...) are read by suffix.
        Empty cells become NaN, which VIBoost treats as missing values.
    target : str or None, default=None
        Name of the label column, returned separately. Its values may be of any type but must not
        be missing.
    features : sequence of str or None, default=None
        Feature columns to select by name, in this order; other columns are ignored and need not
        be numeric. None takes every column other than ``target``.

    Returns
    -------
    X : DataFrame of shape (n_rows, n_features)
        The feature columns, all numeric (or boolean).
    y : Series of shape (n_rows,) or None
        The target column, or None when ``target`` is None.

    Raises
    ------
    ValueError
        If the file is missing or unreadable, is not a CSV (binary or unparseable), has no rows,
        has no such ``target`` column (the message lists the columns), has missing target
        values, lacks some of ``features`` (named), or has non-numeric feature columns (named,
        with an offending value).

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
    path = Path(path)
    with _as_value_error(path):
        if not path.exists():
            raise FileNotFoundError(path)
        if path.is_dir():
            raise IsADirectoryError(path)
        if _looks_binary(path):
            raise ValueError(f"{path} is not a CSV file: it holds binary data")
        frame = pd.read_csv(path, encoding="utf-8")
    if frame.columns.size == 0:
        raise ValueError(f"{path} has no columns")
    if len(frame) == 0:
        raise ValueError(f"{path} has a header but no data rows")
    frame.columns = [str(col) for col in frame.columns]
    columns = list(frame.columns)
    listing = ", ".join(repr(col) for col in columns)
    y = None
    if target is not None:
        if target not in columns:
            raise ValueError(f"{path} has no column {target!r}; its columns are: {listing}")
        y = frame[target]
        missing = int(y.isna().sum())
        if missing:
            raise ValueError(
                f"target column {target!r} of {path} has {missing} missing value(s) (first in "
                f"data row {int(y.index[y.isna()][0]) + 1}); drop or fill those rows"
            )
    if features is None:
        selected = [col for col in columns if col != target]
    else:
        selected = [str(col) for col in features]
        absent = [col for col in selected if col not in columns]
        if absent:
            raise ValueError(
                f"{path} lacks {len(absent)} feature column(s) the model needs: "
                + ", ".join(repr(col) for col in absent[:20])
                + (f" and {len(absent) - 20} more" if len(absent) > 20 else "")
            )
    if not selected:
        raise ValueError(f"{path} has no feature columns besides the target {target!r}")
    X = frame[selected]
    bad = describe_non_numeric_columns(X)
    if bad:
        raise ValueError(
            f"{path} has non-numeric feature column(s): {', '.join(bad)}; encode them as "
            "numbers or drop them"
        )
    return X, y
