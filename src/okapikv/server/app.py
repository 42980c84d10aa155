"""The gRPC server process of one partition server: services, health checking, signals.

The server binds only its own address from the cluster config, so the same config file serves a
loopback cluster and a multi-host one. ``SO_REUSEPORT`` is turned off: two servers configured with
the same port must fail loudly instead of silently sharing connections.

Message-size limits: the largest message a server accepts is the config's ``max_message_bytes``
(at least one maximal operation plus overhead, see ``okapikv.cluster.config``). Values above
``max_value_bytes`` but within the message limit reach the core and are refused with
INVALID_ARGUMENT; larger messages are refused by gRPC with RESOURCE_EXHAUSTED.

Shutdown (SIGINT/SIGTERM): health turns NOT_SERVING, outgoing peer links close, the server stops
accepting and gives in-flight calls a moment (``SHUTDOWN_GRACE_S``), and the process exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from okapikv.cluster.config import ClusterConfig
from okapikv.server.node import PartitionNode
from okapikv.server.servicers import KeyValueServicer, PeerServicer
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

log = logging.getLogger("okapikv.server")

SHUTDOWN_GRACE_S = 1.0
SERVICE_NAMES = ("", "okapikv.KeyValue", "okapikv.Peer")


class BindError(RuntimeError):
    """The server could not listen on its configured address."""


def server_options(config: ClusterConfig) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_ping_strikes", 0),
    ]


async def serve(config: ClusterConfig, dc: int, partition: int, stop: asyncio.Event | None = None) -> None:
    """Run the server until ``stop`` is set (or SIGINT/SIGTERM when ``stop`` is None)."""
    node = PartitionNode(config, dc, partition)
    server = grpc.aio.server(options=server_options(config))
    pb_grpc.add_KeyValueServicer_to_server(KeyValueServicer(node), server)  # type: ignore[no-untyped-call]
    pb_grpc.add_PeerServicer_to_server(PeerServicer(node), server)  # type: ignore[no-untyped-call]
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    address = node.server_config.address
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as error:
        raise BindError(f"cannot listen on {address}: {error}") from None
    if port == 0:
        raise BindError(f"cannot listen on {address} (address in use or not local)")
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signal_number, stop.set)
    await server.start()
    node.start()
    for name in SERVICE_NAMES:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("%s (%s, %s) listening on %s", node.label, config.protocol, config.cluster_id, address)
    try:
        await stop.wait()
    finally:
        log.info("%s shutting down", node.label)
        await health.enter_graceful_shutdown()
        # Close our links first: peers shutting down at the same time then see their incoming
        # streams end at once instead of waiting out the grace period.
        await node.close()
        await server.stop(SHUTDOWN_GRACE_S)


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (faster timers and I/O), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main)
