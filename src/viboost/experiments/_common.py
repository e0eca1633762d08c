"""Shared plumbing of the experiments: settings, seeds, summaries over runs and atomic output.

- :class:`Settings` holds what every experiment takes from the command line (output folder,
  number of runs, quick mode, seed, parallel jobs).
- :class:`ExperimentResult` is what every ``run_*`` function returns: the tables behind the
  figures (one CSV each), the figure files and the rows of the report (claim of the paper, what
  was measured).
- :func:`run_seeds` derives one integer seed per run from the master seed and the experiment's
  name, so a run's data and fit depend only on ``(seed, experiment, run)``: results do not change
  with the number of parallel jobs or with the other experiments.
- :func:`band` summarises a (runs x points) array as mean and 10th/90th percentiles.
- :func:`write_csv` and :func:`write_figure` write into the output folder atomically through
  :mod:`viboost._utils.io` (a temporary file in the folder, then :func:`os.replace`), so a reader
  never sees a half-written file. Figures are drawn on a bare :class:`matplotlib.figure.Figure` with
  the Agg canvas: no pyplot state and no display are needed.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from viboost._utils.io import atomic_write_bytes, atomic_write_text

__all__ = [
    "BAND_HIGH",
    "BAND_LOW",
    "ExperimentResult",
    "ReportRow",
    "Settings",
    "band",
    "exact_max_bins",
    "map_runs",
    "new_figure",
    "run_seeds",
    "write_csv",
    "write_figure",
]

#: Percentiles of the spread band drawn around each mean (over runs).
BAND_LOW, BAND_HIGH = 10.0, 90.0

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """What every experiment takes from the command line.

    Parameters
    ----------
    out : Path
        Existing folder that receives the figures and CSV files.
    runs : int
        Number of independent runs (the paper averages over 40).
    quick : bool
        Fewer rounds (and a coarser grid) for a smoke test; ``runs`` is taken as given.
    seed : int
        Master seed; each run's seed is derived from it by :func:`run_seeds`.
    n_jobs : int
        Processes for :func:`map_runs` (1 runs everything in this process).
    """

    out: Path
    runs: int = 40
    quick: bool = False
    seed: int = 0
    n_jobs: int = 1


@dataclass(frozen=True)
class ReportRow:
    """One row of an experiment's table in ``report.md``."""

    quantity: str
    paper: str
    measured: str


@dataclass
class ExperimentResult:
    """The outcome of one experiment.

    Attributes
    ----------
    name : str
        The experiment's command-line name (``prior``, ``spam``, ...).
    title : str
        Heading for the report, naming the paper's figure(s).
    tables : dict of str to DataFrame
        CSV file name -> the numbers behind a figure, as written to the output folder.
    figures : list of str
        PNG file names written to the output folder.
    rows : list of ReportRow
        The claims of the paper next to what was measured.
    notes : list of str
        Settings and caveats, one sentence each.
    seconds : float
        Wall time of the experiment.
    """

    name: str
    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    rows: list[ReportRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = float("nan")

    @property
    def table(self) -> pd.DataFrame:
        """The first (main) table of the experiment."""
        return next(iter(self.tables.values()))


def run_seeds(seed: int, name: str, runs: int) -> list[int]:
    """One 32-bit seed per run, from the master ``seed`` and the experiment ``name``.

    Parameters
    ----------
    seed : int
        Master seed.
    name : str
        Experiment name; different experiments get unrelated streams.
    runs : int
        Number of seeds.

    Returns
    -------
    list of int

    Examples
    --------
    >>> run_seeds(0, "spam", 3) == run_seeds(0, "spam", 5)[:3]
    True
    >>> run_seeds(0, "spam", 2) != run_seeds(0, "step", 2)
    True
    """
    tag = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")
    states = np.random.SeedSequence([seed, tag]).spawn(runs)
    return [int(s.generate_state(1)[0]) for s in states]


def map_runs(
    function: Callable[..., T], arguments: Sequence[tuple[Any, ...]], n_jobs: int = 1
) -> list[T]:
    """``[function(*args) for args in arguments]``, in order, in ``n_jobs`` processes.

    Each call must depend only on its arguments (seeds included), so the results do not depend
    on ``n_jobs``.
    """
    if n_jobs == 1 or len(arguments) < 2:
        return [function(*args) for args in arguments]
    from joblib import Parallel, delayed

    return list(Parallel(n_jobs=n_jobs)(delayed(function)(*args) for args in arguments))


def band(values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and the 10th/90th percentiles of ``values`` along ``axis`` (the runs).

    Examples
    --------
    >>> mean, low, high = band(np.arange(11.0)[:, None])
    >>> float(mean[0]), float(low[0]), float(high[0])
    (5.0, 1.0, 9.0)
    """
    values = np.asarray(values, dtype=float)
    low, high = np.percentile(values, [BAND_LOW, BAND_HIGH], axis=axis)
    return values.mean(axis=axis), low, high


def exact_max_bins(X: np.ndarray) -> int | None:
    """The fastest ``max_bins`` of :class:`~viboost.VIBoostClassifier` with the exact stumps.

    A feature with at most 255 distinct values is binned exactly, so the binned search finds the
    same stumps as the exhaustive one (``max_bins=None``), much faster on many features. Returns
    255 when every column of ``X`` qualifies, else None (the exhaustive search).

    Examples
    --------
    >>> exact_max_bins(np.array([[0.0, 1.0], [1.0, 1.0]]))
    255
    >>> print(exact_max_bins(np.arange(300.0)[:, None]))
    None
    """
    X = np.asarray(X, dtype=float)
    if X.shape[0] <= 255:
        return 255
    ordered = np.sort(X, axis=0)
    distinct = 1 + np.count_nonzero(ordered[1:] != ordered[:-1], axis=0)
    return 255 if int(distinct.max(initial=0)) <= 255 else None


def new_figure(width: float = 6.4, height: float = 4.4) -> Figure:
    """A bare figure with the Agg canvas (no pyplot, no display)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def write_figure(figure: Figure, out: Path, name: str) -> str:
    """Render ``figure`` as PNG and write it to ``out / name`` atomically; return ``name``."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    atomic_write_bytes(Path(out) / name, buffer.getvalue())
    return name


def write_csv(frame: pd.DataFrame, out: Path, name: str) -> str:
    """Write ``frame`` (no index) to ``out / name`` atomically; return ``name``."""
    atomic_write_text(
        Path(out) / name, frame.to_csv(index=False, lineterminator="\n", float_format="%.10g")
    )
    return name


def write_text(text: str, out: Path, name: str) -> str:
    """Write ``text`` to ``out / name`` atomically; return ``name``."""
    atomic_write_text(Path(out) / name, text)
    return name


class Timer:
    """Wall-clock timer: ``with Timer() as t: ...; t.seconds``."""

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        self.seconds = float("nan")
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def fmt(value: float, digits: int = 3) -> str:
    """``digits`` significant digits; ``inf`` and ``nan`` spelled out."""
    if not np.isfinite(value):
        return "n/a" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.{digits}g}"


def ensure_out(out: str | os.PathLike[str]) -> Path:
    """Return ``out`` as a Path, creating the folder (and its parents) if needed."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"--out {path} exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    if not os.access(path, os.W_OK):
        raise PermissionError(f"--out directory {path} is not writable")
    return path
