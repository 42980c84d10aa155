"""A version 2 native connection hands the frames of one read to the core in one call
(``okapikv.server.native``, ``MAX_OPERATIONS_PER_CALL``): one host step for all of them, every
operation answered in order; the frames before a bad one are served before the refusal; and a
read of more operations than one call takes is split into calls of at most that many."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from okapikv.cluster.config import local_cluster
from okapikv.server import native
from okapikv.server.inbound import PeerIntake
from okapikv.server.native import NativeConnection
from okapikv.server.node import PartitionNode
from okapikv.wire import packed
from okapikv.wire.frames import MAGIC_V2, FrameDecoder, encode_frame


class _Transport:
    """Keeps what the connection writes; no socket."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return None if name == "socket" else ("127.0.0.1", 1)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _frame(first_id: int, count: int) -> bytes:
    return packed.encode_frame(packed.OperationBatch(
        [packed.Put(first_id + index, b"k%d" % (first_id + index), b"v") for index in range(count)]))


def _served(data: bytes) -> tuple[list[Any], int, bool]:
    """The results written for ``data`` (after the preamble) in one read, the host steps taken, and
    whether the connection was closed."""
    async def scenario() -> tuple[list[Any], int, bool]:
        node = PartitionNode(local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=45600), 0, 0)
        node.start()
        try:
            connection = NativeConnection(node, PeerIntake(node))
            transport = _Transport()
            connection.connection_made(transport)  # type: ignore[arg-type]
            connection.data_received(MAGIC_V2)
            before = node.host.pipeline_batches
            connection.data_received(data)
            connection._flush()
            results = [result for frame in FrameDecoder().feed(bytes(transport.written))
                       for result in packed.decode_results(frame).results]
            return results, node.host.pipeline_batches - before, transport.closed
        finally:
            await node.close()
    return asyncio.run(scenario())


def test_the_frames_of_one_read_are_one_core_call() -> None:
    results, steps, closed = _served(_frame(1, 8) + _frame(9, 8) + _frame(17, 3))
    assert [result.id for result in results] == list(range(1, 20))
    assert all(isinstance(result, packed.PutResult) for result in results)
    assert (steps, closed) == (1, False)


def test_the_frames_before_a_bad_one_are_served_then_the_connection_is_refused() -> None:
    results, steps, closed = _served(_frame(1, 2) + _frame(3, 2) + encode_frame(b"\xc1 not msgpack") + _frame(5, 2))
    assert [result.id for result in results[:4]] == [1, 2, 3, 4]
    (refusal,) = results[4:]
    assert isinstance(refusal, packed.Error) and refusal.id == 0 and "not an OperationBatch" in refusal.message
    assert (steps, closed) == (1, True)


def test_a_read_of_more_operations_than_one_call_takes_is_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "MAX_OPERATIONS_PER_CALL", 16)
    results, steps, closed = _served(b"".join(_frame(1 + 8 * index, 8) for index in range(5)))
    assert [result.id for result in results] == list(range(1, 41))
    assert (steps, closed) == (3, False)  # 16 + 16 + 8
