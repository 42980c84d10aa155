"""Bulk loading: many PUTs in large pipelined batches, each straight to its key's partition.

What ``AsyncClient.bulk_put`` and ``Client.bulk_put`` run, and what `okapi load` and the benchmarks'
load phase use. An operation of the ordinary API costs the client a future, an entry in its
pipeline's table and a session merge, and travels in batches of a few operations (the latency of
concurrent sessions wants them small); a load wants none of that. Here:

- the pairs are grouped by partition, and each partition's pairs go over a connection of their
  own to its server (the native port, or the gRPC ``Pipeline`` stream where there is none:
  ``native.AsyncNativeCall``) as bulk PUTs (``PutManyRequest``) of ``BULK_BATCH`` pairs (fewer
  where the cluster's message limit says so), with ``BULK_WINDOW`` of them in flight: the server
  decodes a bulk PUT in one call (msgpack on the native port, protobuf over gRPC) and writes its
  pairs in one core call with one admission and one reply, and on a durable server the bulk PUTs
  that arrive during a commit share the next commit group (``okapikv.storage.group_commit``), so a
  load pays one log record and one fsync per group of thousands of records;
- every pair is a PUT of the session as it was when the load started, encoded once: they are
  concurrent writes of that session (none depends on another). When the load ends the session
  merges the reply session of the newest bulk PUT of each partition, so what was loaded is
  visible to the session's next reads (read-your-writes);
- results are counted as they arrive, with no per-operation future or timer: one deadline watches
  the whole load, restarted whenever results arrive (the client's ``timeout_s`` without progress
  fails the load).

Failures are not retried: a refused bulk PUT (an oversized key or value, a full disk: the server
refuses the whole bulk PUT and writes none of its pairs) or a broken connection ends the load with
``BulkLoadFailed``, which says how many pairs were acknowledged and carries the error of the first
failure. Loading the same pairs again is safe (the same values are
written again, as new versions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from okapikv.client import operations as ops
from okapikv.client.native import AsyncNativeCall, GrpcCall
from okapikv.client.operations import KeyLike
from okapikv.client.retry import DEADLINE_EXCEEDED, Failure
from okapikv.client.topology import Topology
from okapikv.errors import BulkLoadFailed, InvalidArgument
from okapikv.wire import encoding
from okapikv.wire.packed import case_of

#: PUTs per batch: enough that a batch's fixed costs (a message, a core call, a result frame) are
#: spread thin, few enough that a batch's results come back while the next batches are handled.
BULK_BATCH = 2_000
#: Batches' worth of PUTs in flight per partition: the server always has the next batch.
BULK_WINDOW = 4
#: A bulk PUT's bytes beyond its pairs and session: the batch element's and the operation's tags
#: and lengths, the operation id and the session field's tag (at their widest).
BULK_FRAMING_BYTES = 32
#: The ``Operation`` oneof case of ``PutManyRequest`` (field 8, length-delimited) and its result.
PUT_MANY_TAG = b"\x42"
PUT_MANY = "put_many"

#: Opens the call carrying one partition's batches, with this load as its receiver.
OpenCall = Callable[["PartitionLoad"], AsyncNativeCall | GrpcCall]


@dataclass(frozen=True, slots=True)
class Newest:
    """The reply of a partition's newest write: what the session merges when the load ends."""

    timestamp: int
    session: Any  # a pb.Session, or a packed.Session (the native port)


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
        self.sent = 0  # pairs handed to the call (pairs[:sent])
        self._operations = 0  # bulk PUTs sent; their operation ids are 1, 2, ...
        self._ranges: dict[int, tuple[int, int]] = {}  # unanswered operation id -> its pairs' slice
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

    def on_batch(self, results: Sequence[Any]) -> None:
        if self.done.done():
            return
        newest = self._newest
        acknowledged = self.acknowledged
        for result in results:
            which, reply = case_of(result)
            if which != PUT_MANY:
                self._fail_on(result)
                return
            self._ranges.pop(result.id, None)
            acknowledged += reply.count
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
            call.send([self._next_batch()])

    def _next_batch(self) -> bytes:
        """The next serialized ``OperationBatch``: one bulk PUT (``PutManyRequest``) of up to
        ``batch`` pairs within the byte budget (a single pair larger than the budget goes alone,
        and the server refuses it)."""
        pairs, pair = self._pairs, encoding.put_many_pair
        budget = self._budget - len(self._session) - BULK_FRAMING_BYTES
        first = self.sent
        end = min(len(pairs), first + self._batch)
        fields: list[bytes] = []
        size = 0
        for index in range(first, end):
            key, value = pairs[index]
            field = pair(key, value)
            if fields and size + len(field) > budget:
                break
            fields.append(field)
            size += len(field)
        self.sent = first + len(fields)
        self._operations += 1
        self._ranges[self._operations] = (first, self.sent)
        fields.append(encoding.put_many_session(self._session))
        return encoding.batch_element(encoding.operation(self._operations, PUT_MANY_TAG, b"".join(fields)))

    # ---------------------------------------------------------------- ending

    def _fail_on(self, result: Any) -> None:
        first, end = self._ranges.get(result.id, (0, 0))
        what = (f"the bulk PUT of {end - first} pair(s) from key {self._pairs[first][0][:40]!r}" if end
                else f"bulk PUT {result.id}")
        which, body = case_of(result)
        if which == "error":
            failure = Failure(body.code, f"{what} failed: {body.message}")
        else:
            failure = Failure("INTERNAL", f"{what} got a {which!r} result")
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
