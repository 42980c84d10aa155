"""The asynchronous client: routing, causal sessions, retries and pipelining over grpc.aio.

Shape of a connection (all of it shared by ``fork``ed clients, see ``AsyncClient.fork``):

- one grpc.aio channel per server of the client's DC, found through ``ClusterInfo`` on the address
  the client was given (``topology.py``);
- per server, at most one long-lived pipeline: a connection to the server's native port
  (``native.py``; the gRPC ``Pipeline`` stream with ``native=False`` or a server without one).
  Operations issued concurrently (by one client or by its forks) are appended to the pipeline's
  outbox; once the current event-loop turn is over the pipeline sends what is queued (``_flush``,
  scheduled by the turn's first operation) as ``OperationBatch``es of a few operations each
  (``native.NATIVE_CHUNK``, ``GRPC_CHUNK``: small enough that client and server work at the same
  time, large enough to spread the cost of a message). Results come back in ``ResultBatch``es, out
  of order, and are matched to their callers by operation id. Unary RPCs remain available
  (``pipeline=False``) for comparison.

What is per client: the causal session (``operations.SessionState``). Each request carries the
session as it is when the request is issued, and each reply's session is merged into it when the
reply arrives. Operations of one client that overlap in time are concurrent in the causal sense;
operations awaited one after the other are causally ordered, which is what sessions guarantee.

Failures: a lost server or stream fails the operations in flight with a ``retry.Failure``; what
follows is the policy's decision (``okapikv.client.policy``: back off and try again on a fresh
stream until ``timeout_s`` has passed since the operation started, then ``Unavailable``; raise a
refusal at once), which this client carries out with coroutines. A server that accepts an
operation and never answers it is caught by the pipeline's deadline watchdog (or the unary call's
deadline): also ``Unavailable`` after ``timeout_s``.

Failover (``fallback``, the rules in ``failover.py``): the connections, shared by a client and its
forks (``okapikv.client.connections``), move as a whole. The first session whose operation finds
the DC unreachable for ``failover_after_s`` moves them (``_Connections.fail_over``) to the first
other DC that answers and can adopt that session; every connection change is a new
``generation``. Each session remembers the generation (and DC) it belongs to, and its next
operation on newer connections first has the new DC adopt it (``AsyncClient._adopt``): a session
whose writes the new DC still lacks gets ``FailoverTimeout`` after ``failover_wait_s``, at each
operation, until they arrive there.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio

from okapikv.client import bulk
from okapikv.client import operations as ops
from okapikv.client.connections import Connections
from okapikv.client.failover import Move, Moved
from okapikv.client.native import AsyncNativeCall, GrpcCall, Receiver, failure_of
from okapikv.client.operations import KeyLike, OperationKind, SessionState
from okapikv.client.policy import Policy
from okapikv.client.retry import (
    BROKEN,
    CHANNEL_OPTIONS,
    DEADLINE_EXCEEDED,
    Attempts,
    FailOver,
    Failure,
    Send,
    Wait,
)
from okapikv.client.topology import Topology
from okapikv.core.backoff import DEFAULT_BACKOFF, Backoff
from okapikv.core.messages import Session
from okapikv.core.protocols import is_scalar
from okapikv.errors import InvalidArgument, OkapiError, ProtocolMismatch, SnapshotTooOld
from okapikv.tls import ClientTls, open_aio_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire import packed
from okapikv.wire.packed import case_of

T = TypeVar("T")

DEFAULT_MAX_BATCH = 256
#: Batches a pipeline lets the server hold before it waits for one to be processed (see _Pipeline).
MAX_UNPROCESSED_BATCHES = 2
#: The longest a ready batch waits for that (a batch whose operations all park must not stall others).
UNPROCESSED_WAIT_S = 0.002
#: Only batches smaller than this wait: a batch this large already spreads its gRPC cost thin.
SMALL_BATCH = 8
#: At most this many messages per event-loop turn: a larger outbox makes larger batches.
MAX_MESSAGES_PER_TURN = 8


class Waiter(Protocol):
    """What a pipeline resolves an operation's result with: an ``asyncio.Future`` (a coroutine
    awaits it), or an object that takes the result at once (the RESP port's forwarded commands,
    ``okapikv.resp.connection``: no future, no callback scheduled, no extra turn of the event loop
    per command). ``set_result`` and ``set_exception`` run inside the pipeline's handling of a
    result batch, a deadline sweep or a failure, so they must not raise; each is called at most
    once per operation, and not after ``done()``."""

    def done(self) -> bool: ...

    def set_result(self, result: Any, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class _Pipeline:
    """One pipeline to one server: an outbox, a call that carries its batches (``AsyncNativeCall``
    or ``GrpcCall``, made by ``open_call`` with this pipeline as its receiver), and the waiters
    (``Waiter``: futures, mostly) of the operations in flight, keyed by id.

    Sending: the first operation queued in an event-loop turn schedules ``_flush`` at the end of
    that turn, which sends what is queued as batches of a few operations (``_take_batch``). Results:
    the call hands each ``ResultBatch`` to ``on_batch``, which resolves the waiters.

    A pipeline is single-use: when its call fails or ends, every operation in flight fails with a
    ``retry.Failure`` and the link opens a new pipeline for the next operation.

    Deadlines: rather than one event-loop timer per operation (each costs a heap push and pop, a
    noticeable share of a pipelined operation's client CPU), a single watchdog timer sweeps the
    operations in flight every ``tick_s`` and fails those past their deadline with ``TimeoutError``.
    An operation thus times out up to ``tick_s`` late; ``tick_s`` is a small fraction of the
    client's timeout.

    Self-clocking: a batch smaller than ``SMALL_BATCH`` waits while ``MAX_UNPROCESSED_BATCHES``
    batches are out that the server has not processed yet (it has processed a batch once any result
    of it or of a later batch is back: it handles batches in order); meanwhile operations gather in
    the outbox. Sending whatever is
    queued at once let many streams (one per partition) fall out of step: with 64 sessions over 2
    partitions the server saw 3.4 operations per batch instead of 32, and its gRPC cost per batch
    tripled its CPU per operation. Two in flight keep both ends busy (one batch is processed while
    the next is built). A batch waits at most ``UNPROCESSED_WAIT_S`` for room, so operations that
    park at the server (Cure, GentleRain) never hold the others back longer than that.
    """

    def __init__(self, open_call: Callable[[_Pipeline], AsyncNativeCall | GrpcCall], max_batch: int,
                 budget_bytes: int, tick_s: float) -> None:
        self._max_batch = max_batch
        self._budget_bytes = budget_bytes
        self._tick_s = tick_s
        self._loop = asyncio.get_running_loop()
        self._watchdog: asyncio.TimerHandle | None = None
        # id -> (waiter, deadline in loop time); insertion order is submission order
        self._inflight: dict[int, tuple[Waiter, float]] = {}
        # Operations wait serialized, each framed as an element of ``OperationBatch.operations``
        # (``OperationKind.operation``) or, on a ``packed`` call, encoded in the version 2 form
        # (``enqueue_packed``): a batch is their list, which the call frames (no batch message
        # built, no second serialization). Their ids are consecutive from _outbox_first_id.
        self._outbox: list[bytes] = []
        self._outbox_first_id = 0
        self._sizes: list[int] = []  # of the operations in the outbox, serialized
        self._outbox_bytes = 0
        self._flush_scheduled = False
        self._hold: asyncio.TimerHandle | None = None  # a small batch waiting for room (self-clocking)
        self._unprocessed: deque[int] = deque()  # first operation id of each batch sent, not processed
        self._ids = itertools.count(1)
        self.closed = False
        self.batches_sent = 0
        self.operations_sent = 0
        self._call = open_call(self)

    def submit(self, kind: OperationKind, request: ops.Request,
               deadline: float) -> tuple[int, asyncio.Future[Any]]:
        """Queue one operation (``enqueue``) and return its id and the future of its result."""
        future: asyncio.Future[Any] = self._loop.create_future()
        return self.enqueue(kind, request, deadline, future), future

    def enqueue(self, kind: OperationKind, request: ops.Request, deadline: float, waiter: Waiter) -> int:
        """Queue one operation, resolved through ``waiter``; it leaves with the others queued in
        this event-loop turn. Returns its id.

        Raises ``InvalidArgument`` for an operation too large for any message the servers accept:
        sent anyway, it would break the stream and fail every operation batched with it.
        """
        operation_id = next(self._ids)
        self._queue(operation_id, kind.operation(operation_id, request), deadline, waiter)
        return operation_id

    def enqueue_packed(self, tag: int, fields: tuple[Any, ...], deadline: float, waiter: Waiter) -> int:
        """``enqueue`` for a pipeline whose call is ``packed``: the operation built straight in
        the native port's version 2 form (``packed.operation``: ``tag``, the id, then ``fields``),
        not as protobuf carried over to it when its batch leaves."""
        operation_id = next(self._ids)
        self._queue(operation_id, packed.operation((tag, operation_id, *fields)), deadline, waiter)
        return operation_id

    @property
    def packed(self) -> bool:
        """Whether the call carries version 2 batches (``enqueue_packed`` may be used)."""
        return self._call.packed

    def _queue(self, operation_id: int, element: bytes, deadline: float, waiter: Waiter) -> None:
        size = len(element)
        if size > self._budget_bytes:
            raise InvalidArgument(f"a request of {size} bytes exceeds the cluster's message limit "
                                  f"({self._budget_bytes} bytes)")
        loop = self._loop
        self._inflight[operation_id] = (waiter, deadline)
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._tick_s, self._sweep)
        if not self._outbox:
            self._outbox_first_id = operation_id
        self._outbox.append(element)
        self._sizes.append(size)
        self._outbox_bytes += size
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)

    def _sweep(self) -> None:
        """Fail the operations past their deadline; run again while any operation is in flight."""
        now = self._loop.time()
        inflight = self._inflight
        expired = [operation_id for operation_id, (_, deadline) in inflight.items() if deadline <= now]
        for operation_id in expired:
            waiter = inflight.pop(operation_id)[0]
            if not waiter.done():
                waiter.set_exception(TimeoutError())
        self._watchdog = self._loop.call_later(self._tick_s, self._sweep) if inflight and not self.closed else None

    def forget(self, operation_id: int) -> None:
        """Stop waiting for an operation (its caller timed out or was cancelled)."""
        self._inflight.pop(operation_id, None)

    def _flush(self, force: bool = False) -> None:
        """Send what is queued, in batches; ``force``: the first even without room (see the class
        doc: a small batch waits at most ``UNPROCESSED_WAIT_S``)."""
        self._flush_scheduled = False
        if not self._call.ready:
            return  # on_ready flushes (the batch size depends on the transport the call ends up on)
        while self._outbox and not self.closed:
            if not force and len(self._unprocessed) >= MAX_UNPROCESSED_BATCHES and len(self._outbox) < SMALL_BATCH:
                if self._hold is None:
                    self._hold = self._loop.call_later(UNPROCESSED_WAIT_S, self._release)
                return
            force = False
            first_id = self._outbox_first_id
            batch = self._take_batch()
            self.batches_sent += 1
            self.operations_sent += len(batch)
            self._unprocessed.append(first_id)
            self._call.send(batch)

    def _release(self) -> None:
        self._hold = None
        self._flush(force=True)

    def _take_batch(self) -> list[bytes]:
        """The next batch (serialized ``OperationBatch`` elements): up to ``max_batch`` operations
        and, unless it is a single operation, at most the byte budget (the servers refuse larger
        messages)."""
        outbox = self._outbox
        limit = min(self._max_batch, max(self._call.chunk, -(-len(outbox) // MAX_MESSAGES_PER_TURN)))
        if self._outbox_bytes <= self._budget_bytes and len(outbox) <= limit:
            batch, self._outbox, self._outbox_bytes = outbox, [], 0
            self._sizes.clear()
            return batch
        sizes = self._sizes
        count = total = 0
        for size in sizes[:limit]:
            if count and total + size > self._budget_bytes:
                break
            count += 1
            total += size
        batch = outbox[:count]
        del outbox[:count]
        self._outbox_first_id += count
        del sizes[:count]
        self._outbox_bytes -= total
        return batch

    def on_ready(self) -> None:
        self._flush()

    def on_batch(self, results: Sequence[Any]) -> None:
        """Results from the server: resolve their waiters; a processed batch makes room."""
        inflight = self._inflight
        newest = 0
        for result in results:
            result_id = result.id
            if result_id > newest:
                newest = result_id
            entry = inflight.pop(result_id, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(result)
        unprocessed = self._unprocessed
        if unprocessed and unprocessed[0] <= newest:
            while unprocessed and unprocessed[0] <= newest:
                unprocessed.popleft()
            if self._hold is not None:
                self._hold.cancel()
                self._hold = None
            # At the end of the turn, as ``submit`` would: the sessions these results wake up queue
            # their next operations first, and leave in the same batch.
            if self._outbox and not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)

    def on_failure(self, failure: Failure) -> None:
        self._fail(failure)

    def _fail(self, failure: BaseException) -> None:
        """Mark the pipeline dead and fail everything in flight (the retry loop resubmits it)."""
        if not self.closed:
            self.closed = True
            self._call.cancel()
            for timer in (self._watchdog, self._hold):
                if timer is not None:
                    timer.cancel()
            self._watchdog = self._hold = None
        inflight, self._inflight = self._inflight, {}
        self._outbox.clear()
        self._sizes.clear()
        self._outbox_bytes = 0
        for waiter, _ in inflight.values():
            if not waiter.done():
                waiter.set_exception(failure)

    async def close(self) -> None:
        self._fail(OkapiError("the client was closed"))
        await self._call.close()


class _ServerLink:
    """The channel, unary stub and current pipeline to one server."""

    def __init__(self, address: str, max_batch: int, budget_bytes: int, tick_s: float,
                 tls: ClientTls | None = None, native: bool = False, timeout_s: float = 30.0) -> None:
        self.address = address
        self._tls = tls
        self._native = native
        self._timeout_s = timeout_s
        self._budget_bytes = budget_bytes
        self._tick_s = tick_s
        self.channel = open_aio_channel(address, tls, CHANNEL_OPTIONS)
        self.stub = pb_grpc.KeyValueStub(self.channel)  # type: ignore[no-untyped-call]
        self._max_batch = max_batch
        self._pipeline: _Pipeline | None = None
        self.batches_sent = 0
        self.operations_sent = 0

    def pipeline(self) -> _Pipeline:
        pipeline = self._pipeline
        if pipeline is None or pipeline.closed:
            if pipeline is not None:
                self.batches_sent += pipeline.batches_sent
                self.operations_sent += pipeline.operations_sent
            pipeline = self._pipeline = _Pipeline(self.open_call, self._max_batch, self._budget_bytes, self._tick_s)
        return pipeline

    def open_call(self, receiver: Receiver) -> AsyncNativeCall | GrpcCall:
        """A new call to this server carrying batches for ``receiver``: a native connection, or the
        gRPC ``Pipeline`` stream (``native=False``, or a server without a native port)."""
        if self._native:
            return AsyncNativeCall(self.stub, self.channel, self.address, self._tls, self._timeout_s, receiver)
        return GrpcCall(self.channel, receiver)

    def counters(self) -> tuple[int, int]:
        """(batches, operations) sent over Pipeline streams so far: their ratio is the batching gain."""
        pipeline = self._pipeline
        extra = (pipeline.batches_sent, pipeline.operations_sent) if pipeline is not None else (0, 0)
        return self.batches_sent + extra[0], self.operations_sent + extra[1]

    async def close(self) -> None:
        if self._pipeline is not None:
            await self._pipeline.close()
            self._pipeline = None
        await self.channel.close()


class _Connections(Connections[_ServerLink]):
    """The links an ``AsyncClient`` and its forks share (``okapikv.client.connections``)."""

    def __init__(self, policy: Policy, pipeline: bool, max_batch: int, tls: ClientTls | None = None,
                 native: bool = True) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        super().__init__(policy)
        self.use_pipeline = pipeline
        self.max_batch = max_batch
        self.tls = tls
        self.native = native
        # How often pipelines look for operations past their deadline: 5% of the timeout, so a
        # timeout fires at most 5% late, within [10 ms, 1 s].
        self.tick_s = min(max(policy.timeout_s / 20, 0.01), 1.0)
        self._lock = asyncio.Lock()

    async def connect(self) -> Topology:
        async with self._lock:
            if self.closed:
                raise OkapiError("the client was closed")
            if self.topology is not None:
                return self.topology
            address = self.policy.addresses[0]
            bootstrap = self._probe(address)
            try:
                info = await retry_async(
                    self.policy, "ClusterInfo", address,
                    lambda timeout_s: bootstrap.stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=timeout_s))
            finally:
                await bootstrap.close()
            topology = Topology.from_cluster_info(info, address)
            self.install(topology, self._open)
            return topology

    def _open(self, topology: Topology, address: str) -> _ServerLink:
        return _ServerLink(address, self.max_batch, topology.batch_budget_bytes, self.tick_s, self.tls,
                           self.native, self.policy.timeout_s)

    def _probe(self, address: str) -> _ServerLink:
        """A link for a few RPCs (ClusterInfo, AdoptSession), no pipeline."""
        return _ServerLink(address, self.max_batch, 0, self.tick_s, self.tls)

    async def fail_over(self, generation: int, state: SessionState, from_dc: int) -> pb.Session | None:
        """Move to the first other DC that answers and adopts ``state`` (a session of DC
        ``from_dc``): its adopted session. None when the connections moved since ``generation``
        already (another session moved them: the caller has the new DC adopt its session). Raises
        what the move raises (``failover.Move``: ``Unavailable`` when no other DC answers,
        ``FailoverTimeout`` when those that answer lack some of the session's writes after
        ``failover_wait_s``); the connections then stay."""
        async with self._lock:
            current = self.departing(generation)
            if current is None:
                return None
            loop = asyncio.get_running_loop()
            moved = await self._carry_out(self.policy.move(current, state, from_dc, loop.time()))
            self.move(moved.topology, self._open)
            return moved.session

    async def adopt(self, topology: Topology, state: SessionState, from_dc: int) -> pb.Session:
        """Have the DC of ``topology`` (where the links are) adopt ``state``, a session of DC ``from_dc``."""
        loop = asyncio.get_running_loop()
        return (await self._carry_out(self.policy.adoption(topology, state, from_dc, loop.time()))).session

    async def _carry_out(self, move: Move) -> Moved:
        """Do what ``move`` says until it is done: its RPCs over the links in use, or over links to
        the other servers it asks (``probe``), closed at the end."""
        loop = asyncio.get_running_loop()
        probes: dict[str, _ServerLink] = {}
        try:
            while True:
                action = move.next(loop.time())
                if isinstance(action, Moved | OkapiError):
                    break
                if isinstance(action, Wait):
                    await asyncio.sleep(action.delay_s)
                    continue
                stub = self.probe(action.address, probes, self._probe).stub
                try:
                    reply = await getattr(stub, action.method)(action.request, timeout=action.timeout_s)
                except grpc.aio.AioRpcError as error:
                    reply = failure_of(error)
                move.answer(reply, loop.time())
        finally:
            await asyncio.gather(*(probe.close() for probe in probes.values()))
        if isinstance(action, OkapiError):
            raise action
        return action

    async def close(self) -> None:
        if self.closed:
            return
        for link in self.shut():
            await link.close()


async def retry_async(policy: Policy, what: str, address: str, call: Callable[[float], Awaitable[T]]) -> T:
    """``call(timeout_s)``, one RPC to ``address`` (ClusterInfo, Stats), retried as the policy says."""
    loop = asyncio.get_running_loop()
    attempts = policy.attempts(what, (address,), started=loop.time(), fails_over=False)
    decision: Send | Wait | OkapiError | FailOver = Send(0, 0.0, policy.timeout_s)
    while isinstance(decision, Send):
        try:
            return await call(decision.timeout_s)
        except grpc.aio.AioRpcError as error:
            decision = attempts.judge(failure_of(error), loop.time())
        except OSError as error:
            decision = attempts.judge(Failure(BROKEN, str(error)), loop.time())
        if isinstance(decision, Wait):
            await asyncio.sleep(decision.delay_s)
            decision = attempts.next(loop.time())
    assert isinstance(decision, OkapiError), "an RPC does not fail over"
    raise decision


def _unwrap(result: Any, kind: OperationKind) -> Any:
    """The reply in ``result`` (a ``pb.Result`` or a ``packed`` result), or its error raised."""
    which, body = case_of(result)
    if which == kind.field:
        return body
    if which == "error":
        raise Failure(body.code, body.message)
    raise ProtocolMismatch(f"{kind.method} got a {which!r} result")


class AsyncClient:
    """An asyncio client of one DC of an okapikv cluster, with its own causal session.

    ``address`` is any server of the DC to use; the client learns the rest with ``ClusterInfo``
    (on ``connect()``, ``async with``, or the first operation). Every operation retries while its
    server is unreachable and raises ``okapikv.errors.Unavailable`` after ``timeout_s``.

    Keys and values are ``bytes`` (``str`` is accepted and encoded as UTF-8); values come back as
    ``bytes``, ``None`` meaning "no visible value".

    ``tls`` (``okapikv.tls.ClientTls``): connect over TLS, trusting its CA and presenting its
    certificate when it has one (clusters with ``[tls] client_auth = true`` demand one).

    ``native=False``: pipeline over the gRPC ``Pipeline`` stream even where a server has a native
    port (``native.py``; slower, kept for comparison and for networks that only let gRPC through).

    ``fallback``: servers of other DCs to move to when this DC stays unreachable for
    ``failover_after_s`` (the module docstring and ``failover.py``), as for the blocking ``Client``.
    """

    def __init__(self, address: str, *, timeout_s: float = 30.0, pipeline: bool = True,
                 max_batch: int = DEFAULT_MAX_BATCH, backoff: Backoff = DEFAULT_BACKOFF,
                 tls: ClientTls | None = None, native: bool = True, fallback: Sequence[str] = (),
                 failover_after_s: float = 2.0, failover_wait_s: float = 10.0, coordinator: str = "session") -> None:
        policy = Policy(address, fallback, timeout_s=timeout_s, backoff=backoff, failover_after_s=failover_after_s,
                        failover_wait_s=failover_wait_s, coordinator=coordinator, rng=random.Random())
        self._connections = _Connections(policy, pipeline, max_batch, tls, native)
        self._owner = True
        #: which of the client's sessions this is (0: the first): chooses its own server
        self._ordinal = 0
        self._state: SessionState | None = None
        #: the connections' generation and the DC the session belongs to (see ``_adopt``)
        self._generation = 0
        self._dc = 0
        self._closed = False
        #: the server's timestamp of the last PUT, SWAP or DELETE this client completed (None before
        #: the first); with concurrent writes on one client, whichever completed last
        self.last_write_timestamp: int | None = None

    # ------------------------------------------------------------------ lifecycle

    async def connect(self) -> Topology:
        """Fetch the topology (retrying until ``timeout_s``); idempotent."""
        topology = await self._connections.connect()
        if self._state is None:
            self._state = SessionState(topology.num_dcs, scalar=is_scalar(topology.protocol))
            self._generation, self._dc = self._connections.generation, topology.dc
        return topology

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close this client. Closing the client that created the connections closes them for every
        fork too; closing a fork only retires its session."""
        self._closed = True
        if self._owner:
            await self._connections.close()

    def fork(self, session: SessionState | None = None) -> AsyncClient:
        """A new client with a fresh causal session over the same connections and streams.

        Benchmarks run thousands of independent sessions; giving each its own channels would cost
        sockets and defeat batching. Forks' operations share the per-server Pipeline streams, so
        concurrent operations of many sessions travel in the same batches. ``session``: continue
        that session instead of a fresh one (the RESP port sends the operations of a connection's
        session that belong to other partitions through a fork, ``okapikv.resp.operations``).
        """
        fork = AsyncClient.__new__(AsyncClient)
        fork._connections = self._connections
        fork._owner = False
        fork._closed = False
        fork.last_write_timestamp = None
        topology = self._connections.topology
        fork._state = session if session is not None else (
            SessionState(topology.num_dcs, scalar=is_scalar(topology.protocol)) if topology is not None else None)
        fork._generation = self._connections.generation
        fork._dc = topology.dc if topology is not None else 0
        fork._ordinal = self._connections.next_session()
        return fork

    # ------------------------------------------------------------------ introspection

    @property
    def topology(self) -> Topology:
        topology = self._connections.topology
        if topology is None:
            raise OkapiError("not connected yet: await connect() first")
        return topology

    @property
    def session(self) -> Session:
        """The causal session as it is now (stable vector and dependency time)."""
        if self._state is None:
            raise OkapiError("not connected yet: await connect() first")
        return self._state.current

    def pipeline_counters(self) -> tuple[int, int]:
        """(batches, operations) sent over Pipeline streams by this client and its forks."""
        batches = operations = 0
        for link in dict.fromkeys(self._connections.links):
            link_batches, link_operations = link.counters()
            batches += link_batches
            operations += link_operations
        return batches, operations

    async def stats(self, partition: int = 0) -> dict[str, Any]:
        """The counters of the server of ``partition`` in this DC (the server's JSON, parsed)."""
        await self._ready()
        link = self._connections.links[partition]
        reply = await retry_async(self._connections.policy, "Stats", link.address,
                                  lambda timeout_s: link.stub.Stats(pb.StatsRequest(), timeout=timeout_s))
        parsed: dict[str, Any] = json.loads(reply.json) if reply.json else {}
        return parsed

    # ------------------------------------------------------------------ operations

    async def get(self, key: KeyLike) -> bytes | None:
        """The value of ``key`` visible to the session, or None if it has none (missing or deleted)."""
        key_bytes = ops.to_bytes(key)
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.GET, ops.get_request(key_bytes, state.wire()), self._partition(key_bytes), False)
        state.merge(reply.session)
        return ops.decode_get(reply)

    async def put(self, key: KeyLike, value: KeyLike, ttl: float | None = None) -> bool:
        """Write ``value``; True if the key had a visible value before. ``ttl``: the key expires
        that many seconds after its server writes it (docs/protocol.md, "Expiry")."""
        key_bytes = ops.to_bytes(key)
        request_value = ops.to_bytes(value)
        ttl_ms = ops.ttl_to_ms(ttl)
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.PUT, ops.put_request(key_bytes, request_value, state.wire(), ttl_ms),
                                   self._partition(key_bytes), False)
        state.merge(reply.session)
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_found(reply)

    async def swap(self, key: KeyLike, value: KeyLike) -> bytes | None:
        """Write ``value`` and return the value it replaced (None if none), atomically at the key's server."""
        key_bytes = ops.to_bytes(key)
        request_value = ops.to_bytes(value)
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.SWAP, ops.swap_request(key_bytes, request_value, state.wire()),
                                   self._partition(key_bytes), False)
        state.merge(reply.session)
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_swap(reply)

    async def incr(self, key: KeyLike, by: int = 1) -> int:
        """Add ``by`` (negative: subtract) to the counter at ``key`` and return its value as the
        session now sees it, its own increments included (docs/protocol.md, "Counters"). A key
        holding an integer string counts on from it; any other string is ``InvalidArgument``.
        Never retried once it may have been applied (an increment applied twice counts twice)."""
        key_bytes = ops.to_bytes(key)
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.INCR, ops.incr_request(key_bytes, by, state.wire()),
                                   self._partition(key_bytes), False)
        state.merge(reply.session)
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_incr(reply)

    async def expire(self, key: KeyLike, *, ttl_ms: int = 0, at_ms: int = 0, persist: bool = False) -> ops.Expiry:
        """Read ``key``'s value and time to live and, with ``ttl_ms`` (from now, on the key's
        server), ``at_ms`` (Unix milliseconds) or ``persist``, write its value again with that
        expiry (none for ``persist``): Redis's TTL, EXPIRE, PERSIST and GETEX (docs/protocol.md,
        "Expiry"); a counter's expiry is part of its state (docs/protocol.md, "Expiry of counters")."""
        key_bytes = ops.to_bytes(key)
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.EXPIRE, ops.expire_request(key_bytes, ttl_ms, at_ms, persist, state.wire()),
                                   self._partition(key_bytes), False)
        state.merge(reply.session)
        return ops.decode_expire(reply)

    async def delete(self, key: KeyLike) -> bool:
        """Delete ``key`` (a replicated tombstone); True if it had a visible value."""
        key_bytes = ops.to_bytes(key)
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.DELETE, ops.delete_request(key_bytes, state.wire()),
                                   self._partition(key_bytes), False)
        state.merge(reply.session)
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_found(reply)

    def attempt(self, kind: OperationKind, key: bytes, value: bytes | None, now: float, waiter: Waiter) -> bool:
        """The first attempt of a GET, a PUT (``value``) or a DELETE, without a coroutine (the RESP
        port's forwarding, ``okapikv.resp.direct``): sent with the session over the pipeline of
        ``key``'s server with the others of this loop turn (in the native port's version 2 form
        where the pipeline speaks it, ``_Pipeline.enqueue_packed``), its result (``reply`` reads
        it) or failure handed to ``waiter``; False when the client is not ready for that (not
        connected, its connections moved, no pipelines): the operation's coroutine connects,
        adopts and retries. ``now``: the event loop's time, from which the attempt has the
        client's window."""
        state = self._ready_now()
        connections = self._connections
        if state is None or not connections.use_pipeline:
            return False
        pipeline = connections.links[self._partition(key)].pipeline()
        deadline = now + connections.policy.window_s
        if pipeline.packed:
            session = state.packed_session()
            fields = (key, session) if value is None else (key, value, session)
            pipeline.enqueue_packed(packed.tag_of[kind.field], fields, deadline, waiter)
        elif value is not None:
            pipeline.enqueue(kind, ops.put_request(key, value, state.wire()), deadline, waiter)
        else:
            build = ops.delete_request if kind is ops.DELETE else ops.get_request
            pipeline.enqueue(kind, build(key, state.wire()), deadline, waiter)
        return True

    def reply(self, kind: OperationKind, result: Any) -> Any:
        """The reply in the result of an ``attempt``, its session merged into the client's;
        ``retry.Failure`` for an error result."""
        reply = _unwrap(result, kind)
        assert self._state is not None
        self._state.merge(reply.session)
        return reply

    async def bulk_put(self, pairs: Iterable[tuple[KeyLike, KeyLike]], *, batch: int = bulk.BULK_BATCH,
                       window: int = bulk.BULK_WINDOW) -> int:
        """Write every ``(key, value)`` of ``pairs`` as a PUT, in large pipelined batches straight to
        each key's partition (``okapikv.client.bulk``: loading, not serving). The PUTs are
        concurrent writes of the client's session; once it returns, all of them are acknowledged (durable
        on durable servers) and visible to the session's reads. Returns how many were written.
        Raises ``BulkLoadFailed`` (with the count acknowledged) at the first refused PUT or broken
        connection, and ``InvalidArgument`` for something that is not a pair, before sending."""
        state = self._ready_now() or await self._ready()
        topology = self.topology
        grouped = bulk.group_by_partition(pairs, topology)
        links = self._connections.links
        timeout_s = self._connections.policy.timeout_s
        session = state.wire()
        loads = [bulk.PartitionLoad(items, session, topology.batch_budget_bytes, timeout_s, links[partition].open_call,
                                    batch=batch, window=window)
                 for partition, items in enumerate(grouped)]
        newest = await bulk.load_partitions(loads)
        for reply in newest:
            if reply is not None:
                state.merge(reply.session)
                if self.last_write_timestamp is None or reply.timestamp > self.last_write_timestamp:
                    self.last_write_timestamp = reply.timestamp
        return sum(len(items) for items in grouped)

    async def scan(self, start: KeyLike, end: KeyLike, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        """Every (key, value) with start <= key <= end in byte order, from one causally consistent
        snapshot of the whole DC; at most ``limit`` pairs (the first ones) if given. Paged as the
        blocking ``Client.scan`` pages it (all pages at one snapshot, started over at most
        ``operations.SCAN_RESTARTS`` times when a page finds it gone, then ``SnapshotTooOld``)."""
        pager = ops.ScanPager(ops.to_bytes(start), ops.to_bytes(end), limit)
        items: list[tuple[bytes, bytes]] = []
        if pager.done:
            return items
        coordinator = self._coordinator(None)
        while not pager.done:
            try:
                page = await self._scan_page(pager, coordinator)
            except SnapshotTooOld:
                if not pager.restart():
                    raise
                items = []
                continue
            items += page
        return items

    async def iter_scan(self, start: KeyLike, end: KeyLike,
                        limit: int | None = None) -> AsyncIterator[tuple[bytes, bytes]]:
        """``scan`` as an async iterator, one page held at a time (as ``Client.iter_scan``: a caller
        slower than the servers' ``snapshot_lease_ms`` between pages gets ``SnapshotTooOld``)."""
        pager = ops.ScanPager(ops.to_bytes(start), ops.to_bytes(end), limit, restarts=0)
        coordinator = self._coordinator(None)
        while not pager.done:
            for item in await self._scan_page(pager, coordinator):
                yield item

    async def _scan_page(self, pager: ops.ScanPager, coordinator: int) -> list[tuple[bytes, bytes]]:
        state = self._ready_now() or await self._ready()
        reply = await self._invoke(ops.SCAN, pager.request(state.wire()), coordinator, True)
        state.merge(reply.session)
        return pager.take(reply)

    async def read_tx(self, keys: Iterable[KeyLike]) -> list[bytes | None]:
        """The values of ``keys`` (None where absent) from one causally consistent snapshot, in order."""
        state = self._ready_now() or await self._ready()
        ordered, unique = ops.unique_keys(keys, self.topology.max_read_keys)
        if not unique:
            return []
        reply = await self._invoke(ops.READ_TX, ops.read_tx_request(unique, state.wire()),
                                   self._coordinator(unique[0]), True)
        state.merge(reply.session)
        return ops.decode_read_tx(reply, ordered, unique)

    # ------------------------------------------------------------------ plumbing

    def _ready_now(self) -> SessionState | None:
        """The session when the client is connected and open and the session belongs to the DC of
        the connections (no coroutine: it runs per operation)."""
        state = self._state
        connections = self._connections
        if (state is None or self._closed or connections.closed or connections.topology is None
                or self._generation != connections.generation):
            return None
        return state

    async def _ready(self) -> SessionState:
        if self._closed or self._connections.closed:
            raise OkapiError("the client was closed")
        state = self._state
        if state is None or self._connections.topology is None:
            await self.connect()
            state = self._state
            assert state is not None
        if self._generation != self._connections.generation:
            await self._adopt(state)
        return state

    async def _adopt(self, state: SessionState) -> None:
        """Have the DC the connections moved to (another session moved them) adopt the session:
        ``FailoverTimeout`` while that DC lacks some of its writes."""
        connections = self._connections
        generation, topology = connections.generation, connections.topology
        assert topology is not None
        self._moved(state, await connections.adopt(topology, state, self._dc), generation, topology.dc)

    def _moved(self, state: SessionState, adopted: pb.Session, generation: int, dc: int) -> None:
        state.replace(adopted)
        self._generation, self._dc = generation, dc

    def _partition(self, key: bytes) -> int:
        topology = self._connections.topology
        assert topology is not None
        return topology.partition_of(key)

    def _coordinator(self, first_key: bytes | None) -> int:
        """The partition whose server coordinates the session's RO-TX (``first_key``) or SCAN
        (``Policy.read_coordinator``: by default the session's own server)."""
        connections = self._connections
        assert connections.topology is not None
        return connections.policy.read_coordinator(connections.topology, self._ordinal, first_key)

    async def _fail_over(self, generation: int) -> None:
        """The DC of ``generation`` did not answer for ``failover_after_s``: move the connections
        (``_Connections.fail_over``) unless they moved since, and have their DC adopt the session."""
        connections = self._connections
        state = self._state
        assert state is not None
        if generation == self._generation:
            adopted = await connections.fail_over(generation, state, self._dc)
            if adopted is not None:
                assert connections.topology is not None
                self._moved(state, adopted, connections.generation, connections.topology.dc)
                return
        if self._generation != connections.generation:
            await self._adopt(state)

    async def _invoke(self, kind: OperationKind, request: Any, start: int, rotate: bool) -> Any:
        """Send one operation to ``links[start]`` and, after a failure, do what the policy says
        (``retry.Attempts``: send again after a backoff, to the next server if ``rotate``: any
        server of the DC can coordinate RO-TX and SCAN; fail over; raise).

        The first attempt asks the policy nothing but how long it may take (``Policy.window_s``),
        and the decisions are made only after a failure: this runs once per operation, and an
        operation of a busy benchmark should cost the client as little as possible (one await).
        """
        connections = self._connections
        links = connections.links
        loop = asyncio.get_running_loop()
        started = loop.time()
        remaining = connections.policy.window_s
        deadline = started + remaining
        link = links[start]
        generation = connections.generation
        attempts: Attempts | None = None
        while True:
            try:
                if connections.use_pipeline:
                    # One attempt over the link's pipeline, failed with TimeoutError after
                    # ``deadline`` (loop time) by the pipeline's watchdog.
                    pipeline = link.pipeline()
                    operation_id, future = pipeline.submit(kind, request, deadline)
                    try:
                        result = await future
                    except BaseException:
                        pipeline.forget(operation_id)  # answered or expired operations are gone already
                        raise
                    return _unwrap(result, kind)
                return await kind.unary(link.stub, request, remaining)
            except grpc.aio.AioRpcError as error:
                failure = failure_of(error)
            except Failure as error:
                failure = error
            except TimeoutError:
                failure = Failure(DEADLINE_EXCEEDED, "no reply before the deadline")
            except OSError as error:
                failure = Failure(BROKEN, str(error))
            if attempts is None:
                attempts = connections.policy.attempts(kind.method, [each.address for each in links],
                                                       started=started, start=start, rotate=rotate,
                                                       writes=kind.writes, once=kind.once)
            decision = attempts.judge(failure, loop.time())
            if isinstance(decision, Wait):
                await asyncio.sleep(decision.delay_s)
                decision = attempts.next(loop.time())
            if isinstance(decision, FailOver):
                await self._fail_over(generation)
                assert self._state is not None
                request = kind.with_session(request, self._state.message())
                links, generation = connections.links, connections.generation
                decision = attempts.moved(loop.time(), [each.address for each in links])
            if isinstance(decision, OkapiError):
                raise decision
            link, deadline, remaining = links[decision.server], decision.deadline, decision.timeout_s


__all__ = ["AsyncClient", "DEFAULT_MAX_BATCH", "Waiter"]
