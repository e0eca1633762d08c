"""``viboost demo`` reports how much of VIBoost's fit time was numba compiling its kernels.

These patch ``compile_seconds`` where the demo command reads it, :mod:`viboost.cli.demo`.
"""

from __future__ import annotations

from viboost import cli
from viboost.cli import demo


def test_demo_says_how_much_of_the_fit_was_compiling(monkeypatch, capsys):
    readings = iter([0.0, 12.3])  # compile_seconds() before and after VIBoost's fit
    monkeypatch.setattr(demo, "compile_seconds", lambda: next(readings))
    assert cli.main(["demo", "--n-estimators", "3"]) == 0
    out = capsys.readouterr().out
    assert "includes 12.3 s of one-time kernel compilation" in out


def test_demo_says_nothing_when_nothing_compiled(monkeypatch, capsys):
    monkeypatch.setattr(demo, "compile_seconds", lambda: 3.0)
    assert cli.main(["demo", "--n-estimators", "3"]) == 0
    assert "compilation" not in capsys.readouterr().out
