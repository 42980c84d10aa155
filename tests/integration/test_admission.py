"""Every way client work enters a server goes through the one admission policy
(``okapikv.server.admission``): a unary gRPC call, a gRPC Pipeline batch, a native-port batch and
a RESP command each wait once while it says replication lags, and each is answered though the lag
never ends (the wait is bounded: ``ADMISSION_MAX_WAIT_S``, on a fake clock in
tests/unit/test_server_links.py). Driven in-process, with the policy told that replication lags."""

from __future__ import annotations

import asyncio
import json

import grpc.aio
import pytest
from integration_support import free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.server.admission import Admission
from okapikv.server.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.frames import MAGIC, FrameDecoder, encode_frame


async def _admission_waits(stub: pb_grpc.KeyValueStub) -> int:
    waits: int = json.loads((await stub.Stats(pb.StatsRequest())).json)["driver"]["admission_waits"]
    return waits


async def _native_get(port: int) -> pb.ResultBatch:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        batch = pb.OperationBatch()
        batch.operations.add(id=1).get.key = b"unary"
        writer.write(MAGIC + encode_frame(batch.SerializeToString()))
        decoder = FrameDecoder()
        while True:
            frames = decoder.feed(await asyncio.wait_for(reader.read(1 << 16), timeout=10))
            if frames:
                result: pb.ResultBatch = pb.ResultBatch.FromString(frames[0])
                return result
    finally:
        writer.close()


async def _resp_ping(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"*1\r\n$4\r\nPING\r\n")
        return await asyncio.wait_for(reader.readline(), timeout=10)
    finally:
        writer.close()


def test_every_port_waits_on_the_admission_policy_and_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Admission, "backlogged", lambda self: True)  # replication lags, and never catches up
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(1))
    address = config.servers[0].address

    async def main() -> None:
        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop))
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
                resp_port = stats["driver"]["resp_port"]
                native_port = (await stub.ClusterInfo(pb.ClusterInfoRequest())).native_port
                assert stats["driver"]["admission_waits"] == 0

                await asyncio.wait_for(stub.Put(pb.PutRequest(key=b"unary", value=b"v")), timeout=10)
                assert await _admission_waits(stub) == 1

                call = stub.Pipeline()
                batch = pb.OperationBatch()
                batch.operations.add(id=7).get.key = b"unary"
                await call.write(batch)
                results = await asyncio.wait_for(call.read(), timeout=10)
                assert results.results[0].id == 7 and results.results[0].get.value == b"v"
                await call.done_writing()
                assert await _admission_waits(stub) == 2

                native = await _native_get(native_port)
                assert native.results[0].id == 1 and native.results[0].get.value == b"v"
                assert await _admission_waits(stub) == 3

                assert await _resp_ping(resp_port) == b"+PONG\r\n"
                assert await _admission_waits(stub) == 4
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    asyncio.run(main())
