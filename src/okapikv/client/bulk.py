"""Bulk loading: many PUTs in large pipelined batches, each straight to its key's partition.

What ``AsyncClient.bulk_put`` and ``Client.bulk_put`` run, and what `okapi load` and the benchmarks'
load phase use. An operation of the ordinary API costs the client a future, an entry in its
pipeline's table and a session merge, and travels in batches of a few operations (the latency of
concurrent sessions wants them small); a load wants none of that. Here:

- the pairs are grouped by partition, and each partition's PUTs go over a connection of their own
  to its server (the native port, or the gRPC ``Pipeline`` stream where there is none:
  ``native.AsyncNativeCall``), in batches of ``BULK_BATCH`` operations (fewer where the cluster's
  message limit says so), with ``BULK_WINDOW`` batches' worth of operations in flight: the server
  takes each batch in one core call, and on a durable server the batches that arrive during a
  commit share the next commit group (``okapikv.storage.group_commit``), so a load pays one
  transaction and one fsync per group of thousands of records;
- every PUT carries the session as it was when the load started, encoded once: they are
  concurrent writes of that session (none depends on another). When the load ends the session
  merges the reply session of the newest write of each partition, so what was loaded is visible
  to the session's next reads (read-your-writes);
- results are counted as they arrive, with no per-operation future or timer: one deadline watches
  the whole load, restarted whenever results arrive (the client's ``timeout_s`` without progress
  fails the load).

Failures are not retried: a refused PUT (an oversized key or value, a full disk) or a broken
connection ends the load with ``BulkLoadFailed``, which says how many PUTs were acknowledged and
carries the error of the first failure. Loading the same pairs again is safe (the same values are
written again, as new versions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from okapikv.client import operations as ops
from okapikv.client.native import AsyncNativeCall, GrpcCall
from okapikv.client.operations import KeyLike
from okapikv.client.retry import DEADLINE_EXCEEDED, Failure
from okapikv.client.topology import Topology
from okapikv.errors import BulkLoadFailed, InvalidArgument
from okapikv.wire import encoding
from okapikv.wire import okapikv_pb2 as pb

#: PUTs per batch: enough that a batch's fixed costs (a message, a core call, a result frame) are
#: spread thin, few enough that a batch's results come back while the next batches are handled.
BULK_BATCH = 2_000
#: Batches' worth of PUTs in flight per partition: the server always has the next batch.
BULK_WINDOW = 4

#: Opens the call carrying one partition's batches, with this load as its receiver.
OpenCall = Callable[["PartitionLoad"], AsyncNativeCall | GrpcCall]


@dataclass(frozen=True, slots=True)
class Newest:
    """The reply of a partition's newest write: what the session merges when the load ends."""

    timestamp: int
    session: pb.Session


class PartitionLoad:
    """The PUTs of one partition over one call (``native.Receiver``): ``done`` resolves to the
    newest write's reply (None for no pairs), or to ``BulkLoadFailed``."""

    def __init__(self, pairs: Sequence[tuple[bytes, bytes]], session_wire: bytes, budget_bytes: int,
                 timeout_s: float, open_call: OpenCall, *, batch: int = BULK_BATCH,
                 window: int = BULK_WINDOW) -> None:
        if batch < 1 or window < 1:
            raise ValueError(f"batch and window must be at least 1, not {batch} and {window}")
        self._pairs = pairs
        self._session = session_wire
        self._budget = budget_bytes
        self._batch = batch
        self._in_flight_limit = batch * window
        self._timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self.done: asyncio.Future[Newest | None] = self._loop.create_future()
        self.sent = 0  # PUTs handed to the call (pairs[:sent]); operation ids are 1 + index
        self.acknowledged = 0
        self._newest: Newest | None = None
        self._progress = 0  # acknowledged at the last watchdog look
        self._watchdog: asyncio.TimerHandle | None = None
        if not pairs:
            self.done.set_result(None)
            self._call: AsyncNativeCall | GrpcCall | None = None
            return
        self._watchdog = self._loop.call_later(timeout_s, self._watch)
        self._call = open_call(self)
        self._pump()  # a call ready at once (the gRPC stream) never calls on_ready

    # ---------------------------------------------------------------- receiver

    def on_ready(self) -> None:
        self._pump()

    def on_batch(self, batch: pb.ResultBatch) -> None:
        if self.done.done():
            return
        newest = self._newest
        acknowledged = self.acknowledged
        for result in batch.results:
            if result.WhichOneof("result") != "put":
                self._fail_on(result)
                return
            reply = result.put
            acknowledged += 1
            if newest is None or reply.timestamp > newest.timestamp:
                newest = Newest(reply.timestamp, reply.session)
        self.acknowledged = acknowledged
        self._newest = newest
        if acknowledged >= len(self._pairs):
            self._finish(None)
        else:
            self._pump()

    def on_failure(self, failure: Failure) -> None:
        self._finish(failure)

    # ---------------------------------------------------------------- sending

    def _pump(self) -> None:
        """Send batches while fewer than the window's PUTs are unanswered."""
        call = self._call
        if call is None or not call.ready or self.done.done():
            return
        pairs = self._pairs
        while self.sent < len(pairs) and self.sent - self.acknowledged < self._in_flight_limit:
            call.send(self._next_batch())

    def _next_batch(self) -> bytes:
        """The next serialized ``OperationBatch``: up to ``batch`` PUTs within the byte budget (a
        single PUT larger than the budget goes alone, and the server refuses it)."""
        pairs, session, budget, put_tag = self._pairs, self._session, self._budget, ops.PUT.tag
        first = self.sent
        end = min(len(pairs), first + self._batch)
        elements: list[bytes] = []
        size = 0
        for index in range(first, end):
            key, value = pairs[index]
            element = encoding.batch_element(encoding.operation(
                index + 1, put_tag, encoding.write_request(key, value, session)))
            if elements and size + len(element) > budget:
                break
            elements.append(element)
            size += len(element)
        self.sent = first + len(elements)
        return b"".join(elements)

    # ---------------------------------------------------------------- ending

    def _fail_on(self, result: pb.Result) -> None:
        key = self._pairs[result.id - 1][0] if 0 < result.id <= len(self._pairs) else b"?"
        if result.WhichOneof("result") == "error":
            failure = Failure(result.error.code, f"the PUT of key {key[:40]!r} failed: {result.error.message}")
        else:
            failure = Failure("INTERNAL", f"the PUT of key {key[:40]!r} got a {result.WhichOneof('result')!r} result")
        self._finish(failure)

    def _watch(self) -> None:
        if self.done.done():
            return
        if self.acknowledged == self._progress:
            self._finish(Failure(DEADLINE_EXCEEDED, f"no PUT acknowledged for {self._timeout_s:g} s"))
            return
        self._progress = self.acknowledged
        self._watchdog = self._loop.call_later(self._timeout_s, self._watch)

    def _finish(self, failure: Failure | None) -> None:
        if self.done.done():
            return
        if self._watchdog is not None:
            self._watchdog.cancel()
        if failure is None:
            self.done.set_result(self._newest)
        else:
            self.done.set_exception(failure)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._call is not None:
            await self._call.close()


def group_by_partition(pairs: Iterable[tuple[KeyLike, KeyLike]], topology: Topology,
                       ) -> list[list[tuple[bytes, bytes]]]:
    """The pairs of each partition of ``topology``, in the order given, as bytes."""
    grouped: list[list[tuple[bytes, bytes]]] = [[] for _ in range(topology.num_partitions)]
    partition_of = topology.partition_of
    to_bytes = ops.to_bytes
    for pair in pairs:
        try:
            key, value = pair
        except (TypeError, ValueError):
            raise InvalidArgument(f"bulk_put takes (key, value) pairs, not {pair!r}") from None
        key_bytes = to_bytes(key)
        grouped[partition_of(key_bytes)].append((key_bytes, to_bytes(value)))
    return grouped


async def load_partitions(loads: Sequence[PartitionLoad]) -> list[Newest | None]:
    """Wait for every partition's load; ``BulkLoadFailed`` at the first failure (the others are
    stopped, and what they had acknowledged is counted)."""
    try:
        return list(await asyncio.gather(*(load.done for load in loads)))
    except Failure as failure:
        written = sum(load.acknowledged for load in loads)
        error = failure.final_error()
        raise BulkLoadFailed(f"bulk load stopped after {written} acknowledged PUT(s): {error}", written,
                             error) from None
    finally:
        await asyncio.gather(*(load.close() for load in loads), return_exceptions=True)
