"""A small in-process fake of the KeyValue service, for testing the client without the real server.

It implements the proto over one dict shared by the fake partitions of one DC (so SCAN and RO-TX
see every key), answers unary RPCs and the Pipeline stream, and records what it received: which
partition got which key, the sessions requests carried, the sizes of pipelined batches. Its causal
metadata is simple but checkable: each write gets the next tick of a cluster-wide counter as its
timestamp, replies return ``dt = max(request dt, timestamp of what was read or written)`` and
``stable = max(request stable, fake.stable)``, where a test sets ``fake.stable``.

The servers run on their own event loop in a background thread, so both the blocking ``Client`` and
an ``AsyncClient`` on the test's own loop can talk to them, and a test can stop and restart one
partition's server on the same port to exercise retries. Two fake clusters of the two DCs
(``FakeCluster(dc=1)`` is the second) are the client's DC and its fallback: each answers
``AdoptSession`` (ready unless a test sets ``state.adopt_behind_us``), so a client can fail over
from one to the other.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import grpc.aio

from okapikv.core.partitioning import partition_of
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

T = TypeVar("T")

DC_NAMES = ("oregon", "ireland")


@dataclass
class Received:
    """What one fake server saw."""

    keys: list[tuple[str, bytes]] = field(default_factory=list)  # (method, key)
    sessions: list[tuple[tuple[int, ...], int]] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    unary_calls: int = 0
    pipelined_operations: int = 0
    adoptions: list[tuple[tuple[int, ...], int, int]] = field(default_factory=list)  # (stable, dt, from_dc)


class FakeState:
    """The data shared by every fake server of the cluster."""

    def __init__(self, num_partitions: int, dc: int = 0) -> None:
        self.num_partitions = num_partitions
        self.dc = dc  # the index of the fake's DC in ``DC_NAMES``
        self.data: dict[bytes, tuple[bytes, int]] = {}  # key -> (value, timestamp)
        self.clock = 0
        self.stable: tuple[int, ...] = (0,) * len(DC_NAMES)
        self.hang = False  # when True, operations never answer (to test the client's timeout)
        # SCAN paging as the real servers do it: at most ``scan_page`` pairs a reply (0: no cap), the
        # first page's data kept as its snapshot, which later pages read (``snapshots``); the next
        # ``expire_pages`` later pages are answered ABORTED (their snapshot is gone); the next
        # ``overloaded`` snapshot reads are refused for load; ``after_page`` runs after each page.
        self.scan_page = 0
        self.snapshots: list[dict[bytes, tuple[bytes, int]]] = []
        self.expire_pages = 0
        self.overloaded = 0
        self.after_page: Any = None
        self.max_read_keys = 0
        # AdoptSession: ready (the session adopted with this DC's stable vector) unless this says
        # by how much this DC lags behind each DC
        self.adopt_behind_us: list[int] | None = None


class FakeKeyValue(pb_grpc.KeyValueServicer):
    def __init__(self, state: FakeState, partition: int, addresses: list[str]) -> None:
        self.state = state
        self.partition = partition
        self.addresses = addresses
        self.received = Received()

    # ------------------------------------------------------------------ operations (shared by both APIs)

    def _session(self, request_session: pb.Session, timestamp: int) -> pb.Session:
        stable = list(request_session.stable) or [0] * len(DC_NAMES)
        merged = [max(a, b) for a, b in zip(stable, self.state.stable, strict=True)]
        return pb.Session(stable=merged, dt=max(request_session.dt, timestamp))

    def _record(self, method: str, key: bytes, session: pb.Session) -> None:
        self.received.keys.append((method, key))
        self.received.sessions.append((tuple(session.stable), session.dt))

    def _check_key(self, key: bytes) -> None:
        if not key:
            raise _Invalid("key must not be empty")
        if partition_of(key, self.state.num_partitions) != self.partition:
            raise _Invalid(f"key {key!r} does not belong to partition {self.partition}")

    def _write(self, key: bytes, value: bytes | None) -> tuple[bool, bytes, int]:
        previous = self.state.data.get(key)
        self.state.clock += 1
        if value is None:
            self.state.data.pop(key, None)
        else:
            self.state.data[key] = (value, self.state.clock)
        return previous is not None, previous[0] if previous else b"", self.state.clock

    def do_get(self, request: pb.GetRequest) -> pb.GetResponse:
        self._check_key(request.key)
        self._record("get", request.key, request.session)
        item = self.state.data.get(request.key)
        if item is None:
            return pb.GetResponse(found=False, session=self._session(request.session, 0))
        return pb.GetResponse(found=True, value=item[0], session=self._session(request.session, item[1]))

    def do_put(self, request: pb.PutRequest) -> pb.PutResponse:
        self._check_key(request.key)
        self._record("put", request.key, request.session)
        found, _, timestamp = self._write(request.key, request.value)
        return pb.PutResponse(found=found, timestamp=timestamp, session=self._session(request.session, timestamp))

    def do_swap(self, request: pb.SwapRequest) -> pb.SwapResponse:
        self._check_key(request.key)
        self._record("swap", request.key, request.session)
        found, old, timestamp = self._write(request.key, request.value)
        return pb.SwapResponse(found=found, old_value=old, timestamp=timestamp,
                               session=self._session(request.session, timestamp))

    def do_delete(self, request: pb.DeleteRequest) -> pb.DeleteResponse:
        self._check_key(request.key)
        self._record("delete", request.key, request.session)
        found, _, timestamp = self._write(request.key, None)
        return pb.DeleteResponse(found=found, timestamp=timestamp, session=self._session(request.session, timestamp))

    def do_scan(self, request: pb.ScanRequest) -> pb.ScanResponse:
        if request.start > request.end:
            raise _Invalid("scan start is after its end")
        self._record("scan", request.start, request.session)
        self._refuse_for_load()
        state = self.state
        if request.HasField("snapshot"):
            if state.expire_pages:
                state.expire_pages -= 1
                raise _Refused("ABORTED", "the scan's snapshot fell below the garbage-collection horizon; start over")
            number = request.snapshot.vector[0]
            data = state.snapshots[number]
        else:
            data = dict(state.data)
            number = len(state.snapshots)
            state.snapshots.append(data)
        keys = sorted(k for k in data if request.start <= k <= request.end)
        cap = min(filter(None, (request.limit, state.scan_page)), default=0)
        more = bool(cap) and len(keys) > cap
        if cap:
            keys = keys[:cap]
        response = pb.ScanResponse(items=[pb.KeyValuePair(key=k, value=data[k][0]) for k in keys],
                                   session=self._session(request.session, 0))
        if more and not (request.limit and len(keys) >= request.limit):
            response.resume = keys[-1] + b"\x00"
            response.snapshot.dc = 0
            response.snapshot.vector.extend([number, 0])
        if state.after_page is not None:
            state.after_page()
        return response

    def _refuse_for_load(self) -> None:
        if self.state.overloaded:
            self.state.overloaded -= 1
            raise _Refused("RESOURCE_EXHAUSTED", "overloaded: this server already coordinates 2 snapshot reads")

    def do_read_tx(self, request: pb.ReadTxRequest) -> pb.ReadTxResponse:
        if len(set(request.keys)) != len(request.keys):
            raise _Invalid("duplicate keys in a transaction")
        self._record("read_tx", b",".join(request.keys), request.session)
        self._refuse_for_load()
        values = []
        newest = 0
        for key in request.keys:
            item = self.state.data.get(key)
            values.append(pb.MaybeValue(found=item is not None, value=item[0] if item else b""))
            newest = max(newest, item[1] if item else 0)
        return pb.ReadTxResponse(values=values, session=self._session(request.session, newest))

    # ------------------------------------------------------------------ unary API

    async def _unary(self, handler: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.received.unary_calls += 1
        if self.state.hang:
            await asyncio.Event().wait()
        try:
            return handler(request)
        except _Invalid as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except _Refused as error:
            await context.abort(getattr(grpc.StatusCode, error.code), error.message)

    async def Get(self, request: Any, context: Any) -> Any:
        return await self._unary(self.do_get, request, context)

    async def Put(self, request: Any, context: Any) -> Any:
        return await self._unary(self.do_put, request, context)

    async def Swap(self, request: Any, context: Any) -> Any:
        return await self._unary(self.do_swap, request, context)

    async def Delete(self, request: Any, context: Any) -> Any:
        return await self._unary(self.do_delete, request, context)

    async def Scan(self, request: Any, context: Any) -> Any:
        return await self._unary(self.do_scan, request, context)

    async def ReadTx(self, request: Any, context: Any) -> Any:
        return await self._unary(self.do_read_tx, request, context)

    async def ClusterInfo(self, request: Any, context: Any) -> Any:
        here = self.state.dc
        servers = [pb.ServerAddress(dc=here, partition=p, address=a) for p, a in enumerate(self.addresses)]
        # The other DC's servers are listed but do not exist: a client must never dial them.
        servers += [pb.ServerAddress(dc=1 - here, partition=p, address="127.0.0.1:9")
                    for p in range(len(self.addresses))]
        return pb.ClusterInfoResponse(
            cluster_id="fake", dc_names=list(DC_NAMES), num_partitions=self.state.num_partitions,
            protocol="fake", dc=here, partition=self.partition, servers=servers,
            max_key_bytes=64, max_value_bytes=1 << 20, max_message_bytes=4 << 20,
            max_read_keys=self.state.max_read_keys)

    async def AdoptSession(self, request: Any, context: Any) -> Any:
        session = request.session
        self.received.adoptions.append((tuple(session.stable), session.dt, request.from_dc))
        behind = self.state.adopt_behind_us
        if behind is not None:
            return pb.AdoptSessionResponse(ready=False, behind_us=behind)
        return pb.AdoptSessionResponse(ready=True, session=pb.Session(stable=list(self.state.stable), dt=0))

    async def Stats(self, request: Any, context: Any) -> Any:
        return pb.StatsResponse(json=f'{{"partition": {self.partition}}}')

    # ------------------------------------------------------------------ pipelined API

    async def Pipeline(self, request_iterator: AsyncIterator[pb.OperationBatch],
                       context: Any) -> AsyncIterator[pb.ResultBatch]:
        handlers = {"get": self.do_get, "put": self.do_put, "swap": self.do_swap, "delete": self.do_delete,
                    "scan": self.do_scan, "read_tx": self.do_read_tx}
        async for batch in request_iterator:
            self.received.batch_sizes.append(len(batch.operations))
            if self.state.hang:
                continue
            results = []
            for operation in batch.operations:
                self.received.pipelined_operations += 1
                which = operation.WhichOneof("op")
                result = pb.Result(id=operation.id)
                try:
                    getattr(result, which).CopyFrom(handlers[which](getattr(operation, which)))
                except _Invalid as error:
                    result.error.code = "INVALID_ARGUMENT"
                    result.error.message = str(error)
                except _Refused as error:
                    result.error.code = error.code
                    result.error.message = error.message
                results.append(result)
            # Answer in reverse order: the client must match results by id, not by position.
            yield pb.ResultBatch(results=results[::-1])


class _Invalid(Exception):
    pass


class _Refused(Exception):
    """A refusal with another status (``code``: its gRPC name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FakeCluster:
    """One fake DC (``DC_NAMES[dc]``) of ``num_partitions`` servers on loopback, run on a private
    event-loop thread."""

    def __init__(self, num_partitions: int = 2, dc: int = 0) -> None:
        self.state = FakeState(num_partitions, dc)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-kv", daemon=True)
        self._thread.start()
        self.servicers: list[FakeKeyValue] = []
        self._servers: list[grpc.aio.Server | None] = []
        self.addresses: list[str] = []
        self.ports = self._run(self._reserve_ports(num_partitions))
        self.addresses = [f"127.0.0.1:{port}" for port in self.ports]
        for partition in range(num_partitions):
            self.servicers.append(FakeKeyValue(self.state, partition, self.addresses))
            self._servers.append(None)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _reserve_ports(self, count: int) -> list[int]:
        """Pick free ports by binding throwaway servers (so restarts can reuse the same port)."""
        ports = []
        for _ in range(count):
            server = grpc.aio.server()
            ports.append(server.add_insecure_port("127.0.0.1:0"))
            await server.start()
            await server.stop(None)
        return ports

    def start(self, partition: int | None = None) -> None:
        for p in range(len(self.ports)) if partition is None else [partition]:
            self._run(self._start(p))

    async def _start(self, partition: int) -> None:
        server = grpc.aio.server()
        pb_grpc.add_KeyValueServicer_to_server(self.servicers[partition], server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port(self.addresses[partition])
        assert port == self.ports[partition], f"could not rebind {self.addresses[partition]}"
        await server.start()
        self._servers[partition] = server

    def stop(self, partition: int | None = None) -> None:
        for p in range(len(self.ports)) if partition is None else [partition]:
            self._run(self._stop(p))

    async def _stop(self, partition: int) -> None:
        server = self._servers[partition]
        if server is not None:
            await server.stop(None)
            self._servers[partition] = None

    def start_later(self, partition: int, delay_s: float) -> None:
        """Start a partition's server after ``delay_s`` without blocking the caller."""
        self.loop.call_soon_threadsafe(
            lambda: self.loop.call_later(delay_s, lambda: self.loop.create_task(self._start(partition))))

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def partition_server(self, key: bytes) -> FakeKeyValue:
        return self.servicers[partition_of(key, len(self.servicers))]
