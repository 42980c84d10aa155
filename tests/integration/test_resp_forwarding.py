"""Forwarding on the RESP port (docs/resp.md, "Forwarding"), both servers of a 1 DC x 2 partition
in-memory cluster in this process's loop: commands of many connections on keys of the other
partition share hops (one operation batch carries many of them to that partition's server, one
hop each), while each connection's own commands keep their order and each gets its own reply,
errors included, in place."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis
from integration_support import free_port_range

from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.core.partitioning import partition_of
from okapikv.serve.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

pytestmark = pytest.mark.timeout(120)
CONNECTIONS = 32


def _keys(partition: int, count: int) -> list[bytes]:
    keys = (f"fwd-{index}".encode() for index in range(100_000))
    return [key for key, _ in zip((k for k in keys if partition_of(k, 2) == partition), range(count), strict=False)]


async def _driver(config: ClusterConfig, partition: int) -> dict[str, int]:
    import grpc.aio

    async with grpc.aio.insecure_channel(config.servers[partition].address) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout=30)
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        driver: dict[str, int] = json.loads((await stub.Stats(pb.StatsRequest(), timeout=10)).json)["driver"]
        return driver


def _run(check: Callable[[ClusterConfig, int], Awaitable[None]]) -> None:
    """Serve both partitions in this loop and run ``check(config, RESP port of partition 0)``."""
    config = local_cluster(dcs=("solo",), partitions=2, wan="off", base_port=free_port_range(2))

    async def main() -> None:
        stop = asyncio.Event()
        servers = [asyncio.create_task(serve(config, 0, partition, stop=stop)) for partition in (0, 1)]
        try:
            port = 0
            for _ in range(300):
                port = (await _driver(config, 0)).get("resp_port", 0)
                if port:
                    break
                await asyncio.sleep(0.1)
            await asyncio.wait_for(check(config, port), timeout=60)
        finally:
            stop.set()
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


def test_a_connection_keeps_its_order_and_each_command_its_own_reply_or_error() -> None:
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

    _run(check)
