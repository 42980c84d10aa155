"""Forwarding on the RESP port (docs/resp.md, "Forwarding"), both servers of a 1 DC x 2 partition
in-memory cluster in this process's loop: commands of many connections on keys of the other
partition share hops (one operation batch carries many of them to that partition's server, one
hop each), while each connection's own commands keep their order and each gets its own reply,
errors included, in place; with a third partition's server stopped, its keys' commands answer an
error within the forward deadline and the others are served."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from integration_support import free_port_range

from okapikv.client.aio import AsyncClient
from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.core.partitioning import partition_of
from okapikv.resp.limits import RespLimits
from okapikv.serve import app
from okapikv.serve.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

pytestmark = pytest.mark.timeout(120)
CONNECTIONS = 32
FORWARD_TIMEOUT_S = 1.0


def _keys(partition: int, count: int, partitions: int = 2) -> list[bytes]:
    keys = (f"fwd-{index}".encode() for index in range(100_000))
    return [key for key, _ in zip((k for k in keys if partition_of(k, partitions) == partition), range(count),
                                  strict=False)]


async def _driver(config: ClusterConfig, partition: int) -> dict[str, int]:
    import grpc.aio

    async with grpc.aio.insecure_channel(config.servers[partition].address) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout=30)
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        driver: dict[str, int] = json.loads((await stub.Stats(pb.StatsRequest(), timeout=10)).json)["driver"]
        return driver


def _run(check: Callable[[ClusterConfig, int], Awaitable[None]], partitions: int = 2,
         stops: list[asyncio.Event] | None = None, protocol: str = "okapi") -> None:
    """Serve the partitions in this loop and run ``check(config, RESP port of partition 0)``;
    ``stops``: filled with each partition's stop event, so a check can stop one."""
    config = local_cluster(dcs=("solo",), partitions=partitions, wan="off", base_port=free_port_range(partitions),
                           protocol=protocol)

    async def main() -> None:
        events = [asyncio.Event() for _ in range(partitions)]
        if stops is not None:
            stops.extend(events)
        servers = [asyncio.create_task(serve(config, 0, partition, stop=event))
                   for partition, event in enumerate(events)]
        try:
            port = 0
            for _ in range(300):
                port = (await _driver(config, 0)).get("resp_port", 0)
                if port:
                    break
                await asyncio.sleep(0.1)
            await asyncio.wait_for(check(config, port), timeout=60)
        finally:
            for event in events:
                event.set()
            await asyncio.wait_for(asyncio.gather(*servers), timeout=30)

    asyncio.run(main())


def test_concurrent_commands_of_many_connections_share_hops_to_the_other_partition() -> None:
    remote = _keys(1, CONNECTIONS)

    async def check(config: ClusterConfig, port: int) -> None:
        clients = [aioredis.Redis(port=port, single_connection_client=True) for _ in range(CONNECTIONS)]
        try:
            await asyncio.gather(*(client.set(key, b"v-" + key) for client, key in zip(clients, remote, strict=True)))
            before = await _driver(config, 1)
            for _ in range(3):
                values = await asyncio.gather(*(client.get(key) for client, key in zip(clients, remote, strict=True)))
                assert values == [b"v-" + key for key in remote]
            after = await _driver(config, 1)
        finally:
            for client in clients:
                await client.aclose()
        operations = after["client_requests"] - before["client_requests"]
        hops = after["pipeline_batches"] - before["pipeline_batches"]
        assert operations == 3 * CONNECTIONS  # every GET went to partition 1's server once
        assert hops <= operations // 4, f"{operations} forwarded GETs took {hops} operation batches"

    _run(check)


@pytest.mark.parametrize("protocol", ["okapi", "gentlerain"])  # vector and scalar sessions, as forwarded
def test_a_connection_keeps_its_order_and_each_command_its_own_reply_or_error(protocol: str) -> None:
    local, remote = _keys(0, 2), _keys(1, 2)

    async def check(config: ClusterConfig, port: int) -> None:
        async def pipeline(client: aioredis.Redis, near: bytes, far: bytes, tag: bytes) -> list[object]:
            block = client.pipeline(transaction=False)
            block.set(far, tag + b"1").get(far).incr(far).set(far, b"7").incr(far).get(far)
            block.set(near, tag).get(near).incr(far, 3).get(far).delete(far).get(far)
            return list(await block.execute(raise_on_error=False))

        clients = [aioredis.Redis(port=port, single_connection_client=True) for _ in range(2)]
        try:
            results = await asyncio.gather(*(pipeline(client, near, far, tag) for client, near, far, tag
                                             in zip(clients, local, remote, (b"a", b"b"), strict=True)))
        finally:
            for client in clients:
                await client.aclose()
        for replies, tag in zip(results, (b"a", b"b"), strict=True):
            error = replies[2]
            assert isinstance(error, aioredis.ResponseError) and "integer" in str(error)  # forwarded, in place
            assert replies[:2] == [True, tag + b"1"]
            assert replies[3:] == [True, 8, b"8", True, tag, 11, b"11", 1, None]

    _run(check, protocol=protocol)


def test_a_partition_down_fails_its_keys_only_within_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 DC x 3 partitions; partition 2's server stops after serving forwarded commands. A pipeline
    over keys of all three: partition 2's commands (each sent once without a coroutine, then by the
    Executor with the client's retries) answer an unavailable error within the forward deadline,
    each; the others their values, in order."""
    original = RespLimits.from_config

    def short(config: ClusterConfig, max_read_keys: int) -> RespLimits:
        return dataclasses.replace(original(config, max_read_keys), forward_timeout_s=FORWARD_TIMEOUT_S)

    monkeypatch.setattr(app.RespLimits, "from_config", staticmethod(short))
    attempted: list[bytes] = []  # keys whose commands were sent without the Executor
    attempt = AsyncClient.attempt

    def counting(self: AsyncClient, kind: Any, key: bytes, value: bytes | None, now: float, waiter: Any) -> bool:
        attempted.append(key)
        return attempt(self, kind, key, value, now, waiter)

    monkeypatch.setattr(AsyncClient, "attempt", counting)
    stops: list[asyncio.Event] = []
    keys = [_keys(partition, 1, 3)[0] for partition in range(3)]

    async def check(config: ClusterConfig, port: int) -> None:
        client = aioredis.Redis(port=port, single_connection_client=True, socket_timeout=30)
        try:
            for key in keys * 2:  # the Executor forwards only the first command, which makes the client
                assert await client.set(key, b"v-" + key) and await client.get(key) == b"v-" + key
            assert attempted.count(keys[2]) == 4 and keys[0] not in attempted
            stops[2].set()
            for _ in range(200):
                if _down(config.servers[2].address):
                    break
                await asyncio.sleep(0.05)
            block = client.pipeline(transaction=False)
            block.get(keys[1]).get(keys[2]).set(keys[2], b"x").get(keys[0]).set(keys[1], b"y").get(keys[1])
            started = time.monotonic()
            replies = await block.execute(raise_on_error=False)
            elapsed = time.monotonic() - started
        finally:
            await client.aclose()
        assert replies[0] == b"v-" + keys[1] and replies[3] == b"v-" + keys[0] and replies[4:] == [True, b"y"]
        for error in replies[1:3]:
            assert isinstance(error, aioredis.ResponseError) and "unavailable" in str(error).lower(), error
        assert attempted.count(keys[2]) == 6  # then, after the failure, the Executor
        assert elapsed < 2 * 2 * FORWARD_TIMEOUT_S + 2, f"{elapsed:.1f} s for two commands to a stopped server"

    _run(check, partitions=3, stops=stops)


def _down(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False
