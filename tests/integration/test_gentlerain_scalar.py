"""GentleRain scalar end to end on real servers (in one process): its sessions, snapshots and
stabilization travel as one time (docs/protocol.md, "GentleRain"; ``okapikv.wire.convert``), and
both clients read and write through it as through the vector protocols: PUT, GET, RO-TX and SCAN
across two partitions, and a write of one DC read in the other once the GST covers it."""

from __future__ import annotations

import asyncio
import json

import grpc.aio
from integration_support import free_port_range

from okapikv.client.aio import AsyncClient
from okapikv.client.sync import Client
from okapikv.cluster.config import local_cluster
from okapikv.serve.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc


async def _eventually(probe: object, timeout_s: float = 20.0) -> object:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        result = await probe()  # type: ignore[operator]
        if result:
            return result
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def test_gentlerain_serves_both_clients_with_scalar_sessions_and_snapshots() -> None:
    config = local_cluster(dcs=("dc0", "dc1"), partitions=2, protocol="gentlerain", wan=2.0,
                           base_port=free_port_range(4), resp=False)
    addresses = [server.address for server in config.servers]  # dc-major: dc0 p0, dc0 p1, dc1 p0, dc1 p1

    async def main() -> None:
        stop = asyncio.Event()
        servers = [asyncio.create_task(serve(config, dc, partition, stop=stop))
                   for dc in range(2) for partition in range(2)]
        try:
            async with AsyncClient(addresses[0], timeout_s=20) as client:
                keys = [b"key-%d" % index for index in range(6)]
                for key in keys:
                    await client.put(key, b"v-" + key)
                assert await client.read_tx(keys) == [b"v-" + key for key in keys]
                assert await client.scan(b"key-", b"key-9") == [(key, b"v-" + key) for key in keys]
                assert await client.get(keys[3]) == b"v-key-3"
            async with AsyncClient(addresses[3], timeout_s=20, native=False) as remote:
                async def replicated() -> bool:
                    return await remote.read_tx(keys[:2]) == [b"v-key-0", b"v-key-1"]
                await _eventually(replicated)
            # the blocking client, off the servers' loop
            def blocking() -> list[bytes | None]:
                with Client(addresses[1], timeout_s=20) as sync_client:
                    sync_client.put(b"key-s", b"sync")
                    return sync_client.read_tx([b"key-s", b"key-0"])
            assert await asyncio.to_thread(blocking) == [b"sync", b"v-key-0"]

            async with grpc.aio.insecure_channel(addresses[0]) as channel:
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]

                async def scalar_session() -> pb.Session | None:
                    session = (await stub.Get(pb.GetRequest(key=b"key-0"))).session
                    return session if session.time else None
                session = await _eventually(scalar_session)
                assert isinstance(session, pb.Session)
                assert list(session.stable) == []  # one time, no vector
                stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
                assert stats["stable"][0] == stats["stable"][1] >= session.time  # the GST in every entry
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*servers), timeout=30)

    asyncio.run(main())
