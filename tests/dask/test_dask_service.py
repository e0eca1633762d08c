"""viboost.dask.service: the direct connections to the workers' long-lived tasks (the wire
protocol, the key, errors on a worker) and the estimator's transports (the same model either
way, the fallback to the scheduler when a connection fails, the memory rule of "auto")."""

from __future__ import annotations

import os
import pickle
import socket
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client as connect
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from types import SimpleNamespace

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from viboost.dask import DaskVIBoostClassifier  # noqa: E402
from viboost.dask import service as service_module  # noqa: E402
from viboost.dask.engine import BlockTasks  # noqa: E402
from viboost.dask.service import BlockService, ServiceLost  # noqa: E402


class _Worker:
    """What :func:`~viboost.dask.service.serve` reads of its worker: the address (its host is
    where the socket opens) and ``log_event`` (where the port is published)."""

    address = "tcp://127.0.0.1:1"

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.published = threading.Event()

    def log_event(self, topic: str, msg: dict) -> None:
        self.events.append(msg)
        self.published.set()


def _serve_in_thread(
    monkeypatch, key: bytes, blocks_: list
) -> tuple[_Worker, dict, threading.Thread]:
    worker = _Worker()
    monkeypatch.setattr(distributed, "get_worker", lambda: worker)
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = service_module.serve("topic", key, 30.0, 0, [10, 11], *blocks_)
        except BaseException as error:  # noqa: BLE001 - examined by the test
            result["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert worker.published.wait(30)
    return worker, result, thread


def _add(block: np.ndarray, other: np.ndarray | None = None, scale: float = 1.0) -> np.ndarray:
    return scale * (block + (0 if other is None else other))


def _fail(block: np.ndarray) -> None:
    raise ValueError("bad block on the worker")


def test_a_service_runs_calls_on_its_objects_and_returns_what_it_is_asked_for(monkeypatch):
    key = b"k" * 32
    worker, result, thread = _serve_in_thread(monkeypatch, key, [np.ones(3), np.arange(3.0)])
    conn = connect(("127.0.0.1", worker.events[0]["port"]), authkey=None)
    answer_challenge(conn, key)
    deliver_challenge(conn, key)
    region = service_module._accept_region(conn, 10.0)
    # On one host with a writable /dev/shm the replies' arrays come through a shared region.
    shm = os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
    assert (region is not None) == shm
    ref = service_module._Ref
    send = service_module._send_message

    def receive(conn, timeout):
        return service_module._receive_message(conn, timeout, region)

    # Store block + 1 under keys 20, 21; then send back (stored + block) * 2; release 10.
    send(conn, ([], [(_add, [(ref(10), 1.0), (ref(11), 1.0)], {}, [20, 21])]))
    assert receive(conn, 10.0) == []
    send(conn, ([10], [(_add, [(ref(20), ref(10)), (ref(21), ref(11))], {"scale": 2.0}, None)]))
    (sent,) = receive(conn, 10.0)
    np.testing.assert_array_equal(sent[0], [6.0, 6.0, 6.0])
    np.testing.assert_array_equal(sent[1], [2.0, 6.0, 10.0])
    # A released object is gone (after the calls of the message that released it).
    send(conn, ([], [(_add, [(ref(10),), (ref(11),)], {}, None)]))
    failure = receive(conn, 10.0)
    assert isinstance(failure, service_module._Failure)
    assert isinstance(failure.error, KeyError)
    # An error in a call comes back with its type and the worker's traceback; the service goes on.
    send(conn, ([], [(_fail, [(ref(11),), (ref(11),)], {}, None)]))
    failure = receive(conn, 10.0)
    assert isinstance(failure.error, ValueError)
    assert "bad block on the worker" in failure.trace
    send(conn, ("stop", [21]))
    thread.join(30)
    conn.close()
    if region is not None:
        region.close()
    assert not thread.is_alive()
    np.testing.assert_array_equal(result["value"][21], [1.0, 2.0, 3.0])


def test_a_service_refuses_a_client_without_the_key(monkeypatch):
    worker, result, thread = _serve_in_thread(monkeypatch, b"k" * 32, [np.ones(3), np.ones(3)])
    with pytest.raises(AuthenticationError):
        connect(("127.0.0.1", worker.events[0]["port"]), authkey=b"wrong key")
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(result["error"], AuthenticationError)


def _data(n: int = 2400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.02] = np.nan
    y = ((np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) > 0) ^ (rng.random(n) < 0.1)).astype(int)
    return X, y


def test_block_service_errors_reach_the_client_and_handles_stay_with_their_blocks(two_workers):
    tasks = BlockTasks(two_workers, 30.0)
    futures = [two_workers.scatter(np.full(4, float(b))) for b in range(4)]
    placed = tasks.place(futures, [4, 4, 4, 4])
    with BlockService(tasks, placed) as service:
        doubled = service.submit(_add, service.training, service.training)
        got = service.run(_add, doubled, [None] * 4, scale=0.5)
        for b, values in enumerate(got):
            np.testing.assert_array_equal(values, np.full(4, float(b)))
        with pytest.raises(ValueError, match="bad block on the worker"):
            service.run(_fail, service.training)
        # Every service's reply to the failed pass was read: the next pass gets its own.
        again = service.run(_add, service.training, [None] * 4, scale=3.0)
        for b, values in enumerate(again):
            np.testing.assert_array_equal(values, np.full(4, 3.0 * b))
        with pytest.raises(ValueError, match="one argument per block"):
            service.run(_add, service.training[:3])
        (exported,) = service.finish(doubled)
    values = two_workers.gather(exported)
    for b, value in enumerate(values):
        np.testing.assert_array_equal(value, np.full(4, 2.0 * b))
    with pytest.raises(ServiceLost, match="closed"):
        service.run(_add, service.training)


_PARAMS = [
    {"n_estimators": 12, "preset": "paper"},
    {"n_estimators": 12, "cv": 2, "n_iter_no_change": 10},
    {"n_estimators": 6, "cv": 2, "max_leaf_nodes": 31, "n_iter_no_change": None},
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("params", _PARAMS, ids=["paper", "robust", "robust-31-leaves"])
def test_both_transports_fit_the_same_model_bit_for_bit(two_workers, params):
    X, y = _data()
    dX, dy = da.from_array(X, chunks=700), da.from_array(y, chunks=700)
    models = [
        DaskVIBoostClassifier(
            **params, random_state=0, client=two_workers, block_size=600, transport=transport
        ).fit(dX, dy)
        for transport in ("direct", "scheduler")
    ]
    direct, scheduler = models
    assert direct.estimators_ == scheduler.estimators_
    np.testing.assert_array_equal(direct.alphas_, scheduler.alphas_)
    np.testing.assert_array_equal(direct.decision_function(X), scheduler.decision_function(X))
    for name in ("clean_proba_", "mislabel_proba_", "true_class_proba_"):
        np.testing.assert_array_equal(
            getattr(direct, name).compute(), getattr(scheduler, name).compute(), err_msg=name
        )
    assert direct.noise_rate_ == scheduler.noise_rate_


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_failed_connection_warns_and_fits_through_the_scheduler(two_workers, monkeypatch):
    """The services that started are told to stop (else the scheduler's tasks would wait
    behind them), and the fit runs again through the scheduler: the same model."""
    X, y = _data(2000, seed=1)
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    params = {"n_estimators": 10, "cv": 2, "random_state": 0, "block_size": 500}
    want = DaskVIBoostClassifier(**params, client=two_workers, transport="scheduler").fit(dX, dy)
    connect_published = BlockService._connect_published
    calls = []

    def refused(self):
        connect_published(self)  # connect to those that started, then fail
        calls.append(1)
        if len(calls) > 1:
            raise ServiceLost("refused by a firewall")

    monkeypatch.setattr(BlockService, "_connect_published", refused)
    model = DaskVIBoostClassifier(**params, client=two_workers, timeout=60)
    with pytest.warns(RuntimeWarning, match="refused by a firewall.*through the scheduler"):
        model.fit(dX, dy)
    assert model.estimators_ == want.estimators_
    np.testing.assert_array_equal(model.decision_function(X), want.decision_function(X))


def test_auto_transport_is_direct_while_the_states_fit_half_the_memory_limit():
    homes = [("tcp://w1", 0), ("tcp://w2", 0), ("tcp://w1", 0), ("tcp://w2", 0)]
    sizes = (1000, 1000, 1000, 1000)

    def tasks_with(limit: int) -> SimpleNamespace:
        info = {"workers": {w: {"memory_limit": limit} for w in ("tcp://w1", "tcp://w2")}}
        return SimpleNamespace(homes=homes, client=SimpleNamespace(scheduler_info=lambda **_: info))

    model = DaskVIBoostClassifier()
    # 2,000 rows a worker x (2 x 10 + 16 + 2 x 96) bytes = 456,000 bytes.
    assert model._direct_transport(tasks_with(912_000), sizes, 10, 2)
    assert not model._direct_transport(tasks_with(911_000), sizes, 10, 2)
    assert model._direct_transport(tasks_with(0), sizes, 10, 2)  # no limit
    model.set_params(transport="scheduler")
    assert not model._direct_transport(tasks_with(0), sizes, 10, 2)
    model.set_params(transport="direct")
    assert model._direct_transport(tasks_with(1), sizes, 10, 2)
    assert not model._direct_transport(SimpleNamespace(homes=None), sizes, 10, 2)
    # Workers reached over TLS: never direct (the sockets would not be encrypted).
    homes[:] = [("tls://w1", 0), ("tls://w2", 0), ("tls://w1", 0), ("tls://w2", 0)]
    with pytest.raises(ValueError, match="plain TCP.*tls://"):
        model._direct_transport(tasks_with(0), sizes, 10, 2)
    model.set_params(transport="auto")
    assert not model._direct_transport(tasks_with(0), sizes, 10, 2)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_worker_with_two_threads_runs_two_services_on_their_own_blocks():
    """Each thread of a worker gets a service of its own blocks (matched by the index each
    publishes, not by the worker's address): the same model as through the scheduler."""
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        X, y = _data(1600, seed=2)
        dX, dy = da.from_array(X, chunks=400), da.from_array(y, chunks=400)
        params = {"n_estimators": 8, "cv": 2, "random_state": 0, "block_size": 400}
        models = [
            DaskVIBoostClassifier(**params, client=client, transport=transport).fit(dX, dy)
            for transport in ("direct", "scheduler")
        ]
        assert models[0].transport_ == "direct"
        assert models[0].estimators_ == models[1].estimators_
        np.testing.assert_array_equal(
            models[0].decision_function(X), models[1].decision_function(X)
        )


def test_a_service_looks_for_the_next_message_before_it_sleeps(monkeypatch):
    """_wait_for_message: a message already there, or sent while the service looks (giving
    the core away between looks), or after it has gone to sleep in poll, is found; with none,
    it gives up after the spin and the timeout, a bounded wait."""
    from multiprocessing import Pipe

    looks = []
    monkeypatch.setattr(service_module, "_yield_core", lambda: looks.append(1))
    wait_for = service_module._wait_for_message
    here, there = Pipe()
    there.send("now")
    assert wait_for(here, timeout=1.0, spin=0.5) and here.recv() == "now"
    assert not looks  # found at the first look

    sender = threading.Timer(0.05, there.send, args=("soon",))
    sender.start()
    start = time.perf_counter()
    assert wait_for(here, timeout=1.0, spin=5.0) and here.recv() == "soon"
    assert time.perf_counter() - start < 4.0 and looks  # while looking, yielding
    sender.join()

    looks.clear()
    sender = threading.Timer(0.2, there.send, args=("late",))
    sender.start()
    assert wait_for(here, timeout=10.0, spin=0.01) and here.recv() == "late"  # in poll
    sender.join()

    start = time.perf_counter()
    assert not wait_for(here, timeout=0.1, spin=0.05)
    elapsed = time.perf_counter() - start
    assert 0.14 <= elapsed < 5.0
    here.close()
    there.close()


def test_messages_carry_their_arrays_out_of_band_whole_and_writable():
    """_send_message / _receive_message: large and small arrays (contiguous or not, any
    dtype, empty), nested in tuples and dataclasses, arrive equal and writable; a buffer cut
    off by a closed connection, or late, raises instead of waiting."""
    here, there = socket.socketpair()
    a, b = Connection(here.detach()), Connection(there.detach())
    rng = np.random.default_rng(0)
    big = rng.normal(size=(20, 256, 3))
    message = (
        [big, big[:, ::2], np.arange(7), np.empty((0, 3))],
        {"x": rng.integers(0, 255, (1000, 20), dtype=np.uint8)},
        service_module._Failure(ValueError("v"), "trace"),
        "text",
    )
    sender = threading.Thread(target=service_module._send_message, args=(a, message))
    sender.start()  # (the arrays are larger than the socket's buffer)
    got = service_module._receive_message(b, timeout=10.0)
    sender.join(10)
    arrays, table, failure, text = got
    for sent, received in zip(message[0], arrays, strict=True):
        assert received.dtype == sent.dtype and received.shape == sent.shape
        np.testing.assert_array_equal(received, sent)
    assert arrays[0].flags.writeable and arrays[0].ctypes.data % 8 == 0
    arrays[0][0, 0, 0] = 1.0
    np.testing.assert_array_equal(table["x"], message[1]["x"])
    assert isinstance(failure.error, ValueError) and text == "text"
    # A frame that promises a buffer which never comes: late, then cut off.
    frame = b"".join(service_module._LENGTH.pack(n) for n in (0, 1, 0, 1000))
    a.send_bytes(frame + pickle.dumps(None, protocol=5))
    with pytest.raises(TimeoutError, match="no data"):
        service_module._receive_message(b, timeout=0.05)
    a.send_bytes(frame + pickle.dumps(None, protocol=5))
    a.close()
    with pytest.raises(EOFError, match="closed in the middle"):
        service_module._receive_message(b, timeout=1.0)
    b.close()
