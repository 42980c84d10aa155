"""The server driven in-process (one asyncio loop, no subprocess), so failures can be injected:
a handler that raises is answered INTERNAL and the server keeps serving; while replication lags,
every way client work enters waits on the one admission policy, for a bounded time."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable

import grpc
import grpc.aio
import pytest
from integration_support import free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.core.server import PartitionServer
from okapikv.serve.app import GC_THRESHOLDS, serve
from okapikv.server import node as node_module
from okapikv.server.admission import Admission
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.frames import MAGIC, FrameDecoder, encode_frame


def _run(check: Callable[[pb_grpc.KeyValueStub], Awaitable[None]]) -> None:
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(1))
    address = config.servers[0].address

    async def main() -> None:
        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop))
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                await asyncio.wait_for(check(stub), timeout=60)
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    asyncio.run(main())


def test_a_server_collects_with_a_large_young_generation_and_gives_the_collector_back() -> None:
    """``GC_THRESHOLDS`` while serving (a request's objects die young instead of counting towards
    full passes over the whole store), the thresholds it found once it stops."""
    found = gc.get_threshold()
    before = (700, 10, 10)  # CPython's default, set here so the test does not depend on earlier ones
    gc.set_threshold(*before)

    async def check(stub: pb_grpc.KeyValueStub) -> None:
        await stub.Put(pb.PutRequest(key=b"k", value=b"v"))
        assert gc.get_threshold() == GC_THRESHOLDS != before

    try:
        _run(check)
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*found)


def test_a_failing_handler_answers_internal_and_the_server_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object) -> str:
        raise RuntimeError("boom")

    async def check(stub: pb_grpc.KeyValueStub) -> None:
        with monkeypatch.context() as patch:
            patch.setattr(node_module.PartitionNode, "stats_json", broken)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.Stats(pb.StatsRequest())
            assert raised.value.code() == grpc.StatusCode.INTERNAL
            assert "boom" in (raised.value.details() or "")
        await stub.Put(pb.PutRequest(key=b"k", value=b"v"))
        assert (await stub.Get(pb.GetRequest(key=b"k"))).value == b"v"
        assert json.loads((await stub.Stats(pb.StatsRequest())).json)["keys"] == 1

    _run(check)


def test_a_core_failure_fails_only_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    original = PartitionServer.handle_batch
    failures = {"left": 1}

    def flaky(self: PartitionServer, messages: object, now_us: int) -> object:
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("core bug")
        return original(self, messages, now_us)  # type: ignore[arg-type]

    monkeypatch.setattr(PartitionServer, "handle_batch", flaky)

    async def check(stub: pb_grpc.KeyValueStub) -> None:
        call = stub.Pipeline()
        first = pb.OperationBatch()
        for index in range(3):
            operation = first.operations.add(id=index)
            operation.put.key = b"k%d" % index
            operation.put.value = b"v"
        await call.write(first)
        results = (await call.read()).results
        assert sorted(r.id for r in results) == [0, 1, 2]
        assert all(r.error.code == "INTERNAL" for r in results)
        second = pb.OperationBatch()
        for index in range(3):
            operation = second.operations.add(id=10 + index)
            operation.put.key = b"k%d" % index
            operation.put.value = b"w"
        await call.write(second)
        await call.done_writing()
        answered: list[pb.Result] = []
        while len(answered) < 3:
            answered.extend((await call.read()).results)
        assert sorted(r.id for r in answered) == [10, 11, 12]
        assert all(r.WhichOneof("result") == "put" for r in answered)
        stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
        assert stats["driver"]["handler_errors"] == 1

    _run(check)


async def _admission_waits(stub: pb_grpc.KeyValueStub) -> int:
    waits: int = json.loads((await stub.Stats(pb.StatsRequest())).json)["driver"]["admission_waits"]
    return waits


async def _native_get(port: int, key: bytes) -> pb.ResultBatch:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        batch = pb.OperationBatch()
        batch.operations.add(id=1).get.key = key
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


def test_every_port_waits_on_the_admission_policy_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unary gRPC call, a gRPC Pipeline batch, a native-port batch and a RESP command each wait
    once while the policy (``okapikv.server.admission``) says replication lags, and each is
    answered though the lag never ends (the bound, ``ADMISSION_MAX_WAIT_S``, is tested on a fake
    clock in tests/unit/test_server_links.py)."""
    monkeypatch.setattr(Admission, "backlogged", lambda self: True)  # replication lags, and never catches up

    async def check(stub: pb_grpc.KeyValueStub) -> None:
        stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
        resp_port = stats["driver"]["resp_port"]
        native_port = (await stub.ClusterInfo(pb.ClusterInfoRequest())).native_port
        assert stats["driver"]["admission_waits"] == 0

        await stub.Put(pb.PutRequest(key=b"k", value=b"v"), timeout=10)
        assert await _admission_waits(stub) == 1

        call = stub.Pipeline()
        batch = pb.OperationBatch()
        batch.operations.add(id=7).get.key = b"k"
        await call.write(batch)
        results = await asyncio.wait_for(call.read(), timeout=10)
        assert results.results[0].id == 7 and results.results[0].get.value == b"v"
        await call.done_writing()
        assert await _admission_waits(stub) == 2

        native = await _native_get(native_port, b"k")
        assert native.results[0].id == 1 and native.results[0].get.value == b"v"
        assert await _admission_waits(stub) == 3

        assert await _resp_ping(resp_port) == b"+PONG\r\n"
        assert await _admission_waits(stub) == 4

    _run(check)
