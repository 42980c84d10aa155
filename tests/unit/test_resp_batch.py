"""The RESP port's core batch (``okapikv.resp.batch``) on a fake node: the requests of a loop turn go
to the core in one call, at most ``MAX_CALL`` a call; a connection whose replies start its next
commands continues in the same run, for at most ``MAX_CALLS`` calls before others get the loop;
every connection that got replies is flushed once at the end of the run; a request the server
refuses before the core is answered at once and never reaches it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from okapikv.core.messages import ClientReply, ErrorCode, ErrorReply, GetReply, GetRequest, Message, Session
from okapikv.resp.batch import MAX_CALL, MAX_CALLS, CoreBatch
from okapikv.server.node import PartitionNode

SESSION = Session((0,), 0)


class FakeHost:
    def __init__(self) -> None:
        self.table: dict[int, Any] = {}
        self.refuse: set[int] = set()

    def refusal(self, request: GetRequest) -> ErrorReply | None:
        if request.request_id in self.refuse:
            return ErrorReply(request.request_id, ErrorCode.RESOURCE_EXHAUSTED, "disk full")
        return None

    def expect(self, request_id: int, entry: Any) -> None:
        self.table[request_id] = entry


class FakeNode:
    """Answers every GET at once, as an in-memory core does, through the reply table."""

    def __init__(self) -> None:
        self.host = FakeHost()
        self.calls: list[int] = []

    def run_core(self, messages: Sequence[Message]) -> None:
        self.calls.append(len(messages))
        for message in messages:
            assert isinstance(message, GetRequest)
            sink, operation_id, kind, _ = self.host.table.pop(message.request_id)
            sink.deliver(operation_id, kind, GetReply(message.request_id, message.key, SESSION))

    def commit_due(self) -> None:
        """An in-memory node has no commit group to write before the replies."""


class FakeConnection:
    """Sends ``commands`` GETs one after the other, each once the one before has its reply."""

    ids = iter(range(1, 1 << 30))

    def __init__(self, batch: CoreBatch, commands: int) -> None:
        self.batch = batch
        self.left = commands
        self.replies: list[bytes] = []
        self.flushes = 0
        self.touched = False

    def start(self) -> None:
        self.left -= 1
        assert self.batch.submit(GetRequest(next(self.ids), b"k", SESSION), self, "get") is None

    def deliver(self, operation_id: int, kind: str, reply: ClientReply) -> None:
        assert isinstance(reply, GetReply) and reply.value is not None
        self.replies.append(reply.value)
        if not self.touched:
            self.touched = True
            self.batch.touch(self)
        if self.left:
            self.start()

    def flush(self) -> None:
        self.touched = False
        self.flushes += 1


def _batch(node: FakeNode) -> CoreBatch:
    return CoreBatch(cast(PartitionNode, node), asyncio.get_running_loop())


def test_a_turns_requests_share_one_core_call_and_each_connection_one_flush() -> None:
    async def main() -> None:
        node = FakeNode()
        batch = _batch(node)
        connections = [FakeConnection(batch, 3) for _ in range(10)]
        for connection in connections:
            connection.start()
        assert node.calls == []  # at the end of the turn, not per request
        await asyncio.sleep(0)
        assert node.calls == [10, 10, 10]  # each connection's next command joins the next call
        assert all(len(connection.replies) == 3 and connection.flushes == 1 for connection in connections)
        assert (batch.calls, batch.requests) == (3, 30)

    asyncio.run(main())


def test_a_call_takes_at_most_max_call_requests() -> None:
    async def main() -> None:
        node = FakeNode()
        batch = _batch(node)
        for _ in range(2 * MAX_CALL + 5):
            FakeConnection(batch, 1).start()
        await asyncio.sleep(0)
        assert node.calls == [MAX_CALL, MAX_CALL, 5]

    asyncio.run(main())


def test_a_long_pipeline_lets_the_loop_run_others_between_runs() -> None:
    async def main() -> None:
        node = FakeNode()
        batch = _batch(node)
        connection = FakeConnection(batch, 3 * MAX_CALLS)
        connection.start()
        others: list[int] = []
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: others.append(len(node.calls)))  # queued behind the first run
        await asyncio.sleep(0)
        assert others == [MAX_CALLS]  # the first run stopped after MAX_CALLS calls
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(connection.replies) == 3 * MAX_CALLS
        assert connection.flushes == 3  # one per run

    asyncio.run(main())


def test_a_request_refused_before_the_core_is_answered_at_once() -> None:
    async def main() -> None:
        node = FakeNode()
        batch = _batch(node)
        node.host.refuse.add(7)
        refused = batch.submit(GetRequest(7, b"k", SESSION), FakeConnection(batch, 0), "get")
        assert isinstance(refused, ErrorReply) and refused.message == "disk full"
        await asyncio.sleep(0)
        assert node.calls == [] and node.host.table == {}

    asyncio.run(main())
