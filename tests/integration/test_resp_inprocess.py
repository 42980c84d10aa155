"""The RESP port driven in-process (one asyncio loop), so its limits can be shortened: a client
that sends half a request and waits gets one error and a closed connection once the frame deadline
passes, while another client goes on being served and loses no write; a request that keeps
arriving, a piece at a time, within the deadline is not cut off; a connection over the port's
connection limit is refused with an error."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis
from integration_support import free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.resp import limits as limits_module
from okapikv.resp.limits import RespLimits
from okapikv.server import app
from okapikv.server.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

FRAME_TIMEOUT_S = 0.5


def _run(check: Callable[[int], Awaitable[None]], monkeypatch: pytest.MonkeyPatch, **limits: object) -> None:
    def short(config: object, max_read_keys: int) -> RespLimits:
        return dataclasses.replace(original(config, max_read_keys), frame_timeout_s=FRAME_TIMEOUT_S,  # type: ignore[arg-type]
                                   **limits)  # type: ignore[arg-type]

    original = limits_module.RespLimits.from_config
    monkeypatch.setattr(app.RespLimits, "from_config", staticmethod(short))
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(1))
    address = config.servers[0].address

    async def main() -> None:
        import grpc.aio

        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop))
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
                await asyncio.wait_for(check(stats["driver"]["resp_port"]), timeout=60)
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    asyncio.run(main())


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    received = b""
    while chunk := await reader.read(65536):
        received += chunk
    return received


def test_a_half_sent_request_times_out_and_others_are_served(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nva")  # ... and waits
        started = time.monotonic()
        other = aioredis.Redis(port=port)
        for index in range(50):  # meanwhile another client is served
            assert await other.set(f"other-{index}", str(index))
        received = await asyncio.wait_for(_read_until_closed(reader), timeout=10)
        waited = time.monotonic() - started
        assert received == (b"+PONG\r\n-ERR Protocol error: a request stayed incomplete for "
                            b"%g s\r\n" % FRAME_TIMEOUT_S)
        assert FRAME_TIMEOUT_S * 0.8 < waited < FRAME_TIMEOUT_S + 5
        writer.close()
        assert await other.get("half") is None
        assert await other.mget([f"other-{index}" for index in range(50)]) == [str(i).encode() for i in range(50)]
        await other.aclose()

    _run(check, monkeypatch)


def test_a_request_that_keeps_arriving_is_not_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request completes within the deadline, though some read always ends inside one."""

    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frames = b"".join(b"*3\r\n$3\r\nSET\r\n$3\r\nk%02d\r\n$2\r\nvv\r\n" % index for index in range(12))
        step = len(frames) // 12 + 3  # never on a frame boundary
        for start in range(0, len(frames), step):
            writer.write(frames[start:start + step])
            await writer.drain()
            await asyncio.sleep(FRAME_TIMEOUT_S / 3)
        received = b""
        while received.count(b"\r\n") < 12:
            received += await asyncio.wait_for(reader.read(65536), timeout=10)
        assert received == b"+OK\r\n" * 12
        writer.close()

    _run(check, monkeypatch)


def test_a_connection_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check(port: int) -> None:
        first, second = aioredis.Redis(port=port), aioredis.Redis(port=port)
        assert await first.ping() and await second.ping()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        refusal = await asyncio.wait_for(_read_until_closed(reader), timeout=10)
        assert refusal == b"-ERR max number of clients reached\r\n"
        writer.close()
        await second.aclose()
        for _ in range(100):  # a place is free again once the server has seen the close
            try:
                third = aioredis.Redis(port=port, single_connection_client=True)
                assert await third.ping()
                await third.aclose()
                break
            except Exception:  # noqa: BLE001 - refused while the close is in flight
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("no connection accepted after one closed")
        await first.aclose()

    _run(check, monkeypatch, max_connections=2)
