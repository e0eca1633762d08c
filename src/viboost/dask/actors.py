"""The rounds on Dask Actors: the direct transport built on Dask's own mechanism.

:class:`~viboost.dask.service.BlockService` takes the scheduler out of the rounds with a
hand-written RPC layer (a long-lived task per worker thread, its own TCP sockets, an HMAC
handshake, pickle-5 framing, shared memory for the replies). :class:`ActorService` does the
same job with Dask Actors (``client.submit(cls, ..., actor=True)``): for the duration of the
rounds, one actor per worker thread of :meth:`~viboost.dask.engine.BlockTasks.place` (the
service's grouping) holds that thread's training blocks and whatever the rounds keep on them
(the boosters' states, the trees' partitions), and runs on them the same block functions
(:mod:`viboost.dask.blocks`) that the tasks would run.

A call on an actor is the worker's ``actor_execute`` handler, reached over Dask's own comms:
by default straight from the client to the actor's worker (``client.rpc(worker)``, the route
that Dask's :class:`distributed.Actor` handle takes when the client has
``direct_to_workers=True``), so nothing passes through the scheduler, and the comms are the
cluster's (TLS included), with Dask's serialization (pickle protocol 5, the arrays out of
band). With :attr:`ActorService.via_scheduler` the calls take the route of an Actor handle on a
client with the default ``direct_to_workers=None``: each call relayed by the scheduler's
``proxy`` handler (no task, but two more hops). The calls of a pass, one per actor, are sent
together and their replies gathered in one wait on the client's event loop, bounded by
``timeout``.

:class:`ActorService` has the interface of :class:`~viboost.dask.engine.BlockTasks` that the
rounds use, as :class:`~viboost.dask.service.BlockService` has (``submit``, ``run``,
``run_grouped``, ``scatter``, ``finish``, ``speculate``), and the same message format: what
``submit`` returns stays on the actor (a :class:`Handle`, freed when the client drops it);
``submit`` only queues its call, and the queue goes with the next call whose results the client
waits for, so a pass is one call per actor. The same functions run on the same blocks in the
same order and the client adds the results in block order: the fit is bit for bit the one
through the scheduler or the service.

Each actor runs its calls on a thread of its own (its method is a coroutine that hands the
calls to that thread), so two actors on a worker of two threads compute at once, as two
services do; a worker's one actor thread of Dask would run them in turn
(:attr:`ActorService.threaded` False: on the worker's event loop, which saves a hand-over
between threads each way but leaves the worker deaf to everything else while a pass
computes). While an actor lives
its worker keeps freed memory in its heap (:func:`~viboost._utils.memory.retained_heap`), as a
service does. An actor ends when the client releases it (:meth:`ActorService.close`), or with
the client.

Failures: an actor that does not start within ``timeout``, a call whose worker is gone or whose
actor is missing, a pass that does not answer within ``timeout``:
:class:`~viboost.dask.service.ServiceLost`, on which the estimator runs the fit again through the
scheduler, as for the service. An error raised by a block function comes back as itself, with the
worker's traceback.

Speed (``benchmarks/dask.py --setting trees``, 10^6 rows, 100 trees of 31 leaves, 2 workers on
a 2-core VM, alternating runs; ``docs/dask.md``): 1.31-1.40x the service's fit time (1.27x on
the event loop), about 3.6 ms more a pass over 1,324 passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import traceback
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from viboost._utils.memory import retained_heap
from viboost._utils.parallel import numba_threads
from viboost.dask.service import ServiceLost

__all__ = ["ActorService", "BlockActor", "Handle", "ServiceLost"]

#: The live actors of this process (a worker's), by name: where :func:`_take` finds what an
#: actor exported when the rounds ended.
_LIVE: weakref.WeakValueDictionary[str, BlockActor] = weakref.WeakValueDictionary()


@dataclass(frozen=True)
class _Ref:
    """In a message, an argument that is the actor's object ``key``."""

    key: int


@dataclass(frozen=True)
class _Failure:
    """A reply: the error a call raised on the actor, with its traceback as text."""

    error: BaseException
    trace: str


class _Packed:
    """A message or a reply as one object for Dask's serialization: pickled whole (protocol
    5, the arrays out of band), where a bare list would be serialized element by element."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple:
        return (_Packed, (self.value,))


class Handle:
    """A reference to an object held by one actor; the object is freed on the actor when the
    last reference to the handle is dropped here."""

    __slots__ = ("__weakref__", "key", "service")

    def __init__(self, service: int, key: int) -> None:
        self.service = service
        self.key = key

    def __repr__(self) -> str:
        return f"Handle(actor={self.service}, key={self.key})"


def _run_calls(calls: list, objects: dict[int, Any]) -> list:
    """Run a message's calls in order on the actor's ``objects``; the results to send back.
    A call is ``(func, per-block arguments, shared keyword arguments, result keys or None)``:
    ``func(*arguments, **shared)`` for each block's arguments (``_Ref`` s resolved), stored
    under the result keys or, for None, sent back."""

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


def _end(pool: ThreadPoolExecutor | None, heap: contextlib.ExitStack) -> None:
    """An actor's end: its thread goes, and the heap's setting is put back (the last holder)."""
    if pool is not None:
        pool.shutdown(wait=False)
    heap.close()


class BlockActor:
    """The worker side: a Dask actor that holds ``blocks`` (as objects ``keys``) and runs the
    client's messages on them, on a thread of its own.

    Parameters
    ----------
    name : str
        The actor's name, unique to the fit (where :func:`_take` finds its exports).
    keys : sequence of int
        The blocks' keys in the messages.
    *blocks
        The blocks (dask resolves the futures into the objects on this worker).
    threaded : bool, default=True
        Whether the calls run on the actor's own thread; False: on the worker's event loop
        (no hand-over between threads, but the worker answers nothing else meanwhile).
    """

    def __init__(self, name: str, keys: Sequence[int], *blocks: Any, threaded: bool = True) -> None:
        self.name = name
        self.objects: dict[int, Any] = dict(zip(keys, blocks, strict=True))
        self.exported: dict[int, Any] = {}
        pool = ThreadPoolExecutor(1, thread_name_prefix="viboost-actor") if threaded else None
        heap = contextlib.ExitStack()
        # The passes reuse the same temporaries: keep freed memory in the worker's heap meanwhile
        # (viboost._utils.memory: a nanny's worker would fault each pass's arrays in anew).
        heap.enter_context(retained_heap())
        self._pool = pool
        weakref.finalize(self, _end, pool, heap)
        _LIVE[name] = self

    async def run(self, message: _Packed) -> _Packed:
        """``(released keys, calls)``: the calls' replies (:func:`_run_calls`) or a
        :class:`_Failure`, computed on the actor's thread; the released objects are dropped
        after the calls (the client dropped them after queueing any call that uses them)."""
        if self._pool is None:
            return _Packed(self._run(message.value))
        loop = asyncio.get_running_loop()
        return _Packed(await loop.run_in_executor(self._pool, self._run, message.value))

    def _run(self, message: tuple[list[int], list]) -> list | _Failure:
        released, calls = message
        try:
            replies: list | _Failure = _run_calls(calls, self.objects)
        except Exception as error:  # noqa: BLE001 - sent to the client, which raises it
            replies = _Failure(error, traceback.format_exc())
        for k in released:
            self.objects.pop(k, None)
        return replies

    async def export(self, keys: _Packed) -> _Packed:
        """End of the rounds: keep the objects ``keys`` for :func:`_take`, drop the rest."""
        if self._pool is None:
            self._export(keys.value)
        else:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._pool, self._export, keys.value)
        return _Packed(None)

    def _export(self, keys: list[int]) -> None:
        self.exported = {k: self.objects[k] for k in keys}
        self.objects.clear()


def _take(name: str, key: int) -> Any:
    """One object that the actor ``name`` of this worker exported (a task on its worker)."""
    actor = _LIVE.get(name)
    if actor is None or key not in actor.exported:
        raise RuntimeError(
            f"DaskVIBoostClassifier: the actor {name!r} that held this result is gone (its "
            "worker was lost); fit again."
        )
    return actor.exported[key]


class ActorService:
    """The client side: one Dask actor per worker thread of the placed blocks, and the
    interface of :class:`~viboost.dask.engine.BlockTasks` that the rounds use (that of
    :class:`~viboost.dask.service.BlockService`).

    Parameters
    ----------
    tasks : BlockTasks
        The scheduler's tasks, after :meth:`~viboost.dask.engine.BlockTasks.place`.
    training : list of futures
        The placed training blocks.

    Attributes
    ----------
    training : list of Handle
        The training blocks, as the actors hold them.
    """

    #: The best-ranked nodes a trip splits (``TreeGrowth``'s ``speculate``): a trip costs
    #: about what a service's does, so :class:`~viboost.dask.service.BlockService`'s choice.
    speculate = 4
    #: False: each call goes from the client straight to the actor's worker
    #: (``client.rpc(worker)``); True: the route of a :class:`distributed.Actor` handle,
    #: relayed by the scheduler unless the client has ``direct_to_workers=True``.
    via_scheduler = False
    #: Whether each actor runs its calls on a thread of its own (:class:`BlockActor`).
    threaded = True

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
        self._closed = False
        self._workers = [home[0] for home in homes]
        prefix = f"viboost-actor-{secrets.token_hex(8)}"
        self._names = [f"{prefix}-{s}" for s in range(len(self._members))]
        self.training = [self._new_handle(self._service_of[b]) for b in range(len(training))]
        client = tasks.client
        self._futures = [
            client.submit(
                BlockActor, self._names[s], [self.training[b].key for b in members],
                *[training[b] for b in members],
                threaded=self.threaded, actor=True, workers=[home[0]],
                allow_other_workers=False, pure=False,
            )
            for s, (home, members) in enumerate(homes.items())
        ]  # fmt: skip
        self._keys = [future.key for future in self._futures]
        self._rpcs: list = []
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        """Wait for every actor (within ``timeout``) and open the routes of their calls."""
        from distributed import wait
        from distributed.actor import ProxyRPC

        client = self.tasks.client
        try:
            with client.as_current():
                wait(self._futures, timeout=self.timeout)
        except TimeoutError as error:
            raise ServiceLost(
                f"the workers' actors did not start within timeout={self.timeout:g} s"
            ) from error
        except Exception as error:  # noqa: BLE001 - cancelled (lost blocks), ...
            raise ServiceLost(f"an actor did not start: {error}") from error
        failed = [f for f in self._futures if f.status != "finished"]
        if failed:
            raise ServiceLost(f"an actor did not start: {failed[0]!r}")
        if self.via_scheduler and not client.direct_to_workers:
            self._rpcs = [ProxyRPC(client.scheduler, worker) for worker in self._workers]
        else:
            self._rpcs = [client.rpc(worker) for worker in self._workers]

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
                raise ValueError(f"{arg!r} lives on another actor than its block")
            return _Ref(arg.key)
        return arg

    def submit(self, func: Callable[..., Any], *per_block: Sequence[Any], **shared: Any) -> list:
        """``func(*args_of_block_b, **shared)`` for every block ``b``, kept on the actors
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
        """Send every actor its queue (and the keys released since) and wait for the replies,
        all within ``timeout``; a block function's error is raised here."""
        if self._closed:
            raise ServiceLost("the actors are closed")
        messages = []
        for s in range(len(self._members)):
            messages.append((self._released[s], self._queues[s]))
            self._released[s], self._queues[s] = [], []
        replies = self._call_all("run", messages)
        for reply in replies:
            if isinstance(reply, _Failure):
                raise reply.error from RuntimeError(f"on the worker:\n{reply.trace}")
        return replies

    def _call_all(self, method: str, arguments: list) -> list:
        """``actor_s.method(arguments[s])`` on every actor at once; the results, each actor's
        within ``timeout`` in all."""
        try:
            return self.tasks.client.sync(
                self._gather, method, arguments, callback_timeout=self.timeout
            )
        except TimeoutError as error:
            raise ServiceLost(
                f"a worker's actor did not answer within timeout={self.timeout:g} s"
            ) from error

    async def _gather(self, method: str, arguments: list) -> list:
        return list(
            await asyncio.gather(*(self._call(s, method, arg) for s, arg in enumerate(arguments)))
        )

    async def _call(self, s: int, method: str, argument: Any) -> Any:
        """One actor's call, as :class:`distributed.Actor` makes it (the worker's
        ``actor_execute``); any failure of the call itself (not of a block function, which
        comes back as a :class:`_Failure`) is :class:`ServiceLost`."""
        from distributed.protocol import to_serialize

        try:
            response = await self._rpcs[s].actor_execute(
                function=method,
                actor=self._keys[s],
                args=[to_serialize(_Packed(argument))],
                kwargs={},
            )
        except Exception as error:  # noqa: BLE001 - comm closed, actor or worker gone, ...
            raise ServiceLost(f"the actor on {self._workers[s]} is gone: {error!r}") from error
        if response.get("status") != "OK":
            raise ServiceLost(
                f"the actor on {self._workers[s]} failed: {response.get('exception')!r}"
            )
        return response["result"].value

    def finish(self, *outputs: list[Handle]) -> list[list]:
        """Run what is queued, end the rounds and return ``outputs`` (lists of handles, one
        per block) as lists of dask futures on the actors' workers."""
        from distributed import wait

        if any(self._queues):
            self._flush()
        keys: list[list[int]] = [[] for _ in self._members]
        for output in outputs:
            for handle in output:
                keys[handle.service].append(handle.key)
        self._call_all("export", keys)
        client = self.tasks.client
        futures = [
            [
                client.submit(
                    _take,
                    self._names[handle.service],
                    handle.key,
                    workers=[self._workers[handle.service]],
                    allow_other_workers=True,
                    pure=False,
                )  # fmt: skip
                for handle in output
            ]
            for output in outputs
        ]
        # The actors hold the objects until their tasks have them: released only then (close).
        flat = [future for output in futures for future in output]
        try:
            with client.as_current():
                wait(flat, timeout=self.timeout)
        except TimeoutError as error:
            raise RuntimeError(
                f"DaskVIBoostClassifier: the fit's results did not leave the actors within "
                f"timeout={self.timeout:g} s."
            ) from error
        self.close()
        return futures

    def close(self) -> None:
        """Release the actors (each ends on its worker when the scheduler forgets it)."""
        if self._closed:
            return
        self._closed = True
        futures, self._futures = self._futures, []
        with contextlib.suppress(Exception):
            self.tasks.client.cancel(futures)

    def __enter__(self) -> ActorService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
