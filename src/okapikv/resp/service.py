"""The RESP port of one partition server: its listener, connections and forwarding client.

Why in the server rather than a gateway process per DC: a command on a key of the server's own
partition, a read-only transaction and a range read reach the core of the server that holds the
connection with no hop in between (``okapikv.resp.operations``), and the core coordinates snapshot
reads over the DC's partitions itself; only a single-key command on a key of another partition
takes one hop inside the DC, the hop a client library would make anyway. A gateway would add a hop
(two messages, a second event loop and its process's CPU) to every command, and on a small machine
that process competes with the servers for the same cores.

Each server listens on its ``resp_port`` (0: any free port) on the host of its address, with TLS
when the cluster has a ``[tls]`` section (client certificates when ``client_auth`` is on), as the
native port does. The forwarding client is an ``AsyncClient`` of the server's own DC, made on the
first command that needs another partition (the other servers may start later than this one).
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import time

from okapikv.client.aio import AsyncClient
from okapikv.resp.batch import CoreBatch
from okapikv.resp.commands import Executor, ServerFacts
from okapikv.resp.connection import RespConnection
from okapikv.resp.cursors import CursorTable
from okapikv.resp.limits import RespLimits
from okapikv.resp.operations import SessionOperations
from okapikv.resp.parser import hiredis_preferred
from okapikv.server.node import PartitionNode
from okapikv.server.node_figures import stable_lag_ms
from okapikv.tls import ClientTls


class RespService:
    """Shared by the connections of one server's RESP port."""

    def __init__(self, node: PartitionNode, limits: RespLimits, *, durable: bool, tls: ClientTls | None = None,
                 prefer_hiredis: bool | None = None) -> None:
        """``prefer_hiredis``: None takes the choice of ``OKAPI_RESP_PARSER`` (``okapikv.resp.parser``)."""
        self.node = node
        self.limits = limits
        self.prefer_hiredis = hiredis_preferred() if prefer_hiredis is None else prefer_hiredis
        self._tls = tls
        self._durable = durable
        self._ids = itertools.count(1)
        self.connections: dict[int, RespConnection] = {}
        self.port = 0
        self._started_at = time.monotonic()
        self._facts: ServerFacts | None = None
        self._forwarder: AsyncClient | None = None
        self._forwarder_lock = asyncio.Lock()
        self._server: asyncio.Server | None = None
        self._batch: CoreBatch | None = None
        self.cursors = CursorTable()  # SCAN cursors of long keys, shared by this port's connections

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Listen on ``host:port`` (0: any free port); the port listened on."""
        loop = asyncio.get_running_loop()
        self._batch = CoreBatch(self.node, loop)
        self._server = await loop.create_server(lambda: RespConnection(self), host, port, ssl=ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections.values()):
            connection.close()
        if self._forwarder is not None:
            await self._forwarder.close()

    # ------------------------------------------------------------------ connections

    @property
    def batch(self) -> CoreBatch:
        """The core requests of this port's connections, handed to the core once per loop turn."""
        assert self._batch is not None, "started"
        return self._batch

    def register(self, connection: RespConnection) -> int:
        number = next(self._ids)
        self.connections[number] = connection
        self.node.resp_connections += 1
        return number

    def unregister(self, connection: RespConnection) -> None:
        self.connections.pop(connection.id, None)

    def executor(self, connection_id: int, peer: str, local: str) -> Executor:
        operations = SessionOperations(self.node, self.forwarder)
        return Executor(operations, self.facts, connection_id, peer, local, stable_lag_ms=self.stable_lag_ms,
                        connected_clients=lambda: len(self.connections), adopt_wait_s=self.limits.adopt_wait_s,
                        max_key_bytes=self.node.config.max_key_bytes, max_read_keys=self.node.core.config.max_read_keys,
                        cursors=self.cursors)

    @property
    def facts(self) -> ServerFacts:
        if self._facts is None:
            node = self.node
            config = node.config
            self._facts = ServerFacts(
                dc=node.id.dc, dc_names=config.dcs, partition=node.id.partition, partitions=config.partitions,
                protocol=config.protocol, cluster_id=config.cluster_id, port=self.port, durable=self._durable,
                max_bulk_bytes=self.limits.max_bulk_bytes, max_key_bytes=config.max_key_bytes,
                started_at=self._started_at)
        return self._facts

    # ------------------------------------------------------------------ what commands ask of the server

    async def forwarder(self) -> AsyncClient:
        """The client that forwards single-key operations to the DC's other partitions."""
        if self._forwarder is not None:
            return self._forwarder
        async with self._forwarder_lock:
            if self._forwarder is None:
                node = self.node
                client = AsyncClient(node.server_config.address, timeout_s=self.limits.forward_timeout_s,
                                     tls=self._tls, native=node.config.native)
                try:
                    await client.connect()
                except BaseException:
                    await client.close()
                    raise
                self._forwarder = client
            return self._forwarder

    def stable_lag_ms(self) -> list[float | None]:
        """How far this server's stable vector lags its clock, per DC (INFO replication)."""
        node = self.node
        return list(stable_lag_ms(node.core, node.clock.now_us()))
