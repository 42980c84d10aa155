"""TLS on the client API and the peer links (docs/operations.md, "TLS"), with servers run in-process on one loop.

What must hold: with a ``[tls]`` section, clients with a good certificate and peers work; a peer
whose certificate comes from another CA is refused (both directions: it cannot link to us and we
do not link to it); a peer with a good certificate but another cluster's id is refused; a plaintext
client and, with ``client_auth = true``, a TLS client without a certificate are refused; with
``client_auth = false`` certificate-less TLS clients work while peer links keep mutual TLS on their
own listener. Without ``[tls]`` everything stays plaintext (the local default).

Every server runs ``okapikv.serve.app.serve`` in this process (no interpreter start-up per
server), each with its own stop event, and is stopped in a ``finally``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from integration_support import free_port_range
from tls_support import CertificateAuthority, Issued

from okapikv.client import AsyncClient, Client
from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.cluster.launcher import READY_LINE
from okapikv.errors import Unavailable
from okapikv.serve.app import serve
from okapikv.tls import ClientTls, TlsConfig, client_ssl_context, open_aio_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.frames import MAGIC, FrameDecoder, encode_frame

TIMEOUT_S = 30.0


@dataclasses.dataclass
class Pki:
    ca: CertificateAuthority
    server: Issued
    client: Issued
    other_ca: CertificateAuthority
    other_server: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.create(directory, "cluster")
    other = CertificateAuthority.create(directory, "intruder")
    return Pki(ca, ca.issue("server"), ca.issue("client", server=False), other, other.issue("server"))


def _config(tls: TlsConfig | None, *, dcs: tuple[str, ...] = ("east", "west"), metrics: bool = False,
            cluster_id: str = "tls-test") -> ClusterConfig:
    count = len(dcs)
    needs_peer_ports = tls is not None and not tls.client_auth
    base = free_port_range(count * (2 if needs_peer_ports else 1))
    return local_cluster(dcs=dcs, partitions=1, wan="off", base_port=base, cluster_id=cluster_id, tls=tls,
                         metrics_base_port=free_port_range(count) if metrics else 0)


@asynccontextmanager
async def running(*servers: tuple[ClusterConfig, int]) -> AsyncIterator[None]:
    """Serve (config, dc index) pairs (partition 0) until the block ends."""
    stops = [asyncio.Event() for _ in servers]
    tasks = [asyncio.create_task(serve(config, dc, 0, stop=stop)) for (config, dc), stop in zip(servers, stops,
                                                                                                 strict=True)]
    try:
        await asyncio.sleep(0.2)
        for task in tasks:
            if task.done():
                task.result()  # surface a start-up failure (bind error, unreadable certificate)
        # In memory, a server serves once its replicas have answered (or after a few seconds, for
        # one it cannot reach): wait for health, as a launcher does.
        for config, dc in servers:
            tls = config.tls.client_side() if config.tls is not None else None
            assert await asyncio.to_thread(wait_until_serving, [config.servers[dc].address], 30, tls=tls) == []
        yield
    finally:
        for stop in stops:
            stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=TIMEOUT_S)


def _stub(channel: grpc.aio.Channel) -> Any:
    return pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]


async def _refused(address: str, tls: ClientTls | None) -> grpc.StatusCode:
    """The status of a Put through a channel with ``tls`` (plaintext if None) that must fail."""
    async with open_aio_channel(address, tls) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _stub(channel).Put(pb.PutRequest(key=b"k", value=b"nope"), timeout=3)
    return raised.value.code()


async def _eventually(probe: Callable[[], Awaitable[Any]], timeout_s: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = await probe()
        if result:
            return result
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def _link(channel: grpc.aio.Channel) -> Any:
    return channel.stream_stream("/okapikv.Peer/Link", request_serializer=pb.PeerBatch.SerializeToString,
                                 response_deserializer=pb.LinkAck.FromString)


def _heartbeat_batch(cluster_id: str, source_dc: int) -> pb.PeerBatch:
    batch = pb.PeerBatch(cluster_id=cluster_id, source=pb.ServerRef(dc=source_dc, partition=0), incarnation=7,
                         first_sequence=1)
    batch.messages.add().heartbeat.timestamp = (1 << 63)
    return batch


async def _link_status(channel: grpc.aio.Channel, batch: pb.PeerBatch) -> grpc.StatusCode:
    async def requests() -> AsyncIterator[pb.PeerBatch]:
        yield batch

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        async for _ in _link(channel)(requests(), timeout=3):
            pass
    return raised.value.code()


def test_mutual_tls_cluster(pki: Pki, tmp_path: Path) -> None:
    config = _config(pki.ca.server_tls(pki.server), metrics=True)
    east, west = (server.address for server in config.servers)
    good = pki.ca.client_tls(pki.client)

    async def main() -> None:
        async with running((config, 0), (config, 1)), open_aio_channel(east, good) as to_east, \
                open_aio_channel(west, good) as to_west:
            # A client with a certificate of the cluster's CA works, and peers replicate over mTLS.
            reply = await _stub(to_east).Put(pb.PutRequest(key=b"greeting", value=b"hello"), timeout=TIMEOUT_S)
            assert reply.timestamp > 0

            async def replicated() -> bool:
                answer = await _stub(to_west).Get(pb.GetRequest(key=b"greeting"), timeout=5)
                return answer.found and answer.value == b"hello"

            await _eventually(replicated)
            stats = json.loads((await _stub(to_west).Stats(pb.StatsRequest(), timeout=5)).json)
            assert all(link["connected"] for link in stats["links"].values()) and stats["links"]

            # The client library takes the same TLS options (async and blocking clients).
            async with AsyncClient(east, tls=good, timeout_s=10) as client:
                await client.put(b"library", b"async")
                assert await client.get(b"library") == b"async"
            assert await asyncio.to_thread(_sync_client_get, west, good, b"greeting") == b"hello"
            # Both went through the native port, which speaks TLS by the same rules.
            for channel in (to_east, to_west):
                driver = json.loads((await _stub(channel).Stats(pb.StatsRequest(), timeout=5)).json)["driver"]
                assert driver["native_connections"] >= 1
            native_port = (await _stub(to_east).ClusterInfo(pb.ClusterInfoRequest(), timeout=5)).native_port
            assert await asyncio.to_thread(_native_answers, east, native_port, client_ssl_context(good))
            assert not await asyncio.to_thread(_native_answers, east, native_port,
                                               client_ssl_context(pki.ca.client_tls()))
            with pytest.raises(Unavailable):
                async with AsyncClient(east, tls=pki.ca.client_tls(), timeout_s=1) as client:
                    await client.get(b"library")

            # Refused: plaintext, TLS without a certificate, a certificate from another CA.
            assert await _refused(east, None) == grpc.StatusCode.UNAVAILABLE
            assert await _refused(east, pki.ca.client_tls()) == grpc.StatusCode.UNAVAILABLE
            intruder = ClientTls(ca=str(pki.ca.path), certificate=str(pki.other_server.certificate),
                                 key=str(pki.other_server.key))
            assert await _refused(east, intruder) == grpc.StatusCode.UNAVAILABLE

            # A peer presenting another CA's certificate never gets to send a batch ...
            async with open_aio_channel(east, intruder) as channel:
                assert await _link_status(channel, _heartbeat_batch(config.cluster_id, 1)) == \
                    grpc.StatusCode.UNAVAILABLE
            # ... and one with a good certificate but another cluster's id is refused by the service.
            async with open_aio_channel(east, good) as channel:
                assert await _link_status(channel, _heartbeat_batch("another-cluster", 1)) == \
                    grpc.StatusCode.PERMISSION_DENIED
            stats = json.loads((await _stub(to_east).Stats(pb.StatsRequest(), timeout=5)).json)
            assert max(stats["vv"]) < (1 << 63)  # neither heartbeat reached the core

            # The metrics endpoint speaks TLS too and wants a client certificate.
            metrics_address = config.servers[0].metrics_address
            assert metrics_address is not None
            body = await asyncio.to_thread(_scrape, metrics_address, client_ssl_context(good))
            assert 'okapi_operations_total{dc="east",operation="put",partition="0"} 2.0' in body
            stabilization = [line for line in body.splitlines() if line.startswith("okapi_stabilization_bytes_total")]
            assert float(stabilization[0].rsplit(" ", 1)[1]) > 0  # Okapi's GSV/USV rounds
            with pytest.raises((ssl.SSLError, OSError)):
                await asyncio.to_thread(_scrape, metrics_address, client_ssl_context(pki.ca.client_tls()))

            # `okapi status` finds the TLS identity in the config file and shows both servers up.
            path = config.dump(tmp_path / "cluster.toml")
            status = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "okapikv.cli", "status",
                                                              "--config", str(path), "--json"],
                                             capture_output=True, text=True, timeout=60)
            assert status.returncode == 0, status.stdout + status.stderr
            assert [s["reachable"] for s in json.loads(status.stdout)["servers"]] == [True, True]

    asyncio.run(main())


def _sync_client_get(address: str, tls: ClientTls, key: bytes) -> bytes | None:
    with Client(address, tls=tls, timeout_s=10) as client:
        return client.get(key)


def _native_answers(address: str, port: int, context: ssl.SSLContext) -> bool:
    """Whether a GET sent over TLS to the native port is answered (False: refused, no certificate)."""
    host = address.rpartition(":")[0]
    batch = pb.OperationBatch()
    batch.operations.add(id=1).get.key = b"greeting"
    try:
        with socket.create_connection((host, port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=host) as connection:
            connection.sendall(MAGIC + encode_frame(batch.SerializeToString()))
            return bool(FrameDecoder().feed(connection.recv(65536)))
    except OSError:  # ssl.SSLError included: the handshake or the first read failed
        return False


def _scrape(address: str, context: ssl.SSLContext) -> str:
    with urllib.request.urlopen(f"https://{address}/metrics", context=context, timeout=5) as response:
        return str(response.read().decode())


def test_a_server_with_another_cas_certificate_is_not_a_peer(pki: Pki) -> None:
    """East runs with the cluster's CA, west with an intruder's: neither link comes up, and no
    update or heartbeat of either side reaches the other's core."""
    config = _config(pki.ca.server_tls(pki.server))
    impostor = dataclasses.replace(config, tls=pki.other_ca.server_tls(pki.other_server))
    east, west = (server.address for server in config.servers)

    async def main() -> None:
        async with running((config, 0), (impostor, 1)), \
                open_aio_channel(east, pki.ca.client_tls(pki.client)) as to_east, \
                open_aio_channel(west, pki.other_ca.client_tls(pki.other_server)) as to_west:
            await _stub(to_east).Put(pb.PutRequest(key=b"secret", value=b"east"), timeout=TIMEOUT_S)
            await _stub(to_west).Put(pb.PutRequest(key=b"forged", value=b"west"), timeout=TIMEOUT_S)

            # Trusted peers connect within a few reconnect attempts (100 ms backoff): give these 1.5 s.
            await asyncio.sleep(1.5)
            for channel, remote in ((to_east, 1), (to_west, 0)):
                stats = json.loads((await _stub(channel).Stats(pb.StatsRequest(), timeout=5)).json)
                assert stats["links"] and not any(link["connected"] for link in stats["links"].values())
                assert stats["vv"][remote] == 0, stats["vv"]
                assert stats["core"]["replicated_updates_received"] == 0

    asyncio.run(main())


def test_client_auth_off_keeps_mutual_tls_for_peers(pki: Pki) -> None:
    config = _config(pki.ca.server_tls(pki.server, client_auth=False))
    assert all(server.peer_address for server in config.servers)
    east, west = (server.address for server in config.servers)
    anonymous = pki.ca.client_tls()  # trusts the CA, presents no certificate

    async def main() -> None:
        async with running((config, 0), (config, 1)), open_aio_channel(east, anonymous) as to_east, \
                open_aio_channel(west, anonymous) as to_west:
            await _stub(to_east).Put(pb.PutRequest(key=b"open", value=b"door"), timeout=TIMEOUT_S)

            async def replicated() -> bool:
                answer = await _stub(to_west).Get(pb.GetRequest(key=b"open"), timeout=5)
                return answer.found

            await _eventually(replicated)  # peer links run over the mutual-TLS peer listeners
            assert await _refused(east, None) == grpc.StatusCode.UNAVAILABLE  # still TLS only
            # The client port lets a certificate-less caller in, but not onto the peer service.
            assert await _link_status(to_east, _heartbeat_batch(config.cluster_id, 1)) == \
                grpc.StatusCode.UNAUTHENTICATED
            # And the peer listener demands a certificate at the handshake.
            peer_address = config.servers[0].peer_address
            assert peer_address is not None
            async with open_aio_channel(peer_address, anonymous) as channel:
                assert await _link_status(channel, _heartbeat_batch(config.cluster_id, 1)) == \
                    grpc.StatusCode.UNAVAILABLE

    asyncio.run(main())


def test_tls_is_off_by_default() -> None:
    config = local_cluster()
    assert config.tls is None and "[tls]" not in config.to_toml()
    assert all(server.peer_address is None and server.metrics_port == 0 for server in config.servers)
    plain = _config(None)
    east = plain.servers[0].address

    async def main() -> None:
        async with running((plain, 0), (plain, 1)), open_aio_channel(east) as channel:
            reply = await _stub(channel).Put(pb.PutRequest(key=b"k", value=b"v"), timeout=TIMEOUT_S)
            assert reply.timestamp > 0

    asyncio.run(main())


def test_unreadable_certificate_fails_at_start(pki: Pki, tmp_path: Path) -> None:
    broken = TlsConfig(str(pki.ca.path), str(tmp_path / "missing.pem"), str(pki.server.key))
    config = _config(broken)
    path = config.dump(tmp_path / "cluster.toml")
    result = subprocess.run([sys.executable, "-m", "okapikv.cli", "server", "--config", str(path), "--dc", "east",
                             "--partition", "0", "--in-memory"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "tls certificate" in result.stderr and "missing.pem" in result.stderr


def test_okapi_up_client_and_status_with_tls(pki: Pki, tmp_path: Path) -> None:
    """`okapi up --tls-*` writes the [tls] section, health-checks its servers over mutual TLS, and
    `okapi client` and `okapi status` find the TLS identity in the local cluster's config."""
    okapi = [sys.executable, "-m", "okapikv.cli"]
    environment = dict(os.environ, OKAPI_HOME=str(tmp_path), PYTHONUNBUFFERED="1")
    base = free_port_range(4)  # two servers and their RESP ports
    launcher = subprocess.Popen(
        [*okapi, "up", "--dcs", "a,b", "--partitions", "1", "--wan", "off", "--base-port", str(base),
         "--metrics-base-port", str(free_port_range(2)), "--tls-ca", str(pki.ca.path),
         "--tls-cert", str(pki.server.certificate), "--tls-key", str(pki.server.key)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    output: list[str] = []
    try:
        assert launcher.stdout is not None
        for line in launcher.stdout:
            output.append(line.rstrip("\n"))
            if line.startswith(READY_LINE) or len(output) > 50:
                break
        assert READY_LINE in output, "\n".join(output)
        assert ClusterConfig.load(tmp_path / "cluster.toml").tls is not None
        client = subprocess.run([*okapi, "client", "--dc", "b"], input="PUT k v\nGET k\nSTOP\n",
                                capture_output=True, text=True, timeout=60, env=environment)
        assert client.returncode == 0, client.stdout + client.stderr
        assert client.stdout.splitlines()[:2] == ["PUT k not_found", "GET k v"]
        plaintext = subprocess.run([*okapi, "client", "--connect", f"127.0.0.1:{base}", "--timeout-s", "1"],
                                   input="GET k\n", capture_output=True, text=True, timeout=60, env=environment)
        assert plaintext.returncode == 1 and "needs TLS: pass --tls-ca" in plaintext.stderr
        status = subprocess.run([*okapi, "status", "--json"], capture_output=True, text=True, timeout=60,
                                env=environment)
        assert status.returncode == 0, status.stdout + status.stderr
        assert [s["reachable"] for s in json.loads(status.stdout)["servers"]] == [True, True]
    finally:
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()
