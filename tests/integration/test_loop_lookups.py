"""The RESP and native ports look their event loop up once per connection, not per request: each
``asyncio.get_running_loop()`` is a ``getpid`` system call (it checks for a fork), and two of them
per command were a visible share of the RESP port's CPU. A server runs in this process (1 DC x 1
partition) and the lookups made while it serves 400 requests on one connection are counted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from integration_support import free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.serve.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire import packed
from okapikv.wire.frames import MAGIC_V2, FrameDecoder

REQUESTS = 400
#: lookups allowed for the whole exchange (the connection's own, and what asyncio does once)
LOOKUPS = 20


def _serve_and_count(exchange: Callable[[dict[str, int]], Awaitable[None]], monkeypatch: pytest.MonkeyPatch) -> int:
    """Serve in this loop, then count ``asyncio.get_running_loop`` calls during ``exchange(ports)``."""
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(1))
    lookups = [0]

    async def main() -> None:
        import grpc.aio

        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop))
        try:
            async with grpc.aio.insecure_channel(config.servers[0].address) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                info = await stub.ClusterInfo(pb.ClusterInfoRequest())
                driver = json.loads((await stub.Stats(pb.StatsRequest())).json)["driver"]
            original = asyncio.get_running_loop

            def counted() -> asyncio.AbstractEventLoop:
                lookups[0] += 1
                return original()

            with monkeypatch.context() as patch:
                patch.setattr(asyncio, "get_running_loop", counted)
                ports = {"resp": int(driver["resp_port"]), "native": int(info.native_port)}
                await asyncio.wait_for(exchange(ports), timeout=60)
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    asyncio.run(main())
    return lookups[0]


async def _resp(ports: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", ports["resp"])
    for index in range(REQUESTS // 2):
        writer.write(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%d\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
                     % (len(str(index)), index))
        await writer.drain()
        assert await reader.readline() == b"+OK\r\n"
        assert await reader.readline() == b"$%d\r\n" % len(str(index))
        assert await reader.readline() == b"%d\r\n" % index
    writer.close()


async def _native(ports: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", ports["native"])
    writer.write(MAGIC_V2)
    decoder = FrameDecoder()
    for index in range(1, REQUESTS + 1):
        operation = packed.Put(index, b"k", b"v") if index % 2 else packed.Get(index, b"k")
        writer.write(packed.encode_frame(packed.OperationBatch([operation])))
        frames: list[bytes] = []
        while not frames:
            frames = decoder.feed(await reader.read(65536))
        (result,) = packed.decode_results(frames[0]).results
        assert result.id == index and not isinstance(result, packed.Error)
    writer.close()


@pytest.mark.parametrize("port", ["resp", "native"])
def test_a_connection_looks_its_loop_up_once_not_per_request(port: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = _serve_and_count(_resp if port == "resp" else _native, monkeypatch)
    assert lookups <= LOOKUPS, f"{lookups} event-loop lookups for {REQUESTS} requests on one {port} connection"
