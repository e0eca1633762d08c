"""Fixtures shared by the test modules, which sit in folders mirroring the packages they test
(``tests/boosting/``, ``tests/dask/``, ...; the estimator's and the public helpers' tests here).
The shared test helpers (``oracles``, ``reference_outputs``, ``reference_0_3``) live in this
folder, which is put on ``sys.path`` for the tests in the subfolders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def two_workers():
    """A client of an in-process Dask cluster of two one-thread workers (per module)."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client
