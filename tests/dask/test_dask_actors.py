"""viboost.dask.actors: the rounds on Dask Actors fit the model of the service and of the
scheduler bit for bit (every fitted attribute; two classes with either preset, and K classes),
errors on a worker reach the client, and a lost or silent actor is a ServiceLost (the
estimator then fits through the scheduler), never a hang.

Until the estimator takes ``transport="actors"``, the actors replace the service for a fit
(``viboost.dask.estimator.BlockService`` monkeypatched to ``ActorService``, with
``transport="direct"``); once it does, the tests use the parameter."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from viboost.dask import DaskVIBoostClassifier  # noqa: E402
from viboost.dask import actors as actors_module  # noqa: E402
from viboost.dask import estimator as estimator_module  # noqa: E402
from viboost.dask.actors import ActorService  # noqa: E402
from viboost.dask.engine import BlockTasks  # noqa: E402
from viboost.dask.service import ServiceLost  # noqa: E402


def _takes_actors() -> bool:
    """Whether the estimator has ``transport="actors"``."""
    constraints = DaskVIBoostClassifier._parameter_constraints["transport"]
    return any(getattr(c, "is_satisfied_by", lambda _: False)("actors") for c in constraints)


def _on_actors(monkeypatch) -> str:
    """The ``transport`` that runs a fit's rounds on the actors (patching the estimator where
    it has no ``"actors"``)."""
    if _takes_actors():
        return "actors"
    monkeypatch.setattr(estimator_module, "BlockService", ActorService)
    return "direct"


def _data(n: int = 2400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.02] = np.nan
    y = ((np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) > 0) ^ (rng.random(n) < 0.1)).astype(int)
    return X, y


def _three_classes(n: int = 900, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.03] = np.nan
    clean = np.nan_to_num(X)
    y = np.digitize(clean[:, 0] + 0.5 * clean[:, 1], [-0.6, 0.6])
    moved = rng.random(n) < 0.2
    y[moved] = (y[moved] + rng.integers(1, 3, moved.sum())) % 3
    return X, y


def _assert_same(got, want, path: str) -> None:
    """``got`` and ``want`` equal to the bit: arrays (dask arrays computed; NaN equal to NaN),
    containers and objects (their fields) compared recursively."""
    if hasattr(got, "dask") and hasattr(got, "compute"):
        got, want = got.compute(), want.compute()
    if isinstance(got, np.ndarray) or isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want, err_msg=path, strict=True)
    elif isinstance(got, float) and isinstance(want, float):
        assert got == want or (np.isnan(got) and np.isnan(want)), path
    elif isinstance(got, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), path
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            _assert_same(a, b, f"{path}[{i}]")
    elif isinstance(got, dict):
        assert got.keys() == want.keys(), path
        for key in got:
            _assert_same(got[key], want[key], f"{path}[{key!r}]")
    elif dataclasses.is_dataclass(got) and not isinstance(got, type):
        assert type(got) is type(want), path
        for field in dataclasses.fields(got):
            _assert_same(
                getattr(got, field.name), getattr(want, field.name), f"{path}.{field.name}"
            )
    elif hasattr(got, "__dict__") and type(got).__eq__ is object.__eq__:
        assert type(got) is type(want), path
        _assert_same(vars(got), vars(want), path)
    else:
        assert got == want, path


def _assert_same_model(got: DaskVIBoostClassifier, want: DaskVIBoostClassifier, X) -> None:
    """Every fitted attribute (but ``transport_``) equal, and the decision function."""
    names = {n for n in vars(want) if n.endswith("_") and not n.startswith("_")}
    assert names == {n for n in vars(got) if n.endswith("_") and not n.startswith("_")}
    for name in sorted(names - {"transport_"}):
        _assert_same(getattr(got, name), getattr(want, name), name)
    np.testing.assert_array_equal(got.decision_function(X), want.decision_function(X))


_CASES = [
    pytest.param(_data, {"n_estimators": 12, "preset": "paper"}, id="paper"),
    pytest.param(
        _data,
        {"n_estimators": 6, "cv": 2, "max_leaf_nodes": 31, "n_iter_no_change": None},
        id="robust-31-leaves",
    ),
    pytest.param(_three_classes, {"n_estimators": 5, "cv": 2}, id="three-classes-robust"),
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("make_data", "params"), _CASES)
def test_actors_fit_the_model_of_the_service_and_of_the_scheduler(
    two_workers, monkeypatch, make_data, params
):
    X, y = make_data()
    dX, dy = da.from_array(X, chunks=700), da.from_array(y, chunks=700)

    def fit(transport: str) -> DaskVIBoostClassifier:
        return DaskVIBoostClassifier(
            **params, random_state=0, client=two_workers, block_size=300, transport=transport
        ).fit(dX, dy)

    service, scheduler = fit("direct"), fit("scheduler")
    assert (service.transport_, scheduler.transport_) == ("direct", "scheduler")
    used = []
    with monkeypatch.context() as patch:
        transport = _on_actors(patch)
        patch.setattr(ActorService, "_flush", _counted(ActorService._flush, used))
        actors = fit(transport)
    assert used, "the fit did not run on the actors"
    assert actors.transport_ == transport
    _assert_same_model(actors, service, X)
    _assert_same_model(actors, scheduler, X)


def _counted(method, calls: list):
    def counting(self, *args, **kwargs):
        calls.append(1)
        return method(self, *args, **kwargs)

    return counting


def _add(block: np.ndarray, other: np.ndarray | None = None, scale: float = 1.0) -> np.ndarray:
    return scale * (block + (0 if other is None else other))


def _fail(block: np.ndarray) -> None:
    raise ValueError("bad block on the worker")


def _sleep(block: np.ndarray, seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _placed(client, n_blocks: int = 4, timeout: float = 30.0) -> tuple[BlockTasks, list]:
    tasks = BlockTasks(client, timeout)
    futures = [client.scatter(np.full(4, float(b)), hash=False) for b in range(n_blocks)]
    return tasks, tasks.place(futures, [4] * n_blocks)


def test_actors_keep_handles_with_their_blocks_and_raise_the_workers_errors(two_workers):
    tasks, placed = _placed(two_workers)
    with ActorService(tasks, placed) as service:
        assert len({home for home in tasks.homes}) == len(service._futures) == 2
        doubled = service.submit(_add, service.training, service.training)
        got = service.run(_add, doubled, [None] * 4, scale=0.5)
        for b, values in enumerate(got):
            np.testing.assert_array_equal(values, np.full(4, float(b)))
        with pytest.raises(ValueError, match="bad block on the worker") as caught:
            service.run(_fail, service.training)
        assert "on the worker" in str(caught.value.__cause__)  # with the worker's traceback
        again = service.run(_add, service.training, [None] * 4, scale=3.0)  # it goes on
        for b, values in enumerate(again):
            np.testing.assert_array_equal(values, np.full(4, 3.0 * b))
        with pytest.raises(ValueError, match="one argument per block"):
            service.run(_add, service.training[:3])
        with pytest.raises(ValueError, match="another actor"):
            service.run(_add, service.training[::-1])
        # (An in-process cluster: the actors are objects of this process.)
        actor = actors_module._LIVE[service._names[service.training[0].service]]
        dropped = service.submit(_add, service.training)
        key = dropped[0].key
        service.run(_add, service.training)
        assert key in actor.objects
        del dropped  # released on its actor after the next pass
        service.run(_add, service.training)
        assert key not in actor.objects
        (exported,) = service.finish(doubled)
    for b, value in enumerate(two_workers.gather(exported)):
        np.testing.assert_array_equal(value, np.full(4, 2.0 * b))
    with pytest.raises(ServiceLost, match="closed"):
        service.run(_add, service.training)


def test_a_lost_actor_is_a_service_lost(two_workers):
    """An actor that its worker no longer holds (released, or its worker gone) makes the next
    pass raise ServiceLost, on which the estimator falls back to the scheduler."""
    tasks, placed = _placed(two_workers)
    with ActorService(tasks, placed) as service:
        service.run(_add, service.training)
        lost = service._futures[0]
        two_workers.cancel([lost])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            two_workers.run(lambda dask_worker: lost.key in dask_worker.state.actors).values()
        ):
            time.sleep(0.05)
        with pytest.raises(ServiceLost, match="is gone"):
            service.run(_add, service.training)


def test_a_silent_actor_is_a_service_lost_within_the_timeout(two_workers):
    tasks, placed = _placed(two_workers, timeout=1.5)
    with ActorService(tasks, placed) as service:
        start = time.monotonic()
        with pytest.raises(ServiceLost, match="did not answer within timeout=1.5 s"):
            service.run(_sleep, service.training, seconds=5.0)
        assert time.monotonic() - start < 4.5


def test_actors_that_do_not_start_are_a_service_lost(two_workers):
    """Blocks placed on a worker that has gone: the actor never starts; bounded by timeout."""
    tasks, placed = _placed(two_workers, timeout=0.5)
    tasks.homes = [("tcp://127.0.0.1:9", 0)] * len(placed)  # no such worker
    start = time.monotonic()
    with pytest.raises(ServiceLost, match="did not start within timeout"):
        ActorService(tasks, placed)
    assert time.monotonic() - start < 10


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_an_actor_lost_mid_fit_warns_and_fits_through_the_scheduler(two_workers, monkeypatch):
    X, y = _data(2000, seed=1)
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    params = {"n_estimators": 10, "cv": 2, "random_state": 0, "block_size": 500}
    want = DaskVIBoostClassifier(**params, client=two_workers, transport="scheduler").fit(dX, dy)
    transport = _on_actors(monkeypatch)
    flush = ActorService._flush
    passes = []

    def losing(self):
        passes.append(1)
        if len(passes) == 5:  # the worker drops an actor mid-fit
            self.tasks.client.cancel([self._futures[1]])
            key = self._keys[1]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(
                self.tasks.client.run(lambda dask_worker: key in dask_worker.state.actors).values()
            ):
                time.sleep(0.05)
        return flush(self)

    monkeypatch.setattr(ActorService, "_flush", losing)
    model = DaskVIBoostClassifier(**params, client=two_workers, timeout=60, transport=transport)
    with pytest.warns(RuntimeWarning, match="is gone.*through the scheduler"):
        model.fit(dX, dy)
    assert len(passes) == 5  # the fifth pass found its actor gone
    assert model.transport_ == "scheduler"
    _assert_same_model(model, want, X)


def test_two_actors_on_a_worker_of_two_threads_compute_at_once():
    """A worker of two threads gets an actor per thread (the service's grouping), each
    running its calls on a thread of its own: a pass of two 0.4 s calls takes about 0.4 s."""
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        tasks, placed = _placed(client, n_blocks=2)
        assert len(set(tasks.homes)) == 2
        with ActorService(tasks, placed) as service:
            assert len(service._futures) == 2
            service.run(_sleep, service.training, seconds=0.0)
            start = time.perf_counter()
            assert service.run(_sleep, service.training, seconds=0.4) == [0.4, 0.4]
            assert time.perf_counter() - start < 0.75


def test_actors_run_on_a_cluster_reached_over_tls():
    """The calls ride the cluster's own comms: on a TLS cluster (which the service refuses)
    the actors run their passes, and, where the estimator takes ``transport="actors"``, fit
    the model of the scheduler."""
    pytest.importorskip("cryptography")
    from distributed.security import Security

    security = Security.temporary()
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, protocol="tls://",
            security=security, dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster, security=security, set_as_default=False) as client,
    ):  # fmt: skip
        tasks, placed = _placed(client)
        assert {worker.split("://")[0] for worker, _ in tasks.homes} == {"tls"}
        with ActorService(tasks, placed) as service:
            got = service.run(_add, service.training, [None] * 4, scale=2.0)
        for b, values in enumerate(got):
            np.testing.assert_array_equal(values, np.full(4, 2.0 * b))
        if _takes_actors():
            X, y = _data(1200, seed=5)
            dX, dy = da.from_array(X, chunks=300), da.from_array(y, chunks=300)
            params = {"n_estimators": 5, "preset": "paper", "random_state": 0, "block_size": 300}
            models = [
                DaskVIBoostClassifier(**params, client=client, transport=transport).fit(dX, dy)
                for transport in ("actors", "scheduler")
            ]
            assert models[0].transport_ == "actors"
            with client.as_current():  # (not the default client: the per-row arrays' futures)
                _assert_same_model(*models, X)
