"""The gRPC server process of one partition server: services, health checking, signals.

The server binds only its own address from the cluster config (its ``bind`` address where that
differs from the one peers dial), so the same config file serves a loopback cluster and a multi-host
one. ``SO_REUSEPORT`` is turned off: two servers configured with
the same port must fail loudly instead of silently sharing connections.

Message-size limits: the largest message a server accepts is the config's ``max_message_bytes``
(at least one maximal operation plus overhead, see ``okapikv.cluster.config``). Values above
``max_value_bytes`` but within the message limit reach the core and are refused with
INVALID_ARGUMENT; larger messages are refused by gRPC with RESOURCE_EXHAUSTED.

Shutdown (SIGINT/SIGTERM): health turns NOT_SERVING, outgoing peer links close, the server stops
accepting and gives in-flight calls a moment (``SHUTDOWN_GRACE_S``), and the process exits 0.

Listeners (all from the config): ``address`` for clients (and peers, unless the server has a
``peer_address``, then a second port serves peer links); ``metrics_port`` on the host of
``address`` for Prometheus; unless ``native = false``, the native port (``okapikv.server.native``)
on the host of ``address``, ``native_port`` or any free port, advertised through ClusterInfo;
unless ``resp = false``, the Redis-protocol port (``okapikv.resp``) on the host of ``address``,
``resp_port`` or any free port, shown in Stats. With a ``[tls]`` section every one of them speaks TLS only; the peer
listener always demands a client certificate, the client one when ``client_auth`` is on
(``okapikv.tls``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Coroutine
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from okapikv import compiled
from okapikv import tls as tls_support
from okapikv.cluster.config import ClusterConfig
from okapikv.resp.limits import RespLimits
from okapikv.resp.service import RespService
from okapikv.serve.collector import FreezeOnGrowth
from okapikv.serve.hugepages import HeapAdvisor
from okapikv.server import collector_clock, faults
from okapikv.server.admin import AdminServicer
from okapikv.server.inbound import PeerIntake
from okapikv.server.metrics import MetricsServer, registry_for
from okapikv.server.native import start_native
from okapikv.server.node import PartitionNode
from okapikv.server.servicers import KeyValueServicer, PeerServicer
from okapikv.server.watchdog import DEFAULT_THRESHOLD_S, LoopWatchdog, log_stall
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

log = logging.getLogger("okapikv.server")

SHUTDOWN_GRACE_S = 1.0
SERVICE_NAMES = ("", "okapikv.KeyValue", "okapikv.Peer")
#: How often health looks again whether a start with no data has heard from its replicas.
CHECKING_POLL_S = 0.02
#: The collector's thresholds in a server (CPython's default: 700, 10, 10). A request's objects live
#: across thousands of allocations (a durable write waits for its group's fdatasync), so at 700 they
#: outlive the young collections and count towards the next full pass, which walks the whole store:
#: with 1,000,000 versions bulk-loaded, 26-28 full passes and 5.5-7.5 s of them in a run of the load
#: and 5 s of YCSB-A; with a young generation of 50,000 those objects die young, 0-1 full pass
#: (docs/benchmarks.md, "Checkpoints out of the server process, and disk use under overwrites").
GC_THRESHOLDS = (50_000, 20, 10)


class BindError(RuntimeError):
    """The server could not listen on its configured address."""


def server_options(config: ClusterConfig) -> list[tuple[str, int]]:
    """The gRPC port's limits (docs/operations.md, "Connections"): a message above
    ``max_message_bytes`` is refused at its length prefix (RESOURCE_EXHAUSTED); a connection that
    has not finished its HTTP/2 (and TLS) handshake ``first_frame_timeout_ms`` after connecting is
    closed; one with no call for ``idle_timeout_ms`` is sent GOAWAY (clients reconnect when they
    next need to); keepalive pings every ``tcp_keepalive_ms`` find a dead client, which
    ``tcp_user_timeout_ms`` bounds (gRPC applies TCP_USER_TIMEOUT itself). gRPC has no deadline
    for finishing a message and no server-wide bound on partial ones (``okapikv.server.budgets``
    covers the native port): a slow sender holds at most ``max_message_bytes`` per call."""
    connections = config.connections
    options = [
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.server_handshake_timeout_ms", round(connections.first_frame_timeout_ms)),
        ("grpc.keepalive_time_ms", round(connections.tcp_keepalive_ms)),
        ("grpc.keepalive_timeout_ms", round(connections.tcp_user_timeout_ms)),
    ]
    if connections.idle_timeout_ms:
        options.append(("grpc.max_connection_idle_ms", round(connections.idle_timeout_ms)))
    return options


def _add_port(server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None) -> None:
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError as error:
        raise BindError(f"cannot listen on {address}: {error}") from None
    if port == 0:
        raise BindError(f"cannot listen on {address} (address in use or not local)")


async def _start_metrics(node: PartitionNode, port: int) -> MetricsServer | None:
    """The Prometheus endpoint on the host of the server's address (None when ``port`` is 0)."""
    if not port:
        return None
    config = node.config
    host = node.server_config.listen_host
    context = None
    if config.tls is not None:
        context = tls_support.server_ssl_context(config.tls, require_client_auth=config.tls.client_auth)
    metrics = MetricsServer(registry_for(node), host, port, context)
    try:
        await metrics.start()
    except OSError as error:
        raise BindError(f"cannot serve metrics on {host}:{port}: {error.strerror or error}") from None
    return metrics


async def _start_native(node: PartitionNode, intake: PeerIntake) -> asyncio.Server | None:
    """The native port (None with ``native = false``); sets ``node.native_port`` for ClusterInfo."""
    config = node.config
    if not config.native:
        return None
    host = node.server_config.listen_host
    port = node.server_config.native_port
    context = None
    if config.tls is not None:
        context = tls_support.server_ssl_context(config.tls, require_client_auth=config.tls.client_auth)
    try:
        listener = await start_native(node, intake, host, port, context)
    except OSError as error:
        raise BindError(f"cannot serve the native port on {host}:{port}: {error.strerror or error}") from None
    node.native_port = listener.sockets[0].getsockname()[1]
    return listener


async def _start_resp(node: PartitionNode, durable: bool) -> RespService | None:
    """The Redis-protocol port (None with ``resp = false``); sets ``node.resp_port`` for Stats."""
    config = node.config
    if not config.resp:
        return None
    host = node.server_config.listen_host
    port = node.server_config.resp_port
    context = None
    if config.tls is not None:
        context = tls_support.server_ssl_context(config.tls, require_client_auth=config.tls.client_auth)
    service = RespService(node, RespLimits.from_config(config, node.core.config.max_read_keys), durable=durable,
                          tls=config.tls.client_side() if config.tls is not None else None)
    try:
        node.resp_port = await service.start(host, port, context)
    except OSError as error:
        raise BindError(f"cannot serve the RESP port on {host}:{port}: {error.strerror or error}") from None
    return service


def _start_watchdog(node: PartitionNode, threshold_s: float) -> LoopWatchdog | None:
    """The event-loop watchdog, counting into the node's ``event_loop_stalls`` and
    ``event_loop_stall_seconds`` (None when off, or where it cannot run: said in the log)."""
    if not threshold_s:
        return None

    def stalled(held_s: float, computed_s: float, site: str | None) -> None:
        node.event_loop_stalls += 1
        node.event_loop_stall_seconds += held_s
        log_stall(held_s, computed_s, site, threshold_s)

    watchdog = LoopWatchdog(asyncio.get_running_loop(), threshold_s, stalled)
    try:
        watchdog.start()
    except RuntimeError as error:
        log.info("%s: no event-loop watchdog: %s", node.label, error, extra={"event": "watchdog_off"})
        return None
    return watchdog


async def serve(
    config: ClusterConfig, dc: int, partition: int, stop: asyncio.Event | None = None, *,
    metrics_port: int | None = None, data_dir: str | None = None, repair: bool = False,
    integrity: str = "quick", disk_reserve_bytes: int | None = None, loop_stall_s: float = DEFAULT_THRESHOLD_S,
) -> None:
    """Run the server until ``stop`` is set (or SIGINT/SIGTERM when ``stop`` is None).

    ``loop_stall_s``: the event-loop watchdog's threshold (``okapikv.server.watchdog``; 0: off).
    ``metrics_port`` overrides the config's (0: no metrics endpoint); ``repair``, ``integrity`` and
    ``disk_reserve_bytes`` go to the storage (``PartitionNode``). Raises ``BindError`` when a
    listener cannot bind, ``ValueError`` when a TLS file cannot be read, and
    ``okapikv.storage.DataDirError`` (or its subclasses) when the data directory cannot be used."""
    tls = config.tls
    server_config = config.server(dc, partition)
    client_credentials = peer_listener_credentials = peer_credentials = None
    if tls is not None:
        client_credentials = tls_support.server_credentials(tls, require_client_auth=tls.client_auth)
        peer_listener_credentials = tls_support.server_credentials(tls, require_client_auth=True)
        peer_credentials = tls_support.channel_credentials(tls.client_side())
    # With ``data_dir`` this recovers the store (``okapikv.storage.DataDirError`` if it cannot).
    node = PartitionNode(config, dc, partition, peer_credentials=peer_credentials, data_dir=data_dir, repair=repair,
                         integrity=integrity, disk_reserve_bytes=disk_reserve_bytes)
    intake = PeerIntake(node)  # every incoming peer link, whichever port carries it
    server = grpc.aio.server(options=server_options(config))
    pb_grpc.add_KeyValueServicer_to_server(KeyValueServicer(node), server)  # type: ignore[no-untyped-call]
    pb_grpc.add_PeerServicer_to_server(PeerServicer(intake), server)  # type: ignore[no-untyped-call]
    pb_grpc.add_AdminServicer_to_server(AdminServicer(node), server)  # type: ignore[no-untyped-call]
    health = HealthServicer()
    await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)  # it starts out SERVING
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    faults.register(server, node)  # only with OKAPI_FAULT_INJECTION=1 (tests)
    address = server_config.address
    _add_port(server, server_config.listen_address, client_credentials)
    peer_listen = server_config.peer_listen_address
    if peer_listen:
        _add_port(server, peer_listen, peer_listener_credentials)
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signal_number, stop.set)
    # The node starts before the server accepts calls: its catch-up requests must be the first
    # messages this incarnation sends to each replica (``PartitionNode.start``).
    node.start()
    await server.start()
    native: asyncio.Server | None = None
    resp: RespService | None = None
    try:
        native = await _start_native(node, intake)
        resp = await _start_resp(node, durable=data_dir is not None)
        metrics = await _start_metrics(node, server_config.metrics_port if metrics_port is None else metrics_port)
    except BindError:
        if native is not None:
            native.close()
        if resp is not None:
            await resp.close()
        await server.stop(None)
        await node.close()
        raise
    # Everything allocated so far (modules, config, a recovered store) lives as long as the
    # process: out of the collector's sight, a full collection no longer walks it (28 ms pauses,
    # the p999 of a loaded server, came from that walk).
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    collector_clock.CLOCK.install()  # the collector's passes and seconds, in Stats
    # ... and what the store gains while serving (a bulk load), once it gained enough (collector.py)
    # ... and the heap on huge pages where it is in memory (hugepages.py: a large store's TLB misses)
    freezing = asyncio.create_task(FreezeOnGrowth(lambda: node.core.store.version_count,
                                                  on_freeze=HeapAdvisor().collapse,
                                                  activity=lambda: node.core.store.collected_count).run())
    serving = asyncio.create_task(_serving_once_checked(node, health))
    running = compiled.loaded()  # a figure measured on a compiled server is not the default install's
    log.info("%s runs %s", node.label, compiled.describe(running), extra={"event": "build", "compiled": running})
    log.info("%s (%s, %s) listening on %s", node.label, config.protocol, config.cluster_id, address,
             extra={"event": "listening", "address": address, "bind": server_config.listen_address,
                    "peer_address": server_config.peer_address,
                    "metrics_port": metrics.port if metrics else 0, "native_port": node.native_port,
                    "resp_port": node.resp_port,
                    "tls": tls is not None,
                    "client_auth": bool(tls and tls.client_auth)})
    watchdog = _start_watchdog(node, loop_stall_s)
    try:
        await stop.wait()
    finally:
        if watchdog is not None:
            watchdog.close()
        log.info("%s shutting down", node.label, extra={"event": "shutting_down"})
        serving.cancel()
        freezing.cancel()
        if metrics is not None:
            await metrics.close()
        if native is not None:
            native.close()
        if resp is not None:
            await resp.close()
        await health.enter_graceful_shutdown()
        # Close our links first: peers shutting down at the same time then see their incoming
        # streams end at once instead of waiting out the grace period.
        await node.close()
        await server.stop(SHUTDOWN_GRACE_S)
        gc.set_threshold(*thresholds)  # (a server run in process, as tests do, leaves the collector as it was)
        collector_clock.CLOCK.remove()


async def _serving_once_checked(node: PartitionNode, health: HealthServicer) -> None:
    """Health turns SERVING once a start with no data has heard from every replica that it lost
    nothing (``PartitionNode.checking``): a launcher waiting for health does not declare a cluster
    ready whose servers would refuse their first requests."""
    while node.checking:
        await asyncio.sleep(CHECKING_POLL_S)
    for name in SERVICE_NAMES:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (faster timers and I/O), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main)
