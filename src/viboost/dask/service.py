"""Direct connections to the workers: a long-lived task per worker thread that serves the rounds.

A pass over the blocks through the scheduler (:class:`~viboost.dask.engine.BlockTasks`) costs a
trip through it, tens of milliseconds on a LocalCluster and more across a network, and a
31-leaf tree needs a dozen passes. This module takes the scheduler out of the rounds, as
LightGBM's and XGBoost's Dask interfaces do: for the duration of the boosting rounds one task
per worker thread (the threads of :meth:`~viboost.dask.engine.BlockTasks.place`) runs
:func:`serve`, which holds that thread's training blocks and opens a TCP socket on the worker's
host; the client connects to it directly (as it does to the workers for their results) and
sends it the same block functions that the tasks would run (:mod:`viboost.dask.blocks`).

:class:`BlockService` has the interface of :class:`~viboost.dask.engine.BlockTasks` that the
rounds use (``submit``, ``run``, ``run_grouped``, ``scatter``), so
:class:`~viboost.dask.engine.BlockRows` runs unchanged on either, and the fit is bit for bit
the same: the same functions run on the same blocks in the same order, and the client adds the
results in block order. What ``submit`` returns stays on the service (a :class:`Handle`, freed
when the client drops it); ``submit`` only queues its call, and the queue goes with the next
call whose results the client waits for, so a pass is one message per service each way.

The wire is :mod:`multiprocessing.connection` after a mutual HMAC challenge with a key that
only the client and the tasks know (it travels with the tasks' arguments), so nothing else can
send the service code to run. A message is a pickle (protocol 5) whose large buffers, the
histograms, travel out of band after it: written from the arrays themselves and read straight
into new ones (:func:`_send_message`, :func:`_receive_message`), where a whole pickle would
copy each of them four times on the way. A service whose client shares its host puts its
replies' buffers in a shared region instead (:mod:`viboost.dask.shared`, offered when the
client connects), and the socket carries only the pickle. After each reply a service looks
for the next message for two milliseconds before it sleeps (the client's send then need not wake
it). Every wait is bounded: the service ends when the client sends nothing for ``timeout``
seconds, and the client raises :class:`ServiceLost` when a service does not answer in time or
its connection breaks (a worker died); the estimator then runs the fit again through the
scheduler, which recomputes lost blocks (:meth:`viboost.dask.DaskVIBoostClassifier.fit`).
"""

from __future__ import annotations

import itertools
import os
import pickle
import secrets
import select
import socket
import struct
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from multiprocessing.connection import wait as wait_for_any
from typing import Any

import numpy as np

from viboost._utils.memory import retained_heap
from viboost._utils.parallel import numba_threads
from viboost.dask.shared import RegionReader, RegionWriter

__all__ = ["BlockService", "Handle", "ServiceLost", "serve"]

#: Seconds between two looks for the services' addresses among the workers' events.
_POLL_INTERVAL = 0.01
#: At most this many seconds a service waits for the client to connect (it connects as soon
#: as it sees the address; a service that waits longer was abandoned) ...
_ACCEPT_TIMEOUT = 60.0
#: ... and the client, closing, looks this long for services that started but had not yet
#: published their addresses, to tell them to stop (else they would hold their threads).
_CLOSE_GRACE = 5.0
#: After each reply a service looks for the next message this long before it sleeps in poll
#: (:func:`_wait_for_message`). Between two passes the client reads the replies and chooses the
#: next splits, about a millisecond; a service asleep in poll is woken by the client's send, and
#: on the 2-core AMD EPYC VM that send took 0.34-0.47 ms on average (the 90th percentile 0.8-1.5)
#: against 0.14-0.19 ms to a service still looking. 100 31-leaf trees on 10^6 rows, 2 workers
#: (2026-11-28, three alternating pairs): passes of 6.6-7.6 ms against 8.0-8.3 on average, fits
#: of 13.5-15.6 s against 16.0-17.1 s (docs/dask_history.md).
_SPIN_SECONDS = 0.002
#: Gives the core to another runnable thread (``os.sched_yield`` where the system has it).
_yield_core = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class ServiceLost(RuntimeError):
    """A service did not start, broke its connection or did not answer within the timeout."""


@dataclass(frozen=True)
class _Ref:
    """On the wire, an argument that is the service's object ``key``."""

    key: int


@dataclass(frozen=True)
class _Failure:
    """On the wire, the error a call raised on the service, with its traceback as text."""

    error: BaseException
    trace: str


class Handle:
    """A reference to an object held by one service; the object is freed on the service when
    the last reference to the handle is dropped here."""

    __slots__ = ("__weakref__", "key", "service")

    def __init__(self, service: int, key: int) -> None:
        self.service = service
        self.key = key

    def __repr__(self) -> str:
        return f"Handle(service={self.service}, key={self.key})"


def _host(address: str) -> str:
    """The host of a worker's address; a worker in the client's process (``inproc://``) is
    reached on the loopback interface."""
    from distributed.comm import get_address_host, parse_address

    scheme, _ = parse_address(address)
    return "127.0.0.1" if scheme == "inproc" else get_address_host(address)


def serve(
    topic: str, key: bytes, timeout: float, index: int, keys: Sequence[int], *blocks: Any
) -> dict:
    """The worker side: hold ``blocks`` (as objects ``keys``), publish a socket (with the
    service's ``index``) on the event ``topic``, accept the client's connection and run what
    it sends until it says stop; return the objects it asks for then, by key.

    A message is ``(released keys, calls)``; a call is ``(func, per-block arguments, shared
    keyword arguments, result keys or None)``: ``func(*arguments, **shared)`` for each block's
    arguments (``_Ref`` s resolved), stored under the result keys, or, for None, sent back. The
    reply is the list of the results sent back, or a ``_Failure``. The message ``("stop",
    keys)`` ends the service.
    """
    from distributed import get_worker

    worker = get_worker()
    objects: dict[int, Any] = dict(zip(keys, blocks, strict=True))
    with socket.create_server((_host(worker.address), 0)) as server:
        server.settimeout(min(timeout, _ACCEPT_TIMEOUT))
        worker.log_event(topic, {"index": index, "port": server.getsockname()[1]})
        try:
            sock, _ = server.accept()
        except TimeoutError:
            return {}
    # The passes reuse the same temporaries: keep freed memory in the worker's heap meanwhile
    # (viboost._utils.memory: a nanny's worker would fault each pass's arrays in anew).
    with _connection(sock) as conn, retained_heap():
        deliver_challenge(conn, key)
        answer_challenge(conn, key)
        region = _offer_region(conn, timeout)
        try:
            return _serve_messages(conn, timeout, objects, region)
        finally:
            if region is not None:
                region.close()


def _offer_region(conn: Connection, timeout: float) -> RegionWriter | None:
    """The service's side of the shared region's offer (:mod:`viboost.dask.shared`): make a
    region (none where ``/dev/shm`` is missing or full), send its path and token, and keep it
    if the client says it mapped it (:func:`_accept_region`) within ``timeout`` seconds."""
    try:
        region: RegionWriter | None = RegionWriter()
    except OSError:
        region = None
    accepted = False
    try:
        _send_message(conn, (None, None) if region is None else (region.path, region.token))
        accepted = conn.poll(timeout) and _receive_message(conn, timeout) is True
    finally:
        if region is not None and not accepted:
            region.close()
    return region if accepted else None


def _accept_region(conn: Connection, timeout: float) -> RegionReader | None:
    """The client's side of the offer (:func:`_offer_region`): map the service's region if it
    lies on this host, and say whether it did."""
    if not conn.poll(timeout):
        raise TimeoutError(f"no offer of a shared region within {timeout:g} s")
    path, token = _receive_message(conn, timeout)
    region = RegionReader.attach(path, token)
    try:
        _send_message(conn, region is not None)
    except BaseException:
        if region is not None:
            region.close()
        raise
    return region


def _serve_messages(
    conn: Connection, timeout: float, objects: dict[int, Any], region: RegionWriter | None
) -> dict:
    """:func:`serve`'s loop: run each message's calls and reply (the buffers through
    ``region``, if any), until the client says stop (then the objects it asks for) or sends
    nothing for ``timeout`` seconds (then nothing)."""
    while _wait_for_message(conn, timeout):
        message = _receive_message(conn, timeout)
        if message[0] == "stop":
            return {k: objects[k] for k in message[1]}
        released, calls = message
        replies: list | _Failure
        try:
            replies = _run_calls(calls, objects)
        except Exception as error:  # noqa: BLE001 - sent to the client, which raises it
            replies = _Failure(error, traceback.format_exc())
        # After the calls: the client dropped these after queueing any call that uses them.
        for k in released:
            objects.pop(k, None)
        _send_message(conn, replies, region)
    return {}


#: The frame before a message's pickle: whether its out-of-band buffers lie in the service's
#: shared region (1) or follow on the socket (0), how many there are, the length of the path of
#: a new region file (0: none), then the length in bytes of each buffer, each in this format;
#: then the path, then the pickle.
_LENGTH = struct.Struct("!Q")
#: At most this many buffers are filled by one read (within every system's IOV_MAX).
_MAX_VIEWS = 64


def _send_message(conn: Connection, message: Any, region: RegionWriter | None = None) -> None:
    """Send ``message``: one frame holding the number and sizes of its out-of-band buffers
    (pickle protocol 5: C-contiguous arrays, the histograms) and its pickle; the buffers are
    then written into ``region`` (:mod:`viboost.dask.shared`: a service's replies, when the
    client shares its host) or, without one or when they do not fit there, after the frame,
    each from where it lies (:func:`_receive_message` reads them)."""
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [buffer.raw() for buffer in buffers]
    path = None if region is None or not raws else region.put(raws)
    in_region = path is not None
    where = (path or "").encode()
    fields = [int(in_region), len(raws), len(where), *(raw.nbytes for raw in raws)]
    conn.send_bytes(b"".join(_LENGTH.pack(n) for n in fields) + where + body)
    if not in_region:
        for raw in raws:
            _write_all(conn.fileno(), raw)


def _write_all(fd: int, data: memoryview) -> None:
    """Write all of ``data`` to the blocking descriptor ``fd``."""
    view = data.cast("B")
    while view.nbytes:
        view = view[os.write(fd, view) :]


def _receive_message(conn: Connection, timeout: float, region: RegionReader | None = None) -> Any:
    """The next message (:func:`_send_message`); each out-of-band buffer is read into an array
    of its own, which the message's arrays then use: copied out of ``region`` if the sender put
    them there, else read from the socket. A buffer that does not arrive within ``timeout``
    seconds raises TimeoutError; a connection closed in the middle of one, EOFError; buffers
    in a region that the receiver does not have, ValueError."""
    frame = conn.recv_bytes()
    step = _LENGTH.size
    in_region, n_buffers, path_length = (_LENGTH.unpack_from(frame, step * k)[0] for k in range(3))
    sizes = [_LENGTH.unpack_from(frame, step * (3 + k))[0] for k in range(n_buffers)]
    at = step * (3 + n_buffers)
    path = bytes(frame[at : at + path_length]).decode()
    body = memoryview(frame)[at + path_length :]
    if in_region:
        if region is None:
            raise ValueError("a message's buffers are in a shared region that is not mapped here")
        buffers = region.take(sizes, path)
    else:
        buffers = [np.empty(size, dtype=np.uint8) for size in sizes]
        views = [buffer.data for buffer in buffers if buffer.size]  # memoryviews
        _read_into(conn.fileno(), views, timeout)
    return pickle.loads(body, buffers=buffers)


def _read_into(fd: int, views: list[memoryview], timeout: float) -> None:
    """Fill ``views``, in order, from the descriptor ``fd`` (as much as has arrived in one
    read), waiting at most ``timeout`` seconds for each read."""
    while views:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise TimeoutError(f"no data within {timeout:g} s in the middle of a message")
        got = os.readv(fd, views[:_MAX_VIEWS])
        if got == 0:
            raise EOFError("the connection closed in the middle of a message")
        while got:
            first = views[0]
            if got < first.nbytes:
                views[0] = first[got:]
                break
            got -= first.nbytes
            views.pop(0)


def _wait_for_message(conn: Connection, timeout: float, spin: float = _SPIN_SECONDS) -> bool:
    """Whether a message is there to read within ``spin + timeout`` seconds: looked for
    without sleeping for ``spin`` seconds (giving the core to any other runnable thread
    between looks), then waited for in ``poll`` for at most ``timeout`` seconds."""
    deadline = time.perf_counter() + spin
    while time.perf_counter() < deadline:
        if conn.poll(0):
            return True
        _yield_core()
    return conn.poll(timeout)


def _connection(sock: socket.socket) -> Connection:
    """A connected socket as a blocking :class:`~multiprocessing.connection.Connection`,
    with Nagle's algorithm off: a message longer than 16 KiB goes out as two writes (its
    length, then the payload), and with Nagle the second would wait for the peer's delayed
    acknowledgement of the first (40 ms on Linux) in every exchange."""
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Connection(sock.detach())


def _run_calls(calls: list, objects: dict[int, Any]) -> list:
    """Run a message's calls in order on the service's ``objects``; the results to send back."""

    def resolve(arg: Any) -> Any:
        return objects[arg.key] if isinstance(arg, _Ref) else arg

    replies = []
    with numba_threads(1):
        for func, per_block, shared, outs in calls:
            results = [func(*map(resolve, args), **shared) for args in per_block]
            if outs is None:
                replies.append(results)
            else:
                objects.update(zip(outs, results, strict=True))
    return replies


class BlockService:
    """The client side: one connection per service (per worker thread of the placed blocks),
    and the interface of :class:`~viboost.dask.engine.BlockTasks` that the rounds use.

    Parameters
    ----------
    tasks : BlockTasks
        The scheduler's tasks, after :meth:`~viboost.dask.engine.BlockTasks.place`.
    training : list of futures
        The placed training blocks.

    Attributes
    ----------
    training : list of Handle
        The training blocks, as the services hold them.
    """

    #: A trip splits the 4 best-ranked nodes of each tree
    #: (:class:`~viboost.dask.engine.BlockRows`, ``TreeGrowth``'s ``speculate``; children of
    #: earlier speculative splits included, so a tree costs about a trip per level): a trip here
    #: costs about a millisecond of transfer and the client's work between passes, so splitting
    #: every node that may still split computed more histograms for nothing than it saved, while the
    #: best few are nearly always split. 100 31-leaf trees on 10^6 x 20 rows, 2 workers
    #: (2026-11-28): 2 / 3 / 4 / 6 / 8 nodes a trip took 15.9 / 12.5 / 11.3 / 10.8 / 10.7
    #: trips and 30.3 / 32.7 / 35.8 / 41.8 / 47.6 splits a tree (a tree needs about 29).
    speculate = 4

    def __init__(self, tasks: Any, training: list) -> None:
        if tasks.homes is None or len(tasks.homes) != len(training):
            raise ServiceLost("the blocks are not placed on worker threads")
        self.tasks = tasks
        self.timeout = tasks.timeout
        self._counter = itertools.count()
        homes: dict[tuple[str, int], list[int]] = {}
        for b, home in enumerate(tasks.homes):
            homes.setdefault(home, []).append(b)
        self._members = list(homes.values())
        self._service_of = [0] * len(training)
        for s, members in enumerate(self._members):
            for b in members:
                self._service_of[b] = s
        self._queues: list[list] = [[] for _ in self._members]
        self._released: list[list[int]] = [[] for _ in self._members]
        self._connections: list[Connection | None] = [None] * len(self._members)
        #: Per service, its shared region for the replies (None: they come by the socket).
        self._regions: list[RegionReader | None] = [None] * len(self._members)
        self._closed = False
        self._stopped = False
        topic = f"viboost-service-{secrets.token_hex(8)}"
        key = secrets.token_bytes(32)
        self.training = [self._new_handle(self._service_of[b]) for b in range(len(training))]
        client = tasks.client
        self._futures = [
            client.submit(
                serve, topic, key, self.timeout, s,
                [self.training[b].key for b in members], *[training[b] for b in members],
                workers=[home[0]], allow_other_workers=False, pure=False,
            )
            for s, (home, members) in enumerate(homes.items())
        ]  # fmt: skip
        self._workers = [home[0] for home in homes]
        self._topic, self._key = topic, key
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        """Connect to every service as its socket is published; all within ``timeout``."""
        deadline = time.monotonic() + self.timeout
        while not all(self._connections):
            self._connect_published()
            failed = [f for f in self._futures if f.status in ("error", "cancelled", "lost")]
            if failed:
                raise ServiceLost(f"a service task ended before it started: {failed[0]!r}")
            if time.monotonic() > deadline:
                raise ServiceLost(
                    f"the workers' services did not start within timeout={self.timeout:g} s"
                )
            time.sleep(_POLL_INTERVAL)

    def _connect_published(self) -> None:
        """Connect to the services that have published their sockets since the last look."""
        for _, event in self.tasks.client.get_events(self._topic):
            s = int(event["index"])
            if self._connections[s] is not None:
                continue
            address = (_host(self._workers[s]), int(event["port"]))
            try:
                conn = _connection(socket.create_connection(address, timeout=self.timeout))
                answer_challenge(conn, self._key)
                deliver_challenge(conn, self._key)
                self._regions[s] = _accept_region(conn, self.timeout)
            except (OSError, EOFError, AuthenticationError) as error:
                raise ServiceLost(
                    f"cannot connect to the service on {self._workers[s]}: {error!r}"
                ) from error
            self._connections[s] = conn

    # ------------------------------------------------------------------ handles
    def _new_handle(self, service: int) -> Handle:
        handle = Handle(service, next(self._counter))
        weakref.finalize(handle, self._release, service, handle.key)
        return handle

    def _release(self, service: int, key: int) -> None:
        if not self._closed:
            self._released[service].append(key)

    # ------------------------------------------------------------ block tasks
    def _queue(self, func: Callable[..., Any], per_block: Sequence[Sequence[Any]],
               shared: dict, store: bool) -> list[Handle] | None:  # fmt: skip
        """Queue ``func`` on every block (its arguments ``per_block``, one sequence per
        argument); new handles for its results when ``store``."""
        calls = list(zip(*per_block, strict=True))
        if len(calls) != len(self._service_of):
            raise ValueError("one argument per block is expected")
        handles = [self._new_handle(s) for s in self._service_of] if store else None
        for s, members in enumerate(self._members):
            args = [tuple(self._wire(arg, s) for arg in calls[b]) for b in members]
            outs = None if handles is None else [handles[b].key for b in members]
            self._queues[s].append((func, args, shared, outs))
        return handles

    @staticmethod
    def _wire(arg: Any, service: int) -> Any:
        if isinstance(arg, Handle):
            if arg.service != service:
                raise ValueError(f"{arg!r} lives on another service than its block")
            return _Ref(arg.key)
        return arg

    def submit(self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any) -> list:
        """``func(*args_of_block_b, **shared)`` for every block ``b``, kept on the services
        (handles); sent with the next :meth:`run`."""
        handles = self._queue(func, per_block, shared, store=True)
        assert handles is not None, "stored calls have handles"
        return handles

    def run(self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any) -> list:
        """``func(*args_of_block_b, **shared)`` for every block ``b`` (after every queued
        call); the results, in block order."""
        self._queue(func, per_block, shared, store=False)
        replies = self._flush()
        out: list = [None] * len(self._service_of)
        for members, reply in zip(self._members, replies, strict=True):
            for b, result in zip(members, reply[-1], strict=True):
                out[b] = result
        return out

    run_grouped = run

    def scatter(self, value: Any) -> Any:
        """A block's argument as it goes to the workers: by value, with the call."""
        return value

    def _flush(self) -> list[list]:
        """Send every service its queue (and the keys released since), and wait for the
        replies, each within ``timeout``."""
        if self._closed:
            raise ServiceLost("the services are closed")
        connections = self._connected()
        for s, conn in enumerate(connections):
            message = (self._released[s], self._queues[s])
            self._released[s], self._queues[s] = [], []
            self._send(conn, message)
        # Every reply is read before an error is raised: none is left for the next pass. They
        # are read as they come (the first while the other services still compute).
        replies: list = [None] * len(connections)
        waiting = {conn: s for s, conn in enumerate(connections)}
        while waiting:
            ready = wait_for_any(list(waiting), self.timeout)
            if not ready:
                raise ServiceLost(
                    f"a worker's service did not answer within timeout={self.timeout:g} s"
                )
            for answered in ready:
                assert isinstance(answered, Connection), "wait gives back what it waits on"
                s = waiting.pop(answered)
                replies[s] = self._receive(answered, self._regions[s])
        for reply in replies:
            if isinstance(reply, _Failure):
                raise reply.error from RuntimeError(f"on the worker:\n{reply.trace}")
        return replies

    def _connected(self) -> list[Connection]:
        """Every service's connection (all of them are connected once the constructor
        returns)."""
        connections = [conn for conn in self._connections if conn is not None]
        assert len(connections) == len(self._connections), "a service is not connected"
        return connections

    def _send(self, conn: Connection, message: Any) -> None:
        try:
            _send_message(conn, message)
        except OSError as error:
            raise ServiceLost(f"a worker's service is gone: {error}") from error

    def _receive(self, conn: Connection, region: RegionReader | None) -> Any:
        try:
            if not conn.poll(self.timeout):
                raise ServiceLost(
                    f"a worker's service did not answer within timeout={self.timeout:g} s"
                )
            return _receive_message(conn, self.timeout, region)
        except (OSError, EOFError) as error:
            raise ServiceLost(f"a worker's service is gone: {error}") from error

    def finish(self, *outputs: list[Handle]) -> list[list]:
        """Run what is queued, end the services and return ``outputs`` (lists of handles, one
        per block) as lists of dask futures on the workers."""
        if any(self._queues):
            self._flush()
        keys: list[list[int]] = [[] for _ in self._members]
        for output in outputs:
            for handle in output:
                keys[handle.service].append(handle.key)
        for s, conn in enumerate(self._connected()):
            self._send(conn, ("stop", keys[s]))
        self._stopped = True
        self.close()
        client = self.tasks.client
        return [
            [
                client.submit(_pick, self._futures[handle.service], handle.key, pure=False)
                for handle in output
            ]
            for output in outputs
        ]

    def close(self) -> None:
        """End the services, bounded: each connected one is told to stop, and those not yet
        connected are cancelled (or, if they published a socket meanwhile, connected to and
        told to stop), so that no service holds a worker thread for long."""
        self._closed = True
        if not self._stopped:
            self._stopped = True
            unconnected = [s for s, conn in enumerate(self._connections) if conn is None]
            if unconnected:
                self.tasks.client.cancel([self._futures[s] for s in unconnected])
                deadline = time.monotonic() + _CLOSE_GRACE
                while time.monotonic() < deadline:
                    try:
                        self._connect_published()
                    except ServiceLost:
                        pass
                    if all(self._connections[s] is not None for s in unconnected):
                        break
                    time.sleep(_POLL_INTERVAL)
            for conn in self._connections:
                if conn is not None:
                    try:
                        _send_message(conn, ("stop", []))
                    except OSError:
                        pass
        for conn in self._connections:
            if conn is not None:
                conn.close()
        for s, region in enumerate(self._regions):
            if region is not None:
                region.close()
                self._regions[s] = None

    def __enter__(self) -> BlockService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pick(exported: dict, key: int) -> Any:
    """One object of what a service returned when it stopped."""
    return exported[key]
