"""Tests for viboost._utils.memory: the heap kept while a distributed fit's service runs."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import pytest

from viboost._utils import memory
from viboost._utils.memory import (
    GLIBC_DEFAULT_THRESHOLD,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    RETAINED_MMAP_THRESHOLD,
    RETAINED_TRIM_THRESHOLD,
    retained_heap,
)


class FakeLibc:
    """Records the allocator calls that retained_heap makes."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, parameter: int, value: ctypes.c_int) -> int:
        self.calls.append(("mallopt", parameter, value.value))
        return 1

    def malloc_trim(self, pad: ctypes.c_size_t) -> int:
        self.calls.append(("malloc_trim", pad.value))
        return 1


@pytest.fixture
def fake_libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    """A glibc process whose thresholds a variable fixed (glibc's defaults: 128 KiB)."""
    libc = FakeLibc()
    monkeypatch.setattr(memory, "_glibc", lambda: libc)
    for name in memory.FIXING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_TOP_PAD_", "0")
    return libc


RETAIN = [
    ("mallopt", M_MMAP_THRESHOLD, RETAINED_MMAP_THRESHOLD),
    ("mallopt", M_TRIM_THRESHOLD, RETAINED_TRIM_THRESHOLD),
]


def test_sets_the_thresholds_once_and_restores_them_when_the_last_holder_leaves(fake_libc):
    with retained_heap() as held:
        assert held is True
        assert fake_libc.calls == RETAIN
        with retained_heap():  # nested: no second setting, no early restore
            pass
        assert fake_libc.calls == RETAIN
    assert fake_libc.calls == [
        *RETAIN,
        ("mallopt", M_MMAP_THRESHOLD, GLIBC_DEFAULT_THRESHOLD),
        ("mallopt", M_TRIM_THRESHOLD, GLIBC_DEFAULT_THRESHOLD),
        ("malloc_trim", 0),
    ]


def test_restores_the_values_the_process_started_with(fake_libc, monkeypatch):
    # dask's nanny starts its workers with MALLOC_TRIM_THRESHOLD_=65536.
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "not a number")
    with retained_heap():
        pass
    assert fake_libc.calls[2:] == [
        ("mallopt", M_MMAP_THRESHOLD, GLIBC_DEFAULT_THRESHOLD),
        ("mallopt", M_TRIM_THRESHOLD, 65536),
        ("malloc_trim", 0),
    ]


@pytest.mark.parametrize(
    ("mmap", "trim", "restored"),
    [
        ("-5", "0", (GLIBC_DEFAULT_THRESHOLD, 0)),
        # glibc refuses an mmap threshold above 32 MiB at start-up and keeps its default; a
        # trim threshold past the int mallopt takes never trims, as the largest int does not.
        (str(64 << 20), str(1 << 40), (GLIBC_DEFAULT_THRESHOLD, 2**31 - 1)),
        (str(1 << 20), "300000", (1 << 20, 300000)),
    ],
)
def test_restores_what_glibc_made_of_the_variables(fake_libc, monkeypatch, mmap, trim, restored):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", mmap)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", trim)
    with retained_heap():
        pass
    assert fake_libc.calls[2:4] == [
        ("mallopt", M_MMAP_THRESHOLD, restored[0]),
        ("mallopt", M_TRIM_THRESHOLD, restored[1]),
    ]


def test_restores_even_when_the_block_raises(fake_libc):
    with pytest.raises(RuntimeError, match="boom"), retained_heap():
        raise RuntimeError("boom")
    assert fake_libc.calls[-1] == ("malloc_trim", 0)
    assert memory._holders == 0


def test_concurrent_holders_share_one_setting(fake_libc):
    inside, leave = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with retained_heap():
            inside.wait(timeout=10)
            leave.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait(timeout=10)  # both hold it
    assert fake_libc.calls == RETAIN
    leave.set()
    for thread in threads:
        thread.join(timeout=10)
    assert [c[0] for c in fake_libc.calls].count("malloc_trim") == 1
    assert memory._holders == 0


def test_leaves_a_dynamic_threshold_alone(fake_libc, monkeypatch):
    # No variable fixed the thresholds: glibc adjusts them itself, and a set one could not be
    # made dynamic again.
    monkeypatch.delenv("MALLOC_TOP_PAD_")
    with retained_heap() as held:
        assert held is False
    assert fake_libc.calls == []


def test_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    with retained_heap() as held:
        assert held is False
    assert memory._holders == 0


# In a fresh process started as a nanny starts dask's workers: an array of 8 MiB is an mmapped
# block (glibc's mallinfo2: hblkhd) before, none while the heap is retained, one again after.
MMAP_CHECK = """
import ctypes, importlib.util, sys, numpy as np
# The module alone (it needs the standard library only), not the package's heavy imports.
spec = importlib.util.spec_from_file_location("memory", sys.argv[1])
memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory)
retained_heap = memory.retained_heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def mapped(size=8 << 20):
    before = libc.mallinfo2().hblkhd
    block = np.empty(size, dtype=np.uint8)
    grew = libc.mallinfo2().hblkhd - before >= size
    del block
    return grew

first = mapped()
with retained_heap() as held:
    inside = [mapped() for _ in range(3)]
print(first, held, inside, mapped())
"""


@pytest.mark.skipif(
    memory._glibc() is None or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="glibc (2.33 or later, for mallinfo2) only",
)
def test_an_8_mib_array_comes_from_the_heap_while_retained_in_a_nanny_worker():
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    done = subprocess.run(
        [sys.executable, "-c", MMAP_CHECK, memory.__file__],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "[False,", "False,", "False]", "True"]
