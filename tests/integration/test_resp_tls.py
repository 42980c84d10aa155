"""The RESP port with a ``[tls]`` section (servers in-process, 1 DC x 2 partitions): it speaks TLS
only and demands a client certificate (``client_auth``), and a command on a key of the other
partition is forwarded over the cluster's TLS too."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from integration_support import free_port_range
from redis.exceptions import ConnectionError as RedisConnectionError
from tls_support import CertificateAuthority

from okapikv.cluster.config import local_cluster
from okapikv.core.partitioning import partition_of
from okapikv.serve.app import serve
from okapikv.tls import open_aio_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc


def test_resp_over_mutual_tls(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path, "resp")
    server, client = ca.issue("server"), ca.issue("client", server=False)
    config = local_cluster(dcs=("east",), partitions=2, wan="off", base_port=free_port_range(2),
                           cluster_id="resp-tls", tls=ca.server_tls(server))
    keys = {partition_of(f"tls-{i}".encode(), 2): f"tls-{i}" for i in range(20)}

    async def main() -> None:
        stops = [asyncio.Event(), asyncio.Event()]
        tasks = [asyncio.create_task(serve(config, 0, partition, stop=stops[partition])) for partition in (0, 1)]
        try:
            async with open_aio_channel(config.servers[0].address, ca.client_tls(client)) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                port = json.loads((await stub.Stats(pb.StatsRequest())).json)["driver"]["resp_port"]
            good = aioredis.Redis(port=port, ssl=True, ssl_ca_certs=str(ca.path), ssl_certfile=str(client.certificate),
                                  ssl_keyfile=str(client.key), ssl_check_hostname=False)
            for key in keys.values():  # one key of each partition: the second is forwarded
                assert await good.set(key, "secret")
            assert await good.mget(list(keys.values())) == [b"secret", b"secret"]
            await good.aclose()
            plaintext = aioredis.Redis(port=port, socket_timeout=5)
            with pytest.raises((RedisConnectionError, OSError)):
                await plaintext.ping()
            await plaintext.aclose()
            no_certificate = aioredis.Redis(port=port, ssl=True, ssl_ca_certs=str(ca.path), ssl_check_hostname=False,
                                            socket_timeout=5)
            with pytest.raises((RedisConnectionError, ssl.SSLError, OSError)):
                await no_certificate.ping()
            await no_certificate.aclose()
        finally:
            for stop in stops:
                stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=30)

    asyncio.run(main())
