"""Result batching for one Pipeline stream.

A client sends ``OperationBatch`` messages and reads ``ResultBatch`` messages; results come back
in whatever order the core produces them (a parked Cure/GentleRain operation answers later than
the ones after it), matched by the client's operation ids.

Replies are appended to the batch being built as the core produces them; the stream's writer sends
that batch once it gets to run, so every result ready in the same event-loop turn (and any that
arrive while a previous write is in flight) share one gRPC message. A client that stops reading
cannot make the server buffer without bound: the reader stops taking new operations while too
many results, or too many bytes of them, wait to be written (a count alone let a client that reads
64 KiB values and never takes its results pin gigabytes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from okapikv.core.messages import ClientReply
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import fill_error, fill_result

MAX_UNSENT_RESULTS = 50_000
MAX_UNSENT_BYTES = 32 << 20


class PipelineSink:
    """``on_ready`` (the native port's connections): called instead of waking ``next_batch`` when a
    result is added, so the connection can write without a task of its own."""

    __slots__ = ("outstanding", "reading", "closed", "on_ready", "_batch", "_bytes", "_ready", "_room")

    def __init__(self, on_ready: Callable[[], None] | None = None) -> None:
        self.on_ready = on_ready
        self.outstanding = 0  # operations handed to the core and not answered yet
        self.reading = True  # the client may still send operations
        self.closed = False  # the stream is gone: drop late replies
        self._batch = pb.ResultBatch()
        self._bytes = 0  # serialized size of the results in _batch
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def deliver(self, operation_id: int, kind: str, reply: ClientReply) -> None:
        self.outstanding -= 1
        if self.closed:
            return
        result = self._batch.results.add()
        result.id = operation_id
        fill_result(result, kind, reply)
        self._bytes += result.ByteSize()
        self._signal()

    def reject(self, operation_id: int, code: str, message: str) -> None:
        """Answer an operation the core never saw (malformed, or the handler failed)."""
        if self.closed:
            return
        result = self._batch.results.add()
        result.id = operation_id
        fill_error(result, code, message)
        self._bytes += result.ByteSize()
        self._signal()

    def finish_reading(self) -> None:
        self.reading = False
        self._ready.set()

    def _signal(self) -> None:
        if self.on_ready is None:
            self._ready.set()
        else:
            self.on_ready()
        if len(self._batch.results) >= MAX_UNSENT_RESULTS or self._bytes >= MAX_UNSENT_BYTES:
            self._room.clear()

    @property
    def full(self) -> bool:
        """Too many results wait to be written: stop taking operations (``wait_for_room``)."""
        return not self._room.is_set()

    def take(self) -> pb.ResultBatch | None:
        """The results ready now, or None if there are none."""
        if not len(self._batch.results):
            return None
        batch = self._batch
        self._batch = pb.ResultBatch()
        self._bytes = 0
        self._room.set()
        return batch

    async def wait_for_room(self) -> None:
        await self._room.wait()

    async def next_batch(self) -> pb.ResultBatch | None:
        """The results ready now (waiting for at least one), or None once the client has stopped
        sending and every operation is answered."""
        while True:
            batch = self.take()
            if batch is not None:
                return batch
            if not self.reading and self.outstanding <= 0:
                return None
            self._ready.clear()
            await self._ready.wait()

    def close(self) -> None:
        self.closed = True
        self._room.set()
