"""What the two Dask benchmarks (``dask.py`` and ``dask_out_of_core.py``) share: the machine and
library lines of their reports, and quiet shutdown and progress lines.

Imported by those scripts, which put their own directory *last* on ``sys.path`` (so that
``import dask`` finds the dask package, not ``benchmarks/dask.py``, while this module is still
found).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
from collections.abc import Callable, Iterable
from typing import Any


def machine_lines() -> list[str]:
    """Platform, CPU model, core counts and RAM of this machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    ram = "unknown"
    with contextlib.suppress(OSError):
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    ram = f"{int(line.split()[1]) * 1024 / 2**30:.1f} GiB"
                    break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- Machine: {platform.platform()}; Python {platform.python_version()}",
        f"- CPU: {cpu}; {os.cpu_count()} logical cores ({usable} usable by this process)",
        f"- RAM: {ram}",
    ]


def versions_line(distributions: Iterable[str]) -> str:
    """Versions of the given libraries, from their installed metadata."""
    parts = []
    for dist in distributions:
        try:
            parts.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{dist} (not installed)")
    return "- Libraries: " + ", ".join(parts)


def close_quietly(name: str, close: Callable[..., Any], timeout: float) -> None:
    """Call ``close(timeout=timeout)``; report (not raise) a failure or a timeout."""
    try:
        close(timeout=timeout)
    except Exception as exc:  # shutting down: say it and go on
        print(f"warning: closing the {name} failed: {exc!r}", file=sys.stderr)


def progress(message: str) -> None:
    """One progress line on stderr."""
    print(message, file=sys.stderr, flush=True)
