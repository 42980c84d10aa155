"""``PipelineSink`` (``okapikv.server.pipeline``): results leave in the order they were delivered,
rejections among them; the sink fills at ``MAX_UNSENT_RESULTS`` results or ``MAX_UNSENT_BYTES``
(counted by the bound ``convert.result_fields`` gives) and has room again once taken; a reply protobuf refuses
costs only its own result."""

from __future__ import annotations

import asyncio

import pytest

from okapikv.core.messages import ClientReply, GetReply, Session, SwapReply, WriteReply
from okapikv.server import pipeline
from okapikv.server.pipeline import MAX_UNSENT_BYTES, PipelineSink
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb

TS = 1764531234567890 << 12
SESSION = Session((TS, TS - 7), TS - 5000)


def _expected(entries: list[tuple[int, str, ClientReply] | tuple[int, str, str]]) -> pb.ResultBatch:
    batch = pb.ResultBatch()
    for operation_id, kind, reply in entries:
        if isinstance(reply, str):
            batch.results.add(id=operation_id, error={"code": kind, "message": reply})
        else:
            batch.results.append(pb.Result(**convert.result_fields(operation_id, kind, reply)[0]))  # type: ignore[arg-type]
    return batch


def test_results_keep_their_order_with_rejections_among_them() -> None:
    ready: list[int] = []
    sink = PipelineSink(on_ready=lambda: ready.append(1))
    sink.outstanding = 3
    assert sink.take() is None
    sink.deliver(7, "get", GetReply(1, b"vvvvvvvv", SESSION))
    sink.reject(3, "INVALID_ARGUMENT", "operation names no request")
    sink.deliver(5, "swap", SwapReply(2, None, TS, SESSION))
    sink.deliver(9, "delete", WriteReply(3, True, TS + 1, SESSION))
    assert (sink.outstanding, len(ready)) == (0, 1)  # on_ready: once, by the first result after a take
    batch = sink.take()
    assert batch is not None
    assert [result.id for result in batch.results] == [7, 3, 5, 9]
    assert [result.WhichOneof("result") for result in batch.results] == ["get", "error", "swap", "delete"]
    assert batch == _expected([(7, "get", GetReply(1, b"vvvvvvvv", SESSION)),
                               (3, "INVALID_ARGUMENT", "operation names no request"),
                               (5, "swap", SwapReply(2, None, TS, SESSION)),
                               (9, "delete", WriteReply(3, True, TS + 1, SESSION))])
    assert batch.results[2].swap.timestamp == TS and not batch.results[2].swap.found
    assert sink.take() is None  # taken: the next batch starts empty
    sink.deliver(8, "get", GetReply(4, None, SESSION))
    again = sink.take()
    assert again is not None and [result.id for result in again.results] == [8]


def test_a_closed_sink_drops_late_replies() -> None:
    sink = PipelineSink(on_ready=lambda: None)
    sink.outstanding = 2
    sink.close()
    sink.deliver(1, "get", GetReply(1, b"v", SESSION))
    sink.reject(2, "INVALID_ARGUMENT", "no")
    assert sink.outstanding == 1
    assert sink.take() is None


def test_the_sink_fills_at_the_result_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "MAX_UNSENT_RESULTS", 5)
    sink = PipelineSink(on_ready=lambda: None)
    for operation_id in range(4):
        sink.deliver(operation_id, "get", GetReply(operation_id, b"v", SESSION))
    assert not sink.full
    sink.reject(4, "INVALID_ARGUMENT", "no")
    assert sink.full
    batch = sink.take()
    assert batch is not None and len(batch.results) == 5
    assert not sink.full


def test_the_sink_fills_at_the_byte_bound() -> None:
    """Large values fill the sink long before the count does: at the first result that brings the
    summed bounds to ``MAX_UNSENT_BYTES``, never later than the exact sizes would."""
    value = b"x" * (1 << 20)
    reply = GetReply(1, value, SESSION)
    sink = PipelineSink(on_ready=lambda: None)
    bound = convert.result_size_bound(reply)
    delivered = 0
    while not sink.full:
        sink.deliver(delivered, "get", reply)
        delivered += 1
    assert delivered == -(-MAX_UNSENT_BYTES // bound)
    batch = sink.take()
    assert batch is not None and len(batch.results) == delivered
    assert len(batch.SerializeToString()) <= delivered * bound
    assert sum(result.ByteSize() for result in batch.results) < MAX_UNSENT_BYTES + bound
    assert not sink.full


def test_next_batch_waits_for_results_and_ends_when_all_are_answered() -> None:
    async def main() -> None:
        sink = PipelineSink()
        sink.outstanding = 2
        waiter = asyncio.ensure_future(sink.next_batch())
        await asyncio.sleep(0)
        assert not waiter.done()
        sink.deliver(1, "put", WriteReply(1, False, TS, SESSION))
        sink.deliver(2, "get", GetReply(2, b"v", SESSION))
        first = await asyncio.wait_for(waiter, 5)
        assert first is not None and [result.id for result in first.results] == [1, 2]
        assert first.results[0].WhichOneof("result") == "put"
        sink.finish_reading()
        assert await asyncio.wait_for(sink.next_batch(), 5) is None

    asyncio.run(main())


def test_a_reply_protobuf_refuses_costs_only_its_own_result() -> None:
    """A timestamp out of uint64 range (a core bug) fails that result alone, as INTERNAL."""
    sink = PipelineSink(on_ready=lambda: None)
    sink.deliver(1, "get", GetReply(1, b"a", SESSION))
    sink.deliver(2, "put", WriteReply(2, True, 1 << 64, SESSION))
    sink.deliver(3, "get", GetReply(3, b"c", SESSION))
    batch = sink.take()
    assert batch is not None
    assert [result.id for result in batch.results] == [1, 2, 3]
    assert [result.WhichOneof("result") for result in batch.results] == ["get", "error", "get"]
    assert batch.results[1].error.code == "INTERNAL"
    assert (batch.results[0].get.value, batch.results[2].get.value) == (b"a", b"c")
