"""A one-line notice on stderr when numba compiles viboost's kernels.

viboost's hot loops are numba kernels compiled lazily, on first use, and cached on disk
(``cache=True``: next to the modules in site-packages, or under ``NUMBA_CACHE_DIR``). The first fit
after an install therefore spends seconds compiling (how many: :doc:`docs/speed.md </speed>`,
"Shared machines and the first run"), with nothing to show. This module installs a listener for
numba's ``"numba:compile"`` event, which numba broadcasts only when it really compiles a function (a
function loaded from the on-disk cache raises no event), and prints :data:`NOTICE` to stderr the
first time a kernel defined in viboost compiles: at most once per process, never when everything
comes from the cache, never for other libraries' numba functions.

Set the environment variable ``VIBOOST_QUIET_COMPILE=1`` to silence it (read when a kernel
compiles, so setting it from Python after ``import viboost`` works too).

:func:`ensure_cache_location`, run when this module is imported (first, by ``viboost``'s
``__init__``), gives numba a private temporary cache directory when it has no writable one, as
with a read-only install and home directory, where numba would refuse to define the kernels.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from typing import Any, TextIO

from numba.core import config as numba_config
from numba.core import event as numba_event
from numba.core.caching import FunctionCache

__all__ = [
    "NOTICE",
    "QUIET_ENV",
    "CompileNotice",
    "compile_seconds",
    "ensure_cache_location",
    "install",
    "is_cached",
]

#: The line printed to stderr when a viboost kernel compiles for the first time in a process.
NOTICE = (
    "viboost: compiling numerical kernels (first use only, up to a minute; cached afterwards). "
    "Set VIBOOST_QUIET_COMPILE=1 to hide this note."
)
#: Environment variable that silences the notice unless unset, "", "0", "false" or "no".
QUIET_ENV = "VIBOOST_QUIET_COMPILE"
_PACKAGE = __name__.partition(".")[0]  # "viboost"
_COMPILE_EVENT = "numba:compile"

_install_lock = threading.Lock()
_listener: CompileNotice | None = None


def _probe() -> None:
    """A function of this package's directory, for :func:`ensure_cache_location` to test."""


def _private_dir(path: str) -> bool:
    """Whether ``path`` is a directory only this user can write to (created if missing)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        status = os.stat(path)
        getuid = getattr(os, "getuid", None)  # POSIX; Windows temp folders are per user
        if getuid is not None and (status.st_uid != getuid() or status.st_mode & 0o022):
            return False
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def ensure_cache_location() -> str | None:
    """Give numba a writable cache directory when it has none, so that ``import viboost`` works.

    numba keeps a ``cache=True`` kernel next to its module (``__pycache__``) or else in the user's
    cache directory (``~/.cache/numba``); with neither writable (a read-only install and home, as
    in some containers) it refuses to define the kernel, and ``import viboost`` fails with
    "RuntimeError: cannot cache function ...: no locator available". Then, and only then (and
    when ``NUMBA_CACHE_DIR`` is unset), ``NUMBA_CACHE_DIR`` is set for this process and its
    children to a private per-user directory under the temporary directory (a fresh one per
    process if that cannot be had). Called at import, before any kernel is defined.

    Returns
    -------
    str or None
        The directory chosen, or None when numba could cache already (nothing changed).
    """
    # numba.config sets its settings at import, undeclared: hence the two ignores below.
    if numba_config.CACHE_DIR or os.environ.get("NUMBA_CACHE_DIR"):  # type: ignore[attr-defined]
        return None
    try:
        FunctionCache(_probe)  # the same search numba makes when it defines a kernel
        return None
    except RuntimeError:
        pass
    getuid = getattr(os, "getuid", None)
    user = str(getuid()) if getuid is not None else "user"
    path = os.path.join(tempfile.gettempdir(), f"viboost-numba-cache-{user}")
    if not _private_dir(path):
        try:
            path = tempfile.mkdtemp(prefix="viboost-numba-cache-")
        except OSError:
            return None  # nowhere to write: numba's own error will say so
    os.environ["NUMBA_CACHE_DIR"] = path  # numba re-reads its settings from the environment
    numba_config.CACHE_DIR = path  # type: ignore[attr-defined]
    return path


def _quiet() -> bool:
    return os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _is_ours(data: object) -> bool:
    """Whether a ``numba:compile`` event is about a function defined in viboost."""
    dispatcher = data.get("dispatcher") if isinstance(data, dict) else None
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


class CompileNotice(numba_event.Listener):
    """Print :data:`NOTICE` once, when a viboost kernel compiles (not when it loads from cache).

    Parameters
    ----------
    stream : text stream or None, default=None
        Where the notice goes; None means ``sys.stderr`` as it is when the notice is printed
        (so redirections made after import are followed).

    Attributes
    ----------
    announced : bool
        Whether the notice has been printed.
    seconds : float
        Wall time spent compiling viboost kernels so far (a kernel compiled while another one
        compiles, as a callee, is counted once, within its caller).
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: nesting depth and start of the outermost
        self.announced = False
        #: Wall time spent compiling viboost kernels so far, in seconds.
        self.seconds = 0.0

    def on_start(self, event: numba_event.Event) -> None:
        """Print the notice if ``event`` starts the first compilation of a viboost kernel."""
        if not _is_ours(event.data):
            return
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth == 0:
            self._local.start = time.perf_counter()
        if self.announced or _quiet():
            return
        with self._lock:  # several threads may start compiling at once: one line only
            if self.announced:
                return
            self.announced = True
        stream = self._stream if self._stream is not None else sys.stderr
        try:
            print(NOTICE, file=stream, flush=True)
        except (OSError, ValueError, AttributeError):  # no usable stderr (closed, None): skip
            pass

    def on_end(self, event: numba_event.Event) -> None:
        """Add the time of an outermost viboost compilation to :attr:`seconds`."""
        depth = getattr(self._local, "depth", 0)
        if not _is_ours(event.data) or depth == 0:
            return
        self._local.depth = depth - 1
        if depth == 1:
            elapsed = time.perf_counter() - self._local.start
            with self._lock:
                self.seconds += elapsed


def install() -> CompileNotice:
    """Register the process-wide :class:`CompileNotice` for numba's compile events (idempotent).

    Returns
    -------
    CompileNotice
        The listener registered (the same one on every call).
    """
    global _listener
    with _install_lock:
        if _listener is None:
            _listener = CompileNotice()
            numba_event.register(_COMPILE_EVENT, _listener)
        return _listener


def compile_seconds() -> float:
    """Wall time this process has spent compiling viboost's kernels (0.0 if all were cached).

    Returns
    -------
    float
        Seconds, summed over the compilations seen since :func:`install` (``import viboost``).

    Examples
    --------
    >>> from viboost._utils.compile import compile_seconds
    >>> compile_seconds() >= 0.0
    True
    """
    return install().seconds


def is_cached(dispatcher: Any) -> bool:
    """Whether numba's on-disk cache holds code of ``dispatcher`` (a ``cache=True`` numba
    function) that is current with its source.

    True when the function's cache index names at least one compiled signature; numba drops an
    index whose stamp of the source file differs, so an edited kernel reads as not cached. The
    index is read through numba's cache classes (:class:`numba.core.caching.FunctionCache`),
    which are not public API: whenever they cannot be read this says False, so a caller that
    compiles on False stays correct (it compiles what is cached already, loading it instead).
    A cached signature need not be the one a call will want: a guess, for
    :func:`viboost.estimator`'s up-front compile.

    Examples
    --------
    >>> import numba
    >>> is_cached(numba.njit(lambda x: x))  # no cache=True, no source file: nothing on disk
    False
    """
    try:
        index = FunctionCache(dispatcher.py_func)._cache_file._load_index()
    except Exception:  # numba's internals changed, or no locator, or an unreadable index
        return False
    return bool(index)


# At import, before viboost's modules define their kernels (the package imports this module
# first): a read-only install must still import.
ensure_cache_location()
