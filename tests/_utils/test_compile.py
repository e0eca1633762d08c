"""The compile notice (viboost._utils.compile): one line on stderr when a viboost kernel compiles.

The subprocess tests point ``NUMBA_CACHE_DIR`` at an empty directory, so that numba really
compiles there (instead of loading the kernels from the cache of this checkout), and compile only
small kernels (``log_normalizer_c``; ``predict`` for the command line), a few seconds each.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import joblib
import numba
import numpy as np
import pandas as pd
import pytest
from numba.core import config as numba_config
from numba.core import event as numba_event

import viboost
from viboost import VIBoostClassifier
from viboost._utils.compile import (
    NOTICE,
    QUIET_ENV,
    CompileNotice,
    ensure_cache_location,
    install,
    is_cached,
)
from viboost.distributions.unit_slope_vlog import unit_slope_mode

SRC = Path(__file__).resolve().parents[2] / "src"

# Imports viboost's modules and counts the kernels they compiled or loaded (none should be: all
# compile lazily), then compiles the kernels behind log_normalizer_c (serial, about 2 s) and
# reports how many of them numba compiled ("misses") and loaded from its cache ("hits").
CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from numba.core.registry import CPUDispatcher
    import viboost, viboost.cli, viboost.gibbs.sampler, viboost.gibbs.generative, viboost.datasets
    import viboost.variational as variational
    import viboost.distributions.unit_slope_vlog as unit_slope_vlog
    from viboost._utils.parallel import ThreadedKernel

    def dispatchers(module):  # plain kernels, and both forms of the threaded ones
        for k in vars(module).values():
            if isinstance(k, CPUDispatcher):
                yield k
            elif isinstance(k, ThreadedKernel):
                yield from (k.serial, k.parallel)

    every = [
        k for m in list(sys.modules.values()) if m and m.__name__.startswith("viboost")
        for k in dispatchers(m)
    ]
    at_import = sum(len(k.signatures) for k in every)  # compiled or loaded by the imports
    rng = np.random.default_rng(0)
    y = np.where(rng.random(50) < 0.5, -1.0, 1.0)
    variational.log_normalizer_c(y, rng.normal(size=50), y, np.ones(50), 1.0)
    kernels = list(dispatchers(unit_slope_vlog))
    misses = sum(sum(k.stats.cache_misses.values()) for k in kernels)
    hits = sum(sum(k.stats.cache_hits.values()) for k in kernels)
    print(f"kernels={len(every)} at_import={at_import} misses={misses} hits={hits}")
    """
)


def _env(cache_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", QUIET_ENV)}
    env["NUMBA_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120
    )


def _counts(stdout: str) -> tuple[int, int]:
    """(misses, hits) from the child's report, after checking that the imports compiled nothing."""
    report = dict(part.split("=") for part in stdout.strip().splitlines()[-1].split())
    assert int(report["kernels"]) > 20 and int(report["at_import"]) == 0, report
    return int(report["misses"]), int(report["hits"])


def test_notice_when_compiling_and_not_when_cached(tmp_path):
    first = _run(["-c", CHILD], _env(tmp_path))
    assert first.returncode == 0, first.stderr
    misses, _ = _counts(first.stdout)
    assert misses > 0  # numba really compiled
    assert first.stderr.count(NOTICE) == 1, first.stderr  # once, however many kernels compile
    assert first.stderr.startswith(NOTICE)

    second = _run(["-c", CHILD], _env(tmp_path))  # same cache: everything loads from it
    assert second.returncode == 0, second.stderr
    misses, hits = _counts(second.stdout)
    assert misses == 0 and hits > 0
    assert "viboost:" not in second.stderr, second.stderr


def test_quiet_environment_variable(tmp_path):
    run = _run(["-c", CHILD], _env(tmp_path, **{QUIET_ENV: "1"}))
    assert run.returncode == 0, run.stderr
    assert _counts(run.stdout)[0] > 0  # it compiled, silently
    assert "viboost:" not in run.stderr, run.stderr


def test_command_line_shows_the_notice_then_its_output(tmp_path):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"f0": rng.normal(size=60), "f1": rng.normal(size=60)})
    model = VIBoostClassifier(n_estimators=5, random_state=0).fit(X, (X["f0"] > 0).astype(int))
    joblib.dump(model, tmp_path / "model.joblib")
    X.to_csv(tmp_path / "data.csv", index=False)
    args = ["-m", "viboost", "predict", str(tmp_path / "model.joblib"), str(tmp_path / "data.csv")]
    run = _run(args, _env(tmp_path / "cache"))
    assert run.returncode == 0, run.stderr
    assert run.stderr.count(NOTICE) == 1, run.stderr
    assert run.stdout.startswith("prediction,proba_0,proba_1\n")
    assert len(run.stdout.splitlines()) == 61


def _listen(listener: CompileNotice):
    return numba_event.install_listener("numba:compile", listener)


def test_only_viboost_kernels_trigger_the_notice():
    stream = io.StringIO()
    listener = CompileNotice(stream)
    with _listen(listener):
        numba.njit(lambda x: x + 1)(1)  # another library's function: no notice
        assert stream.getvalue() == "" and not listener.announced
        # A fresh, uncached dispatcher of a viboost function compiles: notice, once.
        numba.njit(unit_slope_mode.py_func)(np.ones(3), np.zeros(3), np.ones(3), 0.0)
        numba.njit(unit_slope_mode.py_func)(np.ones(3), np.zeros(3), np.ones(3), 0)
    assert stream.getvalue() == NOTICE + "\n"
    assert listener.announced
    assert listener.seconds > 0.0  # the two compilations were timed


def test_other_compilations_are_not_timed():
    listener = CompileNotice(io.StringIO())
    with _listen(listener):
        numba.njit(lambda x: 2 * x)(1.0)
    assert listener.seconds == 0.0 and not listener.announced


def test_notice_is_printed_once_across_threads():
    stream = io.StringIO()
    listener = CompileNotice(stream)
    data = {"dispatcher": unit_slope_mode, "args": (), "return_type": None}
    start = numba_event.Event("numba:compile", numba_event.EventStatus.START, data)
    barrier = threading.Barrier(8)

    def compile_event() -> None:
        barrier.wait()
        listener.on_start(start)

    threads = [threading.Thread(target=compile_event) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stream.getvalue() == NOTICE + "\n"


def test_quiet_is_read_when_compiling(monkeypatch):
    stream = io.StringIO()
    listener = CompileNotice(stream)
    data = {"dispatcher": unit_slope_mode, "args": (), "return_type": None}
    start = numba_event.Event("numba:compile", numba_event.EventStatus.START, data)
    monkeypatch.setenv(QUIET_ENV, "1")
    listener.on_start(start)
    assert stream.getvalue() == ""
    monkeypatch.setenv(QUIET_ENV, "0")
    listener.on_start(start)
    assert stream.getvalue() == NOTICE + "\n"


def test_install_is_idempotent():
    # `import viboost` has installed the listener (the subprocess tests see its notice); a second
    # install returns it instead of registering another one, which would print a second line.
    assert install() is install()


@pytest.fixture
def no_cache_dir(monkeypatch, tmp_path):
    """NUMBA_CACHE_DIR unset (restored afterwards) and the temporary directory under tmp_path."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")  # records the variable's state for the undo
    monkeypatch.setattr(numba_config, "CACHE_DIR", "")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_cache_location_untouched_when_numba_can_cache(no_cache_dir):
    assert ensure_cache_location() is None  # this checkout's __pycache__ is writable
    assert os.environ["NUMBA_CACHE_DIR"] == "" and numba_config.CACHE_DIR == ""


def test_cache_location_for_a_read_only_install(no_cache_dir, monkeypatch):
    def no_locator(py_func):
        raise RuntimeError("cannot cache function: no locator available")

    # What numba answers for a read-only install with a read-only home directory.
    monkeypatch.setattr(viboost._utils.compile, "FunctionCache", no_locator)
    path = ensure_cache_location()
    assert path is not None and Path(path).parent == no_cache_dir
    assert os.environ["NUMBA_CACHE_DIR"] == path and numba_config.CACHE_DIR == path
    assert Path(path).is_dir()
    if hasattr(os, "getuid"):
        assert Path(path).stat().st_mode & 0o077 == 0  # private to this user
    assert ensure_cache_location() is None  # set once: not changed again


def test_cache_location_respects_numba_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert ensure_cache_location() is None


def test_is_cached_reads_numba_index_and_its_source_stamp(tmp_path, monkeypatch):
    """False before the first call, True once numba has written the compiled code, False again
    once the source file changes (numba's index no longer matches its stamp), as numba itself
    would then compile afresh."""
    import importlib

    source = tmp_path / "viboost_cache_probe.py"
    source.write_text("import numba\n\n@numba.njit(cache=True)\ndef double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("viboost_cache_probe")
    try:
        assert not is_cached(module.double)
        assert module.double(21) == 42
        assert is_cached(module.double)
        source.write_text(source.read_text() + "# edited\n")
        assert not is_cached(module.double)
    finally:
        sys.modules.pop("viboost_cache_probe", None)
