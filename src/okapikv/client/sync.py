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

Everything else (requests, session merging, error mapping, backoff, routing) is shared with the async
client through ``operations``, ``retry`` and ``topology``.

A ``Client`` may be shared by threads (gRPC channels are thread-safe), but its session is one causal
session: give each logical client its own ``Client`` or ``fork()``.

Failover (``fallback``): the rules and what the clients share are in ``okapikv.client.failover``;
this client moves its own channels, to the first other DC that answers and has every write its
session depends on, or raises ``FailoverTimeout`` and stays with its DC.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from okapikv.client import failover
from okapikv.client import operations as ops
from okapikv.client.native import SyncNativeCall
from okapikv.client.operations import KeyLike, OperationKind, SessionState
from okapikv.client.retry import (
    CHANNEL_OPTIONS,
    DEFAULT_BACKOFF,
    MAYBE_APPLIED_CODES,
    Backoff,
    RetryableError,
    classify,
    never_sent,
    unavailable,
)
from okapikv.client.topology import Topology
from okapikv.core.messages import Session
from okapikv.errors import OkapiError, OutcomeUnknown, ProtocolMismatch, SnapshotTooOld, Unavailable
from okapikv.tls import ClientTls, open_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.status import grpc_status

T = TypeVar("T")


class StreamError(grpc.RpcError):  # type: ignore[misc]
    """A failure of an operation sent over a ``Pipeline`` stream, shaped like the failure of a unary
    call (``code()``, ``details()``), so the retry rules treat both alike. ``sent`` is False when
    the operation certainly never left the client (gRPC had not taken it from the stream's request
    iterator when the stream failed): a write may then be retried even ``at_most_once``."""

    def __init__(self, code: grpc.StatusCode, details: str, *, sent: bool = True) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details
        self.sent = sent

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def with_sent(self, sent: bool) -> StreamError:
        return StreamError(self._code, self._details, sent=sent)


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
    never took it from the request iterator (``StreamError.sent``), as when a server was stopped
    between two operations, which ends its open streams.
    """

    def __init__(self, stub: pb_grpc.KeyValueStub) -> None:
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[pb.Result | StreamError] = queue.SimpleQueue()
        self._taken = 0  # id of the last operation gRPC took from the request iterator
        self._ids = itertools.count(1)
        # ``failure`` is set, and requests enqueued, under this lock: an operation enqueued on a
        # stream that has not failed yet may be sent; one that finds it failed never is.
        self._lock = threading.Lock()
        self.failure: StreamError | None = None
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
        failure: StreamError
        try:
            for batch in self._call:
                for result in batch.results:
                    self._results.put(result)
            failure = StreamError(grpc.StatusCode.UNAVAILABLE, "the server closed the stream")
        except grpc.RpcError as error:
            failure = StreamError(error.code() or grpc.StatusCode.UNKNOWN, error.details() or "stream failed")
        except Exception as error:  # noqa: BLE001 - whatever broke the stream fails the waiting caller
            failure = StreamError(grpc.StatusCode.UNAVAILABLE, f"stream read failed: {error!r}")
        self._fail(failure)

    def _fail(self, failure: StreamError) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = failure
        self._results.put(failure)
        # gRPC's thread that takes requests blocks in ``_outgoing`` until something arrives; without
        # this, every failed stream (each server restart) would leave one such thread behind.
        self._requests.put(_END)

    def call(self, kind: OperationKind, request: ops.Request, timeout_s: float) -> pb.Result:
        """Send one operation and wait for its result. Raises ``StreamError`` when the stream has
        failed (``sent`` False if before it took the operation) or ``timeout_s`` passes."""
        operation_id = next(self._ids)
        batch = pb.OperationBatch.FromString(kind.operation(operation_id, request))
        with self._lock:
            if self.failure is None and not self._call.is_active():  # gRPC knows before our reader
                self.failure = StreamError(grpc.StatusCode.UNAVAILABLE, "the stream has ended")
            if self.failure is not None:
                raise self.failure.with_sent(False)
            self._requests.put(batch)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                item = self._results.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                self.close()
                raise StreamError(grpc.StatusCode.DEADLINE_EXCEEDED, "no reply before the deadline") from None
            if isinstance(item, StreamError):
                raise item.with_sent(self._taken >= operation_id)
            if item.id == operation_id:
                return item

    def close(self) -> None:
        self._fail(StreamError(grpc.StatusCode.CANCELLED, "the client closed the stream"))
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
            raise StreamError(error.code() or grpc.StatusCode.UNKNOWN, error.details() or "ClusterInfo failed",
                              sent=False) from None
        if not info.native_port:
            return _SyncStream(self.stub)
        host = self.address.rpartition(":")[0].strip("[]")
        return SyncNativeCall(host, info.native_port, self._tls, timeout_s, StreamError)

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
        which = result.WhichOneof("result")
        if which == kind.field:
            return getattr(result, which)
        if which == "error":
            raise StreamError(grpc_status(result.error.code), result.error.message)
        raise ProtocolMismatch(f"{kind.method} got a {which!r} result")

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self.channel.close()


def retry_sync(attempt: Callable[[float], T], *, what: str, address: str | Callable[[int], str],
               timeout_s: float, backoff: Backoff = DEFAULT_BACKOFF, at_most_once: bool = False) -> T:
    """Blocking twin of ``aio.retry_async``: retry ``attempt(remaining_s)`` until ``timeout_s``.

    ``at_most_once`` (a write of a client asked to apply writes at most once): retry only after a
    failure that proves the request was never sent (``retry.never_sent``); after any other failure
    the write may have been applied, and ``OutcomeUnknown`` is raised instead of trying again."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    for number in itertools.count():
        remaining = deadline - time.monotonic()
        current = address(number) if callable(address) else address
        if remaining <= 0:
            raise unavailable(what, current, timeout_s, last)
        try:
            return attempt(remaining)
        except grpc.RpcError as error:
            code: grpc.StatusCode = error.code()
            details: str = error.details() or ""
            if (at_most_once and code in MAYBE_APPLIED_CODES and not never_sent(code, details)
                    and getattr(error, "sent", True)):
                raise OutcomeUnknown(f"{what} via {current}: {code.name}: {details}; the write may or may not "
                                     "have taken effect (not retried: at most once)") from error
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise unavailable(what, current, timeout_s, last) from error
            failure = classify(code, details)
            if not isinstance(failure, RetryableError):
                raise failure from error
            last = failure
        except OSError as error:
            if at_most_once:
                raise OutcomeUnknown(f"{what} via {current}: {error}; the write may or may not have taken "
                                     "effect (not retried: at most once)") from error
            last = error
        delay = backoff.delay_s(number + 1)
        remaining = deadline - time.monotonic()
        if delay >= remaining:
            time.sleep(max(remaining, 0.0))
            raise unavailable(what, current, timeout_s, last)
        time.sleep(delay)
    raise AssertionError("unreachable")


class Client:
    """A blocking client of one DC of an okapikv cluster, with its own causal session.

    ``address`` is any server of the DC to use: the constructor asks it for the topology (retrying
    until ``timeout_s``) and then routes each key to its partition's server directly. Use it as a
    context manager, or call ``close()``. ``tls`` (``okapikv.tls.ClientTls``): connect over TLS, as
    for ``AsyncClient``. ``at_most_once``: never retry a PUT, SWAP or DELETE that may have reached
    its server (``retry.never_sent``), raise ``OutcomeUnknown`` instead (default: retry, which may
    apply a write twice; see ``okapikv.client.retry``). ``pipeline=False``: unary calls only (one
    HTTP/2 stream per operation; slower, kept for comparison and for servers without Pipeline).
    ``native=False``: never use the servers' native ports (gRPC streams only).
    """

    def __init__(self, address: str, *, timeout_s: float = 30.0, backoff: Backoff = DEFAULT_BACKOFF,
                 tls: ClientTls | None = None, fallback: Sequence[str] = (), failover_after_s: float = 2.0,
                 failover_wait_s: float = 10.0, at_most_once: bool = False, pipeline: bool = True,
                 native: bool = True) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        failover.check_parameters(failover_after_s, failover_wait_s)
        self.timeout_s = timeout_s
        self.at_most_once = at_most_once
        self._pipeline = pipeline
        self._native = native
        self._backoff = backoff
        self._tls = tls
        self._addresses = [address, *(a for a in fallback if a != address)]
        self.failover_after_s = failover_after_s
        self.failover_wait_s = failover_wait_s
        self._retired: list[_SyncLink] = []
        bootstrap = _SyncLink(address, tls)
        try:
            info = retry_sync(lambda remaining: bootstrap.stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=remaining),
                              what="ClusterInfo", address=address, timeout_s=timeout_s, backoff=backoff)
        finally:
            bootstrap.close()
        self._topology = Topology.from_cluster_info(info, address)
        by_address = {a: _SyncLink(a, tls, stream=pipeline, native=native)
                      for a in dict.fromkeys(self._topology.addresses)}
        self._links = [by_address[a] for a in self._topology.addresses]
        self._state = SessionState(self._topology.num_dcs)
        self._owner = True
        self._closed = False
        self._coordinators = itertools.count()
        #: the server's timestamp of the last PUT, SWAP or DELETE this client completed (None before
        #: the first): with the DC, the write's last-writer-wins rank (``okapi client --timestamps``)
        self.last_write_timestamp: int | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channels (for forks too, if this client created them)."""
        if self._closed:
            return
        self._closed = True
        if self._owner:
            for link in dict.fromkeys([*self._links, *self._retired]):
                link.close()

    def fork(self) -> Client:
        """A new client with a fresh causal session over the same channels."""
        fork = Client.__new__(Client)
        fork.timeout_s = self.timeout_s
        fork.at_most_once = self.at_most_once
        fork._pipeline = self._pipeline
        fork._native = self._native
        fork._backoff = self._backoff
        fork._topology = self._topology
        fork._links = self._links
        fork._state = SessionState(self._topology.num_dcs)
        fork._owner = False
        fork._closed = False
        fork._coordinators = self._coordinators
        fork._tls = self._tls
        fork._addresses = self._addresses
        fork.failover_after_s = self.failover_after_s
        fork.failover_wait_s = self.failover_wait_s
        fork._retired = []
        fork.last_write_timestamp = None
        return fork

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def session(self) -> Session:
        return self._state.current

    def stats(self, partition: int = 0) -> dict[str, Any]:
        """The counters of the server of ``partition`` in this DC (the server's JSON, parsed)."""
        link = self._links[partition]
        reply = retry_sync(lambda remaining: link.stub.Stats(pb.StatsRequest(), timeout=remaining),
                           what="Stats", address=link.address, timeout_s=self.timeout_s, backoff=self._backoff)
        parsed: dict[str, Any] = json.loads(reply.json) if reply.json else {}
        return parsed

    # ------------------------------------------------------------------ operations

    def get(self, key: KeyLike) -> bytes | None:
        """The value of ``key`` visible to this session, or None if it has none (missing or deleted)."""
        key_bytes = ops.to_bytes(key)
        reply = self._on_key(ops.GET, key_bytes, ops.get_request(key_bytes, self._state.wire()))
        return ops.decode_get(reply)

    def put(self, key: KeyLike, value: KeyLike) -> bool:
        """Write ``value``; True if the key had a visible value before."""
        key_bytes = ops.to_bytes(key)
        reply = self._on_key(ops.PUT, key_bytes, ops.put_request(key_bytes, ops.to_bytes(value), self._state.wire()))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_found(reply)

    def swap(self, key: KeyLike, value: KeyLike) -> bytes | None:
        """Write ``value`` and return the value it replaced (None if none), atomically at the key's server."""
        key_bytes = ops.to_bytes(key)
        reply = self._on_key(ops.SWAP, key_bytes, ops.swap_request(key_bytes, ops.to_bytes(value), self._state.wire()))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_swap(reply)

    def delete(self, key: KeyLike) -> bool:
        """Delete ``key`` (a replicated tombstone); True if it had a visible value."""
        key_bytes = ops.to_bytes(key)
        reply = self._on_key(ops.DELETE, key_bytes, ops.delete_request(key_bytes, self._state.wire()))
        self.last_write_timestamp = ops.decode_timestamp(reply)
        return ops.decode_found(reply)

    def scan(self, start: KeyLike, end: KeyLike, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        """Every (key, value) with start <= key <= end in byte order, from one causally consistent
        snapshot of the whole DC; at most ``limit`` pairs (the first ones) if given.

        A long range comes in pages (the servers' ``max_scan_items`` pairs each), all read at the
        first page's snapshot; a page that finds the snapshot gone starts the scan over, at most
        ``operations.SCAN_RESTARTS`` times, then raises ``SnapshotTooOld``."""
        pager = ops.ScanPager(ops.to_bytes(start), ops.to_bytes(end), limit)
        coordinator = next(self._coordinators) % len(self._links)
        items: list[tuple[bytes, bytes]] = []
        while not pager.done:
            try:
                reply = self._on_coordinator(ops.SCAN, coordinator, pager.request(self._state.wire()))
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
        coordinator = next(self._coordinators) % len(self._links)
        while not pager.done:
            reply = self._on_coordinator(ops.SCAN, coordinator, pager.request(self._state.wire()))
            yield from pager.take(reply)

    def read_tx(self, keys: Iterable[KeyLike]) -> list[bytes | None]:
        """The values of ``keys`` (None where absent) from one causally consistent snapshot, in order."""
        ordered, unique = ops.unique_keys(keys, self._topology.max_read_keys)
        if not unique:
            return []
        reply = self._on_coordinator(ops.READ_TX, self._topology.partition_of(unique[0]),
                                     ops.read_tx_request(unique, self._state.wire()))
        return ops.decode_read_tx(reply, ordered, unique)

    # ------------------------------------------------------------------ plumbing

    def _on_key(self, kind: OperationKind, key: bytes, request: ops.Request) -> Any:
        if self._closed:
            raise OkapiError("the client was closed")

        def run(timeout_s: float, request: ops.Request) -> Any:
            link = self._links[self._topology.partition_of(key)]
            return retry_sync(lambda remaining: link.call(kind, request, remaining), what=kind.method,
                              address=link.address, timeout_s=timeout_s, backoff=self._backoff,
                              at_most_once=self.at_most_once and kind.writes)

        reply = self._with_failover(run, kind, request)
        self._state.merge(reply.session)
        return reply

    def _on_coordinator(self, kind: OperationKind, start: int, request: ops.Request) -> Any:
        """Any server of the DC can coordinate; after a failure, try the next one."""
        if self._closed:
            raise OkapiError("the client was closed")

        def run(timeout_s: float, request: ops.Request) -> Any:
            links = self._links
            attempts = itertools.count()

            def attempt(remaining: float) -> Any:
                link = links[(start + next(attempts)) % len(links)]
                return link.call(kind, request, remaining)

            return retry_sync(attempt, what=kind.method,
                              address=lambda number: links[(start + number) % len(links)].address,
                              timeout_s=timeout_s, backoff=self._backoff)

        reply = self._with_failover(run, kind, request)
        self._state.merge(reply.session)
        return reply

    # ------------------------------------------------------------------ failover

    def _with_failover(self, run: Callable[[float, ops.Request], Any], kind: OperationKind,
                       request: ops.Request) -> Any:
        """``run(timeout_s, request)`` in the current DC; with fallback DCs, after
        ``failover_after_s`` of unavailability move the session to another DC (``_fail_over``) and
        run ``request`` there, with the moved session."""
        if len(self._addresses) == 1:
            return run(self.timeout_s, request)
        deadline = time.monotonic() + self.timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                return run(max(min(remaining, self.failover_after_s), 0.001), request)
            except Unavailable:
                if deadline - time.monotonic() <= 0:
                    raise
                self._fail_over()
                request = kind.with_session(request, self._state.message())

    def _fail_over(self) -> None:
        """Move the session to the first other DC that answers and has every dependency of the
        session (``AdoptSession``). Raises ``Unavailable`` when no other DC answers, and
        ``FailoverTimeout`` when the ones that answer still lack some of the session's writes after
        ``failover_wait_s``."""
        current = self._topology
        lagging: list[str] = []
        for address in self._addresses:
            link = _SyncLink(address, self._tls)
            try:
                info = link.stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=self.failover_wait_s)
            except grpc.RpcError:
                link.close()
                continue
            topology = Topology.from_cluster_info(info, address)
            try:
                other = failover.candidate(topology, current, address)
            except ProtocolMismatch:
                link.close()
                raise
            if not other:
                link.close()
                continue
            try:
                adopted = self._adopt(link, current)
            finally:
                link.close()
            if isinstance(adopted, str):
                lagging.append(f"DC {topology.dc_name} {adopted}")
                continue
            self._switch(topology, adopted)
            return
        raise failover.no_dc(current.dc_name, lagging, self.failover_wait_s, self._addresses)

    def _adopt(self, link: _SyncLink, current: Topology) -> pb.Session | str:
        """Ask the new DC until it has the session's dependencies: its session, or how far it lags."""
        deadline = time.monotonic() + self.failover_wait_s
        request = failover.adopt_request(self._state, current.dc)
        behind = ""
        for number in itertools.count(1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return behind or "did not answer"
            try:
                reply = link.stub.AdoptSession(request, timeout=remaining)
            except grpc.RpcError as error:
                behind = f"did not answer ({error.code().name})"
            else:
                adopted = failover.outcome(reply, current)
                if not isinstance(adopted, str):
                    return adopted
                behind = adopted
            time.sleep(min(self._backoff.delay_s(number), max(deadline - time.monotonic(), 0.0)))
        raise AssertionError("unreachable")

    def _switch(self, topology: Topology, session: pb.Session) -> None:
        by_address = {a: _SyncLink(a, self._tls, stream=self._pipeline, native=self._native)
                      for a in dict.fromkeys(topology.addresses)}
        self._retired.extend(self._links)
        self._links = [by_address[a] for a in topology.addresses]
        self._topology = topology
        self._state.replace(session)
