"""The synchronous client: the same protocol as ``AsyncClient`` over blocking calls.

One operation at a time (the stdin/stdout client, scripts, the course's YCSB driver) is what this
client is for, so it is built for the latency of one round trip: each server's operations travel
over one long-lived connection to its native port (``native.SyncNativeCall``: a blocking socket in
the caller's thread), or, with ``native=False`` or a server without one, over one long-lived gRPC
``Pipeline`` stream (``_SyncStream``), one message each way instead of one unary call each, which
on loopback costs about twice as much (numbers in ``_SyncStream``). The unary RPCs remain: for a
thread that finds the connection busy (another thread sharing the client), and with
``pipeline=False``. Why not run an ``AsyncClient`` on a background event loop: every call
would then cross two more threads. Concurrent callers should use ``AsyncClient`` (and ``fork()``
it per session).

Everything else (requests, session merging, routing) is shared with the async client through
``operations`` and ``topology``, and every decision after a failure (retry after a backoff, fail
over, raise) is the policy's (``okapikv.client.policy``): this client carries them out with blocking
calls and sleeps.

A ``Client`` may be shared by threads (gRPC channels are thread-safe), but its session is one causal
session: give each logical client its own ``Client`` or ``fork()``.

A client and its forks share their connections (``okapikv.client.connections``), as an
``AsyncClient`` and its forks do: with ``fallback``, the first session that finds the DC
unreachable for ``failover_after_s`` moves them to the first other DC that answers and has every
write that session depends on (``okapikv.client.failover``), or raises ``FailoverTimeout`` and
they stay; every other session is adopted by the new DC at its next operation.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from okapikv.client import bulk
from okapikv.client import operations as ops
from okapikv.client.connections import Connections
from okapikv.client.failover import Move, Moved
from okapikv.client.native import SyncNativeCall, failure_of
from okapikv.client.operations import KeyLike, OperationKind, SessionState
from okapikv.client.policy import Policy
from okapikv.client.retry import (
    BROKEN,
    CHANNEL_OPTIONS,
    Attempts,
    FailOver,
    Failure,
    Wait,
)
from okapikv.client.topology import Topology
from okapikv.core.backoff import DEFAULT_BACKOFF, Backoff
from okapikv.core.messages import Session
from okapikv.core.protocols import is_scalar
from okapikv.errors import OkapiError, ProtocolMismatch, SnapshotTooOld
from okapikv.tls import ClientTls, open_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.packed import case_of

T = TypeVar("T")


_END = object()  # ends a stream's request iterator


class _SyncStream:
    """One long-lived ``Pipeline`` call carrying one operation at a time.

    Why: on an open stream an operation is one message each way, where a unary call also opens and
    closes an HTTP/2 stream (headers, trailers, a completion queue per call). Measured on the 2-core
    VM against a do-nothing server: one-at-a-time round trips of 360-450 us as unary calls, 125-210 us
    over a stream; the client's CPU per operation fell from ~170 us to ~100 us.

    gRPC's blocking API consumes the request iterator on its own thread and has no deadline for
    reading the next response, so a reader thread moves results into a queue that the caller waits
    on with its timeout. A result whose id is not the caller's belongs to an operation that timed
    out earlier and is dropped. A failed stream is not reused: the next operation opens a new one.
    Whether a failed operation may have reached the server is known exactly: it did not if gRPC
    never took it from the request iterator (``Failure.sent``), as when a server was stopped
    between two operations, which ends its open streams.
    """

    def __init__(self, stub: pb_grpc.KeyValueStub) -> None:
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[pb.Result | Failure] = queue.SimpleQueue()
        self._taken = 0  # id of the last operation gRPC took from the request iterator
        self._ids = itertools.count(1)
        # ``failure`` is set, and requests enqueued, under this lock: an operation enqueued on a
        # stream that has not failed yet may be sent; one that finds it failed never is.
        self._lock = threading.Lock()
        self.failure: Failure | None = None
        self._call = stub.Pipeline(self._outgoing())
        threading.Thread(target=self._read, name="okapi-stream-reader", daemon=True).start()

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def _outgoing(self) -> Iterator[pb.OperationBatch]:
        while True:
            batch = self._requests.get()
            if batch is _END:
                return
            self._taken = batch.operations[0].id
            yield batch

    def _read(self) -> None:
        failure: Failure
        try:
            for batch in self._call:
                for result in batch.results:
                    self._results.put(result)
            failure = Failure("UNAVAILABLE", "the server closed the stream")
        except grpc.RpcError as error:
            failure = failure_of(error)
        except Exception as error:
            failure = Failure("UNAVAILABLE", f"stream read failed: {error!r}")
        self._fail(failure)

    def _fail(self, failure: Failure) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = failure
        self._results.put(failure)
        # gRPC's thread that takes requests blocks in ``_outgoing`` until something arrives; without
        # this, every failed stream (each server restart) would leave one such thread behind.
        self._requests.put(_END)

    def call(self, kind: OperationKind, request: ops.Request, timeout_s: float) -> Any:
        """Send one operation and wait for its result. Raises ``Failure`` when the stream has
        failed (``sent`` False if before it took the operation) or ``timeout_s`` passes."""
        operation_id = next(self._ids)
        batch = pb.OperationBatch.FromString(kind.operation(operation_id, request))
        with self._lock:
            if self.failure is None and not self._call.is_active():  # gRPC knows before our reader
                self.failure = Failure("UNAVAILABLE", "the stream has ended")
            if self.failure is not None:
                raise self.failure.with_sent(False)
            self._requests.put(batch)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                item = self._results.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                self.close()
                raise Failure("DEADLINE_EXCEEDED", "no reply before the deadline") from None
            if isinstance(item, Failure):
                raise item.with_sent(self._taken >= operation_id)
            if item.id == operation_id:
                return item

    def close(self) -> None:
        self._fail(Failure("CANCELLED", "the client closed the stream"))
        self._call.cancel()


class _SyncLink:
    """The channel to one server, its unary stub and (with ``stream``) its one-at-a-time connection:
    a ``SyncNativeCall`` when ``native`` and the server has a native port (asked through
    ClusterInfo whenever a connection opens, so a restarted server is found on its new port), else
    a ``_SyncStream``."""

    def __init__(self, address: str, tls: ClientTls | None = None, *, stream: bool = False,
                 native: bool = True) -> None:
        self.address = address
        self._tls = tls
        self.channel = open_channel(address, tls, CHANNEL_OPTIONS)
        self.stub = pb_grpc.KeyValueStub(self.channel)  # type: ignore[no-untyped-call]
        self._use_stream = stream
        self._native = native
        self._stream: _SyncStream | SyncNativeCall | None = None
        self._stream_lock = threading.Lock()

    def _open(self, timeout_s: float) -> _SyncStream | SyncNativeCall:
        if not self._native:
            return _SyncStream(self.stub)
        try:
            info = self.stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=timeout_s)
        except grpc.RpcError as error:  # nothing was sent yet: the operation may be retried
            raise failure_of(error, sent=False) from None
        if not info.native_port:
            return _SyncStream(self.stub)
        host = self.address.rpartition(":")[0].strip("[]")
        return SyncNativeCall(host, info.native_port, self._tls, timeout_s)

    def call(self, kind: OperationKind, request: Any, timeout_s: float) -> Any:
        """One attempt of operation ``kind``: over the stream when it is free (one operation at a time
        per link; a thread that finds it busy makes a unary call instead), else as a unary call."""
        if not self._use_stream or not self._stream_lock.acquire(blocking=False):
            return kind.unary(self.stub, request, timeout_s)
        try:
            stream = self._stream
            if stream is None or stream.failed:
                stream = self._stream = self._open(timeout_s)
            result = stream.call(kind, request, timeout_s)
        finally:
            self._stream_lock.release()
        which, body = case_of(result)
        if which == kind.field:
            return body
        if which == "error":
            raise Failure(body.code, body.message)
        raise ProtocolMismatch(f"{kind.method} got a {which!r} result")

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self.channel.close()


def _retrying(policy: Policy, what: str, addresses: Sequence[str], attempt: Callable[[int, float], T], *,
              start: int = 0, rotate: bool = False, writes: bool = False, once: bool = False,
              fail_over: Callable[[], Sequence[str]] | None = None) -> T:
    """``attempt(server, timeout_s)`` (a call to ``addresses[server]``) until it succeeds, and
    after each failure what the policy says (``retry.Attempts``): the same again after a backoff,
    ``fail_over()`` (an operation of a client with fallback DCs: move the session, return the
    servers of its new DC), or raise. Every RPC and operation of this client goes through it (a
    move's own calls are the move's: ``_Connections._carry_out``)."""
    started = time.monotonic()
    server, timeout_s = start, policy.window_s if fail_over is not None else policy.timeout_s
    attempts: Attempts | None = None
    while True:
        try:
            return attempt(server, timeout_s)
        except grpc.RpcError as error:
            failure = failure_of(error)
        except Failure as error:
            failure = error
        except OSError as error:
            failure = Failure(BROKEN, str(error))
        if attempts is None:
            attempts = policy.attempts(what, addresses, started=started, start=start, rotate=rotate, writes=writes,
                                       once=once, fails_over=fail_over is not None)
        decision = attempts.judge(failure, time.monotonic())
        if isinstance(decision, Wait):
            time.sleep(decision.delay_s)
            decision = attempts.next(time.monotonic())
        if isinstance(decision, FailOver):
            assert fail_over is not None
            decision = attempts.moved(time.monotonic(), fail_over())
        if isinstance(decision, OkapiError):
            raise decision
        server, timeout_s = decision.server, decision.timeout_s


class _Connections(Connections[_SyncLink]):
    """The links a ``Client`` and its forks share (``okapikv.client.connections``)."""

    def __init__(self, policy: Policy, tls: ClientTls | None, pipeline: bool, native: bool) -> None:
        super().__init__(policy)
        self.tls = tls
        self._pipeline = pipeline
        self.native = native
        self._lock = threading.Lock()  # held by the session moving the links

    def connect(self) -> None:
        """Learn the topology from the client's address (retrying until the timeout) and link up."""
        bootstrap = self._probe(self.policy.addresses[0])
        try:
            info = _retrying(self.policy, "ClusterInfo", [bootstrap.address], lambda _, timeout_s:
                             bootstrap.stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=timeout_s))
        finally:
            bootstrap.close()
        self.install(Topology.from_cluster_info(info, bootstrap.address), self._open)

    def _open(self, topology: Topology, address: str) -> _SyncLink:
        return _SyncLink(address, self.tls, stream=self._pipeline, native=self.native)

    def _probe(self, address: str) -> _SyncLink:
        return _SyncLink(address, self.tls)

    def fail_over(self, generation: int, state: SessionState, from_dc: int) -> pb.Session | None:
        """As ``AsyncClient``'s connections do (``aio._Connections.fail_over``), blocking: move to
        the first other DC that adopts ``state`` and return its session, None if another session
        moved the links since ``generation``."""
        with self._lock:
            current = self.departing(generation)
            if current is None:
                return None
            moved = self._carry_out(self.policy.move(current, state, from_dc, time.monotonic()))
            self.move(moved.topology, self._open)
            return moved.session

    def adopt(self, topology: Topology, state: SessionState, from_dc: int) -> pb.Session:
        """Have the DC of ``topology`` (where the links are) adopt ``state``, a session of DC ``from_dc``."""
        return self._carry_out(self.policy.adoption(topology, state, from_dc, time.monotonic())).session

    def _carry_out(self, move: Move) -> Moved:
        """Pump ``move`` with blocking calls over the links in use (or probes, closed after)."""
        probes: dict[str, _SyncLink] = {}
        try:
            while not isinstance(action := move.next(time.monotonic()), Moved | OkapiError):
                if isinstance(action, Wait):
                    time.sleep(action.delay_s)
                    continue
                link = self.probe(action.address, probes, self._probe)
                try:
                    reply = getattr(link.stub, action.method)(action.request, timeout=action.timeout_s)
                except grpc.RpcError as error:
                    reply = failure_of(error)
                move.answer(reply, time.monotonic())
        finally:
            for probe in probes.values():
                probe.close()
        if isinstance(action, OkapiError):
            raise action
        return action

    def close(self) -> None:
        for link in self.shut():
            link.close()


class Client:
    """A blocking client of one DC of an okapikv cluster, with its own causal session.

    ``address`` is any server of the DC to use: the constructor asks it for the topology (retrying
    until ``timeout_s``) and then routes each key to its partition's server directly. Use it as a
    context manager, or call ``close()``. ``tls`` (``okapikv.tls.ClientTls``): connect over TLS, as
    for ``AsyncClient``. ``at_most_once``: never retry a PUT, SWAP or DELETE that may have reached
    its server (``retry.Failure.maybe_applied``), raise ``OutcomeUnknown`` instead (default: retry,
    which may apply a write twice; see ``okapikv.client.retry``). ``pipeline=False``: unary calls
    only (one HTTP/2 stream per operation; slower, kept for comparison and for servers without
    Pipeline). ``native=False``: never use the servers' native ports (gRPC streams only).
    """

    def __init__(self, address: str, *, timeout_s: float = 30.0, backoff: Backoff = DEFAULT_BACKOFF,
                 tls: ClientTls | None = None, fallback: Sequence[str] = (), failover_after_s: float = 2.0,
                 failover_wait_s: float = 10.0, at_most_once: bool = False, pipeline: bool = True,
                 native: bool = True, coordinator: str = "session") -> None:
        self._policy = Policy(address, fallback, timeout_s=timeout_s, backoff=backoff,
                              failover_after_s=failover_after_s, failover_wait_s=failover_wait_s,
                              at_most_once=at_most_once, coordinator=coordinator, rng=random.Random())
        self._connections = _Connections(self._policy, tls, pipeline, native)
        #: which of the client's sessions this is (0: the first): chooses its own server
        self._ordinal = 0
        self._connections.connect()
        self._owner = True
        self._join()

    def _join(self) -> None:
        """Start a fresh session in the DC of the connections."""
        topology = self.topology
        self._state = SessionState(topology.num_dcs, scalar=is_scalar(topology.protocol))
        #: the connections' generation and the DC the session belongs to (see ``_adopt``)
        self._generation, self._dc = self._connections.generation, topology.dc
        self._closed = False
        #: the server's timestamp of the last PUT, SWAP or DELETE this client completed (None before
        #: the first): with the DC, the write's last-writer-wins rank (``okapi client --timestamps``)
        self.last_write_timestamp: int | None = None

    # ------------------------------------------------------------------ settings

    @property
    def timeout_s(self) -> float:
        return self._policy.timeout_s

    @timeout_s.setter
    def timeout_s(self, timeout_s: float) -> None:
        """The bound of this client's operations from now on (its forks keep theirs)."""
        self._policy = self._policy.with_timeout(timeout_s)

    @property
    def at_most_once(self) -> bool:
        return self._policy.at_most_once

    @property
    def failover_after_s(self) -> float:
        return self._policy.failover_after_s

    @property
    def failover_wait_s(self) -> float:
        return self._policy.failover_wait_s

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this client. Closing the client that created the connections closes them for every
        fork too; closing a fork only retires its session."""
        if self._closed:
            return
        self._closed = True
        if self._owner:
            self._connections.close()

    def fork(self) -> Client:
        """A new client with a fresh causal session over the same connections, which it follows
        to another DC when a session of theirs moves them (``okapikv.client.connections``)."""
        fork = Client.__new__(Client)
        fork._policy = self._policy
        fork._connections = self._connections
        fork._owner = False
        fork._ordinal = self._connections.next_session()
        fork._join()
        return fork

    @property
    def topology(self) -> Topology:
        topology = self._connections.topology
        assert topology is not None, "a Client connects when it is made"
        return topology

    @property
    def session(self) -> Session:
        return self._state.current

    def stats(self, partition: int = 0) -> dict[str, Any]:
        """The counters of the server of ``partition`` in this DC (the server's JSON, parsed)."""
        link = self._connections.links[partition]
        reply = _retrying(self._policy, "Stats", [link.address],
                          lambda _, timeout_s: link.stub.Stats(pb.StatsRequest(), timeout=timeout_s))
        parsed: dict[str, Any] = json.loads(reply.json) if reply.json else {}
        return parsed

    # ------------------------------------------------------------------ operations

    def get(self, key: KeyLike) -> bytes | None:
        """The value of ``key`` visible to the session, or None if it has none (missing or deleted)."""
        key_bytes = ops.to_bytes(key)
        state = self._ready()
        reply = self._call(ops.GET, ops.get_request(key_bytes, state.wire()), self._partition(key_bytes))
        return ops.decode_get(reply)

    def put(self, key: KeyLike, value: KeyLike, ttl: float | None = None) -> bool:
        """Write ``value``; True if the key had a visible value before. ``ttl``: the key expires
        that many seconds after its server writes it (docs/protocol.md, "Expiry")."""
        key_bytes = ops.to_bytes(key)
        request_value = ops.to_bytes(value)
        ttl_ms = ops.ttl_to_ms(ttl)
        state = self._ready()
        reply = self._call(ops.PUT, ops.put_request(key_bytes, request_value, state.wire(), ttl_ms),
                           self._partition(key_bytes))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_found(reply)

    def bulk_put(self, pairs: Iterable[tuple[KeyLike, KeyLike]], *, batch: int = bulk.BULK_BATCH,
                 window: int = bulk.BULK_WINDOW) -> int:
        """``AsyncClient.bulk_put`` for the client's session: the load runs on an event loop of its own (one
        call for the whole load, so not one crossing per operation), over connections of its own to
        this client's DC. Not from inside a running event loop (use ``AsyncClient.bulk_put``)."""
        from okapikv.client.aio import AsyncClient

        state = self._ready()
        connections = self._connections
        topology = self.topology
        policy = self._policy

        async def load() -> int:
            client = AsyncClient(topology.addresses[0], timeout_s=policy.timeout_s, tls=connections.tls,
                                 native=connections.native)
            try:
                await client.connect()
                loader = client.fork(session=state)
                written = await loader.bulk_put(pairs, batch=batch, window=window)
                if loader.last_write_timestamp is not None:
                    self.last_write_timestamp = loader.last_write_timestamp
                return written
            finally:
                await client.close()

        return asyncio.run(load())

    def swap(self, key: KeyLike, value: KeyLike) -> bytes | None:
        """Write ``value`` and return the value it replaced (None if none), atomically at the key's server."""
        key_bytes = ops.to_bytes(key)
        request_value = ops.to_bytes(value)
        state = self._ready()
        reply = self._call(ops.SWAP, ops.swap_request(key_bytes, request_value, state.wire()),
                           self._partition(key_bytes))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_swap(reply)

    def incr(self, key: KeyLike, by: int = 1) -> int:
        """``AsyncClient.incr``: add ``by`` to the counter at ``key``, return the value the session sees."""
        key_bytes = ops.to_bytes(key)
        state = self._ready()
        reply = self._call(ops.INCR, ops.incr_request(key_bytes, by, state.wire()), self._partition(key_bytes))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_incr(reply)

    def expire(self, key: KeyLike, *, ttl_ms: int = 0, at_ms: int = 0, persist: bool = False) -> ops.Expiry:
        """``AsyncClient.expire``: the key's value and time to live, and a new expiry if asked."""
        key_bytes = ops.to_bytes(key)
        state = self._ready()
        reply = self._call(ops.EXPIRE, ops.expire_request(key_bytes, ttl_ms, at_ms, persist, state.wire()),
                           self._partition(key_bytes))
        return ops.decode_expire(reply)

    def delete(self, key: KeyLike) -> bool:
        """Delete ``key`` (a replicated tombstone); True if it had a visible value."""
        key_bytes = ops.to_bytes(key)
        state = self._ready()
        reply = self._call(ops.DELETE, ops.delete_request(key_bytes, state.wire()), self._partition(key_bytes))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_found(reply)

    def scan(self, start: KeyLike, end: KeyLike, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        """Every (key, value) with start <= key <= end in byte order, from one causally consistent
        snapshot of the whole DC; at most ``limit`` pairs (the first ones) if given.

        A long range comes in pages (the servers' ``max_scan_items`` pairs each), all read at the
        first page's snapshot; a page that finds the snapshot gone starts the scan over, at most
        ``operations.SCAN_RESTARTS`` times, then raises ``SnapshotTooOld``."""
        pager = ops.ScanPager(ops.to_bytes(start), ops.to_bytes(end), limit)
        coordinator = self._coordinator(None)
        items: list[tuple[bytes, bytes]] = []
        while not pager.done:
            try:
                reply = self._call(ops.SCAN, pager.request(self._ready().wire()), coordinator, rotate=True)
            except SnapshotTooOld:
                if not pager.restart():
                    raise
                items = []
                continue
            items += pager.take(reply)
        return items

    def iter_scan(self, start: KeyLike, end: KeyLike, limit: int | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``scan`` as an iterator: one page is held at a time, and the next is asked for when the
        caller has taken this one, so a range of any size costs bounded memory. Every page reads
        the first page's snapshot, which the servers hold for ``snapshot_lease_ms`` after each page:
        a caller slower than that gets ``SnapshotTooOld`` (no start over: pairs were handed out)."""
        pager = ops.ScanPager(ops.to_bytes(start), ops.to_bytes(end), limit, restarts=0)
        coordinator = self._coordinator(None)
        while not pager.done:
            reply = self._call(ops.SCAN, pager.request(self._ready().wire()), coordinator, rotate=True)
            yield from pager.take(reply)

    def read_tx(self, keys: Iterable[KeyLike]) -> list[bytes | None]:
        """The values of ``keys`` (None where absent) from one causally consistent snapshot, in order."""
        state = self._ready()
        ordered, unique = ops.unique_keys(keys, self.topology.max_read_keys)
        if not unique:
            return []
        reply = self._call(ops.READ_TX, ops.read_tx_request(unique, state.wire()), self._coordinator(unique[0]),
                           rotate=True)
        return ops.decode_read_tx(reply, ordered, unique)

    # ------------------------------------------------------------------ plumbing

    def _partition(self, key: bytes) -> int:
        return self.topology.partition_of(key)

    def _coordinator(self, first_key: bytes | None) -> int:
        """The partition whose server coordinates the session's RO-TX (``first_key``) or SCAN
        (``Policy.read_coordinator``: by default the session's own server)."""
        return self._policy.read_coordinator(self.topology, self._ordinal, first_key)

    def _ready(self) -> SessionState:
        """The session, adopted first by the DC the connections moved to if another session moved
        them (``FailoverTimeout`` while that DC lacks some of its writes)."""
        if self._closed or self._connections.closed:
            raise OkapiError("the client was closed")
        if self._generation != self._connections.generation:
            self._adopt()
        return self._state

    def _call(self, kind: OperationKind, request: ops.Request, start: int, *, rotate: bool = False) -> Any:
        """Send one operation to the server of partition ``start`` (to the next server after each
        failure if ``rotate``: any server of the DC coordinates RO-TX and SCAN), as ``_retrying``
        says; merge the reply's session."""
        connections = self._connections
        links, generation = connections.links, connections.generation

        def attempt(server: int, timeout_s: float) -> Any:
            return links[server].call(kind, request, timeout_s)

        def fail_over() -> Sequence[str]:
            nonlocal request, links, generation
            self._fail_over(generation)
            request = kind.with_session(request, self._state.message())
            links, generation = connections.links, connections.generation
            return self.topology.addresses

        reply = _retrying(self._policy, kind.method, self.topology.addresses, attempt, start=start,
                          rotate=rotate, writes=kind.writes, once=kind.once, fail_over=fail_over)
        self._state.merge(reply.session)
        return reply

    # ------------------------------------------------------------------ failover

    def _fail_over(self, generation: int) -> None:
        """The DC of ``generation`` did not answer for ``failover_after_s``: move the connections
        (``_Connections.fail_over``) unless they moved since, and have their DC adopt the session."""
        connections = self._connections
        if generation == self._generation:
            adopted = connections.fail_over(generation, self._state, self._dc)
            if adopted is not None:
                self._moved(adopted, connections.generation, self.topology)
                return
        if self._generation != connections.generation:
            self._adopt()

    def _adopt(self) -> None:
        """Have the DC the connections moved to (another session moved them) adopt the session."""
        connections = self._connections
        generation, topology = connections.generation, self.topology
        self._moved(connections.adopt(topology, self._state, self._dc), generation, topology)

    def _moved(self, adopted: pb.Session, generation: int, topology: Topology) -> None:
        self._state.replace(adopted)
        self._generation, self._dc = generation, topology.dc
