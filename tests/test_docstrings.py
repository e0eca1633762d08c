"""Run the Examples sections of every public module's docstrings (numpydoc doctests)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import viboost

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(viboost.__path__, prefix="viboost.")
    if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
