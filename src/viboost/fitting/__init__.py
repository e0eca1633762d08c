"""The fit driver that both estimators run, apart from their scikit-learn plumbing.

- :mod:`viboost.fitting.task`: two classes or K, decided once (:class:`BinaryTask`,
  :class:`ClassesTask`): ensembles per round, label encoding, the in-memory row source, the
  link from margins to probabilities, the noise model;
- :mod:`viboost.fitting.config`: an estimator's parameters as the driver reads them, the
  preset resolved into the fit's plan and the checks before any work;
- :mod:`viboost.fitting.data`: what the driver reads of the rows (:class:`TrainingData`), and
  the rows of a fit in this process (:class:`InMemoryData`);
- :mod:`viboost.fitting.cross_fit`: the robust preset's cross-fitting (folds, the score of a
  round count, early stopping, the refit);
- :mod:`viboost.fitting.driver`: :class:`FitDriver` (in-sample or cross-fitted, any rows) and
  :class:`FittedModel`, the one result, stored once.
"""

from viboost.fitting.config import FitConfig
from viboost.fitting.data import InMemoryData, TrainingData
from viboost.fitting.driver import FitDriver, FittedModel, WarmStart
from viboost.fitting.task import BinaryTask, ClassesTask, Task, make_task

__all__ = [
    "BinaryTask",
    "ClassesTask",
    "FitConfig",
    "FitDriver",
    "FittedModel",
    "InMemoryData",
    "Task",
    "TrainingData",
    "WarmStart",
    "make_task",
]
