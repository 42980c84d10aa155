"""A durable server writes each loop turn's commit group on its event loop at the turn's end
(``GroupCommitter(on_loop=True)``), so the replies of a turn leave together: a native connection's
GET of a settled key and its PUT, sent in one batch, come back in one frame, and a RESP client's
pipelined GET and SET in one write. Served in-process (one asyncio loop)."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from integration_support import free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.resp.connection import RespConnection
from okapikv.serve.app import serve
from okapikv.storage import group_commit
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire import packed
from okapikv.wire.frames import MAGIC_V2, FrameDecoder


def _serve_durable(check: Callable[[dict[str, Any]], Awaitable[None]], data_dir: pathlib.Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve 1 DC x 1 partition durably in this loop and run ``check`` with the server's Stats
    ``driver`` section (its ports). A write on this shared machine may take tens of milliseconds:
    the slow-write fallback is kept out of the way (``tests/unit/test_loop_commit.py`` tests it)."""
    monkeypatch.setattr(group_commit, "SLOW_WRITE_S", 60.0)
    monkeypatch.setattr(group_commit, "STALL_WRITE_S", 60.0)
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(1))
    address = config.servers[0].address

    async def main() -> None:
        import grpc.aio

        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop, data_dir=str(data_dir)))
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
                await asyncio.wait_for(check(stats["driver"]), timeout=60)
                stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
                assert stats["storage"]["loop_groups"] >= 1
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    asyncio.run(main())


def test_a_native_batchs_read_and_write_are_answered_in_one_frame(tmp_path: pathlib.Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The GET of a key with no write in flight may leave before the PUT's group is durable; it
    waits for the end of the turn instead, where the group is written, and leaves with the PUT's
    reply (with the storage worker it left at once, and the PUT's reply in a frame of its own)."""

    async def check(driver: dict[str, Any]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", driver["native_port"])
        writer.write(MAGIC_V2)
        decoder = FrameDecoder()

        async def answers(count: int) -> list[list[object]]:
            frames: list[list[object]] = []
            while sum(map(len, frames)) < count:
                chunk = await asyncio.wait_for(reader.read(65536), timeout=10)
                assert chunk, "the server closed the connection"
                frames += [packed.decode_results(frame).results for frame in decoder.feed(chunk)]
            return frames

        writer.write(packed.encode_frame(packed.OperationBatch([packed.Put(1, b"settled", b"x")])))
        await answers(1)
        together = [packed.Get(2, b"settled"), packed.Put(3, b"new", b"y")]
        writer.write(packed.encode_frame(packed.OperationBatch(together)))
        (frame,) = await answers(2)
        get, put = frame
        assert isinstance(get, packed.GetResult) and get.id == 2 and get.value == b"x"
        assert isinstance(put, packed.PutResult) and put.id == 3
        writer.close()

    _serve_durable(check, tmp_path, monkeypatch)


def test_a_resp_clients_pipelined_get_and_set_are_answered_in_one_write(tmp_path: pathlib.Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The RESP port's batch run writes the run's commit group before the connections write
    (``GroupCommitter.commit_due``), so the SET's reply joins the GET's."""
    writes: list[bytes] = []
    flush = RespConnection._flush

    def counted(self: RespConnection) -> None:
        if self._out:
            writes.append(b"".join(self._out))
        flush(self)

    monkeypatch.setattr(RespConnection, "_flush", counted)

    async def check(driver: dict[str, Any]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", driver["resp_port"])
        writer.write(b"*3\r\n$3\r\nSET\r\n$7\r\nsettled\r\n$1\r\nx\r\n")
        assert await asyncio.wait_for(reader.readexactly(5), timeout=10) == b"+OK\r\n"
        writer.write(b"*2\r\n$3\r\nGET\r\n$7\r\nsettled\r\n*3\r\n$3\r\nSET\r\n$3\r\nnew\r\n$1\r\ny\r\n")
        assert await asyncio.wait_for(reader.readexactly(12), timeout=10) == b"$1\r\nx\r\n+OK\r\n"
        writer.close()

    _serve_durable(check, tmp_path, monkeypatch)
    assert writes[-2:] == [b"+OK\r\n", b"$1\r\nx\r\n+OK\r\n"]
