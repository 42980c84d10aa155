"""A pipeline hands results to a ``Waiter`` that is not a future at once (``okapikv.client.aio``).

The RESP port's forwarded commands wait on the connection itself (``okapikv.resp.connection``):
its result must reach it inside the handling of the result batch (no future, no callback a turn
later), and a deadline or a broken pipeline must reach it as an exception, exactly once.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from okapikv.client import aio
from okapikv.client import operations as ops
from okapikv.client.retry import Failure
from okapikv.wire import packed


class Recorder:
    def __init__(self) -> None:
        self.results: list[Any] = []
        self.errors: list[BaseException] = []

    def done(self) -> bool:
        return bool(self.results or self.errors)

    def set_result(self, result: Any) -> None:
        self.results.append(result)

    def set_exception(self, exception: BaseException) -> None:
        self.errors.append(exception)


class Call:
    ready = True
    chunk = 8
    packed = False

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []

    def send(self, batch: list[bytes]) -> None:
        self.sent.append(batch)

    def cancel(self) -> None: ...


def _pipeline(call: Call, tick_s: float = 0.01) -> aio._Pipeline:
    return aio._Pipeline(lambda receiver: call, 8, 1 << 20, tick_s)  # type: ignore[arg-type, return-value]


def test_a_result_reaches_its_waiter_inside_the_batch() -> None:
    async def run() -> None:
        call = Call()
        pipeline = _pipeline(call)
        loop = asyncio.get_running_loop()
        first, second = Recorder(), Recorder()
        one = pipeline.enqueue(ops.GET, ops.get_request(b"a", ops.SessionState(2).wire()), loop.time() + 5, first)
        two = pipeline.enqueue(ops.GET, ops.get_request(b"b", ops.SessionState(2).wire()), loop.time() + 5, second)
        await asyncio.sleep(0)
        assert len(call.sent) == 1 and len(call.sent[0]) == 2  # one batch of both
        pipeline.on_batch([SimpleNamespace(id=two)])
        assert [result.id for result in second.results] == [two] and not first.done()  # no turn needed
        pipeline.on_batch([SimpleNamespace(id=two), SimpleNamespace(id=one)])  # a repeat is dropped
        assert len(second.results) == 1 and [result.id for result in first.results] == [one]

    asyncio.run(run())


def test_a_deadline_and_a_broken_pipeline_reach_their_waiters_once() -> None:
    async def run() -> None:
        pipeline = _pipeline(Call())
        loop = asyncio.get_running_loop()
        late, broken = Recorder(), Recorder()
        pipeline.enqueue(ops.GET, ops.get_request(b"a", ops.SessionState(2).wire()), loop.time() + 0.02, late)
        pipeline.enqueue(ops.GET, ops.get_request(b"b", ops.SessionState(2).wire()), loop.time() + 60, broken)
        await asyncio.sleep(0.1)
        assert [type(error) for error in late.errors] == [TimeoutError] and not broken.done()
        pipeline.on_failure(Failure("UNAVAILABLE", "gone"))
        pipeline.on_failure(Failure("UNAVAILABLE", "gone again"))
        assert [str(error) for error in broken.errors] == ["UNAVAILABLE: gone"] and len(late.errors) == 1

    asyncio.run(run())


def test_a_packed_pipeline_carries_operations_built_in_msgpack_and_in_protobuf_in_order() -> None:
    async def run() -> None:
        call = Call()
        call.packed = True
        pipeline = _pipeline(call)
        assert pipeline.packed
        deadline = asyncio.get_running_loop().time() + 5
        session = (3, 4), 5
        pipeline.enqueue_packed(packed.tag_of["put"], (b"a", b"x", session), deadline, Recorder())
        fresh = ops.SessionState(2).wire()
        pipeline.enqueue(ops.GET, ops.get_request(b"b", fresh), deadline, Recorder())  # a coroutine's operation
        pipeline.enqueue_packed(packed.tag_of["delete"], (b"c", session), deadline, Recorder())
        await asyncio.sleep(0)
        (batch,) = call.sent
        operations = packed.decode_operations(packed.frame_of(batch)[4:]).operations
        assert operations == [packed.Put(1, b"a", b"x", packed.Session((3, 4), 5)),
                              packed.Get(2, b"b", packed.Session((0, 0))),
                              packed.Delete(3, b"c", packed.Session((3, 4), 5))]

    asyncio.run(run())
