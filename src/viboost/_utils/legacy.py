"""The module paths of viboost 0.1.0, so that models it pickled still load.

A pickle names the module of every class it holds. viboost 0.2 moved the engine into
subpackages (``viboost.stumps`` became ``viboost.boosting.stumps``, ``viboost.calibration``
became ``viboost.noise_fit.calibration``, ...), so a model saved by 0.1.0 names modules that no
longer exist. :func:`install` registers an import hook that answers each old name with the module
that now holds its classes; the estimator then converts what it must in ``__setstate__`` and
warns that the model was saved by another version (:class:`viboost.ViboostVersionWarning`), with
the advice to refit. Only the names below are answered; nothing else is affected.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

__all__ = ["MOVED_MODULES", "install"]

#: Old module path -> new module path.
MOVED_MODULES = {
    "viboost.binning": "viboost.boosting.binning",
    "viboost.stumps": "viboost.boosting.stumps",
    "viboost.reweighting": "viboost.boosting.reweighting",
    "viboost.compression": "viboost.variational.compression",
    "viboost.calibration": "viboost.noise_fit.calibration",
    "viboost.cross_fit": "viboost.fitting.cross_fit",
    "viboost.noise_fit.cross_fit": "viboost.fitting.cross_fit",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module that replaced it."""

    def find_spec(self, fullname: str, path: object, target: object = None):
        if fullname in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec) -> ModuleType:
        return importlib.import_module(MOVED_MODULES[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the new one, already imported."""


def install() -> None:
    """Register the hook once (at ``import viboost``)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
