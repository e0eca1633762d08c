"""The suite cannot hang (issue 10): pytest-timeout is configured and stops a stuck test."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_per_test_timeout_is_configured():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    options = config["tool"]["pytest"]["ini_options"]
    assert 0 < int(options["timeout"]) <= 600
    assert options["timeout_method"] == "thread"
    extras = config["project"]["optional-dependencies"]["test"]
    assert any(dep.startswith("pytest-timeout") for dep in extras)


def test_a_stuck_test_is_stopped(tmp_path):
    # A test that would spin forever in a loop that never returns to pytest.
    (tmp_path / "test_stuck.py").write_text(
        textwrap.dedent(
            """
            def test_spins():
                while True:
                    pass
            """
        )
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--timeout=2",
            "--timeout-method=thread",
            "test_stuck.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Timeout" in result.stdout + result.stderr
