"""``okapi bench --load lean``: a load generator that leaves the CPU to the servers.

Why: partitions add capacity only where the servers, not the clients, hold the cores. The async
client spends ~12-15 us of CPU per operation (its session's dependency tracking, a coroutine and a
future per operation, results turned into Python values), about what a partition server spends;
on a 2-core machine one partition server then already has one core and the load processes the
other, and a second partition has no CPU to add (YCSB-A, 1 -> 2 partitions: x0.70-0.85 with the
async client). Real deployments put clients on other machines; here the load generator must cost
little instead, as YCSB's Java client or redis-benchmark's C do for the stores they measure.

What it does: the same sessions (one per benchmark client), drawing the same operations from the
same seeded sources as the async client's load processes, each with one operation in flight, in a
closed loop. But a session here is a slot in a table, not a coroutine: the results of a frame are
matched to their slots in a loop, each slot's next operation is appended to its partition's next
batch at once, and the batches leave once per event-loop turn, at most ``BATCH_OPERATIONS``
operations a frame, as the async client sends them. Requests are encoded once per distinct
operation and sent on each server's native port in version 2 (msgpack, ``okapikv.wire.packed``),
as the clients speak it; ``wire="protobuf"`` speaks version 1 (``okapikv.wire.encoding``), for
comparing the two (``scripts/measure_native_wire.py``).

What it leaves out, and why that is fair for a throughput measurement: client sessions. Every
request carries the empty session (a client that has seen nothing), so no operation waits for
causality and the servers do all of their per-operation work (decode, timestamp, store, replicate,
answer with the new session). Only single-key GET, SWAP and PUT (YCSB A, B, C); other kinds
are refused before the run.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

import grpc

from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.workloads import INSERT, LOAD, PUT, READ, UPDATE, Operation, OperationSource
from okapikv.core.partitioning import partition_of
from okapikv.wire import encoding, packed
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.frames import MAGIC, MAGIC_V2, FrameDecoder, FrameError, encode_frame

if TYPE_CHECKING:
    from okapikv.bench.engine.adapters import TargetSpec
    from okapikv.bench.engine.recording import Recorder, Window

#: Operations per frame: the async client's batch on the native port (``okapikv.client.aio``), so the
#: servers see the same batches whichever load generator runs.
BATCH_OPERATIONS = 8
#: ``Operation`` oneof tags of the kinds the lean generator sends (see ``okapikv.client.operations``).
_GET, _PUT, _SWAP = b"\x12", b"\x1a", b"\x22"
_EMPTY_SESSION = encoding.session_field(b"")
KINDS = frozenset({READ, UPDATE, INSERT, PUT, LOAD})
#: Operations drawn and encoded before the run; the run cycles through them.
POOL_OPERATIONS = 100_000
WIRES = ("msgpack", "protobuf")


class _Connection(asyncio.Protocol):
    """One server's native port: frames in, results to the load."""

    def __init__(self, load: LeanLoad) -> None:
        self.load = load
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self.transport.write(MAGIC_V2 if self.load.packed else MAGIC)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except FrameError as error:
            self.load.fail(f"a server broke the framing: {error}")
            return
        for frame in frames:
            self.load.on_results(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.load.finished:
            self.load.fail(f"a server closed its connection ({exc or 'end of stream'})")


class LeanLoad:
    """The sessions of one load process, as slots over one connection per server.

    Slot ``i`` has operation id ``i + 1`` on every request it sends (a slot has one operation in
    flight, so a reply's id names its slot, with no table of ids), and takes its operations from a
    pool drawn before the run from the sessions' own sources, round robin, and encoded once
    (``POOL_OPERATIONS``, reused cyclically: a key's popularity is the workload's either way).
    """

    def __init__(self, spec: TargetSpec, sources: list[OperationSource], *, max_operations: int,
                 wire: str = "msgpack") -> None:
        if wire not in WIRES:
            raise BenchError(f"the lean load generator speaks {' or '.join(WIRES)}, not {wire!r}")
        self.packed = wire == "msgpack"
        self.spec = spec
        self.sources = sources
        self.max_operations = max_operations  # the run is bounded by count as well as by time
        self.connections: list[_Connection] = []
        self.num_partitions = 1
        self.finished = False
        # (kind, partition, the operation's bytes before its id and after it)
        self._pool: list[tuple[str, int, bytes, bytes]] = []
        self._heads = [packed.encode_id(slot + 1) if self.packed else b"\x08" + encoding.encode_varint(slot + 1)
                       for slot in range(len(sources))]
        self._kinds: list[str] = [""] * len(sources)  # per slot: the kind of its operation in flight
        self._sent_ns: list[int] = [0] * len(sources)
        self._inflight = 0
        self._issued = 0
        self._next = 0
        self._pending: list[list[bytes]] = []  # per connection
        self._channel_base: list[int] = []  # per slot: its DC's first connection
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Future[None] | None = None
        self._end_ns = 0
        self._measure_ns = 0
        self._state: Recorder | None = None

    async def open(self) -> None:
        """Learn each DC's partitions from ClusterInfo, connect to every server's native port, and
        draw and encode the operation pool. Slot ``i`` uses DC ``i % DCs``, as the async client's
        session ``i`` does (``okapikv.bench.engine.adapters``)."""
        self._loop = asyncio.get_running_loop()
        for address in self.spec.addresses:
            info = await _cluster_info(address, self.spec.timeout_s)
            if self.connections and info.num_partitions != self.num_partitions:
                raise BenchError(f"{address}: {info.num_partitions} partitions, another DC has {self.num_partitions}")
            self.num_partitions = max(1, info.num_partitions)
            servers = sorted((s.partition, s.address) for s in info.servers if s.dc == info.dc)
            if [partition for partition, _ in servers] != list(range(self.num_partitions)):
                raise BenchError(f"{address}: ClusterInfo does not name one server per partition of its DC")
            for _, server in servers:
                native_port = (await _cluster_info(server, self.spec.timeout_s)).native_port
                if not native_port:
                    raise BenchError(f"{server} serves no native port: the lean load generator needs one")
                host = server.rpartition(":")[0].strip("[]")
                _, protocol = await asyncio.wait_for(
                    self._loop.create_connection(lambda: _Connection(self), host, native_port), self.spec.timeout_s)
                self.connections.append(protocol)  # DC d's partition p at d * partitions + p
        self._pending = [[] for _ in self.connections]
        dcs = len(self.spec.addresses)
        self._channel_base = [(slot % dcs) * self.num_partitions for slot in range(len(self.sources))]
        encoded: dict[tuple[str, bytes, bytes], tuple[str, int, bytes, bytes]] = {}
        sources = self.sources
        for index in range(max(POOL_OPERATIONS, len(sources))):
            operation = sources[index % len(sources)].next()
            identity = (operation.kind, operation.key, operation.value)
            self._pool.append(encoded.get(identity) or encoded.setdefault(identity, self._encode(operation)))

    async def run(self, window: Window, state: Recorder) -> None:
        """Each slot issues its first operation at the window's start; the loop then runs itself
        from ``on_results`` until the window ends and the last reply is in."""
        assert self._loop is not None
        self._state = state
        self._end_ns, self._measure_ns = window.end_ns, window.measure_ns
        self._done = self._loop.create_future()
        await asyncio.sleep(window.seconds_until(window.start_ns))
        now = time.perf_counter_ns()
        for slot in range(len(self.sources)):
            self._issue(slot, now)
        self._flush()
        try:
            await asyncio.wait_for(self._done, window.seconds_until(window.end_ns) + self.spec.timeout_s)
        except TimeoutError:
            raise BenchError(f"{self._inflight} operations unanswered {self.spec.timeout_s:g} s after the run"
                             ) from None
        finally:
            self.finished = True

    def close(self) -> None:
        self.finished = True
        for connection in self.connections:
            if connection.transport is not None:
                connection.transport.close()

    def fail(self, reason: str) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(BenchError(reason))

    # ------------------------------------------------------------------ the closed loop

    def _encode(self, operation: Operation) -> tuple[str, int, bytes, bytes]:
        """(kind, partition, the operation's bytes before and after its id): in version 1, the
        element's tag and length go in front of the id, so ``_issue`` frames it."""
        kind, key, value = operation.kind, operation.key, operation.value
        partition = partition_of(key, self.num_partitions)
        if self.packed:
            if kind == READ:
                before, after = packed.split_id(packed.Get(0, key))
            elif kind in KINDS:
                write = packed.Swap if kind == UPDATE else packed.Put
                before, after = packed.split_id(write(0, key, value))
            else:
                raise BenchError(f"the lean load generator sends GET, SWAP and PUT only, not {kind}")
            return kind, partition, before, after
        if kind == READ:
            tag, request = _GET, encoding.get_request(key, _EMPTY_SESSION)
        elif kind in KINDS:
            tag = _SWAP if kind == UPDATE else _PUT
            request = encoding.write_request(key, value, _EMPTY_SESSION)
        else:
            raise BenchError(f"the lean load generator sends GET, SWAP and PUT only, not {kind}")
        return kind, partition, b"", tag + encoding.encode_varint(len(request)) + request

    def _issue(self, slot: int, now_ns: int) -> None:
        if self._issued >= self.max_operations:
            return
        self._issued += 1
        kind, partition, before, after = self._pool[self._next]
        self._next = (self._next + 1) % len(self._pool)
        if self.packed:
            element = before + self._heads[slot] + after
        else:
            body = self._heads[slot] + after
            element = b"\x0a" + encoding.encode_varint(len(body)) + body
        self._pending[self._channel_base[slot] + partition].append(element)
        self._kinds[slot] = kind
        self._sent_ns[slot] = now_ns
        self._inflight += 1

    def on_results(self, frame: bytes) -> None:
        state = self._state
        if state is None:
            return
        try:
            results: Any = (packed.decode_results(frame) if self.packed else pb.ResultBatch.FromString(frame)).results
        except Exception as error:
            self.fail(f"a reply is not a ResultBatch: {error}")
            return
        now = time.perf_counter_ns()
        in_window = self._measure_ns <= now <= self._end_ns
        issue = now < self._end_ns
        kinds, sent_ns, slots = self._kinds, self._sent_ns, len(self._kinds)
        for result in results:
            slot = result.id - 1
            if not 0 <= slot < slots or not kinds[slot]:
                self.fail(f"a reply for an operation never sent (id {result.id}): {result}")
                return
            kind = kinds[slot]
            kinds[slot] = ""
            self._inflight -= 1
            which, body = packed.case_of(result)
            if which == "error":
                state.errors[kind] += 1
                state.last_error = f"{kind}: {body.code}: {body.message}"[:500]
            else:
                state.completed += 1
                if in_window:
                    state.in_window += 1
                    state.samples(kind).append((now - sent_ns[slot]) // 1000)
            if issue:
                self._issue(slot, now)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)
        if not self._inflight and self._done is not None and not self._done.done():  # time or count is up
            self._done.set_result(None)

    def _flush(self) -> None:
        """Every partition's queued operations, in frames of at most ``BATCH_OPERATIONS``, one
        write per connection."""
        self._flush_scheduled = False
        for connection, pending in zip(self.connections, self._pending, strict=True):
            if not pending:
                continue
            transport = connection.transport
            assert transport is not None
            batch = packed.batch_of if self.packed else b"".join
            transport.write(b"".join([encode_frame(batch(pending[start:start + BATCH_OPERATIONS]))
                                      for start in range(0, len(pending), BATCH_OPERATIONS)]))
            pending.clear()


async def _cluster_info(address: str, timeout_s: float) -> Any:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary("/okapikv.KeyValue/ClusterInfo",
                                   request_serializer=pb.ClusterInfoRequest.SerializeToString,
                                   response_deserializer=pb.ClusterInfoResponse.FromString)
        try:
            return await call(pb.ClusterInfoRequest(), timeout=timeout_s, wait_for_ready=True)
        except grpc.aio.AioRpcError as error:
            raise BenchError(f"{address}: ClusterInfo failed: {error.code().name}: {error.details()}") from None
