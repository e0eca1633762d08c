"""Fit and predict on a Dask cluster: :class:`DaskVIBoostClassifier`.

Needs the ``dask`` extra (``pip install "viboost[dask]"``: dask and distributed). The module
layout:

- :mod:`viboost.dask.blocks`: what runs on the workers, one block of rows at a time;
- :mod:`viboost.dask.engine`: the client's side of the rounds (tasks, reductions in block
  order, boosters in lockstep);
- :mod:`viboost.dask.estimator`: the scikit-learn estimator.
"""

from viboost.dask.estimator import DaskVIBoostClassifier

__all__ = ["DaskVIBoostClassifier"]
